"""The subset of ``cupy.testing`` CuPy's user-kernel tests use, over NumPy.

Semantics follow CuPy's own decorators (``cupy/testing/_loops.py``, ``_parameterized.py``,
``_helper.py``): ``numpy_cupy_*`` run the body with ``xp=cupy`` and ``xp=numpy``, require
both to raise compatible errors or both to return, then compare values and (``type_check``)
dtypes; ``for_*dtypes`` run the body once per dtype and name the failing one;
``parameterize`` makes one test class per parameter set.
"""

import functools
import inspect
import itertools
import sys

import numpy
import pytest

from . import _protocol_helpers  # noqa: F401

_complex_dtypes = (numpy.complex64, numpy.complex128)
_regular_float_dtypes = (numpy.float64, numpy.float32)
_float_dtypes = _regular_float_dtypes + (numpy.float16,)
_signed_dtypes = tuple(numpy.dtype(i).type for i in "bhilq")
_unsigned_dtypes = tuple(numpy.dtype(i).type for i in "BHILQ")
_int_dtypes = _signed_dtypes + _unsigned_dtypes
_int_bool_dtypes = _int_dtypes + (numpy.bool_,)


def _without(impl, *names):
    """``impl``'s signature without ``names`` (pytest must not take them for fixtures)."""
    sig = inspect.signature(impl)
    params = [p for p in sig.parameters.values() if p.name not in names]
    return sig.replace(parameters=params)


def _wraps(impl, *names):
    def deco(f):
        f = functools.wraps(impl)(f)
        f.__signature__ = _without(impl, *names)
        return f

    return deco


# ---- numpy_cupy_* -------------------------------------------------------------------


def _call(impl, args, kw, name, xp):
    kw = dict(kw)
    kw[name] = xp
    try:
        return impl(*args, **kw), None
    except Exception as e:  # compared with the other module's outcome below
        return None, e


def _check_errors(cupy_e, numpy_e, accept_error):
    if cupy_e is None and numpy_e is None:
        return False
    if cupy_e is not None and numpy_e is not None:
        ok = accept_error is True or (
            accept_error
            and isinstance(cupy_e, accept_error)
            and isinstance(numpy_e, accept_error)
        )
        if not ok and type(cupy_e) is not type(numpy_e):
            raise AssertionError(
                f"both raised, different errors: cupy {cupy_e!r}, numpy {numpy_e!r}"
            ) from cupy_e
        if not ok:
            raise numpy_e
        return True
    if cupy_e is not None:
        raise AssertionError(f"only cupy raised: {cupy_e!r}") from cupy_e
    raise AssertionError(f"only numpy raised: {numpy_e!r}") from numpy_e


def _as_tuple(r):
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


def _make_decorator(check, name, type_check, accept_error, contiguous_check=False):
    def decorator(impl):
        @_wraps(impl, name)
        def test_func(*args, **kw):
            cupy_r, cupy_e = _call(impl, args, kw, name, sys.modules["cupy"])
            numpy_r, numpy_e = _call(impl, args, kw, name, numpy)
            if _check_errors(cupy_e, numpy_e, accept_error):
                return
            cupy_rs, numpy_rs = _as_tuple(cupy_r), _as_tuple(numpy_r)
            assert len(cupy_rs) == len(numpy_rs), "different numbers of results"
            for c, n in zip(cupy_rs, numpy_rs):
                if contiguous_check and isinstance(n, numpy.ndarray):
                    if n.flags.c_contiguous and not numpy.asarray(c).flags.c_contiguous:
                        raise AssertionError("the cupy result is not C-contiguous")
                c, n = numpy.asarray(c), numpy.asarray(n)
                check(c, n)
                if type_check and c.dtype != n.dtype:
                    raise AssertionError(f"dtypes differ: cupy {c.dtype}, numpy {n.dtype}")

        return test_func

    return decorator


def numpy_cupy_array_equal(
    err_msg="", verbose=True, name="xp", type_check=True, accept_error=False,
    sp_name=None, scipy_name=None, strides_check=False,
):
    """Compare the cupy and numpy results for equality (CuPy's decorator)."""

    def check(c, n):
        numpy.testing.assert_array_equal(c, n, err_msg=err_msg, verbose=verbose)

    return _make_decorator(check, name, type_check, accept_error)


def numpy_cupy_allclose(
    rtol=1e-7, atol=0, err_msg="", verbose=True, name="xp", type_check=True,
    accept_error=False, sp_name=None, scipy_name=None, contiguous_check=True,
):
    """Compare the cupy and numpy results within tolerances (CuPy's decorator)."""

    def check(c, n):
        r = rtol[n.dtype.type] if isinstance(rtol, dict) else rtol
        a = atol[n.dtype.type] if isinstance(atol, dict) else atol
        numpy.testing.assert_allclose(c, n, r, a, err_msg=err_msg, verbose=verbose)

    return _make_decorator(check, name, type_check, accept_error, contiguous_check)


