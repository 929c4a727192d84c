//! Strict readiness: `/readyz` answers 503 within a second of a worker's sticky CUDA fault,
//! naming the slot, its device and the fault, and 200 again once the slot's replacement
//! worker is ready; while the replacement cannot start, it stays 503.
//!
//! The server runs in this process with one CPU worker slot; its worker is this test
//! binary (started with the supervisor's `worker` arguments, it runs the worker loop as
//! `kiln worker` would). The fault is the `fault` kind's `sticky` mode: the worker answers
//! the job as a poisoned CUDA context does (`cuda_sticky`) and exits with the sticky code,
//! with no GPU needed. A task polls `/readyz` every 5 ms through the router meanwhile.
//!
//! A sticky outcome is retried on a fresh worker, as after a real fault; the server here
//! allows one attempt, so the job fails at its first.
//!
//! A test binary without the libtest harness (`harness = false`): `main` runs the cases in
//! order and panics on a failure.
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln_service::api::AppState;
use kiln_service::auth::{hash_token, TokenSet};
use kiln_service::config::{GpuSelection, ServiceConfig, TokenConfig};
use kiln_service::store::{now_ms, JobStore, SqliteStore};
use kiln_service::supervisor::Shared;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// While this file is in the data dir, a worker refuses to start (exit code 3).
const REFUSE: &str = "refuse-start";
/// While this file is in the data dir, a worker waits the milliseconds it holds before it
/// starts (so that a replacement's start is long next to the poll period).
const DELAY: &str = "start-delay-ms";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "worker") {
        std::process::exit(worker(&args));
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(a_sticky_fault_makes_the_node_unready_until_its_worker_is_back());
    eprintln!("test a_sticky_fault_makes_the_node_unready_until_its_worker_is_back ... ok");
    rt.block_on(readiness_stays_503_while_the_restart_keeps_failing());
    eprintln!("test readiness_stays_503_while_the_restart_keeps_failing ... ok");
}

/// The worker loop ([`app_support::run_worker`]), except that it refuses to start while
/// `DATA_DIR/refuse-start` exists, and waits first as `DATA_DIR/start-delay-ms` says (the
/// blob dir is `DATA_DIR/blobs`).
fn worker(args: &[String]) -> i32 {
    let blob_dir: std::path::PathBuf = app_support::flag(args, "--blob-dir").unwrap().into();
    if blob_dir.parent().is_some_and(|d| d.join(REFUSE).exists()) {
        eprintln!("test worker: {REFUSE} exists; not starting");
        return 3;
    }
    let delay = blob_dir
        .parent()
        .and_then(|d| std::fs::read_to_string(d.join(DELAY)).ok())
        .and_then(|t| t.trim().parse().ok());
    if let Some(ms) = delay {
        std::thread::sleep(Duration::from_millis(ms));
    }
    app_support::run_worker(args)
}

struct Server {
    st: Arc<AppState>,
    shared: Arc<Shared>,
    slots: Vec<tokio::task::JoinHandle<()>>,
    dir: tempfile::TempDir,
}

/// A server with one CPU worker slot (this binary), fault injection on, one attempt per
/// job, and the token `secret` allowed the `fault` kind.
fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServiceConfig {
        allow_fault_injection: true,
        data_dir: dir.path().to_path_buf(),
        ..ServiceConfig::default()
    };
    cfg.workers.program = Some(std::env::current_exe().unwrap());
    cfg.workers.gpus = GpuSelection::None;
    cfg.workers.max_attempts = 1;
    std::fs::create_dir_all(dir.path().join("blobs")).unwrap();
    let token = TokenConfig {
        name: "drill".into(),
        sha256: Some(hash_token("secret")),
        kinds: Some(vec!["fault".into(), "price".into()]),
        ..Default::default()
    };
    let store: Arc<dyn JobStore> = Arc::new(SqliteStore::open(dir.path(), false).unwrap());
    let hub: Arc<kiln_service::hub::Hub> = Default::default();
    let metrics: Arc<kiln_service::metrics::ServiceMetrics> = Default::default();
    let shared = Arc::new(Shared::new(
        store.clone(),
        cfg.clone(),
        hub.clone(),
        metrics.clone(),
        "n_test".into(),
        None,
        &["cpu".to_string()],
    ));
    let st = Arc::new(AppState {
        store,
        cfg,
        tokens: TokenSet::from_configs(&[token]).unwrap(),
        hub,
        metrics,
        supervisor: Some(shared.clone()),
        accepting: true.into(),
        blob_dir: dir.path().to_path_buf(),
    });
    let slots = shared.start();
    Server {
        st,
        shared,
        slots,
        dir,
    }
}

