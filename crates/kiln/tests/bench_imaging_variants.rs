//! A/B timings of the imaging kernels' variants at the sizes (issue 4): each
//! variant is first checked against the CPU op on the same input (every element, within
//! `filter_tolerance`), then timed with CUDA events (3 warm-ups, median of the reps), the
//! input rotated over copies larger than L2 where it fits. One line a variant:
//! `VARIANT {"workload": .., "variant": .., "ms": .., "GBps": .., "pct_of_copy": ..}`.
//! `#[ignore]`: run on a GPU machine with `--ignored --nocapture`.
#![allow(clippy::unwrap_used)]

use kiln::cuda::pool::DeviceBuffer;
use kiln::cuda::CudaBackend;
use kiln::imaging::{filter_tolerance, FilterPath};
use kiln::{testing, Runtime};
use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D};

/// DESIGN.md / docs/performance.md: the measured device-copy rate (read + write bytes).
const COPY_GBPS: f64 = 4235.0;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn max_err(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).abs())
        .fold(0.0, |m, e| {
            if e.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.max(e)
            }
        })
}

/// Copies of the input so that consecutive launches read different memory: as the CLI
/// bench's rotation, one copy from 2x L2 (2 x 50 MB here) up, else enough to cover it (at
/// most 16).
fn copies(b: &CudaBackend, x: &[f32]) -> Vec<DeviceBuffer<f32>> {
    let (bytes, l2) = (4 * x.len(), 50usize << 20);
    let n = if bytes >= 2 * l2 {
        1
    } else {
        ((2 * l2).div_ceil(bytes) + 1).clamp(2, 16)
    };
    (0..n).map(|_| b.upload(x).unwrap()).collect()
}

/// Checks `run` (input copy, output) against `want`, then times it.
#[allow(clippy::too_many_arguments)]
fn bench(
    b: &CudaBackend,
    workload: &str,
    variant: &str,
    xs: &[DeviceBuffer<f32>],
    want: &[f32],
    tol: f64,
    reps: usize,
    mut run: impl FnMut(&DeviceBuffer<f32>, &mut DeviceBuffer<f32>) -> kiln::Result<()>,
) {
    let n = want.len();
    let mut dy = b.alloc_poisoned(n).unwrap();
    run(&xs[0], &mut dy).unwrap();
    let mut got = vec![0.0f32; n];
    b.download(&dy, &mut got).unwrap();
    let err = max_err(&got, want);
    assert!(
        err <= tol,
        "{workload} {variant}: max |gpu - cpu| {err:e} > tol {tol:e}"
    );
    let mut i = 0;
    let t = b
        .time_ms(3, reps, || {
            i += 1;
            run(&xs[i % xs.len()], &mut dy)
        })
        .unwrap();
    let ms = median(t);
    let gbps = (8 * n) as f64 / ms / 1e6;
    println!(
        "VARIANT {{\"workload\": \"{workload}\", \"variant\": \"{variant}\", \"ms\": {ms:.4}, \"GBps\": {gbps:.0}, \"pct_of_copy\": {:.1}, \"maxerr\": {err:.2e}}}",
        100.0 * gbps / COPY_GBPS
    );
}

#[test]
#[ignore]
fn bench_imaging_variants() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_imaging_variants") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let cpu = Runtime::cpu();
    let mode = BoundaryMode::Reflect;
    // gaussian sigma 2 (radius 8, 17 taps), 8192^2, reflect: fused vs the two passes.
    {
        let g = 8192;
        let k = Kernel2D::preset("gaussian:2").unwrap();
        let sep = k.separable_for(mode).unwrap();
        let x = testing::random_f32(g * g, 0.0, 1.0, 2);
        let want = cpu.filter2d(&x, [g, g], &k, mode, FilterPath::Separable).unwrap();
        let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
        let tol = filter_tolerance(k.size() * k.size(), sw, 1.0);
        let xs = copies(b, &x);
        for v in ["auto", "passes"] {
            bench(b, "gaussian2_8192x8192", v, &xs, &want, tol, 20, |s, d| {
                b.separable_variant_device(s, d, [1, g, g], &sep, 1, mode, v)
            });
        }
    }
    // cross4 (3x3): the register kernels (8 and 4 rows a thread) vs the shared-memory one.
    for (h, w) in [(1080usize, 1920usize), (16384, 16384)] {
        let k = Kernel2D::preset("cross4").unwrap();
        let x = testing::random_f32(h * w, -1.0, 1.0, 1);
        let want = cpu.filter2d(&x, [h, w], &k, mode, FilterPath::Direct).unwrap();
        let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
        let tol = filter_tolerance(9, sw, 1.0);
        let xs = copies(b, &x);
        let reps = if h * w > 1 << 24 { 20 } else { 200 };
        for v in ["auto", "k3r8", "k3r4", "smem"] {
            bench(
                b,
                &format!("stencil5_{h}x{w}"),
                v,
                &xs,
                &want,
                tol,
                reps,
                |s, d| b.filter2d_direct_variant_device(s, d, [1, h, w], &k, mode, v),
            );
        }
    }
    // Random weights, constant 0: 3x3x3 on 512^3 (the z-marching cp.async kernels with 4
    // and 8 rows a thread, the register-prefetch kernel with wave-balanced and the old
    // z chunks), and 5x5x5 on 256^3 (auto = the register-prefetch kernel, vs zm).
    for (d, kk, variants) in [
        (512usize, 3usize, &["auto", "zm", "zm8", "smem", "zc64"][..]),
        (256, 5, &["auto", "zm"][..]),
    ] {
        let k = Kernel3D::new(
            [kk, kk, kk],
            testing::random_f32(kk * kk * kk, 0.0, 1.0, 3)
                .iter()
                .map(|&v| v as f64)
                .collect(),
        )
        .unwrap();
        let m3 = BoundaryMode::Constant(0.0);
        let x = testing::random_f32(d * d * d, 0.0, 1.0, 4);
        let want = cpu.filter3d(&x, [d, d, d], &k, m3, FilterPath::Direct).unwrap();
        let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
        let tol = filter_tolerance(kk * kk * kk, sw, 1.0);
        let xs = copies(b, &x);
        let name = if kk == 3 {
            format!("conv3d_{d}")
        } else {
            format!("conv3d_k{kk}_{d}")
        };
        for &v in variants {
            bench(b, &name, v, &xs, &want, tol, 20, |s, dd| {
                b.filter3d_direct_variant_device(s, dd, [d, d, d], &k, m3, v)
            });
        }
    }
}
