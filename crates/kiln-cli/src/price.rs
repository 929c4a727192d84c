//! `kiln price`: a portfolio CSV in, one row of price, standard error and Greeks per option
//! out (the file rules are `kiln_io::options_csv`'s).
//!
//! Bad rows (the file's own, styles the method cannot price, what each Monte Carlo engine
//! refuses for the run's flags, a non-finite result) are all collected before anything is
//! written, and all but a non-finite result (known only once priced) in one pass before any
//! pricing: without `--skip-invalid` they are listed on stderr and the command exits 4
//! writing nothing; with it the good rows are written and the bad ones go to
//! `<output stem>.errors.csv` beside the output (`crate::row_files`).
//!
//! Reproducibility: the option on data row `r` uses Monte Carlo stream `r - 1`, and the
//! portfolio is priced in batches through `Runtime::price_batch`, which keeps every price
//! bit-identical to pricing it whole; so a row's price depends on its row, the seed and the
//! run parameters only: not on the device, the batch size, or which other rows are invalid.
//!
//! Heston, American, basket and American rainbow rows (`kiln_io::options_csv::RowKind`) go
//! through their own engines by way of the facade's mixed book (`Runtime::price_book`: the
//! Heston, American, basket and American rainbow engines, the closed forms and the tree), batch by batch as well; a batch never
//! mixes kinds. The Python package's `kiln.price` prices records through the same book, so
//! a CSV and a list of dicts give the same bits (`tests/price_book.rs`).

use crate::exit;
use crate::row_files::{io_error, RowFiles};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kiln::core::finance::{McParams, OptionSpec, PriceResult, Rng, Style};
use kiln::finance::BookOption;
use kiln::finance::{supports, Method};
use kiln::{BackendKind, Runtime};
use kiln::{Config, DeviceRequest, Error};
use kiln_io::basket_csv::BasketFile;
use kiln_io::options_csv::{self, OptionRow, PriceRecord, RowError, RowKind};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

const AFTER_HELP: &str = "\
Input: a CSV with a header row; columns in any order, names case-insensitive.
  required: type (call|put), style, spot, strike, rate, volatility, maturity
  optional: id (default: the data row number), dividend (default 0),
            model (bs, the default, or heston) with kappa, theta, xi, rho, v0 (heston rows:
                   mean reversion, long-run variance, vol of variance, correlation, variance
                   now; their volatility cell is not used and may be empty),
            fixings (asian_* styles: number of equally spaced fixings, the last at maturity;
                     barrier_* styles: discrete monitoring dates, equally spaced, the last at
                     maturity; empty: monitored continuously),
            barrier (barrier_* styles: the level),
            rebate (barrier_* styles: cash rebate, analytic only; default 0),
            basket (styles basket, american_rainbow: the basket file, a path relative to
                    the input's folder),
            average (style basket: arithmetic, the default, geometric, max or min;
                     style american_rainbow: max or min, required)
  Barriers: continuous monitoring is exact in --method analytic and, in --method mc, each
  of the --steps steps adds the Brownian bridge's probability of crossing between its ends;
  with fixings = m, mc steps from date to date (exact) and analytic uses Broadie-Glasserman-
  Kou's shifted barrier (an approximation, best with many dates).
  styles: european asian_arithmetic asian_geometric barrier_up_out barrier_up_in
          barrier_down_out barrier_down_in american (fixings: the exercise dates, equally
          spaced, the last at maturity; empty: continuous exercise) american_barrier_up_out
          american_barrier_up_in american_barrier_down_out american_barrier_down_in (an
          American option with a continuously monitored barrier and rebate; fixings as for
          american) basket (see below) american_rainbow (see below)
  rate and dividend continuously compounded per year, volatility per sqrt(year) (0.2 = 20%),
  maturity in years. Rows are numbered from 1 after the header (blank lines not counted).
Output: id,price,std_error,delta,gamma,vega,theta,rho (an empty cell where a Greek is not
  computed; std_error 0 for analytic; vega and rho per 1.0, theta per year). Never NaN/inf.
  With --greeks (mc only): the Greek columns hold every row's Monte Carlo Greeks (bump and
  revalue with common random numbers, 32 independent batches; docs/finance.md), followed by
  delta_se,gamma_se,vega_se,theta_se,rho_se; heston rows' vega is dV/dv0; basket rows fill
  theta and rho only, their per-asset delta, gamma and vega (basket file order, with
  errors) are in the --json summary's asset_greeks. Costs about 4n+5 prices (n assets).
  --cross-gamma adds every basket row's n x n matrix of d2V/dS_i dS_j (the diagonal its
  gammas; basket file order) and its errors to asset_greeks (n(n-1) more prices); --spot-bump, --vol-bump, --rate-bump,
  --time-bump and --greeks-batches set the differences' steps and the error batches.
