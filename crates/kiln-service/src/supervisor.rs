//! The supervisor: one task per worker slot (one per allowed GPU, plus CPU workers), each
//! owning a worker process (`kiln worker`, stdin/stdout frames) that it starts, feeds and
//! replaces.
//!
//! A slot claims work from the store (dynamic batching: the oldest queued job's batch key,
//! up to `max_batch` jobs, waiting at most `max_queue_delay_ms` for a batch to fill; without
//! it, the fair head and up to `claim_batch` more jobs of its batch key, run one by one),
//! sends it, and stores each outcome once, a batch's outcomes in one transaction
//! ([`JobStore::finish_many`]) before any waiting client is told. A worker that dies
//! mid-batch (abort, sticky CUDA error, killed) has its jobs retried up to `max_attempts`;
//! a batch past its deadline gets its worker killed and its jobs failed; an idle worker
//! that misses a heartbeat is killed. The slot then starts a fresh process. Shutdown stops
//! claiming, lets batches finish until the drain timeout, then kills workers and re-queues
//! what was still running.
//!
//! A worker that ends because of a device fault (a sticky CUDA error, exit code 8) marks
//! its slot faulted until the replacement reports ready ([`fault`]); `/readyz` answers 503
//! meanwhile.

mod claim;
pub mod fault;
mod outcome;
mod process;

use crate::config::ServiceConfig;
use crate::hub::Hub;
use crate::metrics::ServiceMetrics;
use crate::protocol::{read_frame_async, write_frame_async, FromWorker, ToWorker, WorkItem, WorkOutcome};
use crate::store::{now_ms, ClaimedJob, JobStore, Outcome};
pub use fault::DeviceFault;
#[cfg(test)]
use process::is_alloc_failure;
use process::{forward_stderr, Proc};
use serde::Serialize;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::process::Command;
use tokio::sync::mpsc;

/// One worker slot as `/v1/workers` shows it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct WorkerStatus {
    /// The slot's name (`cpu-0`, `cuda0-1`, `group0,1-0`).
    pub name: String,
    /// The device it asks for (`cpu`, `cuda:0`), or `group:SET` for a worker owning the
    /// devices of `SET` (`workers.groups`, e.g. `group:0,1`).
    pub device: String,
    /// `starting`, `idle`, `busy`, `down`.
    pub state: String,
    /// The process id, when running.
    pub pid: Option<u32>,
    /// Processes replaced so far.
    pub restarts: u64,
    /// Why the last process ended.
    pub last_exit: Option<String>,
    /// When the current process became ready (ms since the epoch).
    pub ready_ms: Option<i64>,
    /// When the last process ended.
    pub exited_ms: Option<i64>,
    /// Batches run by this slot.
    pub batches: u64,
    /// The device fault the slot has not recovered from: set when its worker ended because
    /// of one, cleared when the replacement reports ready. While set, `/readyz` is 503.
    pub fault: Option<DeviceFault>,
    /// The slot's most recent device fault, current or cleared.
    pub last_fault: Option<DeviceFault>,
    /// Device faults so far.
    pub faults: u64,
}

/// What the supervisor needs.
pub struct Shared {
    /// The store.
    pub store: Arc<dyn JobStore>,
    /// The configuration.
    pub cfg: ServiceConfig,
    /// Admission and wake-ups.
    pub hub: Arc<Hub>,
    /// Metrics.
    pub metrics: Arc<ServiceMetrics>,
    /// This process's lease-owner prefix.
    pub node: String,
    /// kiln's core config file, passed to workers (`--config`).
    pub core_config: Option<PathBuf>,
    /// Set when shutting down: no more claims.
    pub stopping: AtomicBool,
    /// Slot states.
    pub workers: Mutex<Vec<WorkerStatus>>,
    batches: AtomicU64,
}

/// Whether a slot's worker claims GPU work: `cuda:N`, or a group naming GPUs.
fn slot_is_gpu(device: &str) -> bool {
    match device.strip_prefix(crate::server::GROUP_PREFIX) {
        Some(set) => set
            .parse::<kiln::executor::DeviceSet>()
            .is_ok_and(|s| s.gpus != kiln::executor::GpuSelection::None),
        None => device.starts_with("cuda"),
    }
}

