//! `kiln monitor` and `kiln power` end to end. Bounded: every child is killed or times out.
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")))
}

fn kiln(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env_remove("KILN_DEVICES")
        .env_remove("KILN_CONFIG")
        .output()
        .expect("run kiln")
}

fn nvml_present(s: &Value) -> bool {
    s["nvml"]["available"].as_bool().unwrap()
}

#[test]
fn once_json_exits_zero_and_says_whether_nvml_is_there() {
    let o = kiln(&["monitor", "--once", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(s["host"]["process_rss_bytes"].as_u64().unwrap() > 0);
    if kiln::testing::no_gpu_reason().is_none() {
        assert!(
            nvml_present(&s),
            "the driver reports a GPU but NVML is unavailable: {s}"
        );
    }
    if nvml_present(&s) {
        let g = &s["gpus"][0];
        assert!(g["memory_total_bytes"].as_u64().unwrap() > 0, "{g}");
        assert!(
            g["power_w"].as_f64().is_some() && g["temperature_c"].as_u64().is_some(),
            "{g}"
        );
    } else {
        assert!(
            s["nvml"]["reason"].as_str().unwrap().contains("NVML unavailable"),
            "{s}"
        );
        assert_eq!(s["gpus"].as_array().unwrap().len(), 0);
        assert_eq!(
            err.matches("NVML unavailable").count(),
            1,
            "one clear line: {err}"
        );
    }
}

#[test]
fn the_table_prints_count_ticks() {
    let o = kiln(&["monitor", "--count", "3", "--interval", "50ms"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let rows = out.lines().filter(|l| !l.starts_with('#')).count();
    assert!(rows >= 3 && rows % 3 == 0, "{out}");
    assert!(out.starts_with('#'), "header first: {out}");
}

#[test]
fn bad_arguments_are_refused() {
    assert_eq!(kiln(&["monitor", "--interval", "fast"]).status.code(), Some(2));
    let d = tempfile::tempdir().unwrap();
    let rules = d.path().join("m.toml");
    std::fs::write(&rules, "period_ms = 1\n").unwrap();
    let o = kiln(&["monitor", "--once", "--rules", rules.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(4), "{}", String::from_utf8_lossy(&o.stderr));
}

fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

#[test]
fn listen_serves_metrics_and_health_on_loopback() {
    // --count bounds the child's life even if the test dies before killing it.
    let mut child = Command::new(bin())
        .args([
            "monitor",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "100ms",
            "--count",
            "300",
        ])
        .env_remove("KILN_DEVICES")
        .env_remove("KILN_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    assert!(addr.starts_with("127.0.0.1:"));
    // Wait (bounded) for the first sample.
    let start = Instant::now();
    let health = loop {
        let (head, body) = get(&addr, "/health");
        let v: Value = serde_json::from_str(&body).unwrap();
        if v["status"] == "ok" || start.elapsed() > Duration::from_secs(10) {
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            break v;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(health["status"], "ok", "{health}");
    // With a GPU, this process holds a context and memory while the monitor samples, so
    // per-process attribution has a row (kiln's own) and every docs name must be there.
    // Where the driver reports a GPU, NVML must be there: a GPU machine without it fails.
    let gpu = match kiln::testing::no_gpu_reason() {
        None => {
            assert_eq!(health["nvml_available"], true, "this machine has a GPU: {health}");
            true
        }
        Some(reason) => {
            kiln::testing::skip_unless_required(
                kiln::testing::REQUIRE_GPU,
                "listen_serves_metrics_and_health_on_loopback [cuda]: the per-GPU series",
                reason,
            );
            false
        }
    };
    let held = if gpu {
        let rt = kiln::Runtime::new("cuda".parse().unwrap(), &kiln::Config::default()).unwrap();
        let t = rt.zeros(&[1 << 20], kiln::DType::F32).unwrap();
        t.synchronize().unwrap();
        std::thread::sleep(Duration::from_millis(600));
        Some((rt, t))
    } else {
        None
    };
    let (head, body) = get(&addr, "/metrics");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("application/openmetrics-text"),
        "{head}"
    );
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();
    let has = |n: &str| scrape.samples.iter().any(|s| s.metric == n);
    assert!(
        has("kiln_nvml_available") && has("kiln_process_resident_memory_bytes"),
        "{body}"
    );
    if held.is_some() {
        // Xid series exist only where NVML's event set watches the GPU: ask the sample.
        let once: Value = serde_json::from_slice(&kiln(&["monitor", "--once", "--json"]).stdout).unwrap();
        let watched = once["gpus"][0]["xid_watched"] == true;
        let missing: Vec<&str> = kiln_monitor::metrics::GPU_METRICS
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| !has(n) && (watched || !n.contains("xid")))
            .collect();
        assert!(missing.is_empty(), "missing from a real scrape: {missing:?}");
        let me = std::process::id().to_string();
        assert!(
            scrape
                .samples
                .iter()
                .any(|s| s.metric == "kiln_gpu_process_memory_bytes"
                    && s.labels.get("pid") == Some(me.as_str())),
            "this process holds GPU memory but has no kiln_gpu_process_memory_bytes row"
        );
        println!("every kiln_gpu_* name present (Xid watched: {watched})");
    }
    drop(held);
}

#[test]
fn power_set_refuses_without_yes_and_show_answers() {
    let o = kiln(&["power", "set", "--watts", "300"]);
    assert_eq!(o.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--yes"));
    // Out of any card's range: refused by validation (or NVML missing, exit 3), never set.
    let o = kiln(&["power", "set", "--watts", "1000000", "--yes"]);
    let code = o.status.code();
    assert!(
        code == Some(3) || code == Some(4),
        "{code:?} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = kiln(&["power", "show", "--json"]);
    match o.status.code() {
        Some(0) => {
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            for g in v.as_array().unwrap() {
                assert!(g["min_limit_w"].as_f64().unwrap() <= g["max_limit_w"].as_f64().unwrap());
            }
        }
        Some(3) => assert!(String::from_utf8_lossy(&o.stderr).contains("NVML unavailable")),
        c => panic!("{c:?}"),
    }
}