Methods: analytic prices european (all Greeks), asian_geometric (no theta) and the barrier
  styles (Reiner-Rubinstein with rebate; Greeks by differences, no theta); mc prices every
  style (delta and vega for european and asian styles; barriers without rebate).
  Heston rows (european, asian_arithmetic): analytic is the semi-analytic European
  (characteristic function); mc is Andersen's QE scheme (philox only, no --antithetic;
  asian: ceil(steps / fixings) steps between fixings). No Greeks.
  American rows: analytic is a binomial tree (2000 steps; with fixings the option is
  exercisable on those dates only, else at any time); mc is Longstaff-Schwartz with the
  fixings (or --steps) as exercise dates (philox only, no --antithetic or
  --control-variate; in-sample, biased slightly low). No Greeks. American barrier rows:
  analytic is the barrier-corrected tree (2000 steps); mc is Longstaff-Schwartz (the same
  bits on the GPU and the CPU; the barrier checked on the dates, Broadie-Glasserman-Kou corrected; biased low, up
  to a few percent next to the barrier). --target-se prices
  single-asset Black-Scholes rows only; --devices sends heston, american and basket rows to
  one device.
Basket rows (style basket): a European call or put on sum_i w_i S_i(T) (average arithmetic;
  any weights: 1,-1 is the spread S1 - S2), W prod_i S_i(T)^(w_i/W) (geometric, W = sum w_i)
  or max_i / min_i w_i S_i(T) (max, min: rainbows) of correlated assets; any finite strike
  (0 or below too). The row gives type, strike, rate, maturity, basket and average; its spot,
  volatility and dividend cells must be empty. The basket file (many rows may share one) is a
  CSV with the header asset,weight,spot,volatility,dividend,<one column per asset, named as
  the assets, in the rows' order> and one row per asset; the trailing columns are the
  correlation matrix (symmetric, unit diagonal, positive semi-definite; at most 64 assets;
  geometric, max and min need every weight > 0).
  analytic: geometric baskets (Black on the lognormal average), two-asset spreads
  (Bjerksund-Stensland 2014, a lower bound within about 1e-3 of the exact price; exact,
  Margrabe's, at strike 0) and max/min of two assets (Stulz); mc prices every basket in one
  exact step (--rng sobol gives each asset a Sobol dimension; --control-variate uses the
  geometric basket where every weight > 0, Bjerksund-Stensland's exercise rule for a
  two-asset spread, none otherwise; --steps does not apply). Spreads, rainbows and sobol
  baskets run on the CPU engine.
American rainbow rows (style american_rainbow): a Bermudan call or put on max_i or min_i
  w_i S_i (average max or min) of a basket file's assets (a basket row's cells: type,
  strike > 0, rate, maturity, basket, average; spot, volatility, dividend, barrier, rebate
  and model empty), exercisable on fixings equally spaced dates (required, a whole number
  >= 1: there is no continuous-exercise price). mc only: Longstaff-Schwartz on the CPU
  engine, a basis of polynomials in the sorted prices (philox only, no --antithetic or
  --control-variate; in-sample, biased slightly low; at most 16 assets); analytic refuses
  the row. --greeks gives per-asset Greeks as for basket rows.
Bad rows: every one is reported at once (file, row, file line, id, reasons: the file's own
  problems and what the method and flags cannot price, e.g. a rebate or --antithetic where
  the engine has none); exit 4 and nothing written, unless --skip-invalid: then the good
  rows are written and the bad ones to <output stem>.errors.csv (row,id,reason) beside the
  output. A header naming an unknown column is refused whole (exit 4) with the accepted
  columns.
