//! Output checks run before anything is timed: element-wise closeness against a reference,
//! and an independent f64 correlation at sampled points for the CPU device (where the CPU
//! backend is itself the reference, so it is checked against a plain loop instead).

use kiln::core::backend::Element;
use kiln::core::imaging::BoundaryMode;

/// The verdict of a check: passed, and the worst error over its tolerance (<= 1 passes).
#[derive(Clone, Copy, Debug)]
pub struct Verdict {
    /// Whether every element was within tolerance (and none was NaN where the reference
    /// was not).
    pub ok: bool,
    /// max |got - want| / tol.
    pub worst: f64,
}

/// Compare `got[i]` with `want(i)` within `rel·|want| + abs`.
pub fn close<T: Element>(got: &[T], want: impl Fn(usize) -> f64, rel: f64, abs: f64) -> Verdict {
    let mut worst = 0.0f64;
    for (i, g) in got.iter().enumerate() {
        let (g, w) = (g.to_f32() as f64, want(i));
        let tol = rel * w.abs() + abs;
        let e = if g.is_nan() != w.is_nan() {
            f64::INFINITY
        } else if g.is_nan() {
            0.0
        } else {
            (g - w).abs() / tol
        };
        worst = worst.max(e);
    }
    Verdict {
        ok: worst <= 1.0,
        worst,
    }
}

/// `|got - want| <= tol` everywhere (absolute), NaN in `got` fails.
pub fn close_abs(got: &[f32], want: &[f32], tol: f64) -> Verdict {
    let worst = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g.is_nan() {
                f64::INFINITY
            } else {
                (g as f64 - w as f64).abs() / tol
            }
        })
        .fold(0.0, f64::max);
    Verdict {
        ok: got.len() == want.len() && worst <= 1.0,
        worst,
    }
}

/// Map an out-of-range index under a boundary mode (scipy.ndimage semantics); `None`
/// means the constant value.
fn map_index(i: i64, n: i64, mode: BoundaryMode) -> Option<i64> {
    if (0..n).contains(&i) {
        return Some(i);
    }
    if n == 1 {
        return match mode {
            BoundaryMode::Constant(_) => None,
            _ => Some(0),
        };
    }
    match mode {
        BoundaryMode::Constant(_) => None,
        BoundaryMode::Nearest => Some(i.clamp(0, n - 1)),
        BoundaryMode::Reflect => {
            let m = i.rem_euclid(2 * n);
            Some(if m < n { m } else { 2 * n - 1 - m })
        }
        BoundaryMode::Mirror => {
            let m = i.rem_euclid(2 * n - 2);
            Some(if m < n { m } else { 2 * n - 2 - m })
        }
        BoundaryMode::Wrap => Some(i.rem_euclid(n)),
    }
}

fn cval(mode: BoundaryMode) -> f64 {
    match mode {
        BoundaryMode::Constant(c) => c,
        _ => 0.0,
    }
}

/// Sample points of a `dims` array: the corners, the edges' middles, and a deterministic
/// spread inside (so boundary handling and the interior are both covered).
pub fn sample_points(dims: &[usize], count: usize) -> Vec<Vec<usize>> {
    let mut pts = Vec::new();
    let corners = 1usize << dims.len();
    for c in 0..corners {
        pts.push(
            dims.iter()
                .enumerate()
                .map(|(a, &n)| if c >> a & 1 == 1 { n - 1 } else { 0 })
                .collect(),
        );
    }
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..count {
        pts.push(
            dims.iter()
                .map(|&n| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    (s % n as u64) as usize
                })
                .collect(),
        );
    }
    pts
}

