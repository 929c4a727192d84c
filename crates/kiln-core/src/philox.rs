//! Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
//! SC'11), the uniform and normal conversions kiln's Monte Carlo uses, and the portable f32
//! math (`ln`, `sincos`, `exp`) they need, written so that a CUDA kernel reproduces every
//! bit. Nothing here allocates.
//!
//! # The generator
//!
//! One call maps a 128-bit counter `c = [c0, c1, c2, c3]` and a 64-bit key `k = [k0, k1]` to
//! four `u32` words. Each of the ten rounds is, with `M0 = 0xD2511F53`, `M1 = 0xCD9E8D57`:
//!
//! ```text
//! (hi0, lo0) = 64-bit product M0 * c0 split in halves      (CUDA: __umulhi, and M0 * c0)
//! (hi1, lo1) = 64-bit product M1 * c2 split in halves
//! c = [hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0]
//! ```
//!
//! and before rounds 2..=10 the key is bumped: `k0 += 0x9E3779B9`, `k1 += 0xBB67AE85`
//! (wrapping). This is Random123's `philox4x32_R(10, c, k)`; the known-answer vectors of
//! Random123's `kat_vectors` are tests below.
//!
//! # How a stream is addressed (the contract the CUDA kernel implements)
//!
//! A Monte Carlo normal is a pure function of `(seed, option, sample, step)`:
//!
//! ```text
//! key     = [seed as u32, (seed >> 32) as u32]          (low word first)
//! counter = [step / 4, sample, option, 0]                (c3 = 0 is reserved: path normals)
//! words   = philox4x32_10(counter, key)                  -> [w0, w1, w2, w3]
//! normals = [r_a cos t_a, r_a sin t_a, r_b cos t_b, r_b sin t_b]
//!           where (r_a, t_a) come from (w0, w1) and (r_b, t_b) from (w2, w3) (Box-Muller)
//! z(step) = normals[step % 4]
//! ```
//!
//! `option` is the option's index in the portfolio (or a caller-chosen id), `sample` the
//! index of the independent sample: the path index, or with antithetic variates the pair
//! index (both paths of pair `k` use the normals of sample `k`, the second one negated).
//! Because nothing else enters, a price does not depend on the device, the number of
//! devices or threads, the chunk size or the batch size.
//!
//! # Uniforms
//!
//! [`uniform_f32`]: `j = (w >> 8) | 1` (an odd 24-bit integer), `u = j * 2^-24`: both steps
//! are exact, so `u` is in `[2^-24, 1 - 2^-24]`, never 0 or 1, and CUDA reproduces it
//! (`__uint2float_rn(j) * 0x1p-24f`). [`uniform_f64`] is `(2w + 1) * 2^-33`, also exact, in
//! `[2^-33, 1 - 2^-33]`; [`uniform_f64_53`] takes two words for 52 random bits.
//!
//! # Normals (f32): bitwise reproducible
//!
//! `logf`/`sinf`/`cosf` differ between glibc and CUDA in the last ulp, so [`box_muller_f32`]
//! does not call them. It uses [`ln_f32`] and [`sincos_turns_f32`], which use only integer
//! operations, IEEE-754 f32 add, multiply, square root and fused multiply-add (each rounded
//! once, to nearest even), and sign flips, evaluated in the exact order written in their
//! docs, with the constants given by bit pattern. A CUDA kernel that writes the same sequence
//! with `__fadd_rn`, `__fmul_rn`, `__fmaf_rn`, `__fsqrt_rn` (which are never contracted or
//! reassociated) and no flush-to-zero produces the same bits. [`exp_f32`] follows the same
//! rules, so f32 paths are bitwise identical on both backends too. (`a.mul_add(b, c)` in the
//! formulas is the fused `a * b + c`; the CPU backend runs these loops with the FMA
//! instruction where the processor has one, and `mul_add` is exact either way.)
//!
//! Contract version 2 (2026-12-02): the polynomials are evaluated with fused multiply-adds and
//! `ln_f32` has no division (a Cephes-style polynomial in `m - 1`), which cuts the GPU's
//! instructions a normal by about a third. Version 1 (unfused, `s = f / (2 + f)`) gave other
//! bits, so prices from before and after differ in the last digits (within the standard
//! error, as any two seeds do).
//!
//! ```text
//! r = sqrt(-2 * ln_f32(uniform_f32(w_even)))
//! (s, c) = sincos_turns_f32(w_odd)          // sin and cos of 2*pi*uniform_f32(w_odd)
//! (z_even, z_odd) = (r * c, r * s)
//! ```
//!
//! The f64 normals ([`box_muller_f64`], [`normals4_f64`]) use the same words with
//! [`uniform_f64`] and the platform's `ln`, `sin`, `cos`: they agree between CPU and GPU to
//! f64 rounding, not bitwise.

