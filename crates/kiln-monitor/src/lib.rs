//! kiln-monitor: what NVML says about the GPUs, kiln's own figures, and alerts on both.
//!
//! - [`Sampler`] reads the host (`/proc`) and every allowed GPU through NVML each tick into
//!   a plain [`Sample`]. NVML (`libnvidia-ml`) is loaded at run time by nvml-wrapper and
//!   initialised once per process; where it is missing the sampler reports the host only and
//!   says why, never panics. Unsupported fields are skipped after one debug line.
//! - [`Metrics`] turns samples and kiln's own figures ([`KilnMetrics`]: pool, launches,
//!   compile cache, jobs) into the OpenMetrics text exposition (prometheus-client);
//!   [`global`] is the process-wide registry other crates fill.
//! - [`AlertEngine`] evaluates [`Rule`]s on samples: warn lines, `kiln_alert_active` gauges
//!   and an optional webhook.
//! - [`power`]: power read-out and the validated limit setter.
//!
//! kiln-monitor knows no CUDA backend and speaks no HTTP server: the CLI (or the service)
//! serves the exposition and copies pool figures in.
#![deny(missing_docs)]

pub mod alert;
pub mod config;
mod error;
pub mod host;
pub mod metrics;
pub mod nvml;
pub mod power;
pub mod read;
pub mod sample;
pub mod slow;
pub mod webhook;

pub use alert::{AlertConfig, AlertEngine, Condition, Rule, Transition};
pub use config::MonitorConfig;
pub use error::{Error, Result};
pub use metrics::{global, KilnMetrics, Metrics, PoolFigures};
pub use nvml::{DeviceFilter, Sampler, SamplerOptions};
pub use sample::{GpuProcess, GpuSample, HostSample, NvmlStatus, Sample};
pub use slow::SlowFields;

/// One GPU as NVML reports it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NvmlDevice {
    /// NVML index.
    pub index: u32,
    /// `GPU-...` UUID (matches CUDA's).
    pub uuid: String,
    /// Name.
    pub name: String,
    /// Memory: total, free, used bytes.
    pub memory_total: u64,
    /// Free bytes.
    pub memory_free: u64,
    /// Used bytes.
    pub memory_used: u64,
    /// Current PCIe generation and lane width.
    pub pcie_current: Option<(u32, u32)>,
    /// Maximum PCIe generation and lane width.
    pub pcie_max: Option<(u32, u32)>,
    /// GPU temperature in °C.
    pub temperature_c: Option<u32>,
    /// Power draw in watts.
    pub power_w: Option<f64>,
    /// Enforced power limit in watts (read only: kiln never changes it).
    pub power_limit_w: Option<f64>,
    /// Whether the driver keeps the GPU initialised with no process holding it (Linux
    /// persistence mode; read only). `None` where NVML cannot say (e.g. Windows).
    pub persistence_mode: Option<bool>,
}

/// What NVML reports for the machine.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NvmlSnapshot {
    /// Driver version string, e.g. `580.159.04`.
    pub driver_version: String,
    /// NVML's own version.
    pub nvml_version: String,
    /// Every GPU.
    pub devices: Vec<NvmlDevice>,
}

/// Read every GPU's state (for `kiln doctor`). `Err` says why NVML is unavailable.
pub fn snapshot() -> std::result::Result<NvmlSnapshot, String> {
    let nvml = nvml::nvml().map_err(|e| e.to_string())?;
    let count = nvml.device_count().map_err(|e| e.to_string())?;
    let mut devices = Vec::new();
    for index in 0..count {
        let d = nvml.device_by_index(index).map_err(|e| e.to_string())?;
        let mem = d.memory_info().ok();
        let link = |g: Option<u32>, w: Option<u32>| g.zip(w);
        devices.push(NvmlDevice {
            index,
            uuid: d.uuid().unwrap_or_default(),
            name: d.name().unwrap_or_default(),
            memory_total: mem.as_ref().map(|m| m.total).unwrap_or(0),
            memory_free: mem.as_ref().map(|m| m.free).unwrap_or(0),
            memory_used: mem.as_ref().map(|m| m.used).unwrap_or(0),
            pcie_current: link(d.current_pcie_link_gen().ok(), d.current_pcie_link_width().ok()),
            pcie_max: link(d.max_pcie_link_gen().ok(), d.max_pcie_link_width().ok()),
            temperature_c: d
                .temperature(nvml_wrapper::enum_wrappers::device::TemperatureSensor::Gpu)
                .ok(),
            power_w: d.power_usage().ok().map(|mw| mw as f64 / 1000.0),
            power_limit_w: d.enforced_power_limit().ok().map(|mw| mw as f64 / 1000.0),
            persistence_mode: d.is_in_persistent_mode().ok(),
        });
    }
    Ok(NvmlSnapshot {
        driver_version: nvml.sys_driver_version().unwrap_or_default(),
        nvml_version: nvml.sys_nvml_version().unwrap_or_default(),
        devices,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn snapshot_never_panics() {
        match super::snapshot() {
            Ok(s) => assert!(!s.driver_version.is_empty()),
            Err(e) => assert!(e.contains("NVML")),
        }
    }
}
