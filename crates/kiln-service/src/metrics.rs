//! The service's metrics. `/metrics` serves kiln-monitor's process-wide registry (pool,
//! launches, compile cache, `kiln_jobs` by state, `kiln_job_latency_seconds` by kind, which
//! the service fills) followed by this registry's families.
//!
//! Queue-wide figures (`kiln_jobs`, `kiln_service_queue_depth`, `kiln_service_jobs_running`,
//! `kiln_service_nodes`) describe the whole queue; with a store shared by many nodes only
//! the elected node exports them ([`ServiceMetrics::set_queue_exporter`]), so that sums
//! over nodes stay right. Everything else is per node.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindStateLabels {
    kind: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabels {
    worker: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabels {
    device: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    code: String,
}

/// The service's own metric families.
pub struct ServiceMetrics {
    registry: Registry,
    queue_registry: Registry,
    exporter: std::sync::atomic::AtomicBool,
    exporter_gauge: Gauge,
    nodes: Gauge,
    submitted: Family<KindLabels, Counter>,
    finished: Family<KindStateLabels, Counter>,
    expired: Family<KindLabels, Counter>,
    shards: Counter,
    queue_depth: Gauge,
    running: Gauge,
    workers_up: Gauge,
    restarts: Family<WorkerLabels, Counter>,
    device_faults: Family<DeviceLabels, Counter>,
    workers_faulted: Gauge,
    rejected: Family<ReasonLabels, Counter>,
    responses: Family<StatusLabels, Counter>,
    run_seconds: Family<KindLabels, Histogram>,
    queue_seconds: Family<KindLabels, Histogram>,
    batch_size: Histogram,
}

fn seconds() -> Histogram {
    // 0.5 ms .. ~33 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 17))
}

impl Default for ServiceMetrics {
    fn default() -> Self {
        let mut r = Registry::default();
        let mut q = Registry::default();
        let m = ServiceMetrics {
            registry: Registry::default(),
            queue_registry: Registry::default(),
            exporter: std::sync::atomic::AtomicBool::new(true),
            exporter_gauge: Gauge::default(),
            nodes: Gauge::default(),
            submitted: Family::default(),
            finished: Family::default(),
            expired: Family::default(),
            shards: Counter::default(),
            queue_depth: Gauge::default(),
            running: Gauge::default(),
            workers_up: Gauge::default(),
            restarts: Family::default(),
            device_faults: Family::default(),
            workers_faulted: Gauge::default(),
            rejected: Family::default(),
            responses: Family::default(),
            run_seconds: Family::new_with_constructor(seconds),
            queue_seconds: Family::new_with_constructor(seconds),
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
        };
        r.register(
            "kiln_service_jobs_submitted",
            "Jobs accepted (202), by kind",
            m.submitted.clone(),
        );
        r.register(
            "kiln_service_job_shards_created",
            "Shards stored for jobs split across the cluster (sharding.min_rows); each is also a job",
            m.shards.clone(),
        );
        r.register(
            "kiln_service_jobs_finished",
            "Jobs that reached a terminal state, by kind and state",
            m.finished.clone(),
        );
        r.register(
            "kiln_service_jobs_expired",
            "Jobs failed as `expired`: not started within their queue_timeout_s (also counted as finished, failed), by kind",
            m.expired.clone(),
        );
        q.register(
            "kiln_service_queue_depth",
            "Jobs queued (queue-wide; exported by one node)",
            m.queue_depth.clone(),
        );
        q.register(
            "kiln_service_jobs_running",
            "Jobs running on workers (queue-wide; exported by one node)",
            m.running.clone(),
        );
        q.register(
            "kiln_service_nodes",
            "Nodes with a recent heartbeat (queue-wide; exported by one node)",
            m.nodes.clone(),
        );
        r.register(
            "kiln_service_queue_exporter",
            "1 on the node that exports the queue-wide figures",
            m.exporter_gauge.clone(),
        );
        r.register(
            "kiln_service_workers_up",
            "Worker processes ready",
            m.workers_up.clone(),
        );
        r.register(
            "kiln_service_worker_restarts",
            "Worker processes replaced, by worker and reason",
            m.restarts.clone(),
        );
        r.register(
            "kiln_service_device_faults",
            "Worker processes ended by a device fault (sticky CUDA error), by device",
            m.device_faults.clone(),
        );
        r.register(
            "kiln_service_workers_faulted",
            "Worker slots whose worker ended by a device fault and is not back yet (readiness is 503 while above 0)",
            m.workers_faulted.clone(),
        );
        r.register(
            "kiln_service_rejected_requests",
            "Requests refused by a limit or auth, by reason",
            m.rejected.clone(),
        );
        r.register(
            "kiln_service_http_responses",
            "HTTP responses by status code",
            m.responses.clone(),
        );
        r.register(
            "kiln_service_job_run_seconds",
            "Time a job's batch took on its worker, by kind",
            m.run_seconds.clone(),
        );
        r.register(
            "kiln_service_job_queue_seconds",
            "Time from submission to the start of the last attempt, by kind",
            m.queue_seconds.clone(),
        );
        r.register(
            "kiln_service_batch_size",
            "Jobs per worker batch",
            m.batch_size.clone(),
        );
        m.exporter_gauge.set(1);
        ServiceMetrics {
            registry: r,
            queue_registry: q,
            ..m
        }
    }
}

impl ServiceMetrics {
    /// A job was accepted.
    pub fn submitted(&self, kind: &str) {
        self.submitted
            .get_or_create(&KindLabels { kind: kind.into() })
            .inc();
    }

    /// A job reached `state`; `latency_s` from submission.
    pub fn finished(&self, kind: &str, state: &str, latency_s: f64) {
        self.finished
            .get_or_create(&KindStateLabels {
                kind: kind.into(),
                state: state.into(),
            })
            .inc();
        kiln_monitor::global().kiln().observe_job_latency(kind, latency_s);
    }

    /// A job was split into `n` shards (crate::shard).
    pub fn sharded(&self, n: usize) {
        self.shards.inc_by(n as u64);
    }

    /// A job of `kind` was not started within its queue timeout.
    pub fn expired(&self, kind: &str) {
        self.expired
            .get_or_create(&KindLabels { kind: kind.into() })
            .inc();
    }

    /// A batch of `n` jobs of `kind` ran for `run_s`; each had queued for `queued_s`.
    pub fn batch(&self, kind: &str, n: usize, run_s: f64, queued_s: &[f64]) {
        self.batch_size.observe(n as f64);
        let l = KindLabels { kind: kind.into() };
        self.run_seconds.get_or_create(&l).observe(run_s);
        let q = self.queue_seconds.get_or_create(&l);
        for s in queued_s {
            q.observe(*s);
        }
    }

    /// Set the queue and job gauges (also `kiln_jobs{state}` in the monitor's registry).
    pub fn set_counts(&self, counts: &crate::store::StateCounts) {
        for (s, n) in &counts.by_state {
            kiln_monitor::global().kiln().set_jobs(s.name(), *n as i64);
        }
        self.queue_depth
            .set(counts.get(crate::store::JobState::Queued) as i64);
        self.running
            .set(counts.get(crate::store::JobState::Running) as i64);
    }

    /// Whether this node exports the queue-wide figures (a node that stops being the
    /// exporter stops exporting them at once).
    pub fn set_queue_exporter(&self, on: bool) {
        let was = self.exporter.swap(on, std::sync::atomic::Ordering::SeqCst);
        self.exporter_gauge.set(i64::from(on));
        if was && !on {
            kiln_monitor::global().kiln().clear_jobs();
        }
    }

    /// Nodes with a recent heartbeat.
    pub fn set_nodes(&self, n: usize) {
        self.nodes.set(n as i64);
    }

    /// Worker processes ready.
    pub fn set_workers_up(&self, n: usize) {
        self.workers_up.set(n as i64);
    }

    /// The reasons a worker is replaced (the `reason` label).
    pub const RESTART_REASONS: [&'static str; 5] = ["exited", "sticky", "hung", "deadline", "protocol"];

    /// Worker slots faulted now (see `crate::supervisor::fault`).
    pub fn set_workers_faulted(&self, n: usize) {
        self.workers_faulted.set(n as i64);
    }

    /// A worker on `device` ended by a device fault.
    pub fn device_fault(&self, device: &str) {
        self.device_faults
            .get_or_create(&DeviceLabels {
                device: device.into(),
            })
            .inc();
    }

    /// Export a worker's restart and device-fault counters at zero, so that rates exist
    /// before a fault.
    pub fn init_worker(&self, worker: &str) {
        let _ = self.device_faults.get_or_create(&DeviceLabels {
            device: worker.into(),
        });
        for reason in Self::RESTART_REASONS {
            let _ = self.restarts.get_or_create(&WorkerLabels {
                worker: worker.into(),
                reason: reason.into(),
            });
        }
    }

    /// A worker was replaced.
    pub fn worker_restart(&self, worker: &str, reason: &str) {
        self.restarts
            .get_or_create(&WorkerLabels {
                worker: worker.into(),
                reason: reason.into(),
            })
            .inc();
    }

    /// A request was refused (`unauthorized`, `queue_full`, `payload_too_large`, ...).
    pub fn rejected(&self, reason: &str) {
        self.rejected
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
    }

    /// An HTTP response went out.
    pub fn response(&self, status: u16) {
        self.responses
            .get_or_create(&StatusLabels {
                code: status.to_string(),
            })
            .inc();
    }

    /// The monitor registry's exposition followed by this one's (one `# EOF`).
    pub fn encode(&self) -> String {
        let mut out = kiln_monitor::global().encode();
        if let Some(keep) = out.strip_suffix("# EOF\n").map(str::len) {
            out.truncate(keep);
        }
        if self.exporter.load(std::sync::atomic::Ordering::SeqCst) {
            if let Err(e) = prometheus_client::encoding::text::encode_registry(&mut out, &self.queue_registry)
            {
                tracing::warn!("metrics encoding failed: {e}");
            }
        }
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!("metrics encoding failed: {e}");
        }
        out
    }
}
