//! `kiln calibrate --model heston`: a CSV of European option prices or implied vols in, the
//! fitted Heston parameters and the fit's report out (kiln-core's `finance::calibrate`:
//! Levenberg-Marquardt on the semi-analytic price with its exact gradient, on the CPU). The
//! file rules are `kiln_io::surface_csv`'s (the quote CSV's of `kiln implied-vol`, read by
//! the same reader, with a `vol` column as an alternative to `price` and an optional weight
//! column). Every bad row, the file's own and those the fit cannot use (a price no
//! volatility reaches in a vol fit), is reported (file, row, line, id, column and reason) in
//! one pass, and the command exits 4 fitting nothing. Nothing is written but stdout.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use kiln::core::finance::calibrate::{
    quote_problems, CalibrationOptions, HestonQuote, LmOptions, QuoteFit, Target, DEFAULT_START,
};
use kiln::core::finance::heston::HestonParams;
use kiln::{Config, DeviceRequest, Error, Runtime};
use kiln_io::options_csv::RowError;
use kiln_io::surface_csv;
use serde::Serialize;

use crate::row_files::io_error;

const AFTER_HELP: &str = "\
Input (--quotes): a CSV with a header row; columns in any order, names case-insensitive.
  required: type (call|put), spot, strike, rate, maturity, and exactly one of
    price  the option's price today (discounted), or
    vol    its Black-Scholes implied volatility (0.2 = 20%)
  optional: id (default: the data row number), dividend (default 0), and the weight
  column that --weights names (each weight >= 0; 0 leaves the quote out; default 1)
  rate and dividend are continuously compounded per year, maturity in years. Quote
  out-of-the-money options: their prices carry the smile with the least rounding.
Fit: kappa, theta, xi, rho, v0 of
  dS = (r - q) S dt + sqrt(v) S dW1,  dv = kappa (theta - v) dt + xi sqrt(v) dW2,
  d<W1,W2> = rho dt, v(0) = v0
  by Levenberg-Marquardt (Nielsen's damping, bounds by projection: kappa in [1e-4, 50],
  theta and v0 in [1e-6, 4], xi in [1e-4, 10], rho in [-0.999, 0.999]) on the
  semi-analytic price and its exact gradient, on the CPU's cores (there is no GPU pricer;
  --device cuda is refused). --target vol (default) fits weighted implied-vol
  differences; --target price fits weighted price differences (which weighs long,
  high-vega quotes more). Start: --start kappa,theta,xi,rho,v0 (default
  1,0.1,0.5,-0.5,0.1). The fit can have several local minima: a start near the answer
  (v0 and theta near the squared ATM vol) is the best guard.
Report: the parameters, RMSE in vol points (100 x the implied-vol difference, the model
  price's against the quote's, unweighted), price RMSE, iterations, why it stopped
  (gradient, step, relative_reduction, zero_residual, max_iterations) and whether the
  Feller condition 2 kappa theta >= xi^2 holds; --json adds every quote's model price
  and vol and their errors.
Bad rows (an unknown type, a cell that is not a number, spot, strike, maturity, price or
  vol <= 0, a negative weight, a duplicate id, and for --target vol a price no
  volatility reaches): every one is reported (file, row, line, id, column, reason) in one
  pass; exit 4 and nothing fitted.
Example:
  surface.csv:
    id,type,vol,spot,strike,rate,dividend,maturity,w
    a,put,0.262,100,80,0.02,0,0.5,1
    b,put,0.231,100,90,0.02,0,0.5,1
    c,call,0.205,100,100,0.02,0,0.5,2
    ...
  kiln calibrate --model heston --quotes surface.csv --weights w --json";

