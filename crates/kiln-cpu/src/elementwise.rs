//! Element-wise ops on f32 slices.

use kiln_core::UnaryOp;
use rayon::prelude::*;

/// Elements per rayon task: big enough that scheduling costs < 1% of the work.
const CHUNK: usize = 1 << 15;

#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// `out[i] = op(x[i])`; lengths are checked by the caller.
pub(crate) fn unary_f32(op: UnaryOp, x: &[f32], out: &mut [f32]) {
    let f = match op {
        UnaryOp::Sigmoid => sigmoid,
    };
    out.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(o, i)| {
            for (o, &i) in o.iter_mut().zip(i) {
                *o = f(i);
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
