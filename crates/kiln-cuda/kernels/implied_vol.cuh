#line 1 "implied_vol.cuh"
// Implied volatility of one European quote (implied_vol.cu's kernels run it over a book):
// Peter Jäckel's "Let's Be Rational" as kiln-core ports it (kiln_core::finance::implied, its
// lbr.rs and special.rs; the licence notice of Jäckel's code is kept there), operation for
// operation and in the same order, so that each volatility is the CPU solver's:
//
// Copyright © 2013-2014 Peter Jäckel.
// Permission to use, copy, modify, and distribute this software is freely granted,
// provided that this notice is preserved.
// WARRANTY DISCLAIMER: the Software is provided "as is" without warranty of any kind.
//
// Exactness contract: every f64 operation below is the CPU solver's, in its order; the module
// is compiled with --fmad=false (Module::options), so no multiply and add are contracted
// (Rust never contracts), and f64 division and sqrt are IEEE. What can differ on a GPU is the
// library functions exp, log and pow (CUDA's are within 1 ulp, glibc's are correctly rounded
// in practice), so the GPU's volatilities agree with the CPU's to a few ulp, not bitwise;
// compiled for the host over tests/emu/cuda_host_stub.h with the host's libm (the CPU
// solver's exp and ln), the kernels give the CPU solver's bits (tests/host_emulation.rs).
//
// Code size: the solver is long (Cody's erfc/erfcx, two series, three Householder loops), so
// the functions called from many places (b(x, s), the normal CDF, erfc, the expansions, the
// steps on b) are __noinline__: one copy each, which the warps at every call site share in
// the instruction cache, where inlining put a copy at each site. Inlining or not changes no
// operation, so no bit.
#if defined(__USE_FAST_MATH__) && __USE_FAST_MATH__
#error "implied_vol.cuh must be compiled without --use_fast_math (CPU agreement)"
#endif

#define IV_DBL_EPSILON 2.220446049250313e-16
#define IV_DBL_MIN 2.2250738585072014e-308
#define IV_DBL_MAX 1.7976931348623157e308
#define IV_SQRT_DBL_MIN 1.4916681462400413e-154
#define IV_SQRT_DBL_MAX 1.3407807929942596e154
#define IV_FOURTH_ROOT_DBL_EPSILON 0.0001220703125
#define IV_SIXTEENTH_ROOT_DBL_EPSILON 0.10511205190671433
#define IV_DENORMALIZATION_CUTOFF 0.0
#define IV_ASYMPTOTIC_THRESHOLD (-10.0)
#define IV_SMALL_T_THRESHOLD (2.0 * IV_SIXTEENTH_ROOT_DBL_EPSILON)
#define IV_SQRT_TWO_PI 2.5066282746310007
#define IV_TWO_PI 6.283185307179586
#define IV_SQRT_PI_OVER_TWO 1.2533141373155003
#define IV_SQRT_THREE 1.7320508075688772
#define IV_SQRT_ONE_OVER_THREE 0.5773502691896257
#define IV_TWO_PI_OVER_SQRT_TWENTY_SEVEN 1.2091995761561452
#define IV_PI_OVER_SIX 0.5235987755982989
#define IV_ONE_OVER_SQRT_TWO_PI 0.3989422804014327
#define IV_ONE_OVER_SQRT_TWO 0.7071067811865476
#define IV_MIN_RC_CONTROL (-0.9999999850988388)
#define IV_MAX_RC_CONTROL 4.056481920730334e31
#define IV_MAXIMUM_ITERATIONS 2

// exp and log: inline (the default), or with -DKILN_IV_OUTLINE_LIBM (KILN_NVRTC_EXTRA, an
// experiment's knob) one out-of-line copy each, which shrinks the code again by a third at
// the cost of a call per use. The same functions either way, so the same bits.
#if defined(KILN_IV_OUTLINE_LIBM)
__device__ __noinline__ double iv_exp(double x) { return exp(x); }
__device__ __noinline__ double iv_log(double x) { return log(x); }
#else
__device__ __forceinline__ double iv_exp(double x) { return exp(x); }
__device__ __forceinline__ double iv_log(double x) { return log(x); }
#endif

// ---- special.rs: Cody's erfc / erfcx, the normal CDF and its inverse ----

__device__ __forceinline__ double iv_exp_minus_square(double y) {
    const double ysq = trunc(y * 16.0) / 16.0;
    const double del = (y - ysq) * (y + ysq);
    return iv_exp(-ysq * ysq) * iv_exp(-del);
}

