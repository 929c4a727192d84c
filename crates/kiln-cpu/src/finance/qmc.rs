//! Quasi-Monte Carlo paths on the CPU: the increments of each sample come from
//! [`QmcPlan::increments`] (randomised Sobol points, inverse normal, Brownian bridge;
//! kiln-core's contract, which the GPU kernel follows bit for bit), then the same f32
//! log-price recurrence and [`PathKind`] payoffs as the Philox paths, with the same grouping
//! of steps by four (the Asian partial sums depend on it).

#![allow(clippy::needless_range_loop)] // the lane loops index several arrays at once

use kiln_core::finance::{PathParams, QmcPlan};
use kiln_core::philox::NORMALS_PER_CALL;

use super::paths::{PathKind, SampleOut, LANES};

/// Per-lane scratch for [`run_group_qmc`]: the normals, bridge values and increments.
pub(crate) struct Scratch {
    z: Vec<f32>,
    w: Vec<f32>,
    dz: Vec<Vec<f32>>,
}

impl Scratch {
    pub(crate) fn new(dims: usize) -> Self {
        Scratch {
            z: vec![0.0; dims],
            w: vec![0.0; dims + 1],
            dz: vec![vec![0.0; dims]; LANES],
        }
    }
}

/// Simulates samples `s0 .. s0 + LANES` (those at or past `end` repeat sample `s0` and are
/// ignored by the caller). With `ANTI`, each lane is a pair (increments negated) and the
/// output its mean.
#[inline(always)]
pub(crate) fn run_group_qmc<K: PathKind, const ANTI: bool>(
    kind: &K,
    pp: &PathParams,
    plan: &QmcPlan,
    s0: u64,
    end: u64,
    sc: &mut Scratch,
) -> [SampleOut; LANES] {
    for l in 0..LANES {
        let s = if s0 + (l as u64) < end { s0 + l as u64 } else { s0 };
        plan.increments(s, &mut sc.z, &mut sc.w, &mut sc.dz[l]);
    }
    let (drift, vol) = (pp.drift_dt, pp.vol_sqrt_dt);
    let mut x = [0f32; LANES];
    let mut xa = [0f32; LANES];
    let mut st = kind.init();
    let mut sta = kind.init();
    let calls = pp.steps.div_ceil(NORMALS_PER_CALL);
    for b in 0..calls {
        let first = b * NORMALS_PER_CALL;
        let here = (pp.steps - first).min(NORMALS_PER_CALL);
        for step in first..first + here {
            for l in 0..LANES {
                let z = sc.dz[l][step as usize];
                x[l] += vol.mul_add(z, drift);
                if ANTI {
                    xa[l] += (-vol).mul_add(z, drift);
                }
            }
            kind.step(&mut st, step, &x);
            if ANTI {
                kind.step(&mut sta, step, &xa);
            }
        }
        kind.group_end(&mut st);
        if ANTI {
            kind.group_end(&mut sta);
        }
    }
    let mut out = [SampleOut::default(); LANES];
    kind.finish(&st, &x, &mut out);
    if ANTI {
        let mut mirror = [SampleOut::default(); LANES];
        kind.finish(&sta, &xa, &mut mirror);
        for (o, m) in out.iter_mut().zip(&mirror) {
            o.y = 0.5 * (o.y + m.y);
            o.c = 0.5 * (o.c + m.c);
            o.delta = 0.5 * (o.delta + m.delta);
            o.vega = 0.5 * (o.vega + m.vega);
        }
    }
    out
}
