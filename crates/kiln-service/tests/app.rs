//! The router driven without a socket (`app(state)` and tower's `oneshot`): auth, the error
//! format, admission and the OpenAPI document. No workers run here: jobs stay queued.
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln_service::api::AppState;
use kiln_service::config::ServiceConfig;
use serde_json::{json, Value};
use std::sync::Arc;

fn state(dir: &std::path::Path) -> Arc<AppState> {
    let mut cfg = ServiceConfig::default();
    cfg.limits.max_queue = 2;
    cfg.limits.max_body_bytes = 4096;
    app_support::state(dir, cfg)
}

async fn call(
    st: &Arc<AppState>,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: &str,
) -> (StatusCode, Value) {
    app_support::call(st, method, uri, token, body.as_bytes().to_vec()).await
}

#[tokio::test]
async fn errors_have_one_shape_and_admission_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path());
    let job = json!({"kind": "price", "inputs": {"options": [{"option_type": "put", "style": "european", "spot": 10.0, "strike": 11.0, "rate": 0.0, "dividend": 0.0, "volatility": 0.3, "maturity": 0.5}]}}).to_string();
    let (s, b) = call(&st, "POST", "/v1/jobs", None, &job).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    let (s, b) = call(&st, "POST", "/v1/jobs", Some("secret"), "[1,").await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("malformed_request"))
    );
    let (s, b) = call(&st, "POST", "/v1/jobs", Some("secret"), &"x".repeat(5000)).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large"))
    );
    let (s, b) = call(&st, "POST", "/v1/jobs", Some("secret"), "{\"kind\":\"fault\"}").await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unknown_kind")),
        "fault is off by default"
    );
    let (s, b) = call(&st, "POST", "/v1/jobs?wait=abc", Some("secret"), &job).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    // Two jobs fill the queue; the third gets 429.
    let (s, b) = call(&st, "POST", "/v1/jobs", Some("secret"), &job).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let id = b["id"].as_str().unwrap().to_string();
    assert_eq!(b["state"], "queued");
    assert_eq!(
        call(&st, "POST", "/v1/jobs", Some("secret"), &job).await.0,
        StatusCode::ACCEPTED
    );
    let (s, b) = call(&st, "POST", "/v1/jobs", Some("secret"), &job).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("queue_full"))
    );
    // The stored job, its cancellation, and room again.
    let (s, b) = call(&st, "GET", &format!("/v1/jobs/{id}"), Some("secret"), "").await;
    assert_eq!((s, b["state"].as_str()), (StatusCode::OK, Some("queued")));
    let (s, b) = call(&st, "DELETE", &format!("/v1/jobs/{id}"), Some("secret"), "").await;
    assert_eq!((s, b["state"].as_str()), (StatusCode::OK, Some("cancelled")));
    assert_eq!(
        call(&st, "POST", "/v1/jobs", Some("secret"), &job).await.0,
        StatusCode::ACCEPTED
    );
    let (s, _) = call(&st, "GET", "/no/such/route", None, "").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Health is open; readiness without a supervisor only needs the store.
    assert_eq!(call(&st, "GET", "/healthz", None, "").await.0, StatusCode::OK);
    assert_eq!(call(&st, "GET", "/readyz", None, "").await.0, StatusCode::OK);
    let (s, doc) = call(&st, "GET", "/v1/openapi.json", Some("secret"), "").await;
    assert_eq!(s, StatusCode::OK);
    for p in [
        "/v1/jobs",
        "/v1/jobs/{id}",
        "/v1/blobs",
        "/v1/blobs/{id}",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        assert!(doc["paths"][p].is_object(), "{p} missing");
    }
}

