//! The `kiln bench --json` document (documented field by field in docs/bench-schema.md).
//! Bump [`SCHEMA_VERSION`] on any change that renames, removes or re-means a field; adding
//! an optional field keeps the version.

use kiln::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The schema version this binary writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// One `kiln bench` run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// `kiln --version` of the writer.
    pub kiln_version: String,
    /// The git commit the writer was built from (`-dirty` suffix for a modified tree,
    /// `unknown` outside git).
    pub git_commit: String,
    /// Seconds since the Unix epoch when the run started.
    pub created_unix: u64,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// The device's name (`NVIDIA H200`, or the CPU model).
    pub device_name: String,
    /// The host.
    pub host: Host,
    /// `quick` or `full`.
    pub sizes: String,
    /// The suites that ran, in order.
    pub suites: Vec<String>,
    /// How times were taken: `cuda-events` or `wall-clock`.
    pub timing: String,
    /// Whether every planned case ran (false: the run stopped at an error, see `error`).
    pub complete: bool,
    /// The error that stopped the run, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The hardware ceilings, measured first.
    pub ceilings: Vec<Ceiling>,
    /// One row per workload and size.
    pub results: Vec<BenchResult>,
    /// kiln against the peers (`--peers`), one row per matched (workload, peer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerComparison>,
}

/// The host a run was taken on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Host {
    /// `linux`, ...
    pub os: String,
    /// `x86_64`, ...
    pub arch: String,
    /// Threads the CPU backend uses.
    pub cpu_threads: usize,
}

/// A measured hardware ceiling.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ceiling {
    /// `device_copy`, `h2d_pinned`, `host_copy`, ...
    pub name: String,
    /// What was measured, in words.
    pub what: String,
    /// Bytes counted per run (read + write for copies within one memory).
    pub bytes: f64,
    /// Median milliseconds.
    pub median_ms: f64,
    /// 10th percentile milliseconds.
    pub p10_ms: f64,
    /// 90th percentile milliseconds.
    pub p90_ms: f64,
    /// Bandwidth at the median, in GB/s (10^9 bytes per second).
    #[serde(rename = "GBps", default, skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// Arithmetic rate at the median, in TFLOP/s.
    #[serde(rename = "TFLOPs", default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// Whether the copy's result was checked.
    pub verified: bool,
}

/// One workload at one size.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchResult {
    /// The suite (`elementwise`, `transpose`, `imaging`, `finance`, `memory`, ...).
    pub suite: String,
    /// The workload, e.g. `sigmoid_f32`; with `size`, the key the regression gate matches.
    pub workload: String,
    /// The size, e.g. `2^28` or `16384x16384`.
    pub size: String,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// The device's name.
    pub device_name: String,
    /// The size's parameters (`n`, `h`, `w`, `paths`, `steps`, `options`, ...); the peers'
    /// rows are matched on the ones they share.
    pub params: BTreeMap<String, u64>,
    /// Bytes the floor is computed from (the minimum the workload must move).
    pub bytes: f64,
    /// Useful floating-point operations per run (0 where not meaningful).
    pub flops: f64,
    /// Untimed runs before timing.
    pub warmup: u32,
    /// Timed runs.
    pub reps: u32,
    /// Median milliseconds per run.
    pub median_ms: f64,
    /// 10th percentile.
    pub p10_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// Fastest run.
    pub min_ms: f64,
    /// `bytes` at the ceiling named by `floor_basis`, in ms (`null`: no meaningful floor).
    pub floor_ms: Option<f64>,
    /// The ceiling the floor uses.
    pub floor_basis: Option<String>,
    /// `floor_ms / median_ms` (1.0 = at the ceiling).
    pub efficiency: Option<f64>,
    /// `bytes / median`, GB/s.
    #[serde(rename = "GBps")]
    pub gbps: Option<f64>,
    /// `flops / median`, TFLOP/s.
    #[serde(rename = "TFLOPs")]
    pub tflops: Option<f64>,
    /// A workload-specific rate at the median (e.g. path-steps per second).
    pub rate: Option<f64>,
    /// Its unit.
    pub rate_unit: Option<String>,
    /// Whether the output was checked against the reference before timing, and passed.
    pub verified: bool,
    /// What was checked, with the measured error.
    pub check: String,
    /// The kernels the timed run launches (`extern "C"` names; empty on the CPU).
    pub kernels: Vec<String>,
    /// The name `peer_bench.py` gives the same workload at the same size.
    pub peer_workload: Option<String>,
    /// Anything else worth knowing about the row.
    pub note: String,
}

/// kiln against one peer on one workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeerComparison {
    /// kiln's workload.
    pub workload: String,
    /// kiln's size.
    pub size: String,
    /// The peer's workload name.
    pub peer_workload: String,
    /// The peer (`torch`, `cupy-elementwise`, ...).
    pub peer: String,
    /// The peer's milliseconds.
    pub peer_ms: f64,
    /// kiln's median milliseconds.
    pub kiln_ms: f64,
    /// `kiln_ms / peer_ms` (< 1: kiln is faster).
    pub ratio: f64,
}

impl Report {
    /// The result for `(workload, size)`.
    pub fn find(&self, workload: &str, size: &str) -> Option<&BenchResult> {
        self.results
            .iter()
            .find(|r| r.workload == workload && r.size == size)
    }
}

fn bad(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::invalid("bench", format!("{}: {why}", path.display()))
}

/// Read and validate a report written by `kiln bench --json`: the JSON must parse into the
/// schema, carry this binary's schema version, and hold finite, positive times.
pub fn load(path: &Path) -> Result<Report> {
    let text = std::fs::read_to_string(path).map_err(|e| bad(path, format!("cannot read: {e}")))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(path, format!("not JSON: {e}")))?;
    match v.get("schema_version").and_then(|s| s.as_u64()) {
        Some(n) if n == u64::from(SCHEMA_VERSION) => {}
        Some(n) => {
            return Err(bad(
                path,
                format!("schema_version {n}, this kiln reads {SCHEMA_VERSION}"),
            ))
        }
        None => return Err(bad(path, "no schema_version: not a `kiln bench --json` report")),
    }
    let r: Report =
        serde_json::from_value(v).map_err(|e| bad(path, format!("does not match the bench schema: {e}")))?;
    for x in &r.results {
        for (name, t) in [
            ("median_ms", x.median_ms),
            ("p10_ms", x.p10_ms),
            ("p90_ms", x.p90_ms),
        ] {
            if !(t.is_finite() && t > 0.0) {
                return Err(bad(
                    path,
                    format!("{} {}: {name} = {t} is not a positive time", x.workload, x.size),
                ));
            }
        }
    }
    Ok(r)
}

/// `r` as the pretty JSON that [`save`] writes (without the final newline).
pub fn to_json(r: &Report) -> crate::Result<String> {
    Ok(serde_json::to_string_pretty(r)?)
}

/// Write `r` as pretty JSON and a newline to the file `path`, creating its folder.
pub fn save(r: &Report, path: &Path) -> crate::Result<()> {
    crate::error::write_file(path, &(to_json(r)? + "\n"))
}
