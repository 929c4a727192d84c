//! The profiler: named ranges timed with CUDA events on their stream (or the host clock for
//! host work), aggregated per (name, stream), and mirrored as NVTX ranges so that Nsight
//! Systems shows them on its timeline.
//!
//! - Off by default: a range then costs one atomic load. `KILN_PROFILE=1` (or `json`)
//!   turns it on at first use; [`Profiler::set_enabled`] does so from code.
//! - Device ranges record an event at the start and at the end on the range's stream;
//!   nothing waits for them until [`Profiler::report`], which resolves every pending pair.
//!   The times are therefore GPU time between the two points of the stream (queueing gaps
//!   included), not host time.
//! - NVTX ranges are emitted while profiling is on, or whenever an NVTX tool is injected
//!   (`NVTX_INJECTION64_PATH`, set by `nsys profile`); without a tool NVTX calls are no-ops.
//! - Ranges opened during a graph capture are not timed (an event recorded into a capture
//!   becomes a graph node, not a timestamp).
//!
//! Written by hand: no crate times CUDA-event ranges; the NVTX calls go through `nvtx`.

use crate::CudaBackend;
use cudarc::driver::{sys, CudaEvent, CudaStream};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Pending device ranges kept before the completed ones are folded into the samples.
const FOLD_AT: usize = 4096;

/// The process-wide profiler.
pub struct Profiler {
    enabled: AtomicBool,
    nvtx_tool: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    pending: Vec<Pending>,
    samples: BTreeMap<(String, String), Vec<f64>>,
    errors: u64,
}

struct Pending {
    name: String,
    on: String,
    start: CudaEvent,
    end: CudaEvent,
}

/// The process-wide profiler, configured from `KILN_PROFILE` on first use.
pub fn profiler() -> &'static Profiler {
    static P: OnceLock<Profiler> = OnceLock::new();
    P.get_or_init(|| Profiler {
        enabled: AtomicBool::new(env_mode().is_some()),
        nvtx_tool: std::env::var_os("NVTX_INJECTION64_PATH").is_some(),
        state: Mutex::new(State::default()),
    })
}

/// How `KILN_PROFILE` asks for the report: `Some(false)` a table, `Some(true)` JSON, `None`
/// off (unset, empty or `0`).
pub fn env_mode() -> Option<bool> {
    match std::env::var("KILN_PROFILE").ok()?.trim() {
        "" | "0" | "off" | "false" => None,
        "json" => Some(true),
        _ => Some(false),
    }
}

/// An open range; timing ends when it is dropped.
#[must_use = "a range measures until it is dropped"]
pub struct Range {
    kind: Kind,
    nvtx: Option<i32>,
}

enum Kind {
    Off,
    Host {
        name: String,
        t0: Instant,
    },
    Device {
        name: String,
        on: String,
        stream: Arc<CudaStream>,
        start: CudaEvent,
    },
}

