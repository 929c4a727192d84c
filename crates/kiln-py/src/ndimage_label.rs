//! `kiln.ndimage`'s labelling natives: scipy.ndimage's `label` over host buffers and over
//! CUDA arrays (`kiln_cuda`'s `LabelRaw` op), and `find_objects`, `value_indices` and
//! `watershed_ift` over host buffers (`kiln_core::imaging::label`,
//! `objects`, `value_indices` and `watershed`), with the GIL released.
//!
//! Design: the Python layer (python/kiln/_ndimage_measure.py) owns scipy's signature, checks
//! and errors, reduces the input to a 0/1 mask in the scan order scipy uses, and stores the
//! labels into the caller's output type; what reaches [`ndimage_label_host`] is a row-major
//! mask and a `3^ndim` structure, and it returns the labels as int32 (or int64 for `wide`)
//! bytes, written straight into the bytearray handed back, and their count.

use crate::errors::invalid;
use crate::IntoPy;
use kiln::core::imaging::label::{label, LabelInt, Structure};
use kiln::core::imaging::objects::find_objects_bytes;
use kiln::core::imaging::rank_value::NdDType;
use kiln::core::imaging::value_indices::value_indices_bytes;
use kiln::core::imaging::watershed::{watershed_ift, StoredLabel};
use kiln::device::ops::LabelRaw;
use kiln::device::LabelInput;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyTuple};

/// Label into `buf` (the bytes of `L` values), in place where `buf` is aligned for `L`.
fn label_bytes<L: LabelInt>(
    mask: &[u8],
    shape: &[usize],
    s: &Structure,
    buf: &mut [u8],
) -> kiln::Result<usize> {
    match bytemuck::try_cast_slice_mut::<u8, L>(buf) {
        Ok(out) => label(mask, shape, s, out),
        Err(_) => {
            let mut out = vec![L::default(); buf.len() / std::mem::size_of::<L>()];
            let c = label(mask, shape, s, &mut out)?;
            buf.copy_from_slice(bytemuck::cast_slice(&out));
            Ok(c)
        }
    }
}

/// `ndimage_label_host(mask, shape, structure, wide)`: scipy.ndimage.label of `mask`
/// (row-major bytes, non-zero is foreground) with `structure` (`3^ndim` bytes, row-major,
/// centrosymmetric); returns `(labels, count)`: the labels' native-endian int32 bytes (int64
/// when `wide`) and the number of groups.
#[pyfunction]
fn ndimage_label_host<'py>(
    py: Python<'py>,
    mask: &[u8],
    shape: Vec<usize>,
    structure: &[u8],
    wide: bool,
) -> PyResult<(Bound<'py, PyByteArray>, usize)> {
    let s = Structure::new(shape.len(), structure.iter().map(|&b| b != 0).collect()).py()?;
    let width = if wide { 8 } else { 4 };
    let nbytes = mask
        .len()
        .checked_mul(width)
        .ok_or_else(|| invalid("label: the input is too large"))?;
    let mut count = 0;
    let out = PyByteArray::new_with(py, nbytes, |buf| {
        count = py
            .detach(|| {
                if wide {
                    label_bytes::<i64>(mask, &shape, &s, buf)
                } else {
                    label_bytes::<i32>(mask, &shape, &s, buf)
                }
            })
            .py()?;
        Ok(())
    })?;
    Ok((out, count))
}

/// `ndimage_label_cuda(src, dtype, shape, structure, out, device)`: scipy.ndimage.label of
/// the C-contiguous `shape` array (1 to 3 axes) of `dtype` at device address `src` on CUDA
/// device `device`, with `structure` (as [`ndimage_label_host`]'s), into the C-contiguous
/// int32 array at `out`; returns the number of groups. The caller has synchronised the
/// streams that wrote `src` and `out`; the labels are complete when this returns.
#[pyfunction]
fn ndimage_label_cuda(
    py: Python<'_>,
    src: u64,
    dtype: &str,
    shape: Vec<usize>,
    structure: &[u8],
    out: u64,
    device: usize,
) -> PyResult<usize> {
    let s = Structure::new(shape.len(), structure.iter().map(|&b| b != 0).collect()).py()?;
    let input = LabelInput::from_name(dtype).ok_or_else(|| {
        invalid(format!(
            "label: a CUDA array of {dtype}; on the GPU label reads bool, uint8, uint16, int32, \
             int64, float32 and float64 (cast it, or pass a host array)"
        ))
    })?;
    let offsets = s.backward3().filter(|_| !shape.is_empty()).ok_or_else(|| {
        invalid(format!(
            "label: a {}-axis CUDA array; on the GPU label takes 1 to 3 axes (pass a host array)",
            shape.len()
        ))
    })?;
    let mut dims = [1usize; 3];
    dims[3 - shape.len()..].copy_from_slice(&shape);
    let (_rt, cuda) = crate::kernels::cuda_backend(py, device)?;
    py.detach(|| {
        // SAFETY: the Python layer passes the addresses of a live C-contiguous array of
        // `shape` and `dtype` and of a distinct live C-contiguous int32 array of the same
        // shape, both on `device` (kiln's context there is the device's primary context,
        // which CuPy and torch use too), held by the call, with their streams synchronised
        // before it; a `LabelRaw` run waits for its own kernels before returning.
        let op = unsafe { LabelRaw::new(src, input, dims, &offsets, out) };
        cuda.run(op)
    })
    .py()
}

