//! `kiln serve`: open the store, recover, start the workers, serve HTTP until SIGTERM or
//! SIGINT, then drain.

use crate::api::{app, AppState};
use crate::auth::TokenSet;
use crate::config::{GpuSelection, ServiceConfig, Workers};
use crate::error::ServeError;
use crate::hub::Hub;
use crate::metrics::ServiceMetrics;
use crate::store::{
    now_ms, JobState, JobStore, NodeInfo, Orphans, PgOptions, PgStore, SqliteStore, StoreEvents,
    LEASE_EXPIRED,
};
use crate::supervisor::Shared;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What `kiln serve` passes in.
pub struct ServeOptions {
    /// The service configuration.
    pub cfg: ServiceConfig,
    /// kiln's core configuration (device policy for `workers.gpus = "auto"`).
    pub core: kiln::Config,
    /// The core config file, handed to workers.
    pub core_config_path: Option<PathBuf>,
}

/// The device of each worker slot, in order: `cuda:N` per GPU of `workers.gpus` (when no
/// `workers.groups` are set), `group:SET` per group (a worker owning the devices of `SET`,
/// `kiln price --devices` syntax, e.g. `group:0,1`), then `cpu` per CPU worker.
pub fn worker_devices(workers: &Workers, core: &kiln::Config) -> Result<Vec<String>, String> {
    let groups = workers.device_groups()?;
    let mut devices: Vec<String> = if groups.is_empty() {
        gpu_ordinals(&workers.gpus, core)
            .into_iter()
            .map(|o| format!("cuda:{o}"))
            .collect()
    } else {
        groups.iter().map(|g| format!("{GROUP_PREFIX}{g}")).collect()
    };
    devices.extend((0..workers.cpu_workers).map(|_| "cpu".to_string()));
    Ok(devices)
}

/// The prefix of a multi-device slot's device (`group:0,1`).
pub const GROUP_PREFIX: &str = "group:";

/// The GPU ordinals `sel` names under the device policy (`auto`: every usable GPU the
/// driver reports; none without a driver).
pub fn gpu_ordinals(sel: &GpuSelection, core: &kiln::Config) -> Vec<usize> {
    match sel {
        GpuSelection::None => Vec::new(),
        GpuSelection::List(l) => l.clone(),
        GpuSelection::Auto => match kiln::device::probe() {
            Ok(p) => p
                .devices
                .iter()
                .filter(|d| core.devices.admit(&d.desc) == kiln::core::device::Admission::Usable)
                .map(|d| d.desc.ordinal)
                .collect(),
            Err(e) => {
                tracing::info!("no GPU workers: {e}");
                Vec::new()
            }
        },
    }
}

async fn shutdown_signal(state: Arc<AppState>) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::warn!("shutting down: no new jobs; draining");
    state.accepting.store(false, Ordering::SeqCst);
}

