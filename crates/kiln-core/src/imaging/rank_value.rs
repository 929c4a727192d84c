//! The element types scipy.ndimage's rank filters and grey morphology take (bool, int8 to
//! int64, uint8 to uint64, float32, float64), with the conversions scipy's C code performs on
//! them, so that a CPU implementation generic over [`RankValue`] returns scipy's bits.
//!
//! scipy (`ni_filters.c`) reads an element of type `T`, works in `double` where it compares
//! or selects (`NI_MinOrMaxFilter`'s running result, `NI_RankFilter`'s buffer, the separable
//! min/max's line buffers), adds a structure term in `T`'s own arithmetic (`_tmp +=
//! (_type)_ss[i]`: integers wrap, float32 adds in float32) and stores the double result into
//! the output type with C's conversion ([`RankValue::from_f64`], as compiled for x86-64). On
//! NaN-free data without negative zeros the selected value is the exact order statistic in
//! `T`, which a total-order key ([`RankValue::key`]) computes fast; where a float input holds
//! NaN or `-0.0`, scipy's comparisons (`<`, `<=`) decide which of the "equal" values wins, and
//! the CPU replays them ([`RankValue::is_special`] says when).
//!
//! `bool` is numpy's one-byte 0/1 (`npy_bool` is `unsigned char` in scipy's C), so it runs as
//! `u8`: [`NdDType::Bool`] names it.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// An element type of scipy's rank filters and grey morphology.
pub trait RankValue: bytemuck::Pod + Default + Send + Sync + PartialEq + fmt::Debug + 'static {
    /// numpy's name of the type.
    const NAME: &'static str;
    /// Whether the type is a float (NaN and signed zeros exist).
    const FLOAT: bool;
    /// Whether converting to f64 can round (64-bit integers).
    const WIDE: bool;
    /// Whether the type is `u8` (Huang's histogram applies).
    const BYTE: bool;
    /// The total-order key (floats: IEEE total order, `-0.0 < +0.0`, NaN above all).
    type Key: Ord + Copy + Send + Sync + Default + fmt::Debug;
    /// The order-preserving key.
    fn key(self) -> Self::Key;
    /// The element of a key.
    fn from_key(k: Self::Key) -> Self;
    /// The value as f64 (C's `(double)x`; rounds 64-bit integers beyond 2^53).
    fn to_f64(self) -> f64;
    /// C's `(T)x` of a double as x86-64 compiles it (scipy's `CASE_FILTER_OUT[_SAFE]` and
    /// `(_type)_cval`): floats round; `int8`, `int16`, `int32`, `uint8`, `uint16` go through a
    /// 32-bit conversion (out of range or NaN: `INT32_MIN`) then keep their low bits;
    /// `uint32` and `int64` through a 64-bit one (`INT64_MIN`); `uint64` subtracts 2^63 above
    /// it.
    fn from_f64(x: f64) -> Self;
    /// `self + (T)t` in `T`'s arithmetic (integers wrap, float32 adds in float32).
    fn add_term(self, t: f64) -> Self;
    /// Whether scipy's comparisons may pick another value than the total order would: NaN
    /// or `-0.0`.
    fn is_special(self) -> bool;
    /// The byte of a `u8` (0 for other types; used where [`Self::BYTE`]).
    fn byte(self) -> u8;
    /// The value scipy stores when it passes `self` through a double (64-bit integers round).
    fn via_f64(self) -> Self {
        if Self::WIDE {
            Self::from_f64(self.to_f64())
        } else {
            self
        }
    }
}

/// `(int)x` as x86-64's `cvttsd2si` computes it: truncation, `i32::MIN` out of range or NaN.
fn cvt_i32(x: f64) -> i32 {
    if x > -2147483649.0 && x < 2147483648.0 {
        x as i32
    } else {
        i32::MIN
    }
}

/// 2^63 as a double.
const TWO63: f64 = (1u64 << 63) as f64;

