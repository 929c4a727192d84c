"""``kiln.ndimage``'s interpolation: scipy.ndimage's ``spline_filter1d``, ``spline_filter``,
``map_coordinates``, ``affine_transform``, ``shift``, ``zoom``, ``rotate`` and
``geometric_transform``, with scipy 1.17's signatures, results and errors.

The spline prefilter and the per-point interpolation run natively on the CPU
(``kiln_core::imaging::interp``, a port of scipy's ``ni_splines.c`` and
``ni_interpolation.c``, parallel over output points, the GIL released). What scipy does in
Python is done here the same way: the argument checks and their exception types, the
prepadding of 12 samples before the prefilter for ``nearest`` and ``grid-constant``, complex
input as its real and imaginary parts (``cval`` split likewise), the output allocation
(``output=`` a dtype or an array), ``zoom``'s factors and ``rotate``'s matrix, offset and
output shape (its angle's cosine and sine as scipy.special's ``cosdg``/``sindg`` compute them).

The native routines read the input as float64 (as scipy's C code reads every dtype) and give
float64 values that are stored into the output as scipy stores them: integers rounded half
away from zero and clipped to the type's range, float32 rounded once.

Inputs are NumPy arrays or anything ``numpy.asarray`` takes; a kiln tensor or another DLPack
array on the CPU is read through DLPack. An input on a CUDA device (a kiln tensor, CuPy, torch)
is interpolated on its GPU and the result is an array of its kind there
(``_ndimage_interp_gpu``: float32 and float64 data, the CPU path's values to the bit);
``geometric_transform`` refuses one.
``geometric_transform`` calls the Python ``mapping`` once per output point in row-major
order, as scipy does, before interpolating; a ``scipy.LowLevelCallable`` mapping is called
through ctypes the same way.
"""

from __future__ import annotations

import itertools
import math
import operator

from . import _native
from . import _ndimage_interp_gpu as _gpu
from ._errors import InvalidInputError, warn_at_caller
from .ndimage import ScipyRuntimeError, ScipyTypeError, _is_numpy

__all__ = ["spline_filter1d", "spline_filter", "geometric_transform", "map_coordinates",
           "affine_transform", "shift", "zoom", "rotate"]

# the default output of the spline filters: float64 (a sentinel, so that NumPy loads lazily)
_F64 = object()

# the dtypes scipy's interpolation C code reads and writes
_DTYPES = ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
           "float32", "float64")


def _np():
    import numpy as np

    return np


def _cpu(x, fname, what="input"):
    """``x`` as scipy would read it: NumPy arrays, lists and scalars as they are; a kiln
    tensor or another DLPack array through DLPack when it is on the CPU; one on a GPU is
    refused (a CUDA input is routed to ``_ndimage_interp_gpu`` before this)."""
    if x is None or _is_numpy(x):
        return x
    np = _np()
    dev = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else None
    if dev == 1:  # kDLCPU
        return np.from_dlpack(x)
    raise InvalidInputError(
        f"{fname}: {what} is a {type(x).__module__}.{type(x).__name__} off the CPU with an input on the CPU; "
        f"kiln.ndimage's interpolation runs where the input lives: give the input on the GPU, or copy "
        f"this to a NumPy array")


# --- scipy's argument helpers (_ni_support) ---------------------------------------------

def _mode_code(mode):
    """scipy's ``_extend_mode_to_code`` for the interpolation functions."""
    codes = {"nearest": 0, "wrap": 1, "reflect": 2, "grid-mirror": 2, "mirror": 3,
             "constant": 4, "grid-wrap": 5, "grid-constant": 6}
    if isinstance(mode, str) and mode in codes:
        return codes[mode]
    raise ScipyRuntimeError("boundary mode not supported")


def _normalize_sequence(value, rank):
    np = _np()
    if not isinstance(value, str) and np.iterable(value):
        normalized = list(value)
        if len(normalized) != rank:
            raise ScipyRuntimeError("sequence argument must have length equal to input rank")
        return normalized
    return [value] * rank


