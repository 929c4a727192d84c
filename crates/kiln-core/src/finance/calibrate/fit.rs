//! The fit: quotes checked ([`quote_problems`]), their market prices and vols, the
//! residuals and Jacobian of the chosen target for Levenberg-Marquardt, and the report
//! ([`HestonFit`]); the module docs of [`super`] give the method.

use super::dual::NP;
use super::lm::{levenberg_marquardt, LmOptions, Residuals, Stop};
use super::pricer::{self, from_vec, to_vec, Contract, Quadrature, SurfacePricer};
use crate::error::{Error, Result};
use crate::finance::analytic::bsm;
use crate::finance::heston::HestonParams;
use crate::finance::implied::implied_volatility;
use crate::finance::OptionType;

const OP: &str = "calibrate_heston";

/// What a quote's `value` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuoteKind {
    /// A discounted option price.
    Price,
    /// A Black-Scholes implied volatility (0.2 for 20%).
    Vol,
}

/// What the fit minimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Weighted price differences.
    Price,
    /// Weighted implied-vol differences.
    Vol,
}

impl std::str::FromStr for Target {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "price" => Ok(Target::Price),
            "vol" => Ok(Target::Vol),
            _ => Err(Error::invalid(
                "target",
                format!("unknown target `{s}`; use price or vol"),
            )),
        }
    }
}

impl std::str::FromStr for QuoteKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "price" => Ok(QuoteKind::Price),
            "vol" => Ok(QuoteKind::Vol),
            _ => Err(Error::invalid(
                "kind",
                format!("unknown quote kind `{s}`; use price or vol"),
            )),
        }
    }
}

/// One quote of the surface.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HestonQuote {
    /// The contract.
    pub contract: Contract,
    /// The quoted price or implied volatility (see [`CalibrationOptions::quoted`]).
    pub value: f64,
    /// The residual's weight, `>= 0` (1 for an unweighted fit).
    pub weight: f64,
}

/// How to calibrate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CalibrationOptions {
    /// What the quotes' values are.
    pub quoted: QuoteKind,
    /// What the fit minimises.
    pub target: Target,
    /// Stopping rules.
    pub lm: LmOptions,
    /// The box the parameters stay in (each field a lower bound).
    pub lower: HestonParams,
    /// Each field an upper bound.
    pub upper: HestonParams,
    /// The quadrature's truncated domain `[0, upper]` (see [`Quadrature::new`]).
    pub quad_upper: f64,
    /// Its widest panel.
    pub quad_width: f64,
    /// Gauss-Legendre nodes per panel.
    pub quad_order: usize,
}

impl Default for CalibrationOptions {
    fn default() -> Self {
        CalibrationOptions {
            quoted: QuoteKind::Price,
            target: Target::Vol,
            lm: LmOptions::default(),
            lower: HestonParams {
                kappa: 1e-4,
                theta: 1e-6,
                xi: 1e-4,
                rho: -0.999,
                v0: 1e-6,
            },
            upper: HestonParams {
                kappa: 50.0,
                theta: 4.0,
                xi: 10.0,
                rho: 0.999,
                v0: 4.0,
            },
            quad_upper: pricer::DEFAULT_UPPER,
            quad_width: pricer::DEFAULT_WIDTH,
            quad_order: pricer::DEFAULT_ORDER,
        }
    }
}

/// The starting point kiln uses where none is given (QuantLib's DAX calibration test's):
/// `kappa = 1, theta = 0.1, xi = 0.5, rho = -0.5, v0 = 0.1`.
pub const DEFAULT_START: HestonParams = HestonParams {
    kappa: 1.0,
    theta: 0.1,
    xi: 0.5,
    rho: -0.5,
    v0: 0.1,
};

/// One quote's fit.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct QuoteFit {
    /// The market price (the quote, or Black-Scholes at the quoted vol).
    pub market_price: f64,
    /// The fitted model's price.
    pub model_price: f64,
    /// `model_price - market_price`.
    pub price_error: f64,
    /// The market implied vol (the quote, or the price's implied vol; `None` where the price
    /// has none).
    pub market_vol: Option<f64>,
    /// The model price's implied vol (`None` where it has none).
    pub model_vol: Option<f64>,
    /// `100 (model_vol - market_vol)`, in vol points, where both exist.
    pub vol_error_points: Option<f64>,
    /// The quote's weight.
    pub weight: f64,
}

