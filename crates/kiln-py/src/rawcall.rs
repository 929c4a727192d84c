//! A `RawKernel` call read in one native step: the grid, block, shared memory, stream and the
//! arguments of the common call (CuPy arrays, kiln tensors, NumPy scalars of the plain C
//! types, Python numbers, `None`) straight from the Python objects, as CuPy's Cython does.
//!
//! The Python layer (`_rawkernel.py`) turns each argument into a tuple and the call costs
//! about 7 µs before the launch; read here it costs well under one. Anything this reader does
//! not know (torch tensors, `__cuda_array_interface__` objects, `MemoryPointer`s, other NumPy
//! scalars, an array on another device, a call with no array) makes it answer `None`
//! without launching, and the Python layer takes its general path, which knows every case
//! and words every error. So the fast path changes no behaviour, only the time.

use kiln::kernels::{KernelArg, Scalar, ScalarType};
use kiln::Device;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple, PyType};
use std::sync::Mutex;

/// What one call's reading produced: the arguments and the stream to launch on (`None`:
/// kiln's current stream).
pub(crate) struct Read {
    pub args: Vec<KernelArg<'static>>,
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_mem: u32,
    pub stream: Option<u64>,
}

/// CuPy's `ndarray` type and `cuda.get_current_stream`, found once CuPy has been imported by
/// the caller (kiln never imports CuPy itself).
pub(crate) struct Cupy {
    pub(crate) ndarray: Py<PyType>,
    pub(crate) current_stream: Py<PyAny>,
    /// `cupy.empty`, for the outputs an `ElementwiseKernel` call allocates.
    pub(crate) empty: Py<PyAny>,
}

static CUPY: PyOnceLock<Cupy> = PyOnceLock::new();
/// `sys.modules`, where CuPy is looked for until it is found.
static MODULES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
/// NumPy's scalar types with a C type, in `ScalarType` order of `NUMPY_SCALARS`.
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

/// Array dtypes seen, by identity, with their element type (`None`: no C type kiln checks,
/// passed untyped, as the general path passes it); see [`dtype_cached`].
static DTYPES: Mutex<Vec<(Py<PyAny>, Option<ScalarType>)>> = Mutex::new(Vec::new());
const DTYPES_MAX: usize = 64;

pub(crate) fn cupy(py: Python<'_>) -> Option<&'static Cupy> {
    if let Some(c) = CUPY.get(py) {
        return Some(c);
    }
    // not cached until the caller has imported CuPy
    let modules = MODULES
        .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("sys")?.getattr("modules")?.unbind())
        })
        .ok()?
        .bind(py);
    let cp = modules.get_item(intern!(py, "cupy")).ok()?;
    let ndarray = cp.getattr("ndarray").ok()?.cast_into::<PyType>().ok()?.unbind();
    let current_stream = cp
        .getattr("cuda")
        .ok()?
        .getattr("get_current_stream")
        .ok()?
        .unbind();
    let empty = cp.getattr("empty").ok()?.unbind();
    Some(CUPY.get_or_init(py, || Cupy {
        ndarray,
        current_stream,
        empty,
    }))
}

fn numpy_scalars(py: Python<'_>) -> Option<&'static [(Py<PyType>, ScalarType)]> {
    numpy_types(py, &NUMPY, &NUMPY_SCALARS)
}

/// NumPy's scalar types named in `names`, with their element types, looked up once into
/// `cell` (`RawKernel`'s and `ElementwiseKernel`'s fast calls each keep their own kind of
/// element type).
pub(crate) fn numpy_types<T: Copy + Send + Sync + 'static>(
    py: Python<'_>,
    cell: &'static PyOnceLock<Vec<(Py<PyType>, T)>>,
    names: &[(&str, T)],
) -> Option<&'static [(Py<PyType>, T)]> {
    if let Some(v) = cell.get(py) {
        return Some(v);
    }
    let np = py.import("numpy").ok()?;
    let mut v = Vec::with_capacity(names.len());
    for &(name, t) in names {
        v.push((np.getattr(name).ok()?.cast_into::<PyType>().ok()?.unbind(), t));
    }
    Some(cell.get_or_init(py, || v))
}

/// The element type `of` gives a NumPy dtype object's name, read once per dtype object and
/// kept in `cache` (the objects are held, so an address is never reused by another dtype
/// while cached; a handful of entries at most). `None` where the cache cannot be read.
pub(crate) fn dtype_cached<T: Copy>(
    cache: &Mutex<Vec<(Py<PyAny>, T)>>,
    dtype: &Bound<'_, PyAny>,
    of: impl FnOnce(&str) -> T,
) -> Option<T> {
    let mut seen = cache.lock().ok()?;
    if let Some((_, t)) = seen.iter().find(|(d, _)| d.as_ptr() == dtype.as_ptr()) {
        return Some(*t);
    }
    let name: String = dtype.getattr("name").ok()?.extract().ok()?;
    let t = of(&name);
    if seen.len() < DTYPES_MAX {
        seen.push((dtype.clone().unbind(), t));
    }
    Some(t)
}

/// The element type of a NumPy dtype object (`dtype.name` read once per dtype).
fn dtype_type(dtype: &Bound<'_, PyAny>) -> Option<Option<ScalarType>> {
    dtype_cached(&DTYPES, dtype, crate::kernels::scalar_type_of)
}

/// A launch dimension: an int, or a tuple of one to three ints.
fn dim3(v: &Bound<'_, PyAny>) -> Option<(u32, u32, u32)> {
    if v.is_exact_instance_of::<PyInt>() {
        return Some((v.extract().ok()?, 1, 1));
    }
    let t = v.cast::<PyTuple>().ok()?;
    let mut d = [1u32; 3];
    if t.is_empty() || t.len() > 3 {
        return None;
    }
    for (k, x) in t.iter().enumerate() {
        if !x.is_exact_instance_of::<PyInt>() {
            return None;
        }
        d[k] = x.extract().ok()?;
    }
    Some((d[0], d[1], d[2]))
}

