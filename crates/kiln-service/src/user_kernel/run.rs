//! A user kernel on a worker's runtime: its inputs loaded (blobs decoded under the element
//! limit), the kernel run through the facade, its outputs returned in the job's result.
//!
//! The result is `{"kernel", "device", "outputs": {NAME: ARRAY, ...}}`, each array as other
//! kinds return arrays (`{"shape", "data"}` inline, or `{"shape", "blob", "sha256",
//! "bytes"}` past `results.inline_max_elements`) with its `dtype`; an NPY blob holds the
//! output's own dtype.
//!
//! Errors: a kernel that faults (a sticky CUDA error) fails its job without a retry, since
//! the same kernel on the same inputs faults again, and is reported sticky so the worker ends
//! after its batch and the supervisor starts a fresh one; a raw source that does not compile
//! is `compile_error` with NVRTC's log; a GPU-only kernel on a CPU worker is `no_device`.
//! None is retried.

use super::{expr_axis, expr_scalar, raw_scalar, UserArg, UserKernel};
use crate::exec::{fail, kiln_error, load, ExecOptions};
use crate::protocol::WorkOutcome;
use crate::store::{now_ms, BlobRecord};
use kiln::expr::{Arg, ElementwiseKernel, HostArray, OwnedArray, ReductionKernel, Scalar, ScalarType};
use kiln::{Error, Runtime, Tensor};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// What a CPU worker answers for a raw kernel.
pub const RAW_NEEDS_GPU: &str = "raw CUDA kernels need a GPU; this worker runs on the CPU";

/// Run a user kernel job on `rt`.
pub fn run(
    rt: &Runtime,
    opts: &ExecOptions,
    job: &str,
    kernel: UserKernel,
    args: Vec<UserArg>,
) -> WorkOutcome {
    match run_kernel(rt, opts, job, kernel, args) {
        Ok(o) | Err(o) => o,
    }
}

/// A kiln error of a user kernel as its job's outcome (see the module docs).
fn user_error(e: Error) -> WorkOutcome {
    match &e {
        Error::Cuda { .. } if e.is_sticky() => WorkOutcome::Err {
            code: "cuda_sticky".into(),
            message: format!(
                "{e} (the kernel faulted: the worker's CUDA context is poisoned, so the worker \
                 is replaced; the job is not retried: the same kernel on the same inputs would \
                 fault again)"
            ),
            retry: false,
            sticky: true,
        },
        Error::Compile { .. } => fail("compile_error", e.to_string(), false),
        _ => kiln_error(&e),
    }
}

/// An argument as loaded on the worker.
enum Loaded {
    Array(Vec<f32>, Vec<usize>),
    Scalar(Scalar),
}

/// The input array `a` of `name`, checked against the shape it was validated with.
fn load_array(
    name: &str,
    a: &crate::task::ArrayInput,
    opts: &ExecOptions,
) -> Result<(Vec<f32>, Vec<usize>), WorkOutcome> {
    let (data, shape) = load(a, false, opts.max_elements)?;
    if a.blob.is_some() && shape != a.shape {
        return Err(fail(
            "invalid_input",
            format!(
                "inputs.{name}: the blob decodes to shape {shape:?}, not the {:?} it had at submission",
                a.shape
            ),
            false,
        ));
    }
    Ok((data, shape))
}

/// An expression kernel's inputs, loaded.
fn load_inputs(args: &[UserArg], opts: &ExecOptions) -> Result<Vec<Loaded>, WorkOutcome> {
    args.iter()
        .map(|a| match a {
            UserArg::Array { name, array } => load_array(name, array, opts).map(|(d, s)| Loaded::Array(d, s)),
            UserArg::Scalar { name, value, dtype } => expr_scalar(value, dtype.as_deref())
                .map(Loaded::Scalar)
                .map_err(|e| fail("invalid_input", format!("inputs.{name}: {e}"), false)),
            UserArg::Output { name, .. } => Err(fail(
                "invalid_input",
                format!("`{name}`: an expression kernel takes no output argument"),
                false,
            )),
        })
        .collect()
}

fn expr_args(loaded: &[Loaded]) -> Vec<Arg<'_>> {
    loaded
        .iter()
        .map(|l| match l {
            Loaded::Array(d, s) => Arg::Array(HostArray::from_slice(s, d)),
            Loaded::Scalar(s) => Arg::Scalar(*s),
        })
        .collect()
}

