//! Jobs split into shards (crate::shard) on one node over SQLite: a book over
//! `sharding.min_rows` is stored as a parent and its shards, the shards are claimed and run
//! by several workers at once (`exec::run_batch` on CPU runtimes, what `kiln worker`
//! processes do with a batch), and the parent's merged prices are the bits of the same job
//! run unsharded: a mixed Monte Carlo book (Black-Scholes and Heston rows), an analytic
//! one, and a plain Black-Scholes book (the batched path when unsharded). A worker lost
//! midway (its shards re-queued by the start-up recovery, its late results refused) changes
//! no bit; a cancel cancels every shard; a shard that fails fails the parent.
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln::Runtime;
use kiln_service::api::AppState;
use kiln_service::config::ServiceConfig;
use kiln_service::exec::{run_batch, ExecOptions};
use kiln_service::protocol::{WorkItem, WorkOutcome};
use kiln_service::shard::Sharding;
use kiln_service::store::{ClaimedJob, Outcome};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// 20 rows a book, 3 a shard: 7 shards, the last of 2.
const ROWS: usize = 20;
const SHARD_ROWS: u64 = 3;

fn state(dir: &std::path::Path, sharded: bool) -> Arc<AppState> {
    state_merging(dir, sharded, Sharding::default().merge_max_bytes)
}

/// [`state`] with `sharding.merge_max_bytes` = `merge_max_bytes`: books whose shards'
/// results take more are kept as manifests.
fn state_merging(dir: &std::path::Path, sharded: bool, merge_max_bytes: u64) -> Arc<AppState> {
    let cfg = ServiceConfig {
        sharding: if sharded {
            Sharding {
                min_rows: 10,
                shard_rows: SHARD_ROWS,
                merge_max_bytes,
            }
        } else {
            Sharding::default()
        },
        ..ServiceConfig::default()
    };
    app_support::state(dir, cfg)
}

async fn call(st: &Arc<AppState>, method: &str, uri: &str, body: Vec<u8>) -> (StatusCode, Value) {
    app_support::call(st, method, uri, Some("secret"), body).await
}

/// A book of `ROWS` options: Black-Scholes rows, and with `heston` every third row a
/// Heston one (so the shards hold runs of both kinds).
fn book(heston: bool) -> Vec<Value> {
    (0..ROWS)
        .map(|i| {
            let k = 80.0 + 2.0 * i as f64;
            if heston && i % 3 == 1 {
                json!({"model": "heston", "option_type": "put", "spot": 100.0, "strike": k, "rate": 0.03,
                       "maturity": 1.0, "kappa": 1.5, "theta": 0.04, "xi": 0.5, "rho": -0.6, "v0": 0.05})
            } else {
                json!({"option_type": if i % 2 == 0 { "call" } else { "put" }, "spot": 100.0, "strike": k,
                       "rate": 0.03, "volatility": 0.2 + 0.01 * i as f64, "maturity": 1.0})
            }
        })
        .collect()
}

fn job(params: Value, options: Vec<Value>) -> Value {
    json!({"kind": "price", "params": params, "inputs": {"options": options}})
}

fn opts(dir: &std::path::Path) -> ExecOptions {
    ExecOptions {
        blob_dir: dir.to_path_buf(),
        inline_max_elements: 1 << 20,
        max_elements: 16 << 20,
    }
}

/// Run one claimed job as a worker would; its outcome.
fn run(rt: &Runtime, opts: &ExecOptions, j: &ClaimedJob) -> Outcome {
    let item = WorkItem {
        id: j.id.clone(),
        attempt: j.attempt,
        task: j.task.clone(),
    };
    let (mut res, poisoned) = run_batch(rt, opts, &[item]);
    assert!(!poisoned);
    match res.remove(0).outcome {
        WorkOutcome::Ok { result, blobs } => Outcome::Succeeded {
            result: result.to_string(),
            blobs,
        },
        WorkOutcome::Err { code, message, .. } => Outcome::Failed { code, message },
    }
}

/// A worker's runtime: the CPU, or with `gpu` the first CUDA device (gpu-tests).
fn runtime(gpu: bool) -> Runtime {
    if gpu {
        let rt = Runtime::new(kiln::DeviceRequest::Cuda(Some(0)), &kiln::Config::default()).unwrap();
        assert!(rt.cuda().is_some(), "a CUDA runtime");
        rt
    } else {
        Runtime::cpu()
    }
}

