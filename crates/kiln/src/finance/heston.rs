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
        let _range = crate::profiler().host_range("price heston");
        match self.cuda() {
            Some(gpu) => match gpu.price_heston_gpu(specs, mc) {
                Ok(v) => v,
                Err(e) => {
                    let msg = e.to_string();
                    let mut v: Vec<Result<PriceResult>> = Vec::with_capacity(specs.len());
                    if !specs.is_empty() {
                        v.push(Err(e));
                    }
                    v.extend(
                        (1..specs.len()).map(|_| Err(kiln_core::Error::invalid("price_heston", msg.clone()))),
                    );
                    v
                }
            },
            None => cpu::price_heston(specs, mc),
        }
    }
}
