//! The CPU's run of a [`LinearFilter`] (kiln-core's plan of scipy.ndimage's linear
//! filters): each term by the 1-D passes (`separable`, each pass rounded to f32 as scipy's
//! `correlate1d`) or the direct sum (`direct`, scipy's `correlate`), the terms combined in
//! f32 as scipy combines them on a float32 output.

use kiln_core::imaging::linear::{combine_step, Combine, LinearFilter, Term};
use kiln_core::{Error, Result};
use rayon::prelude::*;

use super::direct::{self, Dims};
use super::separable;

fn run_term(src: &[f32], dims: Dims, term: &Term, f: &LinearFilter, out: &mut [f32]) {
    match term {
        Term::Passes(p) => {
            let passes: Vec<(usize, &[f64], usize)> = p
                .iter()
                .map(|p| (p.axis, p.weights.as_slice(), p.anchor))
                .collect();
            separable::correlate(src, dims, &passes, f.mode, out);
        }
        Term::Direct(k) => direct::correlate(src, dims, k.shape, k.anchors, &k.weights, f.mode, out),
    }
}

/// Runs `f` on the row-major f32 array `src` of shape `(D, H, W)` into `out`.
pub fn linear_into(src: &[f32], shape: [usize; 3], f: &LinearFilter, out: &mut [f32]) -> Result<()> {
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
    run_term(src, dims, first, f, out);
    if f.combine == Combine::Single {
        return Ok(());
    }
    out.par_iter_mut()
        .for_each(|o| *o = combine_step(f.combine, true, 0.0, *o));
    let mut tmp = vec![0.0f32; n];
    for term in rest {
        run_term(src, dims, term, f, &mut tmp);
        out.par_iter_mut()
            .zip(&tmp)
            .for_each(|(o, &t)| *o = combine_step(f.combine, false, *o, t));
    }
    if f.combine == Combine::Magnitude {
        out.par_iter_mut().for_each(|o| *o = o.sqrt());
    }
    Ok(())
}
