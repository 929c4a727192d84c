//! Fault drills on the SQLite store (issue 33), each ending in the history check of
//! `drill_support` (every accepted job ends exactly once; no finished job's result changes
//! after it was read):
//! - repeated kills: `kill -9` of the server several times under load, restarted on the
//!   same data dir each time;
//! - disk full: the server runs under `RLIMIT_FSIZE` a little above its database's size
//!   (SIGXFSZ ignored, so writes past it fail with EFBIG, which SQLite reports as a write
//!   error); submissions get 503 `store_full` with a `Retry-After`, never a 500; when the
//!   limit is raised (`prlimit --pid`: space returns) the service recovers in place and
//!   finishes every accepted job.
//!
//! Short versions by default (a few hundred jobs). The long versions:
//! `KILN_DRILL_JOBS=100000 cargo test --release -p kiln-cli --test drills_sqlite -- --nocapture`
#![allow(clippy::unwrap_used)]

mod drill_support;
mod service_support;

use drill_support::*;
use service_support::*;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "drill-token-1";

fn config(dir: &Path) -> String {
    let p = dir.join("service.toml");
    std::fs::write(
        &p,
        format!(
            "[limits]\nmax_queue = 1000000\nmax_in_flight_per_token = 1000000\n\
             [[tokens]]\nname = \"drill\"\ntoken = \"{TOKEN}\"\nkinds = [\"price\"]\n"
        ),
    )
    .unwrap();
    p.to_str().unwrap().to_string()
}

fn start_node(data: &Path, cfg: &str, wrap: Option<&str>) -> (Server, Log) {
    start_logged(data, &["--service-config", cfg, "--cpu-workers", "2"], wrap)
}

/// Every job in the SQLite store, read behind the server's back (python3's sqlite3: the
/// test crate has no SQLite client, and CI has python3 for the Python package).
fn stored(db: &Path) -> Vec<Stored> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, json, sys\n\
             c = sqlite3.connect(sys.argv[1])\n\
             q = 'SELECT j.id, j.idem_key, j.state, (SELECT count(*) FROM results r WHERE r.job_id = j.id), \
             (SELECT body FROM results r WHERE r.job_id = j.id) FROM jobs j'\n\
             print(json.dumps([list(r) for r in c.execute(q)]))",
        )
        .arg(db)
        .output()
        .expect("python3 reads the store");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    rows.iter()
        .map(|r| Stored {
            id: r[0].as_str().unwrap().to_string(),
            key: r[1].as_str().map(str::to_string),
            state: r[2].as_str().unwrap().to_string(),
            results: r[3].as_u64().unwrap() as u32,
            result: r[4].as_str().map(|b| serde_json::from_str(b).unwrap()),
        })
        .collect()
}

