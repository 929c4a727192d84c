//! scipy.ndimage's three linear C routines on the CPU, for every dtype scipy takes, with
//! scipy's arithmetic operation for operation: `correlate1d` (`NI_Correlate1D`),
//! `uniform_filter1d` (`NI_UniformFilter1D`) and the n-D `correlate` (`NI_Correlate`).
//!
//! Every routine reads its input converted to `f64` (C's `(double)x`: 64-bit integers round
//! beyond 2^53), sums in `f64` and stores the result into the output's dtype with C's
//! conversion ([`RankValue::from_f64`]: truncation toward zero, wrapping through a 32- or
//! 64-bit integer, float32 rounded). scipy's multi-axis filters (`gaussian_filter`,
//! `uniform_filter`, `sobel`, `prewitt`) are chains of 1-D passes where each pass reads the
//! previous pass's *output array*; [`run_passes`] runs such a chain with the intermediate
//! stored in the output dtype between passes ([`quantizer`]), so an integer output truncates
//! and wraps between passes as scipy's does. Each pass has its own mode (scipy's mode per
//! axis).
//!
//! The formulas (sums in this order, starting as scipy's start):
//! - `correlate1d` of an odd kernel symmetric within `DBL_EPSILON`:
//!   `x[c]·w[c] + Σ_{m<c} (x[m] + x[n-1-m])·w[m]`; antisymmetric: the same with `-`;
//!   otherwise `x[n-1]·w[n-1] + Σ_{m<n-1} x[m]·w[m]`;
//! - `uniform_filter1d`: a running sum over the extended line (`s += x[i+n-1] - x[i-1]`),
//!   each output `s / n`;
//! - `correlate`: `0.0 + Σ w·x` over the weights with `|w| > DBL_EPSILON` in row-major order
//!   (`w·cval` outside under `constant`).
//!
//! Positions outside the array follow [`BoundaryMode::map_index`] (scipy's `NI_ExtendLine`).
//! Work is split over rayon: lines along the last axis, output rows of the other axes.

use rayon::prelude::*;

use super::rank_value::{f64_to_bytes, values_from_bytes, values_to_bytes, NdDType, RankValue};
use super::BoundaryMode;
use crate::error::{Error, Result};

/// What one 1-D pass computes.
#[derive(Clone, Debug, PartialEq)]
pub enum PassOp {
    /// `correlate1d` with these weights (correlation order, any length >= 1).
    Correlate(Vec<f64>),
    /// `uniform_filter1d` of this size (>= 1).
    Uniform(usize),
}

impl PassOp {
    fn len(&self) -> usize {
        match self {
            PassOp::Correlate(w) => w.len(),
            PassOp::Uniform(n) => *n,
        }
    }
}

/// One pass of a chain: `op` along `axis` with scipy's `origin`, reading outside the array
/// by `mode` (its cval under `constant`).
#[derive(Clone, Debug, PartialEq)]
pub struct Pass1d {
    /// The array axis (`0..ndim`).
    pub axis: usize,
    /// The pass.
    pub op: PassOp,
    /// scipy's origin: `-(n/2) <= origin <= (n-1)/2`.
    pub origin: isize,
    /// The boundary mode of this pass.
    pub mode: BoundaryMode,
}

fn bad(op: &str, why: impl Into<String>) -> Error {
    Error::invalid(op, why)
}

/// `n/2 + origin`, or scipy's error for an origin outside the kernel.
fn anchor(op: &str, n: usize, origin: isize) -> Result<usize> {
    if n == 0 {
        return Err(bad(op, "the filter size must be at least 1"));
    }
    let (lo, hi) = (-((n / 2) as isize), (n as isize - 1) / 2);
    if origin < lo || origin > hi {
        return Err(bad(
            op,
            format!("invalid origin {origin} for size {n}: it must satisfy {lo} <= origin <= {hi}"),
        ));
    }
    Ok(((n / 2) as isize + origin) as usize)
}

