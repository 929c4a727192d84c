//! Monte Carlo Greeks for every kind of a mixed book ([`Runtime::mc_greeks`]): delta, gamma
//! and vega per asset, rho and theta, each with its standard error, bitwise the same on the
//! CPU and the GPU runtime.
//!
//! # Estimator: bump and revalue with common random numbers
//!
//! Every Greek of every kind is a finite difference of Monte Carlo values of bumped copies
//! of the option, each copy priced on the option's own stream (common random numbers: the
//! base and every copy see the same normals, so the difference carries only the noise of
//! the payoff's response to the bump, not of two independent runs). One estimator serves
//! every kind: the Black-Scholes styles (European, Asian, continuous and discrete barriers),
//! Heston, baskets, spreads and rainbows, and Americans (American rainbows per asset, as
//! baskets), where a pathwise formula exists for
//! a few styles only and none for barriers, Heston's variance process or Longstaff-Schwartz.
//! For an asset `i` of spot `S_i` and volatility `s_i` (one asset for single-asset kinds):
//!
//! | Greek | copies | formula | step |
//! | --- | --- | --- | --- |
//! | delta_i | `S_i ± h` | `(V+ − V−) / 2h` | `h = spot_bump · S_i` |
//! | gamma_i | `S_i ± h`, base | `(V+ − 2 V0 + V−) / h²` | the same `h` |
//! | vega_i | `s_i ± k` | `(V+ − V−) / 2k` | `k = vol_bump · s_i` |
//! | rho | `r ± e` | `(V+ − V−) / 2e` | `e = rate_bump` |
//! | theta | `T − d` | `(V(T − d) − V0) / d` | `d = min(time_bump, T / 2)` |
//! | cross gamma_ij (`i < j`, with `cross_gamma`) | `(S_i + h_i, S_j + h_j)`, `(S_i − h_i, S_j − h_j)` | `(V++ − V+i − V+j + 2 V0 − V−i − V−j + V−−) / (2 h_i h_j)` | the spot steps |
//!
//! Heston's vega is `dV/dv0` (the bump `k = vol_bump · v0` moves the initial variance).
//! Theta is `−dV/dT` per year of calendar time, as the closed forms report it: the contract
//! shortened by `d` with its dates (Asian fixings, monitoring and exercise dates) as
//! fractions of the maturity, their count unchanged. Gamma is the diagonal `d²V/dS_i²`;
//! the cross gammas `d²V/dS_i dS_j` of a basket (spread, rainbow) come with
//! [`GreeksParams::cross_gamma`]: two copies a pair of assets, both spots moved together up
//! and down, differenced against the single-asset copies the deltas already price (the
//! seven-point formula above: the Taylor terms in `h_i²` and `h_j²` cancel against the
//! diagonal copies, leaving `d²V/dS_i dS_j + O(h²)`), on the option's stream like every copy.
//!
//! Step sizes (Glasserman, *Monte Carlo Methods in Financial Engineering*, ch. 7). A central
//! difference's bias is `O(h²)`; with common random numbers and a payoff continuous in the
//! parameter its variance stays bounded as `h → 0` (delta, vega, rho), and for gamma of a
//! payoff with a kink it grows like `1/h`. A 1% relative bump of spot and volatility, 10 bp
//! of rate and one day of maturity keep the bias orders of magnitude under the standard
//! error at any usual path count while gamma stays usable. Payoffs with a jump (discretely
//! monitored barriers: a path on either side of the barrier at a date) make every
//! difference's variance grow like `1/h` and gamma's like `1/h³`: the estimates stay
//! unbiased to `O(h²)` and their standard errors say how noisy they are; a larger
//! `spot_bump` (e.g. 5%) trades a little bias for a much smaller gamma error there. The
//! continuous barrier's Brownian-bridge weight is smooth in spot, so its Greeks behave like
//! a vanilla's except for paths whose simulated dates cross the barrier.
//!
//! American options: every copy is a full Longstaff-Schwartz run, so the exercise boundary
//! is re-estimated for each bumped copy on the same paths (the standard practice); the
//! Greeks carry the in-sample estimator's small low bias of the price's slope.
//!
//! # Standard errors: independent batches
//!
//! The run of `paths` paths is cut into `batches` independent sub-runs of
//! `ceil(paths / batches)` paths, each with its own key (batch `j`'s seed is the run's seed
//! plus `(j + 1)` times the 64-bit golden ratio; a bijection of `j`, so every batch draws
//! other Philox words and other Sobol shifts). Within a batch the base and every copy share
//! the option's stream; each batch gives one estimate of each Greek, the Greek is their
//! mean and its standard error their standard deviation over `sqrt(batches)` (batch means:
//! honest for any payoff, whatever the correlation of base and copies). A Sobol run's batches
//! are randomised QMC runs of two replicates each (the engines need at least two), the same
//! estimator over independent randomisations. The batches go to the engines through
//! [`Runtime::price_book_streams`], one engine invocation per batch for every option's copies together
//! (a few launches of each kind on a GPU), so no new kernel is needed: the engines give the
//! same bits for the same stream on either device, and so do the Greeks, computed from them
//! on the host by this module.
//!
//! The Greeks use the plain estimator: the control variate is off in every batch (each
//! copy's own coefficient would add a bias of order `1/paths` that does not cancel in the
//! difference). Antithetic pairs and `fast_math` are the run's (`fast_math` gives up the
//! CPU-GPU bit equality, as for prices).
//!
//! Cost: `4 n + 4` valuations an option of `n` assets (8 for a single-asset kind), each of
//! the run's paths in total: about `4 n + 4` times the price's cost; cross gammas add
//! `n (n − 1)`.

