//! What the backends (CPU, CUDA) share below the storage trait: which kind of backend runs
//! the work ([`BackendKind`]), the element-wise ops ([`UnaryOp`], [`MapOp`]), the element
//! types they run on ([`Element`]) and the length check every slice-level entry point makes.
//! Tensors reach the backends through [`crate::storage::BackendStorage`].

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

    /// The `f32` value every backend computes (the CPU uses exactly this; `exp`, `tanh` and
    /// `sigmoid` are [`crate::mathf`]'s, which CUDA's `expf`/`tanhf` match to a few ulp).
    #[inline(always)]
    pub fn apply(&self, x: f32) -> f32 {
        match *self {
            MapOp::Unary(UnaryOp::Sigmoid) => crate::mathf::sigmoid(x),
            MapOp::Unary(UnaryOp::Tanh) => crate::mathf::tanh(x),
            MapOp::Unary(UnaryOp::Relu) => {
                if x > 0.0 || x.is_nan() {
                    x
                } else {
                    0.0
                }
            }
            MapOp::Unary(UnaryOp::Exp) => crate::mathf::exp(x),
            MapOp::ScaleShift { a, b } => a.mul_add(x, b),
            // Selects, not `max`/`min` (those drop NaN): NaN stays NaN, and an input of the
            // other zero's sign than a bound it equals passes unchanged.
            MapOp::Clamp { lo, hi } => {
                let x = if x < lo { lo } else { x };
                if x > hi {
                    hi
                } else {
                    x
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
    /// Widen a block (`dst.len() == src.len()`), bitwise as [`Element::to_f32`] element by
    /// element; the 16-bit types convert several elements per instruction.
    #[inline]
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.to_f32();
        }
    }
    /// Round a block (`dst.len() == src.len()`), bitwise as [`Element::from_f32`] element by
    /// element.
    #[inline]
    fn narrow_slice(src: &[f32], dst: &mut [Self]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = Self::from_f32(s);
        }
    }
    /// The slice itself when the storage is `f32` (so a block loop can skip converting).
    #[inline]
    fn as_f32_slice(_: &[Self]) -> Option<&[f32]> {
        None
    }
    /// The slice itself when the storage is `f32`.
    #[inline]
    fn as_f32_slice_mut(_: &mut [Self]) -> Option<&mut [f32]> {
        None
    }
}

impl Element for f32 {
    const UNIT_ROUNDOFF: f64 = 5.960464477539063e-8;
    #[inline]
    fn as_f32_slice(s: &[Self]) -> Option<&[f32]> {
        Some(s)
    }
    #[inline]
    fn as_f32_slice_mut(s: &mut [Self]) -> Option<&mut [f32]> {
        Some(s)
    }
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
    // Branch-free bit arithmetic the compiler vectorises (half's slice conversions call F16C
    // 4 or 8 elements at a time through a run-time check and do not inline into a loop).
    #[inline]
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f16_to_f32_branch_free(s.to_bits());
        }
    }
    #[inline]
    fn narrow_slice(src: &[f32], dst: &mut [Self]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = f16::from_bits(f16_bits_branch_free(s));
        }
    }
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
    #[inline]
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits(u32::from(s.to_bits()) << 16);
        }
    }
    #[inline]
    fn narrow_slice(src: &[f32], dst: &mut [Self]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = bf16::from_bits(bf16_bits_branch_free(s));
        }
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

/// `f16::from_bits(h).to_f32()` without branches: finite values are moved into f32's
/// exponent range by one exact multiplication by 2^112 (subnormals included); inf and NaN
/// get f32's all-ones exponent, NaN made quiet as `half` and F16C do.
#[inline(always)]
fn f16_to_f32_branch_free(h: u16) -> f32 {
    let h = u32::from(h);
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7fff;
    let finite = f32::from_bits(em << 13) * f32::from_bits(0x7780_0000); // * 2^112
    let quiet = if em > 0x7c00 { 0x0040_0000 } else { 0 };
    let special = (em << 13) | 0x7f80_0000 | quiet;
    let bits = if em >= 0x7c00 { special } else { finite.to_bits() };
    f32::from_bits(bits | sign)
}

