//! `kiln.Tensor`: a facade tensor and the runtime of its device, with DLPack export and the
//! element-wise ops as methods.

use crate::runtime::{dtype_name, parse_dtype};
use crate::{run, runtime_for, IntoPy};
use kiln::core::backend::MapOp;
use kiln::{Device, Runtime, Tensor, UnaryOp};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Arc;

/// An n-d array on one device (row-major, contiguous), the unit every kiln op takes and
/// returns. On CUDA, ops are queued on the current stream and return at once; host reads
/// (`numpy()`) wait and raise errors of the queued work. Exchange with torch, CuPy, NumPy and
/// JAX through DLPack (`torch.from_dlpack(t)`, `kiln.from_dlpack(x)`), without a copy.
#[pyclass(name = "Tensor", module = "kiln", frozen)]
pub struct PyTensor {
    pub(crate) t: Tensor,
    pub(crate) rt: Arc<Runtime>,
    /// Imported inputs of the op that made this tensor: held so that dropping them (which
    /// waits for kiln work reading another library's memory) happens later, not at once.
    keep: Vec<Tensor>,
}

impl PyTensor {
    pub(crate) fn new(t: Tensor, rt: Arc<Runtime>) -> Self {
        PyTensor {
            t,
            rt,
            keep: Vec::new(),
        }
    }

    pub(crate) fn with_inputs(t: Tensor, rt: Arc<Runtime>, keep: Vec<Tensor>) -> Self {
        PyTensor { t, rt, keep }
    }

    pub(crate) fn clone_ref(&self) -> Self {
        PyTensor {
            t: self.t.clone(),
            rt: self.rt.clone(),
            keep: self.keep.clone(),
        }
    }

    fn map(&self, py: Python<'_>, op: MapOp) -> PyResult<PyTensor> {
        let t = &self.t;
        let out = run(py, &self.rt, || t.map(op))?;
        Ok(PyTensor::new(out, self.rt.clone()))
    }
}

