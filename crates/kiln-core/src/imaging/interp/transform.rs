//! The resampling loops of scipy's `NI_GeometricTransform` (`map_coordinates`,
//! `affine_transform`, `geometric_transform`) and `NI_ZoomShift` (`zoom`, `shift`, and
//! `affine_transform` with a diagonal matrix), over a row-major `f64` input.
//!
//! Each output point finds, along every input axis, the `order + 1` taps of its spline
//! (their flat offsets, mapped at the edges with the mode's spline boundary, or flagged as
//! outside for `grid-constant`) and their weights; [`accumulate`] then sums the taps in
//! scipy's order. Output points are computed in parallel chunks, each point on its own.

use rayon::prelude::*;

use super::boundary::map_coordinate;
use super::spline::weights_of_delta;
use super::{check_order, floor, store_value, InterpMode, Store};
use crate::error::{Error, Result};

#[path = "transform_fast.rs"]
mod fast;

/// Output points per parallel task.
const CHUNK: usize = 4096;

/// Where each output point samples the input.
#[derive(Clone, Copy, Debug)]
pub enum Mapping<'a> {
    /// `input_coordinate = matrix · output_index + shift`, with `matrix` row-major of
    /// `input rank × output rank` and `shift` of the input rank (scipy's affine path).
    Affine {
        /// The matrix, row-major.
        matrix: &'a [f64],
        /// The offset added to each row's dot product.
        shift: &'a [f64],
    },
    /// The input coordinates of every output point: `input rank` rows of the output's size
    /// (scipy's `coordinates` array, converted to `f64`), row-major.
    Coordinates(&'a [f64]),
}

/// The taps of one point along one axis.
#[derive(Clone, Copy, Default)]
struct Taps {
    /// Flat offsets (index × stride) of the taps.
    off: [i64; 6],
    /// Their weights (unused for order 0).
    w: [f64; 6],
    /// `grid-constant`: the tap lies outside the input and reads `cval`.
    cv: [bool; 6],
}

/// The fixed parameters of one call.
struct Ctx<'a> {
    ishape: &'a [usize],
    strides: Vec<i64>,
    order: usize,
    /// `grid-constant`, `nearest`, and the mode of the taps at an edge.
    gc: bool,
    nearest: bool,
    spline_mode: InterpMode,
    nprepad: f64,
}

/// Why a tap cannot be read: a coordinate too large for scipy's integer arithmetic.
fn too_far(op: &str, cc: f64) -> Error {
    Error::InvalidArgument {
        op: op.into(),
        reason: format!("coordinate {cc} is too large to be mapped into the input"),
    }
}

impl Ctx<'_> {
    /// The taps along `axis` of the coordinate `cc` (already offset by the prepadding and,
    /// except for `nearest` and `grid-constant`, mapped into the input); `None` when the
    /// point reads `cval` (scipy's `constant` flag: `cc <= -1`).
    #[inline]
    fn taps(&self, op: &str, axis: usize, cc: f64, t: &mut Taps) -> Result<Option<()>> {
        let gc = self.gc;
        if !(cc > -1.0 || gc || self.nearest) {
            return Ok(None);
        }
        let len = self.ishape[axis] as i64;
        let stride = self.strides[axis];
        let order = self.order as i64;
        let base = if self.order & 1 == 1 {
            floor(cc)
        } else {
            floor(cc + 0.5)
        };
        // a coordinate beyond ±2^62 saturates (scipy's C cast is undefined there)
        let start = (base.clamp(-4.6e18, 4.6e18) as i64) - order / 2;
        let edge = start < 0 || start + order >= len;
        if gc {
            for ll in 0..=self.order {
                let idx = start + ll as i64;
                t.cv[ll] = idx < 0 || idx >= len;
                t.off[ll] = if t.cv[ll] { 0 } else { idx * stride };
            }
        } else if edge {
            let spline_mode = self.spline_mode;
            for ll in 0..=self.order {
                let idx = start + ll as i64;
                let idx = map_coordinate(idx as f64, self.ishape[axis], spline_mode) as i64;
                if idx < 0 || idx >= len {
                    return Err(too_far(op, cc));
                }
                t.off[ll] = idx * stride;
            }
        } else {
            for ll in 0..=self.order {
                t.off[ll] = (start + ll as i64) * stride;
            }
        }
        if self.order != 0 {
            // the same reduction as scipy's get_spline_interpolation_weights
            weights_of_delta(cc - base, self.order, &mut t.w);
        }
        Ok(Some(()))
    }
}

