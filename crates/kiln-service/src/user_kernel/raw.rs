//! Validation of the `raw` form: the source, the launch shape and the arguments against
//! the kernel's parameter list.

use super::scalar::{ctype_name, raw_scalar};
use super::{
    bad, input, no_include, text_size, Checked, Input, RawArgParam, UserArg, UserKernel, MAX_SHARED_MEM,
};
use crate::error::ApiError;
use crate::task::{ArrayInput, BlobLookup};
use kiln::kernels::{signature, ParamType, ScalarType as CType};
use serde_json::{Map, Value};

/// A launch shape: 1 to 3 positive extents, each within `max`.
fn dims(what: &str, v: &[u64], max: [u64; 3]) -> Result<[u32; 3], ApiError> {
    if v.is_empty() || v.len() > 3 {
        return Err(bad(format!(
            "params.{what} = {v:?}: give 1 to 3 extents (x, y, z)"
        )));
    }
    let mut out = [1u32; 3];
    for (i, &d) in v.iter().enumerate() {
        if d == 0 || d > max[i] {
            return Err(bad(format!(
                "params.{what}[{i}] = {d}: it must be 1..={} (CUDA's limit for {what}.{})",
                max[i],
                ["x", "y", "z"][i]
            )));
        }
        out[i] = d as u32;
    }
    Ok(out)
}

