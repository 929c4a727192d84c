//! `kiln filter2d` and `kiln filter3d`: an image or volume file in, the same file type out,
//! correlated with a preset or a `.npy` kernel under one of scipy.ndimage's boundary modes.
//!
//! Everything is checked before any work and the output is written only after the filter
//! succeeded, through kiln-io's atomic writers: a run that fails leaves no output file (and an
//! existing one untouched). Bad input (extension, file content, kernel, mode) exits 4.
//!
//! Decisions:
//! - Integer images (8/16-bit PNG, TIFF, or uint8/uint16 `.npy` written to PNG/TIFF) are
//!   filtered in f32 and written back in their own type, rounded and clamped; `.npy` output
//!   is always float32 in the input's shape (an image read from PNG/TIFF: `(H, W)` gray,
//!   else `(H, W, C)`).
//! - PNG/TIFF colour channels are filtered each on its own; an alpha channel (gray+alpha,
//!   RGBA) is copied unchanged, since a filtered alpha (a Sobel of an opaque image is 0)
//!   would make the picture transparent. Every channel of an `.npy` array is filtered.
//! - A 3-D `.npy` for `filter2d` is one `(H, W, C)` image, as kiln-io reads it; `--batch`
//!   makes it a batch `(N, H, W)` of gray images instead (written as `.npy` only).
//! - Volumes are indexed as stored (`[i, j, k]` for NIfTI, as nibabel returns them), so a
//!   `.npy` kernel's axes are the volume's axes; a 4-D volume `[i, j, k, t]` is filtered
//!   volume by volume along `t`. NIfTI output is float32 with the input's header and
//!   affine (and extensions) kept; an `.npy` volume written as NIfTI gets a default header.
//!
//! On tensors: the runtime is created on its own thread while the input is
//! read (`filter_host.rs`); 8/16-bit images cross to the device as integers and are
//! converted there (`filter_image.rs`); volumes in `filter_volume.rs`. `--input` a
//! directory or a glob runs a batch through one process (`filter_batch.rs`).

