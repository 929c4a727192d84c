//! kiln's fp8 wgmma GEMM (compute capability 9.0): `C = scale · A·Bᵀ`, A and B fp8 bytes,
//! C bf16, against a reference computed here in f64 from the decoded inputs.
//!
//! Hopper's fp8 tensor cores accumulate with fewer bits than f32 (about 14 significant bits
//! are reported), so the random-input bound is `(k·2^-13 + 2^-8)·|scale|·Σ|a||b|`; a dropped
//! or misplaced term is caught by the exact case instead: small integers whose every partial
//! sum is an integer below 2^13, exact at that precision, so C must equal the bf16 rounding
//! of the exact sum bit for bit.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use kiln::device::ops::Fp8GemmNt;
use kiln::device::{CudaBackend, Fp8Format};
use kiln::testing;
use kiln_core::backend::bf16;

const FORMATS: [Fp8Format; 2] = [Fp8Format::E4m3, Fp8Format::E5m2];

/// The byte of `f` whose value is `v`.
fn encode(f: Fp8Format, v: f32) -> u8 {
    (0..=255u8).find(|&b| f.decode(b) == v).unwrap()
}

fn multiply(
    b: &CudaBackend,
    a: &[u8],
    bb: &[u8],
    [m, n, k]: [usize; 3],
    f: Fp8Format,
    scale: f32,
) -> Vec<bf16> {
    let da = b.upload_slice(a).unwrap();
    let db = b.upload_slice(bb).unwrap();
    let mut dc = b.alloc_poisoned_as::<bf16>(m * n).unwrap();
    b.run(Fp8GemmNt {
        a: &da,
        b: &db,
        c: &mut dc,
        dims: [m, n, k],
        format: f,
        scale,
    })
    .unwrap_or_else(|e| panic!("{m}x{n}x{k} {f:?}: {e}"));
    let mut c = vec![bf16::from_f32(0.0); m * n];
    dc.copy_to_host(&mut c, b.stream()).unwrap();
    c
}

/// The exact product of the decoded inputs, and Σ|a||b|, at (i, j).
fn exact(f: Fp8Format, a: &[u8], b: &[u8], k: usize, i: usize, j: usize) -> (f64, f64) {
    (0..k).fold((0.0, 0.0), |(s, mag), q| {
        let t = f64::from(f.decode(a[i * k + q])) * f64::from(f.decode(b[j * k + q]));
        (s + t, mag + t.abs())
    })
}

fn backend(test: &str) -> Option<&'static CudaBackend> {
    let rt = testing::cuda_runtime_or_skip(test)?;
    let b = rt.cuda().unwrap();
    if !b.wgmma_supported() {
        let e = b
            .run(Fp8GemmNt {
                a: &b.upload_slice(&[0u8; 16]).unwrap(),
                b: &b.upload_slice(&[0u8; 16]).unwrap(),
                c: &mut b.alloc_poisoned_as::<bf16>(1).unwrap(),
                dims: [1, 1, 16],
                format: Fp8Format::E4m3,
                scale: 1.0,
            })
            .expect_err("fp8 wgmma off Hopper");
        assert!(e.to_string().contains("compute capability 9.0"), "{e}");
        return None;
    }
    Some(b)
}

