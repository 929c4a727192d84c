//! The caching allocator's algorithm, independent of CUDA.
//!
//! Written by hand because no crate implements a stream-ordered, splitting/merging device
//! allocator over an external address space; the design is PyTorch's
//! (`c10/cuda/CUDACachingAllocator.cpp`):
//! - requests are rounded up to 512 B; requests of at most 1 MiB ("small") are carved out of
//!   2 MiB segments, requests up to 10 MiB out of 20 MiB segments, larger ones get a segment
//!   rounded up to 2 MiB;
//! - free blocks are kept per stream in best-fit order (`BTreeSet<(stream, size, ptr)>`), so a
//!   block freed on a stream is reused by that stream without any synchronisation (stream
//!   order guarantees the old work finished reading it before the new work starts);
//! - a block larger than needed is split (small pool: any remainder of at least 512 B;
//!   large pool: remainders over 1 MiB), and a freed block is merged with free neighbours;
//! - the last few freed small-pool blocks stay whole in a short "hot" list; an allocation of the same
//!   size class on the same stream takes one straight back (the pattern of a loop that frees
//!   a buffer and allocates it again), skipping the merge, the split and four ordered-set
//!   updates. The list is bounded and merged for real before a segment is taken from the
//!   device, before cached memory is released, and when it overflows, so it never causes a
//!   device allocation or hides free memory from the OOM path;
//! - when the device (or kiln's limit) refuses a segment, every wholly free cached segment is
//!   released and the request retried once before it is reported as out of memory.
//!
//! Cross-stream use (a block read on another stream) is handled by the device layer, which
//! defers the `free` here until the other streams' events complete.

#[cfg(test)]
#[path = "caching_tests.rs"]
mod tests;

use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeSet;

/// Minimum block size and rounding granularity.
pub const MIN_BLOCK: u64 = 512;
/// Requests up to this size use the small pool.
pub const SMALL_REQUEST: u64 = 1 << 20;
/// Segment size of the small pool.
pub const SMALL_SEGMENT: u64 = 2 << 20;
/// Requests below this size (and above `SMALL_REQUEST`) share `MID_SEGMENT`-byte segments.
pub const LARGE_REQUEST: u64 = 10 << 20;
/// Segment size for mid-sized requests.
pub const MID_SEGMENT: u64 = 20 << 20;
/// Rounding of large segments.
pub const LARGE_ROUND: u64 = 2 << 20;

/// Freed blocks kept whole for an immediate same-size reuse (see the module docs).
pub const HOT_BLOCKS: usize = 8;

/// Identifies a stream (the raw CUstream value in the device layer).
pub type StreamId = u64;

/// Why a segment source refused.
#[derive(Debug)]
pub enum SourceError {
    /// The device has no memory for the segment.
    OutOfMemory,
    /// Any other failure, passed through.
    Other(kiln_core::Error),
}

/// Where segments come from: `cuMemAlloc` on a device, or a simulated address space in tests.
pub trait SegmentSource {
    /// Allocate a segment of exactly `bytes`; return its base address.
    fn alloc_segment(&mut self, bytes: u64) -> Result<u64, SourceError>;
    /// Return a segment.
    fn free_segment(&mut self, base: u64, bytes: u64);
    /// (free, total) bytes on the device.
    fn mem_info(&self) -> (u64, u64);
}

/// Counters in the spirit of `torch.cuda.memory_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemoryStats {
    /// Bytes in blocks handed out (rounded sizes).
    pub allocated_bytes: u64,
    /// Peak of `allocated_bytes`.
    pub allocated_bytes_peak: u64,
    /// Bytes the callers asked for (unrounded).
    pub requested_bytes: u64,
    /// Bytes in segments obtained from the device.
    pub reserved_bytes: u64,
    /// Peak of `reserved_bytes`.
    pub reserved_bytes_peak: u64,
    /// Bytes in blocks not yet reusable: allocated ones, and freed ones whose cross-stream
    /// uses are still pending (the device layer frees those here only once they complete,
    /// so in this algorithm active equals allocated).
    pub active_bytes: u64,
    /// Peak of `active_bytes`.
    pub active_bytes_peak: u64,
    /// Free bytes inside segments that are partly in use (fragmentation).
    pub inactive_split_bytes: u64,
    /// Allocation calls.
    pub num_allocs: u64,
    /// Free calls.
    pub num_frees: u64,
    /// Segments obtained from the device.
    pub num_device_allocs: u64,
    /// Segments returned to the device.
    pub num_device_frees: u64,
    /// Allocations that succeeded only after the cache was emptied.
    pub num_alloc_retries: u64,
    /// Allocations that failed for lack of memory.
    pub num_ooms: u64,
}

