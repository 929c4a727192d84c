//! A/B timings of the GEMM, transpose and element-wise kernels' variants at the issue's
//! sizes, in one process so the ratios come from one call: kiln's tiled f32 GEMM at 8192³
//! (`auto` BK = 16, `k8`, `v1` = session 2's kernel; every transpose pair at 4096³), the
//! 16384² transpose (`auto` 64×64 tiles, `t32` the 32×32 kernels; f32 and f16), sigmoid on
//! 2^28 elements (`auto` one wave, `flat` one block per 512 vectors, `u4` session 2's kernel;
//! f32, f16, bf16). Every variant is first checked against the CPU / f64 reference on the
//! same input (GEMM: 4096 sampled elements within the f32 bound; transpose: every element
//! exact; sigmoid: every element within the CPU tolerance, and bitwise equal to the first
//! variant), then timed with CUDA events (3 warm-ups, median of the reps). One line a
//! variant: `VARIANT {"workload": .., "variant": .., "ms": .., ...}`.
//! `#[ignore]`: run on a GPU machine with `--ignored --nocapture` (each test alone by name).
#![allow(clippy::unwrap_used)]

use kiln::cuda::CudaBackend;
use kiln::linalg::{check, Gemm, GemmPrecision};
use kiln::{testing, UnaryOp};
use kiln_core::backend::{bf16, f16, Element, MapOp};
use kiln_core::DType;

/// DESIGN.md / docs/performance.md: the measured device-copy rate (read + write bytes).
const COPY_GBPS: f64 = 4235.0;
/// cuBLAS sgemm 8192³ on the H200 (docs/performance.md, run S2-5).
const CUBLAS_TFLOPS: f64 = 51.0;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn gemm_variant(b: &CudaBackend, g: &Gemm, variant: &str, reps: usize) {
    let (a, bb) = (
        testing::random_f32(g.len_a().unwrap(), -1.0, 1.0, 5),
        testing::random_f32(g.len_b().unwrap(), -1.0, 1.0, 6),
    );
    let da = b.upload_slice(&a).unwrap();
    let db = b.upload_slice(&bb).unwrap();
    let mut dc = b.alloc_poisoned_as::<f32>(g.len_c().unwrap()).unwrap();
    b.gemm_tiled_variant_device(&da, &db, &mut dc, g, variant)
        .unwrap();
    let mut c = vec![0.0f32; g.len_c().unwrap()];
    dc.copy_to_host(&mut c, b.stream()).unwrap();
    let r = check(&a, &bb, &c, g, GemmPrecision::F32, 4096).unwrap();
    assert!(r.passed, "{g} {variant}: {r:?}");
    let t = b
        .time_ms(3, reps, || {
            b.gemm_tiled_variant_device(&da, &db, &mut dc, g, variant)
        })
        .unwrap();
    let ms = median(t);
    let tflops = g.flops() / ms / 1e9;
    let t = match (g.trans_a, g.trans_b) {
        (false, false) => "nn",
        (false, true) => "nt",
        (true, false) => "tn",
        (true, true) => "tt",
    };
    println!(
        "VARIANT {{\"workload\": \"gemm_{}_{t}\", \"variant\": \"{variant}\", \"ms\": {ms:.4}, \"TFLOPs\": {tflops:.2}, \"of_cublas_8192\": {:.3}, \"worst_err_over_bound\": {:.2e}}}",
        g.m,
        tflops / CUBLAS_TFLOPS,
        r.worst
    );
}

#[test]
#[ignore]
fn bench_gemm_variants() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_gemm_variants") else {
        return;
    };
    let b = rt.cuda().unwrap();
    for v in ["auto", "k8", "v1"] {
        gemm_variant(b, &Gemm::new(8192, 8192, 8192), v, 10);
    }
    for (ta, tb) in [(false, true), (true, false), (true, true)] {
        for v in ["auto", "k8", "v1"] {
            gemm_variant(b, &Gemm::new(4096, 4096, 4096).transposed(ta, tb), v, 10);
        }
    }
}

