//! `kiln ndimage FUNCTION --input ... --output ... [scipy's parameters]`: scipy.ndimage's
//! functions by their own names and parameter names, on images (PNG, TIFF, 2-D `.npy`),
//! volumes (NIfTI, 3-D/4-D `.npy`) and batches (a directory or a glob, as filter2d/3d).
//!
//! One command with the function as its first argument, not one subcommand per family:
//! scipy users call `ndimage.<function>`, the parameters are shared across families (mode,
//! cval, origin, axes, size), and adding a function is one row in [`plan`] and one in the
//! help table, with no new clap type. Files, layouts, 8/16-bit handling, atomic writes and
//! batch mode are filter2d's and filter3d's (`filter_cmd.rs`, `filter_batch.rs`), reached
//! through [`Filter2::Op`] / [`Filter3::Op`].
//!
//! The data's rank decides 2-D or 3-D: PNG/TIFF are images (colour channels each filtered),
//! NIfTI volumes (4-D: volume by volume), `.npy` by its rank (3-D is a volume; with
//! `--batch` a stack of images `(N, H, W)`, i.e. scipy's `axes=(1, 2)`; 4-D a series of
//! volumes). For a batch, the first input file decides.
//!
//! Rank filters and morphology are planned in `ndimage_rank.rs` (their flags: `--footprint`,
//! `--structure`, `--connectivity`, `--rank`, `--percentile`, `--iterations`,
//! `--border-value`); the rest is shared. Interpolation runs in `ndimage_interp*.rs`; the
//! functions on a whole n-D array (label, find_objects, watershed_ift, the distance
//! transforms, map_coordinates, the measurements) in `ndimage_label.rs` and its siblings.

use crate::filter_cmd::{invalid, io_error, preflight, refuse_batch_flags, run_image, run_volume, Common};
use crate::filter_kernel::{plan_size, Described, Filter2, Filter3};
use crate::ndimage_interp as interp;
use crate::ndimage_rank::{self as rank, MorphPlan, RankFlags};
use kiln::core::imaging::linear_spec::{self, NdParams};
use kiln::ndimage::LinearFilter;
use kiln::{Config, DeviceRequest, Tensor};
use kiln_io::Format;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

