//! The native half of `kiln.ElementwiseKernel` and `kiln.ReductionKernel` (CuPy's calling
//! conventions live in `python/kiln/_userkernel.py`): kiln-expr parses and types the kernel,
//! then either evaluates it on the CPU over NumPy arrays (read in place through
//! `__array_interface__`, any strides) or, through the facade's `ExprLaunch`, generates its
//! CUDA source, compiles it through kiln's NVRTC path and cubin cache, and launches it on the
//! caller's stream over CUDA arrays given as `(address, dtype, shape, strides)`.

use kiln::expr_kernel::{DeviceArg, ExprLaunch, LaunchCache};
use kiln_expr::{ArgSpec, Axis, ElementwiseKernel, ReductionKernel, Scalar, ScalarType};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyComplex, PyTuple};
use std::collections::HashSet;
use std::sync::Mutex;

mod device;
mod fast;
pub(crate) mod host;

use device::{describe_gpu, launch};
use host::{cpu_args, describe_cpu, out_mut, out_views};

/// A kernel error as `InvalidInputError` carrying only its reason, CuPy's message where
/// CuPy has one (``Loop size is undecided.``), not kiln's `op: invalid argument:` prefix.
fn expr_err(e: kiln::Error) -> PyErr {
    match e {
        kiln::Error::InvalidArgument { reason, .. } => crate::errors::invalid(reason),
        e => crate::errors::to_py(e),
    }
}

fn dtype(name: &str) -> PyResult<ScalarType> {
    ScalarType::from_name(name)
        .map_err(expr_err)?
        .ok_or_else(|| PyTypeError::new_err(format!("dtype {name} is not a kernel type")))
}

/// `("array", dtype, shape)` or `("scalar", dtype)` as an argument spec.
fn spec(d: &Bound<'_, PyAny>) -> PyResult<ArgSpec> {
    let kind: String = d.get_item(0)?.extract()?;
    let t = dtype(&d.get_item(1)?.extract::<String>()?)?;
    Ok(match kind.as_str() {
        "array" => ArgSpec::Array {
            dtype: t,
            shape: d.get_item(2)?.extract()?,
        },
        _ => ArgSpec::Scalar(t),
    })
}

