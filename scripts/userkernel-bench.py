#!/usr/bin/env python3
"""Users' kernels from Python: kiln against CuPy, side by side, on one GPU (issue 30's goals).

1. ElementwiseKernel `z = a * x + y` on 2^28 float32 CuPy arrays (kiln reads and writes
   them through DLPack on CuPy's current stream): CUDA-event median per call, against the
   device-copy floor (the bytes moved, 3 x 4 x 2^28, at the rate of a 1 GiB device-to-device
   copy measured here) and against CuPy's own ElementwiseKernel on the same arrays.
2. RawKernel call overhead: host time per launch of a tiny kernel on a 16-element array,
   and an ElementwiseKernel's (output allocated by the call, and given)
   (no synchronisation inside the loop), kiln and CuPy, same source.
3. First call on a fresh cache: a child process with an empty cache directory (KILN_CACHE_DIR,
   CUPY_CACHE_DIR) runs one ElementwiseKernel and one RawKernel, from the import to the
   first result on the host; the same child again with the cache warm; three rounds, kiln
   and CuPy alternating, medians.
Every result is checked against NumPy before it is timed. Prints a table; writes JSON to
argv[1] when given.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

SAXPY = r"""
extern "C" __global__ void tiny(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 0.5f + 1.0f;
}
"""

CHILD = r"""
import sys, time
t0 = time.perf_counter()
which = sys.argv[1]
if which == "kiln":
    import kiln as m
    import cupy as cp
else:
    import cupy as m
    import cupy as cp
x = cp.arange(1024, dtype=cp.float32)
k = m.ElementwiseKernel("T x, T a", "T z", "z = a * x + 1", "first_ew")
z = k(x, cp.float32(2.0))
r = m.RawKernel(sys.argv[2], "tiny")
r((4,), (256,), (x, cp.int32(1024)))
zh = cp.asnumpy(z); xh = cp.asnumpy(x)
ms = (time.perf_counter() - t0) * 1e3
import numpy as np
ok = np.array_equal(zh, 2 * np.arange(1024, dtype=np.float32) + 1) and \
     np.array_equal(xh, np.arange(1024, dtype=np.float32) * 0.5 + 1)
