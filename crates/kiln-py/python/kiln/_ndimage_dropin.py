"""kiln.ndimage on other libraries' arrays, as scipy.ndimage takes them.

scipy.ndimage (with ``SCIPY_ARRAY_API=1``) hands a CuPy array to ``cupyx.scipy.ndimage`` and
any other array (torch, JAX, array-API arrays) to its NumPy code with a copy each way; either
way the result comes back as the input's type. kiln.ndimage does the same: every exported
function is wrapped here so that, for an input of another library (anything with
``__dlpack__`` that is neither a NumPy array nor a kiln tensor):

- the result is of the input's type by default (``out_type="like"``; ``out_type="kiln"``
  still gives a kiln tensor where the function takes it);
- a case the device path does not take (a dtype, an ``output=`` array of the input's library,
  a rank, a function that runs on the CPU only) runs on the CPU: the arrays are copied to the
  host, the NumPy path computes the result (scipy's bits, as for a NumPy input), and it is
  copied back, into the ``output=`` array when one was given. Bad input is still refused:
  the CPU path raises what scipy raises.

``KILN_NDIMAGE_FALLBACK=0`` turns the CPU fallback off, so a case the device path does not
take raises its error instead of running on the host (to find the calls that copy).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys

from . import _native
from ._errors import InvalidInputError

# What a device path raises for a case it does not take (kiln's own refusals, CuPy's refusal
# of an implicit host copy, an unsupported DLPack dtype or layout). Driver and kernel faults
# (kiln.CudaError and the like) are not among them: they propagate.
_REFUSALS = (InvalidInputError, TypeError, ValueError, NotImplementedError)


def _module(x) -> str:
    return type(x).__module__.split(".")[0]


def _foreign(x) -> bool:
    """Whether ``x`` is an array of another library (not NumPy, not a kiln tensor)."""
    return (x is not None and not isinstance(x, (_native.Tensor, type)) and _module(x) != "numpy"
            and hasattr(x, "__dlpack__"))


def _find_like(values):
    for v in values:
        if _foreign(v):
            return v
        if isinstance(v, (list, tuple)):
            for w in v:
                if _foreign(w):
                    return w
    return None


def _to_host(x):
    """A foreign array as a NumPy array (a copy where it lives on a device)."""
    import numpy as np

    mod = _module(x)
    if mod == "cupy":
        a = x.get()
    elif mod == "torch":
        a = x.detach().resolve_conj().cpu().numpy()
    elif mod in ("jax", "jaxlib"):
        a = np.asarray(x)
    else:
        try:
            a = np.from_dlpack(x)
        except (TypeError, ValueError, BufferError, RuntimeError):
            a = np.asarray(x)
    # a writable array of its own: the host path may write it (an output= copy)
    return a.copy() if not a.flags.writeable or not a.flags.owndata else a


def _to_host_arg(v, memo):
    """``v`` with its foreign arrays as NumPy arrays; ``memo`` (id -> array) gives one host
    array per foreign array, so an array passed twice (``output=input``) stays one array."""
    if _foreign(v):
        if id(v) not in memo:
            memo[id(v)] = _to_host(v)
        return memo[id(v)]
    if isinstance(v, (list, tuple)) and any(_foreign(w) for w in v):
        return type(v)(_to_host_arg(w, memo) for w in v)
    return v


def _to_like(a, like):
    """The NumPy array ``a`` as an array of ``like``'s library, on ``like``'s device."""
    mod = _module(like)
    if mod == "cupy":
        import cupy

        with cupy.cuda.Device(like.device.id):
            return cupy.asarray(a)
    if mod == "torch":
        import torch

        return torch.as_tensor(a if a.flags.writeable else a.copy(), device=like.device)
    if mod in ("jax", "jaxlib"):
        import jax

        return jax.device_put(a, next(iter(like.devices())))
    lib = sys.modules.get(mod)
    if lib is not None and hasattr(lib, "asarray"):
        return lib.asarray(a)
    return a


def _result_like(r, like, host_out=None, out=None):
    """scipy's conversion of a NumPy result for an input of ``like``'s library: arrays and
    NumPy scalars become arrays of that library, ints stay ints, ``value_indices``' dict keeps
    its keys as Python ints, sequences are converted item by item, ``None`` stays. The host
    copy of an ``output=`` array (``host_out``) is given back as that array (``out``)."""
    import numpy as np

    if host_out is not None and r is host_out:
        return out
    if isinstance(r, (np.ndarray, np.generic)):
        return _to_like(np.asarray(r), like)
    if isinstance(r, dict):
        return {(k.item() if isinstance(k, np.generic) else k):
                (tuple(_result_like(v, like) for v in vs) if isinstance(vs, tuple) else _result_like(vs, like))
                for k, vs in r.items()}
    if isinstance(r, (list, tuple)):
        return type(r)(_result_like(v, like, host_out, out) for v in r)
    return r


def _host_args(sig, args, kwargs):
    """The call's arguments with host copies of the foreign arrays: ``(args, kwargs, out,
    host_out)``. An ``output=`` array of another library (``out``) is passed as a host copy
    (``host_out``: scipy's rules for an output array hold, and an output that is also an
    input stays one array), to be written back into ``out`` after the call."""
    ba = sig.bind(*args, **kwargs)
    a = ba.arguments
    out = a.get("output")
    out = out if _foreign(out) else None
    memo = {}
    for k, v in list(a.items()):
        a[k] = _to_host_arg(v, memo)
    if "out_type" in a:
        a["out_type"] = None
    if "device" in a:
        a["device"] = None
    return ba.args, ba.kwargs, out, (a.get("output") if out is not None else None)


def _output_as_dtype(sig, args, kwargs):
    """For an ``output=`` array of another library: ``(args, kwargs, out)`` with the output
    replaced by its dtype, so the device path computes a new array that is then copied into
    ``out`` (the input is read before the output is written, so an output that is also the
    input is right); ``None`` without such an output."""
    ba = sig.bind(*args, **kwargs)
    out = ba.arguments.get("output")
    if not _foreign(out):
        return None
    ba.arguments["output"] = _dtype_of(out)
    return ba.args, ba.kwargs, out


def _dtype_of(out):
    import numpy as np

    d = out.dtype
    name = d if isinstance(d, str) else str(getattr(d, "name", d))
    return np.dtype(name.rsplit(".", 1)[-1])


def dropin(f):
    """``f`` taking other libraries' arrays as scipy.ndimage does (this module's rules)."""
    sig = inspect.signature(f)
    takes_out_type = "out_type" in sig.parameters

    # f is called from this wrapper itself in every case, so the warnings kiln.ndimage's
    # functions raise (their stacklevel counts this frame) point at the caller's line
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        like = _find_like(args)
        if like is None:
            like = _find_like(kwargs.values())
        if like is None:
            return f(*args, **kwargs)
        asked = kwargs.get("out_type")
        if takes_out_type and asked is None:
            kwargs["out_type"] = "like"
        try:
            return _result_like(f(*args, **kwargs), like)
        except _REFUSALS:
            if os.environ.get("KILN_NDIMAGE_FALLBACK", "1") == "0":
                raise
        # an output array of the input's library: the device path into a new array, copied
        # into it (where the device path refuses only the output array)
        as_dtype = _output_as_dtype(sig, args, kwargs)
        if as_dtype is not None:
            a, k, out = as_dtype
            try:
                r = f(*a, **k)
            except _REFUSALS:
                r = None
            if type(r) is type(out) and tuple(r.shape) == tuple(out.shape):
                out[...] = r
                return out
        # the host: scipy's result on host copies, given back like the input
        a, k, out, host_out = _host_args(sig, args, kwargs)
        r = f(*a, **k)
        if out is not None:
            out[...] = _to_like(host_out, out)
        r = _result_like(r, like, host_out, out)
        if asked == "kiln" and not isinstance(r, _native.Tensor) and hasattr(r, "__dlpack__"):
            from . import asarray

            return asarray(r)
        return r

    return wrapper
