//! Longstaff-Schwartz American options on the CPU (rayon), the numeric reference for the
//! CUDA engine: kiln-core's [`run_lsm`] drives the backward induction and this module does
//! each step's path work exactly as [`kiln_core::finance::american::lsm`] specifies.
//!
//! Layout: the path matrix is block-tiled, one slab of `dates x 1024` f32 per canonical
//! block (date-major inside the slab), so a block's paths at one date are contiguous and
//! each block is one rayon task at every step (path generation, regression sums, exercise,
//! final sums). The last block is padded to 1024 paths; the padding is simulated and never
//! summed. Memory: `4 x 1024 x blocks x dates` bytes for the matrix plus 8 bytes a path,
//! refused above [`LSM_MAX_MATRIX_BYTES`] (by [`LsmPlan::new`]) and reported as an error,
//! not an abort, when the allocation fails.
//!
//! Paths are simulated 8 at a time (structure-of-arrays, as the European engine's lanes):
//! the Philox words and Box-Muller normals of `(seed, option, path)`, the f32 log-price
//! steps with `mul_add`, and `exp_f32`. On x86-64 `multiversion` runs a copy compiled with
//! AVX2 + FMA where the processor has them; both copies give the same bits.

// The lane loops index several arrays at once.
#![allow(clippy::needless_range_loop)]

use kiln_core::finance::american::{
    continuation, run_lsm, AmericanSpec, LsmBackend, LsmPlan, RegressionSums, LSM_BASIS, LSM_MAX_MATRIX_BYTES,
};
use kiln_core::finance::{McParams, PriceResult, BLOCK_SAMPLES};
use kiln_core::philox::{box_muller_f32, exp_f32, philox4x32_10_lanes, NORMALS_PER_CALL};
use kiln_core::{Error, Result};
use rayon::prelude::*;

const B: usize = BLOCK_SAMPLES as usize;
const LANES: usize = 8;

/// The CPU engine's state for one option: the path matrix and the cash flows.
pub(super) struct CpuLsm {
    /// Block slabs: `m[b * dates * 1024 + d * 1024 + i]` is path `1024 b + i` at date `d`.
    pub(super) m: Vec<f32>,
    /// `V_p`, padded to whole blocks.
    pub(super) v: Vec<f64>,
    pub(super) dates: usize,
    pub(super) paths: usize,
}

pub(super) fn zeroed<T: Copy + Default>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        Error::invalid(
            "longstaff_schwartz",
            format!(
                "could not allocate the {what} ({} MiB) on the host",
                (n * std::mem::size_of::<T>()) >> 20
            ),
        )
    })?;
    v.resize(n, T::default());
    Ok(v)
}

impl CpuLsm {
    pub(super) fn new(plan: &LsmPlan) -> Result<Self> {
        let blocks = usize::try_from(plan.blocks()).map_err(|_| too_big())?;
        let dates = plan.dates as usize;
        let cells = blocks
            .checked_mul(B)
            .and_then(|c| c.checked_mul(dates))
            .filter(|&c| (c as u64) * 4 <= LSM_MAX_MATRIX_BYTES + 4 * (B * dates) as u64)
            .ok_or_else(too_big)?;
        Ok(CpuLsm {
            m: zeroed(cells, "path matrix")?,
            v: zeroed(blocks * B, "cash flows")?,
            dates,
            paths: usize::try_from(plan.paths).map_err(|_| too_big())?,
        })
    }

    /// Valid paths of block `b`.
    pub(super) fn valid(&self, b: usize) -> usize {
        (self.paths - b * B).min(B)
    }
}

fn too_big() -> Error {
    Error::invalid(
        "longstaff_schwartz",
        "the path matrix does not fit this machine's address space",
    )
}

/// Simulates block `b`'s 1024 paths into its slab and sets `V_p` to the last date's payoff.
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
fn simulate_block(plan: &LsmPlan, b: usize, slab: &mut [f32], vb: &mut [f64]) {
    let dates = plan.dates;
    let (drift, vol) = (plan.drift_dt, plan.vol_sqrt_dt);
    let calls = dates.div_ceil(NORMALS_PER_CALL);
    for g in 0..B / LANES {
        let s0 = (b * B + g * LANES) as u64;
        if s0 >= plan.paths {
            break;
        }
        let mut c1 = [0u32; LANES];
        for (l, c) in c1.iter_mut().enumerate() {
            // path indices are < 2^32 (LsmPlan::new); padding lanes wrap and are ignored
            *c = (s0 as u32).wrapping_add(l as u32);
        }
        let mut x = [0f32; LANES];
        let mut e = [0f32; LANES];
        for call in 0..calls {
            let w = philox4x32_10_lanes(&[[call; LANES], c1, [plan.option; LANES], [0; LANES]], plan.key);
            let mut z = [[0f32; LANES]; 4];
            for p in 0..2 {
                for l in 0..LANES {
                    let [a, bb] = box_muller_f32(w[2 * p][l], w[2 * p + 1][l]);
                    z[2 * p][l] = a;
                    z[2 * p + 1][l] = bb;
                }
            }
            let first = call * NORMALS_PER_CALL;
            let here = (dates - first).min(NORMALS_PER_CALL);
            for j in 0..here {
                let row = (first + j) as usize * B + g * LANES;
                for l in 0..LANES {
                    x[l] += vol.mul_add(z[j as usize][l], drift);
                    e[l] = exp_f32(x[l]);
                }
                slab[row..row + LANES].copy_from_slice(&e);
            }
        }
        for l in 0..LANES {
            vb[g * LANES + l] = plan.spec.payoff(plan.price_at(e[l]));
        }
    }
}

