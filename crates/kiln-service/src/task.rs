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

/// The kinds every server runs (`fault` only with `allow_fault_injection`).
pub const KINDS: [&str; 5] = ["price", "filter2d", "filter3d", "gemm", "elementwise"];

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
    /// Fault injection (tests and drills).
    Fault {
        /// `abort` (the worker process aborts), `illegal_address` (a GPU kernel stores
        /// through an invalid address: a sticky error), `sleep` (a hung job), `alloc` (the
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

/// Check a submission and normalize it into a [`Task`].
pub fn validate(
    kind: &str,
    params: &Value,
    inputs: &Value,
    max_elements: u64,
    allow_fault: bool,
    blobs: &dyn BlobLookup,
) -> Result<Validated, ApiError> {
    let (task, elements) = match kind {
        "price" => crate::pricing::validate(params, inputs, blobs)?,
        "filter2d" | "filter3d" => filter(kind == "filter3d", params, inputs, blobs, max_elements)?,
        "gemm" => gemm(params, inputs, blobs, max_elements)?,
        "elementwise" => elementwise(params, inputs, blobs, max_elements)?,
        "fault" if allow_fault => {
            let p: FaultParams = parse("params", params)?;
            if !matches!(
                p.mode.as_str(),
                "abort" | "illegal_address" | "sleep" | "alloc" | "probe"
            ) {
                return Err(bad(format!(
                    "params.mode = `{}`; use abort, illegal_address, sleep, alloc or probe",
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
    let needs_gpu = matches!(&task, Task::Fault { mode, .. } if mode == "illegal_address");
    Ok(Validated {
        task,
        batch_key,
        elements,
        needs_gpu,
    })
}

/// An array input: inline data checked against its shape, or a blob of an allowed format.
fn array(
    what: &str,
    v: Option<&Value>,
    ranks: &[usize],
    formats: &[&str],
    blobs: &dyn BlobLookup,
    max_elements: u64,
) -> Result<(ArrayInput, u64), ApiError> {
    let v = v.ok_or_else(|| bad(format!("inputs.{what} is missing")))?;
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
mod tests {
    use super::*;
    use serde_json::json;

    /// One CSV blob on disk.
    struct OneBlob(PathBuf);
    impl BlobLookup for OneBlob {
        fn blob(&self, id: &str) -> Option<(PathBuf, String)> {
            (id == "b").then(|| (self.0.clone(), "csv".to_string()))
        }
    }

    fn err(r: Result<Validated, ApiError>) -> String {
        match r {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted"),
        }
    }

    fn price(params: Value, inputs: Value, blobs: &dyn BlobLookup) -> Result<Validated, ApiError> {
        validate("price", &params, &inputs, 1 << 20, false, blobs)
    }

    fn heston_rec() -> Value {
        json!({"model": "heston", "option_type": "put", "spot": 100.0, "strike": 100.0, "rate": 0.02,
            "maturity": 1.0, "kappa": 1.5, "theta": 0.04, "xi": 0.5, "rho": -0.6, "v0": 0.04})
    }

    fn basket_rec(average: &str, correlation: Value) -> Value {
        json!({"style": "basket", "average": average, "strike": 100.0, "rate": 0.0, "maturity": 1.0,
            "assets": [{"spot": 100.0, "volatility": 0.2, "weight": 1.0},
                       {"spot": 100.0, "volatility": 0.3, "weight": 1.0},
                       {"spot": 100.0, "volatility": 0.25, "weight": 1.0}],
            "correlation": correlation})
    }

    /// Every kind of record is accepted; a Black-Scholes book under Philox without a target
    /// keeps its batched path (`Task::Price`), anything else is a solo `Task::PriceBook`.
    #[test]
    fn every_option_kind_is_accepted_and_plain_books_keep_their_path() {
        let dir = tempfile::tempdir().unwrap();
        let none = OneBlob(dir.path().join("none.csv"));
        let plain = json!({"option_type": "call", "spot": 100.0, "strike": 100.0, "rate": 0.0,
            "volatility": 0.2, "maturity": 1.0});
        let v = price(json!({"method": "analytic"}), json!({"options": [plain]}), &none).unwrap();
        assert!(matches!(v.task, Task::Price { ref options, .. } if options.len() == 1));
        assert_eq!(v.batch_key, "price:analytic");

        let corr = json!([[1.0, 0.5, 0.2], [0.5, 1.0, 0.3], [0.2, 0.3, 1.0]]);
        let american = json!({"option_type": "put", "style": "american", "spot": 36.0, "strike": 40.0,
            "rate": 0.06, "volatility": 0.2, "maturity": 1.0, "fixings": 50});
        let book = json!({"options": [plain, heston_rec(), american, basket_rec("geometric", corr.clone())]});
        let v = price(json!({"method": "analytic"}), book.clone(), &none).unwrap();
        let Task::PriceBook {
            ref options,
            target_se: None,
            ..
        } = v.task
        else {
            panic!("{:?}", v.task)
        };
        let kinds: Vec<&str> = options.iter().map(BookOption::kind).collect();
        assert_eq!(kinds, ["bs", "heston", "american", "basket"]);
        assert!(v.batch_key.starts_with("solo:"), "{}", v.batch_key);
        assert_eq!(v.elements, 4);
        // the stored task deserializes to itself
        let back: Task = serde_json::from_str(&serde_json::to_string(&v.task).unwrap()).unwrap();
        assert_eq!(back, v.task);

        // mc with an arithmetic basket and Sobol; a plain book under Sobol is a book too
        let mut mixed = book.clone();
        mixed["options"][3] = basket_rec("arithmetic", corr);
        let v = price(
            json!({"method": "mc", "rng": "sobol", "replicates": 8, "paths": 4096}),
            mixed,
            &none,
        )
        .unwrap();
        assert!(
            matches!(v.task, Task::PriceBook { mc, .. } if mc.rng == kiln::core::finance::Rng::Sobol { replicates: 8 })
        );
        let v = price(
            json!({"method": "mc", "target_se": "1e-3rel", "max_paths": 1 << 20}),
            json!({"options": [plain]}),
            &none,
        )
        .unwrap();
        assert!(matches!(
            v.task,
            Task::PriceBook {
                target_se: Some(TargetSe::Relative(_)),
                max_paths: 1048576,
                ..
            }
        ));
    }

    /// A CSV blob's Heston and American rows are read; a basket row is refused before the
    /// file it names is opened (it names a server path).
    #[test]
    fn csv_blobs_price_every_kind_but_basket_rows() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("book.csv");
        std::fs::write(
            &csv,
            "id,type,style,spot,strike,rate,volatility,maturity,fixings,model,kappa,theta,xi,rho,v0\n\
             a,call,european,100,100,0.05,0.2,1,,,,,,,\n\
             b,put,american,36,40,0.06,0.2,1,50,,,,,,\n\
             c,call,european,100,100,0.0,,1,,heston,1.5,0.04,0.5,-0.6,0.04\n",
        )
        .unwrap();
        let v = price(json!({"method": "mc"}), json!({"csv_blob": "b"}), &OneBlob(csv)).unwrap();
        let Task::PriceBook { options, .. } = v.task else {
            panic!("{:?}", v.task)
        };
        let kinds: Vec<&str> = options.iter().map(BookOption::kind).collect();
        assert_eq!(kinds, ["bs", "american", "heston"]);

        let csv = dir.path().join("baskets.csv");
        std::fs::write(
            &csv,
            "type,style,spot,strike,rate,volatility,maturity,basket\n\
             call,european,100,100,0.05,0.2,1,\n\
             call,basket,,100,0.05,,1,/etc/passwd\n",
        )
        .unwrap();
        let e = err(price(
            json!({"method": "mc"}),
            json!({"csv_blob": "b"}),
            &OneBlob(csv),
        ));
        assert!(
            e.contains("row 2 is a basket row") && e.contains("inputs.options") && !e.contains("passwd"),
            "{e}"
        );
    }

    /// Bad records and params are refused at validation, naming the option and the field:
    /// unknown fields, missing Heston parameters, a correlation matrix that is not positive
    /// definite, closed forms that do not exist, targets where they do not apply.
    #[test]
    fn bad_books_are_refused_naming_the_option_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let none = OneBlob(dir.path().join("none.csv"));
        let ok = json!({"spot": 100.0, "strike": 100.0, "rate": 0.0, "volatility": 0.2, "maturity": 1.0});
        let refused = |params: Value, options: Vec<Value>, needles: &[&str]| {
            let e = err(price(params, json!({ "options": options }), &none));
            for n in needles {
                assert!(e.contains(n), "wanted `{n}` in: {e}");
            }
        };
        let mut sigma = ok.clone();
        sigma["sigma"] = json!(0.2);
        refused(
            json!({}),
            vec![ok.clone(), sigma],
            &["inputs.options[1]", "unknown field `sigma`"],
        );
        let mut h = heston_rec();
        h.as_object_mut().unwrap().remove("xi");
        h.as_object_mut().unwrap().remove("v0");
        refused(
            json!({}),
            vec![h],
            &["inputs.options[0]", "model heston needs xi, v0"],
        );
        let not_pd = json!([[1.0, 0.9, -0.9], [0.9, 1.0, 0.9], [-0.9, 0.9, 1.0]]);
        refused(
            json!({"method": "mc"}),
            vec![ok.clone(), basket_rec("geometric", not_pd)],
            &["inputs.options[1]", "not positive definite: pivot 3"],
        );
        let corr = json!([[1.0, 0.5, 0.2], [0.5, 1.0, 0.3], [0.2, 0.3, 1.0]]);
        refused(
            json!({"method": "analytic"}),
            vec![basket_rec("arithmetic", corr)],
            &[
                "inputs.options[0]",
                "average arithmetic has no closed form; use method mc",
            ],
        );
        let mut asian = heston_rec();
        asian["style"] = json!("asian_arithmetic");
        asian["fixings"] = json!(12);
        refused(
            json!({"method": "analytic"}),
            vec![asian],
            &[
                "inputs.options[0]",
                "asian_arithmetic under model heston has no closed form; use method mc",
            ],
        );
        refused(
            json!({"method": "mc", "target_se": 1e-3}),
            vec![ok.clone(), heston_rec()],
            &[
                "inputs.options[1]",
                "target_se prices Black-Scholes options only (this one is heston)",
            ],
        );
        refused(
            json!({"target_se": 1e-3}),
            vec![ok.clone()],
            &["params.target_se needs method mc"],
        );
        refused(
            json!({"method": "mc", "target_se": "-1"}),
            vec![ok.clone()],
            &["params.target_se", "must be > 0"],
        );
        refused(
            json!({"method": "mc", "rng": "mt19937"}),
            vec![ok.clone()],
            &["params.rng = `mt19937`"],
        );
        refused(
            json!({"method": "mc", "rng": "sobol", "replicates": 1}),
            vec![ok.clone()],
            &["params:", "replicates"],
        );
        refused(
            json!({"method": "mc", "replicates": 8}),
            vec![ok.clone()],
            &["params.replicates needs rng = \"sobol\""],
        );
        refused(
            json!({"method": "mc", "max_paths": 1 << 20}),
            vec![ok.clone()],
            &["params.max_paths caps a target_se run"],
        );
        refused(
            json!({"method": "mc", "turbo": true}),
            vec![ok],
            &["unknown field `turbo`"],
        );
    }

    /// A stored task is JSON text: a price job's numbers must come back from the store as
    /// the same f64s, or a worker would price a different book than the one validated. A
    /// 17-digit value is where serde_json's default (best-effort) float parser is one ulp
    /// off; the workspace turns on its `float_roundtrip` feature.
    #[test]
    fn stored_books_keep_every_bit() {
        let dir = tempfile::tempdir().unwrap();
        let none = OneBlob(dir.path().join("none.csv"));
        let spot = 130.65331632653061_f64;
        let rec = json!({"style": "american", "spot": spot, "strike": 0.30000000000000004, "rate": 0.03,
            "volatility": 0.2, "maturity": 1.0, "fixings": 4});
        let v = price(json!({"method": "mc"}), json!({ "options": [rec] }), &none).unwrap();
        let text = serde_json::to_string(&v.task).unwrap();
        let back: Task = serde_json::from_str(&text).unwrap();
        let Task::PriceBook { options, .. } = &back else {
            panic!("{back:?}")
        };
        let BookOption::American { spec, .. } = options[0] else {
            panic!("{options:?}")
        };
        assert_eq!(spec.spot.to_bits(), spot.to_bits(), "{text}");
        assert_eq!(back, v.task);
    }
}