/// `(long long)x` as `cvttsd2si` computes it: `i64::MIN` out of range or NaN.
fn cvt_i64(x: f64) -> i64 {
    if (-TWO63..TWO63).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

macro_rules! int_small {
    ($t:ty, $name:expr, $byte:expr) => {
        impl RankValue for $t {
            const NAME: &'static str = $name;
            const FLOAT: bool = false;
            const WIDE: bool = false;
            const BYTE: bool = $byte;
            type Key = $t;
            fn key(self) -> $t {
                self
            }
            fn from_key(k: $t) -> Self {
                k
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(x: f64) -> Self {
                cvt_i32(x) as $t
            }
            fn add_term(self, t: f64) -> Self {
                self.wrapping_add(Self::from_f64(t))
            }
            fn is_special(self) -> bool {
                false
            }
            fn byte(self) -> u8 {
                self as u8
            }
        }
    };
}
int_small!(u8, "uint8", true);
int_small!(i8, "int8", false);
int_small!(u16, "uint16", false);
int_small!(i16, "int16", false);
int_small!(i32, "int32", false);

macro_rules! int_wide {
    ($t:ty, $name:expr, $wide:expr, |$x:ident| $conv:expr) => {
        impl RankValue for $t {
            const NAME: &'static str = $name;
            const FLOAT: bool = false;
            const WIDE: bool = $wide;
            const BYTE: bool = false;
            type Key = $t;
            fn key(self) -> $t {
                self
            }
            fn from_key(k: $t) -> Self {
                k
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64($x: f64) -> Self {
                $conv
            }
            fn add_term(self, t: f64) -> Self {
                self.wrapping_add(Self::from_f64(t))
            }
            fn is_special(self) -> bool {
                false
            }
            fn byte(self) -> u8 {
                0
            }
        }
    };
}
int_wide!(u32, "uint32", false, |x| cvt_i64(x) as u32);
int_wide!(i64, "int64", true, |x| cvt_i64(x));
int_wide!(u64, "uint64", true, |x| if x < TWO63 || x.is_nan() {
    cvt_i64(x) as u64
} else {
    (cvt_i64(x - TWO63) as u64) ^ (1u64 << 63)
});

macro_rules! float {
    ($t:ty, $bits:ty, $name:expr, $sign:expr) => {
        impl RankValue for $t {
            const NAME: &'static str = $name;
            const FLOAT: bool = true;
            const WIDE: bool = false;
            const BYTE: bool = false;
            type Key = $bits;
            fn key(self) -> $bits {
                let b = self.to_bits();
                if b & $sign != 0 {
                    !b
                } else {
                    b | $sign
                }
            }
            fn from_key(k: $bits) -> Self {
                <$t>::from_bits(if k & $sign != 0 { k & !$sign } else { !k })
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            fn add_term(self, t: f64) -> Self {
                self + t as $t
            }
            fn is_special(self) -> bool {
                self.is_nan() || (self == 0.0 && self.is_sign_negative())
            }
            fn byte(self) -> u8 {
                0
            }
        }
    };
}
float!(f32, u32, "float32", 0x8000_0000u32);
float!(f64, u64, "float64", 0x8000_0000_0000_0000u64);

/// A numpy dtype of the rank filters and grey morphology, by numpy's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NdDType {
    /// `bool` (one byte, 0 or 1; runs as `u8`).
    Bool,
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `uint8`.
    U8,
    /// `uint16`.
    U16,
    /// `uint32`.
    U32,
    /// `uint64`.
    U64,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
}

impl NdDType {
    /// Every dtype, in numpy's order.
    pub const ALL: [NdDType; 11] = [
        NdDType::Bool,
        NdDType::I8,
        NdDType::I16,
        NdDType::I32,
        NdDType::I64,
        NdDType::U8,
        NdDType::U16,
        NdDType::U32,
        NdDType::U64,
        NdDType::F32,
        NdDType::F64,
    ];

    /// numpy's name.
    pub fn name(self) -> &'static str {
        match self {
            NdDType::Bool => "bool",
            NdDType::I8 => "int8",
            NdDType::I16 => "int16",
            NdDType::I32 => "int32",
            NdDType::I64 => "int64",
            NdDType::U8 => "uint8",
            NdDType::U16 => "uint16",
            NdDType::U32 => "uint32",
            NdDType::U64 => "uint64",
            NdDType::F32 => "float32",
            NdDType::F64 => "float64",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            NdDType::Bool | NdDType::I8 | NdDType::U8 => 1,
            NdDType::I16 | NdDType::U16 => 2,
            NdDType::I32 | NdDType::U32 | NdDType::F32 => 4,
            NdDType::I64 | NdDType::U64 | NdDType::F64 => 8,
        }
    }
}

impl fmt::Display for NdDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for NdDType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        NdDType::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| {
            let names: Vec<&str> = NdDType::ALL.iter().map(|d| d.name()).collect();
            Error::invalid(
                "dtype",
                format!("`{s}` is not supported here: {}", names.join(", ")),
            )
        })
    }
}

