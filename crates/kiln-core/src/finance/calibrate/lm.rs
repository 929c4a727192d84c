//! Levenberg-Marquardt for a small least-squares problem `min 1/2 |r(p)|^2` over a box.
//!
//! Damping: Nielsen's update as given by Madsen, Nielsen and Tingleff ("Methods for
//! non-linear least squares problems", 2004, Algorithm 3.16): on a step that lowers the
//! cost, `mu *= max(1/3, 1 - (2 rho - 1)^3)` and `nu = 2`; on one that does not, `mu *= nu`,
//! `nu *= 2`, where `rho` is the actual over the predicted reduction. The damping term is
//! Marquardt's scaled one, `mu diag(J^T J)`, so that parameters of different sizes (`v0`
//! near 0.04, `kappa` near 1) are damped alike.
//!
//! Bounds: by projection. A trial point `p + h` is clipped to the box and the predicted
//! reduction is that of the clipped step; a fitted parameter at a bound stays there unless
//! the gradient pulls it inside. (A smooth transform would change the problem's curvature
//! and slow the final quadratic convergence the recovery test relies on.)
//!
//! Stopping rules (the first that holds): `|g|_inf <= gtol` (gradient `g = J^T r`), the step
//! `|h| <= xtol (|p| + xtol)`, a relative cost reduction `<= ftol` on an accepted step, a
//! cost of exactly zero, or `max_iterations` iterations (each iteration one solve and one
//! evaluation of residuals and Jacobian).
//!
//! The 5x5 solve is a hand-written Cholesky: kiln-core depends on no linear-algebra crate
//! (faer is kiln-cpu's, for GEMM), and a dependency for one 5x5 positive-definite system
//! is not worth its build time.

use super::dual::NP;
use crate::error::{Error, Result};

/// Why the optimiser stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The gradient's largest component fell to `gtol`.
    Gradient,
    /// The step fell to `xtol` relative to the parameters.
    Step,
    /// An accepted step lowered the cost by a relative `ftol` or less.
    RelativeReduction,
    /// The residuals are all zero.
    ZeroResidual,
    /// `max_iterations` were spent.
    MaxIterations,
}

impl Stop {
    /// The reason's name in output (`gradient`, `step`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Stop::Gradient => "gradient",
            Stop::Step => "step",
            Stop::RelativeReduction => "relative_reduction",
            Stop::ZeroResidual => "zero_residual",
            Stop::MaxIterations => "max_iterations",
        }
    }
}

/// Stopping tolerances and the iteration cap.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LmOptions {
    /// Stop when `|J^T r|_inf <= gtol`.
    pub gtol: f64,
    /// Stop when the step `|h| <= xtol (|p| + xtol)`.
    pub xtol: f64,
    /// Stop when an accepted step lowers the cost by a relative `ftol` or less.
    pub ftol: f64,
    /// At most this many iterations.
    pub max_iterations: usize,
    /// The first damping, relative to the largest diagonal of `J^T J` scaling (`tau`).
    pub tau: f64,
}

impl Default for LmOptions {
    fn default() -> Self {
        LmOptions {
            gtol: 1e-14,
            xtol: 1e-12,
            ftol: 1e-12,
            max_iterations: 200,
            tau: 1e-3,
        }
    }
}

/// What the optimiser found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LmResult {
    /// The parameters.
    pub p: [f64; NP],
    /// `1/2 |r|^2` there.
    pub cost: f64,
    /// Iterations (solves).
    pub iterations: usize,
    /// Evaluations of residuals and Jacobian.
    pub evaluations: usize,
    /// Why it stopped.
    pub stop: Stop,
}

/// Residuals `r` and Jacobian rows `J` (one `[f64; NP]` per residual) at `p`.
pub trait Residuals {
    /// Fills `r` and `jac` (both of the problem's length) at `p`.
    fn eval(&mut self, p: &[f64; NP], r: &mut [f64], jac: &mut [[f64; NP]]) -> Result<()>;
}

