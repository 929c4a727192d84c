//! What the API and the supervisor share in memory: admission counts (jobs in flight per
//! principal and in all, for the 429s), job watchers (for `?wait=`), and the wake-up of
//! idle workers when work arrives. The store stays the truth; these are rebuilt from it at
//! start.

use crate::error::ApiError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// What the watchers of one job share: woken when it ends, and a flag that says it has
/// ended (set before the wake-up), so a watcher registered before the job was stored never
/// needs to read the store to learn that it has not ended yet.
#[derive(Default)]
pub struct Watched {
    notify: Notify,
    ended: AtomicBool,
}

impl Watched {
    /// Fires when the job finishes (create and enable it before checking [`Watched::ended`]
    /// or the store).
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    /// Whether the job was reported ended since the watch began.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }
}

/// The shared state (see the [module docs](self)).
#[derive(Default)]
pub struct Hub {
    in_flight: Mutex<(HashMap<String, u64>, u64)>,
    watchers: Mutex<HashMap<String, (Arc<Watched>, usize)>>,
    /// Notified when jobs are queued (idle workers claim); see [`Hub::queued`].
    pub wake: Notify,
    completed: std::sync::atomic::AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Hub {
    /// Start from the store's in-flight counts.
    pub fn seed(&self, by_principal: &[(String, u64)]) {
        let mut g = lock(&self.in_flight);
        g.0 = by_principal.iter().cloned().collect();
        g.1 = by_principal.iter().map(|(_, n)| n).sum();
    }

    /// Admit one job for `principal` or say why not (`Retry-After` from the backlog).
    pub fn admit(&self, principal: &str, per_token: u64, total: u64) -> Result<(), ApiError> {
        self.admit_many(principal, 1, per_token, total)
    }

    /// Admit `n` jobs for `principal` at once, or none (a batch is all or nothing).
    pub fn admit_many(&self, principal: &str, n: u64, per_token: u64, total: u64) -> Result<(), ApiError> {
        let mut g = lock(&self.in_flight);
        let mine = g.0.get(principal).copied().unwrap_or(0);
        let retry_after_s = 1;
        if g.1.saturating_add(n) > total {
            return Err(ApiError::QueueFull {
                depth: g.1,
                retry_after_s,
            });
        }
        if mine.saturating_add(n) > per_token {
            return Err(ApiError::TooManyInFlight {
                in_flight: mine,
                retry_after_s,
            });
        }
        *g.0.entry(principal.to_string()).or_insert(0) += n;
        g.1 += n;
        Ok(())
    }

    /// Undo an admission (the insert failed or named an earlier job), or count a job done.
    pub fn release(&self, principal: &str) {
        self.release_many(principal, 1);
    }

    /// Undo `n` admissions of `principal`.
    pub fn release_many(&self, principal: &str, n: u64) {
        if n == 0 {
            return;
        }
        let mut g = lock(&self.in_flight);
        if let Some(mine) = g.0.get_mut(principal) {
            let k = n.min(*mine);
            *mine -= k;
            if *mine == 0 {
                g.0.remove(principal);
            }
            g.1 = g.1.saturating_sub(k);
        }
    }

    /// `jobs` jobs were queued: wake idle workers. One job any worker may claim
    /// (`gpu_only` false) wakes one idle worker (or the next to look, if none waits):
    /// waking every idle worker for each job costs each of them a look at the queue, and
    /// all but one find nothing. More jobs (a batch, a sharded book's shards) wake every
    /// idle worker, as they may keep several busy; so does GPU-only work, as a CPU worker
    /// woken for it could not claim it.
    pub fn queued(&self, jobs: usize, gpu_only: bool) {
        if gpu_only || jobs > 1 {
            self.wake.notify_waiters();
        } else {
            self.wake.notify_one();
        }
    }

    /// Jobs in flight in all.
    pub fn in_flight(&self) -> u64 {
        lock(&self.in_flight).1
    }

    /// A job reached a terminal state: release its admission and wake its watchers.
    pub fn finished(&self, id: &str, principal: &str) {
        self.release(principal);
        self.completed.fetch_add(1, Ordering::Relaxed);
        self.ended(id);
    }

    fn ended(&self, id: &str) {
        if let Some((w, _)) = lock(&self.watchers).get(id) {
            w.end();
        }
    }

    /// Jobs finished since start.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    /// Watch a job: the returned guard's `notify` fires when it finishes. A watch may begin
    /// before the job is stored (its id chosen, the insert not yet committed): the end of
    /// the job cannot then pass unseen.
    pub fn watch(self: &Arc<Self>, id: &str) -> Watch {
        let mut g = lock(&self.watchers);
        let e = g
            .entry(id.to_string())
            .or_insert_with(|| (Arc::new(Watched::default()), 0));
        e.1 += 1;
        Watch {
            hub: self.clone(),
            id: id.to_string(),
            notify: e.0.clone(),
        }
    }
}

impl crate::store::StoreEvents for Hub {
    fn new_work(&self) {
        self.wake.notify_waiters();
    }

    fn job_finished(&self, id: &str) {
        self.ended(id);
    }
}

/// A registered watcher; unregisters when dropped.
pub struct Watch {
    hub: Arc<Hub>,
    id: String,
    /// Fires when the job finishes (create `notified()` before checking the store or
    /// [`Watched::ended`]).
    pub notify: Arc<Watched>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut g = lock(&self.hub.watchers);
        if let Some(e) = g.get_mut(&self.id) {
            e.1 -= 1;
            if e.1 == 0 {
                g.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_counts_per_token_and_in_all() {
        let h = Hub::default();
        h.admit("a", 2, 3).unwrap();
        h.admit("a", 2, 3).unwrap();
        assert!(matches!(
            h.admit("a", 2, 3),
            Err(ApiError::TooManyInFlight { .. })
        ));
        h.admit("b", 2, 3).unwrap();
        assert!(matches!(h.admit("c", 2, 3), Err(ApiError::QueueFull { .. })));
        h.finished("x", "a");
        h.admit("c", 2, 3).unwrap();
        assert_eq!(h.in_flight(), 3);
    }

    /// How many of `waiters` idle workers `wake` wakes.
    fn woken(waiters: usize, wake: impl FnOnce(&Hub)) -> usize {
        use std::future::Future;
        let h = Hub::default();
        let mut idle: Vec<_> = (0..waiters).map(|_| Box::pin(h.wake.notified())).collect();
        for n in &mut idle {
            n.as_mut().enable();
        }
        wake(&h);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        idle.iter_mut()
            .map(|n| n.as_mut().poll(&mut cx).is_ready())
            .filter(|&ready| ready)
            .count()
    }

    #[test]
    fn one_job_wakes_one_idle_worker_and_more_wake_all() {
        assert_eq!(woken(3, |h| h.queued(1, false)), 1);
        assert_eq!(
            woken(3, |h| h.queued(2, false)),
            3,
            "a batch may keep several busy"
        );
        assert_eq!(
            woken(3, |h| h.queued(1, true)),
            3,
            "GPU-only: a CPU worker cannot claim it"
        );
    }

    #[test]
    fn an_end_reported_before_the_wait_is_seen_without_a_wake_up() {
        let h = Arc::new(Hub::default());
        let w = h.watch("j_1");
        assert!(!w.notify.ended());
        h.finished("j_1", "a");
        assert!(w.notify.ended(), "a watch begun before the end sees it");
        let other = h.watch("j_2");
        assert!(!other.notify.ended());
    }
}
