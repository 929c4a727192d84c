//! One contract, both stores: every test here is an `async fn(&dyn JobStore)` run once on a
//! SQLite store (a temp dir, `synchronous = FULL`) and once on a PostgreSQL store (a fresh
//! database on `KILN_TEST_PG_URL`; SKIP without it, a failure with `KILN_REQUIRE_PG=1`).
//! What only one store has (PostgreSQL's leases between nodes, SQLite's reopening) stays in
//! tests/pg_store.rs and tests/store.rs.
#![allow(clippy::unwrap_used)]

mod pg_support;

mod store_support;

mod contract_leases;

mod contract_next;

use contract_leases::{
    a_drain_gives_the_interrupted_attempt_back, a_lease_expiring_on_the_last_attempt_fails_the_job,
    a_shard_lost_on_its_last_attempt_fails_its_parent,
};
use contract_next::{
    a_job_claimed_with_ends_is_swept_when_its_lease_expires, finish_and_claim_stores_the_ends_then_claims,
    finish_and_claim_waits_for_a_batch_to_fill,
};
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

fn ok(result: &str) -> Outcome {
    Outcome::Succeeded {
        result: result.into(),
        blobs: Vec::new(),
    }
}

fn end(id: &str, outcome: Outcome) -> JobEnd {
    JobEnd {
        id: id.into(),
        outcome,
    }
}

fn blob(id: &str, job: &str) -> BlobRecord {
    BlobRecord {
        id: id.into(),
        path: format!("/nonexistent/{id}.npy").into(),
        size: 2,
        sha256: "00".into(),
        format: "npy".into(),
        principal: "p".into(),
        job_id: Some(job.into()),
        created_ms: now_ms(),
    }
}

/// A batch of ends in one call, by `finish`'s rule for each: the ends of jobs still
/// running under the owner are stored (results, errors, blobs); a job cancelled meanwhile,
/// one leased to another owner, one finished already and an id given twice are reported
/// as not stored and left as they were, and the others are stored all the same.
async fn finish_many_stores_each_end_by_the_finish_rule(s: &dyn JobStore) {
    let jobs: Vec<NewJob> = (0..7).map(|i| job(&format!("j_m{i}"), "K", None, "")).collect();
    assert!(s.insert_batch(jobs).await.unwrap().is_stored());
    let mine = s.claim("n1/0", false, Some("K"), 6, LEASE).await.unwrap();
    assert_eq!(mine.len(), 6);
    let theirs = s.claim("n2/0", false, Some("K"), 1, LEASE).await.unwrap();
    assert_eq!(theirs[0].id, "j_m6");
    assert!(s.cancel("j_m1").await.unwrap().is_some());
    assert!(s.finish("j_m2", "n1/0", ok("\"early\"")).await.unwrap());
    let with_blob = Outcome::Succeeded {
        result: "3".into(),
        blobs: vec![blob("b_m3", "j_m3")],
    };
    let lost_blob = Outcome::Succeeded {
        result: "1".into(),
        blobs: vec![blob("b_m1", "j_m1")],
    };
    let failed = Outcome::Failed {
        code: "invalid_input".into(),
        message: "bad strike".into(),
    };
    let ends = vec![
        end("j_m0", ok("0")),
        end("j_m1", lost_blob),
        end("j_m2", ok("2")),
        end("j_m3", with_blob),
        end("j_m4", failed),
        end("j_m6", ok("6")),
        end("j_m0", ok("again")),
        end("j_m5", ok("5")),
    ];
    let stored = s.finish_many("n1/0", ends).await.unwrap();
    assert_eq!(stored, [true, false, false, true, true, false, false, true]);
    let got = |id: &'static str| async move { s.get(id).await.unwrap().unwrap() };
    for (id, want) in [("j_m0", "0"), ("j_m3", "3"), ("j_m5", "5"), ("j_m2", "\"early\"")] {
        let j = got(id).await;
        assert_eq!(
            (j.state, j.result.as_deref()),
            (JobState::Succeeded, Some(want)),
            "{id}"
        );
        assert!(j.finished_ms.is_some(), "{id}");
    }
    let j = got("j_m4").await;
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.error, Some(("invalid_input".into(), "bad strike".into())));
    let j = got("j_m1").await;
    assert_eq!((j.state, j.result), (JobState::Cancelled, None));
    assert_eq!(
        got("j_m6").await.state,
        JobState::Running,
        "another owner's job untouched"
    );
    let b = s.get_blob("b_m3").await.unwrap().expect("the stored end's blob");
    assert_eq!(
        (b.job_id.as_deref(), b.size, b.principal.as_str()),
        (Some("j_m3"), 2, "p")
    );
    assert!(
        s.get_blob("b_m1").await.unwrap().is_none(),
        "a blob of an end not stored"
    );
    // its owner still finishes it; a second batch of the same ends stores nothing again
    assert_eq!(
        s.finish_many("n2/0", vec![end("j_m6", ok("6"))]).await.unwrap(),
        [true]
    );
    let again = s
        .finish_many("n1/0", vec![end("j_m0", ok("x")), end("j_m5", ok("y"))])
        .await
        .unwrap();
    assert_eq!(again, [false, false]);
    assert_eq!(
        got("j_m0").await.result.as_deref(),
        Some("0"),
        "a stored result never changes"
    );
    assert!(s.finish_many("n1/0", Vec::new()).await.unwrap().is_empty());
    let c = s.counts().await.unwrap();
    assert_eq!(
        (
            c.get(JobState::Succeeded),
            c.get(JobState::Failed),
            c.get(JobState::Cancelled)
        ),
        (5, 1, 1)
    );
    assert_eq!(c.get(JobState::Running), 0);
}

