//! The executor: initial shares in proportion to calibrated throughput, one host thread per
//! worker, chunk-granular work stealing, and a merge in chunk order.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use kiln_core::{Error, Result};

use super::calibrate::{Calibrations, DEFAULT_DRIFT};
use super::devices::Worker;

/// A workload the executor can split: a fixed number of chunks, each computed on its own by
/// any worker, and a merge of the chunks' outputs taken in chunk order. A workload's answer
/// must not depend on which worker ran a chunk (see `docs/executor.md`).
pub trait Workload: Sync {
    /// What one chunk produces.
    type Part: Send;
    /// The merged answer.
    type Output;
    /// The calibration key: the workload kind and whatever changes its rate per unit
    /// (style, steps, kernel size, precision), not its size.
    fn key(&self) -> String;
    /// The number of chunks (fixed for the run).
    fn chunks(&self) -> usize;
    /// The work units of chunk `i` (path-steps, pixels x taps, FLOPs, elements), the unit
    /// rates are measured in.
    fn units(&self, i: usize) -> f64;
    /// Computes chunk `i` on `worker`.
    fn run(&self, worker: &Worker, i: usize) -> Result<Self::Part>;
    /// Merges every chunk's part, given in chunk order.
    fn merge(&self, parts: Vec<Self::Part>) -> Result<Self::Output>;
    /// The chunk a calibration probe runs (its result is discarded).
    fn probe_chunk(&self) -> usize {
        0
    }
}

/// What one worker did in a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WorkerStats {
    /// The worker's label (`cpu`, `cuda:0`, `cuda:0/1`).
    pub label: String,
    /// Its share of the work at the start (shares sum to 1).
    pub share: f64,
    /// Chunks it was given at the start.
    pub initial_chunks: usize,
    /// Chunks it ran.
    pub chunks: usize,
    /// Of those, chunks taken from another worker's queue.
    pub stolen: usize,
    /// Work units it ran.
    pub units: f64,
    /// Seconds it spent running chunks.
    pub busy_s: f64,
}

/// What a run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunReport {
    /// Per worker, in the executor's order.
    pub workers: Vec<WorkerStats>,
    /// Chunks in the run.
    pub chunks: usize,
    /// Wall seconds of the run (calibration excluded).
    pub wall_s: f64,
    /// Seconds spent calibrating devices that had no stored rate.
    pub calibration_s: f64,
    /// Devices whose rate was measured by a probe before this run.
    pub calibrated: Vec<String>,
    /// Devices whose stored rate this run replaced (it drifted past the threshold).
    pub refreshed: Vec<String>,
}

impl RunReport {
    /// The starting share of the worker labelled `label`.
    pub fn share_of(&self, label: &str) -> Option<f64> {
        self.workers.iter().find(|w| w.label == label).map(|w| w.share)
    }
}

/// `(device key, units per second)`, one per device, in worker order.
type DeviceRates = Vec<(String, f64)>;

/// How the initial shares are chosen.
#[derive(Debug)]
enum Shares {
    /// From calibrated rates.
    Calibrated(Calibrations),
    /// Given by the caller, one weight per worker.
    Fixed(Vec<f64>),
}

/// Runs [`Workload`]s over a set of [`Worker`]s (see the [module docs](super)).
#[derive(Debug)]
pub struct Executor {
    workers: Vec<Worker>,
    shares: Shares,
    drift: f64,
}

impl Executor {
    /// An executor over `workers` (at least one) with an in-memory calibration store.
    pub fn new(workers: Vec<Worker>) -> Result<Self> {
        if workers.is_empty() {
            return Err(Error::invalid("executor", "no worker: name at least one device"));
        }
        Ok(Executor {
            workers,
            shares: Shares::Calibrated(Calibrations::in_memory()),
            drift: DEFAULT_DRIFT,
        })
    }

    /// Uses `store` for calibrated rates (e.g. [`Calibrations::for_config`], on disk).
    pub fn with_calibrations(mut self, store: Calibrations) -> Self {
        self.shares = Shares::Calibrated(store);
        self
    }

    /// Starts every run from these weights (one per worker, finite and > 0) instead of
    /// calibrated rates; nothing is calibrated or stored.
    pub fn with_shares(mut self, weights: Vec<f64>) -> Result<Self> {
        if weights.len() != self.workers.len() || weights.iter().any(|w| !(w.is_finite() && *w > 0.0)) {
            return Err(Error::invalid(
                "executor",
                format!(
                    "{} workers need as many weights, each finite and > 0; got {weights:?}",
                    self.workers.len()
                ),
            ));
        }
        self.shares = Shares::Fixed(weights);
        Ok(self)
    }

    /// The relative drift of a measured rate that replaces the stored one (default 0.25).
    pub fn with_drift_threshold(mut self, threshold: f64) -> Result<Self> {
        if !(threshold.is_finite() && threshold >= 0.0) {
            return Err(Error::invalid(
                "executor",
                format!("drift threshold {threshold} must be finite and >= 0"),
            ));
        }
        self.drift = threshold;
        Ok(self)
    }

