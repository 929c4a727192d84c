//! The SQLite store's queries for sharing between tokens: the fair queue head and the
//! bytes of a principal's uploads.

use rusqlite::{params, Connection, OptionalExtension};

/// The seq of the job [`JobStore::head`] picks. Written as short indexed queries, a few per
/// principal with queued work (found by a skip scan of `jobs_principal_priority`), rather than
/// one statement grouping every queued job: the cost follows the number of tokens, not the
/// depth of the queue.
pub(super) fn fair_head(c: &Connection, gpu: bool, cap: u32) -> rusqlite::Result<Option<i64>> {
    let mut next = c.prepare_cached(
        "SELECT principal FROM jobs WHERE state = 'queued' AND principal > ?1 ORDER BY principal LIMIT 1",
    )?;
    let mut first = c.prepare_cached(
        "SELECT seq FROM jobs WHERE state = 'queued' AND principal = ?1 AND (needs_gpu = 0 OR ?2) \
         ORDER BY priority DESC, seq LIMIT 1",
    )?;
    let mut slots = c.prepare_cached(
        "SELECT count(DISTINCT lease_owner) FROM jobs WHERE state = 'running' AND principal = ?1",
    )?;
    let mut last = c.prepare_cached("SELECT max(started_ms) FROM jobs WHERE principal = ?1")?;
    // (slots held, last start (None: never, first), oldest queued seq)
    let mut best: Option<(i64, Option<i64>, i64)> = None;
    let mut after = c
        .prepare_cached("SELECT principal FROM jobs WHERE state = 'queued' ORDER BY principal LIMIT 1")?
        .query_row([], |r| r.get::<_, String>(0))
        .optional()?;
    // One principal with queued work (the common case): no choice to make, so neither its
    // slots nor its last start need reading, unless a cap could rule it out.
    if let Some(name) = &after {
        if cap == 0
            && next
                .query_row([name], |r| r.get::<_, String>(0))
                .optional()?
                .is_none()
        {
            return first
                .query_row(params![name, gpu], |r| r.get::<_, i64>(0))
                .optional();
        }
    }
    while let Some(name) = after {
        if let Some(seq) = first
            .query_row(params![name, gpu], |r| r.get::<_, i64>(0))
            .optional()?
        {
            let held: i64 = slots.query_row([&name], |r| r.get(0))?;
            if cap == 0 || held < i64::from(cap) {
                let at: Option<i64> = last.query_row([&name], |r| r.get(0))?;
                let key = (held, at, seq);
                if best.is_none_or(|b| key < b) {
                    best = Some(key);
                }
            }
        }
        after = next.query_row([&name], |r| r.get::<_, String>(0)).optional()?;
    }
    Ok(best.map(|(_, _, seq)| seq))
}

/// Bytes of uploaded blobs (no job) of `principal`.
pub(super) fn uploaded(c: &Connection, principal: &str) -> rusqlite::Result<u64> {
    let n: i64 = c.query_row(
        "SELECT coalesce(sum(size), 0) FROM blobs WHERE principal = ?1 AND job_id IS NULL",
        [principal],
        |r| r.get(0),
    )?;
    Ok(n.max(0) as u64)
}
