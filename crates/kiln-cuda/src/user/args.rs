//! Launch arguments: device buffers and scalars, and their conversion to what a parameter
//! takes: where kiln knows the parameter's type, a buffer of the pointed-to dtype and a
//! scalar converted exactly or refused ([`convert`]); where it knows only the parameter's
//! size (the driver's `cuFuncGetParamInfo`), a value of exactly that size ([`convert_sized`]).

use super::signature::{Param, ParamType, ScalarType};
use crate::pool::DeviceBuffer;
use crate::storage::{CudaData, CudaElement};
use kiln_core::backend::{bf16, f16};
use kiln_core::DType;

/// A scalar argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// `bool`.
    Bool(bool),
    /// 8-bit signed.
    I8(i8),
    /// 16-bit signed.
    I16(i16),
    /// 32-bit signed.
    I32(i32),
    /// 64-bit signed.
    I64(i64),
    /// 8-bit unsigned.
    U8(u8),
    /// 16-bit unsigned.
    U16(u16),
    /// 32-bit unsigned.
    U32(u32),
    /// 64-bit unsigned.
    U64(u64),
    /// IEEE half.
    F16(f16),
    /// bfloat16.
    BF16(bf16),
    /// `float`.
    F32(f32),
    /// `double`.
    F64(f64),
}

impl Scalar {
    /// The value's bytes as the kernel receives them (little-endian; halves as their bits).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match *self {
            Scalar::Bool(x) => vec![u8::from(x)],
            Scalar::I8(x) => x.to_le_bytes().to_vec(),
            Scalar::I16(x) => x.to_le_bytes().to_vec(),
            Scalar::I32(x) => x.to_le_bytes().to_vec(),
            Scalar::I64(x) => x.to_le_bytes().to_vec(),
            Scalar::U8(x) => x.to_le_bytes().to_vec(),
            Scalar::U16(x) => x.to_le_bytes().to_vec(),
            Scalar::U32(x) => x.to_le_bytes().to_vec(),
            Scalar::U64(x) => x.to_le_bytes().to_vec(),
            Scalar::F16(x) => x.to_bits().to_le_bytes().to_vec(),
            Scalar::BF16(x) => x.to_bits().to_le_bytes().to_vec(),
            Scalar::F32(x) => x.to_le_bytes().to_vec(),
            Scalar::F64(x) => x.to_le_bytes().to_vec(),
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Self {
                Scalar::$v(x)
            }
        }
    )*};
}
scalar_from!(bool => Bool, i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16,
    u32 => U32, u64 => U64, f16 => F16, bf16 => BF16, f32 => F32, f64 => F64);

impl Scalar {
    /// The Rust type's name, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Scalar::Bool(_) => "bool",
            Scalar::I8(_) => "i8",
            Scalar::I16(_) => "i16",
            Scalar::I32(_) => "i32",
            Scalar::I64(_) => "i64",
            Scalar::U8(_) => "u8",
            Scalar::U16(_) => "u16",
            Scalar::U32(_) => "u32",
            Scalar::U64(_) => "u64",
            Scalar::F16(_) => "f16",
            Scalar::BF16(_) => "bf16",
            Scalar::F32(_) => "f32",
            Scalar::F64(_) => "f64",
        }
    }

    fn int(&self) -> Option<i128> {
        Some(match *self {
            Scalar::I8(x) => x.into(),
            Scalar::I16(x) => x.into(),
            Scalar::I32(x) => x.into(),
            Scalar::I64(x) => x.into(),
            Scalar::U8(x) => x.into(),
            Scalar::U16(x) => x.into(),
            Scalar::U32(x) => x.into(),
            Scalar::U64(x) => x.into(),
            _ => return None,
        })
    }

    fn float(&self) -> Option<f64> {
        Some(match *self {
            Scalar::F16(x) => x.to_f64(),
            Scalar::BF16(x) => x.to_f64(),
            Scalar::F32(x) => x.into(),
            Scalar::F64(x) => x,
            _ => return None,
        })
    }
}

