//! The option CSV: a portfolio in ([`read_options`]), prices and bad rows out
//! ([`write_prices`], [`write_errors`]).
//!
//! Input rules (what `kiln price --input` accepts):
//! - A header row names the columns, in any order, case-insensitively, surrounding spaces
//!   ignored. Required: `type,style,spot,strike,rate,volatility,maturity`. Optional: `id`
//!   (absent or empty: the data row number), `dividend` (absent or empty: 0), `fixings` and
//!   `barrier` (needed only by the styles that use them; empty cells otherwise), `rebate`
//!   (barrier styles' cash rebate; absent or empty: 0), `model` (`bs`, the default, or
//!   `heston`) and Heston's `kappa,theta,xi,rho,v0` (heston rows only; all five needed
//!   there), `basket` and `average` (basket rows only, below), and a position's `underlying`
//!   (a name the scenarios of `kiln risk` shock; empty: none) and `quantity` (a finite
//!   number, negative for a short position; absent or empty: 1), which `kiln price` reads
//!   and does not use ([`OptionsFile::holdings`]). Any other column, or a column
//!   named twice, is a header error for the whole file
//!   ([`IoError::Content`](crate::IoError::Content): the file is readable, its header breaks
//!   the rules) that names each such column, lists the accepted ones and, where an unknown
//!   name nearly spells one (`vol`, `strke`), suggests it.
//! - `type` is `call` or `put`, `style` one of [`Style::name`]'s names (`european`,
//!   `asian_arithmetic`, `asian_geometric`, `barrier_up_out`, `barrier_up_in`,
//!   `barrier_down_out`, `barrier_down_in`), `american` ([`RowKind::American`]: its
//!   `fixings` are the exercise dates, empty for continuous exercise), an American barrier
//!   `american_barrier_up_out`, `american_barrier_up_in`, `american_barrier_down_out`,
//!   `american_barrier_down_in` ([`RowKind::AmericanBarrier`]: `barrier` and `rebate` as for
//!   the barrier styles, monitored continuously; `fixings` the exercise dates as for
//!   `american`) or `basket`
//!   ([`RowKind::Basket`]), both case-insensitive. A basket row names a basket file in
//!   `basket` (a path relative to the option CSV's folder; [`crate::basket_csv`] has its
//!   rules; each file is read once however many rows name it, and a bad file makes every
//!   row naming it a bad row with the file's reason) and its `average` (`arithmetic`, the
//!   default, `geometric`, or `max` / `min` for a rainbow on the largest or smallest
//!   `w_i S_i`); its strike may be any finite number (a spread's, weights `1,-1` in the
//!   file, may be 0 or negative); its `spot`, `volatility` and `dividend` cells must be empty
//!   (the file gives each asset's), as must `fixings`, `barrier`, `rebate` and `model`. An
//!   `american_rainbow` row ([`RowKind::AmericanRainbow`]: a Bermudan call or put on the
//!   largest or smallest `w_i S_i`, priced by Longstaff-Schwartz, Monte Carlo only) is a
//!   basket row with `average` `max` or `min` (required), a strike `> 0` and `fixings`, its
//!   exercise dates, required (a whole number >= 1: kiln has no continuous-exercise price
//!   for it); its `spot`, `volatility`, `dividend`, `barrier`, `rebate` and `model` cells
//!   must be empty. A heston row ([`RowKind::Heston`]) is a `european` or
//!   `asian_arithmetic` payoff; its `volatility` is not used and may be empty. Rates and the dividend
//!   yield are continuously compounded per year, volatility per `sqrt(year)` (0.2 for 20%),
//!   maturity in years, `fixings` a whole number `>= 1` (equally spaced, the last at
//!   maturity: an Asian option's averaging dates, or a barrier's discrete monitoring dates,
//!   empty for continuous monitoring), `barrier` a price level.
//! - Rows are numbered from 1 at the first row after the header ("data row"; blank lines and
//!   lines of only empty cells are skipped and not counted); each bad row is reported with that number, the file line it
//!   starts on, and every reason found (unknown type or style, a non-numeric or non-finite
//!   cell with its column and text, a missing fixings/barrier, a duplicate id, and whatever
//!   [`OptionSpec::validate`] rejects: volatility or maturity `<= 0`, ...). Reading never
//!   stops at the first bad row.
//!
//! Output: `id,price,std_error,delta,gamma,vega,theta,rho` ([`write_prices`]; an empty cell
//! where a Greek was not computed; no non-finite value is ever written) and
//! `row,id,reason` for bad rows ([`write_errors`]). Numbers are written in Rust's shortest
//! round-trip form (exponent notation outside `1e-5..1e16`), so reading a file back gives
//! the same bits. Writes are atomic (a temporary file in the target's directory, renamed).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use kiln_core::finance::american::{AmericanBarrierSpec, AmericanRainbowSpec, AmericanSpec};
use kiln_core::finance::heston::{HestonParams, HestonSpec};
use kiln_core::finance::rainbow::Extreme;
use kiln_core::finance::{OptionSpec, OptionType, Style};

