use super::*;
use kiln_core::finance::basket::BasketAsset;
use kiln_core::finance::rainbow::{stulz, Extreme};
use kiln_core::finance::spread::TwoAssets;
use kiln_core::finance::OptionType;

/// The Broadie-Glasserman / Andersen-Broadie max-call: `n` independent assets, each
/// spot `s0`, sigma 20%, dividend 10%; K = 100, r = 5%, T = 3, 9 exercise dates.
fn max_call(n: usize, s0: f64) -> AmericanRainbowSpec {
    let mut corr = vec![0.0; n * n];
    for i in 0..n {
        corr[i * n + i] = 1.0;
    }
    AmericanRainbowSpec {
        kind: OptionType::Call,
        extreme: Extreme::Max,
        strike: 100.0,
        rate: 0.05,
        maturity: 3.0,
        exercise_dates: 9,
        assets: (0..n).map(|_| BasketAsset::new(s0, 0.2, 0.1, 1.0)).collect(),
        correlation: corr,
    }
}

fn mc(paths: u64, seed: u64) -> McParams {
    McParams {
        paths,
        seed,
        ..McParams::default()
    }
}

/// A two-asset Bermudan rainbow on independent assets by the product of two
/// Cox-Ross-Rubinstein trees with `k` steps a date: exercise at `t = 0` and every `k`-th
/// level. An independent reference for the Monte Carlo (no published value is used).
fn lattice_2d(spec: &AmericanRainbowSpec, k: usize) -> f64 {
    let dates = spec.exercise_dates as usize;
    let steps = k * dates;
    let dt = spec.maturity / steps as f64;
    let disc = (-spec.rate * dt).exp();
    let leg = |a: &BasketAsset| {
        let u = (a.volatility * dt.sqrt()).exp();
        let p = (((spec.rate - a.dividend) * dt).exp() - 1.0 / u) / (u - 1.0 / u);
        (u, p, a.weight * a.spot)
    };
    let (u1, p1, x1) = leg(&spec.assets[0]);
    let (u2, p2, x2) = leg(&spec.assets[1]);
    let price = |x: f64, u: f64, i: usize, j: usize| x * u.powi(2 * j as i32 - i as i32);
    let w = steps + 1;
    let mut v = vec![0.0f64; w * w];
    for a in 0..=steps {
        for b in 0..=steps {
            v[a * w + b] = spec.payoff(&[price(x1, u1, steps, a), price(x2, u2, steps, b)]);
        }
    }
    let (puu, pud, pdu, pdd) = (
        disc * p1 * p2,
        disc * p1 * (1.0 - p2),
        disc * (1.0 - p1) * p2,
        disc * (1.0 - p1) * (1.0 - p2),
    );
    for i in (0..steps).rev() {
        let exercise = i % k == 0;
        for a in 0..=i {
            for b in 0..=i {
                let c = puu * v[(a + 1) * w + b + 1]
                    + pud * v[(a + 1) * w + b]
                    + pdu * v[a * w + b + 1]
                    + pdd * v[a * w + b];
                v[a * w + b] = if exercise {
                    c.max(spec.payoff(&[price(x1, u1, i, a), price(x2, u2, i, b)]))
                } else {
                    c
                };
            }
        }
    }
    v[0]
}

/// The lattice with `k` and `k + 1` steps a date, averaged (their odd-even wobble cancels).
fn lattice_ref(spec: &AmericanRainbowSpec) -> f64 {
    0.5 * (lattice_2d(spec, 24) + lattice_2d(spec, 25))
}

