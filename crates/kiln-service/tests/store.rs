//! The SQLite store's contract (what a PostgreSQL store must also meet): claims by batch
//! key under leases, results stored once and only by the lease holder, retries up to the
//! attempt limit, cancellation, idempotency keys, orphan recovery, paging, expiry, and
//! durability across reopening.
#![allow(clippy::unwrap_used)]

mod store_support;

use kiln_service::store::*;
use std::time::Duration;
use store_support::{job, LEASE};

#[tokio::test]
async fn claims_results_retries_and_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path(), true).unwrap();
    for (id, key) in [("j_a1", "A"), ("j_a2", "A"), ("j_b1", "B"), ("j_a3", "A")] {
        assert!(matches!(
            s.insert(job(id, key, None, "h")).await.unwrap(),
            Inserted::Created(_)
        ));
    }
    let h = s.head(false, 0).await.unwrap().unwrap();
    assert_eq!((h.batch_key.as_str(), h.same_key), ("A", 3));
    // Claim by key, oldest first, at most `max`.
    let c = s.claim("n1/0", false, Some("A"), 2, LEASE).await.unwrap();
    assert_eq!(
        c.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        ["j_a1", "j_a2"]
    );
    assert!(c.iter().all(|j| j.attempt == 1));
    assert_eq!(s.get("j_a1").await.unwrap().unwrap().state, JobState::Running);
    // A GPU-only job is not offered to a CPU worker.
    let mut g = job("j_g", "G", None, "h");
    g.needs_gpu = true;
    s.insert(g).await.unwrap();
    // Results: stored once, by the lease holder only.
    let ok = || Outcome::Succeeded {
        result: "{\"x\":1}".into(),
        blobs: vec![],
    };
    assert!(
        !s.finish("j_a1", "n2/0", ok()).await.unwrap(),
        "not the lease holder"
    );
    assert!(s.finish("j_a1", "n1/0", ok()).await.unwrap());
    assert!(
        !s.finish("j_a1", "n1/0", ok()).await.unwrap(),
        "a second result is refused"
    );
    let j = s.get("j_a1").await.unwrap().unwrap();
    assert_eq!(
        (j.state, j.result.as_deref()),
        (JobState::Succeeded, Some("{\"x\":1}"))
    );
    // Retry: back to the queue, then failed when attempts are used up.
    assert_eq!(
        s.retry("j_a2", "n1/0", "worker_crashed", "boom").await.unwrap(),
        Some(JobState::Queued)
    );
    let c = s.claim("n1/0", false, Some("A"), 5, LEASE).await.unwrap();
    assert_eq!(
        c.iter().map(|j| (j.id.as_str(), j.attempt)).collect::<Vec<_>>(),
        [("j_a2", 2), ("j_a3", 1)]
    );
    assert_eq!(
        s.retry("j_a2", "n1/0", "worker_crashed", "boom").await.unwrap(),
        Some(JobState::Failed)
    );
    let j = s.get("j_a2").await.unwrap().unwrap();
    assert_eq!(j.error, Some(("worker_crashed".into(), "boom".into())));
    // Cancel: a queued job never runs; a terminal one is left alone.
    assert_eq!(
        s.cancel("j_b1").await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    assert_eq!(
        s.cancel("j_a1").await.unwrap().unwrap().state,
        JobState::Succeeded
    );
    assert!(s
        .claim("n1/0", false, Some("B"), 5, LEASE)
        .await
        .unwrap()
        .is_empty());
    assert!(
        s.head(false, 0).await.unwrap().is_none(),
        "only the GPU job is left"
    );
    assert_eq!(s.head(true, 0).await.unwrap().unwrap().batch_key, "G");
    // Orphans: a running job of a gone node goes back to the queue; the live node's stays.
    assert_eq!(s.requeue_orphans("n1").await.unwrap(), Orphans::default());
    assert_eq!(s.requeue_orphans("n9").await.unwrap().requeued, 1);
    assert_eq!(s.get("j_a3").await.unwrap().unwrap().state, JobState::Queued);
    assert!(
        !s.finish("j_a3", "n1/0", ok()).await.unwrap(),
        "the old lease is void"
    );
    let counts = s.counts().await.unwrap();
    assert_eq!(counts.get(JobState::Queued), 2);
    assert_eq!(counts.in_flight_by_principal, vec![("p".to_string(), 2)]);
    s.close().await.unwrap();
    assert!(
        s.get("j_a1").await.is_ok(),
        "reads still work on the read connection"
    );
    assert!(
        s.insert(job("j_late", "A", None, "h")).await.is_err(),
        "writes fail after close"
    );

    // Reopen: everything is still there.
    let s = SqliteStore::open(dir.path(), true).unwrap();
    assert_eq!(s.get("j_a1").await.unwrap().unwrap().state, JobState::Succeeded);
    assert_eq!(s.get("j_a3").await.unwrap().unwrap().state, JobState::Queued);
}

