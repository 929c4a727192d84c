//! American (Bermudan) rainbow options by Longstaff-Schwartz on the CPU: a call or put on
//! the largest or smallest of `n` correlated assets ([`AmericanRainbowSpec`]: a max-call,
//! a min-put, ...), exercisable at `t = 0` and at `exercise_dates` equally spaced dates.
//! The CUDA engine does not price these options; this engine runs on the host (rayon, one
//! task a canonical block of [`BLOCK_SAMPLES`] paths) whatever the runtime's device.
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
//! bits do not depend on the thread count), solved by [`solve_dense`] (fewer in-the-money
//! paths than functions or a singular system: no exercise at that date), and `V_p = h_p`
//! where `h_p > 0` and `h_p > phi_p . beta`. The price is the mean of `V_p exp(-r dt)`, or
//! the exercise value now if larger ([`finish_estimate`]). The in-sample estimator: low
//! biased by the fitted rule's suboptimality, as [`super::lsm`] says.

use rayon::prelude::*;

use super::lsm::{check_lsm_run, finish_estimate, solve_dense};
use super::MAX_EXERCISE_DATES;
use crate::error::{Error, Result};
use crate::finance::basket::{basket_words, cholesky_named, validate_assets, BasketAsset};
use crate::finance::rainbow::Extreme;
use crate::finance::{McParams, OptionType, PriceResult, BLOCK_SAMPLES};
use crate::philox::{self, exp_f32, normals_from_words_f32};

const OP: &str = "american rainbow";
const B: usize = BLOCK_SAMPLES as usize;

/// Most assets of an American rainbow (the basis grows as `2n + 3`; the normal equations
/// as its square).
pub const MAX_RAINBOW_ASSETS: usize = 16;

/// A Bermudan call or put on the largest or smallest of `n` weighted assets, each a
/// geometric Brownian motion with its dividend yield, correlated by `correlation`.
#[derive(Clone, Debug, PartialEq)]
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
/// is f32.
struct Plan<'a> {
    spec: &'a AmericanRainbowSpec,
    option: u32,
    paths: usize,
    n: usize,
    dates: usize,
    groups: u32,
    drift: Vec<f32>,
    vol: Vec<f32>,
    chol: Vec<f32>,
    spot_weight: Vec<f64>,
    df_step: f64,
    key: [u32; 2],
    basis: usize,
}

impl Plan<'_> {
    /// The weighted prices of path slot `i` of a block slab at date `d`.
    #[inline(always)]
    fn prices(&self, slab: &[f32], d: usize, i: usize, x: &mut [f64]) {
        for (a, xa) in x.iter_mut().enumerate() {
            *xa = self.spot_weight[a] * f64::from(slab[(d * self.n + a) * B + i]);
        }
    }
}

/// Simulates block `b` into its slab (`dates x n x 1024` f32) and sets `V` to the payoff at
/// the last date.
fn simulate_block(plan: &Plan, b: usize, slab: &mut [f32], v: &mut [f64]) {
    let n = plan.n;
    let mut z = vec![0.0f32; 4 * plan.groups as usize];
    let mut lx = vec![0.0f32; n];
    let mut x = vec![0.0f64; n];
    for i in 0..B.min(plan.paths - b * B) {
        let p = (b * B + i) as u32;
        lx.iter_mut().for_each(|l| *l = 0.0);
        for d in 0..plan.dates {
            for g in 0..plan.groups {
                let w = basket_words(plan.key, plan.option, p, d as u32 * plan.groups + g);
                z[4 * g as usize..4 * g as usize + 4].copy_from_slice(&normals_from_words_f32(w));
            }
            let mut row = 0usize;
            for a in 0..n {
                let mut u = 0.0f32;
                for (l, zj) in plan.chol[row..=row + a].iter().zip(&z) {
                    u += l * zj;
                }
                row += a + 1;
                lx[a] += plan.vol[a].mul_add(u, plan.drift[a]);
                slab[(d * n + a) * B + i] = exp_f32(lx[a]);
            }
        }
        plan.prices(slab, plan.dates - 1, i, &mut x);
        v[i] = plan.spec.payoff(&x);
    }
}

/// Discounts `V` one date and returns the block's normal-equation sums at date `d`:
/// `[sum phi phi^T (row-major), sum phi V, count]`.
fn regress_block(plan: &Plan, b: usize, slab: &[f32], v: &mut [f64], d: usize) -> Vec<f64> {
    let k = plan.basis;
    let mut sums = vec![0.0f64; k * k + k + 1];
    let (mut x, mut sorted, mut phi) = (vec![0.0; plan.n], vec![0.0; plan.n], vec![0.0; k]);
    for (i, vi) in v.iter_mut().enumerate().take(B.min(plan.paths - b * B)) {
        let y = *vi * plan.df_step;
        *vi = y;
        plan.prices(slab, d, i, &mut x);
        if plan.spec.payoff(&x) > 0.0 {
            rainbow_basis(plan.spec, &x, &mut sorted, &mut phi);
            for r in 0..k {
                for c in 0..k {
                    sums[r * k + c] += phi[r] * phi[c];
                }
                sums[k * k + r] += phi[r] * y;
            }
            sums[k * k + k] += 1.0;
        }
    }
    sums
}

