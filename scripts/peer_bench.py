#!/usr/bin/env python3
"""The peers on kiln's workloads: what a user of PyTorch, CuPy (with cupyx.scipy.ndimage) or
Numba CUDA would run for the same work at the same sizes, so kiln's rows can be set beside them.

What it measures (one function each; `--only` takes these names):
  copy_bw      device-to-device copy of 2^28 f32 (torch), GB/s of read + write bytes
  h2d          host-to-device 1 GiB, pageable and pinned, and device-to-host pinned (torch)
  sigmoid      y = 1 / (1 + exp(-x)) on 2^28 elements: torch f32 and f16, a CuPy
               ElementwiseKernel, a Numba kernel
  stencil      the 4-neighbour average (cross4) on 1080x1920 and 16384^2: two hand-written
               Numba kernels (plain, and with a shared-memory tile), CuPy slicing, torch conv2d,
               cupyx correlate; then a cupyx gaussian_filter (sigma 2, reflect, truncate 4) on 8192^2
  conv3d       a 3x3x3 correlation of a 512^3 f32 volume: torch/cuDNN (with and without
               cudnn.benchmark), cupyx correlate
  monte_carlo  European and arithmetic Asian calls by GBM paths (2^24 paths x 256 steps; torch
               vectorised, Numba kernels with xoroshiro128p), and a 10000-option portfolio
  matmul       8192^3 GEMM: torch fp32 / tf32 / bf16 / fp16, CuPy fp32; a naive one-thread-per-
               element Numba kernel and torch fp32 at 2048^3
  transpose    16384^2 f32 transpose (torch, CuPy)
  alloc        1 MiB allocate + free: CuPy's pool, torch's caching allocator, raw cudaMalloc/cudaFree
  graphs       1000 tiny dependent kernels: eager launches against one CUDA graph replay (torch)
  risk_grid    portfolio risk by full revaluation: 10,000 European Black-Scholes options (f64) on
               5 underlyings x 10,000 scenarios of spot, volatility and rate shocks, P&L per
               scenario (torch, vectorised in chunks of scenarios): host to host wall clock
               (the book and the shocks uploaded, the P&L vector back) and device-only
  interp       kiln.ndimage's and cupyx.scipy.ndimage's resampling on the same CuPy arrays
               (prefilter off, as kiln's interp_gpu bench): affine_transform rotating a 512^3
               f32 volume 30 degrees about axis 0 (orders 1 and 3, constant), zoom x2 of a
               2048^2 f32 image (orders 1 and 3, mirror), map_coordinates order 3 at a shifted
               2048^2 grid; best of a few wall-clock calls with a synchronize
  user_paths   wall clock of what a user waits for: a host array through sigmoid and back (torch
               and CuPy pageable, torch pinned), an 8192^2 .npy through a cupyx gaussian to a
               .npy file, and a folder of 200 1080p PNG frames through a PIL + cupyx loop (the
               folder is printed, so kiln can filter the same frames)
  label        kiln.ndimage.label against cupyx.scipy.ndimage.label (4096^2 and 256^3 masks)
  edt          kiln.ndimage.distance_transform_edt against cupyx's (512^3 masks of density 0.5
               and 0.99, a 4096^2 mask of 0.5), distances alone and with the indices; kiln
               checked equal to scipy first
  ndfilter     kiln.ndimage's and cupyx's gaussian_filter (sigma 4) on 512^3 float32 and float64
               CuPy volumes and uniform_filter (size 7) on the float32 one; kiln checked bit for bit against
               scipy first

Device timings are medians of CUDA-event times after warm-ups; user_paths is wall-clock.
Peer names with `seed` in them (numba-seed-v1, numba-seed-v2-shared, numba-seed-naive) are
the plain hand-written Numba kernels a CUDA newcomer would write, kept as the baseline.
`--quick` runs smaller sizes (a smoke test, not numbers to quote). A peer that fails prints an
`error` row and the run goes on.

Output: one JSON line per measurement ({"workload", "peer", "ms", ...figures}) as it runs, a
table last, and with `--json FILE` the list of rows, which `kiln bench --peers FILE` merges
with kiln's own rows (docs/bench-schema.md).

Run it on the GPU machine (it needs torch, cupy, numba, numpy and PIL there; nothing to
build), from the repository root, in the same device run as the kiln rows it is compared with:

    python3 scripts/peer_bench.py [--quick] [--only a,b] [--json out.json]
"""
import argparse
import json
import os
import math
import time

import numpy as np
import torch

if not hasattr(np, "row_stack"):  # numba 0.68 still calls it; numpy 2.5 removed it
    np.row_stack = np.vstack

RESULTS = []


