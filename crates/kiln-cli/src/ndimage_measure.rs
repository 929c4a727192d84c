//! `kiln ndimage measure --stats ...` (and each statistic by scipy's own name, e.g.
//! `kiln ndimage mean`): scipy.ndimage's measurements over labelled regions, printed as a
//! table or (`--json`) one object.
//!
//! scipy's rules for `labels` and `index`: no `--labels`: the whole input is one region;
//! `--labels` without `--index`: every element with a label above 0 is one region;
//! `--index 1,2,3`: one region per label listed (a label with no element gives count 0 and
//! null values: scipy gives 0 or NaN there); `--index all` (not scipy's): one region per
//! label above 0 that occurs, ascending. The labels must have the input's shape (scipy
//! broadcasts; here they are one file each, so the shapes must match).
//!
//! Arithmetic is scipy's `bincount` path (the one it takes for a list of labels): float64
//! sums in row-major order; the mean is sum / count; the variance the mean of the squared
//! deviations from that mean (a second pass, as scipy's); the standard deviation its square
//! root; the median the middle value (the mean of the two middle ones for an even count);
//! positions are coordinates, the first in row-major order where several elements tie (scipy
//! does so for a single region; for a list of labels it takes the first in NumPy's argsort
//! order, which may name another of the tied elements); the centre of mass is
//! sum(value * coordinate) / sum(value) per axis. scipy's single-region path sums with NumPy's
//! pairwise summation, which may differ from these sums in the last bits.

use crate::exit;
use crate::filter_cmd::invalid;
use crate::ndimage_array as nda;
use crate::ndimage_cmd::Args;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::process::ExitCode;

/// The statistics, by scipy's function names.
pub(crate) const STATS: &[&str] = &[
    "sum",
    "mean",
    "variance",
    "standard_deviation",
    "minimum",
    "maximum",
    "median",
    "minimum_position",
    "maximum_position",
    "center_of_mass",
    "extrema",
];

/// The statistic a function name asks for (`sum_labels` is scipy's newer name of `sum`).
pub(crate) fn stat_of(name: &str) -> Option<&'static str> {
    if name == "sum_labels" {
        return Some("sum");
    }
    STATS.iter().copied().find(|s| *s == name)
}

/// One region's running sums.
#[derive(Clone)]
struct Acc {
    count: usize,
    sum: f64,
    sq: f64,
    min: (f64, usize),
    max: (f64, usize),
    moments: Vec<f64>,
    values: Vec<f64>,
}

