//! Heston pricing through the runtime: Monte Carlo (Andersen's QE scheme) on the runtime's
//! finance engine ([`Runtime::finance_backend`]), with the same bits on the GPU and the CPU
//! (kiln-core's `finance::heston::qe` is the path both run); the semi-analytic European
//! price is [`HestonSpec::price_analytic`] (kiln-core, CPU).

use kiln_core::finance::heston::HestonSpec;
use kiln_core::finance::{McParams, PriceResult};
use kiln_core::storage::McStreams;
use kiln_core::Result;

use crate::Runtime;

impl Runtime {
    /// Prices Heston options by Monte Carlo; option `i` uses stream index `i`. One result per
    /// option: an invalid option (or a run the Heston engine cannot do: Sobol, antithetic
    /// variates) is an error in its slot. On a GPU, a device failure is an error in every
    /// slot. `mc.fast_math` does not apply (Heston paths are always exact);
    /// `mc.control_variate` uses the discounted terminal price.
    pub fn price_heston(&self, specs: &[HestonSpec], mc: &McParams) -> Vec<Result<PriceResult>> {
        self.price_heston_batch(specs, mc, 0)
    }

    /// [`price_heston`](Self::price_heston) for a batch of a larger book that starts at
    /// stream index `first_option` (option `i` uses `first_option + i`): pricing a book batch
    /// by batch gives the bits of pricing it whole.
    pub fn price_heston_batch(
        &self,
        specs: &[HestonSpec],
        mc: &McParams,
        first_option: u32,
    ) -> Vec<Result<PriceResult>> {
        let _range = crate::profiler().host_range("price heston");
        // a device runs the batch in one engine call; the CPU prices the options one after
        // another, each option's blocks in parallel
        self.finance_backend()
            .price_heston(specs, mc, McStreams::From(first_option))
            .unwrap_or_else(|e| super::every_slot("price_heston", e, specs.len()))
    }
}
