//! GEMM on the CPU through faer (layout: [`kiln_core::linalg`]; the storage check,
//! [`check_storage`], is kiln-core's and re-exported here).
//!
//! faer multiplies f32 with its runtime-dispatched SIMD kernels (AVX-512/AVX2 FMA). f16 and
//! bf16 inputs are widened to f32 (exact), multiplied in f32 and rounded once to the storage
//! type, which is what the GPU's tensor cores do (exact products, f32 accumulation);
//! `Tf32` runs plain f32 here (the CPU has no TF32; the result is more accurate).
//!
//! Parallelism: kiln splits `C` into one block per rayon thread (batches first, then rows,
//! then columns) and runs faer sequentially on each. On the 2-core CI machine this reaches
//! 0.84-0.94 of numpy+OpenBLAS at 2048³ where faer's own `Par::rayon` split reached 0.78
//! (docs/performance.md); the blocks share nothing but the read-only inputs.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use kiln_core::backend::{bf16, f16, Element};
pub use kiln_core::linalg::check_storage;
use kiln_core::linalg::{Gemm, GemmPrecision};
use kiln_core::Result;
use rayon::prelude::*;
use std::borrow::Cow;

/// Below this many flops a GEMM runs on the calling thread (a rayon fork costs ~µs).
const SEQUENTIAL_FLOPS: f64 = 4.0e6;
/// Smallest block height or width a split makes (faer's micro-kernels are 16-48 wide).
const MIN_SPLIT: usize = 32;

/// A storage type GEMM takes: [`Element`]s the CPU path can view as f32 (`f32` as is,
/// `f16` and `bf16` widened exactly).
pub trait GemmElement: Element {
    /// The values as f32: borrowed for f32, widened (exact) for the 16-bit types.
    fn widen(x: &[Self]) -> Cow<'_, [f32]>;
    /// Run `f` on an f32 view of `out`: `out` itself for f32, else a scratch buffer that is
    /// rounded into `out` afterwards (nearest-even, once).
    fn with_f32_out(out: &mut [Self], f: impl FnOnce(&mut [f32]));
}

impl GemmElement for f32 {
    fn widen(x: &[f32]) -> Cow<'_, [f32]> {
        Cow::Borrowed(x)
    }
    fn with_f32_out(out: &mut [f32], f: impl FnOnce(&mut [f32])) {
        f(out)
    }
}

fn widen_16<T: Element>(x: &[T]) -> Cow<'_, [f32]> {
    Cow::Owned(x.par_iter().with_min_len(1 << 14).map(|v| v.to_f32()).collect())
}

fn round_into<T: Element>(out: &mut [T], f: impl FnOnce(&mut [f32])) {
    let mut c = vec![0.0f32; out.len()];
    f(&mut c);
    out.par_iter_mut()
        .with_min_len(1 << 14)
        .zip(&c)
        .for_each(|(o, &v)| *o = T::from_f32(v));
}

impl GemmElement for f16 {
    fn widen(x: &[f16]) -> Cow<'_, [f32]> {
        widen_16(x)
    }
    fn with_f32_out(out: &mut [f16], f: impl FnOnce(&mut [f32])) {
        round_into(out, f)
    }
}

impl GemmElement for bf16 {
    fn widen(x: &[bf16]) -> Cow<'_, [f32]> {
        widen_16(x)
    }
    fn with_f32_out(out: &mut [bf16], f: impl FnOnce(&mut [f32])) {
        round_into(out, f)
    }
}

/// `out = op(A) · op(B)` for every batch (see [`kiln_core::linalg`] for the layout); `out`
/// must hold `g.len_c()` elements.
pub fn gemm_into<T: GemmElement>(a: &[T], b: &[T], g: &Gemm, p: GemmPrecision, out: &mut [T]) -> Result<()> {
    check_storage::<T>(p)?;
    let len_c = g.validate(a.len(), b.len())?;
    kiln_core::backend::check_same_len("gemm output", len_c, out.len())?;
    let (a32, b32) = (T::widen(a), T::widen(b));
    T::with_f32_out(out, |c| gemm_f32(&a32, &b32, g, c));
    Ok(())
}

/// [`gemm_into`] into a new vector.
pub fn gemm<T: GemmElement>(a: &[T], b: &[T], g: &Gemm, p: GemmPrecision) -> Result<Vec<T>> {
    check_storage::<T>(p)?;
    let len_c = g.validate(a.len(), b.len())?;
    let mut out = vec![T::from_f32(f32::NAN); len_c];
    gemm_into(a, b, g, p, &mut out)?;
    Ok(out)
}

/// One block of work: batch `z`, rows `r0..r0+rows`, columns `c0..c0+cols` of `C_z`.
struct Block<'c> {
    z: usize,
    r0: usize,
    c0: usize,
    c: MatMut<'c, f32>,
}

