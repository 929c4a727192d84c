//! American (Bermudan) rainbow options by Longstaff-Schwartz: a call or put on the largest
//! or smallest of `n` correlated assets ([`AmericanRainbowSpec`]: a max-call, a min-put,
//! ...), exercisable at `t = 0` and at `exercise_dates` equally spaced dates. This module is
//! the contract ([`RainbowPlan`]: the paths, the basis, the finish); the CPU engine
//! (kiln-cpu's `finance::american_rainbow`) implements it, one rayon task a canonical block
//! of 1,024 paths; the CUDA engine refuses these options.
//!
//! # Paths
//!
//! The European basket's recurrence and Philox stream ([`crate::finance::basket::mc`]),
//! one step a date: path `p` of option `o` at date `d` (0-based, the date `(d + 1) T / D`)
//! draws its `n` normals from `basket_words(key, o, p, d G + g)`, `g = 0 .. G`,
//! `G = ceil(n / 4)` (date 0's normals are the European basket's), and in f32
//!
//! ```text
//! u_i = sum_{j <= i} L_ij z_j          (product rounded, then the sum: no fusion)
//! x_i = x_i + vol_i.mul_add(u_i, drift_i)    vol_i = sigma_i sqrt(dt), drift_i = (r - q_i - sigma_i^2 / 2) dt
//! X_i = (w_i S_i) * (exp_f32(x_i) as f64)    (f64)
//! ```
//!
//! with `L` the Cholesky factor of the correlation matrix rounded to f32. The underlying is
//! `U = max_i X_i` or `min_i X_i` and the payoff `max(U - K, 0)` (call) or `max(K - U, 0)`
//! (put), exactly `+0.0` out of the money.
//!
//! # Regression basis
//!
//! With `y_i = X_i / K` sorted so that `y_(1)` is the extreme the payoff reads (descending
//! for max, ascending for min):
//!
//! ```text
//! 1,  y_(1) .. y_(n),  y_(1)^2 .. y_(n)^2,  y_(1) y_(2) (n >= 2),  y_(1)^3
//! ```
//!
//! `2n + 3` functions (`4` for one asset): polynomials in the sorted prices (order
//! statistics, the common choice for max options, e.g. Broadie and Cao 2008), with the cube
//! of the extreme for the curvature of the continuation value along it. The intrinsic value is in
//! their span on the paths regressed (in the money: `h / K = y_(1) - 1` or `1 - y_(1)`), so
//! it is not a separate column. Sorting makes the fit symmetric in the assets.
//!
//! # Backward induction
//!
//! As [`super::lsm`]: `V_p` the payoff at the last date; for each earlier date, `V_p *=
//! exp(-r dt)`, the in-the-money paths' normal equations `sum phi phi^T`, `sum phi V` are
//! summed per canonical block in path order and the blocks added in block order (so the
//! bits do not depend on the thread count), solved by [`super::solve_dense`] (fewer in-the-money
//! paths than functions or a singular system: no exercise at that date), and `V_p = h_p`
//! where `h_p > 0` and `h_p > phi_p . beta`. The price is the mean of `V_p exp(-r dt)`, or
//! the exercise value now if larger ([`finish_estimate`]). The in-sample estimator: low
//! biased by the fitted rule's suboptimality, as [`super::lsm`] says.

use super::lsm::{check_lsm_run, finish_estimate};
use super::MAX_EXERCISE_DATES;
use crate::error::{Error, Result};
use crate::finance::basket::{basket_words, cholesky_named, validate_assets, BasketAsset};
use crate::finance::rainbow::Extreme;
use crate::finance::{McParams, OptionType, PriceResult};
use crate::philox::{self, exp_f32, normals_from_words_f32};

const OP: &str = "american rainbow";

/// Most assets of an American rainbow (the basis grows as `2n + 3`; the normal equations
/// as its square).
pub const MAX_RAINBOW_ASSETS: usize = 16;

