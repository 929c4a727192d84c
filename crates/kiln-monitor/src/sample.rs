//! What one tick of the sampler produces: plain data, so alert rules and the exposition can
//! be tested on scripted samples without a GPU.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One tick: the host, every sampled GPU, and whether NVML answered.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Sample {
    /// Milliseconds since the Unix epoch when the tick started.
    pub timestamp_ms: u64,
    /// Whether NVML is loaded, and why not where it is not.
    pub nvml: NvmlStatus,
    /// The host and this process.
    pub host: HostSample,
    /// One entry per sampled (allowed) GPU, in NVML index order.
    pub gpus: Vec<GpuSample>,
}

/// Whether NVML answered.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NvmlStatus {
    /// `true` where `libnvidia-ml` loaded and initialised.
    pub available: bool,
    /// Why NVML is unavailable (`None` where it is available).
    pub reason: Option<String>,
    /// Driver version where NVML answered.
    pub driver_version: Option<String>,
}

/// Host-side figures, read from `/proc` (Linux; `None` elsewhere).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HostSample {
    /// This process's resident set size in bytes.
    pub process_rss_bytes: Option<u64>,
    /// CPU seconds (user + system) this process has used since it started.
    pub process_cpu_seconds: Option<f64>,
    /// This process's CPU use since the previous tick, in percent of one core.
    pub process_cpu_percent: Option<f64>,
    /// Host memory in bytes (`MemTotal`).
    pub memory_total_bytes: Option<u64>,
    /// Host memory available to new work in bytes (`MemAvailable`).
    pub memory_available_bytes: Option<u64>,
}

/// One GPU at one tick. A field is `None` where the device or driver does not support it
/// (skipped from then on) or where the read failed this tick.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GpuSample {
    /// NVML index.
    pub index: u32,
    /// `GPU-...` UUID.
    pub uuid: String,
    /// Product name, e.g. `NVIDIA H200`.
    pub model: String,
    /// GPU utilization over the driver's last sample period, percent.
    pub gpu_util_percent: Option<u32>,
    /// Memory-controller utilization, percent.
    pub mem_util_percent: Option<u32>,
    /// Framebuffer bytes used.
    pub memory_used_bytes: Option<u64>,
    /// Framebuffer bytes free.
    pub memory_free_bytes: Option<u64>,
    /// Framebuffer bytes in total.
    pub memory_total_bytes: Option<u64>,
    /// GPU die temperature, °C.
    pub temperature_c: Option<u32>,
    /// Power draw, watts.
    pub power_w: Option<f64>,
    /// Enforced power limit, watts.
    pub power_limit_w: Option<f64>,
    /// Energy used since the driver loaded, joules.
    pub energy_j: Option<f64>,
    /// How old `energy_j` is in milliseconds where the sampler's second thread read it
    /// (by default every 5th round); `None` where it was read in this tick.
    #[serde(default)]
    pub energy_age_ms: Option<u64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub mem_clock_mhz: Option<u32>,
    /// How old the two clocks are in milliseconds where the sampler's second thread read
    /// them; `None` where they were read in this tick.
    #[serde(default)]
    pub clocks_age_ms: Option<u64>,
    /// The raw clock-throttle (event) reason bitmask.
    pub throttle_mask: Option<u64>,
    /// The throttle reasons active now, decoded (`gpu_idle`, `sw_power_cap`, ...).
    pub throttle_reasons: Vec<String>,
    /// Corrected ECC errors since the driver loaded (volatile counter).
    pub ecc_corrected: Option<u64>,
    /// Uncorrected ECC errors since the driver loaded (volatile counter).
    pub ecc_uncorrected: Option<u64>,
    /// PCIe transmit throughput, KB/s (NVML's 20 ms window).
    pub pcie_tx_kbps: Option<u32>,
    /// PCIe receive throughput, KB/s.
    pub pcie_rx_kbps: Option<u32>,
    /// The reads that ran on the sampler's second thread (`energy`, `clocks`, `pcie` by
    /// default, and any read a tick found slow on this host), by name, with how old their
    /// values are in milliseconds. Empty where everything was read in this tick.
    #[serde(default)]
    pub lane_ages_ms: BTreeMap<String, u64>,
    /// Critical Xid events seen since the sampler started, by Xid code.
    pub xid_counts: BTreeMap<u64, u64>,
    /// Whether Xid events are watched on this GPU (NVML event set registered): where not,
    /// `xid_counts` stays empty for want of a source, not for want of errors.
    #[serde(default)]
    pub xid_watched: bool,
    /// The code of the last critical Xid seen (DCGM's `DCGM_FI_DEV_XID_ERRORS`), if any.
    #[serde(default)]
    pub last_xid: Option<u64>,
    /// Processes holding a compute context on this GPU (filled where attribution is on).
    pub processes: Vec<GpuProcess>,
}

impl GpuSample {
    /// Free memory as a fraction of the total, where both are known.
    pub fn free_fraction(&self) -> Option<f64> {
        match (self.memory_free_bytes, self.memory_total_bytes) {
            (Some(f), Some(t)) if t > 0 => Some(f as f64 / t as f64),
            _ => None,
        }
    }

    /// Every Xid event counted so far.
    pub fn xid_total(&self) -> u64 {
        self.xid_counts.values().sum()
    }
}

/// One process with a compute context on a GPU.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GpuProcess {
    /// Process id (in NVML's PID namespace: the host's, inside a container it may differ).
    pub pid: u32,
    /// Device memory it holds in bytes, where the driver reports it.
    pub used_memory_bytes: Option<u64>,
    /// Its command name (`/proc/PID/comm`), where readable.
    pub name: Option<String>,
    /// `true` for this process or another `kiln*` process.
    pub kiln: bool,
}
