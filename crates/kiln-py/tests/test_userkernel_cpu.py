"""Users' kernels with CuPy's API on the CPU path (NumPy arrays in, NumPy arrays out),
checked against NumPy (runs in CI; CuPy's own tests of these classes run beside it through
crates/kiln-py/cupy_suite)."""

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(30)


@pytest.mark.parametrize("n", [0, 1, 7, 4096, 4097, 100_003])
def test_elementwise_axpy_matches_numpy(n):
    k = kiln.ElementwiseKernel("T x, T y, T a", "T z", "z = a * x + y", "axpy_user")
    x = RNG.random(n, dtype=np.float32)
    y = RNG.random(n, dtype=np.float32)
    z = k(x, y, np.float32(0.75))
    assert isinstance(z, np.ndarray) and z.dtype == np.float32 and z.shape == (n,)
    np.testing.assert_array_equal(z, np.float32(0.75) * x + y)


def test_elementwise_broadcast_locals_if_and_math():
    k = kiln.ElementwiseKernel(
        "float32 x, float32 y", "float32 z",
        "float t = x - y; if (t > 0) { z = expf(-t); } else { z = t * t; }", "branchy",
    )
    x = RNG.standard_normal((33, 17), dtype=np.float32)
    y = RNG.standard_normal((17,), dtype=np.float32)
    t = x - y
    want = np.where(t > 0, np.exp(-np.maximum(t, 0)), t * t).astype(np.float32)
    np.testing.assert_allclose(k(x, y), want, rtol=2e-6, atol=0)


def test_elementwise_index_raw_and_output_given():
    k = kiln.ElementwiseKernel("raw T x", "T y", "y = x[_ind.size() - 1 - i] + (T)i", "rev")
    x = np.arange(10, dtype=np.int64)
    out = np.empty(10, dtype=np.int64)
    r = k(x, out)
    assert r is out
    np.testing.assert_array_equal(out, x[::-1] + np.arange(10))


def test_elementwise_strided_inputs_and_c_conversions():
    k = kiln.ElementwiseKernel("int32 a, int32 b", "int32 q, float64 f", "q = a / b; f = a / 2.0", "conv")
    a = np.arange(-20, 20, dtype=np.int32).reshape(5, 8)[:, ::2]
    b = np.full((5, 4), 3, dtype=np.int32)
    q, f = k(a, b)
    np.testing.assert_array_equal(q, np.trunc(a / 3).astype(np.int32))  # C truncates
    np.testing.assert_array_equal(f, a / 2.0)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
def test_reduction_sum_of_squares(axis):
    k = kiln.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "sumsq")
    x = RNG.integers(-100, 100, size=(4, 5, 6), dtype=np.int64)
    np.testing.assert_array_equal(k(x, axis=axis), (x * x).sum(axis=axis))
    np.testing.assert_array_equal(
        k(x, axis=axis, keepdims=True), (x * x).sum(axis=axis, keepdims=True)
    )


def test_reduction_float_max_with_identity():
    k = kiln.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", "-INFINITY", "mymax")
    x = RNG.standard_normal((50, 3)).astype(np.float64)
    np.testing.assert_array_equal(k(x, axis=0), x.max(axis=0))


def test_errors_are_clear():
    k = kiln.ElementwiseKernel("T x, T y", "T z", "z = x + y", "add")
    with pytest.raises(TypeError, match="Wrong number of arguments"):
        k(np.ones(3))
    with pytest.raises(TypeError, match="Type is mismatched"):
        k(np.ones(3, np.float32), np.ones(3, np.float64))
    with pytest.raises(ValueError, match="broadcast|shape"):
        k(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="Invalid kernel name"):
        kiln.ElementwiseKernel("T x", "T y", "y = x", "1bad")
    bad = kiln.ElementwiseKernel("T x", "T y", "for (int j = 0; j < 3; j++) { y = x; }", "loop")
    with pytest.raises(kiln.InvalidInputError, match="for"):
        bad(np.ones(3))
    with pytest.raises(kiln.KernelArgumentError, match="unsupported type list"):
        k([1.0, 2.0], np.ones(2))


