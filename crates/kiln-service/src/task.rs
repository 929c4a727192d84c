//! Job kinds: what a submission's `params` and `inputs` may hold, checked by the API before
//! a job is stored, and the normalized [`Task`] a worker runs.
//!
//! Validation does everything that needs no device: JSON shapes (unknown fields refused),
//! option specs and Monte Carlo parameters, kernels and boundary modes, array shapes against
//! data lengths, GEMM sizes, the element limit (a blob counts the elements its header says it
//! decodes to, read without decoding: `kiln_io::peek_shape`), blob ids. A job that passes fails on a
//! worker only for reasons of the device or the data's contents.

use crate::error::ApiError;
use kiln::core::finance::{McParams, OptionSpec};
use kiln::core::imaging::{BoundaryMode, Kernel2D, Kernel3D};
use kiln::finance::{BookOption, TargetSe};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// The kinds of the service (`user_kernel` runs only with `allow_user_kernels`; `fault`,
/// not listed, only with `allow_fault_injection`).
pub const KINDS: [&str; 9] = [
    "price",
    crate::implied::KIND,
    crate::risk::KIND,
    crate::calibrate::KIND,
    "filter2d",
    "filter3d",
    "gemm",
    "elementwise",
    crate::user_kernel::KIND,
];

/// An n-d f32 array, inline or in a blob file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ArrayInput {
    /// Its shape (for a blob: as the file says, filled by the worker).
    pub shape: Vec<usize>,
    /// Inline values, row-major.
    pub data: Option<Vec<f32>>,
    /// A blob file (path under the data dir).
    pub blob: Option<PathBuf>,
}

/// A filter kernel: a preset (`gaussian:1.5`, `box:3`, `sobel-x`, ...) or explicit weights.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum KernelSpec {
    /// A preset name.
    Preset(String),
    /// Row-major weights and the kernel's shape.
    Weights {
        /// `[k, k]` or `[k, k, k]`.
        shape: Vec<usize>,
        /// The weights.
        weights: Vec<f64>,
    },
}

