//! Andersen's Quadratic-Exponential (QE) scheme for Heston paths (L. Andersen, "Simple and
//! efficient simulation of the Heston stochastic volatility model", J. Comp. Finance 11(3),
//! 2008), in portable f32 arithmetic, so that the CPU engine (kiln-cpu) and the CUDA kernel
//! (`kernels/heston.cu`) compute the same bits. [`qe_step`] is the one step both run;
//! [`heston_sample`] is one whole path and its payoff.
//!
//! Choices: `psi_c = 1.5`, `gamma1 = gamma2 = 1/2` (the central discretisation of the
//! integrated variance), and the martingale correction of Andersen's section 7.2 for the log
//! price, so that `E[S_{t+dt} | S_t, V_t] = S_t e^{(r-q) dt}` exactly in the scheme. Where the
//! correction does not exist (`A >= 1 / (2a)` in the quadratic branch, `A >= beta` in the
//! exponential one: only for large positive `rho / xi`) the step falls back to the
//! uncorrected `K0 + K1 V`, as Andersen suggests.
//!
//! # Random numbers
//!
//! Step `j` (0-based, over the whole path) of sample `s` of option `o` uses the four words
//! `philox4x32_10([j, s, o, HESTON_STREAM], key)` ([`heston_words`]; `HESTON_STREAM = 2`, so
//! the words never meet the GBM paths' (`c3 = 0`) or the Sobol shifts' (`c3 = 1`)):
//! `(z_v, z_x) = box_muller_f32(w0, w1)` and `u = uniform_f32(w2)`; `w3` is unused. `z_v`
//! drives the quadratic branch, `u` the exponential one, `z_x` the log price.
//!
//! # The step (f32; `a.mul_add(b, c)` is fused, one rounding; CUDA `__fmaf_rn`)
//!
//! ```text
//! m   = (v - theta).mul_add(ekt, theta)                 // E[V'] (ekt = e^{-kappa dt})
//! s2  = v.mul_add(c1, c2)                               // Var[V']
//! psi = max(s2 / (m * m), PSI_MIN)
//! if psi <= 1.5:                                        // quadratic: V' = a (b + z_v)^2
//!     t = 2 / psi;  tm1 = t - 1;  b2 = sqrt(t).mul_add(sqrt(tm1), tm1)
//!     a = m / (1 + b2);  b = sqrt(b2);  bz = b + z_v;  v' = a * (bz * bz)
//!     qq = (-2 * A).mul_add(a, 1)
//!     corrected if qq > 0:  k0* = 0.5 * ln_f32(qq) - ((A * b2) * a) / qq
//! else:                                                 // exponential: mass p at 0
//!     omp = 2 / (psi + 1);  p = 1 - omp;  beta = omp / m
//!     v' = u <= p ? 0 : ln_f32(omp / (1 - u)) / beta
//!     corrected if beta > A:  k0* = -ln_f32(p + (beta * omp) / (beta - A))
//! v' = max(v', 0)
//! (d0, d1) = corrected ? (k0*, -half_k3) : (k0, k1)
//! dx = rqdt + d0;  dx = d1.mul_add(v, dx);  dx = k2.mul_add(v', dx)
//! var = k3.mul_add(v, k4 * v');  dx = sqrt(var).mul_add(z_x, dx)
//! x' = x + dx
//! ```
//!
//! with the constants of [`QeConsts`] (derived in f64 by [`HestonPathParams::new`] and
//! rounded once). `sqrt` is IEEE (correctly rounded on both sides), `ln_f32` kiln's
//! portable logarithm. The log price starts at `x = 0` and `S = spot * exp_f32(x)` (the
//! product in f64), as for GBM paths.

use crate::error::{Error, Result};
use crate::finance::{finish, BlockSums, McParams, OptionSpec, OptionType, PriceResult, Rng, Style};
use crate::philox::{self, box_muller_f32, exp_f32, ln_f32, uniform_f32};

use super::HestonSpec;

/// Andersen's switching level between the quadratic and exponential branches.
pub const PSI_C: f32 = 1.5;

