"""The second half of ``kiln.ndimage``: rank filters, grey and binary morphology.

Windows are brought to the data's rank here, as scipy 1.17 does it (``_expand_footprint``:
the window's axes are placed on the filtered axes in increasing order, size 1 elsewhere;
``_expand_origin``: origin ``i`` on ``axes[i]``; the separable min/max path of
``_min_or_max_filter``: ``size[i]`` on ``axes[i]``), so the native call always gets a
full-rank window and the facade's ``RankParams`` / ``BinaryParams`` need no notion of axes.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Iterable

from . import _native
from ._errors import InvalidInputError, warn_at_caller
from .ndimage import ScipyRuntimeError, ScipyTypeError, _Call, _index, _is_numpy, _mode, _seq


def _expand(ndim, axes, fp, what, fname):
    """scipy's _expand_footprint: size-1 axes where ``axes`` leaves one out."""
    if len(axes) < ndim:
        if fp.ndim != len(axes):
            raise InvalidInputError(f"{fname}: {what}.ndim ({fp.ndim}) must match len(axes) ({len(axes)})")
        np = __import__("numpy")
        fp = np.expand_dims(fp, tuple(a for a in range(ndim) if a not in axes))
    if fp.ndim != ndim:
        raise InvalidInputError(f"{fname}: {what} has {fp.ndim} axes but the input has {ndim}")
    return fp


def _origin(ndim, axes, origin, fname):
    """scipy's _expand_origin: origin ``i`` on ``axes[i]`` when ``axes`` leaves an axis out;
    with every axis named (in any order) the origins stay in axis order, as scipy's do."""
    o = _seq(origin, len(axes), "origin", fname, _index)
    if len(axes) == ndim:
        return o
    full = [0] * ndim
    for v, a in zip(o, axes):
        full[a] = v
    return full


def _separable_origin(ndim, axes, origin, fname):
    """scipy's separable min/max path: ``size[i]`` and ``origin[i]`` on ``axes[i]`` always."""
    o = _seq(origin, len(axes), "origin", fname, _index)
    full = [0] * ndim
    for v, a in zip(o, axes):
        full[a] = v
    return full


def _bool_array(v):
    np = __import__("numpy")
    return np.ascontiguousarray(np.asarray(v, dtype=bool))


# --- NumPy inputs on the CPU: every dtype, scipy's dispatch and results ------------------
#
# scipy's Python layer picks the C routine (separable min/max passes, the footprint min/max,
# the rank select, the 1-D rank filter) and the output; this mirrors it step for step, so
# that the native routines (kiln::rank_host, generic over the dtype) see what scipy's C code
# sees, and raise what scipy raises.

_HOST_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                "uint64", "float32", "float64")
_FILTER_MODES = {"nearest", "wrap", "reflect", "grid-mirror", "mirror", "constant",
                 "grid-wrap", "grid-constant"}


def _host_ok(input, device):
    return device in (None, "cpu") and _is_numpy(input)


def _h_mode(mode):
    if not isinstance(mode, str) or mode not in _FILTER_MODES:
        raise ScipyRuntimeError("boundary mode not supported")
    return mode


def _h_seq(v, n):
    """scipy's _normalize_sequence."""
    np = __import__("numpy")
    if not isinstance(v, str) and np.iterable(v):
        v = list(v)
        if len(v) != n:
            raise ScipyRuntimeError("sequence argument must have length equal to input rank")
        return v
    return [v] * n


def _h_axes(axes, ndim):
    """scipy's _check_axes."""
    np = __import__("numpy")
    if axes is None:
        return tuple(range(ndim))
    if np.isscalar(axes):
        axes = (operator.index(axes),)
    elif isinstance(axes, Iterable):
        axes = tuple(operator.index(a) for a in axes)
        for a in axes:
            if a < -ndim or a > ndim - 1:
                raise InvalidInputError(f"specified axis: {a} is out of range")
        axes = tuple(a % ndim if a < 0 else a for a in axes)
    else:
        raise InvalidInputError("axes must be an integer, iterable of integers, or None")
    if len(set(axes)) != len(axes):
        raise InvalidInputError("axes must be unique")
    return axes


def _h_input(input, fname):
    np = __import__("numpy")
    x = np.asarray(input)
    if np.iscomplexobj(x):
        raise ScipyTypeError("Complex type not supported")
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    return x


