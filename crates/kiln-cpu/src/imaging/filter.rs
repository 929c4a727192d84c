//! The public entry points: `filter2d` (single, batched, multi-channel) and `filter3d`, on
//! ndarray views or on row-major slices. They validate, resolve the path (kiln-core's
//! [`resolve_2d`] / [`resolve_3d`], as the CUDA backend does) and dispatch.

use std::borrow::Cow;

use kiln_core::imaging::{resolve_2d, resolve_3d, BoundaryMode, FilterPath, Kernel2D, Kernel3D};
use kiln_core::{Error, Result};
use ndarray::{Array, ArrayView, ArrayView2, ArrayView3, Dimension, Ix2, Ix3};

use super::direct::{self, Dims};
use super::separable;

fn check(op: &str, shape: &[usize], src: usize, out: usize) -> Result<Dims> {
    if shape.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("the input is empty (shape {shape:?})"),
        ));
    }
    let n: usize = shape.iter().product();
    for (what, len) in [("input", src), ("output", out)] {
        if len != n {
            return Err(Error::ShapeMismatch {
                op: format!("{op} {what} length"),
                expected: vec![n],
                got: vec![len],
            });
        }
    }
    Ok(Dims {
        d: shape[0],
        h: shape[1],
        w: shape[2],
    })
}

/// Filters `n` row-major `(H, W)` f32 images in `src` (shape `[n, h, w]`) into `out`:
/// correlation (no kernel flip) with `kernel` under `mode`.
pub fn filter2d_into(
    src: &[f32],
    shape: [usize; 3],
    kernel: &Kernel2D,
    mode: BoundaryMode,
    path: FilterPath,
    out: &mut [f32],
) -> Result<()> {
    let dims = check("filter2d", &shape, src.len(), out.len())?;
    match resolve_2d(kernel, mode, path)? {
        Some(s) => {
            // The image axes are axes 1 and 2 of the batch.
            let passes: Vec<(usize, &[f64], usize)> = s
                .pass_order
                .iter()
                .map(|&a| (a + 1, s.factors[a].as_slice(), s.factors[a].len() / 2))
                .collect();
            separable::correlate(src, dims, &passes, mode, out);
        }
        None => {
            let (k, r) = (kernel.size(), kernel.radius());
            direct::correlate(src, dims, [1, k, k], [0, r, r], kernel.weights(), mode, out)
        }
    }
    Ok(())
}

/// Filters a row-major `(D, H, W)` f32 volume `src` into `out` with a `k×k×k` kernel.
pub fn filter3d_into(
    src: &[f32],
    shape: [usize; 3],
    kernel: &Kernel3D,
    mode: BoundaryMode,
    path: FilterPath,
    out: &mut [f32],
) -> Result<()> {
    let dims = check("filter3d", &shape, src.len(), out.len())?;
    match resolve_3d(kernel, mode, path)? {
        Some(s) => {
            let passes: Vec<(usize, &[f64], usize)> = s
                .pass_order
                .iter()
                .map(|&a| (a, s.factors[a].as_slice(), s.factors[a].len() / 2))
                .collect();
            separable::correlate(src, dims, &passes, mode, out);
        }
        None => {
            let (k, r) = (kernel.size(), kernel.radius());
            direct::correlate(src, dims, [k, k, k], [r, r, r], kernel.weights(), mode, out);
        }
    }
    Ok(())
}

/// The elements of `a` in row-major order, borrowed when already contiguous.
fn row_major<'a, D: Dimension>(a: &'a ArrayView<'_, f32, D>) -> Cow<'a, [f32]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().copied().collect()),
    }
}

fn array<D: Dimension>(shape: D, data: Vec<f32>) -> Result<Array<f32, D>> {
    Array::from_shape_vec(shape, data).map_err(|e| Error::invalid("filter", e.to_string()))
}

/// Correlates one `(H, W)` image with `kernel` under `mode` (scipy.ndimage.correlate /
/// the preset's scipy function). Any layout is accepted; the result is row-major.
pub fn filter2d(
    image: ArrayView2<f32>,
    kernel: &Kernel2D,
    mode: BoundaryMode,
    path: FilterPath,
) -> Result<Array<f32, Ix2>> {
    let (h, w) = image.dim();
    let src = row_major(&image);
    let mut out = vec![0.0f32; src.len()];
    filter2d_into(&src, [1, h, w], kernel, mode, path, &mut out)?;
    array(Ix2(h, w), out)
}

/// Filters a batch `(N, H, W)`: each image on its own.
pub fn filter2d_batch(
    images: ArrayView3<f32>,
    kernel: &Kernel2D,
    mode: BoundaryMode,
    path: FilterPath,
) -> Result<Array<f32, Ix3>> {
    let (n, h, w) = images.dim();
    let src = row_major(&images);
    let mut out = vec![0.0f32; src.len()];
    filter2d_into(&src, [n, h, w], kernel, mode, path, &mut out)?;
    array(Ix3(n, h, w), out)
}

/// Filters a multi-channel image `(H, W, C)`: each channel on its own (scipy: correlate
/// with the kernel shaped `(k, k, 1)`).
pub fn filter2d_channels(
    image: ArrayView3<f32>,
    kernel: &Kernel2D,
    mode: BoundaryMode,
    path: FilterPath,
) -> Result<Array<f32, Ix3>> {
    let (h, w, c) = image.dim();
    let planes = image.permuted_axes([2, 0, 1]);
    let src = row_major(&planes);
    let mut out = vec![0.0f32; src.len()];
    filter2d_into(&src, [c, h, w], kernel, mode, path, &mut out)?;
    let filtered = array(Ix3(c, h, w), out)?;
    Ok(filtered
        .permuted_axes([1, 2, 0])
        .as_standard_layout()
        .into_owned())
}

/// Correlates a `(D, H, W)` volume with a `k×k×k` kernel under `mode`.
pub fn filter3d(
    volume: ArrayView3<f32>,
    kernel: &Kernel3D,
    mode: BoundaryMode,
    path: FilterPath,
) -> Result<Array<f32, Ix3>> {
    let (d, h, w) = volume.dim();
    let src = row_major(&volume);
    let mut out = vec![0.0f32; src.len()];
    filter3d_into(&src, [d, h, w], kernel, mode, path, &mut out)?;
    array(Ix3(d, h, w), out)
}
