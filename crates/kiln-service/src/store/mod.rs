//! The job store: where jobs, results and blob metadata live, and the queue itself.
//!
//! [`JobStore`] is the seam between the service and its database. The SQLite store
//! ([`SqliteStore`]) serves one node; the trait is shaped so that a PostgreSQL store can
//! serve many nodes sharing one queue:
//! - [`JobStore::claim`] takes queued jobs atomically and hands them out under a lease
//!   (`owner`, `lease_until`): in PostgreSQL `UPDATE ... WHERE id IN (SELECT ... FOR UPDATE
//!   SKIP LOCKED)`; in SQLite one writer serializes claims.
//! - [`JobStore::renew`] extends the leases with the supervisor's heartbeat;
//!   [`JobStore::requeue_orphans`] returns jobs whose lease expired or whose owner is a
//!   node that is gone (SQLite at start: every `running` job of an earlier process) to the
//!   queue, or fails them when that was their last attempt.
//! - [`JobStore::finish`] stores a result once, keyed by job id, and only for the lease
//!   holder: a stale worker's late result is dropped, so at-least-once execution never
//!   yields two stored results.
//!
//! - Nodes register themselves ([`JobStore::node_heartbeat`], which also renews the leases
//!   of every job the node holds) and [`JobStore::nodes`] lists them. A shared store
//!   ([`JobStore::is_shared`]) sweeps expired leases periodically, wakes idle nodes through
//!   [`StoreEvents`] (PostgreSQL's LISTEN/NOTIFY) and elects one node to export the
//!   queue-wide gauges ([`JobStore::queue_exporter`]).
//!
//! Methods return boxed futures so the trait is object safe (`Arc<dyn JobStore>`).

mod node;
mod postgres;
mod sqlite;

pub use node::{hostname, NodeInfo, NodeRecord, StoreEvents};
pub use postgres::{parse_url as parse_pg_url, PgOptions, PgStore, SCHEMA_VERSION as PG_SCHEMA_VERSION};
pub use sqlite::SqliteStore;

use serde::{Deserialize, Serialize};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

/// A boxed, sendable future: what every [`JobStore`] method returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A store failure (the database or the disk under it), with what a client should make
/// of it ([`StoreFault`]): a database that is restarting or a disk that is full is a 503 to
/// retry, not a 500.
#[derive(Debug, thiserror::Error)]
#[error("job store: {msg}")]
pub struct StoreError {
    msg: String,
    fault: StoreFault,
}

/// Whether a store failure may pass by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreFault {
    /// Retrying will not cure it (a bug, a schema mismatch, a constraint).
    Failed,
    /// The database cannot be reached now: restarting, connections cut, no free pooled
    /// connection within the wait, busy.
    Unavailable,
    /// The store's disk refused a write (full, or past a file size limit).
    Full,
}

impl StoreError {
    /// A failure retrying will not cure.
    pub fn new(msg: impl Into<String>) -> StoreError {
        StoreError::with_fault(StoreFault::Failed, msg)
    }

    /// A failure of the given kind.
    pub fn with_fault(fault: StoreFault, msg: impl Into<String>) -> StoreError {
        StoreError {
            msg: msg.into(),
            fault,
        }
    }

    /// What kind of failure it is.
    pub fn fault(&self) -> StoreFault {
        self.fault
    }

    /// Whether it may pass by itself (the database back, space freed): worth retrying.
    pub fn is_transient(&self) -> bool {
        self.fault != StoreFault::Failed
    }

    /// The message, without the `job store:` prefix.
    pub fn message(&self) -> &str {
        &self.msg
    }
}

/// The result of store calls.
pub type StoreResult<T> = std::result::Result<T, StoreError>;

/// A job's life: `queued -> running -> succeeded | failed`, `cancelled` from either of the
/// first two; `running -> queued` again on a retry or after a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for a worker.
    Queued,
    /// On a worker (leased).
    Running,
    /// Finished with a result.
    Succeeded,
    /// Finished with an error.
    Failed,
    /// Cancelled by its owner.
    Cancelled,
}

impl JobState {
    /// Every state, in life order.
    pub const ALL: [JobState; 5] = [
        JobState::Queued,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
    ];