impl Profiler {
    /// Whether ranges are being timed.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Turn timing on or off (ranges already open finish as they began).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    fn nvtx_on(&self) -> bool {
        self.nvtx_tool || self.is_enabled()
    }

    fn nvtx_start(&self, name: &str) -> Option<i32> {
        // NVTX takes C strings: a NUL inside a name would be refused, so it is replaced
        self.nvtx_on()
            .then(|| nvtx::range_start!("{}", name.replace('\0', " ")))
    }

    /// A range timed on the host clock, for host work (the CPU backend, transfers seen from
    /// the host).
    pub fn host_range(&self, name: &str) -> Range {
        let nvtx = self.nvtx_start(name);
        let kind = if self.is_enabled() {
            Kind::Host {
                name: name.to_string(),
                t0: Instant::now(),
            }
        } else {
            Kind::Off
        };
        Range { kind, nvtx }
    }

    /// A range timed by CUDA events on `stream`, reported under the label `on`.
    pub fn device_range(&self, name: &str, on: &str, stream: &Arc<CudaStream>) -> Range {
        let nvtx = self.nvtx_start(name);
        if !self.is_enabled() || capturing(stream) {
            return Range {
                kind: Kind::Off,
                nvtx,
            };
        }
        let kind = match stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)) {
            Ok(start) => Kind::Device {
                name: name.to_string(),
                on: on.to_string(),
                stream: stream.clone(),
                start,
            },
            Err(e) => {
                tracing::warn!("profiler: cannot record an event for {name}: {e:?}");
                self.lock().errors += 1;
                Kind::Off
            }
        };
        Range { kind, nvtx }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // samples are appended in single steps; a poisoned lock still holds consistent data
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every range so far, aggregated. Waits for the device ranges still pending.
    pub fn report(&self) -> Report {
        let mut st = self.lock();
        fold(&mut st, true);
        let ranges = st
            .samples
            .iter()
            .map(|((name, on), v)| RangeStats::new(name, on, v))
            .collect();
        Report {
            ranges,
            errors: st.errors,
        }
    }

    /// Forget every sample (pending device ranges are waited for and dropped).
    pub fn reset(&self) {
        let mut st = self.lock();
        fold(&mut st, true);
        st.samples.clear();
        st.errors = 0;
    }
}

fn capturing(stream: &CudaStream) -> bool {
    !matches!(
        stream.capture_status(),
        Ok(sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    )
}

/// Move finished device ranges into the samples (all of them, waiting, when `wait`).
fn fold(st: &mut State, wait: bool) {
    let mut keep = Vec::new();
    for p in std::mem::take(&mut st.pending) {
        if !wait && !p.end.is_complete() {
            keep.push(p);
            continue;
        }
        match p.end.synchronize().and_then(|_| p.start.elapsed_ms(&p.end)) {
            Ok(ms) => st.samples.entry((p.name, p.on)).or_default().push(ms as f64),
            Err(e) => {
                tracing::warn!("profiler: range {} could not be timed: {e:?}", p.name);
                st.errors += 1;
            }
        }
    }
    st.pending = keep;
}

impl Drop for Range {
    fn drop(&mut self) {
        if let Some(id) = self.nvtx.take() {
            nvtx::range_end!(id);
        }
        let p = profiler();
        match std::mem::replace(&mut self.kind, Kind::Off) {
            Kind::Off => {}
            Kind::Host { name, t0 } => {
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                p.lock()
                    .samples
                    .entry((name, "host".into()))
                    .or_default()
                    .push(ms);
            }
            Kind::Device {
                name,
                on,
                stream,
                start,
            } => match stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)) {
                Ok(end) => {
                    let mut st = p.lock();
                    st.pending.push(Pending { name, on, start, end });
                    if st.pending.len() >= FOLD_AT {
                        fold(&mut st, false);
                    }
                }
                Err(e) => {
                    tracing::warn!("profiler: cannot end range {name}: {e:?}");
                    p.lock().errors += 1;
                }
            },
        }
    }
}

/// One (name, stream) row of the report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RangeStats {
    /// The range's name.
    pub name: String,
    /// Where it was timed: `cuda:N/main`, a pipeline stream, or `host`.
    pub on: String,
    /// Ranges closed.
    pub count: usize,
    /// Sum of their milliseconds.
    pub total_ms: f64,
    /// Mean milliseconds.
    pub mean_ms: f64,
    /// Median milliseconds.
    pub median_ms: f64,
    /// Shortest.
    pub min_ms: f64,
    /// Longest.
    pub max_ms: f64,
}

impl RangeStats {
    fn new(name: &str, on: &str, v: &[f64]) -> Self {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let total: f64 = s.iter().sum();
        let n = s.len().max(1);
        let median = if s.is_empty() {
            0.0
        } else if s.len() % 2 == 1 {
            s[s.len() / 2]
        } else {
            (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
        };
        RangeStats {
            name: name.into(),
            on: on.into(),
            count: s.len(),
            total_ms: total,
            mean_ms: total / n as f64,
            median_ms: median,
            min_ms: s.first().copied().unwrap_or(0.0),
            max_ms: s.last().copied().unwrap_or(0.0),
        }
    }
}

/// The aggregated ranges, largest total first when printed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// One row per (name, stream).
    pub ranges: Vec<RangeStats>,
    /// Ranges that could not be timed (event failures).
    pub errors: u64,
}

