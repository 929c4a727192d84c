//! Users' kernels from Python: the native half of `kiln.RawModule` / `kiln.RawKernel`
//! (`python/kiln/_rawkernel.py` holds CuPy's calling conventions). A module is compiled by
//! kiln's NVRTC path and cubin cache for the device's exact architecture (or loaded from a
//! cubin, PTX or fatbin); a launch takes device arrays as `(address, dtype, length)` (CuPy's,
//! torch's or kiln's memory, any element type) and scalars as `(dtype, value)`, checked
//! against the kernel's parameter list (or, where kiln cannot read it, the sizes the driver
//! reports), and runs on the caller's stream (CuPy's or torch's current one), so it is
//! ordered with the caller's own work without an event.
//!
//! Errors are CuPy's where CuPy's tests expect them: a compile error is
//! `kiln.CompileException` (NVRTC's log as its message) and a driver error
//! `kiln.CUDADriverError` (`CUDA_ERROR_...: description`), both made by `kiln._rawerrors`,
//! which also makes them CuPy's classes when CuPy is loaded.

use crate::errors::{IntoPy, Kind};
use kiln::device::CudaBackend;
use kiln::kernels::KernelCache;
use kiln::kernels::{KernelArg, Scalar, ScalarType, UserFunction, UserModule, UserSource};
use kiln::{Config, Engine, Error, Runtime};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::collections::BTreeMap;
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

/// A dtype name (NumPy's spelling) as a kernel element type, if kiln has one for it.
pub(crate) fn scalar_type_of(name: &str) -> Option<ScalarType> {
    Some(match name {
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
        _ => return None,
    })
}

/// A dtype name as a kernel element type, or a `TypeError` naming the ones kiln has.
pub(crate) fn scalar_type(name: &str) -> PyResult<ScalarType> {
    scalar_type_of(name).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "dtype {name} cannot be a CUDA kernel argument here (bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64)"
        ))
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

/// One argument as `_rawkernel.py` describes it, before the raw bytes are borrowed.
enum Described {
    Arg(KernelArg<'static>),
    Bytes(Vec<u8>),
}

/// `("ptr", address, dtype or None, length)`, `("scalar", dtype, value)`, `("int", value)`
/// (a Python int, no C type) or `("bytes", data, dtype)` (a value kiln has no scalar for,
/// such as a complex number).
fn describe(a: &Bound<'_, PyAny>) -> PyResult<Described> {
    let kind: String = a.get_item(0)?.extract()?;
    Ok(match kind.as_str() {
        "ptr" => {
            let ptr: u64 = a.get_item(1)?.extract()?;
            let dtype: Option<String> = a.get_item(2)?.extract()?;
            let len: usize = a.get_item(3)?.extract()?;
            Described::Arg(match dtype.as_deref().and_then(scalar_type_of) {
                Some(t) => KernelArg::external(ptr, t, len),
                None => KernelArg::external_untyped(ptr, len),
            })
        }
        "scalar" => {
            let dtype: String = a.get_item(1)?.extract()?;
            Described::Arg(KernelArg::Scalar(scalar(&dtype, &a.get_item(2)?)?))
        }
        "int" => {
            let v: i128 = a.get_item(1)?.extract().map_err(|_| {
                PyValueError::new_err("an integer argument beyond 128 bits cannot be a kernel argument")
            })?;
            Described::Arg(KernelArg::Int(v))
        }
        "bytes" => Described::Bytes(a.get_item(1)?.extract()?),
        other => return Err(PyValueError::new_err(format!("kernel argument kind {other}"))),
    })
}

/// What a compile error names, as CuPy's `CompileException` carries it.
struct CompileCtx<'a> {
    source: &'a str,
    name: &'a str,
    options: &'a [String],
}

