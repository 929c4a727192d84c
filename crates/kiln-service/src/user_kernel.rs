//! `user_kernel` jobs: users' own kernels, accepted only where the server's
//! `allow_user_kernels` is on, each run in a supervised worker like every job.
//!
//! Three forms (`params.type`): `elementwise` and `reduction` (CuPy's `ElementwiseKernel` and
//! `ReductionKernel`, through kiln-expr and the facade's `Runtime::elementwise_kernel` /
//! `reduction_kernel`) and `raw` (a CUDA C++ kernel through `Runtime::raw_kernel`).
//! Validation ([`validate`]) does everything that needs no device: the parameter lists
//! parse; every input parameter has an input (an array, or a scalar for a non-raw
//! parameter) and every input a parameter; the body type-checks in kiln's C subset against
//! the inputs' types and shapes (placeholders bound, broadcasting, scalars converted as C
//! converts them); the element limit holds for inputs, outputs and the broadcast loop. A raw
//! kernel's source is checked for its size, for `#include` (NVRTC would read files of the
//! worker's machine into its log), and for its parameter list (read from the source, or
//! given as `signature`) against the arguments; its launch shape against CUDA's
//! architectural limits. What passes fails on a worker only for reasons of the device: a raw
//! source that does not compile, a kernel that faults.
//!
//! Expression kernels run on the GPU where the worker has one (compiled without FMA
//! contraction, so the result is the CPU path's bit for bit for IEEE arithmetic) and on the
//! CPU otherwise. A raw kernel, or an element-wise kernel with a `preamble` (CUDA code the
//! CPU path cannot evaluate), needs a GPU worker: such a job is claimed by GPU workers only.
//! A fault in a kernel (an illegal address: a sticky CUDA error) ends its worker, which the
//! supervisor replaces; the job fails without a retry, since the same kernel on the same
//! inputs faults again ([`run`]).

mod raw;
mod run;
mod scalar;
pub use run::run;
pub(crate) use run::write_blob;
pub(crate) use scalar::{expr_scalar, raw_scalar};

use crate::error::ApiError;
use crate::task::{ArrayInput, BlobLookup};
use kiln::expr::{ArgSpec, Axis, ElementwiseKernel, ReductionKernel, ScalarType};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The job kind.
pub const KIND: &str = "user_kernel";

/// What a server without `allow_user_kernels` answers (403 `forbidden`).
pub const OFF_MESSAGE: &str = "user kernels are off on this server: set allow_user_kernels = true \
     (KILN_ALLOW_USER_KERNELS=1) to run them";

/// Bytes of a kernel's text at most (a raw `source`, or an expression kernel's parameter
/// lists, body and preamble together).
pub const MAX_SOURCE_BYTES: usize = 256 << 10;

/// Dynamic shared memory a raw launch may ask for at most: the largest a block can opt into
/// on any CUDA GPU (227 KiB, compute capability 9.0); the worker checks the device's own.
pub const MAX_SHARED_MEM: u64 = 227 << 10;

/// Array dimensions an input may have.
const RANKS: [usize; 9] = [0, 1, 2, 3, 4, 5, 6, 7, 8];

/// A user kernel as stored for a worker.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "form", rename_all = "snake_case")]
pub enum UserKernel {
    /// CuPy's `ElementwiseKernel`.
    Elementwise {
        /// `[raw] TYPE NAME, ...`.
        in_params: String,
        /// `[raw] TYPE NAME, ...`.
        out_params: String,
        /// The C body.
        operation: String,
        /// The kernel's name.
        name: String,
        /// CUDA source before the kernel (GPU only).
        preamble: Option<String>,
        /// CuPy's `size=` (when every array is raw).
        size: Option<usize>,
    },
    /// CuPy's `ReductionKernel`.
    Reduction {
        /// `TYPE NAME, ...`.
        in_params: String,
        /// `TYPE NAME, ...`.
        out_params: String,
        /// Each input element's value.
        map_expr: String,
        /// Combines `a` and `b`.
        reduce_expr: String,
        /// Writes the outputs from `a`.
        post_map_expr: String,
        /// The starting value (zero when none).
        identity: Option<String>,
        /// The kernel's name.
        name: String,
        /// The accumulator's type (the first output's by default).
        reduce_type: Option<String>,
        /// Reduced axes (`None`: every axis).
        axis: Option<Vec<isize>>,
        /// Keep reduced axes with extent 1.
        keepdims: bool,
    },
    /// A CUDA C++ kernel.
    Raw {
        /// The source.
        source: String,
        /// The `extern "C" __global__` function to launch.
        name: String,
        /// Its parameter list, where given instead of read from the source.
        signature: Option<String>,
        /// Blocks (x, y, z).
        grid: [u32; 3],
        /// Threads per block (x, y, z).
        block: [u32; 3],
        /// Dynamic shared memory, bytes.
        shared_mem: u32,
    },
}

