//! kiln-core: the vocabulary every other kiln crate shares.
//!
//! Design: this crate knows no backend, no file format and no HTTP. It defines
//! - [`Error`], the one error type that crosses crate boundaries, with
//!   [`Error::is_sticky`] telling whether a CUDA context is poisoned;
//! - [`Config`], built from compiled-in defaults, then a TOML file, then `KILN_*`
//!   environment variables, and validated once;
//! - the device request (`auto|cpu|cuda|cuda:N`) and the device policy
//!   (allowed ordinals/UUIDs, minimum compute capability) in [`device`];
//! - the [`BackendStorage`] trait that the CPU and CUDA storages implement (the ops a
//!   tensor runs), with [`Device`], and [`BackendKind`]; beside it the [`FinanceBackend`]
//!   trait of the finance engines (Monte Carlo, the risk grid, the implied-volatility book);
//! - the reference numerics both backends share, so that neither depends on the other:
//!   Philox and the path constants ([`philox`], [`finance::PathParams`]), the closed forms
//!   and a Monte Carlo run's finishing math ([`finance::analytic`], [`finance::blocks`]),
//!   the filter path choice ([`imaging::path_2d`]), the GEMM bounds and storage check
//!   ([`linalg`]), the element conversions ([`storage::cast_f64`]), and the vectorisable
//!   `f32` `exp`/`tanh`/`sigmoid` that define the element-wise map ([`mathf`]).
//!
//! No cudarc, no rayon, no I/O: what needs a thread pool or a device stays in the backends.
#![deny(missing_docs)]

pub mod backend;
pub mod config;
pub mod device;
pub mod dtype;
pub mod error;
pub mod finance;
pub mod imaging;
pub mod linalg;
pub mod mathf;
pub mod philox;
pub mod storage;

pub use backend::{BackendKind, UnaryOp};
pub use config::{Config, MemoryLimit};
pub use device::{DeviceRequest, DeviceSelector};
pub use dtype::{DType, HasDType};
pub use error::{cuda_code_name, is_sticky_cuda_code, Error, NoDeviceReason, Result};
pub use storage::{BackendStorage, Device, FinanceBackend};
