"""``kiln.ndimage``: scipy.ndimage's filters, morphology, labels and measurements over labels,
with scipy's names and signatures.

``from kiln import ndimage as ndi`` is a drop-in for ``scipy.ndimage`` (or
``cupyx.scipy.ndimage``) for the functions below. Filters and morphology run on the device
the data lives on (a CUDA array on its GPU, a NumPy array on the CPU unless ``device=`` says
otherwise); ``label``, ``find_objects``, ``value_indices``, ``watershed_ift`` and the
measurements run on the CPU, on NumPy arrays.

>>> import numpy as np
>>> from kiln import ndimage as ndi
>>> img = np.random.default_rng(0).random((64, 64), dtype=np.float32)
>>> type(ndi.median_filter(img, size=3)).__name__
'ndarray'

Return type: a NumPy input (or a list) gives a NumPy array, as scipy does; a kiln tensor
gives a kiln tensor; other arrays (torch, CuPy, JAX, array-API arrays) give their own type
on their device, as scipy.ndimage does (``out_type="kiln"`` gives a kiln tensor where a
function takes it). What the device path does not take for such an array (a dtype, an
``output=`` array of its library, a function without GPU kernels) is copied to the host,
computed there with scipy's bits and copied back (``KILN_NDIMAGE_FALLBACK=0`` makes it an
error instead; ``_ndimage_dropin``). Binary morphology returns ``bool`` arrays (NumPy, or
the input's library) and uint8 0/1 kiln tensors.

Dtypes: the linear filters, rank filters and grey morphology take a NumPy array of every
dtype scipy takes on the CPU (bool, int8..int64, uint8..uint64, float32, float64; complex64
and complex128 for the linear filters), with scipy's results bit for bit (the linear
filters' float32 path within an f32 rounding of scipy's, see docs/ndimage.md), a ``mode``
per axis where scipy takes one, and any number of axes. On the GPU and for kiln tensors:
float32, uint8 and uint16 keep their type; float32 and float64 linear filters run scipy's
double arithmetic (the uniform filters scipy's running sums), bit for bit the CPU's and
scipy's; 8/16-bit linear results are rounded half away from zero and clamped (scipy truncates and wraps between the passes). Binary
morphology takes any dtype (non-zero is true).

``output=``: a dtype or a NumPy array (for a NumPy input), as scipy takes it. For NumPy
inputs the linear filters take any dtype scipy does, with scipy's C cast into it (integers
truncate and wrap between passes); for tensors the input's dtype, float32 or float64.
Rank filters and grey morphology give the input's dtype or one that holds every value of
it (uint8 to uint16 or float32, say), converted exactly. Binary morphology gives bool
whatever the dtype, as scipy does. An array is filled and returned; it may be the input.

What kiln does not support raises ``kiln.InvalidInputError`` naming the parameter (its
subclasses ``ScipyRuntimeError`` and ``ScipyTypeError`` where scipy raises those); for
other libraries' arrays these cases run on the host instead (above), and for kiln tensors:
``output=`` a dtype outside those rules or a non-NumPy array, a sequence of modes that differ
on tensors (NumPy inputs take them where scipy does),
``mask=`` of the binary ops on a non-NumPy input, grey morphology on tensors with both a
``structure`` and ``axes`` that leave an axis out, inputs of more than 3 axes unless
``axes`` names one axis or the last two, or ``axis`` is given (those are folded by a
reshape: ``(n, c, h, w)`` with ``axes=(2, 3)`` runs as ``(n*c, h, w)``; the linear filters
take NumPy inputs of any rank).
"""

from __future__ import annotations

import operator
import os
import threading
from collections.abc import Iterable

from . import _native
from ._errors import InvalidInputError

