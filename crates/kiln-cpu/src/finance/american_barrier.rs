//! Longstaff-Schwartz American barrier options on the CPU (rayon): kiln-core's
//! [`kiln_core::finance::american::lsm_barrier`] contract on the paths and cash flows of
//! the vanilla engine ([`super::american`]), one rayon task a canonical block at each step.
//! It is the numeric reference of the CUDA engine (kiln-cuda's `launch_american_barrier`),
//! which does the same operations in the same order.

use kiln_core::finance::american::lsm_barrier::{run_lsm_barrier, LsmBarrier, NEVER_HIT};
use kiln_core::finance::american::{
    continuation, AmericanBarrierSpec, LsmBackend, LsmPlan, RegressionSums, LSM_BASIS,
};
use kiln_core::finance::{McParams, PriceResult, BLOCK_SAMPLES};
use kiln_core::Result;
use rayon::prelude::*;

use super::american::{zeroed, CpuLsm};

const B: usize = BLOCK_SAMPLES as usize;

/// The vanilla engine's state plus each path's first knocked date and, for in-options, the
/// in-option's cash flows.
struct CpuLsmBarrier {
    base: CpuLsm,
    bar: LsmBarrier,
    /// First knocked date of each path ([`NEVER_HIT`]: never), padded to whole blocks.
    hit: Vec<u32>,
    /// In-options: `W_p`, padded to whole blocks (empty for out-options).
    w: Vec<f64>,
}

impl LsmBackend for CpuLsmBarrier {
    fn simulate(&mut self, plan: &LsmPlan) -> Result<()> {
        self.base.simulate(plan)?;
        let (dates, bar) = (self.base.dates, self.bar);
        let last = dates - 1;
        let slab = dates * B;
        let is_in = bar.is_in();
        let mut w_chunks = self.w.chunks_mut(B);
        let jobs: Vec<_> = self
            .base
            .m
            .chunks(slab)
            .zip(self.base.v.chunks_mut(B))
            .zip(self.hit.chunks_mut(B))
            .map(|((s, vb), hb)| (s, vb, hb, if is_in { w_chunks.next() } else { None }))
            .collect();
        jobs.into_par_iter().for_each(|(s, vb, hb, wb)| {
            for p in 0..B {
                hb[p] = (0..dates)
                    .find(|&d| bar.knocked(plan.price_at(s[d * B + p])))
                    .map_or(NEVER_HIT, |d| d as u32);
            }
            match wb {
                // the in-option: the rebate if never knocked, the vanilla's payoff if knocked
                // at the last date (earlier knocks are copied going back)
                Some(wb) => {
                    for p in 0..B {
                        wb[p] = if hb[p] == NEVER_HIT {
                            bar.rebate()
                        } else if hb[p] as usize == last {
                            vb[p]
                        } else {
                            0.0
                        };
                    }
                }
                // the out-option: the rebate where knocked at the last date
                None => {
                    for p in 0..B {
                        if hb[p] as usize == last {
                            vb[p] = bar.rebate();
                        }
                    }
                }
            }
        });
        Ok(())
    }

    fn regress(&mut self, plan: &LsmPlan, d: u32) -> Result<Vec<RegressionSums>> {
        let (slab, paths) = (self.base.dates * B, self.base.paths);
        let (k, df, bar) = (plan.spec.strike, plan.df_step, self.bar);
        let is_in = bar.is_in();
        let mut w_chunks = self.w.chunks_mut(B);
        let jobs: Vec<_> = self
            .base
            .m
            .chunks(slab)
            .zip(self.base.v.chunks_mut(B))
            .zip(self.hit.chunks(B))
            .map(|((s, vb), hb)| (s, vb, hb, if is_in { w_chunks.next() } else { None }))
            .collect();
        Ok(jobs
            .into_par_iter()
            .enumerate()
            .map(|(b, (s, vb, hb, wb))| {
                let row = &s[d as usize * B..(d as usize + 1) * B];
                let n = (paths - b * B).min(B);
                let mut sums = RegressionSums::default();
                match wb {
                    Some(wb) => {
                        for p in 0..n {
                            if hb[p] == d + 1 {
                                wb[p] = vb[p];
                            }
                            wb[p] *= df;
                            let y = vb[p] * df;
                            vb[p] = y;
                            let sp = plan.price_at(row[p]);
                            if plan.spec.payoff(sp) > 0.0 {
                                sums.push(sp / k, y);
                            }
                        }
                    }
                    None => {
                        for p in 0..n {
                            let y = if hb[p] == d { bar.rebate() } else { vb[p] * df };
                            vb[p] = y;
                            let sp = plan.price_at(row[p]);
                            if hb[p] > d && plan.spec.payoff(sp) > 0.0 {
                                sums.push(sp / k, y);
                            }
                        }
                    }
                }
                sums
            })
            .collect())
    }