use crate::basket_csv::{read_basket, BasketFile};
use crate::error::{IoError, Result};
use crate::table::{read_rows, Row, Schema};
use kiln_core::finance::basket::{BasketAverage, BasketSpec};

pub use crate::table::RowError;

mod multi_asset;
mod prices;
use multi_asset::{multi_asset_cells, rainbow_spec, MultiAsset};
pub use prices::{
    read_prices, write_errors, write_prices, write_prices_with_errors, GreekErrors, PriceRecord,
    ERROR_COLUMNS, GREEK_ERROR_COLUMNS, PRICE_COLUMNS,
};

/// The option CSV's columns, for the shared reader.
const SCHEMA: Schema = Schema {
    format: "option CSV",
    columns: &INPUT_COLUMNS,
    required: &REQUIRED_COLUMNS,
    id: ID,
    hints: &[
        (
            "exercise",
            "the exercise style goes in `style` (american, or european and the other styles); an American option's exercise dates in `fixings`",
        ),
        ("sigma", "did you mean `volatility`?"),
        ("expiry", "did you mean `maturity`? (in years)"),
    ],
};

/// Input columns.
const NCOLS: usize = 22;

/// Every input column, in the documented order.
pub const INPUT_COLUMNS: [&str; NCOLS] = [
    "id",
    "type",
    "style",
    "spot",
    "strike",
    "rate",
    "dividend",
    "volatility",
    "maturity",
    "fixings",
    "barrier",
    "rebate",
    "model",
    "kappa",
    "theta",
    "xi",
    "rho",
    "v0",
    "basket",
    "average",
    "underlying",
    "quantity",
];

/// The input columns every file must have.
pub const REQUIRED_COLUMNS: [&str; 7] = [
    "type",
    "style",
    "spot",
    "strike",
    "rate",
    "volatility",
    "maturity",
];

// Positions in INPUT_COLUMNS.
const ID: usize = 0;
const TYPE: usize = 1;
const STYLE: usize = 2;
const SPOT: usize = 3;
const STRIKE: usize = 4;
const RATE: usize = 5;
const DIVIDEND: usize = 6;
const VOLATILITY: usize = 7;
const MATURITY: usize = 8;
const FIXINGS: usize = 9;
const BARRIER: usize = 10;
const REBATE: usize = 11;
const MODEL: usize = 12;
/// Heston's five columns: kappa, theta, xi, rho, v0.
const HESTON_COLS: [usize; 5] = [13, 14, 15, 16, 17];
const BASKET: usize = 18;
const AVERAGE: usize = 19;
const UNDERLYING: usize = 20;
const QUANTITY: usize = 21;

/// The style name of American rows (not a [`Style`]: Longstaff-Schwartz and the tree price
/// them, not the path engine).
pub const AMERICAN_STYLE: &str = "american";