use kiln_core::finance::{McParams, PriceResult, Rng};
use kiln_core::{Error, Result};

use super::BookOption;
use crate::Runtime;

const OP: &str = "mc_greeks";

/// The 64-bit golden ratio: batch `j`'s seed is the run's plus `(j + 1)` times this.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// Copies a batch's engine call holds at most (copies of one option are never split):
/// the size of a batch of [`Runtime::risk`]'s shocked copies.
const MAX_COPIES: usize = 1 << 16;

/// How [`Runtime::mc_greeks`] bumps and batches (module docs).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GreeksParams {
    /// Independent sub-runs the paths are split into, `2..=4096`: the standard errors'
    /// degrees of freedom plus one.
    pub batches: u32,
    /// Spot bump relative to each asset's spot, in `(0, 0.5]`.
    pub spot_bump: f64,
    /// Volatility bump relative to each asset's volatility (Heston: to `v0`), in `(0, 0.5]`.
    pub vol_bump: f64,
    /// Rate bump, absolute, in `(0, 0.1]`.
    pub rate_bump: f64,
    /// Theta's shortening of the maturity in years, `> 0` (at most half the maturity is
    /// used).
    pub time_bump: f64,
    /// Whether to estimate the cross gammas `d²V/dS_i dS_j` of options of several assets
    /// ([`McGreeks::cross_gamma`]; `n (n − 1)` more valuations an option of `n` assets).
    #[serde(default)]
    pub cross_gamma: bool,
}

impl Default for GreeksParams {
    fn default() -> Self {
        GreeksParams {
            batches: 32,
            spot_bump: 0.01,
            vol_bump: 0.01,
            rate_bump: 1e-3,
            time_bump: 1.0 / 365.0,
            cross_gamma: false,
        }
    }
}

impl GreeksParams {
    /// Checks every field; the error names it and the accepted range.
    pub fn validate(&self) -> Result<()> {
        if !(2..=4096).contains(&self.batches) {
            return Err(Error::invalid(
                OP,
                format!("batches = {}; it must be 2 to 4096", self.batches),
            ));
        }
        for (name, v, hi) in [
            ("spot_bump", self.spot_bump, 0.5),
            ("vol_bump", self.vol_bump, 0.5),
            ("rate_bump", self.rate_bump, 0.1),
            ("time_bump", self.time_bump, f64::MAX),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= hi) {
                return Err(Error::invalid(
                    OP,
                    format!("{name} = {v}; it must be a finite number > 0 and <= {hi}"),
                ));
            }
        }
        Ok(())
    }

    /// Batch `j`'s run (module docs): its share of the paths, its own seed, the plain
    /// estimator, two replicates of Sobol points.
    pub fn batch_run(&self, mc: &McParams, j: u32) -> McParams {
        McParams {
            paths: mc.paths.div_ceil(u64::from(self.batches)).max(2),
            seed: mc
                .seed
                .wrapping_add(u64::from(j).wrapping_add(1).wrapping_mul(GOLDEN)),
            control_variate: false,
            rng: match mc.rng {
                Rng::Philox => Rng::Philox,
                Rng::Sobol { .. } => Rng::Sobol { replicates: 2 },
            },
            ..*mc
        }
    }
}

