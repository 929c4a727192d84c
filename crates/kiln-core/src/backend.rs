//! The [`Backend`] trait: what every backend (CPU, CUDA) implements.
//!
//! Ops take and return host slices at this level; device-resident buffers are a detail of
//! the CUDA backend. Every op has a CPU implementation, which is also the numeric reference.

use crate::dtype::DType;
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
    /// `tanh(x)`.
    Tanh,
    /// `max(x, 0)` (NaN stays NaN).
    Relu,
    /// `exp(x)`.
    Exp,
}

impl UnaryOp {
    /// The op's name as kernels and the CLI spell it.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Relu => "relu",
            UnaryOp::Exp => "exp",
        }
    }

    /// The float64 reference value, used to verify every backend.
    pub fn reference(self, x: f64) -> f64 {
        match self {
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Relu => {
                if x.is_nan() {
                    x
                } else {
                    x.max(0.0)
                }
            }
            UnaryOp::Exp => x.exp(),
        }
    }

    /// Every op, for demos and tests.
    pub fn all() -> &'static [UnaryOp] {
        &[UnaryOp::Sigmoid, UnaryOp::Tanh, UnaryOp::Relu, UnaryOp::Exp]
    }
}

/// An element-wise map `y[i] = f(x[i])`: a [`UnaryOp`] or one of the parameterised ops.
/// Arithmetic is `f32` whatever the storage type ([`Element`]). (The two-input
/// `y = a*x + y` is `axpy`, a separate call.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MapOp {
    /// A parameter-free op.
    Unary(UnaryOp),
    /// `a * x + b`, one fused multiply-add in `f32`.
    ScaleShift {
        /// The scale.
        a: f32,
        /// The shift.
        b: f32,
    },
    /// `min(max(x, lo), hi)`; NaN stays NaN. Requires `lo <= hi`.
    Clamp {
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
    },
}

impl MapOp {
    /// The op's name (`sigmoid`, `scale_shift`, `clamp`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            MapOp::Unary(u) => u.name(),
            MapOp::ScaleShift { .. } => "scale_shift",
            MapOp::Clamp { .. } => "clamp",
        }
    }

    /// Reject parameters that do not define a function: non-finite `a`/`b`/bounds, `lo > hi`.
    pub fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(crate::Error::invalid(self.name(), why));
        match *self {
            MapOp::Unary(_) => Ok(()),
            MapOp::ScaleShift { a, b } if !(a.is_finite() && b.is_finite()) => {
                bad(format!("a = {a} and b = {b} must be finite"))
            }
            MapOp::Clamp { lo, hi } if lo.is_nan() || hi.is_nan() || lo > hi => {
                bad(format!("bounds [{lo}, {hi}] must be ordered numbers (lo <= hi)"))
            }
            _ => Ok(()),
        }
    }

    /// The `f32` value every backend computes (the CPU uses exactly this).
    #[inline(always)]
    pub fn apply(&self, x: f32) -> f32 {
        match *self {
            MapOp::Unary(UnaryOp::Sigmoid) => 1.0 / (1.0 + (-x).exp()),
            MapOp::Unary(UnaryOp::Tanh) => x.tanh(),
            MapOp::Unary(UnaryOp::Relu) => {
                if x > 0.0 || x.is_nan() {
                    x
                } else {
                    0.0
                }
            }
            MapOp::Unary(UnaryOp::Exp) => x.exp(),
            MapOp::ScaleShift { a, b } => a.mul_add(x, b),
            MapOp::Clamp { lo, hi } => {
                if x.is_nan() {
                    x
                } else {
                    x.max(lo).min(hi)
                }
            }
        }
    }

    /// The float64 reference value.
    pub fn reference(&self, x: f64) -> f64 {
        match *self {
            MapOp::Unary(u) => u.reference(x),
            MapOp::ScaleShift { a, b } => a as f64 * x + b as f64,
            MapOp::Clamp { lo, hi } => {
                if x.is_nan() {
                    x
                } else {
                    x.max(lo as f64).min(hi as f64)
                }
            }
        }
    }

    /// An upper bound of `|f(x)|` over `|x| <= m` (for [`Precision::Auto`]).
    pub fn output_bound(&self, m: f64) -> f64 {
        match *self {
            MapOp::Unary(UnaryOp::Sigmoid) | MapOp::Unary(UnaryOp::Tanh) => 1.0,
            MapOp::Unary(UnaryOp::Relu) => m,
            MapOp::Unary(UnaryOp::Exp) => m.exp(),
            MapOp::ScaleShift { a, b } => (a as f64).abs() * m + (b as f64).abs(),
            MapOp::Clamp { lo, hi } => m.min((lo as f64).abs().max((hi as f64).abs())),
        }
    }

    /// Small integer code the GPU kernels switch on (block-uniform, outside the loop).
    pub fn code(&self) -> u32 {
        match self {
            MapOp::Unary(UnaryOp::Sigmoid) => 0,
            MapOp::Unary(UnaryOp::Tanh) => 1,
            MapOp::Unary(UnaryOp::Relu) => 2,
            MapOp::Unary(UnaryOp::Exp) => 3,
            MapOp::ScaleShift { .. } => 4,
            MapOp::Clamp { .. } => 5,
        }
    }

    /// The two `f32` parameters passed to kernels (`a, b` or `lo, hi`; zeros otherwise).
    pub fn params(&self) -> (f32, f32) {
        match *self {
            MapOp::Unary(_) => (0.0, 0.0),
            MapOp::ScaleShift { a, b } => (a, b),
            MapOp::Clamp { lo, hi } => (lo, hi),
        }
    }
}

