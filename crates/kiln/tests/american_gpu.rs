//! Longstaff-Schwartz on the GPU: prices and standard errors bitwise the CPU engine's for
//! odd path counts, several date counts, puts and calls with dividends, and through the
//! runtime. Skips with a reason where no GPU is usable (fails with KILN_REQUIRE_GPU=1).
#![allow(clippy::unwrap_used)]

use kiln::device::ops::PriceAmerican;
use kiln::finance::american::{american_binomial, AmericanSpec};
use kiln_core::finance::{McParams, OptionType};
use kiln_cpu::finance as cpu;

fn spec(kind: OptionType, spot: f64, q: f64, dates: u32) -> AmericanSpec {
    AmericanSpec {
        option_type: kind,
        spot,
        strike: 40.0,
        rate: 0.06,
        dividend: q,
        volatility: 0.25,
        maturity: 1.0,
        exercise_dates: dates,
    }
}

fn same_bits(g: &kiln_core::finance::PriceResult, c: &kiln_core::finance::PriceResult, what: &str) {
    assert_eq!(
        g.price.to_bits(),
        c.price.to_bits(),
        "{what}: gpu {} cpu {}",
        g.price,
        c.price
    );
    assert_eq!(g.std_error.to_bits(), c.std_error.to_bits(), "{what}: std_error");
    assert_eq!(g.paths_used, c.paths_used, "{what}: paths");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_lsm_is_bitwise_the_cpus() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_lsm_is_bitwise_the_cpus") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let cases = [
        spec(OptionType::Put, 36.0, 0.0, 1),
        spec(OptionType::Put, 36.0, 0.0, 2),
        spec(OptionType::Put, 38.0, 0.01, 5),
        spec(OptionType::Call, 42.0, 0.08, 7),
        spec(OptionType::Put, 40.0, 0.0, 50),
        spec(OptionType::Call, 44.0, 0.1, 13),
    ];
    for paths in [2u64, 31, 1023, 1025, 5 * 1024 + 77, 20_001] {
        for (i, s) in cases.iter().enumerate() {
            let mc = McParams {
                paths,
                seed: 0x5eed + paths,
                ..McParams::default()
            };
            let option = i as u32 * 3;
            let g = gpu
                .run(PriceAmerican {
                    spec: s,
                    mc: &mc,
                    option,
                })
                .unwrap();
            let c = cpu::price_american(s, &mc, option).unwrap();
            same_bits(
                &g,
                &c,
                &format!("{paths} paths, {:?} {} dates", s.option_type, s.exercise_dates),
            );
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_runtime_prices_are_the_cpus_and_near_the_tree() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_runtime_prices_are_the_cpus_and_near_the_tree")
    else {
        return;
    };
    let specs = [
        spec(OptionType::Put, 36.0, 0.0, 50),
        spec(OptionType::Call, 44.0, 0.08, 50),
    ];
    let mc = McParams {
        paths: 1 << 17,
        seed: 11,
        ..McParams::default()
    };
    let g = rt.price_american(&specs, &mc);
    let c = cpu::price_american_portfolio(&specs, &mc, 0);
    for ((s, g), c) in specs.iter().zip(&g).zip(&c) {
        let (g, c) = (g.as_ref().unwrap(), c.as_ref().unwrap());
        same_bits(g, c, &format!("{s:?}"));
        let tree = american_binomial(s, 2000).unwrap();
        assert!(
            (g.price - tree).abs() <= 4.0 * g.std_error + 0.02,
            "{s:?}: lsm {} +- {}, tree {tree}",
            g.price,
            g.std_error
        );
    }
    // errors stay in their slots on the GPU too
    let mut bad = specs[0];
    bad.volatility = 0.0;
    let r = rt.price_american(&[bad, specs[0]], &mc);
    assert!(r[0].as_ref().unwrap_err().to_string().contains("volatility"));
    // slot 1 is stream 1
    let c1 = cpu::price_american(&specs[0], &mc, 1).unwrap();
    same_bits(r[1].as_ref().unwrap(), &c1, "after an error");
}
