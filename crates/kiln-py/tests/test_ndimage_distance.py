"""kiln.ndimage's distance transforms (distance_transform_edt, _cdt and _bf) against
scipy.ndimage on fresh random masks of odd sizes, 1-D to 4-D: the distances and the indices
must be scipy's exactly (ties included, same dtypes and shapes), with every metric, sampling
as a scalar and per axis, every input dtype, the out arrays and the return flags, empty, 0-D,
all-background and all-foreground inputs; bad arguments raise scipy's exception types."""

import warnings
import zlib

import numpy as np
import pytest

import kiln
from kiln import ndimage as ndi

sn = pytest.importorskip("scipy.ndimage")

SHAPES = [(1,), (17,), (1, 1), (5, 1), (7, 9), (13, 6), (31, 29), (3, 4, 5), (5, 1, 7),
          (9, 11, 7), (2, 3, 3, 4), (3, 5, 4, 3)]
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64"]


def _same(a, b, where=""):
    """``a`` is ``b``: same types, dtypes, shapes and values (NaN equal to NaN)."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype, f"{where}: {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{where}: {a.shape} != {b.shape}"
        assert np.array_equal(a, b, equal_nan=True), f"{where}: differ at {np.argwhere(a != b)[:5]}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _both(fname, *args, **kwargs):
    """scipy's and kiln's ``fname`` on copies of the arguments: the results and the out arrays
    must be equal, or both raise (kiln an exception of scipy's type)."""
    out, arrays = [], []
    for mod in (sn, ndi):
        a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
        k = {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in kwargs.items()}
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                out.append(getattr(mod, fname)(*a, **k))
            except Exception as e:  # noqa: BLE001  (compared below)
                out.append(e)
        arrays.append({n: v for n, v in k.items() if isinstance(v, np.ndarray)})
    s, k = out
    if isinstance(s, Exception):
        assert isinstance(k, type(s)), f"{fname}: scipy raised {s!r}, kiln gave {k!r}"
        assert isinstance(k, kiln.InvalidInputError) or not isinstance(
            k, (RuntimeError, ValueError, TypeError)), k
        return None
    assert not isinstance(k, Exception), f"{fname}: kiln raised {k!r}"
    _same(k, s, fname)
    for n in arrays[0]:
        _same(arrays[1][n], arrays[0][n], f"{fname} out array {n}")
    return s


def _mask(shape, rng, background):
    return rng.random(shape) >= background


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("background", [0.5, 0.1, 0.01])
def test_edt_matches_scipy(shape, background):
    rng = np.random.default_rng(zlib.crc32(repr((shape, background)).encode()))
    m = _mask(shape, rng, background)
    _both("distance_transform_edt", m, return_indices=True)
    for sampling in (2.0, 0.7, [float(v) for v in rng.uniform(0.3, 3.0, len(shape))],
                     [int(v) for v in rng.integers(1, 4, len(shape))]):
        _both("distance_transform_edt", m, sampling=sampling, return_indices=True)


def test_edt_ties_on_regular_patterns():
    # many equidistant background elements: the indices follow scipy's tie rule
    for shape in [(15, 15), (9, 8, 7), (4, 5, 6, 3)]:
        m = np.ones(shape, bool)
        m[tuple(slice(None, None, 4) for _ in shape)] = False
        _both("distance_transform_edt", m, return_indices=True)
        _both("distance_transform_edt", m, sampling=[1.5] * len(shape), return_indices=True)
        _both("distance_transform_bf", m, return_indices=True)
        _both("distance_transform_cdt", m, return_indices=True)
        _both("distance_transform_cdt", m, metric="taxicab", return_indices=True)


def test_edt_larger_images():
    rng = np.random.default_rng(3)
    for shape, bg in [((257, 311), 0.5), ((301, 203), 0.001), ((41, 37, 43), 0.3)]:
        m = _mask(shape, rng, bg)
        _both("distance_transform_edt", m, return_indices=True)
        _both("distance_transform_edt", m, sampling=[0.3 + 0.4 * i for i in range(len(shape))])


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_input_dtype(dtype):
    rng = np.random.default_rng(5)
    x = (rng.integers(0, 3, (11, 13)) * (rng.random((11, 13)) < 0.6)).astype(dtype)
    _both("distance_transform_edt", x, return_indices=True)
    _both("distance_transform_cdt", x, return_indices=True)
    _both("distance_transform_bf", x, return_indices=True)
    # NaN is foreground
    if np.dtype(dtype).kind == "f":
        y = x.copy()
        y[0, 0] = np.nan
        _both("distance_transform_edt", y, return_indices=True)
        _both("distance_transform_cdt", y)
        _both("distance_transform_bf", y)
    # another byte order and a non-contiguous view
    _both("distance_transform_edt", x.astype(x.dtype.newbyteorder()), return_indices=True)
    _both("distance_transform_edt", x[::2, ::-1].T, return_indices=True)
    _both("distance_transform_cdt", x[::2, ::-1].T, return_indices=True)


def test_lists_and_other_inputs():
    _both("distance_transform_edt", [[0, 1, 1], [1, 1, 0]], return_indices=True)
    _both("distance_transform_edt", np.array(["a", "", "b"]))
    _both("distance_transform_edt", None)
    _both("distance_transform_cdt", [[0, 1, 1], [1, 1, 0]], return_indices=True)
    _both("distance_transform_bf", [[0, 1, 1], [1, 1, 0]], return_indices=True)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("metric", ["chessboard", "taxicab", "cityblock", "manhattan", "full",
                                    "cross", "random"])
def test_cdt_matches_scipy(shape, metric):
    rng = np.random.default_rng(zlib.crc32(repr((shape, metric)).encode()))
    for bg in (0.5, 0.05):
        m = _mask(shape, rng, bg)
        if metric == "full":
            met = np.ones((3,) * len(shape), bool)
        elif metric == "cross":
            met = sn.generate_binary_structure(len(shape), 1)
        elif metric == "random":
            met = rng.random((3,) * len(shape)) < 0.5
        else:
            met = metric
        _both("distance_transform_cdt", m, metric=met, return_indices=True)
        _both("distance_transform_cdt", m, metric=met)


def test_cdt_metric_types_as_scipy_reads_them():
    # scipy reads the metric's bytes as bools: an int or float metric is its raw bytes
    rng = np.random.default_rng(9)
    m = _mask((9, 11), rng, 0.3)
    for met in [np.ones((3, 3)), np.ones((3, 3), np.int64), np.ones((3, 3), np.uint8),
                np.array([[0, 0, 1], [0, 0, 0], [0, 0, 0]], np.int16), np.ones((3, 3), ">i2"),
                np.ones((3, 3), bool).T, [[1, 1, 1], [1, 1, 1], [1, 1, 1]]]:
        _both("distance_transform_cdt", m, metric=met, return_indices=True)
    d = np.asarray([[0, 0, 0, 0, 0, 0, 0, 0, 0]] * 2 + [[0, 0, 0, 1, 1, 1, 0, 0, 0]]
                   + [[0, 0, 1, 1, 1, 1, 1, 0, 0]] * 3 + [[0, 0, 0, 1, 1, 1, 0, 0, 0]]
                   + [[0, 0, 0, 0, 0, 0, 0, 0, 0]] * 2)
    assert ndi.distance_transform_cdt(d, metric=np.ones((3, 3))).sum() == -21


@pytest.mark.parametrize("shape", SHAPES[:10], ids=str)
@pytest.mark.parametrize("metric", ["euclidean", "taxicab", "cityblock", "manhattan",
                                    "chessboard", "EUCLIDEAN", "Chessboard"])
def test_bf_matches_scipy(shape, metric):
    rng = np.random.default_rng(zlib.crc32(repr((shape, metric)).encode()))
    for bg in (0.5, 0.05):
        m = _mask(shape, rng, bg)
        _both("distance_transform_bf", m, metric=metric, return_indices=True)
        _both("distance_transform_bf", m, metric=metric, sampling=1.5)
        _both("distance_transform_bf", m, metric=metric,
              sampling=[float(v) for v in rng.uniform(0.3, 3.0, len(shape))],
              return_indices=True)


@pytest.mark.parametrize("fname", ["distance_transform_edt", "distance_transform_cdt",
                                   "distance_transform_bf"])
def test_out_arrays_and_flags(fname):
    rng = np.random.default_rng(11)
    for shape in [(13, 9), (5, 7, 3)]:
        m = _mask(shape, rng, 0.4)
        dt_type = {"distance_transform_edt": np.float64, "distance_transform_cdt": np.int32,
                   "distance_transform_bf": np.float64}[fname]
        for rd in (True, False):
            for ri in (True, False):
                _both(fname, m, return_distances=rd, return_indices=ri)
                # the out arrays: poisoned, filled in place, None returned for them
                dt = np.full(shape, 7, dt_type)
                ft = np.full((len(shape),) + shape, -5, np.int32)
                if fname != "distance_transform_edt":
                    # scipy gathers the result from the array's content
                    ft = np.indices(shape, dtype=np.int32)
                _both(fname, m, return_distances=rd, return_indices=ri, distances=dt)
                _both(fname, m, return_distances=rd, return_indices=ri, indices=ft)
                _both(fname, m, return_distances=rd, return_indices=ri, distances=dt,
                      indices=ft)
        # what scipy makes of an indices array it does not fill itself
        _both(fname, m, return_indices=True, indices=np.full((len(shape),) + shape, 3, np.int32))
        # a non-contiguous, a Fortran-ordered and a byte-swapped out array
        _both(fname, m, return_indices=True,
              indices=np.indices(shape, dtype=np.int32).transpose(0, *range(len(shape), 0, -1))
              .copy().transpose(0, *range(len(shape), 0, -1)))
        _both(fname, m, distances=np.zeros(shape, dt_type, order="F"))
        _both(fname, m, return_indices=True,
              indices=np.indices(shape, dtype=np.int32).astype(">i4"))


@pytest.mark.parametrize("fname", ["distance_transform_edt", "distance_transform_cdt",
                                   "distance_transform_bf"])
def test_edge_inputs(fname):
    for x in [np.zeros((0, 3)), np.zeros((3, 0), bool), np.zeros((4, 0, 2)), np.array(0),
              np.array(1), np.array(True), np.ones((5,)), np.ones((4, 6)), np.zeros((4, 6)),
              np.ones((2, 3, 4), np.uint8), np.zeros((2, 3, 4), np.uint8)]:
        _both(fname, x, return_indices=True)
        _both(fname, x)
        if x.ndim:
            _both(fname, x, return_indices=True,
                  indices=np.full((x.ndim,) + x.shape, 5, np.int32))
    # no background and an indices array: scipy keeps its planes after the first
    _both("distance_transform_edt", np.ones((3, 4)), sampling=[2, 0.5], return_indices=True,
          indices=np.arange(24, dtype=np.int32).reshape(2, 3, 4))


def test_special_samplings():
    m = np.array([[0, 1, 1, 1, 0, 1], [1, 1, 0, 1, 1, 1]], bool)
    for s in (np.nan, np.inf, -1.0, 0.0, [1, -2], np.array(3.0), (0.25, 4), np.float32(1.1)):
        _both("distance_transform_edt", m, sampling=s, return_indices=True)
        _both("distance_transform_bf", m, sampling=s, return_indices=True)


def test_bad_arguments_raise_scipys_exceptions():
    m = np.eye(5)
    cases = [
        ("distance_transform_edt", (m,), {"return_distances": False}),
        ("distance_transform_edt", (m,), {"return_distances": False, "return_indices": True,
                                          "distances": np.zeros((5, 5))}),
        ("distance_transform_edt", (m,), {"indices": np.zeros((2, 5, 5), np.int32)}),
        ("distance_transform_edt", (m,), {"distances": np.zeros((4, 5))}),
        ("distance_transform_edt", (m,), {"distances": np.zeros((5, 5), np.float32)}),
        ("distance_transform_edt", (m,), {"return_indices": True,
                                          "indices": np.zeros((2, 5, 5), np.int64)}),
        ("distance_transform_edt", (m,), {"return_indices": True,
                                          "indices": np.zeros((5, 5), np.int32)}),
        ("distance_transform_edt", (m,), {"sampling": [1, 2, 3]}),
        ("distance_transform_edt", (m,), {"sampling": "ab"}),
        ("distance_transform_edt", (m,), {"sampling": [1, "x"]}),
        ("distance_transform_edt", (m,), {"sampling": [1, object()]}),
        ("distance_transform_cdt", (m,), {"metric": "euclidean"}),
        ("distance_transform_cdt", (m,), {"metric": "Taxicab"}),
        ("distance_transform_cdt", (m,), {"metric": np.ones((3, 5), bool)}),
        ("distance_transform_cdt", (m,), {"distances": np.zeros((5, 5))}),
        ("distance_transform_cdt", (m,), {"distances": np.zeros((5, 4), np.int32)}),
        ("distance_transform_cdt", (m,), {"return_indices": True,
                                          "indices": np.zeros((2, 5, 5))}),
        ("distance_transform_cdt", (m,), {"return_indices": True,
                                          "indices": np.zeros((3, 5, 5), np.int32)}),
        ("distance_transform_cdt", (np.array(1),), {}),
        ("distance_transform_cdt", (np.array(0),), {"return_indices": True}),
        ("distance_transform_cdt", (m,), {"indices": np.zeros((2, 5, 5), np.int32)}),
        ("distance_transform_bf", (m,), {"metric": "foo"}),
        ("distance_transform_bf", (m,), {"metric": None}),
        ("distance_transform_bf", (m,), {"sampling": [1, 2, 3]}),
        ("distance_transform_bf", (m,), {"distances": np.zeros((5, 5), np.uint32)}),
        ("distance_transform_bf", (m,), {"metric": "chessboard",
                                         "distances": np.zeros((5, 5))}),
        ("distance_transform_bf", (m,), {"distances": np.zeros((5, 4))}),
        ("distance_transform_bf", (m,), {"return_indices": True,
                                         "indices": np.zeros((2, 5, 5))}),
        ("distance_transform_bf", (m,), {"return_indices": True,
                                         "indices": np.zeros((2, 5, 4), np.int32)}),
        ("distance_transform_bf", (m,), {"return_distances": False,
                                         "distances": np.zeros((5, 5))}),
    ]
    for fname, args, kw in cases:
        s = k = None
        try:
            getattr(sn, fname)(*args, **kw)
        except Exception as e:  # noqa: BLE001
            s = e
        try:
            getattr(ndi, fname)(*args, **kw)
        except Exception as e:  # noqa: BLE001
            k = e
        assert s is not None and isinstance(k, type(s)), (fname, kw, s, k)
        if isinstance(s, (RuntimeError, ValueError, TypeError)):
            assert isinstance(k, kiln.InvalidInputError), k


def test_metric_rank_mismatch_is_refused():
    # scipy reads past the metric's dimensions here; kiln refuses
    with pytest.raises(kiln.InvalidInputError, match="axes"):
        ndi.distance_transform_cdt(np.eye(3), metric=np.ones(3, bool))
    with pytest.raises(kiln.InvalidInputError, match="axes"):
        ndi.distance_transform_cdt(np.eye(3), metric=None)


def test_kiln_tensors_and_gpu_arrays():
    rng = np.random.default_rng(13)
    m = _mask((17, 19), rng, 0.3).astype(np.float32)
    t = kiln.asarray(m)
    for fname in ("distance_transform_edt", "distance_transform_cdt", "distance_transform_bf"):
        _same(getattr(ndi, fname)(t, return_indices=True),
              getattr(sn, fname)(m, return_indices=True), fname)

    class OnGpu:
        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

        def __dlpack__(self, **_):
            raise AssertionError("not read")

    # the distance transforms run on the CPU: with the host fallback off, a CUDA array is
    # refused before it is read (with it on, it is copied to the host: test_ndimage_dropin.py)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KILN_NDIMAGE_FALLBACK", "0")
        for fname in ("distance_transform_edt", "distance_transform_cdt", "distance_transform_bf"):
            with pytest.raises(kiln.InvalidInputError, match=fname):
                getattr(ndi, fname)(OnGpu())


def test_threads_do_not_change_the_result():
    import os
    import subprocess
    import sys

    code = ("import numpy as np, sys; from kiln import ndimage as ndi; "
            "m = np.random.default_rng(1).random((97, 83, 41)) < 0.7; "
            "d, i = ndi.distance_transform_edt(m, sampling=[0.7, 1.3, 2.1], return_indices=True); "
            "sys.stdout.write(str(hash(d.tobytes() + i.tobytes())))")
    outs = set()
    for n in ("1", "2", "3"):
        env = dict(os.environ, RAYON_NUM_THREADS=n, PYTHONHASHSEED="0")
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                capture_output=True, text=True).stdout)
    assert len(outs) == 1
