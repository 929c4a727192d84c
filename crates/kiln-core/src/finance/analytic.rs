//! Closed forms: Black-Scholes-Merton with a continuous dividend yield (price and Greeks in
//! QuantLib's units) and the discrete geometric-average Asian (Kemna-Vorst with discrete,
//! equally spaced fixings, the last at maturity).
//!
//! The normal CDF is `erfc(-x / sqrt 2) / 2` with `libm`'s `erfc`, accurate to a few ulp
//! over the whole line (no cancellation in the tails, unlike `1 - erf`).
//!
//! They live in kiln-core because both Monte Carlo engines need them bit for bit: the
//! control variates' known means ([`control_mean`](super::control_mean)) are these closed
//! forms.

use super::{OptionSpec, OptionType, PriceResult, Style};
use crate::error::{Error, Result};

/// The standard normal density.
#[inline]
pub fn norm_pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The standard normal CDF, relative error ~1e-15 including the tails.
#[inline]
pub fn norm_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// A Black-Scholes-Merton price with its Greeks (QuantLib's units: `vega` and `rho` per 1.0
/// of volatility and rate, `theta` per year of calendar time, negative for decay).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Bsm {
    /// The price.
    pub price: f64,
    /// dV/dS.
    pub delta: f64,
    /// d2V/dS2.
    pub gamma: f64,
    /// dV/dsigma.
    pub vega: f64,
    /// -dV/dT (the value's change as one year of calendar time passes).
    pub theta: f64,
    /// dV/dr.
    pub rho: f64,
}

/// Black-Scholes-Merton with continuous dividend yield `q`: spot `s`, strike `k`, rate `r`,
/// volatility `v`, maturity `t` in years. Inputs are assumed valid (see
/// [`OptionSpec::validate`]).
pub fn bsm(kind: OptionType, s: f64, k: f64, r: f64, q: f64, v: f64, t: f64) -> Bsm {
    let sqrt_t = t.sqrt();
    let vst = v * sqrt_t;
    let d1 = ((s / k).ln() + (r - q + 0.5 * v * v) * t) / vst;
    let d2 = d1 - vst;
    let dq = (-q * t).exp();
    let dr = (-r * t).exp();
    let pdf1 = norm_pdf(d1);
    let gamma = dq * pdf1 / (s * vst);
    let vega = s * dq * pdf1 * sqrt_t;
    let decay = -s * dq * pdf1 * v / (2.0 * sqrt_t);
    match kind {
        OptionType::Call => {
            let (n1, n2) = (norm_cdf(d1), norm_cdf(d2));
            Bsm {
                price: s * dq * n1 - k * dr * n2,
                delta: dq * n1,
                gamma,
                vega,
                theta: decay - r * k * dr * n2 + q * s * dq * n1,
                rho: k * t * dr * n2,
            }
        }
        OptionType::Put => {
            let (n1, n2) = (norm_cdf(-d1), norm_cdf(-d2));
            Bsm {
                price: k * dr * n2 - s * dq * n1,
                delta: -dq * n1,
                gamma,
                vega,
                theta: decay + r * k * dr * n2 - q * s * dq * n1,
                rho: -k * t * dr * n2,
            }
        }
    }
}

/// The sensitivity of [`bsm`]'s price to the cost of carry `b = r − q` at a fixed rate
/// (Haug's "carry rho", `dV/db = −dV/dq`, per 1.0 of carry): `T S e^{−qT} N(d1)` for a call,
/// `−T S e^{−qT} N(−d1)` for a put. [`Bsm::rho`] (`q` fixed, so `b` moves with `r`) is the
/// rate sensitivity at a fixed `b` plus this. Inputs as [`bsm`]'s.
pub fn bsm_carry_rho(kind: OptionType, s: f64, k: f64, r: f64, q: f64, v: f64, t: f64) -> f64 {
    let sqrt_t = t.sqrt();
    let d1 = ((s / k).ln() + (r - q + 0.5 * v * v) * t) / (v * sqrt_t);
    let fwd_t = t * s * (-q * t).exp();
    match kind {
        OptionType::Call => fwd_t * norm_cdf(d1),
        OptionType::Put => -fwd_t * norm_cdf(-d1),
    }
}