/// One `/readyz` answer: when (ms since the epoch), its status, its reasons.
#[derive(Clone, Debug)]
struct Poll {
    at_ms: i64,
    status: StatusCode,
    reasons: Vec<String>,
}

/// Polls `/readyz` every 5 ms until stopped.
struct Poller {
    polls: Arc<Mutex<Vec<Poll>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Poller {
    fn start(st: &Arc<AppState>) -> Poller {
        let polls = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s, st) = (polls.clone(), stop.clone(), st.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::SeqCst) {
                let (status, reasons) = readyz(&st).await;
                p.lock().unwrap().push(Poll {
                    at_ms: now_ms(),
                    status,
                    reasons,
                });
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        Poller { polls, stop, task }
    }

    async fn stop(self) -> Vec<Poll> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
        let polls = self.polls.lock().unwrap().clone();
        polls
    }
}

async fn readyz(st: &Arc<AppState>) -> (StatusCode, Vec<String>) {
    let (status, b) = app_support::call(st, "GET", "/readyz", None, vec![]).await;
    let reasons = b["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    (status, reasons)
}

impl Server {
    async fn stop(self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.st.hub.wake.notify_waiters();
        for s in self.slots {
            let _ = tokio::time::timeout(Duration::from_secs(10), s).await;
        }
    }

    async fn submit_sticky(&self) -> String {
        app_support::submit_job(&self.st, &json!({"kind": "fault", "params": {"mode": "sticky"}})).await
    }

    /// The job once finished (waiting up to a minute).
    async fn wait(&self, id: &str) -> Value {
        app_support::wait_job(&self.st, id, 2).await
    }

    /// The one slot as `/v1/workers` shows it.
    async fn slot(&self) -> Value {
        let (s, b) = app_support::call(&self.st, "GET", "/v1/workers", Some("secret"), vec![]).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        b[0].clone()
    }

    /// Waits until `/readyz` is 200 (at most `limit`); the time it took.
    async fn until_ready(&self, limit: Duration) -> Duration {
        let t = Instant::now();
        loop {
            let (s, reasons) = readyz(&self.st).await;
            if s == StatusCode::OK {
                return t.elapsed();
            }
            assert!(t.elapsed() < limit, "not ready after {limit:?}: {reasons:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The job failed with the sticky code at its one attempt; its `finished_ms`.
fn failed_sticky(job: &Value) -> i64 {
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "cuda_sticky", "{job}");
    assert_eq!(job["attempts"], 1, "{job}");
    let msg = job["error"]["message"].as_str().unwrap();
    assert!(msg.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{msg}");
    job["finished_ms"].as_i64().unwrap()
}

/// Whether a poll's reasons name the faulted slot, its device and the fault.
fn names_the_fault(p: &Poll) -> bool {
    p.reasons.iter().any(|r| {
        r.starts_with("worker cpu-0 (cpu): sticky CUDA fault: ")
            && r.contains("CUDA_ERROR_ILLEGAL_ADDRESS")
            && r.contains("not ready until its worker is back")
    })
}

async fn a_sticky_fault_makes_the_node_unready_until_its_worker_is_back() {
    let s = start();
    let first = s.until_ready(Duration::from_secs(30)).await;
    eprintln!("first worker ready after {first:?}");
    // the replacement takes at least 300 ms to start: many polls see the node unready
    std::fs::write(s.dir.path().join(DELAY), b"300").unwrap();
    let poller = Poller::start(&s.st);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let submitted = now_ms();
    let id = s.submit_sticky().await;
    let finished = failed_sticky(&s.wait(&id).await);
    let back = s.until_ready(Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let polls = poller.stop().await;

    let before: Vec<&Poll> = polls.iter().filter(|p| p.at_ms < submitted).collect();
    assert!(!before.is_empty());
    assert!(
        before.iter().all(|p| p.status == StatusCode::OK),
        "ready before the fault: {before:?}"
    );
    // the first 503 already names the fault: the slot is marked before the job is stored
    let (i, down) = polls
        .iter()
        .enumerate()
        .find(|(_, p)| p.status == StatusCode::SERVICE_UNAVAILABLE)
        .expect("no 503 after the fault");
    assert!(names_the_fault(down), "{down:?}");
    assert!(
        down.at_ms <= finished + 1000,
        "503 came {} ms after the job failed",
        down.at_ms - finished
    );
    let up = polls[i..]
        .iter()
        .find(|p| p.status == StatusCode::OK)
        .expect("no 200 after the fault");
    assert!(
        up.at_ms - finished >= 300 && up.at_ms - finished < 5000,
        "ready again {} ms after the job failed",
        up.at_ms - finished
    );
    // every poll between says why
    assert!(polls[i..]
        .iter()
        .take_while(|p| p.status != StatusCode::OK)
        .all(names_the_fault));
    eprintln!(
        "503 at {} ms from the job's failure, 200 again at {} ms ({} polls; ready again {back:?} after the job's answer)",
        down.at_ms - finished,
        up.at_ms - finished,
        polls.len()
    );

    let w = s.slot().await;
    assert_eq!(w["state"], "idle", "{w}");
    assert_eq!(w["restarts"], 1, "{w}");
    assert!(w["fault"].is_null(), "{w}");
    assert_eq!(w["faults"], 1, "{w}");
    let last = &w["last_fault"];
    assert!(
        last["reason"]
            .as_str()
            .unwrap()
            .starts_with("sticky CUDA fault: "),
        "{w}"
    );
    let (at, cleared) = (
        last["at_ms"].as_i64().unwrap(),
        last["cleared_ms"].as_i64().unwrap(),
    );
    assert!(at <= finished && cleared >= at && cleared <= up.at_ms, "{w}");
    assert!(w["last_exit"].as_str().unwrap().contains("sticky"), "{w}");

    let m = s.st.metrics.encode();
    assert!(
        m.contains("kiln_service_device_faults_total{device=\"cpu\"} 1"),
        "{m}"
    );
    assert!(m.contains("kiln_service_workers_faulted 0"), "{m}");
    let doc = serde_json::to_value(kiln_service::api::openapi()).unwrap();
    let props = &doc["components"]["schemas"]["WorkerStatus"]["properties"];
    for f in ["fault", "last_fault", "faults"] {
        assert!(
            !props[f].is_null(),
            "WorkerStatus.{f} is not in the OpenAPI document"
        );
    }
    assert!(
        !doc["components"]["schemas"]["DeviceFault"].is_null(),
        "DeviceFault is not in the OpenAPI document"
    );
    s.stop().await;
}

async fn readiness_stays_503_while_the_restart_keeps_failing() {
    let s = start();
    s.until_ready(Duration::from_secs(30)).await;
    let marker = s.dir.path().join(REFUSE);
    std::fs::write(&marker, b"").unwrap();
    let id = s.submit_sticky().await;
    let finished = failed_sticky(&s.wait(&id).await);

    // two seconds of failed restarts (backoff 200, 400, 800 ms, ...): never ready
    let poller = Poller::start(&s.st);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let polls = poller.stop().await;
    assert!(polls.len() > 50, "{}", polls.len());
    for p in &polls {
        assert_eq!(p.status, StatusCode::SERVICE_UNAVAILABLE, "{p:?}");
        assert!(names_the_fault(p), "{p:?}");
    }
    let w = s.slot().await;
    assert!(!w["fault"].is_null(), "{w}");
    assert_eq!(w["fault"]["cleared_ms"], Value::Null, "{w}");
    assert!(
        w["last_exit"].as_str().unwrap().contains("exited while starting"),
        "the restarts failed: {w}"
    );
    let m = s.st.metrics.encode();
    assert!(m.contains("kiln_service_workers_faulted 1"), "{m}");

    // the worker can start again: ready once it has
    std::fs::remove_file(&marker).unwrap();
    let back = s.until_ready(Duration::from_secs(15)).await;
    eprintln!(
        "ready {back:?} after the restarts were let through ({} ms after the job failed)",
        now_ms() - finished
    );
    let w = s.slot().await;
    assert!(w["fault"].is_null(), "{w}");
    assert_eq!(w["faults"], 1, "{w}");
    assert!(w["last_fault"]["cleared_ms"].as_i64().is_some(), "{w}");
    s.stop().await;
}