__all__ = [
    "correlate", "convolve", "correlate1d", "convolve1d", "gaussian_filter",
    "gaussian_filter1d", "gaussian_laplace", "gaussian_gradient_magnitude", "uniform_filter",
    "uniform_filter1d", "sobel", "prewitt", "laplace", "median_filter", "rank_filter",
    "percentile_filter", "minimum_filter", "maximum_filter", "minimum_filter1d",
    "maximum_filter1d", "grey_erosion", "grey_dilation", "grey_opening", "grey_closing",
    "binary_erosion", "binary_dilation", "binary_opening", "binary_closing",
    "binary_fill_holes", "generate_binary_structure", "white_tophat", "black_tophat",
    "morphological_gradient", "morphological_laplace", "binary_propagation",
    "binary_hit_or_miss", "iterate_structure", "label", "find_objects", "value_indices",
    "sum_labels", "sum", "mean", "variance", "standard_deviation", "minimum", "maximum",
    "median", "minimum_position", "maximum_position", "extrema", "center_of_mass",
    "histogram", "labeled_comprehension", "watershed_ift", "spline_filter1d", "spline_filter",
    "map_coordinates", "affine_transform", "shift", "zoom", "rotate", "geometric_transform",
    "distance_transform_edt", "distance_transform_cdt", "distance_transform_bf",
]

class ScipyRuntimeError(InvalidInputError, RuntimeError):
    """An argument kiln rejects where scipy.ndimage raises ``RuntimeError`` (catchable as
    either)."""


class ScipyTypeError(InvalidInputError, TypeError):
    """An argument kiln rejects where scipy.ndimage raises ``TypeError`` (catchable as
    either)."""


_KEEP = ("float32", "uint8", "uint16")
_FLOATS = ("float32", "float64")
# (input, result) dtypes of other libraries' arrays the GPU's linear filters compute with
# scipy's bits (the exact kernels, float32 widened exactly for a float64 result)
_EXACT_GPU = (("float32", "float32"), ("float64", "float64"), ("float32", "float64"))


def _exact_gpu():
    """The (input, output) dtypes of another library's array whose linear filters run on the
    GPU: float32 and float64 in scipy's arithmetic under ``KILN_GPU_PREVIEW=1`` (a preview
    until their bitwise tests have run on a GPU), else float32 alone (the f32 kernels,
    within ``ndimage_tolerance``)."""
    return _EXACT_GPU if os.environ.get("KILN_GPU_PREVIEW", "0") == "1" else _EXACT_GPU[:1]
# what the linear filters convert to float32 when a float output is asked for
_REAL = _KEEP + ("float64", "float16", "bool", "int8", "int16", "int32", "int64", "uint32",
                 "uint64")


# --- inputs and outputs -------------------------------------------------------------------

def _np():
    import numpy as np

    return np


def _is_numpy(x):
    return type(x).__module__.split(".")[0] == "numpy" or not (
        isinstance(x, _native.Tensor) or hasattr(x, "__dlpack__"))


def _dtype_name(x) -> str:
    d = x.dtype
    return d if isinstance(d, str) else str(getattr(d, "name", d)).replace("torch.", "")


def _ndim(x) -> int:
    return len(x.shape)


