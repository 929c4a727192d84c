//! Distance transforms with scipy.ndimage's results to the bit, indices and ties included:
//! `distance_transform_edt` ([`edt`]), `distance_transform_cdt` ([`cdt`]) and
//! `distance_transform_bf` ([`bf`]). The input is a row-major mask (a non-zero byte is
//! foreground); each transform gives every foreground element its distance to the nearest
//! background element and (on request) where that element is.
//!
//! Design: each is a port of scipy's C routine (`scipy/ndimage/src/ni_morphology.c`) that keeps
//! its scan order, its tie rules and its floating-point arithmetic in the same order, so the
//! indices agree where several background elements are equally near:
//! - [`edt`]: `NI_EuclideanFeatureTransform`, the separable Voronoi feature transform of Maurer,
//!   Qi and Raghavan, one pass per axis from axis 0 to the last; scipy's distance
//!   (`sqrt(sum((sampling * (index - grid))**2))`, which it computes in NumPy) is computed in the
//!   last pass in NumPy's order. The lines of a pass are independent, so they run in parallel
//!   (rayon) with a result that does not depend on the thread count;
//! - [`cdt`]: `NI_DistanceTransformOnePass` twice (forward, then over the reversed array) with
//!   the first half of a `3^ndim` structure, as scipy's Python layer runs it;
//! - [`bf`]: `NI_DistanceTransformBruteForce`, every foreground element against every
//!   background element that touches the foreground (in scipy's list order: the last first).

mod bf;
mod cdt;
mod edt;

pub use bf::{bf, BfDistances, BfMetric, BfOutput};
pub use cdt::{cdt, feature_planes, CdtOutput};
pub use edt::{
    edt, pass_flags as edt_pass_flags, sampling_per_axis as edt_sampling, EdtOutput, EdtPassFlags,
};

use crate::error::{Error, Result};

/// The element count of `shape`, or an error naming `op` when it overflows or does not fit
/// the int32 indices scipy writes.
fn element_count(op: &str, shape: &[usize]) -> Result<usize> {
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Error::invalid(op, format!("the shape {shape:?} is too large")))?;
    // scipy stores coordinates and flat indices as int32
    if shape.iter().any(|&d| d > i32::MAX as usize) {
        return Err(Error::invalid(
            op,
            format!("an axis of {shape:?} is longer than int32 indices hold"),
        ));
    }
    Ok(n)
}

/// `mask.len()` must be the element count of `shape`.
fn check_mask(op: &str, mask: &[u8], shape: &[usize]) -> Result<usize> {
    let n = element_count(op, shape)?;
    if mask.len() != n {
        return Err(Error::invalid(
            op,
            format!(
                "the mask has {} elements for a shape of {shape:?} ({n})",
                mask.len()
            ),
        ));
    }
    Ok(n)
}

/// The row-major coordinates of flat index `i` of `shape`.
fn unravel(mut i: usize, shape: &[usize], out: &mut [usize]) {
    for (c, &d) in out.iter_mut().zip(shape).rev() {
        *c = i % d;
        i /= d;
    }
}

#[cfg(test)]
#[path = "distance/tests.rs"]
mod tests;