/// Solves `a x = b` for a symmetric positive-definite `a` (Cholesky); `None` if `a` is not
/// numerically positive definite.
pub(crate) fn cholesky_solve(a: &[[f64; NP]; NP], b: &[f64; NP]) -> Option<[f64; NP]> {
    let mut l = [[0.0; NP]; NP];
    for i in 0..NP {
        for j in 0..=i {
            let mut s = a[i][j];
            for (a, b) in l[i][..j].iter().zip(&l[j][..j]) {
                s -= a * b;
            }
            if i == j {
                if s.is_nan() || s <= 0.0 {
                    return None;
                }
                l[i][i] = s.sqrt();
            } else {
                l[i][j] = s / l[j][j];
            }
        }
    }
    let mut y = [0.0; NP];
    for i in 0..NP {
        let mut s = b[i];
        for k in 0..i {
            s -= l[i][k] * y[k];
        }
        y[i] = s / l[i][i];
    }
    let mut x = [0.0; NP];
    for i in (0..NP).rev() {
        let mut s = y[i];
        for k in i + 1..NP {
            s -= l[k][i] * x[k];
        }
        x[i] = s / l[i][i];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

fn normal_equations(r: &[f64], jac: &[[f64; NP]]) -> ([[f64; NP]; NP], [f64; NP], f64) {
    let mut a = [[0.0; NP]; NP];
    let mut g = [0.0; NP];
    let mut cost = 0.0;
    for (ri, ji) in r.iter().zip(jac) {
        cost += 0.5 * ri * ri;
        for i in 0..NP {
            g[i] += ji[i] * ri;
            for j in 0..=i {
                a[i][j] += ji[i] * ji[j];
            }
        }
    }
    // the upper triangle from the lower
    for j in 1..NP {
        let (top, rest) = a.split_at_mut(j);
        for (i, row) in top.iter_mut().enumerate() {
            row[j] = rest[0][i];
        }
    }
    (a, g, cost)
}

fn norm(v: &[f64; NP]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// Minimises `1/2 |r(p)|^2` over the box `lo <= p <= hi` from `p0` (clipped into the box).
pub fn levenberg_marquardt(
    f: &mut impl Residuals,
    m: usize,
    p0: [f64; NP],
    lo: [f64; NP],
    hi: [f64; NP],
    opts: &LmOptions,
) -> Result<LmResult> {
    let clip = |p: [f64; NP]| {
        let mut q = p;
        for i in 0..NP {
            q[i] = q[i].clamp(lo[i], hi[i]);
        }
        q
    };
    let mut p = clip(p0);
    let (mut r, mut jac) = (vec![0.0; m], vec![[0.0; NP]; m]);
    f.eval(&p, &mut r, &mut jac)?;
    let mut evaluations = 1;
    let (mut a, mut g, mut cost) = normal_equations(&r, &jac);
    if !cost.is_finite() {
        return Err(Error::invalid(
            "calibrate_heston",
            "the residuals at the starting point are not finite; check the quotes and the start",
        ));
    }
    let dmax = (0..NP).map(|i| a[i][i]).fold(0.0f64, f64::max);
    let mut mu = opts.tau;
    let mut nu = 2.0;
    let (mut r_new, mut jac_new) = (vec![0.0; m], vec![[0.0; NP]; m]);
    let mut iterations = 0;
    let stop = loop {
        if cost == 0.0 {
            break Stop::ZeroResidual;
        }
        // a parameter held at a bound by a gradient pointing outside is not a descent
        // direction: measure the gradient only where a step can go
        let gfree = (0..NP)
            .map(|i| {
                let out = (p[i] <= lo[i] && g[i] > 0.0) || (p[i] >= hi[i] && g[i] < 0.0);
                if out {
                    0.0
                } else {
                    g[i].abs()
                }
            })
            .fold(0.0f64, f64::max);
        if gfree <= opts.gtol {
            break Stop::Gradient;
        }
        if iterations >= opts.max_iterations {
            break Stop::MaxIterations;
        }
        iterations += 1;
        let mut damped = a;
        for (i, row) in damped.iter_mut().enumerate() {
            // Marquardt's scaling, floored so that a parameter the quotes barely see is
            // still damped
            row[i] += mu * a[i][i].max(1e-12 * dmax.max(1e-300));
        }
        let neg_g = g.map(|x| -x);
        let Some(h) = cholesky_solve(&damped, &neg_g) else {
            mu *= nu;
            nu *= 2.0;
            continue;
        };
        if norm(&h) <= opts.xtol * (norm(&p) + opts.xtol) {
            break Stop::Step;
        }
        let p_new = clip(std::array::from_fn(|i| p[i] + h[i]));
        let hp: [f64; NP] = std::array::from_fn(|i| p_new[i] - p[i]);
        if norm(&hp) <= opts.xtol * (norm(&p) + opts.xtol) {
            break Stop::Step;
        }
        // predicted reduction of the Gauss-Newton model along the (projected) step
        let mut quad = 0.0;
        let mut lin = 0.0;
        for i in 0..NP {
            lin += hp[i] * g[i];
            for j in 0..NP {
                quad += hp[i] * a[i][j] * hp[j];
            }
        }
        let predicted = -lin - 0.5 * quad;
        let ok = f.eval(&p_new, &mut r_new, &mut jac_new).is_ok();
        evaluations += 1;
        let (a_new, g_new, cost_new) = normal_equations(&r_new, &jac_new);
        let actual = cost - cost_new;
        if ok && cost_new.is_finite() && actual > 0.0 && predicted > 0.0 {
            let rho = actual / predicted;
            let done = actual <= opts.ftol * cost;
            p = p_new;
            std::mem::swap(&mut r, &mut r_new);
            std::mem::swap(&mut jac, &mut jac_new);
            (a, g, cost) = (a_new, g_new, cost_new);
            mu *= (1.0f64 / 3.0).max(1.0 - (2.0 * rho - 1.0).powi(3));
            nu = 2.0;
            if done {
                break Stop::RelativeReduction;
            }
        } else {
            mu *= nu;
            nu *= 2.0;
            if !mu.is_finite() {
                break Stop::Step;
            }
        }
    };
    Ok(LmResult {
        p,
        cost,
        iterations,
        evaluations,
        stop,
    })
}
