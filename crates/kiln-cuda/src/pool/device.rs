//! The caching allocator on a CUDA device: segments from `cuMemAlloc`, typed buffers that
//! return their block on drop, and cross-stream use ordered by events.
//!
//! This module and the compiler are where kiln drops below cudarc's safe layer: the pool
//! hands out raw device pointers carved from its own segments, which `CudaSlice` cannot
//! represent. Kernels receive the pointers as plain `u64` arguments, so cudarc's per-slice
//! event tracking (the cause of the graph-capture isolation trap, DESIGN.md §3) never applies
//! to pool memory.
#![allow(unsafe_code)]

use super::caching::{AllocError, CachingAllocator, MemoryStats, SegmentSource, SourceError};
use crate::backend::cuda_err;
use cudarc::driver::{result, sys, CudaContext, CudaEvent, CudaStream};
use kiln_core::{Error, Result};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// Segments straight from the driver.
pub struct CudaSegments {
    ctx: Arc<CudaContext>,
}

impl SegmentSource for CudaSegments {
    fn alloc_segment(&mut self, bytes: u64) -> std::result::Result<u64, SourceError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| SourceError::Other(cuda_err("cuCtxSetCurrent", "pool", e)))?;
        // SAFETY: a plain allocation of `bytes`; the memory is only handed out through the
        // allocator, which never gives the same range to two live buffers.
        match unsafe { result::malloc_sync(bytes as usize) } {
            Ok(p) => Ok(p),
            Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => Err(SourceError::OutOfMemory),
            Err(e) => Err(SourceError::Other(cuda_err("cuMemAlloc", "pool", e))),
        }
    }

    fn free_segment(&mut self, base: u64, _bytes: u64) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `base` came from cuMemAlloc above and the allocator releases a segment only
        // when no block in it is allocated or pending, so no live work references it.
        // cuMemFree synchronises the device, which also covers frees still in flight.
        if let Err(e) = unsafe { result::free_sync(base) } {
            tracing::error!("cuMemFree(0x{base:x}) failed: {e:?}");
        }
    }

    fn mem_info(&self) -> (u64, u64) {
        let _ = self.ctx.bind_to_thread();
        result::mem_get_info()
            .map(|(f, t)| (f as u64, t as u64))
            .unwrap_or((0, 0))
    }
}

struct Deferred {
    ptr: u64,
    events: Vec<CudaEvent>,
}

struct Inner {
    alloc: CachingAllocator<CudaSegments>,
    deferred: Vec<Deferred>,
}

/// A device's caching pool. Cheap to share (`Arc`); all methods are thread-safe.
pub struct DevicePool {
    inner: Mutex<Inner>,
    ctx: Arc<CudaContext>,
    device: String,
}

