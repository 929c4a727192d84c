//! GEMM on every backend against an f64 reference written here, element by element within
//! each precision's error bound; odd sizes, every transpose pair, packed and broadcast
//! batches; kiln's tiled and naive kernels on CUDA; exact results on small integers; and bad
//! input as errors, never panics.
//!
//! The bound, for element (i, j) with `S = Σ_p |a_ip|·|b_pj|` over the *stored* inputs
//! (bf16/f16 values widened exactly, so the reference sees what the GPU sees):
//! - inputs rounded to the compute precision: none for f32, and none for bf16/f16, whose
//!   products are exact in f32 (8- or 11-bit significands: at most 22 bits); TF32 keeps 10
//!   explicit mantissa bits, so each input is off by <= 2^-10 relative (round or truncate)
//!   and each product by <= (2·2^-10 + 2^-20)·|a·b|;
//! - k products summed in f32 in any order (blocked, split-K, tensor-core trees): at most
//!   γ_k·S with γ_k = k·u / (1 - k·u) (Higham, Accuracy and Stability of Numerical
//!   Algorithms, §3.1); u = 2^-23, twice f32's unit roundoff, because tensor cores may
//!   truncate instead of rounding;
//! - C stored: u_out·|C| <= u_out·S with u_out = 2^-24 (f32), 2^-8 (bf16), 2^-11 (f16).
//!
//! So `|c - c_exact| <= (2·u_in + u_in² + γ_k + u_out)·S` (+ half the smallest subnormal
//! spacing of f16 for results that land there): the "k·u·|A||B|" rule with u per precision.
//! Random inputs in [-1, 1) sit far inside it; a dropped, doubled or misplaced term (about
//! S/k) or an unwritten element (NaN: outputs are poisoned) is far outside it.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use kiln::device::ops::MatMul;
use kiln::linalg::{Gemm, GemmElement, GemmImpl, GemmPrecision};
use kiln::{testing, BackendKind, Runtime};
use kiln_core::backend::{bf16, f16};

/// The bound's factor on S (module docs), derived independently of the library's.
fn bound_factor(p: GemmPrecision, k: usize) -> f64 {
    let u_in = if p == GemmPrecision::Tf32 {
        2f64.powi(-10)
    } else {
        0.0
    };
    let ku = k as f64 * 2f64.powi(-23);
    let u_out = match p {
        GemmPrecision::Bf16 => 2f64.powi(-8),
        GemmPrecision::F16 => 2f64.powi(-11),
        _ => 2f64.powi(-24),
    };
    2.0 * u_in + u_in * u_in + ku / (1.0 - ku) + u_out
}

/// Row-major index of op(A_z)(i, p) and op(B_z)(p, j), written out here.
fn a_at(g: &Gemm, z: usize, i: usize, p: usize) -> usize {
    z * g.stride_a + if g.trans_a { p * g.m + i } else { i * g.k + p }
}
fn b_at(g: &Gemm, z: usize, p: usize, j: usize) -> usize {
    z * g.stride_b + if g.trans_b { j * g.k + p } else { p * g.n + j }
}

fn data<T: kiln::FloatElement>(n: usize, seed: u64) -> Vec<T> {
    testing::random_f32(n, -1.0, 1.0, seed)
        .into_iter()
        .map(T::from_f32)
        .collect()
}

/// Multiply on `rt` and compare every element of C with the f64 product.
fn check<T: GemmElement>(rt: &Runtime, g: &Gemm, p: GemmPrecision, imp: GemmImpl, seed: u64) {
    let a: Vec<T> = data(g.len_a().unwrap(), seed);
    let b: Vec<T> = data(g.len_b().unwrap(), seed ^ 0xb);
    let c = rt
        .matmul_with(&a, &b, g, p, imp)
        .unwrap_or_else(|e| panic!("{} {g} {p} {imp:?}: {e}", rt.device_name()));
    assert_eq!(c.len(), g.batch * g.m * g.n, "{g}");
    let beta = bound_factor(p, g.k);
    let floor = if p == GemmPrecision::F16 {
        2f64.powi(-25)
    } else {
        1e-38
    };
    for z in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                let (mut s, mut mag) = (0.0f64, 0.0f64);
                for q in 0..g.k {
                    let t = a[a_at(g, z, i, q)].to_f32() as f64 * b[b_at(g, z, q, j)].to_f32() as f64;
                    s += t;
                    mag += t.abs();
                }
                let got = c[(z * g.m + i) * g.n + j].to_f32() as f64;
                let bound = beta * mag + floor;
                assert!(
                    (got - s).abs() <= bound,
                    "{} {g} {p} {imp:?} (seed {seed}) at batch {z} ({i}, {j}): {got} vs {s}, bound {bound:e}",
                    rt.device_name()
                );
            }
        }
    }
}