def _h_output(output, x):
    """scipy's _get_output: (the array scipy would write, or None for a new one; its dtype)."""
    np = __import__("numpy")
    if output is None:
        return None, x.dtype
    if isinstance(output, (type, np.dtype)):
        return None, np.dtype(output)
    if isinstance(output, str):
        dt = np.dtype(output)
        if not issubclass(dt.type, np.number):
            raise ScipyRuntimeError("output must have numeric dtype")
        return None, dt
    out = np.asarray(output)
    if out.shape != x.shape:
        raise ScipyRuntimeError("output shape not correct")
    return out, out.dtype


def _h_native(x, fname, out_dtype, **p):
    """One native call on the C-contiguous NumPy array ``x`` (1 to 3 axes, non-empty)."""
    np = __import__("numpy")
    name = x.dtype.name
    if name not in _HOST_DTYPES:
        raise ScipyRuntimeError(
            f"{fname}: input dtype {name}: array type not supported (as in scipy); use one of {', '.join(_HOST_DTYPES)}")
    od = np.dtype(out_dtype)
    if od.name not in _HOST_DTYPES:
        raise ScipyRuntimeError(
            f"{fname}: output dtype {od.name}: array type not supported (as in scipy); use one of {', '.join(_HOST_DTYPES)}")
    x = np.ascontiguousarray(x)
    b = _native.ndimage_rank_host(x, name, list(x.shape), od.name, fname, **p)
    return np.frombuffer(b, dtype=od).reshape(x.shape)


def _h_finish(r, out, dt):
    np = __import__("numpy")
    if out is None:
        return r if r.dtype == dt else r.astype(dt)
    np.copyto(out, r, casting="unsafe")
    return out


def _h_trivial(x, out, dt):
    """0-D and empty inputs: scipy's filters return the input converted (a size-1 window)."""
    np = __import__("numpy")
    if x.size == 0:
        r = np.zeros(x.shape, dtype=dt)
    else:
        r = np.array(x, dtype=dt, copy=True) if x.dtype != dt else x.copy()
    return _h_finish(r, out, dt)


def _h_minmax1d(x, size, axis, dt, mode, cval, origin, minimum):
    """scipy's min_or_max_filter1d along ``axis`` into dtype ``dt`` (a 3-D view around it)."""
    n = x.shape[axis]
    before = 1
    for d in x.shape[:axis]:
        before *= d
    x3 = __import__("numpy").ascontiguousarray(x).reshape(before, n, -1)
    r = _h_native(x3, "minimum_filter" if minimum else "maximum_filter", dt,
                  size=[1, size, 1], origin=[0, origin, 0], mode=mode, cval=float(cval))
    return r.reshape(x.shape)


