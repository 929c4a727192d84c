"""``kiln.ndimage``'s measurements: scipy.ndimage's ``label``, ``find_objects``,
``value_indices`` and ``watershed_ift``, and (from ``_ndimage_stats``) the statistics over
labels.

``label``, ``find_objects``, ``value_indices`` and ``watershed_ift`` run natively on the CPU
(``kiln_core::imaging::label``, ``objects``, ``value_indices`` and ``watershed``, the GIL
released). For
``label`` a two-pass union-find labels the non-zero elements, numbered in scipy's order; what
scipy decides in Python or in its Cython driver is decided here the same way: the structure's
checks and errors, the default int32 (int64 from 2**31 - 2 elements), ``output=`` as a dtype
or an array, scipy's ``RuntimeError`` when the labels do not fit the output's type, and the
scan order (scipy labels along the output's axis of smallest stride, so a Fortran-ordered
``output`` array numbers the groups column by column).

Inputs are NumPy arrays or anything ``numpy.asarray`` takes; a kiln tensor or another DLPack
array on the CPU is read through DLPack. ``label`` of a CUDA array (CuPy, torch) runs on
its GPU (``label.cu``: a lock-free union-find whose roots are each group's
first element, numbered in index order, so the labels equal the CPU's) and returns its labels
in the input's library (CuPy, torch); the other functions refuse CUDA arrays (they run on
the CPU). Results
are NumPy arrays and Python or NumPy scalars, as scipy's.
"""

from __future__ import annotations

import operator

from . import _native
from ._errors import InvalidInputError
from .ndimage import ScipyRuntimeError, ScipyTypeError, _is_numpy


class ScipyAssertionError(InvalidInputError, AssertionError):
    """A structure ``label`` refuses where scipy.ndimage raises ``AssertionError`` (not
    centrosymmetric); catchable as either."""


# what scipy's label takes (its Cython fused types; bool runs as uint8)
_LABEL_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float32", "float64")


def _np():
    import numpy as np

    return np


def _cpu(x, fname, what="input"):
    """``x`` as scipy would read it: NumPy arrays, lists and scalars as they are; a kiln
    tensor or another DLPack array through DLPack when it is on the CPU."""
    if x is None or _is_numpy(x):
        return x
    np = _np()
    dev = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else None
    if dev == 1:  # kDLCPU
        return np.from_dlpack(x)
    raise InvalidInputError(
        f"{fname}: {what} is a {type(x).__module__}.{type(x).__name__} off the CPU; kiln.ndimage's "
        f"measurements run on the CPU: copy it to a NumPy array first")


def _native_dtype(x):
    """``x`` in native byte order (scipy's C code refuses big-endian data; kiln converts)."""
    return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))


def _scan_axis(out):
    """The axis scipy's label runs its lines along: numpy's ``PyArray_IterAllButAxis`` with a
    negative axis (the output's axis of smallest positive stride, the first such)."""
    if out.ndim == 0:
        return 0
    strides = out.strides
    minaxis, minstride = 0, 0
    i = 0
    while minstride == 0 and i < out.ndim:
        minstride = strides[i]
        i += 1
    for i in range(1, out.ndim):
        if 0 < strides[i] < minstride:
            minaxis, minstride = i, strides[i]
    return minaxis


def _exact_limit(dt):
    """The largest label that ``dt`` holds exactly (bool: 1)."""
    np = _np()
    if dt == np.bool_:
        return 1
    if dt.kind == "f":
        return 2 ** (np.finfo(dt).nmant + 1)
    return int(np.iinfo(dt).max)