/// `workers` workers, each claiming one job at a time until the queue is empty; every
/// end stored. Returns how many jobs they ran.
async fn drain(st: &Arc<AppState>, dir: &std::path::Path, workers: usize) -> usize {
    drain_on(st, dir, workers, false).await
}

/// [`drain`] on CPU or GPU runtimes.
async fn drain_on(st: &Arc<AppState>, dir: &std::path::Path, workers: usize, gpu: bool) -> usize {
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (st, opts) = (st.clone(), opts(dir));
        tasks.push(tokio::spawn(async move {
            let owner = format!("live/w{w}");
            let rt = Arc::new(runtime(gpu));
            let mut ran = 0;
            loop {
                let jobs = st
                    .store
                    .claim(&owner, false, None, 1, Duration::from_secs(600))
                    .await
                    .unwrap();
                let Some(j) = jobs.into_iter().next() else {
                    return ran;
                };
                let (rt2, opts2, j2) = (rt.clone(), opts.clone(), j.clone());
                let outcome = tokio::task::spawn_blocking(move || run(&rt2, &opts2, &j2))
                    .await
                    .unwrap();
                assert!(st.store.finish(&j.id, &owner, outcome).await.unwrap());
                ran += 1;
            }
        }));
    }
    let mut n = 0;
    for t in tasks {
        n += t.await.unwrap();
    }
    n
}

async fn get(st: &Arc<AppState>, id: &str) -> Value {
    let (s, b) = call(st, "GET", &format!("/v1/jobs/{id}"), vec![]).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b
}

/// Each price's (price, std_error) bits, in order.
fn bits(result: &Value) -> Vec<(u64, u64)> {
    result["prices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN).to_bits();
            (f("price"), f("std_error"))
        })
        .collect()
}

/// The job run unsharded on a store of its own: its result.
async fn unsharded(body: &Value) -> Value {
    unsharded_on(body, false).await
}

/// [`unsharded`] on a CPU or GPU runtime.
async fn unsharded_on(body: &Value, gpu: bool) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), false);
    let id = app_support::submit_job(&st, body).await;
    assert_eq!(drain_on(&st, dir.path(), 1, gpu).await, 1, "one job, not split");
    let b = get(&st, &id).await;
    assert_eq!(b["state"], "succeeded", "{b}");
    assert!(b.get("shards").is_none(), "{b}");
    b["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sharded_book_is_bitwise_the_unsharded_one() {
    let mc = json!({"method": "mc", "paths": 4096, "steps": 16, "seed": 7});
    for body in [
        job(mc.clone(), book(true)),
        job(json!({"method": "analytic"}), book(true)),
        // Black-Scholes and Philox: the batched path when unsharded
        job(mc.clone(), book(false)),
    ] {
        let want = unsharded(&body).await;
        let dir = tempfile::tempdir().unwrap();
        let st = state(dir.path(), true);
        let id = app_support::submit_job(&st, &body).await;
        let b = get(&st, &id).await;
        assert_eq!(b["state"], "running", "a parent waits for its shards: {b}");
        assert_eq!(
            b["shards"],
            json!({"total": 7, "done": 0, "failed": 0, "cancelled": 0})
        );
        let (_, list) = call(&st, "GET", "/v1/jobs", vec![]).await;
        assert_eq!(
            list["jobs"].as_array().unwrap().len(),
            1,
            "shards are not listed: {list}"
        );
        assert_eq!(drain(&st, dir.path(), 3).await, 7, "seven shards run");
        let b = get(&st, &id).await;
        assert_eq!(b["state"], "succeeded", "{b}");
        assert_eq!(
            b["shards"],
            json!({"total": 7, "done": 7, "failed": 0, "cancelled": 0})
        );
        let got = &b["result"];
        assert_eq!(got["batch_options"], ROWS);
        assert_eq!(got["shards"], 7);
        assert_eq!(got["prices"].as_array().unwrap().len(), ROWS);
        assert_eq!(bits(got), bits(&want), "{body}");
        assert!(bits(got).iter().all(|(p, _)| f64::from_bits(*p).is_finite()));
    }
}

