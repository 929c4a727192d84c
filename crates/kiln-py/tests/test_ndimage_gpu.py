"""kiln.ndimage on a CUDA device: the GPU result equals the CPU result (bitwise for rank
filters, morphology and float32/float64 linear filters, which equal scipy's bits; within
``kiln::ndimage::ndimage_tolerance`` for 8/16-bit linear filters), on torch and CuPy CUDA
arrays where those import and always on kiln tensors moved to the GPU. Skips without a GPU
(the ``gpu`` fixture), fails instead with KILN_REQUIRE_GPU=1."""

import numpy as np
import pytest

import kiln
from conftest import skip_or_fail
from kiln import ndimage as ndi

SHAPES = [(17,), (1, 1), (7, 5), (31, 64), (9, 10, 11), (2, 67, 129)]
MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


@pytest.fixture(autouse=True)
def exact_filters_on_the_device(monkeypatch):
    """The exact float32/float64 linear filters on the GPU are a preview
    (``KILN_GPU_PREVIEW=1``) until they have passed on a GPU."""
    monkeypatch.setenv("KILN_GPU_PREVIEW", "1")


def rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype in (np.float32, np.float64):
        return rng.uniform(-2, 2, size=shape).astype(dtype)
    return rng.integers(0, np.iinfo(dtype).max, size=shape, endpoint=True).astype(dtype)


PEERS = ["kiln", "torch", "cupy"]
# torch's uint16 is partial (no DLPack export or copy guarantees): that pair is not generated
PEER_DTYPES = [(p, d) for p in PEERS for d in (np.float32, np.uint8, np.uint16)
               if not (p == "torch" and d == np.uint16)]
PEER_DTYPE_IDS = [f"{p}-{d.__name__}" for p, d in PEER_DTYPES]


@pytest.fixture(params=PEERS)
def peer(request, gpu):
    """(to_gpu, to_numpy) for one kind of CUDA array; torch and CuPy skip if not importable."""
    name = request.param
    if name == "kiln":
        return name, (lambda a: kiln.asarray(a, device="cuda")), (lambda t: t.numpy())
    try:
        mod = __import__(name)
    except Exception as e:  # noqa: BLE001 - any import failure means the peer is absent
        skip_or_fail(f"{name} not importable: {e}")
    if name == "torch":
        if not mod.cuda.is_available():
            skip_or_fail("torch sees no CUDA device")
        return name, (lambda a: mod.from_numpy(np.ascontiguousarray(a)).cuda()), (
            lambda t: t.cpu().numpy())
    return name, (lambda a: mod.asarray(a)), (lambda t: mod.asnumpy(t))


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(np.uint8), b.view(np.uint8))


def on_gpu(peer, fn, x, *args, **kw):
    """``fn`` on a GPU copy of ``x`` (out_type="like": the peer's own type, on the GPU)."""
    name, to_gpu, to_np = peer
    y = getattr(ndi, fn)(to_gpu(x), *args, out_type="like", **kw)
    if name == "kiln":
        assert isinstance(y, kiln.Tensor) and y.is_cuda, y
    elif name == "torch":
        assert y.is_cuda, y.device
    return to_np(y)


RANK = [
    ("median_filter", (), {"size": 3}),
    ("median_filter", (), {"size": 4}),
    ("rank_filter", (-2,), {"size": 4}),
    ("percentile_filter", (30,), {"size": 5}),
    ("minimum_filter", (), {"size": 3}),
    ("maximum_filter", (), {"size": 5}),
    ("grey_erosion", (), {"footprint": "disk"}),
    ("grey_dilation", (), {"size": 2}),
    ("grey_opening", (), {"size": 3}),
    ("grey_closing", (), {"footprint": "disk"}),
]


def _window(kw, nd):
    if kw.get("footprint") == "disk":
        return {"footprint": ndi.generate_binary_structure(nd, 1)}
    return kw


@pytest.mark.parametrize("peer,dtype", PEER_DTYPES, ids=PEER_DTYPE_IDS, indirect=["peer"])
@pytest.mark.parametrize("fn,args,kw", RANK, ids=[f"{f[0]}-{i}" for i, f in enumerate(RANK)])
def test_rank_gpu_equals_cpu_bitwise(peer, fn, args, kw, dtype):
    for i, shape in enumerate(SHAPES):
        x = rand(shape, dtype, i)
        for mode in MODES:
            k = dict(_window(kw, len(shape)), mode=mode, cval=3.0)
            cpu = getattr(ndi, fn)(x, *args, **k)
            gpu = on_gpu(peer, fn, x, *args, **k)
            assert same_bits(gpu, cpu), f"{fn} {shape} {dtype.__name__} {mode}"


