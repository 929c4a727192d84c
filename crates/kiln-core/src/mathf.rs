//! `exp`, `tanh` and the logistic sigmoid in `f32`, written to vectorise: no branches (every
//! special case is a comparison and a select), no table, no libm call, no fused multiply-add,
//! only IEEE `+ - * /`, comparisons and integer bit operations. A loop that applies them to a
//! slice auto-vectorises at the baseline x86-64 (SSE2) target and wider where the caller is
//! compiled for AVX2; because nothing is fused, every target gives the same bits.
//!
//! These are the element-wise definitions of [`MapOp::apply`](crate::backend::MapOp::apply)
//! (CUDA's `expf`/`tanhf` agree to a few ulp, not bitwise). Accuracy against the
//! correctly-rounded result, measured over every `f32` input by kiln-cpu's ignored test
//! `mathf_max_ulp_exhaustive`: `exp` within 1.02 ulp, `tanh` within 1.5 ulp, `sigmoid` within
//! 2.5 ulp wherever its result is a normal number (it is `+0` at and below `x = -88.7228`,
//! where `e^-x` overflows). Special values are those of
//! `f32::exp`/`f32::tanh`: NaN stays NaN, `exp(-inf) = 0`, `exp(+inf) = +inf`, overflow to
//! `+inf` above `ln(f32::MAX)`, gradual underflow to subnormals and then `+0`,
//! `tanh(±0) = ±0`, `tanh(±inf) = ±1`, subnormal inputs give `tanh(x) = x`, `exp(x) = 1`.
//!
//! Why not a crate: the SIMD math crates either need nightly (`sleef`), compute in a fixed
//! vector type with their own special-value rules and no stated accuracy bound (`wide`),
//! trade accuracy for speed by design (`fast-math`, `micromath`), or give SIMD types but no
//! transcendental functions (`pulp`). A scalar function the compiler vectorises keeps one
//! definition for the scalar reference and the vector loop.

/// log2(e), rounded to f32.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// 1.5 * 2^23: adding it rounds a float of magnitude < 2^22 to an integer (nearest-even),
/// which then sits in the low mantissa bits.
const ROUND_MAGIC: f32 = 12_582_912.0;
/// ln 2 split: `LN2_HI` has 12 significant bits, so `k * LN2_HI` is exact for `|k| < 2^12`.
const LN2_HI: f32 = f32::from_bits(0x3f31_7000); // 0.693115234375
const LN2_LO: f32 = f32::from_bits(0x3805_fdf4); // ln 2 - LN2_HI, rounded
/// Taylor coefficients 1/n! of `e^r - 1 - r = r^2 (E2 + r E3 + ... + r^5 E7)`; on
/// `|r| <= ln2/2` the truncation error is below 6e-9 relative, a tenth of an ulp.
const E2: f32 = 0.5;
const E3: f32 = f32::from_bits(0x3e2a_aaab); // 1/6
const E4: f32 = f32::from_bits(0x3d2a_aaab); // 1/24
const E5: f32 = f32::from_bits(0x3c08_8889); // 1/120
const E6: f32 = f32::from_bits(0x3ab6_0b61); // 1/720
const E7: f32 = f32::from_bits(0x3950_0d01); // 1/5040

/// `(k, e^r - 1)` with `x = k ln2 + r`, `|r| <= ln2/2 + tiny`, for `|x| < 2^21` (NaN gives
/// NaN in the second value and an unspecified `k`). `x - k*LN2_HI` is exact (Sterbenz), so
/// `r` carries one rounding; `e^r - 1 = r + r^2 q(r)` keeps full relative accuracy near 0.
#[inline(always)]
fn reduce_expm1(x: f32) -> (i32, f32) {
    let t = x * LOG2E + ROUND_MAGIC;
    let kf = t - ROUND_MAGIC;
    let k = (t.to_bits() as i32).wrapping_sub(ROUND_MAGIC.to_bits() as i32);
    let r = (x - kf * LN2_HI) - kf * LN2_LO;
    let q = E2 + r * (E3 + r * (E4 + r * (E5 + r * (E6 + r * E7))));
    (k, r + (r * r) * q)
}