def _get_output(output, input, shape=None, complex_output=False):
    """scipy's ``_ni_support._get_output``, with the C layer's refusal of a read-only
    output array."""
    np = _np()
    if shape is None:
        shape = input.shape
    if output is None:
        if not complex_output:
            output = np.zeros(shape, dtype=input.dtype.name)
        else:
            output = np.zeros(shape, dtype=np.promote_types(input.dtype, np.complex64))
    elif isinstance(output, (type, np.dtype)):
        if complex_output and np.dtype(output).kind != "c":
            warn_at_caller("promoting specified output dtype to complex")
            output = np.promote_types(output, np.complex64)
        output = np.zeros(shape, dtype=output)
    elif isinstance(output, str):
        output = np.dtype(output)
        if complex_output and output.kind != "c":
            raise ScipyRuntimeError("output must have complex dtype")
        elif not issubclass(output.type, np.number):
            raise ScipyRuntimeError("output must have numeric dtype")
        output = np.zeros(shape, dtype=output)
    else:
        output = np.asarray(_cpu(output, "output", "output"))
        if output.shape != shape:
            raise ScipyRuntimeError("output shape not correct")
        elif complex_output and output.dtype.kind != "c":
            raise ScipyRuntimeError("output must have complex dtype")
        if not output.flags.writeable:
            raise InvalidInputError("output array is read-only.")
    return output


def _check_dtype(a, what="data"):
    if a.dtype.name not in _DTYPES:
        raise ScipyRuntimeError(f"{what} type not supported: {a.dtype} ({', '.join(_DTYPES)})")


def _f64(a):
    """The row-major float64 bytes of ``a`` (as scipy's C code reads each value)."""
    np = _np()
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()


def _c_cast_into(output, values):
    """``values`` (float64) stored into ``output`` with C's cast: integers truncate, a bool
    output takes the low byte of the truncated value, as scipy's line buffers store."""
    np = _np()
    with np.errstate(all="ignore"):
        if output.dtype == np.bool_:
            b = (np.trunc(values).astype(np.int64) & 0xFF).astype(np.uint8)
            output.view(np.uint8)[...] = b
        else:
            output[...] = values
    return output


def _store_kind(dt):
    """How the native loops store into an output of dtype ``dt`` (scipy's CASE_INTERP_OUT)."""
    np = _np()
    dt = dt.newbyteorder("=")
    if dt == np.float64:
        return ("float", 0.0, 0.0)
    if dt == np.float32:
        return ("f32", 0.0, 0.0)
    if dt == np.bool_:
        return ("bool", 0.0, 0.0)
    info = np.iinfo(dt)
    if dt.kind == "u":
        return ("uint", 0.0, float(info.max))
    return ("int", float(info.min), float(info.max))


def _write(output, b, shape):
    """The native result bytes ``b`` stored into ``output``."""
    np = _np()
    dt = np.float32 if output.dtype.newbyteorder("=") == np.float32 else np.float64
    values = np.frombuffer(b, dtype=dt).reshape(shape)
    if output.dtype == np.bool_:
        output.view(np.uint8)[...] = values.astype(np.uint8)
    else:
        with np.errstate(all="ignore"):
            output[...] = values
    return output


# --- the spline prefilter ---------------------------------------------------------------

def _c_int(order):
    """``order`` as scipy's C layer takes it (a C ``int``: floats are a ``TypeError``)."""
    try:
        return operator.index(order)
    except TypeError as e:
        raise ScipyTypeError(str(e)) from None


def _filter_f64(x, order, axes, mode_code):
    """``x`` spline-filtered along ``axes`` in turn, as a new float64 array."""
    np = _np()
    b = _native.ndimage_spline_filter1d_host(_f64(x), list(x.shape), list(axes), _c_int(order),
                                             int(mode_code))
    return np.frombuffer(b, dtype=np.float64).reshape(x.shape)


def _normalize_axis(axis, ndim):
    try:
        from numpy.lib.array_utils import normalize_axis_index
    except ImportError:  # NumPy < 2
        from numpy.core.multiarray import normalize_axis_index
    return normalize_axis_index(axis, ndim)


