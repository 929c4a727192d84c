//! Matrix products: [`matmul`] (and [`Runtime::matmul`]) in f32, TF32, bf16 and f16 storage,
//! f32 accumulation, with transposes and strided batches.
//!
//! The API is row-major, as numpy's `op(a) @ op(b)`: for each batch `z`,
//! `C_z (m x n) = op(A_z) (m x k) · op(B_z) (k x n)`, where `A` is stored `m x k` (or `k x m`
//! with [`Gemm::transposed`]`(true, _)`, then `op(A) = Aᵀ`), `B` is stored `k x n` (or
//! `n x k`), batch `z` of `A` starts at `z * stride_a` (`0` broadcasts one matrix), and `C` is
//! packed, `batch * m * n` elements. See [`kiln_core::linalg`].
//!
//! ```no_run
//! use kiln::linalg::{matmul, Gemm, GemmPrecision};
//! let rt = kiln::Runtime::cpu();
//! let (a, b) = (vec![1.0f32; 6], vec![2.0f32; 12]);
//! let c = matmul(&rt, &a, &b, &Gemm::new(2, 4, 3), GemmPrecision::F32)?; // 2x3 · 3x4
//! assert_eq!(c, vec![6.0; 8]);
//! # Ok::<(), kiln::Error>(())
//! ```
//!
//! On a GPU the library implementation is cuBLAS (TF32 and the 16-bit types on tensor
//! cores); [`GemmImpl::Tiled`] runs kiln's own f32 kernel and [`GemmImpl::Naive`] the seed's
//! baseline. On the CPU it is faer (f32; bf16/f16 widened exactly, result rounded once; TF32
//! computed as f32). Every result is within [`GemmPrecision::bound_factor`] of the exact
//! product of the stored inputs, element by element; [`check`] measures that.

use crate::{Engine, Runtime};
use kiln_core::backend::Element;
pub use kiln_core::linalg::{Gemm, GemmImpl, GemmPrecision};
use kiln_core::{Error, Result};
use kiln_cuda::ops::MatMul;
/// A storage type of the matrix products (`f32`, `f16`, `bf16`), usable in tensors.
pub trait GemmElement: kiln_cpu::linalg::GemmElement + crate::TensorElement {}
impl<T: kiln_cpu::linalg::GemmElement + crate::TensorElement> GemmElement for T {}

use crate::verify::{time_host, wall_ms, Covers, Timing, WARMUP};

impl Runtime {
    /// `op(A)·op(B)` for every batch through the library implementation (cuBLAS or faer);
    /// `T` must be `precision`'s storage type. See the [module docs](crate::linalg).
    pub fn matmul<T: GemmElement>(
        &self,
        a: &[T],
        b: &[T],
        g: &Gemm,
        precision: GemmPrecision,
    ) -> Result<Vec<T>> {
        self.matmul_with(a, b, g, precision, GemmImpl::Library)
    }

    /// [`Runtime::matmul`] with a chosen implementation: kiln's tiled and naive kernels are
    /// f32 CUDA kernels (an error on the CPU or for other precisions).
    pub fn matmul_with<T: GemmElement>(
        &self,
        a: &[T],
        b: &[T],
        g: &Gemm,
        precision: GemmPrecision,
        imp: GemmImpl,
    ) -> Result<Vec<T>> {
        kiln_core::linalg::check_storage::<T>(precision)?;
        let len_c = g.validate(a.len(), b.len())?;
        match self.engine() {
            Engine::Cpu(_) => {
                if imp != GemmImpl::Library {
                    return Err(Error::Unsupported {
                        op: format!(
                            "gemm with the {} kernel (a CUDA kernel; the CPU runs faer)",
                            imp.name()
                        ),
                        backend: "cpu".into(),
                    });
                }
                // C, plus the f32 copies of 16-bit inputs and output.
                let widened = if T::DTYPE == kiln_core::DType::F32 {
                    0
                } else {
                    a.len() + b.len() + len_c
                };
                let bytes = (len_c * std::mem::size_of::<T>() + 4 * widened) as u64;
                let _r = self.reserve_host("gemm", bytes)?;
                kiln_cpu::linalg::gemm(a, b, g, precision)
            }
            Engine::Cuda(dev) => {
                use kiln_core::storage::BackendStorage;
                let sa = kiln_cuda::CudaStorage::from_host(dev, a)?;
                let sb = kiln_cuda::CudaStorage::from_host(dev, b)?;
                let sc = sa.matmul(&sb, g, precision, imp)?;
                let mut out = kiln_cuda::transfer::host_vec::<T>(len_c);
                sc.to_host(&mut out)?;
                Ok(out)
            }
        }
    }
}

