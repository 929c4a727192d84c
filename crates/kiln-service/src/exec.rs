//! Running tasks on a worker's runtime, through the facade only.
//!
//! A batch's jobs share a batch key. Pricing jobs of one key are merged into one facade
//! call (`Runtime::price_batch`: one device launch for all their options) and the results
//! split back; job `j` of the batch uses Monte Carlo streams from its offset in the merged
//! portfolio, reported as `stream_offset` in its result. Other kinds run one by one.
//!
//! A multi-device worker (`workers.groups`) runs the same batches through a [`Pool`] (kiln's
//! executor over its devices, [`run_batch_pool`]): the merged option book and element-wise
//! maps are split across the devices (chunks of rows or elements, calibrated shares, work
//! stealing; the bits of one device: a price is bit-identical for any device set, a map is
//! the same per kind of device); a filter or GEMM job is one image, volume or product, with
//! nothing to split, and runs on the pool's first device, as does a mixed book
//! ([`Task::PriceBook`]: a solo job, `Runtime::price_book` on one runtime; crate::pricing).
//! A user kernel ([`Task::UserKernel`], crate::user_kernel), a book of implied
//! volatilities ([`Task::ImpliedVol`], crate::implied) and a risk job ([`Task::Risk`],
//! crate::risk) run on the pool's first GPU; a calibration ([`Task::Calibrate`],
//! crate::calibrate) runs on the first device's runtime and fits on its CPU cores.

use crate::protocol::{JobResult, WorkItem, WorkOutcome};
use crate::store::{now_ms, BlobRecord};
use crate::task::{self, ArrayInput, Task};
use kiln::executor::{Calibrations, DeviceSet, Executor, MapArray, OptionBook, Worker};
use kiln::finance::Method;
use kiln::{Error, Runtime};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// Where and how a worker writes results.
#[derive(Clone, Debug)]
pub struct ExecOptions {
    /// The blob directory (results larger than `inline_max_elements` go there as NPY).
    pub blob_dir: PathBuf,
    /// Arrays with more elements are written as blobs.
    pub inline_max_elements: usize,
    /// Elements one input may decode to (`limits.max_elements`): a blob's header is read
    /// and checked before it is decoded, and the decoders are capped at that size, whatever
    /// let the job in.
    pub max_elements: u64,
}

pub(crate) fn fail(code: &str, message: impl Into<String>, retry: bool) -> WorkOutcome {
    WorkOutcome::Err {
        code: code.into(),
        message: message.into(),
        retry,
        sticky: false,
    }
}

/// A kiln error as a job outcome: sticky errors are retried on a fresh worker, invalid
/// inputs are not retried.
pub fn kiln_error(e: &Error) -> WorkOutcome {
    let message = e.to_string();
    let (code, retry) = match e {
        Error::Cuda { .. } if e.is_sticky() => {
            return WorkOutcome::Err {
                code: "cuda_sticky".into(),
                message,
                retry: true,
                sticky: true,
            }
        }
        Error::InvalidArgument { .. }
        | Error::ShapeMismatch { .. }
        | Error::Unsupported { .. }
        | Error::Config { .. }
        | Error::Io { .. }
        | Error::Capture { .. } => ("invalid_input", false),
        Error::OutOfMemory { .. } => ("out_of_memory", true),
        Error::NoDevice(_) | Error::LibraryNotFound { .. } => ("no_device", true),
        Error::Verification { .. } => ("verification_failed", false),
        Error::Cuda { .. } | Error::Compile { .. } | Error::Cache { .. } | Error::Collective { .. } => {
            ("device_error", true)
        }
    };
    fail(code, message, retry)
}

