//! Storing a job's outcome: a store that cannot take it now (the database restarting, its
//! connections cut, a full disk) is asked again, with a pause growing from 100 ms to 1.6 s
//! ([`Backoff`]), until it answers; an outcome whose lease was lost meanwhile is discarded
//! and logged.

use super::Shared;
use crate::store::{now_ms, ClaimedJob, JobState, Outcome, StoreError};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The pause between tries of a store write that failed for a passing reason: 100 ms
/// doubling to 1.6 s; the first failure is logged as a warning, the rest at debug.
#[derive(Default)]
struct Backoff {
    tries: u32,
}

impl Backoff {
    /// The pause before try `tries + 2`.
    fn pause(tries: u32) -> Duration {
        Duration::from_millis(100u64 << tries.min(4))
    }

    async fn wait(&mut self, what: &str, e: &StoreError) {
        if self.tries == 0 {
            tracing::warn!("{what}: {e}; trying again until the store takes it");
        } else {
            tracing::debug!("{what}: {e}; try {}", self.tries + 1);
        }
        let pause = Backoff::pause(self.tries);
        self.tries += 1;
        tokio::time::sleep(pause).await;
    }
}

impl Shared {
    /// Store a job's outcome. A store that cannot take it now (the database restarting, a
    /// full disk) is asked again until it answers: dropping the outcome would leave the job
    /// `running` under this node, whose heartbeat renews the lease, so it would never end.
    /// Once the store answers, a lease lost meanwhile discards the outcome (logged): the
    /// job was re-queued and its next attempt's outcome is the one stored.
    pub(super) async fn finish(&self, job: &ClaimedJob, owner: &str, outcome: Outcome) -> bool {
        let state = match &outcome {
            Outcome::Succeeded { .. } => "succeeded",
            Outcome::Failed { .. } => "failed",
        };
        let mut pause = Backoff::default();
        loop {
            match self.store.finish(&job.id, owner, outcome.clone()).await {
                Ok(true) => {
                    self.done(job, state);
                    return true;
                }
                Ok(false) => {
                    self.discarded(job).await;
                    return false;
                }
                Err(e) if e.is_transient() && !self.stopping.load(Ordering::SeqCst) => {
                    pause.wait(&format!("storing job {}", job.id), &e).await;
                }
                Err(e) => {
                    tracing::error!("storing job {}: {e}", job.id);
                    return false;
                }
            }
        }
    }

    /// Log an outcome the store refused because the job is no longer this worker's.
    async fn discarded(&self, job: &ClaimedJob) {
        let now = match self.store.get(&job.id).await {
            Ok(Some(j)) if j.state == JobState::Cancelled => {
                tracing::info!(
                    "job {}: attempt {}'s outcome not stored: it was cancelled",
                    job.id,
                    job.attempt
                );
                return;
            }
            Ok(Some(j)) if j.state.is_terminal() && j.attempts == job.attempt => {
                // a try whose commit went through but whose answer was lost (a connection
                // cut at commit): the next try found the outcome stored already
                tracing::info!(
                    "job {}: attempt {}'s outcome was stored by an earlier try",
                    job.id,
                    job.attempt
                );
                self.done(job, j.state.name());
                return;
            }
            Ok(Some(j)) => format!("{} after {} attempts", j.state.name(), j.attempts),
            Ok(None) => "gone".into(),
            Err(e) => format!("unknown: {e}"),
        };
        tracing::warn!(
            "job {}: attempt {}'s late outcome discarded: its lease was lost (the job was re-queued \
             for another worker; now {now})",
            job.id,
            job.attempt
        );
    }

    pub(super) async fn retry(&self, job: &ClaimedJob, owner: &str, code: &str, message: &str) {
        let mut pause = Backoff::default();
        loop {
            match self.store.retry(&job.id, owner, code, message).await {
                Ok(Some(JobState::Queued)) => {
                    tracing::info!(
                        "job {} re-queued after attempt {}: {message}",
                        job.id,
                        job.attempt
                    );
                    self.hub.wake.notify_waiters();
                }
                Ok(Some(s)) => self.done(job, s.name()),
                Ok(None) => self.discarded(job).await,
                // as in finish: a job left `running` under a live node would never end
                Err(e) if e.is_transient() && !self.stopping.load(Ordering::SeqCst) => {
                    pause.wait(&format!("re-queueing job {}", job.id), &e).await;
                    continue;
                }
                Err(e) => tracing::error!("re-queueing job {}: {e}", job.id),
            }
            return;
        }
    }

    fn done(&self, job: &ClaimedJob, state: &str) {
        let latency = (now_ms() - job.created_ms).max(0) as f64 / 1e3;
        self.metrics.finished(&job.kind, state, latency);
        self.hub.finished(&job.id, &job.principal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_from_100_ms_to_a_ceiling() {
        let ms: Vec<u128> = (0..8).map(|t| Backoff::pause(t).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1600, 1600, 1600, 1600]);
        assert_eq!(Backoff::pause(u32::MAX).as_millis(), 1600, "no overflow");
    }
}
