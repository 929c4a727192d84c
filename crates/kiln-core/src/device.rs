//! Device requests (`--device`) and the device policy (which GPUs kiln may touch).
//!
//! The policy is evaluated here, on plain descriptions of the devices the driver reports
//! (read without creating a context), so that it is tested without a GPU and a device outside
//! the allowed list is never touched.

use crate::error::{Error, NoDeviceReason, Result};
use std::fmt;
use std::str::FromStr;

/// What the user asked for with `--device`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceRequest {
    /// The best usable GPU, else the CPU with a warning.
    #[default]
    Auto,
    /// The CPU backend.
    Cpu,
    /// The best usable GPU (`cuda`) or a given ordinal (`cuda:N`); an error if unusable.
    Cuda(Option<usize>),
}

impl FromStr for DeviceRequest {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "auto" => Ok(DeviceRequest::Auto),
            "cpu" => Ok(DeviceRequest::Cpu),
            "cuda" | "gpu" => Ok(DeviceRequest::Cuda(None)),
            _ => {
                if let Some(n) = t.strip_prefix("cuda:") {
                    n.parse::<usize>()
                        .map(|n| DeviceRequest::Cuda(Some(n)))
                        .map_err(|_| bad_device(s))
                } else {
                    Err(bad_device(s))
                }
            }
        }
    }
}

fn bad_device(s: &str) -> Error {
    Error::invalid(
        "--device",
        format!("`{s}` is not a device; use auto, cpu, cuda or cuda:N (N = 0, 1, ...)"),
    )
}

impl fmt::Display for DeviceRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceRequest::Auto => f.write_str("auto"),
            DeviceRequest::Cpu => f.write_str("cpu"),
            DeviceRequest::Cuda(None) => f.write_str("cuda"),
            DeviceRequest::Cuda(Some(n)) => write!(f, "cuda:{n}"),
        }
    }
}

/// One entry of the allowed-device list: an ordinal or a GPU UUID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSelector {
    /// A CUDA ordinal as the driver numbers devices.
    Ordinal(usize),
    /// A GPU UUID as `nvidia-smi -L` prints it (`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`),
    /// stored lower-case with the `GPU-` prefix.
    Uuid(String),
}

impl FromStr for DeviceSelector {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let t = s.trim();
        if t.is_empty() {
            return Err("empty entry".into());
        }
        if t.bytes().all(|b| b.is_ascii_digit()) {
            return t
                .parse()
                .map(DeviceSelector::Ordinal)
                .map_err(|_| format!("`{t}` is too large for an ordinal"));
        }
        let lower = t.to_ascii_lowercase();
        let body = lower.strip_prefix("gpu-").unwrap_or(&lower);
        let groups: Vec<&str> = body.split('-').collect();
        let lens = [8, 4, 4, 4, 12];
        let ok = groups.len() == 5
            && groups
                .iter()
                .zip(lens)
                .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()));
        if ok {
            Ok(DeviceSelector::Uuid(format!("gpu-{body}")))
        } else {
            Err(format!(
                "`{t}` is neither an ordinal (0, 1, ...) nor a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
            ))
        }
    }
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelector::Ordinal(n) => write!(f, "{n}"),
            DeviceSelector::Uuid(u) => write!(f, "GPU-{}", &u[4..]),
        }
    }
}

/// Parse a comma-separated allowed list (`0,2` or `GPU-...,1`). `all` or `*` means no list.
pub fn parse_allowed_list(s: &str) -> std::result::Result<Option<Vec<DeviceSelector>>, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("all") || t == "*" {
        return Ok(None);
    }
    if t.is_empty() || t.eq_ignore_ascii_case("none") {
        return Ok(Some(Vec::new()));
    }
    t.split(',')
        .map(str::parse)
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Format a UUID's 16 raw bytes as `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (lower-case).
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let h: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A device as the driver reports it, read without creating a context.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DeviceDescriptor {
    /// CUDA ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// `GPU-...` UUID.
    pub uuid: String,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub total_memory: u64,
}

/// The device policy: which devices may be touched and the minimum capability.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevicePolicy {
    /// `None`: every device; `Some(list)`: only those.
    pub allowed: Option<Vec<DeviceSelector>>,
    /// Devices below this compute capability are not used.
    pub min_compute_capability: (u32, u32),
}

impl Default for DevicePolicy {
    fn default() -> Self {
        DevicePolicy {
            allowed: None,
            min_compute_capability: (7, 0),
        }
    }
}

