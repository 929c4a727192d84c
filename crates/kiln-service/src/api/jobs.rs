//! `/v1/jobs`: submit, get (optionally waiting), cancel, list.

use super::types::{JobList, JobView, ListParams, SubmitRequest, WaitQuery};
use super::{read_body, St};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorResponse};
use crate::store::{now_ms, Inserted, JobRecord, JobState, ListQuery, NewJob};
use crate::task::{self, BlobLookup};
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(v)| v)
        .map_err(|e| ApiError::MalformedRequest(format!("query string: {}", e.body_text())))
}

/// Blob lookups during validation (on a blocking thread): the caller's unexpired blobs only.
struct Blobs {
    store: Arc<dyn crate::store::JobStore>,
    principal: String,
    handle: tokio::runtime::Handle,
    /// `blobs.ttl_s` and `results.ttl_s`, ms: uploads and result blobs older are gone.
    ttl_ms: (i64, i64),
}

impl BlobLookup for Blobs {
    fn blob(&self, id: &str) -> Option<(PathBuf, String)> {
        if !crate::ids::is_valid(id) {
            return None;
        }
        let b = self.handle.block_on(self.store.get_blob(id)).ok()??;
        let ttl = if b.job_id.is_some() {
            self.ttl_ms.1
        } else {
            self.ttl_ms.0
        };
        let live = now_ms().saturating_sub(b.created_ms) <= ttl;
        (b.principal == self.principal && live).then_some((b.path, b.format))
    }
}

/// Seconds as ms, saturating.
fn ms(secs: u64) -> i64 {
    secs.saturating_mul(1000).min(i64::MAX as u64) as i64
}

fn view(job: JobRecord, status: StatusCode) -> Response {
    (status, Json(JobView::from(job))).into_response()
}

