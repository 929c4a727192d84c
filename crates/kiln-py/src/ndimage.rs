//! `kiln.ndimage`'s native half: scipy.ndimage's linear filters, rank filters, grey and
//! binary morphology on a kiln tensor or any DLPack array, run through the facade
//! (`Tensor::ndimage`, `Tensor::rank_apply`, `Tensor::binary_apply`) on the device the data
//! lives on, with the GIL released.
//!
//! Design: the Python layer (python/kiln/ndimage.py) owns scipy's signatures, refuses the
//! parameters kiln does not support, normalises `axes` and expands footprints and
//! structures to the data's rank exactly as scipy's `_expand_footprint` / `_expand_origin`
//! do, and converts results back to the caller's array type. What reaches these functions
//! is already per-axis and typed, so each is a thin map onto the facade's parameter structs
//! (`NdParams` + `linear_spec::build`, `RankParams`, `BinaryParams`), the same ones the CLI's
//! `kiln ndimage` fills. The facade's linear filters take 2-D and 3-D tensors only; a 1-D
//! input runs as a `(1, n)` image filtered along its last axis.

use crate::errors::invalid;
use crate::ops::coerce;
use crate::tensor::PyTensor;
use crate::{run, IntoPy};
use kiln::core::imaging::linear::gaussian_weights;
use kiln::core::imaging::linear_spec::{self, NdParams};
use kiln::core::imaging::scipy_cpu::{correlate_bytes, passes_bytes, Pass1d, PassOp};
use kiln::core::imaging::BoundaryMode;
use kiln::morphology::{BinaryFunction, BinaryParams};
use kiln::ndimage::{ndimage_tolerance, LinearFilter};
use kiln::rank::{Footprint, RankFunction, RankParams};
use kiln::rank_host::{rank_bytes, NdDType};
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

/// scipy's mode names (filters' `grid-*` synonyms included); anything else is refused
/// here, so kiln's own `constant:V` spelling does not leak into the Python API.
const MODES: &[&str] = &[
    "reflect",
    "constant",
    "nearest",
    "mirror",
    "wrap",
    "grid-wrap",
    "grid-constant",
    "grid-mirror",
];

fn boundary(mode: &str, cval: f64) -> PyResult<BoundaryMode> {
    if !MODES.contains(&mode) {
        return Err(invalid(format!(
            "mode `{mode}` is not supported; use one of {}",
            MODES.join(", ")
        )));
    }
    let p = NdParams {
        mode: mode.to_string(),
        cval,
        ..Default::default()
    };
    p.boundary().py()
}

/// The linear filter's parameters, with scipy's names (see `NdParams`).
#[allow(clippy::too_many_arguments)]
fn linear_params(
    sigma: Vec<f64>,
    order: Vec<usize>,
    truncate: f64,
    radius: Option<Vec<usize>>,
    size: Vec<usize>,
    origin: Vec<isize>,
    axis: isize,
    axes: Option<Vec<isize>>,
    weights: Option<Vec<f64>>,
    wshape: Option<Vec<usize>>,
    mode: &str,
    cval: f64,
) -> PyResult<NdParams> {
    boundary(mode, cval)?;
    Ok(NdParams {
        sigma,
        order,
        truncate,
        radius,
        size,
        origin,
        axis,
        axes,
        weights,
        wshape,
        mode: mode.to_string(),
        cval,
    })
}

