//! Element types, typed scalars and host array views.

use std::fmt;

use half::f16;
use kiln_core::Error;

/// The element type of a kernel parameter, value or array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalarType {
    /// C++ `bool` (one byte, 0 or 1).
    Bool,
    /// `signed char`.
    I8,
    /// `short`.
    I16,
    /// `int`.
    I32,
    /// `long long` (and `long`, 64-bit on the LP64 targets CUDA runs on).
    I64,
    /// `unsigned char`.
    U8,
    /// `unsigned short`.
    U16,
    /// `unsigned int`.
    U32,
    /// `unsigned long long`.
    U64,
    /// IEEE binary16; arithmetic is done in `float` and rounded back to half after each
    /// operation, as CuPy's `float16` type does.
    F16,
    /// `float`.
    F32,
    /// `double`.
    F64,
    /// A complex number of two `float`s (real, then imaginary part; 8 bytes in memory, the
    /// layout of NumPy's `complex64` and C++'s `complex<float>`).
    C64,
    /// A complex number of two `double`s (16 bytes in memory: NumPy's `complex128`).
    C128,
}

impl ScalarType {
    /// Every type, in NumPy's order.
    pub const ALL: [ScalarType; 14] = [
        ScalarType::Bool,
        ScalarType::I8,
        ScalarType::I16,
        ScalarType::I32,
        ScalarType::I64,
        ScalarType::U8,
        ScalarType::U16,
        ScalarType::U32,
        ScalarType::U64,
        ScalarType::F16,
        ScalarType::F32,
        ScalarType::F64,
        ScalarType::C64,
        ScalarType::C128,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        use ScalarType::*;
        match self {
            Bool | I8 | U8 => 1,
            I16 | U16 | F16 => 2,
            I32 | U32 | F32 => 4,
            I64 | U64 | F64 | C64 => 8,
            C128 => 16,
        }
    }

