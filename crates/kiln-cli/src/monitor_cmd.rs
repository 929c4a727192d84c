//! `kiln monitor`: a refreshing per-GPU table, one JSON sample, or a `/metrics` endpoint.
//!
//! The sampler runs on the calling thread (NVML's event set is not `Sync`); `--listen` serves
//! the process-wide registry from an axum server on a current-thread tokio runtime in a second
//! thread, so a slow scrape never delays a tick.

use crate::exit;
use kiln::core::device::DeviceSelector;
use kiln::{Config, DeviceRequest};
use kiln_monitor::{AlertEngine, DeviceFilter, MonitorConfig, Sample, Sampler, SamplerOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `kiln monitor` options.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sampling period: `500ms`, `2s` or seconds (default: the config's period_ms, 1 s).
    #[arg(long, value_parser = parse_interval)]
    interval: Option<Duration>,
    /// Stop after N ticks (default: run until interrupted).
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Take one sample and exit.
    #[arg(long)]
    once: bool,
    /// Print samples as JSON (one object per line) instead of a table.
    #[arg(long)]
    json: bool,
    /// Serve /metrics (OpenMetrics) and /health on ADDR, e.g. 127.0.0.1:9400, while sampling
    /// and evaluating alerts.
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// Monitor configuration (TOML: period_ms, processes, slow_fields, energy_every, [alerts]
    /// rules and webhook; see docs/monitoring.md).
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let (num, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad interval {s:?}: use 500ms, 2s or 1.5"))?;
    let d = v * scale;
    if !d.is_finite() || !(0.01..=3600.0).contains(&d) {
        return Err(format!("interval {s:?} is outside 10ms..1h"));
    }
    Ok(Duration::from_secs_f64(d))
}

/// Print a kiln-monitor error and return its exit code.
pub fn fail(e: &kiln_monitor::Error) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(match e {
        kiln_monitor::Error::NvmlUnavailable(_) => exit::NO_DEVICE,
        kiln_monitor::Error::Invalid { .. } => exit::INVALID,
        _ => exit::INTERNAL,
    })
}

/// Run `kiln monitor`.
pub fn run(args: &Args, _request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let mcfg = match &args.rules {
        Some(p) => match MonitorConfig::load(p) {
            Ok(c) => c,
            Err(e) => return Ok(fail(&e)),
        },
        None => MonitorConfig::default(),
    };
    let devices = cfg.devices.allowed.as_ref().map(|list| {
        list.iter()
            .map(|d| match d {
                DeviceSelector::Ordinal(i) => DeviceFilter::Index(*i as u32),
                DeviceSelector::Uuid(u) => DeviceFilter::Uuid(u.clone()),
            })
            .collect()
    });
    let mut sampler = Sampler::new(&SamplerOptions {
        devices,
        processes: mcfg.processes,
        slow: mcfg.slow(),
    });
    if let Some(why) = &sampler.nvml_status().reason {
        eprintln!("note: {why}");
    }
    let period = args.interval.unwrap_or(mcfg.period());
    let count = if args.once { Some(1) } else { args.count };
    let mut alerts = match AlertEngine::new(&mcfg.alerts) {
        Ok(a) => a,
        Err(e) => return Ok(fail(&e)),
    };
    let metrics = kiln_monitor::global();
    let last: Arc<Mutex<Option<Sample>>> = Arc::default();
    if let Some(addr) = args.listen {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        // Scripts (and tests) read the bound address, port 0 included, from this line.
        println!("listening on http://{}", listener.local_addr()?);
        let last = last.clone();
        std::thread::spawn(move || serve(listener, last));
    }
    let mut ticks = 0u64;
    let mut next = Instant::now();
    loop {
        let s = sampler.sample();
        metrics.update(&s);
        alerts.tick(&s, Some(metrics));
        if args.json {
            println!("{}", serde_json::to_string(&s)?);
        } else if args.listen.is_none() {
            print_rows(&s, ticks);
        }
        if let Ok(mut l) = last.lock() {
            *l = Some(s);
        }
        ticks += 1;
        if count.is_some_and(|c| ticks >= c) {
            return Ok(ExitCode::from(exit::OK));
        }
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now; // fell behind: do not burst
        }
    }
}