/// `e` as the Python exception a CuPy user expects: `CompileException` for a compile error,
/// `CUDADriverError` for a driver error (a `DeviceFaultError` too where sticky, an
/// `OutOfMemoryError` too for out of memory); anything else as kiln maps it.
fn raw_err(e: Error, ctx: Option<&CompileCtx<'_>>) -> PyErr {
    Python::attach(|py| {
        let made = (|| -> PyResult<Option<PyErr>> {
            let m = py.import("kiln._rawerrors")?;
            let exc = match &e {
                Error::Compile { .. } => {
                    let (source, name, options) =
                        ctx.map_or(("", "", &[][..]), |c| (c.source, c.name, c.options));
                    m.call_method1("_compile_error", (e.to_string(), source, name, options.to_vec()))?
                }
                Error::Cuda {
                    op,
                    device,
                    code,
                    name,
                } => {
                    let kind = match crate::errors::kind(&e) {
                        Kind::Fault => "fault",
                        Kind::Oom => "oom",
                        _ => "",
                    };
                    let mut msg = format!("{name}: {op} on {device}");
                    if kind == "fault" {
                        msg.push_str("; the CUDA context is poisoned: restart the process");
                    }
                    m.call_method1("_driver_error", (*code, msg, kind))?
                }
                _ => return Ok(None),
            };
            Ok(Some(PyErr::from_value(exc)))
        })();
        match made {
            Ok(Some(err)) => err,
            Ok(None) => crate::errors::to_py(e),
            Err(load) => {
                let err = crate::errors::to_py(e);
                err.set_cause(py, Some(load));
                err
            }
        }
    })
}

/// A compiled module of a user's CUDA C++ source (or a loaded binary) on one device.
#[pyclass(name = "_RawModule", module = "kiln._native", frozen)]
pub struct PyRawModule {
    cuda: Arc<CudaBackend>,
    device: usize,
    module: Arc<UserModule>,
    log: Option<String>,
}

#[pymethods]
impl PyRawModule {
    /// Compile `code` with NVRTC options `options` for device `device` (cached on disk
    /// under the same content hash as kiln's own kernels), instantiating the C++
    /// `name_expressions` and linking with the device runtime library `device_runtime`
    /// (relocatable device code); with `fresh`, compile even when the cache holds the
    /// module, and keep NVRTC's log (`log`).
    #[new]
    #[pyo3(signature = (code, options, device = 0, name_expressions = Vec::new(), fresh = false, device_runtime = None))]
    fn new(
        py: Python<'_>,
        code: &str,
        options: Vec<String>,
        device: usize,
        name_expressions: Vec<String>,
        fresh: bool,
        device_runtime: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let (_rt, cuda) = cuda_backend(py, device)?;
        let c = cuda.clone();
        let mut src = UserSource::new(code, &options)
            .and_then(|s| s.with_name_expressions(&name_expressions))
            .py()?;
        if let Some(lib) = &device_runtime {
            src = src.with_device_runtime(lib).py()?;
        }
        let plain = name_expressions.is_empty() && !fresh && !src.relocatable();
        let cache_dir = Config::load(None).py()?.cache_dir;
        let loaded = py.detach(|| {
            if plain {
                c.user_module(code, &options).map(|m| (m, None))
            } else {
                UserModule::load(&c, &KernelCache::new(&cache_dir), &src, fresh)
            }
        });
        let ctx = CompileCtx {
            source: code,
            name: &format!("{}.cu", src.name()),
            options: src.options(),
        };
        let (module, log) = loaded.map_err(|e| raw_err(e, Some(&ctx)))?;
        Ok(PyRawModule {
            cuda,
            device,
            module,
            log,
        })
    }

    /// Load a compiled module (a cubin, a fatbin, or PTX text) from `image` on `device`.
    #[staticmethod]
    #[pyo3(signature = (image, device = 0, name = "image"))]
    fn from_image(py: Python<'_>, image: Vec<u8>, device: usize, name: &str) -> PyResult<Self> {
        let (_rt, cuda) = cuda_backend(py, device)?;
        let module = UserModule::from_image(&cuda, &image, name).map_err(|e| raw_err(e, None))?;
        Ok(PyRawModule {
            cuda,
            device,
            module: Arc::new(module),
            log: None,
        })
    }