/// One exercise date (and an out-of-the-money spot, so exercising now is worth nothing) is
/// the European rainbow: Stulz's closed form within 4 standard errors, max-call and
/// min-put, correlated and with unequal dividends.
#[test]
fn one_date_is_stulz_s_european_rainbow() {
    for (kind, extreme, s, seed) in [
        (OptionType::Call, Extreme::Max, 90.0, 1),
        (OptionType::Put, Extreme::Min, 110.0, 2),
    ] {
        let spec = AmericanRainbowSpec {
            kind,
            extreme,
            strike: 100.0,
            rate: 0.04,
            maturity: 1.0,
            exercise_dates: 1,
            assets: vec![
                BasketAsset::new(s, 0.25, 0.02, 1.0),
                BasketAsset::new(s + 5.0, 0.3, 0.05, 1.0),
            ],
            correlation: vec![1.0, 0.3, 0.3, 1.0],
        };
        let r = price_american_rainbow(&spec, &mc(1 << 15, seed), 0).unwrap();
        let a = &spec.assets;
        let legs = TwoAssets {
            f1: a[0].spot * ((spec.rate - a[0].dividend) * spec.maturity).exp(),
            f2: a[1].spot * ((spec.rate - a[1].dividend) * spec.maturity).exp(),
            v1: a[0].volatility * spec.maturity.sqrt(),
            v2: a[1].volatility * spec.maturity.sqrt(),
            rho: 0.3,
            df: (-spec.rate * spec.maturity).exp(),
        };
        let want = stulz(kind, extreme, &legs, spec.strike).unwrap();
        assert!(
            (r.price - want).abs() <= 4.0 * r.std_error,
            "{kind:?} {extreme:?}: {r:?} vs Stulz {want}"
        );
    }
}

/// The two-asset Bermudan max-call of Broadie-Glasserman / Andersen-Broadie (S0 = 90, 100,
/// 110) against the two-dimensional lattice of the same option, an independent computation
/// of the same Bermudan price (no published value is typed here). Longstaff-Schwartz's
/// estimate is biased low by the fitted rule's suboptimality, so it must lie within
/// `[reference - 4 se - bias, reference + 4 se]`, `bias` 1% of the price. That allowance is
/// set from kiln's own measurement, not a published one: 2^18 paths
/// (`large_runs_print_the_estimates`) land 8.1084 +- 0.0238, 13.9375 +- 0.0300 and
/// 21.3541 +- 0.0348 against the lattice's 8.0782, 13.9051 and 21.3505, within 1.3
/// standard errors, so this basis's low bias is below 0.4% of the price and 1% leaves room
/// for other seeds. The lattice's own error (24 and 25 steps a date differ by at most
/// 0.016 here) is below a fifth of the standard error at 2^15 paths.
#[test]
fn two_asset_bermudan_max_call_matches_the_lattice() {
    for (s0, seed) in [(90.0, 11), (100.0, 12), (110.0, 13)] {
        let spec = max_call(2, s0);
        let want = lattice_ref(&spec);
        let r = price_american_rainbow(&spec, &mc(1 << 15, seed), 0).unwrap();
        let bias = 0.01 * want;
        println!(
            "S0 {s0}: LSM {:.4} +- {:.4}, lattice {want:.4} (24: {:.4}, 25: {:.4})",
            r.price,
            r.std_error,
            lattice_2d(&spec, 24),
            lattice_2d(&spec, 25)
        );
        assert!(
            r.price <= want + 4.0 * r.std_error && r.price >= want - 4.0 * r.std_error - bias,
            "S0 {s0}: {r:?} vs lattice {want}"
        );
    }
}

