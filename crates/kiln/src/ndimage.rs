//! scipy.ndimage's linear filters on tensors and host slices: `correlate`, `convolve`,
//! `correlate1d`, `convolve1d`, `gaussian_filter` (any sigma, order 0-2, truncate, radius),
//! `gaussian_laplace`, `gaussian_gradient_magnitude`, `uniform_filter`, `sobel`,
//! `prewitt`, `laplace`: build the plan with the builders of
//! [`kiln_core::imaging::linear`] (re-exported here) and run it with
//! [`Tensor::ndimage`] or [`Runtime::ndimage`].
//!
//! A tensor of shape `(h, w)` is one image, `(d, h, w)` a volume or a batch: a plan built
//! for 2-D data filters axes 1 and 2 of a 3-D tensor, i.e. each plane of a batch (scipy's
//! `axes=(1, 2)`).
//!
//! f32 and f64 tensors run scipy's arithmetic for float32 and float64 data on both devices,
//! bit for bit the same: sums in f64 with `correlate1d`'s symmetric / antisymmetric /
//! general formulas and `correlate`'s order, each pass stored in the tensor's type, the
//! terms of laplace and gradient magnitude combined in it (the GPU runs ndimage.cu's exact
//! kernels, `kiln_cuda`'s `NdimageLinearExact`); the uniform filters keep scipy's running
//! sum along each line.
//!
//! 8- and 16-bit tensors stay 8/16-bit on the device: the generic kernels read them as
//! stored and write the result rounded half away from zero and clamped (the CLI's rule,
//! `kiln_core::storage::cast_f64`), f32 arithmetic in between; plans on the fixed-size f32
//! kernels convert on the device at both ends. The CPU sums those in f64 and the GPU in
//! f32 with fma: [`ndimage_tolerance`] bounds the difference (and the f32 device op
//! `NdimageLinear`'s, the fast path of the benchmarks).
//!
//! Interpolation (`zoom`, `shift`, `affine_transform`, `map_coordinates`:
//! [`Tensor::resample`]; the spline prefilter: [`Tensor::spline_filter1d`]; the `interp`
//! submodule; scipy's Python-level functions `zoom`, `shift`, `affine_transform`, `rotate`,
//! `spline_filter[1d]` with their parameters: [`scipy_interp`]): written to be bitwise the same on both devices (the GPU path has not yet run
//! on a GPU; see docs/ndimage.md).

mod interp;
pub mod scipy_interp;

pub use interp::{InterpMode, InterpSpec, Resample};

use crate::tensor::{on_storage, Tensor};
use crate::Runtime;
pub use kiln_core::imaging::linear::*;
use kiln_core::storage::BackendStorage;
use kiln_core::{DType, Error, Result};

/// An absolute bound on |GPU - CPU| for `f` on data of largest magnitude `max_in`: the
/// bound of [`crate::imaging::filter_tolerance`] with the plan's taps and gain, doubled per
/// extra term, and for a magnitude taken through the square root (a relative bound on the
/// sum of squares becomes half of it on its root, plus one ulp).
pub fn ndimage_tolerance(f: &LinearFilter, max_in: f64) -> f64 {
    let base = crate::imaging::filter_tolerance(f.taps(), f.gain(), max_in);
    let terms = f.terms.len() as f64;
    match f.combine {
        Combine::Magnitude => {
            2.0 * terms * base + 4.0 * f32::EPSILON as f64 * f.gain() * max_in * terms.sqrt()
        }
        _ => terms * base * 1.5,
    }
}

impl Tensor {
    /// Runs the linear filter `f` (see the module docs for shapes and dtypes); f32, f64, u8
    /// and u16 tensors, the result in the input's dtype.
    pub fn ndimage(&self, f: &LinearFilter) -> Result<Tensor> {
        let shape: [usize; 3] = match *self.shape() {
            [h, w] => [1, h, w],
            [d, h, w] => [d, h, w],
            _ => {
                return Err(Error::invalid(
                    &f.name,
                    format!(
                        "expected a 2-D (h, w) or 3-D (d, h, w) tensor, got shape {:?}",
                        self.shape()
                    ),
                ))
            }
        };
        if shape.contains(&0) {
            return Err(Error::invalid(
                &f.name,
                format!("the input is empty (shape {:?})", self.shape()),
            ));
        }
        if self.rank() == 2 && uses_axis0(f) {
            return Err(Error::invalid(
                &f.name,
                "the filter reaches along 3 axes but the tensor is a 2-D image; plan it for 2-D data",
            ));
        }
        let dtype = self.dtype();
        if !matches!(dtype, DType::F32 | DType::F64 | DType::U8 | DType::U16) {
            return Err(Error::invalid(
                &f.name,
                format!(
                    "{dtype} tensors are not supported (accepted: f32, f64, u8, u16); convert with cast() first"
                ),
            ));
        }
        let _r = crate::profiler().host_range("ndimage");
        let s = on_storage!(self, |s| s.ndimage_linear(shape, f)?);
        Ok(self.derive(s, self.shape().to_vec()))
    }
}

fn uses_axis0(f: &LinearFilter) -> bool {
    f.terms.iter().any(|t| match t {
        Term::Passes(p) => p.iter().any(|p| p.axis == 0),
        Term::Direct(k) => k.shape[0] > 1,
    })
}

impl Runtime {
    /// [`Tensor::ndimage`] on a row-major f32 host slice of `shape` (`[h, w]` or
    /// `[d, h, w]`).
    pub fn ndimage(&self, data: &[f32], shape: &[usize], f: &LinearFilter) -> Result<Vec<f32>> {
        let _r = crate::profiler().host_range("ndimage");
        self.tensor(data, shape)?.ndimage(f)?.to_vec()
    }
}
