//! Longstaff-Schwartz (2001) least-squares Monte Carlo: the contract both engines implement
//! (kiln-cpu's `finance::american`, kiln-cuda's `launch_american` and `kernels/american.cu`)
//! and the host-side pieces they share, so that a price is the same bits on either.
//!
//! # Paths
//!
//! [`LsmPlan`] holds the constants. Path `p` of option `o` (its stream index) at date
//! `t_{d+1} = (d + 1) T / n`, `d = 0..n`, is the European engine's recurrence and stream
//! (see [`crate::finance::PathParams`] and [`crate::philox`]): normal `d` of the stream
//! `(seed, o, p)`, `x_{d+1} = x_d + vol_sqrt_dt.mul_add(z_d, drift_dt)` in f32, and the stored
//! value is `e_d = exp_f32(x_{d+1})` (f32; the price is `S_d = spot * e_d` in f64). A path
//! matrix of `paths x dates` f32 is kept, at most [`LSM_MAX_MATRIX_BYTES`].
//!
//! # Backward induction
//!
//! Every path carries a cash-flow value `V_p` (f64), the value at the current date of the
//! cash flow the exercise policy found so far. At the last date `V_p = h(S_p)` (the
//! payoff, [`AmericanSpec::payoff`]). Then for each earlier date `d = n-2 .. 0`:
//!
//! 1. `V_p = V_p * df_step` for every path (`df_step = exp(-r dt)`, one f64 multiply);
//! 2. the in-the-money paths (`h(S_p) > 0`) are regressed: `y = V_p` on the basis
//!    `1, x, x^2` with `x = S_p / K` ([`RegressionSums::push`] defines every operation);
//!    the sums are taken per canonical block of [`BLOCK_SAMPLES`] paths in path order, and
//!    the blocks added in block order from zero, so both engines get the same sums and,
//!    through [`regression_coefficients`], the same coefficients `beta` to the bit;
//! 3. where `h(S_p) > 0` and `h(S_p) > continuation(beta, x)`, `V_p = h(S_p)` (exercise).
//!    With fewer than 3 in-the-money paths, or a singular system, there is no exercise at
//!    that date (the holder continues): never a NaN.
//!
//! Finally `y_p = V_p * df_step` (back to `t = 0`), and the price is the mean of the `y_p`
//! (block sums of `y` and `y^2` as above), or the exercise value `h(spot)` if that is larger
//! (then the standard error is 0). The standard error is the samples' standard deviation
//! over `sqrt(paths)`.
//!
//! This is the *in-sample* estimator: the same paths fit the exercise rule and price it.
//! The fitted rule is suboptimal (biasing low), the in-sample fit sees the future of the
//! paths it prices (biasing high); the first effect dominates, and the estimate is
//! typically slightly below the Bermudan price, which is itself below the American price
//! of [`super::american_binomial`] by the value of exercising between the dates.

use super::AmericanSpec;
use crate::error::{Error, Result};
use crate::finance::{McParams, OptionType, PriceResult, Rng, BLOCK_SAMPLES};
use crate::philox;

/// Regression basis functions: `1, x, x^2` with `x = S / K`.
pub const LSM_BASIS: usize = 3;

/// Sums per block: `n, x, x^2, x^3, x^4, y, x y, x^2 y` ([`RegressionSums`]).
pub const LSM_SUMS: usize = 8;

/// The largest path matrix (`paths x exercise_dates` f32) either engine keeps: 4 GiB
/// (2^20 paths x 1,024 dates). Larger runs are refused with an error that says so.
pub const LSM_MAX_MATRIX_BYTES: u64 = 4 << 30;

/// Most paths of a run (the Philox sample word is 32 bits).
pub const LSM_MAX_PATHS: u64 = 1 << 32;

/// The sums of the normal equations over the in-the-money paths of a block (or, after
/// [`add`](Self::add), of several): `[n, x, x^2, x^3, x^4, y, x y, x^2 y]`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RegressionSums(pub [f64; LSM_SUMS]);