/// The prefix of American barrier rows' styles: `american_barrier_up_out` and the like
/// ([`RowKind::AmericanBarrier`]).
pub const AMERICAN_BARRIER_PREFIX: &str = "american_";

/// The style name of basket rows (not a [`Style`]: the basket engine prices them).
pub const BASKET_STYLE: &str = "basket";

/// The style name of American rainbow rows ([`RowKind::AmericanRainbow`]).
pub const AMERICAN_RAINBOW_STYLE: &str = "american_rainbow";

/// What a row prices beyond its [`OptionRow::spec`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RowKind {
    /// The spec itself, under Black-Scholes (geometric Brownian motion).
    Plain,
    /// The spec's payoff (European or arithmetic Asian) under Heston's model with these
    /// parameters; the spec's volatility is not used ([`OptionRow::heston`]).
    Heston(HestonParams),
    /// Style `american`: the spec carries the type, spot, strike, rate, dividend, volatility
    /// and maturity (as a European); the exercise dates are `Some(n)` equally spaced dates
    /// (a Bermudan option, the last at maturity), `None` continuous exercise.
    American(Option<u32>),
    /// Style `american_barrier_up_out` (`_up_in`, `_down_out`, `_down_in`): an American
    /// barrier option ([`OptionRow::american_barrier`]); the spec carries the terms as a
    /// European of the barrier style (its `barrier` and `rebate`; `fixings` not set), the
    /// exercise dates are as for [`RowKind::American`] and the barrier is monitored
    /// continuously.
    AmericanBarrier(Option<u32>),
    /// Style `basket`: a European call or put on the basket of file
    /// [`OptionsFile::baskets`]`[basket]` ([`OptionRow::basket`]); the spec carries the
    /// type, strike, rate and maturity (its spot and volatility are 1, as placeholders;
    /// the file gives each asset's).
    Basket {
        /// Index into [`OptionsFile::baskets`].
        basket: usize,
        /// Assets in that basket.
        assets: u32,
        /// Arithmetic or geometric.
        average: BasketAverage,
    },
    /// Style `american_rainbow`: a Bermudan call or put on the max or min of the assets of
    /// file [`OptionsFile::baskets`]`[basket]` ([`OptionRow::american_rainbow`]),
    /// exercisable on `dates` equally spaced dates; the spec carries the type, strike, rate
    /// and maturity as a basket row's does.
    AmericanRainbow {
        /// Index into [`OptionsFile::baskets`].
        basket: usize,
        /// Assets in that basket.
        assets: u32,
        /// On the largest or smallest `w_i S_i`.
        extreme: Extreme,
        /// Exercise dates (the row's `fixings`, required).
        dates: u32,
    },
}

/// One good row of an option CSV.
#[derive(Clone, Debug, PartialEq)]
pub struct OptionRow {
    /// Data row number, 1-based (the first row after the header is 1).
    pub row: usize,
    /// The file line the row starts on, 1-based (the header is line 1 in most files).
    pub line: u64,
    /// The `id` cell, or the data row number where the file has none.
    pub id: String,
    /// The option, already validated (for heston and american rows see [`RowKind`]).
    pub spec: OptionSpec,
    /// Black-Scholes, Heston or American.
    pub kind: RowKind,
}

impl OptionRow {
    /// The Heston option of a heston row.
    pub fn heston(&self) -> Option<HestonSpec> {
        match self.kind {
            RowKind::Heston(heston) => Some(HestonSpec {
                option: self.spec,
                heston,
            }),
            _ => None,
        }
    }

    /// The basket option of a basket row, its assets from `baskets` (the file's
    /// [`OptionsFile::baskets`]).
    pub fn basket(&self, baskets: &[BasketFile]) -> Option<BasketSpec> {
        match self.kind {
            RowKind::Basket { basket, average, .. } => baskets.get(basket).map(|b| {
                let s = &self.spec;
                b.spec(s.option_type, s.strike, s.rate, s.maturity, average)
            }),
            _ => None,
        }
    }

