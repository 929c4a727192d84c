#!/usr/bin/env python3
"""kiln.ndimage's linear filters against scipy.ndimage on NumPy arrays (the CPU path), 512²,
float64, float32, uint8 and int64: each result checked equal to scipy's first, then the
process CPU time of one call (best of 7 after 2 warm-ups) for each. Run with
RAYON_NUM_THREADS=1 to compare work on one core (scipy is single-threaded); CPU time stays
roughly meaningful on a loaded machine, wall time does not.

    RAYON_NUM_THREADS=1 python3 scripts/ndimage-cpu-vs-scipy.py
"""
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


def main():
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


if __name__ == "__main__":
    main()
