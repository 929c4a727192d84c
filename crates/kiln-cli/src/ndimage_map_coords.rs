//! `kiln ndimage map_coordinates --coordinates C.npy`: scipy.ndimage.map_coordinates, the
//! input sampled at the points of `C` (shape `(ndim, ...)`: one row of coordinates per input
//! axis; the output's shape is `C.shape[1:]`), with scipy's `order`, `mode`, `cval` and
//! `prefilter`, on the runtime's device (`Tensor::resample`, which gives the same bits on
//! the CPU and CUDA; the GPU takes inputs of 1 to 3 axes).
//!
//! scipy's Python layer is done as `kiln::ndimage::scipy_interp` does it for the other
//! functions: for `order > 1` with `prefilter`, the input (in its own type: `grid-constant`'s
//! `cval` is stored in it as `numpy.pad` stores it) is padded by 12 samples per side for
//! `nearest` and `grid-constant`, then spline-filtered in float64 along every axis longer
//! than one sample. The values are computed in float64 from the input's values and stored
//! as scipy stores them into the input's type: float32 rounded once, uint8/uint16 rounded
//! half away from zero and clipped; float64 and the other integer types are written as
//! float64 (the values scipy computes before storing them into an integer type). A NIfTI
//! output (3-D or 4-D coordinates) gets a default header: the input's world transform does
//! not describe arbitrary points.

use crate::filter_cmd::invalid;
use crate::ndimage_array::{self as nda, NdData};
use crate::ndimage_cmd::Args;
use crate::ndimage_label::Summary;
use kiln::core::imaging::interp::{store_value, Store};
use kiln::ndimage::scipy_interp as si;
use kiln::ndimage::{InterpMode, InterpSpec, Resample};
use kiln::{Config, DType, DeviceRequest, Runtime};
use kiln_io::{Format, SamplesRef};
use serde_json::json;
use std::path::Path;

/// Samples of prepadding per side for `nearest` and `grid-constant` (scipy's `npad`).
const NPAD: usize = 12;

