//! [`PgStore`]: the job store on PostgreSQL, for many nodes sharing one queue.
//!
//! The client is tokio-postgres with a deadpool-postgres pool rather than sqlx: kiln needs
//! no compile-time query checking (sqlx's main draw, which wants a database or an offline
//! cache at build time), and tokio-postgres hands out a connection's raw message stream,
//! which is what LISTEN/NOTIFY needs ([`super::listen`]); both are small and well kept.
//!
//! - Claims: `UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED)`: concurrent claimers
//!   skip each other's rows instead of waiting, and a row is claimed by one of them only.
//! - Leases use the database's clock (`kiln_now_ms()`), so node clocks need not agree. A
//!   node's heartbeat renews the leases of every job it holds; any node's sweep
//!   ([`JobStore::requeue_orphans`], super::orphans) returns jobs whose lease expired to
//!   the queue, with the attempt already counted (as in the SQLite store: the next claim is
//!   attempt n+1), or fails them when that was their last attempt.
//! - Results live in the database (`kiln_results`), so any node answers for any job; blob
//!   bytes are files under the data dir, which nodes must share (docs/deployment.md).
//! - `NOTIFY kiln_jobs` on every insert and re-queue, `NOTIFY kiln_done` on every end, in
//!   the same transaction (delivered at commit).

use super::listen::Listener;
use super::rows::*;
use super::schema::{describe, migrate};
use crate::store::*;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio_postgres::NoTls;

/// Connection settings of the PostgreSQL store.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// Connections in the pool.
    pub pool_size: usize,
    /// Seconds to wait for a connection (connect, or a free one from the pool).
    pub connect_timeout_s: u64,
    /// The node's lease: nodes whose heartbeat is older are shown as not alive.
    pub lease: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            pool_size: 16,
            connect_timeout_s: 10,
            lease: Duration::from_secs(30),
        }
    }
}

/// The PostgreSQL store (see the [module docs](self)).
pub struct PgStore {
    pool: Pool,
    listener: Listener,
    closed: AtomicBool,
    lease: Duration,
}

/// A database error as a store error, with the server's message. A lost or refused
/// connection (the server restarting, `pg_terminate_backend`, too many connections) is
/// [`StoreFault::Unavailable`] and a full disk [`StoreFault::Full`]: both pass by
/// themselves, so clients get a 503 to retry rather than a 500.
pub fn pg_err(e: tokio_postgres::Error) -> StoreError {
    StoreError::with_fault(pg_fault(&e), format!("postgres: {}", describe(&e)))
}

fn pg_fault(e: &tokio_postgres::Error) -> StoreFault {
    use tokio_postgres::error::SqlState;
    if let Some(code) = e.code() {
        return if *code == SqlState::DISK_FULL {
            StoreFault::Full
        } else if code.code().starts_with("08")
            || [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
                SqlState::TOO_MANY_CONNECTIONS,
                SqlState::T_R_SERIALIZATION_FAILURE,
                SqlState::T_R_DEADLOCK_DETECTED,
            ]
            .contains(code)
        {
            StoreFault::Unavailable
        } else {
            StoreFault::Failed
        };
    }
    // No SQLSTATE: the connection closed, or connecting failed (an I/O error underneath).
    let io = std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
    if e.is_closed() || io {
        StoreFault::Unavailable
    } else {
        StoreFault::Failed
    }
}

fn pool_err(e: deadpool_postgres::PoolError) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => pg_err(e),
        // every connection busy for the whole wait (or the server slow to accept one)
        deadpool_postgres::PoolError::Timeout(t) => StoreError::with_fault(
            StoreFault::Unavailable,
            format!("postgres pool: no connection within the wait ({t:?}): every pooled connection is busy"),
        ),
        other => StoreError::new(format!("postgres pool: {other}")),
    }
}

/// Parse and check a `postgres://` URL (or key=value string) without connecting.
pub fn parse_url(url: &str) -> StoreResult<tokio_postgres::Config> {
    let cfg = tokio_postgres::Config::from_str(url)
        .map_err(|e| StoreError::new(format!("store.url is not a valid PostgreSQL URL: {e}")))?;
    if cfg.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
        return Err(StoreError::new(
            "store.url asks for sslmode=require; this build connects without TLS: use a \
             private network, a TLS-terminating proxy, or sslmode=disable",
        ));
    }
    if cfg.get_hosts().is_empty() {
        return Err(StoreError::new("store.url names no host"));
    }
    Ok(cfg)
}

