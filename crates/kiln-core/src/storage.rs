//! The storage-level backend interface (candle's `BackendStorage` pattern).
//!
//! A storage is a flat, contiguous run of elements of one [`DType`] on one [`Device`]; the
//! shape belongs to the tensor that holds it and is passed to the ops that need one. Each
//! backend implements [`BackendStorage`] for its own storage type (`kiln_cpu::CpuStorage`,
//! `kiln_cuda::CudaStorage`), and the facade's `Tensor` holds an enum of the two and
//! dispatches with one `match`, never through `dyn`. Every op returns a new storage on the
//! same device; a CUDA op is queued on the device's current stream and returns at once.
//!
//! The element conversions ([`cast_f64`]) are defined here once, so that both backends'
//! casts are the same function of the input.
//!
//! Finance has its own interface beside this one, [`FinanceBackend`] (the Monte Carlo
//! engines, the risk grid, the implied-volatility book; module `finance` of this one): its
//! inputs are option specs and parameter columns rather than a storage, so it is not a
//! storage method.

use crate::backend::MapOp;
use crate::imaging::morphology::BinarySpec;
use crate::imaging::rank::RankSpec;
use crate::imaging::{BoundaryMode, Kernel2D, Kernel3D, Separable};
use crate::linalg::{Gemm, GemmImpl, GemmPrecision};
use crate::{DType, Error, Result};
use std::fmt;

mod finance;
pub use finance::{every_slot, per_option, BsGridBook, FinanceBackend, McBatch, McStreams, ShockGrid};

/// Where a tensor's storage lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host memory, computed on by the CPU backend.
    Cpu,
    /// The CUDA device with this ordinal.
    Cuda(usize),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// What every backend's storage can do. Methods check their arguments against the storage
/// (length, dtype) and return [`Error::InvalidArgument`], [`Error::ShapeMismatch`] or
/// [`Error::Unsupported`] (naming the dtype and what would work) rather than panic.
pub trait BackendStorage: Sized {
    /// The element type.
    fn dtype(&self) -> DType;
    /// Elements held.
    fn len(&self) -> usize;
    /// Whether it holds no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Where it lives.
    fn device(&self) -> Device;
    /// `op` element-wise (f32, f16 and bf16 storage; f32 arithmetic).
    fn map(&self, op: MapOp) -> Result<Self>;
    /// `a * self + y`, one f32 fma per element rounded once (f32, f16, bf16; same dtype).
    fn axpy(&self, a: f32, y: &Self) -> Result<Self>;
    /// Every element converted to `to` by [`cast_f64`]'s rules.
    fn cast(&self, to: DType) -> Result<Self>;
    /// The `cols x rows` transpose of a row-major `rows x cols` matrix.
    fn transpose(&self, rows: usize, cols: usize) -> Result<Self>;
    /// `n` planes of `h x w` (`shape = [n, h, w]`), each correlated with `kernel` under
    /// `mode` (f32): by the 1-D passes of `sep` when given, by the direct sum otherwise.
    fn filter2d(
        &self,
        shape: [usize; 3],
        kernel: &Kernel2D,
        mode: BoundaryMode,
        sep: Option<&Separable>,
    ) -> Result<Self>;
    /// A `(d, h, w)` volume correlated with `kernel` under `mode` (f32); see `filter2d`.
    fn filter3d(
        &self,
        shape: [usize; 3],
        kernel: &Kernel3D,
        mode: BoundaryMode,
        sep: Option<&Separable>,
    ) -> Result<Self>;
    /// A contiguous `(d, h, w)` f32 array through a linear ndimage filter (scipy's
    /// correlate, gaussian_filter, sobel, ...; planned in [`crate::imaging::linear`]).
    fn ndimage_linear(&self, shape: [usize; 3], f: &crate::imaging::linear::LinearFilter) -> Result<Self>;
    /// `op(A)·op(B)` per batch (`self` is A; layout in [`crate::linalg`]) in `p`'s storage.
    fn matmul(&self, b: &Self, g: &Gemm, p: GemmPrecision, imp: GemmImpl) -> Result<Self>;
    /// A `(d, h, w)` array through the rank filter or grey morphology op `spec` (scipy's
    /// median, rank, percentile, minimum and maximum filters, grey erosion and dilation;
    /// resolved in [`crate::imaging::rank`]): a new storage of the same dtype, the same bits
    /// on every backend. u8, u16 and f32 everywhere; the CPU also takes f64. Errors name
    /// `op` (the scipy function the caller ran): another dtype, `shape` not matching the
    /// length or empty.
    fn rank_filter(&self, shape: [usize; 3], spec: &RankSpec, op: &str) -> Result<Self>;
    /// A `(d, h, w)` array of u8, u16 or f32 (non-zero is true) through binary erosion or
    /// dilation `spec` with its iterations ([`crate::imaging::morphology`]): a u8 storage
    /// of 0 and 1. Errors name `op`: another dtype, `shape` not matching the length.
    fn binary_morph(&self, shape: [usize; 3], spec: &BinarySpec, op: &str) -> Result<Self>;
    /// scipy's `binary_fill_holes` of a `(d, h, w)` array of u8, u16 or f32 (non-zero is
    /// true), with the dilation `spec` of [`BinarySpec::fill_holes`]: a u8 storage of 0 and
    /// 1. Errors as `binary_morph`'s, named `binary_fill_holes`.
    fn binary_fill_holes(&self, shape: [usize; 3], spec: &BinarySpec) -> Result<Self>;
}