class _Call:
    """One call: the input as kiln will read it and how to give the result back."""

    def __init__(self, fname, input, kind, output, device, out_type):
        self.fname, self.like, self.out_type, self.kind = fname, input, out_type, kind
        np = None
        if _is_numpy(input):
            np = _np()
            x = np.asarray(input)
            if x.dtype.kind == "c":
                raise InvalidInputError(f"{fname}: complex input is not supported")
            if not x.dtype.isnative:
                # big-endian (or swapped) data: converted, as scipy reads it
                x = x.astype(x.dtype.newbyteorder("="))
        else:
            x = input
        self.dtype = _dtype_name(x)
        self.ndim = _ndim(x)
        self.shape = tuple(x.shape)
        self.folded = False
        if self.ndim < 1:
            raise InvalidInputError(f"{fname}: input has 0 axes; kiln.ndimage takes 1 to 3 (more with axes=)")
        self.out_dtype, self.out_array = self._output(output, x)
        if (kind == "linear" and np is None and not isinstance(input, _native.Tensor)
                and (self.dtype, self.out_dtype or self.dtype) not in _exact_gpu()):
            # another library's array: the GPU gives scipy's bits for float32 and float64 (and
            # float32 input with a float64 output); the rest (8/16-bit results rounded where
            # scipy truncates, other types converted) runs on the host (_ndimage_dropin)
            raise InvalidInputError(
                f"{fname}: a {type(input).__name__} of dtype {self.dtype} (output {self.out_dtype or self.dtype}): "
                "the GPU's linear filters take float32 and float64 arrays of other libraries; give one of those, "
                "or a kiln tensor (8/16-bit results rounded and clamped)")
        if kind == "linear" and (self.dtype not in _KEEP + ("float64",) or self.out_dtype not in (None, self.dtype)):
            # computed in the float type asked for: float64 from any real input (widened
            # exactly, as scipy reads it), float32 from a float32 copy of the input
            want = self.out_dtype or self.dtype
            if want not in _FLOATS:
                if self.dtype == "float16":
                    # scipy's C code has no float16 ("array type not supported")
                    raise ScipyRuntimeError(f"{fname}: input dtype float16 is not supported (scipy raises too); convert to float32")
                if self.out_dtype is not None:
                    raise InvalidInputError(
                        f"{fname}: output dtype {want} from {self.dtype} input is not supported: the input's dtype, float32 or float64")
                raise InvalidInputError(
                    f"{fname}: input dtype {self.dtype} is not supported: float32, uint8, uint16, float64, or any integer dtype with output=np.float32")
            if self.dtype not in _REAL:
                raise InvalidInputError(f"{fname}: input dtype {self.dtype} is not supported")
            if self.dtype != want:
                x = x.astype(want) if np is not None else _native.cast(x, want)
        elif kind == "binary" and not isinstance(x, _native.Tensor):
            if self.dtype not in _KEEP:
                x = (x != 0)
                if np is not None:
                    x = x.view(np.uint8)
                elif type(x).__module__.startswith("torch"):
                    x = x.to(__import__("torch").uint8)
                elif hasattr(x, "astype"):
                    x = x.astype("uint8")
                else:
                    raise InvalidInputError(
                        f"{fname}: a {type(input).__name__} input of dtype {self.dtype} is not supported here; "
                        "give uint8, float32 or uint16, or a NumPy array")
        elif kind == "rank" and self.dtype not in _KEEP:
            # NumPy inputs of every dtype run on the CPU (_ndimage_rank._host); this is the
            # tensor path: the GPU kernels (and kiln tensors) select in these three types
            raise InvalidInputError(
                f"{fname}: input dtype {self.dtype} is not supported here ({type(input).__name__} input, device={device!r}): "
                "kiln tensors and the GPU's rank filters and grey morphology take float32, uint8, uint16; a NumPy "
                "array of any real dtype (bool, int8..int64, uint8..uint64, float32, float64) runs on the CPU "
                "with device=None or 'cpu'")
        if np is not None:
            x = np.ascontiguousarray(x)
        if device is not None:
            x = _native.asarray(x, device)
        self.x = x

    def axes(self, axes):
        """scipy's ``axes`` for this input. An input of more than 3 axes is filtered when the
        axes left out lead, e.g. ``(n, c, h, w)`` with ``axes=(2, 3)``: those are folded into
        one batch axis (a reshape, no copy) and the result is given back in the input's shape.
        One axis of any input is filtered as :meth:`axis` does."""
        ax = _axes(axes, self.ndim, self.fname)
        if self.ndim <= 3:
            return ax
        if len(ax) == 1:
            return [self.axis(ax[0])]
        lead = self.ndim - len(ax)
        if len(ax) > 2 or sorted(ax) != list(range(lead, self.ndim)):
            raise InvalidInputError(
                f"{self.fname}: input has {self.ndim} axes; kiln.ndimage takes more than 3 when axes names one axis, "
                f"or two that come last (e.g. (n, c, h, w) with axes=(2, 3)); axes {tuple(ax)} do not")
        self._fold((self._prod(self.shape[:lead]),) + self.shape[lead:])
        return [a - lead + 1 for a in ax]

    def axis(self, axis):
        """The one axis of a 1-D filter; an input of more than 3 axes is seen as
        ``(before, n, after)`` with the filter along axis 1 (a reshape, no copy)."""
        axis = operator.index(axis)
        if self.ndim <= 3:
            return axis
        if axis < -self.ndim or axis >= self.ndim:
            raise InvalidInputError(f"{self.fname}: axis {axis} is out of range for {self.ndim}-D input")
        a = axis % self.ndim
        self._fold((self._prod(self.shape[:a]), self.shape[a], self._prod(self.shape[a + 1:])))
        return 1

    @staticmethod
    def _prod(dims):
        n = 1
        for d in dims:
            n *= d
        return n

    def _fold(self, shape):
        self.x = self.x.reshape(shape)
        self.ndim, self.folded = len(shape), True

    def _output(self, output, x):
        """scipy's ``output=``: ``(dtype name or None, NumPy array or None)``.

        A dtype: the result's type (linear filters: the input's, float32 or float64; rank
        filters and grey morphology: the input's or a type that holds it exactly; binary
        morphology: ignored, bool, as scipy does). A NumPy array of the input's shape: the
        result is computed as for its dtype, copied into it, and the array is returned (the
        copy is what scipy's in-place output saves, so it is no faster)."""
        if output is None:
            return None, None
        np = _np()
        fname = self.fname
        if isinstance(output, np.ndarray):
            if not _is_numpy(self.like):
                raise InvalidInputError(
                    f"{fname}: output= a NumPy array needs a NumPy input; for {type(self.like).__name__} input use out_type='like' and copy")
            if self.out_type not in (None, "like"):
                raise InvalidInputError(f"{fname}: output= an array is returned itself; out_type={self.out_type!r} does not apply")
            if tuple(output.shape) != tuple(x.shape):
                raise InvalidInputError(
                    f"{fname}: output has shape {tuple(output.shape)}, the input {tuple(x.shape)}; they must be equal")
            if not output.flags.writeable:
                raise InvalidInputError(f"{fname}: output is a read-only array")
            dtype = output.dtype
        elif hasattr(output, "__dlpack__") or isinstance(output, _native.Tensor):
            raise InvalidInputError(
                f"{fname}: output= arrays other than NumPy are not supported; use out_type='like' for a result of the input's type")
        else:
            try:
                dtype = np.dtype(output)
            except TypeError:
                raise InvalidInputError(f"{fname}: output must be None, a dtype or a NumPy array, not {output!r}") from None
        name = dtype.name
        if self.kind == "binary":
            if dtype.kind not in "biuf":
                raise InvalidInputError(f"{fname}: output dtype {name} is not supported")
            return None, output if isinstance(output, np.ndarray) else None
        if self.kind == "rank" and name != self.dtype and self.dtype in _KEEP:
            if not np.can_cast(self.dtype, name, "safe"):
                raise InvalidInputError(
                    f"{fname}: output dtype {name} cannot hold every {self.dtype} value; rank filters and grey morphology give the input's dtype or a wider one")
            if not _is_numpy(self.like) or self.out_type == "kiln":
                if name not in _KEEP + ("float64",):
                    raise InvalidInputError(
                        f"{fname}: output dtype {name} for a tensor result: kiln tensors hold float32, float64, uint8, uint16")
        return name, output if isinstance(output, np.ndarray) else None

    def done(self, y):
        if self.folded:
            y = y.reshape(self.shape)
        r = self._result(y)
        if self.out_array is not None:
            _np().copyto(self.out_array, r, casting="unsafe")
            return self.out_array
        return r

    def _result(self, y):
        out_type = self.out_type
        if out_type is None:
            out_type = "like" if _is_numpy(self.like) else "kiln"
        cast = self.kind == "rank" and self.out_dtype not in (None, self.dtype)
        to_numpy = out_type == "like" and _is_numpy(self.like)
        if cast and not to_numpy:
            y = _native.cast(y, self.out_dtype)
        if out_type == "kiln":
            return y
        if out_type != "like":
            raise InvalidInputError(f"out_type must be None, 'kiln' or 'like', not {out_type!r}")
        if isinstance(self.like, _native.Tensor):
            return y
        from . import _like

        r = _like(y, self.like, "like")
        if self.kind == "binary":
            if _is_numpy(self.like):
                return r.view(bool) if r.dtype.itemsize == 1 else (r != 0)
            return r != 0
        return r.astype(self.out_dtype) if cast and to_numpy else r


