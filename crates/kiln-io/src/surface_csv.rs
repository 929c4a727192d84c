//! The surface CSV of `kiln calibrate`: the European quotes a model is fitted to, each a
//! price or an implied volatility, optionally weighted ([`read_surface`]).
//!
//! Rules (the quote CSV's, [`crate::quotes_csv`], read by the same shared reader):
//! - A header row names the columns, in any order, case-insensitively, surrounding spaces
//!   ignored. Required: `type,spot,strike,rate,maturity` and exactly one of `price` (the
//!   option's discounted price) or `vol` (its Black-Scholes implied volatility, 0.2 for
//!   20%): the header decides what every quote is. Optional: `id` (absent or empty: the data
//!   row number) and `dividend` (absent or empty: 0). Where the caller names a weight column
//!   it is required too, every cell a finite number `>= 0` (0 leaves the quote out of the
//!   fit); without one every quote weighs 1. Any other column, or a column named twice, is a
//!   header error naming it.
//! - `type` is `call` or `put`; `rate` and `dividend` are continuously compounded per year,
//!   `maturity` in years.
//! - Rows are numbered from 1 at the first row after the header (blank lines are skipped and
//!   not counted). A bad row is reported with that number, the file line it starts on, its
//!   id and every reason, each naming its column: an unknown type, an empty, non-numeric or
//!   non-finite cell, a spot, strike, maturity, price or vol `<= 0`, a negative weight, a
//!   duplicate id, more cells than the header has columns. Reading never stops at the first
//!   bad row. Whether a price has an implied volatility is the fit's question, not the
//!   file's ([`kiln_core::finance::calibrate::quote_problems`]).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use kiln_core::finance::calibrate::{Contract, HestonQuote, QuoteKind};
use kiln_core::finance::OptionType;

use crate::error::{IoError, Result};
use crate::options_csv::RowError;
use crate::table::{read_rows, Row, Schema};

const FORMAT: &str = "surface CSV";

/// The columns every surface CSV may have, in the documented order (a weight column named
/// by the caller comes after them).
pub const SURFACE_COLUMNS: [&str; 9] = [
    "id", "type", "price", "vol", "spot", "strike", "rate", "dividend", "maturity",
];

const ID: usize = 0;
const TYPE: usize = 1;
const PRICE: usize = 2;
const VOL: usize = 3;
const SPOT: usize = 4;
const STRIKE: usize = 5;
const RATE: usize = 6;
const DIVIDEND: usize = 7;
const MATURITY: usize = 8;
const WEIGHT: usize = 9;

const HINTS: [(&str, &str); 5] = [
    ("volatility", "name the implied-vol column `vol`"),
    ("sigma", "name the implied-vol column `vol`"),
    ("iv", "name the implied-vol column `vol`"),
    ("expiry", "did you mean `maturity`? (in years)"),
    (
        "weight",
        "a weight column is read only where the caller names it (kiln calibrate --weights weight)",
    ),
];

/// One good row of a surface CSV.
#[derive(Clone, Debug, PartialEq)]
pub struct SurfaceRow {
    /// Data row number, 1-based (the first row after the header is 1).
    pub row: usize,
    /// The file line the row starts on, 1-based.
    pub line: u64,
    /// The row's id as written (the data row number where the file has none).
    pub id: String,
    /// The quote: its `value` a price or a vol as [`SurfaceFile::quoted`] says.
    pub quote: HestonQuote,
}

/// What [`read_surface`] found: what the quotes are, the good rows and the bad ones, each in
/// file order.
#[derive(Clone, Debug, PartialEq)]
pub struct SurfaceFile {
    /// Prices (a `price` column) or implied vols (a `vol` column).
    pub quoted: QuoteKind,
    /// The rows that parsed and validated.
    pub quotes: Vec<SurfaceRow>,
    /// The rows that did not, with every reason.
    pub errors: Vec<RowError>,
}

impl SurfaceFile {
    /// Data rows in the file, good and bad.
    pub fn rows(&self) -> usize {
        self.quotes.len() + self.errors.len()
    }
}

