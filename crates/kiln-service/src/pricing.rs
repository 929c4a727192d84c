//! Pricing jobs: validation of a `price` job's params and inputs into a task, and the
//! worker's side of mixed books.
//!
//! A job's options are records (`inputs.options`, parsed by the facade's shared record
//! parser, `kiln::finance::records`, the one the Python package uses: the same fields,
//! defaults and messages) or the rows of an option CSV blob (`kiln price`'s format, read by
//! kiln_io). A book of Black-Scholes options only, priced with Philox and no `target_se`,
//! becomes [`Task::Price`], the path it always took (merged with other jobs of its batch
//! key, split across a multi-device worker). Anything else (a Heston, American, basket or
//! American rainbow option, `rng = "sobol"`, `target_se`) becomes [`Task::PriceBook`]: a solo job priced by
//! `Runtime::price_book` (or `price_to_target`) with stream indices from 0, so its prices
//! are the bits of `kiln price` and `kiln.price` on the same book and parameters, whatever
//! else is queued. A multi-device worker runs it on its first device.
//!
//! Basket and American rainbow rows of a CSV blob are refused: their `basket` cell names a
//! second file by a path on the machine that reads the CSV, and a server must not open
//! paths a client chooses. The file is scanned for them before kiln_io reads it (which
//! would open those paths); these options go in as records (`style: "basket"` or
//! `"american_rainbow"` with `assets` and `correlation` inline).
//!
//! Validation does everything that needs no device: each option's fields, a basket's
//! correlation matrix down to its Cholesky factor, and whether the method has a closed form
//! for the option (an arithmetic basket, a Heston Asian or an American rainbow under
//! `analytic` is refused and told to use `mc`).

use crate::error::ApiError;
use crate::protocol::WorkOutcome;
use crate::task::{BlobLookup, Task};
use kiln::core::finance::{McParams, OptionSpec, PriceResult, Rng};
use kiln::finance::records::{book_option, normalize_record};
use kiln::finance::{BookOption, Method, TargetSe};
use kiln::Runtime;
use kiln_io::options_csv::{self, RowKind};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::Path;

/// Replicates of a Sobol run when `params.replicates` is not given (as `kiln.price`).
pub const DEFAULT_REPLICATES: u32 = 16;

/// The path cap of a `target_se` run when `params.max_paths` is not given (as `kiln.price`).
pub const DEFAULT_MAX_PATHS: u64 = 1 << 32;

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidParams(msg.into())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceParams {
    #[serde(default = "analytic")]
    method: String,
    paths: Option<u64>,
    steps: Option<u32>,
    seed: Option<u64>,
    antithetic: Option<bool>,
    control_variate: Option<bool>,
    fast_math: Option<bool>,
    rng: Option<String>,
    replicates: Option<u32>,
    target_se: Option<Value>,
    max_paths: Option<u64>,
}

fn analytic() -> String {
    "analytic".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceInputs {
    options: Option<Vec<Value>>,
    csv_blob: Option<String>,
}

/// A `target_se` as `kiln.price` takes it: a number (absolute) or a string (`1e-4`,
/// `1e-4rel`, `0.01%`), parsed by `TargetSe`'s `FromStr`.
fn target_se(v: &Value) -> Result<TargetSe, ApiError> {
    let text = match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => {
            return Err(bad(format!(
                "params.target_se = {other}; use a number (absolute) or a string such as \"1e-4rel\" or \"0.01%\" (relative)"
            )))
        }
    };
    text.parse::<TargetSe>()
        .map_err(|e| bad(format!("params.target_se: {e}")))
}