/// Philox multiplier for words 0/1.
pub const PHILOX_M0: u32 = 0xD251_1F53;
/// Philox multiplier for words 2/3.
pub const PHILOX_M1: u32 = 0xCD9E_8D57;
/// Weyl increment of key word 0.
pub const PHILOX_W0: u32 = 0x9E37_79B9;
/// Weyl increment of key word 1.
pub const PHILOX_W1: u32 = 0xBB67_AE85;

/// Normals one Philox call yields (the `step / 4` of the stream mapping).
pub const NORMALS_PER_CALL: u32 = 4;

#[inline(always)]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = u64::from(a) * u64::from(b);
    ((p >> 32) as u32, p as u32)
}

#[inline(always)]
fn round(c: [u32; 4], k: [u32; 2]) -> [u32; 4] {
    let (hi0, lo0) = mulhilo(PHILOX_M0, c[0]);
    let (hi1, lo1) = mulhilo(PHILOX_M1, c[2]);
    [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
}

#[inline(always)]
fn bump(k: [u32; 2]) -> [u32; 2] {
    [k[0].wrapping_add(PHILOX_W0), k[1].wrapping_add(PHILOX_W1)]
}

/// Philox4x32 with `rounds` rounds (Random123's `philox4x32_R`). kiln uses 10.
#[inline]
pub fn philox4x32_r(rounds: u32, ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = ctr;
    let mut k = key;
    for r in 0..rounds {
        if r > 0 {
            k = bump(k);
        }
        c = round(c, k);
    }
    c
}

/// Philox4x32-10: four random words from a counter and a key.
#[inline]
pub fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    philox4x32_r(10, ctr, key)
}

/// Philox4x32-10 on `N` counters at once, structure-of-arrays (`ctr[word][lane]`), one key.
/// Lane `l` equals `philox4x32_10([ctr[0][l], .., ctr[3][l]], key)`; the layout lets the
/// compiler vectorise the rounds.
#[inline]
pub fn philox4x32_10_lanes<const N: usize>(ctr: &[[u32; N]; 4], key: [u32; 2]) -> [[u32; N]; 4] {
    let mut c = *ctr;
    let mut k = key;
    for r in 0..10 {
        if r > 0 {
            k = bump(k);
        }
        let mut n = [[0u32; N]; 4];
        for l in 0..N {
            let o = round([c[0][l], c[1][l], c[2][l], c[3][l]], k);
            n[0][l] = o[0];
            n[1][l] = o[1];
            n[2][l] = o[2];
            n[3][l] = o[3];
        }
        c = n;
    }
    c
}

/// The ten round keys of Philox4x32-10 for `key`: `[k0 of rounds 1..=10, k1 of rounds
/// 1..=10]` (round 1 uses `key`, each later round the previous plus the Weyl increments).
/// The GPU kernels take this schedule as a launch parameter instead of bumping the key in
/// every call.
#[allow(clippy::needless_range_loop)] // r indexes both rows
pub fn key_schedule(key: [u32; 2]) -> [[u32; 10]; 2] {
    let mut out = [[0u32; 10]; 2];
    let mut k = key;
    for r in 0..10 {
        out[0][r] = k[0];
        out[1][r] = k[1];
        k = bump(k);
    }
    out
}

