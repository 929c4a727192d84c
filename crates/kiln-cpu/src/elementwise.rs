//! Element-wise ops and the 2-D transpose, on `f32`, `f16` or `bf16` storage with `f32`
//! arithmetic ([`Element`]): each element is widened, mapped with [`MapOp::apply`] (the
//! definition every backend follows) and rounded back once, so results are bitwise those of
//! `apply` on any CPU.
//!
//! Parallel with rayon over chunks of [`CHUNK`] elements. Within a chunk, `f32` data is
//! mapped directly; 16-bit data is widened [`BLOCK`] elements at a time into a stack
//! buffer, mapped there by the same `f32` loop and rounded back, so every step is a vector
//! loop. The loops are branch-free ([`kiln_core::mathf`]) and compiled for the baseline
//! target and, chosen at run time by `multiversion`, for AVX2+FMA(+F16C) and AVX-512 (more
//! lanes, and a hardware fma for `scale_shift` and `axpy`, which otherwise call libm's
//! `fmaf`); nothing is contracted or approximated differently per target, so the results
//! are the same bits on every CPU. The transpose runs over bands of
//! [`TILE`] source rows, each band copied tile by tile so reads and writes stay in cache.

use kiln_core::backend::{Element, MapOp};
use kiln_core::{mathf, UnaryOp};
use rayon::prelude::*;

/// Elements per rayon task: big enough that scheduling costs < 1% of the work.
pub const CHUNK: usize = 1 << 15;

/// Elements per conversion block of 16-bit storage: two `f32` buffers of 8 KiB stay in L1.
pub const BLOCK: usize = 2048;

/// `out[i] = op(x[i])` on f32; lengths are checked by the caller.
pub(crate) fn unary_f32(op: UnaryOp, x: &[f32], out: &mut [f32]) {
    map(MapOp::Unary(op), x, out);
}

/// `out[i] = op(x[i])` in `f32` arithmetic on any storage; `x` and `out` must have equal
/// lengths (only the common prefix is written otherwise).
pub fn map<T: Element>(op: MapOp, x: &[T], out: &mut [T]) {
    out.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(o, i)| map_chunk(op, i, o));
}

/// [`map`] on one chunk, on the calling thread.
fn map_chunk<T: Element>(op: MapOp, x: &[T], out: &mut [T]) {
    let n = x.len().min(out.len());
    let (x, out) = (&x[..n], &mut out[..n]);
    if let (Some(x), Some(o)) = (T::as_f32_slice(x), T::as_f32_slice_mut(out)) {
        return map_f32(op, x, o);
    }
    map_blocks(op, x, out);
}

/// 16-bit storage: widen a block, map it, round it back; the conversions and the map are
/// inlined into one clone per target.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512bw+avx512dq+avx2+fma+f16c",
    "x86_64+avx2+fma+f16c"
))]
fn map_blocks<T: Element>(op: MapOp, x: &[T], out: &mut [T]) {
    let mut a = [0f32; BLOCK];
    let mut b = [0f32; BLOCK];
    for (xs, os) in x.chunks(BLOCK).zip(out.chunks_mut(BLOCK)) {
        let m = xs.len();
        T::widen_slice(xs, &mut a[..m]);
        map_f32_body(op, &a[..m], &mut b[..m]);
        T::narrow_slice(&b[..m], os);
    }
}

/// `out[i] = op.apply(x[i])` on `f32`: [`map_f32_body`] compiled per target.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512bw+avx512dq+avx2+fma",
    "x86_64+avx2+fma"
))]
fn map_f32(op: MapOp, x: &[f32], out: &mut [f32]) {
    map_f32_body(op, x, out);
}

/// `out[i] = op.apply(x[i])` on `f32`, one loop per op so the match is outside the element
/// loop and each loop body is branch-free.
#[inline(always)]
fn map_f32_body(op: MapOp, x: &[f32], out: &mut [f32]) {
    macro_rules! run {
        ($f:expr) => {{
            let f = $f;
            for (o, &i) in out.iter_mut().zip(x) {
                *o = f(i);
            }
        }};
    }
    match op {
        MapOp::Unary(UnaryOp::Sigmoid) => run!(mathf::sigmoid),
        MapOp::Unary(UnaryOp::Tanh) => run!(mathf::tanh),
        MapOp::Unary(UnaryOp::Exp) => run!(mathf::exp),
        // `x > 0 || NaN ? x : 0`, as a select: `max` would drop NaN, and branches stop
        // the vectoriser.
        MapOp::Unary(UnaryOp::Relu) => run!(|v: f32| if v.is_nan() || v > 0.0 { v } else { 0.0 }),
        MapOp::ScaleShift { a, b } => run!(|v: f32| a.mul_add(v, b)),
        MapOp::Clamp { lo, hi } => run!(|v: f32| {
            let v = if v < lo { lo } else { v };
            if v > hi {
                hi
            } else {
                v
            }
        }),
    }
}