def spline_filter1d(input, order=3, axis=-1, output=_F64, mode="mirror"):
    """scipy.ndimage.spline_filter1d: the B-spline coefficients of ``order`` along ``axis``
    (orders 0 and 1 copy the input), float64 unless ``output`` says otherwise."""
    if _gpu.is_cuda(input):
        return _gpu.spline_filter1d(input, order, axis, None if output is _F64 else output, mode)
    np = _np()
    if output is _F64:
        output = np.float64
    if order < 0 or order > 5:
        raise ScipyRuntimeError("spline order not supported")
    input = np.asarray(_cpu(input, "spline_filter1d"))
    complex_output = np.iscomplexobj(input)
    output = _get_output(output, input, complex_output=complex_output)
    if complex_output:
        spline_filter1d(input.real, order, axis, output.real, mode)
        spline_filter1d(input.imag, order, axis, output.imag, mode)
        return output
    if order in (0, 1):
        output[...] = np.array(input)
        return output
    code = _mode_code(mode)
    axis = _normalize_axis(axis, input.ndim)
    _c_int(order)
    _check_dtype(input, "array")
    _check_dtype(output, "array")
    if input.ndim == 0 or input.shape[axis] <= 1 or input.size == 0:
        return _c_cast_into(output, np.asarray(input, dtype=np.float64))
    return _c_cast_into(output, _filter_f64(input, order, [axis], code))


def spline_filter(input, order=3, output=_F64, mode="mirror"):
    """scipy.ndimage.spline_filter: ``spline_filter1d`` along every axis in turn, each pass
    reading the previous one's result as ``output`` holds it."""
    if _gpu.is_cuda(input):
        return _gpu.spline_filter(input, order, None if output is _F64 else output, mode)
    np = _np()
    if output is _F64:
        output = np.float64
    if order < 2 or order > 5:
        raise ScipyRuntimeError("spline order not supported")
    input = np.asarray(_cpu(input, "spline_filter"))
    complex_output = np.iscomplexobj(input)
    output = _get_output(output, input, complex_output=complex_output)
    if complex_output:
        spline_filter(input.real, order, output.real, mode)
        spline_filter(input.imag, order, output.imag, mode)
        return output
    if input.ndim == 0:
        output[...] = input[...]
        return output
    if output.dtype == np.float64 and input.dtype.name in _DTYPES:
        # every pass stores float64 exactly: one native call filters all the axes
        code = _mode_code(mode)
        axes = [a for a in range(input.ndim) if input.shape[a] > 1]
        r = _filter_f64(input, order, axes, code) if axes and input.size else input
        output[...] = r
        return output
    for axis in range(input.ndim):
        spline_filter1d(input, order, axis, output=output, mode=mode)
        input = output
    return output


def _prefiltered(input, order, mode, cval, prefilter):
    """What scipy interpolates: the float64 spline coefficients of the (prepadded) input for
    ``order > 1`` with ``prefilter``, else the input; and the padding per side."""
    np = _np()
    if not (prefilter and order > 1):
        return input, 0
    npad = 0
    padded = input
    if mode in ("nearest", "grid-constant"):
        npad = 12
        if mode == "grid-constant":
            padded = np.pad(input, npad, mode="constant", constant_values=cval)
        else:
            padded = np.pad(input, npad, mode="edge")
    _check_dtype(padded, "array")
    axes = [a for a in range(padded.ndim) if padded.shape[a] > 1]
    if not axes or padded.size == 0:
        return np.asarray(padded, dtype=np.float64), npad
    return _filter_f64(padded, order, axes, _mode_code(mode)), npad


def _run_geometric(filtered, output, order, code, cval, npad, matrix=None, offset=None,
                   coords=None):
    _check_dtype(filtered)
    _check_dtype(output)
    b = _native.ndimage_geometric_host(
        _f64(filtered), list(filtered.shape), list(output.shape), _c_int(order), code,
        float(cval), int(npad), _store_kind(output.dtype),
        None if matrix is None else [float(v) for v in matrix.ravel()],
        None if offset is None else [float(v) for v in offset],
        None if coords is None else _f64(coords))
    return _write(output, b, output.shape)


