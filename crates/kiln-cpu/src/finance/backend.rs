//! The CPU's finance engines behind kiln-core's [`FinanceBackend`]: each method calls the
//! engine function of this crate the facade called before the interface existed, so every
//! bit and every error is that function's. Batches at consecutive streams price the
//! Black-Scholes styles in parallel over the options and the Heston, basket and American
//! options one after another (each option's blocks, or each American option's paths, run
//! in parallel); explicit streams price the options in parallel (Americans in turn).

use rayon::prelude::*;

use kiln_core::finance::american::{AmericanBarrierSpec, AmericanRainbowSpec, AmericanSpec};
use kiln_core::finance::basket::BasketSpec;
use kiln_core::finance::heston::HestonSpec;
use kiln_core::finance::implied::{implied_volatility_book, NoVolatility, Quote};
use kiln_core::finance::{BlockSums, McParams, OptionSpec};
use kiln_core::storage::{per_option, BsGridBook, FinanceBackend, McBatch, McStreams, ShockGrid};
use kiln_core::{Device, Error, Result};

use super::{
    price_american, price_american_barrier, price_american_barrier_portfolio, price_american_portfolio,
    price_american_rainbow, price_american_rainbow_portfolio, price_basket_mc, price_heston_mc, price_mc,
    price_portfolio_from, simulate_blocks,
};

/// The CPU's finance engines (module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuFinance;

/// `f(spec, stream)` for every option in parallel, option `i` on `streams[i]`.
fn par_streams<S: Sync>(
    specs: &[S],
    streams: &[u32],
    f: impl Fn(&S, u32) -> Result<kiln_core::finance::PriceResult> + Sync + Send,
) -> McBatch {
    Ok(specs.par_iter().zip(streams).map(|(s, &o)| f(s, o)).collect())
}

impl FinanceBackend for CpuFinance {
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn batches_calls(&self) -> bool {
        false
    }

