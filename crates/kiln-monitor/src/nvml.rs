//! The NVML sampler: one [`Device`] handle per allowed GPU, read field by field each tick.
//!
//! NVML is initialised once per process (it is `Send + Sync`); where `libnvidia-ml` is
//! missing the sampler has no devices and the sample says why. A field the device or driver
//! does not support is logged once at debug level and not asked again; a field that fails
//! for another reason is `None` for that tick only. Critical Xid events come from one NVML
//! event set drained without waiting at each tick.
//!
//! The slow reads (energy, the two clocks and the PCIe counters, and any read a tick finds
//! slow on this host: [`crate::read`]) run by default on a second thread, the
//! [`slow`](crate::slow) lane, and a tick reports their last value with its age;
//! [`SlowFields::Inline`] reads everything in the tick instead.

use crate::error::{Error, Result};
use crate::host::{process_name, HostSampler};
use crate::read::{tick_reads, Mover, ProcessRead, Read, Reading, Streak, LANE_FROM_START};
use crate::sample::{GpuProcess, GpuSample, NvmlStatus, Sample};
use crate::slow::{Lane, Round, SlowFields};
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, TemperatureSensor,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, EventSet, Nvml};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
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
    /// Where the slow reads run (default: on a second thread, energy every 5th round; see
    /// [`crate::read`] and [`crate::slow`]).
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

/// One device's handle as one thread reads it (the tick and the lane have one each): its
/// unsupported-field mask and the PCIe counters it read last.
struct Reader {
    device: Device<'static>,
    index: u32,
    unsupported: u32,
    /// The last PCIe byte counters read: (NVML timestamp in µs, tx bytes, rx bytes).
    pcie_prev: Option<(i64, u64, u64)>,
}

struct DeviceState {
    reader: Reader,
    uuid: String,
    model: String,
    xid_counts: BTreeMap<u64, u64>,
    xid_watched: bool,
    last_xid: Option<u64>,
    /// The reads that run on the lane (a [`Read`] bit each), shared with it.
    moved: Arc<AtomicU32>,
    mover: Mover,
    /// The tick's own reading, kept between ticks.
    reading: Reading,
    /// What each read the last tick made cost.
    costs: [Option<Duration>; Read::ALL.len()],
}

