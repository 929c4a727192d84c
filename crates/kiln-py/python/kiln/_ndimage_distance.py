"""``kiln.ndimage``'s distance transforms: scipy.ndimage's ``distance_transform_edt``,
``distance_transform_cdt`` and ``distance_transform_bf``, natively on the CPU
(``kiln_core::imaging::distance``, the GIL released).

The transforms are ports of scipy's C routines with their scan orders and tie rules, so the
distances and the indices are scipy's to the bit, ties included; ``distance_transform_edt``'s
per-axis passes run in parallel (the result does not depend on the thread count). What scipy
decides in Python is decided here the same way and in the same order: the argument checks
and their exception types (``RuntimeError`` where scipy raises it, ``ValueError`` for the
chamfer transform's arrays, ``TypeError`` for its 0-D input), ``sampling`` as scipy normalises
it, the out arrays ``distances=`` and ``indices=`` (filled in place, ``None`` returned for
them), a 0-D input made 1-D by ``distance_transform_edt``, and what scipy leaves in an
``indices=`` array it does not overwrite (``distance_transform_edt`` of an input without
background keeps all but its first plane; ``distance_transform_cdt`` and
``distance_transform_bf`` gather their results from its content, as scipy does).

Inputs are NumPy arrays or anything ``numpy.asarray`` takes (non-zero is foreground); a kiln
tensor or another DLPack array on the CPU is read through DLPack. With ``KILN_GPU_PREVIEW=1``,
``distance_transform_edt`` of a CUDA array (CuPy, torch; 1 to 4 axes, no out arrays) runs on
its device (``kernels/distance.cu``, the same bits); otherwise arrays on a GPU are refused
here, and kiln.ndimage's drop-in layer runs them on host copies.
"""

from __future__ import annotations

from . import _native
from ._errors import InvalidInputError
from ._ndimage_rank import _h_seq, generate_binary_structure
from .ndimage import ScipyRuntimeError, ScipyTypeError, _is_numpy

_EDT = "distance_transform_edt"
_CDT = "distance_transform_cdt"
_BF = "distance_transform_bf"


def _np():
    import numpy as np

    return np


def _cpu(x, fname):
    """``x`` as scipy would read it: NumPy arrays, lists and scalars as they are; a kiln
    tensor or another DLPack array through DLPack when it is on the CPU."""
    if x is None or _is_numpy(x):
        return x
    np = _np()
    dev = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else None
    if dev == 1:  # kDLCPU
        return np.from_dlpack(x)
    raise InvalidInputError(
        f"{fname}: input is a {type(x).__module__}.{type(x).__name__} off the CPU; kiln.ndimage's "
        f"distance transforms run on the CPU: copy it to a NumPy array first")


def _mask(x):
    """The C-contiguous bool mask of ``x``'s truthy elements (scipy's ``np.where(input, 1,
    0)``)."""
    np = _np()
    if x.dtype == np.bool_:
        m = x
    elif x.dtype.kind in "iufc":
        m = x != 0
    else:
        m = np.where(x, True, False)
    return np.asarray(m, order="C")


def _arg_check(distances_out, indices_out, return_distances, return_indices):
    """scipy's ``_distance_tranform_arg_check``."""
    msgs = []
    if not return_distances and not return_indices:
        msgs.append("at least one of return_distances/return_indices must be True")
    if distances_out and not return_distances:
        msgs.append("return_distances must be True if distances is supplied")
    if indices_out and not return_indices:
        msgs.append("return_indices must be True if indices is supplied")
    if msgs:
        raise ScipyRuntimeError(", ".join(msgs))


def _sampling(sampling, ndim):
    """scipy's sampling: one value per axis as float64 (``RuntimeError`` for a sequence of
    another length)."""
    if sampling is None:
        return None
    np = _np()
    seq = _h_seq(sampling, ndim)
    try:
        return np.asarray(seq, dtype=np.float64)
    except TypeError as e:
        raise ScipyTypeError(f"sampling: {e}") from e
    except ValueError as e:
        raise InvalidInputError(f"sampling: {e}") from e


