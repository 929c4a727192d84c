//! `kiln worker` (hidden): one worker process of `kiln serve`, speaking length-prefixed
//! frames on stdin/stdout. Not for people to run.
//!
//! Before it creates its runtime or reads a job, the worker applies its protections to
//! itself (kiln_service::sandbox): the umask, the memory limit, `no_new_privs` and the
//! seccomp filter.

use kiln::{Config, DeviceRequest};
use kiln_service::exec::ExecOptions;
use kiln_service::sandbox::SandboxOptions;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags the supervisor passes.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where result arrays are written as NPY blobs.
    #[arg(long, value_name = "DIR")]
    blob_dir: PathBuf,
    /// Arrays with more elements are written as blobs instead of inline JSON.
    #[arg(long, default_value_t = 65_536)]
    inline_max_elements: usize,
    /// Own several devices (`workers.groups`): all, 0,1,..., cpu, cpu+all or cpu+0,1;
    /// batchable work is split over them. Instead of --device.
    #[arg(long, value_name = "DEVICES")]
    devices: Option<kiln::executor::DeviceSet>,
    /// Elements one input may decode to (`limits.max_elements`), checked from each blob's
    /// header before it is decoded.
    #[arg(long, default_value_t = 16 << 20)]
    max_elements: u64,
    /// Address-space limit in bytes (`workers.memory_limit`; 0: none). Not applied to a
    /// worker with a GPU.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    memory_limit: u64,
    /// Without `no_new_privs` and the seccomp filter (`workers.sandbox = false`).
    #[arg(long)]
    no_sandbox: bool,
}

/// Run the worker loop; its exit code tells the supervisor how it ended.
pub fn run(args: &Args, device: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    kiln_service::private::restrict_umask();
    let gpu = match &args.devices {
        Some(set) => set.gpus != kiln::executor::GpuSelection::None,
        None => !matches!(device, DeviceRequest::Cpu),
    };
    let sandbox = SandboxOptions {
        memory_limit: (args.memory_limit > 0).then_some(args.memory_limit),
        gpu,
        sandbox: !args.no_sandbox,
    };
    let protections = match kiln_service::sandbox::apply(&sandbox) {
        Ok(p) => p,
        Err(e) => {
            // a worker that cannot protect itself as configured does not run jobs
            let _ = kiln_service::protocol::write_frame(
                &mut std::io::stdout().lock(),
                &kiln_service::protocol::FromWorker::Fatal {
                    message: format!("cannot apply the worker's protections: {e}"),
                },
            );
            return Ok(ExitCode::from(kiln_service::worker::exit::NO_RUNTIME as u8));
        }
    };
    let opts = ExecOptions {
        blob_dir: args.blob_dir.clone(),
        inline_max_elements: args.inline_max_elements,
        max_elements: args.max_elements,
    };
    let code = match &args.devices {
        Some(set) => kiln_service::worker::run_pool(set, cfg, &opts, &protections),
        None => kiln_service::worker::run(device, cfg, &opts, &protections),
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
