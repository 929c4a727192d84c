//! kiln: run numerical workloads on NVIDIA GPUs, with a CPU fallback for everything.
//!
//! ```no_run
//! use kiln::{Runtime, DeviceRequest, Config};
//! let rt = Runtime::new(DeviceRequest::Auto, &Config::load(None)?)?;
//! let y = rt.sigmoid(&[0.0, 1.0, -1.0])?;
//! # Ok::<(), kiln::Error>(())
//! ```
//!
//! Design: [`Runtime`] holds an enum of backends chosen at run time (candle's
//! `Storage{Cpu,Cuda}` pattern): `auto` takes the best usable GPU under the device policy
//! and falls back to the CPU with one warning saying why. Ops are methods on the runtime;
//! each exists on the CPU and, where written, on CUDA, and the two must agree numerically.
#![deny(missing_docs)]

pub mod adaptive;
pub mod elementwise;
pub mod finance;
pub mod imaging;
pub mod linalg;
mod runtime;
pub mod stream;
pub mod tensor;
mod tensor_ops;
pub mod testing;
pub mod verify;

pub use kiln_core::{Backend, BackendKind, Config, DeviceRequest, Error, Result, UnaryOp};
pub use kiln_core::{DType, Device};
pub use kiln_cpu::CpuBackend;
pub use kiln_cuda as cuda;
pub use kiln_cuda::profiler::{self, profiler, Report as ProfileReport};
pub use runtime::{Engine, Runtime};
pub use stream::{Event, Stream};
pub use tensor::{FloatElement, Storage, Tensor, TensorElement};
