//! `kiln implied-vol`: a CSV of European option quotes in, one implied volatility per quote
//! out (the file rules are `kiln_io::quotes_csv`'s; the solver is Jäckel's "Let's Be
//! Rational", through `Runtime::implied_volatility_book`: on the GPU the global `--device`
//! selects, auto taking one where usable, else on the CPU's cores; `--json` names the
//! device).
//!
//! Bad rows (the file's own: an unknown type, a cell that is not a number, a spot, strike or
//! maturity `<= 0`, a duplicate id) are all collected before anything is written: without
//! `--skip-invalid` they are listed on stderr and the command exits 4 writing nothing; with
//! it the good rows are solved and written, and the bad ones go to `<output stem>.errors.csv`
//! beside the output (always written, header only when there are none). A quote that has no
//! volatility (a price below the intrinsic value, at or above the upper bound, zero or
//! negative) is not a bad row: its output row has an empty volatility and the reason.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use kiln::finance::implied::{book_threads, Quote};
use kiln::{BackendKind, Config, DeviceRequest, Runtime};
use kiln_io::quotes_csv::{self, VolRecord};
use serde::Serialize;

use crate::row_files::{io_error, RowFiles};

const AFTER_HELP: &str = "\
Input: a CSV with a header row; columns in any order, names case-insensitive.
  required: type (call|put), price, spot, strike, rate, maturity
  optional: id (default: the data row number), dividend (default 0)
  price is the option's price today (discounted); rate and dividend are continuously
  compounded per year (0.05 = 5%), maturity in years. Rows are numbered from 1 after the
  header (blank lines not counted).
Output: id,volatility,reason,detail, one row per quote in input order. volatility is
  per sqrt(year) (0.2 = 20%), written to full precision. A quote with no volatility has an
  empty volatility, a reason and a message:
    not_positive       price <= 0
    below_intrinsic    price < max(S e^-qT - K e^-rT, 0) (call), max(K e^-rT - S e^-qT, 0) (put)
    at_intrinsic       price = the intrinsic value: no time value left, in f64
    above_upper_bound  price >= S e^-qT (call) or K e^-rT (put)
    out_of_range       the forward S e^(r-q)T or the discount e^-rT overflows f64
Method: Jaeckel's \"Let's Be Rational\": machine precision for any moneyness and total
  volatility in two iterations, on the GPU that --device selects (auto: one if usable),
  else on the CPU's cores (over 10^6 quotes a second per core); --device cpu forces the
  CPU. The GPU agrees with the CPU to what an ulp of input rounding allows (a few ulp;
  a price within rounding of a bound may get another reason).
  Where the price hardly moves with the volatility (deep in the money, total volatility
  sigma sqrt(T) of several units), f64 prices determine the volatility only to
  about 1e-16 price / vega.
Bad rows (an unknown type, a cell that is not a number, spot, strike or maturity <= 0, a
  duplicate id): every one is reported (row, file line, id, column and reason) in one pass;
  exit 4 and nothing written, unless --skip-invalid: then the good rows are written and the
  bad ones to <output stem>.errors.csv (row,id,reason) beside the output.
Example:
  quotes.csv:
    id,type,price,spot,strike,rate,dividend,maturity
    a,call,10.45,100,100,0.05,0,1
    b,put,5.57,100,100,0.05,0,1
    c,call,1,100,50,0.05,0,1
  kiln implied-vol --input quotes.csv --output vols.csv --device cpu --json
  vols.csv (the CPU's digits; on a GPU the last one may differ):
    id,volatility,reason,detail
    a,0.1999844480109435,,
    b,0.1999060318060324,,
    c,,below_intrinsic,\"price 1 is below the intrinsic value 52.4385287749643 (an arbitrage): ...\"";

/// `kiln implied-vol` options.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The quotes: a CSV with a header row (columns below).
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// Where to write the volatilities (CSV, replaced atomically).
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// Solve the good rows anyway and list the bad ones in <output stem>.errors.csv.
    #[arg(long)]
    skip_invalid: bool,
    /// Print a summary object (counts per outcome, timing) as JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Summary {
    input: String,
    output: String,
    errors_output: Option<String>,
    /// Data rows in the input.
    quotes: usize,
    /// Quotes with a volatility.
    solved: usize,
    /// Quotes read but without a volatility, by reason code.
    no_volatility: std::collections::BTreeMap<&'static str, usize>,
    /// Bad rows (not read).
    invalid: usize,
    /// `cpu` or `cuda:N`: where the book was solved.
    device: String,
    /// The CPU solver's threads (null on a GPU).
    threads: Option<usize>,
    seconds: f64,
    quotes_per_s: f64,
    total_seconds: f64,
}

/// Solve the input file into the output file; see the module docs.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let t_start = Instant::now();
    let files = RowFiles::new("kiln implied-vol", "solve", &args.input, &args.output, "vols");
    files.check_outputs("volatilities")?;
    let file = quotes_csv::read_quotes(&args.input).map_err(io_error("--input"))?;
    let total = file.rows();
    if !file.errors.is_empty() && !args.skip_invalid {
        return Err(files.fail_invalid(&file.errors, total));
    }
    let quotes: Vec<Quote> = file.quotes.iter().map(|q| q.quote).collect();
    // After the file is read: a bad file costs no device start.
    let rt = Runtime::new(request, cfg)?;
    let t_solve = Instant::now();
    let results = rt.implied_volatility_book(&quotes)?;
    let seconds = t_solve.elapsed().as_secs_f64();
    let mut no_volatility = std::collections::BTreeMap::new();
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        *no_volatility.entry(e.code()).or_insert(0) += 1;
    }
    let records: Vec<VolRecord> = file
        .quotes
        .iter()
        .zip(results)
        .map(|(q, result)| VolRecord {
            id: q.id.clone(),
            result,
        })
        .collect();
    quotes_csv::write_vols(&args.output, &records).map_err(io_error("--output"))?;
    if args.skip_invalid {
        files.write_errors(&file.errors)?;
        files.warn_skipped(file.errors.len(), total);
    }
    let solved = records.iter().filter(|r| r.result.is_ok()).count();
    if args.json {
        let summary = Summary {
            input: args.input.display().to_string(),
            output: args.output.display().to_string(),
            errors_output: args.skip_invalid.then(|| files.errors().display().to_string()),
            quotes: total,
            solved,
            no_volatility,
            invalid: file.errors.len(),
            device: rt.device_name(),
            threads: (rt.kind() == BackendKind::Cpu).then(book_threads),
            seconds,
            quotes_per_s: if seconds > 0.0 {
                quotes.len() as f64 / seconds
            } else {
                0.0
            },
            total_seconds: t_start.elapsed().as_secs_f64(),
        };
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let without = records.len() - solved;
        println!(
            "{solved} of {total} quotes solved, {without} without a volatility (reasons in {}), {} invalid; {:.3} s on {}",
            args.output.display(),
            file.errors.len(),
            seconds,
            rt.device_name()
        );
    }
    Ok(ExitCode::SUCCESS)
}
