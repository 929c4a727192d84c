//! `kiln risk`: a book of options (the option CSV of `kiln price` with `underlying` and
//! `quantity` columns) revalued under every scenario of a scenario CSV, or of scenarios
//! drawn from a covariance of the shocks (`--simulate N --cov cov.csv`), through
//! `Runtime::risk`: the P&L per scenario, VaR and expected shortfall at `--levels`, and the
//! P&L vector (with `--matrix`, every position's) written atomically to `--pnl-out`.
//!
//! Bad rows of either file are all collected before anything runs: without `--skip-invalid`
//! each is listed on stderr (file, row, line, id and every reason naming its column) and the
//! command exits 4 writing nothing; with it the bad rows are listed as warnings and the rest
//! (a scenario with a bad row left out whole) is run.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kiln::core::finance::risk::{loss_measures, simulate, ScenarioSet};
use kiln::core::finance::{McParams, Rng};
use kiln::finance::risk::{Position, RiskParams, Valuation};
use kiln::finance::{BookOption, Method};
use kiln::{Config, DeviceRequest, Error, Runtime};
use kiln_io::options_csv::{self, OptionRow, RowError, RowKind};
use kiln_io::scenarios_csv;
use serde::Serialize;

use crate::row_files::io_error;

const CMD: &str = "kiln risk";

const AFTER_HELP: &str = "\
Book: the option CSV of `kiln price` (every kind: european, asian_*, barrier_*, american,
  american_barrier_*, basket, american_rainbow, model heston), plus two optional columns:
    underlying  the name the scenarios shock (empty: only the scenarios' `*` shock)
    quantity    positions held (default 1; negative for a short position)
  A basket's or American rainbow's assets are shocked by their names in its basket file
  (the `asset` column); the row's own underlying shocks its rate.
Scenarios: one row per scenario and underlying (columns in any order):
    scenario,underlying,spot_shift,spot_shift_kind,vol_shift,rate_shift
    crash,AAPL,-0.2,relative,0.1,
    crash,*,-0.1,relative,0.05,-0.005
    rally,AAPL,12.5,absolute,,
  `*` is every underlying the scenario does not name. spot_shift_kind: relative (default,
  S(1+x), x > -1) or absolute (S+x); vol_shift is added to the volatility (0.05 = five
  vol points), rate_shift to the rate (0.0025 = 25 bp). Empty cells move nothing. Under
  Heston a vol shift moves sqrt(v0) and sqrt(theta) by the same amount.
Simulated scenarios (--simulate N --cov cov.csv --seed S): N draws of a zero-mean normal
  with the covariance in cov.csv, a header `factor,F1,F2,..` then one row per factor in
  that order; a factor is UNDERLYING:spot (log return), UNDERLYING:vol or UNDERLYING:rate:
    factor,AAPL:spot,AAPL:vol
    AAPL:spot,0.0004,-0.00002
    AAPL:vol,-0.00002,0.0001
  A matrix that is not symmetric positive semi-definite is refused, naming the file.
P&L: sum over positions of quantity x (value shocked - value base). Values are closed
  forms where the kind has one (--method analytic: Black-Scholes but the arithmetic
  Asian, the Heston European, the American tree, geometric baskets, two-asset spreads and
  rainbows; never an American rainbow) and Monte Carlo otherwise (or for every option with
  --method mc), with common random numbers: an option draws the same stream in the base
  and in every scenario.
VaR and ES: the loss is L = -P&L. VaR_a = the a-quantile of L with NumPy's default
  'linear' interpolation (np.quantile(L, a)); ES_a = the mean of the losses >= VaR_a
  (L[L >= VaR_a].mean()). Both are positive for a loss.
Output: --pnl-out writes scenario,pnl (and with --matrix one column per position, headed
  by its id) atomically; --json prints the summary as JSON.
Bad rows: every one, of both files, is reported (file, row, line, id, column and reason)
  in one pass; exit 4 and nothing written, unless --skip-invalid.
Example:
  kiln risk --book book.csv --scenarios s.csv --levels 0.95,0.99 --pnl-out pnl.csv
  kiln risk --book book.csv --simulate 10000 --cov cov.csv --seed 7 --json";

/// `kiln risk` options.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The book: an option CSV (see below), with optional underlying and quantity columns.
    #[arg(long, value_name = "FILE")]
    book: PathBuf,
    /// The scenarios: a scenario CSV (see below). Or --simulate with --cov.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "simulate",
        conflicts_with = "simulate"
    )]
    scenarios: Option<PathBuf>,
    /// Draw N scenarios from the covariance of --cov.
    #[arg(long, value_name = "N", requires = "cov")]
    simulate: Option<usize>,
    /// The covariance of the shocks for --simulate (see below).
    #[arg(long, value_name = "FILE", requires = "simulate")]
    cov: Option<PathBuf>,
    /// The seed of --simulate's draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// VaR and ES levels, comma-separated, each in (0, 1).
    #[arg(long, value_delimiter = ',', default_value = "0.95,0.99")]
    levels: Vec<f64>,
    /// analytic: closed forms where they exist, Monte Carlo for the rest; mc: Monte Carlo for all.
    #[arg(long, default_value = "analytic")]
    method: String,
    /// Monte Carlo paths per valuation.
    #[arg(long, default_value_t = 20_000)]
    paths: u64,
    /// Monte Carlo time steps (European styles, continuous barriers; also the exercise dates
    /// of american rows without fixings).
    #[arg(long, default_value_t = 64)]
    steps: u32,
    /// The Monte Carlo seed (the common random numbers' key).
    #[arg(long, default_value_t = McParams::default().seed)]
    mc_seed: u64,
    /// Steps of the American binomial tree.
    #[arg(long, default_value_t = kiln::finance::DEFAULT_TREE_STEPS)]
    tree_steps: u32,
    /// Where to write the P&L per scenario (CSV, replaced atomically).
    #[arg(long, value_name = "FILE")]
    pnl_out: Option<PathBuf>,
    /// Write every position's P&L to --pnl-out too (one column per position).
    #[arg(long, requires = "pnl_out")]
    matrix: bool,
    /// Run the good rows anyway and list the bad ones as warnings.
    #[arg(long)]
    skip_invalid: bool,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct LevelOut {
    level: f64,
    var: f64,
    es: f64,
    tail: usize,
}

