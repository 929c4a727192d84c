//! The normalised Black function and its inverse: a port of Jäckel's "Let's Be Rational"
//! (see [`super`] for the notice and the conventions).
//!
//! In normalised units the undiscounted Black price of a call divided by `sqrt(F K)` is
//! `b(x, s) = Phi(x/s + s/2) e^{x/2} - Phi(x/s - s/2) e^{-x/2}` with `x = ln(F/K)` and `s` the
//! total volatility `sigma sqrt(T)`. [`normalised_black_call`] evaluates it in four regions
//! (an asymptotic expansion, a small-`s` expansion, the plain formula and a form with one
//! exponential and two `erfcx`), each where it keeps full relative accuracy. The inverse
//! starts from a rational-cubic guess on one of four branches of `b` (two of them through
//! transformations of `b` that make it nearly linear) and refines it with third-order
//! Householder steps on an objective function chosen per branch; two steps reach the
//! attainable precision.
//!
//! One deliberate difference from the Python port: in the upper branch's iteration its
//! bisection fallback is mis-indented (its reset of the step runs on every iteration); this
//! port follows the original C, which resets only after a bisection, as the other two
//! branches do. Likewise the port's chained `d2 > -SQRT_DBL_MAX < SQRT_DBL_MAX` is the C's
//! `-SQRT_DBL_MAX < d2 < SQRT_DBL_MAX`.

// Constants are written with the original's digits, beyond f64's.
#![allow(clippy::excessive_precision)]

use super::special::{
    erfcx_cody, inverse_norm_cdf, norm_cdf, norm_pdf, ONE_OVER_SQRT_TWO, ONE_OVER_SQRT_TWO_PI,
};

/// Householder steps after the initial guess (Jäckel: two suffice for full precision).
pub(super) const MAXIMUM_ITERATIONS: u32 = 2;

const DBL_EPSILON: f64 = f64::EPSILON;
const DBL_MIN: f64 = f64::MIN_POSITIVE;
const DBL_MAX: f64 = f64::MAX;
/// `sqrt(f64::MIN_POSITIVE)`.
const SQRT_DBL_MIN: f64 = 1.491_668_146_240_041_3e-154;
/// `sqrt(f64::MAX)`.
const SQRT_DBL_MAX: f64 = 1.340_780_792_994_259_6e154;
/// `DBL_EPSILON^(1/4)`.
const FOURTH_ROOT_DBL_EPSILON: f64 = 1.220_703_125e-4;
/// `DBL_EPSILON^(1/16)`.
const SIXTEENTH_ROOT_DBL_EPSILON: f64 = 0.105_112_051_906_714_33;
/// Prices (and maps) below this are treated as zero; 0 keeps subnormal prices in play, as
/// the original's default does.
const DENORMALIZATION_CUTOFF: f64 = 0.0;
const ASYMPTOTIC_EXPANSION_ACCURACY_THRESHOLD: f64 = -10.0;
const SMALL_T_EXPANSION_OF_NORMALIZED_BLACK_THRESHOLD: f64 = 2.0 * SIXTEENTH_ROOT_DBL_EPSILON;

const SQRT_TWO_PI: f64 = 2.506_628_274_631_000_502_415_765_284_811_045_253_006_986_740_610;
const TWO_PI: f64 = std::f64::consts::TAU;
const SQRT_PI_OVER_TWO: f64 = 1.253_314_137_315_500_251_207_882_642_405_522_626_503_493_370_305;
const SQRT_THREE: f64 = 1.732_050_807_568_877_293_527_446_341_505_872_366_942_805_253_810;
const SQRT_ONE_OVER_THREE: f64 = 0.577_350_269_189_625_764_509_148_780_501_957_455_647_601_751_270;
const TWO_PI_OVER_SQRT_TWENTY_SEVEN: f64 = 1.209_199_576_156_145_233_729_385_505_094_770_488_189_377_498_728;
const PI_OVER_SIX: f64 = std::f64::consts::FRAC_PI_6;

#[inline(always)]
fn square(x: f64) -> f64 {
    x * x
}

/// Weeds out subnormal numbers (none, with a zero cutoff, beyond 0 itself).
#[inline(always)]
fn is_below_horizon(x: f64) -> bool {
    x.abs() < DENORMALIZATION_CUTOFF
}

