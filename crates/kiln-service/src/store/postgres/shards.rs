//! The PostgreSQL store's side of sharded jobs (crate::shard): storing a parent with its
//! shards, what a shard's end does to its parent, and the cancel of a whole sharded job.
//!
//! Every change to a sharded job locks the parent's row first (`FOR UPDATE`), then its
//! shards' rows: a shard's end on one node and another's on a second node are serialized
//! on the parent, so under READ COMMITTED the later one sees the earlier one committed and
//! exactly one of them finds no shard left and merges; the cancel takes the same order, so
//! an end and a cancel do not deadlock.

use super::insert::existing;
use super::rows::Conn;
use super::store::pg_err;
use crate::shard::{merge, Merger, ParentTask, MAX_MERGED_BYTES};
use crate::store::*;

/// The code of a parent whose shards' results could not be merged.
const MERGE_FAILED: &str = "shard_merge_failed";

type Tx<'a> = deadpool_postgres::Transaction<'a>;

/// [`JobStore::insert_sharded`]: the parent `running` with its shard count (or the earlier
/// job of its idempotency key, nothing stored), then its shards queued, one transaction
/// and one notification.
pub async fn insert_sharded(mut c: Conn, parent: NewJob, shards: Vec<NewJob>) -> StoreResult<Inserted> {
    let tx = c.transaction().await.map_err(pg_err)?;
    let n = shards.len().min(i32::MAX as usize) as i32;
    let st = tx
        .prepare_cached(
            "INSERT INTO kiln_jobs(id, kind, batch_key, needs_gpu, principal, idem_key, request_hash, \
             task, elements, state, max_attempts, deadline_ms, created_ms, priority, queue_until_ms, \
             parent, shard_index, shards) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) \
             ON CONFLICT (principal, idem_key) WHERE idem_key IS NOT NULL DO NOTHING RETURNING seq",
        )
        .await
        .map_err(pg_err)?;
    // (job, state, idempotency key, parent, shard index, shard count)
    type Row<'a> = (
        &'a NewJob,
        &'static str,
        Option<&'a str>,
        Option<&'a str>,
        Option<i32>,
        Option<i32>,
    );
    let mut all: Vec<Row<'_>> = vec![(
        &parent,
        "running",
        parent.idempotency_key.as_deref(),
        None,
        None,
        Some(n),
    )];
    for (i, s) in shards.iter().enumerate() {
        all.push((s, "queued", None, Some(parent.id.as_str()), Some(i as i32), None));
    }
    let mut parent_seq = None;
    for (k, (j, state, idem, p, i, s)) in all.iter().enumerate() {
        let elements = j.elements.min(i64::MAX as u64) as i64;
        let max_attempts = j.max_attempts.min(i32::MAX as u32) as i32;
        let rows = tx
            .query(
                &st,
                &[
                    &j.id,
                    &j.kind,
                    &j.batch_key,
                    &j.needs_gpu,
                    &j.principal,
                    idem,
                    &j.request_hash,
                    &j.task,
                    &elements,
                    state,
                    &max_attempts,
                    &j.deadline_ms,
                    &j.created_ms,
                    &j.priority,
                    &j.queue_until_ms,
                    p,
                    i,
                    s,
                ],
            )
            .await
            .map_err(pg_err)?;
        if k == 0 {
            match rows.first() {
                Some(r) => parent_seq = Some(r.try_get::<_, i64>(0).map_err(pg_err)?),
                None => {
                    let t: &tokio_postgres::Transaction<'_> = &tx;
                    let earlier = existing(t, &parent).await?;
                    tx.rollback().await.map_err(pg_err)?;
                    return Ok(earlier);
                }
            }
        }
    }
    tx.execute("SELECT pg_notify('kiln_jobs', '')", &[])
        .await
        .map_err(pg_err)?;
    tx.commit().await.map_err(pg_err)?;
    let mut record = parent.queued_record(parent_seq.unwrap_or_default());
    record.state = JobState::Running;
    record.shards = Some(ShardCounts {
        total: shards.len() as u64,
        ..ShardCounts::default()
    });
    Ok(Inserted::Created(record))
}

