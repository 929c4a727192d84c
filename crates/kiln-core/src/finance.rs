//! The vocabulary of kiln's option pricing: what an option is ([`OptionSpec`]), how a Monte
//! Carlo run is configured ([`McParams`]), what a price comes back as ([`PriceResult`]), and
//! the per-option path constants ([`PathParams`]) that every backend derives the same way,
//! so that the CPU and CUDA paths start from the same bits.
//!
//! Conventions: rates and the dividend yield are continuously compounded per year, maturity
//! is in years, volatility is per `sqrt(year)`. Asian fixings are equally spaced with the
//! last at maturity (`t_i = i T / n`, `i = 1..=n`). A barrier option without `fixings` is
//! monitored continuously (Monte Carlo: the Brownian-bridge crossing probability of every
//! step, see [`PathParams`]); with `fixings = m` it is monitored at the `m` equally spaced
//! dates `t_i = i T / m` (not at `t = 0`): Monte Carlo steps from date to date, exactly; the
//! closed form applies Broadie-Glasserman-Kou's barrier shift.
//!
//! The reference numerics both engines share live here too, so that neither backend crate
//! depends on the other: the closed forms ([`analytic`]: Black-Scholes-Merton and the
//! discrete geometric Asian) and a Monte Carlo run's canonical blocks and finishing math
//! ([`blocks`]: [`BlockSums`], [`control_mean`], [`finish`]). The path simulation itself
//! is each backend's (kiln-cpu with rayon, kiln-cuda in `finance.cu`).

pub mod american;
pub mod analytic;
pub mod barrier;
pub mod basket;
pub mod bivariate;
pub mod blocks;
pub mod calibrate;
pub mod heston;
pub mod implied;
pub mod invnorm;
pub mod qmc;
pub mod rainbow;
pub mod risk;
pub mod sobol;
pub mod spread;

pub use analytic::{bsm, bsm_carry_rho, geometric_asian, norm_cdf, norm_pdf, price_analytic, Bsm};
pub use blocks::{block_count, control_mean, finish, finish_replicates, BlockSums, BLOCK_SAMPLES};
pub use qmc::{BrownianBridge, QmcPlan, QMC_MAX_STEPS};

use crate::error::{Error, Result};
use crate::philox;

/// Call or put.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionType {
    /// Pays `max(S - K, 0)`.
    Call,
    /// Pays `max(K - S, 0)`.
    Put,
}

impl OptionType {
    /// `+1` for a call, `-1` for a put.
    pub fn sign(self) -> f64 {
        match self {
            OptionType::Call => 1.0,
            OptionType::Put => -1.0,
        }
    }

    /// The payoff `max(sign * (s - k), 0)`.
    #[inline]
    pub fn payoff(self, s: f64, k: f64) -> f64 {
        match self {
            OptionType::Call => (s - k).max(0.0),
            OptionType::Put => (k - s).max(0.0),
        }
    }

    /// The name used in files: `call` or `put`.
    pub fn name(self) -> &'static str {
        match self {
            OptionType::Call => "call",
            OptionType::Put => "put",
        }
    }
}

/// The exercise style and path dependence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Style {
    /// Payoff on the price at maturity.
    European,
    /// Payoff on the arithmetic mean of the prices at the fixings.
    AsianArithmetic,
    /// Payoff on the geometric mean of the prices at the fixings.
    AsianGeometric,
    /// European payoff, void if the price is at or above the barrier at a monitoring date.
    BarrierUpOut,
    /// European payoff, alive only if the price is at or above the barrier at a monitoring date.
    BarrierUpIn,
    /// European payoff, void if the price is at or below the barrier at a monitoring date.
    BarrierDownOut,
    /// European payoff, alive only if the price is at or below the barrier at a monitoring date.
    BarrierDownIn,
}

impl Style {
    /// Every style, in file-name order.
    pub const ALL: [Style; 7] = [
        Style::European,
        Style::AsianArithmetic,
        Style::AsianGeometric,
        Style::BarrierUpOut,
        Style::BarrierUpIn,
        Style::BarrierDownOut,
        Style::BarrierDownIn,
    ];

    /// The name used in files, e.g. `barrier_up_out`.
    pub fn name(self) -> &'static str {
        match self {
            Style::European => "european",
            Style::AsianArithmetic => "asian_arithmetic",
            Style::AsianGeometric => "asian_geometric",
            Style::BarrierUpOut => "barrier_up_out",
            Style::BarrierUpIn => "barrier_up_in",
            Style::BarrierDownOut => "barrier_down_out",
            Style::BarrierDownIn => "barrier_down_in",
        }
    }

    /// Whether the style needs `fixings`.
    pub fn is_asian(self) -> bool {
        matches!(self, Style::AsianArithmetic | Style::AsianGeometric)
    }

    /// Whether the style needs `barrier`.
    pub fn is_barrier(self) -> bool {
        matches!(
            self,
            Style::BarrierUpOut | Style::BarrierUpIn | Style::BarrierDownOut | Style::BarrierDownIn
        )
    }
}

