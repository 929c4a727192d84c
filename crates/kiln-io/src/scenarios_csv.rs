//! The files of `kiln risk`: scenarios in ([`read_scenarios`]), a covariance of the shocks in
//! ([`read_covariance`]), P&L vectors out ([`write_pnl`]).
//!
//! The scenario CSV, one row per scenario and underlying:
//!
//! ```text
//! scenario,underlying,spot_shift,spot_shift_kind,vol_shift,rate_shift
//! crash,AAPL,-0.2,relative,0.1,
//! crash,*,-0.1,relative,0.05,-0.005
//! rally,AAPL,12.5,absolute,,
//! ```
//!
//! - The header names the columns in any order, case-insensitively (the option CSV's rules:
//!   a missing required column, an unknown one or one named twice is a header error naming
//!   each). Required: `scenario`, `underlying`. Optional: `spot_shift`, `spot_shift_kind`,
//!   `vol_shift`, `rate_shift` (each absent or empty: no move), and `id` (a row's name in
//!   messages; absent or empty: the data row number).
//! - `scenario` names the scenario (non-empty); its rows may be anywhere in the file, and
//!   scenarios keep the order of their first row. `underlying` names the underlying the
//!   row shocks, or `*` for every underlying the scenario does not name (and options that
//!   name none); a scenario and underlying given twice is a bad row naming the first.
//! - `spot_shift_kind` is `relative` (the default: `S' = S (1 + spot_shift)`, the shift
//!   `> -1`) or `absolute` (`S' = S + spot_shift`); `vol_shift` is added to the volatility
//!   (per `sqrt(year)`), `rate_shift` to the rate (continuously compounded per year). Every
//!   number must be finite.
//! - Rows are numbered from 1 after the header; every bad row is reported, with its number,
//!   file line and each reason naming the column, in one pass ([`ScenariosFile::errors`]).
//!
//! The covariance CSV of `kiln risk --simulate`: a header `factor,F1,F2,..` and one row per
//! factor in the header's order, its first cell the factor's name again, then the row of
//! the matrix. A factor is `UNDERLYING:spot` (the spot's log return), `UNDERLYING:vol` or
//! `UNDERLYING:rate` (absolute shifts), `*` for the default underlying. A bad cell names the
//! file, row and column; the matrix must be symmetric and positive semi-definite (checked
//! when scenarios are drawn, naming the file).
//!
//! The P&L CSV ([`write_pnl`]): `scenario,pnl` and, with a matrix, one more column per
//! option named by its id; numbers in shortest round-trip form; written atomically.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use kiln_core::finance::risk::{Factor, FactorKind, Scenario, ScenarioSet, Shock, SpotShift};

use crate::atomic::write_atomic;
use crate::error::{IoError, Result};
use crate::table::{self, number, read_rows, Row, RowError, Schema};

const FORMAT: &str = "scenario CSV";
const COV_FORMAT: &str = "covariance CSV";
const PNL_FORMAT: &str = "P&L CSV";

/// Every column of the scenario CSV, in the documented order.
pub const SCENARIO_COLUMNS: [&str; 7] = [
    "id",
    "scenario",
    "underlying",
    "spot_shift",
    "spot_shift_kind",
    "vol_shift",
    "rate_shift",
];

const ID: usize = 0;
const SCENARIO: usize = 1;
const UNDERLYING: usize = 2;
const SPOT: usize = 3;
const KIND: usize = 4;
const VOL: usize = 5;
const RATE: usize = 6;

const SCHEMA: Schema = Schema {
    format: FORMAT,
    columns: &SCENARIO_COLUMNS,
    required: &["scenario", "underlying"],
    id: ID,
    hints: &[
        ("name", "did you mean `scenario`?"),
        (
            "spot",
            "the spot's move goes in `spot_shift` (and `spot_shift_kind`)",
        ),
        ("vol", "the volatility's move goes in `vol_shift`"),
        ("rate", "the rate's move goes in `rate_shift`"),
    ],
};

/// What [`read_scenarios`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScenariosFile {
    /// The scenarios of the good rows, in the order of their first row. A scenario with a
    /// bad row is left out whole (see [`Self::dropped`]).
    pub set: ScenarioSet,
    /// Every bad row.
    pub errors: Vec<RowError>,
    /// The scenarios left out because a row of theirs is bad.
    pub dropped: Vec<String>,
}

/// Reads a scenario CSV (rules in the [module docs](self)). A missing or unreadable file or
/// a bad header is an error; bad rows are not: they come back in
/// [`ScenariosFile::errors`], all of them.
pub fn read_scenarios(path: impl AsRef<Path>) -> Result<ScenariosFile> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    parse_scenarios(path, file)
}