def _result(dt, ft, return_distances, return_indices, dt_inplace, ft_inplace):
    res = []
    if return_distances and not dt_inplace:
        res.append(dt)
    if return_indices and not ft_inplace:
        res.append(ft)
    if len(res) == 2:
        return tuple(res)
    if len(res) == 1:
        return res[0]
    return None


def _gather(indices, flat, shape):
    """scipy's last step with an ``indices=`` array: each plane of the array, raveled, taken
    at the flat features (the array's own content, as scipy reads it)."""
    np = _np()
    for ii in range(indices.shape[0]):
        indices[ii, ...] = np.ravel(indices[ii, ...])[flat].reshape(shape)
    return indices


def _edt_device_on():
    """Whether ``distance_transform_edt`` of a CUDA array runs on its device:
    ``KILN_GPU_PREVIEW=1``. Off by default until the device path's bitwise tests have passed
    on a GPU (the kernels are checked on the host in CI); off, such an array runs on host
    copies (the drop-in layer)."""
    import os

    return os.environ.get("KILN_GPU_PREVIEW", "0") == "1"


def _on_cuda(x):
    """Whether ``x`` is a CUDA array of another library (CuPy, torch): the device path's
    input."""
    from ._ndimage_interp_gpu import is_cuda

    return not isinstance(x, _native.Tensor) and is_cuda(x)


def _edt_cuda(input, sampling, return_distances, return_indices):
    """``distance_transform_edt`` of a CUDA array (CuPy, torch) on its device: the CPU
    path's (so scipy's) distances and indices bit for bit (``distance.cu``, checked against
    it), as a float64 array and an int32 ``(ndim, ...)`` array of the input's library. Takes
    1 to 4 axes of any dtype (non-zero is foreground) and no ``distances=``/``indices=``
    arrays; anything else is refused with the reason (kiln.ndimage's drop-in layer then runs
    it on the host)."""
    np = _np()
    from ._ndimage_measure import _synchronize
    from ._userkernel import DeviceArray, _device_of, _empty_like_caller

    x = DeviceArray(input, f"{_EDT}: input")
    ndim = len(x.shape)
    if not 1 <= ndim <= 4:
        raise InvalidInputError(
            f"{_EDT}: a {ndim}-axis CUDA array; on the GPU the transform takes 1 to 4 axes "
            "(pass a host array)")
    s = _sampling(sampling, ndim)
    shape = tuple(int(v) for v in x.shape)
    # the mask in the input's library, on its device, one byte an element
    mask = input != 0
    mod = type(input).__module__.split(".")[0]
    if mod == "torch":
        mask = mask.contiguous()
    else:
        import cupy

        mask = cupy.ascontiguousarray(mask)
    m = DeviceArray(mask, f"{_EDT}: mask")
    dt = _empty_like_caller(input, shape, np.float64) if return_distances else None
    ft = _empty_like_caller(input, (ndim,) + shape, np.int32) if return_indices else None
    ptr = lambda a: 0 if a is None else DeviceArray(a, _EDT).ptr  # noqa: E731
    _synchronize(input)
    _native.ndimage_edt_cuda(
        m.ptr, list(shape), None if s is None else [float(v) for v in s], ptr(dt), ptr(ft),
        _device_of([input]))
    return _result(dt, ft, return_distances, return_indices, False, False)


