//! User streams and events.
//!
//! A backend keeps a pool of [`USER_STREAMS`] non-blocking streams, created on first use and
//! handed out round-robin by [`CudaBackend::new_stream`] (PyTorch's stream pool: streams are
//! cheap to use but not to create, and a program that asks for thousands gets the pool's 32
//! in turn). [`CudaBackend::with_stream`] makes one of them this thread's current stream for
//! the length of a closure: every op the closure enqueues on this backend, and every buffer
//! it allocates, goes to that stream (see [`CudaBackend::stream`]). Ordering between streams
//! is the caller's (or the tensor layer's) business: [`CudaBackend::wait_for`] makes one
//! stream wait for the work queued so far on another, without blocking the host.

use crate::backend::CudaBackend;
use cudarc::driver::{sys, CudaEvent, CudaStream};
use kiln_core::{Error, Result};
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Streams in a backend's user pool.
pub const USER_STREAMS: usize = 32;

thread_local! {
    /// `(backend address, slot)` of this thread's current user stream, or `(0, 0)`.
    pub(crate) static CURRENT: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// Restores the previous current stream when a [`CudaBackend::with_stream`] closure ends,
/// also when it panics.
struct Restore((usize, usize));

impl Drop for Restore {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

impl CudaBackend {
    /// The next stream of the user pool (round-robin over [`USER_STREAMS`]), created on first
    /// use; returns its slot for [`Self::with_stream`] and [`Self::user_stream`].
    pub fn new_stream(&self) -> Result<usize> {
        let slot = self.next_stream.fetch_add(1, Ordering::Relaxed) % USER_STREAMS;
        self.user_stream(slot)?;
        Ok(slot)
    }

    /// The user stream in `slot`, created if it does not exist yet.
    pub fn user_stream(&self, slot: usize) -> Result<&Arc<CudaStream>> {
        let cell = self.user_streams.get(slot).ok_or_else(|| {
            Error::invalid(
                "stream",
                format!("slot {slot} is outside the pool of {USER_STREAMS} streams"),
            )
        })?;
        if let Some(s) = cell.get() {
            return Ok(s);
        }
        let s = self
            .main_stream()
            .context()
            .new_stream()
            .map_err(|e| self.err("cuStreamCreate", e))?;
        // Two threads may race to create the same slot: the loser's stream is dropped unused.
        let _ = cell.set(s);
        cell.get()
            .ok_or_else(|| Error::invalid("stream", "stream slot emptied while in use"))
    }

    /// Run `f` with the user stream in `slot` as this thread's current stream on this
    /// backend (nesting restores the outer stream; a capture in progress takes precedence).
    pub fn with_stream<R>(&self, slot: usize, f: impl FnOnce() -> R) -> Result<R> {
        self.user_stream(slot)?;
        let prev = CURRENT.with(|c| c.replace((self.id(), slot)));
        let _restore = Restore(prev);
        Ok(f())
    }

    /// A new event; `timing` events can measure elapsed time, others are cheaper to record
    /// and wait on.
    pub fn new_event(&self, timing: bool) -> Result<CudaEvent> {
        let flags = if timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        self.main_stream()
            .context()
            .new_event(Some(flags))
            .map_err(|e| self.err("cuEventCreate", e))
    }

    /// Make `waiter` wait (on the device, the host goes on) for the work queued so far on
    /// `on`. Nothing happens when they are the same stream.
    pub fn wait_for(&self, waiter: &CudaStream, on: &CudaStream) -> Result<()> {
        if waiter.cu_stream() == on.cu_stream() {
            return Ok(());
        }
        let ev = self.new_event(false)?;
        ev.record(on).map_err(|e| self.err("cuEventRecord", e))?;
        waiter.wait(&ev).map_err(|e| self.err("cuStreamWaitEvent", e))
    }

    /// Block the host until all work on the device (every stream) is done.
    pub fn synchronize_device(&self) -> Result<()> {
        if self.is_capturing_here() {
            return Err(Error::Capture {
                op: "synchronize".into(),
                reason: "a capture records work without running it, so there is nothing to wait for; read results after Graph::launch".into(),
            });
        }
        self.main_stream()
            .context()
            .synchronize()
            .map_err(|e| self.err("cuCtxSynchronize", e))
    }

    /// Block the host until `stream`'s queued work is done. An error raised by that work
    /// (an illegal address in a kernel, say) surfaces here as [`Error::Cuda`] with `op` in
    /// its name, so the user sees which queued operation the failure came after.
    pub fn synchronize_stream(&self, stream: &CudaStream, op: &str) -> Result<()> {
        if self.is_capturing_here() {
            return Err(Error::Capture {
                op: op.into(),
                reason: "a capture records work without running it, so there is nothing to wait for; read results after Graph::launch".into(),
            });
        }
        stream.synchronize().map_err(|e| self.err(op, e))
    }
}