# --- scipy's argument rules ---------------------------------------------------------------

def _seq(v, n, what, fname, conv=float):
    """scipy's _normalize_sequence: one value for every axis, or exactly n."""
    if isinstance(v, str) or not isinstance(v, Iterable):
        return [conv(v)] * n
    v = [conv(a) for a in v]
    if len(v) != n:
        # scipy's _normalize_sequence raises RuntimeError here
        raise ScipyRuntimeError(
            f"{fname}: {what}: sequence argument must have length equal to input rank (one value or {n}, got {len(v)})")
    return v


def _index(v):
    return operator.index(v)


def _axes(axes, ndim, fname):
    """scipy's _check_axes, with InvalidInputError."""
    if axes is None:
        return list(range(ndim))
    if not isinstance(axes, Iterable):
        axes = (axes,)
    out = []
    for a in axes:
        a = operator.index(a)
        if a < -ndim or a >= ndim:
            raise InvalidInputError(f"{fname}: axes: axis {a} is out of range for {ndim}-D input")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise InvalidInputError(f"{fname}: axes must be unique, got {tuple(axes)}")
    return out


def _mode(mode, n, fname):
    if isinstance(mode, str):
        return mode
    modes = list(mode)
    if len(modes) != n:
        raise ScipyRuntimeError(
            f"{fname}: mode: sequence argument must have length equal to input rank (one value or {n}, got {len(modes)})")
    if len(set(modes)) == 1:
        return modes[0]
    # scipy raises RuntimeError for a sequence where it takes none (correlate, rank filters)
    raise ScipyRuntimeError(
        f"{fname}: mode: a sequence of different modes per axis is not supported; give one mode")