/// Wait until the job is terminal or `secs` pass; the job as it then is.
async fn wait_for(st: &super::AppState, id: &str, secs: f64) -> Result<JobRecord, ApiError> {
    let w = st.hub.watch(id);
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(secs.max(0.0));
    loop {
        let n = w.notify.notified();
        tokio::pin!(n);
        n.as_mut().enable();
        let job = st.store.get(id).await?.ok_or_else(|| ApiError::NotFound {
            what: "job",
            id: id.to_string(),
        })?;
        if job.state.is_terminal() || tokio::time::Instant::now() >= deadline {
            return Ok(job);
        }
        tokio::select! {
            _ = &mut n => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

fn answer(job: JobRecord) -> Response {
    let status = if job.state.is_terminal() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    view(job, status)
}

/// Submit a job.
#[utoipa::path(
    post, path = "/v1/jobs", tag = "jobs",
    request_body = SubmitRequest,
    params(WaitQuery, ("Idempotency-Key" = Option<String>, Header, description = "A retried submit with the same key returns the first job")),
    responses(
        (status = 202, description = "Accepted and stored", body = JobView),
        (status = 200, description = "Finished within ?wait=", body = JobView),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 403, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 422, body = ErrorResponse), (status = 429, body = ErrorResponse),
    ),
    security(("bearer" = []))
)]
pub async fn submit(
    st: St,
    Extension(p): Extension<Arc<Principal>>,
    q: Result<Query<WaitQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let st = st.0;
    let q = query(q)?;
    if !st.accepting.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(ApiError::Unavailable("the server is shutting down".into()));
    }
    let bytes = read_body(&headers, body, st.cfg.limits.max_body_bytes).await?;
    let req: SubmitRequest = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::MalformedRequest(format!("the body is not a valid job request: {e}")))?;
    // Authorization before validation: a kind the server has switched off, or the token may
    // not submit, gets its 403 before any of its params or inputs (blob lookups included)
    // are looked at. Without the fault flag `fault` is no kind at all, so validation answers
    // `unknown_kind` as for any name.
    if req.kind == crate::auth::USER_KERNEL_KIND && !st.cfg.allow_user_kernels {
        st.metrics.rejected("forbidden");
        return Err(ApiError::KindOff(crate::user_kernel::OFF_MESSAGE.into()));
    }
    let fault_off = req.kind == crate::auth::FAULT_KIND && !st.cfg.allow_fault_injection;
    if !fault_off && !p.may_submit(&req.kind) {
        st.metrics.rejected("forbidden");
        return Err(ApiError::Forbidden { kind: req.kind });
    }
    if req.deadline_s == Some(0) {
        return Err(ApiError::InvalidParams(
            "deadline_s = 0; it must be at least 1 (seconds from submission)".into(),
        ));
    }
    let limit_s = st.cfg.limits.job_deadline_s;
    if let Some(q) = req.queue_timeout_s.filter(|&q| q == 0 || q > limit_s) {
        return Err(ApiError::InvalidParams(format!(
            "queue_timeout_s = {q}; it must be 1..={limit_s} (seconds from submission; the \
             server's limits.job_deadline_s)"
        )));
    }
    if let Some(p) = req.priority.filter(|p| !super::types::PRIORITIES.contains(p)) {
        return Err(ApiError::InvalidParams(format!(
            "priority = {p}; it must be {}..={} (higher runs first)",
            super::types::PRIORITIES.start(),
            super::types::PRIORITIES.end()
        )));
    }
    let idem = match headers.get("idempotency-key") {
        Some(v) => {
            let k = v
                .to_str()
                .ok()
                .filter(|k| !k.is_empty() && k.len() <= 255)
                .ok_or_else(|| {
                    ApiError::MalformedRequest(
                        "Idempotency-Key must be 1..=255 visible ASCII characters".into(),
                    )
                })?;
            Some(k.to_string())
        }
        None => None,
    };
    let lookup = Blobs {
        store: st.store.clone(),
        principal: p.name.clone(),
        handle: tokio::runtime::Handle::current(),
        ttl_ms: (ms(st.cfg.blobs.ttl_s), ms(st.cfg.results.ttl_s)),
    };
    let max_el = st.cfg.limits.max_elements;
    let (fault, user) = (st.cfg.allow_fault_injection, st.cfg.allow_user_kernels);
    let (kind, params, inputs) = (req.kind.clone(), req.params, req.inputs);
    let v = tokio::task::spawn_blocking(move || {
        task::validate(&kind, &params, &inputs, max_el, fault, user, &lookup)
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    if v.needs_gpu && no_gpu_anywhere(&st) {
        return Err(ApiError::InvalidParams(format!(
            "this `{}` job needs a GPU worker (a raw CUDA kernel, or an element-wise kernel with a \
             preamble) and this server has none (workers.gpus, workers.groups): no worker could \
             ever run it",
            req.kind
        )));
    }
    let per_token = p.max_in_flight.unwrap_or(st.cfg.limits.max_in_flight_per_token);
    st.hub.admit(&p.name, per_token, st.cfg.limits.max_queue)?;
    let now = now_ms();
    let id = crate::ids::new_id("j");
    let task_json = serde_json::to_string(&v.task).map_err(|e| ApiError::Internal(e.to_string()))?;
    let new = NewJob {
        id: id.clone(),
        kind: req.kind.clone(),
        batch_key: batch_key(&v.batch_key, &p.name, req.deadline_s.is_some(), &id),
        needs_gpu: v.needs_gpu,
        principal: p.name.clone(),
        idempotency_key: idem.clone(),
        request_hash: hex::encode(Sha256::digest(&bytes)),
        task: task_json,
        elements: v.elements,
        max_attempts: st.cfg.workers.max_attempts,
        deadline_ms: req.deadline_s.map(|d| now + (d.min(limit_s) * 1000) as i64),
        priority: req.priority.unwrap_or(0),
        queue_until_ms: req.queue_timeout_s.map(|q| now + (q * 1000) as i64),
        created_ms: now,
    };
    let inserted = match st.store.insert(new).await {
        Ok(i) => i,
        Err(e) => {
            st.hub.release(&p.name);
            return Err(e.into());
        }
    };
    let job = match inserted {
        Inserted::Created(job) => {
            st.metrics.submitted(&job.kind);
            st.hub.wake.notify_waiters();
            job
        }
        Inserted::Existing { job, same_request } => {
            st.hub.release(&p.name);
            if !same_request {
                return Err(ApiError::IdempotencyMismatch {
                    key: idem.unwrap_or_default(),
                    job: job.id,
                });
            }
            job
        }
    };
    let wait = q.wait.unwrap_or(0.0).min(st.cfg.limits.max_wait_s as f64);
    if wait > 0.0 && !job.state.is_terminal() {
        return Ok(answer(wait_for(&st, &job.id, wait).await?));
    }
    if job.state.is_terminal() {
        return Ok(view(job, StatusCode::OK));
    }
    Ok(view(job, StatusCode::ACCEPTED))
}

/// Whether no worker could claim a GPU-only job: this server runs its slots without a GPU
/// and no other node shares its queue. (With a shared store another node's GPU worker may
/// claim it, so it is accepted.)
fn no_gpu_anywhere(st: &super::AppState) -> bool {
    !st.store.is_shared() && st.supervisor.as_ref().is_some_and(|s| !s.has_gpu_slot())
}

/// The store's batch key: batches never mix tokens (one token's deadline, failure or
/// batch size never reaches another's jobs), and a job with its own `deadline_s` runs in a
/// batch of its own, so a merged batch has one deadline, the server's, for all its jobs.
fn batch_key(task_key: &str, principal: &str, own_deadline: bool, id: &str) -> String {
    if own_deadline {
        format!("solo:{id}")
    } else {
        // the length makes the split unambiguous whatever the name holds
        format!("{}:{principal}|{task_key}", principal.len())
    }
}

async fn owned(st: &super::AppState, p: &Principal, id: &str) -> Result<JobRecord, ApiError> {
    let nf = || ApiError::NotFound {
        what: "job",
        id: id.chars().take(64).collect(),
    };
    if !crate::ids::is_valid(id) {
        return Err(nf());
    }
    let job = st.store.get(id).await?.ok_or_else(nf)?;
    if job.principal != p.name {
        return Err(nf());
    }
    // Past `results.ttl_s` a finished job is gone, whether or not the sweep has run yet.
    let ttl = ms(st.cfg.results.ttl_s);
    if job.finished_ms.is_some_and(|f| now_ms().saturating_sub(f) > ttl) {
        return Err(nf());
    }
    Ok(job)
}

/// A job, with its result once finished; `?wait=` waits for the end.
#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id"), WaitQuery),
    responses((status = 200, body = JobView), (status = 202, description = "Still queued or running after ?wait=", body = JobView), (status = 404, body = ErrorResponse)),
    security(("bearer" = []))
)]
pub async fn get_job(
    st: St,
    Extension(p): Extension<Arc<Principal>>,
    Path(id): Path<String>,
    q: Result<Query<WaitQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let job = owned(&st.0, &p, &id).await?;
    let wait = q.wait.unwrap_or(0.0).min(st.0.cfg.limits.max_wait_s as f64);
    if wait > 0.0 && !job.state.is_terminal() {
        return Ok(answer(wait_for(&st.0, &id, wait).await?));
    }
    Ok(view(job, StatusCode::OK))
}

