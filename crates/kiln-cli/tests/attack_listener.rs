//! Attack suite, listener and secrets (issue 36, items 4 and 7), against the real `kiln`
//! binary on loopback; every loop is bounded in count and time.
//! - slowloris connections are closed after the header-read timeout; silent connections,
//!   past the connection cap or the process's file limit, do not stop `/healthz`; with
//!   every slot busy the health reserve still answers; an idle keep-alive connection is
//!   closed after the idle timeout; HTTP/2 prior knowledge is refused unless configured;
//!   the TLS listener has the same timeouts and cap.
//! - no secret in `--print-config`, errors or logs for every store-URL form; a bad tokens
//!   line names its line only; a forbidden kind gets 403 before its inputs are looked at;
//!   `fault` needs both the flag and `kinds=fault` on the token.
#![allow(clippy::unwrap_used)]

mod service_support;

use serde_json::json;
use service_support::{data_dir, kiln_bin, price_job, request, serve_command, spawn_announced, Server};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `kiln --device cpu serve` on 127.0.0.1:0 with the service config `toml`, `args`, its
/// stderr (with `KILN_LOG=log`) in `DIR/stderr.log`, and, where given, a lowered
/// open-file limit. Waits for the announced address (and a `200` from /readyz, over plain
/// HTTP only).
fn serve(dir: &Path, toml: &str, args: &[&str], nofile: Option<u32>, log: &str) -> Server {
    let cfg = dir.join("service.toml");
    std::fs::write(&cfg, toml).unwrap();
    let stderr = std::fs::File::create(dir.join("stderr.log")).unwrap();
    let data = dir.join("data");
    let plain = serve_command(&data);
    let mut cmd = match nofile {
        // lowering a limit needs no privilege; `exec` keeps the pid (Drop kills the server)
        Some(n) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                .arg(plain.get_program())
                .args(plain.get_args());
            c
        }
        None => plain,
    };
    cmd.args(["--cpu-workers", "1", "--service-config"])
        .arg(&cfg)
        .args(args)
        .env("KILN_LOG", log)
        .env_remove("KILN_TOKENS_FILE")
        .env_remove("KILN_SERVICE_CONFIG")
        .env_remove("KILN_STORE_URL")
        .stderr(stderr);
    let (s, line) = spawn_announced(cmd, &data, Some(&dir.join("stderr.log")));
    if !line.contains("https://") {
        wait_healthz(s.addr, Duration::from_secs(60), "/readyz");
    }
    s
}

/// An open server (no tokens) runs a small pricing job to success.
fn a_job_succeeds(addr: SocketAddr) {
    let r = request(
        addr,
        "POST",
        "/v1/jobs?wait=30",
        None,
        &[],
        Some(price_job(100.0, 1).to_string().as_bytes()),
    )
    .unwrap();
    assert_eq!(r.json()["state"], "succeeded", "{}", r.text());
}

