//! [`CpuStorage`]: a tensor's elements in host memory, and the CPU implementation of
//! [`BackendStorage`] over it. Every op calls the same functions as the slice-level API
//! (`elementwise::map`, `imaging::filter2d_into`, `linalg::gemm`, `imaging::rank`,
//! `imaging::morphology`), so a tensor op and the host-slice op give the same bits.

use crate::{elementwise, imaging, linalg, HostBuf};
use kiln_core::backend::{bf16, f16};
use kiln_core::backend::{check_same_len, Element, MapOp};
use kiln_core::imaging::morphology::BinarySpec;
use kiln_core::imaging::rank::RankSpec;
use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D, Separable};
use kiln_core::linalg::{Gemm, GemmImpl, GemmPrecision};
use kiln_core::storage::{cast_f64, check_cast, unsupported_dtype, BackendStorage, Device};
use kiln_core::{DType, Error, Result};
use rayon::prelude::*;

/// Host elements of one dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum CpuStorage {
    /// f32 elements.
    F32(HostBuf<f32>),
    /// f64 elements.
    F64(HostBuf<f64>),
    /// IEEE half elements.
    F16(HostBuf<f16>),
    /// bfloat16 elements.
    BF16(HostBuf<bf16>),
    /// 8-bit unsigned elements.
    U8(HostBuf<u8>),
    /// 16-bit unsigned elements.
    U16(HostBuf<u16>),
}

/// A Rust type a [`CpuStorage`] (and a tensor) can hold.
pub trait StorageElement: kiln_core::HasDType + Default + std::fmt::Debug + PartialEq {
    /// Wrap a vector.
    fn into_storage(v: Vec<Self>) -> CpuStorage;
    /// Borrow the vector, if `s` holds this type.
    fn slice(s: &CpuStorage) -> Option<&[Self]>;
    /// The value as f64 (exact).
    fn to_f64(self) -> f64;
    /// The element with value `x` (which [`cast_f64`] has already made representable).
    fn from_f64(x: f64) -> Self;
}

macro_rules! storage_element {
    ($t:ty, $variant:ident, |$x:ident| $to:expr, |$y:ident| $from:expr) => {
        impl StorageElement for $t {
            fn into_storage(v: Vec<Self>) -> CpuStorage {
                CpuStorage::$variant(v.into())
            }
            fn slice(s: &CpuStorage) -> Option<&[Self]> {
                match s {
                    CpuStorage::$variant(v) => Some(v),
                    _ => None,
                }
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                let $x = self;
                $to
            }
            #[inline(always)]
            fn from_f64($y: f64) -> Self {
                $from
            }
        }
    };
}

storage_element!(f32, F32, |x| x as f64, |y| y as f32);
storage_element!(f64, F64, |x| x, |y| y);
storage_element!(f16, F16, |x| x.to_f64(), |y| f16::from_f64(y));
storage_element!(bf16, BF16, |x| x.to_f64(), |y| bf16::from_f64(y));
storage_element!(u8, U8, |x| x as f64, |y| y as u8);
storage_element!(u16, U16, |x| x as f64, |y| y as u16);

/// Run `$body` with `$v` bound to the typed vector, whatever the dtype.
#[macro_export]
#[doc(hidden)]
macro_rules! with_cpu_storage {
    ($s:expr, |$v:ident| $body:expr) => {
        match $s {
            $crate::storage::CpuStorage::F32($v) => $body,
            $crate::storage::CpuStorage::F64($v) => $body,
            $crate::storage::CpuStorage::F16($v) => $body,
            $crate::storage::CpuStorage::BF16($v) => $body,
            $crate::storage::CpuStorage::U8($v) => $body,
            $crate::storage::CpuStorage::U16($v) => $body,
        }
    };
}

fn cast_vec<S: StorageElement, D: StorageElement>(x: &[S]) -> Vec<D> {
    let mut out = vec![D::default(); x.len()];
    out.par_chunks_mut(1 << 16)
        .zip(x.par_chunks(1 << 16))
        .for_each(|(o, i)| {
            for (o, &v) in o.iter_mut().zip(i) {
                *o = D::from_f64(cast_f64(v.to_f64(), D::DTYPE));
            }
        });
    out
}

fn cast_to<S: StorageElement>(x: &[S], to: DType) -> CpuStorage {
    match to {
        DType::F32 => CpuStorage::F32(cast_vec(x).into()),
        DType::F64 => CpuStorage::F64(cast_vec(x).into()),
        DType::F16 => CpuStorage::F16(cast_vec(x).into()),
        DType::BF16 => CpuStorage::BF16(cast_vec(x).into()),
        DType::U8 => CpuStorage::U8(cast_vec(x).into()),
        DType::U16 => CpuStorage::U16(cast_vec(x).into()),
    }
}

