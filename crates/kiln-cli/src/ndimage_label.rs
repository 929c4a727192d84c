//! `kiln ndimage` for the functions that work on a whole n-D array at once (not image by
//! image on the device): `label`, `find_objects`, `watershed_ift`, the distance transforms
//! (`ndimage_distance.rs`), the measurements (`ndimage_measure.rs`) and `map_coordinates`
//! (`ndimage_map_coords.rs`). Files are read and written by `ndimage_array.rs`.
//!
//! label, watershed_ift and find_objects run kiln-core's ports of scipy's C code on the host
//! (the facade's `kiln::core::imaging`, which kiln.ndimage's Python functions call too), so
//! the labels are scipy's, numbered the same way. A file in, a file out (or a summary
//! printed); label and the distance transforms also take a batch (a directory or a glob),
//! file by file, a failed file reported and the rest done.

use crate::exit;
use crate::filter_cmd::invalid;
use crate::ndimage_array::{self as nda, NdData};
use crate::ndimage_cmd::Args;
use kiln::core::imaging::label::{label, Structure};
use kiln::core::imaging::objects::find_objects;
use kiln::core::imaging::watershed::{watershed_ift, StoredLabel};
use kiln::{Config, DeviceRequest};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The functions run here and the flags each reads (for `--help` and errors); the
/// measurements' names are in `ndimage_measure::STATS`.
pub(crate) const ARRAY_FUNCTIONS: &[(&str, &str)] = &[
    ("label", "--structure, --connectivity"),
    ("find_objects", "--max-label"),
    ("watershed_ift", "--markers, --structure, --connectivity"),
    ("distance_transform_edt", "--sampling, --return-indices"),
    ("distance_transform_cdt", "--metric, --return-indices"),
    ("distance_transform_bf", "--metric, --sampling, --return-indices"),
    (
        "map_coordinates",
        "--coordinates, --order, --mode, --cval, --prefilter",
    ),
    ("measure", "--labels, --index, --stats"),
];

/// Whether `name` runs here (a measurement's own name included).
pub(crate) fn is_array_fn(name: &str) -> bool {
    ARRAY_FUNCTIONS.iter().any(|f| f.0 == name) || crate::ndimage_measure::stat_of(name).is_some()
}

/// Every option the command got, by its flag (the common ones excepted: --input, --output,
/// --json, --fail-fast).
fn given(a: &Args) -> Vec<&'static str> {
    [
        ("--sigma", a.sigma.is_some()),
        ("--order", a.order.is_some()),
        ("--truncate", a.truncate.is_some()),
        ("--radius", a.radius.is_some()),
        ("--size", a.size.is_some()),
        ("--origin", a.origin.is_some()),
        ("--axis", a.axis.is_some()),
        ("--axes", a.axes.is_some()),
        ("--weights", a.weights.is_some()),
        ("--mode", a.mode.is_some()),
        ("--cval", a.cval.is_some()),
        ("--batch", a.batch),
        ("--footprint", a.footprint.is_some()),
        ("--structure", a.structure.is_some()),
        ("--connectivity", a.connectivity.is_some()),
        ("--rank", a.rank.is_some()),
        ("--percentile", a.percentile.is_some()),
        ("--iterations", a.iterations.is_some()),
        ("--border-value", a.border_value.is_some()),
        ("--readers", a.readers.is_some()),
        ("--writers", a.writers.is_some()),
        ("--streams", a.streams.is_some()),
        ("--zoom", a.zoom.is_some()),
        ("--shift", a.shift.is_some()),
        ("--angle", a.angle.is_some()),
        ("--reshape", a.reshape.is_some()),
        ("--matrix", a.matrix.is_some()),
        ("--offset", a.offset.is_some()),
        ("--output-shape", a.output_shape.is_some()),
        ("--prefilter", a.prefilter.is_some()),
        ("--grid-mode", a.grid_mode.is_some()),
        ("--sampling", a.sampling.is_some()),
        ("--return-indices", a.return_indices.is_some()),
        ("--metric", a.metric.is_some()),
        ("--coordinates", a.coordinates.is_some()),
        ("--labels", a.labels.is_some()),
        ("--index", a.index.is_some()),
        ("--stats", a.stats.is_some()),
        ("--markers", a.markers.is_some()),
        ("--max-label", a.max_label.is_some()),
    ]
    .into_iter()
    .filter(|f| f.1)
    .map(|f| f.0)
    .collect()
}

