//! `kiln.ndimage`'s distance-transform natives: scipy.ndimage's `distance_transform_edt`,
//! `distance_transform_cdt` and `distance_transform_bf` over host buffers
//! (`kiln_core::imaging::distance`), and `distance_transform_edt` over CUDA arrays
//! (`kiln_cuda`'s `EdtRaw` op), with the GIL released.
//!
//! Design: the Python layer (python/kiln/_ndimage_distance.py) owns scipy's signature, its
//! checks and errors, the `distances=`/`indices=` out arrays and the 0-D and all-foreground
//! cases scipy's NumPy code decides; what reaches these functions is a C-contiguous mask (one
//! byte per element, non-zero is foreground) read in place, and they return the results'
//! native-endian bytes (float64 or uint32 distances, int32 indices) for `np.frombuffer`.

use crate::errors::invalid;
use crate::IntoPy;
use kiln::core::imaging::distance::{bf, cdt, edt, feature_planes, BfDistances, BfMetric};
use kiln::device::ops::EdtRaw;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

/// The bytes of a C-contiguous one-byte-per-element NumPy array (bool, int8 or uint8), read
/// in place through its `__array_interface__`; `n` elements are expected.
fn mask_bytes<'a>(f: &str, obj: &'a Bound<'_, PyAny>, n: usize) -> PyResult<&'a [u8]> {
    let v = crate::userexpr::host::np_view(obj)?;
    if v.dtype.size() != 1 || v.strides != kiln_expr::c_strides(&v.shape) {
        return Err(invalid(format!(
            "{f}: the mask must be a C-contiguous one-byte array"
        )));
    }
    let len: usize = v.shape.iter().product();
    if len != n {
        return Err(invalid(format!("{f}: the mask has {len} elements for {n}")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: a C-contiguous array of `n` one-byte elements at `v.ptr` (its interface says
    // so), kept alive by `obj`, which the caller holds for the call; read only.
    Ok(unsafe { std::slice::from_raw_parts(v.ptr as *const u8, n) })
}

fn bytes<'py, T: bytemuck::Pod>(py: Python<'py>, v: &[T]) -> Bound<'py, PyByteArray> {
    PyByteArray::new(py, bytemuck::cast_slice(v))
}

/// `ndimage_edt_host(mask, shape, sampling, distances, indices)`: scipy's
/// `distance_transform_edt` of `mask` (at least one axis); returns `(distances, indices)`:
/// float64 bytes and int32 bytes (`ndim` planes), each `None` unless asked for.
#[pyfunction]
#[pyo3(signature = (mask, shape, sampling, distances, indices))]
#[allow(clippy::type_complexity)]
fn ndimage_edt_host<'py>(
    py: Python<'py>,
    mask: &Bound<'py, PyAny>,
    shape: Vec<usize>,
    sampling: Option<Vec<f64>>,
    distances: bool,
    indices: bool,
) -> PyResult<(Option<Bound<'py, PyByteArray>>, Option<Bound<'py, PyByteArray>>)> {
    let f = "distance_transform_edt";
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let m = mask_bytes(f, mask, n.ok_or_else(|| invalid(format!("{f}: too large")))?)?;
    let out = py
        .detach(|| edt(m, &shape, sampling.as_deref(), distances, indices))
        .py()?;
    Ok((
        out.distances.map(|d| bytes(py, &d)),
        out.indices.map(|i| bytes(py, &i)),
    ))
}

/// `ndimage_edt_cuda(mask, shape, sampling, distances, indices, device)`: scipy's
/// `distance_transform_edt` of the C-contiguous one-byte mask (zero is background, 1 to 4
/// axes) at device address `mask` on CUDA device `device`, into the C-contiguous float64
/// array at `distances` and the int32 `(ndim, ...)` array at `indices` (each 0 when not
/// wanted), as `ndimage_edt_host` computes them. The caller has synchronised the streams that
/// wrote the arrays; the results are complete when this returns.
#[pyfunction]
#[pyo3(signature = (mask, shape, sampling, distances, indices, device))]
fn ndimage_edt_cuda(
    py: Python<'_>,
    mask: u64,
    shape: Vec<usize>,
    sampling: Option<Vec<f64>>,
    distances: u64,
    indices: u64,
    device: usize,
) -> PyResult<()> {
    let (_rt, cuda) = crate::kernels::cuda_backend(py, device)?;
    py.detach(|| {
        // SAFETY: the Python layer passes the address of a live C-contiguous one-byte array
        // of `shape` and of distinct live C-contiguous float64 (`shape`) and int32 (`(ndim,)
        // + shape`) arrays or 0, all on `device` (kiln's context there is the device's
        // primary context, which CuPy and torch use too), held by the call, with their
        // streams synchronised before it; the run waits for its own kernels.
        let op = unsafe { EdtRaw::new(mask, &shape, sampling.as_deref(), distances, indices) };
        cuda.run(op)
    })
    .py()
}

/// `ndimage_cdt_host(mask, shape, structure, indices, planes)`: scipy's
/// `distance_transform_cdt` of `mask` (at least one axis) with `structure` (`3^ndim` bytes as
/// scipy's C code reads the metric: non-zero is a neighbour); returns `(distances, indices)`:
/// int32 bytes, and when `indices`, int32 bytes of the flat features (or, with `planes`, of
/// their coordinates, `ndim` planes).
#[pyfunction]
fn ndimage_cdt_host<'py>(
    py: Python<'py>,
    mask: &Bound<'py, PyAny>,
    shape: Vec<usize>,
    structure: Vec<u8>,
    indices: bool,
    planes: bool,
) -> PyResult<(Bound<'py, PyByteArray>, Option<Bound<'py, PyByteArray>>)> {
    let f = "distance_transform_cdt";
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let m = mask_bytes(f, mask, n.ok_or_else(|| invalid(format!("{f}: too large")))?)?;
    let st: Vec<bool> = structure.iter().map(|&b| b != 0).collect();
    let (dist, ft) = py
        .detach(|| {
            let out = cdt(m, &shape, &st, indices)?;
            let ft = out
                .features
                .map(|ft| if planes { feature_planes(&ft, &shape) } else { ft });
            Ok::<_, kiln::Error>((out.distances, ft))
        })
        .py()?;
    Ok((bytes(py, &dist), ft.map(|p| bytes(py, &p))))
}

