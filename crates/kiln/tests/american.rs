//! American options on the CPU through the runtime: Longstaff-Schwartz against the binomial
//! tree on Longstaff & Schwartz's Table 1 and on random puts and calls with dividends, the
//! tree against the published values, and the errors a bad option or run gets; American
//! rainbows through the runtime.
#![allow(clippy::unwrap_used)]

use kiln::finance::american::{american_binomial, AmericanSpec};
use kiln::Runtime;
use kiln_core::finance::{McParams, OptionType, Rng};
use kiln_cpu::finance as cpu;

/// Longstaff & Schwartz (2001), Table 1 (K = 40, r = 0.06): S, sigma, T, finite-difference
/// American put.
const LS_TABLE: [(f64, f64, f64, f64); 7] = [
    (36.0, 0.2, 1.0, 4.478),
    (36.0, 0.2, 2.0, 4.840),
    (36.0, 0.4, 1.0, 7.101),
    (38.0, 0.2, 1.0, 3.250),
    (40.0, 0.2, 1.0, 2.314),
    (42.0, 0.2, 1.0, 1.617),
    (44.0, 0.2, 1.0, 1.110),
];

fn ls_put(s: f64, v: f64, t: f64) -> AmericanSpec {
    AmericanSpec {
        option_type: OptionType::Put,
        spot: s,
        strike: 40.0,
        rate: 0.06,
        dividend: 0.0,
        volatility: v,
        maturity: t,
        // 50 exercise dates a year, as in the paper
        exercise_dates: (50.0 * t) as u32,
    }
}

fn mc(paths: u64, seed: u64) -> McParams {
    McParams {
        paths,
        seed,
        ..McParams::default()
    }
}

/// Paths for the statistical tests: the workspace's own crates are unoptimised in debug
/// builds, so fewer there.
fn paths() -> u64 {
    if cfg!(debug_assertions) {
        1 << 14
    } else {
        1 << 16
    }
}

#[test]
fn tree_matches_the_published_table() {
    for (s, v, t, want) in LS_TABLE {
        let got = american_binomial(&ls_put(s, v, t), 2000).unwrap();
        assert!(
            (got - want).abs() <= 2e-3,
            "S {s} sigma {v} T {t}: {got} vs {want}"
        );
    }
}

#[test]
fn lsm_is_near_the_tree_on_the_longstaff_schwartz_table() {
    let rt = Runtime::cpu();
    let specs: Vec<AmericanSpec> = LS_TABLE.iter().map(|&(s, v, t, _)| ls_put(s, v, t)).collect();
    let res = rt.price_american(&specs, &mc(paths(), 2001));
    for (spec, r) in specs.iter().zip(res) {
        let r = r.unwrap();
        let tree = american_binomial(spec, 2000).unwrap();
        let tol = 4.0 * r.std_error + 0.02;
        assert!(
            (r.price - tree).abs() <= tol,
            "{spec:?}: lsm {} +- {}, tree {tree}",
            r.price,
            r.std_error
        );
        assert!(r.std_error > 0.0 && r.paths_used == paths());
    }
}

#[test]
fn lsm_is_near_the_tree_on_random_puts_and_calls_with_dividends() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut specs = Vec::new();
    for i in 0..8 {
        let call = i % 2 == 1;
        let t = 0.25 + 1.25 * next();
        specs.push(AmericanSpec {
            option_type: if call { OptionType::Call } else { OptionType::Put },
            spot: 34.0 + 12.0 * next(),
            strike: 40.0,
            rate: 0.01 + 0.06 * next(),
            // calls need a dividend yield to be worth exercising early
            dividend: if call { 0.04 + 0.06 * next() } else { 0.03 * next() },
            volatility: 0.15 + 0.3 * next(),
            maturity: t,
            exercise_dates: ((50.0 * t).ceil() as u32).max(8),
        });
    }
    let res = Runtime::cpu().price_american(&specs, &mc(paths(), 77));
    for (spec, r) in specs.iter().zip(res) {
        let r = r.unwrap();
        let tree = american_binomial(spec, 2000).unwrap();
        let tol = 4.0 * r.std_error + 0.02;
        assert!(
            (r.price - tree).abs() <= tol,
            "{spec:?}: lsm {} +- {}, tree {tree}",
            r.price,
            r.std_error
        );
        // and never meaningfully below the European price
        assert!(r.price >= spec.european_price() - 4.0 * r.std_error - 1e-9);
    }
}

