//! Row mapping and the statements several store calls share.

use super::store::pg_err;
use crate::store::*;
use tokio_postgres::Row;

pub const JOB_COLS: &str = "j.seq, j.id, j.kind, j.state, j.principal, j.attempts, j.max_attempts, \
     j.created_ms, j.started_ms, j.finished_ms, j.deadline_ms, j.error_code, j.error_message, \
     j.priority, j.queue_until_ms, j.parent, j.closed_by, j.shards";

/// The first column after [`JOB_COLS`].
pub const AFTER_JOB_COLS: usize = 18;

pub fn job_row(r: &Row) -> StoreResult<JobRecord> {
    let state: String = r.try_get(3).map_err(pg_err)?;
    let code: Option<String> = r.try_get(11).map_err(pg_err)?;
    let msg: Option<String> = r.try_get(12).map_err(pg_err)?;
    let attempts: i32 = r.try_get(5).map_err(pg_err)?;
    let max_attempts: i32 = r.try_get(6).map_err(pg_err)?;
    Ok(JobRecord {
        seq: r.try_get(0).map_err(pg_err)?,
        id: r.try_get(1).map_err(pg_err)?,
        kind: r.try_get(2).map_err(pg_err)?,
        state: JobState::parse(&state).unwrap_or(JobState::Failed),
        principal: r.try_get(4).map_err(pg_err)?,
        attempts: attempts.max(0) as u32,
        max_attempts: max_attempts.max(0) as u32,
        created_ms: r.try_get(7).map_err(pg_err)?,
        started_ms: r.try_get(8).map_err(pg_err)?,
        finished_ms: r.try_get(9).map_err(pg_err)?,
        deadline_ms: r.try_get(10).map_err(pg_err)?,
        priority: r.try_get(13).map_err(pg_err)?,
        queue_until_ms: r.try_get(14).map_err(pg_err)?,
        result: None,
        result_shards: None,
        error: code.map(|c| (c, msg.unwrap_or_default())),
        parent: r.try_get(15).map_err(pg_err)?,
        closed_by: r.try_get(16).map_err(pg_err)?,
        // the counts are read by get_job; a listing only says it is a parent
        shards: r
            .try_get::<_, Option<i32>>(17)
            .map_err(pg_err)?
            .map(|n| ShardCounts {
                total: n.max(0) as u64,
                ..ShardCounts::default()
            }),
    })
}

pub fn blob_row(r: &Row) -> StoreResult<BlobRecord> {
    let path: String = r.try_get(1).map_err(pg_err)?;
    let size: i64 = r.try_get(2).map_err(pg_err)?;
    Ok(BlobRecord {
        id: r.try_get(0).map_err(pg_err)?,
        path: PathBuf::from(path),
        size: size.max(0) as u64,
        sha256: r.try_get(3).map_err(pg_err)?,
        format: r.try_get(4).map_err(pg_err)?,
        principal: r.try_get(5).map_err(pg_err)?,
        job_id: r.try_get(6).map_err(pg_err)?,
        created_ms: r.try_get(7).map_err(pg_err)?,
    })
}

pub type Conn = deadpool_postgres::Object;

pub async fn get_job(
    c: &deadpool_postgres::ClientWrapper,
    id: &str,
    with_result: bool,
) -> StoreResult<Option<JobRecord>> {
    let sql = if with_result {
        format!(
            "SELECT {JOB_COLS}, r.body, r.shards FROM kiln_jobs j \
             LEFT JOIN kiln_results r ON r.job_id = j.id WHERE j.id = $1"
        )
    } else {
        format!("SELECT {JOB_COLS}, NULL::text, NULL::integer FROM kiln_jobs j WHERE j.id = $1")
    };
    let st = c.prepare_cached(&sql).await.map_err(pg_err)?;
    let Some(row) = c.query_opt(&st, &[&id]).await.map_err(pg_err)? else {
        return Ok(None);
    };
    let mut j = job_row(&row)?;
    j.result = row.try_get(AFTER_JOB_COLS).map_err(pg_err)?;
    j.result_shards = row
        .try_get::<_, Option<i32>>(AFTER_JOB_COLS + 1)
        .map_err(pg_err)?
        .map(|n| n.max(0) as u64);
    if let (Some(counts), true) = (j.shards.as_mut(), with_result) {
        let st = c
            .prepare_cached("SELECT state, count(*) FROM kiln_jobs WHERE parent = $1 GROUP BY state")
            .await
            .map_err(pg_err)?;
        for row in c.query(&st, &[&id]).await.map_err(pg_err)? {
            let n = row.try_get::<_, i64>(1).map_err(pg_err)?.max(0) as u64;
            match row.try_get::<_, &str>(0).map_err(pg_err)? {
                "succeeded" => counts.done = n,
                "failed" => counts.failed = n,
                "cancelled" => counts.cancelled = n,
                _ => {}
            }
        }
    }
    Ok(Some(j))
}

