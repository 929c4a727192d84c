"""The linear filters of ``kiln.ndimage`` for NumPy inputs on the CPU, with scipy's results for
every dtype scipy takes (bool, int8..int64, uint8..uint64, float32, float64, complex64,
complex128), ``output=`` of any of those, and a mode per axis where scipy takes one.

scipy builds its linear filters in Python from three C routines: ``correlate1d``,
``uniform_filter1d`` and the n-D ``correlate``. Each reads its input as doubles, sums in
double and stores into the output array's dtype with C's conversion (integers truncate and
wrap). This module follows scipy's Python layer step for step (output allocation, argument
checks and their exception types, the complex real/imaginary split, the per-axis chains, the
Laplace sums and gradient magnitudes done with NumPy in the output's dtype) and hands the C
routines' work to kiln's native code (``kiln_core::imaging::scipy_cpu``). A chain of 1-D
passes (``gaussian_filter``, ``uniform_filter``, ``sobel``, ``prewitt``) runs as one native
call that stores the intermediate in the output dtype between passes, as scipy's chain of
calls on the output array does.

Gaussian weights are computed with NumPy in scipy's own sequence of operations, so they are
scipy's to the bit on this machine (a reimplementation of ``exp`` and of NumPy's pairwise sum
can differ in the last bit).
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Iterable

import numpy as np

from . import _native
from ._errors import InvalidInputError, warn_at_caller
from .ndimage import ScipyRuntimeError, ScipyTypeError

_REAL = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float32", "float64")
_MODES = ("nearest", "wrap", "reflect", "grid-mirror", "mirror", "constant", "grid-wrap",
          "grid-constant")


class ScipyValueError(InvalidInputError, ValueError):
    """An argument kiln rejects where scipy.ndimage raises ``ValueError``."""


# --- scipy's argument rules ----------------------------------------------------------------

def _get_output(output, x, complex_output=False):
    """scipy's ``_get_output``: a new zero array, or the array given."""
    if output is None:
        # by name, as scipy: a big-endian input gives a native-endian output
        dt = np.promote_types(x.dtype, np.complex64) if complex_output else x.dtype.name
        return np.zeros(x.shape, dtype=dt)
    if isinstance(output, (type, np.dtype)):
        if complex_output and np.dtype(output).kind != "c":
            warn_at_caller("promoting specified output dtype to complex")
            output = np.promote_types(output, np.complex64)
        return np.zeros(x.shape, dtype=output)
    if isinstance(output, str):
        try:
            dt = np.dtype(output)
        except TypeError:
            raise ScipyTypeError(f"output must be None, a dtype or an array, not {output!r}") from None
        if complex_output and dt.kind != "c":
            raise ScipyRuntimeError("output must have complex dtype")
        if not issubclass(dt.type, np.number):
            raise ScipyRuntimeError("output must have numeric dtype")
        return np.zeros(x.shape, dtype=dt)
    out = np.asarray(output)
    if out.shape != x.shape:
        raise ScipyRuntimeError("output shape not correct")
    if complex_output and out.dtype.kind != "c":
        raise ScipyRuntimeError("output must have complex dtype")
    return out


def _seq(v, n):
    """scipy's ``_normalize_sequence``."""
    if not isinstance(v, str) and np.iterable(v):
        v = list(v)
        if len(v) != n:
            raise ScipyRuntimeError("sequence argument must have length equal to input rank")
        return v
    return [v] * n


def _axis(axis, ndim):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


def _check_axes(axes, ndim):
    """scipy's ``_check_axes``."""
    if axes is None:
        return tuple(range(ndim))
    if np.isscalar(axes):
        axes = (operator.index(axes),)
    elif isinstance(axes, Iterable):
        axes = tuple(operator.index(a) for a in axes)
        for a in axes:
            if a < -ndim or a > ndim - 1:
                raise ScipyValueError(f"specified axis: {a} is out of range")
        axes = tuple(a % ndim for a in axes)
    else:
        raise ScipyValueError("axes must be an integer, iterable of integers, or None")
    if len(set(axes)) != len(axes):
        raise ScipyValueError("axes must be unique")
    return axes


def _mode(mode):
    """scipy's mode check (``_extend_mode_to_code``): one of the filter modes."""
    if not isinstance(mode, str) or mode not in _MODES:
        raise ScipyRuntimeError("boundary mode not supported")
    return mode


