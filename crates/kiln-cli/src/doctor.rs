//! `kiln doctor`: what kiln sees, whether it works, and what to do when it does not.

use crate::exit;
use kiln::core::device::Admission;
use kiln::device::ops::Unary;
use kiln::device::{self, CudaBackend, DeviceInfo, ModuleLoad};
use kiln::kernels::{self, Census, KernelCache, Outcome};
use kiln::verify::max_rel_f32;
use kiln::{Config, DeviceRequest, Error};
use kiln::{CpuBackend, UnaryOp};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Instant;

/// `kiln doctor` options.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the report as JSON (one object) instead of text.
    #[arg(long)]
    json: bool,
    /// Skip the trial compile + launch on each GPU.
    #[arg(long)]
    no_trial: bool,
}

#[derive(Serialize)]
struct Report {
    kiln_version: &'static str,
    host: Host,
    libraries: device::Libraries,
    nvrtc_version: Option<String>,
    cublas_version: Option<String>,
    driver: Option<Driver>,
    driver_problem: Option<String>,
    nvml_problem: Option<String>,
    devices: Vec<Device>,
    cache: Cache,
    config_file: Option<String>,
    config: Vec<ConfigRow>,
    requested: String,
    active_backend: String,
    fallback_reason: Option<String>,
    usable_backends: Vec<String>,
    nvrtc_compiles_this_process: u64,
    advice: Vec<String>,
}

#[derive(Serialize)]
struct Host {
    os: &'static str,
    arch: &'static str,
    cpu_threads: usize,
}

#[derive(Serialize)]
struct Driver {
    cuda_driver_api: String,
    nvidia_driver: Option<String>,
    /// Milliseconds this process waited for the driver's initialisation and device list
    /// (`cuInit` and the queries): the first part of every CUDA process's start.
    init_ms: f64,
}

#[derive(Serialize)]
struct Device {
    #[serde(flatten)]
    info: DeviceInfo,
    arch: String,
    admission: Admission,
    memory_free: Option<u64>,
    pcie_current: Option<(u32, u32)>,
    pcie_max: Option<(u32, u32)>,
    /// NVML's persistence mode (see [`startup_advice`]).
    persistence_mode: Option<bool>,
    trial: Option<Trial>,
    /// For an allowed device with libnvrtc: how many kernels its arch's cache holds and
    /// what compiling the rest costs (estimates), after the trial.
    cold_start: Option<Census>,
}

#[derive(Serialize)]
struct Trial {
    ok: bool,
    error: Option<String>,
    context_ms: f64,
    module_loads: Vec<ModuleLoad>,
    elements: usize,
    kernel_ms: f64,
    max_rel_err_vs_cpu: f64,
    total_ms: f64,
    /// Whether graph captures use programmatic dependent launch on this device, and why.
    graph_pdl: Option<String>,
    /// Whether kiln's wgmma bf16 GEMM runs on this device, and why.
    gemm_wgmma: Option<String>,
}

#[derive(Serialize)]
struct Cache {
    dir: String,
    writable: bool,
    problem: Option<String>,
    entries: usize,
    invalid_entries: usize,
}

#[derive(Serialize)]
struct ConfigRow {
    key: String,
    value: String,
    source: String,
}

const TRIAL_N: usize = (1 << 20) + 3;

