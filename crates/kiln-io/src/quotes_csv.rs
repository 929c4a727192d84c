//! The quote CSV of `kiln implied-vol`: European option quotes in ([`read_quotes`]), their
//! implied volatilities out ([`write_vols`]); bad rows go out through
//! [`crate::options_csv::write_errors`], as `kiln price`'s do.
//!
//! Input rules (the option CSV's, [`crate::options_csv`], for these columns):
//! - A header row names the columns, in any order, case-insensitively, surrounding spaces
//!   ignored. Required: `type,price,spot,strike,rate,maturity`. Optional: `id` (absent or
//!   empty: the data row number) and `dividend` (absent or empty: 0). Any other column, or
//!   a column named twice, is a header error for the whole file
//!   ([`IoError::Content`](crate::IoError::Content): the file is readable, its header breaks
//!   the rules) that names each such column, lists the accepted ones and, where an unknown
//!   name nearly spells one (`vol`, `strke`), suggests it.
//! - `type` is `call` or `put`; `price` is the option's discounted price (what it costs
//!   today); `rate` and `dividend` are continuously compounded per year, `maturity` in years.
//! - Rows are numbered from 1 at the first row after the header (blank lines and lines of
//!   only empty cells are skipped and not counted). A bad row is reported with that number,
//!   the file line it starts on, its id and every reason found, each naming its column: an
//!   unknown type, an empty, non-numeric or non-finite cell, a spot, strike or maturity
//!   `<= 0`, a duplicate id, more cells than the header has columns. Reading never stops at
//!   the first bad row.
//! - A price that no volatility reaches (zero or negative, below the intrinsic value, at or
//!   above the upper bound) does not make a bad row: the quote is read, and the output says
//!   why it has no volatility.
//!
//! Output: `id,volatility,reason,detail` ([`write_vols`]): the volatility per `sqrt(year)`
//! (0.2 for 20%) in Rust's shortest round-trip form, or an empty cell with the reason's code
//! ([`NoVolatility::code`]) and its message. Writes are atomic.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use kiln_core::finance::implied::{NoVolatility, Quote};
use kiln_core::finance::OptionType;

use crate::atomic::write_atomic;
use crate::error::{IoError, Result};
use crate::options_csv::RowError;
use crate::table::{self, number, read_rows, Row, Schema};

/// The quote CSV's columns, for the shared reader.
const SCHEMA: Schema = Schema {
    format: "quote CSV",
    columns: &QUOTE_COLUMNS,
    required: &REQUIRED_QUOTE_COLUMNS,
    id: ID,
    hints: &[
        (
            "volatility",
            "the volatility is what kiln implied-vol computes; leave it out",
        ),
        (
            "vol",
            "the volatility is what kiln implied-vol computes; leave it out",
        ),
        (
            "sigma",
            "the volatility is what kiln implied-vol computes; leave it out",
        ),
        ("expiry", "did you mean `maturity`? (in years)"),
    ],
};
const VOL_FORMAT: &str = "volatility CSV";

/// Every input column, in the documented order.
pub const QUOTE_COLUMNS: [&str; 8] = [
    "id", "type", "price", "spot", "strike", "rate", "dividend", "maturity",
];

/// The input columns every file must have.
pub const REQUIRED_QUOTE_COLUMNS: [&str; 6] = ["type", "price", "spot", "strike", "rate", "maturity"];

/// The columns of the volatilities file, in order.
pub const VOL_COLUMNS: [&str; 4] = ["id", "volatility", "reason", "detail"];

const ID: usize = 0;
const TYPE: usize = 1;
const PRICE: usize = 2;
const SPOT: usize = 3;
const STRIKE: usize = 4;
const RATE: usize = 5;
const DIVIDEND: usize = 6;
const MATURITY: usize = 7;

/// One good row of a quote CSV.
#[derive(Clone, Debug, PartialEq)]
pub struct QuoteRow {
    /// Data row number, 1-based (the first row after the header is 1).
    pub row: usize,
    /// The file line the row starts on, 1-based.
    pub line: u64,
    /// The row's id as written (the data row number where the file has none).
    pub id: String,
    /// The quote.
    pub quote: Quote,
}

/// What [`read_quotes`] found: the good rows and the bad ones, each in file order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuotesFile {
    /// The rows that parsed and validated.
    pub quotes: Vec<QuoteRow>,
    /// The rows that did not, with every reason.
    pub errors: Vec<RowError>,
}

impl QuotesFile {
    /// Data rows in the file, good and bad.
    pub fn rows(&self) -> usize {
        self.quotes.len() + self.errors.len()
    }
}

/// Reads a quote CSV (rules in the [module docs](self)). A missing or unreadable file, or a
/// header that lacks a required column or names an unknown one, is an error; bad rows are
/// not: they come back in [`QuotesFile::errors`], every one of them.
pub fn read_quotes(path: impl AsRef<Path>) -> Result<QuotesFile> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    parse_quotes(path, file)
}