/// The five-asset Bermudan max-call (the same terms as `max_call`) against the values of
/// the literature as a published secondary source quotes them: the "Comparison to the
/// Literature" slide (column "Literature", rows d = 5) of Georgescu and Müller's seminar
/// presentation "Deep Optimal Stopping & Pricing of American-Style Options",
/// https://github.com/konmue/american_options/blob/0f8331fc2e66c14c88891cb1c041815ff340a446/presentation/presentation.md
/// (its references list Longstaff-Schwartz 2001, Rogers 2002 and Becker et al. 2019 and
/// 2020, among others; the slide does not say which paper each value is from): 16.64, 26.15
/// and 36.78 for S0 = 90, 100 and 110, to 2 decimals. The original tables (Andersen-Broadie
/// 2004, Broadie-Cao 2008) were not found in a form that could be cited. The same presentation's "Results: LSM" slide states the known low bias of
/// the in-sample estimator: with Longstaff and Schwartz's basis ("ls") it prices 16.56 and
/// 26.01 (S0 = 90, 100), 0.5% under the literature. The test accepts the estimate within
/// `[value - 4 se - 1% - 0.005, value + 4 se + 0.005]`: its noise, that bias with room
/// (twice it), and the table's rounding. kiln's 2^18-path estimates
/// (`large_runs_print_the_estimates`) are 16.6228 +- 0.0321, 26.1371 +- 0.0384 and
/// 36.7534 +- 0.0434, within 1 standard error of the quoted values.
#[test]
fn five_asset_bermudan_max_call_matches_the_quoted_literature() {
    for (s0, want, seed) in [(90.0, 16.64, 31), (100.0, 26.15, 32), (110.0, 36.78, 33)] {
        let r = price_american_rainbow(&max_call(5, s0), &mc(1 << 14, seed), 0).unwrap();
        println!(
            "d 5 S0 {s0}: LSM {:.4} +- {:.4}, quoted {want}",
            r.price, r.std_error
        );
        let (lo, hi) = (
            want - 4.0 * r.std_error - 0.01 * want - 0.005,
            want + 4.0 * r.std_error + 0.005,
        );
        assert!(r.price >= lo && r.price <= hi, "S0 {s0}: {r:?} vs {want}");
    }
}

/// A two-asset Bermudan min-put: independent assets (the product lattice needs them) with
/// unequal volatilities and dividends, K = 100, r = 6%, T = 1, 12 exercise dates, S0 = 90
/// and 100; against the product lattice with the max-call's tolerance. Here the rule's low
/// bias shows: 2^18 paths (`large_runs_print_the_estimates`) give 18.0184 +- 0.0224 and
/// 11.8275 +- 0.0212 against the lattice's 18.0950 and 11.8883, 0.4% and 0.5% below, inside
/// the 1% allowance.
fn min_put(s0: f64) -> AmericanRainbowSpec {
    AmericanRainbowSpec {
        kind: OptionType::Put,
        extreme: Extreme::Min,
        strike: 100.0,
        rate: 0.06,
        maturity: 1.0,
        exercise_dates: 12,
        assets: vec![
            BasketAsset::new(s0, 0.2, 0.0, 1.0),
            BasketAsset::new(s0 + 5.0, 0.3, 0.02, 1.0),
        ],
        correlation: vec![1.0, 0.0, 0.0, 1.0],
    }
}

#[test]
fn two_asset_bermudan_min_put_matches_the_lattice() {
    for (s0, seed) in [(90.0, 21), (100.0, 22)] {
        let spec = min_put(s0);
        let want = lattice_ref(&spec);
        let r = price_american_rainbow(&spec, &mc(1 << 15, seed), 0).unwrap();
        let eu = price_american_rainbow(
            &AmericanRainbowSpec {
                exercise_dates: 1,
                ..spec.clone()
            },
            &mc(1 << 15, seed),
            0,
        )
        .unwrap();
        println!(
            "min-put S0 {s0}: LSM {:.4} +- {:.4}, lattice {want:.4}, european {:.4}",
            r.price, r.std_error, eu.price
        );
        assert!(
            r.price <= want + 4.0 * r.std_error && r.price >= want - 4.0 * r.std_error - 0.01 * want,
            "S0 {s0}: {r:?} vs lattice {want}"
        );
        // early exercise is worth something here (r > 0, a put)
        assert!(want > eu.price + 4.0 * eu.std_error, "{want} vs {eu:?}");
    }
}

