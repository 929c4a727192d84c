//! A half-precision sigmoid as an element-wise expression kernel (CuPy's
//! `ElementwiseKernel`): the same kernel runs on a CPU runtime (kiln-expr's evaluator) and
//! on a GPU (generated CUDA C), and shows how a float16 kernel computes in float and rounds
//! to half once.
//!
//! Arithmetic on `float16` values stays `float16`, rounded back to half after every
//! operation; whether a math function of a half returns half or float depends on the
//! half type in scope (kiln's expressions follow `<cmath>`'s overloads: `exp` of a half
//! is a float; `cuda_fp16.h` has a half `hexp`). Converting
//! `x` to a `float` local first keeps every intermediate in float under either typing, so
//! the kernel means the same in CuPy and in kiln; the assignment to `y` rounds to
//! half once, which is what kiln's built-in `Tensor::sigmoid` on a float16 tensor does.

use kiln::core::backend::f16;
use kiln::expr::{Arg, ElementwiseKernel, HostArray};
use kiln::{Result, Runtime};

/// The kernel: float16 in and out, float arithmetic in between.
pub fn kernel() -> Result<ElementwiseKernel> {
    ElementwiseKernel::new(
        "float16 x",
        "float16 y",
        "float t = x; y = 1 / (1 + exp(-t));",
        "sigmoid_f16",
    )
}

/// `1 / (1 + exp(-x))` of every element of `x` on `rt`'s device (CPU or GPU).
pub fn sigmoid(rt: &Runtime, x: &[f16]) -> Result<Vec<f16>> {
    let out = rt.elementwise_kernel(
        &kernel()?,
        &[Arg::Array(HostArray::from_slice(&[x.len()], x))],
        None,
    )?;
    match out.first() {
        Some(y) => y.to_vec::<f16>(),
        None => Err(kiln::Error::invalid(
            "sigmoid_f16",
            "the kernel returned no output",
        )),
    }
}