def test_raw_kernel_without_a_gpu_says_so():
    k = kiln.RawKernel('extern "C" __global__ void f(float* x) { x[0] = 1; }', "f")
    if kiln.Runtime("auto").kind == "cpu":
        with pytest.raises(kiln.NoDeviceError):
            k.compile()
    with pytest.raises(TypeError, match="host memory"):
        k((1,), (1,), (np.zeros(1, np.float32),))


def test_one_kernel_called_with_changing_signatures():
    # each call's dtypes and shapes are bound once and found again: a repeat must still
    # follow its own arguments (shape, dtype, a Python int against a float scalar)
    k = kiln.ElementwiseKernel("T x, T y, T a", "T z", "z = a * x + y", "axpy_sig")
    cases = [
        (RNG.random(5, dtype=np.float32), RNG.random(5, dtype=np.float32), np.float32(2)),
        (RNG.random((3, 5)), RNG.random(5), 3.0),
        (RNG.random(5, dtype=np.float32), RNG.random(5, dtype=np.float32), np.float32(2)),
        (np.arange(6, dtype=np.int32), np.arange(6, dtype=np.int32), np.int32(-2)),
        (RNG.random((3, 5)), RNG.random((1, 5)), -1.5),
    ]
    for x, y, a in cases * 2:
        z = k(x, y, a)
        assert z.dtype == x.dtype and z.shape == np.broadcast_shapes(x.shape, y.shape)
        np.testing.assert_array_equal(z, (a * x + y).astype(x.dtype))
    r = kiln.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "sum_sig")
    for shape, axis in [((4, 6), 0), ((4, 6), 1), ((4, 6), 0), ((5,), None), ((4, 6), 1)] * 2:
        x = np.arange(np.prod(shape), dtype=np.int64).reshape(shape)
        np.testing.assert_array_equal(r(x, axis=axis), x.sum(axis=axis))
    with pytest.raises(ValueError):
        k(np.ones(3, np.float32), np.ones(4, np.float32), np.float32(1))
    with pytest.raises(ValueError):  # the same bad call again: refused again, not cached
        k(np.ones(3, np.float32), np.ones(4, np.float32), np.float32(1))


def _ticks_per_call(call, calls=4):
    """How many times a Python thread ran per `call()`: about one a call when the call holds
    the GIL (the thread gets it only between calls), many when the call releases it."""
    import threading

    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.0005)

    call()  # bind and warm up first
    t = threading.Thread(target=tick)
    t.start()
    try:
        for _ in range(calls):
            call()
    finally:
        done.set()
        t.join()
    return len(ticks) / calls


def test_the_cpu_path_releases_the_gil():
    x = RNG.random(1 << 23, dtype=np.float32)
    y = RNG.random(1 << 23, dtype=np.float32)
    ew = kiln.ElementwiseKernel("T x, T y", "T z", "z = expf(sinf(x) * cosf(y))", "gil_ew")
    red = kiln.ReductionKernel("T x, T y", "T z", "expf(sinf(x) * cosf(y))", "a + b", "z = a",
                               "0", "gil_red")
    # each call takes tens of milliseconds; a ticker waking every 0.5 ms runs many times
    # during it only if the GIL is released
    assert _ticks_per_call(lambda: ew(x, y)) > 5
    assert _ticks_per_call(lambda: red(x, y)) > 5


def test_native_call_leaves_host_arrays_to_the_general_path():
    """The native one-step call reads only CUDA arrays: with NumPy arrays or kiln CPU tensors
    it launches nothing and answers None, and the call runs on the CPU path."""
    k = kiln.ElementwiseKernel("T x, T a", "T z", "z = a * x", "scale_host")
    x = np.arange(5, dtype=np.float32)
    assert k._k.call_fast((x, np.float32(2)), None, None, None, ()) is None
    t = kiln.asarray(x)
    assert k._k.call_fast((t, np.float32(2)), None, None, None, ()) is None
    np.testing.assert_array_equal(k(x, np.float32(2)), 2 * x)
