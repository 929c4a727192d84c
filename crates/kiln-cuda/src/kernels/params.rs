//! Declared parameter lists of kiln's kernels: each [`Kernel`](super::Kernel) states the
//! parameters its `extern "C" __global__` declaration takes, in order, so the launch helper
//! (`launch.rs`) can check every launch's arguments against it and a CPU test
//! (`kernels/params_tests.rs`) can check the declarations against the CUDA sources.
//!
//! Element and scalar types are the user-kernel reader's [`ScalarType`]: one vocabulary for
//! kiln's kernels and users'. Structs passed by value (`KilnKeys`, `W1`, `RankWin`, ...) are
//! declared by their C name and size; the test reads their layout from the source.

pub use crate::user::signature::ScalarType;

/// What a kernel does with the memory a pointer parameter points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Read only (a `const T*` in the source).
    In,
    /// Written, not read before it is written.
    Out,
    /// Read and written.
    InOut,
}

/// One declared parameter of a kiln kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelParam {
    /// A device pointer to elements of `elem` (`None`: `void*`, elements of a type named by
    /// another argument).
    Pointer {
        /// The pointed-to element type, `None` for `void`.
        elem: Option<ScalarType>,
        /// Whether the kernel reads, writes or both.
        access: Access,
    },
    /// A scalar by value.
    Scalar(ScalarType),
    /// A struct by value, by its C name and size in bytes (its layout is the source's; the
    /// launcher's `#[repr(C)]` twin must have the same size).
    Struct {
        /// The C struct's name.
        name: &'static str,
        /// `sizeof` the struct.
        bytes: u32,
    },
}

impl KernelParam {
    /// Bytes it occupies in the kernel's parameter buffer.
    pub const fn size_bytes(self) -> usize {
        match self {
            KernelParam::Pointer { .. } => 8,
            KernelParam::Scalar(s) => s.size_bytes(),
            KernelParam::Struct { bytes, .. } => bytes as usize,
        }
    }

    /// The C type as the declaration spells it (`const float*`, `void*`, `int`, `W1`).
    pub fn c_type(self) -> String {
        match self {
            KernelParam::Pointer { elem, access } => {
                let t = elem.map_or("void", ScalarType::c_name);
                if access == Access::In {
                    format!("const {t}*")
                } else {
                    format!("{t}*")
                }
            }
            KernelParam::Scalar(s) => s.c_name().to_string(),
            KernelParam::Struct { name, .. } => name.to_string(),
        }
    }
}

/// Shorthands for the declaration tables (`kernels/table/*.rs`).
pub(crate) mod decl {
    pub(crate) use super::ScalarType::{F32, F64, I32, I64, U16, U32, U64, U8};
    use super::{Access, KernelParam, ScalarType};

    /// A `const T*` the kernel reads.
    pub(crate) const fn input(t: ScalarType) -> KernelParam {
        KernelParam::Pointer {
            elem: Some(t),
            access: Access::In,
        }
    }

    /// A `T*` the kernel writes.
    pub(crate) const fn output(t: ScalarType) -> KernelParam {
        KernelParam::Pointer {
            elem: Some(t),
            access: Access::Out,
        }
    }

    /// A `T*` the kernel reads and writes.
    pub(crate) const fn inout(t: ScalarType) -> KernelParam {
        KernelParam::Pointer {
            elem: Some(t),
            access: Access::InOut,
        }
    }

    /// A `const void*` the kernel reads (element type given by another argument).
    pub(crate) const INPUT_ANY: KernelParam = KernelParam::Pointer {
        elem: None,
        access: Access::In,
    };

    /// A `void*` the kernel writes (element type given by another argument).
    pub(crate) const OUTPUT_ANY: KernelParam = KernelParam::Pointer {
        elem: None,
        access: Access::Out,
    };

    /// A scalar by value.
    pub(crate) const fn val(t: ScalarType) -> KernelParam {
        KernelParam::Scalar(t)
    }

    /// finance.cuh's `KilnKeys` (two rows of ten u32 round keys).
    pub(crate) const KEYS: KernelParam = KernelParam::Struct {
        name: "KilnKeys",
        bytes: 80,
    };
    /// imaging.cuh's `W1`: up to 31 1-D weights (32 floats).
    pub(crate) const W1: KernelParam = KernelParam::Struct {
        name: "W1",
        bytes: 32 * 4,
    };
    /// imaging.cuh's `W2`: up to 31×31 2-D weights.
    pub(crate) const W2: KernelParam = KernelParam::Struct {
        name: "W2",
        bytes: 961 * 4,
    };
    /// imaging.cuh's `W3`: up to 7×7×7 3-D weights.
    pub(crate) const W3: KernelParam = KernelParam::Struct {
        name: "W3",
        bytes: 343 * 4,
    };
    /// rank.cu's `RankWin`: the window and the launch's scalars (14 ints).
    pub(crate) const RANK_WIN: KernelParam = KernelParam::Struct {
        name: "RankWin",
        bytes: 14 * 4,
    };
    /// rank.cu's `NetOffs`: 3 × 49 shorts, then 49 ints (4-byte aligned).
    pub(crate) const NET_OFFS: KernelParam = KernelParam::Struct {
        name: "NetOffs",
        bytes: 296 + 49 * 4,
    };
}

#[cfg(test)]
#[path = "params_tests.rs"]
mod tests;