/// An array input's values and shape: inline, or decoded from its blob (an image as 2-D
/// or 3-D, anything else as NPY or a volume), the element limit checked from the header.
pub(crate) fn load(
    x: &ArrayInput,
    image: bool,
    max_elements: u64,
) -> Result<(Vec<f32>, Vec<usize>), WorkOutcome> {
    if let Some(d) = &x.data {
        return Ok((d.clone(), x.shape.clone()));
    }
    let Some(path) = &x.blob else {
        return Err(fail(
            "invalid_input",
            "the array has neither data nor blob",
            false,
        ));
    };
    let bad = |e: kiln_io::IoError| match e {
        kiln_io::IoError::TooManyElements { .. } => fail(
            "invalid_input",
            format!("{} (limits.max_elements)", task::io_reason(&e)),
            false,
        ),
        e => fail("invalid_input", task::io_reason(&e), false),
    };
    let arr = if image {
        let img = kiln_io::read_image_limited(path, max_elements).map_err(bad)?;
        let a = img.data;
        if a.shape()[2] == 1 {
            let (h, w) = (a.shape()[0], a.shape()[1]);
            return Ok((a.iter().copied().collect(), vec![h, w]));
        }
        a.into_dyn()
    } else if path.extension().is_some_and(|e| e == "npy") {
        kiln_io::check_elements(path, max_elements).map_err(bad)?;
        kiln_io::read_npy(path).map_err(bad)?.data
    } else {
        kiln_io::read_volume_limited(path, max_elements)
            .map_err(bad)?
            .data
    };
    let shape = arr.shape().to_vec();
    Ok((arr.iter().copied().collect(), shape))
}

/// The result of an array: inline, or an NPY blob when large.
fn array_result(opts: &ExecOptions, job: &str, data: Vec<f32>, shape: Vec<usize>) -> WorkOutcome {
    if data.len() <= opts.inline_max_elements {
        return WorkOutcome::Ok {
            result: json!({ "shape": shape, "data": data }),
            blobs: Vec::new(),
        };
    }
    let id = crate::ids::new_id("b");
    let path = opts.blob_dir.join(format!("{id}.npy"));
    let write = || -> Result<BlobRecord, String> {
        let arr = ndarray::ArrayD::from_shape_vec(shape.clone(), data).map_err(|e| e.to_string())?;
        kiln_io::write_npy(&path, &arr).map_err(|e| e.to_string())?;
        crate::private::tighten(&path, crate::private::FILE_MODE)?;
        let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
        Ok(BlobRecord {
            id: id.clone(),
            path: path.clone(),
            size: bytes.len() as u64,
            sha256: hex::encode(Sha256::digest(&bytes)),
            format: "npy".into(),
            principal: String::new(),
            job_id: Some(job.to_string()),
            created_ms: now_ms(),
        })
    };
    match write() {
        Ok(b) => WorkOutcome::Ok {
            result: json!({ "shape": shape, "blob": b.id, "sha256": b.sha256, "bytes": b.size }),
            blobs: vec![b],
        },
        Err(e) => fail("result_write_failed", format!("{}: {e}", path.display()), true),
    }
}