/// Checks a `price` job and normalizes it into [`Task::Price`] or [`Task::PriceBook`]
/// (module docs); the second value is the job's input elements (its options).
pub fn validate(params: &Value, inputs: &Value, blobs: &dyn BlobLookup) -> Result<(Task, u64), ApiError> {
    let p: PriceParams = crate::task::parse("params", params)?;
    let method = match p.method.as_str() {
        "analytic" => Method::Analytic,
        "mc" => Method::MonteCarlo,
        other => return Err(bad(format!("params.method = `{other}`; use analytic or mc"))),
    };
    if p.replicates.is_some() && p.rng.as_deref() != Some("sobol") {
        // Philox has no replicates: say so rather than ignore the number
        return Err(bad(
            "params.replicates needs rng = \"sobol\" (Philox runs have no replicates)",
        ));
    }
    let rng = match p.rng.as_deref() {
        None | Some("philox") => Rng::Philox,
        Some("sobol") => Rng::Sobol {
            replicates: p.replicates.unwrap_or(DEFAULT_REPLICATES),
        },
        Some(other) => return Err(bad(format!("params.rng = `{other}`; use philox or sobol"))),
    };
    let d = McParams::default();
    let mc = McParams {
        paths: p.paths.unwrap_or(d.paths),
        steps: p.steps.unwrap_or(d.steps),
        seed: p.seed.unwrap_or(d.seed),
        antithetic: p.antithetic.unwrap_or(d.antithetic),
        control_variate: p.control_variate.unwrap_or(d.control_variate),
        fast_math: p.fast_math.unwrap_or(d.fast_math),
        rng,
    };
    if method == Method::MonteCarlo {
        mc.validate().map_err(|e| bad(format!("params: {e}")))?;
    }
    let target = p.target_se.as_ref().map(target_se).transpose()?;
    if target.is_some() && method != Method::MonteCarlo {
        return Err(bad("params.target_se needs method mc"));
    }
    if p.max_paths.is_some() && target.is_none() {
        return Err(bad(
            "params.max_paths caps a target_se run; give target_se too, or set paths",
        ));
    }
    let max_paths = p.max_paths.unwrap_or(DEFAULT_MAX_PATHS);

    let i: PriceInputs = crate::task::parse("inputs", inputs)?;
    let (book, from_csv) = match (i.options, i.csv_blob) {
        (Some(list), None) => (records(list, method, mc.steps)?, false),
        (None, Some(id)) => (csv_book(&id, method, mc.steps, blobs)?, true),
        _ => {
            return Err(bad(
                "inputs: give exactly one of `options` (a list) and `csv_blob`",
            ))
        }
    };
    let place = |n: usize| {
        if from_csv {
            format!("inputs.csv_blob: row {}", n + 1)
        } else {
            format!("inputs.options[{n}]")
        }
    };
    if book.is_empty() {
        return Err(bad("inputs: no options to price"));
    }
    if u32::try_from(book.len()).is_err() {
        return Err(bad(
            "inputs: at most 2^32 options a job (one Monte Carlo stream each)",
        ));
    }
    if target.is_some() {
        if let Some((n, o)) = book
            .iter()
            .enumerate()
            .find(|(_, o)| !matches!(o, BookOption::Plain(_)))
        {
            return Err(bad(format!(
                "{}: target_se prices Black-Scholes options only (this one is {}); price it without target_se",
                place(n),
                o.kind()
            )));
        }
    }
    let n = book.len() as u64;
    let method = p.method;
    // Black-Scholes, Philox, no target: the batched path every such job has always taken
    if target.is_none() && rng == Rng::Philox && book.iter().all(|o| matches!(o, BookOption::Plain(_))) {
        let options: Vec<OptionSpec> = book
            .into_iter()
            .filter_map(|o| match o {
                BookOption::Plain(s) => Some(s),
                _ => None,
            })
            .collect();
        return Ok((Task::Price { method, mc, options }, n));
    }
    Ok((
        Task::PriceBook {
            method,
            mc,
            options: book,
            target_se: target,
            max_paths,
            first_option: 0,
        },
        n,
    ))
}

