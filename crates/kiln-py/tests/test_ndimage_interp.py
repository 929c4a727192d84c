"""kiln.ndimage's interpolation family against scipy.ndimage on fresh random inputs.

kiln ports scipy's C loops operation for operation (same weights, same tap order, same
boundary folding, same prefilter initialisation, same integer rounding), so results are
compared for exact equality (``assert_array_equal``, NaN-aware). The one stated exception:
none so far; a test that needs a tolerance says which and why.
"""

import numpy as np
import pytest

scipy = pytest.importorskip("scipy")
scipy_ndimage = pytest.importorskip("scipy.ndimage")
import kiln  # noqa: E402
from kiln import ndimage as kn  # noqa: E402

MODES = ["constant", "grid-constant", "nearest", "reflect", "grid-mirror", "mirror",
         "grid-wrap", "wrap"]
ORDERS = [0, 1, 2, 3, 4, 5]


def rng(seed):
    return np.random.default_rng(seed)


def data(shape, dtype, seed=0):
    r = rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "c":
        return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dt)
    if dt.kind == "f":
        return (r.standard_normal(shape) * 10).astype(dt)
    if dt == np.bool_:
        return r.random(shape) > 0.5
    info = np.iinfo(dt)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    return r.integers(lo, hi, size=shape, endpoint=True).astype(dt)


def same(a, b):
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_array_equal(a, b)


# --- spline filters ---------------------------------------------------------------------

@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_spline_filter1d_matches_scipy(order, mode):
    x = data((7, 11, 5), np.float64, seed=order)
    for axis in (0, 1, -1):
        same(kn.spline_filter1d(x, order, axis, mode=mode),
             scipy_ndimage.spline_filter1d(x, order, axis, mode=mode))


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int16, np.int64, np.complex128])
@pytest.mark.parametrize("out", [None, np.float32, np.int16])
def test_spline_filter_dtypes_and_outputs(dtype, out):
    x = data((9, 13), dtype, seed=3)
    kw = {} if out is None else {"output": out}
    if np.dtype(dtype).kind == "c" and out is not None:
        with pytest.warns(UserWarning):
            want = scipy_ndimage.spline_filter(x, 3, **kw)
        with pytest.warns(UserWarning):
            got = kn.spline_filter(x, 3, **kw)
    else:
        want = scipy_ndimage.spline_filter(x, 3, **kw)
        got = kn.spline_filter(x, 3, **kw)
    same(got, want)


@pytest.mark.skipif(not scipy.__version__.startswith("1.17."),
                    reason="kiln reproduces scipy 1.17's in-place reflect initialisation, "
                           "which scipy 1.18 replaces")
@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", ["reflect", "nearest", "mirror", "grid-wrap"])
def test_spline_filter_short_axes(n, mode):
    # scipy 1.17's reflect initialisation accumulates in place: visible on short axes
    x = data((n, 5), np.float64, seed=n)
    for order in (2, 3, 4, 5):
        same(kn.spline_filter(x, order, mode=mode), scipy_ndimage.spline_filter(x, order, mode=mode))


# --- map_coordinates ------------------------------------------------------------------

@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_map_coordinates_2d(order, mode):
    x = data((13, 17), np.float64, seed=order)
    c = rng(10 + order).uniform(-6, 22, size=(2, 9, 7))
    for prefilter in (True, False):
        same(kn.map_coordinates(x, c, order=order, mode=mode, cval=1.5, prefilter=prefilter),
             scipy_ndimage.map_coordinates(x, c, order=order, mode=mode, cval=1.5,
                                           prefilter=prefilter))


@pytest.mark.parametrize("order", [0, 1, 3, 5])
@pytest.mark.parametrize("mode", MODES)
def test_map_coordinates_1d_and_3d(order, mode):
    x1 = data((19,), np.float64, seed=1)
    c1 = rng(2).uniform(-25, 45, size=(1, 101))
    same(kn.map_coordinates(x1, c1, order=order, mode=mode),
         scipy_ndimage.map_coordinates(x1, c1, order=order, mode=mode))
    x3 = data((5, 7, 9), np.float32, seed=3)
    c3 = rng(4).uniform(-3, 11, size=(3, 31))
    same(kn.map_coordinates(x3, c3, order=order, mode=mode),
         scipy_ndimage.map_coordinates(x3, c3, order=order, mode=mode))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8, np.int16, np.int64,
                                   np.complex64, np.complex128, np.bool_])
