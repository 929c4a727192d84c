//! The worker process (`kiln worker`, started by the supervisor): one runtime on one device,
//! batches in over stdin, results out over stdout (see [`crate::protocol`]). A sticky CUDA
//! error ends the process after its batch is answered: the context is poisoned and only a
//! new process recovers.
//!
//! A multi-device worker ([`run_pool`], `kiln worker --devices SET`, from `workers.groups`)
//! runs the same loop over a [`Pool`] of devices (see [`crate::exec`]).

use crate::exec::{not_run, run_batch, run_batch_pool, ExecOptions, Pool};
use crate::protocol::{read_frame, write_frame, FromWorker, JobResult, ToWorker, WorkItem};
use kiln::{Config, DeviceRequest, Runtime};

/// Exit codes of a worker.
pub mod exit {
    /// Told to stop, or the supervisor went away.
    pub const OK: i32 = 0;
    /// The protocol broke.
    pub const PROTOCOL: i32 = 1;
    /// The runtime could not be created.
    pub const NO_RUNTIME: i32 = 3;
    /// A sticky CUDA error poisoned the context.
    pub const STICKY: i32 = 8;
}

/// Run the worker loop on stdin/stdout until told to stop; returns the exit code.
/// `protections` says which of crate::sandbox's protections are active (sent in the ready
/// message).
pub fn run(device: DeviceRequest, cfg: &Config, opts: &ExecOptions, protections: &str) -> i32 {
    let rt = match Runtime::new(device, cfg) {
        Ok(rt) => rt,
        Err(e) => {
            let mut out = std::io::stdout().lock();
            let _ = write_frame(
                &mut out,
                &FromWorker::Fatal {
                    message: e.to_string(),
                },
            );
            return exit::NO_RUNTIME;
        }
    };
    let backend = match rt.kind() {
        kiln::BackendKind::Cpu => "cpu",
        kiln::BackendKind::Cuda => "cuda",
    };
    let ready = FromWorker::Ready {
        device: rt.device_name(),
        backend: backend.into(),
        protections: protections.into(),
    };
    serve(ready, |jobs| run_batch(&rt, opts, jobs))
}

/// [`run`] for a worker owning several devices: `set` (`kiln price --devices` syntax)
/// opened as one [`Pool`].
pub fn run_pool(set: &kiln::executor::DeviceSet, cfg: &Config, opts: &ExecOptions, protections: &str) -> i32 {
    let pool = match Pool::open(set, cfg) {
        Ok(p) => p,
        Err(e) => {
            let mut out = std::io::stdout().lock();
            let _ = write_frame(
                &mut out,
                &FromWorker::Fatal {
                    message: format!("devices {set}: {e}"),
                },
            );
            return exit::NO_RUNTIME;
        }
    };
    let ready = FromWorker::Ready {
        device: pool.label().to_string(),
        backend: if pool.has_gpu() { "cuda" } else { "cpu" }.into(),
        protections: protections.into(),
    };
    serve(ready, |jobs| run_batch_pool(&pool, opts, jobs))
}

/// Runs `jobs` one at a time (a group claimed without batching: nothing merged), as one
/// batch answers: once a job poisons the CUDA context the rest are not run (retried on the
/// next worker).
fn run_each(
    jobs: &[WorkItem],
    run_jobs: &impl Fn(&[WorkItem]) -> (Vec<JobResult>, bool),
) -> (Vec<JobResult>, bool) {
    let mut out = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        let (results, poisoned) = run_jobs(std::slice::from_ref(job));
        out.extend(results);
        if poisoned {
            out.extend(jobs[i + 1..].iter().map(not_run));
            return (out, true);
        }
    }
    (out, false)
}

/// Says `ready`, then answers frames until told to stop; `run_jobs` runs a batch.
fn serve(ready: FromWorker, run_jobs: impl Fn(&[WorkItem]) -> (Vec<JobResult>, bool)) -> i32 {
    let mut input = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    if write_frame(&mut out, &ready).is_err() {
        return exit::PROTOCOL;
    }
    loop {
        let msg: Option<ToWorker> = match read_frame(&mut input) {
            Ok(m) => m,
            Err(e) => {
                tracing::error!("worker: bad frame from the supervisor: {e}");
                return exit::PROTOCOL;
            }
        };
        let reply = match msg {
            None | Some(ToWorker::Shutdown) => return exit::OK,
            Some(ToWorker::Ping { seq }) => FromWorker::Pong { seq },
            Some(ToWorker::Run { batch, jobs, merge }) => {
                let (results, poisoned) = if merge {
                    run_jobs(&jobs)
                } else {
                    run_each(&jobs, &run_jobs)
                };
                let done = FromWorker::Done { batch, results };
                if write_frame(&mut out, &done).is_err() {
                    return exit::PROTOCOL;
                }
                if poisoned {
                    tracing::error!("worker: the CUDA context is poisoned; exiting for a fresh one");
                    return exit::STICKY;
                }
                continue;
            }
        };
        if write_frame(&mut out, &reply).is_err() {
            return exit::PROTOCOL;
        }
    }
}