/// The interpolated value from the taps of every axis: scipy's sum over the filter
/// footprint, last axis fastest, each tap's value multiplied by the axes' weights in axis
/// order, from `t = 0.0`.
fn accumulate(input: &[f64], taps: &[Taps], order: usize, cval: f64, gc: bool) -> f64 {
    let k = order + 1;
    let read = |off: i64| input[off as usize];
    let mut t = 0.0;
    match taps {
        [a] => {
            for i in 0..k {
                let mut c = if gc && a.cv[i] { cval } else { read(a.off[i]) };
                if order > 0 {
                    c *= a.w[i];
                }
                t += c;
            }
        }
        [a, b] => {
            for i in 0..k {
                for j in 0..k {
                    let mut c = if gc && (a.cv[i] || b.cv[j]) {
                        cval
                    } else {
                        read(a.off[i] + b.off[j])
                    };
                    if order > 0 {
                        c *= a.w[i];
                        c *= b.w[j];
                    }
                    t += c;
                }
            }
        }
        [a, b, d] => {
            for i in 0..k {
                for j in 0..k {
                    for l in 0..k {
                        let mut c = if gc && (a.cv[i] || b.cv[j] || d.cv[l]) {
                            cval
                        } else {
                            read(a.off[i] + b.off[j] + d.off[l])
                        };
                        if order > 0 {
                            c *= a.w[i];
                            c *= b.w[j];
                            c *= d.w[l];
                        }
                        t += c;
                    }
                }
            }
        }
        _ => {
            let rank = taps.len();
            let mut f = vec![0usize; rank];
            let size = k.pow(rank as u32);
            for _ in 0..size {
                let mut is_cval = false;
                let mut off = 0i64;
                for (ax, tp) in taps.iter().enumerate() {
                    is_cval |= gc && tp.cv[f[ax]];
                    off += tp.off[f[ax]];
                }
                let mut c = if is_cval { cval } else { read(off) };
                if order > 0 {
                    for (ax, tp) in taps.iter().enumerate() {
                        c *= tp.w[f[ax]];
                    }
                }
                t += c;
                for ax in (0..rank).rev() {
                    if f[ax] < order {
                        f[ax] += 1;
                        break;
                    }
                    f[ax] = 0;
                }
            }
        }
    }
    t
}

/// An output element: `f64`, or `f32` rounded once from the `f64` value (scipy's C cast).
pub trait OutValue: Copy + Send + Sync {
    /// The stored value.
    fn from_f64(v: f64) -> Self;
}

impl OutValue for f64 {
    #[inline]
    fn from_f64(v: f64) -> Self {
        v
    }
}

impl OutValue for f32 {
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

fn check_out(op: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(Error::InvalidArgument {
            op: op.into(),
            reason: format!("an output of {got} values for {want} points"),
        });
    }
    Ok(())
}

/// Row-major element strides of `shape`.
fn c_strides(shape: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as i64;
    }
    s
}

fn check_input(op: &str, input: &[f64], ishape: &[usize], order: usize) -> Result<()> {
    check_order(op, order)?;
    if ishape.is_empty() {
        return Err(Error::InvalidArgument {
            op: op.into(),
            reason: "input and output rank must be > 0".into(),
        });
    }
    if ishape.iter().product::<usize>() != input.len() {
        return Err(Error::ShapeMismatch {
            op: op.into(),
            expected: ishape.to_vec(),
            got: vec![input.len()],
        });
    }
    Ok(())
}

/// The multi-index of the flat row-major index `p` in `shape`.
fn unravel(mut p: usize, shape: &[usize], idx: &mut [usize]) {
    for ax in (0..shape.len()).rev() {
        let n = shape[ax].max(1);
        idx[ax] = p % n;
        p /= n;
    }
}

/// The next multi-index in row-major order.
fn advance(idx: &mut [usize], shape: &[usize]) {
    for ax in (0..shape.len()).rev() {
        idx[ax] += 1;
        if idx[ax] < shape[ax] {
            return;
        }
        idx[ax] = 0;
    }
}

