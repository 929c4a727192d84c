//! Monte Carlo Greeks on the CPU against closed-form Greeks, each within 4 of its standard
//! errors: European (Black-Scholes-Merton's formulas, Philox and Sobol), the geometric
//! Asian (Kemna-Vorst differenced), continuously monitored barriers (Reiner-Rubinstein
//! differenced), Heston (the semi-analytic price differenced: delta, gamma, dV/dv0, rho,
//! theta; and NAG's published Heston Greek table), a two-asset spread (Bjerksund-Stensland differenced, per-asset deltas and
//! vegas), a two-asset rainbow (Stulz differenced) and an American put (the binomial tree
//! differenced). Also: standard errors are positive and shrink like 1/sqrt(paths), and bad
//! inputs are errors in their slots.
#![allow(clippy::unwrap_used)]

use kiln::finance::american::{american_binomial, AmericanSpec};
use kiln::finance::{BookOption, Estimate, GreeksParams, McGreeks};
use kiln::Runtime;
use kiln_core::finance::barrier::barrier_price;
use kiln_core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln_core::finance::heston::{HestonParams, HestonSpec};
use kiln_core::finance::{bsm, geometric_asian, McParams, OptionSpec, OptionType, Rng, Style};

/// An exact Greek set: price, delta, gamma and vega per asset, rho, theta.
struct Exact {
    price: f64,
    delta: Vec<f64>,
    gamma: Vec<f64>,
    vega: Vec<f64>,
    rho: f64,
    theta: f64,
}

/// Every estimate of `g` within 4 standard errors of `want` (each standard error > 0),
/// the Greeks `skip` names left out; every miss listed at once.
fn check(name: &str, g: &McGreeks, want: &Exact, skip: &[&str]) {
    let mut rows: Vec<(String, Estimate, f64)> = vec![("price".into(), g.price, want.price)];
    for (what, est, ex) in [
        ("delta", &g.delta, &want.delta),
        ("gamma", &g.gamma, &want.gamma),
        ("vega", &g.vega, &want.vega),
    ] {
        assert_eq!(est.len(), ex.len(), "{name}: {what} per asset");
        for (i, (e, x)) in est.iter().zip(ex).enumerate() {
            rows.push((format!("{what}_{}", i + 1), *e, *x));
        }
    }
    rows.push(("rho".into(), g.rho, want.rho));
    rows.push(("theta".into(), g.theta, want.theta));
    let mut bad = Vec::new();
    for (what, e, x) in rows {
        let z = (e.value - x) / e.std_error;
        println!(
            "{name} {what}: {:.6} +- {:.6} exact {x:.6} z {z:+.2}",
            e.value, e.std_error
        );
        if skip.iter().any(|s| what.starts_with(s)) {
            continue;
        }
        if !(e.std_error > 0.0 && z.abs() <= 4.0) {
            bad.push(format!(
                "{what}: {} +- {} vs {x} (z {z:+.2})",
                e.value, e.std_error
            ));
        }
    }
    assert!(bad.is_empty(), "{name}: {bad:#?}");
}

/// The Greeks of `f(x)` (as for [`differenced`]) by the Monte Carlo's own differences: the
/// default bumps, theta one-sided. What the estimator converges to; the comparison where the
/// Monte Carlo error is far smaller than the bumps' `O(h^2)` bias (Sobol points) or the
/// reference is too rough for a finer difference (the tree).
fn at_mc_steps(f: &dyn Fn(&[f64]) -> f64, x: &[f64], n: usize) -> Exact {
    let p = GreeksParams::default();
    let mut short = x.to_vec();
    let d = p.time_bump.min(0.5 * x[2 * n + 1]);
    short[2 * n + 1] -= d;
    Exact {
        price: f(x),
        delta: (0..n).map(|i| d1(f, x, i, p.spot_bump * x[i])).collect(),
        gamma: (0..n).map(|i| d2(f, x, i, p.spot_bump * x[i])).collect(),
        vega: (0..n).map(|i| d1(f, x, n + i, p.vol_bump * x[n + i])).collect(),
        rho: d1(f, x, 2 * n, p.rate_bump),
        theta: (f(&short) - f(x)) / d,
    }
}

