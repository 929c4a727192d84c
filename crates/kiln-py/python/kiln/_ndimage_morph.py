"""scipy.ndimage's morphology built from the others: top-hats, the morphological gradient
and Laplace, propagation, hit-or-miss, ``iterate_structure``.

scipy defines each of these in Python from ``grey_*``/``binary_*`` calls and array
arithmetic, and so does kiln, in the same order and the same dtype (a uint8 morphological
Laplace wraps as scipy's does), so the results are scipy's bit for bit. The grey and binary
steps run where the data lives (``device=`` as elsewhere); the arithmetic is the array's own
(NumPy, torch or CuPy: torch/CuPy inputs give their own type back). kiln tensors have no
subtraction, so they are refused: pass a NumPy, torch or CuPy array.
"""

from __future__ import annotations

import warnings

from . import _native
from ._errors import InvalidInputError, warn_at_caller
from ._ndimage_rank import binary_dilation, binary_erosion, generate_binary_structure, grey_dilation, grey_erosion
from .ndimage import _axes, _is_numpy, _seq


def _np():
    return __import__("numpy")


def _prep(fname, input, output, honour_dtype, structure=None):
    """(input as an array with arithmetic, output array or None, dtype to compute in or None).

    ``honour_dtype``: whether scipy uses an ``output`` dtype here (the top-hats do; the
    gradient and Laplace pass ``None`` on, so scipy ignores a dtype there: kiln refuses one
    that differs rather than ignore it)."""
    np = _np()
    if isinstance(input, _native.Tensor):
        raise InvalidInputError(
            f"{fname}: kiln tensors have no subtraction; pass a NumPy, torch or CuPy array (t.numpy() or out_type='like')")
    x = np.asarray(input) if _is_numpy(input) else input
    if output is None:
        return x, None, None
    if structure is not None and np.dtype(getattr(output, "dtype", output)) != np.dtype(
            str(x.dtype).replace("torch.", "")):
        raise InvalidInputError(
            f"{fname}: output of another dtype with a structure is not supported (the grey steps add the structure in the input's dtype); convert the input first")
    if not isinstance(output, np.ndarray) and hasattr(output, "shape"):
        # an array of another library (np.dtype would read its dtype and drop the array)
        raise InvalidInputError(f"{fname}: output= arrays other than NumPy are not supported here")
    if isinstance(output, np.ndarray):
        if not _is_numpy(input):
            raise InvalidInputError(f"{fname}: output= a NumPy array needs a NumPy input")
        if output.shape != x.shape:
            raise InvalidInputError(f"{fname}: output has shape {output.shape}, the input {x.shape}; they must be equal")
        return x, output, output.dtype
    try:
        dt = np.dtype(output)
    except TypeError:
        raise InvalidInputError(f"{fname}: output must be None, a dtype or a NumPy array, not {output!r}") from None
    if not honour_dtype and dt != np.dtype(str(x.dtype).replace("torch.", "")):
        raise InvalidInputError(
            f"{fname}: output dtype {dt.name}: scipy ignores an output dtype here (the result has the input's); pass an output array to compute in another type")
    return x, None, (dt if honour_dtype else None)


def _finish(r, out):
    if out is None:
        return r
    _np().copyto(out, r, casting="unsafe")
    return out


def _grey_kw(size, footprint, structure, mode, cval, origin, axes, device, dt):
    kw = {"size": size, "footprint": footprint, "structure": structure, "mode": mode,
          "cval": cval, "origin": origin, "axes": axes, "device": device, "out_type": "like"}
    if dt is not None:
        kw["output"] = dt
    return kw


def _as(x, dt):
    return x if dt is None else _np().asarray(x, dtype=dt)