/// `kiln calibrate` options.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The model to fit (heston is the one there is).
    #[arg(long, value_name = "MODEL", default_value = "heston")]
    model: String,
    /// The quotes: a CSV of European option prices or implied vols (columns below).
    #[arg(long, value_name = "FILE")]
    quotes: PathBuf,
    /// The starting point: kappa,theta,xi,rho,v0.
    #[arg(long, value_name = "K,T,X,R,V", allow_hyphen_values = true)]
    start: Option<String>,
    /// The CSV column of the quotes' weights (default: every quote weighs 1).
    #[arg(long, value_name = "COLUMN")]
    weights: Option<String>,
    /// What to fit: vol (implied-vol differences) or price.
    #[arg(long, value_name = "vol|price", default_value = "vol")]
    target: String,
    /// The most Levenberg-Marquardt iterations.
    #[arg(long, value_name = "N", default_value_t = 200)]
    max_iterations: usize,
    /// Print the fit as JSON on stdout (with every quote's errors).
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct QuoteOut<'a> {
    id: &'a str,
    row: usize,
    #[serde(flatten)]
    fit: &'a QuoteFit,
}

#[derive(Serialize)]
struct Output<'a> {
    model: &'static str,
    quotes_file: String,
    /// `price` or `vol`: what the file quotes.
    quoted: &'static str,
    quotes: usize,
    params: HestonParams,
    start: HestonParams,
    feller: bool,
    rmse_vol_points: Option<f64>,
    vol_quotes: usize,
    rmse_price: f64,
    target: Target,
    iterations: usize,
    evaluations: usize,
    stop: &'static str,
    cost: f64,
    device: &'static str,
    seconds: f64,
    per_quote: Vec<QuoteOut<'a>>,
}

fn parse_start(s: &str) -> Result<HestonParams, Error> {
    let bad = |why: String| {
        Error::invalid(
            "--start",
            format!("`{s}`: {why}; give kappa,theta,xi,rho,v0 (e.g. 1,0.1,0.5,-0.5,0.1)"),
        )
    };
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != 5 {
        return Err(bad(format!("{} numbers", parts.len())));
    }
    let mut n = [0.0; 5];
    for (v, p) in n.iter_mut().zip(&parts) {
        *v = p
            .parse::<f64>()
            .map_err(|_| bad(format!("`{p}` is not a number")))?;
    }
    let p = HestonParams {
        kappa: n[0],
        theta: n[1],
        xi: n[2],
        rho: n[3],
        v0: n[4],
    };
    p.validate().map_err(|e| bad(e.to_string()))?;
    Ok(p)
}

/// Fit the quotes; see the module docs.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    if args.model != "heston" {
        return Err(Error::invalid(
            "--model",
            format!("unknown model `{}`; kiln calibrates heston", args.model),
        )
        .into());
    }
    if let DeviceRequest::Cuda(_) = request {
        return Err(Error::invalid(
            "--device",
            "kiln calibrate runs on the CPU (there is no GPU pricer of a surface); use --device cpu or auto",
        )
        .into());
    }
    let target: Target = args.target.parse().map_err(|_| {
        Error::invalid(
            "--target",
            format!("unknown target `{}`; use vol or price", args.target),
        )
    })?;
    let start = match &args.start {
        Some(s) => parse_start(s)?,
        None => DEFAULT_START,
    };
    let file =
        surface_csv::read_surface(&args.quotes, args.weights.as_deref()).map_err(io_error("--quotes"))?;
    let quotes: Vec<HestonQuote> = file.quotes.iter().map(|r| r.quote).collect();
    // the file's bad rows and the rows the fit cannot use, in one list in file order
    let mut errors = file.errors.clone();
    errors.extend(quote_problems(&quotes, file.quoted, target).into_iter().map(|p| {
        let r = &file.quotes[p.index];
        RowError {
            row: r.row,
            line: r.line,
            id: r.id.clone(),
            reason: p.reason,
        }
    }));
    errors.sort_by_key(|e| e.row);
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("invalid: {}: {e}", args.quotes.display());
        }
        return Err(Error::invalid(
            "kiln calibrate",
            format!(
                "{} of {} rows of {} are invalid (listed above); nothing was fitted",
                errors.len(),
                file.rows(),
                args.quotes.display()
            ),
        )
        .into());
    }
    let options = CalibrationOptions {
        quoted: file.quoted,
        target,
        lm: LmOptions {
            max_iterations: args.max_iterations,
            ..LmOptions::default()
        },
        ..CalibrationOptions::default()
    };
    // the surface is priced on the CPU's cores whatever --device auto would pick
    let rt = Runtime::new(DeviceRequest::Cpu, cfg)?;
    let t0 = Instant::now();
    let fit = rt.calibrate_heston(&quotes, &start, &options)?;
    let seconds = t0.elapsed().as_secs_f64();
    let quoted = match file.quoted {
        kiln::core::finance::calibrate::QuoteKind::Price => "price",
        kiln::core::finance::calibrate::QuoteKind::Vol => "vol",
    };
    if args.json {
        let out = Output {
            model: "heston",
            quotes_file: args.quotes.display().to_string(),
            quoted,
            quotes: quotes.len(),
            params: fit.params,
            start,
            feller: fit.feller,
            rmse_vol_points: fit.rmse_vol_points,
            vol_quotes: fit.vol_quotes,
            rmse_price: fit.rmse_price,
            target: fit.target,
            iterations: fit.iterations,
            evaluations: fit.evaluations,
            stop: fit.stop.name(),
            cost: fit.cost,
            device: "cpu",
            seconds,
            per_quote: file
                .quotes
                .iter()
                .zip(&fit.quotes)
                .map(|(r, f)| QuoteOut {
                    id: &r.id,
                    row: r.row,
                    fit: f,
                })
                .collect(),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(&fit, &file, &args.target, seconds);
    }
    Ok(ExitCode::SUCCESS)
}

