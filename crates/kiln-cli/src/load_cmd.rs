//! `kiln load`: a load generator for a `kiln serve`, the client behind the service's
//! throughput figures (docs/performance.md): keep-alive clients submitting tiny analytic
//! pricing jobs for a fixed time, one at a time with `?wait=` (submission to result) or in
//! batches through `POST /v1/jobs:batch`, then jobs finished a second end to end, latency
//! percentiles, and the server's CPU seconds per 1,000 jobs when its process id is given.
//!
//! Each client is a thread with its own HTTP/1.1 connection kept alive (ureq's agent, the
//! client `kiln submit` uses): what a trading desk's quoting process or an inspection line's
//! frame poster does. In batch mode a job's end is not seen by its submitter, so the run
//! ends when the server's `kiln_service_jobs_finished` counter has grown by every job
//! accepted (polled every 2 ms), which needs the one node that runs them all.

use crate::submit_cmd::{Client, ServerArgs};
use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `kiln load` flags.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Jobs: {\"kind\": \"price\", \"params\": {\"method\": \"analytic\"}, \"inputs\": {\"options\": [...]}}
  with --options European calls (strikes 100, 101, ...), priced in microseconds, so the
  figure measures the service (HTTP, store, queue, workers), not the pricer.
Modes: without --batch each client submits one job with ?wait=30 and waits for its result
  (200: counted; 202 past the wait, 429 and 503: counted apart, 429/503 back off 50 ms);
  with --batch N each client posts N jobs a request and does not wait; the run then ends
  when the server has finished every accepted job (its /metrics counter), one node only.
Output: jobs/s end to end, p50/p99 latency (single mode), and with --server-pid the server
  process's CPU seconds per 1,000 jobs (Linux /proc; its worker processes excluded).
  --json prints one object. Exit 1 when no job finished.
Example (16 clients, 10 s, against a local server):
  kiln load --server http://127.0.0.1:8080 --clients 16 --duration 10 --server-pid $(pgrep -f 'kiln serve')")]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// Concurrent clients (threads, each with its own kept-alive connection).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=4096))]
    clients: u64,
    /// Seconds of submitting.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Post N jobs a request through POST /v1/jobs:batch (not waiting for results).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    batch: Option<u64>,
    /// Options a job.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    options: u64,
    /// The server's process id, for its CPU time (Linux).
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
}

/// One client's tally.
#[derive(Default)]
struct Tally {
    ok: u64,
    accepted: u64,
    late: u64,
    rejected: u64,
    failed: u64,
    latencies_ms: Vec<f64>,
    first_error: Option<String>,
}

fn job(options: u64) -> Value {
    let opts: Vec<Value> = (0..options)
        .map(|i| {
            json!({"option_type": "call", "style": "european", "spot": 100.0,
                   "strike": 100.0 + i as f64, "rate": 0.05, "dividend": 0.0,
                   "volatility": 0.2, "maturity": 1.0})
        })
        .collect();
    json!({"kind": "price", "params": {"method": "analytic"}, "inputs": {"options": opts}})
}

/// User plus system CPU seconds of process `pid` (Linux `/proc/PID/stat`).
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| anyhow::anyhow!("--server-pid {pid}: {e}"))?;
    // fields after the command name, which is in parentheses and may hold spaces
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow::anyhow!("--server-pid {pid}: unreadable /proc stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime, fields 14 and 15 of stat (11 and 12 after the name), in USER_HZ
    // ticks: 100 a second in Linux's user ABI whatever the kernel's own HZ
    Ok((ticks(11) + ticks(12)) / 100.0)
}

/// The server's finished-jobs counter (every kind and state) from `/metrics`.
fn finished(c: &Client) -> anyhow::Result<f64> {
    let r = c.get_text("/metrics")?;
    Ok(r.lines()
        .filter(|l| l.starts_with("kiln_service_jobs_finished"))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum())
}

