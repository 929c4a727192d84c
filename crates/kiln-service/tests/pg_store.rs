//! The PostgreSQL store against a real server (`KILN_TEST_PG_URL`; SKIP without it, a
//! failure with `KILN_REQUIRE_PG=1`): the contract the SQLite store meets (tests/store.rs),
//! plus what sharing adds: migrations applied once by nodes starting together, leases that
//! expire back to the queue with the attempt counted, heartbeats that renew a node's
//! leases, the node registry, LISTEN/NOTIFY events between nodes, and one elected exporter.
#![allow(clippy::unwrap_used)]

mod pg_support;

mod store_support;

use kiln_service::store::*;
use pg_support::*;
use std::sync::Arc;
use std::time::Duration;
use store_support::{job, LEASE};

async fn store(url: &str) -> PgStore {
    PgStore::connect(url, PgOptions::default()).await.unwrap()
}

fn ok() -> Outcome {
    Outcome::Succeeded {
        result: "{\"x\":1}".into(),
        blobs: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_contract_claims_results_retries_cancel() {
    let Some(admin) = admin_url("pg_contract_claims_results_retries_cancel") else {
        return;
    };
    let url = fresh_db(&admin, "contract").await;
    let s = store(&url).await;
    for (id, key) in [("j_a1", "A"), ("j_a2", "A"), ("j_b1", "B"), ("j_a3", "A")] {
        assert!(matches!(
            s.insert(job(id, key, None, "h")).await.unwrap(),
            Inserted::Created(_)
        ));
    }
    let h = s.head(false, 0).await.unwrap().unwrap();
    assert_eq!((h.batch_key.as_str(), h.same_key), ("A", 3));
    let c = s.claim("n1/0", false, Some("A"), 2, LEASE).await.unwrap();
    assert_eq!(
        c.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        ["j_a1", "j_a2"]
    );
    assert!(c.iter().all(|j| j.attempt == 1));
    assert_eq!(s.get("j_a1").await.unwrap().unwrap().state, JobState::Running);
    let mut g = job("j_g", "G", None, "h");
    g.needs_gpu = true;
    s.insert(g).await.unwrap();
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
    assert_eq!(
        s.cancel("j_b1").await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    assert_eq!(
        s.cancel("j_a1").await.unwrap().unwrap().state,
        JobState::Succeeded
    );
    assert!(s.cancel("j_nope").await.unwrap().is_none());
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
    // Shared store: another live node's running job is not an orphan, whatever its prefix.
    assert_eq!(s.requeue_orphans("n9").await.unwrap(), Orphans::default());
    // Shutdown of n1 returns its running job.
    assert_eq!(s.release_node("n1").await.unwrap(), 1);
    assert_eq!(s.get("j_a3").await.unwrap().unwrap().state, JobState::Queued);
    assert!(
        !s.finish("j_a3", "n1/0", ok()).await.unwrap(),
        "the old lease is void"
    );
    let counts = s.counts().await.unwrap();
    assert_eq!(counts.get(JobState::Queued), 2);
    assert_eq!(counts.in_flight_by_principal, vec![("p".to_string(), 2)]);
    s.close().await.unwrap();
    assert!(s.get("j_a1").await.is_err(), "calls fail after close");
    // Reconnect (migrations already applied): everything is still there.
    let s = store(&url).await;
    assert_eq!(s.get("j_a1").await.unwrap().unwrap().state, JobState::Succeeded);
    assert_eq!(s.get("j_a3").await.unwrap().unwrap().state, JobState::Queued);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_contract_idempotency_paging_blobs_expiry() {
    let Some(admin) = admin_url("pg_contract_idempotency_paging_blobs_expiry") else {
        return;
    };
    let url = fresh_db(&admin, "idem").await;
    let s = store(&url).await;
    let dir = tempfile::tempdir().unwrap();
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
    assert!(
        s.insert(job("j_1", "A", None, "h")).await.is_err(),
        "duplicate id"
    );
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
    assert_eq!((seen[0].as_str(), seen[25].as_str()), ("j_p24", "j_1"));
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
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(s.expire(Duration::ZERO, u64::MAX).await.unwrap(), vec![blob_path]);
    assert!(s.get(&c[0].id).await.unwrap().is_none());
    assert!(s.get_blob("b_x").await.unwrap().is_none());
    assert_eq!(s.counts().await.unwrap().get(JobState::Queued), 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_migrations_once_when_nodes_start_together() {
    let Some(admin) = admin_url("pg_migrations_once_when_nodes_start_together") else {
        return;
    };
    let url = fresh_db(&admin, "mig").await;
    let starts: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PgStore::connect(&url, PgOptions::default()).await })
        })
        .collect();
    for s in starts {
        s.await.unwrap().unwrap();
    }
    let c = client(&url).await;
    let rows = c
        .query("SELECT version FROM kiln_schema_version ORDER BY version", &[])
        .await
        .unwrap();
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, (1..=PG_SCHEMA_VERSION).collect::<Vec<_>>());
    // A database newer than this build is refused with a clear message.
    c.execute(
        "INSERT INTO kiln_schema_version(version, description) VALUES ($1, 'future')",
        &[&(PG_SCHEMA_VERSION + 1)],
    )
    .await
    .unwrap();
    let e = PgStore::connect(&url, PgOptions::default()).await.err().unwrap();
    assert!(e.message().contains("upgrade kiln"), "{e}");
    // Bad URLs fail before connecting.
    assert!(parse_pg_url("postgres://h/db?sslmode=require").is_err());
    assert!(parse_pg_url("postgres://[").is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_expired_leases_requeue_and_heartbeats_renew() {
    let Some(admin) = admin_url("pg_expired_leases_requeue_and_heartbeats_renew") else {
        return;
    };
    let url = fresh_db(&admin, "lease").await;
    let a = store(&url).await;
    let b = store(&url).await;
    for i in 0..4 {
        a.insert(job(&format!("j_{i}"), "A", None, "h")).await.unwrap();
    }
    // The lease is 6 heartbeats long, so a heartbeat delayed by a loaded machine still
    // renews it in time; the dead node's lease is checked once it has surely run out.
    let short = Duration::from_millis(1500);
    let beat = Duration::from_millis(250);
    // Node na holds two jobs and keeps its heartbeat; node nd holds two and dies.
    let held = a.claim("na/0", false, None, 2, short).await.unwrap();
    let dead = b.claim("nd/0", false, None, 2, short).await.unwrap();
    let claimed = std::time::Instant::now();
    assert_eq!((held.len(), dead.len()), (2, 2));
    let info = NodeInfo {
        id: "na".into(),
        hostname: hostname(),
        devices: vec!["cpu".into()],
        started_ms: now_ms(),
        version: "test".into(),
    };
    loop {
        a.node_heartbeat(&info, short).await.unwrap();
        if claimed.elapsed() > short + Duration::from_millis(500) {
            break;
        }
        tokio::time::sleep(beat).await;
    }
    // Past nd's lease: its jobs expired, na's were renewed by its heartbeat.
    assert_eq!(b.requeue_orphans("nb").await.unwrap().requeued, 2);
    for j in &dead {
        let r = a.get(&j.id).await.unwrap().unwrap();
        assert_eq!(
            (r.state, r.attempts),
            (JobState::Queued, 1),
            "attempt counted once"
        );
    }
    for j in &held {
        assert_eq!(a.get(&j.id).await.unwrap().unwrap().state, JobState::Running);
    }
    let again = b.claim("nb/0", false, None, 5, LEASE).await.unwrap();
    let mut ids: Vec<_> = again.iter().map(|j| (j.id.clone(), j.attempt)).collect();
    ids.sort();
    let mut want: Vec<_> = dead.iter().map(|j| (j.id.clone(), 2)).collect();
    want.sort();
    assert_eq!(ids, want, "the dead node's jobs, on their second attempt");
    assert!(
        !a.finish(&dead[0].id, "nd/0", ok()).await.unwrap(),
        "the dead lease is void"
    );
    assert!(b.finish(&dead[0].id, "nb/0", ok()).await.unwrap());
    // The registry.
    let nodes = b.nodes().await.unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!((nodes[0].id.as_str(), nodes[0].alive), ("na", true));
    assert_eq!(nodes[0].devices, vec!["cpu".to_string()]);
    b.node_gone("na").await.unwrap();
    assert!(a.nodes().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_notifications_reach_other_nodes_and_one_node_exports() {
    let Some(admin) = admin_url("pg_notifications_reach_other_nodes_and_one_node_exports") else {
        return;
    };
    let url = fresh_db(&admin, "notify").await;
    let a = store(&url).await;
    let b = store(&url).await;
    let ev: Events = Arc::default();
    b.set_events(ev.clone());
    // The listener connects in the background; it wakes once when it has.
    assert!(
        eventually(10.0, || ev.new_work.load(std::sync::atomic::Ordering::SeqCst)
            >= 1)
        .await,
        "b's listener connected"
    );
    let before = ev.new_work.load(std::sync::atomic::Ordering::SeqCst);
    a.insert(job("j_n", "A", None, "h")).await.unwrap();
    assert!(
        eventually(5.0, || ev.new_work.load(std::sync::atomic::Ordering::SeqCst)
            > before)
        .await,
        "an insert on a wakes b"
    );
    let c = a.claim("na/0", false, None, 1, LEASE).await.unwrap();
    assert!(a.finish(&c[0].id, "na/0", ok()).await.unwrap());
    assert!(
        eventually(5.0, || ev.finished.lock().unwrap().iter().any(|i| i == "j_n")).await,
        "a's finish reaches b's watchers"
    );
    // Exactly one of the two exports the queue gauges; when it goes, the other takes over.
    assert!(eventually(10.0, || a.queue_exporter() ^ b.queue_exporter()).await);
    let (leader, other) = if a.queue_exporter() { (a, b) } else { (b, a) };
    leader.close().await.unwrap();
    drop(leader);
    assert!(
        eventually(10.0, || other.queue_exporter()).await,
        "the other node takes the exporter lock"
    );
}

/// The lease sweep and the heartbeat never wait on a row another transaction holds (an end
/// being stored, which for a sharded job's merge may outlast the lease): the heartbeat
/// renews the node's other leases, the sweep fails the expired job on its last attempt
/// (its end notified to every node) and leaves the held one to a later sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_sweeps_and_heartbeats_skip_rows_held_elsewhere() {
    let Some(admin) = admin_url("pg_sweeps_and_heartbeats_skip_rows_held_elsewhere") else {
        return;
    };
    let url = fresh_db(&admin, "skip").await;
    let a = store(&url).await;
    let b = store(&url).await;
    let ev: Events = Arc::default();
    b.set_events(ev.clone());
    assert!(
        eventually(10.0, || ev.new_work.load(std::sync::atomic::Ordering::SeqCst)
            >= 1)
        .await,
        "b's listener connected"
    );
    for (id, key) in [("j_held", "H"), ("j_mine", "M"), ("j_dead", "D")] {
        let mut j = job(id, key, None, "h");
        j.max_attempts = 1;
        a.insert(j).await.unwrap();
    }
    let short = Duration::from_millis(1);
    for (owner, key) in [("na/0", "H"), ("na/1", "M"), ("nd/0", "D")] {
        assert_eq!(a.claim(owner, false, Some(key), 1, short).await.unwrap().len(), 1);
    }
    tokio::time::sleep(Duration::from_millis(40)).await;
    // another transaction holds j_held's row, as a long end being stored does
    let other = client(&url).await;
    other
        .batch_execute("BEGIN; SELECT 1 FROM kiln_jobs WHERE id = 'j_held' FOR UPDATE")
        .await
        .unwrap();
    let info = NodeInfo {
        id: "na".into(),
        hostname: hostname(),
        devices: vec!["cpu".into()],
        started_ms: now_ms(),
        version: "test".into(),
    };
    let within = Duration::from_secs(5);
    tokio::time::timeout(within, a.node_heartbeat(&info, LEASE))
        .await
        .expect("the heartbeat does not wait on the held row")
        .unwrap();
    let swept = tokio::time::timeout(within, b.requeue_orphans("nb"))
        .await
        .expect("the sweep does not wait on the held row")
        .unwrap();
    let ids: Vec<&str> = swept.failed.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(
        (swept.requeued, ids),
        (0, vec!["j_dead"]),
        "j_mine renewed, j_held skipped"
    );
    assert_eq!(a.get("j_mine").await.unwrap().unwrap().state, JobState::Running);
    let held = a.get("j_held").await.unwrap().unwrap();
    assert_eq!(held.state, JobState::Running, "left to a later sweep");
    assert!(
        eventually(5.0, || ev.finished.lock().unwrap().iter().any(|i| i == "j_dead")).await,
        "the failure reaches every node's watchers"
    );
    // released unchanged (a rolled-back end): its expired lease is swept next time
    other.batch_execute("ROLLBACK").await.unwrap();
    let swept = b.requeue_orphans("nb").await.unwrap();
    let ids: Vec<&str> = swept.failed.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["j_held"]);
    let (code, msg) = a.get("j_held").await.unwrap().unwrap().error.unwrap();
    assert_eq!(
        (code.as_str(), msg.as_str()),
        (
            "lease_expired",
            "lease expired on attempt 1 of 1 (the worker or node stopped responding)"
        )
    );
}
