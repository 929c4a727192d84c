//! Device faults of worker slots, as strict readiness sees them.
//!
//! A slot is faulted from the moment its worker ends because of a device fault (a job
//! answered with a sticky CUDA error, or the process exiting with the sticky exit code)
//! until its replacement worker reports ready: a poisoned context says the device may not
//! be usable, and a replacement that cannot start says it is not. While any slot is
//! faulted `/readyz` answers 503 naming it, so a load balancer stops sending work to this
//! node at once rather than when the last worker is gone. Each slot keeps its last fault
//! (with when it cleared) and a count for `/v1/workers`.

use super::WorkerStatus;
use serde::Serialize;

/// A device fault of a worker slot.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DeviceFault {
    /// What happened, e.g. `sticky CUDA fault: launch: CUDA error 700
    /// (CUDA_ERROR_ILLEGAL_ADDRESS) on cuda:0 ...`, or `exit code 8: sticky CUDA error`.
    pub reason: String,
    /// When the slot's worker ended from it (ms since the epoch).
    pub at_ms: i64,
    /// When the slot's replacement worker reported ready (ms since the epoch); absent while
    /// the slot is still faulted.
    pub cleared_ms: Option<i64>,
}

/// The fault's reason for a job answered with a sticky error (`message` is the worker's).
pub(super) fn sticky_reason(message: &str) -> String {
    format!("sticky CUDA fault: {message}")
}

impl WorkerStatus {
    /// Marks the slot faulted at `now` (ms); `false`, changing nothing, if it already is
    /// (one worker's end is one fault, however it is noticed).
    pub(super) fn mark_fault(&mut self, reason: String, now: i64) -> bool {
        if self.fault.is_some() {
            return false;
        }
        let f = DeviceFault {
            reason,
            at_ms: now,
            cleared_ms: None,
        };
        self.fault = Some(f.clone());
        self.last_fault = Some(f);
        self.faults += 1;
        true
    }

    /// A fault, if any, is over at `now`.
    fn clear_fault(&mut self, now: i64) {
        if self.fault.take().is_some() {
            if let Some(f) = &mut self.last_fault {
                f.cleared_ms = Some(now);
            }
        }
    }

    /// The slot's replacement worker did not start (`why`): the slot is down, and a fault
    /// stays.
    pub(super) fn start_failed(&mut self, why: String, now: i64) {
        self.state = "down".into();
        self.last_exit = Some(why);
        self.exited_ms = Some(now);
    }

    /// The slot's worker (`pid`) reported ready at `now`: idle, and a fault, if any, is over.
    pub(super) fn became_ready(&mut self, pid: Option<u32>, now: i64) {
        self.state = "idle".into();
        self.pid = pid;
        self.ready_ms = Some(now);
        self.clear_fault(now);
    }

    /// Why this slot keeps the node from being ready, if it does.
    pub fn not_ready_reason(&self) -> Option<String> {
        let f = self.fault.as_ref()?;
        Some(format!(
            "worker {} ({}): {} (at {}); not ready until its worker is back (state {})",
            self.name,
            self.device,
            f.reason,
            utc(f.at_ms),
            self.state
        ))
    }
}

/// Milliseconds since the epoch as an RFC 3339 UTC time, e.g. `2026-12-06T12:40:01.123Z`.
pub fn utc(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // civil-from-days (H. Hinnant's algorithm), proleptic Gregorian calendar
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (h, min, s, milli) = (rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot() -> WorkerStatus {
        WorkerStatus {
            name: "cuda0-0".into(),
            device: "cuda:0".into(),
            state: "busy".into(),
            pid: Some(7),
            restarts: 0,
            last_exit: None,
            ready_ms: Some(1),
            exited_ms: None,
            batches: 1,
            fault: None,
            last_fault: None,
            faults: 0,
        }
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc(1_796_560_801_123), "2026-12-06T12:40:01.123Z");
    }

    /// A slot whose restarts keep failing stays faulted (and the node not ready) through
    /// every failed start; the first worker to report ready clears it, keeping the history.
    #[test]
    fn a_fault_lasts_through_failed_restarts_until_a_worker_is_ready() {
        let mut w = slot();
        assert_eq!(w.not_ready_reason(), None);
        let reason = sticky_reason("launch: CUDA error 700 (CUDA_ERROR_ILLEGAL_ADDRESS) on cuda:0");
        assert!(w.mark_fault(reason.clone(), 1_796_560_801_123));
        // the exit code of the same worker is the same fault
        assert!(!w.mark_fault("exit code 8: sticky CUDA error".into(), 1_796_560_801_500));
        for attempt in 0..5 {
            // what the slot loop records for a replacement that does not start
            w.start_failed(
                format!("exited while starting (exit code 3), try {attempt}"),
                1_796_560_802_000 + attempt,
            );
            let why = w.not_ready_reason().expect("still faulted");
            assert!(
                why.starts_with("worker cuda0-0 (cuda:0): sticky CUDA fault: launch: CUDA error 700"),
                "{why}"
            );
            assert!(
                why.contains("(at 2026-12-06T12:40:01.123Z); not ready until its worker is back"),
                "{why}"
            );
            assert!(why.contains("state down"), "{why}");
        }
        w.became_ready(Some(9), 1_796_560_805_000);
        assert_eq!(w.not_ready_reason(), None);
        assert_eq!(w.fault, None);
        assert_eq!(w.faults, 1);
        let last = w.last_fault.clone().unwrap();
        assert_eq!((last.reason, last.at_ms), (reason, 1_796_560_801_123));
        assert_eq!(last.cleared_ms, Some(1_796_560_805_000));
        // a later fault is a new one
        assert!(w.mark_fault("exit code 8: sticky CUDA error".into(), 1_796_560_900_000));
        assert_eq!(w.faults, 2);
        assert_eq!(w.last_fault.unwrap().cleared_ms, None);
    }
}
