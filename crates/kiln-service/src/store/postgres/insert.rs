//! Inserting jobs: one (a single statement that also notifies) or a batch (one transaction,
//! one multi-row insert, one notification). A created job's record is made from what was
//! inserted and the `seq` the database returned, not read back.

use super::rows::{job_row, Conn, AFTER_JOB_COLS, JOB_COLS};
use super::store::pg_err;
use crate::store::*;

/// The earlier job of `job`'s principal and idempotency key (after an insert that
/// conflicted on it), with its result.
pub(super) async fn existing<C: tokio_postgres::GenericClient>(c: &C, job: &NewJob) -> StoreResult<Inserted> {
    let key = job.idempotency_key.as_deref().unwrap_or_default();
    let sql = format!(
        "SELECT {JOB_COLS}, r.body, j.request_hash, r.shards FROM kiln_jobs j \
         LEFT JOIN kiln_results r ON r.job_id = j.id WHERE j.principal = $1 AND j.idem_key = $2"
    );
    let row = c
        .query_opt(&sql, &[&job.principal, &key])
        .await
        .map_err(pg_err)?
        .ok_or_else(|| StoreError::new(format!("job {}: the insert stored nothing", job.id)))?;
    let mut j = job_row(&row)?;
    j.result = row.try_get(AFTER_JOB_COLS).map_err(pg_err)?;
    let hash: String = row.try_get(AFTER_JOB_COLS + 1).map_err(pg_err)?;
    j.result_shards = row
        .try_get::<_, Option<i32>>(AFTER_JOB_COLS + 2)
        .map_err(pg_err)?
        .map(|n| n.max(0) as u64);
    Ok(Inserted::Existing {
        job: j,
        same_request: hash == job.request_hash,
    })
}

/// [`JobStore::insert`].
pub async fn insert_one(c: Conn, job: NewJob) -> StoreResult<Inserted> {
    // One statement: the insert and its notification commit together; a conflict on the
    // idempotency key inserts nothing (and notifies nothing).
    let st = c
        .prepare_cached(
            "WITH ins AS (INSERT INTO kiln_jobs(id, kind, batch_key, needs_gpu, principal, \
             idem_key, request_hash, task, elements, state, max_attempts, deadline_ms, created_ms, \
             priority, queue_until_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'queued', $10, $11, $12, $13, $14) \
             ON CONFLICT (principal, idem_key) WHERE idem_key IS NOT NULL DO NOTHING \
             RETURNING seq) \
             SELECT seq, pg_notify('kiln_jobs', '') FROM ins",
        )
        .await
        .map_err(pg_err)?;
    let max_attempts = job.max_attempts.min(i32::MAX as u32) as i32;
    let elements = job.elements.min(i64::MAX as u64) as i64;
    let rows = c
        .query(
            &st,
            &[
                &job.id,
                &job.kind,
                &job.batch_key,
                &job.needs_gpu,
                &job.principal,
                &job.idempotency_key,
                &job.request_hash,
                &job.task,
                &elements,
                &max_attempts,
                &job.deadline_ms,
                &job.created_ms,
                &job.priority,
                &job.queue_until_ms,
            ],
        )
        .await
        .map_err(pg_err)?;
    match rows.first() {
        Some(r) => Ok(Inserted::Created(
            job.queued_record(r.try_get(0).map_err(pg_err)?),
        )),
        None => {
            let client: &tokio_postgres::Client = &c;
            existing(client, &job).await
        }
    }
}