/// Central differences of `f` (a price of a parameter vector) at `x`: first derivative in
/// coordinate `i` with step `h`, second with step `h2`.
fn d1(f: &dyn Fn(&[f64]) -> f64, x: &[f64], i: usize, h: f64) -> f64 {
    let (mut up, mut dn) = (x.to_vec(), x.to_vec());
    up[i] += h;
    dn[i] -= h;
    (f(&up) - f(&dn)) / (2.0 * h)
}

fn d2(f: &dyn Fn(&[f64]) -> f64, x: &[f64], i: usize, h: f64) -> f64 {
    let (mut up, mut dn) = (x.to_vec(), x.to_vec());
    up[i] += h;
    dn[i] -= h;
    (f(&up) - 2.0 * f(x) + f(&dn)) / (h * h)
}

/// The Greeks of a closed form `f(x)` of `x = [s_1.., vol_1.., r, T]` (`n` assets) by
/// central differences of steps `rel` relative (spot, vol) and absolute (rate, maturity);
/// theta is `-dV/dT`.
fn differenced(f: &dyn Fn(&[f64]) -> f64, x: &[f64], n: usize, rel: f64) -> Exact {
    Exact {
        price: f(x),
        delta: (0..n).map(|i| d1(f, x, i, rel * x[i])).collect(),
        gamma: (0..n).map(|i| d2(f, x, i, rel * x[i])).collect(),
        vega: (0..n).map(|i| d1(f, x, n + i, rel * x[n + i])).collect(),
        rho: d1(f, x, 2 * n, 1e-4),
        theta: -d1(f, x, 2 * n + 1, 1e-4),
    }
}

fn greeks(rt: &Runtime, o: BookOption, mc: &McParams) -> McGreeks {
    rt.mc_greeks(&[o], mc, &GreeksParams::default(), 0)
        .unwrap()
        .pop()
        .unwrap()
        .unwrap()
}

fn run(paths: u64, steps: u32, seed: u64) -> McParams {
    McParams {
        paths,
        steps,
        seed,
        ..McParams::default()
    }
}

#[test]
fn european_greeks_are_black_scholes_merton_s() {
    let rt = Runtime::cpu();
    for (kind, rng, seed) in [
        (OptionType::Call, Rng::Philox, 1),
        (OptionType::Put, Rng::Philox, 2),
        (OptionType::Call, Rng::Sobol { replicates: 16 }, 3),
    ] {
        let s = OptionSpec::european(kind, 100.0, 105.0, 0.03, 0.01, 0.25, 1.0);
        let mc = McParams {
            rng,
            ..run(1 << 16, 1, seed)
        };
        let g = greeks(&rt, BookOption::Plain(s), &mc);
        let b = bsm(kind, 100.0, 105.0, 0.03, 0.01, 0.25, 1.0);
        let want = match rng {
            Rng::Philox => Exact {
                price: b.price,
                delta: vec![b.delta],
                gamma: vec![b.gamma],
                vega: vec![b.vega],
                rho: b.rho,
                theta: b.theta,
            },
            // randomised QMC's error (gamma's about 1e-7 here) is below the bumps' bias
            // (gamma's about 2e-6): the formulas differenced with the same bumps
            Rng::Sobol { .. } => {
                let f = |x: &[f64]| bsm(kind, x[0], 105.0, x[2], 0.01, x[1], x[3]).price;
                at_mc_steps(&f, &[100.0, 0.25, 0.03, 1.0], 1)
            }
        };
        check(&format!("european {kind:?} {}", rng.name()), &g, &want, &[]);
    }
}

#[test]
fn geometric_asian_greeks_are_kemna_vorst_s_differenced() {
    let rt = Runtime::cpu();
    let s = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.04, 0.0, 0.3, 1.0).with_style(
        Style::AsianGeometric,
        Some(12),
        None,
    );
    let g = greeks(&rt, BookOption::Plain(s), &run(1 << 16, 1, 7));
    let f = |x: &[f64]| geometric_asian(OptionType::Call, x[0], 100.0, x[2], 0.0, x[1], x[3], 12);
    check(
        "geometric asian",
        &g,
        &differenced(&f, &[100.0, 0.3, 0.04, 1.0], 1, 1e-3),
        &[],
    );
}