fn check_shape(op: &str, shape: &[usize], len: usize) -> Result<()> {
    if shape.is_empty() {
        return Err(bad(op, "the input has no axes"));
    }
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(op, format!("shape {shape:?} is too large")))?;
    if n != len {
        return Err(bad(op, format!("shape {shape:?} holds {n} values, got {len}")));
    }
    Ok(())
}

/// scipy's classification of a 1-D kernel (`NI_Correlate1D`, tolerance `DBL_EPSILON`): an
/// odd kernel whose taps mirror each other (or each other's negatives) is summed in pairs,
/// which rounds differently from the general sum; an even one runs the general formula.
/// kiln-cpu's f32 separable passes classify the same way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sym {
    /// `w[c + i] == w[c - i]` within `DBL_EPSILON`.
    Symmetric,
    /// `w[c + i] == -w[c - i]` within `DBL_EPSILON`.
    Anti,
    /// Anything else, and every even kernel.
    General,
}

/// scipy's classification of `w`, see [`Sym`].
pub fn classify(w: &[f64]) -> Sym {
    if w.len() % 2 == 0 {
        return Sym::General;
    }
    let c = w.len() / 2;
    if (1..=c).all(|i| (w[c + i] - w[c - i]).abs() <= f64::EPSILON) {
        Sym::Symmetric
    } else if (1..=c).all(|i| (w[c + i] + w[c - i]).abs() <= f64::EPSILON) {
        Sym::Anti
    } else {
        Sym::General
    }
}

/// `correlate1d` of a whole output row at once (`rows[m]`: the samples under tap `m`), each
/// element summed as scipy sums it (the module's formulas, in their order), in loops the
/// compiler can vectorise.
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
fn corr_rows(w: &[f64], sym: Sym, rows: &[&[f64]], out: &mut [f64]) {
    let n = w.len();
    let (first, taps) = match sym {
        Sym::General => (n - 1, 0..n - 1),
        Sym::Symmetric | Sym::Anti => (n / 2, 0..n / 2),
    };
    for (d, &x) in out.iter_mut().zip(rows[first]) {
        *d = x * w[first];
    }
    for m in taps {
        let wm = w[m];
        match sym {
            Sym::General => {
                for (d, &x) in out.iter_mut().zip(rows[m]) {
                    *d += x * wm;
                }
            }
            Sym::Symmetric => {
                for ((d, &a), &b) in out.iter_mut().zip(rows[m]).zip(rows[n - 1 - m]) {
                    *d += (a + b) * wm;
                }
            }
            Sym::Anti => {
                for ((d, &a), &b) in out.iter_mut().zip(rows[m]).zip(rows[n - 1 - m]) {
                    *d += (a - b) * wm;
                }
            }
        }
    }
}

