//! Orders 0 and 1 of a 2-D affine resampling (`rotate`, `affine_transform` of an image)
//! without the per-point tap tables of the general loop: each point's two taps per axis (one
//! for order 0) are computed into registers and summed directly. The floating-point
//! operations are the general path's, in the same order, so the values are the same to the
//! bit (scipy's `NI_GeometricTransform`):
//!
//! - the coordinate `tmp = shift[h]; tmp += o0 * m[h][0]; tmp += o1 * m[h][1]` (the first two
//!   terms once per output row: they do not change along it), plus the prepadding, then the
//!   mode's `map_coordinate`;
//! - order 1: `base = floor(cc)`, taps `base` and `base + 1` (mapped at an edge with the
//!   spline boundary, or flagged as outside for `grid-constant`), weights `w0 = 1 - (cc -
//!   base)` and `w1 = 1 - w0`; order 0: `base = floor(cc + 0.5)`, one tap, no weight;
//! - the sum from `t = 0.0` over the taps, last axis fastest, each tap's value multiplied by
//!   the first axis's weight, then the second's.

use super::{map_coordinate, too_far, Ctx, OutValue, CHUNK};
use crate::error::Result;
use crate::imaging::interp::{floor, store_value, InterpMode, Store};
use rayon::prelude::*;

/// The taps of one point along one axis for order 0 (one tap) or 1 (two).
#[derive(Clone, Copy)]
struct Low {
    off: [i64; 2],
    w: [f64; 2],
    cv: [bool; 2],
}

impl Ctx<'_> {
    /// [`Ctx::taps`] for order 0 or 1.
    #[inline(always)]
    fn low_taps(&self, op: &str, axis: usize, cc: f64) -> Result<Option<Low>> {
        if !(cc > -1.0 || self.gc || self.nearest) {
            return Ok(None);
        }
        let len = self.ishape[axis] as i64;
        let stride = self.strides[axis];
        let k = self.order + 1;
        let base = if self.order == 1 {
            floor(cc)
        } else {
            floor(cc + 0.5)
        };
        let start = base.clamp(-4.6e18, 4.6e18) as i64;
        let mut t = Low {
            off: [0; 2],
            w: [0.0; 2],
            cv: [false; 2],
        };
        if self.gc {
            for ll in 0..k {
                let idx = start + ll as i64;
                t.cv[ll] = idx < 0 || idx >= len;
                t.off[ll] = if t.cv[ll] { 0 } else { idx * stride };
            }
        } else if start < 0 || start + self.order as i64 >= len {
            for ll in 0..k {
                let idx =
                    map_coordinate((start + ll as i64) as f64, self.ishape[axis], self.spline_mode) as i64;
                if idx < 0 || idx >= len {
                    return Err(too_far(op, cc));
                }
                t.off[ll] = idx * stride;
            }
        } else {
            t.off = [start * stride, (start + 1) * stride];
        }
        if self.order == 1 {
            // weights_of_delta for order 1: w0 = 1 - x, then w1 = 1 - w0
            t.w[0] = 1.0 - (cc - base);
            let mut w1 = 1.0;
            w1 -= t.w[0];
            t.w[1] = w1;
        }
        Ok(Some(t))
    }
}

/// The affine map of a 2-D input to a 2-D output for order 0 or 1 (see the module docs):
/// `geometric_transform_into`'s arguments, already checked.
#[allow(clippy::too_many_arguments)]
pub(super) fn affine_2d_low<T: OutValue>(
    ctx: &Ctx<'_>,
    input: &[f64],
    matrix: &[f64],
    shift: &[f64],
    oshape: &[usize],
    mode: InterpMode,
    cval: f64,
    store: Store,
    out: &mut [T],
) -> Result<()> {
    let op = "geometric_transform";
    let map = mode != InterpMode::GridConstant && mode != InterpMode::Nearest;
    let gc = ctx.gc;
    let order = ctx.order;
    let (l0, l1) = (ctx.ishape[0], ctx.ishape[1]);
    let ow = oshape[1];
    let read = |off: i64| input[off as usize];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .try_for_each(|(ci, chunk)| -> Result<()> {
            let p0 = ci * CHUNK;
            let (mut o0, mut o1) = (p0 / ow, p0 % ow);
            let mut row = [0.0f64; 2];
            let set_row = |o0: usize, row: &mut [f64; 2]| {
                for (h, r) in row.iter_mut().enumerate() {
                    let mut tmp = shift[h];
                    tmp += o0 as f64 * matrix[2 * h];
                    *r = tmp;
                }
            };
            set_row(o0, &mut row);
            for o in chunk.iter_mut() {
                let mut c = [0.0f64; 2];
                for h in 0..2 {
                    let mut tmp = row[h];
                    tmp += o1 as f64 * matrix[2 * h + 1];
                    c[h] = tmp + ctx.nprepad;
                }
                let (mut a, mut b) = (None, None);
                let mut cc = c[0];
                if map {
                    cc = map_coordinate(cc, l0, mode);
                }
                if let Some(ta) = ctx.low_taps(op, 0, cc)? {
                    a = Some(ta);
                    let mut cc = c[1];
                    if map {
                        cc = map_coordinate(cc, l1, mode);
                    }
                    b = ctx.low_taps(op, 1, cc)?;
                }
                let t = match (a, b) {
                    (Some(a), Some(b)) if order == 1 => {
                        let mut t = 0.0;
                        for i in 0..2 {
                            for j in 0..2 {
                                let mut v = if gc && (a.cv[i] || b.cv[j]) {
                                    cval
                                } else {
                                    read(a.off[i] + b.off[j])
                                };
                                v *= a.w[i];
                                v *= b.w[j];
                                t += v;
                            }
                        }
                        t
                    }
                    (Some(a), Some(b)) => {
                        let mut t = 0.0;
                        t += if gc && (a.cv[0] || b.cv[0]) {
                            cval
                        } else {
                            read(a.off[0] + b.off[0])
                        };
                        t
                    }
                    _ => cval,
                };
                *o = T::from_f64(store_value(t, store));
                o1 += 1;
                if o1 == ow {
                    o1 = 0;
                    o0 += 1;
                    set_row(o0, &mut row);
                }
            }
            Ok(())
        })
}