const AFTER_HELP: &str = "\
Functions (scipy.ndimage's names; the parameters each reads):
  correlate, convolve              --weights K.npy (any shape, odd or even sides), --origin, --axes
  correlate1d, convolve1d          --weights a,b,c (or .npy), --axis, --origin
  gaussian_filter                  --sigma (per axis), --order (0-2 per axis), --truncate, --radius, --axes
  gaussian_filter1d                --sigma, --axis, --order, --truncate, --radius
  gaussian_laplace                 --sigma, --truncate, --radius, --axes
  gaussian_gradient_magnitude      --sigma, --truncate, --radius, --axes
  uniform_filter                   --size (per axis), --origin, --axes
  uniform_filter1d                 --size, --axis, --origin
  sobel, prewitt                   --axis
  laplace                          --axes
  median_filter, minimum_filter,   --size N[,N..] or --footprint F.npy (bool or 0/1), --origin
    maximum_filter
  rank_filter                      --rank R (negative: from the top), --size | --footprint, --origin
  percentile_filter                --percentile Q (-100..100), --size | --footprint, --origin
  grey_erosion, grey_dilation,     --size | --footprint | --structure S.npy (non-flat values),
    grey_opening, grey_closing       --origin
  binary_erosion, binary_dilation, --structure S.npy or --connectivity C (scipy's
    binary_opening, binary_closing   generate_binary_structure(ndim, C); default 1),
                                     --iterations N (< 1: until nothing changes), --border-value 0|1
  binary_fill_holes                --structure | --connectivity, --origin
  zoom                             --zoom Z[,Z..] (> 0; shape round(shape * zoom)), --grid-mode
  shift                            --shift S[,S..] (output o reads the input at o - S)
  rotate                           --angle DEG, --axes A,B (the plane; default 1,0), --reshape
                                     true|false (more than 2 axes: every plane, as scipy)
  affine_transform                 --matrix M.npy or rows A,B;C,D (scipy's forms: (n,) a diagonal,
                                     (n, n), (n, n+1), (n+1, n+1) homogeneous), --offset,
                                     --output-shape
  spline_filter                    --order 2-5, --mode (default mirror)
  spline_filter1d                  --order, --axis, --mode (default mirror)
  map_coordinates                  --coordinates C.npy (shape (ndim, ...): row a holds the points'
                                     coordinates along axis a; the output's shape is C's shape[1:]),
                                     --order, --mode (default constant), --cval, --prefilter
  label                            --structure S.npy (3x3.., centrosymmetric) or --connectivity C
                                     (default 1); --json: num_features
  find_objects                     --max-label N; --input is labels; prints each label's slices
                                     (start:stop per axis, None if absent; --json: lists)
  watershed_ift                    --markers M (integers, the input's shape; < 0 background),
                                     --structure | --connectivity; the input uint8 or uint16
  distance_transform_edt           --sampling S[,S..], --return-indices I.npy
  distance_transform_cdt           --metric chessboard|taxicab (default chessboard),
                                     --return-indices
  distance_transform_bf            --metric euclidean|taxicab|chessboard, --sampling (euclidean),
                                     --return-indices
  measure                          --stats NAME[,NAME..], --labels L, --index 1,2,3 | all; prints a
                                     table (--json: one object); no --output
  sum (sum_labels), mean, variance, standard_deviation, minimum, maximum, median,
  minimum_position, maximum_position, center_of_mass, extrema
                                   one statistic by scipy's name: measure --stats NAME
  Measurements follow scipy: no --labels, the whole input is one region; --labels without
  --index, every label > 0 together; --index L,.. one result per label (count 0 and null
  where a label is absent); --index all (kiln's) every label > 0 present. Sums run in float64 in
  row-major order (scipy's path for a list of labels); of tied minima/maxima the first in
  row-major order is reported. label, find_objects, watershed_ift and the distance transforms
  run scipy's algorithms on the host (scipy's labels and, on ties, its nearest element);
  map_coordinates runs on the device. A mask is non-zero = foreground. Files: labels .npy int32,
  .png/.tif 16-bit (refused over 65535 labels), .nii/.nii.gz float32 with the input's header
  (refused over 2^24); distances .npy float64 (cdt int32, bf taxicab/chessboard uint32),
  .tif float32 (2-D), .nii/.nii.gz float32; indices .npy int32 (ndim, ...). .npy input may be
  any rank and bool, (u)int8-64, float32/64; PNG/TIFF one channel. map_coordinates writes
  scipy's type for the input: float32 for float32 (and NIfTI), uint8/uint16 for 8/16-bit
  images (rounded and clipped), float64 otherwise. label and the distance transforms take a
  batch (a directory or a glob, file by file).
  Interpolation also reads --order 0-5 (default 3), --mode (default constant; scipy's: constant,
  grid-constant, nearest, reflect, grid-mirror, mirror, wrap, grid-wrap), --cval (constant
  modes), --prefilter true|false. Results are scipy 1.17's bits for a float32 array (an 8/16-bit
  image: computed in float64, stored as scipy stores into uint8/uint16: t + 0.5 truncated,
  clamped); every channel (alpha too) is resampled; CPU and CUDA give the same bits. The output's
  shape may differ from the input's. NIfTI: after zoom the voxel sizes (pixdim), the sform and
  the qform offset follow the new grid (the volume covers the same space); after shift, rotate
  and affine_transform the sform moves with the grid (each output voxel keeps the world position
  of the point it was sampled from) and so does the qform while the map stays rigid in world
  space (else qform_code is set to 0; --json says so); the spline filters keep the header. A
  4-D volume is resampled volume by volume along t.
  Rank filters and morphology keep 8/16-bit data in its type on the device and give the CPU's
  bits exactly. Binary results are 0/1 in the input's type (an 8-bit PNG mask holds 0 and 1).
  filters (not binary_*): --mode reflect|constant|nearest|mirror|wrap|grid-wrap|grid-constant|grid-mirror,
  --cval V. Lists are comma-separated (--sigma 1,2.5); one value is every axis. Axes are the
  data's (0 = rows of an image, the first stored axis of a volume); negative count from the end.
Files: as kiln filter2d (.png .tif .tiff .npy) and kiln filter3d (.nii .nii.gz .npy); 8/16-bit
  images are filtered in f32 on the device and written back rounded and clamped; .npy and NIfTI
  output is float32. A 3-D .npy is a volume (--batch: N gray images, axes (1, 2)).
Batch: --input a directory or a quoted glob, --output a directory (see kiln filter2d --help).
Examples:
  kiln ndimage gaussian_filter --input t1.nii.gz --sigma 1.0 --output smooth.nii.gz
  kiln ndimage correlate --input part.png --weights k3x5.npy --origin 0,1 --mode mirror --output o.png
  kiln ndimage sobel --input frame.tif --axis 0 --mode nearest --output edges.npy
  kiln ndimage gaussian_gradient_magnitude --input 'frames/*.png' --sigma 2 --output out/ --json
  kiln ndimage median_filter --input noisy.png --size 5 --output clean.png
  kiln ndimage grey_opening --input part.tif --footprint disk7.npy --mode nearest --output o.tif
  kiln ndimage binary_fill_holes --input mask.png --connectivity 1 --output filled.png
  kiln ndimage zoom --input t1.nii.gz --zoom 2,2,1 --order 1 --output t1_up.nii.gz
  kiln ndimage rotate --input slice.png --angle 30 --reshape false --mode nearest --output r.png
  kiln ndimage affine_transform --input vol.npy --matrix 'a.npy' --output-shape 64,64,32 --output o.npy
  kiln ndimage map_coordinates --input slice.npy --coordinates pts.npy --order 1 --output v.npy
  kiln ndimage label --input mask.png --connectivity 2 --output labels.npy --json
  kiln ndimage find_objects --input labels.npy --json
  kiln ndimage distance_transform_edt --input mask.nii.gz --sampling 1,1,2.5 --output dist.nii.gz
  kiln ndimage measure --input t1.nii.gz --labels seg.nii.gz --index all --stats mean,median,extrema
  kiln ndimage mean --input cells.tif --labels labels.npy --index 1,2,3 --json
  kiln ndimage watershed_ift --input grad.png --markers seeds.npy --output regions.npy
";

/// `kiln ndimage` options.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The scipy.ndimage function, e.g. gaussian_filter (see below).
    #[arg(value_name = "FUNCTION")]
    pub(crate) function: String,
    /// The file to filter, or for a batch a directory or a quoted glob.
    #[arg(long, value_name = "FILE|DIR|GLOB")]
    pub(crate) input: PathBuf,
    /// Where to write the result (a directory for a batch); the measurements and
    /// find_objects print theirs instead.
    #[arg(long, value_name = "FILE|DIR")]
    pub(crate) output: Option<PathBuf>,
    /// Gaussian standard deviation(s), one per axis or one for all.
    #[arg(long, value_name = "S[,S..]")]
    pub(crate) sigma: Option<String>,
    /// Gaussian derivative order(s) per axis (0, 1, 2).
    #[arg(long, value_name = "N[,N..]")]
    pub(crate) order: Option<String>,
    /// Gaussian radius = int(truncate * sigma + 0.5) (default 4.0).
    #[arg(long, value_name = "T")]
    pub(crate) truncate: Option<String>,
    /// Gaussian radius per axis (overrides --truncate).
    #[arg(long, value_name = "R[,R..]")]
    pub(crate) radius: Option<String>,
    /// uniform_filter size per axis (default 3).
    #[arg(long, value_name = "N[,N..]")]
    pub(crate) size: Option<String>,
    /// Kernel placement per axis: -(n/2) <= origin <= (n-1)/2 (default 0).
    #[arg(long, value_name = "O[,O..]", allow_hyphen_values = true)]
    pub(crate) origin: Option<String>,
    /// The axis of 1-D functions, sobel and prewitt (default -1).
    #[arg(long, value_name = "A", allow_hyphen_values = true)]
    pub(crate) axis: Option<String>,
    /// The axes filtered (default: all).
    #[arg(long, value_name = "A[,A..]", allow_hyphen_values = true)]
    pub(crate) axes: Option<String>,
    /// Kernel weights: a .npy file (any shape) or a comma-separated list (1-D, or a
    /// square/cube).
    #[arg(long, value_name = "FILE.npy|W,W..", allow_hyphen_values = true)]
    pub(crate) weights: Option<String>,
    /// Boundary mode (scipy's names; default reflect).
    #[arg(long)]
    pub(crate) mode: Option<String>,
    /// The value outside under constant modes, in the input's units.
    #[arg(long, value_name = "V", allow_hyphen_values = true)]
    pub(crate) cval: Option<f64>,
    /// Take a 3-D .npy as a batch (N, H, W) of images, not a volume.
    #[arg(long)]
    pub(crate) batch: bool,
    /// Rank filters and grey morphology: a window mask (.npy, bool or 0/1), instead of
    /// --size.
    #[arg(long, value_name = "FILE.npy")]
    pub(crate) footprint: Option<String>,
    /// Grey morphology: a non-flat structuring element (.npy values); binary morphology,
    /// label, watershed_ift: the structuring element (.npy, bool or 0/1).
    #[arg(long, value_name = "FILE.npy")]
    pub(crate) structure: Option<String>,
    /// Binary morphology, label, watershed_ift: the structure
    /// generate_binary_structure(ndim, C) (default 1).
    #[arg(long, value_name = "C")]
    pub(crate) connectivity: Option<usize>,
    /// rank_filter: the rank (0 is the minimum; negative counts from the top).
    #[arg(long, value_name = "R", allow_hyphen_values = true)]
    pub(crate) rank: Option<isize>,
    /// percentile_filter: the percentile, -100 to 100.
    #[arg(long, value_name = "Q", allow_hyphen_values = true)]
    pub(crate) percentile: Option<f64>,
    /// Binary morphology: repetitions (< 1 repeats until the result stops changing).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub(crate) iterations: Option<i64>,
    /// Binary morphology: the value read outside the image (0 or 1).
    #[arg(long, value_name = "0|1")]
    pub(crate) border_value: Option<u8>,
    /// Print a summary object as JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Batch: reader threads.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) readers: Option<u32>,
    /// Batch: writer threads.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) writers: Option<u32>,
    /// Batch: device streams (default 2).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=32))]
    pub(crate) streams: Option<u32>,
    /// Batch: stop at the first file that fails.
    #[arg(long)]
    pub(crate) fail_fast: bool,
    /// zoom: the factor per axis (one for all), > 0.
    #[arg(long, value_name = "Z[,Z..]")]
    pub(crate) zoom: Option<String>,
    /// shift: the shift per axis (one for all); output index o reads the input at o - shift.
    #[arg(long, value_name = "S[,S..]", allow_hyphen_values = true)]
    pub(crate) shift: Option<String>,
    /// rotate: the angle in degrees.
    #[arg(long, value_name = "DEG", allow_hyphen_values = true)]
    pub(crate) angle: Option<f64>,
    /// rotate: enlarge the output to hold the whole rotated input (default true).
    #[arg(long, value_name = "true|false")]
    pub(crate) reshape: Option<String>,
    /// affine_transform: a .npy, or rows of numbers split by `;` (a diagonal: one row).
    #[arg(long, value_name = "FILE.npy|A,B;C,D", allow_hyphen_values = true)]
    pub(crate) matrix: Option<String>,
    /// affine_transform: the offset per axis (one for all; default 0).
    #[arg(long, value_name = "O[,O..]", allow_hyphen_values = true)]
    pub(crate) offset: Option<String>,
    /// affine_transform: the output's shape (default the input's).
    #[arg(long, value_name = "N[,N..]")]
    pub(crate) output_shape: Option<String>,
    /// Interpolation: spline-filter the input first for order > 1 (default true).
    #[arg(long, value_name = "true|false")]
    pub(crate) prefilter: Option<String>,
    /// zoom: align the pixel edges, not the corner samples (default false).
    #[arg(long, value_name = "true|false")]
    pub(crate) grid_mode: Option<String>,
    /// distance_transform_edt, _bf: the spacing along each axis (one for all; default 1).
    #[arg(long, value_name = "S[,S..]")]
    pub(crate) sampling: Option<String>,
    /// Distance transforms: also write each element's nearest background element's
    /// coordinates (int32, shape (ndim, ...), scipy's `indices`).
    #[arg(long, value_name = "FILE.npy")]
    pub(crate) return_indices: Option<PathBuf>,
    /// distance_transform_cdt: chessboard (default) or taxicab; distance_transform_bf:
    /// euclidean (default), taxicab or chessboard.
    #[arg(long, value_name = "NAME")]
    pub(crate) metric: Option<String>,
    /// map_coordinates: where to sample, shape (ndim, ...) (.npy).
    #[arg(long, value_name = "FILE.npy")]
    pub(crate) coordinates: Option<PathBuf>,
    /// Measurements: the labelled regions (integers, the input's shape).
    #[arg(long, value_name = "FILE")]
    pub(crate) labels: Option<PathBuf>,
    /// Measurements: the labels measured, one result each (`all`: every label above 0).
    #[arg(long, value_name = "L[,L..]|all", allow_hyphen_values = true)]
    pub(crate) index: Option<String>,
    /// measure: the statistics, scipy's function names (sum, mean, variance, ...).
    #[arg(long, value_name = "NAME[,NAME..]")]
    pub(crate) stats: Option<String>,
    /// watershed_ift: the markers (integers, the input's shape; negative: background).
    #[arg(long, value_name = "FILE")]
    pub(crate) markers: Option<PathBuf>,
    /// find_objects: the largest label looked for (default: the largest present).
    #[arg(long, value_name = "N")]
    pub(crate) max_label: Option<usize>,
}

