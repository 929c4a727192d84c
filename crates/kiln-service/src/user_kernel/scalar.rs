//! Scalars of user kernels from JSON: NumPy's types of Python numbers where no type is
//! named, else the named type (a float rounded to it, an integer checked against its range).

use super::kind_of;
use kiln::expr::{Scalar, ScalarType};
use kiln::kernels::ScalarType as CType;
use serde_json::Value;

/// A JSON scalar read as a number: a boolean, an integer, or a float.
enum Num {
    Bool(bool),
    Int(i128),
    Float(f64),
}

fn num(v: &Value) -> Result<Num, String> {
    match v {
        Value::Bool(b) => Ok(Num::Bool(*b)),
        Value::Number(n) => Ok(match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Num::Int(i.into()),
            (None, Some(u), _) => Num::Int(u.into()),
            (None, None, Some(f)) => Num::Float(f),
            _ => return Err(format!("{n} is not a number kiln can read")),
        }),
        other => Err(format!("{} is not a number or a boolean", kind_of(other))),
    }
}

fn int_of(n: &Num, t: &str, lo: i128, hi: i128) -> Result<i128, String> {
    let i = match *n {
        Num::Int(i) => i,
        Num::Float(f) if f.fract() == 0.0 && f.abs() < 1e38 => f as i128,
        Num::Float(f) => return Err(format!("{f} is not a whole number, which {t} needs")),
        Num::Bool(_) => return Err(format!("a boolean is not a {t}; give a number")),
    };
    if i < lo || i > hi {
        return Err(format!("{i} is outside {t}'s range {lo}..={hi}"));
    }
    Ok(i)
}

fn float_of(n: &Num, t: &str, max: f64) -> Result<f64, String> {
    let f = match *n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
        Num::Bool(_) => return Err(format!("a boolean is not a {t}; give a number")),
    };
    if f.abs() > max {
        return Err(format!("{f} is outside {t}'s range (|x| <= {max:e})"));
    }
    Ok(f)
}

/// A scalar of an expression kernel: `dtype` named (the value rounded to a float type, or a
/// whole number in an integer type's range), or NumPy's type of a Python number.
pub(crate) fn expr_scalar(v: &Value, dtype: Option<&str>) -> Result<Scalar, String> {
    let n = num(v)?;
    let Some(d) = dtype else {
        return Ok(match n {
            Num::Bool(b) => Scalar::Bool(b),
            Num::Int(i) => match i64::try_from(i) {
                Ok(i) => Scalar::I64(i),
                Err(_) => Scalar::U64(int_of(&n, "uint64", 0, u64::MAX.into())? as u64),
            },
            Num::Float(f) => Scalar::F64(f),
        });
    };
    let t = ScalarType::from_name(d).ok().flatten().ok_or_else(|| {
        format!("dtype `{d}` is not a type (use bool, int8..int64, uint8..uint64, float16, float32, float64)")
    })?;
    let name = t.name();
    Ok(match t {
        ScalarType::Bool => match n {
            Num::Bool(b) => Scalar::Bool(b),
            _ => return Err("a bool scalar is true or false".into()),
        },
        ScalarType::I8 => Scalar::I8(int_of(&n, name, i8::MIN.into(), i8::MAX.into())? as i8),
        ScalarType::I16 => Scalar::I16(int_of(&n, name, i16::MIN.into(), i16::MAX.into())? as i16),
        ScalarType::I32 => Scalar::I32(int_of(&n, name, i32::MIN.into(), i32::MAX.into())? as i32),
        ScalarType::I64 => Scalar::I64(int_of(&n, name, i64::MIN.into(), i64::MAX.into())? as i64),
        ScalarType::U8 => Scalar::U8(int_of(&n, name, 0, u8::MAX.into())? as u8),
        ScalarType::U16 => Scalar::U16(int_of(&n, name, 0, u16::MAX.into())? as u16),
        ScalarType::U32 => Scalar::U32(int_of(&n, name, 0, u32::MAX.into())? as u32),
        ScalarType::U64 => Scalar::U64(int_of(&n, name, 0, u64::MAX.into())? as u64),
        ScalarType::F16 => Scalar::F16(kiln::core::backend::f16::from_f64(float_of(&n, name, 65504.0)?)),
        ScalarType::F32 => Scalar::F32(float_of(&n, name, f32::MAX.into())? as f32),
        ScalarType::F64 => Scalar::F64(float_of(&n, name, f64::MAX)?),
        // JSON has no complex number: a real one, imaginary part 0
        ScalarType::C64 => Scalar::C64(float_of(&n, name, f32::MAX.into())? as f32, 0.0),
        ScalarType::C128 => Scalar::C128(float_of(&n, name, f64::MAX)?, 0.0),
    })
}

/// The name a raw kernel's scalar type is stored and reported with.
pub(crate) fn ctype_name(t: CType) -> &'static str {
    match t {
        CType::Bool => "bool",
        CType::I8 => "int8",
        CType::I16 => "int16",
        CType::I32 => "int32",
        CType::I64 => "int64",
        CType::U8 => "uint8",
        CType::U16 => "uint16",
        CType::U32 => "uint32",
        CType::U64 => "uint64",
        CType::F16 => "float16",
        CType::BF16 => "bfloat16",
        CType::F32 => "float32",
        CType::F64 => "float64",
    }
}

const CTYPES: [CType; 13] = [
    CType::Bool,
    CType::I8,
    CType::I16,
    CType::I32,
    CType::I64,
    CType::U8,
    CType::U16,
    CType::U32,
    CType::U64,
    CType::F16,
    CType::BF16,
    CType::F32,
    CType::F64,
];

/// A raw kernel's scalar of its parameter's type `t` (named by [`ctype_name`]).
pub(crate) fn raw_scalar(v: &Value, dtype: &str) -> Result<kiln::Scalar, String> {
    use kiln::Scalar as S;
    let t = CTYPES
        .into_iter()
        .find(|&t| ctype_name(t) == dtype)
        .ok_or_else(|| format!("dtype `{dtype}` is not a kernel scalar type"))?;
    let n = num(v)?;
    Ok(match t {
        CType::Bool => match n {
            Num::Bool(b) => S::Bool(b),
            _ => return Err("a bool parameter takes true or false".into()),
        },
        CType::I8 => S::I8(int_of(&n, dtype, i8::MIN.into(), i8::MAX.into())? as i8),
        CType::I16 => S::I16(int_of(&n, dtype, i16::MIN.into(), i16::MAX.into())? as i16),
        CType::I32 => S::I32(int_of(&n, dtype, i32::MIN.into(), i32::MAX.into())? as i32),
        CType::I64 => S::I64(int_of(&n, dtype, i64::MIN.into(), i64::MAX.into())? as i64),
        CType::U8 => S::U8(int_of(&n, dtype, 0, u8::MAX.into())? as u8),
        CType::U16 => S::U16(int_of(&n, dtype, 0, u16::MAX.into())? as u16),
        CType::U32 => S::U32(int_of(&n, dtype, 0, u32::MAX.into())? as u32),
        CType::U64 => S::U64(int_of(&n, dtype, 0, u64::MAX.into())? as u64),
        CType::F16 => S::F16(kiln::core::backend::f16::from_f64(float_of(&n, dtype, 65504.0)?)),
        CType::BF16 => S::BF16(kiln::core::backend::bf16::from_f64(float_of(&n, dtype, 3.38e38)?)),
        CType::F32 => S::F32(float_of(&n, dtype, f32::MAX.into())? as f32),
        CType::F64 => S::F64(float_of(&n, dtype, f64::MAX)?),
    })
}