/// [`read_quotes`] from any reader; `path` is only used in error messages.
pub fn parse_quotes<R: Read>(path: &Path, reader: R) -> Result<QuotesFile> {
    let rows = read_rows(path, reader, &SCHEMA, parse_quote)?;
    Ok(QuotesFile {
        quotes: rows
            .good
            .into_iter()
            .map(|g| QuoteRow {
                row: g.row,
                line: g.line,
                id: g.id,
                quote: g.value,
            })
            .collect(),
        errors: rows.errors,
    })
}

/// The quote of a row, or `None` with every reason added to `reasons`.
fn parse_quote(row: &Row<'_>, reasons: &mut Vec<String>) -> Option<Quote> {
    let kind = match row.text(TYPE).to_ascii_lowercase().as_str() {
        "call" => Some(OptionType::Call),
        "put" => Some(OptionType::Put),
        "" => {
            reasons.push("type is empty; use call or put".to_string());
            None
        }
        _ => {
            reasons.push(format!("unknown type `{}`; use call or put", row.text(TYPE)));
            None
        }
    };
    let mut num = |c: usize, default: Option<f64>, positive: bool| -> Option<f64> {
        match row.num(c, default, reasons) {
            Some(v) if positive && v <= 0.0 => {
                reasons.push(format!("{} = {}; it must be > 0", row.name(c), row.text(c)));
                None
            }
            v => v,
        }
    };
    let price = num(PRICE, None, false);
    let spot = num(SPOT, None, true);
    let strike = num(STRIKE, None, true);
    let rate = num(RATE, None, false);
    let dividend = num(DIVIDEND, Some(0.0), false);
    let maturity = num(MATURITY, None, true);
    Some(Quote {
        kind: kind?,
        price: price?,
        spot: spot?,
        strike: strike?,
        maturity: maturity?,
        rate: rate?,
        dividend: dividend?,
    })
}

/// One row of the volatilities file.
#[derive(Clone, Debug, PartialEq)]
pub struct VolRecord {
    /// The quote's id.
    pub id: String,
    /// The implied volatility, or why there is none.
    pub result: std::result::Result<f64, NoVolatility>,
}

/// Writes the volatilities file (`id,volatility,reason,detail`), atomically: a solved quote
/// has its volatility and empty `reason` and `detail`; a quote without one an empty
/// `volatility`, the reason's code and its message.
pub fn write_vols(path: impl AsRef<Path>, records: &[VolRecord]) -> Result<()> {
    let path = path.as_ref();
    if let Some(r) = records
        .iter()
        .find(|r| matches!(r.result, Ok(v) if !v.is_finite()))
    {
        return Err(IoError::Encode {
            path: path.to_owned(),
            format: VOL_FORMAT,
            reason: format!(
                "quote `{}`: the volatility is not finite; kiln never writes one",
                r.id
            ),
        });
    }
    write_atomic(path, ".csv", |w| {
        let mut wtr = csv::Writer::from_writer(w);
        wtr.write_record(VOL_COLUMNS).map_err(|e| csv_error(path, e))?;
        for r in records {
            let (vol, code, detail) = match &r.result {
                Ok(v) => (number(*v), "", String::new()),
                Err(e) => (String::new(), e.code(), e.to_string()),
            };
            wtr.write_record([r.id.as_str(), vol.as_str(), code, detail.as_str()])
                .map_err(|e| csv_error(path, e))?;
        }
        wtr.flush().map_err(|e| IoError::os(path, e))
    })
}

/// One row of a volatilities file as read back by [`read_vols`].
#[derive(Clone, Debug, PartialEq)]
pub struct VolRow {
    /// The quote's id.
    pub id: String,
    /// The volatility; `None` where the quote has none.
    pub volatility: Option<f64>,
    /// The reason's code ([`NoVolatility::code`]); empty where solved.
    pub reason: String,
    /// The reason's message; empty where solved.
    pub detail: String,
}

/// Reads a volatilities file written by [`write_vols`] (columns in that order).
pub fn read_vols(path: impl AsRef<Path>) -> Result<Vec<VolRow>> {
    let path = path.as_ref();
    let mut rdr = csv::Reader::from_path(path).map_err(|e| csv_error(path, e))?;
    let headers = rdr.headers().map_err(|e| csv_error(path, e))?.clone();
    if headers.iter().ne(VOL_COLUMNS) {
        return Err(IoError::corrupt(
            path,
            VOL_FORMAT,
            format!(
                "header `{}`; expected `{}`",
                headers.iter().collect::<Vec<_>>().join(","),
                VOL_COLUMNS.join(",")
            ),
        ));
    }
    let mut out = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| csv_error(path, e))?;
        let cell = |c: usize| rec.get(c).unwrap_or_default().to_string();
        let vol = cell(1);
        let volatility = if vol.is_empty() {
            None
        } else {
            Some(vol.parse::<f64>().map_err(|_| {
                IoError::corrupt(
                    path,
                    VOL_FORMAT,
                    format!("row {}: volatility `{vol}` is not a number", i + 1),
                )
            })?)
        };
        out.push(VolRow {
            id: cell(0),
            volatility,
            reason: cell(2),
            detail: cell(3),
        });
    }
    Ok(out)
}

