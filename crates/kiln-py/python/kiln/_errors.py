"""kiln's exception hierarchy (raised by the native module; see ``kiln.KilnError``)."""


class KilnError(Exception):
    """Base class of every error kiln raises."""


class OutOfMemoryError(KilnError, MemoryError):
    """Device (or budgeted host) memory ran out even after kiln emptied its cache.

    Not sticky: free tensors, call ``kiln.empty_cache()``, reduce the batch and retry.
    """


class DeviceFaultError(KilnError):
    """A sticky CUDA error (illegal address, launch failure, device assert, ...).

    The CUDA context is poisoned for the life of the process: every later GPU call fails.
    Restart the process (run GPU work in a supervised worker process to survive this).
    """


class InvalidInputError(KilnError, ValueError):
    """An argument kiln rejects: shape, dtype, kernel, mode, option parameters, ..."""


class NoDeviceError(KilnError):
    """No usable CUDA device (no driver, no device, policy, NVRTC missing, ...).

    ``kiln.Runtime("auto")`` falls back to the CPU instead of raising this. The attribute
    ``no_gpu`` is ``True`` where the reason is that this machine has no GPU (no NVIDIA
    driver, or a driver that reports no device), ``False`` for a fault of a machine that has
    one (a driver that fails to start, NVRTC missing, a policy that allows no device).
    """

    no_gpu: bool = False


def warn_at_caller(message, category=UserWarning):
    """``warnings.warn`` attributed to the first frame outside the kiln package (the user's
    line), however deep inside kiln the warning is raised."""
    import os
    import sys
    import warnings

    pkg = os.path.dirname(os.path.abspath(__file__))
    level, f = 2, sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == pkg:
        f, level = f.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
