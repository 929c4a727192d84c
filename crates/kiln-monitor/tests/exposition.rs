//! The exposition parsed by a real Prometheus text parser: names, labels, types.
#![allow(clippy::unwrap_used)]

use kiln_monitor::metrics::GPU_METRICS;
use kiln_monitor::{GpuProcess, GpuSample, Metrics, PoolFigures, Sample};
use prometheus_parse::{Scrape, Value};

fn scripted_gpu() -> GpuSample {
    GpuSample {
        index: 0,
        uuid: "GPU-00000000-1111-2222-3333-444444444444".into(),
        model: "NVIDIA H200".into(),
        gpu_util_percent: Some(97),
        mem_util_percent: Some(40),
        memory_used_bytes: Some(100 << 30),
        memory_free_bytes: Some(40 << 30),
        memory_total_bytes: Some(140 << 30),
        temperature_c: Some(61),
        power_w: Some(612.5),
        power_limit_w: Some(700.0),
        energy_j: Some(123456.789),
        energy_age_ms: Some(800),
        sm_clock_mhz: Some(1980),
        mem_clock_mhz: Some(2619),
        clocks_age_ms: Some(800),
        throttle_mask: Some(4),
        throttle_reasons: vec!["sw_power_cap".into()],
        ecc_corrected: Some(3),
        ecc_uncorrected: Some(0),
        pcie_tx_kbps: Some(1000),
        pcie_rx_kbps: Some(2000),
        lane_ages_ms: [("energy".to_string(), 800u64)].into_iter().collect(),
        xid_counts: [(79u64, 2u64), (13, 1)].into_iter().collect(),
        xid_watched: true,
        last_xid: Some(79),
        processes: vec![GpuProcess {
            pid: 42,
            used_memory_bytes: Some(1 << 30),
            name: Some("kiln".into()),
            kiln: true,
        }],
    }
}

fn exposition() -> String {
    let m = Metrics::new();
    let s = Sample {
        timestamp_ms: 1,
        gpus: vec![scripted_gpu()],
        ..Sample::default()
    };
    m.update(&s);
    m.kiln().set_pool(
        "cuda:0",
        &PoolFigures {
            allocated_bytes: 10,
            reserved_bytes: 20,
            peak_allocated_bytes: 15,
            ooms: 1,
        },
    );
    m.kiln().kernel_launches("cuda:0", 5);
    m.kiln().compile_cache(true);
    m.kiln().compile_cache(false);
    m.kiln().set_jobs("queued", 3);
    m.kiln().observe_job_latency("gemm", 0.25);
    m.set_alert("gpu_hot", "0", true);
    m.encode()
}

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap()
}

/// `# TYPE name kind` lines: the family names and their declared types.
fn declared_types(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let mut it = l.split_whitespace();
            (it.next().unwrap().to_string(), it.next().unwrap().to_string())
        })
        .collect()
}

#[test]
fn every_gpu_metric_is_exposed_with_its_labels_and_type() {
    let text = exposition();
    let scrape = parse(&text);
    let types = declared_types(&text);
    assert!(text.trim_end().ends_with("# EOF"), "OpenMetrics ends with # EOF");
    for (name, kind) in GPU_METRICS {
        let family = name.strip_suffix("_total").unwrap_or(name);
        assert!(
            types.contains(&(family.to_string(), kind.to_string())),
            "{family} {kind} in {types:?}"
        );
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == *name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(s.labels.get("gpu"), Some("0"), "{name}");
        assert_eq!(
            s.labels.get("uuid"),
            Some("GPU-00000000-1111-2222-3333-444444444444")
        );
        assert_eq!(s.labels.get("model"), Some("NVIDIA H200"));
        if *kind == "gauge" {
            assert!(matches!(s.value, Value::Gauge(_)), "{name}: {:?}", s.value);
        }
    }
    let get = |n: &str| scrape.samples.iter().find(|s| s.metric == n).unwrap();
    assert!(matches!(get("kiln_gpu_power_usage_watts").value, Value::Gauge(v) if v == 612.5));
    assert!(matches!(get("kiln_gpu_memory_used_bytes").value, Value::Gauge(v) if v == (100u64 << 30) as f64));
    assert!(matches!(get("kiln_gpu_pcie_rx_bytes_per_second").value, Value::Gauge(v) if v == 2e6));
    assert!(
        matches!(get("kiln_gpu_xid_errors_total").value, Value::Untyped(v) | Value::Counter(v) if v == 3.0)
    );
    assert!(matches!(get("kiln_gpu_last_xid").value, Value::Gauge(v) if v == 79.0));
    // every reason NVML names is exported, 1 when active, 0 otherwise
    let reason = |r: &str| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == "kiln_gpu_clock_throttle_active" && s.labels.get("reason") == Some(r))
            .map(|s| s.value.clone())
    };
    assert!(matches!(reason("sw_power_cap"), Some(Value::Gauge(v)) if v == 1.0));
    assert!(matches!(reason("gpu_idle"), Some(Value::Gauge(v)) if v == 0.0));
    let p = get("kiln_gpu_process_memory_bytes");
    assert_eq!(
        (p.labels.get("pid"), p.labels.get("kiln")),
        (Some("42"), Some("true"))
    );
}

