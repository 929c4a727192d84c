//! Job kinds: what a submission's `params` and `inputs` may hold, checked by the API before
//! a job is stored, and the normalized [`Task`] a worker runs.
//!
//! Validation does everything that needs no device: JSON shapes (unknown fields refused),
//! option specs and Monte Carlo parameters, kernels and boundary modes, array shapes against
//! data lengths, GEMM sizes, the element limit, blob ids. A job that passes fails on a
//! worker only for reasons of the device or the data's contents.

use crate::error::ApiError;
use kiln::core::finance::{McParams, OptionSpec};
use kiln::core::imaging::{BoundaryMode, Kernel2D, Kernel3D};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// The kinds every server runs (`fault` only with `allow_fault_injection`).
pub const KINDS: [&str; 5] = ["price", "filter2d", "filter3d", "gemm", "elementwise"];

/// The fields of a pricing job's option (`OptionSpec`'s).
const OPTION_FIELDS: [&str; 11] = [
    "option_type",
    "style",
    "spot",
    "strike",
    "rate",
    "dividend",
    "volatility",
    "maturity",
    "fixings",
    "barrier",
    "rebate",
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
        /// through an invalid address: a sticky error), `sleep` (a hung job).
        mode: String,
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

fn parse<T: serde::de::DeserializeOwned>(what: &str, v: &Value) -> Result<T, ApiError> {
    let v = if v.is_null() {
        Value::Object(Default::default())
    } else {
        v.clone()
    };
    serde_json::from_value(v).map_err(|e| bad(format!("{what}: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceParams {
    #[serde(default = "analytic")]
    method: String,
    paths: Option<u64>,
    steps: Option<u32>,
    seed: Option<u64>,
    antithetic: Option<bool>,
    control_variate: Option<bool>,
    fast_math: Option<bool>,
}

fn analytic() -> String {
    "analytic".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceInputs {
    options: Option<Vec<Value>>,
    csv_blob: Option<String>,
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
        "price" => price(params, inputs, blobs)?,
        "filter2d" | "filter3d" => filter(kind == "filter3d", params, inputs, blobs)?,
        "gemm" => gemm(params, inputs, blobs)?,
        "elementwise" => elementwise(params, inputs, blobs)?,
        "fault" if allow_fault => {
            let p: FaultParams = parse("params", params)?;
            if !matches!(p.mode.as_str(), "abort" | "illegal_address" | "sleep") {
                return Err(bad(format!(
                    "params.mode = `{}`; use abort, illegal_address or sleep",
                    p.mode
                )));
            }
            let t = Task::Fault {
                mode: p.mode,
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
            "the job has {elements} input elements; the limit is {max_elements}"
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

fn price(params: &Value, inputs: &Value, blobs: &dyn BlobLookup) -> Result<(Task, u64), ApiError> {
    let p: PriceParams = parse("params", params)?;
    if !matches!(p.method.as_str(), "analytic" | "mc") {
        return Err(bad(format!("params.method = `{}`; use analytic or mc", p.method)));
    }
    let d = McParams::default();
    let mc = McParams {
        paths: p.paths.unwrap_or(d.paths),
        steps: p.steps.unwrap_or(d.steps),
        seed: p.seed.unwrap_or(d.seed),
        antithetic: p.antithetic.unwrap_or(d.antithetic),
        control_variate: p.control_variate.unwrap_or(d.control_variate),
        fast_math: p.fast_math.unwrap_or(d.fast_math),
        // Philox: batched jobs take their streams by position (see docs/operations.md);
        // Sobol pricing through the service is not offered yet.
        rng: d.rng,
    };
    if p.method == "mc" {
        mc.validate().map_err(|e| bad(format!("params: {e}")))?;
    }
    let i: PriceInputs = parse("inputs", inputs)?;
    let options: Vec<OptionSpec> = match (i.options, i.csv_blob) {
        (Some(list), None) => list
            .into_iter()
            .enumerate()
            .map(|(n, v)| {
                // serde would drop unknown keys: a Heston or basket record would then price
                // silently as a Black-Scholes option
                if let Some(k) = v
                    .as_object()
                    .and_then(|o| o.keys().find(|k| !OPTION_FIELDS.contains(&k.as_str())))
                {
                    return Err(bad(format!(
                        "inputs.options[{n}]: unknown field `{k}`; the service prices Black-Scholes options \
                         (fields: {}); Heston, American and basket options price through `kiln price` and \
                         the Python package",
                        OPTION_FIELDS.join(", ")
                    )));
                }
                let s: OptionSpec =
                    serde_json::from_value(v).map_err(|e| bad(format!("inputs.options[{n}]: {e}")))?;
                s.validate()
                    .map_err(|e| bad(format!("inputs.options[{n}]: {e}")))?;
                Ok(s)
            })
            .collect::<Result<_, ApiError>>()?,
        (None, Some(id)) => {
            let (path, format) = blobs
                .blob(&id)
                .ok_or_else(|| bad(format!("inputs.csv_blob: no blob `{id}`")))?;
            if format != "csv" {
                return Err(bad(format!("inputs.csv_blob: blob `{id}` is {format}, not csv")));
            }
            let f = kiln_io::options_csv::read_options(&path)
                .map_err(|e| bad(format!("inputs.csv_blob: {e}")))?;
            if let Some(e) = f.errors.first() {
                return Err(bad(format!(
                    "inputs.csv_blob: {} bad rows; the first: {e}",
                    f.errors.len()
                )));
            }
            if let Some(r) = f
                .options
                .iter()
                .find(|r| !matches!(r.kind, kiln_io::options_csv::RowKind::Plain))
            {
                return Err(bad(format!(
                    "inputs.csv_blob: row {} is not a Black-Scholes row (it is {}); the service prices those only \
                     (Heston, American and basket rows price through `kiln price` and the Python package)",
                    r.row,
                    match r.kind {
                        kiln_io::options_csv::RowKind::Heston(_) => "heston",
                        kiln_io::options_csv::RowKind::American(_) => "american",
                        _ => "basket",
                    }
                )));
            }
            f.options.into_iter().map(|r| r.spec).collect()
        }
        _ => {
            return Err(bad(
                "inputs: give exactly one of `options` (a list) and `csv_blob`",
            ))
        }
    };
    if options.is_empty() {
        return Err(bad("inputs: no options to price"));
    }
    if p.method == "analytic" {
        if let Some((n, s)) = options
            .iter()
            .enumerate()
            .find(|(_, s)| !kiln::finance::supports(kiln::finance::Method::Analytic, s.style))
        {
            return Err(bad(format!(
                "inputs.options[{n}]: style {} has no closed form; use method mc",
                s.style.name()
            )));
        }
    }
    let n = options.len() as u64;
    Ok((
        Task::Price {
            method: p.method,
            mc,
            options,
        },
        n,
    ))
}

/// An array input: inline data checked against its shape, or a blob of an allowed format.
fn array(
    what: &str,
    v: Option<&Value>,
    ranks: &[usize],
    formats: &[&str],
    blobs: &dyn BlobLookup,
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
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            Ok((
                ArrayInput {
                    shape: r.shape.unwrap_or_default(),
                    data: None,
                    blob: Some(path),
                },
                size / 4,
            ))
        }
        _ => Err(bad(format!(
            "inputs.{what}: give exactly one of `data` and `blob`"
        ))),
    }
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
    let (input, n) = array(name, obj.get(name), ranks, formats, blobs)?;
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

fn gemm(params: &Value, inputs: &Value, blobs: &dyn BlobLookup) -> Result<(Task, u64), ApiError> {
    let p: GemmParams = parse("params", params)?;
    let obj = inputs
        .as_object()
        .ok_or_else(|| bad("inputs must be an object"))?;
    if let Some(k) = obj.keys().find(|k| !matches!(k.as_str(), "a" | "b")) {
        return Err(bad(format!("inputs.{k}: unknown field; expected `a` and `b`")));
    }
    let (a, na) = array("a", obj.get("a"), &[1, 2], &["npy"], blobs)?;
    let (b, nb) = array("b", obj.get("b"), &[1, 2], &["npy"], blobs)?;
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

fn elementwise(params: &Value, inputs: &Value, blobs: &dyn BlobLookup) -> Result<(Task, u64), ApiError> {
    let p: ElementwiseParams = parse("params", params)?;
    let (a, b) = if p.op == "clamp" { (p.lo, p.hi) } else { (p.a, p.b) };
    map_op(&p.op, a, b).map_err(|e| bad(format!("params.{e}")))?;
    let obj = inputs
        .as_object()
        .ok_or_else(|| bad("inputs must be an object"))?;
    if let Some(k) = obj.keys().find(|k| k.as_str() != "x") {
        return Err(bad(format!("inputs.{k}: unknown field; expected `x`")));
    }
    let (x, n) = array("x", obj.get("x"), &[1, 2, 3, 4], &["npy"], blobs)?;
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

    /// Pricing jobs take Black-Scholes options only: a Heston record (whose extra keys serde
    /// would drop) or a heston/american/basket CSV row is refused, never priced as a plain
    /// option.
    #[test]
    fn non_black_scholes_options_are_refused_not_mispriced() {
        let dir = tempfile::tempdir().unwrap();
        let none = OneBlob(dir.path().join("none.csv"));
        let ok = json!({"options": [{"option_type": "call", "style": "european", "spot": 100.0,
            "strike": 100.0, "rate": 0.0, "dividend": 0.0, "volatility": 0.2, "maturity": 1.0,
            "fixings": null, "barrier": null}]});
        assert!(validate(
            "price",
            &json!({"method": "analytic"}),
            &ok,
            1 << 20,
            false,
            &none
        )
        .is_ok());
        let mut heston = ok.clone();
        heston["options"][0]["model"] = json!("heston");
        let e = err(validate(
            "price",
            &json!({"method": "analytic"}),
            &heston,
            1 << 20,
            false,
            &none,
        ));
        assert!(
            e.contains("unknown field `model`") && e.contains("options[0]"),
            "{e}"
        );

        let csv = dir.path().join("book.csv");
        std::fs::write(
            &csv,
            "id,type,style,spot,strike,rate,volatility,maturity,fixings\n\
             a,call,european,100,100,0.05,0.2,1,\n\
             b,put,american,36,40,0.06,0.2,1,50\n",
        )
        .unwrap();
        let blob = OneBlob(csv);
        let e = err(validate(
            "price",
            &json!({"method": "mc"}),
            &json!({"csv_blob": "b"}),
            1 << 20,
            false,
            &blob,
        ));
        assert!(
            e.contains("row 2 is not a Black-Scholes row (it is american)"),
            "{e}"
        );
    }
}