    /// NumPy's name (`float32`, `int64`, `bool`, ...).
    pub fn name(self) -> &'static str {
        use ScalarType::*;
        match self {
            Bool => "bool",
            I8 => "int8",
            I16 => "int16",
            I32 => "int32",
            I64 => "int64",
            U8 => "uint8",
            U16 => "uint16",
            U32 => "uint32",
            U64 => "uint64",
            F16 => "float16",
            F32 => "float32",
            F64 => "float64",
            C64 => "complex64",
            C128 => "complex128",
        }
    }

    /// Whether this is a complex type.
    pub fn is_complex(self) -> bool {
        matches!(self, ScalarType::C64 | ScalarType::C128)
    }

    /// The type of a complex type's real and imaginary parts (`float32` for `complex64`,
    /// `float64` for `complex128`); a real type is its own part.
    pub fn part(self) -> ScalarType {
        match self {
            ScalarType::C64 => ScalarType::F32,
            ScalarType::C128 => ScalarType::F64,
            t => t,
        }
    }

    /// The complex type whose parts hold a real type's values as C++ promotes them
    /// (`float64` to `complex128`, every other real type to `complex64`); complex types
    /// are their own.
    pub(crate) fn complex_of(self) -> ScalarType {
        match self {
            ScalarType::F64 | ScalarType::C128 => ScalarType::C128,
            _ => ScalarType::C64,
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F16 | ScalarType::F32 | ScalarType::F64)
    }

    /// Whether this is an integer type (not `bool`).
    pub fn is_int(self) -> bool {
        !self.is_float() && !self.is_complex() && self != ScalarType::Bool
    }

    /// Whether this is an unsigned integer type.
    pub fn is_unsigned(self) -> bool {
        use ScalarType::*;
        matches!(self, U8 | U16 | U32 | U64)
    }

    /// The type named by a NumPy name or a C spelling (`float32`, `float`, `double`, `half`,
    /// `int`, `long long`, `unsigned int`, `uint8`, `size_t`, ...); `None` when the name is no
    /// type. `complex` is NumPy's alias of `complex128`.
    pub fn from_name(name: &str) -> Result<Option<ScalarType>, Error> {
        use ScalarType::*;
        let words: Vec<&str> = name.split_whitespace().collect();
        let joined = words.join(" ");
        let t = match joined.as_str() {
            "bool" | "bool_" => Bool,
            "int8" | "int8_t" | "signed char" | "char" => I8,
            "int16" | "int16_t" | "short" | "short int" | "signed short" => I16,
            "int32" | "int32_t" | "int" | "signed" | "signed int" | "intc" => I32,
            "int64" | "int64_t" | "long" | "long int" | "long long" | "long long int" | "signed long"
            | "signed long long" | "ptrdiff_t" | "intp" => I64,
            "uint8" | "uint8_t" | "unsigned char" => U8,
            "uint16" | "uint16_t" | "unsigned short" | "unsigned short int" => U16,
            "uint32" | "uint32_t" | "unsigned" | "unsigned int" | "uintc" => U32,
            "uint64"
            | "uint64_t"
            | "unsigned long"
            | "unsigned long long"
            | "unsigned long int"
            | "unsigned long long int"
            | "size_t"
            | "uintp" => U64,
            "float16" | "half" => F16,
            "float32" | "float" => F32,
            "float64" | "double" | "float_" => F64,
            "complex64" | "complex<float>" | "csingle" => C64,
            "complex128" | "complex" | "complex_" | "complex<double>" | "cdouble" => C128,
            "complex256" | "clongdouble" | "complex<long double>" => {
                return Err(Error::invalid(
                    "kernel",
                    format!("type `{name}`: extended-precision complex has no CUDA type; use complex128"),
                ))
            }
            _ => return Ok(None),
        };
        Ok(Some(t))
    }

    /// The C type the generated CUDA source stores values of this type in. Half values are
    /// held as `float` (rounded to half after each operation) and stored as their bits.
    pub fn c_name(self) -> &'static str {
        use ScalarType::*;
        match self {
            Bool => "bool",
            I8 => "signed char",
            I16 => "short",
            I32 => "int",
            I64 => "long long",
            U8 => "unsigned char",
            U16 => "unsigned short",
            U32 => "unsigned int",
            U64 => "unsigned long long",
            F16 | F32 => "float",
            F64 => "double",
            C64 => "_kiln_c64",
            C128 => "_kiln_c128",
        }
    }

    /// The C type of an element in device memory (`unsigned short` for half's bits).
    pub fn c_storage_name(self) -> &'static str {
        if self == ScalarType::F16 {
            "unsigned short"
        } else {
            self.c_name()
        }
    }

    /// Integer conversion rank (C's), for the usual arithmetic conversions.
    pub(crate) fn rank(self) -> u8 {
        use ScalarType::*;
        match self {
            Bool => 0,
            I8 | U8 => 1,
            I16 | U16 => 2,
            I32 | U32 => 3,
            I64 | U64 => 4,
            F16 => 5,
            F32 => 6,
            F64 => 7,
            C64 => 8,
            C128 => 9,
        }
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// C's integer promotion: types narrower than `int` (and `bool`) become `int`.
pub(crate) fn promote(t: ScalarType) -> ScalarType {
    if t.rank() < 3 {
        ScalarType::I32
    } else {
        t
    }
}

/// C's usual arithmetic conversions: the common type of a binary arithmetic operation.
/// `half` with `half` stays `half` (computed in float, rounded back), as CuPy's `float16`.
///
/// A complex operand makes the result complex, of parts of the common type of both
/// operands' parts (C++'s `complex<T>` promotion: `complex64` with `float64` gives
/// `complex128`, with any integer `complex64`).
pub(crate) fn common_type(a: ScalarType, b: ScalarType) -> ScalarType {
    use ScalarType::*;
    if a.is_complex() || b.is_complex() {
        return common_type(a.part(), b.part()).complex_of();
    }
    if a == F64 || b == F64 {
        return F64;
    }
    if a == F32 || b == F32 {
        return F32;
    }
    if a == F16 || b == F16 {
        return F16;
    }
    let (a, b) = (promote(a), promote(b));
    if a == b {
        return a;
    }
    if a.is_unsigned() == b.is_unsigned() {
        return if a.rank() >= b.rank() { a } else { b };
    }
    let (u, s) = if a.is_unsigned() { (a, b) } else { (b, a) };
    if u.rank() >= s.rank() {
        u
    } else {
        // The signed type is wider and holds every value of the unsigned one.
        s
    }
}

/// A typed scalar argument (a NumPy scalar, or a Python number with its default type).
#[derive(Clone, Copy, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum Scalar {
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    F16(f16),
    F32(f32),
    F64(f64),
    /// `complex64`: the real, then the imaginary part.
    C64(f32, f32),
    /// `complex128`: the real, then the imaginary part.
    C128(f64, f64),
}