/// Checks one book option: its fields, then whether `method` prices it.
fn check(o: &BookOption, method: Method) -> Result<(), String> {
    o.validate().map_err(|e| e.to_string())?;
    match o.unsupported(method) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// `inputs.options`: records as `kiln.price` takes them.
fn records(list: Vec<Value>, method: Method, steps: u32) -> Result<Vec<BookOption>, ApiError> {
    list.into_iter()
        .enumerate()
        .map(|(n, v)| {
            let o = normalize_record(v)
                .and_then(|r| book_option(r, steps))
                .map_err(|e| bad(format!("inputs.options[{n}]: {e}")))?;
            check(&o, method).map_err(|e| bad(format!("inputs.options[{n}]: {e}")))?;
            Ok(o)
        })
        .collect()
}

/// `inputs.csv_blob`: an option CSV of the caller's, as `kiln price --input` reads it, every
/// row good (the first bad row is the error), basket rows refused (module docs). Row `r`
/// is option `r - 1` of the book, as `kiln price` numbers its streams.
fn csv_book(
    id: &str,
    method: Method,
    steps: u32,
    blobs: &dyn BlobLookup,
) -> Result<Vec<BookOption>, ApiError> {
    let (path, format) = blobs
        .blob(id)
        .ok_or_else(|| bad(format!("inputs.csv_blob: no blob `{id}`")))?;
    if format != "csv" {
        return Err(bad(format!("inputs.csv_blob: blob `{id}` is {format}, not csv")));
    }
    let data =
        std::fs::read(&path).map_err(|e| bad(format!("inputs.csv_blob: blob `{id}` cannot be read: {e}")))?;
    refuse_basket_rows(&data)?;
    let f = options_csv::parse_options(Path::new(id), data.as_slice())
        .map_err(|e| bad(format!("inputs.csv_blob: {e}")))?;
    if let Some(e) = f.errors.first() {
        return Err(bad(format!(
            "inputs.csv_blob: {} bad rows; the first: {e}",
            f.errors.len()
        )));
    }
    f.options
        .iter()
        .map(|r| {
            let o = match r.kind {
                RowKind::Plain => Some(BookOption::Plain(r.spec)),
                RowKind::Heston(_) => r.heston().map(BookOption::Heston),
                RowKind::American(dates) => r.american(steps).map(|spec| BookOption::American {
                    spec,
                    continuous: dates.is_none(),
                }),
                RowKind::AmericanBarrier(dates) => {
                    r.american_barrier(steps).map(|spec| BookOption::AmericanBarrier {
                        spec,
                        continuous: dates.is_none(),
                    })
                }
                RowKind::Basket { .. } | RowKind::AmericanRainbow { .. } => None,
            };
            let where_ = format!("inputs.csv_blob: row {} (id `{}`)", r.row, r.id);
            let o = o.ok_or_else(|| bad(format!("{where_}: basket rows are not read from CSV blobs")))?;
            check(&o, method).map_err(|e| bad(format!("{where_}: {e}")))?;
            Ok(o)
        })
        .collect()
}

/// Refuses an option CSV with basket or American rainbow rows (a `style` of `basket` or
/// `american_rainbow`, or a `basket` cell) before it is parsed: parsing would open the
/// basket files they name.
fn refuse_basket_rows(data: &[u8]) -> Result<(), ApiError> {
    // the option CSV reader's settings (kiln_io::options_csv::parse_options)
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(data);
    let Ok(headers) = rdr.byte_headers().cloned() else {
        // unreadable: kiln_io reports it
        return Ok(());
    };
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| String::from_utf8_lossy(h).trim().eq_ignore_ascii_case(name))
    };
    let (style, basket) = (col("style"), col("basket"));
    if basket.is_none() && style.is_none() {
        return Ok(());
    }
    let mut row = 0usize;
    for rec in rdr.byte_records() {
        let Ok(rec) = rec else {
            row += 1;
            continue;
        };
        if rec.iter().all(|f| f.is_empty()) {
            continue;
        }
        row += 1;
        let cell = |c: Option<usize>| c.and_then(|c| rec.get(c)).unwrap_or_default();
        let style = cell(style);
        let rainbow = style.eq_ignore_ascii_case(b"american_rainbow");
        if !cell(basket).is_empty() || rainbow || style.eq_ignore_ascii_case(b"basket") {
            let what = if rainbow {
                "an american_rainbow"
            } else {
                "a basket"
            };
            return Err(bad(format!(
                "inputs.csv_blob: row {row} is {what} row; its `basket` column names a file by a path \
                 on the server, which the service does not open. Send basket and American rainbow \
                 options as records in inputs.options (style \"basket\" or \"american_rainbow\" with \
                 `assets` and `correlation`; docs/operations.md)"
            )));
        }
    }
    Ok(())
}

