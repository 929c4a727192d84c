//! Users' element-wise and reduction expression kernels ([`crate::expr`]: CuPy's
//! `ElementwiseKernel` and `ReductionKernel`) on a runtime's device, host arrays in and out.
//!
//! On a CUDA runtime the kernel's generated source (kiln-expr's `cuda_source`: one fused
//! kernel per binding, shapes and strides as parameters) goes through the raw-kernel path:
//! NVRTC for the device's exact `sm_XX`, the on-disk cubin cache, a module loaded once per
//! backend, arguments checked against the generated parameter list. It is compiled with
//! `--fmad=false`, so no multiply and add are contracted into an FMA and IEEE arithmetic
//! (`+ - * /`, `sqrt`, conversions) gives the bits of the CPU evaluator; transcendental
//! functions may differ in the last ulps (CUDA's libdevice against kiln's CPU math).
//! Inputs are uploaded C-contiguous, outputs start as zeros (as the CPU path allocates
//! them), the kernel is queued on the thread's current stream and the outputs are read
//! back, which surfaces a fault in the kernel as kiln's own ops do ([`Error::is_sticky`]).
//!
//! On a CPU runtime the same typed body runs in kiln-expr's evaluator (`call_alloc`).
//!
//! ```no_run
//! use kiln::expr::{Arg, ElementwiseKernel, HostArray, Scalar};
//! use kiln::{Config, DeviceRequest, Runtime};
//! let rt = Runtime::new(DeviceRequest::Auto, &Config::load(None)?)?;
//! let axpy = ElementwiseKernel::new("float32 x, float32 y, float32 a", "float32 z", "z = a * x + y", "axpy")?;
//! let (x, y) = (vec![1.0f32, 2.0, 3.0], vec![0.5f32; 3]);
//! let z = rt.elementwise_kernel(
//!     &axpy,
//!     &[Arg::Array(HostArray::from_slice(&[3], &x)), Arg::Array(HostArray::from_slice(&[3], &y)), Arg::Scalar(Scalar::F32(2.0))],
//!     None,
//! )?;
//! assert_eq!(z[0].to_vec::<f32>()?, [2.5, 4.5, 6.5]);
//! # Ok::<(), kiln::Error>(())
//! ```

use crate::{Engine, Runtime};
use kiln_core::{Error, Result};
use kiln_cuda::pool::DeviceBuffer;
use kiln_cuda::user::{KernelArg, Scalar as CudaScalar, ScalarType as CudaType};
use kiln_cuda::CudaBackend;
use kiln_expr::{
    Arg, ArgSpec, Axis, ElementwiseKernel, HostArray, KernelParam, OwnedArray, ReductionKernel, Scalar,
    ScalarType,
};
use std::borrow::Cow;
use std::collections::HashMap;

/// Threads per block of an element-wise launch (the generated loop is grid-stride, so any
/// block size covers every element; CuPy's default).
const ELEMENTWISE_BLOCK: u32 = 128;

/// NVRTC options of every generated kernel: no FMA contraction (see the module docs).
fn options() -> Vec<String> {
    vec!["--fmad=false".to_string()]
}

