//! Device discovery without creating a context.
//!
//! Only `cuInit` and `cuDeviceGet*` queries are made here, so a device outside the allowed
//! list is never touched (no context, no memory). Every library is checked for presence
//! before its first call, because cudarc's dynamic loader panics on a missing library.
#![allow(unsafe_code)]

use cudarc::driver::{result, sys};
use kiln_core::device::{format_uuid, DeviceDescriptor};
use kiln_core::{cuda_code_name, Error, NoDeviceReason, Result};

/// Which CUDA libraries can be loaded on this machine.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Libraries {
    /// The driver, `libcuda`.
    pub cuda: bool,
    /// The runtime compiler, `libnvrtc`.
    pub nvrtc: bool,
    /// `libcublas`.
    pub cublas: bool,
    /// `libcublasLt`.
    pub cublaslt: bool,
    /// `libcurand`.
    pub curand: bool,
}

/// Probe each library by trying to load it.
pub fn libraries() -> Libraries {
    use crate::libs::{present, Lib};
    Libraries {
        cuda: present(Lib::Cuda),
        nvrtc: present(Lib::Nvrtc),
        cublas: present(Lib::Cublas),
        cublaslt: present(Lib::CublasLt),
        curand: present(Lib::Curand),
    }
}

/// cuBLAS's version as `major*10000 + minor*100 + patch` (e.g. 130001), when it loads.
pub fn cublas_version() -> Option<i32> {
    if !crate::libs::present(crate::libs::Lib::Cublas) {
        return None;
    }
    use cudarc::cublas::sys::{cublasGetProperty, cublasStatus_t, libraryPropertyType};
    let mut parts = [0i32; 3];
    for (i, p) in [
        libraryPropertyType::MAJOR_VERSION,
        libraryPropertyType::MINOR_VERSION,
        libraryPropertyType::PATCH_LEVEL,
    ]
    .into_iter()
    .enumerate()
    {
        // SAFETY: the library is loaded; the out-pointer is valid for one i32.
        let st = unsafe { cublasGetProperty(p, &mut parts[i]) };
        if st != cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return None;
        }
    }
    Some(parts[0] * 10000 + parts[1] * 100 + parts[2])
}

/// A device as discovered, with the fields doctor prints.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceInfo {
    /// Ordinal, name, UUID, capability, SMs, memory.
    #[serde(flatten)]
    pub desc: DeviceDescriptor,
    /// PCI address `domain:bus:device.0`.
    pub pci_bus_id: String,
    /// Peak memory clock in kHz (0 if not reported).
    pub memory_clock_khz: i32,
    /// Memory bus width in bits.
    pub memory_bus_width: i32,
    /// L2 cache bytes.
    pub l2_bytes: i32,
}

impl DeviceInfo {
    /// The arch string NVRTC compiles for: `sm_{major}{minor}`.
    pub fn arch(&self) -> String {
        let (a, b) = self.desc.compute_capability;
        format!("sm_{a}{b}")
    }

    /// Theoretical DRAM bandwidth in GB/s from the clock and bus width (DDR: two transfers a
    /// clock). A ceiling to compare with, not a measurement.
    pub fn theoretical_bandwidth_gbps(&self) -> f64 {
        2.0 * self.memory_clock_khz as f64 * 1e3 * (self.memory_bus_width as f64 / 8.0) / 1e9
    }
}

/// What the driver reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DriverProbe {
    /// CUDA driver API version, e.g. 13000 for 13.0.
    pub driver_version: i32,
    /// Every device the driver sees, allowed or not.
    pub devices: Vec<DeviceInfo>,
}

fn drv(op: &str, e: result::DriverError) -> Error {
    let code = e.0 as i32;
    Error::Cuda {
        op: op.into(),
        device: "driver".into(),
        code,
        name: cuda_code_name(code),
    }
}

/// Why this machine has no GPU to use, or `None` when it has one: the driver is missing or
/// reports no device. A driver that is present but fails in any other way is `None` too, so
/// that a test on a machine with a broken GPU fails instead of skipping.
pub fn no_gpu_reason() -> Option<String> {
    match probe() {
        Err(Error::NoDevice(r)) if r.means_no_gpu() => Some(r.to_string()),
        Ok(p) if p.devices.is_empty() => Some(NoDeviceReason::NoDevices.to_string()),
        _ => None,
    }
}

/// Initialise the driver and list devices. Errors are `NoDevice` with the reason.
pub fn probe() -> Result<DriverProbe> {
    if !crate::libs::present(crate::libs::Lib::Cuda) {
        return Err(Error::NoDevice(NoDeviceReason::DriverNotFound));
    }
    if let Err(e) = result::init() {
        let code = e.0 as i32;
        if code == 100 {
            return Err(Error::NoDevice(NoDeviceReason::NoDevices));
        }
        return Err(Error::NoDevice(NoDeviceReason::DriverInitFailed {
            detail: format!("{code} {}", cuda_code_name(code)),
        }));
    }
    let mut driver_version = 0;
    // SAFETY: the driver is loaded and initialised; the out-pointer is valid.
    unsafe { sys::cuDriverGetVersion(&mut driver_version) }
        .result()
        .map_err(|e| drv("cuDriverGetVersion", e))?;
    let count = result::device::get_count().map_err(|e| drv("cuDeviceGetCount", e))?;
    let mut devices = Vec::new();
    for ordinal in 0..count {
        let dev = result::device::get(ordinal).map_err(|e| drv("cuDeviceGet", e))?;
        let attr = |a: sys::CUdevice_attribute| -> Result<i32> {
            // SAFETY: `dev` is a valid device handle from cuDeviceGet.
            unsafe { result::device::get_attribute(dev, a) }.map_err(|e| drv("cuDeviceGetAttribute", e))
        };
        use sys::CUdevice_attribute as A;
        let uuid = result::device::get_uuid(dev).map_err(|e| drv("cuDeviceGetUuid", e))?;
        let bytes: [u8; 16] = uuid.bytes.map(|b| b as u8);
        // SAFETY: `dev` is a valid device handle.
        let total = unsafe { result::device::total_mem(dev) }.map_err(|e| drv("cuDeviceTotalMem", e))?;
        devices.push(DeviceInfo {
            desc: DeviceDescriptor {
                ordinal: ordinal as usize,
                name: result::device::get_name(dev).map_err(|e| drv("cuDeviceGetName", e))?,
                uuid: format_uuid(&bytes),
                compute_capability: (
                    attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32,
                    attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32,
                ),
                multiprocessors: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
                total_memory: total as u64,
            },
            pci_bus_id: format!(
                "{:04x}:{:02x}:{:02x}.0",
                attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
                attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
                attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
            ),
            memory_clock_khz: attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).unwrap_or(0),
            memory_bus_width: attr(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).unwrap_or(0),
            l2_bytes: attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).unwrap_or(0),
        });
    }
    Ok(DriverProbe {
        driver_version,
        devices,
    })
}

/// Format a driver version (13000) as `13.0`.
pub fn format_driver_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probing_never_panics() {
        // On a machine without a driver this is NoDevice; with one, a list.
        match probe() {
            Ok(p) => assert!(p.driver_version > 0),
            Err(e) => assert!(matches!(e, Error::NoDevice(_)), "{e}"),
        }
        let _ = libraries();
        let _ = cublas_version();
        assert_eq!(format_driver_version(13000), "13.0");
        assert_eq!(format_driver_version(12080), "12.8");
    }
}
