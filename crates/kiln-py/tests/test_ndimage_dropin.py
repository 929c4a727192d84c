"""kiln.ndimage on other libraries' arrays, as scipy.ndimage takes them: results of the
input's type, the cases a device path does not take computed on the host (scipy's bits),
``output=`` arrays of the input's library filled, bad input refused as scipy refuses it.
array_api_strict (a NumPy-backed array-API namespace) stands for CuPy, torch and JAX here;
the CUDA arrays' cases are in the GPU tests and scipy's own suite on CuPy arrays
(scripts/scipy-suite-gpu.sh)."""

import numpy as np
import pytest
import scipy.ndimage as sn

import kiln
from kiln import ndimage as ndi

xp = pytest.importorskip("array_api_strict")

RNG = np.random.default_rng(29)
IMG = RNG.random((13, 17)).astype(np.float32)
MASK = IMG > 0.6
LABELS, NLAB = sn.label(MASK)


def host(a):
    if isinstance(a, (list, tuple)):
        return np.asarray([host(v) for v in a])
    return np.from_dlpack(a)


def is_xp(a):
    if isinstance(a, (list, tuple)):
        return all(is_xp(v) for v in a)
    return type(a).__module__.startswith("array_api_strict")


CASES = [
    ("gaussian_filter", (IMG, 1.5), {}),
    ("correlate1d", (IMG, [1.0, 2.0, -1.0]), {"axis": 0}),
    ("median_filter", (IMG,), {"size": 3}),
    ("grey_opening", (IMG,), {"size": (3, 2)}),
    ("binary_dilation", (MASK,), {"iterations": 2}),
    ("binary_fill_holes", (MASK,), {}),
    ("zoom", (IMG, 1.7), {"order": 3}),
    ("rotate", (IMG, 33.0), {"order": 1}),
    ("map_coordinates", (IMG, RNG.random((2, 9)) * 12), {"order": 2}),
    ("distance_transform_edt", (MASK,), {}),
    ("distance_transform_cdt", (MASK,), {}),
    ("sum_labels", (IMG, LABELS, np.arange(1, NLAB + 1)), {}),
    ("center_of_mass", (IMG, LABELS, [1, 2]), {}),
    ("watershed_ift", ((IMG * 255).astype(np.uint8), LABELS.astype(np.int16)), {}),
]


@pytest.mark.parametrize("fname,args,kw", CASES, ids=[c[0] for c in CASES])
def test_results_are_the_inputs_type_with_scipys_values(fname, args, kw):
    want = getattr(sn, fname)(*args, **kw)
    got = getattr(ndi, fname)(*(xp.asarray(a) if isinstance(a, np.ndarray) else a for a in args), **kw)
    assert is_xp(got), type(got)
    np.testing.assert_allclose(host(got), np.asarray(want),
                               rtol=2e-6 if fname in ("gaussian_filter", "correlate1d") else 0, atol=1e-6)


def test_label_find_objects_and_value_indices():
    lab, n = ndi.label(xp.asarray(MASK))
    assert type(lab).__module__.startswith("array_api_strict") and isinstance(n, int)
    assert np.array_equal(host(lab), LABELS) and n == NLAB
    assert ndi.find_objects(xp.asarray(LABELS)) == sn.find_objects(LABELS)
    vi = ndi.value_indices(xp.asarray(LABELS), ignore_value=0)
    want = sn.value_indices(LABELS, ignore_value=0)
    assert sorted(vi) == sorted(int(k) for k in want) and all(type(k) is int for k in vi)
    for k, v in want.items():
        assert all(np.array_equal(host(a), b) for a, b in zip(vi[int(k)], v))


def test_an_output_array_of_the_inputs_library_is_filled_and_returned():
    out = xp.zeros(IMG.shape, dtype=xp.float64)
    r = ndi.uniform_filter(xp.asarray(IMG), 3, output=out)
    assert r is out
    np.testing.assert_array_equal(host(out), sn.uniform_filter(IMG, 3, output=np.float64))


def test_bad_input_is_still_refused_as_scipy_refuses_it():
    with pytest.raises(RuntimeError, match="sequence argument must have length"):
        ndi.gaussian_filter(xp.asarray(IMG), [1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError):
        ndi.shift(xp.asarray(IMG), 1.0, order=6)


def test_without_the_fallback_a_case_the_device_path_refuses_raises(monkeypatch):
    monkeypatch.setenv("KILN_NDIMAGE_FALLBACK", "0")
    with pytest.raises(kiln.InvalidInputError, match="output= arrays other than NumPy"):
        ndi.uniform_filter(xp.asarray(IMG), 3, output=xp.zeros(IMG.shape, dtype=xp.float64))


@pytest.mark.parametrize("fname,args", [("binary_hit_or_miss", ()), ("gaussian_filter", (1.0,)),
                                        ("binary_dilation", ()), ("white_tophat", (3,))])
def test_an_output_that_is_the_input_gets_the_result(fname, args):
    # scipy's own result with output=input (the top-hat reads its input after the first
    # step wrote it: scipy's answer then is not the out-of-place one, and kiln gives scipy's)
    a = MASK if fname.startswith("binary") else IMG
    want = a.copy()
    getattr(sn, fname)(want, *args, output=want)
    x = xp.asarray(a)
    r = getattr(ndi, fname)(x, *args, output=x)
    assert r is x
    np.testing.assert_array_equal(host(x), want)


@pytest.mark.parametrize("call", [
    lambda: ndi.median_filter(IMG, size=3, footprint=np.ones((3, 3))),
    lambda: ndi.grey_erosion(IMG, size=3, footprint=np.ones((3, 3))),
    lambda: ndi.white_tophat(IMG, size=3, footprint=np.ones((3, 3))),
    lambda: ndi.maximum_filter(IMG, size=3, footprint=np.ones((3, 3))),
    lambda: ndi.median_filter(IMG.astype(np.float64), size=3, footprint=np.ones((3, 3))),
    lambda: ndi.grey_erosion(kiln.asarray(IMG), size=3, footprint=np.ones((3, 3))),
    lambda: ndi.median_filter(xp.asarray(IMG), size=3, footprint=np.ones((3, 3))),
    lambda: ndi.zoom(IMG, 2, grid_mode=True, mode="constant"),
    lambda: ndi.correlate(IMG, np.ones((2, 2), np.complex64), output=np.float32),
    lambda: ndi.affine_transform(IMG.astype(np.complex64), np.eye(2), output=np.float32),
], ids=["median", "grey_erosion", "white_tophat", "maximum", "median-f64", "grey_erosion-tensor",
        "median-xp", "zoom", "correlate", "affine"])
def test_warnings_point_at_the_callers_line(call):
    with pytest.warns(UserWarning) as rec:
        call()
    assert all(w.filename == __file__ for w in rec), [(w.filename, w.lineno) for w in rec]