impl Report {
    /// The row for `name` on `on`, if any.
    pub fn get(&self, name: &str, on: &str) -> Option<&RangeStats> {
        self.ranges.iter().find(|r| r.name == name && r.on == on)
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut rows = self.ranges.clone();
        rows.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
        writeln!(
            f,
            "kiln profile (device ranges: CUDA events on their stream; host ranges: wall clock)"
        )?;
        writeln!(
            f,
            "{:<32} {:<14} {:>7} {:>11} {:>10} {:>10} {:>10} {:>10}",
            "range", "on", "count", "total ms", "mean ms", "median ms", "min ms", "max ms"
        )?;
        for r in &rows {
            writeln!(
                f,
                "{:<32} {:<14} {:>7} {:>11.3} {:>10.4} {:>10.4} {:>10.4} {:>10.4}",
                r.name, r.on, r.count, r.total_ms, r.mean_ms, r.median_ms, r.min_ms, r.max_ms
            )?;
        }
        if rows.is_empty() {
            writeln!(f, "(no ranges recorded)")?;
        }
        if self.errors > 0 {
            writeln!(f, "{} ranges could not be timed (see the log)", self.errors)?;
        }
        Ok(())
    }
}

impl CudaBackend {
    /// A profiler range on kiln's stream (`cuda:N/main`).
    pub fn range(&self, name: &str) -> Range {
        let p = profiler();
        if !p.is_enabled() && !p.nvtx_on() {
            return Range {
                kind: Kind::Off,
                nvtx: None,
            };
        }
        p.device_range(
            name,
            &format!("cuda:{}/main", self.info().desc.ordinal),
            self.stream(),
        )
    }

    /// A profiler range on `stream`: kiln's own (`cuda:N/main`) or another one, labelled by
    /// its handle (`cuda:N/s<hex>`; pipelines run on a few such streams).
    pub fn range_on(&self, name: &str, stream: &Arc<CudaStream>) -> Range {
        if stream.cu_stream() == self.stream().cu_stream() {
            return self.range(name);
        }
        let p = profiler();
        if !p.is_enabled() && !p.nvtx_on() {
            return Range {
                kind: Kind::Off,
                nvtx: None,
            };
        }
        let on = format!(
            "cuda:{}/s{:x}",
            self.info().desc.ordinal,
            stream.cu_stream() as usize & 0xffff
        );
        p.device_range(name, &on, stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_a_sample() {
        let r = RangeStats::new("x", "host", &[3.0, 1.0, 2.0, 10.0]);
        assert_eq!(r.count, 4);
        assert_eq!(r.total_ms, 16.0);
        assert_eq!(r.mean_ms, 4.0);
        assert_eq!(r.median_ms, 2.5);
        assert_eq!((r.min_ms, r.max_ms), (1.0, 10.0));
    }

    #[test]
    fn host_ranges_are_counted_only_while_enabled() {
        let p = profiler();
        p.set_enabled(true);
        for _ in 0..3 {
            let _r = p.host_range("unit-test-range");
        }
        p.set_enabled(false);
        drop(p.host_range("unit-test-range"));
        let rep = p.report();
        let row = rep.get("unit-test-range", "host").expect("row");
        assert_eq!(row.count, 3);
        assert!(row.min_ms >= 0.0 && row.max_ms >= row.min_ms);
        let shown = rep.to_string();
        assert!(shown.contains("unit-test-range"), "{shown}");
        let json = serde_json::to_value(&rep).expect("json");
        assert!(json["ranges"].as_array().is_some_and(|a| !a.is_empty()));
    }
}
