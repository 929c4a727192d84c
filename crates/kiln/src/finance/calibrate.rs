//! Heston calibration through the runtime: the five parameters fitted to a surface of
//! European quotes by Levenberg-Marquardt on the semi-analytic price and its exact gradient
//! (kiln-core's `finance::calibrate`, whose docs give the method), through the runtime's
//! finance engine. The surface is priced on the CPU's cores whatever the runtime's device:
//! there is no GPU pricer of a surface (both engines take `FinanceBackend`'s default).

use kiln_core::finance::calibrate::{CalibrationOptions, HestonFit, HestonQuote};
use kiln_core::finance::heston::HestonParams;
use kiln_core::Result;

use crate::Runtime;

impl Runtime {
    /// Fits Heston's `kappa, theta, xi, rho, v0` to `quotes` from `start` (see
    /// [`kiln_core::finance::calibrate`]). The fit reports the RMSE in vol points, every
    /// quote's errors, the iterations, why it stopped and the Feller flag. Errors name the bad
    /// quote, start or bound.
    pub fn calibrate_heston(
        &self,
        quotes: &[HestonQuote],
        start: &HestonParams,
        options: &CalibrationOptions,
    ) -> Result<HestonFit> {
        let _range = crate::profiler().host_range("calibrate heston");
        self.finance_backend().calibrate_heston(quotes, start, options)
    }
}
