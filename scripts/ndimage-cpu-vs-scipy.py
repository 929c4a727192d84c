#!/usr/bin/env python3
"""kiln.ndimage's linear filters against scipy.ndimage on NumPy arrays (the CPU path), 512²,
float64, float32, uint8 and int64: each result checked equal to scipy's first, then the
process CPU time of one call (best of 7 after 2 warm-ups) for each. Run with
RAYON_NUM_THREADS=1 to compare work on one core (scipy is single-threaded); CPU time stays
roughly meaningful on a loaded machine, wall time does not.
Then the interpolation family (rotate 512² float32 order 1 and 3, zoom ×2 of 1024² float32,
map_coordinates order 3 on 512², shift 512² order 3), checked equal to scipy's, with both CPU
time and wall time (the wall time is what more threads shorten).

With the argument `distance`, the distance transforms instead (edt on 512² and 128³ masks,
about half foreground and 99% foreground, with and without indices; cdt on 512² with both
metrics; bf on 64²): results checked identical to scipy's (indices included), then the best
process CPU time and the best wall time of 7 calls each.

    RAYON_NUM_THREADS=1 python3 scripts/ndimage-cpu-vs-scipy.py
    RAYON_NUM_THREADS=2 python3 scripts/ndimage-cpu-vs-scipy.py interp
    RAYON_NUM_THREADS=2 python3 scripts/ndimage-cpu-vs-scipy.py distance
    RAYON_NUM_THREADS=1 python3 scripts/ndimage-cpu-vs-scipy.py label
    RAYON_NUM_THREADS=1 python3 scripts/ndimage-cpu-vs-scipy.py morph

With `label`, connected-component labelling (random 50%-dense masks: 2048² with the faces
and the 3 x 3 structure, 4096², 128 x 256 x 256): labels and counts checked identical to
scipy's, then CPU and wall time as above. With `morph`, grey and binary morphology and the
rank filters on 1024² images (uint8 and float32), checked identical to scipy's.
"""
import sys
import time

import numpy as np
import scipy.ndimage as sn

import kiln.ndimage as kn


def cpu_ms(f, reps=7):
    f()
    f()
    best = float("inf")
    for _ in range(reps):
        c = time.process_time()
        f()
        best = min(best, time.process_time() - c)
    return best * 1e3


def wall_ms(f, reps=7):
    f()
    best = float("inf")
    for _ in range(reps):
        c = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - c)
    return best * 1e3


def interp():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((512, 512)).astype(np.float32)
    big = rng.standard_normal((1024, 1024)).astype(np.float32)
    coords = rng.uniform(-4, 516, size=(2, 512, 512))
    cases = {
        "rotate 512² f32 order 1": lambda m: m.rotate(x, 30, order=1),
        "rotate 512² f32 order 3": lambda m: m.rotate(x, 30, order=3),
        "zoom x2 1024² f32 order 3": lambda m: m.zoom(big, 2),
        "map_coordinates 512² order 3": lambda m: m.map_coordinates(x, coords, order=3),
        "shift 512² f32 order 3": lambda m: m.shift(x, (3.3, -7.6), order=3),
    }
    for name, f in cases.items():
        a, b = f(sn), f(kn)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
        ts, tk = cpu_ms(lambda: f(sn), 3), cpu_ms(lambda: f(kn), 3)
        ws, wk = wall_ms(lambda: f(sn), 3), wall_ms(lambda: f(kn), 3)
        print(f"{name:30s} cpu: scipy {ts:7.1f} ms kiln {tk:7.1f} ms ratio {tk / ts:5.2f} | "
              f"wall: scipy {ws:7.1f} ms kiln {wk:7.1f} ms ratio {wk / ws:5.2f}")


def _same(a, b):
    a, b = (a, b) if isinstance(a, tuple) else ((a,), (b,))
    return all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b))


def distances():
    rng = np.random.default_rng(0)
    cases = {}
    for shape in ((512, 512), (128, 128, 128)):
        for fg in (0.5, 0.99):
            m = rng.random(shape) < fg
            tag = "x".join(map(str, shape)) + f" fg={fg:.2f}"
            cases[f"edt {tag}"] = lambda mod, m=m: mod.distance_transform_edt(m)
            cases[f"edt {tag} +indices"] = (
                lambda mod, m=m: mod.distance_transform_edt(m, return_indices=True))
    m = rng.random((512, 512)) < 0.5
    for metric in ("chessboard", "taxicab"):
        cases[f"cdt 512x512 {metric}"] = lambda mod, k=metric: mod.distance_transform_cdt(m, k)
    b = rng.random((64, 64)) < 0.5
    cases["bf 64x64 euclidean"] = lambda mod: mod.distance_transform_bf(b)
    for name, f in cases.items():
        assert _same(f(sn), f(kn)), name
        cs, ck = cpu_ms(lambda: f(sn)), cpu_ms(lambda: f(kn))
        ws, wk = wall_ms(lambda: f(sn)), wall_ms(lambda: f(kn))
        print(f"{name:34s} cpu scipy {cs:8.2f} kiln {ck:8.2f} ms ({ck / cs:4.2f})   "
              f"wall scipy {ws:8.2f} kiln {wk:8.2f} ms ({wk / ws:4.2f})")


