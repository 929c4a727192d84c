//! The [`Backend`] trait: what every backend (CPU, CUDA) implements.
//!
//! Ops take and return host slices at this level; device-resident buffers are a detail of
//! the CUDA backend. Every op has a CPU implementation, which is also the numeric reference.

use crate::error::Result;

/// Which kind of backend runs the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The CPU backend (rayon).
    Cpu,
    /// An NVIDIA GPU through CUDA.
    Cuda,
}

/// An element-wise unary operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
}

impl UnaryOp {
    /// The op's name as kernels and the CLI spell it.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Sigmoid => "sigmoid",
        }
    }

    /// The float64 reference value, used to verify every backend.
    pub fn reference(self, x: f64) -> f64 {
        match self {
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        }
    }

    /// Every op, for demos and tests.
    pub fn all() -> &'static [UnaryOp] {
        &[UnaryOp::Sigmoid]
    }
}

/// A compute backend.
pub trait Backend {
    /// CPU or CUDA.
    fn kind(&self) -> BackendKind;
    /// A short name: `cpu` or `cuda:N`.
    fn name(&self) -> String;
    /// Apply `op` element-wise: `out[i] = op(x[i])`. `x` and `out` must have equal lengths.
    fn unary_f32(&self, op: UnaryOp, x: &[f32], out: &mut [f32]) -> Result<()>;
}

/// Check that two slices an element-wise op pairs up have equal lengths.
pub fn check_same_len(op: &str, a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(crate::Error::ShapeMismatch {
            op: op.into(),
            expected: vec![a],
            got: vec![b],
        });
    }
    Ok(())
}