fn map_vec<T: Element>(op: MapOp, x: &[T]) -> Vec<T> {
    // zeroed (calloc: pages arrive on first write, by the threads that write them)
    let mut out = vec![T::from_f32(0.0); x.len()];
    elementwise::map(op, x, &mut out);
    out
}

const FLOATS: &str = "f32, f16, bf16";

impl CpuStorage {
    /// Elements of `dtype` in another library's host memory, shared without a copy (see
    /// [`crate::ExternalHost`]); `None` when the bytes are not a whole number of aligned
    /// elements of `dtype`.
    pub fn shared(dtype: DType, memory: std::sync::Arc<dyn crate::ExternalHost>) -> Option<Self> {
        Some(match dtype {
            DType::F32 => CpuStorage::F32(HostBuf::shared(memory)?),
            DType::F64 => CpuStorage::F64(HostBuf::shared(memory)?),
            DType::F16 => CpuStorage::F16(HostBuf::shared(memory)?),
            DType::BF16 => CpuStorage::BF16(HostBuf::shared(memory)?),
            DType::U8 => CpuStorage::U8(HostBuf::shared(memory)?),
            DType::U16 => CpuStorage::U16(HostBuf::shared(memory)?),
        })
    }

    /// Whether the elements are another library's memory (shared through DLPack).
    pub fn is_shared(&self) -> bool {
        crate::with_cpu_storage!(self, |v| v.is_shared())
    }

    /// Zeros of `dtype`.
    pub fn zeros(dtype: DType, n: usize) -> Self {
        match dtype {
            DType::F32 => CpuStorage::F32(vec![0.0; n].into()),
            DType::F64 => CpuStorage::F64(vec![0.0; n].into()),
            DType::F16 => CpuStorage::F16(vec![f16::ZERO; n].into()),
            DType::BF16 => CpuStorage::BF16(vec![bf16::ZERO; n].into()),
            DType::U8 => CpuStorage::U8(vec![0; n].into()),
            DType::U16 => CpuStorage::U16(vec![0; n].into()),
        }
    }

    /// The elements as `T`, if this storage holds `T`.
    pub fn as_slice<T: StorageElement>(&self) -> Option<&[T]> {
        T::slice(self)
    }
}

fn f32_only<'a>(op: &str, s: &'a CpuStorage) -> Result<&'a [f32]> {
    match s {
        CpuStorage::F32(v) => Ok(v),
        other => Err(unsupported_dtype(op, other.dtype(), "f32")),
    }
}

