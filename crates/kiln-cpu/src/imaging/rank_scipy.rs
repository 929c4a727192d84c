//! Rank filters and grey morphology on every dtype scipy takes ([`RankValue`]: bool, int8 to
//! int64, uint8 to uint64, float32, float64), returning scipy.ndimage's bits: the CPU path of
//! NumPy inputs and of f64 tensors.
//!
//! Each of scipy's three code paths is followed ([`kiln_core::imaging::rank_value`] has the
//! conversions):
//! - a full box without a structure (`minimum_filter`/`maximum_filter` with `size`, and
//!   `grey_erosion`/`grey_dilation` the same) is scipy's separable `NI_MinOrMaxFilter1D`, one
//!   pass per axis of size > 1 on lines extended by the mode, with the `constant` cval as a
//!   double (not converted to the type: a cval of 300 on uint8 data wins a maximum and is
//!   stored as 300 converted, 44);
//! - a footprint is `NI_MinOrMaxFilter` (the first element, then replaced on `<` / `>`) or
//!   `NI_RankFilter` (quickselect on doubles), the cval converted to the type first;
//! - a structure adds its values as `NI_MinOrMaxFilter` does: the first element plus its term
//!   in double, every later one in the type's arithmetic (integers wrap), compared in double.
//!
//! Where the data has no NaN and no `-0.0` (and the cval converts exactly), every one of
//! those is the exact order statistic in the type, computed by total-order keys (van Herk /
//! Gil-Werman passes, Huang's histogram for uint8 boxes, `select_nth_unstable`); otherwise
//! scipy's own comparisons are replayed on doubles (Richard Harter's ascending-minima deque
//! for the separable passes, the first-wins fold, scipy's `NI_Select`), which decide which of
//! NaN, `-0.0` and `0.0` is returned exactly as scipy's do.

use kiln_core::imaging::rank::{RankOp, RankSpec};
use kiln_core::imaging::rank_value::RankValue;
use kiln_core::imaging::BoundaryMode;
use kiln_core::Result;
use rayon::prelude::*;

use super::rank::{check_shape, huang_u8, minmax_pass};

/// `spec` on `src` of shape `(d, h, w)` with scipy's results, in the input's type; `cval` is
/// the `constant` mode's value as the user gave it (`spec.mode`'s). The selection is exact in
/// the type: scipy's C paths then store it through a double, which rounds 64-bit integers
/// beyond 2^53 ([`RankValue::via_f64`], the caller's step), its 1-D rank filter does not.
pub fn rank_scipy<T: RankValue>(src: &[T], shape: [usize; 3], spec: &RankSpec, cval: f64) -> Result<Vec<T>> {
    check_shape("rank_filter", shape, src.len())?;
    if spec.structure.is_some() {
        let r = structure_scipy(src, shape, spec, cval)?;
        return Ok(r.into_par_iter().map(T::from_f64).collect());
    }
    let special = T::FLOAT && src.par_iter().any(|v| v.is_special());
    let constant = matches!(spec.mode, BoundaryMode::Constant(_));
    let out = if spec.is_box() && matches!(spec.op, RankOp::Min | RankOp::Max) {
        separable(src, shape, spec, cval, special)
    } else {
        let cv = T::from_f64(cval);
        if special || (constant && cv.is_special()) {
            footprint_replayed(src, shape, spec, cv)
        } else {
            footprint_exact(src, shape, spec, cv)
        }
    };
    Ok(out)
}

/// A grey morphology op with a structure, as scipy's `NI_MinOrMaxFilter` computes it: the
/// doubles scipy stores into the output (convert with `from_f64` of the output type).
pub fn structure_scipy<T: RankValue>(
    src: &[T],
    shape: [usize; 3],
    spec: &RankSpec,
    cval: f64,
) -> Result<Vec<f64>> {
    check_shape("grey morphology", shape, src.len())?;
    let terms = spec.structure_values().unwrap_or_else(|| vec![0.0; spec.count()]);
    let max = spec.op == RankOp::Max;
    Ok(windows(src, shape, spec, T::from_f64(cval), |vals| {
        let mut r = vals[0].to_f64() + terms[0];
        for (v, &t) in vals.iter().zip(&terms).skip(1) {
            let x = v.add_term(t).to_f64();
            if (max && x > r) || (!max && x < r) {
                r = x;
            }
        }
        r
    }))
}