/// The merge limit lowered under a small book's shards' results: the parent stores a
/// manifest, keeps the shards' results, and `GET` streams exactly the bytes the in-store
/// merge gives the same book (byte for byte), so bitwise the unsharded prices; deleting
/// the parent deletes its shards and their results.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_book_past_the_merge_limit_reads_back_as_the_merged_bytes() {
    const LIMIT: u64 = 1024;
    let body = job(
        json!({"method": "mc", "paths": 4096, "steps": 16, "seed": 5}),
        book(true),
    );
    let want = unsharded(&body).await;

    // within the default limit: merged in the store
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), true);
    let id = app_support::submit_job(&st, &body).await;
    assert_eq!(drain(&st, dir.path(), 3).await, 7);
    let merged = st.store.get(&id).await.unwrap().unwrap();
    assert_eq!(merged.result_shards, None, "merged");
    let merged = merged.result.unwrap();
    assert!(
        merged.len() as u64 > LIMIT,
        "the book's result passes the lowered limit"
    );
    assert_eq!(
        st.store.shard_result(&id, 0).await.unwrap(),
        None,
        "shards' results dropped"
    );

    // past the lowered limit: a manifest
    let dir = tempfile::tempdir().unwrap();
    let st = state_merging(dir.path(), true, LIMIT);
    let id = app_support::submit_job(&st, &body).await;
    assert_eq!(drain(&st, dir.path(), 3).await, 7);
    let rec = st.store.get(&id).await.unwrap().unwrap();
    assert_eq!(rec.result_shards, Some(7), "a manifest over 7 shards");
    let head = rec.result.unwrap();
    assert!((head.len() as u64) < LIMIT && !head.contains("prices"), "{head}");
    for i in 0..7 {
        assert!(
            st.store.shard_result(&id, i).await.unwrap().is_some(),
            "shard {i} kept"
        );
    }
    assert_eq!(st.store.shard_result(&id, 7).await.unwrap(), None);
    let (status, raw) =
        app_support::call_raw(&st, "GET", &format!("/v1/jobs/{id}"), Some("secret"), vec![]).await;
    assert_eq!(status, StatusCode::OK);
    let raw = String::from_utf8(raw).unwrap();
    let prefix = format!("{{\"result\":{merged},\"");
    assert!(
        raw.starts_with(&prefix),
        "the merged bytes:\n{merged}\nstreamed:\n{raw}"
    );
    let b: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(b["id"], id.as_str());
    assert_eq!(b["state"], "succeeded");
    assert_eq!(
        b["shards"],
        json!({"total": 7, "done": 7, "failed": 0, "cancelled": 0})
    );
    assert_eq!(b["result"]["batch_options"], ROWS);
    assert_eq!(bits(&b["result"]), bits(&want), "bitwise the unsharded prices");
    // the waiting form answers the same
    let (_, w) = call(&st, "GET", &format!("/v1/jobs/{id}?wait=1"), vec![]).await;
    assert_eq!(w, b);
    // a listing shows no result
    let (_, list) = call(&st, "GET", "/v1/jobs", vec![]).await;
    assert_eq!(list["jobs"][0]["result"], Value::Null, "{list}");

    // a shard's result gone from under the manifest: the stream is cut off, never a
    // shorter book
    let db = rusqlite::Connection::open(dir.path().join("jobs.sqlite3")).unwrap();
    let gone = db
        .execute(
            "DELETE FROM results WHERE job_id = (SELECT id FROM jobs WHERE parent = ?1 AND shard_index = 3)",
            [&id],
        )
        .unwrap();
    assert_eq!(gone, 1);
    let req = axum::http::Request::builder()
        .uri(format!("/v1/jobs/{id}"))
        .header("authorization", "Bearer secret")
        .body(axum::body::Body::empty())
        .unwrap();
    let r = tower::ServiceExt::oneshot(kiln_service::api::app(st.clone()), req)
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::OK,
        "the head is sent before the shards are read"
    );
    let body = http_body_util::BodyExt::collect(r.into_body()).await;
    assert!(body.is_err(), "the body ends in an error");

    // the byte budget takes the parent and its shards as one job
    st.store.expire(Duration::from_secs(3600), 1).await.unwrap();
    assert!(st.store.get(&id).await.unwrap().is_none(), "the parent deleted");
    assert_eq!(st.store.shard_result(&id, 0).await.unwrap(), None);
    let counts = st.store.counts().await.unwrap();
    assert!(
        counts.by_state.iter().all(|(_, n)| *n == 0),
        "no shard left behind: {counts:?}"
    );
}