fn run_kernel(
    rt: &Runtime,
    opts: &ExecOptions,
    job: &str,
    kernel: UserKernel,
    args: Vec<UserArg>,
) -> Result<WorkOutcome, WorkOutcome> {
    let invalid = |e: Error| fail("invalid_input", e.to_string(), false);
    // A kernel on the GPU can address anything mapped in this context: the device pool's
    // cached free blocks and the pinned staging buffers (page-locked host memory is
    // device-addressable under unified addressing), which hold data of earlier jobs,
    // perhaps another token's, go back to the driver first, so reading them faults instead.
    if let Some(dev) = rt.cuda() {
        dev.empty_cache();
        dev.pinned_pool().empty_cache();
    }
    match kernel {
        UserKernel::Elementwise {
            in_params,
            out_params,
            operation,
            name,
            preamble,
            size,
        } => {
            if preamble.is_some() && rt.cuda().is_none() {
                return Err(fail(
                    "no_device",
                    format!(
                        "the element-wise kernel `{name}` has a preamble, which runs only on a GPU; \
                         this worker runs on the CPU"
                    ),
                    false,
                ));
            }
            let mut k =
                ElementwiseKernel::new(&in_params, &out_params, &operation, &name).map_err(invalid)?;
            if let Some(p) = &preamble {
                k = k.with_preamble(p);
            }
            let loaded = load_inputs(&args, opts)?;
            let outs = rt
                .elementwise_kernel(&k, &expr_args(&loaded), size)
                .map_err(user_error)?;
            let names = k.out_params().iter().map(|p| p.name.clone());
            Ok(result(opts, job, &name, rt, names.zip(outs).collect()))
        }
        UserKernel::Reduction {
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
            .map_err(invalid)?;
            let loaded = load_inputs(&args, opts)?;
            let outs = rt
                .reduction_kernel(&k, &expr_args(&loaded), &expr_axis(axis.as_deref()), keepdims)
                .map_err(user_error)?;
            let names = k.out_params().iter().map(|p| p.name.clone());
            Ok(result(opts, job, &name, rt, names.zip(outs).collect()))
        }
        UserKernel::Raw {
            source,
            name,
            signature,
            grid,
            block,
            shared_mem,
        } => {
            if rt.cuda().is_none() {
                return Err(fail("no_device", RAW_NEEDS_GPU, false));
            }
            let k = rt.raw_kernel(&source, &name, &[]).map_err(user_error)?;
            let k = match &signature {
                Some(s) => k.with_signature(s).map_err(user_error)?,
                None => k,
            };
            let mut values: Vec<Result<Tensor, kiln::Scalar>> = Vec::with_capacity(args.len());
            let mut outputs = Vec::new();
            for a in &args {
                match a {
                    UserArg::Array { name, array } => {
                        let (d, s) = load_array(name, array, opts)?;
                        values.push(Ok(rt.tensor(&d, &s).map_err(user_error)?));
                    }
                    UserArg::Output { name, shape, from } => {
                        let data = match from {
                            Some(src) => load_array(name, src, opts)?.0,
                            None => vec![0.0; shape.iter().product()],
                        };
                        if data.len() != shape.iter().product::<usize>() {
                            return Err(fail(
                                "invalid_input",
                                format!(
                                    "the output `{name}` of shape {shape:?} starts from {} values",
                                    data.len()
                                ),
                                false,
                            ));
                        }
                        outputs.push((values.len(), name.clone(), shape.clone()));
                        values.push(Ok(rt.tensor(&data, shape).map_err(user_error)?));
                    }
                    UserArg::Scalar { name, value, dtype } => {
                        let s = raw_scalar(value, dtype.as_deref().unwrap_or("float32"))
                            .map_err(|e| fail("invalid_input", format!("params.{name}: {e}"), false))?;
                        values.push(Err(s));
                    }
                }
            }
            let launch: Vec<kiln::Arg<'_>> = values
                .iter()
                .map(|v| match v {
                    Ok(t) => kiln::Arg::Tensor(t),
                    Err(s) => kiln::Arg::Scalar(*s),
                })
                .collect();
            let t3 = |d: [u32; 3]| (d[0], d[1], d[2]);
            k.launch(t3(grid), t3(block), shared_mem, &launch)
                .map_err(user_error)?;
            let mut outs = Vec::with_capacity(outputs.len());
            for (i, out, shape) in outputs {
                let Some(Ok(t)) = values.get(i) else {
                    return Err(fail(
                        "internal",
                        format!("the output `{out}` was not allocated"),
                        false,
                    ));
                };
                let v = t.to_vec::<f32>().map_err(user_error)?;
                let a = OwnedArray {
                    dtype: ScalarType::F32,
                    shape,
                    bytes: v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
                };
                outs.push((out, a));
            }
            Ok(result(opts, job, &name, rt, outs))
        }
    }
}

/// The job's result: each output inline or as an NPY blob.
fn result(
    opts: &ExecOptions,
    job: &str,
    kernel: &str,
    rt: &Runtime,
    outs: Vec<(String, OwnedArray)>,
) -> WorkOutcome {
    let mut map = Map::new();
    let mut blobs = Vec::new();
    for (name, a) in outs {
        let n: usize = a.shape.iter().product();
        if n <= opts.inline_max_elements {
            map.insert(
                name,
                json!({ "dtype": a.dtype.name(), "shape": a.shape, "data": values(&a) }),
            );
            continue;
        }
        match write_blob(opts, job, &a) {
            Ok(b) => {
                map.insert(
                    name,
                    json!({ "dtype": a.dtype.name(), "shape": a.shape, "blob": b.id, "sha256": b.sha256, "bytes": b.size }),
                );
                blobs.push(b);
            }
            Err(e) => {
                for b in &blobs {
                    let _ = std::fs::remove_file(&b.path);
                }
                return fail("result_write_failed", e, true);
            }
        }
    }
    WorkOutcome::Ok {
        result: json!({ "kernel": kernel, "device": rt.device_name(), "outputs": map }),
        blobs,
    }
}