// Cody's CALERF for erfc (erfcx = false) and erfcx (erfcx = true).
__device__ __noinline__ double iv_calerf(double x, bool erfcx) {
    const double A[5] = {3.1611237438705656, 113.864154151050156, 377.485237685302021,
                         3209.37758913846947, 0.185777706184603153};
    const double B[4] = {23.6012909523441209, 244.024637934444173, 1282.61652607737228,
                         2844.23683343917062};
    const double C[9] = {0.564188496988670089, 8.88314979438837594, 66.1191906371416295,
                         298.635138197400131, 881.95222124176909, 1712.04761263407058,
                         2051.07837782607147, 1230.33935479799725, 2.15311535474403846e-8};
    const double D[8] = {15.7449261107098347, 117.693950891312499, 537.181101862009858,
                         1621.38957456669019, 3290.79923573345963, 4362.61909014324716,
                         3439.36767414372164, 1230.33935480374942};
    const double P[6] = {0.305326634961232344, 0.360344899949804439, 0.125781726111229246,
                         0.0160837851487422766, 6.58749161529837803e-4, 0.0163153871373020978};
    const double Q[5] = {2.56852019228982242, 1.87295284992346047, 0.527905102951428412,
                         0.0605183413124413191, 0.00233520497626869185};
    const double SQRPI = 0.56418958354775628695;
    const double THRESH = 0.46875;
    const double XINF = 1.79e308;
    const double XNEG = -26.628;
    const double XSMALL = 1.11e-16;
    const double XBIG = 26.543;
    const double XHUGE = 6.71e7;
    const double XMAX = 2.53e307;
    const double y = fabs(x);
    double result;
    if (y <= THRESH) {
        const double ysq = y > XSMALL ? y * y : 0.0;
        double xnum = A[4] * ysq;
        double xden = ysq;
        for (int i = 0; i < 3; ++i) {
            xnum = (xnum + A[i]) * ysq;
            xden = (xden + B[i]) * ysq;
        }
        result = 1.0 - x * (xnum + A[3]) / (xden + B[3]);
        if (erfcx) result *= iv_exp(ysq);
        return result;
    } else if (y <= 4.0) {
        double xnum = C[8] * y;
        double xden = y;
        for (int i = 0; i < 7; ++i) {
            xnum = (xnum + C[i]) * y;
            xden = (xden + D[i]) * y;
        }
        result = (xnum + C[7]) / (xden + D[7]);
        if (!erfcx) result *= iv_exp_minus_square(y);
    } else {
        result = 0.0;
        bool early = false;
        if (y >= XBIG) {
            if (!erfcx || y >= XMAX) {
                early = true;
            } else if (y >= XHUGE) {
                result = SQRPI / y;
                early = true;
            }
        }
        if (!early) {
            const double ysq = 1.0 / (y * y);
            double xnum = P[5] * ysq;
            double xden = ysq;
            for (int i = 0; i < 4; ++i) {
                xnum = (xnum + P[i]) * ysq;
                xden = (xden + Q[i]) * ysq;
            }
            result = ysq * (xnum + P[4]) / (xden + Q[4]);
            result = (SQRPI - result) / y;
            if (!erfcx) result *= iv_exp_minus_square(y);
        }
    }
    if (x < 0.0) {
        if (!erfcx) {
            result = 2.0 - result;
        } else if (x < XNEG) {
            result = XINF;
        } else {
            const double ysq = trunc(x * 16.0) / 16.0;
            const double del = (x - ysq) * (x + ysq);
            const double e = iv_exp(ysq * ysq) * iv_exp(del);
            result = (e + e) - result;
        }
    }
    return result;
}

__device__ __forceinline__ double iv_erfc(double x) { return iv_calerf(x, false); }
__device__ __forceinline__ double iv_erfcx(double x) { return iv_calerf(x, true); }

__device__ __forceinline__ double iv_norm_pdf(double x) {
    return IV_ONE_OVER_SQRT_TWO_PI * iv_exp(-0.5 * x * x);
}

__device__ __noinline__ double iv_norm_cdf(double z) {
    const double FIRST_THRESHOLD = -10.0;
    const double SECOND_THRESHOLD = -67108864.0;
    if (z <= FIRST_THRESHOLD) {
        double sum = 1.0;
        if (z >= SECOND_THRESHOLD) {
            const double zsqr = z * z;
            double i = 1.0, g = 1.0, lasta = IV_DBL_MAX;
            for (;;) {
                const double x = (4.0 * i - 3.0) / zsqr;
                const double y = x * ((4.0 * i - 1.0) / zsqr);
                double a = g * (x - y);
                sum -= a;
                g *= y;
                i += 1.0;
                a = fabs(a);
                if (!(lasta > a && a >= fabs(sum * IV_DBL_EPSILON))) break;
                lasta = a;
            }
        }
        return -iv_norm_pdf(z) * sum / z;
    }
    return 0.5 * iv_erfc(-z * IV_ONE_OVER_SQRT_TWO);
}

__device__ __forceinline__ double iv_horner8(const double* c, double r) {
    return ((((((c[7] * r + c[6]) * r + c[5]) * r + c[4]) * r + c[3]) * r + c[2]) * r + c[1]) * r + c[0];
}

// Wichura's AS241.
__device__ double iv_inverse_norm_cdf(double u) {
    const double SPLIT1 = 0.425, SPLIT2 = 5.0, CONST1 = 0.180625, CONST2 = 1.6;
    const double A[8] = {3.3871328727963666080E0, 1.3314166789178437745E+2, 1.9715909503065514427E+3,
                         1.3731693765509461125E+4, 4.5921953931549871457E+4, 6.7265770927008700853E+4,
                         3.3430575583588128105E+4, 2.5090809287301226727E+3};
    const double B[8] = {1.0, 4.2313330701600911252E+1, 6.8718700749205790830E+2,
                         5.3941960214247511077E+3, 2.1213794301586595867E+4, 3.9307895800092710610E+4,
                         2.8729085735721942674E+4, 5.2264952788528545610E+3};
    const double C[8] = {1.42343711074968357734E0, 4.63033784615654529590E0, 5.76949722146069140550E0,
                         3.64784832476320460504E0, 1.27045825245236838258E0, 2.41780725177450611770E-1,
                         2.27238449892691845833E-2, 7.74545014278341407640E-4};
    const double D[8] = {1.0, 2.05319162663775882187E0, 1.67638483018380384940E0,
                         6.89767334985100004550E-1, 1.48103976427480074590E-1, 1.51986665636164571966E-2,
                         5.47593808499534494600E-4, 1.05075007164441684324E-9};
    const double E[8] = {6.65790464350110377720E0, 5.46378491116411436990E0, 1.78482653991729133580E0,
                         2.96560571828504891230E-1, 2.65321895265761230930E-2, 1.24266094738807843860E-3,
                         2.71155556874348757815E-5, 2.01033439929228813265E-7};
    const double F[8] = {1.0, 5.99832206555887937690E-1, 1.36929880922735805310E-1,
                         1.48753612908506148525E-2, 7.86869131145613259100E-4, 1.84631831751005468180E-5,
                         1.42151175831644588870E-7, 2.04426310338993978564E-15};
    if (u <= 0.0) return iv_log(u);
    if (u >= 1.0) return iv_log(1.0 - u);
    const double q = u - 0.5;
    if (fabs(q) <= SPLIT1) {
        const double r = CONST1 - q * q;
        return q * iv_horner8(A, r) / iv_horner8(B, r);
    }
    double r = q < 0.0 ? u : 1.0 - u;
    r = sqrt(-iv_log(r));
    double ret;
    if (r < SPLIT2) {
        r -= CONST2;
        ret = iv_horner8(C, r) / iv_horner8(D, r);
    } else {
        r -= SPLIT2;
        ret = iv_horner8(E, r) / iv_horner8(F, r);
    }
    return q < 0.0 ? -ret : ret;
}