#[tokio::test]
async fn idempotency_paging_blobs_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path(), false).unwrap();
    let first = match s.insert(job("j_1", "A", Some("k"), "h1")).await.unwrap() {
        Inserted::Created(j) => j,
        other => panic!("{other:?}"),
    };
    match s.insert(job("j_2", "A", Some("k"), "h1")).await.unwrap() {
        Inserted::Existing { job, same_request } => assert!(job.id == first.id && same_request),
        other => panic!("{other:?}"),
    }
    match s.insert(job("j_3", "A", Some("k"), "h2")).await.unwrap() {
        Inserted::Existing { same_request, .. } => assert!(!same_request),
        other => panic!("{other:?}"),
    }
    assert!(s.get("j_2").await.unwrap().is_none());
    // A duplicate id fails its own write only.
    assert!(s.insert(job("j_1", "A", None, "h")).await.is_err());
    for i in 0..25 {
        s.insert(job(&format!("j_p{i:02}"), "A", None, "h"))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let p = s
            .list(ListQuery {
                principal: Some("p".into()),
                state: Some(JobState::Queued),
                limit: 10,
                cursor,
            })
            .await
            .unwrap();
        seen.extend(p.jobs.into_iter().map(|j| j.id));
        match p.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen.len(), 26);
    assert_eq!(seen[0], "j_p24", "newest first");
    assert_eq!(seen[25], "j_1");
    // Blobs, and expiry of finished jobs with their result blobs.
    let c = s.claim("n/0", false, None, 1, LEASE).await.unwrap();
    let blob_path = dir.path().join("b_x.npy");
    std::fs::write(&blob_path, b"xx").unwrap();
    let blob = BlobRecord {
        id: "b_x".into(),
        path: blob_path.clone(),
        size: 2,
        sha256: "00".into(),
        format: "npy".into(),
        principal: "p".into(),
        job_id: Some(c[0].id.clone()),
        created_ms: now_ms(),
    };
    let out = Outcome::Succeeded {
        result: "{}".into(),
        blobs: vec![blob.clone()],
    };
    assert!(s.finish(&c[0].id, "n/0", out).await.unwrap());
    assert_eq!(s.get_blob("b_x").await.unwrap(), Some(blob));
    assert!(s
        .expire(Duration::from_secs(3600), u64::MAX)
        .await
        .unwrap()
        .is_empty());
    // results finished within the same millisecond are not yet older than a zero TTL
    std::thread::sleep(Duration::from_millis(20));
    let gone = s.expire(Duration::ZERO, u64::MAX).await.unwrap();
    assert_eq!(gone, vec![blob_path]);
    assert!(s.get(&c[0].id).await.unwrap().is_none());
    assert!(s.get_blob("b_x").await.unwrap().is_none());
    assert_eq!(s.counts().await.unwrap().get(JobState::Queued), 25);
}

/// A restart: the jobs an earlier process left running (leases unexpired, their owner
/// gone) go back to the queue when they have attempts left, and fail as `lease_expired`
/// when the process died on their last attempt, whatever their lease said; the reopened
/// store agrees.
#[tokio::test]
async fn a_restart_fails_the_jobs_left_running_on_their_last_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path(), true).unwrap();
    s.insert(job("j_more", "M", None, "h")).await.unwrap();
    s.insert(job("j_sweep", "S", None, "h")).await.unwrap();
    // j_sweep's first attempt ends in a retry; the process dies during its second, and
    // during j_more's first
    let c = s.claim("old/0", false, Some("S"), 1, LEASE).await.unwrap();
    s.retry(&c[0].id, "old/0", "worker_crashed", "gone")
        .await
        .unwrap();
    assert_eq!(
        s.claim("old/0", false, Some("S"), 1, LEASE).await.unwrap()[0].attempt,
        2
    );
    assert_eq!(
        s.claim("old/1", false, Some("M"), 1, LEASE).await.unwrap()[0].attempt,
        1
    );
    s.close().await.unwrap();
    drop(s);
    let s = SqliteStore::open(dir.path(), true).unwrap();
    let swept = s.requeue_orphans("new").await.unwrap();
    let ids: Vec<&str> = swept.failed.iter().map(|j| j.id.as_str()).collect();
    assert_eq!((swept.requeued, ids), (1, vec!["j_sweep"]));
    let j = s.get("j_sweep").await.unwrap().unwrap();
    assert_eq!((j.state, j.attempts), (JobState::Failed, 2));
    assert_eq!(
        j.error.map(|e| e.1).as_deref(),
        Some("lease expired on attempt 2 of 2 (the worker or node stopped responding)")
    );
    assert_eq!(s.get("j_more").await.unwrap().unwrap().state, JobState::Queued);
    s.close().await.unwrap();
}
