//! Implied volatility of European options under Black-Scholes and Black: the volatility
//! `sigma` at which the model price equals a quoted price, to the precision `f64` allows for
//! every moneyness and total volatility, with a typed reason ([`NoVolatility`]) for every
//! quote that has none.
//!
//! Method: Peter Jäckel's "Let's Be Rational" (Wilmott 2015; the 2013 code): a rational
//! guess on one of four branches of the normalised Black function and two third-order
//! Householder steps reach the attainable precision for any input. This module is a Rust
//! port of `py_lets_be_rational` (the pure-Python port of Jäckel's C code by Gammon Capital,
//! MIT licence, github.com/vollib/py_lets_be_rational), itself from Jäckel's source at
//! www.jaeckel.org/LetsBeRational.7z, whose licence asks that this notice be kept:
//!
//! ```text
//! Copyright © 2013-2014 Peter Jäckel.
//!
//! Permission to use, copy, modify, and distribute this software is freely granted,
//! provided that this notice is preserved.
//!
//! WARRANTY DISCLAIMER
//! The Software is provided "as is" without warranty of any kind, either express or implied,
//! including without limitation any implied warranties of condition, uninterrupted use,
//! merchantability, fitness for a particular purpose, or non-infringement.
//! ```
//!
//! Three forms, from the most to the least normalised:
//! - [`normalised_implied_volatility`]: `b = price / sqrt(F K)` (undiscounted), `x = ln(F/K)`;
//!   returns the total volatility `s = sigma sqrt(T)`.
//! - [`implied_black_volatility`]: Black's model on a forward `F` with an undiscounted price.
//! - [`implied_volatility`]: Black-Scholes-Merton on a spot with continuous rate `r` and
//!   dividend yield `q` (discounted price; `F = S e^{(r-q)T}`, discount `e^{-rT}`), the form
//!   of kiln's option CSV. [`implied_volatility_book`] solves a slice of [`Quote`]s in
//!   parallel (rayon, in chunks).
//!
//! Bounds: a call's price lies strictly between its intrinsic value `max(S e^{-qT} - K
//! e^{-rT}, 0)` and the discounted forward `S e^{-qT}`; a put's between `max(K e^{-rT} - S
//! e^{-qT}, 0)` and the discounted strike `K e^{-rT}`. A price at intrinsic (no time value)
//! has no unique volatility (every small enough one prices it in `f64`) and is refused as
//! [`NoVolatility::AtIntrinsic`]; so is a price a few ulp below it (the rounding of an
//! intrinsic value computed elsewhere) or whose time value is lost when it is moved to
//! forward terms. A price within that rounding of the upper bound is refused as at it.

mod lbr;
pub mod sample;
mod special;
#[cfg(test)]
mod tests;

use rayon::prelude::*;

use super::OptionType;

/// Why a quote has no implied volatility. Each names what to check or change.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum NoVolatility {
    /// An input is NaN or infinite.
    #[error("{field} = {value} is not a finite number; give a finite {field}")]
    NotFinite {
        /// The input's name (`price`, `spot`, `forward`, `strike`, `maturity`, `rate`,
        /// `dividend`, `x`).
        field: &'static str,
        /// Its value.
        value: f64,
    },
    /// An input that must be positive is zero or negative.
    #[error("{field} = {value}; it must be > 0")]
    NotPositive {
        /// The input's name (`price`, `spot`, `forward`, `strike` or `maturity`).
        field: &'static str,
        /// Its value.
        value: f64,
    },
    /// The forward `S e^{(r-q)T}` or the discount factor `e^{-rT}` over- or underflows.
    #[error(
        "the {what} = {value} is out of the range of f64 for these rate, dividend and maturity; \
         check their units (rates per year as decimals, maturity in years)"
    )]
    OutOfRange {
        /// `forward` or `discount factor`.
        what: &'static str,
        /// Its value (0 or infinity).
        value: f64,
    },
    /// The price is below the option's intrinsic value: no volatility reaches it.
    #[error(
        "price {price} is below the intrinsic value {intrinsic} (an arbitrage): no volatility \
         gives it; check the price, the option type, the rate and the dividend"
    )]
    BelowIntrinsic {
        /// The quoted price.
        price: f64,
        /// The intrinsic value (discounted like the price).
        intrinsic: f64,
    },
    /// The price equals the intrinsic value: no time value is left, so the volatility is 0
    /// in the limit and not determined by the quote.
    #[error(
        "price {price} equals the intrinsic value {intrinsic}: no time value is left (in f64), \
         so the quote does not determine a volatility"
    )]
    AtIntrinsic {
        /// The quoted price.
        price: f64,
        /// The intrinsic value (discounted like the price).
        intrinsic: f64,
    },
    /// The price is at or above the most any volatility gives: the discounted forward
    /// `S e^{-qT}` for a call, the discounted strike `K e^{-rT}` for a put.
    #[error(
        "price {price} is at or above the upper bound {bound} (the {bound_name}), which no finite \
         volatility reaches; check the price, the option type, the rate and the dividend"
    )]
    AboveUpperBound {
        /// The quoted price.
        price: f64,
        /// The bound (discounted like the price).
        bound: f64,
        /// What the bound is: `discounted forward` (call) or `discounted strike` (put), or
        /// `forward`/`strike` in the undiscounted forms.
        bound_name: &'static str,
    },
}