/// `claim_head` with a limit: the fair head's job first, then more queued jobs of its batch
/// key (never another token's), at most the limit and at most the slot's share of that
/// key's queue.
async fn claim_head_takes_more_of_the_heads_key(s: &dyn JobStore) {
    let mut jobs: Vec<NewJob> = (0..10).map(|i| job(&format!("j_h{i}"), "A", None, "")).collect();
    for i in 0..2 {
        let mut j = job(&format!("j_q{i}"), "B", None, "");
        j.principal = "q".into();
        jobs.push(j);
    }
    assert!(s.insert_batch(jobs).await.unwrap().is_stored());
    let ids = |c: &[ClaimedJob]| c.iter().map(|j| j.id.clone()).collect::<Vec<_>>();
    let four = ClaimLimit { max: 4, slots: 1 };
    let a = s.claim_head("n/0", false, 0, four, LEASE).await.unwrap();
    assert_eq!(
        ids(&a),
        ["j_h0", "j_h1", "j_h2", "j_h3"],
        "the head, then its key in order"
    );
    // p now holds a slot: q's head comes next, and only q's key (two queued) is taken
    let b = s.claim_head("n/1", false, 0, four, LEASE).await.unwrap();
    assert_eq!(ids(&b), ["j_q0", "j_q1"]);
    // six of A queued, two slots: a share of three
    let share = ClaimLimit { max: 16, slots: 2 };
    let c = s.claim_head("n/2", false, 0, share, LEASE).await.unwrap();
    assert_eq!(ids(&c), ["j_h4", "j_h5", "j_h6"]);
    let one = s
        .claim_head("n/3", false, 0, ClaimLimit::ONE, LEASE)
        .await
        .unwrap();
    assert_eq!(ids(&one), ["j_h7"]);
    let rest = s.claim_head("n/4", false, 0, share, LEASE).await.unwrap();
    assert_eq!(ids(&rest), ["j_h8"], "a share of two queued over two slots");
    assert_eq!(ClaimLimit { max: 8, slots: 3 }.jobs(0), 1, "always the head");
    assert_eq!(ClaimLimit { max: 8, slots: 0 }.jobs(100), 8);
}

/// A parent of `n` shards of 2 rows each (the last of `rows - 2 (n - 1)`), as the API
/// stores a sharded book: its task the plan's descriptor.
fn sharded(id: &str, rows: u64, n: u64, idem: Option<&str>) -> (NewJob, Vec<NewJob>) {
    let mut parent = job(id, &format!("sharded:{id}"), idem, "h");
    parent.task =
        serde_json::json!({"type": "sharded", "rows": rows, "shards": n, "shard_rows": 2}).to_string();
    let shards = (0..n)
        .map(|i| job(&format!("{id}_s{i}"), &format!("solo:{id}_s{i}"), None, "h"))
        .collect();
    (parent, shards)
}

