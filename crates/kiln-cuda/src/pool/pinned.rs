//! The pinned (page-locked) host memory pool: staging buffers for transfers at full PCIe
//! speed. Blocks are `cuMemHostAlloc` allocations rounded up to a power of two (at least
//! 64 KiB) and cached per size class; a freed block is reused by the next request of its
//! class. Written by hand: no crate pools CUDA pinned memory.
//!
//! Reuse rule: drop a [`PinnedBuffer`] only after the asynchronous copies that use it have
//! completed (the pipeline synchronises before it releases its buffers), exactly as with
//! `cudaFreeHost`.
#![allow(unsafe_code)]

use crate::backend::cuda_err;
use cudarc::driver::{result, sys, CudaContext};
use kiln_core::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const MIN_CLASS: u64 = 64 << 10;

/// Counters of the pinned pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PinnedStats {
    /// Bytes in blocks handed out.
    pub allocated_bytes: u64,
    /// Bytes pinned (handed out or cached).
    pub reserved_bytes: u64,
    /// Peak of `reserved_bytes`.
    pub reserved_bytes_peak: u64,
    /// Allocation calls.
    pub num_allocs: u64,
    /// Allocations served from the cache.
    pub num_cache_hits: u64,
    /// `cuMemHostAlloc` calls.
    pub num_host_allocs: u64,
    /// Nanoseconds in `cuMemHostAlloc` (pinning and mapping new blocks).
    pub host_alloc_ns: u64,
    /// Nanoseconds zero-filling new blocks.
    pub zero_fill_ns: u64,
}

struct Inner {
    free: HashMap<u64, Vec<usize>>,
    stats: PinnedStats,
}

/// A pool of pinned host memory for one context.
pub struct PinnedPool {
    ctx: Arc<CudaContext>,
    inner: Mutex<Inner>,
}

fn class(bytes: u64) -> u64 {
    bytes.max(MIN_CLASS).next_power_of_two()
}

impl PinnedPool {
    /// An empty pool.
    pub fn new(ctx: Arc<CudaContext>) -> Arc<Self> {
        Arc::new(PinnedPool {
            ctx,
            inner: Mutex::new(Inner {
                free: HashMap::new(),
                stats: PinnedStats::default(),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A pinned buffer of `len` elements, zero-initialised on first allocation of its block
    /// (a reused block holds its previous contents).
    pub fn alloc<T: Copy + Default>(self: &Arc<Self>, len: usize) -> Result<PinnedBuffer<T>> {
        let bytes = (len * std::mem::size_of::<T>()) as u64;
        let cls = class(bytes);
        let mut g = self.lock();
        g.stats.num_allocs += 1;
        let ptr = match g.free.get_mut(&cls).and_then(|v| v.pop()) {
            Some(p) => {
                g.stats.num_cache_hits += 1;
                p
            }
            None => {
                self.ctx
                    .bind_to_thread()
                    .map_err(|e| cuda_err("bind", "pinned", e))?;
                let t0 = std::time::Instant::now();
                // SAFETY: a plain page-locked allocation of `cls` bytes; kiln writes it fully
                // (zero-fill below) before anything reads it as T.
                let p = unsafe { result::malloc_host(cls as usize, sys::CU_MEMHOSTALLOC_PORTABLE) };
                g.stats.host_alloc_ns += t0.elapsed().as_nanos() as u64;
                let p = match p {
                    Ok(p) => p as usize,
                    Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => {
                        return Err(Error::OutOfMemory {
                            op: "pinned host alloc".into(),
                            device: "host (pinned)".into(),
                            requested: cls,
                            free: 0,
                            total: 0,
                            reserved: g.stats.reserved_bytes,
                            limit: None,
                        })
                    }
                    Err(e) => return Err(cuda_err("cuMemHostAlloc", "host", e)),
                };
                let t0 = std::time::Instant::now();
                // SAFETY: `p` points to `cls` writable bytes just allocated.
                unsafe { std::ptr::write_bytes(p as *mut u8, 0, cls as usize) };
                g.stats.zero_fill_ns += t0.elapsed().as_nanos() as u64;
                g.stats.num_host_allocs += 1;
                g.stats.reserved_bytes += cls;
                g.stats.reserved_bytes_peak = g.stats.reserved_bytes_peak.max(g.stats.reserved_bytes);
                p
            }
        };
        g.stats.allocated_bytes += cls;
        Ok(PinnedBuffer {
            ptr,
            len,
            class: cls,
            pool: self.clone(),
            _t: std::marker::PhantomData,
        })
    }

    /// The counters.
    pub fn stats(&self) -> PinnedStats {
        self.lock().stats
    }

    /// Unpin and free every cached block; returns the bytes released.
    pub fn empty_cache(&self) -> u64 {
        let mut g = self.lock();
        let _ = self.ctx.bind_to_thread();
        let mut released = 0;
        for (cls, ptrs) in g.free.drain() {
            for p in ptrs {
                // SAFETY: `p` came from cuMemHostAlloc and is in the free list, so no buffer
                // refers to it.
                let _ = unsafe { result::free_host(p as *mut std::ffi::c_void) };
                released += cls;
            }
        }
        g.stats.reserved_bytes -= released;
        released
    }
}

/// A pinned host buffer from a [`PinnedPool`]; derefs to `[T]`.
pub struct PinnedBuffer<T> {
    ptr: usize,
    len: usize,
    class: u64,
    pool: Arc<PinnedPool>,
    _t: std::marker::PhantomData<T>,
}

// SAFETY: the buffer owns its block exclusively (the pool hands a block to one buffer at a
// time), like a Vec<T>; T: Send/Sync carry over.
unsafe impl<T: Send> Send for PinnedBuffer<T> {}
// SAFETY: shared access only yields `&[T]`.
unsafe impl<T: Sync> Sync for PinnedBuffer<T> {}

impl<T> std::ops::Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the block holds `class >= len * size_of::<T>()` bytes, page-aligned (so
        // aligned for T), initialised (zeroed at allocation; kiln stores only Copy POD types).
        unsafe { std::slice::from_raw_parts(self.ptr as *const T, self.len) }
    }
}

impl<T> std::ops::DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut T, self.len) }
    }
}

impl<T> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        let mut g = self.pool.lock();
        g.stats.allocated_bytes -= self.class;
        g.free.entry(self.class).or_default().push(self.ptr);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn classes_round_up_to_powers_of_two() {
        assert_eq!(super::class(1), 64 << 10);
        assert_eq!(super::class((64 << 10) + 1), 128 << 10);
        assert_eq!(super::class(3 << 30), 4 << 30);
    }
}
