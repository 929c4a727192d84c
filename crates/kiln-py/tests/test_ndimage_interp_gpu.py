"""kiln.ndimage's interpolation on CUDA arrays: every GPU result equals the CPU path's result
on the same data bit for bit (map_coordinates, affine_transform, shift, zoom, rotate,
spline_filter, spline_filter1d; orders 0-5, every mode, float32 and float64, odd shapes),
comes back as an array of the input's kind on its GPU, and what the GPU path does not take
is refused with InvalidInputError. On kiln tensors always, on torch and CuPy CUDA arrays
where those import. Skips without a GPU (the ``gpu`` fixture), fails instead with
KILN_REQUIRE_GPU=1."""

import numpy as np
import pytest

import kiln
from conftest import skip_or_fail
from kiln import ndimage as ndi

MODES = ["nearest", "wrap", "reflect", "grid-mirror", "mirror", "constant", "grid-wrap",
         "grid-constant"]
ORDERS = [0, 1, 2, 3, 4, 5]
DTYPES = [np.float32, np.float64]
SHAPES = [(17,), (7, 9), (5, 6, 7)]


@pytest.fixture(params=["kiln", "torch", "cupy"])
def peer(request, gpu):
    """(name, to_gpu, to_numpy, is_own_kind) for one kind of CUDA array; torch and CuPy skip
    if not importable."""
    name = request.param
    if name == "kiln":
        return (name, lambda a: kiln.asarray(a, device="cuda"), lambda t: t.numpy(),
                lambda y: isinstance(y, kiln.Tensor) and y.is_cuda)
    try:
        mod = __import__(name)
    except Exception as e:  # noqa: BLE001 - any import failure means the peer is absent
        skip_or_fail(f"{name} not importable: {e}")
    if name == "torch":
        if not mod.cuda.is_available():
            skip_or_fail("torch sees no CUDA device")
        return (name, lambda a: mod.from_numpy(np.ascontiguousarray(a)).cuda(),
                lambda t: t.cpu().numpy(), lambda y: isinstance(y, mod.Tensor) and y.is_cuda)
    return (name, lambda a: mod.asarray(a), lambda t: mod.asnumpy(t),
            lambda y: isinstance(y, mod.ndarray))


def rand(shape, dtype, seed):
    return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(dtype)


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(np.uint8), b.view(np.uint8))


def check(peer, fn, x, *args, **kw):
    """``fn`` on the GPU copy of ``x`` against ``fn`` on ``x``: the peer's kind, the same bits."""
    _, to_gpu, to_np, own = peer
    want = getattr(ndi, fn)(x, *args, **kw)
    y = getattr(ndi, fn)(to_gpu(x), *args, **kw)
    assert own(y), type(y)
    got = to_np(y)
    assert same_bits(got, want), (
        f"{fn} {x.dtype} {x.shape} {args} {kw}: dtype {got.dtype} vs {want.dtype}, shape {got.shape} vs "
        f"{want.shape}, largest difference "
        f"{np.max(np.abs(got.astype(np.float64) - want)) if got.shape == want.shape else None}")