/// The flags only the functions here read (refused by the filters and interpolation).
pub(crate) fn array_flags_given(a: &Args) -> Vec<&'static str> {
    const OWN: &[&str] = &[
        "--sampling",
        "--return-indices",
        "--metric",
        "--coordinates",
        "--labels",
        "--index",
        "--stats",
        "--markers",
        "--max-label",
    ];
    given(a).into_iter().filter(|f| OWN.contains(f)).collect()
}

/// Refuses a flag `name` does not read.
fn check_flags(name: &str, reads: &str, a: &Args) -> anyhow::Result<()> {
    for flag in given(a) {
        if !reads.split([',', ' ']).any(|w| w == flag) {
            return Err(invalid(
                flag,
                format!("{name} does not take {flag}; it reads: {reads}"),
            ));
        }
    }
    Ok(())
}

/// The structure of `--structure S.npy` (`3^ndim`, bool or 0/1) or `--connectivity C`
/// (scipy's `generate_binary_structure(ndim, C)`; default 1), as row-major booleans.
pub(crate) fn structure(a: &Args, ndim: usize) -> anyhow::Result<Vec<bool>> {
    match (&a.structure, a.connectivity) {
        (Some(_), Some(_)) => Err(invalid(
            "--connectivity",
            "give --structure or --connectivity, not both",
        )),
        (Some(p), None) => {
            let (shape, mask) =
                kiln_io::read_npy_mask(p).map_err(crate::filter_cmd::io_error("--structure"))?;
            if shape.len() != ndim || shape.iter().any(|&d| d != 3) {
                return Err(invalid(
                    "--structure",
                    format!(
                        "{p}: shape {shape:?}; for {ndim}-D data the structure is {}",
                        vec!["3"; ndim].join("x")
                    ),
                ));
            }
            Ok(mask)
        }
        (None, c) => {
            let c = c.unwrap_or(1);
            if c < 1 {
                return Err(invalid(
                    "--connectivity",
                    "connectivity 0 joins nothing; give 1 to ndim",
                ));
            }
            Ok(Structure::connectivity(ndim, c)?.mask().to_vec())
        }
    }
}

/// The output path of a function that writes a file.
pub(crate) fn output_of(a: &Args) -> anyhow::Result<&Path> {
    a.output
        .as_deref()
        .ok_or_else(|| invalid("--output", format!("{} needs --output FILE", a.function)))
}

/// A row-major mask (non-zero is foreground) of the data.
pub(crate) fn mask_of(d: &NdData) -> Vec<u8> {
    d.values.iter().map(|&v| u8::from(v != 0.0)).collect()
}

/// `kiln ndimage` for the functions here.
pub(crate) fn run(a: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let name = a.function.as_str();
    let reads = ARRAY_FUNCTIONS
        .iter()
        .find(|f| f.0 == name)
        .map_or("--labels, --index", |f| f.1);
    check_flags(name, reads, a)?;
    match name {
        "find_objects" => return objects(a),
        "measure" => return crate::ndimage_measure::run(a, None),
        n if crate::ndimage_measure::stat_of(n).is_some() => {
            return crate::ndimage_measure::run(a, crate::ndimage_measure::stat_of(n))
        }
        _ => {}
    }
    let t0 = Instant::now();
    let out = output_of(a)?;
    if !crate::filter_batch::is_batch_input(&a.input) {
        if a.fail_fast {
            return Err(invalid("--fail-fast", "--fail-fast applies to a batch input"));
        }
        let s = one(a, &a.input, out, t0, request, cfg)?;
        print(&s, a.json)?;
        return Ok(ExitCode::from(exit::OK));
    }
    if matches!(name, "watershed_ift" | "map_coordinates") {
        return Err(invalid(
            "--input",
            format!("{name} takes one file (its --markers / --coordinates belong to it), not a batch"),
        ));
    }
    let two_d = first_is_2d(&a.input);
    let listing = crate::filter_batch::list_inputs(&a.input, two_d)?;
    let outs = crate::filter_batch::output_paths(out, &listing.files)?;
    let mut done = Vec::new();
    let mut failed: Vec<Value> = Vec::new();
    let mut code = exit::OK;
    for (f, o) in listing.files.iter().zip(&outs) {
        match one(a, f, o, Instant::now(), request, cfg) {
            Ok(s) => done.push(s),
            Err(e) => {
                if code == exit::OK {
                    code = exit::code_of(&e);
                }
                eprintln!("kiln: {}: {e:#}", f.display());
                failed.push(json!({"path": f.display().to_string(), "error": format!("{e:#}"),
                    "exit_code": exit::code_of(&e)}));
                if a.fail_fast {
                    break;
                }
            }
        }
    }
    if a.json {
        let b = json!({
            "command": "ndimage", "function": name, "files": listing.files.len(),
            "succeeded": done.len(), "failed": failed, "results": done,
            "total_seconds": t0.elapsed().as_secs_f64(),
        });
        println!("{}", serde_json::to_string_pretty(&b)?);
    } else {
        for s in &done {
            print(s, false)?;
        }
    }
    Ok(ExitCode::from(code))
}