use crate::exit;
use crate::filter_host::{while_dropping, Alloc, RuntimeStart};
pub(crate) use crate::filter_image::Timings;
use crate::filter_image::{filter_image2, open_image2, output_type_2d, read_image2, write_image2};
use crate::filter_kernel::{
    kernel_2d_any, kernel_3d_any, linear_op, plan_size, AnyKernel, Described, Filter2, Filter3,
};
use crate::filter_volume::{filter_volume3, read_volume3, volume_input_type};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kiln::core::imaging::{BoundaryMode, Kernel2D, Kernel3D};
use kiln::imaging::FilterPath;
use kiln::{Config, DeviceRequest, Error};
use kiln_io::{Format, IoError};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Batch mode, in both commands' help.
macro_rules! batch_help {
    ($ext:literal, $example:literal) => {
        concat!(
            "Batch: --input a directory (its ",
            $ext,
            " files) or a quoted glob;
  --output a directory (created if missing; each output keeps its input's name and format).
  Readers decode, the device filters on --streams streams (default 2), writers encode; each
  output is written to a temporary file and renamed. A failed file is listed at the end and
  the rest go on (--fail-fast: stop at the first); the exit code is 0 only if every file
  succeeded, else the first failed file's. --readers / --writers default to the cores. A
  one-line stage report (busy seconds, utilisation, the bounding stage) goes to stderr;
  --json prints the summary on stdout. Example:
  ",
            $example
        )
    };
}

const AFTER_HELP_2D: &str = concat!(
    "\
Files (by extension, case-insensitive):
  .png .tif .tiff  8/16-bit gray, gray+alpha, RGB, RGBA (TIFF also f32); each colour channel
                   is filtered on its own, alpha is copied unchanged. Written back in the
                   input's type: rounded to nearest and clamped (0..255, 0..65535).
  .npy             float32/float64/uint8/uint16, (H, W) or (H, W, C) (every channel filtered);
                   with --batch a 3-D array is (N, H, W), N gray images. .npy output is
                   always float32, in the input's shape.
Kernels: cross4 (the 4-neighbour mean), box:K (uniform_filter(size=K)), gaussian:SIGMA (scipy
  gaussian_filter, truncate 4: radius int(4*SIGMA+0.5)), sobel-x (d/dcolumn), sobel-y (d/drow),
  laplacian, sharpen; or a .npy of weights of any shape (odd or even sides; finite), applied as
  scipy.ndimage.correlate (no flip: weight [0, 0] meets the top-left neighbour; kiln ndimage).
Modes (scipy.ndimage's): reflect (default; d c b a | a b c d | d c b a), mirror (d c b | a b c d
  | c b a), nearest, wrap, constant (cval 0; --cval V or --mode constant:V, in pixel units).
Bad input (unknown extension, truncated or corrupt file, NaN/inf
  weights, a kernel of the wrong rank, an empty image, an unknown mode, output = input):
  exit 4 with the reason; nothing is written. An existing output is replaced atomically.
Examples:
  kiln filter2d --input part.png --kernel gaussian:1.5 --output smooth.png
  kiln filter2d --input frame.tif --kernel sobel-x --mode nearest --output edges.npy
  kiln filter2d --input stack.npy --batch --kernel k.npy --mode wrap --output out.npy --json
  kiln filter2d --input scan.png --kernel cross4 --device cuda --output out.png
Devices: --devices all|0,1|cpu|cpu+all splits the images of a --batch stack over devices (runs
  of whole images; the output has one device's bits per kind); one image runs on the first
  device; a directory/glob batch is refused (use --device). Not with --device.
",
    batch_help!(
        ".png .tif .tiff .npy",
        "kiln filter2d --input 'frames/*.png' --kernel gaussian:2 --output out/ --json"
    )
);

const AFTER_HELP_3D: &str = concat!(
    "\
Files (by extension, case-insensitive):
  .nii .nii.gz  NIfTI-1, 3-D (x, y, z) or 4-D (x, y, z, t), any integer or float type (scaling
                applied); a 4-D volume is filtered volume by volume along t. Written as
                float32 with the input's header, affine and extensions.
  .npy          float32/float64/uint8/uint16, 3-D [i, j, k] or 4-D [i, j, k, t] as stored;
                written as float32 (as NIfTI: with a default header).
Kernels: box:K (uniform_filter(size=K)), gaussian:SIGMA (scipy gaussian_filter, truncate 4, any
  SIGMA > 0), laplacian (7-point); or a 3-D .npy of weights of any shape (finite), applied as
  scipy.ndimage.correlate along the array's axes as stored (NIfTI: i, j, k, as nibabel).
Modes (scipy.ndimage's): reflect (default), mirror, nearest, wrap, constant (cval 0; --cval V
  or --mode constant:V).
Bad input (unknown extension, truncated or corrupt file,
  NaN/inf weights, a kernel of the wrong rank, an empty volume, an unknown mode, output =
  input): exit 4 with the reason; nothing is written. An existing output is replaced atomically.
Examples:
  kiln filter3d --input t1.nii.gz --kernel gaussian:0.8 --output t1_smooth.nii.gz
  kiln filter3d --input fmri.nii --kernel box:3 --mode nearest --output fmri_box.nii --json
  kiln filter3d --input ct.npy --kernel kernel5.npy --mode constant --cval -1000 --output ct_f.npy
Devices: --devices all|0,1|cpu|cpu+all splits a 4-D input's volumes (along t) over devices
  (runs of whole volumes; the output has one device's bits per kind); a 3-D volume runs on the
  first device; a directory/glob batch is refused (use --device). Not with --device.
",
    batch_help!(
        ".nii .nii.gz .npy",
        "kiln filter3d --input scans/ --kernel box:3 --output smooth/"
    )
);

/// What both filter commands take.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// The file to filter (format by extension; see below), or for a batch a directory or a
    /// quoted glob ('frames/*.png').
    #[arg(long, value_name = "FILE|DIR|GLOB")]
    pub(crate) input: PathBuf,
    /// A preset name (see below) or a `.npy` file of weights.
    #[arg(long, value_name = "NAME|FILE.npy")]
    pub(crate) kernel: String,
    /// Boundary mode: reflect, mirror, nearest, wrap, constant or constant:CVAL.
    #[arg(long, default_value = "reflect")]
    pub(crate) mode: String,
    /// The value read outside the image under --mode constant (default 0), in the input's
    /// units (0..255 for an 8-bit image).
    #[arg(long, value_name = "V", allow_hyphen_values = true)]
    pub(crate) cval: Option<f64>,
    /// Where to write the result (format by extension; replaced atomically); for a batch, a
    /// directory.
    #[arg(long, value_name = "FILE|DIR")]
    pub(crate) output: PathBuf,
    /// Print a summary object (shapes, kernel, mode, device, timing) as JSON on stdout; its
    /// `timings` split one file's time: read, the CUDA start, the device's stages, write.
    #[arg(long)]
    pub(crate) json: bool,
    /// Batch: threads reading and decoding (default: the machine's cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) readers: Option<u32>,
    /// Batch: threads encoding and writing (default: the machine's cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) writers: Option<u32>,
    /// Batch: device streams filtering files concurrently (default 2).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=32))]
    pub(crate) streams: Option<u32>,
    /// Batch: stop at the first file that fails (outputs already written stay).
    #[arg(long)]
    pub(crate) fail_fast: bool,
}

/// `kiln filter2d` options.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP_2D)]
pub struct Args2d {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Take a 3-D .npy input as a batch (N, H, W) of gray images, not one (H, W, C) image.
    #[arg(long)]
    pub(crate) batch: bool,
    /// Split a --batch stack's images over devices: all, 0,1,..., cpu, cpu+all or cpu+0,1
    /// (same bits as one device of each kind); one image runs on the first device.
    #[arg(long, value_name = "DEVICES")]
    pub(crate) devices: Option<kiln::executor::DeviceSet>,
}

/// `kiln filter3d` options.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP_3D)]
pub struct Args3d {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Split a 4-D input's volumes (along t) over devices: all, 0,1,..., cpu, cpu+all or
    /// cpu+0,1 (same bits as one device of each kind); a 3-D volume runs on the first device.
    #[arg(long, value_name = "DEVICES")]
    pub(crate) devices: Option<kiln::executor::DeviceSet>,
}

#[derive(Serialize)]
pub(crate) struct Summary {
    pub(crate) command: &'static str,
    pub(crate) input: String,
    pub(crate) input_shape: Vec<usize>,
    /// `gray`, `channels`, `channels+alpha`, `batch` (2-D); `volume`, `volumes` (3-D).
    pub(crate) layout: &'static str,
    pub(crate) input_type: String,
    pub(crate) kernel: String,
    pub(crate) kernel_size: usize,
    pub(crate) mode: &'static str,
    pub(crate) cval: Option<f64>,
    pub(crate) path: &'static str,
    /// Images (batch) or volumes (4-D) filtered, one per call.
    pub(crate) items: usize,
    pub(crate) device: String,
    pub(crate) fallback_reason: Option<String>,
    pub(crate) output: String,
    pub(crate) output_type: &'static str,
    pub(crate) seconds: f64,
    /// Samples (pixels x channels, or voxels) per second of filtering.
    pub(crate) samples_per_s: f64,
    pub(crate) total_seconds: f64,
    pub(crate) timings: Timings,
    /// With --devices: each worker's part (label, share, chunks, stolen, busy seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) workers: Option<Vec<crate::devices_arg::WorkerSplit>>,
    /// With --devices: what was split, or why nothing was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) devices_note: Option<String>,
}

/// A file error as an exit-code-4 error naming the flag (as `kiln price` does).
pub(crate) fn io_error(flag: &'static str) -> impl Fn(IoError) -> Error {
    move |e| Error::invalid(flag, e.to_string())
}

pub(crate) fn invalid(flag: &str, reason: impl Into<String>) -> anyhow::Error {
    Error::invalid(flag, reason).into()
}

/// Whether writing `out` would replace `input` (compared after resolving links).
pub(crate) fn is_same_file(input: &Path, out: &Path) -> bool {
    let Ok(a) = std::fs::canonicalize(input) else {
        return false;
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(parent), out.file_name()) {
        (Ok(d), Some(n)) => d.join(n) == a,
        _ => false,
    }
}

/// The mode from `--mode` and `--cval`.
pub(crate) fn parse_mode(mode: &str, cval: Option<f64>) -> anyhow::Result<BoundaryMode> {
    let m: BoundaryMode = mode
        .parse()
        .map_err(|e: Error| anyhow::Error::from(e).context("--mode"))?;
    let Some(v) = cval else { return Ok(m) };
    if !v.is_finite() {
        return Err(invalid("--cval", format!("{v} is not a finite number")));
    }
    match m {
        BoundaryMode::Constant(c) if mode.contains(':') && c != v => Err(invalid(
            "--cval",
            format!("--mode {mode} and --cval {v} disagree; give the value once"),
        )),
        BoundaryMode::Constant(_) => Ok(BoundaryMode::Constant(v)),
        other => Err(invalid(
            "--cval",
            format!(
                "--cval applies to --mode constant only, not --mode {}",
                other.name()
            ),
        )),
    }
}

/// Whether `--kernel` names a file rather than a preset.
pub(crate) fn is_npy(spec: &str) -> bool {
    spec.to_ascii_lowercase().ends_with(".npy")
}

/// The weights and shape of a `.npy` kernel of rank `rank`, in f64 as stored.
pub(crate) fn read_kernel_file(spec: &str, rank: usize) -> anyhow::Result<(Vec<usize>, Vec<f64>)> {
    let (a, _) = kiln_io::read_npy_f64(spec).map_err(io_error("--kernel"))?;
    if a.ndim() != rank {
        let want = if rank == 2 { "k x k" } else { "k x k x k" };
        let hint = if rank == 2 {
            "kiln filter3d"
        } else {
            "kiln filter2d"
        };
        return Err(invalid(
            "--kernel",
            format!(
                "{spec}: the kernel has rank {} (shape {:?}) but filter{rank}d needs a {rank}-D \
                 {want} kernel{}",
                a.ndim(),
                a.shape(),
                if a.ndim() == 5 - rank {
                    format!(" (a {}-D kernel is for {hint})", 5 - rank)
                } else {
                    String::new()
                }
            ),
        ));
    }
    Ok((a.shape().to_vec(), a.iter().copied().collect()))
}

/// A preset that failed to parse: say so, or that a kernel file must be `.npy`.
fn preset_error(spec: &str, e: Error) -> anyhow::Error {
    if Path::new(spec).is_file() {
        return invalid(
            "--kernel",
            format!("{spec} is a file but not .npy; kernel files are .npy arrays of weights"),
        );
    }
    anyhow::Error::from(e).context(format!("--kernel `{spec}` (a preset name or a .npy file)"))
}

pub(crate) fn kernel_2d(spec: &str) -> anyhow::Result<Kernel2D> {
    if !is_npy(spec) {
        return Kernel2D::preset(spec).map_err(|e| preset_error(spec, e));
    }
    let (shape, w) = read_kernel_file(spec, 2)?;
    Kernel2D::new([shape[0], shape[1]], w)
        .map_err(|e| anyhow::Error::from(e).context(format!("--kernel {spec}")))
}

pub(crate) fn kernel_3d(spec: &str) -> anyhow::Result<Kernel3D> {
    if !is_npy(spec) {
        return Kernel3D::preset(spec).map_err(|e| preset_error(spec, e));
    }
    let (shape, w) = read_kernel_file(spec, 3)?;
    Kernel3D::new([shape[0], shape[1], shape[2]], w)
        .map_err(|e| anyhow::Error::from(e).context(format!("--kernel {spec}")))
}

pub(crate) fn path_name(p: FilterPath) -> &'static str {
    match p {
        FilterPath::Separable => "separable",
        _ => "direct",
    }
}

/// The format of `path` if it is one of `allowed`, else an exit-4 error naming the
/// accepted endings (and the other command where the file is of its kind).
pub(crate) fn format_of(flag: &'static str, path: &Path, two_d: bool) -> anyhow::Result<Format> {
    let f = Format::from_path(path);
    let ok = match f {
        Some(Format::Npy) => true,
        Some(Format::Png | Format::Tiff) => two_d,
        Some(Format::Nifti | Format::NiftiGz) => !two_d,
        None => false,
    };
    match f {
        Some(f) if ok => Ok(f),
        _ => {
            let (what, exts, other) = if two_d {
                (
                    "image",
                    kiln_io::IMAGE_EXTENSIONS,
                    "; for NIfTI volumes use kiln filter3d",
                )
            } else {
                (
                    "volume",
                    kiln_io::VOLUME_EXTENSIONS,
                    "; for 2-D images use kiln filter2d",
                )
            };
            let hint = if f.is_some() { other } else { "" };
            Err(invalid(
                flag,
                format!(
                    "{}: unknown file extension; {what} files must end in one of: {exts}{hint}",
                    path.display()
                ),
            ))
        }
    }
}

/// The checks every run makes before reading the input: formats, paths, mode.
pub(crate) fn preflight(c: &Common, two_d: bool) -> anyhow::Result<(Format, Format, BoundaryMode)> {
    let fin = format_of("--input", &c.input, two_d)?;
    let fout = format_of("--output", &c.output, two_d)?;
    if is_same_file(&c.input, &c.output) {
        return Err(invalid(
            "--output",
            format!(
                "{} is the input file; write the result elsewhere",
                c.output.display()
            ),
        ));
    }
    let dir = match c.output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(invalid(
            "--output",
            format!(
                "{}: the directory {} does not exist",
                c.output.display(),
                dir.display()
            ),
        ));
    }
    let mode = parse_mode(&c.mode, c.cval)?;
    Ok((fin, fout, mode))
}