@pytest.mark.parametrize("fn", ["binary_erosion", "binary_dilation", "binary_opening",
                                "binary_closing", "binary_fill_holes"])
def test_binary_gpu_equals_cpu(peer, fn):
    for i, shape in enumerate(SHAPES):
        x = np.random.default_rng(i).random(shape) < 0.55
        cases = [{}] if fn == "binary_fill_holes" else [
            {}, {"iterations": 3, "border_value": 1}, {"iterations": -1}]
        for c in range(1, len(shape) + 1):
            st = ndi.generate_binary_structure(len(shape), c)
            for k in cases:
                cpu = getattr(ndi, fn)(x, structure=st, **k)
                # bool torch/CuPy arrays as they come (kiln tensors hold no bool: uint8)
                xin = x.astype(np.uint8) if peer[0] == "kiln" else x
                gpu = on_gpu(peer, fn, xin, structure=st, **k)
                assert np.array_equal(np.asarray(gpu) != 0, cpu), f"{fn} {shape} {c} {k}"


LINEAR = [
    ("correlate", lambda nd: (np.random.default_rng(5).uniform(-1, 1, (3, 2, 4)[:nd]),),
     {"origin": 0}),
    ("convolve", lambda nd: (np.random.default_rng(6).uniform(-1, 1, (2,) * nd),), {}),
    ("correlate1d", lambda nd: ([0.25, -1.0, 0.5, 2.0],), {"axis": 0}),
    ("gaussian_filter", lambda nd: (1.3,), {}),
    ("gaussian_filter", lambda nd: (2.0,), {"order": 1, "truncate": 3.0}),
    ("gaussian_laplace", lambda nd: (1.0,), {}),
    ("gaussian_gradient_magnitude", lambda nd: (0.8,), {}),
    ("uniform_filter", lambda nd: (), {"size": 4, "origin": -1}),
    ("sobel", lambda nd: (), {"axis": 0}),
    ("prewitt", lambda nd: (), {}),
    ("laplace", lambda nd: (), {}),
]


def cpu_plan(fn, x, *args, **kw):
    """The linear filter's plan on the CPU, what the GPU runs: on a CPU kiln tensor (a NumPy
    input takes scipy's own arithmetic instead, which truncates and wraps 8/16-bit data
    between passes where the plan rounds and clamps once)."""
    return getattr(ndi, fn)(kiln.asarray(x), *args, **kw).numpy()


@pytest.mark.parametrize("peer,dtype", PEER_DTYPES, ids=PEER_DTYPE_IDS, indirect=["peer"])
@pytest.mark.parametrize("fn,args,kw", LINEAR, ids=[f"{f[0]}-{i}" for i, f in enumerate(LINEAR)])
def test_linear_gpu_within_tolerance_of_cpu(peer, fn, args, kw, dtype):
    for i, shape in enumerate(SHAPES):
        x = rand(shape, dtype, 100 + i)
        a = args(len(shape))
        for mode in MODES:
            gpu = on_gpu(peer, fn, x, *a, mode=mode, cval=0.5, **kw)
            if peer[0] != "kiln" and dtype != np.float32:
                # another library's 8/16-bit array runs on the host: scipy's bits
                assert same_bits(gpu, getattr(ndi, fn)(x, *a, mode=mode, cval=0.5, **kw)), (fn, shape, mode)
                continue
            cpu = cpu_plan(fn, x, *a, mode=mode, cval=0.5, **kw)
            assert gpu.dtype == cpu.dtype and gpu.shape == cpu.shape
            if dtype == np.float32:
                tol = ndi._tolerance(float(np.abs(x).max()), getattr(ndi, fn), x, *a,
                                     mode=mode, cval=0.5, **kw)
            else:
                tol = 1.0  # f32 arithmetic, then rounded: a sum on a .5 edge may go either way
            err = float(np.abs(gpu.astype(np.float64) - cpu).max())
            assert err <= tol, f"{fn} {shape} {dtype.__name__} {mode}: {err} > {tol}"