/// A Monte Carlo estimate and its standard error.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// The estimate (the mean of the batches').
    pub value: f64,
    /// Its standard error (the batches' standard deviation over `sqrt(batches)`).
    pub std_error: f64,
}

impl Estimate {
    /// The mean of `xs` and its standard error.
    fn of(xs: &[f64]) -> Estimate {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
        Estimate {
            value: mean,
            std_error: (ss / (n * (n - 1.0))).sqrt(),
        }
    }
}

/// One option's Monte Carlo Greeks (module docs for each one's definition).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct McGreeks {
    /// The base value (the mean of the batches' base values, plain estimator).
    pub price: Estimate,
    /// `dV/dS_i`, one per asset (one for single-asset kinds).
    pub delta: Vec<Estimate>,
    /// `d²V/dS_i²`, one per asset.
    pub gamma: Vec<Estimate>,
    /// `dV/ds_i` per asset; Heston: one, `dV/dv0`.
    pub vega: Vec<Estimate>,
    /// `dV/dr`.
    pub rho: Estimate,
    /// `−dV/dT` per year.
    pub theta: Estimate,
    /// With [`GreeksParams::cross_gamma`]: `d²V/dS_i dS_j` for every pair `i < j` of
    /// assets, in the order `(0, 1), (0, 2), .., (0, n−1), (1, 2), ..` (see
    /// [`cross_gamma_at`](Self::cross_gamma_at)); empty otherwise and for one asset.
    pub cross_gamma: Vec<Estimate>,
    /// Paths simulated for each valuation (base or copy), over every batch.
    pub paths_used: u64,
    /// The batches the standard errors come from.
    pub batches: u32,
}

impl McGreeks {
    /// `d²V/dS_i dS_j` (`i != j`, either order; `i == j` is `gamma[i]`), or None where the
    /// cross gammas were not estimated or an index is past the assets.
    pub fn cross_gamma_at(&self, i: usize, j: usize) -> Option<Estimate> {
        let n = self.gamma.len();
        if i >= n || j >= n {
            return None;
        }
        if i == j {
            return Some(self.gamma[i]);
        }
        let (a, b) = (i.min(j), i.max(j));
        self.cross_gamma.get(pair_index(n, a, b)).copied()
    }

    /// The symmetric `n x n` matrices (rows) of `d²V/dS_i dS_j`, the diagonal the gammas:
    /// values and standard errors, or None where an option of several assets had its cross
    /// gammas not estimated.
    pub fn cross_gamma_matrix(&self) -> Option<(Matrix, Matrix)> {
        let n = self.gamma.len();
        let mut values = vec![vec![0.0; n]; n];
        let mut errors = vec![vec![0.0; n]; n];
        for i in 0..n {
            for j in 0..n {
                let e = self.cross_gamma_at(i, j)?;
                values[i][j] = e.value;
                errors[i][j] = e.std_error;
            }
        }
        Some((values, errors))
    }
}

/// An `n x n` matrix as rows.
pub type Matrix = Vec<Vec<f64>>;

/// The position of the pair `(a, b)`, `a < b < n`, in the row-major upper triangle.
fn pair_index(n: usize, a: usize, b: usize) -> usize {
    a * (2 * n - a - 1) / 2 + (b - a - 1)
}

/// Where the copies of one option put their bumps, and the step of each.
#[derive(Clone, Debug, PartialEq)]
struct Bumps {
    /// Assets.
    n: usize,
    /// Absolute spot step of each asset.
    spot: Vec<f64>,
    /// Absolute volatility (Heston: `v0`) step of each asset.
    vol: Vec<f64>,
    /// Rate step.
    rate: f64,
    /// Maturity step.
    time: f64,
    /// Whether the cross-gamma copies follow.
    cross: bool,
}

impl Bumps {
    /// Copies: base, `S_i ± h` pairs, `s_i ± k` pairs, `r ± e`, `T − d`, and with `cross`
    /// a `(S_i + h_i, S_j + h_j)`, `(S_i − h_i, S_j − h_j)` pair for each `i < j`.
    fn copies(&self) -> usize {
        4 * self.n + 4 + self.cross_pairs() * 2
    }