/// [`JobStore::insert_batch`]: the jobs' columns as arrays, unnested into one insert in
/// submission order (so `seq`, the FIFO order within a priority, follows the batch), in a
/// transaction with the jobs that named an earlier one looked up and one notification;
/// rolled back if a key names an earlier job of a different request.
pub async fn insert_many(mut c: Conn, jobs: Vec<NewJob>) -> StoreResult<BatchInserted> {
    if jobs.is_empty() {
        return Ok(BatchInserted::Stored(Vec::new()));
    }
    let tx = c.transaction().await.map_err(pg_err)?;
    let st = tx
        .prepare_cached(
            "INSERT INTO kiln_jobs(id, kind, batch_key, needs_gpu, principal, idem_key, \
             request_hash, task, elements, state, max_attempts, deadline_ms, created_ms, priority, \
             queue_until_ms) \
             SELECT id, kind, batch_key, needs_gpu, principal, idem_key, request_hash, task, \
               elements, 'queued', max_attempts, deadline_ms, created_ms, priority, queue_until_ms \
             FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::text[], $6::text[], \
               $7::text[], $8::text[], $9::int8[], $10::int4[], $11::int8[], $12::int8[], \
               $13::int4[], $14::int8[]) WITH ORDINALITY AS t(id, kind, batch_key, needs_gpu, \
               principal, idem_key, request_hash, task, elements, max_attempts, deadline_ms, \
               created_ms, priority, queue_until_ms, ord) \
             ORDER BY ord \
             ON CONFLICT (principal, idem_key) WHERE idem_key IS NOT NULL DO NOTHING \
             RETURNING id, seq",
        )
        .await
        .map_err(pg_err)?;
    let col = |f: fn(&NewJob) -> String| jobs.iter().map(f).collect::<Vec<String>>();
    let ids = col(|j| j.id.clone());
    let kinds = col(|j| j.kind.clone());
    let keys = col(|j| j.batch_key.clone());
    let principals = col(|j| j.principal.clone());
    let hashes = col(|j| j.request_hash.clone());
    let tasks = col(|j| j.task.clone());
    let gpu: Vec<bool> = jobs.iter().map(|j| j.needs_gpu).collect();
    let idem: Vec<Option<String>> = jobs.iter().map(|j| j.idempotency_key.clone()).collect();
    let elements: Vec<i64> = jobs
        .iter()
        .map(|j| j.elements.min(i64::MAX as u64) as i64)
        .collect();
    let attempts: Vec<i32> = jobs
        .iter()
        .map(|j| j.max_attempts.min(i32::MAX as u32) as i32)
        .collect();
    let deadlines: Vec<Option<i64>> = jobs.iter().map(|j| j.deadline_ms).collect();
    let created: Vec<i64> = jobs.iter().map(|j| j.created_ms).collect();
    let priorities: Vec<i32> = jobs.iter().map(|j| j.priority).collect();
    let until: Vec<Option<i64>> = jobs.iter().map(|j| j.queue_until_ms).collect();
    let rows = tx
        .query(
            &st,
            &[
                &ids,
                &kinds,
                &keys,
                &gpu,
                &principals,
                &idem,
                &hashes,
                &tasks,
                &elements,
                &attempts,
                &deadlines,
                &created,
                &priorities,
                &until,
            ],
        )
        .await
        .map_err(pg_err)?;
    let mut seqs = std::collections::HashMap::with_capacity(rows.len());
    for r in &rows {
        let id: String = r.try_get(0).map_err(pg_err)?;
        let seq: i64 = r.try_get(1).map_err(pg_err)?;
        seqs.insert(id, seq);
    }
    let mut out = Vec::with_capacity(jobs.len());
    for job in &jobs {
        match seqs.get(&job.id) {
            Some(&seq) => out.push(Inserted::Created(job.queued_record(seq))),
            None => {
                let t: &tokio_postgres::Transaction<'_> = &tx;
                out.push(existing(t, job).await?)
            }
        }
    }
    let verdict = BatchInserted::check(out);
    if !verdict.is_stored() {
        tx.rollback().await.map_err(pg_err)?;
        return Ok(verdict);
    }
    if !rows.is_empty() {
        tx.execute("SELECT pg_notify('kiln_jobs', '')", &[])
            .await
            .map_err(pg_err)?;
    }
    tx.commit().await.map_err(pg_err)?;
    Ok(verdict)
}
