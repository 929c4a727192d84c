//! The caching allocator on a CUDA device: segments from `cuMemAlloc`, typed buffers that
//! return their block on drop, and cross-stream use ordered by events.
//!
//! This module and the compiler are where kiln drops below cudarc's safe layer: the pool
//! hands out raw device pointers carved from its own segments, which `CudaSlice` cannot
//! represent. Kernels receive the pointers as plain `u64` arguments, so cudarc's per-slice
//! event tracking (the cause of `CUDA_ERROR_STREAM_CAPTURE_ISOLATION` in graph captures; see
//! [`crate::graph`]) never applies to pool memory.
#![allow(unsafe_code)]

use super::caching::{AllocError, CachingAllocator, MemoryStats, SegmentSource, SourceError};
use crate::backend::cuda_err;
use cudarc::driver::{result, sys, CudaContext, CudaEvent, CudaStream};
use kiln_core::{Error, Result};
use rustc_hash::{FxHashMap, FxHashSet};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Segments straight from the driver.
pub struct CudaSegments {
    ctx: Arc<CudaContext>,
}

/// Device memory of exactly the bytes asked for, straight from `cuMemAlloc`, outside the
/// caching pool: what a compute-sanitizer run needs. memcheck reports an access past an
/// array only where its allocation ends there, and the pool carves blocks of up to 1 MiB
/// out of 2 MiB segments, so an overrun of a pool block lands in memory that is still
/// allocated and goes unseen (PyTorch's `PYTORCH_NO_CUDA_MEMORY_CACHING` exists for this).
pub struct UnpooledBuffer {
    ctx: Arc<CudaContext>,
    ptr: u64,
    len: usize,
}

impl UnpooledBuffer {
    /// A new allocation of `bytes.len()` bytes (1 for an empty slice) holding `bytes`.
    pub fn upload(ctx: &Arc<CudaContext>, bytes: &[u8]) -> Result<Self> {
        ctx.bind_to_thread()
            .map_err(|e| cuda_err("cuCtxSetCurrent", "unpooled", e))?;
        // SAFETY: a plain allocation, owned by the value returned (freed on its drop).
        let ptr = unsafe { result::malloc_sync(bytes.len().max(1)) }
            .map_err(|e| cuda_err("cuMemAlloc", "unpooled", e))?;
        let b = UnpooledBuffer {
            ctx: ctx.clone(),
            ptr,
            len: bytes.len(),
        };
        if !bytes.is_empty() {
            // SAFETY: `ptr` holds `bytes.len()` bytes; a synchronous copy from a live slice.
            unsafe { result::memcpy_htod_sync(ptr, bytes) }
                .map_err(|e| cuda_err("cuMemcpyHtoD", "unpooled", e))?;
        }
        Ok(b)
    }

    /// The device address.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no byte is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for UnpooledBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from cuMemAlloc in `upload`; cuMemFree synchronises the device,
        // so no queued work still uses it.
        if let Err(e) = unsafe { result::free_sync(self.ptr) } {
            tracing::error!("cuMemFree(0x{:x}) failed: {e:?}", self.ptr);
        }
    }
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
    /// The capture in progress: its stream and every block whose address went into it.
    capture: Option<(u64, std::thread::ThreadId, FxHashSet<u64>)>,
    /// Blocks whose addresses live graphs hold, with the number of such graphs.
    graph_refs: FxHashMap<u64, usize>,
    /// Blocks whose buffers were dropped while graphs still held them: freed (with their
    /// pending cross-stream events) when the last such graph goes.
    orphans: FxHashMap<u64, Vec<CudaEvent>>,
}

/// The addresses one graph holds; returned by `DevicePool::end_capture` and given back to
/// `DevicePool::release_graph` when the graph is destroyed.
#[derive(Debug, Default)]
pub struct GraphRefs(Vec<u64>);

impl GraphRefs {
    /// Distinct device blocks the graph reads or writes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Host <-> device traffic through a pool's buffers: every host copy kiln makes (plain,
/// staged or pipelined) is counted here, so a test can prove that a chain of ops never left
/// the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TransferStats {
    /// Host-to-device copy calls (one per chunk for staged copies).
    pub htod_copies: u64,
    /// Bytes copied host to device.
    pub htod_bytes: u64,
    /// Device-to-host copy calls.
    pub dtoh_copies: u64,
    /// Bytes copied device to host.
    pub dtoh_bytes: u64,
}

#[derive(Default)]
struct TransferCounters {
    htod_copies: AtomicU64,
    htod_bytes: AtomicU64,
    dtoh_copies: AtomicU64,
    dtoh_bytes: AtomicU64,
}

