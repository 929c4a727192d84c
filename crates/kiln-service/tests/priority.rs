//! Priorities and queue timeouts, in both stores (SQLite always; PostgreSQL with
//! `KILN_TEST_PG_URL`, SKIP without it, a failure with `KILN_REQUIRE_PG=1`): higher priority
//! is claimed first within a batch key and heads its principal's queue, FIFO within a
//! priority, fairness between principals unchanged; a queued job past its queue timeout
//! fails as `expired` (never claimed); a version-1 SQLite file is migrated in place.
#![allow(clippy::unwrap_used)]

mod pg_support;

use kiln_service::store::*;
use std::sync::Arc;
use std::time::Duration;

const LEASE: Duration = Duration::from_secs(30);

fn job(id: &str, principal: &str, priority: i32, queue_until_ms: Option<i64>) -> NewJob {
    NewJob {
        id: id.into(),
        kind: "price".into(),
        batch_key: format!("{principal}|k"),
        needs_gpu: false,
        principal: principal.into(),
        idempotency_key: None,
        request_hash: "h".into(),
        task: "{}".into(),
        elements: 1,
        max_attempts: 2,
        deadline_ms: None,
        priority,
        queue_until_ms,
        created_ms: now_ms(),
    }
}

fn ids(c: &[ClaimedJob]) -> Vec<&str> {
    c.iter().map(|j| j.id.as_str()).collect()
}

async fn priority_order(s: &dyn JobStore) {
    for (id, p) in [("j_1", 0), ("j_2", 5), ("j_3", 0), ("j_4", 5), ("j_5", -3)] {
        s.insert(job(id, "alice", p, None)).await.unwrap();
    }
    // a batch takes the highest priority first, FIFO within one
    let c = s.claim("n/0", false, Some("alice|k"), 3, LEASE).await.unwrap();
    assert_eq!(ids(&c), ["j_2", "j_4", "j_1"]);
    // an unbatched slot's head is the highest-priority job too
    s.insert(job("j_6", "alice", 9, None)).await.unwrap();
    let c = s
        .claim_head("n/1", false, 0, ClaimLimit::ONE, LEASE)
        .await
        .unwrap();
    assert_eq!(ids(&c), ["j_6"]);
    assert_eq!(s.get("j_6").await.unwrap().unwrap().priority, 9);
    // fairness first: bob (no slot held) goes before alice's high-priority work
    s.insert(job("j_7", "alice", 100, None)).await.unwrap();
    s.insert(job("b_1", "bob", -100, None)).await.unwrap();
    let h = s.head(false, 0).await.unwrap().unwrap();
    assert_eq!(h.batch_key, "bob|k");
    let c = s
        .claim_head("n/2", false, 0, ClaimLimit::ONE, LEASE)
        .await
        .unwrap();
    assert_eq!(ids(&c), ["b_1"]);
    let c = s
        .claim_head("n/3", false, 0, ClaimLimit::ONE, LEASE)
        .await
        .unwrap();
    assert_eq!(ids(&c), ["j_7"]);
    let c = s.claim("n/4", false, None, 10, LEASE).await.unwrap();
    assert_eq!(ids(&c), ["j_3", "j_5"]);
}

async fn queue_timeouts(s: &dyn JobStore) {
    let now = now_ms();
    s.insert(job("q_late", "alice", 0, Some(now - 1))).await.unwrap();
    s.insert(job("q_soon", "alice", 0, Some(now + 60_000)))
        .await
        .unwrap();
    s.insert(job("q_none", "alice", 0, None)).await.unwrap();
    let gone = s.expire_queued().await.unwrap();
    assert_eq!(gone.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), ["q_late"]);
    assert_eq!(
        (gone[0].kind.as_str(), gone[0].principal.as_str()),
        ("price", "alice")
    );
    let j = s.get("q_late").await.unwrap().unwrap();
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.error.as_ref().map(|e| e.0.as_str()), Some(EXPIRED.0));
    assert!(j.finished_ms.is_some() && j.started_ms.is_none(), "it never ran");
    // a second sweep finds nothing; the others stay queued and keep their timeout
    assert!(s.expire_queued().await.unwrap().is_empty());
    let c = s.claim("n/0", false, None, 10, LEASE).await.unwrap();
    assert_eq!(ids(&c), ["q_soon", "q_none"]);
    assert_eq!(c[0].queue_until_ms, Some(now + 60_000));
    assert_eq!(c[1].queue_until_ms, None);
}