// ---- lbr.rs: the normalised Black function and its inverse ----

__device__ __forceinline__ double iv_square(double x) { return x * x; }
__device__ __forceinline__ bool iv_is_below_horizon(double x) { return fabs(x) < IV_DENORMALIZATION_CUTOFF; }

__device__ __forceinline__ double iv_householder_factor(double newton, double halley, double hh3) {
    return (1.0 + 0.5 * halley * newton) / (1.0 + newton * (halley + hh3 * newton / 6.0));
}

__device__ double iv_normalised_intrinsic(double x, double q) {
    if (q * x <= 0.0) return 0.0;
    const double x2 = x * x;
    const double sign = q < 0.0 ? -1.0 : 1.0;
    if (x2 < 98.0 * IV_FOURTH_ROOT_DBL_EPSILON) {
        const double series =
            x * (1.0 + x2 * ((1.0 / 24.0) + x2 * ((1.0 / 1920.0) + x2 * ((1.0 / 322560.0) + (1.0 / 92897280.0) * x2))));
        return fabs(fmax(sign * series, 0.0));
    }
    const double b_max = iv_exp(0.5 * x);
    return fabs(fmax(sign * (b_max - 1.0 / b_max), 0.0));
}

__device__ double iv_black_using_norm_cdf(double x, double s) {
    const double h = x / s;
    const double t = 0.5 * s;
    const double b_max = iv_exp(0.5 * x);
    const double b = iv_norm_cdf(h + t) * b_max - iv_norm_cdf(h - t) / b_max;
    return fabs(fmax(b, 0.0));
}

__device__ __noinline__ double iv_asymptotic_expansion(double h, double t) {
    const double e = (t / h) * (t / h);
    const double r = (h + t) * (h - t);
    const double q = (h / r) * (h / r);
    const double asymptotic_expansion_sum = 2.0+q*(-6.0E0-2.0*e+3.0*q*(1.0E1+e*(2.0E1+2.0*e)+5.0*q*(-1.4E1+e*(-7.0E1+e*(-4.2E1-2.0*e))+7.0*q*(1.8E1+e*(1.68E2+e*(2.52E2+e*(7.2E1+2.0*e)))+9.0*q*(-2.2E1+e*(-3.3E2+e*(-9.24E2+e*(-6.6E2+e*(-1.1E2-2.0*e))))+1.1E1*q*(2.6E1+e*(5.72E2+e*(2.574E3+e*(3.432E3+e*(1.43E3+e*(1.56E2+2.0*e)))))+1.3E1*q*(-3.0E1+e*(-9.1E2+e*(-6.006E3+e*(-1.287E4+e*(-1.001E4+e*(-2.73E3+e*(-2.1E2-2.0*e))))))+1.5E1*q*(3.4E1+e*(1.36E3+e*(1.2376E4+e*(3.8896E4+e*(4.862E4+e*(2.4752E4+e*(4.76E3+e*(2.72E2+2.0*e)))))))+1.7E1*q*(-3.8E1+e*(-1.938E3+e*(-2.3256E4+e*(-1.00776E5+e*(-1.84756E5+e*(-1.51164E5+e*(-5.4264E4+e*(-7.752E3+e*(-3.42E2-2.0*e))))))))+1.9E1*q*(4.2E1+e*(2.66E3+e*(4.0698E4+e*(2.3256E5+e*(5.8786E5+e*(7.05432E5+e*(4.0698E5+e*(1.08528E5+e*(1.197E4+e*(4.2E2+2.0*e)))))))))+2.1E1*q*(-4.6E1+e*(-3.542E3+e*(-6.7298E4+e*(-4.90314E5+e*(-1.63438E6+e*(-2.704156E6+e*(-2.288132E6+e*(-9.80628E5+e*(-2.01894E5+e*(-1.771E4+e*(-5.06E2-2.0*e))))))))))+2.3E1*q*(5.0E1+e*(4.6E3+e*(1.0626E5+e*(9.614E5+e*(4.08595E6+e*(8.9148E6+e*(1.04006E7+e*(6.53752E6+e*(2.16315E6+e*(3.542E5+e*(2.53E4+e*(6.0E2+2.0*e)))))))))))+2.5E1*q*(-5.4E1+e*(-5.85E3+e*(-1.6146E5+e*(-1.77606E6+e*(-9.37365E6+e*(-2.607579E7+e*(-4.01166E7+e*(-3.476772E7+e*(-1.687257E7+e*(-4.44015E6+e*(-5.9202E5+e*(-3.51E4+e*(-7.02E2-2.0*e))))))))))))+2.7E1*q*(5.8E1+e*(7.308E3+e*(2.3751E5+e*(3.12156E6+e*(2.003001E7+e*(6.919458E7+e*(1.3572783E8+e*(1.5511752E8+e*(1.0379187E8+e*(4.006002E7+e*(8.58429E6+e*(9.5004E5+e*(4.7502E4+e*(8.12E2+2.0*e)))))))))))))+2.9E1*q*(-6.2E1+e*(-8.99E3+e*(-3.39822E5+e*(-5.25915E6+e*(-4.032015E7+e*(-1.6934463E8+e*(-4.1250615E8+e*(-6.0108039E8+e*(-5.3036505E8+e*(-2.8224105E8+e*(-8.870433E7+e*(-1.577745E7+e*(-1.472562E6+e*(-6.293E4+e*(-9.3E2-2.0*e))))))))))))))+3.1E1*q*(6.6E1+e*(1.0912E4+e*(4.74672E5+e*(8.544096E6+e*(7.71342E7+e*(3.8707344E8+e*(1.14633288E9+e*(2.07431664E9+e*(2.33360622E9+e*(1.6376184E9+e*(7.0963464E8+e*(1.8512208E8+e*(2.7768312E7+e*(2.215136E6+e*(8.184E4+e*(1.056E3+2.0*e)))))))))))))))+3.3E1*(-7.0E1+e*(-1.309E4+e*(-6.49264E5+e*(-1.344904E7+e*(-1.4121492E8+e*(-8.344518E8+e*(-2.9526756E9+e*(-6.49588632E9+e*(-9.0751353E9+e*(-8.1198579E9+e*(-4.6399188E9+e*(-1.6689036E9+e*(-3.67158792E8+e*(-4.707164E7+e*(-3.24632E6+e*(-1.0472E5+e*(-1.19E3-2.0*e)))))))))))))))))*q))))))))))))))));
    const double b = IV_ONE_OVER_SQRT_TWO_PI * iv_exp(-0.5 * (h * h + t * t)) * (t / r) * asymptotic_expansion_sum;
    return fabs(fmax(b, 0.0));
}

