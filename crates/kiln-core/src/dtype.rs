//! Element types kiln stores.

use std::fmt;

/// The storage type of an array's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary64.
    F64,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    BF16,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
}

impl DType {
    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F64 => 8,
            DType::F32 => 4,
            DType::F16 | DType::BF16 | DType::U16 => 2,
            DType::U8 => 1,
        }
    }

    /// The short name used in kernel names (`sigmoid_f32`) and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::U8 => "u8",
            DType::U16 => "u16",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust element type with a kiln dtype: `f32`, `f64`, `f16`, `bf16`, `u8`, `u16`. Every
/// trait over element types (`Element`, the storages' element traits) builds on this one,
/// so `T::DTYPE` means the same thing everywhere. Every such type is `Zeroable` (its zero
/// bits are its zero), so large host buffers can come zeroed from the allocator.
pub trait HasDType: Copy + Send + Sync + bytemuck::Zeroable + 'static {
    /// The dtype tag.
    const DTYPE: DType;
}

macro_rules! has_dtype {
    ($($t:ty => $d:expr),*) => {$(impl HasDType for $t { const DTYPE: DType = $d; })*};
}
has_dtype!(f32 => DType::F32, f64 => DType::F64, half::f16 => DType::F16, half::bf16 => DType::BF16, u8 => DType::U8, u16 => DType::U16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_names() {
        assert_eq!(DType::F32.size_bytes(), 4);
        assert_eq!(DType::BF16.size_bytes(), 2);
        assert_eq!(DType::BF16.to_string(), "bf16");
    }
}