/// `psi` is clamped below at `2^-100` so that `2 / psi` stays finite.
pub const PSI_MIN: f32 = f32::from_bits(0x0d80_0000);

/// Counter word 3 of the Heston streams (see the module docs).
pub const HESTON_STREAM: u32 = 2;

/// The per-step constants of the QE scheme, rounded to f32 once from f64 (see the module
/// docs for where each enters).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QeConsts {
    /// `theta`.
    pub theta: f32,
    /// `e^{-kappa dt}`.
    pub ekt: f32,
    /// `xi^2 e^{-kappa dt} (1 - e^{-kappa dt}) / kappa`.
    pub c1: f32,
    /// `theta xi^2 (1 - e^{-kappa dt})^2 / (2 kappa)`.
    pub c2: f32,
    /// `(r - q) dt`.
    pub rqdt: f32,
    /// `K0 = -rho kappa theta dt / xi`.
    pub k0: f32,
    /// `K1 = gamma1 dt (kappa rho / xi - 1/2) - rho / xi`.
    pub k1: f32,
    /// `K2 = gamma2 dt (kappa rho / xi - 1/2) + rho / xi`.
    pub k2: f32,
    /// `K3 = gamma1 dt (1 - rho^2)`.
    pub k3: f32,
    /// `K4 = gamma2 dt (1 - rho^2)`.
    pub k4: f32,
    /// `A = K2 + K4 / 2` (the martingale correction's exponent).
    pub a: f32,
    /// `K3 / 2`.
    pub half_k3: f32,
}

impl QeConsts {
    /// The constants for a step of `dt` years under `h`, rate `r` and dividend yield `q`.
    pub fn new(h: &super::HestonParams, r: f64, q: f64, dt: f64) -> Self {
        let (kappa, theta, xi, rho) = (h.kappa, h.theta, h.xi, h.rho);
        let (g1, g2) = (0.5, 0.5);
        let e = (-kappa * dt).exp();
        let ome = -(-kappa * dt).exp_m1(); // 1 - e, no cancellation
        let x2 = xi * xi;
        let k1 = g1 * dt * (kappa * rho / xi - 0.5) - rho / xi;
        let k2 = g2 * dt * (kappa * rho / xi - 0.5) + rho / xi;
        let k3 = g1 * dt * (1.0 - rho * rho);
        let k4 = g2 * dt * (1.0 - rho * rho);
        QeConsts {
            theta: theta as f32,
            ekt: e as f32,
            c1: (x2 * e * ome / kappa) as f32,
            c2: (theta * x2 * ome * ome / (2.0 * kappa)) as f32,
            rqdt: ((r - q) * dt) as f32,
            k0: (-rho * kappa * theta * dt / xi) as f32,
            k1: k1 as f32,
            k2: k2 as f32,
            k3: k3 as f32,
            k4: k4 as f32,
            a: (k2 + 0.5 * k4) as f32,
            half_k3: (0.5 * k3) as f32,
        }
    }
}

/// One QE step from `(v, x)` with the four Philox words `w` of the step: returns `(v', x')`.
/// Exactly the operations of the module docs, in that order (the CUDA kernel's
/// `heston_qe_step` mirrors it).
#[inline(always)]
pub fn qe_step(c: &QeConsts, v: f32, x: f32, w: [u32; 4]) -> (f32, f32) {
    let [zv, zx] = box_muller_f32(w[0], w[1]);
    let u = uniform_f32(w[2]);
    let m = (v - c.theta).mul_add(c.ekt, c.theta);
    let s2 = v.mul_add(c.c1, c.c2);
    let psi = (s2 / (m * m)).max(PSI_MIN);
    let (vn, corr) = if psi <= PSI_C {
        let t = 2.0 / psi;
        let tm1 = t - 1.0;
        let b2 = t.sqrt().mul_add(tm1.sqrt(), tm1);
        let a = m / (1.0 + b2);
        let b = b2.sqrt();
        let bz = b + zv;
        let vn = a * (bz * bz);
        let qq = (-2.0 * c.a).mul_add(a, 1.0);
        let corr = (qq > 0.0).then(|| 0.5 * ln_f32(qq) - ((c.a * b2) * a) / qq);
        (vn, corr)
    } else {
        let omp = 2.0 / (psi + 1.0);
        let p = 1.0 - omp;
        let beta = omp / m;
        let vn = if u <= p {
            0.0
        } else {
            ln_f32(omp / (1.0 - u)) / beta
        };
        let corr = (beta > c.a).then(|| -ln_f32(p + (beta * omp) / (beta - c.a)));
        (vn, corr)
    };
    let vn = vn.max(0.0);
    let (d0, d1) = match corr {
        Some(k) => (k, -c.half_k3),
        None => (c.k0, c.k1),
    };
    let mut dx = c.rqdt + d0;
    dx = d1.mul_add(v, dx);
    dx = c.k2.mul_add(vn, dx);
    let var = c.k3.mul_add(v, c.k4 * vn);
    dx = var.sqrt().mul_add(zx, dx);
    (vn, x + dx)
}

