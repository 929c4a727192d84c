"""A Monte Carlo path loop (``kernels/mc_gbm.cu``) with ``kiln.RawKernel``: a European call
under geometric Brownian motion, a counter-based generator (Philox4x32-10) in the kernel,
per-block partial sums, and the host finishing the mean and its standard error.

    import kiln
    from mc_gbm import price_call
    p, se = price_call(spot=100, strike=105, rate=0.03, dividend=0.01, volatility=0.25,
                       maturity=1.5, paths=1 << 20, steps=7, seed=1)
    ref = kiln.price({"spot": 100.0, "strike": 105.0, "rate": 0.03, "dividend": 0.01,
                      "volatility": 0.25, "maturity": 1.5})["price"][0]   # closed form
"""

import math

import numpy as np

import kiln
from _source import kernel_source

SOURCE = kernel_source("mc_gbm.cu")
THREADS = 256  # the kernel's THREADS (it sizes the kernel's shared arrays)
MAX_BLOCKS = 4096  # beyond this each thread loops over more paths


def price_call(spot, strike, rate, dividend, volatility, maturity, paths=1 << 20, steps=16,
               seed=0):
    """(price, standard error) of a European call by ``paths`` GBM paths of ``steps``
    steps on the GPU; the same arguments give the same bits."""
    import cupy as cp

    if paths < 2 or steps < 1:
        raise ValueError(f"need at least 2 paths and 1 step, got {paths} and {steps}")
    blocks = min((paths + THREADS - 1) // THREADS, MAX_BLOCKS)
    partial = cp.full(2 * blocks, cp.nan, dtype=cp.float64)  # sums, then sums of squares
    kernel = kiln.RawKernel(SOURCE, "mc_gbm_call")
    f32 = np.float32
    kernel((blocks,), (THREADS,), (partial, f32(spot), f32(strike), f32(rate), f32(dividend),
                                   f32(volatility), f32(maturity), np.int32(steps),
                                   np.int64(paths), np.uint64(seed)))
    sums = cp.asnumpy(partial)
    s, s2 = float(sums[:blocks].sum()), float(sums[blocks:].sum())
    mean = s / paths
    var = max((s2 - s * mean) / (paths - 1), 0.0)  # the payoffs' sample variance
    discount = math.exp(-rate * maturity)
    return discount * mean, discount * math.sqrt(var / paths)
