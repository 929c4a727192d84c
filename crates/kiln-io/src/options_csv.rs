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
//!   there). Any other column, or a column named twice, is an error for the whole file that
//!   names it.
//! - `type` is `call` or `put`, `style` one of [`Style::name`]'s names (`european`,
//!   `asian_arithmetic`, `asian_geometric`, `barrier_up_out`, `barrier_up_in`,
//!   `barrier_down_out`, `barrier_down_in`) or `american` ([`RowKind::American`]: its
//!   `fixings` are the exercise dates, empty for continuous exercise), both
//!   case-insensitive. A heston row ([`RowKind::Heston`]) is a `european` or
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
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use csv::ByteRecord;
use kiln_core::finance::american::AmericanSpec;
use kiln_core::finance::heston::{HestonParams, HestonSpec};
use kiln_core::finance::{OptionSpec, OptionType, PriceResult, Style};

use crate::atomic::write_atomic;
use crate::error::{IoError, Result};

const FORMAT: &str = "option CSV";
const PRICE_FORMAT: &str = "price CSV";

/// Input columns.
const NCOLS: usize = 18;

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

/// The columns of the prices file, in order.
pub const PRICE_COLUMNS: [&str; 8] = [
    "id",
    "price",
    "std_error",
    "delta",
    "gamma",
    "vega",
    "theta",
    "rho",
];

/// The columns of the errors file, in order.
pub const ERROR_COLUMNS: [&str; 3] = ["row", "id", "reason"];

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

/// The style name of American rows (not a [`Style`]: Longstaff-Schwartz and the tree price
/// them, not the path engine).
pub const AMERICAN_STYLE: &str = "american";

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

    /// The American option of an american row, exercisable on `dates` equally spaced dates
    /// (its own `fixings`, else `default_dates`).
    pub fn american(&self, default_dates: u32) -> Option<AmericanSpec> {
        match self.kind {
            RowKind::American(dates) => Some(american_spec(&self.spec, dates.unwrap_or(default_dates))),
            _ => None,
        }
    }
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

/// One bad row: where it is and why it cannot be priced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowError {
    /// Data row number, 1-based (the first row after the header is 1).
    pub row: usize,
    /// The file line the row starts on, 1-based.
    pub line: u64,
    /// The row's id as written (the data row number where the file has none).
    pub id: String,
    /// Every problem found in the row, separated by `; `.
    pub reason: String,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "row {} (line {}, id `{}`): {}",
            self.row, self.line, self.id, self.reason
        )
    }
}

