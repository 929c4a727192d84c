//! Explicit streams and events.
//!
//! [`Runtime::stream`] hands out a stream of the device's pool (32 streams, round-robin,
//! as PyTorch's pool); [`Runtime::with_stream`] makes it the calling thread's current
//! stream for a closure, so every tensor op and allocation inside runs there. Tensors carry
//! their own ordering (a use on another stream waits on the writer's event), so mixing
//! streams is safe without manual synchronisation; events are for timing and for ordering
//! work that tensors do not see. On the CPU, ops run as they are called: streams are
//! no-ops and events hold host timestamps.
//!
//! ```no_run
//! # fn main() -> kiln::Result<()> {
//! let rt = kiln::Runtime::new(kiln::DeviceRequest::Auto, &kiln::Config::load(None)?)?;
//! let x = rt.tensor(&vec![1.0f32; 1 << 20], &[1024, 1024])?;
//! let s = rt.stream()?;
//! let start = rt.record_event()?;
//! let y = rt.with_stream(&s, || x.sigmoid())??; // queued on `s`, after x's upload
//! let end = rt.record_event()?;
//! let v: Vec<f32> = y.to_vec()?; // waits for `s`
//! println!("{:.3} ms", start.elapsed_ms(&end)?);
//! # Ok(()) }
//! ```

use crate::{Engine, Runtime};
use kiln_core::{Device, Error, Result};
use std::time::Instant;

/// A stream of the runtime's device (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    device: Device,
    /// The slot in the device's stream pool (`None` on the CPU).
    slot: Option<usize>,
}

impl Stream {
    /// The device it belongs to.
    pub fn device(&self) -> Device {
        self.device
    }
}

/// A point in a stream's work, for timing and ordering.
#[derive(Debug)]
pub struct Event {
    inner: EventKind,
}

#[derive(Debug)]
enum EventKind {
    Host(Instant),
    Cuda(kiln_cuda::CudaEvent, Device),
}

impl Runtime {
    /// A stream from the device's pool (on the CPU, a stream that runs ops as called).
    pub fn stream(&self) -> Result<Stream> {
        Ok(Stream {
            device: self.device(),
            slot: match self.engine() {
                Engine::Cpu(_) => None,
                Engine::Cuda(c) => Some(c.new_stream()?),
            },
        })
    }

    /// Run `f` with `s` as this thread's current stream: the ops it calls are queued there.
    pub fn with_stream<R>(&self, s: &Stream, f: impl FnOnce() -> R) -> Result<R> {
        if s.device != self.device() {
            return Err(Error::invalid(
                "with_stream",
                format!(
                    "the stream belongs to {}, the runtime to {}",
                    s.device,
                    self.device()
                ),
            ));
        }
        match (self.engine(), s.slot) {
            (Engine::Cuda(c), Some(slot)) => c.with_stream(slot, f),
            _ => Ok(f()),
        }
    }

    /// Record an event on the current stream (a host timestamp on the CPU).
    pub fn record_event(&self) -> Result<Event> {
        let inner = match self.engine() {
            Engine::Cpu(_) => EventKind::Host(Instant::now()),
            Engine::Cuda(c) => {
                let ev = c.new_event(true)?;
                ev.record(c.stream())
                    .map_err(|e| kiln_cuda::cuda_err("cuEventRecord", &self.device_name(), e))?;
                EventKind::Cuda(ev, self.device())
            }
        };
        Ok(Event { inner })
    }

    /// Make the current stream wait (on the device; the host goes on) for `ev`.
    pub fn wait_event(&self, ev: &Event) -> Result<()> {
        match (self.engine(), &ev.inner) {
            (Engine::Cuda(c), EventKind::Cuda(e, d)) if *d == self.device() => c
                .stream()
                .wait(e)
                .map_err(|err| kiln_cuda::cuda_err("cuStreamWaitEvent", &self.device_name(), err)),
            (_, EventKind::Host(_)) => Ok(()),
            _ => Err(Error::invalid(
                "wait_event",
                "the event belongs to another device",
            )),
        }
    }

    /// Wait until every stream of the device is idle (a no-op on the CPU); an error raised
    /// by queued work surfaces here.
    pub fn synchronize(&self) -> Result<()> {
        match self.engine() {
            Engine::Cpu(_) => Ok(()),
            Engine::Cuda(c) => c.synchronize_device(),
        }
    }
}

impl Event {
    /// Milliseconds from `self` to `end` (waits for both).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f64> {
        match (&self.inner, &end.inner) {
            (EventKind::Host(a), EventKind::Host(b)) => {
                Ok(b.saturating_duration_since(*a).as_secs_f64() * 1e3)
            }
            (EventKind::Cuda(a, d), EventKind::Cuda(b, _)) => a
                .elapsed_ms(b)
                .map(f64::from)
                .map_err(|e| kiln_cuda::cuda_err("cuEventElapsedTime", &d.to_string(), e)),
            _ => Err(Error::invalid(
                "elapsed_ms",
                "the events belong to different devices",
            )),
        }
    }

    /// Wait on the host until the work before the event is done.
    pub fn synchronize(&self) -> Result<()> {
        match &self.inner {
            EventKind::Host(_) => Ok(()),
            EventKind::Cuda(e, d) => e
                .synchronize()
                .map_err(|err| kiln_cuda::cuda_err("cuEventSynchronize", &d.to_string(), err)),
        }
    }
}
