//! The measuring machinery every suite shares: the device context, planned cases, timing
//! (CUDA events on a GPU, `Instant` on the CPU), percentiles, input rotation, and the turning
//! of a measurement into a report row with its floor and efficiency.

use crate::ceilings::Ceilings;
use crate::schema::BenchResult;
use kiln::device::CudaBackend;
use kiln::Runtime;
use kiln::{Error, Result};
use std::collections::BTreeMap;
use std::time::Instant;

/// The ceiling a workload's floor is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Floor {
    /// Device (or host, on the CPU) memory copy bandwidth: memory-bound kernels.
    Memory,
    /// Pinned host-to-device bandwidth: transfers.
    HostToDevice,
    /// No meaningful floor (latency- or compute-bound without a measured compute ceiling).
    None,
}

/// What running one case produced.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Milliseconds of each timed run.
    pub times_ms: Vec<f64>,
    /// Untimed runs.
    pub warmup: usize,
    /// Whether the output matched the reference.
    pub verified: bool,
    /// What was checked and the error.
    pub check: String,
    /// A workload-specific rate: (value per second at the median, unit).
    pub rate: Option<(f64, &'static str)>,
    /// Free text.
    pub note: String,
}

/// A case's run: set up, verify against the reference, time.
pub type RunFn = Box<dyn FnOnce(&Ctx) -> Result<Measured>>;

/// A planned case: metadata known up front (so the progress bar has a length) and the run
/// (set up, verify against the reference, time).
pub struct Case {
    /// What the row will say.
    pub meta: CaseMeta,
    /// Set up, verify, time.
    pub run: RunFn,
}

/// Build a parameter map from pairs.
pub fn params(p: &[(&str, u64)]) -> BTreeMap<String, u64> {
    p.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// What every case sees.
pub struct Ctx<'a> {
    /// The runtime (CPU or CUDA).
    pub rt: &'a Runtime,
    /// The CUDA backend when there is one.
    pub cuda: Option<&'a CudaBackend>,
    /// `full` sizes (else quick).
    pub full: bool,
    /// Untimed runs before timing.
    pub warmup: usize,
    /// Timed runs.
    pub reps: usize,
    /// Device L2 bytes (0 on the CPU): inputs smaller than twice this are rotated.
    pub l2_bytes: u64,
}

impl Ctx<'_> {
    /// Whether this is a GPU run.
    pub fn gpu(&self) -> bool {
        self.cuda.is_some()
    }

    /// How many copies of an input of `bytes` to rotate through so consecutive timed runs
    /// never find it in L2 (GPU only; at most 16).
    pub fn rotation(&self, bytes: u64) -> usize {
        if self.l2_bytes == 0 || bytes == 0 || bytes >= 2 * self.l2_bytes {
            1
        } else {
            ((2 * self.l2_bytes).div_ceil(bytes) as usize + 1).clamp(2, 16)
        }
    }

    /// Time `f(i)` (i counts runs from 0, for rotation) with the context's warm-up and reps.
    pub fn time(&self, f: impl FnMut(usize) -> Result<()>) -> Result<Vec<f64>> {
        self.time_n(self.warmup, self.reps, f)
    }

    /// Time with explicit warm-up and reps: CUDA events on kiln's stream on a GPU, wall
    /// clock on the CPU.
    pub fn time_n(
        &self,
        warmup: usize,
        reps: usize,
        mut f: impl FnMut(usize) -> Result<()>,
    ) -> Result<Vec<f64>> {
        let reps = reps.max(1);
        let mut i = 0usize;
        let mut next = move || {
            let r = f(i);
            i += 1;
            r
        };
        match self.cuda {
            Some(b) => b.time_ms(warmup, reps, next),
            None => {
                for _ in 0..warmup {
                    next()?;
                }
                let mut out = Vec::with_capacity(reps);
                for _ in 0..reps {
                    let t0 = Instant::now();
                    next()?;
                    out.push(t0.elapsed().as_secs_f64() * 1e3);
                }
                Ok(out)
            }
        }
    }

    /// Wall-clock timing of `f` on either device (host-side work, e.g. allocation), each
    /// sample `inner` calls long, reported per call.
    pub fn time_host(
        &self,
        reps: usize,
        inner: usize,
        mut f: impl FnMut() -> Result<()>,
    ) -> Result<Vec<f64>> {
        f()?;
        let inner = inner.max(1);
        let mut out = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) {
            let t0 = Instant::now();
            for _ in 0..inner {
                f()?;
            }
            out.push(t0.elapsed().as_secs_f64() * 1e3 / inner as f64);
        }
        Ok(out)
    }
}