/// `ndimage_find_objects_host(data, dtype, shape, max_label)`: scipy.ndimage.find_objects of
/// a host buffer (native-endian values of `dtype`: bool, int8..int64, uint8..uint64, float32,
/// float64); returns `[(label - 1, (slice, ...)), ...]` for the labels `1..=max_label` that
/// occur, in label order (slices with scipy's `step=None`).
#[pyfunction]
fn ndimage_find_objects_host<'py>(
    py: Python<'py>,
    data: &[u8],
    dtype: &str,
    shape: Vec<usize>,
    max_label: usize,
) -> PyResult<Vec<(usize, Bound<'py, PyTuple>)>> {
    let dt: NdDType = dtype.parse().map_err(|e| invalid(format!("find_objects: {e}")))?;
    let boxes = py
        .detach(|| find_objects_bytes(data, dt, &shape, max_label))
        .py()?;
    let slice = py.import("builtins")?.getattr("slice")?;
    boxes
        .into_iter()
        .map(|b| {
            let s = b
                .bounds
                .iter()
                .map(|&(start, stop)| slice.call1((start, stop)))
                .collect::<PyResult<Vec<_>>>()?;
            Ok((b.index, PyTuple::new(py, s)?))
        })
        .collect()
}

/// `ndimage_value_indices_host(data, dtype, shape)`: scipy.ndimage.value_indices of a host
/// buffer (native-endian values of an integer `dtype`); returns `(starts, first, coords)`:
/// where each group of equal values starts, the flat index of its first element (its value),
/// and the int64 bytes of every element's coordinates, axis by axis (`ndim` rows of the
/// element count), grouped by value in ascending order, row-major within a group.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn ndimage_value_indices_host<'py>(
    py: Python<'py>,
    data: &[u8],
    dtype: &str,
    shape: Vec<usize>,
) -> PyResult<(Vec<usize>, Vec<usize>, Bound<'py, PyByteArray>)> {
    let dt: NdDType = dtype
        .parse()
        .map_err(|e| invalid(format!("value_indices: {e}")))?;
    let n = shape
        .iter()
        .try_fold(shape.len(), |a, &d| a.checked_mul(d))
        .and_then(|c| c.checked_mul(8))
        .ok_or_else(|| invalid("value_indices: the array is too large"))?;
    let mut groups = None;
    let coords = PyByteArray::new_with(py, n, |buf| {
        let g = py
            .detach(|| match bytemuck::try_cast_slice_mut::<u8, i64>(buf) {
                Ok(c) => value_indices_bytes(data, dt, &shape, c),
                Err(_) => {
                    let mut c = vec![0i64; buf.len() / 8];
                    let g = value_indices_bytes(data, dt, &shape, &mut c)?;
                    buf.copy_from_slice(bytemuck::cast_slice(&c));
                    Ok(g)
                }
            })
            .py()?;
        groups = Some(g);
        Ok(())
    })?;
    let g = groups.ok_or_else(|| invalid("value_indices: no result"))?;
    Ok((g.starts, g.first, coords))
}

/// `ndimage_watershed_host(input, wide_input, shape, structure, markers, out_bytes)`:
/// scipy.ndimage.watershed_ift of `input` (native-endian uint8 bytes, or uint16 where
/// `wide_input`) from `markers` (native-endian int32 bytes: scipy's C `int` labels) with
/// `structure` (`3^ndim` bytes), for an output of `out_bytes` bytes per element (1, 2, 4 or
/// 8; signed); returns the labels as int32 bytes, as scipy reads them back from that output.
#[pyfunction]
fn ndimage_watershed_host<'py>(
    py: Python<'py>,
    input: &[u8],
    wide_input: bool,
    shape: Vec<usize>,
    structure: &[u8],
    markers: &[u8],
    out_bytes: usize,
) -> PyResult<Bound<'py, PyByteArray>> {
    let stored = match out_bytes {
        1 => StoredLabel::I8,
        2 => StoredLabel::I16,
        4 | 8 => StoredLabel::Wide,
        n => {
            return Err(invalid(format!(
                "watershed_ift: an output of {n} bytes per element"
            )))
        }
    };
    let values: Vec<u16> = if wide_input {
        input
            .chunks_exact(2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
            .collect()
    } else {
        input.iter().map(|&b| u16::from(b)).collect()
    };
    let marks: Vec<i32> = markers
        .chunks_exact(4)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let st: Vec<bool> = structure.iter().map(|&b| b != 0).collect();
    let out = py
        .detach(|| watershed_ift(&values, &shape, &st, &marks, stored))
        .py()?;
    Ok(PyByteArray::new(py, bytemuck::cast_slice(&out)))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ndimage_label_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_label_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_find_objects_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_watershed_host, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage_value_indices_host, m)?)?;
    Ok(())
}
