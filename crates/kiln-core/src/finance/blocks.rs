//! The reduction both Monte Carlo engines share: canonical blocks of [`BLOCK_SAMPLES`]
//! samples, their sums ([`BlockSums`]), the control variate's known mean
//! ([`control_mean`]) and the finishing math that turns the sums into a price
//! ([`finish`]).
//!
//! Reproducibility rests on the summation order: each block's sums are accumulated in sample
//! order, and the blocks are added in block order from zero. The CPU engine (kiln-cpu) and
//! the CUDA kernels (kiln-cuda) both follow it and both call these functions, so a price is
//! the same bits whichever engine simulated its paths.

use super::analytic::{bsm, geometric_asian};
use super::{McParams, OptionSpec, PathParams, PriceResult, Rng, Style};
use crate::error::{Error, Result};

/// Samples in one canonical block (the unit of summation order; a multiple of the CPU
/// engine's lane count and of a warp's samples).
pub const BLOCK_SAMPLES: u64 = 1024;

/// Sums over the samples of one block (or, after [`BlockSums::add`], of several). The
/// control `c` is centred on its known mean.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct BlockSums {
    /// Samples.
    pub n: u64,
    /// Sum of discounted payoffs `y`.
    pub y: f64,
    /// Sum of `y^2`.
    pub yy: f64,
    /// Sum of centred controls `c`.
    pub c: f64,
    /// Sum of `c^2`.
    pub cc: f64,
    /// Sum of `y c`.
    pub yc: f64,
    /// Sum of pathwise deltas.
    pub delta: f64,
    /// Sum of pathwise vegas.
    pub vega: f64,
}

impl BlockSums {
    /// Adds one sample: its discounted payoff `y`, centred control `c` and pathwise `delta`
    /// and `vega` (0 where the style has none). Samples go in sample order.
    #[inline(always)]
    pub fn push(&mut self, y: f64, c: f64, delta: f64, vega: f64) {
        self.n += 1;
        self.y += y;
        self.yy += y * y;
        self.c += c;
        self.cc += c * c;
        self.yc += y * c;
        self.delta += delta;
        self.vega += vega;
    }

    /// Adds `other`'s sums to these (kiln adds blocks in block order).
    pub fn add(&mut self, other: &BlockSums) {
        self.n += other.n;
        self.y += other.y;
        self.yy += other.yy;
        self.c += other.c;
        self.cc += other.cc;
        self.yc += other.yc;
        self.delta += other.delta;
        self.vega += other.vega;
    }
}

/// Canonical blocks of a run: `ceil(samples / BLOCK_SAMPLES)`.
pub fn block_count(mc: &McParams) -> u64 {
    mc.samples().div_ceil(BLOCK_SAMPLES)
}

/// The control variate's known mean for `spec` (the discounted forward for European, the
/// geometric Asian closed form for arithmetic Asian, the mean of the forwards for geometric
/// Asian, the vanilla BSM price for barriers). Both engines take it from here, so they use
/// the same bits.
pub fn control_mean(spec: &OptionSpec, pp: &PathParams) -> f64 {
    let (s, k, r, q, v, t) = (
        spec.spot,
        spec.strike,
        spec.rate,
        spec.dividend,
        spec.volatility,
        spec.maturity,
    );
    let n = pp.steps;
    match spec.style {
        Style::European => s * (-q * t).exp(),
        Style::AsianArithmetic => geometric_asian(spec.option_type, s, k, r, q, v, t, n),
        Style::AsianGeometric => {
            let growth: f64 = (1..=n).map(|i| ((r - q) * pp.dt * f64::from(i)).exp()).sum();
            pp.discount * s * growth / f64::from(n)
        }
        _ => bsm(spec.option_type, s, k, r, q, v, t).price,
    }
}

