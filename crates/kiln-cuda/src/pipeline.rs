//! Overlapped host -> device -> host pipelines: a large host input is split into chunks that
//! rotate over a small pool of streams, so the copy in of chunk i+1, the kernel of chunk i and
//! the copy out of chunk i-1 run at the same time (PCIe is full duplex; the kernel is ~40x
//! faster than either copy, so the copies bound the pipeline).
//!
//! Two entry points: from pinned host buffers (the DMA engines read and write the caller's
//! memory directly: the fast path), and from ordinary slices, which are staged through
//! pinned buffers with multi-threaded copies (bounded by host memcpy bandwidth).
#![allow(unsafe_code)]

use crate::backend::{cuda_err, CudaBackend};
use crate::ops::MapOn;
use crate::pool::{DeviceBuffer, PinnedBuffer};
use crate::transfer::par_copy;
use cudarc::driver::{result, CudaEvent, CudaStream};
use kiln_core::backend::{check_same_len, Element, MapOp};
use kiln_core::{Error, Result};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// How to split the work.
#[derive(Clone, Copy, Debug)]
pub struct PipelineOptions {
    /// Elements per chunk (default 8 Mi = 32 MiB of f32: long enough that a copy runs at
    /// full speed, short enough that filling and draining the pipe costs little).
    pub chunk_elems: usize,
    /// Streams (default 3: triple buffering).
    pub streams: usize,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            chunk_elems: 8 << 20,
            streams: 3,
        }
    }
}

/// What a pipelined run achieved.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct PipelineReport {
    /// Elements processed.
    pub elements: usize,
    /// Chunks.
    pub chunks: usize,
    /// Streams used.
    pub streams: usize,
    /// Elements per chunk.
    pub chunk_elems: usize,
    /// Whether the input went through pinned staging buffers (pageable host memory).
    pub staged: bool,
    /// Wall seconds, first copy to last byte back.
    pub seconds: f64,
    /// Input bytes per second, end to end, in GB/s.
    pub gbps: f64,
}

struct Slot<T> {
    stream: Arc<CudaStream>,
    dx: DeviceBuffer<T>,
    dy: DeviceBuffer<T>,
    stage_in: Option<PinnedBuffer<T>>,
    stage_out: Option<PinnedBuffer<T>>,
    pending: Option<(Range<usize>, CudaEvent)>,
}

impl CudaBackend {
    /// `out = op(x)` for pinned host buffers, pipelined; bit-identical to the one-shot op.
    pub fn map_pipelined_pinned<T: Element + Default>(
        &self,
        op: MapOp,
        x: &PinnedBuffer<T>,
        out: &mut PinnedBuffer<T>,
        opts: PipelineOptions,
    ) -> Result<PipelineReport> {
        check_same_len(op.name(), x.len(), out.len())?;
        self.pipeline(op, x, out, opts, false)
    }

    /// `out = op(x)` for ordinary host slices, pipelined through pinned staging buffers.
    pub fn map_pipelined<T: Element + Default>(
        &self,
        op: MapOp,
        x: &[T],
        out: &mut [T],
        opts: PipelineOptions,
    ) -> Result<PipelineReport> {
        check_same_len(op.name(), x.len(), out.len())?;
        self.pipeline(op, x, out, opts, true)
    }

