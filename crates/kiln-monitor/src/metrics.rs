//! The metrics registry and its OpenMetrics text exposition (prometheus-client).
//!
//! [`Metrics`] holds three groups: `kiln_gpu_*` (set from a [`Sample`], labelled `gpu`,
//! `uuid`, `model`; docs/monitoring.md maps each to its DCGM exporter counterpart), host and
//! process figures, and kiln's own figures ([`KilnMetrics`], filled by the crates that know
//! them: pool stats, kernel launches, compile cache, and the service's jobs). A field that a
//! sample lacks is removed from its family rather than exported stale.

use crate::sample::Sample;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The content type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type G = Family<GpuLabels, Gauge<f64, AtomicU64>>;
type C = Family<GpuLabels, Counter<f64, AtomicU64>>;

/// The labels of every `kiln_gpu_*` metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GpuLabels {
    /// NVML index.
    pub gpu: String,
    /// `GPU-...` UUID.
    pub uuid: String,
    /// Product name.
    pub model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    gpu: String,
    uuid: String,
    model: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProcessLabels {
    gpu: String,
    uuid: String,
    model: String,
    pid: String,
    process: String,
    kiln: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlertLabels {
    rule: String,
    gpu: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabels {
    device: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    op: String,
}

/// kiln's caching-pool figures for one device (what `kiln::memory::MemoryStats` holds;
/// copied here so that kiln-monitor does not depend on the CUDA backend).
#[derive(Clone, Copy, Debug, Default)]
pub struct PoolFigures {
    /// Bytes in blocks handed out.
    pub allocated_bytes: u64,
    /// Bytes in segments obtained from the device.
    pub reserved_bytes: u64,
    /// Peak of the allocated bytes.
    pub peak_allocated_bytes: u64,
    /// Allocations that failed for lack of memory, since the pool was made.
    pub ooms: u64,
}

/// kiln's own figures, filled by the crates that know them.
#[derive(Debug)]
pub struct KilnMetrics {
    pool_allocated: Family<DeviceLabels, Gauge>,
    pool_reserved: Family<DeviceLabels, Gauge>,
    pool_peak: Family<DeviceLabels, Gauge>,
    pool_ooms: Family<DeviceLabels, Counter>,
    launches: Family<DeviceLabels, Counter>,
    cache_hits: Counter,
    cache_misses: Counter,
    jobs: Family<StateLabels, Gauge>,
    job_latency: Family<OpLabels, Histogram>,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~65 s, doubling.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl KilnMetrics {
    fn new(reg: &mut Registry) -> Self {
        let m = KilnMetrics {
            pool_allocated: Family::default(),
            pool_reserved: Family::default(),
            pool_peak: Family::default(),
            pool_ooms: Family::default(),
            launches: Family::default(),
            cache_hits: Counter::default(),
            cache_misses: Counter::default(),
            jobs: Family::default(),
            job_latency: Family::new_with_constructor(latency_histogram),
        };
        let r = reg;
        r.register(
            "kiln_pool_allocated_bytes",
            "Bytes in pool blocks handed out",
            m.pool_allocated.clone(),
        );
        r.register(
            "kiln_pool_reserved_bytes",
            "Bytes the pool holds from the device",
            m.pool_reserved.clone(),
        );
        r.register(
            "kiln_pool_peak_allocated_bytes",
            "Peak of the pool's allocated bytes",
            m.pool_peak.clone(),
        );
        r.register(
            "kiln_pool_ooms",
            "Pool allocations that failed for lack of memory",
            m.pool_ooms.clone(),
        );
        r.register("kiln_kernel_launches", "Kernel launches", m.launches.clone());
        r.register(
            "kiln_compile_cache_hits",
            "Kernels loaded from the on-disk cubin cache",
            m.cache_hits.clone(),
        );
        r.register(
            "kiln_compile_cache_misses",
            "Kernels compiled by NVRTC",
            m.cache_misses.clone(),
        );
        r.register("kiln_jobs", "Jobs by state", m.jobs.clone());
        r.register(
            "kiln_job_latency_seconds",
            "Job latency from submission to result",
            m.job_latency.clone(),
        );
        m
    }

    /// Set one device's pool figures (`device` as kiln names it, e.g. `cuda:0`).
    pub fn set_pool(&self, device: &str, f: &PoolFigures) {
        let l = DeviceLabels {
            device: device.to_string(),
        };
        let g = |v: u64| v.min(i64::MAX as u64) as i64;
        self.pool_allocated.get_or_create(&l).set(g(f.allocated_bytes));
        self.pool_reserved.get_or_create(&l).set(g(f.reserved_bytes));
        self.pool_peak.get_or_create(&l).set(g(f.peak_allocated_bytes));
        self.pool_ooms
            .get_or_create(&l)
            .inner()
            .store(f.ooms, Ordering::Relaxed);
    }

    /// Count `n` kernel launches on `device`.
    pub fn kernel_launches(&self, device: &str, n: u64) {
        let l = DeviceLabels {
            device: device.to_string(),
        };
        self.launches.get_or_create(&l).inc_by(n);
    }

    /// Count one kernel lookup in the compile cache: a hit (cubin loaded) or a miss (NVRTC).
    pub fn compile_cache(&self, hit: bool) {
        if hit {
            self.cache_hits.inc()
        } else {
            self.cache_misses.inc()
        };
    }

    /// Set the number of jobs in `state` (queued, running, done, failed, ...).
    pub fn set_jobs(&self, state: &str, n: i64) {
        self.jobs
            .get_or_create(&StateLabels {
                state: state.to_string(),
            })
            .set(n);
    }

    /// Stop exporting `kiln_jobs` (a service node that is not the elected exporter of
    /// queue-wide figures).
    pub fn clear_jobs(&self) {
        self.jobs.clear();
    }

    /// Record one job's latency, seconds, under its operation name.
    pub fn observe_job_latency(&self, op: &str, seconds: f64) {
        self.job_latency
            .get_or_create(&OpLabels { op: op.to_string() })
            .observe(seconds);
    }
}

struct GpuFamilies {
    util: G,
    mem_util: G,
    mem_used: G,
    mem_free: G,
    mem_total: G,
    temp: G,
    power: G,
    power_limit: G,
    energy: C,
    sm_clock: G,
    mem_clock: G,
    throttle_mask: G,
    throttle_active: Family<ReasonLabels, Gauge>,
    ecc_corrected: C,
    ecc_uncorrected: C,
    pcie_tx: G,
    pcie_rx: G,
    xid: C,
    last_xid: G,
    process_mem: Family<ProcessLabels, Gauge<f64, AtomicU64>>,
}

/// Every metric kiln exports, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    gpu: GpuFamilies,
    rss: Gauge,
    cpu_seconds: Counter<f64, AtomicU64>,
    host_total: Gauge,
    host_available: Gauge,
    nvml_available: Gauge,
    alert_active: Family<AlertLabels, Gauge>,
    kiln: KilnMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The `(name, type)` of every `kiln_gpu_*` family as exposed (counters with their
/// `_total` suffix). docs/monitoring.md has one row per entry.
pub const GPU_METRICS: &[(&str, &str)] = &[
    ("kiln_gpu_utilization_percent", "gauge"),
    ("kiln_gpu_memory_utilization_percent", "gauge"),
    ("kiln_gpu_memory_used_bytes", "gauge"),
    ("kiln_gpu_memory_free_bytes", "gauge"),
    ("kiln_gpu_memory_total_bytes", "gauge"),
    ("kiln_gpu_temperature_celsius", "gauge"),
    ("kiln_gpu_power_usage_watts", "gauge"),
    ("kiln_gpu_power_limit_watts", "gauge"),
    ("kiln_gpu_energy_joules_total", "counter"),
    ("kiln_gpu_sm_clock_mhz", "gauge"),
    ("kiln_gpu_memory_clock_mhz", "gauge"),
    ("kiln_gpu_clock_throttle_reasons", "gauge"),
    ("kiln_gpu_clock_throttle_active", "gauge"),
    ("kiln_gpu_ecc_corrected_errors_total", "counter"),
    ("kiln_gpu_ecc_uncorrected_errors_total", "counter"),
    ("kiln_gpu_pcie_tx_bytes_per_second", "gauge"),
    ("kiln_gpu_pcie_rx_bytes_per_second", "gauge"),
    ("kiln_gpu_xid_errors_total", "counter"),
    ("kiln_gpu_last_xid", "gauge"),
    ("kiln_gpu_process_memory_bytes", "gauge"),
];

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry (tests, or a second exporter); most code uses [`global`].
    pub fn new() -> Metrics {
        let mut r = Registry::default();
        let gpu = GpuFamilies {
            util: G::default(),
            mem_util: G::default(),
            mem_used: G::default(),
            mem_free: G::default(),
            mem_total: G::default(),
            temp: G::default(),
            power: G::default(),
            power_limit: G::default(),
            energy: C::default(),
            sm_clock: G::default(),
            mem_clock: G::default(),
            throttle_mask: G::default(),
            throttle_active: Family::default(),
            ecc_corrected: C::default(),
            ecc_uncorrected: C::default(),
            pcie_tx: G::default(),
            pcie_rx: G::default(),
            xid: C::default(),
            last_xid: G::default(),
            process_mem: Family::default(),
        };
        r.register(
            "kiln_gpu_utilization_percent",
            "GPU utilization (percent of time a kernel ran)",
            gpu.util.clone(),
        );
        r.register(
            "kiln_gpu_memory_utilization_percent",
            "Memory controller utilization, percent",
            gpu.mem_util.clone(),
        );
        r.register(
            "kiln_gpu_memory_used_bytes",
            "Framebuffer memory used",
            gpu.mem_used.clone(),
        );
        r.register(
            "kiln_gpu_memory_free_bytes",
            "Framebuffer memory free",
            gpu.mem_free.clone(),
        );
        r.register(
            "kiln_gpu_memory_total_bytes",
            "Framebuffer memory in total",
            gpu.mem_total.clone(),
        );
        r.register(
            "kiln_gpu_temperature_celsius",
            "GPU temperature",
            gpu.temp.clone(),
        );
        r.register("kiln_gpu_power_usage_watts", "Power draw", gpu.power.clone());
        r.register(
            "kiln_gpu_power_limit_watts",
            "Enforced power limit",
            gpu.power_limit.clone(),
        );
        r.register(
            "kiln_gpu_energy_joules",
            "Energy used since the driver loaded",
            gpu.energy.clone(),
        );
        r.register("kiln_gpu_sm_clock_mhz", "SM clock", gpu.sm_clock.clone());
        r.register("kiln_gpu_memory_clock_mhz", "Memory clock", gpu.mem_clock.clone());
        r.register(
            "kiln_gpu_clock_throttle_reasons",
            "Clock throttle reasons (NVML bitmask)",
            gpu.throttle_mask.clone(),
        );
        r.register(
            "kiln_gpu_clock_throttle_active",
            "1 for each clock throttle reason active now",
            gpu.throttle_active.clone(),
        );
        r.register(
            "kiln_gpu_ecc_corrected_errors",
            "Corrected ECC errors since the driver loaded",
            gpu.ecc_corrected.clone(),
        );
        r.register(
            "kiln_gpu_ecc_uncorrected_errors",
            "Uncorrected ECC errors since the driver loaded",
            gpu.ecc_uncorrected.clone(),
        );
        r.register(
            "kiln_gpu_pcie_tx_bytes_per_second",
            "PCIe transmit throughput",
            gpu.pcie_tx.clone(),
        );
        r.register(
            "kiln_gpu_pcie_rx_bytes_per_second",
            "PCIe receive throughput",
            gpu.pcie_rx.clone(),
        );
        r.register(
            "kiln_gpu_xid_errors",
            "Critical Xid events seen by this exporter (present where NVML's event set watches the GPU)",
            gpu.xid.clone(),
        );
        r.register(
            "kiln_gpu_last_xid",
            "Code of the last critical Xid seen, 0 for none (DCGM_FI_DEV_XID_ERRORS)",
            gpu.last_xid.clone(),
        );
        r.register(
            "kiln_gpu_process_memory_bytes",
            "Device memory each process holds",
            gpu.process_mem.clone(),
        );
        let m = Metrics {
            gpu,
            rss: Gauge::default(),
            cpu_seconds: Counter::default(),
            host_total: Gauge::default(),
            host_available: Gauge::default(),
            nvml_available: Gauge::default(),
            alert_active: Family::default(),
            kiln: KilnMetrics::new(&mut r),
            registry: Registry::default(),
        };
        r.register(
            "kiln_process_resident_memory_bytes",
            "This process's resident set size",
            m.rss.clone(),
        );
        r.register(
            "kiln_process_cpu_seconds",
            "CPU time this process has used",
            m.cpu_seconds.clone(),
        );
        r.register(
            "kiln_host_memory_total_bytes",
            "Host memory",
            m.host_total.clone(),
        );
        r.register(
            "kiln_host_memory_available_bytes",
            "Host memory available",
            m.host_available.clone(),
        );
        r.register(
            "kiln_nvml_available",
            "1 where NVML answered",
            m.nvml_available.clone(),
        );
        r.register(
            "kiln_alert_active",
            "1 while an alert rule fires for a GPU",
            m.alert_active.clone(),
        );
        Metrics { registry: r, ..m }
    }

    /// kiln's own figures.
    pub fn kiln(&self) -> &KilnMetrics {
        &self.kiln
    }

    /// Set one alert's state (see [`crate::alert`]).
    pub fn set_alert(&self, rule: &str, gpu: &str, active: bool) {
        let l = AlertLabels {
            rule: rule.to_string(),
            gpu: gpu.to_string(),
        };
        self.alert_active.get_or_create(&l).set(i64::from(active));
    }

    /// Update every host and GPU figure from a sample.
    pub fn update(&self, s: &Sample) {
        let h = &s.host;
        let i = |v: Option<u64>| v.map(|v| v.min(i64::MAX as u64) as i64).unwrap_or(0);
        self.rss.set(i(h.process_rss_bytes));
        if let Some(c) = h.process_cpu_seconds {
            self.cpu_seconds.inner().store(c.to_bits(), Ordering::Relaxed);
        }
        self.host_total.set(i(h.memory_total_bytes));
        self.host_available.set(i(h.memory_available_bytes));
        self.nvml_available.set(i64::from(s.nvml.available));
        let g = &self.gpu;
        // Sets that change from tick to tick: rebuilt each time.
        g.throttle_active.clear();
        g.process_mem.clear();
        for d in &s.gpus {
            let l = GpuLabels {
                gpu: d.index.to_string(),
                uuid: d.uuid.clone(),
                model: d.model.clone(),
            };
            let f = |v: Option<u32>| v.map(f64::from);
            let b = |v: Option<u64>| v.map(|v| v as f64);
            gauge(&g.util, &l, f(d.gpu_util_percent));
            gauge(&g.mem_util, &l, f(d.mem_util_percent));
            gauge(&g.mem_used, &l, b(d.memory_used_bytes));
            gauge(&g.mem_free, &l, b(d.memory_free_bytes));
            gauge(&g.mem_total, &l, b(d.memory_total_bytes));
            gauge(&g.temp, &l, f(d.temperature_c));
            gauge(&g.power, &l, d.power_w);
            gauge(&g.power_limit, &l, d.power_limit_w);
            counter(&g.energy, &l, d.energy_j);
            gauge(&g.sm_clock, &l, f(d.sm_clock_mhz));
            gauge(&g.mem_clock, &l, f(d.mem_clock_mhz));
            gauge(&g.throttle_mask, &l, b(d.throttle_mask));
            // Every reason NVML can name, 1 when active and 0 otherwise (where the device
            // reports the mask), so the family exists in every scrape: the H200's idle scrape
            // had none while it listed only active reasons.
            if d.throttle_mask.is_some() {
                let all = nvml_wrapper::bitmasks::device::ThrottleReasons::all();
                for (name, _) in all.iter_names() {
                    let reason = name.to_ascii_lowercase();
                    let on = d.throttle_reasons.contains(&reason);
                    let rl = ReasonLabels {
                        gpu: l.gpu.clone(),
                        uuid: l.uuid.clone(),
                        model: l.model.clone(),
                        reason,
                    };
                    g.throttle_active.get_or_create(&rl).set(i64::from(on));
                }
            }
            for r in &d.throttle_reasons {
                let rl = ReasonLabels {
                    gpu: l.gpu.clone(),
                    uuid: l.uuid.clone(),
                    model: l.model.clone(),
                    reason: r.clone(),
                };
                g.throttle_active.get_or_create(&rl).set(1);
            }
            counter(&g.ecc_corrected, &l, b(d.ecc_corrected));
            counter(&g.ecc_uncorrected, &l, b(d.ecc_uncorrected));
            gauge(&g.pcie_tx, &l, f(d.pcie_tx_kbps).map(|k| k * 1e3));
            gauge(&g.pcie_rx, &l, f(d.pcie_rx_kbps).map(|k| k * 1e3));
            let watched = d.xid_watched || !d.xid_counts.is_empty();
            counter(&g.xid, &l, watched.then(|| d.xid_total() as f64));
            gauge(&g.last_xid, &l, watched.then(|| d.last_xid.unwrap_or(0) as f64));
            for p in &d.processes {
                let pl = ProcessLabels {
                    gpu: l.gpu.clone(),
                    uuid: l.uuid.clone(),
                    model: l.model.clone(),
                    pid: p.pid.to_string(),
                    process: p.name.clone().unwrap_or_default(),
                    kiln: p.kiln.to_string(),
                };
                g.process_mem
                    .get_or_create(&pl)
                    .set(p.used_memory_bytes.unwrap_or(0) as f64);
            }
        }
    }

    /// The OpenMetrics text exposition (serve with [`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!("metrics encoding failed: {e}");
        }
        out
    }
}

fn gauge(f: &G, l: &GpuLabels, v: Option<f64>) {
    match v {
        Some(v) => {
            f.get_or_create(l).set(v);
        }
        None => {
            f.remove(l);
        }
    }
}

fn counter(f: &C, l: &GpuLabels, v: Option<f64>) {
    match v {
        Some(v) => f.get_or_create(l).inner().store(v.to_bits(), Ordering::Relaxed),
        None => {
            f.remove(l);
        }
    }
}

/// The process-wide registry: what `kiln monitor --listen` serves and other crates fill.
pub fn global() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(Metrics::new)
}
