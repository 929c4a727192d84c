//! The normal distribution functions "Let's Be Rational" is built on: W. J. Cody's `erfc` and
//! `erfcx` (the scaled complementary error function `exp(x²) erfc(x)`), the normal CDF with
//! the Abramowitz–Stegun asymptotic expansion below `z = -10`, and the inverse normal CDF
//! (Wichura's AS241), ported from the Python port of Jäckel's code (see [`super`] for the
//! notice).
//!
//! Why not kiln's [`crate::finance::norm_cdf`] (`libm`'s `erfc`): the method needs `erfcx`,
//! which `libm` lacks, and Cody's rational approximations give `erfc` and `erfcx` from one
//! set of coefficients (at least 18 significant digits in theory, so rounding-bound in f64);
//! keeping the original's functions also keeps its results bit-comparable to the reference
//! values the tests check.

// The coefficients are written as published (Cody 1969, Wichura 1988), digits beyond f64's
// included, so that they can be checked against the sources.
#![allow(clippy::excessive_precision)]

/// Cody's `CALERF` coefficients: erf on `|x| <= 0.46875`.
const A: [f64; 5] = [
    3.1611237438705656,
    113.864154151050156,
    377.485237685302021,
    3209.37758913846947,
    0.185777706184603153,
];
const B: [f64; 4] = [
    23.6012909523441209,
    244.024637934444173,
    1282.61652607737228,
    2844.23683343917062,
];
/// erfc on `0.46875 < |x| <= 4`.
const C: [f64; 9] = [
    0.564188496988670089,
    8.88314979438837594,
    66.1191906371416295,
    298.635138197400131,
    881.95222124176909,
    1712.04761263407058,
    2051.07837782607147,
    1230.33935479799725,
    2.15311535474403846e-8,
];
const D: [f64; 8] = [
    15.7449261107098347,
    117.693950891312499,
    537.181101862009858,
    1621.38957456669019,
    3290.79923573345963,
    4362.61909014324716,
    3439.36767414372164,
    1230.33935480374942,
];
/// erfc on `|x| > 4`.
const P: [f64; 6] = [
    0.305326634961232344,
    0.360344899949804439,
    0.125781726111229246,
    0.0160837851487422766,
    6.58749161529837803e-4,
    0.0163153871373020978,
];
const Q: [f64; 5] = [
    2.56852019228982242,
    1.87295284992346047,
    0.527905102951428412,
    0.0605183413124413191,
    0.00233520497626869185,
];

const SQRPI: f64 = 0.56418958354775628695;
const THRESH: f64 = 0.46875;
const XINF: f64 = 1.79e308;
const XNEG: f64 = -26.628;
const XSMALL: f64 = 1.11e-16;
const XBIG: f64 = 26.543;
const XHUGE: f64 = 6.71e7;
const XMAX: f64 = 2.53e307;

/// Which function [`calerf`] evaluates.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Jint {
    Erfc,
    Erfcx,
}

/// `exp(-y²)` for the erfc branches, split as Cody does (`y = ysq + del`, `ysq` a multiple of
/// 1/16) so that the square is exact.
#[inline]
fn exp_minus_square(y: f64) -> f64 {
    let ysq = (y * 16.0).trunc() / 16.0;
    let del = (y - ysq) * (y + ysq);
    (-ysq * ysq).exp() * (-del).exp()
}

/// Cody's `CALERF` for `erfc` and `erfcx` (`erf` is not needed here).
#[inline]
fn calerf(x: f64, jint: Jint) -> f64 {
    let y = x.abs();
    let mut result;
    if y <= THRESH {
        let ysq = if y > XSMALL { y * y } else { 0.0 };
        let mut xnum = A[4] * ysq;
        let mut xden = ysq;
        for i in 0..3 {
            xnum = (xnum + A[i]) * ysq;
            xden = (xden + B[i]) * ysq;
        }
        result = 1.0 - x * (xnum + A[3]) / (xden + B[3]);
        if jint == Jint::Erfcx {
            result *= ysq.exp();
        }
        return result;
    } else if y <= 4.0 {
        let mut xnum = C[8] * y;
        let mut xden = y;
        for i in 0..7 {
            xnum = (xnum + C[i]) * y;
            xden = (xden + D[i]) * y;
        }
        result = (xnum + C[7]) / (xden + D[7]);
        if jint != Jint::Erfcx {
            result *= exp_minus_square(y);
        }
    } else {
        result = 0.0;
        let mut early = false;
        if y >= XBIG {
            if jint != Jint::Erfcx || y >= XMAX {
                early = true;
            } else if y >= XHUGE {
                result = SQRPI / y;
                early = true;
            }
        }
        if !early {
            let ysq = 1.0 / (y * y);
            let mut xnum = P[5] * ysq;
            let mut xden = ysq;
            for i in 0..4 {
                xnum = (xnum + P[i]) * ysq;
                xden = (xden + Q[i]) * ysq;
            }
            result = ysq * (xnum + P[4]) / (xden + Q[4]);
            result = (SQRPI - result) / y;
            if jint != Jint::Erfcx {
                result *= exp_minus_square(y);
            }
        }
    }
    // Fix up for a negative argument.
    if x < 0.0 {
        match jint {
            Jint::Erfc => result = 2.0 - result,
            Jint::Erfcx => {
                if x < XNEG {
                    result = XINF;
                } else {
                    let ysq = (x * 16.0).trunc() / 16.0;
                    let del = (x - ysq) * (x + ysq);
                    let e = (ysq * ysq).exp() * del.exp();
                    result = (e + e) - result;
                }
            }
        }
    }
    result
}