fn sqlite() -> (tempfile::TempDir, Arc<dyn JobStore>) {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path(), false).unwrap();
    (dir, Arc::new(s))
}

async fn pg(name: &str) -> Option<Arc<dyn JobStore>> {
    let admin = pg_support::admin_url(name)?;
    let url = pg_support::fresh_db(&admin, name).await;
    Some(Arc::new(
        PgStore::connect(&url, PgOptions::default()).await.unwrap(),
    ))
}

#[tokio::test]
async fn sqlite_claims_higher_priority_first_within_fairness() {
    let (_d, s) = sqlite();
    priority_order(&*s).await;
}

#[tokio::test]
async fn sqlite_queued_jobs_past_their_timeout_expire() {
    let (_d, s) = sqlite();
    queue_timeouts(&*s).await;
}

#[tokio::test]
async fn pg_claims_higher_priority_first_within_fairness() {
    if let Some(s) = pg("prio_order").await {
        priority_order(&*s).await;
        s.close().await.unwrap();
    }
}

#[tokio::test]
async fn pg_queued_jobs_past_their_timeout_expire() {
    if let Some(s) = pg("prio_expire").await {
        queue_timeouts(&*s).await;
        s.close().await.unwrap();
    }
}

/// A file written by a version-1 store (no priority, queue-timeout or shard columns) opens,
/// is migrated to the current version (4) in place, and its jobs read back with priority 0
/// and no parent.
#[tokio::test]
async fn sqlite_version_1_files_are_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.sqlite3");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES('schema_version', '1');
             CREATE TABLE jobs(
               seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
               batch_key TEXT NOT NULL, needs_gpu INTEGER NOT NULL, principal TEXT NOT NULL,
               idem_key TEXT, request_hash TEXT NOT NULL, task TEXT NOT NULL,
               elements INTEGER NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
               max_attempts INTEGER NOT NULL, deadline_ms INTEGER, created_ms INTEGER NOT NULL,
               started_ms INTEGER, finished_ms INTEGER, lease_owner TEXT, lease_until_ms INTEGER,
               error_code TEXT, error_message TEXT);
             INSERT INTO jobs(id, kind, batch_key, needs_gpu, principal, request_hash, task,
               elements, state, max_attempts, created_ms)
               VALUES('j_old', 'price', 'a|k', 0, 'a', 'h', '{}', 1, 'queued', 2, 1);",
        )
        .unwrap();
    }
    let s = SqliteStore::open(dir.path(), false).unwrap();
    let j = s.get("j_old").await.unwrap().unwrap();
    assert_eq!(
        (j.priority, j.queue_until_ms, j.state),
        (0, None, JobState::Queued)
    );
    s.insert(job("j_new", "a", 7, None)).await.unwrap();
    let c = s.claim("n/0", false, None, 2, LEASE).await.unwrap();
    assert_eq!(ids(&c), ["j_new", "j_old"]);
    drop(s);
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: String = c
        .query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(v, "4");
    let shard_cols: (Option<String>, Option<i64>, Option<i64>, Option<String>) = c
        .query_row(
            "SELECT parent, shard_index, shards, closed_by FROM jobs WHERE id = 'j_old'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(shard_cols, (None, None, None, None));
}

/// A version-3 file (results without the manifest column) is migrated to version 4 in
/// place; its results read back whole (no manifest).
#[tokio::test]
async fn sqlite_version_3_files_are_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.sqlite3");
    {
        let s = SqliteStore::open(dir.path(), false).unwrap();
        s.insert(job("j_old", "a", 0, None)).await.unwrap();
        let c = s.claim("n/0", false, None, 1, LEASE).await.unwrap();
        let done = Outcome::Succeeded {
            result: "{\"x\":1}".into(),
            blobs: Vec::new(),
        };
        assert!(s.finish(&c[0].id, "n/0", done).await.unwrap());
        s.close().await.unwrap();
    }
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "ALTER TABLE results DROP COLUMN shards;
             UPDATE meta SET value = '3' WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    let s = SqliteStore::open(dir.path(), false).unwrap();
    let j = s.get("j_old").await.unwrap().unwrap();
    assert_eq!((j.result.as_deref(), j.result_shards), (Some("{\"x\":1}"), None));
    s.close().await.unwrap();
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: String = c
        .query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(v, "4");
    let n: i64 = c
        .query_row(
            "SELECT count(*) FROM pragma_table_info('results') WHERE name = 'shards'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 1);
}