Reproducible: row r uses Monte Carlo stream r-1, so its price depends only on its row, the
  seed and --paths/--steps/--antithetic/--control-variate, not on the device or other rows:
  CPU and GPU give the same bits. --fast-math trades that for speed on a GPU (about twice
  as fast; prices agree with the exact ones far inside the standard error, not bitwise).
Generators (--rng): philox (pseudo-random, the default) or sobol (randomised quasi-Monte
  Carlo: Joe-Kuo Sobol points, --replicates independent random digital shifts, inverse normal
  CDF, Brownian bridge; the standard error is the spread of the replicates). Sobol reaches a
  given error with far fewer paths on smooth payoffs (european, asian); paths are rounded up
  to replicates x a multiple of 1024, at most 1024 steps (fixings). Same seed, same bits on
  CPU and GPU. Options of a file share each replicate's points (common random numbers).
Time to accuracy (--target-se): starts at --paths and grows each option's paths (2x to 16x a
  round, as its error predicts) until its standard error meets the target: 1e-4 (absolute),
  1e-4rel or 0.01% (relative to the price); stops at --max-paths. The summary reports the rounds, time and path-steps.
Example: kiln price --input book.csv --output prices.csv --method mc --paths 200000 --json
         kiln price --input book.csv --output p.csv --method mc --rng sobol --paths 16384 \
           --target-se 1e-4rel";

/// `kiln price` options.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The options to price: a CSV with a header row (columns below).
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// Where to write the prices (CSV, replaced atomically).
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// analytic: closed forms (european, asian_geometric, barriers); mc: Monte Carlo (every style).
    #[arg(long, default_value = "analytic", value_parser = ["analytic", "mc"])]
    method: String,
    /// Monte Carlo paths per option (with --antithetic, an odd count is rounded up). The
    /// standard error falls as 1/sqrt(paths): 100000 gives about 0.3% of a vanilla's price.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(2..))]
    paths: u64,
    /// Monte Carlo time steps for european styles, continuously monitored barriers (each step
    /// adds its crossing probability) and heston rows, and the exercise dates of american
    /// rows without fixings; Asian styles and discretely monitored barriers step from fixing
    /// to fixing and ignore it.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    /// Monte Carlo seed (the Philox key); the same seed gives the same bits on every device.
    #[arg(long, default_value_t = McParams::default().seed)]
    seed: u64,
    /// Pair every path with its mirror (normals negated).
    #[arg(long)]
    antithetic: bool,
    /// Use the style's control variate (the closed-form European; the geometric Asian for
    /// the arithmetic one), coefficient estimated from the same paths.
    #[arg(long)]
    control_variate: bool,
    /// GPU only: draw the normals with the GPU's hardware approximations (same Philox
    /// words, same Box-Muller; each normal within about 1e-6 of the exact one). About twice
    /// as fast, not bitwise equal to the CPU. Ignored on the CPU, which is always exact.
    #[arg(long)]
    fast_math: bool,
    /// Monte Carlo generator: philox (pseudo-random) or sobol (randomised quasi-Monte Carlo
    /// with a Brownian bridge; see below).
    #[arg(long, default_value = "philox", value_parser = ["philox", "sobol"])]
    rng: String,
    /// Sobol only: independent random digital shifts (the standard error is their spread)
    /// [default: 16].
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=4096))]
    replicates: Option<u32>,
    /// Time to accuracy: grow the paths (from --paths) until the standard error meets this
    /// target: absolute (1e-4) or relative to the price (1e-4rel, 0.01%).
    #[arg(long, value_name = "SE", value_parser = parse_target)]
    target_se: Option<kiln::finance::TargetSe>,
    /// With --target-se: the most paths an option may take [default: 4294967296].
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    max_paths: Option<u64>,
    /// Price the good rows anyway and list the bad ones in <output stem>.errors.csv.
    #[arg(long)]
    skip_invalid: bool,
    #[command(flatten)]
    greeks: crate::price_greeks::GreeksFlags,
    /// Print a summary object (counts, method, device, timing) as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Split the book across devices (kiln's executor, shares from measured throughput):
    /// all, 0,1,..., cpu, cpu+all or cpu+0,1; the prices are the same bits as on one device.
    #[arg(long, value_name = "DEVICES")]
    devices: Option<kiln::executor::DeviceSet>,
}

