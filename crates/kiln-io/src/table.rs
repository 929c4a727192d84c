//! The reading the row-per-record CSVs share (the option CSV, the quote CSV): the header
//! mapped to known columns ([`Schema`]), every data row handed to the format's own parser
//! with its cells by column ([`Row`]), and every bad row collected with its number, file
//! line, id and reasons ([`RowError`]) instead of stopping at the first.
//!
//! Rules common to those files (each format's module docs repeat them for its users):
//! - The header names the columns in any order, case-insensitively, surrounding spaces
//!   ignored. A missing required column, an unknown one or one named twice is a header
//!   error for the whole file ([`IoError::Content`]: the file is readable, its content
//!   breaks the format), naming each column, listing the accepted ones, and suggesting the
//!   accepted column an unknown name nearly spells.
//! - Rows are numbered from 1 at the first row after the header ("data row"); blank lines
//!   and lines of only empty cells are skipped and not counted. A row's id is its `id` cell,
//!   or its data row number where that is empty; an id given twice is a bad row naming the
//!   first row that used it, as is a row with more cells than the header has columns.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

use csv::ByteRecord;

use crate::error::{IoError, Result};

/// One bad row: where it is and why it cannot be used.
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

/// A format's columns (`'s`: a format whose column names are chosen at run time borrows
/// them).
pub(crate) struct Schema<'s> {
    /// The format's name in messages (`option CSV`).
    pub format: &'static str,
    /// Every column, in the documented order; `columns[id]` is the row id's column.
    pub columns: &'s [&'s str],
    /// The columns every file must have.
    pub required: &'s [&'s str],
    /// Index of the `id` column in `columns`.
    pub id: usize,
    /// Names users write for something the format spells otherwise, and where it goes
    /// (`exercise`: the style and dates columns); shown after an unknown column.
    pub hints: &'s [(&'s str, &'s str)],
}

/// The file line each byte offset is on (the csv crate's own line numbers drift on blank
/// lines and CRLF, so lines are counted here from a record's byte offset).
pub(crate) struct Lines<'a> {
    data: &'a [u8],
    newlines: Vec<usize>,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        let newlines = data
            .iter()
            .enumerate()
            .filter_map(|(i, b)| (*b == b'\n').then_some(i))
            .collect();
        Lines { data, newlines }
    }

    /// The 1-based line of the first non-blank byte at or after `pos` (line 1 for none).
    pub(crate) fn at(&self, pos: Option<&csv::Position>) -> u64 {
        let mut b = pos.map_or(0, |p| p.byte() as usize);
        while b < self.data.len() && self.data[b].is_ascii_whitespace() {
            b += 1;
        }
        1 + self.newlines.partition_point(|&n| n < b) as u64
    }
}

/// One data row's cells by column, for a format's row parser.
pub(crate) struct Row<'a> {
    rec: &'a ByteRecord,
    cols: &'a [Option<usize>],
    names: &'a [&'a str],
}

impl<'a> Row<'a> {
    /// The trimmed text of column `c`'s cell; empty where the column or the cell is absent.
    pub(crate) fn text(&self, c: usize) -> String {
        self.cols
            .get(c)
            .copied()
            .flatten()
            .and_then(|i| self.rec.get(i))
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }

    /// Whether the header names column `c`.
    pub(crate) fn has(&self, c: usize) -> bool {
        self.cols.get(c).copied().flatten().is_some()
    }

    /// Column `c`'s name.
    pub(crate) fn name(&self, c: usize) -> &'a str {
        self.names[c]
    }

    /// Column `c`'s cell as a finite number: `default` where it is empty (`None` default:
    /// "NAME is empty"), else the number or `None` with the reason naming the column and the
    /// text pushed to `reasons`.
    pub(crate) fn num(&self, c: usize, default: Option<f64>, reasons: &mut Vec<String>) -> Option<f64> {
        let t = self.text(c);
        let name = self.name(c);
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
    }
}

