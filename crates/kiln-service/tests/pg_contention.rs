//! Two nodes (two stores, each with its own pool) claiming from one PostgreSQL queue under
//! contention never hold the same job at once: every claim is checked against a shared
//! set of jobs in hand, and concurrent claims are counted to show the contention was real.
//! A third part lets one node's leases lapse mid-work: the other node takes those jobs, and
//! the first node's late results are refused, so each job still ends once.
#![allow(clippy::unwrap_used)]

mod pg_support;

use kiln_service::store::*;
use pg_support::*;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn job(i: usize) -> NewJob {
    NewJob {
        id: format!("j_{i:05}"),
        kind: "price".into(),
        batch_key: format!("k{}", i % 3),
        needs_gpu: false,
        principal: "p".into(),
        idempotency_key: None,
        request_hash: "h".into(),
        task: "{}".into(),
        elements: 1,
        max_attempts: 5,
        deadline_ms: None,
        priority: 0,
        queue_until_ms: None,
        created_ms: now_ms(),
    }
}

#[derive(Default)]
struct Book {
    in_hand: Mutex<HashSet<String>>,
    overlaps: AtomicU64,
    claiming: AtomicUsize,
    max_claiming: AtomicUsize,
    claims_by_node: Mutex<HashMap<String, u64>>,
    finished: Mutex<HashMap<String, u32>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pg_two_nodes_never_hold_one_job_at_once() {
    let Some(admin) = admin_url("pg_two_nodes_never_hold_one_job_at_once") else {
        return;
    };
    let url = fresh_db(&admin, "contention").await;
    const N: usize = 1500;
    let nodes: Vec<Arc<PgStore>> = vec![
        Arc::new(PgStore::connect(&url, PgOptions::default()).await.unwrap()),
        Arc::new(PgStore::connect(&url, PgOptions::default()).await.unwrap()),
    ];
    for chunk in (0..N).collect::<Vec<_>>().chunks(100) {
        let ins: Vec<_> = chunk
            .iter()
            .map(|&i| {
                let s = nodes[i % 2].clone();
                tokio::spawn(async move { s.insert(job(i)).await })
            })
            .collect();
        for h in ins {
            h.await.unwrap().unwrap();
        }
    }
    let book = Arc::new(Book::default());
    let lease = Duration::from_secs(30);
    // Eight claimers per node, batches of 1..=4 with and without a batch key.
    let mut tasks = Vec::new();
    for (n, store) in nodes.iter().enumerate() {
        for w in 0..8usize {
            let (store, book) = (store.clone(), book.clone());
            tasks.push(tokio::spawn(async move {
                let owner = format!("n{n}/{w}");
                let mut empty = 0;
                while empty < 3 {
                    let key = (w % 2 == 0).then(|| format!("k{}", w % 3));
                    let now = book.claiming.fetch_add(1, Ordering::SeqCst) + 1;
                    book.max_claiming.fetch_max(now, Ordering::SeqCst);
                    let got = store
                        .claim(&owner, false, key.as_deref(), 1 + w % 4, lease)
                        .await
                        .unwrap();
                    book.claiming.fetch_sub(1, Ordering::SeqCst);
                    if got.is_empty() {
                        // Rows locked by other claimers are skipped, not waited for: they
                        // are being claimed, so an empty answer means nothing is left here.
                        empty += 1;
                        tokio::task::yield_now().await;
                        continue;
                    }
                    empty = 0;
                    *book
                        .claims_by_node
                        .lock()
                        .unwrap()
                        .entry(format!("n{n}"))
                        .or_default() += got.len() as u64;
                    {
                        let mut h = book.in_hand.lock().unwrap();
                        for j in &got {
                            if !h.insert(j.id.clone()) {
                                book.overlaps.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    {
                        let mut h = book.in_hand.lock().unwrap();
                        for j in &got {
                            h.remove(&j.id);
                        }
                    }
                    for j in &got {
                        let out = Outcome::Succeeded {
                            result: format!("{{\"by\":\"{owner}\"}}"),
                            blobs: vec![],
                        };
                        if store.finish(&j.id, &owner, out).await.unwrap() {
                            *book.finished.lock().unwrap().entry(j.id.clone()).or_default() += 1;
                        }
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let by_node = book.claims_by_node.lock().unwrap().clone();
    println!(
        "claims by node {by_node:?}; at most {} claims in flight at once",
        book.max_claiming.load(Ordering::SeqCst)
    );
    assert_eq!(
        book.overlaps.load(Ordering::SeqCst),
        0,
        "a job was held twice at once"
    );
    assert!(
        book.max_claiming.load(Ordering::SeqCst) >= 4,
        "claims ran concurrently"
    );
    assert!(
        by_node.values().all(|n| *n > 0) && by_node.len() == 2,
        "both nodes claimed"
    );
    assert_eq!(by_node.values().sum::<u64>(), N as u64, "each job claimed once");
    let finished = book.finished.lock().unwrap().clone();
    assert_eq!(finished.len(), N);
    assert!(finished.values().all(|n| *n == 1));
    let c = client(&url).await;
    let row = c
        .query_one(
            "SELECT count(*) FILTER (WHERE state = 'succeeded'), count(*), \
             (SELECT count(*) FROM kiln_results), max(attempts) FROM kiln_jobs",
            &[],
        )
        .await
        .unwrap();
    let (ok, all, results, max_attempts): (i64, i64, i64, i32) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(
        (ok, all, results, max_attempts),
        (N as i64, N as i64, N as i64, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_lapsed_lease_moves_the_job_and_voids_the_late_result() {
    let Some(admin) = admin_url("pg_lapsed_lease_moves_the_job_and_voids_the_late_result") else {
        return;
    };
    let url = fresh_db(&admin, "lapse").await;
    let a = PgStore::connect(&url, PgOptions::default()).await.unwrap();
    let b = PgStore::connect(&url, PgOptions::default()).await.unwrap();
    for i in 0..20 {
        a.insert(job(i)).await.unwrap();
    }
    let slow = a
        .claim("na/0", false, None, 20, Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(slow.len(), 20);
    assert!(b
        .claim("nb/0", false, None, 20, Duration::from_secs(30))
        .await
        .unwrap()
        .is_empty());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(b.requeue_orphans("nb").await.unwrap().requeued, 20);
    let moved = b
        .claim("nb/0", false, None, 20, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(moved.len(), 20);
    assert!(moved.iter().all(|j| j.attempt == 2));
    let ok = || Outcome::Succeeded {
        result: "{}".into(),
        blobs: vec![],
    };
    for j in &slow {
        assert!(
            !a.finish(&j.id, "na/0", ok()).await.unwrap(),
            "late result refused"
        );
        assert!(a
            .renew("na/0", std::slice::from_ref(&j.id), Duration::from_secs(30))
            .await
            .is_ok());
    }
    for j in &moved {
        assert!(b.finish(&j.id, "nb/0", ok()).await.unwrap());
    }
    let c = client(&url).await;
    let n: i64 = c
        .query_one("SELECT count(*) FROM kiln_results", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 20);
}
