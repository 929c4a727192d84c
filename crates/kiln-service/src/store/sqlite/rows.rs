//! Rows to records and back: the job and blob columns the SQLite store reads and writes,
//! and the few statements several of its methods share.

use super::super::*;
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::path::PathBuf;

pub(super) const JOB_COLS: &str = "seq, id, kind, state, principal, attempts, max_attempts, created_ms, \
     started_ms, finished_ms, deadline_ms, error_code, error_message, priority, queue_until_ms, \
     parent, closed_by, shards";

pub(super) fn job_row(r: &Row<'_>) -> rusqlite::Result<JobRecord> {
    let state: String = r.get(3)?;
    let code: Option<String> = r.get(11)?;
    let msg: Option<String> = r.get(12)?;
    Ok(JobRecord {
        seq: r.get(0)?,
        id: r.get(1)?,
        kind: r.get(2)?,
        state: JobState::parse(&state).unwrap_or(JobState::Failed),
        principal: r.get(4)?,
        attempts: r.get(5)?,
        max_attempts: r.get(6)?,
        created_ms: r.get(7)?,
        started_ms: r.get(8)?,
        finished_ms: r.get(9)?,
        deadline_ms: r.get(10)?,
        priority: r.get(13)?,
        queue_until_ms: r.get(14)?,
        result: None,
        result_shards: None,
        error: code.map(|c| (c, msg.unwrap_or_default())),
        parent: r.get(15)?,
        closed_by: r.get(16)?,
        // the counts are read by get_job; a listing only says it is a parent
        shards: r.get::<_, Option<i64>>(17)?.map(|n| ShardCounts {
            total: n.max(0) as u64,
            ..ShardCounts::default()
        }),
    })
}

pub(super) fn get_job(c: &Connection, id: &str, with_result: bool) -> rusqlite::Result<Option<JobRecord>> {
    // cached statements: a job is read once or more per request (`?wait=`, GET), and
    // parsing the SQL each time showed in the server's profile
    let mut job = c
        .prepare_cached(&format!("SELECT {JOB_COLS} FROM jobs WHERE id = ?1"))?
        .query_row([id], job_row)
        .optional()?;
    if let (Some(j), true) = (job.as_mut(), with_result) {
        if let Some((body, shards)) = c
            .prepare_cached("SELECT body, shards FROM results WHERE job_id = ?1")?
            .query_row([id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?))
            })
            .optional()?
        {
            j.result = Some(body);
            j.result_shards = shards.map(|n| n.max(0) as u64);
        }
        if let Some(counts) = j.shards.as_mut() {
            let mut st =
                c.prepare_cached("SELECT state, count(*) FROM jobs WHERE parent = ?1 GROUP BY state")?;
            let rows = st.query_map([id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
            for row in rows {
                let (state, n) = row?;
                let n = n.max(0) as u64;
                match state.as_str() {
                    "succeeded" => counts.done = n,
                    "failed" => counts.failed = n,
                    "cancelled" => counts.cancelled = n,
                    _ => {}
                }
            }
        }
    }
    Ok(job)
}

pub(super) fn blob_row(r: &Row<'_>) -> rusqlite::Result<BlobRecord> {
    let path: String = r.get(1)?;
    Ok(BlobRecord {
        id: r.get(0)?,
        path: PathBuf::from(path),
        size: r.get::<_, i64>(2)? as u64,
        sha256: r.get(3)?,
        format: r.get(4)?,
        principal: r.get(5)?,
        job_id: r.get(6)?,
        created_ms: r.get(7)?,
    })
}

pub(super) fn insert_blob(c: &Connection, b: &BlobRecord) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT OR REPLACE INTO blobs(id, path, size, sha256, format, principal, job_id, created_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        b.id,
        b.path.to_string_lossy(),
        b.size as i64,
        b.sha256,
        b.format,
        b.principal,
        b.job_id,
        b.created_ms
    ])?;
    Ok(())
}