def _h_min_or_max(fname, input, size, footprint, structure, output, mode, cval, origin,
                  minimum, axes):
    """scipy's _filters._min_or_max_filter."""
    np = __import__("numpy")
    if size is not None and footprint is not None:
        warn_at_caller("ignoring size because footprint is set", UserWarning)
    if structure is None:
        if footprint is None:
            if size is None:
                raise ScipyRuntimeError("no footprint provided")
            separable = True
        else:
            footprint = np.asarray(footprint, dtype=bool)
            if not footprint.any():
                raise InvalidInputError("All-zero footprint is not supported.")
            if footprint.all():
                size, footprint, separable = footprint.shape, None, True
            else:
                separable = False
    else:
        structure = np.asarray(structure, dtype=np.float64)
        separable = False
        footprint = np.ones(structure.shape, bool) if footprint is None else np.asarray(footprint, dtype=bool)
    x = _h_input(input, fname)
    out, dt = _h_output(output, x)
    axes = _h_axes(axes, x.ndim)
    if separable:
        origins = _h_seq(origin, len(axes))
        sizes = _h_seq(size, len(axes))
        modes = _h_seq(mode, len(axes))
        passes = [(axes[i], sizes[i], origins[i], modes[i]) for i in range(len(axes))
                  if sizes[i] > 1]
        if not passes or x.size == 0:
            for _, sz, o, m in passes:
                _h_mode(m)
                if sz // 2 + o < 0 or sz // 2 + o >= sz:
                    raise InvalidInputError("invalid origin")
            return _h_trivial(x, out, dt)
        cur = x
        for a, sz, o, m in passes:
            sz, o = operator.index(sz), operator.index(o)
            if sz < 1:
                raise ScipyRuntimeError("incorrect filter size")
            if sz // 2 + o < 0 or sz // 2 + o >= sz:
                raise InvalidInputError("invalid origin")
            cur = _h_minmax1d(cur, sz, a, dt, _h_mode(m), cval, o, minimum)
        return _h_finish(cur, out, dt)
    footprint = _h_expand(x.ndim, axes, footprint, "footprint")
    origins = _h_origin(x.ndim, axes, origin)
    fshape = [n for n in footprint.shape if n > 0]
    if len(fshape) != x.ndim:
        raise ScipyRuntimeError(f"footprint.ndim ({footprint.ndim}) must match len(axes) ({len(axes)})")
    for o, n in zip(origins, fshape):
        if n // 2 + o < 0 or n // 2 + o >= n:
            raise InvalidInputError("invalid origin")
    p = {}
    if structure is not None:
        if len(structure.shape) != len(axes):
            raise ScipyRuntimeError("structure array has incorrect shape")
        # scipy's C code reads the structure's values in the footprint's element order
        # (with axes left out, the footprint gains size-1 axes, the structure keeps its own)
        if structure.size != footprint.size:
            raise ScipyRuntimeError("structure array has incorrect shape")
        p["structure_shape"] = list(footprint.shape)
        p["structure_values"] = np.ascontiguousarray(structure, dtype=np.float64).ravel().tolist()
    if not isinstance(mode, str) and isinstance(mode, Iterable):
        raise ScipyRuntimeError("A sequence of modes is not supported for non-separable footprints")
    _h_mode(mode)
    if x.size == 0 or x.ndim == 0:
        return _h_trivial(x, out, dt)
    r = _h_footprint(x, "minimum_filter" if minimum else "maximum_filter", dt, footprint,
                     origins, mode, cval, p)
    return _h_finish(r, out, dt)


def _h_expand(ndim, axes, fp, name):
    """scipy's _expand_footprint."""
    np = __import__("numpy")
    if len(axes) < ndim:
        if fp.ndim != len(axes):
            raise ScipyRuntimeError(f"{name}.ndim ({fp.ndim}) must match len(axes) ({len(axes)})")
        fp = np.expand_dims(fp, tuple(a for a in range(ndim) if a not in axes))
    return fp


def _h_origin(ndim, axes, origin):
    """scipy's _expand_origin."""
    o = _h_seq(origin, len(axes))
    if len(axes) < ndim:
        full = [0] * ndim
        for v, a in zip(o, axes):
            full[a] = v
        o = full
    return [operator.index(v) for v in o]


def _h_footprint(x, fname, dt, footprint, origins, mode, cval, p):
    """A footprint (and structure) call. An input of more than 3 axes runs with the axes
    where the window is 1 wide (origin 0) moved to the front and merged into one."""
    np = __import__("numpy")
    fp = np.ascontiguousarray(footprint, dtype=bool)
    st = np.asarray(p.get("structure_values", []), dtype=np.float64)
    q = dict(p)
    exact = q.pop("exact", False)
    org = list(origins)
    perm = list(range(x.ndim))
    xt = x
    if x.ndim > 3:
        win = [i for i in range(x.ndim) if fp.shape[i] > 1 or org[i] != 0]
        if len(win) > 2:
            raise InvalidInputError(
                f"{fname}: a footprint spanning more than 2 axes of an input of more than 3 is not supported")
        batch = [i for i in range(x.ndim) if i not in win]
        perm = batch + win
        n = 1
        for i in batch:
            n *= x.shape[i]
        xt = np.ascontiguousarray(x.transpose(perm)).reshape((n,) + tuple(x.shape[i] for i in win))
        fp = fp.transpose(perm).reshape((1,) + tuple(fp.shape[i] for i in win))
        if "structure_values" in q:
            st = st.reshape(footprint.shape).transpose(perm).ravel()
        org = [0] + [org[i] for i in win]
    fsh = list(fp.shape)
    if "structure_values" in q:
        q["structure_shape"] = fsh
        q["structure_values"] = st.tolist()
    if fp.all() and "structure_values" not in q:
        q["size"] = fsh
    else:
        q["footprint_shape"], q["footprint_mask"] = fsh, fp.ravel().tolist()
    r = _h_native(xt, fname, dt, origin=org, mode=mode, cval=float(cval), exact=exact, **q)
    if x.ndim > 3:
        r = r.reshape(tuple(x.shape[i] for i in perm)).transpose(np.argsort(perm))
    return r


