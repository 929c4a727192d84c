//! Rank filters and grey morphology on the CPU ([`RankSpec`], scipy.ndimage semantics): the
//! numerical reference the GPU is checked against bit for bit.
//!
//! Algorithms: a full-box minimum or maximum without a structure runs as one 1-D pass per
//! axis (van Herk / Gil-Werman: a prefix and a suffix minimum per block of `k`, so three
//! comparisons an element whatever `k`; per-axis boundary extension makes the passes equal
//! to the box, as scipy's own separable path is); `u8` rank filters over a 2-D box run
//! Huang's sliding histogram along each row (`O(k)` an output); everything else gathers
//! the footprint's values per output and selects (`select_nth_unstable` on total-order
//! keys, or a min/max fold, in `f64` under a non-flat structure). Rows run in parallel.

use kiln_core::imaging::rank::{RankElement, RankOp, RankSpec};
use kiln_core::imaging::BoundaryMode;
use kiln_core::storage::unsupported_dtype;
use kiln_core::{Error, Result};
use rayon::prelude::*;

use crate::CpuStorage;

/// The element types the rank filters take.
pub const RANK_DTYPES: &str = "u8, u16, f32, f64";

/// Runs `spec` on a `(d, h, w)` storage of u8, u16, f32 or f64, returning the same dtype
/// (f64 with scipy's comparisons, [`super::rank_scipy`]; the others by total order, as the
/// GPU computes them).
pub fn rank_filter_storage(
    x: &CpuStorage,
    shape: [usize; 3],
    spec: &RankSpec,
    op: &str,
) -> Result<CpuStorage> {
    Ok(match x {
        CpuStorage::U8(v) => CpuStorage::U8(rank_filter(v, shape, spec)?.into()),
        CpuStorage::U16(v) => CpuStorage::U16(rank_filter(v, shape, spec)?.into()),
        CpuStorage::F32(v) => CpuStorage::F32(rank_filter(v, shape, spec)?.into()),
        CpuStorage::F64(v) => {
            let cval = spec.mode.cval().unwrap_or(0.0);
            CpuStorage::F64(super::rank_scipy::rank_scipy(v, shape, spec, cval)?.into())
        }
        other => {
            let d = match other {
                CpuStorage::F16(_) => kiln_core::DType::F16,
                _ => kiln_core::DType::BF16,
            };
            return Err(unsupported_dtype(op, d, RANK_DTYPES));
        }
    })
}

/// Checks `shape` against `len` (non-empty, equal counts).
pub(crate) fn check_shape(op: &str, shape: [usize; 3], len: usize) -> Result<()> {
    if shape.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("the input is empty (shape {shape:?})"),
        ));
    }
    kiln_core::backend::check_same_len(op, shape.iter().product(), len)
}

/// `spec` applied to `src` of shape `(d, h, w)`.
pub fn rank_filter<T: RankElement>(src: &[T], shape: [usize; 3], spec: &RankSpec) -> Result<Vec<T>> {
    check_shape("rank_filter", shape, src.len())?;
    let keys: Vec<u32> = src.par_iter().map(|v| v.key()).collect();
    let cval = spec.mode.cval().map(T::from_cval);
    if spec.structure.is_none() && spec.is_box() && matches!(spec.op, RankOp::Min | RankOp::Max) {
        let max = spec.op == RankOp::Max;
        let mut cur = keys;
        for axis in 0..3 {
            if spec.fshape[axis] > 1 || spec.origin[axis] != 0 {
                cur = minmax_pass(
                    &cur,
                    shape,
                    axis,
                    spec.fshape[axis],
                    spec.origin[axis],
                    spec.mode,
                    cval.map(|c| c.key()),
                    max,
                );
            }
        }
        return Ok(cur.into_par_iter().map(T::from_key).collect());
    }
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<u8>()
        && spec.is_box()
        && spec.fshape[0] == 1
        && spec.structure.is_none()
    {
        if let RankOp::Rank(r) = spec.op {
            let out = huang_u8(&keys, shape, spec, r, cval.map(|c| c.key()));
            return Ok(out.into_par_iter().map(T::from_key).collect());
        }
    }
    Ok(gather(src, &keys, shape, spec, cval))
}

