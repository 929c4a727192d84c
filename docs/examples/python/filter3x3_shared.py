"""A 3x3 image filter with a shared-memory tile and halo (``kernels/filter3x3_shared.cu``)
with ``kiln.RawKernel``: scipy's correlation (not convolution), centred, mode ``nearest``,
which is ``kiln.filter2d(image, weights, mode="nearest")``.

    import cupy as cp, kiln
    from filter3x3_shared import filter3x3
    img = cp.random.random((67, 129), dtype=cp.float32)
    w = cp.random.random((3, 3), dtype=cp.float32)
    out = filter3x3(img, w)
    ref = kiln.filter2d(img, w, mode="nearest", path="direct", out_type="like")
"""

import numpy as np

import kiln
from _source import kernel_source

SOURCE = kernel_source("filter3x3_shared.cu")
TILE = 16  # the kernel's TILE: a 16x16 block per 16x16 output patch


def filter3x3(image, weights):
    """Correlate a float32 (h, w) CuPy ``image`` with 3x3 ``weights`` (mode nearest)."""
    import cupy as cp

    h, w = image.shape
    image = cp.ascontiguousarray(image, dtype=cp.float32)
    weights = cp.ascontiguousarray(cp.asarray(weights, dtype=cp.float32).reshape(3, 3))
    out = cp.full((h, w), cp.nan, dtype=cp.float32)  # poisoned
    kernel = kiln.RawKernel(SOURCE, "filter3x3_shared")
    grid = ((w + TILE - 1) // TILE, (h + TILE - 1) // TILE)
    kernel(grid, (TILE, TILE), (image, out, weights, np.int32(h), np.int32(w)))
    return out