@pytest.mark.parametrize("order", [0, 1, 3])
def test_map_coordinates_dtypes(dtype, order):
    x = data((11, 15), dtype, seed=5)
    c = rng(6).uniform(-2, 16, size=(2, 40))
    same(kn.map_coordinates(x, c, order=order, cval=2 + 1j if np.dtype(dtype).kind == "c" else 2),
         scipy_ndimage.map_coordinates(x, c, order=order,
                                       cval=2 + 1j if np.dtype(dtype).kind == "c" else 2))


def test_map_coordinates_integer_coordinates_and_output_array():
    x = data((10, 12), np.float64, seed=7)
    c = rng(8).integers(-3, 14, size=(2, 5, 6)).astype(np.int32)
    o1 = np.zeros((5, 6), np.int16)
    o2 = np.zeros((5, 6), np.int16)
    r1 = kn.map_coordinates(x, c, output=o1, mode="reflect")
    scipy_ndimage.map_coordinates(x, c, output=o2, mode="reflect")
    assert r1 is o1
    same(o1, o2)


# --- affine_transform, shift, zoom -------------------------------------------------------

@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_affine_transform_2d(order, mode):
    x = data((15, 12), np.float32, seed=order)
    m = np.array([[0.9, 0.3], [-0.25, 1.1]])
    off = [1.3, -2.2]
    same(kn.affine_transform(x, m, off, output_shape=(17, 11), order=order, mode=mode, cval=-1),
         scipy_ndimage.affine_transform(x, m, off, output_shape=(17, 11), order=order,
                                        mode=mode, cval=-1))


def test_affine_transform_forms():
    x = data((9, 10, 7), np.float64, seed=11)
    diag = np.array([0.8, 1.3, 0.7])
    same(kn.affine_transform(x, diag, 0.5), scipy_ndimage.affine_transform(x, diag, 0.5))
    hom = np.eye(4)
    hom[:3, :3] = [[1, 0.1, 0], [0, 0.9, 0.2], [0.1, 0, 1.05]]
    hom[:3, 3] = [0.5, -1, 2]
    same(kn.affine_transform(x, hom), scipy_ndimage.affine_transform(x, hom))
    same(kn.affine_transform(x, hom[:3], order=1, mode="nearest"),
         scipy_ndimage.affine_transform(x, hom[:3], order=1, mode="nearest"))
    # a non-square matrix: a 2-D output from a 3-D input
    m = rng(12).uniform(-1, 1, size=(3, 2))
    same(kn.affine_transform(x, m, 1.0, output_shape=(6, 8), mode="wrap"),
         scipy_ndimage.affine_transform(x, m, 1.0, output_shape=(6, 8), mode="wrap"))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_shift(order, mode):
    x = data((13, 8), np.float64, seed=order)
    for s in (1.7, [-2.25, 3.5], [0.0, -9.3]):
        same(kn.shift(x, s, order=order, mode=mode, cval=3),
             scipy_ndimage.shift(x, s, order=order, mode=mode, cval=3))


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int64, np.float32, np.complex64])
def test_shift_dtypes_and_prefilter_off(dtype):
    x = data((21, 9), dtype, seed=13)
    for order in (1, 3):
        for pre in (True, False):
            same(kn.shift(x, [1.5, -0.7], order=order, prefilter=pre, mode="mirror"),
                 scipy_ndimage.shift(x, [1.5, -0.7], order=order, prefilter=pre, mode="mirror"))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_zoom(order, mode):
    x = data((9, 14), np.float64, seed=order)
    for z in (2.0, [0.5, 1.7], [1.0, 0.37]):
        same(kn.zoom(x, z, order=order, mode=mode), scipy_ndimage.zoom(x, z, order=order, mode=mode))


@pytest.mark.parametrize("mode", ["grid-constant", "grid-wrap", "reflect", "nearest", "mirror"])
@pytest.mark.parametrize("order", [0, 1, 3, 4])
def test_zoom_grid_mode(mode, order):
    x = data((7, 5, 6), np.float32, seed=order)
    for z in (1.5, [0.6, 2.2, 1.0]):
        same(kn.zoom(x, z, order=order, mode=mode, grid_mode=True),
             scipy_ndimage.zoom(x, z, order=order, mode=mode, grid_mode=True))