# float32 and float64 on the GPU: scipy's bits (odd and even kernels, origins, the three
# sums of correlate1d: general, symmetric, antisymmetric; the uniform filters' running sums)
EXACT = [
    ("correlate", lambda nd: (np.random.default_rng(5).uniform(-1, 1, (3, 2, 4)[:nd]),),
     {"origin": -1}),
    ("convolve", lambda nd: (np.random.default_rng(6).uniform(-1, 1, (2,) * nd),), {}),
    ("correlate1d", lambda nd: ([0.25, -1.0, 0.5, 2.0],), {"axis": 0, "origin": 1}),
    ("correlate1d", lambda nd: ([0.3, -0.7, 1.1, -0.7, 0.3],), {"axis": -1, "origin": -2}),
    ("convolve1d", lambda nd: ([0.9, 0.2, 0.4, -0.2, -0.9],), {"axis": 0, "origin": 2}),
    ("correlate1d", lambda nd: ([1.7],), {}),
    ("gaussian_filter", lambda nd: (1.3,), {}),
    ("gaussian_filter", lambda nd: (2.0,), {"order": 1, "truncate": 3.0}),
    ("gaussian_filter1d", lambda nd: (0.8,), {"order": 2, "axis": 0}),
    ("gaussian_laplace", lambda nd: (1.0,), {}),
    ("gaussian_gradient_magnitude", lambda nd: (0.8,), {}),
    ("sobel", lambda nd: (), {"axis": 0}),
    ("prewitt", lambda nd: (), {}),
    ("laplace", lambda nd: (), {}),
    ("uniform_filter", lambda nd: (4,), {"origin": -1}),
    ("uniform_filter", lambda nd: (3,), {"origin": 1}),
    ("uniform_filter", lambda nd: (1,), {}),
    ("uniform_filter1d", lambda nd: (5,), {"axis": 0, "origin": 2}),
    ("uniform_filter1d", lambda nd: (2,), {"axis": -1, "origin": -1}),
]
FLOAT_PEERS = [(p, d) for p in PEERS for d in (np.float32, np.float64)]
FLOAT_IDS = [f"{p}-{d.__name__}" for p, d in FLOAT_PEERS]


def _scipy():
    try:
        from scipy import ndimage
    except Exception as e:  # noqa: BLE001 - any import failure means scipy is absent
        skip_or_fail(f"scipy not importable: {e}")
    return ndimage


@pytest.mark.parametrize("peer,dtype", FLOAT_PEERS, ids=FLOAT_IDS, indirect=["peer"])
@pytest.mark.parametrize("fn,args,kw", EXACT, ids=[f"{f[0]}-{i}" for i, f in enumerate(EXACT)])
def test_linear_float_gpu_is_scipy_bitwise(peer, fn, args, kw, dtype):
    sp = _scipy()
    for i, shape in enumerate(SHAPES):
        x = rand(shape, dtype, 200 + i)
        a = args(len(shape))
        for mode in MODES:
            want = getattr(sp, fn)(x, *a, mode=mode, cval=0.5, **kw)
            gpu = on_gpu(peer, fn, x, *a, mode=mode, cval=0.5, **kw)
            assert same_bits(gpu, want), f"{fn} {shape} {dtype.__name__} {mode}: {np.abs(gpu - want).max()}"
        if dtype == np.float32:
            # a float32 input with a float64 result: widened exactly, summed in float64
            want = getattr(sp, fn)(x, *a, output=np.float64, **kw)
            gpu = on_gpu(peer, fn, x, *a, output=np.float64, **kw)
            assert same_bits(gpu, want), f"{fn} {shape} float32 -> float64"


def test_numpy_input_on_the_gpu_gives_numpy(gpu):
    x = rand((31, 64), np.float32, 7)
    y = ndi.median_filter(x, 5, device="cuda")
    assert isinstance(y, np.ndarray) and same_bits(y, ndi.median_filter(x, 5))
    b = ndi.binary_closing(x > 0, device="cuda")
    assert b.dtype == bool and np.array_equal(b, ndi.binary_closing(x > 0))


def test_default_return_is_the_inputs_type_on_the_device(peer):
    name, to_gpu, _ = peer
    x = to_gpu(rand((7, 5), np.float32, 8))
    y = ndi.gaussian_filter(x, 1.0)
    assert type(y) is type(x), type(y)
    assert y.is_cuda if name != "cupy" else y.device == x.device
    assert isinstance(ndi.gaussian_filter(x, 1.0, out_type="kiln"), kiln.Tensor)