def _bad_origin(origin, n):
    return origin < -(n // 2) or origin > (n - 1) // 2


def _native_dtype(dt, what):
    dt = dt.newbyteorder("=")
    if dt.name not in _REAL:
        raise ScipyRuntimeError(f"{what} dtype {dt.name}: array type not supported (as in scipy)")
    return dt


def _store(r, out):
    out[...] = r
    return out


# --- the native routines ------------------------------------------------------------------

def _passes(x, out, passes, cval):
    """A chain of 1-D passes ``(axis, weights, size, origin, mode)`` (``size`` > 0: a uniform
    filter of that size) from the real array ``x`` into the real array ``out``; a pass reads
    the previous pass's result as ``out`` holds it."""
    if not passes:
        out[...] = x
        return out
    dt = _native_dtype(x.dtype, "input")
    od = _native_dtype(out.dtype, "output")
    x = np.ascontiguousarray(x, dtype=dt)
    b = _native.ndimage_passes_host(
        x, dt.name, list(x.shape), od.name,
        [p[0] for p in passes], [list(map(float, p[1])) if p[1] is not None else [] for p in passes],
        [p[2] for p in passes], [int(p[3]) for p in passes], [_mode(p[4]) for p in passes],
        float(cval))
    return _store(np.frombuffer(b, dtype=od).reshape(x.shape), out)


def _real_or_parts(x, out, passes, cval):
    """:func:`_passes` on a real input, or on the real and imaginary parts of a complex one
    (scipy's ``_complex_via_real_components`` with real weights)."""
    if x.dtype.kind != "c":
        return _passes(x, out, passes, cval)
    if out.dtype.kind != "c":
        raise ScipyRuntimeError("output must have complex dtype")
    _passes(x.real, out.real, passes, np.real(cval))
    _passes(x.imag, out.imag, passes, np.imag(cval))
    return out


def _complex(func, x, w, out, cval, **kw):
    """scipy's ``_complex_via_real_components``: complex data or weights as real calls."""
    ci, cw = x.dtype.kind == "c", w.dtype.kind == "c"
    if ci and cw:
        func(x.real, w.real, output=out.real, cval=np.real(cval), **kw)
        out.real -= func(x.imag, w.imag, output=None, cval=np.imag(cval), **kw)
        func(x.real, w.imag, output=out.imag, cval=np.real(cval), **kw)
        out.imag += func(x.imag, w.real, output=None, cval=np.imag(cval), **kw)
    elif ci:
        func(x.real, w, output=out.real, cval=np.real(cval), **kw)
        func(x.imag, w, output=out.imag, cval=np.imag(cval), **kw)
    else:
        if np.iscomplexobj(cval):
            raise ScipyValueError("Cannot provide a complex-valued cval when the input is real.")
        func(x, w.real, output=out.real, cval=cval, **kw)
        func(x, w.imag, output=out.imag, cval=cval, **kw)
    return out


# --- the functions ------------------------------------------------------------------------

def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    x, w = np.asarray(input), np.asarray(weights)
    if x.dtype.kind == "c" or w.dtype.kind == "c":
        if w.dtype.kind == "c":
            w = w.conj().astype(np.complex128, copy=False)
        out = _get_output(output, x, complex_output=True)
        return _complex(correlate1d, x, w, out, cval, axis=axis, mode=mode, origin=origin)
    out = _get_output(output, x)
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 1 or w.shape[0] < 1:
        raise ScipyRuntimeError("no filter weights given")
    axis = _axis(axis, x.ndim)
    if _bad_origin(origin, len(w)):
        raise ScipyValueError(
            "Invalid origin; origin must satisfy -(len(weights) // 2) <= origin <= (len(weights)-1) // 2")
    return _passes(x, out, [(axis, w, 0, origin, _mode(mode))], cval)


def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    w = np.asarray(weights)[::-1]
    origin = -origin - (0 if w.shape[0] & 1 else 1)
    if w.dtype.kind == "c":
        w = w.conj()  # correlate1d conjugates it back
    return correlate1d(input, w, axis, output, mode, cval, origin)


def _gaussian_kernel(sigma, order, radius):
    """scipy's ``_gaussian_kernel1d`` reversed (correlation order), with NumPy's operations
    in scipy's order so that the weights are the same doubles."""
    if order < 0:
        raise ScipyValueError("order must be non-negative")
    powers = np.arange(order + 1)
    s2 = sigma * sigma
    x = np.arange(-radius, radius + 1)
    phi = np.exp(-0.5 / s2 * x ** 2)
    phi = phi / phi.sum()
    if order == 0:
        return phi[::-1]
    q = np.zeros(order + 1)
    q[0] = 1
    # d/dx (q(x) phi(x)) = (q'(x) - x q(x) / sigma^2) phi(x), as a matrix on q's coefficients
    step = np.diag(powers[1:], 1) + np.diag(np.ones(order) / -s2, -1)
    for _ in range(order):
        q = step.dot(q)
    q = (x[:, None] ** powers).dot(q)
    return (q * phi)[::-1]


def _gauss_pass(sigma, axis, order, mode, truncate, radius):
    sd = float(sigma)
    lw = int(truncate * sd + 0.5)
    if radius is not None:
        lw = radius
    if not isinstance(lw, numbers.Integral) or lw < 0:
        raise ScipyValueError("Radius must be a nonnegative integer.")
    return (axis, _gaussian_kernel(sigma, order, lw), 0, 0, _mode(mode))


def gaussian_filter1d(input, sigma, axis=-1, order=0, output=None, mode="reflect", cval=0.0,
                      truncate=4.0, *, radius=None):
    x = np.asarray(input)
    p = _gauss_pass(sigma, 0, order, mode, truncate, radius)
    return correlate1d(x, p[1], axis, output, mode, cval, 0)


def gaussian_filter(input, sigma, order=0, output=None, mode="reflect", cval=0.0, truncate=4.0,
                    *, radius=None, axes=None):
    x = np.asarray(input)
    out = _get_output(output, x)
    axes = _check_axes(axes, x.ndim)
    n = len(axes)
    orders, sigmas, modes, radii = (_seq(v, n) for v in (order, sigma, mode, radius))
    passes = [_gauss_pass(sigmas[i], _axis(axes[i], x.ndim), orders[i], modes[i], truncate,
                          radii[i]) for i in range(n) if sigmas[i] > 1e-15]
    return _real_or_parts(x, out, passes, cval)


def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    x = np.asarray(input)
    axis = _axis(axis, x.ndim)
    if size < 1:
        raise ScipyRuntimeError("incorrect filter size")
    out = _get_output(output, x, complex_output=x.dtype.kind == "c")
    if size // 2 + origin < 0 or size // 2 + origin >= size:
        raise ScipyValueError("invalid origin")
    return _real_or_parts(x, out, [(axis, None, int(size), origin, _mode(mode))], cval)


def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *,
                   axes=None):
    x = np.asarray(input)
    out = _get_output(output, x, complex_output=x.dtype.kind == "c")
    axes = _check_axes(axes, x.ndim)
    n = len(axes)
    sizes, origins, modes = _seq(size, n), _seq(origin, n), _seq(mode, n)
    passes = []
    for i in range(n):
        if sizes[i] > 1:
            s = int(sizes[i])
            if s // 2 + origins[i] < 0 or s // 2 + origins[i] >= s:
                raise ScipyValueError("invalid origin")
            passes.append((axes[i], None, s, origins[i], _mode(modes[i])))
    return _real_or_parts(x, out, passes, cval)