/// Runs a [`Task::PriceBook`] on `rt`: `Runtime::price_book` on the whole book from stream
/// `first_option` (0 but for a shard of a larger book, crate::shard), or
/// `Runtime::price_to_target` with a target. The result is [`Task::Price`]'s shape
/// (`method`, `prices`, `stream_offset` (`first_option`), `batch_options`, `device`, `workers` null) with
/// each price's `kind` (`bs`, `heston`, `american`, `american barrier`, `basket`,
/// `american rainbow`) and the
/// generator (`rng`),
/// and with a target: each price's `met`, and `target_se`, `max_paths`, `rounds`,
/// `seconds`. A sticky device error fails the job (the worker restarts); an option's own
/// error is an `{"error", "kind"}` row.
pub fn run_book(
    rt: &Runtime,
    method: &str,
    mc: &McParams,
    options: &[BookOption],
    target: Option<TargetSe>,
    max_paths: u64,
    first_option: u32,
) -> WorkOutcome {
    let m = if method == "mc" {
        Method::MonteCarlo
    } else {
        Method::Analytic
    };
    let (prices, run) = match target {
        None => (rt.price_book(options, m, mc, first_option), None),
        Some(t) => {
            // validation let only Black-Scholes options through with a target
            let specs: Vec<OptionSpec> = options
                .iter()
                .filter_map(|o| match o {
                    BookOption::Plain(s) => Some(*s),
                    _ => None,
                })
                .collect();
            if specs.len() != options.len() {
                return WorkOutcome::Err {
                    code: "invalid_input".into(),
                    message: "target_se prices Black-Scholes options only".into(),
                    retry: false,
                    sticky: false,
                };
            }
            let r = rt.price_to_target(&specs, mc, t, max_paths, first_option);
            (r.results, Some((r.met, r.rounds, r.seconds)))
        }
    };
    if let Some(e) = prices
        .iter()
        .find_map(|r| r.as_ref().err().filter(|e| e.is_sticky()))
    {
        return crate::exec::kiln_error(e);
    }
    let rows: Vec<Value> = prices
        .iter()
        .zip(options)
        .enumerate()
        .map(|(i, (r, o))| {
            let mut row = match r {
                Ok(p) => price_row(p),
                Err(e) => json!({ "error": e.to_string() }),
            };
            row["kind"] = json!(o.kind());
            if let Some((met, _, _)) = &run {
                row["met"] = json!(met.get(i).copied().unwrap_or(false));
            }
            row
        })
        .collect();
    let mut result = json!({
        "method": method,
        "rng": match mc.rng {
            Rng::Philox => "philox",
            Rng::Sobol { .. } => "sobol",
        },
        "prices": rows,
        "stream_offset": first_option,
        "batch_options": options.len(),
        "device": rt.device_name(),
        "workers": Value::Null,
    });
    if let (Some((_, rounds, seconds)), Some(t)) = (run, target) {
        result["target_se"] = json!(t);
        result["max_paths"] = json!(max_paths);
        result["rounds"] = json!(rounds);
        result["seconds"] = json!(seconds);
    }
    WorkOutcome::Ok {
        result,
        blobs: Vec::new(),
    }
}

/// One price as [`Task::Price`]'s rows show it.
fn price_row(p: &PriceResult) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
}