/// One GPU's read costs in the last tick ([`Sampler::read_costs`]).
#[derive(Clone, Debug)]
pub struct ReadCosts {
    /// NVML index.
    pub gpu: u32,
    /// Each read the tick made ([`Read::name`]) and what it cost.
    pub costs: Vec<(&'static str, Duration)>,
    /// The reads that ran on the second thread instead.
    pub lane: Vec<&'static str>,
}

/// Reads the host and every allowed GPU each tick.
pub struct Sampler {
    status: NvmlStatus,
    devices: Vec<DeviceState>,
    /// The Xid event set and what its polls found, shared with the lane.
    xid: Arc<Mutex<Xid>>,
    /// Whether the lane polls the event set (the tick found the poll slow on this host).
    xid_on_lane: Arc<AtomicBool>,
    xid_streak: Streak,
    host: HostSampler,
    processes: bool,
    /// The slow reads' thread; `None` where everything is read inline (or there is no GPU).
    lane: Option<Lane<Reading>>,
    /// What the last tick's Xid poll and host read cost.
    overhead: (Option<Duration>, Option<Duration>),
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
            xid: Arc::default(),
            xid_on_lane: Arc::default(),
            xid_streak: Streak::default(),
            host: HostSampler::new(),
            processes: opts.processes,
            lane: None,
            overhead: (None, None),
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
                reader: Reader {
                    device,
                    index,
                    unsupported: 0,
                    pcie_prev: None,
                },
                uuid,
                model,
                xid_counts: BTreeMap::new(),
                xid_watched: false,
                last_xid: None,
                moved: Arc::new(AtomicU32::new(LANE_FROM_START)),
                mover: Mover::default(),
                reading: Reading::default(),
                costs: [None; Read::ALL.len()],
            });
        }
        lock(&s.xid).set = register_xid_events(nvml, &mut s.devices);
        if let (SlowFields::Background { energy_every }, false) = (opts.slow, s.devices.is_empty()) {
            let xid = (s.xid.clone(), s.xid_on_lane.clone());
            s.lane = Some(start_lane(nvml, &s.devices, energy_every, opts.processes, xid));
        }
        s
    }

    /// The slow-read thread's last round time and finished rounds (`None` where everything
    /// is read inline).
    pub fn slow_lane_stats(&self) -> Option<(Option<Duration>, u64)> {
        self.lane.as_ref().map(Lane::stats)
    }

    /// Per sampled GPU (NVML index): what each read the last tick made cost, and the reads
    /// that run on the lane. For diagnosis (`sampling_cost` prints it).
    pub fn read_costs(&self) -> Vec<ReadCosts> {
        self.devices
            .iter()
            .map(|d| {
                let costs = Read::ALL
                    .iter()
                    .filter_map(|&r| d.costs[r as usize].map(|c| (r.name(), c)))
                    .collect();
                let moved = self.lane_mask(d);
                let lane = Read::ALL
                    .iter()
                    .filter(|r| moved & r.bit() != 0)
                    .map(|r| r.name())
                    .collect();
                ReadCosts {
                    gpu: d.reader.index,
                    costs,
                    lane,
                }
            })
            .collect()
    }

    /// What the last tick's Xid event poll (or, once the poll runs on the lane, taking what
    /// the lane found) and host read (`/proc`) cost.
    pub fn tick_overhead(&self) -> (Option<Duration>, Option<Duration>) {
        self.overhead
    }

    /// Whether the Xid events are polled on the second thread (the tick found the poll
    /// slow on this host, as it does any read: [`crate::read`]).
    pub fn xid_on_lane(&self) -> bool {
        self.lane.is_some() && self.xid_on_lane.load(Ordering::Relaxed)
    }

    /// The reads of `d` that run on the lane (none without one).
    fn lane_mask(&self, d: &DeviceState) -> u32 {
        if self.lane.is_some() {
            d.moved.load(Ordering::Relaxed)
        } else {
            0
        }
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
        self.count_xid_events();
        let own_pid = std::process::id();
        // The lane's last finished round; the kick for the next one comes after this tick's
        // own reads, so the lane's driver calls run between ticks, not beside them.
        let lane_values = self.lane.as_ref().map(Lane::latest);
        let has_lane = self.lane.is_some();
        let processes = self.processes;
        let gpus = self
            .devices
            .iter_mut()
            .enumerate()
            .map(|(i, d)| {
                let (reader, reading) = (&mut d.reader, &mut d.reading);
                let (lane_mask, now_moved) =
                    tick_reads(&d.moved, has_lane, processes, &mut d.mover, &mut d.costs, |r| {
                        reader.read(r, reading)
                    });
                for (r, took) in now_moved {
                    tracing::info!(
                        gpu = d.reader.index,
                        read = r.name(),
                        "GPU {}: the {} read took {:.2} ms in {} ticks running; it runs on the sampler's second thread from now on (its age is in the sample)",
                        d.reader.index,
                        r.name(),
                        took.as_secs_f64() * 1e3,
                        crate::read::MOVE_AFTER
                    );
                }
                let mut reading = d.reading.clone();
                let ages = match lane_values.as_ref().and_then(|v| v.get(i)) {
                    Some(lane) => reading.merge(lane, lane_mask, Instant::now()),
                    None => Vec::new(),
                };
                gpu_sample(d, &reading, &ages, own_pid)
            })
            .collect();
        if let Some(l) = &self.lane {
            l.kick();
        }
        let t = Instant::now();
        let host = self.host.sample();
        self.overhead.1 = Some(t.elapsed());
        Sample {
            timestamp_ms,
            nvml: self.status.clone(),
            host,
            gpus,
        }
    }

    /// Polls the Xid events (unless the lane does), times the poll like any read (moving it
    /// to the lane after 3 slow ticks running), and counts what was found since the last
    /// tick. Where the lane holds the set at this moment the tick does not wait: its finds
    /// are counted next tick.
    fn count_xid_events(&mut self) {
        let t = Instant::now();
        let on_lane = self.xid_on_lane();
        let found = match self.xid.try_lock() {
            Ok(mut g) => {
                let g = &mut *g;
                if !on_lane {
                    if let Some(set) = &g.set {
                        poll_xid(set, &mut g.pending);
                    }
                }
                std::mem::take(&mut g.pending)
            }
            Err(std::sync::TryLockError::Poisoned(p)) => std::mem::take(&mut p.into_inner().pending),
            Err(std::sync::TryLockError::WouldBlock) => Vec::new(),
        };
        let took = t.elapsed();
        self.overhead.0 = Some(took);
        if self.lane.is_some() && !on_lane && self.xid_streak.note(took) {
            self.xid_on_lane.store(true, Ordering::Relaxed);
            tracing::info!(
                "the Xid event poll took {:.2} ms in {} ticks running; it runs on the sampler's second thread from now on (events are counted one tick later)",
                took.as_secs_f64() * 1e3,
                crate::read::MOVE_AFTER
            );
        }
        for (index, code) in found {
            if let Some(d) = self.devices.iter_mut().find(|d| Some(d.reader.index) == index) {
                tracing::warn!(
                    gpu = d.reader.index,
                    xid = code,
                    "Xid {code} on GPU {}",
                    d.reader.index
                );
                *d.xid_counts.entry(code).or_insert(0) += 1;
                d.last_xid = Some(code);
            }
        }
    }
}