def test_output_dtypes_and_arrays_on_the_gpu(peer):
    """output= on the GPU: a float type from 8-bit input (the input converted to float32 on
    the device), a wider type for a rank filter (converted on the device for a tensor
    result), a NumPy array filled in place from a NumPy input computed on the GPU."""
    name, to_gpu, to_np = peer
    x = rand((31, 64), np.uint8, 9)
    for fn, args, out, exact in [("gaussian_filter", (1.5,), np.float32, False),
                                 ("sobel", (), np.float64, False),
                                 ("median_filter", (3,), np.float32, True),
                                 ("grey_dilation", ((3, 3),), np.uint16, True)]:
        cpu = getattr(ndi, fn)(x, *args, output=out)
        gpu = to_np(getattr(ndi, fn)(to_gpu(x), *args, output=out, out_type="like"))
        assert gpu.dtype == cpu.dtype == out, (fn, gpu.dtype)
        if exact:
            assert same_bits(gpu, cpu), fn
        else:
            tol = ndi._tolerance(255.0, getattr(ndi, fn), x.astype(np.float32), *args)
            assert float(np.abs(gpu.astype(np.float64) - cpu).max()) <= tol, fn
        arr = np.zeros(x.shape, out)
        assert getattr(ndi, fn)(x, *args, output=arr, device="cuda") is arr
        if exact:
            assert same_bits(arr, cpu), fn


def test_binary_mask_on_the_gpu_equals_the_cpu(gpu):
    rng = np.random.default_rng(11)
    for shape in [(7, 5), (31, 64), (9, 10, 11)]:
        x = rng.random(shape) < 0.5
        m = rng.random(shape) < 0.6
        for fn in ["binary_erosion", "binary_closing"]:
            for it in [1, 3, -1]:
                cpu = getattr(ndi, fn)(x, iterations=it, mask=m)
                gpu = getattr(ndi, fn)(x, iterations=it, mask=m, device="cuda")
                assert gpu.dtype == bool and np.array_equal(gpu, cpu), (fn, shape, it)


def test_nchw_batches_fold_on_the_gpu(peer):
    """A (n, c, h, w) CUDA array with axes=(2, 3): folded by a reshape of the peer's array,
    the result in the input's shape, equal to the CPU."""
    x = rand((2, 3, 31, 40), np.float32, 12)
    for fn, args, kw in [("median_filter", (), {"size": 3}), ("gaussian_filter", (1.5,), {})]:
        cpu = getattr(ndi, fn)(x, *args, axes=(2, 3), **kw)
        gpu = on_gpu(peer, fn, x, *args, axes=(2, 3), **kw)
        assert gpu.shape == x.shape
        if fn == "median_filter":
            assert same_bits(gpu, cpu)
        else:
            tol = ndi._tolerance(2.0, ndi.gaussian_filter, x[0, 0], *args)
            assert float(np.abs(gpu - cpu).max()) <= tol


def test_composed_morphology_on_the_gpu_equals_the_cpu(peer):
    """white_tophat and friends on a CUDA array: the grey steps on the GPU, the arithmetic
    the peer's own (kiln tensors have none and are refused)."""
    name, to_gpu, to_np = peer
    x = rand((31, 64), np.uint8, 13)
    for fn in ["white_tophat", "black_tophat", "morphological_gradient", "morphological_laplace"]:
        cpu = getattr(ndi, fn)(x, size=5)
        if name == "kiln":
            with pytest.raises(kiln.InvalidInputError):
                getattr(ndi, fn)(to_gpu(x), size=5)
            gpu = getattr(ndi, fn)(x, size=5, device="cuda")
        else:
            gpu = to_np(getattr(ndi, fn)(to_gpu(x), size=5))
        assert same_bits(gpu, cpu), fn


LABEL_SHAPES = [(1,), (1001,), (37, 61), (9, 10, 11), (3, 211, 5), (64, 64, 64)]
LABEL_DTYPES = [np.bool_, np.uint8, np.uint16, np.int32, np.int64, np.float32, np.float64]


@pytest.mark.parametrize("shape", LABEL_SHAPES, ids=str)
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_label_on_cuda_arrays_equals_the_cpu(gpu, lib, shape):
    """label of a CuPy or torch array runs on the GPU and gives the CPU path's labels and
    count bit for bit (every connectivity, several densities, every dtype the GPU reads),
    as an int32 array of the input's library; output= in place."""
    try:
        mod = __import__(lib)
    except Exception as e:  # noqa: BLE001 - any import failure means the peer is absent
        skip_or_fail(f"{lib} not importable: {e}")
    rng = np.random.default_rng(len(shape) * 1000 + shape[-1])
    to_gpu = (lambda a: mod.asarray(a)) if lib == "cupy" else (lambda a: mod.from_numpy(a).cuda())
    back = (lambda a: mod.asnumpy(a)) if lib == "cupy" else (lambda a: a.cpu().numpy())
    for k, dt in enumerate(LABEL_DTYPES):
        if lib == "torch" and dt == np.uint16:
            continue  # torch's uint16 is partial
        density = (0.2, 0.5, 0.8)[k % 3]
        x = (rng.random(shape) < density).astype(dt)
        for c in range(1, len(shape) + 1):
            s = ndi.generate_binary_structure(len(shape), c)
            want, wn = ndi.label(x, s)
            got, n = ndi.label(to_gpu(x), s)
            assert type(got).__module__.split(".")[0] == lib
            assert n == wn
            np.testing.assert_array_equal(back(got), want)
    out = to_gpu(np.full(shape, -7, np.int32))
    assert ndi.label(to_gpu(x), None, out) == ndi.label(x)[1]
    np.testing.assert_array_equal(back(out), ndi.label(x)[0])


