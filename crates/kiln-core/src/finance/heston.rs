//! The Heston stochastic-volatility model: its parameters ([`HestonParams`]), an option under
//! it ([`HestonSpec`]), the semi-analytic European price ([`heston_price`]) and the Monte
//! Carlo path step both engines share ([`qe`]: Andersen's QE scheme in portable f32).
//!
//! ```text
//! dS = (r - q) S dt + sqrt(v) S dW1
//! dv = kappa (theta - v) dt + xi sqrt(v) dW2,      d<W1, W2> = rho dt,   v(0) = v0
//! ```
//!
//! # The closed form
//!
//! Lewis's single-integral formula (A. Lewis, "Option Valuation under Stochastic
//! Volatility", 2000; Gatheral, "The Volatility Surface", eq. 2.10) with `x = ln(F / K)`,
//! `F = S e^{(r-q)T}`:
//!
//! ```text
//! C = S e^{-qT} - sqrt(S K) e^{-(r+q)T/2} / pi * int_0^inf Re[e^{iux} phi(u - i/2)] / (u^2 + 1/4) du
//! ```
//!
//! where `phi` is the characteristic function of `ln(S_T / F)`, written in the form of
//! Albrecher, Mayer, Schoutens and Tistaert ("The little Heston trap", 2007), which has no
//! branch-cut discontinuity of the complex logarithm (`g = (b - d) / (b + d)`, the factor
//! `e^{-dT}`). Three rewrites keep it accurate as `xi -> 0` (they change no value):
//! `b - d = -xi^2 w / (b + d)`, `1 - e^{-dT} = -expm1(-dT)` and
//! `ln((1 - g e^{-dT}) / (1 - g)) = ln1p(g (1 - e^{-dT}) / (1 - g))`. Puts come from
//! put-call parity.
//!
//! The integral is taken once, here, by adaptive Gauss-Kronrod (7-15 points) on `[0, 1)`
//! after `u = t / (1 - t)`. Why not Gauss-Laguerre: how fast the integrand decays depends on
//! the parameters (fast for long maturities and large variances, like `exp(-c sqrt(u))` at
//! `|rho| = 1`, slowly for short maturities with small variance), and a fixed rule is either
//! wasteful or silently wrong at one end. Mapped to `[0, 1)` the integrand is bounded (the
//! `1 / (u^2 + 1/4)` factor eats the `(1 + u)^2` of the map and `|phi| <= 1`), and the
//! adaptive rule spends nodes where the integrand bends, with an error estimate (Kronrod minus
//! Gauss) it can report. Absolute tolerance `1e-12` on the integral, which is below `1e-10`
//! on the price for spots and strikes near 100 (relative `1e-8` or better on normal
//! parameters; the tests check Fang and Oosterlee's 10-digit reference).

pub mod qe;

use crate::error::{Error, Result};
use crate::finance::{OptionSpec, OptionType, Style};

pub use qe::{
    finish_heston, heston_sample, heston_words, qe_step, HestonPathParams, QeConsts, HESTON_STREAM, PSI_C,
};

/// Parameters of the variance process.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HestonParams {
    /// Mean-reversion speed per year, `> 0`.
    pub kappa: f64,
    /// Long-run variance, `> 0` (e.g. 0.04 for 20% volatility).
    pub theta: f64,
    /// Volatility of variance ("vol of vol"), `> 0`.
    pub xi: f64,
    /// Correlation of the price and variance shocks, in `[-1, 1]`.
    pub rho: f64,
    /// Variance now, `>= 0`.
    pub v0: f64,
}

impl HestonParams {
    /// Checks every field; the error names the field and what is accepted. The Feller
    /// condition is not required (see [`feller`](Self::feller)): the QE scheme and the closed
    /// form handle a variance that touches zero.
    pub fn validate(&self) -> Result<()> {
        const OP: &str = "heston";
        let bad = |reason: String| Err(Error::invalid(OP, reason));
        let fields = [
            ("kappa", self.kappa),
            ("theta", self.theta),
            ("xi", self.xi),
            ("rho", self.rho),
            ("v0", self.v0),
        ];
        for (name, v) in fields {
            if !v.is_finite() {
                return bad(format!("{name} is {v}; it must be a finite number"));
            }
        }
        if self.kappa <= 0.0 {
            return bad(format!(
                "kappa = {}; it must be > 0 (the mean-reversion speed per year)",
                self.kappa
            ));
        }
        if self.theta <= 0.0 {
            return bad(format!(
                "theta = {}; it must be > 0 (the long-run variance, e.g. 0.04 for 20% volatility)",
                self.theta
            ));
        }
        if self.xi <= 0.0 {
            return bad(format!(
                "xi = {}; it must be > 0 (the volatility of variance; use Black-Scholes for 0)",
                self.xi
            ));
        }
        if !(-1.0..=1.0).contains(&self.rho) {
            return bad(format!("rho = {}; it must be in [-1, 1]", self.rho));
        }
        if self.v0 < 0.0 {
            return bad(format!(
                "v0 = {}; it must be >= 0 (the variance now, e.g. 0.04 for 20% volatility)",
                self.v0
            ));
        }
        Ok(())
    }