    fn pipeline<T: Element + Default>(
        &self,
        op: MapOp,
        x: &[T],
        out: &mut [T],
        opts: PipelineOptions,
        staged: bool,
    ) -> Result<PipelineReport> {
        op.validate()?;
        if opts.chunk_elems == 0 || opts.streams == 0 || opts.streams > 16 {
            return Err(Error::invalid(
                "pipeline",
                format!(
                    "chunk_elems must be >= 1 and streams in 1..=16 (got {} and {})",
                    opts.chunk_elems, opts.streams
                ),
            ));
        }
        let n = x.len();
        let chunk = opts.chunk_elems.min(n.max(1));
        let nchunks = n.div_ceil(chunk);
        let nslots = opts.streams.min(nchunks.max(1));
        let dev = self.name();
        let ctx = self.stream().context().clone();
        let t0 = Instant::now();
        let mut slots = Vec::with_capacity(nslots);
        for _ in 0..nslots {
            let stream = ctx
                .new_stream()
                .map_err(|e| cuda_err("cuStreamCreate", &dev, e))?;
            slots.push(Slot {
                dx: self.pool().alloc(&stream, chunk)?,
                dy: self.pool().alloc(&stream, chunk)?,
                stage_in: if staged {
                    Some(self.pinned_pool().alloc(chunk)?)
                } else {
                    None
                },
                stage_out: if staged {
                    Some(self.pinned_pool().alloc(chunk)?)
                } else {
                    None
                },
                stream,
                pending: None,
            });
        }
        let drain = |slot: &mut Slot<T>, out: &mut [T]| -> Result<()> {
            if let Some((r, ev)) = slot.pending.take() {
                ev.synchronize()
                    .map_err(|e| cuda_err("cuEventSynchronize", &dev, e))?;
                if let Some(so) = &slot.stage_out {
                    par_copy(&mut out[r.clone()], &so[..r.len()]);
                }
            }
            Ok(())
        };
        let mut failure = None;
        for i in 0..nchunks {
            let r = i * chunk..((i + 1) * chunk).min(n);
            let len = r.len();
            let slot = &mut slots[i % nslots];
            // The slot's last chunk: wait for it, then copy it out and this chunk in, one
            // after the other: each copy uses every core. (Both at once, rayon::join, was
            // measured on the GPU host on 2026-12-05: 2^28 f32 sigmoid host to host 86.8 ms
            // one after the other, 132.4 ms at once.)
            let prev = slot.pending.take();
            if let Some((_, ev)) = &prev {
                if let Err(e) = ev
                    .synchronize()
                    .map_err(|e| cuda_err("cuEventSynchronize", &dev, e))
                {
                    failure = Some(e);
                    break;
                }
            }
            if let (Some((pr, _)), Some(so)) = (&prev, &slot.stage_out) {
                par_copy(&mut out[pr.clone()], &so[..pr.len()]);
            }
            if let Some(si) = &mut slot.stage_in {
                par_copy(&mut si[..len], &x[r.clone()]);
            }
            let step = (|| -> Result<()> {
                let src: &[T] = match &slot.stage_in {
                    Some(si) => &si[..len],
                    None => &x[r.clone()],
                };
                // SAFETY: `src` is pinned host memory of `len` elements (the caller's pinned
                // buffer or this slot's staging buffer), valid until this slot's event is
                // synchronised (drain) before it is rewritten or released; dx holds
                // chunk >= len elements.
                unsafe { result::memcpy_htod_async(slot.dx.device_ptr(), src, slot.stream.cu_stream()) }
                    .map_err(|e| cuda_err("cuMemcpyHtoDAsync", &dev, e))?;
                self.pool().note_htod(std::mem::size_of_val(src) as u64);
                self.run(MapOn {
                    stream: &slot.stream,
                    op,
                    x: &slot.dx,
                    out: &mut slot.dy,
                    n: len,
                })?;
                let dst: &mut [T] = match &mut slot.stage_out {
                    Some(so) => &mut so[..len],
                    None => &mut out[r.clone()],
                };
                // SAFETY: `dst` is pinned host memory of `len` elements that nothing else
                // touches until this slot's event has been synchronised (drain, or the final
                // loop below); dy holds chunk >= len elements.
                unsafe { result::memcpy_dtoh_async(dst, slot.dy.device_ptr(), slot.stream.cu_stream()) }
                    .map_err(|e| cuda_err("cuMemcpyDtoHAsync", &dev, e))?;
                self.pool().note_dtoh((len * std::mem::size_of::<T>()) as u64);
                let ev = ctx
                    .new_event(None)
                    .map_err(|e| cuda_err("cuEventCreate", &dev, e))?;
                ev.record(&slot.stream)
                    .map_err(|e| cuda_err("cuEventRecord", &dev, e))?;
                slot.pending = Some((r.clone(), ev));
                Ok(())
            })();
            if let Err(e) = step {
                failure = Some(e);
                break;
            }
        }
        // Always wait for every slot, also after a failure: copies in flight still reference
        // the host buffers.
        for slot in &mut slots {
            let _ = slot.stream.synchronize();
            if let Err(e) = drain(slot, out) {
                failure.get_or_insert(e);
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        let seconds = t0.elapsed().as_secs_f64();
        Ok(PipelineReport {
            elements: n,
            chunks: nchunks,
            streams: nslots,
            chunk_elems: chunk,
            staged,
            seconds,
            gbps: std::mem::size_of_val(x) as f64 / seconds / 1e9,
        })
    }
}