def _kwargs(kwargs, fname):
    bad = set(kwargs) - {"truncate", "radius"}
    if bad:
        raise InvalidInputError(f"{fname}: unsupported keyword arguments {sorted(bad)} (truncate and radius are passed on)")


_TOLERANCE = threading.local()


def _linear(call, function, **p):
    if call.ndim > 3:
        raise InvalidInputError(
            f"{call.fname}: input has {call.ndim} axes; kiln.ndimage takes 1 to 3 here (more only where axes= or axis= can fold them)")
    max_in = getattr(_TOLERANCE, "max_in", None)
    if max_in is not None:  # _tolerance(): the bound, not the result
        return _native.ndimage_tolerance_of(function, call.ndim, max_in, **p)
    if 0 in call.shape and _is_numpy(call.like):
        # an empty input filters to an empty output, as scipy's does
        np = _np()
        r = np.zeros(call.shape, dtype=call.out_dtype or call.dtype)
        if call.out_array is not None:
            np.copyto(call.out_array, r, casting="unsafe")
            return call.out_array
        return r
    if function.startswith("gaussian"):
        # NumPy's Gaussian weights, as scipy computes them (Rust's can differ in the last bit)
        lin = _lin()
        p["gauss_kernel"] = lambda s, o, r: lin._gaussian_kernel(s, o, r).tolist()
    y = _native.ndimage_linear(call.x, function, **p)
    return call.done(y)


def _tolerance(max_in, fn, input, *args, **kwargs):
    """The bound kiln's tests hold a linear filter to (``kiln::ndimage::ndimage_tolerance``:
    |GPU - CPU|, and the CPU's distance from scipy's float32 arithmetic) for the call
    ``fn(input, *args, **kwargs)`` on data of largest magnitude ``max_in``."""
    _TOLERANCE.max_in = float(max_in)
    try:
        return fn(input, *args, **kwargs)
    finally:
        _TOLERANCE.max_in = None


def _mode_cval(mode, cval, n, fname):
    return {"mode": _mode(mode, n, fname), "cval": float(cval)}


def _exact(input, output, mode, device, out_type, weights=None, f32=True):
    """Whether a linear filter runs on the CPU routines with scipy's results for every dtype
    (``_ndimage_linear``): NumPy inputs on the CPU, unless the float32 plan gives scipy's
    bits already (float32 in and out, one mode, 1 to 3 axes, real weights; ``f32=False``
    keeps every NumPy input on the scipy routines: the uniform filters, whose running sums
    those routines compute one slab at a time without the plan's conversions)."""
    if device not in (None, "cpu") or out_type not in (None, "like") or not _is_numpy(input):
        return False
    if getattr(_TOLERANCE, "max_in", None) is not None:
        return False
    if isinstance(output, _native.Tensor) or hasattr(output, "__dlpack__") and not isinstance(
            output, _np().ndarray):
        return False  # refused by _Call: output= arrays other than NumPy
    if not f32:
        return True
    np = _np()
    x = np.asarray(input)
    try:
        od = None if output is None else (
            output.dtype if isinstance(output, np.ndarray) else np.dtype(output))
    except TypeError:
        return True  # scipy's own error, from the exact path
    if weights is not None and np.iscomplexobj(weights):
        return True
    f4 = np.dtype("float32")
    # (not `od in (None, f4)`: a dtype equals None when it is float64, np.dtype(None))
    return not (x.dtype == f4 and (od is None or od == f4) and isinstance(mode, str)
                and 1 <= x.ndim <= 3 and x.size > 0)