/// Shard `i`'s result: a book's, its prices `10 i + row`, printed as a worker prints them.
fn shard_result(i: u64, rows: u64) -> Outcome {
    let prices: Vec<serde_json::Value> = (0..rows)
        .map(|r| serde_json::json!({"price": (10 * i + r) as f64 + 0.1, "kind": "bs"}))
        .collect();
    Outcome::Succeeded {
        result: serde_json::json!({"method": "mc", "rng": "philox", "prices": prices,
            "stream_offset": 2 * i, "batch_options": rows, "device": format!("d{i}"), "workers": null})
        .to_string(),
        blobs: Vec::new(),
    }
}

/// Claim every queued shard, each under its own owner `n/i`; their ids by owner.
async fn claim_all(s: &dyn JobStore, n: usize) -> Vec<(String, ClaimedJob)> {
    let mut out = Vec::new();
    for i in 0..n {
        let owner = format!("n/{i}");
        let c = s.claim(&owner, false, None, 1, LEASE).await.unwrap();
        assert_eq!(c.len(), 1, "shard {i} claimed");
        out.push((owner, c.into_iter().next().unwrap()));
    }
    assert!(
        s.claim("n/x", false, None, 10, LEASE).await.unwrap().is_empty(),
        "the parent is never claimed"
    );
    out
}

