//! kiln: run numerical workloads on NVIDIA GPUs, with a CPU fallback for everything.
//!
//! ```no_run
//! use kiln::{Runtime, DeviceRequest, Config};
//! let rt = Runtime::new(DeviceRequest::Auto, &Config::load(None)?)?;
//! let y = rt.sigmoid(&[0.0, 1.0, -1.0])?;
//! # Ok::<(), kiln::Error>(())
//! ```
//!
//! Design: [`Runtime`] holds an enum of backends chosen at run time: `auto` takes the best
//! usable GPU under the device policy and falls back to the CPU with one warning saying why.
//! [`Tensor`] is the unit of work: an n-d array on one device over an enum of the backends'
//! storages (candle's `Storage{Cpu,Cuda}` pattern), each implementing
//! [`core::storage::BackendStorage`]. Ops on device tensors are queued on the thread's
//! current [`Stream`] and chain without leaving the device; host reads wait and surface
//! queued errors. The host-slice methods on the runtime (`rt.sigmoid(&[f32])`, ...) are thin
//! wrappers over tensors. Every op exists on the CPU and CUDA, and the two agree
//! numerically (bit for bit where the docs say so).
//!
//! Users' own CUDA C++ kernels run through [`Runtime::raw_kernel`] and
//! [`Runtime::raw_module`] ([`raw_kernel`]), checked and queued like kiln's ops; their
//! element-wise and reduction expressions ([`expr`]) through [`Runtime::elementwise_kernel`]
//! and [`Runtime::reduction_kernel`] ([`expr_kernel`]), on the GPU or the CPU.
//!
//! Layering: front ends (the `kiln` CLI, the service, the Python package, kiln-bench)
//! depend on this crate and on no other compute crate of kiln, so the one-way flow front
//! end -> facade -> backend holds and a backend can be reshaped behind it. What the front
//! ends need beyond the ops is re-exported by concept, never a backend crate whole:
//! - the root: the types every caller names ([`Config`], [`DeviceRequest`], [`Error`],
//!   [`DType`], [`MemoryLimit`], [`NoDeviceReason`], ...);
//! - [`core`]: the kiln-core modules whose value types the ops take and return (element
//!   types and map ops, kernels and boundary modes, option specs and closed forms, device
//!   admission) and the reference Philox generator;
//! - [`device`]: discovery without a context, the libraries present, NVRTC, and the
//!   one-device CUDA backend (`kiln doctor`, the service's worker list, `kiln.doctor()`);
//! - [`kernels`]: kiln's kernel table, the cubin cache and cold start, and the types of
//!   users' CUDA C++ kernels (`kiln kernels`, `kiln cache`, `kiln kernel`, raw jobs);
//! - [`memory`]: pinned and registered host buffers, device buffers and the pools'
//!   counters;
//! - [`interop`]: the tensor storages over memory other libraries own (DLPack);
//! - `bench_support` (hidden): the backends' engines kiln-bench times directly.
//!
//! Each names its items one by one, and only those a front end uses: what a backend adds
//! stays private to the layers below until a front end needs it.
#![deny(missing_docs)]

pub mod adaptive;
#[doc(hidden)]
pub mod bench_support;
pub mod device;
pub mod elementwise;
pub mod executor;
pub mod expr_kernel;
pub mod finance;
pub mod imaging;
pub mod interop;
pub mod kernels;
pub mod linalg;
pub mod memory;
pub mod morphology;
pub mod ndimage;
pub mod rank;
pub mod rank_host;
pub mod raw_kernel;
mod runtime;
pub mod stream;
pub mod tensor;
mod tensor_ops;
pub mod testing;
pub mod verify;

pub use kiln_core::{
    BackendKind, Config, DType, Device, DeviceRequest, Error, MemoryLimit, NoDeviceReason, Result, UnaryOp,
};
pub use kiln_cpu::CpuBackend;

/// kiln-core's modules of value types the ops take and return, and its reference numerics:
/// element types and map ops ([`backend`](core::backend)), device admission
/// ([`device`](core::device)), option specs and Monte Carlo parameters
/// ([`finance`](core::finance)), filter kernels and boundary modes ([`imaging`](core::imaging)),
/// and the Philox generator both backends draw from ([`philox`](core::philox)); the closed
/// forms (`core::finance::{bsm, geometric_asian, price_analytic}`) are the references
/// Monte Carlo prices are checked against.
pub mod core {
    pub use kiln_core::{backend, device, finance, imaging, philox, storage};
}

/// The process-wide profiler of kiln's launches and copies (`profiler()`), and its report.
pub use kiln_cuda::profiler::{self, profiler, Report as ProfileReport};
/// A scalar argument of a user's raw kernel ([`Arg::Scalar`]), in the kernel's C type.
pub use kiln_cuda::user::Scalar;
/// Users' element-wise and reduction kernels (CuPy's `ElementwiseKernel` and
/// `ReductionKernel`): declare, bind and type-check here, run with
/// [`Runtime::elementwise_kernel`] and [`Runtime::reduction_kernel`] ([`expr_kernel`]).
pub use kiln_expr as expr;
pub use raw_kernel::{Arg, RawKernel, RawModule};
pub use runtime::{Engine, Runtime};
pub use stream::{Event, Stream};
pub use tensor::{FloatElement, Storage, Tensor, TensorElement};
