//! scipy's exact Euclidean feature transform (`NI_EuclideanFeatureTransform`) and the
//! distances `distance_transform_edt` computes from it.
//!
//! scipy's C recursion amounts to one pass per axis, axis 0 first: every line along the axis
//! keeps, of the features its points carry from the previous passes (at first: each background
//! element is its own feature), the Voronoi sites that can be nearest to some point of the
//! line (a stack, popped on scipy's test `c·vR − b·uR − a·wR − a·b·c > 0`), then gives each
//! point the first site of the stack whose successor is not strictly nearer. Every product and
//! sum is evaluated in scipy's order, so the same sites win the same ties.
//!
//! Layout: each pass reads the previous one's points (`ndim` int32 each, point-major) as a
//! `[len][rest]` matrix and writes its lines contiguously as `[rest][len]`, so every pass reads
//! columns and writes rows; the axes rotate by one each pass and the last pass writes the
//! input's own row-major order. Tasks of a few consecutive lines run in parallel; each line
//! is computed on its own, so the result does not depend on how the lines are split.

use rayon::prelude::*;

use super::{check_mask, unravel};
use crate::error::{Error, Result};

const OP: &str = "distance_transform_edt";

/// `distance_transform_edt`'s results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EdtOutput {
    /// scipy's `indices`: for each axis, the coordinate along it of every element's nearest
    /// background element (`ndim` planes of the input's shape, row-major, int32). Where the
    /// input has no background element, axis 0 holds -1 and the others 0, as scipy leaves a
    /// fresh output.
    pub indices: Option<Vec<i32>>,
    /// scipy's `distances` (float64, row-major).
    pub distances: Option<Vec<f64>>,
}

/// One pass's constants.
struct Pass<'a> {
    /// The axis the lines run along.
    d: usize,
    /// The rank (values per point).
    r: usize,
    /// The sampling, 1.0 per axis where none was given (`x * 1.0 == x`, so the products scipy
    /// skips without a sampling change nothing).
    s: &'a [f64],
    /// Whether a point's squared distance to a site may be taken as the site's cached sum over
    /// the other axes plus the term of axis `d` (the same value as scipy's sum in axis order).
    fast_delta: bool,
    /// Whether the first pass may be computed as a scan: on a line of background elements
    /// (sites with the same other coordinates) scipy's stack keeps every site and each point
    /// takes the nearest, the earlier of two equally near; with a positive, finite sampling
    /// along the axis whose squares neither overflow nor underflow, its comparisons of
    /// `((site - i) * s)^2` order the sites as `|site - i|` does.
    scan_first: bool,
}

/// The stack of one line's Voronoi sites.
#[derive(Default)]
struct Stack {
    /// The sites' positions on the line.
    g: Vec<usize>,
    /// Each site's squared distance to the line over the axes other than `d`, summed in axis
    /// order (scipy's `wR`, and its `uR`/`vR` when the site is on the stack).
    w: Vec<f64>,
}