def distance_transform_edt(input, sampling=None, return_distances=True,
                           return_indices=False, distances=None, indices=None):
    """scipy.ndimage.distance_transform_edt: the exact Euclidean distance of every non-zero
    element to the nearest zero element (float64), with ``sampling`` the spacing along each
    axis, and (``return_indices``) that element's coordinates (int32, one plane per axis)."""
    np = _np()
    ft_inplace = isinstance(indices, np.ndarray)
    dt_inplace = isinstance(distances, np.ndarray)
    _arg_check(dt_inplace, ft_inplace, return_distances, return_indices)
    if distances is None and indices is None and _on_cuda(input) and _edt_device_on():
        return _edt_cuda(input, sampling, return_distances, return_indices)
    m = np.atleast_1d(_mask(np.asarray(_cpu(input, _EDT))))
    s = _sampling(sampling, m.ndim)
    if ft_inplace:
        if indices.shape != (m.ndim,) + m.shape:
            raise ScipyRuntimeError("indices array has wrong shape")
        if indices.dtype.type != np.int32:
            raise ScipyRuntimeError("indices array must be int32")
    if ft_inplace and m.size and m.all():
        # no background: scipy marks plane 0 with -1 and leaves the rest of the array as it
        # was, and computes the distances from that
        indices[0] = -1
        dt = None
        if return_distances:
            dt = (indices - np.indices(m.shape, dtype=indices.dtype)).astype(np.float64)
            if s is not None:
                for ii in range(len(s)):
                    dt[ii, ...] *= s[ii]
            np.multiply(dt, dt, dt)
            dt = np.sqrt(np.add.reduce(dt, axis=0))
        ft = indices
    else:
        db, ib = _native.ndimage_edt_host(
            m, list(m.shape), None if s is None else [float(v) for v in s],
            bool(return_distances), bool(return_indices or ft_inplace))
        dt = None if db is None else np.frombuffer(db, np.float64).reshape(m.shape)
        ft = None if ib is None else np.frombuffer(ib, np.int32).reshape((m.ndim,) + m.shape)
        if ft_inplace:
            indices[...] = ft
            ft = indices
    if return_distances and dt_inplace:
        if distances.shape != dt.shape:
            raise ScipyRuntimeError("distances array has wrong shape")
        if distances.dtype.type != np.float64:
            raise ScipyRuntimeError("distances array must be float64")
        distances[...] = dt
    return _result(dt, ft, return_distances, return_indices, dt_inplace, ft_inplace)


def _metric_structure(metric, x):
    """The chamfer metric as scipy's C code reads it: the ``3**ndim`` bytes of the metric's
    data (C order, native byte order), of which the first half (before the centre) is used
    (``1`` where a byte is non-zero): a bool structure as it is; another type by its raw
    bytes, as scipy reads it."""
    np = _np()
    if isinstance(metric, str):
        if metric in ("taxicab", "cityblock", "manhattan"):
            metric = generate_binary_structure(x.ndim, 1)
        elif metric == "chessboard":
            metric = generate_binary_structure(x.ndim, x.ndim)
        else:
            raise InvalidInputError("invalid metric provided")
    else:
        try:
            metric = np.asarray(metric)
        except Exception as e:
            raise InvalidInputError("invalid metric provided") from e
        for n in metric.shape:
            if n != 3:
                raise InvalidInputError("metric sizes must be equal to 3")
    return metric