    /// Whether the Feller condition `2 kappa theta >= xi^2` holds (then the variance never
    /// reaches zero). Reported only: kiln prices either way.
    pub fn feller(&self) -> bool {
        2.0 * self.kappa * self.theta >= self.xi * self.xi
    }

    /// The average variance over `[0, t]` of the deterministic limit (`xi -> 0`):
    /// `theta + (v0 - theta) (1 - e^{-kappa t}) / (kappa t)`.
    pub fn mean_variance(&self, t: f64) -> f64 {
        let kt = self.kappa * t;
        self.theta + (self.v0 - self.theta) * (-(-kt).exp_m1()) / kt
    }
}

/// An option under Heston dynamics.
///
/// `option.style` is [`Style::European`] or [`Style::AsianArithmetic`] (fixings as
/// [`OptionSpec`] documents them: equally spaced, the last at maturity). `option.volatility`
/// is ignored (the variance is `heston`'s) but must still pass [`OptionSpec::validate`]
/// (`> 0`; any positive placeholder such as `sqrt(v0)` will do).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HestonSpec {
    /// The contract: type, style, spot, strike, rate, dividend, maturity, fixings.
    pub option: OptionSpec,
    /// The variance process.
    pub heston: HestonParams,
}

impl HestonSpec {
    /// Checks the option, the style and the parameters.
    pub fn validate(&self) -> Result<()> {
        self.option.validate()?;
        match self.option.style {
            Style::European | Style::AsianArithmetic => {}
            s => {
                return Err(Error::invalid(
                    "heston",
                    format!(
                        "style {} is not priced under Heston; use european or asian_arithmetic",
                        s.name()
                    ),
                ))
            }
        }
        self.heston.validate()
    }

    /// The semi-analytic price (European only; an arithmetic Asian has no closed form).
    pub fn price_analytic(&self) -> Result<f64> {
        self.validate()?;
        if self.option.style != Style::European {
            return Err(Error::invalid(
                "heston",
                format!(
                    "style {} has no closed form under Heston; price it by Monte Carlo",
                    self.option.style.name()
                ),
            ));
        }
        let o = &self.option;
        heston_price(
            o.option_type,
            o.spot,
            o.strike,
            o.rate,
            o.dividend,
            o.maturity,
            &self.heston,
        )
    }
}

// ---- a minimal complex type (kiln-core takes no complex-number dependency for one formula) ----

#[derive(Clone, Copy, Debug, PartialEq)]
struct Cx {
    re: f64,
    im: f64,
}

const fn cx(re: f64, im: f64) -> Cx {
    Cx { re, im }
}

impl std::ops::Add for Cx {
    type Output = Cx;
    fn add(self, o: Cx) -> Cx {
        cx(self.re + o.re, self.im + o.im)
    }
}

impl std::ops::Sub for Cx {
    type Output = Cx;
    fn sub(self, o: Cx) -> Cx {
        cx(self.re - o.re, self.im - o.im)
    }
}

impl std::ops::Mul for Cx {
    type Output = Cx;
    fn mul(self, o: Cx) -> Cx {
        cx(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)
    }
}

impl std::ops::Div for Cx {
    type Output = Cx;
    /// Smith's algorithm (no overflow in `|o|^2`).
    fn div(self, o: Cx) -> Cx {
        if o.re.abs() >= o.im.abs() {
            let r = o.im / o.re;
            let den = o.re + o.im * r;
            cx((self.re + self.im * r) / den, (self.im - self.re * r) / den)
        } else {
            let r = o.re / o.im;
            let den = o.re * r + o.im;
            cx((self.re * r + self.im) / den, (self.im * r - self.re) / den)
        }
    }
}