#[derive(Serialize)]
struct Summary {
    input: String,
    output: String,
    errors_output: Option<String>,
    options: usize,
    priced: usize,
    invalid: usize,
    method: &'static str,
    device: String,
    fallback_reason: Option<String>,
    paths: Option<u64>,
    steps: Option<u32>,
    seed: Option<u64>,
    antithetic: bool,
    control_variate: bool,
    /// Whether the GPU's fast_math normals were used (false on the CPU, which ignores it).
    fast_math: bool,
    /// The generator (philox or sobol); None for analytic.
    rng: Option<&'static str>,
    /// The time-to-accuracy target, if one was given.
    target_se: Option<kiln::finance::TargetSe>,
    /// Rounds of growth (time to accuracy), the most paths an option took, and how many
    /// options stopped at --max-paths short of the target.
    rounds: Option<u32>,
    max_paths_used: Option<u64>,
    short_of_target: usize,
    path_steps: u64,
    seconds: f64,
    path_steps_per_s: f64,
    total_seconds: f64,
    /// With --greeks: whether the Greeks were computed, and the basket rows' per-asset ones.
    greeks: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    asset_greeks: Option<Vec<crate::price_greeks::AssetGreeks>>,
    /// With --devices: each worker's part (share, chunks, steals, busy seconds) over the book.
    #[serde(skip_serializing_if = "Option::is_none")]
    workers: Option<Vec<crate::devices_arg::WorkerSplit>>,
}

/// Simulated path-steps per batch: about a quarter of a second of work on either device,
/// so that the progress bar moves and a batch never holds much memory.
const CPU_BATCH_WORK: u64 = 1 << 26;
const GPU_BATCH_WORK: u64 = 1 << 36;

/// `--target-se`'s parser (kiln's error as clap's message).
fn parse_target(s: &str) -> Result<kiln::finance::TargetSe, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

/// Path-steps one option costs: paths times steps (Asian, discrete barriers: fixings;
/// Heston's Asian: whole steps between fixings; American: exercise dates; basket: assets;
/// American rainbow: exercise dates times assets).
fn work(o: &OptionRow, mc: &McParams) -> u64 {
    let steps = match o.kind {
        RowKind::Plain => o.spec.path_steps(mc.steps),
        RowKind::Heston(_) => match o.spec.fixings {
            Some(f) => mc.steps.div_ceil(f).saturating_mul(f),
            None => mc.steps,
        },
        RowKind::American(dates) | RowKind::AmericanBarrier(dates) => dates.unwrap_or(mc.steps),
        // one step to maturity, each path costs a step per asset
        RowKind::Basket { assets, .. } => assets,
        // a step per exercise date and asset
        RowKind::AmericanRainbow { assets, dates, .. } => dates.saturating_mul(assets),
    };
    mc.paths_used().saturating_mul(u64::from(steps))
}

/// Whether two rows can share a batch (one engine prices a batch).
fn same_kind(a: &OptionRow, b: &OptionRow) -> bool {
    std::mem::discriminant(&a.kind) == std::mem::discriminant(&b.kind)
}

/// What the Monte Carlo engine of row `o`'s kind would refuse in this run (a barrier rebate,
/// Sobol or antithetic paths for Heston, antithetic or control variates and Sobol points
/// for American options and American rainbows, ...): each engine's own check of the option and the run, so that every bad row
/// is reported in the one pass before anything is priced.
fn mc_refusal(o: &OptionRow, mc: &McParams, baskets: &[BasketFile]) -> Option<String> {
    use kiln::core::finance::american::{LsmPlan, RainbowPlan};
    use kiln::core::finance::{basket::BasketPathParams, heston::HestonPathParams};
    let checked = match o.kind {
        RowKind::Plain => kiln::core::finance::PathParams::new(&o.spec, mc).map(drop),
        RowKind::Heston(_) => o
            .heston()
            .map_or(Ok(()), |h| HestonPathParams::new(&h, mc).map(drop)),
        RowKind::American(_) => o
            .american(mc.steps)
            .map_or(Ok(()), |a| LsmPlan::new(&a, mc, 0).map(drop)),
        RowKind::AmericanBarrier(_) => o
            .american_barrier(mc.steps)
            .map_or(Ok(()), |a| LsmPlan::new(&a.option, mc, 0).map(drop)),
        RowKind::Basket { .. } => o
            .basket(baskets)
            .map_or(Ok(()), |b| BasketPathParams::new(&b, mc).map(drop)),
        RowKind::AmericanRainbow { .. } => o
            .american_rainbow(baskets)
            .map_or(Ok(()), |r| RainbowPlan::new(&r, mc, 0).map(drop)),
    };
    checked.err().map(|e| match e {
        Error::InvalidArgument { reason, .. } => reason,
        e => e.to_string(),
    })
}

