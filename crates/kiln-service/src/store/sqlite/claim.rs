//! The SQLite store's claims: a keyed or unkeyed claim ([`claim_jobs`]), the fair head and
//! its claim in one step ([`claim_head`]), and the claim a slot makes in the transaction of
//! its batch's ends ([`claim_next`], `JobStore::finish_and_claim`).

use super::rows::claimed_job;
use super::tenancy::fair_head;
use crate::store::{ClaimLimit, ClaimedJob, NextClaim, NextTake};
use rusqlite::{params, Connection};

/// Claim up to `max` queued jobs (of batch key `key` if given) for `owner`, leased until
/// `until`: highest priority first, then oldest.
pub(super) fn claim_jobs(
    c: &Connection,
    owner: &str,
    now: i64,
    until: i64,
    gpu: bool,
    key: Option<&str>,
    max: usize,
) -> rusqlite::Result<Vec<ClaimedJob>> {
    // Two statements: with a key the claim walks `jobs_key_priority` in its order and stops
    // at the limit; `?5 IS NULL OR batch_key = ?5` would read and sort every queued job.
    let mut st = c.prepare_cached(if key.is_some() {
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_ms = ?1, \
         lease_owner = ?2, lease_until_ms = ?3 \
         WHERE seq IN (SELECT seq FROM jobs WHERE state = 'queued' AND (needs_gpu = 0 OR ?4) \
           AND batch_key = ?5 ORDER BY priority DESC, seq LIMIT ?6) \
         RETURNING id, kind, principal, task, attempts, max_attempts, created_ms, deadline_ms, \
           queue_until_ms, parent, priority, seq"
    } else {
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_ms = ?1, \
         lease_owner = ?2, lease_until_ms = ?3 \
         WHERE seq IN (SELECT seq FROM jobs WHERE state = 'queued' AND (needs_gpu = 0 OR ?4) \
           AND ?5 IS NULL ORDER BY priority DESC, seq LIMIT ?6) \
         RETURNING id, kind, principal, task, attempts, max_attempts, created_ms, deadline_ms, \
           queue_until_ms, parent, priority, seq"
    })?;
    let mut jobs: Vec<((i64, i64), ClaimedJob)> = st
        .query_map(params![now, owner, until, gpu, key, max.max(1) as i64], |r| {
            Ok(((-r.get::<_, i64>(10)?, r.get::<_, i64>(11)?), claimed_job(r)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    jobs.sort_by_key(|(s, _)| *s);
    Ok(jobs.into_iter().map(|(_, j)| j).collect())
}

/// The fair head claimed for `owner`, leased until `until`, and with it, when `limit`
/// allows more than one, a share of the queued jobs of its batch key (`JobStore::claim_head`).
/// One job (`limit` of one) needs no second query; more count the head key's queued jobs
/// (up to what the limit could take) and claim the rest of the share from that key.
pub(super) fn claim_head(
    c: &Connection,
    owner: &str,
    gpu: bool,
    max_workers_per_token: u32,
    limit: ClaimLimit,
    now: i64,
    until: i64,
) -> rusqlite::Result<Vec<ClaimedJob>> {
    let Some(seq) = fair_head(c, gpu, max_workers_per_token)? else {
        return Ok(Vec::new());
    };
    let mut st = c.prepare_cached(
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_ms = ?1, \
         lease_owner = ?2, lease_until_ms = ?3 WHERE seq = ?4 AND state = 'queued' \
         RETURNING id, kind, principal, task, attempts, max_attempts, created_ms, deadline_ms, \
           queue_until_ms, parent, batch_key",
    )?;
    let mut rows = st.query(params![now, owner, until, seq])?;
    let Some(r) = rows.next()? else {
        return Ok(Vec::new());
    };
    let mut jobs = vec![claimed_job(r)?];
    let key: String = r.get(10)?;
    drop(rows);
    if limit.max > 1 {
        // the jobs still queued, plus the head just claimed
        let cap = limit
            .max
            .saturating_mul(limit.slots.max(1))
            .min(i64::MAX as usize) as i64;
        let queued: i64 = c
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE state = 'queued' AND batch_key = ?1 LIMIT ?2)",
            )?
            .query_row(params![key, cap], |r| r.get(0))?;
        let more = limit.jobs(queued.max(0) as u64 + 1) - 1;
        if more > 0 {
            jobs.extend(claim_jobs(c, owner, now, until, gpu, Some(&key), more)?);
        }
    }
    Ok(jobs)
}

/// What `next` says to claim for `owner` at `now` (`JobStore::finish_and_claim`): the fair
/// head with its share, or a dynamic batch of the head's key once it is full or its head has
/// waited its delay (else nothing: the slot then waits for the batch as after an empty
/// claim).
pub(super) fn claim_next(
    c: &Connection,
    owner: &str,
    next: &NextClaim,
    now: i64,
) -> rusqlite::Result<Vec<ClaimedJob>> {
    let until = now.saturating_add(next.lease.as_millis().min(i64::MAX as u128) as i64);
    let (max, delay_ms) = match next.take {
        NextTake::Head(limit) => {
            return claim_head(c, owner, next.gpu, next.max_workers_per_token, limit, now, until)
        }
        NextTake::Batch { max, delay_ms } => (max.max(1), delay_ms),
    };
    let Some(seq) = fair_head(c, next.gpu, next.max_workers_per_token)? else {
        return Ok(Vec::new());
    };
    let (key, created_ms): (String, i64) = c
        .prepare_cached("SELECT batch_key, created_ms FROM jobs WHERE seq = ?1")?
        .query_row([seq], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if now.saturating_sub(created_ms) < delay_ms.min(i64::MAX as u64) as i64 {
        let queued: i64 = c
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE state = 'queued' AND batch_key = ?1 LIMIT ?2)",
            )?
            .query_row(params![key, max.min(i64::MAX as usize) as i64], |r| r.get(0))?;
        if (queued.max(0) as u64) < max as u64 {
            return Ok(Vec::new());
        }
    }
    claim_jobs(c, owner, now, until, next.gpu, Some(&key), max)
}
