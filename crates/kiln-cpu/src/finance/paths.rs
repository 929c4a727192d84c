//! The path kernel: `LANES` samples at a time, structure-of-arrays, so that Philox, the
//! Box-Muller transform and the log-price update vectorise. Each path style is a
//! [`PathKind`] that watches the f32 log-price `x` after every step and turns the final
//! state into one [`SampleOut`] per lane (f64 from there on).
//!
//! The arithmetic is the contract in [`kiln_core::finance::PathParams`] and
//! [`kiln_core::philox`]; a CUDA kernel doing the same operations gets the same bits per
//! path.

// The lane loops index several structure-of-arrays at once; `0..LANES` is the clearest form
// and what the vectoriser wants.
#![allow(clippy::needless_range_loop)]

use kiln_core::finance::{OptionType, PathParams};
use kiln_core::philox::{box_muller_f32, exp_f32, philox4x32_10_lanes, NORMALS_PER_CALL};

/// Samples simulated together (one SIMD-friendly group).
pub(crate) const LANES: usize = 8;

/// What one independent sample contributes (pair averages with antithetic variates).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct SampleOut {
    /// Discounted payoff.
    pub y: f64,
    /// Discounted control minus its known mean.
    pub c: f64,
    /// Pathwise delta (0 where the style has none).
    pub delta: f64,
    /// Pathwise vega (0 where the style has none).
    pub vega: f64,
}

/// Per-option constants the payoffs need (f64, from the spec).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Consts {
    pub kind: OptionType,
    pub spot: f64,
    pub strike: f64,
    /// `exp(-r T)`.
    pub df: f64,
    pub sigma: f64,
    /// `r - q + sigma^2 / 2`, the drift in the pathwise vega.
    pub vega_drift: f64,
    pub maturity: f64,
    pub dt: f64,
    /// Steps (fixings for Asian styles) as f64.
    pub n: f64,
    /// The control variate's known mean (already discounted).
    pub control_mean: f64,
    pub log_barrier: f32,
    /// [`PathParams::cross_k`]: 0 for discrete monitoring.
    pub cross_k: f32,
    /// `(vega_drift * dt) as f32`: the Asian vega's drift per fixing, in f32 (the GPU gets
    /// the same rounded value as a launch parameter).
    pub vega_drift_dt: f32,
}

/// A path style: per-lane state updated after each step, then one output per lane.
pub(crate) trait PathKind: Sync {
    type State: Copy;
    fn init(&self) -> Self::State;
    /// After step `step` (0-based; the time is `(step + 1) dt`), `x` is the log-price.
    fn step(&self, st: &mut Self::State, step: u32, x: &[f32; LANES]);
    /// After the steps of each Philox call (4, fewer in the last call).
    #[inline(always)]
    fn group_end(&self, _st: &mut Self::State) {}
    fn finish(&self, st: &Self::State, x: &[f32; LANES], out: &mut [SampleOut; LANES]);
}

/// Discounted payoff, sign and whether it pays, for the price `s`.
#[inline(always)]
fn pay(k: &Consts, s: f64) -> (f64, f64, bool) {
    let p = k.kind.payoff(s, k.strike);
    (k.df * p, k.df * k.kind.sign(), p > 0.0)
}

/// European: control `df S_T` (mean `S e^{-qT}`), pathwise delta and vega.
pub(crate) struct European(pub Consts);

impl PathKind for European {
    type State = ();
    #[inline(always)]
    fn init(&self) {}
    #[inline(always)]
    fn step(&self, _: &mut (), _: u32, _: &[f32; LANES]) {}
    #[inline(always)]
    fn finish(&self, _: &(), x: &[f32; LANES], out: &mut [SampleOut; LANES]) {
        let k = &self.0;
        for l in 0..LANES {
            let st = k.spot * f64::from(exp_f32(x[l]));
            let (y, sdf, itm) = pay(k, st);
            let (delta, vega) = if itm {
                let xl = f64::from(x[l]);
                (
                    sdf * st / k.spot,
                    sdf * st * (xl - k.vega_drift * k.maturity) / k.sigma,
                )
            } else {
                (0.0, 0.0)
            };
            out[l] = SampleOut {
                y,
                c: k.df * st - k.control_mean,
                delta,
                vega,
            };
        }
    }
}

