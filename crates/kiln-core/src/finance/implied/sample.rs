//! Deterministic books of quotes for tests and benchmarks of the implied-volatility solvers
//! (the CPU's [`implied_volatility_book`](super::implied_volatility_book) and kiln's device
//! kernel, which must agree on them): a random book over wide ranges and a list of edge
//! cases that reaches every [`NoVolatility`](super::NoVolatility) reason.

use super::{black, Quote};
use crate::finance::OptionType;
use crate::philox::{philox4x32_10, uniform_f64};

/// `n` random quotes from `seed`, with the volatility each price was made from: calls and
/// puts alike, spot `e^{U(-2, 6)}`, maturity `10^{U(-3, 1.5)}` years, rate in `[-0.02,
/// 0.1]`, dividend yield in `[0, 0.06]`; for three quotes in four the total volatility
/// `s = sigma sqrt(T)` is `10^{U(-3, 0.5)}` and the moneyness `ln(F/K)` is `s U(-4, 4)`, for
/// the fourth (deep in and out of the money, tiny and huge total volatility) `s` is
/// `10^{U(-4, 0.8)}` and `ln(F/K)` uniform in `[-12, 12]`; prices from the discounted Black
/// formula ([`black`]). Some of the fourth's prices underflow or keep no time value in
/// `f64`: those quotes have a reason instead of a volatility, as they should.
pub fn random_book(n: usize, seed: u64) -> (Vec<Quote>, Vec<f64>) {
    let key = [seed as u32, (seed >> 32) as u32 ^ 0x1f83_d9ab];
    let mut quotes = Vec::with_capacity(n);
    let mut vols = Vec::with_capacity(n);
    for i in 0..n {
        let c = [i as u32, (i as u64 >> 32) as u32];
        let w = philox4x32_10([c[0], c[1], 0, 0], key);
        let w2 = philox4x32_10([c[0], c[1], 1, 0], key);
        let u = |k: usize| uniform_f64(if k < 4 { w[k] } else { w2[k - 4] });
        let kind = if w2[3] & 1 == 0 {
            OptionType::Call
        } else {
            OptionType::Put
        };
        let deep = w2[3] & 6 == 0;
        let spot = (-2.0 + 8.0 * u(0)).exp();
        let maturity = 10f64.powf(-3.0 + 4.5 * u(1));
        let (total, x) = if deep {
            (10f64.powf(-4.0 + 4.8 * u(2)), 24.0 * u(5) - 12.0)
        } else {
            let total = 10f64.powf(-3.0 + 3.5 * u(2));
            (total, total * (8.0 * u(5) - 4.0))
        };
        let sigma = total / maturity.sqrt();
        let rate = -0.02 + 0.12 * u(3);
        let dividend = 0.06 * u(4);
        let forward = spot * ((rate - dividend) * maturity).exp();
        let strike = forward * (-x).exp();
        let price = (-rate * maturity).exp() * black(forward, strike, sigma, maturity, kind);
        quotes.push(Quote {
            kind,
            price,
            spot,
            strike,
            maturity,
            rate,
            dividend,
        });
        vols.push(sigma);
    }
    (quotes, vols)
}

fn quote(
    kind: OptionType,
    price: f64,
    spot: f64,
    strike: f64,
    maturity: f64,
    rate: f64,
    dividend: f64,
) -> Quote {
    Quote {
        kind,
        price,
        spot,
        strike,
        maturity,
        rate,
        dividend,
    }
}