/// scipy's `NI_GeometricTransform` for a `Mapping`: the `order`-spline interpolation of
/// `input` (row-major, `ishape`; already prefiltered for `order > 1` where scipy prefilters,
/// and prepadded by `nprepad` samples per side for `nearest` / `grid-constant`) at the
/// input coordinates of every point of an output of `oshape`, row-major, each value stored
/// as [`store_value`] does for `store`.
#[allow(clippy::too_many_arguments)]
pub fn geometric_transform(
    input: &[f64],
    ishape: &[usize],
    mapping: Mapping<'_>,
    oshape: &[usize],
    order: usize,
    mode: InterpMode,
    cval: f64,
    nprepad: usize,
    store: Store,
) -> Result<Vec<f64>> {
    let mut out = vec![0.0; oshape.iter().product()];
    geometric_transform_into(
        input, ishape, mapping, oshape, order, mode, cval, nprepad, store, &mut out,
    )?;
    Ok(out)
}

/// [`geometric_transform`] into `out` (the output's size), as `f64` or rounded to `f32`.
#[allow(clippy::too_many_arguments)]
pub fn geometric_transform_into<T: OutValue>(
    input: &[f64],
    ishape: &[usize],
    mapping: Mapping<'_>,
    oshape: &[usize],
    order: usize,
    mode: InterpMode,
    cval: f64,
    nprepad: usize,
    store: Store,
    out: &mut [T],
) -> Result<()> {
    geometric_impl(
        input, ishape, mapping, oshape, order, mode, cval, nprepad, store, out, true,
    )
}

/// [`geometric_transform_into`]; `fast` lets a 2-D affine map of order 0 or 1 take the
/// loop of `transform_fast.rs` (the same values: the tests compare both).
#[allow(clippy::too_many_arguments)]
pub(super) fn geometric_impl<T: OutValue>(
    input: &[f64],
    ishape: &[usize],
    mapping: Mapping<'_>,
    oshape: &[usize],
    order: usize,
    mode: InterpMode,
    cval: f64,
    nprepad: usize,
    store: Store,
    out: &mut [T],
    fast: bool,
) -> Result<()> {
    let op = "geometric_transform";
    check_input(op, input, ishape, order)?;
    let irank = ishape.len();
    let orank = oshape.len();
    let n: usize = oshape.iter().product();
    match mapping {
        Mapping::Affine { matrix, shift } => {
            if matrix.len() != irank * orank || shift.len() != irank {
                return Err(Error::InvalidArgument {
                    op: op.into(),
                    reason: format!(
                        "an affine matrix of {} values and an offset of {} for input rank {irank} and output rank {orank}",
                        matrix.len(),
                        shift.len()
                    ),
                });
            }
        }
        Mapping::Coordinates(c) => {
            if c.len() != irank * n {
                return Err(Error::ShapeMismatch {
                    op: op.into(),
                    expected: std::iter::once(irank).chain(oshape.iter().copied()).collect(),
                    got: vec![c.len()],
                });
            }
        }
    }
    let ctx = Ctx {
        ishape,
        strides: c_strides(ishape),
        order,
        gc: mode == InterpMode::GridConstant,
        nearest: mode == InterpMode::Nearest,
        spline_mode: mode.spline_mode(),
        nprepad: nprepad as f64,
    };
    check_out(op, out.len(), n)?;
    if let (true, Mapping::Affine { matrix, shift }, 2, 2, 0..=1) = (fast, mapping, irank, orank, order) {
        return fast::affine_2d_low(&ctx, input, matrix, shift, oshape, mode, cval, store, out);
    }
    let gc = mode == InterpMode::GridConstant;
    let map = mode != InterpMode::GridConstant && mode != InterpMode::Nearest;
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .try_for_each(|(ci, chunk)| -> Result<()> {
            let p0 = ci * CHUNK;
            let mut oidx = vec![0usize; orank];
            unravel(p0, oshape, &mut oidx);
            let mut icoor = vec![0.0f64; irank];
            let mut taps = vec![Taps::default(); irank];
            for (k, o) in chunk.iter_mut().enumerate() {
                match mapping {
                    Mapping::Affine { matrix, shift } => {
                        for hh in 0..irank {
                            let row = &matrix[hh * orank..(hh + 1) * orank];
                            let mut tmp = shift[hh];
                            for (ll, &m) in row.iter().enumerate() {
                                tmp += oidx[ll] as f64 * m;
                            }
                            icoor[hh] = tmp;
                        }
                    }
                    Mapping::Coordinates(c) => {
                        for (hh, ic) in icoor.iter_mut().enumerate() {
                            *ic = c[hh * n + p0 + k];
                        }
                    }
                }
                let mut inside = true;
                for hh in 0..irank {
                    let mut cc = icoor[hh] + ctx.nprepad;
                    if map {
                        cc = map_coordinate(cc, ishape[hh], mode);
                    }
                    if ctx.taps(op, hh, cc, &mut taps[hh])?.is_none() {
                        inside = false;
                        break;
                    }
                }
                let t = if inside {
                    accumulate(input, &taps, order, cval, gc)
                } else {
                    cval
                };
                *o = T::from_f64(store_value(t, store));
                advance(&mut oidx, oshape);
            }
            Ok(())
        })
}