fn run_one(rt: &Runtime, opts: &ExecOptions, item: &WorkItem, task: Task) -> WorkOutcome {
    let wrap = |r: kiln::Result<WorkOutcome>| r.unwrap_or_else(|e| kiln_error(&e));
    match task {
        Task::Price { .. } => price(Engine::One(rt), &[(item, task)])
            .pop()
            .map_or_else(|| fail("internal", "no result", false), |r| r.outcome),
        Task::PriceBook {
            method,
            mc,
            options,
            target_se,
            max_paths,
            first_option,
        } => crate::pricing::run_book(rt, &method, &mc, &options, target_se, max_paths, first_option),
        Task::ImpliedVol { quotes } => crate::implied::run(rt, &quotes),
        Task::Risk(job) => crate::risk::run(rt, opts, &item.id, &job),
        Task::Calibrate {
            quotes,
            quoted,
            target,
            start,
            max_iterations,
        } => crate::calibrate::run(rt, &quotes, quoted, target, &start, max_iterations),
        Task::Filter2d {
            kernel,
            mode,
            path,
            input,
        } => {
            let (k, m, p) = match (
                task::kernel2d(&kernel),
                task::boundary_mode(&mode),
                task::filter_path(&path),
            ) {
                (Ok(k), Ok(m), Ok(p)) => (k, m, p),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return fail("invalid_input", e, false),
            };
            let (data, shape) = match load(&input, true, opts.max_elements) {
                Ok(v) => v,
                Err(o) => return o,
            };
            wrap(
                match shape.as_slice() {
                    [h, w] => rt.filter2d(&data, [*h, *w], &k, m, p),
                    [h, w, c] => rt.filter2d_channels(&data, [*h, *w, *c], &k, m, p),
                    _ => {
                        return fail(
                            "invalid_input",
                            format!("an image is (h, w) or (h, w, c), not {shape:?}"),
                            false,
                        )
                    }
                }
                .map(|out| array_result(opts, &item.id, out, shape)),
            )
        }
        Task::Filter3d {
            kernel,
            mode,
            path,
            input,
        } => {
            let (k, m, p) = match (
                task::kernel3d(&kernel),
                task::boundary_mode(&mode),
                task::filter_path(&path),
            ) {
                (Ok(k), Ok(m), Ok(p)) => (k, m, p),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return fail("invalid_input", e, false),
            };
            let (data, shape) = match load(&input, false, opts.max_elements) {
                Ok(v) => v,
                Err(o) => return o,
            };
            let [d, h, w] = shape.as_slice() else {
                return fail(
                    "invalid_input",
                    format!("a volume is (d, h, w), not {shape:?}"),
                    false,
                );
            };
            let dims = [*d, *h, *w];
            wrap(
                rt.filter3d(&data, dims, &k, m, p)
                    .map(|out| array_result(opts, &item.id, out, shape)),
            )
        }
        Task::Gemm {
            m,
            n,
            k,
            trans_a,
            trans_b,
            a,
            b,
        } => {
            let (da, db) = match (
                load(&a, false, opts.max_elements),
                load(&b, false, opts.max_elements),
            ) {
                (Ok(x), Ok(y)) => (x.0, y.0),
                (Err(o), _) | (_, Err(o)) => return o,
            };
            let g = kiln::linalg::Gemm::new(m, n, k).transposed(trans_a, trans_b);
            wrap(
                rt.matmul(&da, &db, &g, kiln::linalg::GemmPrecision::F32)
                    .map(|c| array_result(opts, &item.id, c, vec![m, n])),
            )
        }
        Task::Elementwise { op, a, b, x } => {
            let op = match task::map_op(&op, a, b) {
                Ok(o) => o,
                Err(e) => return fail("invalid_input", e, false),
            };
            let (data, shape) = match load(&x, false, opts.max_elements) {
                Ok(v) => v,
                Err(o) => return o,
            };
            wrap(rt.map(op, &data).map(|y| array_result(opts, &item.id, y, shape)))
        }
        Task::UserKernel { kernel, args } => crate::user_kernel::run(rt, opts, &item.id, kernel, args),
        Task::Fault {
            mode,
            on_attempts,
            sleep_ms,
            bytes,
        } => {
            let active = on_attempts.is_none_or(|n| item.attempt <= n);
            if active {
                match mode.as_str() {
                    "abort" => {
                        tracing::warn!("fault injection: aborting the worker (job {})", item.id);
                        std::process::abort();
                    }
                    "illegal_address" => {
                        let r = rt.inject_illegal_address().and_then(|t| t.to_vec::<f32>());
                        return match r {
                            Err(e) => kiln_error(&e),
                            Ok(_) => fail(
                                "fault_not_triggered",
                                "the illegal-address kernel did not fail",
                                false,
                            ),
                        };
                    }
                    "sticky" => {
                        // the outcome a poisoned context gives (the illegal_address mode's,
                        // through the same mapping), on any device: the worker answers its
                        // batch and exits with the sticky code, as after a real fault
                        tracing::warn!("fault injection: a sticky CUDA error (job {})", item.id);
                        return kiln_error(&Error::Cuda {
                            op: "fault injection (sticky)".into(),
                            device: rt.device_name(),
                            code: 700,
                            name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
                        });
                    }
                    "probe" => {
                        // what the sandbox lets a job do: run a program, start a thread
                        let exec = std::process::Command::new("/bin/sh")
                            .args(["-c", "exit 0"])
                            .stdin(std::process::Stdio::null())
                            .stdout(std::process::Stdio::null())
                            .stderr(std::process::Stdio::null())
                            .status();
                        let exec = match exec {
                            Ok(s) => format!("ran ({s})"),
                            Err(e) => format!("refused: {e}"),
                        };
                        let thread = std::thread::spawn(|| 1).join().is_ok();
                        return WorkOutcome::Ok {
                            result: json!({ "mode": mode, "exec": exec, "thread": thread }),
                            blobs: Vec::new(),
                        };
                    }
                    "alloc" => {
                        // reserved, not touched: past RLIMIT_AS the reservation itself fails
                        // (Rust reports the failed allocation and aborts)
                        let v: Vec<u8> = Vec::with_capacity(usize::try_from(bytes).unwrap_or(usize::MAX));
                        std::hint::black_box(&v);
                    }
                    _ => std::thread::sleep(std::time::Duration::from_millis(sleep_ms)),
                }
            }
            WorkOutcome::Ok {
                result: json!({ "mode": mode, "attempt": item.attempt, "faulted": active && mode == "sleep" }),
                blobs: Vec::new(),
            }
        }
    }
}