/// A large run for the record: the two-asset rows, the five-asset max-call (its quoted values
/// are in the five-asset test) and the min-put, printed.
/// `cargo test -p kiln-cpu --lib finance::american_rainbow -- --ignored --nocapture`.
#[test]
#[ignore]
fn large_runs_print_the_estimates() {
    for (n, s0) in [
        (2, 90.0),
        (2, 100.0),
        (2, 110.0),
        (5, 90.0),
        (5, 100.0),
        (5, 110.0),
    ] {
        let spec = max_call(n, s0);
        let r = price_american_rainbow(&spec, &mc(1 << 18, 7), 0).unwrap();
        let reference = if n == 2 { lattice_ref(&spec) } else { f64::NAN };
        println!(
            "n {n} S0 {s0}: LSM {:.4} +- {:.4} lattice {reference:.4}",
            r.price, r.std_error
        );
    }
    for s0 in [90.0, 100.0] {
        let spec = min_put(s0);
        let r = price_american_rainbow(&spec, &mc(1 << 18, 7), 0).unwrap();
        println!(
            "min-put S0 {s0}: LSM {:.4} +- {:.4} lattice {:.4}",
            r.price,
            r.std_error,
            lattice_ref(&spec)
        );
    }
}

#[test]
fn bits_do_not_depend_on_threads_and_more_dates_are_worth_more() {
    let spec = max_call(3, 100.0);
    let run = mc(2 * 1024 + 300, 5);
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let two = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let a = one.install(|| price_american_rainbow(&spec, &run, 0)).unwrap();
    let b = two.install(|| price_american_rainbow(&spec, &run, 0)).unwrap();
    assert_eq!(a.price.to_bits(), b.price.to_bits());
    assert_eq!(a.std_error.to_bits(), b.std_error.to_bits());
    // deep in the money with a 10% dividend: early exercise is worth a lot
    let deep = max_call(2, 140.0);
    let berm = price_american_rainbow(&deep, &mc(1 << 13, 9), 0).unwrap();
    let euro = price_american_rainbow(
        &AmericanRainbowSpec {
            exercise_dates: 1,
            ..deep.clone()
        },
        &mc(1 << 13, 9),
        0,
    )
    .unwrap();
    assert!(berm.price > euro.price + 5.0, "{berm:?} vs {euro:?}");
    assert!(berm.price >= deep.payoff_now());
}

#[test]
fn bad_input_names_the_field() {
    let reason =
        |s: AmericanRainbowSpec, m: McParams| price_american_rainbow(&s, &m, 0).unwrap_err().to_string();
    let ok = max_call(2, 100.0);
    let m = mc(1000, 1);
    assert!(reason(
        AmericanRainbowSpec {
            strike: 0.0,
            ..ok.clone()
        },
        m
    )
    .contains("strike"));
    assert!(reason(
        AmericanRainbowSpec {
            exercise_dates: 0,
            ..ok.clone()
        },
        m
    )
    .contains("exercise_dates"));
    let mut neg = ok.clone();
    neg.assets[1].weight = -1.0;
    assert!(reason(neg, m).contains("asset 2: weight"));
    let mut vol = ok.clone();
    vol.assets[0].volatility = f64::NAN;
    assert!(reason(vol, m).contains("volatility"));
    let bad_corr = AmericanRainbowSpec {
        correlation: vec![1.0, 0.5, 0.4, 1.0],
        ..ok.clone()
    };
    assert!(reason(bad_corr, m).contains("symmetric"));
    let none = AmericanRainbowSpec {
        assets: vec![],
        correlation: vec![],
        ..ok.clone()
    };
    assert!(reason(none, m).contains("0 assets"));
    assert!(reason(
        ok.clone(),
        McParams {
            antithetic: true,
            ..m
        }
    )
    .contains("antithetic"));
    assert!(reason(ok.clone(), McParams { paths: 1 << 30, ..m }).contains("GiB"));
    let r = price_american_rainbow_portfolio(
        &[
            ok.clone(),
            AmericanRainbowSpec {
                rate: f64::INFINITY,
                ..ok
            },
        ],
        &m,
        0,
    );
    assert!(r[0].is_ok());
    assert!(r[1].as_ref().unwrap_err().to_string().contains("rate"));
}
