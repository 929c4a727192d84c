//! The GPU side of the expression kernels: CUDA arrays as `(address, dtype, shape,
//! strides)`, the generated kernel's parameters filled in, the compile and the launch on
//! the caller's stream.

use super::host::python_scalar_type;
use super::{dtype, py_scalar};
use crate::errors::IntoPy;
use crate::kernels;
use kiln::cuda::user::{KernelArg, Scalar as CudaScalar};
use kiln::cuda::CudaBackend;
use kiln_expr::{ArgSpec, KernelParam, ReductionBinding, Scalar, ScalarType};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

/// A CUDA array argument as `_userkernel.py` gives it: `(address, dtype, shape, strides)`.
pub(super) struct DevArray {
    pub(super) ptr: u64,
    pub(super) dtype: ScalarType,
    pub(super) shape: Vec<usize>,
    pub(super) strides: Vec<isize>,
}

pub(super) fn dev_array(d: &Bound<'_, PyAny>) -> PyResult<DevArray> {
    let name: String = d.getattr("dtype")?.getattr("name")?.extract()?;
    Ok(DevArray {
        ptr: d.getattr("ptr")?.extract()?,
        dtype: dtype(&name)?,
        shape: d.getattr("shape")?.extract()?,
        strides: d.getattr("strides")?.extract()?,
    })
}

/// kiln-cuda's element type for an array of `t` as the generated source declares it (half
/// as its 16-bit storage).
pub(super) fn storage_type(t: ScalarType) -> kiln::cuda::user::ScalarType {
    use kiln::cuda::user::ScalarType as C;
    match t {
        ScalarType::Bool => C::Bool,
        ScalarType::I8 => C::I8,
        ScalarType::I16 => C::I16,
        ScalarType::I32 => C::I32,
        ScalarType::I64 => C::I64,
        ScalarType::U8 => C::U8,
        ScalarType::U16 | ScalarType::F16 => C::U16,
        ScalarType::U32 => C::U32,
        ScalarType::U64 => C::U64,
        ScalarType::F32 => C::F32,
        ScalarType::F64 => C::F64,
        // a complex array is passed as a pointer to its parts
        ScalarType::C64 => C::F32,
        ScalarType::C128 => C::F64,
    }
}

pub(super) fn cuda_scalar(s: Scalar) -> CudaScalar {
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
        // the generated source takes a half scalar as `float`
        Scalar::F16(x) => CudaScalar::F32(x.to_f32()),
        Scalar::F32(x) => CudaScalar::F32(x),
        Scalar::F64(x) => CudaScalar::F64(x),
        // a complex scalar is two parameters: this real part, then `KernelParam::ScalarImag`
        Scalar::C64(..) | Scalar::C128(..) => cuda_scalar(s.real()),
    }
}

/// One GPU call's arrays and scalars by parameter name, and the loop's axes.
pub(super) struct GpuCall {
    pub(super) arrays: HashMap<String, DevArray>,
    pub(super) scalars: HashMap<String, Scalar>,
    /// Per loop axis: its extent.
    pub(super) extents: Vec<usize>,
    /// Loop axes as axes of the broadcast shape (`None`: every axis in order).
    pub(super) loop_axes: Option<Vec<usize>>,
    pub(super) size: usize,
    pub(super) reduce_size: usize,
}

impl GpuCall {
    pub(super) fn args(&self, params: &[KernelParam]) -> PyResult<Vec<KernelArg<'static>>> {
        let shape_len = self.extents.len();
        params
            .iter()
            .map(|p| {
                Ok(match p {
                    KernelParam::Array { name, dtype, .. } => {
                        let a = self
                            .arrays
                            .get(name)
                            .ok_or_else(|| PyValueError::new_err(format!("no array {name}")))?;
                        KernelArg::external(a.ptr, storage_type(*dtype), a.shape.iter().product())
                    }
                    KernelParam::Scalar { name, dtype } => {
                        let s = self
                            .scalars
                            .get(name)
                            .ok_or_else(|| PyValueError::new_err(format!("no scalar {name}")))?;
                        KernelArg::Scalar(cuda_scalar(s.cast(*dtype)))
                    }
                    KernelParam::ScalarImag { name, dtype } => {
                        let s = self
                            .scalars
                            .get(name)
                            .ok_or_else(|| PyValueError::new_err(format!("no scalar {name}")))?;
                        KernelArg::Scalar(cuda_scalar(s.cast(*dtype).imag()))
                    }
                    KernelParam::Size => KernelArg::Scalar(CudaScalar::I64(self.size as i64)),
                    KernelParam::ReduceSize => KernelArg::Scalar(CudaScalar::I64(self.reduce_size as i64)),
                    KernelParam::Extent { axis } => KernelArg::Scalar(CudaScalar::I64(
                        self.extents.get(*axis).copied().unwrap_or(1) as i64,
                    )),
                    KernelParam::Stride { name, axis } => {
                        let a = self
                            .arrays
                            .get(name)
                            .ok_or_else(|| PyValueError::new_err(format!("no array {name}")))?;
                        // the broadcast-shape axis this loop axis is, then the array's own axis
                        // (right-aligned); extent-1 and missing axes broadcast with stride 0
                        let b_axis = self.loop_axes.as_ref().map_or(*axis, |l| l[*axis]);
                        let off = shape_len.max(a.shape.len()) - a.shape.len();
                        let stride = if b_axis < off || a.shape[b_axis - off] == 1 {
                            0
                        } else {
                            a.strides[b_axis - off]
                        };
                        KernelArg::Scalar(CudaScalar::I64(stride as i64))
                    }
                    KernelParam::RawLen { name } => {
                        let a = self
                            .arrays
                            .get(name)
                            .ok_or_else(|| PyValueError::new_err(format!("no array {name}")))?;
                        KernelArg::Scalar(CudaScalar::I64(a.shape.iter().product::<usize>() as i64))
                    }
                    #[allow(unreachable_patterns)]
                    other => return Err(PyValueError::new_err(format!("kernel parameter {other:?}"))),
                })
            })
            .collect()
    }
}

