//! `kiln.ndimage`'s interpolation natives: scipy.ndimage's spline prefilter and resampling
//! loops (`kiln_core::imaging::interp`) over host buffers, with the GIL released.
//!
//! Design: the Python layer (python/kiln/_ndimage_interp.py) owns scipy's signatures,
//! checks and errors, the prefilter's prepadding, complex splitting and the output array;
//! what reaches these functions is a row-major float64 buffer (the input as scipy's C code
//! reads it), the mode as scipy's integer code, and how the output stores values (see
//! [`store_of`]). Results come back as native-endian float64 bytes (float32 for a float32
//! output, rounded as scipy's C cast rounds), which the Python layer casts into the output.

use crate::errors::invalid;
use crate::IntoPy;
use kiln::core::imaging::interp::{
    geometric_transform_into, spline_filter1d, zoom_shift_into, InterpMode, Mapping, OutValue, Store,
};
use pyo3::prelude::*;
use pyo3::types::PyByteArray;
use std::borrow::Cow;

/// The native-endian f64 values in `b` (borrowed when aligned).
fn f64s<'a>(what: &str, b: &'a [u8]) -> PyResult<Cow<'a, [f64]>> {
    if b.len() % 8 != 0 {
        return Err(invalid(format!(
            "{what}: {} bytes are not whole float64 values",
            b.len()
        )));
    }
    Ok(match bytemuck::try_cast_slice::<u8, f64>(b) {
        Ok(v) => Cow::Borrowed(v),
        Err(_) => Cow::Owned(
            b.chunks_exact(8)
                .map(|c| f64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ),
    })
}

/// `(kind, lo, hi)` from Python: `float`/`f32` (a float64 / float32 output), `uint` (max
/// `hi`), `int` (bounds `lo`, `hi`) or `bool`.
fn store_of(kind: &str, lo: f64, hi: f64) -> PyResult<(Store, bool)> {
    Ok(match kind {
        "float" => (Store::Float, false),
        "f32" => (Store::Float, true),
        "uint" => (Store::Unsigned(hi), false),
        "int" => (Store::Signed(lo, hi), false),
        "bool" => (Store::Bool, false),
        k => return Err(invalid(format!("interpolation: output kind {k:?}"))),
    })
}

fn mode_of(code: i64) -> PyResult<InterpMode> {
    InterpMode::from_code(code).py()
}

/// `fill` run on `n` values of `T` written straight into a new bytearray (through a
/// temporary where its buffer is not aligned for `T`), the GIL released.
fn fill_bytes<'py, T: OutValue + bytemuck::Pod + Default>(
    py: Python<'py>,
    n: usize,
    fill: impl Fn(&mut [T]) -> kiln::Result<()> + Send + Sync,
) -> PyResult<Bound<'py, PyByteArray>> {
    let nbytes = n
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| invalid("interpolation: the output is too large"))?;
    PyByteArray::new_with(py, nbytes, |buf| {
        match bytemuck::try_cast_slice_mut::<u8, T>(buf) {
            Ok(out) => py.detach(|| fill(out)).py()?,
            Err(_) => {
                let mut tmp = vec![T::default(); n];
                py.detach(|| fill(&mut tmp)).py()?;
                buf.copy_from_slice(bytemuck::cast_slice(&tmp));
            }
        }
        Ok(())
    })
}

/// `ndimage_spline_filter1d_host(data, shape, axes, order, mode)`: scipy's
/// `spline_filter1d` (order 2–5, mode code) of a row-major float64 buffer along each of
/// `axes` in turn (float64 throughout, as `spline_filter` with a float64 output); returns
/// the float64 bytes.
#[pyfunction]
fn ndimage_spline_filter1d_host<'py>(
    py: Python<'py>,
    data: &[u8],
    shape: Vec<usize>,
    axes: Vec<usize>,
    order: usize,
    mode: i64,
) -> PyResult<Bound<'py, PyByteArray>> {
    let mode = mode_of(mode)?;
    let mut v = f64s("spline_filter1d", data)?.into_owned();
    py.detach(|| {
        axes.iter()
            .try_for_each(|&axis| spline_filter1d(&mut v, &shape, axis, order, mode))
    })
    .py()?;
    Ok(PyByteArray::new(py, bytemuck::cast_slice(&v)))
}

