//! Closed forms for a European option on the spread of two lognormal assets,
//! `X1(T) - X2(T)` against a strike `K` (any sign): Kirk's approximation ([`kirk`]),
//! Bjerksund and Stensland's lower bound ([`bjerksund_stensland`]) and, for `K = 0`,
//! Margrabe's exact exchange option ([`margrabe`]), which both reproduce.
//!
//! Inputs are the legs' forwards and total volatilities ([`TwoAssets`]): `F_i = E[X_i(T)]`,
//! `v_i = sigma_i sqrt(T)`, the correlation `rho` and the discount factor `df`. A basket
//! with weights `(w1 > 0, w2 < 0)` has `X1 = w1 S1`, `X2 = |w2| S2`, `F_i = |w_i| S_i
//! e^((r - q_i) T)` (kiln-core's `basket` does that mapping).
//!
//! # Kirk (1995)
//!
//! `X2 + K` is treated as lognormal with volatility `v2 F2 / (F2 + K)`:
//! `call = df (F1 N(d1) - (F2 + K) N(d2))`, `d1 = (ln(F1 / (F2 + K)) + v^2 / 2) / v`,
//! `d2 = d1 - v`, `v^2 = v1^2 - 2 rho v1 v2 b + v2^2 b^2`, `b = F2 / (F2 + K)`.
//!
//! # Bjerksund and Stensland (2014)
//!
//! P. Bjerksund and G. Stensland, "Closed form spread option valuation", Quantitative
//! Finance 14(10) (2014) 1785-1794. Kirk's formula implicitly exercises when `X1` exceeds a
//! power of `X2`; Bjerksund and Stensland price exactly the option that follows such a
//! rule, exercising iff `ln X1 - b ln X2 > c` with `a = F2 + K`, `b = F2 / a` and
//! `c = ln a - b ln F2 + b (1 - b) v2^2 / 2`. It is a feasible (not optimal) exercise
//! rule, so the value is a lower bound, and in practice a close one:
//!
//! ```text
//! call = df (F1 N(d1) - F2 N(d2) - K N(d3)),   v^2 = v1^2 - 2 rho b v1 v2 + b^2 v2^2
//! d1 = (ln(F1 / a) + v1^2 / 2 - rho b v1 v2 + b^2 v2^2 / 2) / v
//! d2 = (ln(F1 / a) - v1^2 / 2 + rho v1 v2 + b^2 v2^2 / 2 - b v2^2) / v
//! d3 = (ln(F1 / a) - v1^2 / 2 + b^2 v2^2 / 2) / v
//! ```
//!
//! Because it is the exact value of a payoff, `df (X1 - X2 - K) 1{ln X1 - b ln X2 > c}`,
//! it is also the known mean of a Monte Carlo control variate ([`SpreadControl`]).
//!
//! # Strikes and puts
//!
//! Both formulas need `F2 + K > 0`; a negative strike is priced by exchanging the legs:
//! a call on `X1 - X2 - K` with `K < 0` pays what a put on `X2 - X1` with strike `-K > 0`
//! pays. Puts follow by parity, `put = call - df (F1 - F2 - K)`, which holds exactly for
//! Bjerksund-Stensland's rule (the put exercises on the complement). With `K = 0`, `b = 1`
//! and both formulas are Margrabe's: `df (F1 N(d1) - F2 N(d1 - v))`,
//! `d1 = (ln(F1 / F2) + v^2 / 2) / v`, `v^2 = v1^2 - 2 rho v1 v2 + v2^2`.

use super::{norm_cdf, OptionType};

/// Two lognormal legs at maturity (module docs): forwards, total volatilities,
/// correlation and the discount factor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TwoAssets {
    /// `F1 = E[X1(T)]`, `> 0`.
    pub f1: f64,
    /// `F2 = E[X2(T)]`, `> 0`.
    pub f2: f64,
    /// `sigma1 sqrt(T)`, `>= 0`.
    pub v1: f64,
    /// `sigma2 sqrt(T)`, `>= 0`.
    pub v2: f64,
    /// Correlation of the legs' log returns, in `[-1, 1]`.
    pub rho: f64,
    /// `exp(-r T)`.
    pub df: f64,
}

impl TwoAssets {
    /// The legs exchanged.
    fn swapped(&self) -> TwoAssets {
        TwoAssets {
            f1: self.f2,
            f2: self.f1,
            v1: self.v2,
            v2: self.v1,
            ..*self
        }
    }
}

/// `N(num / den)` with `den >= 0`; `den = 0` is the limit, a step at `num = 0` (a
/// deterministic event).
fn cdf_ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        norm_cdf(num / den)
    } else if num > 0.0 {
        1.0
    } else {
        0.0
    }
}

/// Kirk's call for `K >= 0` (so `F2 + K > 0`).
fn kirk_call(a: &TwoAssets, k: f64) -> f64 {
    let fk = a.f2 + k;
    let b = a.f2 / fk;
    let v = (a.v1 * a.v1 - 2.0 * a.rho * a.v1 * a.v2 * b + a.v2 * a.v2 * b * b)
        .max(0.0)
        .sqrt();
    let m = (a.f1 / fk).ln();
    a.df * (a.f1 * cdf_ratio(m + 0.5 * v * v, v) - fk * cdf_ratio(m - 0.5 * v * v, v))
}