impl NoVolatility {
    /// A short stable name for files and Python: `not_finite`, `not_positive`,
    /// `out_of_range`, `below_intrinsic`, `at_intrinsic` or `above_upper_bound`.
    pub fn code(&self) -> &'static str {
        match self {
            NoVolatility::NotFinite { .. } => "not_finite",
            NoVolatility::NotPositive { .. } => "not_positive",
            NoVolatility::OutOfRange { .. } => "out_of_range",
            NoVolatility::BelowIntrinsic { .. } => "below_intrinsic",
            NoVolatility::AtIntrinsic { .. } => "at_intrinsic",
            NoVolatility::AboveUpperBound { .. } => "above_upper_bound",
        }
    }

    /// The variant's code in kiln's device kernels (`kernels/implied_vol.cu`): 1
    /// `not_finite`, 2 `not_positive`, 3 `out_of_range`, 4 `below_intrinsic`, 5
    /// `at_intrinsic`, 6 `above_upper_bound` (0 is a solved quote).
    pub fn index(&self) -> u8 {
        match self {
            NoVolatility::NotFinite { .. } => 1,
            NoVolatility::NotPositive { .. } => 2,
            NoVolatility::OutOfRange { .. } => 3,
            NoVolatility::BelowIntrinsic { .. } => 4,
            NoVolatility::AtIntrinsic { .. } => 5,
            NoVolatility::AboveUpperBound { .. } => 6,
        }
    }

    /// The reason of code `index` ([`Self::index`]) for `quote`, its fields computed from
    /// the quote as [`implied_volatility`] computes them: a kernel returns the code alone.
    /// `None` for 0 (solved) or an unknown code. Where the quote does not show the reason
    /// (a device that disagrees with the CPU on it), the fields fall back to the price.
    pub fn from_index(index: u8, quote: &Quote) -> Option<NoVolatility> {
        let q = quote;
        let fields = [
            ("price", q.price),
            ("spot", q.spot),
            ("strike", q.strike),
            ("maturity", q.maturity),
            ("rate", q.rate),
            ("dividend", q.dividend),
        ];
        Some(match index {
            1 => {
                let (field, value) = fields
                    .into_iter()
                    .find(|(_, v)| !v.is_finite())
                    .unwrap_or(fields[0]);
                NoVolatility::NotFinite { field, value }
            }
            2 => {
                let (field, value) = fields[..4]
                    .iter()
                    .copied()
                    .find(|(_, v)| *v <= 0.0)
                    .unwrap_or(fields[0]);
                NoVolatility::NotPositive { field, value }
            }
            3 => {
                let df = (-q.rate * q.maturity).exp();
                let forward = q.spot * ((q.rate - q.dividend) * q.maturity).exp();
                if df.is_finite() && df > 0.0 && !(forward.is_finite() && forward > 0.0) {
                    NoVolatility::OutOfRange {
                        what: "forward",
                        value: forward,
                    }
                } else {
                    NoVolatility::OutOfRange {
                        what: "discount factor",
                        value: df,
                    }
                }
            }
            4..=6 => {
                let (intrinsic, (bound, bound_name)) = discounted_bounds(q);
                let price = q.price;
                match index {
                    4 => NoVolatility::BelowIntrinsic { price, intrinsic },
                    5 => NoVolatility::AtIntrinsic { price, intrinsic },
                    _ => NoVolatility::AboveUpperBound {
                        price,
                        bound,
                        bound_name,
                    },
                }
            }
            _ => return None,
        })
    }

    /// The input field at fault where one is (`NotFinite`, `NotPositive`), else `price`
    /// (the bounds: the price is what does not fit) or `rate` (out of range).
    pub fn field(&self) -> &'static str {
        match self {
            NoVolatility::NotFinite { field, .. } | NoVolatility::NotPositive { field, .. } => field,
            NoVolatility::OutOfRange { .. } => "rate",
            _ => "price",
        }
    }
}

