//! Spreads and rainbows: the closed forms the analytic method picks, and the Monte Carlo
//! path against them (within 4 standard errors, on seeds no other test uses).

use super::*;
use crate::finance::rainbow::{stulz, Extreme};
use crate::finance::spread::{bjerksund_stensland, kirk, margrabe};
use crate::finance::{BlockSums, McParams, PriceResult, BLOCK_SAMPLES};

/// The Monte Carlo price of `spec`, samples summed in canonical blocks (as the engines do).
fn mc(spec: &BasketSpec, paths: u64, seed: u64, cv: bool) -> PriceResult {
    let mc = McParams {
        paths,
        seed,
        antithetic: true,
        control_variate: cv,
        ..McParams::default()
    };
    let pp = BasketPathParams::new(spec, &mc).unwrap();
    let mut blocks = Vec::new();
    let mut sums = BlockSums::default();
    for s in 0..pp.samples {
        let (y, c) = basket_sample(&pp, 0, s as u32);
        sums.push(y, c, 0.0, 0.0);
        if (s + 1) % BLOCK_SAMPLES == 0 {
            blocks.push(std::mem::take(&mut sums));
        }
    }
    if sums.n > 0 {
        blocks.push(sums);
    }
    finish_basket(spec, &mc, &blocks).unwrap()
}

fn within(r: &PriceResult, want: f64, what: &str) {
    if r.std_error == 0.0 {
        // a control equal to the payoff (a spread's at K = 0): the estimate is its mean
        assert!(
            (r.price - want).abs() < 1e-12 * want,
            "{what}: {} vs {want}",
            r.price
        );
        return;
    }
    let z = (r.price - want) / r.std_error;
    assert!(
        z.abs() < 4.0,
        "{what}: MC {} +- {} vs {want} ({z:.2} SE)",
        r.price,
        r.std_error
    );
}

/// A two-asset basket `w1 S1 + w2 S2`.
fn two(kind: OptionType, strike: f64, average: BasketAverage, w: [f64; 2], rho: f64) -> BasketSpec {
    BasketSpec {
        kind,
        strike,
        rate: 0.03,
        maturity: 0.75,
        average,
        assets: vec![
            BasketAsset::new(100.0, 0.3, 0.01, w[0]).named("long"),
            BasketAsset::new(96.0, 0.22, 0.02, w[1]).named("short"),
        ],
        correlation: vec![1.0, rho, rho, 1.0],
    }
}

#[test]
fn spreads_price_in_closed_form_and_by_monte_carlo() {
    let mut seed = 0x5eed_5a11;
    for kind in [OptionType::Call, OptionType::Put] {
        for strike in [-6.0, 0.0, 4.0] {
            for (w, rho) in [([1.0, -1.0], 0.6), ([-1.0, 1.0], -0.3)] {
                let spec = two(kind, strike, BasketAverage::Arithmetic, w, rho);
                let (long, short) = spec.spread_legs().unwrap();
                let legs = spec.two_assets(long, short);
                let analytic = spec.price_analytic().unwrap();
                assert_eq!(analytic, bjerksund_stensland(kind, &legs, strike));
                assert_eq!(spec.kirk_price().unwrap(), kirk(kind, &legs, strike));
                if strike == 0.0 {
                    // Margrabe's exchange option, exactly
                    let m = match kind {
                        OptionType::Call => margrabe(&legs),
                        OptionType::Put => margrabe(&TwoAssets {
                            f1: legs.f2,
                            f2: legs.f1,
                            v1: legs.v2,
                            v2: legs.v1,
                            ..legs
                        }),
                    };
                    assert!((analytic - m).abs() < 1e-13 * m, "{analytic} vs Margrabe {m}");
                }
                seed += 1;
                let plain = mc(&spec, 1 << 16, seed, false);
                let cv = mc(&spec, 1 << 16, seed, true);
                let what = format!("{kind:?} K {strike} w {w:?}");
                within(&plain, analytic, &what);
                if strike == 0.0 {
                    within(&cv, analytic, &what);
                } else {
                    // Bjerksund-Stensland is a lower bound, close to the exact price that the
                    // controlled estimate resolves
                    let gap = cv.price - analytic;
                    eprintln!("{what}: exact - BS2014 = {gap:.3e} +- {:.1e}", cv.std_error);
                    assert!(
                        gap > -4.0 * cv.std_error && gap < 1e-3 * analytic,
                        "{what}: {gap} +- {}",
                        cv.std_error
                    );
                }
                // the exercise-rule control removes most of the variance
                assert!(
                    cv.std_error < 0.25 * plain.std_error,
                    "{what}: {} vs {}",
                    cv.std_error,
                    plain.std_error
                );
            }
        }
    }
}

