//! The basket file: the assets of a basket option and their correlation matrix, one CSV
//! ([`read_basket`]), named by the `basket` column of an option CSV's `style = basket` rows.
//!
//! ```text
//! asset,weight,spot,volatility,dividend,SPX,SX5E,NKY
//! SPX,0.5,5000,0.18,0.013,1,0.6,0.4
//! SX5E,0.3,4800,0.2,0.03,0.6,1,0.45
//! NKY,0.2,38000,0.22,0.02,0.4,0.45,1
//! ```
//!
//! Rules: a header row starting with `asset,weight,spot,volatility,dividend` (names
//! case-insensitive, in this order), then one column per asset named as the asset, in the
//! order of the rows (checked): those columns are the correlation matrix. One row per asset:
//! a unique non-empty name, a finite `weight` (negative in a spread, `1,-1` for `S1 - S2`;
//! geometric baskets and rainbows need every weight `> 0`, checked per option row), `spot > 0`, `volatility >= 0` per
//! `sqrt(year)`, `dividend` a continuously compounded yield (empty: 0), and the asset's row
//! of the matrix (`1` on the diagonal, entries in `[-1, 1]`). The matrix must be symmetric and
//! positive semi-definite (kiln-core's `basket::cholesky`); at most 64 assets. Every error
//! names the file and, where it has one, the row (1-based after the header, with its line)
//! and the column.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use kiln_core::finance::basket::{cholesky_named, validate_assets, BasketAsset, BasketAverage, BasketSpec};
use kiln_core::finance::OptionType;

use crate::table::Lines;

/// The fixed leading columns of a basket file.
pub const BASKET_COLUMNS: [&str; 5] = ["asset", "weight", "spot", "volatility", "dividend"];

/// A basket file that cannot be used: which file and why (every problem found, `; `
/// separated).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BasketFileError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong, naming rows and columns.
    pub reason: String,
}

impl fmt::Display for BasketFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "basket file {}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for BasketFileError {}

/// A parsed, validated basket file.
#[derive(Clone, Debug, PartialEq)]
pub struct BasketFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// The assets, in the file's order, named.
    pub assets: Vec<BasketAsset>,
    /// The correlation matrix, row-major, in the assets' order.
    pub correlation: Vec<f64>,
}

impl BasketFile {
    /// The basket option on this file's assets with the given contract.
    pub fn spec(
        &self,
        kind: OptionType,
        strike: f64,
        rate: f64,
        maturity: f64,
        average: BasketAverage,
    ) -> BasketSpec {
        BasketSpec {
            kind,
            strike,
            rate,
            maturity,
            average,
            assets: self.assets.clone(),
            correlation: self.correlation.clone(),
        }
    }
}

/// Reads and validates a basket file (rules in the [module docs](self)).
pub fn read_basket(path: impl AsRef<Path>) -> Result<BasketFile, BasketFileError> {
    let path = path.as_ref();
    let data = std::fs::read(path).map_err(|e| BasketFileError {
        path: path.to_path_buf(),
        reason: format!("cannot be read: {e}"),
    })?;
    parse_basket(path, &data)
}