/// One European option quote in the form of kiln's option CSV: a discounted price on a spot
/// with continuous rate and dividend yield.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quote {
    /// Call or put.
    pub kind: OptionType,
    /// The quoted (discounted) price.
    pub price: f64,
    /// The spot price of the underlying.
    pub spot: f64,
    /// The strike.
    pub strike: f64,
    /// Years to expiry.
    pub maturity: f64,
    /// The continuously compounded risk-free rate per year.
    pub rate: f64,
    /// The continuous dividend yield per year.
    pub dividend: f64,
}

impl Quote {
    /// The implied volatility of this quote (see [`implied_volatility`]).
    #[inline]
    pub fn implied_volatility(&self) -> Result<f64, NoVolatility> {
        implied_volatility(
            self.price,
            self.spot,
            self.strike,
            self.maturity,
            self.rate,
            self.dividend,
            self.kind,
        )
    }
}

#[inline]
fn q_of(kind: OptionType) -> f64 {
    kind.sign()
}

#[inline]
fn finite(field: &'static str, value: f64) -> Result<(), NoVolatility> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(NoVolatility::NotFinite { field, value })
    }
}

#[inline]
fn positive(field: &'static str, value: f64) -> Result<(), NoVolatility> {
    finite(field, value)?;
    if value > 0.0 {
        Ok(())
    } else {
        Err(NoVolatility::NotPositive { field, value })
    }
}