/// Lock the parents of `ids` (those that are shards), in one order; returns them.
pub async fn lock_parents(tx: &Tx<'_>, ids: &[&str]) -> StoreResult<Vec<String>> {
    let st = tx
        .prepare_cached(
            "SELECT id FROM kiln_jobs WHERE id IN (SELECT parent FROM kiln_jobs WHERE id = ANY($1) \
             AND parent IS NOT NULL) ORDER BY id FOR UPDATE",
        )
        .await
        .map_err(pg_err)?;
    let rows = tx.query(&st, &[&ids]).await.map_err(pg_err)?;
    rows.iter().map(|r| r.try_get(0).map_err(pg_err)).collect()
}

/// After shard `id`'s end was stored (its parent locked by [`lock_parents`]): a failure
/// fails the parent (if still running) with the shard's error and cancels its unfinished
/// siblings; the last success merges the shards into the parent's result.
pub async fn after_end(tx: &Tx<'_>, id: &str, now: i64) -> StoreResult<()> {
    let Some(r) = tx
        .query_opt(
            "SELECT parent, state, error_code, error_message FROM kiln_jobs WHERE id = $1",
            &[&id],
        )
        .await
        .map_err(pg_err)?
    else {
        return Ok(());
    };
    let Some(parent) = r.try_get::<_, Option<String>>(0).map_err(pg_err)? else {
        return Ok(());
    };
    let state: String = r.try_get(1).map_err(pg_err)?;
    match state.as_str() {
        "failed" => {
            let code: Option<String> = r.try_get(2).map_err(pg_err)?;
            let msg: Option<String> = r.try_get(3).map_err(pg_err)?;
            fail_parent(
                tx,
                &parent,
                id,
                code.as_deref().unwrap_or("failed"),
                &format!("shard {id}: {}", msg.unwrap_or_default()),
                now,
            )
            .await
        }
        "succeeded" => {
            let left: i64 = tx
                .query_one(
                    "SELECT count(*) FROM kiln_jobs WHERE parent = $1 AND state <> 'succeeded'",
                    &[&parent],
                )
                .await
                .map_err(pg_err)?
                .get(0);
            if left == 0 {
                merge_parent(tx, &parent, id, now).await?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

async fn fail_parent(
    tx: &Tx<'_>,
    parent: &str,
    by: &str,
    code: &str,
    msg: &str,
    now: i64,
) -> StoreResult<()> {
    let n = tx
        .execute(
            "UPDATE kiln_jobs SET state = 'failed', finished_ms = $2, error_code = $3, error_message = $4, \
             closed_by = $5 WHERE id = $1 AND state = 'running'",
            &[&parent, &now, &code, &msg, &by],
        )
        .await
        .map_err(pg_err)?;
    if n > 0 {
        cancel_shards(tx, parent, now).await?;
        notify_done(tx, parent).await?;
    }
    Ok(())
}

/// Close the running parent with its shards' results (crate::shard::result): merged into
/// its result (the shards' own dropped) when they take at most the parent's
/// `merge_max_bytes`, else a manifest over them, read one shard's result at a time; a
/// shard's result that does not fit fails the parent.
async fn merge_parent(tx: &Tx<'_>, parent: &str, by: &str, now: i64) -> StoreResult<()> {
    let Some(task) = tx
        .query_opt(
            "SELECT task FROM kiln_jobs WHERE id = $1 AND state = 'running'",
            &[&parent],
        )
        .await
        .map_err(pg_err)?
    else {
        return Ok(());
    };
    let task: String = task.try_get(0).map_err(pg_err)?;
    let task = match serde_json::from_str::<ParentTask>(&task) {
        Ok(t) => t,
        Err(e) => {
            let e = format!("the parent's task: {e}");
            return fail_parent(tx, parent, by, MERGE_FAILED, &e, now).await;
        }
    };
    let bytes: i64 = tx
        .query_one(
            "SELECT coalesce(sum(r.bytes), 0)::bigint FROM kiln_jobs j JOIN kiln_results r \
             ON r.job_id = j.id WHERE j.parent = $1",
            &[&parent],
        )
        .await
        .map_err(pg_err)?
        .try_get(0)
        .map_err(pg_err)?;
    let manifest = bytes.max(0) as u64 > task.merge_max_bytes.min(MAX_MERGED_BYTES as u64);
    let stored = if manifest {
        let one = tx
            .prepare_cached(
                "SELECT r.body FROM kiln_jobs j JOIN kiln_results r ON r.job_id = j.id \
                 WHERE j.parent = $1 AND j.shard_index = $2",
            )
            .await
            .map_err(pg_err)?;
        let mut m = Merger::new(&task);
        let mut checked = Ok(());
        for i in 0..task.shards.min(i32::MAX as u64) as i32 {
            let Some(row) = tx.query_opt(&one, &[&parent, &i]).await.map_err(pg_err)? else {
                checked = Err(format!("shard {i} holds no result"));
                break;
            };
            let body: String = row.try_get(0).map_err(pg_err)?;
            if let Err(e) = m.push(&body) {
                checked = Err(e);
                break;
            }
        }
        checked
            .and_then(|()| m.head())
            .map(|h| (h, Some(task.shards.min(i32::MAX as u64) as i32)))
    } else {
        let rows = tx
            .query(
                "SELECT r.body FROM kiln_jobs j JOIN kiln_results r ON r.job_id = j.id \
                 WHERE j.parent = $1 ORDER BY j.shard_index",
                &[&parent],
            )
            .await
            .map_err(pg_err)?;
        let bodies: Vec<String> = rows
            .iter()
            .map(|r| r.try_get(0).map_err(pg_err))
            .collect::<StoreResult<_>>()?;
        merge(&task, &bodies).map(|b| (b, None))
    };
    let (body, shards) = match stored {
        Ok(b) => b,
        Err(e) => return fail_parent(tx, parent, by, MERGE_FAILED, &e, now).await,
    };
    tx.execute(
        "INSERT INTO kiln_results(job_id, body, bytes, stored_ms, shards) VALUES ($1, $2, $3, $4, $5)",
        &[&parent, &body, &(body.len() as i64), &now, &shards],
    )
    .await
    .map_err(pg_err)?;
    tx.execute(
        "UPDATE kiln_jobs SET state = 'succeeded', finished_ms = $2, closed_by = $3 WHERE id = $1",
        &[&parent, &now, &by],
    )
    .await
    .map_err(pg_err)?;
    if shards.is_none() {
        tx.execute(
            "DELETE FROM kiln_results WHERE job_id IN (SELECT id FROM kiln_jobs WHERE parent = $1)",
            &[&parent],
        )
        .await
        .map_err(pg_err)?;
    }
    notify_done(tx, parent).await
}

async fn notify_done(tx: &Tx<'_>, id: &str) -> StoreResult<()> {
    tx.execute("SELECT pg_notify('kiln_done', $1)", &[&id])
        .await
        .map_err(pg_err)?;
    Ok(())
}

async fn cancel_shards(tx: &Tx<'_>, parent: &str, now: i64) -> StoreResult<u64> {
    tx.execute(
        "UPDATE kiln_jobs SET state = 'cancelled', finished_ms = $2, lease_owner = NULL \
         WHERE parent = $1 AND state IN ('queued', 'running')",
        &[&parent, &now],
    )
    .await
    .map_err(pg_err)
}

/// [`JobStore::cancel`]: job `id`, or for a sharded job (its parent or a shard) the parent
/// and its unfinished shards, the parent locked first. Returns the id of the job
/// cancelled: the parent's for a shard.
pub async fn cancel(mut c: Conn, id: &str) -> StoreResult<(Conn, String)> {
    let tx = c.transaction().await.map_err(pg_err)?;
    let parent: Option<String> = tx
        .query_opt("SELECT parent FROM kiln_jobs WHERE id = $1", &[&id])
        .await
        .map_err(pg_err)?
        .and_then(|r| r.get(0));
    let root = parent.unwrap_or_else(|| id.to_string());
    let now = now_ms();
    let n = tx
        .execute(
            "UPDATE kiln_jobs SET state = 'cancelled', finished_ms = $2, lease_owner = NULL \
             WHERE id = $1 AND state IN ('queued', 'running')",
            &[&root, &now],
        )
        .await
        .map_err(pg_err)?;
    if n > 0 {
        cancel_shards(&tx, &root, now).await?;
        notify_done(&tx, &root).await?;
    }
    tx.commit().await.map_err(pg_err)?;
    Ok((c, root))
}