/// One row per GPU (a host row without NVML); the header every 20 ticks, as `nvidia-smi dmon`.
fn print_rows(s: &Sample, tick: u64) {
    let o = |v: Option<u32>| v.map_or("-".into(), |v| v.to_string());
    let gib = |v: Option<u64>| v.map_or("-".into(), |v| format!("{:.1}", v as f64 / (1u64 << 30) as f64));
    let mb = |v: Option<u32>| v.map_or("-".into(), |v| format!("{:.0}", v as f64 / 1e3));
    if s.gpus.is_empty() {
        if tick % 20 == 0 {
            println!(
                "# {:>10} {:>6} {:>9} {:>9}",
                "rss_MiB", "cpu%", "mem_GiB", "avail_GiB"
            );
        }
        let h = &s.host;
        println!(
            "  {:>10} {:>6} {:>9} {:>9}",
            h.process_rss_bytes.map_or("-".into(), |v| (v >> 20).to_string()),
            h.process_cpu_percent.map_or("-".into(), |v| format!("{v:.1}")),
            gib(h.memory_total_bytes),
            gib(h.memory_available_bytes)
        );
        return;
    }
    if tick % 20 == 0 {
        println!(
            "# {:>3} {:>6} {:>6} {:>4} {:>4} {:>6} {:>6} {:>5} {:>5} {:>7} {:>7} {:>4} throttle",
            "gpu",
            "pwr_W",
            "lim_W",
            "tmpC",
            "sm%",
            "fbGiB",
            "totGiB",
            "smMHz",
            "mMHz",
            "txMB/s",
            "rxMB/s",
            "xid",
        );
    }
    for g in &s.gpus {
        let reasons: Vec<&str> = g.throttle_reasons.iter().map(String::as_str).collect();
        println!(
            "  {:>3} {:>6} {:>6} {:>4} {:>4} {:>6} {:>6} {:>5} {:>5} {:>7} {:>7} {:>4} {}",
            g.index,
            g.power_w.map_or("-".into(), |v| format!("{v:.0}")),
            g.power_limit_w.map_or("-".into(), |v| format!("{v:.0}")),
            o(g.temperature_c),
            o(g.gpu_util_percent),
            gib(g.memory_used_bytes),
            gib(g.memory_total_bytes),
            o(g.sm_clock_mhz),
            o(g.mem_clock_mhz),
            mb(g.pcie_tx_kbps),
            mb(g.pcie_rx_kbps),
            g.xid_total(),
            if reasons.is_empty() {
                "-".into()
            } else {
                reasons.join(",")
            }
        );
    }
}

fn serve(listener: std::net::TcpListener, last: Arc<Mutex<Option<Sample>>>) {
    use axum::http::header::CONTENT_TYPE;
    use axum::routing::get;
    let rt = match tokio::runtime::Builder::new_current_thread().enable_io().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the metrics server: {e}");
            return;
        }
    };
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(|| async {
                (
                    [(CONTENT_TYPE, kiln_monitor::metrics::CONTENT_TYPE)],
                    kiln_monitor::global().encode(),
                )
            }),
        )
        .route(
            "/health",
            get(move || {
                let body = match last.lock().ok().and_then(|l| l.clone()) {
                    Some(s) => serde_json::json!({
                        "status": "ok",
                        "nvml_available": s.nvml.available,
                        "nvml_reason": s.nvml.reason,
                        "gpus": s.gpus.len(),
                        "last_sample_ms": s.timestamp_ms,
                    }),
                    None => serde_json::json!({ "status": "starting" }),
                };
                async move { ([(CONTENT_TYPE, "application/json")], body.to_string()) }
            }),
        );
    rt.block_on(async move {
        match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => {
                if let Err(e) = axum::serve(l, app).await {
                    tracing::error!("metrics server stopped: {e}");
                }
            }
            Err(e) => tracing::error!("cannot serve: {e}"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::parse_interval;
    use std::time::Duration;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_interval("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_interval("0").is_err());
        assert!(parse_interval("fast").is_err());
    }
}