/// One option to price.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OptionSpec {
    /// Call or put.
    pub option_type: OptionType,
    /// Style (European, Asian, barrier).
    pub style: Style,
    /// Price of the underlying now, `> 0`.
    pub spot: f64,
    /// Strike, `> 0`.
    pub strike: f64,
    /// Risk-free rate, continuously compounded per year (may be negative).
    pub rate: f64,
    /// Dividend yield `q`, continuously compounded per year (may be negative).
    pub dividend: f64,
    /// Volatility per `sqrt(year)`, `> 0`.
    pub volatility: f64,
    /// Time to maturity in years, `> 0`.
    pub maturity: f64,
    /// Number of equally spaced fixings (the last at maturity), `>= 1`: the averaging dates
    /// of Asian styles (required there); for barrier styles the discrete monitoring dates
    /// (`None`: monitored continuously). Other styles take none.
    pub fixings: Option<u32>,
    /// Barrier level, `> 0`; barrier styles only.
    pub barrier: Option<f64>,
    /// Cash rebate of a barrier option, `>= 0` (0 for other styles): an out-option pays it
    /// when the barrier is touched, an in-option at expiry if it never was. Priced by the
    /// closed forms ([`barrier`]); Monte Carlo takes barrier options without a rebate.
    #[serde(default)]
    pub rebate: f64,
}

impl OptionSpec {
    /// A European option (no fixings, no barrier).
    pub fn european(
        option_type: OptionType,
        spot: f64,
        strike: f64,
        rate: f64,
        dividend: f64,
        volatility: f64,
        maturity: f64,
    ) -> Self {
        OptionSpec {
            option_type,
            style: Style::European,
            spot,
            strike,
            rate,
            dividend,
            volatility,
            maturity,
            fixings: None,
            barrier: None,
            rebate: 0.0,
        }
    }

    /// Time steps of this option's Monte Carlo paths under a run of `mc_steps` steps:
    /// Asian styles and discretely monitored barriers step from fixing to fixing.
    pub fn path_steps(&self, mc_steps: u32) -> u32 {
        self.fixings.unwrap_or(mc_steps)
    }

    /// The same option with another style, fixings and barrier.
    pub fn with_style(mut self, style: Style, fixings: Option<u32>, barrier: Option<f64>) -> Self {
        self.style = style;
        self.fixings = fixings;
        self.barrier = barrier;
        self
    }

    /// Checks every field; the error says which one is wrong and what is accepted.
    pub fn validate(&self) -> Result<()> {
        const OP: &str = "option";
        let bad = |reason: String| Err(Error::invalid(OP, reason));
        let fields = [
            ("spot", self.spot),
            ("strike", self.strike),
            ("rate", self.rate),
            ("dividend", self.dividend),
            ("volatility", self.volatility),
            ("maturity", self.maturity),
        ];
        for (name, v) in fields {
            if !v.is_finite() {
                return bad(format!("{name} is {v}; it must be a finite number"));
            }
        }
        for (name, v) in [("spot", self.spot), ("strike", self.strike)] {
            if v <= 0.0 {
                return bad(format!("{name} = {v}; it must be > 0"));
            }
        }
        if self.volatility <= 0.0 {
            return bad(format!(
                "volatility = {}; it must be > 0 (per sqrt(year), e.g. 0.2 for 20%)",
                self.volatility
            ));
        }
        if self.maturity <= 0.0 {
            return bad(format!("maturity = {}; it must be > 0 (in years)", self.maturity));
        }
        let style = self.style.name();
        match (self.style.is_asian(), self.fixings) {
            (true, None) => return bad(format!("style {style} needs fixings (an integer >= 1)")),
            (_, Some(0)) => {
                return bad(format!(
                    "style {style}: fixings = 0; it must be >= 1 (barriers: leave it empty for continuous monitoring)"
                ))
            }
            (false, Some(n)) if !self.style.is_barrier() => {
                return bad(format!(
                    "fixings = {n} given for style {style}, which has no fixings (only Asian averaging dates and barrier monitoring dates)"
                ))
            }
            _ => {}
        }
        if !self.rebate.is_finite() || self.rebate < 0.0 {
            return bad(format!(
                "rebate = {}; it must be a finite number >= 0",
                self.rebate
            ));
        }
        if self.rebate != 0.0 && !self.style.is_barrier() {
            return bad(format!(
                "rebate = {} given for style {style}, which has no barrier",
                self.rebate
            ));
        }
        match (self.style.is_barrier(), self.barrier) {
            (true, None) => return bad(format!("style {style} needs a barrier level")),
            (true, Some(b)) if !b.is_finite() || b <= 0.0 => {
                return bad(format!("barrier = {b}; it must be a finite number > 0"))
            }
            (false, Some(b)) => {
                return bad(format!(
                    "barrier = {b} given for style {style}, which has no barrier"
                ))
            }
            _ => {}
        }
        Ok(())
    }
}

