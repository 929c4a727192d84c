//! The bivariate standard normal CDF, `M(x, y; rho) = P(X <= x, Y <= y)` for standard
//! normals with correlation `rho` ([`bivariate_norm_cdf`]): what Stulz's rainbow formulas
//! need.
//!
//! The method is Genz's (A. Genz, "Numerical computation of rectangular bivariate and
//! trivariate normal and t probabilities", Statistics and Computing 14 (2004) 151-160,
//! section 2.4), the algorithm of QuantLib's `BivariateCumulativeNormalDistributionWe04DP`
//! and of Genz's own `BVND`: about 1e-15 absolute over every argument.
//!
//! - `|rho| < 0.925`: Plackett's identity `dM/drho = phi2(x, y; rho)` integrated from 0
//!   to `rho` after the substitution `r = sin(theta)`, by 6-, 12- or 20-point
//!   Gauss-Legendre (the more points the larger `|rho|`), added to `N(x) N(y)`.
//! - `|rho| >= 0.925`: the integrand is nearly singular near `|rho| = 1`, so Genz writes
//!   the probability as the `|rho| = 1` limit, `N(min(x, y))` (or its mirror for negative
//!   `rho`), minus an integral over `s = sqrt(1 - r^2)` whose leading terms (a Taylor
//!   series of the singular factor) are integrated exactly and the rest by Gauss-Legendre.
//!
//! The Gauss-Legendre nodes are computed once (Newton's method on the Legendre
//! polynomials) rather than tabulated, so they carry full f64 precision.

use std::f64::consts::PI;
use std::sync::OnceLock;

use super::norm_cdf;

/// Gauss-Legendre nodes and weights on `[-1, 1]` for `n` points (Newton on `P_n` from
/// Tricomi's initial guesses; converges to a few ulps in a handful of steps).
fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut x = vec![0.0; n];
    let mut w = vec![0.0; n];
    let nf = n as f64;
    for i in 0..n {
        let mut z = (PI * (i as f64 + 0.75) / (nf + 0.5)).cos();
        let mut dp = 1.0;
        for _ in 0..100 {
            // P_n(z) and P_n'(z) by the three-term recurrence
            let (mut p0, mut p1) = (1.0, z);
            for k in 2..=n {
                let kf = k as f64;
                let p2 = ((2.0 * kf - 1.0) * z * p1 - (kf - 1.0) * p0) / kf;
                p0 = p1;
                p1 = p2;
            }
            dp = nf * (z * p1 - p0) / (z * z - 1.0);
            let step = p1 / dp;
            z -= step;
            if step.abs() < 1e-16 {
                break;
            }
        }
        x[i] = z;
        w[i] = 2.0 / ((1.0 - z * z) * dp * dp);
    }
    (x, w)
}

/// The 6-, 12- and 20-point rules Genz's method uses.
fn rules() -> &'static [(Vec<f64>, Vec<f64>); 3] {
    static RULES: OnceLock<[(Vec<f64>, Vec<f64>); 3]> = OnceLock::new();
    RULES.get_or_init(|| [gauss_legendre(6), gauss_legendre(12), gauss_legendre(20)])
}

