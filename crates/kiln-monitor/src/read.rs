//! What the sampler reads of one GPU, read by read, and where each read runs: in the tick or
//! on the slow lane (the sampler's second thread, [`crate::slow`]).
//!
//! The driver's price for a read differs from host to host, and within a host between a call
//! made a moment after another and one made after a pause. Measured on two lent H200s on
//! 2026-12-05 with the same code (docs/performance.md, "Monitoring"): one took 0.93 ms a tick,
//! the other 5.8 ms, and back to back their calls cost 0.5 ms together. So where a read runs
//! is decided twice:
//! - by measurement, once for every host: energy and the clocks (3.1–3.9 ms and ~1 ms a read
//!   on the first driver measured) and the PCIe byte counters (0.72 of a 0.93 ms tick, timed
//!   20 ms apart) start on the lane;
//! - by the tick itself on the host it runs on ([`Mover`]): every read is timed, and one that
//!   costs more than [`MOVE_ABOVE`] in [`MOVE_AFTER`] ticks running moves to the lane for good,
//!   with an info line saying so. From then the tick reports the lane's last value and its
//!   age ([`crate::GpuSample::lane_ages_ms`]). The Xid event poll, one for all devices, moves
//!   by the same rule ([`Streak`]; `nvml.rs`): should a host charge the first NVML call after
//!   a pause whichever call it is, every read ends on the lane and the tick makes none.
//!
//! Everything here is plain data and CPU-testable; the NVML calls are in `nvml.rs`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// One read of a device: one NVML call, or two that belong together. A bit each in a
/// device's `moved` mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// GPU and memory utilization.
    Utilization = 0,
    /// Memory used, free and total.
    Memory,
    /// Die temperature.
    Temperature,
    /// Power draw.
    Power,
    /// Enforced power limit.
    PowerLimit,
    /// Clock-throttle reasons.
    Throttle,
    /// ECC totals, corrected and uncorrected (two calls).
    Ecc,
    /// PCIe byte counters (one field-values call), turned into rates.
    Pcie,
    /// The processes holding the GPU (only where attribution is on).
    Processes,
    /// The energy counter (every `energy_every`-th lane round).
    Energy,
    /// SM and memory clocks (two calls).
    Clocks,
}

impl Read {
    /// Every read, in the order a tick makes them.
    pub const ALL: [Read; 11] = [
        Read::Utilization,
        Read::Memory,
        Read::Temperature,
        Read::Power,
        Read::PowerLimit,
        Read::Throttle,
        Read::Ecc,
        Read::Pcie,
        Read::Processes,
        Read::Energy,
        Read::Clocks,
    ];

    /// The read's name in logs, `lane_ages_ms` and docs.
    pub fn name(self) -> &'static str {
        match self {
            Read::Utilization => "utilization",
            Read::Memory => "memory",
            Read::Temperature => "temperature",
            Read::Power => "power",
            Read::PowerLimit => "power_limit",
            Read::Throttle => "throttle",
            Read::Ecc => "ecc",
            Read::Pcie => "pcie",
            Read::Processes => "processes",
            Read::Energy => "energy",
            Read::Clocks => "clocks",
        }
    }

    /// This read's bit in a mask.
    pub fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// The reads that start on the lane where there is one (see the module docs).
pub const LANE_FROM_START: u32 =
    (1 << Read::Energy as u32) | (1 << Read::Clocks as u32) | (1 << Read::Pcie as u32);

/// A tick's read that costs more than this ...
pub const MOVE_ABOVE: Duration = Duration::from_micros(500);
/// ... in this many ticks running moves to the lane.
pub const MOVE_AFTER: u8 = 3;

/// One process holding a GPU, as NVML lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessRead {
    /// Process id.
    pub pid: u32,
    /// Device memory it holds, where reported.
    pub used_bytes: Option<u64>,
}

/// Every value the reads of one device give, with when each read last ran. A read that did
/// not run leaves its values as they were.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// GPU and memory utilization, percent.
    pub util: Option<(u32, u32)>,
    /// Memory used, free and total, bytes.
    pub memory: Option<(u64, u64, u64)>,
    /// °C.
    pub temperature_c: Option<u32>,
    /// Milliwatts.
    pub power_mw: Option<u32>,
    /// Milliwatts.
    pub power_limit_mw: Option<u32>,
    /// The raw throttle-reason bits.
    pub throttle: Option<u64>,
    /// Corrected and uncorrected volatile totals.
    pub ecc: (Option<u64>, Option<u64>),
    /// Transmit and receive KB/s.
    pub pcie_kbps: (Option<u32>, Option<u32>),
    /// Processes (empty where attribution is off or the read failed).
    pub processes: Vec<ProcessRead>,
    /// Millijoules since the driver loaded.
    pub energy_mj: Option<u64>,
    /// SM and memory clocks, MHz.
    pub clocks_mhz: (Option<u32>, Option<u32>),
    /// When each read (indexed by `Read as usize`) last ran.
    pub at: [Option<Instant>; Read::ALL.len()],
}

