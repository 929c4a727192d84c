//! Monte Carlo against the closed forms, the barrier and parity identities, variance
//! reduction, and reproducibility across chunking. Path counts are sized for debug builds.

use kiln_core::finance::{McParams, OptionSpec, OptionType, PriceResult, Style};
use kiln_cpu::finance::{
    block_count, bsm, finish, geometric_asian, price_analytic, price_mc, price_portfolio, simulate_blocks,
    BlockSums, BLOCK_SAMPLES,
};
use OptionType::{Call, Put};

fn mc(paths: u64, steps: u32, seed: u64) -> McParams {
    McParams {
        paths,
        steps,
        seed,
        antithetic: false,
        control_variate: false,
        fast_math: false,
        rng: kiln_core::finance::Rng::Philox,
    }
}

fn within(r: &PriceResult, exact: f64, sds: f64, what: &str) {
    let z = (r.price - exact) / r.std_error;
    assert!(
        z.abs() < sds,
        "{what}: MC {} +- {} vs exact {exact} ({z:.2} standard errors)",
        r.price,
        r.std_error
    );
}

/// (S, K, r, q, vol, T): at, in and out of the money, with and without dividends.
const GRID: [(f64, f64, f64, f64, f64, f64); 4] = [
    (100.0, 100.0, 0.05, 0.0, 0.2, 1.0),
    (100.0, 90.0, 0.03, 0.02, 0.35, 0.5),
    (42.0, 40.0, 0.10, 0.0, 0.2, 0.5),
    (80.0, 100.0, 0.01, 0.04, 0.5, 2.0),
];

#[test]
fn european_mc_within_three_standard_errors() {
    let run = mc(20_000, 4, 11);
    for (i, &(s, k, r, q, v, t)) in GRID.iter().enumerate() {
        for kind in [Call, Put] {
            let spec = OptionSpec::european(kind, s, k, r, q, v, t);
            let exact = bsm(kind, s, k, r, q, v, t);
            let res = price_mc(&spec, &run, i as u32).unwrap();
            within(&res, exact.price, 3.0, "european");
            assert_eq!(res.paths_used, 20_000);
            assert!(res.ci95.0 < res.price && res.price < res.ci95.1);
            // Pathwise Greeks estimate the analytic ones (loose: a few standard errors).
            let d = res.delta.unwrap();
            assert!((d - exact.delta).abs() < 0.02, "delta {d} vs {}", exact.delta);
            let g = res.vega.unwrap();
            assert!(
                (g - exact.vega).abs() < 0.05 * exact.vega.max(1.0),
                "vega {g} vs {}",
                exact.vega
            );
        }
    }
}

#[test]
fn geometric_asian_mc_within_three_standard_errors() {
    let run = mc(16_384, 1, 12);
    for (i, &(s, k, r, q, v, t)) in GRID.iter().enumerate() {
        for (kind, n) in [(Call, 12), (Put, 5)] {
            let spec =
                OptionSpec::european(kind, s, k, r, q, v, t).with_style(Style::AsianGeometric, Some(n), None);
            let exact = geometric_asian(kind, s, k, r, q, v, t, n);
            let res = price_mc(&spec, &run, i as u32).unwrap();
            within(&res, exact, 3.0, "geometric asian");
            let a = price_analytic(&spec).unwrap();
            let d = res.delta.unwrap();
            assert!(
                (d - a.delta.unwrap()).abs() < 0.02,
                "asian delta {d} vs {:?}",
                a.delta
            );
            let g = res.vega.unwrap();
            let want = a.vega.unwrap();
            assert!(
                (g - want).abs() < 0.06 * want.abs().max(1.0),
                "asian vega {g} vs {want}"
            );
        }
    }
}

