//! The batch pipeline of the filter commands: N reader threads (read and decode), the
//! device stage (one thread per stream, each filtering whole files on its own stream, so
//! one file's transfers and kernels overlap another's), M writer threads (encode, write to
//! a temporary file, rename). Bounded channels between the stages and a byte budget on the
//! readers keep memory bounded; buffers are pinned once a CUDA runtime is up (readers
//! start before it, on `Vec`s, so decoding overlaps the context's creation).
//!
//! Each stage's busy time (the work, not the waits on channels or the budget) is summed
//! over its threads; a stage's utilisation is busy / (wall x threads), and the stage with
//! the highest utilisation bounds the batch.

use crate::filter_host::{Alloc, RuntimeStart};
use crossbeam_channel::{bounded, Receiver, Sender};
use indicatif::ProgressBar;
use kiln::{Runtime, Stream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What a batch does to one file, stage by stage.
pub(crate) trait Job: Sync {
    /// A decoded input.
    type In: Send;
    /// A filtered result, ready to encode.
    type Out: Send;
    /// Reads and decodes `path`, whose output goes to `out` (to check the output format
    /// can hold it before any work), reserving its memory from `budget`.
    fn read<'b>(
        &self,
        path: &Path,
        out: &Path,
        alloc: &Alloc,
        budget: &'b Budget,
    ) -> anyhow::Result<(Self::In, Ticket<'b>)>;
    /// Filters on `rt`, on the current stream (`stream`).
    fn filter(
        &self,
        rt: &Runtime,
        input: Self::In,
        alloc: &Alloc,
        stream: Stream,
    ) -> anyhow::Result<Self::Out>;
    /// Encodes and writes atomically; returns the images (or volumes) written.
    fn write(&self, out: Self::Out, path: &Path) -> anyhow::Result<usize>;
}

/// The pipeline's settings.
pub(crate) struct Settings {
    pub readers: usize,
    pub writers: usize,
    pub streams: usize,
    pub fail_fast: bool,
    pub budget_bytes: u64,
}

/// How one file went.
pub(crate) enum Outcome {
    /// Written; images or volumes in it.
    Ok(usize),
    /// Failed at `stage` (`read`, `filter`, `write`) with this exit code and message.
    Failed {
        stage: &'static str,
        code: u8,
        error: String,
    },
}

/// A stage's threads and busy time.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub(crate) struct StageTime {
    pub threads: usize,
    pub busy_s: f64,
    /// busy / (wall x threads).
    pub utilisation: f64,
}

/// What a run gives back: per file (`None`: not processed, after --fail-fast or a sticky
/// device error), per stage, the wall time, and the runtime used.
pub(crate) struct Report {
    pub outcomes: Vec<Option<Outcome>>,
    pub read: StageTime,
    pub device: StageTime,
    pub write: StageTime,
    pub seconds: f64,
    /// Seconds from the start until the runtime was up (the device stage waits that long;
    /// the readers do not).
    pub runtime_s: f64,
    pub runtime: Runtime,
}

/// A byte budget on what the pipeline holds: readers wait for room (one file at a time
/// goes through whatever its size).
pub(crate) struct Budget {
    cap: u64,
    used: Mutex<u64>,
    freed: Condvar,
    stop: AtomicBool,
}

/// Bytes held from a [`Budget`] until dropped.
pub(crate) struct Ticket<'b> {
    budget: &'b Budget,
    bytes: u64,
    /// How long the reader waited for the room (not busy time).
    pub waited: Duration,
}

impl Budget {
    fn new(cap: u64) -> Self {
        Budget {
            cap,
            used: Mutex::new(0),
            freed: Condvar::new(),
            stop: AtomicBool::new(false),
        }
    }

    /// Waits until `bytes` fit (or nothing else is held), then holds them; an error once
    /// the batch is stopping.
    pub(crate) fn acquire(&self, bytes: u64) -> anyhow::Result<Ticket<'_>> {
        let t = Instant::now();
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        while *used > 0 && *used + bytes > self.cap {
            if self.stop.load(Ordering::Relaxed) {
                anyhow::bail!("the batch is stopping");
            }
            used = self
                .freed
                .wait_timeout(used, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *used += bytes;
        Ok(Ticket {
            budget: self,
            bytes,
            waited: t.elapsed(),
        })
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|p| p.into_inner());
        *used = used.saturating_sub(self.bytes);
        self.budget.freed.notify_all();
    }
}