/// The input index that output coordinate `i` plus offset `o` reads on an axis of `n`.
#[inline]
fn at(mode: BoundaryMode, i: usize, o: isize, n: usize) -> Option<usize> {
    mode.map_index(i as isize + o, n)
}

/// The general path: per output, the footprint's values gathered and selected.
fn gather<T: RankElement>(
    src: &[T],
    keys: &[u32],
    shape: [usize; 3],
    spec: &RankSpec,
    cval: Option<T>,
) -> Vec<T> {
    let [d, h, w] = shape;
    let offs = spec.offsets();
    let sv = spec.structure_values();
    let flat: Vec<isize> = offs
        .iter()
        .map(|o| (o[0] * h as isize + o[1]) * w as isize + o[2])
        .collect();
    let lo = |a: usize| offs.iter().map(|o| o[a]).min().unwrap_or(0);
    let hi = |a: usize| offs.iter().map(|o| o[a]).max().unwrap_or(0);
    let (lo, hi) = ([lo(0), lo(1), lo(2)], [hi(0), hi(1), hi(2)]);
    let inside = |i: usize, a: usize, n: usize| i as isize + lo[a] >= 0 && i as isize + hi[a] < n as isize;
    let rank = spec.rank();
    let mut out = vec![T::from_key(0); src.len()];
    out.par_chunks_mut(w).enumerate().for_each(|(row, orow)| {
        let (z, y) = (row / h, row % h);
        let mut buf: Vec<u32> = Vec::with_capacity(offs.len());
        let mut vals: Vec<T> = Vec::with_capacity(offs.len());
        let zy_in = inside(z, 0, d) && inside(y, 1, h);
        for (x, o) in orow.iter_mut().enumerate() {
            let base = (row * w + x) as isize;
            buf.clear();
            vals.clear();
            if zy_in && inside(x, 2, w) {
                for &f in &flat {
                    let i = (base + f) as usize;
                    buf.push(keys[i]);
                    if sv.is_some() {
                        vals.push(src[i]);
                    }
                }
            } else {
                for off in &offs {
                    let v = match (
                        at(spec.mode, z, off[0], d),
                        at(spec.mode, y, off[1], h),
                        at(spec.mode, x, off[2], w),
                    ) {
                        (Some(zz), Some(yy), Some(xx)) => src[(zz * h + yy) * w + xx],
                        _ => cval.unwrap_or(T::from_key(0)),
                    };
                    buf.push(v.key());
                    vals.push(v);
                }
            }
            *o = match (&sv, spec.op) {
                (Some(s), op) => T::from_f64(structure_fold(&vals, s, op == RankOp::Max)),
                (None, RankOp::Min) => T::from_key(buf.iter().copied().min().unwrap_or(0)),
                (None, RankOp::Max) => T::from_key(buf.iter().copied().max().unwrap_or(0)),
                (None, RankOp::Rank(_)) => T::from_key(*buf.select_nth_unstable(rank).1),
            };
        }
    });
    out
}

/// scipy's `CASE_MIN_OR_MAX_POINT` with a structure: the first element plus its term in
/// double, every later one through [`RankElement::structure_term`], replaced on `<` (`>`).
fn structure_fold<T: RankElement>(vals: &[T], terms: &[f64], max: bool) -> f64 {
    let mut r = vals[0].to_f64() + terms[0];
    for (v, &t) in vals.iter().zip(terms).skip(1) {
        let x = v.structure_term(t);
        if (max && x > r) || (!max && x < r) {
            r = x;
        }
    }
    r
}