/// Edge cases: every reason (each non-finite and non-positive field, a discount factor and a
/// forward out of range, prices below, at, just under and above the bounds), and a grid of
/// solvable quotes at moneyness `ln(F/K)` from -30 to 30 and total volatility from 1e-8 to
/// 20 (deep in and out of the money, tiny and huge total volatility), calls and puts.
pub fn edge_quotes() -> Vec<Quote> {
    use OptionType::{Call, Put};
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    let mut v = vec![
        // not finite, field by field
        quote(Call, nan, 100.0, 100.0, 1.0, 0.0, 0.0),
        quote(Call, 5.0, inf, 100.0, 1.0, 0.0, 0.0),
        quote(Put, 5.0, 100.0, nan, 1.0, 0.0, 0.0),
        quote(Call, 5.0, 100.0, 100.0, inf, 0.0, 0.0),
        quote(Put, 5.0, 100.0, 100.0, 1.0, nan, 0.0),
        quote(Call, 5.0, 100.0, 100.0, 1.0, 0.0, -inf),
        // not positive
        quote(Call, 0.0, 100.0, 100.0, 1.0, 0.0, 0.0),
        quote(Put, -1.0, 100.0, 100.0, 1.0, 0.0, 0.0),
        quote(Call, 5.0, 0.0, 100.0, 1.0, 0.0, 0.0),
        quote(Call, 5.0, 100.0, -5.0, 1.0, 0.0, 0.0),
        quote(Put, 5.0, 100.0, 100.0, 0.0, 0.0, 0.0),
        // out of range: the discount factor under- and overflows, the forward overflows
        quote(Call, 5.0, 100.0, 100.0, 1.0, 800.0, 800.0),
        quote(Put, 5.0, 100.0, 100.0, 1.0, -800.0, 0.0),
        quote(Call, 5.0, 100.0, 100.0, 1.0, 0.0, -800.0),
        // below intrinsic, at it, a few ulp under it, above the bounds
        quote(Call, 40.0, 100.0, 50.0, 1.0, 0.0, 0.0),
        quote(Put, 40.0, 50.0, 100.0, 1.0, 0.0, 0.0),
        quote(Call, 50.0, 100.0, 50.0, 1.0, 0.0, 0.0),
        quote(Put, 50.0, 50.0, 100.0, 1.0, 0.0, 0.0),
        quote(Call, 50.0 * (1.0 - f64::EPSILON), 100.0, 50.0, 1.0, 0.0, 0.0),
        quote(Call, 50.0 * (1.0 + f64::EPSILON), 100.0, 50.0, 1e-4, 0.0, 0.0),
        quote(Call, 100.0, 100.0, 50.0, 1.0, 0.0, 0.0),
        quote(Call, 150.0, 100.0, 50.0, 1.0, 0.0, 0.0),
        quote(Put, 100.0, 50.0, 100.0, 1.0, 0.0, 0.0),
        quote(Put, 100.0 * (1.0 - f64::EPSILON), 50.0, 100.0, 1.0, 0.0, 0.0),
        quote(Call, 100.0 * (1.0 - f64::EPSILON), 100.0, 50.0, 1.0, 0.0, 0.0),
        // the smallest prices: a subnormal, the least positive
        quote(Call, 1e-310, 100.0, 1000.0, 1.0, 0.0, 0.0),
        quote(Put, f64::from_bits(1), 100.0, 10.0, 0.5, 0.0, 0.0),
        // rates and dividends of either sign, far out of the money
        quote(Call, 1e-12, 100.0, 400.0, 2.0, -0.05, 0.03),
        quote(Put, 1e-12, 400.0, 100.0, 2.0, 0.08, -0.02),
    ];
    for kind in [Call, Put] {
        for x in [
            -30.0f64, -12.0, -5.0, -1.0, -1e-8, 0.0, 1e-8, 1.0, 5.0, 12.0, 30.0,
        ] {
            for s in [1e-8, 1e-4, 0.01, 0.2, 0.5, 1.0, 3.0, 6.0, 10.0, 20.0] {
                let (spot, maturity, rate, dividend): (f64, f64, f64, f64) = (100.0, 0.75, 0.01, 0.02);
                let forward = spot * ((rate - dividend) * maturity).exp();
                let strike = forward * (-x).exp();
                let sigma = s / maturity.sqrt();
                let price = (-rate * maturity).exp() * black(forward, strike, sigma, maturity, kind);
                v.push(quote(kind, price, spot, strike, maturity, rate, dividend));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::{implied_volatility_book, NoVolatility};
    use super::*;

    #[test]
    fn the_edge_cases_reach_every_reason_and_the_codes_rebuild_them() {
        let quotes = edge_quotes();
        let out = implied_volatility_book(&quotes);
        let mut seen = [0usize; 7];
        for (q, r) in quotes.iter().zip(&out) {
            match r {
                Ok(v) => {
                    assert!(v.is_finite() && *v > 0.0);
                    seen[0] += 1;
                }
                Err(e) => {
                    seen[e.index() as usize] += 1;
                    // Debug text: a NaN field is equal to itself there
                    let rebuilt = NoVolatility::from_index(e.index(), q);
                    assert_eq!(format!("{rebuilt:?}"), format!("{:?}", Some(*e)), "{q:?}");
                }
            }
        }
        assert!(seen.iter().all(|&k| k > 0), "{seen:?}");
        assert_eq!(NoVolatility::from_index(0, &quotes[0]), None);
        assert_eq!(NoVolatility::from_index(7, &quotes[0]), None);
    }

    #[test]
    fn the_random_book_round_trips_and_every_code_rebuilds() {
        let (quotes, vols) = random_book(20_000, 5);
        let out = implied_volatility_book(&quotes);
        let mut solved = 0;
        for ((q, r), v) in quotes.iter().zip(&out).zip(&vols) {
            match r {
                Ok(s) => {
                    solved += 1;
                    // Round trip in price (the volatility itself is only determined to
                    // eps price / vega, loosely deep in the money): the price back to 1e-12
                    // (a subnormal price has fewer digits: to f64::MIN_POSITIVE).
                    let forward = q.spot * ((q.rate - q.dividend) * q.maturity).exp();
                    let back =
                        (-q.rate * q.maturity).exp() * black(forward, q.strike, *s, q.maturity, q.kind);
                    assert!(
                        (back - q.price).abs() <= 1e-12 * q.price + f64::MIN_POSITIVE,
                        "{q:?}: {s} (made from {v})"
                    );
                }
                Err(e) => assert_eq!(NoVolatility::from_index(e.index(), q), Some(*e), "{q:?}"),
            }
        }
        assert!(solved > 16_000, "{solved}");
    }
}