#[test]
fn kiln_figures_and_alerts_are_exposed() {
    let text = exposition();
    let scrape = parse(&text);
    let types = declared_types(&text);
    for (family, kind) in [
        ("kiln_pool_allocated_bytes", "gauge"),
        ("kiln_pool_reserved_bytes", "gauge"),
        ("kiln_pool_peak_allocated_bytes", "gauge"),
        ("kiln_pool_ooms", "counter"),
        ("kiln_kernel_launches", "counter"),
        ("kiln_compile_cache_hits", "counter"),
        ("kiln_compile_cache_misses", "counter"),
        ("kiln_jobs", "gauge"),
        ("kiln_job_latency_seconds", "histogram"),
        ("kiln_alert_active", "gauge"),
        ("kiln_process_resident_memory_bytes", "gauge"),
        ("kiln_process_cpu_seconds", "counter"),
        ("kiln_host_memory_total_bytes", "gauge"),
        ("kiln_host_memory_available_bytes", "gauge"),
        ("kiln_nvml_available", "gauge"),
    ] {
        assert!(
            types.contains(&(family.to_string(), kind.to_string())),
            "{family} {kind}"
        );
    }
    let get = |n: &str| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == n)
            .unwrap_or_else(|| panic!("{n}"))
    };
    assert_eq!(
        get("kiln_pool_reserved_bytes").labels.get("device"),
        Some("cuda:0")
    );
    assert!(matches!(get("kiln_pool_ooms_total").value, Value::Untyped(v) | Value::Counter(v) if v == 1.0));
    assert!(
        matches!(get("kiln_kernel_launches_total").value, Value::Untyped(v) | Value::Counter(v) if v == 5.0)
    );
    let h = get("kiln_job_latency_seconds");
    assert!(
        matches!(&h.value, Value::Histogram(b) if !b.is_empty()),
        "{:?}",
        h.value
    );
    assert_eq!(h.labels.get("op"), Some("gemm"));
    let a = get("kiln_alert_active");
    assert_eq!(
        (a.labels.get("rule"), a.labels.get("gpu")),
        (Some("gpu_hot"), Some("0"))
    );
    assert!(matches!(a.value, Value::Gauge(v) if v == 1.0));
}

#[test]
fn a_missing_field_is_removed_not_exported_stale() {
    let m = Metrics::new();
    let mut g = scripted_gpu();
    m.update(&Sample {
        gpus: vec![g.clone()],
        ..Sample::default()
    });
    g.temperature_c = None;
    m.update(&Sample {
        gpus: vec![g],
        ..Sample::default()
    });
    let scrape = parse(&m.encode());
    assert!(!scrape
        .samples
        .iter()
        .any(|s| s.metric == "kiln_gpu_temperature_celsius"));
    assert!(scrape
        .samples
        .iter()
        .any(|s| s.metric == "kiln_gpu_power_usage_watts"));
}

#[test]
fn the_docs_table_names_every_gpu_metric() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/monitoring.md")).unwrap();
    for (name, _) in GPU_METRICS {
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/monitoring.md lacks {name}"
        );
    }
}