/// `f16::from_f32(x).to_bits()` (nearest-even; overflow to inf; NaN quiet with the top
/// payload bits) without branches: normals round by integer add with the kept lsb,
/// subnormals by one f32 add of 0.5 that rounds at f16's subnormal ulp.
#[inline(always)]
fn f16_bits_branch_free(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = (b >> 16) & 0x8000;
    let a = b & 0x7fff_ffff;
    let special = if a > 0x7f80_0000 {
        0x7e00 | ((a >> 13) & 0x3ff)
    } else {
        0x7c00
    };
    // |x| < 2^-14: x + 0.5 puts f16's subnormal ulp (2^-24) at f32's ulp of 0.5
    let sub = (f32::from_bits(a) + 0.5).to_bits().wrapping_sub(0x3f00_0000);
    // rebias the exponent (127 -> 15) and round at bit 13, nearest-even
    let norm = a
        .wrapping_add(0xc800_0000) // (15 - 127) << 23
        .wrapping_add(0x0fff + ((a >> 13) & 1))
        >> 13;
    let o = if a >= 0x4780_0000 {
        special // |x| >= 2^16: inf or NaN in f16
    } else if a < 0x3880_0000 {
        sub
    } else {
        norm
    };
    (o | sign) as u16
}

/// `bf16::from_f32(x).to_bits()` (nearest-even; NaN keeps its sign and top payload bits and
/// becomes quiet) without branches, so a block loop vectorises.
#[inline(always)]
fn bf16_bits_branch_free(x: f32) -> u16 {
    let b = x.to_bits();
    let nan = (b & 0x7fff_ffff) > 0x7f80_0000;
    // adding 0x7fff plus the kept lsb carries into bit 16 exactly when rounding up
    let rounded = (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16;
    let quiet = ((b >> 16) | 0x0040) as u16;
    if nan {
        quiet
    } else {
        rounded
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The block conversions equal the per-element ones bitwise (65536 stored values one
    /// way; every 97th f32 pattern plus rounding boundaries the other way).
    #[test]
    fn block_conversions_equal_element_conversions() {
        fn check<T: Element>() {
            // every bf16 pattern, rounded to T (for f16: values of every magnitude)
            let h: Vec<T> = (0..=u16::MAX)
                .map(|b| T::from_f32(f32::from_bits(u32::from(b) << 16)))
                .collect();
            let mut w = vec![0f32; h.len()];
            T::widen_slice(&h, &mut w);
            for (a, b) in h.iter().zip(&w) {
                assert_eq!(a.to_f32().to_bits(), b.to_bits(), "{:?} widen {a:?}", T::DTYPE);
            }
            let mut xs: Vec<f32> = (0..=u32::MAX).step_by(97).map(f32::from_bits).collect();
            for hi in [
                0u32, 0x7f7f, 0x7f80, 0x7fc0, 0x3f80, 0x0001, 0x8001, 0xff80, 0xffff,
            ] {
                for lo in [0u32, 1, 0x7fff, 0x8000, 0x8001, 0xffff] {
                    xs.push(f32::from_bits(hi << 16 | lo));
                }
            }
            xs.extend([65504.0, 65520.0, 65519.99, 6e-8, 2.9e-8, 3e-8, -0.0, f32::NAN]);
            let mut n = vec![T::from_f32(0.0); xs.len()];
            T::narrow_slice(&xs, &mut n);
            for (&x, got) in xs.iter().zip(&n) {
                let want = T::from_f32(x);
                let same = got.to_f32().to_bits() == want.to_f32().to_bits()
                    || (x.is_nan() && got.to_f32().is_nan() && want.to_f32().is_nan());
                assert!(same, "{:?} narrow {x:e}: {got:?} vs {want:?}", T::DTYPE);
            }
        }
        check::<f16>();
        check::<bf16>();
    }

    /// The branch-free f16 conversions against `half` (F16C where the CPU has it): every
    /// f16 pattern widened, and f32 patterns around every f16 rounding boundary narrowed.
    #[test]
    fn f16_branch_free_conversions_equal_half() {
        for h in 0..=u16::MAX {
            let (got, want) = (f16_to_f32_branch_free(h), f16::from_bits(h).to_f32());
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "widen {h:#06x}: {got:e} vs {want:e}"
            );
            if !want.is_nan() {
                assert_eq!(got.to_bits(), want.to_bits(), "widen {h:#06x}");
            }
            // f32 values at, just around and halfway past each f16 value
            let w = want.to_bits();
            for b in [
                w,
                w.wrapping_add(1),
                w.wrapping_sub(1),
                w + 0x1000,
                w + 0xfff,
                w + 0x1001,
            ] {
                let x = f32::from_bits(b);
                let (g, r) = (f16_bits_branch_free(x), f16::from_f32(x).to_bits());
                assert!(
                    g == r || (x.is_nan() && f16::from_bits(g).is_nan()),
                    "narrow {x:e} ({b:#010x}): {g:#06x} vs {r:#06x}"
                );
            }
        }
    }

    #[test]
    fn bf16_nan_rounding_keeps_bits() {
        for b in [0x7f80_0001u32, 0xffc0_0000, 0x7fff_ffff, 0xff80_8000, 0x7fc1_2345] {
            let x = f32::from_bits(b);
            assert_eq!(bf16_bits_branch_free(x), bf16::from_f32(x).to_bits(), "{b:#x}");
        }
    }
}