/// What a function becomes.
enum Planned {
    /// A linear filter (kiln::ndimage).
    Linear(LinearFilter),
    /// A rank filter or morphology op, and the data's rank it was planned for.
    Morph(MorphPlan, usize, String),
}

impl Planned {
    /// The op on an f32 tensor (`(h, w)`, `(n, h, w)` planes, or `(d, h, w)`).
    fn apply(&self, t: &Tensor) -> kiln::Result<Tensor> {
        match self {
            Planned::Linear(f) => t.ndimage(f),
            Planned::Morph(m, ndim, _) => m.apply(*ndim, t),
        }
    }

    fn describe(&self, mode: kiln::core::imaging::BoundaryMode) -> Described {
        match self {
            Planned::Linear(f) => Described {
                command: "ndimage",
                name: f.name.clone(),
                size: plan_size(f),
                mode,
                path: "ndimage",
            },
            Planned::Morph(m, _, name) => m.describe(name, mode),
        }
    }
}

/// The function `name` for `ndim`-D data.
fn plan(name: &str, ndim: usize, p: &NdParams, a: &Args) -> anyhow::Result<Planned> {
    if let Some(flag) = crate::ndimage_label::array_flags_given(a).first() {
        return Err(invalid(
            flag,
            format!(
                "{name} does not take {flag} (a flag of the labelling, distance and measurement functions)"
            ),
        ));
    }
    if let Some(flag) = interp::interp_flags_given(a).first() {
        if rank::RANK_FUNCTIONS.iter().any(|f| f.0 == name)
            || linear_spec::FUNCTIONS.iter().any(|f| f.0 == name)
        {
            return Err(invalid(
                flag,
                format!("{name} does not take {flag} (an interpolation flag)"),
            ));
        }
    }
    let flags = RankFlags {
        size: a.size.as_deref(),
        footprint: a.footprint.as_deref(),
        structure: a.structure.as_deref(),
        connectivity: a.connectivity,
        rank: a.rank,
        percentile: a.percentile,
        iterations: a.iterations,
        border_value: a.border_value,
        origin: a.origin.as_deref(),
        mode: p.boundary()?,
        mode_given: a.mode.is_some(),
    };
    if let Some(m) = rank::plan(name, ndim, &flags) {
        for (flag, set) in [
            ("--sigma", a.sigma.is_some()),
            ("--order", a.order.is_some()),
            ("--truncate", a.truncate.is_some()),
            ("--radius", a.radius.is_some()),
            ("--axis", a.axis.is_some()),
            ("--axes", a.axes.is_some()),
            ("--weights", a.weights.is_some()),
        ] {
            if set {
                return Err(invalid(
                    flag,
                    format!("{name} does not take {flag} (a linear filter flag)"),
                ));
            }
        }
        return Ok(Planned::Morph(m?, ndim, name.to_string()));
    }
    if linear_spec::FUNCTIONS.iter().any(|f| f.0 == name) {
        for (flag, set) in [
            ("--footprint", a.footprint.is_some()),
            ("--structure", a.structure.is_some()),
            ("--connectivity", a.connectivity.is_some()),
            ("--rank", a.rank.is_some()),
            ("--percentile", a.percentile.is_some()),
            ("--iterations", a.iterations.is_some()),
            ("--border-value", a.border_value.is_some()),
        ] {
            if set {
                return Err(invalid(
                    flag,
                    format!("{name} does not take {flag} (a rank filter or morphology flag)"),
                ));
            }
        }
        return Ok(Planned::Linear(linear_spec::build(name, ndim, p)?));
    }
    let names: Vec<&str> = linear_spec::FUNCTIONS
        .iter()
        .map(|f| f.0)
        .chain(rank::RANK_FUNCTIONS.iter().map(|f| f.0))
        .chain(interp::INTERP_FUNCTIONS.iter().map(|f| f.0))
        .chain(crate::ndimage_label::ARRAY_FUNCTIONS.iter().map(|f| f.0))
        .chain(crate::ndimage_measure::STATS.iter().copied())
        .collect();
    Err(invalid(
        "FUNCTION",
        format!(
            "unknown function `{name}`; kiln ndimage has: {}",
            names.join(", ")
        ),
    ))
}

