//! The separable path: one 1-D correlation pass per axis, each stored in the data's type
//! (`f32` rounded, `f64` as is), exactly as `scipy.ndimage.correlate1d` (and so
//! `gaussian_filter`, `sobel`) does for `float32` and `float64` data: each pass extends its
//! line through the boundary mode, sums in `f64` with scipy's symmetric / antisymmetric /
//! general formula (same operations, same order), and stores the result; the next pass
//! reads that intermediate and extends it again.
//!
//! Passes along the contiguous axis copy each row into an extended `f64` line (the border
//! handled once per row) and then run a check-free 16-wide loop. Passes along the other
//! axes combine whole source rows chosen through the boundary mode, so no pixel is tested.

use kiln_core::imaging::scipy_cpu::{classify, Sym};
use kiln_core::imaging::BoundaryMode;
use rayon::prelude::*;

use super::direct::{shifted, Dims, Sample, LANES};

/// The samples under each tap of a 1-D kernel for an output block of `L` pixels.
trait Window<const L: usize> {
    /// The `L` samples under tap `m` (`0..n`, centre `n/2`).
    fn tap(&self, m: usize) -> [f64; L];
}

/// A block of an extended line: tap `m` of pixel `j + i` is `ext[j + i + m]`.
struct Line<'a> {
    ext: &'a [f64],
    j: usize,
}

impl<const L: usize> Window<L> for Line<'_> {
    #[inline(always)]
    fn tap(&self, m: usize) -> [f64; L] {
        let s = &self.ext[self.j + m..][..L];
        std::array::from_fn(|i| s[i])
    }
}

/// A block across rows: tap `m` of pixel `j + i` is `rows[m][j + i]` (`None`: cval).
struct Rows<'a, 'b, T> {
    rows: &'a [Option<&'b [T]>],
    j: usize,
    cval: f64,
}

impl<const L: usize, T: Sample> Window<L> for Rows<'_, '_, T> {
    #[inline(always)]
    fn tap(&self, m: usize) -> [f64; L] {
        match self.rows[m] {
            Some(s) => {
                let s = &s[self.j..][..L];
                std::array::from_fn(|i| s[i].to_f64())
            }
            None => [self.cval; L],
        }
    }
}

/// One output block, with scipy's formula for the kernel's symmetry.
#[inline(always)]
fn corr1d<const L: usize>(w: &[f64], sym: Sym, x: &impl Window<L>) -> [f64; L] {
    match sym {
        Sym::Symmetric => pairs::<L, true>(w, x),
        Sym::Anti => pairs::<L, false>(w, x),
        Sym::General => general(w, x),
    }
}

/// `x[0]·w[0] + Σ_{m<r} (x[-r+m] ± x[r-m])·w[m]` (offsets from the centre).
#[inline(always)]
fn pairs<const L: usize, const SYMMETRIC: bool>(w: &[f64], x: &impl Window<L>) -> [f64; L] {
    let n = w.len();
    let r = n / 2;
    let c = x.tap(r);
    let mut o: [f64; L] = std::array::from_fn(|i| c[i] * w[r]);
    for (m, &wm) in w.iter().enumerate().take(r) {
        let (a, b) = (x.tap(m), x.tap(n - 1 - m));
        for ((o, a), b) in o.iter_mut().zip(a).zip(b) {
            let p = if SYMMETRIC { a + b } else { a - b };
            *o += p * wm;
        }
    }
    o
}

/// `x[r]·w[r] + Σ_{m<n-1} x[m]·w[m]`.
#[inline(always)]
fn general<const L: usize>(w: &[f64], x: &impl Window<L>) -> [f64; L] {
    let n = w.len();
    let c = x.tap(n - 1);
    let mut o: [f64; L] = std::array::from_fn(|i| c[i] * w[n - 1]);
    for (m, &wm) in w.iter().enumerate().take(n - 1) {
        let a = x.tap(m);
        for (o, a) in o.iter_mut().zip(a) {
            *o += a * wm;
        }
    }
    o
}

/// Computes a row of `n` outputs block by block (the last block overlapping the one
/// before; a row shorter than a block runs pixel by pixel), `wide(j)` / `narrow(j)` giving
/// the window at column `j` and `put(j, values)` storing a block.
#[inline(always)]
fn blocks<A: Window<LANES>, B: Window<1>>(
    n: usize,
    w: &[f64],
    sym: Sym,
    wide: impl Fn(usize) -> A,
    narrow: impl Fn(usize) -> B,
    mut put: impl FnMut(usize, &[f64]),
) {
    if n < LANES {
        for j in 0..n {
            put(j, &corr1d::<1>(w, sym, &narrow(j)));
        }
        return;
    }
    let mut j = 0;
    while j < n {
        let j0 = j.min(n - LANES);
        put(j0, &corr1d::<LANES>(w, sym, &wide(j0)));
        j += LANES;
    }
}

/// Stores a block in the data's type, as scipy stores each pass.
#[inline(always)]
fn put<T: Sample>(out: &mut [T]) -> impl FnMut(usize, &[f64]) + '_ {
    |j, o| {
        for (d, &o) in out[j..j + o.len()].iter_mut().zip(o) {
            *d = T::from_f64(o);
        }
    }
}

