"""kiln on a CUDA device with torch, CuPy and JAX (skips without a GPU, fails instead with
KILN_REQUIRE_GPU=1; scripts/py-gpu-check.sh runs it on the GPU machine)."""

import gc
import os
import threading
import time

import numpy as np
import pytest

import kiln

REQUIRE = os.environ.get("KILN_REQUIRE_GPU") == "1"


def need(mod):
    """Import a peer library, or skip (fail under KILN_REQUIRE_GPU=1) naming it."""
    try:
        return __import__(mod)
    except Exception as e:  # noqa: BLE001 - any import failure is a missing peer
        if REQUIRE:
            pytest.fail(f"KILN_REQUIRE_GPU=1 but {mod} cannot be imported: {e}")
        pytest.skip(f"{mod} not importable: {e}")


@pytest.fixture
def torch(gpu):
    t = need("torch")
    if not t.cuda.is_available():
        if REQUIRE:
            pytest.fail("torch sees no CUDA device")
        pytest.skip("torch sees no CUDA device")
    return t


@pytest.fixture
def cupy(gpu):
    return need("cupy")


@pytest.fixture
def jax(gpu):
    j = need("jax")
    import jax.dlpack  # noqa: F401

    if not any(d.platform == "gpu" for d in j.devices()):
        if REQUIRE:
            pytest.fail("jax sees no GPU")
        pytest.skip("jax sees no GPU")
    return j


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(np.float32)


# --- zero copy both ways -------------------------------------------------------------------

def test_torch_zero_copy_both_ways(torch):
    x = torch.rand(257, 129, device="cuda")
    k = kiln.from_dlpack(x)
    assert k.device == f"cuda:{x.device.index}" and k.shape == (257, 129)
    assert k.data_ptr == x.data_ptr()
    y = kiln.sigmoid(k)
    ty = torch.from_dlpack(y)
    assert ty.data_ptr() == y.data_ptr and ty.device == x.device
    torch.testing.assert_close(ty, torch.sigmoid(x), rtol=2e-6, atol=1e-7)


def test_cupy_zero_copy_both_ways(cupy):
    a = cupy.asarray(rand(100, 31))
    k = kiln.from_dlpack(a)
    assert k.data_ptr == a.data.ptr
    b = cupy.from_dlpack(k)
    assert b.data.ptr == k.data_ptr
    cupy.testing.assert_array_equal(b, a)


def test_jax_zero_copy_both_ways(jax):
    import jax.numpy as jnp

    a = jnp.asarray(rand(64, 48))
    k = kiln.from_dlpack(a)
    assert k.data_ptr == a.unsafe_buffer_pointer()
    b = jax.dlpack.from_dlpack(k)
    assert b.unsafe_buffer_pointer() == k.data_ptr
    np.testing.assert_array_equal(np.asarray(b), np.asarray(a))


def test_numpy_consumes_device_tensor_through_host(gpu):
    x = rand(9, 11)
    k = kiln.asarray(x, device=gpu.device)
    assert k.is_cuda
    np.testing.assert_array_equal(k.numpy(), x)
    with pytest.raises((BufferError, RuntimeError, TypeError, ValueError)):
        np.from_dlpack(k)  # numpy cannot take device memory: k.numpy() copies


# --- results equal to the facade bit for bit -----------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1), (37, 61), (1024, 777)])
def test_filter2d_torch_equals_facade_bits(torch, gpu, shape):
    host = rand(*shape, seed=3)
    x = torch.from_numpy(host).cuda()
    via_dlpack = kiln.filter2d(x, "cross4", out_type="like")
    via_upload = kiln.filter2d(kiln.asarray(host, device=gpu.device), "cross4")
    assert isinstance(via_dlpack, torch.Tensor)
    np.testing.assert_array_equal(via_dlpack.cpu().numpy(), via_upload.numpy())
    cpu = kiln.filter2d(host, "cross4", out_type="like")
    np.testing.assert_allclose(via_upload.numpy(), cpu, rtol=1e-6, atol=1e-6)


