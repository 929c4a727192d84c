//! `kiln.Runtime`, `kiln.Stream`, and the process-wide queries: `memory_stats`,
//! `empty_cache`, `doctor`, the profiler.

use crate::tensor::PyTensor;
use crate::{runtime_for, IntoPy};
use kiln::{DType, Runtime};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

/// Parse a dtype name (`float32`/`f32`, `float64`/`f64`, `float16`/`f16`, `bfloat16`/`bf16`,
/// `uint8`/`u8`, `uint16`/`u16`; numpy and torch dtypes by their `str`).
pub(crate) fn parse_dtype(s: &str) -> PyResult<DType> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_start_matches("torch.").trim_start_matches("numpy.");
    Ok(match t {
        "f32" | "float32" | "float" => DType::F32,
        "f64" | "float64" | "double" => DType::F64,
        "f16" | "float16" | "half" => DType::F16,
        "bf16" | "bfloat16" => DType::BF16,
        "u8" | "uint8" => DType::U8,
        "u16" | "uint16" => DType::U16,
        _ => {
            return Err(crate::errors::invalid(format!(
                "unknown dtype `{s}`; kiln holds float32, float64, float16, bfloat16, uint8, uint16"
            )))
        }
    })
}

/// The numpy spelling of a dtype.
pub(crate) fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
    }
}

/// A compute device: `Runtime("auto" | "cpu" | "cuda" | "cuda:N")`. Runtimes are shared per
/// device: two `Runtime("cuda:0")` are the same engine and memory pool.
#[pyclass(name = "Runtime", module = "kiln", frozen)]
pub struct PyRuntime {
    pub(crate) rt: Arc<Runtime>,
}

#[pymethods]
impl PyRuntime {
    #[new]
    #[pyo3(signature = (device = "auto"))]
    fn new(py: Python<'_>, device: &str) -> PyResult<Self> {
        Ok(PyRuntime {
            rt: runtime_for(py, device)?,
        })
    }

    /// `cpu` or `cuda:N`.
    #[getter]
    fn device(&self) -> String {
        self.rt.device().to_string()
    }

    /// `cpu` or `cuda`.
    #[getter]
    fn kind(&self) -> String {
        match self.rt.device() {
            kiln::Device::Cpu => "cpu".into(),
            kiln::Device::Cuda(_) => "cuda".into(),
        }
    }

    /// Why `auto` fell back to the CPU, if it did.
    #[getter]
    fn fallback_reason(&self) -> Option<String> {
        self.rt.fallback_reason().map(str::to_string)
    }

    /// A zero-filled tensor on this device.
    #[pyo3(signature = (shape, dtype = "float32"))]
    fn zeros(&self, py: Python<'_>, shape: Vec<usize>, dtype: &str) -> PyResult<PyTensor> {
        let d = parse_dtype(dtype)?;
        let rt = self.rt.clone();
        let t = crate::run(py, &self.rt, || rt.zeros(&shape, d))?;
        Ok(PyTensor::new(t, self.rt.clone()))
    }

    /// A new stream of this device (see `kiln.Stream`).
    fn stream(&self) -> PyResult<PyStream> {
        Ok(PyStream {
            rt: self.rt.clone(),
            s: self.rt.stream().py()?,
        })
    }

    /// Wait until all queued work on the device is done; errors raised by queued work
    /// surface here.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let rt = self.rt.clone();
        py.detach(|| rt.synchronize()).py()
    }

    /// The device pool's counters as a dict (`None` on the CPU).
    fn memory_stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.rt.memory_stats() {
            Some(s) => json_to_py(py, &serde_json::to_value(s).map_err(json_err)?),
            None => Ok(py.None()),
        }
    }

    /// Release cached device memory; returns the bytes released (0 on the CPU).
    fn empty_cache(&self, py: Python<'_>) -> u64 {
        let rt = self.rt.clone();
        py.detach(|| rt.empty_cache())
    }

    fn __repr__(&self) -> String {
        format!("kiln.Runtime('{}')", self.rt.device())
    }
}

/// A stream of a runtime's device. Use it as a context manager: the ops called inside
/// `with s:` on this thread are queued on it. Tensors order themselves across streams (a
/// use on another stream waits on the writer's event), so mixing streams needs no manual
/// synchronisation.
#[pyclass(name = "Stream", module = "kiln", frozen)]
pub struct PyStream {
    rt: Arc<Runtime>,
    s: kiln::Stream,
}

#[pymethods]
impl PyStream {
    #[new]
    #[pyo3(signature = (device = "auto"))]
    fn new(py: Python<'_>, device: &str) -> PyResult<Self> {
        let rt = runtime_for(py, device)?;
        let s = rt.stream().py()?;
        Ok(PyStream { rt, s })
    }

    /// The device it belongs to.
    #[getter]
    fn device(&self) -> String {
        self.s.device().to_string()
    }