pub async fn insert_blob<C: tokio_postgres::GenericClient>(c: &C, b: &BlobRecord) -> StoreResult<()> {
    let st = c
        .prepare(
            "INSERT INTO kiln_blobs(id, path, size, sha256, format, principal, job_id, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO UPDATE SET \
             path = EXCLUDED.path, size = EXCLUDED.size, sha256 = EXCLUDED.sha256, \
             format = EXCLUDED.format, principal = EXCLUDED.principal, job_id = EXCLUDED.job_id, \
             created_ms = EXCLUDED.created_ms",
        )
        .await
        .map_err(pg_err)?;
    let path = b.path.to_string_lossy().into_owned();
    c.execute(
        &st,
        &[
            &b.id,
            &path,
            &(b.size.min(i64::MAX as u64) as i64),
            &b.sha256,
            &b.format,
            &b.principal,
            &b.job_id,
            &b.created_ms,
        ],
    )
    .await
    .map_err(pg_err)?;
    Ok(())
}

/// Delete jobs, their results and result blobs' rows, a sharded job with its shards;
/// returns the blob paths.
pub async fn delete_jobs(
    tx: &deadpool_postgres::Transaction<'_>,
    ids: &[String],
) -> StoreResult<Vec<PathBuf>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut all: Vec<String> = tx
        .query("SELECT id FROM kiln_jobs WHERE parent = ANY($1)", &[&ids])
        .await
        .map_err(pg_err)?
        .iter()
        .map(|r| r.try_get(0).map_err(pg_err))
        .collect::<StoreResult<_>>()?;
    all.extend_from_slice(ids);
    let ids = &all;
    let rows = tx
        .query(
            "DELETE FROM kiln_blobs WHERE job_id = ANY($1) RETURNING path",
            &[&ids],
        )
        .await
        .map_err(pg_err)?;
    tx.execute("DELETE FROM kiln_results WHERE job_id = ANY($1)", &[&ids])
        .await
        .map_err(pg_err)?;
    tx.execute("DELETE FROM kiln_jobs WHERE id = ANY($1)", &[&ids])
        .await
        .map_err(pg_err)?;
    rows.iter()
        .map(|r| r.try_get::<_, String>(0).map(PathBuf::from).map_err(pg_err))
        .collect()
}

pub fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// The advisory-lock class of per-principal upload quotas (the second key is the principal's
/// `hashtext`); two-key advisory locks do not overlap the one-key migration lock.
const QUOTA_LOCK: i32 = 0x6b71_7461;

/// Bytes of uploaded blobs (no job) of `principal`.
pub async fn uploaded<C: tokio_postgres::GenericClient>(c: &C, principal: &str) -> StoreResult<u64> {
    let n: i64 = c
        .query_one(
            "SELECT coalesce(sum(size), 0)::bigint FROM kiln_blobs WHERE principal = $1 AND job_id IS NULL",
            &[&principal],
        )
        .await
        .map_err(pg_err)?
        .get(0);
    Ok(n.max(0) as u64)
}

/// [`crate::store::JobStore::put_upload`]: under the principal's advisory lock, so that
/// concurrent uploads of one principal (on any node) see each other.
pub async fn put_upload(c: &mut Conn, blob: &BlobRecord, max: u64) -> StoreResult<Result<(), u64>> {
    let tx = c.transaction().await.map_err(pg_err)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&QUOTA_LOCK, &blob.principal],
    )
    .await
    .map_err(pg_err)?;
    let used = uploaded(&*tx, &blob.principal).await?;
    if used.saturating_add(blob.size) > max {
        return Ok(Err(used));
    }
    insert_blob(&*tx, blob).await?;
    tx.commit().await.map_err(pg_err)?;
    Ok(Ok(()))
}

/// Principals whose results and result blobs take more than `cap` bytes, with their totals.
pub async fn over_result_cap(
    tx: &deadpool_postgres::Transaction<'_>,
    cap: i64,
) -> StoreResult<Vec<(String, i64)>> {
    let rows = tx
        .query(
            "SELECT p, sum(n)::bigint FROM (SELECT j.principal AS p, r.bytes AS n FROM kiln_results r \
               JOIN kiln_jobs j ON j.id = r.job_id \
               UNION ALL SELECT principal, size FROM kiln_blobs WHERE job_id IS NOT NULL) u \
             GROUP BY p HAVING sum(n) > $1::bigint",
            &[&cap],
        )
        .await
        .map_err(pg_err)?;
    rows.iter()
        .map(|r| Ok((r.try_get(0).map_err(pg_err)?, r.try_get(1).map_err(pg_err)?)))
        .collect()
}
