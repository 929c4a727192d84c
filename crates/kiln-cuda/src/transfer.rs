//! Host <-> device copies at the link's speed.
//!
//! The driver copies pageable memory through a small internal staging buffer, one piece at
//! a time, at about 7 GB/s on the H200 machine against 55 GB/s from pinned memory. kiln
//! stages large pageable copies itself: the data is split into chunks ([`CHUNK_BYTES`]),
//! each chunk is copied into one of a few pinned buffers from the pinned pool by all cores
//! at once (rayon), and the DMA of chunk i runs while the host copies chunk i+1. Small copies
//! ([`DIRECT_BYTES`] or less) go straight through the driver, whose fixed cost is lower.
//!
//! Uploads return as soon as the host side is done: the staging buffers (or a pinned
//! source the caller hands over) are held in the backend's in-flight list with an event, and
//! go back to their pool once the copies that read them have completed. Downloads wait for
//! their data. Every copy is counted in the pool's [`TransferStats`](crate::pool::TransferStats).
#![allow(unsafe_code)]

use crate::backend::{lock, CudaBackend};
use crate::pool::{DeviceBuffer, PinnedBuffer};
use cudarc::driver::{result, CudaEvent, CudaStream};
use kiln_core::backend::check_same_len;
use kiln_core::dtype::HasDType;
use kiln_core::Result;
use rayon::prelude::*;
use std::any::Any;

/// Copies of at most this many bytes go straight through the driver.
pub const DIRECT_BYTES: usize = 4 << 20;
/// Bytes per staged chunk: long enough for the DMA to run at full speed, short enough that
/// the first and last chunks (which do not overlap) cost little.
pub const CHUNK_BYTES: usize = 16 << 20;
/// Pinned staging buffers a staged copy rotates through.
const SLOTS: usize = 3;
/// Bytes each rayon task copies.
const PIECE_BYTES: usize = 1 << 20;

/// Host memory that queued work still reads, and the event after which it may go.
pub(crate) struct Held {
    event: CudaEvent,
    /// The stream the event was recorded on (its handle, as a number).
    stream: usize,
    _data: Box<dyn Any + Send + Sync>,
}

/// `dst.copy_from_slice(src)` by all cores, in 1 MiB pieces.
///
/// Non-temporal stores for the pieces were measured against glibc's `memcpy` on the GPU
/// host (an Intel Xeon, 2026-12-05): equal within noise there (its `rep movsb` already
/// avoids reading the destination), so the plain copy stays (docs/performance.md).
pub fn par_copy<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    let per = (PIECE_BYTES / std::mem::size_of::<T>().max(1)).max(1);
    if dst.len() <= per {
        dst.copy_from_slice(src);
        return;
    }
    dst.par_chunks_mut(per)
        .zip(src.par_chunks(per))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// Bytes from which [`host_vec`] asks for transparent huge pages and has the kernel fault the