    /// The name stored and shown.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Parse a stored or requested name.
    pub fn parse(s: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|st| st.name() == s)
    }

    /// Whether the job is done (no further change).
    pub fn is_terminal(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed | JobState::Cancelled)
    }
}

/// A job to insert (validated by the API before it gets here).
#[derive(Clone, Debug)]
pub struct NewJob {
    /// The id, made by the caller.
    pub id: String,
    /// The job kind (`price`, `filter2d`, ...).
    pub kind: String,
    /// Jobs with equal keys may be merged into one batch on a worker.
    pub batch_key: String,
    /// Whether only a GPU worker may run it.
    pub needs_gpu: bool,
    /// The token name that submitted it (`anonymous` without tokens).
    pub principal: String,
    /// The `Idempotency-Key` header, if any (unique per principal).
    pub idempotency_key: Option<String>,
    /// A hash of the request body, to tell a retry from a different request under one key.
    pub request_hash: String,
    /// The task as the worker runs it (JSON).
    pub task: String,
    /// Elements of input data (for batching limits).
    pub elements: u64,
    /// Attempts allowed before the job fails.
    pub max_attempts: u32,
    /// Absolute deadline, ms since the epoch.
    pub deadline_ms: Option<i64>,
    /// Higher runs first among the queued jobs of one principal and batch key; FIFO within
    /// a priority.
    pub priority: i32,
    /// Queue timeout, ms since the epoch: not started by then, the job fails as `expired`.
    pub queue_until_ms: Option<i64>,
    /// Submission time, ms since the epoch.
    pub created_ms: i64,
}

impl NewJob {
    /// The record of this job as just inserted (queued, no attempt yet), `seq` being the
    /// insertion order the store gave it.
    pub fn queued_record(&self, seq: i64) -> JobRecord {
        JobRecord {
            seq,
            id: self.id.clone(),
            kind: self.kind.clone(),
            state: JobState::Queued,
            principal: self.principal.clone(),
            attempts: 0,
            max_attempts: self.max_attempts,
            created_ms: self.created_ms,
            started_ms: None,
            finished_ms: None,
            deadline_ms: self.deadline_ms,
            priority: self.priority,
            queue_until_ms: self.queue_until_ms,
            result: None,
            result_shards: None,
            error: None,
            parent: None,
            shards: None,
            closed_by: None,
        }
    }
}

/// What [`JobStore::insert`] did.
#[derive(Clone, Debug)]
pub enum Inserted {
    /// A new job was stored.
    Created(JobRecord),
    /// The principal's idempotency key named an earlier job: that one is returned.
    Existing {
        /// The earlier job.
        job: JobRecord,
        /// Whether the earlier request's body was the same.
        same_request: bool,
    },
}

/// What [`JobStore::insert_batch`] did.
#[derive(Clone, Debug)]
pub enum BatchInserted {
    /// Every job stored (or, by its idempotency key, found): the answers in the batch's order.
    Stored(Vec<Inserted>),
    /// Job `index`'s idempotency key names an earlier job of a different request: nothing
    /// of the batch was stored.
    Mismatch {
        /// The job's position in the batch.
        index: usize,
        /// The earlier job its key names.
        job: Box<JobRecord>,
    },
}

impl BatchInserted {
    /// The first job that named an earlier job of a different request, if any: the
    /// store's verdict on a batch's answers, before it commits.
    pub fn check(list: Vec<Inserted>) -> BatchInserted {
        let bad = list.iter().position(|i| {
            matches!(
                i,
                Inserted::Existing {
                    same_request: false,
                    ..
                }
            )
        });
        let Some(index) = bad else {
            return BatchInserted::Stored(list);
        };
        match list.into_iter().nth(index) {
            Some(Inserted::Existing { job, .. } | Inserted::Created(job)) => BatchInserted::Mismatch {
                index,
                job: Box::new(job),
            },
            None => BatchInserted::Stored(Vec::new()),
        }
    }

    /// Whether the batch was stored.
    pub fn is_stored(&self) -> bool {
        matches!(self, BatchInserted::Stored(_))
    }
}

