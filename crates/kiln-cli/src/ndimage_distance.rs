//! `kiln ndimage distance_transform_edt | _cdt | _bf`: scipy.ndimage's distance transforms
//! of a mask (non-zero is foreground) through kiln-core's ports of scipy's C code, which give
//! scipy's distances and, on ties, scipy's nearest element.
//!
//! The distances are written in scipy's types where the file allows it: `.npy` float64
//! (edt, bf euclidean), int32 (cdt: -1 where no background is reached) or uint32 (bf
//! taxicab/chessboard); NIfTI float32 with the input's header; TIFF float32 (2-D float
//! results) or 16-bit (2-D integer results in 0..=65535). `--return-indices FILE.npy` writes
//! scipy's `indices`: int32 of shape `(ndim, ...)`, the coordinates of each element's nearest
//! background element.

use crate::filter_cmd::invalid;
use crate::ndimage_array::{self as nda, NdData};
use crate::ndimage_cmd::Args;
use crate::ndimage_label::{mask_of, out_type_int, Summary};
use kiln::core::imaging::distance::{bf, cdt, edt, feature_planes, BfDistances, BfMetric};
use kiln::core::imaging::label::Structure;
use serde_json::json;
use std::path::Path;
use std::time::Instant;

/// `--sampling`: one value for every axis or one per axis, each finite and > 0.
fn sampling(a: &Args, ndim: usize) -> anyhow::Result<Option<Vec<f64>>> {
    let Some(v) = a.sampling.as_deref() else {
        return Ok(None);
    };
    let vals = v
        .split(',')
        .map(|s| s.trim().parse::<f64>())
        .collect::<Result<Vec<f64>, _>>()
        .map_err(|_| {
            invalid(
                "--sampling",
                format!("`{v}` is not a comma-separated list of numbers"),
            )
        })?;
    if let Some(x) = vals.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
        return Err(invalid(
            "--sampling",
            format!("{x}: every spacing must be finite and > 0"),
        ));
    }
    match vals.len() {
        1 => Ok(Some(vec![vals[0]; ndim])),
        n if n == ndim => Ok(Some(vals)),
        n => Err(invalid(
            "--sampling",
            format!("{n} values for {ndim}-D data (give one, or one per axis)"),
        )),
    }
}

/// The nearest background element's coordinates, scipy's `(ndim, ...)` int32, written.
fn write_indices(a: &Args, shape: &[usize], planes: Vec<i32>) -> anyhow::Result<()> {
    let Some(p) = a.return_indices.as_deref() else {
        return Ok(());
    };
    let mut s = vec![shape.len()];
    s.extend_from_slice(shape);
    nda::write_npy_typed("--return-indices", p, &s, planes)
}