def _derivative(x, axis, output, mode, cval, smooth):
    x = np.asarray(x)
    axis = _axis(axis, x.ndim)
    out = _get_output(output, x)
    modes = _seq(mode, x.ndim)
    passes = [(axis, (-1.0, 0.0, 1.0), 0, 0, _mode(modes[axis]))]
    passes += [(a, smooth, 0, 0, _mode(modes[a])) for a in range(x.ndim) if a != axis]
    return _real_or_parts(x, out, passes, cval)


def sobel(input, axis=-1, output=None, mode="reflect", cval=0.0):
    return _derivative(input, axis, output, mode, cval, (1.0, 2.0, 1.0))


def prewitt(input, axis=-1, output=None, mode="reflect", cval=0.0):
    return _derivative(input, axis, output, mode, cval, (1.0, 1.0, 1.0))


def _laplace_sum(x, derivative2, output, mode, cval, axes):
    """scipy's ``generic_laplace``: the second derivatives summed in the output's dtype."""
    out = _get_output(output, x)
    axes = _check_axes(axes, x.ndim)
    if not axes:
        out[...] = x[...]
        return out
    modes = _seq(mode, len(axes))
    derivative2(x, axes[0], out, modes[0], cval)
    for a, m in zip(axes[1:], modes[1:]):
        out += derivative2(x, a, out.dtype, m, cval)
    return out


def laplace(input, output=None, mode="reflect", cval=0.0, *, axes=None):
    def d2(x, axis, output, mode, cval):
        return correlate1d(x, [1, -2, 1], axis, output, mode, cval, 0)

    return _laplace_sum(np.asarray(input), d2, output, mode, cval, axes)


def _gauss_kwargs(kwargs):
    bad = set(kwargs) - {"truncate", "radius"}
    if bad:
        raise ScipyTypeError(f"gaussian_filter() got unexpected keyword arguments {sorted(bad)}")
    return kwargs


