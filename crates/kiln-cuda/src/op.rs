//! Ops as values.
//!
//! An op is a small struct that holds what one operation needs (its buffers, shape and
//! parameters), checks them, chooses its kernel and launch shape, and launches through the
//! one launch path ([`CudaBackend::launch`](crate::CudaBackend)) on the backend's current
//! stream. [`CudaBackend`] keeps the context, streams, pools and module cache; it runs any op
//! with [`CudaBackend::run`], so a caller names the op and its arguments in one place:
//!
//! ```ignore
//! cuda.run(Filter1d { src: &x, dst: &mut y, shape, axis: 2, weights: &w, mode })?;
//! ```
//!
//! An op takes itself by value, so it may hold `&mut` output buffers for exactly one run.

use crate::CudaBackend;
use kiln_core::Result;

/// One GPU operation of kiln's own kernels, run on a backend's current stream.
pub trait Op {
    /// What a run returns: often `()` (the op wrote its output buffers), or a value read
    /// back (prices, counts).
    type Output;

    /// Check the arguments, choose the kernel and its launch shape, and launch on `cuda`.
    fn run(self, cuda: &CudaBackend) -> Result<Self::Output>;
}

impl CudaBackend {
    /// Run `op` on this backend's current stream.
    pub fn run<O: Op>(&self, op: O) -> Result<O::Output> {
        op.run(self)
    }
}
