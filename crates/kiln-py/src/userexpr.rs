//! The native half of `kiln.ElementwiseKernel` and `kiln.ReductionKernel` (CuPy's calling
//! conventions live in `python/kiln/_userkernel.py`): kiln-expr parses and types the kernel,
//! then either evaluates it on the CPU over NumPy arrays (read in place through
//! `__array_interface__`, any strides) or generates its CUDA source, compiles it through
//! kiln's NVRTC path and cubin cache, and launches it on the caller's stream over CUDA arrays
//! given as `(address, dtype, shape, strides)`.

use crate::errors::IntoPy;
use crate::kernels;
use kiln::cuda::user::{KernelArg, Scalar as CudaScalar};
use kiln::cuda::CudaBackend;
use kiln_expr::{
    Arg, ArgSpec, Axis, Binding, ElementwiseKernel, HostArray, HostArrayMut, KernelParam, ReductionBinding,
    ReductionKernel, Scalar, ScalarType,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

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
/// scalar argument).
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
    } else {
        return Err(PyTypeError::new_err(format!(
            "unsupported scalar {}; pass a number",
            v.get_type().name()?
        )));
    };
    Ok(s.cast(t))
}

/// A NumPy array's memory as `(pointer, shape, element strides, readonly)` from its
/// `__array_interface__`.
struct NpView {
    ptr: usize,
    dtype: ScalarType,
    shape: Vec<usize>,
    strides: Vec<isize>,
    readonly: bool,
}

fn np_view(a: &Bound<'_, PyAny>) -> PyResult<NpView> {
    let ai = a.getattr("__array_interface__")?;
    let (ptr, readonly): (usize, bool) = ai.get_item("data")?.extract()?;
    let shape: Vec<usize> = ai.get_item("shape")?.extract()?;
    let typestr: String = ai.get_item("typestr")?.extract()?;
    let np_dtype: String = a.getattr("dtype")?.getattr("name")?.extract()?;
    if typestr.starts_with('>') {
        return Err(PyValueError::new_err(format!(
            "a big-endian {np_dtype} array; convert it to native byte order first (x.astype(x.dtype.newbyteorder('=')))"
        )));
    }
    let t = dtype(&np_dtype)?;
    let item = t.size() as isize;
    let strides = match ai.get_item("strides")?.extract::<Option<Vec<isize>>>()? {
        None => kiln_expr::c_strides(&shape),
        Some(b) => {
            if b.iter().any(|s| s % item != 0) {
                return Err(PyValueError::new_err(format!(
                    "strides {b:?} are not whole {np_dtype} elements; copy the array first"
                )));
            }
            b.iter().map(|s| s / item).collect()
        }
    };
    Ok(NpView {
        ptr,
        dtype: t,
        shape,
        strides,
        readonly,
    })
}

impl NpView {
    /// The element range `[lo, hi]` the view addresses, relative to `ptr`.
    fn span(&self) -> (isize, isize) {
        let (mut lo, mut hi) = (0isize, 0isize);
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            if n == 0 {
                return (0, -1);
            }
            let d = (n as isize - 1) * s;
            if d < 0 {
                lo += d
            } else {
                hi += d
            }
        }
        (lo, hi)
    }

    fn byte_range(&self) -> (usize, usize) {
        let (lo, hi) = self.span();
        let item = self.dtype.size() as isize;
        let start = self.ptr as isize + lo * item;
        (start as usize, (start + (hi - lo + 1).max(0) * item) as usize)
    }
}

/// The CPU arguments: array views (copied where an output overlaps them, as CuPy copies
/// such inputs) and scalars converted to their parameter's type.
struct CpuArgs {
    views: Vec<Option<NpView>>,
    copies: HashMap<usize, Vec<u8>>,
    scalars: Vec<Option<Scalar>>,
}

