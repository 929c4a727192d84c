//! The GPUs kiln sees and the backend that drives one: discovery without a CUDA context (for
//! `kiln doctor`, the service's worker list, Python's `kiln.doctor()`), the CUDA libraries
//! this machine can load, NVRTC's presence, and the one-device backend a CUDA
//! [`Runtime`](crate::Runtime) holds ([`Runtime::cuda`](crate::Runtime::cuda)).
//!
//! Every function here is safe to call on a machine without NVIDIA drivers: a missing
//! library is a `false`, a `None` or a `NoDevice` error, never a panic.

/// Initialise the driver and list its devices without creating a context (`NoDevice` with
/// the reason where there is no usable driver).
pub use kiln_cuda::discovery::probe;

/// Which CUDA libraries (driver, NVRTC, cuBLAS, cuBLASLt, cuRAND) load on this machine.
pub use kiln_cuda::discovery::libraries;

/// cuBLAS's version as `major*10000 + minor*100 + patch`, when it loads.
pub use kiln_cuda::discovery::cublas_version;

/// A CUDA driver API version number (`13000`) as text (`13.0`).
pub use kiln_cuda::discovery::format_driver_version;

/// What [`probe`] found: the driver's API version and every device it sees.
pub use kiln_cuda::DriverProbe;

/// One device as discovery reports it (ordinal, name, compute capability, memory, PCI
/// address, L2 size).
pub use kiln_cuda::DeviceInfo;

/// What [`libraries`] found, one flag a library.
pub use kiln_cuda::Libraries;

/// One CUDA device's backend (context, streams, caching pools, kernels): what
/// [`Runtime::cuda`](crate::Runtime::cuda) returns and [`Engine::Cuda`](crate::Engine::Cuda)
/// holds, for tools that time or warm a device directly.
pub use kiln_cuda::CudaBackend;

/// An op of kiln's own kernels (a small struct: its buffers, shape and parameters), run with
/// [`CudaBackend::run`], and the ops themselves.
pub use kiln_cuda::{ops, Op};

/// Where a CUDA backend's creation went (driver probe, context, the wait for NVRTC), in ms.
pub use kiln_cuda::Startup;

/// One kernel's load into a backend: its cache lookup (or compile) and the module load time.
pub use kiln_cuda::ModuleLoad;

/// Whether libnvrtc, the runtime compiler every GPU kernel needs, loads on this machine.
pub use kiln_cuda::nvrtc::available as nvrtc_available;

/// NVRTC's `(major, minor)` version, or `None` where libnvrtc is missing.
pub use kiln_cuda::nvrtc::version as nvrtc_version;

/// How many times this process has run NVRTC's compiler (cache hits do not count).
pub use kiln_cuda::nvrtc::compiles_this_process as nvrtc_compiles_this_process;

/// The variants of kiln's wgmma GEMM (benchmarks and tests compare them through
/// [`ops::WgmmaMatMul`]; `KILN_WGMMA_VARIANT` picks the one `GemmImpl::Wgmma` runs), and the
/// fp8 formats of [`ops::Fp8GemmNt`].
pub use kiln_cuda::gemm_wgmma::{Fp8Format, WgmmaVariant, WGMMA_VARIANT_ENV};

/// The input types of [`ops::LabelRaw`] (scipy.ndimage.label on arrays in device
/// memory: kiln-py's path for CuPy and torch arrays).
pub use kiln_cuda::LabelInput;