__device__ __noinline__ double iv_small_t_expansion(double h, double t) {
    const double a = 1.0 + h * (0.5 * IV_SQRT_TWO_PI) * iv_erfcx(-IV_ONE_OVER_SQRT_TWO * h);
    const double w = t * t;
    const double h2 = h * h;
    const double expansion = 2.0*t*(a+w*((-1.0+3.0*a+a*h2)/6.0+w*((-7.0+15.0*a+h2*(-1.0+10.0*a+a*h2))/120.0+w*((-57.0+105.0*a+h2*(-18.0+105.0*a+h2*(-1.0+21.0*a+a*h2)))/5040.0+w*((-561.0+945.0*a+h2*(-285.0+1260.0*a+h2*(-33.0+378.0*a+h2*(-1.0+36.0*a+a*h2))))/362880.0+w*((-6555.0+10395.0*a+h2*(-4680.0+17325.0*a+h2*(-840.0+6930.0*a+h2*(-52.0+990.0*a+h2*(-1.0+55.0*a+a*h2)))))/39916800.0+((-89055.0+135135.0*a+h2*(-82845.0+270270.0*a+h2*(-20370.0+135135.0*a+h2*(-1926.0+25740.0*a+h2*(-75.0+2145.0*a+h2*(-1.0+78.0*a+a*h2))))))*w)/6227020800.0))))));
    const double b = IV_ONE_OVER_SQRT_TWO_PI * iv_exp(-0.5 * (h * h + t * t)) * expansion;
    return fabs(fmax(b, 0.0));
}

__device__ double iv_black_using_erfcx(double h, double t) {
    const double b = 0.5 * iv_exp(-0.5 * (h * h + t * t)) *
                     (iv_erfcx(-IV_ONE_OVER_SQRT_TWO * (h + t)) - iv_erfcx(-IV_ONE_OVER_SQRT_TWO * (h - t)));
    return fabs(fmax(b, 0.0));
}

// b(x, s) for a call; x > 0 by put-call parity on the out-of-the-money put.
__device__ __noinline__ double iv_normalised_black_call(double x, double s) {
    double plus = 0.0;
    bool itm = false;
    if (x > 0.0) {
        plus = iv_normalised_intrinsic(x, 1.0);
        itm = true;
        x = -x;
    }
    const double ax = fabs(x);
    double b;
    if (s <= ax * IV_DENORMALIZATION_CUTOFF) {
        b = iv_normalised_intrinsic(x, 1.0);
    } else if (x < s * IV_ASYMPTOTIC_THRESHOLD &&
               0.5 * s * s + x < s * (IV_SMALL_T_THRESHOLD + IV_ASYMPTOTIC_THRESHOLD)) {
        b = iv_asymptotic_expansion(x / s, 0.5 * s);
    } else if (0.5 * s < IV_SMALL_T_THRESHOLD) {
        b = iv_small_t_expansion(x / s, 0.5 * s);
    } else if (x + 0.5 * s * s > s * 0.85) {
        b = iv_black_using_norm_cdf(x, s);
    } else {
        b = iv_black_using_erfcx(x / s, 0.5 * s);
    }
    return itm ? plus + b : b;
}

__device__ double iv_normalised_vega(double x, double s) {
    const double ax = fabs(x);
    if (ax <= 0.0) return IV_ONE_OVER_SQRT_TWO_PI * iv_exp(-0.125 * s * s);
    if (s <= 0.0 || s <= ax * IV_SQRT_DBL_MIN) return 0.0;
    return IV_ONE_OVER_SQRT_TWO_PI * iv_exp(-0.5 * (iv_square(x / s) + iv_square(0.5 * s)));
}

__device__ void iv_f_lower_map(double x, double s, double* f_out, double* fp_out, double* fpp_out) {
    const double ax = fabs(x);
    const double z = IV_SQRT_ONE_OVER_THREE * ax / s;
    const double y = z * z;
    const double s2 = s * s;
    const double phi_cdf = iv_norm_cdf(-z);
    const double phi = iv_norm_pdf(z);
    const double fpp = IV_PI_OVER_SIX * y / (s2 * s) * phi_cdf *
                       (8.0 * IV_SQRT_THREE * s * ax + (3.0 * s2 * (s2 - 8.0) - 8.0 * x * x) * phi_cdf / phi) *
                       iv_exp(2.0 * y + 0.25 * s2);
    double f, fp;
    if (iv_is_below_horizon(s)) {
        fp = 1.0;
        f = 0.0;
    } else {
        const double phi2 = phi_cdf * phi_cdf;
        fp = IV_TWO_PI * y * phi2 * iv_exp(y + 0.125 * s * s);
        f = iv_is_below_horizon(x) ? 0.0 : IV_TWO_PI_OVER_SQRT_TWENTY_SEVEN * ax * (phi2 * phi_cdf);
    }
    *f_out = f;
    *fp_out = fp;
    *fpp_out = fpp;
}

