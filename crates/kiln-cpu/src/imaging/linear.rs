//! The CPU's run of a [`LinearFilter`] (kiln-core's plan of scipy.ndimage's linear
//! filters) on `f32` or `f64` data: each term by the 1-D passes (`separable`, each pass
//! stored in the data's type as scipy's `correlate1d` stores it) or the direct sum
//! (`direct`, scipy's `correlate`), the terms combined in the data's type as scipy combines
//! them on a float32 or float64 output (numpy's element-wise arithmetic).

use kiln_core::imaging::linear::{Combine, LinearFilter, Pass, Term};
use kiln_core::imaging::scipy_cpu::{run_passes, Pass1d, PassOp};
use kiln_core::imaging::BoundaryMode;
use kiln_core::{Error, Result};
use rayon::prelude::*;

use super::direct::{self, Dims, Sample};
use super::separable;

/// The element-wise arithmetic of the combination, in the data's type.
trait Combined: Sample + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
    fn root(self) -> Self;
}

impl Combined for f32 {
    fn root(self) -> Self {
        self.sqrt()
    }
}

impl Combined for f64 {
    fn root(self) -> Self {
        self.sqrt()
    }
}

/// `acc` holds the first term's combined value, `t` the next term (kiln-core's
/// `combine_step` in the data's type).
#[inline]
fn step<T: Combined>(c: Combine, first: bool, acc: T, t: T) -> T {
    match c {
        Combine::Single => t,
        Combine::Sum if first => t,
        Combine::Sum => acc + t,
        Combine::Magnitude if first => t * t,
        Combine::Magnitude => acc + t * t,
    }
}

fn run_term<T: Sample>(src: &[T], dims: Dims, term: &Term, f: &LinearFilter, out: &mut [T]) -> Result<()> {
    match term {
        Term::Passes(p) if p.iter().any(|p| p.running) => return run_with_running(src, dims, p, f.mode, out),
        Term::Passes(p) => {
            let passes: Vec<(usize, &[f64], usize)> = p
                .iter()
                .map(|p| (p.axis, p.weights.as_slice(), p.anchor))
                .collect();
            separable::correlate(src, dims, &passes, f.mode, out);
        }
        Term::Direct(k) => direct::correlate(src, dims, k.shape, k.anchors, &k.weights, f.mode, out),
    }
    Ok(())
}

/// Passes among which some are running sums (`uniform_filter1d`): each run of correlations
/// through `separable`, each running sum through kiln-core's scipy routine (the same code
/// the NumPy path runs, so the same bits), every pass stored in the data's type.
fn run_with_running<T: Sample>(
    src: &[T],
    dims: Dims,
    passes: &[Pass],
    mode: BoundaryMode,
    out: &mut [T],
) -> Result<()> {
    let mut cur = src.to_vec();
    let mut i = 0;
    while i < passes.len() {
        if passes[i].running {
            let p = &passes[i];
            let pass = Pass1d {
                axis: p.axis,
                op: PassOp::Uniform(p.weights.len()),
                origin: p.anchor as isize - (p.weights.len() / 2) as isize,
                mode,
            };
            let x: Vec<f64> = cur.par_iter().map(|v| v.to_f64()).collect();
            let sums = run_passes(x, &[dims.d, dims.h, dims.w], &[pass], &|v| v)?;
            cur.par_iter_mut()
                .zip(sums.par_iter())
                .for_each(|(c, &s)| *c = T::from_f64(s));
            i += 1;
        } else {
            let j = passes[i..]
                .iter()
                .position(|p| p.running)
                .map_or(passes.len(), |k| i + k);
            let run: Vec<(usize, &[f64], usize)> = passes[i..j]
                .iter()
                .map(|p| (p.axis, p.weights.as_slice(), p.anchor))
                .collect();
            let mut next = vec![T::default(); cur.len()];
            separable::correlate(&cur, dims, &run, mode, &mut next);
            cur = next;
            i = j;
        }
    }
    out.copy_from_slice(&cur);
    Ok(())
}

/// Runs `f` on the row-major f32 array `src` of shape `(D, H, W)` into `out` (scipy's
/// float32 arithmetic: f64 sums, each pass and the combination stored as f32).
pub fn linear_into(src: &[f32], shape: [usize; 3], f: &LinearFilter, out: &mut [f32]) -> Result<()> {
    linear_any(src, shape, f, out)
}

/// Runs `f` on the row-major f64 array `src` of shape `(D, H, W)` into `out` (scipy's
/// float64 arithmetic).
pub fn linear_into_f64(src: &[f64], shape: [usize; 3], f: &LinearFilter, out: &mut [f64]) -> Result<()> {
    linear_any(src, shape, f, out)
}

fn linear_any<T: Combined>(src: &[T], shape: [usize; 3], f: &LinearFilter, out: &mut [T]) -> Result<()> {
    let n: usize = shape.iter().product();
    if shape.contains(&0) {
        return Err(Error::invalid(
            &f.name,
            format!("the input is empty (shape {shape:?})"),
        ));
    }
    kiln_core::backend::check_same_len(&f.name, n, src.len())?;
    kiln_core::backend::check_same_len(&f.name, n, out.len())?;
    f.validate()?;
    let dims = Dims {
        d: shape[0],
        h: shape[1],
        w: shape[2],
    };
    let Some((first, rest)) = f.terms.split_first() else {
        return Err(Error::invalid(&f.name, "a filter needs at least one term"));
    };
    run_term(src, dims, first, f, out)?;
    if f.combine == Combine::Single {
        return Ok(());
    }
    out.par_iter_mut()
        .for_each(|o| *o = step(f.combine, true, T::default(), *o));
    let mut tmp = vec![T::default(); n];
    for term in rest {
        run_term(src, dims, term, f, &mut tmp)?;
        out.par_iter_mut()
            .zip(&tmp)
            .for_each(|(o, &t)| *o = step(f.combine, false, *o, t));
    }
    if f.combine == Combine::Magnitude {
        out.par_iter_mut().for_each(|o| *o = o.root());
    }
    Ok(())
}