#[inline(always)]
fn householder_factor(newton: f64, halley: f64, hh3: f64) -> f64 {
    (1.0 + 0.5 * halley * newton) / (1.0 + newton * (halley + hh3 * newton / 6.0))
}

/// `b(x, s)` for a call, `x <= 0` in the expansions' regions.
#[inline]
pub(super) fn normalised_black_call(x: f64, s: f64) -> f64 {
    if x > 0.0 {
        // In-the-money: intrinsic plus the out-of-the-money put (put-call parity).
        return normalised_intrinsic(x, 1.0) + normalised_black_call(-x, s);
    }
    let ax = x.abs();
    if s <= ax * DENORMALIZATION_CUTOFF {
        return normalised_intrinsic(x, 1.0);
    }
    // |h| > |eta| and t < tau + |h| - |eta|, without dividing by s.
    if x < s * ASYMPTOTIC_EXPANSION_ACCURACY_THRESHOLD
        && 0.5 * s * s + x
            < s * (SMALL_T_EXPANSION_OF_NORMALIZED_BLACK_THRESHOLD + ASYMPTOTIC_EXPANSION_ACCURACY_THRESHOLD)
    {
        return asymptotic_expansion_of_normalized_black_call(x / s, 0.5 * s);
    }
    if 0.5 * s < SMALL_T_EXPANSION_OF_NORMALIZED_BLACK_THRESHOLD {
        return small_t_expansion_of_normalized_black_call(x / s, 0.5 * s);
    }
    // Above about 85% of b_max the first term dominates: keep the plain formula.
    if x + 0.5 * s * s > s * 0.85 {
        return normalized_black_call_using_norm_cdf(x, s);
    }
    normalised_black_call_using_erfcx(x / s, 0.5 * s)
}

/// `b(x, s)` for a call (`q = 1`) or a put (`q = -1`), by reciprocal-strike symmetry.
#[inline]
pub(super) fn normalised_black(x: f64, s: f64, q: f64) -> f64 {
    normalised_black_call(if q < 0.0 { -x } else { x }, s)
}

/// `db/ds`, the normalised vega.
#[inline]
pub(super) fn normalised_vega(x: f64, s: f64) -> f64 {
    let ax = x.abs();
    if ax <= 0.0 {
        ONE_OVER_SQRT_TWO_PI * (-0.125 * s * s).exp()
    } else if s <= 0.0 || s <= ax * SQRT_DBL_MIN {
        0.0
    } else {
        ONE_OVER_SQRT_TWO_PI * (-0.5 * (square(x / s) + square(0.5 * s))).exp()
    }
}

/// The normalised intrinsic value `max(q (e^{x/2} - e^{-x/2}), 0)`, by its series near 0.
#[inline]
pub(super) fn normalised_intrinsic(x: f64, q: f64) -> f64 {
    if q * x <= 0.0 {
        return 0.0;
    }
    let x2 = x * x;
    let sign = if q < 0.0 { -1.0 } else { 1.0 };
    // 98 = (92897280)^(1/4), from the series' last coefficient.
    if x2 < 98.0 * FOURTH_ROOT_DBL_EPSILON {
        let series = x
            * (1.0
                + x2 * ((1.0 / 24.0)
                    + x2 * ((1.0 / 1920.0) + x2 * ((1.0 / 322560.0) + (1.0 / 92897280.0) * x2))));
        return (sign * series).max(0.0).abs();
    }
    let b_max = (0.5 * x).exp();
    (sign * (b_max - 1.0 / b_max)).max(0.0).abs()
}

/// `Phi(h+t) e^{x/2} - Phi(h-t) e^{-x/2}` as written.
#[inline]
fn normalized_black_call_using_norm_cdf(x: f64, s: f64) -> f64 {
    let h = x / s;
    let t = 0.5 * s;
    let b_max = (0.5 * x).exp();
    let b = norm_cdf(h + t) * b_max - norm_cdf(h - t) / b_max;
    b.max(0.0).abs()
}