def _run_zoom_shift(filtered, output, order, code, cval, npad, zoom=None, shift=None,
                    grid_mode=False):
    _check_dtype(filtered)
    _check_dtype(output)
    if output.ndim != filtered.ndim:
        raise ScipyRuntimeError("output rank must equal the input rank")
    b = _native.ndimage_zoom_shift_host(
        _f64(filtered), list(filtered.shape), list(output.shape),
        None if zoom is None else [float(v) for v in zoom],
        None if shift is None else [float(v) for v in shift],
        _c_int(order), code, float(cval), int(npad), bool(grid_mode), _store_kind(output.dtype))
    return _write(output, b, output.shape)


def _check_order(order):
    if order < 0 or order > 5:
        raise ScipyRuntimeError("spline order not supported")


# --- map_coordinates, geometric_transform ---------------------------------------------------

def map_coordinates(input, coordinates, output=None, order=3, mode="constant", cval=0.0,
                    prefilter=True):
    """scipy.ndimage.map_coordinates: the spline interpolation of ``input`` at
    ``coordinates`` (one row per input axis)."""
    if _gpu.is_cuda(input):
        return _gpu.map_coordinates(input, coordinates, output, order, mode, cval, prefilter)
    np = _np()
    _check_order(order)
    input = np.asarray(_cpu(input, "map_coordinates"))
    coordinates = np.asarray(_cpu(coordinates, "map_coordinates", "coordinates"))
    if np.iscomplexobj(coordinates):
        raise ScipyTypeError("Complex type not supported")
    output_shape = coordinates.shape[1:]
    if input.ndim < 1 or len(output_shape) < 1:
        raise ScipyRuntimeError("input and output rank must be > 0")
    if coordinates.shape[0] != input.ndim:
        raise ScipyRuntimeError("invalid shape for coordinate array")
    complex_output = np.iscomplexobj(input)
    output = _get_output(output, input, shape=output_shape, complex_output=complex_output)
    if complex_output:
        kw = dict(order=order, mode=mode, prefilter=prefilter)
        map_coordinates(input.real, coordinates, output=output.real, cval=np.real(cval), **kw)
        map_coordinates(input.imag, coordinates, output=output.imag, cval=np.imag(cval), **kw)
        return output
    filtered, npad = _prefiltered(input, order, mode, cval, prefilter)
    code = _mode_code(mode)
    if coordinates.dtype.name not in _DTYPES:
        raise ScipyRuntimeError("coordinate array data type not supported")
    return _run_geometric(filtered, output, order, code, cval, npad,
                          coords=coordinates.reshape(input.ndim, -1))


def _low_level_caller(mapping, orank, irank):
    """A Python function calling a ``scipy.LowLevelCallable`` (or a bare PyCapsule) of
    signature ``int (intptr_t *, double *, int, int, void *)`` through ctypes, or None."""
    import ctypes

    capsule = None
    if type(mapping).__name__ == "LowLevelCallable" and isinstance(mapping, tuple):
        # the parsed capsule (its context the user data); LowLevelCallable refuses [0]
        capsule = tuple.__getitem__(mapping, 0)
    elif type(mapping).__name__ == "PyCapsule":
        capsule = mapping
    if capsule is None:
        return None
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_GetContext.restype = ctypes.c_void_p
    api.PyCapsule_GetContext.argtypes = [ctypes.py_object]
    ptr = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
    data = api.PyCapsule_GetContext(capsule)
    # PYFUNCTYPE: the GIL held, and an exception the callback sets is raised here
    proto = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_ssize_t),
                             ctypes.POINTER(ctypes.c_double), ctypes.c_int, ctypes.c_int,
                             ctypes.c_void_p)
    fn = proto(ptr)
    oc = (ctypes.c_ssize_t * max(orank, 1))()
    ic = (ctypes.c_double * max(irank, 1))()

    def call(idx):
        for i, v in enumerate(idx):
            oc[i] = v
        if not fn(oc, ic, orank, irank, data):
            raise ScipyRuntimeError("unknown error in mapping function")
        return tuple(ic[i] for i in range(irank))

    return call


def _as_double(v):
    """``PyFloat_AsDouble``: floats and objects with ``__float__`` or ``__index__``."""
    if isinstance(v, float):
        return v
    if isinstance(v, (str, bytes)):
        raise ScipyTypeError(f"must be real number, not {type(v).__name__}")
    return float(v)


