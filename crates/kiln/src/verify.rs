//! Verification helpers: compare a result to a float64 reference.

/// Relative L2 error `||got - want|| / ||want||` (absolute L2 when `want` is all zeros).
/// Any NaN in `got` gives `f64::INFINITY`, so unwritten (poisoned) outputs always fail.
pub fn rel_l2(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "rel_l2: length mismatch");
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        if !g.is_finite() && g as f64 != w {
            return f64::INFINITY;
        }
        let d = g as f64 - w;
        num += d * d;
        den += w * w;
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// The largest element-wise relative error `|got - want| / max(|want|, tiny)`.
pub fn max_rel(got: &[f32], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g.is_nan() {
                f64::INFINITY
            } else {
                (g as f64 - w).abs() / w.abs().max(1e-30)
            }
        })
        .fold(0.0, f64::max)
}

/// The largest element-wise relative error between two f32 results (e.g. GPU vs CPU).
pub fn max_rel_f32(got: &[f32], want: &[f32]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g.is_nan() || w.is_nan() {
                f64::INFINITY
            } else {
                (g as f64 - w as f64).abs() / (w.abs() as f64).max(1e-30)
            }
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_always_fails() {
        assert_eq!(rel_l2(&[1.0, f32::NAN], &[1.0, 2.0]), f64::INFINITY);
        assert_eq!(max_rel(&[f32::NAN], &[1.0]), f64::INFINITY);
        assert_eq!(max_rel_f32(&[1.0], &[f32::NAN]), f64::INFINITY);
        assert!(rel_l2(&[1.0, 2.0], &[1.0, 2.0]) == 0.0);
        assert!((rel_l2(&[1.0, 2.0], &[1.0, 2.5]) - 0.5 / (1.0f64 + 6.25).sqrt()).abs() < 1e-12);
    }
}
