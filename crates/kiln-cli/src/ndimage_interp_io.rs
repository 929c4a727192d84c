//! `kiln ndimage` interpolation on files: read (images as filter2d reads them, volumes as
//! filter3d), resample each image plane, colour channel, batch plane or volume on the
//! runtime's device, write the result in its new shape (atomically, as the other functions).
//!
//! - 8/16-bit images are computed in float64 and stored as scipy stores into a uint8/uint16
//!   output (`t + 0.5` truncated for `t > 0`, clamped to the type's range): scipy's result for
//!   that array, bit for bit. Float data (float TIFF, `.npy`, NIfTI) gives float32: scipy's
//!   result for a float32 array. Every channel is resampled, alpha included.
//! - NIfTI: after `zoom` the voxel sizes, the sform and the qform offset follow the new grid
//!   (`kiln_io::Volume::resample_grid`), so the volume covers the same space; after `shift`,
//!   `rotate` and `affine_transform` the sform and (while the map stays rigid) the qform move
//!   with the resampling (`ndimage_header.rs`); the spline filters keep the header.
//! - A batch (a directory or a glob) runs file by file; a failed file is reported and the
//!   rest go on (`--fail-fast`: stop), the exit code that of the first failure.

use crate::exit;
use crate::filter_cmd::{format_of, invalid, io_error, is_same_file, Layout2};
use crate::filter_host::Alloc;
use crate::filter_image::{open_image2, output_type_2d, read_image2};
use crate::filter_volume::{read_volume3, volume_input_type};
use crate::ndimage_cmd::Args;
use crate::ndimage_interp::InterpPlan;
use kiln::core::imaging::interp::{store_value, Store};
use kiln::{Config, DType, DeviceRequest, Runtime};
use kiln_io::{Format, SampleType, SamplesRef};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The `--json` summary of one file.
#[derive(Serialize)]
pub(crate) struct InterpSummary {
    command: &'static str,
    function: String,
    input: String,
    input_shape: Vec<usize>,
    output_shape: Vec<usize>,
    /// `gray`, `channels`, `batch` (2-D); `volume`, `volumes` (3-D).
    layout: &'static str,
    input_type: String,
    order: usize,
    mode: String,
    cval: f64,
    prefilter: bool,
    /// Planes or volumes resampled, one per call.
    items: usize,
    device: String,
    fallback_reason: Option<String>,
    output: String,
    output_type: &'static str,
    /// NIfTI output: what happened to the header (`scaled` after zoom; after shift, rotate
    /// and affine_transform `moved` or why not, `ndimage_header`; else `kept`).
    #[serde(skip_serializing_if = "Option::is_none")]
    header: Option<&'static str>,
    /// Seconds resampling (upload, compute, download).
    seconds: f64,
    total_seconds: f64,
}

/// Resamples each of `n` items of `shape` (row-major, one after another in `src`) into
/// `out` (items of `oshape`, one after another).
fn run_items(
    rt: &Runtime,
    plan: &InterpPlan,
    src: &[f32],
    shape: &[usize],
    oshape: &[usize],
    n: usize,
    out: &mut Outputs,
) -> anyhow::Result<()> {
    let (isz, osz): (usize, usize) = (shape.iter().product(), oshape.iter().product());
    for i in 0..n {
        let t = rt.tensor(&src[i * isz..(i + 1) * isz], shape)?;
        match out {
            Outputs::F32(v) => {
                let y = plan.apply(rt, &t, DType::F32)?;
                y.to_host_into(&mut v[i * osz..(i + 1) * osz])?;
            }
            Outputs::Int(v, _) => {
                let y = plan.apply(rt, &t, DType::F64)?;
                y.to_host_into(&mut v[i * osz..(i + 1) * osz])?;
            }
        }
    }
    Ok(())
}

/// Where results land: f32 values, or f64 ones stored later into an integer type.
enum Outputs {
    F32(Vec<f32>),
    Int(Vec<f64>, SampleType),
}