/// Turns the sums of every block of a run (in block order) into a price, standard error and
/// 95% interval, applying the control variate if `mc.control_variate`. A Philox run may pass
/// any partition of its blocks into consecutive sums (the GPU passes one total); a Sobol run
/// passes every block, which are added replicate by replicate (in block order) and finished
/// by [`finish_replicates`].
pub fn finish(spec: &OptionSpec, mc: &McParams, blocks: &[BlockSums]) -> Result<PriceResult> {
    if let Rng::Sobol { replicates } = mc.rng {
        let per = (mc.points_per_replicate() / BLOCK_SAMPLES) as usize;
        if blocks.len() != per * replicates as usize {
            return Err(Error::invalid(
                "monte_carlo",
                format!(
                    "a sobol run of {replicates} replicates x {per} blocks got {} blocks: pass every block, in order",
                    blocks.len()
                ),
            ));
        }
        let reps: Vec<BlockSums> = blocks
            .chunks(per.max(1))
            .map(|c| {
                let mut t = BlockSums::default();
                for b in c {
                    t.add(b);
                }
                t
            })
            .collect();
        return finish_replicates(spec, mc, &reps);
    }
    let mut t = BlockSums::default();
    for b in blocks {
        t.add(b);
    }
    if t.n != mc.samples() {
        return Err(Error::invalid(
            "monte_carlo",
            format!(
                "the blocks hold {} samples, the run has {}: pass every block, in order",
                t.n,
                mc.samples()
            ),
        ));
    }
    let n = t.n as f64;
    let (ybar, cbar) = (t.y / n, t.c / n);
    let var_y = (t.yy - n * ybar * ybar) / (n - 1.0);
    let var_c = (t.cc - n * cbar * cbar) / (n - 1.0);
    let cov = (t.yc - n * ybar * cbar) / (n - 1.0);
    let (price, var) = if mc.control_variate && var_c > 0.0 {
        let beta = cov / var_c;
        (ybar - beta * cbar, var_y - beta * cov)
    } else {
        (ybar, var_y)
    };
    let std_error = (var.max(0.0) / n).sqrt();
    let greeks = !spec.style.is_barrier();
    Ok(PriceResult {
        price,
        std_error,
        ci95: (price - 1.96 * std_error, price + 1.96 * std_error),
        paths_used: mc.paths_used(),
        delta: greeks.then(|| t.delta / n),
        gamma: None,
        vega: greeks.then(|| t.vega / n),
        theta: None,
        rho: None,
    })
}