/// The implementations to test on `rt` for `p`: the library everywhere, and on CUDA kiln's
/// tiled and naive f32 kernels.
fn impls(rt: &Runtime, p: GemmPrecision) -> Vec<GemmImpl> {
    if rt.kind() == BackendKind::Cuda && p == GemmPrecision::F32 {
        vec![GemmImpl::Library, GemmImpl::Tiled, GemmImpl::Naive]
    } else {
        vec![GemmImpl::Library]
    }
}

fn every_precision(rt: &Runtime, g: &Gemm, seed: u64) {
    for p in GemmPrecision::ALL {
        for imp in impls(rt, p) {
            match p {
                GemmPrecision::F32 | GemmPrecision::Tf32 => check::<f32>(rt, g, p, imp, seed),
                GemmPrecision::Bf16 => check::<bf16>(rt, g, p, imp, seed),
                GemmPrecision::F16 => check::<f16>(rt, g, p, imp, seed),
            }
        }
    }
}

const TRANSPOSES: [(bool, bool); 4] = [(false, false), (false, true), (true, false), (true, true)];

kiln::test_device!(gemm_odd_sizes_every_transpose_and_precision, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    // 1x1x1, a 1xNx1 outer product row, odd sizes inside one tile and across tiles (scalar-
    // load kernels: no leading dimension is a multiple of 4), then shapes on the float4
    // kernels: one exact tile, and edge tiles in m and n with several k-tiles.
    let shapes = [
        (1, 1, 1),
        (1, 1000, 1),
        (17, 33, 65),
        (257, 129, 31),
        (255, 17, 129),
        (128, 128, 64),
        (132, 260, 36),
    ];
    for (s, &(m, n, k)) in shapes.iter().enumerate() {
        for (t, &(ta, tb)) in TRANSPOSES.iter().enumerate() {
            let g = Gemm::new(m, n, k).transposed(ta, tb);
            every_precision(rt, &g, seed + (10 * s + t) as u64);
        }
    }
});

kiln::test_device!(gemm_batches_packed_and_broadcast, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    for (t, &(ta, tb)) in TRANSPOSES.iter().enumerate() {
        let g = Gemm::new(33, 20, 47).transposed(ta, tb).batched(3);
        every_precision(rt, &g, seed + t as u64);
        // one A for every batch (stride 0), and B batches spaced wider than packed
        let g = Gemm::new(24, 40, 16)
            .transposed(ta, tb)
            .batched(4)
            .with_strides(0, 16 * 40 + 8);
        every_precision(rt, &g, seed + 10 + t as u64);
    }
});

kiln::test_device!(gemm_is_exact_on_small_integers, |rt: &Runtime| {
    // Integers in [-2, 2]: every product and partial sum is an integer below 2^24, exact in
    // f32 (and every input exact in TF32), so any summation order must give the exact sum.
    let ints = |n: usize, seed: u64| -> Vec<f32> {
        testing::random_f32(n, -2.5, 2.5, seed)
            .into_iter()
            .map(f32::round)
            .collect()
    };
    for &(m, n, k) in &[(1, 1, 1), (17, 33, 65), (257, 129, 31), (200, 136, 300)] {
        for &(ta, tb) in &TRANSPOSES {
            let g = Gemm::new(m, n, k).transposed(ta, tb).batched(2);
            let (a, b) = (ints(g.len_a().unwrap(), 5), ints(g.len_b().unwrap(), 6));
            for p in [GemmPrecision::F32, GemmPrecision::Tf32] {
                for imp in impls(rt, p) {
                    let c = rt.matmul_with(&a, &b, &g, p, imp).unwrap();
                    for z in 0..2 {
                        for i in 0..m {
                            for j in 0..n {
                                let s: f32 =
                                    (0..k).map(|q| a[a_at(&g, z, i, q)] * b[b_at(&g, z, q, j)]).sum();
                                assert_eq!(c[(z * m + i) * n + j], s, "{g} {p} {imp:?} at {z},{i},{j}");
                            }
                        }
                    }
                }
            }
        }
    }
});