/// `y[i] = a * x[i] + y[i]` (one `f32` fma per element, rounded once to the storage).
pub fn axpy<T: Element>(a: f32, x: &[T], y: &mut [T]) {
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(y, x)| {
            let n = x.len().min(y.len());
            let (x, y) = (&x[..n], &mut y[..n]);
            if let (Some(x), Some(y)) = (T::as_f32_slice(x), T::as_f32_slice_mut(y)) {
                return axpy_f32(a, x, y);
            }
            axpy_blocks(a, x, y);
        });
}

/// [`axpy`] on 16-bit storage, a block at a time (as [`map_blocks`]).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512bw+avx512dq+avx2+fma+f16c",
    "x86_64+avx2+fma+f16c"
))]
fn axpy_blocks<T: Element>(a: f32, x: &[T], y: &mut [T]) {
    let mut xb = [0f32; BLOCK];
    let mut yb = [0f32; BLOCK];
    for (xs, ys) in x.chunks(BLOCK).zip(y.chunks_mut(BLOCK)) {
        let m = xs.len();
        T::widen_slice(xs, &mut xb[..m]);
        T::widen_slice(ys, &mut yb[..m]);
        for (y, &x) in yb[..m].iter_mut().zip(&xb[..m]) {
            *y = a.mul_add(x, *y);
        }
        T::narrow_slice(&yb[..m], ys);
    }
}

/// `y[i] = a.mul_add(x[i], y[i])` on `f32` (vectorised where the target has fma).
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
fn axpy_f32(a: f32, x: &[f32], y: &mut [f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = a.mul_add(x, *y);
    }
}

/// Tile side of the blocked transpose (a 64×64 f32 tile is 16 KiB: two fit in L1).
pub const TILE: usize = 64;

