//! Basket Monte Carlo on the GPU: each sample's payoff and control are kiln-core's bit for
//! bit, and prices are the CPU engine's bit for bit (N = 1, 3, 8, 17, 64, arithmetic and
//! geometric, calls and puts, odd path counts, antithetic and control variates on and off,
//! any chunking of the launch, through the facade and batch stream offsets); 2^20-path
//! geometric prices agree with the closed form. Skips with a reason where no GPU is usable
//! (fails with KILN_REQUIRE_GPU=1).
#![allow(clippy::unwrap_used)]

use kiln::device::ops::{BasketBlockSums, BasketSamples, PriceBasket};
use kiln::finance::Method;
use kiln_core::finance::basket::{basket_sample, BasketAsset, BasketAverage, BasketPathParams, BasketSpec};
use kiln_core::finance::{McParams, OptionType};
use kiln_cpu::finance as cpu;
use kiln_cuda::GpuMcOptions;

/// A deterministic basket of `n` assets: spots, vols, dividends and weights spread out, an
/// equicorrelated matrix plus a banded term (positive definite for these values), one
/// asset with zero volatility when `n > 2`.
fn basket(n: usize, kind: OptionType, average: BasketAverage, seed: u64) -> BasketSpec {
    let f = |i: usize, a: f64, b: f64| {
        let h = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed;
        a + (b - a) * ((h >> 11) as f64 / (1u64 << 53) as f64)
    };
    let assets: Vec<BasketAsset> = (0..n)
        .map(|i| {
            let vol = if n > 2 && i == 1 { 0.0 } else { f(3 * i, 0.1, 0.5) };
            BasketAsset::new(
                f(3 * i + 1, 40.0, 160.0),
                vol,
                f(3 * i + 2, 0.0, 0.05),
                f(i + 99, 0.1, 2.0),
            )
            .named(format!("A{i}"))
        })
        .collect();
    let mut corr = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            corr[i * n + j] = if i == j {
                1.0
            } else if i.abs_diff(j) == 1 {
                0.55
            } else {
                0.3
            };
        }
    }
    let value: f64 = assets.iter().map(|a| a.weight * a.spot).sum();
    BasketSpec {
        kind,
        strike: value * f(7, 0.9, 1.1),
        rate: 0.03,
        maturity: f(11, 0.5, 2.0),
        average,
        assets,
        correlation: corr,
    }
}