fn trial(info: &DeviceInfo, cache: &KernelCache, limit: Option<kiln::MemoryLimit>) -> Trial {
    let t0 = Instant::now();
    let mut t = Trial {
        ok: false,
        error: None,
        context_ms: 0.0,
        module_loads: Vec::new(),
        elements: TRIAL_N,
        kernel_ms: 0.0,
        max_rel_err_vs_cpu: f64::NAN,
        total_ms: 0.0,
        graph_pdl: None,
        gemm_wgmma: None,
    };
    let r = (|| -> kiln::Result<()> {
        let b = CudaBackend::new(info, cache.clone(), limit)?;
        t.context_ms = b.context_ms();
        t.graph_pdl = Some(b.pdl_status());
        t.gemm_wgmma = Some(b.wgmma_status());
        let x = kiln::testing::random_f32(TRIAL_N, -12.0, 12.0, 7);
        let dx = b.upload(&x)?;
        let mut dy = b.alloc_poisoned(TRIAL_N)?;
        let times = b.time_ms(0, 1, || {
            b.run(Unary {
                op: UnaryOp::Sigmoid,
                x: &dx,
                out: &mut dy,
            })
        })?;
        t.module_loads = b.module_loads();
        t.kernel_ms = times[0];
        let mut got = vec![0.0f32; TRIAL_N];
        b.download(&dy, &mut got)?;
        let mut want = vec![0.0f32; TRIAL_N];
        CpuBackend::new().unary_f32(UnaryOp::Sigmoid, &x, &mut want)?;
        t.max_rel_err_vs_cpu = max_rel_f32(&got, &want);
        if t.max_rel_err_vs_cpu > 1e-5 {
            return Err(Error::Verification {
                op: "sigmoid_f32".into(),
                detail: format!("max relative error vs CPU {:.3e} > 1e-5", t.max_rel_err_vs_cpu),
            });
        }
        Ok(())
    })();
    t.total_ms = t0.elapsed().as_secs_f64() * 1e3;
    match r {
        Ok(()) => t.ok = true,
        Err(e) => t.error = Some(e.to_string()),
    }
    t
}

fn ver(v: (i32, i32)) -> String {
    format!("{}.{}", v.0, v.1)
}