/// The results sweep never deletes a finished shard of a running parent (its result is
/// the parent's to be), and deletes the shards with their parent once it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_expire_with_their_parent_only() {
    let body = job(json!({"method": "analytic"}), book(false));
    let dir = tempfile::tempdir().unwrap();
    let st = state_merging(dir.path(), true, 0);
    let id = app_support::submit_job(&st, &body).await;
    let rt = Runtime::cpu();
    let o = opts(dir.path());
    let c = st
        .store
        .claim("live/w0", false, None, 1, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(c.len(), 1);
    assert!(st
        .store
        .finish(&c[0].id, "live/w0", run(&rt, &o, &c[0]))
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_millis(5)).await;
    st.store.expire(Duration::ZERO, u64::MAX).await.unwrap();
    assert!(
        st.store.get(&c[0].id).await.unwrap().is_some(),
        "a done shard of a running parent stays"
    );
    assert_eq!(drain(&st, dir.path(), 2).await, 6);
    let b = get(&st, &id).await;
    assert_eq!(b["state"], "succeeded", "{b}");
    assert_eq!(bits(&b["result"]).len(), ROWS);
    tokio::time::sleep(Duration::from_millis(5)).await;
    st.store.expire(Duration::ZERO, u64::MAX).await.unwrap();
    assert!(st.store.get(&id).await.unwrap().is_none());
    assert!(
        st.store.get(&c[0].id).await.unwrap().is_none(),
        "the shard went with it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_lost_midway_changes_no_bit() {
    let body = job(json!({"method": "mc", "paths": 4096, "steps": 16}), book(true));
    let want = unsharded(&body).await;
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), true);
    let id = app_support::submit_job(&st, &body).await;
    // a worker of a node that dies takes two shards and runs one of them
    let lost = st
        .store
        .claim("dead/w0", false, None, 2, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(lost.len(), 2);
    let rt = Runtime::cpu();
    let late = run(&rt, &opts(dir.path()), &lost[0]);
    // the others run the rest meanwhile
    assert_eq!(drain(&st, dir.path(), 2).await, 5);
    assert_eq!(
        get(&st, &id).await["state"],
        "running",
        "two shards are held by the lost worker"
    );
    // the next start re-queues what the lost node held; its late result is refused
    assert_eq!(st.store.requeue_orphans("live/").await.unwrap().requeued, 2);
    assert!(!st.store.finish(&lost[0].id, "dead/w0", late).await.unwrap());
    assert_eq!(drain(&st, dir.path(), 2).await, 2);
    let b = get(&st, &id).await;
    assert_eq!(b["state"], "succeeded", "{b}");
    assert_eq!(bits(&b["result"]), bits(&want));
    let shard = get(&st, &lost[0].id).await;
    assert_eq!(shard["parent"], id.as_str());
    assert_eq!(shard["attempts"], 2, "the lost shard ran again: {shard}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_sharded_job_cancels_every_shard() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), true);
    let body = job(json!({"method": "analytic"}), book(false));
    let id = app_support::submit_job(&st, &body).await;
    let held = st
        .store
        .claim("live/w0", false, None, 1, Duration::from_secs(600))
        .await
        .unwrap();
    let (s, b) = call(&st, "DELETE", &format!("/v1/jobs/{id}"), vec![]).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["state"], "cancelled");
    let b = get(&st, &id).await;
    assert_eq!(
        b["shards"],
        json!({"total": 7, "done": 0, "failed": 0, "cancelled": 7})
    );
    // the running shard's result is discarded, nothing is left to claim
    let rt = Runtime::cpu();
    let out = run(&rt, &opts(dir.path()), &held[0]);
    assert!(!st.store.finish(&held[0].id, "live/w0", out).await.unwrap());
    assert_eq!(drain(&st, dir.path(), 1).await, 0);
    assert_eq!(st.hub.in_flight(), 0, "the parent's admission released");

    // a shard's id cancels its whole job, and answers with the parent
    let id = app_support::submit_job(&st, &body).await;
    let shard = st
        .store
        .claim("live/w0", false, None, 1, Duration::from_secs(600))
        .await
        .unwrap()
        .remove(0);
    let (s, b) = call(&st, "DELETE", &format!("/v1/jobs/{}", shard.id), vec![]).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["id"], id.as_str());
    assert_eq!(b["state"], "cancelled");
    assert_eq!(b["shards"]["cancelled"], 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_shard_fails_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), true);
    let body = job(json!({"method": "analytic"}), book(false));
    // a final error
    let id = app_support::submit_job(&st, &body).await;
    let mut held = st
        .store
        .claim("live/w0", false, None, 2, Duration::from_secs(600))
        .await
        .unwrap();
    let bad = held.remove(1);
    let failed = Outcome::Failed {
        code: "invalid_input".into(),
        message: "a bad row".into(),
    };
    assert!(st.store.finish(&bad.id, "live/w0", failed).await.unwrap());
    let b = get(&st, &id).await;
    assert_eq!(b["state"], "failed", "{b}");
    assert_eq!(b["error"]["code"], "invalid_input");
    let msg = b["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&bad.id) && msg.contains("a bad row"), "{msg}");
    assert_eq!(
        b["shards"],
        json!({"total": 7, "done": 0, "failed": 1, "cancelled": 6})
    );
    let rt = Runtime::cpu();
    let out = run(&rt, &opts(dir.path()), &held[0]);
    assert!(
        !st.store.finish(&held[0].id, "live/w0", out).await.unwrap(),
        "a sibling's end is discarded"
    );
    assert_eq!(drain(&st, dir.path(), 1).await, 0);

    // attempts used up: the retry that fails the shard fails the parent
    let id = app_support::submit_job(&st, &body).await;
    let attempts = ServiceConfig::default().workers.max_attempts;
    let mut last = None;
    for _ in 0..attempts {
        let j = st
            .store
            .claim("live/w0", false, None, 1, Duration::from_secs(600))
            .await
            .unwrap()
            .remove(0);
        if let Some(prev) = &last {
            assert_eq!(&j.id, prev, "the retried shard comes back first");
        }
        let s = st
            .store
            .retry(&j.id, "live/w0", "worker_crashed", "the worker died")
            .await
            .unwrap();
        last = Some(j.id);
        if s == Some(kiln_service::store::JobState::Failed) {
            break;
        }
    }
    let b = get(&st, &id).await;
    assert_eq!(b["state"], "failed", "{b}");
    assert_eq!(b["error"]["code"], "worker_crashed");
    assert_eq!(b["shards"]["failed"], 1);
}