impl Cx {
    fn scale(self, s: f64) -> Cx {
        cx(self.re * s, self.im * s)
    }

    fn exp(self) -> Cx {
        let e = self.re.exp();
        let (s, c) = self.im.sin_cos();
        cx(e * c, e * s)
    }

    /// `e^z - 1` without cancellation for small `z`.
    fn expm1(self) -> Cx {
        let (s, c) = self.im.sin_cos();
        let em1 = self.re.exp_m1();
        let half = (0.5 * self.im).sin();
        // e^x cos y - 1 = expm1(x) cos y - 2 sin^2(y / 2)
        cx(em1 * c - 2.0 * half * half, (em1 + 1.0) * s)
    }

    /// `ln(1 + z)` (principal branch) without cancellation for small `z`.
    fn ln1p(self) -> Cx {
        // |1 + z|^2 = 1 + (2 re + |z|^2)
        let t = 2.0 * self.re + self.re * self.re + self.im * self.im;
        cx(0.5 * t.ln_1p(), self.im.atan2(1.0 + self.re))
    }

    /// The principal square root (`re >= 0`).
    fn sqrt(self) -> Cx {
        let r = self.re.hypot(self.im);
        if r == 0.0 {
            return cx(0.0, 0.0);
        }
        if self.re >= 0.0 {
            let t = (0.5 * (r + self.re)).sqrt();
            cx(t, self.im / (2.0 * t))
        } else {
            let t = (0.5 * (r - self.re)).sqrt();
            cx(self.im.abs() / (2.0 * t), t.copysign(self.im))
        }
    }
}

/// The characteristic function `E[exp(i z ln(S_T / F))]` of Heston's log-price (complex `z`),
/// in the "little Heston trap" form with the cancellation-free rewrites of the module docs.
fn char_fn(z: Cx, t: f64, h: &HestonParams) -> Cx {
    let (kappa, theta, xi, rho, v0) = (h.kappa, h.theta, h.xi, h.rho, h.v0);
    let iz = cx(-z.im, z.re);
    let w = iz + z * z; // i z + z^2
    let b = cx(kappa, 0.0) - iz.scale(rho * xi); // kappa - rho xi i z
    let d = (b * b + w.scale(xi * xi)).sqrt();
    let bpd = b + d;
    let bmd_xi2 = cx(0.0, 0.0) - w / bpd; // (b - d) / xi^2
    let g = bmd_xi2.scale(xi * xi) / bpd; // (b - d) / (b + d)
    let one_m_e = cx(0.0, 0.0) - (d.scale(-t)).expm1(); // 1 - e^{-dT}
    let one = cx(1.0, 0.0);
    let e = one - one_m_e;
    let log_term = (g * one_m_e / (one - g)).ln1p(); // ln((1 - g e^{-dT}) / (1 - g))
    let c = (bmd_xi2.scale(t) - log_term.scale(2.0 / (xi * xi))).scale(kappa * theta);
    let dd = bmd_xi2 * one_m_e / (one - g * e);
    (c + dd.scale(v0)).exp()
}

// Gauss-Kronrod 7-15 (QUADPACK's qk15): Kronrod nodes (the odd ones are Gauss's), weights.
// The digits are QUADPACK's, as published.
#[allow(clippy::excessive_precision)]
const XGK: [f64; 8] = [
    0.991_455_371_120_812_639_206_854_697_526_329,
    0.949_107_912_342_758_524_526_189_684_047_851,
    0.864_864_423_359_769_072_789_712_788_640_926,
    0.741_531_185_599_394_439_863_864_773_280_788,
    0.586_087_235_467_691_130_294_144_845_693_013,
    0.405_845_151_377_397_166_906_606_412_076_961,
    0.207_784_955_007_898_467_600_689_403_773_245,
    0.0,
];
#[allow(clippy::excessive_precision)]
const WGK: [f64; 8] = [
    0.022_935_322_010_529_224_963_732_008_058_970,
    0.063_092_092_629_978_553_290_700_663_189_204,
    0.104_790_010_322_250_183_839_876_322_541_518,
    0.140_653_259_715_525_918_745_189_590_510_238,
    0.169_004_726_639_267_902_826_583_426_598_550,
    0.190_350_578_064_785_409_913_256_402_421_014,
    0.204_432_940_075_298_892_414_161_999_234_649,
    0.209_482_141_084_727_828_012_999_174_891_714,
];
#[allow(clippy::excessive_precision)]
const WG: [f64; 4] = [
    0.129_484_966_168_869_693_270_611_432_679_082,
    0.279_705_391_489_276_667_901_467_771_423_780,
    0.381_830_050_505_118_944_950_369_775_488_975,
    0.417_959_183_673_469_387_755_102_040_816_327,
];

