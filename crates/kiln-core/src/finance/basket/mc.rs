//! The basket Monte Carlo path both engines run (kiln-cpu's `finance::basket` and
//! kiln-cuda's `kernels/basket.cu`), written so that they produce the same bits.
//!
//! One step to maturity. Sample `s` of option (stream index) `o` draws its `N` normals from
//! Philox under the seed's key, four per call, on a stream of its own (counter word 3 =
//! [`BASKET_STREAM`]):
//!
//! ```text
//! words_b = philox4x32_10([b, s, o, BASKET_STREAM], key)         b = 0 .. ceil(N / 4)
//! z_i     = normals_from_words_f32(words_{i / 4})[i % 4]          i = 0 .. N
//! ```
//!
//! Then, in f32 with the constants of [`BasketPathParams`] (f64 on the host, rounded once),
//! for `i = 0 .. N` in order:
//!
//! ```text
//! u_i  = 0;  for j = 0 ..= i:  u_i = u_i + L_ij * z_j     (product rounded, then the sum: no fusion)
//! x_i  = vol_i.mul_add(u_i, drift_i)                     (fused; mirror: (-vol_i).mul_add(u_i, drift_i))
//! X_i  = spot_weight_i * (exp_f32(x_i) as f64)            (f64: w_i S_i(T))
//! arith = arith + X_i                                     (f64; arith_0 = 0)
//! glog  = glog + geo_weight_i * x_i                       (f32, product then sum; glog_0 = 0)
//! ```
//!
//! and a rainbow's underlying is `max_i X_i` or `min_i X_i`.
//!
//! With `--rng sobol` (randomised QMC, [`crate::finance::qmc`]'s contract with one "step"
//! per asset and no bridge), sample `s = r M + i` (replicate `r`, point `i`) takes instead
//!
//! ```text
//! z_i = inv_norm_f32(uniform_f64(sobol_u32(v, i, d = asset i) ^ shift[r N + i]))
//! ```
//!
//! (the shifts of [`digital_shifts`] under the seed's key), so the first Sobol dimensions go
//! to the first assets. The CPU engine runs this; the CUDA kernel takes Philox only, and the
//! facade sends Sobol baskets to the CPU.
//!
//! and `G = geo_spot * (exp_f32(glog) as f64)`, `A = arith`; the discounted payoff
//! `y = discount * payoff(A, G, max or min)` and the control ([`BasketControl`]):
//! `c = discount * payoff(G) - control_mean` (the geometric option's closed form) where
//! every weight is `> 0`; for a two-asset spread, Bjerksund-Stensland's exercise-rule
//! payoff less its closed form ([`SpreadControl`]; CPU only); else none (`c = 0`, so
//! `control_variate` leaves the estimate plain). With antithetic variates the mirror path uses the
//! same `u_i` with the volatility negated (which is the path of `-z` exactly: rounding to
//! nearest is symmetric), and the sample is the pair's mean, `0.5 * (y + y')`,
//! `0.5 * (c + c')`. kiln-core's [`philox::exp_f32`] is the portable exponential; CUDA
//! writes every step with `__fmul_rn`/`__fadd_rn`/`__fmaf_rn` and their f64 forms.

use crate::error::Result;
use crate::finance::invnorm::inv_norm_f32;
use crate::finance::sobol::{digital_shifts, direction_numbers_for, sobol_u32};
use crate::finance::spread::SpreadControl;
use crate::finance::{finish, BlockSums, McParams, OptionSpec, PriceResult, Rng};
use crate::philox::{self, exp_f32, normals_from_words_f32, uniform_f64};

use super::{BasketAverage, BasketSpec, MAX_ASSETS};
use crate::finance::OptionType;

/// Counter word 3 of the basket streams (0: GBM paths, 1: Sobol shifts, 2: Heston).
pub const BASKET_STREAM: u32 = 3;

/// The Philox words of normals `4 b .. 4 b + 3` of sample `sample` of option `option`.
#[inline(always)]
pub fn basket_words(key: [u32; 2], option: u32, sample: u32, b: u32) -> [u32; 4] {
    philox::philox4x32_10([b, sample, option, BASKET_STREAM], key)
}

/// The control variate of a basket's paths (module docs).
#[derive(Clone, Debug, PartialEq)]
pub enum BasketControl {
    /// The geometric basket option (every weight `> 0`); the CUDA kernel's only control.
    Geometric,
    /// Bjerksund-Stensland's exercise rule on the spread `X_long - |X_short|`.
    Spread {
        /// The rule and payoff.
        control: SpreadControl,
        /// The asset with the positive weight.
        long: usize,
        /// The asset with the negative weight.
        short: usize,
    },
    /// No control (`c = 0`).
    None,
}