/// The value an element of `to` gets from the value `x` (exact for every source type as
/// f64): floats round to nearest-even (`f64 -> f32`, `-> f16`, `-> bf16`; overflow gives
/// ±inf, NaN stays NaN); integers take `x` rounded half away from zero and clamped to
/// their range, and NaN becomes 0 (as the CLI writes 8- and 16-bit images).
pub fn cast_f64(x: f64, to: DType) -> f64 {
    match to {
        DType::F64 => x,
        DType::F32 => x as f32 as f64,
        // f64 -> f16/bf16 through f32 rounds twice; the sources kiln casts from f64 are
        // rare and the double rounding can differ from a direct rounding only on exact
        // f32 ties, so the facade rejects f64 -> f16/bf16 (see `check_cast`).
        DType::F16 => half::f16::from_f32(x as f32).to_f64(),
        DType::BF16 => half::bf16::from_f32(x as f32).to_f64(),
        DType::U8 => int_of(x, 255.0),
        DType::U16 => int_of(x, 65535.0),
    }
}

fn int_of(x: f64, max: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        // `+ 0.0` turns -0.0 (from rounding -0.4, say) into the integer's 0
        x.round().clamp(0.0, max) + 0.0
    }
}

/// Whether `from -> to` is a cast kiln performs: every pair but `f64 -> f16` and
/// `f64 -> bf16` (see [`cast_f64`]: cast to f32 first, which makes the double rounding
/// explicit).
pub fn check_cast(from: DType, to: DType) -> Result<()> {
    if from == DType::F64 && matches!(to, DType::F16 | DType::BF16) {
        return Err(Error::invalid(
            "cast",
            format!("f64 -> {to} would round twice; cast to f32 first, then to {to}"),
        ));
    }
    Ok(())
}

/// The error for an op that does not take `dtype` on `backend`, saying what does.
pub fn unsupported_dtype(op: &str, dtype: DType, accepted: &str) -> Error {
    Error::invalid(
        op,
        format!("{dtype} tensors are not supported (accepted: {accepted}); convert with cast() first"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_round_and_clamp() {
        assert_eq!(cast_f64(2.5, DType::U8), 3.0);
        assert_eq!(cast_f64(-0.5, DType::U8), 0.0);
        assert_eq!(cast_f64(300.7, DType::U8), 255.0);
        assert_eq!(cast_f64(f64::NAN, DType::U16), 0.0);
        assert_eq!(cast_f64(70000.0, DType::U16), 65535.0);
        assert!(cast_f64(f64::NAN, DType::F16).is_nan());
        assert_eq!(cast_f64(1e6, DType::F16), f64::INFINITY);
        assert_eq!(cast_f64(1.0 + 1e-9, DType::F32), 1.0);
        assert!(check_cast(DType::F64, DType::F16).is_err());
        assert!(check_cast(DType::F32, DType::F16).is_ok());
    }

    #[test]
    fn devices_print_as_the_cli_spells_them() {
        assert_eq!(Device::Cpu.to_string(), "cpu");
        assert_eq!(Device::Cuda(1).to_string(), "cuda:1");
    }
}