kiln::test_device!(gemm_bad_input_is_an_error, |rt: &Runtime| {
    let a = vec![1.0f32; 12];
    let b = vec![1.0f32; 20];
    let g = Gemm::new(3, 5, 4);
    assert_eq!(rt.matmul(&a, &b, &g, GemmPrecision::F32).unwrap(), vec![4.0; 15]);
    for bad in [
        Gemm::new(0, 5, 4),
        Gemm::new(3, 0, 4),
        Gemm::new(3, 5, 0),
        g.batched(0),
    ] {
        assert!(rt.matmul(&a, &b, &bad, GemmPrecision::F32).is_err(), "{bad:?}");
    }
    assert!(rt.matmul(&a[1..], &b, &g, GemmPrecision::F32).is_err());
    assert!(rt.matmul(&a, &b[..19], &g, GemmPrecision::F32).is_err());
    // f32 data with a 16-bit precision, and 16-bit data with an f32 precision
    assert!(rt.matmul(&a, &b, &g, GemmPrecision::Bf16).is_err());
    let ah: Vec<f16> = a.iter().map(|&x| f16::from_f32(x)).collect();
    let bh: Vec<f16> = b.iter().map(|&x| f16::from_f32(x)).collect();
    assert!(rt.matmul(&ah, &bh, &g, GemmPrecision::F32).is_err());
    assert!(rt.matmul(&ah, &bh, &g, GemmPrecision::F16).is_ok());
    // kiln's kernels are f32 CUDA kernels
    assert!(rt
        .matmul_with(&ah, &bh, &g, GemmPrecision::F16, GemmImpl::Tiled)
        .is_err());
    let tiled = rt.matmul_with(&a, &b, &g, GemmPrecision::F32, GemmImpl::Tiled);
    assert_eq!(tiled.is_ok(), rt.kind() == BackendKind::Cuda, "{tiled:?}");
    assert!(rt
        .matmul(&a, &b, &Gemm::new(usize::MAX / 2, 4, 4), GemmPrecision::F32)
        .is_err());
});

#[test]
fn library_check_catches_a_wrong_element() {
    // kiln::linalg::check (used by `kiln gemm --check` and the demo) must fail on a result
    // that is off by one term, and on a NaN.
    let g = Gemm::new(9, 7, 13);
    let a: Vec<f32> = data(g.len_a().unwrap(), 1);
    let b: Vec<f32> = data(g.len_b().unwrap(), 2);
    let rt = Runtime::cpu();
    let mut c = rt.matmul(&a, &b, &g, GemmPrecision::F32).unwrap();
    assert!(
        kiln::linalg::check(&a, &b, &c, &g, GemmPrecision::F32, 1000)
            .unwrap()
            .passed
    );
    c[30] += a[a_at(&g, 0, 4, 3)] * b[b_at(&g, 0, 3, 2)];
    assert!(
        !kiln::linalg::check(&a, &b, &c, &g, GemmPrecision::F32, 1000)
            .unwrap()
            .passed
    );
    c[30] = f32::NAN;
    let r = kiln::linalg::check(&a, &b, &c, &g, GemmPrecision::F32, 5).unwrap();
    assert_eq!(r.nonfinite, 1);
    assert!(!r.passed);
}

/// Layouts for the tiled kernel's float4 loads (every leading dimension a multiple of 4):
/// partial tiles in m and n (4, 132, 260, 388 = 3 tiles + 4), k below one 16-wide step, a
/// partial last step (20, 36, 100) and many steps (1028).
const VEC_SHAPES: [(usize, usize, usize); 6] = [
    (4, 4, 4),
    (132, 260, 36),
    (260, 132, 20),
    (128, 388, 100),
    (36, 8, 1028),
    (256, 256, 48),
];

