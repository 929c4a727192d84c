//! Alert rules fire and clear on scripted samples; the webhook reaches a loopback listener.
#![allow(clippy::unwrap_used)]

use kiln_monitor::{AlertConfig, AlertEngine, GpuSample, Metrics, MonitorConfig, Sample};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

fn gpu() -> GpuSample {
    GpuSample {
        index: 0,
        uuid: "GPU-a".into(),
        model: "test".into(),
        memory_free_bytes: Some(80),
        memory_total_bytes: Some(100),
        temperature_c: Some(60),
        throttle_reasons: vec!["gpu_idle".into()],
        ecc_uncorrected: Some(0),
        ..GpuSample::default()
    }
}

fn at(t_ms: u64, g: GpuSample) -> Sample {
    Sample {
        timestamp_ms: t_ms,
        gpus: vec![g],
        ..Sample::default()
    }
}

fn names(t: &[kiln_monitor::Transition]) -> Vec<(String, bool)> {
    t.iter().map(|x| (x.rule.clone(), x.firing)).collect()
}

#[test]
fn default_rules_fire_and_clear() {
    let mut e = AlertEngine::new(&AlertConfig::default()).unwrap();
    assert!(
        e.evaluate(&at(0, gpu())).is_empty(),
        "a healthy GPU fires nothing"
    );

    let mut g = gpu();
    g.memory_free_bytes = Some(10);
    g.temperature_c = Some(85);
    let t = e.evaluate(&at(1000, g.clone()));
    assert_eq!(
        names(&t),
        [("gpu_memory_low".into(), true), ("gpu_hot".into(), true)]
    );
    assert!(e.evaluate(&at(2000, g)).is_empty(), "no repeat while firing");
    let t = e.evaluate(&at(3000, gpu()));
    assert_eq!(
        names(&t),
        [("gpu_memory_low".into(), false), ("gpu_hot".into(), false)]
    );
}

#[test]
fn throttling_fires_only_after_30_s_and_not_for_idle() {
    let mut e = AlertEngine::new(&AlertConfig::default()).unwrap();
    for s in 0..100 {
        assert!(e.evaluate(&at(s * 1000, gpu())).is_empty(), "idle never fires");
    }
    let mut g = gpu();
    g.throttle_reasons = vec!["sw_power_cap".into()];
    assert!(e.evaluate(&at(100_000, g.clone())).is_empty());
    assert!(
        e.evaluate(&at(130_000, g.clone())).is_empty(),
        "30 s exactly is not more than 30 s"
    );
    let t = e.evaluate(&at(131_000, g.clone()));
    assert_eq!(names(&t), [("gpu_throttled".into(), true)]);
    assert!(t[0].message.contains("sw_power_cap"), "{}", t[0].message);
    let t = e.evaluate(&at(132_000, gpu()));
    assert_eq!(names(&t), [("gpu_throttled".into(), false)]);
    // The clock restarts after a break.
    assert!(e.evaluate(&at(133_000, g)).is_empty());
}

#[test]
fn xid_fires_on_a_new_event_and_clears_after_the_hold() {
    let mut e = AlertEngine::new(&AlertConfig::default()).unwrap();
    let mut g = gpu();
    e.evaluate(&at(0, g.clone()));
    g.xid_counts.insert(79, 1);
    let t = e.evaluate(&at(1000, g.clone()));
    assert_eq!(names(&t), [("gpu_xid".into(), true)]);
    assert!(t[0].message.contains("Xid 79"));
    assert!(e.evaluate(&at(200_000, g.clone())).is_empty());
    let t = e.evaluate(&at(301_000, g.clone()));
    assert_eq!(names(&t), [("gpu_xid".into(), false)]);
    g.xid_counts.insert(79, 2);
    assert_eq!(names(&e.evaluate(&at(302_000, g))), [("gpu_xid".into(), true)]);
}

