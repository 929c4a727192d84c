//! Basket options: a call or put on a weighted combination of `N` correlated assets under
//! geometric Brownian motion ([`BasketSpec`]), spreads and rainbows included, the closed
//! forms that exist ([`BasketSpec::price_analytic`]), the Cholesky factor of the
//! correlation matrix ([`cholesky`]) and the one-step Monte Carlo path both engines share
//! ([`mc`]).
//!
//! # Payoffs
//!
//! With weights `w_i`, `W = sum_i w_i` and terminal prices `S_i(T)`:
//!
//! ```text
//! arithmetic basket  A = sum_i w_i S_i(T)                any finite weights (a spread: w = (1, -1))
//! geometric basket   G = W * prod_i S_i(T)^(w_i / W)     weights > 0
//! rainbow, max       X = max_i w_i S_i(T)                weights > 0
//! rainbow, min       X = min_i w_i S_i(T)                weights > 0
//! call pays max(B - K, 0), put max(K - B, 0), B = A, G or X, at maturity T; any finite K
//! ```
//!
//! With positive weights `A = G = W S(T)` when every asset moves together (equal prices),
//! and `A >= G` always (the weighted AM-GM inequality). Each asset follows
//! `dS_i = (r - q_i) S_i dt + sigma_i S_i dW_i` with `d<W_i, W_j> = rho_ij dt`.
//!
//! # Closed forms ([`BasketSpec::price_analytic`])
//!
//! - geometric: Black's formula on the lognormal `G` (below);
//! - arithmetic, two assets with weights of opposite signs (a spread `w1 S1 - |w2| S2`):
//!   Bjerksund and Stensland's (2014) formula ([`super::spread`]; Kirk's approximation is
//!   [`BasketSpec::kirk_price`]);
//! - max or min of one or two assets: Stulz's formulas ([`super::rainbow`]).
//!
//! Other arithmetic baskets and rainbows on three or more assets are Monte Carlo's.
//!
//! # The geometric closed form
//!
//! `ln G = ln W + sum_i a_i ln S_i + mu + sqrt(v) Z` with `a_i = w_i / W`,
//! `mu = sum_i a_i (r - q_i - sigma_i^2 / 2) T`, `v = T sum_ij a_i a_j sigma_i sigma_j rho_ij`:
//! lognormal, so Black's formula with forward `F = W prod_i S_i^a_i e^(mu + v/2)` and total
//! variance `v` prices the call, `df (F N(d1) - K N(d2))`, and the put follows by parity,
//! `call - df (F - K)` (`df = e^(-rT)`; `v = 0` gives the discounted intrinsic value).
//!
//! # Limits
//!
//! At most [`MAX_ASSETS`] = 64 assets: the GPU kernel keeps one path's `N` normals in
//! registers and thread-local memory, and its per-path cost grows as `N^2 / 2` (the
//! correlation product `L z`). The CUDA kernel prices arithmetic and geometric baskets with
//! positive weights (its control is the geometric basket); spreads and rainbows run on the
//! CPU engine ([`BasketSpec::gpu_refusal`] says why). The correlation
//! matrix must be symmetric (to `1e-12`), have a unit diagonal, entries in `[-1, 1]` and be
//! positive semi-definite: [`cholesky`] accepts zero pivots (perfectly correlated assets)
//! and names the first negative one.

mod closed;
pub mod mc;

use crate::error::{Error, Result};
use crate::finance::{norm_cdf, OptionType};

pub use mc::{basket_sample, basket_words, finish_basket, BasketControl, BasketPathParams, BASKET_STREAM};

const OP: &str = "basket";

/// The most assets a basket may hold (see the module docs: the kernel's per-path storage).
pub const MAX_ASSETS: usize = 64;

/// A correlation matrix may be asymmetric by at most this much (`|rho_ij - rho_ji|`).
pub const SYMMETRY_TOLERANCE: f64 = 1e-12;

/// A Cholesky pivot within this of zero is taken as zero (perfectly correlated assets);
/// below `-ZERO_PIVOT` the matrix is not positive semi-definite.
pub const ZERO_PIVOT: f64 = 1e-10;