/// Whether a batch's first file is an image (PNG, TIFF, 2-D `.npy`), which picks the types
/// listed (as filter2d's batches).
fn first_is_2d(input: &Path) -> bool {
    let mut files: Vec<PathBuf> = if input.is_dir() {
        std::fs::read_dir(input)
            .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    } else {
        glob::glob(&input.to_string_lossy())
            .map(|g| g.filter_map(Result::ok).collect())
            .unwrap_or_default()
    };
    files.sort();
    match files.iter().find_map(|p| kiln_io::Format::from_path(p)) {
        Some(kiln_io::Format::Nifti | kiln_io::Format::NiftiGz) => false,
        Some(kiln_io::Format::Npy) => files
            .iter()
            .find(|p| kiln_io::Format::from_path(p) == Some(kiln_io::Format::Npy))
            .and_then(|p| kiln_io::open_npy(p).ok())
            .is_none_or(|f| f.shape().len() == 2),
        _ => true,
    }
}

/// The `--json` summary of one file.
#[derive(Serialize)]
pub(crate) struct Summary {
    pub command: &'static str,
    pub function: String,
    pub input: String,
    pub shape: Vec<usize>,
    pub input_type: &'static str,
    pub output: String,
    pub output_type: &'static str,
    /// map_coordinates: the device it ran on (the others run on the host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// What the function found (label: `num_features`; distances: `max_distance`, ...).
    #[serde(flatten)]
    pub result: serde_json::Map<String, Value>,
    pub seconds: f64,
    pub total_seconds: f64,
}

fn print(s: &Summary, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(s)?);
        return Ok(());
    }
    let sh: Vec<String> = s.shape.iter().map(|d| d.to_string()).collect();
    let found: Vec<String> = s
        .result
        .iter()
        .map(|(k, v)| match v {
            Value::String(t) => format!("{k} {t}"),
            v => format!("{k} {v}"),
        })
        .collect();
    println!(
        "ndimage {} {} ({}): {} in {:.3} s -> {} ({})",
        s.function,
        sh.join("x"),
        s.input_type,
        found.join(", "),
        s.seconds,
        s.output,
        s.output_type
    );
    Ok(())
}

/// One file of label, watershed_ift, a distance transform or map_coordinates.
fn one(
    a: &Args,
    input: &Path,
    out: &Path,
    t0: Instant,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<Summary> {
    nda::check_output("--output", out, input)?;
    let d = nda::read_nd("--input", input)?;
    let t = Instant::now();
    let mut s = Summary {
        command: "ndimage",
        function: a.function.clone(),
        input: input.display().to_string(),
        shape: d.shape.clone(),
        input_type: d.dtype,
        output: out.display().to_string(),
        output_type: "int32",
        device: None,
        result: serde_json::Map::new(),
        seconds: 0.0,
        total_seconds: 0.0,
    };
    match a.function.as_str() {
        "label" => {
            nda::check_int_output("--output", out, d.shape.len())?;
            let st = Structure::new(d.shape.len(), structure(a, d.shape.len())?)
                .map_err(|e| invalid("--structure", e.to_string()))?;
            let mut labels = vec![0i32; d.values.len()];
            let n = label(&mask_of(&d), &d.shape, &st, &mut labels)
                .map_err(|e| invalid("--input", e.to_string()))?;
            s.seconds = t.elapsed().as_secs_f64();
            nda::write_ints("--output", out, &d.shape, labels, d.volume.as_ref(), "the labels")?;
            s.result.insert("num_features".into(), json!(n));
            s.output_type = out_type_int(out);
        }
        "watershed_ift" => {
            nda::check_int_output("--output", out, d.shape.len())?;
            let labels = watershed(a, &d, input)?;
            s.seconds = t.elapsed().as_secs_f64();
            let n = labels
                .iter()
                .copied()
                .filter(|&v| v > 0)
                .collect::<std::collections::BTreeSet<_>>()
                .len();
            nda::write_ints("--output", out, &d.shape, labels, d.volume.as_ref(), "the labels")?;
            s.result.insert("labels".into(), json!(n));
            s.output_type = out_type_int(out);
        }
        "map_coordinates" => {
            crate::ndimage_map_coords::run(a, &d, out, &mut s, request, cfg)?;
            s.seconds = t.elapsed().as_secs_f64();
        }
        _ => crate::ndimage_distance::run(a, &d, out, &mut s)?,
    }
    s.total_seconds = t0.elapsed().as_secs_f64();
    Ok(s)
}

/// The stored type of an integer result in `out`'s format.
pub(crate) fn out_type_int(out: &Path) -> &'static str {
    match kiln_io::Format::from_path(out) {
        Some(kiln_io::Format::Png | kiln_io::Format::Tiff) => "u16",
        Some(kiln_io::Format::Nifti | kiln_io::Format::NiftiGz) => "f32",
        _ => "int32",
    }
}

