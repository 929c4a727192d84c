//! Memory a front end manages itself around the tensors: page-locked host buffers (pinned
//! from the device's pool, or a caller's `Vec` registered in place), host vectors faulted
//! in by every core, raw device buffers of the backend's caching pool, the pools' counters,
//! and the chunking of an overlapped host -> device -> host pipeline.

/// A page-locked host buffer from a device's pinned pool ([`Runtime::pinned`](crate::Runtime::pinned));
/// back to the pool on drop.
pub use kiln_cuda::pool::PinnedBuffer;

/// A caller's `Vec` page-locked in place for fast copies; unregistered on drop or
/// `into_vec`.
pub use kiln_cuda::register::RegisteredVec;

/// A zeroed host vector of `n` elements whose pages every core has faulted in (huge pages
/// where the kernel has them), so a large download or file read does not fault on one thread.
pub use kiln_cuda::transfer::host_vec;

/// A typed block of the device's caching pool, for tools that launch on device buffers
/// directly (timing, graph capture).
pub use kiln_cuda::pool::DeviceBuffer;

/// The device pool's counters ([`Runtime::memory_stats`](crate::Runtime::memory_stats)).
pub use kiln_cuda::pool::MemoryStats;

/// The pinned host pool's counters.
pub use kiln_cuda::pool::PinnedStats;
/// Device memory of exactly the bytes asked for, outside the caching pool (for
/// compute-sanitizer runs, whose memcheck sees an overrun only at an allocation's end).
pub use kiln_cuda::pool::UnpooledBuffer;

/// How an overlapped host -> device -> host pipeline splits its input (chunk size, streams).
pub use kiln_cuda::pipeline::PipelineOptions;
