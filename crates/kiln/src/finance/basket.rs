//! Basket options through the runtime: the geometric basket's closed form (kiln-core, CPU),
//! and Monte Carlo on the CPU, or on the GPU when the runtime has one (Philox draws), with
//! the same bits on both (kiln-core's `finance::basket::mc` is the path both run;
//! `tests/basket_gpu.rs` checks the GPU's samples and sums against it).

use kiln_core::finance::basket::BasketSpec;
use kiln_core::finance::{McParams, PriceResult};
use kiln_core::Result;
use kiln_cpu::finance as cpu;

use super::Method;
use crate::Runtime;

impl Runtime {
    /// Prices basket options; option `i` uses Monte Carlo stream index `i`. One result per
    /// option: an invalid option (bad field, a correlation matrix that is not positive
    /// semi-definite, an arithmetic basket under [`Method::Analytic`], a Sobol run) is an
    /// error in its slot. On a GPU, a device failure is an error in every slot.
    ///
    /// [`Method::Analytic`]: the geometric basket's closed form (Black's formula on the
    /// lognormal `G`). [`Method::MonteCarlo`]: one exact step to maturity per path;
    /// `mc.control_variate` uses the geometric basket option (exact for a geometric basket),
    /// `mc.antithetic` mirrors the normals; `mc.steps` and `mc.fast_math` do not apply.
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
        let opts = kiln_cuda::GpuMcOptions {
            first_option,
            ..kiln_cuda::GpuMcOptions::default()
        };
        // Sobol baskets: the CPU engine (the kernel draws Philox normals only)
        match self.cuda().filter(|_| mc.rng == kiln_core::finance::Rng::Philox) {
            Some(gpu) => match gpu.price_basket_gpu_with(specs, mc, &opts) {
                Ok(v) => v,
                Err(e) => super::every_slot("price_basket", e, specs.len()),
            },
            // each option's blocks run in parallel, so options go one after another
            None => super::per_option("price_basket", specs, first_option, |s, option| {
                cpu::price_basket_mc(s, mc, option)
            }),
        }
    }
}
