"""kiln.ndimage's rank filters, grey morphology and masked binary ops against scipy.ndimage on
every dtype scipy takes, on random inputs of odd sizes: the results must be scipy's bit for
bit (same dtype, same bytes; NaN where scipy has NaN)."""

import numpy as np
import pytest

from kiln import ndimage as ndi

sn = pytest.importorskip("scipy.ndimage")

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64"]


def _data(dtype, shape, seed, special=False):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == bool:
        return rng.random(shape) < 0.5
    if dt.kind == "f":
        x = (rng.standard_normal(shape) * 50).astype(dt)
        if special:
            flat = x.reshape(-1)
            flat[rng.integers(0, flat.size, max(1, flat.size // 9))] = np.nan
            flat[rng.integers(0, flat.size, max(1, flat.size // 9))] = -0.0
            flat[rng.integers(0, flat.size, max(1, flat.size // 9))] = 0.0
        return x
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


def _same(a, b):
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.dtype.kind == "f":
        assert np.array_equal(a, b, equal_nan=True), np.argwhere(~((a == b) | (np.isnan(a) & np.isnan(b))))[:5]
        assert np.array_equal(np.signbit(a), np.signbit(b))
    else:
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


FOOTPRINT = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 1]], dtype=bool)

CASES = [
    ("median_filter", {"size": 3}),
    ("median_filter", {"footprint": FOOTPRINT, "mode": "mirror"}),
    ("minimum_filter", {"size": (3, 4), "mode": "constant", "cval": 7}),
    ("maximum_filter", {"size": 5, "mode": ("wrap", "nearest")}),
    ("minimum_filter", {"footprint": FOOTPRINT, "origin": (1, -1)}),
    ("rank_filter", {"rank": -2, "size": 3, "mode": "nearest"}),
    ("percentile_filter", {"percentile": 30, "footprint": FOOTPRINT}),
    ("grey_erosion", {"size": (3, 2)}),
    ("grey_dilation", {"footprint": FOOTPRINT, "mode": "constant"}),
    ("grey_opening", {"size": 3}),
    ("grey_closing", {"footprint": FOOTPRINT}),
    ("grey_dilation", {"structure": np.array([[0, 1, 0], [2, 3, 1], [0, 1, 0]], float)}),
    ("grey_erosion", {"structure": np.array([[1, 2], [0, 4]], float), "mode": "nearest"}),
    ("white_tophat", {"size": 3}),
    ("black_tophat", {"footprint": FOOTPRINT}),
    ("morphological_gradient", {"size": 3}),
    ("morphological_laplace", {"size": (3, 3)}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fname,kw", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_matches_scipy(fname, kw, dtype):
    x = _data(dtype, (13, 17), 1)
    if dtype == "bool" and fname in ("morphological_gradient", "morphological_laplace"):
        # numpy refuses bool subtraction, in scipy's code and kiln's alike
        with pytest.raises(TypeError):
            getattr(sn, fname)(x, **kw)
        with pytest.raises(TypeError):
            getattr(ndi, fname)(x, **kw)
        return
    with np.errstate(all="ignore"):
        want = getattr(sn, fname)(x, **kw)
        got = getattr(ndi, fname)(x, **kw)
    _same(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fname,kw", CASES[:11], ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES[:11])])
def test_nan_and_signed_zero_as_scipy(fname, kw, dtype):
    x = _data(dtype, (11, 9), 2, special=True)
    _same(getattr(ndi, fname)(x, **kw), getattr(sn, fname)(x, **kw))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (31,), (7, 1, 5), (2, 3, 4, 5)])
def test_shapes_and_1d(dtype, shape):
    x = _data(dtype, shape, 3)
    more = {"axes": (1, 3)} if len(shape) == 4 else {}
    for fname, kw in [("median_filter", {"size": 3, **more}), ("minimum_filter1d", {"size": 4}),
                      ("maximum_filter", {"size": 2}), ("rank_filter", {"rank": 1, "size": 3, **more}),
                      ("grey_closing", {"size": (2, 3), "axes": (0, len(shape) - 1)})]:
        if len(shape) == 1 and "axes" in kw:
            continue
        _same(getattr(ndi, fname)(x, **kw), getattr(sn, fname)(x, **kw))


@pytest.mark.parametrize("out", ["float64", "int16", "uint8", "float32"])
@pytest.mark.parametrize("dtype", ["int64", "uint16", "float64", "int8"])
def test_output_dtypes(dtype, out):
    x = _data(dtype, (9, 10), 4)
    st = np.array([[1, -2, 0], [3, 0, 1], [0, 2, 1]], float)
    for fname, kw in [("minimum_filter", {"size": 3}), ("median_filter", {"size": 3}),
                      ("grey_dilation", {"structure": st}), ("maximum_filter", {"footprint": FOOTPRINT})]:
        with np.errstate(all="ignore"):
            want = getattr(sn, fname)(x, output=np.dtype(out), **kw)
            got = getattr(ndi, fname)(x, output=np.dtype(out), **kw)
            arr = np.zeros(x.shape, out)
            ret = getattr(ndi, fname)(x, output=arr, **kw)
        _same(got, want)
        assert ret is arr
        _same(arr, want)


def test_out_of_range_cval_as_scipy():
    x = _data("uint8", (8, 9), 5)
    for cval in (-3, 300, 2.5):
        for fname in ("maximum_filter", "minimum_filter", "median_filter"):
            kw = {"size": 3, "mode": "constant", "cval": cval}
            _same(getattr(ndi, fname)(x, **kw), getattr(sn, fname)(x, **kw))


def test_big_endian_and_errors_as_scipy():
    x = np.arange(30, dtype=">f8").reshape(5, 6)
    _same(ndi.median_filter(x, 3), sn.median_filter(x, 3))
    with pytest.raises(RuntimeError):
        ndi.median_filter(np.ones((4, 4)), 3, mode="bogus")
    with pytest.raises(RuntimeError):
        ndi.rank_filter(np.ones((4, 4)), 10, size=3)
    with pytest.raises(TypeError):
        ndi.minimum_filter(np.ones((4, 4), complex), 3)
    with pytest.raises(ValueError):
        ndi.minimum_filter(np.ones((4, 4)), 3, origin=2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fname", ["binary_erosion", "binary_dilation", "binary_opening",
                                   "binary_closing", "binary_propagation"])
def test_masked_binary_ops_every_dtype(fname, dtype):
    rng = np.random.default_rng(6)
    x = (rng.random((16, 16)) < 0.4).astype(dtype)
    mask = rng.random((16, 16)) < 0.7
    got = getattr(ndi, fname)(x, mask=mask)
    want = getattr(sn, fname)(x, mask=mask)
    assert got.shape == (16, 16) and got.dtype == bool
    assert np.array_equal(got, want)


# --- linear filters: NumPy inputs on the CPU, scipy's results for every dtype ---------------
#
# scipy sums in double and stores each 1-D pass into the output's dtype (integers truncate and
# wrap between passes, float32 rounds), so its results are deterministic: kiln's must be the
# same bytes for every integer and float64 output, and within a few float32 ulps at most where
# float32 is involved (they are equal in practice; the tolerance only guards a different
# rounding of the same double in NumPy's own float32 additions).

LIN_DTYPES = DTYPES + ["complex64", "complex128"]
MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-wrap", "grid-constant",
         "grid-mirror"]


def _lin_data(dtype, shape, seed):
    dt = np.dtype(dtype)
    if dt.kind == "c":
        re = _lin_data("float64", shape, seed)
        im = _lin_data("float64", shape, seed + 1)
        return (re + 1j * im).astype(dt)
    if dt.kind in "iu" and dt.itemsize == 8:
        # beyond 2^53 too: the double conversion rounds as scipy's does
        return _data(dtype, shape, seed)
    return _data(dtype, shape, seed)


def _lin_same(a, b):
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape
    if a.dtype.kind in "fc" and a.dtype.itemsize <= 8 and a.dtype != np.float64:
        np.testing.assert_allclose(a, b, rtol=2e-7, atol=1e-30, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, b)


def _both(fname, x, *args, **kw):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # sqrt of a wrapped negative, as scipy
        want = getattr(sn, fname)(x, *args, **kw)
        got = getattr(ndi, fname)(x, *args, **kw)
    assert type(got) is np.ndarray
    _lin_same(got, want)


LIN_CASES = [
    ("correlate1d", ([1.0, -2.5, 3.0],), {"axis": 0}),
    ("correlate1d", ([0.5, 1.5],), {"origin": -1, "mode": "wrap"}),
    ("convolve1d", ([1.0, 2.0, 1.0, -3.0],), {"axis": -1, "mode": "constant", "cval": 3.5}),
    ("correlate", (np.arange(12.0).reshape(3, 4) - 5.5,), {"origin": (1, -1)}),
    ("convolve", (np.array([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]),),
     {"mode": "mirror"}),
    ("gaussian_filter", (1.3,), {}),
    ("gaussian_filter", ((0.8, 2.0),), {"order": (1, 0), "mode": ("wrap", "nearest")}),
    ("gaussian_filter", (1.0,), {"order": 2, "radius": (2, 3), "mode": "constant", "cval": -2}),
    ("gaussian_filter1d", (2.2,), {"axis": 0, "order": 1, "truncate": 2.0}),
    ("gaussian_laplace", (1.1,), {"mode": ("reflect", "wrap")}),
    ("gaussian_gradient_magnitude", (0.9,), {"mode": "mirror"}),
    ("uniform_filter", ((3, 4),), {"origin": (0, 1), "mode": ("constant", "mirror")}),
    ("uniform_filter1d", (5,), {"axis": 0, "mode": "nearest"}),
    ("sobel", (), {"axis": 0, "mode": ("wrap", "constant")}),
    ("prewitt", (), {"axis": -1}),
    ("laplace", (), {"mode": ("nearest", "reflect")}),
]


@pytest.mark.parametrize("fname,args,kw", LIN_CASES, ids=lambda v: v if isinstance(v, str) else None)
@pytest.mark.parametrize("dtype", LIN_DTYPES)
def test_linear_matches_scipy(fname, args, kw, dtype):
    if dtype == "bool" and fname in ("gaussian_gradient_magnitude", "laplace", "gaussian_laplace"):
        pytest.skip("numpy refuses the boolean add/multiply scipy's combination does")
    _both(fname, _lin_data(dtype, (13, 18), 3), *args, **kw)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["int16", "uint32", "float64", "complex128"])
def test_linear_every_mode(mode, dtype):
    x = _lin_data(dtype, (9, 11), 5)
    for fname, args, kw in [("gaussian_filter", (1.7,), {}), ("uniform_filter", (4,), {}),
                            ("correlate", (np.ones((2, 3)),), {}), ("sobel", (), {}),
                            ("correlate1d", ([1.0, 0.0, -1.0, 2.0, 1.0],), {})]:
        _both(fname, x, *args, mode=mode, cval=1.25, **kw)


@pytest.mark.parametrize("out", ["int8", "uint8", "int16", "uint16", "int32", "int64", "uint64",
                                 "float32", "float64"])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_linear_integer_and_float_outputs(dtype, out):
    """Integer outputs truncate and wrap between the passes, as scipy stores each pass."""
    x = _lin_data(dtype, (15, 12), 7)
    for fname, args in [("sobel", ()), ("prewitt", ()), ("gaussian_filter", (1.5,)),
                        ("gaussian_laplace", (1.2,)), ("laplace", ()), ("uniform_filter", (3,)),
                        ("correlate", (np.array([[1.0, -2.0], [3.5, 0.25]]),))]:
        _both(fname, x, *args, output=np.dtype(out))
    y = np.full(x.shape, 7, dtype=out)
    r = ndi.gaussian_filter(x, 1.5, output=y, order=(0, 2))
    assert r is y
    _lin_same(y, sn.gaussian_filter(x, 1.5, output=np.dtype(out), order=(0, 2)))


@pytest.mark.parametrize("shape", [(7,), (1, 9), (5, 1, 3), (3, 4, 2, 5), (0, 4)])
def test_linear_shapes(shape):
    x = _lin_data("float64", shape, 9)
    for fname, args in [("gaussian_filter", (1.2,)), ("uniform_filter", (3,)), ("sobel", ()),
                        ("laplace", ()), ("correlate", (np.ones((2,) * len(shape)),)),
                        ("gaussian_gradient_magnitude", (1.0,))]:
        _both(fname, x, *args)


def test_linear_complex_weights_and_outputs():
    x = _lin_data("complex64", (10, 9), 11)
    w = np.array([1 + 2j, -0.5j, 3.0])
    _both("correlate1d", x, w, axis=0)
    _both("convolve1d", x.real.copy(), w, mode="constant")
    k = np.array([[1 - 1j, 2], [0.5j, -1]])
    _both("correlate", x, k)
    _both("convolve", x.astype(np.complex128), k, mode="wrap", cval=1 + 1j)
    _both("gaussian_filter", x, 1.0, output=np.complex128)
    _both("uniform_filter", x, 3, cval=2 - 1j, mode="constant")


def test_linear_axes_and_errors_as_scipy():
    x = _lin_data("float64", (6, 7, 8), 13)
    _both("gaussian_filter", x, (1.0, 2.0), axes=(2, 0), mode=("wrap", "nearest"))
    _both("gaussian_gradient_magnitude", x, 1.0, axes=(0, 2))
    _both("gaussian_laplace", x, (1.0, 0.5), axes=(1, 2))
    _both("uniform_filter", x, (3, 2), axes=(0, 1))
    _both("correlate", x, np.ones((3, 2)), axes=(0, 2), origin=(1, 0))
    # big-endian data gives a native-endian result, as scipy's (the output dtype by name)
    _both("sobel", x.astype(">f8"))
    _both("gaussian_filter", x.astype(">c16"), 1.0, output=np.complex64)
    _both("correlate1d", x.astype(">i4"), [1.0, 2.0], output=np.dtype(">i2"))
    xi = x.astype(np.int32)
    for call, exc in [
        (lambda m: m.correlate1d(xi, [1.0, 2.0], origin=2), ValueError),
        (lambda m: m.correlate1d(xi, [], axis=0), RuntimeError),
        (lambda m: m.gaussian_filter(xi, 1.0, mode="bogus"), RuntimeError),
        (lambda m: m.gaussian_filter(xi, (1.0, 2.0)), RuntimeError),
        (lambda m: m.correlate(xi, np.ones((3, 3, 3)), mode=("wrap",) * 3), RuntimeError),
        (lambda m: m.uniform_filter1d(xi, 0), RuntimeError),
        (lambda m: m.sobel(xi, axis=3), np.exceptions.AxisError),
        (lambda m: m.gaussian_filter(x.astype(np.complex64), 1.0, output=np.zeros(x.shape)),
         RuntimeError),
        (lambda m: m.gaussian_filter(x.astype(np.float16), 1.0), RuntimeError),
    ]:
        with pytest.raises(exc):
            call(sn)
        with pytest.raises(exc):
            call(ndi)
