//! The PostgreSQL store's lease sweep (`JobStore::requeue_orphans`), run by every node four
//! times a second: running jobs whose lease expired go back to the queue, or fail when that
//! was their last attempt, a shard failing its parent as any shard's failure does
//! (`super::shards::after_end`). One transaction: the failures, their parents' ends, the
//! re-queues and their notifications commit together.
//!
//! The sweep never waits on a row lock (`SKIP LOCKED`): a row held by another transaction
//! (an end being stored, which may take long when it merges a sharded job, or another
//! node's sweep) is left to a later sweep. Waiting would stall the node's keeper, and with
//! it the heartbeat that renews the node's other leases. A shard on its last attempt is
//! failed only once its parent's row is locked first (crate::shard: the lock order of every
//! sharded change); a parent held elsewhere leaves the shard to a later sweep.

use super::rows::Conn;
use super::store::pg_err;
use crate::store::{now_ms, LostJob, Orphans, StoreResult, LEASE_EXPIRED};

/// The running jobs swept: no owner or an expired lease (a live node's heartbeat renews
/// its own). A sharded job's parent holds no lease.
const ORPHAN: &str = "state = 'running' AND shards IS NULL \
                      AND (lease_owner IS NULL OR lease_until_ms < kiln_now_ms())";

/// Fail the orphans on their last attempt as [`LEASE_EXPIRED`], then re-queue the others.
pub async fn requeue_orphans(mut c: Conn) -> StoreResult<Orphans> {
    let tx = c.transaction().await.map_err(pg_err)?;
    let now = now_ms();
    let parents: Vec<String> = tx
        .query(
            &format!(
                "SELECT id FROM kiln_jobs WHERE id IN (SELECT parent FROM kiln_jobs WHERE {ORPHAN} \
                 AND attempts >= max_attempts AND parent IS NOT NULL) ORDER BY id FOR UPDATE SKIP LOCKED"
            ),
            &[],
        )
        .await
        .map_err(pg_err)?
        .iter()
        .map(|r| r.try_get(0).map_err(pg_err))
        .collect::<StoreResult<_>>()?;
    let rows = tx
        .query(
            &format!(
                "WITH u AS (UPDATE kiln_jobs SET state = 'failed', finished_ms = $1, \
                   lease_owner = NULL, lease_until_ms = NULL, error_code = $2, \
                   error_message = 'lease expired on attempt ' || attempts || ' of ' || max_attempts \
                     || ' (' || $3::text || ')' \
                 WHERE id IN (SELECT id FROM kiln_jobs WHERE {ORPHAN} AND attempts >= max_attempts \
                   AND (parent IS NULL OR parent = ANY($4)) FOR UPDATE SKIP LOCKED) \
                 RETURNING id, kind, principal, created_ms, parent) \
                 SELECT id, kind, principal, created_ms, parent, pg_notify('kiln_done', id) FROM u"
            ),
            &[&now, &LEASE_EXPIRED.0, &LEASE_EXPIRED.1, &parents],
        )
        .await
        .map_err(pg_err)?;
    let mut failed = rows
        .iter()
        .map(|r| lost(r, true))
        .collect::<StoreResult<Vec<_>>>()?;
    for j in &mut failed {
        if j.parent.is_none() {
            continue;
        }
        super::shards::after_end(&tx, &j.id, now).await?;
        let closed = tx
            .query_opt(
                "SELECT id, kind, principal, created_ms FROM kiln_jobs \
                 WHERE id = $1 AND state = 'failed' AND closed_by = $2",
                &[&j.parent, &j.id],
            )
            .await
            .map_err(pg_err)?;
        j.closed_parent = closed.map(|r| lost(&r, false)).transpose()?.map(Box::new);
    }
    // after the failures: a sibling their parent's failure cancelled is not re-queued; a
    // shard on its last attempt whose parent was held elsewhere stays for a later sweep
    let rows = tx
        .query(
            &format!(
                "WITH u AS (UPDATE kiln_jobs SET state = 'queued', lease_owner = NULL, lease_until_ms = NULL \
                 WHERE id IN (SELECT id FROM kiln_jobs WHERE {ORPHAN} AND attempts < max_attempts \
                   FOR UPDATE SKIP LOCKED) RETURNING 1) \
                 SELECT count(*), CASE WHEN count(*) > 0 THEN pg_notify('kiln_jobs', '') END FROM u"
            ),
            &[],
        )
        .await
        .map_err(pg_err)?;
    let requeued: i64 = rows.first().map_or(Ok(0), |r| r.try_get(0)).map_err(pg_err)?;
    tx.commit().await.map_err(pg_err)?;
    Ok(Orphans {
        requeued: requeued.max(0) as u64,
        failed,
    })
}

/// A failed job from its `id, kind, principal, created_ms` (and `parent`, when `shard`).
fn lost(r: &tokio_postgres::Row, shard: bool) -> StoreResult<LostJob> {
    Ok(LostJob {
        id: r.try_get(0).map_err(pg_err)?,
        kind: r.try_get(1).map_err(pg_err)?,
        principal: r.try_get(2).map_err(pg_err)?,
        created_ms: r.try_get(3).map_err(pg_err)?,
        parent: if shard {
            r.try_get(4).map_err(pg_err)?
        } else {
            None
        },
        closed_parent: None,
    })
}
