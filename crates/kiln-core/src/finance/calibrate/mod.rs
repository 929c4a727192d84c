//! Heston calibration: the five parameters `v0, theta, rho, kappa, xi` fitted to a surface
//! of European quotes (prices or implied volatilities, with weights) by Levenberg-Marquardt
//! on the semi-analytic price with its exact gradient ([`calibrate_heston`]).
//!
//! - [`pricer`]: every quote's price and gradient on one shared Gauss-Legendre quadrature
//!   (the characteristic function once per maturity and node).
//! - [`lm`]: the optimiser (Nielsen's damping update, bounds by projection, four stopping
//!   rules).
//!
//! Residuals ([`Target`]): `Price` fits `w_i (P_i(p) - P_i^mkt)`; `Vol` fits the implied-vol
//! difference `w_i (sigma(P_i(p)) - sigma_i^mkt)` exactly, with the Jacobian by the chain
//! rule `d sigma / dp = (dP / dp) / vega(sigma(P_i(p)))` (Black-Scholes vega at the model's
//! own implied vol). Where a model price has no implied vol (at or below its intrinsic
//! value, far from any fit) that quote's residual falls back to `w_i (P_i - P_i^mkt) /
//! vega(sigma_i^mkt)`, the first-order version of the same quantity.
//!
//! The report ([`HestonFit`]) gives the RMSE in vol points (100 x the implied-vol
//! difference, model price's implied vol against the quote's, both from kiln's implied-vol
//! solver), the price RMSE, every quote's errors, iterations, why it stopped and whether
//! the Feller condition `2 kappa theta >= xi^2` holds.
//!
//! The surface is priced on the CPU's cores (rayon over quotes); there is no GPU pricer.

mod dual;
mod fit;
pub mod lm;
pub mod pricer;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_dax;

pub use fit::{
    calibrate_heston, option_type, quote_problems, CalibrationOptions, HestonFit, HestonQuote, QuoteFit,
    QuoteKind, QuoteProblem, Target, DEFAULT_START,
};
pub use lm::{LmOptions, Stop};
pub use pricer::{Contract, Quadrature, SurfacePricer};
