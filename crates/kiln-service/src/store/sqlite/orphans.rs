//! The SQLite store's lease sweep (`JobStore::requeue_orphans`): the running jobs of a gone
//! process (or with an expired lease) go back to the queue, or fail when that was their
//! last attempt, a shard failing its parent as any shard's failure does. One write op: the
//! failures, their parents' ends and the re-queues commit together.

use super::{exec, shards};
use crate::store::{LostJob, Orphans, LEASE_EXPIRED};
use rusqlite::{params, Connection, OptionalExtension};

/// The running jobs swept (`?1` the live owners' `LIKE` pattern, `?2` now): no owner, an
/// owner not of this process, or an expired lease. A sharded job's parent holds no lease.
const ORPHAN: &str = "state = 'running' AND shards IS NULL AND (lease_owner IS NULL \
                      OR lease_owner NOT LIKE ?1 OR lease_until_ms < ?2)";

/// Fail the orphans on their last attempt as [`LEASE_EXPIRED`] (a shard's parent with them,
/// by `shards::after_end`), then re-queue the others.
pub(super) fn requeue_orphans(c: &Connection, live: &str, now: i64) -> rusqlite::Result<Orphans> {
    let mut failed: Vec<LostJob> = c
        .prepare_cached(&format!(
            "UPDATE jobs SET state = 'failed', finished_ms = ?2, lease_owner = NULL, \
             lease_until_ms = NULL, error_code = ?3, error_message = 'lease expired on attempt ' \
             || attempts || ' of ' || max_attempts || ' (' || ?4 || ')' \
             WHERE {ORPHAN} AND attempts >= max_attempts \
             RETURNING id, kind, principal, created_ms, parent"
        ))?
        .query_map(params![live, now, LEASE_EXPIRED.0, LEASE_EXPIRED.1], |r| {
            Ok(LostJob {
                id: r.get(0)?,
                kind: r.get(1)?,
                principal: r.get(2)?,
                created_ms: r.get(3)?,
                parent: r.get(4)?,
                closed_parent: None,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    for j in &mut failed {
        let Some(parent) = j.parent.clone() else {
            continue;
        };
        shards::after_end(c, &j.id, &parent, now)?;
        j.closed_parent = c
            .prepare_cached(
                "SELECT id, kind, principal, created_ms FROM jobs \
                 WHERE id = ?1 AND state = 'failed' AND closed_by = ?2",
            )?
            .query_row(params![parent, j.id], |r| {
                Ok(LostJob {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    principal: r.get(2)?,
                    created_ms: r.get(3)?,
                    parent: None,
                    closed_parent: None,
                })
            })
            .optional()?
            .map(Box::new);
    }
    // after the failures: a sibling their parent's failure cancelled is not re-queued
    let requeued = exec(
        c,
        &format!(
            "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_until_ms = NULL \
             WHERE {ORPHAN} AND attempts < max_attempts"
        ),
        params![live, now],
    )?;
    Ok(Orphans {
        requeued: requeued as u64,
        failed,
    })
}