impl Runtime {
    /// Runs an element-wise kernel on this runtime's device: `inputs` in `k`'s input order
    /// (host arrays and scalars, CuPy's binding and broadcasting rules), `size` CuPy's
    /// `size=` (only when every array is raw). Returns the outputs, allocated, in `k`'s
    /// output order. A kernel with a preamble, or a body outside kiln's C subset, runs only
    /// on a GPU (emitted verbatim); on the CPU it is an `InvalidArgument` naming the construct.
    pub fn elementwise_kernel(
        &self,
        k: &ElementwiseKernel,
        inputs: &[Arg<'_>],
        size: Option<usize>,
    ) -> Result<Vec<OwnedArray>> {
        let dev = match self.engine() {
            Engine::Cpu(_) => return k.call_alloc(inputs, size),
            Engine::Cuda(d) => d,
        };
        k.check_arg_count(inputs.len())?;
        let specs: Vec<ArgSpec> = inputs.iter().map(Arg::spec).collect();
        let b = k.bind(&specs, &[], size)?;
        let source = k.cuda_source(&b)?;
        let nin = k.in_params().len();
        let mut outs: Vec<OwnedArray> = (0..k.out_params().len())
            .map(|j| OwnedArray::zeros(b.param_types[nin + j], &b.shape))
            .collect();
        let n = b.size();
        if n == 0 {
            return Ok(outs);
        }
        let names = k
            .in_params()
            .iter()
            .chain(k.out_params())
            .map(|p| p.name.as_str());
        let call = DeviceCall::upload(dev, k.name(), names, inputs, &outs)?;
        let geometry = Geometry {
            rank: b.shape.len(),
            extents: b.shape.clone(),
            loop_axes: (0..b.shape.len()).collect(),
            size: n,
            reduce_size: 0,
        };
        let args = call.args(&k.kernel_params(&b), &geometry, k.name())?;
        let grid = n.div_ceil(ELEMENTWISE_BLOCK as usize).min(i32::MAX as usize) as u32;
        launch(dev, &source, k.name(), grid, ELEMENTWISE_BLOCK, &args)?;
        call.download(dev, &mut outs)?;
        Ok(outs)
    }

    /// Runs a reduction kernel on this runtime's device: `inputs` in `k`'s input order, the
    /// reduced `axis` (NumPy's: `Axis::All` for every axis) and `keepdims`. Returns the
    /// outputs, allocated, in `k`'s output order.
    pub fn reduction_kernel(
        &self,
        k: &ReductionKernel,
        inputs: &[Arg<'_>],
        axis: &Axis,
        keepdims: bool,
    ) -> Result<Vec<OwnedArray>> {
        let dev = match self.engine() {
            Engine::Cpu(_) => return k.call_alloc(inputs, axis, keepdims),
            Engine::Cuda(d) => d,
        };
        let specs: Vec<ArgSpec> = inputs.iter().map(Arg::spec).collect();
        let rb = k.bind(&specs, &[], axis, keepdims)?;
        let source = k.cuda_source(&rb)?;
        let nin = k.in_params().len();
        let mut outs: Vec<OwnedArray> = (0..k.out_params().len())
            .map(|j| OwnedArray::zeros(rb.binding.param_types[nin + j], &rb.out_shape))
            .collect();
        let n = rb.out_size();
        if n == 0 {
            return Ok(outs);
        }
        let names = k
            .in_params()
            .iter()
            .chain(k.out_params())
            .map(|p| p.name.as_str());
        let call = DeviceCall::upload(dev, k.name(), names, inputs, &outs)?;
        let loop_axes = rb.loop_axes();
        let geometry = Geometry {
            rank: rb.binding.shape.len(),
            extents: loop_axes.iter().map(|&a| rb.binding.shape[a]).collect(),
            loop_axes,
            size: n,
            reduce_size: rb.reduce_size(),
        };
        let args = call.args(&k.kernel_params(&rb), &geometry, k.name())?;
        // one block per output element, grid-stride over the outputs
        let grid = n.min(i32::MAX as usize) as u32;
        launch(dev, &source, k.name(), grid, kiln_expr::REDUCTION_BLOCK, &args)?;
        call.download(dev, &mut outs)?;
        Ok(outs)
    }
}

/// Compile (or load from the cache) `source` and queue its kernel `name`.
fn launch(
    dev: &CudaBackend,
    source: &str,
    name: &str,
    grid: u32,
    block: u32,
    args: &[KernelArg<'_>],
) -> Result<()> {
    let module = dev.user_module(source, &options())?;
    let f = module.function(name)?;
    f.launch(dev, (grid.max(1), 1, 1), (block, 1, 1), 0, args)
}

/// The loop a generated kernel's shape parameters describe.
struct Geometry {
    /// Rank of the broadcast shape the strides are taken against.
    rank: usize,
    /// Extent of each loop axis.
    extents: Vec<usize>,
    /// Each loop axis as an axis of the broadcast shape.
    loop_axes: Vec<usize>,
    /// Loop elements (element-wise) or output elements (reduction).
    size: usize,
    /// Elements reduced into each output (reductions).
    reduce_size: usize,
}

/// One array on the device: its bytes (C order) and what it holds.
struct DevArray {
    buf: DeviceBuffer<u8>,
    shape: Vec<usize>,
    len: usize,
}

/// A call's arrays on the device and its scalars, by parameter name.
struct DeviceCall {
    arrays: HashMap<String, DevArray>,
    scalars: HashMap<String, Scalar>,
    /// The outputs' parameter names, in order.
    outputs: Vec<String>,
}

impl DeviceCall {
    /// Uploads the input arrays (C-contiguous) and zero-filled outputs; `names` are the
    /// kernel's parameter names, inputs then outputs.
    fn upload<'n>(
        dev: &CudaBackend,
        kernel: &str,
        mut names: impl Iterator<Item = &'n str>,
        inputs: &[Arg<'_>],
        outs: &[OwnedArray],
    ) -> Result<DeviceCall> {
        let mut call = DeviceCall {
            arrays: HashMap::new(),
            scalars: HashMap::new(),
            outputs: Vec::new(),
        };
        for a in inputs {
            let name = names.next().unwrap_or_default().to_string();
            match a {
                Arg::Scalar(s) => {
                    call.scalars.insert(name, *s);
                }
                Arg::Array(h) => {
                    let bytes = contiguous(h, kernel, &name)?;
                    let arr = dev_array(dev, &bytes, &h.shape)?;
                    call.arrays.insert(name, arr);
                }
            }
        }
        for o in outs {
            let name = names.next().unwrap_or_default().to_string();
            let arr = dev_array(dev, &o.bytes, &o.shape)?;
            call.arrays.insert(name.clone(), arr);
            call.outputs.push(name);
        }
        Ok(call)
    }

    /// The launch arguments for the generated kernel's parameters.
    fn args(&self, params: &[KernelParam], g: &Geometry, kernel: &str) -> Result<Vec<KernelArg<'static>>> {
        let missing = |what: &str, name: &str| {
            Error::invalid(
                kernel,
                format!("the generated kernel takes the {what} `{name}`, which the call does not have"),
            )
        };
        let array = |name: &str| self.arrays.get(name).ok_or_else(|| missing("array", name));
        let int = |v: usize| KernelArg::Scalar(CudaScalar::I64(v as i64));
        params
            .iter()
            .map(|p| {
                Ok(match p {
                    KernelParam::Array { name, dtype, .. } => {
                        let a = array(name)?;
                        KernelArg::external(a.buf.device_ptr(), storage_type(*dtype), a.len)
                    }
                    KernelParam::Scalar { name, dtype } => {
                        let s = self.scalars.get(name).ok_or_else(|| missing("scalar", name))?;
                        KernelArg::Scalar(cuda_scalar(s.cast(*dtype)))
                    }
                    KernelParam::ScalarImag { name, dtype } => {
                        let s = self.scalars.get(name).ok_or_else(|| missing("scalar", name))?;
                        KernelArg::Scalar(cuda_scalar(s.cast(*dtype).imag()))
                    }
                    KernelParam::Size => int(g.size),
                    KernelParam::ReduceSize => int(g.reduce_size),
                    KernelParam::Extent { axis } => int(g.extents.get(*axis).copied().unwrap_or(1)),
                    KernelParam::Stride { name, axis } => {
                        let a = array(name)?;
                        let b_axis = g.loop_axes.get(*axis).copied().unwrap_or(*axis);
                        KernelArg::Scalar(CudaScalar::I64(broadcast_stride(&a.shape, g.rank, b_axis)))
                    }
                    KernelParam::RawLen { name } => int(array(name)?.len),
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

    /// Reads the outputs back (waiting for the kernel: a fault in it surfaces here).
    fn download(&self, dev: &CudaBackend, outs: &mut [OwnedArray]) -> Result<()> {
        for (name, o) in self.outputs.iter().zip(outs.iter_mut()) {
            let a = self.arrays.get(name).ok_or_else(|| {
                Error::invalid(
                    "expression kernel",
                    format!("the output `{name}` was not uploaded"),
                )
            })?;
            if !o.bytes.is_empty() {
                a.buf.copy_to_host(&mut o.bytes, dev.stream())?;
            }
        }
        Ok(())
    }
}

/// `bytes` (C order) in a new device buffer (one byte for an empty array, which the kernel
/// never reads).
fn dev_array(dev: &CudaBackend, bytes: &[u8], shape: &[usize]) -> Result<DevArray> {
    let mut buf = dev.alloc::<u8>(bytes.len().max(1))?;
    if !bytes.is_empty() {
        buf.copy_from_host(bytes, dev.stream())?;
    }
    Ok(DevArray {
        buf,
        shape: shape.to_vec(),
        len: shape.iter().product(),
    })
}

/// The array's elements in C order: its own bytes when it is C-contiguous, else gathered
/// through its strides (every address checked against its buffer).
fn contiguous<'a>(a: &HostArray<'a>, kernel: &str, name: &str) -> Result<Cow<'a, [u8]>> {
    let item = a.dtype.size();
    let n: usize = a.shape.iter().product();
    let bad = |why: String| Error::invalid(kernel, format!("the array `{name}`: {why}"));
    if a.strides.len() != a.shape.len() {
        return Err(bad(format!(
            "{} strides for {} axes",
            a.strides.len(),
            a.shape.len()
        )));
    }
    if n == 0 {
        return Ok(Cow::Owned(Vec::new()));
    }
    if a.strides == kiln_expr::c_strides(&a.shape) {
        let (start, end) = (a.offset * item, (a.offset + n) * item);
        return a
            .bytes
            .get(start..end)
            .map(Cow::Borrowed)
            .ok_or_else(|| bad(format!("{n} elements from {} do not fit its buffer", a.offset)));
    }
    let mut out = Vec::with_capacity(n * item);
    let mut idx = vec![0usize; a.shape.len()];
    for _ in 0..n {
        let at = idx
            .iter()
            .zip(&a.strides)
            .fold(a.offset as i128, |acc, (&i, &s)| acc + i as i128 * s as i128);
        let start = usize::try_from(at)
            .ok()
            .and_then(|e| e.checked_mul(item))
            .ok_or_else(|| bad(format!("element offset {at} is outside its buffer")))?;
        let elem = a
            .bytes
            .get(start..start + item)
            .ok_or_else(|| bad(format!("element offset {at} is outside its buffer")))?;
        out.extend_from_slice(elem);
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < a.shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(Cow::Owned(out))
}

/// The C-order stride (in elements) of an array of `shape` along axis `b_axis` of a
/// broadcast shape of rank `rank`: 0 where the array is broadcast (a missing leading axis
/// or an extent of 1), NumPy's rule.
fn broadcast_stride(shape: &[usize], rank: usize, b_axis: usize) -> i64 {
    let off = rank.max(shape.len()) - shape.len();
    if b_axis < off || shape.get(b_axis - off).is_none_or(|&e| e == 1) {
        return 0;
    }
    kiln_expr::c_strides(shape)
        .get(b_axis - off)
        .copied()
        .unwrap_or(0) as i64
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

    #[test]
    fn broadcast_strides_follow_numpy() {
        // (3, 1) against (2, 3, 4): axis 0 missing, axis 1 of extent 3, axis 2 broadcast
        assert_eq!(broadcast_stride(&[3, 1], 3, 0), 0);
        assert_eq!(broadcast_stride(&[3, 1], 3, 1), 1);
        assert_eq!(broadcast_stride(&[3, 1], 3, 2), 0);
        assert_eq!(broadcast_stride(&[2, 3, 4], 3, 0), 12);
        assert_eq!(broadcast_stride(&[2, 3, 4], 3, 2), 1);
    }

    #[test]
    fn strided_views_are_gathered_in_c_order() {
        // a (2, 3) view of the transpose of a (3, 2) buffer
        let data = [0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
        let mut a = HostArray::from_slice(&[3, 2], &data);
        a.shape = vec![2, 3];
        a.strides = vec![1, 2];
        let got = contiguous(&a, "t", "x").unwrap();
        let vals: Vec<f32> = bytemuck_f32(&got);
        assert_eq!(vals, [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
        a.offset = 1;
        assert!(contiguous(&a, "t", "x")
            .unwrap_err()
            .to_string()
            .contains("outside its buffer"));
    }

    fn bytemuck_f32(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }
}