impl BackendStorage for CpuStorage {
    fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::F64(_) => DType::F64,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::U8(_) => DType::U8,
            CpuStorage::U16(_) => DType::U16,
        }
    }

    fn len(&self) -> usize {
        with_cpu_storage!(self, |v| v.len())
    }

    fn device(&self) -> Device {
        Device::Cpu
    }

    fn map(&self, op: MapOp) -> Result<Self> {
        op.validate()?;
        match self {
            CpuStorage::F32(v) => Ok(CpuStorage::F32(map_vec(op, v).into())),
            CpuStorage::F16(v) => Ok(CpuStorage::F16(map_vec(op, v).into())),
            CpuStorage::BF16(v) => Ok(CpuStorage::BF16(map_vec(op, v).into())),
            other => Err(unsupported_dtype(op.name(), other.dtype(), FLOATS)),
        }
    }

    fn axpy(&self, a: f32, y: &Self) -> Result<Self> {
        if !a.is_finite() {
            return Err(Error::invalid("axpy", format!("a = {a} must be finite")));
        }
        check_same_len("axpy", self.len(), y.len())?;
        fn run<T: Element>(a: f32, x: &[T], y: &[T]) -> Vec<T> {
            let mut out = y.to_vec();
            elementwise::axpy(a, x, &mut out);
            out
        }
        match (self, y) {
            (CpuStorage::F32(x), CpuStorage::F32(y)) => Ok(CpuStorage::F32(run(a, x, y).into())),
            (CpuStorage::F16(x), CpuStorage::F16(y)) => Ok(CpuStorage::F16(run(a, x, y).into())),
            (CpuStorage::BF16(x), CpuStorage::BF16(y)) => Ok(CpuStorage::BF16(run(a, x, y).into())),
            (x, y) if x.dtype() != y.dtype() => Err(Error::invalid(
                "axpy",
                format!("x is {} but y is {}; cast one of them", x.dtype(), y.dtype()),
            )),
            (x, _) => Err(unsupported_dtype("axpy", x.dtype(), FLOATS)),
        }
    }

    fn cast(&self, to: DType) -> Result<Self> {
        check_cast(self.dtype(), to)?;
        if self.dtype() == to {
            return Ok(self.clone());
        }
        Ok(with_cpu_storage!(self, |v| cast_to(v, to)))
    }

    fn transpose(&self, rows: usize, cols: usize) -> Result<Self> {
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| Error::invalid("transpose", "rows*cols overflows"))?;
        check_same_len("transpose", n, self.len())?;
        fn run<T: Copy + Send + Sync + Default>(x: &[T], rows: usize, cols: usize) -> Vec<T> {
            let mut out = vec![T::default(); x.len()];
            elementwise::transpose(x, rows, cols, &mut out);
            out
        }
        Ok(match self {
            CpuStorage::F32(v) => CpuStorage::F32(run(v, rows, cols).into()),
            CpuStorage::F64(v) => CpuStorage::F64(run(v, rows, cols).into()),
            CpuStorage::F16(v) => CpuStorage::F16(run(v, rows, cols).into()),
            CpuStorage::BF16(v) => CpuStorage::BF16(run(v, rows, cols).into()),
            CpuStorage::U8(v) => CpuStorage::U8(run(v, rows, cols).into()),
            CpuStorage::U16(v) => CpuStorage::U16(run(v, rows, cols).into()),
        })
    }

    fn filter2d(
        &self,
        shape: [usize; 3],
        kernel: &Kernel2D,
        mode: BoundaryMode,
        sep: Option<&Separable>,
    ) -> Result<Self> {
        let x = f32_only("filter2d", self)?;
        let mut out = vec![0.0f32; x.len()];
        imaging::filter2d_into(x, shape, kernel, mode, path_of(sep), &mut out)?;
        Ok(CpuStorage::F32(out.into()))
    }

    fn filter3d(
        &self,
        shape: [usize; 3],
        kernel: &Kernel3D,
        mode: BoundaryMode,
        sep: Option<&Separable>,
    ) -> Result<Self> {
        let x = f32_only("filter3d", self)?;
        let mut out = vec![0.0f32; x.len()];
        imaging::filter3d_into(x, shape, kernel, mode, path_of(sep), &mut out)?;
        Ok(CpuStorage::F32(out.into()))
    }

    fn ndimage_linear(
        &self,
        shape: [usize; 3],
        f: &kiln_core::imaging::linear::LinearFilter,
    ) -> Result<Self> {
        if let CpuStorage::F64(x) = self {
            // float64 in float64 (scipy's arithmetic on a float64 array)
            let mut out = vec![0.0f64; x.len()];
            imaging::linear_into_f64(x, shape, f, &mut out)?;
            return Ok(CpuStorage::F64(out.into()));
        }
        // 8/16-bit data: filtered in f32, written back rounded and clamped (cast_f64's rule)
        let x: std::borrow::Cow<[f32]> = match self {
            CpuStorage::F32(v) => std::borrow::Cow::Borrowed(v),
            CpuStorage::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
            CpuStorage::U16(v) => v.iter().map(|&x| f32::from(x)).collect(),
            other => return Err(unsupported_dtype(&f.name, other.dtype(), "f32, f64, u8, u16")),
        };
        let mut out = vec![0.0f32; x.len()];
        imaging::linear_into(&x, shape, f, &mut out)?;
        let out = CpuStorage::F32(out.into());
        match self.dtype() {
            DType::F32 => Ok(out),
            to => out.cast(to),
        }
    }

    fn matmul(&self, b: &Self, g: &Gemm, p: GemmPrecision, imp: GemmImpl) -> Result<Self> {
        if imp != GemmImpl::Library {
            return Err(Error::Unsupported {
                op: format!(
                    "gemm with the {} kernel (a CUDA kernel; the CPU runs faer)",
                    imp.name()
                ),
                backend: "cpu".into(),
            });
        }
        match (self, b) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => Ok(CpuStorage::F32(linalg::gemm(a, b, g, p)?.into())),
            (CpuStorage::F16(a), CpuStorage::F16(b)) => Ok(CpuStorage::F16(linalg::gemm(a, b, g, p)?.into())),
            (CpuStorage::BF16(a), CpuStorage::BF16(b)) => {
                Ok(CpuStorage::BF16(linalg::gemm(a, b, g, p)?.into()))
            }
            (a, b) if a.dtype() != b.dtype() => Err(Error::invalid(
                "gemm",
                format!("A is {} but B is {}; cast one of them", a.dtype(), b.dtype()),
            )),
            (a, _) => Err(unsupported_dtype("gemm", a.dtype(), FLOATS)),
        }
    }

    fn rank_filter(&self, shape: [usize; 3], spec: &RankSpec, op: &str) -> Result<Self> {
        imaging::rank::rank_filter_storage(self, shape, spec, op)
    }

    fn binary_morph(&self, shape: [usize; 3], spec: &BinarySpec, op: &str) -> Result<Self> {
        binary_dtype(op, self)?;
        imaging::morphology::binary_storage(self, shape, spec)
    }

    fn binary_fill_holes(&self, shape: [usize; 3], spec: &BinarySpec) -> Result<Self> {
        binary_dtype("binary_fill_holes", self)?;
        imaging::morphology::fill_holes_storage(self, shape, spec)
    }
}

