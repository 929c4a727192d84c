//! Device memory: the caching allocator's algorithm and its CUDA segment source.

pub mod caching;
mod device;
mod pinned;

pub use caching::{
    AllocError, Allocation, CachingAllocator, MemoryStats, SegmentSource, SourceError, StreamId,
};
pub use device::{DeviceBuffer, DevicePool, GraphRefs, TransferStats, UnpooledBuffer};
pub use pinned::{PinnedBuffer, PinnedPool, PinnedStats};