/// One asset of a basket.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BasketAsset {
    /// A name for messages (the basket file's `asset` column); `None`: its 1-based number.
    #[serde(default)]
    pub name: Option<String>,
    /// Price now, finite and `> 0`.
    pub spot: f64,
    /// Volatility per `sqrt(year)`, finite and `>= 0`.
    pub volatility: f64,
    /// Dividend yield, continuously compounded per year, finite (may be negative).
    pub dividend: f64,
    /// Weight in the basket, finite; `> 0` for geometric baskets and rainbows (a negative
    /// weight in an arithmetic basket makes a spread).
    pub weight: f64,
}

impl BasketAsset {
    /// An unnamed asset.
    pub fn new(spot: f64, volatility: f64, dividend: f64, weight: f64) -> Self {
        BasketAsset {
            name: None,
            spot,
            volatility,
            dividend,
            weight,
        }
    }

    /// The same asset with a name.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// What the option pays on (see the module docs): an average of the assets, or the
/// largest or smallest of them (a rainbow).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BasketAverage {
    /// `A = sum_i w_i S_i(T)`: no closed form, Monte Carlo only.
    Arithmetic,
    /// `G = W prod_i S_i(T)^(w_i / W)`: lognormal, priced in closed form.
    Geometric,
    /// `max_i w_i S_i(T)`: a rainbow; Stulz's closed form for two assets.
    Max,
    /// `min_i w_i S_i(T)`: a rainbow; Stulz's closed form for two assets.
    Min,
}

impl BasketAverage {
    /// `arithmetic`, `geometric`, `max` or `min`.
    pub fn name(self) -> &'static str {
        match self {
            BasketAverage::Arithmetic => "arithmetic",
            BasketAverage::Geometric => "geometric",
            BasketAverage::Max => "max",
            BasketAverage::Min => "min",
        }
    }

    /// Max or min: the payoff needs every weight `> 0`, as does the geometric average.
    fn needs_positive_weights(self) -> bool {
        self != BasketAverage::Arithmetic
    }
}

impl std::str::FromStr for BasketAverage {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "arithmetic" => Ok(BasketAverage::Arithmetic),
            "geometric" => Ok(BasketAverage::Geometric),
            "max" => Ok(BasketAverage::Max),
            "min" => Ok(BasketAverage::Min),
            _ => Err(Error::invalid(
                OP,
                format!("unknown average `{s}`; use arithmetic, geometric, max or min"),
            )),
        }
    }
}

/// A European call or put on a basket of assets.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BasketSpec {
    /// Call or put.
    pub kind: OptionType,
    /// Strike, finite (any sign: a spread's may be 0 or negative), against the basket
    /// value (weights included).
    pub strike: f64,
    /// Risk-free rate, continuously compounded per year, finite.
    pub rate: f64,
    /// Time to maturity in years, finite and `> 0`.
    pub maturity: f64,
    /// Arithmetic, geometric, max or min.
    pub average: BasketAverage,
    /// The assets, `1..=MAX_ASSETS` of them.
    pub assets: Vec<BasketAsset>,
    /// The `N x N` correlation matrix, row-major, in the assets' order.
    pub correlation: Vec<f64>,
}

/// How messages name asset `i` (0-based): "asset `NAME`" or "asset 3".
fn asset_label(assets: &[BasketAsset], i: usize) -> String {
    match assets.get(i).and_then(|a| a.name.as_deref()) {
        Some(n) => format!("asset `{n}`"),
        None => format!("asset {}", i + 1),
    }
}

/// Checks the assets and the correlation matrix (everything but positive
/// semi-definiteness, which [`cholesky`] finds, and the weights' signs, which depend on the
/// payoff: [`BasketSpec::validate`]); the error names the asset and field.
pub fn validate_assets(assets: &[BasketAsset], correlation: &[f64]) -> Result<()> {
    let bad = |reason: String| Err(Error::invalid(OP, reason));
    let n = assets.len();
    if n == 0 || n > MAX_ASSETS {
        return bad(format!(
            "{n} assets; a basket holds 1 to {MAX_ASSETS} (the GPU kernel keeps one path's normals in registers)"
        ));
    }
    for (i, a) in assets.iter().enumerate() {
        let who = asset_label(assets, i);
        for (field, v) in [
            ("spot", a.spot),
            ("volatility", a.volatility),
            ("dividend", a.dividend),
            ("weight", a.weight),
        ] {
            if !v.is_finite() {
                return bad(format!("{who}: {field} is {v}; it must be a finite number"));
            }
        }
        if a.spot <= 0.0 {
            return bad(format!("{who}: spot = {}; it must be > 0", a.spot));
        }
        if a.volatility < 0.0 {
            return bad(format!(
                "{who}: volatility = {}; it must be >= 0 (per sqrt(year), e.g. 0.2 for 20%)",
                a.volatility
            ));
        }
    }
    if correlation.len() != n * n {
        return bad(format!(
            "the correlation matrix has {} entries; {n} assets need {n} x {n} = {}",
            correlation.len(),
            n * n
        ));
    }
    for i in 0..n {
        for j in 0..n {
            let c = correlation[i * n + j];
            let (wi, wj) = (asset_label(assets, i), asset_label(assets, j));
            if !c.is_finite() || !(-1.0..=1.0).contains(&c) {
                return bad(format!(
                    "correlation of {wi} and {wj} is {c}; it must be in [-1, 1]"
                ));
            }
            if i == j && c != 1.0 {
                return bad(format!(
                    "correlation of {wi} with itself is {c}; the diagonal must be 1"
                ));
            }
            let t = correlation[j * n + i];
            if j > i && (c - t).abs() > SYMMETRY_TOLERANCE {
                return bad(format!(
                    "the correlation matrix is not symmetric: {wi} with {wj} is {c}, {wj} with {wi} is {t}"
                ));
            }
        }
    }
    Ok(())
}

