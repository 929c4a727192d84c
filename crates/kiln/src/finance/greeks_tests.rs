//! Unit tests of `greeks.rs`: the batches' runs, the parameters' checks and the finite
//! differences on exact polynomials.
use super::*;
use kiln_core::finance::{OptionSpec, OptionType};

#[test]
fn batches_differ_in_seed_and_keep_the_run_otherwise() {
    let p = GreeksParams::default();
    let mc = McParams {
        paths: 1001,
        control_variate: true,
        rng: Rng::Sobol { replicates: 16 },
        ..McParams::default()
    };
    let (a, b) = (p.batch_run(&mc, 0), p.batch_run(&mc, 1));
    assert_ne!(a.seed, b.seed);
    assert_ne!(a.seed, mc.seed);
    assert_eq!(a.paths, 1001u64.div_ceil(32));
    assert!(!a.control_variate);
    assert_eq!(a.rng, Rng::Sobol { replicates: 2 });
    assert_eq!(a.steps, mc.steps);
}

#[test]
fn bad_params_are_errors_naming_the_field() {
    for (p, field) in [
        (
            GreeksParams {
                batches: 1,
                ..Default::default()
            },
            "batches",
        ),
        (
            GreeksParams {
                spot_bump: 0.0,
                ..Default::default()
            },
            "spot_bump",
        ),
        (
            GreeksParams {
                vol_bump: f64::NAN,
                ..Default::default()
            },
            "vol_bump",
        ),
        (
            GreeksParams {
                rate_bump: 0.5,
                ..Default::default()
            },
            "rate_bump",
        ),
        (
            GreeksParams {
                time_bump: -1.0,
                ..Default::default()
            },
            "time_bump",
        ),
    ] {
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains(field), "{e}");
    }
    assert!(GreeksParams::default().validate().is_ok());
}

/// The finite differences of exact quadratic values give the quadratic's derivatives.
#[test]
fn batch_greeks_are_the_central_differences() {
    let o = BookOption::Plain(OptionSpec::european(
        OptionType::Call,
        100.0,
        100.0,
        0.03,
        0.0,
        0.2,
        1.0,
    ));
    let b = bumps(&o, &GreeksParams::default()).unwrap();
    assert_eq!((b.spot[0], b.vol[0], b.time), (1.0, 0.002, 1.0 / 365.0));
    let c = copies_of(&o, &b);
    assert_eq!(c.len(), 8);
    // V = S^2 + 3 s + 5 r - 7 T: delta 2S, gamma 2, vega 3, rho 5, theta 7
    let v: Vec<f64> = c
        .iter()
        .map(|o| match o {
            BookOption::Plain(s) => s.spot * s.spot + 3.0 * s.volatility + 5.0 * s.rate - 7.0 * s.maturity,
            _ => unreachable!(),
        })
        .collect();
    let g = greeks_of_batch(&v, &b);
    let want = [v[0], 200.0, 2.0, 3.0, 5.0, 7.0];
    for (k, (got, want)) in g.iter().zip(want).enumerate() {
        assert!(
            (got - want).abs() < 1e-6 * want.abs().max(1.0),
            "{k}: {got} vs {want}"
        );
    }
    let off = GreeksParams {
        cross_gamma: true,
        ..Default::default()
    };
    assert_eq!(
        copies_of(&o, &bumps(&o, &off).unwrap()).len(),
        8,
        "one asset: no pairs"
    );
    let e = Estimate::of(&[1.0, 2.0, 3.0, 6.0]);
    assert_eq!(e.value, 3.0);
    assert!((e.std_error - (14.0f64 / 12.0).sqrt()).abs() < 1e-15);
}