/// A progress bar on stderr for `n` items, where stderr is a terminal and there are several.
pub(crate) fn progress(n: usize, what: &str) -> Option<ProgressBar> {
    (n > 1 && std::io::stderr().is_terminal()).then(|| {
        let pb = ProgressBar::with_draw_target(Some(n as u64), ProgressDrawTarget::stderr());
        let tpl = format!("filtering [{{bar:40}}] {{pos}}/{{len}} {what} (eta {{eta}})");
        pb.set_style(ProgressStyle::with_template(&tpl).unwrap_or_else(|_| ProgressStyle::default_bar()));
        pb
    })
}

/// Runs `f` on each of `n` items with a progress bar; the bar is abandoned on failure.
pub(crate) fn for_each_item(
    n: usize,
    what: &str,
    mut f: impl FnMut(usize) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let bar = progress(n, what);
    for i in 0..n {
        if let Err(e) = f(i) {
            if let Some(pb) = &bar {
                pb.abandon();
            }
            return Err(e);
        }
        if let Some(pb) = &bar {
            pb.inc(1);
        }
    }
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// one file

/// How a 2-D input is filtered.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Layout2 {
    Gray,
    Channels { alpha: bool },
    Batch,
}

impl Layout2 {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Layout2::Gray => "gray",
            Layout2::Channels { alpha: false } => "channels",
            Layout2::Channels { alpha: true } => "channels+alpha",
            Layout2::Batch => "batch",
        }
    }
}

