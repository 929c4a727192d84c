//! `POST /v1/jobs:batch` through the router (no socket, no workers: jobs stay queued): the
//! jobs stored in order with one answer each, all or nothing (a bad job is named by its
//! index and field, and none is stored), the batch size limit, the token's kinds and
//! in-flight limit applied to the batch as a whole, idempotent retries, and its entry in
//! the OpenAPI document.
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln_service::api::AppState;
use kiln_service::auth::hash_token;
use kiln_service::config::{ServiceConfig, TokenConfig};
use serde_json::{json, Value};
use std::sync::Arc;

fn price(spot: f64) -> Value {
    json!({"kind": "price", "inputs": {"options": [{"option_type": "call", "style": "european",
        "spot": spot, "strike": 100.0, "rate": 0.01, "dividend": 0.0, "volatility": 0.2, "maturity": 1.0}]}})
}

fn map(data: Value) -> Value {
    json!({"kind": "elementwise", "params": {"op": "relu"}, "inputs": {"x": {"data": data}}})
}

async fn post(st: &Arc<AppState>, token: &str, body: &Value, idem: Option<&str>) -> (StatusCode, Value) {
    use axum::body::Body;
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let mut req = axum::http::Request::builder()
        .method("POST")
        .uri("/v1/jobs:batch")
        .header("authorization", format!("Bearer {token}"));
    if let Some(k) = idem {
        req = req.header("idempotency-key", k);
    }
    let r = kiln_service::api::app(st.clone())
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = r.status();
    let bytes = r.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// The ids of the caller's jobs, oldest first.
async fn listed(st: &Arc<AppState>, token: &str) -> Vec<String> {
    let (s, b) = app_support::call(st, "GET", "/v1/jobs?limit=1000", Some(token), vec![]).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let mut ids: Vec<String> = b["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect();
    ids.reverse();
    ids
}

fn message(b: &Value) -> &str {
    b["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_batch_is_stored_in_order_with_one_answer_per_job() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), ServiceConfig::default());
    let jobs: Vec<Value> = (0..20).map(|i| price(90.0 + i as f64)).collect();
    let (s, b) = post(&st, "secret", &json!({ "jobs": jobs }), None).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let answers = b["jobs"].as_array().unwrap();
    assert_eq!(answers.len(), 20);
    assert!(answers
        .iter()
        .all(|j| j["state"] == "queued" && j["kind"] == "price"));
    let ids: Vec<String> = answers
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed(&st, "secret").await, ids, "stored in the batch's order");
    let (s, b) = app_support::call(
        &st,
        "GET",
        &format!("/v1/jobs/{}", ids[3]),
        Some("secret"),
        vec![],
    )
    .await;
    assert_eq!((s, b["state"].as_str()), (StatusCode::OK, Some("queued")));
    // scheduling fields per job, as a single submit takes them
    let (s, b) = post(
        &st,
        "secret",
        &json!({"jobs": [price(1.0), {"kind": "price", "inputs": price(2.0)["inputs"], "priority": 7, "queue_timeout_s": 60}]}),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    assert_eq!(
        (
            b["jobs"][0]["priority"].as_i64(),
            b["jobs"][1]["priority"].as_i64()
        ),
        (Some(0), Some(7))
    );
    assert!(b["jobs"][1]["queue_until_ms"].is_i64());
}

#[tokio::test]
async fn one_bad_job_is_named_and_none_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), ServiceConfig::default());
    let cases = [
        (
            map(json!([1.0, 2.0, null])),
            "jobs[1]: inputs.x.data[2]: null is not a number",
        ),
        (
            map(json!([1.0, "3"])),
            "jobs[1]: inputs.x.data[1]: \"3\" (a string) is not a number",
        ),
        (
            map(json!([1e39])),
            "jobs[1]: inputs.x.data[0]: 1e+39 is outside float32's range",
        ),
        (
            json!({"kind": "price", "inputs": {}, "colour": 1}),
            "jobs[1]: not a valid job request: unknown field `colour`",
        ),
        (json!({"kind": "nope"}), "jobs[1]: unknown job kind `nope`"),
        (
            json!({"kind": "price", "inputs": price(1.0)["inputs"], "priority": 5000}),
            "jobs[1]: priority = 5000",
        ),
        (
            json!({"kind": "price", "inputs": price(1.0)["inputs"], "queue_timeout_s": 0}),
            "jobs[1]: queue_timeout_s = 0",
        ),
        (
            json!({"kind": "price", "inputs": price(1.0)["inputs"], "deadline_s": 0}),
            "jobs[1]: deadline_s = 0",
        ),
    ];
    for (bad, want) in cases {
        let body = json!({"jobs": [price(100.0), bad, price(101.0)]});
        let (s, b) = post(&st, "secret", &body, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert!(message(&b).starts_with(want), "{want}\n{b}");
    }
    assert!(
        listed(&st, "secret").await.is_empty(),
        "no job of a refused batch is stored"
    );
    // not a batch at all
    for (body, want) in [
        (json!({"jobs": []}), "the batch holds no jobs"),
        (json!([price(1.0)]), "the body is not a valid batch"),
        (
            json!({"jobs": [price(1.0)], "more": 1}),
            "the body is not a valid batch",
        ),
        (json!({"jobs": [7]}), "jobs[0]: not a valid job request"),
    ] {
        let (s, b) = post(&st, "secret", &body, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert!(message(&b).starts_with(want), "{want}\n{b}");
    }
}

#[tokio::test]
async fn the_batch_size_the_tokens_kinds_and_its_in_flight_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServiceConfig::default();
    cfg.limits.max_batch_jobs = 8;
    let tokens = [
        TokenConfig {
            name: "small".into(),
            sha256: Some(hash_token("small")),
            max_in_flight: Some(5),
            ..Default::default()
        },
        TokenConfig {
            name: "pricer".into(),
            sha256: Some(hash_token("pricer")),
            kinds: Some(vec!["price".into()]),
            ..Default::default()
        },
    ];
    let st = app_support::state_with_tokens(dir.path(), cfg, &tokens);
    let n = |k: usize| json!({ "jobs": (0..k).map(|i| price(100.0 + i as f64)).collect::<Vec<_>>() });
    let (s, b) = post(&st, "pricer", &n(9), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(message(&b).contains("limits.max_batch_jobs"), "{b}");
    // a kind the token may not submit: 403 naming the job
    let (s, b) = post(
        &st,
        "pricer",
        &json!({"jobs": [price(1.0), map(json!([1.0]))]}),
        None,
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("forbidden")),
        "{b}"
    );
    assert!(message(&b).starts_with("jobs[1]: "), "{b}");
    // the in-flight limit holds for the batch as a whole
    let (s, b) = post(&st, "small", &n(6), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "a batch that can never fit: {b}");
    assert!(message(&b).contains("max_in_flight"), "{b}");
    let (s, b) = post(&st, "small", &n(4), None).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let (s, b) = post(&st, "small", &n(2), None).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("too_many_in_flight")),
        "{b}"
    );
    assert_eq!(
        listed(&st, "small").await.len(),
        4,
        "the refused batch stored nothing"
    );
    let (s, b) = post(&st, "small", &n(1), None).await;
    assert_eq!(s, StatusCode::ACCEPTED, "the room left is still there: {b}");
    assert_eq!(st.hub.in_flight(), 5);
}