// kiln's tiled kernel through the device API (the `MatMul` op, `GemmImpl::Tiled`) on every
// transpose pair, float4 layouts, a packed and a broadcast batch, against the f64 reference;
// outputs NaN-poisoned. CUDA only.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gemm_tiled_float4_every_transpose() {
    let Some(rt) = testing::cuda_runtime_or_skip("gemm_tiled_float4_every_transpose") else {
        return;
    };
    let cu = rt.cuda().expect("a CUDA runtime has a CUDA backend");
    let seed = testing::fresh_seed();
    let mut shapes: Vec<Gemm> = Vec::new();
    for &(ta, tb) in &TRANSPOSES {
        for &(m, n, k) in &VEC_SHAPES {
            shapes.push(Gemm::new(m, n, k).transposed(ta, tb));
        }
        shapes.push(Gemm::new(68, 132, 36).transposed(ta, tb).batched(3));
        shapes.push(
            Gemm::new(24, 40, 16)
                .transposed(ta, tb)
                .batched(4)
                .with_strides(0, 16 * 40 + 8),
        );
    }
    for (s, g) in shapes.iter().enumerate() {
        let a: Vec<f32> = data(g.len_a().unwrap(), seed + s as u64);
        let b: Vec<f32> = data(g.len_b().unwrap(), (seed + s as u64) ^ 0xb);
        let da = cu.upload_slice(&a).unwrap();
        let db = cu.upload_slice(&b).unwrap();
        let mut dc = cu.alloc_poisoned_as::<f32>(g.len_c().unwrap()).unwrap();
        cu.run(MatMul {
            a: &da,
            b: &db,
            c: &mut dc,
            gemm: g,
            precision: GemmPrecision::F32,
            imp: GemmImpl::Tiled,
        })
        .unwrap_or_else(|e| panic!("{g}: {e}"));
        let mut c = vec![0.0f32; g.len_c().unwrap()];
        dc.copy_to_host(&mut c, cu.stream()).unwrap();
        let beta = bound_factor(GemmPrecision::F32, g.k);
        for z in 0..g.batch {
            for i in 0..g.m {
                for j in 0..g.n {
                    let (mut sum, mut mag) = (0.0f64, 0.0f64);
                    for q in 0..g.k {
                        let t = a[a_at(g, z, i, q)] as f64 * b[b_at(g, z, q, j)] as f64;
                        sum += t;
                        mag += t.abs();
                    }
                    let got = c[(z * g.m + i) * g.n + j] as f64;
                    assert!(
                        (got - sum).abs() <= beta * mag + 1e-38,
                        "tiled {g} (seed {seed}) at batch {z} ({i}, {j}): {got} vs {sum}"
                    );
                }
            }
        }
    }
}

/// The wgmma kernels' odd sizes: one element; inside one 128 x 256 tile; odd m and n across
/// tiles with k tails inside the 64-wide stage (a transposed A with m, or a B as stored with
/// n, not a multiple of 8 is copied to K-major rows first; a TMA-store variant runs the
/// default kernel where n is not a multiple of 8); exact tiles; every operand read as stored
/// across edge tiles, C stored across edge tiles (m and n multiples of 8 past a tile
/// boundary); several tiles a block on the persistent walk (2056 x 2056: 153 tiles, 81 pairs
/// of tile rows, more than an H100 or H200 has SMs or clusters of two, the last pair row
/// half empty).
const WGMMA_SHAPES: [(usize, usize, usize); 10] = [
    (1, 1, 8),
    (17, 33, 64),
    (257, 129, 40),
    (128, 256, 64),
    (136, 264, 72),
    (300, 520, 136),
    (129, 257, 1000),
    (1000, 776, 520),
    (1031, 777, 264),
    (2056, 2056, 72),
];

