"""kiln.ndimage.distance_transform_edt of CUDA arrays (CuPy, torch) runs on the device and
gives scipy's distances and indices bit for bit (every dtype, 1 to 4 axes, sampling, each
output alone), as arrays of the input's library; what the device path does not take runs on
host copies, or is refused with the reason when ``KILN_NDIMAGE_FALLBACK=0``. Skips without a
GPU (the ``gpu`` fixture), fails instead with KILN_REQUIRE_GPU=1."""

import numpy as np
import pytest
import scipy.ndimage as sndi

import kiln
from conftest import skip_or_fail
from kiln import ndimage as ndi


@pytest.fixture(autouse=True)
def edt_on_the_device(monkeypatch):
    """The device path is opt-in (``KILN_GPU_PREVIEW=1``) until it has passed on a GPU."""
    monkeypatch.setenv("KILN_GPU_PREVIEW", "1")

SHAPES = [(1,), (301,), (37, 61), (1, 64), (17, 23, 29), (5, 1, 40), (4, 5, 6, 7)]
DTYPES = [np.bool_, np.uint8, np.int16, np.int64, np.float32, np.float64, np.complex64]


def lib_of(name):
    try:
        mod = __import__(name)
    except Exception as e:  # noqa: BLE001 - any import failure means the peer is absent
        skip_or_fail(f"{name} not importable: {e}")
    if name == "torch":
        if not mod.cuda.is_available():
            skip_or_fail("torch sees no CUDA device")
        return mod, (lambda a: mod.from_numpy(a).cuda()), (lambda a: a.cpu().numpy())
    return mod, mod.asarray, mod.asnumpy


def same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_edt_on_cuda_arrays_is_scipy_s(gpu, lib, shape):
    mod, to_gpu, back = lib_of(lib)
    rng = np.random.default_rng(sum(shape) * 7 + len(shape))
    r = len(shape)
    samplings = [None, 2.0, [0.7 + 0.61 * a for a in range(r)],
                 [1e-150] + [1.3] * (r - 1)]
    for k, dt in enumerate(DTYPES):
        density = (0.03, 0.5, 0.97)[k % 3]
        x = (rng.random(shape) < density).astype(dt)
        for s in samplings:
            want_d, want_i = sndi.distance_transform_edt(x, sampling=s, return_indices=True)
            got_d, got_i = ndi.distance_transform_edt(to_gpu(x), sampling=s,
                                                      return_indices=True)
            assert type(got_d).__module__.split(".")[0] == lib
            same_bits(back(got_d), want_d)
            same_bits(back(got_i), want_i.astype(np.int32))
    # each output alone, and the masks without background or foreground
    same_bits(back(ndi.distance_transform_edt(to_gpu(x))), sndi.distance_transform_edt(x))
    same_bits(back(ndi.distance_transform_edt(to_gpu(x), return_distances=False,
                                              return_indices=True)),
              sndi.distance_transform_edt(x, return_distances=False,
                                          return_indices=True).astype(np.int32))
    for fill in (0, 1):
        x = np.full(shape, fill, np.uint8)
        d, i = ndi.distance_transform_edt(to_gpu(x), return_indices=True)
        wd, wi = sndi.distance_transform_edt(x, return_indices=True)
        same_bits(back(d), wd)
        same_bits(back(i), wi.astype(np.int32))


def test_edt_on_a_non_contiguous_cuda_array(gpu):
    cupy, to_gpu, back = lib_of("cupy")
    x = (np.random.default_rng(3).random((40, 90)) < 0.6).astype(np.float32)
    got = ndi.distance_transform_edt(to_gpu(x)[:, ::3], sampling=(1.5, 0.5))
    same_bits(back(got), sndi.distance_transform_edt(x[:, ::3], sampling=(1.5, 0.5)))


def test_edt_cases_the_device_path_does_not_take(gpu, monkeypatch):
    cupy, to_gpu, back = lib_of("cupy")
    x5 = (np.random.default_rng(5).random((2, 3, 2, 3, 4)) < 0.5).astype(np.uint8)
    # five axes and out arrays: on host copies, scipy's result
    same_bits(back(ndi.distance_transform_edt(to_gpu(x5))), sndi.distance_transform_edt(x5))
    monkeypatch.setenv("KILN_NDIMAGE_FALLBACK", "0")  # the device path's own refusals
    with pytest.raises(kiln.InvalidInputError, match="1 to 4 axes"):
        ndi.distance_transform_edt(to_gpu(x5))
    with pytest.raises(RuntimeError, match="at least one of return_distances"):
        ndi.distance_transform_edt(to_gpu(x5[0]), return_distances=False)
    with pytest.raises(RuntimeError):
        ndi.distance_transform_edt(to_gpu(x5[0]), sampling=[1.0, 2.0])