impl Scalar {
    /// The scalar's type.
    pub fn dtype(&self) -> ScalarType {
        match self {
            Scalar::Bool(_) => ScalarType::Bool,
            Scalar::I8(_) => ScalarType::I8,
            Scalar::I16(_) => ScalarType::I16,
            Scalar::I32(_) => ScalarType::I32,
            Scalar::I64(_) => ScalarType::I64,
            Scalar::U8(_) => ScalarType::U8,
            Scalar::U16(_) => ScalarType::U16,
            Scalar::U32(_) => ScalarType::U32,
            Scalar::U64(_) => ScalarType::U64,
            Scalar::F16(_) => ScalarType::F16,
            Scalar::F32(_) => ScalarType::F32,
            Scalar::F64(_) => ScalarType::F64,
            Scalar::C64(..) => ScalarType::C64,
            Scalar::C128(..) => ScalarType::C128,
        }
    }

    /// The value as a C conversion to `to` would give it (integers wrap, floats truncate
    /// toward zero and saturate into integers, NaN gives 0, anything non-zero is `true`).
    /// A real value becomes a complex one with imaginary part 0; a complex value converts
    /// to a real type as NumPy's `astype` does: its real part (a kernel body refuses that
    /// conversion, which C++'s `complex` does not have; this is the conversion of a
    /// scalar argument to its parameter's type).
    pub fn cast(self, to: ScalarType) -> Scalar {
        let v = self.to_value();
        Scalar::from_value(v.cast(self.dtype(), to), to)
    }

    /// The real part (the value itself for a real scalar, `float` for `complex64`,
    /// `double` for `complex128`).
    pub fn real(self) -> Scalar {
        match self {
            Scalar::C64(re, _) => Scalar::F32(re),
            Scalar::C128(re, _) => Scalar::F64(re),
            s => s,
        }
    }

    /// The imaginary part, in the type of [`Scalar::real`] (0 for a real scalar).
    pub fn imag(self) -> Scalar {
        match self {
            Scalar::C64(_, im) => Scalar::F32(im),
            Scalar::C128(_, im) => Scalar::F64(im),
            s => Scalar::I32(0).cast(s.dtype()),
        }
    }

    pub(crate) fn to_value(self) -> Value {
        match self {
            Scalar::Bool(b) => Value::B(b),
            Scalar::I8(x) => Value::I(x as i64),
            Scalar::I16(x) => Value::I(x as i64),
            Scalar::I32(x) => Value::I(x as i64),
            Scalar::I64(x) => Value::I(x),
            Scalar::U8(x) => Value::U(x as u64),
            Scalar::U16(x) => Value::U(x as u64),
            Scalar::U32(x) => Value::U(x as u64),
            Scalar::U64(x) => Value::U(x),
            Scalar::F16(x) => Value::F(x.to_f64()),
            Scalar::F32(x) => Value::F(x as f64),
            Scalar::F64(x) => Value::F(x),
            Scalar::C64(re, im) => Value::C(re as f64, im as f64),
            Scalar::C128(re, im) => Value::C(re, im),
        }
    }

    /// Builds a scalar of type `t` from a value already converted to `t`.
    pub(crate) fn from_value(v: Value, t: ScalarType) -> Scalar {
        let (i, u, f, b) = (v.as_i64(), v.as_u64(), v.as_f64(), v.as_bool());
        match t {
            ScalarType::Bool => Scalar::Bool(b),
            ScalarType::I8 => Scalar::I8(i as i8),
            ScalarType::I16 => Scalar::I16(i as i16),
            ScalarType::I32 => Scalar::I32(i as i32),
            ScalarType::I64 => Scalar::I64(i),
            ScalarType::U8 => Scalar::U8(u as u8),
            ScalarType::U16 => Scalar::U16(u as u16),
            ScalarType::U32 => Scalar::U32(u as u32),
            ScalarType::U64 => Scalar::U64(u),
            ScalarType::F16 => Scalar::F16(f16::from_f64(f)),
            ScalarType::F32 => Scalar::F32(f as f32),
            ScalarType::F64 => Scalar::F64(f),
            ScalarType::C64 => {
                let (re, im) = v.parts();
                Scalar::C64(re as f32, im as f32)
            }
            ScalarType::C128 => {
                let (re, im) = v.parts();
                Scalar::C128(re, im)
            }
        }
    }
}

/// A compile-time value: the widest representation of its kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value {
    B(bool),
    I(i64),
    U(u64),
    F(f64),
    /// A complex value: real and imaginary parts (each exactly a value of the type's part).
    C(f64, f64),
}

