//! Sobol points (Joe and Kuo's direction numbers, `new-joe-kuo-6.21201`), their random
//! digital shifts, and the contract both Monte Carlo engines follow to turn them into the
//! normals of a path (the CUDA kernels in `finance_qmc.cu` compute the same bits).
//!
//! # Points
//!
//! The parameters of the first [`SOBOL_MAX_DIMS`] dimensions are vendored in
//! `sobol_jk.bin` (written by `scripts/finance-sobol-vendor.py` from scipy's copy of Joe and
//! Kuo's file). Dimension `d` has 32 direction numbers `v[d][k] = m_{k+1} << (31 - k)` with
//! Joe and Kuo's recurrence past the primitive polynomial's degree; dimension 0 is the van der
//! Corput sequence. Point `i` is in Gray-code order, as Joe and Kuo's `sobol.cc` and
//! scipy generate them:
//!
//! ```text
//! g = i ^ (i >> 1);   x(i, d) = XOR of v[d][k] over the bits k set in g      (u32)
//! ```
//!
//! a pure function of `(i, d)`, so a kernel computes any point directly and any chunking
//! gives the same bits.
//!
//! # Randomisation (random digital shift)
//!
//! Replicate `r` of a run XORs every coordinate of dimension `d` with a word drawn from
//! Philox under the run's key: word `d % 4` of `philox4x32_10([d / 4, r, 0, 1], key)` (the
//! counter's last word is 1: path normals use 0, so the two never share words). Each
//! replicate is then an unbiased estimate, and `R` independent replicates give a mean and a
//! standard error. The shift does not depend on the option: the options of a portfolio share
//! each replicate's points (common random numbers).
//!
//! # From a point to a normal
//!
//! `u = uniform_f64(x ^ shift)` = `(2w + 1) 2^-33` (exact, never 0 or 1), then
//! `z = inv_norm_f32(u)` ([`super::invnorm`]), then the Brownian bridge
//! ([`super::bridge`]) maps dimension `j` of the point to the `j`-th bridge node.

#![allow(clippy::needless_range_loop)] // direction-number rows indexed by bit

use std::sync::OnceLock;

use crate::philox;

/// Dimensions vendored (the steps of a Sobol path: one dimension a step).
pub const SOBOL_MAX_DIMS: usize = 8192;

/// Bits of a coordinate.
pub const SOBOL_BITS: usize = 32;

static RAW: &[u8] = include_bytes!("sobol_jk.bin");

/// The direction numbers of the first [`SOBOL_MAX_DIMS`] dimensions, `v[d * 32 + k]`.
pub fn direction_numbers() -> &'static [u32] {
    static TABLE: OnceLock<Vec<u32>> = OnceLock::new();
    TABLE.get_or_init(|| parse(RAW))
}

/// The direction numbers of dimensions `0..dims` (`dims * 32` words): what a kernel uploads.
pub fn direction_numbers_for(dims: usize) -> &'static [u32] {
    &direction_numbers()[..dims.min(SOBOL_MAX_DIMS) * SOBOL_BITS]
}

fn parse(raw: &[u8]) -> Vec<u32> {
    // The file is part of the build (include_bytes!); its format is checked by the tests.
    assert_eq!(&raw[..4], b"KJK1", "sobol_jk.bin: bad magic");
    let dims = u32::from_le_bytes([raw[4], raw[5], raw[6], raw[7]]) as usize;
    assert!(dims >= SOBOL_MAX_DIMS, "sobol_jk.bin holds {dims} dimensions");
    let mut v = vec![0u32; SOBOL_MAX_DIMS * SOBOL_BITS];
    let mut p = 8usize;
    for d in 0..SOBOL_MAX_DIMS {
        let s = raw[p] as usize;
        let a = u32::from(u16::from_le_bytes([raw[p + 1], raw[p + 2]]));
        p += 3;
        let mut m = [0u32; SOBOL_BITS];
        for (k, mk) in m.iter_mut().enumerate().take(s) {
            let nb = (k + 1).div_ceil(8);
            let mut x = 0u32;
            for b in 0..nb {
                x |= u32::from(raw[p + b]) << (8 * b);
            }
            *mk = x;
            p += nb;
        }
        let row = &mut v[d * SOBOL_BITS..(d + 1) * SOBOL_BITS];
        if s == 0 {
            for (k, x) in row.iter_mut().enumerate() {
                *x = 1u32 << (31 - k);
            }
            continue;
        }
        // Joe-Kuo: m_k = 2^s m_{k-s} ^ m_{k-s} ^ XOR_{j=1}^{s-1} 2^j a_j m_{k-j}, a_1 the
        // most significant of the s-1 bits of `a` (0-based k here).
        for k in s..SOBOL_BITS {
            let mut x = m[k - s] ^ (m[k - s] << s);
            for j in 1..s {
                if (a >> (s - 1 - j)) & 1 == 1 {
                    x ^= m[k - j] << j;
                }
            }
            m[k] = x;
        }
        for k in 0..SOBOL_BITS {
            // m_{k+1} < 2^{k+1}: the shift keeps every bit.
            row[k] = m[k] << (31 - k);
        }
    }
    v
}