/// A device's caching pool. Cheap to share (`Arc`); all methods are thread-safe.
pub struct DevicePool {
    transfers: TransferCounters,
    /// Fill every new allocation with 0xFF bytes (NaN in every float type) so that an
    /// element a kernel fails to write is caught ([`DevicePool::set_poison`]).
    poison: AtomicBool,
    inner: Mutex<Inner>,
    /// A capture is in progress on some stream of this pool (a cheap check for the hot
    /// paths; the details are in `Inner::capture`).
    capturing: AtomicBool,
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
                capture: None,
                graph_refs: FxHashMap::default(),
                orphans: FxHashMap::default(),
            }),
            capturing: AtomicBool::new(false),
            transfers: TransferCounters::default(),
            poison: AtomicBool::new(std::env::var("KILN_POISON_ALLOC").as_deref() == Ok("1")),
            ctx,
            device,
        })
    }

    /// Fill every later allocation with 0xFF bytes (NaN as f32, f16 and bf16; the maximum as
    /// u8 and u16), queued on its stream, so that an output element a kernel fails to write
    /// cannot pass for a result. For tests and debugging (`KILN_POISON_ALLOC=1` sets it at
    /// start); it costs a memset per allocation. Allocations during a graph capture are
    /// left alone.
    pub fn set_poison(&self, on: bool) {
        self.poison.store(on, Ordering::Relaxed);
    }

    /// Count a host-to-device copy of `bytes` (kiln's transfer paths call this).
    pub fn note_htod(&self, bytes: u64) {
        self.transfers.htod_copies.fetch_add(1, Ordering::Relaxed);
        self.transfers.htod_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Count a device-to-host copy of `bytes`.
    pub fn note_dtoh(&self, bytes: u64) {
        self.transfers.dtoh_copies.fetch_add(1, Ordering::Relaxed);
        self.transfers.dtoh_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Host <-> device traffic so far.
    pub fn transfer_stats(&self) -> TransferStats {
        let t = &self.transfers;
        TransferStats {
            htod_copies: t.htod_copies.load(Ordering::Relaxed),
            htod_bytes: t.htod_bytes.load(Ordering::Relaxed),
            dtoh_copies: t.dtoh_copies.load(Ordering::Relaxed),
            dtoh_bytes: t.dtoh_bytes.load(Ordering::Relaxed),
        }
    }

    /// The device label, `cuda:N`.
    pub fn device(&self) -> &str {
        &self.device
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
        // only the capture stream is refused new segments; other streams grow as usual
        let capturing_here = g.capture.as_ref().is_some_and(|c| c.0 == sid);
        g.alloc.set_growth(!capturing_here);
        if !capturing_here {
            // (event queries are kept out of a capture)
            Self::settle(&mut g, false);
        }
        let r = match g.alloc.alloc(sid, bytes) {
            Err(AllocError::OutOfMemory { .. }) if !g.deferred.is_empty() => {
                // blocks still pending on other streams: wait for them, then retry once
                Self::settle(&mut g, true);
                g.alloc.alloc(sid, bytes)
            }
            r => r,
        };
        drop(g);
        match r {
            Ok(a) => {
                if self.poison.load(Ordering::Relaxed) && !capturing_here && bytes > 0 {
                    // SAFETY: the block was just handed out for `bytes` bytes and nothing
                    // else can reach it; the memset is ordered on the stream it is used on.
                    unsafe { result::memset_d8_async(a.ptr, 0xff, bytes as usize, stream.cu_stream()) }
                        .map_err(|e| cuda_err("cuMemsetD8Async", &self.device, e))?;
                }
                Ok(DeviceBuffer {
                ptr: a.ptr,
                len,
                pool: self.clone(),
                stream: stream.clone(),
                uses: Mutex::new(Vec::new()),
                external: None,
                _t: PhantomData,
            })
            }
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
            Err(AllocError::NoGrowth { requested }) => Err(Error::Capture {
                op: format!("a new device allocation of {requested} B"),
                reason: "a graph replays fixed addresses and a capture cannot take memory from the driver; allocate every buffer (or run the ops once, which warms the pool) before capturing".into(),
            }),
        }
    }

    /// A buffer over device memory kiln does not own (a tensor another library exported
    /// through DLPack): `len` elements of `T` at `ptr`, whose data is ready on `stream` (the
    /// DLPack stream handshake made it so). `owner` keeps the memory alive; the block never
    /// enters the pool's accounting. When the buffer is dropped, the streams that used it are
    /// waited for on the host (work still queued may read it) before `owner` is dropped, since
    /// its producer may reuse the memory at once on a stream kiln cannot order against.
    ///
    /// # Safety
    ///
    /// `ptr` must address `len` elements of `T` on this pool's device, readable (and, if kiln
    /// writes through it, writable), valid for as long as `owner` lives, and not freed by
    /// anyone else while it does.
    pub unsafe fn wrap_external<T: Copy>(
        self: &Arc<Self>,
        stream: &Arc<CudaStream>,
        ptr: u64,
        len: usize,
        owner: Box<dyn Send + Sync>,
    ) -> DeviceBuffer<T> {
        DeviceBuffer {
            ptr,
            len,
            pool: self.clone(),
            stream: stream.clone(),
            uses: Mutex::new(Vec::new()),
            external: Some(owner),
            _t: PhantomData,
        }
    }

    /// Start recording, for a capture on `stream`, every block whose address a kernel
    /// receives; the pool stops taking new segments until [`Self::end_capture`].
    pub(crate) fn begin_capture(&self, stream: &CudaStream) {
        let mut g = self.lock();
        g.capture = Some((
            stream.cu_stream() as u64,
            std::thread::current().id(),
            FxHashSet::default(),
        ));
        self.capturing.store(true, Ordering::SeqCst);
    }

    /// End the capture; when `keep`, the recorded blocks are held for the new graph (until
    /// [`Self::release_graph`]), else they are let go (the capture failed).
    pub(crate) fn end_capture(&self, keep: bool) -> GraphRefs {
        let mut g = self.lock();
        self.capturing.store(false, Ordering::SeqCst);
        g.alloc.set_growth(true);
        let refs: Vec<u64> = g
            .capture
            .take()
            .map(|(_, _, r)| r.into_iter().collect())
            .unwrap_or_default();
        if keep {
            for &p in &refs {
                *g.graph_refs.entry(p).or_insert(0) += 1;
            }
            return GraphRefs(refs);
        }
        // blocks dropped during a failed capture were orphaned for it: free them now
        for p in refs {
            if !g.graph_refs.contains_key(&p) {
                if let Some(events) = g.orphans.remove(&p) {
                    Self::free_or_defer(&mut g, p, events);
                }
            }
        }
        GraphRefs::default()
    }

    /// A graph is gone: blocks no other graph holds, and whose buffers were dropped, return
    /// to the pool (after work already queued, by stream order).
    pub(crate) fn release_graph(&self, refs: GraphRefs) {
        let mut g = self.lock();
        for p in refs.0 {
            let last = match g.graph_refs.get_mut(&p) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                Some(_) => {
                    g.graph_refs.remove(&p);
                    true
                }
                None => false,
            };
            if last {
                if let Some(events) = g.orphans.remove(&p) {
                    Self::free_or_defer(&mut g, p, events);
                }
            }
        }
    }

    /// Whether a capture is in progress on `stream`.
    pub fn is_capturing(&self, stream: &CudaStream) -> bool {
        self.capturing.load(Ordering::Relaxed)
            && self
                .lock()
                .capture
                .as_ref()
                .is_some_and(|(s, _, _)| *s == stream.cu_stream() as u64)
    }

    fn note_capture_use(&self, ptr: u64) {
        // only the capturing thread's kernels go into the graph
        if let Some((_, t, refs)) = self.lock().capture.as_mut() {
            if *t == std::thread::current().id() {
                refs.insert(ptr);
            }
        }
    }

    fn free_or_defer(g: &mut Inner, ptr: u64, events: Vec<CudaEvent>) {
        if events.is_empty() {
            if let Err(e) = g.alloc.free(ptr) {
                tracing::error!("pool: {e}");
            }
        } else {
            g.deferred.push(Deferred { ptr, events });
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
        let held = |g: &Inner| {
            g.graph_refs.contains_key(&ptr) || g.capture.as_ref().is_some_and(|(_, _, r)| r.contains(&ptr))
        };
        if uses.is_empty() {
            if (!g.graph_refs.is_empty() || g.capture.is_some()) && held(&g) {
                // a graph replays this address: keep the block until the graph goes
                g.orphans.insert(ptr, Vec::new());
                return;
            }
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
        if held(&g) {
            g.orphans.insert(ptr, events);
            return;
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
    /// Other streams whose work uses the block (PyTorch's `record_stream`): behind a lock so
    /// that a buffer shared by tensors (`Arc`) can be recorded through `&self`.
    uses: Mutex<Vec<Arc<CudaStream>>>,
    /// Memory kiln does not own (a DLPack import, [`DevicePool::wrap_external`]): what keeps
    /// it alive. Such a block never returns to the pool; dropping the buffer waits for the
    /// kiln streams that used it, then drops the owner (which hands the memory back to its
    /// producer).
    external: Option<Box<dyn Send + Sync>>,
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

    /// The raw device address, for kernel arguments. Valid while `self` lives. During a
    /// graph capture the block is recorded as the graph's, so that it outlives the buffer
    /// for as long as the graph can replay it.
    pub fn device_ptr(&self) -> u64 {
        if self.pool.capturing.load(Ordering::Relaxed) {
            self.pool.note_capture_use(self.ptr);
        }
        self.ptr
    }

    fn refuse_in_capture(&self, op: &str, stream: &CudaStream) -> Result<()> {
        if self.pool.is_capturing(stream) {
            return Err(Error::Capture {
                op: op.into(),
                reason: "a host copy during capture would bake a host address into the graph (and a download must wait for the stream, which a capture cannot do); write inputs with Graph::write before Graph::launch and read results after it".into(),
            });
        }
        Ok(())
    }

    /// The stream the buffer was allocated on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Declare that work on `other` uses this buffer, so that its block is not reused by the
    /// allocating stream before that work completes (as `Tensor.record_stream`).
    pub fn record_stream(&self, other: &Arc<CudaStream>) {
        if other.cu_stream() == self.stream.cu_stream() {
            return;
        }
        let mut uses = self.uses.lock().unwrap_or_else(|p| p.into_inner());
        if !uses.iter().any(|s| s.cu_stream() == other.cu_stream()) {
            uses.push(other.clone());
        }
    }

    /// The pool the buffer came from.
    pub fn pool(&self) -> &Arc<DevicePool> {
        &self.pool
    }

    /// Copy `src` (same length) from the host, ordered on `stream`. Blocks until the copy of
    /// pageable memory has been staged (as `cuMemcpyHtoDAsync` does), and until the copy is
    /// done for page-locked memory, which the DMA reads in place.
    pub fn copy_from_host(&mut self, src: &[T], stream: &Arc<CudaStream>) -> Result<()> {
        kiln_core::backend::check_same_len("htod", self.len, src.len())?;
        self.refuse_in_capture("copy_from_host", stream)?;
        self.record_stream(stream);
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| cuda_err("bind", &self.pool.device, e))?;
        // SAFETY: the destination block holds `len` elements of T (allocated for exactly that
        // size) and stays alive until the copy completes (drop defers on recorded streams).
        unsafe { result::memcpy_htod_async(self.ptr, src, stream.cu_stream()) }
            .map_err(|e| cuda_err("cuMemcpyHtoDAsync", &self.pool.device, e))?;
        self.pool.note_htod(std::mem::size_of_val(src) as u64);
        // From pageable memory the driver has read `src` by the time it returns; from
        // page-locked memory (a pinned or registered buffer) the DMA reads it later, and
        // `src` is only borrowed: wait for the copy.
        if crate::transfer::is_pinned(src) {
            stream
                .synchronize()
                .map_err(|e| cuda_err("cuStreamSynchronize", &self.pool.device, e))?;
        }
        Ok(())
    }

    /// Copy into `dst` (same length) on `stream`, and wait for it.
    pub fn copy_to_host(&self, dst: &mut [T], stream: &Arc<CudaStream>) -> Result<()> {
        kiln_core::backend::check_same_len("dtoh", self.len, dst.len())?;
        self.refuse_in_capture("copy_to_host", stream)?;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| cuda_err("bind", &self.pool.device, e))?;
        // SAFETY: the source block holds `len` elements of T; `dst` is exactly as long and
        // the synchronize below ends the borrow only after the copy has landed.
        unsafe { result::memcpy_dtoh_async(dst, self.ptr, stream.cu_stream()) }
            .map_err(|e| cuda_err("cuMemcpyDtoHAsync", &self.pool.device, e))?;
        self.pool.note_dtoh(std::mem::size_of_val(dst) as u64);
        stream
            .synchronize()
            .map_err(|e| cuda_err("cuStreamSynchronize", &self.pool.device, e))
    }
}

impl<T> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        let uses = std::mem::take(self.uses.get_mut().unwrap_or_else(|p| p.into_inner()));
        if let Some(owner) = self.external.take() {
            // Not the pool's: wait for the kiln work that may still read it (a no-op when the
            // streams are idle), then let the producer have its memory back.
            for s in std::iter::once(&self.stream).chain(&uses) {
                if let Err(e) = s.synchronize() {
                    tracing::error!("releasing an imported buffer: {e:?}");
                }
            }
            drop(owner);
            return;
        }
        self.pool.release(self.ptr, uses);
    }
}