def bench(fn, warmup=3, reps=20):
    """Median milliseconds of fn() measured with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def record(workload, peer, ms, **figures):
    row = {"workload": workload, "peer": peer, "ms": round(ms, 4), **figures}
    RESULTS.append(row)
    print(json.dumps(row), flush=True)


def gbps(nbytes, ms):
    return round(nbytes / ms / 1e6, 1)


def copy_bw(q):
    n = (1 << 28) if not q else (1 << 26)
    a = torch.rand(n, device="cuda")
    b = torch.empty_like(a)
    ms = bench(lambda: b.copy_(a))
    record("copy_f32", "torch", ms, n=n, GBps=gbps(2 * 4 * n, ms))


def sigmoid(q):
    import cupy as cp
    n = (1 << 28) if not q else (1 << 26)
    a = torch.randn(n, device="cuda")
    out = torch.empty_like(a)
    ms = bench(lambda: torch.sigmoid(a, out=out))
    record("sigmoid_f32", "torch", ms, n=n, GBps=gbps(8 * n, ms))
    ah = a.half()
    oh = torch.empty_like(ah)
    ms = bench(lambda: torch.sigmoid(ah, out=oh))
    record("sigmoid_f16", "torch", ms, n=n, GBps=gbps(4 * n, ms))
    ca = cp.asarray(a)
    co = cp.empty_like(ca)
    k = cp.ElementwiseKernel("float32 x", "float32 y", "y = 1.0f / (1.0f + expf(-x))", "sig")
    ms = bench(lambda: k(ca, co))
    record("sigmoid_f32", "cupy-elementwise", ms, n=n, GBps=gbps(8 * n, ms))
    from numba import cuda

    @cuda.jit
    def sig(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = 1.0 / (1.0 + math.exp(-x[i]))

    nx = cuda.as_cuda_array(a)
    ny = cuda.as_cuda_array(out)
    threads = 256
    blocks = (n + threads - 1) // threads
    ms = bench(lambda: sig[blocks, threads](nx, ny))
    record("sigmoid_f32", "numba", ms, n=n, GBps=gbps(8 * n, ms))


def stencil(q):
    """The 4-neighbour average filter, interior points only."""
    import cupy as cp
    from numba import cuda, float32

    @cuda.jit
    def filter_v1(src, dst):
        x, y = cuda.grid(2)
        if 1 <= x < src.shape[0] - 1 and 1 <= y < src.shape[1] - 1:
            dst[x, y] = (src[x - 1, y] + src[x + 1, y] + src[x, y - 1] + src[x, y + 1]) / 4

    @cuda.jit
    def filter_shared(src, dst):
        # The shared-memory tile version (a full halo on all four sides).
        sh = cuda.shared.array((34, 34), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        x = cuda.blockIdx.x * 32 + tx
        y = cuda.blockIdx.y * 32 + ty
        h, w = src.shape
        if x < h and y < w:
            sh[tx + 1, ty + 1] = src[x, y]
            if tx == 0 and x > 0:
                sh[0, ty + 1] = src[x - 1, y]
            if tx == 31 and x < h - 1:
                sh[33, ty + 1] = src[x + 1, y]
            if ty == 0 and y > 0:
                sh[tx + 1, 0] = src[x, y - 1]
            if ty == 31 and y < w - 1:
                sh[tx + 1, 33] = src[x, y + 1]
        cuda.syncthreads()
        if 1 <= x < h - 1 and 1 <= y < w - 1:
            dst[x, y] = (sh[tx, ty + 1] + sh[tx + 2, ty + 1] + sh[tx + 1, ty] + sh[tx + 1, ty + 2]) / 4

    sizes = [(1080, 1920), (16384, 16384)] if not q else [(1080, 1920), (8192, 8192)]
    for (h, w) in sizes:
        tag = f"stencil5_{h}x{w}"
        a = torch.rand(h, w, device="cuda")
        out = torch.zeros_like(a)
        nbytes = 2 * 4 * h * w
        ref = (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]) / 4
        na = cuda.as_cuda_array(a)
        no = cuda.as_cuda_array(out)
        # Numba's grid(2) gives x along dim 0, the slow (strided) axis; the kernel keeps that
        # mapping, as a user writing it this way would.
        blocks = ((h + 15) // 16, (w + 15) // 16)
        ms = bench(lambda: filter_v1[blocks, (16, 16)](na, no))
        err = float((out[1:-1, 1:-1] - ref).abs().max())
        record(tag, "numba-seed-v1", ms, GBps=gbps(nbytes, ms), maxerr=err)
        out.zero_()
        blocks = ((h + 31) // 32, (w + 31) // 32)
        ms = bench(lambda: filter_shared[blocks, (32, 32)](na, no))
        err = float((out[1:-1, 1:-1] - ref).abs().max())
        record(tag, "numba-seed-v2-shared", ms, GBps=gbps(nbytes, ms), maxerr=err)
        ca = cp.asarray(a)
        ms = bench(lambda: (ca[:-2, 1:-1] + ca[2:, 1:-1] + ca[1:-1, :-2] + ca[1:-1, 2:]) / 4)
        record(tag, "cupy-slicing", ms, GBps=gbps(nbytes, ms))
        kern = torch.tensor([[0, .25, 0], [.25, 0, .25], [0, .25, 0]], device="cuda").view(1, 1, 3, 3)
        a4 = a.view(1, 1, h, w)
        ms = bench(lambda: torch.nn.functional.conv2d(a4, kern))
        record(tag, "torch-conv2d", ms, GBps=gbps(nbytes, ms))
        import cupyx.scipy.ndimage as ndi
        ck = cp.asarray(kern.view(3, 3))
        ms = bench(lambda: ndi.correlate(ca, ck, mode="constant"))
        record(tag, "cupyx-ndimage", ms, GBps=gbps(nbytes, ms))
    import cupyx.scipy.ndimage as ndi
    g = 8192 if not q else 2048
    cg = cp.random.rand(g, g, dtype=cp.float32)
    ms = bench(lambda: ndi.gaussian_filter(cg, 2.0, mode="reflect", truncate=4.0), reps=10)
    record(f"gaussian2_{g}x{g}", "cupyx-ndimage", ms, GBps=gbps(2 * 4 * g * g, ms))


def conv3d(q):
    import cupy as cp
    import cupyx.scipy.ndimage as ndi
    d = 512 if not q else 256
    a = torch.rand(1, 1, d, d, d, device="cuda")
    k = torch.rand(1, 1, 3, 3, 3, device="cuda")
    nbytes = 2 * 4 * d ** 3
    flops = 2 * 27 * (d - 2) ** 3
    ms = bench(lambda: torch.nn.functional.conv3d(a, k), reps=10)
    record(f"conv3d_{d}", "torch-cudnn", ms, GBps=gbps(nbytes, ms), TFLOPs=round(flops / ms / 1e9, 2))
    torch.backends.cudnn.benchmark = True
    ms = bench(lambda: torch.nn.functional.conv3d(a, k), reps=10)
    record(f"conv3d_{d}", "torch-cudnn-benchmark", ms, GBps=gbps(nbytes, ms), TFLOPs=round(flops / ms / 1e9, 2))
    ca = cp.asarray(a.view(d, d, d))
    ck = cp.asarray(k.view(3, 3, 3))
    ms = bench(lambda: ndi.correlate(ca, ck, mode="constant"), reps=10)
    record(f"conv3d_{d}", "cupyx-ndimage", ms, GBps=gbps(nbytes, ms), TFLOPs=round(flops / ms / 1e9, 2))


def bs_call(S, K, r, sigma, T):
    d1 = (math.log(S / K) + (r + 0.5 * sigma * sigma) * T) / (sigma * math.sqrt(T))
    d2 = d1 - sigma * math.sqrt(T)
    N = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))
    return S * N(d1) - K * math.exp(-r * T) * N(d2)


def monte_carlo(q):
    """European call by GBM paths, priced at maturity (and an arithmetic Asian, a portfolio)."""
    from numba import cuda
    from numba.cuda.random import create_xoroshiro128p_states, xoroshiro128p_normal_float32
    S0, K, r, sigma, T = 100.0, 100.0, 0.05, 0.2, 1.0
    exact = bs_call(S0, K, r, sigma, T)
    npaths = (1 << 24) if not q else (1 << 22)
    steps = 256 if not q else 64
    dt = T / steps
    drift = (r - 0.5 * sigma * sigma) * dt
    vol = sigma * math.sqrt(dt)

    def torch_mc():
        logs = torch.zeros(npaths, device="cuda")
        for _ in range(steps):
            logs += drift + vol * torch.randn(npaths, device="cuda")
        payoff = torch.clamp(S0 * torch.exp(logs) - K, min=0)
        return float(payoff.mean()) * math.exp(-r * T)

    t0 = time.perf_counter()
    price = torch_mc()
    torch.cuda.synchronize()
    ms = bench(torch_mc, warmup=1, reps=3)
    record("mc_european", "torch-vectorized", ms, paths=npaths, steps=steps,
           Gpathsteps_per_s=round(npaths * steps / ms / 1e6, 2), price=round(price, 4), exact=round(exact, 4))

    @cuda.jit
    def mc_kernel(states, out, n, steps, drift, vol, S0, K):
        i = cuda.grid(1)
        if i < n:
            z = 0.0
            for j in range(steps):
                z += drift + vol * xoroshiro128p_normal_float32(states, i)
            s = S0 * math.exp(z)
            out[i] = s - K if s > K else 0.0

    threads = 256
    blocks = (npaths + threads - 1) // threads
    states = create_xoroshiro128p_states(npaths, seed=1)
    out = cuda.device_array(npaths, dtype=np.float32)
    mc_kernel[blocks, threads](states, out, npaths, steps, np.float32(drift), np.float32(vol), np.float32(S0), np.float32(K))
    cuda.synchronize()
    ms = bench(lambda: mc_kernel[blocks, threads](states, out, npaths, steps, np.float32(drift), np.float32(vol), np.float32(S0), np.float32(K)), warmup=1, reps=5)
    price = float(out.copy_to_host().astype(np.float64).mean()) * math.exp(-r * T)
    record("mc_european", "numba-kernel", ms, paths=npaths, steps=steps,
           Gpathsteps_per_s=round(npaths * steps / ms / 1e6, 2), price=round(price, 4), exact=round(exact, 4))

    @cuda.jit
    def asian_kernel(states, out, n, steps, drift, vol, S0, K):
        i = cuda.grid(1)
        if i < n:
            z = 0.0
            acc = 0.0
            for j in range(steps):
                z += drift + vol * xoroshiro128p_normal_float32(states, i)
                acc += S0 * math.exp(z)
            a = acc / steps
            out[i] = a - K if a > K else 0.0

    asian_kernel[blocks, threads](states, out, npaths, steps, np.float32(drift), np.float32(vol), np.float32(S0), np.float32(K))
    cuda.synchronize()
    ms = bench(lambda: asian_kernel[blocks, threads](states, out, npaths, steps, np.float32(drift), np.float32(vol), np.float32(S0), np.float32(K)), warmup=1, reps=5)
    price = float(out.copy_to_host().astype(np.float64).mean()) * math.exp(-r * T)
    record("mc_asian_arith", "numba-kernel", ms, paths=npaths, steps=steps,
           Gpathsteps_per_s=round(npaths * steps / ms / 1e6, 2), price=round(price, 4))

    # a portfolio: many options, one thread per (option, path), parameters per option
    nopt = 10000 if not q else 1000
    per = 65536 if not q else 8192
    psteps = 64
    total = nopt * per
    rs = np.random.default_rng(0)
    spot = cuda.to_device(rs.uniform(80, 120, nopt).astype(np.float32))
    strike = cuda.to_device(rs.uniform(80, 120, nopt).astype(np.float32))
    sig = cuda.to_device(rs.uniform(0.1, 0.5, nopt).astype(np.float32))
    nthreads = 132 * 2048
    pstates = create_xoroshiro128p_states(nthreads, seed=2)
    pout = cuda.device_array(nthreads, dtype=np.float32)

    @cuda.jit
    def portfolio_kernel(states, out, total, per, steps, spot, strike, sig, r, T):
        t = cuda.grid(1)
        stride = cuda.gridsize(1)
        acc = 0.0
        i = t
        while i < total:  # grid-stride over (option, path); one RNG state per thread
            o = i // per
            dt = T / steps
            v = sig[o]
            drift = (r - 0.5 * v * v) * dt
            vs = v * math.sqrt(dt)
            z = 0.0
            for j in range(steps):
                z += drift + vs * xoroshiro128p_normal_float32(states, t)
            s = spot[o] * math.exp(z)
            if s > strike[o]:
                acc += s - strike[o]
            i += stride
        out[t] = acc

    pb = nthreads // threads
    portfolio_kernel[pb, threads](pstates, pout, total, per, psteps, spot, strike, sig, np.float32(r), np.float32(T))
    cuda.synchronize()
    ms = bench(lambda: portfolio_kernel[pb, threads](pstates, pout, total, per, psteps, spot, strike, sig, np.float32(r), np.float32(T)), warmup=1, reps=3)
    record("mc_portfolio", "numba-kernel", ms, options=nopt, paths_per_option=per, steps=psteps,
           Gpathsteps_per_s=round(total * psteps / ms / 1e6, 2))


def matmul(q):
    import cupy as cp
    m = 8192 if not q else 4096
    flops = 2 * m ** 3
    a = torch.randn(m, m, device="cuda")
    b = torch.randn(m, m, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    ms = bench(lambda: a @ b, reps=10)
    record(f"gemm_{m}", "torch-fp32", ms, TFLOPs=round(flops / ms / 1e9, 1))
    torch.backends.cuda.matmul.allow_tf32 = True
    ms = bench(lambda: a @ b, reps=10)
    record(f"gemm_{m}", "torch-tf32", ms, TFLOPs=round(flops / ms / 1e9, 1))
    torch.backends.cuda.matmul.allow_tf32 = False
    ab, bb = a.bfloat16(), b.bfloat16()
    ms = bench(lambda: ab @ bb, reps=10)
    record(f"gemm_{m}", "torch-bf16", ms, TFLOPs=round(flops / ms / 1e9, 1))
    # B stored n x k and used transposed: the layout kiln's wgmma kernel reads natively
    ms = bench(lambda: ab @ bb.t(), reps=10)
    record(f"gemm_{m}_nt", "torch-bf16", ms, TFLOPs=round(flops / ms / 1e9, 1))
    # fp8 e4m3 through cuBLASLt (torch._scaled_mm: B stored n x k, per-tensor scales, bf16 out),
    # with tensor-core accumulation alone (fast accum, what kiln's fp8 kernel does) and with
    # cuBLASLt's periodic promotion to f32
    try:
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.tensor(1.0, device="cuda")
        for fast in (True, False):
            f = lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                         use_fast_accum=fast)
            ms = bench(f, reps=10)
            record(f"gemm_{m}_nt", "torch-fp8-e4m3" + ("-fastaccum" if fast else ""), ms,
                   TFLOPs=round(flops / ms / 1e9, 1))
    except Exception as e:  # an fp8-less torch or card is a finding, not a crash
        print(json.dumps({"workload": f"gemm_{m}_fp8", "error": repr(e)[:300]}), flush=True)
    ah, bh = a.half(), b.half()
    ms = bench(lambda: ah @ bh, reps=10)
    record(f"gemm_{m}", "torch-fp16", ms, TFLOPs=round(flops / ms / 1e9, 1))
    ca, cb = cp.asarray(a), cp.asarray(b)
    ms = bench(lambda: ca @ cb, reps=10)
    record(f"gemm_{m}", "cupy-fp32", ms, TFLOPs=round(flops / ms / 1e9, 1))
    from numba import cuda

    @cuda.jit
    def matmul_kernel(A, B, C):  # the naive one-thread-per-element kernel
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            tmp = 0.
            for k in range(A.shape[1]):
                tmp += A[i, k] * B[k, j]
            C[i, j] = tmp

    n = 2048
    A = cuda.as_cuda_array(a[:n, :n].contiguous())
    B = cuda.as_cuda_array(b[:n, :n].contiguous())
    C = cuda.device_array((n, n), dtype=np.float32)
    grid = ((n + 15) // 16, (n + 15) // 16)
    ms = bench(lambda: matmul_kernel[grid, (16, 16)](A, B, C), warmup=1, reps=3)
    record(f"gemm_{n}", "numba-seed-naive", ms, TFLOPs=round(2 * n ** 3 / ms / 1e9, 2))
    ms = bench(lambda: a[:n, :n] @ b[:n, :n], reps=10)
    record(f"gemm_{n}", "torch-fp32", ms, TFLOPs=round(2 * n ** 3 / ms / 1e9, 1))


def transpose(q):
    import cupy as cp
    m = 16384 if not q else 8192
    a = torch.rand(m, m, device="cuda")
    ms = bench(lambda: a.t().contiguous())
    record(f"transpose_{m}", "torch", ms, GBps=gbps(2 * 4 * m * m, ms))
    ca = cp.asarray(a)
    ms = bench(lambda: cp.ascontiguousarray(ca.T))
    record(f"transpose_{m}", "cupy", ms, GBps=gbps(2 * 4 * m * m, ms))


def alloc(q):
    """Allocation latency: caching pools against the raw driver allocation."""
    import cupy as cp
    n = 2000
    size = 1 << 20
    pool = cp.get_default_memory_pool()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x = cp.empty(size // 4, dtype=cp.float32)
        del x
    us = (time.perf_counter() - t0) / n * 1e6
    record("alloc_free_1MiB", "cupy-pool", us / 1000, us_per_op=round(us, 3))
    t0 = time.perf_counter()
    for _ in range(n):
        p = cp.cuda.runtime.malloc(size)
        cp.cuda.runtime.free(p)
    us = (time.perf_counter() - t0) / n * 1e6
    record("alloc_free_1MiB", "cudaMalloc+cudaFree", us / 1000, us_per_op=round(us, 3))
    t0 = time.perf_counter()
    for _ in range(n):
        x = torch.empty(size // 4, device="cuda")
        del x
    us = (time.perf_counter() - t0) / n * 1e6
    record("alloc_free_1MiB", "torch-caching", us / 1000, us_per_op=round(us, 3))
    pool.free_all_blocks()


def graphs(q):
    """1000 tiny dependent kernels: eager launches against one CUDA graph replay."""
    x = torch.zeros(32, device="cuda")
    def work():
        for _ in range(1000):
            x.add_(1.0)
    ms_eager = bench(work, warmup=2, reps=10)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        work()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        work()
    ms_graph = bench(lambda: g.replay(), warmup=2, reps=10)
    record("launch_1000_tiny", "torch-eager", ms_eager, us_per_kernel=round(ms_eager, 3))
    record("launch_1000_tiny", "torch-cudagraph", ms_graph, us_per_kernel=round(ms_graph, 3),
           speedup=round(ms_eager / ms_graph, 2))


def h2d(q):
    n = 1 << 28 if not q else 1 << 26
    pageable = torch.rand(n)
    pinned = pageable.pin_memory()
    d = torch.empty(n, device="cuda")
    ms = bench(lambda: d.copy_(pageable), warmup=1, reps=5)
    record("h2d_1GiB", "torch-pageable", ms, GBps=gbps(4 * n, ms))
    ms = bench(lambda: d.copy_(pinned, non_blocking=True), warmup=1, reps=5)
    record("h2d_1GiB", "torch-pinned", ms, GBps=gbps(4 * n, ms))
    out = torch.empty(n).pin_memory()
    ms = bench(lambda: out.copy_(d, non_blocking=True), warmup=1, reps=5)
    record("d2h_1GiB", "torch-pinned", ms, GBps=gbps(4 * n, ms))


def wall_ms(fn, warmup=1, reps=5):
    """Median wall-clock milliseconds of fn() (host to host: what a user waits for)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return times[len(times) // 2]


def user_paths(q):
    """What a user waits for: host array in, host array out; a file in, a file out; a folder of
    PNG frames. Wall-clock, after a warm-up (kernels compiled, context up)."""
    import cupy as cp
    import cupyx.scipy.ndimage as cnd
    import glob, os, tempfile
    from PIL import Image
    n = (1 << 28) if not q else (1 << 24)
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    ms = wall_ms(lambda: torch.from_numpy(x).cuda().sigmoid().cpu().numpy())
    record("sigmoid_host_roundtrip", "torch-pageable", ms, n=n, GBps=gbps(4 * n, ms))
    ms = wall_ms(lambda: cp.asnumpy(1 / (1 + cp.exp(-cp.asarray(x)))))
    record("sigmoid_host_roundtrip", "cupy-pageable", ms, n=n, GBps=gbps(4 * n, ms))
    xp = torch.from_numpy(x).pin_memory()
    out = torch.empty_like(xp).pin_memory()

    def pinned():
        out.copy_(xp.cuda(non_blocking=True).sigmoid(), non_blocking=True)
        torch.cuda.synchronize()
    ms = wall_ms(pinned)
    record("sigmoid_host_roundtrip", "torch-pinned", ms, n=n, GBps=gbps(4 * n, ms))
    tmp = tempfile.mkdtemp()
    side = 8192 if not q else 2048
    np.save(f"{tmp}/big.npy", np.random.default_rng(1).random((side, side), dtype=np.float32))

    def npy_e2e():
        a = np.load(f"{tmp}/big.npy")
        o = cnd.gaussian_filter(cp.asarray(a), 2.0, mode="reflect", truncate=4.0)
        np.save(f"{tmp}/out.npy", cp.asnumpy(o))
    ms = wall_ms(npy_e2e, reps=3)
    record("gaussian2_npy_file_to_file", "cupyx-script", ms, size=f"{side}x{side}",
           note="np.load -> cupyx gaussian_filter -> np.save, imports excluded")
    frames = 200 if not q else 20
    os.makedirs(f"{tmp}/frames", exist_ok=True)
    rng = np.random.default_rng(2)
    yy, xx = np.mgrid[0:1080, 0:1920]
    base = 128 + 60 * np.sin(xx / 40.0) * np.cos(yy / 55.0)
    for i in range(frames):
        f = np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(f).save(f"{tmp}/frames/f{i:04d}.png")
    files = sorted(glob.glob(f"{tmp}/frames/*.png"))
    os.makedirs(f"{tmp}/outc", exist_ok=True)

    def loop():
        for f in files:
            a = np.asarray(Image.open(f), dtype=np.float32)
            o = cnd.gaussian_filter(cp.asarray(a), 2.0, mode="reflect", truncate=4.0)
            Image.fromarray(np.clip(np.rint(cp.asnumpy(o)), 0, 255).astype(np.uint8)).save(
                f.replace("frames", "outc"))
    ms = wall_ms(loop, warmup=0, reps=1)
    record("png_frames_1080p_gaussian2", "pil-cupyx-loop", ms, frames=frames,
           frames_per_s=round(frames / (ms / 1e3), 2), folder=f"{tmp}/frames")


def risk_grid(q):
    """Portfolio risk by full revaluation of a European book (kiln's `Runtime::risk` grid)."""
    n, m, chunk = (1000, 1000, 500) if q else (10000, 10000, 1000)
    und_n = 5
    rng = np.random.default_rng(0)
    book = {k: rng.uniform(a, b, n) for k, (a, b) in dict(
        S=(50, 150), K=(50, 150), r=(-0.01, 0.06), q=(0, 0.03), v=(0.1, 0.6), T=(0.05, 3.0),
        qty=(-5, 5)).items()}
    put = rng.random(n) < 0.5
    und = rng.integers(0, und_n, n)
    shocks = dict(spot=rng.uniform(-0.25, 0.25, (m, und_n)), vol=rng.uniform(-0.08, 0.15, (m, und_n)),
                  rate=rng.uniform(-0.01, 0.01, (m, und_n)))
    dev = torch.device("cuda")

    def ncdf(x):
        return 0.5 * torch.erfc(-x / math.sqrt(2.0))

    def price(put, s, k, r, q, v, t):
        st = torch.sqrt(t)
        vst = v * st
        d1 = (torch.log(s / k) + (r - q + 0.5 * v * v) * t) / vst
        d2 = d1 - vst
        dq, dr = torch.exp(-q * t), torch.exp(-r * t)
        call = s * dq * ncdf(d1) - k * dr * ncdf(d2)
        putp = k * dr * ncdf(-d2) - s * dq * ncdf(-d1)
        return torch.where(put, putp, call)

    def grid(b, p, u, sh):
        base = price(p, b["S"], b["K"], b["r"], b["q"], b["v"], b["T"])
        out = torch.empty(m, dtype=torch.float64, device=dev)
        for c in range(0, m, chunk):
            sp, vo, ra = (sh[k][c:c + chunk][:, u] for k in ("spot", "vol", "rate"))
            pr = price(p, b["S"] * (1.0 + sp), b["K"], b["r"] + ra, b["q"], b["v"] + vo, b["T"])
            out[c:c + chunk] = ((pr - base) * b["qty"]).sum(dim=1)
        return out

    def host_to_host():
        b = {k: torch.from_numpy(v).to(dev) for k, v in book.items()}
        sh = {k: torch.from_numpy(v).to(dev) for k, v in shocks.items()}
        return grid(b, torch.from_numpy(put).to(dev), torch.from_numpy(und).to(dev), sh).cpu().numpy()

    ms = wall_ms(host_to_host)
    record("risk_grid_10k_x_10k", "torch-f64-host-to-host", ms, options=n, scenarios=m,
           revaluations_per_s=round(n * m / (ms / 1e3)))
    b = {k: torch.from_numpy(v).to(dev) for k, v in book.items()}
    sh = {k: torch.from_numpy(v).to(dev) for k, v in shocks.items()}
    p, u = torch.from_numpy(put).to(dev), torch.from_numpy(und).to(dev)
    ms = bench(lambda: grid(b, p, u, sh), warmup=1, reps=5)
    record("risk_grid_10k_x_10k", "torch-f64-device", ms, options=n, scenarios=m,
           revaluations_per_s=round(n * m / (ms / 1e3)))


def interp(q):
    """kiln.ndimage's and cupyx's resampling on the same CuPy arrays, whole calls, at the
    sizes of kiln's `interp_gpu` bench (`bench_resample`); kiln's output compared with
    cupyx's first (max abs difference recorded: both interpolate in their own arithmetic)."""
    import cupy as cp
    import cupyx.scipy.ndimage as cnd

    import kiln.ndimage as knd

    def both(name, kfn, cfn, reps, **figures):
        diff = float(cp.abs(kfn().astype(cp.float64) - cfn().astype(cp.float64)).max())
        for peer, fn in (("kiln", kfn), ("cupyx", cfn)):
            ms = best_synced_ms(fn, reps)
            fig = {k: round(v / ms, 3) for k, v in figures.items()}
            record(name, peer, ms, max_diff_vs_cupyx=diff, **fig)

    n = 128 if q else 512
    vol = cp.asarray(np.random.default_rng(7).uniform(-1, 1, (n, n, n)).astype(np.float32))
    a = math.radians(30)
    m = np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])
    c = (n - 1) / 2.0
    off = tuple(float(v) for v in c - m @ np.full(3, c))
    m = cp.asarray(m)
    for order in (1, 3):
        kw = dict(order=order, mode="constant", prefilter=False)
        both("affine_rotate_%d^3_f32_order%d" % (n, order),
             lambda: knd.affine_transform(vol, m, off, **kw),
             lambda: cnd.affine_transform(vol, m, off, **kw), 3, gvoxels_per_s=n ** 3 / 1e6)
    del vol
    h = 256 if q else 2048
    img = cp.asarray(np.random.default_rng(8).uniform(-1, 1, (h, h)).astype(np.float32))
    for order in (1, 3):
        kw = dict(order=order, mode="mirror", prefilter=False)
        both("zoom2_%d^2_f32_order%d" % (h, order), lambda: knd.zoom(img, 2, **kw),
             lambda: cnd.zoom(img, 2, **kw), 5, mpixels_out_per_s=4 * h * h / 1e3)
    ii, jj = cp.meshgrid(cp.arange(h, dtype=cp.float64), cp.arange(h, dtype=cp.float64), indexing="ij")
    coords = cp.stack([ii + 0.37, jj + 0.37 - 0.21])
    kw = dict(order=3, mode="mirror", prefilter=False)
    both("map_coordinates_%d^2_f32_order3" % h, lambda: knd.map_coordinates(img, coords, **kw),
         lambda: cnd.map_coordinates(img, coords, **kw), 5, mpixels_out_per_s=h * h / 1e3)