/// The mixed differences of an exact quadratic in three spots give its cross terms,
/// each pair in its place, and leave the other Greeks as without them.
#[test]
fn cross_gammas_are_the_mixed_differences_in_pair_order() {
    use kiln_core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
    let o = BookOption::Basket(BasketSpec {
        kind: OptionType::Call,
        strike: 100.0,
        rate: 0.03,
        maturity: 1.0,
        average: BasketAverage::Arithmetic,
        assets: vec![
            BasketAsset::new(100.0, 0.2, 0.0, 1.0),
            BasketAsset::new(50.0, 0.3, 0.0, 1.0),
            BasketAsset::new(80.0, 0.25, 0.0, 1.0),
        ],
        correlation: vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
    });
    let p = GreeksParams {
        cross_gamma: true,
        ..Default::default()
    };
    let b = bumps(&o, &p).unwrap();
    let c = copies_of(&o, &b);
    assert_eq!(c.len(), 4 * 3 + 4 + 6);
    // V = S1^2 + 2 S2^2 + 3 S1 S2 + 5 S1 S3 + 7 S2 S3 + s1 + r - T
    let v: Vec<f64> = c
        .iter()
        .map(|o| match o {
            BookOption::Basket(b) => {
                let s: Vec<f64> = b.assets.iter().map(|a| a.spot).collect();
                s[0] * s[0]
                    + 2.0 * s[1] * s[1]
                    + 3.0 * s[0] * s[1]
                    + 5.0 * s[0] * s[2]
                    + 7.0 * s[1] * s[2]
                    + b.assets[0].volatility
                    + b.rate
                    - b.maturity
            }
            _ => unreachable!(),
        })
        .collect();
    let g = greeks_of_batch(&v, &b);
    assert_eq!(g.len(), b.greeks());
    // price, 3 deltas, gammas 2, 4, 0, vegas 1, 0, 0, rho 1, theta 1, cross 3, 5, 7
    let want = [
        v[0],
        2.0 * 100.0 + 3.0 * 50.0 + 5.0 * 80.0,
        4.0 * 50.0 + 3.0 * 100.0 + 7.0 * 80.0,
        5.0 * 100.0 + 7.0 * 50.0,
        2.0,
        4.0,
        0.0,
        1.0,
        0.0,
        0.0,
        1.0,
        1.0,
        3.0,
        5.0,
        7.0,
    ];
    for (k, (got, want)) in g.iter().zip(want).enumerate() {
        assert!(
            (got - want).abs() < 1e-6 * want.abs().max(1.0),
            "{k}: {got} vs {want}"
        );
    }
    // without cross gammas the same copies lead and the same Greeks come out
    let plain = bumps(&o, &GreeksParams::default()).unwrap();
    assert_eq!(copies_of(&o, &plain)[..], c[..plain.copies()]);
    assert_eq!(
        greeks_of_batch(&v[..plain.copies()], &plain)[..],
        g[..plain.greeks()]
    );
    // the pairs' places, and the symmetric look-up
    assert_eq!(
        [pair_index(3, 0, 1), pair_index(3, 0, 2), pair_index(3, 1, 2)],
        [0, 1, 2]
    );
    assert_eq!(pair_index(5, 3, 4), 9);
    let e = |x| Estimate {
        value: x,
        std_error: 0.0,
    };
    let m = McGreeks {
        price: e(0.0),
        delta: vec![e(0.0); 3],
        gamma: vec![e(2.0), e(4.0), e(0.0)],
        vega: vec![e(0.0); 3],
        rho: e(0.0),
        theta: e(0.0),
        cross_gamma: vec![e(3.0), e(5.0), e(7.0)],
        paths_used: 0,
        batches: 2,
    };
    assert_eq!(m.cross_gamma_at(2, 1), Some(e(7.0)));
    assert_eq!(m.cross_gamma_at(0, 2), Some(e(5.0)));
    assert_eq!(m.cross_gamma_at(1, 1), Some(e(4.0)));
    assert_eq!(m.cross_gamma_at(0, 3), None);
    let none = McGreeks {
        cross_gamma: Vec::new(),
        ..m
    };
    assert_eq!(none.cross_gamma_at(0, 1), None);
}

/// An American rainbow's Greeks: per asset as a basket's, each finite with a standard error;
/// a call on the max gains with every asset.
#[test]
fn american_rainbow_greeks_are_per_asset_and_a_max_call_rises_with_each_asset() {
    use kiln_core::finance::american::AmericanRainbowSpec;
    use kiln_core::finance::basket::BasketAsset;
    use kiln_core::finance::rainbow::Extreme;
    let o = BookOption::AmericanRainbow(AmericanRainbowSpec {
        kind: OptionType::Call,
        extreme: Extreme::Max,
        strike: 100.0,
        rate: 0.05,
        maturity: 1.0,
        exercise_dates: 4,
        assets: vec![
            BasketAsset::new(100.0, 0.2, 0.1, 1.0),
            BasketAsset::new(95.0, 0.3, 0.05, 1.0),
        ],
        correlation: vec![1.0, 0.3, 0.3, 1.0],
    });
    let p = GreeksParams {
        batches: 8,
        ..Default::default()
    };
    let b = bumps(&o, &p).unwrap();
    assert_eq!((b.n, b.spot[1], b.vol[1]), (2, 0.01 * 95.0, 0.01 * 0.3));
    let c = copies_of(&o, &b);
    assert_eq!(c.len(), 4 * 2 + 4);
    let BookOption::AmericanRainbow(up) = &c[3] else {
        panic!("{:?}", c[3])
    };
    assert_eq!((up.assets[0].spot, up.assets[1].spot), (100.0, 95.0 + b.spot[1]));

    let mc = McParams {
        paths: 1 << 13,
        seed: 17,
        ..McParams::default()
    };
    let g = Runtime::cpu()
        .mc_greeks(&[o], &mc, &p, 0)
        .unwrap()
        .remove(0)
        .unwrap();
    assert!(g.price.value > 0.0 && g.price.std_error > 0.0);
    assert_eq!((g.delta.len(), g.gamma.len(), g.vega.len()), (2, 2, 2));
    for e in g
        .delta
        .iter()
        .chain(&g.gamma)
        .chain(&g.vega)
        .chain([&g.rho, &g.theta])
    {
        assert!(
            e.value.is_finite() && e.std_error.is_finite() && e.std_error >= 0.0,
            "{g:?}"
        );
    }
    for (i, d) in g.delta.iter().enumerate() {
        assert!(d.value > 0.0 && d.value < 1.0, "delta {i}: {d:?}");
        assert!(d.value > 3.0 * d.std_error, "delta {i}: {d:?}");
    }
}
