//! Longstaff-Schwartz for American barrier options ([`super::AmericanBarrierSpec`]): the
//! contract an engine implements on top of [`super::lsm`]'s (the same paths, plan, sums and
//! driver), and the finishing math. The CPU engine (kiln-cpu's `finance::american_barrier`)
//! and the CUDA engine (kiln-cuda's `launch_american_barrier`, `kernels/american_barrier.cu`)
//! implement it, the same bits.
//!
//! # The barrier on the paths
//!
//! The paths are known at the exercise dates only, and the option's barrier is monitored
//! continuously. A path is knocked at the first date whose price is at or past the
//! monitored level `H exp(-beta sigma sqrt(dt))` (down) or `H exp(+beta sigma sqrt(dt))`
//! (up): Broadie, Glasserman and Kou's continuity correction
//! ([`crate::finance::barrier::bgk_shift`]) run backwards, a barrier watched at dates `dt`
//! apart moved towards the spot prices like the continuously watched one. It is an
//! approximation (exact to first order in `sqrt(dt)` for European barriers); the tests bound
//! its gap to the tree. The spot itself is checked against `H` (already past it: the
//! rebate, or the American vanilla).
//!
//! # Backward induction
//!
//! With `hit_p` the first knocked date of path `p` (none: never), the engine keeps:
//!
//! - out-options: one cash flow `V_p` as in [`super::lsm`], with at the last date
//!   `V_p = R` if `hit_p` is that date, else the payoff; at each earlier date `d`, after the
//!   discount, `V_p = R` where `hit_p = d` (the rebate paid at the knock: nothing after it
//!   counts). The regression takes the live in-the-money paths (`hit_p > d`) only, and only
//!   they may exercise. The price is the mean of the discounted `V_p`, or the exercise value
//!   now if that is larger.
//! - in-options: the vanilla's cash flow `V_p` exactly as [`super::lsm`] (its regression on
//!   every in-the-money path: the vanilla's exercise rule does not depend on the past), and
//!   the in-option's `W_p`: at the last date `W_p = R` if the path was never knocked, the
//!   vanilla's payoff if it was knocked there; at each earlier date `d`, before the
//!   discount, `W_p = V_p` where `hit_p = d + 1` (at the knock the holder receives the
//!   vanilla, worth its cash flow from that date on); at the end `W_p = V_p` where
//!   `hit_p = 0`. The price is the mean of the discounted `W_p` (an in-option cannot be
//!   exercised before its knock, so there is no exercise value now).
//!
//! The regression and exercise steps are [`super::lsm`]'s operations, and the driver is
//! [`run_lsm_sums`].

use super::barrier::AmericanBarrierSpec;
use super::lsm::{run_lsm_sums, LsmBackend, LsmPlan};
use crate::error::Result;
use crate::finance::barrier::bgk_shift;
use crate::finance::PriceResult;

/// `hit` of a path never knocked.
pub const NEVER_HIT: u32 = u32::MAX;

/// The barrier as the paths see it (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LsmBarrier {
    /// The option.
    pub spec: AmericanBarrierSpec,
    /// The level checked at the dates: the barrier moved towards the spot by BGK's shift.
    pub level: f64,
}

impl LsmBarrier {
    /// The monitored level for `plan`'s dates.
    pub fn new(spec: &AmericanBarrierSpec, plan: &LsmPlan) -> Self {
        let up = spec.is_up();
        LsmBarrier {
            spec: *spec,
            level: bgk_shift(spec.barrier, !up, spec.option.volatility, plan.dt),
        }
    }

    /// Whether a path at price `s` on a date is knocked.
    #[inline(always)]
    pub fn knocked(&self, s: f64) -> bool {
        if self.spec.is_up() {
            s >= self.level
        } else {
            s <= self.level
        }
    }

    /// The rebate.
    pub fn rebate(&self) -> f64 {
        self.spec.rebate
    }

    /// Whether the option is a knock-in.
    pub fn is_in(&self) -> bool {
        self.spec.is_in()
    }
}

/// The price from the totals of the discounted cash flows: out-options as
/// [`super::lsm::lsm_finish`] (the larger of the mean and the exercise value now), in-options
/// the mean and its standard error.
pub fn lsm_barrier_finish(plan: &LsmPlan, barrier: &LsmBarrier, sum_y: f64, sum_yy: f64) -> PriceResult {
    if !barrier.is_in() {
        return super::lsm::lsm_finish(plan, sum_y, sum_yy);
    }
    let n = plan.paths as f64;
    let price = sum_y / n;
    let var = ((sum_yy - price * sum_y) / (n - 1.0)).max(0.0);
    let se = (var / n).sqrt();
    PriceResult {
        price,
        std_error: se,
        ci95: (price - 1.96 * se, price + 1.96 * se),
        paths_used: plan.paths,
        ..PriceResult::exact(price)
    }
}

/// Runs an engine that implements the barrier contract (module docs) through
/// [`run_lsm_sums`] and finishes the price.
pub fn run_lsm_barrier(
    plan: &LsmPlan,
    barrier: &LsmBarrier,
    engine: &mut impl LsmBackend,
) -> Result<PriceResult> {
    let (sy, syy) = run_lsm_sums(plan, engine)?;
    Ok(lsm_barrier_finish(plan, barrier, sy, syy))
}