/// A calibration's result.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HestonFit {
    /// The fitted parameters.
    pub params: HestonParams,
    /// Where the optimiser started.
    pub start: HestonParams,
    /// Whether `2 kappa theta >= xi^2` at the fit.
    pub feller: bool,
    /// Root mean square of the vol errors in vol points, over the quotes that have both
    /// vols (unweighted); `None` if none has.
    pub rmse_vol_points: Option<f64>,
    /// Quotes counted in `rmse_vol_points`.
    pub vol_quotes: usize,
    /// Root mean square of the price errors (unweighted).
    pub rmse_price: f64,
    /// `1/2 sum r_i^2` of the target's weighted residuals.
    pub cost: f64,
    /// What was minimised.
    pub target: Target,
    /// Levenberg-Marquardt iterations.
    pub iterations: usize,
    /// Surface evaluations (prices and gradients).
    pub evaluations: usize,
    /// Why it stopped.
    pub stop: Stop,
    /// Every quote's fit, in input order.
    pub quotes: Vec<QuoteFit>,
}

struct Problem {
    pricer: SurfacePricer,
    contracts: Vec<Contract>,
    market_price: Vec<f64>,
    market_vol: Vec<Option<f64>>,
    /// vega at the market vol (the fallback's scale)
    market_vega: Vec<f64>,
    weight: Vec<f64>,
    target: Target,
    prices: Vec<f64>,
    grads: Vec<[f64; NP]>,
}

fn vega(c: &Contract, sigma: f64) -> f64 {
    bsm(c.kind, c.spot, c.strike, c.rate, c.dividend, sigma, c.maturity).vega
}

fn model_vol(c: &Contract, price: f64) -> Option<f64> {
    implied_volatility(price, c.spot, c.strike, c.maturity, c.rate, c.dividend, c.kind).ok()
}

impl Residuals for Problem {
    fn eval(&mut self, p: &[f64; NP], r: &mut [f64], jac: &mut [[f64; NP]]) -> Result<()> {
        self.pricer
            .price_grad(&from_vec(p), &mut self.prices, &mut self.grads)?;
        for i in 0..r.len() {
            let w = self.weight[i];
            let (pr, gr) = (self.prices[i], self.grads[i]);
            let dp = pr - self.market_price[i];
            let (res, scale) = match self.target {
                Target::Price => (dp, 1.0),
                Target::Vol => {
                    let c = &self.contracts[i];
                    // market_vol exists for every quote of a vol fit (checked on entry)
                    let mv = self.market_vol[i].unwrap_or(0.0);
                    match model_vol(c, pr) {
                        Some(s) if vega(c, s) > 0.0 => (s - mv, 1.0 / vega(c, s)),
                        _ => (dp / self.market_vega[i], 1.0 / self.market_vega[i]),
                    }
                }
            };
            r[i] = w * res;
            jac[i] = gr.map(|g| w * g * scale);
        }
        Ok(())
    }
}

/// A quote the fit cannot use: its index in the input and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuoteProblem {
    /// The quote's index in the input, 0-based.
    pub index: usize,
    /// Every reason, separated by `; `.
    pub reason: String,
}

/// The market price and implied vol of a quote (the vol `None` where the price has none).
fn market(q: &HestonQuote, quoted: QuoteKind) -> (f64, Option<f64>) {
    let c = &q.contract;
    match quoted {
        QuoteKind::Price => (q.value, model_vol(c, q.value)),
        QuoteKind::Vol => (
            bsm(c.kind, c.spot, c.strike, c.rate, c.dividend, q.value, c.maturity).price,
            Some(q.value),
        ),
    }
}

/// Every quote [`calibrate_heston`] would refuse, each with all its reasons, so that a
/// caller holding a file can report every bad row at once: a spot, strike or maturity that
/// is not a finite number `> 0`, a rate or dividend that is not finite, a value that is not
/// a finite number `> 0`, a weight that is not a finite number `>= 0`, and, for a vol fit
/// of prices, a price no volatility reaches (at or outside the no-arbitrage bounds).
pub fn quote_problems(quotes: &[HestonQuote], quoted: QuoteKind, target: Target) -> Vec<QuoteProblem> {
    let mut out = Vec::new();
    for (index, q) in quotes.iter().enumerate() {
        let c = &q.contract;
        let mut reasons = Vec::new();
        for (name, v) in [("spot", c.spot), ("strike", c.strike), ("maturity", c.maturity)] {
            if !v.is_finite() || v <= 0.0 {
                reasons.push(format!("{name} = {v}; it must be a finite number > 0"));
            }
        }
        for (name, v) in [("rate", c.rate), ("dividend", c.dividend)] {
            if !v.is_finite() {
                reasons.push(format!("{name} is {v}; it must be a finite number"));
            }
        }
        if !q.weight.is_finite() || q.weight < 0.0 {
            reasons.push(format!("weight = {}; it must be a finite number >= 0", q.weight));
        }
        let what = match quoted {
            QuoteKind::Price => "price",
            QuoteKind::Vol => "vol",
        };
        if !q.value.is_finite() || q.value <= 0.0 {
            reasons.push(format!("{what} = {}; it must be a finite number > 0", q.value));
        } else if reasons.is_empty() && target == Target::Vol && market(q, quoted).1.is_none() {
            reasons.push(format!(
                "price {} has no implied volatility (at or outside the no-arbitrage bounds), so it cannot be fitted in vol; drop it, fix it or fit prices (target price)",
                q.value
            ));
        }
        if !reasons.is_empty() {
            out.push(QuoteProblem {
                index,
                reason: reasons.join("; "),
            });
        }
    }
    out
}

