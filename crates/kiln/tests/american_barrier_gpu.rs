//! American barrier options by Longstaff-Schwartz on the GPU: prices, standard errors and
//! intervals bitwise the CPU engine's for up and down, in and out, calls and puts, with and
//! without a rebate, barriers near the spot and already past it, odd path counts, and
//! through the runtime (errors in their slots, the tree still priced). American rainbows
//! are still refused on a GPU runtime. Skips with a reason where no GPU is usable (fails
//! with KILN_REQUIRE_GPU=1). `bench_american_barrier` (ignored) times a batch on both.
#![allow(clippy::unwrap_used)]

use kiln::device::ops::PriceAmericanBarrier;
use kiln::finance::american::{american_barrier_binomial, AmericanBarrierSpec, AmericanSpec};
use kiln_core::finance::{McParams, OptionType, PriceResult, Style};
use kiln_cpu::finance as cpu;

fn spec(kind: OptionType, style: Style, barrier: f64, rebate: f64, dates: u32) -> AmericanBarrierSpec {
    AmericanBarrierSpec {
        option: AmericanSpec {
            option_type: kind,
            spot: 40.0,
            strike: 40.0,
            rate: 0.06,
            dividend: if kind == OptionType::Call { 0.04 } else { 0.0 },
            volatility: 0.3,
            maturity: 1.0,
            exercise_dates: dates,
        },
        style,
        barrier,
        rebate,
    }
}

/// Every style, kind and rebate at a far barrier (some paths knocked), a near one (most
/// knocked at the first date) and one the spot is already past.
fn grid() -> Vec<AmericanBarrierSpec> {
    let mut cases = Vec::new();
    for kind in [OptionType::Put, OptionType::Call] {
        for (style, far, near, past) in [
            (Style::BarrierUpOut, 50.0, 41.0, 38.0),
            (Style::BarrierUpIn, 50.0, 41.0, 38.0),
            (Style::BarrierDownOut, 30.0, 39.0, 42.0),
            (Style::BarrierDownIn, 30.0, 39.0, 42.0),
        ] {
            for rebate in [0.0, 1.5] {
                cases.push(spec(kind, style, far, rebate, 50));
                cases.push(spec(kind, style, near, rebate, 7));
                cases.push(spec(kind, style, past, rebate, 5));
            }
            cases.push(spec(kind, style, far, 0.5, 1));
        }
    }
    cases
}

fn same_bits(g: &PriceResult, c: &PriceResult, what: &str) {
    assert_eq!(
        g.price.to_bits(),
        c.price.to_bits(),
        "{what}: gpu {} cpu {}",
        g.price,
        c.price
    );
    assert_eq!(g.std_error.to_bits(), c.std_error.to_bits(), "{what}: std_error");
    assert_eq!(g.ci95.0.to_bits(), c.ci95.0.to_bits(), "{what}: ci95");
    assert_eq!(g.ci95.1.to_bits(), c.ci95.1.to_bits(), "{what}: ci95");
    assert_eq!(g.paths_used, c.paths_used, "{what}: paths");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_lsm_barrier_is_bitwise_the_cpus() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_lsm_barrier_is_bitwise_the_cpus") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let cases = grid();
    let mut checked = 0usize;
    for paths in [2u64, 31, 1025, 5 * 1024 + 77, 20_001] {
        for (i, s) in cases.iter().enumerate() {
            let mc = McParams {
                paths,
                seed: 0xba77 + paths,
                ..McParams::default()
            };
            let option = 3 * i as u32 + 1;
            let g = gpu
                .run(PriceAmericanBarrier {
                    spec: s,
                    mc: &mc,
                    option,
                })
                .unwrap();
            let c = cpu::price_american_barrier(s, &mc, option).unwrap();
            same_bits(
                &g,
                &c,
                &format!(
                    "{paths} paths, {:?} {:?} H {} R {} {} dates",
                    s.option.option_type, s.style, s.barrier, s.rebate, s.option.exercise_dates
                ),
            );
            checked += 1;
        }
    }
    eprintln!("{checked} American barrier prices equal the CPU engine's bits");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_runtime_prices_american_barriers_as_the_cpu() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_runtime_prices_american_barriers_as_the_cpu")
    else {
        return;
    };
    let specs = [
        spec(OptionType::Put, Style::BarrierUpOut, 46.0, 0.0, 50),
        spec(OptionType::Put, Style::BarrierDownIn, 34.0, 1.0, 50),
        spec(OptionType::Call, Style::BarrierDownOut, 35.0, 0.5, 25),
    ];
    let mc = McParams {
        paths: 1 << 16,
        seed: 11,
        ..McParams::default()
    };
    let g = rt.price_american_barrier_batch(&specs, &mc, 4);
    let c = cpu::price_american_barrier_portfolio(&specs, &mc, 4);
    for ((s, g), c) in specs.iter().zip(&g).zip(&c) {
        let (g, c) = (g.as_ref().unwrap(), c.as_ref().unwrap());
        same_bits(g, c, &format!("{s:?}"));
        assert!(g.std_error > 0.0, "{s:?}: a Monte Carlo estimate");
    }
    // errors stay in their slots; slot 1 is stream 1
    let mut bad = specs[0];
    bad.barrier = f64::NAN;
    let r = rt.price_american_barrier_batch(&[bad, specs[1]], &mc, 0);
    assert!(r[0].is_err(), "{:?}", r[0]);
    same_bits(
        r[1].as_ref().unwrap(),
        &cpu::price_american_barrier(&specs[1], &mc, 1).unwrap(),
        "after an error",
    );
    // the tree still prices them on a GPU runtime
    let tree = rt
        .price_american_barrier_tree(&[specs[0]], 2000, false)
        .remove(0)
        .unwrap();
    assert_eq!(tree.price, american_barrier_binomial(&specs[0], 2000).unwrap());
}