/// Barrier: hit when a step ends at or past it; with continuous monitoring
/// (`cross_k != 0`) each step between two unhit points also multiplies the survival by the
/// Brownian bridge's probability of not crossing in between (the recurrence in
/// [`PathParams`]). Control: the vanilla payoff (mean: the Black-Scholes price). No
/// pathwise Greeks (the payoff jumps at the barrier).
pub(crate) struct Barrier<const UP: bool, const IN: bool>(pub Consts);

/// Per lane: hit at a step's end, the previous log-price, the survival probability.
#[derive(Clone, Copy)]
pub(crate) struct BarrierState {
    hit: [bool; LANES],
    prev: [f32; LANES],
    surv: [f32; LANES],
}

impl<const UP: bool, const IN: bool> PathKind for Barrier<UP, IN> {
    type State = BarrierState;
    #[inline(always)]
    fn init(&self) -> BarrierState {
        BarrierState {
            hit: [false; LANES],
            prev: [0.0; LANES],
            surv: [1.0; LANES],
        }
    }
    #[inline(always)]
    fn step(&self, st: &mut BarrierState, _: u32, x: &[f32; LANES]) {
        let b = self.0.log_barrier;
        let ck = self.0.cross_k;
        for l in 0..LANES {
            let past = if UP { x[l] >= b } else { x[l] <= b };
            if ck != 0.0 && !st.hit[l] && !past {
                // (b - prev)(b - x) > 0 on either side of the barrier
                let p = exp_f32(-(ck * ((b - st.prev[l]) * (b - x[l]))));
                st.surv[l] *= 1.0 - p;
            }
            st.hit[l] |= past;
            st.prev[l] = x[l];
        }
    }
    #[inline(always)]
    fn finish(&self, st: &BarrierState, x: &[f32; LANES], out: &mut [SampleOut; LANES]) {
        let k = &self.0;
        for l in 0..LANES {
            let s_t = k.spot * f64::from(exp_f32(x[l]));
            let (vanilla, _, _) = pay(k, s_t);
            // knocked at a step's end: the in-option pays the vanilla, the out-option 0;
            // else, weighted by the chance the bridge stayed clear (1 when discrete)
            let alive = if st.hit[l] {
                0.0
            } else if k.cross_k == 0.0 {
                1.0
            } else {
                f64::from(st.surv[l])
            };
            let y = match (IN, st.hit[l], k.cross_k == 0.0) {
                (true, true, _) => vanilla,
                (true, false, true) => 0.0,
                (true, false, false) => vanilla * (1.0 - alive),
                (false, _, _) => vanilla * alive,
            };
            out[l] = SampleOut {
                y,
                c: vanilla - k.control_mean,
                delta: 0.0,
                vega: 0.0,
            };
        }
    }
}

/// Running sums of an Asian path, per lane. Within the (up to 4) fixings of one Philox call
/// the sums are f32 (`g*`, in fixing order from 0), then added to the f64 totals: one f64
/// add a call instead of three a fixing (f64 is half the f32 rate on the GPU), and the
/// partial sums of 4 terms lose nothing the f32 path has not already rounded.
#[derive(Clone, Copy)]
pub(crate) struct AsianState {
    /// Sum of `exp_f32(x_i)` (f64).
    se: [f64; LANES],
    /// Sum of `exp_f32(x_i) * (x_i - vega_drift_dt * (i + 1))` (pathwise vega of the mean).
    sev: [f64; LANES],
    /// Sum of `x_i` (f64).
    sx: [f64; LANES],
    ge: [f32; LANES],
    gev: [f32; LANES],
    gx: [f32; LANES],
}

