//! A slot's claims: the next batch from the queue ([`Shared::next_batch`]), what the store
//! is asked to claim in the transaction of a batch's ends ([`Shared::next_claim`],
//! `JobStore::finish_and_claim`), and the claimed jobs that may still run
//! ([`Shared::screen`]).

use super::{lock, Shared, Slot};
use crate::store::{now_ms, ClaimLimit, ClaimedJob, NextClaim, NextTake, Outcome};
use std::time::Duration;

impl Shared {
    /// Claim the next batch for this slot (dynamic batching, the store's fair order between
    /// tokens), or `None` if there is no work. Claimed jobs already past their deadline or
    /// their queue timeout fail here (`deadline_exceeded`, `expired`) without reaching the
    /// worker; `Some` of an empty batch means every claimed job was such.
    pub(super) async fn next_batch(
        &self,
        slot: &Slot,
    ) -> Result<Option<Vec<ClaimedJob>>, crate::store::StoreError> {
        let cap = self.cfg.scheduling.max_workers_per_token;
        let b = &self.cfg.batching;
        let jobs = if !self.merges() {
            // Nothing to wait for or to merge: the head is the claim, with up to
            // `claim_batch` more of its batch key that are queued now (run one by one).
            let limit = ClaimLimit {
                max: b.claim_batch.max(1),
                slots: lock(&self.workers).len(),
            };
            self.store
                .claim_head(&self.owner(slot), slot.gpu, cap, limit, self.cfg.store.lease())
                .await?
        } else {
            let max = b.max_batch;
            let Some(head) = self.store.head(slot.gpu, cap).await? else {
                return Ok(None);
            };
            if head.same_key < max as u64 {
                let age = now_ms() - head.created_ms;
                let delay = b.max_queue_delay_ms as i64;
                if age < delay {
                    tokio::time::sleep(Duration::from_millis((delay - age) as u64)).await;
                }
            }
            self.store
                .claim(
                    &self.owner(slot),
                    slot.gpu,
                    Some(&head.batch_key),
                    max,
                    self.cfg.store.lease(),
                )
                .await?
        };
        if jobs.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.screen(slot, jobs).await))
    }

    /// The claimed jobs that may run: those already past their deadline or their queue
    /// timeout fail here (`deadline_exceeded`, `expired`) without reaching the worker.
    pub(super) async fn screen(&self, slot: &Slot, jobs: Vec<ClaimedJob>) -> Vec<ClaimedJob> {
        let now = now_ms();
        let mut live = Vec::with_capacity(jobs.len());
        let (mut late, mut outs) = (Vec::new(), Vec::new());
        for job in jobs {
            let out = if job.deadline_ms.is_some_and(|d| d <= now) {
                Outcome::Failed {
                    code: "deadline_exceeded".into(),
                    message: "the job's deadline passed while it was queued; it never ran".into(),
                }
            } else if job.queue_until_ms.is_some_and(|d| d <= now) {
                self.metrics.expired(&job.kind);
                Outcome::Failed {
                    code: crate::store::EXPIRED.0.into(),
                    message: crate::store::EXPIRED.1.into(),
                }
            } else {
                live.push(job);
                continue;
            };
            late.push(job);
            outs.push(out);
        }
        self.finish_all(&self.owner(slot), late.iter().zip(outs).collect())
            .await;
        live
    }

    /// Whether a slot's claim is a dynamic batch (one worker call merging its jobs' work);
    /// else it is the fair head with up to `claim_batch` more jobs, run one by one.
    pub(super) fn merges(&self) -> bool {
        self.cfg.batching.enabled && self.cfg.batching.max_batch > 1
    }

    /// The claim a slot makes with its batch's ends: what [`Shared::next_batch`] would
    /// claim next, except that a dynamic batch not yet full nor old enough claims nothing
    /// (the slot then waits for it in `next_batch`).
    pub(super) fn next_claim(&self, slot: &Slot) -> NextClaim {
        let b = &self.cfg.batching;
        let take = if self.merges() {
            NextTake::Batch {
                max: b.max_batch,
                delay_ms: b.max_queue_delay_ms,
            }
        } else {
            NextTake::Head(ClaimLimit {
                max: b.claim_batch.max(1),
                slots: lock(&self.workers).len(),
            })
        };
        NextClaim {
            gpu: slot.gpu,
            max_workers_per_token: self.cfg.scheduling.max_workers_per_token,
            lease: self.cfg.store.lease(),
            take,
        }
    }
}