def gaussian_laplace(input, sigma, output=None, mode="reflect", cval=0.0, *, axes=None,
                     **kwargs):
    x = np.asarray(input)
    kw = _gauss_kwargs(kwargs)
    ax = _check_axes(axes, x.ndim)
    sigma = _seq(sigma, len(ax))
    if len(ax) < x.ndim:
        full = [0] * x.ndim
        for s, a in zip(sigma, ax):
            full[a] = s
        sigma = full

    def d2(x, axis, output, mode, cval):
        order = [0] * x.ndim
        order[axis] = 2
        return gaussian_filter(x, sigma, order, output, mode, cval, **kw)

    return _laplace_sum(x, d2, output, mode, cval, axes)


def gaussian_gradient_magnitude(input, sigma, output=None, mode="reflect", cval=0.0, *,
                                axes=None, **kwargs):
    """scipy's ``generic_gradient_magnitude`` over Gaussian first derivatives; as scipy's,
    each derivative smooths every axis of the input (``axes`` picks the derivatives)."""
    x = np.asarray(input)
    kw = _gauss_kwargs(kwargs)
    out = _get_output(output, x)
    axes = _check_axes(axes, x.ndim)
    if not axes:
        out[...] = x[...]
        return out
    modes = _seq(mode, len(axes))

    def d1(axis, output, mode):
        order = [0] * x.ndim
        order[axis] = 1
        return gaussian_filter(x, sigma, order, output, mode, cval, **kw)

    d1(axes[0], out, modes[0])
    np.multiply(out, out, out)
    for a, m in zip(axes[1:], modes[1:]):
        t = d1(a, out.dtype, m)
        np.multiply(t, t, t)
        out += t
    np.sqrt(out, out, casting="unsafe")
    return out


def _correlate_nd(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
                  convolution=False, axes=None):
    x, w = np.asarray(input), np.asarray(weights)
    if x.dtype.kind == "c" or w.dtype.kind == "c":
        if w.dtype.kind == "c" and not convolution:
            w = w.conj()
        out = _get_output(output, x, complex_output=True)
        return _complex(_correlate_nd, x, w, out, cval, mode=mode, origin=origin,
                        convolution=convolution, axes=axes)
    axes = _check_axes(axes, x.ndim)
    w = np.asarray(w, dtype=np.float64)
    if len(axes) < x.ndim:
        if w.ndim != len(axes):
            raise ScipyRuntimeError(f"weights.ndim ({w.ndim}) must match len(axes) ({len(axes)})")
        w = np.expand_dims(w, tuple(a for a in range(x.ndim) if a not in axes))
    origins = _seq(origin, len(axes))
    if len(axes) < x.ndim:
        full = [0] * x.ndim
        for o, a in zip(origins, axes):
            full[a] = o
        origins = full
    origins = [operator.index(o) for o in origins]
    wshape = [n for n in w.shape if n > 0]
    if len(wshape) != x.ndim:
        raise ScipyRuntimeError(f"weights.ndim ({len(wshape)}) must match len(axes) ({len(axes)})")
    if convolution:
        w = w[(slice(None, None, -1),) * w.ndim]
        origins = [-o - (0 if w.shape[i] & 1 else 1) for i, o in enumerate(origins)]
    if any(_bad_origin(o, n) for o, n in zip(origins, wshape)):
        raise ScipyValueError(
            "Invalid origin; origin must satisfy -(weights.shape[k] // 2) <= origin[k] <= (weights.shape[k]-1) // 2")
    out = _get_output(output, x)
    if not isinstance(mode, str) and isinstance(mode, Iterable):
        raise ScipyRuntimeError("A sequence of modes is not supported")
    _mode(mode)
    dt = _native_dtype(x.dtype, "input")
    od = _native_dtype(out.dtype, "output")
    xs = np.ascontiguousarray(x, dtype=dt)
    if x.ndim == 0:  # one sample: a 1-element kernel on a 1-element line
        xs, wshape, origins = xs.reshape(1), [1], [0]
    b = _native.ndimage_correlate_host(
        xs, dt.name, list(xs.shape), od.name, np.ascontiguousarray(w).ravel().tolist(),
        list(wshape), origins, mode, float(cval))
    return _store(np.frombuffer(b, dtype=od).reshape(x.shape), out)


def correlate(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    return _correlate_nd(input, weights, output, mode, cval, origin, axes=axes)


def convolve(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    return _correlate_nd(input, weights, output, mode, cval, origin, convolution=True, axes=axes)