/// A Bermudan call or put on the largest or smallest of `n` weighted assets, each a
/// geometric Brownian motion with its dividend yield, correlated by `correlation`.
/// Serializable as the job service stores books.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AmericanRainbowSpec {
    /// Call or put.
    pub kind: OptionType,
    /// On the largest (`Max`) or smallest (`Min`) of `w_i S_i`.
    pub extreme: Extreme,
    /// Strike, finite and `> 0`.
    pub strike: f64,
    /// Risk-free rate, continuously compounded per year, finite.
    pub rate: f64,
    /// Time to maturity in years, finite and `> 0`.
    pub maturity: f64,
    /// Equally spaced exercise dates `t_i = i T / D`, `i = 1..=D`, in
    /// `1..=`[`MAX_EXERCISE_DATES`]; exercise at `t = 0` is also allowed.
    pub exercise_dates: u32,
    /// The assets (spot, volatility, dividend yield, weight `> 0`), `1..=`[`MAX_RAINBOW_ASSETS`].
    pub assets: Vec<BasketAsset>,
    /// The `n x n` correlation matrix, row-major, positive semi-definite.
    pub correlation: Vec<f64>,
}

impl AmericanRainbowSpec {
    /// Checks every field and the correlation matrix; the error names the field (and the
    /// asset) and what is accepted. Returns the Cholesky factor.
    pub fn validate(&self) -> Result<Vec<f64>> {
        let bad = |reason: String| Err(Error::invalid(OP, reason));
        for (name, v) in [
            ("strike", self.strike),
            ("rate", self.rate),
            ("maturity", self.maturity),
        ] {
            if !v.is_finite() {
                return bad(format!("{name} is {v}; it must be a finite number"));
            }
        }
        if self.strike <= 0.0 {
            return bad(format!("strike = {}; it must be > 0", self.strike));
        }
        if self.maturity <= 0.0 {
            return bad(format!("maturity = {}; it must be > 0 (in years)", self.maturity));
        }
        if self.exercise_dates == 0 || self.exercise_dates > MAX_EXERCISE_DATES {
            return bad(format!(
                "exercise_dates = {}; it must be in 1..={MAX_EXERCISE_DATES} (equally spaced, the last at maturity)",
                self.exercise_dates
            ));
        }
        let n = self.assets.len();
        if n == 0 || n > MAX_RAINBOW_ASSETS {
            return bad(format!(
                "{n} assets; an American rainbow holds 1 to {MAX_RAINBOW_ASSETS} (the regression basis grows with them)"
            ));
        }
        validate_assets(&self.assets, &self.correlation)?;
        if let Some(i) = self.assets.iter().position(|a| a.weight <= 0.0) {
            let who = match &self.assets[i].name {
                Some(s) => format!("asset `{s}`"),
                None => format!("asset {}", i + 1),
            };
            return bad(format!(
                "{who}: weight = {}; a rainbow needs every weight > 0",
                self.assets[i].weight
            ));
        }
        cholesky_named(&self.correlation, n, &self.assets)
    }

    /// The payoff of exercise when the weighted prices are `x`: on their max or min.
    #[inline(always)]
    pub fn payoff(&self, x: &[f64]) -> f64 {
        let u = match self.extreme {
            Extreme::Max => x.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            Extreme::Min => x.iter().copied().fold(f64::INFINITY, f64::min),
        };
        let h = match self.kind {
            OptionType::Call => u - self.strike,
            OptionType::Put => self.strike - u,
        };
        if h > 0.0 {
            h
        } else {
            0.0
        }
    }

    /// The exercise value now.
    pub fn payoff_now(&self) -> f64 {
        let x: Vec<f64> = self.assets.iter().map(|a| a.weight * a.spot).collect();
        self.payoff(&x)
    }
}

/// The regression functions of `n` assets (module docs).
pub fn rainbow_basis_len(n: usize) -> usize {
    2 * n + 2 + usize::from(n >= 2)
}