/// The 17th-order asymptotic expansion of `b` for large negative `h` (A&S 26.2.12), relative
/// accuracy 1.64e-16 for `h <= -10`.
#[inline]
fn asymptotic_expansion_of_normalized_black_call(h: f64, t: f64) -> f64 {
    let e = (t / h) * (t / h);
    let r = (h + t) * (h - t);
    let q = (h / r) * (h / r);
    #[rustfmt::skip]
    let asymptotic_expansion_sum = 2.0+q*(-6.0E0-2.0*e+3.0*q*(1.0E1+e*(2.0E1+2.0*e)+5.0*q*(-1.4E1+e*(-7.0E1+e*(-4.2E1-2.0*e))+7.0*q*(1.8E1+e*(1.68E2+e*(2.52E2+e*(7.2E1+2.0*e)))+9.0*q*(-2.2E1+e*(-3.3E2+e*(-9.24E2+e*(-6.6E2+e*(-1.1E2-2.0*e))))+1.1E1*q*(2.6E1+e*(5.72E2+e*(2.574E3+e*(3.432E3+e*(1.43E3+e*(1.56E2+2.0*e)))))+1.3E1*q*(-3.0E1+e*(-9.1E2+e*(-6.006E3+e*(-1.287E4+e*(-1.001E4+e*(-2.73E3+e*(-2.1E2-2.0*e))))))+1.5E1*q*(3.4E1+e*(1.36E3+e*(1.2376E4+e*(3.8896E4+e*(4.862E4+e*(2.4752E4+e*(4.76E3+e*(2.72E2+2.0*e)))))))+1.7E1*q*(-3.8E1+e*(-1.938E3+e*(-2.3256E4+e*(-1.00776E5+e*(-1.84756E5+e*(-1.51164E5+e*(-5.4264E4+e*(-7.752E3+e*(-3.42E2-2.0*e))))))))+1.9E1*q*(4.2E1+e*(2.66E3+e*(4.0698E4+e*(2.3256E5+e*(5.8786E5+e*(7.05432E5+e*(4.0698E5+e*(1.08528E5+e*(1.197E4+e*(4.2E2+2.0*e)))))))))+2.1E1*q*(-4.6E1+e*(-3.542E3+e*(-6.7298E4+e*(-4.90314E5+e*(-1.63438E6+e*(-2.704156E6+e*(-2.288132E6+e*(-9.80628E5+e*(-2.01894E5+e*(-1.771E4+e*(-5.06E2-2.0*e))))))))))+2.3E1*q*(5.0E1+e*(4.6E3+e*(1.0626E5+e*(9.614E5+e*(4.08595E6+e*(8.9148E6+e*(1.04006E7+e*(6.53752E6+e*(2.16315E6+e*(3.542E5+e*(2.53E4+e*(6.0E2+2.0*e)))))))))))+2.5E1*q*(-5.4E1+e*(-5.85E3+e*(-1.6146E5+e*(-1.77606E6+e*(-9.37365E6+e*(-2.607579E7+e*(-4.01166E7+e*(-3.476772E7+e*(-1.687257E7+e*(-4.44015E6+e*(-5.9202E5+e*(-3.51E4+e*(-7.02E2-2.0*e))))))))))))+2.7E1*q*(5.8E1+e*(7.308E3+e*(2.3751E5+e*(3.12156E6+e*(2.003001E7+e*(6.919458E7+e*(1.3572783E8+e*(1.5511752E8+e*(1.0379187E8+e*(4.006002E7+e*(8.58429E6+e*(9.5004E5+e*(4.7502E4+e*(8.12E2+2.0*e)))))))))))))+2.9E1*q*(-6.2E1+e*(-8.99E3+e*(-3.39822E5+e*(-5.25915E6+e*(-4.032015E7+e*(-1.6934463E8+e*(-4.1250615E8+e*(-6.0108039E8+e*(-5.3036505E8+e*(-2.8224105E8+e*(-8.870433E7+e*(-1.577745E7+e*(-1.472562E6+e*(-6.293E4+e*(-9.3E2-2.0*e))))))))))))))+3.1E1*q*(6.6E1+e*(1.0912E4+e*(4.74672E5+e*(8.544096E6+e*(7.71342E7+e*(3.8707344E8+e*(1.14633288E9+e*(2.07431664E9+e*(2.33360622E9+e*(1.6376184E9+e*(7.0963464E8+e*(1.8512208E8+e*(2.7768312E7+e*(2.215136E6+e*(8.184E4+e*(1.056E3+2.0*e)))))))))))))))+3.3E1*(-7.0E1+e*(-1.309E4+e*(-6.49264E5+e*(-1.344904E7+e*(-1.4121492E8+e*(-8.344518E8+e*(-2.9526756E9+e*(-6.49588632E9+e*(-9.0751353E9+e*(-8.1198579E9+e*(-4.6399188E9+e*(-1.6689036E9+e*(-3.67158792E8+e*(-4.707164E7+e*(-3.24632E6+e*(-1.0472E5+e*(-1.19E3-2.0*e)))))))))))))))))*q))))))))))))))));
    let b = ONE_OVER_SQRT_TWO_PI * (-0.5 * (h * h + t * t)).exp() * (t / r) * asymptotic_expansion_sum;
    b.max(0.0).abs()
}

