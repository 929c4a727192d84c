//! Shared helpers of the service tests: a `kiln serve` child on loopback (port 0) and a
//! minimal HTTP/1.1 client over a TcpStream, so tests can also send what a well-behaved
//! client never would.
#![allow(dead_code, clippy::unwrap_used)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// CPU seconds (user + system) process `pid` has used so far, its children (the workers)
/// excluded: `/proc/PID/stat`'s utime and stime; 0 where it cannot be read.
pub fn process_cpu_seconds(pid: u32) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let Some(close) = stat.rfind(')') else {
        return 0.0;
    };
    // after the name: state is field 3 overall; utime and stime are 14 and 15
    let f: Vec<&str> = stat[close + 2..].split(' ').collect();
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (field(11) + field(12)) as f64 / tick
}

/// A running `kiln serve`.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
}

/// The binary under test: `KILN_BIN` (the carried binary on the GPU machine, where the path
/// cargo baked in does not exist) or the one cargo built.
pub fn kiln_bin() -> PathBuf {
    std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")))
}

/// `kiln --device cpu serve --listen 127.0.0.1:0 --data-dir DIR`, the command every service
/// test starts from (add arguments and environment, then [`spawn_announced`]).
pub fn serve_command(data_dir: &Path) -> Command {
    let mut c = Command::new(kiln_bin());
    c.args([
        "--device",
        "cpu",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
    ])
    .arg(data_dir)
    .env("KILN_LOG", "warn")
    .env_remove("KILN_TOKENS_FILE");
    c
}

/// Spawns `cmd` (a `kiln serve` command line; its stdout is taken here) and waits, at most
/// 60 s, for the address it announces on its first line; returns the server and that line.
/// `stderr_log`, where the command writes its stderr to a file, is quoted if it never does.
pub fn spawn_announced(mut cmd: Command, data_dir: &Path, stderr_log: Option<&Path>) -> (Server, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("start kiln serve");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        if let Some(Ok(l)) = lines.next() {
            let _ = tx.send(l);
        }
        for _ in lines {}
    });
    let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
        let log = stderr_log.map(|p| std::fs::read_to_string(p).unwrap_or_default());
        panic!("kiln serve announced no address: {}", log.unwrap_or_default())
    });
    let addr: SocketAddr = line
        .split("://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in `{line}`"));
    let s = Server {
        child,
        addr,
        data_dir: data_dir.to_path_buf(),
    };
    (s, line)
}

/// Polls /readyz until it answers 200, at most 60 s.
pub fn wait_ready(s: &Server) {
    let end = Instant::now() + Duration::from_secs(60);
    while s.get("/readyz", None).map(|r| r.status).ok() != Some(200) {
        assert!(Instant::now() < end, "kiln serve did not become ready");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Start `kiln --device cpu serve --listen 127.0.0.1:0 --data-dir DIR ARGS...` and wait
/// until /readyz answers 200.
pub fn start(data_dir: &Path, args: &[&str]) -> Server {
    let mut cmd = serve_command(data_dir);
    cmd.args(args).stderr(Stdio::inherit());
    let (s, _) = spawn_announced(cmd, data_dir, None);
    wait_ready(&s);
    s
}

impl Server {
    pub fn get(&self, path: &str, token: Option<&str>) -> std::io::Result<Reply> {
        request(self.addr, "GET", path, token, &[], None)
    }

    pub fn post_json(&self, path: &str, token: Option<&str>, body: &Value) -> Reply {
        request(
            self.addr,
            "POST",
            path,
            token,
            &[],
            Some(body.to_string().as_bytes()),
        )
        .unwrap()
    }

    /// Kill with SIGKILL (no cleanup), and reap.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Send `sig` (a name `kill` takes: STOP, CONT, ...) to the server process.
    pub fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status();
    }

    /// SIGTERM, then wait up to `secs` for a clean exit; the exit status.
    pub fn terminate(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Wait for a job to finish (GET ?wait=), up to `secs`.
    pub fn wait_job(&self, id: &str, token: Option<&str>, secs: u64) -> Value {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            let r = self.get(&format!("/v1/jobs/{id}?wait=5"), token).unwrap();
            assert!(
                r.status == 200 || r.status == 202,
                "GET job {id}: {} {}",
                r.status,
                r.text()
            );
            let j = r.json();
            if matches!(j["state"].as_str(), Some("succeeded" | "failed" | "cancelled"))
                || Instant::now() > end
            {
                return j;
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// The error code of an error body.
    pub fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or("").to_string()
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    extra: &[(&str, &str)],
    body: Option<&[u8]>,
) -> std::io::Result<Reply> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(90)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    if let Some(b) = body {
        // The server may answer (413) and close before reading it all.
        let _ = s.write_all(b);
    }
    // Read until the server closes; a reset after a complete response (the server answered
    // 413 without reading the body) still yields that response.
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if raw.is_empty() => return Err(e),
            Err(_) => break,
        }
    }
    parse(&raw)
}

fn parse(raw: &[u8]) -> std::io::Result<Reply> {
    let bad = || {
        std::io::Error::other(format!(
            "bad response: {:?}",
            String::from_utf8_lossy(&raw[..raw.len().min(200)])
        ))
    };
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(bad)?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|_| bad())?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(bad)?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body).ok_or_else(bad)?;
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let n = usize::from_str_radix(std::str::from_utf8(&b[..eol]).ok()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if n == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..n)?);
        b = b.get(n + 2..)?;
    }
}