/// scipy's `NI_ZoomShift`: output index `k` along axis `a` samples the input at
/// `(k + shift[a]) * zoom[a]` (or `((k + shift[a]) + 0.5) * zoom[a] - 0.5` with `grid_mode`),
/// either factor left out when `None`. The other arguments are those of
/// [`geometric_transform`]; the output has the input's rank.
#[allow(clippy::too_many_arguments)]
pub fn zoom_shift(
    input: &[f64],
    ishape: &[usize],
    zoom: Option<&[f64]>,
    shift: Option<&[f64]>,
    oshape: &[usize],
    order: usize,
    mode: InterpMode,
    cval: f64,
    nprepad: usize,
    grid_mode: bool,
    store: Store,
) -> Result<Vec<f64>> {
    let mut out = vec![0.0; oshape.iter().product()];
    zoom_shift_into(
        input, ishape, zoom, shift, oshape, order, mode, cval, nprepad, grid_mode, store, &mut out,
    )?;
    Ok(out)
}

/// [`zoom_shift`] into `out` (the output's size), as `f64` or rounded to `f32`.
#[allow(clippy::too_many_arguments)]
pub fn zoom_shift_into<T: OutValue>(
    input: &[f64],
    ishape: &[usize],
    zoom: Option<&[f64]>,
    shift: Option<&[f64]>,
    oshape: &[usize],
    order: usize,
    mode: InterpMode,
    cval: f64,
    nprepad: usize,
    grid_mode: bool,
    store: Store,
    out: &mut [T],
) -> Result<()> {
    let op = "zoom_shift";
    check_input(op, input, ishape, order)?;
    let rank = ishape.len();
    if oshape.len() != rank || zoom.is_some_and(|z| z.len() != rank) || shift.is_some_and(|s| s.len() != rank)
    {
        return Err(Error::InvalidArgument {
            op: op.into(),
            reason: format!("output shape {oshape:?}, zoom and shift must all have the input's rank {rank}"),
        });
    }
    let ctx = Ctx {
        ishape,
        strides: c_strides(ishape),
        order,
        gc: mode == InterpMode::GridConstant,
        nearest: mode == InterpMode::Nearest,
        spline_mode: mode.spline_mode(),
        nprepad: nprepad as f64,
    };
    let map = mode != InterpMode::GridConstant && mode != InterpMode::Nearest;
    // per axis and output index: the taps, or None for a point that reads cval
    let mut axes: Vec<Vec<Option<Taps>>> = Vec::with_capacity(rank);
    for jj in 0..rank {
        let mut v = Vec::with_capacity(oshape[jj]);
        for kk in 0..oshape[jj] {
            let mut cc = kk as f64;
            if let Some(s) = shift {
                cc += s[jj];
            }
            if let Some(z) = zoom {
                if grid_mode {
                    cc += 0.5;
                    cc *= z[jj];
                    cc -= 0.5;
                } else {
                    cc *= z[jj];
                }
            }
            cc += ctx.nprepad;
            if map {
                cc = map_coordinate(cc, ishape[jj], mode);
            }
            let mut t = Taps::default();
            v.push(ctx.taps(op, jj, cc, &mut t)?.map(|()| t));
        }
        axes.push(v);
    }
    let gc = mode == InterpMode::GridConstant;
    check_out(op, out.len(), oshape.iter().product())?;
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(ci, chunk)| {
        let mut oidx = vec![0usize; rank];
        unravel(ci * CHUNK, oshape, &mut oidx);
        let mut refs: Vec<Taps> = Vec::with_capacity(rank);
        for o in chunk.iter_mut() {
            refs.clear();
            for (jj, a) in axes.iter().enumerate() {
                match &a[oidx[jj]] {
                    Some(t) => refs.push(*t),
                    None => break,
                }
            }
            let t = if refs.len() == rank {
                accumulate(input, &refs, order, cval, gc)
            } else {
                cval
            };
            *o = T::from_f64(store_value(t, store));
            advance(&mut oidx, oshape);
        }
    });
    Ok(())
}