/// The lognormal moments of the discrete geometric average `G = (prod S(t_i))^(1/n)`,
/// `t_i = i T / n`: `ln G ~ N(mu, sigma_g^2)`.
fn geometric_moments(s: f64, r: f64, q: f64, v: f64, t: f64, n: u32) -> (f64, f64) {
    let n = f64::from(n);
    let mean_t = t * (n + 1.0) / (2.0 * n);
    let mu = s.ln() + (r - q - 0.5 * v * v) * mean_t;
    // Var = v^2 / n^2 * sum_ij min(t_i, t_j) = v^2 T (n+1)(2n+1) / (6 n^2).
    let var = v * v * t * (n + 1.0) * (2.0 * n + 1.0) / (6.0 * n * n);
    (mu, var.sqrt())
}

/// The discrete geometric-average Asian price (fixings `t_i = i T / n`, `i = 1..=n`): the
/// Black formula on the lognormal `G`, discounted from `T`. With `n = 1` it is the European
/// price.
#[allow(clippy::too_many_arguments)] // the formula's inputs, in the order of `bsm` plus `n`
pub fn geometric_asian(kind: OptionType, s: f64, k: f64, r: f64, q: f64, v: f64, t: f64, n: u32) -> f64 {
    let (mu, sg) = geometric_moments(s, r, q, v, t, n);
    let fwd = (mu + 0.5 * sg * sg).exp();
    let d1 = (mu - k.ln() + sg * sg) / sg;
    let d2 = d1 - sg;
    let dr = (-r * t).exp();
    match kind {
        OptionType::Call => dr * (fwd * norm_cdf(d1) - k * norm_cdf(d2)),
        OptionType::Put => dr * (k * norm_cdf(-d2) - fwd * norm_cdf(-d1)),
    }
}

/// Delta and gamma of [`geometric_asian`] in closed form (`G` scales with `S`).
#[allow(clippy::too_many_arguments)]
fn geometric_asian_delta_gamma(
    kind: OptionType,
    s: f64,
    k: f64,
    r: f64,
    q: f64,
    v: f64,
    t: f64,
    n: u32,
) -> (f64, f64) {
    let (mu, sg) = geometric_moments(s, r, q, v, t, n);
    let fwd = (mu + 0.5 * sg * sg).exp();
    let d1 = (mu - k.ln() + sg * sg) / sg;
    let dr = (-r * t).exp();
    let delta = match kind {
        OptionType::Call => dr * fwd / s * norm_cdf(d1),
        OptionType::Put => -dr * fwd / s * norm_cdf(-d1),
    };
    (delta, dr * fwd * norm_pdf(d1) / (s * s * sg))
}

