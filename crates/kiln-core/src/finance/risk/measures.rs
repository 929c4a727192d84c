//! Value at risk and expected shortfall of a P&L vector, in one convention that a NumPy
//! one-liner reproduces bit for bit:
//!
//! - the loss of scenario `j` is `L_j = -PnL_j` (a gain is a negative loss);
//! - `VaR_a` is the `a`-quantile of the losses with NumPy's default ('linear', Hyndman and
//!   Fan's type 7) interpolation: with the losses sorted ascending `x_0 <= .. <= x_(n-1)`,
//!   `h = (n - 1) a`, `i = floor(h)`, `g = h - i`, `VaR_a = x_i + g (x_(i+1) - x_i)`
//!   (evaluated as NumPy's `_lerp` does: `x_(i+1) - (x_(i+1) - x_i)(1 - g)` when `g >= 0.5`);
//!   `np.quantile(L, a)`;
//! - `ES_a` is the mean of the losses at or beyond `VaR_a`, `mean{L_j : L_j >= VaR_a}`
//!   (never empty: the largest loss is at least `VaR_a`), summed in the scenarios' order
//!   with NumPy's pairwise summation ([`pairwise_sum`]) and divided by their count;
//!   `L[L >= np.quantile(L, a)].mean()`.
//!
//! Both are losses: a positive VaR is money lost.

use crate::error::{Error, Result};

/// One level's measures.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LossMeasure {
    /// The confidence level `a`, in `(0, 1)` (0.99 for 99%).
    pub level: f64,
    /// `VaR_a` (module docs), a loss.
    pub var: f64,
    /// `ES_a` (module docs), a loss, `>= var`.
    pub es: f64,
    /// Scenarios whose loss is at or beyond `VaR_a` (those `ES_a` averages).
    pub tail: usize,
}

/// NumPy's sum of `a` (`np.add.reduce` on a contiguous float64 array): blocks of fewer than
/// 8 summed in order from 0; up to 128 in eight interleaved partial sums combined as
/// `((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))`, then the remainder in order; longer
/// arrays split at half (rounded down to a multiple of 8) and the halves' sums added.
pub fn pairwise_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut r = 0.0;
        for &x in a {
            r += x;
        }
        r
    } else if n <= 128 {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i < n - n % 8 {
            for (j, rj) in r.iter_mut().enumerate() {
                *rj += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            res += a[i];
            i += 1;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise_sum(&a[..n2]) + pairwise_sum(&a[n2..])
    }
}

/// The `level`-quantile of `sorted` (ascending, non-empty) with NumPy's 'linear' rule.
pub fn quantile_linear(sorted: &[f64], level: f64) -> f64 {
    let n = sorted.len();
    let h = (n - 1) as f64 * level;
    let lo = (h.floor() as usize).min(n - 1);
    let hi = (lo + 1).min(n - 1);
    let g = h - lo as f64;
    let (a, b) = (sorted[lo], sorted[hi]);
    let diff = b - a;
    if g >= 0.5 {
        b - diff * (1.0 - g)
    } else {
        a + diff * g
    }
}

/// `ES` at threshold `var`: the pairwise-summed mean of the losses `>= var`, in order, and
/// their count.
pub fn expected_shortfall(losses: &[f64], var: f64) -> (f64, usize) {
    let tail: Vec<f64> = losses.iter().copied().filter(|&l| l >= var).collect();
    (pairwise_sum(&tail) / tail.len() as f64, tail.len())
}

/// VaR and ES of the P&L vector `pnl` at each level (module docs). An empty vector, a
/// non-finite P&L or a level outside `(0, 1)` is an error naming it.
pub fn loss_measures(pnl: &[f64], levels: &[f64]) -> Result<Vec<LossMeasure>> {
    const OP: &str = "risk";
    if pnl.is_empty() {
        return Err(Error::invalid(OP, "no scenarios: VaR needs at least one P&L"));
    }
    if let Some((j, v)) = pnl.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(Error::invalid(
            OP,
            format!("P&L of scenario {j} is {v}, not a finite number"),
        ));
    }
    for &a in levels {
        if !(a > 0.0 && a < 1.0) {
            return Err(Error::invalid(
                OP,
                format!("level {a}; a VaR level must be in (0, 1), e.g. 0.99 for 99%"),
            ));
        }
    }
    let losses: Vec<f64> = pnl.iter().map(|p| -p).collect();
    let mut sorted = losses.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(levels
        .iter()
        .map(|&level| {
            let var = quantile_linear(&sorted, level);
            let (es, tail) = expected_shortfall(&losses, var);
            LossMeasure { level, var, es, tail }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_and_shortfall_by_hand() {
        // losses 1..=5 (pnl -1..=-5), shuffled
        let pnl = [-3.0, -1.0, -5.0, -2.0, -4.0];
        let m = loss_measures(&pnl, &[0.5, 0.9, 0.6]).unwrap();
        // h = 4 * 0.5 = 2 -> x_2 = 3; tail {3,4,5}
        assert_eq!((m[0].var, m[0].es, m[0].tail), (3.0, 4.0, 3));
        // h = 3.6 -> 4 + 0.6 = 4.6; tail {5}
        assert!((m[1].var - 4.6).abs() < 1e-12 && m[1].es == 5.0 && m[1].tail == 1);
        // h = 2.4 -> 3.4; tail {4, 5}
        assert!((m[2].var - 3.4).abs() < 1e-12 && m[2].es == 4.5);
        assert!(loss_measures(&pnl, &[1.0]).is_err());
        assert!(loss_measures(&[], &[0.9]).is_err());
        assert!(loss_measures(&[f64::NAN], &[0.9]).is_err());
        assert_eq!(loss_measures(&[2.5], &[0.99]).unwrap()[0].var, -2.5);
    }

    #[test]
    fn pairwise_sum_equals_a_long_sum_closely_and_small_ones_exactly() {
        let a: Vec<f64> = (0..1001)
            .map(|i| ((i * 7919) % 1013) as f64 * 0.37 - 150.0)
            .collect();
        let plain: f64 = a.iter().sum();
        assert!((pairwise_sum(&a) - plain).abs() < 1e-9);
        assert_eq!(pairwise_sum(&a[..5]), a[..5].iter().sum::<f64>());
    }
}
