"""``kiln.ndimage``'s interpolation on CUDA arrays: ``spline_filter1d``, ``spline_filter``,
``map_coordinates``, ``affine_transform``, ``shift``, ``zoom`` and ``rotate`` of an array on
a GPU (a kiln tensor, a CuPy array, a torch CUDA tensor, any DLPack array on a CUDA device)
run there, in ``kernels/interp.cu``, and return an array of the input's kind on that device.

The steps are the CPU path's (``_ndimage_interp``), each on the device: the prepadding of 12
samples for ``nearest`` and ``grid-constant`` before the prefilter (an order-0 shift by 12,
which copies each sample), the float64 spline prefilter along every axis longer than one
sample, then the resampling of the float64 coefficients (or of the input itself for order 0
and 1 or ``prefilter=False``), each output value rounded once into float32 or stored as
float64. The kernels run the CPU loops' float64 operations in order without contraction, so
the values are the CPU path's to the bit. One difference: a padded sample that is ``-0.0``
becomes ``+0.0`` (the shift adds it to ``0.0``), which can flip the sign of a zero result in
a region of zeros at the edge.

What the GPU path takes: float32 and float64 inputs of 1 to 3 axes (``rotate``: 2), output
``None`` (the input's dtype; float64 for the spline filters) or a float32 / float64 dtype.
Everything else is refused with ``InvalidInputError`` naming what to change: output arrays,
other dtypes, complex data, more axes, and ``geometric_transform`` (a Python mapping called
per output point). Coordinates, matrices and offsets may be on the host or the device (they
are read on the host: the coordinates are uploaded again as float64).
"""

from __future__ import annotations

from . import _native
from ._errors import InvalidInputError, warn_at_caller
from .ndimage import ScipyRuntimeError, ScipyTypeError, _dtype_name

_FLOATS = ("float32", "float64")
# DLPack device types of memory a CUDA kernel reads: kDLCUDA, kDLCUDAManaged
_CUDA_DEVICES = (2, 13)


def _np():
    import numpy as np

    return np


def is_cuda(x) -> bool:
    """Whether ``x`` is an array on a CUDA device."""
    if isinstance(x, _native.Tensor):
        return bool(x.is_cuda)
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None or _np_module(x):
        return False
    try:
        return dev()[0] in _CUDA_DEVICES
    except Exception:  # an object whose DLPack device cannot be read is not a CUDA array
        return False


def _np_module(x) -> bool:
    return type(x).__module__.split(".")[0] == "numpy"


def host(x):
    """``x`` (an array on any device, or anything ``numpy.asarray`` takes) as a NumPy array."""
    np = _np()
    if x is None or _np_module(x):
        return x
    if isinstance(x, _native.Tensor):
        return np.from_dlpack(x.cpu() if x.is_cuda else x)
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        return x.get()
    if mod == "torch":
        return x.detach().cpu().numpy()
    if is_cuda(x):
        return np.from_dlpack(_native.asarray(x, "cpu", None))
    return np.asarray(x)


def _like(y, like):
    from . import _like as like_of

    return like_of(y, like, "like")


def _input(x, fname, max_ndim=3):
    """The dtype name and shape of a CUDA input, after the checks of the GPU path."""
    dtype = _dtype_name(x)
    if "complex" in dtype:
        raise InvalidInputError(
            f"{fname}: complex input on the GPU is not supported; interpolate its real and imaginary parts, "
            f"or give a NumPy array (the CPU path takes complex data)")
    if dtype not in _FLOATS:
        raise InvalidInputError(
            f"{fname}: input dtype {dtype} on the GPU is not supported: float32 or float64 (cast first), "
            f"or give a NumPy array (the CPU path takes every dtype scipy does)")
    shape = tuple(int(d) for d in x.shape)
    if not 1 <= len(shape) <= max_ndim:
        raise InvalidInputError(
            f"{fname}: input has {len(shape)} axes; on the GPU kiln.ndimage interpolates 1 to {max_ndim}, "
            f"a NumPy array of any rank runs on the CPU")
    return dtype, shape