/// What [`read_options`] found: the good rows and the bad ones, each in file order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OptionsFile {
    /// The rows that parsed and validated.
    pub options: Vec<OptionRow>,
    /// The rows that did not, with every reason.
    pub errors: Vec<RowError>,
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
pub fn parse_options<R: Read>(path: &Path, mut reader: R) -> Result<OptionsFile> {
    // Read whole: the csv crate's line numbers drift on blank lines and CRLF, so the line a
    // row starts on is counted here from its byte offset.
    let mut data = Vec::new();
    reader.read_to_end(&mut data).map_err(|e| IoError::os(path, e))?;
    let newlines: Vec<usize> = data
        .iter()
        .enumerate()
        .filter_map(|(i, b)| (*b == b'\n').then_some(i))
        .collect();
    let line_at = |pos: Option<&csv::Position>| -> u64 {
        let mut b = pos.map_or(0, |p| p.byte() as usize);
        while b < data.len() && data[b].is_ascii_whitespace() {
            b += 1;
        }
        1 + newlines.partition_point(|&n| n < b) as u64
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(data.as_slice());
    let headers = rdr.byte_headers().map_err(|e| csv_error(path, e))?.clone();
    let cols = columns(path, &headers)?;
    let mut out = OptionsFile::default();
    let mut first_row_of_id: HashMap<String, usize> = HashMap::new();
    let mut row = 0;
    for rec in rdr.byte_records() {
        let rec = match rec {
            // Lines of nothing but empty cells (`,,,`) are skipped like blank lines.
            Ok(r) if r.iter().all(|f| f.is_empty()) => continue,
            Ok(r) => {
                row += 1;
                r
            }
            Err(e) if matches!(e.kind(), csv::ErrorKind::Io(_)) => return Err(csv_error(path, e)),
            Err(e) => {
                row += 1;
                let line = line_at(e.position());
                out.errors.push(RowError {
                    row,
                    line,
                    id: row.to_string(),
                    reason: format!("unreadable row: {e}"),
                });
                continue;
            }
        };
        let line = line_at(rec.position());
        let explicit_id = text(&rec, cols[ID]);
        let id = if explicit_id.is_empty() {
            row.to_string()
        } else {
            explicit_id
        };
        let mut reasons = Vec::new();
        if rec.len() > headers.len() {
            reasons.push(format!(
                "{} fields, but the header names {} columns",
                rec.len(),
                headers.len()
            ));
        }
        let parsed = parse_spec(&rec, &cols);
        if let Err(r) = &parsed {
            reasons.extend(r.iter().cloned());
        }
        if cols[ID].is_some() && !text(&rec, cols[ID]).is_empty() {
            match first_row_of_id.get(&id) {
                Some(first) => reasons.push(format!("id `{id}` is already used by row {first}")),
                None => {
                    first_row_of_id.insert(id.clone(), row);
                }
            }
        }
        match parsed {
            Ok((spec, kind)) if reasons.is_empty() => out.options.push(OptionRow {
                row,
                line,
                id,
                spec,
                kind,
            }),
            _ => out.errors.push(RowError {
                row,
                line,
                id,
                reason: reasons.join("; "),
            }),
        }
    }
    Ok(out)
}

/// Maps the header to a cell index per input column, or says everything wrong with it.
fn columns(path: &Path, headers: &ByteRecord) -> Result<[Option<usize>; NCOLS]> {
    let mut idx = [None; NCOLS];
    let (mut unknown, mut twice) = (Vec::new(), Vec::new());
    for (i, h) in headers.iter().enumerate() {
        let name = String::from_utf8_lossy(h).trim().to_ascii_lowercase();
        match INPUT_COLUMNS.iter().position(|c| *c == name) {
            Some(c) if idx[c].is_some() => twice.push(format!("`{name}`")),
            Some(c) => idx[c] = Some(i),
            None if name.is_empty() => unknown.push(format!("an unnamed column (number {})", i + 1)),
            None => unknown.push(format!("`{name}`")),
        }
    }
    if headers.is_empty() || (headers.len() == 1 && headers[0].is_empty()) {
        return Err(IoError::corrupt(
            path,
            FORMAT,
            format!(
                "the file is empty; it must start with a header row naming the columns ({})",
                INPUT_COLUMNS.join(",")
            ),
        ));
    }
    let missing: Vec<String> = REQUIRED_COLUMNS
        .iter()
        .filter(|c| {
            INPUT_COLUMNS
                .iter()
                .position(|x| x == *c)
                .is_some_and(|p| idx[p].is_none())
        })
        .map(|c| format!("`{c}`"))
        .collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("missing required column(s) {}", missing.join(", ")));
    }
    if !unknown.is_empty() {
        problems.push(format!("unknown column(s) {}", unknown.join(", ")));
    }
    if !twice.is_empty() {
        problems.push(format!("column(s) named twice: {}", twice.join(", ")));
    }
    if problems.is_empty() {
        return Ok(idx);
    }
    Err(IoError::corrupt(
        path,
        FORMAT,
        format!(
            "bad header: {}. The header must name {} and may add id, dividend, fixings, barrier, rebate, model, kappa, theta, xi, rho, v0, in any order",
            problems.join("; "),
            REQUIRED_COLUMNS.join(", ")
        ),
    ))
}

