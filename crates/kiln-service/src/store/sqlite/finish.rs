//! The SQLite store's job ends: [`finish_one`] is the rule of `JobStore::finish` (stored only
//! while the job is `running` under the caller's lease), run once per job by
//! `JobStore::finish_many` inside one write op, so a worker's batch of ends shares one
//! commit.

use super::rows::insert_blob;
use super::{exec, shards};
use crate::store::{JobEnd, Outcome};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashSet;

/// Store `outcome` as job `id`'s end if it is `running` under `owner`; whether it was.
pub(super) fn finish_one(
    c: &Connection,
    id: &str,
    owner: &str,
    outcome: &Outcome,
    now: i64,
) -> rusqlite::Result<bool> {
    let (state, code, msg) = match outcome {
        Outcome::Succeeded { .. } => ("succeeded", None, None),
        Outcome::Failed { code, message } => ("failed", Some(code.as_str()), Some(message.as_str())),
    };
    let Some(parent) = c
        .prepare_cached(
            "UPDATE jobs SET state = ?3, finished_ms = ?4, lease_owner = NULL, \
             error_code = coalesce(?5, error_code), error_message = coalesce(?6, error_message) \
             WHERE id = ?1 AND state = 'running' AND lease_owner = ?2 RETURNING parent",
        )?
        .query_row(params![id, owner, state, now, code, msg], |r| {
            r.get::<_, Option<String>>(0)
        })
        .optional()?
    else {
        return Ok(false);
    };
    if let Outcome::Succeeded { result, blobs } = outcome {
        // The primary key keeps one result per job: a second insert fails the op.
        exec(
            c,
            "INSERT INTO results(job_id, body, bytes, stored_ms) VALUES (?1, ?2, ?3, ?4)",
            params![id, result, result.len() as i64, now],
        )?;
        for b in blobs {
            insert_blob(c, b)?;
        }
    }
    if let Some(parent) = parent {
        shards::after_end(c, id, &parent, now)?;
    }
    Ok(true)
}

/// [`finish_one`] for each end, in order, on one connection (the caller's write op: one
/// transaction). An id given again is not stored again.
pub(super) fn finish_all(
    c: &Connection,
    owner: &str,
    ends: &[JobEnd],
    now: i64,
) -> rusqlite::Result<Vec<bool>> {
    let mut seen = HashSet::with_capacity(ends.len());
    ends.iter()
        .map(|e| {
            if !seen.insert(e.id.as_str()) {
                return Ok(false);
            }
            finish_one(c, &e.id, owner, &e.outcome, now)
        })
        .collect()
}