    /// Load a compiled module from the file `path` (`cuModuleLoad`) on `device`.
    #[staticmethod]
    #[pyo3(signature = (path, device = 0))]
    fn from_file(py: Python<'_>, path: &str, device: usize) -> PyResult<Self> {
        let (_rt, cuda) = cuda_backend(py, device)?;
        let module = UserModule::from_file(&cuda, path).map_err(|e| raw_err(e, None))?;
        Ok(PyRawModule {
            cuda,
            device,
            module: Arc::new(module),
            log: None,
        })
    }

    /// The kernel `name` (an `extern "C"` name or a name expression); a name the module
    /// lacks is `CUDADriverError` (`CUDA_ERROR_NOT_FOUND`), as in CuPy.
    fn function(&self, name: &str) -> PyResult<PyRawFunction> {
        let f = self.module.get_function(name).map_err(|e| raw_err(e, None))?;
        Ok(PyRawFunction {
            cuda: self.cuda.clone(),
            device: self.device,
            f,
        })
    }

    /// The address and size in bytes of the global variable `name`.
    fn get_global(&self, name: &str) -> PyResult<(u64, usize)> {
        self.module.global(name).map_err(|e| raw_err(e, None))
    }

    /// The `__global__` functions kiln found in the source.
    fn kernels(&self) -> Vec<String> {
        self.module.kernels().keys().cloned().collect()
    }

    /// Each name expression's mangled symbol.
    #[getter]
    fn mapping(&self) -> BTreeMap<String, String> {
        self.module.lowered_names().clone()
    }

    /// NVRTC's log of a fresh compile (`None` when the module came from the cache or a
    /// binary).
    #[getter]
    fn log(&self) -> Option<String> {
        self.log.clone()
    }

    /// The module's name.
    #[getter]
    fn name(&self) -> String {
        self.module.name().to_string()
    }
}

/// One kernel of a [`PyRawModule`].
#[pyclass(name = "_RawFunction", module = "kiln._native", frozen)]
pub struct PyRawFunction {
    cuda: Arc<CudaBackend>,
    /// The CUDA ordinal the module was loaded on.
    device: usize,
    f: UserFunction,
}

impl PyRawFunction {
    /// Launch with `args` on `stream` (`None`: kiln's current stream of this device).
    fn launch_read(
        &self,
        args: &[KernelArg<'_>],
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_mem: u32,
        stream: Option<u64>,
        cooperative: bool,
    ) -> PyResult<()> {
        let stream = stream.unwrap_or_else(|| self.cuda.stream().cu_stream() as u64);
        let coop;
        let f = if cooperative {
            coop = self.f.cooperative(true);
            &coop
        } else {
            &self.f
        };
        // SAFETY: `stream` is the caller's current stream of this device (or kiln's own),
        // as `_rawkernel.py` passes it; the arrays' owners are held by the Python call
        // for its duration and by their libraries' stream-ordered allocators after.
        unsafe { f.launch_on_stream(&self.cuda, grid, block, shared_mem, args, stream) }
            .map_err(|e| raw_err(e, None))
    }
}

#[pymethods]
impl PyRawFunction {
    /// Launch a `grid` of `block`s with `shared_mem` bytes of dynamic shared memory on
    /// `stream` (a `CUstream` address of this device; `None`: kiln's current stream), with
    /// `cuLaunchCooperativeKernel` where `cooperative`.
    #[pyo3(signature = (grid, block, args, shared_mem = 0, stream = None, cooperative = false))]
    fn launch(
        &self,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: Vec<Bound<'_, PyAny>>,
        shared_mem: u32,
        stream: Option<u64>,
        cooperative: bool,
    ) -> PyResult<()> {
        let described: Vec<Described> = args.iter().map(describe).collect::<PyResult<_>>()?;
        let args: Vec<KernelArg<'_>> = described
            .iter()
            .map(|d| match d {
                Described::Arg(a) => *a,
                Described::Bytes(b) => KernelArg::Bytes(b),
            })
            .collect();
        self.launch_read(&args, grid, block, shared_mem, stream, cooperative)
    }

