//! Basket options through the runtime: the closed forms (kiln-core, CPU: the geometric
//! basket, two-asset spreads, two-asset rainbows), and Monte Carlo on the runtime's finance
//! engine, the GPU's or the CPU's (the GPU takes Philox draws of positive weights; Sobol
//! runs, spreads and rainbows go to the CPU engine), with the same bits on both (kiln-core's `finance::basket::mc` is the path both run;
//! `tests/basket_gpu.rs` checks the GPU's samples and sums against it).

use kiln_core::finance::basket::BasketSpec;
use kiln_core::finance::{McParams, PriceResult};
use kiln_core::storage::{FinanceBackend, McStreams};
use kiln_core::Result;
use kiln_cpu::finance::CpuFinance;

use super::Method;
use crate::Runtime;

impl Runtime {
    /// Prices basket options; option `i` uses Monte Carlo stream index `i`. One result per
    /// option: an invalid option (bad field, a correlation matrix that is not positive
    /// semi-definite, a basket without a closed form under [`Method::Analytic`]) is an
    /// error in its slot. On a GPU, a device failure is an error in the slots it ran.
    ///
    /// [`Method::Analytic`]: kiln-core's `BasketSpec::price_analytic` (the geometric
    /// basket's Black formula, Bjerksund-Stensland for a two-asset spread, Stulz for the
    /// max or min of two assets). [`Method::MonteCarlo`]: one exact step to maturity per
    /// path; `mc.control_variate` uses the geometric basket option where every weight is
    /// `> 0` (exact for a geometric basket) and Bjerksund-Stensland's exercise rule for a
    /// two-asset spread; `mc.antithetic` mirrors the normals; `mc.steps` and `mc.fast_math`
    /// do not apply. Sobol runs, spreads (a weight `<= 0`) and rainbows run on the CPU
    /// engine even where the runtime has a GPU.
    pub fn price_basket(
        &self,
        specs: &[BasketSpec],
        mc: &McParams,
        method: Method,
    ) -> Vec<Result<PriceResult>> {
        self.price_basket_batch(specs, mc, method, 0)
    }

    /// [`price_basket`](Self::price_basket) for a batch of a larger book that starts at
    /// stream index `first_option` (option `i` uses `first_option + i`): pricing a book
    /// batch by batch gives the bits of pricing it whole.
    pub fn price_basket_batch(
        &self,
        specs: &[BasketSpec],
        mc: &McParams,
        method: Method,
        first_option: u32,
    ) -> Vec<Result<PriceResult>> {
        if method == Method::Analytic {
            return specs
                .iter()
                .map(|s| s.price_analytic().map(PriceResult::exact))
                .collect();
        }
        let _range = crate::profiler().host_range("price basket");
        let engine = self.finance_backend();
        // Options the engine refuses (BasketSpec::gpu_refusal, Sobol runs on a GPU) run on
        // the CPU engine, the rest on the runtime's, each run of consecutive options on its
        // own streams: the same bits as pricing the batch on either engine. On the CPU
        // engine each option's blocks run in parallel, so options go one after another.
        let mut out = Vec::with_capacity(specs.len());
        let mut start = 0;
        while start < specs.len() {
            let taken = engine.takes_basket(&specs[start], mc);
            let end = (start..specs.len())
                .find(|&i| engine.takes_basket(&specs[i], mc) != taken)
                .unwrap_or(specs.len());
            let run = &specs[start..end];
            let Ok(first) = u32::try_from(u64::from(first_option) + start as u64) else {
                let e = kiln_core::Error::invalid("price_basket", "stream index past 2^32");
                out.extend(super::every_slot("price_basket", e, run.len()));
                start = end;
                continue;
            };
            let by: &dyn FinanceBackend = if taken { engine } else { &CpuFinance };
            match by.price_basket(run, mc, McStreams::From(first)) {
                Ok(v) => out.extend(v),
                Err(e) => out.extend(super::every_slot("price_basket", e, run.len())),
            }
            start = end;
        }
        out
    }
}