def test_ops_on_cupy_and_jax_equal_facade_bits(cupy, jax, gpu):
    import jax.numpy as jnp

    host = rand(300, 200, seed=5)
    want = kiln.filter2d(kiln.asarray(host, device=gpu.device), "gaussian:2", mode="nearest").numpy()
    got_cp = kiln.filter2d(cupy.asarray(host), "gaussian:2", mode="nearest", out_type="like")
    got_jx = kiln.filter2d(jnp.asarray(host), "gaussian:2", mode="nearest", out_type="like")
    assert isinstance(got_cp, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(got_cp), want)
    np.testing.assert_array_equal(np.asarray(got_jx), want)


def test_matmul_and_elementwise_torch_bits(torch, gpu):
    a, b = rand(65, 33, seed=1), rand(33, 17, seed=2)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    got = kiln.matmul(ta, tb, "f32", out_type="like").cpu().numpy()
    want = kiln.matmul(kiln.asarray(a, device=gpu.device), kiln.asarray(b, device=gpu.device)).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    got = kiln.tanh(ta, out_type="like").cpu().numpy()
    np.testing.assert_array_equal(got, kiln.tanh(kiln.asarray(a, device=gpu.device)).numpy())


def test_mc_price_gpu_equals_cpu_bits(gpu):
    opts = [dict(spot=100.0, strike=95.0 + i, rate=0.02, volatility=0.25, maturity=1.0) for i in range(5)]
    g = kiln.price(opts, "mc", paths=1 << 12, steps=32, seed=11, device=gpu.device)
    c = kiln.price(opts, "mc", paths=1 << 12, steps=32, seed=11, device="cpu")
    assert g["device"].startswith("cuda") and c["device"] == "cpu"
    np.testing.assert_array_equal(g["price"], c["price"])


def test_mixed_book_and_sobol_gpu_equal_cpu_bits(gpu):
    nan = float("nan")
    book = [dict(spot=100.0, strike=100.0, rate=0.0, volatility=0.2, maturity=1.0),
            dict(spot=100.0, strike=100.0, rate=0.0, maturity=1.0, model="heston", kappa=1.5768,
                 theta=0.0398, xi=0.5751, rho=-0.5711, v0=0.0175),
            dict(spot=36.0, strike=40.0, rate=0.06, volatility=0.2, maturity=1.0, option_type="put",
                 style="american", fixings=10),
            dict(spot=100.0, strike=90.0, rate=0.01, volatility=0.3, maturity=0.5,
                 style="asian_arithmetic", fixings=8, kappa=nan)]
    g = kiln.price(book, "mc", paths=3 * 1024 + 5, steps=16, seed=4, device=gpu.device)
    c = kiln.price(book, "mc", paths=3 * 1024 + 5, steps=16, seed=4, device="cpu")
    np.testing.assert_array_equal(g["price"], c["price"])
    np.testing.assert_array_equal(g["std_error"], c["std_error"])
    plain = [book[0], book[3]]
    g = kiln.price(plain, "mc", rng="sobol", paths=1 << 14, steps=16, seed=4, device=gpu.device)
    c = kiln.price(plain, "mc", rng="sobol", paths=1 << 14, steps=16, seed=4, device="cpu")
    np.testing.assert_array_equal(g["price"], c["price"])


# --- stream ordering -----------------------------------------------------------------------


