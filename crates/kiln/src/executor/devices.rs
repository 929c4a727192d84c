//! Which devices an executor runs on: the `--devices` syntax ([`DeviceSet`]) and the
//! workers it opens ([`Worker`]: one device, or one stream of a device, driven by one host
//! thread).

use std::str::FromStr;
use std::sync::Arc;

use kiln_core::{Config, DeviceRequest, Error, NoDeviceReason, Result};

use crate::{Runtime, Stream};

/// The GPUs of a [`DeviceSet`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuSelection {
    /// No GPU.
    None,
    /// Every GPU the device policy allows.
    All,
    /// These ordinals, in this order; an ordinal named twice gets two workers, each on its
    /// own stream of that GPU.
    Ordinals(Vec<usize>),
}

/// The devices to run on, as `--devices` spells them:
///
/// | text | workers |
/// | --- | --- |
/// | `all` | every allowed GPU (an error where there is none) |
/// | `0,1` | GPUs 0 and 1; `0,0` is two workers on GPU 0 (two streams) |
/// | `cpu` | the CPU alone |
/// | `cpu+all` | the CPU and every allowed GPU (the CPU alone where no GPU is usable) |
/// | `cpu+0,1` | the CPU and GPUs 0 and 1 |
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSet {
    /// Whether the CPU is a worker.
    pub cpu: bool,
    /// Which GPUs are.
    pub gpus: GpuSelection,
}

fn bad(s: &str, why: &str) -> Error {
    Error::invalid(
        "devices",
        format!("`{s}`: {why}; use all, 0,1,..., cpu, cpu+all or cpu+0,1,..."),
    )
}

impl FromStr for DeviceSet {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        if t.is_empty() {
            return Err(bad(s, "no device named"));
        }
        let (cpu, rest) = match t.strip_prefix("cpu") {
            Some("") => (true, None),
            Some(r) => match r.strip_prefix('+') {
                Some(r) if !r.is_empty() => (true, Some(r)),
                _ => return Err(bad(s, "`cpu` is followed by `+` and the GPUs")),
            },
            None => (false, Some(t.as_str())),
        };
        let gpus = match rest {
            None => GpuSelection::None,
            Some("all") => GpuSelection::All,
            Some(list) => {
                let mut v = Vec::new();
                for part in list.split(',') {
                    let p = part.trim().trim_start_matches("cuda:");
                    let n = p
                        .parse::<usize>()
                        .map_err(|_| bad(s, &format!("`{part}` is not a GPU ordinal")))?;
                    v.push(n);
                }
                GpuSelection::Ordinals(v)
            }
        };
        Ok(DeviceSet { cpu, gpus })
    }
}

impl std::fmt::Display for DeviceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gpus = match &self.gpus {
            GpuSelection::None => String::new(),
            GpuSelection::All => "all".into(),
            GpuSelection::Ordinals(v) => v.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(","),
        };
        match (self.cpu, gpus.is_empty()) {
            (true, true) => write!(f, "cpu"),
            (true, false) => write!(f, "cpu+{gpus}"),
            (false, _) => write!(f, "{gpus}"),
        }
    }
}

impl DeviceSet {
    /// The CPU alone.
    pub fn cpu() -> Self {
        DeviceSet {
            cpu: true,
            gpus: GpuSelection::None,
        }
    }

    /// Opens one worker per device (per ordinal occurrence for GPUs), GPUs first in the
    /// order named, the CPU last. `cpu+all` where no GPU is usable opens the CPU alone (with a
    /// warning); `all` or an ordinal that cannot be opened is an error.
    pub fn open(&self, config: &Config) -> Result<Vec<Worker>> {
        let mut workers = Vec::new();
        let ordinals: Vec<usize> = match &self.gpus {
            GpuSelection::None => Vec::new(),
            GpuSelection::Ordinals(v) => v.clone(),
            GpuSelection::All => match kiln_cuda::discovery::probe() {
                Ok(p) => p.devices.iter().map(|d| d.desc.ordinal).collect(),
                Err(e) if self.cpu && !e.is_sticky() => {
                    tracing::warn!("devices {self}: no GPU usable ({e}); the CPU works alone");
                    Vec::new()
                }
                Err(e) => return Err(e),
            },
        };
        let mut opened: Vec<(usize, Arc<Runtime>)> = Vec::new();
        for (idx, &o) in ordinals.iter().enumerate() {
            let rt = match opened.iter().find(|(k, _)| *k == o) {
                Some((_, rt)) => rt.clone(),
                None => {
                    let rt = match Runtime::new(DeviceRequest::Cuda(Some(o)), config) {
                        Ok(rt) => Arc::new(rt),
                        // `all` skips the devices the policy rules out
                        Err(Error::NoDevice(NoDeviceReason::NotAllowed { .. }))
                        | Err(Error::NoDevice(NoDeviceReason::CapabilityTooLow { .. }))
                            if self.gpus == GpuSelection::All =>
                        {
                            continue
                        }
                        Err(e) => return Err(e),
                    };
                    opened.push((o, rt.clone()));
                    rt
                }
            };
            let lane = ordinals[..idx].iter().filter(|&&p| p == o).count();
            workers.push(Worker::on(rt, lane)?);
        }
        if self.gpus == GpuSelection::All && workers.is_empty() && !self.cpu {
            return Err(Error::NoDevice(NoDeviceReason::NoDevices));
        }
        if self.cpu {
            workers.push(Worker::cpu());
        }
        Ok(workers)
    }
}

