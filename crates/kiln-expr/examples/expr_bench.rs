//! The CPU path of a four-operation element-wise kernel, `z = (a * x + y) * x - b` with
//! scalars `a` and `b`, on 2^24 float32: the best of 5 runs, in ms, into a preallocated
//! output and into a freshly allocated one (NumPy's case). `expr_numpy.py` times the same
//! expression in NumPy.
//!
//! `cargo run --release -p kiln-expr --example expr_bench`

use std::time::Instant;

use kiln_expr::{Arg, ElementwiseKernel, HostArray, HostArrayMut, Scalar};

fn best_of_5(mut f: impl FnMut()) -> f64 {
    f();
    (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() -> Result<(), kiln_core::Error> {
    let n = 1usize << 24;
    let k = ElementwiseKernel::new("T x, T y, T a, T b", "T z", "z = (a * x + y) * x - b", "fma4")?;
    let x: Vec<f32> = (0..n).map(|i| ((i % 1000) as f32) * 1e-3 - 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| ((i % 777) as f32) * 1e-3).collect();
    let args = [
        Arg::Array(HostArray::from_slice(&[n], &x)),
        Arg::Array(HostArray::from_slice(&[n], &y)),
        Arg::Scalar(Scalar::F32(1.5)),
        Arg::Scalar(Scalar::F32(0.25)),
    ];
    let mut z = vec![0f32; n];
    let mut err = None;
    let pre = best_of_5(|| {
        if let Err(e) = k.call(&args, &mut [HostArrayMut::from_slice(&[n], &mut z)], None) {
            err = Some(e);
        }
    });
    let alloc = best_of_5(|| match k.call_alloc(&args, None) {
        Ok(o) => drop(o),
        Err(e) => err = Some(e),
    });
    // The floor: the same expression as one plain loop on one thread.
    let mut zr = vec![0f32; n];
    let plain = best_of_5(|| {
        for ((z, &x), &y) in zr.iter_mut().zip(&x).zip(&y) {
            *z = (1.5 * x + y) * x - 0.25;
        }
        std::hint::black_box(&mut zr);
    });
    if let Some(e) = err {
        return Err(e);
    }
    let bad = (0..n)
        .filter(|&i| z[i] != (1.5 * x[i] + y[i]) * x[i] - 0.25)
        .count();
    println!(
        "kiln-expr CPU, z = (a * x + y) * x - b, 2^24 float32, {} threads",
        rayon::current_num_threads()
    );
    println!("  into a preallocated output: {pre:.2} ms (best of 5)");
    println!("  allocating the output:      {alloc:.2} ms (best of 5)");
    println!("  (a plain Rust loop, one thread: {plain:.2} ms)");
    println!("  mismatches against Rust: {bad}");
    Ok(())
}