/// What a worker runs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Task {
    /// Price options.
    Price {
        /// `analytic` or `mc`.
        method: String,
        /// Monte Carlo parameters (ignored by `analytic`).
        mc: McParams,
        /// The options.
        options: Vec<OptionSpec>,
    },
    /// Price a mixed book (Black-Scholes, Heston, American, basket options), or a book
    /// with Sobol points or a standard-error target: `Runtime::price_book` (or
    /// `price_to_target`) on the whole book from stream 0, one job a batch
    /// (crate::pricing's docs).
    PriceBook {
        /// `analytic` or `mc`.
        method: String,
        /// Monte Carlo parameters, the generator included (ignored by `analytic`).
        mc: McParams,
        /// The options.
        options: Vec<BookOption>,
        /// Grow the paths until each standard error meets this (Black-Scholes books only).
        target_se: Option<TargetSe>,
        /// The path cap of a `target_se` run.
        max_paths: u64,
        /// The stream index of the first option: 0 for a whole book, a shard's first row
        /// for a shard of a larger one (crate::shard), so each option keeps its stream.
        #[serde(default)]
        first_option: u32,
    },
    /// Implied volatilities of a book of quotes (crate::implied).
    ImpliedVol {
        /// The quotes, in order.
        quotes: Vec<crate::implied::QuoteRow>,
    },
    /// Portfolio risk by full revaluation of a book under a scenario set (crate::risk).
    Risk(crate::risk::RiskJob),
    /// Heston's parameters fitted to a surface of quotes (crate::calibrate).
    Calibrate {
        /// The quotes, in order.
        quotes: Vec<crate::calibrate::CalibQuote>,
        /// What their values are.
        quoted: kiln::core::finance::calibrate::QuoteKind,
        /// What is fitted.
        target: kiln::core::finance::calibrate::Target,
        /// Where the fit starts.
        start: kiln::core::finance::heston::HestonParams,
        /// The iteration cap.
        max_iterations: usize,
    },
    /// Filter a 2-D image `(h, w)` or `(h, w, c)`.
    Filter2d {
        /// The kernel.
        kernel: KernelSpec,
        /// The boundary mode as scipy names it.
        mode: String,
        /// `auto`, `direct` or `separable`.
        path: String,
        /// The image.
        input: ArrayInput,
    },
    /// Filter a 3-D volume `(d, h, w)`.
    Filter3d {
        /// The kernel.
        kernel: KernelSpec,
        /// The boundary mode.
        mode: String,
        /// `auto`, `direct` or `separable`.
        path: String,
        /// The volume.
        input: ArrayInput,
    },
    /// `C = op(A) · op(B)`, f32.
    Gemm {
        /// Rows of C.
        m: usize,
        /// Columns of C.
        n: usize,
        /// The inner dimension.
        k: usize,
        /// A stored transposed.
        trans_a: bool,
        /// B stored transposed.
        trans_b: bool,
        /// A.
        a: ArrayInput,
        /// B.
        b: ArrayInput,
    },
    /// An element-wise map.
    Elementwise {
        /// `sigmoid`, `tanh`, `relu`, `exp`, `scale_shift`, `clamp`.
        op: String,
        /// scale_shift's `a` / clamp's `lo`.
        a: Option<f32>,
        /// scale_shift's `b` / clamp's `hi`.
        b: Option<f32>,
        /// The input.
        x: ArrayInput,
    },
    /// A user's own kernel (`user_kernel`; crate::user_kernel).
    UserKernel {
        /// The kernel.
        kernel: crate::user_kernel::UserKernel,
        /// Its arguments: an expression kernel's inputs in parameter order, a raw kernel's
        /// arguments in launch order.
        args: Vec<crate::user_kernel::UserArg>,
    },
    /// Fault injection (tests and drills).
    Fault {
        /// `abort` (the worker process aborts), `illegal_address` (a GPU kernel stores
        /// through an invalid address: a sticky error), `sticky` (on any device, the job is
        /// answered with the sticky error a poisoned CUDA context gives, `cuda_sticky`, and
        /// the worker exits as after one), `sleep` (a hung job), `alloc` (the
        /// worker reserves `bytes` of memory: past its memory limit, it ends), `probe` (the
        /// worker tries to run `/bin/sh` and start a thread, and reports what its sandbox
        /// allowed).
        mode: String,
        /// `alloc`'s size in bytes.
        #[serde(default)]
        bytes: u64,
        /// Fault only while the attempt number is at most this (`None`: always).
        on_attempts: Option<u32>,
        /// `sleep`'s duration, ms.
        sleep_ms: u64,
    },
}

/// A validated submission.
#[derive(Clone, Debug)]
pub struct Validated {
    /// The task.
    pub task: Task,
    /// Its batch key.
    pub batch_key: String,
    /// Input elements.
    pub elements: u64,
    /// Whether only a GPU worker may run it.
    pub needs_gpu: bool,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidParams(msg.into())
}

