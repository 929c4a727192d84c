//! Device-timed rank-filter and morphology benchmarks at issue 19's sizes (CUDA events,
//! 3 warm-up runs, median of the timed runs), each GPU result first checked bit for bit
//! against the CPU. `#[ignore]`: run on a GPU machine with `--ignored --nocapture`
//! (scripts/rank-gpu-check.sh does). Prints one `BENCH {...}` JSON line and a table row per
//! workload; with `KILN_RANK_BENCH_DIR` set, writes each input and kiln's output there as
//! `.npy` so that scripts/rank_peers.py times CuPy and OpenCV on the same data and checks
//! their outputs against kiln's. Every workload uses `mode="nearest"` (OpenCV's
//! `medianBlur` replicates the border), so all three must agree exactly.
#![allow(clippy::unwrap_used)]

use kiln::rank::{RankFunction, RankParams};
use kiln::{testing, Runtime};
use kiln_core::imaging::BoundaryMode;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore]
fn bench_rank() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_rank") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let dir = std::env::var("KILN_RANK_BENCH_DIR").ok();
    let cpu = Runtime::cpu();
    let work: [(&str, [usize; 2], RankFunction, usize, usize); 5] = [
        ("median3_1080p_u8", [1080, 1920], RankFunction::Median, 3, 50),
        ("median5_1080p_u8", [1080, 1920], RankFunction::Median, 5, 50),
        ("median51_5120_u8", [5120, 5120], RankFunction::Median, 51, 10),
        (
            "erosion15_4096_u8",
            [4096, 4096],
            RankFunction::GreyErosion,
            15,
            50,
        ),
        (
            "dilation15_4096_u8",
            [4096, 4096],
            RankFunction::GreyDilation,
            15,
            50,
        ),
    ];
    println!(
        "{:<22} {:>14} {:>10} {:>12}",
        "workload", "kernel", "kiln ms", "mem floor ms"
    );
    for (name, shape, f, k, reps) in work {
        let n = shape[0] * shape[1];
        let host: Vec<u8> = testing::random_f32(n, 0.0, 256.0, k as u64)
            .iter()
            .map(|&v| v as u8)
            .collect();
        let x = cpu.tensor(&host, &shape).unwrap();
        let p = RankParams::size(&[k]).with_mode(BoundaryMode::Nearest);
        let xd = x.to_device(rt).unwrap();
        let got = xd.rank_apply(f, &p).unwrap().to_vec::<u8>().unwrap();
        let t0 = std::time::Instant::now();
        let want = x.rank_apply(f, &p).unwrap().to_vec::<u8>().unwrap();
        let cpu_ms = t0.elapsed().as_secs_f64() * 1e3;
        let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(bad, 0, "{name}: {bad} pixels differ from the CPU");
        let ms = median(
            b.time_ms(3, reps, || {
                let y = xd.rank_apply(f, &p)?;
                drop(y);
                Ok(())
            })
            .unwrap(),
        );
        let spec = match f {
            RankFunction::Median => kiln::rank::RankSpec::median_filter(2, &p).unwrap(),
            _ => kiln::rank::RankSpec::grey_erosion(2, &p).unwrap(),
        };
        let kernel = kiln_cuda::rank_algorithm(&spec, kiln::DType::U8).symbol();
        let floor = 2.0 * n as f64 / 4.2e12 * 1e3;
        println!("{name:<22} {kernel:>14} {ms:>10.4} {floor:>12.4}");
        println!(
            "BENCH {{\"workload\": \"{name}\", \"peer\": \"kiln\", \"ms\": {ms:.4}, \"kernel\": \"{kernel}\", \"floor_ms\": {floor:.4}, \"cpu_kiln_ms\": {cpu_ms:.1}}}"
        );
        if let Some(d) = &dir {
            let arr = |v: Vec<u8>| {
                ndarray::Array2::from_shape_vec(
                    (shape[0], shape[1]),
                    v.iter().map(|&x| f32::from(x)).collect(),
                )
                .unwrap()
            };
            kiln_io::write_npy(format!("{d}/{name}.in.npy"), &arr(host)).unwrap();
            kiln_io::write_npy(format!("{d}/{name}.kiln.npy"), &arr(got)).unwrap();
        }
    }
}
