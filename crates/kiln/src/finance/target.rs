//! Time to accuracy: price until the estimated standard error meets a target, doubling the
//! paths of the options that have not met it yet. A desk asks for a price to a given error,
//! soonest; with randomised Sobol points the error falls much faster than `1/sqrt(paths)` on
//! smooth payoffs, so the same target takes far fewer paths than with Philox.
//!
//! Each round prices the options still short of the target at more paths than the previous
//! round (a fresh run: the result is exactly `Runtime::price` at that path count, so it is
//! reproducible from the reported paths alone). An option keeps its stream index, so the
//! bits do not depend on which other options were still running.
//!
//! How many more: the error's observed size predicts the paths still needed, assuming it
//! falls as `paths^-1/2` for Philox (the central limit theorem; the standard error itself is
//! estimated to ~20% with 16 replicates) and as `paths^-1` for Sobol (randomised QMC on a
//! smooth payoff; slower on a kinked one, which then takes more rounds, never more paths
//! than needed). The factor is rounded up to a power of two and kept within 2..=16, so a
//! round never shrinks and one noisy estimate cannot send the run far past the target.
//! Doubling every round (the first version) spent four of five rounds of a typical Sobol
//! run on path counts too small to meet the target (issue 20's time to accuracy).

use std::time::Instant;

use kiln_core::finance::{McParams, OptionSpec, PriceResult};
use kiln_core::{Error, Result};

use super::Method;
use crate::Runtime;

/// The standard error to reach.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum TargetSe {
    /// `std_error <= value`.
    Absolute(f64),
    /// `std_error <= value * |price|`.
    Relative(f64),
}

impl TargetSe {
    /// Whether `r` meets the target.
    pub fn met(&self, r: &PriceResult) -> bool {
        match *self {
            TargetSe::Absolute(t) => r.std_error <= t,
            TargetSe::Relative(t) => r.std_error <= t * r.price.abs(),
        }
    }
}

impl std::str::FromStr for TargetSe {
    type Err = Error;
    /// `1e-4` (absolute), `1e-4rel` (relative: a fraction of the price) or `0.01%` (relative,
    /// in percent).
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim();
        let (num, rel, scale) = if let Some(n) = t.strip_suffix("rel") {
            (n, true, 1.0)
        } else if let Some(n) = t.strip_suffix('%') {
            (n, true, 0.01)
        } else {
            (t, false, 1.0)
        };
        let v: f64 = num.trim().parse().map_err(|_| {
            Error::invalid(
                "target_se",
                format!("`{s}` is not a number; use e.g. 1e-4 (absolute), 1e-4rel or 0.01% (relative)"),
            )
        })?;
        let v = v * scale;
        if !(v.is_finite() && v > 0.0) {
            return Err(Error::invalid(
                "target_se",
                format!("`{s}`: the target must be > 0"),
            ));
        }
        Ok(if rel {
            TargetSe::Relative(v)
        } else {
            TargetSe::Absolute(v)
        })
    }
}

/// What a time-to-accuracy run did.
#[derive(Debug)]
pub struct TargetRun {
    /// One result per option: the last round's price (which meets the target unless the
    /// path cap stopped it; see `met`).
    pub results: Vec<Result<PriceResult>>,
    /// Whether each option met the target.
    pub met: Vec<bool>,
    /// Rounds run (each growing the paths of the options still short; module docs).
    pub rounds: u32,
    /// Wall time of every round together, seconds.
    pub seconds: f64,
    /// Path-steps simulated over every round.
    pub path_steps: u64,
}