/// Price a batch of pricing jobs (one key) in one facade call (or one executor run).
fn price(eng: Engine<'_>, jobs: &[(&WorkItem, Task)]) -> Vec<JobResult> {
    let mut all = Vec::new();
    let mut spans = Vec::new();
    let mut head = None;
    for (item, t) in jobs {
        if let Task::Price { method, mc, options } = t {
            spans.push((item.id.clone(), all.len(), options.len()));
            all.extend_from_slice(options);
            head.get_or_insert((method.clone(), *mc));
        }
    }
    let Some((method, mc)) = head else {
        return Vec::new();
    };
    let m = if method == "mc" {
        Method::MonteCarlo
    } else {
        Method::Analytic
    };
    let (prices, device, split) = match eng {
        Engine::One(rt) => (rt.price_batch(&all, m, &mc, 0), rt.device_name(), Value::Null),
        Engine::Pool(p) => {
            let per = (all.len() / (CHUNKS_PER_WORKER * p.ex.workers().len())).max(1);
            let run = OptionBook::new(&all, m, mc, 0, per).and_then(|b| p.ex.run(&b));
            match run {
                Ok((prices, rep)) => (prices, p.label.clone(), split_json(&rep)),
                // the whole run failed (a device error): every job of the batch carries it
                Err(e) => {
                    let outcome = kiln_error(&e);
                    return spans
                        .into_iter()
                        .map(|(id, _, _)| JobResult {
                            id,
                            outcome: outcome.clone(),
                        })
                        .collect();
                }
            }
        }
    };
    let sticky = prices
        .iter()
        .find_map(|r| r.as_ref().err().filter(|e| e.is_sticky()).map(kiln_error));
    spans
        .into_iter()
        .map(|(id, start, len)| {
            let outcome = match &sticky {
                Some(o) => o.clone(),
                None => {
                    let rows: Vec<Value> = prices[start..start + len]
                        .iter()
                        .map(|r| match r {
                            Ok(p) => serde_json::to_value(p).unwrap_or(Value::Null),
                            Err(e) => json!({ "error": e.to_string() }),
                        })
                        .collect();
                    WorkOutcome::Ok {
                        result: json!({
                            "method": method,
                            "prices": rows,
                            "stream_offset": start,
                            "batch_options": all.len(),
                            "device": device,
                            "workers": split,
                        }),
                        blobs: Vec::new(),
                    }
                }
            };
            JobResult { id, outcome }
        })
        .collect()
}

/// Run one batch; returns the results (in order) and whether the runtime is poisoned.
pub fn run_batch(rt: &Runtime, opts: &ExecOptions, jobs: &[WorkItem]) -> (Vec<JobResult>, bool) {
    run_batch_on(Engine::One(rt), opts, jobs)
}