def labels():
    rng = np.random.default_rng(0)
    cases = [("2048² faces", (2048, 2048), None), ("2048² 3x3", (2048, 2048), np.ones((3, 3))),
             ("4096² faces", (4096, 4096), None), ("128x256x256 faces", (128, 256, 256), None)]
    for name, shape, st in cases:
        m = rng.random(shape) < 0.5
        (a, na), (b, nb) = sn.label(m, st), kn.label(m, st)
        assert na == nb and np.array_equal(a, b), name
        cs, ck = cpu_ms(lambda: sn.label(m, st)), cpu_ms(lambda: kn.label(m, st))
        ws, wk = wall_ms(lambda: sn.label(m, st)), wall_ms(lambda: kn.label(m, st))
        print(f"label {name:20s} cpu scipy {cs:7.1f} kiln {ck:7.1f} ms ({ck / cs:4.2f})   "
              f"wall scipy {ws:7.1f} kiln {wk:7.1f} ms ({wk / ws:4.2f})")


def morphs():
    rng = np.random.default_rng(0)
    u8 = rng.integers(0, 256, (1024, 1024), dtype=np.uint8)
    f32 = rng.standard_normal((1024, 1024)).astype(np.float32)
    bw = rng.random((1024, 1024)) < 0.5
    cases = {
        "grey_erosion 5x5 u8": lambda m: m.grey_erosion(u8, size=5),
        "grey_dilation 15x15 u8": lambda m: m.grey_dilation(u8, size=15),
        "grey_erosion 5x5 f32": lambda m: m.grey_erosion(f32, size=5),
        "grey_opening 5x5 f32": lambda m: m.grey_opening(f32, size=5),
        "morphological_gradient 3x3 u8": lambda m: m.morphological_gradient(u8, size=3),
        "white_tophat 7x7 u8": lambda m: m.white_tophat(u8, size=7),
        "binary_erosion 3x3": lambda m: m.binary_erosion(bw),
        "binary_dilation 3x3 x3": lambda m: m.binary_dilation(bw, iterations=3),
        "binary_opening 3x3": lambda m: m.binary_opening(bw),
        "median_filter 5x5 f32": lambda m: m.median_filter(f32, size=5),
        "median_filter 3x3 u8": lambda m: m.median_filter(u8, size=3),
        "percentile_filter 25% 5x5 u8": lambda m: m.percentile_filter(u8, 25, size=5),
        "maximum_filter 9x9 f32": lambda m: m.maximum_filter(f32, size=9),
    }
    for name, f in cases.items():
        a, b = f(sn), f(kn)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
        cs, ck = cpu_ms(lambda: f(sn)), cpu_ms(lambda: f(kn))
        ws, wk = wall_ms(lambda: f(sn)), wall_ms(lambda: f(kn))
        print(f"{name:30s} cpu scipy {cs:7.2f} kiln {ck:7.2f} ms ({ck / cs:4.2f})   "
              f"wall scipy {ws:7.2f} kiln {wk:7.2f} ms ({wk / ws:4.2f})")


def main():
    if sys.argv[1:] == ["morph"]:
        morphs()
        return
    if sys.argv[1:] == ["label"]:
        labels()
        return
    if sys.argv[1:] == ["interp"]:
        interp()
        return
    if sys.argv[1:] == ["distance"]:
        distances()
        return
    rng = np.random.default_rng(0)
    for dt in (np.float64, np.float32, np.uint8, np.int64):
        x = (rng.standard_normal((512, 512)) * 50).astype(dt)
        w = rng.standard_normal(7)
        k2 = rng.standard_normal((5, 5))
        cases = {
            "gaussian_filter s=2": lambda m: m.gaussian_filter(x, 2.0),
            "uniform_filter 5": lambda m: m.uniform_filter(x, 5),
            "correlate1d 7": lambda m: m.correlate1d(x, w, axis=0),
            "correlate 5x5": lambda m: m.correlate(x, k2),
            "sobel": lambda m: m.sobel(x),
        }
        for name, f in cases.items():
            a, b = f(sn), f(kn)
            assert a.dtype == b.dtype and (np.array_equal(a, b) or np.allclose(a, b, rtol=1e-6, atol=0)), name
            ts, tk = cpu_ms(lambda: f(sn)), cpu_ms(lambda: f(kn))
            print(f"{np.dtype(dt).name:8s} {name:22s} scipy {ts:7.2f} ms  kiln {tk:7.2f} ms  ratio {tk / ts:5.2f}")
    interp()


if __name__ == "__main__":
    main()
