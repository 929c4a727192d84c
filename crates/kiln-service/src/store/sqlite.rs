//! The SQLite job store: one database file in WAL mode under the data dir.
//!
//! One writer thread owns the write connection and commits in groups: it takes every write
//! waiting in its channel (up to [`GROUP`](writer::GROUP)), runs each in a savepoint of one transaction,
//! commits once, and only then answers the callers. Under load many submissions share one
//! commit (one fsync with `synchronous = FULL`), and nothing is acknowledged before it is
//! on disk. Reads use a second connection (WAL readers do not block the writer) on a
//! blocking thread; the hot path's point reads (a job by id, the queue head) use a third
//! connection in place, on the caller's thread, when it is free and the database is not
//! busy ([`SqliteStore::point_read`]): a read of microseconds then costs no thread hand-off.

mod claim;
mod finish;
mod orphans;
mod rows;
mod schema;
mod shards;
mod tenancy;
mod writer;

use super::*;
use finish::{finish_all, finish_one};
use rows::{
    blob_row, delete_jobs, get_job, insert_blob, insert_job, insert_job_as, job_row, Sharded, JOB_COLS,
};
use rusqlite::config::DbConfig;
use rusqlite::{params, Connection, OptionalExtension};
use schema::{DROPPED_INDEXES, INDEXES_V2, INDEXES_V3, SCHEMA, SCHEMA_VERSION, TO_V2, TO_V3, TO_V4};
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use tenancy::{fair_head, uploaded};
use tokio::sync::oneshot;
use writer::{sqlite_err, writer_loop, Reply, WriteOp};

/// The SQLite store (see the [module docs](self)).
pub struct SqliteStore {
    writer: Mutex<Option<mpsc::Sender<WriteOp>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    reader: Arc<Mutex<Connection>>,
    /// The connection of [`SqliteStore::point_read`]: no busy timeout (a busy database sends
    /// the read to `reader` on a blocking thread instead of waiting on the caller's).
    point: Arc<Mutex<Connection>>,
    /// The one node of an unshared store (the registry lives in memory).
    node: Mutex<Option<NodeRecord>>,
}

/// Statements a connection keeps prepared: every statement of the store fits, so none is
/// parsed again on the hot path (rusqlite's default keeps 16).
const STATEMENT_CACHE: usize = 128;

/// Run a statement prepared once per connection (the hot path's writes: a claim, a finish,
/// a retry run per job, and a group of them per commit).
fn exec(c: &Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(p)
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError::new(e.to_string())
}

fn open(path: &Path, synchronous_full: bool) -> StoreResult<Connection> {
    let c = Connection::open(path).map_err(|e| StoreError::new(format!("{}: {e}", path.display())))?;
    c.busy_timeout(Duration::from_secs(10)).map_err(err)?;
    c.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
    c.pragma_update(
        None,
        "synchronous",
        if synchronous_full { "FULL" } else { "NORMAL" },
    )
    .map_err(err)?;
    c.pragma_update(None, "foreign_keys", "ON").map_err(err)?;
    c.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // The query planner's stability guarantee: SQLite otherwise recompiles a prepared
    // statement whenever a bound value the planner looked at changes, which a bound LIMIT
    // is (SQLite 3.47+): every claim of a different batch size was parsed and planned
    // again, about 5% of the server's CPU. The store's plans do not depend on the values
    // (no ANALYZE statistics), so one plan per statement loses nothing.
    c.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(err)?;
    Ok(c)
}

