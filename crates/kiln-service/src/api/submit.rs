//! Submissions: `POST /v1/jobs` (one job) and `POST /v1/jobs:batch` (many jobs in one
//! request and one store transaction, all or nothing). Both run one job through the same
//! steps: the kind's switch and the token's permission (403s before anything else is
//! looked at), the ranges of `deadline_s`, `queue_timeout_s` and `priority`, validation
//! of params and inputs (on a blocking thread: blob headers are read), admission against
//! the token's and the server's in-flight limits (429s), then the store.

use super::jobs::{answer, ms, query, view, wait_for, wait_watched};
use super::types::{BatchResponse, JobView, SubmitRequest, WaitQuery, PRIORITIES};
use super::{read_body, AppState, St};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorResponse};
use crate::store::{now_ms, Inserted, NewJob};
use crate::task::{self, BlobLookup, Validated};
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::Arc;

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

fn blobs(st: &AppState, p: &Principal) -> Blobs {
    Blobs {
        store: st.store.clone(),
        principal: p.name.clone(),
        handle: tokio::runtime::Handle::current(),
        ttl_ms: (ms(st.cfg.blobs.ttl_s), ms(st.cfg.results.ttl_s)),
    }
}

fn accepting(st: &AppState) -> Result<(), ApiError> {
    if st.accepting.load(std::sync::atomic::Ordering::SeqCst) {
        Ok(())
    } else {
        Err(ApiError::Unavailable("the server is shutting down".into()))
    }
}

/// The `Idempotency-Key` header, if any.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let k = v
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= 255)
        .ok_or_else(|| {
            ApiError::MalformedRequest("Idempotency-Key must be 1..=255 visible ASCII characters".into())
        })?;
    Ok(Some(k.to_string()))
}