def _lin():
    from . import _ndimage_linear

    return _ndimage_linear


# --- linear filters -----------------------------------------------------------------------

def _correlate(fname, input, weights, output, mode, cval, origin, axes, device, out_type):
    call = _Call(fname, input, "linear", output, device, out_type)
    np = _np()
    w = np.asarray(weights, dtype=np.float64)
    ax = call.axes(axes)
    if w.ndim != len(ax):
        raise ScipyRuntimeError(f"{fname}: weights.ndim ({w.ndim}) must match len(axes) ({len(ax)})")
    return _linear(call, fname, weights=w.ravel().tolist(),
                   wshape=list(w.shape), origin=_seq(origin, len(ax), "origin", fname, _index),
                   axes=None if axes is None else ax, **_mode_cval(mode, cval, len(ax), fname))


def correlate(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None,
              device=None, out_type=None):
    """scipy.ndimage.correlate: ``weights`` of any shape (odd or even sides), one axis per
    filtered axis (all, or ``axes``)."""
    if _exact(input, output, mode, device, out_type, weights):
        return _lin().correlate(input, weights, output, mode, cval, origin, axes=axes)
    return _correlate("correlate", input, weights, output, mode, cval, origin, axes, device,
                      out_type)


def convolve(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None,
             device=None, out_type=None):
    """scipy.ndimage.convolve (the kernel reversed; scipy's origin rule for even sides)."""
    if _exact(input, output, mode, device, out_type, weights):
        return _lin().convolve(input, weights, output, mode, cval, origin, axes=axes)
    return _correlate("convolve", input, weights, output, mode, cval, origin, axes, device,
                      out_type)


def _one_d(fname, input, weights, axis, output, mode, cval, origin, device, out_type):
    call = _Call(fname, input, "linear", output, device, out_type)
    np = _np()
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size < 1:
        raise InvalidInputError(f"{fname}: weights must be a non-empty 1-D sequence, got shape {w.shape}")
    return _linear(call, fname, weights=w.tolist(), axis=call.axis(axis),
                   origin=[operator.index(origin)], **_mode_cval(mode, cval, 1, fname))


def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0, *,
                device=None, out_type=None):
    """scipy.ndimage.correlate1d along ``axis``."""
    if _exact(input, output, mode, device, out_type, weights):
        return _lin().correlate1d(input, weights, axis, output, mode, cval, origin)
    return _one_d("correlate1d", input, weights, axis, output, mode, cval, origin, device,
                  out_type)


def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0, *,
               device=None, out_type=None):
    """scipy.ndimage.convolve1d along ``axis``."""
    if _exact(input, output, mode, device, out_type, weights):
        return _lin().convolve1d(input, weights, axis, output, mode, cval, origin)
    return _one_d("convolve1d", input, weights, axis, output, mode, cval, origin, device,
                  out_type)


def _gauss(fname, call, sigma, order, truncate, radius, axes, mode, cval, n):
    p = {"sigma": _seq(sigma, n, "sigma", fname), "truncate": float(truncate)}
    if order is not None:
        p["order"] = _seq(order, n, "order", fname, _index)
        if any(o < 0 for o in p["order"]):
            raise InvalidInputError(f"{fname}: order must be non-negative, got {order!r}")
    if radius is not None:
        p["radius"] = _seq(radius, n, "radius", fname, _index)
    if axes is not None:
        p["axes"] = axes
    return _linear(call, fname, **p, **_mode_cval(mode, cval, n, fname))


def gaussian_filter(input, sigma, order=0, output=None, mode="reflect", cval=0.0, truncate=4.0,
                    *, radius=None, axes=None, device=None, out_type=None):
    """scipy.ndimage.gaussian_filter: ``sigma``, ``order`` (0-2), ``radius`` per filtered
    axis (one value for all); sigma 0 leaves an axis alone."""
    if _exact(input, output, mode, device, out_type):
        return _lin().gaussian_filter(input, sigma, order, output, mode, cval, truncate,
                                      radius=radius, axes=axes)
    call = _Call("gaussian_filter", input, "linear", output, device, out_type)
    ax = call.axes(axes)
    return _gauss("gaussian_filter", call, sigma, order, truncate, radius,
                  None if axes is None else ax, mode, cval, len(ax))