/// The separable min/max: one pass per axis whose size is above 1.
fn separable<T: RankValue>(
    src: &[T],
    shape: [usize; 3],
    spec: &RankSpec,
    cval: f64,
    special: bool,
) -> Vec<T> {
    let max = spec.op == RankOp::Max;
    let cv = T::from_f64(cval);
    let cval_exact = cv.to_f64() == cval && !cv.is_special();
    let fast = !special && (spec.mode.cval().is_none() || cval_exact);
    let axes = (0..3).filter(|&a| spec.fshape[a] > 1);
    if fast {
        // total-order keys once for all the passes, not once a pass
        let mut keys: Vec<T::Key> = src.par_iter().map(|v| v.key()).collect();
        for axis in axes {
            let (k, o) = (spec.fshape[axis], spec.origin[axis]);
            keys = minmax_pass(&keys, shape, axis, k, o, spec.mode, Some(cv.key()), max);
        }
        return keys.into_par_iter().map(T::from_key).collect();
    }
    let mut cur: Vec<T> = src.to_vec();
    for axis in axes {
        let (k, o) = (spec.fshape[axis], spec.origin[axis]);
        cur = harter_pass(&cur, shape, axis, k, o, spec.mode, cval, max);
    }
    cur
}

/// One pass of scipy's `NI_MinOrMaxFilter1D` on doubles (Richard Harter's ascending-minima
/// deque with its `<=` / `>=`), replayed where NaN or `-0.0` make the comparisons matter.
#[allow(clippy::too_many_arguments)]
fn harter_pass<T: RankValue>(
    src: &[T],
    shape: [usize; 3],
    axis: usize,
    k: usize,
    o: isize,
    mode: BoundaryMode,
    cval: f64,
    max: bool,
) -> Vec<T> {
    let n = shape[axis];
    let stride: usize = shape[axis + 1..].iter().product();
    let c = (k / 2) as isize + o;
    let line_of = |l: usize| (l / stride) * stride * n + l % stride;
    let mut tmp = vec![0.0f64; src.len()];
    tmp.par_chunks_mut(n).enumerate().for_each(|(l, dst)| {
        let base = line_of(l);
        let len = n + k - 1;
        let ext: Vec<f64> = (0..len)
            .map(|j| match mode.map_index(j as isize - c, n) {
                Some(i) => src[base + i * stride].to_f64(),
                None => cval,
            })
            .collect();
        // the deque of (value, death) as scipy's ring
        let mut ring = vec![(0.0f64, 0usize); k];
        let (mut minpair, mut last) = (0usize, 0usize);
        ring[0] = (ext[0], k);
        let mut out = 0usize;
        for (ll, &val) in ext.iter().enumerate().skip(1) {
            if ring[minpair].1 == ll {
                minpair = (minpair + 1) % k;
            }
            let m = ring[minpair].0;
            if (!max && val <= m) || (max && val >= m) {
                ring[minpair] = (val, ll + k);
                last = minpair;
            } else {
                while (!max && ring[last].0 >= val) || (max && ring[last].0 <= val) {
                    last = if last == 0 { k - 1 } else { last - 1 };
                }
                last = (last + 1) % k;
                ring[last] = (val, ll + k);
            }
            if ll + 1 >= k {
                dst[out] = ring[minpair].0;
                out += 1;
            }
        }
    });
    let mut res = vec![T::from_f64(0.0); src.len()];
    res.par_chunks_mut(stride * n).enumerate().for_each(|(blk, o)| {
        for j in 0..stride {
            let l = blk * stride + j;
            for i in 0..n {
                o[i * stride + j] = T::from_f64(tmp[l * n + i]);
            }
        }
    });
    res
}