/// `P(X <= x, Y <= y)` for standard normals `X, Y` with correlation `rho` in `[-1, 1]`
/// (module docs). Infinite arguments are limits (`x = +inf` gives `N(y)`); a NaN
/// argument, or `rho` outside `[-1, 1]`, gives NaN.
pub fn bivariate_norm_cdf(x: f64, y: f64, rho: f64) -> f64 {
    if x.is_nan() || y.is_nan() || !(-1.0..=1.0).contains(&rho) {
        return f64::NAN;
    }
    if x == f64::NEG_INFINITY || y == f64::NEG_INFINITY {
        return 0.0;
    }
    if x == f64::INFINITY {
        return norm_cdf(y);
    }
    if y == f64::INFINITY {
        return norm_cdf(x);
    }
    // Genz works with upper limits: P(X > h, Y > k) = M(-h, -k; rho) = M(x, y; rho)
    let (h, mut k) = (-x, -y);
    let mut hk = h * k;
    let [r6, r12, r20] = rules();
    let (nodes, weights) = if rho.abs() < 0.3 {
        r6
    } else if rho.abs() < 0.75 {
        r12
    } else {
        r20
    };
    if rho.abs() < 0.925 {
        let mut bvn = 0.0;
        if rho != 0.0 {
            // int_0^asin(rho) exp((hk sin t - (h^2 + k^2)/2) / cos^2 t) dt / (2 pi),
            // the nodes mapped from [-1, 1] to [0, asin(rho)]
            let asr = rho.asin();
            let hs = 0.5 * (h * h + k * k);
            for (&t, &w) in nodes.iter().zip(weights) {
                let sn = (asr * (t + 1.0) * 0.5).sin();
                bvn += w * ((sn * hk - hs) / (1.0 - sn * sn)).exp();
            }
            bvn *= asr / (4.0 * PI);
        }
        return bvn + norm_cdf(-h) * norm_cdf(-k);
    }
    if rho < 0.0 {
        k = -k;
        hk = -hk;
    }
    let mut bvn = 0.0;
    if rho.abs() < 1.0 {
        let ass = (1.0 - rho) * (1.0 + rho);
        let mut a = ass.sqrt();
        let bs = (h - k) * (h - k);
        let c = (4.0 - hk) / 8.0;
        let d = (12.0 - hk) / 16.0;
        // the leading terms, integrated exactly
        let asr = -0.5 * (bs / ass + hk);
        if asr > -100.0 {
            bvn =
                a * asr.exp() * (1.0 - c * (bs - ass) * (1.0 - d * bs / 5.0) / 3.0 + c * d * ass * ass / 5.0);
        }
        if -hk < 100.0 {
            let b = bs.sqrt();
            bvn -= (-hk / 2.0).exp()
                * (2.0 * PI).sqrt()
                * norm_cdf(-b / a)
                * b
                * (1.0 - c * bs * (1.0 - d * bs / 5.0) / 3.0);
        }
        // the remainder, by Gauss-Legendre over s in [0, a] (nodes mapped from [-1, 1])
        a /= 2.0;
        for (&t, &w) in nodes.iter().zip(weights) {
            let xs = (a * (1.0 - t)).powi(2);
            let rs = (1.0 - xs).sqrt();
            let e = -0.5 * (bs / xs + hk);
            if e > -100.0 {
                bvn += a
                    * w
                    * e.exp()
                    * ((-hk * (1.0 - rs) / (2.0 * (1.0 + rs))).exp() / rs - (1.0 + c * xs * (1.0 + d * xs)));
            }
        }
        bvn /= -2.0 * PI;
    }
    if rho > 0.0 {
        bvn + norm_cdf(-h.max(k))
    } else {
        let mut m = -bvn;
        if k > h {
            // the difference of two normal CDFs, taken in the tail where it is precise
            m += if h >= 0.0 {
                norm_cdf(-h) - norm_cdf(-k)
            } else {
                norm_cdf(k) - norm_cdf(h)
            };
        }
        m.max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauss_legendre_integrates_polynomials_exactly() {
        for n in [6usize, 12, 20] {
            let (x, w) = gauss_legendre(n);
            // degree 2n - 1 exactly: int_-1^1 t^(2m) dt = 2 / (2m + 1)
            for m in 0..n {
                let got: f64 = x.iter().zip(&w).map(|(t, w)| w * t.powi(2 * m as i32)).sum();
                assert!(
                    (got - 2.0 / (2 * m + 1) as f64).abs() < 1e-14,
                    "n {n} m {m}: {got}"
                );
            }
        }
    }

    #[test]
    fn haug_table() {
        // Haug, "Option Pricing Formulas" (McGraw-Hill, 1998), p. 193, as QuantLib's
        // test-suite/distributions.cpp tabulates it (six decimals)
        let table = [
            (0.0, 0.0, 0.0, 0.250000),
            (0.0, 0.0, -0.5, 0.166667),
            (0.0, 0.0, 0.5, 1.0 / 3.0),
            (0.0, -0.5, 0.0, 0.154269),
            (0.0, -0.5, -0.5, 0.081660),
            (0.0, -0.5, 0.5, 0.226878),
            (0.0, 0.5, 0.0, 0.345731),
            (0.0, 0.5, -0.5, 0.273122),
            (0.0, 0.5, 0.5, 0.418340),
            (-0.5, -0.5, 0.0, 0.095195),
            (-0.5, -0.5, -0.5, 0.036298),
            (-0.5, -0.5, 0.5, 0.163319),
            (-0.5, 0.5, 0.0, 0.213342),
            (-0.5, 0.5, -0.5, 0.145218),
            (-0.5, 0.5, 0.5, 0.272239),
            (0.5, 0.5, 0.0, 0.478120),
            (0.5, 0.5, -0.5, 0.419223),
            (0.5, 0.5, 0.5, 0.546244),
            (0.0, 30.0, -1.0, 0.5),
            (0.0, 30.0, 1.0, 0.5),
            (30.0, 30.0, -1.0, 1.0),
            (30.0, 30.0, 1.0, 1.0),
            (-30.0, 1.0, -1.0, 0.0),
            (-30.0, 1.0, 1.0, 0.0),
        ];
        for (x, y, rho, want) in table {
            let got = bivariate_norm_cdf(x, y, rho);
            assert!(
                (got - want).abs() < 1e-6,
                "M({x}, {y}; {rho}) = {got}, Haug {want}"
            );
            // symmetric in its arguments
            assert!((bivariate_norm_cdf(y, x, rho) - got).abs() < 1e-15);
        }
    }

    #[test]
    fn exact_identities() {
        // M(0, 0; rho) = 1/4 + asin(rho) / (2 pi) (Patel & Read, Handbook of the Normal
        // Distribution, 2nd ed., 1996), through both of Genz's branches
        for rho in [0.0f64, 0.1, 0.29, 0.5, 0.74, 0.9, 0.93, 0.99, 0.99999, 1.0] {
            for r in [rho, -rho] {
                let want = 0.25 + r.asin() / (2.0 * PI);
                let got = bivariate_norm_cdf(0.0, 0.0, r);
                assert!((got - want).abs() < 2e-15, "rho {r}: {got} vs {want}");
            }
        }
        // rho = 0: independent; rho = 1: N(min); rho = -1: max(N(x) + N(y) - 1, 0)
        for (x, y) in [(-1.3, 0.4), (2.0, -0.7), (0.3, 0.3), (-4.0, -5.0)] {
            let (nx, ny) = (norm_cdf(x), norm_cdf(y));
            assert!((bivariate_norm_cdf(x, y, 0.0) - nx * ny).abs() < 1e-16);
            assert!((bivariate_norm_cdf(x, y, 1.0) - nx.min(ny)).abs() < 1e-16);
            assert!((bivariate_norm_cdf(x, y, -1.0) - (nx + ny - 1.0).max(0.0)).abs() < 1e-16);
            // M(x, y; rho) + M(x, -y; -rho) = N(x)
            for rho in [-0.95, -0.6, 0.2, 0.8, 0.97] {
                let s = bivariate_norm_cdf(x, y, rho) + bivariate_norm_cdf(x, -y, -rho);
                assert!((s - nx).abs() < 1e-15, "({x}, {y}, {rho}): {s} vs {nx}");
            }
        }
        assert_eq!(bivariate_norm_cdf(f64::INFINITY, 0.0, 0.3), 0.5);
        assert_eq!(bivariate_norm_cdf(f64::NEG_INFINITY, 0.0, 0.3), 0.0);
        assert!(bivariate_norm_cdf(0.0, 0.0, 1.5).is_nan());
    }
}
