#!/usr/bin/env python3
"""A user ElementwiseKernel `z = a * x + y` on 2^28 float32, kiln against CuPy, split into
what the GPU does and what the host adds: 50 calls queued back to back (CUDA events around
all of them: the kernel's time once the queue hides the host) and the host time per call.
scripts/userkernel-bench.py times single calls (host and kernel together); profile the
kernel with `ncu --clock-control none -k regex:axpy_ew python3 scripts/userkernel-queue.py`.
"""
import time

import cupy as cp
import numpy as np

import kiln

n = 1 << 28
x = cp.random.random(n, dtype=cp.float32); y = cp.random.random(n, dtype=cp.float32)
out = cp.empty_like(x); a = np.float32(1.7)
src = ("T x, T y, T a", "T z", "z = a * x + y", "axpy_ew")
kk, ck = kiln.ElementwiseKernel(*src), cp.ElementwiseKernel(*src)
for name, f in (("kiln", lambda: kk(x, y, a, out)), ("cupy", lambda: ck(x, y, a, out))):
    for _ in range(5): f()
    cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    s.record()
    for _ in range(50): f()
    e.record(); e.synchronize()
    print(f"{name}: {cp.cuda.get_elapsed_time(s, e) / 50:.4f} ms per call, 50 queued back to back")
    t0 = time.perf_counter(); 
    for _ in range(200): f()
    host = (time.perf_counter() - t0) / 200 * 1e6
    cp.cuda.Device().synchronize()
    print(f"{name}: host {host:.1f} us per call (queue full)")