/// Everything one basket option's paths need, derived once on the host (f64, rounded once
/// to f32 where the path is f32), shared by both engines.
#[derive(Clone, Debug, PartialEq)]
pub struct BasketPathParams {
    /// Call or put.
    pub kind: OptionType,
    /// Arithmetic basket (the CUDA kernel's flag: else geometric).
    pub arithmetic: bool,
    /// What the option pays on.
    pub payoff: BasketAverage,
    /// The control variate.
    pub control: BasketControl,
    /// Assets `N`.
    pub n: usize,
    /// `((r - q_i - sigma_i^2 / 2) T) as f32`.
    pub drift: Vec<f32>,
    /// `(sigma_i sqrt(T)) as f32`.
    pub vol: Vec<f32>,
    /// `(w_i / W) as f32` (0 where a weight is not `> 0`: no geometric basket).
    pub geo_weight: Vec<f32>,
    /// The Cholesky factor rounded to f32, lower triangle packed by rows: `L_ij` at
    /// `i (i + 1) / 2 + j`, `j <= i`.
    pub chol: Vec<f32>,
    /// `w_i * S_i` (f64).
    pub spot_weight: Vec<f64>,
    /// `W prod_i S_i^(w_i / W)` (f64), `= W exp(sum_i (w_i / W) ln S_i)` (0 where a weight
    /// is not `> 0`).
    pub geo_spot: f64,
    /// Strike.
    pub strike: f64,
    /// `exp(-rate * maturity)`.
    pub discount: f64,
    /// The control's mean: the geometric basket option's closed form, the spread's
    /// Bjerksund-Stensland value, or 0 without a control.
    pub control_mean: f64,
    /// The Philox key of the seed.
    pub key: [u32; 2],
    /// Independent samples ([`McParams::samples`]).
    pub samples: u64,
    /// Antithetic pairs.
    pub antithetic: bool,
    /// Sobol runs: the points and shifts (`None`: Philox).
    pub qmc: Option<BasketQmc>,
}

/// A Sobol basket run's points: `N` dimensions, one an asset.
#[derive(Clone, Debug, PartialEq)]
pub struct BasketQmc {
    /// Points per replicate, `M`.
    pub points: u64,
    /// Direction numbers of dimensions `0..N` (`v[d * 32 + k]`).
    pub directions: &'static [u32],
    /// Digital shifts, `shift[r * N + d]`.
    pub shifts: Vec<u32>,
}

impl BasketPathParams {
    /// Validates the option (its matrix must be positive semi-definite) and the run, and
    /// derives the constants. Philox or Sobol (module docs); `mc.steps` and `mc.fast_math`
    /// do not apply (one exact step to maturity).
    pub fn new(spec: &BasketSpec, mc: &McParams) -> Result<Self> {
        let l = spec.factor()?;
        mc.validate()?;
        let n = spec.assets.len();
        let key = philox::key_from_seed(mc.seed);
        let qmc = match mc.rng {
            Rng::Philox => None,
            Rng::Sobol { replicates } => Some(BasketQmc {
                points: mc.points_per_replicate(),
                directions: direction_numbers_for(n),
                shifts: digital_shifts(key, replicates, n),
            }),
        };
        let t = spec.maturity;
        let w = spec.total_weight();
        let mut chol = Vec::with_capacity(n * (n + 1) / 2);
        for i in 0..n {
            for j in 0..=i {
                chol.push(l[i * n + j] as f32);
            }
        }
        let geometric = spec.assets.iter().all(|a| a.weight > 0.0);
        let (control, control_mean) = if geometric {
            (BasketControl::Geometric, spec.geometric_price()?)
        } else if let Some((long, short)) = spec.spread_legs() {
            let (control, mean) = SpreadControl::new(spec.kind, &spec.two_assets(long, short), spec.strike);
            (BasketControl::Spread { control, long, short }, mean)
        } else {
            (BasketControl::None, 0.0)
        };
        let log_g: f64 = spec.assets.iter().map(|a| a.weight / w * a.spot.ln()).sum();
        Ok(BasketPathParams {
            kind: spec.kind,
            arithmetic: spec.average == BasketAverage::Arithmetic,
            payoff: spec.average,
            control,
            n,
            drift: spec
                .assets
                .iter()
                .map(|a| ((spec.rate - a.dividend - 0.5 * a.volatility * a.volatility) * t) as f32)
                .collect(),
            vol: spec
                .assets
                .iter()
                .map(|a| (a.volatility * t.sqrt()) as f32)
                .collect(),
            geo_weight: spec
                .assets
                .iter()
                .map(|a| if geometric { (a.weight / w) as f32 } else { 0.0 })
                .collect(),
            chol,
            spot_weight: spec.assets.iter().map(|a| a.weight * a.spot).collect(),
            geo_spot: if geometric { w * log_g.exp() } else { 0.0 },
            strike: spec.strike,
            discount: (-spec.rate * t).exp(),
            control_mean,
            key,
            samples: mc.samples(),
            antithetic: mc.antithetic,
            qmc,
        })
    }
}

