//! Implied volatility of a book through the runtime's finance engine: kiln-cuda's
//! grouped solve (`SolveImpliedVol`) when the runtime has a GPU, kiln-core's solver on
//! rayon's pool otherwise. Both run the
//! same "Let's Be Rational" operations in f64; the GPU's `exp`, `log` and `pow` may differ
//! from the host's libm by an ulp, so the two agree to what an ulp of rounding in the inputs
//! allows: volatilities to a few ulp (more where the price is that sensitive), the same
//! reasons except for a price within rounding of its intrinsic value or bound.

use kiln_core::finance::implied::{NoVolatility, Quote};
use kiln_core::Result;

use crate::Runtime;

impl Runtime {
    /// The implied volatility of every quote of a book, in order: `Ok(sigma)` or the quote's
    /// [`NoVolatility`] reason. On a GPU runtime the book is solved there in chunks (of
    /// 2^22 quotes), and the outer error is a device failure; on the CPU it is kiln-core's
    /// `implied_volatility_book` and never fails.
    pub fn implied_volatility_book(
        &self,
        quotes: &[Quote],
    ) -> Result<Vec<std::result::Result<f64, NoVolatility>>> {
        let _range = crate::profiler().host_range("implied volatility book");
        self.finance_backend().implied_volatility_book(quotes)
    }
}
