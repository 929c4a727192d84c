//! Storing jobs' outcomes: a store that cannot take them now (the database restarting, its
//! connections cut, a full disk) is asked again, with a pause growing from 100 ms to 1.6 s
//! ([`Backoff`]), until it answers; an outcome whose lease was lost meanwhile is discarded
//! and logged. A batch's outcomes go to the store together ([`Shared::finish_all`]: one
//! transaction), and only once it has committed are waiting clients told.

use super::Shared;
use crate::store::{now_ms, ClaimedJob, JobEnd, JobState, NextClaim, Outcome, StoreError};
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
        let state = state_of(&outcome);
        let mut pause = Backoff::default();
        loop {
            match self.store.finish(&job.id, owner, outcome.clone()).await {
                Ok(true) => {
                    self.done(job, state).await;
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

    /// Store the outcomes of a batch's jobs in one transaction ([`crate::store::JobStore::finish_many`]),
    /// asking again while the store cannot take them now (as [`Shared::finish`]; a failed
    /// try stores none of them, so nothing is stored twice, and an end whose commit went
    /// through unanswered is found stored by the next try). Waiting clients are told of
    /// each stored job once the transaction has committed. A failure that retrying will not
    /// cure falls back to one [`Shared::finish`] per job, so that one job's end the store
    /// refuses does not keep its batch's other ends from being stored. The result blobs of
    /// an end that was not stored are deleted.
    pub(super) async fn finish_all(&self, owner: &str, ends: Vec<(&ClaimedJob, Outcome)>) {
        if ends.len() < 2 {
            for (job, outcome) in ends {
                self.finish_cleaned(job, owner, outcome).await;
            }
            return;
        }
        let list: Vec<JobEnd> = ends
            .iter()
            .map(|(job, outcome)| JobEnd {
                id: job.id.clone(),
                outcome: outcome.clone(),
            })
            .collect();
        let mut pause = Backoff::default();
        let stored = loop {
            match self.store.finish_many(owner, list.clone()).await {
                Ok(stored) if stored.len() == ends.len() => break Some(stored),
                Ok(stored) => {
                    // a store bug: no end is known to be stored; each alone says
                    tracing::error!(
                        "storing {} jobs' ends: the store answered for {}; storing each alone",
                        ends.len(),
                        stored.len()
                    );
                    break None;
                }
                Err(e) if e.is_transient() && !self.stopping.load(Ordering::SeqCst) => {
                    pause
                        .wait(&format!("storing {} jobs' ends", ends.len()), &e)
                        .await;
                }
                Err(e) => {
                    tracing::warn!(
                        "storing {} jobs' ends together: {e}; storing each alone",
                        ends.len()
                    );
                    break None;
                }
            }
        };
        let Some(stored) = stored else {
            for (job, outcome) in ends {
                self.finish_cleaned(job, owner, outcome).await;
            }
            return;
        };
        for ((job, outcome), ok) in ends.into_iter().zip(stored) {
            if ok {
                self.done(job, state_of(&outcome)).await;
            } else {
                self.discarded(job).await;
                remove_blobs(outcome);
            }
        }
    }

    /// [`Shared::finish_all`] with the slot's next claim in the same transaction
    /// ([`crate::store::JobStore::finish_and_claim`]): one try, and the jobs it claimed.
    /// A try that fails stores and claims nothing, so the ends then go the way of
    /// [`Shared::finish_all`] (asked again while the store cannot take them) and `None` says
    /// that the slot must claim its usual way.
    pub(super) async fn finish_and_claim(
        &self,
        owner: &str,
        ends: Vec<(&ClaimedJob, Outcome)>,
        next: NextClaim,
    ) -> Option<Vec<ClaimedJob>> {
        let list: Vec<JobEnd> = ends
            .iter()
            .map(|(job, outcome)| JobEnd {
                id: job.id.clone(),
                outcome: outcome.clone(),
            })
            .collect();
        let (stored, claimed) = match self.store.finish_and_claim(owner, list, next).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::debug!("storing {} jobs' ends with the next claim: {e}", ends.len());
                self.finish_all(owner, ends).await;
                return None;
            }
        };
        if stored.len() != ends.len() {
            // a store bug: no end is known to be stored; each alone says (the jobs claimed
            // are this slot's all the same)
            tracing::error!(
                "storing {} jobs' ends: the store answered for {}; storing each alone",
                ends.len(),
                stored.len()
            );
            for (job, outcome) in ends {
                self.finish_cleaned(job, owner, outcome).await;
            }
            return Some(claimed);
        }
        for ((job, outcome), ok) in ends.into_iter().zip(stored) {
            if ok {
                self.done(job, state_of(&outcome)).await;
            } else {
                self.discarded(job).await;
                remove_blobs(outcome);
            }
        }
        Some(claimed)
    }

    /// [`Shared::finish`], deleting the result blobs of an end that was not stored.
    async fn finish_cleaned(&self, job: &ClaimedJob, owner: &str, outcome: Outcome) {
        let paths: Vec<std::path::PathBuf> = match &outcome {
            Outcome::Succeeded { blobs, .. } => blobs.iter().map(|b| b.path.clone()).collect(),
            Outcome::Failed { .. } => Vec::new(),
        };
        if !self.finish(job, owner, outcome).await {
            for p in paths {
                let _ = std::fs::remove_file(p);
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
                self.done(job, j.state.name()).await;
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
                Ok(Some(s)) => self.done(job, s.name()).await,
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

    /// Count a job's end and tell its watchers. A shard's end releases no admission of its
    /// own (its parent holds the token's one); when it closed its parent (merged or
    /// failed it, crate::shard), the parent's end is counted and its watchers told here,
    /// once: the store names the closing shard.
    async fn done(&self, job: &ClaimedJob, state: &str) {
        let latency = (now_ms() - job.created_ms).max(0) as f64 / 1e3;
        self.metrics.finished(&job.kind, state, latency);
        let Some(parent) = &job.parent else {
            self.hub.finished(&job.id, &job.principal);
            return;
        };
        crate::store::StoreEvents::job_finished(&*self.hub, &job.id);
        match self.store.get(parent).await {
            Ok(Some(p)) if p.state.is_terminal() && p.closed_by.as_deref() == Some(job.id.as_str()) => {
                self.metrics.finished(&p.kind, p.state.name(), latency);
                self.hub.finished(&p.id, &p.principal);
            }
            Ok(_) => {}
            // the parent's watchers still see its end on their next look at the store
            Err(e) => tracing::warn!("job {parent}: reading the parent of shard {}: {e}", job.id),
        }
    }
}

/// The state an outcome stores.
fn state_of(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Succeeded { .. } => "succeeded",
        Outcome::Failed { .. } => "failed",
    }
}

/// Delete the result blob files of an outcome that was not stored.
fn remove_blobs(outcome: Outcome) {
    if let Outcome::Succeeded { blobs, .. } = outcome {
        for b in blobs {
            let _ = std::fs::remove_file(b.path);
        }
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
