#!/usr/bin/env python3
"""A user's 4-op element-wise kernel on the CPU path against NumPy evaluating the same
expression: z = (a * x + y) * x - b on 2^24 float32, best of 7, into a given output and
with a new output each call (docs/performance.md, "Users' expression kernels"). The result
is checked equal to NumPy's first. Use the release wheel (scripts/py-device-wheel.sh)."""
import time

import numpy as np

import kiln

n = 1 << 24
rng = np.random.default_rng(0)
x = rng.random(n, dtype=np.float32)
y = rng.random(n, dtype=np.float32)
a, b = np.float32(1.5), np.float32(0.25)
k = kiln.ElementwiseKernel("float32 x, float32 y, float32 a, float32 b", "float32 z",
                           "z = (a * x + y) * x - b", "expr4")
out = np.empty(n, np.float32)


def best(f, reps=7):
    f()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e3


assert np.array_equal(k(x, y, a, b), (a * x + y) * x - b), "kiln differs from NumPy"
for _ in range(2):
    print(f"kiln, new output: {best(lambda: k(x, y, a, b)):.2f} ms; "
          f"kiln into out=: {best(lambda: k(x, y, a, b, out)):.2f} ms; "
          f"NumPy expression: {best(lambda: (a * x + y) * x - b):.2f} ms")
