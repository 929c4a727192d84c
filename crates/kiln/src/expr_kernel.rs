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
//! Both GPU paths, this one over uploaded host arrays and the Python package's over CuPy's
//! or torch's arrays in place, bind and fill the generated kernel's parameters through one
//! [`ExprLaunch`] over [`DeviceArray`]s.
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
use kiln_cuda::CudaBackend;
use kiln_expr::{Arg, ArgSpec, Axis, ElementwiseKernel, HostArray, OwnedArray, ReductionKernel};
use std::borrow::Cow;

mod args;
mod launch;

use args::Named;
/// Expression kernels on arrays in device memory (kiln's blocks or another library's, in
/// place): bound, compiled and queued by [`ExprLaunch`].
pub use args::{DeviceArg, DeviceArray};
pub use launch::{ExprLaunch, LaunchCache, ELEMENTWISE_BLOCK};

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
        let nin = k.in_params().len();
        let mut outs: Vec<OwnedArray> = (0..k.out_params().len())
            .map(|j| OwnedArray::zeros(b.param_types[nin + j], &b.shape))
            .collect();
        if b.size() == 0 {
            k.cuda_source(&b)?;
            return Ok(outs);
        }
        let names = k
            .in_params()
            .iter()
            .chain(k.out_params())
            .map(|p| p.name.as_str());
        let call = Uploaded::new(dev, k.name(), names, inputs, &outs)?;
        ExprLaunch::elementwise_bound(k, &b, &call.named(), None)?.queue(dev, &[])?;
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
        let nin = k.in_params().len();
        let mut outs: Vec<OwnedArray> = (0..k.out_params().len())
            .map(|j| OwnedArray::zeros(rb.binding.param_types[nin + j], &rb.out_shape))
            .collect();
        if rb.out_size() == 0 {
            k.cuda_source(&rb)?;
            return Ok(outs);
        }
        let names = k
            .in_params()
            .iter()
            .chain(k.out_params())
            .map(|p| p.name.as_str());
        let call = Uploaded::new(dev, k.name(), names, inputs, &outs)?;
        ExprLaunch::reduction_bound(k, &rb, &call.named())?.queue(dev, &[])?;
        call.download(dev, &mut outs)?;
        Ok(outs)
    }
}

/// A host call's arrays uploaded (inputs C-contiguous, outputs zero-filled), as device
/// arrays by parameter name; the buffers live as long as this.
struct Uploaded {
    /// The kernel's parameter names, inputs then outputs.
    names: Vec<String>,
    /// The inputs and outputs as device arguments.
    ins: Vec<DeviceArg>,
    outs: Vec<DeviceArg>,
    /// Every array's buffer, inputs then outputs.
    buffers: Vec<DeviceBuffer<u8>>,
    /// The outputs' buffers' indices in `buffers`, in order.
    outputs: Vec<usize>,
}

impl Uploaded {
    /// Uploads the input arrays and the outputs `outs`; `names` are the kernel's parameter
    /// names, inputs then outputs.
    fn new<'n>(
        dev: &CudaBackend,
        kernel: &str,
        names: impl Iterator<Item = &'n str>,
        inputs: &[Arg<'_>],
        outs: &[OwnedArray],
    ) -> Result<Uploaded> {
        let names: Vec<String> = names.map(str::to_string).collect();
        let mut call = Uploaded {
            names: Vec::new(),
            ins: Vec::new(),
            outs: Vec::new(),
            buffers: Vec::new(),
            outputs: Vec::new(),
        };
        let in_names = &names[..inputs.len().min(names.len())];
        let mut ins = Vec::with_capacity(inputs.len());
        for (a, name) in inputs.iter().zip(in_names) {
            ins.push(match a {
                Arg::Scalar(s) => DeviceArg::Scalar(*s),
                Arg::Array(h) => {
                    let bytes = contiguous(h, kernel, name)?;
                    DeviceArg::Array(call.upload(dev, &bytes, h.dtype, &h.shape)?)
                }
            });
        }
        let mut outputs = Vec::with_capacity(outs.len());
        for o in outs {
            call.outputs.push(call.buffers.len());
            outputs.push(DeviceArg::Array(call.upload(dev, &o.bytes, o.dtype, &o.shape)?));
        }
        call.ins = ins;
        call.outs = outputs;
        call.names = names;
        Ok(call)
    }

    /// The arguments by parameter name.
    fn named(&self) -> Named<'_> {
        let (in_names, out_names) = self.names.split_at(self.ins.len().min(self.names.len()));
        let mut named = Named::default();
        named.add(in_names.iter().map(String::as_str), &self.ins, false);
        named.add(out_names.iter().map(String::as_str), &self.outs, true);
        named
    }

    /// `bytes` (C order) in a new device buffer (one byte for an empty array, which the
    /// kernel never reads), as a device array.
    fn upload(
        &mut self,
        dev: &CudaBackend,
        bytes: &[u8],
        dtype: kiln_expr::ScalarType,
        shape: &[usize],
    ) -> Result<DeviceArray> {
        let mut buf = dev.alloc::<u8>(bytes.len().max(1))?;
        if !bytes.is_empty() {
            buf.copy_from_host(bytes, dev.stream())?;
        }
        let a = DeviceArray::contiguous(buf.device_ptr(), dtype, shape);
        self.buffers.push(buf);
        Ok(a)
    }

    /// Reads the outputs back (waiting for the kernel: a fault in it surfaces here).
    fn download(&self, dev: &CudaBackend, outs: &mut [OwnedArray]) -> Result<()> {
        for (&i, o) in self.outputs.iter().zip(outs.iter_mut()) {
            let buf = self
                .buffers
                .get(i)
                .ok_or_else(|| Error::invalid("expression kernel", "an output was not uploaded"))?;
            if !o.bytes.is_empty() {
                buf.copy_to_host(&mut o.bytes, dev.stream())?;
            }
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