/// The lower-triangular Cholesky factor `L` (row-major `n x n`, `L L^T = corr`) of a
/// correlation matrix, in f64. Zero pivots (within [`ZERO_PIVOT`]: perfectly correlated
/// assets) give zero columns; a negative pivot, or a zero pivot whose column is not zero,
/// is an error naming it (1-based): "correlation matrix is not positive definite: pivot 3
/// is -0.02".
pub fn cholesky(corr: &[f64], n: usize) -> Result<Vec<f64>> {
    cholesky_named(corr, n, &[])
}

/// [`cholesky`] whose errors name the assets.
pub fn cholesky_named(corr: &[f64], n: usize, assets: &[BasketAsset]) -> Result<Vec<f64>> {
    if corr.len() != n * n {
        return Err(Error::invalid(
            OP,
            format!("the correlation matrix has {} entries, not {n} x {n}", corr.len()),
        ));
    }
    let label = |i: usize| match assets.get(i).and_then(|a| a.name.as_deref()) {
        Some(name) => format!("pivot {} (asset `{name}`)", i + 1),
        None => format!("pivot {}", i + 1),
    };
    let mut l = vec![0.0f64; n * n];
    for i in 0..n {
        let mut d = corr[i * n + i];
        for k in 0..i {
            d -= l[i * n + k] * l[i * n + k];
        }
        if d < -ZERO_PIVOT || d.is_nan() {
            return Err(Error::invalid(
                OP,
                format!(
                    "correlation matrix is not positive definite: {} is {d:.6} (no set of assets can have these correlations)",
                    label(i)
                ),
            ));
        }
        let zero = d <= ZERO_PIVOT;
        let lii = if zero { 0.0 } else { d.sqrt() };
        l[i * n + i] = lii;
        for j in i + 1..n {
            let mut m = corr[j * n + i];
            for k in 0..i {
                m -= l[j * n + k] * l[i * n + k];
            }
            if zero {
                // A zero pivot is consistent only if the column below it is zero too.
                if m.abs() > ZERO_PIVOT.sqrt() {
                    return Err(Error::invalid(
                        OP,
                        format!(
                            "correlation matrix is not positive definite: {} is 0 (perfectly correlated with earlier assets) but {} still has {m:.6} left to explain there",
                            label(i),
                            label(j).replacen("pivot", "row", 1)
                        ),
                    ));
                }
            } else {
                l[j * n + i] = m / lii;
            }
        }
    }
    Ok(l)
}

/// The geometric basket's lognormal moments: `(F, v)`, the forward `E[G]` and the total
/// variance of `ln G` (module docs). Inputs as [`validate_assets`] accepts.
pub fn geometric_moments(
    assets: &[BasketAsset],
    correlation: &[f64],
    rate: f64,
    maturity: f64,
) -> (f64, f64) {
    let n = assets.len();
    let w: f64 = assets.iter().map(|a| a.weight).sum();
    let (mut log_g0, mut mu, mut v) = (w.ln(), 0.0, 0.0);
    for (i, ai) in assets.iter().enumerate() {
        let a = ai.weight / w;
        log_g0 += a * ai.spot.ln();
        mu += a * (rate - ai.dividend - 0.5 * ai.volatility * ai.volatility) * maturity;
        for (j, aj) in assets.iter().enumerate() {
            v += a * (aj.weight / w) * ai.volatility * aj.volatility * correlation[i * n + j];
        }
    }
    let v = (v * maturity).max(0.0);
    ((log_g0 + mu + 0.5 * v).exp(), v)
}