__device__ void iv_f_upper_map(double x, double s, double* f_out, double* fp_out, double* fpp_out) {
    const double f = iv_norm_cdf(-0.5 * s);
    *f_out = f;
    if (iv_is_below_horizon(x)) {
        *fp_out = -0.5;
        *fpp_out = 0.0;
    } else {
        const double w = iv_square(x / s);
        *fp_out = -0.5 * iv_exp(0.5 * w);
        *fpp_out = IV_SQRT_PI_OVER_TWO * iv_exp(w + 0.125 * s * s) * w / s;
    }
}

__device__ double iv_inverse_f_lower_map(double x, double f) {
    if (iv_is_below_horizon(f)) return 0.0;
    return fabs(x / (IV_SQRT_THREE *
                     iv_inverse_norm_cdf(pow(f / (IV_TWO_PI_OVER_SQRT_TWENTY_SEVEN * fabs(x)), 1.0 / 3.0))));
}

__device__ __forceinline__ double iv_inverse_f_upper_map(double f) { return -2.0 * iv_inverse_norm_cdf(f); }

__device__ __forceinline__ bool iv_is_zero(double x) { return fabs(x) < IV_DBL_MIN; }

__device__ double iv_rational_cubic_interpolation(double x, double x_l, double x_r, double y_l, double y_r,
                                                  double d_l, double d_r, double r) {
    const double h = x_r - x_l;
    if (fabs(h) <= 0.0) return 0.5 * (y_l + y_r);
    const double t = (x - x_l) / h;
    if (!(r >= IV_MAX_RC_CONTROL)) {
        const double omt = 1.0 - t;
        const double t2 = t * t;
        const double omt2 = omt * omt;
        return (y_r * t2 * t + (r * y_r - h * d_r) * t2 * omt + (r * y_l + h * d_l) * t * omt2 + y_l * omt2 * omt) /
               (1.0 + (r - 3.0) * t * omt);
    }
    return y_r * t + y_l * (1.0 - t);
}

__device__ double iv_rc_control_left(double x_l, double x_r, double y_l, double y_r, double d_l, double d_r,
                                     double second_derivative_l) {
    const double h = x_r - x_l;
    const double numerator = 0.5 * h * second_derivative_l + (d_r - d_l);
    if (iv_is_zero(numerator)) return 0.0;
    const double denominator = (y_r - y_l) / h - d_l;
    if (iv_is_zero(denominator)) return numerator > 0.0 ? IV_MAX_RC_CONTROL : IV_MIN_RC_CONTROL;
    return numerator / denominator;
}

__device__ double iv_rc_control_right(double x_l, double x_r, double y_l, double y_r, double d_l, double d_r,
                                      double second_derivative_r) {
    const double h = x_r - x_l;
    const double numerator = 0.5 * h * second_derivative_r + (d_r - d_l);
    if (iv_is_zero(numerator)) return 0.0;
    const double denominator = d_r - (y_r - y_l) / h;
    if (iv_is_zero(denominator)) return numerator > 0.0 ? IV_MAX_RC_CONTROL : IV_MIN_RC_CONTROL;
    return numerator / denominator;
}

__device__ double iv_minimum_rc_control(double d_l, double d_r, double s, bool prefer_shape_preservation) {
    const bool monotonic = d_l * s >= 0.0 && d_r * s >= 0.0;
    const bool convex = d_l <= s && s <= d_r;
    const bool concave = d_l >= s && s >= d_r;
    if (!monotonic && !convex && !concave) return IV_MIN_RC_CONTROL;
    const double d_r_m_d_l = d_r - d_l;
    const double d_r_m_s = d_r - s;
    const double s_m_d_l = s - d_l;
    double r1 = -IV_DBL_MAX;
    double r2 = r1;
    if (monotonic) {
        if (!iv_is_zero(s)) {
            r1 = (d_r + d_l) / s;
        } else if (prefer_shape_preservation) {
            r1 = IV_MAX_RC_CONTROL;
        }
    }
    if (convex || concave) {
        if (!(iv_is_zero(s_m_d_l) || iv_is_zero(d_r_m_s))) {
            r2 = fmax(fabs(d_r_m_d_l / d_r_m_s), fabs(d_r_m_d_l / s_m_d_l));
        } else if (prefer_shape_preservation) {
            r2 = IV_MAX_RC_CONTROL;
        }
    } else if (monotonic && prefer_shape_preservation) {
        r2 = IV_MAX_RC_CONTROL;
    }
    return fmax(IV_MIN_RC_CONTROL, fmax(r1, r2));
}

__device__ double iv_convex_rc_control_left(double x_l, double x_r, double y_l, double y_r, double d_l, double d_r,
                                            double second_derivative_l, bool prefer_shape_preservation) {
    const double r = iv_rc_control_left(x_l, x_r, y_l, y_r, d_l, d_r, second_derivative_l);
    const double r_min = iv_minimum_rc_control(d_l, d_r, (y_r - y_l) / (x_r - x_l), prefer_shape_preservation);
    return fmax(r, r_min);
}

__device__ double iv_convex_rc_control_right(double x_l, double x_r, double y_l, double y_r, double d_l, double d_r,
                                             double second_derivative_r, bool prefer_shape_preservation) {
    const double r = iv_rc_control_right(x_l, x_r, y_l, y_r, d_l, d_r, second_derivative_r);
    const double r_min = iv_minimum_rc_control(d_l, d_r, (y_r - y_l) / (x_r - x_l), prefer_shape_preservation);
    return fmax(r, r_min);
}