/// One pass of `src` (shape `shape`) into a new array.
fn pass_once(src: &[f64], shape: &[usize], p: &Pass1d) -> Result<Vec<f64>> {
    let op = "correlate1d";
    if p.axis >= shape.len() {
        return Err(bad(
            op,
            format!("axis {} is out of range for {}-D data", p.axis, shape.len()),
        ));
    }
    let k = p.op.len();
    let a = anchor(op, k, p.origin)?;
    let n = shape[p.axis];
    let inner: usize = shape[p.axis + 1..].iter().product();
    let mut out = vec![0.0f64; src.len()];
    if src.is_empty() {
        return Ok(out);
    }
    let mode = p.mode;
    let cval = mode.cval().unwrap_or(0.0);
    let at = |j: usize, m: usize| mode.map_index(j as isize + m as isize - a as isize, n);
    if inner == 1 {
        // Lines along the last axis: each extended once into `ext[i] = x[i - a]`.
        out.par_chunks_mut(n).zip(src.par_chunks(n)).for_each_init(
            || vec![0.0f64; n + k - 1],
            |ext, (o, line)| {
                for (i, e) in ext.iter_mut().enumerate() {
                    *e = at(i, 0).map_or(cval, |j| line[j]);
                }
                line_pass(&p.op, ext, o);
            },
        );
        return Ok(out);
    }
    let cvals = vec![cval; inner];
    let slab = n * inner;
    let row = |o: usize, j: Option<usize>| -> &[f64] {
        match j {
            Some(j) => &src[o * slab + j * inner..][..inner],
            None => &cvals,
        }
    };
    match &p.op {
        PassOp::Correlate(w) => {
            let sym = classify(w);
            out.par_chunks_mut(inner).enumerate().for_each_init(
                Vec::new,
                |rows: &mut Vec<&[f64]>, (g, orow)| {
                    let (o, j) = (g / n, g % n);
                    rows.clear();
                    rows.extend((0..k).map(|m| row(o, at(j, m))));
                    corr_rows(w, sym, rows, orow);
                },
            );
        }
        PassOp::Uniform(size) => {
            // The running sum goes along the axis, so a slab is one task.
            let size = *size;
            out.par_chunks_mut(slab).enumerate().for_each(|(o, s)| {
                let mut tmp = vec![0.0f64; inner];
                for m in 0..size {
                    for (t, &x) in tmp.iter_mut().zip(row(o, at(0, m))) {
                        *t += x;
                    }
                }
                for (d, &t) in s[..inner].iter_mut().zip(&tmp) {
                    *d = t / size as f64;
                }
                for j in 1..n {
                    let (add, sub) = (row(o, at(j, size - 1)), row(o, at(j - 1, 0)));
                    let orow = &mut s[j * inner..][..inner];
                    for (((t, d), &x2), &x1) in tmp.iter_mut().zip(orow).zip(add).zip(sub) {
                        *t += x2 - x1;
                        *d = *t / size as f64;
                    }
                }
            });
        }
    }
    Ok(out)
}

/// `d[i] += w * v[i]`, rounded twice (no fused multiply-add), as scipy's sum does.
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
fn add_scaled(d: &mut [f64], v: &[f64], w: f64) {
    for (d, &v) in d.iter_mut().zip(v) {
        *d += w * v;
    }
}

/// One pass over an extended line (`ext[i + m]` is tap `m` of output `i`).
fn line_pass(op: &PassOp, ext: &[f64], out: &mut [f64]) {
    match op {
        PassOp::Correlate(w) => {
            // tap m of every output is the extended line shifted by m: whole rows at once
            let n = out.len();
            let rows: Vec<&[f64]> = (0..w.len()).map(|m| &ext[m..m + n]).collect();
            corr_rows(w, classify(w), &rows, out);
        }
        PassOp::Uniform(size) => {
            let size = *size;
            let mut tmp = 0.0f64;
            for &x in &ext[..size] {
                tmp += x;
            }
            out[0] = tmp / size as f64;
            for i in 1..out.len() {
                tmp += ext[i + size - 1] - ext[i - 1];
                out[i] = tmp / size as f64;
            }
        }
    }
}

/// Runs the 1-D `passes` in order on `x` (row-major, shape `shape`, any rank >= 1); between
/// passes every value goes through `store` (what the output array holds: [`quantizer`]).
/// Returns the last pass's sums, unstored (`x` itself when there is no pass).
pub fn run_passes(
    x: Vec<f64>,
    shape: &[usize],
    passes: &[Pass1d],
    store: &(dyn Fn(f64) -> f64 + Sync),
) -> Result<Vec<f64>> {
    check_shape("correlate1d", shape, x.len())?;
    let mut cur = x;
    for (i, p) in passes.iter().enumerate() {
        if i > 0 {
            cur.par_iter_mut().for_each(|v| *v = store(*v));
        }
        cur = pass_once(&cur, shape, p)?;
    }
    Ok(cur)
}

