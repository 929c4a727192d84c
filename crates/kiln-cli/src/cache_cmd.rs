//! `kiln cache list|clear|warm`.

use crate::exit;
use kiln::core::device::Admission;
use kiln::cuda::{discovery, kernels, nvrtc, CudaBackend, KernelCache, Outcome};
use kiln::{Config, DeviceRequest, Error};
use std::process::ExitCode;

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
    /// Compile every kernel module for every allowed device (or for --arch without a GPU),
    /// so that the next start never calls NVRTC.
    Warm {
        /// Compile for this target (e.g. sm_90) with NVRTC alone, without a GPU.
        #[arg(long, value_name = "sm_XX")]
        arch: Option<String>,
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
        Action::Warm { arch: Some(arch) } => {
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
            let v = nvrtc::version().ok_or(Error::NoDevice(kiln::NoDeviceReason::NvrtcNotFound))?;
            for m in kernels::MODULES {
                let (_, ev) =
                    cache.get_or_compile(m, nvrtc::OPTIONS, arch, v, || nvrtc::compile_cubin(m, arch))?;
                print_event(&ev);
            }
        }
        Action::Warm { arch: None } => {
            let probe = discovery::probe()?;
            let mut warmed = 0;
            for info in &probe.devices {
                let wanted = match request {
                    DeviceRequest::Cuda(Some(n)) => n == info.desc.ordinal,
                    DeviceRequest::Cpu => false,
                    _ => true,
                };
                if !wanted || cfg.devices.admit(&info.desc) != Admission::Usable {
                    continue;
                }
                let b = CudaBackend::new(info, cache.clone(), cfg.gpu_memory_limit)?;
                b.warm()?;
                for l in b.module_loads() {
                    print_event(&l.cache);
                }
                warmed += 1;
            }
            if warmed == 0 {
                eprintln!("no allowed device to warm for; use --arch sm_XX to compile without one");
                return Ok(ExitCode::from(exit::NO_DEVICE));
            }
        }
    }
    Ok(ExitCode::from(exit::OK))
}

fn print_event(ev: &kiln::cuda::CacheEvent) {
    let what = match &ev.outcome {
        Outcome::Hit => "already cached".to_string(),
        Outcome::Compiled => "compiled".into(),
        Outcome::Recompiled { reason } => format!("recompiled ({reason})"),
        Outcome::CompiledNotStored { reason } => format!("compiled but NOT stored ({reason})"),
    };
    println!(
        "{:<14} {:<7} {what} in {:.1} ms -> {}",
        ev.module,
        ev.arch,
        ev.ms,
        ev.path.display()
    );
}