/// The expansion of `b` to twelfth order in small `t`, accurate to `2.23e-16` for `h <= 0`
/// and `t < 2 eps^(1/16)`.
#[inline]
fn small_t_expansion_of_normalized_black_call(h: f64, t: f64) -> f64 {
    // Y(h) = Phi(h)/phi(h) = sqrt(pi/2) erfcx(-h/sqrt 2); a = 1 + h Y(h) > 0 for h < 0.
    let a = 1.0 + h * (0.5 * SQRT_TWO_PI) * erfcx_cody(-ONE_OVER_SQRT_TWO * h);
    let w = t * t;
    let h2 = h * h;
    #[rustfmt::skip]
    let expansion = 2.0*t*(a+w*((-1.0+3.0*a+a*h2)/6.0+w*((-7.0+15.0*a+h2*(-1.0+10.0*a+a*h2))/120.0+w*((-57.0+105.0*a+h2*(-18.0+105.0*a+h2*(-1.0+21.0*a+a*h2)))/5040.0+w*((-561.0+945.0*a+h2*(-285.0+1260.0*a+h2*(-33.0+378.0*a+h2*(-1.0+36.0*a+a*h2))))/362880.0+w*((-6555.0+10395.0*a+h2*(-4680.0+17325.0*a+h2*(-840.0+6930.0*a+h2*(-52.0+990.0*a+h2*(-1.0+55.0*a+a*h2)))))/39916800.0+((-89055.0+135135.0*a+h2*(-82845.0+270270.0*a+h2*(-20370.0+135135.0*a+h2*(-1926.0+25740.0*a+h2*(-75.0+2145.0*a+h2*(-1.0+78.0*a+a*h2))))))*w)/6227020800.0))))));
    let b = ONE_OVER_SQRT_TWO_PI * (-0.5 * (h * h + t * t)).exp() * expansion;
    b.max(0.0).abs()
}

/// `b = exp(-(h²+t²)/2) [erfcx(-(h+t)/sqrt 2) - erfcx(-(h-t)/sqrt 2)] / 2`: one exponential
/// instead of four, so the difference keeps (nearly) all 16 digits (Marsaglia's point about
/// `exp(-z²/2)` dominating the error of `Phi(z)` for large `|z|`).
#[inline]
fn normalised_black_call_using_erfcx(h: f64, t: f64) -> f64 {
    let b = 0.5
        * (-0.5 * (h * h + t * t)).exp()
        * (erfcx_cody(-ONE_OVER_SQRT_TWO * (h + t)) - erfcx_cody(-ONE_OVER_SQRT_TWO * (h - t)));
    b.max(0.0).abs()
}

/// The lower map `f(s)` of the lowest branch and its first two derivatives in `b`.
#[inline]
fn compute_f_lower_map_and_first_two_derivatives(x: f64, s: f64) -> (f64, f64, f64) {
    let ax = x.abs();
    let z = SQRT_ONE_OVER_THREE * ax / s;
    let y = z * z;
    let s2 = s * s;
    let phi_cdf = norm_cdf(-z);
    let phi = norm_pdf(z);
    let fpp = PI_OVER_SIX * y / (s2 * s)
        * phi_cdf
        * (8.0 * SQRT_THREE * s * ax + (3.0 * s2 * (s2 - 8.0) - 8.0 * x * x) * phi_cdf / phi)
        * (2.0 * y + 0.25 * s2).exp();
    let (f, fp);
    if is_below_horizon(s) {
        fp = 1.0;
        f = 0.0;
    } else {
        let phi2 = phi_cdf * phi_cdf;
        fp = TWO_PI * y * phi2 * (y + 0.125 * s * s).exp();
        f = if is_below_horizon(x) {
            0.0
        } else {
            TWO_PI_OVER_SQRT_TWENTY_SEVEN * ax * (phi2 * phi_cdf)
        };
    }
    (f, fp, fpp)
}