def test_label_on_cuda_arrays_refuses_what_it_cannot_do(gpu, monkeypatch):
    monkeypatch.setenv("KILN_NDIMAGE_FALLBACK", "0")  # the device path's own refusals
    try:
        import cupy
    except Exception as e:  # noqa: BLE001
        skip_or_fail(f"cupy not importable: {e}")
    x = cupy.ones((4, 5), dtype=cupy.uint8)
    with pytest.raises(kiln.InvalidInputError, match="1 to 3 axes"):
        ndi.label(cupy.ones((2, 2, 2, 2), dtype=cupy.uint8))
    with pytest.raises(kiln.InvalidInputError, match="int32"):
        ndi.label(x, output=np.int64)
    with pytest.raises(kiln.InvalidInputError, match="contiguous"):
        ndi.label(cupy.ones((4, 10), dtype=cupy.uint8)[:, ::2])
    with pytest.raises(kiln.InvalidInputError, match="int8"):
        ndi.label(cupy.ones((4, 5), dtype=cupy.int8))
    with pytest.raises(AssertionError):
        ndi.label(x, np.array([[1, 1, 0], [0, 1, 0], [0, 0, 0]]))
    with pytest.raises(kiln.InvalidInputError, match="kiln tensors"):
        ndi.label(kiln.asarray(np.ones((4, 5), np.uint8), device="cuda"))


def test_cases_without_gpu_kernels_run_on_the_host(peer):
    """Another library's CUDA array in a case the GPU path does not take (a function, a
    dtype, a rank, an output= array of its library) is copied to the host, computed with
    scipy's bits and given back in its type on its device (into the output= array)."""
    name, to_gpu, to_np = peer
    if name == "kiln":
        return  # kiln tensors keep the device path's rules
    rng = np.random.default_rng(17)
    vol = rng.random((6, 7, 8)).astype(np.float32)
    img = rng.random((9, 11))  # float64
    lab, _ = ndi.label(img > 0.5)
    cases = [
        ("rotate", (vol, 30.0), {"order": 1}),
        ("gaussian_filter", ((img * 1000).astype(np.int32), 1.5), {}),
        ("sobel", ((img * 255).astype(np.uint8),), {}),
        ("distance_transform_edt", (img > 0.5,), {}),
        ("sum_labels", (img, lab, [1, 2]), {}),
        ("geometric_transform", (img, lambda o: (o[0] * 0.9, o[1])), {}),
    ]
    for fn, args, kw in cases:
        want = getattr(ndi, fn)(*args, **kw)
        got = getattr(ndi, fn)(*(to_gpu(a) if isinstance(a, np.ndarray) else a for a in args), **kw)
        assert type(got).__module__.split(".")[0] == name, (fn, type(got))
        assert same_bits(to_np(got), np.asarray(want)), fn
    out = to_gpu(np.zeros(img.shape, np.float64))
    r = ndi.uniform_filter(to_gpu(img), 3, output=out)
    assert r is out and same_bits(to_np(out), ndi.uniform_filter(img, 3))


def test_rotate_of_a_volume_turns_each_plane_on_the_gpu(peer):
    """rotate of a 3-D CUDA array: every plane of ``axes`` rotated on the GPU, each with the
    CPU path's bits, in the input's library."""
    name, to_gpu, to_np = peer
    if name == "kiln":
        return
    vol = np.random.default_rng(23).random((5, 9, 12)).astype(np.float32)
    for axes, order, reshape, out in [((1, 2), 1, False, None), ((0, 2), 3, True, None),
                                       ((2, 0), 0, True, np.float64), ((0, 1), 2, False, None)]:
        want = ndi.rotate(vol, 27.0, axes=axes, order=order, reshape=reshape, output=out)
        got = ndi.rotate(to_gpu(vol), 27.0, axes=axes, order=order, reshape=reshape, output=out)
        assert type(got).__module__.split(".")[0] == name
        assert same_bits(to_np(got), want), (axes, order, reshape)