def test_zoom_grid_mode_warns_like_scipy():
    x = data((6, 6), np.float64)
    with pytest.warns(UserWarning, match="grid-constant"):
        kn.zoom(x, 2, mode="constant", grid_mode=True)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.complex128])
def test_zoom_dtypes_and_outputs(dtype):
    x = data((11, 7), dtype, seed=17)
    same(kn.zoom(x, 1.9), scipy_ndimage.zoom(x, 1.9))
    if np.dtype(dtype).kind != "c":
        same(kn.zoom(x, 1.9, output=np.float32), scipy_ndimage.zoom(x, 1.9, output=np.float32))
        same(kn.zoom(x, [1, 1], prefilter=False, order=2),
             scipy_ndimage.zoom(x, [1, 1], prefilter=False, order=2))


# --- rotate ---------------------------------------------------------------------------

def test_cosdg_sindg_are_scipy_special():
    from scipy import special

    from kiln._ndimage_interp import _deg_trig
    angles = np.concatenate([np.arange(-720, 721, 15.0), rng(1).uniform(-1e4, 1e4, 500)])
    for a in angles:
        assert _deg_trig(a, True) == special.cosdg(a)
        assert _deg_trig(a, False) == special.sindg(a)


@pytest.mark.parametrize("order", [0, 1, 3, 5])
@pytest.mark.parametrize("reshape", [True, False])
def test_rotate_2d(order, reshape):
    x = data((17, 12), np.float32, seed=order)
    for angle in (30, -47.5, 90, 180, 271.3):
        same(kn.rotate(x, angle, reshape=reshape, order=order),
             scipy_ndimage.rotate(x, angle, reshape=reshape, order=order))


@pytest.mark.parametrize("axes", [(1, 0), (0, 2), (2, 1), (-1, -3)])
@pytest.mark.parametrize("mode", ["constant", "nearest", "reflect", "grid-wrap"])
def test_rotate_3d_axes(axes, mode):
    x = data((6, 9, 7), np.float64, seed=21)
    for reshape in (True, False):
        same(kn.rotate(x, 33, axes=axes, reshape=reshape, mode=mode),
             scipy_ndimage.rotate(x, 33, axes=axes, reshape=reshape, mode=mode))


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.complex64])
def test_rotate_dtypes(dtype):
    x = data((13, 10), dtype, seed=23)
    same(kn.rotate(x, 21, order=1), scipy_ndimage.rotate(x, 21, order=1))


# --- geometric_transform ---------------------------------------------------------------

@pytest.mark.parametrize("order", [0, 1, 3])
@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap"])
def test_geometric_transform(order, mode):
    x = data((9, 11), np.float64, seed=31)

    def mapping(o, a, b=0.0):
        return (o[0] * a - 0.3, o[1] * 0.8 + b)

    same(kn.geometric_transform(x, mapping, (12, 10), order=order, mode=mode,
                                extra_arguments=(0.7,), extra_keywords={"b": 1.1}),
         scipy_ndimage.geometric_transform(x, mapping, (12, 10), order=order, mode=mode,
                                           extra_arguments=(0.7,), extra_keywords={"b": 1.1}))


def test_geometric_transform_rank_change_and_errors():
    x = data((15,), np.float64, seed=33)
    same(kn.geometric_transform(x, lambda o: (o[0] + o[1] * 0.5,), (6, 4)),
         scipy_ndimage.geometric_transform(x, lambda o: (o[0] + o[1] * 0.5,), (6, 4)))

    def boom(o):
        raise KeyError("from the mapping")

    with pytest.raises(KeyError):
        kn.geometric_transform(x, boom)
    with pytest.raises(RuntimeError):
        kn.geometric_transform(x, lambda o: o, extra_arguments=[1])


# --- bad arguments ---------------------------------------------------------------------

@pytest.mark.parametrize("fn,args", [
    ("spline_filter1d", ()), ("map_coordinates", (np.zeros((2, 3)),)),
    ("affine_transform", (np.eye(2),)), ("shift", (1.0,)), ("zoom", (2.0,)),
    ("geometric_transform", (lambda o: o,)), ("rotate", (10,)),
])
def test_order_out_of_range_is_runtime_error(fn, args):
    x = data((5, 6), np.float64)
    for order in (-1, 6):
        with pytest.raises(RuntimeError):
            getattr(scipy_ndimage, fn)(x, *args, order=order)
        with pytest.raises(RuntimeError):
            getattr(kn, fn)(x, *args, order=order)


