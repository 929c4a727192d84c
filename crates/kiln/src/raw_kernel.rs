//! Users' own CUDA C++ kernels on a runtime's GPU (CuPy's `RawKernel` and `RawModule`).
//!
//! The source is compiled by NVRTC for the device's exact architecture on first use and
//! cached on disk with kiln's own kernels, so a later process starts without compiling. A
//! launch checks every argument against the kernel's parameter list (read from the
//! source): a pointer parameter takes a tensor on this runtime's device whose dtype is the
//! pointed-to type (`void*` takes any), a scalar parameter a value converted exactly. The
//! kernel is queued on the thread's current stream, in order with kiln's ops (and recorded
//! into a graph while one is captured); tensors are passed by address and the kernel may
//! write them in place.
//!
//! ```no_run
//! use kiln::{Arg, Runtime, DeviceRequest, Config};
//! let rt = Runtime::new(DeviceRequest::Cuda(None), &Config::load(None)?)?;
//! let saxpy = rt.raw_kernel(r#"
//!     extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
//!         int i = blockIdx.x * blockDim.x + threadIdx.x;
//!         if (i < n) y[i] = a * x[i] + y[i];
//!     }"#, "saxpy", &[])?;
//! let n = 1000;
//! let x = rt.tensor(&vec![1.0f32; n], &[n])?;
//! let y = rt.tensor(&vec![2.0f32; n], &[n])?;
//! saxpy.launch((4, 1, 1), (256, 1, 1), 0, &[Arg::from(&x), Arg::from(&y), 3.0f32.into(), (n as i32).into()])?;
//! assert_eq!(y.to_vec::<f32>()?[0], 5.0);
//! # Ok::<(), kiln::Error>(())
//! ```

use crate::{Engine, Runtime, Storage, Tensor};
use kiln_core::{Device, Error, Result};
use kiln_cuda::user::{KernelArg, Scalar, UserFunction, UserModule};
use kiln_cuda::CudaBackend;
use std::sync::Arc;

const OP: &str = "raw kernel";

/// One launch argument: a tensor (passed as a pointer to its first element) or a scalar.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A tensor on the runtime's GPU.
    Tensor(&'a Tensor),
    /// A value (`2.5f32.into()`, `(n as i32).into()`).
    Scalar(Scalar),
}

impl<'a> From<&'a Tensor> for Arg<'a> {
    fn from(t: &'a Tensor) -> Self {
        Arg::Tensor(t)
    }
}

impl<T: Into<Scalar>> From<T> for Arg<'_> {
    fn from(x: T) -> Self {
        Arg::Scalar(x.into())
    }
}

/// A compiled source on a runtime's GPU, holding one or more kernels.
#[derive(Clone, Debug)]
pub struct RawModule {
    dev: Arc<CudaBackend>,
    module: Arc<UserModule>,
}

/// One kernel of a [`RawModule`], ready to launch.
#[derive(Clone, Debug)]
pub struct RawKernel {
    dev: Arc<CudaBackend>,
    f: UserFunction,
}

impl Runtime {
    /// Compile (or load from the cache) a CUDA C++ `source` with NVRTC `options` (e.g.
    /// `-DN=4`, `--use_fast_math`, `-std=c++20`, `-I/usr/local/cuda/include` for
    /// `cuda_fp16.h`; not the architecture, which kiln sets to the device's exact `sm_XX`).
    /// The same source and options on this runtime return the same loaded module. An error
    /// on a CPU runtime.
    pub fn raw_module(&self, source: &str, options: &[String]) -> Result<RawModule> {
        let dev = match self.engine() {
            Engine::Cuda(dev) => dev.clone(),
            Engine::Cpu(_) => {
                return Err(Error::invalid(
                    OP,
                    "raw CUDA kernels need a GPU; this runtime runs on the CPU (open it with DeviceRequest::Cuda, or write the computation with kiln's ops)",
                ))
            }
        };
        let module = dev.user_module(source, options)?;
        Ok(RawModule { dev, module })
    }

    /// The kernel `name` (declared `extern "C" __global__`) of `source`: [`Runtime::raw_module`]
    /// and [`RawModule::function`] in one call.
    pub fn raw_kernel(&self, source: &str, name: &str, options: &[String]) -> Result<RawKernel> {
        self.raw_module(source, options)?.function(name)
    }
}

impl RawModule {
    /// The kernel `name`, an `extern "C" __global__` function of the source.
    pub fn function(&self, name: &str) -> Result<RawKernel> {
        Ok(RawKernel {
            dev: self.dev.clone(),
            f: self.module.function(name)?,
        })
    }

    /// The `__global__` functions the source declares.
    pub fn kernels(&self) -> Vec<String> {
        self.module.kernels().keys().cloned().collect()
    }
}

impl RawKernel {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        self.f.name()
    }

    /// The parameter sizes in bytes the driver reports (CUDA 12.4 and later), which check
    /// the arguments of a kernel whose declaration kiln cannot read; `None` on an older
    /// driver (then such a kernel launches only with [`RawKernel::with_signature`]).
    pub fn param_sizes(&self) -> Option<&[usize]> {
        self.f.param_sizes()
    }

    /// The same kernel with its parameter list given explicitly (the text between a
    /// declaration's parentheses, e.g. `"const float* x, int n"`), for a kernel whose
    /// declaration kiln cannot read; see [`UserFunction::with_signature`].
    pub fn with_signature(&self, params: &str) -> Result<RawKernel> {
        Ok(RawKernel {
            dev: self.dev.clone(),
            f: self.f.with_signature(params)?,
        })
    }

    /// Queue the kernel on the thread's current stream: a `grid` of `block`s (x, y, z) with
    /// `shared_mem` bytes of dynamic shared memory, given `args` in parameter order. Every
    /// argument and the shape are checked before anything is queued; an error in the
    /// kernel itself (an access out of bounds) surfaces at the next host read, classified
    /// like kiln's own ([`Error::is_sticky`]).
    pub fn launch(
        &self,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_mem: u32,
        args: &[Arg<'_>],
    ) -> Result<()> {
        let here = Device::Cuda(self.dev.info().desc.ordinal);
        let mut tensors = Vec::new();
        let mut kargs = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            match a {
                Arg::Scalar(s) => kargs.push(KernelArg::Scalar(*s)),
                Arg::Tensor(t) => match t.storage() {
                    Storage::Cuda(g) if Arc::ptr_eq(g.backend(), &self.dev) => {
                        kargs.push(KernelArg::data(g.data()));
                        tensors.push(g);
                    }
                    _ => {
                        let on = match t.device() {
                            d if d == here => format!("{d} of another runtime"),
                            d => d.to_string(),
                        };
                        return Err(Error::invalid(
                            OP,
                            format!(
                                "kernel `{}` argument {} is a tensor on {on}, but the kernel runs on {here}; move it with to_device",
                                self.name(),
                                i + 1,
                            ),
                        ));
                    }
                },
            }
        }
        let stream = self.dev.stream().clone();
        for g in &tensors {
            g.use_on(&stream)?;
        }
        self.f.launch(&self.dev, grid, block, shared_mem, &kargs)?;
        for g in &tensors {
            g.written_on(&stream)?;
        }
        Ok(())
    }
}