/// Which regions: `None` for the single one of scipy's `index=None`.
fn regions(index: Option<&str>, labels: Option<&[i64]>) -> anyhow::Result<Option<Vec<i64>>> {
    match index {
        None => Ok(None),
        Some(_) if labels.is_none() => Err(invalid("--index", "--index needs --labels L")),
        Some("all") => {
            let mut v: Vec<i64> = labels
                .unwrap_or_default()
                .iter()
                .copied()
                .filter(|&l| l > 0)
                .collect();
            v.sort_unstable();
            v.dedup();
            Ok(Some(v))
        }
        Some(list) => list
            .split(',')
            .map(|s| {
                s.trim().parse::<i64>().map_err(|_| {
                    invalid(
                        "--index",
                        format!("`{list}`: a comma-separated list of integer labels, or all"),
                    )
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()
            .map(Some),
    }
}

fn coords(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        c[a] = i % shape[a];
        i /= shape[a];
    }
    c
}

/// `kiln ndimage measure` (`stat`: one statistic named as the function).
pub(crate) fn run(a: &Args, stat: Option<&'static str>) -> anyhow::Result<ExitCode> {
    if a.output.is_some() {
        return Err(invalid(
            "--output",
            format!(
                "{} prints its results (a table, or --json); it writes no file",
                a.function
            ),
        ));
    }
    let stats: Vec<&'static str> = match (stat, a.stats.as_deref()) {
        // a statistic's own name (its --stats was refused with the other flags it does not read)
        (Some(s), _) => vec![s],
        (None, None) => {
            return Err(invalid(
                "--stats",
                format!("measure needs --stats NAME[,NAME..] (of: {})", STATS.join(", ")),
            ))
        }
        (None, Some(list)) => list
            .split(',')
            .map(|s| {
                stat_of(s.trim()).ok_or_else(|| {
                    invalid(
                        "--stats",
                        format!(
                            "`{}` is not a statistic; kiln ndimage measure has: {}",
                            s.trim(),
                            STATS.join(", ")
                        ),
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?,
    };
    let d = nda::read_nd("--input", &a.input)?;
    let labels = match a.labels.as_deref() {
        None => None,
        Some(p) => {
            let l = nda::read_nd("--labels", p)?;
            if l.shape != d.shape {
                return Err(invalid(
                    "--labels",
                    format!(
                        "{}: shape {:?}, the input's is {:?}; they must match",
                        p.display(),
                        l.shape,
                        d.shape
                    ),
                ));
            }
            Some(l.integers("--labels", p)?)
        }
    };
    let index = regions(a.index.as_deref(), labels.as_deref())?;
    let n_regions = index.as_ref().map_or(1, Vec::len);
    let mut slot: HashMap<i64, usize> = HashMap::new();
    for (k, &l) in index.iter().flatten().enumerate() {
        if slot.insert(l, k).is_some() {
            return Err(invalid("--index", format!("label {l} is listed twice")));
        }
    }
    // the region of element i, if any
    let region = |i: usize| -> Option<usize> {
        match (&labels, &index) {
            (None, _) => Some(0),
            (Some(l), None) => (l[i] > 0).then_some(0),
            (Some(l), Some(_)) => slot.get(&l[i]).copied(),
        }
    };
    let ndim = d.shape.len();
    let want_median = stats.contains(&"median");
    let want_com = stats.contains(&"center_of_mass");
    let empty = Acc {
        count: 0,
        sum: 0.0,
        sq: 0.0,
        min: (f64::INFINITY, 0),
        max: (f64::NEG_INFINITY, 0),
        moments: vec![0.0; if want_com { ndim } else { 0 }],
        values: Vec::new(),
    };
    let mut acc = vec![empty; n_regions];
    for (i, &v) in d.values.iter().enumerate() {
        let Some(r) = region(i) else { continue };
        let g = &mut acc[r];
        g.count += 1;
        g.sum += v;
        if v < g.min.0 || g.count == 1 {
            g.min = (v, i);
        }
        if v > g.max.0 || g.count == 1 {
            g.max = (v, i);
        }
        if want_com {
            for (m, c) in g.moments.iter_mut().zip(coords(i, &d.shape)) {
                *m += v * c as f64;
            }
        }
        if want_median {
            g.values.push(v);
        }
    }
    if stats
        .iter()
        .any(|s| matches!(*s, "variance" | "standard_deviation"))
    {
        let means: Vec<f64> = acc.iter().map(|g| g.sum / g.count as f64).collect();
        for (i, &v) in d.values.iter().enumerate() {
            if let Some(r) = region(i) {
                let c = v - means[r];
                acc[r].sq += c * c;
            }
        }
    }
    let rows: Vec<Value> = acc
        .iter_mut()
        .enumerate()
        .map(|(k, g)| {
            let mut row = Map::new();
            row.insert("label".into(), json!(index.as_ref().map(|ix| ix[k])));
            row.insert("count".into(), json!(g.count));
            for &s in &stats {
                row.insert(s.into(), value(s, g, &d.shape));
            }
            Value::Object(row)
        })
        .collect();
    if a.json {
        let v = json!({
            "command": "ndimage", "function": a.function, "input": a.input.display().to_string(),
            "labels": a.labels.as_ref().map(|p| p.display().to_string()),
            "index": a.index, "stats": stats, "shape": d.shape, "results": rows,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let mut head = vec!["label", "count"];
        head.extend(&stats);
        println!("{}", head.join("\t"));
        for r in &rows {
            let cells: Vec<String> = head.iter().map(|h| text(&r[*h])).collect();
            println!("{}", cells.join("\t"));
        }
    }
    Ok(ExitCode::from(exit::OK))
}

/// The statistic `s` of region `g` (null where the region is empty).
fn value(s: &str, g: &mut Acc, shape: &[usize]) -> Value {
    if g.count == 0 {
        return if s == "sum" { json!(0.0) } else { Value::Null };
    }
    let n = g.count as f64;
    let pos = |i: usize| json!(coords(i, shape));
    match s {
        "sum" => json!(g.sum),
        "mean" => json!(g.sum / n),
        "variance" => json!(g.sq / n),
        "standard_deviation" => json!((g.sq / n).sqrt()),
        "minimum" => json!(g.min.0),
        "maximum" => json!(g.max.0),
        "median" => {
            g.values.sort_by(f64::total_cmp);
            let m = g.values.len();
            json!(if m % 2 == 1 {
                g.values[m / 2]
            } else {
                (g.values[m / 2 - 1] + g.values[m / 2]) / 2.0
            })
        }
        "minimum_position" => pos(g.min.1),
        "maximum_position" => pos(g.max.1),
        "center_of_mass" => json!(g.moments.iter().map(|m| m / g.sum).collect::<Vec<_>>()),
        _ => json!([g.min.0, g.max.0, coords(g.min.1, shape), coords(g.max.1, shape)]),
    }
}

/// A table cell: numbers as they are, lists as `(a, b)`, null as `-`.
fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::Array(items) => format!("({})", items.iter().map(text).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}
