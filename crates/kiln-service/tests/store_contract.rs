//! One contract, both stores: every test here is an `async fn(&dyn JobStore)` run once on a
//! SQLite store (a temp dir, `synchronous = FULL`) and once on a PostgreSQL store (a fresh
//! database on `KILN_TEST_PG_URL`; SKIP without it, a failure with `KILN_REQUIRE_PG=1`).
//! What only one store has (PostgreSQL's leases between nodes, SQLite's reopening) stays in
//! tests/pg_store.rs and tests/store.rs.
#![allow(clippy::unwrap_used)]

mod pg_support;

mod store_support;

use kiln_service::store::*;
use store_support::{job, LEASE};

fn ids(list: &[Inserted]) -> Vec<(String, bool)> {
    list.iter()
        .map(|i| match i {
            Inserted::Created(j) => (j.id.clone(), true),
            Inserted::Existing { job, .. } => (job.id.clone(), false),
        })
        .collect()
}

/// A batch is stored in one transaction, in its order (FIFO within a priority follows
/// it), and each job reads back as queued; the created records are what `get` returns.
async fn batch_stores_every_job_in_order(s: &dyn JobStore) {
    let jobs: Vec<NewJob> = (0..50)
        .map(|i| job(&format!("j_b{i:03}"), "K", None, ""))
        .collect();
    let BatchInserted::Stored(list) = s.insert_batch(jobs).await.unwrap() else {
        panic!("stored")
    };
    assert_eq!(list.len(), 50);
    let mut last = i64::MIN;
    for (i, ins) in list.iter().enumerate() {
        let Inserted::Created(j) = ins else {
            panic!("created")
        };
        assert_eq!(j.id, format!("j_b{i:03}"));
        assert!(j.seq > last, "seq follows the batch's order");
        last = j.seq;
        let back = s.get(&j.id).await.unwrap().unwrap();
        assert_eq!(
            (back.seq, back.state, back.attempts, back.created_ms),
            (j.seq, JobState::Queued, 0, j.created_ms)
        );
    }
    let c = s.claim("n1/0", false, Some("K"), 10, LEASE).await.unwrap();
    let got: Vec<&str> = c.iter().map(|j| j.id.as_str()).collect();
    let want: Vec<String> = (0..10).map(|i| format!("j_b{i:03}")).collect();
    assert_eq!(got, want, "claimed oldest first, in the batch's order");
    assert!(s.insert_batch(Vec::new()).await.unwrap().is_stored());
}

/// A batch whose job fails to insert (a duplicate id) stores none of its jobs.
async fn a_failing_batch_stores_nothing(s: &dyn JobStore) {
    s.insert(job("j_dup", "K", None, "h")).await.unwrap();
    let jobs = vec![
        job("j_x1", "K", None, ""),
        job("j_dup", "K", None, ""),
        job("j_x2", "K", None, ""),
    ];
    assert!(s.insert_batch(jobs).await.is_err());
    for id in ["j_x1", "j_x2"] {
        assert!(s.get(id).await.unwrap().is_none(), "{id} was rolled back");
    }
    let c = s.counts().await.unwrap();
    assert_eq!(c.get(JobState::Queued), 1);
}

/// Idempotency keys in a batch: a retried batch returns its jobs; a key naming an earlier
/// job of a different request stores nothing of the batch and names the job.
async fn batch_idempotency(s: &dyn JobStore) {
    let first = vec![
        job("j_i0", "K", Some("k#0"), "h0"),
        job("j_i1", "K", Some("k#1"), "h1"),
    ];
    let BatchInserted::Stored(a) = s.insert_batch(first).await.unwrap() else {
        panic!("stored")
    };
    assert_eq!(ids(&a), [("j_i0".into(), true), ("j_i1".into(), true)]);
    let retry = vec![
        job("j_r0", "K", Some("k#0"), "h0"),
        job("j_r1", "K", Some("k#1"), "h1"),
    ];
    let BatchInserted::Stored(b) = s.insert_batch(retry).await.unwrap() else {
        panic!("stored")
    };
    assert_eq!(ids(&b), [("j_i0".into(), false), ("j_i1".into(), false)]);
    let other = vec![
        job("j_o0", "K", Some("k#9"), "h9"),
        job("j_o1", "K", Some("k#1"), "different"),
    ];
    match s.insert_batch(other).await.unwrap() {
        BatchInserted::Mismatch { index, job } => assert_eq!((index, job.id.as_str()), (1, "j_i1")),
        other => panic!("{other:?}"),
    }
    assert!(
        s.get("j_o0").await.unwrap().is_none(),
        "nothing of the batch stored"
    );
    assert_eq!(s.counts().await.unwrap().get(JobState::Queued), 2);
}

macro_rules! both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            use kiln_service::store::JobStore;
            $(
                #[tokio::test]
                async fn $name() {
                    let dir = tempfile::tempdir().unwrap();
                    let s = kiln_service::store::SqliteStore::open(dir.path(), true).unwrap();
                    super::$name(&s).await;
                    s.close().await.unwrap();
                }
            )*
        }
        mod postgres {
            use kiln_service::store::JobStore;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let test = concat!("store_contract::postgres::", stringify!($name));
                    let Some(admin) = super::pg_support::admin_url(test) else {
                        return;
                    };
                    let url = super::pg_support::fresh_db(&admin, "contract").await;
                    let s = kiln_service::store::PgStore::connect(&url, Default::default())
                        .await
                        .unwrap();
                    super::$name(&s).await;
                    s.close().await.unwrap();
                }
            )*
        }
    };
}

both_stores!(
    batch_stores_every_job_in_order,
    a_failing_batch_stores_nothing,
    batch_idempotency,
);
