//! The request and response bodies of the API (their schemas go into the OpenAPI document).

use crate::error::ErrorBody;
use crate::store::{BlobRecord, JobRecord, JobState};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/jobs`.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// `price`, `implied_vol`, `risk`, `filter2d`, `filter3d`, `gemm`, `elementwise`,
    /// `user_kernel` (where `allow_user_kernels` is on; else 403 `forbidden`), and `fault`
    /// where enabled.
    pub kind: String,
    /// Kind-specific parameters (see docs/operations.md).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: Value,
    /// Inputs: inline arrays, option, quote, position or scenario records, or blob ids.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub inputs: Value,
    /// The job must finish within this many seconds of its submission (at least 1, at
    /// most the server's `limits.job_deadline_s`), else it fails with `deadline_exceeded`
    /// (without running, if it passes while the job is queued). Such a job runs in a batch
    /// of its own.
    #[schema(minimum = 1)]
    pub deadline_s: Option<u64>,
    /// Higher runs first among the same token's queued jobs of one batch key (FIFO within a
    /// priority); default 0. Fair sharing between tokens comes first: a priority orders a
    /// token's own work, it does not take another token's turn.
    #[schema(minimum = -1000, maximum = 1000)]
    pub priority: Option<i32>,
    /// The job must start within this many seconds of its submission (at least 1, at most
    /// the server's `limits.job_deadline_s`), else it fails with `expired` without running.
    #[schema(minimum = 1)]
    pub queue_timeout_s: Option<u64>,
}

/// `POST /v1/jobs:batch`.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// The jobs, each as `POST /v1/jobs` takes it (at most `limits.max_batch_jobs`).
    pub jobs: Vec<SubmitRequest>,
}

/// The answer to `POST /v1/jobs:batch`.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
pub struct BatchResponse {
    /// The jobs, in the request's order.
    pub jobs: Vec<JobView>,
}

/// The range of [`SubmitRequest::priority`].
pub const PRIORITIES: std::ops::RangeInclusive<i32> = -1000..=1000;

/// A job as the API shows it.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
pub struct JobView {
    /// The id.
    pub id: String,
    /// The kind.
    pub kind: String,
    /// The state.
    pub state: JobState,
    /// Attempts started.
    pub attempts: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Submission time, ms since the epoch.
    pub created_ms: i64,
    /// Start of the latest attempt.
    pub started_ms: Option<i64>,
    /// End.
    pub finished_ms: Option<i64>,
    /// Deadline.
    pub deadline_ms: Option<i64>,
    /// Priority (higher first within the token's jobs of one batch key).
    pub priority: i32,
    /// Queue timeout: not started by then (ms since the epoch), the job fails as `expired`.
    pub queue_until_ms: Option<i64>,
    /// The result (succeeded jobs). A sharded book's result past `sharding.merge_max_bytes`
    /// is kept as a manifest over its shards' results: `GET /v1/jobs/{id}` (and a submit's
    /// `?wait=` answer) streams it in chunks as the first member of the job, the same JSON
    /// a merged result reads as; `POST /v1/jobs:batch` answers leave it out.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// The error of a failed job, or of the latest failed attempt of a retried one.
    pub error: Option<ErrorBody>,
    /// A shard's parent: the job split into shards it is part of (`sharding` in
    /// docs/operations.md). Shards are left out of job lists; their results go into the
    /// parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// A job split into shards: how many, and how many are done, failed or cancelled
    /// (shown by `GET /v1/jobs/{id}`, not in lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<crate::store::ShardCounts>,
}

impl From<JobRecord> for JobView {
    fn from(j: JobRecord) -> Self {
        JobView {
            id: j.id,
            kind: j.kind,
            state: j.state,
            attempts: j.attempts,
            max_attempts: j.max_attempts,
            created_ms: j.created_ms,
            started_ms: j.started_ms,
            finished_ms: j.finished_ms,
            deadline_ms: j.deadline_ms,
            priority: j.priority,
            queue_until_ms: j.queue_until_ms,
            // a manifest is not the result: its reader streams the result (api::streamed)
            result: j
                .result
                .filter(|_| j.result_shards.is_none())
                .and_then(|r| serde_json::from_str(&r).ok()),
            error: j.error.map(|(code, message)| ErrorBody { code, message }),
            parent: j.parent,
            shards: j.shards,
        }
    }
}

/// `GET /v1/jobs`.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
pub struct JobList {
    /// Jobs, newest first (without results).
    pub jobs: Vec<JobView>,
    /// Pass as `cursor` for the next page.
    pub next_cursor: Option<String>,
}

/// A blob.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
pub struct BlobView {
    /// The id (use in job inputs as `{"blob": id}`).
    pub id: String,
    /// Bytes.
    pub size: u64,
    /// SHA-256, hex.
    pub sha256: String,
    /// Format.
    pub format: String,
    /// The job whose result it is, if any.
    pub job_id: Option<String>,
}

impl From<BlobRecord> for BlobView {
    fn from(b: BlobRecord) -> Self {
        BlobView {
            id: b.id,
            size: b.size,
            sha256: b.sha256,
            format: b.format,
            job_id: b.job_id,
        }
    }
}

/// `?wait=SECONDS`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Answer with the finished job if it finishes within this many seconds.
    pub wait: Option<f64>,
}

/// `GET /v1/jobs` filters.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only this state.
    pub state: Option<String>,
    /// Page size (1..=1000, default 100).
    pub limit: Option<u32>,
    /// A previous page's `next_cursor`.
    pub cursor: Option<String>,
}

/// `POST /v1/blobs?format=`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BlobParams {
    /// `npy`, `png`, `tiff`, `nii`, `nii.gz` or `csv`.
    pub format: Option<String>,
}

/// `/healthz`, `/readyz`.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok` or `not_ready`.
    pub status: String,
    /// Workers ready.
    pub workers_up: usize,
    /// Why not ready, if not.
    pub reasons: Vec<String>,
}