print(f"{ms:.1f} {int(ok)}")
"""


def events_ms(fn, reps=20, warmup=3):
    import cupy as cp

    for _ in range(warmup):
        fn()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    return statistics.median(ts)


def main():
    import cupy as cp

    import kiln

    rows = {}
    # 1. z = a * x + y on 2^28 float32
    n = 1 << 28
    x = cp.random.random(n, dtype=cp.float32)
    y = cp.random.random(n, dtype=cp.float32)
    a = np.float32(1.7)
    src = ("T x, T y, T a", "T z", "z = a * x + y", "axpy_ew")
    kk, ck = kiln.ElementwiseKernel(*src), cp.ElementwiseKernel(*src)
    zk, zc = kk(x, y, a), ck(x, y, a)
    assert isinstance(zk, cp.ndarray), f"kiln returned {type(zk)} for CuPy inputs"
    # kiln compiles generated kernels without FMA contraction (bitwise its CPU path and
    # NumPy); CuPy's NVRTC default fuses a * x + y: within 1 ulp of each other
    ref = a * cp.asnumpy(x[:1000003]) + cp.asnumpy(y[:1000003])
    assert np.array_equal(cp.asnumpy(zk[:1000003]), ref), "kiln's axpy differs from NumPy's"
    np.testing.assert_array_max_ulp(cp.asnumpy(zk[:1000003]), cp.asnumpy(zc[:1000003]), maxulp=1)
    out = cp.empty_like(x)
    kiln_ms = events_ms(lambda: kk(x, y, a, out))
    cupy_ms = events_ms(lambda: ck(x, y, a, out))
    src_big, dst_big = cp.empty(1 << 28, dtype=cp.float32), cp.empty(1 << 28, dtype=cp.float32)
    copy_ms = events_ms(lambda: dst_big.__setitem__(Ellipsis, src_big))
    copy_gbs = 2 * src_big.nbytes / copy_ms / 1e6
    floor_ms = 3 * x.nbytes / copy_gbs / 1e6
    rows["axpy_2^28_f32"] = dict(kiln_ms=kiln_ms, cupy_ms=cupy_ms, floor_ms=floor_ms,
                                 copy_gbs=copy_gbs, kiln_of_floor=floor_ms / kiln_ms,
                                 kiln_over_cupy=kiln_ms / cupy_ms)

    # 2. RawKernel call overhead on a 16-element array
    t = cp.zeros(16, dtype=cp.float32)
    rk, rc = kiln.RawKernel(SAXPY, "tiny"), cp.RawKernel(SAXPY, "tiny")
    rk((1,), (32,), (t, cp.int32(16)))
    cp.cuda.Device().synchronize()
    assert np.array_equal(cp.asnumpy(t), np.ones(16, dtype=np.float32)), "kiln's RawKernel result"
    calls = 20000

    def per_call_us(k):
        for _ in range(1000):
            k((1,), (32,), (t, cp.int32(16)))
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            k((1,), (32,), (t, cp.int32(16)))
        us = (time.perf_counter() - t0) / calls * 1e6
        cp.cuda.Device().synchronize()
        return us

    rows["rawkernel_call_us"] = dict(kiln_us=per_call_us(rk), cupy_us=per_call_us(rc))

    # 2b. ElementwiseKernel call overhead on 16 elements: `z = a * x` with the output
    # allocated by the call (CuPy's usual form) and given, alternated rounds, medians
    ek = kiln.ElementwiseKernel("T x, T a", "T z", "z = a * x", "scale16")
    ec = cp.ElementwiseKernel("T x, T a", "T z", "z = a * x", "scale16")
    a16, z16 = np.float32(2), cp.empty_like(t)
    assert np.array_equal(cp.asnumpy(ek(t, a16)), cp.asnumpy(ec(t, a16))), "kiln's result"

    def ew_us(k, given):
        f = (lambda: k(t, a16, z16)) if given else (lambda: k(t, a16))
        for _ in range(1000):
            f()
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        us = (time.perf_counter() - t0) / calls * 1e6
        cp.cuda.Device().synchronize()
        return us

    for given in (False, True):
        kr, cr = [], []
        for _ in range(3):
            kr.append(ew_us(ek, given))
            cr.append(ew_us(ec, given))
        key = "elementwise_call_us_out_given" if given else "elementwise_call_us"
        rows[key] = dict(kiln_us=statistics.median(kr), cupy_us=statistics.median(cr),
                         kiln_runs=[round(v, 2) for v in kr], cupy_runs=[round(v, 2) for v in cr])

    # 3. first call on a fresh cache, then warm: three rounds, kiln and CuPy alternating
    # (a fresh process's time varies by a few hundred ms between runs), medians reported
    runs = {}
    for _ in range(3):
        for which in ("kiln", "cupy"):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, KILN_CACHE_DIR=cache, CUPY_CACHE_DIR=cache)
                for state in ("fresh", "warm"):
                    t0 = time.perf_counter()
                    r = subprocess.run([sys.executable, "-c", CHILD, which, SAXPY], env=env,
                                       capture_output=True, text=True, check=True)
                    wall = (time.perf_counter() - t0) * 1e3
                    ms, ok = r.stdout.split()
                    assert ok == "1", f"{which} {state}: wrong result"
                    runs.setdefault(f"{which}_{state}", []).append((float(ms), wall))
    first = {k: dict(in_process_ms=statistics.median(m for m, _ in v),
                     process_ms=statistics.median(w for _, w in v),
                     process_ms_runs=[round(w, 1) for _, w in v]) for k, v in runs.items()}
    rows["first_call"] = first

    print(json.dumps(rows, indent=1))
    a = rows["axpy_2^28_f32"]
    print(f"| ElementwiseKernel z = a*x + y, 2^28 f32 | kiln {a['kiln_ms']:.3f} ms | CuPy "
          f"{a['cupy_ms']:.3f} ms | ratio {a['kiln_over_cupy']:.3f} | floor {a['floor_ms']:.3f} ms "
          f"({100 * a['kiln_of_floor']:.1f}% of it) |")
    r = rows["rawkernel_call_us"]
    print(f"| RawKernel call, 16 elements | kiln {r['kiln_us']:.2f} us | CuPy {r['cupy_us']:.2f} us "
          f"| ratio {r['kiln_us'] / r['cupy_us']:.2f} |")
    for key, what in (("elementwise_call_us", "allocating its output"),
                      ("elementwise_call_us_out_given", "output given")):
        r = rows[key]
        print(f"| ElementwiseKernel call, 16 elements, {what} | kiln {r['kiln_us']:.2f} us | "
              f"CuPy {r['cupy_us']:.2f} us | ratio {r['kiln_us'] / r['cupy_us']:.2f} |")
    for k, v in first.items():
        print(f"| first call {k} | {v['in_process_ms']:.1f} ms in process | {v['process_ms']:.1f} ms "
              f"whole process (median of {v['process_ms_runs']}) |")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
