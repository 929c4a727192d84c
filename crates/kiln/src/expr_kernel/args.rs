//! A call's arguments as an expression kernel takes them: arrays in device memory (kiln's
//! or another library's) and scalars, looked up by the kernel's parameter names, and the
//! generated parameter list filled from them (addresses, scalars converted to the
//! parameter's type, extents and broadcast strides).

use super::launch::Geometry;
use kiln_core::{Error, Result};
use kiln_cuda::user::{KernelArg, Scalar as CudaScalar, ScalarType as CudaType};
use kiln_expr::{ArgSpec, KernelParam, Scalar, ScalarType};

/// An array in device memory as an expression kernel reads or writes it in place: kiln's
/// pool block, or another library's (CuPy, torch). The caller keeps the memory alive until
/// the launch's work is done.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceArray {
    /// Device address of element `[0, ...]`.
    pub ptr: u64,
    /// Element type.
    pub dtype: ScalarType,
    /// Extent of each axis.
    pub shape: Vec<usize>,
    /// Step between neighbours along each axis, in elements.
    pub strides: Vec<isize>,
}

impl DeviceArray {
    /// A C-contiguous array of `shape` at `ptr`.
    pub fn contiguous(ptr: u64, dtype: ScalarType, shape: &[usize]) -> Self {
        DeviceArray {
            ptr,
            dtype,
            shape: shape.to_vec(),
            strides: kiln_expr::c_strides(shape),
        }
    }

    fn len(&self) -> usize {
        self.shape.iter().product()
    }
}

/// One argument of an expression kernel on device arrays.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceArg {
    /// An array in device memory.
    Array(DeviceArray),
    /// A scalar (converted to the parameter's type, C's conversion, as CuPy does).
    Scalar(Scalar),
}

impl DeviceArg {
    /// What binding sees: the array's type and shape, or the scalar's type.
    pub fn spec(&self) -> ArgSpec {
        match self {
            DeviceArg::Array(a) => ArgSpec::Array {
                dtype: a.dtype,
                shape: a.shape.clone(),
            },
            DeviceArg::Scalar(s) => ArgSpec::Scalar(s.dtype()),
        }
    }
}

/// A call's arrays and scalars by parameter name, borrowed from the call (a lookup walks the
/// few parameters; nothing is copied or hashed per call).
#[derive(Default)]
pub(crate) struct Named<'a> {
    /// Each argument under its name, with whether it is an output.
    entries: Vec<(&'a str, &'a DeviceArg, bool)>,
}

impl<'a> Named<'a> {
    /// `args` under `names` (a kernel's parameter names, in order).
    pub(crate) fn add(&mut self, names: impl Iterator<Item = &'a str>, args: &'a [DeviceArg], outputs: bool) {
        self.entries.extend(names.zip(args).map(|(n, a)| (n, a, outputs)));
    }

    /// The array named `name` (the last one given under it: an output over an input).
    pub(super) fn array(&self, name: &str) -> Option<&'a DeviceArray> {
        self.entries.iter().rev().find_map(|&(n, a, _)| match a {
            DeviceArg::Array(d) if n == name => Some(d),
            _ => None,
        })
    }

    /// The input scalar named `name` (scalars among outputs are dropped: binding refuses
    /// them).
    fn scalar(&self, name: &str) -> Option<&'a Scalar> {
        self.entries.iter().rev().find_map(|&(n, a, out)| match a {
            DeviceArg::Scalar(s) if n == name && !out => Some(s),
            _ => None,
        })
    }
}
/// The launch arguments for the generated kernel's parameters.
pub(super) fn kernel_args(
    named: &Named<'_>,
    params: &[KernelParam],
    g: &Geometry,
    kernel: &str,
) -> Result<Vec<KernelArg<'static>>> {
    let missing = |what: &str, name: &str| {
        Error::invalid(
            kernel,
            format!("the generated kernel takes the {what} `{name}`, which the call does not have"),
        )
    };
    let array = |name: &str| named.array(name).ok_or_else(|| missing("array", name));
    let scalar = |name: &str| named.scalar(name).ok_or_else(|| missing("scalar", name));
    let int = |v: i64| KernelArg::Scalar(CudaScalar::I64(v));
    params
        .iter()
        .map(|p| {
            Ok(match p {
                KernelParam::Array { name, dtype, .. } => {
                    let a = array(name)?;
                    KernelArg::external(a.ptr, storage_type(*dtype), a.len())
                }
                KernelParam::Scalar { name, dtype } => {
                    let s = scalar(name)?;
                    KernelArg::Scalar(cuda_scalar(s.cast(*dtype)))
                }
                KernelParam::ScalarImag { name, dtype } => {
                    let s = scalar(name)?;
                    KernelArg::Scalar(cuda_scalar(s.cast(*dtype).imag()))
                }
                KernelParam::Size => int(g.size as i64),
                KernelParam::ReduceSize => int(g.reduce_size as i64),
                KernelParam::Extent { axis } => int(g.extents.get(*axis).copied().unwrap_or(1) as i64),
                KernelParam::Stride { name, axis } => {
                    let a = array(name)?;
                    let b_axis = g.loop_axes.get(*axis).copied().unwrap_or(*axis);
                    int(broadcast_stride(a, g.rank, b_axis))
                }
                KernelParam::RawLen { name } => int(array(name)?.len() as i64),
                #[allow(unreachable_patterns)]
                other => {
                    return Err(Error::invalid(
                        kernel,
                        format!("the generated kernel's parameter {other:?} is not one kiln fills"),
                    ))
                }
            })
        })
        .collect()
}