/// [`read_basket`] from bytes; `path` is only used in messages.
pub fn parse_basket(path: &Path, data: &[u8]) -> Result<BasketFile, BasketFileError> {
    let fail = |reason: String| BasketFileError {
        path: path.to_path_buf(),
        reason,
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(data);
    let headers: Vec<String> = rdr
        .headers()
        .map_err(|e| fail(format!("unreadable header: {e}")))?
        .iter()
        .map(str::to_string)
        .collect();
    let lead: Vec<String> = headers
        .iter()
        .take(BASKET_COLUMNS.len())
        .map(|h| h.to_ascii_lowercase())
        .collect();
    if lead != BASKET_COLUMNS || headers.len() == BASKET_COLUMNS.len() {
        return Err(fail(format!(
            "the header is `{}`; it must be {}, then one correlation column per asset named as the asset, in the rows' order",
            headers.join(","),
            BASKET_COLUMNS.join(",")
        )));
    }
    let names: Vec<&str> = headers[BASKET_COLUMNS.len()..]
        .iter()
        .map(String::as_str)
        .collect();
    let n = names.len();
    let mut problems = Vec::new();
    let mut assets = Vec::new();
    let mut correlation = Vec::new();
    let mut seen = HashSet::new();
    let lines = Lines::new(data);
    let mut row = 0;
    for rec in rdr.records() {
        // rows are counted as in the option CSV: lines of only empty cells are skipped
        let rec = match rec {
            Ok(rec) if rec.iter().all(str::is_empty) => continue,
            Ok(rec) => {
                row += 1;
                rec
            }
            Err(e) => {
                row += 1;
                problems.push(format!(
                    "row {row} (line {}): unreadable: {e}",
                    lines.at(e.position())
                ));
                continue;
            }
        };
        let line = lines.at(rec.position());
        let name = rec.get(0).unwrap_or("").to_string();
        let at = if name.is_empty() {
            format!("row {row} (line {line})")
        } else {
            format!("row {row} (line {line}, asset `{name}`)")
        };
        if rec.len() != headers.len() {
            problems.push(format!(
                "{at}: {} cells, the header names {} columns",
                rec.len(),
                headers.len()
            ));
            continue;
        }
        if name.is_empty() {
            problems.push(format!("{at}, column `asset`: the name is empty"));
        } else if !seen.insert(name.clone()) {
            problems.push(format!("{at}, column `asset`: `{name}` is named twice"));
        }
        let mut num = |col: usize, empty: Option<f64>| -> f64 {
            let t = rec.get(col).unwrap_or("");
            let label = &headers[col];
            if t.is_empty() {
                return empty.unwrap_or_else(|| {
                    problems.push(format!("{at}, column `{label}`: empty"));
                    f64::NAN
                });
            }
            match t.parse::<f64>() {
                Ok(v) if v.is_finite() => v,
                _ => {
                    problems.push(format!("{at}, column `{label}`: `{t}` is not a finite number"));
                    f64::NAN
                }
            }
        };
        let (weight, spot, vol, div) = (num(1, None), num(2, None), num(3, None), num(4, Some(0.0)));
        let cells: Vec<f64> = (0..n).map(|j| num(BASKET_COLUMNS.len() + j, None)).collect();
        let mut check = |ok: bool, col: &str, what: String| {
            if !ok {
                problems.push(format!("{at}, column `{col}`: {what}"));
            }
        };
        check(
            spot.is_nan() || spot > 0.0,
            "spot",
            format!("{spot}; it must be > 0"),
        );
        check(
            vol.is_nan() || vol >= 0.0,
            "volatility",
            format!("{vol}; it must be >= 0 (per sqrt(year), 0.2 for 20%)"),
        );
        let i = assets.len();
        for (j, &c) in cells.iter().enumerate() {
            let col = names[j];
            check(
                c.is_nan() || (-1.0..=1.0).contains(&c),
                col,
                format!("{c}; a correlation must be in [-1, 1]"),
            );
            check(
                c.is_nan() || i != j || c == 1.0,
                col,
                format!("{c}; an asset's correlation with itself (the diagonal) must be 1"),
            );
        }
        if i < n && !name.is_empty() && names[i] != name {
            problems.push(format!(
                "{at}: correlation column {} is named `{}`; the columns must name the assets in the rows' order (this row is asset `{name}`)",
                BASKET_COLUMNS.len() + i + 1,
                names[i]
            ));
        }
        assets.push(BasketAsset::new(spot, vol, div, weight).named(name));
        correlation.extend(cells);
    }
    if assets.len() != n {
        problems.push(format!(
            "{} asset rows but {n} correlation columns ({}); there must be one row per column, in the same order",
            assets.len(),
            names.join(", ")
        ));
    }
    if !problems.is_empty() {
        return Err(fail(problems.join("; ")));
    }
    let why = |e: kiln_core::Error| match e {
        kiln_core::Error::InvalidArgument { reason, .. } => fail(reason),
        e => fail(e.to_string()),
    };
    validate_assets(&assets, &correlation).map_err(why)?;
    cholesky_named(&correlation, n, &assets).map_err(why)?;
    Ok(BasketFile {
        path: path.to_path_buf(),
        assets,
        correlation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<BasketFile, BasketFileError> {
        parse_basket(Path::new("b.csv"), s.as_bytes())
    }

    fn err(s: &str) -> String {
        parse(s).unwrap_err().to_string()
    }

    #[test]
    fn a_good_file_parses() {
        let b = parse(
            "Asset, Weight,spot,volatility,dividend,A,B\n\
             A,0.5,100,0.2,,1,0.3\n\
             B,1.5,50,0.3,0.01,0.3,1\n",
        )
        .unwrap();
        assert_eq!(b.assets.len(), 2);
        assert_eq!(b.assets[1].name.as_deref(), Some("B"));
        assert_eq!((b.assets[0].dividend, b.assets[1].weight), (0.0, 1.5));
        assert_eq!(b.correlation, vec![1.0, 0.3, 0.3, 1.0]);
        let s = b.spec(OptionType::Put, 100.0, 0.01, 1.0, BasketAverage::Geometric);
        assert!(s.price_analytic().unwrap() > 0.0);
    }

    #[test]
    fn errors_name_the_file_row_and_column() {
        let e = err("asset,weight,spot,volatility,dividend,A,B\nA,1,100,x,0,1,0.3\nB,1,50,0.3,0,0.3,1\n");
        assert!(
            e.contains("b.csv")
                && e.contains("row 1")
                && e.contains("asset `A`")
                && e.contains("column `volatility`"),
            "{e}"
        );
        // a negative weight is a spread's short leg; a weight must still be a number
        let b =
            parse("asset,weight,spot,volatility,dividend,A,B\nA,1,100,0.2,0,1,0.3\nB,-1,50,0.3,0,0.3,1\n")
                .unwrap();
        assert_eq!(b.assets[1].weight, -1.0);
        let e = err("asset,weight,spot,volatility,dividend,A,B\nA,inf,100,0.2,0,1,0.3\nB,1,50,0.3,0,0.3,1\n");
        assert!(e.contains("column `weight`") && e.contains("finite"), "{e}");
        let e = err("asset,weight,spot,volatility,dividend,A,B\nA,1,100,0.2,0,1,1.3\nB,1,50,0.3,0,1.3,1\n");
        assert!(e.contains("column `B`") && e.contains("[-1, 1]"), "{e}");
        let e = err("asset,weight,spot,volatility,dividend,A,B\nA,1,100,0.2,0,0.9,0.3\nB,1,50,0.3,0,0.3,1\n");
        assert!(e.contains("diagonal"), "{e}");
        let e = err("asset,weight,spot,volatility,dividend,B,A\nA,1,100,0.2,0,1,0.3\nB,1,50,0.3,0,0.3,1\n");
        assert!(e.contains("rows' order"), "{e}");
        let e = err("asset,weight,spot,volatility,dividend,A,B\nA,1,100,0.2,0,1,0.3\n");
        assert!(e.contains("1 asset rows but 2 correlation columns"), "{e}");
        let e = err("asset,spot,weight,volatility,dividend,A\nA,1,100,0.2,0,1\n");
        assert!(e.contains("must be asset,weight,spot,volatility,dividend"), "{e}");
        let e = err("asset,weight,spot,volatility,dividend,A,B\nA,1,100,0.2,0,1,0.3\nB,1,50,0.3,0,0.4,1\n");
        assert!(e.contains("not symmetric"), "{e}");
        let e = err("asset,weight,spot,volatility,dividend,A,B,C\n\
             A,1,100,0.2,0,1,0.9,0.9\nB,1,50,0.3,0,0.9,1,-0.9\nC,1,70,0.3,0,0.9,-0.9,1\n");
        assert!(e.contains("not positive definite: pivot 3 (asset `C`)"), "{e}");
        // the line is the file's, counted past blank lines and CRLF endings
        let e = err("asset,weight,spot,volatility,dividend,A,B\r\n\r\nA,1,100,0.2,0,1,0.3\r\n,,,,,,\r\n\r\nB,1,50,x,0,0.3,1\r\n");
        assert!(
            e.contains("row 2 (line 6, asset `B`), column `volatility`"),
            "{e}"
        );
        let e = read_basket("/nonexistent/basket.csv").unwrap_err().to_string();
        assert!(
            e.contains("/nonexistent/basket.csv") && e.contains("cannot be read"),
            "{e}"
        );
    }
}