/// The batch flags, refused on a one-file run.
pub(crate) fn refuse_batch_flags(c: &Common) -> anyhow::Result<()> {
    for (set, flag) in [
        (c.readers.is_some(), "--readers"),
        (c.writers.is_some(), "--writers"),
        (c.streams.is_some(), "--streams"),
        (c.fail_fast, "--fail-fast"),
    ] {
        if set {
            return Err(invalid(
                flag,
                format!(
                    "{flag} applies to a batch (--input a directory or a glob such as 'frames/*.png'), \
                     and {} is one file",
                    c.input.display()
                ),
            ));
        }
    }
    Ok(())
}

/// `kiln filter2d`; see the module docs.
pub fn run_2d(args: &Args2d, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let c = &args.common;
    if let Some(set) = &args.devices {
        return crate::filter_devices::run_2d(args, set, request, cfg);
    }
    if crate::filter_batch::is_batch_input(&c.input) {
        return crate::filter_batch::run_2d(args, request, cfg);
    }
    refuse_batch_flags(c)?;
    let t_start = Instant::now();
    let (fin, fout, mode) = preflight(c, true)?;
    let d = |name: String, size: usize, path: &'static str| Described {
        command: "filter2d",
        name,
        size,
        mode,
        path,
    };
    match kernel_2d_any(&c.kernel, mode)? {
        AnyKernel::Classic(k) => {
            let path = path_name(kiln::imaging::path_2d(&k, mode, FilterPath::Auto)?);
            let desc = d(k.name().into(), k.size(), path);
            run_image(
                c,
                args.batch,
                (fin, fout),
                Filter2::Kernel(&k, mode),
                &desc,
                t_start,
                request,
                cfg,
            )
        }
        AnyKernel::Linear(f) => {
            let op = linear_op(&f);
            let desc = d(f.name.clone(), plan_size(&f), "ndimage");
            run_image(
                c,
                args.batch,
                (fin, fout),
                Filter2::Op(&op),
                &desc,
                t_start,
                request,
                cfg,
            )
        }
    }
}

