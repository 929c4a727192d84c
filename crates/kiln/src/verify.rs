//! Verification helpers: compare a result to a float64 reference; and how `kiln demo`
//! times a row ([`Timing`]): the first call in the process alone (compiles, module loads
//! and first allocations included), one warm-up call, then the median of the timed runs,
//! with what the times cover ([`Covers`]: device work alone, or a host-to-host call and the
//! memory it went through).

use crate::{Result, Runtime};
use std::time::Instant;

/// Relative L2 error `||got - want|| / ||want||` (absolute L2 when `want` is all zeros).
/// Any NaN in `got` gives `f64::INFINITY`, so unwritten (poisoned) outputs always fail.
pub fn rel_l2(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "rel_l2: length mismatch");
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        if !g.is_finite() && g as f64 != w {
            return f64::INFINITY;
        }
        let d = g as f64 - w;
        num += d * d;
        den += w * w;
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// The largest element-wise relative error `|got - want| / max(|want|, tiny)`.
pub fn max_rel(got: &[f32], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g.is_nan() {
                f64::INFINITY
            } else {
                (g as f64 - w).abs() / w.abs().max(1e-30)
            }
        })
        .fold(0.0, f64::max)
}

/// The largest element-wise relative error between two f32 results (e.g. GPU vs CPU).
pub fn max_rel_f32(got: &[f32], want: &[f32]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g.is_nan() || w.is_nan() {
                f64::INFINITY
            } else {
                (g as f64 - w as f64).abs() / (w.abs() as f64).max(1e-30)
            }
        })
        .fold(0.0, f64::max)
}

/// What a timing covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Covers {
    /// Device work alone on device-resident buffers, timed with CUDA events.
    #[serde(rename = "device")]
    Device,
    /// A host-slice call on a GPU, wall clock: pageable host memory in, the device work,
    /// pageable host memory out (what a caller of `rt.sigmoid(&vec)` waits for).
    #[serde(rename = "host->host pageable")]
    HostPageable,
    /// Host to device to host through pinned (page-locked) host buffers, wall clock.
    #[serde(rename = "host->host pinned")]
    HostPinned,
    /// Work on the host alone (the CPU backend, or host-side bookkeeping), wall clock.
    #[serde(rename = "host")]
    Host,
}

impl Covers {
    /// The name in tables and JSON: `device`, `host->host pageable`, `host->host pinned` or
    /// `host`.
    pub fn name(self) -> &'static str {
        match self {
            Covers::Device => "device",
            Covers::HostPageable => "host->host pageable",
            Covers::HostPinned => "host->host pinned",
            Covers::Host => "host",
        }
    }

    /// What a host-slice call on `rt` covers: pageable host->host on a GPU, host work on the
    /// CPU.
    pub fn host_call(rt: &Runtime) -> Covers {
        if rt.cuda().is_some() {
            Covers::HostPageable
        } else {
            Covers::Host
        }
    }
}

impl std::fmt::Display for Covers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Untimed calls between the first call and the timed runs.
pub const WARMUP: usize = 1;
/// Host-clock timings stop early once their runs have taken [`HOST_BUDGET_MS`] and at least
/// this many have run (a 1 GB pageable round trip takes a second a run).
pub const MIN_REPS: usize = 3;
/// See [`MIN_REPS`].
pub const HOST_BUDGET_MS: f64 = 2000.0;

/// How a demo row was timed.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Timing {
    /// The first call in this process, alone, wall clock (kernel compiles or cache loads,
    /// module loads and first allocations included).
    pub first_ms: f64,
    /// The median of the timed runs, after the first call and [`WARMUP`] more.
    pub median_ms: f64,
    /// Timed runs behind the median.
    pub reps: usize,
    /// What the times cover.
    pub covers: Covers,
}

impl Timing {
    /// A timing from the first call's milliseconds and the timed runs'.
    pub fn new(first_ms: f64, runs: Vec<f64>, covers: Covers) -> Timing {
        Timing {
            first_ms,
            reps: runs.len(),
            median_ms: median(runs),
            covers,
        }
    }
}

