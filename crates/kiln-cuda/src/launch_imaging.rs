//! The imaging ops ([`crate::op::Op`]) for `kernels/filter2d.cu`, `separable.cu`,
//! `filter3d.cu` (with `imaging.cuh`), `ndimage.cu`, `interp.cu`, `label.cu`, `distance.cu`, `morph.cu`,
//! `rank.cu` and `kernels/transpose.cu`. Every op validates lengths, shapes and the index ranges
//! the kernels assume (32-bit axis indices, `H*W < 2^31`, grid limits) and returns
//! `InvalidArgument` instead of launching out of bounds. Launch shapes are documented at
//! the top of each `.cu` file and on each op.
//!
//! This file holds what the ops share (weights by value, boundary-mode arguments, shape
//! checks); the ops are in `filter2d` (direct 2-D), `separable` (1-D passes and the fused
//! 2-D pair), `filter3d` (direct 3-D), `ndimage` (scipy's linear filters; `ndimage_exact`
//! their double arithmetic, bit for bit the CPU's), `interp`
//! (resampling and the spline prefilter), `label`, `transpose`, and the storage
//! launchers of `rank` and `morph`.
//!
//! Path selection is the caller's (the facade resolves it with
//! `kiln_cpu::imaging::path_2d` / `path_3d`, so CPU and GPU always take the same path):
//! `sep = Some(..)` runs the 1-D passes in the factor's `pass_order`, each rounded to an
//! f32 buffer as the CPU does, `None` runs the direct sum.

mod distance;
mod filter2d;
mod filter3d;
mod interp;
mod label;
mod morph;
mod ndimage;
mod ndimage_exact;
mod rank;
mod separable;
mod transpose;

pub use distance::{Edt, EdtRaw, EDT_MAX_AXES};
pub use filter2d::Filter2d;
pub use filter3d::Filter3d;
pub use interp::{interp_args_bytes, spline_args_bytes, Interp, InterpSpec, Resample, SplineFilter1d};
pub use label::{Label, LabelInput, LabelRaw};
pub use ndimage::{NdimageLinear, NdimageLinearData};
pub use ndimage_exact::NdimageLinearExact;
pub use rank::rank_algorithm;
pub use separable::{Filter1d, SeparableFilter};
pub use transpose::Transpose;

use crate::kernels::decl;
use crate::launch::KernelStruct;
use cudarc::driver::DeviceRepr;
use kiln_core::imaging::BoundaryMode;
use kiln_core::{Error, Result};

/// 2-D weights by value (the kernel-parameter constant bank): up to 31×31.
#[repr(C)]
#[derive(Clone, Copy)]
struct W2([f32; 961]);
/// 1-D weights by value: up to 31 taps.
#[repr(C)]
#[derive(Clone, Copy)]
struct W1([f32; 32]);
/// 3-D weights by value: up to 7×7×7.
#[repr(C)]
#[derive(Clone, Copy)]
struct W3([f32; 343]);

// SAFETY: plain `#[repr(C)]` arrays of f32 with the layout of the CUDA structs `W2`, `W1`
// and `W3` in imaging.cuh (float arrays of the same length, 4-byte aligned).
#[allow(unsafe_code)]
unsafe impl DeviceRepr for W2 {}
// SAFETY: as above.
#[allow(unsafe_code)]
unsafe impl DeviceRepr for W1 {}
// SAFETY: as above.
#[allow(unsafe_code)]
unsafe impl DeviceRepr for W3 {}
impl KernelStruct for W2 {
    const C_NAME: &'static str = "W2";
}
impl KernelStruct for W1 {
    const C_NAME: &'static str = "W1";
}
impl KernelStruct for W3 {
    const C_NAME: &'static str = "W3";
}
const _: () = assert!(std::mem::size_of::<W1>() == decl::W1.size_bytes());
const _: () = assert!(std::mem::size_of::<W2>() == decl::W2.size_bytes());
const _: () = assert!(std::mem::size_of::<W3>() == decl::W3.size_bytes());

/// Largest axis length the kernels index with 32-bit ints (leaves room for the halo).
const MAX_AXIS: usize = (i32::MAX as usize) - 64;
/// CUDA's limit on grid y and z.
const MAX_GRID_YZ: usize = 65535;
const BLOCK: (u32, u32, u32) = (32, 8, 1);

/// The mode code imaging.cuh's `kiln_map` switches on, and the cval.
fn mode_args(mode: BoundaryMode) -> (i32, f32) {
    match mode {
        BoundaryMode::Constant(c) => (0, c as f32),
        BoundaryMode::Nearest => (1, 0.0),
        BoundaryMode::Reflect => (2, 0.0),
        BoundaryMode::Mirror => (3, 0.0),
        BoundaryMode::Wrap => (4, 0.0),
    }
}

/// A weight as the GPU uses it: `f32`, and 0 where the CPU drops the tap (`|w| <= DBL_EPSILON`).
fn w32(w: f64) -> f32 {
    if w.abs() <= f64::EPSILON {
        0.0
    } else {
        w as f32
    }
}

/// Checks a contiguous `(d, h, w)` shape against both buffers and the kernels' index ranges.
fn check_shape(op: &str, shape: [usize; 3], src: usize, dst: usize) -> Result<()> {
    if shape.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("the input is empty (shape {shape:?})"),
        ));
    }
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let Some(n) = n else {
        return Err(Error::invalid(op, format!("shape {shape:?} overflows")));
    };
    for (what, len) in [("input", src), ("output", dst)] {
        if len != n {
            return Err(Error::ShapeMismatch {
                op: format!("{op} {what} length"),
                expected: vec![n],
                got: vec![len],
            });
        }
    }
    if shape.iter().any(|&d| d > MAX_AXIS) || shape[1] * shape[2] > MAX_AXIS || shape[0] * shape[1] > MAX_AXIS
    {
        return Err(Error::invalid(
            op,
            format!("shape {shape:?}: the GPU kernels need every axis, H*W and D*H below 2^31"),
        ));
    }
    Ok(())
}

/// A grid's y or z extent: `n` clamped to 1..=65535 (the kernels grid-stride).
fn grid(n: usize) -> u32 {
    n.clamp(1, MAX_GRID_YZ) as u32
}
