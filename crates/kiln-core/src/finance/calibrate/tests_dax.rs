//! A published surface: the DAX implied vols of 5 July 2002 (13 strikes x 8 maturities, spot
//! 4468.17) from A. Sepp, "Pricing European-style options under jump diffusion processes
//! with stochastic volatility: applications of Fourier transform" (2003), as QuantLib's
//! `test-suite/hestonmodel.cpp` (`testDAXCalibration`) builds it. Sepp's Heston fit has a sum
//! of squared vol errors of 177.2 (vol points squared) over the 104 quotes, an RMSE of
//! `sqrt(177.2 / 104) = 1.305` vol points; QuantLib's test accepts 177.2 +- 1.0.

use super::*;
use crate::finance::heston::HestonParams;
use crate::finance::OptionType;

/// Days to each curve node and its continuously compounded zero rate (Actual/365).
const CURVE_DAYS: [f64; 8] = [13.0, 41.0, 75.0, 165.0, 256.0, 345.0, 524.0, 703.0];
const CURVE_RATES: [f64; 8] = [0.0357, 0.0349, 0.0341, 0.0355, 0.0359, 0.0368, 0.0386, 0.0401];
const STRIKES: [f64; 13] = [
    3400.0, 3600.0, 3800.0, 4000.0, 4200.0, 4400.0, 4500.0, 4600.0, 4800.0, 5000.0, 5200.0, 5400.0, 5600.0,
];
/// Rows are strikes, columns maturities.
#[rustfmt::skip]
const VOLS: [f64; 104] = [
    0.6625,0.4875,0.4204,0.3667,0.3431,0.3267,0.3121,0.3121,
    0.6007,0.4543,0.3967,0.3511,0.3279,0.3154,0.2984,0.2921,
    0.5084,0.4221,0.3718,0.3327,0.3155,0.3027,0.2919,0.2889,
    0.4541,0.3869,0.3492,0.3149,0.2963,0.2926,0.2819,0.2800,
    0.4060,0.3607,0.3330,0.2999,0.2887,0.2811,0.2751,0.2775,
    0.3726,0.3396,0.3108,0.2781,0.2788,0.2722,0.2661,0.2686,
    0.3550,0.3277,0.3012,0.2781,0.2781,0.2661,0.2661,0.2681,
    0.3428,0.3209,0.2958,0.2740,0.2688,0.2627,0.2580,0.2620,
    0.3302,0.3062,0.2799,0.2631,0.2573,0.2533,0.2504,0.2544,
    0.3343,0.2959,0.2705,0.2540,0.2504,0.2464,0.2448,0.2462,
    0.3460,0.2845,0.2624,0.2463,0.2425,0.2385,0.2373,0.2422,
    0.3857,0.2860,0.2578,0.2399,0.2357,0.2327,0.2312,0.2351,
    0.3976,0.2860,0.2607,0.2356,0.2297,0.2268,0.2241,0.2320,
];
const SPOT: f64 = 4468.17;

/// QuantLib's zero curve (linear in the zero rate against time, flat before the first
/// node) at `t` years.
fn zero_rate(t: f64) -> f64 {
    let ts: Vec<f64> = std::iter::once(0.0)
        .chain(CURVE_DAYS.iter().map(|d| d / 365.0))
        .collect();
    let rs: Vec<f64> = std::iter::once(0.0357).chain(CURVE_RATES).collect();
    let i = ts.partition_point(|&x| x <= t).clamp(1, ts.len() - 1);
    let (t0, t1, r0, r1) = (ts[i - 1], ts[i], rs[i - 1], rs[i]);
    r0 + (r1 - r0) * (t - t0) / (t1 - t0)
}

/// The 104 quotes: maturities are QuantLib's, the curve's days rounded to whole weeks
/// (`(days + 3) / 7` weeks from a Friday, every one a TARGET business day); out of the money
/// options (a call where `K e^{-rT} >= S`, else a put), as `HestonModelHelper` picks them.
pub(super) fn dax_quotes() -> Vec<HestonQuote> {
    let mut v = Vec::with_capacity(104);
    for (s, &k) in STRIKES.iter().enumerate() {
        for (m, &days) in CURVE_DAYS.iter().enumerate() {
            let t = 7.0 * ((days as i64 + 3) / 7) as f64 / 365.0;
            let r = zero_rate(t);
            let kind = if k * (-r * t).exp() >= SPOT {
                OptionType::Call
            } else {
                OptionType::Put
            };
            v.push(HestonQuote {
                contract: Contract {
                    kind,
                    spot: SPOT,
                    strike: k,
                    maturity: t,
                    rate: r,
                    dividend: 0.0,
                },
                value: VOLS[s * 8 + m],
                weight: 1.0,
            });
        }
    }
    v
}

/// QuantLib's start for this surface.
pub(super) const QL_START: HestonParams = HestonParams {
    v0: 0.1,
    kappa: 1.0,
    theta: 0.1,
    xi: 0.5,
    rho: -0.5,
};

#[test]
fn dax_surface_reproduces_the_published_fit() {
    let quotes = dax_quotes();
    let opts = CalibrationOptions {
        quoted: QuoteKind::Vol,
        target: Target::Vol,
        ..CalibrationOptions::default()
    };
    let fit = calibrate_heston(&quotes, &QL_START, &opts).unwrap();
    let sse: f64 = fit
        .quotes
        .iter()
        .map(|q| q.vol_error_points.unwrap().powi(2))
        .sum();
    println!(
        "DAX 2002: {:?}, feller {}, SSE {sse:.3} vol points^2, RMSE {:.4} vol points (published 177.2, 1.3053), {} iterations, {} evaluations, stop {:?}",
        fit.params,
        fit.feller,
        fit.rmse_vol_points.unwrap(),
        fit.iterations,
        fit.evaluations,
        fit.stop
    );
    assert_eq!(fit.vol_quotes, 104);
    assert!(
        (sse - 177.2).abs() < 1.0,
        "SSE {sse}, published 177.2 (+- 1.0, QuantLib's tolerance)"
    );
    let rmse = fit.rmse_vol_points.unwrap();
    assert!((rmse - (177.2f64 / 104.0).sqrt()).abs() < 0.01, "RMSE {rmse}");
}

#[test]
fn dax_surface_price_target_is_close_to_the_vol_fit() {
    // Fitting prices weighs the long-dated, high-vega quotes (vega up to 20x the short
    // wings') more, so the vol RMSE is worse than the vol fit's (about 3.0 points), never
    // better.
    let quotes = dax_quotes();
    let opts = CalibrationOptions {
        quoted: QuoteKind::Vol,
        target: Target::Price,
        ..CalibrationOptions::default()
    };
    let fit = calibrate_heston(&quotes, &QL_START, &opts).unwrap();
    let rmse = fit.rmse_vol_points.unwrap();
    println!(
        "DAX 2002 price fit: {:?}, RMSE {rmse:.4} vol points, {} iterations, stop {:?}",
        fit.params, fit.iterations, fit.stop
    );
    assert!((1.30..4.0).contains(&rmse), "RMSE {rmse}");
}
