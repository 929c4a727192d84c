//! Job ends: one ([`finish_one`], `JobStore::finish`) or a worker's batch of them
//! ([`finish_many`], `JobStore::finish_many`: one transaction, one statement for the state
//! changes and their `kiln_done` notifications, one for the results). Both store an end
//! only while the job is `running` under the caller's lease.
//!
//! A batch locks several job rows at once. The node's heartbeat and every node's lease
//! sweep skip rows another transaction holds (`SKIP LOCKED`), so neither waits on an end
//! being stored, however long it takes (a sharded job's merge), nor meets it as a
//! deadlock; while the end holds its rows they cannot be swept, and once it commits they
//! are terminal. Should another transaction lock the same rows in another order (a cancel),
//! PostgreSQL aborts one of the two (`deadlock_detected`, a passing failure): the
//! supervisor sends the batch again, and nothing is stored twice.

use super::rows::{insert_blob, Conn};
use super::store::pg_err;
use crate::store::*;
use std::collections::{HashMap, HashSet};

/// The stored state, error code and message of an outcome.
fn columns(outcome: &Outcome) -> (&'static str, Option<&str>, Option<&str>) {
    match outcome {
        Outcome::Succeeded { .. } => ("succeeded", None, None),
        Outcome::Failed { code, message } => ("failed", Some(code.as_str()), Some(message.as_str())),
    }
}

/// Store job `id`'s end if it is `running` under `owner`; whether it was.
pub async fn finish_one(mut c: Conn, id: &str, owner: &str, outcome: &Outcome) -> StoreResult<bool> {
    let tx = c.transaction().await.map_err(pg_err)?;
    // a shard's parent first (crate::shard: the lock order of every sharded change)
    let parents = super::shards::lock_parents(&tx, &[id]).await?;
    let now = now_ms();
    let (state, code, msg) = columns(outcome);
    let st = tx
        .prepare_cached(
            "UPDATE kiln_jobs SET state = $3, finished_ms = $4, lease_owner = NULL, \
             error_code = coalesce($5, error_code), error_message = coalesce($6, error_message) \
             WHERE id = $1 AND state = 'running' AND lease_owner = $2",
        )
        .await
        .map_err(pg_err)?;
    let n = tx
        .execute(&st, &[&id, &owner, &state, &now, &code, &msg])
        .await
        .map_err(pg_err)?;
    if n == 0 {
        return Ok(false);
    }
    if let Outcome::Succeeded { result, blobs } = outcome {
        // The primary key keeps one result per job: a second insert fails the call.
        let st = tx
            .prepare_cached(
                "INSERT INTO kiln_results(job_id, body, bytes, stored_ms) VALUES ($1, $2, $3, $4)",
            )
            .await
            .map_err(pg_err)?;
        tx.execute(&st, &[&id, result, &(result.len() as i64), &now])
            .await
            .map_err(pg_err)?;
        for b in blobs {
            insert_blob(&*tx, b).await?;
        }
    }
    if !parents.is_empty() {
        super::shards::after_end(&tx, id, now).await?;
    }
    tx.execute("SELECT pg_notify('kiln_done', $1)", &[&id])
        .await
        .map_err(pg_err)?;
    tx.commit().await.map_err(pg_err)?;
    Ok(true)
}

/// Store every end of `ends` whose job is `running` under `owner`, in one transaction;
/// whether each was stored, in order (an id given again: `false`).
pub async fn finish_many(mut c: Conn, owner: &str, ends: &[JobEnd]) -> StoreResult<Vec<bool>> {
    // the first end of each id goes to the database; later ones are not stored
    let mut seen = HashSet::with_capacity(ends.len());
    let first: Vec<bool> = ends.iter().map(|e| seen.insert(e.id.as_str())).collect();
    let sent: Vec<&JobEnd> = ends
        .iter()
        .zip(&first)
        .filter(|(_, f)| **f)
        .map(|(e, _)| e)
        .collect();
    if sent.is_empty() {
        return Ok(vec![false; ends.len()]);
    }
    let ids: Vec<&str> = sent.iter().map(|e| e.id.as_str()).collect();
    let (mut states, mut codes, mut msgs) = (Vec::new(), Vec::new(), Vec::new());
    for e in &sent {
        let (s, c, m) = columns(&e.outcome);
        states.push(s);
        codes.push(c);
        msgs.push(m);
    }
    let now = now_ms();
    let tx = c.transaction().await.map_err(pg_err)?;
    let parents = super::shards::lock_parents(&tx, &ids).await?;
    let st = tx
        .prepare_cached(
            "WITH e AS (SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) \
               AS e(id, state, code, msg)), \
             u AS (UPDATE kiln_jobs j SET state = e.state, finished_ms = $6, lease_owner = NULL, \
               error_code = coalesce(e.code, j.error_code), error_message = coalesce(e.msg, j.error_message) \
               FROM e WHERE j.id = e.id AND j.state = 'running' AND j.lease_owner = $1 \
               RETURNING j.id, j.parent) \
             SELECT id, parent, pg_notify('kiln_done', id) FROM u",
        )
        .await
        .map_err(pg_err)?;
    let rows = tx
        .query(&st, &[&owner, &ids, &states, &codes, &msgs, &now])
        .await
        .map_err(pg_err)?;
    let stored: HashSet<String> = rows
        .iter()
        .map(|r| r.try_get::<_, String>(0).map_err(pg_err))
        .collect::<StoreResult<_>>()?;
    let mut shards = Vec::new();
    if !parents.is_empty() {
        for r in &rows {
            if r.try_get::<_, Option<String>>(1).map_err(pg_err)?.is_some() {
                shards.push(r.try_get::<_, String>(0).map_err(pg_err)?);
            }
        }
    }
    // The results of the stored successes, one statement (the primary key keeps one
    // result per job: a second insert fails the call, which stores nothing).
    let mut bodies: HashMap<&str, &str> = HashMap::new();
    for e in &sent {
        if let Outcome::Succeeded { result, .. } = &e.outcome {
            if stored.contains(&e.id) {
                bodies.insert(e.id.as_str(), result.as_str());
            }
        }
    }
    if !bodies.is_empty() {
        let (rids, rbodies): (Vec<&str>, Vec<&str>) = bodies.iter().map(|(k, v)| (*k, *v)).unzip();
        let st = tx
            .prepare_cached(
                "INSERT INTO kiln_results(job_id, body, bytes, stored_ms) \
                 SELECT id, body, octet_length(body), $3::bigint FROM unnest($1::text[], $2::text[]) AS r(id, body)",
            )
            .await
            .map_err(pg_err)?;
        tx.execute(&st, &[&rids, &rbodies, &now]).await.map_err(pg_err)?;
    }
    for e in &sent {
        if let Outcome::Succeeded { blobs, .. } = &e.outcome {
            if stored.contains(&e.id) {
                for b in blobs {
                    insert_blob(&*tx, b).await?;
                }
            }
        }
    }
    // the shards' consequences for their parents, once their results are in
    for id in &shards {
        super::shards::after_end(&tx, id, now).await?;
    }
    tx.commit().await.map_err(pg_err)?;
    Ok(ends
        .iter()
        .zip(first)
        .map(|(e, f)| f && stored.contains(&e.id))
        .collect())
}