def _out_dtype(output, fname, default):
    """The result's dtype name: ``default`` for ``None``, else ``output`` as a float dtype."""
    if output is None:
        return default
    np = _np()
    if isinstance(output, (str, type, np.dtype)):
        try:
            name = np.dtype(output).name
        except TypeError:
            name = str(output)
    elif type(output).__module__.split(".")[0] == "torch" and not hasattr(output, "shape"):
        name = str(output).replace("torch.", "")
    else:
        raise InvalidInputError(
            f"{fname}: output= an array is not supported with a CUDA input; pass a dtype (float32 or float64) "
            f"or None, and use the returned array")
    if name not in _FLOATS:
        raise InvalidInputError(
            f"{fname}: output dtype {name} on the GPU is not supported: float32 or float64")
    return name


def _filter(x, axes, order, code, out):
    """``x`` spline-filtered along ``axes`` in float64 on its device, as ``out`` (a new array
    also where no axis is filtered)."""
    return _native.ndimage_spline_filter(x, list(axes), int(order), int(code), out)


def _prefiltered(x, dtype, shape, order, mode, code, cval, prefilter):
    """The float64 coefficients the resampling reads (the input itself for order 0 and 1 or
    ``prefilter=False``) and the padding per side, as ``_ndimage_interp._prefiltered``."""
    if not (prefilter and order > 1):
        return x, 0, shape
    npad = 0
    if mode in ("nearest", "grid-constant"):
        npad = 12
        # np.pad stores cval in the input's dtype
        c = float(_np().float32(cval)) if dtype == "float32" else float(cval)
        pshape = [d + 2 * npad for d in shape]
        x = _native.ndimage_resample(x, pshape, 0, code, c, 0, "float64",
                                     shift=[-float(npad)] * len(shape))
        shape = tuple(pshape)
    axes = [a for a in range(len(shape)) if shape[a] > 1]
    return _filter(x, axes, order, code, "float64"), npad, shape


def _order(order):
    from ._ndimage_interp import _c_int, _check_order

    _check_order(order)
    return _c_int(order)


def _mode(mode):
    from ._ndimage_interp import _mode_code

    return _mode_code(mode)


def spline_filter1d(input, order, axis, output, mode):
    from ._ndimage_interp import _normalize_axis

    fname = "spline_filter1d"
    if order < 0 or order > 5:
        raise ScipyRuntimeError("spline order not supported")
    _, shape = _input(input, fname)
    out = _out_dtype(output, fname, "float64")
    if order in (0, 1):
        return _like(_filter(input, [], 0, 3, out), input)
    code = _mode(mode)
    axis = _normalize_axis(axis, len(shape))
    return _like(_filter(input, [axis], _order(order), code, out), input)


def spline_filter(input, order, output, mode):
    fname = "spline_filter"
    if order < 2 or order > 5:
        raise ScipyRuntimeError("spline order not supported")
    _, shape = _input(input, fname)
    out = _out_dtype(output, fname, "float64")
    code = _mode(mode)
    order = _order(order)
    if out == "float64":
        return _like(_filter(input, [a for a in range(len(shape)) if shape[a] > 1], order, code, out),
                     input)
    # a float32 output: each pass reads the previous one's float32 values, as scipy's loop
    # over spline_filter1d with output= does
    y = input
    for axis in range(len(shape)):
        y = _filter(y, [axis], order, code, out)
    return _like(y, input)


def map_coordinates(input, coordinates, output, order, mode, cval, prefilter):
    np = _np()
    fname = "map_coordinates"
    order = _order(order)
    dtype, shape = _input(input, fname)
    coordinates = np.asarray(host(coordinates))
    if np.iscomplexobj(coordinates):
        raise ScipyTypeError("Complex type not supported")
    oshape = coordinates.shape[1:]
    if len(oshape) < 1:
        raise ScipyRuntimeError("input and output rank must be > 0")
    if coordinates.shape[0] != len(shape):
        raise ScipyRuntimeError("invalid shape for coordinate array")
    if len(oshape) > 3:
        raise InvalidInputError(
            f"{fname}: the output has {len(oshape)} axes; on the GPU kiln.ndimage interpolates into 1 to 3")
    out = _out_dtype(output, fname, dtype)
    code = _mode(mode)
    coeffs, npad, _ = _prefiltered(input, dtype, shape, order, mode, code, cval, prefilter)
    coords = np.ascontiguousarray(coordinates, dtype=np.float64).reshape(len(shape), -1)
    y = _native.ndimage_resample(coeffs, list(oshape), order, code, float(cval), npad, out,
                                 coords=coords.tobytes())
    return _like(y, input)