    /// The cross gammas estimated: every pair of assets, or none.
    fn cross_pairs(&self) -> usize {
        if self.cross {
            self.n * self.n.saturating_sub(1) / 2
        } else {
            0
        }
    }

    /// The estimates of one batch: price, delta, gamma, vega per asset, rho, theta and the
    /// cross gammas.
    fn greeks(&self) -> usize {
        3 * self.n + 3 + self.cross_pairs()
    }
}

/// What a bump moves.
#[derive(Clone, Copy)]
enum Move {
    Spot(usize, f64),
    Vol(usize, f64),
    Rate(f64),
    Time(f64),
}

/// `o` with one parameter moved by `m` (an absolute change).
fn moved(o: &BookOption, m: Move) -> BookOption {
    let mut o = o.clone();
    match (&mut o, m) {
        (BookOption::Plain(s), Move::Spot(_, d)) => s.spot += d,
        (BookOption::Plain(s), Move::Vol(_, d)) => s.volatility += d,
        (BookOption::Plain(s), Move::Rate(d)) => s.rate += d,
        (BookOption::Plain(s), Move::Time(d)) => s.maturity += d,
        (BookOption::Heston(h), Move::Spot(_, d)) => h.option.spot += d,
        (BookOption::Heston(h), Move::Vol(_, d)) => h.heston.v0 += d,
        (BookOption::Heston(h), Move::Rate(d)) => h.option.rate += d,
        (BookOption::Heston(h), Move::Time(d)) => h.option.maturity += d,
        (BookOption::American { spec, .. }, Move::Spot(_, d)) => spec.spot += d,
        (BookOption::American { spec, .. }, Move::Vol(_, d)) => spec.volatility += d,
        (BookOption::American { spec, .. }, Move::Rate(d)) => spec.rate += d,
        (BookOption::American { spec, .. }, Move::Time(d)) => spec.maturity += d,
        (BookOption::AmericanBarrier { spec, .. }, Move::Spot(_, d)) => spec.option.spot += d,
        (BookOption::AmericanBarrier { spec, .. }, Move::Vol(_, d)) => spec.option.volatility += d,
        (BookOption::AmericanBarrier { spec, .. }, Move::Rate(d)) => spec.option.rate += d,
        (BookOption::AmericanBarrier { spec, .. }, Move::Time(d)) => spec.option.maturity += d,
        (BookOption::Basket(b), Move::Spot(i, d)) => b.assets[i].spot += d,
        (BookOption::Basket(b), Move::Vol(i, d)) => b.assets[i].volatility += d,
        (BookOption::Basket(b), Move::Rate(d)) => b.rate += d,
        (BookOption::Basket(b), Move::Time(d)) => b.maturity += d,
        (BookOption::AmericanRainbow(r), Move::Spot(i, d)) => r.assets[i].spot += d,
        (BookOption::AmericanRainbow(r), Move::Vol(i, d)) => r.assets[i].volatility += d,
        (BookOption::AmericanRainbow(r), Move::Rate(d)) => r.rate += d,
        (BookOption::AmericanRainbow(r), Move::Time(d)) => r.maturity += d,
    }
    o
}