    /// The workers.
    pub fn workers(&self) -> &[Worker] {
        &self.workers
    }

    /// The calibration store, unless the shares are fixed.
    pub fn calibrations(&self) -> Option<&Calibrations> {
        match &self.shares {
            Shares::Calibrated(c) => Some(c),
            Shares::Fixed(_) => None,
        }
    }

    /// Each device's rate for `w` (one entry per distinct device key, in worker order),
    /// probing devices without a stored rate: the probe chunk runs once to warm up (module
    /// loads, first-touch) and once timed.
    fn device_rates<W: Workload>(&self, w: &W, store: &Calibrations) -> Result<(DeviceRates, Vec<String>)> {
        let key = w.key();
        let mut rates: Vec<(String, f64)> = Vec::new();
        let mut probed = Vec::new();
        for worker in &self.workers {
            let dev = worker.device_key();
            if rates.iter().any(|(d, _)| *d == dev) {
                continue;
            }
            let rate = match store.get(&dev, &key) {
                Some(r) => r,
                None => {
                    let c = w.probe_chunk();
                    w.run(worker, c)?;
                    let t = Instant::now();
                    w.run(worker, c)?;
                    let secs = t.elapsed().as_secs_f64().max(1e-9);
                    let r = w.units(c) / secs;
                    store.set(&dev, &key, r)?;
                    probed.push(dev.clone());
                    r
                }
            };
            rates.push((dev, rate));
        }
        Ok((rates, probed))
    }