/// Why a device is or is not usable under a policy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Admission {
    /// Allowed and capable.
    Usable,
    /// Not in the allowed list: kiln never creates a context on it.
    NotAllowed,
    /// Allowed, but below the minimum compute capability.
    CapabilityTooLow,
}

impl DevicePolicy {
    /// The policy as written, for messages.
    pub fn describe(&self) -> String {
        match &self.allowed {
            None => "all".into(),
            Some(v) if v.is_empty() => "none".into(),
            Some(v) => v.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(","),
        }
    }

    /// Whether the allowed list admits this device.
    pub fn allows(&self, d: &DeviceDescriptor) -> bool {
        match &self.allowed {
            None => true,
            Some(list) => list.iter().any(|s| match s {
                DeviceSelector::Ordinal(n) => *n == d.ordinal,
                DeviceSelector::Uuid(u) => u.eq_ignore_ascii_case(&d.uuid),
            }),
        }
    }

    /// Classify one device.
    pub fn admit(&self, d: &DeviceDescriptor) -> Admission {
        if !self.allows(d) {
            Admission::NotAllowed
        } else if d.compute_capability < self.min_compute_capability {
            Admission::CapabilityTooLow
        } else {
            Admission::Usable
        }
    }

    /// Choose the device for a request among those the driver reports. `Ok(None)` means the
    /// CPU (only for [`DeviceRequest::Cpu`]). For `Auto`, an `Err(NoDevice)` tells the caller
    /// why it falls back to the CPU.
    pub fn select(&self, request: DeviceRequest, devices: &[DeviceDescriptor]) -> Result<Option<usize>> {
        let minimum = format!(
            "{}.{}",
            self.min_compute_capability.0, self.min_compute_capability.1
        );
        let pick = |cands: Vec<&DeviceDescriptor>| -> Result<usize> {
            if devices.is_empty() {
                return Err(Error::NoDevice(NoDeviceReason::NoDevices));
            }
            let allowed: Vec<&DeviceDescriptor> = cands.into_iter().filter(|d| self.allows(d)).collect();
            if allowed.is_empty() {
                return Err(Error::NoDevice(NoDeviceReason::NotAllowed {
                    policy: self.describe(),
                    seen: devices
                        .iter()
                        .map(|d| format!("{}:{}", d.ordinal, d.uuid))
                        .collect(),
                }));
            }
            allowed
                .iter()
                .filter(|d| d.compute_capability >= self.min_compute_capability)
                // Best: most SMs, then most memory, then the lowest ordinal.
                .max_by_key(|d| (d.multiprocessors, d.total_memory, std::cmp::Reverse(d.ordinal)))
                .map(|d| d.ordinal)
                .ok_or_else(|| {
                    Error::NoDevice(NoDeviceReason::CapabilityTooLow {
                        minimum: minimum.clone(),
                        seen: allowed
                            .iter()
                            .map(|d| {
                                format!(
                                    "{}:{}:{}.{}",
                                    d.ordinal, d.name, d.compute_capability.0, d.compute_capability.1
                                )
                            })
                            .collect(),
                    })
                })
        };
        match request {
            DeviceRequest::Cpu => Ok(None),
            DeviceRequest::Auto | DeviceRequest::Cuda(None) => pick(devices.iter().collect()).map(Some),
            DeviceRequest::Cuda(Some(n)) => match devices.iter().find(|d| d.ordinal == n) {
                None => Err(Error::NoDevice(NoDeviceReason::NoSuchOrdinal {
                    ordinal: n,
                    count: devices.len(),
                })),
                Some(d) => pick(vec![d]).map(Some),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(ordinal: usize, cc: (u32, u32), sms: u32) -> DeviceDescriptor {
        DeviceDescriptor {
            ordinal,
            name: format!("GPU{ordinal}"),
            uuid: format!("GPU-0000000{ordinal}-0000-0000-0000-000000000000"),
            compute_capability: cc,
            multiprocessors: sms,
            total_memory: 1 << 34,
        }
    }

    #[test]
    fn requests_parse() {
        assert_eq!("auto".parse::<DeviceRequest>().unwrap(), DeviceRequest::Auto);
        assert_eq!("CPU".parse::<DeviceRequest>().unwrap(), DeviceRequest::Cpu);
        assert_eq!(
            "cuda".parse::<DeviceRequest>().unwrap(),
            DeviceRequest::Cuda(None)
        );
        assert_eq!(
            "cuda:3".parse::<DeviceRequest>().unwrap(),
            DeviceRequest::Cuda(Some(3))
        );
        for bad in ["", "cuda:", "cuda:-1", "cuda:x", "gpu0", "tpu"] {
            let e = bad.parse::<DeviceRequest>().unwrap_err().to_string();
            assert!(e.contains("auto, cpu, cuda or cuda:N"), "{bad}: {e}");
        }
    }

    #[test]
    fn selectors_parse_and_reject_malformed() {
        assert_eq!("2".parse::<DeviceSelector>().unwrap(), DeviceSelector::Ordinal(2));
        let u = "GPU-5a3f09c1-12ab-34cd-56ef-0123456789AB"
            .parse::<DeviceSelector>()
            .unwrap();
        assert_eq!(
            u,
            DeviceSelector::Uuid("gpu-5a3f09c1-12ab-34cd-56ef-0123456789ab".into())
        );
        assert_eq!(u.to_string(), "GPU-5a3f09c1-12ab-34cd-56ef-0123456789ab");
        for bad in [
            "",
            "-1",
            "GPU-123",
            "GPU-5a3f09c1-12ab-34cd-56ef-0123456789",
            "zz",
            "1.5",
            "99999999999999999999999",
        ] {
            assert!(bad.parse::<DeviceSelector>().is_err(), "{bad} accepted");
        }
        assert_eq!(parse_allowed_list("all").unwrap(), None);
        assert_eq!(parse_allowed_list("0, 2").unwrap().unwrap().len(), 2);
        assert!(parse_allowed_list("0,,2").is_err());
        assert_eq!(parse_allowed_list("none").unwrap(), Some(vec![]));
    }

    #[test]
    fn uuid_formatting() {
        let mut b = [0u8; 16];
        b[0] = 0xab;
        b[15] = 0x01;
        assert_eq!(format_uuid(&b), "GPU-ab000000-0000-0000-0000-000000000001");
    }

    #[test]
    fn policy_selects_best_allowed_capable_device() {
        let devs = [dev(0, (8, 0), 108), dev(1, (9, 0), 132), dev(2, (6, 1), 200)];
        let p = DevicePolicy::default();
        assert_eq!(p.select(DeviceRequest::Auto, &devs).unwrap(), Some(1));
        assert_eq!(p.select(DeviceRequest::Cpu, &devs).unwrap(), None);
        assert_eq!(p.select(DeviceRequest::Cuda(Some(0)), &devs).unwrap(), Some(0));
        // cc 6.1 is below the default minimum 7.0
        let e = p.select(DeviceRequest::Cuda(Some(2)), &devs).unwrap_err();
        assert!(
            matches!(e, Error::NoDevice(NoDeviceReason::CapabilityTooLow { .. })),
            "{e}"
        );
        let e = p.select(DeviceRequest::Cuda(Some(7)), &devs).unwrap_err();
        assert!(matches!(
            e,
            Error::NoDevice(NoDeviceReason::NoSuchOrdinal { ordinal: 7, count: 3 })
        ));
    }

    #[test]
    fn policy_never_picks_a_device_outside_the_list() {
        let devs = [dev(0, (8, 0), 108), dev(1, (9, 0), 132)];
        let p = DevicePolicy {
            allowed: Some(vec![DeviceSelector::Ordinal(0)]),
            ..Default::default()
        };
        assert_eq!(p.select(DeviceRequest::Auto, &devs).unwrap(), Some(0));
        assert_eq!(p.admit(&devs[1]), Admission::NotAllowed);
        let e = p.select(DeviceRequest::Cuda(Some(1)), &devs).unwrap_err();
        assert!(
            matches!(e, Error::NoDevice(NoDeviceReason::NotAllowed { .. })),
            "{e}"
        );
        let by_uuid = DevicePolicy {
            allowed: Some(vec![devs[1].uuid.parse().unwrap()]),
            ..Default::default()
        };
        assert_eq!(by_uuid.select(DeviceRequest::Auto, &devs).unwrap(), Some(1));
        let none = DevicePolicy {
            allowed: Some(vec![]),
            ..Default::default()
        };
        assert!(none.select(DeviceRequest::Auto, &devs).is_err());
        assert!(matches!(
            p.select(DeviceRequest::Auto, &[]).unwrap_err(),
            Error::NoDevice(NoDeviceReason::NoDevices)
        ));
    }
}