/// Whether `e` poisoned the device context (nothing more can run on it).
fn is_sticky(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<kiln::Error>()
            .is_some_and(kiln::Error::is_sticky)
    })
}

/// Shared state of a run.
struct Shared<'a> {
    inputs: &'a [PathBuf],
    outputs: &'a [PathBuf],
    next: AtomicUsize,
    outcomes: Mutex<Vec<Option<Outcome>>>,
    stop: AtomicBool,
    failed: AtomicUsize,
    fail_fast: bool,
    busy: [AtomicU64; 3],
    bar: &'a ProgressBar,
}

impl Shared<'_> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn add_busy(&self, stage: usize, d: Duration) {
        self.busy[stage].fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    fn record(&self, i: usize, o: Outcome) {
        if let Outcome::Failed { .. } = o {
            let n = self.failed.fetch_add(1, Ordering::Relaxed) + 1;
            self.bar.set_message(format!(", {n} failed"));
        }
        self.outcomes.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(o);
        self.bar.inc(1);
    }

    fn fail(&self, i: usize, stage: &'static str, e: &anyhow::Error, budget: &Budget) {
        self.record(
            i,
            Outcome::Failed {
                stage,
                code: crate::exit::code_of(e),
                error: format!("{e:#}"),
            },
        );
        if self.fail_fast || is_sticky(e) {
            self.stop.store(true, Ordering::Relaxed);
            budget.stop.store(true, Ordering::Relaxed);
        }
    }
}

const READ: usize = 0;
const DEVICE: usize = 1;
const WRITE: usize = 2;

/// Runs `job` over `inputs` (written to `outputs`, same order), creating the runtime on
/// its own thread meanwhile. An error only when the runtime cannot be created (then
/// nothing was written); per-file failures are in the report.
pub(crate) fn run<J: Job>(
    job: &J,
    inputs: &[PathBuf],
    outputs: &[PathBuf],
    settings: &Settings,
    start: RuntimeStart,
    bar: &ProgressBar,
) -> anyhow::Result<Report> {
    let t0 = Instant::now();
    let shared = Shared {
        inputs,
        outputs,
        next: AtomicUsize::new(0),
        outcomes: Mutex::new((0..inputs.len()).map(|_| None).collect()),
        stop: AtomicBool::new(false),
        failed: AtomicUsize::new(0),
        fail_fast: settings.fail_fast,
        busy: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
        bar,
    };
    let budget = Budget::new(settings.budget_bytes);
    let pinned: OnceLock<Alloc<'_>> = OnceLock::new();
    let runtime: OnceLock<Runtime> = OnceLock::new();
    let runtime_s: OnceLock<f64> = OnceLock::new();
    let streams = settings.streams.max(1);
    let (to_dev, from_read) = bounded::<(usize, J::In, Ticket)>(2 * streams);
    let (to_write, from_dev) = bounded::<(usize, J::Out, Ticket)>(settings.writers.max(1));
    let fatal = std::thread::scope(|sc| -> Option<anyhow::Error> {
        for _ in 0..settings.readers.max(1) {
            let tx = to_dev.clone();
            let (shared, budget, pinned) = (&shared, &budget, &pinned);
            sc.spawn(move || reader(job, shared, budget, pinned, tx));
        }
        drop(to_dev);
        for _ in 0..settings.writers.max(1) {
            let rx = from_dev.clone();
            let (shared, budget) = (&shared, &budget);
            sc.spawn(move || writer(job, shared, budget, rx));
        }
        drop(from_dev);
        let rt = match start.join() {
            Ok((rt, _)) => {
                let _ = runtime_s.set(t0.elapsed().as_secs_f64());
                runtime.get_or_init(|| rt)
            }
            Err(e) => {
                shared.stop.store(true, Ordering::Relaxed);
                budget.stop.store(true, Ordering::Relaxed);
                // readers blocked on a full channel see it closed; writers see no sender
                drop(from_read);
                drop(to_write);
                return Some(e);
            }
        };
        let _ = pinned.set(Alloc::for_runtime(rt));
        for _ in 0..streams {
            let (rx, tx) = (from_read.clone(), to_write.clone());
            let (shared, budget) = (&shared, &budget);
            sc.spawn(move || device(job, rt, shared, budget, rx, tx));
        }
        // Only the workers hold the channels' ends now: each stage ends when the one
        // before it has (the scope then joins every thread).
        drop(from_read);
        drop(to_write);
        None
    });
    if let Some(e) = fatal {
        return Err(e);
    }
    let seconds = t0.elapsed().as_secs_f64();
    let stage = |i: usize, threads: usize| {
        let busy_s = shared.busy[i].load(Ordering::Relaxed) as f64 * 1e-9;
        StageTime {
            threads,
            busy_s,
            utilisation: busy_s / (seconds * threads as f64).max(1e-9),
        }
    };
    Ok(Report {
        read: stage(READ, settings.readers.max(1)),
        device: stage(DEVICE, streams),
        write: stage(WRITE, settings.writers.max(1)),
        seconds,
        runtime_s: runtime_s.get().copied().unwrap_or(0.0),
        outcomes: shared.outcomes.into_inner().unwrap_or_else(|p| p.into_inner()),
        runtime: runtime
            .into_inner()
            .ok_or_else(|| anyhow::anyhow!("internal: no runtime after the batch"))?,
    })
}

