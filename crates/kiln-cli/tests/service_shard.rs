//! A sharded book on one `kiln serve` (SQLite, three CPU worker processes), through the
//! real supervisor: the book split by `sharding.min_rows` gives bitwise the prices of the
//! same book run unsharded (a job with its own `queue_timeout_s` is never split), also
//! when the busiest worker process is killed (SIGKILL) while shards run (its shard is
//! retried on a fresh worker). The token may hold one job in flight: each later submission being
//! accepted shows the parent's admission released when its last shard closed it.
#![allow(clippy::unwrap_used)]

mod service_support;

use serde_json::{json, Value};
use service_support::*;
use std::time::{Duration, Instant};

const TOKEN: &str = "shard-token-1";
const ROWS: u64 = 600;

fn row(i: u64) -> Value {
    let k = 80.0 + (i % 41) as f64;
    if i % 3 == 1 {
        json!({"model": "heston", "option_type": "put", "spot": 100.0, "strike": k, "rate": 0.03,
               "maturity": 1.0, "kappa": 1.5, "theta": 0.04, "xi": 0.5, "rho": -0.6, "v0": 0.05})
    } else {
        json!({"option_type": if i % 2 == 0 { "call" } else { "put" }, "spot": 100.0, "strike": k,
               "rate": 0.03, "volatility": 0.15 + 0.001 * (i % 97) as f64, "maturity": 1.0})
    }
}

fn bits(job: &Value) -> Vec<u64> {
    job["result"]["prices"]
        .as_array()
        .unwrap_or_else(|| panic!("no prices: {job}"))
        .iter()
        .map(|r| r["price"].as_f64().unwrap_or(f64::NAN).to_bits())
        .collect()
}

fn submit(s: &Server, body: &Value) -> String {
    let r = s.post_json("/v1/jobs", Some(TOKEN), body);
    assert_eq!(r.status, 202, "{}", r.text());
    r.json()["id"].as_str().unwrap().to_string()
}

fn finished(s: &Server, id: &str) -> Value {
    let j = s.wait_job(id, Some(TOKEN), 600);
    assert_eq!(j["state"], "succeeded", "{j}");
    j
}

/// The server's child processes (its workers).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // the fields after the command (which may hold spaces) in parentheses
        let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
        if after.split_whitespace().nth(1) == Some(pid.to_string().as_str()) {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_sharded_book_through_the_supervisor_is_bitwise_the_unsharded_one() {
    let dir = data_dir();
    let cfg = dir.path().join("service.toml");
    std::fs::write(
        &cfg,
        format!(
            "[sharding]\nmin_rows = 60\nshard_rows = 60\n\
             [[tokens]]\nname = \"shard\"\ntoken = \"{TOKEN}\"\nmax_in_flight = 1\n"
        ),
    )
    .unwrap();
    let cfg_s = cfg.to_str().unwrap().to_string();
    let s = start(
        &dir.path().join("node"),
        &["--service-config", cfg_s.as_str(), "--cpu-workers", "3"],
    );
    let book: Vec<Value> = (0..ROWS).map(row).collect();
    let body = json!({"kind": "price", "params": {"method": "mc", "paths": 2048, "steps": 16, "seed": 5},
                      "inputs": {"options": book}});
    let mut whole = body.clone();
    whole["queue_timeout_s"] = json!(300);
    let one = finished(&s, &submit(&s, &whole));
    assert!(one.get("shards").is_none(), "not split: {one}");
    let want = bits(&one);
    assert_eq!(want.len() as u64, ROWS);

    // accepted although the token may hold one job: the unsharded one released its own
    let id = submit(&s, &body);
    let got = finished(&s, &id);
    assert_eq!(got["shards"]["total"], 10);
    assert_eq!(got["shards"]["done"], 10);
    assert_eq!(bits(&got), want, "sharded: the unsharded bits");

    // accepted only if the sharded job's admission was released by its closing shard
    let id = submit(&s, &body);
    let end = Instant::now() + Duration::from_secs(300);
    loop {
        let j = s.get(&format!("/v1/jobs/{id}"), Some(TOKEN)).unwrap().json();
        if j["shards"]["done"].as_u64().unwrap_or(0) >= 1 || j["state"] != "running" {
            break;
        }
        assert!(Instant::now() < end, "no shard finished: {j}");
        std::thread::sleep(Duration::from_millis(10));
    }
    // the busiest worker (most CPU time over 300 ms) is running a shard
    let workers = children(s.child.id());
    assert!(!workers.is_empty(), "the server runs worker processes");
    let before: Vec<f64> = workers.iter().map(|&p| process_cpu_seconds(p)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let (busy, used) = workers
        .iter()
        .zip(&before)
        .map(|(&p, b)| (p, process_cpu_seconds(p) - b))
        .fold((0, -1.0), |best, w| if w.1 > best.1 { w } else { best });
    assert!(used > 0.05, "a worker is busy: {used} s of CPU in 300 ms");
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &busy.to_string()])
        .status();
    let got = finished(&s, &id);
    assert_eq!(bits(&got), want, "a worker killed midway: the unsharded bits");
    let r = s.post_json("/v1/jobs", Some(TOKEN), &whole);
    assert_eq!(r.status, 202, "the admission was released: {}", r.text());
}