const SHAPES: [[usize; 3]; 6] = [
    [1, 1, 16],
    [17, 33, 64],
    [257, 129, 48],
    [128, 256, 128],
    [300, 520, 144],
    [1031, 777, 272],
];

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn fp8_is_exact_on_small_integers() {
    let Some(b) = backend("fp8_is_exact_on_small_integers") else {
        return;
    };
    for f in FORMATS {
        let ints: Vec<u8> = (-4..=4).map(|v| encode(f, v as f32)).collect();
        for (s, &[m, n, k]) in SHAPES.iter().enumerate() {
            let pick = |len: usize, seed: u64| -> Vec<u8> {
                testing::random_f32(len, 0.0, ints.len() as f32, seed)
                    .into_iter()
                    .map(|x| ints[(x as usize).min(ints.len() - 1)])
                    .collect()
            };
            let (a, bb) = (pick(m * k, 11 + s as u64), pick(n * k, 29 + s as u64));
            for scale in [1.0f32, 0.5] {
                let c = multiply(b, &a, &bb, [m, n, k], f, scale);
                for i in 0..m {
                    for j in 0..n {
                        let (sum, _) = exact(f, &a, &bb, k, i, j);
                        let want = bf16::from_f32((sum * f64::from(scale)) as f32);
                        assert_eq!(
                            c[i * n + j].to_bits(),
                            want.to_bits(),
                            "{f:?} {m}x{n}x{k} scale {scale} at ({i}, {j}): {} vs {want}",
                            c[i * n + j]
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn fp8_random_inputs_within_the_bound() {
    let Some(b) = backend("fp8_random_inputs_within_the_bound") else {
        return;
    };
    let seed = testing::fresh_seed();
    for f in FORMATS {
        // every finite byte but the largest magnitudes (products stay far from f32's range)
        let finite: Vec<u8> = (0..=255u8)
            .filter(|&x| f.decode(x).is_finite() && f.decode(x).abs() <= 64.0)
            .collect();
        for (s, &[m, n, k]) in SHAPES.iter().enumerate() {
            let pick = |len: usize, seed: u64| -> Vec<u8> {
                testing::random_f32(len, 0.0, finite.len() as f32, seed)
                    .into_iter()
                    .map(|x| finite[(x as usize).min(finite.len() - 1)])
                    .collect()
            };
            let (a, bb) = (
                pick(m * k, seed + s as u64),
                pick(n * k, (seed ^ 0xb0) + s as u64),
            );
            let scale = 0.37f32;
            let c = multiply(b, &a, &bb, [m, n, k], f, scale);
            let beta = k as f64 * 2f64.powi(-13) + 2f64.powi(-8);
            for i in 0..m {
                for j in 0..n {
                    let (sum, mag) = exact(f, &a, &bb, k, i, j);
                    let got = f64::from(c[i * n + j].to_f32());
                    let want = sum * f64::from(scale);
                    let bound = beta * mag * f64::from(scale) + 1e-30;
                    assert!(
                        (got - want).abs() <= bound,
                        "{f:?} {m}x{n}x{k} (seed {seed}) at ({i}, {j}): {got} vs {want}, bound {bound:e}"
                    );
                }
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn fp8_bad_input_is_an_error() {
    let Some(b) = backend("fp8_bad_input_is_an_error") else {
        return;
    };
    let bytes = |n: usize| b.upload_slice(&vec![0x38u8; n]).unwrap();
    let mut c = b.alloc_poisoned_as::<bf16>(64).unwrap();
    let e = b
        .run(Fp8GemmNt {
            a: &bytes(8 * 24),
            b: &bytes(8 * 24),
            c: &mut c,
            dims: [8, 8, 24],
            format: Fp8Format::E4m3,
            scale: 1.0,
        })
        .expect_err("k = 24");
    assert!(e.to_string().contains("multiple of 16"), "{e}");
    let e = b
        .run(Fp8GemmNt {
            a: &bytes(8 * 16),
            b: &bytes(8 * 16),
            c: &mut c,
            dims: [8, 8, 16],
            format: Fp8Format::E4m3,
            scale: f32::NAN,
        })
        .expect_err("NaN scale");
    assert!(e.to_string().contains("not finite"), "{e}");
    let e = b
        .run(Fp8GemmNt {
            a: &bytes(8 * 16),
            b: &bytes(7 * 16),
            c: &mut c,
            dims: [8, 8, 16],
            format: Fp8Format::E5m2,
            scale: 1.0,
        })
        .expect_err("short B");
    assert!(e.to_string().contains("B holds"), "{e}");
}