/// The Xid event set and the events its polls found that no tick has counted yet.
#[derive(Default)]
struct Xid {
    set: Option<EventSet<'static>>,
    /// (NVML index of the GPU, Xid code).
    pending: Vec<(Option<u32>, u64)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Drains the critical Xid events waiting in `set` into `pending`, without waiting.
fn poll_xid(set: &EventSet<'static>, pending: &mut Vec<(Option<u32>, u64)>) {
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
                pending.push((ev.device.index().ok(), code));
            }
            Err(NvmlError::Timeout) => break,
            Err(e) => {
                tracing::debug!("NVML event wait failed: {e}");
                break;
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
        match d
            .reader
            .device
            .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        {
            Ok(s) => {
                set = s;
                d.xid_watched = true;
            }
            Err(e) => {
                tracing::debug!("GPU {}: Xid events unavailable ({e})", d.reader.index);
                // The failed call released the set; start a new one for the next device.
                set = nvml.create_event_set().ok()?;
            }
        }
    }
    Some(set)
}

/// Read one field unless it is known to be unsupported; mark it so on a permanent error.
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

/// Starts the slow lane over the sampled devices (round 0 runs here: see [`Lane::start`]):
/// a handle of its own per device, reading each round what the device's `moved` mask says.
fn start_lane(
    nvml: &'static Nvml,
    devices: &[DeviceState],
    energy_every: u32,
    processes: bool,
    (xid, xid_on_lane): (Arc<Mutex<Xid>>, Arc<AtomicBool>),
) -> Lane<Reading> {
    let mut lane: Vec<(Option<Reader>, Arc<AtomicU32>)> = devices
        .iter()
        .map(|d| {
            let reader = nvml.device_by_index(d.reader.index).ok().map(|device| Reader {
                device,
                index: d.reader.index,
                unsupported: 0,
                pcie_prev: None,
            });
            (reader, d.moved.clone())
        })
        .collect();
    Lane::start(
        lane.len(),
        energy_every,
        move |round: Round, values: &mut [Reading]| {
            if xid_on_lane.load(Ordering::Relaxed) {
                let mut g = lock(&xid);
                let g = &mut *g;
                if let Some(set) = &g.set {
                    poll_xid(set, &mut g.pending);
                }
            }
            for ((reader, moved), v) in lane.iter_mut().zip(values.iter_mut()) {
                let Some(reader) = reader else { continue };
                let mask = moved.load(Ordering::Relaxed);
                for r in Read::ALL {
                    let skip = (r == Read::Energy && !round.energy) || (r == Read::Processes && !processes);
                    if mask & r.bit() != 0 && !skip {
                        reader.read(r, v);
                    }
                }
            }
        },
    )
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

impl Reader {
    /// Read one field unless it is known to be unsupported (see [`read_field`]).
    fn field<T>(
        &mut self,
        field: Field,
        f: impl FnOnce(&Device<'static>) -> std::result::Result<T, NvmlError>,
    ) -> Option<T> {
        read_field(&self.device, self.index, &mut self.unsupported, field, f)
    }

    /// Run `r` into `out` and note when.
    fn read(&mut self, r: Read, out: &mut Reading) {
        match r {
            Read::Utilization => {
                out.util = self
                    .field(Field::Utilization, |x| x.utilization_rates())
                    .map(|u| (u.gpu, u.memory));
            }
            Read::Memory => {
                out.memory = self
                    .field(Field::Memory, |x| x.memory_info())
                    .map(|m| (m.used, m.free, m.total));
            }
            Read::Temperature => {
                out.temperature_c = self.field(Field::Temperature, |x| x.temperature(TemperatureSensor::Gpu));
            }
            Read::Power => out.power_mw = self.field(Field::Power, |x| x.power_usage()),
            Read::PowerLimit => {
                out.power_limit_mw = self.field(Field::PowerLimit, |x| x.enforced_power_limit())
            }
            Read::Throttle => {
                out.throttle = self
                    .field(Field::Throttle, |x| x.current_throttle_reasons())
                    .map(|t| t.bits());
            }
            Read::Ecc => {
                out.ecc = (
                    self.field(Field::EccCorrected, |x| {
                        x.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
                    }),
                    self.field(Field::EccUncorrected, |x| {
                        x.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
                    }),
                );
            }
            Read::Pcie => out.pcie_kbps = self.pcie_rates(),
            Read::Processes => {
                out.processes = self
                    .field(Field::Processes, |x| x.running_compute_processes())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|p| ProcessRead {
                        pid: p.pid,
                        used_bytes: match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => Some(b),
                            UsedGpuMemory::Unavailable => None,
                        },
                    })
                    .collect();
            }
            Read::Energy => out.energy_mj = self.field(Field::Energy, |x| x.total_energy_consumption()),
            Read::Clocks => {
                out.clocks_mhz = (
                    self.field(Field::SmClock, |x| x.clock_info(Clock::SM)),
                    self.field(Field::MemClock, |x| x.clock_info(Clock::Memory)),
                );
            }
        }
        out.at[r as usize] = Some(Instant::now());
    }

    /// PCIe throughput from the byte counters (one `nvmlDeviceGetFieldValues` call): the
    /// rate since this reader's last reading (none on the first). Where the counters are
    /// missing, NVML's 20 ms sampling calls. Measured 2026-12-03 on the H200:
    /// `nvmlDeviceGetPcieThroughput` samples the link for 20 ms a call (two a tick were ~40
    /// of a 48 ms sample); the counters' call cost 0.16 ms back to back (0.72 ms 20 ms apart
    /// on another host, 2026-12-05). Energy and the ECC totals stay on their own calls:
    /// through field values, energy cost the same 3.9 ms and a five-field batch 5.5 ms.
    fn pcie_rates(&mut self) -> (Option<u32>, Option<u32>) {
        use nvml_wrapper::enums::device::SampleValue;
        use nvml_wrapper::structs::device::FieldId;
        use nvml_wrapper::sys_exports::field_id::{
            NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES,
        };
        let ids = [
            FieldId(NVML_FI_DEV_PCIE_COUNT_TX_BYTES),
            FieldId(NVML_FI_DEV_PCIE_COUNT_RX_BYTES),
        ];
        let values = self
            .field(Field::Batched, |x| {
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
        match (at(0), at(1)) {
            (Some((t, tx)), Some((_, rx))) => {
                let prev = self.pcie_prev.replace((t, tx, rx));
                (
                    rate_kbps(prev.map(|p| (p.0, p.1)), (t, tx)),
                    rate_kbps(prev.map(|p| (p.0, p.2)), (t, rx)),
                )
            }
            _ => (
                self.field(Field::PcieTx, |x| x.pcie_throughput(PcieUtilCounter::Send)),
                self.field(Field::PcieRx, |x| x.pcie_throughput(PcieUtilCounter::Receive)),
            ),
        }
    }
}

/// The sample of one GPU from its merged reading; `ages` are the lane's reads with their
/// age in ms.
fn gpu_sample(d: &DeviceState, r: &Reading, ages: &[(Read, Option<u64>)], own_pid: u32) -> GpuSample {
    let age = |read: Read| ages.iter().find(|(x, _)| *x == read).and_then(|(_, a)| *a);
    let throttle = r
        .throttle
        .map(nvml_wrapper::bitmasks::device::ThrottleReasons::from_bits_retain);
    GpuSample {
        index: d.reader.index,
        uuid: d.uuid.clone(),
        model: d.model.clone(),
        gpu_util_percent: r.util.map(|u| u.0),
        mem_util_percent: r.util.map(|u| u.1),
        memory_used_bytes: r.memory.map(|m| m.0),
        memory_free_bytes: r.memory.map(|m| m.1),
        memory_total_bytes: r.memory.map(|m| m.2),
        temperature_c: r.temperature_c,
        power_w: r.power_mw.map(|mw| mw as f64 / 1e3),
        power_limit_w: r.power_limit_mw.map(|mw| mw as f64 / 1e3),
        energy_j: r.energy_mj.map(|mj| mj as f64 / 1e3),
        energy_age_ms: age(Read::Energy),
        sm_clock_mhz: r.clocks_mhz.0,
        mem_clock_mhz: r.clocks_mhz.1,
        clocks_age_ms: age(Read::Clocks),
        throttle_mask: r.throttle,
        throttle_reasons: throttle
            .map(|t| t.iter_names().map(|(n, _)| n.to_ascii_lowercase()).collect())
            .unwrap_or_default(),
        ecc_corrected: r.ecc.0,
        ecc_uncorrected: r.ecc.1,
        pcie_tx_kbps: r.pcie_kbps.0,
        pcie_rx_kbps: r.pcie_kbps.1,
        lane_ages_ms: ages
            .iter()
            .filter_map(|(x, a)| a.map(|a| (x.name().to_string(), a)))
            .collect(),
        xid_counts: d.xid_counts.clone(),
        xid_watched: d.xid_watched,
        last_xid: d.last_xid,
        processes: r
            .processes
            .iter()
            .map(|p| {
                let name = process_name(p.pid);
                GpuProcess {
                    pid: p.pid,
                    used_memory_bytes: p.used_bytes,
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
