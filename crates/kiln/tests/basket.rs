//! Basket options on the CPU: the geometric basket's Monte Carlo against its closed form
//! (within 4 standard errors, N = 1, 2, 5, 17 with random positive definite correlations,
//! calls and puts, odd path counts, antithetic on and off), the arithmetic basket with and
//! without its geometric control variate, the facade's methods and stream indices, and bad
//! inputs as errors in their slots.
#![allow(clippy::unwrap_used)]

use kiln::finance::Method;
use kiln::Runtime;
use kiln_core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln_core::finance::{bsm, McParams, OptionType, Rng};

/// xorshift64*: a deterministic stream of uniforms in [0, 1).
struct Uniforms(u64);

impl Uniforms {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
}

/// A random positive definite correlation matrix: `B B^T` with unit diagonal, `B` an
/// `n x (n + 2)` matrix of uniforms in [-1, 1] plus a common factor (so correlations are
/// mostly positive, as in equity baskets). Exactly symmetric: each entry is computed once.
fn random_correlation(u: &mut Uniforms, n: usize) -> Vec<f64> {
    let k = n + 2;
    let common = u.range(0.0, 1.5);
    let b: Vec<f64> = (0..n * k)
        .map(|i| u.range(-1.0, 1.0) + if i % k == 0 { common } else { 0.0 })
        .collect();
    let mut s = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let v: f64 = (0..k).map(|m| b[i * k + m] * b[j * k + m]).sum();
            s[i * n + j] = v;
            s[j * n + i] = v;
        }
    }
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let v = if i == j {
                1.0
            } else {
                s[i * n + j] / (s[i * n + i] * s[j * n + j]).sqrt()
            };
            c[i * n + j] = v;
            c[j * n + i] = v;
        }
    }
    c
}

fn random_basket(u: &mut Uniforms, n: usize, kind: OptionType, average: BasketAverage) -> BasketSpec {
    let assets: Vec<BasketAsset> = (0..n)
        .map(|i| {
            BasketAsset::new(
                u.range(50.0, 150.0),
                u.range(0.1, 0.45),
                u.range(0.0, 0.04),
                u.range(0.2, 2.0),
            )
            .named(format!("S{i}"))
        })
        .collect();
    // the strike near the basket's value now
    let value: f64 = assets.iter().map(|a| a.weight * a.spot).sum();
    BasketSpec {
        kind,
        strike: value * u.range(0.85, 1.15),
        rate: u.range(0.0, 0.05),
        maturity: u.range(0.25, 2.0),
        average,
        assets,
        correlation: random_correlation(u, n),
    }
}

fn mc(paths: u64, antithetic: bool, cv: bool) -> McParams {
    McParams {
        paths,
        seed: 0x00ba_5ce7,
        antithetic,
        control_variate: cv,
        ..McParams::default()
    }
}

#[test]
fn geometric_monte_carlo_is_within_4_se_of_the_closed_form() {
    let rt = Runtime::cpu();
    let mut u = Uniforms(0x6261_736b_6574_2121);
    let mut specs = Vec::new();
    for n in [1usize, 2, 5, 17] {
        for kind in [OptionType::Call, OptionType::Put] {
            specs.push(random_basket(&mut u, n, kind, BasketAverage::Geometric));
        }
    }
    for (paths, anti) in [(20_001u64, false), (15_003, true)] {
        let got = rt.price_basket(&specs, &mc(paths, anti, false), Method::MonteCarlo);
        for (s, r) in specs.iter().zip(&got) {
            let r = r.as_ref().unwrap();
            let exact = s.price_analytic().unwrap();
            let z = (r.price - exact) / r.std_error;
            assert!(
                z.abs() < 4.0,
                "N {} {:?} antithetic {anti}: mc {} +- {} vs closed form {exact} (z {z:.2})",
                s.assets.len(),
                s.kind,
                r.price,
                r.std_error
            );
            assert_eq!(r.paths_used, if anti { paths + 1 } else { paths });
            assert!(r.std_error > 0.0 && r.delta.is_none());
        }
        // with the control variate a geometric basket is its closed form
        let cv = rt.price_basket(&specs, &mc(paths, anti, true), Method::MonteCarlo);
        for (s, r) in specs.iter().zip(&cv) {
            let r = r.as_ref().unwrap();
            let exact = s.price_analytic().unwrap();
            assert!(
                (r.price - exact).abs() < 1e-7 * (1.0 + exact) && r.std_error < 1e-7 * (1.0 + exact),
                "{r:?} vs {exact}"
            );
        }
    }
}