/// The correlation of a row-major array `x` of shape `dims` (2 or 3 axes) with a cubic
/// kernel of side `k` at point `p`, summed in f64.
pub fn correlate_at(
    x: &[f32],
    dims: &[usize],
    weights: &[f64],
    k: usize,
    mode: BoundaryMode,
    p: &[usize],
) -> f64 {
    let r = (k / 2) as i64;
    let nd = dims.len();
    let taps = k.pow(nd as u32);
    let mut acc = 0.0;
    'taps: for (t, &wt) in weights.iter().enumerate().take(taps) {
        let mut idx = 0usize;
        let mut rest = t;
        let mut off = Vec::with_capacity(nd);
        for _ in 0..nd {
            off.push((rest % k) as i64 - r);
            rest /= k;
        }
        off.reverse(); // off[0] is the slowest axis, as the weights are laid out
        for a in 0..nd {
            match map_index(p[a] as i64 + off[a], dims[a] as i64, mode) {
                Some(i) => idx = idx * dims[a] + i as usize,
                None => {
                    acc += wt * cval(mode);
                    continue 'taps;
                }
            }
        }
        acc += wt * x[idx] as f64;
    }
    acc
}

/// Check `got` (the filter of `x`) at sampled points against [`correlate_at`] within `tol`.
pub fn filter_samples(
    x: &[f32],
    got: &[f32],
    dims: &[usize],
    weights: &[f64],
    k: usize,
    mode: BoundaryMode,
    tol: f64,
) -> Verdict {
    let mut worst = 0.0f64;
    for p in sample_points(dims, 512) {
        let flat = p.iter().zip(dims).fold(0usize, |a, (&i, &n)| a * n + i);
        let want = correlate_at(x, dims, weights, k, mode, &p);
        let g = got[flat] as f64;
        let e = if g.is_nan() {
            f64::INFINITY
        } else {
            (g - want).abs() / tol
        };
        worst = worst.max(e);
    }
    Verdict {
        ok: worst <= 1.0,
        worst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect_and_mirror_follow_scipy() {
        // scipy reflect: d c b a | a b c d | d c b a ; mirror: d c b | a b c d | c b a
        let n = 4;
        let r: Vec<i64> = (-3..7)
            .map(|i| map_index(i, n, BoundaryMode::Reflect).unwrap())
            .collect();
        assert_eq!(r, vec![2, 1, 0, 0, 1, 2, 3, 3, 2, 1]);
        let m: Vec<i64> = (-3..7)
            .map(|i| map_index(i, n, BoundaryMode::Mirror).unwrap())
            .collect();
        assert_eq!(m, vec![3, 2, 1, 0, 1, 2, 3, 2, 1, 0]);
        assert_eq!(map_index(-1, n, BoundaryMode::Constant(0.0)), None);
        assert_eq!(map_index(5, n, BoundaryMode::Wrap), Some(1));
    }

    #[test]
    fn correlate_at_matches_a_hand_sum() {
        // 3x3 image 1..9, cross kernel (0 1 0 / 1 0 1 / 0 1 0), reflect, at the corner (0, 0):
        // up = x[0,0] (reflected) = 1, down = x[1,0] = 4, left = x[0,0] = 1, right = x[0,1] = 2
        let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let w = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0];
        let v = correlate_at(&x, &[3, 3], &w, 3, BoundaryMode::Reflect, &[0, 0]);
        assert_eq!(v, 1.0 + 4.0 + 1.0 + 2.0);
        // constant 10 at the corner: up and left are 10
        let v = correlate_at(&x, &[3, 3], &w, 3, BoundaryMode::Constant(10.0), &[0, 0]);
        assert_eq!(v, 10.0 + 4.0 + 10.0 + 2.0);
        // not symmetric: weight (0, 1) multiplies x[y-1, x] (correlation, not convolution)
        let w = [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let v = correlate_at(&x, &[3, 3], &w, 3, BoundaryMode::Constant(0.0), &[2, 1]);
        assert_eq!(v, 5.0);
    }

    #[test]
    fn close_catches_nan_and_error() {
        let got = [1.0f32, 2.0, f32::NAN];
        assert!(!close(&got, |i| [1.0, 2.0, 3.0][i], 1e-6, 0.0).ok);
        assert!(close(&got[..2], |i| [1.0, 2.0][i], 1e-6, 0.0).ok);
        assert!(!close(&got[..2], |i| [1.0, 2.1][i], 1e-6, 0.0).ok);
        assert!(!close_abs(&[1.0, f32::NAN], &[1.0, 1.0], 1.0).ok);
    }
}
