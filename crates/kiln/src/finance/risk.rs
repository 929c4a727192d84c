//! Portfolio risk by full revaluation ([`Runtime::risk`]): a book of positions (any
//! [`BookOption`] kind, an underlying name and a quantity each) re-priced under every
//! scenario of a [`ScenarioSet`], the P&L per scenario `sum_i q_i (V_i(shocked) - V_i(base))`,
//! and VaR and expected shortfall at the asked levels (kiln-core's
//! [`risk::measures`](kiln_core::finance::risk::measures) states the convention).
//!
//! How each option is valued ([`Valuation`]): with [`Method::Analytic`], by its closed form
//! where the kind has one ([`has_closed_form`]: Black-Scholes styles but the arithmetic
//! Asian; the Heston European; the American tree of [`RiskParams::tree_steps`] steps;
//! geometric baskets, two-asset spreads and rainbows), else by Monte Carlo; a closed form
//! that fails for its option is that option's error, never a silent Monte Carlo value. With
//! [`Method::MonteCarlo`], every option by Monte Carlo. Monte Carlo uses common random
//! numbers: option `i` draws stream `i` of the run's seed in the base valuation and in every
//! scenario, so the P&L of a small shock carries little noise (the base and shocked prices
//! move together).
//!
//! Where it runs: on a CPU runtime, scenarios in parallel on the CPU's cores (rayon). On a
//! GPU runtime (with [`RiskParams::use_gpu`]), the European Black-Scholes options valued
//! analytically go through the `risk_bs_grid_f64` kernel (a block per scenario), the other
//! closed forms run on the CPU's cores, and the Monte Carlo valuations go to the GPU's
//! engines in batches, each shocked copy on its option's stream (module `batch`, in
//! `risk_batch.rs`, says how): every value is bitwise the one-call-per-option path's
//! (`use_gpu = false`) and the CPU engine's. The CPU path is the reference the GPU's totals
//! are tested against. Keeping the per-option P&L matrix ([`RiskParams::keep_matrix`])
//! turns the grid off (its options revalue on the CPU); the Monte Carlo batches stay.

use rayon::prelude::*;

use kiln_core::finance::american::{
    american_barrier_binomial, american_barrier_continuous, american_binomial, american_continuous,
    AmericanBarrierSpec,
};
use kiln_core::finance::risk::{
    loss_measures, shock_american, shock_basket, shock_heston, shock_plain, shock_rainbow, LossMeasure,
    Scenario, ScenarioSet, SpotShift,
};
use kiln_core::finance::{bsm, price_analytic, McParams, OptionSpec, OptionType, PriceResult, Style};
use kiln_core::storage::{BsGridBook, ShockGrid};
use kiln_core::{Error, Result};

use super::{BookOption, Method, DEFAULT_TREE_STEPS};
use crate::Runtime;

const OP: &str = "risk";

/// One position of a risk book.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Position {
    /// The option.
    pub option: BookOption,
    /// The underlying whose shocks move it (a basket's assets take their own names'; this
    /// one moves the basket's rate). `None`: the scenarios' default shock.
    #[serde(default)]
    pub underlying: Option<String>,
    /// How many (negative: short), finite.
    pub quantity: f64,
    /// A name for messages (the CSV's id); `None`: `option N`, 0-based.
    #[serde(default)]
    pub id: Option<String>,
}

impl Position {
    /// One unit of `option` on no named underlying.
    pub fn new(option: BookOption) -> Self {
        Position {
            option,
            underlying: None,
            quantity: 1.0,
            id: None,
        }
    }

    fn label(&self, i: usize) -> String {
        match &self.id {
            Some(id) => format!("option `{id}`"),
            None => format!("option {i}"),
        }
    }
}

/// How an option was valued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Valuation {
    /// A closed form (or the American tree).
    Analytic,
    /// Monte Carlo, its stream the option's index.
    MonteCarlo,
}