/// The plan of `function` for data of rank `rank` (1 runs as a `(1, n)` image: the axes
/// and the axis move to the last one).
fn plan(function: &str, rank: usize, p: &NdParams) -> PyResult<LinearFilter> {
    if !(1..=3).contains(&rank) {
        return Err(invalid(format!(
            "{function}: kiln filters 1-D, 2-D and 3-D arrays, got {rank} axes"
        )));
    }
    if rank == 1 {
        let mut q = p.clone();
        if !matches!(p.axis, -1 | 0) {
            return Err(invalid(format!(
                "{function}: axis {} is out of range for a 1-D input",
                p.axis
            )));
        }
        q.axis = 1;
        q.axes = match &p.axes {
            None => Some(vec![1]),
            Some(a) if a.iter().all(|&a| a == 0 || a == -1) && a.len() == 1 => Some(vec![1]),
            Some(a) => {
                return Err(invalid(format!(
                    "{function}: axes {a:?} are out of range for a 1-D input"
                )))
            }
        };
        return linear_spec::build(function, 2, &q).py();
    }
    linear_spec::build(function, rank, p).py()
}

/// `ndimage_linear(x, function, ...)`: scipy.ndimage's linear `function` (correlate,
/// convolve, correlate1d, convolve1d, gaussian_filter, gaussian_filter1d, gaussian_laplace,
/// gaussian_gradient_magnitude, uniform_filter, uniform_filter1d, sobel, prewitt, laplace)
/// on f32, f64, u8 or u16 data of 1 to 3 axes; the result has the input's dtype and device.
///
/// `gauss_kernel(sigma, order, radius)`, where given, gives the weights of each Gaussian pass
/// (correlation order, `2*radius + 1` of them) in place of `linear::gaussian_weights`:
/// kiln.ndimage passes NumPy's, which are scipy's to the bit (see [`numpy_gaussians`]).
#[pyfunction]
#[pyo3(signature = (x, function, *, sigma = vec![], order = vec![0], truncate = 4.0, radius = None,
    size = vec![3], origin = vec![0], axis = -1, axes = None, weights = None, wshape = None,
    mode = "reflect", cval = 0.0, gauss_kernel = None))]
#[allow(clippy::too_many_arguments)]
fn ndimage_linear(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    function: &str,
    sigma: Vec<f64>,
    order: Vec<usize>,
    truncate: f64,
    radius: Option<Vec<usize>>,
    size: Vec<usize>,
    origin: Vec<isize>,
    axis: isize,
    axes: Option<Vec<isize>>,
    weights: Option<Vec<f64>>,
    wshape: Option<Vec<usize>>,
    mode: &str,
    cval: f64,
    gauss_kernel: Option<Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let p = linear_params(
        sigma, order, truncate, radius, size, origin, axis, axes, weights, wshape, mode, cval,
    )?;
    let (t, rt, keep) = coerce(py, x, None)?;
    let shape = t.shape().to_vec();
    let mut f = plan(function, shape.len(), &p)?;
    if let Some(k) = gauss_kernel {
        numpy_gaussians(&mut f, &p.sigma, &k)?;
    }
    let out = run(py, &rt, || {
        if let [n] = shape[..] {
            t.reshape(&[1, n])?.ndimage(&f)?.reshape(&shape)
        } else {
            t.ndimage(&f)
        }
    })?;
    Ok(PyTensor::with_inputs(out, rt, keep))
}

/// Replaces the weights of each Gaussian pass of `f` with `kernel(sigma, order, radius)`'s.
/// A pass is known as Gaussian by its weights: exactly `linear::gaussian_weights(s, o, r)`
/// for one of the call's sigmas `s`, an order `o` of 0..=4 and its anchor `r` (the plan's
/// builder made them so), which also names the arguments. scipy computes these weights with
/// NumPy, whose `exp` and sums can round the last bit differently from Rust's: with NumPy's,
/// the f32 and f64 plans give scipy's bits.
fn numpy_gaussians(f: &mut LinearFilter, sigmas: &[f64], kernel: &Bound<'_, PyAny>) -> PyResult<()> {
    for term in f.terms.iter_mut() {
        let kiln::ndimage::Term::Passes(passes) = term else {
            continue;
        };
        for pass in passes.iter_mut() {
            let r = pass.anchor;
            if pass.weights.len() != 2 * r + 1 {
                continue;
            }
            let found = sigmas.iter().find_map(|&s| {
                (0..=4usize)
                    .find(|&o| gaussian_weights(s, o, r) == pass.weights)
                    .map(|o| (s, o))
            });
            let Some((s, o)) = found else {
                continue;
            };
            let w: Vec<f64> = kernel.call1((s, o, r))?.extract()?;
            if w.len() != pass.weights.len() || w.iter().any(|x| !x.is_finite()) {
                return Err(invalid(format!(
                    "{}: gauss_kernel({s}, {o}, {r}) gave {} weights (want {} finite ones)",
                    f.name,
                    w.len(),
                    pass.weights.len()
                )));
            }
            pass.weights = w;
        }
    }
    Ok(())
}