fn specs(ds: &[Bound<'_, PyAny>]) -> PyResult<Vec<ArgSpec>> {
    ds.iter().map(spec).collect()
}

/// A Python number as a scalar of `t` (C's conversion, as CuPy applies it to a kernel's
/// scalar argument; a complex number as complex128, converted as NumPy's `astype`).
fn py_scalar(v: &Bound<'_, PyAny>, t: ScalarType) -> PyResult<Scalar> {
    let v = if v.hasattr("item")? {
        v.call_method0("item")?
    } else {
        v.clone()
    };
    let s = if let Ok(b) = v.extract::<bool>() {
        Scalar::Bool(b)
    } else if let Ok(i) = v.extract::<i64>() {
        Scalar::I64(i)
    } else if let Ok(u) = v.extract::<u64>() {
        Scalar::U64(u)
    } else if let Ok(f) = v.extract::<f64>() {
        Scalar::F64(f)
    } else if let Ok(c) = v.cast::<PyComplex>() {
        Scalar::C128(c.real(), c.imag())
    } else {
        return Err(PyTypeError::new_err(format!(
            "unsupported scalar {}; pass a number",
            v.get_type().name()?
        )));
    };
    Ok(s.cast(t))
}

/// The native `ElementwiseKernel`.
#[pyclass(name = "_ElementwiseKernel", module = "kiln._native", frozen)]
pub struct PyElementwise {
    k: ElementwiseKernel,
    /// Launches by argument signature: a repeated call only fills in its arrays' addresses.
    cache: LaunchCache,
    /// The fast path's output shapes and types by input signature.
    out_bindings: Mutex<fast::OutBindings>,
    /// The argument array types whose source the Python layer has been given.
    sourced: Mutex<HashSet<Vec<ScalarType>>>,
}

/// Signatures either cache of [`PyElementwise`] keeps before starting over.
const FAST_KEPT: usize = 256;

impl PyElementwise {
    /// The output shape and types of a call of `ins` alone (no outputs given), bound once per
    /// signature; `None` where binding fails (the general path words the error).
    fn out_binding(&self, ins: &[DeviceArg], size: Option<usize>) -> Option<(Vec<usize>, Vec<ScalarType>)> {
        let specs: Vec<ArgSpec> = ins.iter().map(DeviceArg::spec).collect();
        let key = (specs, size);
        let mut m = self.out_bindings.lock().ok()?;
        if let Some(v) = m.get(&key) {
            return Some(v.clone());
        }
        let b = self.k.bind(&key.0, &[], size).ok()?;
        let v = (b.shape.clone(), b.param_types[ins.len()..].to_vec());
        if m.len() >= FAST_KEPT {
            m.clear();
        }
        m.insert(key, v.clone());
        Some(v)
    }

    /// Whether `types` is new to the Python layer's `_cached_codes` (then recorded).
    fn first_sighting(&self, types: &[ScalarType]) -> bool {
        let Ok(mut s) = self.sourced.lock() else {
            return true;
        };
        if s.contains(types) {
            return false;
        }
        if s.len() >= FAST_KEPT {
            s.clear();
        }
        s.insert(types.to_vec());
        true
    }
}

#[pymethods]
impl PyElementwise {
    #[new]
    fn new(in_params: &str, out_params: &str, operation: &str, name: &str, preamble: &str) -> PyResult<Self> {
        let k = ElementwiseKernel::new(in_params, out_params, operation, name)
            .map_err(expr_err)?
            .with_preamble(preamble);
        Ok(PyElementwise {
            k,
            cache: LaunchCache::default(),
            out_bindings: Mutex::default(),
            sourced: Mutex::default(),
        })
    }

    #[getter]
    fn nin(&self) -> usize {
        self.k.in_params().len()
    }

    #[getter]
    fn nout(&self) -> usize {
        self.k.out_params().len()
    }

    /// A call on CUDA arrays read in one native step ([`fast`]): `(outputs, new source)`, or
    /// `None` (nothing launched) where the call is not the common one and the Python layer
    /// takes its general path.
    #[pyo3(signature = (args, size = None, block_size = None, stream = None, options = None))]
    fn call_fast(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        size: Option<usize>,
        block_size: Option<u32>,
        stream: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyTuple>>,
    ) -> PyResult<Option<fast::Called>> {
        let none = py.None().into_bound(py);
        let empty = PyTuple::empty(py);
        fast::call(
            py,
            self,
            args,
            size,
            block_size,
            stream.unwrap_or(&none),
            options.unwrap_or(&empty),
        )
    }

    /// `(shape, output dtype names)` for the arguments described.
    #[pyo3(signature = (ins, outs, size = None))]
    fn bind(
        &self,
        ins: Vec<Bound<'_, PyAny>>,
        outs: Vec<Bound<'_, PyAny>>,
        size: Option<usize>,
    ) -> PyResult<(Vec<usize>, Vec<String>)> {
        let b = self
            .k
            .bind(&specs(&ins)?, &specs(&outs)?, size)
            .map_err(expr_err)?;
        let nin = ins.len();
        Ok((
            b.shape.clone(),
            b.param_types[nin..]
                .iter()
                .map(|t| t.name().to_string())
                .collect(),
        ))
    }

    /// The CUDA source for the arguments described.
    #[pyo3(signature = (ins, outs, size = None))]
    fn cuda_source(
        &self,
        ins: Vec<Bound<'_, PyAny>>,
        outs: Vec<Bound<'_, PyAny>>,
        size: Option<usize>,
    ) -> PyResult<String> {
        let b = self
            .k
            .bind(&specs(&ins)?, &specs(&outs)?, size)
            .map_err(expr_err)?;
        self.k.cuda_source(&b).map_err(expr_err)
    }

    /// Run on the CPU: `ins` NumPy arrays and scalars, `outs` C-contiguous NumPy arrays
    /// (`given`: the caller passed them; else they were allocated from [`Self::bind`]).
    #[pyo3(signature = (ins, outs, size = None, given = true))]
    fn call_cpu(
        &self,
        py: Python<'_>,
        ins: Vec<Bound<'_, PyAny>>,
        outs: Vec<Bound<'_, PyAny>>,
        size: Option<usize>,
        given: bool,
    ) -> PyResult<()> {
        let ov = out_views(&outs)?;
        let in_specs = describe_cpu(&ins)?;
        let out_specs: Vec<ArgSpec> = if given {
            ov.iter()
                .map(|v| ArgSpec::Array {
                    dtype: v.dtype,
                    shape: v.shape.clone(),
                })
                .collect()
        } else {
            Vec::new()
        };
        let b = self.k.bind(&in_specs, &out_specs, size).map_err(expr_err)?;
        let a = cpu_args(&ins, &b.param_types, &ov)?;
        let args = a.args();
        let mut om = out_mut(&ov);
        // the evaluation reads and writes only the views taken above: other Python threads
        // run meanwhile, as they do during a NumPy ufunc
        py.detach(|| self.k.call_bound(&args, &mut om, &b))
            .map_err(expr_err)
    }

    /// Run on a CUDA device: `ins` `DeviceArray`s and scalars, `outs` `DeviceArray`s.
    /// Returns the generated source when `want_source`.
    #[pyo3(signature = (ins, outs, size = None, block_size = None, stream = None, device = 0, options = Vec::new(), given = true, want_source = true))]
    #[allow(clippy::too_many_arguments)]
    fn launch_gpu(
        &self,
        py: Python<'_>,
        ins: Vec<Bound<'_, PyAny>>,
        outs: Vec<Bound<'_, PyAny>>,
        size: Option<usize>,
        block_size: Option<u32>,
        stream: Option<u64>,
        device: usize,
        options: Vec<String>,
        given: bool,
        want_source: bool,
    ) -> PyResult<Option<String>> {
        let l = ExprLaunch::elementwise_cached(
            &self.cache,
            &self.k,
            &describe_gpu(&ins)?,
            &describe_gpu(&outs)?,
            size,
            block_size,
            given,
        )
        .map_err(expr_err)?;
        if l.size() > 0 {
            launch(py, device, &l, &options, stream)?;
        }
        Ok(want_source.then(|| l.source().to_string()))
    }
}

fn axis(a: Option<Vec<isize>>) -> Axis {
    match a {
        None => Axis::All,
        Some(v) if v.len() == 1 => Axis::One(v[0]),
        Some(v) => Axis::Many(v),
    }
}

/// The native `ReductionKernel`.
#[pyclass(name = "_ReductionKernel", module = "kiln._native", frozen)]
pub struct PyReduction {
    k: ReductionKernel,
    cache: LaunchCache,
}

#[pymethods]
impl PyReduction {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name, reduce_type, preamble))]
    fn new(
        in_params: &str,
        out_params: &str,
        map_expr: &str,
        reduce_expr: &str,
        post_map_expr: &str,
        identity: Option<&str>,
        name: &str,
        reduce_type: Option<&str>,
        preamble: &str,
    ) -> PyResult<Self> {
        if !preamble.is_empty() {
            return Err(crate::errors::invalid(
                "ReductionKernel: preamble is not supported by kiln's reductions",
            ));
        }
        let k = ReductionKernel::new(
            in_params,
            out_params,
            map_expr,
            reduce_expr,
            post_map_expr,
            identity,
            name,
            reduce_type,
        )
        .map_err(expr_err)?;
        Ok(PyReduction {
            k,
            cache: LaunchCache::default(),
        })
    }

    #[getter]
    fn nin(&self) -> usize {
        self.k.in_params().len()
    }

    #[getter]
    fn nout(&self) -> usize {
        self.k.out_params().len()
    }

    /// `(output shape, output dtype names)`.
    fn bind(
        &self,
        ins: Vec<Bound<'_, PyAny>>,
        outs: Vec<Bound<'_, PyAny>>,
        axis_: Option<Vec<isize>>,
        keepdims: bool,
    ) -> PyResult<(Vec<usize>, Vec<String>)> {
        let rb = self
            .k
            .bind(&specs(&ins)?, &specs(&outs)?, &axis(axis_), keepdims)
            .map_err(expr_err)?;
        let nin = ins.len();
        Ok((
            rb.out_shape.clone(),
            rb.binding.param_types[nin..]
                .iter()
                .map(|t| t.name().to_string())
                .collect(),
        ))
    }

    /// The CUDA source for the arguments described.
    fn cuda_source(
        &self,
        ins: Vec<Bound<'_, PyAny>>,
        outs: Vec<Bound<'_, PyAny>>,
        axis_: Option<Vec<isize>>,
        keepdims: bool,
    ) -> PyResult<String> {
        let rb = self
            .k
            .bind(&specs(&ins)?, &specs(&outs)?, &axis(axis_), keepdims)
            .map_err(expr_err)?;
        self.k.cuda_source(&rb).map_err(expr_err)
    }

    /// Run on the CPU into C-contiguous NumPy outputs.
    fn call_cpu(
        &self,
        py: Python<'_>,
        ins: Vec<Bound<'_, PyAny>>,
        outs: Vec<Bound<'_, PyAny>>,
        axis_: Option<Vec<isize>>,
        keepdims: bool,
    ) -> PyResult<()> {
        let ov = out_views(&outs)?;
        let in_specs = describe_cpu(&ins)?;
        let out_specs: Vec<ArgSpec> = ov
            .iter()
            .map(|v| ArgSpec::Array {
                dtype: v.dtype,
                shape: v.shape.clone(),
            })
            .collect();
        let ax = axis(axis_);
        let rb = self
            .k
            .bind(&in_specs, &out_specs, &ax, keepdims)
            .map_err(expr_err)?;
        let a = cpu_args(&ins, &rb.binding.param_types, &ov)?;
        let args = a.args();
        let mut om = out_mut(&ov);
        py.detach(|| self.k.call(&args, &mut om, &ax, keepdims))
            .map_err(expr_err)
    }

    /// Run on a CUDA device; returns the generated source when `want_source`.
    #[pyo3(signature = (ins, outs, axis_, keepdims, stream = None, device = 0, options = Vec::new(), want_source = true))]
    #[allow(clippy::too_many_arguments)]
    fn launch_gpu(
        &self,
        py: Python<'_>,
        ins: Vec<Bound<'_, PyAny>>,
        outs: Vec<Bound<'_, PyAny>>,
        axis_: Option<Vec<isize>>,
        keepdims: bool,
        stream: Option<u64>,
        device: usize,
        options: Vec<String>,
        want_source: bool,
    ) -> PyResult<Option<String>> {
        let l = ExprLaunch::reduction_cached(
            &self.cache,
            &self.k,
            &describe_gpu(&ins)?,
            &describe_gpu(&outs)?,
            &axis(axis_),
            keepdims,
        )
        .map_err(expr_err)?;
        if l.size() > 0 {
            launch(py, device, &l, &options, stream)?;
        }
        Ok(want_source.then(|| l.source().to_string()))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyElementwise>()?;
    m.add_class::<PyReduction>()?;
    Ok(())
}
