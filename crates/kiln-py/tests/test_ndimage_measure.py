"""kiln.ndimage's measurements (label, find_objects, value_indices and the statistics over
labels) against scipy.ndimage on fresh random inputs of odd sizes, 1-D to 4-D, every dtype
scipy takes: results must be scipy's exactly (same types, same dtypes, same values, NaN where
scipy has NaN), and errors of scipy's types."""

import warnings
import zlib

import numpy as np
import pytest

import kiln
from kiln import ndimage as ndi

sn = pytest.importorskip("scipy.ndimage")

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
DTYPES = ["bool"] + INTS + ["float32", "float64"]
SHAPES = [(1,), (17,), (1, 1), (5, 1), (7, 9), (13, 6), (3, 4, 5), (5, 1, 7), (2, 3, 3, 4)]


def _same(a, b, where=""):
    """``a`` is ``b``: same types all the way down, same dtypes and shapes, same values (NaN
    equal to NaN, the sign of zero compared)."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for (ka, va), (kb, vb) in zip(a.items(), b.items()):
            _same(ka, kb, f"{where} key")
            _same(va, vb, f"{where}[{ka}]")
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype, f"{where}: {a.dtype} != {b.dtype}"
        assert np.shape(a) == np.shape(b), where
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(np.ravel(a), np.ravel(b))):
                _same(x, y, f"{where}[{i}]")
        elif a.dtype.kind in "fc":
            assert np.array_equal(a, b, equal_nan=True), f"{where}: {a} != {b}"
            assert np.array_equal(np.signbit(np.real(a)), np.signbit(np.real(b))), where
        else:
            assert np.array_equal(a, b), f"{where}: {a} != {b}"
    else:
        assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"


def _both(fname, *args, **kwargs):
    """scipy's and kiln's ``fname`` on copies of the arguments: the results, or the exception
    types."""
    out = []
    for mod in (sn, ndi):
        a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
        k = {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in kwargs.items()}
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                out.append(getattr(mod, fname)(*a, **k))
            except Exception as e:  # noqa: BLE001  (compared below)
                out.append(e)
    s, k = out
    if isinstance(s, Exception):
        assert isinstance(k, type(s)), f"{fname}: scipy raised {s!r}, kiln gave {k!r}"
        return None
    assert not isinstance(k, Exception), f"{fname}: kiln raised {k!r}"
    _same(k, s, fname)
    return s


def _values(dtype, shape, rng, levels=6):
    dt = np.dtype(dtype)
    if dt == bool:
        return rng.random(shape) < 0.5
    v = rng.integers(0, levels, shape)
    if dt.kind in "iu":
        return v.astype(dt)
    if dt.kind == "c":
        return (v + 1j * rng.integers(0, 3, shape)).astype(dt)
    return (v * 0.75 - 1).astype(dt)


def _mask(shape, rng, percent):
    return rng.random(shape) < percent


def _structures(ndim, rng):
    out = [None] + [sn.generate_binary_structure(ndim, c) for c in range(1, ndim + 1)]
    m = rng.random((3,) * ndim) < 0.5
    out.append(m | m[(slice(None, None, -1),) * ndim])  # centrosymmetric
    return out


# --- label ------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
def test_label_matches_scipy(shape):
    rng = np.random.default_rng(sum(shape) * 31 + len(shape))
    for percent in (0.3, 0.55, 0.8):
        m = _mask(shape, rng, percent)
        for st in _structures(len(shape), rng):
            out, n = _both("label", m, st)
            assert out.dtype == np.int32 and n == out.max(initial=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_label_every_input_dtype(dtype):
    rng = np.random.default_rng(3)
    x = _values(dtype, (11, 13), rng, levels=2)
    if np.dtype(dtype).kind == "f":
        x[rng.random(x.shape) < 0.1] = np.nan  # NaN is non-zero
        x[rng.random(x.shape) < 0.1] = -0.0  # and -0.0 zero
    _both("label", x)
    _both("label", x, np.ones((3, 3)))


@pytest.mark.parametrize("dtype", INTS + ["float32", "float64"])
def test_label_output_dtype_and_array(dtype):
    rng = np.random.default_rng(4)
    m = _mask((9, 10), rng, 0.4)
    _both("label", m, output=dtype)
    _both("label", m, None, np.dtype(dtype))
    for order in ("C", "F"):
        o_s = np.zeros(m.shape, dtype, order=order)
        o_k = np.zeros(m.shape, dtype, order=order)
        assert sn.label(m, output=o_s) == ndi.label(m, output=o_k)
        _same(o_k, o_s)


def test_label_scan_order_follows_the_output_layout():
    rng = np.random.default_rng(5)
    m = _mask((6, 7, 5), rng, 0.5)
    views = [lambda o: o, lambda o: o[:, ::-1], lambda o: o.transpose(2, 0, 1).copy().transpose(1, 2, 0),
             lambda o: np.asfortranarray(o)]
    for v in views:
        o_s, o_k = v(np.zeros(m.shape, np.int64)), v(np.zeros(m.shape, np.int64))
        assert sn.label(m, output=o_s) == ndi.label(m, output=o_k)
        _same(o_k, o_s)


def test_label_in_place_and_overflow():
    x = np.array([[1, 0, 1, 1], [0, 0, 0, 1], [1, 1, 0, 0]], np.float32)
    y = x.copy()
    assert ndi.label(y, output=y) == sn.label(x, output=x)
    _same(y, x)
    # 200 separate points: int8 cannot hold them, uint8 can; int16 always
    m = np.zeros((20, 40), bool)
    m[::2, ::4] = True
    for dt in ("int8", "uint8", "int16", "float32"):
        _both("label", m, output=dt)
    m = np.zeros((40, 40), bool)
    m[::2, ::2] = True  # 400 points: uint8 overflows too
    for dt in ("uint8", "int8", "bool"):
        with pytest.raises(RuntimeError):
            ndi.label(m, output=dt)
        with pytest.raises(RuntimeError):
            sn.label(m, output=dt)
    # many provisional labels merging into one group (a comb joined at the bottom): scipy's
    # provisional labels overflow int8 but the one final label fits
    comb = np.zeros((10, 400), bool)
    comb[:, ::2] = True
    comb[-1] = True
    _both("label", comb, output=np.int8)
    _both("label", comb, output=np.bool_)


def test_label_bool_output_holds_one_label_at_most():
    # scipy stores labels 2..254 as raw bytes of a bool array; kiln refuses them as scipy does
    # beyond 254 (a bool holds 0 and 1)
    one = np.zeros((5, 6), bool)
    one[1:4, 2:5] = True
    _both("label", one, output=bool)
    o = np.zeros(one.shape, bool)
    assert ndi.label(one, output=o) == 1 and np.array_equal(o, one)
    two = one.copy()
    two[0, 0] = True
    with pytest.raises(RuntimeError, match="insufficient bit-depth"):
        ndi.label(two, output=bool)


def test_label_large_image_in_parallel_slabs():
    rng = np.random.default_rng(6)
    for shape, st in (((517, 301), np.ones((3, 3))), ((40, 63, 57), None)):
        m = _mask(shape, rng, 0.55)
        _both("label", m, st)


def test_label_zero_d_and_empty():
    for x in (np.ones(()), np.zeros(()), np.array(3.5), np.zeros((0, 4)), np.ones((3, 0, 2)),
              np.float16(2.0)):
        _both("label", x)
    for x in (np.ones(()), np.zeros((0, 4))):
        o_s, o_k = np.full(x.shape, 7, np.int16), np.full(x.shape, 7, np.int16)
        assert sn.label(x, output=o_s) == ndi.label(x, output=o_k)
        _same(o_k, o_s)


def test_label_errors_are_scipys():
    a = np.array([[1, 0, 1], [0, 0, 0], [1, 0, 1]])
    for args, kw in [
        ((a.astype(np.complex64),), {}),                        # TypeError
        ((a, np.ones((3, 3, 3))), {}),                          # RuntimeError: rank
        ((a, np.ones((3, 5))), {}),                             # ValueError: not 3 wide
        ((a, [[0, 1, 0], [0, 1, 1], [0, 0, 0]]), {}),           # AssertionError: not symmetric
        ((a,), {"output": np.zeros((3, 4), np.int32)}),         # ValueError: output shape
        ((a.astype(np.float16),), {}),                          # TypeError: dtype
        ((a,), {"output": np.float16}),                         # TypeError: output dtype
        ((a,), {"output": np.complex64}),                       # TypeError: output dtype
    ]:
        s = k = None
        try:
            sn.label(*args, **kw)
        except Exception as e:  # noqa: BLE001
            s = e
        try:
            ndi.label(*args, **kw)
        except Exception as e:  # noqa: BLE001
            k = e
        assert s is not None and isinstance(k, type(s)), (args, kw, s, k)
        assert isinstance(k, kiln.InvalidInputError), k


def test_label_reads_kiln_tensors_and_big_endian():
    rng = np.random.default_rng(7)
    m = _mask((8, 9), rng, 0.5).astype(np.float32)
    t = kiln.asarray(m)
    out, n = ndi.label(t)
    _same((out, n), sn.label(m))
    b = m.astype(">f4")
    _same(ndi.label(b), sn.label(m))


# --- find_objects and value_indices ----------------------------------------------------------

@pytest.mark.parametrize("dtype", INTS + ["bool", "float32", "float64"])
def test_find_objects_matches_scipy(dtype):
    rng = np.random.default_rng(8)
    for shape in SHAPES:
        lab = rng.integers(0, 6, shape)
        x = lab.astype(dtype) if dtype != "bool" else lab > 2
        if np.dtype(dtype).kind == "f":
            x = x + rng.choice([-0.5, 0.0, 0.4], shape).astype(dtype)  # scipy's v - 1, truncated
        for max_label in ([0, 2, 9] if dtype not in ("bool", "float32", "float64") else [2, 9]):
            _both("find_objects", x, max_label)
    _both("find_objects", sn.label(_mask((31, 29), rng, 0.5))[0])
    _both("find_objects", np.array(3, np.int64))
    _both("find_objects", np.zeros((0, 3), np.int64), 2)
    _both("find_objects", np.array([-1, -3]))
    _both("find_objects", np.array([1.0, 2.0]))            # TypeError: max_label a float
    _both("find_objects", np.array([1, 2], np.float16), 2)  # RuntimeError: dtype
    _both("find_objects", np.array([1, 2], np.complex64))  # TypeError


@pytest.mark.parametrize("dtype", INTS)
def test_value_indices_matches_scipy(dtype):
    rng = np.random.default_rng(9)
    for shape in SHAPES + [()]:
        x = rng.integers(0, 5, shape).astype(dtype)
        _both("value_indices", x)
        _both("value_indices", x, ignore_value=0)
        _both("value_indices", x, ignore_value=3.7)
    _both("value_indices", np.zeros((3, 0), dtype))
    _both("value_indices", np.zeros((3, 2), np.float32))  # ValueError
    if dtype.startswith("u"):
        _both("value_indices", np.zeros(3, dtype), ignore_value=-1)  # OverflowError


def test_value_indices_of_sparse_ids():
    # ids spread far wider than the element count (scipy runs out of memory on these)
    rng = np.random.default_rng(12)
    ids = np.array([-(2**62), -5, 2**40, 2**62], np.int64)
    x = ids[rng.integers(0, 4, (6, 7))]
    got = ndi.value_indices(x, ignore_value=-5)
    want = {v: np.nonzero(x == v) for v in np.unique(x) if v != -5}
    _same(got, want)


# --- watershed_ift -----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1,), (23,), (7, 9), (12, 5), (4, 5, 6), (3, 3, 2, 4)])
def test_watershed_ift_matches_scipy(shape):
    rng = np.random.default_rng(sum(shape) * 7 + len(shape))
    nd = len(shape)
    structures = [None, np.ones((3,) * nd, bool), rng.random((3,) * nd) < 0.5]  # any, as scipy
    for trial in range(6):
        levels = [2, 5, 40][trial % 3]  # few levels: many ties between markers
        dt = np.uint8 if trial % 2 else np.uint16
        x = rng.integers(0, levels, shape).astype(dt)
        mk = np.zeros(shape, np.int16)
        flat = mk.reshape(-1)
        n = max(1, flat.size // 6)
        flat[rng.integers(0, flat.size, n)] = rng.choice([-2, -1, 1, 2, 3, 300], n)
        for st in structures:
            _both("watershed_ift", x, mk, st)
            _both("watershed_ift", x, mk.astype(np.int8), st)  # 300 wraps in int8 markers
            for odt in (np.int8, np.int16, np.int32, np.int64):
                o_s, o_k = np.zeros(shape, odt), np.zeros(shape, odt)
                _same(ndi.watershed_ift(x, mk, st, o_k), sn.watershed_ift(x, mk, st, o_s))
                _same(o_k, o_s)


def test_watershed_ift_wide_markers_and_errors():
    x = np.zeros((3, 4), np.uint8)
    x[:, 1:3] = 200
    mk = np.zeros((3, 4), np.int64)
    mk[0, 3] = 5 * 10**10  # a C int keeps the low 32 bits (negative here: background)
    mk[2, 0] = -(10**10)
    _both("watershed_ift", x, mk)
    _both("watershed_ift", x, mk.astype(np.int32), None, np.int16)  # a dtype output is ignored
    _both("watershed_ift", np.array(3, np.uint8), np.array(1, np.int8))
    _both("watershed_ift", np.zeros((0, 3), np.uint8), np.zeros((0, 3), np.int8))
    m8 = mk.astype(np.int8)
    for args in [
        (x.astype(np.int16), m8),                                  # TypeError
        (x, m8.astype(np.uint8)),                                  # RuntimeError: markers
        (x, m8, None, np.zeros((3, 4), np.uint8)),                 # RuntimeError: output type
        (x, m8, None, np.zeros((3, 5), np.int16)),                 # RuntimeError: output shape
        (x, m8, np.ones((3, 3, 3))),                               # RuntimeError: rank
        (x, m8, np.ones((3, 5))),                                  # RuntimeError: not 3 wide
        (x, m8[:2]),                                               # RuntimeError: shapes
        (np.zeros((2,) * 8, np.uint8), np.zeros((2,) * 8, np.int8)),  # RuntimeError: rank > 7
    ]:
        _both("watershed_ift", *args)
        with pytest.raises(kiln.InvalidInputError):
            ndi.watershed_ift(*args)


# --- statistics over labels ------------------------------------------------------------------

STATS = ["sum", "sum_labels", "mean", "variance", "standard_deviation", "minimum", "maximum",
         "median", "minimum_position", "maximum_position", "extrema", "center_of_mass"]


def _labelings(shape, rng):
    """Labels taking each of scipy's paths: small ints (bin numbers), negative and large ints
    and uint64 (numpy.unique), floats, bools."""
    small = rng.integers(0, 4, shape)
    return [
        small,
        small.astype(np.int8),
        rng.integers(-2, 3, shape) * 50,
        small.astype(np.uint64),
        small.astype(np.float64) * 1.5,
        small > 1,
    ]


def _indices(labels):
    return [None, 1, 2, 99, [0, 1, 2, 3, 7], np.array([3, 1]), np.array([1.0, 2.0]),
            np.array(2), [float(v) for v in np.unique(labels)[:3]]]


@pytest.mark.parametrize("fname", STATS)
@pytest.mark.parametrize("dtype", DTYPES + ["float16", "complex64"])
def test_statistics_match_scipy(fname, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{fname} {dtype}".encode()))
    for shape in [(1,), (9,), (5, 7), (3, 4, 5)]:
        x = _values(dtype, shape, rng)
        _both(fname, x)
        for lab in _labelings(shape, rng):
            _both(fname, x, lab)
            for idx in _indices(lab):
                _both(fname, x, lab, idx)
        # labels broadcast against the input
        _both(fname, x, rng.integers(0, 3, shape[-1:]), [0, 1, 2])


def test_statistics_on_kiln_tensors_and_lists():
    rng = np.random.default_rng(10)
    x = rng.random((6, 5)).astype(np.float32)
    lab = rng.integers(0, 3, (6, 5))
    for fname in ("sum_labels", "mean", "maximum_position", "center_of_mass"):
        _same(getattr(ndi, fname)(kiln.asarray(x), lab, [1, 2]), getattr(sn, fname)(x, lab, [1, 2]))
        _both(fname, x.tolist(), lab.tolist(), [1, 2])


def test_histogram_and_labeled_comprehension():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 10, (7, 8))
    lab = rng.integers(0, 4, (7, 8))
    _both("histogram", x, 0, 10, 5)
    _both("histogram", x, 0, 10, 5, lab)
    _both("histogram", x, 0, 10, 5, lab, 2)
    _both("histogram", x, 0, 10, 5, lab, [1, 2, 9])
    _both("histogram", x.astype(np.float32), 1.5, 8.5, 7, lab, (3, 1))
    for pos in (False, True):
        f = (lambda v, p: float(v.sum() + p.max())) if pos else (lambda v: float(v.mean()))
        _both("labeled_comprehension", x, lab, [1, 2, 3, 8], f, np.float64, -1.0, pos)
        _both("labeled_comprehension", x, lab, 2, f, np.float32, 0, pos)
        _both("labeled_comprehension", x, lab, None, f, np.float64, 0, pos)
        _both("labeled_comprehension", x, None, None, f, np.float64, 0, pos)
    _both("labeled_comprehension", x, None, [1], np.sum, float, 0)          # ValueError
    _both("labeled_comprehension", x, lab, [1.5], np.sum, float, 0)         # ValueError
    _both("labeled_comprehension", x, lab[:3], [1], np.sum, float, 0)       # ValueError
