//! The CPU side of the expression kernels: NumPy arrays read in place through
//! `__array_interface__`, scalars typed as NumPy types them.

use super::{dtype, py_scalar};
use kiln_expr::{Arg, ArgSpec, HostArray, HostArrayMut, Scalar, ScalarType};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::collections::HashMap;

/// A NumPy array's memory as `(pointer, shape, element strides, readonly)` from its
/// `__array_interface__`.
pub(crate) struct NpView {
    pub(crate) ptr: usize,
    pub(crate) dtype: ScalarType,
    pub(crate) shape: Vec<usize>,
    pub(crate) strides: Vec<isize>,
    pub(crate) readonly: bool,
}

pub(crate) fn np_view(a: &Bound<'_, PyAny>) -> PyResult<NpView> {
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
    pub(super) fn span(&self) -> (isize, isize) {
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

    pub(super) fn byte_range(&self) -> (usize, usize) {
        let (lo, hi) = self.span();
        let item = self.dtype.size() as isize;
        let start = self.ptr as isize + lo * item;
        (start as usize, (start + (hi - lo + 1).max(0) * item) as usize)
    }
}

/// The CPU arguments: array views (copied where an output overlaps them, as CuPy copies
/// such inputs) and scalars converted to their parameter's type.
pub(super) struct CpuArgs {
    views: Vec<Option<NpView>>,
    copies: HashMap<usize, Vec<u8>>,
    scalars: Vec<Option<Scalar>>,
}

pub(super) fn cpu_args(
    ins: &[Bound<'_, PyAny>],
    param_types: &[ScalarType],
    outs: &[NpView],
) -> PyResult<CpuArgs> {
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
pub(super) fn is_ndarray(x: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(x.get_type().name()? == "ndarray")
}

impl CpuArgs {
    pub(super) fn args(&self) -> Vec<Arg<'_>> {
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

pub(super) fn out_views(outs: &[Bound<'_, PyAny>]) -> PyResult<Vec<NpView>> {
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

pub(super) fn out_mut(views: &[NpView]) -> Vec<HostArrayMut<'_>> {
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

/// The specs of CPU arguments (NumPy arrays, NumPy and Python scalars).
pub(super) fn describe_cpu(ins: &[Bound<'_, PyAny>]) -> PyResult<Vec<ArgSpec>> {
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

/// The type a scalar argument brings: a NumPy scalar's own, a Python bool/int/float/complex
/// as NumPy would type it (bool, int64, float64, complex128).
pub(super) fn python_scalar_type(x: &Bound<'_, PyAny>) -> PyResult<ScalarType> {
    if x.hasattr(pyo3::intern!(x.py(), "dtype"))? {
        // a NumPy scalar's type is named as its dtype (`float32`), which is cheaper to read
        // than `dtype.name`; the dtype's own name where the two differ (`bool_`, `longlong`)
        if let Ok(t) = dtype(&x.get_type().name()?.to_cow()?) {
            return Ok(t);
        }
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
    if x.cast::<pyo3::types::PyComplex>().is_ok() {
        return Ok(ScalarType::C128);
    }
    Err(PyTypeError::new_err(format!(
        "unsupported argument {}",
        x.get_type().name()?
    )))
}