#[test]
fn arithmetic_asian_control_variate_and_bounds() {
    let spec = OptionSpec::european(Call, 100.0, 100.0, 0.05, 0.01, 0.25, 1.0).with_style(
        Style::AsianArithmetic,
        Some(12),
        None,
    );
    let plain = price_mc(&spec, &mc(16_384, 1, 3), 0).unwrap();
    let cv = price_mc(
        &spec,
        &McParams {
            control_variate: true,
            ..mc(16_384, 1, 3)
        },
        0,
    )
    .unwrap();
    // The geometric control is nearly perfectly correlated: a large variance reduction.
    assert!(
        cv.std_error < 0.2 * plain.std_error,
        "cv {} vs plain {}",
        cv.std_error,
        plain.std_error
    );
    assert!((cv.price - plain.price).abs() < 3.0 * plain.std_error);
    // Arithmetic mean >= geometric mean, path by path: the call is worth more.
    let geo = geometric_asian(Call, 100.0, 100.0, 0.05, 0.01, 0.25, 1.0, 12);
    assert!(
        cv.price > geo && cv.price < geo + 0.5,
        "arithmetic {} vs geometric {geo}",
        cv.price
    );
    assert!(cv.delta.is_some() && cv.vega.unwrap() > 0.0 && cv.gamma.is_none());
}

#[test]
fn antithetic_and_control_variates_reduce_the_error() {
    let spec = OptionSpec::european(Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0);
    let exact = bsm(Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0).price;
    let plain = price_mc(&spec, &mc(20_000, 2, 21), 0).unwrap();
    let anti = price_mc(
        &spec,
        &McParams {
            antithetic: true,
            ..mc(20_000, 2, 21)
        },
        0,
    )
    .unwrap();
    let cv = price_mc(
        &spec,
        &McParams {
            control_variate: true,
            ..mc(20_000, 2, 21)
        },
        0,
    )
    .unwrap();
    let both = price_mc(
        &spec,
        &McParams {
            antithetic: true,
            control_variate: true,
            ..mc(20_000, 2, 21)
        },
        0,
    )
    .unwrap();
    assert_eq!(anti.paths_used, 20_000);
    for (r, name) in [
        (&plain, "plain"),
        (&anti, "antithetic"),
        (&cv, "cv"),
        (&both, "both"),
    ] {
        within(r, exact, 3.0, name);
    }
    assert!(
        anti.std_error < 0.8 * plain.std_error,
        "{} vs {}",
        anti.std_error,
        plain.std_error
    );
    assert!(
        cv.std_error < 0.5 * plain.std_error,
        "{} vs {}",
        cv.std_error,
        plain.std_error
    );
    assert!(both.std_error < plain.std_error);
}

#[test]
fn barrier_in_plus_out_is_vanilla_and_parity_holds() {
    let run = mc(8_192, 16, 7);
    for kind in [Call, Put] {
        let vanilla_spec = OptionSpec::european(kind, 100.0, 100.0, 0.04, 0.01, 0.3, 1.0);
        let vanilla = price_mc(&vanilla_spec, &run, 9).unwrap();
        for (out_style, in_style, b) in [
            (Style::BarrierUpOut, Style::BarrierUpIn, 120.0),
            (Style::BarrierDownOut, Style::BarrierDownIn, 85.0),
        ] {
            let o = price_mc(&vanilla_spec.with_style(out_style, None, Some(b)), &run, 9).unwrap();
            let i = price_mc(&vanilla_spec.with_style(in_style, None, Some(b)), &run, 9).unwrap();
            // Path by path one of the two pays the vanilla payoff exactly; the sums differ
            // only by f64 rounding.
            let sum = o.price + i.price;
            assert!(
                (sum - vanilla.price).abs() < 1e-12 * vanilla.price,
                "{sum} vs {}",
                vanilla.price
            );
            assert!(o.price > 0.0 && i.price > 0.0 && o.price < vanilla.price);
            assert!(o.delta.is_none() && o.vega.is_none());
            // The vanilla control variate prices the barrier too.
            let cv = price_mc(
                &vanilla_spec.with_style(out_style, None, Some(b)),
                &McParams {
                    control_variate: true,
                    ..run
                },
                9,
            )
            .unwrap();
            assert!((cv.price - o.price).abs() < 4.0 * o.std_error);
        }
    }
    // A barrier that is never reached: out = vanilla, bitwise.
    let spec = OptionSpec::european(Call, 100.0, 100.0, 0.04, 0.01, 0.3, 1.0);
    let far = price_mc(&spec.with_style(Style::BarrierUpOut, None, Some(1e9)), &run, 9).unwrap();
    assert_eq!(
        far.price.to_bits(),
        price_mc(&spec, &run, 9).unwrap().price.to_bits()
    );
    // Put-call parity on the same paths: C - P = mean(df (S_T - K)) ~ S e^{-qT} - K e^{-rT}.
    let c = price_mc(&spec, &run, 4).unwrap();
    let p = price_mc(
        &OptionSpec {
            option_type: Put,
            ..spec
        },
        &run,
        4,
    )
    .unwrap();
    let parity = 100.0 * (-0.01f64).exp() - 100.0 * (-0.04f64).exp();
    let se = (c.std_error.powi(2) + p.std_error.powi(2)).sqrt();
    assert!(
        (c.price - p.price - parity).abs() < 3.0 * se,
        "{} vs {parity}",
        c.price - p.price
    );
}