/// The elements as JSON (NaN and infinities, which JSON lacks, become `null`: fetch a blob
/// for them).
fn values(a: &OwnedArray) -> Vec<Value> {
    let size = a.dtype.size();
    a.bytes
        .chunks_exact(size)
        .map(|b| {
            // a complex element as [real, imaginary]
            match a.dtype {
                ScalarType::C64 => {
                    let part = |c: &[u8]| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                    return json!([part(&b[..4]), part(&b[4..])]);
                }
                ScalarType::C128 => {
                    let part = |c: &[u8]| {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(c);
                        f64::from_ne_bytes(w)
                    };
                    return json!([part(&b[..8]), part(&b[8..])]);
                }
                _ => {}
            }
            let mut w = [0u8; 8];
            w[..size].copy_from_slice(b);
            match a.dtype {
                ScalarType::Bool => json!(b[0] != 0),
                ScalarType::I8 => json!(b[0] as i8),
                ScalarType::U8 => json!(b[0]),
                ScalarType::I16 => json!(i16::from_ne_bytes([w[0], w[1]])),
                ScalarType::U16 => json!(u16::from_ne_bytes([w[0], w[1]])),
                ScalarType::F16 => {
                    json!(kiln::core::backend::f16::from_bits(u16::from_ne_bytes([w[0], w[1]])).to_f32())
                }
                ScalarType::I32 => json!(i32::from_ne_bytes([w[0], w[1], w[2], w[3]])),
                ScalarType::U32 => json!(u32::from_ne_bytes([w[0], w[1], w[2], w[3]])),
                ScalarType::F32 => json!(f32::from_ne_bytes([w[0], w[1], w[2], w[3]])),
                ScalarType::I64 => json!(i64::from_ne_bytes(w)),
                ScalarType::U64 => json!(u64::from_ne_bytes(w)),
                ScalarType::F64 => json!(f64::from_ne_bytes(w)),
                ScalarType::C64 | ScalarType::C128 => Value::Null,
            }
        })
        .collect()
}

/// NPY's descriptor of a dtype (little-endian: the only hosts kiln builds for).
fn descr(t: ScalarType) -> &'static str {
    match t {
        ScalarType::Bool => "|b1",
        ScalarType::I8 => "|i1",
        ScalarType::I16 => "<i2",
        ScalarType::I32 => "<i4",
        ScalarType::I64 => "<i8",
        ScalarType::U8 => "|u1",
        ScalarType::U16 => "<u2",
        ScalarType::U32 => "<u4",
        ScalarType::U64 => "<u8",
        ScalarType::F16 => "<f2",
        ScalarType::F32 => "<f4",
        ScalarType::F64 => "<f8",
        ScalarType::C64 => "<c8",
        ScalarType::C128 => "<c16",
    }
}

/// An NPY v1.0 file of `a` (C order, its own dtype): the header padded with spaces to a
/// multiple of 64 bytes and ending in a newline, then the elements.
pub(crate) fn npy_bytes(a: &OwnedArray) -> Vec<u8> {
    const {
        assert!(
            cfg!(target_endian = "little"),
            "NPY results assume a little-endian host"
        )
    };
    let dims = match a.shape.as_slice() {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {dims}}}",
        descr(a.dtype)
    );
    let len = (10 + dict.len() + 1).next_multiple_of(64);
    let mut out = Vec::with_capacity(len + a.bytes.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&((len - 10) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(len - 1, b' ');
    out.push(b'\n');
    out.extend_from_slice(&a.bytes);
    out
}

/// `a` as a result blob of `job` (written beside, then renamed into place; private mode).
pub(crate) fn write_blob(opts: &ExecOptions, job: &str, a: &OwnedArray) -> Result<BlobRecord, String> {
    let id = crate::ids::new_id("b");
    let path = opts.blob_dir.join(format!("{id}.npy"));
    let part = opts.blob_dir.join(format!("{id}.npy.part"));
    let bytes = npy_bytes(a);
    let write = || -> Result<(), String> {
        std::fs::write(&part, &bytes).map_err(|e| e.to_string())?;
        crate::private::tighten(&part, crate::private::FILE_MODE)?;
        std::fs::rename(&part, &path).map_err(|e| e.to_string())
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&part);
        return Err(format!("{}: {e}", path.display()));
    }
    Ok(BlobRecord {
        id,
        path,
        size: bytes.len() as u64,
        sha256: hex::encode(Sha256::digest(&bytes)),
        format: "npy".into(),
        principal: String::new(),
        job_id: Some(job.to_string()),
        created_ms: now_ms(),
    })
}