impl Pass<'_> {
    /// scipy's `_VoronoiFT` on one line: `f` holds the line's points (`r` values each; a
    /// point with a negative value 0 has no feature), `coor` the line's coordinates on the
    /// other axes. Writes `out` and returns `true`, or returns `false` without writing when
    /// no point of the line has a feature (scipy leaves such a line as it is). `R` is the
    /// rank where it is a compile-time constant (the loops over the axes unrolled), 0 for
    /// any rank.
    fn line<const R: usize>(&self, f: &[i32], coor: &[i64], st: &mut Stack, out: &mut [i32]) -> bool {
        let r = if R == 0 { self.r } else { R };
        let (d, s) = (self.d, self.s);
        let len = f.len() / r;
        let sd = s[d];
        st.g.clear();
        st.w.clear();
        for (ii, fi) in f.chunks_exact(r).enumerate() {
            if fi[0] < 0 {
                continue;
            }
            let fd = f64::from(fi[d]);
            let mut w = 0.0;
            for jj in 0..r {
                if jj != d {
                    let t = (i64::from(fi[jj]) - coor[jj]) as f64 * s[jj];
                    w += t * t;
                }
            }
            while st.g.len() >= 2 {
                let l = st.g.len() - 1;
                let (i1, i2) = (st.g[l], st.g[l - 1]);
                let f1 = f64::from(f[i1 * r + d]);
                let a = (f1 - f64::from(f[i2 * r + d])) * sd;
                let b = (fd - f1) * sd;
                let c = a + b;
                let (u, v) = (st.w[l - 1], st.w[l]);
                if c * v - b * u - a * w - a * b * c <= 0.0 {
                    break;
                }
                st.g.pop();
                st.w.pop();
            }
            st.g.push(ii);
            st.w.push(w);
        }
        let m = st.g.len();
        if m == 0 {
            return false;
        }
        let delta = |l: usize, ii: usize| -> f64 {
            let site = &f[st.g[l] * r..][..r];
            if self.fast_delta {
                let t = (i64::from(site[d]) - ii as i64) as f64 * sd;
                st.w[l] + t * t
            } else {
                let mut acc = 0.0;
                for jj in 0..r {
                    let c = if jj == d { ii as i64 } else { coor[jj] };
                    let t = (i64::from(site[jj]) - c) as f64 * s[jj];
                    acc += t * t;
                }
                acc
            }
        };
        let mut l = 0;
        for (ii, o) in out.chunks_exact_mut(r).enumerate().take(len) {
            let mut d1 = delta(l, ii);
            while l + 1 < m {
                let d2 = delta(l + 1, ii);
                if d1 <= d2 {
                    break;
                }
                d1 = d2;
                l += 1;
            }
            o.copy_from_slice(&f[st.g[l] * r..][..r]);
        }
        true
    }
}

/// How one pass of [`edt`] computes (the choices a device port must make the same way to
/// give the same bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdtPassFlags {
    /// A point's squared distance to a site is the site's cached sum over the other axes
    /// plus the term of the pass's axis (else the sum over every axis in axis order).
    pub fast_delta: bool,
    /// The first pass is a scan: each point takes the nearest background element of its
    /// line, the earlier of two equally near (the stack's result for such a sampling).
    pub scan_first: bool,
}

/// The spacing along each of `r` axes: `sampling` as given (one value per axis, else an
/// error), or 1.0 per axis where none was given.
pub fn sampling_per_axis(sampling: Option<&[f64]>, r: usize) -> Result<Vec<f64>> {
    match sampling {
        Some(s) if s.len() != r => Err(Error::invalid(
            OP,
            format!("{} sampling values for {r} axes", s.len()),
        )),
        Some(s) => Ok(s.to_vec()),
        None => Ok(vec![1.0; r]),
    }
}

/// [`edt`]'s choices for each pass (axis 0 first) of an array of `shape` with `sampling`
/// (one value per axis; 1.0 where none was given).
pub fn pass_flags(shape: &[usize], sampling: &[f64]) -> Vec<EdtPassFlags> {
    let r = shape.len();
    // Integer sampling small enough that every product and sum is an exact integer in f64:
    // then any order of evaluation gives scipy's values.
    let longest = shape.iter().copied().max().unwrap_or(1) as f64;
    let exact = r <= 32
        && sampling
            .iter()
            .all(|&v| v.is_finite() && v == v.trunc() && v.abs() * longest <= 32768.0);
    (0..r)
        .map(|d| EdtPassFlags {
            fast_delta: exact || d == r - 1 || r <= 2,
            scan_first: d == 0 && (1e-140..=1e140).contains(&sampling[0]),
        })
        .collect()
}