impl LsmBackend for CpuLsm {
    fn simulate(&mut self, plan: &LsmPlan) -> Result<()> {
        let slab = self.dates * B;
        self.m
            .par_chunks_mut(slab)
            .zip(self.v.par_chunks_mut(B))
            .enumerate()
            .for_each(|(b, (s, vb))| simulate_block(plan, b, s, vb));
        Ok(())
    }

    fn regress(&mut self, plan: &LsmPlan, d: u32) -> Result<Vec<RegressionSums>> {
        let (slab, paths) = (self.dates * B, self.paths);
        let (k, df) = (plan.spec.strike, plan.df_step);
        let d = d as usize;
        Ok(self
            .m
            .par_chunks(slab)
            .zip(self.v.par_chunks_mut(B))
            .enumerate()
            .map(|(b, (s, vb))| {
                let row = &s[d * B..(d + 1) * B];
                let n = (paths - b * B).min(B);
                let mut sums = RegressionSums::default();
                for p in 0..n {
                    let y = vb[p] * df;
                    vb[p] = y;
                    let sp = plan.price_at(row[p]);
                    if plan.spec.payoff(sp) > 0.0 {
                        sums.push(sp / k, y);
                    }
                }
                sums
            })
            .collect())
    }

    fn exercise(&mut self, plan: &LsmPlan, d: u32, beta: &[f64; LSM_BASIS]) -> Result<()> {
        let (slab, paths) = (self.dates * B, self.paths);
        let k = plan.spec.strike;
        let d = d as usize;
        self.m
            .par_chunks(slab)
            .zip(self.v.par_chunks_mut(B))
            .enumerate()
            .for_each(|(b, (s, vb))| {
                let row = &s[d * B..(d + 1) * B];
                for p in 0..(paths - b * B).min(B) {
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
        Ok(self
            .v
            .par_chunks(B)
            .enumerate()
            .map(|(b, vb)| {
                let (mut sy, mut syy) = (0.0f64, 0.0f64);
                for &v in &vb[..self.valid(b)] {
                    let y = v * df;
                    sy += y;
                    syy += y * y;
                }
                [sy, syy]
            })
            .collect())
    }
}

/// Prices one American option by Longstaff-Schwartz (see
/// [`kiln_core::finance::american::lsm`]): `mc.paths` paths of the seed's stream `option`,
/// the option's `exercise_dates` as the time steps. Bitwise equal to the CUDA engine.
pub fn price_american(spec: &AmericanSpec, mc: &McParams, option: u32) -> Result<PriceResult> {
    let plan = LsmPlan::new(spec, mc, option)?;
    let mut engine = CpuLsm::new(&plan)?;
    run_lsm(&plan, &mut engine)
}

/// Prices many options; option `i` uses stream index `first_option + i`. One at a time
/// (each in parallel), so one path matrix is held at a time. An invalid option is an error
/// in its slot.
pub fn price_american_portfolio(
    specs: &[AmericanSpec],
    mc: &McParams,
    first_option: u32,
) -> Vec<Result<PriceResult>> {
    kiln_core::storage::per_option("price_american", specs, first_option, |s, o| {
        price_american(s, mc, o)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::finance::OptionType;
    use kiln_core::philox::normal_f32;

    fn put() -> AmericanSpec {
        AmericanSpec {
            option_type: OptionType::Put,
            spot: 36.0,
            strike: 40.0,
            rate: 0.06,
            dividend: 0.0,
            volatility: 0.2,
            maturity: 1.0,
            exercise_dates: 7,
        }
    }

    /// The slabs hold the documented recurrence on the European engine's streams.
    #[test]
    fn paths_follow_the_documented_recurrence() {
        let mc = McParams {
            paths: 1500,
            seed: 42,
            ..McParams::default()
        };
        let plan = LsmPlan::new(&put(), &mc, 5).unwrap();
        let mut e = CpuLsm::new(&plan).unwrap();
        e.simulate(&plan).unwrap();
        for p in [0usize, 7, 1023, 1024, 1499] {
            let mut x = 0f32;
            for d in 0..7 {
                x += plan
                    .vol_sqrt_dt
                    .mul_add(normal_f32(42, 5, p as u32, d), plan.drift_dt);
                let got = e.m[(p / B) * 7 * B + d as usize * B + p % B];
                assert_eq!(got.to_bits(), exp_f32(x).to_bits(), "path {p} date {d}");
            }
            assert_eq!(e.v[p], put().payoff(36.0 * f64::from(exp_f32(x))));
        }
    }

    #[test]
    fn bits_do_not_depend_on_threads() {
        let mc = McParams {
            paths: 3 * 1024 + 77,
            seed: 9,
            ..McParams::default()
        };
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let two = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let a = one.install(|| price_american(&put(), &mc, 0)).unwrap();
        let b = two.install(|| price_american(&put(), &mc, 0)).unwrap();
        assert_eq!(a.price.to_bits(), b.price.to_bits());
        assert_eq!(a.std_error.to_bits(), b.std_error.to_bits());
        // a Bermudan put is worth at least its European counterpart, minus noise
        assert!(a.price > 3.5 && a.price < 4.6, "{a:?}");
    }

    #[test]
    fn one_date_is_the_european_estimator() {
        // at the money, so exercising now (worth 0) does not win
        let spec = AmericanSpec {
            spot: 40.0,
            exercise_dates: 1,
            ..put()
        };
        let mc = McParams {
            paths: 20_000,
            seed: 3,
            ..McParams::default()
        };
        let r = price_american(&spec, &mc, 0).unwrap();
        let eu = spec.european_price();
        assert!((r.price - eu).abs() < 4.0 * r.std_error, "{r:?} vs {eu}");
    }
}