fn reader<'b, J: Job>(
    job: &J,
    shared: &Shared,
    budget: &'b Budget,
    pinned: &OnceLock<Alloc<'_>>,
    tx: Sender<(usize, J::In, Ticket<'b>)>,
) {
    loop {
        if shared.stopped() {
            return;
        }
        let i = shared.next.fetch_add(1, Ordering::Relaxed);
        if i >= shared.inputs.len() {
            return;
        }
        let t = Instant::now();
        let alloc = pinned.get().cloned().unwrap_or_else(Alloc::pageable);
        let r = job.read(&shared.inputs[i], &shared.outputs[i], &alloc, budget);
        let waited = r.as_ref().map(|(_, t)| t.waited).unwrap_or_default();
        shared.add_busy(READ, t.elapsed().saturating_sub(waited));
        match r {
            Ok((input, ticket)) => {
                if tx.send((i, input, ticket)).is_err() {
                    return; // the device stage is gone: the batch is stopping
                }
            }
            Err(e) if shared.stopped() => {
                let _ = e;
                return;
            }
            Err(e) => shared.fail(i, "read", &e, budget),
        }
    }
}

fn device<'b, J: Job>(
    job: &J,
    rt: &Runtime,
    shared: &Shared,
    budget: &Budget,
    rx: Receiver<(usize, J::In, Ticket<'b>)>,
    tx: Sender<(usize, J::Out, Ticket<'b>)>,
) {
    let alloc = Alloc::for_runtime(rt);
    let stream = match rt.stream() {
        Ok(s) => s,
        Err(e) => {
            // no stream for this worker: fail what it would have taken
            let e = anyhow::Error::from(e);
            for (i, _, _) in rx.iter() {
                shared.fail(i, "filter", &e, budget);
            }
            return;
        }
    };
    for (i, input, ticket) in rx.iter() {
        if shared.stopped() {
            continue; // drained, not processed
        }
        let t = Instant::now();
        let r = rt
            .with_stream(&stream, || job.filter(rt, input, &alloc, stream))
            .map_err(anyhow::Error::from)
            .and_then(|r| r);
        shared.add_busy(DEVICE, t.elapsed());
        match r {
            Ok(out) => {
                if tx.send((i, out, ticket)).is_err() {
                    return;
                }
            }
            Err(e) => shared.fail(i, "filter", &e, budget),
        }
    }
}

fn writer<J: Job>(job: &J, shared: &Shared, budget: &Budget, rx: Receiver<(usize, J::Out, Ticket)>) {
    for (i, out, ticket) in rx.iter() {
        if shared.stopped() {
            continue;
        }
        let t = Instant::now();
        let r = job.write(out, &shared.outputs[i]);
        shared.add_busy(WRITE, t.elapsed());
        drop(ticket);
        match r {
            Ok(items) => shared.record(i, Outcome::Ok(items)),
            Err(e) => shared.fail(i, "write", &e, budget),
        }
    }
}
