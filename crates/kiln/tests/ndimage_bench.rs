//! Device-timed ndimage benchmarks (CUDA events, warm-up, median), each result checked
//! against the CPU first. `#[ignore]`: run on a GPU machine with `--ignored --nocapture`
//! (scripts/ndimage-gpu-check.sh does); prints `BENCH {...}` JSON lines as bench_gpu.rs.
#![allow(clippy::unwrap_used)]

use kiln::device::ops::{NdimageLinear, NdimageLinearExact};
use kiln::ndimage::{gaussian_filter, ndimage_tolerance, GaussianOpts};
use kiln::{testing, Runtime};
use kiln_core::imaging::BoundaryMode;
use kiln_cuda::CudaData;

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

/// The same gaussian through the exact path (scipy's double arithmetic, the route of f32
/// and f64 tensors and of kiln.ndimage's CuPy/torch float arrays), f32 and f64 volumes,
/// each checked against the CPU bit for bit first.
#[test]
#[ignore]
fn bench_gaussian3d_sigma4_512_exact() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_gaussian3d_exact") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let d = 512usize;
    let n = d * d * d;
    let f = gaussian_filter(3, &[4.0], &GaussianOpts::default(), None, BoundaryMode::Reflect).unwrap();
    let x = testing::random_f32(n, -1.0, 1.0, 4);
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let cpu = Runtime::cpu();
    for wide in [false, true] {
        let (src, mut dst, want): (CudaData, CudaData, Vec<u64>) = if wide {
            let want: Vec<f64> = cpu
                .tensor(&x64, &[d, d, d])
                .unwrap()
                .ndimage(&f)
                .unwrap()
                .to_vec()
                .unwrap();
            (
                CudaData::F64(b.upload_slice(&x64).unwrap()),
                CudaData::F64(b.upload_slice(&vec![f64::NAN; n]).unwrap()),
                want.iter().map(|v| v.to_bits()).collect(),
            )
        } else {
            let want: Vec<f32> = cpu
                .tensor(&x, &[d, d, d])
                .unwrap()
                .ndimage(&f)
                .unwrap()
                .to_vec()
                .unwrap();
            (
                CudaData::F32(b.upload_slice(&x).unwrap()),
                CudaData::F32(b.upload_slice(&vec![f32::NAN; n]).unwrap()),
                want.iter().map(|v| u64::from(v.to_bits())).collect(),
            )
        };
        b.run(NdimageLinearExact {
            src: &src,
            dst: &mut dst,
            shape: [d, d, d],
            filter: &f,
        })
        .unwrap();
        let got: Vec<u64> = match &dst {
            CudaData::F64(o) => {
                let mut g = vec![0.0f64; n];
                o.copy_to_host(&mut g, b.stream()).unwrap();
                g.iter().map(|v| v.to_bits()).collect()
            }
            CudaData::F32(o) => {
                let mut g = vec![0.0f32; n];
                o.copy_to_host(&mut g, b.stream()).unwrap();
                g.iter().map(|v| u64::from(v.to_bits())).collect()
            }
            _ => unreachable!(),
        };
        let bad = (0..n).filter(|&i| got[i] != want[i]).count();
        assert_eq!(
            bad, 0,
            "gaussian sigma 4 512^3 exact (f64 {wide}): {bad} elements differ from the CPU"
        );
        let ms = median(
            b.time_ms(3, 10, || {
                b.run(NdimageLinearExact {
                    src: &src,
                    dst: &mut dst,
                    shape: [d, d, d],
                    filter: &f,
                })
            })
            .unwrap(),
        );
        let name = if wide {
            "gaussian3d_s4_512_exact_f64"
        } else {
            "gaussian3d_s4_512_exact_f32"
        };
        println!("BENCH {{\"workload\": \"{name}\", \"peer\": \"kiln\", \"ms\": {ms:.4}}}");
    }
}
