#!/usr/bin/env python3
"""Generates kiln's scipy.ndimage fixtures (linear filters): small inputs, scipy's outputs,
and a manifest the Rust tests read (crates/kiln/tests/ndimage_fixtures.rs), so CI checks
kiln against scipy without Python.

    python3 scripts/ndimage_fixtures.py            # writes crates/kiln/tests/fixtures/ndimage/
    python3 scripts/ndimage_fixtures.py --real     # also the CLI's real-data expectations

Each manifest line: `NAME fn=FUNCTION input=FILE.npy ndim=N expected=FILE.npy key=value...`
with scipy's parameter names (lists comma-separated), parsed by
kiln_core::imaging::linear_spec. 8/16-bit inputs are filtered by scipy as float32 (the value
kiln filters) and the expected output is that float result (kiln rounds and clamps it).

--real: camera.png (scikit-image) and an MRI volume (nibabel's test data), vendored under
crates/kiln-cli/tests/data/, filtered by scipy in float64 for the CLI test.
"""
import argparse
import os
import sys

import numpy as np
from scipy import ndimage as ndi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "crates", "kiln", "tests", "fixtures", "ndimage")
MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-wrap", "grid-constant"]


def csv(v):
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


class Writer:
    def __init__(self):
        self.lines = []
        self.inputs = {}

    def input(self, name, arr):
        np.save(os.path.join(OUT, name), arr)
        self.inputs[name] = arr

    def case(self, name, fn, inp, result, **params):
        exp = f"{name}.npy"
        np.save(os.path.join(OUT, exp), np.asarray(result, dtype=np.float32))
        ndim = self.inputs[inp].ndim
        kv = " ".join(f"{k}={csv(v)}" for k, v in params.items())
        self.lines.append(f"{name} fn={fn} input={inp} ndim={ndim} expected={exp} {kv}".strip())


def un(v):
    """A one-element list as the scalar scipy takes for every axis."""
    return v[0] if len(v) == 1 else list(v)