/// A footprint's min, max or rank by total order (no NaN, no `-0.0`): exact in the type.
fn footprint_exact<T: RankValue>(src: &[T], shape: [usize; 3], spec: &RankSpec, cv: T) -> Vec<T> {
    let rank = spec.rank();
    if T::BYTE && spec.is_box() && spec.fshape[0] == 1 {
        if let RankOp::Rank(r) = spec.op {
            let keys: Vec<u32> = src.par_iter().map(|v| u32::from(v.byte())).collect();
            let out = huang_u8(&keys, shape, spec, r, Some(u32::from(cv.byte())));
            return out.into_par_iter().map(|k| T::from_f64(f64::from(k))).collect();
        }
    }
    let op = spec.op;
    windows(src, shape, spec, cv, |vals| match op {
        RankOp::Min => *vals.iter().min_by_key(|v| v.key()).unwrap_or(&cv),
        RankOp::Max => *vals.iter().max_by_key(|v| v.key()).unwrap_or(&cv),
        RankOp::Rank(_) => *vals.select_nth_unstable_by_key(rank, |v| v.key()).1,
    })
}

/// A footprint's min, max or rank with scipy's comparisons on doubles: `NI_MinOrMaxFilter`'s
/// first-wins fold, `NI_RankFilter`'s `NI_Select`.
fn footprint_replayed<T: RankValue>(src: &[T], shape: [usize; 3], spec: &RankSpec, cv: T) -> Vec<T> {
    let rank = spec.rank();
    let op = spec.op;
    windows(src, shape, spec, cv, |vals| {
        let mut buf: Vec<f64> = vals.iter().map(|v| v.to_f64()).collect();
        let r = match op {
            RankOp::Min | RankOp::Max => {
                let max = op == RankOp::Max;
                let mut r = buf[0];
                for &x in &buf[1..] {
                    if (max && x > r) || (!max && x < r) {
                        r = x;
                    }
                }
                r
            }
            RankOp::Rank(_) => ni_select(&mut buf, rank),
        };
        T::from_f64(r)
    })
}

/// scipy's `NI_Select` (Hoare partition around the first element, `<` and `>` comparisons),
/// as a loop.
fn ni_select(buffer: &mut [f64], rank: usize) -> f64 {
    let (mut min, mut max, mut rank) = (0usize, buffer.len() - 1, rank);
    loop {
        if min == max {
            return buffer[min];
        }
        let x = buffer[min];
        let mut ii = min as isize - 1;
        let mut jj = max as isize + 1;
        loop {
            loop {
                jj -= 1;
                if buffer[jj as usize] <= x || buffer[jj as usize].is_nan() || x.is_nan() {
                    break;
                }
            }
            loop {
                ii += 1;
                if buffer[ii as usize] >= x || buffer[ii as usize].is_nan() || x.is_nan() {
                    break;
                }
            }
            if ii < jj {
                buffer.swap(ii as usize, jj as usize);
            } else {
                break;
            }
        }
        let jj = jj as usize;
        let count = jj - min + 1;
        if rank < count {
            max = jj;
        } else {
            min = jj + 1;
            rank -= count;
        }
    }
}