def assert_array_equal(x, y, err_msg="", verbose=True, strides_check=False):
    """``numpy.testing.assert_array_equal`` on array-likes of either module."""
    numpy.testing.assert_array_equal(numpy.asarray(x), numpy.asarray(y), err_msg, verbose)


def assert_allclose(actual, desired, rtol=1e-7, atol=0, err_msg="", verbose=True):
    """``numpy.testing.assert_allclose`` on array-likes of either module."""
    numpy.testing.assert_allclose(
        numpy.asarray(actual), numpy.asarray(desired), rtol, atol, err_msg=err_msg, verbose=verbose
    )


# ---- loops over dtypes and orders ---------------------------------------------------------


def for_dtypes(dtypes, name="dtype"):
    """Run the test once per dtype of ``dtypes`` (as keyword ``name``)."""

    def decorator(impl):
        @_wraps(impl, name)
        def test_func(*args, **kw):
            for dtype in dtypes:
                kw[name] = numpy.dtype(dtype).type
                try:
                    impl(*args, **kw)
                except Exception:
                    print(name, "is", dtype)
                    raise

        return test_func

    return decorator


def for_all_dtypes(name="dtype", no_float16=False, no_bool=False, no_complex=False):
    """Every dtype CuPy's tests loop over."""
    dtypes = _regular_float_dtypes if no_float16 else _float_dtypes
    dtypes = dtypes + (_int_dtypes if no_bool else _int_bool_dtypes)
    if not no_complex:
        dtypes = dtypes + _complex_dtypes
    return for_dtypes(dtypes, name=name)


def for_float_dtypes(name="dtype", no_float16=False):
    """float64, float32 and (unless ``no_float16``) float16."""
    return for_dtypes(_regular_float_dtypes if no_float16 else _float_dtypes, name=name)


def for_signed_dtypes(name="dtype"):
    """The signed integers."""
    return for_dtypes(_signed_dtypes, name=name)


def for_unsigned_dtypes(name="dtype"):
    """The unsigned integers."""
    return for_dtypes(_unsigned_dtypes, name=name)


def for_int_dtypes(name="dtype", no_bool=False):
    """The integers and (unless ``no_bool``) bool."""
    return for_dtypes(_int_dtypes if no_bool else _int_bool_dtypes, name=name)


def for_complex_dtypes(name="dtype"):
    """complex64 and complex128."""
    return for_dtypes(_complex_dtypes, name=name)


def for_orders(orders, name="order"):
    """Run the test once per memory order."""

    def decorator(impl):
        @_wraps(impl, name)
        def test_func(*args, **kw):
            for order in orders:
                kw[name] = order
                try:
                    impl(*args, **kw)
                except Exception:
                    print(name, "is", order)
                    raise

        return test_func

    return decorator


def for_CF_orders(name="order"):
    """C and F orders."""
    return for_orders([None, "C", "F", "c", "f"], name)


# ---- parameterize -------------------------------------------------------------------------


def product(parameter):
    """Every combination of the lists in ``parameter`` (a dict), as dicts."""
    keys = sorted(parameter)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(parameter[k] for k in keys))]


def parameterize(*params, **kwargs):
    """One test class per parameter set (attributes set on the class), as CuPy's does."""

    def decorator(cls):
        module = sys.modules[cls.__module__]
        for i, param in enumerate(params):
            label = ", ".join(f"{k}={v!r}" for k, v in sorted(param.items()))
            name = f"{cls.__name__}_param_{i}_{{{label}}}"
            attrs = dict(param)
            attrs["__test__"] = True
            new = type(name, (cls,), attrs)
            new.__module__ = cls.__module__
            setattr(module, name, new)
        cls.__test__ = False
        return cls

    return decorator


def multi_gpu(gpu_num):
    """Tests that need several GPUs do not run here."""
    return pytest.mark.skip(reason=f"needs {gpu_num} GPUs (the NumPy stand-in has none)")


# ---- arrays -------------------------------------------------------------------------------


def shaped_arange(shape, xp=None, dtype=numpy.float32, order="C"):
    """1..N in ``shape`` (bool: evens True), as CuPy's helper."""
    xp = xp or numpy
    dtype = numpy.dtype(dtype)
    a = numpy.arange(1, int(numpy.prod(shape)) + 1, 1)
    if dtype == "?":
        a = a % 2 == 0
    elif dtype.kind == "c":
        a = a + a * 1j
    return xp.array(a.astype(dtype).reshape(shape), order=order)


def shaped_random(shape, xp=None, dtype=numpy.float32, scale=10, seed=0, order="C"):
    """Uniform [0, scale) values from a seeded RandomState, as CuPy's helper."""
    xp = xp or numpy
    rng = numpy.random.RandomState(seed)
    dtype = numpy.dtype(dtype)
    if dtype == "?":
        a = rng.randint(2, size=shape)
    elif dtype.kind == "c":
        a = rng.rand(*shape) + 1j * rng.rand(*shape)
        a *= scale
    else:
        a = rng.rand(*shape) * scale
    return xp.asarray(a, dtype=dtype, order=order)