impl Runtime {
    /// Prices `specs` by Monte Carlo (stream indices from `first_option`, as
    /// [`price_batch`](Self::price_batch)) starting from `mc.paths`, growing the paths of
    /// the options whose standard error misses `target` (by the predicted factor, 2 to 16,
    /// module docs), until every option meets it or the next round would pass `max_paths`.
    pub fn price_to_target(
        &self,
        specs: &[OptionSpec],
        mc: &McParams,
        target: TargetSe,
        max_paths: u64,
        first_option: u32,
    ) -> TargetRun {
        let t0 = Instant::now();
        let mut results: Vec<Option<Result<PriceResult>>> = (0..specs.len()).map(|_| None).collect();
        let mut met = vec![false; specs.len()];
        let mut pending: Vec<usize> = (0..specs.len()).collect();
        let mut run = *mc;
        let mut rounds = 0u32;
        let mut path_steps = 0u64;
        while !pending.is_empty() {
            rounds += 1;
            // consecutive runs of pending options keep their stream indices
            let mut next = Vec::new();
            let mut i = 0;
            while i < pending.len() {
                let mut j = i + 1;
                while j < pending.len() && pending[j] == pending[j - 1] + 1 {
                    j += 1;
                }
                let idx = &pending[i..j];
                let batch: Vec<OptionSpec> = idx.iter().map(|&k| specs[k]).collect();
                let first = first_option.saturating_add(idx[0] as u32);
                let res = self.price_batch(&batch, Method::MonteCarlo, &run, first);
                for (&k, r) in idx.iter().zip(res) {
                    if let Ok(p) = &r {
                        let steps = specs[k].path_steps(run.steps);
                        path_steps = path_steps.saturating_add(p.paths_used.saturating_mul(u64::from(steps)));
                    }
                    let done = match &r {
                        Ok(p) => {
                            met[k] = target.met(p);
                            met[k]
                        }
                        Err(_) => true,
                    };
                    if !done {
                        next.push(k);
                    }
                    results[k] = Some(r);
                }
                i = j;
            }
            if next.is_empty() {
                break;
            }
            let factor = next
                .iter()
                .filter_map(|&k| results[k].as_ref().and_then(|r| r.as_ref().ok()))
                .map(|p| growth(p, target, mc))
                .fold(2u64, u64::max);
            // the largest power-of-two multiple up to `factor` that fits max_paths and validates
            let mut mult = factor;
            let grown = loop {
                let paths = run.paths.saturating_mul(mult);
                if mult < 2 {
                    break None;
                }
                if paths <= max_paths && (McParams { paths, ..run }).validate().is_ok() {
                    break Some(paths);
                }
                mult /= 2;
            };
            let Some(paths) = grown else {
                break;
            };
            run.paths = paths;
            pending = next;
        }
        TargetRun {
            results: results
                .into_iter()
                .map(|r| r.unwrap_or_else(|| Err(Error::invalid("price_to_target", "option not priced"))))
                .collect(),
            met,
            rounds,
            seconds: t0.elapsed().as_secs_f64(),
            path_steps,
        }
    }
}

/// The power-of-two factor (2 to 16) by which the paths of a run whose result is `p` should
/// grow to meet `target` (module docs).
fn growth(p: &PriceResult, target: TargetSe, mc: &McParams) -> u64 {
    let goal = match target {
        TargetSe::Absolute(t) => t,
        TargetSe::Relative(t) => t * p.price.abs(),
    };
    let ratio = p.std_error / goal;
    if !(ratio.is_finite() && ratio > 1.0) {
        return 2;
    }
    let need = match mc.rng {
        kiln_core::finance::Rng::Philox => ratio * ratio,
        kiln_core::finance::Rng::Sobol { .. } => ratio,
    };
    let mut f = 2u64;
    while (f as f64) < need && f < 16 {
        f *= 2;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_absolute_and_relative() {
        assert_eq!("1e-4".parse::<TargetSe>().unwrap(), TargetSe::Absolute(1e-4));
        assert_eq!("2e-3rel".parse::<TargetSe>().unwrap(), TargetSe::Relative(2e-3));
        assert_eq!("0.5%".parse::<TargetSe>().unwrap(), TargetSe::Relative(0.005));
        assert!("abc".parse::<TargetSe>().is_err());
        assert!("-1".parse::<TargetSe>().is_err());
        assert!("0%".parse::<TargetSe>().is_err());
    }

    fn result(price: f64, se: f64) -> PriceResult {
        PriceResult {
            std_error: se,
            ..PriceResult::exact(price)
        }
    }

    #[test]
    fn growth_follows_each_generators_rate() {
        let philox = McParams::default();
        let sobol = McParams {
            rng: kiln_core::finance::Rng::Sobol { replicates: 16 },
            ..McParams::default()
        };
        let t = TargetSe::Absolute(1e-3);
        // 3x the target: Philox needs 9x the paths (16 after rounding), Sobol 3x (4)
        assert_eq!(growth(&result(10.0, 3e-3), t, &philox), 16);
        assert_eq!(growth(&result(10.0, 3e-3), t, &sobol), 4);
        // barely short: at least a doubling; far short: at most 16x
        assert_eq!(growth(&result(10.0, 1.01e-3), t, &philox), 2);
        assert_eq!(growth(&result(10.0, 1.0), t, &sobol), 16);
        // relative targets scale with the price; a non-finite error still grows
        assert_eq!(growth(&result(2.0, 8e-3), TargetSe::Relative(1e-3), &sobol), 4);
        assert_eq!(growth(&result(2.0, f64::NAN), t, &sobol), 2);
    }
}