#[tokio::test]
async fn a_retried_batch_returns_its_jobs_and_a_changed_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), ServiceConfig::default());
    let body = json!({"jobs": [price(1.0), price(2.0), price(3.0)]});
    let (s, first) = post(&st, "secret", &body, Some("batch-7")).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{first}");
    let (s, again) = post(&st, "secret", &body, Some("batch-7")).await;
    assert_eq!(s, StatusCode::OK, "a retry: {again}");
    let ids = |b: &Value| -> Vec<String> {
        b["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&first), ids(&again));
    assert_eq!(st.hub.in_flight(), 3, "a retry admits nothing");
    let changed = json!({"jobs": [price(1.0), price(9.0), price(3.0), price(4.0)]});
    let (s, b) = post(&st, "secret", &changed, Some("batch-7")).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("idempotency_mismatch")),
        "{b}"
    );
    assert!(message(&b).starts_with("jobs[1]: "), "{b}");
    assert_eq!(
        listed(&st, "secret").await.len(),
        3,
        "job 3 of the changed batch was not stored"
    );
    assert_eq!(st.hub.in_flight(), 3);
}

#[tokio::test]
async fn the_batch_is_in_the_openapi_document() {
    let doc = serde_json::to_value(kiln_service::api::openapi()).unwrap();
    let post = &doc["paths"]["/v1/jobs:batch"]["post"];
    assert!(post.is_object(), "{}", doc["paths"]);
    assert!(post["responses"]["202"].is_object() && post["responses"]["400"].is_object());
    assert!(doc["components"]["schemas"]["BatchRequest"].is_object());
}
