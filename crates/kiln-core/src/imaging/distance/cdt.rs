//! scipy's chamfer distance transform (`distance_transform_cdt`): `NI_DistanceTransformOnePass`
//! run forward over the array, then over the array reversed along every axis, as scipy's Python
//! layer runs it.
//!
//! A pass visits the elements in row-major order (the second in reverse row-major order). A
//! foreground element takes one more than the smallest distance among its already reached
//! neighbours (those the structure's elements before its centre point at, in the structure's
//! order; the second pass mirrors them), the first such neighbour winning a tie, and the
//! neighbour's feature with it. Each element depends on the ones before it, so a pass is
//! sequential, as scipy's is.

use super::{check_mask, unravel};
use crate::error::{Error, Result};

const OP: &str = "distance_transform_cdt";

/// `distance_transform_cdt`'s results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CdtOutput {
    /// The distances (int32, row-major); -1 where no background element is reached.
    pub distances: Vec<i32>,
    /// Each element's nearest background element as a row-major flat index (its own where
    /// none is reached), when asked for.
    pub features: Option<Vec<i32>>,
}

/// scipy.ndimage.distance_transform_cdt of a row-major `mask` of `shape` (at least one axis)
/// with `structure`, the `3^ndim` row-major elements of the metric as scipy's C code reads
/// them (`true`: a neighbour; only those before the centre are used); `features` asks for the
/// nearest background element of each element.
pub fn cdt(mask: &[u8], shape: &[usize], structure: &[bool], features: bool) -> Result<CdtOutput> {
    let n = check_mask(OP, mask, shape)?;
    let r = shape.len();
    if r == 0 {
        return Err(Error::invalid(OP, "the input has no axis"));
    }
    let size = u32::try_from(r)
        .ok()
        .and_then(|r| 3usize.checked_pow(r))
        .ok_or_else(|| Error::invalid(OP, format!("{r} axes are too many for a 3^ndim structure")))?;
    if structure.len() != size {
        return Err(Error::invalid(
            OP,
            format!(
                "the structure has {} elements, not 3^{r} = {size}",
                structure.len()
            ),
        ));
    }
    if n > i32::MAX as usize {
        return Err(Error::invalid(
            OP,
            format!("{n} elements: scipy's int32 flat indices hold at most 2^31 - 1"),
        ));
    }
    // the neighbours: the structure's elements before its centre, in its order
    let mut strides = vec![1isize; r];
    for a in (0..r.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * shape[a + 1] as isize;
    }
    let mut offsets: Vec<(Vec<isize>, isize)> = Vec::new();
    let mut c = vec![0usize; r];
    for (jj, _) in structure[..size / 2].iter().enumerate().filter(|(_, &b)| b) {
        unravel(jj, &vec![3; r], &mut c);
        let o: Vec<isize> = c.iter().map(|&v| v as isize - 1).collect();
        let flat = o.iter().zip(&strides).map(|(a, b)| a * b).sum();
        offsets.push((o, flat));
    }
    let mut dt: Vec<i32> = mask.iter().map(|&m| if m != 0 { -1 } else { 0 }).collect();
    let mut ft: Vec<i32> = if features {
        (0..n as i32).collect()
    } else {
        Vec::new()
    };
    if n > 0 {
        one_pass(&mut dt, &mut ft, shape, &offsets, false);
        one_pass(&mut dt, &mut ft, shape, &offsets, true);
    }
    Ok(CdtOutput {
        distances: dt,
        features: features.then_some(ft),
    })
}

/// One pass: forward over row-major order with neighbours `p + o`, or (`reversed`) backward
/// with neighbours `p - o`; `ft` is empty when no features are kept. Rows along the last axis
/// are taken one at a time: the neighbours inside the array for the row's other coordinates
/// are picked once per row, and only a row's first and last elements check the last axis.
fn one_pass(
    dt: &mut [i32],
    ft: &mut [i32],
    shape: &[usize],
    offsets: &[(Vec<isize>, isize)],
    reversed: bool,
) {
    let r = shape.len();
    let len = shape[r - 1];
    let rows = dt.len() / len;
    let sign: isize = if reversed { -1 } else { 1 };
    let outer = &shape[..r - 1];
    let mut c = vec![0usize; r - 1];
    // (flat offset, step along the last axis) of the neighbours valid for this row
    let mut valid: Vec<(isize, isize)> = Vec::with_capacity(offsets.len());
    for k in 0..rows {
        let row = if reversed { rows - 1 - k } else { k };
        unravel(row, outer, &mut c);
        valid.clear();
        for (o, flat) in offsets {
            let inside = o[..r - 1].iter().zip(&c).zip(outer).all(|((&ok, &v), &s)| {
                let w = v as isize + sign * ok;
                w >= 0 && (w as usize) < s
            });
            if inside {
                valid.push((sign * flat, sign * o[r - 1]));
            }
        }
        let base = row * len;
        for j in 0..len {
            let i = if reversed { len - 1 - j } else { j };
            let p = base + i;
            let value = dt[p];
            if value == 0 {
                continue;
            }
            let mut min = value;
            let mut best = p;
            for &(flat, step) in &valid {
                if (step < 0 && i == 0) || (step > 0 && i + 1 == len) {
                    continue;
                }
                let q = (p as isize + flat) as usize;
                let tt = dt[q];
                if tt >= 0 && (min < 0 || tt.wrapping_add(1) < min) {
                    min = tt.wrapping_add(1);
                    best = q;
                }
            }
            dt[p] = min;
            if !ft.is_empty() {
                ft[p] = ft[best];
            }
        }
    }
}

/// scipy's `indices` from flat features: for each axis, the coordinate along it of each
/// element's feature (`ndim` planes of `shape`, row-major), as NumPy's `np.indices(shape)`
/// gathered by the flat indices gives them.
pub fn feature_planes(features: &[i32], shape: &[usize]) -> Vec<i32> {
    let r = shape.len();
    let n = features.len();
    let mut planes = vec![0i32; n * r];
    let mut c = vec![0usize; r];
    for (p, &f) in features.iter().enumerate() {
        unravel(f.max(0) as usize, shape, &mut c);
        for (k, &v) in c.iter().enumerate() {
            planes[k * n + p] = v as i32;
        }
    }
    planes
}
