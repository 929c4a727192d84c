//! Tenants against each other (issue 36's attack suite, scheduling and storage part): two
//! tokens on one `kiln serve` with a CPU worker, on loopback. One token's deadline never
//! fails the other's jobs and a batch shows a tenant only its own counts; an expired job
//! fails when claimed without costing a worker; one tenant's backlog delays another's job
//! by at most one job's run time; blobs have an owner-only DELETE, a quota per token and an
//! expiry; a stalled download does not hold the file in memory. Every wait is bounded.
#![allow(clippy::unwrap_used)]

mod service_support;

use serde_json::{json, Value};
use service_support::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const ALICE: &str = "alice-token-1";
const BOB: &str = "bob-token-2";

/// A server with tokens `alice` and `bob` (clear tokens, hashed at load), one CPU worker,
/// fault injection on, and `config` as its service config.
fn serve(config: &str) -> (Server, tempfile::TempDir) {
    let d = data_dir();
    let tokens = d.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("alice {ALICE} kinds=price,fault,elementwise\nbob {BOB} kinds=price,fault,elementwise\n"),
    )
    .unwrap();
    let cfg = d.path().join("service.toml");
    std::fs::write(&cfg, config).unwrap();
    let s = start(
        &d.path().join("data"),
        &[
            "--tokens-file",
            tokens.to_str().unwrap(),
            "--service-config",
            cfg.to_str().unwrap(),
            "--cpu-workers",
            "1",
            "--allow-fault-injection",
        ],
    );
    (s, d)
}

fn submit(s: &Server, token: &str, body: &Value) -> String {
    let r = s.post_json("/v1/jobs", Some(token), body);
    assert_eq!(r.status, 202, "{}", r.text());
    r.json()["id"].as_str().unwrap().to_string()
}

fn sleep_job(ms: u64) -> Value {
    json!({"kind": "fault", "params": {"mode": "sleep", "sleep_ms": ms}})
}

fn job(s: &Server, token: &str, id: &str) -> Value {
    s.get(&format!("/v1/jobs/{id}"), Some(token)).unwrap().json()
}

