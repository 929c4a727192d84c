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
