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

from . import _native
from ._errors import InvalidInputError
from .ndimage import _Call, _index, _is_numpy, _mode, _seq


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


def _rank_call(fname, input, size, footprint, structure, output, mode, cval, origin, axes,
               device, out_type, separable, **extra):
    """One rank filter or grey morphology op; ``separable``: scipy's min/max rule for sizes."""
    np = __import__("numpy")
    call = _Call(fname, input, "rank", output, device, out_type)
    ax = call.axes(axes)
    ndim = call.ndim
    if size is not None and footprint is not None:
        warnings.warn("ignoring size because footprint is set", UserWarning, stacklevel=3)
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
    return _rank_call("minimum_filter", input, operator.index(size), None, None, output, mode,
                      cval, origin, [axis], device, out_type, True)


def maximum_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0, *,
                     device=None, out_type=None):
    """scipy.ndimage.maximum_filter1d along ``axis``."""
    return _rank_call("maximum_filter", input, operator.index(size), None, None, output, mode,
                      cval, origin, [axis], device, out_type, True)


def _grey(fname, input, size, footprint, structure, output, mode, cval, origin, axes, device,
          out_type):
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
    if brute_force:
        raise InvalidInputError(f"{fname}: brute_force=True is not supported (kiln's result is the same without it)")
    call = _Call(fname, input, "binary", output, device, out_type)
    ax = call.axes(axes)
    ndim = call.ndim
    st = generate_binary_structure(len(ax), 1) if structure is None else _bool_array(structure)
    st = _bool_array(_expand(ndim, ax, st, "structure", fname))
    try:
        iterations = operator.index(iterations)
    except TypeError:
        raise InvalidInputError(f"{fname}: iterations must be an integer, got {iterations!r}") from None
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