#[test]
fn runtime_gives_the_engines_bits_and_slot_errors() {
    let rt = Runtime::cpu();
    let good = ls_put(38.0, 0.25, 0.5);
    let mut bad = good;
    bad.exercise_dates = 0;
    let run = mc(2 * 1024 + 3, 5);
    let res = rt.price_american(&[good, bad, good], &run);
    let a = res[0].as_ref().unwrap();
    assert_eq!(
        a.price.to_bits(),
        cpu::price_american(&good, &run, 0).unwrap().price.to_bits()
    );
    // option 2 uses its own stream
    let c = res[2].as_ref().unwrap();
    assert_ne!(a.price.to_bits(), c.price.to_bits());
    assert_eq!(
        c.price.to_bits(),
        cpu::price_american(&good, &run, 2).unwrap().price.to_bits()
    );
    assert!(res[1]
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("exercise_dates"));
    let anti = McParams {
        antithetic: true,
        ..run
    };
    assert!(rt.price_american(&[good], &anti)[0]
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("antithetic"));
    let sobol = McParams {
        rng: Rng::Sobol { replicates: 4 },
        ..run
    };
    assert!(rt.price_american(&[good], &sobol)[0].is_err());
    // deep in the money with a high rate: exercising now wins
    let deep = AmericanSpec { spot: 5.0, ..good };
    let r = rt.price_american(&[deep], &run).remove(0).unwrap();
    assert_eq!((r.price, r.std_error), (35.0, 0.0));
    let tree = rt.price_american_tree(&[good, deep], 500);
    assert!((tree[0].as_ref().unwrap().price - american_binomial(&good, 500).unwrap()).abs() == 0.0);
    assert_eq!(tree[1].as_ref().unwrap().price, 35.0);
}

#[test]
fn out_of_the_money_everywhere_falls_back_to_continue() {
    // A far out-of-the-money put: almost no path is ever in the money, so most dates have
    // no regression; the price is finite and tiny.
    let spec = AmericanSpec {
        spot: 400.0,
        ..ls_put(36.0, 0.1, 0.5)
    };
    let r = Runtime::cpu()
        .price_american(&[spec], &mc(3000, 1))
        .remove(0)
        .unwrap();
    assert!(r.price.is_finite() && r.price >= 0.0 && r.price < 1e-6, "{r:?}");
    assert!(r.std_error.is_finite());
}

/// An American max-call on two assets through the runtime: the CPU engine's bits in
/// each slot (streams `first_option + i`), a bad option an error in its slot naming the
/// field, and the Bermudan worth at least the one-date (European) option less noise.
#[test]
fn american_rainbows_price_through_the_runtime() {
    use kiln::finance::american::{AmericanRainbowSpec, BasketAsset, Extreme};
    let rt = Runtime::cpu();
    let spec = AmericanRainbowSpec {
        kind: OptionType::Call,
        extreme: Extreme::Max,
        strike: 100.0,
        rate: 0.05,
        maturity: 3.0,
        exercise_dates: 9,
        assets: vec![
            BasketAsset::new(100.0, 0.2, 0.1, 1.0),
            BasketAsset::new(100.0, 0.2, 0.1, 1.0),
        ],
        correlation: vec![1.0, 0.0, 0.0, 1.0],
    };
    let bad = AmericanRainbowSpec {
        maturity: -1.0,
        ..spec.clone()
    };
    let one_date = AmericanRainbowSpec {
        exercise_dates: 1,
        ..spec.clone()
    };
    let m = mc(1 << 13, 4);
    let got = rt.price_american_rainbow_batch(&[spec.clone(), bad, one_date], &m, 7);
    let want = cpu::price_american_rainbow(&spec, &m, 7).unwrap();
    let first = got[0].as_ref().unwrap();
    assert_eq!(first.price.to_bits(), want.price.to_bits());
    assert_eq!(first.paths_used, 1 << 13);
    let e = got[1].as_ref().unwrap_err().to_string();
    assert!(e.contains("maturity"), "{e}");
    let eu = got[2].as_ref().unwrap();
    assert!(first.price > eu.price - 4.0 * eu.std_error, "{first:?} vs {eu:?}");
}
