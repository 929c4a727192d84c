//! `kiln bench`: run the suites (ceilings first), print a table, and optionally write the
//! JSON report, merge the peers, gate against a baseline and plot. `kiln bench show FILE`
//! applies the same steps to a saved report; `kiln bench report` writes docs/kernels.md;
//! `kiln bench list` prints the suites.

use super::harness::{self, Ctx};
use super::schema::{self, Host, Report, SCHEMA_VERSION};
use super::{gate, peers, plot, report, suites};
use crate::exit;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kiln::Runtime;
use kiln_core::{Config, DeviceRequest, Error};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `kiln bench` options.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    cmd: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Re-evaluate a saved report: print it, merge peers, gate, plot (no device needed).
    Show(ShowArgs),
    /// Write docs/kernels.md from `kiln kernels --json` and a bench report.
    Report(report::ReportArgs),
    /// List the suites.
    List,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Suites to run: all, or names separated by commas (see `kiln bench list`).
    #[arg(long, default_value = "all", value_name = "NAME|all")]
    suite: String,
    /// Problem sizes: quick (seconds), or full (the issues' sizes on a GPU).
    #[arg(long, default_value = "quick", value_parser = ["quick", "full"])]
    sizes: String,
    /// Write the report as JSON (`-`: stdout, and no table).
    #[arg(long, value_name = "OUT.json")]
    json: Option<PathBuf>,
    #[command(flatten)]
    post: PostArgs,
}

#[derive(clap::Args, Debug)]
struct ShowArgs {
    /// A `kiln bench --json` report.
    file: PathBuf,
    /// Write the report (with merged peers) back out as JSON.
    #[arg(long, value_name = "OUT.json")]
    json: Option<PathBuf>,
    #[command(flatten)]
    post: PostArgs,
}

#[derive(clap::Args, Debug)]
struct PostArgs {
    /// Gate against this report: exit 9 naming every workload slower than it by more than
    /// --max-regression percent.
    #[arg(long, value_name = "BASE.json")]
    baseline: Option<PathBuf>,
    /// Allowed slowdown against --baseline, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 10.0, requires = "baseline")]
    max_regression: f64,
    /// Merge `peer_bench.py --json` output and print kiln / peer ratios.
    #[arg(long, value_name = "PEERS.json")]
    peers: Option<PathBuf>,
    /// Draw a roofline, efficiency bars and kiln-vs-peer bars into an SVG.
    #[arg(long, value_name = "OUT.svg")]
    plot: Option<PathBuf>,
}

/// Files given to the post-processing steps, loaded and checked before anything runs.
struct Post {
    baseline: Option<(PathBuf, Report)>,
    max_regression: f64,
    peers: Option<peers::Peers>,
    plot: Option<PathBuf>,
}

fn load_post(p: &PostArgs) -> kiln_core::Result<Post> {
    if !(p.max_regression.is_finite() && p.max_regression >= 0.0) {
        return Err(Error::invalid(
            "bench",
            format!("--max-regression {} must be a percentage >= 0", p.max_regression),
        ));
    }
    if let Some(path) = &p.plot {
        plot::check_path(path)?;
    }
    Ok(Post {
        baseline: match &p.baseline {
            Some(b) => Some((b.clone(), schema::load(b)?)),
            None => None,
        },
        max_regression: p.max_regression,
        peers: p.peers.as_deref().map(peers::load).transpose()?,
        plot: p.plot.clone(),
    })
}

/// Run `kiln bench`.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    match &args.cmd {
        Some(Sub::Show(a)) => {
            let post = load_post(&a.post)?;
            let mut r = schema::load(&a.file)?;
            if !is_stdout(a.json.as_deref()) {
                print_table(&r);
            }
            finish(&mut r, &post, a.json.as_deref())
        }
        Some(Sub::Report(a)) => {
            report::run(a)?;
            Ok(ExitCode::from(exit::OK))
        }
        Some(Sub::List) => {
            for s in suites::SUITES {
                println!("{:<12} {}", s.name, s.about);
            }
            Ok(ExitCode::from(exit::OK))
        }
        None => bench(&args.run, request, cfg),
    }
}