/// scipy's watershed_ift: the input uint8/uint16 (scipy refuses other types), the markers
/// C `int`s, the output int32.
fn watershed(a: &Args, d: &NdData, input: &Path) -> anyhow::Result<Vec<i32>> {
    if !matches!(d.dtype, "uint8" | "uint16" | "u8" | "u16") {
        return Err(invalid(
            "--input",
            format!(
                "{}: {} data; watershed_ift takes uint8 or uint16 (scipy's rule): an 8/16-bit \
                 image or a uint8/uint16 .npy",
                input.display(),
                d.dtype
            ),
        ));
    }
    let mp = a.markers.as_deref().ok_or_else(|| {
        invalid(
            "--markers",
            "watershed_ift needs --markers M.npy (scipy has no default)",
        )
    })?;
    let m = nda::read_nd("--markers", mp)?;
    if m.shape != d.shape {
        return Err(invalid(
            "--markers",
            format!(
                "{}: shape {:?}, the input's is {:?}; they must match",
                mp.display(),
                m.shape,
                d.shape
            ),
        ));
    }
    let marks: Vec<i32> = m
        .integers("--markers", mp)?
        .into_iter()
        .map(|v| {
            i32::try_from(v).map_err(|_| {
                invalid(
                    "--markers",
                    format!("{}: marker {v} is beyond int32 (scipy's C int)", mp.display()),
                )
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let st = structure(a, d.shape.len())?;
    let values: Vec<u16> = d.values.iter().map(|&v| v as u16).collect();
    watershed_ift(&values, &d.shape, &st, &marks, StoredLabel::Wide)
        .map_err(|e| invalid("--input", e.to_string()))
}

/// The most slices find_objects prints (one line or JSON entry each).
const MAX_OBJECTS: usize = 1 << 24;

/// `find_objects`: the bounding boxes of labels 1..=max_label as scipy's slices, printed.
fn objects(a: &Args) -> anyhow::Result<ExitCode> {
    if a.output.is_some() {
        return Err(invalid(
            "--output",
            "find_objects prints its slices (--json for JSON); it writes no file",
        ));
    }
    let d = nda::read_nd("--input", &a.input)?;
    let labels = d.integers("--input", &a.input)?;
    let max = labels.iter().copied().max().unwrap_or(0).max(0) as usize;
    let max_label = a.max_label.unwrap_or(max);
    if max_label > MAX_OBJECTS {
        return Err(invalid(
            "--max-label",
            format!("{max_label} objects are more than find_objects prints (at most {MAX_OBJECTS})"),
        ));
    }
    let boxes = find_objects(&labels, &d.shape, max_label).map_err(|e| invalid("--input", e.to_string()))?;
    let mut objects: Vec<Value> = vec![Value::Null; max_label];
    for b in &boxes {
        objects[b.index] = json!(b.bounds.iter().map(|&(s, e)| [s, e]).collect::<Vec<_>>());
    }
    if a.json {
        let v = json!({
            "command": "ndimage", "function": "find_objects", "input": a.input.display().to_string(),
            "shape": d.shape, "max_label": max_label, "objects": objects,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for (i, o) in objects.iter().enumerate() {
            let text = match o.as_array() {
                None => "None".to_string(),
                Some(sl) => {
                    let parts: Vec<String> = sl.iter().map(|p| format!("{}:{}", p[0], p[1])).collect();
                    format!("[{}]", parts.join(", "))
                }
            };
            println!("{} {text}", i + 1);
        }
    }
    Ok(ExitCode::from(exit::OK))
}