/// A job as stored, with its result when it has one.
#[derive(Clone, Debug)]
pub struct JobRecord {
    /// Insertion order (the list cursor).
    pub seq: i64,
    /// The id.
    pub id: String,
    /// The kind.
    pub kind: String,
    /// The state.
    pub state: JobState,
    /// Who submitted it.
    pub principal: String,
    /// Runs started so far.
    pub attempts: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Submission, first start, end (ms since the epoch).
    pub created_ms: i64,
    /// When the latest attempt started.
    pub started_ms: Option<i64>,
    /// When it reached a terminal state.
    pub finished_ms: Option<i64>,
    /// The deadline, if any.
    pub deadline_ms: Option<i64>,
    /// Its priority (higher first).
    pub priority: i32,
    /// Its queue timeout (ms since the epoch), if any.
    pub queue_until_ms: Option<i64>,
    /// The result (JSON text), succeeded jobs only; with `result_shards`, a sharded job's
    /// manifest (the head of its result: crate::shard::result).
    pub result: Option<String>,
    /// `Some(n)`: `result` is a manifest, and the price rows of the job's result are its
    /// `n` shards' results ([`JobStore::shard_result`]), in row order (crate::shard::result).
    pub result_shards: Option<u64>,
    /// The error code and message, failed (or retried) jobs.
    pub error: Option<(String, String)>,
    /// A shard's parent job (crate::shard).
    pub parent: Option<String>,
    /// A parent's shards (read by [`JobStore::get`] only; `None` for other jobs).
    pub shards: Option<ShardCounts>,
    /// A finished parent's closing shard: the one whose end merged or failed it, whose
    /// finisher releases the parent's admission (crate::shard).
    pub closed_by: Option<String>,
}

/// A sharded job's shards by state (crate::shard).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ShardCounts {
    /// Shards in all.
    pub total: u64,
    /// Succeeded.
    pub done: u64,
    /// Failed.
    pub failed: u64,
    /// Cancelled (the parent cancelled, or failed by a sibling).
    pub cancelled: u64,
}

/// A job handed to a worker by [`JobStore::claim`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClaimedJob {
    /// The id.
    pub id: String,
    /// The kind.
    pub kind: String,
    /// Who submitted it (for in-flight accounting).
    pub principal: String,
    /// The task JSON.
    pub task: String,
    /// This attempt's number, 1-based.
    pub attempt: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Submission time (latency accounting).
    pub created_ms: i64,
    /// The deadline, if any.
    pub deadline_ms: Option<i64>,
    /// The queue timeout, if any: past it the job fails as `expired` instead of running.
    pub queue_until_ms: Option<i64>,
    /// A shard's parent job (crate::shard).
    #[serde(default)]
    pub parent: Option<String>,
}

/// A queued job failed as `expired` by [`JobStore::expire_queued`].
#[derive(Clone, Debug)]
pub struct ExpiredJob {
    /// The id.
    pub id: String,
    /// The kind.
    pub kind: String,
    /// Who submitted it.
    pub principal: String,
    /// Submission time.
    pub created_ms: i64,
}

/// The code and message of a job that was not started within its `queue_timeout_s`.
pub const EXPIRED: (&str, &str) = (
    "expired",
    "the job was not started within its queue_timeout_s; it never ran",
);

/// The code of a job whose lease expired on its last attempt ([`JobStore::requeue_orphans`]),
/// and why a lease expires; the stored message is `lease expired on attempt N of N (why)`.
pub const LEASE_EXPIRED: (&str, &str) = ("lease_expired", "the worker or node stopped responding");

/// What [`JobStore::requeue_orphans`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Orphans {
    /// Jobs returned to the queue for another attempt.
    pub requeued: u64,
    /// Jobs failed instead, as [`LEASE_EXPIRED`]: their lease expired on their last attempt.
    pub failed: Vec<LostJob>,
}

/// A running job [`JobStore::requeue_orphans`] failed: its lease expired on its last attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostJob {
    /// The id.
    pub id: String,
    /// The kind.
    pub kind: String,
    /// Who submitted it.
    pub principal: String,
    /// Submission time.
    pub created_ms: i64,
    /// A shard's parent job (crate::shard).
    pub parent: Option<String>,
    /// The parent this shard's failure failed (the shard closed it), if it did: its own
    /// end to count and tell its watchers of. Never set for a job that is not a shard.
    pub closed_parent: Option<Box<LostJob>>,
}

/// The oldest queued job a worker may take: what the batcher looks at before claiming.
#[derive(Clone, Debug)]
pub struct QueueHead {
    /// Its batch key.
    pub batch_key: String,
    /// Its submission time.
    pub created_ms: i64,
    /// Queued jobs with that key.
    pub same_key: u64,
}