/// scipy's n-D `correlate` of `x` (row-major, shape `shape`) with `weights` (row-major,
/// shape `wshape`, same rank) placed by `origins` (one per axis), reading outside by `mode`.
pub fn correlate_nd(
    x: &[f64],
    shape: &[usize],
    weights: &[f64],
    wshape: &[usize],
    origins: &[isize],
    mode: BoundaryMode,
) -> Result<Vec<f64>> {
    let op = "correlate";
    check_shape(op, shape, x.len())?;
    let nd = shape.len();
    if wshape.len() != nd || origins.len() != nd {
        return Err(bad(
            op,
            format!("weights of shape {wshape:?} and origins {origins:?} for {nd}-D data"),
        ));
    }
    check_shape(op, wshape, weights.len())?;
    let anchors = wshape
        .iter()
        .zip(origins)
        .map(|(&n, &o)| anchor(op, n, o))
        .collect::<Result<Vec<_>>>()?;
    let mut out = vec![0.0f64; x.len()];
    if x.is_empty() {
        return Ok(out);
    }
    // Per axis: the index position i reads for tap t (None: cval).
    let maps: Vec<Vec<Option<usize>>> = (0..nd)
        .map(|a| {
            let (n, k) = (shape[a], wshape[a]);
            (0..n * k)
                .map(|q| mode.map_index((q / k) as isize + (q % k) as isize - anchors[a] as isize, n))
                .collect()
        })
        .collect();
    let mut strides = vec![1usize; nd];
    for a in (0..nd - 1).rev() {
        strides[a] = strides[a + 1] * shape[a + 1];
    }
    // The taps scipy keeps, in row-major order: (multi-index, weight).
    let taps: Vec<(Vec<usize>, f64)> = weights
        .iter()
        .enumerate()
        .filter(|(_, w)| w.abs() > f64::EPSILON)
        .map(|(mut q, &w)| {
            let mut idx = vec![0usize; nd];
            for a in (0..nd).rev() {
                idx[a] = q % wshape[a];
                q /= wshape[a];
            }
            (idx, w)
        })
        .collect();
    let cval = mode.cval().unwrap_or(0.0);
    let (wl, kl) = (shape[nd - 1], wshape[nd - 1]);
    let last = &maps[nd - 1];
    // The interior columns `lo..hi`, where tap t of column i reads column i + t - al:
    // summed tap by tap over whole runs of the row (the same sum per element, in the same
    // order, as the border's lookups). Checked against the map, so a mode that moved an
    // in-range index would only lose the fast run, never change a value.
    let al = anchors[nd - 1];
    let (mut lo, mut hi) = (al.min(wl), (wl + al + 1).saturating_sub(kl));
    if hi < lo || (lo..hi).any(|i| (0..kl).any(|t| last[i * kl + t] != Some(i + t - al))) {
        (lo, hi) = (0, 0);
    }
    out.par_chunks_mut(wl).enumerate().for_each_init(
        Vec::new,
        |bases: &mut Vec<(Option<usize>, usize, f64)>, (g, orow)| {
            // The row's position on the leading axes, then each tap's row base.
            let mut pos = vec![0usize; nd];
            let mut r = g;
            for a in (0..nd - 1).rev() {
                pos[a] = r % shape[a];
                r /= shape[a];
            }
            bases.clear();
            bases.extend(taps.iter().map(|(idx, w)| {
                let base = (0..nd - 1).try_fold(0usize, |b, a| {
                    maps[a][pos[a] * wshape[a] + idx[a]].map(|j| b + j * strides[a])
                });
                (base, idx[nd - 1], *w)
            }));
            // each output is `0.0 + Σ w·v` over the taps in order, as scipy sums it
            orow.fill(0.0);
            for &(base, t, w) in bases.iter() {
                let Some(b) = base else {
                    for d in orow.iter_mut() {
                        *d += w * cval;
                    }
                    continue;
                };
                for i in (0..lo).chain(hi..wl) {
                    orow[i] += w * last[i * kl + t].map_or(cval, |c| x[b + c]);
                }
                if lo < hi {
                    add_scaled(&mut orow[lo..hi], &x[b + lo + t - al..b + hi + t - al], w);
                }
            }
        },
    );
    Ok(out)
}