/// How [`Runtime::risk`] runs.
#[derive(Clone, Debug, PartialEq)]
pub struct RiskParams {
    /// Analytic where a closed form exists (Monte Carlo for the rest), or Monte Carlo for all.
    pub method: Method,
    /// The Monte Carlo run (the seed is the common random numbers' key).
    pub mc: McParams,
    /// VaR and ES levels, each in `(0, 1)`.
    pub levels: Vec<f64>,
    /// Keep the scenarios x options P&L matrix (the GPU grid is off then).
    pub keep_matrix: bool,
    /// Steps of the American tree.
    pub tree_steps: u32,
    /// On a GPU runtime, revalue in batches: the European Black-Scholes options valued
    /// analytically in the grid kernel, the Monte Carlo valuations a batch of shocked copies
    /// per engine call (module docs). `false`: one option an engine call, the reference
    /// path (the Monte Carlo engines are still the runtime's).
    pub use_gpu: bool,
}

impl Default for RiskParams {
    fn default() -> Self {
        RiskParams {
            method: Method::Analytic,
            mc: McParams::default(),
            levels: vec![0.95, 0.99],
            keep_matrix: false,
            tree_steps: DEFAULT_TREE_STEPS,
            use_gpu: true,
        }
    }
}

/// What [`Runtime::risk`] found.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RiskReport {
    /// Each option's base value (one unit).
    pub base: Vec<f64>,
    /// Each base value's standard error (0 for closed forms).
    pub base_std_error: Vec<f64>,
    /// How each option was valued.
    pub valuation: Vec<Valuation>,
    /// The book's P&L in each scenario, in the set's order.
    pub pnl: Vec<f64>,
    /// With [`RiskParams::keep_matrix`]: each position's P&L (quantity included), row-major
    /// scenarios x options; a row sums to its scenario's `pnl` (in option order).
    pub matrix: Option<Vec<f64>>,
    /// VaR and ES at each level.
    pub measures: Vec<LossMeasure>,
    /// Options the GPU grid kernel revalued (0 on the CPU; the Monte Carlo batches are not
    /// counted).
    pub gpu_options: usize,
}

/// `e` with `prefix: ` before its reason.
fn context(e: Error, prefix: &str) -> Error {
    match e {
        Error::InvalidArgument { op, reason } => Error::InvalidArgument {
            op,
            reason: format!("{prefix}: {reason}"),
        },
        e => e,
    }
}

/// Whether `opt`'s kind has a closed form ([`Method::Analytic`] values it): every
/// Black-Scholes style but the arithmetic Asian, the Heston European, every American (the
/// tree), and the baskets kiln-core's `BasketSpec::analytic_refusal` lets through (geometric
/// baskets, two-asset spreads, rainbows on one or two assets); never an American rainbow.
pub fn has_closed_form(opt: &BookOption) -> bool {
    match opt {
        BookOption::Plain(s) => super::supports(Method::Analytic, s.style),
        BookOption::Heston(h) => h.option.style == Style::European,
        BookOption::American { .. } | BookOption::AmericanBarrier { .. } => true,
        BookOption::Basket(b) => b.analytic_refusal().is_none(),
        BookOption::AmericanRainbow(_) => false,
    }
}

/// `pos.option` under `scenario` (every spot, volatility and rate field; kiln-core's
/// `risk::shock` says what moves for each kind).
pub fn shock_option(pos: &Position, scenario: &Scenario, label: &dyn Fn() -> String) -> Result<BookOption> {
    let own = scenario.shock(pos.underlying.as_deref());
    Ok(match &pos.option {
        BookOption::Plain(s) => BookOption::Plain(shock_plain(s, &own, label)?),
        BookOption::Heston(h) => BookOption::Heston(shock_heston(h, &own, label)?),
        BookOption::American { spec, continuous } => BookOption::American {
            spec: shock_american(spec, &own, label)?,
            continuous: *continuous,
        },
        BookOption::AmericanBarrier { spec, continuous } => BookOption::AmericanBarrier {
            spec: AmericanBarrierSpec {
                option: shock_american(&spec.option, &own, label)?,
                ..*spec
            },
            continuous: *continuous,
        },
        BookOption::Basket(b) => {
            BookOption::Basket(shock_basket(b, &own, &|name| scenario.shock(name), label)?)
        }
        BookOption::AmericanRainbow(r) => {
            BookOption::AmericanRainbow(shock_rainbow(r, &own, &|name| scenario.shock(name), label)?)
        }
    })
}