impl RegressionSums {
    /// Adds one in-the-money path with regressor `x = S / K` and response `y` (its
    /// discounted cash flow). Exactly these operations, each rounded once, no fusion:
    ///
    /// ```text
    /// x2 = x * x;  x3 = x2 * x;  x4 = x2 * x2;  xy = x * y;  x2y = x2 * y
    /// s = [s0 + 1, s1 + x, s2 + x2, s3 + x3, s4 + x4, s5 + y, s6 + xy, s7 + x2y]
    /// ```
    #[inline(always)]
    pub fn push(&mut self, x: f64, y: f64) {
        let x2 = x * x;
        let s = &mut self.0;
        s[0] += 1.0;
        s[1] += x;
        s[2] += x2;
        s[3] += x2 * x;
        s[4] += x2 * x2;
        s[5] += y;
        s[6] += x * y;
        s[7] += x2 * y;
    }

    /// Adds `other`'s sums to these, element by element (blocks go in block order).
    pub fn add(&mut self, other: &RegressionSums) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a += *b;
        }
    }

    /// In-the-money paths counted.
    pub fn count(&self) -> f64 {
        self.0[0]
    }

    /// The normal equations `A beta = b`: `A[i][j] = sum x^(i+j)`, `b[i] = sum x^i y`.
    pub fn normal_equations(&self) -> ([[f64; LSM_BASIS]; LSM_BASIS], [f64; LSM_BASIS]) {
        let s = &self.0;
        (
            [[s[0], s[1], s[2]], [s[1], s[2], s[3]], [s[2], s[3], s[4]]],
            [s[5], s[6], s[7]],
        )
    }
}

/// Solves the 3x3 system `a x = b` by Gaussian elimination with partial pivoting (f64).
/// `None` when a pivot is at most `1e-13` times the largest entry of `a` (singular or
/// nearly so) or the solution is not finite. [`solve_dense`] with `n = 3`.
pub fn solve3(a: [[f64; 3]; 3], b: [f64; 3]) -> Option<[f64; 3]> {
    let flat: Vec<f64> = a.iter().flatten().copied().collect();
    let x = solve_dense(&flat, &b, 3)?;
    Some([x[0], x[1], x[2]])
}