// A Householder iteration inside a bracket [s_left, s_right] (lbr.rs's Iteration).
struct IvIteration {
    double s, ds, ds_previous, s_left, s_right;
    unsigned iterations, direction_reversal_count;

    __device__ bool guard() {
        if (ds * ds_previous < 0.0) direction_reversal_count += 1;
        if (iterations > 0 && (direction_reversal_count == 3 || !(s > s_left && s < s_right))) {
            s = 0.5 * (s_left + s_right);
            if (s_right - s_left <= IV_DBL_EPSILON * s) return false;
            direction_reversal_count = 0;
            ds = 0.0;
        }
        ds_previous = ds;
        return true;
    }

    __device__ void tighten(double b, double beta) {
        if (b > beta && s < s_right) {
            s_right = s;
        } else if (b < beta && s > s_left) {
            s_left = s;
        }
    }

    __device__ void step(double d) {
        ds = fmax(d, -0.5 * s);
        s += ds;
        iterations += 1;
    }

    __device__ bool running(unsigned n) const { return iterations < n && fabs(ds) > IV_DBL_EPSILON * s; }
};

// lbr.rs's unchecked_normalised_implied_volatility, cut where its way through diverges: the
// start (iv_start) computes the central point (s_c, b_c, v_c) and one outer point, which
// classify the quote into one of four ways (IV_WAY_*); each way's rest (iv_solve_*) is a
// function of its own, so a kernel that runs one way holds only that way's code. Run
// together (iv_solve) they are the CPU's function operation for operation.
#define IV_WAY_LOWER 0     // beta < b_l: the lower map, then Householder steps on ln b
#define IV_WAY_LOW_MID 1   // b_l <= beta < b_c: rational cubic on [s_l, s_c], then steps on b
#define IV_WAY_HIGH_MID 2  // b_c <= beta <= b_h: rational cubic on [s_c, s_h], then steps on b
#define IV_WAY_UPPER 3     // beta > b_h: the upper map, then steps on ln(b_max - b) or on b
#define IV_WAYS 4
#define IV_WAY_DONE 4      // no solve: the quote's result is known from its checks

// What the start leaves for a way's rest: the normalised problem (x <= 0 after the flips,
// beta) and the bracket's points; s_o, b_o are s_l, b_l (LOWER, LOW_MID) or s_h, b_h
// (HIGH_MID, UPPER).
struct IvStart {
    double x, beta, s_c, b_c, v_c, s_o, b_o;
};

__device__ __forceinline__ IvIteration iv_iteration() {
    IvIteration it;
    it.s = -IV_DBL_MAX;
    it.ds = -IV_DBL_MAX;
    it.ds_previous = 0.0;
    it.s_left = IV_DBL_MIN;
    it.s_right = IV_DBL_MAX;
    it.iterations = 0;
    it.direction_reversal_count = 0;
    return it;
}

// The start for b(x, s) = beta with sign q: a way, with *st filled; or IV_WAY_DONE with
// *above = true where the price is at or above the maximum (the CPU's None), else (beta at
// or below the horizon) the volatility is 0.
__device__ int iv_start(double beta, double x, double q, IvStart* st, bool* above) {
    *above = false;
    if (q * x > 0.0) {
        beta = fabs(fmax(beta - iv_normalised_intrinsic(x, q), 0.0));
        q = -q;
    }
    if (q < 0.0) x = -x;
    if (beta <= 0.0 || beta < IV_DENORMALIZATION_CUTOFF) return IV_WAY_DONE;
    const double b_max = iv_exp(0.5 * x);
    if (beta >= b_max) {
        *above = true;
        return IV_WAY_DONE;
    }
    st->x = x;
    st->beta = beta;
    const double s_c = sqrt(fabs(2.0 * x));
    const double b_c = iv_normalised_black_call(x, s_c);
    const double v_c = iv_normalised_vega(x, s_c);
    st->s_c = s_c;
    st->b_c = b_c;
    st->v_c = v_c;
    if (beta < b_c) {
        const double s_l = s_c - b_c / v_c;
        const double b_l = iv_normalised_black_call(x, s_l);
        st->s_o = s_l;
        st->b_o = b_l;
        return beta < b_l ? IV_WAY_LOWER : IV_WAY_LOW_MID;
    }
    const double s_h = v_c > IV_DBL_MIN ? s_c + (b_max - b_c) / v_c : s_c;
    const double b_h = iv_normalised_black_call(x, s_h);
    st->s_o = s_h;
    st->b_o = b_h;
    return beta <= b_h ? IV_WAY_HIGH_MID : IV_WAY_UPPER;
}

// Householder steps on b itself, from it.s inside [it.s_left, it.s_right].
__device__ __noinline__ double iv_steps_on_b(IvIteration it, double x, double beta, unsigned n) {
    while (it.running(n)) {
        if (!it.guard()) break;
        const double s = it.s;
        const double b = iv_normalised_black_call(x, s);
        const double bp = iv_normalised_vega(x, s);
        it.tighten(b, beta);
        const double newton = (beta - b) / bp;
        const double halley = iv_square(x / s) / s - s / 4.0;
        const double hh3 = halley * halley - 3.0 * iv_square(x / (s * s)) - 0.25;
        it.step(newton * iv_householder_factor(newton, halley, hh3));
    }
    return it.s;
}

