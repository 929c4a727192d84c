//! The slow lane: the NVML reads that cost milliseconds of driver time, run on a second
//! thread so a tick never waits for them. Which reads run here is decided in
//! [`crate::read`] (energy, the clocks and the PCIe counters from the start, and any read the
//! tick finds slow on this host).
//!
//! Measured 2026-12-03 on the H200 (docs/performance.md, "Monitoring"): the energy counter
//! costs 3.1–3.9 ms a read whichever NVML call asks, and each clock ~1 ms, while every other
//! field of a sample together costs ~0.4 ms. Read in the tick, they made a sample 6–10 ms
//! (goal ≤ 2 ms) and the sampler ~1% of a core (goal ≤ 1%), and the driver spends that time
//! on the CPU. So:
//! - the tick takes the values of the lane's last finished read and, after its own reads,
//!   *kicks* the lane (so the lane's driver calls fall between ticks): a tick
//!   costs the fast fields only, and the slow values it reports are at most one period (plus
//!   a read) old, with their age in the sample;
//! - energy, a cumulative counter (Prometheus takes its `rate()`), is read every
//!   `energy_every`-th round only; the clocks every round;
//! - a kick that finds a read still running is dropped (a queue of one), so a driver that
//!   stalls cannot pile up reads; the lane's thread ends when the sampler is dropped.
//!
//! The lane is generic over its reader so the scheduling above is tested on the CPU machine
//! with a scripted reader (`tests` below); the NVML reader is in `nvml.rs`.

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where the slow fields (energy, SM and memory clocks) are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlowFields {
    /// In every tick, every field fresh; the tick pays their driver time.
    Inline,
    /// On the sampler's second thread: the tick reports the last finished read, and energy
    /// is read every `energy_every`-th round (at least 1).
    Background {
        /// Read the energy counter every this many rounds.
        energy_every: u32,
    },
}

impl Default for SlowFields {
    fn default() -> Self {
        SlowFields::Background { energy_every: 5 }
    }
}

/// What the reader is asked for in one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    /// The round's number, from 0 (the first, synchronous read).
    pub n: u64,
    /// Whether to read energy this round.
    pub energy: bool,
}

/// The lane's shared state: every device's values and the last round's read time.
#[derive(Debug, Default)]
struct Shared<V> {
    values: Vec<V>,
    last_read: Option<Duration>,
    rounds: u64,
}

/// Reads the slow fields of every device on its own thread (see the module docs); `V` is
/// one device's values.
pub struct Lane<V> {
    shared: Arc<Mutex<Shared<V>>>,
    kick: Option<SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl<V> std::fmt::Debug for Lane<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane")
            .field("running", &self.thread.is_some())
            .finish()
    }
}