#[test]
fn the_spread_control_has_the_closed_form_as_its_mean() {
    // without the control variate the controls' mean is the MC estimate of E[c] = 0
    let spec = two(OptionType::Call, 2.0, BasketAverage::Arithmetic, [2.0, -1.5], 0.4);
    let mcp = McParams {
        paths: 1 << 17,
        seed: 0xc0_47_01,
        ..McParams::default()
    };
    let pp = BasketPathParams::new(&spec, &mcp).unwrap();
    assert!(matches!(
        pp.control,
        BasketControl::Spread {
            long: 0,
            short: 1,
            ..
        }
    ));
    let mut t = BlockSums::default();
    for s in 0..pp.samples {
        let (y, c) = basket_sample(&pp, 0, s as u32);
        t.push(y, c, 0.0, 0.0);
    }
    let n = t.n as f64;
    let se = ((t.cc / n - (t.c / n).powi(2)) / n).sqrt();
    assert!((t.c / n).abs() < 4.0 * se, "mean control {} +- {se}", t.c / n);
}

#[test]
fn rainbows_on_two_assets_match_stulz() {
    let mut seed = 0x7a1b_0000;
    for average in [BasketAverage::Max, BasketAverage::Min] {
        let extreme = if average == BasketAverage::Max {
            Extreme::Max
        } else {
            Extreme::Min
        };
        for kind in [OptionType::Call, OptionType::Put] {
            for (strike, w, rho) in [
                (95.0, [1.0, 1.0], 0.5),
                (100.0, [1.2, 0.9], -0.4),
                (-5.0, [1.0, 0.8], 0.9),
            ] {
                let spec = two(kind, strike, average, w, rho);
                let want = stulz(kind, extreme, &spec.two_assets(0, 1), strike).unwrap();
                assert_eq!(spec.price_analytic().unwrap(), want);
                seed += 1;
                let what = format!("{average:?} {kind:?} K {strike} w {w:?}");
                if want == 0.0 {
                    // a put on the extreme of positive prices with a negative strike
                    assert_eq!(mc(&spec, 1 << 12, seed, false).price, 0.0, "{what}");
                    continue;
                }
                within(&mc(&spec, 1 << 16, seed, false), want, &what);
                within(&mc(&spec, 1 << 16, seed, true), want, &what);
            }
        }
    }
}

#[test]
fn rainbows_on_many_assets_by_monte_carlo() {
    // four perfectly correlated assets with one volatility keep their ratios: the maximum
    // (minimum) is the asset with the largest (smallest) w S e^(-q T), priced by Black
    let n = 4;
    let assets: Vec<BasketAsset> = (0..n)
        .map(|i| BasketAsset::new(90.0 + 7.0 * i as f64, 0.25, 0.01 * i as f64, 1.0 + 0.1 * i as f64))
        .collect();
    let forward = |a: &BasketAsset| a.weight * a.spot * ((0.03 - a.dividend) * 0.75f64).exp();
    let fwds: Vec<f64> = assets.iter().map(forward).collect();
    let mut spec = BasketSpec {
        kind: OptionType::Call,
        strike: 110.0,
        rate: 0.03,
        maturity: 0.75,
        average: BasketAverage::Max,
        assets,
        correlation: vec![1.0; n * n],
    };
    for (average, f) in [
        (BasketAverage::Max, fwds.iter().cloned().fold(f64::MIN, f64::max)),
        (BasketAverage::Min, fwds.iter().cloned().fold(f64::MAX, f64::min)),
    ] {
        spec.average = average;
        let df = (-0.03f64 * 0.75).exp();
        let want = black(OptionType::Call, f, 110.0, 0.25 * 0.25 * 0.75, df);
        within(
            &mc(&spec, 1 << 15, 0xa11_0004, true),
            want,
            &format!("{average:?} of 4"),
        );
        let e = reason(spec.price_analytic());
        assert!(
            e.contains("4 assets has no closed form") && e.contains("method mc"),
            "{e}"
        );
    }
    // three independent assets: the maximum and minimum calls add up to less than the sum
    // of the three vanilla calls, and each lies between the bounds the single assets give
    let mut three = spec.clone();
    three.assets.truncate(3);
    three.correlation = vec![1.0, 0.2, -0.1, 0.2, 1.0, 0.3, -0.1, 0.3, 1.0];
    three.average = BasketAverage::Max;
    let max = mc(&three, 1 << 15, 0xa11_0005, false);
    three.average = BasketAverage::Min;
    let min = mc(&three, 1 << 15, 0xa11_0006, false);
    let calls: Vec<f64> = three
        .assets
        .iter()
        .map(|a| {
            let f = forward(a);
            black(
                OptionType::Call,
                f,
                110.0,
                0.25 * 0.25 * 0.75,
                (-0.03f64 * 0.75).exp(),
            )
        })
        .collect();
    let (lo, hi) = (
        calls.iter().cloned().fold(f64::MAX, f64::min),
        calls.iter().cloned().fold(f64::MIN, f64::max),
    );
    assert!(
        max.price > hi && min.price < lo,
        "max {} min {} vs calls {calls:?}",
        max.price,
        min.price
    );
}

