//! Users' kernels from Python: the native half of `kiln.RawModule` / `kiln.RawKernel`
//! (`python/kiln/_userkernel.py` holds CuPy's calling conventions). A module is compiled by
//! kiln's NVRTC path and cubin cache for the device's exact architecture; a launch takes
//! device arrays as `(address, dtype, length)` (CuPy's, torch's or kiln's memory, any element
//! type) and scalars as `(dtype, value)`, checked against the kernel's parameter list, and
//! runs on the caller's stream (CuPy's or torch's current one), so it is ordered with the
//! caller's own work without an event.

use crate::errors::IntoPy;
use kiln::cuda::user::{KernelArg, Scalar, ScalarType, UserFunction, UserModule};
use kiln::cuda::CudaBackend;
use kiln::{Engine, Runtime};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::sync::Arc;

/// The CUDA backend of device `device` (a `NoDeviceError` where there is none).
pub(crate) fn cuda_backend(py: Python<'_>, device: usize) -> PyResult<(Arc<Runtime>, Arc<CudaBackend>)> {
    let rt = crate::runtime_for(py, &format!("cuda:{device}"))?;
    let c = match rt.engine() {
        Engine::Cuda(c) => c.clone(),
        Engine::Cpu(_) => {
            return Err(crate::errors::invalid(
                "raw CUDA kernels need a GPU; this runtime computes on the CPU",
            ))
        }
    };
    Ok((rt, c))
}

/// A dtype name (NumPy's spelling) as a kernel element type.
pub(crate) fn scalar_type(name: &str) -> PyResult<ScalarType> {
    Ok(match name {
        "bool" => ScalarType::Bool,
        "int8" => ScalarType::I8,
        "int16" => ScalarType::I16,
        "int32" => ScalarType::I32,
        "int64" => ScalarType::I64,
        "uint8" => ScalarType::U8,
        "uint16" => ScalarType::U16,
        "uint32" => ScalarType::U32,
        "uint64" => ScalarType::U64,
        "float16" => ScalarType::F16,
        "bfloat16" => ScalarType::BF16,
        "float32" => ScalarType::F32,
        "float64" => ScalarType::F64,
        other => {
            return Err(PyTypeError::new_err(format!(
                "dtype {other} cannot be a CUDA kernel argument here (bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64)"
            )))
        }
    })
}

/// A Python scalar of dtype `name` as a kernel scalar.
fn scalar(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Scalar> {
    Ok(match scalar_type(name)? {
        ScalarType::Bool => Scalar::Bool(v.extract()?),
        ScalarType::I8 => Scalar::I8(v.extract()?),
        ScalarType::I16 => Scalar::I16(v.extract()?),
        ScalarType::I32 => Scalar::I32(v.extract()?),
        ScalarType::I64 => Scalar::I64(v.extract()?),
        ScalarType::U8 => Scalar::U8(v.extract()?),
        ScalarType::U16 => Scalar::U16(v.extract()?),
        ScalarType::U32 => Scalar::U32(v.extract()?),
        ScalarType::U64 => Scalar::U64(v.extract()?),
        ScalarType::F16 => Scalar::F16(half::f16::from_f64(v.extract()?)),
        ScalarType::BF16 => Scalar::BF16(half::bf16::from_f64(v.extract()?)),
        ScalarType::F32 => Scalar::F32(v.extract()?),
        ScalarType::F64 => Scalar::F64(v.extract()?),
    })
}

/// One argument as `_userkernel.py` passes it: `("ptr", address, dtype, length)` or
/// `("scalar", dtype, value)`.
pub(crate) fn kernel_arg(a: &Bound<'_, PyAny>) -> PyResult<KernelArg<'static>> {
    let kind: String = a.get_item(0)?.extract()?;
    match kind.as_str() {
        "ptr" => {
            let ptr: u64 = a.get_item(1)?.extract()?;
            let dtype: String = a.get_item(2)?.extract()?;
            let len: usize = a.get_item(3)?.extract()?;
            Ok(KernelArg::external(ptr, scalar_type(&dtype)?, len))
        }
        "scalar" => {
            let dtype: String = a.get_item(1)?.extract()?;
            Ok(KernelArg::Scalar(scalar(&dtype, &a.get_item(2)?)?))
        }
        other => Err(PyValueError::new_err(format!("kernel argument kind {other}"))),
    }
}

/// A compiled module of a user's CUDA C++ source on one device.
#[pyclass(name = "_RawModule", module = "kiln._native", frozen)]
pub struct PyRawModule {
    cuda: Arc<CudaBackend>,
    module: Arc<UserModule>,
}

#[pymethods]
impl PyRawModule {
    /// Compile `code` with NVRTC options `options` for device `device` (cached on disk
    /// under the same content hash as kiln's own kernels).
    #[new]
    #[pyo3(signature = (code, options, device = 0))]
    fn new(py: Python<'_>, code: &str, options: Vec<String>, device: usize) -> PyResult<Self> {
        let (_rt, cuda) = cuda_backend(py, device)?;
        let c = cuda.clone();
        let code = code.to_string();
        let module = py.detach(move || c.user_module(&code, &options)).py()?;
        Ok(PyRawModule { cuda, module })
    }

    /// The kernel `name` of the module.
    fn function(&self, name: &str) -> PyResult<PyRawFunction> {
        let f = self.module.function(name).py()?;
        Ok(PyRawFunction {
            cuda: self.cuda.clone(),
            f,
        })
    }

    /// The `extern "C"` kernels kiln found in the source.
    fn kernels(&self) -> Vec<String> {
        self.module.kernels().keys().cloned().collect()
    }
}

/// One kernel of a [`PyRawModule`].
#[pyclass(name = "_RawFunction", module = "kiln._native", frozen)]
pub struct PyRawFunction {
    cuda: Arc<CudaBackend>,
    f: UserFunction,
}

#[pymethods]
impl PyRawFunction {
    /// Launch a `grid` of `block`s with `shared_mem` bytes of dynamic shared memory on
    /// `stream` (a `CUstream` address of this device; `None`: kiln's current stream).
    #[pyo3(signature = (grid, block, args, shared_mem = 0, stream = None))]
    fn launch(
        &self,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: Vec<Bound<'_, PyAny>>,
        shared_mem: u32,
        stream: Option<u64>,
    ) -> PyResult<()> {
        let args: Vec<KernelArg<'static>> = args.iter().map(kernel_arg).collect::<PyResult<_>>()?;
        let stream = stream.unwrap_or_else(|| self.cuda.stream().cu_stream() as u64);
        // SAFETY: `stream` is the caller's current stream of this device (or kiln's own),
        // as `_userkernel.py` passes it; the arrays' owners are held by the Python call
        // for its duration and by their libraries' stream-ordered allocators after.
        unsafe {
            self.f
                .launch_on_stream(&self.cuda, grid, block, shared_mem, &args, stream)
        }
        .py()
    }

    /// The kernel's name.
    #[getter]
    fn name(&self) -> String {
        self.f.name().to_string()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRawModule>()?;
    m.add_class::<PyRawFunction>()?;
    Ok(())
}