/// One fixing: `e = exp_f32(x)`, `ge += e`, `gx += x`, and for the vega
/// `gev = e.mul_add(x - vega_drift_dt * (step + 1) as f32, gev)` (all f32).
#[inline(always)]
fn asian_step(k: &Consts, st: &mut AsianState, step: u32, x: &[f32; LANES], want_vega: bool) {
    let shift = k.vega_drift_dt * (step + 1) as f32;
    for l in 0..LANES {
        let e = exp_f32(x[l]);
        st.ge[l] += e;
        if want_vega {
            st.gev[l] = e.mul_add(x[l] - shift, st.gev[l]);
        }
        st.gx[l] += x[l];
    }
}

/// The end of a call's fixings: the f32 partial sums go into the f64 totals.
#[inline(always)]
fn asian_group_end(st: &mut AsianState) {
    for l in 0..LANES {
        st.se[l] += f64::from(st.ge[l]);
        st.sev[l] += f64::from(st.gev[l]);
        st.sx[l] += f64::from(st.gx[l]);
    }
    st.ge = [0.0; LANES];
    st.gev = [0.0; LANES];
    st.gx = [0.0; LANES];
}

const ASIAN_ZERO: AsianState = AsianState {
    se: [0.0; LANES],
    sev: [0.0; LANES],
    sx: [0.0; LANES],
    ge: [0.0; LANES],
    gev: [0.0; LANES],
    gx: [0.0; LANES],
};

/// The geometric mean `spot * exp_f32((sum x / n) as f32)`.
#[inline(always)]
fn geometric(k: &Consts, sx: f64) -> f64 {
    k.spot * f64::from(exp_f32((sx / k.n) as f32))
}

/// Arithmetic-average Asian; control: the geometric-average payoff (mean: its closed form).
pub(crate) struct AsianArithmetic(pub Consts);

impl PathKind for AsianArithmetic {
    type State = AsianState;
    #[inline(always)]
    fn init(&self) -> AsianState {
        ASIAN_ZERO
    }
    #[inline(always)]
    fn step(&self, st: &mut AsianState, step: u32, x: &[f32; LANES]) {
        asian_step(&self.0, st, step, x, true);
    }
    #[inline(always)]
    fn group_end(&self, st: &mut AsianState) {
        asian_group_end(st);
    }
    #[inline(always)]
    fn finish(&self, st: &AsianState, _: &[f32; LANES], out: &mut [SampleOut; LANES]) {
        let k = &self.0;
        for l in 0..LANES {
            let avg = k.spot * st.se[l] / k.n;
            let (y, sdf, itm) = pay(k, avg);
            let (geo, _, _) = pay(k, geometric(k, st.sx[l]));
            let (delta, vega) = if itm {
                (sdf * avg / k.spot, sdf * k.spot * st.sev[l] / (k.n * k.sigma))
            } else {
                (0.0, 0.0)
            };
            out[l] = SampleOut {
                y,
                c: geo - k.control_mean,
                delta,
                vega,
            };
        }
    }
}

/// Geometric-average Asian; control: the discounted arithmetic mean of the prices (mean:
/// the discounted mean of the forwards).
pub(crate) struct AsianGeometric(pub Consts);

impl PathKind for AsianGeometric {
    type State = AsianState;
    #[inline(always)]
    fn init(&self) -> AsianState {
        ASIAN_ZERO
    }
    #[inline(always)]
    fn step(&self, st: &mut AsianState, step: u32, x: &[f32; LANES]) {
        asian_step(&self.0, st, step, x, false);
    }
    #[inline(always)]
    fn group_end(&self, st: &mut AsianState) {
        asian_group_end(st);
    }
    #[inline(always)]
    fn finish(&self, st: &AsianState, _: &[f32; LANES], out: &mut [SampleOut; LANES]) {
        let k = &self.0;
        // Mean fixing time, for d(ln G)/d sigma.
        let mean_t = k.dt * (k.n + 1.0) / 2.0;
        for l in 0..LANES {
            let g = geometric(k, st.sx[l]);
            let (y, sdf, itm) = pay(k, g);
            let (delta, vega) = if itm {
                let mean_x = st.sx[l] / k.n;
                (
                    sdf * g / k.spot,
                    sdf * g * (mean_x - k.vega_drift * mean_t) / k.sigma,
                )
            } else {
                (0.0, 0.0)
            };
            out[l] = SampleOut {
                y,
                c: k.df * k.spot * st.se[l] / k.n - k.control_mean,
                delta,
                vega,
            };
        }
    }
}

