//! `kiln bench`: run the suites (ceilings first), print a table, and optionally write the
//! JSON report, merge the peers, gate against a baseline and plot. `kiln bench show FILE`
//! applies the same steps to a saved report; `kiln bench report` writes docs/kernels.md;
//! `kiln bench list` prints the suites.
//!
//! The work is kiln-bench's; this module is the command line around it: the arguments, the
//! progress bar and tables, where the JSON goes, and the exit code.

use crate::exit;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kiln::{Config, DeviceRequest, Error, Runtime};
use kiln_bench::schema::{self, PeerComparison, Report};
use kiln_bench::{gate, peers, plot, report, suites, Event};
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
    Report(ReportArgs),
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

/// `kiln bench report` options.
#[derive(clap::Args, Debug)]
struct ReportArgs {
    /// `kiln kernels --json` output.
    #[arg(long, value_name = "K.json")]
    kernels: PathBuf,
    /// A `kiln bench --json` report from the same device; repeat it to combine runs (for
    /// each kernel the last file that launches it wins).
    #[arg(long, value_name = "B.json", required = true)]
    bench: Vec<PathBuf>,
    /// Where to write the Markdown (`-`: stdout).
    #[arg(long, value_name = "OUT.md", default_value = "docs/kernels.md")]
    out: PathBuf,
}

/// Files given to the post-processing steps, loaded and checked before anything runs.
struct Post {
    baseline: Option<(PathBuf, Report)>,
    max_regression: f64,
    peers: Option<peers::Peers>,
    plot: Option<PathBuf>,
}

fn load_post(p: &PostArgs) -> kiln::Result<Post> {
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
            write_kernels_md(a)?;
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
    let opts = kiln_bench::Options {
        suites: selected,
        full: a.sizes == "full",
        kiln_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: env!("KILN_GIT_COMMIT").into(),
    };
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
    let out = kiln_bench::run(&rt, &opts, |ev| match ev {
        Event::Ceilings => pb.set_message("ceilings"),
        Event::Ceiling(c) => log(
            &pb,
            format!(
                "ceiling {}: {} GB/s ({})",
                c.name,
                c.gbps.map_or("-".into(), |g| format!("{g:.1}")),
                c.what
            ),
        ),
        Event::Planned(n) => pb.set_length(n as u64),
        Event::Started(label) => pb.set_message(label.to_string()),
        Event::Finished { label, row } => {
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
            pb.inc(1);
        }
        Event::Failed { label, error } => log(&pb, format!("{label}: {error}")),
    })?;
    pb.finish_and_clear();
    let mut r = out.report;
    if !is_stdout(a.json.as_deref()) {
        print_table(&r);
    }
    let code = finish(&mut r, &post, a.json.as_deref())?;
    match out.error {
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
            print_peers(&r.peers);
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
    match json {
        Some(path) if is_stdout(Some(path)) => println!("{}", schema::to_json(r)?),
        Some(path) => schema::save(r, path)?,
        None => {}
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
        print_gate(&o, post.max_regression, path);
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
fn ms(v: f64) -> String {
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

/// Print the comparisons as a table.
fn print_peers(c: &[PeerComparison]) {
    if c.is_empty() {
        println!("peers: no peer row matched a kiln workload at the same size");
        return;
    }
    println!();
    println!(
        "{:<22} {:<14} {:<24} {:>11} {:>11} {:>9}",
        "kiln workload", "size", "peer", "kiln ms", "peer ms", "kiln/peer"
    );
    for x in c {
        println!(
            "{:<22} {:<14} {:<24} {:>11} {:>11} {:>9.3}",
            x.workload,
            x.size,
            x.peer,
            ms(x.kiln_ms),
            ms(x.peer_ms),
            x.ratio
        );
    }
}

/// Print the outcome: one line per regression (to stderr, so it shows beside the exit
/// code), and a summary.
fn print_gate(o: &gate::Outcome, max_pct: f64, baseline: &std::path::Path) {
    if let Some((b, c)) = &o.device_changed {
        eprintln!("warning: the baseline ran on `{b}`, this run on `{c}`: times may not be comparable");
    }
    for r in &o.regressions {
        eprintln!(
            "REGRESSION {} {}: {:.4} ms vs baseline {:.4} ms ({:+.1}%, allowed {max_pct}%)",
            r.workload, r.size, r.current_ms, r.baseline_ms, r.slower_pct
        );
    }
    if !o.missing.is_empty() {
        eprintln!("not in this run (not gated): {}", o.missing.join(", "));
    }
    if !o.new.is_empty() {
        eprintln!("not in the baseline (not gated): {}", o.new.join(", "));
    }
    eprintln!(
        "regression gate vs {}: {} compared, {} slower than {max_pct}%",
        baseline.display(),
        o.compared,
        o.regressions.len()
    );
}

/// Run `kiln bench report`.
fn write_kernels_md(a: &ReportArgs) -> anyhow::Result<()> {
    let k = report::load_kernels(&a.kernels)?;
    let benches = a
        .bench
        .iter()
        .map(|p| schema::load(p).map(|b| (b, p.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    let md = report::render(&k, &benches, &a.kernels);
    if a.out.as_os_str() == "-" {
        print!("{md}");
    } else {
        report::save(&md, &a.out)?;
        eprintln!("wrote {}", a.out.display());
    }
    Ok(())
}