/// The arguments up to `worker`'s own: `--device D worker`, or for a group
/// (`group:SET`) `worker --devices SET`.
fn worker_args(cmd: &mut Command, device: &str) {
    match device.strip_prefix(crate::server::GROUP_PREFIX) {
        Some(set) => cmd.arg("worker").arg("--devices").arg(set),
        None => cmd.arg("--device").arg(device).arg("worker"),
    };
}

struct Slot {
    index: usize,
    device: String,
    gpu: bool,
}

enum End {
    Shutdown,
    Died(String),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Shared state for the given devices (`cpu` or `cuda:N` each).
    pub fn new(
        store: Arc<dyn JobStore>,
        cfg: ServiceConfig,
        hub: Arc<Hub>,
        metrics: Arc<ServiceMetrics>,
        node: String,
        core_config: Option<PathBuf>,
        devices: &[String],
    ) -> Shared {
        for d in devices {
            metrics.init_worker(d);
        }
        let workers = devices
            .iter()
            .enumerate()
            .map(|(i, d)| WorkerStatus {
                name: format!("{}-{i}", d.replace(':', "")),
                device: d.clone(),
                state: "starting".into(),
                pid: None,
                restarts: 0,
                last_exit: None,
                ready_ms: None,
                exited_ms: None,
                batches: 0,
                fault: None,
                last_fault: None,
                faults: 0,
            })
            .collect();
        Shared {
            store,
            cfg,
            hub,
            metrics,
            node,
            core_config,
            stopping: AtomicBool::new(false),
            workers: Mutex::new(workers),
            batches: AtomicU64::new(0),
        }
    }

    fn update(&self, i: usize, f: impl FnOnce(&mut WorkerStatus)) {
        let mut g = lock(&self.workers);
        if let Some(w) = g.get_mut(i) {
            f(w);
        }
        let up = g
            .iter()
            .filter(|w| w.state == "idle" || w.state == "busy")
            .count();
        self.metrics.set_workers_up(up);
        self.metrics
            .set_workers_faulted(g.iter().filter(|w| w.fault.is_some()).count());
    }

    /// Whether any slot runs a GPU worker (claims GPU-only jobs), started or not.
    pub fn has_gpu_slot(&self) -> bool {
        lock(&self.workers).iter().any(|w| slot_is_gpu(&w.device))
    }

    /// Workers ready (idle or busy).
    pub fn workers_up(&self) -> usize {
        lock(&self.workers)
            .iter()
            .filter(|w| w.state == "idle" || w.state == "busy")
            .count()
    }

    /// Why faulted slots keep the node from being ready, one line per slot (see [`fault`]).
    pub fn fault_reasons(&self) -> Vec<String> {
        lock(&self.workers)
            .iter()
            .filter_map(WorkerStatus::not_ready_reason)
            .collect()
    }

    /// Marks slot `i` faulted (`reason`), unless it already is.
    fn mark_fault(&self, i: usize, device: &str, reason: String) {
        let mut fresh = false;
        let mut line = None;
        self.update(i, |w| {
            fresh = w.mark_fault(reason, now_ms());
            line = w.not_ready_reason();
        });
        if fresh {
            self.metrics.device_fault(device);
            if let Some(l) = line {
                tracing::error!("{l}");
            }
        }
    }

    /// Start one task per slot; they end after [`Shared::stopping`] is set and their
    /// workers are stopped.
    pub fn start(self: &Arc<Self>) -> Vec<tokio::task::JoinHandle<()>> {
        let devices: Vec<String> = lock(&self.workers).iter().map(|w| w.device.clone()).collect();
        devices
            .into_iter()
            .enumerate()
            .map(|(index, device)| {
                let sh = self.clone();
                let gpu = slot_is_gpu(&device);
                tokio::spawn(async move { sh.slot_loop(Slot { index, device, gpu }).await })
            })
            .collect()
    }

    fn owner(&self, slot: &Slot) -> String {
        format!("{}/{}", self.node, slot.index)
    }