/// The human report: a summary, the parameters, then the quotes with the largest vol errors.
fn print_table(
    fit: &kiln::core::finance::calibrate::HestonFit,
    file: &surface_csv::SurfaceFile,
    target: &str,
    seconds: f64,
) {
    let p = &fit.params;
    println!(
        "heston fit of {} quotes ({target} target) in {seconds:.3} s on the CPU: {} iterations, stopped on {}",
        file.quotes.len(),
        fit.iterations,
        fit.stop.name()
    );
    println!("  parameter      start          fit");
    for (name, a, b) in [
        ("kappa", fit.start.kappa, p.kappa),
        ("theta", fit.start.theta, p.theta),
        ("xi", fit.start.xi, p.xi),
        ("rho", fit.start.rho, p.rho),
        ("v0", fit.start.v0, p.v0),
    ] {
        println!("  {name:<9} {a:>10.6} {b:>14.8}");
    }
    match fit.rmse_vol_points {
        Some(r) => println!(
            "  RMSE {r:.4} vol points over {} quotes; price RMSE {:.6}",
            fit.vol_quotes, fit.rmse_price
        ),
        None => println!(
            "  no model price has an implied vol; price RMSE {:.6}",
            fit.rmse_price
        ),
    }
    println!(
        "  Feller condition 2 kappa theta >= xi^2: {}",
        if fit.feller {
            "holds"
        } else {
            "fails (the variance can reach 0)"
        }
    );
    let mut worst: Vec<(usize, f64)> = fit
        .quotes
        .iter()
        .enumerate()
        .filter_map(|(i, q)| q.vol_error_points.map(|e| (i, e)))
        .collect();
    worst.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
    if worst.is_empty() {
        return;
    }
    println!("  largest vol errors (--json lists every quote):");
    println!(
        "  {:<12} {:>10} {:>10} {:>11} {:>11} {:>9}",
        "id", "strike", "maturity", "market vol", "model vol", "error pt"
    );
    for &(i, e) in worst.iter().take(10) {
        let (r, q) = (&file.quotes[i], &fit.quotes[i]);
        println!(
            "  {:<12} {:>10.4} {:>10.4} {:>11.6} {:>11.6} {:>9.4}",
            r.id,
            r.quote.contract.strike,
            r.quote.contract.maturity,
            q.market_vol.unwrap_or(f64::NAN),
            q.model_vol.unwrap_or(f64::NAN),
            e
        );
    }
}