/// Why `method` cannot price row `o`, if it cannot.
fn unsupported(
    o: &OptionRow,
    method: Method,
    mc: &McParams,
    target: bool,
    baskets: &[BasketFile],
) -> Option<String> {
    let style = o.spec.style.name();
    if method == Method::MonteCarlo {
        if let Some(reason) = mc_refusal(o, mc, baskets) {
            return Some(reason);
        }
    }
    let refusal = o.basket(baskets).and_then(|b| b.analytic_refusal());
    match o.kind {
        RowKind::Plain if !supports(method, o.spec.style) => Some(format!(
            "style {style} has no closed form in kiln; price it with --method mc"
        )),
        RowKind::Heston(_) if method == Method::Analytic && o.spec.style != Style::European => Some(format!(
            "style {style} under heston has no closed form in kiln; price it with --method mc"
        )),
        RowKind::Basket { .. } if method == Method::Analytic && refusal.is_some() => refusal.map(|why| {
            format!(
                "style basket: {}",
                why.replace("use method mc", "price it with --method mc")
            )
        }),
        RowKind::AmericanRainbow { .. } if method == Method::Analytic => Some(
            "style american_rainbow has no closed form or tree in kiln; price it with --method mc".to_string(),
        ),
        RowKind::Heston(_)
        | RowKind::American(_)
        | RowKind::AmericanBarrier(_)
        | RowKind::Basket { .. }
        | RowKind::AmericanRainbow { .. }
            if target =>
        {
            Some(
                "--target-se prices Black-Scholes rows only (model bs, not american or basket); price this one \
                 without it"
                    .to_string(),
            )
        }
        _ => None,
    }
}

/// Row `o` as an option of the facade's mixed book (`kiln::finance::book`, which the
/// Python package's `kiln.price` prices too: the same rows, the same bits).
fn book_option(o: &OptionRow, mc: &McParams, baskets: &[BasketFile]) -> Option<BookOption> {
    match o.kind {
        RowKind::Plain => Some(BookOption::Plain(o.spec)),
        RowKind::Heston(_) => o.heston().map(BookOption::Heston),
        RowKind::American(dates) => o.american(mc.steps).map(|spec| BookOption::American {
            spec,
            continuous: dates.is_none(),
        }),
        RowKind::AmericanBarrier(dates) => {
            o.american_barrier(mc.steps)
                .map(|spec| BookOption::AmericanBarrier {
                    spec,
                    continuous: dates.is_none(),
                })
        }
        RowKind::Basket { .. } => o.basket(baskets).map(BookOption::Basket),
        RowKind::AmericanRainbow { .. } => o.american_rainbow(baskets).map(BookOption::AmericanRainbow),
    }
}

/// Prices one batch (consecutive rows of one kind, the first on stream `first`): Black-Scholes
/// rows over `--devices` through the executor, everything else through `Runtime::price_book`.
fn price_rows(
    rt: &Runtime,
    pool: Option<&crate::price_devices::Pool>,
    rows: &[OptionRow],
    baskets: &[BasketFile],
    method: Method,
    mc: &McParams,
    first: u32,
) -> anyhow::Result<Vec<kiln::Result<PriceResult>>> {
    if let (RowKind::Plain, Some(p)) = (rows[0].kind, pool) {
        let specs: Vec<OptionSpec> = rows.iter().map(|o| o.spec).collect();
        return Ok(p.price(&specs, method, mc, first)?);
    }
    let book: Vec<BookOption> = rows.iter().filter_map(|o| book_option(o, mc, baskets)).collect();
    Ok(rt.price_book(&book, method, mc, first))
}

