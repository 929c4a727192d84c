//! Monte Carlo pricing through the runtime on every backend: CPU and GPU bitwise equal for
//! the same seed across styles, independent of batch and chunk size, and within 3 standard
//! errors of the closed forms. GPU parts skip with a reason where no GPU is usable (fail
//! with KILN_REQUIRE_GPU=1).
#![allow(clippy::unwrap_used)]

use kiln::device::ops::{FinanceSelftest, FinanceSqrtCheck, McBlockSums, PriceMc};
use kiln::finance::Method;
use kiln::Runtime;
use kiln_core::finance::{McParams, OptionSpec, OptionType, Style};
use kiln_cpu::finance as cpu;
use kiln_cuda::GpuMcOptions;

use kiln::testing::every_style;

use kiln::testing::assert_same_price_bits as same_bits;

fn runs() -> Vec<McParams> {
    let mut v = Vec::new();
    for (anti, cv) in [(false, false), (true, false), (false, true), (true, true)] {
        v.push(McParams {
            paths: 3 * 1024 + 37, // a partial last block and a partial warp round
            steps: 9,             // not a multiple of 4: a partial Philox call
            seed: 0xdead_beef_1234,
            antithetic: anti,
            control_variate: cv,
            fast_math: false,
            rng: kiln_core::finance::Rng::Philox,
        });
    }
    v
}

/// The portable f32 math and Philox words of the kernel are the CPU's, bit for bit.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_math_and_philox_are_bitwise_the_cpus() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_math_and_philox_are_bitwise_the_cpus") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    use kiln_core::philox::*;
    let mut w: Vec<u32> = vec![
        0,
        1,
        255,
        256,
        0x7fff_ffff,
        0x8000_0000,
        u32::MAX - 1,
        u32::MAX,
        1 << 30,
    ];
    let mut s = 0x9e37_79b9u32;
    for i in 0..100_000u32 {
        s = s.wrapping_mul(747_796_405).wrapping_add(2_891_336_453) ^ i;
        w.push(s);
    }
    let x: Vec<f32> = w.iter().map(|&v| (uniform_f32(v) - 0.5) * 200.0).collect();
    let key = key_from_seed(0x0123_4567_89ab_cdef);
    let (out, ph) = gpu.run(FinanceSelftest { w: &w, x: &x, key }).unwrap();
    let mut bad = Vec::new();
    let mut worst_fast = 0.0f64;
    for (i, &wi) in w.iter().enumerate() {
        let u = uniform_f32(wi);
        let (sn, cs) = sincos_turns_f32(wi);
        let want = [
            u.to_bits(),
            ln_f32(u).to_bits(),
            sn.to_bits(),
            cs.to_bits(),
            exp_f32(x[i]).to_bits(),
            box_muller_f32(wi, wi.wrapping_add(1))[0].to_bits(),
        ];
        let names = ["uniform", "ln", "sin", "cos", "exp", "box_muller"];
        for k in 0..6 {
            if out[i * 7 + k] != want[k] && bad.len() < 20 {
                bad.push(format!(
                    "{} w={wi:#x}: gpu {:#x} cpu {:#x}",
                    names[k],
                    out[i * 7 + k],
                    want[k]
                ));
            }
        }
        // fast_math: the same normal from hardware approximations, close but not bitwise.
        // Error budget: MUFU sin/cos ~2^-21 absolute, lg2 and sqrt ~2^-22 relative, and
        // lg2's absolute error near u = 1 (tiny r), where dz <= |d r^2| / (2 r).
        let exact = f64::from(box_muller_f32(wi, wi.wrapping_add(1))[0]);
        let r = (-2.0 * f64::from(uniform_f32(wi)).ln()).sqrt();
        let fast = f64::from(f32::from_bits(out[i * 7 + 6]));
        let tol = 4e-6 * (1.0 + r) + 4e-7 / r;
        worst_fast = worst_fast.max((fast - exact).abs() / tol);
        if (fast - exact).abs() > tol && bad.len() < 20 {
            bad.push(format!(
                "fast normal w={wi:#x}: gpu {fast} exact {exact} (tol {tol:.2e})"
            ));
        }
        let p = philox4x32_10([i as u32, wi, 7, 0], key);
        assert_eq!(&ph[i * 4..i * 4 + 4], &p, "philox at {i}");
    }
    eprintln!("fast_math normals: worst |error| / tolerance = {worst_fast:.3}");
    assert!(
        bad.is_empty(),
        "GPU math differs from the CPU's:\n{}",
        bad.join("\n")
    );
}