/// [`read_scenarios`] from any reader; `path` is only used in messages.
pub fn parse_scenarios<R: Read>(path: &Path, reader: R) -> Result<ScenariosFile> {
    // (scenario, underlying) -> first row
    let mut first: HashMap<(String, String), usize> = HashMap::new();
    let mut row_no = 0usize;
    let mut named_by_row: Vec<String> = Vec::new();
    let rows = read_rows(path, reader, &SCHEMA, |row, reasons| {
        row_no += 1;
        let name = row.text(SCENARIO);
        named_by_row.push(name.clone());
        let parsed = parse_row(row, reasons);
        if let Some((_, u, _)) = &parsed {
            if let Some(f) = first.get(&(name.clone(), u.clone())) {
                reasons.push(format!(
                    "scenario `{name}` shocks underlying `{u}` already in row {f}"
                ));
            } else {
                first.insert((name.clone(), u.clone()), row_no);
            }
        }
        parsed
    })?;
    // the scenario each bad row names (the parser saw every row that was not unreadable as
    // a whole; with the byte reader in flexible mode no row is)
    let seen_all = named_by_row.len() == rows.good.len() + rows.errors.len();
    let mut bad: Vec<String> = rows
        .errors
        .iter()
        .filter(|_| seen_all)
        .filter_map(|e| named_by_row.get(e.row - 1).filter(|n| !n.is_empty()).cloned())
        .collect();
    bad.sort();
    bad.dedup();
    let mut order: Vec<String> = Vec::new();
    let mut by_name: HashMap<String, Scenario> = HashMap::new();
    for g in rows.good {
        let (name, u, shock) = g.value;
        if bad.binary_search(&name).is_ok() {
            continue;
        }
        by_name
            .entry(name.clone())
            .or_insert_with(|| {
                order.push(name.clone());
                Scenario::new(name.clone())
            })
            .set(&u, shock);
    }
    Ok(ScenariosFile {
        set: ScenarioSet {
            scenarios: order.iter().filter_map(|n| by_name.remove(n)).collect(),
        },
        errors: rows.errors,
        dropped: bad,
    })
}

fn parse_row(row: &Row<'_>, reasons: &mut Vec<String>) -> Option<(String, String, Shock)> {
    let name = row.text(SCENARIO);
    if name.is_empty() {
        reasons.push("scenario is empty; name the scenario the row belongs to".into());
    }
    let u = row.text(UNDERLYING);
    if u.is_empty() {
        reasons.push("underlying is empty; name an underlying, or `*` for every underlying not named".into());
    }
    let x = row.num(SPOT, Some(0.0), reasons);
    let vol = row.num(VOL, Some(0.0), reasons);
    let rate = row.num(RATE, Some(0.0), reasons);
    let kind = row.text(KIND).to_ascii_lowercase();
    let spot = match (kind.as_str(), x) {
        (_, None) => None,
        ("" | "relative", Some(x)) if x <= -1.0 => {
            reasons.push(format!(
                "spot_shift: `{x}` relative is a fall of 100% or more; a relative shift must be > -1"
            ));
            None
        }
        ("" | "relative", Some(x)) => Some(SpotShift::Relative(x)),
        ("absolute", Some(x)) => Some(SpotShift::Absolute(x)),
        (_, Some(_)) => {
            reasons.push(format!(
                "spot_shift_kind: unknown `{}`; use relative (the default) or absolute",
                row.text(KIND)
            ));
            None
        }
    };
    if name.is_empty() || u.is_empty() {
        return None;
    }
    Some((
        name,
        u,
        Shock {
            spot: spot?,
            vol: vol?,
            rate: rate?,
        },
    ))
}

/// A covariance CSV's factors and matrix (row-major, in the factors' order).
#[derive(Clone, Debug, PartialEq)]
pub struct Covariance {
    /// The factors, in the header's order.
    pub factors: Vec<Factor>,
    /// The `n x n` matrix, row-major.
    pub matrix: Vec<f64>,
}

fn factor(text: &str) -> std::result::Result<Factor, String> {
    let Some((u, k)) = text.rsplit_once(':') else {
        return Err(format!(
            "factor `{text}`: write UNDERLYING:spot, UNDERLYING:vol or UNDERLYING:rate (`*` for every underlying)"
        ));
    };
    let kind: FactorKind = k
        .parse()
        .map_err(|_| format!("factor `{text}`: unknown input `{k}`; use spot, vol or rate"))?;
    if u.trim().is_empty() {
        return Err(format!(
            "factor `{text}`: the underlying is empty (use `*` for every underlying)"
        ));
    }
    Ok(Factor {
        underlying: u.trim().to_string(),
        kind,
    })
}