/// `ndimage_bf_host(mask, shape, metric, sampling, distances, indices, planes)`: scipy's
/// `distance_transform_bf` of `mask` (0-D included) with `metric` (scipy's numbers: 1
/// Euclidean, 2 city block, 3 chessboard); returns `(distances, indices)`: float64
/// (Euclidean) or uint32 bytes, and int32 bytes of the flat features (or, with `planes`, of
/// their coordinates, `ndim` planes), each `None` unless asked for.
#[pyfunction]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn ndimage_bf_host<'py>(
    py: Python<'py>,
    mask: &Bound<'py, PyAny>,
    shape: Vec<usize>,
    metric: u8,
    sampling: Option<Vec<f64>>,
    distances: bool,
    indices: bool,
    planes: bool,
) -> PyResult<(Option<Bound<'py, PyByteArray>>, Option<Bound<'py, PyByteArray>>)> {
    let f = "distance_transform_bf";
    let metric = match metric {
        1 => BfMetric::Euclidean,
        2 => BfMetric::CityBlock,
        3 => BfMetric::Chessboard,
        m => return Err(invalid(format!("{f}: metric {m} is not 1, 2 or 3"))),
    };
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let m = mask_bytes(f, mask, n.ok_or_else(|| invalid(format!("{f}: too large")))?)?;
    let out = py
        .detach(|| bf(m, &shape, metric, sampling.as_deref(), distances, indices))
        .py()?;
    let dist = out.distances.map(|d| match d {
        BfDistances::F64(v) => bytes(py, &v),
        BfDistances::U32(v) => bytes(py, &v),
    });
    let ft = out.features.map(|ft| {
        if planes {
            bytes(py, &feature_planes(&ft, &shape))
        } else {
            bytes(py, &ft)
        }
    });
    Ok((dist, ft))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ndimage_edt_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_edt_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_cdt_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_bf_host, m)?)?;
    Ok(())
}