impl Value {
    /// Real and imaginary parts (imaginary 0 for a real value).
    pub(crate) fn parts(self) -> (f64, f64) {
        match self {
            Value::C(re, im) => (re, im),
            v => (v.as_f64(), 0.0),
        }
    }
    pub(crate) fn as_i64(self) -> i64 {
        match self {
            Value::B(b) => b as i64,
            Value::I(i) => i,
            Value::U(u) => u as i64,
            Value::F(f) | Value::C(f, _) => f as i64,
        }
    }
    pub(crate) fn as_u64(self) -> u64 {
        match self {
            Value::B(b) => b as u64,
            Value::I(i) => i as u64,
            Value::U(u) => u,
            // C's float-to-unsigned conversion of a negative value is undefined; CUDA's
            // cvt saturates to 0, as Rust's `as` does.
            Value::F(f) | Value::C(f, _) => f as u64,
        }
    }
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Value::B(b) => b as u8 as f64,
            Value::I(i) => i as f64,
            Value::U(u) => u as f64,
            Value::F(f) | Value::C(f, _) => f,
        }
    }
    /// The value as `float` (integers converted directly, not through `double`).
    fn as_f32(self) -> f32 {
        match self {
            Value::B(b) => b as u8 as f32,
            Value::I(i) => i as f32,
            Value::U(u) => u as f32,
            Value::F(f) | Value::C(f, _) => f as f32,
        }
    }
    pub(crate) fn as_bool(self) -> bool {
        match self {
            Value::B(b) => b,
            Value::I(i) => i != 0,
            Value::U(u) => u != 0,
            Value::F(f) => f != 0.0,
            Value::C(re, im) => re != 0.0 || im != 0.0,
        }
    }
    /// The value converted from type `from` to `to` (C conversion, then narrowed).
    pub(crate) fn cast(self, from: ScalarType, to: ScalarType) -> Value {
        use ScalarType::*;
        // Narrow float sources first so an f32-typed value is exactly what f32 holds.
        let src = match (self, from) {
            (Value::F(f), F32) => Value::F(f as f32 as f64),
            (Value::F(f), F16) => Value::F(f16::from_f64(f).to_f64()),
            (Value::C(re, im), C64) => Value::C(re as f32 as f64, im as f32 as f64),
            _ => self,
        };
        match to {
            Bool => Value::B(src.as_bool()),
            I8 => Value::I(int_from(src, from) as i8 as i64),
            I16 => Value::I(int_from(src, from) as i16 as i64),
            I32 => Value::I(int_from(src, from) as i32 as i64),
            I64 => Value::I(int_from(src, from)),
            U8 => Value::U(uint_from(src, from) as u8 as u64),
            U16 => Value::U(uint_from(src, from) as u16 as u64),
            U32 => Value::U(uint_from(src, from) as u32 as u64),
            U64 => Value::U(uint_from(src, from)),
            F16 => Value::F(f16::from_f64(src.as_f64()).to_f64()),
            F32 => Value::F(src.as_f64() as f32 as f64),
            F64 => Value::F(src.as_f64()),
            C64 => {
                let im = src.parts().1;
                Value::C(src.as_f32() as f64, im as f32 as f64)
            }
            C128 => Value::C(src.as_f64(), src.parts().1),
        }
    }
}

fn int_from(v: Value, _from: ScalarType) -> i64 {
    v.as_i64()
}

fn uint_from(v: Value, _from: ScalarType) -> u64 {
    match v {
        // A float converts to unsigned through the signed range when negative (what CUDA's
        // cvt.rzi.s64 then a reinterpretation gives for in-range negatives).
        Value::F(f) | Value::C(f, _) if f < 0.0 => (f as i64) as u64,
        _ => v.as_u64(),
    }
}

/// A read-only view of a host array: element type, shape, strides in elements (may be 0 or
/// negative), the offset of element `[0, 0, ...]` in elements, and the bytes it lies in.
#[derive(Clone, Debug)]
pub struct HostArray<'a> {
    /// Element type.
    pub dtype: ScalarType,
    /// Extent of each axis.
    pub shape: Vec<usize>,
    /// Step between neighbours along each axis, in elements.
    pub strides: Vec<isize>,
    /// Index (in elements) of the first element within `bytes`.
    pub offset: usize,
    /// The memory, native-endian elements.
    pub bytes: &'a [u8],
}

impl<'a> HostArray<'a> {
    /// A C-contiguous view of `bytes` with `shape`.
    pub fn contiguous(dtype: ScalarType, shape: &[usize], bytes: &'a [u8]) -> Self {
        HostArray {
            dtype,
            shape: shape.to_vec(),
            strides: c_strides(shape),
            offset: 0,
            bytes,
        }
    }

