"""A naive matrix product as a raw CUDA kernel (``kernels/matmul_naive.cu``) with
``kiln.RawKernel``, CuPy's API: a 2-D launch, arrays and NumPy scalars as arguments, and an
output poisoned with NaN before the launch so that an element the kernel forgets fails any
comparison.

    import cupy as cp, kiln
    from matmul_naive import matmul
    a = cp.random.random((65, 31), dtype=cp.float32)
    b = cp.random.random((31, 47), dtype=cp.float32)
    c = matmul(a, b)                                   # CuPy in, CuPy out
    ref = kiln.matmul(a, b, "f32", out_type="like")    # kiln's built-in
"""

import numpy as np

import kiln
from _source import kernel_source

SOURCE = kernel_source("matmul_naive.cu")
BLOCK = 16  # the kernel's 16x16 block: one thread per element of C


def matmul(a, b):
    """``a @ b`` for float32 CuPy arrays ``a`` (m, k) and ``b`` (k, n) on the GPU."""
    import cupy as cp

    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ValueError(f"shapes {a.shape} and {b.shape} do not multiply")
    a = cp.ascontiguousarray(a, dtype=cp.float32)
    b = cp.ascontiguousarray(b, dtype=cp.float32)
    c = cp.full((m, n), cp.nan, dtype=cp.float32)  # poisoned
    kernel = kiln.RawKernel(SOURCE, "matmul_naive")
    grid = ((n + BLOCK - 1) // BLOCK, (m + BLOCK - 1) // BLOCK)
    kernel(grid, (BLOCK, BLOCK), (a, b, c, np.int32(m), np.int32(n), np.int32(k)))
    return c
