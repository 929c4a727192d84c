//! kiln's errors as Python exceptions: one mapping from kiln-core's error enum to the
//! hierarchy defined in `kiln/_errors.py` (Python classes, so that `OutOfMemoryError` can also
//! be a `MemoryError` and `InvalidInputError` a `ValueError`).

use kiln::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The Python exception classes, loaded once from `kiln._errors`.
struct Classes {
    base: Py<PyType>,
    oom: Py<PyType>,
    fault: Py<PyType>,
    invalid: Py<PyType>,
    no_device: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || {
        let m = py.import("kiln._errors")?;
        let get = |n: &str| -> PyResult<Py<PyType>> { Ok(m.getattr(n)?.cast_into::<PyType>()?.unbind()) };
        Ok(Classes {
            base: get("KilnError")?,
            oom: get("OutOfMemoryError")?,
            fault: get("DeviceFaultError")?,
            invalid: get("InvalidInputError")?,
            no_device: get("NoDeviceError")?,
        })
    })
}

/// Which class an error maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `KilnError`.
    Base,
    /// `OutOfMemoryError` (also `MemoryError`).
    Oom,
    /// `DeviceFaultError` (sticky: restart the process).
    Fault,
    /// `InvalidInputError` (also `ValueError`).
    Invalid,
    /// `NoDeviceError`.
    NoDevice,
}

/// The class of `e`: sticky CUDA errors first (whatever else they are), then out of
/// memory, then the argument errors.
pub fn kind(e: &Error) -> Kind {
    if e.is_sticky() {
        return Kind::Fault;
    }
    if e.is_out_of_memory() {
        return Kind::Oom;
    }
    match e {
        Error::NoDevice(_) => Kind::NoDevice,
        Error::InvalidArgument { .. } | Error::ShapeMismatch { .. } | Error::Config { .. } => Kind::Invalid,
        _ => Kind::Base,
    }
}

/// A Python exception of `kind` with `msg`.
pub fn raise(py: Python<'_>, kind: Kind, msg: String) -> PyErr {
    let c = match classes(py) {
        Ok(c) => c,
        Err(e) => return PyRuntimeError::new_err(format!("{msg} (and kiln._errors failed to load: {e})")),
    };
    let cls = match kind {
        Kind::Base => &c.base,
        Kind::Oom => &c.oom,
        Kind::Fault => &c.fault,
        Kind::Invalid => &c.invalid,
        Kind::NoDevice => &c.no_device,
    };
    PyErr::from_type(cls.bind(py).clone(), msg)
}

/// kiln's error as the matching Python exception. A sticky error's message always says
/// the process must be restarted.
/// A `NoDeviceError` carries `no_gpu`: whether the reason is that this machine has no GPU
/// (no driver, or a driver that reports no device) rather than a fault of one it has.
pub fn to_py(e: Error) -> PyErr {
    let k = kind(&e);
    let no_gpu = matches!(&e, Error::NoDevice(r) if r.means_no_gpu());
    let mut msg = e.to_string();
    if k == Kind::Fault && !msg.contains("restart") {
        msg.push_str("; the CUDA context is poisoned: restart the process");
    }
    Python::attach(|py| {
        let err = raise(py, k, msg);
        if k == Kind::NoDevice {
            // an attribute of the instance; failing to set it leaves the error as it is
            let _ = err.value(py).setattr("no_gpu", no_gpu);
        }
        err
    })
}

/// `InvalidInputError(msg)`.
pub fn invalid(msg: impl Into<String>) -> PyErr {
    Python::attach(|py| raise(py, Kind::Invalid, msg.into()))
}

/// `Result<T, kiln::Error>` to `PyResult<T>`.
pub trait IntoPy<T> {
    /// Map the error with [`to_py`].
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for kiln::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