/// One Gauss-Kronrod 7-15 panel on `[a, b]`: (Kronrod estimate, |Kronrod - Gauss|).
fn gk15(f: &impl Fn(f64) -> f64, a: f64, b: f64) -> (f64, f64) {
    let (c, h) = (0.5 * (a + b), 0.5 * (b - a));
    let fc = f(c);
    let (mut k, mut g) = (WGK[7] * fc, WG[3] * fc);
    for j in 0..7 {
        let (f1, f2) = (f(c - h * XGK[j]), f(c + h * XGK[j]));
        k += WGK[j] * (f1 + f2);
        if j % 2 == 1 {
            g += WG[j / 2] * (f1 + f2);
        }
    }
    (k * h, ((k - g) * h).abs())
}

/// Adaptive Gauss-Kronrod on `[a, b]` to absolute error `tol`: panels whose error estimate
/// exceeds their share of `tol` are halved, at most `max_panels` panels in all.
fn integrate(f: &impl Fn(f64) -> f64, a: f64, b: f64, tol: f64, max_panels: usize) -> Result<f64> {
    let mut stack = vec![(a, b)];
    let (mut total, mut err, mut panels) = (0.0, 0.0, 0usize);
    while let Some((lo, hi)) = stack.pop() {
        let (v, e) = gk15(f, lo, hi);
        panels += 1;
        let share = tol * (hi - lo) / (b - a);
        if e <= share || hi - lo < 1e-12 * (b - a) || panels + stack.len() >= max_panels {
            total += v;
            err += e;
        } else {
            let mid = 0.5 * (lo + hi);
            stack.push((mid, hi));
            stack.push((lo, mid));
        }
    }
    if !total.is_finite() || err > 1e3 * tol {
        return Err(Error::invalid(
            "heston",
            format!(
                "the pricing integral did not converge (estimate {total}, error {err:.3e} after {panels} panels)"
            ),
        ));
    }
    Ok(total)
}

/// The semi-analytic Heston price of a European option (Lewis's formula with the "little
/// Heston trap" characteristic function; see the module docs): spot `s`, strike `k`, rate
/// `r`, dividend yield `q`, maturity `t` in years. Puts by put-call parity. The error names
/// the bad input, or says the integral did not converge.
pub fn heston_price(
    kind: OptionType,
    s: f64,
    k: f64,
    r: f64,
    q: f64,
    t: f64,
    h: &HestonParams,
) -> Result<f64> {
    h.validate()?;
    for (name, v) in [("spot", s), ("strike", k), ("maturity", t)] {
        if !v.is_finite() || v <= 0.0 {
            return Err(Error::invalid(
                "heston",
                format!("{name} = {v}; it must be a finite number > 0"),
            ));
        }
    }
    for (name, v) in [("rate", r), ("dividend", q)] {
        if !v.is_finite() {
            return Err(Error::invalid(
                "heston",
                format!("{name} is {v}; it must be a finite number"),
            ));
        }
    }
    let x = (s / k).ln() + (r - q) * t;
    let integrand = |tt: f64| {
        if tt >= 1.0 {
            return 0.0;
        }
        let u = tt / (1.0 - tt);
        let jac = 1.0 / ((1.0 - tt) * (1.0 - tt));
        let phi = char_fn(cx(u, -0.5), t, h);
        let (sn, cs) = (u * x).sin_cos();
        // Re[e^{iux} phi]
        let re = cs * phi.re - sn * phi.im;
        re / (u * u + 0.25) * jac
    };
    let integral = integrate(&integrand, 0.0, 1.0, 1e-12, 20_000)?;
    let fwd_s = s * (-q * t).exp();
    let fwd_k = k * (-r * t).exp();
    let call = fwd_s - (s * k).sqrt() * (-(r + q) * t / 2.0).exp() / std::f64::consts::PI * integral;
    let price = match kind {
        OptionType::Call => call,
        OptionType::Put => call - fwd_s + fwd_k,
    };
    Ok(price.max(0.0))
}

#[cfg(test)]
mod tests;
