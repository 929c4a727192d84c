//! Monte Carlo under geometric Brownian motion with dividend yield: exact log-steps in f32,
//! payoffs and every sum in f64.
//!
//! Reproducibility: the samples of an option are cut into canonical blocks of
//! [`BLOCK_SAMPLES`]; each block's sums are accumulated in sample order, and the blocks are
//! added in block order. Random numbers are addressed by `(seed, option, sample, step)`
//! ([`kiln_core::philox`]). So the result is bitwise the same for any number of threads, any
//! task granularity, and any split of the blocks into chunks ([`simulate_blocks`] on
//! consecutive ranges, concatenated, then [`finish`]).
//!
//! Control variates, with `beta = Cov(Y, C) / Var(C)` estimated from the same samples:
//! European: `df S_T` (mean `S e^{-qT}`); arithmetic Asian: the geometric-average payoff
//! (its closed form); geometric Asian: `df` times the arithmetic mean of the fixings (the
//! mean of the forwards); barriers: the vanilla payoff (Black-Scholes-Merton).
//! Pathwise delta and vega for European and Asian styles; none for barriers.
//!
//! The blocks' sums, the control means and [`finish`] are kiln-core's
//! ([`kiln_core::finance::blocks`]), shared with the CUDA engine; this module simulates the
//! paths.

use std::ops::Range;

use kiln_core::finance::{
    block_count, control_mean, finish, BlockSums, McParams, OptionSpec, PathParams, PriceResult, QmcPlan,
    Rng, Style, BLOCK_SAMPLES,
};
use kiln_core::{Error, Result};
use rayon::prelude::*;

use super::paths::{run_group, AsianArithmetic, AsianGeometric, Barrier, Consts, European, PathKind, LANES};
use super::qmc::{run_group_qmc, Scratch};

fn consts(spec: &OptionSpec, pp: &PathParams) -> Consts {
    let (r, q, v) = (spec.rate, spec.dividend, spec.volatility);
    Consts {
        kind: spec.option_type,
        spot: spec.spot,
        strike: spec.strike,
        df: pp.discount,
        sigma: v,
        vega_drift: r - q + 0.5 * v * v,
        maturity: spec.maturity,
        dt: pp.dt,
        n: f64::from(pp.steps),
        control_mean: control_mean(spec, pp),
        log_barrier: pp.log_barrier,
        cross_k: pp.cross_k,
        vega_drift_dt: ((r - q + 0.5 * v * v) * pp.dt) as f32,
    }
}

/// One canonical block's sums. The path arithmetic uses `mul_add`, which is one instruction
/// only where the code is compiled for FMA: on x86-64 `multiversion` runs a copy compiled
/// with AVX2 + FMA when the processor has them (the default target has neither, and would
/// call libm's `fmaf` a step). Both copies give the same bits: `mul_add` is exactly rounded
/// either way, and nothing else changes.
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
fn block_sums<K: PathKind, const ANTI: bool>(
    kind: &K,
    pp: &PathParams,
    option: u32,
    block: u64,
    plan: Option<&QmcPlan>,
) -> BlockSums {
    block_sums_body::<K, ANTI>(kind, pp, option, block, plan)
}

#[inline(always)]
fn block_sums_body<K: PathKind, const ANTI: bool>(
    kind: &K,
    pp: &PathParams,
    option: u32,
    block: u64,
    plan: Option<&QmcPlan>,
) -> BlockSums {
    let start = block * BLOCK_SAMPLES;
    let end = (start + BLOCK_SAMPLES).min(pp.samples);
    let mut sums = BlockSums::default();
    let mut s = start;
    let mut scratch = plan.map(|p| Scratch::new(p.dims));
    while s < end {
        // Sample indices are < 2^32 (McParams::validate), so this is exact.
        let out = match (plan, scratch.as_mut()) {
            (Some(p), Some(sc)) => run_group_qmc::<K, ANTI>(kind, pp, p, s, end, sc),
            _ => run_group::<K, ANTI>(kind, pp, option, s as u32),
        };
        let valid = ((end - s) as usize).min(LANES);
        for o in &out[..valid] {
            sums.push(o.y, o.c, o.delta, o.vega);
        }
        s += LANES as u64;
    }
    sums
}

fn blocks_of<K: PathKind>(
    kind: &K,
    pp: &PathParams,
    option: u32,
    blocks: Range<u64>,
    anti: bool,
    min_len: usize,
    plan: Option<&QmcPlan>,
) -> Vec<BlockSums> {
    // usize ranges are indexed (order-preserving collect); block counts fit (samples < 2^33).
    let iter = (blocks.start as usize..blocks.end as usize)
        .into_par_iter()
        .with_min_len(min_len);
    if anti {
        iter.map(|b| block_sums::<K, true>(kind, pp, option, b as u64, plan))
            .collect()
    } else {
        iter.map(|b| block_sums::<K, false>(kind, pp, option, b as u64, plan))
            .collect()
    }
}

/// Tasks of roughly 2^18 path-steps: enough to amortise rayon, small enough to balance.
fn default_min_len(pp: &PathParams) -> usize {
    let per_block = BLOCK_SAMPLES * u64::from(pp.steps);
    ((1u64 << 18) / per_block.max(1)).max(1) as usize
}