fn bench(a: &RunArgs, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    // Everything that can be wrong with the arguments fails before the device is touched.
    let selected = suites::select(&a.suite)?;
    let post = load_post(&a.post)?;
    let rt = Runtime::new(request, cfg)?;
    let full = a.sizes == "full";
    let cuda = rt.cuda();
    let ctx = Ctx {
        rt: &rt,
        cuda,
        full,
        warmup: if cuda.is_some() { 3 } else { 1 },
        reps: match (cuda.is_some(), full) {
            (true, true) => 20,
            (true, false) => 10,
            (false, true) => 10,
            (false, false) => 5,
        },
        l2_bytes: cuda.map_or(0, |b| b.info().l2_bytes.max(0) as u64),
    };
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("bench [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let log = |pb: &ProgressBar, line: String| {
        if pb.is_hidden() {
            eprintln!("{line}");
        } else {
            pb.println(line);
        }
    };
    pb.set_message("ceilings");
    let (ceiling_rows, ceilings) = harness::measure_ceilings(&ctx)?;
    for c in &ceiling_rows {
        log(
            &pb,
            format!(
                "ceiling {}: {} GB/s ({})",
                c.name,
                c.gbps.map_or("-".into(), |g| format!("{g:.1}")),
                c.what
            ),
        );
    }
    let cases: Vec<_> = selected.iter().flat_map(|s| (s.plan)(&ctx)).collect();
    pb.set_length(cases.len() as u64);
    let mut results = Vec::new();
    let mut error = None;
    for case in cases {
        let label = format!("{} {}", case.meta.workload, case.meta.size);
        pb.set_message(label.clone());
        let outcome = (case.run)(&ctx).and_then(|m| harness::finish_row(&ctx, case.meta, m, &ceilings));
        // Cached device blocks of this case's size are not needed by the next one.
        rt.empty_cache();
        match outcome {
            Ok(row) => {
                log(
                    &pb,
                    format!(
                        "{label}: {} ms{}{}",
                        ms(row.median_ms),
                        row.efficiency
                            .map_or(String::new(), |e| format!(", {:.0}% of the floor", e * 100.0)),
                        if row.verified { "" } else { " VERIFICATION FAILED" }
                    ),
                );
                results.push(row);
            }
            Err(e) => {
                log(&pb, format!("{label}: {e}"));
                error = Some(e);
                break;
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let mut r = Report {
        schema_version: SCHEMA_VERSION,
        kiln_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: env!("KILN_GIT_COMMIT").into(),
        created_unix: started,
        device: rt.device_name(),
        device_name: harness::device_name(&rt),
        host: Host {
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            cpu_threads: kiln::CpuBackend::new().threads(),
        },
        sizes: a.sizes.clone(),
        suites: selected.iter().map(|s| s.name.to_string()).collect(),
        timing: if cuda.is_some() {
            "cuda-events"
        } else {
            "wall-clock"
        }
        .into(),
        complete: error.is_none(),
        error: error.as_ref().map(|e| e.to_string()),
        ceilings: ceiling_rows,
        results,
        peers: Vec::new(),
    };
    if !is_stdout(a.json.as_deref()) {
        print_table(&r);
    }
    let code = finish(&mut r, &post, a.json.as_deref())?;
    match error {
        Some(e) => {
            Err(anyhow::Error::from(e).context("the bench stopped; the report holds the rows before it"))
        }
        None => Ok(code),
    }
}

/// Whether the JSON goes to stdout (`--json -`), which then carries nothing else.
fn is_stdout(json: Option<&Path>) -> bool {
    json.is_some_and(|p| p.as_os_str() == "-")
}

/// Merge peers, write the JSON, plot, then verification and the gate decide the exit code.
fn finish(r: &mut Report, post: &Post, json: Option<&Path>) -> anyhow::Result<ExitCode> {
    if let Some(p) = &post.peers {
        let (cmp, unmatched) = peers::merge(r, p);
        r.peers = cmp;
        if !is_stdout(json) {
            peers::print(&r.peers);
        }
        if !unmatched.is_empty() {
            eprintln!(
                "peer rows without a kiln row at the same size: {}",
                unmatched.join(", ")
            );
        }
        if !p.errors.is_empty() {
            eprintln!("peer errors in the file (skipped): {}", p.errors.join("; "));
        }
    }
    if let Some(path) = json {
        schema::save(r, path)?;
    }
    if let Some(path) = &post.plot {
        plot::draw(r, path)?;
        eprintln!("wrote {}", path.display());
    }
    let unverified: Vec<String> = r
        .results
        .iter()
        .filter(|x| !x.verified)
        .map(|x| format!("{} {} ({})", x.workload, x.size, x.check))
        .chain(
            r.ceilings
                .iter()
                .filter(|c| !c.verified)
                .map(|c| format!("ceiling {}", c.name)),
        )
        .collect();
    let mut code = exit::OK;
    if let Some((path, base)) = &post.baseline {
        let o = gate::check(r, base, post.max_regression);
        gate::print(&o, post.max_regression, path);
        if o.compared == 0 {
            return Err(Error::invalid(
                "bench --baseline",
                format!(
                    "{} shares no (workload, size) with this run: nothing to gate",
                    path.display()
                ),
            )
            .into());
        }
        if !o.regressions.is_empty() {
            code = exit::REGRESSION;
        }
    }
    if !unverified.is_empty() {
        eprintln!("verification FAILED: {}", unverified.join("; "));
        code = exit::VERIFY;
    }
    Ok(ExitCode::from(code))
}

/// Milliseconds with 4 decimals, or 3 significant digits below 0.01 ms.
pub(super) fn ms(v: f64) -> String {
    if v >= 0.01 {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    }
}

fn print_table(r: &Report) {
    println!(
        "kiln bench on {} ({}), sizes {}, {}, kiln {} @ {}",
        r.device, r.device_name, r.sizes, r.timing, r.kiln_version, r.git_commit
    );
    for c in &r.ceilings {
        println!(
            "ceiling {:<12} {:>10.4} ms  {:>9} GB/s  {}",
            c.name,
            c.median_ms,
            c.gbps.map_or("-".into(), |g| format!("{g:.1}")),
            c.what
        );
    }
    println!(
        "{:<22} {:<16} {:>10} {:>21} {:>10} {:>6} {:>9} {:>9}  check",
        "workload", "size", "median ms", "p10-p90 ms", "floor ms", "eff", "GB/s", "TFLOP/s"
    );
    for x in &r.results {
        let rate = match (&x.rate, &x.rate_unit) {
            (Some(v), Some(u)) => format!("  {:.3e} {u}", v),
            _ => String::new(),
        };
        println!(
            "{:<22} {:<16} {:>10} {:>10}-{:<10} {:>10} {:>6} {:>9} {:>9}  {}{rate}",
            x.workload,
            x.size,
            ms(x.median_ms),
            ms(x.p10_ms),
            ms(x.p90_ms),
            x.floor_ms.map_or("-".into(), ms),
            x.efficiency.map_or("-".into(), |e| format!("{:.0}%", e * 100.0)),
            x.gbps.map_or("-".into(), |g| format!("{g:.1}")),
            x.tflops.map_or("-".into(), |t| if t >= 0.01 {
                format!("{t:.3}")
            } else {
                format!("{t:.2e}")
            }),
            if x.verified { "ok" } else { "FAIL" }
        );
    }
    if !r.complete {
        println!("incomplete: {}", r.error.as_deref().unwrap_or("stopped early"));
    }
}
