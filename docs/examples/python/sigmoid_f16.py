"""A half-precision sigmoid as an element-wise expression kernel with
``kiln.ElementwiseKernel`` (CuPy's API). The same kernel runs on NumPy arrays (kiln's CPU
path) and on CuPy arrays (the GPU).

Arithmetic on float16 values stays float16, rounded back to half after every operation,
and whether a math function of a half returns half or float depends on the half type in
scope (kiln's expressions follow <cmath>'s overloads: ``exp`` of a half is a float;
``cuda_fp16.h`` has a half ``hexp``). Converting ``x`` to a ``float``
local first keeps every intermediate in float under either typing; the
assignment to ``y`` rounds to half once, as ``kiln.sigmoid`` does on a float16 array.

    import numpy as np, kiln
    from sigmoid_f16 import sigmoid
    x = np.linspace(-8, 8, 1001).astype(np.float16)
    y = sigmoid(x)                                  # NumPy in: the CPU path
    ref = kiln.sigmoid(x, out_type="like")          # kiln's built-in, bit for bit on the CPU
"""

import kiln

SIGMOID_F16 = kiln.ElementwiseKernel(
    "float16 x", "float16 y", "float t = x; y = 1 / (1 + exp(-t));", "sigmoid_f16"
)


def sigmoid(x):
    """``1 / (1 + exp(-x))`` of a float16 NumPy or CuPy array, in the caller's array type."""
    return SIGMOID_F16(x)
