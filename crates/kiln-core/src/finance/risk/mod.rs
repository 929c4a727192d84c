//! Portfolio risk by full revaluation: the scenario vocabulary ([`Shock`], [`Scenario`],
//! [`ScenarioSet`]), what a scenario does to each kind of option ([`shock`]), the loss
//! measures on a P&L vector ([`measures`]: value at risk and expected shortfall in the
//! one convention `docs/finance.md` states) and scenarios drawn from a covariance of the
//! shocks ([`simulate`]).
//!
//! The revaluation itself (base and shocked prices, analytic where a closed form exists,
//! Monte Carlo with common random numbers where not, the GPU grid) is the facade's
//! `Runtime::risk`; everything here needs no device.

pub mod measures;
pub mod scenario;
pub mod shock;
pub mod simulate;

pub use measures::{expected_shortfall, loss_measures, pairwise_sum, quantile_linear, LossMeasure};
pub use scenario::{Scenario, ScenarioSet, Shock, SpotShift, ALL_UNDERLYINGS};
pub use shock::{shock_american, shock_assets, shock_basket, shock_heston, shock_plain, shock_rainbow};
pub use simulate::{cholesky_psd, simulate, Factor, FactorKind};
