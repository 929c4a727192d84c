//! The module-level ops: they take a `kiln.Tensor` or any DLPack array (torch, CuPy, NumPy,
//! JAX) and run on the device the data lives on, returning a `kiln.Tensor` there (the
//! Python layer turns it back into the caller's type for `out_type="like"`).

use crate::dlpack::import;
use crate::errors::invalid;
use crate::tensor::PyTensor;
use crate::{run, IntoPy};
use kiln::core::backend::MapOp;
use kiln::core::imaging::{BoundaryMode, FilterPath, Kernel2D, Kernel3D};
use kiln::{Device, Runtime, Tensor, UnaryOp};
use pyo3::prelude::*;
use std::sync::Arc;

/// `x` as a tensor (an imported array is wrapped, not copied, on a CUDA device), the runtime
/// of its device, and the imported tensors to keep alive with the result.
pub(crate) fn coerce(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    want: Option<Device>,
) -> PyResult<(Tensor, Arc<Runtime>, Vec<Tensor>)> {
    if let Ok(t) = x.cast::<PyTensor>() {
        let t = t.get();
        if let Some(w) = want {
            if t.t.device() != w {
                return Err(invalid(format!(
                    "operands are on {} and {w}; move one with .to('{w}')",
                    t.t.device()
                )));
            }
        }
        return Ok((t.t.clone(), t.rt.clone(), Vec::new()));
    }
    let (t, rt) = import(py, x, want)?;
    let keep = if t.device() == Device::Cpu {
        Vec::new()
    } else {
        vec![t.clone()]
    };
    Ok((t, rt, keep))
}

/// A second operand on `device`.
pub(crate) fn operand(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    device: Option<Device>,
) -> PyResult<(Tensor, Vec<Tensor>)> {
    let (t, _, keep) = coerce(py, x, device)?;
    Ok((t, keep))
}

/// `map(x, op, a=0.0, b=0.0)`: `op` in sigmoid, tanh, relu, exp, scale_shift (`a*x+b`),
/// clamp (`lo=a, hi=b`).
#[pyfunction]
#[pyo3(signature = (x, op, a = 0.0, b = 0.0))]
fn map(py: Python<'_>, x: &Bound<'_, PyAny>, op: &str, a: f32, b: f32) -> PyResult<PyTensor> {
    let op = match op {
        "sigmoid" => MapOp::Unary(UnaryOp::Sigmoid),
        "tanh" => MapOp::Unary(UnaryOp::Tanh),
        "relu" => MapOp::Unary(UnaryOp::Relu),
        "exp" => MapOp::Unary(UnaryOp::Exp),
        "scale_shift" => MapOp::ScaleShift { a, b },
        "clamp" => MapOp::Clamp { lo: a, hi: b },
        _ => {
            return Err(invalid(format!(
                "unknown op `{op}`; sigmoid, tanh, relu, exp, scale_shift, clamp"
            )))
        }
    };
    let (t, rt, keep) = coerce(py, x, None)?;
    let out = run(py, &rt, || t.map(op))?;
    Ok(PyTensor::with_inputs(out, rt, keep))
}

/// `axpy(a, x, y)`: `a * x + y`.
#[pyfunction]
fn axpy(py: Python<'_>, a: f32, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let (tx, rt, mut keep) = coerce(py, x, None)?;
    let (ty, k2) = operand(py, y, Some(tx.device()))?;
    keep.extend(k2);
    let out = run(py, &rt, || tx.axpy(a, &ty))?;
    Ok(PyTensor::with_inputs(out, rt, keep))
}

/// `transpose(x)`: the transpose of a 2-D array.
#[pyfunction]
fn transpose(py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let (t, rt, keep) = coerce(py, x, None)?;
    let out = run(py, &rt, || t.transpose())?;
    Ok(PyTensor::with_inputs(out, rt, keep))
}

/// `cast(x, dtype)`.
#[pyfunction]
fn cast(py: Python<'_>, x: &Bound<'_, PyAny>, dtype: &str) -> PyResult<PyTensor> {
    let d = crate::runtime::parse_dtype(dtype)?;
    let (t, rt, keep) = coerce(py, x, None)?;
    let out = run(py, &rt, || t.cast(d))?;
    Ok(PyTensor::with_inputs(out, rt, keep))
}

/// `matmul(a, b, precision="f32")`: `(m,k)·(k,n)` or batched `(z,m,k)·(z,k,n)`.
#[pyfunction]
#[pyo3(signature = (a, b, precision = "f32"))]
fn matmul(py: Python<'_>, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, precision: &str) -> PyResult<PyTensor> {
    let p: kiln::linalg::GemmPrecision = precision.parse().py()?;
    let (ta, rt, mut keep) = coerce(py, a, None)?;
    let (tb, k2) = operand(py, b, Some(ta.device()))?;
    keep.extend(k2);
    let out = run(py, &rt, || ta.matmul(&tb, p))?;
    Ok(PyTensor::with_inputs(out, rt, keep))
}