/// The closed-form price of `spec`: European (all Greeks), geometric Asian (delta and
/// gamma closed form, vega and rho by central differences of the closed form, no theta:
/// the fixing schedule does not move with calendar time in this model) and the four
/// single-barrier styles with their rebate, continuously monitored (Reiner-Rubinstein,
/// [`super::barrier`]; Greeks by central differences, no theta) or, with `fixings`, at
/// discrete dates through Broadie-Glasserman-Kou's barrier shift
/// ([`super::barrier::bgk_shift`]: an approximation, good to a few 0.1% of the price
/// away from the barrier for daily-like monitoring, poorer with few dates or a spot near
/// the barrier). The arithmetic Asian is an
/// [`Error::InvalidArgument`] saying to use Monte Carlo.
pub fn price_analytic(spec: &OptionSpec) -> Result<PriceResult> {
    spec.validate()?;
    let OptionSpec {
        option_type: kind,
        spot: s,
        strike: k,
        rate: r,
        dividend: q,
        volatility: v,
        maturity: t,
        ..
    } = *spec;
    match spec.style {
        Style::European => {
            let b = bsm(kind, s, k, r, q, v, t);
            Ok(PriceResult {
                delta: Some(b.delta),
                gamma: Some(b.gamma),
                vega: Some(b.vega),
                theta: Some(b.theta),
                rho: Some(b.rho),
                ..PriceResult::exact(b.price)
            })
        }
        Style::AsianGeometric => {
            let n = spec.fixings.unwrap_or(1);
            let price = geometric_asian(kind, s, k, r, q, v, t, n);
            let (delta, gamma) = geometric_asian_delta_gamma(kind, s, k, r, q, v, t, n);
            let hv = 1e-5 * v;
            let vega = (geometric_asian(kind, s, k, r, q, v + hv, t, n)
                - geometric_asian(kind, s, k, r, q, v - hv, t, n))
                / (2.0 * hv);
            let hr = 1e-5;
            let rho = (geometric_asian(kind, s, k, r + hr, q, v, t, n)
                - geometric_asian(kind, s, k, r - hr, q, v, t, n))
                / (2.0 * hr);
            Ok(PriceResult {
                delta: Some(delta),
                gamma: Some(gamma),
                vega: Some(vega),
                rho: Some(rho),
                ..PriceResult::exact(price)
            })
        }
        Style::BarrierUpOut | Style::BarrierUpIn | Style::BarrierDownOut | Style::BarrierDownIn => {
            let h = spec.barrier.unwrap_or(f64::NAN);
            let up = matches!(spec.style, Style::BarrierUpOut | Style::BarrierUpIn);
            let p = |s: f64, v: f64, r: f64| {
                // discrete monitoring: the continuous formula at Broadie-Glasserman-Kou's
                // shifted barrier (it moves with v, so the Greeks see it too)
                let h = match spec.fixings {
                    Some(m) => super::barrier::bgk_shift(h, up, v, t / f64::from(m)),
                    None => h,
                };
                super::barrier::barrier_price(kind, spec.style, s, k, h, spec.rebate, r, q, v, t)
            };
            let price = p(s, v, r);
            // Greeks by central differences of the closed form (none where the spot sits
            // within the difference of the barrier: the price has a kink there).
            let hs = 1e-4 * s;
            let near = (s - h).abs() <= 2.0 * hs;
            let delta = (p(s + hs, v, r) - p(s - hs, v, r)) / (2.0 * hs);
            let gamma = (p(s + hs, v, r) - 2.0 * price + p(s - hs, v, r)) / (hs * hs);
            let hv = 1e-5;
            let vega = (p(s, v + hv, r) - p(s, v - hv, r)) / (2.0 * hv);
            let hr = 1e-5;
            let rho = (p(s, v, r + hr) - p(s, v, r - hr)) / (2.0 * hr);
            Ok(PriceResult {
                delta: (!near).then_some(delta),
                gamma: (!near).then_some(gamma),
                vega: Some(vega),
                rho: Some(rho),
                ..PriceResult::exact(price)
            })
        }
        other => Err(Error::invalid(
            "price_analytic",
            format!(
                "style {} has no closed form in kiln; price it with Monte Carlo (method mc)",
                other.name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use OptionType::{Call, Put};

    fn close(got: f64, want: f64, tol: f64, what: &str) {
        assert!(
            (got - want).abs() <= tol,
            "{what}: got {got}, want {want} (tol {tol})"
        );
    }

    #[test]
    fn hull_worked_example() {
        // Hull, "Options, Futures, and Other Derivatives", the Black-Scholes-Merton worked
        // example: S0 = 42, K = 40, r = 10%, sigma = 20%, T = 0.5 -> d1 = 0.7693,
        // d2 = 0.6278, c = 4.76, p = 0.81 (printed to the cent).
        let c = bsm(Call, 42.0, 40.0, 0.1, 0.0, 0.2, 0.5);
        let p = bsm(Put, 42.0, 40.0, 0.1, 0.0, 0.2, 0.5);
        close(c.price, 4.76, 0.005, "Hull call");
        close(p.price, 0.81, 0.005, "Hull put");
    }

    #[test]
    fn haug_values_and_greeks() {
        // E. G. Haug, "The Complete Guide to Option Pricing Formulas" (McGraw-Hill, 1998):
        // generalized BSM values pp. 2-8 and p. 27, Greeks pp. 11-16, printed to 4 decimals
        // (the same table QuantLib's europeanoption test uses).
        // (type, K, S, q, r, T, vol, value)
        let values = [
            (Call, 40.0, 42.0, 0.08, 0.04, 0.75, 0.35, 5.0975), // p. 27, BSM with dividend
            (Call, 100.0, 90.0, 0.10, 0.10, 0.10, 0.25, 0.3150),
            (Call, 100.0, 110.0, 0.10, 0.10, 0.50, 0.35, 15.3086),
            (Put, 100.0, 90.0, 0.10, 0.10, 0.10, 0.15, 9.9210),
            (Put, 100.0, 110.0, 0.10, 0.10, 0.50, 0.25, 3.2734),
            (Put, 100.0, 100.0, 0.10, 0.10, 0.50, 0.35, 9.3679),
        ];
        for (kind, k, s, q, r, t, v, want) in values {
            close(bsm(kind, s, k, r, q, v, t).price, want, 1e-4, "Haug value");
        }
        let g = |kind, k, s, q, r, t, v| bsm(kind, s, k, r, q, v, t);
        close(
            g(Call, 100.0, 105.0, 0.10, 0.10, 0.5, 0.36).delta,
            0.5946,
            1e-4,
            "delta call",
        );
        close(
            g(Put, 100.0, 105.0, 0.10, 0.10, 0.5, 0.36).delta,
            -0.3566,
            1e-4,
            "delta put",
        );
        close(
            g(Call, 60.0, 55.0, 0.0, 0.10, 0.75, 0.30).gamma,
            0.0278,
            1e-4,
            "gamma",
        );
        close(
            g(Put, 60.0, 55.0, 0.0, 0.10, 0.75, 0.30).gamma,
            0.0278,
            1e-4,
            "gamma put",
        );
        close(
            g(Call, 60.0, 55.0, 0.0, 0.10, 0.75, 0.30).vega,
            18.9358,
            1e-4,
            "vega",
        );
        close(
            g(Put, 60.0, 55.0, 0.0, 0.10, 0.75, 0.30).vega,
            18.9358,
            1e-4,
            "vega put",
        );
        let th = g(Put, 405.0, 430.0, 0.05, 0.07, 1.0 / 12.0, 0.20).theta;
        close(th, -31.1924, 1e-4, "theta per year");
        close(th / 365.0, -0.0855, 1e-4, "theta per day");
        close(
            g(Call, 75.0, 72.0, 0.0, 0.09, 1.0, 0.19).rho,
            38.7325,
            1e-4,
            "rho",
        );
    }

    #[test]
    fn carry_rho_is_minus_the_dividend_derivative_and_haug_s_example() {
        for kind in [Call, Put] {
            for &(s, k, r, q, v, t) in &[
                (100.0, 95.0, 0.05, 0.02, 0.25, 1.0),
                (42.0, 40.0, 0.10, 0.0, 0.2, 0.5),
                (80.0, 100.0, -0.01, 0.03, 0.6, 2.5),
            ] {
                let p = |q| bsm(kind, s, k, r, q, v, t).price;
                let fd = -(p(q + 1e-5) - p(q - 1e-5)) / 2e-5;
                let got = bsm_carry_rho(kind, s, k, r, q, v, t);
                close(got, fd, 1e-6 * (1.0 + got.abs()), "carry rho vs FD");
                // at a fixed carry the rate only discounts: dV/dr|b = -T V
                let fixed_b = |e: f64| bsm(kind, s, k, r + e, q + e, v, t).price;
                let rho_b = (fixed_b(1e-5) - fixed_b(-1e-5)) / 2e-5;
                let b = bsm(kind, s, k, r, q, v, t);
                close(b.rho, rho_b + got, 1e-6 * (1.0 + b.rho.abs()), "rho split");
                close(
                    rho_b,
                    -t * b.price,
                    1e-6 * (1.0 + b.price.abs()),
                    "rho at fixed b",
                );
            }
        }
        // Haug's carry-rho example (QuantLib's europeanoption.cpp "dividendRho" row, which
        // reports dV/dq = +42.2254): put, S = 500, X = 490, T = 0.25, r = 0.08, b = 0.03
        // (q = 0.05), sigma = 0.15; mpmath at 30 digits: -42.22536337
        close(
            bsm_carry_rho(Put, 500.0, 490.0, 0.08, 0.05, 0.15, 0.25),
            -42.2254,
            1e-4,
            "Haug carry rho",
        );
    }

    #[test]
    fn greeks_match_finite_differences_and_parity_holds() {
        for kind in [Call, Put] {
            for &(s, k, r, q, v, t) in &[
                (100.0, 95.0, 0.05, 0.02, 0.25, 1.0),
                (42.0, 40.0, 0.10, 0.0, 0.2, 0.5),
                (80.0, 100.0, -0.01, 0.03, 0.6, 2.5),
            ] {
                let b = bsm(kind, s, k, r, q, v, t);
                let p = |s, r, v, t| bsm(kind, s, k, r, q, v, t).price;
                let h = 1e-4 * s;
                let fd_delta = (p(s + h, r, v, t) - p(s - h, r, v, t)) / (2.0 * h);
                let fd_gamma = (p(s + h, r, v, t) - 2.0 * b.price + p(s - h, r, v, t)) / (h * h);
                let fd_vega = (p(s, r, v + 1e-5, t) - p(s, r, v - 1e-5, t)) / 2e-5;
                let fd_rho = (p(s, r + 1e-5, v, t) - p(s, r - 1e-5, v, t)) / 2e-5;
                let fd_theta = -(p(s, r, v, t + 1e-5) - p(s, r, v, t - 1e-5)) / 2e-5;
                close(b.delta, fd_delta, 1e-7, "delta vs FD");
                close(b.gamma, fd_gamma, 1e-5, "gamma vs FD");
                close(b.vega, fd_vega, 1e-6 * (1.0 + b.vega.abs()), "vega vs FD");
                close(b.rho, fd_rho, 1e-6 * (1.0 + b.rho.abs()), "rho vs FD");
                close(b.theta, fd_theta, 1e-6 * (1.0 + b.theta.abs()), "theta vs FD");
                if kind == Call {
                    let put = bsm(Put, s, k, r, q, v, t).price;
                    let parity = s * (-q * t).exp() - k * (-r * t).exp();
                    close(b.price - put, parity, 1e-12 * s, "put-call parity");
                }
            }
        }
    }

    #[test]
    fn normal_cdf_accuracy() {
        close(norm_cdf(0.0), 0.5, 1e-16, "N(0)");
        // Reference values of Phi (Abramowitz & Stegun Table 26.1 / high-precision tables).
        close(norm_cdf(1.0), 0.841_344_746_068_542_9, 1e-15, "N(1)");
        close(norm_cdf(-1.96), 0.024_997_895_148_220_43, 1e-16, "N(-1.96)");
        let tail = norm_cdf(-10.0);
        assert!(
            (tail / 7.619_853_024_160_527e-24 - 1.0).abs() < 1e-13,
            "N(-10) = {tail}"
        );
    }

    #[test]
    fn geometric_asian_limits() {
        // One fixing at maturity: the average is S_T, the price the European one.
        for kind in [Call, Put] {
            let a = geometric_asian(kind, 100.0, 105.0, 0.05, 0.02, 0.3, 1.5, 1);
            close(
                a,
                bsm(kind, 100.0, 105.0, 0.05, 0.02, 0.3, 1.5).price,
                1e-12,
                "n = 1",
            );
        }
        // Clewlow & Strickland, "Implementing Derivatives Models" (Wiley, 1998), pp. 118-123
        // (the value QuantLib's discrete geometric Asian test uses): call, S = K = 100,
        // q = 3%, r = 6%, sigma = 20%, T = 1, 10 fixings at 0.1, 0.2, ..., 1.0 -> 5.3425606635.
        let cs = geometric_asian(Call, 100.0, 100.0, 0.06, 0.03, 0.2, 1.0, 10);
        close(cs, 5.342_560_663_5, 1e-9, "Clewlow-Strickland discrete geometric");
        // Many fixings tend to Kemna-Vorst's continuous average. Haug (1998) pp. 96-97: put,
        // S = 80, K = 85, T = 0.25, r = 5%, q = -3% (b = 8%), sigma = 20% -> 4.6922, with
        // the continuous form sigma_A = sigma/sqrt 3, b_A = (b - sigma^2/6)/2.
        let (s, k, r, q, v, t) = (80.0, 85.0, 0.05, -0.03, 0.2, 0.25);
        let va = v / 3f64.sqrt();
        let ba = 0.5 * (r - q - v * v / 6.0);
        let cont = bsm(Put, s, k, r, r - ba, va, t).price;
        close(cont, 4.6922, 1e-4, "Kemna-Vorst continuous (Haug)");
        let many = geometric_asian(Put, s, k, r, q, v, t, 100_000);
        close(many, cont, 1e-4, "discrete -> continuous");
        // Greeks of the closed form against differences.
        let spec = OptionSpec::european(Put, 100.0, 95.0, 0.03, 0.01, 0.25, 1.0).with_style(
            Style::AsianGeometric,
            Some(12),
            None,
        );
        let res = price_analytic(&spec).unwrap();
        let p = |s: f64| geometric_asian(Put, s, 95.0, 0.03, 0.01, 0.25, 1.0, 12);
        let h = 1e-3;
        close(
            res.delta.unwrap(),
            (p(100.0 + h) - p(100.0 - h)) / (2.0 * h),
            1e-7,
            "asian delta",
        );
        let fd_gamma = (p(100.0 + h) - 2.0 * p(100.0) + p(100.0 - h)) / (h * h);
        close(res.gamma.unwrap(), fd_gamma, 1e-4, "asian gamma");
        assert!(res.vega.unwrap() > 0.0 && res.rho.unwrap() < 0.0 && res.theta.is_none());
    }

    #[test]
    fn analytic_dispatch() {
        let spec = OptionSpec::european(Call, 42.0, 40.0, 0.1, 0.0, 0.2, 0.5);
        let r = price_analytic(&spec).unwrap();
        assert_eq!((r.std_error, r.paths_used), (0.0, 0));
        assert!(r.theta.unwrap() < 0.0);
        let arith = spec.with_style(Style::AsianArithmetic, Some(12), None);
        let err = price_analytic(&arith).unwrap_err().to_string();
        assert!(
            err.contains("asian_arithmetic") && err.contains("Monte Carlo"),
            "{err}"
        );
        // barriers have closed forms; far away, the up-and-out is the vanilla
        let far = spec.with_style(Style::BarrierUpOut, None, Some(1e6));
        let p = price_analytic(&far).unwrap();
        assert!((p.price - r.price).abs() < 1e-9, "{} vs {}", p.price, r.price);
        assert!((p.delta.unwrap() - r.delta.unwrap()).abs() < 1e-5);
        let mut bad = spec;
        bad.volatility = -0.1;
        assert!(price_analytic(&bad).is_err());
    }
}
