"""The user-kernel examples of docs/examples/python, each checked against kiln's built-in
op on random inputs at odd sizes (crates/kiln/tests/examples.rs checks the Rust ones the
same way):

- sigmoid_f16 (kiln.ElementwiseKernel) against kiln.sigmoid on float16: bit for bit on the
  CPU path with NumPy arrays (both are 1 / (1 + exp(-x)) in float with kiln's exp, rounded
  to half once; runs in CI), within 1 half ulp on the GPU with CuPy arrays (CUDA's expf in
  a kernel built with --fmad=false against kiln's map kernel may differ in the last float
  bit, which moves the half rounding only next to a tie);
- matmul_naive against kiln.matmul (f32), within the dot-product error bound;
- filter3x3_shared against kiln.filter2d (mode nearest, the direct path), within the
  float32 summation bound of 9 taps; conv3x3x3 against kiln.filter3d likewise (27 taps);
- mc_gbm against kiln's closed-form price (4 standard errors) and kiln's Monte Carlo
  price (4 combined standard errors).

The raw-kernel tests need a GPU and CuPy: they skip without them and fail instead with
KILN_REQUIRE_GPU=1 (scripts/py-gpu-check.sh runs them)."""

import sys
from pathlib import Path

import numpy as np
import pytest

import kiln

from test_gpu import cupy  # noqa: F401  (fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "docs" / "examples" / "python"))

import conv3x3x3  # noqa: E402
import filter3x3_shared  # noqa: E402
import matmul_naive  # noqa: E402
import mc_gbm  # noqa: E402
import sigmoid_f16  # noqa: E402

EPS = float(np.finfo(np.float32).eps)
TINY = float(np.finfo(np.float32).tiny)


def _half_inputs(seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-12, 12, 4099).astype(np.float16)
    ends = np.array([0.0, -0.0, 1e-4, -1e-4, 17, -17, 65504, -65504, np.inf, -np.inf, np.nan],
                    dtype=np.float16)
    return np.concatenate([x, ends])


def _half_ulps(a, b):
    """Distance in half ulps of non-negative float16 arrays (sigmoid's range), NaN as 0
    where both are NaN."""
    d = np.abs(a.view(np.uint16).astype(np.int32) - b.view(np.uint16).astype(np.int32))
    return np.where(np.isnan(a) & np.isnan(b), 0, d)


def _exact_sigmoid(x):
    """The correctly rounded float16 sigmoid (from float64)."""
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float16)


def test_sigmoid_f16_on_numpy_is_the_builtin_bit_for_bit():
    x = _half_inputs(30)
    got = sigmoid_f16.sigmoid(x)
    assert isinstance(got, np.ndarray) and got.dtype == np.float16 and got.shape == x.shape
    want = kiln.sigmoid(x, out_type="like")
    np.testing.assert_array_equal(got.view(np.uint16)[~np.isnan(x)], want.view(np.uint16)[~np.isnan(x)])
    assert np.isnan(got[np.isnan(x)]).all() and np.isnan(want[np.isnan(x)]).all()
    assert _half_ulps(got, _exact_sigmoid(x)).max() <= 1


def test_sigmoid_f16_on_cupy_is_within_one_half_ulp_of_the_builtin(cupy):
    x = _half_inputs(31)
    got = sigmoid_f16.sigmoid(cupy.asarray(x))
    assert isinstance(got, cupy.ndarray) and got.dtype == cupy.float16
    want = kiln.sigmoid(cupy.asarray(x), out_type="like")
    g, w = cupy.asnumpy(got), cupy.asnumpy(want)
    assert _half_ulps(g, w).max() <= 1
    assert _half_ulps(g, _exact_sigmoid(x)).max() <= 1


@pytest.mark.parametrize("m,k,n", [(65, 31, 47), (1, 1, 1), (17, 300, 33), (128, 64, 129)])
def test_matmul_naive_matches_the_builtin_matmul(cupy, m, k, n):
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    got = cupy.asnumpy(matmul_naive.matmul(cupy.asarray(a), cupy.asarray(b)))
    want = cupy.asnumpy(kiln.matmul(cupy.asarray(a), cupy.asarray(b), "f32", out_type="like"))
    # each side is within k*eps/2 * sum|a||b| of the exact dot product
    tol = k * EPS * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)) + TINY
    assert np.all(np.abs(got.astype(np.float64) - want) <= tol)


@pytest.mark.parametrize("shape", [(67, 129), (1, 1), (16, 16), (17, 33), (2, 300), (300, 3)])
def test_filter3x3_shared_matches_the_builtin_filter2d(cupy, shape):
    rng = np.random.default_rng(sum(shape))
    img = rng.uniform(-1, 1, shape).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 3)).astype(np.float32)  # not separable: the direct 9-tap sum
    got = cupy.asnumpy(filter3x3_shared.filter3x3(cupy.asarray(img), cupy.asarray(w)))
    want = cupy.asnumpy(kiln.filter2d(cupy.asarray(img), w.astype(np.float64), mode="nearest",
                                      path="direct", out_type="like"))
    # 9 float32 roundings on either side bound the difference
    tol = 9 * EPS * np.abs(w).astype(np.float64).sum() * np.abs(img).max() + TINY
    assert np.all(np.abs(got.astype(np.float64) - want) <= tol)


@pytest.mark.parametrize("shape", [(33, 45, 29), (1, 1, 1), (2, 3, 70), (9, 17, 8)])
def test_conv3x3x3_matches_the_builtin_filter3d(cupy, shape):
    rng = np.random.default_rng(sum(shape))
    vol = rng.uniform(-1, 1, shape).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 3, 3)).astype(np.float32)
    got = cupy.asnumpy(conv3x3x3.conv3x3x3(cupy.asarray(vol), cupy.asarray(w)))
    want = cupy.asnumpy(kiln.filter3d(cupy.asarray(vol), w.astype(np.float64), mode="nearest",
                                      path="direct", out_type="like"))
    tol = 27 * EPS * np.abs(w).astype(np.float64).sum() * np.abs(vol).max() + TINY
    assert np.all(np.abs(got.astype(np.float64) - want) <= tol)


def test_mc_gbm_matches_black_scholes_and_kilns_monte_carlo(cupy):
    opt = dict(spot=100.0, strike=105.0, rate=0.03, dividend=0.01, volatility=0.25, maturity=1.5)
    paths, seed = 1 << 20, 2024
    price, se = mc_gbm.price_call(**opt, paths=paths, steps=7, seed=seed)
    exact = float(kiln.price(opt, "analytic")["price"][0])
    mc = kiln.price(opt, "mc", paths=paths, seed=seed)
    kiln_price, kiln_se = float(mc["price"][0]), float(mc["std_error"][0])
    what = f"example {price} +- {se}, closed form {exact}, kiln MC {kiln_price} +- {kiln_se}"
    assert 0.5 * kiln_se < se < 2 * kiln_se, what
    assert abs(price - exact) <= 4 * se, what
    assert abs(price - kiln_price) <= 4 * np.hypot(se, kiln_se), what
    # counter-based: the same seed gives the same bits, another seed other numbers
    assert mc_gbm.price_call(**opt, paths=paths, steps=7, seed=seed) == (price, se)
    assert mc_gbm.price_call(**opt, paths=paths, steps=7, seed=seed ^ 0x5555)[0] != price
    one, one_se = mc_gbm.price_call(**opt, paths=paths, steps=1, seed=seed)
    assert abs(one - exact) <= 4 * one_se, f"one step: {one} +- {one_se}, closed form {exact}"