fn cpu_args(ins: &[Bound<'_, PyAny>], param_types: &[ScalarType], outs: &[NpView]) -> PyResult<CpuArgs> {
    let mut a = CpuArgs {
        views: Vec::new(),
        copies: HashMap::new(),
        scalars: Vec::new(),
    };
    for (k, x) in ins.iter().enumerate() {
        if is_ndarray(x)? {
            let v = np_view(x)?;
            let (s, e) = v.byte_range();
            if outs.iter().any(|o| {
                let (os, oe) = o.byte_range();
                s < oe && os < e
            }) {
                // SAFETY: the view's bytes [s, e) are the array's memory (its interface),
                // alive while `ins` holds the array, read once here.
                let bytes = unsafe { std::slice::from_raw_parts(s as *const u8, e - s) }.to_vec();
                a.copies.insert(k, bytes);
            }
            a.views.push(Some(v));
            a.scalars.push(None);
        } else {
            a.views.push(None);
            a.scalars.push(Some(py_scalar(x, param_types[k])?));
        }
    }
    Ok(a)
}

/// Whether `x` is a NumPy array (`_userkernel.py` passes arrays as `numpy.ndarray`, scalars
/// as Python or NumPy scalars).
fn is_ndarray(x: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(x.get_type().name()? == "ndarray")
}

impl CpuArgs {
    fn args(&self) -> Vec<Arg<'_>> {
        self.views
            .iter()
            .zip(&self.scalars)
            .enumerate()
            .map(|(k, (v, s))| match (v, s) {
                (Some(v), _) => {
                    let (s, e) = v.byte_range();
                    let (lo, _) = v.span();
                    let bytes: &[u8] = match self.copies.get(&k) {
                        Some(c) => c,
                        // SAFETY: [s, e) is exactly the memory the array's interface
                        // addresses; the array outlives this call (held by the caller's
                        // argument list) and no output overlaps it (else it was copied).
                        None => unsafe { std::slice::from_raw_parts(s as *const u8, e - s) },
                    };
                    Arg::Array(HostArray {
                        dtype: v.dtype,
                        shape: v.shape.clone(),
                        strides: v.strides.clone(),
                        offset: (-lo) as usize,
                        bytes,
                    })
                }
                (None, Some(s)) => Arg::Scalar(*s),
                (None, None) => Arg::Scalar(Scalar::Bool(false)),
            })
            .collect()
    }
}

fn out_views(outs: &[Bound<'_, PyAny>]) -> PyResult<Vec<NpView>> {
    outs.iter()
        .map(|o| {
            let v = np_view(o)?;
            if v.readonly {
                return Err(PyValueError::new_err("an output array is read-only"));
            }
            if v.strides != kiln_expr::c_strides(&v.shape) {
                return Err(PyValueError::new_err("an output array is not C-contiguous"));
            }
            Ok(v)
        })
        .collect()
}

fn out_mut(views: &[NpView]) -> Vec<HostArrayMut<'_>> {
    views
        .iter()
        .map(|v| {
            let n: usize = v.shape.iter().product::<usize>() * v.dtype.size();
            HostArrayMut {
                dtype: v.dtype,
                shape: v.shape.clone(),
                // SAFETY: a writable, C-contiguous NumPy array of exactly `n` bytes (checked
                // in `out_views`), alive for the call; distinct outputs do not overlap
                // (NumPy allocated them, or the caller passed distinct arrays).
                bytes: unsafe { std::slice::from_raw_parts_mut(v.ptr as *mut u8, n) },
            }
        })
        .collect()
}