    fn price_mc(&self, specs: &[OptionSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch {
        streams.check(specs.len(), "price")?;
        match streams {
            McStreams::From(first) => Ok(price_portfolio_from(specs, mc, first)),
            McStreams::Each(st) => par_streams(specs, st, |s, o| price_mc(s, mc, o)),
        }
    }

    fn mc_block_sums(
        &self,
        spec: &OptionSpec,
        mc: &McParams,
        option: u32,
        blocks: std::ops::Range<u64>,
    ) -> Result<Vec<BlockSums>> {
        simulate_blocks(spec, mc, option, blocks)
    }

    fn price_heston(&self, specs: &[HestonSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch {
        streams.check(specs.len(), "price_heston")?;
        match streams {
            McStreams::From(first) => Ok(per_option("price_heston", specs, first, |s, o| {
                price_heston_mc(s, mc, o)
            })),
            McStreams::Each(st) => par_streams(specs, st, |s, o| price_heston_mc(s, mc, o)),
        }
    }

    fn takes_basket(&self, _spec: &BasketSpec, _mc: &McParams) -> bool {
        true
    }

    fn price_basket(&self, specs: &[BasketSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch {
        streams.check(specs.len(), "price_basket")?;
        match streams {
            McStreams::From(first) => Ok(per_option("price_basket", specs, first, |s, o| {
                price_basket_mc(s, mc, o)
            })),
            McStreams::Each(st) => par_streams(specs, st, |s, o| price_basket_mc(s, mc, o)),
        }
    }

    fn price_american(&self, specs: &[AmericanSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch {
        streams.check(specs.len(), "price_american")?;
        match streams {
            McStreams::From(first) => Ok(price_american_portfolio(specs, mc, first)),
            McStreams::Each(st) => Ok(specs
                .iter()
                .zip(st)
                .map(|(s, &o)| price_american(s, mc, o))
                .collect()),
        }
    }

    fn price_american_barrier(
        &self,
        specs: &[AmericanBarrierSpec],
        mc: &McParams,
        streams: McStreams<'_>,
    ) -> McBatch {
        streams.check(specs.len(), "price_american_barrier")?;
        match streams {
            McStreams::From(first) => Ok(price_american_barrier_portfolio(specs, mc, first)),
            McStreams::Each(st) => Ok(specs
                .iter()
                .zip(st)
                .map(|(s, &o)| price_american_barrier(s, mc, o))
                .collect()),
        }
    }

    fn price_american_rainbow(
        &self,
        specs: &[AmericanRainbowSpec],
        mc: &McParams,
        streams: McStreams<'_>,
    ) -> McBatch {
        streams.check(specs.len(), "price_american_rainbow")?;
        match streams {
            McStreams::From(first) => Ok(price_american_rainbow_portfolio(specs, mc, first)),
            McStreams::Each(st) => Ok(specs
                .iter()
                .zip(st)
                .map(|(s, &o)| price_american_rainbow(s, mc, o))
                .collect()),
        }
    }

    fn has_risk_grid(&self) -> bool {
        false
    }

    fn risk_bs_grid(&self, _book: &BsGridBook<'_>, _grid: &ShockGrid<'_>) -> Result<Vec<f64>> {
        Err(Error::invalid(
            "risk_bs_grid",
            "the CPU has no risk grid kernel (has_risk_grid() is false); revalue each option \
             under each scenario instead, as Runtime::risk does on a CPU runtime",
        ))
    }

    fn implied_volatility_book(
        &self,
        quotes: &[Quote],
    ) -> Result<Vec<std::result::Result<f64, NoVolatility>>> {
        Ok(implied_volatility_book(quotes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::finance::{OptionType, Style};

    fn specs() -> Vec<OptionSpec> {
        (0..4)
            .map(|i| {
                OptionSpec::european(
                    OptionType::Call,
                    100.0,
                    90.0 + 5.0 * f64::from(i),
                    0.03,
                    0.0,
                    0.2,
                    0.5,
                )
                .with_style(Style::AsianArithmetic, Some(4), None)
            })
            .collect()
    }

    /// Explicit streams and a first stream give each option the engine function's bits at
    /// its index.
    #[test]
    fn streams_price_each_option_at_its_index() {
        let mc = McParams {
            paths: 3000,
            steps: 4,
            seed: 3,
            ..McParams::default()
        };
        let specs = specs();
        let from = CpuFinance.price_mc(&specs, &mc, McStreams::From(5)).unwrap();
        let each = CpuFinance
            .price_mc(&specs, &mc, McStreams::Each(&[5, 6, 7, 8]))
            .unwrap();
        for (i, (a, b)) in from.iter().zip(&each).enumerate() {
            let want = price_mc(&specs[i], &mc, 5 + i as u32).unwrap().price.to_bits();
            assert_eq!(a.as_ref().unwrap().price.to_bits(), want, "option {i}");
            assert_eq!(b.as_ref().unwrap().price.to_bits(), want, "option {i}");
        }
        assert!(CpuFinance.price_mc(&specs, &mc, McStreams::Each(&[1])).is_err());
        // block ranges finished over their concatenation: option 1's bits at stream 6
        let nb = kiln_core::finance::block_count(&mc);
        let mut sums = CpuFinance.mc_block_sums(&specs[1], &mc, 6, 0..1).unwrap();
        sums.extend(CpuFinance.mc_block_sums(&specs[1], &mc, 6, 1..nb).unwrap());
        let whole = kiln_core::finance::finish(&specs[1], &mc, &sums).unwrap();
        assert_eq!(whole.price.to_bits(), from[1].as_ref().unwrap().price.to_bits());
        assert!(CpuFinance.risk_bs_grid(&empty_book(), &empty_grid()).is_err());
    }

    fn empty_book() -> BsGridBook<'static> {
        BsGridBook {
            spot: &[],
            strike: &[],
            rate: &[],
            dividend: &[],
            vol: &[],
            maturity: &[],
            qty: &[],
            base: &[],
            put: &[],
            und: &[],
        }
    }

    fn empty_grid() -> ShockGrid<'static> {
        ShockGrid {
            spot_shift: &[],
            spot_abs: &[],
            vol_shift: &[],
            rate_shift: &[],
            n_und: 1,
            n_scen: 0,
        }
    }
}