/// Fits Heston's parameters to `quotes` from `start` (see the [module docs](super)). Errors
/// name the first bad quote ([`quote_problems`] lists them all) and how many more there
/// are, fewer than 5 quotes of positive weight, a bad start or bound, or a surface the
/// optimiser could not evaluate at its start.
pub fn calibrate_heston(
    quotes: &[HestonQuote],
    start: &HestonParams,
    opts: &CalibrationOptions,
) -> Result<HestonFit> {
    start.validate()?;
    opts.lower.validate()?;
    opts.upper.validate()?;
    let (lo, hi) = (to_vec(&opts.lower), to_vec(&opts.upper));
    if (0..NP).any(|i| lo[i] > hi[i]) {
        return Err(Error::invalid(
            OP,
            format!(
                "a lower bound exceeds its upper bound: {:?} vs {:?}",
                opts.lower, opts.upper
            ),
        ));
    }
    let problems = quote_problems(quotes, opts.quoted, opts.target);
    if let Some(first) = problems.first() {
        let more = match problems.len() {
            1 => String::new(),
            n => format!(" (and {} more quotes the fit cannot use)", n - 1),
        };
        return Err(Error::invalid(
            OP,
            format!("quote {}: {}{more}", first.index, first.reason),
        ));
    }
    let contracts: Vec<Contract> = quotes.iter().map(|q| q.contract).collect();
    let pricer = SurfacePricer::new(
        &contracts,
        Quadrature::new(opts.quad_upper, opts.quad_width, opts.quad_order)?,
    )?;
    let n = quotes.len();
    let (mut market_price, mut market_vol, mut market_vega, mut weight) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for q in quotes {
        let (price, vol) = market(q, opts.quoted);
        let v = vol.map_or(0.0, |s| vega(&q.contract, s));
        market_price.push(price);
        market_vol.push(vol);
        market_vega.push(if v > 0.0 { v } else { f64::MIN_POSITIVE.sqrt() });
        weight.push(q.weight);
    }
    let used = weight.iter().filter(|w| **w > 0.0).count();
    if used < NP {
        return Err(Error::invalid(
            OP,
            format!("{used} quotes of positive weight; at least 5 are needed for 5 parameters"),
        ));
    }
    let mut problem = Problem {
        pricer,
        contracts,
        market_price,
        market_vol,
        market_vega,
        weight,
        target: opts.target,
        prices: vec![0.0; n],
        grads: vec![[0.0; NP]; n],
    };
    let res = levenberg_marquardt(&mut problem, n, to_vec(start), lo, hi, &opts.lm)?;
    let params = from_vec(&res.p);
    let model = problem.pricer.prices(&params)?;
    let mut fits = Vec::with_capacity(n);
    let (mut sv, mut nv, mut sp) = (0.0, 0usize, 0.0);
    for (i, &model_price) in model.iter().enumerate() {
        let c = &problem.contracts[i];
        let mv = problem.market_vol[i];
        let sm = model_vol(c, model_price);
        let ve = match (sm, mv) {
            (Some(a), Some(b)) => Some(100.0 * (a - b)),
            _ => None,
        };
        if let Some(e) = ve {
            sv += e * e;
            nv += 1;
        }
        let pe = model_price - problem.market_price[i];
        sp += pe * pe;
        fits.push(QuoteFit {
            market_price: problem.market_price[i],
            model_price,
            price_error: pe,
            market_vol: mv,
            model_vol: sm,
            vol_error_points: ve,
            weight: problem.weight[i],
        });
    }
    Ok(HestonFit {
        params,
        start: *start,
        feller: params.feller(),
        rmse_vol_points: (nv > 0).then(|| (sv / nv as f64).sqrt()),
        vol_quotes: nv,
        rmse_price: (sp / n as f64).sqrt(),
        cost: res.cost,
        target: opts.target,
        iterations: res.iterations,
        evaluations: res.evaluations,
        stop: res.stop,
        quotes: fits,
    })
}

/// Convenience for callers with plain slices: the call/put flag of a quote.
pub fn option_type(is_call: bool) -> OptionType {
    if is_call {
        OptionType::Call
    } else {
        OptionType::Put
    }
}