/// `v` (null: an empty object) as a `T`; the error names `what`.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(what: &str, v: &Value) -> Result<T, ApiError> {
    let v = if v.is_null() {
        Value::Object(Default::default())
    } else {
        v.clone()
    };
    serde_json::from_value(v).map_err(|e| bad(format!("{what}: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterParams {
    kernel: KernelSpec,
    #[serde(default = "reflect")]
    mode: String,
    #[serde(default = "auto")]
    path: String,
}

fn reflect() -> String {
    "reflect".into()
}
fn auto() -> String {
    "auto".into()
}

/// What a JSON value is, for an error message that quotes it (long text cut short).
pub(crate) fn shown(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("{b} (a boolean)"),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() > 32 => {
            format!("{:?}... (a string)", s.chars().take(32).collect::<String>())
        }
        Value::String(s) => format!("{s:?} (a string)"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Why `v` is not a float32 number: not a number at all, or past float32's range (which
/// would parse as an infinity, be stored as `null` and fail on the worker).
fn not_f32(v: &Value) -> Option<String> {
    match v.as_f64() {
        Some(x) if (x as f32).is_finite() => None,
        Some(_) => Some(format!(
            "{} is outside float32's range (|x| <= {:e})",
            shown(v),
            f32::MAX
        )),
        None => Some(format!("{} is not a number", shown(v))),
    }
}

/// Why `v` is not a float64 number.
fn not_f64(v: &Value) -> Option<String> {
    match v {
        Value::Number(_) => None,
        _ => Some(format!("{} is not a number", shown(v))),
    }
}

/// Why `v` is not an integer (an axis: negative counts from the end).
pub(crate) fn not_int(v: &Value) -> Option<String> {
    match v.as_i64() {
        Some(n) if isize::try_from(n).is_ok() => None,
        _ => Some(format!("{} is not an integer", shown(v))),
    }
}

/// Why `v` is not a size (a whole number, 0 or more).
pub(crate) fn not_size(v: &Value) -> Option<String> {
    match v.as_u64() {
        Some(n) if usize::try_from(n).is_ok() => None,
        _ => Some(format!("{} is not a size (a whole number, 0 or more)", shown(v))),
    }
}

/// Check every element of `v` at `path` (when `v` is a JSON list) with `why_not`; the first
/// bad one is a 400 naming it by path and index (`inputs.x.data[3]: null is not a number`).
/// Run before serde reads the list, whose error would name neither the element nor its
/// index. Anything other than a list is left to serde's message.
pub(crate) fn check_list(
    path: &str,
    v: Option<&Value>,
    why_not: fn(&Value) -> Option<String>,
) -> Result<(), ApiError> {
    let Some(Value::Array(items)) = v else {
        return Ok(());
    };
    for (i, item) in items.iter().enumerate() {
        if let Some(why) = why_not(item) {
            return Err(bad(format!("{path}[{i}]: {why}")));
        }
    }
    Ok(())
}

/// Check one float32 field `name` of an object (`params.a`).
fn check_f32_field(path: &str, obj: &Value, name: &str) -> Result<(), ApiError> {
    match obj.get(name) {
        Some(v) if !v.is_null() => match not_f32(v) {
            Some(why) => Err(bad(format!("{path}.{name}: {why}"))),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// An array in a request: `{"shape": [..], "data": [..]}` or `{"blob": "b_..."}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArray {
    shape: Option<Vec<usize>>,
    data: Option<Vec<f32>>,
    blob: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GemmParams {
    m: usize,
    n: usize,
    k: usize,
    #[serde(default)]
    trans_a: bool,
    #[serde(default)]
    trans_b: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ElementwiseParams {
    op: String,
    a: Option<f32>,
    b: Option<f32>,
    lo: Option<f32>,
    hi: Option<f32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultParams {
    mode: String,
    on_attempts: Option<u32>,
    #[serde(default)]
    sleep_ms: u64,
    #[serde(default)]
    bytes: u64,
}

/// Looks blobs up for validation: a blob id to its file and format, `None` if unknown or not
/// the caller's.
pub trait BlobLookup {
    /// The blob's path and format.
    fn blob(&self, id: &str) -> Option<(PathBuf, String)>;
}

/// Check a submission and normalize it into a [`Task`]. `allow_fault` and
/// `allow_user_kernels` are the server's switches of the `fault` and `user_kernel` kinds.
pub fn validate(
    kind: &str,
    params: &Value,
    inputs: &Value,
    max_elements: u64,
    allow_fault: bool,
    allow_user_kernels: bool,
    blobs: &dyn BlobLookup,
) -> Result<Validated, ApiError> {
    let (task, elements) = match kind {
        "price" => crate::pricing::validate(params, inputs, blobs)?,
        crate::implied::KIND => crate::implied::validate(params, inputs)?,
        crate::risk::KIND => crate::risk::validate(params, inputs, max_elements)?,
        crate::calibrate::KIND => crate::calibrate::validate(params, inputs)?,
        "filter2d" | "filter3d" => filter(kind == "filter3d", params, inputs, blobs, max_elements)?,
        "gemm" => gemm(params, inputs, blobs, max_elements)?,
        "elementwise" => elementwise(params, inputs, blobs, max_elements)?,
        crate::user_kernel::KIND if !allow_user_kernels => {
            return Err(ApiError::KindOff(crate::user_kernel::OFF_MESSAGE.into()))
        }
        crate::user_kernel::KIND => {
            let c = crate::user_kernel::validate(params, inputs, blobs, max_elements)?;
            let task = Task::UserKernel {
                kernel: c.kernel,
                args: c.args,
            };
            (task, c.elements)
        }
        "fault" if allow_fault => {
            let p: FaultParams = parse("params", params)?;
            if !matches!(
                p.mode.as_str(),
                "abort" | "illegal_address" | "sticky" | "sleep" | "alloc" | "probe"
            ) {
                return Err(bad(format!(
                    "params.mode = `{}`; use abort, illegal_address, sticky, sleep, alloc or probe",
                    p.mode
                )));
            }
            let t = Task::Fault {
                mode: p.mode,
                bytes: p.bytes,
                on_attempts: p.on_attempts,
                sleep_ms: p.sleep_ms.min(3_600_000),
            };
            (t, 0)
        }
        other => {
            let mut known = KINDS.join(", ");
            if allow_fault {
                known.push_str(", fault");
            }
            return Err(ApiError::UnknownKind {
                kind: other.chars().take(64).collect(),
                known,
            });
        }
    };
    if elements > max_elements {
        return Err(bad(format!(
            "the job's inputs decode to {elements} elements; the limit is {max_elements} \
             (limits.max_elements)"
        )));
    }
    let batch_key = match &task {
        Task::Price { method, .. } if method == "analytic" => "price:analytic".to_string(),
        Task::Price { mc, .. } => format!(
            "price:mc:{}:{}:{}:{}:{}:{}",
            mc.paths, mc.steps, mc.seed, mc.antithetic, mc.control_variate, mc.fast_math
        ),
        _ => format!("solo:{}", crate::ids::new_id("k")),
    };
    let needs_gpu = match &task {
        Task::Fault { mode, .. } => mode == "illegal_address",
        Task::UserKernel { kernel, .. } => kernel.needs_gpu(),
        _ => false,
    };
    Ok(Validated {
        task,
        batch_key,
        elements,
        needs_gpu,
    })
}

/// An array input: inline data checked against its shape, or a blob of an allowed format.
pub(crate) fn array(
    what: &str,
    v: Option<&Value>,
    ranks: &[usize],
    formats: &[&str],
    blobs: &dyn BlobLookup,
    max_elements: u64,
) -> Result<(ArrayInput, u64), ApiError> {
    let v = v.ok_or_else(|| bad(format!("inputs.{what} is missing")))?;
    check_list(&format!("inputs.{what}.data"), v.get("data"), not_f32)?;
    check_list(&format!("inputs.{what}.shape"), v.get("shape"), not_size)?;
    let r: RawArray = serde_json::from_value(v.clone()).map_err(|e| bad(format!("inputs.{what}: {e}")))?;
    match (r.data, r.blob) {
        (Some(data), None) => {
            let shape = r.shape.unwrap_or_else(|| vec![data.len()]);
            if !ranks.contains(&shape.len()) {
                return Err(bad(format!(
                    "inputs.{what}.shape {shape:?}: expected {} dimensions",
                    ranks
                        .iter()
                        .map(|r| r.to_string())
                        .collect::<Vec<_>>()
                        .join(" or ")
                )));
            }
            let n = shape
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .ok_or_else(|| bad(format!("inputs.{what}.shape {shape:?} overflows")))?;
            if n == 0 || n != data.len() {
                return Err(bad(format!(
                    "inputs.{what}: shape {shape:?} holds {n} elements but data has {}",
                    data.len()
                )));
            }
            let len = data.len() as u64;
            Ok((
                ArrayInput {
                    shape,
                    data: Some(data),
                    blob: None,
                },
                len,
            ))
        }
        (None, Some(id)) => {
            let (path, format) = blobs
                .blob(&id)
                .ok_or_else(|| bad(format!("inputs.{what}.blob: no blob `{id}`")))?;
            if !formats.contains(&format.as_str()) {
                return Err(bad(format!(
                    "inputs.{what}.blob: `{id}` is {format}; expected one of {}",
                    formats.join(", ")
                )));
            }
            // the decoded size from the file's header (dimensions x channels, or the NPY
            // shape), never from its bytes: a compressed file may decode to far more
            let header = kiln_io::peek_shape(&path)
                .map_err(|e| bad(format!("inputs.{what}.blob: `{id}`: {}", io_reason(&e))))?;
            if header.elements() > max_elements {
                return Err(bad(format!(
                    "inputs.{what}.blob: `{id}` decodes to {} elements ({} {} by its header); \
                     the limit is {max_elements} (limits.max_elements)",
                    header.elements(),
                    format,
                    header.shape_text()
                )));
            }
            Ok((
                ArrayInput {
                    shape: r.shape.unwrap_or_default(),
                    data: None,
                    blob: Some(path),
                },
                header.elements(),
            ))
        }
        _ => Err(bad(format!(
            "inputs.{what}: give exactly one of `data` and `blob`"
        ))),
    }
}

/// A kiln-io error without the server-side path it starts with (the tenant named the blob
/// by its id; the data dir is not theirs to see).
pub fn io_reason(e: &kiln_io::IoError) -> String {
    let text = e.to_string();
    let prefix = format!("{}: ", e.path().display());
    text.strip_prefix(&prefix).map(str::to_string).unwrap_or(text)
}

/// Parse a boundary mode (also used by the worker).
pub fn boundary_mode(mode: &str) -> Result<BoundaryMode, String> {
    mode.parse::<BoundaryMode>().map_err(|e| e.to_string())
}

/// Parse a filter path name.
pub fn filter_path(path: &str) -> Result<kiln::imaging::FilterPath, String> {
    use kiln::imaging::FilterPath;
    match path {
        "auto" => Ok(FilterPath::Auto),
        "direct" => Ok(FilterPath::Direct),
        "separable" => Ok(FilterPath::Separable),
        o => Err(format!("path = `{o}`; use auto, direct or separable")),
    }
}

/// The 2-D kernel of a spec.
pub fn kernel2d(k: &KernelSpec) -> Result<Kernel2D, String> {
    match k {
        KernelSpec::Preset(p) => Kernel2D::preset(p).map_err(|e| e.to_string()),
        KernelSpec::Weights { shape, weights } => match shape.as_slice() {
            [a, b] => Kernel2D::new([*a, *b], weights.clone()).map_err(|e| e.to_string()),
            _ => Err(format!("a 2-D kernel's shape has 2 sides, not {shape:?}")),
        },
    }
}

/// The 3-D kernel of a spec.
pub fn kernel3d(k: &KernelSpec) -> Result<Kernel3D, String> {
    match k {
        KernelSpec::Preset(p) => Kernel3D::preset(p).map_err(|e| e.to_string()),
        KernelSpec::Weights { shape, weights } => match shape.as_slice() {
            [a, b, c] => Kernel3D::new([*a, *b, *c], weights.clone()).map_err(|e| e.to_string()),
            _ => Err(format!("a 3-D kernel's shape has 3 sides, not {shape:?}")),
        },
    }
}

fn filter(
    three: bool,
    params: &Value,
    inputs: &Value,
    blobs: &dyn BlobLookup,
    max_elements: u64,
) -> Result<(Task, u64), ApiError> {
    let kernel = params.get("kernel");
    check_list(
        "params.kernel.weights",
        kernel.and_then(|k| k.get("weights")),
        not_f64,
    )?;
    check_list(
        "params.kernel.shape",
        kernel.and_then(|k| k.get("shape")),
        not_size,
    )?;
    let p: FilterParams = parse("params", params)?;
    boundary_mode(&p.mode).map_err(|e| bad(format!("params.mode: {e}")))?;
    filter_path(&p.path).map_err(|e| bad(format!("params.{e}")))?;
    let obj = inputs
        .as_object()
        .ok_or_else(|| bad("inputs must be an object"))?;
    let (name, ranks, formats): (&str, &[usize], &[&str]) = if three {
        kernel3d(&p.kernel).map_err(|e| bad(format!("params.kernel: {e}")))?;
        ("volume", &[3], &["npy", "nii", "nii.gz"])
    } else {
        kernel2d(&p.kernel).map_err(|e| bad(format!("params.kernel: {e}")))?;
        ("image", &[2, 3], &["npy", "png", "tiff"])
    };
    if let Some(k) = obj.keys().find(|k| k.as_str() != name) {
        return Err(bad(format!("inputs.{k}: unknown field; expected `{name}`")));
    }
    let (input, n) = array(name, obj.get(name), ranks, formats, blobs, max_elements)?;
    let (kernel, mode, path) = (p.kernel, p.mode, p.path);
    let task = if three {
        Task::Filter3d {
            kernel,
            mode,
            path,
            input,
        }
    } else {
        Task::Filter2d {
            kernel,
            mode,
            path,
            input,
        }
    };
    Ok((task, n))
}

fn gemm(params: &Value, inputs: &Value, blobs: &dyn BlobLookup, max: u64) -> Result<(Task, u64), ApiError> {
    let p: GemmParams = parse("params", params)?;
    let obj = inputs
        .as_object()
        .ok_or_else(|| bad("inputs must be an object"))?;
    if let Some(k) = obj.keys().find(|k| !matches!(k.as_str(), "a" | "b")) {
        return Err(bad(format!("inputs.{k}: unknown field; expected `a` and `b`")));
    }
    let (a, na) = array("a", obj.get("a"), &[1, 2], &["npy"], blobs, max)?;
    let (b, nb) = array("b", obj.get("b"), &[1, 2], &["npy"], blobs, max)?;
    let g = kiln::linalg::Gemm::new(p.m, p.n, p.k).transposed(p.trans_a, p.trans_b);
    if let (Some(da), Some(db)) = (&a.data, &b.data) {
        g.validate(da.len(), db.len())
            .map_err(|e| bad(format!("params: {e}")))?;
    } else if p.m == 0 || p.n == 0 || p.k == 0 {
        return Err(bad("params: m, n and k must be at least 1"));
    }
    let out = (p.m as u64).saturating_mul(p.n as u64);
    let task = Task::Gemm {
        m: p.m,
        n: p.n,
        k: p.k,
        trans_a: p.trans_a,
        trans_b: p.trans_b,
        a,
        b,
    };
    Ok((task, na + nb + out))
}

/// The map op of an elementwise task.
pub fn map_op(op: &str, a: Option<f32>, b: Option<f32>) -> Result<kiln::core::backend::MapOp, String> {
    use kiln::core::backend::MapOp;
    use kiln::UnaryOp;
    let need = |v: Option<f32>, n: &str| v.ok_or_else(|| format!("`{op}` needs `{n}`"));
    let m = match op {
        "sigmoid" => MapOp::Unary(UnaryOp::Sigmoid),
        "tanh" => MapOp::Unary(UnaryOp::Tanh),
        "relu" => MapOp::Unary(UnaryOp::Relu),
        "exp" => MapOp::Unary(UnaryOp::Exp),
        "scale_shift" => MapOp::ScaleShift {
            a: need(a, "a")?,
            b: need(b, "b")?,
        },
        "clamp" => MapOp::Clamp {
            lo: need(a, "lo")?,
            hi: need(b, "hi")?,
        },
        o => {
            return Err(format!(
                "op = `{o}`; use sigmoid, tanh, relu, exp, scale_shift or clamp"
            ))
        }
    };
    m.validate().map_err(|e| e.to_string())?;
    Ok(m)
}

fn elementwise(
    params: &Value,
    inputs: &Value,
    blobs: &dyn BlobLookup,
    max: u64,
) -> Result<(Task, u64), ApiError> {
    for name in ["a", "b", "lo", "hi"] {
        check_f32_field("params", params, name)?;
    }
    let p: ElementwiseParams = parse("params", params)?;
    let (a, b) = if p.op == "clamp" { (p.lo, p.hi) } else { (p.a, p.b) };
    map_op(&p.op, a, b).map_err(|e| bad(format!("params.{e}")))?;
    let obj = inputs
        .as_object()
        .ok_or_else(|| bad("inputs must be an object"))?;
    if let Some(k) = obj.keys().find(|k| k.as_str() != "x") {
        return Err(bad(format!("inputs.{k}: unknown field; expected `x`")));
    }
    let (x, n) = array("x", obj.get("x"), &[1, 2, 3, 4], &["npy"], blobs, max)?;
    Ok((Task::Elementwise { op: p.op, a, b, x }, n))
}

#[cfg(test)]
mod tests;
