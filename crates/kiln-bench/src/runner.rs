//! A whole run: the context for the runtime's device and the sizes, the ceilings, every
//! planned case in order (stopping at the first that fails), and the report.

use crate::ceilings;
use crate::harness::{self, Ctx};
use crate::schema::{BenchResult, Ceiling, Host, Report, SCHEMA_VERSION};
use crate::suites::Suite;
use kiln::{Error, Result, Runtime};

/// What to run, and how the report names the program that ran it.
pub struct Options {
    /// The suites, in run order ([`suites::select`](crate::suites::select) resolves names).
    pub suites: Vec<&'static Suite>,
    /// `full` sizes (the issues' sizes on a GPU), else `quick`.
    pub full: bool,
    /// The running program's version (the report's `kiln_version`).
    pub kiln_version: String,
    /// The commit it was built from (the report's `git_commit`).
    pub git_commit: String,
}

/// Progress of a run, in this order: [`Ceilings`](Event::Ceilings), one
/// [`Ceiling`](Event::Ceiling) each, [`Planned`](Event::Planned), then for each case
/// [`Started`](Event::Started) and [`Finished`](Event::Finished), or [`Failed`](Event::Failed)
/// for the case that stops the run.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// The ceilings are being measured.
    Ceilings,
    /// A ceiling was measured.
    Ceiling(&'a Ceiling),
    /// This many cases are planned.
    Planned(usize),
    /// A case starts; `workload size` names it.
    Started(&'a str),
    /// A case produced its row.
    Finished {
        /// `workload size`.
        label: &'a str,
        /// The row.
        row: &'a BenchResult,
    },
    /// A case failed; the run stops after it.
    Failed {
        /// `workload size`.
        label: &'a str,
        /// Why.
        error: &'a Error,
    },
}

/// What a run produced.
#[derive(Debug)]
pub struct Outcome {
    /// The report: every row before a failure, `complete` false and `error` set after one.
    pub report: Report,
    /// The error that stopped the run, if one did.
    pub error: Option<Error>,
}

/// Run `opts.suites` on `rt`: ceilings first, then each case (verified, then timed); after
/// each case the runtime's cached device blocks are released. A failing ceiling is an error;
/// a failing case ends the run with the rows so far in [`Outcome::report`].
pub fn run(rt: &Runtime, opts: &Options, mut progress: impl FnMut(Event<'_>)) -> Result<Outcome> {
    let full = opts.full;
    let cuda = rt.cuda();
    let ctx = Ctx {
        rt,
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
    progress(Event::Ceilings);
    let (ceiling_rows, ceilings) = ceilings::measure(&ctx)?;
    for c in &ceiling_rows {
        progress(Event::Ceiling(c));
    }
    let cases: Vec<_> = opts.suites.iter().flat_map(|s| (s.plan)(&ctx)).collect();
    progress(Event::Planned(cases.len()));
    let mut results = Vec::new();
    let mut error = None;
    for case in cases {
        let label = format!("{} {}", case.meta.workload, case.meta.size);
        progress(Event::Started(&label));
        let outcome = (case.run)(&ctx).and_then(|m| harness::finish_row(&ctx, case.meta, m, &ceilings));
        // Cached device blocks of this case's size are not needed by the next one.
        rt.empty_cache();
        match outcome {
            Ok(row) => {
                progress(Event::Finished {
                    label: &label,
                    row: &row,
                });
                results.push(row);
            }
            Err(e) => {
                progress(Event::Failed {
                    label: &label,
                    error: &e,
                });
                error = Some(e);
                break;
            }
        }
    }
    let report = Report {
        schema_version: SCHEMA_VERSION,
        kiln_version: opts.kiln_version.clone(),
        git_commit: opts.git_commit.clone(),
        created_unix: started,
        device: rt.device_name(),
        device_name: harness::device_name(rt),
        host: Host {
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            cpu_threads: kiln::CpuBackend::new().threads(),
        },
        sizes: if full { "full" } else { "quick" }.into(),
        suites: opts.suites.iter().map(|s| s.name.to_string()).collect(),
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
    Ok(Outcome { report, error })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU run of the quick memory suite: events arrive in the documented order and the
    /// report says what ran.
    #[test]
    fn a_cpu_run_reports_progress_in_order() {
        let rt = Runtime::cpu();
        let opts = Options {
            suites: crate::suites::select("memory").unwrap(),
            full: false,
            kiln_version: "9.9.9".into(),
            git_commit: "abc".into(),
        };
        let mut events = Vec::new();
        let out = run(&rt, &opts, |e| {
            events.push(match e {
                Event::Ceilings => "ceilings".to_string(),
                Event::Ceiling(c) => format!("ceiling {}", c.name),
                Event::Planned(n) => format!("planned {n}"),
                Event::Started(l) => format!("started {l}"),
                Event::Finished { label, .. } => format!("finished {label}"),
                Event::Failed { label, .. } => format!("failed {label}"),
            })
        })
        .unwrap();
        assert_eq!(
            events,
            [
                "ceilings",
                "ceiling host_copy",
                "planned 1",
                "started alloc_free_1MiB 1MiB",
                "finished alloc_free_1MiB 1MiB"
            ]
        );
        let r = out.report;
        assert!(out.error.is_none() && r.complete && r.error.is_none());
        assert_eq!((r.kiln_version.as_str(), r.git_commit.as_str()), ("9.9.9", "abc"));
        assert_eq!((r.sizes.as_str(), r.timing.as_str()), ("quick", "wall-clock"));
        assert_eq!(r.suites, ["memory"]);
        assert_eq!(r.results.len(), 1);
        assert!(r.results[0].verified);
    }
}