    /// The raw `CUstream` handle (0 on the CPU), for `__dlpack__(stream=...)` or
    /// `torch.cuda.ExternalStream`.
    #[getter]
    fn handle(&self) -> PyResult<usize> {
        let rt = self.rt.clone();
        let h = crate::on_stream_of(&rt, &self.s, || {
            rt.cuda().map(|c| c.stream().cu_stream() as usize)
        })
        .py()?;
        Ok(h.unwrap_or(0))
    }

    /// Wait on the host for the work queued on this stream.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let rt = self.rt.clone();
        let s = self.s;
        py.detach(move || -> kiln::Result<()> {
            let ev = rt.with_stream(&s, || rt.record_event())??;
            ev.synchronize()
        })
        .py()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        let me = slf.get();
        crate::push_stream(me.rt.clone(), me.s);
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        crate::pop_stream();
        false
    }

    fn __repr__(&self) -> String {
        format!("kiln.Stream(device='{}')", self.s.device())
    }
}

fn json_err(e: serde_json::Error) -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err(e.to_string())
}

/// A JSON value as Python objects (through the `json` module: these are small reports).
pub(crate) fn json_to_py(py: Python<'_>, v: &serde_json::Value) -> PyResult<Py<PyAny>> {
    let s = serde_json::to_string(v).map_err(json_err)?;
    Ok(py.import("json")?.call_method1("loads", (s,))?.unbind())
}

/// `memory_stats(device=None)`: the pool counters of `device` (default: the `auto` runtime).
#[pyfunction]
#[pyo3(signature = (device = None))]
fn memory_stats(py: Python<'_>, device: Option<&str>) -> PyResult<Py<PyAny>> {
    PyRuntime::new(py, device.unwrap_or("auto"))?.memory_stats(py)
}

/// `empty_cache(device=None)`: release the cached device memory of `device`.
#[pyfunction]
#[pyo3(signature = (device = None))]
fn empty_cache(py: Python<'_>, device: Option<&str>) -> PyResult<u64> {
    Ok(PyRuntime::new(py, device.unwrap_or("auto"))?.empty_cache(py))
}

/// `synchronize(device=None)`: wait for all queued work on `device`.
#[pyfunction]
#[pyo3(signature = (device = None))]
fn synchronize(py: Python<'_>, device: Option<&str>) -> PyResult<()> {
    PyRuntime::new(py, device.unwrap_or("auto"))?.synchronize(py)
}

/// `doctor()`: what kiln sees (driver, devices, NVRTC, the effective config, the device
/// `auto` picks and why) as a dict; never raises for a missing GPU.
#[pyfunction]
fn doctor(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    d.set_item("version", env!("CARGO_PKG_VERSION"))?;
    let (probe, nvrtc, config) = py.detach(|| {
        (
            kiln::device::probe(),
            kiln::device::nvrtc_available(),
            Config::load(None),
        )
    });
    match probe {
        Ok(p) => {
            d.set_item("driver_version", p.driver_version)?;
            d.set_item(
                "devices",
                json_to_py(py, &serde_json::to_value(&p.devices).map_err(json_err)?)?,
            )?;
        }
        Err(e) => {
            d.set_item("driver_version", py.None())?;
            d.set_item("devices", Vec::<String>::new())?;
            d.set_item("driver_error", e.to_string())?;
        }
    }
    d.set_item("nvrtc", nvrtc)?;
    match config {
        Ok(c) => d.set_item("config", format!("{c:?}"))?,
        Err(e) => d.set_item("config_error", e.to_string())?,
    }
    match runtime_for(py, "auto") {
        Ok(rt) => {
            d.set_item("auto_device", rt.device().to_string())?;
            d.set_item("fallback_reason", rt.fallback_reason())?;
        }
        Err(e) => d.set_item("auto_error", e.to_string())?,
    }
    Ok(d.into_any().unbind())
}

/// `profiler_enable(on=True)`: turn kiln's profiler (host ranges; device ranges on CUDA) on
/// or off.
#[pyfunction]
#[pyo3(signature = (on = true))]
fn profiler_enable(on: bool) {
    kiln::profiler().set_enabled(on);
}

/// `profiler_report()`: the aggregated ranges so far, as a dict.
#[pyfunction]
fn profiler_report(py: Python<'_>) -> PyResult<Py<PyAny>> {
    json_to_py(
        py,
        &serde_json::to_value(kiln::profiler().report()).map_err(json_err)?,
    )
}

/// `profiler_reset()`: forget the ranges recorded so far.
#[pyfunction]
fn profiler_reset() {
    kiln::profiler().reset();
}

use kiln::Config;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRuntime>()?;
    m.add_class::<PyStream>()?;
    m.add_function(wrap_pyfunction!(memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(empty_cache, m)?)?;
    m.add_function(wrap_pyfunction!(synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(doctor, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_enable, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_report, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_reset, m)?)?;
    Ok(())
}