/// A quote's intrinsic value and upper bound in its own (discounted) units, computed as
/// [`implied_volatility`] computes them.
fn discounted_bounds(q: &Quote) -> (f64, (f64, &'static str)) {
    let df = (-q.rate * q.maturity).exp();
    let spot_df = q.spot * (-q.dividend * q.maturity).exp();
    let strike_df = q.strike * df;
    let intrinsic = (q_of(q.kind) * (spot_df - strike_df)).max(0.0);
    let bound = match q.kind {
        OptionType::Call => (spot_df, "discounted forward"),
        OptionType::Put => (strike_df, "discounted strike"),
    };
    (intrinsic, bound)
}

/// `ln(F/K)`: of the ratio where it is a normal f64 (one rounding), else `ln F - ln K`
/// (forwards and strikes far apart, whose ratio over- or underflows).
#[inline]
fn log_moneyness(forward: f64, strike: f64) -> f64 {
    let ratio = forward / strike;
    if ratio.is_normal() {
        ratio.ln()
    } else {
        forward.ln() - strike.ln()
    }
}

/// The bounds of a price in the units it is quoted in: refuses a price below `intrinsic`
/// or at or above `bound`. A price within 4 ulp below the intrinsic value is taken as at it
/// (the rounding of a discounted intrinsic value computed elsewhere), not as an arbitrage.
#[inline]
fn check_bounds(
    price: f64,
    intrinsic: f64,
    bound: f64,
    bound_name: &'static str,
) -> Result<(), NoVolatility> {
    if price < intrinsic && intrinsic - price <= 4.0 * f64::EPSILON * intrinsic {
        return Err(NoVolatility::AtIntrinsic { price, intrinsic });
    }
    if price < intrinsic {
        return Err(NoVolatility::BelowIntrinsic { price, intrinsic });
    }
    if price >= bound {
        return Err(NoVolatility::AboveUpperBound {
            price,
            bound,
            bound_name,
        });
    }
    Ok(())
}

/// Solves in forward terms, after [`check_bounds`] on the quote as given: `fwd_price` is the
/// undiscounted price; `price`, `intrinsic`, `bound` and `bound_name` are what a refusal
/// reports (the quote's units). A price within rounding of a bound after the move to
/// forward terms is refused as at that bound.
#[inline]
#[allow(clippy::too_many_arguments)] // the quote in both units, kept apart for the reports
fn solve_forward(
    fwd_price: f64,
    forward: f64,
    strike: f64,
    maturity: f64,
    kind: OptionType,
    price: f64,
    intrinsic: f64,
    (bound, bound_name): (f64, &'static str),
) -> Result<f64, NoVolatility> {
    let at_intrinsic = NoVolatility::AtIntrinsic { price, intrinsic };
    let above = NoVolatility::AboveUpperBound {
        price,
        bound,
        bound_name,
    };
    let q = q_of(kind);
    let fwd_intrinsic = (q * (forward - strike)).max(0.0);
    let fwd_bound = match kind {
        OptionType::Call => forward,
        OptionType::Put => strike,
    };
    if fwd_price <= fwd_intrinsic {
        return Err(at_intrinsic);
    }
    if fwd_price >= fwd_bound {
        return Err(above);
    }
    let x = log_moneyness(forward, strike);
    let mut p = fwd_price;
    let mut q = q;
    // In the money: subtract the intrinsic value in price units (as the original does) and
    // solve for the out-of-the-money option of the other kind.
    if q * x > 0.0 {
        p = (p - fwd_intrinsic).max(0.0);
        q = -q;
    }
    let beta = p / (forward.sqrt() * strike.sqrt());
    match lbr::unchecked_normalised_implied_volatility(beta, x, q, lbr::MAXIMUM_ITERATIONS) {
        Some(s) if s > 0.0 => Ok(s / maturity.sqrt()),
        Some(_) => Err(at_intrinsic),
        None => Err(above),
    }
}

/// The Black-Scholes-Merton implied volatility of a European option: the `sigma` whose
/// price `e^{-rT} Black(F = S e^{(r-q)T}, K, sigma, T)` equals `price`.
///
/// `price` is discounted (what the option costs today), `rate` and `dividend` are
/// continuously compounded per year (any sign), `maturity` in years. Refuses, with the
/// reason: a non-finite input, a non-positive price, spot, strike or maturity, a forward or
/// discount factor out of `f64`'s range, and a price at or below the intrinsic value or at
/// or above the upper bound (see [`NoVolatility`]).
pub fn implied_volatility(
    price: f64,
    spot: f64,
    strike: f64,
    maturity: f64,
    rate: f64,
    dividend: f64,
    kind: OptionType,
) -> Result<f64, NoVolatility> {
    finite("price", price)?;
    finite("spot", spot)?;
    finite("strike", strike)?;
    finite("maturity", maturity)?;
    finite("rate", rate)?;
    finite("dividend", dividend)?;
    positive("price", price)?;
    positive("spot", spot)?;
    positive("strike", strike)?;
    positive("maturity", maturity)?;
    let df = (-rate * maturity).exp();
    if !(df.is_finite() && df > 0.0) {
        return Err(NoVolatility::OutOfRange {
            what: "discount factor",
            value: df,
        });
    }
    let forward = spot * ((rate - dividend) * maturity).exp();
    if !(forward.is_finite() && forward > 0.0) {
        return Err(NoVolatility::OutOfRange {
            what: "forward",
            value: forward,
        });
    }
    // The bounds in the quote's own (discounted) units, so that a price exactly at one is
    // refused whatever the rounding of the forward.
    let spot_df = spot * (-dividend * maturity).exp();
    let strike_df = strike * df;
    let q = q_of(kind);
    let intrinsic = (q * (spot_df - strike_df)).max(0.0);
    let bound = match kind {
        OptionType::Call => (spot_df, "discounted forward"),
        OptionType::Put => (strike_df, "discounted strike"),
    };
    check_bounds(price, intrinsic, bound.0, bound.1)?;
    let fwd_price = price / df;
    if !fwd_price.is_finite() {
        return Err(NoVolatility::OutOfRange {
            what: "discount factor",
            value: df,
        });
    }
    solve_forward(
        fwd_price, forward, strike, maturity, kind, price, intrinsic, bound,
    )
}

/// Black's implied volatility of a European option on a forward: the `sigma` whose
/// undiscounted price `Black(F, K, sigma, T)` equals `price` (undiscounted: divide a market
/// price by the discount factor first). The refusals are [`implied_volatility`]'s, with the
/// bounds `max(±(F - K), 0)` and `F` (call) or `K` (put).
pub fn implied_black_volatility(
    price: f64,
    forward: f64,
    strike: f64,
    maturity: f64,
    kind: OptionType,
) -> Result<f64, NoVolatility> {
    finite("price", price)?;
    finite("forward", forward)?;
    finite("strike", strike)?;
    finite("maturity", maturity)?;
    positive("price", price)?;
    positive("forward", forward)?;
    positive("strike", strike)?;
    positive("maturity", maturity)?;
    let intrinsic = (q_of(kind) * (forward - strike)).max(0.0);
    let bound = match kind {
        OptionType::Call => (forward, "forward"),
        OptionType::Put => (strike, "strike"),
    };
    check_bounds(price, intrinsic, bound.0, bound.1)?;
    solve_forward(price, forward, strike, maturity, kind, price, intrinsic, bound)
}

/// The normalised implied volatility: the total volatility `s = sigma sqrt(T)` with
/// `normalised_black(x, s, kind) = beta`, where `beta` is the undiscounted price divided by
/// `sqrt(F K)` and `x = ln(F/K)`. The bounds are `max(±(e^{x/2} - e^{-x/2}), 0)` and
/// `e^{x/2}` (call) or `e^{-x/2}` (put).
pub fn normalised_implied_volatility(beta: f64, x: f64, kind: OptionType) -> Result<f64, NoVolatility> {
    finite("price", beta)?;
    finite("x", x)?;
    positive("price", beta)?;
    let q = q_of(kind);
    let intrinsic = lbr::normalised_intrinsic(x, q);
    if beta < intrinsic {
        return Err(NoVolatility::BelowIntrinsic {
            price: beta,
            intrinsic,
        });
    }
    let (bound, bound_name) = match kind {
        OptionType::Call => ((0.5 * x).exp(), "normalised forward e^(x/2)"),
        OptionType::Put => ((-0.5 * x).exp(), "normalised strike e^(-x/2)"),
    };
    if beta >= bound {
        return Err(NoVolatility::AboveUpperBound {
            price: beta,
            bound,
            bound_name,
        });
    }
    match lbr::unchecked_normalised_implied_volatility(beta, x, q, lbr::MAXIMUM_ITERATIONS) {
        Some(s) if s > 0.0 => Ok(s),
        Some(_) => Err(NoVolatility::AtIntrinsic {
            price: beta,
            intrinsic,
        }),
        None => Err(NoVolatility::AboveUpperBound {
            price: beta,
            bound,
            bound_name,
        }),
    }
}

/// The normalised Black price `b(x, s)` of a call or put: the undiscounted price divided by
/// `sqrt(F K)`, with `x = ln(F/K)` and `s = sigma sqrt(T)`, to full relative precision (the
/// four regions of "Let's Be Rational").
pub fn normalised_black(x: f64, s: f64, kind: OptionType) -> f64 {
    lbr::normalised_black(x, s, q_of(kind))
}

/// Black's undiscounted price of a European option on the forward `forward`, computed as
/// the original does: intrinsic value plus `sqrt(F K) b(ln(F/K), sigma sqrt T)` of the
/// out-of-the-money option.
pub fn black(forward: f64, strike: f64, sigma: f64, maturity: f64, kind: OptionType) -> f64 {
    let q = q_of(kind);
    let intrinsic = (q * (forward - strike)).max(0.0);
    let otm = if q * (forward - strike) > 0.0 { -q } else { q };
    let b = lbr::normalised_black(log_moneyness(forward, strike), sigma * maturity.sqrt(), otm);
    intrinsic + (forward.sqrt() * strike.sqrt()) * b
}

/// Quotes per rayon task in [`implied_volatility_book`]: large enough that scheduling costs
/// nothing next to the solves (about 1 µs each), small enough to balance two to a hundred
/// threads on a book of 10^5 quotes.
pub const BOOK_CHUNK: usize = 1024;

/// The threads [`implied_volatility_book`] solves on: rayon's current pool (all cores, or
/// `RAYON_NUM_THREADS`).
pub fn book_threads() -> usize {
    rayon::current_num_threads()
}

/// The implied volatility of every quote of a book, in order, each `Ok(sigma)` or its
/// [`NoVolatility`] reason, solved in parallel on rayon's current pool in chunks of
/// [`BOOK_CHUNK`].
pub fn implied_volatility_book(quotes: &[Quote]) -> Vec<Result<f64, NoVolatility>> {
    let mut out = vec![Ok(0.0); quotes.len()];
    out.par_chunks_mut(BOOK_CHUNK)
        .zip(quotes.par_chunks(BOOK_CHUNK))
        .for_each(|(out, quotes)| {
            for (o, q) in out.iter_mut().zip(quotes) {
                *o = q.implied_volatility();
            }
        });
    out
}