/// The bumps of `o` under `p`: each asset's spot and volatility (Heston: `v0`), the rate and
/// the maturity. An error where a step would be 0 (a zero volatility: nothing to bump) or
/// the option is invalid.
fn bumps(o: &BookOption, p: &GreeksParams) -> Result<Bumps> {
    // the rate is any finite number: its bump moves it either way
    let (spots, vols, t): (Vec<f64>, Vec<f64>, f64) = match o {
        BookOption::Plain(s) => {
            s.validate()?;
            (vec![s.spot], vec![s.volatility], s.maturity)
        }
        BookOption::Heston(h) => {
            h.validate()?;
            (vec![h.option.spot], vec![h.heston.v0], h.option.maturity)
        }
        BookOption::American { spec, .. } => {
            spec.validate()?;
            (vec![spec.spot], vec![spec.volatility], spec.maturity)
        }
        BookOption::AmericanBarrier { spec, .. } => {
            spec.validate()?;
            let o = &spec.option;
            (vec![o.spot], vec![o.volatility], o.maturity)
        }
        BookOption::Basket(b) => {
            b.validate()?;
            (
                b.assets.iter().map(|a| a.spot).collect(),
                b.assets.iter().map(|a| a.volatility).collect(),
                b.maturity,
            )
        }
        BookOption::AmericanRainbow(r) => {
            r.validate()?;
            (
                r.assets.iter().map(|a| a.spot).collect(),
                r.assets.iter().map(|a| a.volatility).collect(),
                r.maturity,
            )
        }
    };
    for (i, (&s, &v)) in spots.iter().zip(&vols).enumerate() {
        if s <= 0.0 || v <= 0.0 {
            return Err(Error::invalid(
                OP,
                format!(
                    "asset {}: spot {s}, volatility (Heston: v0) {v}; Greeks need both > 0 to bump them",
                    i + 1
                ),
            ));
        }
    }
    Ok(Bumps {
        n: spots.len(),
        spot: spots.iter().map(|s| p.spot_bump * s).collect(),
        vol: vols.iter().map(|v| p.vol_bump * v).collect(),
        rate: p.rate_bump,
        time: p.time_bump.min(0.5 * t),
        cross: p.cross_gamma,
    })
}

/// The copies of `o` in the order [`greeks_of_batch`] reads them.
fn copies_of(o: &BookOption, b: &Bumps) -> Vec<BookOption> {
    let mut v = Vec::with_capacity(b.copies());
    v.push(o.clone());
    for i in 0..b.n {
        v.push(moved(o, Move::Spot(i, b.spot[i])));
        v.push(moved(o, Move::Spot(i, -b.spot[i])));
    }
    for i in 0..b.n {
        v.push(moved(o, Move::Vol(i, b.vol[i])));
        v.push(moved(o, Move::Vol(i, -b.vol[i])));
    }
    v.push(moved(o, Move::Rate(b.rate)));
    v.push(moved(o, Move::Rate(-b.rate)));
    v.push(moved(o, Move::Time(-b.time)));
    if b.cross {
        for i in 0..b.n {
            for j in i + 1..b.n {
                for sign in [1.0, -1.0] {
                    let up = moved(o, Move::Spot(i, sign * b.spot[i]));
                    v.push(moved(&up, Move::Spot(j, sign * b.spot[j])));
                }
            }
        }
    }
    v
}

/// One batch's values of every Greek from its copies' prices `v` ([`copies_of`]' order):
/// `[price, delta_i.., gamma_i.., vega_i.., rho, theta, cross gamma_ij..]`.
fn greeks_of_batch(v: &[f64], b: &Bumps) -> Vec<f64> {
    let n = b.n;
    let base = v[0];
    let mut g = Vec::with_capacity(3 * n + 3);
    g.push(base);
    for i in 0..n {
        g.push((v[1 + 2 * i] - v[2 + 2 * i]) / (2.0 * b.spot[i]));
    }
    for i in 0..n {
        let h = b.spot[i];
        g.push((v[1 + 2 * i] - 2.0 * base + v[2 + 2 * i]) / (h * h));
    }
    let vol0 = 1 + 2 * n;
    for i in 0..n {
        g.push((v[vol0 + 2 * i] - v[vol0 + 1 + 2 * i]) / (2.0 * b.vol[i]));
    }
    let r0 = 1 + 4 * n;
    g.push((v[r0] - v[r0 + 1]) / (2.0 * b.rate));
    g.push((v[r0 + 2] - base) / b.time);
    if b.cross {
        let mut at = r0 + 3;
        for i in 0..n {
            for j in i + 1..n {
                let (up, dn) = (v[at], v[at + 1]);
                at += 2;
                let singles = v[1 + 2 * i] + v[2 + 2 * i] + v[1 + 2 * j] + v[2 + 2 * j];
                g.push((up + dn - singles + 2.0 * base) / (2.0 * b.spot[i] * b.spot[j]));
            }
        }
    }
    g
}

/// One option's state while its batches come in.
struct Acc {
    bumps: Bumps,
    /// Per Greek (the order of [`greeks_of_batch`]), each batch's value.
    per_batch: Vec<Vec<f64>>,
    paths: u64,
}

