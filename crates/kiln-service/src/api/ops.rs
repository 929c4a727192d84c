//! Health, readiness, metrics, workers and the OpenAPI document.

use super::types::Health;
use super::St;
use crate::store::NodeRecord;
use crate::supervisor::WorkerStatus;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, body = Health)))]
pub async fn healthz(st: St) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        workers_up: st.0.supervisor.as_ref().map_or(0, |s| s.workers_up()),
        reasons: Vec::new(),
    })
}

/// Readiness: the store answers, at least one worker is up, no worker slot is faulted (its
/// worker ended by a sticky CUDA fault and the replacement is not ready yet), and the
/// server accepts jobs.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses((status = 200, body = Health), (status = 503, body = Health)))]
pub async fn readyz(st: St) -> Response {
    let mut reasons = Vec::new();
    if let Err(e) = st.0.store.ping().await {
        reasons.push(format!("store: {e}"));
    }
    let up = st.0.supervisor.as_ref().map_or(0, |s| s.workers_up());
    if st.0.supervisor.is_some() && up == 0 {
        reasons.push("no worker is up (see /v1/workers and the server log)".into());
    }
    if let Some(s) = &st.0.supervisor {
        reasons.extend(s.fault_reasons());
    }
    if !st.0.accepting.load(std::sync::atomic::Ordering::SeqCst) {
        reasons.push("shutting down".into());
    }
    let ok = reasons.is_empty();
    let h = Health {
        status: if ok { "ok" } else { "not_ready" }.into(),
        workers_up: up,
        reasons,
    };
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(h)).into_response()
}

/// Prometheus / OpenMetrics exposition.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "OpenMetrics text")))]
pub async fn metrics(st: St) -> Response {
    (
        [(header::CONTENT_TYPE, kiln_monitor::metrics::CONTENT_TYPE)],
        st.0.metrics.encode(),
    )
        .into_response()
}

/// The worker slots.
#[utoipa::path(get, path = "/v1/workers", tag = "operations", responses((status = 200, body = [WorkerStatus])), security(("bearer" = [])))]
pub async fn workers(st: St) -> Json<Vec<WorkerStatus>> {
    Json(
        st.0.supervisor
            .as_ref()
            .map(|s| s.workers.lock().map(|g| g.clone()).unwrap_or_default())
            .unwrap_or_default(),
    )
}

/// The nodes sharing this node's job store (one, with SQLite), most recently started
/// first; `alive` is false for a node whose heartbeat is older than the lease.
#[utoipa::path(get, path = "/v1/nodes", tag = "operations", responses((status = 200, body = [NodeRecord]), (status = 500, body = crate::error::ErrorResponse)), security(("bearer" = [])))]
pub async fn nodes(st: St) -> Result<Json<Vec<NodeRecord>>, crate::error::ApiError> {
    Ok(Json(st.0.store.nodes().await?))
}

/// The OpenAPI document.
pub async fn openapi_json() -> Response {
    match super::openapi().to_json() {
        Ok(s) => ([(header::CONTENT_TYPE, "application/json")], s).into_response(),
        Err(e) => crate::error::ApiError::Internal(e.to_string()).into_response(),
    }
}