/// The f32 samples of an image's buffer.
fn to_f32(s: SamplesRef<'_>) -> Vec<f32> {
    match s {
        SamplesRef::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
        SamplesRef::U16(v) => v.iter().map(|&x| f32::from(x)).collect(),
        SamplesRef::F32(v) => v.to_vec(),
    }
}

/// Interleaved `(h, w, c)` samples as `c` planes of `(h, w)`, and back.
fn deinterleave<T: Copy + Default>(v: &[T], c: usize) -> Vec<T> {
    if c == 1 {
        return v.to_vec();
    }
    let hw = v.len() / c;
    let mut out = vec![T::default(); v.len()];
    for (p, px) in v.chunks_exact(c).enumerate() {
        for (ch, &x) in px.iter().enumerate() {
            out[ch * hw + p] = x;
        }
    }
    out
}

fn interleave<T: Copy + Default>(v: &[T], c: usize) -> Vec<T> {
    if c == 1 {
        return v.to_vec();
    }
    let hw = v.len() / c;
    let mut out = vec![T::default(); v.len()];
    for ch in 0..c {
        for p in 0..hw {
            out[p * c + ch] = v[ch * hw + p];
        }
    }
    out
}

/// One file: an image (2-D) or a volume (3-D), `ndim` as `ndimage_cmd::data_rank` decided.
pub(crate) fn run_file(
    plan: &InterpPlan,
    input: &Path,
    output: &Path,
    ndim: usize,
    batch: bool,
    rt: &Runtime,
    t_start: Instant,
) -> anyhow::Result<InterpSummary> {
    let two_d = ndim == 2;
    let fin = format_of("--input", input, two_d)?;
    let fout = format_of("--output", output, two_d)?;
    if is_same_file(input, output) {
        return Err(invalid(
            "--output",
            format!(
                "{} is the input file; write the result elsewhere",
                output.display()
            ),
        ));
    }
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(invalid(
            "--output",
            format!(
                "{}: the directory {} does not exist",
                output.display(),
                dir.display()
            ),
        ));
    }
    let mut s = if two_d {
        run_image(plan, input, output, fin, fout, batch, rt)?
    } else {
        run_volume(plan, input, output, fin, fout, rt)?
    };
    s.device = rt.device_name();
    s.fallback_reason = rt.fallback_reason().map(str::to_string);
    s.total_seconds = t_start.elapsed().as_secs_f64();
    Ok(s)
}

fn summary(plan: &InterpPlan, input: &Path, output: &Path) -> InterpSummary {
    InterpSummary {
        command: "ndimage",
        function: plan.name.clone(),
        input: input.display().to_string(),
        input_shape: Vec::new(),
        output_shape: Vec::new(),
        layout: "",
        input_type: String::new(),
        order: plan.opts.order,
        mode: plan.mode_name.clone(),
        cval: plan.opts.cval,
        prefilter: plan.opts.prefilter,
        items: 0,
        device: String::new(),
        fallback_reason: None,
        output: output.display().to_string(),
        output_type: "f32",
        header: None,
        seconds: 0.0,
        total_seconds: 0.0,
    }
}