/// The 4 normals of one Philox call for every lane: `z[j][l]` is normal `4 b + j` of lane `l`.
#[inline(always)]
fn normals_lanes(w: &[[u32; LANES]; 4]) -> [[f32; LANES]; 4] {
    let mut z = [[0f32; LANES]; 4];
    for p in 0..2 {
        for l in 0..LANES {
            let [a, b] = box_muller_f32(w[2 * p][l], w[2 * p + 1][l]);
            z[2 * p][l] = a;
            z[2 * p + 1][l] = b;
        }
    }
    z
}

/// Simulates samples `s0 .. s0 + LANES` of `option` (lanes past the end are simulated
/// and ignored by the caller). With `ANTI`, each lane is a pair and the output its mean.
#[inline(always)]
pub(crate) fn run_group<K: PathKind, const ANTI: bool>(
    kind: &K,
    pp: &PathParams,
    option: u32,
    s0: u32,
) -> [SampleOut; LANES] {
    let (drift, vol) = (pp.drift_dt, pp.vol_sqrt_dt);
    let mut x = [0f32; LANES];
    let mut xa = [0f32; LANES];
    let mut st = kind.init();
    let mut sta = kind.init();
    let mut c1 = [0u32; LANES];
    for (l, c) in c1.iter_mut().enumerate() {
        *c = s0.wrapping_add(l as u32);
    }
    let calls = pp.steps.div_ceil(NORMALS_PER_CALL);
    for b in 0..calls {
        let w = philox4x32_10_lanes(&[[b; LANES], c1, [option; LANES], [0; LANES]], pp.key);
        let z = normals_lanes(&w);
        let first = b * NORMALS_PER_CALL;
        let here = (pp.steps - first).min(NORMALS_PER_CALL) as usize;
        for (j, zj) in z.iter().enumerate().take(here) {
            for l in 0..LANES {
                x[l] += vol.mul_add(zj[l], drift);
                if ANTI {
                    xa[l] += (-vol).mul_add(zj[l], drift);
                }
            }
            kind.step(&mut st, first + j as u32, &x);
            if ANTI {
                kind.step(&mut sta, first + j as u32, &xa);
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

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::finance::{McParams, OptionSpec};
    use kiln_core::philox::normal_f32;

    /// The lane kernel steps exactly the documented recurrence on the documented stream.
    #[test]
    fn lanes_follow_the_documented_recurrence() {
        let spec = OptionSpec::european(OptionType::Call, 100.0, 90.0, 0.03, 0.01, 0.3, 1.0);
        let mc = McParams {
            paths: 64,
            steps: 7,
            seed: 99,
            antithetic: false,
            control_variate: false,
            fast_math: false,
            rng: kiln_core::finance::Rng::Philox,
        };
        let pp = PathParams::new(&spec, &mc).unwrap();
        let k = Consts {
            kind: OptionType::Call,
            spot: 100.0,
            strike: 90.0,
            df: pp.discount,
            sigma: 0.3,
            vega_drift: 0.03 - 0.01 + 0.045,
            maturity: 1.0,
            dt: pp.dt,
            n: 7.0,
            control_mean: 0.0,
            log_barrier: 0.0,
            cross_k: 0.0,
            vega_drift_dt: ((0.03 - 0.01 + 0.045) * pp.dt) as f32,
        };
        let out = run_group::<_, false>(&European(k), &pp, 3, 16);
        for (l, o) in out.iter().enumerate() {
            let mut x = 0f32;
            for step in 0..7 {
                let z = normal_f32(99, 3, 16 + l as u32, step);
                x += pp.vol_sqrt_dt.mul_add(z, pp.drift_dt);
            }
            let st = 100.0 * f64::from(exp_f32(x));
            assert_eq!(o.y.to_bits(), (pp.discount * (st - 90.0).max(0.0)).to_bits());
        }
    }
}
