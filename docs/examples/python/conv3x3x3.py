"""A 3x3x3 volume correlation (``kernels/conv3x3x3.cu``) with ``kiln.RawKernel``: a 3-D
grid, one thread per voxel, mode ``nearest``; ``kiln.filter3d(volume, weights,
mode="nearest")`` computes the same.

    import cupy as cp, kiln
    from conv3x3x3 import conv3x3x3
    vol = cp.random.random((33, 45, 29), dtype=cp.float32)
    w = cp.random.random((3, 3, 3), dtype=cp.float32)
    out = conv3x3x3(vol, w)
    ref = kiln.filter3d(vol, w, mode="nearest", path="direct", out_type="like")
"""

import numpy as np

import kiln
from _source import kernel_source

SOURCE = kernel_source("conv3x3x3.cu")
BLOCK = (32, 4, 2)  # 32 threads along x (a warp reads one row), 4 rows, 2 planes


def conv3x3x3(volume, weights):
    """Correlate a float32 (d, h, w) CuPy ``volume`` with 3x3x3 ``weights`` (mode nearest)."""
    import cupy as cp

    d, h, w = volume.shape
    volume = cp.ascontiguousarray(volume, dtype=cp.float32)
    weights = cp.ascontiguousarray(cp.asarray(weights, dtype=cp.float32).reshape(3, 3, 3))
    out = cp.full((d, h, w), cp.nan, dtype=cp.float32)  # poisoned
    kernel = kiln.RawKernel(SOURCE, "conv3x3x3")
    grid = tuple((s + b - 1) // b for s, b in zip((w, h, d), BLOCK))
    kernel(grid, BLOCK, (volume, out, weights, np.int32(d), np.int32(h), np.int32(w)))
    return out