/// The exercise rule of Bjerksund-Stensland's call for `K >= 0`: `(b, c, v)` with
/// exercise iff `ln X1 - b ln X2 > c` (module docs) and `v` the deviation of
/// `ln X1 - b ln X2`.
fn bs_rule(a: &TwoAssets, k: f64) -> (f64, f64, f64) {
    let fa = a.f2 + k;
    let b = a.f2 / fa;
    let (s1, s2) = (a.v1 * a.v1, a.v2 * a.v2);
    let v = (s1 - 2.0 * a.rho * b * a.v1 * a.v2 + b * b * s2).max(0.0).sqrt();
    let c = fa.ln() - b * a.f2.ln() + 0.5 * b * (1.0 - b) * s2;
    (b, c, v)
}

/// Bjerksund-Stensland's call for `K >= 0`, not clamped at 0 (the exact value of its
/// exercise rule's payoff).
fn bs_call(a: &TwoAssets, k: f64) -> f64 {
    let fa = a.f2 + k;
    let (b, _, v) = bs_rule(a, k);
    let (s1, s2, x) = (a.v1 * a.v1, a.v2 * a.v2, a.rho * a.v1 * a.v2);
    let m = (a.f1 / fa).ln();
    let d1 = cdf_ratio(m + 0.5 * s1 - b * x + 0.5 * b * b * s2, v);
    let d2 = cdf_ratio(m - 0.5 * s1 + x + 0.5 * b * b * s2 - b * s2, v);
    let d3 = cdf_ratio(m - 0.5 * s1 + 0.5 * b * b * s2, v);
    a.df * (a.f1 * d1 - a.f2 * d2 - k * d3)
}

/// A call or put from a call formula valid for `K >= 0`: negative strikes by exchanging
/// the legs, puts by parity (module docs).
fn by_parity(kind: OptionType, a: &TwoAssets, k: f64, call: fn(&TwoAssets, f64) -> f64) -> f64 {
    let c = if k >= 0.0 {
        call(a, k)
    } else {
        // C(X1, X2, K) = P(X2, X1, -K) = C(X2, X1, -K) - df (F2 - F1 + K)
        call(&a.swapped(), -k) - a.df * (a.f2 - a.f1 + k)
    };
    match kind {
        OptionType::Call => c,
        OptionType::Put => c - a.df * (a.f1 - a.f2 - k),
    }
}

/// Kirk's approximation of a call or put on `X1 - X2` with strike `k` (module docs);
/// never below 0.
pub fn kirk(kind: OptionType, a: &TwoAssets, k: f64) -> f64 {
    by_parity(kind, a, k, kirk_call).max(0.0)
}

/// Bjerksund and Stensland's (2014) closed form for a call or put on `X1 - X2` with
/// strike `k` (module docs); never below 0.
pub fn bjerksund_stensland(kind: OptionType, a: &TwoAssets, k: f64) -> f64 {
    bjerksund_stensland_raw(kind, a, k).max(0.0)
}

/// [`bjerksund_stensland`] not clamped at 0: the exact mean of [`SpreadControl`]'s payoff.
pub fn bjerksund_stensland_raw(kind: OptionType, a: &TwoAssets, k: f64) -> f64 {
    by_parity(kind, a, k, bs_call)
}

/// Margrabe's (1978) exchange option, `df E[max(X1 - X2, 0)]`, exact.
pub fn margrabe(a: &TwoAssets) -> f64 {
    let v = (a.v1 * a.v1 - 2.0 * a.rho * a.v1 * a.v2 + a.v2 * a.v2)
        .max(0.0)
        .sqrt();
    let m = (a.f1 / a.f2).ln();
    a.df * (a.f1 * cdf_ratio(m + 0.5 * v * v, v) - a.f2 * cdf_ratio(m - 0.5 * v * v, v))
}

/// Bjerksund-Stensland's exercise rule as a Monte Carlo control variate: the payoff
/// `s (X1 - X2 - K)` paid on the rule's exercise event (or its complement), whose
/// discounted mean is [`bjerksund_stensland_raw`] exactly (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpreadControl {
    /// The rule compares the legs exchanged (a negative strike).
    swapped: bool,
    /// `b` of the rule.
    b: f64,
    /// `c` of the rule.
    c: f64,
    /// Pay on the exercise event (else on its complement).
    on_exercise: bool,
    /// `+1` (call) or `-1` (put).
    sign: f64,
    /// The strike.
    k: f64,
}

impl SpreadControl {
    /// The control of a call or put on `X1 - X2` with strike `k`, and its discounted mean.
    pub fn new(kind: OptionType, a: &TwoAssets, k: f64) -> (SpreadControl, f64) {
        let swapped = k < 0.0;
        let (b, c, _) = if swapped {
            bs_rule(&a.swapped(), -k)
        } else {
            bs_rule(a, k)
        };
        let call = kind == OptionType::Call;
        let control = SpreadControl {
            swapped,
            b,
            c,
            // a call pays on the rule's event; exchanging the legs turns it into a put
            on_exercise: call != swapped,
            sign: kind.sign(),
            k,
        };
        (control, bjerksund_stensland_raw(kind, a, k))
    }

    /// The undiscounted payoff for terminal legs `x1, x2 > 0`.
    #[inline]
    pub fn payoff(&self, x1: f64, x2: f64) -> f64 {
        let (p, q) = if self.swapped { (x2, x1) } else { (x1, x2) };
        let event = p.ln() - self.b * q.ln() > self.c;
        if event == self.on_exercise {
            self.sign * (x1 - x2 - self.k)
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests;
