//! The fault drills' history: every submission's outcome and every read of a finished job,
//! checked at the end against the store ([`History::check`]):
//! - every job the client got a 202 (or 200) for is stored once and finished once (a
//!   terminal state, one result row when it succeeded);
//! - every read of a finished job saw what the first read saw, and the stored result is
//!   that too (no finished job's result changes after it was read);
//! - no job the client was refused appears in the store; a job stored without its 202 must
//!   come from an ambiguous submission (below), and it must end exactly once too.
//!
//! Ambiguous submissions: every submission carries its own `Idempotency-Key`, and a
//! transport error (the node killed or frozen mid-request), a 5xx, or a 429 is retried with
//! the same key until a definite answer: a 202/200 (accepted; the store returns the first
//! job for a retried key, so a retry never stores a second one) or a 4xx other than 429
//! (refused, nothing stored). Only a submission still without a definite answer when its
//! tries run out is ambiguous: its job may or may not be in the store, and is checked like
//! an accepted one if it is. Jobs are matched to submissions by their idempotency key in the
//! store, so a retry that stored a second job would show as a duplicate.
//!
//! The client is a small HTTP/1.1 one with short timeouts (a frozen node must not hold a
//! drill client for the 90 s of `service_support::request`).
#![allow(dead_code, clippy::unwrap_used)]

use serde_json::Value;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one submission came to, after its retries.
#[derive(Clone, Debug, PartialEq)]
pub enum Submitted {
    /// 202 or 200, with the job's id.
    Accepted(String),
    /// A definite refusal (a 4xx other than 429): nothing stored.
    Refused(u16, String),
    /// No definite answer: the job may or may not be stored.
    Ambiguous(String),
}

/// A job as the store holds it, for [`History::check`].
#[derive(Clone, Debug)]
pub struct Stored {
    pub id: String,
    pub key: Option<String>,
    pub state: String,
    /// Result rows of the job (one table keyed by job id: 0 or 1 unless the schema broke).
    pub results: u32,
    pub result: Option<Value>,
}

/// What a read of a finished job saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    pub state: String,
    pub result: Option<Value>,
}

#[derive(Default)]
struct Inner {
    subs: HashMap<String, Submitted>,
    reads: HashMap<String, Vec<Seen>>,
}

/// The history of a drill (see the module docs).
#[derive(Default)]
pub struct History {
    inner: Mutex<Inner>,
    /// 500s answered to any request: a drill fails on any.
    pub server_errors: AtomicUsize,
    /// 503s (with their codes counted by the caller's log): retried.
    pub unavailable: AtomicUsize,
    /// Distinct 503 codes seen, with a `Retry-After` or not.
    pub codes_503: Mutex<HashMap<String, (usize, bool)>>,
}

impl History {
    pub fn submitted(&self, key: &str, s: Submitted) {
        self.inner.lock().unwrap().subs.insert(key.to_string(), s);
    }

    /// A read of a finished job.
    pub fn read(&self, id: &str, seen: Seen) {
        self.inner
            .lock()
            .unwrap()
            .reads
            .entry(id.to_string())
            .or_default()
            .push(seen);
    }

    /// The ids of the accepted jobs.
    pub fn accepted(&self) -> Vec<String> {
        let g = self.inner.lock().unwrap();
        g.subs
            .values()
            .filter_map(|s| match s {
                Submitted::Accepted(id) => Some(id.clone()),
                _ => None,
            })
            .collect()
    }

    /// Counts of (accepted, refused, ambiguous) submissions.
    pub fn tally(&self) -> (usize, usize, usize) {
        let g = self.inner.lock().unwrap();
        let mut t = (0, 0, 0);
        for s in g.subs.values() {
            match s {
                Submitted::Accepted(_) => t.0 += 1,
                Submitted::Refused(..) => t.1 += 1,
                Submitted::Ambiguous(_) => t.2 += 1,
            }
        }
        t
    }

    /// The ids read as finished so far.
    pub fn finished(&self) -> usize {
        self.inner.lock().unwrap().reads.len()
    }

