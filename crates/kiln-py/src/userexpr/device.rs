//! The GPU side of the expression kernels: CUDA arrays as `(address, dtype, shape,
//! strides)` read from `_userkernel.py`'s `DeviceArray`s, bound and filled in by the
//! facade's [`ExprLaunch`] (the same code as `Runtime::elementwise_kernel`'s GPU path),
//! compiled through kiln's NVRTC path and cubin cache, and queued on the caller's stream.

use super::host::python_scalar_type;
use super::{dtype, py_scalar};
use crate::errors::IntoPy;
use crate::kernels;
use kiln::expr_kernel::{DeviceArg, DeviceArray, ExprLaunch};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// A CUDA array argument as `_userkernel.py` gives it: `(address, dtype, shape, strides)`,
/// the dtype by the name `DeviceArray` keeps (NumPy's `dtype.name` is a Python-level property
/// costing microseconds a read).
fn dev_array(d: &Bound<'_, PyAny>) -> PyResult<DeviceArray> {
    let py = d.py();
    let name = d.getattr(intern!(py, "name"))?;
    Ok(DeviceArray {
        ptr: d.getattr(intern!(py, "ptr"))?.extract()?,
        dtype: dtype(&name.cast::<PyString>()?.to_cow()?)?,
        shape: d.getattr(intern!(py, "shape"))?.extract()?,
        strides: d.getattr(intern!(py, "strides"))?.extract()?,
    })
}

/// GPU arguments (`DeviceArray`s and Python or NumPy scalars) as the facade takes them.
pub(super) fn describe_gpu(xs: &[Bound<'_, PyAny>]) -> PyResult<Vec<DeviceArg>> {
    xs.iter()
        .map(|x| {
            let py = x.py();
            if x.hasattr(intern!(py, "ptr"))? && x.hasattr(intern!(py, "strides"))? {
                Ok(DeviceArg::Array(dev_array(x)?))
            } else {
                let t = python_scalar_type(x)?;
                Ok(DeviceArg::Scalar(py_scalar(x, t)?))
            }
        })
        .collect()
}

/// Compile (cached) and queue `l` on `stream` (the caller's current stream of `device`;
/// `None`: kiln's current stream there), the GIL released for the compile.
pub(super) fn launch(
    py: Python<'_>,
    device: usize,
    l: &ExprLaunch,
    options: &[String],
    stream: Option<u64>,
) -> PyResult<()> {
    let (_rt, cuda) = kernels::cuda_backend(py, device)?;
    // compiled already (every call after a signature's first): no GIL release needed
    let f = match l.compiled(&cuda, options) {
        Some(f) => f,
        None => {
            let c = cuda.clone();
            py.detach(|| l.compile(&c, options)).py()?
        }
    };
    let stream = stream.unwrap_or_else(|| cuda.stream().cu_stream() as u64);
    // SAFETY: `stream` is the caller's current stream of this device (or kiln's own); the
    // arrays are the caller's live CUDA arrays of this device, shaped as the binding says,
    // held by the Python call for its duration and by their libraries' stream-ordered
    // allocators after.
    unsafe { f.launch_on_stream(&cuda, l.grid(), l.block(), 0, l.args(), stream) }.py()
}