/// scipy.ndimage's `mode` and `cval` as kiln's boundary mode (the `grid-*` spellings are
/// scipy's synonyms for filters).
fn boundary(mode: &str, cval: f64) -> PyResult<BoundaryMode> {
    Ok(match mode {
        "reflect" | "grid-mirror" => BoundaryMode::Reflect,
        "mirror" => BoundaryMode::Mirror,
        "nearest" => BoundaryMode::Nearest,
        "wrap" | "grid-wrap" => BoundaryMode::Wrap,
        "constant" | "grid-constant" => {
            if !cval.is_finite() {
                return Err(invalid(format!("cval = {cval} must be finite")));
            }
            BoundaryMode::Constant(cval)
        }
        _ => {
            return Err(invalid(format!(
                "mode `{mode}` is not supported; kiln's modes: reflect, constant, nearest, mirror, wrap (and scipy's grid-mirror, grid-constant, grid-wrap synonyms)"
            )))
        }
    })
}

fn filter_path(path: &str) -> PyResult<FilterPath> {
    Ok(match path {
        "auto" => FilterPath::Auto,
        "direct" => FilterPath::Direct,
        "separable" => FilterPath::Separable,
        _ => return Err(invalid(format!("path `{path}`: use auto, direct or separable"))),
    })
}

/// `filter2d(x, weights, ksize, mode, cval, path, channels)`: correlate `(h, w)`, `(n, h, w)`
/// or, with `channels`, `(h, w, c)` data (float32) with a `k×k` kernel: a preset name (str)
/// or row-major weights (`ksize = k`).
#[pyfunction]
#[pyo3(signature = (x, weights, ksize = None, mode = "reflect", cval = 0.0, path = "auto", channels = false))]
#[allow(clippy::too_many_arguments)]
fn filter2d(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    weights: &Bound<'_, PyAny>,
    ksize: Option<usize>,
    mode: &str,
    cval: f64,
    path: &str,
    channels: bool,
) -> PyResult<PyTensor> {
    let kernel = match weights.extract::<String>() {
        Ok(name) => Kernel2D::preset(&name).py()?,
        Err(_) => {
            let w: Vec<f64> = weights.extract()?;
            let k = ksize.ok_or_else(|| invalid("filter2d: weights given without ksize"))?;
            Kernel2D::new([k, k], w).py()?
        }
    };
    let (mode, path) = (boundary(mode, cval)?, filter_path(path)?);
    let (t, rt, keep) = coerce(py, x, None)?;
    let out = run(py, &rt, || {
        if channels {
            t.filter2d_channels(&kernel, mode, path)
        } else {
            t.filter2d(&kernel, mode, path)
        }
    })?;
    Ok(PyTensor::with_inputs(out, rt, keep))
}

/// `filter3d(x, weights, ksize, mode, cval, path)`: correlate a `(d, h, w)` float32 volume
/// with a `k×k×k` kernel (k in 3, 5, 7): a preset name or row-major weights.
#[pyfunction]
#[pyo3(signature = (x, weights, ksize = None, mode = "reflect", cval = 0.0, path = "auto"))]
fn filter3d(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    weights: &Bound<'_, PyAny>,
    ksize: Option<usize>,
    mode: &str,
    cval: f64,
    path: &str,
) -> PyResult<PyTensor> {
    let kernel = match weights.extract::<String>() {
        Ok(name) => Kernel3D::preset(&name).py()?,
        Err(_) => {
            let w: Vec<f64> = weights.extract()?;
            let k = ksize.ok_or_else(|| invalid("filter3d: weights given without ksize"))?;
            Kernel3D::new([k, k, k], w).py()?
        }
    };
    let (mode, path) = (boundary(mode, cval)?, filter_path(path)?);
    let (t, rt, keep) = coerce(py, x, None)?;
    let out = run(py, &rt, || t.filter3d(&kernel, mode, path))?;
    Ok(PyTensor::with_inputs(out, rt, keep))
}

/// `asarray(x, device=None, dtype=None)`: `x` (a kiln tensor or a DLPack array) as a kiln
/// tensor on `device` (default: where it is), copied only where it must move; `dtype`
/// casts on the device.
#[pyfunction]
#[pyo3(signature = (x, device = None, dtype = None))]
fn asarray(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    device: Option<&str>,
    dtype: Option<&str>,
) -> PyResult<PyTensor> {
    let (t, rt, keep) = coerce(py, x, None)?;
    let target = match device {
        Some(d) => crate::runtime_for(py, d)?,
        None => rt,
    };
    let d = dtype.map(crate::runtime::parse_dtype).transpose()?;
    let r = target.clone();
    let out = run(py, &target, || {
        let moved = t.to_device(&r)?;
        match d {
            Some(d) => moved.cast(d),
            None => Ok(moved),
        }
    })?;
    Ok(PyTensor::with_inputs(out, target, keep))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(map, m)?)?;
    m.add_function(wrap_pyfunction!(axpy, m)?)?;
    m.add_function(wrap_pyfunction!(transpose, m)?)?;
    m.add_function(wrap_pyfunction!(cast, m)?)?;
    m.add_function(wrap_pyfunction!(matmul, m)?)?;
    m.add_function(wrap_pyfunction!(filter2d, m)?)?;
    m.add_function(wrap_pyfunction!(filter3d, m)?)?;
    m.add_function(wrap_pyfunction!(asarray, m)?)?;
    Ok(())
}