/// Finishes a Sobol run from each replicate's sums (replicate order, each the sum of its
/// blocks in block order). The control variate's coefficient is estimated from all the
/// samples together; each replicate's (controlled) mean is then one independent estimate,
/// the price is their mean and the standard error their standard deviation over `sqrt(R)`.
pub fn finish_replicates(spec: &OptionSpec, mc: &McParams, reps: &[BlockSums]) -> Result<PriceResult> {
    let Rng::Sobol { replicates } = mc.rng else {
        return Err(Error::invalid(
            "monte_carlo",
            "finish_replicates needs a sobol run",
        ));
    };
    let mut t = BlockSums::default();
    for r in reps {
        t.add(r);
    }
    if reps.len() != replicates as usize || t.n != mc.samples() || replicates < 2 {
        return Err(Error::invalid(
            "monte_carlo",
            format!(
                "{} replicate sums of {} samples; the run has {replicates} replicates of {} samples",
                reps.len(),
                t.n,
                mc.samples()
            ),
        ));
    }
    let n = t.n as f64;
    let (ybar, cbar) = (t.y / n, t.c / n);
    let var_c = (t.cc - n * cbar * cbar) / (n - 1.0);
    let cov = (t.yc - n * ybar * cbar) / (n - 1.0);
    let beta = if mc.control_variate && var_c > 0.0 {
        cov / var_c
    } else {
        0.0
    };
    let est: Vec<f64> = reps
        .iter()
        .map(|r| {
            let m = r.n as f64;
            r.y / m - beta * (r.c / m)
        })
        .collect();
    let rn = f64::from(replicates);
    let price = est.iter().sum::<f64>() / rn;
    let ss: f64 = est.iter().map(|e| (e - price) * (e - price)).sum();
    let std_error = (ss / (rn * (rn - 1.0))).sqrt();
    let greeks = !spec.style.is_barrier();
    Ok(PriceResult {
        price,
        std_error,
        ci95: (price - 1.96 * std_error, price + 1.96 * std_error),
        paths_used: mc.paths_used(),
        delta: greeks.then(|| t.delta / n),
        gamma: None,
        vega: greeks.then(|| t.vega / n),
        theta: None,
        rho: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finance::OptionType;

    fn run(samples: u64, cv: bool) -> McParams {
        McParams {
            paths: samples,
            steps: 4,
            seed: 1,
            antithetic: false,
            control_variate: cv,
            fast_math: false,
            rng: Rng::Philox,
        }
    }

    fn sums(samples: &[(f64, f64)]) -> BlockSums {
        let mut s = BlockSums::default();
        for &(y, c) in samples {
            s.push(y, c, 2.0 * y, 3.0 * y);
        }
        s
    }

    #[test]
    fn finish_is_the_sample_mean_and_error_of_every_block_in_order() {
        let spec = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0);
        let (a, b) = (sums(&[(1.0, 0.5), (3.0, -0.5)]), sums(&[(5.0, 1.0), (7.0, -1.0)]));
        let r = finish(&spec, &run(4, false), &[a, b]).unwrap();
        // mean 4, sample variance (9 + 1 + 1 + 9) / 3
        assert_eq!(r.price, 4.0);
        assert_eq!(r.std_error, (20.0f64 / 3.0 / 4.0).sqrt());
        assert_eq!((r.delta, r.vega), (Some(8.0), Some(12.0)));
        assert_eq!(r.ci95, (4.0 - 1.96 * r.std_error, 4.0 + 1.96 * r.std_error));
        // a block left out, or one too many, is an error rather than a wrong price
        let err = finish(&spec, &run(4, false), &[a]).unwrap_err().to_string();
        assert!(err.contains("every block"), "{err}");
        assert!(finish(&spec, &run(4, false), &[a, b, a]).is_err());
        // barriers carry no pathwise Greeks
        let barrier = spec.with_style(Style::BarrierUpOut, None, Some(150.0));
        assert_eq!(finish(&barrier, &run(4, false), &[a, b]).unwrap().delta, None);
    }

    #[test]
    fn a_perfect_control_removes_the_variance() {
        let spec = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0);
        // y = 10 + 2 c: the control explains all of y, and its mean (0) fixes the price at 10
        let s = sums(&[(8.0, -1.0), (12.0, 1.0), (14.0, 2.0), (6.0, -2.0), (11.0, 0.5)]);
        let r = finish(&spec, &run(5, true), &[s]).unwrap();
        assert!((r.price - 10.0).abs() < 1e-12, "{}", r.price);
        assert!(r.std_error < 1e-7, "{}", r.std_error);
        let plain = finish(&spec, &run(5, false), &[s]).unwrap();
        assert_eq!(plain.price, 51.0 / 5.0);
        assert!(plain.std_error > 1.0);
    }

    #[test]
    fn control_means_are_the_closed_forms() {
        let euro = OptionSpec::european(OptionType::Put, 100.0, 95.0, 0.03, 0.01, 0.25, 2.0);
        let mc = run(4096, true);
        let pp = PathParams::new(&euro, &mc).unwrap();
        assert_eq!(control_mean(&euro, &pp), 100.0 * (-0.01f64 * 2.0).exp());
        let arith = euro.with_style(Style::AsianArithmetic, Some(6), None);
        let pp = PathParams::new(&arith, &mc).unwrap();
        let geo = geometric_asian(OptionType::Put, 100.0, 95.0, 0.03, 0.01, 0.25, 2.0, 6);
        assert_eq!(control_mean(&arith, &pp).to_bits(), geo.to_bits());
        let barrier = euro.with_style(Style::BarrierDownOut, None, Some(80.0));
        let pp = PathParams::new(&barrier, &mc).unwrap();
        let vanilla = bsm(OptionType::Put, 100.0, 95.0, 0.03, 0.01, 0.25, 2.0).price;
        assert_eq!(control_mean(&barrier, &pp).to_bits(), vanilla.to_bits());
        assert_eq!(block_count(&run(BLOCK_SAMPLES + 1, false)), 2);
        assert_eq!(block_count(&run(BLOCK_SAMPLES, false)), 1);
    }

    #[test]
    fn sobol_runs_finish_from_the_spread_of_their_replicates() {
        let spec = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0);
        let mc = McParams {
            rng: Rng::Sobol { replicates: 3 },
            ..run(5000, false)
        };
        // 5000 samples over 3 replicates: 1667 each, rounded up to 2 blocks of 1024
        assert_eq!((mc.points_per_replicate(), mc.samples()), (2048, 6144));
        assert_eq!(block_count(&mc), 6);
        let blk = |y: f64| {
            let mut b = BlockSums::default();
            for _ in 0..BLOCK_SAMPLES {
                b.push(y, 0.0, 0.0, 0.0);
            }
            b
        };
        // replicate means 1, 2, 6: price 3, se = sqrt(((4 + 1 + 9) / 2) / 3)
        let blocks = [blk(1.0), blk(1.0), blk(1.0), blk(3.0), blk(6.0), blk(6.0)];
        let r = finish(&spec, &mc, &blocks).unwrap();
        assert!((r.price - 3.0).abs() < 1e-12, "{}", r.price);
        assert!(
            (r.std_error - (7.0f64 / 3.0).sqrt()).abs() < 1e-12,
            "{}",
            r.std_error
        );
        assert!(finish(&spec, &mc, &blocks[..5]).is_err());
        let reps: Vec<BlockSums> = blocks
            .chunks(2)
            .map(|c| {
                let mut t = c[0];
                t.add(&c[1]);
                t
            })
            .collect();
        assert_eq!(finish_replicates(&spec, &mc, &reps).unwrap(), r);
        assert!(McParams {
            rng: Rng::Sobol { replicates: 1 },
            ..mc
        }
        .validate()
        .is_err());
    }
}