/// The Philox words of step `step` of sample `sample` of option `option`.
#[inline(always)]
pub fn heston_words(key: [u32; 2], option: u32, sample: u32, step: u32) -> [u32; 4] {
    philox::philox4x32_10([step, sample, option, HESTON_STREAM], key)
}

/// Everything one option's Heston paths need, derived once on the host (f64, the step
/// constants rounded to f32 once), shared by both engines.
///
/// Steps: a European option takes `mc.steps` QE steps. An arithmetic Asian takes
/// `per_fixing = ceil(mc.steps / fixings)` steps between consecutive fixings (so at least
/// `mc.steps` in all, and a whole number per fixing interval; one step a fixing if
/// `mc.steps <= fixings`); the mean is taken over `spot * exp_f32(x)` at the fixings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HestonPathParams {
    /// Call or put.
    pub kind: OptionType,
    /// Arithmetic Asian (else European).
    pub asian: bool,
    /// Fixings (1 for European: the maturity).
    pub fixings: u32,
    /// QE steps between fixings (all of them for European).
    pub per_fixing: u32,
    /// Step length in years.
    pub dt: f64,
    /// The step constants.
    pub qe: QeConsts,
    /// `v0` as f32, the variance at the start of every path.
    pub v0: f32,
    /// Spot.
    pub spot: f64,
    /// Strike.
    pub strike: f64,
    /// `exp(-rate * maturity)`.
    pub discount: f64,
    /// The control's mean, `spot e^{-q T}` (the control is the discounted `S_T`).
    pub control_mean: f64,
    /// The Philox key of the seed.
    pub key: [u32; 2],
    /// Independent samples (paths).
    pub samples: u64,
}

impl HestonPathParams {
    /// Validates the option and the run and derives the constants. Heston runs take Philox
    /// only, and no antithetic variates (both an error naming the field); `fast_math` does
    /// not apply (the paths are always exact); `control_variate` uses the discounted `S_T`
    /// (mean `spot e^{-qT}`, exact in the scheme where the martingale correction holds).
    pub fn new(spec: &HestonSpec, mc: &McParams) -> Result<Self> {
        spec.validate()?;
        mc.validate()?;
        if mc.rng != Rng::Philox {
            return Err(Error::invalid(
                "heston",
                format!("rng = {}; Heston paths take philox only", mc.rng.name()),
            ));
        }
        if mc.antithetic {
            return Err(Error::invalid(
                "heston",
                "antithetic = true; the Heston engine has no antithetic variates, use false",
            ));
        }
        let o = &spec.option;
        let asian = o.style == Style::AsianArithmetic;
        let (fixings, per_fixing) = match (asian, o.fixings) {
            (true, Some(n)) => (n, mc.steps.div_ceil(n)),
            _ => (1, mc.steps),
        };
        let steps = u64::from(fixings) * u64::from(per_fixing);
        if steps > u64::from(u32::MAX) {
            return Err(Error::invalid(
                "heston",
                format!("{fixings} fixings x {per_fixing} steps each: more than 2^32 steps"),
            ));
        }
        let dt = o.maturity / steps as f64;
        Ok(HestonPathParams {
            kind: o.option_type,
            asian,
            fixings,
            per_fixing,
            dt,
            qe: QeConsts::new(&spec.heston, o.rate, o.dividend, dt),
            v0: spec.heston.v0 as f32,
            spot: o.spot,
            strike: o.strike,
            discount: (-o.rate * o.maturity).exp(),
            control_mean: o.spot * (-o.dividend * o.maturity).exp(),
            key: philox::key_from_seed(mc.seed),
            samples: mc.samples(),
        })
    }

