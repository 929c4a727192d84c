#!/usr/bin/env python3
"""NumPy's equivalents of kiln's CPU element-wise ops over 2^24 float32 (float16 too), one
thread (NumPy's ufuncs are single-threaded), timed like kiln-cpu's `elementwise_bench`
example: two warm-up runs, then the median of --reps runs, one JSON line per op.

    python3 scripts/cpu-vs-numpy.py [--log2-n 24] [--reps 9] [--dtypes float32,float16]

Each op writes into a preallocated output (`out=`) where NumPy allows it, as kiln's map
does; sigmoid is `scipy.special.expit` when SciPy is installed, else 1/(1+exp(-x)) with
in-place steps; axpy is `y += a*x` (NumPy has no fused form: a temporary, then an add).
"""
import argparse
import json
import time

import numpy as np

try:
    from scipy.special import expit
except ImportError:  # NumPy only
    expit = None


def median_ms(reps, f):
    """(median wall ms, mean thread-CPU ms): CPU time counts only the time the thread ran."""
    f()
    f()
    wall, cpu = [], []
    for _ in range(reps):
        s, c = time.perf_counter(), time.thread_time()
        f()
        wall.append((time.perf_counter() - s) * 1e3)
        cpu.append((time.thread_time() - c) * 1e3)
    wall.sort()
    return wall[reps // 2], sum(cpu) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2-n", type=int, default=24)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--dtypes", default="float32,float16")
    a = ap.parse_args()
    n = 1 << a.log2_n
    rng = np.random.default_rng(1)
    x32 = rng.uniform(-4.0, 4.0, n).astype(np.float32)
    for dtype in [np.dtype(d).type for d in a.dtypes.split(",")]:
        x = x32.astype(dtype)
        out = np.empty_like(x)
        tmp = np.empty_like(x)
        y = np.zeros_like(x)
        sc, sh = dtype(1.5), dtype(-0.25)

        def sigmoid():
            if expit is not None:
                expit(x, out=out)
            else:
                np.negative(x, out=out)
                np.exp(out, out=out)
                np.add(out, 1, out=out)
                np.reciprocal(out, out=out)

        def scale_shift():
            np.multiply(x, sc, out=out)
            np.add(out, sh, out=out)

        def axpy():
            np.multiply(x, dtype(0.75), out=tmp)
            np.add(y, tmp, out=y)

        ops = [
            ("exp", lambda: np.exp(x, out=out)),
            ("tanh", lambda: np.tanh(x, out=out)),
            ("sigmoid", sigmoid),
            ("relu", lambda: np.maximum(x, dtype(0), out=out)),
            ("scale_shift", scale_shift),
            ("clamp", lambda: np.clip(x, dtype(-0.5), dtype(0.5), out=out)),
            ("axpy", axpy),
        ]
        for name, f in ops:
            ms, cpu_ms = median_ms(a.reps, f)
            impl = "numpy" if not (name == "sigmoid" and expit is not None) else "scipy.expit"
            print(json.dumps({"impl": impl, "op": name, "dtype": np.dtype(dtype).name,
                              "threads": 1, "n": n, "ms": round(ms, 3),
                              "cpu_ms": round(cpu_ms, 3),
                              "numpy": np.__version__}), flush=True)


if __name__ == "__main__":
    main()
