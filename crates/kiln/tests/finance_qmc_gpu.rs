//! Sobol (randomised quasi-Monte Carlo) pricing on the GPU: the kernel's inverse normal and
//! Sobol points are kiln-core's bit for bit, every style's price is the CPU engine's bit for
//! bit whatever the chunking, and large runs are unbiased. Time to accuracy through the
//! runtime on every backend. GPU parts skip with a reason where no GPU is usable (fail with
//! KILN_REQUIRE_GPU=1).
#![allow(clippy::unwrap_used)]

use kiln::device::ops::{McBlockSums, PriceMc, QmcSelftest};
use kiln::finance::{Method, TargetSe};
use kiln::Runtime;
use kiln_core::finance::invnorm::inv_norm_f32;
use kiln_core::finance::sobol::{direction_numbers, sobol_u32};
use kiln_core::finance::{bsm, McParams, OptionSpec, OptionType, Rng};
use kiln_core::philox::uniform_f64;
use kiln_cpu::finance as cpu;
use kiln_cuda::GpuMcOptions;

use kiln::testing::{assert_same_price_bits as same_bits, every_style};

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_inverse_normal_and_sobol_points_are_kiln_cores() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_inverse_normal_and_sobol_points_are_kiln_cores")
    else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let mut w: Vec<u32> = vec![0, 1, 2, 3, 0x7fff_ffff, 0x8000_0000, u32::MAX - 1, u32::MAX];
    let mut x = 0x2545_f491u32;
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        w.push(x);
        w.push(x >> (x % 32)); // the lower tail
    }
    let dims = 1000;
    let (inv, sob) = gpu.run(QmcSelftest { w: &w, dims }).unwrap();
    let v = direction_numbers();
    for (i, &wi) in w.iter().enumerate() {
        let want = inv_norm_f32(uniform_f64(wi)).to_bits();
        assert_eq!(inv[i], want, "w {wi:#x}: gpu {:#x} cpu {want:#x}", inv[i]);
        assert_eq!(
            sob[i],
            sobol_u32(v, wi, i % dims),
            "point {wi}, dimension {}",
            i % dims
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_sobol_prices_are_bitwise_the_cpus_for_every_style_and_chunking() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_sobol_prices_are_bitwise_the_cpus") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let specs = every_style();
    for (anti, cv) in [(false, false), (true, false), (false, true), (true, true)] {
        let mc = McParams {
            paths: 3 * 2048 + 5, // rounds up to 4 replicates x 2048 points
            steps: 9,            // not a multiple of 4
            seed: 0x5eed_1234,
            antithetic: anti,
            control_variate: cv,
            fast_math: false,
            rng: Rng::Sobol { replicates: 4 },
        };
        let cpu_book = cpu::price_portfolio(&specs, &mc);
        for max_items in [1u64 << 20, 3, 1] {
            let opts = GpuMcOptions {
                max_items,
                first_option: 0,
            };
            let g = gpu.run(PriceMc::with(&specs, &mc, &opts)).unwrap();
            for (i, (a, b)) in g.iter().zip(&cpu_book).enumerate() {
                let what = format!("{:?} anti {anti} cv {cv} max_items {max_items}", specs[i].style);
                same_bits(a.as_ref().unwrap(), b.as_ref().unwrap(), &what);
            }
        }
        // block sums too
        let gb = gpu
            .run(McBlockSums {
                spec: &specs[1],
                mc: &mc,
                option: 0,
            })
            .unwrap();
        let cb = cpu::simulate_blocks(&specs[1], &mc, 0, 0..cpu::block_count(&mc)).unwrap();
        assert_eq!(gb, cb);
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_sobol_is_unbiased_at_scale_with_many_steps() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_sobol_is_unbiased_at_scale") else {
        return;
    };
    let spec = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0);
    let exact = bsm(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0).price;
    for steps in [256u32, 1000, 1024] {
        let mc = McParams {
            paths: 1 << 18,
            steps,
            seed: u64::from(steps),
            antithetic: false,
            control_variate: false,
            fast_math: false,
            rng: Rng::Sobol { replicates: 16 },
        };
        let r = rt.price(&[spec], Method::MonteCarlo, &mc).remove(0).unwrap();
        let z = (r.price - exact) / r.std_error;
        assert!(
            z.abs() < 4.0,
            "{steps} steps: {} +- {} vs {exact}",
            r.price,
            r.std_error
        );
        assert!(r.std_error < 2e-3, "{steps} steps: se {}", r.std_error);
    }
}

kiln::test_device!(
    time_to_accuracy_doubles_until_the_target_is_met,
    |rt: &Runtime| {
        let spec = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0);
        let exact = bsm(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0).price;
        for rng in [Rng::Philox, Rng::Sobol { replicates: 8 }] {
            let mc = McParams {
                paths: 2048,
                steps: 8,
                seed: 1,
                antithetic: false,
                control_variate: false,
                fast_math: false,
                rng,
            };
            let target = TargetSe::Relative(2e-3);
            let run = rt.price_to_target(&[spec, spec], &mc, target, 1 << 24, 0);
            assert!(run.met.iter().all(|m| *m), "{rng:?}: {:?}", run.met);
            for r in &run.results {
                let r = r.as_ref().unwrap();
                assert!(r.std_error <= 2e-3 * r.price);
                assert!(
                    (r.price - exact).abs() < 4.0 * r.std_error,
                    "{rng:?}: {} vs {exact}",
                    r.price
                );
            }
            // the last round is exactly a plain run at the paths it reports
            let first = run.results[0].as_ref().unwrap();
            let plain = McParams {
                paths: first.paths_used,
                ..mc
            };
            let again = rt
                .price_batch(&[spec], Method::MonteCarlo, &plain, 0)
                .remove(0)
                .unwrap();
            assert_eq!(again.price.to_bits(), first.price.to_bits(), "{rng:?}");
            if rng == Rng::Philox {
                assert!(run.rounds >= 2, "{rng:?}: {} rounds", run.rounds);
            }
            // A cap below the need stops short and says so.
            let capped = rt.price_to_target(&[spec], &mc, TargetSe::Absolute(1e-7), 8192, 0);
            assert_eq!(capped.met, vec![false]);
        }
    }
);
