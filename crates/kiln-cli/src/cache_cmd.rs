//! `kiln cache list|clear|warm`.

use crate::exit;
use kiln::core::device::Admission;
use kiln::device::{self, CudaBackend};
use kiln::kernels::{self, CacheEvent, Kernel, KernelCache, Outcome};
use kiln::{Config, DeviceRequest, Error};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Instant;

/// `kiln cache` options.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// List cached cubins with their size and validity.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Delete every cached cubin.
    Clear,
    /// Compile every kernel for every allowed device (or for --arch without a GPU), one
    /// NVRTC program a kernel on every CPU at once, so that no later start calls NVRTC.
    /// Prints each kernel's compile (or cache read) time and the total.
    Warm {
        /// Compile for this target (e.g. sm_90) with NVRTC alone, without a GPU.
        #[arg(long, value_name = "sm_XX")]
        arch: Option<String>,
        /// Print one JSON object (every target's kernels, times and totals) instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Run a cache action.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let cache = KernelCache::new(&cfg.cache_dir);
    match &args.action {
        Action::List { json } => {
            let entries = cache.entries()?;
            if *json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "dir": cache.dir(),
                        "entries": entries,
                    }))?
                );
            } else {
                println!("{} ({} entries)", cache.dir().display(), entries.len());
                for e in &entries {
                    println!(
                        "  {:>9} B  {}  {}",
                        e.bytes,
                        e.path
                            .file_name()
                            .map(|f| f.to_string_lossy())
                            .unwrap_or_default(),
                        e.problem.as_deref().unwrap_or("ok")
                    );
                }
            }
        }
        Action::Clear => {
            let n = cache.clear()?;
            println!("removed {n} cached cubin(s) from {}", cache.dir().display());
        }
        Action::Warm {
            arch: Some(arch),
            json,
        } => {
            let ok = arch
                .strip_prefix("sm_")
                .is_some_and(|d| d.len() >= 2 && d.chars().all(|c| c.is_ascii_alphanumeric()));
            if !ok {
                return Err(Error::invalid(
                    "cache warm",
                    format!("`{arch}` is not an arch; use sm_XX, e.g. sm_90"),
                )
                .into());
            }
            let v = device::nvrtc_version().ok_or(Error::NoDevice(kiln::NoDeviceReason::NvrtcNotFound))?;
            let t0 = Instant::now();
            let events = kernels::compile_all(&cache, arch, v, Kernel::ALL)?;
            report(&[warmed(arch.clone(), None, events, t0)], *json)?;
        }
        Action::Warm { arch: None, json } => {
            let probe = device::probe()?;
            let mut targets = Vec::new();
            for info in &probe.devices {
                let wanted = match request {
                    DeviceRequest::Cuda(Some(n)) => n == info.desc.ordinal,
                    DeviceRequest::Cpu => false,
                    _ => true,
                };
                if !wanted || cfg.devices.admit(&info.desc) != Admission::Usable {
                    continue;
                }
                let t0 = Instant::now();
                let b = CudaBackend::new(info, cache.clone(), cfg.gpu_memory_limit)?;
                b.warm()?;
                let events = b.module_loads().into_iter().map(|l| l.cache).collect();
                targets.push(warmed(
                    info.arch(),
                    Some(format!("cuda:{}", info.desc.ordinal)),
                    events,
                    t0,
                ));
            }
            if targets.is_empty() {
                eprintln!("no allowed device to warm for; use --arch sm_XX to compile without one");
                return Ok(ExitCode::from(exit::NO_DEVICE));
            }
            report(&targets, *json)?;
        }
    }
    Ok(ExitCode::from(exit::OK))
}

/// One target `kiln cache warm` filled.
#[derive(Serialize)]
struct Warmed {
    arch: String,
    /// `cuda:N`, or none for `--arch`.
    device: Option<String>,
    /// Threads the kernels were compiled on.
    threads: usize,
    kernels: usize,
    compiled: usize,
    /// Wall seconds for the whole target (context creation included on a device).
    total_s: f64,
    /// Sum of the kernels' lookup times: what compiling them one after another would take.
    sum_s: f64,
    /// Every kernel's lookup, slowest first.
    programs: Vec<CacheEvent>,
}

fn warmed(arch: String, device: Option<String>, mut programs: Vec<CacheEvent>, t0: Instant) -> Warmed {
    programs.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    Warmed {
        arch,
        device,
        threads: kernels::compile_threads(),
        kernels: programs.len(),
        compiled: programs.iter().filter(|e| e.outcome != Outcome::Hit).count(),
        total_s: t0.elapsed().as_secs_f64(),
        sum_s: programs.iter().map(|e| e.ms).sum::<f64>() / 1e3,
        programs,
    }
}

fn report(targets: &[Warmed], json: bool) -> anyhow::Result<()> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "targets": targets }))?
        );
        return Ok(());
    }
    for t in targets {
        for ev in &t.programs {
            print_event(ev);
        }
        println!(
            "{}{}: {} kernels ({} compiled) in {:.2} s on {} threads (one after another: {:.2} s)",
            t.arch,
            t.device.as_ref().map(|d| format!(" ({d})")).unwrap_or_default(),
            t.kernels,
            t.compiled,
            t.total_s,
            t.threads,
            t.sum_s
        );
    }
    Ok(())
}

fn print_event(ev: &CacheEvent) {
    let what = match &ev.outcome {
        Outcome::Hit => "already cached".to_string(),
        Outcome::Compiled => "compiled".into(),
        Outcome::Recompiled { reason } => format!("recompiled ({reason})"),
        Outcome::CompiledNotStored { reason } => format!("compiled but NOT stored ({reason})"),
    };
    println!(
        "{:<30} {:<7} {what} in {:.1} ms -> {}",
        ev.program,
        ev.arch,
        ev.ms,
        ev.path.display()
    );
}