/// A European option as the API takes it.
pub fn option(strike: f64) -> Value {
    serde_json::json!({
        "option_type": "call", "style": "european", "spot": 100.0, "strike": strike,
        "rate": 0.05, "dividend": 0.0, "volatility": 0.2, "maturity": 1.0
    })
}

/// A pricing job of `n` European calls (analytic).
pub fn price_job(first_strike: f64, n: usize) -> Value {
    let opts: Vec<Value> = (0..n).map(|i| option(first_strike + i as f64)).collect();
    serde_json::json!({"kind": "price", "params": {"method": "analytic"}, "inputs": {"options": opts}})
}

fn norm_cdf(x: f64) -> f64 {
    // Abramowitz–Stegun 7.1.26 is too coarse; use erfc through a continued series.
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    // Numerical Recipes' erfcc (fractional error < 1.2e-7).
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.26551223
            + t * (1.00002368
                + t * (0.37409196
                    + t * (0.09678418
                        + t * (-0.18628806
                            + t * (0.27886807
                                + t * (-1.13520398
                                    + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Black–Scholes call price of [`option`]`(strike)` (independent of kiln's code).
pub fn bs_call(strike: f64) -> f64 {
    let (s, r, v, t) = (100.0f64, 0.05f64, 0.2f64, 1.0f64);
    let d1 = ((s / strike).ln() + (r + 0.5 * v * v) * t) / (v * t.sqrt());
    let d2 = d1 - v * t.sqrt();
    s * norm_cdf(d1) - strike * (-r * t).exp() * norm_cdf(d2)
}

/// A fresh data dir under the system temp dir.
pub fn data_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("kiln-service-test")
        .tempdir()
        .unwrap()
}

/// Row `i` of the sharding tests' book: every third a Heston put, the others Black-Scholes
/// calls and puts.
pub fn shard_row(i: u64) -> Value {
    let k = 80.0 + (i % 41) as f64;
    if i % 3 == 1 {
        serde_json::json!({"model": "heston", "option_type": "put", "spot": 100.0, "strike": k,
            "rate": 0.03, "maturity": 1.0, "kappa": 1.5, "theta": 0.04, "xi": 0.5, "rho": -0.6,
            "v0": 0.05})
    } else {
        serde_json::json!({"option_type": if i % 2 == 0 { "call" } else { "put" }, "spot": 100.0,
            "strike": k, "rate": 0.03, "volatility": 0.15 + 0.001 * (i % 97) as f64,
            "maturity": 1.0})
    }
}

/// Each price's bits of a finished pricing job, in order.
pub fn price_bits(job: &Value) -> Vec<u64> {
    job["result"]["prices"]
        .as_array()
        .unwrap_or_else(|| panic!("no prices: {job}"))
        .iter()
        .map(|r| r["price"].as_f64().unwrap_or(f64::NAN).to_bits())
        .collect()
}

/// Submit `body` to `s` as `token` (202 expected); the job id.
pub fn submit_as(s: &Server, token: &str, body: &Value) -> String {
    let r = s.post_json("/v1/jobs", Some(token), body);
    assert_eq!(r.status, 202, "{}", r.text());
    r.json()["id"].as_str().unwrap().to_string()
}

/// Job `id` once it has succeeded (waiting up to `secs`).
pub fn succeeded(s: &Server, id: &str, token: &str, secs: u64) -> Value {
    let j = s.wait_job(id, Some(token), secs);
    assert_eq!(j["state"], "succeeded", "{j}");
    j
}