def test_bad_arguments_raise_scipys_types():
    x = data((5, 6), np.float64)
    with pytest.raises(RuntimeError):
        kn.spline_filter(x, order=1)
    with pytest.raises(RuntimeError):
        kn.shift(x, 1, mode="unknown")
    with pytest.raises(RuntimeError):
        kn.shift(x, [1, 2, 3])
    with pytest.raises(TypeError):
        kn.map_coordinates(x, np.zeros((2, 3), complex))
    with pytest.raises(RuntimeError):
        kn.map_coordinates(x, np.zeros((3, 3)))
    with pytest.raises(RuntimeError):
        kn.affine_transform(x, np.eye(4))
    with pytest.raises(ValueError):
        kn.affine_transform(x, np.ones((3, 3)))
    with pytest.raises(RuntimeError):
        kn.zoom(x, 2, output=np.zeros((3, 3)))
    with pytest.raises(RuntimeError):
        kn.zoom(x.astype(complex), 2, output=np.zeros((10, 12)))
    with pytest.raises(ValueError):
        kn.rotate(x[0], 10)
    with pytest.raises(ValueError):
        kn.rotate(x, 10, axes=(0, 5))
    with pytest.raises(ValueError):
        kn.rotate(x, 10, axes=(0, 1, 2))
    ro = np.zeros((5, 6))
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        kn.shift(x, 1, output=ro)
    with pytest.raises(RuntimeError):
        kn.map_coordinates(x, np.zeros((2, 3), np.float16))


def test_scipy_c_layer_errors():
    x = data((5, 6), np.float64)
    for f in (lambda m: m.zoom(x, 2, order=2.0), lambda m: m.shift(x, 1, order=1.0),
              lambda m: m.spline_filter1d(x, 3.0),
              lambda m: m.geometric_transform(x, lambda o: [o[0], o[1]]),
              lambda m: m.geometric_transform(x, lambda o: (o[0],))):
        with pytest.raises(TypeError):
            f(scipy_ndimage)
        with pytest.raises(TypeError):
            f(kn)
    # order 1.0 copies in spline_filter1d, as scipy's `order in [0, 1]` does
    same(kn.spline_filter1d(x, 1.0), scipy_ndimage.spline_filter1d(x, 1.0))


class FakeCuda:
    """An array that says it is on a CUDA device and must not be read."""

    def __init__(self, shape=(4, 4), dtype="float32"):
        self.shape, self.dtype = shape, dtype

    def __dlpack__(self, stream=None):
        raise AssertionError("must not be read")

    def __dlpack_device__(self):
        return (2, 0)


def test_gpu_arrays_take_the_gpu_route_and_its_refusals(monkeypatch):
    # what the GPU path cannot run is refused before the data is read, with what works
    # (with the host fallback off; with it on, these cases are copied to the host and run on
    # the CPU: test_ndimage_dropin.py)
    monkeypatch.setenv("KILN_NDIMAGE_FALLBACK", "0")
    with pytest.raises(kiln.InvalidInputError, match="geometric_transform.*map_coordinates"):
        kn.geometric_transform(FakeCuda(), lambda o: o)
    with pytest.raises(kiln.InvalidInputError, match="zoom: input dtype int16 on the GPU"):
        kn.zoom(FakeCuda(dtype="int16"), 2)
    with pytest.raises(kiln.InvalidInputError, match="shift: complex input on the GPU"):
        kn.shift(FakeCuda(dtype="complex64"), 1.0)
    with pytest.raises(kiln.InvalidInputError, match="zoom: output= an array"):
        kn.zoom(FakeCuda(), 2, output=np.zeros((8, 8), np.float32))
    with pytest.raises(kiln.InvalidInputError, match="affine_transform: output dtype uint8"):
        kn.affine_transform(FakeCuda(), np.eye(2), output=np.uint8)
    with pytest.raises(kiln.InvalidInputError, match="rotate: a FakeCuda of 3 axes on the GPU"):
        kn.rotate(FakeCuda((3, 4, 5)), 30.0)
    with pytest.raises(kiln.InvalidInputError, match="map_coordinates: input has 4 axes"):
        kn.map_coordinates(FakeCuda((2, 2, 2, 2)), np.zeros((4, 3)))
    with pytest.raises(kiln.InvalidInputError, match="spline_filter1d: input has 0 axes"):
        kn.spline_filter1d(FakeCuda(()), 3)
    # scipy's argument errors come first, as on the CPU
    with pytest.raises(RuntimeError, match="spline order not supported"):
        kn.shift(FakeCuda(), 1.0, order=6)
    with pytest.raises(RuntimeError, match="spline order not supported"):
        kn.spline_filter(FakeCuda(), order=1)