/// Reads a surface CSV (rules in the [module docs](self)); `weight_column` names the column
/// of weights, if any. A missing or unreadable file, a header that lacks a required column,
/// names an unknown one, or has both or neither of `price` and `vol`, or a weight column
/// named like a standard one, is an error; bad rows are not: they come back in
/// [`SurfaceFile::errors`], every one of them.
pub fn read_surface(path: impl AsRef<Path>, weight_column: Option<&str>) -> Result<SurfaceFile> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    parse_surface(path, file, weight_column)
}

/// [`read_surface`] from any reader; `path` is only used in error messages.
pub fn parse_surface<R: Read>(path: &Path, reader: R, weight_column: Option<&str>) -> Result<SurfaceFile> {
    let content = |reason: String| IoError::Content {
        path: path.to_owned(),
        format: FORMAT,
        reason,
    };
    let weight = weight_column.map(|w| w.trim().to_ascii_lowercase());
    let mut columns: Vec<&str> = SURFACE_COLUMNS.to_vec();
    let mut required = vec!["type", "spot", "strike", "rate", "maturity"];
    if let Some(w) = weight.as_deref() {
        if w.is_empty() || SURFACE_COLUMNS.contains(&w) {
            return Err(content(format!(
                "the weight column cannot be named `{w}`: it must be a column of its own, not one of {}",
                SURFACE_COLUMNS.join(", ")
            )));
        }
        columns.push(w);
        required.push(w);
    }
    // without a weight column, `weight` is unknown and its hint says how to use it
    let hints: &[(&str, &str)] = if weight.is_some() { &HINTS[..4] } else { &HINTS };
    let schema = Schema {
        format: FORMAT,
        columns: &columns,
        required: &required,
        id: ID,
        hints,
    };
    let rows = read_rows(path, reader, &schema, |row, reasons| {
        parse_row(row, reasons, weight.is_some())
    })?;
    let quoted = match (rows.present[PRICE], rows.present[VOL]) {
        (true, false) => QuoteKind::Price,
        (false, true) => QuoteKind::Vol,
        (both, _) => {
            return Err(content(format!(
                "bad header of the {FORMAT}: it names {}; name exactly one: `price` (discounted option prices) or `vol` (implied volatilities, 0.2 for 20%)",
                if both { "both `price` and `vol`" } else { "neither `price` nor `vol`" }
            )))
        }
    };
    Ok(SurfaceFile {
        quoted,
        quotes: rows
            .good
            .into_iter()
            .map(|g| SurfaceRow {
                row: g.row,
                line: g.line,
                id: g.id,
                quote: g.value,
            })
            .collect(),
        errors: rows.errors,
    })
}

/// What a number cell must be.
#[derive(Clone, Copy)]
enum Sign {
    Any,
    Positive,
    NonNegative,
}

