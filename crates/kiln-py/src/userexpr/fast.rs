//! An `ElementwiseKernel` call on CUDA arrays read in one native step, as `RawKernel`'s
//! ([`crate::rawcall`]): CuPy arrays and kiln tensors straight from their attributes, Python
//! numbers and NumPy scalars of the kernel types, the outputs allocated with `cupy.empty`,
//! the launch on the caller's stream.
//!
//! The general path (`_userkernel.py`'s `_Call`, `DeviceArray`, `_bound`) turns each argument
//! into Python objects and tuples before the native launch, and the launch reads them back
//! with failing attribute probes and `.item()` calls: about 20 µs a small call against
//! RawKernel's 4. This reader answers `None` without launching for anything it does not know
//! (torch tensors, `__cuda_array_interface__` objects, strided arrays, an argument on another
//! device or on the host, a binding error, a kiln-tensor call that needs outputs allocated),
//! and the Python layer then takes its general path, which knows every case and words every
//! error as CuPy does. So the fast path changes no result and no message, only the time.

use super::device::launch;
use super::PyElementwise;
use crate::rawcall::{cupy, dtype_cached, named_stream, numpy_types, Cupy};
use kiln::expr_kernel::{DeviceArg, DeviceArray, ExprLaunch};
use kiln::Device;
use kiln_expr::{ArgSpec, Scalar, ScalarType};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyComplex, PyFloat, PyInt, PyTuple, PyType};
use std::sync::Mutex;

/// NumPy's scalar types that are kernel types (complex ones go the general way).
static NUMPY: PyOnceLock<Vec<(Py<PyType>, ScalarType)>> = PyOnceLock::new();
const NUMPY_SCALARS: [(&str, ScalarType); 12] = [
    ("float32", ScalarType::F32),
    ("float64", ScalarType::F64),
    ("int32", ScalarType::I32),
    ("int64", ScalarType::I64),
    ("uint32", ScalarType::U32),
    ("uint64", ScalarType::U64),
    ("int8", ScalarType::I8),
    ("uint8", ScalarType::U8),
    ("int16", ScalarType::I16),
    ("uint16", ScalarType::U16),
    ("float16", ScalarType::F16),
    ("bool_", ScalarType::Bool),
];

/// Array dtypes seen, by identity, with their kernel type (`None`: not one).
static DTYPES: Mutex<Vec<(Py<PyAny>, Option<ScalarType>)>> = Mutex::new(Vec::new());

fn numpy_scalars(py: Python<'_>) -> Option<&'static [(Py<PyType>, ScalarType)]> {
    numpy_types(py, &NUMPY, &NUMPY_SCALARS)
}

/// NumPy's dtype objects by kernel type, made once each: `cupy.empty` takes one without
/// parsing a name.
static NP_DTYPES: Mutex<Vec<(ScalarType, Py<PyAny>)>> = Mutex::new(Vec::new());

fn numpy_dtype<'py>(py: Python<'py>, t: ScalarType) -> PyResult<Bound<'py, PyAny>> {
    let mut made = NP_DTYPES
        .lock()
        .map_err(|_| pyo3::exceptions::PyRuntimeError::new_err("dtype cache poisoned"))?;
    if let Some((_, d)) = made.iter().find(|(k, _)| *k == t) {
        return Ok(d.bind(py).clone());
    }
    let d = py.import("numpy")?.getattr("dtype")?.call1((t.name(),))?;
    made.push((t, d.clone().unbind()));
    Ok(d)
}

/// The kernel type of a NumPy dtype object (`dtype.name` read once per dtype).
fn dtype_type(dtype: &Bound<'_, PyAny>) -> Option<ScalarType> {
    dtype_cached(&DTYPES, dtype, |name| ScalarType::from_name(name).ok().flatten())?
}

/// A scalar as the general path converts it (`_scalar_desc`, then `py_scalar`): Python
/// numbers as `bool`, `int64`, `float64`, `complex128`; NumPy scalars as their own type.
fn scalar(py: Python<'_>, a: &Bound<'_, PyAny>) -> Option<Scalar> {
    if a.is_exact_instance_of::<PyFloat>() {
        return Some(Scalar::F64(a.extract().ok()?));
    }
    if a.is_exact_instance_of::<PyBool>() {
        return Some(Scalar::Bool(a.is_truthy().ok()?));
    }
    if a.is_exact_instance_of::<PyInt>() {
        // past int64 the general path types it otherwise: let it
        return Some(Scalar::I64(a.extract().ok()?));
    }
    if a.is_exact_instance_of::<PyComplex>() {
        let c = a.cast::<PyComplex>().ok()?;
        return Some(Scalar::C128(c.real(), c.imag()));
    }
    let ty = a.get_type();
    let (_, t) = numpy_scalars(py)?
        .iter()
        .find(|(nt, _)| nt.as_ptr() == ty.as_ptr())?;
    // `py_scalar`'s conversion: the value as a Python number, then C's cast to the type
    Some(match t {
        ScalarType::Bool => Scalar::Bool(a.is_truthy().ok()?),
        ScalarType::F16 | ScalarType::F32 | ScalarType::F64 => Scalar::F64(a.extract().ok()?).cast(*t),
        ScalarType::U64 => Scalar::U64(a.extract().ok()?),
        _ => Scalar::I64(a.extract().ok()?).cast(*t),
    })
}

