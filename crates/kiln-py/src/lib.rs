//! kiln's Python package: `import kiln` over the Rust facade.
//!
//! The native module is `kiln._native`; the package `kiln` (python/kiln) re-exports it and
//! adds the pieces best written in Python (the exception classes, `out_type="like"`, scipy-style
//! argument checks, type stubs). Design:
//! - every op goes through the `kiln` facade crate (no backend crate is called for compute);
//! - a [`Runtime`](kiln::Runtime) per device, shared process-wide ([`runtime_for`]), so
//!   tensors of one device always meet on one backend and one memory pool;
//! - device work and long CPU work run with the GIL released ([`Python::detach`]);
//! - DLPack both ways ([`dlpack`]), through dlpark's structs, capsules and export-request
//!   parsing: imports on a CUDA device wrap the producer's memory (no copy), imports from
//!   host memory copy into a CPU tensor (kiln's CPU storage owns its `Vec`s); exports never
//!   copy; the stream handshake follows the array API standard (event waits, no device-wide
//!   synchronisation);
//! - kiln's error enum maps to one exception hierarchy ([`errors`]).
#![deny(missing_docs)]

mod calibrate;
mod dlpack;
mod errors;
mod finance;
mod finance_greeks;
mod kernels;
mod ndimage;
mod ndimage_distance;
mod ndimage_interp;
mod ndimage_label;
mod ops;
mod rawcall;
mod risk;
mod runtime;
mod tensor;
mod userexpr;

use kiln::{Config, DeviceRequest, Runtime};
use pyo3::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) use errors::IntoPy;

/// Runtimes by the request that made them (`auto`, `cuda`) and by the device they use
/// (`cpu`, `cuda:N`).
static RUNTIMES: OnceLock<Mutex<HashMap<String, Arc<Runtime>>>> = OnceLock::new();

fn runtimes() -> std::sync::MutexGuard<'static, HashMap<String, Arc<Runtime>>> {
    RUNTIMES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The process-wide runtime for `device` (`auto`, `cpu`, `cuda`, `cuda:N`), created on first
/// use with the GIL released (a CUDA context takes a few hundred ms).
pub(crate) fn runtime_for(py: Python<'_>, device: &str) -> PyResult<Arc<Runtime>> {
    let key = device.trim().to_ascii_lowercase();
    if let Some(rt) = runtimes().get(&key) {
        return Ok(rt.clone());
    }
    let request: DeviceRequest = key.parse().py()?;
    let rt = py
        .detach(|| -> kiln::Result<Runtime> {
            let config = Config::load(None)?;
            Runtime::new(request, &config)
        })
        .py()?;
    let mut map = runtimes();
    let rt = Arc::new(rt);
    let dev_key = rt.device().to_string();
    let rt = match (map.get(&dev_key), rt.device()) {
        // a CUDA device's runtime exists already: one engine and pool per device
        (Some(existing), kiln::Device::Cuda(_)) => existing.clone(),
        // a CPU runtime holds no pool: `auto` keeps its own (with its fallback reason)
        (Some(_), kiln::Device::Cpu) => rt,
        (None, _) => {
            map.insert(dev_key, rt.clone());
            rt
        }
    };
    map.insert(key, rt.clone());
    Ok(rt)
}

/// The runtime computing on `device`.
pub(crate) fn runtime_on(py: Python<'_>, device: kiln::Device) -> PyResult<Arc<Runtime>> {
    runtime_for(py, &device.to_string())
}

thread_local! {
    /// This thread's `with kiln.Stream(...)` blocks, innermost last.
    static STREAMS: RefCell<Vec<(Arc<Runtime>, kiln::Stream)>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn push_stream(rt: Arc<Runtime>, s: kiln::Stream) {
    STREAMS.with(|v| v.borrow_mut().push((rt, s)));
}

pub(crate) fn pop_stream() {
    STREAMS.with(|v| {
        v.borrow_mut().pop();
    });
}

/// Run `f` on `rt` with this thread's innermost `kiln.Stream` of `rt` current (the ops it
/// queues go there), else on the runtime's default stream.
pub(crate) fn on_stream<R>(rt: &Arc<Runtime>, f: impl FnOnce() -> R) -> kiln::Result<R> {
    let s = STREAMS.with(|v| {
        v.borrow()
            .iter()
            .rev()
            .find(|(r, _)| Arc::ptr_eq(r, rt))
            .map(|(_, s)| *s)
    });
    match s {
        Some(s) => rt.with_stream(&s, f),
        None => Ok(f()),
    }
}

/// Run device or long CPU work: the GIL released, on the current stream of `rt`.
pub(crate) fn run<R: Send>(
    py: Python<'_>,
    rt: &Arc<Runtime>,
    f: impl FnOnce() -> kiln::Result<R> + Send,
) -> PyResult<R> {
    py.detach(|| on_stream(rt, f).and_then(|r| r)).py()
}

/// The native module `kiln._native`.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    runtime::register(m)?;
    tensor::register(m)?;
    dlpack::register(m)?;
    ops::register(m)?;
    finance::register(m)?;
    risk::register(m)?;
    calibrate::register(m)?;
    ndimage::register(m)?;
    ndimage_label::register(m)?;
    ndimage_interp::register(m)?;
    ndimage_distance::register(m)?;
    kernels::register(m)?;
    userexpr::register(m)?;
    Ok(())
}

/// Run `f` with `s` (a stream of `rt`) current.
pub(crate) fn on_stream_of<R>(rt: &Arc<Runtime>, s: &kiln::Stream, f: impl FnOnce() -> R) -> kiln::Result<R> {
    rt.with_stream(s, f)
}