fn run_image(
    plan: &InterpPlan,
    input: &Path,
    output: &Path,
    fin: Format,
    fout: Format,
    batch: bool,
    rt: &Runtime,
) -> anyhow::Result<InterpSummary> {
    let header = open_image2(input, fin, batch)?;
    let (dims, layout, st) = (header.dims(), header.layout(), header.sample_type());
    // an alpha channel is resampled with the colour: one layout for every channel
    let layout = match layout {
        Layout2::Channels { .. } => Layout2::Channels { alpha: false },
        l => l,
    };
    let out_type = output_type_2d(output, fout, dims, layout, st)?;
    let (n, h, w, c) = match layout {
        Layout2::Batch => (dims[0], dims[1], dims[2], 1),
        _ => (dims[2], dims[0], dims[1], dims[2]),
    };
    let plane = [h, w];
    let oplane = plan.output_shape(&plane)?;
    let img = read_image2(header, &Alloc::pageable())?;
    let in_shape = img.shape.clone();
    let src = deinterleave(&to_f32(img.data.samples()), c);
    drop(img);
    let osz = oplane[0] * oplane[1] * n;
    let mut out = match out_type {
        SampleType::F32 => Outputs::F32(vec![0.0; osz]),
        t => Outputs::Int(vec![0.0; osz], t),
    };
    let t = Instant::now();
    run_items(rt, plan, &src, &plane, &oplane, n, &mut out)?;
    let seconds = t.elapsed().as_secs_f64();
    let (oh, ow) = (oplane[0], oplane[1]);
    let out_shape: Vec<usize> = match (layout, in_shape.len()) {
        (Layout2::Batch, _) => vec![n, oh, ow],
        (_, 2) => vec![oh, ow],
        _ => vec![oh, ow, c],
    };
    match &out {
        Outputs::F32(v) => {
            let v = if layout == Layout2::Batch {
                v.clone()
            } else {
                interleave(v, c)
            };
            if fout == Format::Npy {
                let view = ndarray::ArrayViewD::from_shape(ndarray::IxDyn(&out_shape), &v)?;
                kiln_io::write_npy(output, &view).map_err(io_error("--output"))?;
            } else {
                kiln_io::write_image_samples(output, oh, ow, c, SamplesRef::F32(&v))
                    .map_err(io_error("--output"))?;
            }
        }
        Outputs::Int(v, t) => {
            let v = interleave(v, c);
            match t {
                SampleType::U8 => {
                    let b: Vec<u8> = v
                        .iter()
                        .map(|&x| store_value(x, Store::Unsigned(255.0)) as u8)
                        .collect();
                    kiln_io::write_image_samples(output, oh, ow, c, SamplesRef::U8(&b))
                }
                _ => {
                    let b: Vec<u16> = v
                        .iter()
                        .map(|&x| store_value(x, Store::Unsigned(65535.0)) as u16)
                        .collect();
                    kiln_io::write_image_samples(output, oh, ow, c, SamplesRef::U16(&b))
                }
            }
            .map_err(io_error("--output"))?;
        }
    }
    let mut s = summary(plan, input, output);
    s.input_shape = in_shape;
    s.output_shape = out_shape;
    s.layout = layout.name();
    s.input_type = st.name().into();
    s.items = n;
    s.output_type = out_type.name();
    s.seconds = seconds;
    Ok(s)
}

fn run_volume(
    plan: &InterpPlan,
    input: &Path,
    output: &Path,
    fin: Format,
    fout: Format,
    rt: &Runtime,
) -> anyhow::Result<InterpSummary> {
    let mut vol = read_volume3(input)?;
    let in_shape = vol.data.shape().to_vec();
    let dims = [in_shape[0], in_shape[1], in_shape[2]];
    let oshape = plan.output_shape(&dims)?;
    let n = if in_shape.len() == 4 { in_shape[3] } else { 1 };
    // volumes along t as contiguous 3-D blocks
    let src: Vec<f32> = if n == 1 {
        vol.data.iter().copied().collect()
    } else {
        // [i, j, k, t] -> [t, i, j, k]
        vol.data
            .view()
            .permuted_axes(vec![3, 0, 1, 2])
            .iter()
            .copied()
            .collect()
    };
    let osz: usize = oshape.iter().product();
    let mut out = Outputs::F32(vec![0.0; osz * n]);
    let t = Instant::now();
    run_items(rt, plan, &src, &dims, &oshape, n, &mut out)?;
    let seconds = t.elapsed().as_secs_f64();
    let Outputs::F32(v) = out else {
        anyhow::bail!("internal: a volume stored as integers");
    };
    let data = if n == 1 {
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&oshape), v)?
    } else {
        let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[n, oshape[0], oshape[1], oshape[2]]), v)?;
        a.permuted_axes(vec![1, 2, 3, 0])
            .as_standard_layout()
            .into_owned()
    };
    let grid = plan.zoom_grid(&dims)?;
    let map = plan.index_map(&dims)?;
    let input_type = volume_input_type(fin, &vol);
    vol.data = data;
    let nifti = matches!(fout, Format::Nifti | Format::NiftiGz);
    let mut header = "kept";
    if let Some((f, st)) = &grid {
        vol.resample_grid([f[0], f[1], f[2]], [st[0], st[1], st[2]]);
        header = "scaled";
    }
    if let Some(m) = &map {
        header = crate::ndimage_header::follow(&mut vol.header, m);
    }
    kiln_io::write_volume(output, &vol).map_err(io_error("--output"))?;
    let mut s = summary(plan, input, output);
    s.input_shape = in_shape.clone();
    s.output_shape = vol.data.shape().to_vec();
    s.layout = if n > 1 { "volumes" } else { "volume" };
    s.input_type = input_type;
    s.items = n;
    s.header = nifti.then_some(header);
    s.seconds = seconds;
    Ok(s)
}