/// The closed-form price of a geometric basket option (module docs): Black's formula on
/// `G`, the put by parity. Validates the assets (every weight `> 0`) and the matrix
/// (including positive semi-definiteness).
pub fn geometric_basket(
    kind: OptionType,
    strike: f64,
    rate: f64,
    maturity: f64,
    assets: &[BasketAsset],
    correlation: &[f64],
) -> Result<f64> {
    validate_assets(assets, correlation)?;
    check_weights(assets, BasketAverage::Geometric)?;
    cholesky_named(correlation, assets.len(), assets)?;
    check_contract(strike, rate, maturity)?;
    let (f, v) = geometric_moments(assets, correlation, rate, maturity);
    Ok(black(kind, f, strike, v, (-rate * maturity).exp()))
}

/// Black's formula: forward `f > 0`, strike `k`, total variance `v`, discount factor `df`;
/// the put by parity. With a strike `k <= 0` the call is a forward (a positive underlying
/// always finishes above it) and the put is worthless.
fn black(kind: OptionType, f: f64, k: f64, v: f64, df: f64) -> f64 {
    let call = if k <= 0.0 {
        df * (f - k)
    } else if v <= 0.0 {
        df * (f - k).max(0.0)
    } else {
        let sv = v.sqrt();
        let d1 = ((f / k).ln() + 0.5 * v) / sv;
        df * (f * norm_cdf(d1) - k * norm_cdf(d1 - sv))
    };
    match kind {
        OptionType::Call => call,
        // parity; an out-of-the-money put can round to a hair below 0
        OptionType::Put => (call - df * (f - k)).max(0.0),
    }
}

fn check_contract(strike: f64, rate: f64, maturity: f64) -> Result<()> {
    let bad = |reason: String| Err(Error::invalid(OP, reason));
    for (name, v) in [("strike", strike), ("rate", rate), ("maturity", maturity)] {
        if !v.is_finite() {
            return bad(format!("{name} is {v}; it must be a finite number"));
        }
    }
    if maturity <= 0.0 {
        return bad(format!("maturity = {maturity}; it must be > 0 (in years)"));
    }
    Ok(())
}

/// Every weight `> 0` where `average` needs it (geometric, max, min); the error names the
/// asset and the field.
fn check_weights(assets: &[BasketAsset], average: BasketAverage) -> Result<()> {
    if !average.needs_positive_weights() {
        return Ok(());
    }
    match assets.iter().position(|a| a.weight <= 0.0) {
        Some(i) => Err(Error::invalid(
            OP,
            format!(
                "{}: weight = {}; average {} needs every weight > 0 (negative weights make a spread: use average arithmetic)",
                asset_label(assets, i),
                assets[i].weight,
                average.name()
            ),
        )),
        None => Ok(()),
    }
}

impl BasketSpec {
    /// Checks every field (the contract, the assets, the weights' signs for the payoff, the
    /// matrix's shape, symmetry, diagonal and range); the error names the field and what is
    /// accepted. Positive semi-definiteness is [`cholesky`]'s ([`factor`](Self::factor)).
    pub fn validate(&self) -> Result<()> {
        check_contract(self.strike, self.rate, self.maturity)?;
        validate_assets(&self.assets, &self.correlation)?;
        check_weights(&self.assets, self.average)
    }

    /// Validates the spec and returns the Cholesky factor of its correlation matrix (errors
    /// name the assets).
    pub fn factor(&self) -> Result<Vec<f64>> {
        self.validate()?;
        cholesky_named(&self.correlation, self.assets.len(), &self.assets)
    }

    /// `W`, the sum of the weights.
    pub fn total_weight(&self) -> f64 {
        self.assets.iter().map(|a| a.weight).sum()
    }

    /// The geometric basket option with this spec's contract and assets, in closed form
    /// (whatever `self.average` is: the Monte Carlo control variate of baskets with
    /// positive weights). An error if a weight is not `> 0`.
    pub fn geometric_price(&self) -> Result<f64> {
        geometric_basket(
            self.kind,
            self.strike,
            self.rate,
            self.maturity,
            &self.assets,
            &self.correlation,
        )
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod payoff_tests;