/// What a job is checked for before its params and inputs are looked at: authorization
/// first (a kind the server has switched off, or the token may not submit, is a 403
/// before validation reads anything, blob lookups included; without the fault flag
/// `fault` is no kind at all, so validation answers `unknown_kind` as for any name), then
/// the ranges of its scheduling fields.
fn precheck(st: &AppState, p: &Principal, req: &SubmitRequest) -> Result<(), ApiError> {
    if req.kind == crate::auth::USER_KERNEL_KIND && !st.cfg.allow_user_kernels {
        st.metrics.rejected("forbidden");
        return Err(ApiError::KindOff(crate::user_kernel::OFF_MESSAGE.into()));
    }
    let fault_off = req.kind == crate::auth::FAULT_KIND && !st.cfg.allow_fault_injection;
    if !fault_off && !p.may_submit(&req.kind) {
        st.metrics.rejected("forbidden");
        return Err(ApiError::Forbidden {
            kind: req.kind.clone(),
        });
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
    if let Some(p) = req.priority.filter(|p| !PRIORITIES.contains(p)) {
        return Err(ApiError::InvalidParams(format!(
            "priority = {p}; it must be {}..={} (higher runs first)",
            PRIORITIES.start(),
            PRIORITIES.end()
        )));
    }
    Ok(())
}

/// Validate one job's params and inputs (a blocking call: blob headers are read), and
/// refuse a GPU-only job no worker could ever claim.
fn validate(st: &AppState, req: &SubmitRequest, lookup: &dyn BlobLookup) -> Result<Validated, ApiError> {
    let v = task::validate(
        &req.kind,
        &req.params,
        &req.inputs,
        st.cfg.limits.max_elements,
        st.cfg.allow_fault_injection,
        st.cfg.allow_user_kernels,
        lookup,
    )?;
    if v.needs_gpu && no_gpu_anywhere(st) {
        return Err(ApiError::InvalidParams(format!(
            "this `{}` job needs a GPU worker (a raw CUDA kernel, or an element-wise kernel with a \
             preamble) and this server has none (workers.gpus, workers.groups): no worker could \
             ever run it",
            req.kind
        )));
    }
    Ok(v)
}

/// Whether no worker could claim a GPU-only job: this server runs its slots without a GPU
/// and no other node shares its queue. (With a shared store another node's GPU worker may
/// claim it, so it is accepted.)
fn no_gpu_anywhere(st: &AppState) -> bool {
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

/// The row to store for a validated job.
fn new_job(
    st: &AppState,
    p: &Principal,
    req: &SubmitRequest,
    v: &Validated,
    idempotency_key: Option<String>,
    request_hash: String,
    now: i64,
) -> Result<NewJob, ApiError> {
    let id = crate::ids::new_id("j");
    let limit_s = st.cfg.limits.job_deadline_s;
    let task = serde_json::to_string(&v.task).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(NewJob {
        batch_key: batch_key(&v.batch_key, &p.name, req.deadline_s.is_some(), &id),
        id,
        kind: req.kind.clone(),
        needs_gpu: v.needs_gpu,
        principal: p.name.clone(),
        idempotency_key,
        request_hash,
        task,
        elements: v.elements,
        max_attempts: st.cfg.workers.max_attempts,
        deadline_ms: req.deadline_s.map(|d| now + (d.min(limit_s) * 1000) as i64),
        priority: req.priority.unwrap_or(0),
        queue_until_ms: req.queue_timeout_s.map(|q| now + (q * 1000) as i64),
        created_ms: now,
    })
}

/// A large book's parent (`new`, its task replaced by the plan's descriptor) and its
/// shards: jobs of the parent's token, kind, priority and deadline, each with a batch of its
/// own (crate::shard).
fn shard_jobs(
    req: &SubmitRequest,
    p: &Principal,
    mut parent: NewJob,
    plan: crate::shard::Plan,
) -> Result<(NewJob, Vec<NewJob>), ApiError> {
    parent.task = json(&plan.parent)?;
    parent.batch_key = format!("sharded:{}", parent.id);
    let shards = plan
        .shards
        .iter()
        .map(|t| {
            let id = crate::ids::new_id("j");
            let elements = match t {
                task::Task::PriceBook { options, .. } => options.len() as u64,
                _ => 0,
            };
            Ok(NewJob {
                batch_key: batch_key(&format!("solo:{id}"), &p.name, req.deadline_s.is_some(), &id),
                task: json(t)?,
                id,
                idempotency_key: None,
                elements,
                ..parent.clone()
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    Ok((parent, shards))
}

/// A task as the store's JSON text.
fn json<T: serde::Serialize>(v: &T) -> Result<String, ApiError> {
    serde_json::to_string(v).map_err(|e| ApiError::Internal(e.to_string()))
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
    accepting(&st)?;
    let bytes = read_body(&headers, body, st.cfg.limits.max_body_bytes).await?;
    let req: SubmitRequest = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::MalformedRequest(format!("the body is not a valid job request: {e}")))?;
    precheck(&st, &p, &req)?;
    let idem = idempotency_key(&headers)?;
    let hash = hex::encode(Sha256::digest(&bytes));
    let no_blobs = NoBlobs::default();
    let inline = (bytes.len() <= INLINE_BODY_BYTES)
        .then(|| make(&st, &p, &req, idem.clone(), hash.clone(), &no_blobs))
        .filter(|_| !no_blobs.asked.get());
    let made = match inline {
        Some(made) => made?,
        // a large job (validation and a shard plan may take a while), or one naming blobs
        // (their headers are read from disk): on a blocking thread, off the runtime
        None => {
            let lookup = blobs(&st, &p);
            let (st2, p2, idem2) = (st.clone(), p.clone(), idem.clone());
            tokio::task::spawn_blocking(move || make(&st2, &p2, &req, idem2, hash, &lookup))
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))??
        }
    };
    let per_token = p.max_in_flight.unwrap_or(st.cfg.limits.max_in_flight_per_token);
    st.hub.admit(&p.name, per_token, st.cfg.limits.max_queue)?;
    let wait = q.wait.unwrap_or(0.0).min(st.cfg.limits.max_wait_s as f64);
    // watched before it is stored: its end cannot pass unseen, so the wait needs no read
    // of the store to learn that the job just stored is still queued
    let new_id = made.0.id.clone();
    let watch = (wait > 0.0).then(|| st.hub.watch(&new_id));
    let gpu_only = made.0.needs_gpu;
    let queued = made.1.as_ref().map_or(1, |(_, shards)| shards.len());
    let stored = match made {
        (_, Some((parent, shards))) => {
            let n = shards.len();
            let r = st.store.insert_sharded(parent, shards).await;
            if matches!(r, Ok(Inserted::Created(_))) {
                st.metrics.sharded(n);
            }
            r
        }
        (new, None) => st.store.insert(new).await,
    };
    let inserted = match stored {
        Ok(i) => i,
        Err(e) => {
            st.hub.release(&p.name);
            return Err(e.into());
        }
    };
    let (job, created) = match inserted {
        Inserted::Created(job) => {
            st.metrics.submitted(&job.kind);
            st.hub.queued(queued, gpu_only);
            (job, true)
        }
        Inserted::Existing { job, same_request } => {
            st.hub.release(&p.name);
            if !same_request {
                return Err(ApiError::IdempotencyMismatch {
                    key: idem.unwrap_or_default(),
                    job: job.id,
                });
            }
            (job, false)
        }
    };
    if wait > 0.0 && !job.state.is_terminal() {
        let done = match watch.filter(|_| created && job.id == new_id) {
            Some(w) => wait_watched(&st, &w, &new_id, wait, Some(job)).await?,
            None => wait_for(&st, &job.id, wait).await?,
        };
        return Ok(answer(&st, done));
    }
    if job.state.is_terminal() {
        return Ok(view(&st, job, StatusCode::OK));
    }
    Ok(view(&st, job, StatusCode::ACCEPTED))
}

/// Bodies up to this size are validated in place, on the runtime: a small job's checks
/// take microseconds, less than the hand-off to a blocking thread and back.
const INLINE_BODY_BYTES: usize = 16 << 10;

/// The blob lookup of a validation run in place: it reads nothing (a blob's header is a
/// file read, for a blocking thread) and notes that it was asked, so that the validation
/// is run again on a blocking thread with [`Blobs`].
#[derive(Default)]
struct NoBlobs {
    asked: std::cell::Cell<bool>,
}

impl BlobLookup for NoBlobs {
    fn blob(&self, _id: &str) -> Option<(PathBuf, String)> {
        self.asked.set(true);
        None
    }
}

/// A job's row, and for a large book its shards' (crate::shard), as [`make`] gives them.
type Made = Result<(NewJob, Option<(NewJob, Vec<NewJob>)>), ApiError>;

/// Validate a job and make its row, and for a large book its shards'. With a [`NoBlobs`]
/// lookup that was asked for a blob the answer may be wrong: the caller makes it again.
fn make(
    st: &AppState,
    p: &Principal,
    req: &SubmitRequest,
    idem: Option<String>,
    hash: String,
    lookup: &dyn BlobLookup,
) -> Made {
    let v = validate(st, req, lookup)?;
    let new = new_job(st, p, req, &v, idem, hash, now_ms())?;
    let shards = match (
        &req.queue_timeout_s,
        crate::shard::plan(&st.cfg.sharding, &v.task),
    ) {
        // a queue timeout is the whole job's: such a job runs unsharded
        (None, Some(plan)) => Some(shard_jobs(req, p, new.clone(), plan)?),
        _ => None,
    };
    Ok((new, shards))
}

/// `POST /v1/jobs:batch`'s body: `{"jobs": [job, ...]}`, each job as `POST /v1/jobs` takes
/// it. The jobs are read as JSON values first so that a malformed one is named by its index.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    jobs: Vec<Value>,
}

fn at(index: usize) -> impl Fn(ApiError) -> ApiError {
    move |e| ApiError::InBatch {
        index,
        error: Box::new(e),
    }
}

/// Submit many jobs at once: one request, one store transaction. All or nothing: a job
/// that any check refuses is named by its index (`jobs[3]: ...`) and none is stored.
#[utoipa::path(
    post, path = "/v1/jobs:batch", tag = "jobs",
    request_body = super::types::BatchRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "A retried batch with the same key returns the first batch's jobs (job i is keyed `KEY#i`)")),
    responses(
        (status = 202, description = "Every job accepted and stored, in the request's order", body = BatchResponse),
        (status = 200, description = "A retry: every job named one of an earlier batch with the same key", body = BatchResponse),
        (status = 400, description = "A job is invalid (the message names `jobs[i]` and the field; none is stored), the batch is empty, or it holds more than limits.max_batch_jobs jobs", body = ErrorResponse),
        (status = 401, body = ErrorResponse),
        (status = 403, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 422, body = ErrorResponse),
        (status = 429, description = "The token's or the server's in-flight limit has no room for the whole batch", body = ErrorResponse),
    ),
    security(("bearer" = []))
)]
pub async fn submit_batch(
    st: St,
    Extension(p): Extension<Arc<Principal>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let st = st.0;
    accepting(&st)?;
    let bytes = read_body(&headers, body, st.cfg.limits.max_body_bytes).await?;
    let batch: BatchBody = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::MalformedRequest(format!(
            "the body is not a valid batch ({{\"jobs\": [job, ...]}}): {e}"
        ))
    })?;
    let n = batch.jobs.len();
    let max = st.cfg.limits.max_batch_jobs;
    if n == 0 {
        return Err(ApiError::InvalidParams("the batch holds no jobs".into()));
    }
    if n as u64 > max {
        return Err(ApiError::InvalidParams(format!(
            "the batch holds {n} jobs; the limit is {max} (limits.max_batch_jobs): split it"
        )));
    }
    let per_token = p.max_in_flight.unwrap_or(st.cfg.limits.max_in_flight_per_token);
    let total = st.cfg.limits.max_queue;
    if n as u64 > per_token.min(total) {
        return Err(ApiError::InvalidParams(format!(
            "the batch holds {n} jobs; at most {} may be in flight at once (this token's \
             max_in_flight or limits.max_in_flight_per_token, and limits.max_queue): split it",
            per_token.min(total)
        )));
    }
    let idem = idempotency_key(&headers)?;
    let mut hashes = Vec::with_capacity(n);
    let mut reqs = Vec::with_capacity(n);
    for (i, v) in batch.jobs.into_iter().enumerate() {
        // a job's hash tells a retry from a different job under the same key: only needed
        // with a key
        hashes.push(match &idem {
            Some(_) => hex::encode(Sha256::digest(v.to_string().as_bytes())),
            None => String::new(),
        });
        let req: SubmitRequest = serde_json::from_value(v).map_err(|e| {
            at(i)(ApiError::MalformedRequest(format!(
                "not a valid job request: {e}"
            )))
        })?;
        precheck(&st, &p, &req).map_err(at(i))?;
        reqs.push(req);
    }
    let lookup = blobs(&st, &p);
    let st2 = st.clone();
    let (reqs, checked) = tokio::task::spawn_blocking(move || {
        let checked: Result<Vec<Validated>, ApiError> = reqs
            .iter()
            .enumerate()
            .map(|(i, r)| validate(&st2, r, &lookup).map_err(at(i)))
            .collect();
        (reqs, checked)
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    let checked = checked?;
    st.hub.admit_many(&p.name, n as u64, per_token, total)?;
    let now = now_ms();
    let news: Result<Vec<NewJob>, ApiError> = reqs
        .iter()
        .zip(&checked)
        .zip(hashes)
        .enumerate()
        .map(|(i, ((r, v), h))| {
            let key = idem.as_ref().map(|k| format!("{k}#{i}"));
            new_job(&st, &p, r, v, key, h, now)
        })
        .collect();
    let stored = match news {
        Ok(news) => st.store.insert_batch(news).await.map_err(ApiError::from),
        Err(e) => Err(e),
    };
    let stored = match stored {
        Ok(s) => s,
        Err(e) => {
            st.hub.release_many(&p.name, n as u64);
            return Err(e);
        }
    };
    let views = match stored {
        crate::store::BatchInserted::Mismatch { index, job } => {
            st.hub.release_many(&p.name, n as u64);
            return Err(at(index)(ApiError::IdempotencyMismatch {
                key: format!("{}#{index}", idem.unwrap_or_default()),
                job: job.id,
            }));
        }
        crate::store::BatchInserted::Stored(list) => list,
    };
    let mut created = 0u64;
    let mut jobs = Vec::with_capacity(n);
    for i in views {
        match i {
            Inserted::Created(job) => {
                created += 1;
                st.metrics.submitted(&job.kind);
                jobs.push(JobView::from(job));
            }
            Inserted::Existing { job, .. } => jobs.push(JobView::from(job)),
        }
    }
    st.hub.release_many(&p.name, n as u64 - created);
    let status = if created > 0 {
        st.hub
            .queued(created as usize, checked.iter().any(|v| v.needs_gpu));
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(BatchResponse { jobs })).into_response())
}