impl From<UnaryOp> for MapOp {
    fn from(u: UnaryOp) -> Self {
        MapOp::Unary(u)
    }
}

pub use half::{bf16, f16};

/// A storage type for element-wise data and transposes: `f32`, [`f16`] or [`bf16`].
/// Arithmetic always happens in `f32`; storing rounds to nearest-even.
pub trait Element: crate::dtype::HasDType + std::fmt::Debug + PartialEq {
    /// Widen to `f32` (exact).
    fn to_f32(self) -> f32;
    /// Round an `f32` to this type (nearest-even; overflow gives ±inf, NaN stays NaN).
    fn from_f32(x: f32) -> Self;
    /// The unit roundoff of the storage type (`2^-24`, `2^-11`, `2^-8`).
    const UNIT_ROUNDOFF: f64;
}

impl Element for f32 {
    const UNIT_ROUNDOFF: f64 = 5.960464477539063e-8;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }
}

impl Element for f16 {
    const UNIT_ROUNDOFF: f64 = 4.8828125e-4;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
}

impl Element for bf16 {
    const UNIT_ROUNDOFF: f64 = 3.90625e-3;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

/// The storage asked of an element-wise op on `f32` data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// Keep `f32`.
    #[default]
    F32,
    /// Store as IEEE half (range ±65504, 11-bit significand).
    F16,
    /// Store as bfloat16 (f32's range, 8-bit significand).
    BF16,
    /// Pick with [`Precision::resolve`].
    Auto,
}

/// What [`Precision::resolve`] chose and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PrecisionChoice {
    /// The storage type used.
    pub storage: DType,
    /// One sentence a user can act on.
    pub reason: String,
}

/// Smallest positive normal f16 (`2^-14`).
pub const F16_MIN_NORMAL: f64 = 6.103515625e-5;
/// Largest finite f16.
pub const F16_MAX: f64 = 65504.0;

impl Precision {
    /// The storage for `op` on `x`. `Auto` rules (documented choice):
    /// - `f16` when every finite |x| and the op's bound on |f(x)| are <= 65504 and every
    ///   non-zero finite |x| is >= 2^-14 (no input needs an f16 subnormal, so every input
    ///   keeps 11 significant bits: relative error <= 2^-11);
    /// - otherwise `bf16` when no finite non-zero |x| is below f32's smallest normal
    ///   (bf16 has f32's exponent range; relative error <= 2^-8) and the bounds fit;
    /// - otherwise `f32`. NaN and ±inf are representable in every storage and ignored.
    ///
    /// Outputs below 2^-14 (sigmoid of a large negative input, say) are stored as f16
    /// subnormals or zero: the absolute error there is <= 2^-25.
    pub fn resolve(self, op: &MapOp, x: &[f32]) -> PrecisionChoice {
        let fixed = |storage: DType, why: &str| PrecisionChoice {
            storage,
            reason: why.into(),
        };
        match self {
            Precision::F32 => return fixed(DType::F32, "f32 requested"),
            Precision::F16 => return fixed(DType::F16, "f16 requested"),
            Precision::BF16 => return fixed(DType::BF16, "bf16 requested"),
            Precision::Auto => {}
        }
        let (mut max, mut min) = (0.0f64, f64::INFINITY);
        for &v in x {
            let a = v.abs() as f64;
            if a.is_finite() {
                max = max.max(a);
                if a > 0.0 {
                    min = min.min(a);
                }
            }
        }
        let out = op.output_bound(max);
        if max <= F16_MAX && out <= F16_MAX && min >= F16_MIN_NORMAL {
            return PrecisionChoice {
                storage: DType::F16,
                reason: format!(
                    "auto: |x| in [{min:.3e}, {max:.3e}] and |{}(x)| <= {out:.3e} fit f16's normal range [6.1e-5, 65504]",
                    op.name()
                ),
            };
        }
        let why_not_f16 = if max > F16_MAX || out > F16_MAX {
            format!(
                "max |x| {max:.3e} / |{}(x)| bound {out:.3e} exceed f16's 65504",
                op.name()
            )
        } else {
            format!("min non-zero |x| {min:.3e} would be an f16 subnormal (< 6.1e-5)")
        };
        let bf_max = bf16::MAX.to_f32() as f64;
        if min >= f32::MIN_POSITIVE as f64 && max <= bf_max && out <= bf_max {
            return PrecisionChoice {
                storage: DType::BF16,
                reason: format!("auto: bf16, since {why_not_f16}; bf16 keeps f32's range"),
            };
        }
        PrecisionChoice {
            storage: DType::F32,
            reason: format!("auto: f32, since {why_not_f16} and the data needs f32 subnormals or range"),
        }
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
