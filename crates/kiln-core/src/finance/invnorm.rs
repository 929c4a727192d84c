//! The inverse normal CDF the quasi-Monte Carlo paths use, written so that a CUDA kernel
//! reproduces every bit (`finance_qmc.cu`'s `kiln_inv_norm`).
//!
//! [`inv_norm_f32`] is Acklam's rational approximation (relative error below 1.15e-9 over
//! `(0, 1)`) evaluated in f64 with only IEEE add, multiply, divide and square root, each
//! rounded once to nearest even and in the order written below (no fused multiply-adds:
//! the kernel writes `__dmul_rn`/`__dadd_rn`, which are never contracted), and the tails'
//! logarithm [`ln_f64`] likewise (fdlibm's `log`, minus the special cases). The result is
//! rounded once to f32: within one f32 ulp of the true quantile (the f64 error is under
//! 1/50 of an f32 ulp, so almost every value is the correctly rounded one).
//!
//! [`inv_norm_f64`] is the CPU reference: the same start and one Halley step with `libm`'s
//! `erfc`, relative error about 1e-15; it is not meant to match the GPU bitwise.
//!
//! The inputs are the uniforms `(2w + 1) 2^-33` of [`crate::philox::uniform_f64`]: normal
//! f64 numbers in `[2^-33, 1 - 2^-33]`, and `1 - u` is exact, so the upper tail is the exact
//! mirror of the lower one (`inv(1 - u) == -inv(u)` bit for bit).

const LN2_HI: u64 = 0x3fe6_2e42_fee0_0000;
const LN2_LO: u64 = 0x3dea_39ef_3579_3c76;
const LG: [u64; 7] = [
    0x3fe5_5555_5555_5593,
    0x3fd9_9999_9997_fa04,
    0x3fd2_4924_9422_9359,
    0x3fcc_71c5_1d8e_78af,
    0x3fc7_4664_96cb_03de,
    0x3fc3_9a09_d078_c69f,
    0x3fc2_f112_df3e_5244,
];

#[inline(always)]
fn c(bits: u64) -> f64 {
    f64::from_bits(bits)
}

/// `ln(x)` for a normal, positive, finite `x` (fdlibm's algorithm, every operation rounded
/// once in the order written; under 1 ulp). Not for zero, subnormals, negatives or infinity.
#[inline]
pub fn ln_f64(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut hx = (bits >> 32) as u32;
    // Reduce x into [sqrt(2)/2, sqrt(2)): x = 2^k m.
    hx = hx.wrapping_add(0x3ff0_0000 - 0x3fe6_a09e);
    let k = (hx >> 20) as i32 - 0x3ff;
    hx = (hx & 0x000f_ffff) + 0x3fe6_a09e;
    let m = f64::from_bits((u64::from(hx) << 32) | (bits & 0xffff_ffff));
    let f = m - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (c(LG[1]) + w * (c(LG[3]) + w * c(LG[5])));
    let t2 = z * (c(LG[0]) + w * (c(LG[2]) + w * (c(LG[4]) + w * c(LG[6]))));
    let r = t2 + t1;
    let dk = f64::from(k);
    s * (hfsq + r) + dk * c(LN2_LO) - hfsq + f + dk * c(LN2_HI)
}

#[allow(clippy::excessive_precision)] // Acklam's published coefficients, as published
const A: [f64; 6] = [
    -3.969_683_028_665_376e1,
    2.209_460_984_245_205e2,
    -2.759_285_104_469_687e2,
    1.383_577_518_672_69e2,
    -3.066_479_806_614_716e1,
    2.506_628_277_459_239,
];
#[allow(clippy::excessive_precision)] // Acklam's published coefficients, as published
const B: [f64; 5] = [
    -5.447_609_879_822_406e1,
    1.615_858_368_580_409e2,
    -1.556_989_798_598_866e2,
    6.680_131_188_771_972e1,
    -1.328_068_155_288_572e1,
];
#[allow(clippy::excessive_precision)] // Acklam's published coefficients, as published
const C: [f64; 6] = [
    -7.784_894_002_430_293e-3,
    -3.223_964_580_411_365e-1,
    -2.400_758_277_161_838,
    -2.549_732_539_343_734,
    4.374_664_141_464_968,
    2.938_163_982_698_783,
];
#[allow(clippy::excessive_precision)] // Acklam's published coefficients, as published
const D: [f64; 4] = [
    7.784_695_709_041_462e-3,
    3.224_671_290_700_398e-1,
    2.445_134_137_142_996,
    3.754_408_661_907_416,
];
/// Where Acklam's central region ends.
const P_LOW: f64 = 0.02425;