impl<V: Clone + Default + Send + 'static> Lane<V> {
    /// Runs round 0 on the calling thread (so the first sample is complete and fresh), then
    /// starts the lane's thread. `read` fills the values of every device for one round and
    /// leaves untouched what the round does not read.
    pub fn start(
        devices: usize,
        energy_every: u32,
        mut read: impl FnMut(Round, &mut [V]) + Send + 'static,
    ) -> Lane<V> {
        let energy_every = u64::from(energy_every.max(1));
        let mut values = vec![V::default(); devices];
        let t = Instant::now();
        read(Round { n: 0, energy: true }, &mut values);
        let shared = Arc::new(Mutex::new(Shared {
            values: values.clone(),
            last_read: Some(t.elapsed()),
            rounds: 1,
        }));
        let (kick, rx) = sync_channel::<()>(1);
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kiln-nvml-slow".into())
            .spawn(move || {
                let mut n = 0u64;
                // Ends when the sampler drops its sender.
                while rx.recv().is_ok() {
                    n += 1;
                    let t = Instant::now();
                    read(
                        Round {
                            n,
                            energy: n % energy_every == 0,
                        },
                        &mut values,
                    );
                    let mut g = s.lock().unwrap_or_else(PoisonError::into_inner);
                    g.values.clone_from(&values);
                    g.last_read = Some(t.elapsed());
                    g.rounds = n + 1;
                }
            });
        match thread {
            Ok(h) => Lane {
                shared,
                kick: Some(kick),
                thread: Some(h),
            },
            Err(e) => {
                // No thread: the values of round 0 stay, and the sampler says so once.
                tracing::warn!("cannot start the NVML slow-field thread ({e}); energy and clocks stay at their first reading");
                Lane {
                    shared,
                    kick: None,
                    thread: None,
                }
            }
        }
    }

    /// Asks for a new round unless one is already queued; never waits.
    pub fn kick(&self) {
        if let Some(k) = &self.kick {
            match k.try_send(()) {
                Ok(()) | Err(TrySendError::Full(())) => {}
                Err(TrySendError::Disconnected(())) => {
                    tracing::debug!("NVML slow-field thread ended; energy and clocks no longer move");
                }
            }
        }
    }

    /// The values of the last finished round.
    pub fn latest(&self) -> Vec<V> {
        self.lock().values.clone()
    }

    /// How long the last finished round's reads took, and how many rounds have finished.
    pub fn stats(&self) -> (Option<Duration>, u64) {
        let g = self.lock();
        (g.last_read, g.rounds)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared<V>> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<V> Drop for Lane<V> {
    fn drop(&mut self) {
        self.kick = None;
        if let Some(h) = self.thread.take() {
            // A read in flight finishes first (bounded by the driver's call time).
            let _ = h.join();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// One device's values in these tests.
    #[derive(Clone, Debug, Default, PartialEq)]
    struct SlowValues {
        energy_j: Option<f64>,
        sm_clock_mhz: Option<u32>,
    }

    /// A reader that takes `cost` a round (a slow driver), counts rounds and energy reads,
    /// and reports the round number as the clock and the energy read count as joules.
    fn scripted(
        cost: Duration,
        rounds: Arc<AtomicU64>,
        energy_reads: Arc<AtomicU64>,
    ) -> impl FnMut(Round, &mut [SlowValues]) + Send + 'static {
        move |r, vals| {
            std::thread::sleep(cost);
            rounds.fetch_add(1, Ordering::SeqCst);
            let e = if r.energy {
                Some(energy_reads.fetch_add(1, Ordering::SeqCst) + 1)
            } else {
                None
            };
            for v in vals.iter_mut() {
                v.sm_clock_mhz = Some(r.n as u32);
                if let Some(e) = e {
                    v.energy_j = Some(e as f64);
                }
            }
        }
    }

    #[test]
    fn round_zero_is_synchronous_and_complete() {
        let (r, e) = (Arc::default(), Arc::default());
        let lane = Lane::start(2, 5, scripted(Duration::ZERO, r, e));
        let v = lane.latest();
        assert_eq!(v.len(), 2);
        assert!(v
            .iter()
            .all(|x| x.energy_j == Some(1.0) && x.sm_clock_mhz == Some(0)));
        assert_eq!(lane.stats().1, 1);
    }

    #[test]
    fn a_kick_never_waits_for_a_slow_read() {
        let (r, e) = (Arc::new(AtomicU64::new(0)), Arc::default());
        let lane = Lane::start(1, 1, scripted(Duration::from_millis(40), r.clone(), e));
        let t = Instant::now();
        for _ in 0..50 {
            lane.kick();
            let _ = lane.latest();
        }
        // 50 kicks against a 40 ms read: the ticks return at once, and the queue of one
        // drops the kicks that find a read running (at most 2 rounds started meanwhile).
        assert!(t.elapsed() < Duration::from_millis(30), "{:?}", t.elapsed());
        drop(lane); // joins the thread: the round in flight and at most one queued
        let n = r.load(Ordering::SeqCst);
        assert!((2..=3).contains(&n), "{n} rounds");
    }

    #[test]
    fn energy_is_read_every_nth_round_and_clocks_every_round() {
        let (r, e) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let lane = Lane::start(1, 4, scripted(Duration::ZERO, r.clone(), e.clone()));
        for k in 1..=12u64 {
            lane.kick();
            // wait for round k to finish (a tick's period, in a real sampler)
            let t = Instant::now();
            while lane.stats().1 < k + 1 {
                assert!(t.elapsed() < Duration::from_secs(5), "round {k} never finished");
                std::thread::sleep(Duration::from_millis(1));
            }
            let v = &lane.latest()[0];
            assert_eq!(v.sm_clock_mhz, Some(k as u32));
            // rounds 0, 4, 8, 12 read energy
            assert_eq!(v.energy_j, Some((k / 4 + 1) as f64), "round {k}");
        }
        assert_eq!(e.load(Ordering::SeqCst), 4);
        assert!(lane.stats().0.is_some());
    }

    #[test]
    fn dropping_the_lane_ends_its_thread() {
        let (r, e) = (Arc::new(AtomicU64::new(0)), Arc::default());
        let lane = Lane::start(1, 1, scripted(Duration::from_millis(5), r.clone(), e));
        lane.kick();
        let t = Instant::now();
        drop(lane);
        assert!(t.elapsed() < Duration::from_secs(2));
        let after = r.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            r.load(Ordering::SeqCst),
            after,
            "the thread kept reading after drop"
        );
    }
}