__device__ double iv_solve_lower(const IvStart& st, unsigned n) {
    const double x = st.x, beta = st.beta, s_l = st.s_o, b_l = st.b_o;
    IvIteration it = iv_iteration();
    double f_lower_map_l, d_f_lower_map_l_d_beta, d2_f_lower_map_l_d_beta2;
    iv_f_lower_map(x, s_l, &f_lower_map_l, &d_f_lower_map_l_d_beta, &d2_f_lower_map_l_d_beta2);
    const double r_ll = iv_convex_rc_control_right(0.0, b_l, 0.0, f_lower_map_l, 1.0, d_f_lower_map_l_d_beta,
                                                   d2_f_lower_map_l_d_beta2, true);
    double f =
        iv_rational_cubic_interpolation(beta, 0.0, b_l, 0.0, f_lower_map_l, 1.0, d_f_lower_map_l_d_beta, r_ll);
    if (!(f > 0.0)) {
        const double t = beta / b_l;
        f = (f_lower_map_l * t + b_l * (1.0 - t)) * t;
    }
    it.s = iv_inverse_f_lower_map(x, f);
    it.s_right = s_l;
    while (it.running(n)) {
        if (!it.guard()) break;
        const double s = it.s;
        const double b = iv_normalised_black_call(x, s);
        const double bp = iv_normalised_vega(x, s);
        it.tighten(b, beta);
        double ds;
        if (b <= 0.0 || bp <= 0.0) {
            ds = 0.5 * (it.s_left + it.s_right) - s;
        } else {
            const double ln_b = iv_log(b);
            const double ln_beta = iv_log(beta);
            const double bpob = bp / b;
            const double h = x / s;
            const double b_halley = h * h / s - s / 4.0;
            const double newton = (ln_beta - ln_b) * ln_b / ln_beta / bpob;
            const double halley = b_halley - bpob * (1.0 + 2.0 / ln_b);
            const double b_hh3 = b_halley * b_halley - 3.0 * iv_square(h / s) - 0.25;
            const double hh3 = b_hh3 + 2.0 * iv_square(bpob) * (1.0 + 3.0 / ln_b * (1.0 + 1.0 / ln_b)) -
                               3.0 * b_halley * bpob * (1.0 + 2.0 / ln_b);
            ds = newton * iv_householder_factor(newton, halley, hh3);
        }
        it.step(ds);
    }
    return it.s;
}

__device__ double iv_solve_low_mid(const IvStart& st, unsigned n) {
    const double x = st.x, beta = st.beta, s_c = st.s_c, b_c = st.b_c, v_c = st.v_c, s_l = st.s_o, b_l = st.b_o;
    IvIteration it = iv_iteration();
    const double v_l = iv_normalised_vega(x, s_l);
    const double r_lm = iv_convex_rc_control_right(b_l, b_c, s_l, s_c, 1.0 / v_l, 1.0 / v_c, 0.0, false);
    it.s = iv_rational_cubic_interpolation(beta, b_l, b_c, s_l, s_c, 1.0 / v_l, 1.0 / v_c, r_lm);
    it.s_left = s_l;
    it.s_right = s_c;
    return iv_steps_on_b(it, x, beta, n);
}

__device__ double iv_solve_high_mid(const IvStart& st, unsigned n) {
    const double x = st.x, beta = st.beta, s_c = st.s_c, b_c = st.b_c, v_c = st.v_c, s_h = st.s_o, b_h = st.b_o;
    IvIteration it = iv_iteration();
    const double v_h = iv_normalised_vega(x, s_h);
    const double r_hm = iv_convex_rc_control_left(b_c, b_h, s_c, s_h, 1.0 / v_c, 1.0 / v_h, 0.0, false);
    it.s = iv_rational_cubic_interpolation(beta, b_c, b_h, s_c, s_h, 1.0 / v_c, 1.0 / v_h, r_hm);
    it.s_left = s_c;
    it.s_right = s_h;
    return iv_steps_on_b(it, x, beta, n);
}

__device__ double iv_solve_upper(const IvStart& st, unsigned n) {
    const double x = st.x, beta = st.beta, s_h = st.s_o, b_h = st.b_o;
    const double b_max = iv_exp(0.5 * x);
    IvIteration it = iv_iteration();
    double f_upper_map_h, d_f_upper_map_h_d_beta, d2_f_upper_map_h_d_beta2;
    iv_f_upper_map(x, s_h, &f_upper_map_h, &d_f_upper_map_h_d_beta, &d2_f_upper_map_h_d_beta2);
    double f = -IV_DBL_MAX;
    if (d2_f_upper_map_h_d_beta2 > -IV_SQRT_DBL_MAX && d2_f_upper_map_h_d_beta2 < IV_SQRT_DBL_MAX) {
        const double r_hh = iv_convex_rc_control_left(b_h, b_max, f_upper_map_h, 0.0, d_f_upper_map_h_d_beta, -0.5,
                                                      d2_f_upper_map_h_d_beta2, true);
        f = iv_rational_cubic_interpolation(beta, b_h, b_max, f_upper_map_h, 0.0, d_f_upper_map_h_d_beta, -0.5,
                                            r_hh);
    }
    if (f <= 0.0) {
        const double h = b_max - b_h;
        const double t = (beta - b_h) / h;
        f = (f_upper_map_h * (1.0 - t) + 0.5 * h * t) * (1.0 - t);
    }
    it.s = iv_inverse_f_upper_map(f);
    it.s_left = s_h;
    if (!(beta > 0.5 * b_max)) return iv_steps_on_b(it, x, beta, n);
    while (it.running(n)) {
        if (!it.guard()) break;
        const double s = it.s;
        const double b = iv_normalised_black_call(x, s);
        const double bp = iv_normalised_vega(x, s);
        it.tighten(b, beta);
        double ds;
        if (b >= b_max || bp <= IV_DBL_MIN) {
            ds = 0.5 * (it.s_left + it.s_right) - s;
        } else {
            const double b_max_minus_b = b_max - b;
            const double g = iv_log((b_max - beta) / b_max_minus_b);
            const double gp = bp / b_max_minus_b;
            const double b_halley = iv_square(x / s) / s - s / 4.0;
            const double b_hh3 = b_halley * b_halley - 3.0 * iv_square(x / (s * s)) - 0.25;
            const double newton = -g / gp;
            const double halley = b_halley + gp;
            const double hh3 = b_hh3 + gp * (2.0 * gp + 3.0 * b_halley);
            ds = newton * iv_householder_factor(newton, halley, hh3);
        }
        it.step(ds);
    }
    return it.s;
}

