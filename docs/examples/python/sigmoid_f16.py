"""A half-precision sigmoid as an element-wise expression kernel with
``kiln.ElementwiseKernel`` (CuPy's API). The same kernel runs on NumPy arrays (kiln's CPU
path) and on CuPy arrays (the GPU).

In CuPy's typing, arithmetic on float16 values stays float16, rounded back to half after
every operation: ``y = 1 / (1 + exp(-x))`` written on ``x`` would round four times.
Converting ``x`` to a ``float`` local first keeps the intermediates in float; the
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