/// One image file through `filter` (formats checked by `preflight`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_image(
    c: &Common,
    batch: bool,
    formats: (Format, Format),
    filter: Filter2,
    desc: &Described,
    t_start: Instant,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    let s = image_summary(c, batch, formats, filter, desc, t_start, request, cfg)?;
    finish(s, c.json)
}

/// [`run_image`] up to its summary (printed by the caller).
#[allow(clippy::too_many_arguments)]
pub(crate) fn image_summary(
    c: &Common,
    batch: bool,
    (fin, fout): (Format, Format),
    filter: Filter2,
    desc: &Described,
    t_start: Instant,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<Summary> {
    let start = RuntimeStart::spawn(request, cfg);
    let t = Instant::now();
    let alloc = Alloc::pageable();
    let header = open_image2(&c.input, fin, batch)?;
    // the output's type is checked before the data is read
    let out_type = output_type_2d(
        &c.output,
        fout,
        header.dims(),
        header.layout(),
        header.sample_type(),
    )?;
    let img = read_image2(header, &alloc)?;
    let (shape, dims, layout, in_type) = (img.shape.clone(), img.dims, img.layout, img.sample_type());
    let samples = img.data.len();
    let mut tm = Timings {
        read_s: t.elapsed().as_secs_f64(),
        ..Timings::default()
    };
    let t = Instant::now();
    let (rt, runtime_s) = start.join()?;
    tm.runtime_s = runtime_s;
    tm.runtime_wait_s = t.elapsed().as_secs_f64();
    tm.runtime_parts = rt.cuda().map(|c| c.startup());
    let streams = [rt.stream()?, rt.stream()?];
    let t = Instant::now();
    let out = filter_image2(
        &rt,
        img,
        &filter,
        out_type,
        &streams,
        &alloc,
        true,
        Some(&mut tm.filter_parts),
    )?;
    tm.filter_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (device, fallback_reason) = (rt.device_name(), rt.fallback_reason().map(str::to_string));
    let (written, teardown_s) = while_dropping(rt, || write_image2(&c.output, fout, &shape, dims, &out));
    written?;
    tm.teardown_s = teardown_s;
    tm.write_s = t.elapsed().as_secs_f64();
    Ok(Summary {
        command: desc.command,
        input: c.input.display().to_string(),
        input_shape: shape,
        layout: layout.name(),
        input_type: in_type.name().into(),
        kernel: desc.name.clone(),
        kernel_size: desc.size,
        mode: desc.mode.name(),
        cval: desc.mode.cval(),
        path: desc.path,
        items: if layout == Layout2::Batch { dims[0] } else { 1 },
        device,
        fallback_reason,
        output: c.output.display().to_string(),
        output_type: out_type.name(),
        seconds: tm.filter_s,
        samples_per_s: samples as f64 / tm.filter_s.max(1e-9),
        total_seconds: t_start.elapsed().as_secs_f64(),
        timings: tm,
        workers: None,
        devices_note: None,
    })
}

/// `kiln filter3d`; see the module docs.
pub fn run_3d(args: &Args3d, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let c = &args.common;
    if let Some(set) = &args.devices {
        return crate::filter_devices::run_3d(args, set, request, cfg);
    }
    if crate::filter_batch::is_batch_input(&c.input) {
        return crate::filter_batch::run_3d(args, request, cfg);
    }
    refuse_batch_flags(c)?;
    let t_start = Instant::now();
    let (fin, _fout, mode) = preflight(c, false)?;
    let d = |name: String, size: usize, path: &'static str| Described {
        command: "filter3d",
        name,
        size,
        mode,
        path,
    };
    match kernel_3d_any(&c.kernel, mode)? {
        AnyKernel::Classic(k) => {
            let path = path_name(kiln::imaging::path_3d(&k, mode, FilterPath::Auto)?);
            let desc = d(k.name().into(), k.size(), path);
            run_volume(c, fin, Filter3::Kernel(&k, mode), &desc, t_start, request, cfg)
        }
        AnyKernel::Linear(f) => {
            let op = linear_op(&f);
            let desc = d(f.name.clone(), plan_size(&f), "ndimage");
            run_volume(c, fin, Filter3::Op(&op), &desc, t_start, request, cfg)
        }
    }
}