def _tophat(fname, white, input, size, footprint, structure, output, mode, cval, origin, axes,
            device):
    """scipy's top-hats: ``input - opening`` (white) or ``closing - input`` (black), the
    second grey step into ``output``'s dtype as scipy's does."""
    x, out, dt = _prep(fname, input, output, True, structure)
    if size is not None and footprint is not None:
        warn_at_caller("ignoring size because footprint is set", UserWarning)
    kw = _grey_kw(size, footprint, structure, mode, cval, origin, axes, device, None)
    first, second = (grey_erosion, grey_dilation) if white else (grey_dilation, grey_erosion)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # warned once above, as scipy does
        y = second(first(x, **kw), **(dict(kw, output=dt) if dt is not None else kw))
    return _finish(_as(x, dt) - y if white else y - _as(x, dt), out)


# NumPy inputs on the CPU: scipy's own code, line for line, over kiln's grey steps (which
# take every dtype there), so dtypes, output arrays and bool inputs behave as scipy's.

def _host(input, device):
    return device in (None, "cpu") and _is_numpy(input) and not isinstance(input, _native.Tensor)


def _np_tophat(white, input, size, footprint, structure, output, mode, cval, origin, axes):
    np = _np()
    input = np.asarray(input)
    if size is not None and footprint is not None:
        warn_at_caller("ignoring size because footprint is set", UserWarning)
    first, second = (grey_erosion, grey_dilation) if white else (grey_dilation, grey_erosion)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        tmp = first(input, size, footprint, structure, None, mode, cval, origin, axes=axes)
        tmp = second(tmp, size, footprint, structure, output, mode, cval, origin, axes=axes)
    if tmp is None:
        tmp = output
    a, b = (input, tmp) if white else (tmp, input)
    if input.dtype == np.bool_ and tmp.dtype == np.bool_:
        np.bitwise_xor(a, b, out=tmp)
    else:
        np.subtract(a, b, out=tmp)
    return tmp


def _np_gradient(input, size, footprint, structure, output, mode, cval, origin, axes):
    np = _np()
    tmp = grey_dilation(input, size, footprint, structure, None, mode, cval, origin, axes=axes)
    if isinstance(output, np.ndarray):
        grey_erosion(input, size, footprint, structure, output, mode, cval, origin, axes=axes)
        return np.subtract(tmp, output, output)
    return tmp - grey_erosion(input, size, footprint, structure, None, mode, cval, origin,
                              axes=axes)


def _np_laplace(input, size, footprint, structure, output, mode, cval, origin, axes):
    np = _np()
    input = np.asarray(input)
    tmp1 = grey_dilation(input, size, footprint, structure, None, mode, cval, origin, axes=axes)
    if isinstance(output, np.ndarray):
        grey_erosion(input, size, footprint, structure, output, mode, cval, origin, axes=axes)
        np.add(tmp1, output, output)
        np.subtract(output, input, output)
        return np.subtract(output, input, output)
    tmp2 = grey_erosion(input, size, footprint, structure, None, mode, cval, origin, axes=axes)
    np.add(tmp1, tmp2, tmp2)
    np.subtract(tmp2, input, tmp2)
    np.subtract(tmp2, input, tmp2)
    return tmp2


def white_tophat(input, size=None, footprint=None, structure=None, output=None, mode="reflect",
                 cval=0.0, origin=0, *, axes=None, device=None):
    """scipy.ndimage.white_tophat: ``input - grey_opening(input)``."""
    if _host(input, device):
        return _np_tophat(True, input, size, footprint, structure, output, mode, cval, origin, axes)
    return _tophat("white_tophat", True, input, size, footprint, structure, output, mode, cval,
                   origin, axes, device)


def black_tophat(input, size=None, footprint=None, structure=None, output=None, mode="reflect",
                 cval=0.0, origin=0, *, axes=None, device=None):
    """scipy.ndimage.black_tophat: ``grey_closing(input) - input``."""
    if _host(input, device):
        return _np_tophat(False, input, size, footprint, structure, output, mode, cval, origin, axes)
    return _tophat("black_tophat", False, input, size, footprint, structure, output, mode, cval,
                   origin, axes, device)