def geometric_transform(input, mapping, output_shape=None, output=None, order=3,
                        mode="constant", cval=0.0, prefilter=True, extra_arguments=(),
                        extra_keywords=None):
    """scipy.ndimage.geometric_transform: ``mapping(output_index, *extra_arguments,
    **extra_keywords)`` gives the input coordinates of each output point (a tuple), called
    once per point in row-major order; the input is interpolated there."""
    if _gpu.is_cuda(input):
        _gpu.refuse_geometric_transform()
    np = _np()
    if extra_keywords is None:
        extra_keywords = {}
    _check_order(order)
    input = np.asarray(_cpu(input, "geometric_transform"))
    if output_shape is None:
        output_shape = input.shape
    if input.ndim < 1 or len(output_shape) < 1:
        raise ScipyRuntimeError("input and output rank must be > 0")
    complex_output = np.iscomplexobj(input)
    output = _get_output(output, input, shape=output_shape, complex_output=complex_output)
    if complex_output:
        kw = dict(order=order, mode=mode, prefilter=prefilter, output_shape=output_shape,
                  extra_arguments=extra_arguments, extra_keywords=extra_keywords)
        geometric_transform(input.real, mapping, output=output.real, cval=np.real(cval), **kw)
        geometric_transform(input.imag, mapping, output=output.imag, cval=np.imag(cval), **kw)
        return output
    filtered, npad = _prefiltered(input, order, mode, cval, prefilter)
    code = _mode_code(mode)
    if not isinstance(extra_arguments, tuple):
        raise ScipyRuntimeError("extra_arguments must be a tuple")
    if not isinstance(extra_keywords, dict):
        raise ScipyRuntimeError("extra_keywords must be a dictionary")
    _check_dtype(filtered)
    _check_dtype(output)
    irank, orank = input.ndim, output.ndim
    low = _low_level_caller(mapping, orank, irank)
    if low is None and not callable(mapping):
        raise ScipyTypeError("mapping must be a callable or a LowLevelCallable")
    coords = np.empty((irank, output.size), dtype=np.float64)
    for p, idx in enumerate(np.ndindex(*output.shape)):
        if low is not None:
            r = low(idx)
        else:
            r = mapping(idx, *extra_arguments, **extra_keywords)
            if not isinstance(r, tuple) or len(r) < irank:
                # scipy reads the items with PyTuple_GetItem, then PyFloat_AsDouble(NULL)
                raise ScipyTypeError("bad argument type for built-in operation")
        for h in range(irank):
            coords[h, p] = _as_double(r[h])
    return _run_geometric(filtered, output, order, code, cval, npad, coords=coords)


# --- affine_transform, shift, zoom, rotate ----------------------------------------------

def _affine_params(matrix, offset, ndim, out_ndim, shape=None):
    """scipy's checks of affine_transform's float64 ``matrix`` and ``offset`` for an input of
    ``ndim`` axes (``shape``, for the message) and an output of ``out_ndim``: the matrix (a
    1-D diagonal, or ``ndim × out_ndim``; a homogeneous one split) and the float64 offset."""
    np = _np()
    if matrix.ndim not in (1, 2) or matrix.shape[0] < 1:
        raise ScipyRuntimeError("no proper affine matrix provided")
    if (matrix.ndim == 2 and matrix.shape[1] == ndim + 1
            and matrix.shape[0] in (ndim, ndim + 1)):
        if matrix.shape[0] == ndim + 1:
            exptd = [0] * ndim + [1]
            if not np.all(matrix[ndim] == exptd):
                raise InvalidInputError(
                    f"Expected homogeneous transformation matrix with shape {matrix.shape} for "
                    f"image shape {shape}, but bottom row was not equal to {exptd}")
        offset = matrix[:ndim, ndim]
        matrix = matrix[:ndim, :ndim]
    if matrix.shape[0] != ndim:
        raise ScipyRuntimeError("affine matrix has wrong number of rows")
    if matrix.ndim == 2 and matrix.shape[1] != out_ndim:
        raise ScipyRuntimeError("affine matrix has wrong number of columns")
    offset = _normalize_sequence(offset, ndim)
    offset = np.asarray(offset, dtype=np.float64)
    if offset.ndim != 1 or offset.shape[0] < 1:
        raise ScipyRuntimeError("no proper offset provided")
    return matrix, offset