#[test]
fn arithmetic_control_variate_agrees_and_shrinks_the_error() {
    let rt = Runtime::cpu();
    let mut u = Uniforms(0x0a71_7468_6d65_7469);
    for (n, kind, anti) in [
        (1usize, OptionType::Call, false),
        (2, OptionType::Put, true),
        (5, OptionType::Call, true),
        (17, OptionType::Put, false),
    ] {
        let s = random_basket(&mut u, n, kind, BasketAverage::Arithmetic);
        let plain = rt.price_basket(
            std::slice::from_ref(&s),
            &mc(40_001, anti, false),
            Method::MonteCarlo,
        );
        let cv = rt.price_basket(
            std::slice::from_ref(&s),
            &mc(40_001, anti, true),
            Method::MonteCarlo,
        );
        let (p, c) = (plain[0].as_ref().unwrap(), cv[0].as_ref().unwrap());
        let z = (c.price - p.price) / p.std_error;
        assert!(
            z.abs() < 4.0,
            "N {n} {kind:?}: cv {} +- {} vs plain {} +- {}",
            c.price,
            c.std_error,
            p.price,
            p.std_error
        );
        assert!(
            c.std_error < 0.5 * p.std_error,
            "N {n}: the control should cut the error: {} vs {}",
            c.std_error,
            p.std_error
        );
        // the arithmetic basket is worth at least the geometric one (AM >= GM) for a call
        // (N = 1: they are one option, equal to rounding)
        let geo = s.geometric_price().unwrap();
        let tol = 4.0 * c.std_error + 1e-9 * geo;
        if kind == OptionType::Call {
            assert!(c.price > geo - tol, "{} vs geometric {geo}", c.price);
        } else {
            assert!(c.price < geo + tol, "{} vs geometric {geo}", c.price);
        }
    }
}

#[test]
fn one_asset_arithmetic_is_black_scholes() {
    let rt = Runtime::cpu();
    let s = BasketSpec {
        kind: OptionType::Call,
        strike: 105.0,
        rate: 0.03,
        maturity: 1.0,
        average: BasketAverage::Arithmetic,
        assets: vec![BasketAsset::new(100.0, 0.25, 0.01, 1.0)],
        correlation: vec![1.0],
    };
    let exact = bsm(OptionType::Call, 100.0, 105.0, 0.03, 0.01, 0.25, 1.0).price;
    let r = rt.price_basket(&[s], &mc(50_001, true, false), Method::MonteCarlo);
    let r = r[0].as_ref().unwrap();
    assert!(
        (r.price - exact).abs() < 4.0 * r.std_error,
        "{} +- {} vs {exact}",
        r.price,
        r.std_error
    );
}

#[test]
fn methods_streams_and_bad_inputs() {
    let rt = Runtime::cpu();
    let mut u = Uniforms(77);
    let mut specs: Vec<BasketSpec> = (0..4)
        .map(|i| random_basket(&mut u, 3 + i, OptionType::Call, BasketAverage::Arithmetic))
        .collect();
    specs[2].average = BasketAverage::Geometric;
    let run = mc(3 * 1024 + 7, false, true);
    // a batch starting at stream 2 gives the bits of the whole book's options 2 and 3
    let whole = rt.price_basket(&specs, &run, Method::MonteCarlo);
    let tail = rt.price_basket_batch(&specs[2..], &run, Method::MonteCarlo, 2);
    for (a, b) in whole[2..].iter().zip(&tail) {
        assert_eq!(
            a.as_ref().unwrap().price.to_bits(),
            b.as_ref().unwrap().price.to_bits()
        );
    }
    // the same option on another stream is another estimate
    assert_ne!(
        whole[0].as_ref().unwrap().price,
        rt.price_basket_batch(&specs[..1], &run, Method::MonteCarlo, 5)[0]
            .as_ref()
            .unwrap()
            .price
    );
    // analytic: geometric only (among these: no two-asset spread or rainbow)
    let an = rt.price_basket(&specs, &run, Method::Analytic);
    assert!(an[0].as_ref().unwrap_err().to_string().contains("use method mc"));
    let g = an[2].as_ref().unwrap();
    assert_eq!((g.std_error, g.paths_used), (0.0, 0));
    // bad slots are errors in their slots only
    let mut bad = specs.clone();
    bad[0].correlation = vec![1.0, 0.9, 0.9, 0.9, 1.0, -0.9, 0.9, -0.9, 1.0];
    // a negative weight makes a spread of an arithmetic basket, but no rainbow
    bad[1].assets[2].weight = -0.5;
    bad[1].average = BasketAverage::Max;
    bad[3].correlation[1] = 1.5;
    let got = rt.price_basket(&bad, &run, Method::MonteCarlo);
    let msg = |i: usize| got[i].as_ref().unwrap_err().to_string();
    assert!(
        msg(0).contains("not positive definite") && msg(0).contains("pivot 3 (asset `S2`)"),
        "{}",
        msg(0)
    );
    assert!(
        msg(1).contains("asset `S2`") && msg(1).contains("weight"),
        "{}",
        msg(1)
    );
    assert!(got[2].is_ok());
    assert!(msg(3).contains("[-1, 1]"), "{}", msg(3));
    let one = McParams { paths: 1, ..run };
    assert!(rt.price_basket(&specs[..1], &one, Method::MonteCarlo)[0].is_err());
}