/// One launch argument.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    /// A device buffer, passed as a pointer to its first element.
    Buffer(BufferArg<'a>),
    /// Another library's device array (CuPy, torch) of any element type, passed as its
    /// address; its owner keeps it alive for the launch ([`KernelArg::external`]).
    External(ExternalArg),
    /// A value.
    Scalar(Scalar),
    /// An integer of no declared C type (a Python `int`): converted exactly to the
    /// parameter's type where kiln knows it, else stored in the parameter's size (1, 2, 4 or
    /// 8 bytes) if it fits there as a signed or an unsigned integer.
    Int(i128),
    /// The bytes of a value of a type kiln has no scalar for (a complex number, a struct),
    /// passed as they are to a parameter of the same size whose type kiln does not check;
    /// refused by a parameter whose type it checks.
    Bytes(&'a [u8]),
}

/// Another library's device array: address, element type (`None`: one kiln has no scalar
/// for, e.g. complex) and length.
#[derive(Clone, Copy, Debug)]
pub struct ExternalArg {
    pub(super) ptr: u64,
    pub(super) elem: Option<ScalarType>,
    pub(super) len: usize,
}

impl ExternalArg {
    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
}

/// A device buffer argument: its address and dtype, borrowed for the launch.
#[derive(Clone, Copy, Debug)]
pub struct BufferArg<'a> {
    pub(super) ptr: u64,
    pub(super) dtype: DType,
    pub(super) len: usize,
    pub(super) _borrow: std::marker::PhantomData<&'a ()>,
}

impl<'a> KernelArg<'a> {
    /// A typed pool buffer.
    pub fn buffer<T: CudaElement>(b: &'a DeviceBuffer<T>) -> Self {
        KernelArg::Buffer(BufferArg {
            ptr: b.device_ptr(),
            dtype: T::DTYPE,
            len: b.len(),
            _borrow: std::marker::PhantomData,
        })
    }

    /// Another library's device array at `ptr`: `len` elements of `elem`. The caller keeps
    /// the memory alive until the launch's work is done (in its stream order); the address
    /// is checked against nothing but the parameter's element type.
    pub fn external(ptr: u64, elem: ScalarType, len: usize) -> Self {
        KernelArg::External(ExternalArg {
            ptr,
            elem: Some(elem),
            len,
        })
    }

    /// [`KernelArg::external`] for an array of an element type kiln has no scalar for
    /// (complex, structured): it fills a `void*` parameter, or any 8-byte parameter of a
    /// kernel whose parameter types kiln does not know. `ptr` 0 is a null pointer.
    pub fn external_untyped(ptr: u64, len: usize) -> Self {
        KernelArg::External(ExternalArg { ptr, elem: None, len })
    }

    /// A tensor's block (`CudaStorage::data`).
    pub fn data(d: &'a CudaData) -> Self {
        match d {
            CudaData::F32(b) => Self::buffer(b),
            CudaData::F64(b) => Self::buffer(b),
            CudaData::F16(b) => Self::buffer(b),
            CudaData::BF16(b) => Self::buffer(b),
            CudaData::U8(b) => Self::buffer(b),
            CudaData::U16(b) => Self::buffer(b),
        }
    }
}

impl<T: Into<Scalar>> From<T> for KernelArg<'_> {
    fn from(x: T) -> Self {
        KernelArg::Scalar(x.into())
    }
}

/// A checked argument as the kernel receives it (halves as their bits).
#[derive(Debug)]
pub(super) enum Value {
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
    /// A value given as its bytes (a parameter known by its size only).
    Bytes(Vec<u8>),
}