/// The binary ops take the dtypes the GPU takes (u8, u16, f32), though the CPU's truth test
/// reads any, so an error does not depend on the device.
fn binary_dtype(op: &str, s: &CpuStorage) -> Result<()> {
    match s.dtype() {
        DType::U8 | DType::U16 | DType::F32 => Ok(()),
        d => Err(unsupported_dtype(op, d, "u8, u16, f32")),
    }
}

/// The CPU path that runs what the facade resolved: the passes of `sep`, or the direct sum.
fn path_of(sep: Option<&Separable>) -> imaging::FilterPath {
    if sep.is_some() {
        imaging::FilterPath::Separable
    } else {
        imaging::FilterPath::Direct
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cast_round_trips_and_rejects() {
        let s = CpuStorage::F32(vec![0.4, 1.5, 2.5, 300.0, -3.0, f32::NAN].into());
        let u = s.cast(DType::U8).expect("cast");
        assert_eq!(u, CpuStorage::U8(vec![0, 2, 3, 255, 0, 0].into()));
        let back = u.cast(DType::F32).expect("cast back");
        assert_eq!(back, CpuStorage::F32(vec![0.0, 2.0, 3.0, 255.0, 0.0, 0.0].into()));
        assert!(CpuStorage::F64(vec![1.0].into()).cast(DType::F16).is_err());
        let h = s.cast(DType::F16).expect("f16");
        assert_eq!(h.dtype(), DType::F16);
    }

    #[test]
    fn ops_reject_wrong_dtypes_with_a_hint() {
        let u = CpuStorage::U8(vec![1, 2, 3].into());
        let e = u
            .map(MapOp::Unary(kiln_core::UnaryOp::Sigmoid))
            .unwrap_err()
            .to_string();
        assert!(e.contains("u8") && e.contains("cast"), "{e}");
        let f = CpuStorage::F32(vec![1.0; 3].into());
        let e = f
            .axpy(1.0, &CpuStorage::F16(vec![f16::ONE; 3].into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("f32") && e.contains("f16"), "{e}");
    }

    #[test]
    fn rank_and_binary_ops_take_the_gpus_dtypes() {
        use kiln_core::imaging::morphology::{BinaryParams, BinarySpec};
        use kiln_core::imaging::rank::{RankParams, RankSpec};
        let shape = [1, 2, 2];
        let h = CpuStorage::F16(vec![f16::ONE; 4].into());
        let med = RankSpec::median_filter(2, &RankParams::size(&[3])).expect("spec");
        let e = h
            .rank_filter(shape, &med, "median_filter")
            .unwrap_err()
            .to_string();
        assert!(e.contains("median_filter") && e.contains("f16"), "{e}");
        // f64 is the CPU's extra rank dtype, not a binary one
        let d = CpuStorage::F64(vec![1.0; 4].into());
        assert_eq!(
            d.rank_filter(shape, &med, "median_filter").expect("f64").dtype(),
            DType::F64
        );
        let ero = BinarySpec::erosion(2, &BinaryParams::default()).expect("spec");
        let e = d
            .binary_morph(shape, &ero, "binary_erosion")
            .unwrap_err()
            .to_string();
        assert!(e.contains("binary_erosion") && e.contains("u8, u16, f32"), "{e}");
        let fill = BinarySpec::fill_holes(2, None, &[]).expect("spec");
        let e = d.binary_fill_holes(shape, &fill).unwrap_err().to_string();
        assert!(e.contains("binary_fill_holes") && e.contains("f64"), "{e}");
        let u = CpuStorage::U8(vec![1, 1, 1, 1].into());
        assert_eq!(
            u.binary_fill_holes(shape, &fill).expect("u8"),
            CpuStorage::U8(vec![1; 4].into())
        );
    }
}