/// Runs of consecutive rows (consecutive stream indices), cut where a run's work passes
/// `batch_work`: each is one `price_batch` call.
fn batches(rows: &[OptionRow], mc: Option<&McParams>, batch_work: u64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut acc = 0u64;
    for i in 0..rows.len() {
        if i > start
            && (rows[i].row != rows[i - 1].row + 1 || acc >= batch_work || !same_kind(&rows[i], &rows[i - 1]))
        {
            out.push(start..i);
            start = i;
            acc = 0;
        }
        acc = acc.saturating_add(mc.map_or(1, |mc| work(&rows[i], mc)));
    }
    if start < rows.len() {
        out.push(start..rows.len());
    }
    out
}

/// Price the input file into the output file; see the module docs.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let t_start = Instant::now();
    let method: Method = args.method.parse()?;
    let is_mc = method == Method::MonteCarlo;
    let mc = McParams {
        paths: args.paths,
        steps: args.steps,
        seed: args.seed,
        antithetic: args.antithetic,
        control_variate: args.control_variate,
        fast_math: args.fast_math,
        rng: match args.rng.as_str() {
            "sobol" => Rng::Sobol {
                replicates: args.replicates.unwrap_or(16),
            },
            _ => Rng::Philox,
        },
    };
    if args.target_se.is_some() && !is_mc {
        return Err(Error::invalid("kiln price", "--target-se needs --method mc").into());
    }
    // flags that would be read by nothing are refused, not ignored
    if args.replicates.is_some() && args.rng != "sobol" {
        return Err(Error::invalid(
            "kiln price",
            "--replicates needs --rng sobol (Philox runs have no replicates)",
        )
        .into());
    }
    if args.greeks.greeks && (!is_mc || args.target_se.is_some() || args.devices.is_some()) {
        return Err(Error::invalid(
            "kiln price",
            "--greeks needs --method mc and combines with neither --target-se nor --devices",
        )
        .into());
    }
    let greek_params = args.greeks.params()?;
    if args.max_paths.is_some() && args.target_se.is_none() {
        return Err(Error::invalid(
            "kiln price",
            "--max-paths caps a --target-se run; give --target-se too, or set --paths",
        )
        .into());
    }
    let max_paths = args.max_paths.unwrap_or(1 << 32);
    if is_mc {
        mc.validate()?;
    }
    let files = RowFiles::new("kiln price", "price", &args.input, &args.output, "prices");
    files.check_outputs("prices")?;
    let file = options_csv::read_options(&args.input).map_err(io_error("--input"))?;
    let total = file.rows();
    let mut errors = file.errors;
    let baskets = file.baskets;
    let mut good = Vec::with_capacity(file.options.len());
    for o in file.options {
        if let Some(reason) = unsupported(&o, method, &mc, args.target_se.is_some(), &baskets) {
            errors.push(RowError {
                row: o.row,
                line: o.line,
                id: o.id,
                reason,
            });
        } else if u32::try_from(o.row - 1).is_err() {
            errors.push(RowError {
                row: o.row,
                line: o.line,
                id: o.id,
                reason: "past row 2^32: at most 2^32 options per file (one Monte Carlo stream each)".into(),
            });
        } else {
            good.push(o);
        }
    }
    if !errors.is_empty() && !args.skip_invalid {
        errors.sort_by_key(|e| e.row);
        return Err(files.fail_invalid(&errors, total));
    }

    if args.devices.is_some() && args.target_se.is_some() {
        return Err(Error::invalid("kiln price", "--devices does not combine with --target-se").into());
    }
    let pool = match &args.devices {
        Some(d) => Some(crate::price_devices::Pool::open(d, cfg)?),
        None => None,
    };
    let rt = if is_mc {
        Runtime::new(request, cfg)?
    } else {
        if !matches!(request, DeviceRequest::Auto | DeviceRequest::Cpu) {
            tracing::warn!(
                "closed forms run on the CPU; --device {request} is not used by --method analytic"
            );
        }
        Runtime::cpu()
    };
    let gpu = rt.kind() == BackendKind::Cuda;
    let batch_work = if gpu { GPU_BATCH_WORK } else { CPU_BATCH_WORK };
    let plan = batches(
        &good,
        is_mc.then_some(&mc),
        if is_mc { batch_work } else { u64::MAX },
    );
    let total_work: u64 = if is_mc {
        good.iter().fold(0u64, |a, o| a.saturating_add(work(o, &mc)))
    } else {
        0
    };
    let bar = (is_mc && std::io::stderr().is_terminal() && total_work > 4 * batch_work).then(|| {
        let pb = ProgressBar::with_draw_target(Some(total_work), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template("pricing [{bar:40}] {percent:>3}% {msg} (eta {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb
    });

    let t_price = Instant::now();
    let (mut rounds, mut extra_work, mut short) = (0u32, 0u64, 0usize);
    let mut max_used = 0u64;
    let mut records = Vec::with_capacity(good.len());
    let (mut greek_errors, mut asset_greeks) = (Vec::new(), Vec::new());
    let mut done = 0usize;
    for range in plan {
        let rows = &good[range];
        // Checked above: every row - 1 fits in u32.
        let first = u32::try_from(rows[0].row - 1).unwrap_or(u32::MAX);
        let results = match args.target_se {
            Some(target) => {
                // only Black-Scholes rows get here (`unsupported`)
                let specs: Vec<OptionSpec> = rows.iter().map(|o| o.spec).collect();
                let run = rt.price_to_target(&specs, &mc, target, max_paths, first);
                rounds = rounds.max(run.rounds);
                extra_work = extra_work.saturating_add(run.path_steps);
                short += run
                    .met
                    .iter()
                    .zip(&run.results)
                    .filter(|(m, r)| !**m && r.is_ok())
                    .count();
                run.results
            }
            None => price_rows(&rt, pool.as_ref(), rows, &baskets, method, &mc, first)?,
        };
        let mut greeks = if args.greeks.greeks {
            let book: Vec<BookOption> = rows
                .iter()
                .filter_map(|o| book_option(o, &mc, &baskets))
                .collect();
            if book.len() != rows.len() {
                return Err(Error::invalid("kiln price", "a row has no option for --greeks").into());
            }
            Some(crate::price_greeks::greeks_rows(&rt, &book, &mc, &greek_params, first)?.into_iter())
        } else {
            None
        };
        for (o, r) in rows.iter().zip(results) {
            let g = greeks.as_mut().and_then(|g| g.next());
            let bad = |reason: String| RowError {
                row: o.row,
                line: o.line,
                id: o.id.clone(),
                reason,
            };
            // the Greeks' error, where the price had none
            let (r, g) = match (r, g) {
                (Ok(_), Some(Err(e))) => (Err(e), None),
                (r, g) => (r, g.and_then(|g| g.ok())),
            };
            match r {
                Ok(res) => {
                    max_used = max_used.max(res.paths_used);
                    let mut rec = PriceRecord::new(o.id.clone(), &res);
                    let extra = g.map(|g| crate::price_greeks::apply(&mut rec, &g, args.greeks.cross_gamma));
                    let se_bad = extra.as_ref().and_then(|(se, _)| {
                        [se.delta, se.gamma, se.vega, se.theta, se.rho]
                            .into_iter()
                            .flatten()
                            .find(|v| !v.is_finite())
                            .map(|v| ("a Greek's standard error", v))
                    });
                    match rec.non_finite().or(se_bad) {
                        None => {
                            records.push(rec);
                            if let Some((se, assets)) = extra {
                                greek_errors.push(se);
                                asset_greeks.extend(assets);
                            }
                        }
                        Some((col, v)) => errors.push(bad(format!(
                            "{col} came out {v}: the inputs overflow the model (check spot, strike, \
                             rate, volatility and maturity)"
                        ))),
                    }
                }
                Err(Error::InvalidArgument { reason, .. }) => errors.push(bad(reason)),
                // A device failure is not the row's fault: stop with its own exit code.
                Err(e) => {
                    if let Some(pb) = &bar {
                        pb.abandon();
                    }
                    return Err(anyhow::Error::from(e).context(format!("pricing row {}", o.row)));
                }
            }
        }
        done += rows.len();
        if let Some(pb) = &bar {
            pb.set_message(format!("{done}/{} options", good.len()));
            pb.inc(rows.iter().fold(0u64, |a, o| a.saturating_add(work(o, &mc))));
        }
    }
    let seconds = t_price.elapsed().as_secs_f64();
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    errors.sort_by_key(|e| e.row);
    if !errors.is_empty() && !args.skip_invalid {
        return Err(files.fail_invalid(&errors, total));
    }

    if args.greeks.greeks {
        options_csv::write_prices_with_errors(&args.output, &records, &greek_errors)
    } else {
        options_csv::write_prices(&args.output, &records)
    }
    .map_err(io_error("--output"))?;
    if args.skip_invalid {
        files.write_errors(&errors)?;
    }
    let path_steps = match (is_mc, args.target_se) {
        (true, Some(_)) => extra_work,
        (true, None) => total_work,
        _ => 0,
    };
    let summary = Summary {
        input: args.input.display().to_string(),
        output: args.output.display().to_string(),
        errors_output: args.skip_invalid.then(|| files.errors().display().to_string()),
        options: total,
        priced: records.len(),
        invalid: errors.len(),
        method: if is_mc { "mc" } else { "analytic" },
        device: pool
            .as_ref()
            .map_or_else(|| rt.device_name(), |p| p.label().to_string()),
        fallback_reason: rt.fallback_reason().map(str::to_string),
        paths: is_mc.then(|| mc.paths_used()),
        steps: is_mc.then_some(mc.steps),
        seed: is_mc.then_some(mc.seed),
        antithetic: is_mc && mc.antithetic,
        control_variate: is_mc && mc.control_variate,
        fast_math: is_mc && mc.fast_math && rt.cuda().is_some() && mc.rng == Rng::Philox,
        rng: is_mc.then_some(mc.rng.name()),
        target_se: args.target_se,
        rounds: args.target_se.map(|_| rounds),
        max_paths_used: is_mc.then_some(max_used),
        short_of_target: short,
        path_steps,
        seconds,
        path_steps_per_s: path_steps as f64 / seconds.max(1e-9),
        total_seconds: t_start.elapsed().as_secs_f64(),
        greeks: args.greeks.greeks,
        asset_greeks: args.greeks.greeks.then_some(asset_greeks),
        workers: pool.as_ref().map(|p| p.split()),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let how = if let (true, Some(t)) = (is_mc, args.target_se) {
            format!(
                "mc {} on {}, target se {t:?}: {rounds} rounds, up to {max_used} paths x {} steps, {:.3} G path-steps/s",
                mc.rng.name(),
                summary.device,
                mc.steps,
                summary.path_steps_per_s / 1e9
            )
        } else if is_mc {
            format!(
                "mc {} on {}, {} paths x {} steps, {:.3} G path-steps/s",
                mc.rng.name(),
                summary.device,
                mc.paths_used(),
                mc.steps,
                summary.path_steps_per_s / 1e9
            )
        } else {
            "analytic".to_string()
        };
        println!(
            "priced {} of {} options ({how}) in {:.3} s -> {}",
            summary.priced, summary.options, seconds, summary.output
        );
    }
    if short > 0 {
        eprintln!(
            "warning: {short} option{} stopped at --max-paths {} short of the target standard error",
            if short == 1 { "" } else { "s" },
            max_paths
        );
    }
    if args.skip_invalid {
        files.warn_skipped(errors.len(), total);
    }
    Ok(ExitCode::from(exit::OK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln::core::finance::OptionType;

    fn row(r: usize) -> OptionRow {
        OptionRow {
            row: r,
            line: r as u64 + 1,
            id: r.to_string(),
            spec: OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0),
            kind: RowKind::Plain,
        }
    }

    #[test]
    fn batches_follow_consecutive_rows_and_work() {
        let rows: Vec<OptionRow> = [1, 2, 3, 5, 6, 9].into_iter().map(row).collect();
        assert_eq!(batches(&rows, None, u64::MAX), vec![0..3, 3..5, 5..6]);
        let mc = McParams {
            paths: 10,
            steps: 10,
            ..McParams::default()
        };
        // 100 path-steps per option, cut once a batch reaches 200.
        assert_eq!(batches(&rows, Some(&mc), 200), vec![0..2, 2..3, 3..5, 5..6]);
        assert!(batches(&[], Some(&mc), 200).is_empty());
        // a change of kind cuts a batch too
        let mut mixed: Vec<OptionRow> = (1..=4).map(row).collect();
        mixed[2].kind = RowKind::American(Some(3));
        assert_eq!(batches(&mixed, None, u64::MAX), vec![0..2, 2..3, 3..4]);
    }
}