#[test]
fn weights_and_payoffs_are_checked_together() {
    // a negative weight is a spread in an arithmetic basket, an error elsewhere
    for average in [BasketAverage::Geometric, BasketAverage::Max, BasketAverage::Min] {
        let e = reason(two(OptionType::Call, 1.0, average, [1.0, -1.0], 0.2).validate());
        assert!(
            e.contains("asset `short`: weight = -1")
                && e.contains(average.name())
                && e.contains("arithmetic"),
            "{e}"
        );
    }
    let spread = two(OptionType::Call, 1.0, BasketAverage::Arithmetic, [1.0, -1.0], 0.2);
    spread.validate().unwrap();
    let gpu = spread.gpu_refusal().unwrap();
    assert!(
        gpu.contains("asset `short`: weight = -1") && gpu.contains("CPU"),
        "{gpu}"
    );
    assert!(two(OptionType::Call, 1.0, BasketAverage::Max, [1.0, 1.0], 0.2)
        .gpu_refusal()
        .unwrap()
        .contains("average max"));
    assert_eq!(
        two(OptionType::Call, 1.0, BasketAverage::Arithmetic, [1.0, 2.0], 0.2).gpu_refusal(),
        None
    );
    // three assets with a negative weight: Monte Carlo without a control
    let mut three = spread.clone();
    three.assets.push(BasketAsset::new(50.0, 0.2, 0.0, 0.5));
    three.correlation = vec![1.0, 0.2, 0.0, 0.2, 1.0, 0.0, 0.0, 0.0, 1.0];
    assert!(reason(three.price_analytic()).contains("two-asset"));
    let pp = BasketPathParams::new(&three, &McParams::default()).unwrap();
    assert_eq!(
        (pp.control.clone(), pp.control_mean, pp.geo_spot),
        (BasketControl::None, 0.0, 0.0)
    );
    // a same-sign two-asset arithmetic basket has no closed form either
    assert!(
        two(OptionType::Call, 1.0, BasketAverage::Arithmetic, [1.0, 2.0], 0.2)
            .price_analytic()
            .is_err()
    );
    assert_eq!("MAX".parse::<BasketAverage>().unwrap(), BasketAverage::Max);
    let e = reason("median".parse::<BasketAverage>());
    assert!(e.contains("arithmetic, geometric, max or min"), "{e}");
    // a geometric basket with a strike <= 0 is a forward
    let g = two(OptionType::Call, -10.0, BasketAverage::Geometric, [1.0, 1.0], 0.2);
    let (f, _) = geometric_moments(&g.assets, &g.correlation, g.rate, g.maturity);
    let df = (-g.rate * g.maturity).exp();
    assert!((g.price_analytic().unwrap() - df * (f + 10.0)).abs() < 1e-12);
    let gp = BasketSpec {
        kind: OptionType::Put,
        ..g
    };
    assert_eq!(gp.price_analytic().unwrap(), 0.0);
}

fn reason(r: Result<impl std::fmt::Debug>) -> String {
    match r {
        Err(Error::InvalidArgument { reason, .. }) => reason,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

use crate::finance::spread::TwoAssets;