/// How a job ended on a worker.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// A result (JSON text) and the result blobs it names.
    Succeeded {
        /// The result.
        result: String,
        /// Blobs the worker wrote for it.
        blobs: Vec<BlobRecord>,
    },
    /// A final error.
    Failed {
        /// Stable code (`invalid_input`, `cuda_sticky`, ...).
        code: String,
        /// What happened.
        message: String,
    },
}

/// One job's end for [`JobStore::finish_many`].
#[derive(Clone, Debug)]
pub struct JobEnd {
    /// The job.
    pub id: String,
    /// How it ended.
    pub outcome: Outcome,
}

/// How many jobs [`JobStore::claim_head`] takes: at most `max`, and at most a `1/slots`
/// share (rounded up) of the queued jobs of the head's batch key, so that one slot does not
/// take the work other idle slots could run beside it. Always at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimLimit {
    /// Jobs at most.
    pub max: usize,
    /// The worker slots sharing the queue (this node's).
    pub slots: usize,
}

impl ClaimLimit {
    /// One job (the head's).
    pub const ONE: ClaimLimit = ClaimLimit { max: 1, slots: 1 };

    /// The jobs to claim when `queued` jobs of the head's batch key are waiting.
    pub fn jobs(self, queued: u64) -> usize {
        let share = queued.div_ceil(self.slots.max(1) as u64);
        (share.min(self.max as u64) as usize).max(1)
    }
}

/// What a worker slot claims next in the transaction that stores its batch's ends
/// ([`JobStore::finish_and_claim`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextClaim {
    /// The slot's worker has a GPU.
    pub gpu: bool,
    /// `scheduling.max_workers_per_token` (0: no cap).
    pub max_workers_per_token: u32,
    /// The lease of the jobs claimed.
    pub lease: Duration,
    /// How much to claim.
    pub take: NextTake,
}

/// How much [`JobStore::finish_and_claim`] claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextTake {
    /// As [`JobStore::claim_head`] with this limit (an unbatched slot).
    Head(ClaimLimit),
    /// A dynamic batch: the fair head's batch key, up to `max` jobs, once that key has `max`
    /// jobs queued or its head has waited `delay_ms`; before then nothing (the slot waits
    /// for the batch to fill as it does after an empty claim).
    Batch {
        /// Jobs at most.
        max: usize,
        /// The longest a head waits for its batch to fill (`batching.max_queue_delay_ms`).
        delay_ms: u64,
    },
}

/// A listing request.
#[derive(Clone, Debug, Default)]
pub struct ListQuery {
    /// Only this principal's jobs (`None`: all).
    pub principal: Option<String>,
    /// Only this state.
    pub state: Option<JobState>,
    /// At most this many (newest first).
    pub limit: u32,
    /// Only jobs older than this cursor (a previous page's `next_cursor`).
    pub cursor: Option<i64>,
}

/// A page of jobs, newest first.
#[derive(Clone, Debug)]
pub struct JobPage {
    /// The jobs (without results).
    pub jobs: Vec<JobRecord>,
    /// The cursor of the next page, if there may be one.
    pub next_cursor: Option<i64>,
}

/// A blob's metadata (the bytes are a file under the data dir).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct BlobRecord {
    /// The id.
    pub id: String,
    /// The file.
    pub path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the bytes, hex.
    pub sha256: String,
    /// Format: `npy`, `png`, `tiff`, `nii`, `nii.gz`, `csv`.
    pub format: String,
    /// Who uploaded it (or whose job made it).
    pub principal: String,
    /// The job whose result it is, if any.
    pub job_id: Option<String>,
    /// Creation time.
    pub created_ms: i64,
}

/// Counts of jobs by state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateCounts {
    /// `(state, count)` for every state.
    pub by_state: Vec<(JobState, u64)>,
    /// `(principal, queued + running)` for principals with jobs in flight.
    pub in_flight_by_principal: Vec<(String, u64)>,
}

impl StateCounts {
    /// The count of one state.
    pub fn get(&self, s: JobState) -> u64 {
        self.by_state
            .iter()
            .find(|(st, _)| *st == s)
            .map_or(0, |(_, n)| *n)
    }
}