    /// The American option of an american row, exercisable on `dates` equally spaced dates
    /// (its own `fixings`, else `default_dates`).
    pub fn american(&self, default_dates: u32) -> Option<AmericanSpec> {
        match self.kind {
            RowKind::American(dates) => Some(american_spec(&self.spec, dates.unwrap_or(default_dates))),
            _ => None,
        }
    }
}

impl OptionRow {
    /// The American rainbow of an `american_rainbow` row, its assets from `baskets` (the
    /// file's [`OptionsFile::baskets`]).
    pub fn american_rainbow(&self, baskets: &[BasketFile]) -> Option<AmericanRainbowSpec> {
        match self.kind {
            RowKind::AmericanRainbow {
                basket,
                extreme,
                dates,
                ..
            } => baskets
                .get(basket)
                .map(|b| rainbow_spec(b, &self.spec, extreme, dates)),
            _ => None,
        }
    }

    /// The American barrier option of an `american_barrier_*` row, exercisable on `dates`
    /// equally spaced dates (its own `fixings`, else `default_dates`).
    pub fn american_barrier(&self, default_dates: u32) -> Option<AmericanBarrierSpec> {
        match self.kind {
            RowKind::AmericanBarrier(dates) => {
                Some(american_barrier_spec(&self.spec, dates.unwrap_or(default_dates)))
            }
            _ => None,
        }
    }
}

fn american_barrier_spec(s: &OptionSpec, dates: u32) -> AmericanBarrierSpec {
    AmericanBarrierSpec {
        option: american_spec(s, dates),
        style: s.style,
        barrier: s.barrier.unwrap_or(f64::NAN),
        rebate: s.rebate,
    }
}

/// The style name of an American barrier row: `american_` and the barrier style's name.
fn american_barrier_style(text: &str) -> Option<Style> {
    let rest = text.strip_prefix(AMERICAN_BARRIER_PREFIX)?;
    Style::ALL
        .into_iter()
        .find(|s| s.is_barrier() && s.name() == rest)
}

fn american_spec(s: &OptionSpec, dates: u32) -> AmericanSpec {
    AmericanSpec {
        option_type: s.option_type,
        spot: s.spot,
        strike: s.strike,
        rate: s.rate,
        dividend: s.dividend,
        volatility: s.volatility,
        maturity: s.maturity,
        exercise_dates: dates,
    }
}

/// A row's position cells: what `kiln risk` holds of the option.
#[derive(Clone, Debug, PartialEq)]
pub struct Holding {
    /// The `underlying` cell (`None` where empty or absent).
    pub underlying: Option<String>,
    /// The `quantity` cell, finite (1 where empty or absent).
    pub quantity: f64,
}

/// What [`read_options`] found: the good rows and the bad ones, each in file order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OptionsFile {
    /// The rows that parsed and validated.
    pub options: Vec<OptionRow>,
    /// Each good row's position cells, `holdings[i]` of `options[i]`.
    pub holdings: Vec<Holding>,
    /// The rows that did not, with every reason.
    pub errors: Vec<RowError>,
    /// The basket files the basket rows name, each once ([`RowKind::Basket`]'s index).
    pub baskets: Vec<BasketFile>,
}

/// The basket files of one option CSV, each read once: by the `basket` cell as written,
/// resolved against the option CSV's folder.
struct Baskets {
    dir: std::path::PathBuf,
    seen: HashMap<String, std::result::Result<usize, String>>,
    files: Vec<BasketFile>,
}

impl Baskets {
    /// `(index, assets)` of the file named by `cell`, or why it cannot be used.
    fn resolve(&mut self, cell: &str) -> std::result::Result<(usize, u32), String> {
        let files = &mut self.files;
        let dir = &self.dir;
        let got = self.seen.entry(cell.to_string()).or_insert_with(|| {
            read_basket(dir.join(cell))
                .map(|b| {
                    files.push(b);
                    files.len() - 1
                })
                .map_err(|e| e.to_string())
        });
        let i = got.clone()?;
        Ok((i, self.files[i].assets.len() as u32))
    }
}