def ndfilter(q):
    """kiln.ndimage's and cupyx's gaussian_filter and uniform_filter on the same CuPy
    float32 and float64 volumes, whole calls; kiln's result checked bit for bit against
    scipy's on a small volume first (its GPU linear filters keep scipy's arithmetic), and
    compared with cupyx's on the timed one."""
    import cupy as cp
    import cupyx.scipy.ndimage as cnd
    import scipy.ndimage as snd

    import kiln.ndimage as knd

    os.environ["KILN_GPU_PREVIEW"] = "1"  # the exact device path (opt-in)
    rng = np.random.default_rng(17)
    for dt in (np.float32, np.float64):
        h = rng.uniform(-1, 1, (37, 41, 29)).astype(dt)
        want = snd.gaussian_filter(h, 1.7, mode="reflect", truncate=4.0)
        got = cp.asnumpy(knd.gaussian_filter(cp.asarray(h), 1.7, mode="reflect", truncate=4.0))
        assert got.dtype == want.dtype and np.array_equal(got, want), "kiln's gaussian differs from scipy's"
    n = 128 if q else 512
    for dt in (np.float32, np.float64):
        x = cp.asarray(rng.uniform(-1, 1, (n, n, n)).astype(dt))
        tag = "f32" if dt == np.float32 else "f64"
        cases = [
            ("gaussian_s4_%d^3_%s" % (n, tag),
             lambda: knd.gaussian_filter(x, 4.0, mode="reflect", truncate=4.0),
             lambda: cnd.gaussian_filter(x, 4.0, mode="reflect", truncate=4.0)),
            ("uniform_7_%d^3_%s" % (n, tag),
             lambda: knd.uniform_filter(x, 7, mode="reflect"),
             lambda: cnd.uniform_filter(x, 7, mode="reflect")),
        ]
        # float64 uniform filters run on host copies in kiln (scipy's running sum has no
        # device kernel yet): timed at float32 only
        for name, kfn, cfn in cases[:1] if dt == np.float64 else cases:
            diff = float(cp.abs(kfn().astype(cp.float64) - cfn().astype(cp.float64)).max())
            for peer, fn in (("kiln", kfn), ("cupyx", cfn)):
                ms = best_synced_ms(fn, 3)
                record(name, peer, ms, gvoxels_per_s=round(n ** 3 / ms / 1e6, 3), max_diff_vs_cupyx=diff)
        del x
        cp.get_default_memory_pool().free_all_blocks()