impl UserKernel {
    /// Whether only a GPU worker can run it: a raw kernel, or an element-wise kernel with a
    /// preamble.
    pub fn needs_gpu(&self) -> bool {
        match self {
            UserKernel::Raw { .. } => true,
            UserKernel::Elementwise { preamble, .. } => preamble.is_some(),
            UserKernel::Reduction { .. } => false,
        }
    }
}

/// One argument of a stored user kernel: an expression kernel's inputs in parameter order,
/// a raw kernel's arguments in launch order.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "arg", rename_all = "snake_case")]
pub enum UserArg {
    /// A float32 array.
    Array {
        /// The input's name.
        name: String,
        /// Its data (for a blob: the shape its header gave at submission).
        array: ArrayInput,
    },
    /// A scalar.
    Scalar {
        /// The parameter's name (raw kernels: `args[i]`).
        name: String,
        /// The JSON number (or boolean) as submitted.
        value: Value,
        /// Its type name (`float32`, `int64`, ...); `None`: NumPy's type of a Python number
        /// (int64 for an integer, float64 otherwise, bool).
        dtype: Option<String>,
    },
    /// A raw kernel's float32 output: zeros of `shape`, or a copy of an input (`from`).
    Output {
        /// Its name in the result.
        name: String,
        /// Its shape.
        shape: Vec<usize>,
        /// The input it starts as.
        from: Option<ArrayInput>,
    },
}

/// A checked `user_kernel` submission.
pub struct Checked {
    /// The kernel.
    pub kernel: UserKernel,
    /// Its arguments.
    pub args: Vec<UserArg>,
    /// Elements of its inputs and outputs.
    pub elements: u64,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidParams(msg.into())
}

/// The `params` of each form, as submitted.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Form {
    Elementwise {
        in_params: String,
        out_params: String,
        operation: String,
        #[serde(default = "kernel_name")]
        name: String,
        preamble: Option<String>,
        size: Option<usize>,
    },
    Reduction {
        in_params: String,
        out_params: String,
        map_expr: String,
        reduce_expr: String,
        post_map_expr: String,
        identity: Option<Identity>,
        #[serde(default = "reduce_kernel_name")]
        name: String,
        reduce_type: Option<String>,
        axis: Option<AxisParam>,
        #[serde(default)]
        keepdims: bool,
    },
    Raw {
        source: String,
        name: String,
        grid: Vec<u64>,
        block: Vec<u64>,
        #[serde(default)]
        shared_mem: u64,
        signature: Option<String>,
        #[serde(default)]
        args: Vec<RawArgParam>,
    },
}

fn kernel_name() -> String {
    "kernel".into()
}
fn reduce_kernel_name() -> String {
    "reduce_kernel".into()
}

/// A reduction's identity: C source (`"0"`, `"-INFINITY"`) or a number.
#[derive(Deserialize)]
#[serde(untagged)]
enum Identity {
    Text(String),
    Number(serde_json::Number),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AxisParam {
    One(isize),
    Many(Vec<isize>),
}

/// One raw-kernel argument as submitted: `{"input": NAME}`, `{"output": NAME, "shape":
/// [..]}` or `{"output": NAME, "from": INPUT}`, `{"scalar": N, "dtype": T}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArgParam {
    input: Option<String>,
    output: Option<String>,
    shape: Option<Vec<usize>>,
    from: Option<String>,
    scalar: Option<Value>,
    dtype: Option<String>,
}

