//! The direct path: every output pixel is the `f64` sum of `weight * input` over the
//! kernel's non-zero taps in row-major kernel order, stored once in the data's type (`f32`
//! rounded, `f64` as is). That is `scipy.ndimage.correlate`'s arithmetic for `float32` and
//! `float64` input, operation for operation
//! (scipy drops weights with `|w| <= DBL_EPSILON`, starts from `0.0` and adds
//! `w * x` or, outside under `constant`, `w * cval`), so the results agree bit for bit.
//!
//! Work is split into output rows. A row's taps read `kd × k` source rows, chosen once per
//! row through the boundary mode (so the row axes never need a per-pixel check); the
//! columns whose window lies inside the image run in 16-wide blocks with no boundary test,
//! and only the `k/2` columns at each edge (and a block remainder) map column indices.

use kiln_core::imaging::BoundaryMode;
use rayon::prelude::*;

/// Pixels per vector block: 16 `f64` accumulators stay in registers.
pub(super) const LANES: usize = 16;

/// The element types the linear paths read and store: each sample widens exactly to
/// `f64`; a sum is stored with `as` (an `f32` rounds to nearest, an `f64` stays).
pub(super) trait Sample: Copy + Default + Send + Sync + 'static {
    /// The sample as a double.
    fn to_f64(self) -> f64;
    /// A double stored in this type.
    fn from_f64(x: f64) -> Self;
}

impl Sample for f32 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x as f32
    }
}

impl Sample for f64 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x
    }
}

/// The shape `(D, H, W)` of a contiguous row-major volume (a batch of images is `(N, H, W)`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Dims {
    pub d: usize,
    pub h: usize,
    pub w: usize,
}

impl Dims {
    /// The number of rows (`D * H`).
    pub fn rows(&self) -> usize {
        self.d * self.h
    }

    /// Rows per rayon task so that each task does about 64 K multiply-adds (rows of `w`
    /// pixels, `taps` each), while leaving at least 8 tasks per thread.
    pub fn rows_per_task(&self, taps: usize) -> usize {
        let per_row = (self.w * taps.max(1)).max(1);
        let by_work = (1 << 16) / per_row;
        let by_threads = self.rows() / (8 * rayon::current_num_threads()).max(1);
        by_work.clamp(1, by_threads.max(1))
    }

    /// The row `(z, y)` of `src`.
    pub fn row<'a, T>(&self, src: &'a [T], z: usize, y: usize) -> &'a [T] {
        let s = (z * self.h + y) * self.w;
        &src[s..s + self.w]
    }
}

/// One non-zero kernel weight: which of the `kd × k` source rows it reads and at which
/// column offset (`0..k`, centre `k/2`).
#[derive(Clone, Copy, Debug)]
struct Tap {
    row: usize,
    col: usize,
    w: f64,
}

/// `Σ taps w · x` for the `LANES` columns from `j` (all windows inside the row), in tap
/// order, starting from `0.0` (scipy's order).
#[inline(always)]
fn block<T: Sample>(rows: &[Option<&[T]>], taps: &[Tap], j: usize, r: usize, cval: f64) -> [f64; LANES] {
    let mut acc = [0.0f64; LANES];
    for t in taps {
        match rows[t.row] {
            Some(s) => {
                let s = &s[j + t.col - r..][..LANES];
                for (a, &x) in acc.iter_mut().zip(s) {
                    *a += t.w * x.to_f64();
                }
            }
            None => {
                let c = t.w * cval;
                for a in acc.iter_mut() {
                    *a += c;
                }
            }
        }
    }
    acc
}

/// Index `i + off - r` mapped into `0..len`.
#[inline]
pub(super) fn shifted(mode: BoundaryMode, i: usize, off: usize, r: usize, len: usize) -> Option<usize> {
    mode.map_index(i as isize + off as isize - r as isize, len)
}

/// Correlates `src` (shape `dims`) with a `kd × kh × kw` kernel (`kshape`, `weights`
/// row-major; `kd = 1` filters each `(H, W)` plane on its own) into `out`. Tap `(a, b, c)`
/// of output `(z, y, x)` reads input `(z + a - anchors[0], y + b - anchors[1], x + c -
/// anchors[2])` (scipy's placement: anchor `n/2 + origin`).
pub(super) fn correlate<T: Sample>(
    src: &[T],
    dims: Dims,
    kshape: [usize; 3],
    anchors: [usize; 3],
    weights: &[f64],
    mode: BoundaryMode,
    out: &mut [T],
) {
    let [kd, kh, kw] = kshape;
    let taps: Vec<Tap> = weights
        .iter()
        .enumerate()
        .filter(|(_, w)| w.abs() > f64::EPSILON)
        .map(|(i, &w)| Tap {
            row: i / kw,
            col: i % kw,
            w,
        })
        .collect();
    let cval = mode.cval().unwrap_or(0.0);
    let rpt = dims.rows_per_task(taps.len());
    out.par_chunks_mut(dims.w * rpt)
        .enumerate()
        .for_each(|(t, chunk)| {
            let mut rows: Vec<Option<&[T]>> = vec![None; kd * kh];
            for (i, orow) in chunk.chunks_mut(dims.w).enumerate() {
                let g = t * rpt + i;
                let (z, y) = (g / dims.h, g % dims.h);
                for a in 0..kd {
                    let zz = shifted(mode, z, a, anchors[0], dims.d);
                    for b in 0..kh {
                        let yy = shifted(mode, y, b, anchors[1], dims.h);
                        rows[a * kh + b] = zz.zip(yy).map(|(zz, yy)| dims.row(src, zz, yy));
                    }
                }
                correlate_row(&rows, &taps, (anchors[2], kw - 1 - anchors[2]), mode, cval, orow);
            }
        });
}

/// One output row from its source rows (`None`: the row lies outside under `constant`);
/// the kernel reaches `reach.0` columns left and `reach.1` right.
fn correlate_row<T: Sample>(
    rows: &[Option<&[T]>],
    taps: &[Tap],
    reach: (usize, usize),
    mode: BoundaryMode,
    cval: f64,
    out: &mut [T],
) {
    let w = out.len();
    let (r, rr) = reach;
    // Columns r..w-rr see only in-range columns: no boundary test there. The last block
    // overlaps the one before it rather than leaving a remainder.
    let (lo, hi) = if w > r + rr { (r, w - rr) } else { (0, 0) };
    let (mut j, mut end) = (lo, lo);
    while j < hi && hi - lo >= LANES {
        let j0 = j.min(hi - LANES);
        let acc = block(rows, taps, j0, r, cval);
        for (o, a) in out[j0..j0 + LANES].iter_mut().zip(acc) {
            *o = T::from_f64(a);
        }
        j += LANES;
        end = hi;
    }
    for jj in (0..lo).chain(end..w) {
        let mut acc = 0.0f64;
        for t in taps {
            let x = rows[t.row].and_then(|s| shifted(mode, jj, t.col, r, w).map(|c| s[c].to_f64()));
            acc += t.w * x.unwrap_or(cval);
        }
        out[jj] = T::from_f64(acc);
    }
}
