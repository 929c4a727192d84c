"""NumPy's time for the expression of expr_bench.rs: z = (a * x + y) * x - b on 2^24
float32 with scalar a, b (float32, so NumPy stays in float32); the best of 5, in ms.

/tmp/npvenv/bin/python crates/kiln-expr/examples/expr_numpy.py
"""
import time

import numpy as np

n = 1 << 24
i = np.arange(n)
x = ((i % 1000).astype(np.float32) * np.float32(1e-3) - np.float32(0.5)).astype(np.float32)
y = ((i % 777).astype(np.float32) * np.float32(1e-3)).astype(np.float32)
a, b = np.float32(1.5), np.float32(0.25)


def run():
    return (a * x + y) * x - b


def run_out(z, t):
    np.multiply(a, x, out=t)
    np.add(t, y, out=t)
    np.multiply(t, x, out=t)
    np.subtract(t, b, out=z)


def best(f):
    f()
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t0) * 1e3)
    return min(ts)


z = np.empty(n, np.float32)
t = np.empty(n, np.float32)
print(f"NumPy {np.__version__}, z = (a * x + y) * x - b, 2^24 float32")
print(f"  expression (allocates):      {best(run):.2f} ms (best of 5)")
print(f"  ufuncs with out= (no alloc): {best(lambda: run_out(z, t)):.2f} ms (best of 5)")
