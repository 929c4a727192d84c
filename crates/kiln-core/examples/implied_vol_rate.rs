//! Implied-volatility throughput on the CPU: quotes per second for a book of random European
//! quotes (10^6 by default), on one thread and then on rayon's whole pool, each the median
//! of 5 timed runs of `implied_volatility_book` after a warm-up, with the worst volatility
//! error against the volatilities the prices were made from.
//!
//! The book: calls and puts alike, spot 100, moneyness `ln(F/K)` uniform in [-1, 1],
//! maturity in [0.02, 3] years, volatility in [0.05, 1], rate in [-0.01, 0.08], dividend
//! yield in [0, 0.05]; prices from the discounted Black formula.
//!
//! ```text
//! cargo run --release -p kiln-core --example implied_vol_rate            # 10^6 quotes
//! cargo run --release -p kiln-core --example implied_vol_rate -- 100000  # another size
//! ```

use std::time::Instant;

use kiln_core::finance::implied::{black, implied_volatility_book, Quote};
use kiln_core::finance::{bsm, OptionType};
use kiln_core::philox::{philox4x32_10, uniform_f64};

fn book(n: usize) -> (Vec<Quote>, Vec<f64>) {
    let mut quotes = Vec::with_capacity(n);
    let mut vols = Vec::with_capacity(n);
    for i in 0..n {
        let w = philox4x32_10([i as u32, (i >> 32) as u32, 0, 0], [0x1234_5678, 2013]);
        let w2 = philox4x32_10([i as u32, (i >> 32) as u32, 1, 0], [0x1234_5678, 2013]);
        let u = |k: usize| uniform_f64(if k < 4 { w[k] } else { w2[k - 4] });
        let kind = if w2[3] & 1 == 0 {
            OptionType::Call
        } else {
            OptionType::Put
        };
        let spot = 100.0;
        let maturity = 0.02 + 2.98 * u(0);
        let sigma = 0.05 + 0.95 * u(1);
        let rate = -0.01 + 0.09 * u(2);
        let dividend = 0.05 * u(3);
        let forward = spot * ((rate - dividend) * maturity).exp();
        let strike = forward * (-(2.0 * u(4) - 1.0)).exp();
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

fn median_rate(quotes: &[Quote]) -> f64 {
    let _ = implied_volatility_book(quotes);
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let out = implied_volatility_book(quotes);
            let dt = t.elapsed().as_secs_f64();
            std::hint::black_box(out);
            dt
        })
        .collect();
    times.sort_by(f64::total_cmp);
    quotes.len() as f64 / times[2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let (quotes, vols) = book(n);
    let out = implied_volatility_book(&quotes);
    // The error against the attainable precision: rounding the price to f64 alone moves
    // the volatility by about ulp(price) / vega (a subnormal price has fewer digits).
    let (mut worst, mut worst_rel, mut refused) = (0.0f64, 0.0f64, 0usize);
    let (mut subnormal, mut worst_subnormal) = (0usize, 0.0f64);
    for ((r, v), q) in out.iter().zip(&vols).zip(&quotes) {
        match r {
            Ok(iv) => {
                let vega = bsm(q.kind, q.spot, q.strike, q.rate, q.dividend, *v, q.maturity).vega;
                let attainable = (f64::EPSILON * q.price).max(f64::from_bits(1)) / vega;
                let err = (iv - v).abs();
                if q.price < f64::MIN_POSITIVE {
                    // A subnormal price has fewer than 16 digits, and the formula that
                    // made it rounds more than once down there.
                    subnormal += 1;
                    worst_subnormal = worst_subnormal.max(err / v);
                } else if attainable < 1e-13 {
                    worst = worst.max(err);
                } else {
                    worst_rel = worst_rel.max(err / attainable);
                }
            }
            Err(_) => refused += 1,
        }
    }
    println!(
        "{n} quotes: worst |sigma - sigma^| {worst:.2e} where the price determines sigma to 1e-13, \
         elsewhere {worst_rel:.2} x ulp(price) / vega; {refused} without a volatility (price at \
         intrinsic or underflowing in f64)"
    );
    println!("{subnormal} subnormal prices solved, worst relative error {worst_subnormal:.2e}");
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let single = one.install(|| median_rate(&quotes));
    println!("1 thread : {single:.3e} quotes/s");
    let threads = rayon::current_num_threads();
    let pool = median_rate(&quotes);
    println!(
        "{threads} threads: {pool:.3e} quotes/s ({:.3e} per thread, x{:.2} over one)",
        pool / threads as f64,
        pool / single
    );
    Ok(())
}
