//! The NVML sampler: one [`Device`] handle per allowed GPU, read field by field each tick.
//!
//! NVML is initialised once per process (it is `Send + Sync`); where `libnvidia-ml` is
//! missing the sampler has no devices and the sample says why. A field the device or driver
//! does not support is logged once at debug level and not asked again; a field that fails
//! for another reason is `None` for that tick only. Critical Xid events come from one NVML
//! event set drained without waiting at each tick.
//!
//! The slow fields (energy and the two clocks, milliseconds of driver time each) are read by
//! default on a second thread, the [`slow`](crate::slow) lane, and a tick reports its last
//! read with the age; [`SlowFields::Inline`] reads them in the tick instead.

use crate::error::{Error, Result};
use crate::host::{process_name, HostSampler};
use crate::sample::{GpuProcess, GpuSample, NvmlStatus, Sample};
use crate::slow::{age_ms, Lane, Round, SlowFields, SlowValues};
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, TemperatureSensor,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, EventSet, Nvml};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

static NVML: OnceLock<std::result::Result<Nvml, String>> = OnceLock::new();

/// The process-wide NVML handle, initialised on first use. `Err` says why NVML is
/// unavailable (no driver library, no driver, no permission).
pub fn nvml() -> Result<&'static Nvml> {
    NVML.get_or_init(|| {
        Nvml::init()
            .map_err(|e| format!("NVML unavailable ({e}): no NVIDIA driver library here, host metrics only"))
    })
    .as_ref()
    .map_err(|e| Error::NvmlUnavailable(e.clone()))
}

/// Which GPUs to sample: an NVML index or a `GPU-...` UUID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceFilter {
    /// NVML index (PCI bus order; CUDA's ordinal agrees with `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    Index(u32),
    /// UUID, compared case-insensitively.
    Uuid(String),
}

/// Sampler options.
#[derive(Clone, Debug, Default)]
pub struct SamplerOptions {
    /// `None`: every GPU NVML lists; `Some`: only those matching a filter.
    pub devices: Option<Vec<DeviceFilter>>,
    /// Also list the processes holding each GPU (one more NVML call per device and tick).
    pub processes: bool,
    /// Where energy and the clocks are read (default: on a second thread, energy every 5th
    /// round; see [`crate::slow`]).
    pub slow: SlowFields,
}

/// The fields read each tick; a bit each in a device's `unsupported` mask.
#[derive(Clone, Copy, Debug)]
enum Field {
    Utilization = 0,
    Memory,
    Temperature,
    Power,
    PowerLimit,
    Energy,
    SmClock,
    MemClock,
    Throttle,
    EccCorrected,
    EccUncorrected,
    PcieTx,
    PcieRx,
    Processes,
    Batched,
}

struct DeviceState {
    device: Device<'static>,
    index: u32,
    uuid: String,
    model: String,
    unsupported: u32,
    xid_counts: BTreeMap<u64, u64>,
    xid_watched: bool,
    last_xid: Option<u64>,
    /// The last PCIe byte counters read: (NVML timestamp in µs, tx bytes, rx bytes).
    pcie_prev: Option<(i64, u64, u64)>,
}

/// Reads the host and every allowed GPU each tick.
pub struct Sampler {
    status: NvmlStatus,
    devices: Vec<DeviceState>,
    events: Option<EventSet<'static>>,
    host: HostSampler,
    processes: bool,
    /// The slow fields' thread; `None` where they are read inline (or there is no GPU).
    lane: Option<Lane>,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("status", &self.status)
            .field("devices", &self.devices.len())
            .finish()
    }
}

impl Sampler {
    /// A sampler over the allowed GPUs; where NVML is unavailable, over the host only (the
    /// status says why and [`Sampler::nvml_status`] can be printed once).
    pub fn new(opts: &SamplerOptions) -> Sampler {
        let mut s = Sampler {
            status: NvmlStatus::default(),
            devices: Vec::new(),
            events: None,
            host: HostSampler::new(),
            processes: opts.processes,
            lane: None,
        };
        let nvml = match nvml() {
            Ok(n) => n,
            Err(e) => {
                s.status.reason = Some(e.to_string());
                return s;
            }
        };
        s.status.available = true;
        s.status.driver_version = nvml.sys_driver_version().ok();
        let count = match nvml.device_count() {
            Ok(c) => c,
            Err(e) => {
                s.status.reason = Some(format!("NVML device count failed: {e}"));
                return s;
            }
        };
        for index in 0..count {
            let Ok(device) = nvml.device_by_index(index) else {
                tracing::debug!("NVML cannot open GPU {index}; not sampled");
                continue;
            };
            let uuid = device.uuid().unwrap_or_default();
            let allowed = opts.devices.as_ref().is_none_or(|list| {
                list.iter().any(|f| match f {
                    DeviceFilter::Index(i) => *i == index,
                    DeviceFilter::Uuid(u) => u.eq_ignore_ascii_case(&uuid),
                })
            });
            if !allowed {
                continue;
            }
            let model = device.name().unwrap_or_default();
            s.devices.push(DeviceState {
                device,
                index,
                uuid,
                model,
                unsupported: 0,
                xid_counts: BTreeMap::new(),
                xid_watched: false,
                last_xid: None,
                pcie_prev: None,
            });
        }
        s.events = register_xid_events(nvml, &mut s.devices);
        if let (SlowFields::Background { energy_every }, false) = (opts.slow, s.devices.is_empty()) {
            s.lane = Some(start_lane(nvml, &s.devices, energy_every));
        }
        s
    }