#[derive(Serialize)]
struct Summary {
    book: String,
    scenarios_source: String,
    options: usize,
    scenarios: usize,
    invalid_rows: usize,
    dropped_scenarios: Vec<String>,
    method: String,
    analytic_options: usize,
    monte_carlo_options: usize,
    gpu_options: usize,
    measures: Vec<LevelOut>,
    pnl_out: Option<String>,
    device: String,
    seconds: f64,
    total_seconds: f64,
}

/// Each position of the book's good rows (american rows without dates: `steps` dates, as
/// `kiln price` does).
fn positions(file: &options_csv::OptionsFile, steps: u32) -> Vec<Position> {
    file.options
        .iter()
        .zip(&file.holdings)
        .filter_map(|(o, h)| {
            book_option(o, steps, &file.baskets).map(|option| Position {
                option,
                underlying: h.underlying.clone(),
                quantity: h.quantity,
                id: Some(o.id.clone()),
            })
        })
        .collect()
}

fn book_option(o: &OptionRow, steps: u32, baskets: &[kiln_io::basket_csv::BasketFile]) -> Option<BookOption> {
    match o.kind {
        RowKind::Plain => Some(BookOption::Plain(o.spec)),
        RowKind::Heston(_) => o.heston().map(BookOption::Heston),
        RowKind::American(dates) => o.american(steps).map(|spec| BookOption::American {
            spec,
            continuous: dates.is_none(),
        }),
        RowKind::AmericanBarrier(dates) => {
            o.american_barrier(steps).map(|spec| BookOption::AmericanBarrier {
                spec,
                continuous: dates.is_none(),
            })
        }
        RowKind::Basket { .. } => o.basket(baskets).map(BookOption::Basket),
        RowKind::AmericanRainbow { .. } => o.american_rainbow(baskets).map(BookOption::AmericanRainbow),
    }
}