/// Solves the `n x n` system `a x = b` (`a` row-major) by Gaussian elimination with partial
/// pivoting (f64): for each column the row with the largest magnitude at or below the
/// diagonal (the first on ties) is swapped up and eliminated below, over the augmented
/// columns too, then back substitution. `None` when a pivot is at most `1e-13` times the
/// largest entry of `a` (singular or nearly so), the shapes disagree, or the solution is
/// not finite.
pub fn solve_dense(a: &[f64], b: &[f64], n: usize) -> Option<Vec<f64>> {
    if n == 0 || a.len() != n * n || b.len() != n {
        return None;
    }
    let w = n + 1;
    let mut m = vec![0.0f64; n * w];
    for i in 0..n {
        m[i * w..i * w + n].copy_from_slice(&a[i * n..(i + 1) * n]);
        m[i * w + n] = b[i];
    }
    let scale = a.iter().fold(0.0f64, |acc, v| acc.max(v.abs()));
    if !(scale > 0.0 && scale.is_finite()) {
        return None;
    }
    let tol = 1e-13 * scale;
    for c in 0..n {
        // pivot: the largest magnitude in column c at or below row c (first one on ties)
        let mut piv = c;
        for r in c + 1..n {
            if m[r * w + c].abs() > m[piv * w + c].abs() {
                piv = r;
            }
        }
        if m[piv * w + c].abs() <= tol {
            return None;
        }
        if piv != c {
            for k in 0..w {
                m.swap(c * w + k, piv * w + k);
            }
        }
        for r in c + 1..n {
            let f = m[r * w + c] / m[c * w + c];
            for k in c..w {
                m[r * w + k] -= f * m[c * w + k];
            }
        }
    }
    let mut x = vec![0.0f64; n];
    for i in (0..n).rev() {
        let mut s = m[i * w + n];
        for k in i + 1..n {
            s -= m[i * w + k] * x[k];
        }
        x[i] = s / m[i * w + i];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// The regression coefficients from a date's total sums, or `None` (no exercise at that
/// date) with fewer than [`LSM_BASIS`] in-the-money paths or a singular system.
pub fn regression_coefficients(sums: &RegressionSums) -> Option<[f64; LSM_BASIS]> {
    if sums.count() < LSM_BASIS as f64 {
        return None;
    }
    let (a, b) = sums.normal_equations();
    solve3(a, b)
}

/// The fitted continuation value at `x = S / K`: `(beta0 + beta1 * x) + beta2 * (x * x)`,
/// each operation rounded once (the kernels write the same).
#[inline(always)]
pub fn continuation(beta: &[f64; LSM_BASIS], x: f64) -> f64 {
    let x2 = x * x;
    beta[0] + beta[1] * x + beta[2] * x2
}

/// The checks every Longstaff-Schwartz run shares: `paths` in `2..=2^32`, no antithetic or
/// control variates, Philox only, and a path matrix of `paths x cells` f32 (`cells` a path:
/// its dates, times its assets for a rainbow, named `what` in the message) within
/// [`LSM_MAX_MATRIX_BYTES`].
pub fn check_lsm_run(mc: &McParams, cells: u64, what: &str) -> Result<()> {
    const OP: &str = "longstaff_schwartz";
    if mc.paths < 2 || mc.paths > LSM_MAX_PATHS {
        return Err(Error::invalid(
            OP,
            format!("paths = {}; it must be in 2..=2^32", mc.paths),
        ));
    }
    if mc.antithetic {
        return Err(Error::invalid(
            OP,
            "antithetic variates are not supported for American options; turn them off",
        ));
    }
    if mc.control_variate {
        return Err(Error::invalid(
            OP,
            "control variates are not supported for American options; turn them off",
        ));
    }
    if let Rng::Sobol { .. } = mc.rng {
        return Err(Error::invalid(
            OP,
            "American options are priced with the philox generator only (not sobol)",
        ));
    }
    let bytes = mc.paths.saturating_mul(cells).saturating_mul(4);
    if bytes > LSM_MAX_MATRIX_BYTES {
        return Err(Error::invalid(
            OP,
            format!(
                "paths = {} x {what} = {cells} needs a {:.1} GiB path matrix; at most {} GiB: use fewer paths or dates",
                mc.paths,
                bytes as f64 / f64::from(1u32 << 30),
                LSM_MAX_MATRIX_BYTES >> 30
            ),
        ));
    }
    Ok(())
}

/// The constants of one option's Longstaff-Schwartz run, derived on the host in f64 and
/// rounded once (as [`crate::finance::PathParams`] does), so both engines use the same bits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LsmPlan {
    /// The option.
    pub spec: AmericanSpec,
    /// Its Philox option word (stream index).
    pub option: u32,
    /// Paths simulated.
    pub paths: u64,
    /// Exercise dates, the time steps of a path.
    pub dates: u32,
    /// `maturity / dates`.
    pub dt: f64,
    /// `((rate - dividend - volatility^2 / 2) * dt) as f32`.
    pub drift_dt: f32,
    /// `(volatility * sqrt(dt)) as f32`.
    pub vol_sqrt_dt: f32,
    /// `exp(-rate * dt)`: one date's discount.
    pub df_step: f64,
    /// The Philox key of the seed ([`philox::key_from_seed`]).
    pub key: [u32; 2],
}

impl LsmPlan {
    /// Validates the option and the run and derives the constants. The run takes `paths`
    /// and `seed` from `mc`; the time steps are the option's exercise dates (`mc.steps` is
    /// not used). Antithetic variates, control variates and Sobol points are not supported
    /// (an error says so); `fast_math` is ignored (the run is always exact).
    pub fn new(spec: &AmericanSpec, mc: &McParams, option: u32) -> Result<Self> {
        spec.validate()?;
        check_lsm_run(mc, u64::from(spec.exercise_dates), "exercise_dates")?;
        let dt = spec.maturity / f64::from(spec.exercise_dates);
        let v = spec.volatility;
        Ok(LsmPlan {
            spec: *spec,
            option,
            paths: mc.paths,
            dates: spec.exercise_dates,
            dt,
            drift_dt: ((spec.rate - spec.dividend - 0.5 * v * v) * dt) as f32,
            vol_sqrt_dt: (v * dt.sqrt()) as f32,
            df_step: (-spec.rate * dt).exp(),
            key: philox::key_from_seed(mc.seed),
        })
    }

    /// Canonical blocks of [`BLOCK_SAMPLES`] paths (the last may be partial).
    pub fn blocks(&self) -> u64 {
        self.paths.div_ceil(BLOCK_SAMPLES)
    }

    /// Whether the option is a put.
    pub fn is_put(&self) -> bool {
        self.spec.option_type == OptionType::Put
    }

    /// The price `spot * e` of a stored path value, in f64.
    #[inline(always)]
    pub fn price_at(&self, e: f32) -> f64 {
        self.spec.spot * f64::from(e)
    }
}

/// What an engine does for [`run_lsm`]; see the module docs for each step's arithmetic.
/// Block sums are returned in block order, one per canonical block.
pub trait LsmBackend {
    /// Simulates every path at every date and sets `V_p` to the payoff at the last date.
    fn simulate(&mut self, plan: &LsmPlan) -> Result<()>;
    /// Discounts every `V_p` by `df_step` and returns each block's regression sums of the
    /// in-the-money paths at date `d` (0-based: the date `(d + 1) T / n`).
    fn regress(&mut self, plan: &LsmPlan, d: u32) -> Result<Vec<RegressionSums>>;
    /// Exercises at date `d` where the payoff is positive and above `continuation(beta, x)`.
    fn exercise(&mut self, plan: &LsmPlan, d: u32, beta: &[f64; LSM_BASIS]) -> Result<()>;
    /// Discounts every `V_p` to `t = 0` and returns each block's `[sum y, sum y^2]`.
    fn final_sums(&mut self, plan: &LsmPlan) -> Result<Vec<[f64; 2]>>;
}

fn check_blocks(plan: &LsmPlan, got: usize) -> Result<()> {
    if got as u64 != plan.blocks() {
        return Err(Error::invalid(
            "longstaff_schwartz",
            format!("an engine returned {got} block sums for {} blocks", plan.blocks()),
        ));
    }
    Ok(())
}

/// Runs the backward induction on `engine` and finishes the price ([`lsm_finish`]). Both
/// engines are driven by this one loop, so they add the same sums in the same order and
/// solve the same systems.
pub fn run_lsm(plan: &LsmPlan, engine: &mut impl LsmBackend) -> Result<PriceResult> {
    let (sy, syy) = run_lsm_sums(plan, engine)?;
    Ok(lsm_finish(plan, sy, syy))
}

/// [`run_lsm`]'s backward induction, returning the totals of `y` and `y^2` over the paths
/// (block sums added in block order) for a finish of the caller's.
pub fn run_lsm_sums(plan: &LsmPlan, engine: &mut impl LsmBackend) -> Result<(f64, f64)> {
    engine.simulate(plan)?;
    for d in (0..plan.dates - 1).rev() {
        let blocks = engine.regress(plan, d)?;
        check_blocks(plan, blocks.len())?;
        let mut total = RegressionSums::default();
        for b in &blocks {
            total.add(b);
        }
        if let Some(beta) = regression_coefficients(&total) {
            engine.exercise(plan, d, &beta)?;
        }
    }
    let fin = engine.final_sums(plan)?;
    check_blocks(plan, fin.len())?;
    let (mut sy, mut syy) = (0.0f64, 0.0f64);
    for b in &fin {
        sy += b[0];
        syy += b[1];
    }
    Ok((sy, syy))
}

/// The price from the totals of `y` and `y^2` over the plan's paths: the mean and its
/// standard error (sample standard deviation over `sqrt(paths)`), or the exercise value at
/// `t = 0` with no error if that is larger.
pub fn lsm_finish(plan: &LsmPlan, sum_y: f64, sum_yy: f64) -> PriceResult {
    finish_estimate(plan.paths, plan.spec.payoff(plan.spec.spot), sum_y, sum_yy)
}

/// [`lsm_finish`] for any option: the mean of `paths` samples with totals `sum_y` and
/// `sum_yy` and its standard error, or `now` (the exercise value at `t = 0`) with no error
/// if that is larger.
pub fn finish_estimate(paths: u64, now: f64, sum_y: f64, sum_yy: f64) -> PriceResult {
    let n = paths as f64;
    let mean = sum_y / n;
    let var = ((sum_yy - mean * sum_y) / (n - 1.0)).max(0.0);
    let se = (var / n).sqrt();
    let (price, se) = if now > mean { (now, 0.0) } else { (mean, se) };
    PriceResult {
        price,
        std_error: se,
        ci95: (price - 1.96 * se, price + 1.96 * se),
        paths_used: paths,
        ..PriceResult::exact(price)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solver_solves_and_refuses_singular_systems() {
        let a = [[4.0, 1.0, 2.0], [1.0, 3.0, 0.5], [2.0, 0.5, 5.0]];
        let x = [1.5, -2.0, 0.25];
        let b = [0, 1, 2].map(|i| a[i][0] * x[0] + a[i][1] * x[1] + a[i][2] * x[2]);
        let got = solve3(a, b).unwrap();
        for i in 0..3 {
            assert!((got[i] - x[i]).abs() < 1e-12, "{got:?}");
        }
        // needs a row swap (zero leading entry)
        let a2 = [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 2.0]];
        assert_eq!(solve3(a2, [3.0, 4.0, 2.0]).unwrap(), [4.0, 3.0, 1.0]);
        assert_eq!(solve3([[0.0; 3]; 3], [1.0; 3]), None);
        assert_eq!(
            solve3([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]], [1.0; 3]),
            None
        );
        assert_eq!(solve3([[f64::NAN; 3]; 3], [1.0; 3]), None);
    }

    #[test]
    fn regression_recovers_a_quadratic_and_falls_back_to_continue() {
        let mut s = RegressionSums::default();
        for i in 0..50 {
            let x = 0.6 + 0.01 * f64::from(i);
            s.push(x, 2.0 - 3.0 * x + 0.5 * x * x);
        }
        let beta = regression_coefficients(&s).unwrap();
        for (g, w) in beta.iter().zip([2.0, -3.0, 0.5]) {
            assert!((g - w).abs() < 1e-7, "{beta:?}");
        }
        assert!((continuation(&beta, 0.8) - (2.0 - 2.4 + 0.32)).abs() < 1e-9);
        // no in-the-money paths, too few, or all at one x: no coefficients, no NaN
        assert_eq!(regression_coefficients(&RegressionSums::default()), None);
        let mut two = RegressionSums::default();
        two.push(0.9, 1.0);
        two.push(0.8, 2.0);
        assert_eq!(regression_coefficients(&two), None);
        let mut same = RegressionSums::default();
        for _ in 0..10 {
            same.push(0.9, 1.0);
        }
        assert_eq!(regression_coefficients(&same), None);
        // block order: adding blocks is element-wise
        let mut t = RegressionSums::default();
        t.add(&s);
        t.add(&two);
        assert_eq!(t.count(), 52.0);
    }

    fn spec() -> AmericanSpec {
        AmericanSpec {
            option_type: OptionType::Put,
            spot: 36.0,
            strike: 40.0,
            rate: 0.06,
            dividend: 0.0,
            volatility: 0.2,
            maturity: 1.0,
            exercise_dates: 50,
        }
    }

    #[test]
    fn plan_validates_the_run() {
        let mc = McParams {
            paths: 1000,
            ..McParams::default()
        };
        let p = LsmPlan::new(&spec(), &mc, 3).unwrap();
        assert_eq!((p.dates, p.blocks(), p.option), (50, 1, 3));
        assert!((p.dt - 0.02).abs() < 1e-15);
        assert_eq!(p.vol_sqrt_dt, (0.2 * 0.02f64.sqrt()) as f32);
        let reason = |mc: McParams| LsmPlan::new(&spec(), &mc, 0).unwrap_err().to_string();
        assert!(reason(McParams { paths: 1, ..mc }).contains("paths"));
        assert!(reason(McParams {
            antithetic: true,
            ..mc
        })
        .contains("antithetic"));
        assert!(reason(McParams {
            control_variate: true,
            ..mc
        })
        .contains("control"));
        assert!(reason(McParams {
            rng: Rng::Sobol { replicates: 4 },
            ..mc
        })
        .contains("sobol"));
        let big = McParams { paths: 1 << 30, ..mc };
        assert!(reason(big).contains("GiB"));
    }

    #[test]
    fn finish_takes_the_exercise_value_when_larger() {
        let mc = McParams {
            paths: 4,
            ..McParams::default()
        };
        let p = LsmPlan::new(&spec(), &mc, 0).unwrap();
        // intrinsic 4.0 > mean 3.0
        let r = lsm_finish(&p, 12.0, 40.0);
        assert_eq!((r.price, r.std_error), (4.0, 0.0));
        let r = lsm_finish(&p, 20.0, 104.0); // y = 4, 6, 4, 6: mean 5, var 4/3
        assert_eq!(r.price, 5.0);
        assert!((r.std_error - (4.0f64 / 3.0 / 4.0).sqrt()).abs() < 1e-15);
        assert_eq!(r.paths_used, 4);
    }
}