fn print(s: &InterpSummary, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(s)?);
    } else {
        let sh = |v: &[usize]| v.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
        println!(
            "ndimage {} {} -> {} order {} {} ({}) on {} in {:.3} s -> {} ({})",
            s.function,
            sh(&s.input_shape),
            sh(&s.output_shape),
            s.order,
            s.mode,
            s.layout,
            s.device,
            s.seconds,
            s.output,
            s.output_type
        );
    }
    Ok(())
}

/// `kiln ndimage` for an interpolation function: one file, or a batch file by file.
pub(crate) fn run(
    a: &Args,
    plan: &InterpPlan,
    ndim: usize,
    is_batch: bool,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    let t_start = Instant::now();
    for (set, flag) in [
        (a.readers.is_some(), "--readers"),
        (a.writers.is_some(), "--writers"),
        (a.streams.is_some(), "--streams"),
    ] {
        if set {
            return Err(invalid(
                flag,
                format!("{flag} is not used by interpolation (a batch runs file by file)"),
            ));
        }
    }
    if a.fail_fast && !is_batch {
        return Err(invalid("--fail-fast", "--fail-fast applies to a batch input"));
    }
    let rt = Runtime::new(request, cfg)?;
    if !is_batch {
        let out = crate::ndimage_label::output_of(a)?;
        let s = run_file(plan, &a.input, out, ndim, a.batch, &rt, t_start)?;
        print(&s, a.json)?;
        return Ok(ExitCode::from(exit::OK));
    }
    let listing = crate::filter_batch::list_inputs(&a.input, ndim == 2)?;
    let outs = crate::filter_batch::output_paths(crate::ndimage_label::output_of(a)?, &listing.files)?;
    let mut done = Vec::new();
    let mut failed: Vec<(PathBuf, String, u8)> = Vec::new();
    for (f, o) in listing.files.iter().zip(&outs) {
        match run_file(plan, f, o, ndim, a.batch, &rt, Instant::now()) {
            Ok(s) => done.push(s),
            Err(e) => {
                failed.push((f.clone(), format!("{e:#}"), exit::code_of(&e)));
                if a.fail_fast {
                    break;
                }
            }
        }
    }
    if a.json {
        #[derive(Serialize)]
        struct Failed {
            path: String,
            error: String,
            exit_code: u8,
        }
        #[derive(Serialize)]
        struct Batch<'a> {
            command: &'static str,
            function: &'a str,
            files: usize,
            succeeded: usize,
            failed: Vec<Failed>,
            results: &'a [InterpSummary],
            total_seconds: f64,
        }
        let b = Batch {
            command: "ndimage",
            function: &plan.name,
            files: listing.files.len(),
            succeeded: done.len(),
            failed: failed
                .iter()
                .map(|(p, e, c)| Failed {
                    path: p.display().to_string(),
                    error: e.clone(),
                    exit_code: *c,
                })
                .collect(),
            results: &done,
            total_seconds: t_start.elapsed().as_secs_f64(),
        };
        println!("{}", serde_json::to_string_pretty(&b)?);
    } else {
        for s in &done {
            print(s, false)?;
        }
    }
    for (p, e, _) in &failed {
        eprintln!("kiln: {}: {e}", p.display());
    }
    Ok(ExitCode::from(failed.first().map_or(exit::OK, |f| f.2)))
}