    /// The slow-field thread's last read time and finished rounds (`None` where the slow
    /// fields are read inline).
    pub fn slow_lane_stats(&self) -> Option<(Option<Duration>, u64)> {
        self.lane.as_ref().map(Lane::stats)
    }

    /// Whether NVML answered, and why not.
    pub fn nvml_status(&self) -> &NvmlStatus {
        &self.status
    }

    /// How many GPUs are sampled.
    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// Read everything once.
    pub fn sample(&mut self) -> Sample {
        let timestamp_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        self.drain_xid_events();
        let own_pid = std::process::id();
        let processes = self.processes;
        // The last finished slow read; the kick for the next tick's comes after this tick's
        // own reads, so the lane's driver calls run between ticks, not beside them. (On
        // the H200, 2026-12-05: 0.93 ms a tick on one host; 5.9 ms kicked first and 5.8 ms
        // kicked after on another, where the driver's calls cost more: performance.md.)
        let slow = self.lane.as_ref().map(Lane::latest);
        let now = Instant::now();
        let gpus = self
            .devices
            .iter_mut()
            .enumerate()
            .map(|(i, d)| {
                let slow = slow.as_ref().and_then(|v| v.get(i));
                sample_device(d, processes, own_pid, slow, now)
            })
            .collect();
        if let Some(l) = &self.lane {
            l.kick();
        }
        Sample {
            timestamp_ms,
            nvml: self.status.clone(),
            host: self.host.sample(),
            gpus,
        }
    }

    fn drain_xid_events(&mut self) {
        let Some(set) = &self.events else { return };
        // Bounded: a storm of events cannot stall a tick.
        for _ in 0..1024 {
            match set.wait(0) {
                Ok(ev) => {
                    if !ev.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
                        continue;
                    }
                    let code = match ev.event_data {
                        Some(XidError::Value(v)) => v,
                        _ => 0,
                    };
                    let index = ev.device.index().ok();
                    if let Some(d) = self.devices.iter_mut().find(|d| Some(d.index) == index) {
                        tracing::warn!(gpu = d.index, xid = code, "Xid {code} on GPU {}", d.index);
                        *d.xid_counts.entry(code).or_insert(0) += 1;
                        d.last_xid = Some(code);
                    }
                }
                Err(NvmlError::Timeout) => break,
                Err(e) => {
                    tracing::debug!("NVML event wait failed: {e}");
                    break;
                }
            }
        }
    }
}

fn register_xid_events(nvml: &'static Nvml, devices: &mut [DeviceState]) -> Option<EventSet<'static>> {
    if devices.is_empty() {
        return None;
    }
    let mut set = match nvml.create_event_set() {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!("NVML event set unavailable ({e}): Xid events not counted");
            return None;
        }
    };
    for d in devices {
        #[cfg(target_os = "linux")]
        match d.device.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
            Ok(s) => {
                set = s;
                d.xid_watched = true;
            }
            Err(e) => {
                tracing::debug!("GPU {}: Xid events unavailable ({e})", d.index);
                // The failed call released the set; start a new one for the next device.
                set = nvml.create_event_set().ok()?;
            }
        }
    }
    Some(set)
}

