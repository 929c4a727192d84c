//! Throughput of 1, 2 and 3 `kiln serve` nodes (one CPU worker each) on one PostgreSQL
//! queue: clients submit a fixed small job (100 European options, closed form) round-robin
//! across the nodes for a fixed time; measured are the jobs finished per second (first
//! submission to last result) and the CPU seconds the nodes (servers and workers) and
//! PostgreSQL spent per 1,000 jobs. Ignored by default (a measurement, not a check):
//! scripts/pg-throughput.sh runs it in release mode; docs/deployment.md quotes a run.
//! KILN_PG_TP_SECS (default 10), KILN_PG_TP_CLIENTS (default 16), KILN_PG_TP_NODES (the
//! most nodes, default 3) and KILN_PG_TP_BATCHING (`on` or `off`, default on) tune it. The
//! server CPU column is the `kiln serve` processes' own (their workers excluded).
#![allow(clippy::unwrap_used)]

mod pg_support;
mod service_support;

use pg_support::*;
use service_support::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env_or(k: &str, d: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

struct Row {
    nodes: usize,
    jobs: usize,
    secs: f64,
    mean_batch: f64,
    kiln_cpu: f64,
    server_cpu: f64,
    pg_cpu: f64,
}

fn measure(admin: &str, nodes: usize, secs: f64, clients: usize, batching: &str) -> Row {
    let db_name = format!("kiln_tp_{}_{nodes}", std::process::id());
    Db::connect(admin).exec(&format!("CREATE DATABASE {db_name}"));
    let url = with_db(admin, &db_name);
    let db = Db::connect(&url);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("service.toml");
    std::fs::write(
        &cfg,
        format!(
            "[store]\nurl = \"{url}\"\n[limits]\nmax_queue = 1000000\nmax_in_flight_per_token = 1000000\n"
        ),
    )
    .unwrap();
    let cfg_s = cfg.to_str().unwrap().to_string();
    let servers: Vec<Server> = (0..nodes)
        .map(|i| {
            start(
                &dir.path().join(format!("n{i}")),
                &[
                    "--service-config",
                    &cfg_s,
                    "--cpu-workers",
                    "1",
                    "--batching",
                    batching,
                ],
            )
        })
        .collect();
    let addrs: Vec<_> = servers.iter().map(|s| s.addr).collect();
    let body = price_job(90.0, 100).to_string();
    let server_cpu = || -> f64 { servers.iter().map(|s| process_cpu_seconds(s.child.id())).sum() };
    let (k0, p0, s0) = (cpu_seconds("kiln"), cpu_seconds("postgres"), server_cpu());
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (stop, sent, body, addrs) = (stop.clone(), sent.clone(), body.clone(), addrs.clone());
            std::thread::spawn(move || {
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    let r = request(
                        addrs[i % addrs.len()],
                        "POST",
                        "/v1/jobs",
                        None,
                        &[],
                        Some(body.as_bytes()),
                    )
                    .unwrap();
                    match r.status {
                        202 | 200 => {
                            sent.fetch_add(1, Ordering::Relaxed);
                        }
                        429 => std::thread::sleep(Duration::from_millis(20)),
                        s => panic!("submit: {s} {}", r.text()),
                    }
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let end = Instant::now() + Duration::from_secs(300);
    loop {
        let open: i64 = db.query(
            "SELECT count(*) FROM kiln_jobs WHERE state IN ('queued', 'running')",
            &[],
        )[0]
        .get(0);
        if open == 0 {
            break;
        }
        assert!(Instant::now() < end, "{open} jobs did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let secs = t0.elapsed().as_secs_f64();
    let (kiln_cpu, pg_cpu) = (cpu_seconds("kiln") - k0, cpu_seconds("postgres") - p0);
    let server_cpu = server_cpu() - s0;
    let r = &db.query(
        "SELECT count(*) FILTER (WHERE state = 'succeeded'), count(*) FROM kiln_jobs",
        &[],
    )[0];
    let (ok, all): (i64, i64) = (r.get(0), r.get(1));
    assert_eq!(ok, all, "every job succeeded");
    assert_eq!(all as usize, sent.load(Ordering::Relaxed));
    let mean_batch = servers
        .iter()
        .map(|s| {
            let t = s.get("/metrics", None).unwrap().text();
            let get = |name: &str| {
                t.lines()
                    .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse::<f64>().ok()))
                    .unwrap_or(0.0)
            };
            (
                get("kiln_service_batch_size_sum "),
                get("kiln_service_batch_size_count "),
            )
        })
        .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    drop(servers);
    Row {
        nodes,
        jobs: all as usize,
        secs,
        mean_batch: mean_batch.0 / mean_batch.1.max(1.0),
        kiln_cpu,
        server_cpu,
        pg_cpu,
    }
}

#[test]
#[ignore = "a measurement (scripts/pg-throughput.sh); needs KILN_TEST_PG_URL"]
fn pg_throughput_one_two_three_nodes() {
    let Some(admin) = admin_url("pg_throughput") else {
        return;
    };
    let secs = env_or("KILN_PG_TP_SECS", 10) as f64;
    let clients = env_or("KILN_PG_TP_CLIENTS", 16);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let most = env_or("KILN_PG_TP_NODES", 3).max(1);
    let batching = std::env::var("KILN_PG_TP_BATCHING").unwrap_or_else(|_| "on".into());
    println!(
        "{cores} cores; {clients} clients for {secs} s; 100 options per job (analytic); batching {batching}"
    );
    println!(
        "| nodes | jobs | seconds | jobs/s | mean batch | kiln CPU s / 1k jobs | server CPU s / 1k jobs | PostgreSQL CPU s / 1k jobs |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for nodes in 1..=most {
        let r = measure(&admin, nodes, secs, clients, &batching);
        let k = 1000.0 / r.jobs.max(1) as f64;
        println!(
            "| {} | {} | {:.1} | {:.0} | {:.1} | {:.2} | {:.2} | {:.2} |",
            r.nodes,
            r.jobs,
            r.secs,
            r.jobs as f64 / r.secs,
            r.mean_batch,
            r.kiln_cpu * k,
            r.server_cpu * k,
            r.pg_cpu * k
        );
    }
}