/// pages in by all cores.
const HUGE_FROM: usize = 32 << 20;
/// The huge page size on x86-64.
const HUGE: usize = 2 << 20;
/// Bytes a thread asks the kernel to populate at a time.
const POPULATE_PIECE: usize = 4 << 20;
/// `MADV_POPULATE_WRITE` (Linux 5.14; the libc crate does not export it for every target).
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// `n` zeros from the allocator's zeroed path (for a large `n`, fresh pages nobody has
/// touched: glibc's `calloc` maps them and skips the memset), with transparent huge pages
/// asked for from [`HUGE_FROM`] bytes on. Returns the vector and the page-aligned range
/// `(address, bytes)` a populate may cover (empty below [`HUGE_FROM`]).
fn zeroed_advised<T: HasDType>(n: usize) -> (Vec<T>, (usize, usize)) {
    let v: Vec<T> = bytemuck::zeroed_vec(n);
    let bytes = n * std::mem::size_of::<T>();
    if bytes < HUGE_FROM {
        return (v, (0, 0));
    }
    let start = v.as_ptr() as usize;
    let lo = start.next_multiple_of(HUGE);
    let hi = (start + bytes) / HUGE * HUGE;
    if hi > lo {
        // SAFETY: [lo, hi) lies inside the allocation just made; MADV_HUGEPAGE only changes
        // how the kernel backs the pages, never their contents or validity.
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
    let first = start.next_multiple_of(4096);
    let end = (start + bytes) / 4096 * 4096;
    (v, (first, end.saturating_sub(first)))
}

/// How many populate pieces the page range `(addr, bytes)` has: pieces are aligned to huge
/// pages (the first and last are cut to the range), so no two threads fault one huge page.
fn populate_pieces((addr, bytes): (usize, usize)) -> usize {
    let base = addr / HUGE * HUGE;
    (addr + bytes - base).div_ceil(POPULATE_PIECE)
}

/// Has the kernel fault in, writable, piece `i` of the page range `(addr, bytes)`;
/// `false` where it cannot (a kernel before 5.14). A populate never changes a byte: it maps
/// in the pages that are not yet mapped, as a write fault would, without writing, and leaves
/// mapped ones alone; so it may run beside the vector's owner writing it.
fn populate_piece((addr, bytes): (usize, usize), i: usize) -> bool {
    let base = addr / HUGE * HUGE;
    let a = (base + i * POPULATE_PIECE).max(addr);
    let b = (base + (i + 1) * POPULATE_PIECE).min(addr + bytes);
    if b <= a {
        return true;
    }
    // SAFETY: [a, b) lies inside a live allocation (the caller's range is within its
    // vector, which outlives every populate: `host_vec` and the scope of `host_vec_with`);
    // MADV_POPULATE_WRITE faults pages in without changing a byte of them.
    unsafe { libc::madvise(a as *mut libc::c_void, b - a, MADV_POPULATE_WRITE) == 0 }
}

/// A new host vector of `n` zeros for a large result: from 32 MiB on, the kernel is asked
/// for transparent huge pages and faults every page in by all cores at once
/// (`MADV_POPULATE_WRITE`, rayon), before anyone writes it. On the H200 machine a plain
/// `vec![0.0; 1 << 28]` filled by a download cost ~100 ms of page faults, three quarters of
/// the whole 1 GiB download, and faulting in by all cores first took 30.6 ms. The pages come
/// zeroed from the allocator, so nothing is written twice: the earlier version wrote zeros
/// over the kernel's zeros (on the 2-core development machine, 1 GiB: 70 ms that way, 60 ms
/// populated). Where the kernel has no populate, the cores write zeros instead. Written by
/// hand: no crate allocates with this advice; it is best effort (no THP: small pages).
pub fn host_vec<T: HasDType>(n: usize) -> Vec<T> {
    let (mut v, range) = zeroed_advised::<T>(n);
    if range.1 == 0 {
        return v;
    }
    let pieces = populate_pieces(range);
    let populated = (0..pieces).into_par_iter().all(|i| populate_piece(range, i));
    if !populated {
        let per = (POPULATE_PIECE / std::mem::size_of::<T>().max(1)).max(1);
        v.par_chunks_mut(per).for_each(|c| c.fill(T::zeroed()));
    }
    v
}

/// A new host vector of `n` elements written by `fill` (a result, or `fill`'s error), its
/// pages faulted in first ([`host_vec`]).
///
/// Faulting them in while `fill` runs (a few threads populating front to back beside a
/// staged pipeline) was tried and measured on the GPU host (2026-12-05, H100 host, 2^28 f32
/// `rt.sigmoid` host to host): 86.8 ms faulted first, 115.6 ms overlapped. The populating
/// threads take memory bandwidth from the pipeline's own copies.
pub fn host_vec_then<T: HasDType, E>(
    n: usize,
    fill: impl FnOnce(&mut [T]) -> std::result::Result<(), E>,
) -> std::result::Result<Vec<T>, E> {
    let mut v = host_vec::<T>(n);
    fill(&mut v).map(|()| v)
}

/// Whether `s` lies in page-locked memory known to the driver (kiln's pinned pool, or
/// another CUDA user's, such as a torch pinned tensor): then the DMA engines can read or
/// write it directly. `cuPointerGetAttributes` (plural) answers an unknown, pageable pointer
/// with success and memory type 0 rather than an error, so the query leaves no API error for
/// compute-sanitizer to report (the singular form, and `cuMemHostGetFlags`, fail there).
pub(crate) fn is_pinned<T>(s: &[T]) -> bool {
    use cudarc::driver::sys;
    let mut ty: std::ffi::c_uint = 0;
    let mut attr = [sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE];
    let mut data = [&mut ty as *mut std::ffi::c_uint as *mut std::ffi::c_void];
    // SAFETY: a query of the driver's address table: the pointer is only looked up, never
    // dereferenced; `data` holds one slot the size of the one attribute asked for.
    let r =
        unsafe { sys::cuPointerGetAttributes(1, attr.as_mut_ptr(), data.as_mut_ptr(), s.as_ptr() as u64) };
    r == sys::cudaError_enum::CUDA_SUCCESS
        && ty == sys::CUmemorytype_enum::CU_MEMORYTYPE_HOST as std::ffi::c_uint
}

impl CudaBackend {
    /// Keep `data` alive until the work queued so far on `stream` has completed.
    pub fn hold_until_done(&self, data: Box<dyn Any + Send + Sync>, stream: &CudaStream) -> Result<()> {
        let event = self.new_event(false)?;
        event.record(stream).map_err(|e| self.err("cuEventRecord", e))?;
        let mut held = lock(&self.in_flight);
        held.retain(|h| !h.event.is_complete());
        held.push(Held {
            event,
            stream: stream.cu_stream() as usize,
            _data: data,
        });
        Ok(())
    }

    /// Waits for what is held for copies queued on `stream` and lets it go: a staged
    /// upload's pinned buffers go back to the pool, so a staged download on the same stream
    /// (which waits for those copies anyway: they come first in the stream's order) reuses
    /// them instead of pinning new ones. In a fresh process that saved pinning three more
    /// 16 MiB buffers on the CLI's one-file path (docs/performance.md, "first use").
    fn release_held_on(&self, stream: &CudaStream) {
        let key = stream.cu_stream() as usize;
        let mine: Vec<Held> = {
            let mut held = lock(&self.in_flight);
            let (mine, rest) = std::mem::take(&mut *held)
                .into_iter()
                .partition(|h| h.stream == key);
            *held = rest;
            mine
        };
        let mut keep = Vec::new();
        for h in mine {
            // a failed wait leaves the buffers held: the copies' fate is unknown
            if h.event.synchronize().is_err() {
                keep.push(h);
            }
        }
        lock(&self.in_flight).extend(keep);
    }

    /// Copy host `src` into `dst` (same length) on `stream`. Returns once the host side is
    /// done (`src` may be reused at once); the device side completes in stream order.
    pub fn upload_into<T: Copy + Default + Send + Sync + 'static>(
        &self,
        src: &[T],
        dst: &DeviceBuffer<T>,
        stream: &std::sync::Arc<CudaStream>,
    ) -> Result<()> {
        check_same_len("upload", dst.len(), src.len())?;
        let bytes = std::mem::size_of_val(src);
        if bytes == 0 {
            return Ok(());
        }
        dst.record_stream(stream);
        self.bind()?;
        if bytes <= DIRECT_BYTES || self.is_capturing_here() {
            if self.is_capturing_here() {
                return Err(kiln_core::Error::Capture {
                    op: "upload".into(),
                    reason: "a host copy during capture would bake a host address into the graph; write inputs with Graph::write before Graph::launch".into(),
                });
            }
            // SAFETY: dst holds exactly src.len() elements of T (checked); the driver stages
            // pageable memory before returning, so `src` may go after the call.
            unsafe { result::memcpy_htod_async(dst.device_ptr(), src, stream.cu_stream()) }
                .map_err(|e| self.err("cuMemcpyHtoDAsync", e))?;
            dst.pool().note_htod(bytes as u64);
            return Ok(());
        }
        if is_pinned(src) {
            // page-locked already: one DMA at the link's speed, waited for, since `src` is
            // only borrowed for this call
            // SAFETY: dst holds src.len() elements (checked); `src` is pinned and outlives the
            // copy (the stream is synchronised before returning).
            unsafe { result::memcpy_htod_async(dst.device_ptr(), src, stream.cu_stream()) }
                .map_err(|e| self.err("cuMemcpyHtoDAsync", e))?;
            dst.pool().note_htod(bytes as u64);
            return self.synchronize_stream(stream, "upload");
        }
        // buffers held for copies that have completed go back to the pool first, to be reused
        lock(&self.in_flight).retain(|h| !h.event.is_complete());
        let chunk = (CHUNK_BYTES / std::mem::size_of::<T>()).max(1);
        let mut slots: Vec<(PinnedBuffer<T>, Option<CudaEvent>)> = Vec::with_capacity(SLOTS);
        for (i, piece) in src.chunks(chunk).enumerate() {
            if slots.len() < SLOTS {
                slots.push((self.pinned_pool().alloc::<T>(chunk)?, None));
            }
            let (stage, done) = &mut slots[i % SLOTS];
            if let Some(ev) = done.take() {
                ev.synchronize().map_err(|e| self.err("cuEventSynchronize", e))?;
            }
            par_copy(&mut stage[..piece.len()], piece);
            let off = (i * chunk * std::mem::size_of::<T>()) as u64;
            // SAFETY: the staging buffer is pinned and holds piece.len() elements; it is not
            // written again before the event recorded below has passed, and it is held in
            // the in-flight list past the last copy. dst holds src.len() elements (checked),
            // so [off, off + piece bytes) lies inside it.
            unsafe {
                result::memcpy_htod_async(dst.device_ptr() + off, &stage[..piece.len()], stream.cu_stream())
            }
            .map_err(|e| self.err("cuMemcpyHtoDAsync", e))?;
            dst.pool().note_htod(std::mem::size_of_val(piece) as u64);
            let ev = self.new_event(false)?;
            ev.record(stream).map_err(|e| self.err("cuEventRecord", e))?;
            *done = Some(ev);
        }
        let buffers: Vec<PinnedBuffer<T>> = slots.into_iter().map(|(b, _)| b).collect();
        self.hold_until_done(Box::new(buffers), stream)
    }

    /// Copy a pinned host buffer into `dst` (same length) on `stream`, without staging. The
    /// buffer is held (the `Arc`) until the copy has completed.
    pub fn upload_pinned_into<T: Copy + Send + Sync + 'static>(
        &self,
        src: std::sync::Arc<PinnedBuffer<T>>,
        dst: &DeviceBuffer<T>,
        stream: &std::sync::Arc<CudaStream>,
    ) -> Result<()> {
        check_same_len("upload", dst.len(), src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        dst.record_stream(stream);
        self.bind()?;
        // SAFETY: `src` is pinned and held in the in-flight list until the copy completes
        // (below); dst holds exactly src.len() elements (checked).
        unsafe { result::memcpy_htod_async(dst.device_ptr(), &src[..], stream.cu_stream()) }
            .map_err(|e| self.err("cuMemcpyHtoDAsync", e))?;
        dst.pool().note_htod(std::mem::size_of_val(&src[..]) as u64);
        self.hold_until_done(Box::new(src), stream)
    }

    /// Copy `src` into host `dst` (same length) on `stream` and wait for it. `op` names what
    /// the data came from, for an error raised by queued work (see
    /// [`Self::synchronize_stream`]).
    pub fn download_into<T: Copy + Default + Send + Sync + 'static>(
        &self,
        src: &DeviceBuffer<T>,
        dst: &mut [T],
        stream: &std::sync::Arc<CudaStream>,
        op: &str,
    ) -> Result<()> {
        check_same_len("download", src.len(), dst.len())?;
        let bytes = std::mem::size_of_val(dst);
        if bytes == 0 {
            return Ok(());
        }
        if self.is_capturing_here() {
            return Err(kiln_core::Error::Capture {
                op: "download".into(),
                reason: "a download must wait for the stream, which a capture cannot do; read results after Graph::launch".into(),
            });
        }
        src.record_stream(stream);
        self.bind()?;
        if bytes <= DIRECT_BYTES || is_pinned(dst) {
            // (a pinned destination takes the DMA directly, at the link's speed)
            // SAFETY: src holds dst.len() elements (checked); the synchronize below ends the
            // borrow of `dst` only after the copy has landed.
            unsafe { result::memcpy_dtoh_async(dst, src.device_ptr(), stream.cu_stream()) }
                .map_err(|e| self.err("cuMemcpyDtoHAsync", e))?;
            src.pool().note_dtoh(bytes as u64);
            return self.synchronize_stream(stream, op);
        }
        self.release_held_on(stream);
        let chunk = (CHUNK_BYTES / std::mem::size_of::<T>()).max(1);
        let n = dst.len();
        let chunks = n.div_ceil(chunk);
        let mut stages: Vec<PinnedBuffer<T>> = Vec::with_capacity(SLOTS.min(chunks));
        for _ in 0..SLOTS.min(chunks) {
            stages.push(self.pinned_pool().alloc::<T>(chunk)?);
        }
        let mut events: Vec<Option<CudaEvent>> = (0..stages.len()).map(|_| None).collect();
        let mut result = Ok(());
        let queue = |i: usize,
                     stages: &mut Vec<PinnedBuffer<T>>,
                     events: &mut Vec<Option<CudaEvent>>|
         -> Result<()> {
            let r = i * chunk..((i + 1) * chunk).min(n);
            let slot = i % stages.len();
            let off = (r.start * std::mem::size_of::<T>()) as u64;
            let stage = &mut stages[slot][..r.len()];
            // SAFETY: the staging buffer holds r.len() elements and nothing reads or writes it
            // until the event recorded below has been synchronised; [off, off + len) lies
            // inside src (r.end <= n = src.len()).
            unsafe { result::memcpy_dtoh_async(stage, src.device_ptr() + off, stream.cu_stream()) }
                .map_err(|e| self.err("cuMemcpyDtoHAsync", e))?;
            src.pool().note_dtoh(std::mem::size_of_val(stage) as u64);
            let ev = self.new_event(false)?;
            ev.record(stream).map_err(|e| self.err("cuEventRecord", e))?;
            events[slot] = Some(ev);
            Ok(())
        };
        let depth = stages.len();
        for i in 0..depth.min(chunks) {
            if let Err(e) = queue(i, &mut stages, &mut events) {
                result = Err(e);
                break;
            }
        }
        if result.is_ok() {
            for i in 0..chunks {
                let slot = i % depth;
                if let Some(ev) = events[slot].take() {
                    if let Err(e) = ev.synchronize() {
                        result = Err(self.err(op, e));
                        break;
                    }
                }
                let r = i * chunk..((i + 1) * chunk).min(n);
                par_copy(&mut dst[r.clone()], &stages[slot][..r.len()]);
                if i + depth < chunks {
                    if let Err(e) = queue(i + depth, &mut stages, &mut events) {
                        result = Err(e);
                        break;
                    }
                }
            }
        }
        // Copies still queued read into the staging buffers: wait for them before the buffers
        // go back to the pool, also after a failure.
        for ev in events.into_iter().flatten() {
            let _ = ev.synchronize();
        }
        result?;
        // An error raised by queued work after the last copy surfaces here, named.
        self.synchronize_stream(stream, op)
    }

    fn bind(&self) -> Result<()> {
        self.main_stream()
            .context()
            .bind_to_thread()
            .map_err(|e| self.err("cuCtxSetCurrent", e))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// `par_copy` over many pieces, with an odd tail, for a 4-byte type.
    #[test]
    fn par_copy_copies_every_piece() {
        let n = (PIECE_BYTES / 4) * 5 + 7;
        let src: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
        let mut dst = vec![0f32; n];
        par_copy(&mut dst, &src);
        assert!(dst.iter().zip(&src).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    /// Zeros at every size: below the populate bound, above it, and odd lengths that end
    /// inside a page; for the element sizes kiln has.
    #[test]
    fn host_vec_is_zeros_at_every_size() {
        for n in [0usize, 1, 1023, (HUGE_FROM / 4) + 3, (HUGE_FROM / 4) * 3 + 1] {
            let v = host_vec::<f32>(n);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|x| x.to_bits() == 0), "f32 n={n}");
        }
        let v = host_vec::<u8>(HUGE_FROM + 5);
        assert!(v.iter().all(|&x| x == 0));
        let v = host_vec::<u16>(HUGE_FROM / 2 + 7);
        assert!(v.iter().all(|&x| x == 0));
    }

    /// What the fill writes is what comes back; a fill that fails returns its error.
    #[test]
    fn host_vec_then_keeps_the_fill_or_its_error() {
        for n in [5usize, HUGE_FROM / 4 - 1, (HUGE_FROM / 4) * 5 + 3] {
            let bits = |i: usize| (i as u32).wrapping_mul(2_654_435_761) | 1;
            let v = host_vec_then::<f32, ()>(n, |out| {
                for (i, x) in out.iter_mut().enumerate().rev() {
                    *x = f32::from_bits(bits(i));
                }
                Ok(())
            })
            .unwrap();
            assert!(v.iter().enumerate().all(|(i, x)| x.to_bits() == bits(i)), "n={n}");
        }
        let r = host_vec_then::<f32, _>(HUGE_FROM / 2, |out| {
            out[0] = 1.0;
            Err("refused")
        });
        assert_eq!(r, Err("refused"));
    }

    /// Prints what making a 1 GiB result costs, and making and filling it by a copy on all
    /// cores (`--ignored --nocapture`).
    #[test]
    #[ignore = "bench: prints host_vec timings"]
    fn host_vec_timings() {
        let n = 1usize << 28;
        let src = vec![1.0f32; n];
        for _ in 0..4 {
            let t = std::time::Instant::now();
            let v = host_vec::<f32>(n);
            let alone = t.elapsed().as_secs_f64() * 1e3;
            drop(std::hint::black_box(v));
            let t = std::time::Instant::now();
            let v = host_vec_then::<f32, ()>(n, |out| {
                par_copy(out, &src);
                Ok(())
            });
            let filled = t.elapsed().as_secs_f64() * 1e3;
            drop(std::hint::black_box(v));
            println!("host_vec 1 GiB alone {alone:.1} ms; with a copy {filled:.1} ms");
        }
    }
}