/// Sobol baskets (randomised QMC, one dimension an asset): the geometric basket within 4
/// standard errors of its closed form, with a standard error well under Philox's at the
/// same paths; the bits do not depend on how the blocks are cut.
#[test]
fn sobol_baskets_meet_the_closed_form_with_smaller_errors() {
    let rt = Runtime::cpu();
    let mut u = Uniforms(0x5eed_50b0);
    for (n, kind) in [
        (1, OptionType::Call),
        (3, OptionType::Put),
        (8, OptionType::Call),
        (17, OptionType::Put),
    ] {
        let spec = random_basket(&mut u, n, kind, BasketAverage::Geometric);
        let exact = spec.price_analytic().unwrap();
        let philox = McParams {
            paths: 1 << 14,
            seed: 77,
            ..McParams::default()
        };
        let sobol = McParams {
            rng: Rng::Sobol { replicates: 16 },
            ..philox
        };
        let p = rt
            .price_basket(std::slice::from_ref(&spec), &philox, Method::MonteCarlo)
            .remove(0)
            .unwrap();
        let q = rt
            .price_basket(std::slice::from_ref(&spec), &sobol, Method::MonteCarlo)
            .remove(0)
            .unwrap();
        assert!(
            (q.price - exact).abs() <= 4.0 * q.std_error,
            "N {n}: {} +- {} vs {exact}",
            q.price,
            q.std_error
        );
        assert!(
            q.std_error < p.std_error / 2.0,
            "N {n}: sobol se {} vs philox {}",
            q.std_error,
            p.std_error
        );
        // blocks cut anywhere give the same price
        let nb = kiln_cpu::finance::block_count(&sobol);
        let mut blocks = kiln_cpu::finance::simulate_basket_blocks(&spec, &sobol, 0, 0..nb / 3).unwrap();
        blocks.extend(kiln_cpu::finance::simulate_basket_blocks(&spec, &sobol, 0, nb / 3..nb).unwrap());
        let again = kiln_core::finance::basket::finish_basket(&spec, &sobol, &blocks).unwrap();
        assert_eq!(again.price.to_bits(), q.price.to_bits());
    }
    // arithmetic with the control variate and antithetic pairs: close to Philox's far longer run
    let spec = random_basket(&mut u, 5, OptionType::Call, BasketAverage::Arithmetic);
    let long = McParams {
        paths: 1 << 20,
        control_variate: true,
        seed: 5,
        ..McParams::default()
    };
    let q = McParams {
        paths: 1 << 14,
        antithetic: true,
        rng: Rng::Sobol { replicates: 16 },
        ..long
    };
    let a = rt
        .price_basket(std::slice::from_ref(&spec), &long, Method::MonteCarlo)
        .remove(0)
        .unwrap();
    let b = rt
        .price_basket(std::slice::from_ref(&spec), &q, Method::MonteCarlo)
        .remove(0)
        .unwrap();
    let se = (a.std_error.powi(2) + b.std_error.powi(2)).sqrt();
    assert!(
        (a.price - b.price).abs() <= 4.0 * se,
        "{} vs {} (se {se})",
        a.price,
        b.price
    );
}