    /// QE steps a path.
    pub fn steps(&self) -> u32 {
        self.fixings * self.per_fixing
    }
}

/// One path of sample `sample` of option `option` (its stream index): the discounted payoff
/// `y` and the centred control `c = discount * S_T - control_mean`, f64 from the f32 path:
///
/// ```text
/// v = v0, x = 0, sum = 0 (f64), step = 0
/// for each fixing:  per_fixing times { (v, x) = qe_step(v, x, heston_words(.., step)); step += 1 }
///                   Asian: sum += exp_f32(x) as f64
/// S_T = spot * exp_f32(x)                              (f64 product)
/// y = discount * payoff(asian ? (spot * sum) / fixings : S_T)
/// c = discount * S_T - control_mean
/// ```
#[inline(always)]
pub fn heston_sample(pp: &HestonPathParams, option: u32, sample: u32) -> (f64, f64) {
    let (mut v, mut x) = (pp.v0, 0.0f32);
    let mut sum = 0.0f64;
    let mut step = 0u32;
    for _ in 0..pp.fixings {
        for _ in 0..pp.per_fixing {
            let w = heston_words(pp.key, option, sample, step);
            (v, x) = qe_step(&pp.qe, v, x, w);
            step += 1;
        }
        if pp.asian {
            sum += f64::from(exp_f32(x));
        }
    }
    let st = pp.spot * f64::from(exp_f32(x));
    let under = if pp.asian {
        pp.spot * sum / f64::from(pp.fixings)
    } else {
        st
    };
    let y = pp.discount * pp.kind.payoff(under, pp.strike);
    (y, pp.discount * st - pp.control_mean)
}