/// Exercises block `b` at date `d` where the payoff is positive and above the fit.
fn exercise_block(plan: &Plan, b: usize, slab: &[f32], v: &mut [f64], d: usize, beta: &[f64]) {
    let k = plan.basis;
    let (mut x, mut sorted, mut phi) = (vec![0.0; plan.n], vec![0.0; plan.n], vec![0.0; k]);
    for (i, vi) in v.iter_mut().enumerate().take(B.min(plan.paths - b * B)) {
        plan.prices(slab, d, i, &mut x);
        let h = plan.spec.payoff(&x);
        if h > 0.0 {
            rainbow_basis(plan.spec, &x, &mut sorted, &mut phi);
            let cont: f64 = phi.iter().zip(beta).map(|(p, c)| p * c).sum();
            if h > cont {
                *vi = h;
            }
        }
    }
}

/// Prices one American rainbow by Longstaff-Schwartz (module docs): `mc.paths` paths of the
/// seed's stream `option`, the option's exercise dates as the time steps. Antithetic and
/// control variates and Sobol points are refused, as for [`super::LsmPlan`]; `mc.steps` is
/// not used. The same bits on any number of threads.
pub fn price_american_rainbow(spec: &AmericanRainbowSpec, mc: &McParams, option: u32) -> Result<PriceResult> {
    let l = spec.validate()?;
    let n = spec.assets.len();
    let dates = spec.exercise_dates as usize;
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
    let plan = Plan {
        spec,
        option,
        paths,
        n,
        dates,
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
    };
    let blocks = paths.div_ceil(B);
    let slab = dates * n * B;
    let mut m = zeroed::<f32>(blocks * slab, "path matrix")?;
    let mut v = zeroed::<f64>(blocks * B, "cash flows")?;
    m.par_chunks_mut(slab)
        .zip(v.par_chunks_mut(B))
        .enumerate()
        .for_each(|(b, (s, vb))| simulate_block(&plan, b, s, vb));
    let k = plan.basis;
    for d in (0..dates - 1).rev() {
        let parts: Vec<Vec<f64>> = m
            .par_chunks(slab)
            .zip(v.par_chunks_mut(B))
            .enumerate()
            .map(|(b, (s, vb))| regress_block(&plan, b, s, vb, d))
            .collect();
        let mut total = vec![0.0f64; k * k + k + 1];
        for p in &parts {
            for (t, x) in total.iter_mut().zip(p) {
                *t += *x;
            }
        }
        if total[k * k + k] < k as f64 {
            continue;
        }
        if let Some(beta) = solve_dense(&total[..k * k], &total[k * k..k * k + k], k) {
            m.par_chunks(slab)
                .zip(v.par_chunks_mut(B))
                .enumerate()
                .for_each(|(b, (s, vb))| exercise_block(&plan, b, s, vb, d, &beta));
        }
    }
    let fin: Vec<[f64; 2]> = v
        .par_chunks(B)
        .enumerate()
        .map(|(b, vb)| {
            let (mut sy, mut syy) = (0.0f64, 0.0f64);
            for &x in &vb[..B.min(paths - b * B)] {
                let y = x * plan.df_step;
                sy += y;
                syy += y * y;
            }
            [sy, syy]
        })
        .collect();
    let (mut sy, mut syy) = (0.0f64, 0.0f64);
    for f in &fin {
        sy += f[0];
        syy += f[1];
    }
    Ok(finish_estimate(mc.paths, spec.payoff_now(), sy, syy))
}

/// Prices many; option `i` uses stream index `first_option + i`. An invalid option is an
/// error in its slot.
pub fn price_american_rainbow_portfolio(
    specs: &[AmericanRainbowSpec],
    mc: &McParams,
    first_option: u32,
) -> Vec<Result<PriceResult>> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| match u32::try_from(i as u64 + u64::from(first_option)) {
            Ok(o) => price_american_rainbow(s, mc, o),
            Err(_) => Err(Error::invalid(OP, format!("option {i}: stream index past 2^32"))),
        })
        .collect()
}

fn zeroed<T: Copy + Default>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        Error::invalid(
            OP,
            format!(
                "could not allocate the {what} ({} MiB) on the host",
                (n * std::mem::size_of::<T>()) >> 20
            ),
        )
    })?;
    v.resize(n, T::default());
    Ok(v)
}

#[cfg(test)]
#[path = "rainbow_tests.rs"]
mod tests;
