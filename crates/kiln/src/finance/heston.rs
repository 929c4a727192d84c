//! Heston pricing through the runtime: Monte Carlo (Andersen's QE scheme) on the GPU when
//! the runtime has one, else on the CPU, with the same bits on both (kiln-core's
//! `finance::heston::qe` is the path both run); the semi-analytic European price is
//! [`HestonSpec::price_analytic`] (kiln-core, CPU).

use kiln_core::finance::heston::HestonSpec;
use kiln_core::finance::{McParams, PriceResult};
use kiln_core::Result;
use kiln_cpu::finance as cpu;

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
        let opts = kiln_cuda::GpuMcOptions {
            first_option,
            ..kiln_cuda::GpuMcOptions::default()
        };
        match self.cuda() {
            Some(gpu) => match gpu.price_heston_gpu_with(specs, mc, &opts) {
                Ok(v) => v,
                Err(e) => super::every_slot("price_heston", e, specs.len()),
            },
            // each option's blocks run in parallel, so options go one after another
            None => super::per_option("price_heston", specs, first_option, |s, option| {
                cpu::price_heston_mc(s, mc, option)
            }),
        }
    }
}