impl Reading {
    /// Take `r`'s values (and its time) from `other`, which read it.
    pub fn take(&mut self, r: Read, other: &Reading) {
        match r {
            Read::Utilization => self.util = other.util,
            Read::Memory => self.memory = other.memory,
            Read::Temperature => self.temperature_c = other.temperature_c,
            Read::Power => self.power_mw = other.power_mw,
            Read::PowerLimit => self.power_limit_mw = other.power_limit_mw,
            Read::Throttle => self.throttle = other.throttle,
            Read::Ecc => self.ecc = other.ecc,
            Read::Pcie => self.pcie_kbps = other.pcie_kbps,
            Read::Processes => self.processes.clone_from(&other.processes),
            Read::Energy => self.energy_mj = other.energy_mj,
            Read::Clocks => self.clocks_mhz = other.clocks_mhz,
        }
        self.at[r as usize] = other.at[r as usize];
    }

    /// The tick's reading completed by the lane's: every read in `lane_mask` comes from
    /// `lane` once the lane has run it. A read the tick has just moved, which the lane has
    /// not run yet, keeps the tick's last value for that tick (never a gap). Returns the
    /// reads in `lane_mask` with their values' age in ms at `now` (none where never read).
    pub fn merge(&mut self, lane: &Reading, lane_mask: u32, now: Instant) -> Vec<(Read, Option<u64>)> {
        Read::ALL
            .iter()
            .filter(|r| lane_mask & r.bit() != 0)
            .map(|&r| {
                if lane.at[r as usize].is_some() {
                    self.take(r, lane);
                }
                let age = self.at[r as usize].map(|a| now.saturating_duration_since(a).as_millis() as u64);
                (r, age)
            })
            .collect()
    }
}

/// How many ticks running one piece of a tick's work has cost more than [`MOVE_ABOVE`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Streak(u8);

impl Streak {
    /// Note that the work took `took` in a tick. Returns `true` the tick it should move: the
    /// [`MOVE_AFTER`]-th tick running above [`MOVE_ABOVE`]. A tick below the bound starts the
    /// count again, so a one-off stall (a scheduler hiccup) moves nothing.
    pub fn note(&mut self, took: Duration) -> bool {
        if took > MOVE_ABOVE {
            self.0 = self.0.saturating_add(1);
            self.0 == MOVE_AFTER
        } else {
            self.0 = 0;
            false
        }
    }
}

/// Decides, from the tick's own timings on this host, which reads move to the lane.
#[derive(Clone, Debug, Default)]
pub struct Mover {
    over: [Streak; Read::ALL.len()],
}

impl Mover {
    /// [`Streak::note`] for read `r`.
    pub fn note(&mut self, r: Read, took: Duration) -> bool {
        self.over[r as usize].note(took)
    }
}

