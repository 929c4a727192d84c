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
    let book: Vec<Value> = (0..ROWS).map(shard_row).collect();
    let body = json!({"kind": "price", "params": {"method": "mc", "paths": 2048, "steps": 16, "seed": 5},
                      "inputs": {"options": book}});
    let mut whole = body.clone();
    whole["queue_timeout_s"] = json!(300);
    let one = succeeded(&s, &submit_as(&s, TOKEN, &whole), TOKEN, 600);
    assert!(one.get("shards").is_none(), "not split: {one}");
    let want = price_bits(&one);
    assert_eq!(want.len() as u64, ROWS);

    // accepted although the token may hold one job: the unsharded one released its own
    let id = submit_as(&s, TOKEN, &body);
    let got = succeeded(&s, &id, TOKEN, 600);
    assert_eq!(got["shards"]["total"], 10);
    assert_eq!(got["shards"]["done"], 10);
    assert_eq!(price_bits(&got), want, "sharded: the unsharded bits");

    // accepted only if the sharded job's admission was released by its closing shard
    let id = submit_as(&s, TOKEN, &body);
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
    let got = succeeded(&s, &id, TOKEN, 600);
    assert_eq!(
        price_bits(&got),
        want,
        "a worker killed midway: the unsharded bits"
    );
    let r = s.post_json("/v1/jobs", Some(TOKEN), &whole);
    assert_eq!(r.status, 202, "the admission was released: {}", r.text());
}

/// With `sharding.merge_max_bytes` under the book's result, the parent keeps a manifest
/// over its shards' results: `GET /v1/jobs/{id}` streams it (chunked) with bitwise the
/// unsharded prices, and `kiln jobs get --output FILE` saves the same answer to a file,
/// as `kiln jobs get --json` prints it.
#[test]
fn a_book_past_the_merge_limit_is_streamed_and_saved_by_kiln_jobs_get() {
    let dir = data_dir();
    let cfg = dir.path().join("service.toml");
    std::fs::write(
        &cfg,
        format!(
            "[sharding]\nmin_rows = 40\nshard_rows = 40\nmerge_max_bytes = 1024\n\
             [[tokens]]\nname = \"shard\"\ntoken = \"{TOKEN}\"\n"
        ),
    )
    .unwrap();
    let cfg_s = cfg.to_str().unwrap().to_string();
    let s = start(
        &dir.path().join("node"),
        &["--service-config", cfg_s.as_str(), "--cpu-workers", "2"],
    );
    let book: Vec<Value> = (0..120).map(shard_row).collect();
    let body = json!({"kind": "price", "params": {"method": "mc", "paths": 512, "steps": 8, "seed": 9},
                      "inputs": {"options": book}});
    let mut whole = body.clone();
    whole["queue_timeout_s"] = json!(300);
    let one = succeeded(&s, &submit_as(&s, TOKEN, &whole), TOKEN, 600);
    let want = price_bits(&one);
    let id = submit_as(&s, TOKEN, &body);
    let got = succeeded(&s, &id, TOKEN, 600);
    assert_eq!(got["shards"]["total"], 3);
    assert_eq!(price_bits(&got), want, "a manifest: the unsharded bits");
    let r = s.get(&format!("/v1/jobs/{id}"), Some(TOKEN)).unwrap();
    assert_eq!(r.header("transfer-encoding"), Some("chunked"), "streamed");
    assert!(r.text().len() > 1024, "past the merge limit");

    let kiln = |extra: &[&str]| {
        let server = format!("http://{}", s.addr);
        let mut args = vec!["jobs", "--server", server.as_str(), "--token", TOKEN];
        args.extend_from_slice(extra);
        std::process::Command::new(kiln_bin())
            .args(&args)
            .env_remove("KILN_TOKEN")
            .output()
            .unwrap()
    };
    let out_file = dir.path().join("result.json");
    let out = kiln(&["get", &id, "--output", out_file.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let saved: Value = serde_json::from_slice(&std::fs::read(&out_file).unwrap()).unwrap();
    assert_eq!(saved, got, "the saved answer is the job");
    let out = kiln(&["--json", "get", &id]);
    assert!(out.status.success(), "{out:?}");
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["result"], got["result"]);
    let missing = dir.path().join("missing.json");
    let out = kiln(&["get", "j_missing", "--output", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(!missing.exists(), "no file for an error");
}
