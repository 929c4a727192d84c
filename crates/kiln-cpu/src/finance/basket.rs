//! Basket options by Monte Carlo on the CPU, in parallel with rayon: the numeric reference
//! for the CUDA kernel (`kernels/basket.cu`).
//!
//! The path and its payoff are kiln-core's [`basket_sample`] (one f32 step to maturity,
//! f64 payoff), the function the kernel mirrors operation by operation. This module only
//! orders the work: samples are cut into canonical blocks of [`BLOCK_SAMPLES`], each
//! block's [`BlockSums`] accumulated in sample order, blocks in parallel and returned in
//! block order, and kiln-core's [`finish_basket`] turns them into the price. So a price
//! does not depend on the number of threads or the task size, and the GPU (which sums the
//! same blocks in the same order) gets the same bits.
//!
//! The control variate (`McParams::control_variate`) is the geometric basket option's
//! discounted payoff with its closed form as the mean; no Greeks.

use std::ops::Range;

use kiln_core::finance::basket::{basket_sample, finish_basket, BasketPathParams, BasketSpec};
use kiln_core::finance::{block_count, BlockSums, McParams, PriceResult, BLOCK_SAMPLES};
use kiln_core::{Error, Result};
use rayon::prelude::*;

/// One canonical block's sums, samples in order. Compiled a second time with AVX2 + FMA on
/// x86-64 (`mul_add` is then one instruction; the bits are the same either way).
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
fn basket_block(pp: &BasketPathParams, option: u32, block: u64) -> BlockSums {
    let start = block * BLOCK_SAMPLES;
    let end = (start + BLOCK_SAMPLES).min(pp.samples);
    let mut sums = BlockSums::default();
    for s in start..end {
        // Sample indices are < 2^32 (McParams::validate), so this is exact.
        let (y, c) = basket_sample(pp, option, s as u32);
        sums.push(y, c, 0.0, 0.0);
    }
    sums
}

/// Simulates the canonical blocks `blocks` (of [`block_count`]) of a basket option with
/// stream index `option`, in parallel, one [`BlockSums`] per block in order. Consecutive
/// ranges concatenated and passed to [`finish_basket`] give the bits of
/// [`price_basket_mc`].
pub fn simulate_basket_blocks(
    spec: &BasketSpec,
    mc: &McParams,
    option: u32,
    blocks: Range<u64>,
) -> Result<Vec<BlockSums>> {
    let pp = BasketPathParams::new(spec, mc)?;
    let total = block_count(mc);
    if blocks.start > blocks.end || blocks.end > total {
        return Err(Error::invalid(
            "basket",
            format!("block range {blocks:?} is outside the run's {total} blocks"),
        ));
    }
    // Tasks of roughly 2^18 multiply-adds (a path costs about N^2 / 2 + 10 N).
    let n = pp.n as u64;
    let per_block = BLOCK_SAMPLES * (n * (n + 1) / 2 + 10 * n);
    let min_len = ((1u64 << 18) / per_block.max(1)).max(1) as usize;
    Ok((blocks.start as usize..blocks.end as usize)
        .into_par_iter()
        .with_min_len(min_len)
        .map(|b| basket_block(&pp, option, b as u64))
        .collect())
}

/// Prices one basket option by Monte Carlo; `option` is its stream index (the `i`-th
/// option of [`price_basket`] uses `i`).
pub fn price_basket_mc(spec: &BasketSpec, mc: &McParams, option: u32) -> Result<PriceResult> {
    let blocks = simulate_basket_blocks(spec, mc, option, 0..block_count(mc))?;
    finish_basket(spec, mc, &blocks)
}

/// Prices many basket options with the same run; option `i` uses stream index `i`. One
/// result per option: an invalid option is an error in its slot.
pub fn price_basket(specs: &[BasketSpec], mc: &McParams) -> Vec<Result<PriceResult>> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| match u32::try_from(i) {
            Ok(o) => price_basket_mc(s, mc, o),
            Err(_) => Err(Error::invalid(
                "price_basket",
                format!("option {i}: stream index past 2^32"),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::finance::basket::{BasketAsset, BasketAverage};
    use kiln_core::finance::OptionType;

    #[test]
    fn bits_do_not_depend_on_threads_or_chunks() {
        let spec = BasketSpec {
            kind: OptionType::Call,
            strike: 100.0,
            rate: 0.02,
            maturity: 0.75,
            average: BasketAverage::Arithmetic,
            assets: vec![
                BasketAsset::new(100.0, 0.2, 0.0, 0.3),
                BasketAsset::new(50.0, 0.35, 0.01, 0.8),
                BasketAsset::new(120.0, 0.15, 0.02, 0.2),
            ],
            correlation: vec![1.0, 0.3, -0.2, 0.3, 1.0, 0.4, -0.2, 0.4, 1.0],
        };
        let mc = McParams {
            paths: 3 * BLOCK_SAMPLES + 17,
            control_variate: true,
            antithetic: true,
            ..McParams::default()
        };
        let pool = |n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap();
        let one = pool(1).install(|| price_basket_mc(&spec, &mc, 3)).unwrap();
        let two = pool(2).install(|| price_basket_mc(&spec, &mc, 3)).unwrap();
        assert_eq!(one.price.to_bits(), two.price.to_bits());
        assert_eq!(one.std_error.to_bits(), two.std_error.to_bits());
        let nb = block_count(&mc);
        let mut chunks = simulate_basket_blocks(&spec, &mc, 3, 0..1).unwrap();
        chunks.extend(simulate_basket_blocks(&spec, &mc, 3, 1..nb).unwrap());
        let r = finish_basket(&spec, &mc, &chunks).unwrap();
        assert_eq!(r.price.to_bits(), one.price.to_bits());
        assert_eq!((r.delta, r.vega, r.paths_used), (None, None, mc.paths_used()));
        assert!(simulate_basket_blocks(&spec, &mc, 3, 0..nb + 1).is_err());
    }
}
