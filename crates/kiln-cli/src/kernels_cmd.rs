//! `kiln kernels`: every kernel of kiln-cuda's table with what the driver reports for the
//! cubin kiln loads (registers, shared and local memory, the thread limit) and its occupancy
//! at the block size and shared memory its launcher uses, then whether the Hopper-only paths
//! (graph PDL, the wgmma GEMM) run on the device. Needs a GPU: `--device auto` means the first
//! allowed GPU, and without one it exits 3 with the reason.

use crate::exit;
use kiln::kernels::Kernel;
use kiln::Runtime;
use kiln::{Config, DeviceRequest, Error};
use kiln_bench::report::KernelsReport;
use std::process::ExitCode;

/// `kiln kernels` options.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print one JSON object (the input of `kiln bench report --kernels`).
    #[arg(long)]
    json: bool,
}

/// Run `kiln kernels`.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let request = match request {
        DeviceRequest::Auto => DeviceRequest::Cuda(None),
        DeviceRequest::Cpu => {
            return Err(Error::invalid(
                "kernels",
                "kernel attributes come from the CUDA driver: use --device cuda or cuda:N",
            )
            .into())
        }
        r => r,
    };
    let rt = Runtime::new(request, cfg)?;
    let Some(b) = rt.cuda() else {
        return Err(Error::invalid("kernels", "no CUDA backend was selected").into());
    };
    let limits = b.sm_limits()?;
    let kernels = Kernel::ALL
        .iter()
        .map(|k| b.kernel_attributes(*k, &limits))
        .collect::<kiln::Result<Vec<_>>>()?;
    let report = KernelsReport {
        kiln_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: env!("KILN_GIT_COMMIT").into(),
        device: rt.device_name(),
        device_name: b.info().desc.name.clone(),
        arch: b.info().arch(),
        sm_limits: limits,
        kernels,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
        // the Hopper-only paths, which the table (every architecture's kernels) leaves out
        println!("graphs: programmatic dependent launch {}", b.pdl_status());
        println!("gemm: wgmma kernel {}", b.wgmma_status());
    }
    Ok(ExitCode::from(exit::OK))
}

fn print_table(r: &KernelsReport) {
    let l = &r.sm_limits;
    println!(
        "{} on {} ({}, {} SMs; per SM: {} threads, {} blocks, {} registers, {} KiB shared)",
        r.device,
        r.device_name,
        r.arch,
        l.multiprocessors,
        l.max_threads,
        l.max_blocks,
        l.registers,
        l.shared_bytes / 1024
    );
    println!(
        "{:<26} {:<12} {:>5} {:>9} {:>9} {:>7} {:>8} {:>10} {:>9} {:>6}  limited by",
        "kernel",
        "module",
        "regs",
        "static B",
        "dynamic B",
        "local B",
        "max thr",
        "block",
        "blocks/SM",
        "occ"
    );
    for k in &r.kernels {
        let block = k
            .block
            .map(|b| format!("{}x{}x{}", b[0], b[1], b[2]))
            .unwrap_or_else(|| "?".into());
        println!(
            "{:<26} {:<12} {:>5} {:>9} {:>9} {:>7} {:>8} {:>10} {:>9} {:>5.0}%  {}",
            k.symbol,
            k.module,
            k.registers,
            k.static_shared_bytes,
            k.dynamic_shared_bytes,
            k.local_bytes,
            k.max_threads_per_block,
            block,
            k.blocks_per_sm,
            k.occupancy * 100.0,
            k.limited_by
        );
    }
    let spills: Vec<&str> = r
        .kernels
        .iter()
        .filter(|k| k.local_bytes > 0)
        .map(|k| k.symbol.as_str())
        .collect();
    if spills.is_empty() {
        println!("no kernel uses local memory (no register spills)");
    } else {
        println!("local memory (spills or local arrays): {}", spills.join(", "));
    }
}