fn specs() -> Vec<BasketSpec> {
    let mut v = Vec::new();
    for (k, n) in [1usize, 3, 8, 17, 64].into_iter().enumerate() {
        let kind = if k % 2 == 0 {
            OptionType::Call
        } else {
            OptionType::Put
        };
        v.push(basket(n, kind, BasketAverage::Arithmetic, k as u64));
        v.push(basket(n, kind, BasketAverage::Geometric, 100 + k as u64));
    }
    v
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_basket_samples_are_kiln_cores_bit_for_bit() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_basket_samples_are_kiln_cores_bit_for_bit")
    else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    for anti in [false, true] {
        let mc = McParams {
            paths: 1 << 16,
            antithetic: anti,
            seed: 0x0123_4567_89ab_cdef,
            ..McParams::default()
        };
        for (i, s) in specs().iter().enumerate() {
            let pp = BasketPathParams::new(s, &mc).unwrap();
            let first = 1000 * i as u32;
            let got = gpu
                .run(BasketSamples {
                    spec: s,
                    mc: &mc,
                    option: 9 + i as u32,
                    first_sample: first,
                    count: 4099,
                })
                .unwrap();
            for (k, g) in got.iter().enumerate() {
                let (y, c) = basket_sample(&pp, 9 + i as u32, first + k as u32);
                assert_eq!(
                    (g.0.to_bits(), g.1.to_bits()),
                    (y.to_bits(), c.to_bits()),
                    "basket {i} (N {}, {:?}), antithetic {anti}, sample {}: gpu ({}, {}) cpu ({y}, {c})",
                    s.assets.len(),
                    s.average,
                    first + k as u32,
                    g.0,
                    g.1
                );
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_basket_prices_are_bitwise_the_cpus() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_basket_prices_are_bitwise_the_cpus") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let specs = specs();
    for (paths, anti, cv) in [
        (3 * 1024 + 5, false, false),
        (1001, true, true),
        (2048, false, true),
        (4097, true, false),
    ] {
        let mc = McParams {
            paths,
            antithetic: anti,
            control_variate: cv,
            seed: 0x5eed_0000 + paths,
            ..McParams::default()
        };
        let want = cpu::price_basket(&specs, &mc);
        for max_items in [1u64 << 20, 3, 1] {
            let opts = GpuMcOptions {
                max_items,
                first_option: 0,
            };
            let got = gpu.run(PriceBasket::with(&specs, &mc, &opts)).unwrap();
            for (i, (g, c)) in got.iter().zip(&want).enumerate() {
                let (g, c) = (g.as_ref().unwrap(), c.as_ref().unwrap());
                let what = format!(
                    "option {i} (N {}, {:?}), {paths} paths, antithetic {anti}, cv {cv}, max_items {max_items}",
                    specs[i].assets.len(),
                    specs[i].average
                );
                assert_eq!(
                    g.price.to_bits(),
                    c.price.to_bits(),
                    "{what}: {} vs {}",
                    g.price,
                    c.price
                );
                assert_eq!(g.std_error.to_bits(), c.std_error.to_bits(), "{what}");
                assert_eq!(g.paths_used, c.paths_used, "{what}");
            }
        }
        // the block sums too (N = 17), and through the facade with a stream offset
        let gb = gpu
            .run(BasketBlockSums {
                spec: &specs[6],
                mc: &mc,
                option: 6,
            })
            .unwrap();
        let cb = cpu::simulate_basket_blocks(&specs[6], &mc, 6, 0..cpu::block_count(&mc)).unwrap();
        assert_eq!(gb, cb);
        let f = rt.price_basket_batch(&specs[4..], &mc, Method::MonteCarlo, 4);
        for (a, b) in f.iter().zip(&want[4..]) {
            assert_eq!(
                a.as_ref().unwrap().price.to_bits(),
                b.as_ref().unwrap().price.to_bits()
            );
        }
    }
    // a bad slot is an error in its slot only
    let mut bad = specs.clone();
    // slot 2 is the first basket of more than one asset (slots 0 and 1 have N = 1)
    bad[2].correlation[1] = 2.0;
    let mc = McParams {
        paths: 1024,
        ..McParams::default()
    };
    let got = gpu.run(PriceBasket::new(&bad, &mc)).unwrap();
    assert!(got[2].as_ref().unwrap_err().to_string().contains("[-1, 1]"));
    assert!(got[1].is_ok() && got[3].is_ok());
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_geometric_baskets_agree_with_the_closed_form_at_a_million_paths() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_geometric_baskets_agree_with_the_closed_form")
    else {
        return;
    };
    let specs: Vec<BasketSpec> = specs()
        .into_iter()
        .filter(|s| s.average == BasketAverage::Geometric)
        .collect();
    let mc = McParams {
        paths: 1 << 20,
        seed: 2026,
        ..McParams::default()
    };
    let got = rt.price_basket(&specs, &mc, Method::MonteCarlo);
    for (s, r) in specs.iter().zip(&got) {
        let r = r.as_ref().unwrap();
        let exact = s.price_analytic().unwrap();
        let z = (r.price - exact) / r.std_error;
        eprintln!(
            "N {} {:?}: mc {:.6} +- {:.6} closed form {exact:.6} z {z:+.2}",
            s.assets.len(),
            s.kind,
            r.price,
            r.std_error
        );
        assert!(
            z.abs() < 4.0,
            "N {}: mc {} +- {} vs {exact}",
            s.assets.len(),
            r.price,
            r.std_error
        );
    }
}

/// A batch mixing spreads and rainbows (which the kernel refuses, naming the field) with
/// baskets it runs: through the facade each option lands on its engine and stream, so the
/// prices are the CPU runtime's bit for bit.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_runtime_prices_spreads_and_rainbows_on_the_cpu_engine() {
    let Some(rt) =
        kiln::testing::cuda_runtime_or_skip("gpu_runtime_prices_spreads_and_rainbows_on_the_cpu_engine")
    else {
        return;
    };
    let mut spread = basket(2, OptionType::Call, BasketAverage::Arithmetic, 7);
    spread.assets[1].weight = -spread.assets[1].weight;
    spread.strike = 0.0;
    let rainbow = basket(3, OptionType::Put, BasketAverage::Min, 8);
    let mixed = vec![
        basket(3, OptionType::Call, BasketAverage::Arithmetic, 1),
        spread.clone(),
        rainbow.clone(),
        basket(8, OptionType::Put, BasketAverage::Geometric, 2),
        basket(2, OptionType::Call, BasketAverage::Max, 3),
    ];
    let mc = McParams {
        paths: 4097,
        control_variate: true,
        seed: 0x5eed_5eed,
        ..McParams::default()
    };
    let want = kiln::Runtime::cpu().price_basket_batch(&mixed, &mc, Method::MonteCarlo, 3);
    let got = rt.price_basket_batch(&mixed, &mc, Method::MonteCarlo, 3);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let (g, w) = (g.as_ref().unwrap(), w.as_ref().unwrap());
        assert_eq!(
            g.price.to_bits(),
            w.price.to_bits(),
            "option {i}: {} vs {}",
            g.price,
            w.price
        );
        assert_eq!(g.std_error.to_bits(), w.std_error.to_bits(), "option {i}");
    }
    let gpu = rt.cuda().unwrap();
    let e = gpu.run(PriceBasket::new(&[spread, rainbow], &mc)).unwrap();
    let msg = |i: usize| e[i].as_ref().unwrap_err().to_string();
    assert!(
        msg(0).contains("asset `A1`: weight = -") && msg(0).contains("CPU"),
        "{}",
        msg(0)
    );
    assert!(
        msg(1).contains("average min") && msg(1).contains("CPU"),
        "{}",
        msg(1)
    );
}

/// Runs everywhere: the specs the GPU tests use are valid (N = 64 included) and the CPU
/// prices them, so a failure on the GPU machine is the GPU's.
#[test]
fn the_gpu_tests_specs_are_valid_on_the_cpu() {
    let mc = McParams {
        paths: 1001,
        antithetic: true,
        control_variate: true,
        ..McParams::default()
    };
    for (i, r) in cpu::price_basket(&specs(), &mc).iter().enumerate() {
        let r = r.as_ref().unwrap();
        assert!(r.price.is_finite() && r.price > 0.0, "spec {i}: {r:?}");
    }
}