/// `op(A)·op(B)` for every batch on `rt` (the library implementation); the free-function
/// form of [`Runtime::matmul`].
pub fn matmul<T: GemmElement>(
    rt: &Runtime,
    a: &[T],
    b: &[T],
    g: &Gemm,
    precision: GemmPrecision,
) -> Result<Vec<T>> {
    rt.matmul(a, b, g, precision)
}

/// The outcome of [`check`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct GemmCheck {
    /// Elements compared with the f64 reference.
    pub checked: usize,
    /// Elements of `C` that are NaN or infinite (an unwritten, poisoned output counts).
    pub nonfinite: usize,
    /// Largest `|c - c_exact| / bound` over the checked elements (<= 1 passes).
    pub worst: f64,
    /// Largest `|c - c_exact|`.
    pub max_abs_err: f64,
    /// Whether every element is finite and every checked one within its bound.
    pub passed: bool,
}

/// The exact (f64) element `(z, i, j)` of the product and `Σ_p |a_ip·b_pj|`.
pub fn reference_element<T: Element>(a: &[T], b: &[T], g: &Gemm, z: usize, i: usize, j: usize) -> (f64, f64) {
    let (mut s, mut mag) = (0.0f64, 0.0f64);
    for p in 0..g.k {
        let t = a[g.a_index(z, i, p)].to_f32() as f64 * b[g.b_index(z, p, j)].to_f32() as f64;
        s += t;
        mag += t.abs();
    }
    (s, mag)
}

