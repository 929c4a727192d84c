//! The executor on one GPU: hybrid 1 GPU + CPU prices bitwise equal to the GPU alone, two
//! workers on one GPU (two streams) equal to one, the calibrated CPU share and the hybrid
//! vs GPU-alone times printed; and NCCL's single-device path (all-reduce, all-gather,
//! broadcast, the one-shard GEMM). Skips with a reason where no GPU is usable (fails with
//! KILN_REQUIRE_GPU=1); the NCCL test also skips where libnccl is absent (fails with
//! KILN_REQUIRE_NCCL=1).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use kiln::core::finance::{McParams, OptionSpec, OptionType, PriceResult, Rng, Style, BLOCK_SAMPLES};
use kiln::core::imaging::{BoundaryMode, FilterPath, Kernel2D};
use kiln::executor::{
    sharded_matmul, Collective, Executor, FilterBatch, GemmBatch, McPaths, OptionBook, Worker,
};
use kiln::finance::Method;
use kiln::linalg::{Gemm, GemmPrecision};
use kiln::{Config, DeviceRequest, Runtime};

/// A GPU runtime of this test's own, or `None` after the shared helper printed why not.
fn gpu(test: &str) -> Option<Arc<Runtime>> {
    kiln::testing::cuda_runtime_or_skip(test)?;
    let cfg = Config::load(None).unwrap();
    Some(Arc::new(Runtime::new(DeviceRequest::Cuda(None), &cfg).unwrap()))
}

fn run(paths: u64, steps: u32) -> McParams {
    McParams {
        paths,
        steps,
        seed: 20_261_203,
        antithetic: true,
        control_variate: true,
        fast_math: false,
        rng: Rng::Philox,
    }
}

