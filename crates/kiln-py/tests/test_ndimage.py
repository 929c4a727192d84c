"""kiln.ndimage against scipy.ndimage on fresh random inputs (CPU; the GPU cases are in
test_ndimage_gpu.py).

Rank filters and morphology must equal scipy exactly; linear filters on float32 NumPy
arrays must lie within kiln's stated bound (``kiln::ndimage::ndimage_tolerance``, read
through ``kiln.ndimage._tolerance``), on NumPy arrays of other dtypes equal scipy exactly
(test_ndimage_dtypes.py covers every dtype); 8/16-bit kiln tensors give results within 1 of
scipy's float64 result rounded half away from zero and clamped (kiln's device rule; scipy
truncates).
"""

import itertools

import numpy as np
import pytest

import kiln
from kiln import ndimage as ndi

sn = pytest.importorskip("scipy.ndimage")
_scipy = pytest.importorskip("scipy")
if tuple(int(p) for p in _scipy.__version__.split(".")[:2]) < (1, 15):
    # axes= of the rank, morphology and laplace functions came in 1.15; written against 1.17
    pytest.skip(f"scipy {_scipy.__version__} is older than 1.15", allow_module_level=True)

SHAPES = [(17,), (1, 1), (7, 5), (31, 64), (9, 10, 11)]
MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-wrap", "grid-constant",
         "grid-mirror"]
_seed = itertools.count(1)


def rand(shape, dtype=np.float32):
    """Fresh random data (a new seed per call): floats in [-2, 2), integers over the range."""
    rng = np.random.default_rng(next(_seed))
    if dtype == np.float32 or dtype == np.float64:
        return rng.uniform(-2, 2, size=shape).astype(dtype)
    return rng.integers(0, np.iinfo(dtype).max, size=shape, endpoint=True).astype(dtype)


def check_linear(fn, x, *args, tensor=True, **kw):
    """kiln vs scipy for one linear call on float32, uint8, uint16 or float64 ``x``: the
    float32 plan within its bound, other NumPy dtypes exactly; and for 8/16-bit data (with
    ``tensor``) the kiln tensor's rounded and clamped result."""
    got = getattr(ndi, fn)(x, *args, **kw)
    assert isinstance(got, np.ndarray) and got.shape == x.shape and got.dtype == x.dtype, (
        type(got), getattr(got, "dtype", None))
    if x.dtype == np.float32:
        want = getattr(sn, fn)(x, *args, **kw)
        tol = ndi._tolerance(float(np.abs(x).max()), getattr(ndi, fn), x, *args, **kw)
        err = float(np.abs(got.astype(np.float64) - want).max())
        assert err <= tol, f"{fn} {x.shape} {args} {kw}: |kiln - scipy| = {err} > {tol}"
        return
    np.testing.assert_array_equal(got, getattr(sn, fn)(x, *args, **kw), err_msg=f"{fn} {kw}")
    if x.dtype != np.float64 and tensor:
        got = getattr(ndi, fn)(kiln.asarray(x), *args, **kw).numpy()
        want = getattr(sn, fn)(x.astype(np.float64), *args, **kw)
        want = np.clip(np.sign(want) * np.floor(np.abs(want) + 0.5), 0, np.iinfo(x.dtype).max)
        err = float(np.abs(got.astype(np.float64) - want).max())
        assert err <= 1, f"{fn} {x.dtype} {x.shape} {args} {kw}: off by {err}"


def check_exact(fn, x, *args, **kw):
    got = getattr(ndi, fn)(x, *args, **kw)
    want = getattr(sn, fn)(x, *args, **kw)
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{fn} {x.dtype} {x.shape} {args} {kw}: {len(bad)} differ, first at {bad[0]}"


# --- linear filters -------------------------------------------------------------------------