/// One executor worker: a runtime (the CPU, or one GPU) and, on a GPU, the stream its
/// chunks run on. Several workers may share one GPU, each with its own stream.
#[derive(Debug, Clone)]
pub struct Worker {
    label: String,
    runtime: Arc<Runtime>,
    stream: Option<Stream>,
}

impl Worker {
    /// A CPU worker labelled `cpu`.
    pub fn cpu() -> Self {
        Worker::cpu_labelled("cpu")
    }

    /// A CPU worker with its own label (several CPU workers in one executor, as tests use).
    pub fn cpu_labelled(label: impl Into<String>) -> Self {
        Worker {
            label: label.into(),
            runtime: Arc::new(Runtime::cpu()),
            stream: None,
        }
    }

    /// A worker on `runtime`'s device. On a GPU it gets a stream of its own from the
    /// device's pool; `lane` (0, 1, ...) only labels it (`cuda:0`, `cuda:0/1`, ...).
    pub fn on(runtime: Arc<Runtime>, lane: usize) -> Result<Self> {
        let name = runtime.device_name();
        let label = if lane == 0 { name } else { format!("{name}/{lane}") };
        let stream = match runtime.cuda() {
            Some(_) => Some(runtime.stream()?),
            None => None,
        };
        Ok(Worker {
            label,
            runtime,
            stream,
        })
    }

    /// `cpu`, `cuda:0`, `cuda:0/1` (the second worker on GPU 0), or the label given.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The device this worker's throughput is calibrated under: `cpu` or `cuda:N`
    /// (workers sharing a device share its calibration).
    pub fn device_key(&self) -> String {
        self.runtime.device_name()
    }

    /// The runtime it drives.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Whether it is a GPU worker.
    pub fn is_gpu(&self) -> bool {
        self.runtime.cuda().is_some()
    }

    /// Runs `f` with the worker's stream current on this thread (so the ops `f` calls queue
    /// there) and waits for that stream, so the chunk is done when this returns.
    pub fn run<R>(&self, f: impl FnOnce(&Runtime) -> Result<R>) -> Result<R> {
        let rt = &*self.runtime;
        match &self.stream {
            Some(s) => rt.with_stream(s, || {
                let r = f(rt)?;
                if let Some(c) = rt.cuda() {
                    c.stream()
                        .synchronize()
                        .map_err(|e| kiln_cuda::cuda_err("cuStreamSynchronize", &rt.device_name(), e))?;
                }
                Ok(r)
            })?,
            None => f(rt),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_sets_parse_and_print() {
        let cases = [
            ("all", false, GpuSelection::All),
            ("cpu", true, GpuSelection::None),
            ("cpu+all", true, GpuSelection::All),
            ("0,1", false, GpuSelection::Ordinals(vec![0, 1])),
            ("0,0", false, GpuSelection::Ordinals(vec![0, 0])),
            ("CPU+cuda:2,3", true, GpuSelection::Ordinals(vec![2, 3])),
        ];
        for (text, cpu, gpus) in cases {
            let d: DeviceSet = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(d, DeviceSet { cpu, gpus }, "{text}");
            let again: DeviceSet = d.to_string().parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(again, d);
        }
        for text in ["", "cpu+", "cpux", "gpu", "0,,1", "0,-1", "all,0"] {
            let e = text.parse::<DeviceSet>();
            assert!(e.is_err(), "{text} parsed as {e:?}");
        }
    }

    #[test]
    fn cpu_sets_open_cpu_workers() {
        let w = DeviceSet::cpu()
            .open(&Config::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].label(), w[0].is_gpu()), ("cpu", false));
        assert_eq!(w[0].run(|rt| Ok(rt.device_name())).unwrap_or_default(), "cpu");
    }
}