/// The median (the upper one of an even count); NaN for no values.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `f` once on the wall clock: its value and milliseconds. A call that queues device
/// work must wait for it inside `f` to be timed whole.
pub fn wall_ms<R>(f: impl FnOnce() -> Result<R>) -> Result<(R, f64)> {
    let t0 = Instant::now();
    let r = f()?;
    Ok((r, t0.elapsed().as_secs_f64() * 1e3))
}

/// Times a blocking call the demo way on the wall clock: the first call alone, [`WARMUP`]
/// untimed calls, then up to `reps` timed runs (at least one; fewer than `reps`, but at
/// least [`MIN_REPS`], once they have taken [`HOST_BUDGET_MS`]). Returns the first call's
/// value, for the caller to verify. Values are dropped outside the timed region.
pub fn time_host<R>(reps: usize, covers: Covers, f: impl FnMut() -> Result<R>) -> Result<(R, Timing)> {
    time_host_within(reps, covers, HOST_BUDGET_MS, f)
}

fn time_host_within<R>(
    reps: usize,
    covers: Covers,
    budget_ms: f64,
    mut f: impl FnMut() -> Result<R>,
) -> Result<(R, Timing)> {
    let (first, first_ms) = wall_ms(&mut f)?;
    for _ in 0..WARMUP {
        std::hint::black_box(f()?);
    }
    let mut runs = Vec::with_capacity(reps.max(1));
    let mut spent = 0.0;
    while runs.len() < reps.max(1) {
        let (r, ms) = wall_ms(&mut f)?;
        std::hint::black_box(r);
        runs.push(ms);
        spent += ms;
        if runs.len() >= MIN_REPS && spent > budget_ms {
            break;
        }
    }
    Ok((first, Timing::new(first_ms, runs, covers)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_host_times_the_first_call_alone_then_warms_up() {
        let mut calls = 0;
        let (first, t) = time_host(5, Covers::Host, || {
            calls += 1;
            if calls == 1 {
                std::thread::sleep(std::time::Duration::from_millis(30));
            }
            Ok(calls)
        })
        .unwrap();
        assert_eq!(first, 1, "the first call's value comes back");
        assert_eq!(calls, 1 + WARMUP + 5);
        assert_eq!(t.reps, 5);
        assert!(t.first_ms >= 30.0 && t.median_ms < 30.0, "{t:?}");
        assert_eq!(t.covers.name(), "host");
        // an error from any call is the result
        let mut n = 0;
        let e = time_host(3, Covers::Host, || {
            n += 1;
            if n == 3 {
                Err(crate::Error::invalid("demo", "boom"))
            } else {
                Ok(())
            }
        });
        assert!(e.is_err());
        // zero reps still times one run
        assert_eq!(time_host(0, Covers::Device, || Ok(())).unwrap().1.reps, 1);
    }

    #[test]
    fn long_runs_stop_at_the_budget_but_not_below_min_reps() {
        // runs of 15 ms against a 20 ms budget: two would pass it, MIN_REPS still run
        let (_, t) = time_host_within(50, Covers::HostPageable, 20.0, || {
            std::thread::sleep(std::time::Duration::from_millis(15));
            Ok(())
        })
        .unwrap();
        assert_eq!(t.reps, MIN_REPS);
        assert_eq!(t.covers.to_string(), "host->host pageable");
        assert!(median(Vec::new()).is_nan());
        assert_eq!(median(vec![3.0, 1.0, 2.0, 4.0]), 3.0);
    }

    #[test]
    fn nan_always_fails() {
        assert_eq!(rel_l2(&[1.0, f32::NAN], &[1.0, 2.0]), f64::INFINITY);
        assert_eq!(max_rel(&[f32::NAN], &[1.0]), f64::INFINITY);
        assert_eq!(max_rel_f32(&[1.0], &[f32::NAN]), f64::INFINITY);
        assert!(rel_l2(&[1.0, 2.0], &[1.0, 2.0]) == 0.0);
        assert!((rel_l2(&[1.0, 2.0], &[1.0, 2.5]) - 0.5 / (1.0f64 + 6.25).sqrt()).abs() < 1e-12);
    }
}