def affine_transform(input, matrix, offset=0.0, output_shape=None, output=None, order=3,
                     mode="constant", cval=0.0, prefilter=True):
    """scipy.ndimage.affine_transform: the input interpolated at ``matrix @ o + offset`` for
    each output index ``o`` (a 1-D ``matrix`` is a diagonal; an ``(ndim + 1)``-column one a
    homogeneous transform)."""
    if _gpu.is_cuda(input):
        return _gpu.affine_transform(input, matrix, offset, output_shape, output, order, mode, cval,
                                     prefilter)
    np = _np()
    _check_order(order)
    input = np.asarray(_cpu(input, "affine_transform"))
    if output_shape is None:
        if isinstance(output, np.ndarray):
            output_shape = output.shape
        else:
            output_shape = input.shape
    if input.ndim < 1 or len(output_shape) < 1:
        raise ScipyRuntimeError("input and output rank must be > 0")
    complex_output = np.iscomplexobj(input)
    output = _get_output(output, input, shape=output_shape, complex_output=complex_output)
    if complex_output:
        kw = dict(offset=offset, output_shape=output_shape, order=order, mode=mode,
                  prefilter=prefilter)
        affine_transform(input.real, matrix, output=output.real, cval=np.real(cval), **kw)
        affine_transform(input.imag, matrix, output=output.imag, cval=np.imag(cval), **kw)
        return output
    filtered, npad = _prefiltered(input, order, mode, cval, prefilter)
    code = _mode_code(mode)
    matrix = np.asarray(_cpu(matrix, "affine_transform", "matrix"), dtype=np.float64)
    matrix, offset = _affine_params(matrix, offset, input.ndim, output.ndim, input.shape)
    if matrix.ndim == 1:
        return _run_zoom_shift(filtered, output, order, code, cval, npad, zoom=matrix,
                               shift=offset / matrix)
    return _run_geometric(filtered, output, order, code, cval, npad, matrix=matrix,
                          offset=offset)


def shift(input, shift, output=None, order=3, mode="constant", cval=0.0, prefilter=True):
    """scipy.ndimage.shift: the input moved by ``shift`` (per axis or one for all), output
    index ``o`` reading the input at ``o - shift``."""
    if _gpu.is_cuda(input):
        return _gpu.shift(input, shift, output, order, mode, cval, prefilter)
    np = _np()
    _check_order(order)
    input = np.asarray(_cpu(input, "shift"))
    if input.ndim < 1:
        raise ScipyRuntimeError("input and output rank must be > 0")
    complex_output = np.iscomplexobj(input)
    output = _get_output(output, input, complex_output=complex_output)
    if complex_output:
        kw = dict(order=order, mode=mode, prefilter=prefilter)
        globals()["shift"](input.real, shift, output=output.real, cval=np.real(cval), **kw)
        globals()["shift"](input.imag, shift, output=output.imag, cval=np.imag(cval), **kw)
        return output
    filtered, npad = _prefiltered(input, order, mode, cval, prefilter)
    code = _mode_code(mode)
    s = _normalize_sequence(shift, input.ndim)
    s = np.asarray([-ii for ii in s], dtype=np.float64)
    return _run_zoom_shift(filtered, output, order, code, cval, npad, shift=s)