#[test]
fn uncorrectable_ecc_fires() {
    let mut e = AlertEngine::new(&AlertConfig::default()).unwrap();
    let mut g = gpu();
    g.ecc_uncorrected = Some(1);
    assert_eq!(
        names(&e.evaluate(&at(0, g))),
        [("gpu_ecc_uncorrectable".into(), true)]
    );
}

#[test]
fn rules_come_from_toml_and_set_gauges() {
    let c = MonitorConfig::from_toml(
        "period_ms = 500\n[alerts]\n[[alerts.rules]]\nname = \"warm\"\nkind = \"temperature_at_least\"\ncelsius = 50\n",
    )
    .unwrap();
    assert_eq!(c.period(), Duration::from_millis(500));
    let mut e = AlertEngine::new(&c.alerts).unwrap();
    let m = Metrics::new();
    let t = e.tick(&at(0, gpu()), Some(&m));
    assert_eq!(names(&t), [("warm".into(), true)]);
    assert!(
        m.encode()
            .contains("kiln_alert_active{rule=\"warm\",gpu=\"0\"} 1"),
        "{}",
        m.encode()
    );
    e.tick(
        &at(
            1000,
            GpuSample {
                temperature_c: Some(40),
                ..gpu()
            },
        ),
        Some(&m),
    );
    assert!(m
        .encode()
        .contains("kiln_alert_active{rule=\"warm\",gpu=\"0\"} 0"));
    for bad in [
        "period_ms = 1",
        "[alerts]\n[[alerts.rules]]\nname = \"a b\"\nkind = \"uncorrectable_ecc\"\n",
        "[alerts]\n[[alerts.rules]]\nname = \"x\"\nkind = \"free_memory_below\"\nfraction = 2.0\n",
        "[alerts]\nwebhook = \"https://example.invalid/\"\n",
        "[alerts]\n[[alerts.rules]]\nname = \"x\"\nkind = \"no_such_kind\"\n",
    ] {
        assert!(MonitorConfig::from_toml(bad).is_err(), "{bad}");
    }
}

/// Accept one connection within `limit`, answer 200 and return the request.
fn serve_once(l: TcpListener, limit: Duration) -> std::thread::JoinHandle<Option<String>> {
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if let Ok((mut s, _)) = l.accept() {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = s.read(&mut buf).unwrap_or(0);
                    req.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&req);
                    if n == 0 {
                        break;
                    }
                    if let Some(i) = text.find("\r\n\r\n") {
                        let len: usize = text
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if req.len() >= i + 4 + len {
                            break;
                        }
                    }
                }
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .unwrap();
                return Some(String::from_utf8_lossy(&req).into_owned());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    })
}

#[test]
fn the_webhook_reaches_a_loopback_listener() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/alerts", l.local_addr().unwrap());
    let server = serve_once(l, Duration::from_secs(20));
    let cfg = AlertConfig {
        webhook: Some(url),
        webhook_timeout_ms: 2000,
        ..AlertConfig::default()
    };
    let mut e = AlertEngine::new(&cfg).unwrap();
    let mut g = gpu();
    g.temperature_c = Some(90);
    let t = e.tick(&at(5, g), None);
    assert_eq!(names(&t), [("gpu_hot".into(), true)]);
    let req = server.join().unwrap().expect("the webhook arrived in time");
    assert!(req.starts_with("POST /alerts HTTP/1.1\r\n"), "{req}");
    let body: serde_json::Value = serde_json::from_str(&req[req.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert_eq!(body["alerts"][0]["rule"], "gpu_hot");
    assert_eq!(body["alerts"][0]["firing"], true);
}

#[test]
fn an_unreachable_webhook_fails_in_bounded_time() {
    // Bind then drop: nothing listens on that port now.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let w =
        kiln_monitor::webhook::Webhook::new(&format!("http://127.0.0.1:{port}/"), Duration::from_millis(500))
            .unwrap();
    let start = std::time::Instant::now();
    assert!(w.post(&serde_json::json!({})).is_err());
    assert!(start.elapsed() < Duration::from_secs(5));
}