/// `ndimage_tolerance(function, rank, max_in, ...)`: the bound on |GPU - CPU| kiln tests its
/// linear filters against (`kiln::ndimage::ndimage_tolerance`), for data of largest
/// magnitude `max_in`. Same parameters as [`ndimage_linear`].
#[pyfunction]
#[pyo3(signature = (function, rank, max_in, *, sigma = vec![], order = vec![0], truncate = 4.0,
    radius = None, size = vec![3], origin = vec![0], axis = -1, axes = None, weights = None,
    wshape = None, mode = "reflect", cval = 0.0))]
#[allow(clippy::too_many_arguments)]
fn ndimage_tolerance_of(
    function: &str,
    rank: usize,
    max_in: f64,
    sigma: Vec<f64>,
    order: Vec<usize>,
    truncate: f64,
    radius: Option<Vec<usize>>,
    size: Vec<usize>,
    origin: Vec<isize>,
    axis: isize,
    axes: Option<Vec<isize>>,
    weights: Option<Vec<f64>>,
    wshape: Option<Vec<usize>>,
    mode: &str,
    cval: f64,
) -> PyResult<f64> {
    let p = linear_params(
        sigma, order, truncate, radius, size, origin, axis, axes, weights, wshape, mode, cval,
    )?;
    Ok(ndimage_tolerance(&plan(function, rank, &p)?, max_in))
}

/// scipy's mode for the host routines: any cval (NaN and infinities included, as scipy
/// takes them).
fn host_mode(mode: &str, cval: f64) -> PyResult<BoundaryMode> {
    boundary(mode, 0.0).map(|m| match m {
        BoundaryMode::Constant(_) => BoundaryMode::Constant(cval),
        m => m,
    })
}

/// The bytes of a host buffer: a `bytes` object, or a NumPy array read in place through its
/// `__array_interface__` where it is C-contiguous in native byte order (a 2 MiB `tobytes()`
/// costs more than the filter on a small image: a fresh allocation's page faults and a
/// copy). Anything else is copied with `tobytes()`, as before.
fn host_input<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<std::borrow::Cow<'a, [u8]>> {
    use pyo3::types::PyBytes;
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(std::borrow::Cow::Borrowed(b.as_bytes()));
    }
    // the expression kernels' reading of a NumPy array (big-endian: an error, so a copy)
    if let Ok(v) = crate::userexpr::host::np_view(obj) {
        if v.strides == kiln_expr::c_strides(&v.shape) {
            let n = v.shape.iter().product::<usize>() * v.dtype.size();
            if n == 0 {
                return Ok(std::borrow::Cow::Borrowed(&[]));
            }
            // SAFETY: a C-contiguous array of `n` bytes at `v.ptr` (its interface says so),
            // kept alive by `obj`, which the caller holds for the call; read only.
            return Ok(std::borrow::Cow::Borrowed(unsafe {
                std::slice::from_raw_parts(v.ptr as *const u8, n)
            }));
        }
    }
    Ok(std::borrow::Cow::Owned(obj.call_method0("tobytes")?.extract()?))
}

fn host_dtypes(function: &str, dtype: &str, out_dtype: &str) -> PyResult<(NdDType, NdDType)> {
    let dt: NdDType = dtype.parse().map_err(|e| invalid(format!("{function}: {e}")))?;
    let ot: NdDType = out_dtype
        .parse()
        .map_err(|e| invalid(format!("{function}: output {e}")))?;
    Ok((dt, ot))
}

