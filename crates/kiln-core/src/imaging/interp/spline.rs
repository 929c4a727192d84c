//! scipy's B-spline machinery (`ni_splines.c`): the interpolation weights of orders 0–5,
//! the recursive prefilter's poles, and the prefilter itself along one axis
//! (`NI_SplineFilter1D`), with scipy's boundary initialisation per mode.

use rayon::prelude::*;

use super::{check_order, floor, InterpMode};
use crate::error::{Error, Result};

/// The `order + 1` weights of the B-spline of `order` centred at `x` (scipy's
/// `get_spline_interpolation_weights`): `w[k]` weighs the sample `start + k`, where `start`
/// is `floor(x) - order / 2` (odd orders) or `floor(x + 0.5) - order / 2` (even orders). The
/// last weight is `1 - Σ` of the others, as scipy computes it. Order 0 leaves `w` alone.
#[inline]
pub fn spline_weights(x: f64, order: usize, w: &mut [f64; 6]) {
    let x = x - if order & 1 == 1 { floor(x) } else { floor(x + 0.5) };
    weights_of_delta(x, order, w);
}

/// [`spline_weights`] of `x` already reduced to its distance from the middle knot
/// (`x - floor(x)` for odd orders, `x - floor(x + 0.5)` for even ones).
#[inline]
pub(crate) fn weights_of_delta(x: f64, order: usize, w: &mut [f64; 6]) {
    let mut y = x;
    let mut z = 1.0 - x;
    match order {
        1 => w[0] = 1.0 - x,
        2 => {
            w[1] = 0.75 - x * x;
            y = 0.5 - x;
            w[0] = 0.5 * y * y;
        }
        3 => {
            w[1] = (y * y * (y - 2.0) * 3.0 + 4.0) / 6.0;
            w[2] = (z * z * (z - 2.0) * 3.0 + 4.0) / 6.0;
            w[0] = z * z * z / 6.0;
        }
        4 => {
            let t = x * x;
            w[2] = t * (t * 0.25 - 0.625) + 115.0 / 192.0;
            y = 1.0 + x;
            w[1] = y * (y * (y * (5.0 - y) / 6.0 - 1.25) + 5.0 / 24.0) + 55.0 / 96.0;
            w[3] = z * (z * (z * (5.0 - z) / 6.0 - 1.25) + 5.0 / 24.0) + 55.0 / 96.0;
            y = 0.5 - x;
            let t = y * y;
            w[0] = t * t / 24.0;
        }
        5 => {
            let t = y * y;
            w[2] = t * (t * (0.25 - y / 12.0) - 0.5) + 0.55;
            let t = z * z;
            w[3] = t * (t * (0.25 - z / 12.0) - 0.5) + 0.55;
            y += 1.0;
            w[1] = y * (y * (y * (y * (y / 24.0 - 0.375) + 1.25) - 1.75) + 0.625) + 0.425;
            z += 1.0;
            w[4] = z * (z * (z * (z * (z / 24.0 - 0.375) + 1.25) - 1.75) + 0.625) + 0.425;
            y = 1.0 - x;
            let t = y * y;
            w[0] = y * t * t / 120.0;
        }
        _ => return,
    }
    w[order] = 1.0;
    for i in 0..order {
        w[order] -= w[i];
    }
}

/// The poles of the prefilter of `order` (scipy's `get_filter_poles`, written to the
/// nearest f64); none below order 2.
pub fn filter_poles(order: usize) -> &'static [f64] {
    match order {
        2 => &[-0.1715728752538099],
        3 => &[-0.267_949_192_431_122_7],
        4 => &[-0.361_341_225_900_220_16, -0.013_725_429_297_339_121],
        5 => &[-0.430_575_347_099_973_8, -0.043_096_288_203_264_65],
        _ => &[],
    }
}

/// The boundary initialisation scipy uses for the prefilter in `mode`.
#[derive(Clone, Copy)]
enum Init {
    Mirror,
    Wrap,
    Reflect,
}

fn init_of(mode: InterpMode) -> Init {
    match mode {
        InterpMode::GridConstant | InterpMode::Constant | InterpMode::Mirror | InterpMode::Wrap => {
            Init::Mirror
        }
        InterpMode::GridWrap => Init::Wrap,
        InterpMode::Nearest | InterpMode::Reflect => Init::Reflect,
    }
}

