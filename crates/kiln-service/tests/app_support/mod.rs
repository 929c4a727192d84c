//! What the in-process API tests share: an `AppState` over a SQLite store in a temp dir
//! with one token (`secret`), and one request through the router (no socket).
#![allow(clippy::unwrap_used, dead_code)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use kiln_service::api::{app, AppState};
use kiln_service::auth::{hash_token, TokenSet};
use kiln_service::config::{ServiceConfig, TokenConfig};
use kiln_service::store::{JobStore, SqliteStore};
use serde_json::Value;
use std::sync::Arc;
use tower::ServiceExt;

/// The server's state with `cfg`, a SQLite store and blobs in `dir`, and the token `secret`.
pub fn state(dir: &std::path::Path, cfg: ServiceConfig) -> Arc<AppState> {
    let token = TokenConfig {
        name: "t".into(),
        sha256: Some(hash_token("secret")),
        ..Default::default()
    };
    state_with(dir, cfg, &[token], &[])
}

/// [`state`] with these tokens instead of `secret`.
pub fn state_with_tokens(dir: &std::path::Path, cfg: ServiceConfig, tokens: &[TokenConfig]) -> Arc<AppState> {
    state_with(dir, cfg, tokens, &[])
}

/// [`state`] with a supervisor over worker slots of these devices (`cpu`, `cuda:0`, ...),
/// none of them started: what the API sees of a server's workers.
pub fn state_with_slots(dir: &std::path::Path, cfg: ServiceConfig, slots: &[&str]) -> Arc<AppState> {
    let token = TokenConfig {
        name: "t".into(),
        sha256: Some(hash_token("secret")),
        ..Default::default()
    };
    state_with(dir, cfg, &[token], slots)
}

fn state_with(
    dir: &std::path::Path,
    cfg: ServiceConfig,
    tokens: &[TokenConfig],
    slots: &[&str],
) -> Arc<AppState> {
    let tokens = TokenSet::from_configs(tokens).unwrap();
    let store: Arc<dyn JobStore> = Arc::new(SqliteStore::open(dir, false).unwrap());
    let hub: Arc<kiln_service::hub::Hub> = Default::default();
    let metrics: Arc<kiln_service::metrics::ServiceMetrics> = Default::default();
    let supervisor = (!slots.is_empty()).then(|| {
        let devices: Vec<String> = slots.iter().map(|d| d.to_string()).collect();
        Arc::new(kiln_service::supervisor::Shared::new(
            store.clone(),
            cfg.clone(),
            hub.clone(),
            metrics.clone(),
            "n_test".into(),
            None,
            &devices,
        ))
    });
    Arc::new(AppState {
        store,
        cfg,
        tokens,
        hub,
        metrics,
        supervisor,
        accepting: true.into(),
        blob_dir: dir.to_path_buf(),
    })
}

/// One request through the router, with `Bearer token` where given: the status and the JSON
/// body (`Null` where the body is not JSON).
pub async fn call(
    st: &Arc<AppState>,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let (status, bytes) = call_raw(st, method, uri, token, body).await;
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// One request through the router: the status and the body's bytes (a streamed body
/// collected whole; a stream that ends in an error panics).
pub async fn call_raw(
    st: &Arc<AppState>,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, Vec<u8>) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let r = app(st.clone())
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = r.status();
    let bytes = r.into_body().collect().await.unwrap().to_bytes();
    (status, bytes.to_vec())
}

/// The value after `name` in a worker's arguments.
pub fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The worker loop, as `kiln worker` runs it, from the arguments the supervisor passes:
/// `[--config F] --device D worker --blob-dir DIR --inline-max-elements N --max-elements N
/// [--memory-limit B] [--no-sandbox]` (a test binary that is its own worker process calls
/// it from `main`).
pub fn run_worker(args: &[String]) -> i32 {
    let flag = |name: &str| flag(args, name);
    let device: kiln::DeviceRequest = flag("--device").unwrap_or_else(|| "cpu".into()).parse().unwrap();
    let opts = kiln_service::exec::ExecOptions {
        blob_dir: flag("--blob-dir").unwrap().into(),
        inline_max_elements: flag("--inline-max-elements").unwrap().parse().unwrap(),
        max_elements: flag("--max-elements").unwrap().parse().unwrap(),
    };
    kiln_service::private::restrict_umask();
    let sandbox = kiln_service::sandbox::SandboxOptions {
        memory_limit: flag("--memory-limit").and_then(|b| b.parse().ok()),
        gpu: device != kiln::DeviceRequest::Cpu,
        sandbox: !args.iter().any(|a| a == "--no-sandbox"),
    };
    let protections = kiln_service::sandbox::apply(&sandbox).unwrap();
    let cfg = kiln::Config::load(None).unwrap();
    kiln_service::worker::run(device, &cfg, &opts, &protections)
}

/// Submits `body` (a job's JSON) with the token `secret`; the new job's id (202 expected).
pub async fn submit_job(st: &Arc<AppState>, body: &Value) -> String {
    let (s, b) = call(
        st,
        "POST",
        "/v1/jobs",
        Some("secret"),
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    b["id"].as_str().unwrap().to_string()
}

/// The job `id` once finished, waiting up to `rounds` long polls of 30 s.
pub async fn wait_job(st: &Arc<AppState>, id: &str, rounds: usize) -> Value {
    for _ in 0..rounds {
        let (s, b) = call(
            st,
            "GET",
            &format!("/v1/jobs/{id}?wait=30"),
            Some("secret"),
            vec![],
        )
        .await;
        assert!(s == StatusCode::OK || s == StatusCode::ACCEPTED, "{b}");
        if matches!(b["state"].as_str(), Some("succeeded" | "failed" | "cancelled")) {
            return b;
        }
    }
    panic!("job {id} did not finish");
}