/// Runs the transform `a.function` on `d` into `out`, filling in `s`.
pub(crate) fn run(a: &Args, d: &NdData, out: &Path, s: &mut Summary) -> anyhow::Result<()> {
    let name = a.function.as_str();
    let ndim = d.shape.len();
    if ndim == 0 {
        return Err(invalid("--input", format!("{name}: the input has no axis")));
    }
    if let Some(p) = a.return_indices.as_deref() {
        if kiln_io::Format::from_path(p) != Some(kiln_io::Format::Npy) {
            return Err(invalid(
                "--return-indices",
                format!(
                    "{}: the indices are int32 of shape (ndim, ...): write .npy",
                    p.display()
                ),
            ));
        }
        nda::check_output("--return-indices", p, &a.input)?;
        if p == out {
            return Err(invalid(
                "--return-indices",
                "--return-indices and --output name the same file",
            ));
        }
    }
    let mask = mask_of(d);
    let want_idx = a.return_indices.is_some();
    let t = Instant::now();
    match name {
        "distance_transform_edt" => {
            nda::check_float_output("--output", out, ndim)?;
            let sp = sampling(a, ndim)?;
            let r = edt(&mask, &d.shape, sp.as_deref(), true, want_idx)
                .map_err(|e| invalid("--input", e.to_string()))?;
            s.seconds = t.elapsed().as_secs_f64();
            let dist = r.distances.unwrap_or_default();
            s.result.insert(
                "max_distance".into(),
                json!(dist.iter().copied().fold(0.0, f64::max)),
            );
            nda::write_floats("--output", out, &d.shape, dist, d.volume.as_ref(), false)?;
            s.output_type = float_type(out);
            write_indices(a, &d.shape, r.indices.unwrap_or_default())?;
        }
        "distance_transform_cdt" => {
            nda::check_int_output("--output", out, ndim)?;
            let metric = a.metric.as_deref().unwrap_or("chessboard");
            let c = match metric {
                "chessboard" => ndim,
                "taxicab" | "cityblock" | "manhattan" => 1,
                m => {
                    return Err(invalid(
                        "--metric",
                        format!("`{m}`: distance_transform_cdt's metrics are chessboard and taxicab (cityblock, manhattan)"),
                    ))
                }
            };
            let st = Structure::connectivity(ndim, c)?;
            let r =
                cdt(&mask, &d.shape, st.mask(), want_idx).map_err(|e| invalid("--input", e.to_string()))?;
            s.seconds = t.elapsed().as_secs_f64();
            s.result.insert("metric".into(), json!(metric));
            s.result.insert(
                "max_distance".into(),
                json!(r.distances.iter().copied().max().unwrap_or(0)),
            );
            nda::write_ints(
                "--output",
                out,
                &d.shape,
                r.distances,
                d.volume.as_ref(),
                "the distances",
            )?;
            s.output_type = out_type_int(out);
            write_indices(
                a,
                &d.shape,
                r.features
                    .map(|f| feature_planes(&f, &d.shape))
                    .unwrap_or_default(),
            )?;
        }
        _ => {
            let metric_name = a.metric.as_deref().unwrap_or("euclidean");
            let metric = match metric_name.to_ascii_lowercase().as_str() {
                "euclidean" => BfMetric::Euclidean,
                "taxicab" | "cityblock" | "manhattan" => BfMetric::CityBlock,
                "chessboard" => BfMetric::Chessboard,
                m => {
                    return Err(invalid(
                        "--metric",
                        format!("`{m}`: distance_transform_bf's metrics are euclidean, taxicab (cityblock, manhattan) and chessboard"),
                    ))
                }
            };
            if metric == BfMetric::Euclidean {
                nda::check_float_output("--output", out, ndim)?;
            } else if a.sampling.is_some() {
                // scipy takes it and does not read it: refused rather than ignored
                return Err(invalid(
                    "--sampling",
                    format!("--sampling applies to the euclidean metric, not {metric_name}"),
                ));
            } else {
                nda::check_int_output("--output", out, ndim)?;
            }
            let sp = sampling(a, ndim)?;
            let r = bf(&mask, &d.shape, metric, sp.as_deref(), true, want_idx)
                .map_err(|e| invalid("--input", e.to_string()))?;
            s.seconds = t.elapsed().as_secs_f64();
            s.result.insert("metric".into(), json!(metric_name));
            match r.distances {
                Some(BfDistances::F64(v)) => {
                    s.result.insert(
                        "max_distance".into(),
                        json!(v.iter().copied().fold(0.0, f64::max)),
                    );
                    nda::write_floats("--output", out, &d.shape, v, d.volume.as_ref(), false)?;
                    s.output_type = float_type(out);
                }
                Some(BfDistances::U32(v)) => {
                    s.result
                        .insert("max_distance".into(), json!(v.iter().copied().max().unwrap_or(0)));
                    if kiln_io::Format::from_path(out) == Some(kiln_io::Format::Npy) {
                        nda::write_npy_typed("--output", out, &d.shape, v)?;
                        s.output_type = "uint32";
                    } else {
                        // u32::MAX marks "no background element"; beyond i32 it is refused
                        let ints: Vec<i32> = v.iter().map(|&x| i32::try_from(x).unwrap_or(-1)).collect();
                        if v.iter().any(|&x| x > i32::MAX as u32) {
                            return Err(invalid(
                                "--output",
                                format!(
                                    "{}: the input has no background element, so the distances are \
                                     scipy's 4294967295; write .npy (uint32)",
                                    out.display()
                                ),
                            ));
                        }
                        nda::write_ints(
                            "--output",
                            out,
                            &d.shape,
                            ints,
                            d.volume.as_ref(),
                            "the distances",
                        )?;
                        s.output_type = out_type_int(out);
                    }
                }
                None => anyhow::bail!("internal: distance_transform_bf gave no distances"),
            }
            if let Some(f) = r.features {
                write_indices(a, &d.shape, feature_planes(&f, &d.shape))?;
            }
        }
    }
    Ok(())
}

/// The stored type of a float result in `out`'s format.
fn float_type(out: &Path) -> &'static str {
    match kiln_io::Format::from_path(out) {
        Some(kiln_io::Format::Npy) => "float64",
        _ => "f32",
    }
}