impl Runtime {
    /// One option's value by `how`; Monte Carlo on stream `stream`.
    fn risk_value(
        &self,
        opt: &BookOption,
        how: Valuation,
        stream: u32,
        p: &RiskParams,
    ) -> Result<PriceResult> {
        match how {
            Valuation::Analytic => match opt {
                BookOption::Plain(s) => price_analytic(s),
                BookOption::Heston(h) => h.price_analytic().map(PriceResult::exact),
                BookOption::American { spec, continuous } => if *continuous {
                    american_continuous(spec, p.tree_steps)
                } else {
                    american_binomial(spec, p.tree_steps)
                }
                .map(PriceResult::exact),
                BookOption::AmericanBarrier { spec, continuous } => if *continuous {
                    american_barrier_continuous(spec, p.tree_steps)
                } else {
                    american_barrier_binomial(spec, p.tree_steps)
                }
                .map(PriceResult::exact),
                BookOption::Basket(b) => b.price_analytic().map(PriceResult::exact),
                BookOption::AmericanRainbow(_) => Err(Error::invalid(OP, super::book::RAINBOW_ANALYTIC)),
            },
            Valuation::MonteCarlo => self
                .price_book(std::slice::from_ref(opt), Method::MonteCarlo, &p.mc, stream)
                .pop()
                .unwrap_or_else(|| Err(Error::invalid(OP, "no price came back"))),
        }
    }

    /// Revalues `positions` under every scenario (module docs). Every failure is an error
    /// naming the option (its id) and, for a shocked value, the scenario: an invalid option,
    /// a shock that takes a spot or volatility out of its domain, a non-finite quantity, a
    /// level outside `(0, 1)`, an empty scenario set.
    pub fn risk(
        &self,
        positions: &[Position],
        scenarios: &ScenarioSet,
        p: &RiskParams,
    ) -> Result<RiskReport> {
        self.risk_progress(positions, scenarios, p, &|| {})
    }

    /// [`risk`](Self::risk), calling `done()` after each scenario is revalued (from any
    /// thread; for a progress bar).
    pub fn risk_progress(
        &self,
        positions: &[Position],
        scenarios: &ScenarioSet,
        p: &RiskParams,
        done: &(dyn Fn() + Sync),
    ) -> Result<RiskReport> {
        let mc_batch = (self.finance_backend().batches_calls() && p.use_gpu).then_some(batch::MC_BATCH);
        self.risk_run(positions, scenarios, p, done, mc_batch)
    }