    async fn slot_loop(self: Arc<Self>, slot: Slot) {
        let mut failures_in_a_row = 0u32;
        while !self.stopping.load(Ordering::SeqCst) {
            self.update(slot.index, |w| w.state = "starting".into());
            let mut proc = match self.spawn(&slot).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!("worker {}: {e}", slot.device);
                    self.update(slot.index, |w| w.start_failed(e.clone(), now_ms()));
                    failures_in_a_row += 1;
                    let backoff = Duration::from_millis((100u64 << failures_in_a_row.min(6)).min(5000));
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            };
            failures_in_a_row = 0;
            let end = self.serve(&slot, &mut proc).await;
            let status = proc.stop().await;
            if proc.exited_sticky() {
                // the worker's own word that its context was poisoned, however its jobs ended
                self.mark_fault(slot.index, &slot.device, status.clone());
            }
            match end {
                End::Shutdown => {
                    self.update(slot.index, |w| {
                        w.state = "down".into();
                        w.pid = None;
                        w.last_exit = Some(format!("shutdown ({status})"));
                    });
                    break;
                }
                End::Died(reason) => {
                    tracing::warn!(
                        "worker {} ended: {reason} ({status}); starting a new one",
                        slot.device
                    );
                    self.metrics
                        .worker_restart(&slot.device, reason.split(':').next().unwrap_or("died"));
                    self.update(slot.index, |w| {
                        w.state = "down".into();
                        w.pid = None;
                        w.restarts += 1;
                        w.last_exit = Some(format!("{reason} ({status})"));
                        w.exited_ms = Some(now_ms());
                    });
                }
            }
        }
    }

    async fn spawn(&self, slot: &Slot) -> Result<Proc, String> {
        let program = match &self.cfg.workers.program {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?,
        };
        let mut cmd = Command::new(&program);
        if let Some(c) = &self.core_config {
            cmd.arg("--config").arg(c);
        }
        worker_args(&mut cmd, &slot.device);
        let limits = &self.cfg.limits;
        cmd.arg("--blob-dir")
            .arg(self.cfg.data_dir.join("blobs"))
            .arg("--inline-max-elements")
            .arg(self.cfg.results.inline_max_elements.to_string())
            .arg("--max-elements")
            .arg(limits.max_elements.to_string());
        if let Some(b) = self.cfg.workers.memory_limit.bytes(limits.max_elements) {
            cmd.arg("--memory-limit").arg(b.to_string());
        }
        if !self.cfg.workers.sandbox {
            cmd.arg("--no-sandbox");
        }
        // no store URL, token or other secret of this process's environment (crate::sandbox)
        cmd.env_clear()
            .envs(crate::sandbox::worker_env(std::env::vars_os()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        let pid = child.id();
        let (stdin, stdout, stderr) = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => return Err("the worker has no pipes".into()),
        };
        let oom = Arc::new(AtomicBool::new(false));
        let stderr = tokio::spawn(forward_stderr(stderr, oom.clone()));
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            let mut stdout = tokio::io::BufReader::new(stdout);
            loop {
                match read_frame_async::<_, FromWorker>(&mut stdout).await {
                    Ok(Some(m)) => {
                        if tx.send(Ok(m)).await.is_err() {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string())).await;
                        break;
                    }
                }
            }
        });
        let mut proc = Proc {
            child,
            stdin,
            rx,
            oom,
            stderr: Some(stderr),
            sticky_exit: false,
        };
        let started = Instant::now();
        let timeout = Duration::from_secs(self.cfg.workers.start_timeout_s);
        match tokio::time::timeout(timeout, proc.rx.recv()).await {
            Ok(Some(Ok(FromWorker::Ready {
                device,
                backend,
                protections,
            }))) => {
                tracing::info!(
                    "worker {} ready: {device} ({backend}), pid {pid:?}, in {} ms; {protections}",
                    slot.device,
                    started.elapsed().as_millis()
                );
                if !self.cfg.workers.sandbox {
                    tracing::warn!(
                        "worker {} runs without no_new_privs and seccomp (workers.sandbox = false)",
                        slot.device
                    );
                }
                self.update(slot.index, |w| w.became_ready(pid, now_ms()));
                Ok(proc)
            }
            Ok(Some(Ok(FromWorker::Fatal { message }))) => {
                proc.stop().await;
                Err(format!("cannot create its runtime: {message}"))
            }
            Ok(Some(Ok(other))) => {
                proc.stop().await;
                Err(format!("unexpected first message {other:?}"))
            }
            Ok(Some(Err(e))) => {
                proc.stop().await;
                Err(format!("bad first frame: {e}"))
            }
            Ok(None) => {
                let st = proc.stop().await;
                Err(format!("exited while starting ({st})"))
            }
            Err(_) => {
                proc.stop().await;
                Err(format!("not ready after {} s; killed", timeout.as_secs()))
            }
        }
    }

    /// Feed one worker process until it dies or the service stops.
    async fn serve(&self, slot: &Slot, proc: &mut Proc) -> End {
        let heartbeat = Duration::from_millis(self.cfg.workers.heartbeat_ms);
        let mut last_beat = Instant::now();
        let mut seq = 0u64;
        // Jobs claimed in the transaction of the last batch's ends, to run next.
        let mut held: Vec<ClaimedJob> = Vec::new();
        loop {
            // claimed jobs run even when stopping: a drain lets batches finish
            if self.stopping.load(Ordering::SeqCst) && held.is_empty() {
                return End::Shutdown;
            }
            // enabled before the claim: work queued after its look wakes the slot
            let woken = self.hub.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let got = if held.is_empty() {
                self.next_batch(slot).await
            } else {
                Ok(Some(self.screen(slot, std::mem::take(&mut held)).await))
            };
            match got {
                // only jobs past their deadline were claimed (and failed): look again
                Ok(Some(jobs)) if jobs.is_empty() => continue,
                Ok(Some(jobs)) => {
                    // A claim with the ends that found nothing is made again the usual
                    // way: the clients told of those ends may have queued more since.
                    match self.run_batch(slot, proc, jobs).await {
                        Err(end) => return end,
                        Ok(next) => held = next,
                    }
                    last_beat = Instant::now();
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!("worker {}: store: {e}", slot.device);
                }
            }
            let wait = heartbeat
                .saturating_sub(last_beat.elapsed())
                .max(Duration::from_millis(1));
            tokio::select! {
                _ = &mut woken => {}
                _ = tokio::time::sleep(wait) => {}
                m = proc.rx.recv() => {
                    return End::Died(match m {
                        None => "exited: while idle".into(),
                        Some(Ok(m)) => format!("protocol: unexpected {m:?} while idle"),
                        Some(Err(e)) => format!("protocol: {e}"),
                    });
                }
            }
            if last_beat.elapsed() >= heartbeat {
                seq += 1;
                if let Err(reason) = self.ping(proc, seq).await {
                    return End::Died(reason);
                }
                last_beat = Instant::now();
            }
        }
    }

    async fn ping(&self, proc: &mut Proc, seq: u64) -> Result<(), String> {
        if write_frame_async(&mut proc.stdin, &ToWorker::Ping { seq })
            .await
            .is_err()
        {
            return Err("exited: heartbeat write failed".into());
        }
        let timeout = Duration::from_millis(self.cfg.workers.heartbeat_timeout_ms);
        match tokio::time::timeout(timeout, proc.rx.recv()).await {
            Ok(Some(Ok(FromWorker::Pong { seq: s }))) if s == seq => Ok(()),
            Ok(Some(Ok(m))) => Err(format!("protocol: expected pong, got {m:?}")),
            Ok(Some(Err(e))) => Err(format!("protocol: {e}")),
            Ok(None) => Err("exited: during a heartbeat".into()),
            Err(_) => Err(format!(
                "hung: no heartbeat answer in {} ms; killed",
                timeout.as_millis()
            )),
        }
    }

    /// Run one batch; `Err(end)` if the worker is gone afterwards, else the next work
    /// claimed in the transaction of this batch's ends ([`JobStore::finish_and_claim`]),
    /// none if there was none or no such claim was made.
    async fn run_batch(
        &self,
        slot: &Slot,
        proc: &mut Proc,
        jobs: Vec<ClaimedJob>,
    ) -> Result<Vec<ClaimedJob>, End> {
        let owner = self.owner(slot);
        let batch = self.batches.fetch_add(1, Ordering::Relaxed) + 1;
        self.update(slot.index, |w| {
            w.state = "busy".into();
            w.batches += 1;
        });
        let started = Instant::now();
        let now = now_ms();
        let default_deadline = now + (self.cfg.limits.job_deadline_s * 1000) as i64;
        // Each job's own deadline. Batches never mix tokens and a job with its own
        // `deadline_s` runs alone (the batch key, api/jobs.rs), so in a merged batch they
        // are all the server's, equal; should they differ, a passed deadline still fails
        // only the jobs it is the deadline of (below).
        let own: Vec<i64> = jobs
            .iter()
            .map(|j| j.deadline_ms.unwrap_or(default_deadline).min(default_deadline))
            .collect();
        let deadline_ms = own.iter().copied().min().unwrap_or(default_deadline);
        let items: Vec<WorkItem> = jobs
            .iter()
            .map(|j| WorkItem {
                id: j.id.clone(),
                attempt: j.attempt,
                task: j.task.clone(),
            })
            .collect();
        let ids: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
        let run = ToWorker::Run {
            batch,
            jobs: items,
            merge: self.merges(),
        };
        let sent = write_frame_async(&mut proc.stdin, &run).await;
        let deadline = tokio::time::Instant::now() + Duration::from_millis((deadline_ms - now).max(0) as u64);
        let lease = self.cfg.store.lease();
        let mut renew = tokio::time::interval(lease / 3);
        renew.tick().await;
        let answer: Result<Vec<crate::protocol::JobResult>, String> = if sent.is_err() {
            Err("exited: the batch could not be sent".into())
        } else {
            loop {
                tokio::select! {
                    m = proc.rx.recv() => match m {
                        Some(Ok(FromWorker::Done { batch: b, results })) if b == batch => break Ok(results),
                        Some(Ok(FromWorker::Pong { .. })) => continue,
                        Some(Ok(other)) => break Err(format!("protocol: unexpected {other:?}")),
                        Some(Err(e)) => break Err(format!("protocol: {e}")),
                        None => break Err("exited: mid-batch".into()),
                    },
                    _ = tokio::time::sleep_until(deadline) => break Err("deadline".into()),
                    _ = renew.tick() => {
                        if let Err(e) = self.store.renew(&owner, &ids, lease).await {
                            tracing::warn!("lease renewal: {e}");
                        }
                    }
                }
            }
        };
        let run_s = started.elapsed().as_secs_f64();
        let kind = jobs.first().map(|j| j.kind.clone()).unwrap_or_default();
        let queued: Vec<f64> = jobs
            .iter()
            .map(|j| (now - j.created_ms).max(0) as f64 / 1e3)
            .collect();
        self.metrics.batch(&kind, jobs.len(), run_s, &queued);
        match answer {
            Ok(results) => {
                let sticky = results.iter().find_map(|r| match &r.outcome {
                    WorkOutcome::Err {
                        sticky: true,
                        message,
                        ..
                    } => Some(message.clone()),
                    _ => None,
                });
                let poisoned = sticky.is_some();
                if let Some(message) = sticky {
                    // before any job's outcome is stored: a client that sees the failure
                    // finds the node not ready already
                    self.mark_fault(slot.index, &slot.device, fault::sticky_reason(&message));
                }
                // the ends first, in one transaction, then the retries
                let mut ends = Vec::with_capacity(jobs.len());
                let mut retries = Vec::new();
                for (job, r) in jobs.iter().zip(results) {
                    if r.id != job.id {
                        tracing::error!("worker answered job {} for {}", r.id, job.id);
                    }
                    match r.outcome {
                        WorkOutcome::Ok { result, mut blobs } => {
                            for b in &mut blobs {
                                b.principal = job.principal.clone();
                            }
                            let result = result.to_string();
                            ends.push((job, Outcome::Succeeded { result, blobs }));
                        }
                        WorkOutcome::Err {
                            code,
                            message,
                            retry: false,
                            ..
                        } => ends.push((job, Outcome::Failed { code, message })),
                        WorkOutcome::Err { code, message, .. } => retries.push((job, code, message)),
                    }
                }
                // A dynamic batch's next claim shares the ends' transaction unless a retry
                // is to be queued first (it may be the next job), the worker is poisoned, or
                // the node stops. An unbatched slot claims after its ends are told: folded,
                // its one-job-a-request throughput varied more and was lower in most of the
                // alternated runs (docs/performance.md).
                let fold =
                    self.merges() && retries.is_empty() && !poisoned && !self.stopping.load(Ordering::SeqCst);
                let next = if fold {
                    let next = self.next_claim(slot);
                    self.finish_and_claim(&owner, ends, next)
                        .await
                        .unwrap_or_default()
                } else {
                    self.finish_all(&owner, ends).await;
                    Vec::new()
                };
                for (job, code, message) in retries {
                    self.retry(job, &owner, &code, &message).await;
                }
                // a poisoned worker is on its way out (it exits after its answer)
                let state = if poisoned { "down" } else { "idle" };
                self.update(slot.index, |w| w.state = state.into());
                if poisoned {
                    return Err(End::Died("sticky: the CUDA context was poisoned".into()));
                }
                Ok(next)
            }
            Err(reason) if reason == "deadline" => {
                let _ = proc.child.start_kill();
                let msg = format!(
                    "the job ran past its deadline ({} s); its worker was killed",
                    ((deadline_ms - now) as f64 / 1e3).round()
                );
                let (late, others): (Vec<_>, Vec<_>) =
                    jobs.iter().zip(&own).partition(|(_, own)| **own <= deadline_ms);
                let out = Outcome::Failed {
                    code: "deadline_exceeded".into(),
                    message: msg,
                };
                self.finish_all(&owner, late.into_iter().map(|(j, _)| (j, out.clone())).collect())
                    .await;
                for (job, _) in others {
                    let why = "its worker was killed: another job of its batch passed its deadline";
                    self.retry(job, &owner, "worker_killed", why).await;
                }
                Err(End::Died("deadline: batch past its deadline".into()))
            }
            Err(reason) => {
                let status = proc.stop().await;
                if proc.ran_out_of_memory().await {
                    // not retried: the same job would exhaust the next worker the same way
                    let msg = format!(
                        "the job's worker on {} ran out of memory (workers.memory_limit) and ended ({status})",
                        slot.device
                    );
                    let out = Outcome::Failed {
                        code: "resource_exhausted".into(),
                        message: msg,
                    };
                    self.finish_all(&owner, jobs.iter().map(|j| (j, out.clone())).collect())
                        .await;
                    return Err(End::Died(format!("memory: {reason}")));
                }
                let msg = format!(
                    "the worker on {} failed mid-job: {reason} ({status})",
                    slot.device
                );
                for job in &jobs {
                    self.retry(job, &owner, "worker_crashed", &msg).await;
                }
                Err(End::Died(reason))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_slots_start_workers_over_their_devices() {
        let args = |d: &str| {
            let mut c = Command::new("kiln");
            worker_args(&mut c, d);
            c.as_std()
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(args("cuda:1"), ["--device", "cuda:1", "worker"]);
        assert_eq!(args("cpu"), ["--device", "cpu", "worker"]);
        assert_eq!(args("group:0,1"), ["worker", "--devices", "0,1"]);
        assert_eq!(args("group:cpu+all"), ["worker", "--devices", "cpu+all"]);
        assert!(slot_is_gpu("cuda:0") && slot_is_gpu("group:0,1") && slot_is_gpu("group:cpu+all"));
        assert!(!slot_is_gpu("cpu") && !slot_is_gpu("group:cpu"));
    }

    #[test]
    fn failed_allocations_are_recognised() {
        assert!(is_alloc_failure(
            "memory allocation of 17179869184 bytes failed\n"
        ));
        assert!(!is_alloc_failure("job failed: memory allocation of many bytes"));
    }
}
