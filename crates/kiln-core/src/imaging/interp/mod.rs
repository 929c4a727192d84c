//! scipy.ndimage's interpolation family on the CPU: the B-spline prefilter
//! (`spline_filter1d`), resampling at arbitrary coordinates (`map_coordinates`,
//! `geometric_transform`), through an affine map (`affine_transform`, `rotate`) and along
//! the axes separately (`zoom`, `shift`), as scipy 1.17 computes them.
//!
//! Design: a port of scipy's `ni_splines.c` and `ni_interpolation.c` (`NI_SplineFilter1D`,
//! `NI_GeometricTransform`, `NI_ZoomShift`), operation for operation, so that results are
//! scipy's bit for bit:
//! - [`spline`]: the filter poles, the causal/anticausal initialisation per mode (including
//!   scipy 1.17's in-place accumulation in the reflect initialisation) and the interpolation
//!   weights of orders 0–5;
//! - [`boundary`]: scipy's `map_coordinate`, which folds a coordinate outside the input back
//!   in per mode (and the spline boundary mode used for the taps at an edge);
//! - [`transform`]: the resampling loops. Each output value is
//!   `t = Σ_taps ((v · w₀) · w₁) · …` summed in scipy's tap order (last axis fastest), the
//!   weights multiplied in axis order, starting from `0.0`, so the rounding is scipy's.
//!
//! Input values are read as `f64` (as scipy's C code reads every dtype); results are `f64`
//! values `t` that [`store_value`] rounds and clips the way scipy stores them into an integer
//! output. What scipy does in Python (argument checks, the prepadding for `nearest` and
//! `grid-constant`, complex splitting, output allocation) is the caller's.
//!
//! Parallelism: output points (and filter lines) are split into fixed chunks processed with
//! rayon; each value depends on its own point only, so results do not depend on the number
//! of threads.

pub mod boundary;
pub mod spline;
#[cfg(test)]
mod tests;
pub mod transform;

pub use boundary::map_coordinate;
pub use spline::{filter_poles, spline_filter1d, spline_weights};
pub use transform::{
    geometric_transform, geometric_transform_into, zoom_shift, zoom_shift_into, Mapping, OutValue,
};

use crate::error::{Error, Result};

/// scipy's `NI_ExtendMode` codes as `_ni_support._extend_mode_to_code` gives them for the
/// interpolation functions (`reflect` and `grid-mirror` share a code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterpMode {
    /// `nearest` (code 0): the edge value repeated.
    Nearest,
    /// `wrap` (code 1): scipy's periodic extension of period `n - 1`.
    Wrap,
    /// `reflect` / `grid-mirror` (code 2): half-sample symmetric.
    Reflect,
    /// `mirror` (code 3): whole-sample symmetric.
    Mirror,
    /// `constant` (code 4): `cval` outside `[0, n - 1]`.
    Constant,
    /// `grid-wrap` (code 5): periodic with period `n`.
    GridWrap,
    /// `grid-constant` (code 6): taps outside the input read `cval`.
    GridConstant,
}

impl InterpMode {
    /// The mode of scipy's integer code (0–6).
    pub fn from_code(code: i64) -> Result<Self> {
        Ok(match code {
            0 => Self::Nearest,
            1 => Self::Wrap,
            2 => Self::Reflect,
            3 => Self::Mirror,
            4 => Self::Constant,
            5 => Self::GridWrap,
            6 => Self::GridConstant,
            _ => {
                return Err(Error::InvalidArgument {
                    op: "interpolation".into(),
                    reason: format!("boundary mode code {code} (0..=6)"),
                })
            }
        })
    }

    /// The mode scipy uses for the taps of a spline at an edge
    /// (`_get_spline_boundary_mode`): `constant` and `wrap` have no exact prefilter and
    /// use mirror extension.
    pub fn spline_mode(self) -> Self {
        match self {
            Self::Constant | Self::Wrap => Self::Mirror,
            m => m,
        }
    }
}

/// How an output value is stored, as scipy's `CASE_INTERP_OUT*` macros do it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Store {
    /// A float output: the value as it is (the caller's cast rounds to `f32` if needed).
    Float,
    /// An unsigned integer output with this maximum: `t + 0.5` for `t > 0`, else 0, clipped
    /// to `[0, max]` (the caller's cast then truncates).
    Unsigned(f64),
    /// A signed integer output with these bounds: `t ± 0.5` away from zero, clipped.
    Signed(f64, f64),
    /// A bool output: scipy's C cast of the double to `unsigned char` (truncation, low byte).
    Bool,
}

/// `t` as scipy stores it into an output of kind `s` (before the final cast to the output
/// type, which truncates toward zero).
#[inline]
pub fn store_value(t: f64, s: Store) -> f64 {
    match s {
        Store::Float => t,
        Store::Unsigned(max) => {
            let t = if t > 0.0 { t + 0.5 } else { 0.0 };
            let t = if t > max { max } else { t };
            if t < 0.0 {
                0.0
            } else {
                t
            }
        }
        Store::Signed(min, max) => {
            let t = if t > 0.0 { t + 0.5 } else { t - 0.5 };
            let t = if t > max { max } else { t };
            if t < min {
                min
            } else {
                t
            }
        }
        Store::Bool => f64::from((t as i32 & 0xff) as u8),
    }
}

/// `x.floor()`, without a libm call where the value fits an `i64` (x86-64's baseline has no
/// rounding instruction, so `floor` is a function call in the per-point loops); zeros and
/// values outside that range take `floor` itself, so the result is the same to the bit.
#[inline]
pub(crate) fn floor(x: f64) -> f64 {
    if x != 0.0 && x.abs() < 4.5e15 {
        let t = x as i64 as f64;
        if t > x {
            t - 1.0
        } else {
            t
        }
    } else {
        x.floor()
    }
}

/// The spline order, checked (scipy accepts 0..=5).
pub(crate) fn check_order(op: &str, order: usize) -> Result<()> {
    if order > 5 {
        return Err(Error::InvalidArgument {
            op: op.into(),
            reason: format!("spline order {order} not supported (0..=5)"),
        });
    }
    Ok(())
}