/// One path from the normals `z` (mirror: the volatilities negated): `(y, c)` as the module
/// docs define them.
#[inline(always)]
fn path(pp: &BasketPathParams, z: &[f32], mirror: bool) -> (f64, f64) {
    let mut arith = 0.0f64;
    let mut glog = 0.0f32;
    let (mut hi, mut lo) = (f64::NEG_INFINITY, f64::INFINITY);
    let mut legs = [0.0f64; 2];
    let mut row = 0usize;
    for i in 0..pp.n {
        let mut u = 0.0f32;
        for (l, zj) in pp.chol[row..=row + i].iter().zip(z) {
            u += l * zj;
        }
        row += i + 1;
        let v = if mirror { -pp.vol[i] } else { pp.vol[i] };
        let x = v.mul_add(u, pp.drift[i]);
        let xi = pp.spot_weight[i] * f64::from(exp_f32(x));
        arith += xi;
        glog += pp.geo_weight[i] * x;
        hi = hi.max(xi);
        lo = lo.min(xi);
        if let Some(l) = legs.get_mut(i) {
            *l = xi;
        }
    }
    let g = pp.geo_spot * f64::from(exp_f32(glog));
    let under = match pp.payoff {
        BasketAverage::Arithmetic => arith,
        BasketAverage::Geometric => g,
        BasketAverage::Max => hi,
        BasketAverage::Min => lo,
    };
    let y = pp.discount * pp.kind.payoff(under, pp.strike);
    let c = match &pp.control {
        BasketControl::Geometric => pp.discount * pp.kind.payoff(g, pp.strike) - pp.control_mean,
        // the short leg's X is negative (its weight is): the leg is -X
        BasketControl::Spread { control, long, short } => {
            pp.discount * control.payoff(legs[*long], -legs[*short]) - pp.control_mean
        }
        BasketControl::None => 0.0,
    };
    (y, c)
}

/// Sample `sample` of option `option` (its stream index): the discounted payoff `y` and the
/// centred control `c` (pair means with antithetic variates); see the module docs.
#[inline(always)]
pub fn basket_sample(pp: &BasketPathParams, option: u32, sample: u32) -> (f64, f64) {
    let mut z = [0.0f32; MAX_ASSETS];
    let n = pp.n.min(MAX_ASSETS);
    if let Some(q) = &pp.qmc {
        let r = (u64::from(sample) / q.points) as usize;
        // points per replicate are <= 2^32 (McParams::validate)
        let i = (u64::from(sample) % q.points) as u32;
        let shifts = &q.shifts[r * pp.n..(r + 1) * pp.n];
        for (d, zd) in z.iter_mut().enumerate().take(n) {
            *zd = inv_norm_f32(uniform_f64(sobol_u32(q.directions, i, d) ^ shifts[d]));
        }
    } else {
        normals(pp, option, sample, &mut z[..n]);
    }
    let (y, c) = path(pp, &z[..n], false);
    if pp.antithetic {
        let (ym, cm) = path(pp, &z[..n], true);
        (0.5 * (y + ym), 0.5 * (c + cm))
    } else {
        (y, c)
    }
}

/// The Philox normals of a sample (module docs).
#[inline(always)]
fn normals(pp: &BasketPathParams, option: u32, sample: u32, z: &mut [f32]) {
    let n = z.len();
    for b in 0..n.div_ceil(4) {
        let zs = normals_from_words_f32(basket_words(pp.key, option, sample, b as u32));
        for (k, v) in zs.into_iter().enumerate() {
            if 4 * b + k < n {
                z[4 * b + k] = v;
            }
        }
    }
}

/// The price from every canonical block's sums of a basket run (block order; any partition
/// into consecutive sums): kiln-core's [`finish`], without Greeks. Both engines call it last.
pub fn finish_basket(spec: &BasketSpec, mc: &McParams, blocks: &[BlockSums]) -> Result<PriceResult> {
    // `finish` reads only the style of its option (for the Greeks, dropped here)
    let placeholder = OptionSpec::european(
        spec.kind,
        spec.strike,
        spec.strike,
        spec.rate,
        0.0,
        1.0,
        spec.maturity,
    );
    let mut r = finish(&placeholder, mc, blocks)?;
    r.delta = None;
    r.vega = None;
    Ok(r)
}