/// The lower tail at `p` in `(0, P_LOW)`: `q = sqrt(-2 ln p)`, a rational function of `q`.
#[inline(always)]
fn tail(p: f64) -> f64 {
    let q = (-2.0 * ln_f64(p)).sqrt();
    let num = ((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5];
    let den = (((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0;
    num / den
}

/// Acklam's approximation of the normal quantile at `u` in `(0, 1)`, in f64 (relative
/// error < 1.15e-9), operation order as the kernel's.
#[inline]
pub fn inv_norm_acklam(u: f64) -> f64 {
    if u < P_LOW {
        tail(u)
    } else if u > 1.0 - P_LOW {
        -tail(1.0 - u)
    } else {
        let q = u - 0.5;
        let r = q * q;
        let num = (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q;
        let den = ((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0;
        num / den
    }
}

/// The normal quantile rounded to f32: what both engines feed the Brownian bridge.
#[inline]
pub fn inv_norm_f32(u: f64) -> f32 {
    inv_norm_acklam(u) as f32
}

/// The normal quantile in full f64 (CPU reference): Acklam, then one Halley step on
/// `Phi(x) - u` with `libm`'s `erfc`.
pub fn inv_norm_f64(u: f64) -> f64 {
    let x = inv_norm_acklam(u);
    let e = 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2) - u;
    let t = e * (2.0 * std::f64::consts::PI).sqrt() * (0.5 * x * x).exp();
    x - t / (1.0 + 0.5 * x * t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finance::norm_cdf;
    use crate::philox::uniform_f64;

    /// Words across the whole range, the extremes included.
    fn words() -> Vec<u32> {
        let mut w: Vec<u32> = vec![0, 1, 2, 3, 1000, u32::MAX, u32::MAX - 1, 0x8000_0000, 0x7fff_ffff];
        let mut x = 0x1234_5678u32;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            w.push(x);
            w.push(x >> (x % 31)); // small words: the lower tail
        }
        w
    }

    #[test]
    fn ln_is_within_an_ulp_of_std() {
        for w in words() {
            let u = uniform_f64(w);
            let (a, b) = (ln_f64(u), u.ln());
            assert!((a - b).abs() <= b.abs() * 2.3e-16, "ln({u}) = {a}, std {b}");
        }
        assert_eq!(ln_f64(1.0), 0.0);
        assert!((ln_f64(std::f64::consts::E) - 1.0).abs() < 3e-16);
    }

    #[test]
    fn the_reference_inverts_the_cdf() {
        for w in words() {
            let u = uniform_f64(w);
            let x = inv_norm_f64(u);
            let back = if u < 0.5 { norm_cdf(x) } else { 1.0 - norm_cdf(x) };
            let want = if u < 0.5 { u } else { 1.0 - u };
            assert!((back - want).abs() <= 1e-13 * want, "u {u}: x {x}, cdf {back}");
        }
    }

    #[test]
    fn acklam_error_and_f32_rounding() {
        let mut exact = 0usize;
        let ws = words();
        for &w in &ws {
            let u = uniform_f64(w);
            let r = inv_norm_f64(u);
            let a = inv_norm_acklam(u);
            assert!(
                (a - r).abs() <= 1.2e-9 * r.abs().max(1e-300) + 1e-300,
                "u {u}: {a} vs {r}"
            );
            let f = inv_norm_f32(u);
            let correctly = r as f32;
            let ulps = (f.to_bits() as i64 - correctly.to_bits() as i64).abs();
            assert!(ulps <= 1, "u {u}: f32 {f} vs correctly rounded {correctly}");
            exact += usize::from(ulps == 0);
            // the upper tail mirrors the lower bit for bit
            assert_eq!(
                inv_norm_acklam(uniform_f64(!w)).to_bits(),
                (-a).to_bits(),
                "w {w}"
            );
        }
        assert!(
            exact * 100 >= ws.len() * 99,
            "{exact} of {} correctly rounded",
            ws.len()
        );
        // the extremes: u = 2^-33 is about -6.2 sigma
        let lo = inv_norm_f32(uniform_f64(0));
        assert!((-6.4..-6.1).contains(&lo), "{lo}");
    }
}
