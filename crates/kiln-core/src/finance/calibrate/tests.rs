//! Tests of the surface pricer (against `heston_price`, gradient against central
//! differences) and of the calibration (recovery of known parameters from a synthetic
//! 200-quote surface; a published DAX surface in `tests_dax`).

use super::pricer::{from_vec, gauss_legendre, to_vec};
use super::*;
use crate::finance::heston::heston_price;
use crate::finance::heston::HestonParams;
use crate::finance::implied::implied_volatility;
use crate::finance::OptionType;

/// A deterministic uniform in `[0, 1)` (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
}

fn random_params(rng: &mut Rng) -> HestonParams {
    HestonParams {
        kappa: rng.range(0.5, 5.0),
        theta: rng.range(0.02, 0.2),
        xi: rng.range(0.1, 0.8),
        rho: rng.range(-0.8, 0.2),
        v0: rng.range(0.02, 0.2),
    }
}

/// 8 maturities from 0.1 to 3 years x 25 strikes from 50% to 150% of spot; calls at and
/// above the forward-ish strike 100, puts below (out of the money, as quoted).
fn surface_contracts() -> Vec<Contract> {
    let mats = [0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0];
    let mut v = Vec::new();
    for &t in &mats {
        for j in 0..25 {
            let k = 50.0 + 100.0 * j as f64 / 24.0;
            v.push(Contract {
                kind: if k >= 100.0 {
                    OptionType::Call
                } else {
                    OptionType::Put
                },
                spot: 100.0,
                strike: k,
                maturity: t,
                rate: 0.02,
                dividend: 0.01,
            });
        }
    }
    v
}

#[test]
fn gauss_legendre_is_exact_to_its_degree() {
    let (x, w) = gauss_legendre(8);
    // degree 15 is exact: int_{-1}^{1} x^14 = 2/15
    let s: f64 = x.iter().zip(&w).map(|(x, w)| w * x.powi(14)).sum();
    assert!((s - 2.0 / 15.0).abs() < 1e-15, "{s}");
    let total: f64 = w.iter().sum();
    assert!((total - 2.0).abs() < 1e-14);
}

#[test]
fn prices_match_heston_price() {
    let mut rng = Rng(7);
    let contracts = surface_contracts();
    let pricer = SurfacePricer::new(&contracts, Quadrature::default()).unwrap();
    let mut worst = 0.0f64;
    for _ in 0..5 {
        let h = random_params(&mut rng);
        let prices = pricer.prices(&h).unwrap();
        for (c, p) in contracts.iter().zip(&prices) {
            let want = heston_price(c.kind, c.spot, c.strike, c.rate, c.dividend, c.maturity, &h).unwrap();
            // relative 1e-10, or 1e-12 absolute for prices far in the wings (heston_price's
            // own integral tolerance is 1e-12 absolute)
            let err = (p - want).abs();
            assert!(err <= 1e-10 * want.abs() + 2e-11, "{c:?} {h:?}: {p} vs {want}");
            if want > 1.0 {
                worst = worst.max(err / want);
            }
        }
    }
    assert!(worst < 1e-10, "worst relative error {worst:e}");
}

#[test]
fn gradient_matches_central_differences() {
    let mut rng = Rng(11);
    let contracts = surface_contracts();
    let pricer = SurfacePricer::new(&contracts, Quadrature::default()).unwrap();
    let n = contracts.len();
    for _ in 0..10 {
        let h = random_params(&mut rng);
        let mut prices = vec![0.0; n];
        let mut grads = vec![[0.0; 5]; n];
        pricer.price_grad(&h, &mut prices, &mut grads).unwrap();
        let p = to_vec(&h);
        for k in 0..5 {
            let step = 1e-4 * p[k].abs().max(0.1);
            let (mut up, mut dn) = (p, p);
            up[k] += step;
            dn[k] -= step;
            let pu = pricer.prices(&from_vec(&up)).unwrap();
            let pd = pricer.prices(&from_vec(&dn)).unwrap();
            for i in 0..n {
                let fd = (pu[i] - pd[i]) / (2.0 * step);
                let g = grads[i][k];
                // relative 1e-6, plus the difference quotient's rounding noise: a price is
                // `S e^{-qT} - (S K)^{1/2} ... * integral`, a difference of numbers near the
                // spot, so it carries rounding of about 1e-14 of the spot whatever its size
                // (far-wing quotes worth 1e-9 have derivatives below that noise)
                let noise = 1e-14 * contracts[i].spot / step;
                assert!(
                    (g - fd).abs() <= 1e-6 * g.abs() + noise,
                    "quote {i} param {k} at {h:?}: analytic {g} vs central {fd}"
                );
            }
        }
    }
}