    fn exercise(&mut self, plan: &LsmPlan, d: u32, beta: &[f64; LSM_BASIS]) -> Result<()> {
        let (slab, paths) = (self.base.dates * B, self.base.paths);
        let k = plan.spec.strike;
        // in-options: the vanilla exercises on every path; out-options on the live ones
        let live_only = !self.bar.is_in();
        self.base
            .m
            .par_chunks(slab)
            .zip(self.base.v.par_chunks_mut(B))
            .zip(self.hit.par_chunks(B))
            .enumerate()
            .for_each(|(b, ((s, vb), hb))| {
                let row = &s[d as usize * B..(d as usize + 1) * B];
                for p in 0..(paths - b * B).min(B) {
                    if live_only && hb[p] <= d {
                        continue;
                    }
                    let sp = plan.price_at(row[p]);
                    let h = plan.spec.payoff(sp);
                    if h > 0.0 && h > continuation(beta, sp / k) {
                        vb[p] = h;
                    }
                }
            });
        Ok(())
    }

    fn final_sums(&mut self, plan: &LsmPlan) -> Result<Vec<[f64; 2]>> {
        let df = plan.df_step;
        let paths = self.base.paths;
        let is_in = self.bar.is_in();
        let (v, hit) = (&self.base.v, &self.hit);
        if is_in {
            self.w
                .par_chunks_mut(B)
                .zip(v.par_chunks(B))
                .zip(hit.par_chunks(B))
                .for_each(|((wb, vb), hb)| {
                    for p in 0..B {
                        if hb[p] == 0 {
                            wb[p] = vb[p];
                        }
                    }
                });
        }
        let y = if is_in { &self.w } else { v };
        Ok(y.par_chunks(B)
            .enumerate()
            .map(|(b, yb)| {
                let (mut sy, mut syy) = (0.0f64, 0.0f64);
                for &c in &yb[..(paths - b * B).min(B)] {
                    let y = c * df;
                    sy += y;
                    syy += y * y;
                }
                [sy, syy]
            })
            .collect())
    }
}

/// Prices one American barrier option by Longstaff-Schwartz (kiln-core's
/// [`kiln_core::finance::american::lsm_barrier`]): `mc.paths` paths of the seed's stream
/// `option`, the option's `exercise_dates` as the time steps, the vanilla engine's paths. A
/// spot already past the barrier: the rebate (out) or the vanilla's Longstaff-Schwartz
/// price (in).
pub fn price_american_barrier(spec: &AmericanBarrierSpec, mc: &McParams, option: u32) -> Result<PriceResult> {
    spec.validate()?;
    if spec.knocked(spec.option.spot) {
        return if spec.is_in() {
            super::american::price_american(&spec.option, mc, option)
        } else {
            Ok(PriceResult::exact(spec.rebate))
        };
    }
    let plan = LsmPlan::new(&spec.option, mc, option)?;
    let base = CpuLsm::new(&plan)?;
    let padded = base.v.len();
    let bar = LsmBarrier::new(spec, &plan);
    let mut engine = CpuLsmBarrier {
        base,
        bar,
        hit: zeroed(padded, "knock dates")?,
        w: if spec.is_in() {
            zeroed(padded, "in-option cash flows")?
        } else {
            Vec::new()
        },
    };
    run_lsm_barrier(&plan, &bar, &mut engine)
}

/// Prices many options; option `i` uses stream index `first_option + i`, one at a time. An
/// invalid option is an error in its slot.
pub fn price_american_barrier_portfolio(
    specs: &[AmericanBarrierSpec],
    mc: &McParams,
    first_option: u32,
) -> Vec<Result<PriceResult>> {
    kiln_core::storage::per_option("price_american_barrier", specs, first_option, |s, o| {
        price_american_barrier(s, mc, o)
    })
}

#[cfg(test)]
#[path = "american_barrier_tests.rs"]
mod tests;
