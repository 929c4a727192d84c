"""Users' kernels from Python on a CUDA device, with CuPy's API: RawKernel / RawModule on
CuPy arrays, torch tensors and kiln tensors, and ElementwiseKernel / ReductionKernel on the
GPU checked against the same kernel on the CPU path with NumPy arrays. Skips without a GPU
(fails instead with KILN_REQUIRE_GPU=1); scripts/py-gpu-check.sh runs it."""

import numpy as np
import pytest

import kiln

from test_gpu import cupy, need, torch  # noqa: F401  (fixtures)

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void iota64(long long* out, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = 3 * i;
}
"""


@pytest.mark.parametrize("n", [1, 255, 4097])
def test_raw_kernel_on_cupy_arrays_matches_numpy(cupy, n):
    rng = np.random.default_rng(n)
    xh, yh = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    x, y = cupy.asarray(xh), cupy.asarray(yh)
    k = kiln.RawKernel(SAXPY, "saxpy")
    k(((n + 127) // 128,), (128,), (np.float32(2.5), x, y, np.int32(n)))
    # NVRTC fuses a * x + y into one FMA (one rounding), as in CuPy: 1 ulp of NumPy's two
    want = (np.float64(2.5) * xh + yh).astype(np.float32)
    np.testing.assert_array_max_ulp(cupy.asnumpy(y), want, maxulp=1)


def test_raw_module_integer_arrays_and_stream_order(cupy):
    m = kiln.RawModule(code=SAXPY)
    f = m.get_function("iota64")
    out = cupy.zeros(1000, dtype=cupy.int64)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        f((8,), (128,), (out, np.int64(1000)))
        # CuPy work queued after on the same stream sees the kernel's result
        total = int(out.sum())
    s.synchronize()
    assert total == 3 * 999 * 1000 // 2


def test_raw_kernel_on_torch_and_kiln_tensors(torch, gpu):
    k = kiln.RawKernel(SAXPY, "saxpy")
    x = torch.arange(300, dtype=torch.float32, device="cuda")
    y = torch.ones(300, dtype=torch.float32, device="cuda")
    k((3,), (128,), (np.float32(2.0), x, y, np.int32(300)))
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * torch.arange(300, dtype=torch.float32, device="cuda") + 1)
    kx = kiln.asarray(np.arange(10, dtype=np.float32), device="cuda")
    ky = kiln.asarray(np.zeros(10, dtype=np.float32), device="cuda")
    k((1,), (32,), (np.float32(1.0), kx, ky, np.int32(10)))
    np.testing.assert_array_equal(ky.numpy(), np.arange(10, dtype=np.float32))


def test_raw_kernel_errors_are_clear(cupy):
    k = kiln.RawKernel(SAXPY, "saxpy")
    x = cupy.zeros(4, dtype=cupy.float32)
    with pytest.raises(kiln.InvalidInputError, match="takes 4 arguments"):
        k((1,), (4,), (x,))
    with pytest.raises(kiln.InvalidInputError, match="float"):
        k((1,), (4,), (np.float32(1), cupy.zeros(4, dtype=cupy.float64), x, np.int32(4)))
    with pytest.raises(kiln.InvalidInputError, match="1024|threads"):
        k((1,), (2048,), (np.float32(1), x, x, np.int32(4)))
    with pytest.raises(TypeError, match="host memory"):
        k((1,), (4,), (np.float32(1), np.zeros(4, np.float32), x, np.int32(4)))
    with pytest.raises(kiln.KilnError, match=r"broken\.cu|\(2\)|error"):
        kiln.RawKernel('extern "C" __global__ void f() {\n  undefined_thing();\n}', "f").compile()


@pytest.mark.parametrize("shape", [(1,), (1000,), (33, 65)])
def test_elementwise_kernel_gpu_equals_cpu(cupy, shape):
    k = kiln.ElementwiseKernel("T x, T y, T a", "T z", "z = a * x + y", "axpy_user")
    rng = np.random.default_rng(len(shape))
    xh = rng.random(shape, dtype=np.float32)
    yh = rng.random(shape, dtype=np.float32)
    zc = k(xh, yh, np.float32(1.5))  # CPU path, NumPy in and out
    zg = k(cupy.asarray(xh), cupy.asarray(yh), np.float32(1.5))
    assert isinstance(zg, cupy.ndarray) and isinstance(zc, np.ndarray)
    # generated kernels compile without FMA contraction: bitwise the CPU path and NumPy
    np.testing.assert_array_equal(cupy.asnumpy(zg), zc)
    np.testing.assert_array_equal(zc, np.float32(1.5) * xh + yh)
    # with the contraction asked for, one rounding: within 1 ulp
    kf = kiln.ElementwiseKernel("T x, T y, T a", "T z", "z = a * x + y", "axpy_fma", options=("--fmad=true",))
    zf = kf(cupy.asarray(xh), cupy.asarray(yh), np.float32(1.5))
    np.testing.assert_array_max_ulp(cupy.asnumpy(zf), zc, maxulp=1)


def test_reduction_kernel_gpu_equals_cpu(cupy):
    k = kiln.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "sumsq")
    xh = np.arange(-50, 50, dtype=np.int64).reshape(10, 10)
    for axis in (None, 0, 1):
        c = k(xh, axis=axis)
        g = k(cupy.asarray(xh), axis=axis)
        np.testing.assert_array_equal(cupy.asnumpy(g), c)
        np.testing.assert_array_equal(c, (xh * xh).sum(axis=axis))


def test_one_kernel_on_the_gpu_with_changing_signatures_and_addresses(cupy):
    # a kernel keeps its launches by argument signature: each repeat must still use its own
    # arrays, shapes, scalar and alignment (a view one element in cannot take the 16-byte
    # vector form the aligned call compiled)
    k = kiln.ElementwiseKernel("T x, T y, T a", "T z", "z = a * x + y", "axpy_sig_gpu")
    rng = np.random.default_rng(7)
    base = rng.random(4099, dtype=np.float32)
    other = rng.random(4099, dtype=np.float32)
    calls = [
        (base[:4096], other[:4096], np.float32(2)),
        (base[1:4097], other[1:4097], np.float32(-3)),  # misaligned by 4 bytes
        (base[:4096], other[:4096], np.float32(0.5)),
        (base[:4096].reshape(64, 64), other[:64], np.float32(1)),  # broadcast row
        (base.astype(np.float64), other.astype(np.float64), 1.25),
    ]
    for xh, yh, a in calls * 2:
        g = k(cupy.asarray(xh), cupy.asarray(yh), a)
        np.testing.assert_array_equal(cupy.asnumpy(g), k(xh, yh, a))
    # a misaligned view of one device buffer, not a copy
    xd, yd = cupy.asarray(base), cupy.asarray(other)
    for lo in (0, 1, 2, 3, 0):
        g = k(xd[lo:lo + 4093], yd[lo:lo + 4093], np.float32(1.5))
        np.testing.assert_array_equal(cupy.asnumpy(g), k(base[lo:lo + 4093], other[lo:lo + 4093], np.float32(1.5)))


# Python numbers and every NumPy scalar type the native reader takes (complex ones go the
# general way), against a float64 or complex128 parameter of the kernel
_SCALARS = [
    2.5, 3, True, 1.5 - 2j, np.float16(1.5), np.float32(0.1), np.float64(-2.25), np.int8(-7),
    np.int16(300), np.int32(-70000), np.int64(2**40), np.uint8(200), np.uint16(60000),
    np.uint32(2**31 + 5), np.uint64(2**63 + 11), np.bool_(True), np.complex64(1 + 1j),
]


@pytest.mark.parametrize("s", _SCALARS, ids=lambda s: type(s).__name__)
def test_elementwise_native_call_equals_the_general_path(cupy, s):
    """The native one-step call (no size=/block_size=) and the general Python path give the
    same bits, types, shapes and `_cached_codes` keys for scalars of every type, broadcast
    CuPy inputs, given outputs, kiln tensors and strided arrays (which the native reader
    hands to the general path)."""
    k = kiln.ElementwiseKernel("T x, S s", "T z", "z = x * (T)s + (T)i", "fastpath")
    rng = np.random.default_rng(7)
    # a complex scalar converts only to a complex T (C++ has no complex -> float cast)
    dts = (np.complex64, np.complex128) if np.iscomplexobj(s) else (np.float32, np.float64)
    for dt in dts:
        xh = rng.random((5, 33)).astype(dt)
        x = cupy.asarray(xh)
        fast = k(x, s)
        general = k(x, s, block_size=128)  # block_size= always takes the general path
        assert type(fast) is type(general) and fast.dtype == general.dtype
        assert fast.shape == general.shape == (5, 33)
        np.testing.assert_array_equal(cupy.asnumpy(fast), cupy.asnumpy(general))
        out = cupy.empty_like(x)
        assert k(x, s, out) is out
        np.testing.assert_array_equal(cupy.asnumpy(out), cupy.asnumpy(general))
        strided = cupy.asarray(rng.random((5, 66)).astype(dt))[:, ::2]
        np.testing.assert_array_equal(
            cupy.asnumpy(k(strided, s)), cupy.asnumpy(k(strided, s, block_size=64))
        )
    name = np.dtype(dts[0]).name
    assert (name,) in k._cached_codes and (name, name) in k._cached_codes


def test_elementwise_native_call_broadcasts_streams_and_kiln_tensors(cupy):
    k = kiln.ElementwiseKernel("float32 a, float32 x, float32 y", "float32 z", "z = a * x + y", "axpyb")
    x = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    y = cupy.ones((1, 4), dtype=cupy.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        z = k(np.float32(2), x, y)
        total = float(z.sum())  # queued after the kernel on the same stream
    s.synchronize()
    assert z.shape == (3, 4) and total == float(2 * np.arange(12).sum() + 12)
    kx = kiln.asarray(np.arange(6, dtype=np.float32), device="cuda")
    ky = kiln.asarray(np.ones(6, dtype=np.float32), device="cuda")
    kz = kiln.asarray(np.zeros(6, dtype=np.float32), device="cuda")
    assert k(np.float32(3), kx, ky, kz) is kz  # outputs given: the native call
    np.testing.assert_array_equal(kz.numpy(), 3 * np.arange(6, dtype=np.float32) + 1)
    made = k(np.float32(3), kx, ky)  # a kiln tensor result: the general path allocates it
    np.testing.assert_array_equal(made.numpy(), kz.numpy())
    with pytest.raises(TypeError, match="Wrong number of arguments"):
        k(x, y)
    with pytest.raises(TypeError):
        k(np.float32(2), x, cupy.ones(4, dtype=cupy.float64))  # a float64 y: the general path's error