kiln::test_device!(gemm_wgmma_every_variant_every_transpose, |rt: &Runtime| {
    // every variant of kiln's wgmma kernel, named through the op (not the environment), on
    // the same inputs: each element within the bf16 bound of the f64 product, and every
    // variant bit for bit the others
    use kiln::device::ops::WgmmaMatMul;
    use kiln::device::WgmmaVariant;
    let Some(cuda) = rt.cuda() else {
        return;
    };
    if !cuda.wgmma_supported() {
        return;
    }
    let p = GemmPrecision::Bf16;
    let seed = testing::fresh_seed();
    for (s, &(m, n, k)) in WGMMA_SHAPES.iter().enumerate() {
        for (t, &(ta, tb)) in TRANSPOSES.iter().enumerate() {
            let g = Gemm::new(m, n, k).transposed(ta, tb);
            let seed = seed + (10 * s + t) as u64;
            let a: Vec<bf16> = data(g.len_a().unwrap(), seed);
            let b: Vec<bf16> = data(g.len_b().unwrap(), seed ^ 0xb);
            // the reference and its bound, once for every variant
            let beta = bound_factor(p, k);
            let mut want = Vec::with_capacity(m * n);
            for i in 0..m {
                for j in 0..n {
                    let (mut sum, mut mag) = (0.0f64, 0.0f64);
                    for q in 0..k {
                        let x = a[a_at(&g, 0, i, q)].to_f32() as f64 * b[b_at(&g, 0, q, j)].to_f32() as f64;
                        sum += x;
                        mag += x.abs();
                    }
                    want.push((sum, beta * mag + 1e-38));
                }
            }
            let da = cuda.upload_slice(&a).unwrap();
            let db = cuda.upload_slice(&b).unwrap();
            // `sync`'s bits (the first): the variants run the same wgmma sequence and
            // rounding, so they must match it exactly
            let mut first: Option<Vec<u16>> = None;
            for v in WgmmaVariant::ALL {
                // poisoned: an element the kernel misses stays NaN
                let mut dc = cuda.alloc_poisoned_as::<bf16>(m * n).unwrap();
                cuda.run(WgmmaMatMul {
                    a: &da,
                    b: &db,
                    c: &mut dc,
                    gemm: &g,
                    variant: v,
                })
                .unwrap_or_else(|e| panic!("{v:?} {g}: {e}"));
                let mut c = vec![bf16::from_f32(0.0); m * n];
                dc.copy_to_host(&mut c, cuda.stream()).unwrap();
                for (e, (&got, &(sum, bound))) in c.iter().zip(&want).enumerate() {
                    let got = got.to_f32() as f64;
                    assert!(
                        (got - sum).abs() <= bound,
                        "{v:?} {g} (seed {seed}) at ({}, {}): {got} vs {sum}, bound {bound:e}",
                        e / n,
                        e % n
                    );
                }
                let bits: Vec<u16> = c.iter().map(|x| x.to_bits()).collect();
                match &first {
                    None => first = Some(bits),
                    Some(f) => {
                        let diff = f.iter().zip(&bits).position(|(x, y)| x != y);
                        assert!(
                            diff.is_none(),
                            "{v:?} {g} (seed {seed}): not sync's bits at {diff:?}"
                        );
                    }
                }
            }
        }
    }
});

kiln::test_device!(gemm_wgmma_bf16_every_transpose, |rt: &Runtime| {
    // kiln's wgmma kernel: bf16 on compute capability 9.0 only; elsewhere a clear error.
    let p = GemmPrecision::Bf16;
    let Some(cuda) = rt.cuda() else {
        let a = vec![bf16::from_f32(1.0); 64];
        let e = rt
            .matmul_with(&a, &a, &Gemm::new(8, 8, 8), p, GemmImpl::Wgmma)
            .expect_err("wgmma on the CPU");
        assert!(e.to_string().contains("wgmma"), "{e}");
        return;
    };
    if !cuda.wgmma_supported() {
        let a = vec![bf16::from_f32(1.0); 64];
        let e = rt
            .matmul_with(&a, &a, &Gemm::new(8, 8, 8), p, GemmImpl::Wgmma)
            .expect_err("wgmma off Hopper");
        assert!(e.to_string().contains("compute capability 9.0"), "{e}");
        return;
    }
    let seed = testing::fresh_seed();
    for (s, &(m, n, k)) in WGMMA_SHAPES.iter().enumerate() {
        for (t, &(ta, tb)) in TRANSPOSES.iter().enumerate() {
            let g = Gemm::new(m, n, k).transposed(ta, tb);
            check::<bf16>(rt, &g, p, GemmImpl::Wgmma, seed + (10 * s + t) as u64);
        }
    }
    // what it cannot take is an error naming the library path
    let a = vec![bf16::from_f32(1.0); 8 * 12];
    let e = rt
        .matmul_with(&a, &a, &Gemm::new(8, 8, 12), p, GemmImpl::Wgmma)
        .expect_err("k = 12");
    assert!(e.to_string().contains("multiple of 8"), "{e}");
    let g = Gemm::new(8, 8, 8).batched(2);
    let a = vec![bf16::from_f32(1.0); 128];
    let e = rt.matmul_with(&a, &a, &g, p, GemmImpl::Wgmma).expect_err("batch");
    assert!(e.to_string().contains("batch"), "{e}");
    let a = vec![1.0f32; 64];
    let e = rt
        .matmul_with(&a, &a, &Gemm::new(8, 8, 8), GemmPrecision::F32, GemmImpl::Wgmma)
        .expect_err("f32");
    assert!(e.to_string().contains("bf16 only"), "{e}");
});