/// Where a Monte Carlo run's normals come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rng {
    /// Philox4x32-10 pseudo-random normals (Box-Muller), one stream per option and sample
    /// ([`crate::philox`]).
    Philox,
    /// Randomised quasi-Monte Carlo: Sobol points (Joe-Kuo), random digital shifts, the
    /// inverse normal CDF and a Brownian bridge ([`qmc`]). `replicates` independent shifts
    /// (`>= 2`) give the standard error; the samples are split evenly between them, each
    /// replicate a multiple of [`BLOCK_SAMPLES`] points.
    Sobol {
        /// Independent randomisations (16 is a good default).
        replicates: u32,
    },
}

impl Rng {
    /// `philox` or `sobol`.
    pub fn name(self) -> &'static str {
        match self {
            Rng::Philox => "philox",
            Rng::Sobol { .. } => "sobol",
        }
    }
}

/// How a Monte Carlo run is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct McParams {
    /// Paths to simulate, `>= 2`. With antithetic variates, paths come in pairs and an odd
    /// count is rounded up ([`PriceResult::paths_used`] says how many were used).
    pub paths: u64,
    /// Time steps for European styles and continuously monitored barriers (each step adds
    /// its bridge crossing probability). Asian styles and discretely monitored barriers step
    /// from fixing to fixing and ignore this.
    pub steps: u32,
    /// The seed: the Philox key (see [`crate::philox`]).
    pub seed: u64,
    /// Pair every path with its mirror (normals negated).
    pub antithetic: bool,
    /// Use the style's control variate, with the optimal coefficient estimated from the
    /// same paths.
    pub control_variate: bool,
    /// GPU only: draw the normals (and the Asian fixings' `exp`) with the GPU's hardware
    /// approximations instead of the portable math. The same Philox words and the same
    /// Box-Muller mapping, so each normal agrees with the exact one to about 1e-6 and prices
    /// agree with the CPU's to far below the standard error, but not bitwise; about twice
    /// as fast. The CPU always computes exactly and ignores this.
    pub fast_math: bool,
    /// The generator: Philox pseudo-random or randomised Sobol. Sobol runs are always exact
    /// (`fast_math` does not apply to them).
    pub rng: Rng,
}

impl Default for McParams {
    fn default() -> Self {
        McParams {
            paths: 1 << 16,
            steps: 64,
            seed: 0x6b69_6c6e, // "kiln"
            antithetic: false,
            control_variate: false,
            fast_math: false,
            rng: Rng::Philox,
        }
    }
}

impl McParams {
    /// Independent samples: paths, or path pairs with antithetic variates. With
    /// [`Rng::Sobol`] they are rounded up to `replicates` times
    /// [`points_per_replicate`](Self::points_per_replicate).
    pub fn samples(&self) -> u64 {
        let base = if self.antithetic {
            self.paths.div_ceil(2)
        } else {
            self.paths
        };
        match self.rng {
            Rng::Philox => base,
            Rng::Sobol { replicates } => {
                u64::from(replicates.max(1)).saturating_mul(self.points_per_replicate())
            }
        }
    }

    /// Sobol points per replicate: the samples split evenly between the replicates, rounded
    /// up to a multiple of [`BLOCK_SAMPLES`] (so a replicate is whole canonical blocks). 0
    /// for Philox runs.
    pub fn points_per_replicate(&self) -> u64 {
        let base = if self.antithetic {
            self.paths.div_ceil(2)
        } else {
            self.paths
        };
        match self.rng {
            Rng::Philox => 0,
            Rng::Sobol { replicates } => base
                .div_ceil(u64::from(replicates.max(1)))
                .div_ceil(BLOCK_SAMPLES)
                .saturating_mul(BLOCK_SAMPLES),
        }
    }

    /// Paths actually simulated (`2 * samples()` with antithetic variates).
    pub fn paths_used(&self) -> u64 {
        if self.antithetic {
            2 * self.samples()
        } else {
            // Philox: the paths asked for; Sobol: rounded up to whole replicates
            self.samples()
        }
    }