/// `a` as parameter `p` receives it, or why it cannot be.
pub(super) fn convert(p: &Param, a: &KernelArg<'_>) -> std::result::Result<Value, String> {
    match (p.ty, a) {
        (ParamType::Pointer(elem), KernelArg::Buffer(b)) => match elem {
            None => Ok(Value::U64(b.ptr)),
            Some(e) if e.dtype() == Some(b.dtype) => Ok(Value::U64(b.ptr)),
            Some(e) => Err(match e.dtype() {
                Some(d) => format!("takes a buffer of {d}, got one of {} ({} elements); cast it with cast({d})", b.dtype, b.len),
                None => format!(
                    "points to {}, which no kiln tensor holds (tensors hold f32, f64, f16, bf16, u8, u16); declare the parameter void* or as one of those",
                    e.c_name()
                ),
            }),
        },
        // a null pointer (Python's None) fills any pointer parameter
        (ParamType::Pointer(_), KernelArg::External(ExternalArg { ptr: 0, elem: None, .. })) => Ok(Value::U64(0)),
        (ParamType::Pointer(elem), KernelArg::External(x)) => match (elem, x.elem) {
            (None, _) => Ok(Value::U64(x.ptr)),
            (Some(e), Some(have)) if e == have => Ok(Value::U64(x.ptr)),
            (Some(e), have) => Err(format!(
                "takes a pointer to {}, got an array of {} ({} elements); pass an array of that type or declare the parameter void*",
                e.c_name(),
                have.map_or("a type kiln has no C scalar for (complex?)", ScalarType::c_name),
                x.len
            )),
        },
        (ParamType::Pointer(_), KernelArg::Scalar(s)) => Err(format!("takes a buffer (a tensor), got a scalar {}", s.type_name())),
        (ParamType::Pointer(_), KernelArg::Int(v)) => Err(format!("takes a buffer (a device array), got the integer {v}")),
        (ParamType::Pointer(_), KernelArg::Bytes(b)) => Err(format!("takes a buffer (a device array), got a {}-byte value", b.len())),
        (ParamType::Scalar(t), KernelArg::Buffer(b)) => Err(format!("takes a {} value, got a buffer of {}", t.c_name(), b.dtype)),
        (ParamType::Scalar(t), KernelArg::External(x)) => Err(format!(
            "takes a {} value, got an array of {}",
            t.c_name(),
            x.elem.map_or("a type kiln has no C scalar for", ScalarType::c_name)
        )),
        (ParamType::Scalar(t), KernelArg::Scalar(s)) => scalar(t, s),
        (ParamType::Scalar(t), KernelArg::Int(v)) => {
            let s = if let Ok(i) = i64::try_from(*v) {
                Scalar::I64(i)
            } else if let Ok(u) = u64::try_from(*v) {
                Scalar::U64(u)
            } else {
                return Err(format!("takes {}, got the integer {v}, which no C integer type holds", t.c_name()));
            };
            scalar(t, &s).map_err(|e| e.replace(&format!(" ({})", s.type_name()), ""))
        }
        (ParamType::Scalar(t), KernelArg::Bytes(b)) => Err(format!(
            "takes a {} value, got a {}-byte value of a type kiln has no C scalar for (a complex number?); pass a value of the parameter's type",
            t.c_name(),
            b.len()
        )),
    }
}

/// `a` as a parameter of `size` bytes whose type kiln does not know receives it: a device
/// array's address (8 bytes), a scalar of exactly that size, an untyped integer that fits in
/// it, or raw bytes of that length; anything else is refused rather than truncated or
/// padded (a 4-byte `float` given a `double` would read the wrong bits).
pub(super) fn convert_sized(size: usize, a: &KernelArg<'_>) -> std::result::Result<Value, String> {
    let hint = match size {
        1 => " (np.int8, np.uint8 or np.bool_)",
        2 => " (np.int16, np.uint16 or np.float16)",
        4 => " (np.int32, np.uint32 or np.float32)",
        8 => " (np.int64, np.uint64, np.float64 or np.complex64)",
        16 => " (np.complex128)",
        _ => "",
    };
    match a {
        KernelArg::Buffer(BufferArg { ptr, .. }) | KernelArg::External(ExternalArg { ptr, .. }) => {
            if size == 8 {
                Ok(Value::U64(*ptr))
            } else {
                Err(format!("a device array is passed as an 8-byte pointer, but the kernel's parameter takes {size} bytes"))
            }
        }
        KernelArg::Scalar(s) => {
            let bytes = s.to_le_bytes();
            if bytes.len() == size {
                Ok(Value::Bytes(bytes))
            } else {
                Err(format!(
                    "a {} is {} bytes, but the kernel's parameter takes {size}; pass a scalar of that size{hint}",
                    s.type_name(),
                    bytes.len()
                ))
            }
        }
        KernelArg::Int(v) => {
            let bits = 8 * size as u32;
            let fits =
                matches!(size, 1 | 2 | 4 | 8) && (*v >= -(1i128 << (bits - 1)) && *v < (1i128 << bits));
            if fits {
                Ok(Value::Bytes(v.to_le_bytes()[..size].to_vec()))
            } else if matches!(size, 1 | 2 | 4 | 8) {
                Err(format!(
                    "the integer {v} does not fit in the kernel's {size}-byte parameter"
                ))
            } else {
                Err(format!(
                    "an integer cannot fill the kernel's {size}-byte parameter; pass a value of that size"
                ))
            }
        }
        KernelArg::Bytes(b) => {
            if b.len() == size {
                Ok(Value::Bytes(b.to_vec()))
            } else {
                Err(format!(
                    "a {}-byte value, but the kernel's parameter takes {size} bytes; pass a value of that size{hint}",
                    b.len()
                ))
            }
        }
    }
}