/// Writes the basis at the weighted prices `x` into `phi` (`rainbow_basis_len(x.len())`
/// values); `sorted` is scratch of `x.len()`.
pub fn rainbow_basis(spec: &AmericanRainbowSpec, x: &[f64], sorted: &mut [f64], phi: &mut [f64]) {
    let n = x.len();
    let k = spec.strike;
    for (s, v) in sorted.iter_mut().zip(x) {
        *s = v / k;
    }
    match spec.extreme {
        Extreme::Max => sorted.sort_unstable_by(|a, b| b.total_cmp(a)),
        Extreme::Min => sorted.sort_unstable_by(|a, b| a.total_cmp(b)),
    }
    phi[0] = 1.0;
    for i in 0..n {
        phi[1 + i] = sorted[i];
        phi[1 + n + i] = sorted[i] * sorted[i];
    }
    let mut j = 1 + 2 * n;
    if n >= 2 {
        phi[j] = sorted[0] * sorted[1];
        j += 1;
    }
    phi[j] = sorted[0] * sorted[0] * sorted[0];
}

/// One run's constants, derived in f64 on the host and rounded once to f32 where the path
/// is f32 (module docs), for an engine to run.
#[derive(Clone, Debug, PartialEq)]
pub struct RainbowPlan {
    /// Its Philox option word (stream index).
    pub option: u32,
    /// Paths simulated.
    pub paths: usize,
    /// Assets `n`.
    pub n: usize,
    /// Exercise dates, the time steps of a path.
    pub dates: usize,
    /// Philox calls a date, `ceil(n / 4)`.
    pub groups: u32,
    /// `((r - q_i - sigma_i^2 / 2) dt) as f32`.
    pub drift: Vec<f32>,
    /// `(sigma_i sqrt(dt)) as f32`.
    pub vol: Vec<f32>,
    /// The Cholesky factor in f32, lower triangle packed by rows (`L_ij` at `i (i + 1) / 2 + j`).
    pub chol: Vec<f32>,
    /// `w_i S_i` (f64).
    pub spot_weight: Vec<f64>,
    /// `exp(-r dt)`.
    pub df_step: f64,
    /// The Philox key of the seed.
    pub key: [u32; 2],
    /// Regression functions, [`rainbow_basis_len`]`(n)`.
    pub basis: usize,
}

impl RainbowPlan {
    /// Validates the option and the run (as [`check_lsm_run`], the path matrix `paths x
    /// dates x n` f32) and derives the constants. `mc.steps` is not used.
    pub fn new(spec: &AmericanRainbowSpec, mc: &McParams, option: u32) -> Result<Self> {
        let l = spec.validate()?;
        let n = spec.assets.len();
        check_lsm_run(
            mc,
            u64::from(spec.exercise_dates) * n as u64,
            "exercise_dates x assets",
        )?;
        let paths =
            usize::try_from(mc.paths).map_err(|_| Error::invalid(OP, "too many paths for this machine"))?;
        let dt = spec.maturity / f64::from(spec.exercise_dates);
        let mut chol = Vec::with_capacity(n * (n + 1) / 2);
        for i in 0..n {
            for j in 0..=i {
                chol.push(l[i * n + j] as f32);
            }
        }
        Ok(RainbowPlan {
            option,
            paths,
            n,
            dates: spec.exercise_dates as usize,
            groups: n.div_ceil(4) as u32,
            drift: spec
                .assets
                .iter()
                .map(|a| ((spec.rate - a.dividend - 0.5 * a.volatility * a.volatility) * dt) as f32)
                .collect(),
            vol: spec
                .assets
                .iter()
                .map(|a| (a.volatility * dt.sqrt()) as f32)
                .collect(),
            chol,
            spot_weight: spec.assets.iter().map(|a| a.weight * a.spot).collect(),
            df_step: (-spec.rate * dt).exp(),
            key: philox::key_from_seed(mc.seed),
            basis: rainbow_basis_len(n),
        })
    }

    /// The `n` normals of path `p` at date `d` into `z` (`4 * groups` long; the first `n`
    /// are used): `basket_words(key, option, p, d G + g)`, `g = 0 .. G`.
    #[inline(always)]
    pub fn normals(&self, p: u32, d: u32, z: &mut [f32]) {
        for g in 0..self.groups {
            let w = basket_words(self.key, self.option, p, d * self.groups + g);
            z[4 * g as usize..4 * g as usize + 4].copy_from_slice(&normals_from_words_f32(w));
        }
    }

