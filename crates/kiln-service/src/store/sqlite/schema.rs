//! The SQLite store's schema: the tables and indexes of a new database, and the steps that
//! migrate an older one (`user_version`).

pub(super) const SCHEMA_VERSION: i64 = 4;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  batch_key TEXT NOT NULL,
  needs_gpu INTEGER NOT NULL,
  principal TEXT NOT NULL,
  idem_key TEXT,
  request_hash TEXT NOT NULL,
  task TEXT NOT NULL,
  elements INTEGER NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  deadline_ms INTEGER,
  created_ms INTEGER NOT NULL,
  started_ms INTEGER,
  finished_ms INTEGER,
  lease_owner TEXT,
  lease_until_ms INTEGER,
  error_code TEXT,
  error_message TEXT,
  priority INTEGER NOT NULL DEFAULT 0,
  queue_until_ms INTEGER,
  parent TEXT,
  shard_index INTEGER,
  shards INTEGER,
  closed_by TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_idem ON jobs(principal, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, seq);
CREATE TABLE IF NOT EXISTS results(
  job_id TEXT PRIMARY KEY,
  body TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  stored_ms INTEGER NOT NULL,
  shards INTEGER
);
CREATE TABLE IF NOT EXISTS blobs(
  id TEXT PRIMARY KEY,
  path TEXT NOT NULL,
  size INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  format TEXT NOT NULL,
  principal TEXT NOT NULL,
  job_id TEXT,
  created_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS blobs_job ON blobs(job_id);
CREATE INDEX IF NOT EXISTS jobs_principal_started ON jobs(principal, started_ms);
CREATE INDEX IF NOT EXISTS blobs_principal ON blobs(principal, created_ms);
";

/// Version 1 to 2: priorities and queue timeouts (the columns a version-1 file lacks).
pub(super) const TO_V2: &str = "
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN queue_until_ms INTEGER;
";

/// Indexes of the version-2 columns: the claim orders (highest priority, then oldest, per
/// batch key and per principal) and the queue-timeout sweep.
pub(super) const INDEXES_V2: &str = "
CREATE INDEX IF NOT EXISTS jobs_key_priority ON jobs(state, batch_key, priority DESC, seq);
CREATE INDEX IF NOT EXISTS jobs_principal_priority ON jobs(state, principal, priority DESC, seq);
CREATE INDEX IF NOT EXISTS jobs_queue_until ON jobs(state, queue_until_ms) WHERE queue_until_ms IS NOT NULL;
";

/// Indexes of earlier versions that the version-2 ones serve: `jobs_key` and
/// `jobs_state_principal` are the leading columns of `jobs_key_priority` and
/// `jobs_principal_priority`, which answer the same lookups in the same plans. Every index
/// naming `state` is rewritten at each change of a job's state (insert, claim, end), so
/// each one dropped is pages no commit writes: these two were a third of the WAL's writes
/// per job.
pub(super) const DROPPED_INDEXES: &str = "
DROP INDEX IF EXISTS jobs_key;
DROP INDEX IF EXISTS jobs_state_principal;
";

/// Version 2 to 3: sharded jobs (crate::shard): a shard's parent and index, a parent's shard
/// count and closing shard.
pub(super) const TO_V3: &str = "
ALTER TABLE jobs ADD COLUMN parent TEXT;
ALTER TABLE jobs ADD COLUMN shard_index INTEGER;
ALTER TABLE jobs ADD COLUMN shards INTEGER;
ALTER TABLE jobs ADD COLUMN closed_by TEXT;
";

/// Indexes of the version-3 columns: a parent's shards in row order.
pub(super) const INDEXES_V3: &str = "
CREATE INDEX IF NOT EXISTS jobs_parent ON jobs(parent, shard_index) WHERE parent IS NOT NULL;
";

/// Version 3 to 4: a sharded job's result kept as a manifest over its shards' results
/// (crate::shard::result): `results.shards` is their count (NULL: the body is the whole
/// result).
pub(super) const TO_V4: &str = "
ALTER TABLE results ADD COLUMN shards INTEGER;
";