impl DevicePool {
    /// A pool on `ctx`'s device holding at most `limit` bytes.
    pub fn new(ctx: Arc<CudaContext>, device: String, limit: Option<u64>) -> Arc<Self> {
        Arc::new(DevicePool {
            inner: Mutex::new(Inner {
                alloc: CachingAllocator::new(CudaSegments { ctx: ctx.clone() }, limit),
                deferred: Vec::new(),
            }),
            ctx,
            device,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The allocator's state is updated in single steps after each fallible call, so a
        // panic elsewhere while the lock was held leaves it consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Allocate an uninitialised buffer of `len` elements for use on `stream`.
    pub fn alloc<T: Copy>(self: &Arc<Self>, stream: &Arc<CudaStream>, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = (len * std::mem::size_of::<T>()) as u64;
        let sid = stream.cu_stream() as u64;
        let mut g = self.lock();
        Self::settle(&mut g, false);
        let r = match g.alloc.alloc(sid, bytes) {
            Err(AllocError::OutOfMemory { .. }) if !g.deferred.is_empty() => {
                // blocks still pending on other streams: wait for them, then retry once
                Self::settle(&mut g, true);
                g.alloc.alloc(sid, bytes)
            }
            r => r,
        };
        match r {
            Ok(a) => Ok(DeviceBuffer {
                ptr: a.ptr,
                len,
                pool: self.clone(),
                stream: stream.clone(),
                uses: Vec::new(),
                _t: PhantomData,
            }),
            Err(AllocError::OutOfMemory {
                requested,
                free,
                total,
                reserved,
                limit,
            }) => Err(Error::OutOfMemory {
                op: "device alloc".into(),
                device: self.device.clone(),
                requested,
                free,
                total,
                reserved,
                limit,
            }),
            Err(AllocError::Source(e)) => Err(e),
        }
    }

    /// Free deferred blocks whose cross-stream uses completed (all of them when `wait`).
    fn settle(g: &mut Inner, wait: bool) {
        let mut i = 0;
        while i < g.deferred.len() {
            let done = g.deferred[i].events.iter().all(|e| {
                if wait {
                    e.synchronize().is_ok()
                } else {
                    e.is_complete()
                }
            });
            if done {
                let d = g.deferred.swap_remove(i);
                if let Err(e) = g.alloc.free(d.ptr) {
                    tracing::error!("pool: {e}");
                }
            } else {
                i += 1;
            }
        }
    }

    fn release(&self, ptr: u64, uses: Vec<Arc<CudaStream>>) {
        let mut g = self.lock();
        if uses.is_empty() {
            if let Err(e) = g.alloc.free(ptr) {
                tracing::error!("pool: {e}");
            }
            return;
        }
        // The block may still be read by work queued on other streams: record an event on
        // each and free it only once they have all passed.
        let mut events = Vec::with_capacity(uses.len());
        for s in &uses {
            match self.ctx.new_event(None).and_then(|e| e.record(s).map(|_| e)) {
                Ok(e) => events.push(e),
                Err(err) => {
                    // cannot order it: wait for that stream instead of risking reuse
                    tracing::warn!("pool: event record failed ({err:?}); synchronising stream");
                    let _ = s.synchronize();
                }
            }
        }
        g.deferred.push(Deferred { ptr, events });
    }

    /// The counters (see [`MemoryStats`]).
    pub fn stats(&self) -> MemoryStats {
        self.lock().alloc.stats()
    }

    /// Reset the peak counters.
    pub fn reset_peaks(&self) {
        self.lock().alloc.reset_peaks()
    }

    /// Return every cached, unused segment to the driver (as `torch.cuda.empty_cache`).
    /// Blocks pending on other streams are waited for first. Returns the bytes released.
    pub fn empty_cache(&self) -> u64 {
        let mut g = self.lock();
        Self::settle(&mut g, true);
        g.alloc.release_cached()
    }

    /// The limit in bytes, if any.
    pub fn limit(&self) -> Option<u64> {
        self.lock().alloc.limit()
    }
}

/// A typed device buffer from a [`DevicePool`]. Dropping it returns the block to the pool,
/// immediately reusable by later work on its stream.
pub struct DeviceBuffer<T> {
    ptr: u64,
    len: usize,
    pool: Arc<DevicePool>,
    stream: Arc<CudaStream>,
    uses: Vec<Arc<CudaStream>>,
    _t: PhantomData<T>,
}

impl<T> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer(0x{:x}, {} x {})",
            self.ptr,
            self.len,
            std::any::type_name::<T>()
        )
    }
}

impl<T: Copy> DeviceBuffer<T> {
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The raw device address, for kernel arguments. Valid while `self` lives.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The stream the buffer was allocated on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Declare that work on `other` uses this buffer, so that its block is not reused by the
    /// allocating stream before that work completes (as `Tensor.record_stream`).
    pub fn record_stream(&mut self, other: &Arc<CudaStream>) {
        if other.cu_stream() != self.stream.cu_stream()
            && !self.uses.iter().any(|s| s.cu_stream() == other.cu_stream())
        {
            self.uses.push(other.clone());
        }
    }

    /// Copy `src` (same length) from the host, ordered on `stream`. Blocks until the copy of
    /// pageable memory has been staged (as `cuMemcpyHtoDAsync` does).
    pub fn copy_from_host(&mut self, src: &[T], stream: &Arc<CudaStream>) -> Result<()> {
        kiln_core::backend::check_same_len("htod", self.len, src.len())?;
        self.record_stream(stream);
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| cuda_err("bind", &self.pool.device, e))?;
        // SAFETY: the destination block holds `len` elements of T (allocated for exactly that
        // size) and stays alive until the copy completes (drop defers on recorded streams).
        unsafe { result::memcpy_htod_async(self.ptr, src, stream.cu_stream()) }
            .map_err(|e| cuda_err("cuMemcpyHtoDAsync", &self.pool.device, e))
    }

    /// Copy into `dst` (same length) on `stream`, and wait for it.
    pub fn copy_to_host(&self, dst: &mut [T], stream: &Arc<CudaStream>) -> Result<()> {
        kiln_core::backend::check_same_len("dtoh", self.len, dst.len())?;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| cuda_err("bind", &self.pool.device, e))?;
        // SAFETY: the source block holds `len` elements of T; `dst` is exactly as long and
        // the synchronize below ends the borrow only after the copy has landed.
        unsafe { result::memcpy_dtoh_async(dst, self.ptr, stream.cu_stream()) }
            .map_err(|e| cuda_err("cuMemcpyDtoHAsync", &self.pool.device, e))?;
        stream
            .synchronize()
            .map_err(|e| cuda_err("cuStreamSynchronize", &self.pool.device, e))
    }
}

impl<T> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        self.pool.release(self.ptr, std::mem::take(&mut self.uses));
    }
}
