#!/usr/bin/env python3
"""Where a RawKernel and an ElementwiseKernel call spend their host time (GPU machine, CuPy
arrays): cProfile over 20,000 launches, the top entries by own time, and the launches' mean
host time with and without the profiler, beside CuPy's own call."""
import cProfile
import pstats
import time

import cupy as cp
import numpy as np

import kiln

SRC = r"""
extern "C" __global__ void tiny(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 0.5f + 1.0f;
}
"""
x = cp.zeros(16, dtype=cp.float32)
n = np.int32(16)
kk, ck = kiln.RawKernel(SRC, "tiny"), cp.RawKernel(SRC, "tiny")
ew = kiln.ElementwiseKernel("T x, T a", "T z", "z = a * x", "scale")
z = cp.empty_like(x)
a = np.float32(2)
calls = {
    "kiln RawKernel": lambda: kk((1,), (32,), (x, n)),
    "cupy RawKernel": lambda: ck((1,), (32,), (x, n)),
    "kiln ElementwiseKernel (16 elements)": lambda: ew(x, a, z),
}
for name, f in calls.items():
    for _ in range(200):
        f()
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    for _ in range(20000):
        f()
    per = (time.perf_counter() - t) / 20000 * 1e6
    cp.cuda.Device().synchronize()
    print(f"{name}: {per:.2f} us a call")
for name in ("kiln RawKernel", "kiln ElementwiseKernel (16 elements)"):
    f = calls[name]
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(20000):
        f()
    pr.disable()
    cp.cuda.Device().synchronize()
    print(f"== {name}, cProfile (own time, top 12)")
    pstats.Stats(pr).sort_stats("tottime").print_stats(12)
