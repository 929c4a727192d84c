//! Versioned migrations, applied at start under an advisory lock so that nodes starting
//! together apply each migration once: the first takes the lock and migrates, the others
//! wait for it and then find nothing to do. Versions applied are rows of
//! `kiln_schema_version`; a database newer than this build is refused.

use super::store::pg_err;
use crate::store::{StoreError, StoreResult};

/// The advisory lock key held while migrating (`'kiln' 'mig'` as bytes).
const MIGRATION_LOCK: i64 = 0x6b69_6c6e_006d_6967;

/// The schema version this build knows (the last migration's).
pub const SCHEMA_VERSION: i32 = 5;

/// `(version, description, SQL)`, in order; never edit one that has shipped, add the next.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "jobs, results, blobs, nodes; a clock function shared by every node",
        "
CREATE FUNCTION kiln_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
  $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
CREATE TABLE kiln_jobs(
  seq bigserial PRIMARY KEY,
  id text NOT NULL UNIQUE,
  kind text NOT NULL,
  batch_key text NOT NULL,
  needs_gpu boolean NOT NULL,
  principal text NOT NULL,
  idem_key text,
  request_hash text NOT NULL,
  task text NOT NULL,
  elements bigint NOT NULL,
  state text NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL,
  deadline_ms bigint,
  created_ms bigint NOT NULL,
  started_ms bigint,
  finished_ms bigint,
  lease_owner text,
  lease_until_ms bigint,
  error_code text,
  error_message text
);
CREATE UNIQUE INDEX kiln_jobs_idem ON kiln_jobs(principal, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX kiln_jobs_queued ON kiln_jobs(seq) WHERE state = 'queued';
CREATE INDEX kiln_jobs_queued_key ON kiln_jobs(batch_key, seq) WHERE state = 'queued';
CREATE INDEX kiln_jobs_running ON kiln_jobs(lease_until_ms) WHERE state = 'running';
CREATE INDEX kiln_jobs_state ON kiln_jobs(state, seq);
CREATE INDEX kiln_jobs_finished ON kiln_jobs(finished_ms) WHERE finished_ms IS NOT NULL;
CREATE TABLE kiln_results(
  job_id text PRIMARY KEY,
  body text NOT NULL,
  bytes bigint NOT NULL,
  stored_ms bigint NOT NULL
);
CREATE TABLE kiln_blobs(
  id text PRIMARY KEY,
  path text NOT NULL,
  size bigint NOT NULL,
  sha256 text NOT NULL,
  format text NOT NULL,
  principal text NOT NULL,
  job_id text,
  created_ms bigint NOT NULL
);
CREATE INDEX kiln_blobs_job ON kiln_blobs(job_id);
CREATE TABLE kiln_nodes(
  id text PRIMARY KEY,
  hostname text NOT NULL,
  devices text NOT NULL,
  started_ms bigint NOT NULL,
  last_heartbeat_ms bigint NOT NULL,
  version text NOT NULL
);
",
    ),
    (
        2,
        "indexes by principal: fair claims between tokens, per-token quotas",
        "
CREATE INDEX kiln_jobs_queued_principal ON kiln_jobs(principal, seq) WHERE state = 'queued';
CREATE INDEX kiln_jobs_principal_started ON kiln_jobs(principal, started_ms);
CREATE INDEX kiln_blobs_principal ON kiln_blobs(principal, created_ms);
",
    ),
    (
        3,
        "priorities and queue timeouts: the claim orders and the expiry sweep",
        "
ALTER TABLE kiln_jobs ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE kiln_jobs ADD COLUMN queue_until_ms bigint;
CREATE INDEX kiln_jobs_queued_key_priority ON kiln_jobs(batch_key, priority DESC, seq) WHERE state = 'queued';
CREATE INDEX kiln_jobs_queued_principal_priority ON kiln_jobs(principal, priority DESC, seq) WHERE state = 'queued';
CREATE INDEX kiln_jobs_queue_until ON kiln_jobs(queue_until_ms) WHERE state = 'queued' AND queue_until_ms IS NOT NULL;
",
    ),
    (
        4,
        "sharded jobs: a shard's parent and index, a parent's shard count and closing shard",
        "
ALTER TABLE kiln_jobs ADD COLUMN parent text;
ALTER TABLE kiln_jobs ADD COLUMN shard_index integer;
ALTER TABLE kiln_jobs ADD COLUMN shards integer;
ALTER TABLE kiln_jobs ADD COLUMN closed_by text;
CREATE INDEX kiln_jobs_parent ON kiln_jobs(parent, shard_index) WHERE parent IS NOT NULL;
",
    ),
    (
        5,
        "sharded results kept as a manifest over the shards' results: their count",
        "
ALTER TABLE kiln_results ADD COLUMN shards integer;
",
    ),
];

/// Apply the missing migrations in one transaction under the migration lock; returns the
/// schema version after.
pub async fn migrate(client: &mut tokio_postgres::Client) -> StoreResult<i32> {
    let tx = client.transaction().await.map_err(pg_err)?;
    // Transaction-scoped: released at commit or rollback, also if this process dies.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg_err)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS kiln_schema_version(
           version integer PRIMARY KEY,
           description text NOT NULL,
           applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .map_err(pg_err)?;
    let row = tx
        .query_one("SELECT coalesce(max(version), 0) FROM kiln_schema_version", &[])
        .await
        .map_err(pg_err)?;
    let current: i32 = row.get(0);
    if current > SCHEMA_VERSION {
        return Err(StoreError::new(format!(
            "the database has kiln schema version {current}; this kiln knows up to {SCHEMA_VERSION}: \
             upgrade kiln on this node"
        )));
    }
    for (version, description, sql) in MIGRATIONS.iter().filter(|(v, _, _)| *v > current) {
        tx.batch_execute(sql)
            .await
            .map_err(|e| StoreError::new(format!("migration {version} ({description}): {}", describe(&e))))?;
        tx.execute(
            "INSERT INTO kiln_schema_version(version, description) VALUES ($1, $2)",
            &[version, description],
        )
        .await
        .map_err(pg_err)?;
        tracing::info!("job store: applied migration {version}: {description}");
    }
    tx.commit().await.map_err(pg_err)?;
    Ok(SCHEMA_VERSION)
}

/// A PostgreSQL error with the server's message when there is one.
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}