/// The exact kernels' Box-Muller root skips `__fsqrt_rn`'s range test and slow path; on
/// every float it can see (-2 ln u is in [1.1e-7, 33.3]) and well beyond, [2^-24, 64), it is
/// `__fsqrt_rn`'s correctly rounded result. Under a sanitizer, one binade in eight.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn sqrt_fast_path_is_correctly_rounded() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("sqrt_fast_path_is_correctly_rounded") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let (lo, hi) = (f32::powi(2.0, -24).to_bits(), 64.0f32.to_bits());
    let binade = 1u32 << 23;
    let step = if kiln::testing::under_sanitizer() { 8 } else { 1 };
    let mut checked = 0u64;
    for first in (lo..hi).step_by((binade * step) as usize) {
        let (bad, example) = gpu.run(FinanceSqrtCheck { first, count: binade }).unwrap();
        assert_eq!(
            bad,
            0,
            "{bad} floats in [{}, {}) differ from __fsqrt_rn, e.g. sqrt({})",
            f32::from_bits(first),
            f32::from_bits(first + binade),
            f32::from_bits(example)
        );
        checked += u64::from(binade);
    }
    assert!(checked >= u64::from(binade) * 30 / step as u64);
}

/// fast_math prices: every style, every variance-reduction combination, against the CPU's
/// exact engine on the same seed - far inside the standard error (the normals differ by
/// ~1e-6), Greeks close, and still independent of the chunking, bit for bit.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_fast_math_prices_agree_with_the_exact_cpu_engine() {
    let Some(rt) =
        kiln::testing::cuda_runtime_or_skip("gpu_fast_math_prices_agree_with_the_exact_cpu_engine")
    else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let specs = every_style();
    for exact in runs() {
        let fast = McParams {
            fast_math: true,
            paths: 64 * 1024 + 37,
            ..exact
        };
        let cpu_run = McParams {
            fast_math: false,
            ..fast
        };
        let g = gpu.run(PriceMc::new(&specs, &fast)).unwrap();
        let c = cpu::price_portfolio(&specs, &cpu_run);
        for (i, (g, c)) in g.iter().zip(&c).enumerate() {
            let (g, c) = (g.as_ref().unwrap(), c.as_ref().unwrap());
            let what = format!(
                "option {i} {:?} anti {} cv {}",
                specs[i].style, fast.antithetic, fast.control_variate
            );
            // a barrier can flip on a path whose log-price lands within ~1e-6 of it
            let k = if specs[i].style.is_barrier() { 0.25 } else { 0.02 };
            assert!(
                (g.price - c.price).abs() <= k * c.std_error + 1e-12,
                "{what}: fast {} exact {} se {}",
                g.price,
                c.price,
                c.std_error
            );
            assert!(
                (g.std_error - c.std_error).abs() <= 0.02 * c.std_error + 1e-12,
                "{what}: se"
            );
            assert_eq!(g.paths_used, c.paths_used, "{what}: paths");
            for (name, a, b) in [("delta", g.delta, c.delta), ("vega", g.vega, c.vega)] {
                match (a, b) {
                    (Some(a), Some(b)) => assert!(
                        (a - b).abs() <= 1e-3 * (1.0 + b.abs()),
                        "{what}: {name} {a} vs {b}"
                    ),
                    (a, b) => assert_eq!(a.is_some(), b.is_some(), "{what}: {name}"),
                }
            }
        }
        // chunking still changes no bit
        let opts = GpuMcOptions {
            max_items: 7,
            first_option: 0,
        };
        let part = gpu.run(PriceMc::with(&specs, &fast, &opts)).unwrap();
        for (a, b) in part.iter().zip(&g) {
            same_bits(a.as_ref().unwrap(), b.as_ref().unwrap(), "fast_math, max_items 7");
        }
    }
}

