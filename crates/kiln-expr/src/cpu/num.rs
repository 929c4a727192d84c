//! Lane types and the element-wise loops over them. Every loop is a plain `for` over slices of
//! one type with the operation inlined, so LLVM vectorises it; integer operations wrap (C's
//! unsigned arithmetic, and what the GPU does for signed overflow) and never trap (division
//! by zero gives 0, as NumPy's integer division does).

use crate::parse::{BinOp, UnOp};
use crate::typed::Func;
use crate::types::{ScalarType, Value};

/// The representation of a chunk of values of one type in the evaluator.
#[derive(Clone, Debug)]
pub(crate) enum Buf {
    B(Vec<bool>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// A read-only view of a register's lanes, or of an input's memory standing in for it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Src<'x> {
    B(&'x [bool]),
    I32(&'x [i32]),
    U32(&'x [u32]),
    I64(&'x [i64]),
    U64(&'x [u64]),
    F32(&'x [f32]),
    F64(&'x [f64]),
}

impl Default for Buf {
    fn default() -> Self {
        Buf::B(Vec::new())
    }
}

/// The lane (register) representation of a C type: narrow integers live in `int` lanes
/// (normalised to their range on every conversion), half in `float` lanes (rounded to half).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    B,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

pub(crate) fn lane_of(t: ScalarType) -> Lane {
    use ScalarType::*;
    match t {
        Bool => Lane::B,
        I8 | I16 | I32 | U8 | U16 => Lane::I32,
        U32 => Lane::U32,
        I64 => Lane::I64,
        U64 => Lane::U64,
        F16 | F32 | C64 => Lane::F32,
        F64 | C128 => Lane::F64,
    }
}

impl Buf {
    pub(crate) fn new(l: Lane, n: usize) -> Buf {
        match l {
            Lane::B => Buf::B(vec![false; n]),
            Lane::I32 => Buf::I32(vec![0; n]),
            Lane::U32 => Buf::U32(vec![0; n]),
            Lane::I64 => Buf::I64(vec![0; n]),
            Lane::U64 => Buf::U64(vec![0; n]),
            Lane::F32 => Buf::F32(vec![0.0; n]),
            Lane::F64 => Buf::F64(vec![0.0; n]),
        }
    }

    /// Fills the first `n` lanes with `v` (already of the buffer's type).
    pub(crate) fn splat(&mut self, v: Value, n: usize) {
        match self {
            Buf::B(d) => d[..n].fill(v.as_bool()),
            Buf::I32(d) => d[..n].fill(v.as_i64() as i32),
            Buf::U32(d) => d[..n].fill(v.as_u64() as u32),
            Buf::I64(d) => d[..n].fill(v.as_i64()),
            Buf::U64(d) => d[..n].fill(v.as_u64()),
            Buf::F32(d) => d[..n].fill(v.as_f64() as f32),
            Buf::F64(d) => d[..n].fill(v.as_f64()),
        }
    }

    pub(crate) fn as_bool(&self) -> &[bool] {
        match self {
            Buf::B(d) => d,
            _ => &[],
        }
    }

    /// Lane `k` as a value (for error messages and scalar reads).
    pub(crate) fn get(&self, k: usize) -> Value {
        match self {
            Buf::B(d) => Value::B(d[k]),
            Buf::I32(d) => Value::I(d[k] as i64),
            Buf::U32(d) => Value::U(d[k] as u64),
            Buf::I64(d) => Value::I(d[k]),
            Buf::U64(d) => Value::U(d[k]),
            Buf::F32(d) => Value::F(d[k] as f64),
            Buf::F64(d) => Value::F(d[k]),
        }
    }

    /// The lanes as a view.
    pub(crate) fn src(&self) -> Src<'_> {
        match self {
            Buf::B(v) => Src::B(v),
            Buf::I32(v) => Src::I32(v),
            Buf::U32(v) => Src::U32(v),
            Buf::I64(v) => Src::I64(v),
            Buf::U64(v) => Src::U64(v),
            Buf::F32(v) => Src::F32(v),
            Buf::F64(v) => Src::F64(v),
        }
    }

    /// Copies `n` lanes of a view (same lane type).
    pub(crate) fn copy_from_src(&mut self, src: Src<'_>, n: usize) {
        match (self, src) {
            (Buf::B(d), Src::B(s)) => d[..n].copy_from_slice(&s[..n]),
            (Buf::I32(d), Src::I32(s)) => d[..n].copy_from_slice(&s[..n]),
            (Buf::U32(d), Src::U32(s)) => d[..n].copy_from_slice(&s[..n]),
            (Buf::I64(d), Src::I64(s)) => d[..n].copy_from_slice(&s[..n]),
            (Buf::U64(d), Src::U64(s)) => d[..n].copy_from_slice(&s[..n]),
            (Buf::F32(d), Src::F32(s)) => d[..n].copy_from_slice(&s[..n]),
            (Buf::F64(d), Src::F64(s)) => d[..n].copy_from_slice(&s[..n]),
            _ => {}
        }
    }

    /// Copies lanes `src[from..from+n]` to `self[to..to+n]` (same lane type).
    pub(crate) fn copy_lanes(&mut self, to: usize, src: &Buf, from: usize, n: usize) {
        macro_rules! cp {
            ($($v:ident),*) => {
                match (self, src) {
                    $((Buf::$v(d), Buf::$v(s)) => d[to..to + n].copy_from_slice(&s[from..from + n]),)*
                    _ => {}
                }
            };
        }
        cp!(B, I32, U32, I64, U64, F32, F64)
    }
}

/// A numeric lane type.
pub(crate) trait Num: Copy + Default + PartialOrd + Send + Sync + 'static {
    fn add(a: Self, b: Self) -> Self;
    fn sub(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn div(a: Self, b: Self) -> Self;
    fn rem(a: Self, b: Self) -> Self;
    fn neg(a: Self) -> Self;
    fn bitnot(a: Self) -> Self;
    fn and(a: Self, b: Self) -> Self;
    fn or(a: Self, b: Self) -> Self;
    fn xor(a: Self, b: Self) -> Self;
    fn shl(a: Self, b: Self) -> Self;
    fn shr(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
    fn max(a: Self, b: Self) -> Self;
    fn abs(a: Self) -> Self;
    fn nonzero(a: Self) -> bool;
    fn to_f64(a: Self) -> f64;
    fn to_i64(a: Self) -> i64;
    fn to_u64(a: Self) -> u64;
    fn from_f64(v: f64) -> Self;
    fn from_i64(v: i64) -> Self;
    fn from_u64(v: u64) -> Self;
    const SIGNED: bool;
    const FLOAT: bool;
}

macro_rules! int_num {
    ($t:ty, $signed:expr, $bits:expr) => {
        impl Num for $t {
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn sub(a: Self, b: Self) -> Self {
                a.wrapping_sub(b)
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a.wrapping_mul(b)
            }
            #[inline(always)]
            fn div(a: Self, b: Self) -> Self {
                if b == 0 {
                    0
                } else {
                    a.wrapping_div(b)
                }
            }
            #[inline(always)]
            fn rem(a: Self, b: Self) -> Self {
                if b == 0 {
                    0
                } else {
                    a.wrapping_rem(b)
                }
            }
            #[inline(always)]
            fn neg(a: Self) -> Self {
                (0 as $t).wrapping_sub(a)
            }
            #[inline(always)]
            fn bitnot(a: Self) -> Self {
                !a
            }
            #[inline(always)]
            fn and(a: Self, b: Self) -> Self {
                a & b
            }
            #[inline(always)]
            fn or(a: Self, b: Self) -> Self {
                a | b
            }
            #[inline(always)]
            fn xor(a: Self, b: Self) -> Self {
                a ^ b
            }
            // A count outside [0, bits) is undefined in C; PTX's shl/shr clamp it (all bits
            // shifted out, or the sign bit replicated), which is what these do.
            #[inline(always)]
            fn shl(a: Self, b: Self) -> Self {
                if (b as u64) < $bits {
                    a << (b as u32)
                } else {
                    0
                }
            }
            #[inline(always)]
            fn shr(a: Self, b: Self) -> Self {
                if (b as u64) < $bits {
                    a >> (b as u32)
                } else if $signed && a < (0 as $t) {
                    (0 as $t).wrapping_sub(1)
                } else {
                    0
                }
            }
            #[inline(always)]
            fn min(a: Self, b: Self) -> Self {
                if b < a {
                    b
                } else {
                    a
                }
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                if b > a {
                    b
                } else {
                    a
                }
            }
            #[inline(always)]
            fn abs(a: Self) -> Self {
                if $signed && a < (0 as $t) {
                    Self::neg(a)
                } else {
                    a
                }
            }
            #[inline(always)]
            fn nonzero(a: Self) -> bool {
                a != 0
            }
            #[inline(always)]
            fn to_f64(a: Self) -> f64 {
                a as f64
            }
            #[inline(always)]
            fn to_i64(a: Self) -> i64 {
                a as i64
            }
            #[inline(always)]
            fn to_u64(a: Self) -> u64 {
                a as u64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                // Float to integer truncates toward zero and saturates; to unsigned, a
                // negative value goes through the signed range.
                if $signed || v >= 0.0 {
                    v as $t
                } else {
                    (v as i64) as $t
                }
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            const SIGNED: bool = $signed;
            const FLOAT: bool = false;
        }
    };
}
int_num!(i32, true, 32);
int_num!(u32, false, 32);
int_num!(i64, true, 64);
int_num!(u64, false, 64);

macro_rules! float_num {
    ($t:ty) => {
        impl Num for $t {
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            #[inline(always)]
            fn sub(a: Self, b: Self) -> Self {
                a - b
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a * b
            }
            #[inline(always)]
            fn div(a: Self, b: Self) -> Self {
                a / b
            }
            #[inline(always)]
            fn rem(a: Self, b: Self) -> Self {
                a % b
            }
            #[inline(always)]
            fn neg(a: Self) -> Self {
                -a
            }
            #[inline(always)]
            fn bitnot(a: Self) -> Self {
                a
            }
            #[inline(always)]
            fn and(a: Self, _b: Self) -> Self {
                a
            }
            #[inline(always)]
            fn or(a: Self, _b: Self) -> Self {
                a
            }
            #[inline(always)]
            fn xor(a: Self, _b: Self) -> Self {
                a
            }
            #[inline(always)]
            fn shl(a: Self, _b: Self) -> Self {
                a
            }
            #[inline(always)]
            fn shr(a: Self, _b: Self) -> Self {
                a
            }
            // fmin/fmax: a NaN operand yields the other one.
            #[inline(always)]
            fn min(a: Self, b: Self) -> Self {
                a.min(b)
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                a.max(b)
            }
            #[inline(always)]
            fn abs(a: Self) -> Self {
                a.abs()
            }
            #[inline(always)]
            fn nonzero(a: Self) -> bool {
                a != 0.0
            }
            #[inline(always)]
            fn to_f64(a: Self) -> f64 {
                a as f64
            }
            #[inline(always)]
            fn to_i64(a: Self) -> i64 {
                a as i64
            }
            #[inline(always)]
            fn to_u64(a: Self) -> u64 {
                if a < 0.0 {
                    (a as i64) as u64
                } else {
                    a as u64
                }
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            const SIGNED: bool = true;
            const FLOAT: bool = true;
        }
    };
}
float_num!(f32);
float_num!(f64);

/// `d[..n] = a op b`.
#[inline(never)]
pub(crate) fn bin<T: Num>(op: BinOp, d: &mut [T], a: &[T], b: &[T], n: usize) {
    let (d, a, b) = (&mut d[..n], &a[..n], &b[..n]);
    macro_rules! lp {
        ($f:path) => {
            for ((d, &a), &b) in d.iter_mut().zip(a).zip(b) {
                *d = $f(a, b);
            }
        };
    }
    match op {
        BinOp::Add => lp!(T::add),
        BinOp::Sub => lp!(T::sub),
        BinOp::Mul => lp!(T::mul),
        BinOp::Div => lp!(T::div),
        BinOp::Rem => lp!(T::rem),
        BinOp::BitAnd => lp!(T::and),
        BinOp::BitOr => lp!(T::or),
        BinOp::BitXor => lp!(T::xor),
        BinOp::Shl => lp!(T::shl),
        BinOp::Shr => lp!(T::shr),
        _ => {}
    }
}

/// A value as lane type `T` (the value is already of the lane's C type).
#[inline(always)]
pub(crate) fn lane_value<T: Num>(v: Value) -> T {
    match v {
        Value::F(f) | Value::C(f, _) => T::from_f64(f),
        Value::I(i) => T::from_i64(i),
        Value::U(u) => T::from_u64(u),
        Value::B(b) => T::from_i64(b as i64),
    }
}

/// `d[..n] = a op s` (or `s op a` when `swap`).
#[inline(never)]
pub(crate) fn bin_s<T: Num>(op: BinOp, d: &mut [T], a: &[T], s: T, swap: bool, n: usize) {
    let (d, a) = (&mut d[..n], &a[..n]);
    macro_rules! lp {
        ($f:path) => {
            if swap {
                d.iter_mut().zip(a).for_each(|(d, &a)| *d = $f(s, a));
            } else {
                d.iter_mut().zip(a).for_each(|(d, &a)| *d = $f(a, s));
            }
        };
    }
    match op {
        BinOp::Add => lp!(T::add),
        BinOp::Sub => lp!(T::sub),
        BinOp::Mul => lp!(T::mul),
        BinOp::Div => lp!(T::div),
        BinOp::Rem => lp!(T::rem),
        BinOp::BitAnd => lp!(T::and),
        BinOp::BitOr => lp!(T::or),
        BinOp::BitXor => lp!(T::xor),
        BinOp::Shl => lp!(T::shl),
        BinOp::Shr => lp!(T::shr),
        _ => {}
    }
}

/// `d[..n] = a cmp b`.
#[inline(never)]
pub(crate) fn cmp<T: Num>(op: BinOp, d: &mut [bool], a: &[T], b: &[T], n: usize) {
    let (d, a, b) = (&mut d[..n], &a[..n], &b[..n]);
    macro_rules! lp {
        ($e:tt) => {
            for ((d, &a), &b) in d.iter_mut().zip(a).zip(b) {
                *d = a $e b;
            }
        };
    }
    match op {
        BinOp::Lt => lp!(<),
        BinOp::Le => lp!(<=),
        BinOp::Gt => lp!(>),
        BinOp::Ge => lp!(>=),
        BinOp::Eq => lp!(==),
        BinOp::Ne => lp!(!=),
        _ => {}
    }
}

pub(crate) fn unary<T: Num>(op: UnOp, d: &mut [T], a: &[T], n: usize) {
    let (d, a) = (&mut d[..n], &a[..n]);
    match op {
        UnOp::Neg => d.iter_mut().zip(a).for_each(|(d, &a)| *d = T::neg(a)),
        UnOp::BitNot => d.iter_mut().zip(a).for_each(|(d, &a)| *d = T::bitnot(a)),
        _ => d.copy_from_slice(a),
    }
}

pub(crate) fn select<T: Copy>(d: &mut [T], c: &[bool], a: &[T], b: &[T], n: usize) {
    for (((d, &c), &a), &b) in d[..n].iter_mut().zip(&c[..n]).zip(&a[..n]).zip(&b[..n]) {
        *d = if c { a } else { b };
    }
}

pub(crate) fn blend<T: Copy>(d: &mut [T], m: &[bool], s: &[T], n: usize) {
    for ((d, &m), &s) in d[..n].iter_mut().zip(&m[..n]).zip(&s[..n]) {
        if m {
            *d = s;
        }
    }
}

/// Integer-valued functions and the float functions shared by f32 and f64 lanes.
pub(crate) fn call_num<T: Num>(f: Func, d: &mut [T], a: &[T], b: &[T], n: usize) {
    let (d, a) = (&mut d[..n], &a[..n]);
    match f {
        Func::Min | Func::Fmin => d
            .iter_mut()
            .zip(a)
            .zip(&b[..n])
            .for_each(|((d, &a), &b)| *d = T::min(a, b)),
        Func::Max | Func::Fmax => d
            .iter_mut()
            .zip(a)
            .zip(&b[..n])
            .for_each(|((d, &a), &b)| *d = T::max(a, b)),
        Func::Abs | Func::Fabs => d.iter_mut().zip(a).for_each(|(d, &a)| *d = T::abs(a)),
        _ => {}
    }
}

macro_rules! float_calls {
    ($name:ident, $t:ident, $exp:expr, $tanh:expr) => {
        /// The math functions on one float lane type.
        pub(crate) fn $name(f: Func, d: &mut [$t], a: &[$t], b: &[$t], n: usize) {
            let (d, a, b) = (&mut d[..n], &a[..n], &b[..n]);
            macro_rules! u {
                ($e:expr) => {
                    d.iter_mut().zip(a).for_each(|(d, &x)| *d = $e(x))
                };
            }
            macro_rules! bi {
                ($e:expr) => {
                    d.iter_mut().zip(a).zip(b).for_each(|((d, &x), &y)| *d = $e(x, y))
                };
            }
            match f {
                Func::Exp => u!($exp),
                Func::Tanh => u!($tanh),
                Func::Log => u!($t::ln),
                Func::Sqrt => u!($t::sqrt),
                Func::Sin => u!($t::sin),
                Func::Cos => u!($t::cos),
                Func::Tan => u!($t::tan),
                Func::Sinh => u!($t::sinh),
                Func::Cosh => u!($t::cosh),
                Func::Asin => u!($t::asin),
                Func::Acos => u!($t::acos),
                Func::Atan => u!($t::atan),
                Func::Floor => u!($t::floor),
                Func::Ceil => u!($t::ceil),
                Func::Round => u!($t::round),
                Func::Trunc => u!($t::trunc),
                Func::Erf => u!(|x: $t| libm::erf(x as f64) as $t),
                Func::Erfc => u!(|x: $t| libm::erfc(x as f64) as $t),
                Func::Exp2 => u!($t::exp2),
                Func::Log2 => u!($t::log2),
                Func::Log10 => u!($t::log10),
                Func::Log1p => u!($t::ln_1p),
                Func::Expm1 => u!($t::exp_m1),
                Func::Rsqrt => u!(|x: $t| 1.0 / x.sqrt()),
                Func::Cbrt => u!($t::cbrt),
                Func::Pow => bi!($t::powf),
                Func::Copysign => bi!($t::copysign),
                Func::Atan2 => bi!($t::atan2),
                Func::Fmod => bi!(|x: $t, y: $t| x % y),
                Func::Hypot => bi!($t::hypot),
                _ => call_num(f, d, a, b, n),
            }
        }
    };
}
float_calls!(call_f32, f32, kiln_core::mathf::exp, kiln_core::mathf::tanh);
float_calls!(call_f64, f64, f64::exp, f64::tanh);

/// Float classification into bool lanes.
pub(crate) fn classify<T: Num>(f: Func, d: &mut [bool], a: &[T], n: usize) {
    let (d, a) = (&mut d[..n], &a[..n]);
    match f {
        Func::Isnan => d.iter_mut().zip(a).for_each(|(d, &x)| *d = T::to_f64(x).is_nan()),
        Func::Isinf => d
            .iter_mut()
            .zip(a)
            .for_each(|(d, &x)| *d = T::to_f64(x).is_infinite()),
        _ => d
            .iter_mut()
            .zip(a)
            .for_each(|(d, &x)| *d = T::to_f64(x).is_finite()),
    }
}

/// Converts lanes of one numeric type into another, then normalises to `to`'s range.
pub(crate) fn convert<S: Num, D: Num>(d: &mut [D], s: &[S], n: usize) {
    let (d, s) = (&mut d[..n], &s[..n]);
    if S::FLOAT {
        d.iter_mut()
            .zip(s)
            .for_each(|(d, &x)| *d = D::from_f64(S::to_f64(x)));
    } else if S::SIGNED {
        d.iter_mut()
            .zip(s)
            .for_each(|(d, &x)| *d = D::from_i64(S::to_i64(x)));
    } else {
        d.iter_mut()
            .zip(s)
            .for_each(|(d, &x)| *d = D::from_u64(S::to_u64(x)));
    }
}