    /// Checks the run: enough samples for an error estimate, counts the stream can address.
    pub fn validate(&self) -> Result<()> {
        const OP: &str = "monte_carlo";
        if self.samples() < 2 {
            return Err(Error::invalid(
                OP,
                format!(
                    "paths = {}; at least 2 independent samples are needed for a standard error",
                    self.paths
                ),
            ));
        }
        if self.samples() > 1 << 32 {
            return Err(Error::invalid(
                OP,
                format!(
                    "paths = {}; at most 2^32 independent samples per option (the Philox counter word)",
                    self.paths
                ),
            ));
        }
        if self.steps == 0 {
            return Err(Error::invalid(OP, "steps = 0; it must be >= 1"));
        }
        if let Rng::Sobol { replicates } = self.rng {
            if replicates < 2 {
                return Err(Error::invalid(
                    OP,
                    format!("sobol replicates = {replicates}; at least 2 are needed for a standard error"),
                ));
            }
        }
        Ok(())
    }
}

/// A price and what is known about its accuracy and sensitivities.
///
/// Greeks are in QuantLib's units: `vega` and `rho` per 1.0 of volatility and rate (not per
/// 1%), `theta` per year of calendar time passing (negative for decay). `None` where not
/// computed.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct PriceResult {
    /// The price.
    pub price: f64,
    /// Standard error of the price (0 for closed forms).
    pub std_error: f64,
    /// 95% confidence interval, `price -/+ 1.96 std_error`.
    pub ci95: (f64, f64),
    /// Paths simulated (0 for closed forms).
    pub paths_used: u64,
    /// dV/dS.
    pub delta: Option<f64>,
    /// d2V/dS2.
    pub gamma: Option<f64>,
    /// dV/dsigma, per 1.0 of volatility.
    pub vega: Option<f64>,
    /// -dV/dT, per year.
    pub theta: Option<f64>,
    /// dV/dr, per 1.0 of rate.
    pub rho: Option<f64>,
}

impl PriceResult {
    /// A closed-form price (no error, no paths) with no Greeks yet.
    pub fn exact(price: f64) -> Self {
        PriceResult {
            price,
            std_error: 0.0,
            ci95: (price, price),
            paths_used: 0,
            delta: None,
            gamma: None,
            vega: None,
            theta: None,
            rho: None,
        }
    }
}

/// The constants of one option's simulation, derived in f64 on the host and rounded once, so
/// that every backend steps the same f32 log-price:
///
/// ```text
/// x_0 = 0;  x_{i+1} = x_i + vol_sqrt_dt.mul_add(z_i, drift_dt)      (f32; the product fused)
/// antithetic mirror:  x'_{i+1} = x'_i + (-vol_sqrt_dt).mul_add(z_i, drift_dt)
/// S_i = spot * exp_f32(x_i)      (the product in f64)
/// ```
///
/// where `z_i` is normal `i` of the stream (see [`crate::philox`]). A barrier is hit at step
/// `i` (1-based) when `x_i >= log_barrier` (up) or `x_i <= log_barrier` (down). A
/// continuously monitored barrier (`cross_k != 0`) also survives each step between two
/// unhit points only with the Brownian bridge's probability of not crossing in between,
/// all in f32 with kiln-core's [`philox::exp_f32`]:
///
/// ```text
/// p_i    = exp_f32(-(cross_k * ((log_barrier - x_{i-1}) * (log_barrier - x_i))))
/// surv_i = surv_{i-1} * (1 - p_i)            (surv_0 = 1)
/// ```
///
/// and the payoff is weighted by `surv` (out) or `1 - surv` (in) in f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathParams {
    /// Time steps (Asian styles and discrete barriers: the fixings).
    pub steps: u32,
    /// Step length in years, `maturity / steps`.
    pub dt: f64,
    /// `((rate - dividend - volatility^2 / 2) * dt) as f32`.
    pub drift_dt: f32,
    /// `(volatility * sqrt(dt)) as f32`.
    pub vol_sqrt_dt: f32,
    /// `ln(barrier / spot) as f32`; 0 without a barrier.
    pub log_barrier: f32,
    /// Continuous monitoring's crossing coefficient `(2 / vol_sqrt_dt^2) as f32` (the
    /// square in f64 from the f32 `vol_sqrt_dt`); 0 for a discretely monitored barrier and
    /// for styles without one.
    pub cross_k: f32,
    /// `exp(-rate * maturity)`.
    pub discount: f64,
    /// The Philox key, [`philox::key_from_seed`] of the seed.
    pub key: [u32; 2],
    /// Independent samples ([`McParams::samples`]).
    pub samples: u64,
}