/// `ndimage_geometric_host(input, ishape, oshape, order, mode, cval, nprepad, store, matrix,
/// shift, coords)`: scipy's `NI_GeometricTransform` of a row-major float64 input, with an
/// affine map (`matrix` row-major `len(ishape) × len(oshape)`, `shift`) or the float64
/// bytes of a coordinates array (`len(ishape)` rows of the output's size); `store` is
/// `(kind, lo, hi)`. Returns the output's values (see the module doc).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (input, ishape, oshape, order, mode, cval, nprepad, store, matrix=None, shift=None, coords=None))]
fn ndimage_geometric_host<'py>(
    py: Python<'py>,
    input: &[u8],
    ishape: Vec<usize>,
    oshape: Vec<usize>,
    order: usize,
    mode: i64,
    cval: f64,
    nprepad: usize,
    store: (String, f64, f64),
    matrix: Option<Vec<f64>>,
    shift: Option<Vec<f64>>,
    coords: Option<&[u8]>,
) -> PyResult<Bound<'py, PyByteArray>> {
    let mode = mode_of(mode)?;
    let (st, f32_out) = store_of(&store.0, store.1, store.2)?;
    let x = f64s("geometric_transform", input)?;
    let c = coords.map(|c| f64s("geometric_transform", c)).transpose()?;
    let mapping = match (&matrix, &shift, &c) {
        (Some(m), Some(s), None) => Mapping::Affine { matrix: m, shift: s },
        (None, None, Some(c)) => Mapping::Coordinates(c),
        _ => {
            return Err(invalid(
                "geometric_transform: give a matrix and a shift, or coordinates",
            ))
        }
    };
    let n: usize = oshape.iter().product();
    if f32_out {
        fill_bytes::<f32>(py, n, |o| {
            geometric_transform_into(&x, &ishape, mapping, &oshape, order, mode, cval, nprepad, st, o)
        })
    } else {
        fill_bytes::<f64>(py, n, |o| {
            geometric_transform_into(&x, &ishape, mapping, &oshape, order, mode, cval, nprepad, st, o)
        })
    }
}

/// `ndimage_zoom_shift_host(input, ishape, oshape, zoom, shift, order, mode, cval, nprepad,
/// grid_mode, store)`: scipy's `NI_ZoomShift` of a row-major float64 input (`zoom` and
/// `shift` per axis, either `None`). Returns the output's values (see the module doc).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn ndimage_zoom_shift_host<'py>(
    py: Python<'py>,
    input: &[u8],
    ishape: Vec<usize>,
    oshape: Vec<usize>,
    zoom: Option<Vec<f64>>,
    shift: Option<Vec<f64>>,
    order: usize,
    mode: i64,
    cval: f64,
    nprepad: usize,
    grid_mode: bool,
    store: (String, f64, f64),
) -> PyResult<Bound<'py, PyByteArray>> {
    let mode = mode_of(mode)?;
    let (st, f32_out) = store_of(&store.0, store.1, store.2)?;
    let x = f64s("zoom_shift", input)?;
    let n: usize = oshape.iter().product();
    let (z, s) = (zoom.as_deref(), shift.as_deref());
    if f32_out {
        fill_bytes::<f32>(py, n, |o| {
            zoom_shift_into(
                &x, &ishape, z, s, &oshape, order, mode, cval, nprepad, grid_mode, st, o,
            )
        })
    } else {
        fill_bytes::<f64>(py, n, |o| {
            zoom_shift_into(
                &x, &ishape, z, s, &oshape, order, mode, cval, nprepad, grid_mode, st, o,
            )
        })
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ndimage_spline_filter1d_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_geometric_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_zoom_shift_host, m)?)?;
    Ok(())
}