/// Compares `c` with the f64 product of the stored inputs, element-wise within
/// `bound_factor(k)·Σ|a||b|` (plus half the smallest subnormal spacing of the storage).
/// Every element is checked when there are at most `max_samples`, else the first and last of
/// each batch and a fixed pseudo-random sample; every element is checked for being finite.
pub fn check<T: Element>(
    a: &[T],
    b: &[T],
    c: &[T],
    g: &Gemm,
    p: GemmPrecision,
    max_samples: usize,
) -> Result<GemmCheck> {
    let len_c = g.validate(a.len(), b.len())?;
    kiln_core::backend::check_same_len("gemm check", len_c, c.len())?;
    let nonfinite = c.iter().filter(|v| !v.to_f32().is_finite()).count();
    let beta = p.bound_factor(g.k);
    let floor = match p {
        GemmPrecision::F16 => 2f64.powi(-25),
        _ => f32::MIN_POSITIVE as f64,
    };
    let mn = g.m * g.n;
    let mut idx: Vec<usize> = if len_c <= max_samples.max(1) {
        (0..len_c).collect()
    } else {
        let mut v: Vec<usize> = (0..g.batch).flat_map(|z| [z * mn, z * mn + mn - 1]).collect();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        while v.len() < max_samples.max(2 * g.batch) {
            // splitmix64: a fixed, well-spread sample
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut y = x;
            y = (y ^ (y >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            y = (y ^ (y >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            v.push(((y ^ (y >> 31)) % len_c as u64) as usize);
        }
        v
    };
    idx.sort_unstable();
    idx.dedup();
    let (mut worst, mut max_abs) = (0.0f64, 0.0f64);
    for &e in &idx {
        let (z, r) = (e / mn, e % mn);
        let (want, mag) = reference_element(a, b, g, z, r / g.n, r % g.n);
        let got = c[e].to_f32() as f64;
        let err = (got - want).abs();
        let ratio = if got.is_finite() {
            err / (beta * mag + floor)
        } else {
            f64::INFINITY
        };
        worst = worst.max(ratio);
        max_abs = max_abs.max(err);
    }
    Ok(GemmCheck {
        checked: idx.len(),
        nonfinite,
        worst,
        max_abs_err: max_abs,
        passed: nonfinite == 0 && worst <= 1.0,
    })
}

/// One row of [`demo_cases`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct DemoCase {
    /// What ran, e.g. `gemm bf16 cublas`.
    pub op: String,
    /// `MxNxK`.
    pub size: String,
    /// How it was timed: on a GPU the device alone (CUDA events, device-resident operands),
    /// on the CPU the host-slice call's wall time (allocation of `C` included).
    pub timing: Timing,
    /// `2·m·n·k / median time`.
    pub tflops: f64,
    /// [`GemmCheck::worst`]: the largest error over its bound (<= 1 passes).
    pub err_over_bound: f64,
    /// Whether the check passed.
    pub verified: bool,
    /// How it was computed and checked.
    pub note: String,
}

fn inputs<T: Element>(g: &Gemm, seed: u64) -> Result<(Vec<T>, Vec<T>)> {
    let conv = |v: Vec<f32>| v.into_iter().map(T::from_f32).collect::<Vec<T>>();
    Ok((
        conv(crate::testing::random_f32(g.len_a()?, -1.0, 1.0, seed)),
        conv(crate::testing::random_f32(g.len_b()?, -1.0, 1.0, seed + 1)),
    ))
}

/// Runs `g` once, timed alone and checked against the f64 reference on `samples`
/// elements, then times it (a warm-up, then the median of up to `reps` runs).
fn demo_case<T: GemmElement>(
    rt: &Runtime,
    g: &Gemm,
    p: GemmPrecision,
    imp: GemmImpl,
    reps: usize,
) -> Result<DemoCase> {
    let (a, b) = inputs::<T>(g, 11)?;
    let samples = 4096;
    let (chk, timing, note) = match rt.cuda() {
        Some(cu) => {
            let da = cu.upload_slice(&a)?;
            let db = cu.upload_slice(&b)?;
            let mut dc = cu.alloc_poisoned_as::<T>(g.len_c()?)?;
            let ((), first_ms) = wall_ms(|| {
                cu.run(MatMul {
                    a: &da,
                    b: &db,
                    c: &mut dc,
                    gemm: g,
                    precision: p,
                    imp,
                })?;
                cu.synchronize()
            })?;
            let mut c = vec![T::from_f32(0.0); g.len_c()?];
            dc.copy_to_host(&mut c, cu.stream())?;
            let chk = check(&a, &b, &c, g, p, samples)?;
            let times = cu.time_ms(WARMUP, reps, || {
                cu.run(MatMul {
                    a: &da,
                    b: &db,
                    c: &mut dc,
                    gemm: g,
                    precision: p,
                    imp,
                })
            })?;
            (
                chk,
                Timing::new(first_ms, times, Covers::Device),
                "device-resident",
            )
        }
        None => {
            let (c, timing) = time_host(reps, Covers::Host, || rt.matmul_with(&a, &b, g, p, imp))?;
            let chk = check(&a, &b, &c, g, p, samples)?;
            (chk, timing, "faer")
        }
    };
    let lib = if rt.cuda().is_some() { "cublas" } else { "faer" };
    let name = match imp {
        GemmImpl::Library => lib,
        GemmImpl::Tiled => "kiln tiled",
        GemmImpl::Naive => "naive (seed)",
        GemmImpl::Wgmma => "kiln wgmma",
    };
    Ok(DemoCase {
        op: format!("gemm {p} {name}"),
        size: format!("{}x{}x{}", g.m, g.n, g.k),
        tflops: g.flops() / timing.median_ms / 1e9,
        timing,
        err_over_bound: chk.worst,
        verified: chk.passed,
        note: format!(
            "{note}; {} of C's elements vs f64 (bound {:.1e}·Σ|a||b|)",
            chk.checked,
            p.bound_factor(g.k)
        ),
    })
}

/// The GEMM rows `kiln demo` shows (`size`: `quick`, `default` or `full`): every precision
/// through the library, and on a GPU kiln's tiled f32 kernel and the naive baseline (at a
/// quarter of the size: it is ~50x slower). Each row's first call is timed alone and
/// checked, then up to `reps` runs are timed (see [`DemoCase::timing`]).
pub fn demo_cases(rt: &Runtime, size: &str, reps: usize) -> Result<Vec<DemoCase>> {
    let gpu = rt.cuda().is_some();
    let n = match (size, gpu) {
        ("quick", _) => 256,
        ("full", true) => 8192,
        ("full", false) => 2048,
        (_, true) => 4096,
        (_, false) => 1024,
    };
    let g = Gemm::new(n, n, n);
    let mut rows = vec![
        demo_case::<f32>(rt, &g, GemmPrecision::F32, GemmImpl::Library, reps)?,
        demo_case::<f32>(rt, &g, GemmPrecision::Tf32, GemmImpl::Library, reps)?,
        demo_case::<kiln_core::backend::bf16>(rt, &g, GemmPrecision::Bf16, GemmImpl::Library, reps)?,
        demo_case::<kiln_core::backend::f16>(rt, &g, GemmPrecision::F16, GemmImpl::Library, reps)?,
    ];
    if gpu {
        rows.push(demo_case::<f32>(
            rt,
            &g,
            GemmPrecision::F32,
            GemmImpl::Tiled,
            reps,
        )?);
        let small = Gemm::new((n / 4).max(256), (n / 4).max(256), (n / 4).max(256));
        rows.push(demo_case::<f32>(
            rt,
            &small,
            GemmPrecision::F32,
            GemmImpl::Naive,
            reps,
        )?);
    }
    Ok(rows)
}