/// A typed scalar input: `{"scalar": N, "dtype": T}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypedScalar {
    scalar: Value,
    dtype: Option<String>,
}

/// The lists and numbers of `params` that serde reads through untagged enums or whole
/// lists, checked first so that a bad element is named (`params.grid[1]: null is not a
/// size`) rather than reported as matching no form.
fn precheck_params(params: &Value) -> Result<(), ApiError> {
    use crate::task::{check_list, not_int, not_size};
    for f in ["grid", "block"] {
        check_list(&format!("params.{f}"), params.get(f), not_size)?;
    }
    match params.get("axis") {
        Some(v @ Value::Array(_)) => check_list("params.axis", Some(v), not_int)?,
        Some(v) if !v.is_null() => {
            if let Some(why) = not_int(v) {
                return Err(bad(format!(
                    "params.axis: {why} (an axis is an integer or a list of them)"
                )));
            }
        }
        _ => {}
    }
    if let Some(v) = params
        .get("identity")
        .filter(|v| !(v.is_null() || v.is_string() || v.is_number()))
    {
        return Err(bad(format!(
            "params.identity: {} is neither C source (a string, e.g. \"0\" or \"-INFINITY\") nor a number",
            kind_of(v)
        )));
    }
    Ok(())
}

/// Check a `user_kernel` submission (the server's switch is checked by the caller).
pub fn validate(
    params: &Value,
    inputs: &Value,
    blobs: &dyn BlobLookup,
    max_elements: u64,
) -> Result<Checked, ApiError> {
    precheck_params(params)?;
    let form: Form = crate::task::parse("params", params)?;
    let empty = Map::new();
    let inputs = match inputs {
        Value::Null => &empty,
        Value::Object(m) => m,
        _ => {
            return Err(bad(
                "inputs must be an object: an array or a scalar per input parameter",
            ))
        }
    };
    match form {
        Form::Elementwise {
            in_params,
            out_params,
            operation,
            name,
            preamble,
            size,
        } => {
            // an empty preamble is none (it would make the job GPU-only for nothing)
            let preamble = preamble.filter(|p| !p.trim().is_empty());
            let text = [&in_params, &out_params, &operation]
                .iter()
                .map(|s| s.len())
                .sum::<usize>()
                + preamble.as_ref().map_or(0, String::len);
            text_size("the kernel's parameter lists, operation and preamble", text)?;
            let mut k = ElementwiseKernel::new(&in_params, &out_params, &operation, &name)
                .map_err(|e| bad(format!("params: {e}")))?;
            if let Some(p) = &preamble {
                // the preamble and (when it is emitted verbatim) the body reach NVRTC
                no_include("params.preamble", p)?;
                no_include("params.operation", &operation)?;
                k = k.with_preamble(p);
            }
            let out_names = names(k.out_params());
            let (args, specs, mut elements) = expression_inputs(
                &name,
                &names(k.in_params()),
                &out_names,
                inputs,
                blobs,
                max_elements,
            )?;
            if let Some(n) = size.filter(|&n| n as u64 > max_elements) {
                return Err(bad(format!(
                    "params.size = {n}; the limit is {max_elements} elements (limits.max_elements)"
                )));
            }
            let b = k
                .bind(&specs, &[], size)
                .map_err(|e| bad(format!("params: {e}")))?;
            let loop_size = loop_elements(&b.shape, max_elements, &name)?;
            if preamble.is_none() {
                k.type_check(&b)
                    .map_err(|e| bad(format!("params.operation: {e}")))?;
            } else {
                k.cuda_source(&b)
                    .map_err(|e| bad(format!("params.operation: {e}")))?;
            }
            elements = elements.saturating_add(loop_size.saturating_mul(out_names.len() as u64));
            let kernel = UserKernel::Elementwise {
                in_params,
                out_params,
                operation,
                name,
                preamble,
                size,
            };
            Ok(Checked {
                kernel,
                args,
                elements,
            })
        }
        Form::Reduction {
            in_params,
            out_params,
            map_expr,
            reduce_expr,
            post_map_expr,
            identity,
            name,
            reduce_type,
            axis,
            keepdims,
        } => {
            let identity = identity.map(|i| match i {
                Identity::Text(t) => t,
                Identity::Number(n) => n.to_string(),
            });
            let text = [&in_params, &out_params, &map_expr, &reduce_expr, &post_map_expr]
                .iter()
                .map(|s| s.len())
                .sum::<usize>()
                + identity.as_ref().map_or(0, String::len)
                + reduce_type.as_ref().map_or(0, String::len);
            text_size("the kernel's parameter lists and expressions", text)?;
            let k = ReductionKernel::new(
                &in_params,
                &out_params,
                &map_expr,
                &reduce_expr,
                &post_map_expr,
                identity.as_deref(),
                &name,
                reduce_type.as_deref(),
            )
            .map_err(|e| bad(format!("params: {e}")))?;
            let out_names = names(k.out_params());
            let (args, specs, mut elements) = expression_inputs(
                &name,
                &names(k.in_params()),
                &out_names,
                inputs,
                blobs,
                max_elements,
            )?;
            // The broadcast input shape is the loop: bounded before binding computes its
            // sizes.
            let shapes: Vec<&[usize]> = specs
                .iter()
                .filter_map(|s| match s {
                    ArgSpec::Array { shape, .. } => Some(shape.as_slice()),
                    ArgSpec::Scalar(_) => None,
                })
                .collect();
            if let Ok(shape) = kiln::expr::broadcast_shapes(&shapes, &name) {
                loop_elements(&shape, max_elements, &name)?;
            }
            let axis = axis.map(|a| match a {
                AxisParam::One(a) => vec![a],
                AxisParam::Many(v) => v,
            });
            let rb = k
                .bind(&specs, &[], &expr_axis(axis.as_deref()), keepdims)
                .map_err(|e| bad(format!("params: {e}")))?;
            k.type_check(&rb).map_err(|e| bad(format!("params: {e}")))?;
            elements = elements.saturating_add((rb.out_size() as u64).saturating_mul(out_names.len() as u64));
            let kernel = UserKernel::Reduction {
                in_params,
                out_params,
                map_expr,
                reduce_expr,
                post_map_expr,
                identity,
                name,
                reduce_type,
                axis,
                keepdims,
            };
            Ok(Checked {
                kernel,
                args,
                elements,
            })
        }
        Form::Raw {
            source,
            name,
            grid,
            block,
            shared_mem,
            signature,
            args,
        } => raw::validate(
            source,
            name,
            grid,
            block,
            shared_mem,
            signature,
            args,
            inputs,
            blobs,
            max_elements,
        ),
    }
}