/// The f32 product on validated shapes.
fn gemm_f32(a: &[f32], b: &[f32], g: &Gemm, out: &mut [f32]) {
    let (m, n, k) = (g.m, g.n, g.k);
    let a_view = |z: usize| -> MatRef<'_, f32> {
        let s = &a[z * g.stride_a..z * g.stride_a + m * k];
        if g.trans_a {
            MatRef::from_row_major_slice(s, k, m).transpose()
        } else {
            MatRef::from_row_major_slice(s, m, k)
        }
    };
    let b_view = |z: usize| -> MatRef<'_, f32> {
        let s = &b[z * g.stride_b..z * g.stride_b + k * n];
        if g.trans_b {
            MatRef::from_row_major_slice(s, n, k).transpose()
        } else {
            MatRef::from_row_major_slice(s, k, n)
        }
    };
    let threads = rayon::current_num_threads().max(1);
    let sequential = threads == 1 || g.flops() < SEQUENTIAL_FLOPS;
    // Blocks per matrix: enough that batch * blocks >= threads, rows split before columns.
    let per = if sequential { 1 } else { threads.div_ceil(g.batch) };
    let row_parts = per.min(m.div_ceil(MIN_SPLIT)).max(1);
    let col_parts = per.div_ceil(row_parts).min(n.div_ceil(MIN_SPLIT)).max(1);
    let mut blocks = Vec::with_capacity(g.batch * row_parts * col_parts);
    for (z, cz) in out.chunks_exact_mut(m * n).enumerate() {
        let mut rest = MatMut::from_row_major_slice_mut(cz, m, n);
        let mut r0 = 0;
        for rp in 0..row_parts {
            let rows = (m - r0).div_ceil(row_parts - rp);
            let (top, bottom) = rest.split_at_row_mut(rows);
            rest = bottom;
            let mut strip = top;
            let mut c0 = 0;
            for cp in 0..col_parts {
                let cols = (n - c0).div_ceil(col_parts - cp);
                let (left, right) = strip.split_at_col_mut(cols);
                strip = right;
                blocks.push(Block { z, r0, c0, c: left });
                c0 += cols;
            }
            r0 += rows;
        }
    }
    let run = |blk: Block<'_>| {
        let (rows, cols) = (blk.c.nrows(), blk.c.ncols());
        let lhs = a_view(blk.z).subrows(blk.r0, rows);
        let rhs = b_view(blk.z).subcols(blk.c0, cols);
        matmul(blk.c, Accum::Replace, lhs, rhs, 1.0f32, Par::Seq);
    };
    if sequential || blocks.len() == 1 {
        blocks.into_iter().for_each(run);
    } else {
        blocks.into_par_iter().for_each(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(a: &[f32], b: &[f32], g: &Gemm) -> Vec<f64> {
        let mut c = Vec::new();
        for z in 0..g.batch {
            for i in 0..g.m {
                for j in 0..g.n {
                    c.push(
                        (0..g.k)
                            .map(|p| a[g.a_index(z, i, p)] as f64 * b[g.b_index(z, p, j)] as f64)
                            .sum(),
                    );
                }
            }
        }
        c
    }

    fn data(n: usize, seed: u32) -> Vec<f32> {
        // small integers: every product and sum is exact in f32, so the result must be too
        (0..n as u32)
            .map(|i| ((i.wrapping_mul(2654435761).wrapping_add(seed) >> 7) % 9) as f32 - 4.0)
            .collect()
    }

    #[test]
    fn exact_on_small_integers_for_every_layout_and_split() {
        for &(m, n, k) in &[(1, 1, 1), (1, 200, 1), (17, 33, 65), (257, 129, 31), (300, 7, 40)] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                for batch in [1, 3] {
                    let g = Gemm::new(m, n, k).transposed(ta, tb).batched(batch);
                    let (a, b) = (data(g.len_a().unwrap(), 1), data(g.len_b().unwrap(), 2));
                    let c = gemm(&a, &b, &g, GemmPrecision::F32).unwrap();
                    let want = reference(&a, &b, &g);
                    assert!(c.iter().zip(&want).all(|(x, y)| *x as f64 == *y), "{g}");
                }
            }
        }
    }

    #[test]
    fn broadcast_strides_bf16_and_errors() {
        let g = Gemm::new(40, 50, 20).batched(3).with_strides(0, 1000);
        let a = data(g.len_a().unwrap(), 3);
        let b = data(g.len_b().unwrap(), 4);
        let want = reference(&a, &b, &g);
        let ab: Vec<bf16> = a.iter().map(|&x| bf16::from_f32(x)).collect();
        let bb: Vec<bf16> = b.iter().map(|&x| bf16::from_f32(x)).collect();
        let c = gemm(&ab, &bb, &g, GemmPrecision::Bf16).unwrap();
        // |sums| <= 20*16 = 320: integers below 2^8 are exact in bf16, larger ones round
        for (x, y) in c.iter().zip(&want) {
            assert!(
                (x.to_f32() as f64 - y).abs() <= y.abs() * 2f64.powi(-8),
                "{x} vs {y}"
            );
        }
        assert!(gemm(&a, &b, &g, GemmPrecision::Bf16).is_err());
        assert!(gemm(&a[1..], &b, &g, GemmPrecision::F32).is_err());
        assert!(gemm(&a, &b, &Gemm::new(0, 50, 20), GemmPrecision::F32).is_err());
        let mut short = vec![0.0f32; 5];
        assert!(gemm_into(&a, &b, &g, GemmPrecision::F32, &mut short).is_err());
    }
}
