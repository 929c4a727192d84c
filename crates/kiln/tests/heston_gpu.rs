//! Heston Monte Carlo on the GPU: one QE step is kiln-core's bit for bit (both branches, with
//! and without the martingale correction), prices are the CPU engine's bit for bit for
//! European and Asian options, odd path counts and steps and any chunking, and 2^20-path
//! prices agree with the closed form. Skips with a reason where no GPU is usable (fails
//! with KILN_REQUIRE_GPU=1).
#![allow(clippy::unwrap_used)]

use kiln::device::ops::{HestonBlockSums, HestonStepSelftest, PriceHeston};
use kiln_core::finance::heston::{heston_words, qe_step, HestonParams, HestonPathParams, HestonSpec};
use kiln_core::finance::{McParams, OptionSpec, OptionType, Style};
use kiln_cpu::finance as cpu;
use kiln_cuda::GpuMcOptions;

fn spec(kind: OptionType, k: f64, t: f64, h: HestonParams) -> HestonSpec {
    HestonSpec {
        option: OptionSpec::european(kind, 100.0, k, 0.03, 0.01, 0.2, t),
        heston: h,
    }
}

/// Parameter sets that reach both QE branches, the martingale correction's fallback
/// (rho = +1: A > 0), Feller violated and rho near -1.
fn param_sets() -> Vec<HestonParams> {
    vec![
        HestonParams {
            kappa: 1.5768,
            theta: 0.0398,
            xi: 0.5751,
            rho: -0.5711,
            v0: 0.0175,
        },
        HestonParams {
            kappa: 0.5,
            theta: 0.04,
            xi: 1.0,
            rho: -0.99,
            v0: 0.04,
        },
        HestonParams {
            kappa: 3.0,
            theta: 0.09,
            xi: 0.2,
            rho: 0.3,
            v0: 0.12,
        },
        HestonParams {
            kappa: 0.5,
            theta: 0.04,
            xi: 2.0,
            rho: 1.0,
            v0: 0.0,
        },
    ]
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_qe_step_is_kiln_cores_bit_for_bit() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_qe_step_is_kiln_cores_bit_for_bit") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let mc = McParams {
        paths: 1024,
        steps: 4, // dt = 1/4: large steps reach the exponential branch often
        seed: 0x0123_4567_89ab_cdef,
        ..McParams::default()
    };
    let n = 100_000usize;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for h in param_sets() {
        let s = spec(OptionType::Call, 100.0, 1.0, h);
        let pp = HestonPathParams::new(&s, &mc).unwrap();
        let (mut v, mut x, mut w) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            let r = next();
            // variances from 0 to ~0.5, a few exact zeros; log prices in [-1, 1)
            let vi = if i % 97 == 0 {
                0.0
            } else {
                ((r >> 40) as f32 / (1u64 << 24) as f32).powi(3) * 0.5
            };
            v.push(vi);
            x.push(((r >> 8) & 0xffff) as f32 / 32768.0 - 1.0);
            w.push(r as u32);
        }
        let out = gpu
            .run(HestonStepSelftest {
                spec: &s,
                mc: &mc,
                v: &v,
                x: &x,
                w: &w,
            })
            .unwrap();
        for i in 0..n {
            let words = heston_words(pp.key, 7, w[i], i as u32);
            let (vn, xn) = qe_step(&pp.qe, v[i], x[i], words);
            assert_eq!(
                out[i],
                (vn.to_bits(), xn.to_bits()),
                "{h:?}: input {i} (v {}, x {}): gpu ({}, {}) cpu ({vn}, {xn})",
                v[i],
                x[i],
                f32::from_bits(out[i].0),
                f32::from_bits(out[i].1)
            );
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_heston_prices_are_bitwise_the_cpus() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_heston_prices_are_bitwise_the_cpus") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let mut specs = Vec::new();
    for (i, h) in param_sets().into_iter().enumerate() {
        let kind = if i % 2 == 0 {
            OptionType::Call
        } else {
            OptionType::Put
        };
        let e = spec(kind, 90.0 + 7.0 * i as f64, 0.5 + 0.5 * i as f64, h);
        specs.push(e);
        specs.push(HestonSpec {
            option: e
                .option
                .with_style(Style::AsianArithmetic, Some(3 + i as u32), None),
            ..e
        });
    }
    for (paths, steps, cv) in [(3 * 1024 + 5, 7u32, false), (1001, 13, true), (2048, 1, false)] {
        let mc = McParams {
            paths,
            steps,
            seed: 0x5eed_0000 + u64::from(steps),
            control_variate: cv,
            ..McParams::default()
        };
        let want = cpu::price_heston(&specs, &mc);
        for max_items in [1u64 << 20, 3, 1] {
            let opts = GpuMcOptions {
                max_items,
                first_option: 0,
            };
            let got = gpu.run(PriceHeston::with(&specs, &mc, &opts)).unwrap();
            for (i, (g, c)) in got.iter().zip(&want).enumerate() {
                let (g, c) = (g.as_ref().unwrap(), c.as_ref().unwrap());
                let what = format!(
                    "option {i} ({:?}), {paths} paths x {steps} steps, cv {cv}, max_items {max_items}",
                    specs[i].option.style
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
        // the block sums too, and through the facade
        let gb = gpu
            .run(HestonBlockSums {
                spec: &specs[3],
                mc: &mc,
                option: 3,
            })
            .unwrap();
        let cb = cpu::simulate_heston_blocks(&specs[3], &mc, 3, 0..cpu::block_count(&mc)).unwrap();
        assert_eq!(gb, cb);
        let f = rt.price_heston(&specs, &mc);
        for (a, b) in f.iter().zip(&want) {
            assert_eq!(
                a.as_ref().unwrap().price.to_bits(),
                b.as_ref().unwrap().price.to_bits()
            );
        }
    }
    // a bad slot is an error in its slot only
    let mut bad = specs.clone();
    bad[1].heston.kappa = 0.0;
    let mc = McParams {
        paths: 1024,
        steps: 4,
        ..McParams::default()
    };
    let got = gpu.run(PriceHeston::new(&bad, &mc)).unwrap();
    assert!(got[1].as_ref().unwrap_err().to_string().contains("kappa"));
    assert!(got[0].is_ok() && got[2].is_ok());
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_heston_agrees_with_the_closed_form_at_a_million_paths() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_heston_agrees_with_the_closed_form") else {
        return;
    };
    // The first three sets: rho = +1 with xi = 2 has the heavy right tail that makes a
    // standard error unreliable (it is in the bitwise test).
    let mut specs = Vec::new();
    for (i, h) in param_sets().into_iter().take(3).enumerate() {
        for (j, k) in [80.0, 100.0, 125.0].into_iter().enumerate() {
            let kind = if (i + j) % 2 == 0 {
                OptionType::Call
            } else {
                OptionType::Put
            };
            specs.push(spec(kind, k, 1.0 + i as f64 * 0.5, h));
        }
    }
    // 256 steps: QE's discretisation bias must stay far below 4 standard errors of 2^20 paths
    let mc = McParams {
        paths: 1 << 20,
        steps: 256,
        seed: 2026,
        ..McParams::default()
    };
    let got = rt.price_heston(&specs, &mc);
    for (s, r) in specs.iter().zip(&got) {
        let r = r.as_ref().unwrap();
        let exact = s.price_analytic().unwrap();
        let z = (r.price - exact) / r.std_error;
        eprintln!(
            "{:?} K {} rho {} xi {}: mc {:.5} +- {:.5} exact {:.5} z {z:+.2}",
            s.option.option_type, s.option.strike, s.heston.rho, s.heston.xi, r.price, r.std_error, exact
        );
        assert!(
            z.abs() < 4.0,
            "{s:?}: mc {} +- {} vs {exact}",
            r.price,
            r.std_error
        );
    }
}
