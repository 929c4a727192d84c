//! scipy's brute-force distance transform (`NI_DistanceTransformBruteForce`): every foreground
//! element against every background element that touches the foreground (through faces, edges
//! or corners: scipy's dilation by the full `3^ndim` structure).
//!
//! scipy keeps those background elements in a list built by prepending, so it tries them in
//! reverse row-major order and keeps the first strictly nearer one: of equally near elements,
//! the last in row-major order wins. An element that finds none (no background, or NaN
//! distances) keeps the feature of the foreground element before it (scipy's `min_index`
//! carries over; 0 at first), and the largest distance (`sqrt(DBL_MAX)`, or `UINT_MAX`).
//! Elements are independent apart from that carry, so they run in parallel and the carry is
//! filled in afterwards, in order.

use rayon::prelude::*;

use super::{check_mask, unravel};
use crate::error::{Error, Result};

const OP: &str = "distance_transform_bf";

/// Elements per parallel task.
const CHUNK: usize = 256;

/// `distance_transform_bf`'s metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BfMetric {
    /// Euclidean (float64 distances, with the sampling).
    Euclidean,
    /// City block: the sum of the absolute coordinate differences (uint32).
    CityBlock,
    /// Chessboard: the largest absolute coordinate difference (uint32).
    Chessboard,
}

/// `distance_transform_bf`'s distances: float64 for the Euclidean metric, uint32 otherwise.
#[derive(Clone, Debug, PartialEq)]
pub enum BfDistances {
    /// Euclidean distances.
    F64(Vec<f64>),
    /// City-block or chessboard distances.
    U32(Vec<u32>),
}

/// `distance_transform_bf`'s results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BfOutput {
    /// The distances (row-major).
    pub distances: Option<BfDistances>,
    /// Each element's nearest background element as a row-major flat index (a background
    /// element's own).
    pub features: Option<Vec<i32>>,
}

/// scipy.ndimage.distance_transform_bf of a row-major `mask` of `shape` (0-D included) with
/// `metric`; `sampling` (Euclidean only) is the spacing along each axis.
pub fn bf(
    mask: &[u8],
    shape: &[usize],
    metric: BfMetric,
    sampling: Option<&[f64]>,
    distances: bool,
    features: bool,
) -> Result<BfOutput> {
    let n = check_mask(OP, mask, shape)?;
    let r = shape.len();
    if let Some(s) = sampling {
        if s.len() != r {
            return Err(Error::invalid(
                OP,
                format!("{} sampling values for {r} axes", s.len()),
            ));
        }
    }
    if n > i32::MAX as usize {
        return Err(Error::invalid(
            OP,
            format!("{n} elements: scipy's int32 flat indices hold at most 2^31 - 1"),
        ));
    }
    let border = border_elements(mask, shape);
    let mut dist_f = if distances && metric == BfMetric::Euclidean {
        vec![0.0f64; n]
    } else {
        Vec::new()
    };
    let mut dist_u = if distances && metric != BfMetric::Euclidean {
        vec![0u32; n]
    } else {
        Vec::new()
    };
    // -1: no strictly nearer element was found (filled from the carry below)
    let mut ft = vec![-1i32; n];
    let one = |p: usize, c: &mut [usize], df: Option<&mut f64>, du: Option<&mut u32>, f: &mut i32| {
        if mask[p] == 0 {
            if let Some(v) = df {
                *v = 0.0;
            }
            if let Some(v) = du {
                *v = 0;
            }
            *f = p as i32;
            return;
        }
        unravel(p, shape, c);
        match metric {
            BfMetric::Euclidean => {
                let mut best = f64::MAX;
                for (idx, bc) in border.iter().rev() {
                    let mut d = 0.0;
                    for (k, (&a, &b)) in c.iter().zip(bc).enumerate() {
                        let mut t = (a as isize - b as isize) as f64;
                        if let Some(s) = sampling {
                            t *= s[k];
                        }
                        d += t * t;
                    }
                    if d < best {
                        best = d;
                        *f = *idx as i32;
                    }
                }
                if let Some(v) = df {
                    *v = best.sqrt();
                }
            }
            BfMetric::CityBlock | BfMetric::Chessboard => {
                let mut best = u32::MAX;
                for (idx, bc) in border.iter().rev() {
                    let mut d: u32 = 0;
                    for (&a, &b) in c.iter().zip(bc) {
                        let t = (a as isize - b as isize).unsigned_abs() as u32;
                        if metric == BfMetric::CityBlock {
                            d = d.wrapping_add(t);
                        } else if t > d {
                            d = t;
                        }
                    }
                    if d < best {
                        best = d;
                        *f = *idx as i32;
                    }
                }
                if let Some(v) = du {
                    *v = best;
                }
            }
        }
    };
    let task = |t: usize, fc: &mut [i32], mut df: Option<&mut [f64]>, mut du: Option<&mut [u32]>| {
        let mut c = vec![0usize; r];
        for (i, f) in fc.iter_mut().enumerate() {
            one(
                t * CHUNK + i,
                &mut c,
                df.as_deref_mut().map(|d| &mut d[i]),
                du.as_deref_mut().map(|d| &mut d[i]),
                f,
            );
        }
    };
    if !dist_f.is_empty() {
        ft.par_chunks_mut(CHUNK)
            .zip(dist_f.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(|(t, (fc, dc))| task(t, fc, Some(dc), None));
    } else if !dist_u.is_empty() {
        ft.par_chunks_mut(CHUNK)
            .zip(dist_u.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(|(t, (fc, dc))| task(t, fc, None, Some(dc)));
    } else {
        ft.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(t, fc)| task(t, fc, None, None));
    }
    // scipy's min_index carries from one foreground element to the next
    let mut carry = 0i32;
    for (f, &m) in ft.iter_mut().zip(mask) {
        if m != 0 {
            if *f < 0 {
                *f = carry;
            } else {
                carry = *f;
            }
        }
    }
    Ok(BfOutput {
        distances: distances.then_some(match metric {
            BfMetric::Euclidean => BfDistances::F64(dist_f),
            _ => BfDistances::U32(dist_u),
        }),
        features: features.then_some(ft),
    })
}

/// The background elements with a foreground neighbour (faces, edges or corners), as
/// `(flat index, coordinates)` in row-major order.
fn border_elements(mask: &[u8], shape: &[usize]) -> Vec<(usize, Vec<usize>)> {
    let r = shape.len();
    let mut strides = vec![1usize; r];
    for a in (0..r.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * shape[a + 1];
    }
    let neighbours: Vec<Vec<isize>> = (0..3usize.pow(r as u32))
        .map(|j| {
            let mut c = vec![0usize; r];
            unravel(j, &vec![3; r], &mut c);
            c.iter().map(|&v| v as isize - 1).collect::<Vec<_>>()
        })
        .filter(|o| o.iter().any(|&v| v != 0))
        .collect();
    let mut out = Vec::new();
    let mut c = vec![0usize; r];
    for (p, &m) in mask.iter().enumerate() {
        if m != 0 {
            continue;
        }
        unravel(p, shape, &mut c);
        let touches = neighbours.iter().any(|o| {
            let mut q = 0usize;
            for ((&v, &ok), (&s, &st)) in c.iter().zip(o).zip(shape.iter().zip(&strides)) {
                let w = v as isize + ok;
                if w < 0 || w as usize >= s {
                    return false;
                }
                q += w as usize * st;
            }
            mask[q] != 0
        });
        if touches {
            out.push((p, c.clone()));
        }
    }
    out
}