/// The parameter list a raw kernel's arguments are checked against: `signature` where
/// given, else the declaration of `name` read from `source`.
fn raw_params(source: &str, name: &str, sig: Option<&str>) -> Result<Vec<signature::Param>, ApiError> {
    if let Some(s) = sig {
        return signature::parse_params(s).map_err(|e| bad(format!("params.signature: {e}")));
    }
    let found = signature::kernels(source);
    match found.get(name) {
        Some(Ok(s)) => Ok(s.params.clone()),
        Some(Err(why)) => Err(bad(format!(
            "params.source: the parameter list of `{name}` cannot be read ({why}); give it as \
             params.signature, e.g. \"const float* x, float* y, int n\""
        ))),
        None => Err(bad(format!(
            "params.name: no `__global__` function `{name}` is declared in params.source (found: {}); \
             declare it extern \"C\" __global__, or give params.signature where a macro declares it",
            if found.is_empty() {
                "none".to_string()
            } else {
                found.keys().cloned().collect::<Vec<_>>().join(", ")
            }
        ))),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn validate(
    source: String,
    name: String,
    grid: Vec<u64>,
    block: Vec<u64>,
    shared_mem: u64,
    sig: Option<String>,
    given: Vec<RawArgParam>,
    inputs: &Map<String, Value>,
    blobs: &dyn BlobLookup,
    max_elements: u64,
) -> Result<Checked, ApiError> {
    if source.trim().is_empty() {
        return Err(bad("params.source is empty"));
    }
    text_size(
        "params.source",
        source.len() + sig.as_ref().map_or(0, String::len),
    )?;
    no_include("params.source", &source)?;
    if !kiln::expr::is_valid_kernel_name(&name) || name.len() > 256 {
        return Err(bad(format!(
            "params.name = `{}`: a kernel's name is a C identifier",
            name.chars().take(64).collect::<String>()
        )));
    }
    let grid = dims("grid", &grid, [i32::MAX as u64, 65_535, 65_535])?;
    let block = dims("block", &block, [1024, 1024, 64])?;
    let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
    if threads > 1024 {
        return Err(bad(format!(
            "params.block = {block:?}: {threads} threads per block; CUDA allows at most 1024"
        )));
    }
    if shared_mem > MAX_SHARED_MEM {
        return Err(bad(format!(
            "params.shared_mem = {shared_mem} bytes; at most {MAX_SHARED_MEM} (227 KiB, the most \
             any GPU gives a block)"
        )));
    }
    let params = raw_params(&source, &name, sig.as_deref())?;
    if given.len() != params.len() {
        return Err(bad(format!(
            "params.args: {} given; `{name}` takes {} ({})",
            given.len(),
            params.len(),
            params
                .iter()
                .map(|p| p.text.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mut args = Vec::with_capacity(given.len());
    let mut used: Vec<&str> = Vec::new();
    let mut outputs: Vec<&str> = Vec::new();
    let mut elements = 0u64;
    let array = |n: &str| -> Result<(ArrayInput, u64), ApiError> {
        let v = inputs
            .get(n)
            .ok_or_else(|| bad(format!("inputs.{n} is missing: params.args names it")))?;
        let (a, count) = match input(n, v, blobs, max_elements)? {
            Input::Array(a, count) => (a, count),
            Input::Scalar(..) => {
                return Err(bad(format!(
                    "inputs.{n}: a raw kernel's inputs are arrays; give a scalar in params.args \
                     as {{\"scalar\": N}}"
                )))
            }
        };
        Ok((a, count))
    };
    for (i, (a, p)) in given.iter().zip(&params).enumerate() {
        let at = format!("params.args[{i}]");
        let pointer = match p.ty {
            ParamType::Pointer(None) | ParamType::Pointer(Some(CType::F32)) => Ok(()),
            ParamType::Pointer(Some(t)) => Err(format!(
                "points to {}; the service's arrays are float32: declare it float* (or void*)",
                t.c_name()
            )),
            ParamType::Scalar(t) => Err(format!("takes a {} value", t.c_name())),
        };
        let wrong = |what: &str, why: String| {
            bad(format!(
                "{at}: {what} for the parameter `{}`, which {why}",
                p.text
            ))
        };
        match (&a.input, &a.output, &a.scalar) {
            (Some(n), None, None) if a.shape.is_none() && a.from.is_none() && a.dtype.is_none() => {
                pointer.map_err(|why| wrong("an array", why))?;
                let (arr, count) = array(n)?;
                if !used.contains(&n.as_str()) {
                    elements = elements.saturating_add(count);
                    used.push(n);
                }
                args.push(UserArg::Array {
                    name: n.clone(),
                    array: arr,
                });
            }
            (None, Some(out), None) if a.dtype.is_none() => {
                pointer.map_err(|why| wrong("an output array", why))?;
                if out.is_empty() || out.len() > 64 {
                    return Err(bad(format!("{at}.output: a name of 1 to 64 characters")));
                }
                if outputs.contains(&out.as_str()) {
                    return Err(bad(format!(
                        "{at}.output: `{out}` names two outputs; each needs its own name"
                    )));
                }
                outputs.push(out);
                let (shape, from) = match (&a.shape, &a.from) {
                    (Some(s), None) => (s.clone(), None),
                    (None, Some(src)) => {
                        let (arr, count) = array(src)?;
                        if !used.contains(&src.as_str()) {
                            elements = elements.saturating_add(count);
                            used.push(src);
                        }
                        (arr.shape.clone(), Some(arr))
                    }
                    _ => {
                        return Err(bad(format!(
                            "{at}: an output gives either `shape` (it starts as zeros) or `from` \
                             (an input it starts as)"
                        )))
                    }
                };
                let n = shape
                    .iter()
                    .try_fold(1u64, |x, &d| x.checked_mul(d as u64))
                    .filter(|&n| n > 0 && n <= max_elements)
                    .ok_or_else(|| {
                        bad(format!(
                            "{at}.shape {shape:?}: an output holds 1..={max_elements} elements \
                             (limits.max_elements)"
                        ))
                    })?;
                elements = elements.saturating_add(n);
                args.push(UserArg::Output {
                    name: out.clone(),
                    shape,
                    from,
                });
            }
            (None, None, Some(v)) if a.shape.is_none() && a.from.is_none() => {
                let ParamType::Scalar(t) = p.ty else {
                    return Err(wrong("a scalar", "takes an array (a device pointer)".into()));
                };
                let dtype = ctype_name(t);
                if let Some(d) = a.dtype.as_deref().filter(|&d| d != dtype) {
                    return Err(bad(format!(
                        "{at}.dtype = `{d}`, but the parameter `{}` takes {dtype}",
                        p.text
                    )));
                }
                raw_scalar(v, dtype).map_err(|e| bad(format!("{at}.scalar: {e}")))?;
                args.push(UserArg::Scalar {
                    name: format!("args[{i}]"),
                    value: v.clone(),
                    dtype: Some(dtype.to_string()),
                });
            }
            _ => {
                return Err(bad(format!(
                    "{at}: give one of {{\"input\": NAME}}, {{\"output\": NAME, \"shape\": [..]}}, \
                     {{\"output\": NAME, \"from\": NAME}}, {{\"scalar\": N, \"dtype\": T}}"
                )))
            }
        }
    }
    if let Some(k) = inputs.keys().find(|k| !used.contains(&k.as_str())) {
        return Err(bad(format!(
            "inputs.{k}: no argument in params.args uses it (name it as {{\"input\": \"{k}\"}} \
             or an output's \"from\")"
        )));
    }
    let kernel = UserKernel::Raw {
        source,
        name,
        signature: sig,
        grid,
        block,
        shared_mem: shared_mem as u32,
    };
    Ok(Checked {
        kernel,
        args,
        elements,
    })
}