/// The stride (in elements) of `a` along axis `b_axis` of a broadcast shape of rank `rank`:
/// 0 where the array is broadcast (a missing leading axis or an extent of 1), NumPy's rule;
/// the array's own stride otherwise.
fn broadcast_stride(a: &DeviceArray, rank: usize, b_axis: usize) -> i64 {
    let off = rank.max(a.shape.len()) - a.shape.len();
    if b_axis < off || a.shape.get(b_axis - off).is_none_or(|&e| e == 1) {
        return 0;
    }
    a.strides.get(b_axis - off).copied().unwrap_or(0) as i64
}

/// kiln-cuda's element type for an array of `t` as the generated source declares it (half
/// as its 16-bit storage).
fn storage_type(t: ScalarType) -> CudaType {
    match t {
        ScalarType::Bool => CudaType::Bool,
        ScalarType::I8 => CudaType::I8,
        ScalarType::I16 => CudaType::I16,
        ScalarType::I32 => CudaType::I32,
        ScalarType::I64 => CudaType::I64,
        ScalarType::U8 => CudaType::U8,
        ScalarType::U16 | ScalarType::F16 => CudaType::U16,
        ScalarType::U32 => CudaType::U32,
        ScalarType::U64 => CudaType::U64,
        ScalarType::F32 => CudaType::F32,
        ScalarType::F64 => CudaType::F64,
        // a complex array is passed as a pointer to its parts
        ScalarType::C64 => CudaType::F32,
        ScalarType::C128 => CudaType::F64,
    }
}

/// A scalar as the generated kernel takes it (a half scalar as `float`).
fn cuda_scalar(s: Scalar) -> CudaScalar {
    match s {
        Scalar::Bool(x) => CudaScalar::Bool(x),
        Scalar::I8(x) => CudaScalar::I8(x),
        Scalar::I16(x) => CudaScalar::I16(x),
        Scalar::I32(x) => CudaScalar::I32(x),
        Scalar::I64(x) => CudaScalar::I64(x),
        Scalar::U8(x) => CudaScalar::U8(x),
        Scalar::U16(x) => CudaScalar::U16(x),
        Scalar::U32(x) => CudaScalar::U32(x),
        Scalar::U64(x) => CudaScalar::U64(x),
        Scalar::F16(x) => CudaScalar::F32(x.to_f32()),
        Scalar::F32(x) => CudaScalar::F32(x),
        Scalar::F64(x) => CudaScalar::F64(x),
        // a complex scalar is two parameters: this real part, then `KernelParam::ScalarImag`
        Scalar::C64(..) | Scalar::C128(..) => cuda_scalar(s.real()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr(shape: &[usize]) -> DeviceArray {
        DeviceArray::contiguous(0x1000, ScalarType::F32, shape)
    }

    #[test]
    fn broadcast_strides_follow_numpy() {
        // (3, 1) against (2, 3, 4): axis 0 missing, axis 1 of extent 3, axis 2 broadcast
        assert_eq!(broadcast_stride(&arr(&[3, 1]), 3, 0), 0);
        assert_eq!(broadcast_stride(&arr(&[3, 1]), 3, 1), 1);
        assert_eq!(broadcast_stride(&arr(&[3, 1]), 3, 2), 0);
        assert_eq!(broadcast_stride(&arr(&[2, 3, 4]), 3, 0), 12);
        assert_eq!(broadcast_stride(&arr(&[2, 3, 4]), 3, 2), 1);
        // a strided view keeps its own strides
        let mut t = arr(&[2, 3]);
        t.strides = vec![1, 2];
        assert_eq!(broadcast_stride(&t, 2, 0), 1);
        assert_eq!(broadcast_stride(&t, 2, 1), 2);
    }
}
