"""The errors of ``kiln.RawKernel`` and ``kiln.RawModule``, with CuPy's names and attributes.

``CompileException`` (NVRTC could not compile a source; the message is NVRTC's log) and
``CUDADriverError`` (a CUDA driver call failed; ``str(e)`` starts ``CUDA_ERROR_NAME:
description`` and ``e.status`` is the code) are kiln errors (``KilnError``) that work without
CuPy. Where CuPy is loaded (``import cupy`` ran), the instances kiln raises are also
instances of ``cupy.cuda.compiler.CompileException`` and ``cupy.cuda.driver.CUDADriverError``,
so code written against CuPy (``except cupy.cuda.driver.CUDADriverError``,
``pytest.raises(cupy.cuda.compiler.CompileException)``) catches them unchanged: a CuPy user
changes the kernel class's import and nothing else.
"""

from __future__ import annotations

import importlib
import math
import sys

from ._errors import DeviceFaultError, KilnError, OutOfMemoryError


class CompileException(KilnError):
    """NVRTC could not compile a kernel's source, as ``cupy.cuda.compiler.CompileException``:
    the message (``str(e)``, ``e.get_message()``) holds NVRTC's log with line numbers;
    ``source``, ``name`` (the file name in the log) and ``options`` say what was compiled,
    and ``dump(f)`` writes them with numbered source lines."""

    def __init__(self, msg, source=None, name=None, options=(), backend="nvrtc"):
        # not super().__init__: with CuPy's class among the bases, its __init__ is next
        Exception.__init__(self, msg)
        self._msg = msg
        self.source = source
        self.name = name
        self.options = tuple(options)
        self.backend = backend

    def __str__(self):
        return self._msg

    def __repr__(self):
        return str(self)

    def __reduce__(self):
        return (_compile_error, (self._msg, self.source, self.name, self.options))

    def get_message(self):
        """The message: NVRTC's log."""
        return self._msg

    def dump(self, f):
        """Write the error, the options and the numbered source to the text stream ``f``."""
        lines = (self.source or "").split("\n")
        digits = int(math.floor(math.log10(len(lines)))) + 1
        f.write(f"{self.backend.upper()} compilation error: {self}\n-----\n")
        f.write(f"Name: {self.name}\nOptions: {' '.join(self.options)}\nCUDA source:\n")
        for i, line in enumerate(lines):
            f.write(f"{i + 1:0{digits}d} {line.rstrip()}\n")
        f.write("-----\n")
        f.flush()


class CUDADriverError(KilnError, RuntimeError):
    """A CUDA driver call failed, as ``cupy.cuda.driver.CUDADriverError``: ``status`` is the
    ``CUresult`` code, and the message starts with its name and the driver's description
    (``CUDA_ERROR_NOT_FOUND: ... named symbol not found``), then says what kiln was doing."""

    def __init__(self, status, msg=None):
        Exception.__init__(self, msg if msg is not None else f"CUDA driver error {status}")
        self.status = int(status)

    def __reduce__(self):
        return (_driver_error, (self.status, str(self), _kind_of(self)))


class DeviceFaultDriverError(DeviceFaultError, CUDADriverError):
    """A sticky driver error (illegal address, launch failure, ...): both a
    ``DeviceFaultError`` (restart the process) and a ``CUDADriverError``."""


class OutOfMemoryDriverError(OutOfMemoryError, CUDADriverError):
    """``CUDA_ERROR_OUT_OF_MEMORY`` from a driver call: both an ``OutOfMemoryError`` (also a
    ``MemoryError``) and a ``CUDADriverError``."""


_KINDS = {"": CUDADriverError, "fault": DeviceFaultDriverError, "oom": OutOfMemoryDriverError}


def _kind_of(e):
    for kind, cls in (("fault", DeviceFaultDriverError), ("oom", OutOfMemoryDriverError)):
        if isinstance(e, cls):
            return kind
    return ""


def _cupy_class(module, name):
    """CuPy's class ``module.name`` when CuPy is loaded, else None (kiln never imports CuPy
    itself)."""
    if "cupy" not in sys.modules:
        return None
    try:
        # by attribute from the top package: CuPy's `cupy.cuda.driver` is an attribute
        # (cupy_backends' module bound in cupy/cuda/__init__.py), not an importable
        # submodule, so importlib.import_module("cupy.cuda.driver") fails
        obj = importlib.import_module(module.split(".")[0])
        for part in module.split(".")[1:] + [name]:
            obj = getattr(obj, part)
        return obj if isinstance(obj, type) else None
    except Exception:  # a CuPy without it, or one that fails to import: kiln's class alone
        return None


_flavoured = {}


def _with_cupy(cls, cupy_cls):
    """``cls``, or (cached) a subclass of it and of CuPy's ``cupy_cls``."""
    if cupy_cls is None or issubclass(cls, cupy_cls):
        return cls
    key = (cls, cupy_cls)
    made = _flavoured.get(key)
    if made is None:
        made = type(cls.__name__, (cls, cupy_cls), {
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__,
        })
        _flavoured[key] = made
    return made


def _compile_error(msg, source=None, name=None, options=()):
    """A ``CompileException`` (also CuPy's, when CuPy is loaded)."""
    cls = _with_cupy(CompileException, _cupy_class("cupy.cuda.compiler", "CompileException"))
    return cls(msg, source, name, options)


def _driver_error(status, msg, kind=""):
    """A ``CUDADriverError`` of ``kind`` ("", "fault", "oom"; also CuPy's, when CuPy is
    loaded)."""
    cls = _with_cupy(_KINDS.get(kind, CUDADriverError),
                     _cupy_class("cupy.cuda.driver", "CUDADriverError"))
    return cls(status, msg)