impl SqliteStore {
    /// Open (or create) `dir/jobs.sqlite3`. `synchronous_full`: fsync every commit (else
    /// only WAL checkpoints: a power loss may drop the last commits, a crash does not).
    pub fn open(dir: &Path, synchronous_full: bool) -> StoreResult<SqliteStore> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::new(format!("{}: {e}", dir.display())))?;
        let path = dir.join("jobs.sqlite3");
        // created 0600 before SQLite opens it: SQLite gives its WAL and SHM files the
        // database file's mode (crate::private)
        if !path.exists() {
            crate::private::private_create()
                .truncate(false)
                .open(&path)
                .map_err(|e| StoreError::new(format!("{}: {e}", path.display())))?;
        }
        let w = open(&path, synchronous_full)?;
        // The writer runs each op of a group in a savepoint, and SQLite keeps the pages a
        // savepoint changes in a sub-journal, a temporary file once it passes 64 KiB (a
        // write call per page, the file opened and unlinked per transaction). In memory it
        // is a copy: the sub-journal only ever undoes a failed op, durability is the WAL's.
        w.pragma_update(None, "temp_store", "MEMORY").map_err(err)?;
        w.execute_batch(SCHEMA).map_err(err)?;
        let v: Option<String> = w
            .query_row("SELECT value FROM meta WHERE key='schema_version'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(err)?;
        match v.as_deref().map(str::parse::<i64>) {
            None => {
                w.execute(
                    "INSERT INTO meta(key, value) VALUES('schema_version', ?1)",
                    [SCHEMA_VERSION.to_string()],
                )
                .map_err(err)?;
            }
            Some(Ok(SCHEMA_VERSION)) => {}
            Some(Ok(v @ (1..=3))) => {
                // one transaction: a crash midway leaves the old version, migrated again
                // next start
                // a file whose results table the schema above just created has the
                // version-4 column already
                let has_v4: i64 = w
                    .query_row(
                        "SELECT count(*) FROM pragma_table_info('results') WHERE name = 'shards'",
                        [],
                        |r| r.get(0),
                    )
                    .map_err(err)?;
                let to_v4 = if has_v4 > 0 { "" } else { TO_V4 };
                let steps = match v {
                    1 => format!("{TO_V2} {TO_V3} {to_v4}"),
                    2 => format!("{TO_V3} {to_v4}"),
                    _ => to_v4.to_string(),
                };
                w.execute_batch(&format!(
                    "BEGIN; {steps} UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'; COMMIT;"
                ))
                .map_err(|e| {
                    StoreError::new(format!(
                        "{}: migrating to schema {SCHEMA_VERSION}: {e}",
                        path.display()
                    ))
                })?;
                tracing::info!(
                    "{}: job store migrated from schema {v} to {SCHEMA_VERSION} (priorities, queue \
                     timeouts, sharded jobs, sharded results kept as manifests)",
                    path.display()
                );
            }
            Some(other) => {
                return Err(StoreError::new(format!(
                    "{} has schema version {other:?}; this kiln knows {SCHEMA_VERSION}",
                    path.display()
                )))
            }
        }
        w.execute_batch(INDEXES_V2).map_err(err)?;
        w.execute_batch(INDEXES_V3).map_err(err)?;
        w.execute_batch(DROPPED_INDEXES).map_err(err)?;
        let r = open(&path, synchronous_full)?;
        let point = open(&path, synchronous_full)?;
        point.busy_timeout(Duration::ZERO).map_err(err)?;
        let (tx, rx) = mpsc::channel::<WriteOp>();
        let thread = std::thread::Builder::new()
            .name("kiln-store-writer".into())
            .spawn(move || writer_loop(w, rx))
            .map_err(err)?;
        Ok(SqliteStore {
            writer: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            reader: Arc::new(Mutex::new(r)),
            point: Arc::new(Mutex::new(point)),
            node: Mutex::new(None),
        })
    }

    /// Run `f` on the writer thread inside the group transaction; resolves after commit.
    fn write<T, F>(&self, f: F) -> BoxFuture<'_, StoreResult<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<StoreResult<T>>();
        let op: WriteOp = Box::new(move |c| {
            let r = f(c);
            let failure = r.as_ref().err().map(sqlite_err);
            let reply: Reply = Box::new(move |commit_err: Option<&StoreError>| {
                let out = match (r, commit_err) {
                    // a failed begin or commit stored nothing of the op, whatever it returned
                    // (an op run on op_failed's empty database fails for want of a table)
                    (_, Some(e)) => Err(StoreError::with_fault(
                        e.fault(),
                        format!("commit failed: {}", e.message()),
                    )),
                    (Ok(v), None) => Ok(v),
                    (Err(e), None) => Err(sqlite_err(&e)),
                };
                let _ = tx.send(out);
            });
            (failure, reply)
        });
        let sent = self
            .writer
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(|s| s.send(op).is_ok()))
            .unwrap_or(false);
        Box::pin(async move {
            if !sent {
                return Err(StoreError::new("the store is closed"));
            }
            rx.await
                .unwrap_or_else(|_| Err(StoreError::new("the store's writer stopped")))
        })
    }

    /// Run `f` on the read connection (a blocking thread).
    fn read<T, F>(&self, f: F) -> BoxFuture<'_, StoreResult<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let reader = self.reader.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let c = reader.lock().map_err(|_| StoreError::new("reader poisoned"))?;
                f(&c).map_err(|e| sqlite_err(&e))
            })
            .await
            .map_err(err)?
        })
    }

    /// A short read (an indexed lookup of a few rows) run in place, on the polling thread,
    /// when the point connection is free and the database answers at once; else as
    /// [`SqliteStore::read`] does, on a blocking thread. Sending a read of microseconds to a
    /// blocking thread costs two thread wake-ups, more than the read; the point connection
    /// never waits (no busy timeout, `try_lock`), so the caller's thread is never held
    /// behind another read or a busy database.
    fn point_read<T, F>(&self, f: F) -> BoxFuture<'_, StoreResult<T>>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> rusqlite::Result<T> + Send + Sync + 'static,
    {
        let point = self.point.clone();
        Box::pin(async move {
            let f = Arc::new(f);
            if let Ok(c) = point.try_lock() {
                match f(&c) {
                    Err(rusqlite::Error::SqliteFailure(e, _))
                        if matches!(
                            e.code,
                            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                        ) => {}
                    r => return r.map_err(|e| sqlite_err(&e)),
                }
            }
            let g = f.clone();
            self.read(move |c| g(c)).await
        })
    }
}