#[test]
fn chunks_threads_and_batches_give_the_same_bits() {
    let spec = OptionSpec::european(Call, 100.0, 110.0, 0.03, 0.0, 0.25, 1.0).with_style(
        Style::BarrierUpOut,
        None,
        Some(140.0),
    );
    let run = McParams {
        paths: 6 * BLOCK_SAMPLES - 3,
        steps: 5,
        seed: 77,
        antithetic: false,
        control_variate: true,
        fast_math: false,
        rng: kiln_core::finance::Rng::Philox,
    };
    let nb = block_count(&run);
    assert_eq!(nb, 6);
    let whole = price_mc(&spec, &run, 1).unwrap();
    for cut in [1, 2, 5] {
        let mut blocks: Vec<BlockSums> = simulate_blocks(&spec, &run, 1, 0..cut).unwrap();
        blocks.extend(simulate_blocks(&spec, &run, 1, cut..nb).unwrap());
        let r = finish(&spec, &run, &blocks).unwrap();
        assert_eq!(r.price.to_bits(), whole.price.to_bits(), "cut at {cut}");
        assert_eq!(r.std_error.to_bits(), whole.std_error.to_bits());
    }
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let r = pool.install(|| price_mc(&spec, &run, 1)).unwrap();
        assert_eq!(r.price.to_bits(), whole.price.to_bits(), "{threads} threads");
    }
    // Missing blocks and bad ranges are errors, not wrong prices.
    assert!(finish(&spec, &run, &simulate_blocks(&spec, &run, 1, 0..3).unwrap()).is_err());
    assert!(simulate_blocks(&spec, &run, 1, 0..nb + 1).is_err());
    // A portfolio prices option i as price_mc(.., i).
    let other = OptionSpec::european(Put, 50.0, 55.0, 0.02, 0.01, 0.4, 0.75);
    let mut bad = other;
    bad.maturity = 0.0;
    let book = price_portfolio(&[other, spec, bad], &run);
    assert_eq!(book[1].as_ref().unwrap().price.to_bits(), whole.price.to_bits());
    assert_eq!(
        book[0].as_ref().unwrap().price.to_bits(),
        price_mc(&other, &run, 0).unwrap().price.to_bits()
    );
    assert!(book[2].as_ref().unwrap_err().to_string().contains("maturity"));
    // Another option index is another stream.
    assert_ne!(price_mc(&spec, &run, 2).unwrap().price, whole.price);
}

/// Throughput: `cargo test --release -p kiln-cpu --test finance -- --ignored --nocapture`.
#[test]
#[ignore]
fn throughput_european_2e20_paths_256_steps() {
    let spec = OptionSpec::european(Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0);
    let run = mc(1 << 20, 256, 1);
    let _ = price_mc(&spec, &mc(1 << 14, 256, 1), 0); // warm up the pool
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut best = f64::INFINITY;
        let mut res = None;
        for _ in 0..3 {
            let t0 = std::time::Instant::now();
            res = Some(pool.install(|| price_mc(&spec, &run, 0)).unwrap());
            best = best.min(t0.elapsed().as_secs_f64());
        }
        let steps = (run.paths * u64::from(run.steps)) as f64;
        let r = res.unwrap();
        println!(
            "european 2^20 x 256, {threads} thread(s): {best:.3} s, {:.1} M path-steps/s ({:.1} M/s per thread); price {:.4} +- {:.4}",
            steps / best / 1e6,
            steps / best / 1e6 / threads as f64,
            r.price,
            r.std_error
        );
        within(
            &r,
            bsm(Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0).price,
            4.0,
            "throughput run",
        );
    }
    let asian = spec.with_style(Style::AsianArithmetic, Some(256), None);
    let t0 = std::time::Instant::now();
    let r = price_mc(&asian, &run, 0).unwrap();
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "asian arithmetic 2^20 x 256, all threads: {dt:.3} s, {:.1} M path-steps/s; price {:.4}",
        (run.paths * 256) as f64 / dt / 1e6,
        r.price
    );
}

