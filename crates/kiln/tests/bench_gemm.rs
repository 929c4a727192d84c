//! Device-timed GEMM benchmarks at the sizes: cuBLAS f32 / tf32 / bf16 / f16 and
//! kiln's tiled f32 kernel at 8192³, the seed's naive kernel at 2048³. Each implementation is
//! first verified at small odd sizes (transposes and a batch included), then its
//! benchmark-size result is checked on a sample, and only then timed (CUDA events, warm-up,
//! median of reps). `#[ignore]`: run on a GPU machine with `--ignored --nocapture`; prints one
//! `BENCH {...}` JSON line per measurement, named like `peer_bench.py`'s `gemm_N` rows.
#![allow(clippy::unwrap_used)]

use kiln::device::ops::{Fp8GemmNt, MatMul, MatMulHost, WgmmaMatMul};
use kiln::device::CudaBackend;
use kiln::linalg::{check, Gemm, GemmElement, GemmImpl, GemmPrecision};
use kiln::testing;
use kiln_core::backend::{bf16, f16};

/// H200 floors (the card's dense peaks, no sparsity): FP32 SIMT 132 SMs × 128 lanes ×
/// 2 × 1.98 GHz ≈ 67 TFLOP/s; TF32 tensor ≈ 495; BF16/FP16 tensor ≈ 989.
fn floor_tflops(p: GemmPrecision) -> f64 {
    match p {
        GemmPrecision::F32 => 67.0,
        GemmPrecision::Tf32 => 495.0,
        GemmPrecision::Bf16 | GemmPrecision::F16 => 989.0,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn data<T: GemmElement>(n: usize, seed: u64) -> Vec<T> {
    testing::random_f32(n, -1.0, 1.0, seed)
        .into_iter()
        .map(T::from_f32)
        .collect()
}

/// Multiply on the device, download and check against the f64 reference; returns the
/// worst error over its bound.
fn verify<T: GemmElement>(b: &CudaBackend, g: &Gemm, p: GemmPrecision, imp: GemmImpl, samples: usize) -> f64 {
    let (a, bb) = (data::<T>(g.len_a().unwrap(), 3), data::<T>(g.len_b().unwrap(), 4));
    let c = b
        .run(MatMulHost {
            a: &a,
            b: &bb,
            gemm: g,
            precision: p,
            imp,
        })
        .unwrap();
    let r = check(&a, &bb, &c, g, p, samples).unwrap();
    assert!(r.passed, "{g} {p} {imp:?}: {r:?}");
    r.worst
}

fn bench<T: GemmElement>(
    b: &CudaBackend,
    n: usize,
    p: GemmPrecision,
    imp: GemmImpl,
    peer: &str,
    reps: usize,
) {
    // small odd sizes first: every layout the benchmark does not cover
    for g in [
        Gemm::new(1031, 1043, 1013),
        Gemm::new(517, 263, 389).transposed(true, true).batched(3),
        Gemm::new(129, 1000, 70).transposed(false, true),
    ] {
        verify::<T>(b, &g, p, imp, 1 << 16);
    }
    let g = Gemm::new(n, n, n);
    let (a, bb) = (data::<T>(n * n, 5), data::<T>(n * n, 6));
    let da = b.upload_slice(&a).unwrap();
    let db = b.upload_slice(&bb).unwrap();
    let mut dc = b.alloc_poisoned_as::<T>(n * n).unwrap();
    b.run(MatMul {
        a: &da,
        b: &db,
        c: &mut dc,
        gemm: &g,
        precision: p,
        imp,
    })
    .unwrap();
    let mut c = vec![T::from_f32(0.0); n * n];
    dc.copy_to_host(&mut c, b.stream()).unwrap();
    let r = check(&a, &bb, &c, &g, p, 4096).unwrap();
    assert!(r.passed, "{g} {p} {imp:?}: {r:?}");
    let ms = median(
        b.time_ms(3, reps, || {
            b.run(MatMul {
                a: &da,
                b: &db,
                c: &mut dc,
                gemm: &g,
                precision: p,
                imp,
            })
        })
        .unwrap(),
    );
    let tflops = g.flops() / ms / 1e9;
    let floor = floor_tflops(p);
    println!(
        "BENCH {{\"workload\": \"gemm_{n}\", \"peer\": \"{peer}\", \"ms\": {ms:.4}, \"TFLOPs\": {tflops:.1}, \"floor_TFLOPs\": {floor:.0}, \"of_floor\": {:.3}, \"worst_err_over_bound\": {:.2e}, \"max_abs_err\": {:.2e}}}",
        tflops / floor,
        r.worst,
        r.max_abs_err
    );
}

#[test]
#[ignore]
fn bench_gemm() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_gemm") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let lib = GemmImpl::Library;
    bench::<f32>(b, 8192, GemmPrecision::F32, lib, "kiln-cublas-fp32", 10);
    bench::<f32>(b, 8192, GemmPrecision::Tf32, lib, "kiln-cublas-tf32", 10);
    bench::<bf16>(b, 8192, GemmPrecision::Bf16, lib, "kiln-cublas-bf16", 10);
    bench::<f16>(b, 8192, GemmPrecision::F16, lib, "kiln-cublas-fp16", 10);
    bench::<f32>(
        b,
        8192,
        GemmPrecision::F32,
        GemmImpl::Tiled,
        "kiln-tiled-fp32",
        10,
    );
    bench::<f32>(b, 2048, GemmPrecision::F32, GemmImpl::Naive, "kiln-naive-fp32", 3);
    bench::<f32>(
        b,
        2048,
        GemmPrecision::F32,
        GemmImpl::Tiled,
        "kiln-tiled-fp32",
        10,
    );
    bench::<f32>(b, 2048, GemmPrecision::F32, lib, "kiln-cublas-fp32", 10);
}

/// Every variant of kiln's wgmma bf16 kernel against cuBLAS bf16 at `n`³, `NT` and `NN`
/// (each operand read as stored): each checked on a sample (the f64 check) before any is
/// timed, then cuBLAS and the variants timed in three alternated rounds, the order rotated
/// each round so neither clock drift nor the position in a round favours one.
#[test]
#[ignore]
fn bench_gemm_wgmma() {
    use kiln::device::WgmmaVariant;
    let Some(rt) = testing::cuda_runtime_or_skip("bench_gemm_wgmma") else {
        return;
    };
    let b = rt.cuda().unwrap();
    if !b.wgmma_supported() {
        println!(
            "bench_gemm_wgmma: compute capability {:?}, no wgmma kernel",
            b.info().desc.compute_capability
        );
        return;
    }
    let p = GemmPrecision::Bf16;
    for g in [
        Gemm::new(1031, 1043, 1016),
        Gemm::new(129, 1000, 72).transposed(true, false),
        Gemm::new(1024, 1000, 1016).transposed(true, true),
    ] {
        verify::<bf16>(b, &g, p, GemmImpl::Wgmma, 1 << 16);
    }
    // None: cuBLAS; Some(v): kiln's variant v
    let peers: Vec<Option<WgmmaVariant>> = std::iter::once(None)
        .chain(WgmmaVariant::ALL.into_iter().map(Some))
        .collect();
    let name = |peer: Option<WgmmaVariant>| match peer {
        None => "kiln-cublas-bf16".to_string(),
        Some(v) => format!("kiln-wgmma-{}-bf16", v.name()),
    };
    for n in [4096usize, 8192] {
        for tb in [true, false] {
            let g = Gemm::new(n, n, n).transposed(false, tb);
            let (a, bb) = (data::<bf16>(n * n, 5), data::<bf16>(n * n, 6));
            let da = b.upload_slice(&a).unwrap();
            let db = b.upload_slice(&bb).unwrap();
            let mut dc = b.alloc_poisoned_as::<bf16>(n * n).unwrap();
            let run = |peer: Option<WgmmaVariant>, dc: &mut _| match peer {
                None => b.run(MatMul {
                    a: &da,
                    b: &db,
                    c: dc,
                    gemm: &g,
                    precision: p,
                    imp: GemmImpl::Library,
                }),
                Some(variant) => b.run(WgmmaMatMul {
                    a: &da,
                    b: &db,
                    c: dc,
                    gemm: &g,
                    variant,
                }),
            };
            for &peer in &peers {
                // poison between peers: each check sees only its own writes
                dc = b.alloc_poisoned_as::<bf16>(n * n).unwrap();
                run(peer, &mut dc).unwrap();
                let mut c = vec![bf16::from_f32(0.0); n * n];
                dc.copy_to_host(&mut c, b.stream()).unwrap();
                let r = check(&a, &bb, &c, &g, p, 4096).unwrap();
                assert!(r.passed, "{g} {p} {}: {r:?}", name(peer));
            }
            let mut times = vec![Vec::new(); peers.len()];
            for round in 0..3 {
                for i in 0..peers.len() {
                    let at = (i + round) % peers.len();
                    times[at].extend(b.time_ms(2, 10, || run(peers[at], &mut dc)).unwrap());
                }
            }
            let layout = if tb { "nt" } else { "nn" };
            let ms: Vec<f64> = times.into_iter().map(median).collect();
            for (&peer, &ms) in peers.iter().zip(&ms) {
                let tflops = g.flops() / ms / 1e9;
                println!(
                    "BENCH {{\"workload\": \"gemm_{n}_{layout}\", \"peer\": \"{}\", \"ms\": {ms:.4}, \"TFLOPs\": {tflops:.1}}}",
                    name(peer)
                );
            }
            for (&peer, &t) in peers.iter().zip(&ms).skip(1) {
                println!(
                    "BENCH_RATIO gemm_{n}_{layout} {}/cublas time {:.3}",
                    name(peer),
                    t / ms[0]
                );
            }
        }
    }
}

/// kiln's fp8 wgmma kernel (e4m3 and e5m2, B stored n x k) at `n`³, checked on a sample
/// against the decoded inputs' f64 product first; the peer is cuBLASLt through
/// `torch._scaled_mm` in `peer_bench.py --only matmul` (same call).
#[test]
#[ignore]
fn bench_gemm_fp8() {
    use kiln::device::Fp8Format;
    let Some(rt) = testing::cuda_runtime_or_skip("bench_gemm_fp8") else {
        return;
    };
    let b = rt.cuda().unwrap();
    if !b.wgmma_supported() {
        println!("bench_gemm_fp8: no wgmma kernel on this device");
        return;
    }
    for n in [4096usize, 8192] {
        for f in [Fp8Format::E4m3, Fp8Format::E5m2] {
            let finite: Vec<u8> = (0..=255u8)
                .filter(|&x| f.decode(x).is_finite() && f.decode(x).abs() <= 4.0)
                .collect();
            let pick = |seed: u64| -> Vec<u8> {
                testing::random_f32(n * n, 0.0, finite.len() as f32, seed)
                    .into_iter()
                    .map(|x| finite[(x as usize).min(finite.len() - 1)])
                    .collect()
            };
            let (a, bb) = (pick(5), pick(6));
            let da = b.upload_slice(&a).unwrap();
            let db = b.upload_slice(&bb).unwrap();
            let mut dc = b.alloc_poisoned_as::<bf16>(n * n).unwrap();
            b.run(Fp8GemmNt {
                a: &da,
                b: &db,
                c: &mut dc,
                dims: [n, n, n],
                format: f,
                scale: 1.0,
            })
            .unwrap();
            let mut c = vec![bf16::from_f32(0.0); n * n];
            dc.copy_to_host(&mut c, b.stream()).unwrap();
            // 4096 sampled elements within the fp8 accumulation bound (tests/gemm_fp8.rs)
            let beta = n as f64 * 2f64.powi(-13) + 2f64.powi(-8);
            let mut worst = 0.0f64;
            for s in 0..4096usize {
                let (i, j) = ((s * 7919) % n, (s * 104_729) % n);
                let (mut sum, mut mag) = (0.0f64, 0.0f64);
                for q in 0..n {
                    let t = f64::from(f.decode(a[i * n + q])) * f64::from(f.decode(bb[j * n + q]));
                    sum += t;
                    mag += t.abs();
                }
                let err = (f64::from(c[i * n + j].to_f32()) - sum).abs() / (beta * mag + 1e-30);
                worst = worst.max(err);
            }
            assert!(worst <= 1.0, "{f:?} {n}: worst error over bound {worst}");
            let ms = median(
                b.time_ms(3, 20, || {
                    b.run(Fp8GemmNt {
                        a: &da,
                        b: &db,
                        c: &mut dc,
                        dims: [n, n, n],
                        format: f,
                        scale: 1.0,
                    })
                })
                .unwrap(),
            );
            let tflops = 2.0 * (n as f64).powi(3) / ms / 1e9;
            println!(
                "BENCH {{\"workload\": \"gemm_{n}_nt\", \"peer\": \"kiln-wgmma-{f:?}\", \"ms\": {ms:.4}, \"TFLOPs\": {tflops:.1}, \"worst_err_over_bound\": {worst:.2e}}}"
            );
        }
    }
}