def f32(a):
    return np.asarray(a, dtype=np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--real-rank", action="store_true", help="only the rank/morphology real-data files")
    args = ap.parse_args()
    if args.real_rank:
        real_rank()
        return 0
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy") or f == "cases.txt":
            os.remove(os.path.join(OUT, f))
    rng = np.random.default_rng(19)
    w = Writer()
    a2 = f32(rng.uniform(-1, 1, (13, 17)))
    a3 = f32(rng.uniform(-1, 1, (7, 9, 11)))
    u8 = rng.integers(0, 256, (12, 15), dtype=np.uint8)
    u16 = rng.integers(0, 65536, (11, 14), dtype=np.uint16)
    w.input("a2.npy", a2)
    w.input("a3.npy", a3)
    w.input("u8.npy", u8)
    w.input("u16.npy", u16)
    cval = 0.75

    def mode_kw(mode):
        return dict(mode=mode, cval=cval) if "constant" in mode else dict(mode=mode)

    # correlate / convolve: odd, even and rectangular kernels, origins, every mode.
    kernels2 = {
        "3x3": (3, 3), "3x5": (3, 5), "4x4": (4, 4), "2x5": (2, 5), "1x6": (1, 6),
    }
    origins2 = {"3x3": [(0, 0), (1, -1)], "3x5": [(0, 0), (-1, 2)], "4x4": [(0, 0), (-2, 1)],
                "2x5": [(0, 0), (-1, -2)], "1x6": [(0, 2)]}
    for kname, shape in kernels2.items():
        k = rng.uniform(-1, 1, shape)
        for oi, origin in enumerate(origins2[kname]):
            for mi, mode in enumerate(MODES):
                if oi > 0 and mi % 2:  # origins on a subset of the modes
                    continue
                for fn in ["correlate", "convolve"]:
                    res = getattr(ndi, fn)(a2, k, mode=mode, cval=cval, origin=list(origin))
                    w.case(f"{fn}_{kname}_o{oi}_{mode}", fn, "a2.npy", res, weights=k.ravel().tolist(),
                           wshape=list(shape), origin=list(origin), **mode_kw(mode))
    for shape, origin in [((3, 3, 3), (0, 0, 0)), ((2, 3, 4), (-1, 1, -1)), ((5, 5, 5), (0, 0, 0)),
                          ((1, 4, 3), (0, 1, 0))]:
        k = rng.uniform(-1, 1, shape)
        for mode in ["reflect", "constant", "wrap", "mirror", "nearest"]:
            for fn in ["correlate", "convolve"]:
                res = getattr(ndi, fn)(a3, k, mode=mode, cval=cval, origin=list(origin))
                name = "x".join(map(str, shape))
                w.case(f"{fn}3_{name}_{mode}", fn, "a3.npy", res, weights=k.ravel().tolist(),
                       wshape=list(shape), origin=list(origin), **mode_kw(mode))
    # a 2-D kernel over a batch: axes (1, 2) and (0, 2) of a 3-D array
    k = rng.uniform(-1, 1, (3, 4))
    for axes in [(1, 2), (0, 2), (2, 1)]:
        res = ndi.correlate(a3, k, mode="reflect", axes=axes, origin=[0, -1])
        w.case(f"correlate3_axes{axes[0]}{axes[1]}", "correlate", "a3.npy", res, weights=k.ravel().tolist(),
               wshape=[3, 4], origin=[0, -1], axes=list(axes), mode="reflect")
    # 1-D
    for n in [4, 5]:
        k = rng.uniform(-1, 1, n)
        for axis, origin in [(0, 0), (-1, 1), (1, -2)]:
            for mode in MODES:
                for fn in ["correlate1d", "convolve1d"]:
                    res = getattr(ndi, fn)(a2, k, axis=axis, mode=mode, cval=cval, origin=origin)
                    w.case(f"{fn}_{n}_a{axis}_o{origin}_{mode}", fn, "a2.npy", res, weights=k.tolist(),
                           axis=axis, origin=origin, **mode_kw(mode))
        res = ndi.correlate1d(a3, k, axis=0, mode="mirror", origin=1 - n % 2)
        w.case(f"correlate1d3_{n}", "correlate1d", "a3.npy", res, weights=k.tolist(), axis=0,
               origin=1 - n % 2, mode="mirror")
    # gaussians
    for sigma, order, extra in [((1.0, 2.0), (0, 0), {}), ((1.5,), (1, 0), {}), ((0.7, 1.3), (2, 1), {}),
                                ((2.0,), (0, 2), {"truncate": 2.5}), ((1.0, 3.0), (1, 1), {"radius": [2, 5]}),
                                ((5.0,), (0,), {})]:
        for mode in MODES:
            res = ndi.gaussian_filter(a2, un(sigma), order=un(order), mode=mode, cval=cval, **extra)
            name = f"gauss_s{'_'.join(map(str, sigma))}_o{''.join(map(str, order))}_{'_'.join(extra)}_{mode}"
            w.case(name, "gaussian_filter", "a2.npy", res, sigma=list(sigma), order=list(order),
                   **extra, **mode_kw(mode))
    for sigma, order, extra in [((1.0,), (0,), {}), ((0.5, 1.0, 1.5), (0, 1, 2), {}), ((4.0,), (0,), {}),
                                ((1.0,), (0,), {"radius": [1, 2, 3]})]:
        for mode in ["reflect", "constant", "wrap"]:
            res = ndi.gaussian_filter(a3, un(sigma), order=un(order), mode=mode, cval=cval, **extra)
            name = f"gauss3_s{'_'.join(map(str, sigma))}_o{''.join(map(str, order))}_{'_'.join(extra)}_{mode}"
            w.case(name, "gaussian_filter", "a3.npy", res, sigma=list(sigma), order=list(order),
                   **extra, **mode_kw(mode))
    res = ndi.gaussian_filter(a3, 1.2, axes=(1, 2))
    w.case("gauss3_axes12", "gaussian_filter", "a3.npy", res, sigma=1.2, axes=[1, 2])
    for mode in ["reflect", "nearest", "grid-constant"]:
        for inp, arr in [("a2.npy", a2), ("a3.npy", a3)]:
            t = inp[1]
            res = ndi.gaussian_laplace(arr, 1.3, mode=mode, cval=cval)
            w.case(f"glaplace{t}_{mode}", "gaussian_laplace", inp, res, sigma=1.3, **mode_kw(mode))
            res = ndi.gaussian_gradient_magnitude(arr, [0.8] * arr.ndim, mode=mode, cval=cval)
            w.case(f"ggm{t}_{mode}", "gaussian_gradient_magnitude", inp, res, sigma=0.8, **mode_kw(mode))
            res = ndi.laplace(arr, mode=mode, cval=cval)
            w.case(f"laplace{t}_{mode}", "laplace", inp, res, **mode_kw(mode))
            for axis in range(arr.ndim):
                for fn in ["sobel", "prewitt"]:
                    res = getattr(ndi, fn)(arr, axis=axis, mode=mode, cval=cval)
                    w.case(f"{fn}{t}_a{axis}_{mode}", fn, inp, res, axis=axis, **mode_kw(mode))
    for size, origin in [((3,), (0,)), ((4, 5), (0, 0)), ((4, 2), (-2, -1)), ((6, 1), (2, 0))]:
        for mode in MODES:
            res = ndi.uniform_filter(a2, un(size), mode=mode, cval=cval, origin=un(origin))
            name = f"uniform_{'x'.join(map(str, size))}_o{'_'.join(map(str, origin))}_{mode}"
            w.case(name, "uniform_filter", "a2.npy", res, size=list(size), origin=list(origin), **mode_kw(mode))
    res = ndi.uniform_filter(a3, (2, 3, 4), mode="wrap", origin=[0, 1, -1])
    w.case("uniform3_2x3x4", "uniform_filter", "a3.npy", res, size=[2, 3, 4], origin=[0, 1, -1], mode="wrap")
    res = ndi.uniform_filter(a3, 3, axes=(0, 2))
    w.case("uniform3_axes02", "uniform_filter", "a3.npy", res, size=3, axes=[0, 2])
    # 8- and 16-bit: scipy on the float32 values; kiln rounds and clamps.
    for inp, arr in [("u8.npy", u8), ("u16.npy", u16)]:
        x = arr.astype(np.float32)
        t = inp[:-4]
        w.case(f"{t}_gauss", "gaussian_filter", inp, ndi.gaussian_filter(x, 1.5), sigma=1.5)
        w.case(f"{t}_sobel", "sobel", inp, ndi.sobel(x, axis=0, mode="nearest"), axis=0, mode="nearest")
        k = rng.uniform(0, 0.3, (3, 4))
        w.case(f"{t}_corr34", "correlate", inp, ndi.correlate(x, k, mode="mirror", origin=[1, 0]),
               weights=k.ravel().tolist(), wshape=[3, 4], origin=[1, 0], mode="mirror")
        w.case(f"{t}_uniform", "uniform_filter", inp, ndi.uniform_filter(x, (4, 3), mode="constant", cval=9.0),
               size=[4, 3], mode="constant", cval=9.0)
        w.case(f"{t}_ggm", "gaussian_gradient_magnitude", inp, ndi.gaussian_gradient_magnitude(x, 1.0), sigma=1.0)
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        f.write("# generated by scripts/ndimage_fixtures.py (scipy %s, numpy %s)\n" % (
            __import__("scipy").__version__, np.__version__))
        f.write("\n".join(w.lines) + "\n")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(w.lines)} cases, {total} bytes in {OUT}")
    if args.real:
        real()
        real_rank()