impl PgStore {
    /// Connect to `url`, apply the migrations, and start the listener (notifications and
    /// the election of the queue-gauge exporter).
    pub async fn connect(url: &str, opts: PgOptions) -> StoreResult<PgStore> {
        let mut cfg = parse_url(url)?;
        if cfg.get_connect_timeout().is_none() {
            cfg.connect_timeout(Duration::from_secs(opts.connect_timeout_s.max(1)));
        }
        if cfg.get_application_name().is_none() {
            cfg.application_name("kiln");
        }
        let mgr = Manager::from_config(
            cfg.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(mgr)
            .max_size(opts.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(opts.connect_timeout_s.max(1))))
            .create_timeout(Some(Duration::from_secs(opts.connect_timeout_s.max(1))))
            .build()
            .map_err(|e| StoreError::new(format!("postgres pool: {e}")))?;
        {
            let mut c = pool.get().await.map_err(pool_err)?;
            let client: &mut tokio_postgres::Client = &mut c;
            migrate(client).await?;
        }
        let listener = Listener::start(cfg);
        Ok(PgStore {
            pool,
            listener,
            closed: AtomicBool::new(false),
            lease: opts.lease,
        })
    }

    async fn conn(&self) -> StoreResult<Conn> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(StoreError::new("the store is closed"));
        }
        self.pool.get().await.map_err(pool_err)
    }

    /// Whether this node holds the exporter lock now.
    pub fn is_leader(&self) -> bool {
        self.listener.is_leader()
    }
}