/// Wait (bounded) until job `id` is running.
fn wait_running(s: &Server, token: &str, id: &str) {
    let end = Instant::now() + Duration::from_secs(60);
    while job(s, token, id)["state"] != "running" {
        assert!(Instant::now() < end, "job {id} never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn restarts(s: &Server) -> u64 {
    s.get("/v1/workers", Some(ALICE)).unwrap().json()[0]["restarts"]
        .as_u64()
        .unwrap()
}

#[test]
fn a_cross_token_batch_with_a_1s_deadline_leaves_the_other_tokens_jobs_succeeded() {
    // A long queue delay would merge everything queued behind the busy worker, as before.
    let (s, _d) = serve("[batching]\nmax_queue_delay_ms = 200\n");
    let busy = submit(&s, ALICE, &sleep_job(2500));
    wait_running(&s, ALICE, &busy);
    // Behind it, same batch key: alice's two jobs, bob's with a 1 s deadline, bob's without.
    let a: Vec<String> = (0..2)
        .map(|i| submit(&s, ALICE, &price_job(90.0 + i as f64, 3)))
        .collect();
    let mut late = price_job(100.0, 5);
    late["deadline_s"] = json!(1);
    let b_late = submit(&s, BOB, &late);
    let b = submit(&s, BOB, &price_job(100.0, 5));
    for id in &a {
        let j = s.wait_job(id, Some(ALICE), 60);
        assert_eq!(j["state"], "succeeded", "alice's job: {j}");
        // Only alice's own options are counted in what she sees of the batch.
        let n = j["result"]["batch_options"].as_u64().unwrap();
        assert!(
            n == 3 || n == 6,
            "alice's batch_options = {n}: another token's options counted"
        );
    }
    let j = s.wait_job(&b, Some(BOB), 60);
    assert_eq!(j["state"], "succeeded", "{j}");
    assert_eq!(j["result"]["batch_options"], 5, "{j}");
    let j = s.wait_job(&b_late, Some(BOB), 60);
    assert_eq!(j["state"], "failed", "{j}");
    assert_eq!(j["error"]["code"], "deadline_exceeded", "{j}");
    assert_eq!(restarts(&s), 0, "no worker was killed for a job that never ran");
}

#[test]
fn expired_jobs_fail_when_claimed_without_reaching_a_worker() {
    let (s, _d) = serve("");
    let mut zero = price_job(100.0, 1);
    zero["deadline_s"] = json!(0);
    let r = s.post_json("/v1/jobs", Some(ALICE), &zero);
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid_params"),
        "{}",
        r.text()
    );
    assert!(r.text().contains("deadline_s"), "{}", r.text());
    let busy = submit(&s, BOB, &sleep_job(2000));
    wait_running(&s, BOB, &busy);
    let expiring: Vec<String> = (0..5)
        .map(|i| {
            let mut j = sleep_job(10 + i);
            j["deadline_s"] = json!(1);
            submit(&s, ALICE, &j)
        })
        .collect();
    for id in &expiring {
        let j = s.wait_job(id, Some(ALICE), 60);
        assert_eq!(j["state"], "failed", "{j}");
        assert_eq!(j["error"]["code"], "deadline_exceeded", "{j}");
        assert!(
            j["error"]["message"].as_str().unwrap().contains("never ran"),
            "{j}"
        );
    }
    assert_eq!(s.wait_job(&busy, Some(BOB), 60)["state"], "succeeded");
    assert_eq!(restarts(&s), 0, "five expired jobs cost no worker restart");
}

#[test]
fn a_tenants_three_long_jobs_delay_anothers_trivial_job_by_at_most_one() {
    let (s, _d) = serve("");
    let long: Vec<String> = (0..3).map(|_| submit(&s, ALICE, &sleep_job(3000))).collect();
    wait_running(&s, ALICE, &long[0]);
    let t = Instant::now();
    let r = s.post_json("/v1/jobs?wait=60", Some(BOB), &price_job(100.0, 1));
    let waited = t.elapsed().as_secs_f64();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "succeeded");
    let first = s.wait_job(&long[0], Some(ALICE), 60);
    let run_s = (first["finished_ms"].as_i64().unwrap() - first["started_ms"].as_i64().unwrap()) as f64 / 1e3;
    // Bob ran right after alice's first job: none of her others had finished.
    let done = long[1..]
        .iter()
        .filter(|id| job(&s, ALICE, id)["state"] == "succeeded")
        .count();
    assert_eq!(done, 0, "alice's queued jobs went before bob's");
    // FIFO would be two more long jobs (6 s) on top; the margin is for a loaded machine.
    eprintln!("bob waited {waited:.2} s behind alice's long jobs of {run_s:.2} s each");
    assert!(
        waited <= run_s + 2.5,
        "bob waited {waited:.2} s; one of alice's jobs runs {run_s:.2} s"
    );
}

/// Upload `bytes` as a CSV blob.
fn upload(s: &Server, token: &str, bytes: &[u8]) -> Reply {
    request(
        s.addr,
        "POST",
        "/v1/blobs?format=csv",
        Some(token),
        &[],
        Some(bytes),
    )
    .unwrap()
}

fn delete(s: &Server, token: &str, id: &str) -> u16 {
    request(
        s.addr,
        "DELETE",
        &format!("/v1/blobs/{id}"),
        Some(token),
        &[],
        None,
    )
    .unwrap()
    .status
}

