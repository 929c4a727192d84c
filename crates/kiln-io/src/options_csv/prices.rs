//! The output side of the option CSV: the prices file ([`write_prices`], [`read_prices`])
//! and the bad-rows file ([`write_errors`]). Numbers are written in Rust's shortest
//! round-trip form, so reading a file back gives the same bits; writes are atomic.

use std::fs::File;
use std::path::Path;

use kiln_core::finance::PriceResult;

use super::RowError;
use crate::atomic::write_atomic;
use crate::error::{IoError, Result};
use crate::table::{self, number};

const PRICE_FORMAT: &str = "price CSV";
const ERRORS_FORMAT: &str = "errors CSV";

fn csv_error(path: &Path, e: csv::Error) -> IoError {
    table::csv_error(path, PRICE_FORMAT, e)
}

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

/// The columns a prices file with Monte Carlo Greeks' standard errors adds after
/// [`PRICE_COLUMNS`] ([`write_prices_with_errors`]).
pub const GREEK_ERROR_COLUMNS: [&str; 5] = ["delta_se", "gamma_se", "vega_se", "theta_se", "rho_se"];

/// The standard errors of one row's Greeks, where computed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GreekErrors {
    /// delta's.
    pub delta: Option<f64>,
    /// gamma's.
    pub gamma: Option<f64>,
    /// vega's.
    pub vega: Option<f64>,
    /// theta's.
    pub theta: Option<f64>,
    /// rho's.
    pub rho: Option<f64>,
}

impl GreekErrors {
    fn cells(&self) -> [(&'static str, Option<f64>); 5] {
        [
            ("delta_se", self.delta),
            ("gamma_se", self.gamma),
            ("vega_se", self.vega),
            ("theta_se", self.theta),
            ("rho_se", self.rho),
        ]
    }
}

/// The columns of the errors file, in order.
pub const ERROR_COLUMNS: [&str; 3] = ["row", "id", "reason"];

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

/// Writes the prices file (`id,price,std_error,delta,gamma,vega,theta,rho`), atomically.
/// A NaN or infinite value anywhere is an [`IoError::Encode`] and nothing is written.
pub fn write_prices(path: impl AsRef<Path>, records: &[PriceRecord]) -> Result<()> {
    write_rows(path.as_ref(), records, None)
}

/// [`write_prices`] with the Greeks' standard errors after the other columns
/// ([`GREEK_ERROR_COLUMNS`]), `errors[i]` for `records[i]` (as many), atomically; readers of
/// the prices file ([`read_prices`]) skip the extra columns.
pub fn write_prices_with_errors(
    path: impl AsRef<Path>,
    records: &[PriceRecord],
    errors: &[GreekErrors],
) -> Result<()> {
    let path = path.as_ref();
    if errors.len() != records.len() {
        return Err(IoError::Encode {
            path: path.to_owned(),
            format: PRICE_FORMAT,
            reason: format!(
                "{} rows of standard errors for {} prices",
                errors.len(),
                records.len()
            ),
        });
    }
    write_rows(path, records, Some(errors))
}

fn write_rows(path: &Path, records: &[PriceRecord], errors: Option<&[GreekErrors]>) -> Result<()> {
    let bad_se = errors.and_then(|es| {
        records.iter().zip(es).find_map(|(r, e)| {
            e.cells()
                .into_iter()
                .find_map(|(c, v)| v.filter(|v| !v.is_finite()).map(|v| (r, (c, v))))
        })
    });
    if let Some((r, (col, v))) = records
        .iter()
        .find_map(|r| r.non_finite().map(|b| (r, b)))
        .or(bad_se)
    {
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
        let extra: &[&str] = if errors.is_some() {
            &GREEK_ERROR_COLUMNS
        } else {
            &[]
        };
        wtr.write_record(PRICE_COLUMNS.iter().chain(extra))
            .map_err(|e| csv_error(path, e))?;
        for (i, r) in records.iter().enumerate() {
            let opt = |v: Option<f64>| v.map(number).unwrap_or_default();
            let mut row = vec![
                r.id.clone(),
                number(r.price),
                number(r.std_error),
                opt(r.delta),
                opt(r.gamma),
                opt(r.vega),
                opt(r.theta),
                opt(r.rho),
            ];
            if let Some(e) = errors.and_then(|es| es.get(i)) {
                row.extend(e.cells().into_iter().map(|(_, v)| opt(v)));
            }
            wtr.write_record(&row).map_err(|e| csv_error(path, e))?;
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
        wtr.write_record(ERROR_COLUMNS)
            .map_err(|e| table::csv_error(path, ERRORS_FORMAT, e))?;
        for e in errors {
            wtr.write_record([e.row.to_string().as_str(), e.id.as_str(), e.reason.as_str()])
                .map_err(|err| table::csv_error(path, ERRORS_FORMAT, err))?;
        }
        wtr.flush().map_err(|e| IoError::os(path, e))
    })
}