/// Delete jobs (rows, results, result blobs' rows), a sharded job with its shards;
/// returns the blob paths.
pub(super) fn delete_jobs(c: &Connection, ids: &[String]) -> rusqlite::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    let mut all = Vec::with_capacity(ids.len());
    for id in ids {
        let mut st = c.prepare_cached("SELECT id FROM jobs WHERE parent = ?1")?;
        let shards: Vec<String> = st
            .query_map([id], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        all.extend(shards);
        all.push(id.clone());
    }
    for id in &all {
        let mut st = c.prepare_cached("SELECT path FROM blobs WHERE job_id = ?1")?;
        let ps: Vec<String> = st
            .query_map([id], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        paths.extend(ps.into_iter().map(PathBuf::from));
        c.execute("DELETE FROM blobs WHERE job_id = ?1", [id])?;
        c.execute("DELETE FROM results WHERE job_id = ?1", [id])?;
        c.execute("DELETE FROM jobs WHERE id = ?1", [id])?;
    }
    Ok(paths)
}

/// A claimed job from the columns `id, kind, principal, task, attempts, max_attempts,
/// created_ms, deadline_ms, queue_until_ms, parent` (in that order) of a claim's `RETURNING`.
pub(super) fn claimed_job(r: &Row<'_>) -> rusqlite::Result<ClaimedJob> {
    Ok(ClaimedJob {
        id: r.get(0)?,
        kind: r.get(1)?,
        principal: r.get(2)?,
        task: r.get(3)?,
        attempt: r.get(4)?,
        max_attempts: r.get(5)?,
        created_ms: r.get(6)?,
        deadline_ms: r.get(7)?,
        queue_until_ms: r.get(8)?,
        parent: r.get(9)?,
    })
}

/// Insert one new job (the statement prepared once per connection), or return the earlier
/// job of its principal and idempotency key. A created job's record is made from what was
/// inserted, not read back.
pub(super) fn insert_job(c: &Connection, job: &NewJob) -> rusqlite::Result<Inserted> {
    insert_job_as(c, job, Sharded::No)
}

/// A job's place in a sharded job (crate::shard), as [`insert_job_as`] stores it.
#[derive(Clone, Copy)]
pub(super) enum Sharded<'a> {
    /// An ordinary job.
    No,
    /// A parent of this many shards: stored `running`, no lease.
    Parent(u64),
    /// Shard `index` of `parent`: its idempotency key is not looked at.
    Shard {
        /// The parent's id.
        parent: &'a str,
        /// Its place in row order.
        index: u64,
    },
}

/// [`insert_job`] for a parent or a shard.
pub(super) fn insert_job_as(
    c: &Connection,
    job: &NewJob,
    sharded: Sharded<'_>,
) -> rusqlite::Result<Inserted> {
    let (state, parent, index, shards) = match sharded {
        Sharded::No => ("queued", None, None, None),
        Sharded::Parent(n) => ("running", None, None, Some(n as i64)),
        Sharded::Shard { parent, index } => ("queued", Some(parent), Some(index as i64), None),
    };
    if let (Some(key), None) = (&job.idempotency_key, parent) {
        let earlier: Option<(String, String)> = c
            .prepare_cached("SELECT id, request_hash FROM jobs WHERE principal = ?1 AND idem_key = ?2")?
            .query_row(params![job.principal, key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((id, hash)) = earlier {
            if let Some(j) = get_job(c, &id, true)? {
                return Ok(Inserted::Existing {
                    job: j,
                    same_request: hash == job.request_hash,
                });
            }
        }
    }
    let idem = if parent.is_some() {
        None
    } else {
        job.idempotency_key.as_deref()
    };
    c.prepare_cached(
        "INSERT INTO jobs(id, kind, batch_key, needs_gpu, principal, idem_key, request_hash, \
         task, elements, state, max_attempts, deadline_ms, created_ms, priority, queue_until_ms, \
         parent, shard_index, shards) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?15, ?10, ?11, ?12, ?13, ?14, ?16, ?17, ?18)",
    )?
    .execute(params![
        job.id,
        job.kind,
        job.batch_key,
        job.needs_gpu,
        job.principal,
        idem,
        job.request_hash,
        job.task,
        job.elements.min(i64::MAX as u64) as i64,
        job.max_attempts,
        job.deadline_ms,
        job.created_ms,
        job.priority,
        job.queue_until_ms,
        state,
        parent,
        index,
        shards
    ])?;
    let mut record = job.queued_record(c.last_insert_rowid());
    if let Sharded::Parent(n) = sharded {
        record.state = JobState::Running;
        record.shards = Some(ShardCounts {
            total: n,
            ..ShardCounts::default()
        });
    }
    record.parent = parent.map(str::to_string);
    Ok(Inserted::Created(record))
}
