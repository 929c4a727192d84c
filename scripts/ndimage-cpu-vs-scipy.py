#!/usr/bin/env python3
"""kiln.ndimage's linear filters against scipy.ndimage on NumPy arrays (the CPU path), 512²,
float64, float32, uint8 and int64: each result checked equal to scipy's first, then the
process CPU time of one call (best of 7 after 2 warm-ups) for each. Run with
RAYON_NUM_THREADS=1 to compare work on one core (scipy is single-threaded); CPU time stays
roughly meaningful on a loaded machine, wall time does not.
Then the interpolation family (rotate 512² float32 order 1 and 3, zoom ×2 of 1024² float32,
map_coordinates order 3 on 512², shift 512² order 3), checked equal to scipy's, with both CPU
time and wall time (the wall time is what more threads shorten).

    RAYON_NUM_THREADS=1 python3 scripts/ndimage-cpu-vs-scipy.py
    RAYON_NUM_THREADS=2 python3 scripts/ndimage-cpu-vs-scipy.py interp
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


def main():
    if sys.argv[1:] == ["interp"]:
        interp()
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