fn truth() -> HestonParams {
    HestonParams {
        kappa: 1.8,
        theta: 0.045,
        xi: 0.6,
        rho: -0.65,
        v0: 0.03,
    }
}

fn synthetic_quotes(h: &HestonParams) -> Vec<HestonQuote> {
    surface_contracts()
        .into_iter()
        .map(|c| HestonQuote {
            contract: c,
            value: heston_price(c.kind, c.spot, c.strike, c.rate, c.dividend, c.maturity, h).unwrap(),
            weight: 1.0,
        })
        .collect()
}

fn assert_recovered(fit: &HestonFit, want: &HestonParams) {
    let (a, b) = (to_vec(&fit.params), to_vec(want));
    for k in 0..5 {
        let rel = (a[k] - b[k]).abs() / b[k].abs();
        assert!(
            rel < 1e-6,
            "param {k}: {} vs {} (rel {rel:e}); {:?} after {} iterations, stop {:?}",
            a[k],
            b[k],
            fit.params,
            fit.iterations,
            fit.stop
        );
    }
}

#[test]
fn recovers_known_parameters_from_200_prices() {
    let want = truth();
    let quotes = synthetic_quotes(&want);
    assert_eq!(quotes.len(), 200);
    let opts = CalibrationOptions {
        target: Target::Price,
        ..CalibrationOptions::default()
    };
    let fit = calibrate_heston(&quotes, &DEFAULT_START, &opts).unwrap();
    assert_recovered(&fit, &want);
    assert!(!fit.feller, "2 kappa theta = 0.162 < xi^2 = 0.36");
    assert_eq!(fit.quotes.len(), 200);
    let worst = fit
        .quotes
        .iter()
        .zip(&quotes)
        .filter_map(|(f, q)| {
            f.vol_error_points
                .map(|e| (e.abs(), q.contract.maturity, q.contract.strike, f.market_price))
        })
        .fold((0.0, 0.0, 0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
    println!(
        "recovery (prices): {:?} in {} iterations ({:?}); RMSE {:?} vol points over {} quotes, worst {worst:?}",
        fit.params, fit.iterations, fit.stop, fit.rmse_vol_points, fit.vol_quotes
    );
    // A quote worth 1e-11 (T = 0.1 at 150%) has a vega near 1e-9, so the rounding of its
    // price (1e-14 of the spot) moves its implied vol by a tenth of a point: the vol
    // errors are checked on the quotes worth at least 1e-4 of the spot.
    for (f, q) in fit.quotes.iter().zip(&quotes) {
        if f.market_price >= 1e-4 * q.contract.spot {
            let e = f.vol_error_points.unwrap().abs();
            assert!(e < 1e-6, "{:?}: {e} vol points", q.contract);
        }
    }
    assert!(fit.rmse_vol_points.unwrap() < 0.05, "{:?}", fit.rmse_vol_points);
}

#[test]
fn recovers_known_parameters_from_200_vols() {
    let want = truth();
    let quotes: Vec<HestonQuote> = synthetic_quotes(&want)
        .into_iter()
        .map(|q| {
            let c = q.contract;
            let vol = implied_volatility(q.value, c.spot, c.strike, c.maturity, c.rate, c.dividend, c.kind)
                .unwrap();
            // the far wings' vols are set by their prices' rounding (see above): weight 0
            let weight = if q.value >= 1e-4 * c.spot { 1.0 } else { 0.0 };
            HestonQuote {
                value: vol,
                weight,
                ..q
            }
        })
        .collect();
    let start = HestonParams {
        kappa: 4.0,
        theta: 0.1,
        xi: 0.3,
        rho: 0.0,
        v0: 0.1,
    };
    let opts = CalibrationOptions {
        quoted: QuoteKind::Vol,
        target: Target::Vol,
        ..CalibrationOptions::default()
    };
    let fit = calibrate_heston(&quotes, &start, &opts).unwrap();
    assert_recovered(&fit, &want);
    assert!(fit.vol_quotes >= 190, "{}", fit.vol_quotes);
}

#[test]
fn refuses_bad_input_with_reasons() {
    let mut quotes = synthetic_quotes(&truth());
    quotes[3].weight = -1.0;
    let e = calibrate_heston(&quotes, &DEFAULT_START, &CalibrationOptions::default()).unwrap_err();
    assert!(e.to_string().contains("quote 3: weight"), "{e}");
    let few = &synthetic_quotes(&truth())[..4];
    let e = calibrate_heston(few, &DEFAULT_START, &CalibrationOptions::default()).unwrap_err();
    assert!(e.to_string().contains("at least 5"), "{e}");
    let mut q = synthetic_quotes(&truth());
    q[0].contract.strike = 0.0;
    let e = calibrate_heston(&q, &DEFAULT_START, &CalibrationOptions::default()).unwrap_err();
    assert!(e.to_string().contains("quote 0: strike = 0"), "{e}");
}

#[test]
fn lists_every_unusable_quote_with_every_reason() {
    let mut q = synthetic_quotes(&truth());
    q[2].contract.strike = -1.0;
    q[2].weight = f64::NAN;
    q[5].value = 0.0;
    // a call price above the spot: no volatility reaches it
    q[7].value = q[7].contract.spot * 2.0;
    let problems = quote_problems(&q, QuoteKind::Price, Target::Vol);
    let idx: Vec<usize> = problems.iter().map(|p| p.index).collect();
    assert_eq!(idx, [2, 5, 7], "{problems:?}");
    assert!(problems[0].reason.contains("strike = -1"), "{problems:?}");
    assert!(problems[0].reason.contains("weight = NaN"), "{problems:?}");
    assert!(problems[1].reason.contains("price = 0"), "{problems:?}");
    assert!(
        problems[2].reason.contains("no implied volatility"),
        "{problems:?}"
    );
    // a price fit needs no implied vol
    let idx: Vec<usize> = quote_problems(&q, QuoteKind::Price, Target::Price)
        .iter()
        .map(|p| p.index)
        .collect();
    assert_eq!(idx, [2, 5]);
    let e = calibrate_heston(&q, &DEFAULT_START, &CalibrationOptions::default()).unwrap_err();
    assert!(e.to_string().contains("and 2 more"), "{e}");
}

#[test]
#[ignore]
fn quadrature_survey() {
    let contracts = surface_contracts();
    let mut rng = Rng(3);
    let hs: Vec<HestonParams> = (0..6).map(|_| random_params(&mut rng)).collect();
    let refs: Vec<Vec<f64>> = hs
        .iter()
        .map(|h| {
            contracts
                .iter()
                .map(|c| heston_price(c.kind, c.spot, c.strike, c.rate, c.dividend, c.maturity, h).unwrap())
                .collect()
        })
        .collect();
    let mut cfgs: Vec<(String, Quadrature)> = Vec::new();
    for (u, wd, o) in [
        (200.0, 16.0, 16),
        (300.0, 16.0, 16),
        (400.0, 16.0, 16),
        (400.0, 16.0, 12),
    ] {
        cfgs.push((
            format!("[0, {u}] width {wd} order {o}"),
            Quadrature::new(u, wd, o).unwrap(),
        ));
    }
    for (name, q) in cfgs {
        let n = q.len();
        let pricer = SurfacePricer::new(&contracts, q).unwrap();
        let mut worst = 0.0f64;
        let mut at = String::new();
        for (h, r) in hs.iter().zip(&refs) {
            let p = pricer.prices(h).unwrap();
            for ((a, b), c) in p.iter().zip(r).zip(&contracts) {
                if (a - b).abs() > worst {
                    worst = (a - b).abs();
                    at = format!("T {} K {} {h:?}", c.maturity, c.strike);
                }
            }
        }
        println!("{name}: {n} nodes, worst abs error {worst:e} at {at}");
    }
}