impl OptionsFile {
    /// Data rows in the file, good and bad.
    pub fn rows(&self) -> usize {
        self.options.len() + self.errors.len()
    }
}

/// Reads an option CSV (rules in the [module docs](self)). A missing file, a header that
/// lacks a required column or names an unknown one, or an unreadable file is an error; bad
/// rows are not: they come back in [`OptionsFile::errors`], every one of them.
pub fn read_options(path: impl AsRef<Path>) -> Result<OptionsFile> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    parse_options(path, file)
}

/// [`read_options`] from any reader; `path` is only used in error messages.
pub fn parse_options<R: Read>(path: &Path, reader: R) -> Result<OptionsFile> {
    let mut baskets = Baskets {
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        seen: HashMap::new(),
        files: Vec::new(),
    };
    let rows = read_rows(path, reader, &SCHEMA, |row, reasons| {
        let spec = parse_spec(row, &mut baskets).map_err(|r| reasons.extend(r)).ok();
        let holding = parse_holding(row, reasons);
        spec.zip(holding)
    })?;
    Ok(OptionsFile {
        holdings: rows.good.iter().map(|g| g.value.1.clone()).collect(),
        options: rows
            .good
            .into_iter()
            .map(|g| OptionRow {
                row: g.row,
                line: g.line,
                id: g.id,
                spec: g.value.0 .0,
                kind: g.value.0 .1,
            })
            .collect(),
        errors: rows.errors,
        baskets: baskets.files,
    })
}

/// The `underlying` and `quantity` cells (`None` with the reason pushed for a bad quantity).
fn parse_holding(row: &Row<'_>, reasons: &mut Vec<String>) -> Option<Holding> {
    let underlying = Some(row.text(UNDERLYING)).filter(|u| !u.is_empty());
    let quantity = row.num(QUANTITY, Some(1.0), reasons)?;
    Some(Holding { underlying, quantity })
}