/// A failed allocation.
#[derive(Debug)]
pub enum AllocError {
    /// Out of memory after emptying the cache; the figures for the message.
    OutOfMemory {
        /// Bytes requested.
        requested: u64,
        /// Device free bytes.
        free: u64,
        /// Device total bytes.
        total: u64,
        /// Bytes kiln holds.
        reserved: u64,
        /// kiln's limit, if set.
        limit: Option<u64>,
    },
    /// A source error other than OOM.
    Source(kiln_core::Error),
    /// The request needs a new segment while growth is switched off (a graph capture is in
    /// progress: a capture cannot allocate device memory).
    NoGrowth {
        /// Bytes requested.
        requested: u64,
    },
}

/// A block handed to a caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// Device address.
    pub ptr: u64,
    /// Rounded size in bytes (at least the request).
    pub size: u64,
}

#[derive(Clone, Debug)]
struct Block {
    size: u64,
    requested: u64,
    segment: u64,
    stream: StreamId,
    small: bool,
    state: State,
    prev: Option<u64>,
    next: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Handed to a caller.
    Allocated,
    /// Freed by the caller, not yet merged: in `hot`, not in a free set.
    Hot,
    /// In its free set, merged with any free neighbour.
    Free,
}

/// A freed block not yet merged (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HotBlock {
    stream: StreamId,
    size: u64,
    small: bool,
    ptr: u64,
}

#[derive(Clone, Debug)]
struct Segment {
    size: u64,
}

/// The allocator. Not thread-safe by itself: the device layer wraps it in a mutex.
pub struct CachingAllocator<S: SegmentSource> {
    source: S,
    blocks: HashMap<u64, Block>,
    segments: HashMap<u64, Segment>,
    free_small: BTreeSet<(StreamId, u64, u64)>,
    free_large: BTreeSet<(StreamId, u64, u64)>,
    /// Recently freed blocks, oldest first.
    hot: Vec<HotBlock>,
    /// Whether new segments may be taken (off during graph capture).
    grow: bool,
    limit: Option<u64>,
    stats: MemoryStats,
}

