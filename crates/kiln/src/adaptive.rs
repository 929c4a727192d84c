//! OOM-adaptive batching: run work in batches, halving the batch whenever the device (or the
//! CPU budget) runs out of memory, resuming at the batch that failed.

use kiln_core::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};

/// What [`run_adaptive`] settled on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AdaptiveReport {
    /// The batch size asked for.
    pub initial_batch: usize,
    /// The batch size the run ended with (after any halvings).
    pub settled_batch: usize,
    /// How many times the batch was halved.
    pub halvings: usize,
    /// Batches that completed.
    pub batches: usize,
    /// Batches that failed with out-of-memory and were retried smaller.
    pub oom_retries: usize,
}

/// Run `f` over `items` in batches of at most `initial_batch`. When a batch fails with an
/// out-of-memory error, `on_oom` runs (free caches), the batch size halves and the same
/// items are retried; any other error is returned at once. Results are appended only for
/// batches that succeed, so no item is lost or processed twice — `f` must not keep partial
/// effects of a failed call. Fails with the last OOM error if even a batch of one item does
/// not fit.
pub fn run_adaptive<T, R>(
    items: &[T],
    initial_batch: usize,
    mut on_oom: impl FnMut(),
    mut f: impl FnMut(&[T]) -> Result<Vec<R>>,
) -> Result<(Vec<R>, AdaptiveReport)> {
    if initial_batch == 0 {
        return Err(Error::invalid(
            "run_adaptive",
            "the initial batch size must be at least 1",
        ));
    }
    let mut report = AdaptiveReport {
        initial_batch,
        settled_batch: initial_batch,
        halvings: 0,
        batches: 0,
        oom_retries: 0,
    };
    let mut out = Vec::with_capacity(items.len());
    let mut batch = initial_batch;
    let mut pos = 0;
    while pos < items.len() {
        let end = (pos + batch).min(items.len());
        match f(&items[pos..end]) {
            Ok(r) => {
                if r.len() != end - pos {
                    return Err(Error::invalid(
                        "run_adaptive",
                        format!(
                            "the batch function returned {} results for {} items",
                            r.len(),
                            end - pos
                        ),
                    ));
                }
                out.extend(r);
                pos = end;
                report.batches += 1;
            }
            Err(e) if e.is_out_of_memory() => {
                report.oom_retries += 1;
                on_oom();
                if end - pos == 1 {
                    return Err(e);
                }
                batch = (end - pos) / 2;
                report.halvings += 1;
                tracing::info!("out of memory at item {pos}: batch halved to {batch}");
            }
            Err(e) => return Err(e),
        }
    }
    report.settled_batch = batch;
    Ok((out, report))
}

/// A byte budget for host memory, so that the CPU backend runs out of memory the way a GPU
/// does (and the adaptive path is exercised without a GPU).
#[derive(Debug)]
pub struct CpuBudget {
    limit: u64,
    used: AtomicU64,
}

/// Bytes reserved from a [`CpuBudget`]; returned on drop.
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a CpuBudget,
    bytes: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

impl CpuBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        CpuBudget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    /// Bytes currently reserved.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Reserve `bytes` for `op`, or fail with `OutOfMemory` (device `cpu`).
    pub fn reserve(&self, op: &str, bytes: u64) -> Result<Reservation<'_>> {
        let mut cur = self.used.load(Ordering::Acquire);
        loop {
            if cur + bytes > self.limit {
                return Err(Error::OutOfMemory {
                    op: op.into(),
                    device: "cpu".into(),
                    requested: bytes,
                    free: self.limit - cur,
                    total: self.limit,
                    reserved: cur,
                    limit: Some(self.limit),
                });
            }
            match self
                .used
                .compare_exchange_weak(cur, cur + bytes, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(Reservation { budget: self, bytes }),
                Err(now) => cur = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oom() -> Error {
        Error::OutOfMemory {
            op: "t".into(),
            device: "cpu".into(),
            requested: 1,
            free: 0,
            total: 1,
            reserved: 0,
            limit: None,
        }
    }

    #[test]
    fn halves_on_oom_and_resumes_at_the_failed_item() {
        let items: Vec<u32> = (0..1000).collect();
        let mut calls = Vec::new();
        let mut freed = 0;
        let (out, rep) = run_adaptive(
            &items,
            400,
            || freed += 1,
            |b| {
                calls.push((b[0], b.len()));
                if b.len() > 130 {
                    Err(oom())
                } else {
                    Ok(b.iter().map(|x| x * 2).collect())
                }
            },
        )
        .unwrap();
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        assert_eq!(rep.settled_batch, 100);
        assert_eq!(rep.halvings, 2);
        assert_eq!(freed, 2);
        // every item processed exactly once by a successful call
        let mut seen = vec![0; 1000];
        for &(start, len) in calls.iter().filter(|c| c.1 <= 130) {
            for s in &mut seen[start as usize..start as usize + len] {
                *s += 1;
            }
        }
        assert!(seen.iter().all(|&s| s == 1));
    }

    #[test]
    fn other_errors_stop_and_one_item_oom_fails() {
        let items = [1, 2, 3];
        let e = run_adaptive(
            &items,
            2,
            || {},
            |_| -> Result<Vec<i32>> { Err(Error::invalid("x", "bad")) },
        )
        .unwrap_err();
        assert!(!e.is_out_of_memory());
        let e = run_adaptive(&items, 2, || {}, |_| -> Result<Vec<i32>> { Err(oom()) }).unwrap_err();
        assert!(e.is_out_of_memory());
        assert!(run_adaptive(&items, 0, || {}, |b| Ok(b.to_vec())).is_err());
    }

    #[test]
    fn budget_reserves_and_releases() {
        let b = CpuBudget::new(100);
        let r = b.reserve("a", 60).unwrap();
        assert!(b.reserve("b", 60).unwrap_err().is_out_of_memory());
        drop(r);
        assert_eq!(b.used(), 0);
        assert!(b.reserve("b", 100).is_ok());
    }
}