LINEAR = [
    ("correlate", lambda nd: (np.random.default_rng(5).uniform(-1, 1, (3,) * nd),), {}),
    ("convolve", lambda nd: (np.random.default_rng(6).uniform(-1, 1, (2,) * nd),), {}),
    ("correlate1d", lambda nd: ([0.25, -1.0, 0.5, 2.0],), {}),
    ("convolve1d", lambda nd: ([1.0, 2.0, -0.5],), {"axis": 0}),
    ("gaussian_filter", lambda nd: (1.3,), {}),
    ("gaussian_filter1d", lambda nd: (2.0,), {"axis": 0}),
    ("gaussian_laplace", lambda nd: (1.0,), {}),
    ("gaussian_gradient_magnitude", lambda nd: (0.8,), {}),
    ("uniform_filter", lambda nd: (), {"size": 4}),
    ("uniform_filter1d", lambda nd: (5,), {}),
    ("sobel", lambda nd: (), {"axis": 0}),
    ("prewitt", lambda nd: (), {}),
    ("laplace", lambda nd: (), {}),
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("fn,args,kw", LINEAR, ids=[f[0] for f in LINEAR])
def test_linear_every_mode(fn, args, kw, shape):
    x = rand(shape)
    for mode in MODES:
        check_linear(fn, x, *args(len(shape)), mode=mode, cval=0.75, **kw)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", [(17,), (7, 5), (31, 64), (9, 10, 11)], ids=str)
@pytest.mark.parametrize("fn,args,kw", LINEAR, ids=[f[0] for f in LINEAR])
def test_linear_dtypes(fn, args, kw, shape, dtype):
    # signed results: a tensor clamps at 0 (compared with scipy where they stay positive)
    signed = fn in ("sobel", "prewitt", "laplace", "gaussian_laplace", "correlate", "convolve",
                    "correlate1d", "convolve1d")
    x = rand(shape, dtype)
    for mode in ("reflect", "constant", "wrap"):
        check_linear(fn, x, *args(len(shape)), mode=mode, cval=3.0, tensor=not signed, **kw)


def test_linear_signed_integer_results_clamp_on_tensors():
    x = rand((31, 64), np.uint8)
    for fn in ("sobel", "prewitt", "laplace"):
        check_linear(fn, x)
    check_linear("correlate", x, np.array([[1.0, -2.0], [0.5, 0.25]]), origin=(-1, 0))


@pytest.mark.parametrize("shape", [(7, 5), (31, 64), (9, 10, 11)], ids=str)
def test_linear_parameters(shape):
    nd = len(shape)
    x = rand(shape)
    rng = np.random.default_rng(11)
    # kernels of odd and even sides, with origins
    for ks in [(2,) * nd, (3,) * nd, (4, 1, 3)[:nd], (1, 5, 2)[:nd]]:
        w = rng.uniform(-1, 1, ks)
        for origin in [0, [-(k // 2) for k in ks], [(k - 1) // 2 for k in ks]]:
            check_linear("correlate", x, w, origin=origin, mode="mirror")
            check_linear("convolve", x, w, origin=origin, mode="constant", cval=-1.5)
    # axes
    check_linear("correlate", x, rng.uniform(-1, 1, (3,)), axes=(nd - 1,))
    check_linear("convolve", x, rng.uniform(-1, 1, (2, 3)), axes=(0, nd - 1), origin=(-1, 1))
    check_linear("uniform_filter", x, size=(2, 5), axes=(nd - 1, 0), origin=(0, -2))
    check_linear("laplace", x, axes=[-1])
    # per-axis sigma, order, truncate, radius
    check_linear("gaussian_filter", x, [0.7, 2.1, 1.0][:nd], order=[1, 0, 2][:nd], truncate=2.5)
    check_linear("gaussian_filter", x, 1.2, radius=[1, 3, 2][:nd], mode="wrap")
    check_linear("gaussian_filter", x, [0.0, 1.5, 0.5][:nd])
    check_linear("gaussian_filter", x, 1.0, order=2, axes=(0,))
    check_linear("gaussian_filter", x, (1.0, 2.0), axes=(nd - 1, 0), order=(0, 1))
    check_linear("gaussian_filter1d", x, 1.7, axis=0, order=1, radius=3)
    check_linear("gaussian_filter1d", x, 0.9, axis=-1, order=2, truncate=3.0)
    check_linear("gaussian_laplace", x, [1.0, 2.0, 1.5][:nd], truncate=3.0)
    check_linear("gaussian_gradient_magnitude", x, [1.1, 0.6, 1.4][:nd], radius=2)
    check_linear("gaussian_gradient_magnitude", x, 0.9, axes=tuple(range(nd))[::-1])
    check_linear("uniform_filter1d", x, 4, axis=0, origin=-2)
    check_linear("uniform_filter1d", x, 6, axis=-1, origin=2, mode="nearest")
    check_linear("correlate1d", x, [1.0, 2.0, 3.0, 4.0], axis=0, origin=1)
    check_linear("convolve1d", x, [1.0, -2.0], axis=-1, origin=-1)
    for ax in range(nd):
        check_linear("sobel", x, axis=ax, mode="nearest")
        check_linear("prewitt", x, axis=-1 - ax, mode="constant", cval=2.0)


def test_linear_returns_new_writable_array_of_input_type():
    x = rand((7, 5))
    y = ndi.gaussian_filter(x, 1.0)
    assert isinstance(y, np.ndarray) and y.flags.writeable and not np.shares_memory(x, y)
    # lists go through numpy, as scipy takes them
    assert isinstance(ndi.uniform_filter(x.tolist(), 3), np.ndarray)
    # a kiln tensor stays a kiln tensor; out_type="kiln" gives one for numpy too
    t = kiln.asarray(x)
    assert isinstance(ndi.gaussian_filter(t, 1.0), kiln.Tensor)
    assert isinstance(ndi.gaussian_filter(x, 1.0, out_type="kiln"), kiln.Tensor)
    np.testing.assert_array_equal(ndi.gaussian_filter(t, 1.0).numpy(), y)
    np.testing.assert_array_equal(ndi.gaussian_filter(x, 1.0, device="cpu"), y)


# --- rank filters and grey morphology -------------------------------------------------------

RANK = [
    ("median_filter", (), {"size": 3}),
    ("median_filter", (), {"size": 4}),
    ("rank_filter", (2,), {"size": 3}),
    ("rank_filter", (-2,), {"size": (2, 3, 2)}),
    ("percentile_filter", (30,), {"size": 3}),
    ("percentile_filter", (-20,), {"size": 2}),
    ("minimum_filter", (), {"size": 3}),
    ("maximum_filter", (), {"size": (4, 2, 3)}),
    ("minimum_filter1d", (3,), {}),
    ("maximum_filter1d", (4,), {"axis": 0}),
    ("grey_erosion", (), {"size": 3}),
    ("grey_dilation", (), {"size": (2, 3, 4)}),
    ("grey_opening", (), {"size": 3}),
    ("grey_closing", (), {"size": 2}),
]


def _fit(kw, nd):
    """Per-axis tuples of RANK trimmed to the data's rank."""
    return {k: (v[:nd] if isinstance(v, tuple) else v) for k, v in kw.items()}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("fn,args,kw", RANK, ids=[f"{f[0]}-{i}" for i, f in enumerate(RANK)])
def test_rank_every_mode(fn, args, kw, shape):
    x = rand(shape)
    for mode in MODES:
        check_exact(fn, x, *args, mode=mode, cval=0.5, **_fit(kw, len(shape)))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16], ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", [(17,), (7, 5), (31, 64), (9, 10, 11)], ids=str)
@pytest.mark.parametrize("fn,args,kw", RANK, ids=[f"{f[0]}-{i}" for i, f in enumerate(RANK)])
def test_rank_integer_dtypes(fn, args, kw, shape, dtype):
    x = rand(shape, dtype)
    for mode in ("reflect", "constant", "mirror"):
        check_exact(fn, x, *args, mode=mode, cval=7.9, **_fit(kw, len(shape)))


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.uint16], ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", [(7, 5), (31, 64), (9, 10, 11)], ids=str)
def test_rank_parameters(shape, dtype):
    nd = len(shape)
    x = rand(shape, dtype)
    rng = np.random.default_rng(3)
    fps = [rng.random((3,) * nd) > 0.4, rng.random((2, 4, 3)[:nd]) > 0.5,
           ndi.generate_binary_structure(nd, 1)]
    for fp in fps:
        fp.flat[0] = True
        origin = [-(s // 2) for s in fp.shape]
        for fn, args in [("median_filter", ()), ("rank_filter", (1,)), ("percentile_filter", (75,)),
                         ("minimum_filter", ()), ("maximum_filter", ()), ("grey_erosion", ()),
                         ("grey_dilation", ()), ("grey_opening", ()), ("grey_closing", ())]:
            check_exact(fn, x, *args, footprint=fp, mode="nearest")
            check_exact(fn, x, *args, footprint=fp, origin=origin, mode="wrap")
    # origins with sizes, odd and even
    for size, origin in [((3, 4, 2)[:nd], (1, -2, 0)[:nd]), (5, 2), (2, -1)]:
        for fn in ("median_filter", "minimum_filter", "maximum_filter", "grey_dilation",
                   "grey_closing"):
            check_exact(fn, x, size=size, origin=origin, mode="reflect")
    # axes
    check_exact("median_filter", x, size=3, axes=(0,))
    check_exact("maximum_filter", x, size=(2, 4), axes=(nd - 1, 0), origin=(0, 1))
    check_exact("rank_filter", x, -1, footprint=[[True, False, True]], axes=(0, nd - 1))
    check_exact("grey_erosion", x, size=(3,), axes=(-1,), mode="constant", cval=1.0)
    check_exact("percentile_filter", x, 100, size=2)
    check_exact("percentile_filter", x, 0, size=4, mode="mirror")
    # non-flat grey morphology (float32: integers wrap as C does; tested in kiln's own suite)
    if dtype == np.float32:
        st = rng.uniform(-1, 1, (3, 2, 3)[:nd])
        for fn in ("grey_erosion", "grey_dilation", "grey_opening", "grey_closing"):
            check_exact(fn, x, structure=st, mode="nearest")
            check_exact(fn, x, structure=st, footprint=st > -0.5, origin=(1, 0, -1)[:nd])


def test_rank_axes_in_any_order_as_scipy():
    x = rand((9, 10, 11))
    # every axis named out of order: scipy keeps footprint and origins in axis order ...
    check_exact("median_filter", x[0], size=(1, 3), origin=(0, -1), axes=(1, 0))
    check_exact("rank_filter", x, 1, footprint=np.ones((2, 1, 3), bool), origin=(0, 0, 1),
                axes=(2, 0, 1))
    # ... except on the separable min/max path, where size[i] and origin[i] go to axes[i]
    check_exact("minimum_filter", x, size=(4, 1, 2), origin=(1, 0, -1), axes=(2, 0, 1))
    check_exact("grey_dilation", x, size=(2, 3), origin=(0, 1), axes=(2, 0))
    # some axes left out: the window's axes in increasing order, origin i on axes[i]
    check_exact("percentile_filter", x, 40, size=(2, 4), origin=(1, 0), axes=(2, 0))


def test_rank_1d_footprints_follow_the_definition():
    # scipy 1.17's fast 1-D path ignores a footprint's holes (and misreads windows larger
    # than the input); its n-D path does not: compare against that on a (1, n) image
    x = rand((17,), np.uint8)
    fp = np.array([True, False, True, True])
    for fn, args in [("median_filter", ()), ("rank_filter", (1,)), ("percentile_filter", (50,))]:
        for mode in ("wrap", "reflect", "mirror", "constant"):
            got = getattr(ndi, fn)(x, *args, footprint=fp, origin=1, mode=mode, cval=5)
            want = getattr(sn, fn)(x[None], *args, footprint=fp[None], origin=(0, 1), mode=mode,
                                   cval=5)[0]
            assert np.array_equal(got, want), (fn, mode)


# --- binary morphology ----------------------------------------------------------------------

BINARY = ["binary_erosion", "binary_dilation", "binary_opening", "binary_closing"]


def rand_mask(shape, p=0.55, dtype=bool):
    return (np.random.default_rng(next(_seed)).random(shape) < p).astype(dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("fn", BINARY + ["binary_fill_holes"])
def test_binary(fn, shape):
    nd = len(shape)
    x = rand_mask(shape)
    rng = np.random.default_rng(9)
    structs = [None] + [ndi.generate_binary_structure(nd, c) for c in range(1, nd + 1)]
    structs.append(rng.random((2, 3, 2)[:nd]) > 0.3)
    for st in structs:
        if fn == "binary_fill_holes":
            check_exact(fn, x, structure=st)
            continue
        s = ndi.generate_binary_structure(nd, 1) if st is None else np.asarray(st)
        centre = bool(s[tuple(n // 2 for n in s.shape)])
        for it, bv in [(1, 0), (2, 1), (-1, 0), (0, 1)]:
            if it < 1 and not centre:
                # until-stable with a false centre can oscillate forever (scipy hangs): refused
                with pytest.raises(kiln.InvalidInputError, match="oscillate forever"):
                    getattr(ndi, fn)(x, structure=st, iterations=it, border_value=bv)
                continue
            check_exact(fn, x, structure=st, iterations=it, border_value=bv)
    if fn != "binary_fill_holes":
        check_exact(fn, x, origin=[-1, 0, 1][:nd])
        check_exact(fn, x, axes=(0,))
    if nd > 1:
        check_exact(fn, x, structure=np.ones((3, 2), bool), origin=(1, -1), axes=(0, nd - 1))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64, np.int32])
def test_binary_any_dtype_is_nonzero(dtype):
    x = rand_mask((31, 64), dtype=dtype) * dtype(3)
    for fn in BINARY + ["binary_fill_holes"]:
        check_exact(fn, x)
    assert ndi.binary_erosion(kiln.asarray(x.astype(np.uint8))).dtype == "uint8"


def test_generate_binary_structure():
    for rank in range(0, 5):
        for conn in range(0, 5):
            got = ndi.generate_binary_structure(rank, conn)
            want = sn.generate_binary_structure(rank, conn)
            assert got.dtype == bool and np.array_equal(got, want), (rank, conn)


# --- what kiln refuses ----------------------------------------------------------------------

def refused(param, fn, *args, **kw):
    with pytest.raises(kiln.InvalidInputError) as e:
        fn(*args, **kw)
    assert param in str(e.value), f"{param!r} not named in: {e.value}"


def test_unsupported_parameters_raise_naming_them():
    x = rand((7, 5))
    refused("output", ndi.median_filter, x, 3, output=np.empty((5, 7), np.float32))
    refused("output", ndi.median_filter, x, 3, output=np.float16)
    refused("output", ndi.gaussian_filter, kiln.asarray(x), 1.0, output=np.uint16)
    refused("output", ndi.gaussian_filter, kiln.asarray(x.astype(np.uint8)), 1.0, output=np.int16)
    refused("output", ndi.gaussian_filter, x, 1.0, output="not a dtype")
    refused("output", ndi.gaussian_filter, x, 1.0, output=kiln.asarray(x))
    refused("output", ndi.sobel, kiln.asarray(x), output=np.empty_like(x))
    refused("output", ndi.sobel, x, output=np.empty_like(x), out_type="kiln")
    ro = np.empty_like(x)
    ro.flags.writeable = False
    refused("output", ndi.laplace, x, output=ro)
    refused("output", ndi.binary_erosion, x > 0, output=np.complex64)
    # tensors, integer data: a cval outside the type's range (scipy's paths disagree there),
    # and a fractional cval with a wider output (NumPy inputs follow each of scipy's paths)
    t8 = kiln.asarray(x.astype(np.uint8))
    refused("cval", ndi.median_filter, t8, 3, mode="constant", cval=-3)
    refused("cval", ndi.grey_erosion, kiln.asarray(x.astype(np.uint16)), size=3, mode="constant",
            cval=70000)
    refused("cval", ndi.minimum_filter, t8, 3, mode="constant", cval=0.5, output=np.float32)
    # tensors: a structure adds values in the input's type, so no wider output
    refused("output", ndi.grey_erosion, t8, structure=np.ones((3, 3)), output=np.float32)
    refused("mask", ndi.binary_dilation, x > 0, mask=np.ones((5, 7), bool))
    refused("mask", ndi.binary_opening, kiln.asarray((x > 0).astype(np.uint8)),
            mask=np.ones(x.shape, bool))
    # until-stable with a mask follows the facade's rule: the centre (shifted) must be true
    refused("oscillate", ndi.binary_erosion, x > 0, iterations=-1, origin=-1,
            mask=np.ones(x.shape, bool))
    assert np.array_equal(ndi.binary_erosion(x > 0, brute_force=True), sn.binary_erosion(x > 0))
    refused("mode", ndi.gaussian_filter, kiln.asarray(x), 1.0, mode=["reflect", "wrap"])
    refused("mode", ndi.correlate, x, np.ones((2, 2)), mode=["reflect", "wrap"])
    refused("mode", ndi.uniform_filter, x, mode="bogus")
    refused("foo", ndi.gaussian_laplace, x, 1.0, foo=1)
    refused("dtype", ndi.median_filter, kiln.asarray(x.astype(np.float64)), 3)
    refused("dtype", ndi.gaussian_filter, x.astype(np.float16), 1.0)
    refused("axes", ndi.median_filter, rand((2, 3, 4, 5)), 3)
    refused("axes", ndi.gaussian_filter, kiln.asarray(rand((2, 3, 4, 5))), 1.0, axes=(1, 3))
    refused("axes", ndi.sobel, kiln.asarray(rand((2, 3, 4, 5))))
    refused("structure", ndi.grey_erosion, kiln.asarray(x), structure=np.ones(3), axes=(0,))
    refused("axes", ndi.gaussian_gradient_magnitude, kiln.asarray(x), 1.0, axes=(0,))
    refused("axes", ndi.grey_dilation, kiln.asarray(x), footprint=np.eye(3, dtype=bool), axes=(1, 0))
    refused("out_type", ndi.sobel, x, out_type="torch")
    refused("size", ndi.median_filter, x)
    refused("axes", ndi.uniform_filter, x, axes=(0, 0))
    # and the facade's own checks come through as InvalidInputError
    refused("origin", ndi.median_filter, x, 3, origin=2)
    refused("rank", ndi.rank_filter, x, 9, size=3)


def test_numpy_linear_beyond_the_float32_plan_is_scipy_exact():
    """float64, integer outputs, a mode per axis, more than 3 axes: scipy's results."""
    x = rand((31, 64), np.float64)
    y = ndi.gaussian_filter(x, 2.0)
    assert y.dtype == np.float64 and np.array_equal(y, sn.gaussian_filter(x, 2.0))
    x4 = rand((2, 3, 4, 5))
    for fn, args, kw in [("gaussian_filter", (1.0,), {"axes": (1, 3)}), ("sobel", (), {}),
                         ("gaussian_filter", (1.0,), {"mode": ["reflect", "wrap", "nearest", "constant"]}),
                         ("gaussian_gradient_magnitude", (1.0,), {"axes": (0,)})]:
        assert np.array_equal(getattr(ndi, fn)(x4, *args, **kw), getattr(sn, fn)(x4, *args, **kw))
    assert np.array_equal(ndi.gaussian_filter(x4, 1.0, output=np.uint16),
                          sn.gaussian_filter(x4, 1.0, output=np.uint16))


# --- output= ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(17,), (7, 5), (31, 64), (9, 10, 11)])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.int32, np.float32,
                                   np.float64])
@pytest.mark.parametrize("out", [np.float32, np.float64])
def test_linear_output_dtype_float(shape, dtype, out):
    """A float output= from any real input: scipy's result (the float32 plan only where input
    and output are float32, within its bound)."""
    x = rand(shape, dtype)
    if dtype == np.int32:
        x = (x % 5000).astype(np.int32) - 2500  # within float32's exact integers
    for fn, args, kw in [("gaussian_filter", (1.3,), {}), ("uniform_filter", (3,), {}),
                         ("sobel", (), {"axis": 0}), ("correlate1d", ([0.5, -1.0, 2.0],), {})]:
        got = getattr(ndi, fn)(x, *args, output=out, **kw)
        want = getattr(sn, fn)(x.astype(np.float64), *args, **kw)
        assert isinstance(got, np.ndarray) and got.dtype == out and got.shape == x.shape
        x32 = x.astype(np.float32)
        tol = ndi._tolerance(float(np.abs(x32).max()), getattr(ndi, fn), x32, *args, **kw)
        tol += 1e-6 * float(np.abs(want).max())
        err = float(np.abs(got.astype(np.float64) - want).max())
        assert err <= tol, f"{fn} {dtype.__name__}->{out.__name__} {shape}: {err} > {tol}"
        ref = getattr(sn, fn)(x, *args, output=out, **kw)
        if dtype == np.float32 and out == np.float32 and fn != "uniform_filter":
            assert float(np.abs(got.astype(np.float64) - ref).max()) <= 2 * tol + 1e-6
        else:
            np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype,out", [(np.uint8, np.uint16), (np.uint8, np.float32),
                                       (np.uint16, np.float64), (np.float32, np.float64),
                                       (np.uint8, np.int32)])
def test_rank_and_grey_output_dtype_is_exact(dtype, out):
    """The values selected in the input's type, converted exactly. Compared with scipy's
    result in the input's type, converted: scipy 1.17's own 1-D rank path returns wrong
    values for float32 input with output=np.float64 (numbers unrelated to the input),
    while its n-D path agrees with the conversion."""
    for shape in [(17,), (7, 5), (9, 10, 11)]:
        x = rand(shape, dtype)
        for fn, args, kw in [("median_filter", (3,), {}), ("grey_erosion", (), {"size": 2}),
                             ("maximum_filter", (), {"size": 3, "mode": "constant", "cval": 7}),
                             ("percentile_filter", (30,), {"size": 3})]:
            got = getattr(ndi, fn)(x, *args, output=out, **kw)
            want = getattr(sn, fn)(x, *args, **kw).astype(out)
            assert got.dtype == want.dtype and np.array_equal(got, want), (fn, shape)
            if len(shape) > 1:
                assert np.array_equal(got, getattr(sn, fn)(x, *args, output=out, **kw))


@pytest.mark.parametrize("out", [bool, np.uint8, np.float32, np.int64])
def test_binary_output_dtype_and_array(out):
    x = rand((31, 64)) > 0
    got = ndi.binary_dilation(x, output=out)
    want = sn.binary_dilation(x, output=out)  # scipy gives bool whatever the dtype
    assert got.dtype == want.dtype and np.array_equal(got, want)
    arr = np.full(x.shape, 9, dtype=out)
    ref = np.full(x.shape, 9, dtype=out)
    assert ndi.binary_opening(x, output=arr) is arr
    sn.binary_opening(x, output=ref)
    assert np.array_equal(arr, ref)


@pytest.mark.parametrize("fn,args", [("gaussian_filter", (2.0,)), ("median_filter", (3,)),
                                     ("grey_closing", ((3, 3),)), ("laplace", ())])
def test_output_array_is_filled_and_returned(fn, args):
    x = rand((31, 64), np.uint8)
    for out_dtype in [np.uint8, np.float32]:
        arr = np.full(x.shape, 3, dtype=out_dtype)
        r = getattr(ndi, fn)(x, *args, output=arr)
        assert r is arr
        assert np.array_equal(arr, getattr(ndi, fn)(x, *args, output=out_dtype))
        # a strided view of a larger array is written in place too
        big = np.zeros((31, 128), dtype=out_dtype)
        r = getattr(ndi, fn)(x, *args, output=big[:, ::2])
        assert np.array_equal(big[:, ::2], arr) and not big[:, 1::2].any()


def test_output_may_be_the_input():
    x = rand((31, 64))
    want = ndi.gaussian_filter(x, 2.0)
    assert ndi.gaussian_filter(x, 2.0, output=x) is x
    assert np.array_equal(x, want)


@pytest.mark.parametrize("fn", ["binary_erosion", "binary_dilation", "binary_opening",
                                "binary_closing"])
def test_binary_mask_equals_scipy(fn):
    """mask=: only the elements under the mask change, at every step (one native call a
    step, the select in NumPy)."""
    rng = np.random.default_rng(next(_seed))
    for shape in [(17,), (7, 5), (31, 40), (6, 7, 8)]:
        nd = len(shape)
        for it, bv, conn in itertools.product([1, 3, -1], [0, 1], range(1, nd + 1)):
            st = sn.generate_binary_structure(nd, conn)
            x = rng.random(shape) < 0.5
            m = rng.random(shape) < 0.6
            kw = dict(structure=st, iterations=it, mask=m, border_value=bv)
            got = getattr(ndi, fn)(x, **kw)
            want = getattr(sn, fn)(x, **kw)
            assert got.dtype == bool and np.array_equal(got, want), (fn, shape, it, bv, conn)
    # origin, and a mask of another dtype (non-zero is true)
    x = rng.random((31, 40)) < 0.5
    m = (rng.random((31, 40)) < 0.6).astype(np.float32)
    got = getattr(ndi, fn)(x, iterations=2, mask=m, origin=(1, -1))
    assert np.array_equal(got, getattr(sn, fn)(x, iterations=2, mask=m != 0, origin=(1, -1)))


FOLDED = [
    ("gaussian_filter", (1.5,), {"axes": (2, 3)}, False),
    ("gaussian_filter", (1.5,), {"axes": (1,)}, False),
    ("uniform_filter", (3,), {"axes": (3, 2)}, False),
    ("gaussian_filter1d", (1.2,), {"axis": 1}, False),
    ("correlate1d", ([1.0, 2.0, -1.0],), {"axis": 0}, False),
    ("uniform_filter1d", (4,), {"axis": -2}, False),
    ("correlate", (np.full((3, 2), 0.25),), {"axes": (2, 3)}, False),
    ("laplace", (), {"axes": (2, 3)}, False),
    ("median_filter", (), {"size": 3, "axes": (2, 3)}, True),
    ("median_filter", (), {"size": 4, "axes": (1,)}, True),
    ("minimum_filter1d", (3,), {"axis": 1}, True),
    ("grey_dilation", (), {"size": (3, 2), "axes": (2, 3)}, True),
]


@pytest.mark.parametrize("fn,args,kw,exact", FOLDED, ids=[f"{f[0]}-{i}" for i, f in enumerate(FOLDED)])
@pytest.mark.parametrize("shape", [(2, 3, 17, 19), (3, 1, 2, 9, 8)])
def test_more_than_3_axes_fold_into_a_batch(fn, args, kw, exact, shape):
    """(n, c, h, w) with axes=(2, 3), one axis, or axis=: folded by a reshape, equal to
    scipy on the whole array."""
    if len(shape) == 5 and "axes" in kw and len(kw["axes"]) == 2:
        kw = dict(kw, axes=(3, 4))
    for dtype in [np.float32, np.uint8]:
        x = rand(shape, dtype)
        got = getattr(ndi, fn)(x, *args, **kw)
        assert got.shape == x.shape and got.dtype == x.dtype
        if exact or dtype != np.float32 or fn.startswith("uniform"):
            assert np.array_equal(got, getattr(sn, fn)(x, *args, **kw)), (fn, kw)
        else:
            want = getattr(sn, fn)(x, *args, **kw)
            assert float(np.abs(got - want).max()) <= 1e-5 * max(1.0, float(np.abs(want).max()))


def test_more_than_3_axes_binary_mask_output_and_tensors():
    x = rand((2, 3, 17, 19)) > 0
    m = rand(x.shape) > -1
    got = ndi.binary_dilation(x, iterations=2, mask=m, axes=(2, 3))
    assert np.array_equal(got, sn.binary_dilation(x, iterations=2, mask=m, axes=(2, 3)))
    assert np.array_equal(ndi.binary_fill_holes(x, axes=(2, 3)), sn.binary_fill_holes(x, axes=(2, 3)))
    y = rand((2, 3, 17, 19))
    out = np.zeros(y.shape, np.float64)
    assert ndi.gaussian_filter(y, 1.0, axes=(2, 3), output=out) is out
    t = ndi.median_filter(kiln.asarray(y), size=3, axes=(2, 3))
    assert isinstance(t, kiln.Tensor) and t.shape == y.shape
    assert np.array_equal(t.numpy(), sn.median_filter(y, size=3, axes=(2, 3)))


# --- morphology built from the others (scipy's own compositions) ---------------------------

COMPOSED = ["white_tophat", "black_tophat", "morphological_gradient", "morphological_laplace"]


@pytest.mark.parametrize("fn", COMPOSED)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32], ids=lambda d: d.__name__)
def test_composed_grey_morphology_equals_scipy(fn, dtype):
    """Bit for bit, including the uint8 wrap of the morphological Laplace."""
    rng = np.random.default_rng(next(_seed))
    for shape in [(17,), (31, 40), (6, 7, 8)]:
        x = rand(shape, dtype)
        nd = len(shape)
        for kw in [{"size": 3}, {"footprint": sn.generate_binary_structure(nd, 1)},
                   {"structure": rng.integers(0, 3, (3,) * nd).astype(float)},
                   {"size": (2,) * nd, "mode": "constant", "cval": 5}]:
            got = getattr(ndi, fn)(x, **kw)
            want = getattr(sn, fn)(x, **kw)
            assert got.dtype == want.dtype and np.array_equal(got, want), (fn, shape, kw)
            out, ref = np.zeros(shape), np.zeros(shape)
            assert getattr(ndi, fn)(x, output=out, **kw) is out
            getattr(sn, fn)(x, output=ref, **kw)
            assert np.array_equal(out, ref), (fn, shape, kw, "output array")