impl JobStore for PgStore {
    fn insert(&self, job: NewJob) -> BoxFuture<'_, StoreResult<Inserted>> {
        Box::pin(async move { super::insert::insert_one(self.conn().await?, job).await })
    }

    fn insert_batch(&self, jobs: Vec<NewJob>) -> BoxFuture<'_, StoreResult<BatchInserted>> {
        Box::pin(async move { super::insert::insert_many(self.conn().await?, jobs).await })
    }

    fn insert_sharded(&self, parent: NewJob, shards: Vec<NewJob>) -> BoxFuture<'_, StoreResult<Inserted>> {
        Box::pin(async move { super::shards::insert_sharded(self.conn().await?, parent, shards).await })
    }

    fn get(&self, id: &str) -> BoxFuture<'_, StoreResult<Option<JobRecord>>> {
        let id = id.to_string();
        Box::pin(async move {
            let c = self.conn().await?;
            get_job(&c, &id, true).await
        })
    }

    fn shard_result(&self, parent: &str, index: u64) -> BoxFuture<'_, StoreResult<Option<String>>> {
        let parent = parent.to_string();
        Box::pin(async move {
            let c = self.conn().await?;
            let st = c
                .prepare_cached(
                    "SELECT r.body FROM kiln_jobs j JOIN kiln_results r ON r.job_id = j.id \
                     WHERE j.parent = $1 AND j.shard_index = $2",
                )
                .await
                .map_err(pg_err)?;
            let index = index.min(i32::MAX as u64) as i32;
            let row = c.query_opt(&st, &[&parent, &index]).await.map_err(pg_err)?;
            row.map(|r| r.try_get(0).map_err(pg_err)).transpose()
        })
    }

    fn list(&self, q: ListQuery) -> BoxFuture<'_, StoreResult<JobPage>> {
        Box::pin(async move {
            let c = self.conn().await?;
            let limit = i64::from(q.limit.clamp(1, 1000));
            let st = c
                .prepare_cached(&format!(
                    "SELECT {JOB_COLS} FROM kiln_jobs j WHERE ($1::text IS NULL OR j.principal = $1) \
                     AND ($2::text IS NULL OR j.state = $2) AND ($3::bigint IS NULL OR j.seq < $3) \
                     AND j.parent IS NULL ORDER BY j.seq DESC LIMIT $4"
                ))
                .await
                .map_err(pg_err)?;
            let state = q.state.map(JobState::name);
            let rows = c
                .query(&st, &[&q.principal, &state, &q.cursor, &(limit + 1)])
                .await
                .map_err(pg_err)?;
            let mut jobs = rows.iter().map(job_row).collect::<StoreResult<Vec<_>>>()?;
            let more = jobs.len() > limit as usize;
            jobs.truncate(limit as usize);
            let next_cursor = if more { jobs.last().map(|j| j.seq) } else { None };
            Ok(JobPage { jobs, next_cursor })
        })
    }

    fn cancel(&self, id: &str) -> BoxFuture<'_, StoreResult<Option<JobRecord>>> {
        let id = id.to_string();
        Box::pin(async move {
            let (c, root) = super::shards::cancel(self.conn().await?, &id).await?;
            get_job(&c, &root, true).await
        })
    }

    fn head(&self, gpu: bool, max_workers_per_token: u32) -> BoxFuture<'_, StoreResult<Option<QueueHead>>> {
        Box::pin(async move {
            let c = self.conn().await?;
            // The order of JobStore::head: fewest slots held, least recently served, oldest.
            // The principals with queued work come from a skip scan of the queued index (a
            // recursive step per principal), not a pass over every queued job. `same_key` is
            // only compared with the batch size: count at most 10,000.
            let st = c
                .prepare_cached(
                    "WITH RECURSIVE p(name) AS ( \
                       (SELECT principal FROM kiln_jobs WHERE state = 'queued' ORDER BY principal LIMIT 1) \
                       UNION ALL SELECT (SELECT principal FROM kiln_jobs WHERE state = 'queued' \
                         AND principal > p.name ORDER BY principal LIMIT 1) FROM p WHERE p.name IS NOT NULL), \
                     c AS (SELECT name, \
                       (SELECT seq FROM kiln_jobs WHERE state = 'queued' AND principal = p.name \
                         AND (NOT needs_gpu OR $1) ORDER BY priority DESC, seq LIMIT 1) AS first, \
                       (SELECT count(DISTINCT lease_owner) FROM kiln_jobs WHERE state = 'running' \
                         AND principal = p.name) AS slots, \
                       (SELECT max(started_ms) FROM kiln_jobs WHERE principal = p.name) AS last \
                       FROM p WHERE name IS NOT NULL) \
                     SELECT j.batch_key, j.created_ms, (SELECT count(*) FROM (SELECT 1 FROM kiln_jobs x \
                       WHERE x.state = 'queued' AND x.batch_key = j.batch_key LIMIT 10000) n) \
                     FROM c JOIN kiln_jobs j ON j.seq = c.first \
                     WHERE $2::bigint = 0 OR c.slots < $2::bigint \
                     ORDER BY c.slots, c.last NULLS FIRST, c.first LIMIT 1",
                )
                .await
                .map_err(pg_err)?;
            let cap = i64::from(max_workers_per_token);
            let Some(r) = c.query_opt(&st, &[&gpu, &cap]).await.map_err(pg_err)? else {
                return Ok(None);
            };
            let n: i64 = r.try_get(2).map_err(pg_err)?;
            Ok(Some(QueueHead {
                batch_key: r.try_get(0).map_err(pg_err)?,
                created_ms: r.try_get(1).map_err(pg_err)?,
                same_key: n.max(0) as u64,
            }))
        })
    }

    fn claim(
        &self,
        owner: &str,
        gpu: bool,
        batch_key: Option<&str>,
        max: usize,
        lease: Duration,
    ) -> BoxFuture<'_, StoreResult<Vec<ClaimedJob>>> {
        let owner = owner.to_string();
        let key = batch_key.map(str::to_string);
        Box::pin(async move {
            let c = self.conn().await?;
            let st = c
                .prepare_cached(
                    "UPDATE kiln_jobs j SET state = 'running', attempts = j.attempts + 1, started_ms = $1, \
                     lease_owner = $2, lease_until_ms = kiln_now_ms() + $3 \
                     FROM (SELECT seq FROM kiln_jobs WHERE state = 'queued' AND (NOT needs_gpu OR $4) \
                       AND ($5::text IS NULL OR batch_key = $5) ORDER BY priority DESC, seq LIMIT $6 \
                       FOR UPDATE SKIP LOCKED) picked \
                     WHERE j.seq = picked.seq \
                     RETURNING j.id, j.kind, j.principal, j.task, j.attempts, j.max_attempts, \
                       j.created_ms, j.deadline_ms, j.seq, j.priority, j.queue_until_ms, j.parent",
                )
                .await
                .map_err(pg_err)?;
            let max = max.clamp(1, 100_000) as i64;
            let rows = c
                .query(&st, &[&now_ms(), &owner, &ms(lease), &gpu, &key, &max])
                .await
                .map_err(pg_err)?;
            let mut jobs = rows
                .iter()
                .map(|r| {
                    let attempt: i32 = r.try_get(4).map_err(pg_err)?;
                    let max_attempts: i32 = r.try_get(5).map_err(pg_err)?;
                    let seq: i64 = r.try_get(8).map_err(pg_err)?;
                    let priority: i32 = r.try_get(9).map_err(pg_err)?;
                    Ok((
                        (-i64::from(priority), seq),
                        ClaimedJob {
                            id: r.try_get(0).map_err(pg_err)?,
                            kind: r.try_get(1).map_err(pg_err)?,
                            principal: r.try_get(2).map_err(pg_err)?,
                            task: r.try_get(3).map_err(pg_err)?,
                            attempt: attempt.max(0) as u32,
                            max_attempts: max_attempts.max(0) as u32,
                            created_ms: r.try_get(6).map_err(pg_err)?,
                            deadline_ms: r.try_get(7).map_err(pg_err)?,
                            queue_until_ms: r.try_get(10).map_err(pg_err)?,
                            parent: r.try_get(11).map_err(pg_err)?,
                        },
                    ))
                })
                .collect::<StoreResult<Vec<_>>>()?;
            jobs.sort_by_key(|(s, _)| *s);
            Ok(jobs.into_iter().map(|(_, j)| j).collect())
        })
    }

    fn expire_queued(&self) -> BoxFuture<'_, StoreResult<Vec<ExpiredJob>>> {
        Box::pin(async move {
            let c = self.conn().await?;
            let st = c
                .prepare_cached(
                    "WITH u AS (UPDATE kiln_jobs SET state = 'failed', finished_ms = kiln_now_ms(), \
                       error_code = $1, error_message = $2 \
                     WHERE state = 'queued' AND queue_until_ms IS NOT NULL AND queue_until_ms <= kiln_now_ms() \
                     RETURNING id, kind, principal, created_ms) \
                     SELECT id, kind, principal, created_ms, pg_notify('kiln_done', id) FROM u",
                )
                .await
                .map_err(pg_err)?;
            let rows = c.query(&st, &[&EXPIRED.0, &EXPIRED.1]).await.map_err(pg_err)?;
            rows.iter()
                .map(|r| {
                    Ok(ExpiredJob {
                        id: r.try_get(0).map_err(pg_err)?,
                        kind: r.try_get(1).map_err(pg_err)?,
                        principal: r.try_get(2).map_err(pg_err)?,
                        created_ms: r.try_get(3).map_err(pg_err)?,
                    })
                })
                .collect()
        })
    }

    fn renew(&self, owner: &str, ids: &[String], lease: Duration) -> BoxFuture<'_, StoreResult<()>> {
        let owner = owner.to_string();
        let ids = ids.to_vec();
        Box::pin(async move {
            let c = self.conn().await?;
            c.execute(
                "UPDATE kiln_jobs SET lease_until_ms = kiln_now_ms() + $3 \
                 WHERE id = ANY($1) AND lease_owner = $2 AND state = 'running'",
                &[&ids, &owner, &ms(lease)],
            )
            .await
            .map_err(pg_err)?;
            Ok(())
        })
    }

    fn finish(&self, id: &str, owner: &str, outcome: Outcome) -> BoxFuture<'_, StoreResult<bool>> {
        let id = id.to_string();
        let owner = owner.to_string();
        Box::pin(async move { super::finish::finish_one(self.conn().await?, &id, &owner, &outcome).await })
    }

    fn finish_many(&self, owner: &str, ends: Vec<JobEnd>) -> BoxFuture<'_, StoreResult<Vec<bool>>> {
        let owner = owner.to_string();
        Box::pin(async move { super::finish::finish_many(self.conn().await?, &owner, &ends).await })
    }

    fn retry(
        &self,
        id: &str,
        owner: &str,
        code: &str,
        message: &str,
    ) -> BoxFuture<'_, StoreResult<Option<JobState>>> {
        let (id, owner, code, message) = (
            id.to_string(),
            owner.to_string(),
            code.to_string(),
            message.to_string(),
        );
        Box::pin(async move {
            let mut c = self.conn().await?;
            let tx = c.transaction().await.map_err(pg_err)?;
            // a shard's parent first (crate::shard: the lock order of every sharded change)
            super::shards::lock_parents(&tx, &[id.as_str()]).await?;
            let now = now_ms();
            let row = tx
                .query_opt(
                    "WITH u AS (UPDATE kiln_jobs SET \
                       state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END, \
                       finished_ms = CASE WHEN attempts >= max_attempts THEN $5::bigint ELSE NULL END, \
                       lease_owner = NULL, lease_until_ms = NULL, error_code = $3, error_message = $4 \
                     WHERE id = $1 AND state = 'running' AND lease_owner = $2 RETURNING id, state) \
                     SELECT state, pg_notify(CASE WHEN state = 'queued' THEN 'kiln_jobs' ELSE 'kiln_done' END, id) \
                     FROM u",
                    &[&id, &owner, &code, &message, &now],
                )
                .await
                .map_err(pg_err)?;
            let state = row.and_then(|r| JobState::parse(r.get::<_, &str>(0)));
            if state == Some(JobState::Failed) {
                super::shards::after_end(&tx, &id, now).await?;
            }
            tx.commit().await.map_err(pg_err)?;
            Ok(state)
        })
    }

    /// In a shared store other lease owners are live nodes, so `live_prefix` does not
    /// decide: only expired leases (and running jobs without an owner) are swept
    /// (super::orphans).
    fn requeue_orphans(&self, live_prefix: &str) -> BoxFuture<'_, StoreResult<Orphans>> {
        let _ = live_prefix;
        Box::pin(async move { super::orphans::requeue_orphans(self.conn().await?).await })
    }

    fn counts(&self) -> BoxFuture<'_, StoreResult<StateCounts>> {
        Box::pin(async move {
            let c = self.conn().await?;
            let rows = c
                .query("SELECT state, count(*) FROM kiln_jobs GROUP BY state", &[])
                .await
                .map_err(pg_err)?;
            let by_state = JobState::ALL
                .into_iter()
                .map(|s| {
                    let n = rows
                        .iter()
                        .find(|r| r.get::<_, &str>(0) == s.name())
                        .map_or(0, |r| r.get::<_, i64>(1));
                    (s, n.max(0) as u64)
                })
                .collect();
            let rows = c
                .query(
                    "SELECT principal, count(*) FROM kiln_jobs WHERE state IN ('queued', 'running') \
                     AND parent IS NULL GROUP BY principal",
                    &[],
                )
                .await
                .map_err(pg_err)?;
            let in_flight_by_principal = rows
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1).max(0) as u64))
                .collect();
            Ok(StateCounts {
                by_state,
                in_flight_by_principal,
            })
        })
    }

    fn expire(
        &self,
        ttl: Duration,
        max_result_bytes_per_token: u64,
    ) -> BoxFuture<'_, StoreResult<Vec<PathBuf>>> {
        Box::pin(async move {
            let mut c = self.conn().await?;
            let tx = c.transaction().await.map_err(pg_err)?;
            let cutoff = now_ms() - ms(ttl);
            let old: Vec<String> = tx
                .query(
                    "SELECT id FROM kiln_jobs WHERE state IN ('succeeded', 'failed', 'cancelled') \
                     AND finished_ms < $1 AND parent IS NULL LIMIT 10000 FOR UPDATE SKIP LOCKED",
                    &[&cutoff],
                )
                .await
                .map_err(pg_err)?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let mut paths = delete_jobs(&tx, &old).await?;
            let cap = max_result_bytes_per_token.min(i64::MAX as u64) as i64;
            for (principal, total) in over_result_cap(&tx, cap).await? {
                let mut excess = total - cap;
                let rows = tx
                    .query(
                        "SELECT j.id, (coalesce(r.bytes, 0) + coalesce((SELECT sum(size) FROM kiln_blobs b \
                         WHERE b.job_id = j.id), 0) + CASE WHEN j.shards IS NULL THEN 0 ELSE \
                         coalesce((SELECT sum(sr.bytes) FROM kiln_jobs s JOIN kiln_results sr \
                         ON sr.job_id = s.id WHERE s.parent = j.id), 0) + coalesce((SELECT sum(b.size) \
                         FROM kiln_jobs s JOIN kiln_blobs b ON b.job_id = s.id WHERE s.parent = j.id), 0) \
                         END)::bigint FROM kiln_jobs j \
                         LEFT JOIN kiln_results r ON r.job_id = j.id WHERE j.principal = $1 \
                         AND j.state IN ('succeeded', 'failed', 'cancelled') AND j.parent IS NULL \
                         ORDER BY j.finished_ms LIMIT 10000",
                        &[&principal],
                    )
                    .await
                    .map_err(pg_err)?;
                let mut ids = Vec::new();
                for r in rows {
                    if excess <= 0 {
                        break;
                    }
                    excess -= r.get::<_, i64>(1);
                    ids.push(r.get::<_, String>(0));
                }
                paths.extend(delete_jobs(&tx, &ids).await?);
            }
            tx.commit().await.map_err(pg_err)?;
            Ok(paths)
        })
    }

    fn expire_blobs(&self, ttl: Duration) -> BoxFuture<'_, StoreResult<Vec<PathBuf>>> {
        Box::pin(async move {
            let c = self.conn().await?;
            let rows = c
                .query(
                    "DELETE FROM kiln_blobs WHERE id IN (SELECT id FROM kiln_blobs WHERE job_id IS NULL \
                     AND created_ms < $1 LIMIT 10000) RETURNING path",
                    &[&(now_ms() - ms(ttl))],
                )
                .await
                .map_err(pg_err)?;
            rows.iter()
                .map(|r| r.try_get::<_, String>(0).map(PathBuf::from).map_err(pg_err))
                .collect()
        })
    }

    fn put_blob(&self, blob: BlobRecord) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let c = self.conn().await?;
            insert_blob(&**c, &blob).await
        })
    }

    fn put_upload(
        &self,
        blob: BlobRecord,
        max_bytes_per_token: u64,
    ) -> BoxFuture<'_, StoreResult<Result<(), u64>>> {
        Box::pin(async move { put_upload(&mut self.conn().await?, &blob, max_bytes_per_token).await })
    }

    fn uploaded_bytes(&self, principal: &str) -> BoxFuture<'_, StoreResult<u64>> {
        let principal = principal.to_string();
        Box::pin(async move { uploaded(&**self.conn().await?, &principal).await })
    }

    fn delete_blob(&self, id: &str, principal: &str) -> BoxFuture<'_, StoreResult<Option<BlobRecord>>> {
        let (id, principal) = (id.to_string(), principal.to_string());
        Box::pin(async move {
            let c = self.conn().await?;
            let r = c
                .query_opt(
                    "DELETE FROM kiln_blobs WHERE id = $1 AND principal = $2 \
                     RETURNING id, path, size, sha256, format, principal, job_id, created_ms",
                    &[&id, &principal],
                )
                .await
                .map_err(pg_err)?;
            r.as_ref().map(blob_row).transpose()
        })
    }

    fn get_blob(&self, id: &str) -> BoxFuture<'_, StoreResult<Option<BlobRecord>>> {
        let id = id.to_string();
        Box::pin(async move {
            let c = self.conn().await?;
            let r = c
                .query_opt(
                    "SELECT id, path, size, sha256, format, principal, job_id, created_ms FROM kiln_blobs \
                     WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(pg_err)?;
            r.as_ref().map(blob_row).transpose()
        })
    }

    fn ping(&self) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            self.conn()
                .await?
                .execute("SELECT 1", &[])
                .await
                .map_err(pg_err)?;
            Ok(())
        })
    }

    fn close(&self) -> BoxFuture<'_, StoreResult<()>> {
        self.closed.store(true, Ordering::SeqCst);
        self.listener.stop();
        self.pool.close();
        Box::pin(async { Ok(()) })
    }

    fn release_node(&self, node: &str) -> BoxFuture<'_, StoreResult<u64>> {
        let prefix = format!("{node}/");
        Box::pin(async move {
            let c = self.conn().await?;
            let rows = c
                .query(
                    "WITH u AS (UPDATE kiln_jobs SET state = 'queued', lease_owner = NULL, lease_until_ms = NULL, \
                     attempts = GREATEST(attempts - 1, 0) \
                     WHERE state = 'running' AND starts_with(lease_owner, $1) RETURNING 1) \
                     SELECT count(*), CASE WHEN count(*) > 0 THEN pg_notify('kiln_jobs', '') END FROM u",
                    &[&prefix],
                )
                .await
                .map_err(pg_err)?;
            let n: i64 = rows.first().map_or(0, |r| r.get(0));
            Ok(n.max(0) as u64)
        })
    }

    fn node_heartbeat(&self, node: &NodeInfo, lease: Duration) -> BoxFuture<'_, StoreResult<()>> {
        let node = node.clone();
        Box::pin(async move {
            let mut c = self.conn().await?;
            let devices = serde_json::to_string(&node.devices).map_err(|e| StoreError::new(e.to_string()))?;
            let tx = c.transaction().await.map_err(pg_err)?;
            tx.execute(
                "INSERT INTO kiln_nodes(id, hostname, devices, started_ms, last_heartbeat_ms, version) \
                 VALUES ($1, $2, $3, $4, kiln_now_ms(), $5) ON CONFLICT (id) DO UPDATE SET \
                 hostname = EXCLUDED.hostname, devices = EXCLUDED.devices, \
                 last_heartbeat_ms = EXCLUDED.last_heartbeat_ms, version = EXCLUDED.version",
                &[
                    &node.id,
                    &node.hostname,
                    &devices,
                    &node.started_ms,
                    &node.version,
                ],
            )
            .await
            .map_err(pg_err)?;
            let prefix = format!("{}/", node.id);
            // never waits on a row lock: a row held by an end being stored (a sharded job's
            // merge may take longer than the lease) cannot be swept while held and is
            // terminal once committed; waiting on it would leave the node's other leases
            // unrenewed, and its keeper (whose sweep and heartbeat take turns) stalled
            tx.execute(
                "UPDATE kiln_jobs SET lease_until_ms = kiln_now_ms() + $2 WHERE id IN \
                 (SELECT id FROM kiln_jobs WHERE state = 'running' AND starts_with(lease_owner, $1) \
                 FOR UPDATE SKIP LOCKED)",
                &[&prefix, &ms(lease)],
            )
            .await
            .map_err(pg_err)?;
            // Nodes silent for a day are forgotten.
            tx.execute(
                "DELETE FROM kiln_nodes WHERE last_heartbeat_ms < kiln_now_ms() - 86400000",
                &[],
            )
            .await
            .map_err(pg_err)?;
            tx.commit().await.map_err(pg_err)?;
            Ok(())
        })
    }

    fn nodes(&self) -> BoxFuture<'_, StoreResult<Vec<NodeRecord>>> {
        Box::pin(async move {
            let c = self.conn().await?;
            let rows = c
                .query(
                    "SELECT id, hostname, devices, started_ms, last_heartbeat_ms, version, \
                     last_heartbeat_ms >= kiln_now_ms() - $1 FROM kiln_nodes ORDER BY started_ms DESC, id",
                    &[&ms(self.lease)],
                )
                .await
                .map_err(pg_err)?;
            rows.iter()
                .map(|r| {
                    let devices: String = r.try_get(2).map_err(pg_err)?;
                    Ok(NodeRecord {
                        id: r.try_get(0).map_err(pg_err)?,
                        hostname: r.try_get(1).map_err(pg_err)?,
                        devices: serde_json::from_str(&devices).unwrap_or_default(),
                        started_ms: r.try_get(3).map_err(pg_err)?,
                        last_heartbeat_ms: r.try_get(4).map_err(pg_err)?,
                        version: r.try_get(5).map_err(pg_err)?,
                        alive: r.try_get(6).map_err(pg_err)?,
                    })
                })
                .collect()
        })
    }

    fn node_gone(&self, node: &str) -> BoxFuture<'_, StoreResult<()>> {
        let node = node.to_string();
        Box::pin(async move {
            self.conn()
                .await?
                .execute("DELETE FROM kiln_nodes WHERE id = $1", &[&node])
                .await
                .map_err(pg_err)?;
            Ok(())
        })
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn queue_exporter(&self) -> bool {
        self.listener.is_leader()
    }

    fn set_events(&self, events: Arc<dyn StoreEvents>) {
        self.listener.set_events(events);
    }
}