/// Native-endian bytes as values of `T` (`bytes.len()` a multiple of the size).
pub fn values_from_bytes<T: RankValue>(op: &str, bytes: &[u8]) -> Result<Vec<T>> {
    let n = std::mem::size_of::<T>();
    if bytes.len() % n != 0 {
        return Err(Error::invalid(
            op,
            format!(
                "{} bytes are not a whole number of {} values",
                bytes.len(),
                T::NAME
            ),
        ));
    }
    Ok(bytemuck::pod_collect_to_vec(bytes))
}

/// Values as native-endian bytes.
pub fn values_to_bytes<T: RankValue>(v: &[T]) -> Vec<u8> {
    bytemuck::cast_slice(v).to_vec()
}

/// Doubles stored into `to` with C's conversion ([`RankValue::from_f64`]), as bytes.
pub fn f64_to_bytes(v: &[f64], to: NdDType) -> Vec<u8> {
    fn conv<T: RankValue>(v: &[f64]) -> Vec<u8> {
        let o: Vec<T> = v.iter().map(|&x| T::from_f64(x)).collect();
        values_to_bytes(&o)
    }
    match to {
        NdDType::Bool | NdDType::U8 => conv::<u8>(v),
        NdDType::I8 => conv::<i8>(v),
        NdDType::I16 => conv::<i16>(v),
        NdDType::I32 => conv::<i32>(v),
        NdDType::I64 => conv::<i64>(v),
        NdDType::U16 => conv::<u16>(v),
        NdDType::U32 => conv::<u32>(v),
        NdDType::U64 => conv::<u64>(v),
        NdDType::F32 => conv::<f32>(v),
        NdDType::F64 => conv::<f64>(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_conversions_as_x86_64() {
        assert_eq!(u8::from_f64(-3.0), 253);
        assert_eq!(u8::from_f64(300.0), 44);
        assert_eq!(u8::from_f64(1e10), 0);
        assert_eq!(u8::from_f64(f64::NAN), 0);
        assert_eq!(i32::from_f64(3e9), i32::MIN);
        assert_eq!(u32::from_f64(-1.0), u32::MAX);
        assert_eq!(i64::from_f64(f64::NAN), i64::MIN);
        assert_eq!(u64::from_f64(-1.0), u64::MAX);
        assert_eq!(u64::from_f64(1.8e19), 18_000_000_000_000_000_000);
        assert_eq!(i8::from_f64(-2.7), -2);
        assert_eq!(u8::from_f64(250.0).add_term(10.0), 4);
        assert_eq!(((1i64 << 60) + 1).via_f64(), 1i64 << 60);
    }

    #[test]
    fn keys_order_every_type() {
        let v = [-f64::INFINITY, -2.5, -0.0, 0.0, 1e-300, 3.0, f64::INFINITY];
        for w in v.windows(2) {
            assert!(w[0].key() < w[1].key(), "{w:?}");
        }
        for x in v {
            assert_eq!(f64::from_key(x.key()).to_bits(), x.to_bits());
        }
        assert!((-0.0f32).is_special() && f32::NAN.is_special() && !0.0f32.is_special());
        assert_eq!("int64".parse::<NdDType>().expect("dtype"), NdDType::I64);
        assert!("complex64".parse::<NdDType>().is_err());
        let b = values_to_bytes(&[1i16, -2]);
        assert_eq!(values_from_bytes::<i16>("t", &b).expect("v"), [1, -2]);
        assert!(values_from_bytes::<i16>("t", &b[..3]).is_err());
    }
}