/// `out[c * rows + r] = x[r * cols + c]`: the row-major `rows × cols` matrix `x` into its
/// `cols × rows` transpose. Lengths must equal `rows * cols` (checked by the caller).
pub fn transpose<T: Copy + Send + Sync>(x: &[T], rows: usize, cols: usize, out: &mut [T]) {
    if rows == 0 || cols == 0 {
        return;
    }
    // Parallel over bands of TILE output rows (= TILE source columns): each task owns a
    // disjoint slice of `out`.
    out.par_chunks_mut(TILE * rows).enumerate().for_each(|(band, o)| {
        let c0 = band * TILE;
        let cw = o.len() / rows;
        for r0 in (0..rows).step_by(TILE) {
            let rh = TILE.min(rows - r0);
            for dc in 0..cw {
                let dst = &mut o[dc * rows + r0..dc * rows + r0 + rh];
                for (dr, d) in dst.iter_mut().enumerate() {
                    *d = x[(r0 + dr) * cols + c0 + dc];
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::backend::{bf16, f16};
    use rand::Rng;

    #[test]
    fn sigmoid_matches_f64_reference_at_odd_sizes() {
        let mut rng = rand::rng();
        for n in [1usize, 7, 1000, CHUNK + 3, 3 * CHUNK - 1] {
            let x: Vec<f32> = (0..n).map(|_| rng.random_range(-30.0f32..30.0)).collect();
            let mut out = vec![f32::NAN; n];
            unary_f32(UnaryOp::Sigmoid, &x, &mut out);
            for (&xi, &oi) in x.iter().zip(&out) {
                let r = UnaryOp::Sigmoid.reference(xi as f64);
                assert!(
                    ((oi as f64) - r).abs() <= 4.0 * f32::EPSILON as f64 * r.max(1e-30),
                    "x={xi}: {oi} vs {r}"
                );
            }
        }
    }

    #[test]
    fn sigmoid_limits() {
        let x = [f32::NEG_INFINITY, -100.0, 0.0, 100.0, f32::INFINITY];
        let mut out = [f32::NAN; 5];
        unary_f32(UnaryOp::Sigmoid, &x, &mut out);
        assert_eq!(out, [0.0, 0.0, 0.5, 1.0, 1.0]);
    }

    #[test]
    fn every_op_matches_f64_on_every_storage() {
        let mut rng = rand::rng();
        let ops = [
            MapOp::Unary(UnaryOp::Sigmoid),
            MapOp::Unary(UnaryOp::Tanh),
            MapOp::Unary(UnaryOp::Relu),
            MapOp::Unary(UnaryOp::Exp),
            MapOp::ScaleShift { a: -1.5, b: 0.25 },
            MapOp::Clamp { lo: -0.5, hi: 2.0 },
        ];
        let x: Vec<f32> = (0..CHUNK + 5).map(|_| rng.random_range(-8.0f32..8.0)).collect();
        fn check<T: Element>(op: MapOp, x: &[f32]) {
            let xs: Vec<T> = x.iter().map(|&v| T::from_f32(v)).collect();
            let mut o = vec![T::from_f32(f32::NAN); x.len()];
            map(op, &xs, &mut o);
            for (xi, oi) in xs.iter().zip(&o) {
                let want = op.reference(xi.to_f32() as f64);
                let got = oi.to_f32() as f64;
                let tol = 4.0 * T::UNIT_ROUNDOFF * want.abs().max(1e-6);
                assert!(
                    (got - want).abs() <= tol,
                    "{op:?} {:?}: {got} vs {want}",
                    T::DTYPE
                );
            }
        }
        for op in ops {
            check::<f32>(op, &x);
            check::<f16>(op, &x);
            check::<bf16>(op, &x);
        }
        assert!(MapOp::Unary(UnaryOp::Relu).apply(f32::NAN).is_nan());
        assert!(MapOp::Clamp { lo: 0.0, hi: 1.0 }.apply(f32::NAN).is_nan());
    }

    /// The vector loops give `MapOp::apply`'s bits (rounded once to the storage) on every
    /// storage, special values and every block tail included.
    #[test]
    fn map_is_bitwise_apply() {
        let mut rng = rand::rng();
        let mut x: Vec<f32> = (0..2 * BLOCK + 37)
            .map(|i| match i % 4 {
                0 => rng.random_range(-12.0f32..12.0),
                1 => rng.random_range(-120.0f32..120.0),
                2 => f32::from_bits(rng.random::<u32>()),
                _ => rng.random_range(-1e-3f32..1e-3),
            })
            .collect();
        x[..16].copy_from_slice(&[
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            1e-40,
            -1e-40,
            88.72284,
            -88.72284,
            -103.98,
            -0.75,
            1.5,
            f32::MAX,
            f32::MIN,
            0.625,
        ]);
        let ops = [
            MapOp::Unary(UnaryOp::Sigmoid),
            MapOp::Unary(UnaryOp::Tanh),
            MapOp::Unary(UnaryOp::Relu),
            MapOp::Unary(UnaryOp::Exp),
            MapOp::ScaleShift { a: -1.25, b: 0.5 },
            MapOp::Clamp { lo: -0.75, hi: 1.5 },
            MapOp::Clamp { lo: 0.0, hi: 0.0 },
        ];
        fn check<T: Element>(op: MapOp, x: &[f32]) {
            let xs: Vec<T> = x.iter().map(|&v| T::from_f32(v)).collect();
            for n in [1, 7, BLOCK - 1, BLOCK + 1, xs.len()] {
                let mut o = vec![T::from_f32(f32::NAN); n];
                map(op, &xs[..n], &mut o);
                for (xi, oi) in xs.iter().zip(&o) {
                    let want = T::from_f32(op.apply(xi.to_f32())).to_f32();
                    let got = oi.to_f32();
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "{op:?} {:?} x={:e}: {got:e} vs apply {want:e}",
                        T::DTYPE,
                        xi.to_f32()
                    );
                }
            }
        }
        for op in ops {
            check::<f32>(op, &x);
            check::<f16>(op, &x);
            check::<bf16>(op, &x);
        }
    }

    #[test]
    fn axpy_is_one_fma_on_every_storage() {
        let mut rng = rand::rng();
        let n = BLOCK + 9;
        let x: Vec<f32> = (0..n).map(|_| rng.random_range(-3.0f32..3.0)).collect();
        let y: Vec<f32> = (0..n).map(|_| rng.random_range(-3.0f32..3.0)).collect();
        fn check<T: Element>(x: &[f32], y: &[f32]) {
            let xs: Vec<T> = x.iter().map(|&v| T::from_f32(v)).collect();
            let mut ys: Vec<T> = y.iter().map(|&v| T::from_f32(v)).collect();
            let want: Vec<T> = xs
                .iter()
                .zip(&ys)
                .map(|(a, b)| T::from_f32(0.75f32.mul_add(a.to_f32(), b.to_f32())))
                .collect();
            axpy(0.75, &xs, &mut ys);
            assert_eq!(ys, want, "{:?}", T::DTYPE);
        }
        check::<f32>(&x, &y);
        check::<f16>(&x, &y);
        check::<bf16>(&x, &y);
    }

    #[test]
    fn axpy_is_one_fma() {
        let x = [1.0f32, 2.0, -3.0];
        let mut y = [0.5f32, 0.5, 0.5];
        axpy(2.0, &x, &mut y);
        assert_eq!(y, [2.5, 4.5, -5.5]);
    }

    #[test]
    fn transpose_matches_naive_at_odd_shapes() {
        for (r, c) in [(1, 1), (1, 7), (7, 1), (17, 33), (65, 130), (200, 3)] {
            let x: Vec<u32> = (0..(r * c) as u32).collect();
            let mut o = vec![u32::MAX; r * c];
            transpose(&x, r, c, &mut o);
            for i in 0..r {
                for j in 0..c {
                    assert_eq!(o[j * r + i], x[i * c + j], "{r}x{c} at {i},{j}");
                }
            }
        }
    }
}