#[test]
fn continuous_barrier_greeks_are_reiner_rubinstein_s_differenced() {
    let rt = Runtime::cpu();
    for (kind, style, barrier, seed) in [
        (OptionType::Call, Style::BarrierDownOut, 85.0, 11),
        (OptionType::Put, Style::BarrierUpIn, 115.0, 12),
    ] {
        let s = OptionSpec::european(kind, 100.0, 100.0, 0.03, 0.01, 0.25, 0.75).with_style(
            style,
            None,
            Some(barrier),
        );
        let g = greeks(&rt, BookOption::Plain(s), &run(1 << 16, 16, seed));
        let f = |x: &[f64]| barrier_price(kind, style, x[0], 100.0, barrier, 0.0, x[2], 0.01, x[1], x[3]);
        let want = differenced(&f, &[100.0, 0.25, 0.03, 0.75], 1, 1e-3);
        check(&format!("barrier {}", style.name()), &g, &want, &[]);
    }
}

#[test]
fn heston_greeks_are_the_semi_analytic_price_s_differenced() {
    let rt = Runtime::cpu();
    let hp = HestonParams {
        kappa: 2.0,
        theta: 0.04,
        xi: 0.4,
        rho: -0.6,
        v0: 0.05,
    };
    let spec = |x: &[f64]| HestonSpec {
        option: OptionSpec::european(OptionType::Call, x[0], 100.0, x[2], 0.0, 0.2, x[3]),
        heston: HestonParams { v0: x[1], ..hp },
    };
    let g = greeks(
        &rt,
        BookOption::Heston(spec(&[100.0, 0.05, 0.02, 1.0])),
        &run(1 << 15, 32, 21),
    );
    let f = |x: &[f64]| spec(x).price_analytic().unwrap();
    check(
        "heston",
        &g,
        &differenced(&f, &[100.0, 0.05, 0.02, 1.0], 1, 1e-3),
        &[],
    );
}

/// NAG's published Heston Greek table: the example results of NAG Library routine S30NDF
/// (`nag_specfun_opt_heston_greeks_term`, Mark 31), which prices a European call under
/// Heston by Lewis's transform and reports its Greeks: "S30NDF Example Program Results",
/// https://support.nag.com/numeric/nl/nagdoc_31/ (examples/baseresults/s30ndfe.r.html).
/// Spot 100, strike 100, T = 1, vol of vol 0.5751, mean reversion 1.5768, correlation
/// -0.5711, variance 0.0175, mean of variance 0.0398, risk aversion 1 (the risk-neutral
/// Heston of Heston 1993: no market price of volatility risk). One row per (rate,
/// dividend): price, delta, gamma, vega (`dP/dv0`, the variance now), theta (`dP/dt`,
/// `= -dP/dT`), rho (`dP/dr`), each printed to 4 decimals.
const NAG_S30NDF: [(f64, f64, [f64; 6]); 4] = [
    (0.025, 0.01, [6.5961, 0.6616, 0.0270, 53.0023, -4.2941, 59.5669]),
    (0.025, -0.01, [7.9845, 0.7258, 0.0233, 51.8864, -5.7466, 64.5969]),
    (-0.025, 0.01, [3.9303, 0.5004, 0.0369, 53.4520, -1.8232, 46.1108]),
    (-0.025, -0.01, [5.0138, 0.5825, 0.0341, 55.4531, -2.8639, 53.2321]),
];

/// The NAG example's option at `x = [spot, v0, rate, maturity]` with dividend `q`.
fn nag_heston(q: f64, x: &[f64]) -> HestonSpec {
    HestonSpec {
        option: OptionSpec::european(OptionType::Call, x[0], 100.0, x[2], q, 0.2, x[3]),
        heston: HestonParams {
            kappa: 1.5768,
            theta: 0.0398,
            xi: 0.5751,
            rho: -0.5711,
            v0: x[1],
        },
    }
}