/// A CUDA array argument as `_userkernel.py` gives it: `(address, dtype, shape, strides)`.
struct DevArray {
    ptr: u64,
    dtype: ScalarType,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

fn dev_array(d: &Bound<'_, PyAny>) -> PyResult<DevArray> {
    let name: String = d.getattr("dtype")?.getattr("name")?.extract()?;
    Ok(DevArray {
        ptr: d.getattr("ptr")?.extract()?,
        dtype: dtype(&name)?,
        shape: d.getattr("shape")?.extract()?,
        strides: d.getattr("strides")?.extract()?,
    })
}

/// kiln-cuda's element type for an array of `t` as the generated source declares it (half
/// as its 16-bit storage).
fn storage_type(t: ScalarType) -> kiln::cuda::user::ScalarType {
    use kiln::cuda::user::ScalarType as C;
    match t {
        ScalarType::Bool => C::Bool,
        ScalarType::I8 => C::I8,
        ScalarType::I16 => C::I16,
        ScalarType::I32 => C::I32,
        ScalarType::I64 => C::I64,
        ScalarType::U8 => C::U8,
        ScalarType::U16 | ScalarType::F16 => C::U16,
        ScalarType::U32 => C::U32,
        ScalarType::U64 => C::U64,
        ScalarType::F32 => C::F32,
        ScalarType::F64 => C::F64,
    }
}

fn cuda_scalar(s: Scalar) -> CudaScalar {
    match s {
        Scalar::Bool(x) => CudaScalar::Bool(x),
        Scalar::I8(x) => CudaScalar::I8(x),
        Scalar::I16(x) => CudaScalar::I16(x),
        Scalar::I32(x) => CudaScalar::I32(x),
        Scalar::I64(x) => CudaScalar::I64(x),
        Scalar::U8(x) => CudaScalar::U8(x),
        Scalar::U16(x) => CudaScalar::U16(x),
        Scalar::U32(x) => CudaScalar::U32(x),
        Scalar::U64(x) => CudaScalar::U64(x),
        // the generated source takes a half scalar as `float`
        Scalar::F16(x) => CudaScalar::F32(x.to_f32()),
        Scalar::F32(x) => CudaScalar::F32(x),
        Scalar::F64(x) => CudaScalar::F64(x),
    }
}

/// One GPU call's arrays and scalars by parameter name, and the loop's axes.
struct GpuCall {
    arrays: HashMap<String, DevArray>,
    scalars: HashMap<String, Scalar>,
    /// Per loop axis: its extent.
    extents: Vec<usize>,
    /// Loop axes as axes of the broadcast shape (`None`: every axis in order).
    loop_axes: Option<Vec<usize>>,
    size: usize,
    reduce_size: usize,
}

impl GpuCall {
    fn args(&self, params: &[KernelParam]) -> PyResult<Vec<KernelArg<'static>>> {
        let shape_len = self.extents.len();
        params
            .iter()
            .map(|p| {
                Ok(match p {
                    KernelParam::Array { name, dtype, .. } => {
                        let a = self
                            .arrays
                            .get(name)
                            .ok_or_else(|| PyValueError::new_err(format!("no array {name}")))?;
                        KernelArg::external(a.ptr, storage_type(*dtype), a.shape.iter().product())
                    }
                    KernelParam::Scalar { name, dtype } => {
                        let s = self
                            .scalars
                            .get(name)
                            .ok_or_else(|| PyValueError::new_err(format!("no scalar {name}")))?;
                        KernelArg::Scalar(cuda_scalar(s.cast(*dtype)))
                    }
                    KernelParam::Size => KernelArg::Scalar(CudaScalar::I64(self.size as i64)),
                    KernelParam::ReduceSize => KernelArg::Scalar(CudaScalar::I64(self.reduce_size as i64)),
                    KernelParam::Extent { axis } => KernelArg::Scalar(CudaScalar::I64(
                        self.extents.get(*axis).copied().unwrap_or(1) as i64,
                    )),
                    KernelParam::Stride { name, axis } => {
                        let a = self
                            .arrays
                            .get(name)
                            .ok_or_else(|| PyValueError::new_err(format!("no array {name}")))?;
                        // the broadcast-shape axis this loop axis is, then the array's own axis
                        // (right-aligned); extent-1 and missing axes broadcast with stride 0
                        let b_axis = self.loop_axes.as_ref().map_or(*axis, |l| l[*axis]);
                        let off = shape_len.max(a.shape.len()) - a.shape.len();
                        let stride = if b_axis < off || a.shape[b_axis - off] == 1 {
                            0
                        } else {
                            a.strides[b_axis - off]
                        };
                        KernelArg::Scalar(CudaScalar::I64(stride as i64))
                    }
                    KernelParam::RawLen { name } => {
                        let a = self
                            .arrays
                            .get(name)
                            .ok_or_else(|| PyValueError::new_err(format!("no array {name}")))?;
                        KernelArg::Scalar(CudaScalar::I64(a.shape.iter().product::<usize>() as i64))
                    }
                    #[allow(unreachable_patterns)]
                    other => return Err(PyValueError::new_err(format!("kernel parameter {other:?}"))),
                })
            })
            .collect()
    }
}

