#!/usr/bin/env python3
"""Peers for kiln's rank-filter benchmarks (scripts/rank-gpu-check.sh runs this on the GPU
machine): CuPy's cupyx.scipy.ndimage and OpenCV's medianBlur on the inputs kiln's
bench_rank wrote (DIR/<workload>.in.npy), each output checked against kiln's
(DIR/<workload>.kiln.npy) before its time counts. GPU peers are timed with CUDA events
(3 warm-up runs, median of the timed runs); OpenCV with perf_counter on all CPU cores.

    python3 scripts/rank_peers.py DIR KILN_BENCH_LOG

Prints one row a (workload, peer) with kiln's time from the BENCH lines of KILN_BENCH_LOG
and the ratio peer / kiln (above 1: kiln is faster).
"""
import json
import os
import sys
import time

import numpy as np

d, log = sys.argv[1], sys.argv[2]
kiln = {}
for line in open(log):
    if line.startswith("BENCH "):
        r = json.loads(line[6:])
        kiln[r["workload"]] = r

try:
    import cupy as cp
    import cupyx.scipy.ndimage as cnd
except Exception as e:  # noqa: BLE001
    cp = None
    print(f"cupy unavailable: {e}")
try:
    import cv2
    cv2.setNumThreads(os.cpu_count() or 1)
except Exception as e:  # noqa: BLE001
    cv2 = None
    print(f"opencv unavailable: {e}")


def gpu_time(f, reps):
    for _ in range(3):
        f()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        f()
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))


def cpu_time(f, reps):
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e3)
    return float(np.median(ts))


rows = []
for name, k in [("median3_1080p_u8", 3), ("median5_1080p_u8", 5), ("median51_5120_u8", 51),
                ("erosion15_4096_u8", 15), ("dilation15_4096_u8", 15)]:
    path = os.path.join(d, f"{name}.in.npy")
    if not os.path.exists(path) or name not in kiln:
        print(f"{name}: no kiln result, skipped")
        continue
    x = np.load(path).astype(np.uint8)  # written as float32 (kiln-io writes f32 npy)
    want = np.load(os.path.join(d, f"{name}.kiln.npy")).astype(np.uint8)
    kms = kiln[name]["ms"]
    peers = []
    if cp is not None:
        xg = cp.asarray(x)
        if name.startswith("median"):
            f = lambda: cnd.median_filter(xg, size=k, mode="nearest")  # noqa: E731
        elif name.startswith("erosion"):
            f = lambda: cnd.grey_erosion(xg, size=(k, k), mode="nearest")  # noqa: E731
        else:
            f = lambda: cnd.grey_dilation(xg, size=(k, k), mode="nearest")  # noqa: E731
        same = bool((cp.asnumpy(f()) == want).all())
        reps = 3 if k > 40 else 20
        peers.append(("cupyx", gpu_time(f, reps), same))
    if cv2 is not None and name.startswith("median"):
        g = lambda: cv2.medianBlur(x, k)  # noqa: E731
        same = bool((g() == want).all())
        peers.append((f"cv2.medianBlur ({cv2.getNumThreads()} thr)", cpu_time(g, 5), same))
    for peer, ms, same in peers:
        rows.append((name, peer, ms, kms, same, kiln[name]["floor_ms"], kiln[name]["kernel"]))

print(f"{'workload':<20} {'peer':<26} {'peer ms':>10} {'kiln ms':>9} {'peer/kiln':>9} {'floor ms':>9} kernel  same-output")
for name, peer, ms, kms, same, floor, kern in rows:
    print(f"{name:<20} {peer:<26} {ms:>10.4f} {kms:>9.4f} {ms / kms:>9.1f} {floor:>9.4f} {kern}  {same}")