/// kiln's Heston Greeks against NAG's table, two ways. The semi-analytic price and its
/// central differences (the reference the Monte Carlo Greeks are checked against) within
/// 1e-4 of each printed value plus 1e-6 relative: the table's rounding is 5e-5, and the
/// differences' `O(h^2)` truncation (`h = 1e-3` relative) is far below it (kiln's values
/// land within 5e-5 of all 24 printed ones). And the Monte Carlo Greeks of the first row
/// (QE paths, 32 steps, the same run as the test above) each within 4 of its standard
/// errors of the table.
#[test]
fn heston_greeks_match_nag_s_published_table() {
    let x = [100.0, 0.0175, 0.0, 1.0];
    for (r, q, want) in NAG_S30NDF {
        let at = [x[0], x[1], r, x[3]];
        let f = |x: &[f64]| nag_heston(q, x).price_analytic().unwrap();
        let e = differenced(&f, &at, 1, 1e-3);
        let got = [e.price, e.delta[0], e.gamma[0], e.vega[0], e.theta, e.rho];
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let tol = 1e-4 + 1e-6 * w.abs();
            println!("nag r {r} q {q} [{i}]: kiln {g:.6} nag {w}");
            assert!(
                (g - w).abs() <= tol,
                "r {r} q {q}: [price, delta, gamma, vega, theta, rho][{i}] kiln {g} vs NAG {w}"
            );
        }
    }
    let rt = Runtime::cpu();
    let (r, q, want) = NAG_S30NDF[0];
    let g = greeks(
        &rt,
        BookOption::Heston(nag_heston(q, &[x[0], x[1], r, x[3]])),
        &run(1 << 15, 32, 41),
    );
    let exact = Exact {
        price: want[0],
        delta: vec![want[1]],
        gamma: vec![want[2]],
        vega: vec![want[3]],
        theta: want[4],
        rho: want[5],
    };
    check("heston vs NAG S30NDF", &g, &exact, &[]);
}

/// A two-asset basket of `average` on spots `x[0..2]`, vols `x[2..4]`, rate `x[4]` and
/// maturity `x[5]`.
fn two_assets(average: BasketAverage, weights: [f64; 2], strike: f64, x: &[f64]) -> BasketSpec {
    BasketSpec {
        kind: OptionType::Call,
        strike,
        rate: x[4],
        maturity: x[5],
        average,
        assets: vec![
            BasketAsset::new(x[0], x[2], 0.01, weights[0]),
            BasketAsset::new(x[1], x[3], 0.02, weights[1]),
        ],
        correlation: vec![1.0, 0.4, 0.4, 1.0],
    }
}

#[test]
fn spread_and_rainbow_greeks_per_asset_are_the_closed_forms_differenced() {
    let rt = Runtime::cpu();
    let x = [100.0, 95.0, 0.3, 0.2, 0.03, 1.0];
    for (average, weights, strike, seed) in [
        (BasketAverage::Arithmetic, [1.0, -1.0], 5.0, 31),
        (BasketAverage::Max, [1.0, 1.0], 100.0, 32),
    ] {
        let g = greeks(
            &rt,
            BookOption::Basket(two_assets(average, weights, strike, &x)),
            &run(1 << 17, 1, seed),
        );
        let f = |x: &[f64]| two_assets(average, weights, strike, x).price_analytic().unwrap();
        check(
            &format!("basket {}", average.name()),
            &g,
            &differenced(&f, &x, 2, 1e-3),
            &[],
        );
    }
}

#[test]
fn american_put_greeks_are_the_binomial_tree_s_differenced() {
    let rt = Runtime::cpu();
    let spec = |x: &[f64]| AmericanSpec {
        option_type: OptionType::Put,
        spot: x[0],
        strike: 100.0,
        rate: x[2],
        dividend: 0.0,
        volatility: x[1],
        maturity: x[3],
        exercise_dates: 16,
    };
    let x = [100.0, 0.25, 0.05, 1.0];
    let o = BookOption::American {
        spec: spec(&x),
        continuous: false,
    };
    let g = greeks(&rt, o, &run(1 << 15, 1, 41));
    let f = |x: &[f64]| american_binomial(&spec(x), 4000).unwrap();
    // the tree differenced with the Monte Carlo's own steps: the tree's own error, about
    // 1e-4 of the strike, would swamp a finer difference
    check("american put", &g, &at_mc_steps(&f, &x, 1), &[]);
}