def test_import_waits_for_work_on_a_torch_side_stream(torch):
    n = 1 << 22
    s = torch.cuda.Stream()
    src = torch.full((n,), 3.0, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        x = torch.zeros(n, device="cuda")
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time before x is written
        x.copy_(src)
        k = kiln.from_dlpack(x)  # torch must make x ready on kiln's stream
    got = kiln.scale_shift(k, 2.0, 1.0).numpy()
    assert np.all(got == 7.0), np.unique(got)[:5]


def test_export_waits_for_kiln_work_on_a_torch_side_stream(torch, gpu):
    host = rand(4096, 4096, seed=9)
    k = kiln.asarray(host, device=gpu.device)
    for _ in range(20):  # queue ~ms of kiln work; the last result is what torch reads
        k = kiln.filter2d(k, "gaussian:1")
    want = k.numpy()
    k2 = kiln.asarray(host, device=gpu.device)
    for _ in range(20):
        k2 = kiln.filter2d(k2, "gaussian:1")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.from_dlpack(k2)  # torch passes s: kiln queues an event wait on s
        total = (t * 1.0).sum()
    s.synchronize()
    assert total.item() == pytest.approx(float(want.astype(np.float64).sum()), rel=1e-4)


def test_cupy_stream_both_ways(cupy, gpu):
    host = rand(2048, 2048, seed=4)
    with cupy.cuda.Stream(non_blocking=True) as s:
        a = cupy.asarray(host) * 2
        k = kiln.from_dlpack(a)
        y = kiln.filter2d(k, "box:3")
        b = cupy.from_dlpack(y) + 0  # cupy passes s; kiln makes y ready there
        s.synchronize()
    want = kiln.filter2d(kiln.asarray(host * 2, device=gpu.device), "box:3").numpy()
    np.testing.assert_array_equal(cupy.asnumpy(b), want)


def test_kiln_stream_context(gpu, torch):
    s = kiln.Stream(gpu.device)
    host = rand(512, 512, seed=8)
    x = torch.from_numpy(host).cuda()
    with s:
        y = kiln.filter2d(x, "cross4")
    assert s.handle != 0
    np.testing.assert_array_equal(y.numpy(), kiln.filter2d(kiln.asarray(host, device=gpu.device), "cross4").numpy())


# --- lifetimes -----------------------------------------------------------------------------

def test_producer_dropped_before_consumer_reads(torch, gpu):
    host = rand(1000, 1000, seed=6)
    want = kiln.filter2d(host, "sharpen", out_type="like")
    k = kiln.filter2d(kiln.asarray(host, device=gpu.device), "sharpen")
    t = torch.from_dlpack(k)
    del k
    gc.collect()
    _ = torch.empty(10_000_000, device="cuda")  # churn both allocators
    _ = kiln.zeros((10_000_000,), device=gpu.device)
    np.testing.assert_allclose(t.cpu().numpy(), want, rtol=1e-6, atol=1e-6)
    # and the other way: torch's tensor dropped while kiln holds it
    x = torch.from_numpy(host).cuda()
    kx = kiln.from_dlpack(x)
    del x
    gc.collect()
    _ = torch.full((4_000_000,), 9.0, device="cuda")
    np.testing.assert_array_equal(kx.numpy(), host)


# --- errors and the GIL --------------------------------------------------------------------

def test_foreign_array_errors(torch):
    x = torch.rand(8, 6, device="cuda")
    with pytest.raises(ValueError, match="contiguous"):
        kiln.from_dlpack(x.t())
    with pytest.raises(TypeError, match="dtype"):
        kiln.from_dlpack(torch.zeros(4, dtype=torch.int32, device="cuda"))
    with pytest.raises(ValueError, match="cpu"):
        kiln.from_dlpack(torch.rand(4), device="cuda")


def test_out_of_memory_is_a_memory_error(gpu):
    with pytest.raises(kiln.OutOfMemoryError) as e:
        kiln.zeros((1 << 40,), device=gpu.device)  # 4 TiB
    assert isinstance(e.value, MemoryError) and "out of GPU memory" in str(e.value)
    kiln.zeros((1024,), device=gpu.device).synchronize()  # not sticky: the device still works


def test_gil_released_during_device_work(gpu):
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    th = threading.Thread(target=ticker)
    th.start()
    t0 = time.perf_counter()
    kiln.price([dict(spot=100.0, strike=100.0, rate=0.0, volatility=0.2, maturity=1.0)], "mc",
               paths=1 << 22, steps=256, device=gpu.device)
    t1 = time.perf_counter()
    stop.set()
    th.join()
    assert len([t for t in ticks if t0 < t < t1]) >= 2, t1 - t0


def test_memory_stats_and_empty_cache(gpu):
    k = kiln.zeros((1 << 20,), device=gpu.device)
    st = kiln.memory_stats(gpu.device)
    assert st["allocated_bytes"] >= 4 << 20 and st["reserved_bytes"] >= st["allocated_bytes"]
    del k
    assert kiln.empty_cache(gpu.device) >= 0