// The total volatility of a started quote of way `way` (< IV_WAYS).
__device__ __forceinline__ double iv_solve(int way, const IvStart& st, unsigned n) {
    switch (way) {
    case IV_WAY_LOWER: return iv_solve_lower(st, n);
    case IV_WAY_LOW_MID: return iv_solve_low_mid(st, n);
    case IV_WAY_HIGH_MID: return iv_solve_high_mid(st, n);
    default: return iv_solve_upper(st, n);
    }
}

// ---- implied.rs: one quote, checks and the move to forward terms ----

__device__ __forceinline__ bool iv_finite(double v) { return fabs(v) <= IV_DBL_MAX; }

// ln(F/K): of the ratio where it is a normal f64, else ln F - ln K.
__device__ __forceinline__ double iv_log_moneyness(double forward, double strike) {
    const double ratio = forward / strike;
    const double a = fabs(ratio);
    if (a >= IV_DBL_MIN && a <= IV_DBL_MAX) return iv_log(ratio);
    return iv_log(forward) - iv_log(strike);
}

// The reason codes (NoVolatility::index).
#define IV_OK 0
#define IV_NOT_FINITE 1
#define IV_NOT_POSITIVE 2
#define IV_OUT_OF_RANGE 3
#define IV_BELOW_INTRINSIC 4
#define IV_AT_INTRINSIC 5
#define IV_ABOVE_UPPER_BOUND 6

// The first part of implied_volatility(price, spot, strike, maturity, rate, dividend, kind):
// the checks, the move to forward terms and the solver's start (iv_start). Returns the
// quote's way, with *st filled, or IV_WAY_DONE with its reason code in *code (never IV_OK:
// a quote is solved only by a way's rest).
__device__ int iv_quote_start(double price, double spot, double strike, double maturity, double rate,
                              double dividend, bool put, IvStart* st, int* code) {
    *code = IV_OK;
    if (!iv_finite(price) || !iv_finite(spot) || !iv_finite(strike) || !iv_finite(maturity) || !iv_finite(rate) ||
        !iv_finite(dividend)) {
        *code = IV_NOT_FINITE;
        return IV_WAY_DONE;
    }
    if (!(price > 0.0) || !(spot > 0.0) || !(strike > 0.0) || !(maturity > 0.0)) {
        *code = IV_NOT_POSITIVE;
        return IV_WAY_DONE;
    }
    const double df = iv_exp(-rate * maturity);
    if (!(iv_finite(df) && df > 0.0)) {
        *code = IV_OUT_OF_RANGE;
        return IV_WAY_DONE;
    }
    const double forward = spot * iv_exp((rate - dividend) * maturity);
    if (!(iv_finite(forward) && forward > 0.0)) {
        *code = IV_OUT_OF_RANGE;
        return IV_WAY_DONE;
    }
    const double spot_df = spot * iv_exp(-dividend * maturity);
    const double strike_df = strike * df;
    const double q = put ? -1.0 : 1.0;
    const double intrinsic = fmax(q * (spot_df - strike_df), 0.0);
    const double bound = put ? strike_df : spot_df;
    int reason = IV_OK;
    if (price < intrinsic && intrinsic - price <= 4.0 * IV_DBL_EPSILON * intrinsic) reason = IV_AT_INTRINSIC;
    else if (price < intrinsic) reason = IV_BELOW_INTRINSIC;
    else if (price >= bound) reason = IV_ABOVE_UPPER_BOUND;
    if (reason != IV_OK) {
        *code = reason;
        return IV_WAY_DONE;
    }
    const double fwd_price = price / df;
    if (!iv_finite(fwd_price)) {
        *code = IV_OUT_OF_RANGE;
        return IV_WAY_DONE;
    }
    // solve_forward
    const double fwd_intrinsic = fmax(q * (forward - strike), 0.0);
    const double fwd_bound = put ? strike : forward;
    if (fwd_price <= fwd_intrinsic) {
        *code = IV_AT_INTRINSIC;
        return IV_WAY_DONE;
    }
    if (fwd_price >= fwd_bound) {
        *code = IV_ABOVE_UPPER_BOUND;
        return IV_WAY_DONE;
    }
    const double x = iv_log_moneyness(forward, strike);
    double p = fwd_price;
    double qq = q;
    if (qq * x > 0.0) {
        p = fmax(p - fwd_intrinsic, 0.0);
        qq = -qq;
    }
    const double beta = p / (sqrt(forward) * sqrt(strike));
    bool above;
    const int way = iv_start(beta, x, qq, st, &above);
    if (way == IV_WAY_DONE) *code = above ? IV_ABOVE_UPPER_BOUND : IV_AT_INTRINSIC;
    return way;
}

// The last part of implied_volatility: total volatility s to the volatility in *vol and
// IV_OK, or a reason code.
__device__ __forceinline__ int iv_quote_finish(double s, double maturity, double* vol) {
    if (s > 0.0) {
        *vol = s / sqrt(maturity);
        return IV_OK;
    }
    return IV_AT_INTRINSIC;
}

// implied_volatility(price, spot, strike, maturity, rate, dividend, kind) whole: the
// volatility in *vol and 0, or a reason code.
__device__ __forceinline__ int iv_implied_volatility(double price, double spot, double strike, double maturity,
                                                     double rate, double dividend, bool put, double* vol) {
    IvStart st;
    int code;
    const int way = iv_quote_start(price, spot, strike, maturity, rate, dividend, put, &st, &code);
    if (way == IV_WAY_DONE) return code;
    return iv_quote_finish(iv_solve(way, st, IV_MAXIMUM_ITERATIONS), maturity, vol);
}