/// The trimmed text of a cell; empty where the column or the cell is absent.
fn text(rec: &ByteRecord, col: Option<usize>) -> String {
    col.and_then(|i| rec.get(i))
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

fn parse_spec(
    rec: &ByteRecord,
    cols: &[Option<usize>; NCOLS],
) -> std::result::Result<(OptionSpec, RowKind), Vec<String>> {
    let mut reasons = Vec::new();
    let cell = |c: usize| text(rec, cols[c]);
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
    // an American row is carried as a European (its exercise is RowKind's)
    let style = if american {
        Some(Style::European)
    } else {
        Style::ALL.into_iter().find(|s| s.name() == style_text)
    };
    if style.is_none() {
        let names: Vec<&str> = Style::ALL
            .iter()
            .map(|s| s.name())
            .chain([AMERICAN_STYLE])
            .collect();
        reasons.push(if style_text.is_empty() {
            format!("style is empty; use one of {}", names.join(", "))
        } else {
            format!("unknown style `{}`; use one of {}", cell(STYLE), names.join(", "))
        });
    }
    let mut num = |c: usize, default: Option<f64>| -> Option<f64> {
        let t = cell(c);
        let name = INPUT_COLUMNS[c];
        if t.is_empty() {
            if default.is_none() {
                reasons.push(format!("{name} is empty"));
            }
            return default;
        }
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() => Some(v),
            Ok(_) => {
                reasons.push(format!("{name}: `{t}` is not a finite number"));
                None
            }
            Err(_) => {
                reasons.push(format!("{name}: `{t}` is not a number"));
                None
            }
        }
    };
    // Heston rows need no volatility: NaN marks "not given" until theta is known
    let [spot, strike, rate, dividend, volatility, maturity, rebate] =
        [SPOT, STRIKE, RATE, DIVIDEND, VOLATILITY, MATURITY, REBATE].map(|c| {
            let default = match c {
                DIVIDEND | REBATE => Some(0.0),
                VOLATILITY if heston => Some(f64::NAN),
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
    if heston && american {
        reasons.push("style american is priced under Black-Scholes only (model bs)".to_string());
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
    if let Some(s) = style {
        if s.is_barrier() && barrier_text.is_empty() {
            reasons.push(format!(
                "barrier is empty; style {} needs a barrier level",
                s.name()
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

/// One row of the prices file.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceRecord {
    /// The option's id.
    pub id: String,
    /// The price.
    pub price: f64,
    /// Its standard error (0 for closed forms).
    pub std_error: f64,
    /// dV/dS, where computed.
    pub delta: Option<f64>,
    /// d2V/dS2, where computed.
    pub gamma: Option<f64>,
    /// dV/dsigma per 1.0 of volatility, where computed.
    pub vega: Option<f64>,
    /// -dV/dT per year, where computed.
    pub theta: Option<f64>,
    /// dV/dr per 1.0 of rate, where computed.
    pub rho: Option<f64>,
}

impl PriceRecord {
    /// The row for option `id` priced as `r`.
    pub fn new(id: impl Into<String>, r: &PriceResult) -> Self {
        PriceRecord {
            id: id.into(),
            price: r.price,
            std_error: r.std_error,
            delta: r.delta,
            gamma: r.gamma,
            vega: r.vega,
            theta: r.theta,
            rho: r.rho,
        }
    }

    /// The first value that is NaN or infinite, as `(column, value)`.
    pub fn non_finite(&self) -> Option<(&'static str, f64)> {
        let greeks = [
            ("delta", self.delta),
            ("gamma", self.gamma),
            ("vega", self.vega),
            ("theta", self.theta),
            ("rho", self.rho),
        ];
        [("price", Some(self.price)), ("std_error", Some(self.std_error))]
            .into_iter()
            .chain(greeks)
            .find_map(|(c, v)| v.filter(|v| !v.is_finite()).map(|v| (c, v)))
    }
}

/// Shortest round-trip text of a finite `v`; exponent notation outside `1e-5..1e16`.
fn number(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if (1e-5..1e16).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Writes the prices file (`id,price,std_error,delta,gamma,vega,theta,rho`), atomically.
/// A NaN or infinite value anywhere is an [`IoError::Encode`] and nothing is written.
pub fn write_prices(path: impl AsRef<Path>, records: &[PriceRecord]) -> Result<()> {
    let path = path.as_ref();
    if let Some((r, (col, v))) = records.iter().find_map(|r| r.non_finite().map(|b| (r, b))) {
        return Err(IoError::Encode {
            path: path.to_owned(),
            format: PRICE_FORMAT,
            reason: format!(
                "option `{}`: {col} is {v}; kiln never writes a non-finite value",
                r.id
            ),
        });
    }
    write_atomic(path, ".csv", |w| {
        let mut wtr = csv::Writer::from_writer(w);
        wtr.write_record(PRICE_COLUMNS).map_err(|e| csv_error(path, e))?;
        for r in records {
            let opt = |v: Option<f64>| v.map(number).unwrap_or_default();
            wtr.write_record([
                r.id.clone(),
                number(r.price),
                number(r.std_error),
                opt(r.delta),
                opt(r.gamma),
                opt(r.vega),
                opt(r.theta),
                opt(r.rho),
            ])
            .map_err(|e| csv_error(path, e))?;
        }
        wtr.flush().map_err(|e| IoError::os(path, e))
    })
}

/// Reads a prices file written by [`write_prices`] (columns in any order).
pub fn read_prices(path: impl AsRef<Path>) -> Result<Vec<PriceRecord>> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(file);
    let headers = rdr.headers().map_err(|e| csv_error(path, e))?.clone();
    let mut idx = [0usize; 8];
    for (slot, name) in idx.iter_mut().zip(PRICE_COLUMNS) {
        *slot = headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| IoError::corrupt(path, PRICE_FORMAT, format!("no `{name}` column")))?;
    }
    let mut out = Vec::new();
    for (k, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| csv_error(path, e))?;
        let cell = |c: usize| rec.get(idx[c]).unwrap_or("");
        let bad = |what: String| IoError::corrupt(path, PRICE_FORMAT, format!("row {}: {what}", k + 1));
        let opt = |c: usize| -> Result<Option<f64>> {
            let t = cell(c);
            let num = t
                .parse::<f64>()
                .map_err(|_| bad(format!("{}: `{t}` is not a number", PRICE_COLUMNS[c])));
            (!t.is_empty()).then_some(num).transpose()
        };
        let need = |c: usize| opt(c)?.ok_or_else(|| bad(format!("{} is empty", PRICE_COLUMNS[c])));
        out.push(PriceRecord {
            id: cell(0).to_string(),
            price: need(1)?,
            std_error: need(2)?,
            delta: opt(3)?,
            gamma: opt(4)?,
            vega: opt(5)?,
            theta: opt(6)?,
            rho: opt(7)?,
        });
    }
    Ok(out)
}

/// Writes the errors file (`row,id,reason`, `row` the data row number), atomically.
pub fn write_errors(path: impl AsRef<Path>, errors: &[RowError]) -> Result<()> {
    let path = path.as_ref();
    write_atomic(path, ".csv", |w| {
        let mut wtr = csv::Writer::from_writer(w);
        wtr.write_record(ERROR_COLUMNS).map_err(|e| csv_error(path, e))?;
        for e in errors {
            wtr.write_record([e.row.to_string().as_str(), e.id.as_str(), e.reason.as_str()])
                .map_err(|err| csv_error(path, err))?;
        }
        wtr.flush().map_err(|e| IoError::os(path, e))
    })
}

fn csv_error(path: &Path, e: csv::Error) -> IoError {
    if e.is_io_error() {
        IoError::os(path, std::io::Error::from(e))
    } else {
        IoError::corrupt(path, FORMAT, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> OptionsFile {
        parse_options(Path::new("test.csv"), s.as_bytes()).unwrap()
    }

    #[test]
    fn heston_and_american_rows_parse_and_bad_ones_say_why() {
        let f = parse(
            "id,type,style,spot,strike,rate,volatility,maturity,fixings,model,kappa,theta,xi,rho,v0\n\
             h1,call,european,100,100,0,,1,,heston,1.5768,0.0398,0.5751,-0.5711,0.0175\n\
             h2,put,asian_arithmetic,100,95,0.02,0.3,1,12,HESTON,2,0.04,0.3,-0.7,0.04\n\
             a1,put,american,36,40,0.06,0.2,1,50,,,,,,\n\
             a2,put,AMERICAN,36,40,0.06,0.2,1,,bs,,,,,\n\
             b1,call,european,100,100,0.01,0.2,1,,,2,,,,\n\
             b2,call,asian_geometric,100,100,0.01,0.2,1,4,heston,2,0.04,0.3,-0.7,0.04\n\
             b3,call,european,100,100,0.01,0.2,1,,heston,2,0.04,0.3,,0.04\n\
             b4,put,american,36,40,0.06,0.2,1,,heston,2,0.04,0.3,-0.7,0.04\n\
             b5,put,american,36,40,0.06,0.2,1,0,,,,,,\n\
             b6,call,european,100,100,0.01,0.2,1,,sabr,,,,,\n",
        );
        let row = |id: &str| f.options.iter().find(|o| o.id == id).unwrap();
        let h1 = row("h1").heston().unwrap();
        assert_eq!(h1.heston.kappa, 1.5768);
        assert!((h1.option.volatility - 0.0398f64.sqrt()).abs() < 1e-15);
        assert_eq!(row("h2").spec.fixings, Some(12));
        assert!(matches!(row("h2").kind, RowKind::Heston(_)));
        assert_eq!(row("a1").kind, RowKind::American(Some(50)));
        assert_eq!(row("a1").american(7).unwrap().exercise_dates, 50);
        assert_eq!(row("a2").american(7).unwrap().exercise_dates, 7);
        assert!(row("a2").heston().is_none());
        let why = |id: &str| f.errors.iter().find(|e| e.id == id).unwrap().reason.clone();
        assert!(why("b1").contains("kappa given for model bs"), "{}", why("b1"));
        assert!(why("b2").contains("european"), "{}", why("b2"));
        assert!(why("b3").contains("rho is empty"), "{}", why("b3"));
        assert!(why("b4").contains("Black-Scholes only"), "{}", why("b4"));
        assert!(why("b5").contains("exercise"), "{}", why("b5"));
        assert!(why("b6").contains("unknown model `sabr`"), "{}", why("b6"));
        assert_eq!(f.options.len(), 4);
        assert_eq!(f.errors.len(), 6);
    }

    fn header_error(s: &str) -> String {
        parse_options(Path::new("test.csv"), s.as_bytes())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn columns_in_any_order_and_case() {
        let a = parse(
            "id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier\n\
             e1,call,european,100,100,0.05,0.01,0.2,1,,\n\
             a1,put,asian_geometric,100,95,0.05,0.01,0.2,1,12,\n\
             b1,call,barrier_up_out,100,100,0.05,0.01,0.2,1,,130\n",
        );
        let b = parse(
            " Barrier , MATURITY,volatility,Fixings,dividend,rate,strike,spot,Style,TYPE,id\n\
             130 ,1,0.2,,0.01,0.05,100,100,BARRIER_UP_OUT,Call,b1\n\
             ,1,0.2,,0.01,0.05,100,100,european,call,e1\n\
             \n\
             ,,,,,,,,,,\n\
             ,1,0.2,12,0.01,0.05,95,100,asian_geometric,put,a1\n",
        );
        assert!(
            a.errors.is_empty() && b.errors.is_empty(),
            "{:?} {:?}",
            a.errors,
            b.errors
        );
        let find = |f: &OptionsFile, id: &str| f.options.iter().find(|o| o.id == id).unwrap().spec;
        for id in ["e1", "a1", "b1"] {
            assert_eq!(find(&a, id), find(&b, id), "{id}");
        }
        assert_eq!(find(&a, "b1").barrier, Some(130.0));
        assert_eq!(find(&a, "a1").fixings, Some(12));
        assert_eq!(find(&a, "a1").option_type, OptionType::Put);
        // The blank line is skipped: data rows stay 1..=3, file lines say where.
        let rows: Vec<(usize, u64)> = b.options.iter().map(|o| (o.row, o.line)).collect();
        assert_eq!(rows, vec![(1, 2), (2, 3), (3, 6)]);
    }

    #[test]
    fn optional_columns_default() {
        let f = parse(
            "type,style,spot,strike,rate,volatility,maturity\r\n\r\nput,european,100,90,0.03,0.25,0.5\r\n",
        );
        assert!(f.errors.is_empty(), "{:?}", f.errors);
        let o = &f.options[0];
        assert_eq!((o.id.as_str(), o.spec.dividend, o.row, o.line), ("1", 0.0, 1, 3));
        let f = parse("id,type,style,spot,strike,rate,dividend,volatility,maturity\n,call,european,100,90,0.03,,0.25,0.5\n");
        assert!(f.errors.is_empty(), "{:?}", f.errors);
        assert_eq!((f.options[0].id.as_str(), f.options[0].spec.dividend), ("1", 0.0));
    }

    #[test]
    fn header_problems_name_the_columns() {
        let e = header_error("id,type,style,spot,rate,vol,maturity\n");
        assert!(
            e.contains("missing required column(s) `strike`, `volatility`"),
            "{e}"
        );
        assert!(e.contains("unknown column(s) `vol`"), "{e}");
        let e = header_error("type,style,spot,strike,rate,volatility,maturity,spot\n");
        assert!(e.contains("named twice: `spot`"), "{e}");
        let e = header_error("");
        assert!(e.contains("empty"), "{e}");
        assert!(e.contains("test.csv"), "{e}");
    }

    #[test]
    fn every_bad_row_is_reported_with_its_number() {
        let f = parse(
            "id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier\n\
             ok1,call,european,100,100,0.05,0,0.2,1,,\n\
             t,straddle,european,100,100,0.05,0,0.2,1,,\n\
             s,call,bermudan,100,100,0.05,0,0.2,1,,\n\
             n,call,european,abc,100,0.05,0,0.2,1,,\n\
             v,call,european,100,100,0.05,0,0,1,,\n\
             m,call,european,100,100,0.05,0,0.2,-1,,\n\
             b,call,barrier_down_in,100,100,0.05,0,0.2,1,,\n\
             f,call,asian_arithmetic,100,100,0.05,0,0.2,1,,\n\
             nan,call,european,100,NaN,0.05,0,0.2,1,,\n\
             inf,put,european,100,100,inf,0,0.2,1,,\n\
             x,call,european,100,100,0.05,0,0.2,1,,90\n\
             fx,call,asian_geometric,100,100,0.05,0,0.2,1,2.5,\n\
             ok1,put,european,100,100,0.05,0,0.2,1,,\n\
             two,put,european,-5,100,0.05,0,zero,1,,\n\
             ok2,put,asian_arithmetic,100,100,0.05,0,0.2,1,12,\n",
        );
        let ids: Vec<&str> = f.options.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, vec!["ok1", "ok2"]);
        let want: [(usize, &str, &[&str]); 13] = [
            (2, "t", &["unknown type `straddle`"]),
            (3, "s", &["unknown style `bermudan`"]),
            (4, "n", &["spot: `abc` is not a number"]),
            (5, "v", &["volatility = 0"]),
            (6, "m", &["maturity = -1"]),
            (7, "b", &["barrier is empty", "barrier_down_in"]),
            (8, "f", &["fixings is empty", "asian_arithmetic"]),
            (9, "nan", &["strike: `NaN` is not a finite number"]),
            (10, "inf", &["rate: `inf` is not a finite number"]),
            (11, "x", &["barrier = 90 given for style european"]),
            (12, "fx", &["fixings: `2.5` is not a whole number"]),
            (13, "ok1", &["id `ok1` is already used by row 1"]),
            (14, "two", &["volatility: `zero` is not a number"]),
        ];
        assert_eq!(f.errors.len(), want.len(), "{:#?}", f.errors);
        for (e, (row, id, parts)) in f.errors.iter().zip(want) {
            assert_eq!((e.row, e.id.as_str()), (row, id), "{e}");
            assert_eq!(e.line, row as u64 + 1);
            for p in parts {
                assert!(e.reason.contains(p), "row {row}: `{}` lacks `{p}`", e.reason);
            }
        }
        assert_eq!(f.rows(), 15);
        assert!(f.errors[1]
            .to_string()
            .starts_with("row 3 (line 4, id `s`): unknown style"));
    }

    #[test]
    fn ragged_rows_are_row_errors() {
        let f = parse("type,style,spot,strike,rate,volatility,maturity\ncall,european,100\ncall,european,100,100,0.05,0.2,1,7\n");
        assert_eq!(f.errors.len(), 2, "{:?}", f.errors);
        assert!(
            f.errors[0].reason.contains("strike is empty"),
            "{}",
            f.errors[0].reason
        );
        assert!(f.errors[1].reason.contains("8 fields"), "{}", f.errors[1].reason);
    }

    #[test]
    fn missing_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope.csv");
        let e = read_options(&p).unwrap_err();
        assert!(matches!(e, IoError::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("nope.csv"));
    }

    #[test]
    fn prices_round_trip_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prices.csv");
        let mut exact = PriceResult::exact(10.450583572185565);
        exact.delta = Some(0.6368306511756191);
        exact.theta = Some(-6.414027546438197);
        let recs = vec![
            PriceRecord::new("a,b \"quoted\"", &exact),
            PriceRecord {
                id: "tiny".into(),
                price: 1.234e-12,
                std_error: 3.0e-7,
                delta: None,
                gamma: Some(2.5e20),
                vega: Some(-0.0),
                theta: None,
                rho: Some(1.0 / 3.0),
            },
        ];
        write_prices(&p, &recs).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.starts_with("id,price,std_error,delta,gamma,vega,theta,rho\n"),
            "{text}"
        );
        assert!(
            text.contains(",0,0.6368306511756191,,,-6.414027546438197,\n"),
            "{text}"
        );
        let back = read_prices(&p).unwrap();
        // f64 `==`: the same bits, up to the sign of zero.
        assert_eq!(back, recs);
    }

    #[test]
    fn non_finite_values_are_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prices.csv");
        let mut r = PriceRecord::new("bad", &PriceResult::exact(f64::NAN));
        let e = write_prices(&p, std::slice::from_ref(&r)).unwrap_err();
        assert!(e.to_string().contains("price is NaN"), "{e}");
        r.price = 1.0;
        r.vega = Some(f64::INFINITY);
        let e = write_prices(&p, &[r]).unwrap_err();
        assert!(e.to_string().contains("vega is inf"), "{e}");
        assert!(!p.exists());
    }

    #[test]
    fn errors_file_quotes_reasons() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prices.errors.csv");
        let errs = vec![RowError {
            row: 3,
            line: 4,
            id: "x".into(),
            reason: "spot: `a,b` is not a number; strike is empty".into(),
        }];
        write_errors(&p, &errs).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text,
            "row,id,reason\n3,x,\"spot: `a,b` is not a number; strike is empty\"\n"
        );
    }
}
