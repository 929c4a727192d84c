//! A bounded load test of the job service on loopback: 200 concurrent clients submit small
//! analytic pricing jobs (`?wait=`, so latency is submission to result) for a fixed time,
//! with dynamic batching on and then off. Only 429s may fail. Prints p50/p99, jobs/s and
//! the server process's CPU seconds per 1,000 jobs (its workers excluded; docs/performance.md
//! quotes a run); KILN_SERVICE_LOAD_SECS sets the duration (default 3).
#![allow(clippy::unwrap_used)]

mod service_support;

use service_support::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Run {
    ok: usize,
    rejected: usize,
    latencies_ms: Vec<f64>,
    secs: f64,
    mean_batch: f64,
    server_cpu: f64,
}

fn load(batching: bool, clients: usize, secs: f64, options: usize) -> Run {
    let d = data_dir();
    let flag = if batching { "on" } else { "off" };
    let s = start(
        d.path(),
        &[
            "--cpu-workers",
            "2",
            "--batching",
            flag,
            "--max-batch",
            "64",
            "--max-queue-delay-ms",
            "2",
        ],
    );
    let addr = s.addr;
    let body = price_job(100.0, options).to_string();
    let lat: Arc<Mutex<Vec<f64>>> = Arc::default();
    let counts: Arc<Mutex<(usize, usize)>> = Arc::default();
    let cpu0 = process_cpu_seconds(s.child.id());
    let t0 = Instant::now();
    let stop = t0 + Duration::from_secs_f64(secs);
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (lat, counts, body) = (lat.clone(), counts.clone(), body.clone());
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                let (mut ok, mut rejected) = (0, 0);
                while Instant::now() < stop {
                    let t = Instant::now();
                    let r = request(addr, "POST", "/v1/jobs?wait=30", None, &[], Some(body.as_bytes()))
                        .expect("the server answers under load");
                    match r.status {
                        200 => {
                            assert_eq!(r.json()["state"], "succeeded", "{}", r.text());
                            ok += 1;
                            mine.push(t.elapsed().as_secs_f64() * 1e3);
                        }
                        429 => {
                            rejected += 1;
                            let wait = r.header("retry-after").unwrap().parse::<u64>().unwrap();
                            std::thread::sleep(Duration::from_millis(wait.min(1) * 50));
                        }
                        other => panic!("status {other} under load: {}", r.text()),
                    }
                }
                lat.lock().unwrap().extend(mine);
                let mut c = counts.lock().unwrap();
                c.0 += ok;
                c.1 += rejected;
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    let server_cpu = process_cpu_seconds(s.child.id()) - cpu0;
    let m = s.get("/metrics", None).unwrap().text();
    let metric = |name: &str| -> f64 {
        m.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let mean_batch = metric("kiln_service_batch_size_sum") / metric("kiln_service_batch_size_count").max(1.0);
    let mut latencies_ms = lat.lock().unwrap().clone();
    latencies_ms.sort_by(f64::total_cmp);
    let (ok, rejected) = *counts.lock().unwrap();
    Run {
        ok,
        rejected,
        latencies_ms,
        secs,
        mean_batch,
        server_cpu,
    }
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn two_hundred_clients_get_answers_or_429s_only() {
    let secs: f64 = std::env::var("KILN_SERVICE_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let mut table = String::from(
        "| batching | clients | options/job | jobs done | 429s | jobs/s | p50 ms | p99 ms | mean batch | server CPU s / 1k jobs |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for batching in [true, false] {
        let r = load(batching, 200, secs, 10);
        assert!(r.ok > 0, "no job finished");
        table.push_str(&format!(
            "| {} | 200 | 10 | {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.2} |\n",
            if batching { "on" } else { "off" },
            r.ok,
            r.rejected,
            r.ok as f64 / r.secs,
            pct(&r.latencies_ms, 0.5),
            pct(&r.latencies_ms, 0.99),
            r.mean_batch,
            r.server_cpu * 1000.0 / r.ok.max(1) as f64
        ));
    }
    eprintln!("{table}");
}

/// `kiln load`, the repository's load generator, against a live server: both modes count
/// finished jobs (the batch mode through the server's counter), read the server's CPU, and
/// a bad duration is an invalid-input exit with nothing sent.
#[test]
fn kiln_load_counts_finished_jobs_in_both_modes() {
    let d = data_dir();
    let s = start(d.path(), &["--cpu-workers", "2", "--max-batch", "64"]);
    let url = format!("http://{}", s.addr);
    let pid = s.child.id().to_string();
    for extra in [&[][..], &["--batch", "25"][..]] {
        let out = std::process::Command::new(kiln_bin())
            .args([
                "load",
                "--server",
                &url,
                "--clients",
                "3",
                "--duration",
                "0.5",
                "--json",
            ])
            .args(["--server-pid", &pid])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let done = r["jobs_finished"].as_u64().unwrap();
        assert!(done > 0 && r["failed"] == 0, "{r}");
        assert!(r["jobs_per_second"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["server_cpu_seconds"].as_f64().unwrap() >= 0.0, "{r}");
        if extra.is_empty() {
            assert_eq!(r["mode"], "single");
            assert!(
                r["p99_ms"].as_f64().unwrap() >= r["p50_ms"].as_f64().unwrap(),
                "{r}"
            );
        } else {
            assert_eq!(r["mode"], "batch");
            // every accepted job finished before the run ended
            assert_eq!(done, r["accepted"].as_u64().unwrap(), "{r}");
        }
    }
    let bad = std::process::Command::new(kiln_bin())
        .args(["load", "--server", &url, "--duration=0"])
        .output()
        .unwrap();
    assert_eq!(
        bad.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("duration"));
}
