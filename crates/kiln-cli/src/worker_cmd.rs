//! `kiln worker` (hidden): one worker process of `kiln serve`, speaking length-prefixed
//! frames on stdin/stdout. Not for people to run.

use kiln::{Config, DeviceRequest};
use kiln_service::exec::ExecOptions;
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
}

/// Run the worker loop; its exit code tells the supervisor how it ended.
pub fn run(args: &Args, device: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let opts = ExecOptions {
        blob_dir: args.blob_dir.clone(),
        inline_max_elements: args.inline_max_elements,
    };
    let code = match &args.devices {
        Some(set) => kiln_service::worker::run_pool(set, cfg, &opts),
        None => kiln_service::worker::run(device, cfg, &opts),
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
