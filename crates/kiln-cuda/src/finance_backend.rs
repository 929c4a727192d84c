//! The GPU's finance engines behind kiln-core's [`FinanceBackend`]: each method builds and
//! runs its engine's op ([`PriceMc`], [`McBlockRangeSums`], [`PriceHeston`],
//! [`PriceBasket`], [`PriceAmerican`], [`PriceAmericanBarrier`], [`RiskBsGrid`],
//! [`ImpliedVolBook`]) with the default chunking ([`GpuMcOptions::default`]), so every bit
//! is that op's. A batch at consecutive streams of the Black-Scholes styles, Heston or
//! baskets is one engine run (launches cut where the block sums pass `max_items`, which
//! changes no bit); American options, barriers included (under `KILN_GPU_PREVIEW=1`,
//! [`crate::preview`]; refused otherwise), run one Longstaff-Schwartz pass an option;
//! American rainbows are refused (the trait's default). The kernels take Philox
//! baskets of positive weights only ([`FinanceBackend::takes_basket`]); the caller prices
//! the rest on the CPU engine.

use kiln_core::finance::american::{AmericanBarrierSpec, AmericanSpec};
use kiln_core::finance::basket::BasketSpec;
use kiln_core::finance::heston::HestonSpec;
use kiln_core::finance::implied::{NoVolatility, Quote};
use kiln_core::finance::{BlockSums, McParams, OptionSpec, Rng};
use kiln_core::storage::{per_option, BsGridBook, FinanceBackend, McBatch, McStreams, ShockGrid};
use kiln_core::{Device, Error, Result};

use crate::ops::{
    ImpliedVolBook, McBlockRangeSums, PriceAmerican, PriceAmericanBarrier, PriceBasket, PriceHeston, PriceMc,
    RiskBsGrid,
};
use crate::{CudaBackend, GpuMcOptions};

/// At most this many (option, block) items a launch: the default chunking.
fn max_items() -> u64 {
    GpuMcOptions::default().max_items
}

impl FinanceBackend for CudaBackend {
    fn device(&self) -> Device {
        Device::Cuda(self.info().desc.ordinal)
    }

    fn batches_calls(&self) -> bool {
        true
    }

    fn price_mc(&self, specs: &[OptionSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch {
        self.run(PriceMc {
            specs,
            mc,
            streams,
            max_items: max_items(),
        })
    }

    fn mc_block_sums(
        &self,
        spec: &OptionSpec,
        mc: &McParams,
        option: u32,
        blocks: std::ops::Range<u64>,
    ) -> Result<Vec<BlockSums>> {
        self.run(McBlockRangeSums {
            spec,
            mc,
            option,
            blocks,
        })
    }

    fn price_heston(&self, specs: &[HestonSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch {
        self.run(PriceHeston {
            specs,
            mc,
            streams,
            max_items: max_items(),
        })
    }

    fn takes_basket(&self, spec: &BasketSpec, mc: &McParams) -> bool {
        mc.rng == Rng::Philox && spec.gpu_refusal().is_none()
    }

    fn price_basket(&self, specs: &[BasketSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch {
        self.run(PriceBasket {
            specs,
            mc,
            streams,
            max_items: max_items(),
        })
    }

    fn price_american(&self, specs: &[AmericanSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch {
        streams.check(specs.len(), "price_american")?;
        Ok(match streams {
            McStreams::From(first) => per_option("price_american", specs, first, |spec, option| {
                self.run(PriceAmerican { spec, mc, option })
            }),
            McStreams::Each(st) => specs
                .iter()
                .zip(st)
                .map(|(spec, &option)| self.run(PriceAmerican { spec, mc, option }))
                .collect(),
        })
    }

    fn price_american_barrier(
        &self,
        specs: &[AmericanBarrierSpec],
        mc: &McParams,
        streams: McStreams<'_>,
    ) -> McBatch {
        streams.check(specs.len(), "price_american_barrier")?;
        if !crate::preview::preview() {
            // not yet run on a GPU: refused as before, unless the preview is on
            return Ok(specs
                .iter()
                .map(|_| {
                    Err(Error::invalid(
                        "price_american_barrier",
                        "American barrier options by Longstaff-Schwartz on the GPU are a preview \
                         (KILN_GPU_PREVIEW=1) until their bitwise test has run on a GPU; use the cpu \
                         device, or the tree (the analytic method)",
                    ))
                })
                .collect());
        }
        Ok(match streams {
            McStreams::From(first) => per_option("price_american_barrier", specs, first, |spec, option| {
                self.run(PriceAmericanBarrier { spec, mc, option })
            }),
            McStreams::Each(st) => specs
                .iter()
                .zip(st)
                .map(|(spec, &option)| self.run(PriceAmericanBarrier { spec, mc, option }))
                .collect(),
        })
    }

    fn has_risk_grid(&self) -> bool {
        true
    }

    fn risk_bs_grid(&self, book: &BsGridBook<'_>, grid: &ShockGrid<'_>) -> Result<Vec<f64>> {
        self.run(RiskBsGrid { book, grid })
    }

    fn implied_volatility_book(
        &self,
        quotes: &[Quote],
    ) -> Result<Vec<std::result::Result<f64, NoVolatility>>> {
        self.run(ImpliedVolBook::new(quotes))
    }
}