fn transpose_variant<T: Element>(b: &CudaBackend, m: usize, variant: &str, reps: usize) {
    let n = m * m;
    let x: Vec<T> = testing::random_f32(n, -100.0, 100.0, 7)
        .into_iter()
        .map(T::from_f32)
        .collect();
    let dx = b.upload_slice(&x).unwrap();
    let mut dy = b.alloc_poisoned_as::<T>(n).unwrap();
    b.transpose_variant_device(&dx, m, m, &mut dy, variant).unwrap();
    let mut y = vec![T::from_f32(0.0); n];
    dy.copy_to_host(&mut y, b.stream()).unwrap();
    let bad = (0..m)
        .flat_map(|i| (0..m).map(move |j| (i, j)))
        .filter(|&(i, j)| y[j * m + i].to_f32().to_bits() != x[i * m + j].to_f32().to_bits())
        .count();
    assert_eq!(
        bad,
        0,
        "transpose {:?} {m}x{m} {variant}: {bad} elements wrong",
        T::DTYPE
    );
    let t = b
        .time_ms(3, reps, || {
            b.transpose_variant_device(&dx, m, m, &mut dy, variant)
        })
        .unwrap();
    let ms = median(t);
    let gbps = (2 * std::mem::size_of::<T>() * n) as f64 / ms / 1e6;
    println!(
        "VARIANT {{\"workload\": \"transpose_{}_{m}x{m}\", \"variant\": \"{variant}\", \"ms\": {ms:.4}, \"GBps\": {gbps:.0}, \"pct_of_copy\": {:.1}}}",
        T::DTYPE,
        100.0 * gbps / COPY_GBPS
    );
}

#[test]
#[ignore]
fn bench_transpose_variants() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_transpose_variants") else {
        return;
    };
    let b = rt.cuda().unwrap();
    for v in ["auto", "t32"] {
        transpose_variant::<f32>(b, 16384, v, 20);
    }
    for v in ["auto", "t32"] {
        transpose_variant::<f16>(b, 16384, v, 20);
    }
}

fn sigmoid_variants<T: Element>(b: &CudaBackend, n: usize, variants: &[&str], reps: usize) {
    let op = MapOp::Unary(UnaryOp::Sigmoid);
    let x: Vec<T> = testing::random_f32(n, -12.0, 12.0, 0x5eed)
        .into_iter()
        .map(T::from_f32)
        .collect();
    let mut want = vec![T::from_f32(f32::NAN); n];
    kiln_cpu::elementwise::map(op, &x, &mut want);
    let rel = if T::DTYPE == DType::F32 { 8.0 } else { 2.0 } * T::UNIT_ROUNDOFF;
    let dx = b.upload_slice(&x).unwrap();
    let mut dy = b.alloc_poisoned_as::<T>(n).unwrap();
    let mut first: Option<Vec<T>> = None;
    for &v in variants {
        b.map_variant_device(op, &dx, &mut dy, v).unwrap();
        let mut got = vec![T::from_f32(0.0); n];
        dy.copy_to_host(&mut got, b.stream()).unwrap();
        let bad = got
            .iter()
            .zip(&want)
            .filter(|(g, w)| {
                let (g, w) = (g.to_f32() as f64, w.to_f32() as f64);
                (g - w).abs() > rel * w.abs() + 1e-7 || g.is_nan()
            })
            .count();
        assert_eq!(bad, 0, "sigmoid {:?} {v}: {bad} elements off the CPU", T::DTYPE);
        if let Some(f) = &first {
            let diff = f
                .iter()
                .zip(&got)
                .filter(|(a, b)| a.to_f32().to_bits() != b.to_f32().to_bits())
                .count();
            assert_eq!(
                diff,
                0,
                "sigmoid {:?} {v}: {diff} elements differ from {}",
                T::DTYPE,
                variants[0]
            );
        } else {
            first = Some(got);
        }
        let t = b
            .time_ms(3, reps, || b.map_variant_device(op, &dx, &mut dy, v))
            .unwrap();
        let ms = median(t);
        let gbps = (2 * std::mem::size_of::<T>() * n) as f64 / ms / 1e6;
        println!(
            "VARIANT {{\"workload\": \"sigmoid_{}_2^{}\", \"variant\": \"{v}\", \"ms\": {ms:.4}, \"GBps\": {gbps:.0}, \"pct_of_copy\": {:.1}}}",
            T::DTYPE,
            n.trailing_zeros(),
            100.0 * gbps / COPY_GBPS
        );
    }
}

#[test]
#[ignore]
fn bench_sigmoid_variants() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_sigmoid_variants") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let n = 1 << 28;
    sigmoid_variants::<f32>(b, n, &["u4", "auto", "wave"], 50);
    sigmoid_variants::<f16>(b, n, &["auto", "wave"], 50);
    sigmoid_variants::<bf16>(b, n, &["auto", "wave"], 50);
}