fn params(a: &Args) -> anyhow::Result<NdParams> {
    let mut p = NdParams::default();
    for (key, v) in [
        ("sigma", &a.sigma),
        ("order", &a.order),
        ("truncate", &a.truncate),
        ("radius", &a.radius),
        ("size", &a.size),
        ("origin", &a.origin),
        ("axis", &a.axis),
        ("axes", &a.axes),
    ] {
        if let Some(v) = v {
            p.set(key, v)?;
        }
    }
    let mode = a.mode.as_deref().unwrap_or("reflect");
    p.set("mode", mode)?;
    if let Some(c) = a.cval {
        if !mode.to_ascii_lowercase().contains("constant") {
            return Err(invalid(
                "--cval",
                format!("--cval applies to the constant modes, not --mode {mode}"),
            ));
        }
        p.cval = c;
    }
    if let Some(w) = &a.weights {
        if w.to_ascii_lowercase().ends_with(".npy") {
            let (arr, _) = kiln_io::read_npy_f64(w).map_err(io_error("--weights"))?;
            p.weights = Some(arr.iter().copied().collect());
            p.wshape = Some(arr.shape().to_vec());
        } else {
            p.set("weights", w)?;
        }
    }
    Ok(p)
}

/// The first file of a batch input (a directory or a glob), in sorted order.
fn first_file(input: &Path) -> Option<PathBuf> {
    let mut files: Vec<PathBuf> = if input.is_dir() {
        std::fs::read_dir(input)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && Format::from_path(p).is_some())
            .collect()
    } else {
        glob::glob(&input.to_string_lossy())
            .ok()?
            .filter_map(Result::ok)
            .collect()
    };
    files.sort();
    files.into_iter().find(|p| Format::from_path(p).is_some())
}