def affine_transform(input, matrix, offset, output_shape, output, order, mode, cval, prefilter):
    from ._ndimage_interp import _affine_params

    np = _np()
    fname = "affine_transform"
    order = _order(order)
    dtype, shape = _input(input, fname)
    if output_shape is None:
        output_shape = shape
    output_shape = tuple(int(d) for d in output_shape)
    if len(output_shape) < 1:
        raise ScipyRuntimeError("input and output rank must be > 0")
    if len(output_shape) > 3:
        raise InvalidInputError(
            f"{fname}: the output has {len(output_shape)} axes; on the GPU kiln.ndimage interpolates into 1 to 3")
    out = _out_dtype(output, fname, dtype)
    code = _mode(mode)
    coeffs, npad, _ = _prefiltered(input, dtype, shape, order, mode, code, cval, prefilter)
    matrix = np.asarray(host(matrix), dtype=np.float64)
    matrix, offset = _affine_params(matrix, host(offset), len(shape), len(output_shape))
    if matrix.ndim == 1:
        if len(output_shape) != len(shape):
            raise ScipyRuntimeError("output rank must equal the input rank")
        y = _native.ndimage_resample(coeffs, list(output_shape), order, code, float(cval), npad, out,
                                     zoom=[float(v) for v in matrix],
                                     shift=[float(v) for v in offset / matrix])
    else:
        y = _native.ndimage_resample(coeffs, list(output_shape), order, code, float(cval), npad, out,
                                     matrix=[float(v) for v in matrix.ravel()],
                                     offset=[float(v) for v in offset])
    return _like(y, input)


def shift(input, shift, output, order, mode, cval, prefilter):
    from ._ndimage_interp import _normalize_sequence

    fname = "shift"
    order = _order(order)
    dtype, shape = _input(input, fname)
    out = _out_dtype(output, fname, dtype)
    code = _mode(mode)
    coeffs, npad, _ = _prefiltered(input, dtype, shape, order, mode, code, cval, prefilter)
    s = [-float(v) for v in _normalize_sequence(host(shift), len(shape))]
    y = _native.ndimage_resample(coeffs, list(shape), order, code, float(cval), npad, out, shift=s)
    return _like(y, input)


def zoom(input, zoom, output, order, mode, cval, prefilter, grid_mode):
    from ._ndimage_interp import _normalize_sequence

    np = _np()
    fname = "zoom"
    order = _order(order)
    dtype, shape = _input(input, fname)
    zoom = _normalize_sequence(host(zoom), len(shape))
    output_shape = tuple(int(round(ii * jj)) for ii, jj in zip(shape, zoom))
    out = _out_dtype(output, fname, dtype)
    if all(z == 1 for z in zoom) and prefilter:
        # scipy copies the input into the output
        return _like(_filter(input, [], 0, 3, out), input)
    code = _mode(mode)
    coeffs, npad, _ = _prefiltered(input, dtype, shape, order, mode, code, cval, prefilter)
    if grid_mode:
        suggest = {"constant": "grid-constant", "wrap": "grid-wrap"}.get(mode)
        if suggest is not None:
            warn_at_caller(f"It is recommended to use mode = {suggest} instead of {mode} when "
                          f"grid_mode is True.")
    zoom_div = np.array(output_shape)
    zoom_nominator = np.array(shape)
    if not grid_mode:
        zoom_div -= 1
        zoom_nominator -= 1
    factors = np.divide(zoom_nominator, zoom_div, out=np.ones_like(shape, dtype=np.float64),
                        where=zoom_div != 0)
    y = _native.ndimage_resample(coeffs, list(output_shape), order, code, float(cval), npad, out,
                                 zoom=[float(v) for v in factors], grid_mode=bool(grid_mode))
    return _like(y, input)


def refuse_geometric_transform():
    raise InvalidInputError(
        "geometric_transform: a CUDA input is not supported (the Python mapping is called once per output "
        "point on the host); compute the coordinates and call map_coordinates, which runs on the GPU, or give "
        "a NumPy array")
