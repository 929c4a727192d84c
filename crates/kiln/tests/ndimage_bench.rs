//! Device-timed ndimage benchmarks (CUDA events, warm-up, median), each result checked
//! against the CPU first. `#[ignore]`: run on a GPU machine with `--ignored --nocapture`
//! (scripts/ndimage-gpu-check.sh does); prints `BENCH {...}` JSON lines as bench_gpu.rs.
#![allow(clippy::unwrap_used)]

use kiln::device::ops::NdimageLinear;
use kiln::ndimage::{gaussian_filter, ndimage_tolerance, GaussianOpts};
use kiln::{testing, Runtime};
use kiln_core::imaging::BoundaryMode;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore]
fn bench_gaussian3d_sigma4_512() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_gaussian3d") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let d = 512usize;
    let n = d * d * d;
    let f = gaussian_filter(3, &[4.0], &GaussianOpts::default(), None, BoundaryMode::Reflect).unwrap();
    let x = testing::random_f32(n, -1.0, 1.0, 4);
    let dx = b.upload(&x).unwrap();
    let mut dy = b.alloc_poisoned(n).unwrap();
    b.run(NdimageLinear {
        src: &dx,
        dst: &mut dy,
        shape: [d, d, d],
        filter: &f,
    })
    .unwrap();
    let mut got = vec![0.0f32; n];
    b.download(&dy, &mut got).unwrap();
    let want = Runtime::cpu().ndimage(&x, &[d, d, d], &f).unwrap();
    let tol = ndimage_tolerance(&f, 1.0);
    let err = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (*a as f64 - *b as f64).abs())
        .fold(0.0, f64::max);
    assert!(
        err <= tol,
        "gaussian sigma 4 512^3: max |gpu-cpu| {err:e} > {tol:e}"
    );
    let ms = median(
        b.time_ms(3, 20, || {
            b.run(NdimageLinear {
                src: &dx,
                dst: &mut dy,
                shape: [d, d, d],
                filter: &f,
            })
        })
        .unwrap(),
    );
    // three passes, each reading and writing the volume
    let bytes = 3.0 * 2.0 * 4.0 * n as f64;
    println!(
        "BENCH {{\"workload\": \"gaussian3d_s4_512\", \"peer\": \"kiln\", \"ms\": {ms:.4}, \"GBps\": {:.1}, \"max_err\": {err:e}}}",
        bytes / ms / 1e6
    );
}
