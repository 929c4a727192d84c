//! The SQLite store's side of sharded jobs (crate::shard): what a shard's end does to its
//! parent, and the cancel of a whole sharded job. Everything runs inside the caller's write
//! op, so the end and its consequence for the parent commit together (one writer: no
//! other end can come between).

use super::exec;
use crate::shard::{merge, Merger, ParentTask, MAX_MERGED_BYTES};
use rusqlite::{params, Connection, OptionalExtension};

/// The code of a parent whose shards' results could not be merged.
pub(crate) const MERGE_FAILED: &str = "shard_merge_failed";

/// After shard `id` of `parent` ended in `state` (`succeeded` or `failed`, with its error):
/// a failure fails the parent (if still running) with the shard's error and cancels its
/// unfinished siblings; the last success merges the shards into the parent's result.
pub(super) fn after_end(c: &Connection, id: &str, parent: &str, now: i64) -> rusqlite::Result<()> {
    let (state, code, message): (String, Option<String>, Option<String>) = c
        .prepare_cached("SELECT state, error_code, error_message FROM jobs WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    match state.as_str() {
        "failed" => fail_parent(
            c,
            parent,
            id,
            code.as_deref().unwrap_or("failed"),
            &format!("shard {id}: {}", message.unwrap_or_default()),
            now,
        ),
        "succeeded" => {
            let left: i64 = c
                .prepare_cached("SELECT count(*) FROM jobs WHERE parent = ?1 AND state != 'succeeded'")?
                .query_row([parent], |r| r.get(0))?;
            if left == 0 {
                merge_parent(c, parent, id, now)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Fail a running parent with a shard's error; cancel its unfinished shards.
fn fail_parent(
    c: &Connection,
    parent: &str,
    by: &str,
    code: &str,
    message: &str,
    now: i64,
) -> rusqlite::Result<()> {
    let n = exec(
        c,
        "UPDATE jobs SET state = 'failed', finished_ms = ?2, error_code = ?3, error_message = ?4, \
         closed_by = ?5 WHERE id = ?1 AND state = 'running'",
        params![parent, now, code, message, by],
    )?;
    if n > 0 {
        cancel_shards(c, parent, now)?;
    }
    Ok(())
}

/// Close the running parent with its shards' results (crate::shard::result): merged into
/// its result (the shards' own dropped) when they take at most the parent's
/// `merge_max_bytes`, else a manifest over them; a shard's result that does not fit fails
/// the parent.
fn merge_parent(c: &Connection, parent: &str, by: &str, now: i64) -> rusqlite::Result<()> {
    let task: Option<String> = c
        .prepare_cached("SELECT task FROM jobs WHERE id = ?1 AND state = 'running'")?
        .query_row([parent], |r| r.get(0))
        .optional()?;
    let Some(task) = task else {
        return Ok(());
    };
    let task = match serde_json::from_str::<ParentTask>(&task) {
        Ok(t) => t,
        Err(e) => {
            return fail_parent(
                c,
                parent,
                by,
                MERGE_FAILED,
                &format!("the parent's task: {e}"),
                now,
            )
        }
    };
    let bytes: i64 = c
        .prepare_cached(
            "SELECT coalesce(sum(r.bytes), 0) FROM jobs j JOIN results r ON r.job_id = j.id \
             WHERE j.parent = ?1",
        )?
        .query_row([parent], |r| r.get(0))?;
    let bodies_sql = "SELECT r.body FROM jobs j JOIN results r ON r.job_id = j.id WHERE j.parent = ?1 \
                      ORDER BY j.shard_index";
    let manifest = bytes.max(0) as u64 > task.merge_max_bytes.min(MAX_MERGED_BYTES as u64);
    let stored = if manifest {
        // one shard's result in memory at a time
        let mut m = Merger::new(&task);
        let mut st = c.prepare_cached(bodies_sql)?;
        let mut rows = st.query([parent])?;
        let mut checked = Ok(());
        while let Some(row) = rows.next()? {
            let body: String = row.get(0)?;
            if let Err(e) = m.push(&body) {
                checked = Err(e);
                break;
            }
        }
        drop(rows);
        checked
            .and_then(|()| m.head())
            .map(|h| (h, Some(task.shards as i64)))
    } else {
        let bodies: Vec<String> = c
            .prepare_cached(bodies_sql)?
            .query_map([parent], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        merge(&task, &bodies).map(|b| (b, None))
    };
    let (body, shards) = match stored {
        Ok(b) => b,
        Err(e) => return fail_parent(c, parent, by, MERGE_FAILED, &e, now),
    };
    exec(
        c,
        "INSERT INTO results(job_id, body, bytes, stored_ms, shards) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![parent, body, body.len() as i64, now, shards],
    )?;
    exec(
        c,
        "UPDATE jobs SET state = 'succeeded', finished_ms = ?2, closed_by = ?3 WHERE id = ?1",
        params![parent, now, by],
    )?;
    if shards.is_none() {
        exec(
            c,
            "DELETE FROM results WHERE job_id IN (SELECT id FROM jobs WHERE parent = ?1)",
            [parent],
        )?;
    }
    Ok(())
}

/// Cancel `parent`'s queued and running shards.
fn cancel_shards(c: &Connection, parent: &str, now: i64) -> rusqlite::Result<usize> {
    exec(
        c,
        "UPDATE jobs SET state = 'cancelled', finished_ms = ?2, lease_owner = NULL \
         WHERE parent = ?1 AND state IN ('queued', 'running')",
        params![parent, now],
    )
}

/// Cancel job `id`; for a sharded job (its parent or a shard), the parent and its
/// unfinished shards. Returns the id of the job cancelled: the parent's for a shard.
pub(super) fn cancel(c: &Connection, id: &str, now: i64) -> rusqlite::Result<String> {
    let parent: Option<String> = c
        .prepare_cached("SELECT parent FROM jobs WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?
        .flatten();
    let root = parent.unwrap_or_else(|| id.to_string());
    let n = exec(
        c,
        "UPDATE jobs SET state = 'cancelled', finished_ms = ?2, lease_owner = NULL \
         WHERE id = ?1 AND state IN ('queued', 'running')",
        params![root, now],
    )?;
    if n > 0 {
        cancel_shards(c, &root, now)?;
    }
    Ok(root)
}