/// One device's reads in one tick: every read not on the lane (`moved`; nothing is on a lane
/// where there is none), each timed into `costs`; with a lane, a read the [`Mover`] picks
/// joins `moved` (the lane runs it from its next round). Returns the lane mask this tick
/// used and the reads moved now, with what they cost this tick.
pub fn tick_reads(
    moved: &AtomicU32,
    has_lane: bool,
    processes: bool,
    mover: &mut Mover,
    costs: &mut [Option<Duration>; Read::ALL.len()],
    mut read: impl FnMut(Read),
) -> (u32, Vec<(Read, Duration)>) {
    let lane_mask = if has_lane {
        moved.load(Ordering::Relaxed)
    } else {
        0
    };
    *costs = [None; Read::ALL.len()];
    let mut now_moved = Vec::new();
    for r in Read::ALL {
        if lane_mask & r.bit() != 0 || (r == Read::Processes && !processes) {
            continue;
        }
        let t = Instant::now();
        read(r);
        let took = t.elapsed();
        costs[r as usize] = Some(took);
        if has_lane && mover.note(r, took) {
            moved.fetch_or(r.bit(), Ordering::Relaxed);
            now_moved.push((r, took));
        }
    }
    (lane_mask, now_moved)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const SLOW: Duration = Duration::from_millis(3);
    const FAST: Duration = Duration::from_micros(20);

    #[test]
    fn a_read_moves_on_its_third_slow_tick_running_and_only_then() {
        let mut m = Mover::default();
        assert!(!m.note(Read::Ecc, SLOW));
        assert!(!m.note(Read::Ecc, SLOW));
        assert!(!m.note(Read::Ecc, FAST), "a fast tick starts the count again");
        assert!(!m.note(Read::Ecc, SLOW));
        assert!(!m.note(Read::Ecc, SLOW));
        // another read's timings do not count toward this one's
        assert!(!m.note(Read::Memory, SLOW));
        assert!(m.note(Read::Ecc, SLOW), "third slow tick running");
        assert!(!m.note(Read::Ecc, SLOW), "it moves once, not every tick after");
        // exactly at the bound is not above it
        let mut m = Mover::default();
        assert!((0..10).all(|_| !m.note(Read::Power, MOVE_ABOVE)));
    }

    #[test]
    fn merging_takes_the_lanes_reads_with_their_age_and_keeps_the_ticks() {
        let t0 = Instant::now();
        let now = t0 + Duration::from_millis(700);
        let mut lane = Reading {
            energy_mj: Some(5_000),
            ecc: (Some(1), Some(0)),
            pcie_kbps: (Some(10), Some(20)),
            memory: Some((1, 2, 3)),
            ..Reading::default()
        };
        lane.at[Read::Energy as usize] = Some(t0);
        lane.at[Read::Ecc as usize] = Some(t0 + Duration::from_millis(500));
        // the lane has not run the PCIe or temperature reads yet (just moved)
        let mut tick = Reading {
            memory: Some((7, 8, 15)),
            ecc: (Some(9), Some(9)),
            temperature_c: Some(55),
            ..Reading::default()
        };
        tick.at[Read::Memory as usize] = Some(now);
        tick.at[Read::Ecc as usize] = Some(now);
        tick.at[Read::Temperature as usize] = Some(t0 + Duration::from_millis(600));
        let mask = Read::Temperature.bit() | Read::Energy.bit() | Read::Ecc.bit() | Read::Pcie.bit();
        let ages = tick.merge(&lane, mask, now);
        assert_eq!(
            ages,
            vec![
                (Read::Temperature, Some(100)),
                (Read::Ecc, Some(200)),
                (Read::Pcie, None),
                (Read::Energy, Some(700))
            ]
        );
        assert_eq!(tick.energy_mj, Some(5_000));
        assert_eq!(
            tick.ecc,
            (Some(1), Some(0)),
            "a moved read's tick value is not used"
        );
        assert_eq!(tick.pcie_kbps, (None, None), "never read: no value, no age");
        assert_eq!(
            tick.temperature_c,
            Some(55),
            "not run by the lane yet: the tick's last value"
        );
        assert_eq!(tick.memory, Some((7, 8, 15)), "the tick's own read stays");
    }

    /// A scripted device whose ECC read stalls 1 ms: the tick moves it on the third tick,
    /// stops making it, and the tick's other reads (and the lane's) stay where they were.
    #[test]
    fn a_slow_read_leaves_the_tick_and_the_others_stay() {
        let moved = AtomicU32::new(LANE_FROM_START);
        let mut mover = Mover::default();
        let mut costs = [None; Read::ALL.len()];
        let mut made: Vec<Vec<Read>> = Vec::new();
        for tick in 0..6 {
            let mut this = Vec::new();
            let (mask, now) = tick_reads(&moved, true, false, &mut mover, &mut costs, |r| {
                if r == Read::Ecc {
                    std::thread::sleep(Duration::from_millis(1));
                }
                this.push(r);
            });
            if tick == 2 {
                assert_eq!(now.len(), 1);
                assert_eq!(now[0].0, Read::Ecc);
                assert!(now[0].1 > MOVE_ABOVE);
            } else {
                assert!(now.is_empty(), "tick {tick}: {now:?}");
            }
            assert_eq!(mask & LANE_FROM_START, LANE_FROM_START);
            made.push(this);
        }
        for (tick, reads) in made.iter().enumerate() {
            assert!(
                !reads.contains(&Read::Energy)
                    && !reads.contains(&Read::Clocks)
                    && !reads.contains(&Read::Pcie)
            );
            assert!(!reads.contains(&Read::Processes), "attribution off");
            assert_eq!(reads.contains(&Read::Ecc), tick <= 2, "tick {tick}: {reads:?}");
            assert!(reads.contains(&Read::Memory) && reads.contains(&Read::Utilization));
        }
        assert_eq!(moved.load(Ordering::Relaxed), LANE_FROM_START | Read::Ecc.bit());
        assert!(
            costs[Read::Ecc as usize].is_none(),
            "costs are the last tick's reads only"
        );
        assert!(costs[Read::Memory as usize].is_some());
    }

    /// Without a lane (`slow_fields = "inline"`) every read stays in the tick, however slow.
    #[test]
    fn without_a_lane_nothing_moves() {
        let moved = AtomicU32::new(LANE_FROM_START);
        let mut mover = Mover::default();
        let mut costs = [None; Read::ALL.len()];
        for _ in 0..5 {
            let mut n = 0;
            let (mask, now) = tick_reads(&moved, false, true, &mut mover, &mut costs, |r| {
                if r == Read::Power {
                    std::thread::sleep(Duration::from_millis(1));
                }
                n += 1;
            });
            assert_eq!((mask, now.len(), n), (0, 0, Read::ALL.len()));
        }
        assert_eq!(moved.load(Ordering::Relaxed), LANE_FROM_START);
    }

    #[test]
    fn names_and_bits_are_distinct() {
        let mut names: Vec<_> = Read::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Read::ALL.len());
        let mask = Read::ALL.iter().fold(0u32, |m, r| {
            assert_eq!(m & r.bit(), 0);
            m | r.bit()
        });
        assert_eq!(mask.count_ones() as usize, Read::ALL.len());
        for (i, r) in Read::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "ALL is in discriminant order");
        }
    }
}