/// Run the checks, print the report, and return 0 when the requested backend is usable.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let libraries = device::libraries();
    let cache = KernelCache::new(&cfg.cache_dir);
    let mut advice = Vec::new();
    let t_probe = Instant::now();
    let (probe, driver_problem) = match device::probe() {
        Ok(p) => (Some(p), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let init_ms = t_probe.elapsed().as_secs_f64() * 1e3;
    let (nvml, nvml_problem) = match kiln_monitor::snapshot() {
        Ok(s) => (Some(s), None),
        Err(e) => (None, probe.as_ref().map(|_| e)),
    };
    let mut devices = Vec::new();
    let mut usable = vec!["cpu".to_string()];
    if let Some(p) = &probe {
        for info in &p.devices {
            let admission = cfg.devices.admit(&info.desc);
            let nv = nvml.as_ref().and_then(|s| {
                s.devices
                    .iter()
                    .find(|d| d.uuid.eq_ignore_ascii_case(&info.desc.uuid))
            });
            let wanted = match request {
                DeviceRequest::Cpu => false,
                DeviceRequest::Cuda(Some(n)) => n == info.desc.ordinal,
                _ => true,
            };
            let trial = (admission == Admission::Usable && wanted && !args.no_trial && libraries.nvrtc)
                .then(|| trial(info, &cache, cfg.gpu_memory_limit));
            if let Some(t) = &trial {
                if t.ok {
                    usable.push(format!("cuda:{}", info.desc.ordinal));
                } else if let Some(e) = &t.error {
                    advice.push(format!("cuda:{} failed its trial: {e}", info.desc.ordinal));
                }
            } else if admission == Admission::Usable && libraries.nvrtc && args.no_trial {
                usable.push(format!("cuda:{} (untested)", info.desc.ordinal));
            }
            let cold_start = match device::nvrtc_version() {
                Some(v) if admission == Admission::Usable => Some(kernels::census(&cache, &info.arch(), v)),
                _ => None,
            };
            devices.push(Device {
                arch: info.arch(),
                cold_start,
                admission,
                memory_free: nv.map(|d| d.memory_free),
                pcie_current: nv.and_then(|d| d.pcie_current),
                pcie_max: nv.and_then(|d| d.pcie_max),
                persistence_mode: nv.and_then(|d| d.persistence_mode),
                trial,
                info: info.clone(),
            });
        }
    }
    for d in &devices {
        let context_ms = d.trial.as_ref().filter(|t| t.ok).map(|t| t.context_ms);
        if let Some(a) = startup_advice(d.info.desc.ordinal, d.persistence_mode, init_ms, context_ms) {
            advice.push(a);
        }
        if let Some(c) = d.cold_start.as_ref().filter(|c| !c.missing.is_empty()) {
            advice.push(format!(
                "cuda:{}: {} of {} kernels are not cached for {}: each command compiles the ones it launches on its first run (about {:.1} s of NVRTC for all of them, an estimate). Run `{}` once (about {:.1} s) to pay it now.",
                d.info.desc.ordinal,
                c.missing.len(),
                c.kernels,
                c.arch,
                c.missing_compile_s_estimate,
                c.warm_command,
                c.warm_s_estimate
            ));
        }
    }
    if !libraries.cuda {
        advice.push(
            "No NVIDIA driver: kiln runs everything on the CPU. Install the NVIDIA driver to use a GPU."
                .into(),
        );
    } else if !libraries.nvrtc {
        advice.push("libnvrtc is missing: install the CUDA runtime compiler (e.g. the cuda-nvrtc package) or add it to LD_LIBRARY_PATH.".into());
    }
    let writable = cache.check_writable();
    if let Err(e) = &writable {
        advice.push(format!(
            "The kernel cache {} is {e}: kernels will be recompiled at every start. Set KILN_CACHE_DIR to a writable directory.",
            cfg.cache_dir.display()
        ));
    }
    let entries = cache.entries().unwrap_or_default();

    // What the request resolves to, without creating another context: reuse the trials.
    let descs: Vec<_> = probe
        .as_ref()
        .map(|p| p.devices.iter().map(|d| d.desc.clone()).collect())
        .unwrap_or_default();
    let selection: Result<Option<usize>, Error> = match (&probe, request) {
        (_, DeviceRequest::Cpu) => Ok(None),
        (None, _) => Err(device::probe()
            .err()
            .unwrap_or(Error::NoDevice(kiln::NoDeviceReason::NoDevices))),
        (Some(_), _) if !libraries.nvrtc => Err(Error::NoDevice(kiln::NoDeviceReason::NvrtcNotFound)),
        (Some(_), r) => cfg.devices.select(r, &descs),
    };
    let (active, fallback_reason, failure) = match selection {
        Ok(None) => ("cpu".to_string(), None, None),
        Ok(Some(n)) => {
            let name = format!("cuda:{n}");
            let trial_failed = devices
                .iter()
                .find(|d| d.info.desc.ordinal == n)
                .and_then(|d| d.trial.as_ref())
                .and_then(|t| t.error.clone());
            match (trial_failed, request) {
                (None, _) => (name, None, None),
                (Some(e), DeviceRequest::Auto) => {
                    ("cpu".into(), Some(format!("{name} failed its trial: {e}")), None)
                }
                (Some(e), _) => ("none".into(), None, Some(format!("{name} failed its trial: {e}"))),
            }
        }
        Err(e) if request == DeviceRequest::Auto => ("cpu".into(), Some(e.to_string()), None),
        Err(e) => ("none".into(), None, Some(e.to_string())),
    };

    let report = Report {
        kiln_version: env!("CARGO_PKG_VERSION"),
        host: Host {
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
            cpu_threads: CpuBackend::new().threads(),
        },
        nvrtc_version: device::nvrtc_version().map(ver),
        cublas_version: device::cublas_version()
            .map(|v| format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)),
        libraries,
        driver: probe.as_ref().map(|p| Driver {
            cuda_driver_api: device::format_driver_version(p.driver_version),
            nvidia_driver: nvml.as_ref().map(|s| s.driver_version.clone()),
            init_ms,
        }),
        driver_problem,
        nvml_problem,
        devices,
        cache: Cache {
            dir: cfg.cache_dir.display().to_string(),
            writable: writable.is_ok(),
            problem: writable.err(),
            invalid_entries: entries.iter().filter(|e| e.problem.is_some()).count(),
            entries: entries.len(),
        },
        config_file: cfg.file.as_ref().map(|f| f.display().to_string()),
        config: cfg
            .rows()
            .into_iter()
            .map(|(key, value, source)| ConfigRow { key, value, source })
            .collect(),
        requested: request.to_string(),
        active_backend: active,
        fallback_reason,
        usable_backends: usable,
        nvrtc_compiles_this_process: device::nvrtc_compiles_this_process(),
        advice,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    match failure {
        None => Ok(ExitCode::from(exit::OK)),
        Some(reason) => {
            eprintln!("error: --device {request} is not usable: {reason}");
            Ok(ExitCode::from(exit::NO_DEVICE))
        }
    }
}

/// Advice for a device whose persistence mode is off. With it off, the driver tears a GPU
/// down when its last process exits, and the next process to open it waits while the
/// driver brings it back up inside `cuInit`; that wait, with the context's creation, is
/// what a one-file command pays before its first kernel. `init_ms` is this process's
/// wait (short when another process holds the GPU at the time), `context_ms` the trial's.
fn startup_advice(
    ordinal: usize,
    persistence: Option<bool>,
    init_ms: f64,
    context_ms: Option<f64>,
) -> Option<String> {
    if persistence != Some(false) {
        return None;
    }
    let ctx = context_ms
        .map(|c| format!(" and creating a context {c:.0} ms"))
        .unwrap_or_default();
    Some(format!(
        "cuda:{ordinal}: persistence mode is off, so a process that starts while no other holds the GPU waits for the driver to bring it up (here the driver's initialisation took {init_ms:.0} ms{ctx}). `sudo nvidia-smi -pm 1` or the nvidia-persistenced service keeps it up; a long-lived process (`kiln serve`, or one batch run over many files) pays the start once."
    ))
}

/// One device's cold start: what its arch's cache holds, what the rest costs, how to warm.
fn cold_start_line(ordinal: usize, c: &Census) -> String {
    if c.missing.is_empty() {
        return format!(
            "  cuda:{ordinal} ({}): all {} kernels cached: a cold start compiles nothing",
            c.arch, c.kernels
        );
    }
    format!(
        "  cuda:{ordinal} ({}): {} of {} kernels cached; a command compiles the ones it launches on first use, about {:.1} s of NVRTC for all {} missing (estimate); `{}` compiles them in about {:.1} s (estimate, {} threads)",
        c.arch,
        c.cached,
        c.kernels,
        c.missing_compile_s_estimate,
        c.missing.len(),
        c.warm_command,
        c.warm_s_estimate,
        kernels::compile_threads()
    )
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

fn yes(b: bool) -> &'static str {
    if b {
        "found"
    } else {
        "MISSING"
    }
}

fn print_text(r: &Report) {
    println!(
        "kiln {} doctor ({} {}, {} CPU threads)",
        r.kiln_version, r.host.os, r.host.arch, r.host.cpu_threads
    );
    println!();
    println!("Driver and libraries");
    match (&r.driver, &r.driver_problem) {
        (Some(d), _) => println!(
            "  CUDA driver API {}   NVIDIA driver {}   initialised in {:.0} ms",
            d.cuda_driver_api,
            d.nvidia_driver.as_deref().unwrap_or("(NVML unavailable)"),
            d.init_ms
        ),
        (None, Some(p)) => println!("  driver: {p}"),
        (None, None) => println!("  driver: unknown"),
    }
    let l = &r.libraries;
    println!(
        "  libcuda {}   libnvrtc {}{}   libcublas {}{}   libcublasLt {}   libcurand {}",
        yes(l.cuda),
        yes(l.nvrtc),
        r.nvrtc_version
            .as_ref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        yes(l.cublas),
        r.cublas_version
            .as_ref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        yes(l.cublaslt),
        yes(l.curand),
    );
    if let Some(p) = &r.nvml_problem {
        println!("  NVML: {p}");
    }
    println!();
    println!("Devices");
    if r.devices.is_empty() {
        println!("  none (the CPU backend is used)");
    }
    for d in &r.devices {
        let (a, b) = d.info.desc.compute_capability;
        println!(
            "  cuda:{}  {}  {}  cc {a}.{b} ({})  {} SMs  {} total{}  PCI {}{}{}  [{}]",
            d.info.desc.ordinal,
            d.info.desc.name,
            d.info.desc.uuid,
            d.arch,
            d.info.desc.multiprocessors,
            gib(d.info.desc.total_memory),
            d.memory_free
                .map(|f| format!(", {} free", gib(f)))
                .unwrap_or_default(),
            d.info.pci_bus_id,
            match (d.pcie_current, d.pcie_max) {
                (Some((g, w)), Some((mg, mw))) => format!(" PCIe gen{g} x{w} (max gen{mg} x{mw})"),
                (Some((g, w)), None) => format!(" PCIe gen{g} x{w}"),
                _ => String::new(),
            },
            match d.persistence_mode {
                Some(true) => "  persistence on",
                Some(false) => "  persistence OFF",
                None => "",
            },
            match d.admission {
                Admission::Usable => "allowed",
                Admission::NotAllowed => "NOT ALLOWED by policy: not touched",
                Admission::CapabilityTooLow => "capability below minimum: not used",
            }
        );
        if let Some(t) = &d.trial {
            for m in &t.module_loads {
                let how = match &m.cache.outcome {
                    Outcome::Hit => {
                        format!("cache hit, read in {:.2} ms (NVRTC not called)", m.cache.ms)
                    }
                    Outcome::Compiled => {
                        format!("compiled by NVRTC in {:.1} ms, stored", m.cache.ms)
                    }
                    Outcome::Recompiled { reason } => {
                        format!(
                            "cache entry rejected ({reason}); recompiled in {:.1} ms",
                            m.cache.ms
                        )
                    }
                    Outcome::CompiledNotStored { reason } => {
                        format!("compiled in {:.1} ms, NOT stored ({reason})", m.cache.ms)
                    }
                };
                println!(
                    "    module {} {}: {how}; loaded in {:.2} ms",
                    m.cache.program, m.cache.arch, m.load_ms
                );
            }
            if t.ok {
                println!(
                    "    trial: PASS  context {:.0} ms, sigmoid_f32 on {} elements {:.3} ms, max rel err vs CPU {:.1e}, total {:.0} ms",
                    t.context_ms, t.elements, t.kernel_ms, t.max_rel_err_vs_cpu, t.total_ms
                );
            } else {
                println!(
                    "    trial: FAIL  {}",
                    t.error.as_deref().unwrap_or("unknown error")
                );
            }
            if let Some(p) = &t.graph_pdl {
                println!("    graphs: programmatic dependent launch {p}");
            }
            if let Some(w) = &t.gemm_wgmma {
                println!("    gemm: wgmma kernel {w}");
            }
        }
    }
    println!();
    println!("Kernel cache");
    println!(
        "  {}  {}  {} entries{}",
        r.cache.dir,
        if r.cache.writable {
            "writable"
        } else {
            "NOT WRITABLE"
        },
        r.cache.entries,
        if r.cache.invalid_entries > 0 {
            format!(" ({} invalid, will be recompiled)", r.cache.invalid_entries)
        } else {
            String::new()
        }
    );
    println!(
        "  NVRTC compilations in this process: {}",
        r.nvrtc_compiles_this_process
    );
    for d in &r.devices {
        if let Some(c) = &d.cold_start {
            println!("{}", cold_start_line(d.info.desc.ordinal, c));
        }
    }
    println!();
    println!(
        "Configuration{}",
        r.config_file
            .as_ref()
            .map(|f| format!(" (file {f})"))
            .unwrap_or_else(|| " (no file)".into())
    );
    for c in &r.config {
        println!("  {:32} {:40} {}", c.key, c.value, c.source);
    }
    println!();
    println!("Backend");
    println!("  requested {}  ->  active {}", r.requested, r.active_backend);
    if let Some(f) = &r.fallback_reason {
        println!("  fell back to the CPU: {f}");
    }
    println!("  usable: {}", r.usable_backends.join(", "));
    for a in &r.advice {
        println!("  advice: {a}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cold_start_line_gives_counts_the_estimate_and_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let c = kernels::census(&KernelCache::new(dir.path()), "sm_90", (13, 0));
        let line = cold_start_line(0, &c);
        assert!(line.contains("cuda:0 (sm_90): 0 of"), "{line}");
        assert!(
            line.contains(&format!("{:.1} s of NVRTC", c.missing_compile_s_estimate)),
            "{line}"
        );
        assert!(line.contains("`kiln cache warm`"), "{line}");
        let warm = Census {
            cached: c.kernels,
            missing: Vec::new(),
            ..c
        };
        assert!(cold_start_line(1, &warm).contains("compiles nothing"));
    }

    #[test]
    fn startup_advice_only_when_persistence_is_known_to_be_off() {
        assert!(startup_advice(0, Some(true), 150.0, Some(130.0)).is_none());
        assert!(startup_advice(0, None, 150.0, Some(130.0)).is_none());
        let a = startup_advice(1, Some(false), 151.6, Some(137.2)).unwrap();
        assert!(a.starts_with("cuda:1: persistence mode is off"), "{a}");
        assert!(
            a.contains("initialisation took 152 ms and creating a context 137 ms"),
            "{a}"
        );
        assert!(a.contains("nvidia-smi -pm 1"), "{a}");
        let no_trial = startup_advice(0, Some(false), 90.0, None).unwrap();
        assert!(no_trial.contains("took 90 ms)"), "{no_trial}");
    }
}