fn csv_error(path: &Path, e: csv::Error) -> IoError {
    table::csv_error(path, VOL_FORMAT, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> QuotesFile {
        parse_quotes(Path::new("q.csv"), text.as_bytes()).unwrap()
    }

    #[test]
    fn reads_good_rows_in_any_column_order() {
        let f = parse(
            "Maturity, type ,price,spot,strike,rate,id\n1,call,10.45,100,100,0.05,a\n\n0.5,PUT,2,100,90,0,\n",
        );
        assert!(f.errors.is_empty(), "{:?}", f.errors);
        assert_eq!(f.quotes.len(), 2);
        assert_eq!(f.quotes[0].id, "a");
        assert_eq!(f.quotes[1].id, "2");
        assert_eq!(f.quotes[1].line, 4);
        let q = f.quotes[1].quote;
        assert_eq!(
            (q.kind, q.price, q.strike, q.dividend, q.maturity),
            (OptionType::Put, 2.0, 90.0, 0.0, 0.5)
        );
    }

    #[test]
    fn every_bad_row_with_every_reason() {
        let f = parse(
            "id,type,price,spot,strike,rate,dividend,maturity\n\
             a,swap,x,0,100,0.05,0,1\n\
             b,call,5,100,-1,,0,0\n\
             a,put,inf,100,100,0.05,0,1\n\
             c,put,-3,100,100,0.05,0,1\n",
        );
        assert_eq!(f.rows(), 4);
        assert_eq!(
            f.quotes.len(),
            1,
            "a negative price is a quote without a volatility, not a bad row"
        );
        let r: Vec<&str> = f.errors.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(f.errors[0].row, 1);
        assert!(r[0].contains("unknown type `swap`") && r[0].contains("price: `x` is not a number"));
        assert!(r[0].contains("spot = 0; it must be > 0"), "{}", r[0]);
        assert!(
            r[1].contains("strike = -1") && r[1].contains("rate is empty") && r[1].contains("maturity = 0")
        );
        assert!(
            r[2].contains("price: `inf` is not a finite number") && r[2].contains("already used by row 1")
        );
        assert_eq!(f.errors[2].line, 4);
    }

    #[test]
    fn header_problems_name_the_columns() {
        let e = parse_quotes(
            Path::new("q.csv"),
            "type,price,spot,strike,maturity,vol\n".as_bytes(),
        )
        .unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("missing required column(s) `rate`") && m.contains("unknown column(s) `vol`"),
            "{m}"
        );
        assert!(matches!(e, IoError::Content { .. }), "{e:?}");
        // the volatility is the output: the message says so rather than guess a column
        assert!(
            m.contains("`vol` (did you mean") || m.contains("leave it out"),
            "{m}"
        );
        assert!(m.contains("may add id, dividend"), "{m}");
        assert!(!m.contains("corrupt"), "{m}");
        let m = parse_quotes(
            Path::new("q.csv"),
            "type,price,spot,strike,rate,maturty\n".as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(m.contains("`maturty` (did you mean `maturity`?)"), "{m}");
    }

    #[test]
    fn writes_volatilities_and_reasons() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.csv");
        let records = [
            VolRecord {
                id: "a".into(),
                result: Ok(0.2),
            },
            VolRecord {
                id: "b".into(),
                result: Err(NoVolatility::BelowIntrinsic {
                    price: 1.0,
                    intrinsic: 2.0,
                }),
            },
        ];
        write_vols(&path, &records).unwrap();
        let back = read_vols(&path).unwrap();
        assert_eq!((back[0].volatility, back[1].volatility), (Some(0.2), None));
        assert_eq!(back[1].reason, "below_intrinsic");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("id,volatility,reason,detail"));
        assert_eq!(lines.next(), Some("a,0.2,,"));
        let b = lines.next().unwrap();
        assert!(
            b.starts_with("b,,below_intrinsic,") && b.contains("intrinsic value 2"),
            "{b}"
        );
        let bad = [VolRecord {
            id: "n".into(),
            result: Ok(f64::NAN),
        }];
        assert!(write_vols(dir.path().join("n.csv"), &bad).is_err());
        assert!(!dir.path().join("n.csv").exists());
    }
}