def best_synced_ms(fn, reps=5):
    """The best of ``reps`` wall-clock calls of ``fn`` (after one warm-up), each followed by
    a device synchronize (CuPy), in ms."""
    import cupy as cp

    fn()
    cp.cuda.Device().synchronize()
    out = math.inf
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        out = min(out, time.perf_counter() - t)
    return out * 1e3


def label(q):
    """kiln.ndimage.label against cupyx.scipy.ndimage.label on the same CuPy masks, whole
    calls (both return the count, so both wait for the GPU); kiln's labels checked equal to
    scipy's first."""
    import cupy as cp
    import cupyx.scipy.ndimage as cnd
    import scipy.ndimage as snd

    import kiln.ndimage as knd

    rng = np.random.default_rng(11)
    cases = [((512, 512) if q else (4096, 4096), 0.5), ((64,) * 3 if q else (256,) * 3, 0.3)]
    for shape, density in cases:
        h = rng.random(shape) < density
        x = cp.asarray(h)
        s = snd.generate_binary_structure(len(shape), 1)
        want, wn = snd.label(h, s)
        got, n = knd.label(x, s)
        assert n == wn and np.array_equal(cp.asnumpy(got), want), "kiln's labels differ from scipy's"
        name = "label_%s_%.1f" % ("x".join(map(str, shape)), density)
        for peer, fn in (("kiln", lambda: knd.label(x, s)), ("cupyx", lambda: cnd.label(x, s))):
            ms = best_synced_ms(fn)
            record(name, peer, ms, mvoxels_per_s=round(h.size / ms / 1e3, 1), labels=int(wn))