/// Cancel a job: a queued job never runs; a running one's result is discarded.
#[utoipa::path(
    delete, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, body = JobView), (status = 404, body = ErrorResponse)),
    security(("bearer" = []))
)]
pub async fn cancel_job(
    st: St,
    Extension(p): Extension<Arc<Principal>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let before = owned(&st.0, &p, &id).await?;
    let after = st.0.store.cancel(&id).await?.ok_or_else(|| ApiError::NotFound {
        what: "job",
        id: id.clone(),
    })?;
    if !before.state.is_terminal() && after.state == JobState::Cancelled {
        let latency = (now_ms() - after.created_ms).max(0) as f64 / 1e3;
        st.0.metrics.finished(&after.kind, "cancelled", latency);
        st.0.hub.finished(&after.id, &after.principal);
    }
    Ok(view(after, StatusCode::OK))
}

/// The caller's jobs, newest first.
#[utoipa::path(
    get, path = "/v1/jobs", tag = "jobs",
    params(ListParams),
    responses((status = 200, body = JobList), (status = 400, body = ErrorResponse)),
    security(("bearer" = []))
)]
pub async fn list_jobs(
    st: St,
    Extension(p): Extension<Arc<Principal>>,
    q: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<JobList>, ApiError> {
    let q = query(q)?;
    let state = match q.state.as_deref() {
        None | Some("") => None,
        Some(s) => Some(JobState::parse(s).ok_or_else(|| {
            ApiError::MalformedRequest(format!(
                "state = `{s}`; use queued, running, succeeded, failed or cancelled"
            ))
        })?),
    };
    let cursor = match q.cursor.as_deref() {
        None | Some("") => None,
        Some(c) => Some(c.parse::<i64>().map_err(|_| {
            ApiError::MalformedRequest(format!("cursor = `{c}` is not a cursor from this server"))
        })?),
    };
    let page =
        st.0.store
            .list(ListQuery {
                principal: Some(p.name.clone()),
                state,
                limit: q.limit.unwrap_or(100).clamp(1, 1000),
                cursor,
            })
            .await?;
    Ok(Json(JobList {
        jobs: page.jobs.into_iter().map(JobView::from).collect(),
        next_cursor: page.next_cursor.map(|c| c.to_string()),
    }))
}