/// A good row: where it is, its id and what the format's parser made of it.
pub(crate) struct Good<T> {
    pub row: usize,
    pub line: u64,
    pub id: String,
    pub value: T,
}

/// What [`read_rows`] found: the good rows and the bad ones, each in file order.
pub(crate) struct Rows<T> {
    pub good: Vec<Good<T>>,
    pub errors: Vec<RowError>,
    /// Whether the header names each schema column, in the schema's order.
    pub present: Vec<bool>,
}

/// Reads a row CSV whole from `reader` (`path` names it in messages): the header against
/// `schema`, then each data row through `parse`, which returns the row's value or pushes
/// every reason it finds (a row is good when it returns a value and no reason was pushed).
/// A header problem or an I/O failure is an error; bad rows are not.
pub(crate) fn read_rows<T, R: Read>(
    path: &Path,
    mut reader: R,
    schema: &Schema<'_>,
    mut parse: impl FnMut(&Row<'_>, &mut Vec<String>) -> Option<T>,
) -> Result<Rows<T>> {
    let mut data = Vec::new();
    reader.read_to_end(&mut data).map_err(|e| IoError::os(path, e))?;
    let lines = Lines::new(&data);
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(data.as_slice());
    let headers = rdr
        .byte_headers()
        .map_err(|e| csv_error(path, schema.format, e))?
        .clone();
    let cols = columns(path, &headers, schema)?;
    let mut out = Rows {
        good: Vec::new(),
        errors: Vec::new(),
        present: cols.iter().map(Option::is_some).collect(),
    };
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
            Err(e) if matches!(e.kind(), csv::ErrorKind::Io(_)) => {
                return Err(csv_error(path, schema.format, e))
            }
            Err(e) => {
                row += 1;
                out.errors.push(RowError {
                    row,
                    line: lines.at(e.position()),
                    id: row.to_string(),
                    reason: format!("unreadable row: {e}"),
                });
                continue;
            }
        };
        let line = lines.at(rec.position());
        let cells = Row {
            rec: &rec,
            cols: &cols,
            names: schema.columns,
        };
        let explicit_id = cells.text(schema.id);
        let mut reasons = Vec::new();
        if rec.len() > headers.len() {
            reasons.push(format!(
                "{} fields, but the header names {} columns",
                rec.len(),
                headers.len()
            ));
        }
        let value = parse(&cells, &mut reasons);
        let id = if explicit_id.is_empty() {
            row.to_string()
        } else {
            match first_row_of_id.get(&explicit_id) {
                Some(first) => reasons.push(format!("id `{explicit_id}` is already used by row {first}")),
                None => {
                    first_row_of_id.insert(explicit_id.clone(), row);
                }
            }
            explicit_id
        };
        match value {
            Some(value) if reasons.is_empty() => out.good.push(Good { row, line, id, value }),
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

/// Maps the header to a cell index per schema column, or says everything wrong with it.
fn columns(path: &Path, headers: &ByteRecord, schema: &Schema<'_>) -> Result<Vec<Option<usize>>> {
    let content = |reason: String| IoError::Content {
        path: path.to_owned(),
        format: schema.format,
        reason,
    };
    let format = schema.format;
    if headers.is_empty() || (headers.len() == 1 && headers[0].is_empty()) {
        return Err(content(format!(
            "the file is empty; {} {format} starts with a header row naming the columns ({})",
            article(format),
            schema.columns.join(",")
        )));
    }
    let mut idx = vec![None; schema.columns.len()];
    let (mut unknown, mut twice) = (Vec::new(), Vec::new());
    for (i, h) in headers.iter().enumerate() {
        let name = String::from_utf8_lossy(h).trim().to_ascii_lowercase();
        match schema.columns.iter().position(|c| *c == name) {
            Some(c) if idx[c].is_some() => twice.push(format!("`{name}`")),
            Some(c) => idx[c] = Some(i),
            None if name.is_empty() => unknown.push(format!("an unnamed column (number {})", i + 1)),
            None => unknown.push(unknown_column(&name, schema)),
        }
    }
    let missing: Vec<String> = schema
        .required
        .iter()
        .filter(|c| {
            schema
                .columns
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
    let optional: Vec<&str> = schema
        .columns
        .iter()
        .copied()
        .filter(|c| !schema.required.contains(c))
        .collect();
    Err(content(format!(
        "bad header of the {format}: {}. The header must name {} and may add {}, in any order; rename or remove the other columns",
        problems.join("; "),
        schema.required.join(", "),
        optional.join(", ")
    )))
}

/// "`name`", with the accepted column it nearly spells or the schema's hint for it.
fn unknown_column(name: &str, schema: &Schema<'_>) -> String {
    if let Some((_, hint)) = schema.hints.iter().find(|(n, _)| *n == name) {
        return format!("`{name}` ({hint})");
    }
    match closest(name, schema.columns) {
        Some(c) => format!("`{name}` (did you mean `{c}`?)"),
        None => format!("`{name}`"),
    }
}

/// The column `name` nearly spells: the one it begins (`vol` for `volatility`, at least 3
/// letters) or within a typo or two of it (edit distance at most 1, or 2 for names of 6
/// letters or more); `None` where no column is that near, or two are equally near.
pub(crate) fn closest<'c>(name: &str, columns: &[&'c str]) -> Option<&'c str> {
    let prefix: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|c| name.len() >= 3 && c.starts_with(name))
        .collect();
    if let [one] = prefix[..] {
        return Some(one);
    }
    let limit = if name.chars().count() >= 6 { 2 } else { 1 };
    let mut best: Option<(usize, &str)> = None;
    let mut tie = false;
    for &c in columns {
        let d = edit_distance(name, c);
        if d > limit {
            continue;
        }
        match best {
            Some((bd, _)) if d > bd => {}
            Some((bd, _)) if d == bd => tie = true,
            _ => {
                best = Some((d, c));
                tie = false;
            }
        }
    }
    best.filter(|_| !tie).map(|(_, c)| c)
}