pub(crate) fn simulate_blocks_with(
    spec: &OptionSpec,
    mc: &McParams,
    option: u32,
    blocks: Range<u64>,
    min_len: Option<usize>,
) -> Result<Vec<BlockSums>> {
    let pp = PathParams::new(spec, mc)?;
    let total = block_count(mc);
    if blocks.start > blocks.end || blocks.end > total {
        return Err(Error::invalid(
            "monte_carlo",
            format!("block range {blocks:?} is outside the run's {total} blocks"),
        ));
    }
    let k = consts(spec, &pp);
    let m = min_len.unwrap_or_else(|| default_min_len(&pp));
    let a = mc.antithetic;
    let plan = match mc.rng {
        Rng::Philox => None,
        Rng::Sobol { .. } => Some(QmcPlan::new(&pp, mc)?),
    };
    let p = plan.as_ref();
    Ok(match spec.style {
        Style::European => blocks_of(&European(k), &pp, option, blocks, a, m, p),
        Style::AsianArithmetic => blocks_of(&AsianArithmetic(k), &pp, option, blocks, a, m, p),
        Style::AsianGeometric => blocks_of(&AsianGeometric(k), &pp, option, blocks, a, m, p),
        Style::BarrierUpOut => blocks_of(&Barrier::<true, false>(k), &pp, option, blocks, a, m, p),
        Style::BarrierUpIn => blocks_of(&Barrier::<true, true>(k), &pp, option, blocks, a, m, p),
        Style::BarrierDownOut => blocks_of(&Barrier::<false, false>(k), &pp, option, blocks, a, m, p),
        Style::BarrierDownIn => blocks_of(&Barrier::<false, true>(k), &pp, option, blocks, a, m, p),
    })
}

/// Simulates the canonical blocks `blocks` (of [`block_count`]) of option `option` (its
/// stream index; see [`kiln_core::philox`]), in parallel, returning one [`BlockSums`] per
/// block in order. Chunks of a run concatenated in order and passed to [`finish`] give the
/// same bits as [`price_mc`].
pub fn simulate_blocks(
    spec: &OptionSpec,
    mc: &McParams,
    option: u32,
    blocks: Range<u64>,
) -> Result<Vec<BlockSums>> {
    simulate_blocks_with(spec, mc, option, blocks, None)
}

pub(crate) fn price_mc_with(
    spec: &OptionSpec,
    mc: &McParams,
    option: u32,
    min_len: Option<usize>,
) -> Result<PriceResult> {
    let blocks = simulate_blocks_with(spec, mc, option, 0..block_count(mc), min_len)?;
    finish(spec, mc, &blocks)
}

/// Prices one option by Monte Carlo; `option` is its stream index (an option priced alone
/// with index `i` gets the same bits as the `i`-th option of [`price_portfolio`]).
pub fn price_mc(spec: &OptionSpec, mc: &McParams, option: u32) -> Result<PriceResult> {
    price_mc_with(spec, mc, option, None)
}

/// Prices many options with the same run parameters; option `i` uses stream index `i`.
/// One result per option: an invalid option is an error in its slot, not for the batch.
pub fn price_portfolio(specs: &[OptionSpec], mc: &McParams) -> Vec<Result<PriceResult>> {
    price_portfolio_from(specs, mc, 0)
}

/// [`price_portfolio`] for a slice of a larger book: option `i` uses stream index
/// `first_option + i`, so a book priced in pieces (the executor's chunks, the CLI's groups)
/// gets the bits of the whole. Options run in parallel, as in one piece.
pub fn price_portfolio_from(
    specs: &[OptionSpec],
    mc: &McParams,
    first_option: u32,
) -> Vec<Result<PriceResult>> {
    specs
        .par_iter()
        .enumerate()
        .map(|(i, s)| match u32::try_from(i as u64 + u64::from(first_option)) {
            Ok(o) => price_mc(s, mc, o),
            Err(_) => Err(Error::invalid(
                "price_portfolio",
                format!("option {i}: stream index past 2^32"),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::finance::OptionType;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    #[test]
    fn bits_do_not_depend_on_threads_or_task_size() {
        let spec = OptionSpec::european(OptionType::Put, 100.0, 105.0, 0.02, 0.01, 0.3, 1.0).with_style(
            Style::AsianArithmetic,
            Some(6),
            None,
        );
        let mc = McParams {
            paths: 5 * BLOCK_SAMPLES + 37, // a partial last block and a partial lane group
            steps: 6,
            seed: 5,
            antithetic: true,
            control_variate: true,
            fast_math: false,
            rng: kiln_core::finance::Rng::Philox,
        };
        let reference = pool(1).install(|| price_mc_with(&spec, &mc, 2, Some(1))).unwrap();
        for (threads, min_len) in [(1, 3), (2, 1), (2, 2), (2, 7)] {
            let r = pool(threads)
                .install(|| price_mc_with(&spec, &mc, 2, Some(min_len)))
                .unwrap();
            assert_eq!(
                r.price.to_bits(),
                reference.price.to_bits(),
                "{threads} threads, {min_len}"
            );
            assert_eq!(r.std_error.to_bits(), reference.std_error.to_bits());
            assert_eq!(r.delta, reference.delta);
            assert_eq!(r.vega, reference.vega);
        }
    }
}