    /// CuPy's call `k(grid, block, args, shared_mem=..., stream=...)` read natively
    /// ([`crate::rawcall`]): launched, `True`; `False` where the call is not the common one
    /// (then nothing is launched, and `_rawkernel.py` takes its general path, which words
    /// every error).
    fn call(
        &self,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyAny>,
        shared_mem: &Bound<'_, PyAny>,
        stream: &Bound<'_, PyAny>,
        cooperative: bool,
    ) -> PyResult<bool> {
        let Some(r) = crate::rawcall::read(grid.py(), self.device, grid, block, args, shared_mem, stream)
        else {
            return Ok(false);
        };
        self.launch_read(&r.args, r.grid, r.block, r.shared_mem, r.stream, cooperative)?;
        Ok(true)
    }

    /// The kernel's attributes (CuPy's `RawKernel.attributes`).
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let a = self.f.attributes().map_err(|e| raw_err(e, None))?;
        let d = PyDict::new(py);
        for (k, v) in [
            ("max_threads_per_block", a.max_threads_per_block),
            ("shared_size_bytes", a.shared_size_bytes),
            ("const_size_bytes", a.const_size_bytes),
            ("local_size_bytes", a.local_size_bytes),
            ("num_regs", a.num_regs),
            ("ptx_version", a.ptx_version),
            ("binary_version", a.binary_version),
            ("cache_mode_ca", a.cache_mode_ca),
            ("max_dynamic_shared_size_bytes", a.max_dynamic_shared_size_bytes),
            (
                "preferred_shared_memory_carveout",
                a.preferred_shared_memory_carveout,
            ),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Set `max_dynamic_shared_size_bytes` or `preferred_shared_memory_carveout`.
    fn set_attribute(&self, name: &str, value: i32) -> PyResult<()> {
        match name {
            "max_dynamic_shared_size_bytes" => self.f.set_max_dynamic_shared_size_bytes(value),
            "preferred_shared_memory_carveout" => self.f.set_preferred_shared_memory_carveout(value),
            other => {
                return Err(PyValueError::new_err(format!(
                    "{other} cannot be set; the settable attributes are max_dynamic_shared_size_bytes and preferred_shared_memory_carveout"
                )))
            }
        }
        .map_err(|e| raw_err(e, None))
    }

    /// The kernel's name.
    #[getter]
    fn name(&self) -> String {
        self.f.name().to_string()
    }

    /// The parameter declarations arguments are checked against, or `None` where kiln
    /// checks them by size only (or cannot check them).
    #[getter]
    fn params(&self) -> Option<Vec<String>> {
        self.f
            .params()
            .ok()
            .map(|p| p.iter().map(|p| p.text.clone()).collect())
    }

    /// The parameter sizes in bytes the driver reports (`None` before CUDA 12.4).
    #[getter]
    fn param_sizes(&self) -> Option<Vec<usize>> {
        self.f.param_sizes().map(<[usize]>::to_vec)
    }
}

/// Compile `code` for `arch` (`sm_90`, ...) with NVRTC alone, no GPU needed: the cubin
/// (loadable with `RawModule(code=cubin)` on a device of that arch), NVRTC's log and each
/// name expression's symbol. A compile error is `CompileException`, as at a module's first
/// use.
#[pyfunction]
#[pyo3(signature = (code, options, arch, name_expressions = Vec::new()))]
fn _raw_compile<'py>(
    py: Python<'py>,
    code: &str,
    options: Vec<String>,
    arch: &str,
    name_expressions: Vec<String>,
) -> PyResult<(Bound<'py, PyBytes>, String, BTreeMap<String, String>)> {
    let src = UserSource::new(code, &options)
        .and_then(|s| s.with_name_expressions(&name_expressions))
        .py()?;
    let ctx = CompileCtx {
        source: code,
        name: &format!("{}.cu", src.name()),
        options: src.options(),
    };
    let c = py
        .detach(|| src.compile_full(arch))
        .map_err(|e| raw_err(e, Some(&ctx)))?;
    let mapping = src.name_expressions().iter().cloned().zip(c.lowered).collect();
    Ok((PyBytes::new(py, &c.cubin), c.log, mapping))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRawModule>()?;
    m.add_class::<PyRawFunction>()?;
    m.add_function(wrap_pyfunction!(_raw_compile, m)?)?;
    Ok(())
}