/// The price from every canonical block's sums of a Heston run (block order; any partition
/// into consecutive sums): kiln-core's [`finish`] on the option, without pathwise Greeks
/// (`delta` and `vega` are `None`). Both engines call it last.
pub fn finish_heston(option: &OptionSpec, mc: &McParams, blocks: &[BlockSums]) -> Result<PriceResult> {
    let mut r = finish(option, mc, blocks)?;
    r.delta = None;
    r.vega = None;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finance::heston::HestonParams;

    fn params() -> HestonParams {
        HestonParams {
            kappa: 1.5768,
            theta: 0.0398,
            xi: 0.5751,
            rho: -0.5711,
            v0: 0.0175,
        }
    }

    /// Over many one-step draws from the same (v, x), the scheme's V' has the exact
    /// conditional mean m, and e^{x'} the martingale mean e^{x + (r-q) dt}, in both branches.
    #[test]
    fn one_step_moments_match_in_both_branches() {
        let h = params();
        let key = philox::key_from_seed(7);
        for (v, dt) in [(0.0175f32, 1.0 / 16.0), (0.0005, 0.25), (0.2, 1.0 / 64.0)] {
            let c = QeConsts::new(&h, 0.03, 0.01, dt);
            let n = 400_000u32;
            let (mut sv, mut sv2, mut se, mut se2) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
            let mut quad = 0u32;
            for s in 0..n {
                let (vn, xn) = qe_step(&c, v, 0.0, heston_words(key, 0, s, 0));
                let (vn, e) = (f64::from(vn), f64::from(xn).exp());
                sv += vn;
                sv2 += vn * vn;
                se += e;
                se2 += e * e;
                let m = f64::from(c.theta) + (f64::from(v) - f64::from(c.theta)) * f64::from(c.ekt);
                let s2 = f64::from(v) * f64::from(c.c1) + f64::from(c.c2);
                if s2 / (m * m) <= 1.5 {
                    quad += 1;
                }
            }
            let nf = f64::from(n);
            let m = h.theta + (f64::from(v) - h.theta) * (-h.kappa * dt).exp();
            let (mv, mse) = (sv / nf, ((sv2 / nf - (sv / nf).powi(2)) / nf).sqrt());
            assert!(
                (mv - m).abs() < 4.0 * mse,
                "v {v} dt {dt}: E[V'] {mv} vs {m} (se {mse})"
            );
            let want = (0.02 * dt).exp();
            let (me, ese) = (se / nf, ((se2 / nf - (se / nf).powi(2)) / nf).sqrt());
            assert!(
                (me - want).abs() < 4.0 * ese + 2e-6,
                "v {v} dt {dt}: E[e^x'] {me} vs {want} (se {ese}); {quad} quadratic"
            );
        }
    }

    #[test]
    fn the_path_is_the_documented_loop() {
        let spec = HestonSpec {
            option: crate::finance::OptionSpec::european(OptionType::Call, 100.0, 95.0, 0.02, 0.0, 0.2, 1.0)
                .with_style(Style::AsianArithmetic, Some(3), None),
            heston: params(),
        };
        let mc = McParams {
            paths: 16,
            steps: 7, // 3 fixings x 3 steps
            ..McParams::default()
        };
        let pp = HestonPathParams::new(&spec, &mc).unwrap();
        assert_eq!((pp.fixings, pp.per_fixing, pp.steps()), (3, 3, 9));
        assert!((pp.dt - 1.0 / 9.0).abs() < 1e-15);
        let (mut v, mut x, mut sum) = (pp.v0, 0.0f32, 0.0f64);
        for j in 0..9u32 {
            (v, x) = qe_step(&pp.qe, v, x, philox::philox4x32_10([j, 5, 4, 2], pp.key));
            if j % 3 == 2 {
                sum += f64::from(exp_f32(x));
            }
        }
        let avg = 100.0 * sum / 3.0;
        let (y, c) = heston_sample(&pp, 4, 5);
        assert_eq!(y.to_bits(), (pp.discount * (avg - 95.0).max(0.0)).to_bits());
        let st = 100.0 * f64::from(exp_f32(x));
        assert_eq!(c.to_bits(), (pp.discount * st - pp.control_mean).to_bits());
        // Runs the engine cannot do are errors that say so.
        let anti = McParams {
            antithetic: true,
            ..mc
        };
        assert!(HestonPathParams::new(&spec, &anti)
            .unwrap_err()
            .to_string()
            .contains("antithetic"));
        let sobol = McParams {
            rng: Rng::Sobol { replicates: 4 },
            ..mc
        };
        assert!(HestonPathParams::new(&spec, &sobol)
            .unwrap_err()
            .to_string()
            .contains("philox"));
    }

    /// Extreme corners stay finite: variance at zero, rho = +-1, huge vol of vol, tiny steps.
    #[test]
    fn extreme_parameters_stay_finite() {
        let key = philox::key_from_seed(3);
        for (xi, rho, dt, v) in [
            (3.0, 1.0, 0.5, 0.0f32),
            (3.0, -1.0, 0.5, 0.0),
            (0.01, 0.0, 1e-6, 0.04),
            (2.0, 0.99, 1.0, 1.0),
            (1e-4, -0.9, 1.0 / 256.0, 0.0),
        ] {
            let h = HestonParams {
                kappa: 0.5,
                theta: 0.04,
                xi,
                rho,
                v0: f64::from(v),
            };
            let c = QeConsts::new(&h, 0.05, 0.0, dt);
            let (mut vv, mut x) = (v, 0.0f32);
            for j in 0..2000u32 {
                (vv, x) = qe_step(&c, vv, x, heston_words(key, 0, 0, j));
                assert!(
                    vv.is_finite() && vv >= 0.0 && x.is_finite(),
                    "xi {xi} rho {rho}: v {vv} x {x}"
                );
            }
        }
    }
}