    /// One date's step of the log prices `lx` from the normals `z`; writes `exp_f32(lx_i)`
    /// into `e` (module docs: `u = L z` product then sum, `lx_i += vol_i.mul_add(u_i, drift_i)`).
    #[inline(always)]
    pub fn step(&self, z: &[f32], lx: &mut [f32], e: &mut [f32]) {
        let mut row = 0usize;
        for a in 0..self.n {
            let mut u = 0.0f32;
            for (l, zj) in self.chol[row..=row + a].iter().zip(z) {
                u += l * zj;
            }
            row += a + 1;
            lx[a] += self.vol[a].mul_add(u, self.drift[a]);
            e[a] = exp_f32(lx[a]);
        }
    }

    /// The price from the totals of the discounted cash flows: [`finish_estimate`] with the
    /// exercise value now.
    pub fn finish(&self, spec: &AmericanRainbowSpec, sum_y: f64, sum_yy: f64) -> PriceResult {
        finish_estimate(self.paths as u64, spec.payoff_now(), sum_y, sum_yy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn max_call(n: usize, s0: f64) -> AmericanRainbowSpec {
        let mut corr = vec![0.0; n * n];
        for i in 0..n {
            corr[i * n + i] = 1.0;
        }
        AmericanRainbowSpec {
            kind: OptionType::Call,
            extreme: Extreme::Max,
            strike: 100.0,
            rate: 0.05,
            maturity: 3.0,
            exercise_dates: 9,
            assets: (0..n).map(|_| BasketAsset::new(s0, 0.2, 0.1, 1.0)).collect(),
            correlation: corr,
        }
    }

    #[test]
    fn basis_is_sorted_polynomials_with_the_extreme_first() {
        let spec = max_call(3, 100.0);
        let mut phi = vec![0.0; rainbow_basis_len(3)];
        let mut sorted = vec![0.0; 3];
        rainbow_basis(&spec, &[90.0, 120.0, 100.0], &mut sorted, &mut phi);
        let want = [1.0, 1.2, 1.0, 0.9, 1.44, 1.0, 0.81, 1.2, 1.2 * 1.2 * 1.2];
        for (g, w) in phi.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{phi:?}");
        }
        let min = AmericanRainbowSpec {
            extreme: Extreme::Min,
            kind: OptionType::Put,
            ..spec
        };
        rainbow_basis(&min, &[90.0, 120.0, 100.0], &mut sorted, &mut phi);
        assert!(
            (phi[1] - 0.9).abs() < 1e-12 && (phi[7] - 0.9).abs() < 1e-12,
            "{phi:?}"
        );
        assert_eq!(rainbow_basis_len(1), 4);
        assert_eq!(rainbow_basis_len(5), 13);
    }

    #[test]
    fn plan_rounds_the_constants_once_and_checks_the_run() {
        let spec = max_call(2, 100.0);
        let mc = McParams {
            paths: 5000,
            seed: 3,
            ..McParams::default()
        };
        let p = RainbowPlan::new(&spec, &mc, 4).unwrap();
        assert_eq!((p.n, p.dates, p.groups, p.basis, p.option), (2, 9, 1, 7, 4));
        assert_eq!(p.vol[0], (0.2 * (3.0f64 / 9.0).sqrt()) as f32);
        assert_eq!(p.chol, vec![1.0, 0.0, 1.0]);
        assert_eq!(p.spot_weight, vec![100.0, 100.0]);
        let e = RainbowPlan::new(&spec, &McParams { paths: 1, ..mc }, 0).unwrap_err();
        assert!(e.to_string().contains("paths"), "{e}");
        let e = RainbowPlan::new(&AmericanRainbowSpec { strike: -1.0, ..spec }, &mc, 0).unwrap_err();
        assert!(e.to_string().contains("strike"), "{e}");
    }
}