/// `ndimage_passes_host(data, dtype, shape, out_dtype, axes, weights, sizes, origins, modes,
/// cval)`: scipy's chain of 1-D passes (`correlate1d` with `weights[i]`, or
/// `uniform_filter1d` of `sizes[i]` where that is non-zero) on the CPU over a host buffer of
/// any real dtype scipy takes ([`host_input`]), each pass along `axes[i]` with `origins[i]` and `modes[i]`,
/// stored as `out_dtype` after every pass (`kiln_core::imaging::scipy_cpu`); returns the
/// output's bytes.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn ndimage_passes_host<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dtype: &str,
    shape: Vec<usize>,
    out_dtype: &str,
    axes: Vec<usize>,
    weights: Vec<Vec<f64>>,
    sizes: Vec<usize>,
    origins: Vec<isize>,
    modes: Vec<String>,
    cval: f64,
) -> PyResult<Bound<'py, PyByteArray>> {
    let f = "correlate1d";
    let (dt, ot) = host_dtypes(f, dtype, out_dtype)?;
    let n = axes.len();
    if [weights.len(), sizes.len(), origins.len(), modes.len()] != [n; 4] {
        return Err(invalid(format!(
            "{f}: one weight list, size, origin and mode per pass"
        )));
    }
    let mut passes = Vec::with_capacity(n);
    for i in 0..n {
        let op = if sizes[i] > 0 {
            PassOp::Uniform(sizes[i])
        } else {
            PassOp::Correlate(weights[i].clone())
        };
        passes.push(Pass1d {
            axis: axes[i],
            op,
            origin: origins[i],
            mode: host_mode(&modes[i], cval)?,
        });
    }
    let data = host_input(data)?;
    let data: &[u8] = &data;
    let out = py.detach(|| passes_bytes(data, dt, &shape, &passes, ot)).py()?;
    Ok(PyByteArray::new(py, &out))
}

/// `ndimage_correlate_host(data, dtype, shape, out_dtype, weights, wshape, origins, mode,
/// cval)`: scipy's n-D `correlate` (weights of the data's rank, one origin per axis) on the
/// CPU over a host buffer of any real dtype scipy takes; returns the output's bytes.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn ndimage_correlate_host<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dtype: &str,
    shape: Vec<usize>,
    out_dtype: &str,
    weights: Vec<f64>,
    wshape: Vec<usize>,
    origins: Vec<isize>,
    mode: &str,
    cval: f64,
) -> PyResult<Bound<'py, PyByteArray>> {
    let (dt, ot) = host_dtypes("correlate", dtype, out_dtype)?;
    let m = host_mode(mode, cval)?;
    let data = host_input(data)?;
    let bytes: &[u8] = &data;
    let out = py
        .detach(|| correlate_bytes(bytes, dt, &shape, &weights, &wshape, &origins, m, ot))
        .py()?;
    Ok(PyByteArray::new(py, &out))
}

/// `gaussian_kernel(sigma, order, radius)`: scipy's `_gaussian_kernel1d(sigma, order,
/// radius)[::-1]`, the weights `gaussian_filter1d` correlates with.
#[pyfunction]
fn gaussian_kernel(sigma: f64, order: usize, radius: usize) -> Vec<f64> {
    gaussian_weights(sigma, order, radius)
}

fn footprint(what: &str, shape: Vec<usize>, mask: Vec<bool>) -> PyResult<Footprint> {
    Footprint::new(&shape, mask).map_err(|e| invalid(format!("{what}: {e}")))
}