/// Runs the command; see the module docs.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let t_start = Instant::now();
    let method: Method = args.method.parse()?;
    // the levels before any file is read or a device starts
    loss_measures(&[0.0], &args.levels)?;
    let book = options_csv::read_options(&args.book).map_err(io_error("--book"))?;
    let mut bad: Vec<(String, RowError)> = book
        .errors
        .iter()
        .map(|e| (args.book.display().to_string(), e.clone()))
        .collect();
    let mut dropped = Vec::new();
    let (set, source) = match (&args.scenarios, args.simulate, &args.cov) {
        (Some(path), _, _) => {
            let f = scenarios_csv::read_scenarios(path).map_err(io_error("--scenarios"))?;
            bad.extend(f.errors.iter().map(|e| (path.display().to_string(), e.clone())));
            dropped = f.dropped;
            (f.set, path.display().to_string())
        }
        (None, Some(n), Some(cov)) => {
            let c = scenarios_csv::read_covariance(cov).map_err(io_error("--cov"))?;
            let what = cov.display().to_string();
            let set = simulate(&c.factors, &c.matrix, n, args.seed, &what)?;
            (set, format!("{n} draws from {what} (seed {})", args.seed))
        }
        _ => {
            return Err(Error::invalid(CMD, "give --scenarios FILE, or --simulate N with --cov FILE").into());
        }
    };
    let total_rows = book.rows();
    if !bad.is_empty() {
        for (file, e) in &bad {
            eprintln!(
                "{}: {file}: {e}",
                if args.skip_invalid {
                    "warning: skipped"
                } else {
                    "invalid"
                }
            );
        }
        if !args.skip_invalid {
            return Err(Error::invalid(
                CMD,
                format!(
                    "{} invalid rows (listed above); nothing was written. Fix them, or pass --skip-invalid to \
                     run the rest (a scenario with a bad row is left out whole)",
                    bad.len()
                ),
            )
            .into());
        }
    }
    if set.is_empty() {
        return Err(Error::invalid(CMD, format!("no scenarios to run in {source}")).into());
    }
    let positions = positions(&book, args.steps);
    let params = RiskParams {
        method,
        mc: McParams {
            paths: args.paths,
            steps: args.steps,
            seed: args.mc_seed,
            antithetic: false,
            control_variate: false,
            fast_math: false,
            rng: Rng::Philox,
        },
        levels: args.levels.clone(),
        keep_matrix: args.matrix,
        tree_steps: args.tree_steps,
        use_gpu: true,
    };
    // After the files are read: a bad file costs no device start.
    let rt = Runtime::new(request, cfg)?;
    let bar = progress_bar(&positions, &set, method);
    let t_run = Instant::now();
    let tick = || {
        if let Some(b) = &bar {
            b.inc(1);
        }
    };
    let report = rt.risk_progress(&positions, &set, &params, &tick);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let report = report?;
    let seconds = t_run.elapsed().as_secs_f64();
    if let Some(out) = &args.pnl_out {
        let names: Vec<String> = set.scenarios.iter().map(|s| s.name.clone()).collect();
        let ids: Vec<String> = positions
            .iter()
            .map(|p| p.id.clone().unwrap_or_default())
            .collect();
        let matrix = report.matrix.as_deref().map(|m| (ids.as_slice(), m));
        scenarios_csv::write_pnl(out, &names, &report.pnl, matrix).map_err(io_error("--pnl-out"))?;
    }
    let analytic = report
        .valuation
        .iter()
        .filter(|v| **v == Valuation::Analytic)
        .count();
    if args.json {
        let summary = Summary {
            book: args.book.display().to_string(),
            scenarios_source: source,
            options: positions.len(),
            scenarios: set.len(),
            invalid_rows: bad.len(),
            dropped_scenarios: dropped,
            method: args.method.clone(),
            analytic_options: analytic,
            monte_carlo_options: positions.len() - analytic,
            gpu_options: report.gpu_options,
            measures: report
                .measures
                .iter()
                .map(|m| LevelOut {
                    level: m.level,
                    var: m.var,
                    es: m.es,
                    tail: m.tail,
                })
                .collect(),
            pnl_out: args.pnl_out.as_ref().map(|p| p.display().to_string()),
            device: rt.device_name(),
            seconds,
            total_seconds: t_start.elapsed().as_secs_f64(),
        };
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "{} options (of {total_rows} rows) x {} scenarios: {analytic} analytic, {} Monte Carlo; {:.3} s on {}",
            positions.len(),
            set.len(),
            positions.len() - analytic,
            seconds,
            rt.device_name()
        );
        println!("{:>8} {:>16} {:>16} {:>6}", "level", "VaR", "ES", "tail");
        for m in &report.measures {
            println!("{:>8} {:>16.6} {:>16.6} {:>6}", m.level, m.var, m.es, m.tail);
        }
        if let Some(out) = &args.pnl_out {
            println!("P&L per scenario in {}", out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A bar over the scenarios when stderr is a terminal and the run is long (Monte Carlo, or
/// more than a million analytic valuations).
fn progress_bar(positions: &[Position], set: &ScenarioSet, method: Method) -> Option<ProgressBar> {
    let long = method == Method::MonteCarlo
        || positions
            .iter()
            .any(|p| !matches!(p.option, BookOption::Plain(_)))
        || positions.len().saturating_mul(set.len()) > 1_000_000;
    (std::io::stderr().is_terminal() && long && set.len() > 1).then(|| {
        let pb = ProgressBar::with_draw_target(Some(set.len() as u64), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template("revaluing [{bar:40}] {pos}/{len} scenarios (eta {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb
    })
}
