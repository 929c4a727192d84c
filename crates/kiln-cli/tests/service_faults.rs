//! Faults end to end on the real `kiln` binary: a worker that aborts mid-job is replaced
//! and the job retried; `kill -9` of the server under load loses no accepted job and stores
//! no job twice.
#![allow(clippy::unwrap_used)]

mod service_support;

use serde_json::json;
use service_support::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The token of these tests: `fault` needs the server's flag and `kinds=fault` on the token.
const DRILL: &str = "drill-token-1";

/// A tokens file (outside the data dir) with the one token `DRILL`, for fault and price jobs.
fn drill_tokens(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("tokens");
    std::fs::write(&p, format!("drill {DRILL} kinds=fault,price\n")).unwrap();
    p
}

#[test]
fn an_aborting_worker_is_replaced_and_its_job_retried() {
    let d = data_dir();
    let tf = drill_tokens(d.path());
    let s = start(
        &d.path().join("data"),
        &[
            "--tokens-file",
            tf.to_str().unwrap(),
            "--cpu-workers",
            "2",
            "--allow-fault-injection",
            "--max-attempts",
            "3",
            "--batching",
            "off",
        ],
    );
    // Jobs around the fault: they must all succeed.
    let before: Vec<String> = (0..10)
        .map(|i| {
            s.post_json("/v1/jobs", Some(DRILL), &price_job(90.0 + i as f64, 5))
                .json()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let r = s.post_json(
        "/v1/jobs",
        Some(DRILL),
        &json!({"kind": "fault", "params": {"mode": "abort", "on_attempts": 1}}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let fault = r.json()["id"].as_str().unwrap().to_string();
    let after: Vec<String> = (0..10)
        .map(|i| {
            s.post_json("/v1/jobs", Some(DRILL), &price_job(110.0 + i as f64, 5))
                .json()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let j = s.wait_job(&fault, Some(DRILL), 60);
    assert_eq!(j["state"], "succeeded", "{j}");
    assert_eq!(j["attempts"], 2, "{j}");
    assert_eq!(j["result"]["attempt"], 2);
    assert_eq!(
        j["error"]["code"], "worker_crashed",
        "the first attempt's error is kept: {j}"
    );
    for (first, ids) in [(90.0, &before), (110.0, &after)] {
        for (i, id) in ids.iter().enumerate() {
            let j = s.wait_job(id, Some(DRILL), 60);
            assert_eq!(j["state"], "succeeded", "{j}");
            let p = j["result"]["prices"][0]["price"].as_f64().unwrap();
            assert!((p - bs_call(first + i as f64)).abs() < 1e-5);
        }
    }
    // A job that always aborts fails after its attempts, with the crash as its error.
    let r = s.post_json(
        "/v1/jobs",
        Some(DRILL),
        &json!({"kind": "fault", "params": {"mode": "abort"}}),
    );
    let j = s.wait_job(r.json()["id"].as_str().unwrap(), Some(DRILL), 60);
    assert_eq!(j["state"], "failed", "{j}");
    assert_eq!(j["attempts"], 3);
    assert_eq!(j["error"]["code"], "worker_crashed");
    assert!(j["error"]["message"].as_str().unwrap().contains("SIGABRT"), "{j}");
    // The workers were replaced (1 + 3 aborts) and are up again.
    let w = s.get("/v1/workers", Some(DRILL)).unwrap().json();
    let restarts: u64 = w
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["restarts"].as_u64().unwrap())
        .sum();
    assert_eq!(restarts, 4, "{w}");
    let end = Instant::now() + Duration::from_secs(30);
    while s.get("/readyz", None).unwrap().json()["workers_up"] != 2 {
        assert!(Instant::now() < end, "workers not back");
        std::thread::sleep(Duration::from_millis(50));
    }
    let m = s.get("/metrics", None).unwrap().text();
    assert!(
        m.contains("kiln_service_worker_restarts_total{worker=\"cpu\",reason=\"exited\"} 4"),
        "{m}"
    );
}

#[test]
fn a_hung_job_is_killed_at_its_deadline_and_the_worker_replaced() {
    let d = data_dir();
    let tf = drill_tokens(d.path());
    let s = start(
        &d.path().join("data"),
        &[
            "--tokens-file",
            tf.to_str().unwrap(),
            "--cpu-workers",
            "1",
            "--allow-fault-injection",
        ],
    );
    let r = s.post_json(
        "/v1/jobs",
        Some(DRILL),
        &json!({"kind": "fault", "params": {"mode": "sleep", "sleep_ms": 60000}, "deadline_s": 1}),
    );
    let t0 = Instant::now();
    let j = s.wait_job(r.json()["id"].as_str().unwrap(), Some(DRILL), 30);
    assert_eq!(j["state"], "failed", "{j}");
    assert_eq!(j["error"]["code"], "deadline_exceeded");
    assert!(t0.elapsed() < Duration::from_secs(10));
    let r = s.post_json("/v1/jobs?wait=30", Some(DRILL), &price_job(100.0, 1));
    assert_eq!(r.json()["state"], "succeeded", "{}", r.text());
}

#[test]
fn kill_9_under_load_loses_no_accepted_job() {
    let d = data_dir();
    let mut s = start(d.path(), &["--cpu-workers", "2"]);
    let addr = s.addr;
    // Four clients submit distinct one-option jobs until the server dies.
    let accepted: Arc<Mutex<Vec<(String, f64)>>> = Arc::default();
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let acc = accepted.clone();
            std::thread::spawn(move || {
                for i in 0..10_000 {
                    let strike = 50.0 + c as f64 * 0.25 + i as f64 * 0.001;
                    let body = price_job(strike, 1).to_string();
                    match request(addr, "POST", "/v1/jobs", None, &[], Some(body.as_bytes())) {
                        Ok(r) if r.status == 202 => acc
                            .lock()
                            .unwrap()
                            .push((r.json()["id"].as_str().unwrap().to_string(), strike)),
                        Ok(r) => panic!("unexpected {} {}", r.status, r.text()),
                        Err(_) => return, // the server is gone
                    }
                }
            })
        })
        .collect();
    let end = Instant::now() + Duration::from_secs(20);
    while accepted.lock().unwrap().len() < 300 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    s.kill9();
    for c in clients {
        c.join().unwrap();
    }
    let accepted = accepted.lock().unwrap().clone();
    assert!(accepted.len() >= 100, "only {} jobs accepted", accepted.len());

    // Restart on the same data dir: every accepted job finishes, with its own result.
    let s2 = start(d.path(), &["--cpu-workers", "2"]);
    for (id, strike) in &accepted {
        let j = s2.wait_job(id, None, 60);
        assert_eq!(j["state"], "succeeded", "{j}");
        let p = j["result"]["prices"][0]["price"].as_f64().unwrap();
        assert!(
            (p - bs_call(*strike)).abs() < 1e-5,
            "job {id}: {p} vs {}",
            bs_call(*strike)
        );
    }
    // Count: the store holds each accepted job once, and no job more than was submitted
    // (a request cut by the kill may have been stored without its 202: at most one per client).
    let mut seen = std::collections::HashSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/v1/jobs?limit=1000&cursor={c}"),
            None => "/v1/jobs?limit=1000".into(),
        };
        let page = s2.get(&q, None).unwrap().json();
        for j in page["jobs"].as_array().unwrap() {
            assert!(
                seen.insert(j["id"].as_str().unwrap().to_string()),
                "job listed twice"
            );
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    for (id, _) in &accepted {
        assert!(seen.contains(id), "accepted job {id} lost");
    }
    assert!(
        seen.len() <= accepted.len() + 4,
        "{} stored vs {} accepted",
        seen.len(),
        accepted.len()
    );
    eprintln!(
        "kill -9: {} accepted, {} stored, all finished after restart",
        accepted.len(),
        seen.len()
    );
}

#[test]
fn sigterm_drains_and_exits_cleanly() {
    let d = data_dir();
    let mut s = start(d.path(), &["--cpu-workers", "1"]);
    let ids: Vec<String> = (0..20)
        .map(|i| {
            s.post_json("/v1/jobs", None, &price_job(100.0 + i as f64, 2))
                .json()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let status = s.terminate(30).expect("exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    // Whatever did not run is still queued and runs after a restart.
    let s2 = start(d.path(), &["--cpu-workers", "1"]);
    for id in &ids {
        assert_eq!(s2.wait_job(id, None, 60)["state"], "succeeded");
    }
}

/// A job that takes its server down on every attempt (the server is killed while the job
/// runs, as a poison job crashes or freezes its node) goes back to the queue at each
/// restart while it has attempts left, and fails as `lease_expired` at the restart after
/// its last instead of taking the server down again.
#[test]
fn a_job_that_takes_its_server_down_every_time_fails_after_its_attempts() {
    let d = data_dir();
    let tf = drill_tokens(d.path());
    let data = d.path().join("data");
    let args = [
        "--tokens-file",
        tf.to_str().unwrap(),
        "--cpu-workers",
        "1",
        "--allow-fault-injection",
        "--max-attempts",
        "2",
    ];
    let mut s = start(&data, &args);
    let r = s.post_json(
        "/v1/jobs",
        Some(DRILL),
        &json!({"kind": "fault", "params": {"mode": "sleep", "sleep_ms": 20000}}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    for attempt in 1..=2u64 {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let j = s.get(&format!("/v1/jobs/{id}"), Some(DRILL)).unwrap().json();
            if j["state"] == "running" && j["attempts"].as_u64() == Some(attempt) {
                break;
            }
            assert!(
                matches!(j["state"].as_str(), Some("queued" | "running")),
                "before attempt {attempt}: {j}"
            );
            assert!(Instant::now() < end, "attempt {attempt} never started: {j}");
            std::thread::sleep(Duration::from_millis(50));
        }
        // the job on its attempt, the server dies and starts again on the same data dir
        s.kill9();
        s = start(&data, &args);
    }
    let j = s.get(&format!("/v1/jobs/{id}"), Some(DRILL)).unwrap().json();
    assert_eq!(
        (
            j["state"].as_str(),
            j["attempts"].as_u64(),
            j["error"]["code"].as_str()
        ),
        (Some("failed"), Some(2), Some("lease_expired")),
        "{j}"
    );
    let msg = j["error"]["message"].as_str().unwrap();
    assert!(msg.contains("lease expired on attempt 2 of 2"), "{msg}");
    let m = s.get("/metrics", Some(DRILL)).unwrap().text();
    assert!(
        m.lines()
            .any(|l| l.starts_with("kiln_service_jobs_finished_total{")
                && l.contains("state=\"failed\"")
                && l.ends_with(" 1")),
        "the start-up sweep counts it failed: {m}"
    );
}