/// The function and window of a rank filter or grey morphology call (see [`ndimage_rank`]).
#[allow(clippy::too_many_arguments)]
fn rank_call(
    function: &str,
    size: Option<Vec<usize>>,
    footprint_shape: Option<Vec<usize>>,
    footprint_mask: Option<Vec<bool>>,
    structure_shape: Option<Vec<usize>>,
    structure_values: Option<Vec<f64>>,
    mode: &str,
    cval: f64,
    origin: Vec<isize>,
    rank: Option<isize>,
    percentile: Option<f64>,
) -> PyResult<(RankFunction, RankParams)> {
    let func = match function {
        "median_filter" => RankFunction::Median,
        "rank_filter" => RankFunction::Rank(rank.ok_or_else(|| invalid("rank_filter needs `rank`"))?),
        "percentile_filter" => RankFunction::Percentile(
            percentile.ok_or_else(|| invalid("percentile_filter needs `percentile`"))?,
        ),
        "minimum_filter" => RankFunction::Minimum,
        "maximum_filter" => RankFunction::Maximum,
        "grey_erosion" => RankFunction::GreyErosion,
        "grey_dilation" => RankFunction::GreyDilation,
        "grey_opening" => RankFunction::GreyOpening,
        "grey_closing" => RankFunction::GreyClosing,
        _ => {
            return Err(invalid(format!(
                "`{function}` is not a rank filter or grey morphology op"
            )))
        }
    };
    let footprint = match (footprint_shape, footprint_mask) {
        (Some(s), Some(m)) => Some(footprint("footprint", s, m)?),
        (None, None) => None,
        _ => return Err(invalid("footprint: give its shape and its mask")),
    };
    let structure = match (structure_shape, structure_values) {
        (Some(s), Some(v)) => Some((s, v)),
        (None, None) => None,
        _ => return Err(invalid("structure: give its shape and its values")),
    };
    let p = RankParams {
        size,
        footprint,
        structure,
        mode: boundary(mode, cval)?,
        origin,
    };
    Ok((func, p))
}

/// `ndimage_rank(x, function, ...)`: a rank filter or grey morphology op (median_filter,
/// rank_filter, percentile_filter, minimum_filter, maximum_filter, grey_erosion,
/// grey_dilation, grey_opening, grey_closing) with a full-rank window (`size` per axis, or
/// a `footprint` / `structure` given as shape and row-major values).
#[pyfunction]
#[pyo3(signature = (x, function, *, size = None, footprint_shape = None, footprint_mask = None,
    structure_shape = None, structure_values = None, mode = "reflect", cval = 0.0,
    origin = vec![], rank = None, percentile = None))]
#[allow(clippy::too_many_arguments)]
fn ndimage_rank(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    function: &str,
    size: Option<Vec<usize>>,
    footprint_shape: Option<Vec<usize>>,
    footprint_mask: Option<Vec<bool>>,
    structure_shape: Option<Vec<usize>>,
    structure_values: Option<Vec<f64>>,
    mode: &str,
    cval: f64,
    origin: Vec<isize>,
    rank: Option<isize>,
    percentile: Option<f64>,
) -> PyResult<PyTensor> {
    let (func, p) = rank_call(
        function,
        size,
        footprint_shape,
        footprint_mask,
        structure_shape,
        structure_values,
        mode,
        cval,
        origin,
        rank,
        percentile,
    )?;
    let (t, rt, keep) = coerce(py, x, None)?;
    let out = run(py, &rt, || t.rank_apply(func, &p))?;
    Ok(PyTensor::with_inputs(out, rt, keep))
}

/// `ndimage_rank_host(data, dtype, shape, out_dtype, function, ...)`: [`ndimage_rank`] on the
/// CPU over a host buffer (native-endian bytes of any dtype scipy takes: bool, int8..int64,
/// uint8..uint64, float32, float64), with scipy's results stored as `out_dtype`
/// (`kiln::rank_host`; `exact`: 64-bit integers not rounded through a double, as scipy's 1-D
/// rank filter); returns the output's bytes.
#[pyfunction]
#[pyo3(signature = (data, dtype, shape, out_dtype, function, *, size = None,
    footprint_shape = None, footprint_mask = None, structure_shape = None,
    structure_values = None, mode = "reflect", cval = 0.0, origin = vec![], rank = None,
    percentile = None, exact = false))]