/// `s` converted exactly to `t`: integers that fit, floats that round-trip, integers that a
/// float type holds exactly; never a float to an integer or anything to and from bool.
fn scalar(t: ScalarType, s: &Scalar) -> std::result::Result<Value, String> {
    use ScalarType as T;
    let inexact = |v: String| {
        Err(format!(
            "{v} ({}) is not exactly representable as {}; pass a value of the parameter's type",
            s.type_name(),
            t.c_name()
        ))
    };
    if t == T::Bool || matches!(s, Scalar::Bool(_)) {
        return match (t, s) {
            (T::Bool, Scalar::Bool(b)) => Ok(Value::Bool(*b)),
            _ => Err(format!(
                "takes {}, got {}; pass a {}",
                t.c_name(),
                s.type_name(),
                if t == T::Bool { "bool" } else { "number" }
            )),
        };
    }
    if !t.is_float() {
        let Some(v) = s.int() else {
            return Err(format!(
                "takes the integer type {}, got the float {} ({}); pass an integer",
                t.c_name(),
                s.float().unwrap_or(f64::NAN),
                s.type_name()
            ));
        };
        let fits =
            |x: std::result::Result<Value, std::num::TryFromIntError>| x.or_else(|_| inexact(v.to_string()));
        return match t {
            T::I8 => fits(i8::try_from(v).map(Value::I8)),
            T::I16 => fits(i16::try_from(v).map(Value::I16)),
            T::I32 => fits(i32::try_from(v).map(Value::I32)),
            T::I64 => fits(i64::try_from(v).map(Value::I64)),
            T::U8 => fits(u8::try_from(v).map(Value::U8)),
            T::U16 => fits(u16::try_from(v).map(Value::U16)),
            T::U32 => fits(u32::try_from(v).map(Value::U32)),
            _ => fits(u64::try_from(v).map(Value::U64)),
        };
    }
    // a float parameter: from an integer or a float, if the value survives the round trip
    let (v, text) = match (s.int(), s.float()) {
        (Some(i), _) => {
            // i64/u64 beyond 2^53 are not exact in f64 either: compare in i128
            let f = i as f64;
            if f as i128 != i {
                return inexact(i.to_string());
            }
            (f, i.to_string())
        }
        (None, Some(f)) => (f, f.to_string()),
        (None, None) => return Err(format!("unsupported scalar {}", s.type_name())),
    };
    let same = |back: f64| back == v || (back.is_nan() && v.is_nan());
    match t {
        T::F16 => {
            let h = f16::from_f64(v);
            if same(h.to_f64()) {
                Ok(Value::U16(h.to_bits()))
            } else {
                inexact(text)
            }
        }
        T::BF16 => {
            let h = bf16::from_f64(v);
            if same(h.to_f64()) {
                Ok(Value::U16(h.to_bits()))
            } else {
                inexact(text)
            }
        }
        T::F32 => {
            let x = v as f32;
            if same(f64::from(x)) {
                Ok(Value::F32(x))
            } else {
                inexact(text)
            }
        }
        _ => Ok(Value::F64(v)),
    }
}

impl Value {
    /// The address of the value, as `cuLaunchKernel`'s parameter array takes it.
    pub(super) fn as_param(&self) -> *mut std::ffi::c_void {
        match self {
            Value::Bool(x) => x as *const bool as *mut _,
            Value::I8(x) => x as *const i8 as *mut _,
            Value::I16(x) => x as *const i16 as *mut _,
            Value::I32(x) => x as *const i32 as *mut _,
            Value::I64(x) => x as *const i64 as *mut _,
            Value::U8(x) => x as *const u8 as *mut _,
            Value::U16(x) => x as *const u16 as *mut _,
            Value::U32(x) => x as *const u32 as *mut _,
            Value::U64(x) => x as *const u64 as *mut _,
            Value::F32(x) => x as *const f32 as *mut _,
            Value::F64(x) => x as *const f64 as *mut _,
            Value::Bytes(x) => x.as_ptr() as *mut _,
        }
    }
}