def real():
    """The CLI test's data: scipy's outputs (float64 arithmetic) on the vendored image and
    volume (crates/kiln-cli/tests/data/README.md says where they come from)."""
    data = os.path.join(ROOT, "crates", "kiln-cli", "tests", "data")
    from PIL import Image  # pip install pillow nibabel
    import nibabel as nib
    img = np.asarray(Image.open(os.path.join(data, "camera.png")), dtype=np.float64)
    vol = np.asarray(nib.load(os.path.join(data, "mri.nii")).get_fdata(), dtype=np.float64)
    k35 = np.arange(15, dtype=np.float64).reshape(3, 5) / 105.0
    np.save(os.path.join(data, "k35.npy"), k35)
    outs = {
        "camera_gauss2.npy": ndi.gaussian_filter(img, 2.0),
        "camera_corr35.npy": ndi.correlate(img, k35, mode="mirror", origin=[0, 1]),
        "camera_sobel0.npy": ndi.sobel(img, axis=0, mode="nearest"),
        "mri_gauss1.npy": ndi.gaussian_filter(vol, 1.0),
        "mri_ggm.npy": ndi.gaussian_gradient_magnitude(vol, 1.5, mode="nearest"),
    }
    for k, v in outs.items():
        np.save(os.path.join(data, k), np.asarray(v, dtype=np.float32))
    print("real-data expectations in", data)


def real_rank():
    """Rank filters and morphology on the vendored data: exact results (selection), saved in
    the input's type (uint8 for the camera, float32 for the volume)."""
    data = os.path.join(ROOT, "crates", "kiln-cli", "tests", "data")
    from PIL import Image
    import nibabel as nib
    cam = np.asarray(Image.open(os.path.join(data, "camera.png")), dtype=np.uint8)
    vol = np.asarray(nib.load(os.path.join(data, "mri.nii")).get_fdata(), dtype=np.float32)
    yy, xx = np.mgrid[-3:4, -3:4]
    disk7 = (yy * yy + xx * xx) <= 9
    np.save(os.path.join(data, "disk7.npy"), disk7)  # bool, as NumPy saves masks
    outs = {
        "camera_median5.npy": ndi.median_filter(cam, size=5),
        "camera_pct25.npy": ndi.percentile_filter(cam, 25, size=(3, 7), mode="constant", cval=10),
        "camera_gopen.npy": ndi.grey_opening(cam, footprint=disk7, mode="nearest"),
        "camera_fill.npy": ndi.binary_fill_holes(cam > 128).astype(np.uint8),
        "camera_bclose.npy": ndi.binary_closing(
            cam > 100, structure=ndi.generate_binary_structure(2, 2), iterations=2
        ).astype(np.uint8),
        "mri_median3.npy": ndi.median_filter(vol, size=3),
        "mri_dilate.npy": ndi.grey_dilation(vol, size=(3, 1, 5), mode="mirror"),
    }
    for k, v in outs.items():
        np.save(os.path.join(data, k), v)
    print("rank and morphology expectations in", data)


if __name__ == "__main__":
    sys.exit(main())