#[pymethods]
impl PyTensor {
    /// The shape, a tuple.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t.shape())
    }

    /// The element type's name (`float32`, `float64`, `float16`, `bfloat16`, `uint8`, `uint16`).
    #[getter]
    fn dtype(&self) -> &'static str {
        dtype_name(self.t.dtype())
    }

    /// `cpu` or `cuda:N`.
    #[getter]
    fn device(&self) -> String {
        self.t.device().to_string()
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.t.rank()
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.t.len()
    }

    /// Bytes of element data.
    #[getter]
    fn nbytes(&self) -> usize {
        self.t.size_bytes()
    }

    /// The address of the first element (host or device), as torch's `data_ptr()`.
    #[getter]
    fn data_ptr(&self) -> usize {
        crate::dlpack::data_ptr(&self.t) as usize
    }

    fn __len__(&self) -> usize {
        self.t.shape().first().copied().unwrap_or(0)
    }

    fn __repr__(&self) -> String {
        format!(
            "kiln.Tensor(shape={:?}, dtype={}, device='{}')",
            self.t.shape(),
            dtype_name(self.t.dtype()),
            self.t.device()
        )
    }

    /// `__dlpack__(stream=None, max_version=None, dl_device=None, copy=None)`: a DLPack
    /// capsule over this tensor's memory (never a copy). On CUDA the data is made ready on
    /// `stream` (the consumer's) with an event wait.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        crate::dlpack::export(py, &self.t, stream, max_version, dl_device, copy)
    }

    /// `(device_type, device_id)`: `(1, 0)` for the CPU, `(2, N)` for `cuda:N`.
    fn __dlpack_device__(&self) -> (u32, i32) {
        let d = crate::dlpack::dl_device(self.t.device());
        (d.device_type.0, d.device_id)
    }

    /// A copy on `device` (`cpu`, `cuda`, `cuda:N`, `auto`); the same tensor when it is there.
    fn to(&self, py: Python<'_>, device: &str) -> PyResult<PyTensor> {
        let rt = runtime_for(py, device)?;
        let (t, r) = (&self.t, rt.clone());
        let out = run(py, &rt, || t.to_device(&r))?;
        Ok(PyTensor::new(out, rt))
    }

    /// A copy in host memory (waits for queued work).
    fn cpu(&self, py: Python<'_>) -> PyResult<PyTensor> {
        self.to(py, "cpu")
    }

    /// Every element converted to `dtype` (floats round to nearest-even; uint8/uint16 round
    /// half away from zero and clamp, NaN to 0).
    fn cast(&self, py: Python<'_>, dtype: &str) -> PyResult<PyTensor> {
        let d = parse_dtype(dtype)?;
        let t = &self.t;
        let out = run(py, &self.rt, || t.cast(d))?;
        Ok(PyTensor::new(out, self.rt.clone()))
    }

    /// The same data with another shape of as many elements (no copy).
    #[pyo3(signature = (*shape))]
    fn reshape(&self, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let dims: Vec<usize> = if shape.len() == 1 && shape.get_item(0)?.extract::<usize>().is_err() {
            shape.get_item(0)?.extract()?
        } else {
            shape.extract()?
        };
        Ok(PyTensor::new(self.t.reshape(&dims).py()?, self.rt.clone()))
    }

    /// The transpose of a 2-D tensor.
    fn transpose(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = &self.t;
        let out = run(py, &self.rt, || t.transpose())?;
        Ok(PyTensor::new(out, self.rt.clone()))
    }

    /// The transpose of a 2-D tensor.
    #[getter(T)]
    fn t_(&self, py: Python<'_>) -> PyResult<PyTensor> {
        self.transpose(py)
    }

    /// `1 / (1 + exp(-x))` element-wise (float32, float16, bfloat16; f32 arithmetic).
    fn sigmoid(&self, py: Python<'_>) -> PyResult<PyTensor> {
        self.map(py, MapOp::Unary(UnaryOp::Sigmoid))
    }

    /// `tanh(x)` element-wise.
    fn tanh(&self, py: Python<'_>) -> PyResult<PyTensor> {
        self.map(py, MapOp::Unary(UnaryOp::Tanh))
    }

    /// `max(x, 0)` element-wise (NaN stays NaN).
    fn relu(&self, py: Python<'_>) -> PyResult<PyTensor> {
        self.map(py, MapOp::Unary(UnaryOp::Relu))
    }

    /// `exp(x)` element-wise.
    fn exp(&self, py: Python<'_>) -> PyResult<PyTensor> {
        self.map(py, MapOp::Unary(UnaryOp::Exp))
    }

    /// `a * x + b` element-wise (one f32 fma).
    fn scale_shift(&self, py: Python<'_>, a: f32, b: f32) -> PyResult<PyTensor> {
        self.map(py, MapOp::ScaleShift { a, b })
    }

    /// `min(max(x, lo), hi)` element-wise (NaN stays NaN).
    fn clamp(&self, py: Python<'_>, lo: f32, hi: f32) -> PyResult<PyTensor> {
        self.map(py, MapOp::Clamp { lo, hi })
    }

    /// `a * self + y` (same shape, dtype and device; one fma rounded once).
    fn axpy(&self, py: Python<'_>, a: f32, y: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let (y, keep) = crate::ops::operand(py, y, Some(self.t.device()))?;
        let t = &self.t;
        let out = run(py, &self.rt, || t.axpy(a, &y))?;
        Ok(PyTensor::with_inputs(out, self.rt.clone(), keep))
    }

    /// The matrix product in `precision` (`f32`, `tf32`, `bf16`, `f16`; the storage must be
    /// that precision's type).
    #[pyo3(signature = (b, precision = "f32"))]
    fn matmul(&self, py: Python<'_>, b: &Bound<'_, PyAny>, precision: &str) -> PyResult<PyTensor> {
        let p: kiln::linalg::GemmPrecision = precision.parse().py()?;
        let (b, keep) = crate::ops::operand(py, b, Some(self.t.device()))?;
        let t = &self.t;
        let out = run(py, &self.rt, || t.matmul(&b, p))?;
        Ok(PyTensor::with_inputs(out, self.rt.clone(), keep))
    }

    fn __matmul__(&self, py: Python<'_>, b: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.matmul(py, b, "f32")
    }

    /// A numpy array with the values (waits for queued work). A CPU tensor is shared
    /// without a copy; a device tensor is copied to the host first. bfloat16 has no numpy
    /// type: cast to float32 first.
    fn numpy<'py>(slf: &Bound<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let me = slf.get();
        if me.t.dtype() == kiln::DType::BF16 {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "numpy has no bfloat16: call .cast('float32') first",
            ));
        }
        let host = if me.t.device() == Device::Cpu {
            slf.clone().into_any()
        } else {
            Bound::new(py, me.cpu(py)?)?.into_any()
        };
        py.import("numpy")?.call_method1("from_dlpack", (host,))
    }

    /// `numpy.asarray(t)` support.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut a = Self::numpy(slf, py)?;
        if let Some(d) = dtype {
            a = a.call_method1("astype", (d,))?;
        } else if copy == Some(true) {
            a = a.call_method0("copy")?;
        }
        Ok(a)
    }

    /// Wait until the tensor's data is written; errors of the queued work surface here.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let t = &self.t;
        py.detach(|| t.synchronize()).py()
    }

    /// The runtime this tensor's device computes with.
    #[getter]
    fn runtime(&self) -> crate::runtime::PyRuntime {
        crate::runtime::PyRuntime { rt: self.rt.clone() }
    }

    /// Whether it lives on a CUDA device.
    #[getter]
    fn is_cuda(&self) -> bool {
        matches!(self.t.device(), Device::Cuda(_))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTensor>()?;
    Ok(())
}