    /// Check the history against the store's jobs (see the module docs): `Ok` with a
    /// one-line summary, or every violation found.
    pub fn check(&self, stored: &[Stored]) -> Result<String, Vec<String>> {
        let g = self.inner.lock().unwrap();
        let mut bad = Vec::new();
        let mut by_id: HashMap<&str, &Stored> = HashMap::new();
        let mut by_key: HashMap<&str, Vec<&Stored>> = HashMap::new();
        for s in stored {
            if by_id.insert(&s.id, s).is_some() {
                bad.push(format!("job {} stored twice", s.id));
            }
            if let Some(k) = &s.key {
                by_key.entry(k).or_default().push(s);
            }
            if s.results > 1 {
                bad.push(format!("job {} has {} result rows", s.id, s.results));
            }
        }
        let terminal = |st: &str| matches!(st, "succeeded" | "failed" | "cancelled");
        let ends_once = |s: &Stored, bad: &mut Vec<String>| {
            if !terminal(&s.state) {
                bad.push(format!("job {} never finished: {}", s.id, s.state));
            } else if s.state == "succeeded" && s.results != 1 {
                bad.push(format!("job {} succeeded with {} result rows", s.id, s.results));
            }
        };
        for (key, sub) in &g.subs {
            let jobs = by_key.get(key.as_str()).map_or(&[][..], |v| v.as_slice());
            match sub {
                Submitted::Accepted(id) => {
                    match by_id.get(id.as_str()) {
                        None => bad.push(format!("accepted job {id} (key {key}) lost")),
                        Some(s) => ends_once(s, &mut bad),
                    }
                    if jobs.len() > 1 || jobs.iter().any(|s| s.id != *id) {
                        bad.push(format!("key {key}: accepted as {id}, stored as {:?}", ids(jobs)));
                    }
                }
                Submitted::Refused(code, why) if !jobs.is_empty() => bad.push(format!(
                    "key {key} refused ({code} {why}) but stored as {:?}",
                    ids(jobs)
                )),
                Submitted::Refused(..) => {}
                Submitted::Ambiguous(_) => {
                    if jobs.len() > 1 {
                        bad.push(format!("key {key}: stored {} times", jobs.len()));
                    }
                    for s in jobs {
                        ends_once(s, &mut bad);
                    }
                }
            }
        }
        for s in stored {
            if !s.key.as_ref().is_some_and(|k| g.subs.contains_key(k)) {
                bad.push(format!("job {} (key {:?}) was never submitted", s.id, s.key));
            }
        }
        let mut reads = 0;
        for (id, seen) in &g.reads {
            reads += seen.len();
            let first = &seen[0];
            if let Some(other) = seen.iter().find(|s| *s != first) {
                bad.push(format!("job {id}: read {first:?}, later {other:?}"));
            }
            match by_id.get(id.as_str()) {
                None => bad.push(format!("job {id} was read finished but is not stored")),
                Some(s) if s.state != first.state || s.result != first.result => bad.push(format!(
                    "job {id}: read {first:?}, stored {} {:?}",
                    s.state, s.result
                )),
                Some(_) => {}
            }
        }
        let (a, r, amb) = {
            let mut t = (0, 0, 0);
            for s in g.subs.values() {
                match s {
                    Submitted::Accepted(_) => t.0 += 1,
                    Submitted::Refused(..) => t.1 += 1,
                    Submitted::Ambiguous(_) => t.2 += 1,
                }
            }
            t
        };
        if bad.is_empty() {
            Ok(format!(
                "{a} accepted, {r} refused, {amb} ambiguous; {} stored; {reads} reads of {} finished jobs",
                stored.len(),
                g.reads.len()
            ))
        } else {
            Err(bad)
        }
    }

    /// [`History::check`], panicking with the first violations.
    pub fn assert_ok(&self, stored: &[Stored]) -> String {
        match self.check(stored) {
            Ok(s) => s,
            Err(bad) => panic!(
                "history check: {} violations, the first: {:#?}",
                bad.len(),
                &bad[..bad.len().min(10)]
            ),
        }
    }
}

fn ids(v: &[&Stored]) -> Vec<String> {
    v.iter().map(|s| s.id.clone()).collect()
}

/// A response.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: Value,
}

impl Answer {
    pub fn code(&self) -> String {
        self.body["error"]["code"].as_str().unwrap_or("").to_string()
    }
}