/// Read one field unless it is known to be unsupported; mark it so on a permanent error.
fn read<T>(
    d: &mut DeviceState,
    field: Field,
    f: impl FnOnce(&Device<'static>) -> std::result::Result<T, NvmlError>,
) -> Option<T> {
    read_field(&d.device, d.index, &mut d.unsupported, field, f)
}

/// [`read`] on a device handle and its own unsupported mask (the slow lane keeps its own).
fn read_field<T>(
    device: &Device<'static>,
    index: u32,
    unsupported: &mut u32,
    field: Field,
    f: impl FnOnce(&Device<'static>) -> std::result::Result<T, NvmlError>,
) -> Option<T> {
    let bit = 1u32 << field as u32;
    if *unsupported & bit != 0 {
        return None;
    }
    match f(device) {
        Ok(v) => Some(v),
        Err(
            e @ (NvmlError::NotSupported
            | NvmlError::FunctionNotFound
            | NvmlError::FailedToLoadSymbol(_)
            | NvmlError::NoPermission
            | NvmlError::InvalidArg),
        ) => {
            *unsupported |= bit;
            tracing::debug!("GPU {index}: {field:?} unsupported ({e}); not read again");
            None
        }
        Err(e) => {
            tracing::trace!("GPU {index}: {field:?} read failed ({e})");
            None
        }
    }
}

/// One device as the slow lane reads it: its own handle and unsupported mask.
struct SlowDevice {
    device: Option<Device<'static>>,
    index: u32,
    unsupported: u32,
}

/// Reads the clocks, and energy where the round asks, into `v`.
fn read_slow(d: &mut SlowDevice, round: Round, v: &mut SlowValues) {
    let Some(device) = &d.device else { return };
    let (i, u) = (d.index, &mut d.unsupported);
    v.sm_clock_mhz = read_field(device, i, u, Field::SmClock, |x| x.clock_info(Clock::SM));
    v.mem_clock_mhz = read_field(device, i, u, Field::MemClock, |x| x.clock_info(Clock::Memory));
    v.clocks_at = Some(Instant::now());
    if round.energy {
        v.energy_j = read_field(device, i, u, Field::Energy, |x| x.total_energy_consumption())
            .map(|mj| mj as f64 / 1e3);
        v.energy_at = v.energy_j.map(|_| Instant::now());
    }
}

/// Starts the slow lane over the sampled devices (round 0 runs here: see [`Lane::start`]).
fn start_lane(nvml: &'static Nvml, devices: &[DeviceState], energy_every: u32) -> Lane {
    let mut slow: Vec<SlowDevice> = devices
        .iter()
        .map(|d| SlowDevice {
            device: nvml.device_by_index(d.index).ok(),
            index: d.index,
            unsupported: 0,
        })
        .collect();
    Lane::start(slow.len(), energy_every, move |round, values| {
        for (d, v) in slow.iter_mut().zip(values.iter_mut()) {
            read_slow(d, round, v);
        }
    })
}

/// The rate in KB/s (1000 bytes, NVML's throughput unit) between two readings of a byte
/// counter, `(timestamp µs, bytes)`; none for the first reading, a counter that went back
/// (reset or wrap) or no time between them.
fn rate_kbps(prev: Option<(i64, u64)>, now: (i64, u64)) -> Option<u32> {
    let (t0, b0) = prev?;
    let (t1, b1) = now;
    if t1 <= t0 || b1 < b0 {
        return None;
    }
    let per_s = (b1 - b0) as f64 / ((t1 - t0) as f64 / 1e6);
    Some((per_s / 1e3).min(u32::MAX as f64) as u32)
}

/// What one `nvmlDeviceGetFieldValues` call reads each tick: the PCIe byte counters
/// (NVML timestamp µs, bytes), transmit and receive.
#[derive(Default)]
struct Batch {
    tx: Option<(i64, u64)>,
    rx: Option<(i64, u64)>,
}

/// The PCIe byte counters in one `nvmlDeviceGetFieldValues` call. Measured 2026-12-03 on the
/// H200: `nvmlDeviceGetPcieThroughput` samples the link for 20 ms a call (two a tick were
/// ~40 of a 48 ms sample); the counters' field-values call cost 0.16 ms. Energy and the ECC
/// totals stay on their own calls: through field values, energy cost the same 3.9 ms and the
/// five-field batch 5.5 ms, against 0.002 ms for each ECC call.
fn read_batch(d: &mut DeviceState) -> Batch {
    use nvml_wrapper::enums::device::SampleValue;
    use nvml_wrapper::structs::device::FieldId;
    use nvml_wrapper::sys_exports::field_id::{
        NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES,
    };
    let ids = [
        FieldId(NVML_FI_DEV_PCIE_COUNT_TX_BYTES),
        FieldId(NVML_FI_DEV_PCIE_COUNT_RX_BYTES),
    ];
    let values = read(d, Field::Batched, |x| {
        Ok::<_, NvmlError>(
            x.field_values_for(&ids)?
                .into_iter()
                .map(|s| {
                    let s = s.ok()?;
                    let v = match s.value.ok()? {
                        SampleValue::U64(v) => v,
                        SampleValue::U32(v) => u64::from(v),
                        SampleValue::I64(v) => v.max(0) as u64,
                        SampleValue::F64(v) => v.max(0.0) as u64,
                    };
                    Some((s.timestamp, v))
                })
                .collect::<Vec<_>>(),
        )
    })
    .unwrap_or_default();
    let at = |i: usize| values.get(i).copied().flatten();
    Batch { tx: at(0), rx: at(1) }
}

/// PCIe throughput from the batch's byte counters: the rate between ticks (none on the
/// first). Where the counters are missing, NVML's 20 ms sampling calls.
fn pcie_rates(d: &mut DeviceState, b: &Batch) -> (Option<u32>, Option<u32>) {
    match (b.tx, b.rx) {
        (Some((t, tx)), Some((_, rx))) => {
            let prev = d.pcie_prev.replace((t, tx, rx));
            (
                rate_kbps(prev.map(|p| (p.0, p.1)), (t, tx)),
                rate_kbps(prev.map(|p| (p.0, p.2)), (t, rx)),
            )
        }
        _ => (
            read(d, Field::PcieTx, |x| x.pcie_throughput(PcieUtilCounter::Send)),
            read(d, Field::PcieRx, |x| x.pcie_throughput(PcieUtilCounter::Receive)),
        ),
    }
}

fn sample_device(
    d: &mut DeviceState,
    processes: bool,
    own_pid: u32,
    slow: Option<&SlowValues>,
    now: Instant,
) -> GpuSample {
    // The slow fields: the lane's last read (with its age), or read here (no age).
    let (slow, lane) = match slow {
        Some(v) => (v.clone(), true),
        None => (
            SlowValues {
                sm_clock_mhz: read(d, Field::SmClock, |x| x.clock_info(Clock::SM)),
                mem_clock_mhz: read(d, Field::MemClock, |x| x.clock_info(Clock::Memory)),
                energy_j: read(d, Field::Energy, |x| x.total_energy_consumption()).map(|mj| mj as f64 / 1e3),
                ..SlowValues::default()
            },
            false,
        ),
    };
    let age = |at| if lane { age_ms(at, now) } else { None };
    let batch = read_batch(d);
    let (pcie_tx, pcie_rx) = pcie_rates(d, &batch);
    let util = read(d, Field::Utilization, |x| x.utilization_rates());
    let mem = read(d, Field::Memory, |x| x.memory_info());
    let throttle = read(d, Field::Throttle, |x| x.current_throttle_reasons());
    let procs = if processes {
        read(d, Field::Processes, |x| x.running_compute_processes()).unwrap_or_default()
    } else {
        Vec::new()
    };
    GpuSample {
        index: d.index,
        uuid: d.uuid.clone(),
        model: d.model.clone(),
        gpu_util_percent: util.as_ref().map(|u| u.gpu),
        mem_util_percent: util.as_ref().map(|u| u.memory),
        memory_used_bytes: mem.as_ref().map(|m| m.used),
        memory_free_bytes: mem.as_ref().map(|m| m.free),
        memory_total_bytes: mem.as_ref().map(|m| m.total),
        temperature_c: read(d, Field::Temperature, |x| x.temperature(TemperatureSensor::Gpu)),
        power_w: read(d, Field::Power, |x| x.power_usage()).map(|mw| mw as f64 / 1e3),
        power_limit_w: read(d, Field::PowerLimit, |x| x.enforced_power_limit()).map(|mw| mw as f64 / 1e3),
        energy_j: slow.energy_j,
        energy_age_ms: age(slow.energy_at),
        sm_clock_mhz: slow.sm_clock_mhz,
        mem_clock_mhz: slow.mem_clock_mhz,
        clocks_age_ms: age(slow.clocks_at),
        throttle_mask: throttle.map(|t| t.bits()),
        throttle_reasons: throttle
            .map(|t| t.iter_names().map(|(n, _)| n.to_ascii_lowercase()).collect())
            .unwrap_or_default(),
        ecc_corrected: read(d, Field::EccCorrected, |x| {
            x.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
        }),
        ecc_uncorrected: read(d, Field::EccUncorrected, |x| {
            x.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
        }),
        pcie_tx_kbps: pcie_tx,
        pcie_rx_kbps: pcie_rx,
        xid_counts: d.xid_counts.clone(),
        xid_watched: d.xid_watched,
        last_xid: d.last_xid,
        processes: procs
            .into_iter()
            .map(|p| {
                let name = process_name(p.pid);
                GpuProcess {
                    pid: p.pid,
                    used_memory_bytes: match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => Some(b),
                        UsedGpuMemory::Unavailable => None,
                    },
                    kiln: p.pid == own_pid || name.as_deref().is_some_and(|n| n.starts_with("kiln")),
                    name,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod pcie_tests {
    use super::rate_kbps;

    #[test]
    fn counter_rates_need_two_readings_that_move_forward() {
        assert_eq!(rate_kbps(None, (1_000_000, 5)), None);
        // 2 MB in half a second: 4,000 KB/s
        assert_eq!(
            rate_kbps(Some((1_000_000, 0)), (1_500_000, 2_000_000)),
            Some(4_000)
        );
        assert_eq!(rate_kbps(Some((1_000_000, 10)), (1_000_000, 20)), None);
        assert_eq!(rate_kbps(Some((1_000_000, 10)), (2_000_000, 5)), None);
    }
}