/// `erfc(x)` (Cody).
#[inline]
pub fn erfc_cody(x: f64) -> f64 {
    calerf(x, Jint::Erfc)
}

/// `erfcx(x) = exp(x²) erfc(x)` (Cody).
#[inline]
pub fn erfcx_cody(x: f64) -> f64 {
    calerf(x, Jint::Erfcx)
}

/// `1 / sqrt(2 pi)`.
pub const ONE_OVER_SQRT_TWO_PI: f64 = 0.398_942_280_401_432_677_939_946_059_934_381_868_475_858_631_164_9;
/// `1 / sqrt(2)`.
pub const ONE_OVER_SQRT_TWO: f64 = std::f64::consts::FRAC_1_SQRT_2;

/// The standard normal density.
#[inline]
pub fn norm_pdf(x: f64) -> f64 {
    ONE_OVER_SQRT_TWO_PI * (-0.5 * x * x).exp()
}

/// The standard normal CDF: `erfc(-z / sqrt 2) / 2`, and for `z <= -10` the asymptotic
/// expansion (Abramowitz & Stegun 26.2.12), relative accuracy 1.64e-16 there.
#[inline]
pub fn norm_cdf(z: f64) -> f64 {
    const FIRST_THRESHOLD: f64 = -10.0;
    // -1 / sqrt(DBL_EPSILON)
    const SECOND_THRESHOLD: f64 = -67_108_864.0;
    if z <= FIRST_THRESHOLD {
        let mut sum = 1.0;
        if z >= SECOND_THRESHOLD {
            let zsqr = z * z;
            let mut i = 1.0;
            let mut g = 1.0;
            let mut lasta = f64::MAX;
            loop {
                let x = (4.0 * i - 3.0) / zsqr;
                let y = x * ((4.0 * i - 1.0) / zsqr);
                let a = g * (x - y);
                sum -= a;
                g *= y;
                i += 1.0;
                let a = a.abs();
                if !(lasta > a && a >= (sum * f64::EPSILON).abs()) {
                    break;
                }
                lasta = a;
            }
        }
        return -norm_pdf(z) * sum / z;
    }
    0.5 * erfc_cody(-z * ONE_OVER_SQRT_TWO)
}

/// The inverse normal CDF, Wichura's algorithm AS241 (Appl. Statist. 37(3), 1988), accurate
/// to about 1 part in 1e16. `u <= 0` gives `-inf` (or NaN below 0), `u >= 1` `+inf`.
#[inline]
pub fn inverse_norm_cdf(u: f64) -> f64 {
    const SPLIT1: f64 = 0.425;
    const SPLIT2: f64 = 5.0;
    const CONST1: f64 = 0.180625;
    const CONST2: f64 = 1.6;
    const A: [f64; 8] = [
        3.3871328727963666080E0,
        1.3314166789178437745E+2,
        1.9715909503065514427E+3,
        1.3731693765509461125E+4,
        4.5921953931549871457E+4,
        6.7265770927008700853E+4,
        3.3430575583588128105E+4,
        2.5090809287301226727E+3,
    ];
    const B: [f64; 8] = [
        1.0,
        4.2313330701600911252E+1,
        6.8718700749205790830E+2,
        5.3941960214247511077E+3,
        2.1213794301586595867E+4,
        3.9307895800092710610E+4,
        2.8729085735721942674E+4,
        5.2264952788528545610E+3,
    ];
    const C: [f64; 8] = [
        1.42343711074968357734E0,
        4.63033784615654529590E0,
        5.76949722146069140550E0,
        3.64784832476320460504E0,
        1.27045825245236838258E0,
        2.41780725177450611770E-1,
        2.27238449892691845833E-2,
        7.74545014278341407640E-4,
    ];
    const D: [f64; 8] = [
        1.0,
        2.05319162663775882187E0,
        1.67638483018380384940E0,
        6.89767334985100004550E-1,
        1.48103976427480074590E-1,
        1.51986665636164571966E-2,
        5.47593808499534494600E-4,
        1.05075007164441684324E-9,
    ];
    const E: [f64; 8] = [
        6.65790464350110377720E0,
        5.46378491116411436990E0,
        1.78482653991729133580E0,
        2.96560571828504891230E-1,
        2.65321895265761230930E-2,
        1.24266094738807843860E-3,
        2.71155556874348757815E-5,
        2.01033439929228813265E-7,
    ];
    const F: [f64; 8] = [
        1.0,
        5.99832206555887937690E-1,
        1.36929880922735805310E-1,
        1.48753612908506148525E-2,
        7.86869131145613259100E-4,
        1.84631831751005468180E-5,
        1.42151175831644588870E-7,
        2.04426310338993978564E-15,
    ];
    #[inline(always)]
    fn horner(c: &[f64; 8], r: f64) -> f64 {
        ((((((c[7] * r + c[6]) * r + c[5]) * r + c[4]) * r + c[3]) * r + c[2]) * r + c[1]) * r + c[0]
    }
    if u <= 0.0 {
        return u.ln();
    }
    if u >= 1.0 {
        return (1.0 - u).ln();
    }
    let q = u - 0.5;
    if q.abs() <= SPLIT1 {
        let r = CONST1 - q * q;
        return q * horner(&A, r) / horner(&B, r);
    }
    let r = if q < 0.0 { u } else { 1.0 - u };
    let mut r = (-r.ln()).sqrt();
    let ret = if r < SPLIT2 {
        r -= CONST2;
        horner(&C, r) / horner(&D, r)
    } else {
        r -= SPLIT2;
        horner(&E, r) / horner(&F, r)
    };
    if q < 0.0 {
        -ret
    } else {
        ret
    }
}