def zoom(input, zoom, output=None, order=3, mode="constant", cval=0.0, prefilter=True, *,
         grid_mode=False):
    """scipy.ndimage.zoom: the input resampled to ``round(shape * zoom)``, the corner samples
    aligned (or, with ``grid_mode``, the pixel edges)."""
    if _gpu.is_cuda(input):
        return _gpu.zoom(input, zoom, output, order, mode, cval, prefilter, grid_mode)
    np = _np()
    _check_order(order)
    input = np.asarray(_cpu(input, "zoom"))
    if input.ndim < 1:
        raise ScipyRuntimeError("input and output rank must be > 0")
    zoom = _normalize_sequence(zoom, input.ndim)
    output_shape = tuple(int(round(ii * jj)) for ii, jj in zip(input.shape, zoom))
    complex_output = np.iscomplexobj(input)
    output = _get_output(output, input, shape=output_shape, complex_output=complex_output)
    if all(z == 1 for z in zoom) and prefilter:
        output[...] = input
        return output
    if complex_output:
        kw = dict(order=order, mode=mode, prefilter=prefilter, grid_mode=grid_mode)
        globals()["zoom"](input.real, zoom, output=output.real, cval=np.real(cval), **kw)
        globals()["zoom"](input.imag, zoom, output=output.imag, cval=np.imag(cval), **kw)
        return output
    filtered, npad = _prefiltered(input, order, mode, cval, prefilter)
    if grid_mode:
        suggest = {"constant": "grid-constant", "wrap": "grid-wrap"}.get(mode)
        if suggest is not None:
            warn_at_caller(f"It is recommended to use mode = {suggest} instead of {mode} when "
                          f"grid_mode is True.")
    code = _mode_code(mode)
    zoom_div = np.array(output_shape)
    zoom_nominator = np.array(input.shape)
    if not grid_mode:
        zoom_div -= 1
        zoom_nominator -= 1
    factors = np.divide(zoom_nominator, zoom_div,
                        out=np.ones_like(input.shape, dtype=np.float64), where=zoom_div != 0)
    return _run_zoom_shift(filtered, output, order, code, cval, npad, zoom=factors,
                           grid_mode=grid_mode)


# cephes' sindg/cosdg (scipy.special), so that rotate's matrix is scipy's to the last bit
_SINCOF = (1.58962301572218447952E-10, -2.50507477628503540135E-8,
           2.75573136213856773549E-6, -1.98412698295895384658E-4,
           8.33333333332211858862E-3, -1.66666666666666307295E-1)
_COSCOF = (1.13678171382044553091E-11, -2.08758833757683644217E-9,
           2.75573155429816611547E-7, -2.48015872936186303776E-5,
           1.38888888888806666760E-3, -4.16666666666666348141E-2,
           4.99999999999999999798E-1)
_PI180 = 1.74532925199432957692E-2


def _polevl(x, coef):
    ans = coef[0]
    for c in coef[1:]:
        ans = ans * x + c
    return ans


def _deg_trig(x, cosine):
    """sin (``cosine`` false) or cos of ``x`` degrees: reduced to an octant exactly, then
    cephes' polynomials, as scipy.special.sindg / cosdg compute them."""
    x = float(x)
    if math.isnan(x):
        return x
    sign = 1
    if x < 0:
        x = -x
        if not cosine:
            sign = -1
    if x > 1.0e14:
        return 0.0
    y = math.floor(x / 45.0)
    z = y - math.ldexp(math.floor(math.ldexp(y, -4)), 4)
    j = int(z)
    if j & 1:
        j += 1
        y += 1.0
    j &= 7
    if j > 3:
        sign = -sign
        j -= 4
    if cosine and j > 1:
        sign = -sign
    z = (x - y * 45.0) * _PI180
    zz = z * z
    use_cos = (j in (1, 2)) != cosine
    if use_cos:
        r = 1.0 - zz * _polevl(zz, _COSCOF)
    else:
        r = z + z * (zz * _polevl(zz, _SINCOF))
    return -r if sign < 0 else r


