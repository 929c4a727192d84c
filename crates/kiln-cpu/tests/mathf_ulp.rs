//! The accuracy of the CPU map's `exp`, `tanh` and `sigmoid` over every `f32` input, against
//! the float64 reference rounded to ulps of `f32` (subnormal ulps below `f32::MIN_POSITIVE`).
//! Ignored by default (2^32 inputs: minutes on two cores in a release build):
//!
//! ```text
//! cargo test --release -p kiln-cpu --test mathf_ulp -- --ignored --nocapture
//! ```
#![allow(clippy::unwrap_used)] // test code

use kiln_core::backend::MapOp;
use kiln_core::UnaryOp;
use rayon::prelude::*;

/// `|got - want|` in ulps of `want`'s binade as an f32; an infinite or NaN mismatch is
/// infinite.
fn ulp_err(got: f32, want: f64) -> f64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let w32 = want as f32;
    if got.is_infinite() || w32.is_infinite() {
        return if got == w32 { 0.0 } else { f64::INFINITY };
    }
    let a = want.abs().clamp(f32::MIN_POSITIVE as f64, f32::MAX as f64);
    let ulp = 2f64.powi(a.log2().floor() as i32 - 23);
    (got as f64 - want).abs() / ulp
}

#[derive(Clone, Copy, Debug)]
struct Worst {
    ulp: f64,
    x: f32,
    skipped: u64,
}

fn worst(a: Worst, b: Worst) -> Worst {
    let skipped = a.skipped + b.skipped;
    if b.ulp > a.ulp {
        Worst { skipped, ..b }
    } else {
        Worst { skipped, ..a }
    }
}

/// The largest ulp error of `op` through `kiln_cpu::elementwise::map` over all 2^32 bit
/// patterns; inputs whose reference lies below `floor` are counted in `skipped`, not scored.
fn sweep(op: MapOp, floor: f64) -> Worst {
    const B: u64 = 1 << 20;
    (0..(1u64 << 32) / B)
        .into_par_iter()
        .map(|blk| {
            let x: Vec<f32> = (blk * B..(blk + 1) * B)
                .map(|b| f32::from_bits(b as u32))
                .collect();
            let mut y = vec![0f32; x.len()];
            kiln_cpu::elementwise::map(op, &x, &mut y);
            let mut w = Worst {
                ulp: 0.0,
                x: 0.0,
                skipped: 0,
            };
            for (&xi, &yi) in x.iter().zip(&y) {
                let r = op.reference(xi as f64);
                if r.abs() < floor {
                    w.skipped += 1;
                    continue;
                }
                let e = ulp_err(yi, r);
                if e > w.ulp {
                    w = Worst { ulp: e, x: xi, ..w };
                }
            }
            w
        })
        .reduce(
            || Worst {
                ulp: 0.0,
                x: 0.0,
                skipped: 0,
            },
            worst,
        )
}

#[test]
#[ignore = "2^32 inputs: run in release with --ignored"]
fn mathf_max_ulp_exhaustive() {
    let cases = [
        (UnaryOp::Exp, 0.0, 1.02),
        (UnaryOp::Tanh, 0.0, 2.0),
        // sigmoid below f32::MIN_POSITIVE: 1 / (1 + e^-x) underflows there by definition
        (UnaryOp::Sigmoid, f32::MIN_POSITIVE as f64, 2.5),
    ];
    // KILN_ULP_OPS=tanh,... sweeps only those
    let only = std::env::var("KILN_ULP_OPS").unwrap_or_default();
    for (u, floor, bound) in cases {
        if !only.is_empty() && !only.split(',').any(|o| o == u.name()) {
            continue;
        }
        let w = sweep(MapOp::Unary(u), floor);
        println!(
            "{{\"op\": \"{}\", \"max_ulp\": {:.4}, \"at\": {:e}, \"x_bits\": \"{:#010x}\", \"skipped\": {}}}",
            u.name(),
            w.ulp,
            w.x,
            w.x.to_bits(),
            w.skipped
        );
        assert!(w.ulp <= bound, "{} max {} ulp at x = {:e}", u.name(), w.ulp, w.x);
    }
}
