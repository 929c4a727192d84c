//! Image and volume filters on the CPU: `scipy.ndimage.correlate` semantics (no kernel
//! flip) for f32 data, with a separable fast path that reproduces scipy's per-axis
//! `correlate1d` passes. Sums run in `f64` and round once per pass, as scipy's do.

mod direct;
mod filter;
mod separable;

pub use filter::{
    filter2d, filter2d_batch, filter2d_channels, filter2d_into, filter3d, filter3d_into, path_2d, path_3d,
    FilterPath,
};
