//! American barrier options on a GPU runtime: the CUDA engine does not price them by
//! Longstaff-Schwartz, so each option is refused with an error saying to use the CPU (or the
//! tree), never priced as a vanilla; the tree still prices them on such a runtime. Skips
//! with a reason where no GPU is usable (fails with KILN_REQUIRE_GPU=1). American rainbows
//! are refused the same way.
#![allow(clippy::unwrap_used)]

use kiln::finance::american::{american_barrier_binomial, AmericanBarrierSpec, AmericanSpec};
use kiln_core::finance::{McParams, OptionType, Style};

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_runtime_refuses_american_barrier_lsm_and_prices_the_tree() {
    let Some(rt) =
        kiln::testing::cuda_runtime_or_skip("gpu_runtime_refuses_american_barrier_lsm_and_prices_the_tree")
    else {
        return;
    };
    let spec = AmericanBarrierSpec {
        option: AmericanSpec {
            option_type: OptionType::Put,
            spot: 40.0,
            strike: 40.0,
            rate: 0.06,
            dividend: 0.0,
            volatility: 0.2,
            maturity: 1.0,
            exercise_dates: 50,
        },
        style: Style::BarrierUpOut,
        barrier: 46.0,
        rebate: 0.0,
    };
    let mc = McParams {
        paths: 4096,
        ..McParams::default()
    };
    let got = rt.price_american_barrier_batch(&[spec, spec], &mc, 0);
    assert_eq!(got.len(), 2);
    for r in got {
        let e = r.unwrap_err().to_string();
        assert!(e.contains("CPU only"), "{e}");
    }
    let tree = rt
        .price_american_barrier_tree(&[spec], 2000, false)
        .remove(0)
        .unwrap();
    assert_eq!(tree.price, american_barrier_binomial(&spec, 2000).unwrap());
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
