//! `kiln gemm --devices`: the strided batch's products split over several devices by
//! kiln's executor; chunks are runs of whole products (a product is never cut), each run
//! through `Runtime::matmul_with` on the worker's device, C merged in batch order. A
//! product's bits are those a one-device run gives on that kind of device (faer on the CPU
//! computes each product alone; cuBLAS may pick another algorithm for another batch count,
//! which the GPU test `gemm_devices_gpu` checks).
//!
//! Timed by wall clock around whole executor runs (upload, products, download, merge): one
//! warm-up run (which also calibrates a device the first time), then `--reps` runs.

use crate::devices_arg::{per_chunk, split_of, WorkerSplit};
use kiln::executor::{Executor, Worker, Workload};
use kiln::linalg::{Gemm, GemmElement, GemmImpl, GemmPrecision};
use std::ops::Range;
use std::time::Instant;

/// A strided batch of products; chunks are runs of `per` products.
struct Products<'a, T> {
    a: &'a [T],
    b: &'a [T],
    g: Gemm,
    p: GemmPrecision,
    imp: GemmImpl,
    per: usize,
}

impl<'a, T> Products<'a, T> {
    fn range(&self, i: usize) -> Range<usize> {
        let s = (i * self.per).min(self.g.batch);
        s..(s + self.per).min(self.g.batch)
    }

    /// The sub-problem of products `r` and its operand slices (stride 0 broadcasts whole).
    fn part(&self, r: &Range<usize>) -> (Gemm, &'a [T], &'a [T]) {
        let g = Gemm {
            batch: r.len(),
            ..self.g
        };
        let slice = |x: &'a [T], stride: usize, one: usize| -> &'a [T] {
            if stride == 0 {
                x
            } else {
                let s = r.start * stride;
                &x[s..s + (r.len() - 1) * stride + one]
            }
        };
        let (mk, kn) = (self.g.m * self.g.k, self.g.k * self.g.n);
        (
            g,
            slice(self.a, self.g.stride_a, mk),
            slice(self.b, self.g.stride_b, kn),
        )
    }
}

impl<T: GemmElement + Send + Sync> Workload for Products<'_, T> {
    type Part = Vec<T>;
    type Output = Vec<T>;

    fn key(&self) -> String {
        format!(
            "cli-gemm/{}/{:?}/{}x{}x{}",
            self.p.name(),
            self.imp,
            self.g.m,
            self.g.n,
            self.g.k
        )
    }

    fn chunks(&self) -> usize {
        self.g.batch.div_ceil(self.per)
    }

    fn units(&self, i: usize) -> f64 {
        2.0 * (self.g.m * self.g.n * self.g.k) as f64 * self.range(i).len() as f64
    }

    fn run(&self, worker: &Worker, i: usize) -> kiln::Result<Vec<T>> {
        let r = self.range(i);
        let (g, a, b) = self.part(&r);
        worker.run(|rt| rt.matmul_with(a, b, &g, self.p, self.imp))
    }

    fn merge(&self, parts: Vec<Vec<T>>) -> kiln::Result<Vec<T>> {
        Ok(parts.concat())
    }
}

/// What a `--devices` measurement gives back.
pub(crate) struct Measured<T> {
    /// Median and minimum milliseconds of a whole run.
    pub median_ms: f64,
    pub min_ms: f64,
    /// C of the first run.
    pub c: Vec<T>,
    /// The split of the last run.
    pub workers: Vec<WorkerSplit>,
    /// Chunks per run.
    pub chunks: usize,
}

/// One warm-up run (C kept), then `reps` timed runs.
pub(crate) fn measure<T: GemmElement + Send + Sync>(
    ex: &Executor,
    (a, b): (&[T], &[T]),
    g: &Gemm,
    p: GemmPrecision,
    imp: GemmImpl,
    reps: usize,
) -> kiln::Result<Measured<T>> {
    let work = Products {
        a,
        b,
        g: *g,
        p,
        imp,
        per: per_chunk(g.batch, ex.workers().len()),
    };
    let (c, mut rep) = ex.run(&work)?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = Instant::now();
        let (out, r) = ex.run(&work)?;
        t.push(t0.elapsed().as_secs_f64() * 1e3);
        drop(std::hint::black_box(out));
        rep = r;
    }
    t.sort_by(f64::total_cmp);
    Ok(Measured {
        median_ms: t[t.len() / 2],
        min_ms: t[0],
        c,
        workers: split_of(&rep),
        chunks: rep.chunks,
    })
}

/// FNV-1a (64-bit) over C's values as f32 bits, little-endian: equal digests, equal bits.
pub(crate) fn digest<T: GemmElement>(c: &[T]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in c {
        for byte in v.to_f32().to_bits().to_le_bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}