#[tokio::test]
async fn small_books_and_queue_timeouts_are_not_split() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), true);
    let small = job(json!({"method": "analytic"}), book(false)[..10].to_vec());
    let id = app_support::submit_job(&st, &small).await;
    assert!(get(&st, &id).await.get("shards").is_none());
    let mut timed = job(json!({"method": "analytic"}), book(false));
    timed["queue_timeout_s"] = json!(60);
    let id = app_support::submit_job(&st, &timed).await;
    assert!(get(&st, &id).await.get("shards").is_none());
    let target = job(json!({"method": "mc", "target_se": "1e-2rel"}), book(false));
    let id = app_support::submit_job(&st, &target).await;
    assert!(get(&st, &id).await.get("shards").is_none());
}

#[tokio::test]
async fn the_openapi_document_describes_the_shard_fields() {
    let doc = serde_json::to_value(kiln_service::api::openapi()).unwrap();
    let view = &doc["components"]["schemas"]["JobView"]["properties"];
    assert!(view.get("parent").is_some(), "{view}");
    assert!(view.get("shards").is_some(), "{view}");
    let counts = &doc["components"]["schemas"]["ShardCounts"]["properties"];
    for k in ["total", "done", "failed", "cancelled"] {
        assert!(counts.get(k).is_some(), "ShardCounts.{k}: {counts}");
    }
}

/// On a GPU: shards priced by CUDA runtimes (two workers on the one device) give the bits
/// of the book priced unsharded on that device: each shard's first stream reaches the
/// GPU kernels.
#[cfg(feature = "gpu-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_gpu_a_sharded_book_is_bitwise_the_unsharded_one() {
    let mc = json!({"method": "mc", "paths": 65536, "steps": 32, "seed": 3});
    for body in [job(mc.clone(), book(true)), job(mc.clone(), book(false))] {
        let want = unsharded_on(&body, true).await;
        let dir = tempfile::tempdir().unwrap();
        let st = state(dir.path(), true);
        let id = app_support::submit_job(&st, &body).await;
        assert_eq!(drain_on(&st, dir.path(), 2, true).await, 7);
        let b = get(&st, &id).await;
        assert_eq!(b["state"], "succeeded", "{b}");
        assert_eq!(bits(&b["result"]), bits(&want), "{body}");
    }
}