def gaussian_filter1d(input, sigma, axis=-1, order=0, output=None, mode="reflect", cval=0.0,
                      truncate=4.0, *, radius=None, device=None, out_type=None):
    """scipy.ndimage.gaussian_filter1d along ``axis``."""
    if _exact(input, output, mode, device, out_type):
        return _lin().gaussian_filter1d(input, sigma, axis, order, output, mode, cval, truncate,
                                        radius=radius)
    call = _Call("gaussian_filter1d", input, "linear", output, device, out_type)
    if operator.index(order) < 0:
        raise InvalidInputError(f"gaussian_filter1d: order must be non-negative, got {order!r}")
    p = {"sigma": [float(sigma)], "order": [operator.index(order)], "truncate": float(truncate),
         "axis": call.axis(axis)}
    if radius is not None:
        if isinstance(radius, float) or operator.index(radius) < 0:
            raise InvalidInputError(f"gaussian_filter1d: radius must be a nonnegative integer, got {radius!r}")
        p["radius"] = [operator.index(radius)]
    return _linear(call, "gaussian_filter1d", **p, **_mode_cval(mode, cval, 1, "gaussian_filter1d"))


def gaussian_laplace(input, sigma, output=None, mode="reflect", cval=0.0, *, axes=None,
                     device=None, out_type=None, **kwargs):
    """scipy.ndimage.gaussian_laplace (``truncate``, ``radius`` in kwargs)."""
    if _exact(input, output, mode, device, out_type):
        return _lin().gaussian_laplace(input, sigma, output, mode, cval, axes=axes, **kwargs)
    _kwargs(kwargs, "gaussian_laplace")
    call = _Call("gaussian_laplace", input, "linear", output, device, out_type)
    ax = call.axes(axes)
    return _gauss("gaussian_laplace", call, sigma, None, kwargs.get("truncate", 4.0),
                  kwargs.get("radius"), None if axes is None else ax, mode, cval, len(ax))


def gaussian_gradient_magnitude(input, sigma, output=None, mode="reflect", cval=0.0, *,
                                axes=None, device=None, out_type=None, **kwargs):
    """scipy.ndimage.gaussian_gradient_magnitude (``truncate``, ``radius`` in kwargs)."""
    if _exact(input, output, mode, device, out_type, f32=axes is None):
        return _lin().gaussian_gradient_magnitude(input, sigma, output, mode, cval, axes=axes,
                                                  **kwargs)
    _kwargs(kwargs, "gaussian_gradient_magnitude")
    call = _Call("gaussian_gradient_magnitude", input, "linear", output, device, out_type)
    ax = call.axes(axes)
    if len(ax) < call.ndim:
        # scipy 1.17 smooths every axis of the input here (its derivative calls
        # gaussian_filter without axes) while kiln's plan smooths only `axes`, as
        # gaussian_laplace does: refuse rather than differ
        raise InvalidInputError(
            "gaussian_gradient_magnitude: axes that leave an axis out are not supported (scipy smooths the left-out axes too, kiln's plan does not)")
    return _gauss("gaussian_gradient_magnitude", call, sigma, None, kwargs.get("truncate", 4.0),
                  kwargs.get("radius"), None if axes is None else ax, mode, cval, len(ax))


def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None,
                   device=None, out_type=None):
    """scipy.ndimage.uniform_filter: ``size`` and ``origin`` per filtered axis."""
    if _exact(input, output, mode, device, out_type, f32=False):
        return _lin().uniform_filter(input, size, output, mode, cval, origin, axes=axes)
    call = _Call("uniform_filter", input, "linear", output, device, out_type)
    ax = call.axes(axes)
    n = len(ax)
    return _linear(call, "uniform_filter", size=_seq(size, n, "size", "uniform_filter", _index),
                   origin=_seq(origin, n, "origin", "uniform_filter", _index),
                   axes=None if axes is None else ax, **_mode_cval(mode, cval, n, "uniform_filter"))