/// Levenshtein distance (insertions, deletions, substitutions), by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// "a" or "an" before `word`.
fn article(word: &str) -> &'static str {
    match word.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

/// A csv error as an I/O error (the OS's) or a corrupt-file error.
pub(crate) fn csv_error(path: &Path, format: &'static str, e: csv::Error) -> IoError {
    if e.is_io_error() {
        IoError::os(path, std::io::Error::from(e))
    } else {
        IoError::corrupt(path, format, e)
    }
}

/// Shortest round-trip text of a finite `v`, as kiln's output CSVs write numbers (exponent
/// notation outside `1e-5..1e16`), so reading it back gives the same bits.
pub(crate) fn number(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if (1e-5..1e16).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: [&str; 8] = [
        "id",
        "type",
        "style",
        "spot",
        "strike",
        "rate",
        "volatility",
        "maturity",
    ];

    #[test]
    fn near_misses_find_their_column() {
        assert_eq!(closest("vol", &COLS), Some("volatility"));
        assert_eq!(closest("volatilty", &COLS), Some("volatility"));
        assert_eq!(closest("strik", &COLS), Some("strike"));
        assert_eq!(closest("maturtiy", &COLS), Some("maturity"));
        assert_eq!(closest("rates", &COLS), Some("rate"));
        // nothing near, or two equally near: no guess
        assert_eq!(closest("exercise", &COLS), None);
        assert_eq!(closest("s", &COLS), None);
        assert_eq!(closest("st", &COLS), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn numbers_round_trip() {
        for v in [0.0, 1.5, -2.25e-7, 3e20, 0.1 + 0.2] {
            assert_eq!(number(v).parse::<f64>().unwrap().to_bits(), v.to_bits(), "{v}");
        }
        assert_eq!(number(1e-6), "1e-6");
        assert_eq!(number(12.5), "12.5");
    }
}