/// For every output element, `f` of the footprint's values in row-major footprint order
/// (outside the image: the mode, `cv` under `constant`); rows run in parallel.
fn windows<T: RankValue, R: Send + Copy + Default>(
    src: &[T],
    shape: [usize; 3],
    spec: &RankSpec,
    cv: T,
    f: impl Fn(&mut [T]) -> R + Sync,
) -> Vec<R> {
    let [d, h, w] = shape;
    let offs = spec.offsets();
    let flat: Vec<isize> = offs
        .iter()
        .map(|o| (o[0] * h as isize + o[1]) * w as isize + o[2])
        .collect();
    let lo = |a: usize| offs.iter().map(|o| o[a]).min().unwrap_or(0);
    let hi = |a: usize| offs.iter().map(|o| o[a]).max().unwrap_or(0);
    let (lo, hi) = ([lo(0), lo(1), lo(2)], [hi(0), hi(1), hi(2)]);
    let inside = |i: usize, a: usize, n: usize| i as isize + lo[a] >= 0 && i as isize + hi[a] < n as isize;
    let mode = spec.mode;
    let at = |i: usize, o: isize, n: usize| mode.map_index(i as isize + o, n);
    let mut out = vec![R::default(); src.len()];
    out.par_chunks_mut(w).enumerate().for_each(|(row, orow)| {
        let (z, y) = (row / h, row % h);
        let mut vals: Vec<T> = Vec::with_capacity(offs.len());
        let zy_in = inside(z, 0, d) && inside(y, 1, h);
        for (x, o) in orow.iter_mut().enumerate() {
            vals.clear();
            if zy_in && inside(x, 2, w) {
                let base = (row * w + x) as isize;
                vals.extend(flat.iter().map(|&f| src[(base + f) as usize]));
            } else {
                vals.extend(offs.iter().map(|off| {
                    match (at(z, off[0], d), at(y, off[1], h), at(x, off[2], w)) {
                        (Some(zz), Some(yy), Some(xx)) => src[(zz * h + yy) * w + xx],
                        _ => cv,
                    }
                }));
            }
            *o = f(&mut vals);
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::imaging::rank::{Footprint, RankParams};

    fn spec_min(size: &[usize], mode: BoundaryMode) -> RankSpec {
        RankSpec::minimum_filter(1, &RankParams::size(size).with_mode(mode)).expect("spec")
    }

    #[test]
    fn separable_matches_harter_and_keys() {
        let x: Vec<i64> = vec![5, -3, 9, 1 << 40, 7, -8, 2];
        let s = spec_min(&[3], BoundaryMode::Reflect);
        let r = rank_scipy(&x, [1, 1, 7], &s, 0.0).expect("r");
        assert_eq!(r, [-3, -3, -3, 7, -8, -8, -8]);
        // an out-of-range cval on uint8 wins the maximum as a double, then converts (300 -> 44)
        let u: Vec<u8> = vec![1, 250, 3];
        let m = RankSpec::maximum_filter(
            1,
            &RankParams::size(&[3]).with_mode(BoundaryMode::Constant(300.0)),
        )
        .expect("m");
        assert_eq!(rank_scipy(&u, [1, 1, 3], &m, 300.0).expect("u"), [44, 250, 44]);
    }

    #[test]
    fn nan_and_signed_zero_as_scipy() {
        // separable: `<=` keeps the later of equal values; NaN first in a window sticks
        let x = [0.0f64, -0.0, 1.0];
        let s = spec_min(&[2], BoundaryMode::Nearest);
        let r = rank_scipy(&x, [1, 1, 3], &s, 0.0).expect("r");
        assert!(r[1].is_sign_negative());
        // a footprint's fold keeps the first of equal values
        let fp = Footprint::new(&[3], vec![true, false, true]).expect("fp");
        let f = RankSpec::minimum_filter(1, &RankParams::footprint(fp)).expect("f");
        let y = [f64::NAN, 2.0, 1.0, 4.0];
        let r = rank_scipy(&y, [1, 1, 4], &f, 0.0).expect("r");
        assert_eq!(r[2..], [2.0, 1.0]);
        assert!(r[0].is_nan() && r[1].is_nan());
    }

    #[test]
    fn ni_select_is_an_order_statistic() {
        let v = [5.0, 1.0, 4.0, 1.0, 3.0, 9.0, 2.0];
        for k in 0..v.len() {
            let mut b = v.to_vec();
            let mut s = v.to_vec();
            s.sort_by(f64::total_cmp);
            assert_eq!(ni_select(&mut b, k), s[k]);
        }
    }

    #[test]
    fn structure_wraps_in_the_type() {
        let x: Vec<u8> = vec![250, 2, 100];
        let p = RankParams::default().with_structure(&[3], vec![10.0, 10.0, 10.0]);
        let d = RankSpec::grey_dilation(1, &p).expect("d");
        let r = structure_scipy(&x, [1, 1, 3], &d, 0.0).expect("r");
        // the first element in double (260), later ones wrap in uint8 (250 + 10 = 4)
        assert_eq!(r, [260.0, 260.0, 110.0]);
    }
}
