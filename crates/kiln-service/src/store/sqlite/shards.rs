//! The SQLite store's side of sharded jobs (crate::shard): what a shard's end does to its
//! parent, and the cancel of a whole sharded job. Everything runs inside the caller's write
//! op, so the end and its consequence for the parent commit together (one writer: no
//! other end can come between).

use super::exec;
use crate::shard::{merge, ParentTask};
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

/// Merge the shards' results into the running parent's (crate::shard::merge), drop the
/// shards' own results, and close the parent; a merge that fails fails the parent.
fn merge_parent(c: &Connection, parent: &str, by: &str, now: i64) -> rusqlite::Result<()> {
    let task: Option<String> = c
        .prepare_cached("SELECT task FROM jobs WHERE id = ?1 AND state = 'running'")?
        .query_row([parent], |r| r.get(0))
        .optional()?;
    let Some(task) = task else {
        return Ok(());
    };
    let bodies: Vec<String> = c
        .prepare_cached(
            "SELECT r.body FROM jobs j JOIN results r ON r.job_id = j.id WHERE j.parent = ?1 \
             ORDER BY j.shard_index",
        )?
        .query_map([parent], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let merged = serde_json::from_str::<ParentTask>(&task)
        .map_err(|e| format!("the parent's task: {e}"))
        .and_then(|t| merge(&t, &bodies));
    let body = match merged {
        Ok(b) => b,
        Err(e) => return fail_parent(c, parent, by, MERGE_FAILED, &e, now),
    };
    exec(
        c,
        "INSERT INTO results(job_id, body, bytes, stored_ms) VALUES (?1, ?2, ?3, ?4)",
        params![parent, body, body.len() as i64, now],
    )?;
    exec(
        c,
        "UPDATE jobs SET state = 'succeeded', finished_ms = ?2, closed_by = ?3 WHERE id = ?1",
        params![parent, now, by],
    )?;
    exec(
        c,
        "DELETE FROM results WHERE job_id IN (SELECT id FROM jobs WHERE parent = ?1)",
        [parent],
    )?;
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