impl JobStore for SqliteStore {
    fn insert(&self, job: NewJob) -> BoxFuture<'_, StoreResult<Inserted>> {
        self.write(move |c| insert_job(c, &job))
    }

    fn insert_batch(&self, jobs: Vec<NewJob>) -> BoxFuture<'_, StoreResult<BatchInserted>> {
        // One write op: the writer's savepoint around it rolls back every insert of the
        // batch if one fails; a savepoint of its own rolls them back on a key mismatch.
        self.write(move |c| {
            c.execute_batch("SAVEPOINT batch")?;
            let list: rusqlite::Result<Vec<Inserted>> = jobs.iter().map(|j| insert_job(c, j)).collect();
            let verdict = list.map(BatchInserted::check);
            if !matches!(verdict, Ok(BatchInserted::Stored(_))) {
                c.execute_batch("ROLLBACK TO batch")?;
            }
            c.execute_batch("RELEASE batch")?;
            verdict
        })
    }

    fn insert_sharded(&self, parent: NewJob, shards: Vec<NewJob>) -> BoxFuture<'_, StoreResult<Inserted>> {
        // one write op: its savepoint rolls back the parent and every shard if one fails
        self.write(move |c| {
            let inserted = insert_job_as(c, &parent, Sharded::Parent(shards.len() as u64))?;
            if matches!(inserted, Inserted::Created(_)) {
                for (i, s) in shards.iter().enumerate() {
                    insert_job_as(
                        c,
                        s,
                        Sharded::Shard {
                            parent: &parent.id,
                            index: i as u64,
                        },
                    )?;
                }
            }
            Ok(inserted)
        })
    }

    fn get(&self, id: &str) -> BoxFuture<'_, StoreResult<Option<JobRecord>>> {
        let id = id.to_string();
        self.point_read(move |c| get_job(c, &id, true))
    }

    fn shard_result(&self, parent: &str, index: u64) -> BoxFuture<'_, StoreResult<Option<String>>> {
        let parent = parent.to_string();
        self.read(move |c| {
            c.prepare_cached(
                "SELECT r.body FROM jobs j JOIN results r ON r.job_id = j.id \
                 WHERE j.parent = ?1 AND j.shard_index = ?2",
            )?
            .query_row(params![parent, index.min(i64::MAX as u64) as i64], |r| r.get(0))
            .optional()
        })
    }

    fn list(&self, q: ListQuery) -> BoxFuture<'_, StoreResult<JobPage>> {
        self.read(move |c| {
            let limit = q.limit.clamp(1, 1000);
            let mut st = c.prepare_cached(&format!(
                "SELECT {JOB_COLS} FROM jobs WHERE (?1 IS NULL OR principal = ?1) \
                 AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR seq < ?3) AND parent IS NULL \
                 ORDER BY seq DESC LIMIT ?4"
            ))?;
            let jobs: Vec<JobRecord> = st
                .query_map(
                    params![q.principal, q.state.map(JobState::name), q.cursor, limit + 1],
                    job_row,
                )?
                .collect::<rusqlite::Result<_>>()?;
            let more = jobs.len() > limit as usize;
            let jobs: Vec<JobRecord> = jobs.into_iter().take(limit as usize).collect();
            let next_cursor = if more { jobs.last().map(|j| j.seq) } else { None };
            Ok(JobPage { jobs, next_cursor })
        })
    }

    fn cancel(&self, id: &str) -> BoxFuture<'_, StoreResult<Option<JobRecord>>> {
        let id = id.to_string();
        self.write(move |c| {
            let root = shards::cancel(c, &id, now_ms())?;
            get_job(c, &root, true)
        })
    }

    fn head(&self, gpu: bool, max_workers_per_token: u32) -> BoxFuture<'_, StoreResult<Option<QueueHead>>> {
        self.point_read(move |c| {
            let Some(seq) = fair_head(c, gpu, max_workers_per_token)? else {
                return Ok(None);
            };
            let (batch_key, created_ms): (String, i64) = c
                .prepare_cached("SELECT batch_key, created_ms FROM jobs WHERE seq = ?1")?
                .query_row([seq], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let same_key: i64 = c
                .prepare_cached("SELECT count(*) FROM jobs WHERE state = 'queued' AND batch_key = ?1")?
                .query_row([&batch_key], |r| r.get(0))?;
            Ok(Some(QueueHead {
                batch_key,
                created_ms,
                same_key: same_key as u64,
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
        self.write(move |c| {
            let now = now_ms();
            claim::claim_jobs(
                c,
                &owner,
                now,
                now + lease.as_millis() as i64,
                gpu,
                key.as_deref(),
                max,
            )
        })
    }

    /// The fair head and its claim in one write: no read between ([`claim::claim_head`]).
    fn claim_head(
        &self,
        owner: &str,
        gpu: bool,
        max_workers_per_token: u32,
        limit: ClaimLimit,
        lease: Duration,
    ) -> BoxFuture<'_, StoreResult<Vec<ClaimedJob>>> {
        let owner = owner.to_string();
        self.write(move |c| {
            let now = now_ms();
            let until = now + lease.as_millis() as i64;
            claim::claim_head(c, &owner, gpu, max_workers_per_token, limit, now, until)
        })
    }

    fn expire_queued(&self) -> BoxFuture<'_, StoreResult<Vec<ExpiredJob>>> {
        self.write(|c| {
            let now = now_ms();
            let mut st = c.prepare_cached(
                "UPDATE jobs SET state = 'failed', finished_ms = ?1, error_code = ?2, error_message = ?3 \
                 WHERE state = 'queued' AND queue_until_ms IS NOT NULL AND queue_until_ms <= ?1 \
                 RETURNING id, kind, principal, created_ms",
            )?;
            let gone = st
                .query_map(params![now, EXPIRED.0, EXPIRED.1], |r| {
                    Ok(ExpiredJob {
                        id: r.get(0)?,
                        kind: r.get(1)?,
                        principal: r.get(2)?,
                        created_ms: r.get(3)?,
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            Ok(gone)
        })
    }

    fn renew(&self, owner: &str, ids: &[String], lease: Duration) -> BoxFuture<'_, StoreResult<()>> {
        let owner = owner.to_string();
        let ids = ids.to_vec();
        self.write(move |c| {
            let until = now_ms() + lease.as_millis() as i64;
            for id in &ids {
                exec(
                    c,
                    "UPDATE jobs SET lease_until_ms = ?3 WHERE id = ?1 AND lease_owner = ?2 AND state = 'running'",
                    params![id, owner, until],
                )?;
            }
            Ok(())
        })
    }

    fn finish(&self, id: &str, owner: &str, outcome: Outcome) -> BoxFuture<'_, StoreResult<bool>> {
        let id = id.to_string();
        let owner = owner.to_string();
        self.write(move |c| finish_one(c, &id, &owner, &outcome, now_ms()))
    }

    /// One write op: the group commit's savepoint around it rolls back every end of the
    /// batch if one statement fails, and the batch shares the group's one commit.
    fn finish_many(&self, owner: &str, ends: Vec<JobEnd>) -> BoxFuture<'_, StoreResult<Vec<bool>>> {
        let owner = owner.to_string();
        self.write(move |c| finish_all(c, &owner, &ends, now_ms()))
    }

    /// One write op: the ends, then the next claim in a savepoint of its own, so a claim
    /// that fails rolls back alone and the ends still commit.
    fn finish_and_claim(
        &self,
        owner: &str,
        ends: Vec<JobEnd>,
        next: NextClaim,
    ) -> BoxFuture<'_, StoreResult<(Vec<bool>, Vec<ClaimedJob>)>> {
        let owner = owner.to_string();
        self.write(move |c| {
            let now = now_ms();
            let stored = finish_all(c, &owner, &ends, now)?;
            exec(c, "SAVEPOINT next", [])?;
            let claimed = match claim::claim_next(c, &owner, &next, now) {
                Ok(jobs) => jobs,
                Err(e) => {
                    tracing::warn!("claiming after storing {} ends: {e}", stored.len());
                    exec(c, "ROLLBACK TO next", [])?;
                    Vec::new()
                }
            };
            exec(c, "RELEASE next", [])?;
            Ok((stored, claimed))
        })
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
        self.write(move |c| {
            let now = now_ms();
            let n = exec(
                    c,
                "UPDATE jobs SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END, \
                 finished_ms = CASE WHEN attempts >= max_attempts THEN ?5 ELSE NULL END, \
                 lease_owner = NULL, lease_until_ms = NULL, error_code = ?3, error_message = ?4 \
                 WHERE id = ?1 AND state = 'running' AND lease_owner = ?2",
                params![id, owner, code, message, now],
            )?;
            if n == 0 {
                return Ok(None);
            }
            let job = get_job(c, &id, false)?;
            if let Some(JobRecord {
                state: JobState::Failed,
                parent: Some(parent),
                ..
            }) = &job
            {
                shards::after_end(c, &id, parent, now)?;
            }
            Ok(job.map(|j| j.state))
        })
    }

    fn requeue_orphans(&self, live_prefix: &str) -> BoxFuture<'_, StoreResult<Orphans>> {
        let prefix = format!("{live_prefix}%");
        self.write(move |c| orphans::requeue_orphans(c, &prefix, now_ms()))
    }

    fn counts(&self) -> BoxFuture<'_, StoreResult<StateCounts>> {
        self.read(|c| {
            let mut st = c.prepare_cached("SELECT state, count(*) FROM jobs GROUP BY state")?;
            let rows: Vec<(String, i64)> = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            let by_state = JobState::ALL
                .into_iter()
                .map(|s| {
                    let n = rows.iter().find(|(n, _)| n == s.name()).map_or(0, |(_, n)| *n);
                    (s, n as u64)
                })
                .collect();
            let mut st = c.prepare_cached(
                "SELECT principal, count(*) FROM jobs WHERE state IN ('queued', 'running') AND parent IS NULL \
                 GROUP BY principal",
            )?;
            let in_flight_by_principal = st
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)))?
                .collect::<rusqlite::Result<_>>()?;
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
        self.write(move |c| {
            let cutoff = now_ms() - ttl.as_millis() as i64;
            let mut st = c.prepare_cached(
                "SELECT id FROM jobs WHERE state IN ('succeeded', 'failed', 'cancelled') \
                 AND finished_ms < ?1 AND parent IS NULL LIMIT 10000",
            )?;
            let old: Vec<String> = st.query_map([cutoff], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
            let mut paths = delete_jobs(c, &old)?;
            let cap = max_result_bytes_per_token.min(i64::MAX as u64) as i64;
            let mut st = c.prepare_cached(
                "SELECT p, sum(n) FROM (SELECT j.principal AS p, r.bytes AS n FROM results r \
                   JOIN jobs j ON j.id = r.job_id \
                   UNION ALL SELECT principal, size FROM blobs WHERE job_id IS NOT NULL) \
                 GROUP BY p HAVING sum(n) > ?1",
            )?;
            let over: Vec<(String, i64)> = st
                .query_map([cap], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            for (principal, total) in over {
                let mut excess = total - cap;
                let mut st = c.prepare_cached(
                    "SELECT j.id, coalesce(r.bytes, 0) + coalesce((SELECT sum(size) FROM blobs b WHERE b.job_id = j.id), 0) \
                       + CASE WHEN j.shards IS NULL THEN 0 ELSE coalesce((SELECT sum(sr.bytes) FROM jobs s \
                           JOIN results sr ON sr.job_id = s.id WHERE s.parent = j.id), 0) \
                         + coalesce((SELECT sum(b.size) FROM jobs s JOIN blobs b ON b.job_id = s.id \
                           WHERE s.parent = j.id), 0) END \
                     FROM jobs j LEFT JOIN results r ON r.job_id = j.id \
                     WHERE j.principal = ?1 AND j.state IN ('succeeded', 'failed', 'cancelled') \
                       AND j.parent IS NULL \
                     ORDER BY j.finished_ms LIMIT 10000",
                )?;
                let rows: Vec<(String, i64)> = st
                    .query_map([&principal], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<_>>()?;
                let mut ids = Vec::new();
                for (id, bytes) in rows {
                    if excess <= 0 {
                        break;
                    }
                    excess -= bytes;
                    ids.push(id);
                }
                paths.extend(delete_jobs(c, &ids)?);
            }
            Ok(paths)
        })
    }

    fn expire_blobs(&self, ttl: Duration) -> BoxFuture<'_, StoreResult<Vec<PathBuf>>> {
        self.write(move |c| {
            let cutoff = now_ms() - ttl.as_millis() as i64;
            let mut st = c.prepare_cached(
                "DELETE FROM blobs WHERE id IN (SELECT id FROM blobs WHERE job_id IS NULL \
                 AND created_ms < ?1 LIMIT 10000) RETURNING path",
            )?;
            let paths: Vec<String> = st
                .query_map([cutoff], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            Ok(paths.into_iter().map(PathBuf::from).collect())
        })
    }

    fn put_blob(&self, blob: BlobRecord) -> BoxFuture<'_, StoreResult<()>> {
        self.write(move |c| insert_blob(c, &blob))
    }

    fn put_upload(
        &self,
        blob: BlobRecord,
        max_bytes_per_token: u64,
    ) -> BoxFuture<'_, StoreResult<Result<(), u64>>> {
        // One writer serializes uploads: the sum and the insert see the same blobs.
        self.write(move |c| {
            let used = uploaded(c, &blob.principal)?;
            if used.saturating_add(blob.size) > max_bytes_per_token {
                return Ok(Err(used));
            }
            insert_blob(c, &blob)?;
            Ok(Ok(()))
        })
    }

    fn uploaded_bytes(&self, principal: &str) -> BoxFuture<'_, StoreResult<u64>> {
        let principal = principal.to_string();
        self.read(move |c| uploaded(c, &principal))
    }

    fn delete_blob(&self, id: &str, principal: &str) -> BoxFuture<'_, StoreResult<Option<BlobRecord>>> {
        let (id, principal) = (id.to_string(), principal.to_string());
        self.write(move |c| {
            c.query_row(
                "DELETE FROM blobs WHERE id = ?1 AND principal = ?2 \
                 RETURNING id, path, size, sha256, format, principal, job_id, created_ms",
                [id, principal],
                blob_row,
            )
            .optional()
        })
    }

    fn get_blob(&self, id: &str) -> BoxFuture<'_, StoreResult<Option<BlobRecord>>> {
        let id = id.to_string();
        self.read(move |c| {
            c.query_row(
                "SELECT id, path, size, sha256, format, principal, job_id, created_ms FROM blobs WHERE id = ?1",
                [id],
                blob_row,
            )
            .optional()
        })
    }

    fn ping(&self) -> BoxFuture<'_, StoreResult<()>> {
        self.read(|c| c.query_row("SELECT 1", [], |_| Ok(())))
    }

    fn release_node(&self, node: &str) -> BoxFuture<'_, StoreResult<u64>> {
        let node = format!("{node}/");
        self.write(move |c| {
            let n = exec(
                c,
                "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_until_ms = NULL, \
                 attempts = max(attempts - 1, 0) \
                 WHERE state = 'running' AND substr(lease_owner, 1, length(?1)) = ?1",
                params![node],
            )?;
            Ok(n as u64)
        })
    }

    fn node_heartbeat(&self, node: &NodeInfo, lease: Duration) -> BoxFuture<'_, StoreResult<()>> {
        let now = now_ms();
        if let Ok(mut g) = self.node.lock() {
            *g = Some(NodeRecord {
                id: node.id.clone(),
                hostname: node.hostname.clone(),
                devices: node.devices.clone(),
                started_ms: node.started_ms,
                last_heartbeat_ms: now,
                alive: true,
                version: node.version.clone(),
            });
        }
        let owner = format!("{}/", node.id);
        self.write(move |c| {
            exec(
                c,
                "UPDATE jobs SET lease_until_ms = ?2 WHERE state = 'running' \
                 AND substr(lease_owner, 1, length(?1)) = ?1",
                params![owner, now + lease.as_millis() as i64],
            )?;
            Ok(())
        })
    }

    fn nodes(&self) -> BoxFuture<'_, StoreResult<Vec<NodeRecord>>> {
        let n = self.node.lock().ok().and_then(|g| g.clone());
        Box::pin(async move { Ok(n.into_iter().collect()) })
    }

    fn node_gone(&self, node: &str) -> BoxFuture<'_, StoreResult<()>> {
        if let Ok(mut g) = self.node.lock() {
            if g.as_ref().is_some_and(|n| n.id == node) {
                *g = None;
            }
        }
        Box::pin(async { Ok(()) })
    }

    fn close(&self) -> BoxFuture<'_, StoreResult<()>> {
        let tx = self.writer.lock().ok().and_then(|mut g| g.take());
        drop(tx);
        let th = self.thread.lock().ok().and_then(|mut g| g.take());
        Box::pin(async move {
            if let Some(th) = th {
                tokio::task::spawn_blocking(move || th.join())
                    .await
                    .map_err(err)?
                    .map_err(|_| StoreError::new("the writer thread panicked"))?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::StatementStatus;

    /// A store connection keeps one plan per statement: a claim's bound LIMIT changing
    /// between calls does not recompile it (SQLite does otherwise, since 3.47).
    #[test]
    fn a_changed_limit_binding_does_not_recompile_the_statement() {
        let d = tempfile::tempdir().unwrap();
        let c = open(&d.path().join("t.sqlite3"), false).unwrap();
        c.execute_batch("CREATE TABLE t(x INTEGER PRIMARY KEY); INSERT INTO t VALUES (1), (2), (3);")
            .unwrap();
        for limit in [1i64, 2, 3, 1, 2] {
            let mut st = c.prepare_cached("SELECT x FROM t ORDER BY x LIMIT ?1").unwrap();
            let n = st.query_map([limit], |r| r.get::<_, i64>(0)).unwrap().count();
            assert_eq!(n as i64, limit);
            assert_eq!(st.get_status(StatementStatus::RePrepare), 0, "limit {limit}");
        }
        // the same statement without the guarantee is recompiled: what the setting prevents
        c.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, false)
            .unwrap();
        let mut st = c.prepare("SELECT x FROM t ORDER BY x LIMIT ?1").unwrap();
        for limit in [1i64, 2] {
            st.query_map([limit], |r| r.get::<_, i64>(0))
                .unwrap()
                .for_each(drop);
        }
        assert!(st.get_status(StatementStatus::RePrepare) > 0);
    }
}
