//! What a cold start costs and how to pay it ahead of time.
//!
//! A process compiles, on a cache miss, only the kernels it launches (each kernel is its
//! own NVRTC program: [`crate::kernels::Program`]). [`census`] says, without a GPU, how
//! many kernels an arch's cache already holds and about how many seconds of NVRTC the
//! missing ones cost ([`Kernel::compile_ms_estimate`]); [`compile_all`] fills the cache
//! for an arch on every CPU at once (`kiln cache warm --arch`), as
//! [`CudaBackend::warm`](crate::CudaBackend::warm) does for a device.

use crate::cache::{CacheEvent, KernelCache, Unit};
use crate::kernels::{Kernel, Program};
use crate::nvrtc;
use kiln_core::Result;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The command that fills the cache for every allowed GPU.
pub const WARM_COMMAND: &str = "kiln cache warm";

/// How much of an arch's cold start the cache already covers.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Census {
    /// The target, e.g. `sm_90`.
    pub arch: String,
    /// Kernels kiln can launch.
    pub kernels: usize,
    /// Of those, how many have a valid cubin for this arch and NVRTC version.
    pub cached: usize,
    /// The symbols of the others.
    pub missing: Vec<&'static str>,
    /// Estimated NVRTC seconds to compile the missing kernels one after another (the most a
    /// first run of commands that launch all of them pays); from
    /// [`Kernel::compile_ms_estimate`], an estimate, not a measurement of this machine.
    pub missing_compile_s_estimate: f64,
    /// Estimated seconds `kiln cache warm` takes for them on this machine's CPUs: the
    /// longer of the slowest kernel and the sum over the threads (an estimate).
    pub warm_s_estimate: f64,
    /// How to pay it ahead of time.
    pub warm_command: &'static str,
}

/// The cache unit of `program` (its options built into `options`).
pub fn unit<'a>(program: Program, options: &'a [String]) -> Unit<'a> {
    Unit {
        name: program.name(),
        source: program.module().source,
        options,
    }
}

/// Threads to compile on: one per CPU.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get())
}

/// How many of every kernel's cubins for `arch` and NVRTC `version` are in `cache`, and an
/// estimate of what compiling the rest costs.
pub fn census(cache: &KernelCache, arch: &str, version: (i32, i32)) -> Census {
    let missing: Vec<Kernel> = Kernel::ALL
        .iter()
        .copied()
        .filter(|&k| {
            let options = nvrtc::options(k.into());
            !cache.contains(&unit(k.into(), &options), arch, version)
        })
        .collect();
    let ms: Vec<f64> = missing
        .iter()
        .map(|k| f64::from(k.compile_ms_estimate()))
        .collect();
    let sum = ms.iter().sum::<f64>();
    let longest = ms.iter().copied().fold(0.0, f64::max);
    Census {
        arch: arch.into(),
        kernels: Kernel::ALL.len(),
        cached: Kernel::ALL.len() - missing.len(),
        missing: missing.iter().map(|k| k.symbol()).collect(),
        missing_compile_s_estimate: sum / 1e3,
        warm_s_estimate: longest.max(sum / threads() as f64) / 1e3,
        warm_command: WARM_COMMAND,
    }
}

/// Look up (compiling on a miss) every kernel of `kernels` for `arch` with NVRTC `version`,
/// without a GPU, on one thread per CPU; returns each lookup's record in completion order.
pub fn compile_all(
    cache: &KernelCache,
    arch: &str,
    version: (i32, i32),
    kernels: &[Kernel],
) -> Result<Vec<CacheEvent>> {
    let events = Mutex::new(Vec::with_capacity(kernels.len()));
    run_parallel(kernels, |&k| {
        let options = nvrtc::options(k.into());
        let (_, ev) = cache.get_or_compile(&unit(k.into(), &options), arch, version, || {
            nvrtc::compile_cubin(k, arch)
        })?;
        lock(&events).push(ev);
        Ok(())
    })?;
    Ok(events.into_inner().unwrap_or_else(|p| p.into_inner()))
}

/// Run `f` on every kernel of `kernels` (once each), longest estimated compile first, on up
/// to [`threads`] threads; the first error is returned after every thread has stopped
/// (kernels not started by then are skipped).
pub(crate) fn run_parallel(kernels: &[Kernel], f: impl Fn(&Kernel) -> Result<()> + Sync) -> Result<()> {
    let mut todo = kernels.to_vec();
    todo.sort_by_key(|k| (std::cmp::Reverse(k.compile_ms_estimate()), k.symbol()));
    todo.dedup();
    if todo.len() <= 1 {
        return todo.first().map_or(Ok(()), &f);
    }
    let next = AtomicUsize::new(0);
    let first_err = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads().min(todo.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(k) = todo.get(i) else { break };
                if let Err(e) = f(k) {
                    lock(&first_err).get_or_insert(e);
                    next.store(todo.len(), Ordering::Relaxed);
                }
            });
        }
    });
    match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Pushes and first-error records are single operations: a poisoned lock is still whole.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_cache_misses_every_kernel_and_estimates_its_cost() {
        let dir = tempfile::tempdir().unwrap();
        let c = census(&KernelCache::new(dir.path()), "sm_90", (13, 0));
        assert_eq!(c.kernels, Kernel::ALL.len());
        assert_eq!(c.cached, 0);
        assert_eq!(c.missing.len(), c.kernels);
        let sum: u32 = Kernel::ALL.iter().map(|k| k.compile_ms_estimate()).sum();
        assert!((c.missing_compile_s_estimate - f64::from(sum) / 1e3).abs() < 1e-9);
        assert!(c.warm_s_estimate > 0.0 && c.warm_s_estimate <= c.missing_compile_s_estimate);
        assert_eq!(c.warm_command, "kiln cache warm");
    }

    #[test]
    fn a_cached_kernel_is_counted_for_its_arch_and_nvrtc_only() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::new(dir.path());
        let k = Kernel::MAP_F32;
        let options = nvrtc::options(k.into());
        cache
            .get_or_compile(&unit(k.into(), &options), "sm_90", (13, 0), || Ok(vec![7u8; 100]))
            .unwrap();
        let c = census(&cache, "sm_90", (13, 0));
        assert_eq!(c.cached, 1);
        assert!(!c.missing.contains(&"map_f32"));
        let full = census(&KernelCache::new(dir.path().join("none")), "sm_90", (13, 0));
        let est = f64::from(k.compile_ms_estimate()) / 1e3;
        assert!((full.missing_compile_s_estimate - c.missing_compile_s_estimate - est).abs() < 1e-9);
        assert_eq!(census(&cache, "sm_80", (13, 0)).cached, 0);
        assert_eq!(census(&cache, "sm_90", (13, 1)).cached, 0);
    }

    #[test]
    fn run_parallel_runs_each_kernel_once_and_returns_the_first_error() {
        let seen = Mutex::new(Vec::new());
        let mut twice = Kernel::ALL.to_vec();
        twice.extend_from_slice(Kernel::ALL);
        run_parallel(&twice, |&k| {
            lock(&seen).push(k);
            Ok(())
        })
        .unwrap();
        let mut seen = seen.into_inner().unwrap();
        assert_eq!(seen.len(), Kernel::ALL.len());
        seen.sort_by_key(|k| k.symbol());
        seen.dedup();
        assert_eq!(seen.len(), Kernel::ALL.len());
        let e = run_parallel(Kernel::ALL, |&k| {
            if k == Kernel::GEMM_NAIVE_F32 {
                Err(kiln_core::Error::invalid("test", "boom"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
    }
}
