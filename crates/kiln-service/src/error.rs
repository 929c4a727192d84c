//! The service's errors and their one mapping to HTTP: status, stable code and headers are
//! decided in one exhaustive `match` ([`ApiError::parts`]), so a new variant cannot reach a
//! client unmapped. The body is always `{"error": {"code": "...", "message": "..."}}`.

use crate::store::StoreFault;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error answered to a client.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No bearer token, or one that matches none configured.
    #[error("a valid bearer token is required (Authorization: Bearer TOKEN)")]
    Unauthorized,
    /// The token may not submit this kind of job.
    #[error("this token may not submit `{kind}` jobs")]
    Forbidden {
        /// The kind refused.
        kind: String,
    },
    /// The kind is one this server has switched off (`user_kernel` without
    /// `allow_user_kernels`); the message names the setting that turns it on.
    #[error("{0}")]
    KindOff(String),
    /// The body is not JSON, or not the request's shape.
    #[error("{0}")]
    MalformedRequest(String),
    /// The job kind is not one the service runs.
    #[error("unknown job kind `{kind}`; the kinds are {known}")]
    UnknownKind {
        /// What was asked for.
        kind: String,
        /// The kinds this server accepts.
        known: String,
    },
    /// The parameters or inputs are not valid for the kind.
    #[error("{0}")]
    InvalidParams(String),
    /// No such job or blob (or not the caller's).
    #[error("no {what} `{id}`")]
    NotFound {
        /// `job` or `blob`.
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// The idempotency key was used before for a different request.
    #[error("the Idempotency-Key `{key}` was used for a different request (job {job})")]
    IdempotencyMismatch {
        /// The key.
        key: String,
        /// The job it names.
        job: String,
    },
    /// The body (or blob) exceeds its limit.
    #[error("the body exceeds the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The limit, bytes.
        limit: u64,
    },
    /// The token's uploaded blobs would take more than its quota.
    #[error(
        "this token's uploaded blobs take {used} bytes; with this one ({size} bytes) they would \
         pass its quota of {quota} bytes: delete blobs (DELETE /v1/blobs/ID) or let them expire"
    )]
    QuotaExceeded {
        /// Bytes the token's uploads take now.
        used: u64,
        /// Bytes of this upload (so far, when it was refused while streaming).
        size: u64,
        /// The quota (`blobs.max_bytes_per_token`).
        quota: u64,
    },
    /// The queue is full.
    #[error("the queue is full ({depth} jobs waiting); retry after {retry_after_s} s")]
    QueueFull {
        /// Jobs queued or running.
        depth: u64,
        /// Seconds to wait.
        retry_after_s: u64,
    },
    /// The token has its maximum of jobs in flight.
    #[error("this token has {in_flight} jobs in flight, its limit; retry after {retry_after_s} s")]
    TooManyInFlight {
        /// Jobs in flight for the token.
        in_flight: u64,
        /// Seconds to wait.
        retry_after_s: u64,
    },
    /// The request took longer than the request timeout.
    #[error("the request took longer than {0} s")]
    Timeout(u64),
    /// The server is shutting down or not ready.
    #[error("{0}")]
    Unavailable(String),
    /// One job of a batch submission was refused (so none was stored): its index and
    /// why, answered with that error's status and code.
    #[error("jobs[{index}]: {error}")]
    InBatch {
        /// The job's position in the batch, from 0.
        index: usize,
        /// Why it was refused.
        error: Box<ApiError>,
    },
    /// The job store failed.
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    /// Anything else (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}

/// The error body.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Stable, machine-readable code (`unauthorized`, `invalid_params`, `queue_full`, ...).
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
}

/// `{"error": {...}}`.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorResponse {
    /// The error.
    pub error: ErrorBody,
}

impl ApiError {
    /// Status, code and `Retry-After` seconds: the one mapping.
    pub fn parts(&self) -> (StatusCode, &'static str, Option<u64>) {
        match self {
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized", None),
            ApiError::Forbidden { .. } | ApiError::KindOff(_) => (StatusCode::FORBIDDEN, "forbidden", None),
            ApiError::MalformedRequest(_) => (StatusCode::BAD_REQUEST, "malformed_request", None),
            ApiError::UnknownKind { .. } => (StatusCode::BAD_REQUEST, "unknown_kind", None),
            ApiError::InvalidParams(_) => (StatusCode::BAD_REQUEST, "invalid_params", None),
            ApiError::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found", None),
            ApiError::IdempotencyMismatch { .. } => {
                (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_mismatch", None)
            }
            ApiError::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", None),
            ApiError::QuotaExceeded { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "quota_exceeded", None),
            ApiError::QueueFull { retry_after_s, .. } => {
                (StatusCode::TOO_MANY_REQUESTS, "queue_full", Some(*retry_after_s))
            }
            ApiError::TooManyInFlight { retry_after_s, .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_in_flight",
                Some(*retry_after_s),
            ),
            ApiError::Timeout(_) => (StatusCode::SERVICE_UNAVAILABLE, "timeout", Some(1)),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", Some(1)),
            ApiError::InBatch { error, .. } => error.parts(),
            // A database restarting or a full disk passes: a 503 to retry, with a code of
            // its own, not a 500. (A connection lost at commit may have stored a job: a
            // client retries with its Idempotency-Key.)
            ApiError::Store(e) => match e.fault() {
                StoreFault::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", Some(1)),
                StoreFault::Full => (StatusCode::SERVICE_UNAVAILABLE, "store_full", Some(5)),
                StoreFault::Failed => (StatusCode::INTERNAL_SERVER_ERROR, "store_error", None),
            },
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal", None),
        }
    }

    /// The JSON body.
    pub fn body(&self) -> ErrorResponse {
        ErrorResponse {
            error: ErrorBody {
                code: self.parts().1.to_string(),
                message: self.to_string(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, _, retry) = self.parts();
        if status.is_server_error() {
            tracing::warn!("{self}");
        }
        let mut r = (status, axum::Json(self.body())).into_response();
        if let Some(s) = retry {
            if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        r
    }
}

/// A service setup failure (config, bind, store): what `kiln serve` reports before serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is invalid.
    #[error("service config: {0}")]
    Config(String),
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// An I/O failure (bind, data dir, signals).
    #[error("{0}")]
    Io(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreError;

    #[test]
    fn store_failures_that_pass_are_503s_with_their_own_codes() {
        let parts = |e: StoreError| ApiError::Store(e).parts();
        assert_eq!(
            parts(StoreError::with_fault(
                StoreFault::Unavailable,
                "connection closed"
            )),
            (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", Some(1))
        );
        assert_eq!(
            parts(StoreError::with_fault(StoreFault::Full, "disk full")),
            (StatusCode::SERVICE_UNAVAILABLE, "store_full", Some(5))
        );
        assert_eq!(
            parts(StoreError::new("schema mismatch")),
            (StatusCode::INTERNAL_SERVER_ERROR, "store_error", None)
        );
    }
}
