//! Longstaff-Schwartz American rainbows on the CPU (rayon): kiln-core's
//! [`kiln_core::finance::american::rainbow`] contract (the basket's paths one step a date,
//! the sorted-price basis, block sums in block order), one rayon task a canonical block of
//! 1,024 paths at each step, so the bits do not depend on the thread count. The CUDA engine
//! does not price these options.
//!
//! Layout: one slab of `dates x n x 1024` f32 a block (`exp_f32` of the log prices), the
//! cash flows `V` padded to whole blocks; the padding is never simulated or summed.

use kiln_core::finance::american::rainbow::{rainbow_basis, AmericanRainbowSpec, RainbowPlan};
use kiln_core::finance::american::solve_dense;
use kiln_core::finance::{McParams, PriceResult, BLOCK_SAMPLES};
use kiln_core::Result;
use rayon::prelude::*;

use super::american::zeroed;

const B: usize = BLOCK_SAMPLES as usize;

/// The weighted prices of slot `i` of a block slab at date `d`.
#[inline(always)]
fn prices(plan: &RainbowPlan, slab: &[f32], d: usize, i: usize, x: &mut [f64]) {
    for (a, xa) in x.iter_mut().enumerate() {
        *xa = plan.spot_weight[a] * f64::from(slab[(d * plan.n + a) * B + i]);
    }
}

/// Simulates block `b` into its slab and sets `V` to the payoff at the last date.
fn simulate_block(spec: &AmericanRainbowSpec, plan: &RainbowPlan, b: usize, slab: &mut [f32], v: &mut [f64]) {
    let n = plan.n;
    let mut z = vec![0.0f32; 4 * plan.groups as usize];
    let (mut lx, mut e) = (vec![0.0f32; n], vec![0.0f32; n]);
    let mut x = vec![0.0f64; n];
    for (i, vi) in v.iter_mut().enumerate().take(B.min(plan.paths - b * B)) {
        let p = (b * B + i) as u32;
        lx.iter_mut().for_each(|l| *l = 0.0);
        for d in 0..plan.dates {
            plan.normals(p, d as u32, &mut z);
            plan.step(&z, &mut lx, &mut e);
            for a in 0..n {
                slab[(d * n + a) * B + i] = e[a];
            }
        }
        prices(plan, slab, plan.dates - 1, i, &mut x);
        *vi = spec.payoff(&x);
    }
}

/// Discounts `V` one date and returns the block's normal-equation sums at date `d`:
/// `[sum phi phi^T (row-major), sum phi V, count]` over its in-the-money paths.
fn regress_block(
    spec: &AmericanRainbowSpec,
    plan: &RainbowPlan,
    b: usize,
    slab: &[f32],
    v: &mut [f64],
    d: usize,
) -> Vec<f64> {
    let k = plan.basis;
    let mut sums = vec![0.0f64; k * k + k + 1];
    let (mut x, mut sorted, mut phi) = (vec![0.0; plan.n], vec![0.0; plan.n], vec![0.0; k]);
    for (i, vi) in v.iter_mut().enumerate().take(B.min(plan.paths - b * B)) {
        let y = *vi * plan.df_step;
        *vi = y;
        prices(plan, slab, d, i, &mut x);
        if spec.payoff(&x) > 0.0 {
            rainbow_basis(spec, &x, &mut sorted, &mut phi);
            for r in 0..k {
                for c in 0..k {
                    sums[r * k + c] += phi[r] * phi[c];
                }
                sums[k * k + r] += phi[r] * y;
            }
            sums[k * k + k] += 1.0;
        }
    }
    sums
}

/// Exercises block `b` at date `d` where the payoff is positive and above the fit.
fn exercise_block(
    spec: &AmericanRainbowSpec,
    plan: &RainbowPlan,
    b: usize,
    slab: &[f32],
    v: &mut [f64],
    d: usize,
    beta: &[f64],
) {
    let k = plan.basis;
    let (mut x, mut sorted, mut phi) = (vec![0.0; plan.n], vec![0.0; plan.n], vec![0.0; k]);
    for (i, vi) in v.iter_mut().enumerate().take(B.min(plan.paths - b * B)) {
        prices(plan, slab, d, i, &mut x);
        let h = spec.payoff(&x);
        if h > 0.0 {
            rainbow_basis(spec, &x, &mut sorted, &mut phi);
            let cont: f64 = phi.iter().zip(beta).map(|(p, c)| p * c).sum();
            if h > cont {
                *vi = h;
            }
        }
    }
}

/// Prices one American rainbow by Longstaff-Schwartz (kiln-core's
/// `finance::american::rainbow`): `mc.paths` paths of the seed's stream `option`, the
/// option's exercise dates as the time steps. Antithetic and control variates and Sobol
/// points are refused; `mc.steps` is not used. The same bits on any number of threads.
pub fn price_american_rainbow(spec: &AmericanRainbowSpec, mc: &McParams, option: u32) -> Result<PriceResult> {
    let plan = RainbowPlan::new(spec, mc, option)?;
    let (paths, dates, k) = (plan.paths, plan.dates, plan.basis);
    let blocks = paths.div_ceil(B);
    let slab = dates * plan.n * B;
    let mut m = zeroed::<f32>(blocks * slab, "path matrix")?;
    let mut v = zeroed::<f64>(blocks * B, "cash flows")?;
    m.par_chunks_mut(slab)
        .zip(v.par_chunks_mut(B))
        .enumerate()
        .for_each(|(b, (s, vb))| simulate_block(spec, &plan, b, s, vb));
    for d in (0..dates - 1).rev() {
        let parts: Vec<Vec<f64>> = m
            .par_chunks(slab)
            .zip(v.par_chunks_mut(B))
            .enumerate()
            .map(|(b, (s, vb))| regress_block(spec, &plan, b, s, vb, d))
            .collect();
        let mut total = vec![0.0f64; k * k + k + 1];
        for p in &parts {
            for (t, x) in total.iter_mut().zip(p) {
                *t += *x;
            }
        }
        // fewer in-the-money paths than functions, or a singular system: no exercise here
        if total[k * k + k] < k as f64 {
            continue;
        }
        if let Some(beta) = solve_dense(&total[..k * k], &total[k * k..k * k + k], k) {
            m.par_chunks(slab)
                .zip(v.par_chunks_mut(B))
                .enumerate()
                .for_each(|(b, (s, vb))| exercise_block(spec, &plan, b, s, vb, d, &beta));
        }
    }
    let fin: Vec<[f64; 2]> = v
        .par_chunks(B)
        .enumerate()
        .map(|(b, vb)| {
            let (mut sy, mut syy) = (0.0f64, 0.0f64);
            for &x in &vb[..B.min(paths - b * B)] {
                let y = x * plan.df_step;
                sy += y;
                syy += y * y;
            }
            [sy, syy]
        })
        .collect();
    let (mut sy, mut syy) = (0.0f64, 0.0f64);
    for f in &fin {
        sy += f[0];
        syy += f[1];
    }
    Ok(plan.finish(spec, sy, syy))
}

/// Prices many; option `i` uses stream index `first_option + i`. One at a time (each in
/// parallel), so one path matrix is held at a time. An invalid option is an error in its
/// slot.
pub fn price_american_rainbow_portfolio(
    specs: &[AmericanRainbowSpec],
    mc: &McParams,
    first_option: u32,
) -> Vec<Result<PriceResult>> {
    kiln_core::storage::per_option("american rainbow", specs, first_option, |s, o| {
        price_american_rainbow(s, mc, o)
    })
}

#[cfg(test)]
#[path = "american_rainbow_tests.rs"]
mod tests;