/// Compile (cached) and launch `source`'s kernel `name` with `args` on `stream`.
#[allow(clippy::too_many_arguments)]
fn launch(
    py: Python<'_>,
    device: usize,
    source: &str,
    name: &str,
    options: &[String],
    grid: u32,
    block: u32,
    args: &[KernelArg<'static>],
    stream: Option<u64>,
) -> PyResult<()> {
    let (_rt, cuda): (_, Arc<CudaBackend>) = kernels::cuda_backend(py, device)?;
    let c = cuda.clone();
    let (src, opts) = (source.to_string(), options.to_vec());
    let module = py.detach(move || c.user_module(&src, &opts)).py()?;
    let f = module.function(name).py()?;
    let stream = stream.unwrap_or_else(|| cuda.stream().cu_stream() as u64);
    // SAFETY: `stream` is the caller's current stream of this device (or kiln's own); the
    // arrays are the caller's live CUDA arrays of this device, shaped as the binding says.
    unsafe { f.launch_on_stream(&cuda, (grid.max(1), 1, 1), (block, 1, 1), 0, args, stream) }.py()
}

/// The native `ElementwiseKernel`.
#[pyclass(name = "_ElementwiseKernel", module = "kiln._native", frozen)]
pub struct PyElementwise {
    k: ElementwiseKernel,
}

#[pymethods]
impl PyElementwise {
    #[new]
    fn new(in_params: &str, out_params: &str, operation: &str, name: &str, preamble: &str) -> PyResult<Self> {
        let k = ElementwiseKernel::new(in_params, out_params, operation, name)
            .map_err(expr_err)?
            .with_preamble(preamble);
        Ok(PyElementwise { k })
    }

    #[getter]
    fn nin(&self) -> usize {
        self.k.in_params().len()
    }

    #[getter]
    fn nout(&self) -> usize {
        self.k.out_params().len()
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
        self.k.call_bound(&args, &mut om, &b).map_err(expr_err)
    }

    /// Run on a CUDA device: `ins` `DeviceArray`s and scalars, `outs` `DeviceArray`s.
    /// Returns the generated source.
    #[pyo3(signature = (ins, outs, size = None, block_size = 128, stream = None, device = 0, options = Vec::new(), given = true))]
    #[allow(clippy::too_many_arguments)]
    fn launch_gpu(
        &self,
        py: Python<'_>,
        ins: Vec<Bound<'_, PyAny>>,
        outs: Vec<Bound<'_, PyAny>>,
        size: Option<usize>,
        block_size: u32,
        stream: Option<u64>,
        device: usize,
        options: Vec<String>,
        given: bool,
    ) -> PyResult<String> {
        let (call, b) = self.gpu_call(&ins, &outs, size, given)?;
        let source = self.k.cuda_source(&b).map_err(expr_err)?;
        if call.size == 0 {
            return Ok(source);
        }
        let args = call.args(&self.k.kernel_params(&b))?;
        let block = block_size.clamp(1, 1024);
        let grid = call.size.div_ceil(block as usize).min(i32::MAX as usize) as u32;
        launch(
            py,
            device,
            &source,
            self.k.name(),
            &options,
            grid,
            block,
            &args,
            stream,
        )?;
        Ok(source)
    }
}

impl PyElementwise {
    fn gpu_call(
        &self,
        ins: &[Bound<'_, PyAny>],
        outs: &[Bound<'_, PyAny>],
        size: Option<usize>,
        given: bool,
    ) -> PyResult<(GpuCall, Binding)> {
        let (in_specs, mut call) = describe_gpu(ins, self.k.in_params().iter().map(|p| p.name.clone()))?;
        let (out_specs, out_call) = describe_gpu(outs, self.k.out_params().iter().map(|p| p.name.clone()))?;
        call.arrays.extend(out_call.arrays);
        let out_specs = if given { out_specs } else { Vec::new() };
        let b = self.k.bind(&in_specs, &out_specs, size).map_err(expr_err)?;
        for (k, p) in self.k.in_params().iter().enumerate() {
            if let Some(s) = call.scalars.get_mut(&p.name) {
                *s = s.cast(b.param_types[k]);
            }
        }
        call.extents = b.shape.clone();
        call.size = b.size();
        Ok((call, b))
    }
}

/// The specs of CPU arguments (NumPy arrays, NumPy and Python scalars).
fn describe_cpu(ins: &[Bound<'_, PyAny>]) -> PyResult<Vec<ArgSpec>> {
    ins.iter()
        .map(|x| {
            if is_ndarray(x)? {
                let v = np_view(x)?;
                Ok(ArgSpec::Array {
                    dtype: v.dtype,
                    shape: v.shape,
                })
            } else {
                Ok(ArgSpec::Scalar(python_scalar_type(x)?))
            }
        })
        .collect()
}

/// The type a scalar argument brings: a NumPy scalar's own, a Python bool/int/float as
/// NumPy would type it (bool, int64, float64).
fn python_scalar_type(x: &Bound<'_, PyAny>) -> PyResult<ScalarType> {
    if x.hasattr("dtype")? {
        let name: String = x.getattr("dtype")?.getattr("name")?.extract()?;
        return dtype(&name);
    }
    if x.extract::<bool>().is_ok() && x.get_type().name()? == "bool" {
        return Ok(ScalarType::Bool);
    }
    if x.extract::<i64>().is_ok() {
        return Ok(ScalarType::I64);
    }
    if x.extract::<f64>().is_ok() {
        return Ok(ScalarType::F64);
    }
    Err(PyTypeError::new_err(format!(
        "unsupported argument {}",
        x.get_type().name()?
    )))
}

/// The specs of GPU arguments (`DeviceArray`s and scalars) and the call they make, by the
/// parameter names `names`.
fn describe_gpu(
    xs: &[Bound<'_, PyAny>],
    names: impl Iterator<Item = String>,
) -> PyResult<(Vec<ArgSpec>, GpuCall)> {
    let mut call = GpuCall {
        arrays: HashMap::new(),
        scalars: HashMap::new(),
        extents: Vec::new(),
        loop_axes: None,
        size: 0,
        reduce_size: 0,
    };
    let mut out = Vec::new();
    for (x, name) in xs.iter().zip(names) {
        if x.hasattr("ptr")? && x.hasattr("strides")? {
            let d = dev_array(x)?;
            out.push(ArgSpec::Array {
                dtype: d.dtype,
                shape: d.shape.clone(),
            });
            call.arrays.insert(name, d);
        } else {
            let t = python_scalar_type(x)?;
            out.push(ArgSpec::Scalar(t));
            call.scalars.insert(name, py_scalar(x, t)?);
        }
    }
    Ok((out, call))
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
        Ok(PyReduction { k })
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
        self.k.call(&args, &mut om, &ax, keepdims).map_err(expr_err)
    }

    /// Run on a CUDA device; returns the generated source.
    #[pyo3(signature = (ins, outs, axis_, keepdims, stream = None, device = 0, options = Vec::new()))]
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
    ) -> PyResult<String> {
        let (in_specs, mut call) = describe_gpu(&ins, self.k.in_params().iter().map(|p| p.name.clone()))?;
        let (out_specs, out_call) = describe_gpu(&outs, self.k.out_params().iter().map(|p| p.name.clone()))?;
        call.arrays.extend(out_call.arrays);
        let rb: ReductionBinding = self
            .k
            .bind(&in_specs, &out_specs, &axis(axis_), keepdims)
            .map_err(expr_err)?;
        for (k, p) in self.k.in_params().iter().enumerate() {
            if let Some(s) = call.scalars.get_mut(&p.name) {
                *s = s.cast(rb.binding.param_types[k]);
            }
        }
        let loop_axes = rb.loop_axes();
        call.extents = loop_axes.iter().map(|&a| rb.binding.shape[a]).collect();
        call.loop_axes = Some(loop_axes);
        call.size = rb.out_size();
        call.reduce_size = rb.reduce_size();
        // Stride params index loop axes; extents are per loop axis already
        let source = self.k.cuda_source(&rb).map_err(expr_err)?;
        if call.size == 0 {
            return Ok(source);
        }
        let args = call.args_reduction(&self.k.kernel_params(&rb), &rb)?;
        let grid = call.size.min(i32::MAX as usize) as u32;
        launch(
            py,
            device,
            &source,
            self.k.name(),
            &options,
            grid,
            kiln_expr::REDUCTION_BLOCK,
            &args,
            stream,
        )?;
        Ok(source)
    }
}

impl GpuCall {
    /// [`GpuCall::args`] for a reduction: strides are looked up through the loop axes, the
    /// extents indexed by loop axis.
    fn args_reduction(
        &self,
        params: &[KernelParam],
        rb: &ReductionBinding,
    ) -> PyResult<Vec<KernelArg<'static>>> {
        // strides are computed against the broadcast input shape's rank
        let rank = rb.binding.shape.len();
        params
            .iter()
            .map(|p| match p {
                KernelParam::Extent { axis } => Ok(KernelArg::Scalar(CudaScalar::I64(
                    self.extents.get(*axis).copied().unwrap_or(1) as i64,
                ))),
                KernelParam::Stride { name, axis } => {
                    let a = self
                        .arrays
                        .get(name)
                        .ok_or_else(|| PyValueError::new_err(format!("no array {name}")))?;
                    let b_axis = self.loop_axes.as_ref().map_or(*axis, |l| l[*axis]);
                    let off = rank.max(a.shape.len()) - a.shape.len();
                    let stride = if b_axis < off || a.shape[b_axis - off] == 1 {
                        0
                    } else {
                        a.strides[b_axis - off]
                    };
                    Ok(KernelArg::Scalar(CudaScalar::I64(stride as i64)))
                }
                other => self.args(std::slice::from_ref(other)).map(|mut v| v.remove(0)),
            })
            .collect()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyElementwise>()?;
    m.add_class::<PyReduction>()?;
    Ok(())
}