/// Run the service until a signal; `on_listening` gets the bound address (port 0 resolved).
pub async fn serve(opts: ServeOptions, on_listening: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
    let cfg = opts.cfg;
    cfg.validate().map_err(ServeError::Config)?;
    let addr = cfg.listen_addr().map_err(ServeError::Config)?;
    let tokens = TokenSet::load(&cfg).map_err(ServeError::Config)?;
    if !addr.ip().is_loopback() && tokens.is_empty() {
        return Err(ServeError::Config(format!(
            "refusing to listen on {addr} without tokens: configure [[tokens]] or KILN_TOKENS_FILE, \
             or listen on 127.0.0.1"
        )));
    }
    let blob_dir = cfg.data_dir.join("blobs");
    crate::private::restrict_umask();
    crate::private::prepare_data_dir(&cfg.data_dir).map_err(ServeError::Io)?;
    if let Ok(rd) = std::fs::read_dir(&blob_dir) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().ends_with(".part") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let store = open_store(&cfg).await?;
    let node = crate::ids::new_id("n");
    let hub = Arc::new(Hub::default());
    let metrics = Arc::new(ServiceMetrics::default());
    // before the admission counts are read: they leave out the jobs this fails
    let orphans = sweep_leases(&*store, &hub, &metrics, &node).await?;
    if orphans.requeued > 0 || !orphans.failed.is_empty() {
        tracing::warn!(
            "jobs left running by an earlier process: {} re-queued, {} failed (lost on their last attempt)",
            orphans.requeued,
            orphans.failed.len()
        );
    }
    store.set_events(hub.clone() as Arc<dyn StoreEvents>);
    let counts = store.counts().await?;
    hub.seed(&counts.in_flight_by_principal);
    metrics.set_counts(&counts);

    let devices = worker_devices(&cfg.workers, &opts.core).map_err(ServeError::Config)?;
    if devices.is_empty() {
        return Err(ServeError::Config(
            "no workers: no usable GPU and workers.cpu_workers = 0".into(),
        ));
    }
    tracing::info!("workers: {}", devices.join(", "));
    let info = NodeInfo {
        id: node.clone(),
        hostname: crate::store::hostname(),
        devices: devices.clone(),
        started_ms: crate::store::now_ms(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    store.node_heartbeat(&info, cfg.store.lease()).await?;
    tracing::info!("node {} on {}", info.id, info.hostname);
    let shared = Arc::new(Shared::new(
        store.clone(),
        cfg.clone(),
        hub.clone(),
        metrics.clone(),
        node,
        opts.core_config_path.clone(),
        &devices,
    ));
    let slots = shared.start();

    let state = Arc::new(AppState {
        store: store.clone(),
        cfg: cfg.clone(),
        tokens,
        hub: hub.clone(),
        metrics: metrics.clone(),
        supervisor: Some(shared.clone()),
        accepting: AtomicBool::new(true),
        blob_dir: blob_dir.clone(),
    });

    let keeper = tokio::spawn(keeper(
        store.clone(),
        hub.clone(),
        metrics.clone(),
        info,
        cfg.clone(),
    ));

    // checked before the port is announced: a bad certificate is a config error
    let tls = cfg
        .tls
        .as_ref()
        .map(|t| crate::tls::server_config(t, cfg.listener.http2))
        .transpose()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ServeError::Io(format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr().map_err(|e| ServeError::Io(e.to_string()))?;
    on_listening(local);
    // plain and TLS alike: header-read and idle timeouts, a connection cap, HTTP/1.1 only
    // unless configured (see crate::listener)
    crate::listener::serve(
        listener,
        app(state.clone()),
        tls,
        cfg.listener.clone(),
        shutdown_signal(state.clone()),
        Duration::from_secs(cfg.drain_timeout_s),
    )
    .await;

    // Drain: no more claims; running batches finish until the drain timeout.
    shared.stopping.store(true, Ordering::SeqCst);
    hub.wake.notify_waiters();
    let drain = Duration::from_secs(cfg.drain_timeout_s);
    let all = futures_join(slots);
    if tokio::time::timeout(drain, all).await.is_err() {
        tracing::warn!("drain timeout: killing workers; their jobs go back to the queue");
    }
    keeper.abort();
    // Anything of this node still running (killed workers) goes back to the queue, for
    // other nodes or the next start.
    match store.release_node(&shared.node).await {
        Ok(n) if n > 0 => tracing::warn!("re-queued {n} running jobs"),
        Ok(_) => {}
        Err(e) => tracing::error!("re-queueing at shutdown: {e}"),
    }
    if let Err(e) = store.node_gone(&shared.node).await {
        tracing::warn!("leaving the node registry: {e}");
    }
    store.close().await?;
    tracing::warn!("stopped");
    Ok(())
}

/// Open the store `cfg.store.url` names.
pub async fn open_store(cfg: &ServiceConfig) -> Result<Arc<dyn JobStore>, ServeError> {
    if cfg.store.is_postgres() {
        let opts = PgOptions {
            pool_size: cfg.store.pool_size,
            lease: cfg.store.lease(),
            ..PgOptions::default()
        };
        let s = PgStore::connect(&cfg.store.url, opts).await.map_err(|e| {
            ServeError::Store(crate::store::StoreError::with_fault(
                e.fault(),
                format!("{} ({})", e.message(), crate::config::redact_url(&cfg.store.url)),
            ))
        })?;
        tracing::info!(
            "job store: PostgreSQL at {} (schema {})",
            crate::config::redact_url(&cfg.store.url),
            crate::store::PG_SCHEMA_VERSION
        );
        Ok(Arc::new(s))
    } else {
        Ok(Arc::new(SqliteStore::open(
            &cfg.data_dir,
            cfg.store.synchronous_full,
        )?))
    }
}

/// Sweep expired and orphaned leases ([`JobStore::requeue_orphans`]; `live`: this node's
/// id, the prefix of its lease owners) and account for the jobs the sweep failed as a
/// worker's failure is accounted for (crate::supervisor): each counted as finished, its
/// watchers woken and its admission released; a shard releases none of its own, and the
/// parent its failure failed is counted and released in its place. Logging is the caller's.
pub async fn sweep_leases(
    store: &dyn JobStore,
    hub: &Hub,
    metrics: &ServiceMetrics,
    live: &str,
) -> Result<Orphans, crate::store::StoreError> {
    let orphans = store.requeue_orphans(live).await?;
    let now = now_ms();
    let latency = |created_ms: i64| (now - created_ms).max(0) as f64 / 1e3;
    for j in &orphans.failed {
        tracing::info!(
            "job {}: failed: its lease expired on its last attempt ({})",
            j.id,
            LEASE_EXPIRED.1
        );
        metrics.finished(&j.kind, JobState::Failed.name(), latency(j.created_ms));
        if j.parent.is_none() {
            hub.finished(&j.id, &j.principal);
        } else {
            StoreEvents::job_finished(hub, &j.id);
        }
        if let Some(p) = &j.closed_parent {
            metrics.finished(&p.kind, JobState::Failed.name(), latency(p.created_ms));
            hub.finished(&p.id, &p.principal);
        }
    }
    Ok(orphans)
}

/// How often a node of a shared store sweeps expired leases back into the queue. Leases are
/// renewed once a second, so a dead node's jobs come free between `lease - 1 s` and `lease`
/// after it died; a quarter-second sweep puts them back within 0.25 s of that (a 1 s sweep
/// made the 10,000-job kill test's pickup 3.9 s against a 3 s lease).
const SWEEP: Duration = Duration::from_millis(250);

/// Every [`SWEEP`] on a shared store: expired leases back to the queue. Once a second: the
/// node's heartbeat (renewing its leases), the queue gauges (on the elected node) and the
/// admission counts (refreshed from a shared store, where other nodes admit and finish jobs
/// too); once a minute, expiry of old results and uploaded blobs (on the elected node only).
async fn keeper(
    store: Arc<dyn JobStore>,
    hub: Arc<Hub>,
    metrics: Arc<ServiceMetrics>,
    info: NodeInfo,
    cfg: ServiceConfig,
) {
    let (ttl, cap) = (Duration::from_secs(cfg.results.ttl_s), cfg.results.max_bytes);
    let lease = cfg.store.lease();
    let shared = store.is_shared();
    let mut tick = 0u64;
    let mut sweeps = 0u64;
    let mut failing = false;
    let per_second = (Duration::from_secs(1).as_millis() / SWEEP.as_millis()) as u64;
    loop {
        tokio::time::sleep(SWEEP).await;
        sweeps += 1;
        if shared {
            match sweep_leases(&*store, &hub, &metrics, &info.id).await {
                Ok(o) => {
                    if o.requeued > 0 {
                        tracing::warn!("re-queued {} jobs whose lease expired (a node died?)", o.requeued);
                        hub.wake.notify_waiters();
                    }
                    if !o.failed.is_empty() {
                        tracing::warn!(
                            "failed {} jobs whose lease expired on their last attempt (a node died?)",
                            o.failed.len()
                        );
                    }
                }
                Err(e) => tracing::debug!("lease sweep: {e}"),
            }
        }
        if sweeps % per_second != 0 {
            continue;
        }
        tick += 1;
        // queued jobs past their queue timeout fail as `expired` (claims check it too)
        match store.expire_queued().await {
            Ok(gone) => {
                for j in gone {
                    let latency = (now_ms() - j.created_ms).max(0) as f64 / 1e3;
                    metrics.finished(&j.kind, "failed", latency);
                    metrics.expired(&j.kind);
                    hub.finished(&j.id, &j.principal);
                }
            }
            Err(e) => tracing::debug!("queue-timeout sweep: {e}"),
        }
        match store.node_heartbeat(&info, lease).await {
            Ok(()) if failing => {
                tracing::warn!("node heartbeat: the store answers again");
                failing = false;
            }
            Ok(()) => {}
            Err(e) if !failing => {
                tracing::error!("node heartbeat: {e} (leases expire in {} ms)", lease.as_millis());
                failing = true;
            }
            Err(_) => {}
        }
        let exporter = store.queue_exporter();
        metrics.set_queue_exporter(exporter);
        if let Ok(c) = store.counts().await {
            if shared {
                hub.seed(&c.in_flight_by_principal);
            }
            if exporter {
                metrics.set_counts(&c);
            }
        }
        if exporter {
            if let Ok(nodes) = store.nodes().await {
                metrics.set_nodes(nodes.iter().filter(|n| n.alive).count());
            }
        }
        if tick % 60 == 1 && exporter {
            let blob_ttl = Duration::from_secs(cfg.blobs.ttl_s);
            for swept in [store.expire(ttl, cap).await, store.expire_blobs(blob_ttl).await] {
                match swept {
                    Ok(paths) => {
                        for p in paths {
                            let _ = std::fs::remove_file(p);
                        }
                    }
                    Err(e) => tracing::warn!("expiry: {e}"),
                }
            }
        }
    }
}

/// Wait for every slot task (dropping one kills its worker process).
async fn futures_join(slots: Vec<tokio::task::JoinHandle<()>>) {
    let aborts: Vec<_> = slots.iter().map(|h| h.abort_handle()).collect();
    struct AbortOnDrop(Vec<tokio::task::AbortHandle>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            for a in &self.0 {
                a.abort();
            }
        }
    }
    let _guard = AbortOnDrop(aborts);
    for h in slots {
        let _ = h.await;
    }
}