    /// A C-contiguous view of a typed slice.
    pub fn from_slice<T: Element>(shape: &[usize], data: &'a [T]) -> Self {
        Self::contiguous(T::DTYPE, shape, T::as_bytes(data))
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the array has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks that every element the view addresses lies inside `bytes`.
    pub(crate) fn validate(&self, op: &str, what: &str) -> Result<(), Error> {
        if self.strides.len() != self.shape.len() {
            return Err(Error::invalid(
                op,
                format!(
                    "{what}: {} strides for {} axes",
                    self.strides.len(),
                    self.shape.len()
                ),
            ));
        }
        if self.is_empty() {
            return Ok(());
        }
        let (mut lo, mut hi) = (self.offset as i128, self.offset as i128);
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            let span = (n as i128 - 1) * s as i128;
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        let avail = (self.bytes.len() / self.dtype.size()) as i128;
        if lo < 0 || hi >= avail {
            return Err(Error::invalid(op, format!("{what}: shape {:?} with strides {:?} and offset {} addresses elements {lo}..={hi}, but the buffer holds {avail} {} elements", self.shape, self.strides, self.offset, self.dtype)));
        }
        Ok(())
    }
}

/// A writable, C-contiguous host array (a kernel's output).
#[derive(Debug)]
pub struct HostArrayMut<'a> {
    /// Element type.
    pub dtype: ScalarType,
    /// Extent of each axis.
    pub shape: Vec<usize>,
    /// The memory, native-endian, C order.
    pub bytes: &'a mut [u8],
}

impl<'a> HostArrayMut<'a> {
    /// A view of a typed slice.
    pub fn from_slice<T: Element>(shape: &[usize], data: &'a mut [T]) -> Self {
        HostArrayMut {
            dtype: T::DTYPE,
            shape: shape.to_vec(),
            bytes: T::as_bytes_mut(data),
        }
    }
}

/// An owned C-contiguous array (what a kernel call allocates for outputs not given).
#[derive(Clone, Debug, PartialEq)]
pub struct OwnedArray {
    /// Element type.
    pub dtype: ScalarType,
    /// Extent of each axis.
    pub shape: Vec<usize>,
    /// The elements, native-endian, C order.
    pub bytes: Vec<u8>,
}

impl OwnedArray {
    /// A zero-filled array.
    pub fn zeros(dtype: ScalarType, shape: &[usize]) -> Self {
        let n: usize = shape.iter().product();
        OwnedArray {
            dtype,
            shape: shape.to_vec(),
            bytes: vec![0; n * dtype.size()],
        }
    }

    /// The elements as `T` (an error naming both types when `T` is not the dtype).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, Error> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(
                "OwnedArray::to_vec",
                format!("the array holds {}, not {}", self.dtype, T::DTYPE),
            ));
        }
        Ok(self
            .bytes
            .chunks_exact(self.dtype.size())
            .map(T::from_ne)
            .collect())
    }

    /// A writable view.
    pub fn view_mut(&mut self) -> HostArrayMut<'_> {
        HostArrayMut {
            dtype: self.dtype,
            shape: self.shape.clone(),
            bytes: &mut self.bytes,
        }
    }

    /// A read-only view.
    pub fn view(&self) -> HostArray<'_> {
        HostArray::contiguous(self.dtype, &self.shape, &self.bytes)
    }
}

/// C-order strides (in elements) of `shape`.
pub fn c_strides(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for k in (0..shape.len()).rev() {
        s[k] = acc;
        acc *= shape[k].max(1) as isize;
    }
    s
}

/// A Rust element type with a [`ScalarType`].
pub trait Element: Copy + Send + Sync + 'static {
    /// Its type.
    const DTYPE: ScalarType;
    /// The bytes of a slice.
    fn as_bytes(s: &[Self]) -> &[u8];
    /// The bytes of a mutable slice.
    fn as_bytes_mut(s: &mut [Self]) -> &mut [u8];
    /// One element from its native-endian bytes (exactly `size` bytes).
    fn from_ne(b: &[u8]) -> Self;
}

macro_rules! element_pod {
    ($($t:ty => $d:ident),*) => {$(
        impl Element for $t {
            const DTYPE: ScalarType = ScalarType::$d;
            fn as_bytes(s: &[Self]) -> &[u8] { bytemuck::cast_slice(s) }
            fn as_bytes_mut(s: &mut [Self]) -> &mut [u8] { bytemuck::cast_slice_mut(s) }
            fn from_ne(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                bytemuck::cast(a)
            }
        }
    )*};
}
element_pod!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64, f16 => F16, f32 => F32, f64 => F64);
// complex64 and complex128 elements: `[real, imaginary]`, NumPy's layout.
element_pod!([f32; 2] => C64, [f64; 2] => C128);