def _structure_bytes(metric, ndim):
    np = _np()
    if metric.ndim != ndim:
        # scipy reads past the metric's dimensions here (undefined results or a crash)
        raise InvalidInputError(
            f"{_CDT}: the metric has {metric.ndim} axes for an input of {ndim}: they must agree")
    if metric.dtype.hasobject or metric.dtype.kind == "V":
        raise InvalidInputError(f"{_CDT}: a metric of dtype {metric.dtype} is not supported")
    raw = np.ascontiguousarray(metric, dtype=metric.dtype.newbyteorder("="))
    b = raw.reshape(-1).view(np.uint8)
    size = metric.size
    st = np.zeros(size, np.uint8)
    st[:size // 2] = b[:size // 2] != 0
    return st.tobytes()


def distance_transform_cdt(input, metric="chessboard", return_distances=True,
                           return_indices=False, distances=None, indices=None):
    """scipy.ndimage.distance_transform_cdt: the chamfer distance (int32) of every non-zero
    element to the nearest zero element through the metric's neighbours ('chessboard',
    'taxicab' or a ``3**ndim`` structure), -1 where none is reached, and
    (``return_indices``) that element's coordinates."""
    np = _np()
    ft_inplace = isinstance(indices, np.ndarray)
    dt_inplace = isinstance(distances, np.ndarray)
    _arg_check(dt_inplace, ft_inplace, return_distances, return_indices)
    x = np.asarray(_cpu(input, _CDT))
    metric = _metric_structure(metric, x)
    if dt_inplace:
        if distances.dtype.type != np.int32:
            raise InvalidInputError("distances must be of int32 type")
        if distances.shape != x.shape:
            raise InvalidInputError("distances has wrong shape")
    m = _mask(x)
    if x.ndim == 0:
        # scipy's second pass gets a NumPy scalar (a 0-D array reversed) and refuses it
        if dt_inplace:
            distances[...] = np.where(m, -1, 0)
        raise ScipyTypeError(f"{_CDT}: a 0-D input is not supported (WRITEBACKIFCOPY used "
                             "for non-array input.)")
    st = _structure_bytes(metric, x.ndim)
    db, ib = _native.ndimage_cdt_host(m, list(m.shape), st, bool(return_indices),
                                      not ft_inplace)
    dt = np.frombuffer(db, np.int32).reshape(m.shape)
    if dt_inplace:
        distances[...] = dt
        dt = distances
    ft = None
    if return_indices:
        if ft_inplace:
            if indices.dtype.type != np.int32:
                raise InvalidInputError("indices array must be int32")
            if indices.shape != (dt.ndim,) + dt.shape:
                raise InvalidInputError("indices array has wrong shape")
            ft = _gather(indices, np.frombuffer(ib, np.int32), dt.shape)
        else:
            ft = np.frombuffer(ib, np.int32).reshape((dt.ndim,) + dt.shape)
    return _result(dt, ft, return_distances, return_indices, dt_inplace, ft_inplace)


def distance_transform_bf(input, metric="euclidean", sampling=None, return_distances=True,
                          return_indices=False, distances=None, indices=None):
    """scipy.ndimage.distance_transform_bf: the distance of every non-zero element to the
    nearest zero element by brute force ('euclidean': float64, with ``sampling``;
    'taxicab'/'cityblock'/'manhattan' or 'chessboard': uint32), and (``return_indices``)
    that element's coordinates."""
    np = _np()
    ft_inplace = isinstance(indices, np.ndarray)
    dt_inplace = isinstance(distances, np.ndarray)
    _arg_check(dt_inplace, ft_inplace, return_distances, return_indices)
    x = np.asarray(_cpu(input, _BF))
    m = np.asarray(x != 0, dtype=bool, order="C")
    metric = metric.lower()
    if metric == "euclidean":
        code = 1
    elif metric in ("taxicab", "cityblock", "manhattan"):
        code = 2
    elif metric == "chessboard":
        code = 3
    else:
        raise ScipyRuntimeError("distance metric not supported")
    s = _sampling(sampling, m.ndim)
    if return_distances and distances is not None:
        if distances.shape != m.shape:
            raise ScipyRuntimeError("distances array has wrong shape")
        want = np.float64 if code == 1 else np.uint32
        if distances.dtype.type != want:
            raise ScipyRuntimeError(f"distances array must be {np.dtype(want).name}")
    db, ib = _native.ndimage_bf_host(
        m, list(m.shape), code, None if s is None else [float(v) for v in s],
        bool(return_distances), bool(return_indices), not ft_inplace)
    dt = None
    if return_distances:
        dt = np.frombuffer(db, np.float64 if code == 1 else np.uint32).reshape(m.shape)
        if distances is not None:
            distances[...] = dt
            dt = distances
    ft = None
    if return_indices:
        if ft_inplace:
            if indices.dtype.type != np.int32:
                raise ScipyRuntimeError("indices array must be int32")
            if indices.shape != (m.ndim,) + m.shape:
                raise ScipyRuntimeError("indices array has wrong shape")
            ft = _gather(indices, np.frombuffer(ib, np.int32), m.shape)
        else:
            ft = np.frombuffer(ib, np.int32).reshape((m.ndim,) + m.shape)
    return _result(dt, ft, return_distances, return_indices, dt_inplace, ft_inplace)