/// kiln-expr's axis for the stored one.
pub(crate) fn expr_axis(axis: Option<&[isize]>) -> Axis {
    match axis {
        None => Axis::All,
        Some([a]) => Axis::One(*a),
        Some(v) => Axis::Many(v.to_vec()),
    }
}

fn names(ps: &[kiln::expr::Param]) -> Vec<String> {
    ps.iter().map(|p| p.name.clone()).collect()
}

fn text_size(what: &str, n: usize) -> Result<(), ApiError> {
    if n > MAX_SOURCE_BYTES {
        return Err(bad(format!(
            "params: {what} take {n} bytes; the limit is {MAX_SOURCE_BYTES}"
        )));
    }
    Ok(())
}

/// The elements of a loop of `shape`, refused past `max` (or past u64).
fn loop_elements(shape: &[usize], max: u64, kernel: &str) -> Result<u64, ApiError> {
    let n = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
        .filter(|&n| n <= max);
    n.ok_or_else(|| {
        bad(format!(
            "params: the kernel `{kernel}` loops over the broadcast shape {shape:?}, more than the limit \
             of {max} elements (limits.max_elements)"
        ))
    })
}

/// Refuses text that would have NVRTC open a file: `#include` (after joining continued
/// lines; `%:` is C++'s digraph of `#`, so any `include` word is refused), and universal
/// character names, which could spell the directive's name.
pub fn no_include(what: &str, text: &str) -> Result<(), ApiError> {
    let joined = text.replace("\\\r\n", "").replace("\\\n", "");
    if text.contains('\0') {
        return Err(bad(format!("{what} contains a NUL byte")));
    }
    if joined.contains("include") {
        return Err(bad(format!(
            "{what}: `#include` is not allowed in the service (NVRTC would read files of the \
             worker's machine; the word `include` is refused anywhere): paste what you need \
             into the source"
        )));
    }
    if joined.contains("\\u") || joined.contains("\\U") {
        return Err(bad(format!(
            "{what}: universal character names (\\u, \\U) are not allowed in the service"
        )));
    }
    Ok(())
}