/// The job store (see the [module docs](self)).
pub trait JobStore: Send + Sync + 'static {
    /// Store a new job durably (committed when the future resolves), or return the earlier
    /// job of the same principal and idempotency key.
    fn insert(&self, job: NewJob) -> BoxFuture<'_, StoreResult<Inserted>>;
    /// Store many new jobs in one transaction (committed when the future resolves): all of
    /// them, or (on any failure) none. Each is treated as [`JobStore::insert`] treats one (an
    /// idempotency key naming an earlier job of the same request returns that job), except
    /// that a key naming an earlier job of a different request stores nothing of the batch
    /// ([`BatchInserted::Mismatch`]).
    fn insert_batch(&self, jobs: Vec<NewJob>) -> BoxFuture<'_, StoreResult<BatchInserted>>;
    /// Store a sharded job in one transaction (crate::shard): `parent` `running`, with no
    /// lease and `shards.len()` shards, and each shard queued with that parent and its
    /// index (its place in row order), or (by the parent's idempotency key) return the
    /// earlier job as [`JobStore::insert`] does, storing no shard. The shards' idempotency
    /// keys are ignored.
    fn insert_sharded(&self, parent: NewJob, shards: Vec<NewJob>) -> BoxFuture<'_, StoreResult<Inserted>>;
    /// One job with its result.
    fn get(&self, id: &str) -> BoxFuture<'_, StoreResult<Option<JobRecord>>>;
    /// The result (JSON text) of shard `index` of the sharded job `parent`, `None` if there
    /// is no such shard or it holds no result: what a manifest's reader reads, one shard at
    /// a time ([`JobRecord::result_shards`]).
    fn shard_result(&self, parent: &str, index: u64) -> BoxFuture<'_, StoreResult<Option<String>>>;
    /// A page of jobs, newest first; shards are left out (they show in their parent's
    /// counts and by id).
    fn list(&self, q: ListQuery) -> BoxFuture<'_, StoreResult<JobPage>>;
    /// Cancel a queued or running job; terminal jobs are left as they are. Returns the job
    /// after the change, `None` if there is no such job. A sharded job's parent, or any of
    /// its shards, cancels the parent and every unfinished shard.
    fn cancel(&self, id: &str) -> BoxFuture<'_, StoreResult<Option<JobRecord>>>;
    /// The queued job a worker should run next (`gpu`: the worker has a GPU), fair between
    /// tokens: among the principals with queued work (and, when `max_workers_per_token` is
    /// not 0, fewer than that many worker slots holding their jobs), the one whose jobs hold
    /// the fewest slots, then the one served least recently (the latest start of any of its
    /// jobs; never served first), then the one whose head is oldest, a principal's head being
    /// its queued job of the highest priority, the oldest of those. Both stores implement
    /// this same order.
    fn head(&self, gpu: bool, max_workers_per_token: u32) -> BoxFuture<'_, StoreResult<Option<QueueHead>>>;
    /// Claim up to `max` queued jobs (highest priority first, then oldest, with `batch_key`
    /// if given) for `owner`,
    /// leased until now + `lease`: they become `running`, their attempt count grows by one.
    fn claim(
        &self,
        owner: &str,
        gpu: bool,
        batch_key: Option<&str>,
        max: usize,
        lease: Duration,
    ) -> BoxFuture<'_, StoreResult<Vec<ClaimedJob>>>;
    /// Claim the job [`JobStore::head`] names, as [`JobStore::claim`] would (an unbatched
    /// slot's claim), and with it, when `limit` allows more than one, further queued jobs of
    /// the head's batch key (so of the head's principal), in the order [`JobStore::claim`]
    /// takes them. Only the first job follows the fair order between tokens: the others
    /// are the same token's, served in the same turn. A store may do this in one step; the
    /// default asks for the head, then claims from its batch key (the head's job first
    /// unless another claim came between).
    fn claim_head(
        &self,
        owner: &str,
        gpu: bool,
        max_workers_per_token: u32,
        limit: ClaimLimit,
        lease: Duration,
    ) -> BoxFuture<'_, StoreResult<Vec<ClaimedJob>>> {
        let owner = owner.to_string();
        Box::pin(async move {
            let Some(head) = self.head(gpu, max_workers_per_token).await? else {
                return Ok(Vec::new());
            };
            let max = limit.jobs(head.same_key);
            self.claim(&owner, gpu, Some(&head.batch_key), max, lease).await
        })
    }
    /// Fail every queued job whose queue timeout has passed as [`EXPIRED`]; returns them.
    fn expire_queued(&self) -> BoxFuture<'_, StoreResult<Vec<ExpiredJob>>>;
    /// Extend `owner`'s leases on `ids`.
    fn renew(&self, owner: &str, ids: &[String], lease: Duration) -> BoxFuture<'_, StoreResult<()>>;
    /// Store a job's end, once: only while it is `running` under `owner`. Returns whether
    /// it was stored (false: cancelled meanwhile, or the lease was lost). A shard's end, in
    /// the same transaction, merges the parent when it was the last one unfinished, or
    /// fails the parent when it failed (crate::shard); so do [`JobStore::finish_many`] and
    /// a [`JobStore::retry`] that fails the job.
    fn finish(&self, id: &str, owner: &str, outcome: Outcome) -> BoxFuture<'_, StoreResult<bool>>;
    /// Store many jobs' ends of `owner` in one transaction (one commit), each by the rule
    /// of [`JobStore::finish`]: stored only while the job is `running` under `owner`.
    /// Returns, in the order of `ends`, whether each was stored: a job cancelled meanwhile
    /// or whose lease was lost is `false` and the others are stored all the same. An id
    /// given twice is stored once (its first end; the later ones are `false`). An error
    /// stores none of them (the transaction rolls back), so the caller may send them all
    /// again.
    fn finish_many(&self, owner: &str, ends: Vec<JobEnd>) -> BoxFuture<'_, StoreResult<Vec<bool>>>;
    /// Store `owner`'s batch of ends as [`JobStore::finish_many`] does, then claim its next
    /// work as `next` says, in one transaction where the store can: a slot's end of a batch
    /// and its next claim then cost one commit and one wake-up of the store's writer
    /// instead of two. Returns whether each end was stored (as `finish_many`) and the jobs
    /// claimed. An error stores no end and claims nothing; a claim that fails after the
    /// ends were stored claims nothing and keeps the ends (logged), so the caller claims
    /// again its usual way. The default does the two steps one after the other.
    fn finish_and_claim(
        &self,
        owner: &str,
        ends: Vec<JobEnd>,
        next: NextClaim,
    ) -> BoxFuture<'_, StoreResult<(Vec<bool>, Vec<ClaimedJob>)>> {
        let owner = owner.to_string();
        Box::pin(async move {
            let stored = self.finish_many(&owner, ends).await?;
            let claimed = match next.take {
                NextTake::Head(limit) => {
                    self.claim_head(&owner, next.gpu, next.max_workers_per_token, limit, next.lease)
                        .await
                }
                NextTake::Batch { max, delay_ms } => {
                    match self.head(next.gpu, next.max_workers_per_token).await {
                        Ok(Some(head))
                            if head.same_key >= max as u64
                                || now_ms() - head.created_ms >= delay_ms as i64 =>
                        {
                            self.claim(&owner, next.gpu, Some(&head.batch_key), max, next.lease)
                                .await
                        }
                        Ok(_) => Ok(Vec::new()),
                        Err(e) => Err(e),
                    }
                }
            };
            let claimed = claimed.unwrap_or_else(|e| {
                tracing::warn!("claiming after storing {} ends: {e}", stored.len());
                Vec::new()
            });
            Ok((stored, claimed))
        })
    }
    /// Put a running job of `owner` back in the queue for another attempt, noting why; when
    /// its attempts are used up it fails with that error instead. Returns the new state.
    fn retry(
        &self,
        id: &str,
        owner: &str,
        code: &str,
        message: &str,
    ) -> BoxFuture<'_, StoreResult<Option<JobState>>>;
    /// Sweep the running jobs whose lease expired or whose owner does not start with
    /// `live_prefix` (a node that is gone), a sharded job's parent excepted (it holds no
    /// lease), in one transaction: a job with attempts left returns to the queue (the
    /// attempt counted at its claim); a job on its last attempt (`attempts >= max_attempts`)
    /// fails as [`LEASE_EXPIRED`], as [`JobStore::retry`] fails a job whose attempts are used
    /// up, a shard failing its parent with it, and its watchers are notified as for any end.
    /// A job that stops its worker or node every time therefore fails after `max_attempts`
    /// instead of going round the queue for ever. Returns how many were re-queued and the
    /// jobs failed. A shared store may leave a row another transaction holds (an end being
    /// stored) to a later sweep.
    fn requeue_orphans(&self, live_prefix: &str) -> BoxFuture<'_, StoreResult<Orphans>>;
    /// Counts by state (shards included) and in-flight jobs by principal (a sharded job
    /// counts once: its parent).
    fn counts(&self) -> BoxFuture<'_, StoreResult<StateCounts>>;
    /// Delete finished jobs older than `ttl`, then, for each principal whose results and
    /// result blobs take more than `max_result_bytes_per_token`, that principal's oldest
    /// finished jobs until they fit: one principal's results never evict another's. A
    /// sharded job is one job here: its shards are deleted with it (their results and
    /// blobs counted as its own), never alone. Returns the blob files to delete.
    fn expire(
        &self,
        ttl: Duration,
        max_result_bytes_per_token: u64,
    ) -> BoxFuture<'_, StoreResult<Vec<PathBuf>>>;
    /// Delete uploaded blobs (no job) created more than `ttl` ago. Returns their files.
    fn expire_blobs(&self, ttl: Duration) -> BoxFuture<'_, StoreResult<Vec<PathBuf>>>;
    /// Record a blob.
    fn put_blob(&self, blob: BlobRecord) -> BoxFuture<'_, StoreResult<()>>;
    /// Record an uploaded blob if its principal's uploaded blobs, with it, take at most
    /// `max_bytes_per_token`; else store nothing and return `Err(bytes already used)`.
    /// Checked and recorded atomically (two uploads cannot both pass on the same room).
    fn put_upload(
        &self,
        blob: BlobRecord,
        max_bytes_per_token: u64,
    ) -> BoxFuture<'_, StoreResult<Result<(), u64>>>;
    /// Bytes of uploaded blobs (no job) that `principal` holds.
    fn uploaded_bytes(&self, principal: &str) -> BoxFuture<'_, StoreResult<u64>>;
    /// Delete blob `id` if `principal` owns it; returns the deleted record (its file is the
    /// caller's to remove), `None` if there is no such blob of that principal.
    fn delete_blob(&self, id: &str, principal: &str) -> BoxFuture<'_, StoreResult<Option<BlobRecord>>>;
    /// A blob's metadata.
    fn get_blob(&self, id: &str) -> BoxFuture<'_, StoreResult<Option<BlobRecord>>>;
    /// Whether the store answers (readiness).
    fn ping(&self) -> BoxFuture<'_, StoreResult<()>>;
    /// Flush and close; later calls fail.
    fn close(&self) -> BoxFuture<'_, StoreResult<()>>;
    /// Return every running job of `node` (lease owners `node/...`) to the queue: its
    /// workers are gone (shutdown). The interrupted attempt is given back (a drain is not
    /// the job's fault), so a job drained on its last attempt runs that attempt again
    /// rather than an attempt past `max_attempts`. Returns how many.
    fn release_node(&self, node: &str) -> BoxFuture<'_, StoreResult<u64>>;
    /// Register or refresh `node` (its heartbeat) and renew the leases of the jobs it holds
    /// to now + `lease`.
    fn node_heartbeat(&self, node: &NodeInfo, lease: Duration) -> BoxFuture<'_, StoreResult<()>>;
    /// The registered nodes, most recently started first.
    fn nodes(&self) -> BoxFuture<'_, StoreResult<Vec<NodeRecord>>>;
    /// Remove `node` from the registry (a clean shutdown).
    fn node_gone(&self, node: &str) -> BoxFuture<'_, StoreResult<()>>;
    /// Whether other nodes share this store (then leases are swept periodically and
    /// admission counts are refreshed from the store).
    fn is_shared(&self) -> bool {
        false
    }
    /// Whether this node is the one that exports queue-wide gauges (always, unshared).
    fn queue_exporter(&self) -> bool {
        true
    }
    /// Deliver store events (new work, finished jobs) from other nodes to `events`; an
    /// unshared store has no other nodes and ignores it.
    fn set_events(&self, events: std::sync::Arc<dyn StoreEvents>) {
        let _ = events;
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
