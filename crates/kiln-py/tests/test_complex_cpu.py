"""complex64 and complex128 in users' element-wise kernels on the CPU path, against NumPy:
arithmetic, mixed real and complex operands, the complex functions, NumPy and Python
complex scalars, strided and unaligned views, and the constructs refused."""

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(3030)


def crandom(shape, dtype):
    part = np.float32 if dtype == np.complex64 else np.float64
    re = RNG.uniform(-3, 3, shape).astype(part)
    im = RNG.uniform(-3, 3, shape).astype(part)
    return (re + 1j * im).astype(dtype)


TOL = {np.complex64: 2e-6, np.complex128: 1e-14}


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("n", [0, 1, 4097])
def test_arithmetic_matches_numpy(dtype, n):
    k = kiln.ElementwiseKernel(
        "T x, T y", "T a, T s, T m, T d, T c, bool e",
        "a = x + y; s = x - y; m = x * y; d = x / y; c = conj(x) * -y; e = x == y", "carith",
    )
    x, y = crandom(n, dtype), crandom(n, dtype)
    y[: n // 3] = x[: n // 3]
    a, s, m, d, c, e = k(x, y)
    for r in (a, s, m, d, c):
        assert r.dtype == dtype and r.shape == (n,)
    np.testing.assert_array_equal(a, x + y)
    np.testing.assert_array_equal(s, x - y)
    np.testing.assert_allclose(m, x * y, rtol=TOL[dtype])
    np.testing.assert_allclose(d, x / y, rtol=TOL[dtype])
    np.testing.assert_allclose(c, np.conj(x) * -y, rtol=TOL[dtype])
    np.testing.assert_array_equal(e, x == y)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_functions_match_numpy(dtype):
    k = kiln.ElementwiseKernel(
        "T z", "T e, T l, T q, T s, T c, T p",
        "e = exp(z); l = log(z); q = sqrt(z); s = sin(z); c = cos(z); p = pow(z, T(0.5, 0.25))",
        "cfuncs",
    )
    z = crandom(5000, dtype)
    e, l, q, s, c, p = k(z)
    tol = 2e-5 if dtype == np.complex64 else 1e-12
    np.testing.assert_allclose(e, np.exp(z), rtol=tol)
    np.testing.assert_allclose(l, np.log(z), rtol=tol)
    np.testing.assert_allclose(q, np.sqrt(z), rtol=tol)
    np.testing.assert_allclose(s, np.sin(z), rtol=tol)
    np.testing.assert_allclose(c, np.cos(z), rtol=tol)
    np.testing.assert_allclose(p, z ** dtype(0.5 + 0.25j), rtol=tol * 10)
    parts = kiln.ElementwiseKernel(
        "T z", "R re, R im, R ab, R ag", "re = real(z); im = imag(z); ab = abs(z); ag = arg(z)", "cparts",
    )
    part = np.float32 if dtype == np.complex64 else np.float64
    outs = [np.empty(z.shape, part) for _ in range(4)]
    parts(z, *outs)
    np.testing.assert_array_equal(outs[0], z.real)
    np.testing.assert_array_equal(outs[1], z.imag)
    np.testing.assert_allclose(outs[2], np.abs(z), rtol=tol)
    np.testing.assert_allclose(outs[3], np.angle(z), rtol=tol, atol=tol)


def test_scalars_python_and_numpy():
    k = kiln.ElementwiseKernel("T x, T y", "T z", "z = x * y + 1", "cscal")
    x = crandom((4, 5), np.complex128)
    np.testing.assert_allclose(k(x, 2 - 0.5j), x * (2 - 0.5j) + 1, rtol=1e-15)
    x64 = crandom((4, 5), np.complex64)
    z = k(x64, np.complex64(0.25 + 1j))
    assert z.dtype == np.complex64
    np.testing.assert_allclose(z, x64 * np.complex64(0.25 + 1j) + 1, rtol=2e-6)
    # a scalar alone binds T: a Python complex is complex128
    only = kiln.ElementwiseKernel("T y", "T z", "z = y * 2", "conly")
    out = np.empty(3, np.complex128)
    only(1 + 1j, out)
    np.testing.assert_array_equal(out, np.full(3, 2 + 2j))


def test_mixed_real_and_complex_and_construction():
    k = kiln.ElementwiseKernel(
        "T z, R r", "T a, T d", "a = z * r + r; d = r / z", "cmixed",
    )
    z = crandom(1000, np.complex64)
    r = RNG.uniform(-2, 2, 1000).astype(np.float32)
    a, d = k(z, r)
    assert a.dtype == np.complex64
    np.testing.assert_allclose(a, z * r + r, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(d, r / z, rtol=2e-6, atol=1e-7)
    build = kiln.ElementwiseKernel(
        "float32 re, float32 im", "complex64 z", "z = complex<float>(re, im)", "cbuild",
    )
    re, im = r, r[::-1].copy()
    np.testing.assert_array_equal(build(re, im), (re + 1j * im).astype(np.complex64))


def test_strided_broadcast_and_unaligned_views():
    k = kiln.ElementwiseKernel("T x, T y", "T z", "z = x - y", "csub")
    x = crandom((6, 8), np.complex128)
    y = crandom((8,), np.complex128)
    np.testing.assert_array_equal(k(x[:, ::2], y[::2]), x[:, ::2] - y[::2])
    np.testing.assert_array_equal(k(x.T, x.T), np.zeros((8, 6), np.complex128))
    # a complex64 view 4 bytes into a buffer (NumPy allows it: complex64 aligns as float32)
    buf = np.zeros(2 * 100 + 1, np.float32)
    buf[1:] = RNG.uniform(-1, 1, 200)
    v = buf[1:].view(np.complex64)
    w = crandom(100, np.complex64)
    np.testing.assert_array_equal(k(v, w), v - w)


@pytest.mark.parametrize("body, match", [
    ("z = x < y", "not defined on complex values"),
    ("z = (double)x", "cannot be converted to float64"),
    ("if (x) { z = 1; }", "cannot be a condition"),
    ("z = tanh(x)", "`tanh` is not defined on complex values"),
])
def test_refused_constructs_name_themselves(body, match):
    k = kiln.ElementwiseKernel("T x, T y", "float64 z", body, "cbad")
    x = crandom(4, np.complex128)
    with pytest.raises(kiln.InvalidInputError, match=match):
        k(x, x)


def test_reduction_over_complex_is_refused():
    k = kiln.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "csum")
    with pytest.raises(kiln.InvalidInputError, match="ReductionKernel over complex128"):
        k(crandom(10, np.complex128))