def _h_rank(fname, input, rank, size, footprint, output, mode, cval, origin, operation, axes):
    """scipy's _filters._rank_filter."""
    np = __import__("numpy")
    if size is not None and footprint is not None:
        warn_at_caller("ignoring size because footprint is set", UserWarning)
    x = _h_input(input, fname)
    axes = _h_axes(axes, x.ndim)
    if footprint is None:
        if size is None:
            raise ScipyRuntimeError("no footprint or filter size provided")
        footprint = np.ones(_h_seq(size, len(axes)), dtype=bool)
    else:
        footprint = np.asarray(footprint, dtype=bool)
    footprint = _h_expand(x.ndim, axes, footprint, "footprint")
    origins = _h_origin(x.ndim, axes, origin)
    if not isinstance(mode, str) and isinstance(mode, Iterable):
        modes = _h_seq(mode, len(axes))
        full = ["constant"] * x.ndim
        for m, a in zip(modes, axes):
            full[a] = m
        mode = full
    fshape = [n for n in footprint.shape if n > 0]
    if len(fshape) != x.ndim:
        raise ScipyRuntimeError(f"footprint.ndim ({footprint.ndim}) must match len(axes) ({len(axes)})")
    for o, n in zip(origins, fshape):
        if n // 2 + o < 0 or n // 2 + o >= n:
            raise InvalidInputError("invalid origin")
    filter_size = int(np.count_nonzero(footprint))
    if operation == "median":
        rank = filter_size // 2
    elif operation == "percentile":
        percentile = rank
        if percentile < 0.0:
            percentile += 100.0
        if percentile < 0 or percentile > 100:
            raise ScipyRuntimeError("invalid percentile")
        rank = filter_size - 1 if percentile == 100.0 else int(float(filter_size) * percentile / 100.0)
    if rank < 0:
        rank += filter_size
    if rank < 0 or rank >= filter_size:
        raise ScipyRuntimeError("rank not within filter footprint size")
    if rank == 0 or rank == filter_size - 1:
        return _h_min_or_max(fname, x, None, footprint, None, output, mode, cval, origins,
                             rank == 0, None)
    out, dt = _h_output(output, x)
    if not isinstance(mode, str) and isinstance(mode, Iterable):
        raise ScipyRuntimeError("A sequence of modes is not supported by non-separable rank filters")
    _h_mode(mode)
    if x.size == 0:
        return _h_trivial(x, out, dt)
    lim2 = x.size - ((footprint.size - 1) // 2 - origin) if np.isscalar(origin) else -1
    if x.ndim == 1 and (lim2 >= 0 or x.size == 1):
        # scipy's 1-D rank filter: int64, float32 or float64 (other integers and bool as
        # int64, float16 as float32; the cval converted to that type). It also ignores a
        # footprint's holes, which contradicts its own definition: kiln keeps them.
        if x.dtype.name in ("int64", "float64", "float32"):
            y = x
        elif x.dtype.name == "float16":
            y = x.astype(np.float32)
        elif x.dtype.kind in "biu":
            y = x.astype(np.int64)
        else:
            raise ScipyRuntimeError("Unsupported array type")
        cv = float(y.dtype.type(cval))
        r = _h_footprint(y, "rank_filter", y.dtype, footprint, origins, mode, cv,
                         {"rank": int(rank), "exact": True})
        return _h_finish(r, out, dt)
    r = _h_footprint(x, "rank_filter", dt, footprint, origins, mode, cval, {"rank": int(rank)})
    return _h_finish(r, out, dt)


def _h_grey(fname, input, size, footprint, structure, output, mode, cval, origin, axes):
    """scipy's grey_erosion / grey_dilation / grey_opening / grey_closing."""
    np = __import__("numpy")
    if size is None and footprint is None and structure is None:
        raise InvalidInputError("size, footprint, or structure must be specified")
    if fname == "grey_opening" or fname == "grey_closing":
        if size is not None and footprint is not None:
            warn_at_caller("ignoring size because footprint is set", UserWarning)
        first, second = (("grey_erosion", "grey_dilation") if fname == "grey_opening"
                         else ("grey_dilation", "grey_erosion"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            tmp = _h_grey(first, input, size, footprint, structure, None, mode, cval, origin, axes)
            return _h_grey(second, tmp, size, footprint, structure, output, mode, cval, origin, axes)
    if fname == "grey_erosion":
        return _h_min_or_max(fname, input, size, footprint, structure, output, mode, cval,
                             origin, True, axes)
    if structure is not None:
        structure = np.asarray(structure)
        structure = structure[tuple([slice(None, None, -1)] * structure.ndim)]
    if footprint is not None:
        footprint = np.asarray(footprint)
        footprint = footprint[tuple([slice(None, None, -1)] * footprint.ndim)]
    x = np.asarray(input)
    ax = _h_axes(axes, x.ndim)
    origin = _h_seq(origin, len(ax))
    for i in range(len(origin)):
        origin[i] = -origin[i]
        if footprint is not None:
            sz = footprint.shape[i]
        elif structure is not None:
            sz = structure.shape[i]
        elif np.isscalar(size):
            sz = size
        else:
            sz = size[i]
        if not sz & 1:
            origin[i] -= 1
    return _h_min_or_max(fname, x, size, footprint, structure, output, mode, cval, origin,
                         False, ax)


def _host(fname, input, size, footprint, structure, output, mode, cval, origin, axes,
          rank=None, percentile=None):
    if fname in ("median_filter", "rank_filter", "percentile_filter"):
        op = fname.split("_")[0]
        r = {"median": 0, "rank": rank, "percentile": percentile}[op]
        return _h_rank(fname, input, r, size, footprint, output, mode, cval, origin, op, axes)
    if fname in ("minimum_filter", "maximum_filter"):
        return _h_min_or_max(fname, input, size, footprint, None, output, mode, cval, origin,
                             fname == "minimum_filter", axes)
    return _h_grey(fname, input, size, footprint, structure, output, mode, cval, origin, axes)


def _h_filter1d(fname, input, size, axis, output, mode, cval, origin, minimum):
    """scipy's minimum_filter1d / maximum_filter1d."""
    x = _h_input(input, fname)
    axis = __import__("numpy").lib.array_utils.normalize_axis_index(operator.index(axis), x.ndim)
    if size < 1:
        raise ScipyRuntimeError("incorrect filter size")
    out, dt = _h_output(output, x)
    if (size // 2 + origin < 0) or (size // 2 + origin >= size):
        raise InvalidInputError("invalid origin")
    _h_mode(mode)
    if x.size == 0:
        return _h_trivial(x, out, dt)
    return _h_finish(_h_minmax1d(x, operator.index(size), axis, dt, mode, cval,
                                 operator.index(origin), minimum), out, dt)


def _rank_call(fname, input, size, footprint, structure, output, mode, cval, origin, axes,
               device, out_type, separable, **extra):
    """One rank filter or grey morphology op; ``separable``: scipy's min/max rule for sizes."""
    if _host_ok(input, device) and out_type in (None, "like"):
        return _host(fname, input, size, footprint, structure, output, mode, cval, origin,
                     axes, **extra)
    np = __import__("numpy")
    call = _Call(fname, input, "rank", output, device, out_type)
    ax = call.axes(axes)
    ndim = call.ndim
    if size is not None and footprint is not None:
        warn_at_caller("ignoring size because footprint is set", UserWarning)
    p = {"mode": _mode(mode, len(ax), fname), "cval": float(cval), **extra}
    if (call.out_dtype not in (None, call.dtype) and call.dtype in ("uint8", "uint16")
            and p["mode"] in ("constant", "grid-constant") and not float(cval).is_integer()):
        # kiln selects in the input's type (the cval truncated); scipy's paths differ here,
        # some keeping the fractional cval in a float output
        raise InvalidInputError(
            f"{fname}: cval {cval} is not a {call.dtype} value, and with output dtype {call.out_dtype} scipy may keep it unconverted; give an integer cval")
    if structure is not None:
        if call.out_dtype not in (None, call.dtype):
            # a structure adds values rather than selecting them: scipy computes those in
            # the output's type, kiln in the input's, so a wider output would differ
            raise InvalidInputError(
                f"{fname}: output dtype {call.out_dtype} with a structure is not supported (the sums are computed in the input's dtype, {call.dtype}); convert the input first")
        st = np.ascontiguousarray(np.asarray(structure, dtype=np.float64))
        if len(ax) < ndim:
            raise InvalidInputError(
                f"{fname}: structure with axes that leave an axis out is not supported (scipy does not expand the structure either)")
        if st.ndim != ndim:
            raise InvalidInputError(f"{fname}: structure has {st.ndim} axes but the input has {ndim}")
        p["structure_shape"], p["structure_values"] = list(st.shape), st.ravel().tolist()
        fp = _bool_array(footprint) if footprint is not None else None
        size = None  # scipy: the window is the structure's (or the footprint's)
    elif footprint is not None:
        fp = _bool_array(footprint)
        if fp.all() and separable:
            size, fp = list(fp.shape), None
    elif size is None:
        raise InvalidInputError(f"{fname}: give size or footprint (scipy has no default window)")
    else:
        sizes = _seq(size, len(ax), "size", fname, _index)
        if separable:
            full = [1] * ndim
            for s, a in zip(sizes, ax):
                full[a] = s
            p["size"] = full
            p["origin"] = _separable_origin(ndim, ax, origin, fname)
            return call.done(_native.ndimage_rank(call.x, fname, **p))
        fp = np.ones(sizes, dtype=bool)
    if fp is None and size is not None:  # an all-true footprint on the separable path
        sizes = _seq(size, len(ax), "size", fname, _index)
        full = [1] * ndim
        for s, a in zip(sizes, ax):
            full[a] = s
        p["size"] = full
        p["origin"] = _separable_origin(ndim, ax, origin, fname)
        return call.done(_native.ndimage_rank(call.x, fname, **p))
    elif fp is not None:
        if fname in ("grey_dilation", "grey_opening", "grey_closing") and ax != sorted(ax):
            # scipy pairs the reflected window's origin shift with axes[i] but places the
            # window's axes in increasing order: refuse rather than guess which it meant
            raise InvalidInputError(
                f"{fname}: axes {tuple(ax)} out of increasing order with a footprint or structure are not supported; give axes sorted")
        fp = _expand(ndim, ax, fp, "footprint", fname)
        if fp.all() and structure is None:
            p["size"] = list(fp.shape)
        else:
            p["footprint_shape"], p["footprint_mask"] = list(fp.shape), fp.ravel().tolist()
    p["origin"] = _origin(ndim, ax, origin, fname)
    return call.done(_native.ndimage_rank(call.x, fname, **p))


def median_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                  origin=0, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.median_filter (the upper median for an even window)."""
    return _rank_call("median_filter", input, size, footprint, None, output, mode, cval, origin,
                      axes, device, out_type, False)


def rank_filter(input, rank, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                origin=0, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.rank_filter (``rank < 0`` counts from the top)."""
    return _rank_call("rank_filter", input, size, footprint, None, output, mode, cval, origin,
                      axes, device, out_type, False, rank=operator.index(rank))


def percentile_filter(input, percentile, size=None, footprint=None, output=None, mode="reflect",
                      cval=0.0, origin=0, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.percentile_filter (``-100 <= percentile <= 100``)."""
    return _rank_call("percentile_filter", input, size, footprint, None, output, mode, cval,
                      origin, axes, device, out_type, False, percentile=float(percentile))


def minimum_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                   origin=0, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.minimum_filter."""
    return _rank_call("minimum_filter", input, size, footprint, None, output, mode, cval, origin,
                      axes, device, out_type, True)


def maximum_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                   origin=0, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.maximum_filter."""
    return _rank_call("maximum_filter", input, size, footprint, None, output, mode, cval, origin,
                      axes, device, out_type, True)


def minimum_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0, *,
                     device=None, out_type=None):
    """scipy.ndimage.minimum_filter1d along ``axis``."""
    if _host_ok(input, device) and out_type in (None, "like"):
        return _h_filter1d("minimum_filter1d", input, size, axis, output, mode, cval, origin,
                           True)
    return _rank_call("minimum_filter", input, operator.index(size), None, None, output, mode,
                      cval, origin, [axis], device, out_type, True)


def maximum_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0, *,
                     device=None, out_type=None):
    """scipy.ndimage.maximum_filter1d along ``axis``."""
    if _host_ok(input, device) and out_type in (None, "like"):
        return _h_filter1d("maximum_filter1d", input, size, axis, output, mode, cval, origin,
                           False)
    return _rank_call("maximum_filter", input, operator.index(size), None, None, output, mode,
                      cval, origin, [axis], device, out_type, True)


def _grey(fname, input, size, footprint, structure, output, mode, cval, origin, axes, device,
          out_type):
    if _host_ok(input, device) and out_type in (None, "like"):
        return _h_grey(fname, input, size, footprint, structure, output, mode, cval, origin, axes)
    if size is None and footprint is None and structure is None:
        raise InvalidInputError(f"{fname}: give size, footprint or structure")
    return _rank_call(fname, input, size, footprint, structure, output, mode, cval, origin, axes,
                      device, out_type, True)


def grey_erosion(input, size=None, footprint=None, structure=None, output=None, mode="reflect",
                 cval=0.0, origin=0, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.grey_erosion (flat, or non-flat with ``structure``)."""
    return _grey("grey_erosion", input, size, footprint, structure, output, mode, cval, origin,
                 axes, device, out_type)


def grey_dilation(input, size=None, footprint=None, structure=None, output=None, mode="reflect",
                  cval=0.0, origin=0, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.grey_dilation (the window reflected, as scipy does)."""
    return _grey("grey_dilation", input, size, footprint, structure, output, mode, cval, origin,
                 axes, device, out_type)


def grey_opening(input, size=None, footprint=None, structure=None, output=None, mode="reflect",
                 cval=0.0, origin=0, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.grey_opening: erosion, then dilation."""
    return _grey("grey_opening", input, size, footprint, structure, output, mode, cval, origin,
                 axes, device, out_type)


def grey_closing(input, size=None, footprint=None, structure=None, output=None, mode="reflect",
                 cval=0.0, origin=0, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.grey_closing: dilation, then erosion."""
    return _grey("grey_closing", input, size, footprint, structure, output, mode, cval, origin,
                 axes, device, out_type)


# --- binary morphology --------------------------------------------------------------------

def generate_binary_structure(rank, connectivity):
    """scipy.ndimage.generate_binary_structure: a ``3**rank`` bool array, true within
    ``connectivity`` unit steps of the centre."""
    np = __import__("numpy")
    rank, connectivity = operator.index(rank), operator.index(connectivity)
    if connectivity < 1:
        connectivity = 1
    if rank < 1:
        return np.array(True, dtype=bool)
    if rank <= 3:
        return np.array(_native.binary_structure(rank, connectivity), dtype=bool).reshape((3,) * rank)
    return np.add.reduce(np.fabs(np.indices([3] * rank) - 1), 0) <= connectivity


def _binary(fname, input, structure, iterations, mask, output, border_value, origin,
            brute_force, axes, device, out_type):
    # brute_force: scipy's choice between two algorithms with one result; kiln has one
    del brute_force
    np = __import__("numpy")
    if _is_numpy(input) and np.ndim(input) == 0:
        # a 0-D input is its own one-element window (scipy's 0-D structure is True)
        x1 = np.asarray(input).reshape(1)
        st1 = np.ones(1, bool) if structure is None else np.asarray(structure).reshape(-1)
        m1 = None if mask is None else np.asarray(mask).reshape(1)
        y = _binary(fname, x1, st1, iterations, m1, None, border_value, origin, False, None,
                    device, out_type)
        y = y.reshape(())
        if isinstance(output, np.ndarray):
            np.copyto(output, y, casting="unsafe")
            return output
        return y
    call = _Call(fname, input, "binary", output, device, out_type)
    ax = call.axes(axes)
    ndim = call.ndim
    st = generate_binary_structure(len(ax), 1) if structure is None else _bool_array(structure)
    st = _bool_array(_expand(ndim, ax, st, "structure", fname))
    try:
        iterations = operator.index(iterations)
    except TypeError:
        raise ScipyTypeError(f"{fname}: iterations must be an integer, got {iterations!r}") from None
    p = {"structure_shape": list(st.shape), "structure_mask": st.ravel().tolist(),
         "border_value": bool(border_value), "origin": _origin(ndim, ax, origin, fname)}
    if mask is not None:
        return call.done(_masked(call, fname, st, iterations, mask, p))
    y = _native.ndimage_binary(call.x, fname, iterations=iterations, **p)
    return call.done(y)


def _masked(call, fname, st, iterations, mask, p):
    """scipy's ``mask=``: each step changes only the elements where ``mask`` is true, i.e.
    ``x = where(mask, step(x), x)`` repeated ``iterations`` times (until nothing changes for
    ``iterations < 1``); opening and closing apply it to both of their ops. One native call
    a step, the select in NumPy, so a NumPy input is needed (on ``device="cuda"`` each step
    runs on the GPU). Written here because the facade's binary ops take no mask."""
    np = __import__("numpy")
    if not _is_numpy(call.like):
        raise InvalidInputError(
            f"{fname}: mask= needs a NumPy input (kiln applies the mask on the host between steps)")
    x = call.x if isinstance(call.x, np.ndarray) else call.x.numpy()
    # the steps select between 0/1 planes: a uint16 or float32 input (kept as it is for the
    # native call) becomes uint8 0/1 first, so the result is one byte an element
    x = np.ascontiguousarray(x != 0).view(np.uint8)
    m = np.asarray(mask)
    if m.shape != call.shape:
        raise InvalidInputError(f"{fname}: mask has shape {m.shape}, the input {call.shape}; they must be equal")
    m = m.reshape(x.shape)
    m = m != 0
    centre = tuple(n // 2 + o for n, o in zip(st.shape, p["origin"]))
    if iterations < 1 and all(0 <= c < n for c, n in zip(centre, st.shape)) and not st[centre]:
        # the facade's rule (kiln-core BinarySpec::terminating), checked here since each
        # step below is a one-iteration call
        raise InvalidInputError(
            f"{fname}: iterations = {iterations} repeats until the result stops changing, which needs the "
            "structure's element at its centre (shifted by origin) to be true: without it the result can "
            "oscillate forever. Give iterations >= 1, or such a structure")
    ops = {"binary_opening": ("binary_erosion", "binary_dilation"),
           "binary_closing": ("binary_dilation", "binary_erosion")}.get(fname, (fname,))
    dev = call.x.device if isinstance(call.x, _native.Tensor) else "cpu"
    for op in ops:
        k = 0
        while True:
            y = _native.ndimage_binary(_native.asarray(x, dev), op, iterations=1, **p).numpy()
            y = np.where(m, y, x)
            k += 1
            done = k == iterations if iterations >= 1 else np.array_equal(y, x)
            x = y
            if done:
                break
    return _native.asarray(np.ascontiguousarray(x), "cpu")


def binary_erosion(input, structure=None, iterations=1, mask=None, output=None, border_value=0,
                   origin=0, brute_force=False, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.binary_erosion (``iterations < 1``: until nothing changes)."""
    return _binary("binary_erosion", input, structure, iterations, mask, output, border_value,
                   origin, brute_force, axes, device, out_type)


def binary_dilation(input, structure=None, iterations=1, mask=None, output=None, border_value=0,
                    origin=0, brute_force=False, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.binary_dilation."""
    return _binary("binary_dilation", input, structure, iterations, mask, output, border_value,
                   origin, brute_force, axes, device, out_type)


def binary_opening(input, structure=None, iterations=1, output=None, origin=0, mask=None,
                   border_value=0, brute_force=False, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.binary_opening: erosion, then dilation."""
    return _binary("binary_opening", input, structure, iterations, mask, output, border_value,
                   origin, brute_force, axes, device, out_type)


def binary_closing(input, structure=None, iterations=1, output=None, origin=0, mask=None,
                   border_value=0, brute_force=False, *, axes=None, device=None, out_type=None):
    """scipy.ndimage.binary_closing: dilation, then erosion."""
    return _binary("binary_closing", input, structure, iterations, mask, output, border_value,
                   origin, brute_force, axes, device, out_type)


def binary_fill_holes(input, structure=None, output=None, origin=0, *, axes=None, device=None,
                      out_type=None):
    """scipy.ndimage.binary_fill_holes: background not reachable from the border, filled."""
    return _binary("binary_fill_holes", input, structure, 1, None, output, 0, origin, False,
                   axes, device, out_type)