def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0, *,
                     device=None, out_type=None):
    """scipy.ndimage.uniform_filter1d along ``axis``."""
    if _exact(input, output, mode, device, out_type, f32=False):
        return _lin().uniform_filter1d(input, size, axis, output, mode, cval, origin)
    call = _Call("uniform_filter1d", input, "linear", output, device, out_type)
    return _linear(call, "uniform_filter1d", size=[operator.index(size)],
                   origin=[operator.index(origin)], axis=call.axis(axis),
                   **_mode_cval(mode, cval, 1, "uniform_filter1d"))


def _derivative(fname, input, axis, output, mode, cval, device, out_type):
    call = _Call(fname, input, "linear", output, device, out_type)
    mc = _mode_cval(mode, cval, call.ndim, fname)
    if call.ndim == 1:  # no other axis to smooth: scipy's correlate1d with [-1, 0, 1]
        return _linear(call, "correlate1d", weights=[-1.0, 0.0, 1.0], axis=operator.index(axis),
                       **mc)
    return _linear(call, fname, axis=operator.index(axis), **mc)


def sobel(input, axis=-1, output=None, mode="reflect", cval=0.0, *, device=None, out_type=None):
    """scipy.ndimage.sobel: the derivative along ``axis``, smoothed along the others."""
    if _exact(input, output, mode, device, out_type):
        return _lin().sobel(input, axis, output, mode, cval)
    return _derivative("sobel", input, axis, output, mode, cval, device, out_type)


def prewitt(input, axis=-1, output=None, mode="reflect", cval=0.0, *, device=None,
            out_type=None):
    """scipy.ndimage.prewitt."""
    if _exact(input, output, mode, device, out_type):
        return _lin().prewitt(input, axis, output, mode, cval)
    return _derivative("prewitt", input, axis, output, mode, cval, device, out_type)


def laplace(input, output=None, mode="reflect", cval=0.0, *, axes=None, device=None,
            out_type=None):
    """scipy.ndimage.laplace: the sum of second differences over ``axes`` (default all)."""
    if _exact(input, output, mode, device, out_type):
        return _lin().laplace(input, output, mode, cval, axes=axes)
    call = _Call("laplace", input, "linear", output, device, out_type)
    ax = call.axes(axes)
    return _linear(call, "laplace", axes=None if axes is None else ax,
                   **_mode_cval(mode, cval, len(ax), "laplace"))


from ._ndimage_rank import (  # noqa: E402  (the second half, which uses the helpers above)
    binary_closing,
    binary_dilation,
    binary_erosion,
    binary_fill_holes,
    binary_opening,
    generate_binary_structure,
    grey_closing,
    grey_dilation,
    grey_erosion,
    grey_opening,
    maximum_filter,
    maximum_filter1d,
    median_filter,
    minimum_filter,
    minimum_filter1d,
    percentile_filter,
    rank_filter,
)
from ._ndimage_morph import (  # noqa: E402  (built from the functions above)
    binary_hit_or_miss,
    binary_propagation,
    black_tophat,
    iterate_structure,
    morphological_gradient,
    morphological_laplace,
    white_tophat,
)
from ._ndimage_measure import find_objects, label, value_indices, watershed_ift  # noqa: E402
from ._ndimage_interp import affine_transform, geometric_transform, map_coordinates, rotate, shift, spline_filter, spline_filter1d, zoom  # noqa: E402, E501
from ._ndimage_distance import distance_transform_bf, distance_transform_cdt, distance_transform_edt  # noqa: E402
from ._ndimage_stats import (  # noqa: E402, A004  (scipy's names: `sum` shadows the builtin here)
    center_of_mass,
    extrema,
    histogram,
    labeled_comprehension,
    maximum,
    maximum_position,
    mean,
    median,
    minimum,
    minimum_position,
    standard_deviation,
    sum,
    sum_labels,
    variance,
)

# Other libraries' arrays (CuPy, torch, JAX, array-API arrays) as scipy.ndimage takes them:
# results of the input's type, and the cases the device path does not take run on the CPU
# with a copy each way (_ndimage_dropin).
from ._ndimage_dropin import dropin as _dropin  # noqa: E402

for _name in __all__:
    if _name != "generate_binary_structure":
        globals()[_name] = _dropin(globals()[_name])
del _name
