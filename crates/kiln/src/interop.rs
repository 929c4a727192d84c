//! Memory shared with other libraries (DLPack, CuPy, torch, NumPy): the two storages a
//! [`Tensor`](crate::Tensor)'s [`Storage`](crate::Storage) holds, with their constructors
//! over memory another library owns, and the mapping of a raw CUDA driver error.
//! [`expr_kernel`](crate::expr_kernel) runs users' expression kernels on such memory in place.

/// A tensor's storage on a CUDA device; `from_external` wraps another library's device
/// memory without a copy (holding its deleter).
pub use kiln_cuda::CudaStorage;

/// A tensor's storage in host memory; `shared` wraps another library's host buffer without
/// a copy.
pub use kiln_cpu::CpuStorage;

/// Host memory another library owns, as [`CpuStorage::shared`] reads it.
pub use kiln_cpu::ExternalHost;

/// A CUDA driver error (cudarc's) as kiln's error, named after the operation and device.
pub use kiln_cuda::cuda_err as cuda_error;