/// The stream the caller names: an int, or an object with `.ptr` (CuPy) or `.cuda_stream`
/// (torch).
pub(crate) fn named_stream(s: &Bound<'_, PyAny>) -> Option<u64> {
    if s.is_exact_instance_of::<PyInt>() {
        return s.extract().ok();
    }
    for attr in ["ptr", "cuda_stream"] {
        if let Ok(v) = s.getattr(attr) {
            return v.extract().ok();
        }
    }
    None
}

/// One scalar argument, or `None` where it is not one this reader knows.
fn scalar(py: Python<'_>, a: &Bound<'_, PyAny>) -> Option<KernelArg<'static>> {
    if a.is_exact_instance_of::<PyFloat>() {
        return Some(KernelArg::Scalar(Scalar::F64(a.extract().ok()?)));
    }
    if a.is_exact_instance_of::<PyBool>() {
        return Some(KernelArg::Scalar(Scalar::Bool(a.is_truthy().ok()?)));
    }
    if a.is_exact_instance_of::<PyInt>() {
        // beyond 128 bits: the general path words the error
        return Some(KernelArg::Int(a.extract().ok()?));
    }
    let ty = a.get_type();
    let (_, t) = numpy_scalars(py)?
        .iter()
        .find(|(nt, _)| nt.as_ptr() == ty.as_ptr())?;
    Some(KernelArg::Scalar(match t {
        ScalarType::F32 => Scalar::F32(a.extract::<f64>().ok()? as f32),
        ScalarType::F64 => Scalar::F64(a.extract().ok()?),
        ScalarType::F16 => Scalar::F16(half::f16::from_f64(a.extract().ok()?)),
        ScalarType::Bool => Scalar::Bool(a.is_truthy().ok()?),
        ScalarType::I8 => Scalar::I8(a.extract().ok()?),
        ScalarType::I16 => Scalar::I16(a.extract().ok()?),
        ScalarType::I32 => Scalar::I32(a.extract().ok()?),
        ScalarType::I64 => Scalar::I64(a.extract().ok()?),
        ScalarType::U8 => Scalar::U8(a.extract().ok()?),
        ScalarType::U16 => Scalar::U16(a.extract().ok()?),
        ScalarType::U32 => Scalar::U32(a.extract().ok()?),
        ScalarType::U64 => Scalar::U64(a.extract().ok()?),
        ScalarType::BF16 => return None,
    }))
}

/// Whether the first array is CuPy's (its current stream is then the launch's).
enum First {
    None,
    Cupy,
    Kiln,
}

/// Read one call of a kernel loaded on CUDA device `device`, or `None` for the general path.
pub(crate) fn read(
    py: Python<'_>,
    device: usize,
    grid: &Bound<'_, PyAny>,
    block: &Bound<'_, PyAny>,
    args: &Bound<'_, PyAny>,
    shared_mem: &Bound<'_, PyAny>,
    stream: &Bound<'_, PyAny>,
) -> Option<Read> {
    let grid = dim3(grid)?;
    let block = dim3(block)?;
    if !shared_mem.is_exact_instance_of::<PyInt>() {
        return None;
    }
    let shared_mem: u32 = shared_mem.extract().ok()?;
    let args = args.cast::<PyTuple>().ok()?;
    let mut out = Vec::with_capacity(args.len());
    let mut first = First::None;
    let cp = cupy(py);
    for a in args.iter() {
        if a.is_none() {
            out.push(KernelArg::external_untyped(0, 0));
            continue;
        }
        if let Some(c) = cp {
            if a.get_type().as_ptr() == c.ndarray.as_ptr() {
                let data = a.getattr(intern!(py, "data")).ok()?;
                let dev: usize = data.getattr(intern!(py, "device_id")).ok()?.extract().ok()?;
                if dev != device {
                    return None;
                }
                let ptr: u64 = data.getattr(intern!(py, "ptr")).ok()?.extract().ok()?;
                let len: usize = a.getattr(intern!(py, "size")).ok()?.extract().ok()?;
                out.push(match dtype_type(&a.getattr(intern!(py, "dtype")).ok()?)? {
                    Some(t) => KernelArg::external(ptr, t, len),
                    None => KernelArg::external_untyped(ptr, len),
                });
                if matches!(first, First::None) {
                    first = First::Cupy;
                }
                continue;
            }
        }
        if let Ok(t) = a.cast::<crate::tensor::PyTensor>() {
            let t = &t.get().t;
            if t.device() != Device::Cuda(device) {
                return None;
            }
            let ptr = crate::dlpack::data_ptr(t) as u64;
            let elem = crate::kernels::scalar_type_of(crate::runtime::dtype_name(t.dtype()));
            out.push(match elem {
                Some(e) => KernelArg::external(ptr, e, t.len()),
                None => KernelArg::external_untyped(ptr, t.len()),
            });
            if matches!(first, First::None) {
                first = First::Kiln;
            }
            continue;
        }
        out.push(scalar(py, &a)?);
    }
    let stream = if !stream.is_none() {
        Some(named_stream(stream)?)
    } else {
        match first {
            // no array: the general path picks the current device first
            First::None => return None,
            First::Kiln => None,
            First::Cupy => Some(
                cp?.current_stream
                    .bind(py)
                    .call0()
                    .ok()?
                    .getattr(intern!(py, "ptr"))
                    .ok()?
                    .extract()
                    .ok()?,
            ),
        }
    };
    Some(Read {
        args: out,
        grid,
        block,
        shared_mem,
        stream,
    })
}
