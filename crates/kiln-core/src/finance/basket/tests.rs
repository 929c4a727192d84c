use super::*;
use crate::finance::{bsm, McParams, Rng};
use crate::philox;

fn three(rho: [f64; 3]) -> BasketSpec {
    let [ab, ac, bc] = rho;
    BasketSpec {
        kind: OptionType::Call,
        strike: 100.0,
        rate: 0.03,
        maturity: 1.0,
        average: BasketAverage::Geometric,
        assets: vec![
            BasketAsset::new(100.0, 0.2, 0.01, 1.0).named("A"),
            BasketAsset::new(90.0, 0.3, 0.0, 0.5).named("B"),
            BasketAsset::new(110.0, 0.25, 0.02, 2.0).named("C"),
        ],
        correlation: vec![1.0, ab, ac, ab, 1.0, bc, ac, bc, 1.0],
    }
}

fn reason(r: Result<impl std::fmt::Debug>) -> String {
    match r {
        Err(Error::InvalidArgument { reason, .. }) => reason,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn one_asset_is_black_scholes() {
    for kind in [OptionType::Call, OptionType::Put] {
        for k in [80.0, 100.0, 125.0] {
            let spec = BasketSpec {
                kind,
                strike: k,
                rate: 0.04,
                maturity: 1.5,
                average: BasketAverage::Geometric,
                assets: vec![BasketAsset::new(100.0, 0.25, 0.01, 1.0)],
                correlation: vec![1.0],
            };
            let want = bsm(kind, 100.0, k, 0.04, 0.01, 0.25, 1.5).price;
            let got = spec.price_analytic().unwrap();
            assert!(
                (got - want).abs() < 1e-12 * want.max(1.0),
                "{kind:?} {k}: {got} vs {want}"
            );
            // a weight scales the basket: w S against K is w times S against K / w
            let mut w = spec.clone();
            w.assets[0].weight = 2.0;
            let scaled = 2.0 * bsm(kind, 100.0, k / 2.0, 0.04, 0.01, 0.25, 1.5).price;
            assert!((w.price_analytic().unwrap() - scaled).abs() < 1e-11 * scaled.max(1.0));
        }
    }
}

#[test]
fn perfectly_correlated_equal_assets_are_one_asset() {
    // five copies of one asset, rho = 1: G = A = W S(T)
    let n = 5;
    let spec = BasketSpec {
        kind: OptionType::Put,
        strike: 480.0,
        rate: 0.02,
        maturity: 2.0,
        average: BasketAverage::Geometric,
        assets: (0..n).map(|_| BasketAsset::new(100.0, 0.3, 0.01, 1.0)).collect(),
        correlation: vec![1.0; n * n],
    };
    let want = 5.0 * bsm(OptionType::Put, 100.0, 96.0, 0.02, 0.01, 0.3, 2.0).price;
    let got = spec.price_analytic().unwrap();
    assert!((got - want).abs() < 1e-10 * want, "{got} vs {want}");
    // the factor is the first column of ones (zero pivots accepted)
    let l = spec.factor().unwrap();
    for i in 0..n {
        assert!((l[i * n] - 1.0).abs() < 1e-15);
        assert!(l[i * n + 1..(i + 1) * n].iter().all(|&x| x == 0.0));
    }
    // and on the paths the arithmetic and geometric baskets agree to f32 rounding
    let mc = McParams {
        paths: 64,
        ..McParams::default()
    };
    let pp = BasketPathParams::new(&spec, &mc).unwrap();
    let mut arith = spec.clone();
    arith.average = BasketAverage::Arithmetic;
    let pa = BasketPathParams::new(&arith, &mc).unwrap();
    for s in 0..64 {
        let (g, _) = basket_sample(&pp, 0, s);
        let (a, _) = basket_sample(&pa, 0, s);
        assert!((a - g).abs() < 1e-4 * (1.0 + g), "sample {s}: {a} vs {g}");
    }
}

#[test]
fn bad_matrices_are_clear_errors() {
    assert!(three([0.5, 0.3, 0.2]).factor().is_ok());
    let r = reason(three([0.9, 0.9, -0.9]).factor());
    assert!(
        r.contains("not positive definite") && r.contains("pivot 3 (asset `C`)"),
        "{r}"
    );
    let r = reason(cholesky(&three([0.9, 0.9, -0.9]).correlation, 3));
    assert!(r.contains("pivot 3 is -"), "{r}");
    // the closed form refuses it too
    assert!(reason(three([0.9, 0.9, -0.9]).price_analytic()).contains("positive definite"));
    let mut s = three([0.5, 0.3, 0.2]);
    s.correlation[1] = 0.4;
    let r = reason(s.validate());
    assert!(
        r.contains("not symmetric") && r.contains("`A`") && r.contains("`B`"),
        "{r}"
    );
    let mut s = three([0.5, 0.3, 0.2]);
    s.correlation[4] = 0.99;
    assert!(reason(s.validate()).contains("diagonal must be 1"));
    let r = reason(three([0.5, 1.2, 0.2]).validate());
    assert!(r.contains("[-1, 1]") && r.contains("1.2"), "{r}");
    let mut s = three([0.5, 0.3, 0.2]);
    s.correlation.pop();
    assert!(reason(s.validate()).contains("3 x 3"));
    // a zero pivot whose column is not zero is not semi-definite either
    let r = reason(cholesky(&[1.0, 1.0, 0.5, 1.0, 1.0, 0.0, 0.5, 0.0, 1.0], 3));
    assert!(r.contains("pivot 2 is 0"), "{r}");
}

#[test]
fn bad_assets_and_contracts_name_the_field() {
    let base = three([0.5, 0.3, 0.2]);
    let mut s = base.clone();
    s.assets[1].weight = -1.0;
    let r = reason(s.validate());
    assert!(
        r.contains("asset `B`") && r.contains("weight") && r.contains("spread"),
        "{r}"
    );
    let mut s = base.clone();
    s.assets[2].spot = 0.0;
    assert!(reason(s.validate()).contains("spot"));
    let mut s = base.clone();
    s.assets[0].volatility = -0.1;
    assert!(reason(s.validate()).contains("volatility"));
    let mut s = base.clone();
    s.assets[0].dividend = f64::NAN;
    assert!(reason(s.validate()).contains("finite"));
    // any finite strike: a spread's may be 0 or negative
    let mut s = base.clone();
    s.strike = 0.0;
    s.validate().unwrap();
    s.strike = f64::NAN;
    assert!(reason(s.validate()).contains("strike"));
    let mut s = base.clone();
    s.maturity = -1.0;
    assert!(reason(s.validate()).contains("maturity"));
    let mut s = base.clone();
    s.assets.clear();
    s.correlation.clear();
    assert!(reason(s.validate()).contains("1 to 64"));
    let n = MAX_ASSETS + 1;
    let mut s = base.clone();
    s.assets = vec![BasketAsset::new(1.0, 0.1, 0.0, 1.0); n];
    s.correlation = (0..n * n)
        .map(|k| if k % (n + 1) == 0 { 1.0 } else { 0.0 })
        .collect();
    assert!(reason(s.validate()).contains("65 assets"));
    let mut s = base.clone();
    s.average = BasketAverage::Arithmetic;
    assert!(reason(s.price_analytic()).contains("use method mc"));
    assert_eq!(
        "Geometric".parse::<BasketAverage>().unwrap(),
        BasketAverage::Geometric
    );
    assert!("median".parse::<BasketAverage>().is_err());
    let sobol = McParams {
        rng: Rng::Sobol { replicates: 4 },
        ..McParams::default()
    };
    // Sobol runs carry their points: N dimensions, one shift per replicate and asset
    let q = BasketPathParams::new(&base, &sobol).unwrap().qmc.unwrap();
    assert_eq!(
        (q.shifts.len(), q.points),
        (4 * base.assets.len(), sobol.points_per_replicate())
    );
}

#[test]
fn the_sample_is_the_documented_loop() {
    let mut spec = three([0.5, 0.3, 0.2]);
    spec.average = BasketAverage::Arithmetic;
    spec.kind = OptionType::Put;
    spec.strike = 330.0;
    for anti in [false, true] {
        let mc = McParams {
            paths: 10,
            antithetic: anti,
            seed: 99,
            ..McParams::default()
        };
        let pp = BasketPathParams::new(&spec, &mc).unwrap();
        assert_eq!(pp.chol.len(), 6);
        let words = philox::philox4x32_10([0, 7, 4, 3], philox::key_from_seed(99));
        let z = philox::normals_from_words_f32(words);
        let l = spec.factor().unwrap();
        let one = |sign: f32| {
            let (mut a, mut g) = (0.0f64, 0.0f32);
            for i in 0..3 {
                let mut u = 0.0f32;
                for j in 0..=i {
                    u += (l[i * 3 + j] as f32) * z[j];
                }
                let x = (sign * pp.vol[i]).mul_add(u, pp.drift[i]);
                a += spec.assets[i].weight * spec.assets[i].spot * f64::from(philox::exp_f32(x));
                g += pp.geo_weight[i] * x;
            }
            let gv = pp.geo_spot * f64::from(philox::exp_f32(g));
            (
                pp.discount * (330.0 - a).max(0.0),
                pp.discount * (330.0 - gv).max(0.0) - pp.control_mean,
            )
        };
        let (y, c) = basket_sample(&pp, 4, 7);
        let (y0, c0) = one(1.0);
        let (want_y, want_c) = if anti {
            let (y1, c1) = one(-1.0);
            (0.5 * (y0 + y1), 0.5 * (c0 + c1))
        } else {
            (y0, c0)
        };
        assert_eq!(y.to_bits(), want_y.to_bits(), "anti {anti}: {y} vs {want_y}");
        assert_eq!(c.to_bits(), want_c.to_bits());
    }
}
