//! `kiln power show|set`: read the power figures; set a limit, validated, with `--yes` and
//! root only. `set` changes the card for every user until reset: never run it on a shared
//! machine (the tests exercise only the refusals and the validation).

use crate::exit;
use crate::monitor_cmd::fail;
use kiln::{Config, DeviceRequest};
use std::process::ExitCode;

/// `kiln power` options.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Each GPU's draw, enforced limit, set limit, default, and settable range.
    Show {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Set one GPU's power-management limit (needs root and --yes).
    Set {
        /// NVML index of the GPU.
        #[arg(long, default_value_t = 0)]
        gpu: u32,
        /// The new limit in watts, within the card's range (see `kiln power show`).
        #[arg(long)]
        watts: f64,
        /// Confirm: the limit applies to every user of the card until reset or reboot.
        #[arg(long)]
        yes: bool,
    },
}

/// Run `kiln power`.
pub fn run(args: &Args, _request: DeviceRequest, _cfg: &Config) -> anyhow::Result<ExitCode> {
    match &args.action {
        Action::Show { json } => {
            let info = match kiln_monitor::power::power_info() {
                Ok(i) => i,
                Err(e) => return Ok(fail(&e)),
            };
            if *json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                let w = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
                println!(
                    "{:>3} {:<22} {:>6} {:>8} {:>6} {:>8} {:>10}",
                    "gpu", "model", "draw_W", "enforced", "limit", "default", "range_W"
                );
                for i in &info {
                    println!(
                        "{:>3} {:<22} {:>6} {:>8} {:>6} {:>8} {:>10}",
                        i.index,
                        i.model,
                        w(i.usage_w),
                        w(i.enforced_limit_w),
                        w(i.limit_w),
                        w(i.default_limit_w),
                        format!("{}-{}", w(i.min_limit_w), w(i.max_limit_w))
                    );
                }
            }
            Ok(ExitCode::from(exit::OK))
        }
        Action::Set { gpu, watts, yes } => {
            if !*yes {
                eprintln!(
                    "error: `kiln power set` changes GPU {gpu}'s power limit for every user until \
                     reset; add --yes to confirm"
                );
                return Ok(ExitCode::from(exit::INVALID));
            }
            let info = match kiln_monitor::power::power_info() {
                Ok(i) => i,
                Err(e) => return Ok(fail(&e)),
            };
            let Some(dev) = info.iter().find(|i| i.index == *gpu) else {
                eprintln!("error: no GPU {gpu} ({} found)", info.len());
                return Ok(ExitCode::from(exit::NO_DEVICE));
            };
            let (Some(min), Some(max)) = (dev.min_limit_w, dev.max_limit_w) else {
                eprintln!("error: GPU {gpu} does not report a settable power range");
                return Ok(ExitCode::from(exit::INVALID));
            };
            if let Err(e) = kiln_monitor::power::validate_power_limit(*watts, min, max) {
                return Ok(fail(&e));
            }
            if !is_root() {
                eprintln!("error: setting a power limit needs root (NVML refuses otherwise)");
                return Ok(ExitCode::from(exit::INVALID));
            }
            match kiln_monitor::power::set_power_limit(*gpu, *watts) {
                Ok(now) => {
                    println!("GPU {gpu}: power limit set; enforced limit now {now:.0} W");
                    Ok(ExitCode::from(exit::OK))
                }
                Err(e) => Ok(fail(&e)),
            }
        }
    }
}

/// Effective uid 0, from `/proc/self/status` (`Uid: real effective saved fs`).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