/// Whether the tail left after carving a block is worth keeping as a free block of its own.
fn worth_splitting(remaining: u64, small: bool) -> bool {
    if small {
        remaining >= MIN_BLOCK
    } else {
        remaining > SMALL_REQUEST
    }
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

impl<S: SegmentSource> CachingAllocator<S> {
    /// An empty allocator over `source`, holding at most `limit` bytes of segments.
    pub fn new(source: S, limit: Option<u64>) -> Self {
        CachingAllocator {
            source,
            blocks: HashMap::default(),
            segments: HashMap::default(),
            free_small: BTreeSet::new(),
            free_large: BTreeSet::new(),
            hot: Vec::with_capacity(HOT_BLOCKS + 1),
            grow: true,
            limit,
            stats: MemoryStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> MemoryStats {
        let mut s = self.stats;
        s.inactive_split_bytes = self
            .free_small
            .iter()
            .chain(&self.free_large)
            .filter(|(_, size, ptr)| self.blocks[ptr].segment != *ptr || self.segments[ptr].size != *size)
            .map(|(_, size, _)| size)
            .sum::<u64>()
            + self.hot.iter().map(|h| h.size).sum::<u64>();
        s
    }

    /// Allow or forbid new segments; while forbidden, a request the cache cannot serve fails
    /// with [`AllocError::NoGrowth`] and nothing is released.
    pub fn set_growth(&mut self, grow: bool) {
        self.grow = grow;
    }

    /// The limit in bytes, if any.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// The segment source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Zero the peaks (as `torch.cuda.reset_peak_memory_stats`).
    pub fn reset_peaks(&mut self) {
        self.stats.allocated_bytes_peak = self.stats.allocated_bytes;
        self.stats.reserved_bytes_peak = self.stats.reserved_bytes;
        self.stats.active_bytes_peak = self.stats.active_bytes;
    }

    fn free_set(&mut self, small: bool) -> &mut BTreeSet<(StreamId, u64, u64)> {
        if small {
            &mut self.free_small
        } else {
            &mut self.free_large
        }
    }

    /// Allocate `bytes` for use on `stream`.
    pub fn alloc(&mut self, stream: StreamId, bytes: u64) -> Result<Allocation, AllocError> {
        self.stats.num_allocs += 1;
        let size = round_up(bytes.max(1), MIN_BLOCK);
        let small = size <= SMALL_REQUEST;
        // newest first: the block just freed is the likeliest to be wanted again
        if let Some(i) = self.hot.iter().rposition(|h| {
            h.stream == stream && h.small == small && h.size >= size && !worth_splitting(h.size - size, small)
        }) {
            let ptr = self.hot.remove(i).ptr;
            return Ok(self.hand_out(ptr, bytes));
        }
        let mut found = self.best_fit(stream, size, small);
        if found.is_none() && !self.hot.is_empty() {
            // merge the hot blocks before asking the device for more
            self.flush_hot();
            found = self.best_fit(stream, size, small);
        }
        let ptr = match found {
            Some(key) => {
                self.free_set(small).remove(&key);
                key.2
            }
            None => self.new_segment(stream, size, small, bytes)?,
        };
        // split off the tail when it is worth keeping
        let block_size = self.blocks[&ptr].size;
        let remaining = block_size - size;
        if worth_splitting(remaining, small) {
            let rest = ptr + size;
            let (segment, next) = {
                let b = &self.blocks[&ptr];
                (b.segment, b.next)
            };
            self.blocks.insert(
                rest,
                Block {
                    size: remaining,
                    requested: 0,
                    segment,
                    stream,
                    small,
                    state: State::Free,
                    prev: Some(ptr),
                    next,
                },
            );
            if let Some(n) = next {
                if let Some(nb) = self.blocks.get_mut(&n) {
                    nb.prev = Some(rest);
                }
            }
            let b = self.blocks.get_mut(&ptr).expect("block exists");
            b.size = size;
            b.next = Some(rest);
            self.free_set(small).insert((stream, remaining, rest));
        }
        Ok(self.hand_out(ptr, bytes))
    }

    fn best_fit(&self, stream: StreamId, size: u64, small: bool) -> Option<(StreamId, u64, u64)> {
        let set = if small { &self.free_small } else { &self.free_large };
        set.range((stream, size, 0)..=(stream, u64::MAX, u64::MAX))
            .next()
            .copied()
    }

    /// Mark a block (free, out of every free list) allocated and count it.
    fn hand_out(&mut self, ptr: u64, bytes: u64) -> Allocation {
        let b = self.blocks.get_mut(&ptr).expect("block exists");
        b.state = State::Allocated;
        b.requested = bytes;
        let size = b.size;
        let s = &mut self.stats;
        s.allocated_bytes += size;
        s.allocated_bytes_peak = s.allocated_bytes_peak.max(s.allocated_bytes);
        s.requested_bytes += bytes;
        s.active_bytes += size;
        s.active_bytes_peak = s.active_bytes_peak.max(s.active_bytes);
        Allocation { ptr, size }
    }

    /// Merge every hot block into the free sets.
    fn flush_hot(&mut self) {
        for h in std::mem::take(&mut self.hot) {
            self.merge_in(h.ptr);
        }
    }

    fn segment_size(size: u64, small: bool) -> u64 {
        if small {
            SMALL_SEGMENT
        } else if size < LARGE_REQUEST {
            MID_SEGMENT
        } else {
            round_up(size, LARGE_ROUND)
        }
    }

    fn within_limit(&self, seg: u64) -> bool {
        self.limit.is_none_or(|l| self.stats.reserved_bytes + seg <= l)
    }

    fn new_segment(
        &mut self,
        stream: StreamId,
        size: u64,
        small: bool,
        requested: u64,
    ) -> Result<u64, AllocError> {
        if !self.grow {
            return Err(AllocError::NoGrowth { requested });
        }
        let mut seg = Self::segment_size(size, small);
        if !self.within_limit(seg) && !small {
            // a mid-size request may still fit in a segment of its own rounded size
            seg = round_up(size, LARGE_ROUND);
        }
        let mut retried = false;
        loop {
            let attempt = if self.within_limit(seg) {
                self.source.alloc_segment(seg)
            } else {
                Err(SourceError::OutOfMemory)
            };
            match attempt {
                Ok(base) => {
                    if retried {
                        self.stats.num_alloc_retries += 1;
                    }
                    self.segments.insert(base, Segment { size: seg });
                    self.blocks.insert(
                        base,
                        Block {
                            size: seg,
                            requested: 0,
                            segment: base,
                            stream,
                            small,
                            state: State::Free,
                            prev: None,
                            next: None,
                        },
                    );
                    let s = &mut self.stats;
                    s.reserved_bytes += seg;
                    s.reserved_bytes_peak = s.reserved_bytes_peak.max(s.reserved_bytes);
                    s.num_device_allocs += 1;
                    return Ok(base);
                }
                Err(SourceError::Other(e)) => return Err(AllocError::Source(e)),
                Err(SourceError::OutOfMemory) if !retried => {
                    retried = true;
                    self.release_cached();
                }
                Err(SourceError::OutOfMemory) => {
                    self.stats.num_ooms += 1;
                    let (free, total) = self.source.mem_info();
                    return Err(AllocError::OutOfMemory {
                        requested,
                        free,
                        total,
                        reserved: self.stats.reserved_bytes,
                        limit: self.limit,
                    });
                }
            }
        }
    }

    /// Return a block. `Err` for a pointer that is not an allocated block (double free).
    pub fn free(&mut self, ptr: u64) -> Result<(), String> {
        let b = match self.blocks.get_mut(&ptr) {
            Some(b) if b.state == State::Allocated => b,
            Some(_) => return Err(format!("double free of device block 0x{ptr:x}")),
            None => return Err(format!("free of unknown device pointer 0x{ptr:x}")),
        };
        b.state = State::Hot;
        let (size, requested, stream, small) = (b.size, b.requested, b.stream, b.small);
        b.requested = 0;
        self.stats.num_frees += 1;
        self.stats.allocated_bytes -= size;
        self.stats.requested_bytes -= requested;
        self.stats.active_bytes -= size;
        if !small {
            // large blocks go back at once: best-fit placement over merged neighbours is
            // what keeps fragmentation low, and a large request's work dwarfs the pool's cost
            self.merge_in(ptr);
            return Ok(());
        }
        self.hot.push(HotBlock {
            stream,
            size,
            small,
            ptr,
        });
        if self.hot.len() > HOT_BLOCKS {
            let oldest = self.hot.remove(0).ptr;
            self.merge_in(oldest);
        }
        Ok(())
    }

    /// Put a hot block in its free set, merged with its free neighbours.
    fn merge_in(&mut self, ptr: u64) {
        let (size, small, stream) = {
            let b = &self.blocks[&ptr];
            (b.size, b.small, b.stream)
        };
        let mut start = ptr;
        let mut total = size;
        if let Some(p) = self.blocks[&ptr].prev {
            if self.blocks[&p].state == State::Free {
                let psize = self.blocks[&p].size;
                self.free_set(small).remove(&(stream, psize, p));
                let next = self.blocks[&ptr].next;
                self.blocks.remove(&ptr);
                let pb = self.blocks.get_mut(&p).expect("prev exists");
                pb.size += total;
                pb.next = next;
                if let Some(n) = next {
                    self.blocks.get_mut(&n).expect("next exists").prev = Some(p);
                }
                start = p;
                total += psize;
            }
        }
        if let Some(n) = self.blocks[&start].next {
            if self.blocks[&n].state == State::Free {
                let nsize = self.blocks[&n].size;
                self.free_set(small).remove(&(stream, nsize, n));
                let nn = self.blocks[&n].next;
                self.blocks.remove(&n);
                let sb = self.blocks.get_mut(&start).expect("start exists");
                sb.size += nsize;
                sb.next = nn;
                if let Some(x) = nn {
                    self.blocks.get_mut(&x).expect("next exists").prev = Some(start);
                }
                total += nsize;
            }
        }
        self.blocks.get_mut(&start).expect("start exists").state = State::Free;
        self.free_set(small).insert((stream, total, start));
    }

    /// Return every wholly free segment to the device; returns the bytes released.
    pub fn release_cached(&mut self) -> u64 {
        self.flush_hot();
        let whole: Vec<(u64, u64, bool, StreamId)> = self
            .segments
            .iter()
            .filter_map(|(&base, seg)| {
                let b = &self.blocks[&base];
                (b.state == State::Free && b.size == seg.size).then_some((base, seg.size, b.small, b.stream))
            })
            .collect();
        let mut released = 0;
        for (base, size, small, stream) in whole {
            self.free_set(small).remove(&(stream, size, base));
            self.blocks.remove(&base);
            self.segments.remove(&base);
            self.source.free_segment(base, size);
            self.stats.reserved_bytes -= size;
            self.stats.num_device_frees += 1;
            released += size;
        }
        released
    }

    /// Check every structural invariant; `Err` names the first one broken. Used by the
    /// property tests and available to debug builds of callers.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut allocated = 0;
        let mut reserved = 0;
        let mut free_blocks = 0;
        let mut hot_blocks = 0;
        for (&base, seg) in &self.segments {
            reserved += seg.size;
            let mut at = Some(base);
            let mut covered = 0;
            let mut prev: Option<u64> = None;
            let mut prev_free = false;
            while let Some(p) = at {
                let b = self
                    .blocks
                    .get(&p)
                    .ok_or(format!("segment 0x{base:x}: missing block 0x{p:x}"))?;
                if p != base + covered {
                    return Err(format!("block 0x{p:x} not contiguous in segment 0x{base:x}"));
                }
                if b.prev != prev || b.segment != base {
                    return Err(format!("block 0x{p:x}: broken links"));
                }
                if b.state == State::Allocated {
                    allocated += b.size;
                } else if b.state == State::Hot {
                    if !self
                        .hot
                        .iter()
                        .any(|h| h.ptr == p && h.size == b.size && h.stream == b.stream)
                    {
                        return Err(format!("hot block 0x{p:x} missing from the hot list"));
                    }
                    hot_blocks += 1;
                } else {
                    if prev_free {
                        return Err(format!("adjacent free blocks at 0x{p:x} were not merged"));
                    }
                    let set = if b.small {
                        &self.free_small
                    } else {
                        &self.free_large
                    };
                    if !set.contains(&(b.stream, b.size, p)) {
                        return Err(format!("free block 0x{p:x} missing from its free set"));
                    }
                    free_blocks += 1;
                }
                prev_free = b.state == State::Free;
                covered += b.size;
                prev = Some(p);
                at = b.next;
            }
            if covered != seg.size {
                return Err(format!(
                    "segment 0x{base:x}: blocks cover {covered} of {} bytes",
                    seg.size
                ));
            }
        }
        if free_blocks != self.free_small.len() + self.free_large.len() {
            return Err("free sets hold blocks that are not free".into());
        }
        if hot_blocks != self.hot.len() || self.hot.len() > HOT_BLOCKS {
            return Err("the hot list holds blocks that are not hot, or too many".into());
        }
        let s = &self.stats;
        if allocated != s.allocated_bytes || reserved != s.reserved_bytes {
            return Err(format!(
                "stats drifted: allocated {} vs {allocated}, reserved {} vs {reserved}",
                s.allocated_bytes, s.reserved_bytes
            ));
        }
        if s.allocated_bytes > s.reserved_bytes
            || s.allocated_bytes_peak < s.allocated_bytes
            || s.reserved_bytes_peak < s.reserved_bytes
            || s.active_bytes != s.allocated_bytes
        {
            return Err(format!("stats inconsistent: {s:?}"));
        }
        if self.limit.is_some_and(|l| s.reserved_bytes > l) {
            return Err("reserved exceeds the limit".into());
        }
        Ok(())
    }
}
