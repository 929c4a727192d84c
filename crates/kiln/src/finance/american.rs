//! American options through the runtime: Longstaff-Schwartz Monte Carlo on the runtime's
//! finance engine, the GPU's or the CPU's (the same bits either way: kiln-core's
//! `finance::american::lsm` is the contract both engines implement), and the binomial tree
//! of the same option (exercise on its dates; Broadie-Detemple smoothing, two step counts
//! averaged) as the closed-form-like reference, always on the CPU. American rainbows (a call or
//! put on the max or min of several assets) are priced by Longstaff-Schwartz on the CPU
//! engine (kiln-core's `finance::american::rainbow` is the contract); a GPU runtime refuses
//! them. American barriers are priced by Longstaff-Schwartz on either engine (kiln-core's
//! `finance::american::lsm_barrier`), the same bits.

use kiln_core::finance::{McParams, PriceResult};
use kiln_core::storage::McStreams;
use kiln_core::Result;

use crate::Runtime;

pub use kiln_core::finance::american::{
    american_barrier_binomial, american_barrier_continuous, american_binomial, american_continuous,
    binomial_crr, AmericanBarrierSpec, AmericanRainbowSpec, AmericanSpec, MAX_RAINBOW_ASSETS,
};
pub use kiln_core::finance::basket::BasketAsset;
pub use kiln_core::finance::rainbow::Extreme;

/// Tree steps [`Runtime::price_american_tree`] uses when asked for the default (accurate to
/// about `1e-4` of the strike on usual terms; well under a second an option).
pub const DEFAULT_TREE_STEPS: u32 = 2000;

impl Runtime {
    /// Prices American options by Longstaff-Schwartz; option `i` uses Philox stream index
    /// `i`. Paths and seed come from `mc`; each option's time steps are its exercise dates
    /// (`mc.steps` is not used); antithetic and control variates and Sobol points are
    /// refused (an error in the slot). The price is the in-sample estimator (biased
    /// slightly low; a Bermudan price with `exercise_dates` dates). One result per option.
    pub fn price_american(&self, specs: &[AmericanSpec], mc: &McParams) -> Vec<Result<PriceResult>> {
        self.price_american_batch(specs, mc, 0)
    }

    /// [`price_american`](Self::price_american) for a batch of a larger book that starts at
    /// stream index `first_option` (option `i` uses `first_option + i`).
    pub fn price_american_batch(
        &self,
        specs: &[AmericanSpec],
        mc: &McParams,
        first_option: u32,
    ) -> Vec<Result<PriceResult>> {
        let _range = crate::profiler().host_range("price american");
        self.finance_backend()
            .price_american(specs, mc, McStreams::From(first_option))
            .unwrap_or_else(|e| super::every_slot("price_american", e, specs.len()))
    }

    /// Prices American barrier options by Longstaff-Schwartz on the runtime's finance engine
    /// (kiln-core's `finance::american::lsm_barrier`: the barrier watched on the exercise
    /// dates with Broadie-Glasserman-Kou's correction), the GPU's or the CPU's, the same bits
    /// either way; option `i` uses Philox stream index `first_option + i`, the same paths as
    /// [`price_american`](Self::price_american). One result per option.
    pub fn price_american_barrier_batch(
        &self,
        specs: &[AmericanBarrierSpec],
        mc: &McParams,
        first_option: u32,
    ) -> Vec<Result<PriceResult>> {
        let _range = crate::profiler().host_range("price american barrier");
        self.finance_backend()
            .price_american_barrier(specs, mc, McStreams::From(first_option))
            .unwrap_or_else(|e| super::every_slot("price_american_barrier", e, specs.len()))
    }

    /// Prices American (Bermudan) rainbows by Longstaff-Schwartz on the CPU engine (kiln-core's
    /// `finance::american::rainbow`: the basket's paths one step a date, a basis of
    /// polynomials in the sorted prices); option `i` uses Philox stream index
    /// `first_option + i` of the basket stream. Paths and seed come from `mc`; the time steps
    /// are each option's exercise dates; antithetic and control variates and Sobol points
    /// are refused (an error in the slot), as is a bad option (the error names the field and
    /// asset). A runtime on a GPU refuses each option with an error saying so. In-sample
    /// estimator, biased slightly low. One result per option.
    pub fn price_american_rainbow_batch(
        &self,
        specs: &[AmericanRainbowSpec],
        mc: &McParams,
        first_option: u32,
    ) -> Vec<Result<PriceResult>> {
        let _range = crate::profiler().host_range("price american rainbow");
        self.finance_backend()
            .price_american_rainbow(specs, mc, McStreams::From(first_option))
            .unwrap_or_else(|e| super::every_slot("price_american_rainbow", e, specs.len()))
    }

    /// Prices American barrier options by the tree on the CPU: exercisable on their dates
    /// ([`american_barrier_binomial`]) or, with `continuous`, at any time
    /// ([`american_barrier_continuous`]); about `steps` steps.
    pub fn price_american_barrier_tree(
        &self,
        specs: &[AmericanBarrierSpec],
        steps: u32,
        continuous: bool,
    ) -> Vec<Result<PriceResult>> {
        specs
            .iter()
            .map(|s| {
                let v = if continuous {
                    american_barrier_continuous(s, steps)
                } else {
                    american_barrier_binomial(s, steps)
                };
                v.map(PriceResult::exact)
            })
            .collect()
    }

    /// Prices American options, exercisable on their `exercise_dates` dates as Monte Carlo
    /// prices them, by the binomial tree with about `steps` steps ([`american_binomial`];
    /// [`DEFAULT_TREE_STEPS`] is a good choice; [`american_continuous`] prices continuous
    /// exercise), on the CPU:
    /// the `--method analytic` counterpart of [`price_american`](Self::price_american).
    pub fn price_american_tree(&self, specs: &[AmericanSpec], steps: u32) -> Vec<Result<PriceResult>> {
        specs
            .iter()
            .map(|s| american_binomial(s, steps).map(PriceResult::exact))
            .collect()
    }
}