/// 2 or 3: how the data in `path` is filtered (module docs).
fn data_rank(path: &Path, batch: bool) -> anyhow::Result<usize> {
    match Format::from_path(path) {
        Some(Format::Png | Format::Tiff) => Ok(2),
        Some(Format::Nifti | Format::NiftiGz) => Ok(3),
        Some(Format::Npy) => {
            let f = kiln_io::open_npy(path).map_err(io_error("--input"))?;
            match f.shape().len() {
                2 => Ok(2),
                3 if batch => Ok(2),
                3 | 4 => Ok(3),
                n => Err(invalid(
                    "--input",
                    format!("{}: a {n}-D array; ndimage takes 2-D to 4-D data", path.display()),
                )),
            }
        }
        None => Err(invalid(
            "--input",
            format!(
                "{}: unknown file extension (.png .tif .tiff .npy .nii .nii.gz)",
                path.display()
            ),
        )),
    }
}

/// `kiln ndimage`; see the module docs.
pub fn run(a: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let t_start = Instant::now();
    if crate::ndimage_label::is_array_fn(&a.function) {
        return crate::ndimage_label::run(a, request, cfg);
    }
    let output = crate::ndimage_label::output_of(a)?.to_path_buf();
    let interp_plan = if interp::is_interp(&a.function) {
        Some(interp::plan(a)?)
    } else {
        None
    };
    let is_batch = crate::filter_batch::is_batch_input(&a.input);
    let probe = if is_batch {
        first_file(&a.input)
            .ok_or_else(|| invalid("--input", format!("{}: no input files", a.input.display())))?
    } else {
        a.input.clone()
    };
    let ndim = data_rank(&probe, a.batch)?;
    if let Some(ip) = interp_plan {
        return crate::ndimage_interp_io::run(a, &ip, ndim, is_batch, request, cfg);
    }
    let p = params(a)?;
    let planned = plan(&a.function, ndim, &p, a)?;
    let mode = p.boundary()?;
    let c = Common {
        input: a.input.clone(),
        kernel: a.function.clone(),
        mode: a.mode.clone().unwrap_or_else(|| "reflect".into()),
        cval: a.cval,
        output,
        json: a.json,
        readers: a.readers,
        writers: a.writers,
        streams: a.streams,
        fail_fast: a.fail_fast,
    };
    let desc = planned.describe(mode);
    let op = |t: &Tensor| planned.apply(t);
    if is_batch {
        return if ndim == 2 {
            crate::filter_batch::run_images(&c, a.batch, Filter2::Op(&op), &desc, request, cfg)
        } else {
            crate::filter_batch::run_volumes(&c, Filter3::Op(&op), &desc, request, cfg)
        };
    }
    refuse_batch_flags(&c)?;
    let (fin, fout, _) = preflight_any(&c, ndim)?;
    if ndim == 2 {
        run_image(
            &c,
            a.batch,
            (fin, fout),
            Filter2::Op(&op),
            &desc,
            t_start,
            request,
            cfg,
        )
    } else {
        run_volume(&c, fin, Filter3::Op(&op), &desc, t_start, request, cfg)
    }
}

/// filter2d's / filter3d's checks; a 3-D `.npy` read as a volume is fine for 3-D.
fn preflight_any(
    c: &Common,
    ndim: usize,
) -> anyhow::Result<(Format, Format, kiln::core::imaging::BoundaryMode)> {
    preflight(c, ndim == 2)
}