    /// [`risk_progress`](Self::risk_progress), the Monte Carlo valuations in batches of at
    /// most `mc_batch` (module `batch`), or one option an engine call (`None`).
    fn risk_run(
        &self,
        positions: &[Position],
        scenarios: &ScenarioSet,
        p: &RiskParams,
        done: &(dyn Fn() + Sync),
        mc_batch: Option<usize>,
    ) -> Result<RiskReport> {
        let _range = crate::profiler().host_range("risk");
        scenarios.validate()?;
        if scenarios.is_empty() {
            return Err(Error::invalid(OP, "no scenarios"));
        }
        loss_measures(&[0.0], &p.levels)?;
        if u32::try_from(positions.len()).is_err() {
            return Err(Error::invalid(OP, "at most 2^32 options (one stream index each)"));
        }
        for (i, pos) in positions.iter().enumerate() {
            if !pos.quantity.is_finite() {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "{}: quantity {} is not a finite number",
                        pos.label(i),
                        pos.quantity
                    ),
                ));
            }
        }
        if p.method == Method::MonteCarlo
            || positions
                .iter()
                .any(|x| !matches!(x.option, BookOption::Plain(_)))
        {
            p.mc.validate()?;
        }
        // how each option is valued: its closed form where its kind has one (an error of the
        // closed form is the option's error, not a reason to simulate), else Monte Carlo
        let how: Vec<Valuation> = positions
            .iter()
            .map(|pos| match p.method {
                Method::Analytic if has_closed_form(&pos.option) => Valuation::Analytic,
                _ => Valuation::MonteCarlo,
            })
            .collect();
        let values = match mc_batch {
            Some(_) => self.base_batched(positions, &how, p)?,
            None => self.par_or_serial(positions.len(), true, |i| {
                self.risk_value(&positions[i].option, how[i], i as u32, p)
            }),
        };
        let base: Vec<(Valuation, PriceResult)> = values
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                r.map(|r| (how[i], r))
                    .map_err(|e| context(e, &positions[i].label(i)))
            })
            .collect::<Result<_>>()?;
        let gpu_idx = self.gpu_grid_options(positions, &base, p);
        let on_gpu: Vec<bool> = {
            let mut v = vec![false; positions.len()];
            for &(i, _) in &gpu_idx {
                v[i] = true;
            }
            v
        };
        let n = positions.len();
        // The positions the CPU (or the Monte Carlo engines) revalue, in book order; the GPU
        // grid's options are left out here rather than skipped inside the loop: a 10,000 x
        // 10,000 grid would otherwise allocate and sum a matrix of zeros.
        let cpu_idx: Vec<usize> = (0..n).filter(|&i| !on_gpu[i]).collect();
        let mc_rows = cpu_idx.iter().any(|&i| base[i].0 == Valuation::MonteCarlo);
        let rows: Vec<Vec<f64>> = if cpu_idx.is_empty() {
            vec![Vec::new(); scenarios.len()]
        } else if let Some(max) = mc_batch.filter(|_| mc_rows) {
            self.batched_rows(positions, scenarios, &base, &cpu_idx, p, done, max)?
        } else {
            // analytic revaluations run in parallel on any runtime; Monte Carlo ones go to the
            // runtime's engines, which on a GPU take one call at a time
            self.par_or_serial(scenarios.len(), mc_rows, |s| {
                let sc = &scenarios.scenarios[s];
                let mut row = Vec::with_capacity(cpu_idx.len());
                for &i in &cpu_idx {
                    let pos = &positions[i];
                    let label = || format!("{} in scenario `{}`", pos.label(i), sc.name);
                    let (how, b) = base[i];
                    let shocked = shock_option(pos, sc, &label)?;
                    let v = self
                        .risk_value(&shocked, how, i as u32, p)
                        .map_err(|e| context(e, &label()))?;
                    row.push(pos.quantity * (v.price - b.price));
                }
                done();
                Ok(row)
            })
            .into_iter()
            .collect::<Result<_>>()?
        };
        let mut pnl: Vec<f64> = rows.iter().map(|r| r.iter().sum()).collect();
        if !gpu_idx.is_empty() {
            let gpu_tot = self.gpu_grid_totals(positions, &base, &gpu_idx, scenarios)?;
            for (t, g) in pnl.iter_mut().zip(gpu_tot) {
                *t += g;
            }
            if cpu_idx.is_empty() {
                // the grid was the whole revaluation: every scenario is done now
                scenarios.scenarios.iter().for_each(|_| done());
            }
        }
        let measures = loss_measures(&pnl, &p.levels)?;
        Ok(RiskReport {
            base: base.iter().map(|(_, r)| r.price).collect(),
            base_std_error: base.iter().map(|(_, r)| r.std_error).collect(),
            valuation: base.iter().map(|(v, _)| *v).collect(),
            pnl,
            // a kept matrix has every position in its rows: the GPU grid is off then
            matrix: p.keep_matrix.then(|| rows.concat()),
            measures,
            gpu_options: gpu_idx.len(),
        })
    }

    /// `f(0..n)`, in parallel on a CPU runtime, and on a GPU one unless `f` may call its
    /// Monte Carlo engines (`uses_engines`), which take one call at a time
    /// (`FinanceBackend::batches_calls`): in order then.
    fn par_or_serial<T: Send>(
        &self,
        n: usize,
        uses_engines: bool,
        f: impl Fn(usize) -> T + Sync + Send,
    ) -> Vec<T> {
        if uses_engines && self.finance_backend().batches_calls() {
            (0..n).map(f).collect()
        } else {
            (0..n).into_par_iter().map(f).collect()
        }
    }

    /// The options the GPU grid revalues: European Black-Scholes options valued analytically,
    /// when the runtime's engine has the grid (a GPU) and the matrix is not kept.
    fn gpu_grid_options(
        &self,
        positions: &[Position],
        base: &[(Valuation, PriceResult)],
        p: &RiskParams,
    ) -> Vec<(usize, OptionSpec)> {
        if !self.finance_backend().has_risk_grid() || !p.use_gpu || p.keep_matrix {
            return Vec::new();
        }
        positions
            .iter()
            .enumerate()
            .filter_map(|(i, pos)| match &pos.option {
                BookOption::Plain(s) if s.style == Style::European && base[i].0 == Valuation::Analytic => {
                    Some((i, *s))
                }
                _ => None,
            })
            .collect()
    }

    /// The GPU grid's P&L per scenario over the options `idx` (all European Black-Scholes).
    /// Every shocked spot and volatility is checked here first; a violation is revalued on
    /// the CPU, which names the option and the scenario.
    fn gpu_grid_totals(
        &self,
        positions: &[Position],
        base: &[(Valuation, PriceResult)],
        grid_options: &[(usize, OptionSpec)],
        scenarios: &ScenarioSet,
    ) -> Result<Vec<f64>> {
        // slot 0: the default shock; then each named underlying some scenario names
        let named = scenarios.underlyings();
        let slot = |u: Option<&str>| -> u32 {
            u.and_then(|u| named.binary_search_by(|x| x.as_str().cmp(u)).ok())
                .map_or(0, |k| k as u32 + 1)
        };
        let n_und = named.len() + 1;
        let idx: Vec<usize> = grid_options.iter().map(|(i, _)| *i).collect();
        let specs: Vec<OptionSpec> = grid_options.iter().map(|(_, s)| *s).collect();
        let und: Vec<u32> = idx
            .iter()
            .map(|&i| slot(positions[i].underlying.as_deref()))
            .collect();
        // the smallest spot and volatility of each slot, for the domain check
        let mut min_spot = vec![f64::INFINITY; n_und];
        let mut min_vol = vec![f64::INFINITY; n_und];
        for (s, &u) in specs.iter().zip(&und) {
            min_spot[u as usize] = min_spot[u as usize].min(s.spot);
            min_vol[u as usize] = min_vol[u as usize].min(s.volatility);
        }
        let cells = n_und * scenarios.len();
        let (mut spot_shift, mut spot_abs) = (Vec::with_capacity(cells), Vec::with_capacity(cells));
        let (mut vol_shift, mut rate_shift) = (Vec::with_capacity(cells), Vec::with_capacity(cells));
        for sc in &scenarios.scenarios {
            for u in 0..n_und {
                let sh = if u == 0 {
                    sc.default
                } else {
                    sc.shock(Some(&named[u - 1]))
                };
                let ok = min_spot[u].is_infinite()
                    || (sh.spot.apply(min_spot[u]) > 0.0 && min_vol[u] + sh.vol > 0.0);
                if !ok {
                    // the CPU names the option and the scenario
                    let e = idx
                        .iter()
                        .find_map(|&i| {
                            let label = || format!("{} in scenario `{}`", positions[i].label(i), sc.name);
                            shock_option(&positions[i], sc, &label).err()
                        })
                        .unwrap_or_else(|| {
                            Error::invalid(
                                OP,
                                format!("scenario `{}` leaves a spot or volatility <= 0", sc.name),
                            )
                        });
                    return Err(e);
                }
                spot_shift.push(sh.spot.value());
                spot_abs.push(u8::from(matches!(sh.spot, SpotShift::Absolute(_))));
                vol_shift.push(sh.vol);
                rate_shift.push(sh.rate);
            }
        }
        let col = |f: fn(&OptionSpec) -> f64| -> Vec<f64> { specs.iter().map(f).collect() };
        let qty: Vec<f64> = idx.iter().map(|&i| positions[i].quantity).collect();
        let basev: Vec<f64> = idx.iter().map(|&i| base[i].1.price).collect();
        let put: Vec<u8> = specs
            .iter()
            .map(|s| u8::from(s.option_type == OptionType::Put))
            .collect();
        let (spot, strike, rate) = (col(|s| s.spot), col(|s| s.strike), col(|s| s.rate));
        let (dividend, vol, maturity) = (col(|s| s.dividend), col(|s| s.volatility), col(|s| s.maturity));
        let book = BsGridBook {
            spot: &spot,
            strike: &strike,
            rate: &rate,
            dividend: &dividend,
            vol: &vol,
            maturity: &maturity,
            qty: &qty,
            base: &basev,
            put: &put,
            und: &und,
        };
        let grid = ShockGrid {
            spot_shift: &spot_shift,
            spot_abs: &spot_abs,
            vol_shift: &vol_shift,
            rate_shift: &rate_shift,
            n_und: n_und as u32,
            n_scen: scenarios.len(),
        };
        self.finance_backend().risk_bs_grid(&book, &grid)
    }
}

