//! kiln-cuda: the CUDA backend, through cudarc with dynamic loading.
//!
//! Design:
//! - [`discovery`] initialises the driver and lists devices without creating a context, so
//!   the device policy is applied before anything touches a GPU. Every library is checked for
//!   presence first (cudarc panics on a missing one): a machine without NVIDIA drivers gets a
//!   `NoDevice` error, never a panic.
//! - [`nvrtc`] compiles one kernel (its `kernels/*.cu` file with the kernel selected by a
//!   `-D` definition: [`kernels::Program`]) to a cubin for the device's exact `sm_XX`;
//!   [`cache`] keeps cubins on disk (atomic writes, checksummed), so a warm start never calls
//!   the compiler, and a cold one compiles only the kernels it launches ([`coldstart`]: what
//!   is missing, and compiling it all ahead on every CPU).
//! - [`CudaBackend`] owns a context and stream, loads each kernel on first use and runs ops
//!   ([`op::Op`]: small structs that choose a kernel and a shape) that launch the kernels of
//!   the [`kernels`] table through one helper (`launch.rs`: the arguments
//!   checked against the kernel's declared parameters, a profiler range named by its symbol,
//!   one error mapping); it also keeps a pool of 32 user streams with a thread-local current
//!   stream (`with_stream`). The Monte Carlo engines share one chunked blocks-then-combine
//!   driver (`mc_driver.rs`).
//! - [`user`]: users' own CUDA C++ kernels, compiled and cached like kiln's programs (C++
//!   templates through NVRTC's name expressions; relocatable code linked with the device
//!   runtime through the driver's linker; cubin, PTX or fatbin images loaded as given), their
//!   parameter lists read from the source so each launch's arguments are checked (by the
//!   driver's parameter sizes where the source's types cannot be read); plain and
//!   cooperative launches.
//! - [`storage::CudaStorage`] is a tensor's device storage: a [`pool`] block written once on
//!   the current stream, ordered across streams by a lazily recorded event; [`transfer`]
//!   moves host data at the link's speed (staged through pinned buffers, or DMA'd directly
//!   from pinned memory).
//!
//! Every library is checked before it is touched through [`libs::present`], which opens it
//! once by cudarc's candidate names and keeps it open (cudarc's `is_culib_present` opens and
//! closes it, and cudarc's first call opens it again).
//!
//! FFI (cudarc's `result`/`sys` layers) is used in `discovery`, `nvrtc`, `backend`, `pool`,
//! `gemm`, `graph`, `graph_pdl` (`cuLaunchKernelEx` with programmatic stream serialization while capturing), `pipeline`, `transfer` (also `madvise` on large host results), `user` (raw and cooperative launches, the driver's parameter sizes, `cuLink`, module globals), `copy`,
//! `storage`, `register` (page-locking a caller's vector), `libs` (the libraries' handles, through libloading), `nccl` (collectives on pool
//! blocks; libnccl loaded at run time, absent without harm), `launch` (every launch of kiln's
//! kernels) and `launch_elementwise` (a raw launch probe that times the driver alone), where the safe
//! layer lacks what kiln needs (pool blocks as raw pointers, pinned memory, async copies into
//! caller slices, pointer attributes); each `unsafe` block names its invariant.
#![deny(missing_docs)]

pub mod attributes;
mod backend;
pub mod cache;
pub mod coldstart;
mod copy;
pub mod discovery;
mod finance_backend;
pub mod gemm;
pub mod gemm_wgmma;
pub mod graph;
pub mod graph_pdl;
pub mod kernels;
mod launch;
mod launch_american;
mod launch_american_barrier;
mod launch_basket;
mod launch_elementwise;
mod launch_finance;
mod launch_finance_qmc;
mod launch_heston;
mod launch_imaging;
mod launch_implied;
mod launch_risk;
pub mod libs;
mod mc_driver;
pub mod nccl;
pub mod nvrtc;
pub mod op;
pub mod pipeline;
pub mod pool;
pub mod preview;
pub mod profiler;
pub mod register;
pub mod storage;
mod streams;
pub mod transfer;
pub mod user;

pub use backend::{cuda_err, CudaBackend, ModuleLoad, Startup};
pub use cache::{CacheEvent, KernelCache, Outcome, Unit};
/// cudarc's event type, as [`CudaBackend::new_event`] returns it.
pub use cudarc::driver::CudaEvent;
pub use discovery::{DeviceInfo, DriverProbe, Libraries};
pub use graph::{Graph, GraphOptions};
pub use kernels::{Kernel, Module, Program};
pub use op::Op;

/// The ops of kiln's own kernels ([`Op`]), each run with [`CudaBackend::run`].
pub mod ops {
    pub use crate::launch_imaging::Transpose;

    // Imaging, element-wise, copies and GEMM.
    pub use crate::copy::Cast;
    pub use crate::gemm::{MatMul, MatMulHost, WgmmaMatMul};
    pub use crate::gemm_wgmma::Fp8GemmNt;
    pub use crate::launch_elementwise::{Axpy, Map, MapLaunchProbe, MapOn, Unary};
    pub use crate::launch_imaging::{
        Edt, EdtRaw, Filter1d, Filter2d, Filter3d, Interp, Label, LabelRaw, NdimageLinear, NdimageLinearData,
        NdimageLinearExact, SeparableFilter, SplineFilter1d,
    };

    // Finance.
    pub use crate::launch_american::PriceAmerican;
    pub use crate::launch_american_barrier::PriceAmericanBarrier;
    pub use crate::launch_basket::{BasketBlockSums, BasketSamples, PriceBasket};
    pub use crate::launch_finance::{
        FinanceSelftest, FinanceSqrtCheck, McBlockRangeSums, McBlockSums, McProbeTotals, PriceMc,
    };
    pub use crate::launch_finance_qmc::QmcSelftest;
    pub use crate::launch_heston::{HestonBlockSums, HestonStepSelftest, PriceHeston};
    pub use crate::launch_implied::{ImpliedVolBook, SolveImpliedVol, SolveImpliedVolOnePass};
    pub use crate::launch_risk::RiskBsGrid;
}
#[doc(hidden)]
pub use launch_basket::basket_param_arrays;
pub use launch_finance::{GpuMcOptions, McProbe};
#[doc(hidden)]
pub use launch_imaging::{interp_args_bytes, spline_args_bytes};
pub use launch_imaging::{rank_algorithm, InterpSpec, LabelInput, Resample, EDT_MAX_AXES};
pub use launch_implied::{DeviceQuotes, IV_CHUNK_QUOTES};
pub use launch_risk::{BsGridBook, ShockGrid};
pub use profiler::{profiler, Profiler, Range};
pub use storage::{CudaData, CudaElement, CudaStorage};
pub use streams::USER_STREAMS;
pub use user::{KernelArg, Scalar, UserFunction, UserModule};