/// What a pass reads: the mask (the first pass) or the previous pass's points.
#[derive(Clone, Copy)]
enum Src<'a> {
    Mask(&'a [u8]),
    Points(&'a [i32]),
}

/// scipy.ndimage.distance_transform_edt of a row-major `mask` of `shape` (at least one axis;
/// scipy makes a 0-D input 1-D first): `sampling` is the spacing along each axis (`None`: 1);
/// `distances` and `indices` say which results to return.
pub fn edt(
    mask: &[u8],
    shape: &[usize],
    sampling: Option<&[f64]>,
    distances: bool,
    indices: bool,
) -> Result<EdtOutput> {
    let n = check_mask(OP, mask, shape)?;
    let r = shape.len();
    if r == 0 {
        return Err(Error::invalid(
            OP,
            "the input has no axis (scipy makes a 0-D input 1-D first)",
        ));
    }
    let s = sampling_per_axis(sampling, r)?;
    let mut out = EdtOutput::default();
    if n == 0 {
        out.distances = distances.then(Vec::new);
        out.indices = indices.then(Vec::new);
        return Ok(out);
    }
    let flags = pass_flags(shape, &s);
    let mut cur: Vec<i32> = Vec::new();
    let mut dist = if distances { vec![0.0f64; n] } else { Vec::new() };
    for (d, f) in flags.iter().enumerate() {
        let p = Pass {
            d,
            r,
            s: &s,
            fast_delta: f.fast_delta,
            scan_first: f.scan_first,
        };
        let mut next = vec![0i32; n * r];
        let src = if d == 0 {
            Src::Mask(mask)
        } else {
            Src::Points(&cur)
        };
        let last = d == r - 1;
        run_pass(
            &p,
            src,
            shape,
            &mut next,
            (last && distances).then_some(&mut dist[..]),
        );
        cur = next;
    }
    if distances {
        out.distances = Some(dist);
    }
    if indices {
        let mut planes = vec![0i32; n * r];
        for (k, plane) in planes.chunks_exact_mut(n).enumerate() {
            plane
                .par_chunks_mut(1 << 14)
                .zip(cur.par_chunks(r << 14))
                .for_each(|(o, pts)| {
                    for (v, pt) in o.iter_mut().zip(pts.chunks_exact(r)) {
                        *v = pt[k];
                    }
                });
        }
        out.indices = Some(planes);
    }
    Ok(out)
}

/// One pass along axis `p.d`: `src` is `[len][rest]` (rest: the axes after `d`, then those
/// before it), `dst` becomes `[rest][len]`; in the last pass (the input's own order),
/// `dist` receives the distances.
fn run_pass(p: &Pass<'_>, src: Src<'_>, shape: &[usize], dst: &mut [i32], dist: Option<&mut [f64]>) {
    let (d, r) = (p.d, p.r);
    let len = shape[d];
    let rest_axes: Vec<usize> = (d + 1..r).chain(0..d).collect();
    let rest_shape: Vec<usize> = rest_axes.iter().map(|&a| shape[a]).collect();
    let rest: usize = rest_shape.iter().product();
    // consecutive lines read consecutive memory; a task's scratch stays small
    let lines = (32768 / (len * r)).clamp(1, 16);
    let work = |t: usize, chunk: &mut [i32], dist: Option<&mut [f64]>| {
        let first = t * lines;
        let nb = chunk.len() / (len * r);
        let mut scratch = vec![0i32; nb * len * r];
        match src {
            Src::Mask(m) if p.scan_first => {
                // the first pass as its result: each point takes the nearest background
                // element of its line, the earlier one of two equally near (see `scan_first`)
                let mut cs = vec![0usize; rest_shape.len()];
                let mut near = vec![usize::MAX; len];
                for b in 0..nb {
                    unravel(first + b, &rest_shape, &mut cs);
                    let mut last = usize::MAX;
                    for (i, v) in near.iter_mut().enumerate() {
                        if m[i * rest + first + b] == 0 {
                            last = i;
                        }
                        *v = last;
                    }
                    let mut next = usize::MAX;
                    for i in (0..len).rev() {
                        if m[i * rest + first + b] == 0 {
                            next = i;
                        }
                        let left = near[i];
                        let pos = match (left, next) {
                            (usize::MAX, usize::MAX) => usize::MAX,
                            (usize::MAX, q) => q,
                            (q, usize::MAX) => q,
                            (l, q) if i - l <= q - i => l,
                            (_, q) => q,
                        };
                        let pt = &mut scratch[(b * len + i) * r..][..r];
                        if pos == usize::MAX {
                            pt[0] = -1;
                        } else {
                            pt[d] = pos as i32;
                            for (&a, &c) in rest_axes.iter().zip(&cs) {
                                pt[a] = c as i32;
                            }
                        }
                    }
                }
            }
            Src::Mask(m) => {
                // scipy's first pass: a background element is its own feature, a foreground
                // one has none (-1 in value 0)
                let mut cs = vec![0usize; rest_shape.len()];
                for b in 0..nb {
                    unravel(first + b, &rest_shape, &mut cs);
                    for i in 0..len {
                        let pt = &mut scratch[(b * len + i) * r..][..r];
                        if m[i * rest + first + b] == 0 {
                            pt[d] = i as i32;
                            for (&a, &c) in rest_axes.iter().zip(&cs) {
                                pt[a] = c as i32;
                            }
                        } else {
                            pt[0] = -1;
                        }
                    }
                }
            }
            Src::Points(f) => {
                for i in 0..len {
                    let row = &f[(i * rest + first) * r..][..nb * r];
                    for (b, pt) in row.chunks_exact(r).enumerate() {
                        scratch[(b * len + i) * r..][..r].copy_from_slice(pt);
                    }
                }
            }
        }
        let mut st = Stack::default();
        let mut cs = vec![0usize; rest_shape.len()];
        let mut coor = vec![0i64; r];
        let mut dist = dist;
        for b in 0..nb {
            unravel(first + b, &rest_shape, &mut cs);
            for (&a, &c) in rest_axes.iter().zip(&cs) {
                coor[a] = c as i64;
            }
            let f = &scratch[b * len * r..][..len * r];
            let o = &mut chunk[b * len * r..][..len * r];
            let found = if matches!(src, Src::Mask(_)) && p.scan_first {
                o.copy_from_slice(f);
                true
            } else {
                match r {
                    1 => p.line::<1>(f, &coor, &mut st, o),
                    2 => p.line::<2>(f, &coor, &mut st, o),
                    3 => p.line::<3>(f, &coor, &mut st, o),
                    4 => p.line::<4>(f, &coor, &mut st, o),
                    _ => p.line::<0>(f, &coor, &mut st, o),
                }
            };
            if !found {
                o.copy_from_slice(f);
            }
            if let Some(dl) = dist.as_deref_mut() {
                let dl = &mut dl[b * len..][..len];
                match r {
                    2 => line_distances::<2>(o, &coor, d, p.s, dl),
                    3 => line_distances::<3>(o, &coor, d, p.s, dl),
                    _ => line_distances::<0>(o, &coor, d, p.s, dl),
                }
            }
        }
    };
    let step = lines * len * r;
    match dist {
        Some(dv) => dst
            .par_chunks_mut(step)
            .zip(dv.par_chunks_mut(lines * len))
            .enumerate()
            .for_each(|(t, (c, dc))| work(t, c, Some(dc))),
        None => dst
            .par_chunks_mut(step)
            .enumerate()
            .for_each(|(t, c)| work(t, c, None)),
    }
}

/// scipy's distances along one line of the last pass (axis `d`, the last):
/// `sqrt(sum_k ((ft_k - x_k) * sampling_k)**2)`, the difference in int32 as NumPy takes it,
/// the sum in axis order.
/// `R`: the rank where it is a compile-time constant, 0 for any.
fn line_distances<const R: usize>(pts: &[i32], coor: &[i64], d: usize, s: &[f64], out: &mut [f64]) {
    let r = if R == 0 { s.len() } else { R };
    for (i, (pt, o)) in pts.chunks_exact(r).zip(out.iter_mut()).enumerate() {
        let mut acc = 0.0;
        for k in 0..r {
            let x = if k == d { i as i32 } else { coor[k] as i32 };
            let t = f64::from(pt[k].wrapping_sub(x)) * s[k];
            acc = if k == 0 { t * t } else { acc + t * t };
        }
        *o = acc.sqrt();
    }
}