/// The position fields a risk record adds to an option record (`kiln::finance::records`).
pub const POSITION_FIELDS: [&str; 3] = ["underlying", "quantity", "id"];

/// A risk book's record: an option record (the shape `kiln.price` and the service's `price`
/// jobs take; `normalize` applies its defaults first, for raw JSON) plus `underlying` (a
/// string, or null), `quantity` (a finite number, default 1) and `id` (a string, or null).
/// The error names the field; callers prefix where the record is.
pub fn position_record(
    rec: serde_json::Value,
    default_dates: u32,
    normalize: bool,
) -> std::result::Result<Position, String> {
    let serde_json::Value::Object(mut m) = rec else {
        return Err("a position record must be an object".into());
    };
    let text = |v: Option<serde_json::Value>, name: &str| match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(serde_json::Value::String(_)) => Ok(None),
        Some(v) => Err(format!("{name} must be a string, got {v}")),
    };
    let underlying = text(m.remove("underlying"), "underlying")?;
    let id = text(m.remove("id"), "id")?;
    let quantity = match m.remove("quantity") {
        None | Some(serde_json::Value::Null) => 1.0,
        Some(v) => match v.as_f64() {
            Some(q) if q.is_finite() => q,
            _ => return Err(format!("quantity must be a finite number, got {v}")),
        },
    };
    let mut rec = serde_json::Value::Object(m);
    if normalize {
        rec = super::records::normalize_record(rec).map_err(|e| e.0)?;
    }
    let option = super::records::book_option(rec, default_dates).map_err(|e| e.0)?;
    Ok(Position {
        option,
        underlying,
        quantity,
        id,
    })
}