fn same(a: &PriceResult, b: &PriceResult, what: &str) {
    assert_eq!(
        a.price.to_bits(),
        b.price.to_bits(),
        "{what}: {} vs {}",
        a.price,
        b.price
    );
    assert_eq!(a.std_error.to_bits(), b.std_error.to_bits(), "{what}");
    assert_eq!(a.delta.map(f64::to_bits), b.delta.map(f64::to_bits), "{what}");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn hybrid_gpu_and_cpu_prices_are_bitwise_the_gpu_alone() {
    let Some(rt) = gpu("hybrid_gpu_and_cpu_prices_are_bitwise_the_gpu_alone") else {
        return;
    };
    let euro = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.02, 0.2, 1.0);
    for spec in [euro, euro.with_style(Style::AsianArithmetic, Some(64), None)] {
        let mc = run((1 << 22) + 37, 64);
        let alone = rt.price(&[spec], Method::MonteCarlo, &mc).remove(0).unwrap();
        // the GPU alone through the executor, then GPU + CPU
        let job = McPaths::new(spec, mc, 0, 64).unwrap();
        let gpu_only = Executor::new(vec![Worker::on(rt.clone(), 0).unwrap()]).unwrap();
        gpu_only.run(&job).unwrap(); // warm-up (module load)
        let t = Instant::now();
        let (g, _) = gpu_only.run(&job).unwrap();
        let t_gpu = t.elapsed().as_secs_f64();
        same(&g, &alone, "executor, GPU alone");
        let hybrid = Executor::new(vec![Worker::on(rt.clone(), 0).unwrap(), Worker::cpu()]).unwrap();
        let (h, rep) = hybrid.run(&job).unwrap(); // calibrates
        same(&h, &alone, "hybrid (calibrating run)");
        let t = Instant::now();
        let (h2, rep2) = hybrid.run(&job).unwrap();
        let t_hybrid = t.elapsed().as_secs_f64();
        same(&h2, &alone, "hybrid");
        let cpu = rep2.workers.iter().find(|w| w.label == "cpu").unwrap();
        println!(
            "{:?}: calibrated cpu share {:.4} (probe: {:?}), cpu ran {} of {} chunks ({} stolen); gpu alone {:.1} ms, hybrid {:.1} ms ({:.2}x)",
            spec.style,
            rep.share_of("cpu").unwrap(),
            rep.calibrated,
            cpu.chunks,
            rep2.chunks,
            cpu.stolen,
            t_gpu * 1e3,
            t_hybrid * 1e3,
            t_gpu / t_hybrid
        );
    }
    // a book split by rows: hybrid equal to the GPU alone
    let specs: Vec<OptionSpec> = (0..64)
        .map(|i| OptionSpec::european(OptionType::Put, 100.0, 70.0 + i as f64, 0.03, 0.0, 0.3, 0.5))
        .collect();
    let mc = run(16 * BLOCK_SAMPLES, 32);
    let alone = rt.price(&specs, Method::MonteCarlo, &mc);
    let book = OptionBook::new(&specs, Method::MonteCarlo, mc, 0, 4).unwrap();
    let hybrid = Executor::new(vec![Worker::on(rt.clone(), 0).unwrap(), Worker::cpu()]).unwrap();
    let (got, _) = hybrid.run(&book).unwrap();
    for (i, (a, b)) in got.iter().zip(&alone).enumerate() {
        same(
            a.as_ref().unwrap(),
            b.as_ref().unwrap(),
            &format!("book option {i}"),
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn two_workers_on_one_gpu_give_the_results_of_one() {
    let Some(rt) = gpu("two_workers_on_one_gpu_give_the_results_of_one") else {
        return;
    };
    let one = Executor::new(vec![Worker::on(rt.clone(), 0).unwrap()]).unwrap();
    let two = Executor::new(vec![
        Worker::on(rt.clone(), 0).unwrap(),
        Worker::on(rt.clone(), 1).unwrap(),
    ])
    .unwrap();
    assert_eq!(two.workers()[1].label(), format!("{}/1", rt.device_name()));
    let spec = OptionSpec::european(OptionType::Call, 100.0, 110.0, 0.04, 0.0, 0.25, 2.0);
    let job = McPaths::new(spec, run(1 << 20, 128), 7, 16).unwrap();
    let (a, _) = one.run(&job).unwrap();
    let (b, rep) = two.run(&job).unwrap();
    same(&a, &b, "two streams");
    println!(
        "two streams: chunks {:?}",
        rep.workers.iter().map(|w| w.chunks).collect::<Vec<_>>()
    );

    let (n, h, w) = (16, 256, 256);
    let images: Vec<f32> = (0..n * h * w)
        .map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0)
        .collect();
    let k = Kernel2D::preset("gaussian:2").unwrap();
    let job = FilterBatch::new(&images, [n, h, w], k, BoundaryMode::Reflect, FilterPath::Auto, 2).unwrap();
    let (fa, _) = one.run(&job).unwrap();
    let (fb, _) = two.run(&job).unwrap();
    assert!(fa.iter().all(|v| v.is_finite()) && fa.iter().any(|v| *v != 0.0));
    assert!(
        fa.iter().zip(&fb).all(|(x, y)| x.to_bits() == y.to_bits()),
        "filter2d on two streams"
    );

    let (m, nn, kk, batch) = (64, 48, 96, 12);
    let g = Gemm::new(m, nn, kk).batched(batch);
    let a: Vec<f32> = (0..m * kk * batch)
        .map(|i| ((i * 31) % 17) as f32 / 8.0 - 1.0)
        .collect();
    let b: Vec<f32> = (0..kk * nn * batch)
        .map(|i| ((i * 13) % 23) as f32 / 11.0 - 1.0)
        .collect();
    let job = GemmBatch::new(&a, &b, g, GemmPrecision::F32, 1).unwrap();
    let (ga, _) = one.run(&job).unwrap();
    let (gb, _) = two.run(&job).unwrap();
    assert!(
        ga.iter().zip(&gb).all(|(x, y)| x.to_bits() == y.to_bits()),
        "gemm on two streams"
    );
    let chk = kiln::linalg::check(&a, &b, &ga, &g, GemmPrecision::F32, usize::MAX).unwrap();
    assert!(chk.passed, "{chk:?}");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn nccl_single_device_collectives_and_one_shard_gemm() {
    let Some(rt) = gpu("nccl_single_device_collectives_and_one_shard_gemm") else {
        return;
    };
    let group = match Collective::new(vec![rt.clone()]) {
        Ok(g) => g,
        Err(e @ kiln::Error::LibraryNotFound { .. }) => {
            assert!(e.to_string().contains("libnccl"), "{e}");
            kiln::testing::skip_unless_required(
                "KILN_REQUIRE_NCCL",
                "nccl_single_device_collectives_and_one_shard_gemm",
                &e.to_string(),
            );
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert!(group.is_nccl());
    if std::env::var_os("NCCL_NVLS_ENABLE").is_some() {
        println!("NCCL_NVLS_ENABLE={:?}", std::env::var("NCCL_NVLS_ENABLE"));
    }
    let host: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 7.0).collect();
    let x = rt.tensor(&host, &[10, 100]).unwrap();
    let s = group.all_reduce_sum(std::slice::from_ref(&x)).unwrap();
    assert_eq!(s[0].to_vec::<f32>().unwrap(), host);
    let g = group.all_gather(std::slice::from_ref(&x)).unwrap();
    assert_eq!(g[0].shape(), &[1, 10, 100]);
    assert_eq!(g[0].to_vec::<f32>().unwrap(), host);
    let b = group.broadcast(0, std::slice::from_ref(&x)).unwrap();
    assert_eq!(b[0].to_vec::<f32>().unwrap(), host);

    let (m, k, n) = (33, 70, 45);
    let xs: Vec<f32> = (0..m * k).map(|i| ((i * 37) % 29) as f32 / 14.0 - 1.0).collect();
    let ws: Vec<f32> = (0..k * n).map(|i| ((i * 11) % 31) as f32 / 15.0 - 1.0).collect();
    let y = sharded_matmul(&group, &xs, &ws, m, k, n, GemmPrecision::F32).unwrap();
    let gm = Gemm::new(m, n, k);
    let plain = rt.matmul(&xs, &ws, &gm, GemmPrecision::F32).unwrap();
    let chk = kiln::linalg::check(&xs, &ws, &y, &gm, GemmPrecision::F32, usize::MAX).unwrap();
    assert!(chk.passed, "{chk:?}");
    let same_bits = y.iter().zip(&plain).all(|(a, b)| a.to_bits() == b.to_bits());
    println!("one-shard gemm bitwise equal to the plain product: {same_bits}");
}