#[test]
fn standard_errors_shrink_like_one_over_the_root_of_the_paths() {
    let rt = Runtime::cpu();
    let o = BookOption::Plain(OptionSpec::european(
        OptionType::Call,
        100.0,
        100.0,
        0.03,
        0.0,
        0.2,
        1.0,
    ));
    let small = greeks(&rt, o.clone(), &run(1 << 14, 1, 5));
    let large = greeks(&rt, o, &run(1 << 16, 1, 5));
    for (what, a, b) in [
        ("price", small.price, large.price),
        ("delta", small.delta[0], large.delta[0]),
        ("gamma", small.gamma[0], large.gamma[0]),
        ("vega", small.vega[0], large.vega[0]),
        ("rho", small.rho, large.rho),
        ("theta", small.theta, large.theta),
    ] {
        let ratio = b.std_error / a.std_error;
        println!(
            "{what}: se {:.3e} -> {:.3e}, ratio {ratio:.3}",
            a.std_error, b.std_error
        );
        assert!(a.std_error > 0.0 && b.std_error > 0.0, "{what}");
        // 4x the paths: ratio 1/2, within the spread of a 31-degree-of-freedom estimate
        assert!((0.3..0.75).contains(&ratio), "{what}: ratio {ratio}");
    }
    assert_eq!(large.paths_used, 1 << 16);
    assert_eq!(large.batches, 32);
}

#[test]
fn bad_options_are_errors_in_their_slots_and_bad_params_the_call_s() {
    let rt = Runtime::cpu();
    let good = BookOption::Plain(OptionSpec::european(
        OptionType::Call,
        100.0,
        100.0,
        0.03,
        0.0,
        0.2,
        1.0,
    ));
    let mut bad = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.03, 0.0, 0.2, 1.0);
    bad.volatility = -0.2;
    let american_sobol = BookOption::American {
        spec: AmericanSpec {
            option_type: OptionType::Put,
            spot: 100.0,
            strike: 100.0,
            rate: 0.03,
            dividend: 0.0,
            volatility: 0.2,
            maturity: 1.0,
            exercise_dates: 4,
        },
        continuous: false,
    };
    let mc = McParams {
        rng: Rng::Sobol { replicates: 4 },
        ..run(4096, 1, 9)
    };
    let out = rt
        .mc_greeks(
            &[good.clone(), BookOption::Plain(bad), american_sobol, good.clone()],
            &mc,
            &GreeksParams::default(),
            0,
        )
        .unwrap();
    assert!(out[0].is_ok());
    assert!(out[1].as_ref().unwrap_err().to_string().contains("volatility"));
    assert!(out[2].is_err(), "Longstaff-Schwartz takes no Sobol points");
    // option i is on stream i, whatever else is in the book: alone at stream 3, the bits
    // of slot 3
    let alone = rt
        .mc_greeks(std::slice::from_ref(&good), &mc, &GreeksParams::default(), 3)
        .unwrap();
    assert_eq!(alone[0].as_ref().unwrap(), out[3].as_ref().unwrap());
    // Sobol points do not depend on the stream (every option shares them), Philox's do
    assert_eq!(out[0].as_ref().unwrap(), out[3].as_ref().unwrap());
    let philox = rt
        .mc_greeks(
            &[good.clone(), good.clone()],
            &run(4096, 1, 9),
            &GreeksParams::default(),
            0,
        )
        .unwrap();
    assert_ne!(philox[0].as_ref().unwrap(), philox[1].as_ref().unwrap());
    let p = GreeksParams {
        batches: 1,
        ..GreeksParams::default()
    };
    assert!(rt.mc_greeks(&[good], &mc, &p, 0).is_err());
}