fn client_loop(
    args: &ServerArgs,
    body: &Value,
    batch: Option<u64>,
    stop: Instant,
    abort: &AtomicBool,
) -> Tally {
    let c = Client::new(args, Duration::from_secs(90));
    let mut t = Tally::default();
    let batch_body = batch.map(|n| json!({"jobs": vec![body.clone(); n as usize]}));
    while Instant::now() < stop && !abort.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        let r = match &batch_body {
            Some(b) => c.post("/v1/jobs:batch", b, None),
            None => c.post("/v1/jobs?wait=30", body, None),
        };
        match r {
            Ok(r) if r.status == 200 && batch.is_none() && r.body["state"] == "succeeded" => {
                t.ok += 1;
                t.latencies_ms.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            Ok(r) if r.status == 202 && batch.is_some() => {
                t.accepted += r.body["jobs"].as_array().map_or(0, |j| j.len() as u64);
            }
            Ok(r) if r.status == 202 => t.late += 1,
            Ok(r) if r.status == 429 || r.status == 503 => {
                t.rejected += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(r) => {
                t.failed += 1;
                t.first_error
                    .get_or_insert_with(|| format!("HTTP {}: {}", r.status, r.body));
            }
            Err(e) => {
                t.failed += 1;
                t.first_error.get_or_insert_with(|| e.to_string());
                // a server that is gone: stop every client rather than spin
                abort.store(true, Ordering::Relaxed);
            }
        }
    }
    t
}

fn pct(v: &[f64], p: f64) -> Option<f64> {
    (!v.is_empty()).then(|| v[((v.len() - 1) as f64 * p).round() as usize])
}

/// Run `kiln load`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if !(args.duration.is_finite() && args.duration > 0.0 && args.duration <= 86_400.0) {
        return Err(anyhow::anyhow!(kiln::Error::invalid(
            "duration",
            format!("{} s; give seconds in (0, 86400]", args.duration)
        )));
    }
    let probe = Client::new(&args.server, Duration::from_secs(30));
    let before = if args.batch.is_some() {
        finished(&probe)?
    } else {
        0.0
    };
    let cpu0 = args.server_pid.map(cpu_seconds).transpose()?;
    let body = job(args.options);
    let abort = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let stop = t0 + Duration::from_secs_f64(args.duration);
    let handles: Vec<_> = (0..args.clients)
        .map(|_| {
            let (server, body, abort, batch) = (args.server.clone(), body.clone(), abort.clone(), args.batch);
            std::thread::spawn(move || client_loop(&server, &body, batch, stop, &abort))
        })
        .collect();
    let mut all = Tally::default();
    for h in handles {
        let t = h.join().map_err(|_| anyhow::anyhow!("a load client panicked"))?;
        all.ok += t.ok;
        all.accepted += t.accepted;
        all.late += t.late;
        all.rejected += t.rejected;
        all.failed += t.failed;
        all.latencies_ms.extend(t.latencies_ms);
        if all.first_error.is_none() {
            all.first_error = t.first_error;
        }
    }
    let submit_secs = t0.elapsed().as_secs_f64();
    if args.batch.is_some() {
        // every accepted job finished: the server's counter is the only witness
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let done = finished(&probe)? - before;
            if done >= all.accepted as f64 {
                all.ok = done as u64;
                break;
            }
            if Instant::now() > deadline {
                return Err(anyhow::anyhow!(
                    "{} of {} accepted jobs finished after 600 s more; is the server's \
                     /metrics that of the node running them?",
                    done,
                    all.accepted
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let server_cpu = match (args.server_pid, cpu0) {
        (Some(pid), Some(c0)) => Some(cpu_seconds(pid)? - c0),
        _ => None,
    };
    all.latencies_ms.sort_by(f64::total_cmp);
    let rate = all.ok as f64 / secs;
    let cpu_per_1k = server_cpu.map(|c| c * 1000.0 / all.ok.max(1) as f64);
    let out = json!({
        "mode": if args.batch.is_some() { "batch" } else { "single" },
        "clients": args.clients,
        "batch": args.batch,
        "options_per_job": args.options,
        "submit_seconds": submit_secs,
        "seconds": secs,
        "jobs_finished": all.ok,
        "jobs_per_second": rate,
        "accepted": all.accepted,
        "late_202": all.late,
        "rejected_429_503": all.rejected,
        "failed": all.failed,
        "first_error": all.first_error,
        "p50_ms": pct(&all.latencies_ms, 0.5),
        "p99_ms": pct(&all.latencies_ms, 0.99),
        "server_cpu_seconds": server_cpu,
        "server_cpu_s_per_1000_jobs": cpu_per_1k,
    });
    if args.server.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{} jobs in {secs:.2} s: {rate:.0} jobs/s ({} clients, {}){}{}",
            all.ok,
            args.clients,
            match args.batch {
                Some(n) => format!("batches of {n}"),
                None => "one job a request, ?wait=30".to_string(),
            },
            match (pct(&all.latencies_ms, 0.5), pct(&all.latencies_ms, 0.99)) {
                (Some(a), Some(b)) => format!(", p50 {a:.2} ms, p99 {b:.2} ms"),
                _ => String::new(),
            },
            cpu_per_1k.map_or(String::new(), |c| format!(", server CPU {c:.3} s / 1,000 jobs")),
        );
        if all.late + all.rejected + all.failed > 0 {
            println!(
                "not counted: {} past the wait (202), {} refused (429/503), {} failed{}",
                all.late,
                all.rejected,
                all.failed,
                all.first_error
                    .as_ref()
                    .map_or(String::new(), |e| format!(" (first: {e})"))
            );
        }
    }
    Ok(if all.ok > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