/// Reads a covariance CSV (module docs). Every bad cell is reported at once, naming the
/// file, row and column ([`IoError::Content`]).
pub fn read_covariance(path: impl AsRef<Path>) -> Result<Covariance> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    let content = |reason: String| IoError::Content {
        path: path.to_owned(),
        format: COV_FORMAT,
        reason,
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(file);
    let header = rdr
        .headers()
        .map_err(|e| table::csv_error(path, COV_FORMAT, e))?
        .clone();
    let mut problems = Vec::new();
    if header.get(0).map(str::to_ascii_lowercase).as_deref() != Some("factor") {
        problems.push("the header's first column must be `factor`".to_string());
    }
    let mut factors = Vec::new();
    for (c, h) in header.iter().enumerate().skip(1) {
        match factor(h) {
            Ok(f) => factors.push(f),
            Err(e) => problems.push(format!("header column {}: {e}", c + 1)),
        }
    }
    let n = header.len().saturating_sub(1);
    if n == 0 {
        problems.push("the header names no factor".to_string());
    }
    let mut matrix = Vec::with_capacity(n * n);
    let mut rows = 0usize;
    for (r, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| table::csv_error(path, COV_FORMAT, e))?;
        if rec.iter().all(str::is_empty) {
            continue;
        }
        rows += 1;
        let row = r + 1;
        if rec.len() != n + 1 {
            problems.push(format!(
                "row {row}: {} cells; the header has {} columns",
                rec.len(),
                n + 1
            ));
        }
        let want = header.get(rows).unwrap_or("");
        if rec.get(0) != Some(want) {
            problems.push(format!(
                "row {row}, column factor: `{}`; row {rows} must be factor `{want}` (rows in the header's order)",
                rec.get(0).unwrap_or("")
            ));
        }
        for c in 1..=n {
            let t = rec.get(c).unwrap_or("");
            let col = header.get(c).unwrap_or("");
            match t.parse::<f64>() {
                Ok(v) if v.is_finite() => matrix.push(v),
                _ => {
                    problems.push(format!("row {row}, column `{col}`: `{t}` is not a finite number"));
                    matrix.push(f64::NAN);
                }
            }
        }
    }
    if rows != n && n > 0 {
        problems.push(format!("{rows} rows for {n} factors; the matrix must be square"));
    }
    if problems.is_empty() {
        Ok(Covariance { factors, matrix })
    } else {
        Err(content(problems.join("; ")))
    }
}

/// Writes the P&L CSV atomically: `scenario,pnl`, and with `matrix` (row-major scenarios x
/// options, quantities included) a column per option headed by `ids[i]`. A non-finite value
/// is an [`IoError::Encode`] and nothing is written.
pub fn write_pnl(
    path: impl AsRef<Path>,
    scenarios: &[String],
    pnl: &[f64],
    matrix: Option<(&[String], &[f64])>,
) -> Result<()> {
    let path = path.as_ref();
    let encode = |reason: String| IoError::Encode {
        path: path.to_owned(),
        format: PNL_FORMAT,
        reason,
    };
    if scenarios.len() != pnl.len() {
        return Err(encode(format!(
            "{} scenario names for {} P&L values",
            scenarios.len(),
            pnl.len()
        )));
    }
    if let Some((ids, m)) = matrix {
        if m.len() != ids.len() * pnl.len() {
            return Err(encode(format!(
                "a matrix of {} values for {} scenarios x {} options",
                m.len(),
                pnl.len(),
                ids.len()
            )));
        }
        if let Some(k) = m.iter().position(|v| !v.is_finite()) {
            let n = ids.len().max(1);
            return Err(encode(format!(
                "scenario `{}`, option `{}`: P&L {}; kiln never writes a non-finite value",
                scenarios[k / n],
                ids[k % n],
                m[k]
            )));
        }
    }
    if let Some(j) = pnl.iter().position(|v| !v.is_finite()) {
        return Err(encode(format!(
            "scenario `{}`: P&L {}; kiln never writes a non-finite value",
            scenarios[j], pnl[j]
        )));
    }
    let err = |e: csv::Error| table::csv_error(path, PNL_FORMAT, e);
    write_atomic(path, ".csv", |w| {
        let mut wtr = csv::Writer::from_writer(w);
        let mut head = vec!["scenario".to_string(), "pnl".to_string()];
        if let Some((ids, _)) = matrix {
            head.extend(ids.iter().cloned());
        }
        wtr.write_record(&head).map_err(err)?;
        let n = matrix.map_or(0, |(ids, _)| ids.len());
        for (j, (name, p)) in scenarios.iter().zip(pnl).enumerate() {
            let mut rec = vec![name.clone(), number(*p)];
            if let Some((_, m)) = matrix {
                rec.extend(m[j * n..(j + 1) * n].iter().map(|v| number(*v)));
            }
            wtr.write_record(&rec).map_err(err)?;
        }
        wtr.flush().map_err(|e| IoError::os(path, e))
    })
}

#[cfg(test)]
#[path = "scenarios_csv_tests.rs"]
mod tests;