/// The Philox key for a 64-bit seed: `[low 32 bits, high 32 bits]`.
#[inline]
pub fn key_from_seed(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

/// The counter of the call that yields normals `4*block .. 4*block+3` of `(option, sample)`.
#[inline]
pub fn stream_counter(block: u32, sample: u32, option: u32) -> [u32; 4] {
    [block, sample, option, 0]
}

/// `2^-24` and `2^-22`, exact.
const TWO_M24: f32 = 1.0 / 16_777_216.0;
const TWO_M22: f32 = 1.0 / 4_194_304.0;

/// A uniform in `[2^-24, 1 - 2^-24]` (never 0 or 1): `((w >> 8) | 1) * 2^-24`, exact.
#[inline(always)]
pub fn uniform_f32(w: u32) -> f32 {
    ((w >> 8) | 1) as f32 * TWO_M24
}

/// A uniform in `[2^-33, 1 - 2^-33]` from one word: `(2w + 1) * 2^-33`, exact.
#[inline(always)]
pub fn uniform_f64(w: u32) -> f64 {
    ((u64::from(w) << 1) | 1) as f64 * (1.0 / 8_589_934_592.0)
}

/// A uniform in `[2^-53, 1 - 2^-53]` from two words (52 random bits: all of `hi`, the top
/// 20 of `lo`): `(2k + 1) * 2^-53` with `k = hi << 20 | lo >> 12`, exact.
#[inline(always)]
pub fn uniform_f64_53(hi: u32, lo: u32) -> f64 {
    let k = (u64::from(hi) << 20) | u64::from(lo >> 12);
    ((k << 1) | 1) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

// ln_f32 constants (bit patterns for the CUDA side). The polynomial is Cephes' logf
// (S. L. Moshier, Cephes Math Library 2.2), for ln(1 + f) = f - f^2/2 + f^3 P(f) on
// [sqrt(1/2) - 1, sqrt(2) - 1].
const SQRT_HALF_BITS: u32 = 0x3f35_04f3; // sqrt(0.5) rounded to f32
const LN2_HI: f32 = f32::from_bits(0x3f31_8000); // 0.693359375 (9 significant bits)
const LN2_LO: f32 = f32::from_bits(0xb95e_8083); // ln 2 - LN2_HI = -2.12194440e-4, rounded
const LN_P: [f32; 9] = [
    f32::from_bits(0x3d90_21bb), //  7.0376836292e-2
    f32::from_bits(0xbdeb_d1b8), // -1.1514610310e-1
    f32::from_bits(0x3def_251a), //  1.1676998740e-1
    f32::from_bits(0xbdfe_5d4f), // -1.2420140846e-1
    f32::from_bits(0x3e11_e9bf), //  1.4249322787e-1
    f32::from_bits(0xbe2a_ae50), // -1.6668057665e-1
    f32::from_bits(0x3e4c_ceac), //  2.0000714765e-1
    f32::from_bits(0xbe7f_fffc), // -2.4999993993e-1
    f32::from_bits(0x3eaa_aaaa), //  3.3333331174e-1
];

/// Natural logarithm for positive, normal, finite `x` (kiln calls it on uniforms), within
/// about 2 ulp, from integer ops and IEEE f32 `+ *` and fused multiply-add only (no
/// division), in exactly this order:
///
/// ```text
/// ix = bits(x) - 0x3f3504f3            (wrapping u32)
/// k  = (ix as i32) >> 23               (arithmetic shift); kf = k as f32 (exact)
/// m  = from_bits(bits(x) - (ix & 0xff800000))   // m in [sqrt(1/2), sqrt(2))
/// f  = m - 1;  z = f * f
/// p  = P0;  p = p.mul_add(f, P1); ... p = p.mul_add(f, P8)     // 8 fused steps
/// y  = (f * z) * p
/// y  = kf.mul_add(LN2_LO, y);  y = (-0.5).mul_add(z, y)
/// ln = kf.mul_add(LN2_HI, f + y)
/// ```
#[inline(always)]
pub fn ln_f32(x: f32) -> f32 {
    let bits = x.to_bits();
    let ix = bits.wrapping_sub(SQRT_HALF_BITS);
    let k = (ix as i32) >> 23;
    let m = f32::from_bits(bits.wrapping_sub(ix & 0xff80_0000));
    let f = m - 1.0;
    let z = f * f;
    let mut p = LN_P[0];
    for &c in &LN_P[1..] {
        p = p.mul_add(f, c);
    }
    let kf = k as f32;
    let y = (f * z) * p;
    let y = kf.mul_add(LN2_LO, y);
    let y = (-0.5f32).mul_add(z, y);
    kf.mul_add(LN2_HI, f + y)
}

// sin/cos of (pi/2) r, Taylor coefficients of (pi/2)^n / n!, rounded to f32.
const S1: f32 = f32::from_bits(0x3fc9_0fdb);
const S3: f32 = f32::from_bits(0xbf25_5de7);
const S5: f32 = f32::from_bits(0x3da3_35e3);
const S7: f32 = f32::from_bits(0xbb99_6966);
const S9: f32 = f32::from_bits(0x3928_3c1a);
const C2: f32 = f32::from_bits(0xbf9d_e9e6);
const C4: f32 = f32::from_bits(0x3e81_e0f8);
const C6: f32 = f32::from_bits(0xbcaa_e9e4);
const C8: f32 = f32::from_bits(0x3a70_fa83);
const C10: f32 = f32::from_bits(0xb7d3_68f9);

/// `(sin, cos)` of `2*pi*uniform_f32(w)`, within about 2 ulp, reduced exactly in integers:
///
/// ```text
/// j  = (w >> 8) | 1                      // the angle is 2*pi*j / 2^24
/// q  = (j + 2^21) >> 22                  // nearest quarter turn, 0..=4
/// r  = (j as i32 - (q << 22) as i32) as f32 * 2^-22      // exact, in [-1/2, 1/2]
/// r2 = r * r                             // below, a.mul_add(b, c) is fused
/// s  = r * S9.mul_add(r2, S7).mul_add(r2, S5).mul_add(r2, S3).mul_add(r2, S1)     // sin(pi/2 r)
/// c  = C10.mul_add(r2, C8).mul_add(r2, C6).mul_add(r2, C4).mul_add(r2, C2).mul_add(r2, 1)
/// (sin, cos) = q & 1 ? (c, s) : (s, c); negate sin if q & 2, negate cos if (q + 1) & 2
/// ```
#[inline(always)]
pub fn sincos_turns_f32(w: u32) -> (f32, f32) {
    let j = (w >> 8) | 1;
    let q = (j + (1 << 21)) >> 22;
    let r = (j as i32 - (q << 22) as i32) as f32 * TWO_M22;
    let r2 = r * r;
    let s = r * S9.mul_add(r2, S7).mul_add(r2, S5).mul_add(r2, S3).mul_add(r2, S1);
    let c = C10
        .mul_add(r2, C8)
        .mul_add(r2, C6)
        .mul_add(r2, C4)
        .mul_add(r2, C2)
        .mul_add(r2, 1.0);
    let (sn, cs) = if q & 1 != 0 { (c, s) } else { (s, c) };
    let sn = f32::from_bits(sn.to_bits() ^ ((q & 2) << 30));
    let cs = f32::from_bits(cs.to_bits() ^ (((q + 1) & 2) << 30));
    (sn, cs)
}

// exp_f32 constants.
const LOG2E: f32 = f32::from_bits(0x3fb8_aa3b);
const ROUND_MAGIC: f32 = f32::from_bits(0x4b40_0000); // 1.5 * 2^23
const E2: f32 = f32::from_bits(0x3f00_0000); // 1/2!
const E3: f32 = f32::from_bits(0x3e2a_aaab); // 1/3!
const E4: f32 = f32::from_bits(0x3d2a_aaab);
const E5: f32 = f32::from_bits(0x3c08_8889);
const E6: f32 = f32::from_bits(0x3ab6_0b61);
const E7: f32 = f32::from_bits(0x3950_0d01); // 1/7!
                                             // exp's own split of ln 2 (12 significant bits + the rest): kf * EXP_LN2_HI is exact.
const EXP_LN2_HI: f32 = f32::from_bits(0x3f31_7000); // 0.693115234375
const EXP_LN2_LO: f32 = f32::from_bits(0x3805_fdf4); // ln 2 - EXP_LN2_HI, rounded

/// `e^x` for finite `x`, within about 2 ulp, clamped to `[-87, 88]` (so the result is
/// positive and finite; below `-87` it is `e^-87`), from IEEE f32 `+ - *`, fused
/// multiply-add and integer ops:
///
/// ```text
/// x  = min(max(x, -87), 88)
/// t  = x.mul_add(LOG2E, 1.5*2^23);  kf = t - 1.5*2^23   // kf = round-half-even(x log2 e)
/// k  = bits(t) - bits(1.5*2^23)                       // the same integer, as i32
/// r  = (-kf).mul_add(EXP_LN2_LO, (-kf).mul_add(EXP_LN2_HI, x))  // |r| <= ln2/2
/// p  = E7.mul_add(r, E6).mul_add(r, E5) ... .mul_add(r, E2).mul_add(r, 1).mul_add(r, 1)
/// e^x = p * from_bits((k + 127) << 23)                // times 2^k, exact
/// ```
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let t = x.mul_add(LOG2E, ROUND_MAGIC);
    let kf = t - ROUND_MAGIC;
    let k = (t.to_bits() as i32).wrapping_sub(ROUND_MAGIC.to_bits() as i32);
    let r = (-kf).mul_add(EXP_LN2_LO, (-kf).mul_add(EXP_LN2_HI, x));
    let p = E7
        .mul_add(r, E6)
        .mul_add(r, E5)
        .mul_add(r, E4)
        .mul_add(r, E3)
        .mul_add(r, E2)
        .mul_add(r, 1.0)
        .mul_add(r, 1.0);
    p * f32::from_bits(((k + 127) as u32) << 23)
}

/// Two standard normals from two words by Box-Muller, bitwise reproducible (see the module
/// docs): `[r cos t, r sin t]` with `r = sqrt(-2 ln_f32(uniform_f32(a)))` and
/// `t = 2*pi*uniform_f32(b)`.
#[inline(always)]
pub fn box_muller_f32(a: u32, b: u32) -> [f32; 2] {
    let r = (-2.0 * ln_f32(uniform_f32(a))).sqrt();
    let (s, c) = sincos_turns_f32(b);
    [r * c, r * s]
}

/// Two standard normals in f64 from two words: `[r cos t, r sin t]` with
/// `r = sqrt(-2 ln(uniform_f64(a)))`, `t = 2*pi*uniform_f64(b)`, using the platform's
/// `ln`/`sin`/`cos` (so CPU and GPU agree to f64 rounding, not bitwise).
#[inline]
pub fn box_muller_f64(a: u32, b: u32) -> [f64; 2] {
    let r = (-2.0 * uniform_f64(a).ln()).sqrt();
    let (s, c) = (std::f64::consts::TAU * uniform_f64(b)).sin_cos();
    [r * c, r * s]
}

/// The four f32 normals of one Philox call: `[box_muller_f32(w0, w1), box_muller_f32(w2, w3)]`.
#[inline(always)]
pub fn normals_from_words_f32(w: [u32; 4]) -> [f32; 4] {
    let [z0, z1] = box_muller_f32(w[0], w[1]);
    let [z2, z3] = box_muller_f32(w[2], w[3]);
    [z0, z1, z2, z3]
}

/// Normals `4*block .. 4*block+3` (f32) of the stream `(key, option, sample)`.
#[inline]
pub fn normals4_f32(key: [u32; 2], option: u32, sample: u32, block: u32) -> [f32; 4] {
    normals_from_words_f32(philox4x32_10(stream_counter(block, sample, option), key))
}

/// Normals `4*block .. 4*block+3` (f64) of the stream `(key, option, sample)`.
#[inline]
pub fn normals4_f64(key: [u32; 2], option: u32, sample: u32, block: u32) -> [f64; 4] {
    let w = philox4x32_10(stream_counter(block, sample, option), key);
    let [z0, z1] = box_muller_f64(w[0], w[1]);
    let [z2, z3] = box_muller_f64(w[2], w[3]);
    [z0, z1, z2, z3]
}

/// The f32 normal for `(seed, option, sample, step)`: `normals4_f32(..)[step % 4]`.
#[inline]
pub fn normal_f32(seed: u64, option: u32, sample: u32, step: u32) -> f32 {
    normals4_f32(key_from_seed(seed), option, sample, step / NORMALS_PER_CALL)
        [(step % NORMALS_PER_CALL) as usize]
}

/// The f64 normal for `(seed, option, sample, step)`: `normals4_f64(..)[step % 4]`.
#[inline]
pub fn normal_f64(seed: u64, option: u32, sample: u32, step: u32) -> f64 {
    normals4_f64(key_from_seed(seed), option, sample, step / NORMALS_PER_CALL)
        [(step % NORMALS_PER_CALL) as usize]
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // lanes index several arrays at once
mod tests {
    use super::*;

    /// Random123 `kat_vectors` (D. E. Shaw Research), the philox4x32 lines:
    /// `name rounds ctr[4] key[2] expected[4]`.
    /// (rounds, counter, key, expected).
    type Kat = (u32, [u32; 4], [u32; 2], [u32; 4]);

    const KAT: &[Kat] = &[
        (
            7,
            [0, 0, 0, 0],
            [0, 0],
            [0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48],
        ),
        (
            7,
            [u32::MAX; 4],
            [u32::MAX; 2],
            [0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662],
        ),
        (
            7,
            [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
            [0xa4093822, 0x299f31d0],
            [0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a],
        ),
        (
            10,
            [0, 0, 0, 0],
            [0, 0],
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
        ),
        (
            10,
            [u32::MAX; 4],
            [u32::MAX; 2],
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
        ),
        (
            10,
            [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
            [0xa4093822, 0x299f31d0],
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
        ),
    ];

    #[test]
    fn random123_known_answers() {
        for &(rounds, ctr, key, want) in KAT {
            assert_eq!(philox4x32_r(rounds, ctr, key), want, "{rounds} rounds, {ctr:x?}");
            if rounds == 10 {
                assert_eq!(philox4x32_10(ctr, key), want);
            }
        }
    }

    #[test]
    fn lanes_match_scalar() {
        let key = key_from_seed(0x0123_4567_89ab_cdef);
        let mut ctr = [[0u32; 8]; 4];
        for l in 0..8 {
            ctr[0][l] = 7;
            ctr[1][l] = 1000 + l as u32;
            ctr[2][l] = 3;
            ctr[3][l] = l as u32 * 0x1111_1111;
        }
        let out = philox4x32_10_lanes(&ctr, key);
        for l in 0..8 {
            let want = philox4x32_10([ctr[0][l], ctr[1][l], ctr[2][l], ctr[3][l]], key);
            assert_eq!([out[0][l], out[1][l], out[2][l], out[3][l]], want);
        }
    }

    #[test]
    fn uniforms_stay_inside_the_open_interval() {
        for w in [
            0u32,
            1,
            255,
            256,
            0x7fff_ffff,
            0x8000_0000,
            u32::MAX - 1,
            u32::MAX,
        ] {
            let u = uniform_f32(w);
            assert!(u > 0.0 && u < 1.0, "{w:#x} -> {u}");
            let d = uniform_f64(w);
            assert!(d > 0.0 && d < 1.0, "{w:#x} -> {d}");
            let e = uniform_f64_53(w, w);
            assert!(e > 0.0 && e < 1.0, "{w:#x} -> {e}");
        }
        assert_eq!(uniform_f32(0), 2f32.powi(-24));
        assert_eq!(uniform_f32(u32::MAX), 1.0 - 2f32.powi(-24));
        assert_eq!(uniform_f64(u32::MAX), 1.0 - 2f64.powi(-33));
        assert_eq!(uniform_f64_53(u32::MAX, u32::MAX), 1.0 - 2f64.powi(-53));
        // Over a Philox stream: mean 1/2, all inside.
        let key = key_from_seed(42);
        let (mut sum, n) = (0.0f64, 40_000u32);
        for i in 0..n {
            let w = philox4x32_10([i, 0, 0, 0], key);
            for x in w {
                let u = uniform_f32(x);
                assert!(u > 0.0 && u < 1.0);
                sum += f64::from(u);
            }
        }
        let mean = sum / f64::from(4 * n);
        assert!((mean - 0.5).abs() < 5.0 * (1.0 / 12.0f64 / f64::from(4 * n)).sqrt());
    }

    fn ulps(a: f32, exact: f64) -> f64 {
        let e = exact as f32;
        let ulp = f32::from_bits(e.abs().to_bits() + 1) - e.abs();
        (f64::from(a) - exact).abs() / f64::from(ulp)
    }

    #[test]
    fn key_schedule_is_the_rounds_keys() {
        let key = [0x1234_5678, 0x9abc_def0];
        let ks = key_schedule(key);
        assert_eq!((ks[0][0], ks[1][0]), (key[0], key[1]));
        for r in 1..10 {
            assert_eq!(ks[0][r], ks[0][r - 1].wrapping_add(PHILOX_W0));
            assert_eq!(ks[1][r], ks[1][r - 1].wrapping_add(PHILOX_W1));
        }
    }

    #[test]
    fn portable_math_is_accurate() {
        let mut worst = [0.0f64; 4];
        let mut w = 0x9e37_79b9u32;
        for i in 0..200_000u32 {
            w = w.wrapping_mul(747_796_405).wrapping_add(2_891_336_453) ^ i;
            let u = uniform_f32(w);
            worst[0] = worst[0].max(ulps(ln_f32(u), f64::from(u).ln()));
            let (s, c) = sincos_turns_f32(w);
            let t = std::f64::consts::TAU * f64::from(u);
            // Absolute error relative to 1 (sin/cos near zero have tiny ulps).
            worst[1] = worst[1].max((f64::from(s) - t.sin()).abs() / f64::EPSILON.sqrt());
            worst[2] = worst[2].max((f64::from(c) - t.cos()).abs() / f64::EPSILON.sqrt());
            let x = (u - 0.5) * 60.0;
            worst[3] = worst[3].max(ulps(exp_f32(x), f64::from(x).exp()));
        }
        eprintln!(
            "worst: ln {} ulp, sin {}, cos {} (x 1.49e-8), exp {} ulp",
            worst[0], worst[1], worst[2], worst[3]
        );
        assert!(worst[0] <= 3.0, "ln_f32 max error {} ulp", worst[0]);
        // 1.2e-7 absolute (f32 epsilon), expressed in units of sqrt(f64 eps) = 1.49e-8.
        assert!(worst[1] <= 8.0 && worst[2] <= 8.0, "sincos max error {worst:?}");
        assert!(worst[3] <= 3.0, "exp_f32 max error {} ulp", worst[3]);
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(ln_f32(1.0), 0.0);
        assert!(exp_f32(-1000.0) > 0.0 && exp_f32(1000.0).is_finite());
        // Exact quarter turns: j = 2^22 is a quarter turn.
        let (s, c) = sincos_turns_f32(1 << 30);
        assert!((s - 1.0).abs() < 1e-6 && c.abs() < 1e-6);
    }

    #[test]
    fn normal_moments_over_a_million_samples() {
        let key = key_from_seed(2011);
        let n_calls = 250_000u32;
        let (mut s1, mut s2, mut s3, mut s4) = (0.0f64, 0.0, 0.0, 0.0);
        let mut far = 0u32;
        for i in 0..n_calls {
            let z = normals4_f32(key, 1, i, 0);
            let y = normals4_f64(key, 1, i, 0);
            for k in 0..4 {
                let x = f64::from(z[k]);
                assert!(x.is_finite());
                if (x - y[k]).abs() > 1e-5 * (1.0 + x.abs()) {
                    far += 1;
                }
                s1 += x;
                s2 += x * x;
                s3 += x * x * x;
                s4 += x * x * x * x;
            }
        }
        let n = f64::from(4 * n_calls);
        let (m1, m2, m3, m4) = (s1 / n, s2 / n, s3 / n, s4 / n);
        // Standard errors at n = 1e6: mean 1e-3, var 1.4e-3, skew 2.4e-3, kurtosis 4.9e-3.
        assert!(m1.abs() < 5e-3, "mean {m1}");
        assert!((m2 - 1.0).abs() < 7e-3, "variance {m2}");
        assert!(m3.abs() < 1.2e-2, "third moment {m3}");
        assert!((m4 - 3.0).abs() < 5e-2, "fourth moment {m4}");
        // The f32 and f64 normals are the same variates at two precisions; they part only
        // where the f32 uniform (23 of the 32 bits) is coarse: u near 0, the far tail.
        assert!(far < 1000, "{far} of 1e6 f32 normals differ from the f64 ones");
    }

    #[test]
    fn stream_addressing_is_what_the_docs_say() {
        let seed = 0xfeed_beef_0bad_cafe_u64;
        let key = [0x0bad_cafe, 0xfeed_beef];
        assert_eq!(key_from_seed(seed), key);
        for step in 0..9u32 {
            let w = philox4x32_10([step / 4, 77, 5, 0], key);
            let z = normals_from_words_f32(w);
            assert_eq!(
                normal_f32(seed, 5, 77, step).to_bits(),
                z[(step % 4) as usize].to_bits()
            );
        }
        assert_ne!(normal_f32(seed, 5, 77, 0), normal_f32(seed, 5, 78, 0));
        assert_ne!(normal_f32(seed, 5, 77, 0), normal_f32(seed, 6, 77, 0));
        assert_ne!(normal_f32(seed, 5, 77, 0), normal_f32(seed + 1, 5, 77, 0));
        assert!(normal_f64(seed, 5, 77, 3).is_finite());
    }
    // The CUDA path loop (finance.cu) reaches the same bits by cheaper routes; these tests
    // check each route's algebra on every input it can see, here where CI runs them.

    /// `kiln_uniform`: (1 + m 2^-23) - (1 - 2^-24) for m = w >> 9, no int-to-float.
    #[test]
    fn gpu_uniform_identity() {
        let one_minus = f32::from_bits(0x3f7f_ffff);
        for m in 0..(1u32 << 23) {
            let w = (m << 9) | (m & 0x1ff);
            let gpu = f32::from_bits(m + 0x3f80_0000) - one_minus;
            assert_eq!(gpu.to_bits(), uniform_f32(w).to_bits(), "m = {m}");
        }
    }

    /// `kiln_sincos_turns`: the reduced turn r = (j - q 2^22) 2^-22 read from the bits
    /// 0x4b400000 + j - q 2^22 by one fused step, and the fast_math angle u 2pi - pi.
    #[test]
    fn gpu_sincos_reduction_identity() {
        let pi = f32::from_bits(0x4049_0fdb);
        for j in (1..(1u32 << 24)).step_by(2) {
            let q = (j + (1 << 21)) >> 22;
            let cpu = (j as i32 - (q << 22) as i32) as f32 * TWO_M22;
            let bits = 0x4b40_0000u32.wrapping_add(j).wrapping_sub(q << 22);
            let gpu = f32::from_bits(bits).mul_add(TWO_M22, -3.0);
            assert_eq!(gpu.to_bits(), cpu.to_bits(), "j = {j}");
            // fast_math: the old (j as f32) * (2 pi 2^-24) - pi and the new u * 2pi - pi
            let old = (j as f32).mul_add(f32::from_bits(0x34c9_0fdb), -pi);
            let new = uniform_f32(j << 8).mul_add(f32::from_bits(0x40c9_0fdb), -pi);
            assert_eq!(old.to_bits(), new.to_bits(), "j = {j}");
        }
    }

    /// `kiln_stream_next`: rounds 1 and 2 of counter [block, sample, option, 0] with the
    /// (sample, option) parts computed once and M0 * block as a running sum.
    #[test]
    fn gpu_stream_form_is_philox() {
        let key = [0x0bad_cafe, 0xfeed_beef];
        let ks = key_schedule(key);
        for (sample, option) in [(0u32, 0u32), (77, 5), (u32::MAX, u32::MAX), (0x1234_5678, 9_999)] {
            let n0 = mulhilo(PHILOX_M1, option).0 ^ sample ^ ks[0][0];
            let a = PHILOX_M1.wrapping_mul(option) ^ ks[0][1];
            let b = mulhilo(PHILOX_M0, n0).0 ^ ks[1][1];
            let c = PHILOX_M0.wrapping_mul(n0);
            let mut m0b = 0u64;
            for block in 0..300u32 {
                let r1c2 = (m0b >> 32) as u32 ^ ks[1][0];
                let r1c3 = m0b as u32;
                m0b += u64::from(PHILOX_M0);
                let (hi1, lo1) = mulhilo(PHILOX_M1, r1c2);
                let mut w = [hi1 ^ a, lo1, b ^ r1c3, c];
                for r in 2..10 {
                    w = round(w, [ks[0][r], ks[1][r]]);
                }
                assert_eq!(w, philox4x32_10([block, sample, option, 0], key), "block {block}");
            }
        }
    }
}