def morphological_gradient(input, size=None, footprint=None, structure=None, output=None,
                           mode="reflect", cval=0.0, origin=0, *, axes=None, device=None):
    """scipy.ndimage.morphological_gradient: ``grey_dilation - grey_erosion``."""
    if _host(input, device):
        return _np_gradient(input, size, footprint, structure, output, mode, cval, origin, axes)
    x, out, dt = _prep("morphological_gradient", input, output, False, structure)
    if out is not None:
        dt = out.dtype
    kw = _grey_kw(size, footprint, structure, mode, cval, origin, axes, device, dt)
    return _finish(grey_dilation(x, **kw) - grey_erosion(x, **kw), out)


def morphological_laplace(input, size=None, footprint=None, structure=None, output=None,
                          mode="reflect", cval=0.0, origin=0, *, axes=None, device=None):
    """scipy.ndimage.morphological_laplace: ``grey_dilation + grey_erosion - 2 * input``, in
    the input's dtype (uint8 wraps, as scipy's does) or an output array's."""
    if _host(input, device):
        return _np_laplace(input, size, footprint, structure, output, mode, cval, origin, axes)
    x, out, dt = _prep("morphological_laplace", input, output, False, structure)
    if out is not None:
        dt = out.dtype
    kw = _grey_kw(size, footprint, structure, mode, cval, origin, axes, device, dt)
    xs = _as(x, dt)
    return _finish(grey_dilation(x, **kw) + grey_erosion(x, **kw) - xs - xs, out)


def binary_propagation(input, structure=None, mask=None, output=None, border_value=0, origin=0,
                       *, axes=None, device=None, out_type=None):
    """scipy.ndimage.binary_propagation: dilation repeated until stable, within ``mask``
    (morphological reconstruction). With a mask, each step is a native call (see mask=)."""
    return binary_dilation(input, structure, -1, mask, output, border_value, origin, axes=axes,
                           device=device, out_type=out_type)


def binary_hit_or_miss(input, structure1=None, structure2=None, output=None, origin1=0,
                       origin2=None, *, axes=None, device=None):
    """scipy.ndimage.binary_hit_or_miss: where ``structure1`` fits the foreground and
    ``structure2`` the background (the complement's erosion with a true border, as scipy's)."""
    np = _np()
    fname = "binary_hit_or_miss"
    x, out, _ = _prep(fname, input, output, True)
    ndim = len(x.shape)
    ax = _axes(axes, ndim, fname)
    s1 = generate_binary_structure(len(ax), 1) if structure1 is None else np.asarray(structure1) != 0
    s2 = np.logical_not(s1) if structure2 is None else np.asarray(structure2) != 0
    o1 = _seq(origin1, len(ax), "origin1", fname, int)
    o2 = o1 if origin2 is None else _seq(origin2, len(ax), "origin2", fname, int)
    xb = (x != 0)
    kw = {"axes": axes, "device": device, "out_type": "like"}
    hit = binary_erosion(xb, s1, 1, None, None, 0, o1, **kw)
    miss = binary_erosion(~xb, s2, 1, None, None, 1, o2, **kw)
    return _finish(hit & miss, out)


def iterate_structure(structure, iterations, origin=None):
    """scipy.ndimage.iterate_structure: ``structure`` dilated by itself ``iterations - 1``
    times (a NumPy bool array; with ``origin``, also the origin scaled)."""
    np = _np()
    structure = np.asarray(structure)
    if iterations < 2:
        return structure.copy()
    ni = iterations - 1
    shape = [n + ni * (n - 1) for n in structure.shape]
    pos = [ni * (structure.shape[i] // 2) for i in range(len(shape))]
    slc = tuple(slice(pos[i], pos[i] + structure.shape[i]) for i in range(len(shape)))
    out = np.zeros(shape, bool)
    out[slc] = structure != 0
    out = binary_dilation(out, structure, iterations=ni)
    if origin is None:
        return out
    origin = _seq(origin, structure.ndim, "origin", "iterate_structure", int)
    return out, [iterations * o for o in origin]