/// An expression kernel's inputs, by parameter name: arrays and scalars as
/// [`UserArg`]s in parameter order, their specs for binding, and their elements.
fn expression_inputs(
    kernel: &str,
    ins: &[String],
    outs: &[String],
    inputs: &Map<String, Value>,
    blobs: &dyn BlobLookup,
    max_elements: u64,
) -> Result<(Vec<UserArg>, Vec<ArgSpec>, u64), ApiError> {
    for k in inputs.keys() {
        if ins.contains(k) {
            continue;
        }
        if outs.contains(k) {
            return Err(bad(format!(
                "inputs.{k}: `{k}` is an output parameter of `{kernel}`; outputs are allocated \
                 by the kernel and returned in the result, not given"
            )));
        }
        return Err(bad(format!(
            "inputs.{k}: `{kernel}` has no input parameter `{k}` (its inputs: {})",
            list(ins)
        )));
    }
    let mut args = Vec::with_capacity(ins.len());
    let mut specs = Vec::with_capacity(ins.len());
    let mut elements = 0u64;
    for name in ins {
        let v = inputs.get(name).ok_or_else(|| {
            bad(format!(
                "inputs.{name} is missing: `{kernel}` takes {} (an array, or a scalar for a \
                 non-raw parameter, each)",
                list(ins)
            ))
        })?;
        match input(name, v, blobs, max_elements)? {
            Input::Array(a, n) => {
                specs.push(ArgSpec::Array {
                    dtype: ScalarType::F32,
                    shape: a.shape.clone(),
                });
                elements = elements.saturating_add(n);
                args.push(UserArg::Array {
                    name: name.clone(),
                    array: a,
                });
            }
            Input::Scalar(value, dtype) => {
                let s =
                    expr_scalar(&value, dtype.as_deref()).map_err(|e| bad(format!("inputs.{name}: {e}")))?;
                specs.push(ArgSpec::Scalar(s.dtype()));
                args.push(UserArg::Scalar {
                    name: name.clone(),
                    value,
                    dtype,
                });
            }
        }
    }
    Ok((args, specs, elements))
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

enum Input {
    Array(ArrayInput, u64),
    Scalar(Value, Option<String>),
}

/// One input: a number or boolean, `{"scalar": N, "dtype": T}`, or an array (inline or a
/// blob of NPY: the shape from its header).
fn input(name: &str, v: &Value, blobs: &dyn BlobLookup, max_elements: u64) -> Result<Input, ApiError> {
    match v {
        Value::Number(_) | Value::Bool(_) => Ok(Input::Scalar(v.clone(), None)),
        Value::Object(m) if m.contains_key("scalar") => {
            let t: TypedScalar =
                serde_json::from_value(v.clone()).map_err(|e| bad(format!("inputs.{name}: {e}")))?;
            Ok(Input::Scalar(t.scalar, t.dtype))
        }
        Value::Object(_) => {
            let (mut a, n) = crate::task::array(name, Some(v), &RANKS, &["npy"], blobs, max_elements)?;
            if let Some(path) = &a.blob {
                let h = kiln_io::peek_shape(path)
                    .map_err(|e| bad(format!("inputs.{name}.blob: {}", crate::task::io_reason(&e))))?;
                a.shape = h.shape;
            }
            Ok(Input::Array(a, n))
        }
        other => Err(bad(format!(
            "inputs.{name}: {} is neither an array ({{\"shape\", \"data\"}} or {{\"blob\"}}) nor \
             a scalar (a number, or {{\"scalar\": N, \"dtype\": \"float32\"}})",
            kind_of(other)
        ))),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a JSON list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests;