/// Continuous monitoring: at 64 steps the Brownian-bridge crossing probability of every step
/// makes Monte Carlo agree with the Reiner-Rubinstein closed form; the same paths watched
/// only at the 64 step ends (`fixings = 64`) miss the crossings in between and overprice
/// every out-option by many standard errors.
#[test]
fn continuous_barrier_mc_matches_the_closed_form_at_64_steps() {
    let run = McParams {
        control_variate: true,
        ..mc(1 << 16, 64, 21)
    };
    let cases = [
        (Call, Style::BarrierUpOut, 100.0, 130.0),
        (Call, Style::BarrierUpIn, 100.0, 130.0),
        (Put, Style::BarrierDownOut, 100.0, 80.0),
        (Put, Style::BarrierDownIn, 100.0, 80.0),
        (Call, Style::BarrierDownOut, 95.0, 90.0),
        (Put, Style::BarrierUpIn, 105.0, 115.0),
        (Put, Style::BarrierUpOut, 110.0, 120.0),
        (Call, Style::BarrierDownIn, 90.0, 92.0),
    ];
    for (i, (kind, style, k, h)) in cases.into_iter().enumerate() {
        let spec =
            OptionSpec::european(kind, 100.0, k, 0.04, 0.01, 0.25, 1.0).with_style(style, None, Some(h));
        let exact = price_analytic(&spec).unwrap().price;
        let what = format!("{} {} K={k} H={h}", kind.name(), style.name());
        let r = price_mc(&spec, &run, i as u32).unwrap();
        within(&r, exact, 4.0, &format!("continuous {what}"));
        let d = price_mc(&spec.with_style(style, Some(64), Some(h)), &run, i as u32).unwrap();
        if matches!(style, Style::BarrierUpOut | Style::BarrierDownOut) {
            assert!(
                d.price - exact > 4.0 * d.std_error,
                "discrete {what}: {} +- {} should be well above the continuous {exact}",
                d.price,
                d.std_error
            );
        }
    }
}

/// Discrete monitoring: Monte Carlo stepping from date to date is exact, and the closed form
/// with Broadie-Glasserman-Kou's shifted barrier agrees with it to within its known accuracy
/// (4 standard errors plus 1% of the price with 50 dates, the barrier away from the spot).
#[test]
fn discrete_barrier_mc_agrees_with_the_bgk_closed_form() {
    let run = McParams {
        control_variate: true,
        ..mc(1 << 16, 999, 5) // steps ignored: the 50 dates are the steps
    };
    let cases = [
        (Call, Style::BarrierUpOut, 100.0, 125.0),
        (Call, Style::BarrierUpIn, 100.0, 125.0),
        (Put, Style::BarrierDownOut, 100.0, 85.0),
        (Put, Style::BarrierDownIn, 100.0, 85.0),
        (Call, Style::BarrierDownOut, 100.0, 85.0),
    ];
    for (i, (kind, style, k, h)) in cases.into_iter().enumerate() {
        let spec =
            OptionSpec::european(kind, 100.0, k, 0.04, 0.01, 0.25, 1.0).with_style(style, Some(50), Some(h));
        let bgk = price_analytic(&spec).unwrap().price;
        let r = price_mc(&spec, &run, i as u32).unwrap();
        let what = format!("{} {} K={k} H={h}", kind.name(), style.name());
        assert!(
            (r.price - bgk).abs() < 4.0 * r.std_error + 0.01 * bgk,
            "{what}: exact-date MC {} +- {} vs BGK {bgk}",
            r.price,
            r.std_error
        );
        assert_eq!(r.paths_used, run.paths_used());
    }
}