/// The device's name: the GPU's marketing name, or the CPU model from /proc/cpuinfo.
pub fn device_name(rt: &Runtime) -> String {
    if let Some(b) = rt.cuda() {
        return b.info().desc.name.clone();
    }
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| format!("{} CPU", std::env::consts::ARCH))
}

/// Percentile `p` in [0, 1] of sorted samples, linearly interpolated.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let x = p.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (x - lo as f64)
}

/// (median, p10, p90, min) of the samples.
pub fn summarize(times: &[f64]) -> (f64, f64, f64, f64) {
    let mut s = times.to_vec();
    s.sort_by(f64::total_cmp);
    (
        percentile(&s, 0.5),
        percentile(&s, 0.1),
        percentile(&s, 0.9),
        s.first().copied().unwrap_or(f64::NAN),
    )
}

/// Turn a case's metadata and measurement into a report row.
pub fn finish_row(ctx: &Ctx, meta: CaseMeta, m: Measured, ceilings: &Ceilings) -> Result<BenchResult> {
    if m.times_ms.is_empty() || m.times_ms.iter().any(|t| !t.is_finite() || *t < 0.0) {
        return Err(Error::invalid(
            "bench",
            format!("{} {}: no valid timings", meta.workload, meta.size),
        ));
    }
    let (median, p10, p90, min) = summarize(&m.times_ms);
    // A run below the timer's resolution would read as 0: clamp to a nanosecond.
    let median = median.max(1e-6);
    let floor = ceilings.for_floor(meta.floor).filter(|_| meta.bytes > 0.0);
    let floor_ms = floor.map(|(g, _)| meta.bytes / g / 1e6);
    Ok(BenchResult {
        suite: meta.suite.into(),
        workload: meta.workload,
        size: meta.size,
        device: ctx.rt.device_name(),
        device_name: device_name(ctx.rt),
        params: meta.params,
        bytes: meta.bytes,
        flops: meta.flops,
        warmup: m.warmup as u32,
        reps: m.times_ms.len() as u32,
        median_ms: median,
        p10_ms: p10.max(1e-6),
        p90_ms: p90.max(1e-6),
        min_ms: min,
        floor_ms,
        floor_basis: floor.map(|(_, n)| n.to_string()),
        efficiency: floor_ms.map(|f| f / median),
        gbps: (meta.bytes > 0.0).then(|| meta.bytes / median / 1e6),
        tflops: (meta.flops > 0.0).then(|| meta.flops / median / 1e9),
        rate: m.rate.map(|(v, _)| v),
        rate_unit: m.rate.map(|(_, u)| u.to_string()),
        verified: m.verified,
        check: m.check,
        kernels: if ctx.gpu() {
            meta.kernels.iter().map(|s| s.to_string()).collect()
        } else {
            Vec::new()
        },
        peer_workload: meta.peer_workload,
        note: m.note,
    })
}

/// A case's metadata.
pub struct CaseMeta {
    /// Suite name.
    pub suite: &'static str,
    /// Workload name (with the size, the gate's key).
    pub workload: String,
    /// Size label.
    pub size: String,
    /// Size parameters (matched against the peers' rows).
    pub params: BTreeMap<String, u64>,
    /// Bytes the floor counts.
    pub bytes: f64,
    /// Useful flops per run.
    pub flops: f64,
    /// Which ceiling bounds it.
    pub floor: Floor,
    /// Kernels launched (GPU).
    pub kernels: Vec<&'static str>,
    /// `peer_bench.py`'s name for it at this size.
    pub peer_workload: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&s, 0.5), 3.0);
        assert_eq!(percentile(&s, 0.0), 1.0);
        assert_eq!(percentile(&s, 1.0), 5.0);
        assert!((percentile(&s, 0.1) - 1.4).abs() < 1e-12);
        let (m, p10, p90, min) = summarize(&[5.0, 1.0, 4.0, 2.0, 3.0]);
        assert_eq!((m, min), (3.0, 1.0));
        assert!(p10 < m && m < p90);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