#[allow(clippy::too_many_arguments)]
fn ndimage_rank_host<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dtype: &str,
    shape: Vec<usize>,
    out_dtype: &str,
    function: &str,
    size: Option<Vec<usize>>,
    footprint_shape: Option<Vec<usize>>,
    footprint_mask: Option<Vec<bool>>,
    structure_shape: Option<Vec<usize>>,
    structure_values: Option<Vec<f64>>,
    mode: &str,
    cval: f64,
    origin: Vec<isize>,
    rank: Option<isize>,
    percentile: Option<f64>,
    exact: bool,
) -> PyResult<Bound<'py, PyByteArray>> {
    let (func, p) = rank_call(
        function,
        size,
        footprint_shape,
        footprint_mask,
        structure_shape,
        structure_values,
        mode,
        cval,
        origin,
        rank,
        percentile,
    )?;
    let dt: NdDType = dtype.parse().map_err(|e| invalid(format!("{function}: {e}")))?;
    let ot: NdDType = out_dtype
        .parse()
        .map_err(|e| invalid(format!("{function}: output {e}")))?;
    let data = host_input(data)?;
    let bytes: &[u8] = &data;
    let out = py
        .detach(|| rank_bytes(bytes, dt, &shape, func, &p, ot, exact))
        .py()?;
    Ok(PyByteArray::new(py, &out))
}

/// `ndimage_binary(x, function, ...)`: binary_erosion, binary_dilation, binary_opening,
/// binary_closing or binary_fill_holes; the structure is full-rank (default: scipy's
/// `generate_binary_structure(rank, 1)`); the result is u8 0/1.
#[pyfunction]
#[pyo3(signature = (x, function, *, structure_shape = None, structure_mask = None,
    iterations = 1, border_value = false, origin = vec![]))]
#[allow(clippy::too_many_arguments)]
fn ndimage_binary(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    function: &str,
    structure_shape: Option<Vec<usize>>,
    structure_mask: Option<Vec<bool>>,
    iterations: i64,
    border_value: bool,
    origin: Vec<isize>,
) -> PyResult<PyTensor> {
    let func = match function {
        "binary_erosion" => BinaryFunction::Erosion,
        "binary_dilation" => BinaryFunction::Dilation,
        "binary_opening" => BinaryFunction::Opening,
        "binary_closing" => BinaryFunction::Closing,
        "binary_fill_holes" => BinaryFunction::FillHoles,
        _ => return Err(invalid(format!("`{function}` is not a binary morphology op"))),
    };
    let structure = match (structure_shape, structure_mask) {
        (Some(s), Some(m)) => Some(footprint("structure", s, m)?),
        (None, None) => None,
        _ => return Err(invalid("structure: give its shape and its mask")),
    };
    let p = BinaryParams {
        structure,
        iterations,
        border_value,
        origin,
    };
    let (t, rt, keep) = coerce(py, x, None)?;
    let out = run(py, &rt, || t.binary_apply(func, &p))?;
    Ok(PyTensor::with_inputs(out, rt, keep))
}

/// `binary_structure(rank, connectivity)`: scipy's `generate_binary_structure` for rank 1
/// to 3, row-major.
#[pyfunction]
fn binary_structure(rank: usize, connectivity: usize) -> PyResult<Vec<bool>> {
    Ok(Footprint::binary_structure(rank, connectivity)
        .py()?
        .mask()
        .to_vec())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ndimage_linear, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_tolerance_of, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_rank, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_rank_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_passes_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_correlate_host, m)?)?;
    m.add_function(wrap_pyfunction!(gaussian_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_binary, m)?)?;
    m.add_function(wrap_pyfunction!(binary_structure, m)?)?;
    Ok(())
}