/// One array argument: the device it is on and its description, or `None` where the reader
/// does not know it.
fn array(py: Python<'_>, cp: Option<&Cupy>, a: &Bound<'_, PyAny>) -> Option<(usize, DeviceArray, bool)> {
    if let Some(c) = cp {
        if a.get_type().as_ptr() == c.ndarray.as_ptr() {
            let flags = a.getattr(intern!(py, "flags")).ok()?;
            if !flags
                .getattr(intern!(py, "c_contiguous"))
                .ok()?
                .is_truthy()
                .ok()?
            {
                return None;
            }
            let data = a.getattr(intern!(py, "data")).ok()?;
            let dev: usize = data.getattr(intern!(py, "device_id")).ok()?.extract().ok()?;
            let ptr: u64 = data.getattr(intern!(py, "ptr")).ok()?.extract().ok()?;
            let dtype = dtype_type(&a.getattr(intern!(py, "dtype")).ok()?)?;
            let shape: Vec<usize> = a.getattr(intern!(py, "shape")).ok()?.extract().ok()?;
            return Some((dev, DeviceArray::contiguous(ptr, dtype, &shape), true));
        }
    }
    let t = a.cast::<crate::tensor::PyTensor>().ok()?;
    let t = &t.get().t;
    let Device::Cuda(dev) = t.device() else {
        return None;
    };
    let dtype = ScalarType::from_name(crate::runtime::dtype_name(t.dtype())).ok()??;
    let ptr = crate::dlpack::data_ptr(t) as u64;
    Some((dev, DeviceArray::contiguous(ptr, dtype, t.shape()), false))
}

/// What a fast call gives Python: the outputs (allocated or the caller's), and for array
/// types not seen before (the arguments' in order, as `_cached_codes` keys them), the key
/// and the generated source.
pub(super) type Called = (Vec<Py<PyAny>>, Option<(Py<PyTuple>, String)>);

/// Run `k` on `args` the fast way, or `None` for the general path.
#[allow(clippy::too_many_arguments)]
pub(super) fn call(
    py: Python<'_>,
    st: &PyElementwise,
    args: &Bound<'_, PyTuple>,
    size: Option<usize>,
    block_size: Option<u32>,
    stream: &Bound<'_, PyAny>,
    options: &Bound<'_, PyTuple>,
) -> PyResult<Option<Called>> {
    let (nin, nout) = (st.k.in_params().len(), st.k.out_params().len());
    let given = args.len() == nin + nout;
    if !given && args.len() != nin {
        return Ok(None);
    }
    let cp = cupy(py);
    let mut ins = Vec::with_capacity(nin);
    let mut outs = Vec::with_capacity(nout);
    let mut device = None;
    // the first array: CuPy's (its current stream and allocator serve the call) or kiln's
    let mut first_cupy = None;
    let mut key = Vec::with_capacity(args.len());
    for (k, a) in args.iter().enumerate() {
        let arg = if let Some((dev, d, is_cupy)) = array(py, cp, &a) {
            if *device.get_or_insert(dev) != dev {
                return Ok(None);
            }
            first_cupy.get_or_insert(is_cupy);
            key.push(d.dtype);
            DeviceArg::Array(d)
        } else if k < nin {
            match scalar(py, &a) {
                Some(s) => DeviceArg::Scalar(s),
                None => return Ok(None),
            }
        } else {
            return Ok(None);
        };
        if k < nin {
            ins.push(arg);
        } else {
            outs.push(arg);
        }
    }
    let (Some(device), Some(first_cupy)) = (device, first_cupy) else {
        return Ok(None);
    };
    let stream = if stream.is_none() {
        match (first_cupy, cp) {
            (true, Some(c)) => Some(
                c.current_stream
                    .bind(py)
                    .call0()?
                    .getattr(intern!(py, "ptr"))?
                    .extract::<u64>()?,
            ),
            _ => None,
        }
    } else {
        match named_stream(stream) {
            Some(s) => Some(s),
            None => return Ok(None),
        }
    };
    let mut made = Vec::new();
    if !given {
        let (Some(c), true) = (cp, first_cupy) else {
            return Ok(None);
        };
        let Some((shape, types)) = st.out_binding(&ins, size) else {
            return Ok(None);
        };
        let shape_t = PyTuple::new(py, &shape)?;
        for t in types {
            let o = c.empty.bind(py).call1((&shape_t, numpy_dtype(py, t)?))?;
            let ptr: u64 = o
                .getattr(intern!(py, "data"))?
                .getattr(intern!(py, "ptr"))?
                .extract()?;
            outs.push(DeviceArg::Array(DeviceArray::contiguous(ptr, t, &shape)));
            made.push(o.unbind());
        }
    }
    let Ok(l) = ExprLaunch::elementwise_cached(&st.cache, &st.k, &ins, &outs, size, block_size, given) else {
        return Ok(None);
    };
    let options: Vec<String> = if options.is_empty() {
        Vec::new()
    } else {
        options.extract()?
    };
    if l.size() > 0 {
        launch(py, device, &l, &options, stream)?;
    }
    let results = if given {
        args.iter().skip(nin).map(Bound::unbind).collect()
    } else {
        made
    };
    let fresh = st.first_sighting(&key).then(|| -> PyResult<_> {
        let names = PyTuple::new(py, key.iter().map(|t| t.name()))?.unbind();
        Ok((names, l.source().to_string()))
    });
    Ok(Some((results, fresh.transpose()?)))
}

/// Output shapes and types bound from the inputs alone, by the inputs' specs and `size`.
pub(super) type OutBindings =
    std::collections::HashMap<(Vec<ArgSpec>, Option<usize>), (Vec<usize>, Vec<ScalarType>)>;