/// Poll `path` until it answers 200 (each try bounded), or panic at `within`; how long it took.
fn wait_healthz(addr: SocketAddr, within: Duration, path: &str) -> Duration {
    let t0 = Instant::now();
    loop {
        if let Ok(r) = get_bounded(addr, path, None, Duration::from_secs(5)) {
            if r.starts_with("HTTP/1.1 200") {
                return t0.elapsed();
            }
        }
        assert!(
            t0.elapsed() < within,
            "{path} did not answer 200 within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET path` on a fresh connection with a read timeout; the raw response.
fn get_bounded(addr: SocketAddr, path: &str, token: Option<&str>, t: Duration) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, t)?;
    s.set_read_timeout(Some(t))?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
    )?;
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => {}
        Err(_) if !out.is_empty() => {}
        Err(e) => return Err(e),
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Whether the peer has closed `s` (a non-blocking read sees EOF or a reset); bytes it
/// sent meanwhile are read and dropped.
fn closed(mut s: &TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// Open `n` connections that send nothing.
fn silent(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect()
}

#[test]
fn slowloris_connections_are_closed_after_the_header_timeout() {
    let d = data_dir();
    let s = serve(
        d.path(),
        "[listener]\nheader_read_timeout_ms = 2000\n",
        &[],
        None,
        "warn",
    );
    let head =
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    let t0 = Instant::now();
    let mut socks = silent(s.addr, 50);
    let mut closed_at: Vec<Option<Duration>> = vec![None; socks.len()];
    let mut sent = 0usize;
    while closed_at.iter().any(Option::is_none) && t0.elapsed() < Duration::from_secs(40) {
        // one header byte a second on every connection still open
        if t0.elapsed() >= Duration::from_secs(sent as u64) {
            for (s, c) in socks.iter_mut().zip(&closed_at) {
                if c.is_none() {
                    let _ = s.write_all(&head[sent % head.len()..][..1]);
                }
            }
            sent += 1;
        }
        for (s, c) in socks.iter_mut().zip(closed_at.iter_mut()) {
            if c.is_none() && closed(s) {
                *c = Some(t0.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let times: Vec<Duration> = closed_at
        .iter()
        .map(|c| c.expect("a slowloris connection stayed open 40 s"))
        .collect();
    let (first, last) = (times.iter().min().unwrap(), times.iter().max().unwrap());
    eprintln!("slowloris: 50 connections closed between {first:?} and {last:?} ({sent} bytes each at most)");
    assert!(
        *first >= Duration::from_millis(1900),
        "closed before the header timeout: {first:?}"
    );
    wait_healthz(s.addr, Duration::from_secs(10), "/healthz");
}

#[test]
fn silent_connections_past_the_cap_do_not_stop_healthz() {
    let d = data_dir();
    // timeouts far away: only the cap's eviction can make room
    let s = serve(
        d.path(),
        "[listener]\nmax_connections = 64\nheader_read_timeout_ms = 120000\n",
        &[],
        None,
        "warn",
    );
    let mut socks = silent(s.addr, 300);
    let took = wait_healthz(s.addr, Duration::from_secs(30), "/healthz");
    eprintln!("300 silent connections, cap 64: /healthz answered in {took:?}");
    // the oldest silent ones were closed to make room
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let n = socks.iter_mut().filter(|s| closed(s)).count();
        if n >= 300 - 64 {
            break;
        }
        assert!(
            Instant::now() < end,
            "only {n} of 300 silent connections were closed at the cap of 64"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn silent_connections_under_a_256_file_limit_do_not_stop_healthz() {
    let d = data_dir();
    // the default cap (1024) is lowered under the limit; timeouts far away
    let s = serve(
        d.path(),
        "[listener]\nheader_read_timeout_ms = 120000\n",
        &[],
        Some(256),
        "warn",
    );
    let _socks = silent(s.addr, 300);
    let took = wait_healthz(s.addr, Duration::from_secs(30), "/healthz");
    eprintln!("300 silent connections, ulimit -n 256: /healthz answered in {took:?}");
    let log = std::fs::read_to_string(d.path().join("stderr.log")).unwrap();
    assert!(log.contains("lowered to"), "the cap names the file limit: {log}");
    // a job still goes through
    a_job_succeeds(s.addr);
}

#[test]
fn with_every_slot_busy_the_health_reserve_answers() {
    let d = data_dir();
    let s = serve(
        d.path(),
        "[listener]\nmax_connections = 4\nhealth_reserve = 2\n",
        &[],
        None,
        "warn",
    );
    // four uploads whose bodies never come: a request in flight on every slot (the
    // `100 Continue` says the handler has started on it)
    let busy: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = TcpStream::connect(s.addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            c.write_all(
                b"POST /v1/blobs?format=npy HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n",
            )
            .unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 256];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
                got.extend_from_slice(&buf[..n]);
            }
            assert!(got.starts_with(b"HTTP/1.1 100"), "{}", String::from_utf8_lossy(&got));
            c.write_all(b"ab").unwrap();
            c
        })
        .collect();
    wait_healthz(s.addr, Duration::from_secs(20), "/healthz");
    let r = get_bounded(s.addr, "/v1/jobs", None, Duration::from_secs(10)).unwrap();
    assert!(
        r.starts_with("HTTP/1.1 503"),
        "a reserve slot serves only health: {r}"
    );
    assert!(r.contains("unavailable"), "{r}");
    drop(busy);
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let d = data_dir();
    let s = serve(
        d.path(),
        "[listener]\nidle_timeout_ms = 1500\nheader_read_timeout_ms = 20000\n",
        &[],
        None,
        "warn",
    );
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut answered = Instant::now();
    // two requests on one connection (kept alive in between), then silence
    for _ in 0..2 {
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !complete(&got) {
            let n = c.read(&mut buf).unwrap();
            assert!(
                n > 0,
                "closed before answering: {:?}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
        assert!(
            got.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&got)
        );
        answered = Instant::now();
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut buf = [0u8; 64];
    let n = c.read(&mut buf).unwrap_or(0);
    let idle = answered.elapsed();
    assert_eq!(n, 0, "nothing but a close after the last response");
    eprintln!("idle keep-alive connection closed {idle:?} after its last response");
    assert!(
        idle >= Duration::from_millis(1000) && idle < Duration::from_secs(20),
        "{idle:?}"
    );
}

/// Whether `raw` holds a whole HTTP/1.1 response with a Content-Length.
fn complete(raw: &[u8]) -> bool {
    let Some(h) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..h]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    raw.len() >= h + 4 + len
}

/// Send the HTTP/2 preface and an empty SETTINGS frame; all the server sends back.
fn h2_prior_knowledge(addr: SocketAddr) -> Vec<u8> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // an HTTP/2 server keeps the connection open: what it sent is the answer
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(_) => break,
        }
    }
    out
}

#[test]
fn http2_prior_knowledge_is_refused_unless_configured() {
    let d = data_dir();
    let s = serve(d.path(), "", &[], None, "warn");
    let got = h2_prior_knowledge(s.addr);
    let settings = got.len() >= 9 && got[3] == 0x04;
    assert!(
        !settings && (got.is_empty() || got.starts_with(b"HTTP/1.1 ")),
        "HTTP/2 was spoken by default: {got:?}"
    );
    let d2 = data_dir();
    let s2 = serve(d2.path(), "[listener]\nhttp2 = true\n", &[], None, "warn");
    let got = h2_prior_knowledge(s2.addr);
    assert!(
        got.len() >= 9 && got[3] == 0x04,
        "http2 = true: a SETTINGS frame, got {got:?}"
    );
}

fn tls_client(cert_pem: &str) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

#[test]
fn the_tls_listener_has_the_same_timeouts_and_cap() {
    let d = data_dir();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert_pem = ck.cert.pem();
    let (cert, key) = (d.path().join("cert.pem"), d.path().join("key.pem"));
    std::fs::write(&cert, &cert_pem).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let s = serve(
        d.path(),
        "[listener]\nheader_read_timeout_ms = 1500\nidle_timeout_ms = 1500\nmax_connections = 8\n",
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        None,
        "warn",
    );
    let cfg = tls_client(&cert_pem);
    let https = |keep: bool| -> (String, Option<Duration>) {
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
        let mut sock = TcpStream::connect(s.addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut tls = rustls::Stream::new(&mut conn, &mut sock);
        let close = if keep { "" } else { "Connection: close\r\n" };
        write!(tls, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n{close}\r\n").unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !complete(&out) {
            match tls.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        let answered = Instant::now();
        let idle = keep.then(|| {
            let _ = tls.read(&mut buf); // EOF, or an error for a close without close_notify
            answered.elapsed()
        });
        (String::from_utf8_lossy(&out).into_owned(), idle)
    };
    let end = Instant::now() + Duration::from_secs(60);
    while !https(false).0.starts_with("HTTP/1.1 200") {
        assert!(Instant::now() < end, "no 200 over TLS");
        std::thread::sleep(Duration::from_millis(100));
    }
    // a connection that never starts its handshake is closed after the header timeout
    let t0 = Instant::now();
    let mute = silent(s.addr, 1);
    while !closed(&mute[0]) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "a silent TLS connection stayed open"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(t0.elapsed() >= Duration::from_millis(1400), "{:?}", t0.elapsed());
    // an idle kept-alive TLS connection is closed after the idle timeout
    let (r, idle) = https(true);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let idle = idle.unwrap();
    assert!(
        idle >= Duration::from_millis(1000) && idle < Duration::from_secs(20),
        "{idle:?}"
    );
    // 50 silent connections past a cap of 8: HTTPS /healthz still answers
    let _socks = silent(s.addr, 50);
    let (r, _) = https(false);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
}

// ---- secrets, authorization order, the fault switch (item 7) ----

const SECRET: &str = "Hq4Zt8Wv2Ky6";

/// Whether `text` holds any 4 consecutive characters of [`SECRET`].
fn leaks(text: &str) -> bool {
    SECRET
        .as_bytes()
        .windows(4)
        .any(|w| text.contains(std::str::from_utf8(w).unwrap()))
}

fn url_forms() -> Vec<String> {
    vec![
        format!("postgres://kiln:{SECRET}@127.0.0.1:1/kiln"),
        format!("postgresql://kiln@127.0.0.1:1/kiln?password={SECRET}"),
        format!("postgres://kiln@127.0.0.1:1/kiln?sslmode=disable&password={SECRET}&connect_timeout=2"),
        format!("postgres://kiln:{SECRET}@127.0.0.1:1/kiln?password={SECRET}"),
        format!("host=127.0.0.1 port=1 user=kiln password={SECRET} dbname=kiln"),
        format!("host=127.0.0.1 password='{SECRET} x' dbname=kiln"),
    ]
}

#[test]
fn print_config_and_store_errors_show_no_secret() {
    let d = data_dir();
    let toml = d.path().join("service.toml");
    std::fs::write(
        &toml,
        format!("[[tokens]]\nname = \"clear\"\ntoken = \"{SECRET}\"\n"),
    )
    .unwrap();
    for url in url_forms() {
        // --print-config (a conninfo string is refused by validation: that error too)
        let o = Command::new(kiln_bin())
            .args(["--device", "cpu", "serve", "--print-config", "--store-url", &url])
            .arg("--service-config")
            .arg(&toml)
            .env("KILN_LOG", "debug")
            .env_remove("KILN_TOKENS_FILE")
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!leaks(&all), "--print-config with {url}: {all}");
        assert!(all.contains("***") || all.contains("redacted"), "{all}");
        // a start against a store that is not there: the connection error and the logs
        let o = Command::new(kiln_bin())
            .args([
                "--device",
                "cpu",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--store-url",
                &url,
            ])
            .arg("--data-dir")
            .arg(d.path().join("data"))
            .env("KILN_LOG", "debug")
            .env_remove("KILN_TOKENS_FILE")
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!o.status.success(), "started against a missing store: {all}");
        assert!(!leaks(&all), "start with {url}: {all}");
    }
    let o = Command::new(kiln_bin())
        .args(["--device", "cpu", "serve", "--print-config"])
        .arg("--service-config")
        .arg(&toml)
        .env_remove("KILN_TOKENS_FILE")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("clear") && !leaks(&out),
        "{out}"
    );
}

/// With a PostgreSQL server (`KILN_TEST_PG_URL`; SKIP without it): a node whose store URL
/// carries a password runs, with a debug log that never shows it.
#[test]
fn a_postgres_node_logs_no_secret() {
    let Ok(admin) = std::env::var("KILN_TEST_PG_URL") else {
        eprintln!("SKIP a_postgres_node_logs_no_secret: KILN_TEST_PG_URL is not set");
        return;
    };
    let sep = if admin.contains('?') { '&' } else { '?' };
    // a password the server may ignore (trust auth) or need: either way never printed
    let url = format!("{admin}{sep}password={SECRET}");
    let d = data_dir();
    let s = serve(d.path(), "", &["--store-url", &url], None, "debug");
    a_job_succeeds(s.addr);
    drop(s);
    let log = std::fs::read_to_string(d.path().join("stderr.log")).unwrap();
    assert!(log.contains("PostgreSQL at"), "{log}");
    assert!(!leaks(&log), "the store password in the log: {log}");
}

#[test]
fn the_client_shows_no_secret_of_its_server_url() {
    for server in [
        format!("http://kiln:{SECRET}@127.0.0.1:1"),
        format!("http://127.0.0.1:1/?token={SECRET}"),
    ] {
        let o = Command::new(kiln_bin())
            .args(["jobs", "--server", &server, "list"])
            .env_remove("KILN_SERVER")
            .env_remove("KILN_TOKEN")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("cannot reach"), "{err}");
        assert!(!leaks(&err), "{server}: {err}");
    }
}

#[test]
fn a_bad_tokens_line_names_its_line_only() {
    let d = data_dir();
    let tf = d.path().join("tokens");
    // a token with a space in it: its second half lands where a field was expected
    let (a, b) = SECRET.split_at(6);
    std::fs::write(
        &tf,
        format!("# desk\nok sha256:{}\nrisk {a} {b} kinds=price\n", "0".repeat(64)),
    )
    .unwrap();
    let o = Command::new(kiln_bin())
        .args([
            "--device",
            "cpu",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--tokens-file",
        ])
        .arg(&tf)
        .arg("--data-dir")
        .arg(d.path().join("data"))
        .env_remove("KILN_TOKENS_FILE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("line 3"), "{err}");
    // the file's path is the test's random temporary name, which may hold any three
    // characters: look for the token in the message without it
    let message = err.replace(&tf.display().to_string(), "TOKENS_FILE");
    assert!(
        !SECRET
            .as_bytes()
            .windows(3)
            .any(|w| message.contains(std::str::from_utf8(w).unwrap())),
        "part of the token in: {err}"
    );
}

#[test]
fn authorization_comes_before_validation_and_fault_needs_its_kind() {
    let d = data_dir();
    let tf = d.path().join("tokens");
    std::fs::write(
        &tf,
        format!("pricer {SECRET}-p kinds=price\nall {SECRET}-a\ndrill {SECRET}-d kinds=fault\n"),
    )
    .unwrap();
    let s = serve(
        d.path(),
        "",
        &["--tokens-file", tf.to_str().unwrap(), "--allow-fault-injection"],
        None,
        "debug",
    );
    let (pricer, all, drill) = (
        format!("{SECRET}-p"),
        format!("{SECRET}-a"),
        format!("{SECRET}-d"),
    );
    let post = |token: &str, body: &serde_json::Value| {
        request(
            s.addr,
            "POST",
            "/v1/jobs",
            Some(token),
            &[],
            Some(body.to_string().as_bytes()),
        )
        .unwrap()
    };
    // a forbidden kind whose input names a blob that does not exist: 403, not 400
    let ghost = json!({"kind": "elementwise", "params": {"op": "relu"}, "inputs": {"x": {"blob": "b_0000000000000000000000000000"}}});
    let r = post(&pricer, &ghost);
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"), "{}", r.text());
    // the same body from a token that may submit it: the missing blob is what it hears
    let r = post(&all, &ghost);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("no blob"), "{}", r.text());
    // fault: the flag is on, yet a token without kinds=fault is refused
    let fault = json!({"kind": "fault", "params": {"mode": "sleep", "sleep_ms": 1}});
    let r = post(&all, &fault);
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"), "{}", r.text());
    let r = post(&pricer, &fault);
    assert_eq!(r.status, 403, "{}", r.text());
    let r = post(&drill, &fault);
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    let j = s.wait_job(&id, Some(&drill), 60);
    assert_eq!(j["state"], "succeeded", "{j}");
    // wrong tokens too, then: no token in the server's log
    let _ = post("Hq4Zt8Wv2Ky6-wrong", &fault);
    drop(s);
    let log = std::fs::read_to_string(d.path().join("stderr.log")).unwrap();
    assert!(!log.is_empty(), "the debug log was captured");
    assert!(!leaks(&log), "a token in the server's log: {log}");
}

#[test]
fn without_the_flag_fault_is_no_kind_even_for_its_token() {
    let d = data_dir();
    let tf = d.path().join("tokens");
    std::fs::write(&tf, "drill drill-token kinds=fault\n").unwrap();
    let s = serve(
        d.path(),
        "",
        &["--tokens-file", tf.to_str().unwrap()],
        None,
        "warn",
    );
    let body = json!({"kind": "fault", "params": {"mode": "sleep", "sleep_ms": 1}});
    let r = request(
        s.addr,
        "POST",
        "/v1/jobs",
        Some("drill-token"),
        &[],
        Some(body.to_string().as_bytes()),
    )
    .unwrap();
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "unknown_kind"),
        "{}",
        r.text()
    );
}
