//! `kiln.ndimage`'s interpolation natives: scipy.ndimage's spline prefilter and resampling
//! loops (`kiln_core::imaging::interp`) over host buffers, with the GIL released; and the
//! same on tensors ([`ndimage_resample`], [`ndimage_spline_filter`]), which run where the
//! tensor lives (a CUDA array on its GPU, `kernels/interp.cu`, the CPU's bits).
//!
//! Design: the Python layer (python/kiln/_ndimage_interp.py) owns scipy's signatures,
//! checks and errors, the prefilter's prepadding, complex splitting and the output array;
//! what reaches these functions is a row-major float64 buffer (the input as scipy's C code
//! reads it), the mode as scipy's integer code, and how the output stores values (see
//! [`store_of`]). Results come back as native-endian float64 bytes (float32 for a float32
//! output, rounded as scipy's C cast rounds), which the Python layer casts into the output.

use crate::errors::invalid;
use crate::ops::coerce;
use crate::runtime::parse_dtype;
use crate::tensor::PyTensor;
use crate::{run, IntoPy};
use kiln::core::imaging::interp::{
    geometric_transform_into, spline_filter1d, zoom_shift_into, InterpMode, Mapping, OutValue, Store,
};
use kiln::ndimage::{InterpSpec, Resample};
use kiln::DType;
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

/// `ndimage_resample(x, oshape, order, mode, cval, nprepad, out_dtype, *, zoom, shift,
/// grid_mode, matrix, offset, coords)`: [`Tensor::resample`](kiln::Tensor::resample) of a
/// tensor (f32 or f64 coefficients, the spline prefilter already applied where scipy
/// applies it) on its device, into a new float32 or float64 tensor of shape `oshape`: zoom /
/// shift (`zoom` and `shift` per axis, either `None`, and `grid_mode`), an affine map
/// (`matrix` row-major `x.ndim × len(oshape)` and `offset`), or the float64 bytes of
/// map_coordinates' coordinates (`x.ndim` rows of the output's size, uploaded). The values
/// are kiln-core's to the bit on the CPU and on a GPU.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (x, oshape, order, mode, cval, nprepad, out_dtype, *, zoom=None, shift=None,
    grid_mode=false, matrix=None, offset=None, coords=None))]
fn ndimage_resample(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    oshape: Vec<usize>,
    order: usize,
    mode: i64,
    cval: f64,
    nprepad: usize,
    out_dtype: &str,
    zoom: Option<Vec<f64>>,
    shift: Option<Vec<f64>>,
    grid_mode: bool,
    matrix: Option<Vec<f64>>,
    offset: Option<Vec<f64>>,
    coords: Option<&[u8]>,
) -> PyResult<PyTensor> {
    let mode = mode_of(mode)?;
    let out = parse_dtype(out_dtype)?;
    let c = coords.map(|c| f64s("map_coordinates", c)).transpose()?;
    let map = match (&matrix, &offset, &c) {
        (Some(m), Some(o), None) => Resample::Affine { matrix: m, offset: o },
        (None, None, Some(c)) => Resample::Coordinates(c),
        (None, None, None) => Resample::ZoomShift {
            zoom: zoom.as_deref(),
            shift: shift.as_deref(),
            grid_mode,
        },
        _ => {
            return Err(invalid(
                "ndimage_resample: give zoom / shift, a matrix and an offset, or coordinates",
            ))
        }
    };
    let (t, rt, keep) = coerce(py, x, None)?;
    let ishape = t.shape().to_vec();
    let spec = InterpSpec {
        ishape: &ishape,
        oshape: &oshape,
        order,
        mode,
        cval,
        nprepad,
        map,
    };
    let r = run(py, &rt, || t.resample(&spec, out))?;
    Ok(PyTensor::with_inputs(r, rt, keep))
}

/// `ndimage_spline_filter(x, axes, order, mode, out_dtype)`: scipy's `spline_filter1d`
/// (order 0–5, mode code) of a tensor along each of `axes` in turn on its device, in float64
/// throughout ([`Tensor::spline_filter1d`](kiln::Tensor::spline_filter1d)), then cast to
/// `out_dtype` (float32 rounds once, or float64); with no axes, a copy of `x` as `out_dtype`.
/// The result is a new tensor.
#[pyfunction]
fn ndimage_spline_filter(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axes: Vec<usize>,
    order: usize,
    mode: i64,
    out_dtype: &str,
) -> PyResult<PyTensor> {
    let mode = mode_of(mode)?;
    let out = parse_dtype(out_dtype)?;
    let (t, rt, keep) = coerce(py, x, None)?;
    let r = run(py, &rt, || {
        // a new f64 buffer (the order-0 filter copies) where no axis is filtered, so that the
        // result never shares the input's memory
        let mut cur = if axes.is_empty() {
            t.spline_filter1d(0, 0, mode, DType::F64)?
        } else {
            t
        };
        for &axis in &axes {
            cur = cur.spline_filter1d(axis, order, mode, DType::F64)?;
        }
        cur.cast(out)
    })?;
    Ok(PyTensor::with_inputs(r, rt, keep))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ndimage_resample, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_spline_filter, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_spline_filter1d_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_geometric_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_zoom_shift_host, m)?)?;
    Ok(())
}
