//! Monte Carlo under Heston on the CPU: Andersen's QE paths
//! ([`kiln_core::finance::heston::qe`]), in parallel with rayon, the numeric reference for
//! the CUDA kernel (`kernels/heston.cu`).
//!
//! The path and its payoff are kiln-core's [`heston_sample`] (f32 path, f64 payoff), the
//! function the kernel mirrors operation by operation. This module only orders the work:
//! samples are cut into canonical blocks of [`BLOCK_SAMPLES`], each block's [`BlockSums`]
//! accumulated in sample order, blocks in parallel and returned in block order, and
//! kiln-core's [`finish_heston`] turns them into the price. So a price does not depend on the
//! number of threads or the task size, and the GPU (which sums the same blocks in the same
//! order) gets the same bits.
//!
//! The control variate (`McParams::control_variate`) is the discounted terminal price (mean
//! `spot e^{-qT}`) for both styles. No pathwise Greeks: the result's `delta` and `vega` are
//! `None`.

use std::ops::Range;

use kiln_core::finance::heston::{finish_heston, heston_sample, HestonPathParams, HestonSpec};
use kiln_core::finance::{block_count, BlockSums, McParams, PriceResult, BLOCK_SAMPLES};
use kiln_core::{Error, Result};
use rayon::prelude::*;

/// One canonical block's sums, samples in order. Compiled a second time with AVX2 + FMA on
/// x86-64 (`mul_add` is then one instruction; the bits are the same either way).
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
fn heston_block(pp: &HestonPathParams, option: u32, block: u64) -> BlockSums {
    let start = block * BLOCK_SAMPLES;
    let end = (start + BLOCK_SAMPLES).min(pp.samples);
    let mut sums = BlockSums::default();
    for s in start..end {
        // Sample indices are < 2^32 (McParams::validate), so this is exact.
        let (y, c) = heston_sample(pp, option, s as u32);
        sums.push(y, c, 0.0, 0.0);
    }
    sums
}

/// Simulates the canonical blocks `blocks` (of [`block_count`]) of a Heston option with
/// stream index `option`, in parallel, one [`BlockSums`] per block in order. Consecutive
/// ranges concatenated and passed to [`finish_heston`] give the bits of [`price_heston_mc`].
pub fn simulate_heston_blocks(
    spec: &HestonSpec,
    mc: &McParams,
    option: u32,
    blocks: Range<u64>,
) -> Result<Vec<BlockSums>> {
    let pp = HestonPathParams::new(spec, mc)?;
    let total = block_count(mc);
    if blocks.start > blocks.end || blocks.end > total {
        return Err(Error::invalid(
            "heston",
            format!("block range {blocks:?} is outside the run's {total} blocks"),
        ));
    }
    // Tasks of roughly 2^18 path-steps.
    let per_block = BLOCK_SAMPLES * u64::from(pp.steps());
    let min_len = ((1u64 << 18) / per_block.max(1)).max(1) as usize;
    Ok((blocks.start as usize..blocks.end as usize)
        .into_par_iter()
        .with_min_len(min_len)
        .map(|b| heston_block(&pp, option, b as u64))
        .collect())
}

/// Prices one Heston option by Monte Carlo; `option` is its stream index (the `i`-th option
/// of [`price_heston`] uses `i`).
pub fn price_heston_mc(spec: &HestonSpec, mc: &McParams, option: u32) -> Result<PriceResult> {
    let blocks = simulate_heston_blocks(spec, mc, option, 0..block_count(mc))?;
    finish_heston(&spec.option, mc, &blocks)
}

/// Prices many Heston options with the same run; option `i` uses stream index `i`. One
/// result per option: an invalid option is an error in its slot.
pub fn price_heston(specs: &[HestonSpec], mc: &McParams) -> Vec<Result<PriceResult>> {
    specs
        .par_iter()
        .enumerate()
        .map(|(i, s)| match u32::try_from(i) {
            Ok(o) => price_heston_mc(s, mc, o),
            Err(_) => Err(Error::invalid(
                "price_heston",
                format!("option {i}: stream index past 2^32"),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::finance::heston::HestonParams;
    use kiln_core::finance::{OptionSpec, OptionType, Style};

    #[test]
    fn bits_do_not_depend_on_threads_or_chunks() {
        let spec = HestonSpec {
            option: OptionSpec::european(OptionType::Put, 100.0, 105.0, 0.02, 0.01, 0.2, 1.0).with_style(
                Style::AsianArithmetic,
                Some(4),
                None,
            ),
            heston: HestonParams {
                kappa: 2.0,
                theta: 0.04,
                xi: 0.9,
                rho: -0.8,
                v0: 0.03,
            },
        };
        let mc = McParams {
            paths: 3 * BLOCK_SAMPLES + 17,
            steps: 6, // 4 fixings x 2 steps
            control_variate: true,
            ..McParams::default()
        };
        let pool = |n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap();
        let one = pool(1).install(|| price_heston_mc(&spec, &mc, 3)).unwrap();
        let two = pool(2).install(|| price_heston_mc(&spec, &mc, 3)).unwrap();
        assert_eq!(one.price.to_bits(), two.price.to_bits());
        assert_eq!(one.std_error.to_bits(), two.std_error.to_bits());
        let mut chunks = simulate_heston_blocks(&spec, &mc, 3, 0..1).unwrap();
        chunks.extend(simulate_heston_blocks(&spec, &mc, 3, 1..4).unwrap());
        let r = finish_heston(&spec.option, &mc, &chunks).unwrap();
        assert_eq!(r.price.to_bits(), one.price.to_bits());
        assert_eq!((r.delta, r.vega, r.paths_used), (None, None, mc.paths));
        assert!(simulate_heston_blocks(&spec, &mc, 3, 0..5).is_err());
    }
}