def edt(q):
    """kiln.ndimage.distance_transform_edt against cupyx.scipy.ndimage.distance_transform_edt
    on the same CuPy masks, whole calls, distances alone and with the indices; kiln's results
    checked equal to scipy's first on a smaller mask, and its distances compared with
    cupyx's on the timed one."""
    import cupy as cp
    import cupyx.scipy.ndimage as cnd
    import scipy.ndimage as snd

    import kiln.ndimage as knd

    os.environ["KILN_GPU_PREVIEW"] = "1"  # the device path (opt-in)
    rng = np.random.default_rng(13)
    h = rng.random((96, 80, 72)) < 0.5
    wd, wi = snd.distance_transform_edt(h, return_indices=True)
    gd, gi = knd.distance_transform_edt(cp.asarray(h), return_indices=True)
    assert np.array_equal(cp.asnumpy(gd).view(np.uint64), wd.view(np.uint64)), "kiln's distances differ from scipy's"
    assert np.array_equal(cp.asnumpy(gi), wi), "kiln's indices differ from scipy's"
    cases = [((128,) * 3 if q else (512,) * 3, 0.5), ((128,) * 3 if q else (512,) * 3, 0.99),
             ((1024, 1024) if q else (4096, 4096), 0.5)]
    for shape, density in cases:
        x = cp.asarray(rng.random(shape) < density)
        kd = knd.distance_transform_edt(x)
        cd = cnd.distance_transform_edt(x)
        diff = float(cp.abs(kd - cd).max())
        del kd, cd
        name = "edt_%s_%.2f" % ("x".join(map(str, shape)), density)
        for peer, fn in (("kiln", lambda: knd.distance_transform_edt(x)),
                         ("cupyx", lambda: cnd.distance_transform_edt(x))):
            ms = best_synced_ms(fn)
            record(name, peer, ms, mvoxels_per_s=round(x.size / ms / 1e3, 1), max_diff_vs_cupyx=diff)
        for peer, fn in (("kiln", lambda: knd.distance_transform_edt(x, return_indices=True)),
                         ("cupyx", lambda: cnd.distance_transform_edt(x, return_indices=True))):
            ms = best_synced_ms(fn)
            record(name + "_indices", peer, ms, mvoxels_per_s=round(x.size / ms / 1e3, 1))
        cp.get_default_memory_pool().free_all_blocks()


ALL = [copy_bw, h2d, sigmoid, stencil, conv3d, monte_carlo, matmul, transpose, alloc, graphs,
       risk_grid, interp, user_paths, label, edt, ndfilter]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    print("torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)
    for f in ALL:
        if only and f.__name__ not in only:
            continue
        try:
            f(args.quick)
        except Exception as e:  # a failed peer is a finding, not a crash
            print(json.dumps({"workload": f.__name__, "error": repr(e)[:400]}), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(RESULTS, fh, indent=1)
    print("\n%-26s %-24s %10s  %s" % ("workload", "peer", "ms", "figures"))
    for r in RESULTS:
        extra = {k: v for k, v in r.items() if k not in ("workload", "peer", "ms")}
        print("%-26s %-24s %10.4f  %s" % (r["workload"], r["peer"], r["ms"], extra))