/// `2^k` for `-126 <= k <= 127`, from its exponent bits (other `k` give an unspecified
/// value, never a panic).
#[inline(always)]
fn pow2i(k: i32) -> f32 {
    f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

/// `e^x` in `f32`, within 1.02 ulp; special values as `f32::exp` (see the module docs).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // Clamp without touching NaN (comparisons with NaN are false): e^-104 is below half the
    // smallest subnormal (so rounds to +0) and e^89 above f32::MAX (so rounds to +inf).
    let x = if x < -104.0 { -104.0 } else { x };
    let x = if x > 89.0 { 89.0 } else { x };
    let (k, u) = reduce_expm1(x);
    let p = 1.0 + u;
    // 2^k for k in [-150, 128] as two normal factors; p * s1 is exact, the second product
    // rounds once (to a subnormal, to +0 or to +inf where the result is out of range).
    let k1 = k >> 1;
    p * pow2i(k1) * pow2i(k - k1)
}

/// Odd minimax-style fit `tanh x = x + x^3 P(x^2)` on `|x| < TANH_SMALL` (least squares on
/// Chebyshev nodes, weighted for relative error; 0.78 ulp in f32 Horner).
const TANH_SMALL: f32 = 0.625;
const T1: f32 = f32::from_bits(0xbeaa_aa99); // -0.33333281
const T2: f32 = f32::from_bits(0x3e08_838c); // 0.13331431
const T3: f32 = f32::from_bits(0xbd5c_1d97); // -0.053739157
const T4: f32 = f32::from_bits(0x3ca9_10bc); // 0.020637862
const T5: f32 = f32::from_bits(0xbbba_e8fa); // -0.0057040425

/// `tanh(x)` in `f32`, within 1.5 ulp; special values as `f32::tanh` (see the module docs).
///
/// Below `|x| = 0.625` an odd polynomial (the quotient below would lose an ulp to the
/// rounding of `d + 2` there); above it `tanh|x| = d / (d + 2)` with `d = e^{2|x|} - 1` from
/// the same reduction as [`exp`] (`d = 2^k u + (2^k - 1)`, exact but for the last add). Both
/// are computed and one selected, so the loop has no branch. The sign is copied back, so
/// `-0.0` stays `-0.0`.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let s = a * a;
    let small = a + a * (s * (T1 + s * (T2 + s * (T3 + s * (T4 + s * T5)))));
    // tanh(10) rounds to 1 in f32 (1 - tanh(x) < 2^-25 above x = 9.02); NaN passes.
    let c = if a > 10.0 { 10.0 } else { a };
    let (k, u) = reduce_expm1(c + c);
    let p = pow2i(k); // k in [0, 29]: 2^k - 1 is exact
    let d = p * u + (p - 1.0);
    let large = d / (d + 2.0);
    let y = if a < TANH_SMALL { small } else { large };
    y.copysign(x)
}

