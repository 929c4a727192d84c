//! `/v1/jobs`: get (optionally waiting), cancel, list; submissions are in `submit`.

use super::types::{JobList, JobView, ListParams, WaitQuery};
use super::St;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorResponse};
use crate::store::{now_ms, JobRecord, JobState, ListQuery};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Json};
use std::sync::Arc;
use std::time::Duration;

pub(super) fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(v)| v)
        .map_err(|e| ApiError::MalformedRequest(format!("query string: {}", e.body_text())))
}

/// Seconds as ms, saturating.
pub(super) fn ms(secs: u64) -> i64 {
    secs.saturating_mul(1000).min(i64::MAX as u64) as i64
}

/// The response for `job` with `status` (a sharded result kept as a manifest streamed:
/// `streamed`).
pub(super) fn view(st: &super::AppState, job: JobRecord, status: StatusCode) -> Response {
    super::streamed::view(&st.store, job, status)
}

/// Wait until the job is terminal or `secs` pass; the job as it then is.
pub(super) async fn wait_for(st: &super::AppState, id: &str, secs: f64) -> Result<JobRecord, ApiError> {
    let w = st.hub.watch(id);
    wait_watched(st, &w, id, secs, None).await
}

/// [`wait_for`] with the watch `w` of job `id` already registered and, in `job`, the job as
/// it was after the watch began (a submission's own insert), if known: the store is read
/// only once the job is reported ended, on a half-second safety look, or at the end of
/// the wait, never to learn that it is still queued.
pub(super) async fn wait_watched(
    st: &super::AppState,
    w: &crate::hub::Watch,
    id: &str,
    secs: f64,
    mut job: Option<JobRecord>,
) -> Result<JobRecord, ApiError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(secs.max(0.0));
    loop {
        let n = w.notify.notified();
        tokio::pin!(n);
        n.as_mut().enable();
        let job = match job.take().filter(|_| !w.notify.ended()) {
            Some(j) => j,
            None => st.store.get(id).await?.ok_or_else(|| ApiError::NotFound {
                what: "job",
                id: id.to_string(),
            })?,
        };
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

pub(super) fn answer(st: &super::AppState, job: JobRecord) -> Response {
    let status = if job.state.is_terminal() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    view(st, job, status)
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
    responses((status = 200, description = "The job; a sharded book's result kept as a manifest is streamed (chunked transfer encoding, `result` first)", body = JobView), (status = 202, description = "Still queued or running after ?wait=", body = JobView), (status = 404, body = ErrorResponse)),
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
        return Ok(answer(&st.0, wait_for(&st.0, &id, wait).await?));
    }
    Ok(view(&st.0, job, StatusCode::OK))
}

/// Cancel a job: a queued job never runs; a running one's result is discarded. A job split
/// into shards is cancelled whole, by its id or any shard's: the answer is the parent's.
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
    let mut before = owned(&st.0, &p, &id).await?;
    if let Some(parent) = before.parent.clone() {
        before = owned(&st.0, &p, &parent).await?;
    }
    let after = st.0.store.cancel(&id).await?.ok_or_else(|| ApiError::NotFound {
        what: "job",
        id: id.clone(),
    })?;
    if !before.state.is_terminal() && after.state == JobState::Cancelled {
        let latency = (now_ms() - after.created_ms).max(0) as f64 / 1e3;
        st.0.metrics.finished(&after.kind, "cancelled", latency);
        st.0.hub.finished(&after.id, &after.principal);
    }
    Ok(view(&st.0, after, StatusCode::OK))
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
        // a list reads no shard counts: a parent's are shown by GET /v1/jobs/{id}
        jobs: page
            .jobs
            .into_iter()
            .map(|mut j| {
                j.shards = None;
                JobView::from(j)
            })
            .collect(),
        next_cursor: page.next_cursor.map(|c| c.to_string()),
    }))
}