/// A sharded job: parent `running` with its count and no lease, shards queued with their
/// parent; lists show the parent only, in-flight counts it once; the last shard's end (in
/// any order, one of them through `finish_many`) merges the results in row order, closes
/// the parent under its id and drops the shards' results.
async fn a_sharded_job_merges_in_row_order(s: &dyn JobStore) {
    let (parent, shards) = sharded("j_p", 5, 3, None);
    let Inserted::Created(p) = s.insert_sharded(parent, shards).await.unwrap() else {
        panic!("created")
    };
    assert_eq!(p.state, JobState::Running);
    assert_eq!(p.shards.map(|c| c.total), Some(3));
    let back = s.get("j_p").await.unwrap().unwrap();
    assert_eq!((back.state, back.shards), (JobState::Running, p.shards));
    let page = s
        .list(ListQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    let listed: Vec<&str> = page.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(listed, ["j_p"], "shards are not listed");
    let c = s.counts().await.unwrap();
    assert_eq!(
        c.in_flight_by_principal,
        [("p".to_string(), 1)],
        "the job counts once"
    );
    assert_eq!((c.get(JobState::Queued), c.get(JobState::Running)), (3, 1));
    let held = claim_all(s, 3).await;
    for (i, (_, j)) in held.iter().enumerate() {
        assert_eq!(j.id, format!("j_p_s{i}"), "shards in row order");
        assert_eq!(j.parent.as_deref(), Some("j_p"));
    }
    assert_eq!(
        s.requeue_orphans("n/").await.unwrap(),
        Orphans::default(),
        "the parent holds no lease to lose"
    );
    let rows = |i: u64| if i == 2 { 1 } else { 2 };
    assert!(s
        .finish(&held[2].1.id, &held[2].0, shard_result(2, rows(2)))
        .await
        .unwrap());
    assert!(s
        .finish(&held[0].1.id, &held[0].0, shard_result(0, rows(0)))
        .await
        .unwrap());
    let mid = s.get("j_p").await.unwrap().unwrap();
    assert_eq!(mid.state, JobState::Running);
    assert_eq!(mid.shards.unwrap().done, 2);
    let end = JobEnd {
        id: held[1].1.id.clone(),
        outcome: shard_result(1, rows(1)),
    };
    assert_eq!(s.finish_many(&held[1].0, vec![end]).await.unwrap(), [true]);
    let done = s.get("j_p").await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Succeeded);
    assert_eq!(done.closed_by.as_deref(), Some("j_p_s1"));
    assert_eq!(
        done.shards,
        Some(ShardCounts {
            total: 3,
            done: 3,
            failed: 0,
            cancelled: 0
        })
    );
    let v: serde_json::Value = serde_json::from_str(done.result.as_deref().unwrap()).unwrap();
    let prices: Vec<f64> = v["prices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["price"].as_f64().unwrap())
        .collect();
    assert_eq!(prices, [0.1, 1.1, 10.1, 11.1, 20.1]);
    assert_eq!(
        (v["batch_options"].as_u64(), v["shards"].as_u64()),
        (Some(5), Some(3))
    );
    assert_eq!(v["devices"], serde_json::json!(["d0", "d1", "d2"]));
    let shard = s.get("j_p_s0").await.unwrap().unwrap();
    assert_eq!(
        (shard.state, shard.result),
        (JobState::Succeeded, None),
        "merged into the parent"
    );
    assert_eq!(s.counts().await.unwrap().in_flight_by_principal, []);
}

/// A shard's final error fails the parent with it (naming the shard) and cancels the rest;
/// a running sibling's end is then refused. A shard whose attempts run out fails it too.
async fn a_failed_shard_fails_the_parent(s: &dyn JobStore) {
    let (parent, shards) = sharded("j_f", 6, 3, None);
    s.insert_sharded(parent, shards).await.unwrap();
    let held = claim_all(s, 3).await;
    let bad = Outcome::Failed {
        code: "invalid_input".into(),
        message: "row 3".into(),
    };
    assert!(s.finish(&held[1].1.id, &held[1].0, bad).await.unwrap());
    let p = s.get("j_f").await.unwrap().unwrap();
    assert_eq!(p.state, JobState::Failed);
    assert_eq!(p.closed_by.as_deref(), Some("j_f_s1"));
    let (code, msg) = p.error.clone().unwrap();
    assert_eq!(code, "invalid_input");
    assert!(msg.contains("j_f_s1") && msg.contains("row 3"), "{msg}");
    assert_eq!(
        p.shards,
        Some(ShardCounts {
            total: 3,
            done: 0,
            failed: 1,
            cancelled: 2
        })
    );
    assert!(!s
        .finish(&held[0].1.id, &held[0].0, shard_result(0, 2))
        .await
        .unwrap());

    let (parent, shards) = sharded("j_r", 2, 1, None);
    s.insert_sharded(parent, shards).await.unwrap();
    for attempt in 1..=2 {
        let c = s.claim("n/r", false, None, 1, LEASE).await.unwrap();
        assert_eq!(c[0].attempt, attempt);
        let st = s.retry(&c[0].id, "n/r", "worker_crashed", "gone").await.unwrap();
        let want = if attempt == 2 {
            JobState::Failed
        } else {
            JobState::Queued
        };
        assert_eq!(st, Some(want));
    }
    let p = s.get("j_r").await.unwrap().unwrap();
    assert_eq!(
        (p.state, p.error.map(|e| e.0)),
        (JobState::Failed, Some("worker_crashed".into()))
    );
}

/// Cancelling a shard (or the parent) cancels the parent and every unfinished shard, and
/// answers with the parent.
async fn cancelling_a_shard_cancels_its_job(s: &dyn JobStore) {
    let (parent, shards) = sharded("j_c", 6, 3, None);
    s.insert_sharded(parent, shards).await.unwrap();
    let c = s.claim("n/c", false, None, 1, LEASE).await.unwrap();
    assert!(s.finish(&c[0].id, "n/c", shard_result(0, 2)).await.unwrap());
    let p = s.cancel("j_c_s2").await.unwrap().unwrap();
    assert_eq!((p.id.as_str(), p.state), ("j_c", JobState::Cancelled));
    assert_eq!(
        p.shards,
        Some(ShardCounts {
            total: 3,
            done: 1,
            failed: 0,
            cancelled: 2
        })
    );
    assert!(s.claim("n/c", false, None, 10, LEASE).await.unwrap().is_empty());
}

/// A parent's idempotency key returns the earlier job and stores no second set of shards.
async fn a_sharded_job_is_idempotent(s: &dyn JobStore) {
    let (parent, shards) = sharded("j_k", 4, 2, Some("key"));
    assert!(matches!(
        s.insert_sharded(parent, shards).await.unwrap(),
        Inserted::Created(_)
    ));
    let (mut again, shards) = sharded("j_k2", 4, 2, Some("key"));
    again.request_hash = "h".into();
    match s.insert_sharded(again, shards).await.unwrap() {
        Inserted::Existing { job, same_request } => {
            assert_eq!(job.id, "j_k");
            assert!(same_request);
        }
        Inserted::Created(_) => panic!("a second job under one key"),
    }
    assert!(
        s.get("j_k2_s0").await.unwrap().is_none(),
        "no shard of the retry stored"
    );
    assert_eq!(s.counts().await.unwrap().get(JobState::Queued), 2);
}

/// The last two shards' ends at once (two nodes): exactly one of them merges.
async fn concurrent_last_ends_merge_once(s: &dyn JobStore) {
    let (parent, shards) = sharded("j_m", 4, 2, None);
    s.insert_sharded(parent, shards).await.unwrap();
    let held = claim_all(s, 2).await;
    let (a, b) = tokio::join!(
        s.finish(&held[0].1.id, &held[0].0, shard_result(0, 2)),
        s.finish(&held[1].1.id, &held[1].0, shard_result(1, 2)),
    );
    assert!(a.unwrap() && b.unwrap());
    let p = s.get("j_m").await.unwrap().unwrap();
    assert_eq!(p.state, JobState::Succeeded);
    assert!(matches!(p.closed_by.as_deref(), Some("j_m_s0" | "j_m_s1")));
    let v: serde_json::Value = serde_json::from_str(p.result.as_deref().unwrap()).unwrap();
    assert_eq!(v["prices"].as_array().unwrap().len(), 4);
}

/// [`sharded`] whose task sets `merge_max_bytes` to 0: its result is kept as a manifest.
fn sharded_manifest(id: &str, rows: u64, n: u64, idem: Option<&str>) -> (NewJob, Vec<NewJob>) {
    let (mut parent, shards) = sharded(id, rows, n, idem);
    parent.task = serde_json::json!({"type": "sharded", "rows": rows, "shards": n, "shard_rows": 2,
        "merge_max_bytes": 0})
    .to_string();
    (parent, shards)
}

fn result_text(o: &Outcome) -> String {
    match o {
        Outcome::Succeeded { result, .. } => result.clone(),
        Outcome::Failed { .. } => panic!("a result"),
    }
}

/// Past its `merge_max_bytes` a sharded job's last end stores a manifest: the parent's
/// result is the merged result's head, marked with its shard count, and each shard keeps
/// its result, readable by index; the head and the shards' price rows join to exactly the
/// text the in-store merge makes of the same results. An idempotent resubmission answers
/// the same manifest. A shard's result that is not its rows' fails the parent.
async fn a_large_sharded_job_keeps_a_manifest(s: &dyn JobStore) {
    let (parent, shards) = sharded_manifest("j_l", 5, 3, Some("big"));
    s.insert_sharded(parent, shards).await.unwrap();
    let held = claim_all(s, 3).await;
    let rows = |i: u64| if i == 2 { 1 } else { 2 };
    let results: Vec<Outcome> = (0..3).map(|i| shard_result(i, rows(i))).collect();
    for i in [1usize, 2, 0] {
        assert!(s
            .finish(&held[i].1.id, &held[i].0, results[i].clone())
            .await
            .unwrap());
    }
    let p = s.get("j_l").await.unwrap().unwrap();
    assert_eq!(p.state, JobState::Succeeded);
    assert_eq!(p.closed_by.as_deref(), Some("j_l_s0"));
    assert_eq!(p.result_shards, Some(3));
    let head = p.result.unwrap();
    let v: serde_json::Value = serde_json::from_str(&head).unwrap();
    assert!(v.get("prices").is_none(), "{head}");
    assert_eq!(v["devices"], serde_json::json!(["d0", "d1", "d2"]));
    let texts: Vec<String> = results.iter().map(result_text).collect();
    let mut joined = Vec::new();
    for (i, want) in texts.iter().enumerate() {
        let got = s.shard_result("j_l", i as u64).await.unwrap();
        assert_eq!(got.as_ref(), Some(want), "shard {i} keeps its result");
        let got = got.unwrap();
        let span = kiln_service::shard::result::rows(&got).unwrap();
        joined.push(got[span].to_string());
    }
    assert_eq!(s.shard_result("j_l", 3).await.unwrap(), None);
    assert_eq!(s.shard_result("j_none", 0).await.unwrap(), None);
    let task: kiln_service::shard::ParentTask =
        serde_json::from_str(r#"{"type": "sharded", "rows": 5, "shards": 3, "shard_rows": 2}"#).unwrap();
    let merged = kiln_service::shard::merge(&task, &texts).unwrap();
    let streamed = format!(
        "{}{}{}",
        kiln_service::shard::result::OPEN,
        joined.join(","),
        kiln_service::shard::result::close(&head).unwrap()
    );
    assert_eq!(streamed, merged, "the manifest's bytes are the merge's");
    let (parent, shards) = sharded_manifest("j_l2", 5, 3, Some("big"));
    let Inserted::Existing { job, .. } = s.insert_sharded(parent, shards).await.unwrap() else {
        panic!("the earlier job")
    };
    assert_eq!((job.id.as_str(), job.result_shards), ("j_l", Some(3)));

    let (parent, shards) = sharded_manifest("j_w", 4, 2, None);
    s.insert_sharded(parent, shards).await.unwrap();
    let held = claim_all(s, 2).await;
    assert!(s
        .finish(&held[0].1.id, &held[0].0, shard_result(0, 2))
        .await
        .unwrap());
    assert!(s
        .finish(&held[1].1.id, &held[1].0, shard_result(1, 1))
        .await
        .unwrap());
    let p = s.get("j_w").await.unwrap().unwrap();
    assert_eq!(p.state, JobState::Failed);
    let (code, message) = p.error.unwrap();
    assert_eq!(code, "shard_merge_failed");
    assert!(
        message.contains("shard 1 has 1 prices for 2 options"),
        "{message}"
    );
    assert_eq!((p.result, p.result_shards), (None, None));
}

/// Shards are deleted with their parent, never alone: the results sweep keeps a finished
/// shard of a running parent, and deletes a finished parent with its shards and their
/// results; the per-token byte budget counts a parent with its shards' results and
/// evicts them together.
async fn shards_are_deleted_with_their_parent(s: &dyn JobStore) {
    let zero = std::time::Duration::ZERO;
    let (parent, shards) = sharded_manifest("j_e", 4, 2, None);
    s.insert_sharded(parent, shards).await.unwrap();
    let held = claim_all(s, 2).await;
    assert!(s
        .finish(&held[0].1.id, &held[0].0, shard_result(0, 2))
        .await
        .unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    s.expire(zero, u64::MAX).await.unwrap();
    assert!(
        s.get("j_e_s0").await.unwrap().is_some(),
        "a done shard of a running parent stays"
    );
    assert!(s.shard_result("j_e", 0).await.unwrap().is_some());
    assert!(s
        .finish(&held[1].1.id, &held[1].0, shard_result(1, 2))
        .await
        .unwrap());
    assert_eq!(s.get("j_e").await.unwrap().unwrap().result_shards, Some(2));
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    s.expire(zero, u64::MAX).await.unwrap();
    for id in ["j_e", "j_e_s0", "j_e_s1"] {
        assert!(s.get(id).await.unwrap().is_none(), "{id} deleted");
    }
    assert_eq!(s.shard_result("j_e", 0).await.unwrap(), None);

    // the byte budget: the parent's own result is small, its shards' are not
    let (parent, shards) = sharded_manifest("j_c", 4, 2, None);
    s.insert_sharded(parent, shards).await.unwrap();
    let held = claim_all(s, 2).await;
    for (i, (owner, j)) in held.iter().enumerate() {
        assert!(s.finish(&j.id, owner, shard_result(i as u64, 2)).await.unwrap());
    }
    let head = s.get("j_c").await.unwrap().unwrap().result.unwrap();
    s.expire(std::time::Duration::from_secs(3600), head.len() as u64 + 1)
        .await
        .unwrap();
    for id in ["j_c", "j_c_s0", "j_c_s1"] {
        assert!(s.get(id).await.unwrap().is_none(), "{id} evicted");
    }
    let c = s.counts().await.unwrap();
    assert!(c.by_state.iter().all(|(_, n)| *n == 0), "{c:?}");
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
    finish_many_stores_each_end_by_the_finish_rule,
    claim_head_takes_more_of_the_heads_key,
    a_sharded_job_merges_in_row_order,
    a_failed_shard_fails_the_parent,
    cancelling_a_shard_cancels_its_job,
    a_sharded_job_is_idempotent,
    concurrent_last_ends_merge_once,
    a_large_sharded_job_keeps_a_manifest,
    shards_are_deleted_with_their_parent,
    a_lease_expiring_on_the_last_attempt_fails_the_job,
    a_shard_lost_on_its_last_attempt_fails_its_parent,
    a_drain_gives_the_interrupted_attempt_back,
    finish_and_claim_stores_the_ends_then_claims,
    finish_and_claim_waits_for_a_batch_to_fill,
    a_job_claimed_with_ends_is_swept_when_its_lease_expires,
);