/// `priority` and `queue_timeout_s`: out of range is a 400 naming the field; a stored job
/// shows both; past its queue timeout a job that never started fails as `expired`.
#[tokio::test]
async fn priorities_and_queue_timeouts_are_checked_stored_and_expire() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path());
    let job = |extra: Value| {
        let mut j = json!({"kind": "price", "inputs": {"options": [{"option_type": "put", "style": "european", "spot": 10.0, "strike": 11.0, "rate": 0.0, "dividend": 0.0, "volatility": 0.3, "maturity": 0.5}]}});
        for (k, v) in extra.as_object().unwrap() {
            j[k] = v.clone();
        }
        j.to_string()
    };
    for (extra, field) in [
        (json!({"priority": 1001}), "priority = 1001"),
        (json!({"priority": -1001}), "priority = -1001"),
        (json!({"queue_timeout_s": 0}), "queue_timeout_s = 0"),
        (
            json!({"queue_timeout_s": 1_000_000_000}),
            "queue_timeout_s = 1000000000",
        ),
    ] {
        let (s, b) = call(&st, "POST", "/v1/jobs", Some("secret"), &job(extra)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        let msg = b["error"]["message"].as_str().unwrap();
        assert!(msg.contains(field), "{msg}");
    }
    let (s, b) = call(
        &st,
        "POST",
        "/v1/jobs",
        Some("secret"),
        &job(json!({"priority": 7, "queue_timeout_s": 1})),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    assert_eq!(b["priority"], 7);
    let created = b["created_ms"].as_i64().unwrap();
    assert_eq!(b["queue_until_ms"].as_i64(), Some(created + 1000));
    let id = b["id"].as_str().unwrap().to_string();
    // No worker runs here: past the timeout, the keeper's sweep fails it.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let gone = st.store.expire_queued().await.unwrap();
    assert_eq!(gone.len(), 1);
    let (s, b) = call(&st, "GET", &format!("/v1/jobs/{id}"), Some("secret"), "").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (b["state"].as_str(), b["error"]["code"].as_str()),
        (Some("failed"), Some("expired"))
    );
    assert!(b["started_ms"].is_null(), "it never ran: {b}");
    let (_, doc) = call(&st, "GET", "/v1/openapi.json", Some("secret"), "").await;
    let props = &doc["components"]["schemas"]["SubmitRequest"]["properties"];
    assert!(
        props["priority"].is_object() && props["queue_timeout_s"].is_object(),
        "{props}"
    );
}

/// A job whose worker never finishes (its lease left to run out on every attempt) fails as
/// `lease_expired` at the lease sweep after its last attempt instead of going round the
/// queue for ever: the sweep wakes its `?wait=` watcher (not before: a re-queue is no end),
/// counts it failed and releases its admission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_worker_never_finishes_fails_after_its_attempts() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServiceConfig::default();
    cfg.workers.max_attempts = 2;
    let st = app_support::state(dir.path(), cfg);
    let job = json!({"kind": "price", "inputs": {"options": [{"option_type": "put", "style": "european", "spot": 10.0, "strike": 11.0, "rate": 0.0, "dividend": 0.0, "volatility": 0.3, "maturity": 0.5}]}});
    let id = app_support::submit_job(&st, &job).await;
    assert_eq!(st.hub.in_flight(), 1);
    let waiter = tokio::spawn({
        let (st, id) = (st.clone(), id.clone());
        async move { call(&st, "GET", &format!("/v1/jobs/{id}?wait=60"), Some("secret"), "").await }
    });
    for attempt in 1..=2u32 {
        let c = st
            .store
            .claim("n_test/0", false, None, 1, Duration::from_millis(1))
            .await
            .unwrap();
        assert_eq!((c.len(), c[0].attempt), (1, attempt));
        tokio::time::sleep(Duration::from_millis(40)).await;
        let w = st.hub.watch(&id);
        let woken = w.notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let swept = kiln_service::server::sweep_leases(&*st.store, &st.hub, &st.metrics, "n_test")
            .await
            .unwrap();
        let told = tokio::time::timeout(Duration::ZERO, woken).await.is_ok();
        if attempt == 1 {
            assert_eq!((swept.requeued, swept.failed.len(), told), (1, 0, false));
        } else {
            assert_eq!((swept.requeued, swept.failed.len(), told), (0, 1, true));
        }
    }
    let (s, b) = waiter.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (
            b["state"].as_str(),
            b["attempts"].as_u64(),
            b["error"]["code"].as_str()
        ),
        (Some("failed"), Some(2), Some("lease_expired"))
    );
    let msg = b["error"]["message"].as_str().unwrap();
    assert!(msg.contains("lease expired on attempt 2 of 2"), "{msg}");
    assert_eq!(st.hub.in_flight(), 0, "its admission is released");
    let metrics = st.metrics.encode();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("kiln_service_jobs_finished")
                && l.contains("state=\"failed\"")
                && l.ends_with(" 1")),
        "{metrics}"
    );
}