/// Values of `dtype` (native-endian bytes) as C's `(double)x`.
pub fn bytes_to_f64(op: &str, bytes: &[u8], dtype: NdDType) -> Result<Vec<f64>> {
    fn conv<T: RankValue>(op: &str, b: &[u8]) -> Result<Vec<f64>> {
        Ok(values_from_bytes::<T>(op, b)?
            .into_iter()
            .map(T::to_f64)
            .collect())
    }
    match dtype {
        NdDType::Bool | NdDType::U8 => conv::<u8>(op, bytes),
        NdDType::I8 => conv::<i8>(op, bytes),
        NdDType::I16 => conv::<i16>(op, bytes),
        NdDType::I32 => conv::<i32>(op, bytes),
        NdDType::I64 => conv::<i64>(op, bytes),
        NdDType::U16 => conv::<u16>(op, bytes),
        NdDType::U32 => conv::<u32>(op, bytes),
        NdDType::U64 => conv::<u64>(op, bytes),
        NdDType::F32 => conv::<f32>(op, bytes),
        NdDType::F64 => conv::<f64>(op, bytes),
    }
}

/// What an array of `dtype` holds after scipy stores `x` into it, read back as a double.
pub fn quantizer(dtype: NdDType) -> fn(f64) -> f64 {
    fn q<T: RankValue>(x: f64) -> f64 {
        T::from_f64(x).to_f64()
    }
    match dtype {
        NdDType::Bool | NdDType::U8 => q::<u8>,
        NdDType::I8 => q::<i8>,
        NdDType::I16 => q::<i16>,
        NdDType::I32 => q::<i32>,
        NdDType::I64 => q::<i64>,
        NdDType::U16 => q::<u16>,
        NdDType::U32 => q::<u32>,
        NdDType::U64 => q::<u64>,
        NdDType::F32 => q::<f32>,
        NdDType::F64 => |x| x,
    }
}

/// [`run_passes`] from bytes of `dtype` to bytes of `out` (at least one pass: with none,
/// scipy copies with numpy's cast, which is not C's).
pub fn passes_bytes(
    bytes: &[u8],
    dtype: NdDType,
    shape: &[usize],
    passes: &[Pass1d],
    out: NdDType,
) -> Result<Vec<u8>> {
    if passes.is_empty() {
        return Err(bad("correlate1d", "a chain needs at least one pass"));
    }
    let x = bytes_to_f64("correlate1d", bytes, dtype)?;
    let y = run_passes(x, shape, passes, &quantizer(out))?;
    Ok(f64_to_bytes(&y, out))
}

/// `(npy_uint64)x` as scipy's n-D `correlate` stores it: as [`RankValue::from_f64`] except
/// below -2^63, where that routine's compiled conversion gives `-(u64)(-x)` (the 1-D
/// routines give 2^63 there).
pub fn correlate_u64(x: f64) -> u64 {
    if x < -((1u64 << 63) as f64) {
        u64::from_f64(-x).wrapping_neg()
    } else {
        u64::from_f64(x)
    }
}

/// [`correlate_nd`] from bytes of `dtype` to bytes of `out`.
#[allow(clippy::too_many_arguments)]
pub fn correlate_bytes(
    bytes: &[u8],
    dtype: NdDType,
    shape: &[usize],
    weights: &[f64],
    wshape: &[usize],
    origins: &[isize],
    mode: BoundaryMode,
    out: NdDType,
) -> Result<Vec<u8>> {
    let x = bytes_to_f64("correlate", bytes, dtype)?;
    let y = correlate_nd(&x, shape, weights, wshape, origins, mode)?;
    if out == NdDType::U64 {
        let v: Vec<u64> = y.iter().map(|&v| correlate_u64(v)).collect();
        return Ok(values_to_bytes(&v));
    }
    Ok(f64_to_bytes(&y, out))
}

#[cfg(test)]
#[path = "scipy_cpu_tests.rs"]
mod tests;