/// One pole's causal and anticausal passes over `w` lines of `n` samples stored as rows:
/// sample `i` of line `j` is `b[i * w + j]`. Every line sees exactly scipy's scalar
/// sequence of operations (`_apply_filter` with the `_init_*` functions of `ni_splines.c`);
/// the rows only let the loops run across lines.
fn apply_pole(b: &mut [f64], n: usize, w: usize, z: f64, init: Init) {
    // causal initialisation of row 0
    match init {
        Init::Mirror => {
            let zn1 = z.powf((n - 1) as f64);
            for j in 0..w {
                let mut c0 = b[j] + zn1 * b[(n - 1) * w + j];
                let mut zi = z;
                for i in 1..n - 1 {
                    c0 += zi * (b[i * w + j] + zn1 * b[(n - 1 - i) * w + j]);
                    zi *= z;
                }
                b[j] = c0 / (1.0 - zn1 * zn1);
            }
        }
        Init::Wrap => {
            for j in 0..w {
                let mut c0 = b[j];
                let mut zi = z;
                for i in 1..n {
                    c0 += zi * b[(n - i) * w + j];
                    zi *= z;
                }
                b[j] = c0 / (1.0 - zi);
            }
        }
        Init::Reflect => {
            // scipy 1.17 accumulates into c[0] in place, and the last term reads it back
            // (c[n - 1 - i] is c[0] for i = n - 1): reproduced as it is
            let zn = z.powf(n as f64);
            for j in 0..w {
                let c0 = b[j];
                b[j] += zn * b[(n - 1) * w + j];
                let mut zi = z;
                for i in 1..n {
                    let v = zi * (b[i * w + j] + zn * b[(n - 1 - i) * w + j]);
                    b[j] += v;
                    zi *= z;
                }
                b[j] *= z / (1.0 - zn * zn);
                b[j] += c0;
            }
        }
    }
    for i in 1..n {
        let (prev, cur) = b.split_at_mut(i * w);
        let p = &prev[(i - 1) * w..];
        for (c, &q) in cur[..w].iter_mut().zip(p) {
            *c += z * q;
        }
    }
    // anticausal initialisation of row n - 1
    let last = (n - 1) * w;
    match init {
        Init::Mirror => {
            for j in 0..w {
                b[last + j] = (z * b[last - w + j] + b[last + j]) * z / (z * z - 1.0);
            }
        }
        Init::Wrap => {
            for j in 0..w {
                let mut cl = b[last + j];
                let mut zi = z;
                for i in 0..n - 1 {
                    cl += zi * b[i * w + j];
                    zi *= z;
                }
                b[last + j] = cl * (z / (zi - 1.0));
            }
        }
        Init::Reflect => {
            for j in 0..w {
                b[last + j] *= z / (z - 1.0);
            }
        }
    }
    for i in (0..n - 1).rev() {
        let (cur, next) = b.split_at_mut((i + 1) * w);
        let c = &mut cur[i * w..];
        for (c, &q) in c.iter_mut().zip(&next[..w]) {
            *c = z * (q - *c);
        }
    }
}

/// scipy's `apply_filter` on `w` lines of `n > 1` samples stored as rows.
fn apply_filter(b: &mut [f64], n: usize, w: usize, poles: &[f64], mode: InterpMode) {
    let mut gain = 1.0;
    for &z in poles {
        gain *= (1.0 - z) * (1.0 - 1.0 / z);
    }
    for c in b.iter_mut() {
        *c *= gain;
    }
    let init = init_of(mode);
    for &z in poles {
        apply_pole(b, n, w, z, init);
    }
}

/// Lines per task when the filtered axis is not the last one.
const COLUMNS: usize = 64;

/// scipy's `spline_filter1d` (order 2–5) of a row-major `f64` array of `shape` along `axis`,
/// in place. Orders 0 and 1 and axes of one sample leave the data as it is, as scipy does.
pub fn spline_filter1d(
    data: &mut [f64],
    shape: &[usize],
    axis: usize,
    order: usize,
    mode: InterpMode,
) -> Result<()> {
    check_order("spline_filter1d", order)?;
    let op = "spline_filter1d";
    if axis >= shape.len() {
        return Err(Error::InvalidArgument {
            op: op.into(),
            reason: format!("axis {axis} of a {}-d array", shape.len()),
        });
    }
    let size: usize = shape.iter().product();
    if size != data.len() {
        return Err(Error::ShapeMismatch {
            op: op.into(),
            expected: shape.to_vec(),
            got: vec![data.len()],
        });
    }
    let len = shape[axis];
    let poles = filter_poles(order);
    if len <= 1 || poles.is_empty() || size == 0 {
        return Ok(());
    }
    let inner: usize = shape[axis + 1..].iter().product();
    if inner == 1 {
        data.par_chunks_mut(len)
            .for_each(|line| apply_filter(line, len, 1, poles, mode));
        return Ok(());
    }
    let outer = size / (len * inner);
    let tasks: Vec<(usize, usize, usize)> = (0..outer)
        .flat_map(|o| {
            (0..inner)
                .step_by(COLUMNS)
                .map(move |j0| (o, j0, COLUMNS.min(inner - j0)))
        })
        .collect();
    let src: &[f64] = data;
    let done: Vec<Vec<f64>> = tasks
        .par_iter()
        .map(|&(o, j0, w)| {
            let base = o * len * inner + j0;
            let mut b = Vec::with_capacity(len * w);
            for i in 0..len {
                b.extend_from_slice(&src[base + i * inner..base + i * inner + w]);
            }
            apply_filter(&mut b, len, w, poles, mode);
            b
        })
        .collect();
    for (&(o, j0, w), b) in tasks.iter().zip(&done) {
        let base = o * len * inner + j0;
        for i in 0..len {
            data[base + i * inner..base + i * inner + w].copy_from_slice(&b[i * w..(i + 1) * w]);
        }
    }
    Ok(())
}