fn parse_spec(
    row: &Row<'_>,
    baskets: &mut Baskets,
) -> std::result::Result<(OptionSpec, RowKind), Vec<String>> {
    let mut reasons = Vec::new();
    let cell = |c: usize| row.text(c);
    let model_text = cell(MODEL).to_ascii_lowercase();
    let heston = match model_text.as_str() {
        "" | "bs" | "black_scholes" => false,
        "heston" => true,
        _ => {
            reasons.push(format!("unknown model `{}`; use bs or heston", cell(MODEL)));
            false
        }
    };
    let option_type = match cell(TYPE).to_ascii_lowercase().as_str() {
        "call" => Some(OptionType::Call),
        "put" => Some(OptionType::Put),
        "" => {
            reasons.push("type is empty; use call or put".to_string());
            None
        }
        _ => {
            reasons.push(format!("unknown type `{}`; use call or put", cell(TYPE)));
            None
        }
    };
    let style_text = cell(STYLE).to_ascii_lowercase();
    let american = style_text == AMERICAN_STYLE;
    let american_barrier = american_barrier_style(&style_text);
    let multi = MultiAsset::of(&style_text);
    let basket = multi.is_some();
    let basket_kind = if let Some(which) = multi {
        multi_asset_cells(&cell, heston, which, &mut reasons, baskets)
    } else {
        for c in [BASKET, AVERAGE] {
            if !cell(c).is_empty() {
                reasons.push(format!(
                    "{} given for style {}; it belongs to style basket or american_rainbow only",
                    INPUT_COLUMNS[c],
                    cell(STYLE)
                ));
            }
        }
        None
    };
    // American, basket and American rainbow rows are carried as Europeans (RowKind says
    // the rest)
    let style = if american || basket {
        Some(Style::European)
    } else if american_barrier.is_some() {
        american_barrier
    } else {
        Style::ALL.into_iter().find(|s| s.name() == style_text)
    };
    if style.is_none() {
        let names: Vec<&str> = Style::ALL
            .iter()
            .map(|s| s.name())
            .chain([AMERICAN_STYLE])
            .chain(Style::ALL.iter().filter(|s| s.is_barrier()).map(|s| match s {
                Style::BarrierUpOut => "american_barrier_up_out",
                Style::BarrierUpIn => "american_barrier_up_in",
                Style::BarrierDownOut => "american_barrier_down_out",
                _ => "american_barrier_down_in",
            }))
            .chain([BASKET_STYLE, AMERICAN_RAINBOW_STYLE])
            .collect();
        reasons.push(if style_text.is_empty() {
            format!("style is empty; use one of {}", names.join(", "))
        } else {
            format!("unknown style `{}`; use one of {}", cell(STYLE), names.join(", "))
        });
    }
    let mut num = |c: usize, default: Option<f64>| row.num(c, default, &mut reasons);
    // Heston rows need no volatility: NaN marks "not given" until theta is known
    let [spot, strike, rate, dividend, volatility, maturity, rebate] =
        [SPOT, STRIKE, RATE, DIVIDEND, VOLATILITY, MATURITY, REBATE].map(|c| {
            let default = match c {
                DIVIDEND | REBATE => Some(0.0),
                VOLATILITY if heston => Some(f64::NAN),
                // basket rows: the file gives these (multi_asset_cells checks they are empty)
                SPOT | VOLATILITY if basket => Some(f64::NAN),
                _ => None,
            };
            num(c, default)
        });
    let barrier_text = cell(BARRIER);
    let barrier = if barrier_text.is_empty() {
        None
    } else {
        num(BARRIER, None)
    };
    let given: Vec<&str> = HESTON_COLS
        .iter()
        .filter(|&&c| !cell(c).is_empty())
        .map(|&c| INPUT_COLUMNS[c])
        .collect();
    let heston_params = if heston {
        let [kappa, theta, xi, rho, v0] = HESTON_COLS.map(|c| num(c, None));
        match (kappa, theta, xi, rho, v0) {
            (Some(kappa), Some(theta), Some(xi), Some(rho), Some(v0)) => Some(HestonParams {
                kappa,
                theta,
                xi,
                rho,
                v0,
            }),
            _ => None,
        }
    } else {
        if !given.is_empty() {
            reasons.push(format!(
                "{} given for model bs; they are Heston's parameters (set model to heston)",
                given.join(", ")
            ));
        }
        None
    };
    if heston && (american || american_barrier.is_some()) {
        reasons.push(format!(
            "style {} is priced under Black-Scholes only (model bs)",
            cell(STYLE)
        ));
    }
    let fixings_text = cell(FIXINGS);
    let fixings = if fixings_text.is_empty() {
        None
    } else {
        let whole = fixings_text.parse::<u32>().ok().or_else(|| {
            fixings_text
                .parse::<f64>()
                .ok()
                .filter(|v| v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(v))
                .map(|v| v as u32)
        });
        if whole.is_none() {
            reasons.push(format!("fixings: `{fixings_text}` is not a whole number >= 1"));
        }
        whole
    };
    if multi == Some(MultiAsset::AmericanRainbow) {
        if fixings_text.is_empty() {
            reasons.push(
                "fixings is empty; style american_rainbow needs its exercise dates (a whole number >= 1): \
                 kiln has no continuous-exercise price for an American rainbow"
                    .to_string(),
            );
        } else if fixings == Some(0) {
            reasons.push(
                "fixings = 0; style american_rainbow takes its exercise dates there: a whole number >= 1"
                    .to_string(),
            );
        }
    }
    if let Some(s) = style {
        if s.is_barrier() && barrier_text.is_empty() {
            reasons.push(format!(
                "barrier is empty; style {} needs a barrier level",
                style_text
            ));
        }
        if s.is_asian() && fixings_text.is_empty() {
            reasons.push(format!(
                "fixings is empty; style {} needs the number of fixings (a whole number >= 1)",
                s.name()
            ));
        }
    }
    let (
        Some(option_type),
        Some(style),
        [Some(spot), Some(strike), Some(rate), Some(dividend), Some(v), Some(t)],
    ) = (
        option_type,
        style,
        [spot, strike, rate, dividend, volatility, maturity],
    )
    else {
        return Err(reasons);
    };
    if !reasons.is_empty() {
        return Err(reasons);
    }
    let why = |e: kiln_core::Error| match e {
        kiln_core::Error::InvalidArgument { reason, .. } => vec![reason],
        e => vec![e.to_string()],
    };
    if basket {
        let Some((i, assets, average)) = basket_kind else {
            return Err(reasons);
        };
        // The contract is checked by the basket engine's own rules (a single-asset option's
        // spot and strike rules are not a basket's), so the row is refused here exactly
        // when the engine would refuse it, naming the field. The spec's spot and volatility
        // of 1 are placeholders: the file gives each asset's.
        let spec = OptionSpec::european(option_type, 1.0, strike, rate, 0.0, 1.0, t);
        let Some(file) = baskets.files.get(i) else {
            return Err(vec!["basket: the file it names was not read".to_string()]);
        };
        let kind = match (multi, average) {
            (Some(MultiAsset::AmericanRainbow), BasketAverage::Max | BasketAverage::Min) => {
                let extreme = if average == BasketAverage::Max {
                    Extreme::Max
                } else {
                    Extreme::Min
                };
                // an empty or unreadable fixings cell was a reason above, so this is the count
                let dates = fixings.unwrap_or(0);
                rainbow_spec(file, &spec, extreme, dates)
                    .validate()
                    .map_err(why)?;
                RowKind::AmericanRainbow {
                    basket: i,
                    assets,
                    extreme,
                    dates,
                }
            }
            _ => {
                file.spec(option_type, strike, rate, t, average)
                    .validate()
                    .map_err(why)?;
                RowKind::Basket {
                    basket: i,
                    assets,
                    average,
                }
            }
        };
        return Ok((spec, kind));
    }
    if american {
        if barrier.is_some() || rebate.is_some_and(|r| r != 0.0) {
            return Err(vec!["style american takes no barrier or rebate".to_string()]);
        }
        if fixings == Some(0) {
            return Err(vec![
                "fixings = 0; style american takes its exercise dates there: a whole number >= 1, \
                 or empty for continuous exercise"
                    .to_string(),
            ]);
        }
        let spec = OptionSpec::european(option_type, spot, strike, rate, dividend, v, t);
        american_spec(&spec, fixings.unwrap_or(1))
            .validate()
            .map_err(why)?;
        return Ok((spec, RowKind::American(fixings)));
    }
    if american_barrier.is_some() {
        if fixings == Some(0) {
            return Err(vec![format!(
                "fixings = 0; style {style_text} takes its exercise dates there: a whole number >= 1, \
                 or empty for continuous exercise (the barrier is monitored continuously)"
            )]);
        }
        let mut spec = OptionSpec::european(option_type, spot, strike, rate, dividend, v, t)
            .with_style(style, None, barrier);
        spec.rebate = rebate.unwrap_or(0.0);
        american_barrier_spec(&spec, fixings.unwrap_or(1))
            .validate()
            .map_err(why)?;
        return Ok((spec, RowKind::AmericanBarrier(fixings)));
    }
    let kind = match heston_params {
        Some(h) => RowKind::Heston(h),
        None => RowKind::Plain,
    };
    // a heston row's volatility is not used; sqrt(theta) keeps the spec valid when empty
    let v = match heston_params {
        Some(h) if v.is_nan() => h.theta.max(0.0).sqrt(),
        _ => v,
    };
    let mut spec = OptionSpec::european(option_type, spot, strike, rate, dividend, v, t)
        .with_style(style, fixings, barrier);
    spec.rebate = rebate.unwrap_or(0.0);
    match heston_params {
        Some(heston) => HestonSpec { option: spec, heston }.validate().map_err(why)?,
        None => spec.validate().map_err(why)?,
    }
    Ok((spec, kind))
}

#[cfg(test)]
mod tests;