def label(input, structure=None, output=None):
    """scipy.ndimage.label: the groups of non-zero elements joined through ``structure``
    (default: faces only), numbered 1, 2, ... in row-major order of their first element.
    Returns ``(labels, count)``, or ``count`` when ``output`` is an array (filled in place; it
    may be ``input``)."""
    from ._ndimage_interp_gpu import is_cuda

    if is_cuda(input):
        return _label_cuda(input, structure, output)
    np = _np()
    x = np.asarray(_cpu(input, "label"))
    if np.iscomplexobj(x):
        raise ScipyTypeError("label: complex input is not supported (Complex type not supported)")
    if structure is None:
        from ._ndimage_rank import generate_binary_structure

        structure = generate_binary_structure(x.ndim, 1)
    s = np.asarray(_cpu(structure, "label", "structure"), dtype=bool)
    if s.ndim != x.ndim:
        raise ScipyRuntimeError(
            f"label: structure and input must have equal rank ({s.ndim} and {x.ndim})")
    if any(n != 3 for n in s.shape):
        raise InvalidInputError(
            f"label: structure dimensions must be equal to 3, got shape {s.shape}")
    wide = x.size >= 2**31 - 2
    given = isinstance(output, np.ndarray)
    if given:
        if output.shape != x.shape:
            raise InvalidInputError(
                f"label: output shape not correct: {output.shape} for an input of {x.shape}")
    else:
        if output is None:
            output = np.intp if wide else np.int32
        output = np.empty(x.shape, output)
    if x.ndim == 0 or x.size == 0:
        count = int(x.ndim == 0 and x != 0)
        output[...] = count
        return count if given else (output, count)
    if not np.array_equal(s, s[(slice(None, None, -1),) * s.ndim]):
        raise ScipyAssertionError(
            "label: the structure is not centrosymmetric (equal to itself reversed along every "
            "axis), so a connection would not hold both ways (Structuring element is not "
            "symmetric)")
    for what, dt in (("input", x.dtype), ("output", output.dtype)):
        if dt.name not in _LABEL_DTYPES:
            raise ScipyTypeError(
                f"label: {what} dtype {dt} is not supported: {', '.join(_LABEL_DTYPES)}")
    x = _native_dtype(x)
    mask = x if x.dtype == np.bool_ else x != 0
    axis = _scan_axis(output)
    m = np.moveaxis(mask, axis, -1)
    sm = np.moveaxis(s, axis, -1)
    b, count = _native.ndimage_label_host(
        np.ascontiguousarray(m).tobytes(), list(m.shape), np.ascontiguousarray(sm).tobytes(),
        wide)
    lab = np.moveaxis(np.frombuffer(b, np.int64 if wide else np.int32).reshape(m.shape), -1, axis)
    if not given and output.dtype == lab.dtype and axis == x.ndim - 1:
        return lab, count  # the buffer the labels were written in is the result
    # labels 1..count are all present: scipy refuses (after storing the converted labels)
    # exactly when the largest does not survive conversion to the output's type
    output[...] = lab
    if count > _exact_limit(output.dtype):
        raise ScipyRuntimeError(
            f"label: insufficient bit-depth in requested output type: {count} labels do not "
            f"fit in {output.dtype}")
    return count if given else (output, count)


def _label_cuda(input, structure, output):
    """``label`` of a CUDA array (CuPy, torch) on its device: the same labels
    and count as the CPU path (``label.cu``, checked bit for bit against it), the labels an
    int32 array of the input's library. Takes 1 to 3 axes of bool, uint8, uint16, int32,
    int64, float32 or float64, C-contiguous, and ``output`` None, ``numpy.int32`` or a
    C-contiguous int32 CUDA array of the input's shape; anything else is refused with the
    reason (``kiln.ndimage.label(host_array)`` takes every case)."""
    np = _np()
    from ._ndimage_interp_gpu import host, is_cuda
    from ._ndimage_rank import generate_binary_structure
    from ._userkernel import DeviceArray, _device_of, _empty_like_caller

    if isinstance(input, _native.Tensor):
        raise InvalidInputError(
            "label: a kiln CUDA tensor; its labels are int32, which kiln tensors do not hold: "
            "pass a CuPy or torch array (or a host array)")

    x = DeviceArray(input, "label: input")
    if x.dtype.kind == "c":
        raise ScipyTypeError("label: complex input is not supported (Complex type not supported)")
    if not x.contiguous:
        raise InvalidInputError("label: a non-contiguous CUDA array; make it contiguous first")
    ndim = len(x.shape)
    if not 1 <= ndim <= 3:
        raise InvalidInputError(
            f"label: a {ndim}-axis CUDA array; on the GPU label takes 1 to 3 axes "
            "(pass a host array)")
    if structure is None:
        structure = generate_binary_structure(ndim, 1)
    s = np.asarray(host(structure), dtype=bool)
    if s.ndim != ndim:
        raise ScipyRuntimeError(
            f"label: structure and input must have equal rank ({s.ndim} and {ndim})")
    if any(n != 3 for n in s.shape):
        raise InvalidInputError(
            f"label: structure dimensions must be equal to 3, got shape {s.shape}")
    if not np.array_equal(s, s[(slice(None, None, -1),) * s.ndim]):
        raise ScipyAssertionError(
            "label: the structure is not centrosymmetric (equal to itself reversed along every "
            "axis), so a connection would not hold both ways (Structuring element is not "
            "symmetric)")
    given = output is not None and not isinstance(output, (type, np.dtype, str))
    if given:
        if not is_cuda(output):
            raise InvalidInputError("label: output must be a CUDA array when the input is one")
        o = DeviceArray(output, "label: output")
        if o.dtype != np.int32 or not o.contiguous or tuple(o.shape) != tuple(x.shape):
            raise InvalidInputError(
                f"label: on the GPU the output must be a C-contiguous int32 array of shape "
                f"{tuple(x.shape)}, got {o.dtype} {tuple(o.shape)}")
        out = output
    else:
        if output is not None and np.dtype(output) != np.int32:
            raise InvalidInputError(
                f"label: on the GPU labels are int32, not {np.dtype(output)} (pass a host array "
                "for other types)")
        out = _empty_like_caller(input, tuple(x.shape), np.int32)
        o = DeviceArray(out, "label: output")
    _synchronize(input)
    count = _native.ndimage_label_cuda(
        x.ptr, x.name, [int(n) for n in x.shape], np.ascontiguousarray(s).tobytes(), o.ptr,
        _device_of([input]))
    return count if given else (out, count)