/// One request with a `timeout` for connecting and for the whole answer.
pub fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    timeout: Duration,
) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let b = body.unwrap_or("");
    if body.is_some() {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(b);
    s.write_all(head.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let bad = || std::io::Error::other("bad response");
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(bad)?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|_| bad())?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(bad)?;
    let mut retry_after = None;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            if k.trim().eq_ignore_ascii_case("transfer-encoding") {
                return Err(std::io::Error::other("chunked answers are not read here"));
            }
            if k.trim().eq_ignore_ascii_case("retry-after") {
                retry_after = Some(v.trim().to_string());
            }
        }
    }
    let body = serde_json::from_slice(&raw[split + 4..]).unwrap_or(Value::Null);
    Ok(Answer {
        status,
        retry_after,
        body,
    })
}

/// The nodes a drill's clients talk to: addresses that change when a node is restarted.
pub type Nodes = Arc<Mutex<Vec<SocketAddr>>>;

/// The submission `key`: `body` sent to node `first % n` then the next ones, with retries
/// under one idempotency key until a definite answer or `budget` passes (see the module docs).
pub fn submit(
    h: &History,
    nodes: &Nodes,
    token: &str,
    key: &str,
    body: &str,
    first: usize,
    budget: Duration,
) {
    let end = Instant::now() + budget;
    let auth = format!("Bearer {token}");
    let mut last = String::from("never sent");
    let mut attempt = first;
    while Instant::now() < end {
        let addr = {
            let n = nodes.lock().unwrap();
            n[attempt % n.len()]
        };
        attempt += 1;
        let headers = [("Authorization", auth.as_str()), ("Idempotency-Key", key)];
        match call(
            addr,
            "POST",
            "/v1/jobs",
            &headers,
            Some(body),
            Duration::from_secs(10),
        ) {
            Ok(a) if a.status == 202 || a.status == 200 => {
                let id = a.body["id"].as_str().unwrap_or_default().to_string();
                h.submitted(key, Submitted::Accepted(id));
                return;
            }
            Ok(a) if a.status == 429 || a.status >= 500 => {
                note_5xx(h, &a);
                last = format!("{} {}", a.status, a.code());
            }
            Ok(a) => {
                h.submitted(key, Submitted::Refused(a.status, a.code()));
                return;
            }
            Err(e) => last = format!("transport: {e}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    h.submitted(key, Submitted::Ambiguous(last));
}

fn note_5xx(h: &History, a: &Answer) {
    if a.status == 500 {
        h.server_errors.fetch_add(1, Ordering::SeqCst);
        eprintln!("500: {}", a.body);
    }
    if a.status == 503 {
        h.unavailable.fetch_add(1, Ordering::SeqCst);
        let mut c = h.codes_503.lock().unwrap();
        let e = c.entry(a.code()).or_insert((0, true));
        e.0 += 1;
        e.1 &= a.retry_after.is_some();
    }
}

/// Read job `id` once from any node; records the read when it is finished. Whether it is.
pub fn read_once(h: &History, nodes: &Nodes, token: &str, id: &str, pick: usize) -> bool {
    let addr = {
        let n = nodes.lock().unwrap();
        n[pick % n.len()]
    };
    let auth = format!("Bearer {token}");
    let Ok(a) = call(
        addr,
        "GET",
        &format!("/v1/jobs/{id}"),
        &[("Authorization", auth.as_str())],
        None,
        Duration::from_secs(5),
    ) else {
        return false;
    };
    if a.status >= 500 {
        note_5xx(h, &a);
        return false;
    }
    let state = a.body["state"].as_str().unwrap_or("").to_string();
    if !matches!(state.as_str(), "succeeded" | "failed" | "cancelled") {
        return false;
    }
    let result = a.body.get("result").filter(|r| !r.is_null()).cloned();
    h.read(id, Seen { state, result });
    true
}

/// Poll every accepted job until it is finished, at most `secs` (or 10 ms a job, for the
/// long versions); each is read once more afterwards (a second read that must agree with
/// the first). Panics naming what is open.
pub fn wait_all(h: &History, nodes: &Nodes, token: &str, secs: u64) {
    let mut open: Vec<String> = h.accepted();
    let secs = secs.max(open.len() as u64 / 100);
    let end = Instant::now() + Duration::from_secs(secs);
    let mut i = 0usize;
    while !open.is_empty() {
        assert!(
            Instant::now() < end,
            "{} accepted jobs not finished in {secs} s, e.g. {:?}",
            open.len(),
            &open[..open.len().min(5)]
        );
        open.retain(|id| {
            i += 1;
            !read_once(h, nodes, token, id, i)
        });
        if !open.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    for (i, id) in h.accepted().iter().enumerate() {
        read_once(h, nodes, token, id, i + 1);
    }
}

/// A reader thread: until `stop`, reads random accepted jobs (recording finished ones), so
/// results are read while faults happen and must not change afterwards.
pub fn reader(
    h: Arc<History>,
    nodes: Nodes,
    token: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut i = 0usize;
        while !stop.load(Ordering::SeqCst) {
            let ids = h.accepted();
            if ids.is_empty() {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            for _ in 0..20 {
                i = i
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                read_once(&h, &nodes, &token, &ids[(i >> 33) % ids.len()], i);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

/// The number of jobs a drill runs: `KILN_DRILL_JOBS` (the long versions: 100000), else
/// `short`.
pub fn drill_jobs(short: usize) -> usize {
    std::env::var("KILN_DRILL_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(short)
}

/// The body of submission `i`: one European call with a strike of its own, so every job's
/// result is its own.
pub fn job_body(i: usize) -> String {
    let strike = 50.0 + (i % 100_000) as f64 * 0.001;
    super::service_support::price_job(strike, 1).to_string()
}

/// Submit jobs `0..n` from `clients` threads to `nodes` (job i first to node i), then
/// return; `per_job` is each submission's retry budget.
pub fn submit_all(
    h: &Arc<History>,
    nodes: &Nodes,
    token: &str,
    n: usize,
    clients: usize,
    per_job: Duration,
) -> Vec<std::thread::JoinHandle<()>> {
    let next = Arc::new(AtomicUsize::new(0));
    (0..clients)
        .map(|_| {
            let (h, nodes, token, next) = (h.clone(), nodes.clone(), token.to_string(), next.clone());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    break;
                }
                submit(&h, &nodes, &token, &format!("k{i}"), &job_body(i), i, per_job);
            })
        })
        .collect()
}

/// A server's stderr, collected by a thread (a pipe, not a file: a file would fall under
/// the disk-full drill's size limit too).
#[derive(Clone, Default)]
pub struct Log(pub Arc<Mutex<String>>);

impl Log {
    /// Collect `child`'s stderr (spawned with `Stdio::piped()`).
    pub fn collect(child: &mut std::process::Child) -> Log {
        let log = Log::default();
        let mut err = child.stderr.take().unwrap();
        let l = log.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                l.0.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        log
    }

    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }

    /// The lines holding `needle`.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}

/// `kiln serve ARGS` on `data` (the drills' common start), its stderr collected, ready;
/// `wrap`, a `sh -c` script, puts a command in front (`prlimit`), the server's command line
/// being its `"$0" "$@"`.
pub fn start_logged(
    data: &std::path::Path,
    args: &[&str],
    wrap: Option<&str>,
) -> (super::service_support::Server, Log) {
    use super::service_support::{serve_command, spawn_announced, wait_ready};
    let mut cmd = match wrap {
        None => serve_command(data),
        Some(script) => {
            let inner = serve_command(data);
            let mut c = std::process::Command::new("sh");
            c.arg("-c").arg(script).arg(inner.get_program());
            c.args(inner.get_args());
            c.env("KILN_LOG", "warn").env_remove("KILN_TOKENS_FILE");
            c
        }
    };
    cmd.args(args).stderr(std::process::Stdio::piped());
    let (mut s, _) = spawn_announced(cmd, data, None);
    let log = Log::collect(&mut s.child);
    wait_ready(&s);
    (s, log)
}

/// One drill at a time in a test binary, whatever `--test-threads` says: a drill's faults
/// (a PostgreSQL restart) would reach the others, and their timings assume the machine.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}