/// The upper map `f(s) = Phi(-s/2)` of the highest branch and its derivatives in `b`.
#[inline]
fn compute_f_upper_map_and_first_two_derivatives(x: f64, s: f64) -> (f64, f64, f64) {
    let f = norm_cdf(-0.5 * s);
    if is_below_horizon(x) {
        (f, -0.5, 0.0)
    } else {
        let w = square(x / s);
        let fp = -0.5 * (0.5 * w).exp();
        let fpp = SQRT_PI_OVER_TWO * (w + 0.125 * s * s).exp() * w / s;
        (f, fp, fpp)
    }
}

#[inline]
fn inverse_f_lower_map(x: f64, f: f64) -> f64 {
    if is_below_horizon(f) {
        0.0
    } else {
        (x / (SQRT_THREE * inverse_norm_cdf((f / (TWO_PI_OVER_SQRT_TWENTY_SEVEN * x.abs())).powf(1.0 / 3.0))))
            .abs()
    }
}

#[inline]
fn inverse_f_upper_map(f: f64) -> f64 {
    -2.0 * inverse_norm_cdf(f)
}

// Rational cubic interpolation (Delbourgo & Gregory, "Shape preserving piecewise rational
// interpolation", SIAM J. Sci. Stat. Comput. 1985).

const MINIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE: f64 = -(1.0 - 1.490_116_119_384_765_6e-8);
const MAXIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE: f64 = 2.0 / (DBL_EPSILON * DBL_EPSILON);

#[inline(always)]
fn is_zero(x: f64) -> bool {
    x.abs() < DBL_MIN
}

#[allow(clippy::too_many_arguments)] // the interpolant's two end points, slopes and control
#[inline]
fn rational_cubic_interpolation(
    x: f64,
    x_l: f64,
    x_r: f64,
    y_l: f64,
    y_r: f64,
    d_l: f64,
    d_r: f64,
    r: f64,
) -> f64 {
    let h = x_r - x_l;
    if h.abs() <= 0.0 {
        return 0.5 * (y_l + y_r);
    }
    // r > -1 is expected; no assertion, so that NaN propagates.
    let t = (x - x_l) / h;
    // Negated on purpose: a NaN `r` takes the rational branch and propagates.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    if !(r >= MAXIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE) {
        let omt = 1.0 - t;
        let t2 = t * t;
        let omt2 = omt * omt;
        // Formula (2.4) divided by formula (2.5).
        return (y_r * t2 * t
            + (r * y_r - h * d_r) * t2 * omt
            + (r * y_l + h * d_l) * t * omt2
            + y_l * omt2 * omt)
            / (1.0 + (r - 3.0) * t * omt);
    }
    // Linear interpolation without over- or underflow.
    y_r * t + y_l * (1.0 - t)
}

#[inline]
fn rational_cubic_control_parameter_to_fit_second_derivative_at_left_side(
    x_l: f64,
    x_r: f64,
    y_l: f64,
    y_r: f64,
    d_l: f64,
    d_r: f64,
    second_derivative_l: f64,
) -> f64 {
    let h = x_r - x_l;
    let numerator = 0.5 * h * second_derivative_l + (d_r - d_l);
    if is_zero(numerator) {
        return 0.0;
    }
    let denominator = (y_r - y_l) / h - d_l;
    if is_zero(denominator) {
        return if numerator > 0.0 {
            MAXIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE
        } else {
            MINIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE
        };
    }
    numerator / denominator
}

#[inline]
fn rational_cubic_control_parameter_to_fit_second_derivative_at_right_side(
    x_l: f64,
    x_r: f64,
    y_l: f64,
    y_r: f64,
    d_l: f64,
    d_r: f64,
    second_derivative_r: f64,
) -> f64 {
    let h = x_r - x_l;
    let numerator = 0.5 * h * second_derivative_r + (d_r - d_l);
    if is_zero(numerator) {
        return 0.0;
    }
    let denominator = d_r - (y_r - y_l) / h;
    if is_zero(denominator) {
        return if numerator > 0.0 {
            MAXIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE
        } else {
            MINIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE
        };
    }
    numerator / denominator
}