/// Compile (cached) and launch `source`'s kernel `name` with `args` on `stream`.
#[allow(clippy::too_many_arguments)]
pub(super) fn launch(
    py: Python<'_>,
    device: usize,
    source: &str,
    name: &str,
    options: &[String],
    grid: u32,
    block: u32,
    args: &[KernelArg<'static>],
    stream: Option<u64>,
) -> PyResult<()> {
    let (_rt, cuda): (_, Arc<CudaBackend>) = kernels::cuda_backend(py, device)?;
    let c = cuda.clone();
    // Without FMA contraction (NVRTC's default fuses `a * x + y`), so the GPU result is
    // bitwise the CPU path's: the kernel is checked against its own CPU evaluation. A user
    // who wants the contraction passes `--fmad=true` in `options`.
    let mut opts = Vec::with_capacity(options.len() + 1);
    if !options
        .iter()
        .any(|o| o.starts_with("--fmad") || o.starts_with("-fmad"))
    {
        opts.push("--fmad=false".to_string());
    }
    opts.extend(options.iter().cloned());
    let src = source.to_string();
    let module = py.detach(move || c.user_module(&src, &opts)).py()?;
    let f = module.function(name).py()?;
    let stream = stream.unwrap_or_else(|| cuda.stream().cu_stream() as u64);
    // SAFETY: `stream` is the caller's current stream of this device (or kiln's own); the
    // arrays are the caller's live CUDA arrays of this device, shaped as the binding says.
    unsafe { f.launch_on_stream(&cuda, (grid.max(1), 1, 1), (block, 1, 1), 0, args, stream) }.py()
}

/// The specs of GPU arguments (`DeviceArray`s and scalars) and the call they make, by the
/// parameter names `names`.
pub(super) fn describe_gpu(
    xs: &[Bound<'_, PyAny>],
    names: impl Iterator<Item = String>,
) -> PyResult<(Vec<ArgSpec>, GpuCall)> {
    let mut call = GpuCall {
        arrays: HashMap::new(),
        scalars: HashMap::new(),
        extents: Vec::new(),
        loop_axes: None,
        size: 0,
        reduce_size: 0,
    };
    let mut out = Vec::new();
    for (x, name) in xs.iter().zip(names) {
        if x.hasattr("ptr")? && x.hasattr("strides")? {
            let d = dev_array(x)?;
            out.push(ArgSpec::Array {
                dtype: d.dtype,
                shape: d.shape.clone(),
            });
            call.arrays.insert(name, d);
        } else {
            let t = python_scalar_type(x)?;
            out.push(ArgSpec::Scalar(t));
            call.scalars.insert(name, py_scalar(x, t)?);
        }
    }
    Ok((out, call))
}

impl GpuCall {
    /// [`GpuCall::args`] for a reduction: strides are looked up through the loop axes, the
    /// extents indexed by loop axis.
    pub(super) fn args_reduction(
        &self,
        params: &[KernelParam],
        rb: &ReductionBinding,
    ) -> PyResult<Vec<KernelArg<'static>>> {
        // strides are computed against the broadcast input shape's rank
        let rank = rb.binding.shape.len();
        params
            .iter()
            .map(|p| match p {
                KernelParam::Extent { axis } => Ok(KernelArg::Scalar(CudaScalar::I64(
                    self.extents.get(*axis).copied().unwrap_or(1) as i64,
                ))),
                KernelParam::Stride { name, axis } => {
                    let a = self
                        .arrays
                        .get(name)
                        .ok_or_else(|| PyValueError::new_err(format!("no array {name}")))?;
                    let b_axis = self.loop_axes.as_ref().map_or(*axis, |l| l[*axis]);
                    let off = rank.max(a.shape.len()) - a.shape.len();
                    let stride = if b_axis < off || a.shape[b_axis - off] == 1 {
                        0
                    } else {
                        a.strides[b_axis - off]
                    };
                    Ok(KernelArg::Scalar(CudaScalar::I64(stride as i64)))
                }
                other => self.args(std::slice::from_ref(other)).map(|mut v| v.remove(0)),
            })
            .collect()
    }
}