/// Every block's sums (so every path's payoff, control and Greeks) are the CPU's.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_block_sums_are_bitwise_the_cpus_for_every_style() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_block_sums_are_bitwise_the_cpus") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    for mc in runs() {
        for (i, spec) in every_style().iter().enumerate() {
            let nb = cpu::block_count(&mc);
            let want = cpu::simulate_blocks(spec, &mc, i as u32, 0..nb).unwrap();
            let got = gpu
                .run(McBlockSums {
                    spec,
                    mc: &mc,
                    option: i as u32,
                })
                .unwrap();
            assert_eq!(got.len(), want.len());
            for (b, (g, c)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g, c,
                    "{:?} {:?} anti={} block {b}",
                    spec.style, spec.option_type, mc.antithetic
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
fn prices_match_the_cpu_engine_bitwise() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("prices_match_the_cpu_engine_bitwise") else {
        return;
    };
    let specs = every_style();
    for mc in runs() {
        let got = rt.price(&specs, Method::MonteCarlo, &mc);
        let want = cpu::price_portfolio(&specs, &mc);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let what = format!("{} option {i} {:?} {:?}", rt.device_name(), specs[i].style, mc);
            same_bits(g.as_ref().unwrap(), w.as_ref().unwrap(), &what);
        }
    }
}

kiln::test_device!(batches_do_not_change_a_bit, |rt: &Runtime| {
    let specs = every_style();
    let mc = runs()[3];
    let whole = rt.price(&specs, Method::MonteCarlo, &mc);
    for batch in [1usize, 3, 5] {
        for (k, chunk) in specs.chunks(batch).enumerate() {
            let part = rt.price_batch(chunk, Method::MonteCarlo, &mc, (k * batch) as u32);
            for (j, r) in part.iter().enumerate() {
                same_bits(
                    r.as_ref().unwrap(),
                    whole[k * batch + j].as_ref().unwrap(),
                    &format!("batch {batch}"),
                );
            }
        }
    }
});

/// The GPU's launch chunking (options per launch, blocks per launch) changes no bit.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_chunk_size_does_not_change_a_bit() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_chunk_size_does_not_change_a_bit") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let specs = every_style();
    let mc = McParams {
        paths: 9 * 1024 + 5,
        ..runs()[1]
    };
    let whole = gpu.run(PriceMc::new(&specs, &mc)).unwrap();
    for max_items in [1u64, 2, 7, 10, 64] {
        let opts = GpuMcOptions {
            max_items,
            first_option: 0,
        };
        let part = gpu.run(PriceMc::with(&specs, &mc, &opts)).unwrap();
        for (a, b) in part.iter().zip(&whole) {
            same_bits(
                a.as_ref().unwrap(),
                b.as_ref().unwrap(),
                &format!("max_items {max_items}"),
            );
        }
    }
}

kiln::test_device!(mc_is_within_3_standard_errors_of_closed_forms, |rt: &Runtime| {
    // (2^16 under compute-sanitizer: the check is statistical and holds at any size)
    let paths = if rt.cuda().is_some() && !kiln::testing::under_sanitizer() {
        1 << 20
    } else if rt.cuda().is_some() {
        1 << 16
    } else {
        1 << 15
    };
    let mut specs = Vec::new();
    for kind in [OptionType::Call, OptionType::Put] {
        for (s, k, r, q, v, t) in [
            (100.0, 100.0, 0.05, 0.02, 0.2, 1.0),
            (90.0, 100.0, 0.01, 0.0, 0.35, 0.5),
            (110.0, 95.0, 0.03, 0.04, 0.15, 2.0),
        ] {
            let e = OptionSpec::european(kind, s, k, r, q, v, t);
            specs.push(e);
            specs.push(e.with_style(Style::AsianGeometric, Some(12), None));
        }
    }
    for anti in [false, true] {
        let mc = McParams {
            paths,
            steps: 16,
            seed: 77,
            antithetic: anti,
            control_variate: false,
            fast_math: false,
            rng: kiln_core::finance::Rng::Philox,
        };
        let got = rt.price(&specs, Method::MonteCarlo, &mc);
        let closed = rt.price(&specs, Method::Analytic, &mc);
        for (i, (g, c)) in got.iter().zip(&closed).enumerate() {
            let (g, c) = (g.as_ref().unwrap(), c.as_ref().unwrap());
            let z = (g.price - c.price) / g.std_error;
            assert!(
                z.abs() < 3.0,
                "option {i} {:?}: mc {} closed {} z {z}",
                specs[i].style,
                g.price,
                c.price
            );
        }
    }
});

kiln::test_device!(demo_cases_verify, |rt: &Runtime| {
    let rows = kiln::finance::demo_cases(rt, 0.05, 3).unwrap();
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert!(r.price.is_finite() && r.timing.median_ms >= 0.0, "{r:?}");
        assert!(r.verified, "{r:?}");
    }
});