#[inline]
fn minimum_rational_cubic_control_parameter(
    d_l: f64,
    d_r: f64,
    s: f64,
    prefer_shape_preservation: bool,
) -> f64 {
    let monotonic = d_l * s >= 0.0 && d_r * s >= 0.0;
    let convex = d_l <= s && s <= d_r;
    let concave = d_l >= s && s >= d_r;
    if !monotonic && !convex && !concave {
        return MINIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE;
    }
    let d_r_m_d_l = d_r - d_l;
    let d_r_m_s = d_r - s;
    let s_m_d_l = s - d_l;
    let mut r1 = -DBL_MAX;
    let mut r2 = r1;
    // Monotonicity, condition (3.8).
    if monotonic {
        if !is_zero(s) {
            r1 = (d_r + d_l) / s;
        } else if prefer_shape_preservation {
            r1 = MAXIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE;
        }
    }
    if convex || concave {
        // Condition (3.18).
        if !(is_zero(s_m_d_l) || is_zero(d_r_m_s)) {
            r2 = (d_r_m_d_l / d_r_m_s).abs().max((d_r_m_d_l / s_m_d_l).abs());
        } else if prefer_shape_preservation {
            r2 = MAXIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE;
        }
    } else if monotonic && prefer_shape_preservation {
        r2 = MAXIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE;
    }
    MINIMUM_RATIONAL_CUBIC_CONTROL_PARAMETER_VALUE.max(r1.max(r2))
}

#[allow(clippy::too_many_arguments)]
#[inline]
fn convex_rational_cubic_control_parameter_to_fit_second_derivative_at_left_side(
    x_l: f64,
    x_r: f64,
    y_l: f64,
    y_r: f64,
    d_l: f64,
    d_r: f64,
    second_derivative_l: f64,
    prefer_shape_preservation: bool,
) -> f64 {
    let r = rational_cubic_control_parameter_to_fit_second_derivative_at_left_side(
        x_l,
        x_r,
        y_l,
        y_r,
        d_l,
        d_r,
        second_derivative_l,
    );
    let r_min = minimum_rational_cubic_control_parameter(
        d_l,
        d_r,
        (y_r - y_l) / (x_r - x_l),
        prefer_shape_preservation,
    );
    r.max(r_min)
}

#[allow(clippy::too_many_arguments)]
#[inline]
fn convex_rational_cubic_control_parameter_to_fit_second_derivative_at_right_side(
    x_l: f64,
    x_r: f64,
    y_l: f64,
    y_r: f64,
    d_l: f64,
    d_r: f64,
    second_derivative_r: f64,
    prefer_shape_preservation: bool,
) -> f64 {
    let r = rational_cubic_control_parameter_to_fit_second_derivative_at_right_side(
        x_l,
        x_r,
        y_l,
        y_r,
        d_l,
        d_r,
        second_derivative_r,
    );
    let r_min = minimum_rational_cubic_control_parameter(
        d_l,
        d_r,
        (y_r - y_l) / (x_r - x_l),
        prefer_shape_preservation,
    );
    r.max(r_min)
}

/// The state of a Householder iteration inside a bracket `[s_left, s_right]`.
struct Iteration {
    s: f64,
    ds: f64,
    ds_previous: f64,
    s_left: f64,
    s_right: f64,
    iterations: u32,
    direction_reversal_count: u32,
}

impl Iteration {
    /// Before a step: counts direction reversals and falls back to bisection when looping
    /// or when the step left the bracket (only for extreme `|x|`, say above 500). Returns
    /// false when the bracket has collapsed to machine precision.
    #[inline]
    fn guard(&mut self) -> bool {
        if self.ds * self.ds_previous < 0.0 {
            self.direction_reversal_count += 1;
        }
        if self.iterations > 0
            && (self.direction_reversal_count == 3 || !(self.s > self.s_left && self.s < self.s_right))
        {
            self.s = 0.5 * (self.s_left + self.s_right);
            if self.s_right - self.s_left <= DBL_EPSILON * self.s {
                return false;
            }
            self.direction_reversal_count = 0;
            self.ds = 0.0;
        }
        self.ds_previous = self.ds;
        true
    }

    /// Tightens the bracket with `b = b(s)`.
    #[inline]
    fn tighten(&mut self, b: f64, beta: f64) {
        if b > beta && self.s < self.s_right {
            self.s_right = self.s;
        } else if b < beta && self.s > self.s_left {
            self.s_left = self.s;
        }
    }