    /// Runs `w`: shares, threads, stealing, merge. The first failing chunk (lowest index)
    /// fails the run.
    pub fn run<W: Workload>(&self, w: &W) -> Result<(W::Output, RunReport)> {
        let n = w.chunks();
        let t_cal = Instant::now();
        let (weights, rates, calibrated) = match &self.shares {
            Shares::Fixed(v) => (v.clone(), Vec::new(), Vec::new()),
            Shares::Calibrated(store) if n > 0 => {
                let (rates, probed) = self.device_rates(w, store)?;
                // a device's rate is split evenly between its workers (streams of one GPU)
                let weights = self
                    .workers
                    .iter()
                    .map(|wk| {
                        let dev = wk.device_key();
                        let lanes = self.workers.iter().filter(|o| o.device_key() == dev).count();
                        let r = rates.iter().find(|(d, _)| *d == dev).map_or(1.0, |(_, r)| *r);
                        r / lanes as f64
                    })
                    .collect();
                (weights, rates, probed)
            }
            Shares::Calibrated(_) => (vec![1.0; self.workers.len()], Vec::new(), Vec::new()),
        };
        let calibration_s = t_cal.elapsed().as_secs_f64();
        let total: f64 = weights.iter().sum();
        let shares: Vec<f64> = weights.iter().map(|x| x / total).collect();
        let counts = allot(n, &shares);
        let mut queues = Vec::with_capacity(self.workers.len());
        let mut next = 0usize;
        for &c in &counts {
            queues.push(Mutex::new((next..next + c).collect::<VecDeque<usize>>()));
            next += c;
        }
        let abort = AtomicBool::new(false);
        let t0 = Instant::now();
        type Done<P> = (Vec<(usize, Result<P>)>, usize, f64, f64);
        let per_worker: Vec<std::thread::Result<Done<W::Part>>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .workers
                .iter()
                .enumerate()
                .map(|(me, worker)| {
                    let (queues, abort) = (&queues, &abort);
                    s.spawn(move || {
                        let mut done = Vec::new();
                        let (mut stolen, mut units, mut busy) = (0usize, 0.0f64, 0.0f64);
                        while !abort.load(Ordering::Relaxed) {
                            let (i, was_stolen) = match take(queues, me) {
                                Some(t) => t,
                                None => break,
                            };
                            let t = Instant::now();
                            let r = w.run(worker, i);
                            busy += t.elapsed().as_secs_f64();
                            if r.is_err() {
                                abort.store(true, Ordering::Relaxed);
                            } else {
                                units += w.units(i);
                            }
                            stolen += usize::from(was_stolen);
                            done.push((i, r));
                        }
                        (done, stolen, units, busy)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        let wall_s = t0.elapsed().as_secs_f64();
        let mut parts: Vec<Option<W::Part>> = (0..n).map(|_| None).collect();
        let mut first_err: Option<(usize, Error)> = None;
        let mut stats = Vec::with_capacity(self.workers.len());
        for (k, res) in per_worker.into_iter().enumerate() {
            let label = self.workers[k].label().to_string();
            let (done, stolen, units, busy) = res.map_err(|_| {
                Error::invalid(
                    "executor",
                    format!("worker {label} panicked while running a chunk"),
                )
            })?;
            let chunks = done.len();
            for (i, r) in done {
                match r {
                    Ok(p) => parts[i] = Some(p),
                    Err(e) => {
                        if first_err.as_ref().is_none_or(|(j, _)| i < *j) {
                            first_err = Some((i, e));
                        }
                    }
                }
            }
            stats.push(WorkerStats {
                label,
                share: shares[k],
                initial_chunks: counts[k],
                chunks,
                stolen,
                units,
                busy_s: busy,
            });
        }
        if let Some((_, e)) = first_err {
            return Err(e);
        }
        let parts = parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| p.ok_or_else(|| Error::invalid("executor", format!("chunk {i} was never run"))))
            .collect::<Result<Vec<_>>>()?;
        let refreshed = self.refresh(w, &rates, &stats)?;
        let out = w.merge(parts)?;
        Ok((
            out,
            RunReport {
                workers: stats,
                chunks: n,
                wall_s,
                calibration_s,
                calibrated,
                refreshed,
            },
        ))
    }

    /// Replaces a device's stored rate when the run measured one that drifted past the
    /// threshold. A device's measured rate is its workers' units over the longest busy time
    /// among them (its streams ran side by side); devices that ran fewer than two chunks
    /// are not judged.
    fn refresh<W: Workload>(
        &self,
        w: &W,
        rates: &[(String, f64)],
        stats: &[WorkerStats],
    ) -> Result<Vec<String>> {
        let Shares::Calibrated(store) = &self.shares else {
            return Ok(Vec::new());
        };
        let mut refreshed = Vec::new();
        for (dev, stored) in rates {
            let (mut units, mut busy, mut chunks) = (0.0f64, 0.0f64, 0usize);
            for (wk, st) in self.workers.iter().zip(stats) {
                if wk.device_key() == *dev {
                    units += st.units;
                    busy = busy.max(st.busy_s);
                    chunks += st.chunks;
                }
            }
            if chunks < 2 || busy <= 0.0 {
                continue;
            }
            let measured = units / busy;
            if Calibrations::drifted(*stored, measured, self.drift) {
                store.set(dev, &w.key(), measured)?;
                refreshed.push(dev.clone());
            }
        }
        Ok(refreshed)
    }
}

/// Splits `n` chunks by `shares` (largest remainder; every share >= 0, summing to 1).
pub(crate) fn allot(n: usize, shares: &[f64]) -> Vec<usize> {
    let exact: Vec<f64> = shares.iter().map(|s| s * n as f64).collect();
    let mut counts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut left = n.saturating_sub(counts.iter().sum());
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &k in order.iter().cycle().take(shares.len() * 2) {
        if left == 0 {
            break;
        }
        counts[k] += 1;
        left -= 1;
    }
    counts
}

/// The next chunk for worker `me`: the front of its own queue, else the back of the
/// longest other queue (the stealing rule). `(chunk, stolen)`, or `None` when all are empty.
fn take(queues: &[Mutex<VecDeque<usize>>], me: usize) -> Option<(usize, bool)> {
    if let Some(i) = queues[me].lock().ok()?.pop_front() {
        return Some((i, false));
    }
    loop {
        let victim = queues
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != me)
            .map(|(k, q)| (k, q.lock().map(|q| q.len()).unwrap_or(0)))
            .filter(|(_, len)| *len > 0)
            .max_by_key(|(k, len)| (*len, std::cmp::Reverse(*k)))?;
        // the victim may have emptied since: look again
        if let Some(i) = queues[victim.0].lock().ok()?.pop_back() {
            return Some((i, true));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allotment_follows_the_shares_and_covers_every_chunk() {
        assert_eq!(allot(10, &[0.5, 0.5]), vec![5, 5]);
        assert_eq!(allot(10, &[0.75, 0.25]), vec![8, 2]);
        assert_eq!(allot(7, &[1.0 / 3.0; 3]).iter().sum::<usize>(), 7);
        assert_eq!(allot(0, &[0.2, 0.8]), vec![0, 0]);
        assert_eq!(allot(3, &[0.1, 0.1, 0.8]), vec![0, 0, 3]);
        for n in 0..50 {
            assert_eq!(allot(n, &[0.13, 0.29, 0.58]).iter().sum::<usize>(), n);
        }
    }

    #[test]
    fn stealing_takes_from_the_back_of_the_longest_queue() {
        let q: Vec<Mutex<VecDeque<usize>>> = vec![
            Mutex::new(VecDeque::new()),
            Mutex::new((0..2).collect()),
            Mutex::new((2..6).collect()),
        ];
        assert_eq!(take(&q, 1), Some((0, false)));
        assert_eq!(take(&q, 0), Some((5, true)));
        assert_eq!(take(&q, 0), Some((4, true)));
        assert_eq!(take(&q, 0), Some((3, true)));
        // a tie goes to the lower worker
        assert_eq!(take(&q, 0), Some((1, true)));
        assert_eq!(take(&q, 2), Some((2, false)));
        assert_eq!(take(&q, 2), None);
        assert_eq!(take(&q, 0), None);
    }
}
