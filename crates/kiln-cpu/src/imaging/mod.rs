//! Image and volume filters on the CPU: `scipy.ndimage.correlate` semantics (no kernel
//! flip) for f32 data, with a separable fast path that reproduces scipy's per-axis
//! `correlate1d` passes. Sums run in `f64` and round once per pass, as scipy's do.
//!
//! The path choice ([`FilterPath`], [`path_2d`], [`path_3d`]) is kiln-core's, shared with the
//! CUDA backend; it is re-exported here so `kiln_cpu::imaging::{path_2d, FilterPath}` keep
//! working.

mod direct;
mod filter;
mod linear;
mod separable;

pub use filter::{filter2d, filter2d_batch, filter2d_channels, filter2d_into, filter3d, filter3d_into};
pub use kiln_core::imaging::{path_2d, path_3d, FilterPath};
pub use linear::{linear_into, linear_into_f64};
pub mod morphology;
pub mod rank;
pub mod rank_scipy;