def _rotate_planes_gpu(input, axes, rot_matrix, offset, out_plane, output, order, mode, cval,
                       prefilter):
    """rotate of a CUDA array of more than 2 axes, as scipy does it: every plane of ``axes``
    rotated in turn, each by the 2-D GPU path (so each plane has the CPU path's bits). The
    planes are made contiguous once (the rotated axes last), the results stacked in the
    input's library and the axes put back. CuPy and torch arrays; others are refused (the
    drop-in layer then runs them on the host)."""
    if output is not None and hasattr(output, "shape"):
        raise InvalidInputError("rotate: output= an array of a CUDA input of more than 2 axes: give a dtype")
    if any(int(d) == 0 for d in input.shape):
        raise InvalidInputError("rotate: an empty CUDA input of more than 2 axes")
    lib = type(input).__module__.split(".")[0]
    if lib == "cupy":
        import cupy as xp

        def contiguous(a):
            return xp.ascontiguousarray(a)

        moveaxis, empty = xp.moveaxis, (lambda shape, like: xp.empty(shape, dtype=like.dtype))
    elif lib == "torch":
        import torch

        def contiguous(a):
            return a.contiguous()

        moveaxis = torch.movedim
        empty = (lambda shape, like: torch.empty(shape, dtype=like.dtype, device=like.device))
    else:
        raise InvalidInputError(
            f"rotate: a {type(input).__name__} of {len(input.shape)} axes on the GPU: planes are rotated on "
            f"CuPy and torch arrays; give one of those or a NumPy array")
    x = contiguous(moveaxis(input, tuple(axes), (-2, -1)))
    lead = tuple(int(d) for d in x.shape[:-2])
    planes = x.reshape((-1,) + tuple(int(d) for d in x.shape[-2:]))
    y = None
    for b in range(planes.shape[0]):
        r = affine_transform(planes[b], rot_matrix, offset, out_plane, output, order, mode, cval,
                             prefilter)
        if y is None:
            y = empty((planes.shape[0],) + tuple(out_plane), r)
        y[b] = r
    y = y.reshape(lead + tuple(out_plane))
    return contiguous(moveaxis(y, (-2, -1), tuple(axes)))


def rotate(input, angle, axes=(1, 0), reshape=True, output=None, order=3, mode="constant",
           cval=0.0, prefilter=True):
    """scipy.ndimage.rotate: the plane of ``axes`` rotated by ``angle`` degrees about its
    centre (every such plane of an n-D input), the output enlarged to hold the whole rotated
    input when ``reshape``."""
    np = _np()
    cuda = _gpu.is_cuda(input)
    input_arr = input if cuda else np.asarray(_cpu(input, "rotate"))
    ndim = len(input_arr.shape)
    if ndim < 2:
        raise InvalidInputError("input array should be at least 2D")
    axes = list(axes)
    if len(axes) != 2:
        raise InvalidInputError("axes should contain exactly two values")
    if not all(float(ax).is_integer() for ax in axes):
        raise InvalidInputError("axes should contain only integer values")
    if axes[0] < 0:
        axes[0] += ndim
    if axes[1] < 0:
        axes[1] += ndim
    if axes[0] < 0 or axes[1] < 0 or axes[0] >= ndim or axes[1] >= ndim:
        raise InvalidInputError("invalid rotation plane specified")
    axes.sort()
    c, s = _deg_trig(angle, True), _deg_trig(angle, False)
    rot_matrix = np.array([[c, s], [-s, c]])
    img_shape = np.asarray(input_arr.shape)
    in_plane_shape = img_shape[axes]
    if reshape:
        iy, ix = in_plane_shape
        out_bounds = rot_matrix @ [[0, 0, iy, iy], [0, ix, 0, ix]]
        out_plane_shape = (np.ptp(out_bounds, axis=1) + 0.5).astype(int)
    else:
        out_plane_shape = img_shape[axes]
    out_center = rot_matrix @ ((out_plane_shape - 1) / 2)
    in_center = (in_plane_shape - 1) / 2
    offset = in_center - out_center
    output_shape = img_shape
    output_shape[axes] = out_plane_shape
    output_shape = tuple(int(d) for d in output_shape)
    if cuda:
        if ndim > 2:
            return _rotate_planes_gpu(input, axes, rot_matrix, offset, tuple(out_plane_shape), output,
                                      order, mode, cval, prefilter)
        return affine_transform(input, rot_matrix, offset, output_shape, output, order, mode, cval,
                                prefilter)
    complex_output = np.iscomplexobj(input_arr)
    output = _get_output(output, input_arr, shape=output_shape, complex_output=complex_output)
    if ndim <= 2:
        affine_transform(input_arr, rot_matrix, offset, output_shape, output, order, mode,
                         cval, prefilter)
    else:
        planes = itertools.product(
            *[[slice(None)] if ax in axes else range(img_shape[ax]) for ax in range(ndim)])
        out_plane_shape = tuple(out_plane_shape)
        for coordinates in planes:
            affine_transform(input_arr[coordinates], rot_matrix, offset, out_plane_shape,
                             output[coordinates], order, mode, cval, prefilter)
    return output

