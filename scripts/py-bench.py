#!/usr/bin/env python3
"""kiln's Python performance rows (issue 13) on a GPU, printed as a table.

1. call overhead: `t.sigmoid()` on a 16-element kiln CUDA tensor (host time per call, queued
   work not waited for) against torch eager `x.sigmoid()` on the same size;
2. filter2d cross4 on a 16384^2 float32 torch CUDA tensor through DLPack, against the same
   call on a kiln tensor (the facade call plus the binding: the Rust call's time) and
   `cupyx.scipy.ndimage.correlate` on the same data;
3. Monte Carlo European, 2^24 paths x 256 steps, from Python against the time the same
   pricing takes in-process with nothing around it but the facade (`price_batch`), as the
   CLI's `kiln bench` finance row reports it (run by py-gpu-check.sh beside this).

Every timed result is checked against a reference first. Wall-clock medians after warm-up;
device work is waited for inside each timed rep (kiln: tensor.synchronize(), cupy/torch:
their synchronize).
"""
import json
import statistics
import sys
import time

import numpy as np

import kiln


def median_ms(fn, reps=10, warmup=2):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main():
    rows = []
    rt = kiln.Runtime("cuda")
    dev = rt.device
    import torch

    # 1. call overhead
    t = kiln.zeros((16,), device=dev)
    n = 20000
    for _ in range(1000):
        t.sigmoid()
    rt.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        t.sigmoid()
    kiln_us = (time.perf_counter() - t0) / n * 1e6
    rt.synchronize()
    x = torch.zeros(16, device="cuda")
    for _ in range(1000):
        x.sigmoid()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x.sigmoid()
    torch_us = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    rows.append(("call overhead, sigmoid on 16 elements", f"{kiln_us:.2f} us", f"torch eager {torch_us:.2f} us",
                 f"target <= 5 us: {'PASS' if kiln_us <= 5 else 'FAIL'}"))

    # 2. filter2d cross4 16384^2
    side = 16384
    xt = torch.rand(side, side, device="cuda", dtype=torch.float32)
    kx = kiln.from_dlpack(xt)  # zero copy: the same memory
    assert kx.data_ptr == xt.data_ptr()

    def via_torch():
        kiln.filter2d(xt, "cross4").synchronize()

    def via_kiln():
        kiln.filter2d(kx, "cross4").synchronize()

    y1 = kiln.filter2d(xt, "cross4", out_type="like")
    y2 = kiln.filter2d(kx, "cross4")
    assert torch.equal(y1, torch.from_dlpack(y2))
    ms_torch = median_ms(via_torch)
    ms_kiln = median_ms(via_kiln)
    del y1, y2
    row = [f"{ms_torch:.3f} ms", f"kiln tensor (facade call) {ms_kiln:.3f} ms"]
    try:
        import cupy
        import cupyx.scipy.ndimage as cndi

        cx = cupy.from_dlpack(xt)
        w = cupy.asarray([[0, .25, 0], [.25, 0, .25], [0, .25, 0]], dtype=cupy.float32)
        ref = cndi.correlate(cx, w, mode="reflect")
        got = cupy.from_dlpack(kiln.filter2d(xt, "cross4"))
        err = float(cupy.abs(ref - got).max())
        assert err <= 1e-6, err

        def cp():
            cndi.correlate(cx, w, mode="reflect")
            cupy.cuda.get_current_stream().synchronize()

        ms_cp = median_ms(cp)
        row.append(f"cupyx correlate {ms_cp:.3f} ms ({ms_cp / ms_torch:.2f}x)")
        ok = ms_torch <= 1.05 * ms_kiln and ms_cp >= 3 * ms_torch
    except ImportError as e:
        row.append(f"cupy missing: {e}")
        ok = ms_torch <= 1.05 * ms_kiln
    rows.append(("filter2d cross4 16384^2 torch tensor", *row, "PASS" if ok else "FAIL"))
    del xt, kx
    kiln.empty_cache(dev)

    # 3. Monte Carlo European 2^24 x 256
    opt = [dict(spot=100.0, strike=100.0, rate=0.03, volatility=0.2, maturity=1.0)]
    cf = kiln.price(opt, "analytic")["price"][0]

    def mc():
        return kiln.price(opt, "mc", paths=1 << 24, steps=256, seed=1, device=dev)

    r = mc()
    assert abs(r["price"][0] - cf) <= 4 * r["std_error"][0], (r["price"][0], cf)
    ms_mc = median_ms(mc, reps=5, warmup=1)
    rows.append(("MC European 2^24 paths x 256 steps", f"{ms_mc:.2f} ms",
                 f"price {r['price'][0]:.4f} (closed form {cf:.4f})", "compare: kiln bench finance row"))

    w = [max(len(str(r[i])) for r in rows if i < len(r)) for i in range(5)]
    for r in rows:
        print(" | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))
    json.dump({"rows": rows}, sys.stdout if len(sys.argv) < 2 else open(sys.argv[1], "w"), indent=1)
    print()


if __name__ == "__main__":
    main()