#[test]
fn blobs_are_deleted_by_their_owner_only_and_held_to_a_quota_per_token() {
    let (s, _d) = serve("[blobs]\nmax_bytes_per_token = 1000\n");
    let data = vec![b'1'; 600];
    let r = upload(&s, ALICE, &data);
    assert_eq!(r.status, 201, "{}", r.text());
    let a1 = r.json()["id"].as_str().unwrap().to_string();
    let r = upload(&s, ALICE, &data);
    assert_eq!(
        (r.status, r.code().as_str()),
        (413, "quota_exceeded"),
        "{}",
        r.text()
    );
    assert!(
        r.text().contains("1000"),
        "the message names the quota: {}",
        r.text()
    );
    // Bob's quota is his own.
    let r = upload(&s, BOB, &data);
    assert_eq!(r.status, 201, "{}", r.text());
    let b1 = r.json()["id"].as_str().unwrap().to_string();
    // Another's blob: 404 for every verb, and it stays.
    assert_eq!(delete(&s, BOB, &a1), 404);
    assert_eq!(s.get(&format!("/v1/blobs/{a1}"), Some(BOB)).unwrap().status, 404);
    assert_eq!(s.get(&format!("/v1/blobs/{a1}"), Some(ALICE)).unwrap().body, data);
    assert_eq!(delete(&s, ALICE, "b_nope"), 404);
    // Her own: deleted, then gone, and the room is back.
    assert_eq!(delete(&s, ALICE, &a1), 204);
    assert_eq!(
        s.get(&format!("/v1/blobs/{a1}"), Some(ALICE)).unwrap().status,
        404
    );
    assert_eq!(delete(&s, ALICE, &a1), 404);
    assert_eq!(upload(&s, ALICE, &data).status, 201);
    assert_eq!(s.get(&format!("/v1/blobs/{b1}"), Some(BOB)).unwrap().status, 200);
    assert!(
        !s.data_dir.join("blobs").join(format!("{a1}.csv")).exists(),
        "the file is gone"
    );
}

#[test]
fn expired_blobs_and_results_are_refused() {
    let (s, _d) = serve("[blobs]\nttl_s = 1\n[results]\nttl_s = 1\n");
    let r = upload(&s, ALICE, b"1,2\n");
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    let r = s.post_json("/v1/jobs?wait=30", Some(ALICE), &price_job(100.0, 1));
    assert_eq!(r.status, 200, "{}", r.text());
    let job = r.json()["id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(
        s.get(&format!("/v1/jobs/{job}"), Some(ALICE)).unwrap().status,
        404
    );
    assert_eq!(
        s.get(&format!("/v1/blobs/{id}"), Some(ALICE)).unwrap().status,
        404
    );
    let r = s.post_json(
        "/v1/jobs",
        Some(ALICE),
        &json!({"kind": "elementwise", "params": {"op": "relu"}, "inputs": {"x": {"blob": id}}}),
    );
    assert_eq!(r.status, 400, "an expired blob is not an input: {}", r.text());
}

/// The server's resident memory, KiB (Linux).
fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[test]
fn stalled_downloads_do_not_hold_the_file_in_memory() {
    let (s, _d) = serve("");
    let size = 16 << 20;
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let r = upload(&s, ALICE, &data);
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    // A whole download still arrives intact, with its length announced.
    let back = s.get(&format!("/v1/blobs/{id}"), Some(ALICE)).unwrap();
    assert_eq!(back.header("content-length"), Some(size.to_string().as_str()));
    assert!(back.body == data, "the download differs from the upload");
    let pid = s.child.id();
    let Some(before) = rss_kib(pid) else {
        eprintln!("SKIP: no /proc/{pid}/status to read the server's memory from");
        return;
    };
    // Eight downloads that read their first 64 KiB and then stall.
    let stalled: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut c = TcpStream::connect(s.addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            // a small receive window keeps the bytes in the server, if it had them
            write!(
                c,
                "GET /v1/blobs/{id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALICE}\r\n\r\n"
            )
            .unwrap();
            let mut got = vec![0u8; 64 << 10];
            c.read_exact(&mut got).unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib(pid).unwrap();
    let grown_mib = after.saturating_sub(before) as f64 / 1024.0;
    eprintln!(
        "8 stalled downloads of a 16 MiB blob: server RSS {before} -> {after} KiB (+{grown_mib:.1} MiB)"
    );
    // Reading the file per request would hold 8 x 16 MiB.
    assert!(
        grown_mib < 32.0,
        "the server grew {grown_mib:.1} MiB for 8 stalled downloads"
    );
    drop(stalled);
}