/// One separable min (max) pass of window `k`, origin `o` along `axis` (van Herk /
/// Gil-Werman: per block of `k` extended positions a prefix and a suffix min (max), the
/// output the min (max) of one suffix and one prefix; boundary extended per axis).
///
/// Along the last axis each line is contiguous and runs on its own, in buffers reused
/// across lines. Along another axis the pass works on whole rows of `stride` elements,
/// every step an element-wise min (max) of two contiguous rows, rather than gathering
/// strided lines and scattering them back (two passes of cache misses over the image).
#[allow(clippy::too_many_arguments)]
pub(crate) fn minmax_pass<K: Ord + Copy + Default + Send + Sync>(
    src: &[K],
    shape: [usize; 3],
    axis: usize,
    k: usize,
    o: isize,
    mode: BoundaryMode,
    cval: Option<K>,
    max: bool,
) -> Vec<K> {
    let n = shape[axis];
    let stride: usize = shape[axis + 1..].iter().product();
    let c = (k / 2) as isize + o;
    let len = n + k - 1;
    let fill = cval.unwrap_or_default();
    // The source position along the axis that each extended position reads (None: cval).
    let ext_at: Vec<Option<usize>> = (0..len).map(|j| mode.map_index(j as isize - c, n)).collect();
    let mut out = vec![K::default(); src.len()];
    if stride == 1 {
        // extended positions lo..hi read the line in order: copied, not looked up
        let lo = c.clamp(0, len as isize) as usize;
        let hi = (c + n as isize).clamp(lo as isize, len as isize) as usize;
        out.par_chunks_mut(n).zip(src.par_chunks(n)).for_each_init(
            || (vec![K::default(); len], vec![K::default(); len]),
            |(g, hh), (dst, line)| {
                for j in (0..lo).chain(hi..len) {
                    g[j] = ext_at[j].map_or(fill, |i| line[i]);
                }
                let from = (lo as isize - c) as usize;
                g[lo..hi].copy_from_slice(&line[from..from + hi - lo]);
                hh.copy_from_slice(g);
                for s in (0..len).step_by(k) {
                    let e = (s + k).min(len);
                    for j in s + 1..e {
                        g[j] = pick(g[j - 1], g[j], max);
                    }
                    for j in (s..e - 1).rev() {
                        hh[j] = pick(hh[j + 1], hh[j], max);
                    }
                }
                for (i, d) in dst.iter_mut().enumerate() {
                    *d = pick(hh[i], g[i + k - 1], max);
                }
            },
        );
        return out;
    }
    let fill_row = vec![fill; stride];
    let mut g = vec![K::default(); len * stride];
    let mut hh = vec![K::default(); len * stride];
    for (sblk, oblk) in src.chunks(n * stride).zip(out.chunks_mut(n * stride)) {
        let row = |j: usize| match ext_at[j] {
            Some(i) => &sblk[i * stride..(i + 1) * stride],
            None => &fill_row[..],
        };
        // blocks of k extended rows are independent: one task each
        g.par_chunks_mut(k * stride)
            .zip(hh.par_chunks_mut(k * stride))
            .enumerate()
            .for_each(|(b, (gb, hb))| {
                let s = b * k;
                let m = gb.len() / stride;
                gb[..stride].copy_from_slice(row(s));
                for r in 1..m {
                    let (prev, cur) = gb.split_at_mut(r * stride);
                    pick_rows(&mut cur[..stride], &prev[(r - 1) * stride..], row(s + r), max);
                }
                hb[(m - 1) * stride..].copy_from_slice(row(s + m - 1));
                for r in (0..m - 1).rev() {
                    let (cur, next) = hb.split_at_mut((r + 1) * stride);
                    pick_rows(&mut cur[r * stride..], &next[..stride], row(s + r), max);
                }
            });
        oblk.par_chunks_mut(stride).enumerate().for_each(|(i, d)| {
            let a = &hh[i * stride..(i + 1) * stride];
            let b = &g[(i + k - 1) * stride..(i + k) * stride];
            pick_rows(d, a, b, max);
        });
    }
    out
}

#[inline(always)]
fn pick<K: Ord>(a: K, b: K, max: bool) -> K {
    if max {
        a.max(b)
    } else {
        a.min(b)
    }
}

/// `dst[i] = min(a[i], b[i])` (max), the branch outside the loop so that it vectorises.
#[inline]
fn pick_rows<K: Ord + Copy>(dst: &mut [K], a: &[K], b: &[K], max: bool) {
    if max {
        for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
            *d = x.max(y);
        }
    } else {
        for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
            *d = x.min(y);
        }
    }
}