def test_composed_morphology_refusals_and_dtypes():
    x = rand((31, 40), np.uint8)
    # scipy ignores an output dtype for the gradient and Laplace, and so does kiln on NumPy
    # input (its code is scipy's); on other arrays kiln refuses one that differs
    got = ndi.morphological_gradient(x, size=3, output=np.float32)
    assert got.dtype == np.uint8
    assert np.array_equal(got, sn.morphological_gradient(x, size=3, output=np.float32))
    assert ndi.morphological_gradient(x, size=3, output=np.uint8).dtype == np.uint8
    # the top-hats honour it, as scipy's do
    got = ndi.white_tophat(x, size=3, output=np.float32)
    assert got.dtype == np.float32
    assert np.array_equal(got, sn.white_tophat(x, size=3, output=np.float32))
    refused("tensor", ndi.black_tophat, kiln.asarray(x), size=3)


def test_binary_propagation_and_hit_or_miss_equal_scipy():
    rng = np.random.default_rng(next(_seed))
    for shape in [(17,), (31, 40), (6, 7, 8)]:
        nd = len(shape)
        for _ in range(5):
            x = rng.random(shape) < 0.4
            m = rng.random(shape) < 0.7
            assert np.array_equal(ndi.binary_propagation(x, mask=m), sn.binary_propagation(x, mask=m))
            assert np.array_equal(ndi.binary_propagation(x), sn.binary_propagation(x))
            s1 = rng.random((3,) * nd) < 0.5
            s2 = rng.random((3,) * nd) < 0.4
            for kw in [{}, {"structure1": s1}, {"structure1": s1, "structure2": s2},
                       {"structure1": s1, "structure2": s2, "origin1": -1, "origin2": 1}]:
                got = ndi.binary_hit_or_miss(x, **kw)
                want = sn.binary_hit_or_miss(x, **kw)
                assert got.dtype == want.dtype and np.array_equal(got, want), (shape, kw)


def test_iterate_structure_equals_scipy():
    for nd in (1, 2, 3):
        for conn in (1, 2):
            st = sn.generate_binary_structure(nd, conn)
            for it in (1, 2, 3):
                assert np.array_equal(ndi.iterate_structure(st, it), sn.iterate_structure(st, it))
            got, want = ndi.iterate_structure(st, 3, origin=1), sn.iterate_structure(st, 3, origin=1)
            assert np.array_equal(got[0], want[0]) and list(got[1]) == list(want[1])
