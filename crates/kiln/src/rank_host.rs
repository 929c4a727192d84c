//! Rank filters and grey morphology on host buffers of every dtype scipy.ndimage takes
//! (bool, int8 to int64, uint8 to uint64, float32, float64), with scipy's results bit for bit:
//! the CPU path of front ends holding host arrays of dtypes kiln tensors do not (NumPy's
//! int64, say). Tensors of u8, u16, f32 and f64 go through [`crate::rank`] instead.
//!
//! Values are native-endian bytes of an [`NdDType`] in, bytes of the output dtype out,
//! converted as scipy's C code stores a result into an `output=` array of another type (see
//! `kiln_core::imaging::rank_value`). The algorithms are `kiln_cpu::imaging::rank_scipy`'s.
//!
//! ```
//! use kiln::rank::{RankFunction, RankParams};
//! use kiln::rank_host::{rank_bytes, NdDType};
//! let x: Vec<u8> = [5i64, -1, 9].iter().flat_map(|v| v.to_ne_bytes()).collect();
//! let y = rank_bytes(&x, NdDType::I64, &[3], RankFunction::Minimum, &RankParams::size(&[3]), NdDType::I64, false)?;
//! assert_eq!(y[..8], (-1i64).to_ne_bytes());
//! # Ok::<(), kiln::Error>(())
//! ```

use kiln_core::imaging::rank_value::{f64_to_bytes, values_from_bytes, values_to_bytes};
pub use kiln_core::imaging::rank_value::{NdDType, RankValue};
use kiln_core::{Error, Result};
use kiln_cpu::imaging::rank_scipy::{rank_scipy, structure_scipy};

use crate::rank::{RankFunction, RankParams, RankSpec};

/// `f` with window `p` on `bytes` (values of `dtype` in row-major `shape`, 1 to 3 axes,
/// non-empty), stored as `out` values; returns `out`'s bytes. `grey_opening` and
/// `grey_closing` keep their intermediate in `dtype`, as scipy's do.
///
/// `exact`: keep 64-bit integers exact, as scipy's 1-D rank filter (`_rank_filter_1d`) does;
/// otherwise they pass through a double (rounding beyond 2^53) as in scipy's n-D C code.
pub fn rank_bytes(
    bytes: &[u8],
    dtype: NdDType,
    shape: &[usize],
    f: RankFunction,
    p: &RankParams,
    out: NdDType,
    exact: bool,
) -> Result<Vec<u8>> {
    match dtype {
        NdDType::Bool | NdDType::U8 => run::<u8>(bytes, shape, f, p, out, exact),
        NdDType::I8 => run::<i8>(bytes, shape, f, p, out, exact),
        NdDType::I16 => run::<i16>(bytes, shape, f, p, out, exact),
        NdDType::I32 => run::<i32>(bytes, shape, f, p, out, exact),
        NdDType::I64 => run::<i64>(bytes, shape, f, p, out, exact),
        NdDType::U16 => run::<u16>(bytes, shape, f, p, out, exact),
        NdDType::U32 => run::<u32>(bytes, shape, f, p, out, exact),
        NdDType::U64 => run::<u64>(bytes, shape, f, p, out, exact),
        NdDType::F32 => run::<f32>(bytes, shape, f, p, out, exact),
        NdDType::F64 => run::<f64>(bytes, shape, f, p, out, exact),
    }
}

fn run<T: RankValue>(
    bytes: &[u8],
    shape: &[usize],
    f: RankFunction,
    p: &RankParams,
    out: NdDType,
    exact: bool,
) -> Result<Vec<u8>> {
    let op = f.name();
    let dims = shape.len();
    if !(1..=3).contains(&dims) {
        return Err(Error::invalid(
            op,
            format!("expected 1 to 3 axes, got shape {shape:?}"),
        ));
    }
    if shape.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("the input is empty (shape {shape:?})"),
        ));
    }
    let mut s3 = [1usize; 3];
    s3[3 - dims..].copy_from_slice(shape);
    let x: Vec<T> = values_from_bytes(op, bytes)?;
    kiln_core::backend::check_same_len(op, shape.iter().product(), x.len())?;
    let _r = crate::profiler().host_range(op);
    let cval = p.mode.cval().unwrap_or(0.0);
    let spec = match f {
        RankFunction::Median => RankSpec::median_filter(dims, p)?,
        RankFunction::Rank(r) => RankSpec::rank_filter(dims, r, p)?,
        RankFunction::Percentile(q) => RankSpec::percentile_filter(dims, q, p)?,
        RankFunction::Minimum => RankSpec::minimum_filter(dims, p)?,
        RankFunction::Maximum => RankSpec::maximum_filter(dims, p)?,
        RankFunction::GreyErosion => RankSpec::grey_erosion(dims, p)?,
        RankFunction::GreyDilation => RankSpec::grey_dilation(dims, p)?,
        RankFunction::GreyOpening => {
            let e = stored(
                rank_scipy(&x, s3, &RankSpec::grey_erosion(dims, p)?, cval)?,
                exact,
            );
            return finish(&e, s3, &RankSpec::grey_dilation(dims, p)?, cval, out, exact);
        }
        RankFunction::GreyClosing => {
            let d = stored(
                rank_scipy(&x, s3, &RankSpec::grey_dilation(dims, p)?, cval)?,
                exact,
            );
            return finish(&d, s3, &RankSpec::grey_erosion(dims, p)?, cval, out, exact);
        }
    };
    finish(&x, s3, &spec, cval, out, exact)
}

/// A selection as scipy stores it: through a double unless `exact`.
fn stored<T: RankValue>(v: Vec<T>, exact: bool) -> Vec<T> {
    if T::WIDE && !exact {
        v.into_iter().map(T::via_f64).collect()
    } else {
        v
    }
}

/// One step into `out`: a structure's doubles converted once (scipy stores them straight
/// into the output), a selection's values of `T` converted through a double.
fn finish<T: RankValue>(
    x: &[T],
    s3: [usize; 3],
    spec: &RankSpec,
    cval: f64,
    out: NdDType,
    exact: bool,
) -> Result<Vec<u8>> {
    if spec.structure.is_some() {
        return Ok(f64_to_bytes(&structure_scipy(x, s3, spec, cval)?, out));
    }
    let r = stored(rank_scipy(x, s3, spec, cval)?, exact);
    let same = out.name() == T::NAME || (out == NdDType::Bool && T::BYTE);
    Ok(if same {
        values_to_bytes(&r)
    } else {
        let d: Vec<f64> = r.iter().map(|v| v.to_f64()).collect();
        f64_to_bytes(&d, out)
    })
}