#[test]
fn repeated_kills_lose_nothing() {
    let _one = serial();
    let t0 = Instant::now();
    let n = drill_jobs(400);
    let d = data_dir();
    let cfg = config(d.path());
    let data = d.path().join("data");
    let (s, _log) = start_node(&data, &cfg, None);
    let nodes: Nodes = Arc::new(Mutex::new(vec![s.addr]));
    let server = Arc::new(Mutex::new(s));
    let h = Arc::new(History::default());
    let stop = Arc::new(AtomicBool::new(false));
    let rd = reader(h.clone(), nodes.clone(), TOKEN.into(), stop.clone());
    let clients = submit_all(&h, &nodes, TOKEN, n, 4, Duration::from_secs(120));
    // Kill at a fifth, two fifths and three fifths of the submissions.
    let kills = 3;
    for k in 1..=kills {
        let end = Instant::now() + Duration::from_secs(300);
        while h.tally().0 < n * k / (kills + 2) {
            assert!(Instant::now() < end, "no progress before kill {k}");
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut g = server.lock().unwrap();
        g.kill9();
        let (s2, _) = start_node(&data, &cfg, None);
        nodes.lock().unwrap()[0] = s2.addr;
        *g = s2;
    }
    for c in clients {
        c.join().unwrap();
    }
    wait_all(&h, &nodes, TOKEN, 300);
    stop.store(true, Ordering::SeqCst);
    rd.join().unwrap();
    let summary = h.assert_ok(&stored(&data.join("jobs.sqlite3")));
    assert_eq!(h.server_errors.load(Ordering::SeqCst), 0, "no 500s");
    println!(
        "sqlite repeated kills ({kills}): {summary}; {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn disk_full_answers_503_and_recovers_when_space_returns() {
    let _one = serial();
    let t0 = Instant::now();
    let n = drill_jobs(300);
    let d = data_dir();
    let cfg = config(d.path());
    let data = d.path().join("data");
    // Create the database, then run under a file size limit a little above it.
    let (mut s, _) = start_node(&data, &cfg, None);
    assert!(s.terminate(30).is_some_and(|st| st.success()));
    let db = data.join("jobs.sqlite3");
    let limit = std::fs::metadata(&db).unwrap().len() + 128 * 1024;
    let wrap = format!("trap '' XFSZ; exec prlimit --fsize={limit}:unlimited \"$0\" \"$@\"");
    let (s, log) = start_node(&data, &cfg, Some(&wrap));
    let pid = s.child.id();
    let nodes: Nodes = Arc::new(Mutex::new(vec![s.addr]));
    let h = Arc::new(History::default());
    let stop = Arc::new(AtomicBool::new(false));
    let rd = reader(h.clone(), nodes.clone(), TOKEN.into(), stop.clone());
    let clients = submit_all(&h, &nodes, TOKEN, n, 4, Duration::from_secs(300));
    // Full: submissions answer 503 store_full for a while.
    let end = Instant::now() + Duration::from_secs(60);
    let full = || h.codes_503.lock().unwrap().get("store_full").map_or(0, |c| c.0);
    while full() < 20 {
        assert!(
            Instant::now() < end,
            "the store never reported a full disk ({} accepted; 503s {:?}; log: {})",
            h.tally().0,
            h.codes_503.lock().unwrap(),
            log.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let accepted_while_full = h.tally().0;
    std::thread::sleep(Duration::from_secs(2));
    // Space returns.
    let st = Command::new("prlimit")
        .arg(format!("--pid={pid}"))
        .arg("--fsize=unlimited:unlimited")
        .status()
        .unwrap();
    assert!(st.success(), "prlimit --pid");
    for c in clients {
        c.join().unwrap();
    }
    wait_all(&h, &nodes, TOKEN, 300);
    stop.store(true, Ordering::SeqCst);
    rd.join().unwrap();
    let summary = h.assert_ok(&stored(&db));
    assert_eq!(h.server_errors.load(Ordering::SeqCst), 0, "no 500s");
    let codes = h.codes_503.lock().unwrap().clone();
    assert!(
        codes["store_full"].1,
        "every store_full 503 has a Retry-After: {codes:?}"
    );
    let (a, r, amb) = h.tally();
    assert_eq!((a, r, amb), (n, 0, 0), "every submission accepted in the end");
    drop(s);
    println!(
        "sqlite disk full: {summary}; {} accepted before the limit was raised; 503s {codes:?}; {:.1} s",
        accepted_while_full,
        t0.elapsed().as_secs_f64()
    );
}

fn seen(result: f64) -> Seen {
    Seen {
        state: "succeeded".into(),
        result: Some(serde_json::json!({ "price": result })),
    }
}

fn row(id: &str, key: &str, results: u32, price: f64) -> Stored {
    Stored {
        id: id.into(),
        key: Some(key.into()),
        state: "succeeded".into(),
        results,
        result: Some(serde_json::json!({ "price": price })),
    }
}

/// The checker itself: a clean history passes, and each violation it exists for is caught.
#[test]
fn the_history_checker_catches_lost_duplicated_and_changed_results() {
    let base = || {
        let h = History::default();
        h.submitted("k0", Submitted::Accepted("j0".into()));
        h.submitted("k1", Submitted::Accepted("j1".into()));
        h.submitted("k2", Submitted::Refused(400, "invalid_params".into()));
        h.submitted("k3", Submitted::Ambiguous("transport".into()));
        h.read("j0", seen(1.0));
        h.read("j0", seen(1.0));
        h
    };
    let good = vec![
        row("j0", "k0", 1, 1.0),
        row("j1", "k1", 1, 2.0),
        row("j3", "k3", 1, 3.0),
    ];
    assert!(base().check(&good).is_ok(), "{:?}", base().check(&good));
    // An ambiguous submission need not be stored.
    assert!(base().check(&good[..2]).is_ok());
    let fails = |h: History, rows: &[Stored], what: &str| {
        let e = h.check(rows).expect_err(what);
        assert!(!e.is_empty(), "{what}");
    };
    fails(base(), &good[1..], "an accepted job lost");
    let mut dup = good.clone();
    dup[1].results = 2;
    fails(base(), &dup, "two result rows");
    let mut twice = good.clone();
    twice.push(row("j1b", "k1", 1, 2.0));
    fails(base(), &twice, "a retried key stored twice");
    let mut changed = good.clone();
    changed[0].result = Some(serde_json::json!({ "price": 1.5 }));
    fails(base(), &changed, "the stored result differs from the first read");
    let h = base();
    h.read("j0", seen(1.25));
    fails(h, &good, "a later read differs from the first");
    let mut refused = good.clone();
    refused.push(row("j2", "k2", 1, 9.0));
    fails(base(), &refused, "a refused submission stored");
    let mut stranger = good.clone();
    stranger.push(row("jx", "kx", 1, 9.0));
    fails(base(), &stranger, "a job nobody submitted");
    let mut open = good.clone();
    open[1].state = "running".into();
    open[1].results = 0;
    fails(base(), &open, "an accepted job never finished");
}