/// What one sweep over the volume does (weights with their anchors, `len/2 + origin`).
enum Stage<'a> {
    /// One `correlate1d` pass along an axis.
    Single(usize, &'a [f64], usize),
    /// A pass along H then one along W, fused row by row: the H pass of an output row is
    /// stored in the data's type straight into the W pass's extended line, so the intermediate
    /// never goes to memory (same arithmetic as two sweeps).
    RowsThenCols((&'a [f64], usize), (&'a [f64], usize)),
}

/// Runs the 1-D passes `(axis, weights, anchor)` in order from `src` into `out` (same
/// shape); tap `m` of output `i` reads input `i + m - anchor` along the axis.
pub(super) fn correlate<T: Sample>(
    src: &[T],
    dims: Dims,
    passes: &[(usize, &[f64], usize)],
    mode: BoundaryMode,
    out: &mut [T],
) {
    let mut stages = Vec::new();
    let mut i = 0;
    while i < passes.len() {
        match (passes[i], passes.get(i + 1)) {
            ((1, w1, a1), Some(&(2, w2, a2))) => {
                stages.push(Stage::RowsThenCols((w1, a1), (w2, a2)));
                i += 2;
            }
            ((axis, w, a), _) => {
                stages.push(Stage::Single(axis, w, a));
                i += 1;
            }
        }
    }
    let n = stages.len();
    if n == 0 {
        out.copy_from_slice(src);
        return;
    }
    let mut tmp = if n > 1 {
        vec![T::default(); src.len()]
    } else {
        Vec::new()
    };
    for (i, stage) in stages.iter().enumerate() {
        // Ping-pong so that the last stage lands in `out`.
        let to_out = (n - 1 - i) % 2 == 0;
        match (i, to_out) {
            (0, true) => sweep(src, dims, stage, mode, out),
            (0, false) => sweep(src, dims, stage, mode, &mut tmp),
            (_, true) => sweep(&tmp, dims, stage, mode, out),
            (_, false) => sweep(out, dims, stage, mode, &mut tmp),
        }
    }
}

/// One sweep: every output row from the rows of `src` it needs.
fn sweep<T: Sample>(src: &[T], dims: Dims, stage: &Stage, mode: BoundaryMode, out: &mut [T]) {
    let (axis, (w, r), w2) = match *stage {
        Stage::Single(axis, w, a) => (axis, (w, a), None),
        Stage::RowsThenCols(w1, w2) => (1, w1, Some(w2)),
    };
    let sym = classify(w);
    // The kernel run on the contiguous axis, if any, and its reach left (rc) and right.
    let wc = if axis == 2 { Some((w, r)) } else { w2 };
    let (symc, rc, rr) = wc.map_or((Sym::General, 0, 0), |(wc, a)| {
        (classify(wc), a, wc.len() - 1 - a)
    });
    let wc = wc.map(|(wc, _)| wc);
    let w2 = w2.map(|(w2, _)| w2);
    let cval = mode.cval().unwrap_or(0.0);
    let rpt = dims.rows_per_task(w.len() + w2.map_or(0, <[f64]>::len));
    out.par_chunks_mut(dims.w * rpt)
        .enumerate()
        .for_each(|(t, chunk)| {
            let mut ext = vec![0.0f64; if wc.is_some() { dims.w + rc + rr } else { 0 }];
            let mut rows: Vec<Option<&[T]>> = vec![None; w.len()];
            for (i, orow) in chunk.chunks_mut(dims.w).enumerate() {
                let g = t * rpt + i;
                let (z, y) = (g / dims.h, g % dims.h);
                if axis == 2 {
                    let row = dims.row(src, z, y);
                    for (e, &x) in ext[rc..rc + dims.w].iter_mut().zip(row) {
                        *e = x.to_f64();
                    }
                } else {
                    for (m, row) in rows.iter_mut().enumerate() {
                        *row = if axis == 1 {
                            shifted(mode, y, m, r, dims.h).map(|yy| dims.row(src, z, yy))
                        } else {
                            shifted(mode, z, m, r, dims.d).map(|zz| dims.row(src, zz, y))
                        };
                    }
                    let rows = &rows[..];
                    let win = |j| Rows { rows, j, cval };
                    if w2.is_none() {
                        blocks(dims.w, w, sym, win, win, put(orow));
                        continue;
                    }
                    // The H pass, stored in the data's type, becomes the W pass's line.
                    let line = &mut ext[rc..rc + dims.w];
                    blocks(dims.w, w, sym, win, win, |j, o| {
                        for (d, &o) in line[j..j + o.len()].iter_mut().zip(o) {
                            *d = T::from_f64(o).to_f64();
                        }
                    });
                }
                if let Some(wc) = wc {
                    extend_borders(&mut ext, (rc, rr), mode, cval);
                    let line = |j| Line { ext: &ext, j };
                    blocks(dims.w, wc, symc, line, line, put(orow));
                }
            }
        });
}

/// scipy's `NI_ExtendLine`: with the line at `ext[r..len-rr]`, sets `ext[i]` for the `r`
/// places before and `rr` after it to the sample at `i - r` under the boundary mode.
fn extend_borders(ext: &mut [f64], (r, rr): (usize, usize), mode: BoundaryMode, cval: f64) {
    let n = ext.len() - r - rr;
    for i in (0..r).chain(r + n..n + r + rr) {
        ext[i] = shifted(mode, i, 0, r, n).map_or(cval, |j| ext[r + j]);
    }
}