impl Runtime {
    /// Monte Carlo Greeks of every option of `book` with the run `mc` and the bumps and
    /// batches of `p` (module docs): option `i` on stream index `first_option + i`, as
    /// [`price_book`](Self::price_book) prices it. One result per option, an invalid option
    /// (or one whose bumped copy is invalid) an error in its slot; the outer error is an
    /// invalid `p` or a book past the stream indices.
    pub fn mc_greeks(
        &self,
        book: &[BookOption],
        mc: &McParams,
        p: &GreeksParams,
        first_option: u32,
    ) -> Result<Vec<Result<McGreeks>>> {
        p.validate()?;
        let _range = crate::profiler().host_range("mc greeks");
        let last = u64::from(first_option) + book.len() as u64;
        if last > u64::from(u32::MAX) + 1 {
            return Err(Error::invalid(
                OP,
                format!(
                    "{} options from stream index {first_option} pass 2^32",
                    book.len()
                ),
            ));
        }
        let mut accs: Vec<Result<Acc>> = book
            .iter()
            .map(|o| {
                bumps(o, p).map(|bumps| Acc {
                    per_batch: vec![Vec::with_capacity(p.batches as usize); bumps.greeks()],
                    bumps,
                    paths: 0,
                })
            })
            .collect();
        // options in groups whose copies fit one engine call
        let mut start = 0;
        while start < book.len() {
            let mut end = start;
            let mut copies = 0;
            while end < book.len() {
                let c = accs[end].as_ref().map_or(0, |a| a.bumps.copies());
                if copies > 0 && copies + c > MAX_COPIES {
                    break;
                }
                copies += c;
                end += 1;
            }
            self.greeks_group(book, mc, p, first_option, start..end, &mut accs)?;
            start = end;
        }
        Ok(accs
            .into_iter()
            .map(|a| {
                a.map(|a| {
                    let est: Vec<Estimate> = a.per_batch.iter().map(|x| Estimate::of(x)).collect();
                    let n = a.bumps.n;
                    McGreeks {
                        price: est[0],
                        delta: est[1..1 + n].to_vec(),
                        gamma: est[1 + n..1 + 2 * n].to_vec(),
                        vega: est[1 + 2 * n..1 + 3 * n].to_vec(),
                        rho: est[1 + 3 * n],
                        theta: est[2 + 3 * n],
                        cross_gamma: est[3 + 3 * n..].to_vec(),
                        paths_used: a.paths,
                        batches: p.batches,
                    }
                })
            })
            .collect())
    }

    /// Every batch of the options `group`: one [`price_book_streams`] invocation per batch holding
    /// every copy of every option still valid, each on its option's stream.
    ///
    /// [`price_book_streams`]: Runtime::price_book_streams
    fn greeks_group(
        &self,
        book: &[BookOption],
        mc: &McParams,
        p: &GreeksParams,
        first_option: u32,
        group: std::ops::Range<usize>,
        accs: &mut [Result<Acc>],
    ) -> Result<()> {
        let mut copies: Vec<BookOption> = Vec::new();
        let mut streams: Vec<u32> = Vec::new();
        let mut spans: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        for i in group {
            if let Ok(a) = &accs[i] {
                let c = copies_of(&book[i], &a.bumps);
                let at = copies.len();
                streams.extend(std::iter::repeat_n(first_option + i as u32, c.len()));
                copies.extend(c);
                spans.push((i, at..copies.len()));
            }
        }
        if copies.is_empty() {
            return Ok(());
        }
        for j in 0..p.batches {
            let run = p.batch_run(mc, j);
            let mut priced = self.price_book_streams(&copies, &run, &streams)?.into_iter();
            for (i, span) in &spans {
                // every copy's result taken before any error ends the collect
                let vals: Vec<Result<PriceResult>> = (&mut priced).take(span.len()).collect();
                let vals: Result<Vec<PriceResult>> = vals.into_iter().collect();
                let Ok(acc) = &mut accs[*i] else { continue };
                match vals {
                    Err(e) => accs[*i] = Err(e),
                    Ok(v) => {
                        acc.paths += v[0].paths_used;
                        let prices: Vec<f64> = v.iter().map(|r| r.price).collect();
                        for (k, g) in greeks_of_batch(&prices, &acc.bumps).into_iter().enumerate() {
                            acc.per_batch[k].push(g);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "greeks_tests.rs"]
mod tests;
