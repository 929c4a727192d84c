//! The HTTP API: [`app`] builds the router (tests drive it without a socket), the
//! middleware (auth on `/v1`, request timeouts, response counting, panics as 500s), and the
//! OpenAPI document generated from the handlers' annotations.

mod blobs;
mod jobs;
mod ops;
mod streamed;
mod submit;
pub mod types;

use crate::auth::{Principal, TokenSet};
use crate::config::ServiceConfig;
use crate::error::ApiError;
use crate::hub::Hub;
use crate::metrics::ServiceMetrics;
use crate::store::JobStore;
use crate::supervisor::Shared;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use utoipa::OpenApi;

/// What the handlers share.
pub struct AppState {
    /// The job store.
    pub store: Arc<dyn JobStore>,
    /// The configuration.
    pub cfg: ServiceConfig,
    /// The tokens.
    pub tokens: TokenSet,
    /// Admission, watchers, wake-ups.
    pub hub: Arc<Hub>,
    /// Metrics.
    pub metrics: Arc<ServiceMetrics>,
    /// The supervisor (absent in tests without workers).
    pub supervisor: Option<Arc<Shared>>,
    /// Cleared when shutting down: submissions get 503.
    pub accepting: AtomicBool,
    /// Where blobs live.
    pub blob_dir: PathBuf,
}

type St = State<Arc<AppState>>;

#[derive(OpenApi)]
#[openapi(
    info(title = "kiln job service", description = "Durable GPU jobs: pricing, filtering, GEMM, element-wise maps, users' own kernels."),
    paths(
        submit::submit,
        submit::submit_batch,
        jobs::get_job,
        jobs::cancel_job,
        jobs::list_jobs,
        blobs::put_blob,
        blobs::get_blob,
        blobs::delete_blob,
        ops::workers,
        ops::nodes,
        ops::healthz,
        ops::readyz,
        ops::metrics
    ),
    components(schemas(
        types::SubmitRequest,
        types::BatchRequest,
        types::BatchResponse,
        types::JobView,
        types::JobList,
        types::BlobView,
        types::Health,
        crate::store::JobState,
        crate::store::ShardCounts,
        crate::error::ErrorResponse,
        crate::error::ErrorBody,
        crate::supervisor::WorkerStatus,
        crate::store::NodeRecord
    )),
    modifiers(&Bearer)
)]
struct ApiDoc;

struct Bearer;

impl utoipa::Modify for Bearer {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let c = api.components.get_or_insert_with(Default::default);
        c.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The OpenAPI document.
pub fn openapi() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The router: `/v1/*` behind bearer auth, `/healthz`, `/readyz`, `/metrics` open.
pub fn app(state: Arc<AppState>) -> Router {
    let v1 = Router::new()
        .route("/v1/jobs", get(jobs::list_jobs).post(submit::submit))
        .route("/v1/jobs:batch", axum::routing::post(submit::submit_batch))
        .route("/v1/jobs/{id}", get(jobs::get_job).delete(jobs::cancel_job))
        .route("/v1/blobs", axum::routing::post(blobs::put_blob))
        .route("/v1/blobs/{id}", get(blobs::get_blob).delete(blobs::delete_blob))
        .route("/v1/workers", get(ops::workers))
        .route("/v1/nodes", get(ops::nodes))
        .route("/v1/openapi.json", get(ops::openapi_json))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .merge(v1)
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .fallback(|| async {
            ApiError::NotFound {
                what: "route",
                id: "(this path)".into(),
            }
        })
        .layer(middleware::from_fn_with_state(state.clone(), outer))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| {
            ApiError::Internal("the handler panicked".into()).into_response()
        }))
        .with_state(state)
}

async fn auth(State(st): St, mut req: Request, next: Next) -> Response {
    let h = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match st.tokens.authenticate(h) {
        Some(p) => {
            req.extensions_mut().insert::<Arc<Principal>>(p);
            next.run(req).await
        }
        None => {
            st.metrics.rejected("unauthorized");
            ApiError::Unauthorized.into_response()
        }
    }
}

/// The `wait=` of a query string, seconds (0 if absent or unparsable).
fn wait_of(query: Option<&str>) -> f64 {
    query
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("wait="))
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
        .unwrap_or(0.0)
}

/// Request timeout (plus any `?wait=`) and response counting.
async fn outer(State(st): St, req: Request, next: Next) -> Response {
    let wait = wait_of(req.uri().query()).min(st.cfg.limits.max_wait_s as f64);
    let limit = st.cfg.request_timeout() + Duration::from_secs_f64(wait);
    let r = match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError::Timeout(limit.as_secs()).into_response(),
    };
    let r = error_shape(r).await;
    let status = r.status();
    st.metrics.response(status.as_u16());
    match status.as_u16() {
        413 => st.metrics.rejected("payload_too_large"),
        429 => st.metrics.rejected("too_many_requests"),
        _ => {}
    }
    r
}

/// An error answered by axum itself rather than a handler (a path that does not decode, a
/// method the route does not take: plain text or an empty body) in the one error shape,
/// `{"error": {"code", "message"}}`, with its status kept.
async fn error_shape(r: Response) -> Response {
    let status = r.status();
    let json = r
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return r;
    }
    let (mut parts, body) = r.into_parts();
    use http_body_util::BodyExt;
    let text = match http_body_util::Limited::new(body, 4096).collect().await {
        Ok(c) => String::from_utf8_lossy(&c.to_bytes()).trim().to_string(),
        Err(_) => String::new(),
    };
    let code = match status.as_u16() {
        400 => "malformed_request",
        404 => "not_found",
        405 => "method_not_allowed",
        s if s >= 500 => "internal",
        _ => "bad_request",
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        text
    };
    let body = crate::error::ErrorResponse {
        error: crate::error::ErrorBody {
            code: code.into(),
            message,
        },
    };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    let mut out = (status, axum::Json(body)).into_response();
    for (k, v) in parts.headers.iter() {
        if k != axum::http::header::CONTENT_TYPE {
            out.headers_mut().insert(k.clone(), v.clone());
        }
    }
    out
}

/// Read a body up to `limit` bytes (413 beyond).
async fn read_body(
    headers: &axum::http::HeaderMap,
    body: Body,
    limit: u64,
) -> Result<axum::body::Bytes, ApiError> {
    use http_body_util::BodyExt;
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    match http_body_util::Limited::new(body, limit as usize).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::PayloadTooLarge { limit }),
        Err(e) => Err(ApiError::MalformedRequest(format!("reading the body: {e}"))),
    }
}
