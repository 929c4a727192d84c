//! `--devices` on the workload commands (`kiln filter2d`, `kiln filter3d`, `kiln gemm`):
//! the same syntax and workers as `kiln price --devices` ([`kiln::executor::DeviceSet`]:
//! `all`, `0,1,...`, `cpu`, `cpu+all`, `cpu+0,1`), one check that it does not fight
//! `--device`, the executor behind it, and what `--json` reports about the split.
//!
//! Decisions:
//! - `--devices` and a `--device` other than `auto` (the default) together are a usage
//!   error (exit 4) naming both: one says "this device", the other "these devices".
//! - What has nothing to split (one image, one 3-D volume, one product) runs on the set's
//!   first device ([`first_request`]: the first GPU named, the best GPU for `all`/`cpu+all`
//!   where one is usable, else the CPU), and the JSON says so in `devices_note`.
//! - Shares come from calibrated throughput stored next to the kernel cache (as `kiln
//!   price`); the first run on a device for a workload probes it.

use kiln::executor::{Calibrations, DeviceSet, Executor, GpuSelection, RunReport};
use kiln::{Config, DeviceRequest, Error};
use serde::Serialize;

/// Chunks per worker a batch is cut into (so a fast device can take more; as `kiln price`).
pub(crate) const CHUNKS_PER_WORKER: usize = 8;

/// `--devices` with `--device`: an error unless `--device` is `auto` (its default).
pub(crate) fn check_exclusive(devices: Option<&DeviceSet>, request: DeviceRequest) -> anyhow::Result<()> {
    match devices {
        Some(d) if request != DeviceRequest::Auto => Err(Error::invalid(
            "--devices",
            format!(
                "--devices {d} and --device {request} both choose where to run; give one \
                 (--devices splits the work over several devices, --device runs it on one)"
            ),
        )
        .into()),
        _ => Ok(()),
    }
}

/// The one device a run with nothing to split takes from `set`: its first GPU (the best
/// usable one for `all`; for `cpu+all` the CPU where none is usable), else the CPU.
pub(crate) fn first_request(set: &DeviceSet) -> DeviceRequest {
    match (&set.gpus, set.cpu) {
        (GpuSelection::Ordinals(v), _) if !v.is_empty() => DeviceRequest::Cuda(Some(v[0])),
        (GpuSelection::All, false) => DeviceRequest::Cuda(None),
        (GpuSelection::All, true) => DeviceRequest::Auto,
        _ => DeviceRequest::Cpu,
    }
}

/// The executor over `set`'s workers (calibrations on disk) and their labels joined by `+`.
pub(crate) fn open(set: &DeviceSet, cfg: &Config) -> kiln::Result<(Executor, String)> {
    let workers = set.open(cfg)?;
    let label = workers
        .iter()
        .map(|w| w.label().to_string())
        .collect::<Vec<_>>()
        .join("+");
    let ex = Executor::new(workers)?.with_calibrations(Calibrations::for_config(cfg));
    Ok((ex, label))
}

/// Items per chunk for `items` over `workers` (at least 1).
pub(crate) fn per_chunk(items: usize, workers: usize) -> usize {
    (items / (CHUNKS_PER_WORKER * workers.max(1))).max(1)
}

/// One worker's part of a run, as `--json` reports it.
#[derive(Serialize, Clone, Debug)]
pub(crate) struct WorkerSplit {
    /// `cpu`, `cuda:0`, `cuda:0/1`.
    pub label: String,
    /// Its starting share of the work (shares sum to 1).
    pub share: f64,
    /// Chunks it ran.
    pub chunks: usize,
    /// Of those, chunks taken from another worker's queue.
    pub stolen: usize,
    /// Seconds it spent running chunks.
    pub busy_s: f64,
}

/// The per-worker split of a run.
pub(crate) fn split_of(rep: &RunReport) -> Vec<WorkerSplit> {
    for w in &rep.workers {
        tracing::debug!(
            "{}: share {:.3}, {} chunks ({} stolen), {:.3} s busy",
            w.label,
            w.share,
            w.chunks,
            w.stolen,
            w.busy_s
        );
    }
    rep.workers
        .iter()
        .map(|w| WorkerSplit {
            label: w.label.clone(),
            share: w.share,
            chunks: w.chunks,
            stolen: w.stolen,
            busy_s: w.busy_s,
        })
        .collect()
}

/// The split of a run that had nothing to split: all of it on `device`.
pub(crate) fn whole_on(device: &str, seconds: f64) -> Vec<WorkerSplit> {
    vec![WorkerSplit {
        label: device.to_string(),
        share: 1.0,
        chunks: 1,
        stolen: 0,
        busy_s: seconds,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_device_of_a_set() {
        let f = |s: &str| first_request(&s.parse().unwrap_or_else(|e| panic!("{s}: {e}")));
        assert_eq!(f("cpu"), DeviceRequest::Cpu);
        assert_eq!(f("2,0"), DeviceRequest::Cuda(Some(2)));
        assert_eq!(f("cpu+1"), DeviceRequest::Cuda(Some(1)));
        assert_eq!(f("all"), DeviceRequest::Cuda(None));
        assert_eq!(f("cpu+all"), DeviceRequest::Auto);
    }

    #[test]
    fn devices_and_device_conflict_unless_auto() {
        let d: DeviceSet = "cpu".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(check_exclusive(Some(&d), DeviceRequest::Auto).is_ok());
        assert!(check_exclusive(None, DeviceRequest::Cpu).is_ok());
        let e = check_exclusive(Some(&d), DeviceRequest::Cpu)
            .map_err(|e| e.to_string())
            .unwrap_err();
        assert!(e.contains("--devices cpu and --device cpu"), "{e}");
        assert_eq!(per_chunk(3, 2), 1);
        assert_eq!(per_chunk(160, 2), 10);
    }
}