/// Coordinate `d` of point `i` (Gray-code order) from a direction-number table `v`
/// (`v[d * 32 + k]`).
#[inline]
pub fn sobol_u32(v: &[u32], i: u32, d: usize) -> u32 {
    let mut g = i ^ (i >> 1);
    let row = &v[d * SOBOL_BITS..(d + 1) * SOBOL_BITS];
    let mut x = 0u32;
    while g != 0 {
        let k = g.trailing_zeros() as usize;
        x ^= row[k];
        g &= g - 1;
    }
    x
}

/// The digital shifts of `replicates` replicates over `dims` dimensions, `shift[r * dims +
/// d]` (see the module docs), for the Philox key `key`.
pub fn digital_shifts(key: [u32; 2], replicates: u32, dims: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(replicates as usize * dims);
    for r in 0..replicates {
        let mut words = [0u32; 4];
        for d in 0..dims {
            if d % 4 == 0 {
                words = philox::philox4x32_10([(d / 4) as u32, r, 0, 1], key);
            }
            out.push(words[d % 4]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// scipy 1.17.1's `qmc.Sobol(8192, scramble=False, bits=32)` (Joe-Kuo 6.21201), points
    /// 0..16 of dimensions 0, 1, 2, 3, 4, 9, 99, 999, 4095, 8191 (0-based), times 2^32.
    const FIRST: [(usize, [u32; 16]); 10] = [
        (
            0,
            [
                0x00000000, 0x80000000, 0xc0000000, 0x40000000, 0x60000000, 0xe0000000, 0xa0000000,
                0x20000000, 0x30000000, 0xb0000000, 0xf0000000, 0x70000000, 0x50000000, 0xd0000000,
                0x90000000, 0x10000000,
            ],
        ),
        (
            1,
            [
                0x00000000, 0x80000000, 0x40000000, 0xc0000000, 0x60000000, 0xe0000000, 0x20000000,
                0xa0000000, 0x50000000, 0xd0000000, 0x10000000, 0x90000000, 0x30000000, 0xb0000000,
                0x70000000, 0xf0000000,
            ],
        ),
        (
            2,
            [
                0x00000000, 0x80000000, 0x40000000, 0xc0000000, 0xa0000000, 0x20000000, 0xe0000000,
                0x60000000, 0xf0000000, 0x70000000, 0xb0000000, 0x30000000, 0x50000000, 0xd0000000,
                0x10000000, 0x90000000,
            ],
        ),
        (
            3,
            [
                0x00000000, 0x80000000, 0x40000000, 0xc0000000, 0xe0000000, 0x60000000, 0xa0000000,
                0x20000000, 0x70000000, 0xf0000000, 0x30000000, 0xb0000000, 0x90000000, 0x10000000,
                0xd0000000, 0x50000000,
            ],
        ),
        (
            4,
            [
                0x00000000, 0x80000000, 0xc0000000, 0x40000000, 0x60000000, 0xe0000000, 0xa0000000,
                0x20000000, 0x90000000, 0x10000000, 0x50000000, 0xd0000000, 0xf0000000, 0x70000000,
                0x30000000, 0xb0000000,
            ],
        ),
        (
            9,
            [
                0x00000000, 0x80000000, 0xc0000000, 0x40000000, 0xa0000000, 0x20000000, 0x60000000,
                0xe0000000, 0x50000000, 0xd0000000, 0x90000000, 0x10000000, 0xf0000000, 0x70000000,
                0x30000000, 0xb0000000,
            ],
        ),
        (
            99,
            [
                0x00000000, 0x80000000, 0xc0000000, 0x40000000, 0xe0000000, 0x60000000, 0x20000000,
                0xa0000000, 0xf0000000, 0x70000000, 0x30000000, 0xb0000000, 0x10000000, 0x90000000,
                0xd0000000, 0x50000000,
            ],
        ),
        (
            999,
            [
                0x00000000, 0x80000000, 0xc0000000, 0x40000000, 0x20000000, 0xa0000000, 0xe0000000,
                0x60000000, 0xf0000000, 0x70000000, 0x30000000, 0xb0000000, 0xd0000000, 0x50000000,
                0x10000000, 0x90000000,
            ],
        ),
        (
            4095,
            [
                0x00000000, 0x80000000, 0x40000000, 0xc0000000, 0x60000000, 0xe0000000, 0x20000000,
                0xa0000000, 0xb0000000, 0x30000000, 0xf0000000, 0x70000000, 0xd0000000, 0x50000000,
                0x90000000, 0x10000000,
            ],
        ),
        (
            8191,
            [
                0x00000000, 0x80000000, 0xc0000000, 0x40000000, 0x60000000, 0xe0000000, 0xa0000000,
                0x20000000, 0xf0000000, 0x70000000, 0x30000000, 0xb0000000, 0x90000000, 0x10000000,
                0x50000000, 0xd0000000,
            ],
        ),
    ];

    /// The same generator, points far into the sequence (scipy's `fast_forward`), the same
    /// dimensions in the same order.
    const FAR: [(u32, [u32; 10]); 3] = [
        (
            100,
            [
                0x6a000000, 0x42000000, 0xc6000000, 0xba000000, 0xe2000000, 0xb2000000, 0xe2000000,
                0xea000000, 0x06000000, 0xfa000000,
            ],
        ),
        (
            12345,
            [
                0xa4140000, 0xd03c0000, 0x290c0000, 0x86dc0000, 0xe3740000, 0x6dfc0000, 0x89f40000,
                0x218c0000, 0xa0a40000, 0x82f40000,
            ],
        ),
        (
            1000003,
            [
                0x46c71000, 0x8fd9f000, 0x13f79000, 0x6b123000, 0xe0efd000, 0x01207000, 0x0cb2d000,
                0x0a2d7000, 0x1cf29000, 0x9daf5000,
            ],
        ),
    ];

    #[test]
    fn points_equal_joe_kuo_as_published_by_scipy() {
        let v = direction_numbers();
        for (d, pts) in FIRST {
            for (i, &want) in pts.iter().enumerate() {
                assert_eq!(sobol_u32(v, i as u32, d), want, "point {i}, dimension {d}");
            }
        }
        for (i, pts) in FAR {
            for (j, (d, _)) in FIRST.iter().enumerate() {
                assert_eq!(sobol_u32(v, i, *d), pts[j], "point {i}, dimension {d}");
            }
        }
        // Dimension 1 (0-based) starts 0, 1/2, 1/4, 3/4 in Gray order (Joe-Kuo's sobol.cc).
        assert_eq!(sobol_u32(v, 2, 1), 1 << 30);
    }

    #[test]
    fn each_power_of_two_prefix_stratifies_every_dimension() {
        // The first 2^m points of a (t, s)-sequence put one point in each interval of
        // length 2^-m in every one-dimensional projection.
        let v = direction_numbers();
        for d in [0usize, 5, 77, 1023, 8191] {
            let mut seen = vec![false; 1 << 10];
            for i in 0..1u32 << 10 {
                let cell = (sobol_u32(v, i, d) >> 22) as usize;
                assert!(!seen[cell], "dimension {d}: two points in cell {cell}");
                seen[cell] = true;
            }
        }
        assert_eq!(direction_numbers_for(3).len(), 96);
    }

    #[test]
    fn shifts_come_from_philox_words_under_the_key() {
        let key = philox::key_from_seed(42);
        let s = digital_shifts(key, 3, 6);
        assert_eq!(s.len(), 18);
        assert_eq!(s[2 * 6 + 5], philox::philox4x32_10([1, 2, 0, 1], key)[1]);
        assert_eq!(s[0], philox::philox4x32_10([0, 0, 0, 1], key)[0]);
        assert_ne!(s[0], s[6]);
    }
}