/// The fields of a scenario record.
pub const SCENARIO_FIELDS: [&str; 6] = [
    "scenario",
    "underlying",
    "spot_shift",
    "spot_shift_kind",
    "vol_shift",
    "rate_shift",
];

/// Scenario records, one per scenario and underlying (the scenario CSV's rows as objects:
/// `scenario` a name, `underlying` a name or `*` (the default, and what a missing one
/// means), `spot_shift`, `vol_shift`, `rate_shift` numbers (missing or null: 0),
/// `spot_shift_kind` `relative` (the default) or `absolute`), grouped into a set in the order
/// of each scenario's first record. Every bad record is reported, each as `scenario record
/// N: ...` naming the field, in one message.
pub fn scenario_records(recs: &[serde_json::Value]) -> std::result::Result<ScenarioSet, String> {
    use serde_json::Value;
    let mut problems = Vec::new();
    let mut set = ScenarioSet::default();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut first: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        let mut why = Vec::new();
        let Value::Object(m) = r else {
            problems.push(format!(
                "scenario record {i}: must be an object with fields {}",
                SCENARIO_FIELDS.join(", ")
            ));
            continue;
        };
        if let Some(k) = m.keys().find(|k| !SCENARIO_FIELDS.contains(&k.as_str())) {
            why.push(format!(
                "unknown field `{k}`; the fields are {}",
                SCENARIO_FIELDS.join(", ")
            ));
        }
        let name = match m.get("scenario") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            other => {
                why.push(format!(
                    "scenario must be a non-empty name, got {}",
                    other.unwrap_or(&Value::Null)
                ));
                String::new()
            }
        };
        let und = match m.get("underlying") {
            None | Some(Value::Null) => kiln_core::finance::risk::ALL_UNDERLYINGS.to_string(),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(v) => {
                why.push(format!("underlying must be a name or \"*\", got {v}"));
                String::new()
            }
        };
        let mut num = |k: &str| match m.get(k) {
            None | Some(Value::Null) => 0.0,
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() => x,
                _ => {
                    why.push(format!("{k} must be a finite number, got {v}"));
                    0.0
                }
            },
        };
        let (x, vol, rate) = (num("spot_shift"), num("vol_shift"), num("rate_shift"));
        let spot = match m.get("spot_shift_kind") {
            None | Some(Value::Null) => SpotShift::Relative(x),
            Some(Value::String(k)) if k == "relative" => SpotShift::Relative(x),
            Some(Value::String(k)) if k == "absolute" => SpotShift::Absolute(x),
            Some(v) => {
                why.push(format!(
                    "spot_shift_kind must be \"relative\" or \"absolute\", got {v}"
                ));
                SpotShift::Relative(0.0)
            }
        };
        let shock = kiln_core::finance::risk::Shock { spot, vol, rate };
        if let Err(e) = shock.validate() {
            why.push(match e {
                Error::InvalidArgument { reason, .. } => reason,
                e => e.to_string(),
            });
        }
        if why.is_empty() {
            if let Some(j) = first.insert((name.clone(), und.clone()), i) {
                why.push(format!(
                    "scenario `{name}` shocks underlying `{und}` already in record {j}"
                ));
            }
        }
        if !why.is_empty() {
            problems.push(format!("scenario record {i}: {}", why.join("; ")));
            continue;
        }
        let k = *index.entry(name.clone()).or_insert_with(|| {
            set.scenarios.push(Scenario::new(name.clone()));
            set.scenarios.len() - 1
        });
        set.scenarios[k].set(&und, shock);
    }
    if problems.is_empty() {
        Ok(set)
    } else {
        Err(problems.join("\n"))
    }
}

/// The price of a European Black-Scholes option, as the GPU grid computes it (for tests).
pub fn bs_price(s: &OptionSpec) -> f64 {
    bsm(
        s.option_type,
        s.spot,
        s.strike,
        s.rate,
        s.dividend,
        s.volatility,
        s.maturity,
    )
    .price
}

#[path = "risk_batch.rs"]
mod batch;

#[cfg(test)]
#[path = "risk_tests.rs"]
mod tests;