/// `v` padded by `NPAD` per side: edge values (`nearest`) or `fill`.
fn pad(v: &[f64], shape: &[usize], fill: Option<f64>) -> (Vec<f64>, Vec<usize>) {
    let pshape: Vec<usize> = shape.iter().map(|d| d + 2 * NPAD).collect();
    let n: usize = pshape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        let mut off = 0usize;
        let mut outside = false;
        for (a, &i) in idx.iter().enumerate() {
            let j = i as isize - NPAD as isize;
            outside |= j < 0 || j >= shape[a] as isize;
            off = off * shape[a] + j.clamp(0, shape[a] as isize - 1) as usize;
        }
        out.push(match fill {
            Some(c) if outside => c,
            _ => v[off],
        });
        for a in (0..idx.len()).rev() {
            idx[a] += 1;
            if idx[a] < pshape[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    (out, pshape)
}

/// `cval` as `numpy.pad` stores it into an array of `dtype`.
fn stored_cval(dtype: &str, cval: f64) -> anyhow::Result<f64> {
    Ok(match dtype {
        "float64" => cval,
        "float32" | "f32" => f64::from(cval as f32),
        _ if cval.fract() == 0.0 && cval.abs() <= (1u64 << 53) as f64 => {
            let (lo, hi) = match dtype {
                "uint8" | "u8" => (0.0, 255.0),
                "uint16" | "u16" => (0.0, 65535.0),
                "bool" => (0.0, 1.0),
                _ => (f64::MIN, f64::MAX),
            };
            if cval < lo || cval > hi {
                return Err(invalid(
                    "--cval",
                    format!("{cval} is outside {dtype}'s range; grid-constant pads the input with it in the input's type"),
                ));
            }
            cval
        }
        _ => {
            return Err(invalid(
                "--cval",
                format!(
                    "{cval} is not a whole number; grid-constant pads the {dtype} input with it in its type"
                ),
            ))
        }
    })
}

/// map_coordinates of `d` into `out`, filling in `s`.
pub(crate) fn run(
    a: &Args,
    d: &NdData,
    out: &Path,
    s: &mut Summary,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<()> {
    let cp = a.coordinates.as_deref().ok_or_else(|| {
        invalid(
            "--coordinates",
            "map_coordinates needs --coordinates C.npy (shape (ndim, ...))",
        )
    })?;
    let c = nda::read_nd("--coordinates", cp)?;
    let ndim = d.shape.len();
    if c.shape.first() != Some(&ndim) {
        return Err(invalid(
            "--coordinates",
            format!(
                "{}: shape {:?}; for {ndim}-D input the coordinates are ({ndim}, ...): one row per input axis",
                cp.display(),
                c.shape
            ),
        ));
    }
    if let Some(x) = c.values.iter().find(|x| !x.is_finite()) {
        return Err(invalid(
            "--coordinates",
            format!("{} holds {x}; every coordinate must be finite", cp.display()),
        ));
    }
    let oshape = c.shape[1..].to_vec();
    let (store, out_type): (Option<Store>, &'static str) = match d.dtype {
        "float32" | "f32" => (None, "float32"),
        "uint8" | "u8" => (Some(Store::Unsigned(255.0)), "uint8"),
        "uint16" | "u16" => (Some(Store::Unsigned(65535.0)), "uint16"),
        _ => (None, "float64"),
    };
    let fmt = Format::from_path(out);
    let ok = match fmt {
        Some(Format::Npy) => true,
        Some(Format::Png) => oshape.len() == 2 && store.is_some(),
        Some(Format::Tiff) => oshape.len() == 2,
        Some(Format::Nifti | Format::NiftiGz) => (3..=4).contains(&oshape.len()),
        None => false,
    };
    if !ok {
        return Err(invalid(
            "--output",
            format!(
                "{}: the result is {}-D {out_type}; write .npy, .tif (2-D), .png (2-D 8/16-bit input) \
                 or .nii/.nii.gz (3-D/4-D, float32)",
                out.display(),
                oshape.len()
            ),
        ));
    }
    let order = match a.order.as_deref() {
        None => 3,
        Some(o) => o
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&o| o <= 5)
            .ok_or_else(|| invalid("--order", format!("`{o}`: the spline order is 0 to 5")))?,
    };
    let mode_name = a.mode.clone().unwrap_or_else(|| "constant".into());
    let mode = si::interp_mode(&mode_name).map_err(|e| invalid("--mode", e.to_string()))?;
    let constant = matches!(mode, InterpMode::Constant | InterpMode::GridConstant);
    let cval = match a.cval {
        Some(c) if !constant => {
            return Err(invalid(
                "--cval",
                format!("--cval {c} applies to --mode constant and grid-constant, not {mode_name}"),
            ))
        }
        Some(c) if !c.is_finite() => return Err(invalid("--cval", format!("{c} is not a finite number"))),
        c => c.unwrap_or(0.0),
    };
    let prefilter = match a.prefilter.as_deref() {
        None | Some("true" | "True" | "1") => true,
        Some("false" | "False" | "0") => false,
        Some(o) => return Err(invalid("--prefilter", format!("`{o}`: true or false"))),
    };
    let rt = Runtime::new(request, cfg)?;
    let mut x = rt.tensor(&d.values, &d.shape)?;
    let mut npad = 0;
    if prefilter && order > 1 {
        if matches!(mode, InterpMode::Nearest | InterpMode::GridConstant) {
            let fill = (mode == InterpMode::GridConstant)
                .then(|| stored_cval(d.dtype, cval))
                .transpose()?;
            let (v, pshape) = pad(&d.values, &d.shape, fill);
            x = rt.tensor(&v, &pshape)?;
            npad = NPAD;
        }
        let shape = x.shape().to_vec();
        for (axis, &n) in shape.iter().enumerate() {
            if n > 1 {
                x = x.spline_filter1d(axis, order, mode, DType::F64)?;
            }
        }
    }
    let spec = InterpSpec {
        ishape: x.shape(),
        oshape: &oshape,
        order,
        mode,
        cval,
        nprepad: npad,
        map: Resample::Coordinates(&c.values),
    };
    let y = x.resample(&spec, DType::F64)?.to_vec::<f64>()?;
    s.device = Some(rt.device_name());
    s.result.insert("output_shape".into(), json!(oshape));
    s.result.insert("order".into(), json!(order));
    s.result.insert("mode".into(), json!(mode_name));
    s.output_type = out_type;
    match (store, fmt) {
        (Some(st), Some(Format::Npy | Format::Png | Format::Tiff)) => {
            let stored: Vec<f64> = y.iter().map(|&v| store_value(v, st)).collect();
            if out_type == "uint8" {
                let b: Vec<u8> = stored.iter().map(|&v| v as u8).collect();
                write_small(out, &oshape, SamplesRef::U8(&b), fmt)
            } else {
                let b: Vec<u16> = stored.iter().map(|&v| v as u16).collect();
                write_small(out, &oshape, SamplesRef::U16(&b), fmt)
            }
        }
        // the points are arbitrary, so a NIfTI output gets a default header (no world
        // transform), not the input's
        _ => nda::write_floats("--output", out, &oshape, y, None, out_type == "float32"),
    }
}

/// 8/16-bit results: `.npy` of that type, or a 2-D PNG/TIFF.
fn write_small(out: &Path, shape: &[usize], v: SamplesRef<'_>, fmt: Option<Format>) -> anyhow::Result<()> {
    if fmt == Some(Format::Npy) {
        return match v {
            SamplesRef::U8(b) => nda::write_npy_typed("--output", out, shape, b.to_vec()),
            SamplesRef::U16(b) => nda::write_npy_typed("--output", out, shape, b.to_vec()),
            SamplesRef::F32(b) => nda::write_npy_typed("--output", out, shape, b.to_vec()),
        };
    }
    Ok(kiln_io::write_image_samples(out, shape[0], shape[1], 1, v)
        .map_err(crate::filter_cmd::io_error("--output"))?)
}