def transforms(shape, seed):
    """(fn, args, kw) of each resampling of an input of ``shape``."""
    g = np.random.default_rng(seed)
    nd = len(shape)
    c = np.array([(n - 1) / 2 for n in shape])
    out = [
        ("shift", ([g.uniform(-3, 3) for _ in shape],), {}),
        ("zoom", ([g.uniform(0.5, 2.2) for _ in shape],), {}),
        ("zoom", ([g.uniform(0.5, 2.2) for _ in shape],), {"grid_mode": True}),
    ]
    m = np.eye(nd) * g.uniform(0.9, 1.2)
    if nd > 1:
        a = g.uniform(-3, 3)
        m[0, 0], m[0, nd - 1], m[nd - 1, 0], m[nd - 1, nd - 1] = np.cos(a), -np.sin(a), np.sin(a), np.cos(a)
    out.append(("affine_transform", (m,), {"offset": c - m @ c}))
    out.append(("affine_transform", (np.diag(m),), {"offset": g.uniform(-2, 2, nd)}))
    coords = np.stack([g.uniform(-3, n + 3, size=(5, 7)) for n in shape])
    out.append(("map_coordinates", (coords,), {}))
    if nd == 2:
        out.append(("rotate", (g.uniform(-180, 180),), {}))
        out.append(("rotate", (g.uniform(-180, 180),), {"reshape": False}))
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_resampling_gpu_equals_cpu_bitwise(peer, shape, order, dtype):
    x = rand(shape, dtype, 7 * order + len(shape))
    for mode in MODES:
        cval = 0.5 if "constant" in mode else 0.0
        for fn, args, kw in transforms(shape, order):
            check(peer, fn, x, *args, order=order, mode=mode, cval=cval, **kw)
        # no prefilter, and a float32 output of float64 data (and the other way)
        fn, args, kw = transforms(shape, order + 1)[3]
        check(peer, fn, x, *args, order=order, mode=mode, prefilter=False, **kw)
        other = np.float64 if dtype == np.float32 else np.float32
        check(peer, "shift", x, 1.25, output=other, order=order, mode=mode)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", SHAPES + [(1, 9), (2, 1, 5)], ids=lambda s: "x".join(map(str, s)))
def test_spline_filters_gpu_equal_cpu_bitwise(peer, shape, dtype):
    x = rand(shape, dtype, len(shape))
    for mode in MODES:
        for order in ORDERS:
            for axis in range(-1, len(shape)):
                check(peer, "spline_filter1d", x, order=order, axis=axis, mode=mode)
            check(peer, "spline_filter1d", x, order=order, output=np.float32, mode=mode)
            if order >= 2:
                check(peer, "spline_filter", x, order=order, mode=mode)
                check(peer, "spline_filter", x, order=order, output=np.float32, mode=mode)


def test_zoom_by_one_copies(peer):
    _, to_gpu, to_np, own = peer
    x = rand((6, 5), np.float32, 3)
    g = to_gpu(x)
    y = ndi.zoom(g, 1.0)
    assert own(y) and same_bits(to_np(y), ndi.zoom(x, 1.0))
    y2 = ndi.zoom(g, 1.0, output=np.float64)
    assert same_bits(to_np(y2), ndi.zoom(x, 1.0, output=np.float64))


def test_unsupported_cases_are_refused(peer, monkeypatch):
    # the device path's refusals, with the host fallback off (with it on, other libraries'
    # arrays run these on the host: test_cases_without_gpu_kernels_run_on_the_host)
    monkeypatch.setenv("KILN_NDIMAGE_FALLBACK", "0")
    name, to_gpu, _, _ = peer
    x = to_gpu(rand((6, 5), np.float32, 1))
    with pytest.raises(kiln.InvalidInputError, match="output= an array"):
        ndi.shift(x, 1.0, output=np.zeros((6, 5), np.float32))
    with pytest.raises(kiln.InvalidInputError, match="output dtype"):
        ndi.shift(x, 1.0, output=np.int16)
    with pytest.raises(kiln.InvalidInputError, match="geometric_transform"):
        ndi.geometric_transform(x, lambda o: o)
    if name == "kiln":  # CuPy and torch volumes are rotated plane by plane on the GPU
        with pytest.raises(kiln.InvalidInputError, match="rotate"):
            ndi.rotate(to_gpu(rand((4, 5, 6), np.float32, 2)), 30.0)
    with pytest.raises(kiln.InvalidInputError, match="axes"):
        ndi.zoom(to_gpu(rand((2, 2, 2, 2), np.float32, 2)), 2.0)
    with pytest.raises(kiln.InvalidInputError, match="input dtype"):
        ndi.shift(kiln.asarray(np.ones((4, 4), np.uint8), device="cuda"), 1.0)
    with pytest.raises(RuntimeError):
        ndi.shift(x, 1.0, order=6)
    with pytest.raises(RuntimeError):
        ndi.shift(x, 1.0, mode="bogus")