def test_geometric_transform_low_level_callable():
    from scipy.ndimage import _ctest

    im = np.arange(12).reshape(4, 3).astype(np.float64)
    same(kn.geometric_transform(im, _ctest.transform(0.5)),
         scipy_ndimage.geometric_transform(im, _ctest.transform(0.5)))
    same(kn.geometric_transform(im, _ctest.transform(0.5)),
         kn.geometric_transform(im, lambda o: (o[0] - 0.5, o[1] - 0.5)))


def test_byteswapped_input_and_output():
    x = data((7, 9), np.float64, seed=41)
    xb = x.astype(">f8")
    o1, o2 = np.zeros((7, 9), ">f8"), np.zeros((7, 9), ">f8")
    kn.affine_transform(xb, [0.9, 1.1], output=o1)
    scipy_ndimage.affine_transform(xb, [0.9, 1.1], output=o2)
    same(o1, o2)
    o1, o2 = np.zeros((7, 9), ">f4"), np.zeros((7, 9), ">f4")
    kn.shift(x, 0.3, output=o1)
    scipy_ndimage.shift(x, 0.3, output=o2)
    same(o1, o2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", [(11,), (6, 9), (4, 5, 7)], ids=lambda s: "x".join(map(str, s)))
def test_the_device_route_equals_the_numpy_path_on_cpu_tensors(shape, dtype):
    # the GPU route's steps (prepadding by an order-0 shift, the float64 prefilter, zoom
    # factors, affine matrices, the resampling natives) run on a kiln tensor's device: on a
    # CPU tensor they must give the NumPy path's bits (the kernels' own bits are the host
    # emulation's and the GPU tests')
    from kiln import _ndimage_interp_gpu as gpu

    g = np.random.default_rng(len(shape))
    x = g.uniform(-2, 2, size=shape).astype(dtype)
    t = kiln.asarray(x, device="cpu")
    nd = len(shape)
    m = np.eye(nd) * 1.1
    if nd > 1:
        m[0, nd - 1], m[nd - 1, 0] = 0.3, -0.2
    coords = np.stack([g.uniform(-3, n + 3, size=(4, 5)) for n in shape])
    for order in range(6):
        for mode in ["nearest", "wrap", "reflect", "mirror", "constant", "grid-wrap", "grid-constant"]:
            kw = dict(order=order, mode=mode, cval=0.75, prefilter=True)
            cases = [
                (gpu.shift, kn.shift, ([1.5] * nd,), dict(output=None, **kw)),
                (gpu.zoom, kn.zoom, ([1.7] * nd,), dict(output=None, grid_mode=False, **kw)),
                (gpu.zoom, kn.zoom, ([0.6] * nd,), dict(output=np.float64, grid_mode=True, **kw)),
                (gpu.affine_transform, kn.affine_transform, (m, 0.5),
                 dict(output_shape=None, output=np.float32, **kw)),
                (gpu.affine_transform, kn.affine_transform, (np.diag(m), -0.25),
                 dict(output_shape=None, output=None, **kw)),
                (gpu.map_coordinates, kn.map_coordinates, (coords,), dict(output=None, **kw)),
            ]
            if order >= 2:
                cases.append((gpu.spline_filter, kn.spline_filter, (),
                              dict(order=order, output=np.float32, mode=mode)))
            cases.append((gpu.spline_filter1d, kn.spline_filter1d, (),
                          dict(order=order, axis=-1, output=None, mode=mode)))
            for dev, host, args, k in cases:
                if "grid_mode" in k and k["grid_mode"] and mode in ("constant", "wrap"):
                    continue
                # the spline filters' default output (float64) is None on the device route
                hk = {a: v for a, v in k.items() if not (a == "output" and v is None
                                                         and "spline" in host.__name__)}
                want = host(x, *args, **hk)
                got = dev(t, *args, **k)
                assert isinstance(got, kiln.Tensor)
                got = got.numpy()
                assert got.dtype == want.dtype and got.shape == want.shape, (host.__name__, k)
                assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (host.__name__, order, mode)