/// American rainbows on a GPU runtime: refused option by option (the CUDA engine does not
/// price them), each error saying to use the CPU device, never a wrong price.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_runtime_refuses_american_rainbows() {
    use kiln::finance::american::{AmericanRainbowSpec, BasketAsset, Extreme};
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_runtime_refuses_american_rainbows") else {
        return;
    };
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
    let mc = McParams {
        paths: 4096,
        ..McParams::default()
    };
    let got = rt.price_american_rainbow_batch(&[spec.clone(), spec], &mc, 0);
    assert_eq!(got.len(), 2);
    for r in got {
        let e = r.unwrap_err().to_string();
        assert!(e.contains("CPU only"), "{e}");
    }
}

#[test]
#[ignore = "a benchmark: cargo test --release --features gpu-tests --test american_barrier_gpu -- --ignored --nocapture bench_american_barrier"]
fn bench_american_barrier() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("bench_american_barrier") else {
        return;
    };
    let kinds = [OptionType::Put, OptionType::Call];
    let styles = [
        (Style::BarrierUpOut, 52.0),
        (Style::BarrierUpIn, 52.0),
        (Style::BarrierDownOut, 30.0),
        (Style::BarrierDownIn, 30.0),
    ];
    let specs: Vec<AmericanBarrierSpec> = (0..64)
        .map(|i| {
            let (style, h) = styles[i % 4];
            let mut s = spec(
                kinds[(i / 4) % 2],
                style,
                h,
                if i % 3 == 0 { 1.0 } else { 0.0 },
                50,
            );
            s.option.strike = 36.0 + (i / 8) as f64;
            s
        })
        .collect();
    let mc = McParams {
        paths: 1 << 18,
        seed: 2026,
        ..McParams::default()
    };
    let t = std::time::Instant::now();
    let c = cpu::price_american_barrier_portfolio(&specs, &mc, 0);
    let t_cpu = t.elapsed().as_secs_f64();
    // correct first (this also compiles the kernels): the GPU's prices equal the CPU's
    let g = rt.price_american_barrier_batch(&specs, &mc, 0);
    for (i, (g, c)) in g.iter().zip(&c).enumerate() {
        same_bits(g.as_ref().unwrap(), c.as_ref().unwrap(), &format!("option {i}"));
    }
    let t = std::time::Instant::now();
    let g = rt.price_american_barrier_batch(&specs, &mc, 0);
    let t_gpu = t.elapsed().as_secs_f64();
    assert!(g.iter().all(|r| r.is_ok()));
    eprintln!(
        "american barrier LSM, 64 options x 2^18 paths x 50 dates: cpu {t_cpu:.3} s ({} threads), gpu {t_gpu:.3} s, equal bits",
        rayon::current_num_threads()
    );
}