def _synchronize(x):
    """Wait for the work queued on ``x``'s library's current stream (CuPy, torch), which
    may still be writing it: labelling runs on kiln's stream and waits for itself."""
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        import cupy

        cupy.cuda.get_current_stream().synchronize()
    elif mod == "torch":
        import torch

        torch.cuda.current_stream(x.device).synchronize()


def find_objects(input, max_label=0):
    """scipy.ndimage.find_objects: for labels 1 to ``max_label`` (default: the largest),
    the tuple of slices bounding each, or None where a label has no element."""
    np = _np()
    x = np.asarray(_cpu(input, "find_objects"))
    if np.iscomplexobj(x):
        raise ScipyTypeError("find_objects: complex input is not supported (Complex type not supported)")
    if max_label < 1:
        max_label = x.max()
    m = max(operator.index(max_label), 0)
    if x.dtype.name not in _LABEL_DTYPES:
        raise ScipyRuntimeError(
            f"find_objects: data type not supported: {x.dtype} ({', '.join(_LABEL_DTYPES)})")
    found = [None] * m
    x = _native_dtype(x)
    for i, bounds in _native.ndimage_find_objects_host(
            np.ascontiguousarray(x).tobytes(), x.dtype.name, list(x.shape), m):
        found[i] = bounds
    return found


def value_indices(arr, *, ignore_value=None):
    """scipy.ndimage.value_indices: ``{value: index tuple}`` for each distinct value of an
    integer array, keys ascending (NumPy scalars of its dtype), indices in row-major order."""
    np = _np()
    x = np.asarray(_cpu(arr, "value_indices", "arr"))
    if x.dtype.kind not in "iu":
        raise InvalidInputError(
            f"value_indices: Parameter 'arr' must be an integer array, got {x.dtype}")
    ignore = None if ignore_value is None else x.dtype.type(ignore_value)
    flat = np.ascontiguousarray(_native_dtype(x)).reshape(-1)
    starts, first, coords = _native.ndimage_value_indices_host(
        flat.tobytes(), flat.dtype.name, list(x.shape))
    where = np.frombuffer(coords, np.intp).reshape(x.ndim, flat.size)
    keys = flat[first]
    ends = starts[1:] + [flat.size]
    return {k: tuple(w[a:b] for w in where) for k, a, b in zip(keys, starts, ends)
            if ignore is None or k != ignore}


def watershed_ift(input, markers, structure=None, output=None):
    """scipy.ndimage.watershed_ift: labels grown from ``markers`` (non-zero; negative ones
    are background) over a uint8 or uint16 ``input`` by the image foresting transform, with
    scipy's queue order, its wrap-around of neighbours along the last axis, and its labels
    passed through the output's type (``output``: an integer array, else the markers' type)."""
    np = _np()
    x = np.asarray(_cpu(input, "watershed_ift"))
    if x.dtype.type not in (np.uint8, np.uint16):
        raise ScipyTypeError(
            f"watershed_ift: only 8 and 16 unsigned inputs are supported, got {x.dtype}")
    if structure is None:
        from ._ndimage_rank import generate_binary_structure

        structure = generate_binary_structure(x.ndim, 1)
    s = np.asarray(_cpu(structure, "watershed_ift", "structure"), dtype=bool)
    if s.ndim != x.ndim:
        raise ScipyRuntimeError(
            f"watershed_ift: structure and input must have equal rank ({s.ndim} and {x.ndim})")
    if any(n != 3 for n in s.shape):
        raise ScipyRuntimeError(
            f"watershed_ift: structure dimensions must be equal to 3, got shape {s.shape}")
    mk = np.asarray(_cpu(markers, "watershed_ift", "markers"))
    if mk.shape != x.shape:
        raise ScipyRuntimeError(
            f"watershed_ift: input and markers must have equal shape ({x.shape} and {mk.shape})")
    ints = (np.int8, np.int16, np.int32, np.int64, np.intc, np.intp)
    if mk.dtype.type not in ints:
        raise ScipyRuntimeError(f"watershed_ift: marker should be of integer type, got {mk.dtype}")
    if isinstance(output, np.ndarray):
        if output.dtype.type not in ints:
            raise ScipyRuntimeError(
                f"watershed_ift: output should be of integer type, got {output.dtype}")
        if output.shape != x.shape:
            raise ScipyRuntimeError(
                f"watershed_ift: output shape not correct: {output.shape} for {x.shape}")
    else:
        output = np.zeros(x.shape, mk.dtype)  # scipy ignores an output that is not an array
    if x.ndim > 7:
        raise ScipyRuntimeError(f"watershed_ift: too many dimensions ({x.ndim}; at most 7)")
    x = _native_dtype(x)
    # scipy reads each marker into a C int (the low 32 bits)
    m32 = _native_dtype(mk).astype(np.int32)
    b = _native.ndimage_watershed_host(
        np.ascontiguousarray(x).tobytes(), x.dtype == np.uint16, list(x.shape),
        np.ascontiguousarray(s).tobytes(), np.ascontiguousarray(m32).tobytes(),
        output.dtype.itemsize)
    output[...] = np.frombuffer(b, np.int32).reshape(x.shape).astype(output.dtype)
    return output