/// [`run_batch`] on a multi-device worker's [`Pool`] (see the module docs); the results are
/// those of one device, with the pool's label as `device` (and, for prices, the per-worker
/// split as `workers`).
pub fn run_batch_pool(pool: &Pool, opts: &ExecOptions, jobs: &[WorkItem]) -> (Vec<JobResult>, bool) {
    run_batch_on(Engine::Pool(pool), opts, jobs)
}

/// What runs a batch: one runtime, or a pool of devices.
#[derive(Clone, Copy)]
enum Engine<'a> {
    One(&'a Runtime),
    Pool(&'a Pool),
}

/// Chunks per device a batch is cut into (so a fast device can take more; as `kiln price`).
const CHUNKS_PER_WORKER: usize = 8;

/// A multi-device worker's devices: kiln's executor over them, calibrations on disk.
#[derive(Debug)]
pub struct Pool {
    ex: Executor,
    label: String,
}

impl Pool {
    /// The pool over `workers` (at least one), with an in-memory calibration store (tests
    /// stand CPU workers, `Worker::cpu_labelled`, in for GPUs).
    pub fn new(workers: Vec<Worker>) -> kiln::Result<Pool> {
        let label = workers
            .iter()
            .map(|w| w.label().to_string())
            .collect::<Vec<_>>()
            .join("+");
        Ok(Pool {
            ex: Executor::new(workers)?,
            label,
        })
    }

    /// Opens the devices of `set` (`kiln price --devices` syntax), calibrations stored next
    /// to the kernel cache.
    pub fn open(set: &DeviceSet, cfg: &kiln::Config) -> kiln::Result<Pool> {
        let mut p = Pool::new(set.open(cfg)?)?;
        p.ex = p.ex.with_calibrations(Calibrations::for_config(cfg));
        Ok(p)
    }

    /// The devices, e.g. `cuda:0+cuda:1`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Whether any device is a GPU (`cuda` backend in the ready message).
    pub fn has_gpu(&self) -> bool {
        self.ex.workers().iter().any(|w| w.is_gpu())
    }

    fn first(&self) -> &Worker {
        // Executor::new refuses an empty list
        &self.ex.workers()[0]
    }
}

/// The per-worker split of a run, for a result.
fn split_json(rep: &kiln::executor::RunReport) -> Value {
    let w: Vec<Value> = rep
        .workers
        .iter()
        .map(|w| json!({ "label": w.label, "share": w.share, "chunks": w.chunks, "stolen": w.stolen }))
        .collect();
    Value::Array(w)
}

/// A job of `eng`: the pool's element-wise maps are split, everything else runs on one
/// device (the pool's first).
fn run_job(eng: Engine<'_>, opts: &ExecOptions, item: &WorkItem, task: Task) -> WorkOutcome {
    match eng {
        Engine::One(rt) => run_one(rt, opts, item, task),
        Engine::Pool(p) => {
            if let Task::Elementwise { op, a, b, x } = &task {
                let op = match task::map_op(op, *a, *b) {
                    Ok(o) => o,
                    Err(e) => return fail("invalid_input", e, false),
                };
                let (data, shape) = match load(x, false, opts.max_elements) {
                    Ok(v) => v,
                    Err(o) => return o,
                };
                let per = (data.len() / (CHUNKS_PER_WORKER * p.ex.workers().len())).max(1);
                return match MapArray::new(op, &data, per).and_then(|m| p.ex.run(&m)) {
                    Ok((y, _)) => array_result(opts, &item.id, y, shape),
                    Err(e) => kiln_error(&e),
                };
            }
            // a user kernel, a book of implied volatilities or a risk job on the group's
            // first GPU (a raw kernel needs it; the others are faster there), anything else
            // on its first device
            let w = match &task {
                Task::UserKernel { .. } | Task::ImpliedVol { .. } | Task::Risk(_) => {
                    p.ex.workers().iter().find(|w| w.is_gpu()).unwrap_or(p.first())
                }
                _ => p.first(),
            };
            w.run(|rt| Ok(run_one(rt, opts, item, task)))
                .unwrap_or_else(|e| kiln_error(&e))
        }
    }
}

/// [`run_batch`] on either engine.
fn run_batch_on(eng: Engine<'_>, opts: &ExecOptions, jobs: &[WorkItem]) -> (Vec<JobResult>, bool) {
    let mut parsed = Vec::with_capacity(jobs.len());
    let mut results: Vec<Option<JobResult>> = vec![None; jobs.len()];
    for (i, item) in jobs.iter().enumerate() {
        match serde_json::from_str::<Task>(&item.task) {
            Ok(t) => parsed.push((i, item, t)),
            Err(e) => {
                results[i] = Some(JobResult {
                    id: item.id.clone(),
                    outcome: fail("invalid_input", format!("task: {e}"), false),
                })
            }
        }
    }
    let (prices, others): (Vec<_>, Vec<_>) = parsed
        .into_iter()
        .partition(|(_, _, t)| matches!(t, Task::Price { .. }));
    if !prices.is_empty() {
        let idx: Vec<usize> = prices.iter().map(|(i, _, _)| *i).collect();
        let batch: Vec<(&WorkItem, Task)> = prices.into_iter().map(|(_, item, t)| (item, t)).collect();
        for (i, r) in idx.into_iter().zip(price(eng, &batch)) {
            results[i] = Some(r);
        }
    }
    for (i, item, t) in others {
        let outcome = run_job(eng, opts, item, t);
        let stop = matches!(outcome, WorkOutcome::Err { sticky: true, .. });
        results[i] = Some(JobResult {
            id: item.id.clone(),
            outcome,
        });
        if stop {
            break;
        }
    }
    let poisoned = results
        .iter()
        .flatten()
        .any(|r| matches!(r.outcome, WorkOutcome::Err { sticky: true, .. }));
    let out = jobs
        .iter()
        .zip(results)
        .map(|(item, r)| r.unwrap_or_else(|| not_run(item)))
        .collect();
    (out, poisoned)
}

/// The answer for a job of a batch left unrun because an earlier job poisoned the worker's
/// CUDA context: retried on the next worker.
pub fn not_run(item: &WorkItem) -> JobResult {
    JobResult {
        id: item.id.clone(),
        outcome: WorkOutcome::Err {
            code: "cuda_sticky".into(),
            message: "not run: the worker's CUDA context was poisoned by an earlier job of its batch".into(),
            retry: true,
            sticky: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::KernelSpec;

    /// A bomb that reached a worker without the API's check (a row stored before it, a node
    /// with a larger limit) is refused from its header with the limit named, not decoded.
    #[test]
    fn a_worker_refuses_a_blob_past_the_element_limit() {
        let t = tempfile::tempdir().unwrap();
        let png = t.path().join("b_1.png");
        let zeros = vec![0u8; 2048 * 2048];
        kiln_io::write_image_samples(&png, 2048, 2048, 1, kiln_io::SamplesRef::U8(&zeros)).unwrap();
        let task = Task::Filter2d {
            kernel: KernelSpec::Preset("box:3".into()),
            mode: "reflect".into(),
            path: "auto".into(),
            input: ArrayInput {
                shape: Vec::new(),
                data: None,
                blob: Some(png),
            },
        };
        let item = WorkItem {
            id: "j_1".into(),
            attempt: 1,
            task: serde_json::to_string(&task).unwrap(),
        };
        let rt = Runtime::new(kiln::DeviceRequest::Cpu, &kiln::Config::default()).unwrap();
        let opts = ExecOptions {
            blob_dir: t.path().to_path_buf(),
            inline_max_elements: 16,
            max_elements: 1_000_000,
        };
        let (results, poisoned) = run_batch(&rt, &opts, &[item]);
        assert!(!poisoned);
        let WorkOutcome::Err {
            code, message, retry, ..
        } = &results[0].outcome
        else {
            panic!("{:?}", results[0].outcome)
        };
        assert_eq!((code.as_str(), *retry), ("invalid_input", false));
        for needle in ["4194304", "1000000", "limits.max_elements"] {
            assert!(message.contains(needle), "`{needle}` not in: {message}");
        }
        assert!(!message.contains(&*t.path().to_string_lossy()), "{message}");
    }
}
