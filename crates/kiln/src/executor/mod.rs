//! The device-pool executor: one workload split across GPUs and the CPU in proportion to
//! what each can do, with the same answer whichever devices ran.
//!
//! - **Workers** ([`Worker`]): one per device (a GPU, or the CPU), or several per GPU, each
//!   on its own stream; each driven by one host thread. [`DeviceSet`] parses `--devices`.
//! - **Shares**: each device's rate (work units a second) for the workload's calibration key
//!   comes from [`Calibrations`] (memory, and a JSON file next to the kernel cache); a device
//!   without one is probed first (one chunk to warm up, one timed). A run's measured rate
//!   replaces the stored one when it drifts by more than a threshold (25%). Worker `k` starts
//!   with a contiguous run of `share_k · chunks` chunks (largest remainder), `share_k` its
//!   rate over the sum (a GPU's rate is split evenly between its streams).
//! - **Stealing**: a worker takes chunks from the front of its own queue; when it is empty
//!   it takes from the back of the longest other queue, so a slow or throttled device
//!   ends up with fewer chunks and nobody waits for it.
//! - **Determinism**: chunk outputs are stored by chunk index and merged in that order. A
//!   Monte Carlo chunk is a range of canonical 1024-sample blocks whose sums both engines
//!   compute bitwise alike; the merge finishes over every block in block order, so a price
//!   is bit-identical for any worker set (1 GPU, n GPUs, hybrid, CPU only) and chunking.
//!   Array workloads (filters, GEMM, element-wise) give the bits the worker's backend gives
//!   for its slice: identical for any chunking on one kind of device; CPU and GPU results
//!   differ within the backends' documented tolerances.
//!
//! - **Collectives** ([`Collective`]): all-reduce, all-gather and broadcast on tensors, through
//!   NCCL on GPUs (libnccl loaded at run time) or in host memory on CPU ranks, and the
//!   column-sharded GEMM [`sharded_matmul`].
//!
//! See `docs/executor.md`.

mod calibrate;
mod collective;
mod devices;
mod schedule;
mod work_arrays;
mod work_finance;

pub use calibrate::{Calibrations, CALIBRATION_FILE, DEFAULT_DRIFT};
pub use collective::{sharded_matmul, Collective};
pub use devices::{DeviceSet, GpuSelection, Worker};
pub use schedule::{Executor, RunReport, WorkerStats, Workload};
pub use work_arrays::{FilterBatch, GemmBatch, MapArray, VolumeBatch};
pub use work_finance::{McPaths, OptionBook};