/// One volume file through `filter` (formats checked by `preflight`).
pub(crate) fn run_volume(
    c: &Common,
    fin: Format,
    filter: Filter3,
    desc: &Described,
    t_start: Instant,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    let s = volume_summary(c, fin, filter, desc, t_start, request, cfg)?;
    finish(s, c.json)
}

/// [`run_volume`] up to its summary (printed by the caller).
pub(crate) fn volume_summary(
    c: &Common,
    fin: Format,
    filter: Filter3,
    desc: &Described,
    t_start: Instant,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<Summary> {
    let start = RuntimeStart::spawn(request, cfg);
    let t = Instant::now();
    let vol = read_volume3(&c.input)?;
    let mut tm = Timings {
        read_s: t.elapsed().as_secs_f64(),
        ..Timings::default()
    };
    let t = Instant::now();
    let (rt, runtime_s) = start.join()?;
    tm.runtime_s = runtime_s;
    tm.runtime_wait_s = t.elapsed().as_secs_f64();
    tm.runtime_parts = rt.cuda().map(|c| c.startup());
    let input_shape = vol.data.shape().to_vec();
    let input_type = volume_input_type(fin, &vol);
    let voxels = vol.data.len();
    let t = Instant::now();
    let (written, items) = filter_volume3(&rt, vol, &filter, true)?;
    tm.filter_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (device, fallback_reason) = (rt.device_name(), rt.fallback_reason().map(str::to_string));
    let (w, teardown_s) = while_dropping(rt, || {
        kiln_io::write_volume(&c.output, &written).map_err(io_error("--output"))
    });
    w?;
    tm.teardown_s = teardown_s;
    tm.write_s = t.elapsed().as_secs_f64();
    Ok(Summary {
        command: desc.command,
        input: c.input.display().to_string(),
        input_shape,
        layout: if written.data.ndim() == 4 {
            "volumes"
        } else {
            "volume"
        },
        input_type,
        kernel: desc.name.clone(),
        kernel_size: desc.size,
        mode: desc.mode.name(),
        cval: desc.mode.cval(),
        path: desc.path,
        items,
        device,
        fallback_reason,
        output: c.output.display().to_string(),
        output_type: "f32",
        seconds: tm.filter_s,
        samples_per_s: voxels as f64 / tm.filter_s.max(1e-9),
        total_seconds: t_start.elapsed().as_secs_f64(),
        timings: tm,
        workers: None,
        devices_note: None,
    })
}

pub(crate) fn finish(s: Summary, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        let shape: Vec<String> = s.input_shape.iter().map(|d| d.to_string()).collect();
        println!(
            "{} {} {} {} ({}, {}) on {} in {:.3} s -> {} ({})",
            s.command,
            shape.join("x"),
            s.kernel,
            match s.cval {
                Some(c) => format!("constant:{c}"),
                None => s.mode.to_string(),
            },
            s.layout,
            s.path,
            s.device,
            s.seconds,
            s.output,
            s.output_type
        );
    }
    Ok(ExitCode::from(exit::OK))
}

#[cfg(test)]
#[path = "filter_cmd_tests.rs"]
mod tests;