impl PathParams {
    /// Validates both inputs and derives the constants.
    pub fn new(spec: &OptionSpec, mc: &McParams) -> Result<Self> {
        spec.validate()?;
        mc.validate()?;
        if spec.rebate != 0.0 {
            return Err(Error::invalid(
                "monte_carlo",
                format!(
                    "rebate = {}: Monte Carlo prices barriers without a rebate; use the analytic method",
                    spec.rebate
                ),
            ));
        }
        // Asian styles step from fixing to fixing, discrete barriers from date to date
        let steps = spec.path_steps(mc.steps);
        let dt = spec.maturity / f64::from(steps);
        let v = spec.volatility;
        let vol_sqrt_dt = (v * dt.sqrt()) as f32;
        let continuous = spec.style.is_barrier() && spec.fixings.is_none();
        Ok(PathParams {
            steps,
            dt,
            drift_dt: ((spec.rate - spec.dividend - 0.5 * v * v) * dt) as f32,
            vol_sqrt_dt,
            log_barrier: spec.barrier.map_or(0.0, |b| (b / spec.spot).ln() as f32),
            cross_k: if continuous {
                (2.0 / (f64::from(vol_sqrt_dt) * f64::from(vol_sqrt_dt))) as f32
            } else {
                0.0
            },
            discount: (-spec.rate * spec.maturity).exp(),
            key: philox::key_from_seed(mc.seed),
            samples: mc.samples(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> OptionSpec {
        OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.01, 0.2, 1.0)
    }

    fn reason(spec: OptionSpec) -> String {
        match spec.validate() {
            Err(Error::InvalidArgument { reason, .. }) => reason,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn validation_names_the_field() {
        assert!(base().validate().is_ok());
        let mut s = base();
        s.volatility = 0.0;
        assert!(reason(s).contains("volatility"));
        s = base();
        s.maturity = -1.0;
        assert!(reason(s).contains("maturity"));
        s = base();
        s.spot = 0.0;
        assert!(reason(s).contains("spot"));
        s = base();
        s.strike = -5.0;
        assert!(reason(s).contains("strike"));
        s = base();
        s.rate = f64::NAN;
        assert!(reason(s).contains("rate") && reason(s).contains("finite"));
        s = base();
        s.dividend = f64::INFINITY;
        assert!(reason(s).contains("dividend"));
        let s = base().with_style(Style::BarrierUpOut, None, None);
        assert!(reason(s).contains("needs a barrier"));
        let s = base().with_style(Style::BarrierDownIn, None, Some(f64::NAN));
        assert!(reason(s).contains("barrier"));
        let s = base().with_style(Style::AsianArithmetic, None, None);
        assert!(reason(s).contains("needs fixings"));
        let s = base().with_style(Style::AsianGeometric, Some(0), None);
        assert!(reason(s).contains("fixings = 0"));
        let s = base().with_style(Style::European, None, Some(120.0));
        assert!(reason(s).contains("no barrier"));
        assert!(base()
            .with_style(Style::AsianGeometric, Some(12), None)
            .validate()
            .is_ok());
    }

    #[test]
    fn mc_params_and_path_constants() {
        let mc = McParams {
            paths: 11,
            antithetic: true,
            ..McParams::default()
        };
        assert_eq!((mc.samples(), mc.paths_used()), (6, 12));
        assert!(McParams { paths: 1, ..mc }.validate().is_err());
        assert!(McParams { steps: 0, ..mc }.validate().is_err());
        assert!(McParams {
            paths: 1 << 34,
            antithetic: false,
            ..mc
        }
        .validate()
        .is_err());
        let spec = base().with_style(Style::AsianArithmetic, Some(12), None);
        let p = PathParams::new(&spec, &mc).unwrap();
        assert_eq!(p.steps, 12);
        assert!((p.dt - 1.0 / 12.0).abs() < 1e-15);
        assert_eq!(p.key, [0x6b69_6c6e, 0]);
        let spec = base().with_style(Style::BarrierUpOut, None, Some(120.0));
        let p = PathParams::new(&spec, &mc).unwrap();
        assert_eq!(p.steps, mc.steps);
        assert_eq!(p.log_barrier, 1.2f64.ln() as f32);
        assert!(serde_json_like(&spec).contains("barrier_up_out"));
    }

    // serde_json is not a dependency of kiln-core: check the Serialize derive through toml.
    fn serde_json_like(spec: &OptionSpec) -> String {
        toml::to_string(spec).unwrap()
    }
}