/// The quote of a row, or `None` with every reason added to `reasons`.
fn parse_row(row: &Row<'_>, reasons: &mut Vec<String>, weighted: bool) -> Option<HestonQuote> {
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
    let mut num = |c: usize, default: Option<f64>, rule: Sign| -> Option<f64> {
        let v = row.num(c, default, reasons)?;
        let (ok, text) = match rule {
            Sign::Any => (true, ""),
            Sign::Positive => (v > 0.0, "> 0"),
            Sign::NonNegative => (v >= 0.0, ">= 0"),
        };
        if !ok {
            reasons.push(format!("{} = {}; it must be {text}", row.name(c), row.text(c)));
            return None;
        }
        Some(v)
    };
    // The header has one of price and vol (checked once the rows are read); the absent
    // column's cells read as empty, so the present one is parsed.
    let value = num(if row.has(PRICE) { PRICE } else { VOL }, None, Sign::Positive);
    let spot = num(SPOT, None, Sign::Positive);
    let strike = num(STRIKE, None, Sign::Positive);
    let rate = num(RATE, None, Sign::Any);
    let dividend = num(DIVIDEND, Some(0.0), Sign::Any);
    let maturity = num(MATURITY, None, Sign::Positive);
    let weight = if weighted {
        num(WEIGHT, None, Sign::NonNegative)
    } else {
        Some(1.0)
    };
    Some(HestonQuote {
        contract: Contract {
            kind: kind?,
            spot: spot?,
            strike: strike?,
            maturity: maturity?,
            rate: rate?,
            dividend: dividend?,
        },
        value: value?,
        weight: weight?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, weight: Option<&str>) -> Result<SurfaceFile> {
        parse_surface(Path::new("s.csv"), text.as_bytes(), weight)
    }

    #[test]
    fn reads_prices_or_vols_and_weights() {
        let f = parse(
            "Maturity, type ,price,spot,strike,rate,id\n1,call,10.45,100,100,0.05,a\n\n0.5,PUT,2,100,90,0,\n",
            None,
        )
        .unwrap();
        assert!(f.errors.is_empty(), "{:?}", f.errors);
        assert_eq!(f.quoted, QuoteKind::Price);
        assert_eq!((f.quotes[0].id.as_str(), f.quotes[1].id.as_str()), ("a", "2"));
        assert_eq!(f.quotes[1].line, 4);
        let q = f.quotes[1].quote;
        assert_eq!(
            (
                q.contract.kind,
                q.value,
                q.contract.strike,
                q.contract.dividend,
                q.weight
            ),
            (OptionType::Put, 2.0, 90.0, 0.0, 1.0)
        );
        let f = parse(
            "type,vol,spot,strike,rate,maturity,W\ncall,0.2,100,100,0.05,1,2.5\nput,0.25,100,90,0,1,0\n",
            Some("w"),
        )
        .unwrap();
        assert!(f.errors.is_empty(), "{:?}", f.errors);
        assert_eq!(f.quoted, QuoteKind::Vol);
        let w: Vec<(f64, f64)> = f.quotes.iter().map(|r| (r.quote.value, r.quote.weight)).collect();
        assert_eq!(w, [(0.2, 2.5), (0.25, 0.0)]);
    }

    #[test]
    fn every_bad_row_with_every_reason() {
        let f = parse(
            "id,type,price,spot,strike,rate,dividend,maturity,w\n\
             a,swap,x,0,100,0.05,0,1,1\n\
             b,call,0,100,-1,,0,0,-2\n\
             a,put,inf,100,100,0.05,0,1,\n\
             c,put,3,100,100,0.05,0,1,1\n\
             d,put,,100,100,0.05,0,1,1\n",
            Some("w"),
        )
        .unwrap();
        assert_eq!((f.rows(), f.quotes.len()), (5, 1));
        let r: Vec<&str> = f.errors.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(f.errors.iter().map(|e| e.row).collect::<Vec<_>>(), [1, 2, 3, 5]);
        assert!(r[0].contains("unknown type `swap`") && r[0].contains("price: `x` is not a number"));
        assert!(r[0].contains("spot = 0; it must be > 0"), "{}", r[0]);
        assert!(r[1].contains("price = 0; it must be > 0"), "{}", r[1]);
        assert!(
            r[1].contains("strike = -1") && r[1].contains("rate is empty"),
            "{}",
            r[1]
        );
        assert!(
            r[1].contains("maturity = 0") && r[1].contains("w = -2; it must be >= 0"),
            "{}",
            r[1]
        );
        assert!(r[2].contains("price: `inf` is not a finite number"), "{}", r[2]);
        assert!(
            r[2].contains("w is empty") && r[2].contains("already used by row 1"),
            "{}",
            r[2]
        );
        assert!(r[3].contains("price is empty"), "{}", r[3]);
    }

    #[test]
    fn header_problems_name_the_columns() {
        let e = parse("type,spot,strike,rate,maturity\ncall,1,1,0,1\n", None).unwrap_err();
        assert!(e.to_string().contains("neither `price` nor `vol`"), "{e}");
        let e = parse("type,price,vol,spot,strike,rate,maturity\n", None).unwrap_err();
        assert!(e.to_string().contains("both `price` and `vol`"), "{e}");
        let e = parse("type,price,spot,strike,rate,maturity,weight\n", None).unwrap_err();
        assert!(e.to_string().contains("--weights weight"), "{e}");
        let e = parse("type,price,spot,strike,rate,maturity\n", Some("weight")).unwrap_err();
        assert!(e.to_string().contains("`weight`"), "{e}");
        let e = parse("type,price,spot,strike,rate,maturity\n", Some("price")).unwrap_err();
        assert!(e.to_string().contains("cannot be named `price`"), "{e}");
        let e = parse("type,volatility,spot,strike,rate,maturity\n", None).unwrap_err();
        assert!(e.to_string().contains("`vol`"), "{e}");
    }
}