/// Huang's sliding histogram for `u8` keys over a 2-D box (`fshape[0] == 1`): one
/// histogram per row, moved one column at a time.
pub(crate) fn huang_u8(
    keys: &[u32],
    shape: [usize; 3],
    spec: &RankSpec,
    r: usize,
    cval: Option<u32>,
) -> Vec<u32> {
    let [_, h, w] = shape;
    let [_, fh, fw] = spec.fshape;
    let cy = (fh / 2) as isize + spec.origin[1];
    let cx = (fw / 2) as isize + spec.origin[2];
    let mode = spec.mode;
    let dz = -spec.origin[0];
    let d = shape[0];
    let mut out = vec![0u32; keys.len()];
    out.par_chunks_mut(w).enumerate().for_each(|(row, orow)| {
        let (z, y) = (row / h, row % h);
        let zz = at(mode, z, dz, d);
        let rows: Vec<Option<usize>> = (0..fh)
            .map(|j| zz.and_then(|zz| at(mode, y, j as isize - cy, h).map(|yy| (zz * h + yy) * w)))
            .collect();
        let val = |rb: Option<usize>, x: isize| -> usize {
            match (rb, mode.map_index(x, w)) {
                (Some(b), Some(xx)) => keys[b + xx] as usize,
                _ => cval.unwrap_or(0) as usize,
            }
        };
        let mut hist = [0u32; 256];
        for &rb in &rows {
            for j in 0..fw {
                hist[val(rb, j as isize - cx)] += 1;
            }
        }
        for (x, o) in orow.iter_mut().enumerate() {
            if x > 0 {
                let (old, new) = (x as isize - 1 - cx, x as isize - 1 - cx + fw as isize);
                for &rb in &rows {
                    hist[val(rb, old)] -= 1;
                    hist[val(rb, new)] += 1;
                }
            }
            let mut acc = 0usize;
            let mut m = 0usize;
            while acc + hist[m] as usize <= r {
                acc += hist[m] as usize;
                m += 1;
            }
            *o = m as u32;
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pass by definition: each output the min (max) of its `k` window, read through
    /// the boundary mode.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        src: &[u32],
        shape: [usize; 3],
        axis: usize,
        k: usize,
        o: isize,
        mode: BoundaryMode,
        cval: u32,
        max: bool,
    ) -> Vec<u32> {
        let stride: usize = shape[axis + 1..].iter().product();
        let n = shape[axis];
        let c = (k / 2) as isize + o;
        (0..src.len())
            .map(|idx| {
                let p = (idx / stride) % n;
                let base = idx - p * stride;
                let vals = (0..k).map(|t| match mode.map_index(p as isize - c + t as isize, n) {
                    Some(i) => src[base + i * stride],
                    None => cval,
                });
                if max { vals.max() } else { vals.min() }.expect("k >= 1")
            })
            .collect()
    }

    #[test]
    fn minmax_pass_is_the_window_min_max_on_every_axis_mode_and_origin() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let modes = [
            BoundaryMode::Reflect,
            BoundaryMode::Mirror,
            BoundaryMode::Nearest,
            BoundaryMode::Wrap,
            BoundaryMode::Constant(0.0),
        ];
        for shape in [[1, 1, 7], [1, 5, 13], [3, 4, 9], [2, 1, 1], [4, 6, 1]] {
            let src: Vec<u32> = (0..shape.iter().product::<usize>())
                .map(|_| (next() % 1000) as u32)
                .collect();
            for axis in 0..3 {
                for k in [1, 2, 3, 4, 8] {
                    for o in [-(k as isize) / 2, 0, (k as isize - 1) / 2] {
                        for mode in modes {
                            for max in [false, true] {
                                let cval = (next() % 1000) as u32;
                                let got = minmax_pass(&src, shape, axis, k, o, mode, Some(cval), max);
                                let want = naive(&src, shape, axis, k, o, mode, cval, max);
                                assert_eq!(
                                    got, want,
                                    "shape {shape:?} axis {axis} k {k} o {o} {mode:?} max {max}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