/// The logistic sigmoid `1 / (1 + e^-x)` in `f32` with [`exp`], within 2.5 ulp where the
/// result is normal (the same expression with a correctly rounded `expf` is within about
/// 2.1: where `e^-x` sits low in its binade the quotient doubles its error in ulps of the
/// result); `sigmoid(-inf) = 0`, `sigmoid(+inf) = 1`, NaN stays NaN, and `+0` at and below
/// `x = -88.7228`, where `e^-x` overflows.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_values_match_std() {
        let xs = [
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            1e-40,
            -1e-40,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::from_bits(0x8000_0001),
            88.72283,
            88.72284,
            88.8,
            89.5,
            1e30,
            -87.33,
            -87.34,
            -100.0,
            -103.97,
            -103.98,
            -104.5,
            -1e30,
            9.0,
            9.02,
            -9.02,
            10.0,
            -20.0,
            f32::MAX,
            f32::MIN,
        ];
        for x in xs {
            let (e, w) = (exp(x), x.exp());
            assert!(
                (e.is_nan() && w.is_nan()) || e.to_bits() == w.to_bits() || ulps(e, w) <= 1,
                "exp({x:e}) = {e:e}, std {w:e}"
            );
            let (t, w) = (tanh(x), x.tanh());
            assert!(
                (t.is_nan() && w.is_nan()) || t.to_bits() == w.to_bits() || ulps(t, w) <= 2,
                "tanh({x:e}) = {t:e}, std {w:e}"
            );
            if w == 0.0 || w.is_infinite() || w.abs() == 1.0 {
                assert_eq!(t.to_bits(), w.to_bits(), "tanh({x:e}) sign or limit");
            }
        }
        // exact values and signs
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY).to_bits(), 0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert_eq!(exp(-104.0).to_bits(), 0);
        assert!(
            exp(-100.0) > 0.0 && exp(-100.0) < f32::MIN_POSITIVE,
            "gradual underflow"
        );
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(tanh(0.0).to_bits(), 0);
        assert_eq!(tanh(1e-40), 1e-40);
        assert_eq!(tanh(-1e-40), -1e-40);
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert!(exp(f32::NAN).is_nan() && tanh(f32::NAN).is_nan() && sigmoid(f32::NAN).is_nan());
        assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(sigmoid(-0.0), 0.5);
        assert_eq!(sigmoid(-100.0), 0.0);
        // zero exactly where the definition's e^-x overflows
        for b in 0xc2b1_7210u32..0xc2b1_7220 {
            let x = f32::from_bits(b);
            let def = 1.0 / (1.0 + (-x).exp());
            assert_eq!(sigmoid(x) == 0.0, def == 0.0, "sigmoid({x:e})");
            assert_eq!(exp(-x).is_infinite(), (-x).exp().is_infinite(), "exp({:e})", -x);
        }
        assert_eq!(sigmoid(100.0), 1.0);
    }

    /// Distance in representable f32 values (same sign, finite).
    fn ulps(a: f32, b: f32) -> u32 {
        if a.is_sign_negative() != b.is_sign_negative() {
            return u32::MAX;
        }
        a.to_bits().abs_diff(b.to_bits())
    }

    #[test]
    fn strided_sweep_against_f64() {
        // every 1021st bit pattern: about 4.2M inputs across all binades
        let mut worst = [0f64; 3];
        for bits in (0..=u32::MAX).step_by(1021) {
            let x = f32::from_bits(bits);
            if x.is_nan() {
                continue;
            }
            let xd = x as f64;
            for (i, (got, want)) in [
                (exp(x), xd.exp()),
                (tanh(x), xd.tanh()),
                (sigmoid(x), 1.0 / (1.0 + (-xd).exp())),
            ]
            .into_iter()
            .enumerate()
            {
                // ulps of the f32 result's binade; sigmoid only where its result is normal
                if i == 2 && want < f32::MIN_POSITIVE as f64 {
                    continue;
                }
                let e = ulp_err(got, want);
                worst[i] = worst[i].max(e);
                assert!(e <= 2.5, "op {i} x={x:e}: {got:e} vs {want:e} ({e} ulp)");
            }
        }
        assert!(worst[0] <= 1.02 && worst[1] <= 1.5, "exp, tanh {worst:?}");
    }

    /// `|got - want|` in units of the last place of `want` rounded to f32 (subnormal ulp
    /// below f32::MIN_POSITIVE; f32::MAX's ulp above it); inf equal to inf is 0.
    pub(crate) fn ulp_err(got: f32, want: f64) -> f64 {
        let w32 = want as f32;
        if got.is_infinite() || w32.is_infinite() {
            return if got as f64 == want || (got.is_infinite() && w32 == got) {
                0.0
            } else {
                f64::INFINITY
            };
        }
        let a = want.abs().max(f32::MIN_POSITIVE as f64).min(f32::MAX as f64);
        let ulp = 2f64.powi(a.log2().floor() as i32 - 23);
        (got as f64 - want).abs() / ulp
    }
}