    #[inline]
    fn step(&mut self, ds: f64) {
        self.ds = ds.max(-0.5 * self.s);
        self.s += self.ds;
        self.iterations += 1;
    }

    #[inline]
    fn running(&self, n: u32) -> bool {
        self.iterations < n && self.ds.abs() > DBL_EPSILON * self.s
    }
}

/// The total volatility `s` with `b(x, s) = beta` for an option of sign `q` (`1` call, `-1`
/// put), after at most `n` Householder steps. No input checks: a price at or below
/// intrinsic gives 0, one at or above the maximum gives `None`.
pub(super) fn unchecked_normalised_implied_volatility(
    mut beta: f64,
    mut x: f64,
    mut q: f64,
    n: u32,
) -> Option<f64> {
    // Subtract the intrinsic value: an in-the-money option becomes the out-of-the-money one.
    if q * x > 0.0 {
        beta = (beta - normalised_intrinsic(x, q)).max(0.0).abs();
        q = -q;
    }
    // Puts to calls.
    if q < 0.0 {
        x = -x;
    }
    if beta <= 0.0 || beta < DENORMALIZATION_CUTOFF {
        return Some(0.0);
    }
    let b_max = (0.5 * x).exp();
    if beta >= b_max {
        return None;
    }
    let mut it = Iteration {
        s: -DBL_MAX,
        ds: -DBL_MAX,
        ds_previous: 0.0,
        s_left: DBL_MIN,
        s_right: DBL_MAX,
        iterations: 0,
        direction_reversal_count: 0,
    };
    let s_c = (2.0 * x).abs().sqrt();
    let b_c = normalised_black_call(x, s_c);
    let v_c = normalised_vega(x, s_c);
    if beta < b_c {
        let s_l = s_c - b_c / v_c;
        let b_l = normalised_black_call(x, s_l);
        if beta < b_l {
            let (f_lower_map_l, d_f_lower_map_l_d_beta, d2_f_lower_map_l_d_beta2) =
                compute_f_lower_map_and_first_two_derivatives(x, s_l);
            let r_ll = convex_rational_cubic_control_parameter_to_fit_second_derivative_at_right_side(
                0.0,
                b_l,
                0.0,
                f_lower_map_l,
                1.0,
                d_f_lower_map_l_d_beta,
                d2_f_lower_map_l_d_beta2,
                true,
            );
            let mut f = rational_cubic_interpolation(
                beta,
                0.0,
                b_l,
                0.0,
                f_lower_map_l,
                1.0,
                d_f_lower_map_l_d_beta,
                r_ll,
            );
            // Negated on purpose: a NaN `f` takes the fallback too.
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            if !(f > 0.0) {
                // Round-off for extreme |x| (> 500): the quadratic through f(0) = 0, f(b_l)
                // and f'(0) = 1.
                let t = beta / b_l;
                f = (f_lower_map_l * t + b_l * (1.0 - t)) * t;
            }
            it.s = inverse_f_lower_map(x, f);
            it.s_right = s_l;
            // Lowest branch: g(s) = 1/ln(b(s)) - 1/ln(beta).
            while it.running(n) {
                if !it.guard() {
                    break;
                }
                let s = it.s;
                let b = normalised_black_call(x, s);
                let bp = normalised_vega(x, s);
                it.tighten(b, beta);
                let ds = if b <= 0.0 || bp <= 0.0 {
                    // Underflow: bisect this once.
                    0.5 * (it.s_left + it.s_right) - s
                } else {
                    let ln_b = b.ln();
                    let ln_beta = beta.ln();
                    let bpob = bp / b;
                    let h = x / s;
                    let b_halley = h * h / s - s / 4.0;
                    let newton = (ln_beta - ln_b) * ln_b / ln_beta / bpob;
                    let halley = b_halley - bpob * (1.0 + 2.0 / ln_b);
                    let b_hh3 = b_halley * b_halley - 3.0 * square(h / s) - 0.25;
                    let hh3 = b_hh3 + 2.0 * square(bpob) * (1.0 + 3.0 / ln_b * (1.0 + 1.0 / ln_b))
                        - 3.0 * b_halley * bpob * (1.0 + 2.0 / ln_b);
                    newton * householder_factor(newton, halley, hh3)
                };
                it.step(ds);
            }
            return Some(it.s);
        }
        let v_l = normalised_vega(x, s_l);
        let r_lm = convex_rational_cubic_control_parameter_to_fit_second_derivative_at_right_side(
            b_l,
            b_c,
            s_l,
            s_c,
            1.0 / v_l,
            1.0 / v_c,
            0.0,
            false,
        );
        it.s = rational_cubic_interpolation(beta, b_l, b_c, s_l, s_c, 1.0 / v_l, 1.0 / v_c, r_lm);
        it.s_left = s_l;
        it.s_right = s_c;
    } else {
        let s_h = if v_c > DBL_MIN {
            s_c + (b_max - b_c) / v_c
        } else {
            s_c
        };
        let b_h = normalised_black_call(x, s_h);
        if beta <= b_h {
            let v_h = normalised_vega(x, s_h);
            let r_hm = convex_rational_cubic_control_parameter_to_fit_second_derivative_at_left_side(
                b_c,
                b_h,
                s_c,
                s_h,
                1.0 / v_c,
                1.0 / v_h,
                0.0,
                false,
            );
            it.s = rational_cubic_interpolation(beta, b_c, b_h, s_c, s_h, 1.0 / v_c, 1.0 / v_h, r_hm);
            it.s_left = s_c;
            it.s_right = s_h;
        } else {
            let (f_upper_map_h, d_f_upper_map_h_d_beta, d2_f_upper_map_h_d_beta2) =
                compute_f_upper_map_and_first_two_derivatives(x, s_h);
            let mut f = -DBL_MAX;
            if d2_f_upper_map_h_d_beta2 > -SQRT_DBL_MAX && d2_f_upper_map_h_d_beta2 < SQRT_DBL_MAX {
                let r_hh = convex_rational_cubic_control_parameter_to_fit_second_derivative_at_left_side(
                    b_h,
                    b_max,
                    f_upper_map_h,
                    0.0,
                    d_f_upper_map_h_d_beta,
                    -0.5,
                    d2_f_upper_map_h_d_beta2,
                    true,
                );
                f = rational_cubic_interpolation(
                    beta,
                    b_h,
                    b_max,
                    f_upper_map_h,
                    0.0,
                    d_f_upper_map_h_d_beta,
                    -0.5,
                    r_hh,
                );
            }
            if f <= 0.0 {
                // The quadratic through f(b_h), f(b_max) = 0 and f'(b_max) = -1/2.
                let h = b_max - b_h;
                let t = (beta - b_h) / h;
                f = (f_upper_map_h * (1.0 - t) + 0.5 * h * t) * (1.0 - t);
            }
            it.s = inverse_f_upper_map(f);
            it.s_left = s_h;
            if beta > 0.5 * b_max {
                // Upper branch: g(s) = ln(b_max - beta) - ln(b_max - b(s)).
                while it.running(n) {
                    if !it.guard() {
                        break;
                    }
                    let s = it.s;
                    let b = normalised_black_call(x, s);
                    let bp = normalised_vega(x, s);
                    it.tighten(b, beta);
                    let ds = if b >= b_max || bp <= DBL_MIN {
                        0.5 * (it.s_left + it.s_right) - s
                    } else {
                        let b_max_minus_b = b_max - b;
                        let g = ((b_max - beta) / b_max_minus_b).ln();
                        let gp = bp / b_max_minus_b;
                        let b_halley = square(x / s) / s - s / 4.0;
                        let b_hh3 = b_halley * b_halley - 3.0 * square(x / (s * s)) - 0.25;
                        let newton = -g / gp;
                        let halley = b_halley + gp;
                        let hh3 = b_hh3 + gp * (2.0 * gp + 3.0 * b_halley);
                        newton * householder_factor(newton, halley, hh3)
                    };
                    it.step(ds);
                }
                return Some(it.s);
            }
        }
    }
    // The two middle branches: g(s) = b(s) - beta.
    while it.running(n) {
        if !it.guard() {
            break;
        }
        let s = it.s;
        let b = normalised_black_call(x, s);
        let bp = normalised_vega(x, s);
        it.tighten(b, beta);
        let newton = (beta - b) / bp;
        let halley = square(x / s) / s - s / 4.0;
        let hh3 = halley * halley - 3.0 * square(x / (s * s)) - 0.25;
        it.step(newton * householder_factor(newton, halley, hh3));
    }
    Some(it.s)
}
