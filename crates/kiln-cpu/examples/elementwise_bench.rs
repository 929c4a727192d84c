//! Times kiln's CPU element-wise ops over 2^24 elements (default; `--log2-n K` to change),
//! on one thread and on the whole rayon pool, and prints one JSON line per op, dtype and
//! thread count: the median of `--reps` timed runs (default 9) after two warm-up runs, and
//! for one thread also the mean thread CPU time (robust on a loaded machine).
//! `scripts/cpu-vs-numpy.py` prints NumPy's equivalents in the same format.
//!
//! ```text
//! cargo run --release -p kiln-cpu --example elementwise_bench
//! ```
#![allow(clippy::unwrap_used)] // a benchmark binary: a bad argument ends it

use kiln_core::backend::{bf16, f16, Element, MapOp};
use kiln_core::UnaryOp;
use std::time::Instant;

/// This thread's CPU time in ns (`/proc/thread-self/schedstat`; 0 where it is missing): on a
/// loaded machine it counts only the time the thread ran.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// `(median wall ms, mean thread-CPU ms)` of `reps` runs after two warm-up runs (the CPU
/// time is read around all runs together: the kernel updates it at scheduler ticks).
fn median_ms(reps: usize, mut f: impl FnMut()) -> (f64, f64) {
    f();
    f();
    let c = thread_cpu_ns();
    let mut wall: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let cpu = (thread_cpu_ns() - c) as f64 * 1e-6 / reps as f64;
    wall.sort_by(f64::total_cmp);
    (wall[reps / 2], cpu)
}

fn ops() -> Vec<MapOp> {
    vec![
        MapOp::Unary(UnaryOp::Exp),
        MapOp::Unary(UnaryOp::Tanh),
        MapOp::Unary(UnaryOp::Sigmoid),
        MapOp::Unary(UnaryOp::Relu),
        MapOp::ScaleShift { a: 1.5, b: -0.25 },
        MapOp::Clamp { lo: -0.5, hi: 0.5 },
    ]
}

/// One JSON line; `cpu_ms` (the calling thread's CPU time) only for one thread.
fn line(imp: &str, op: &str, dtype: &str, threads: usize, n: usize, (ms, cpu): (f64, f64)) {
    let cpu = if threads == 1 {
        format!(", \"cpu_ms\": {cpu:.3}")
    } else {
        String::new()
    };
    println!(
        "{{\"impl\": \"{imp}\", \"op\": \"{op}\", \"dtype\": \"{dtype}\", \"threads\": {threads}, \"n\": {n}, \"ms\": {ms:.3}{cpu}}}"
    );
}

fn bench<T: Element>(name: &str, x32: &[f32], reps: usize, pools: &[(usize, &rayon::ThreadPool)]) {
    let x: Vec<T> = x32.iter().map(|&v| T::from_f32(v)).collect();
    let mut out = vec![T::from_f32(0.0); x.len()];
    for &(threads, pool) in pools {
        for op in ops() {
            let ms = pool.install(|| median_ms(reps, || kiln_cpu::elementwise::map(op, &x, &mut out)));
            line("kiln", op.name(), name, threads, x.len(), ms);
        }
        let ms = pool.install(|| median_ms(reps, || kiln_cpu::elementwise::axpy(0.75, &x, &mut out)));
        line("kiln", "axpy", name, threads, x.len(), ms);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |k: &str, d: usize| {
        args.iter()
            .position(|a| a == k)
            .map_or(d, |i| args[i + 1].parse().unwrap())
    };
    let n = 1usize << arg("--log2-n", 24);
    let reps = arg("--reps", 9);
    // inputs in [-4, 4): every op's interesting range, no overflow
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let x: Vec<f32> = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
        })
        .collect();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let all = rayon::ThreadPoolBuilder::new().build().unwrap();
    let pools = [(1, &one), (all.current_num_threads(), &all)];
    let dtypes = args
        .iter()
        .position(|a| a == "--dtypes")
        .map_or("f32,f16,bf16", |i| args[i + 1].as_str());
    for d in dtypes.split(',') {
        match d {
            "f32" => bench::<f32>("f32", &x, reps, &pools),
            "f16" => bench::<f16>("f16", &x, reps, &pools),
            "bf16" => bench::<bf16>("bf16", &x, reps, &pools),
            _ => panic!("--dtypes takes f32,f16,bf16"),
        }
    }
    // the scalar std functions the map used before, one thread, for comparison
    let mut out = vec![0f32; n];
    for (name, f) in [
        ("exp", f32::exp as fn(f32) -> f32),
        ("tanh", f32::tanh),
        ("sigmoid", |v: f32| 1.0 / (1.0 + (-v).exp())),
    ] {
        let ms = median_ms(reps, || {
            for (o, &v) in out.iter_mut().zip(&x) {
                *o = f(v);
            }
            std::hint::black_box(&mut out);
        });
        line("std-scalar", name, "f32", 1, n, ms);
    }
}
