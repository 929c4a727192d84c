//! `kiln risk` end to end: the binary on a small mixed book and scenario CSVs, the P&L file
//! read back and checked against re-pricing each shocked option with kiln's closed forms
//! here, VaR and ES against the sorted losses; bad rows of both files reported in one pass
//! naming file, row and column with nothing written; `--skip-invalid`; simulated scenarios;
//! a run refused at any stage (a shock out of its domain, a bad level, method, file or
//! covariance) leaves an earlier P&L file as it was and nothing beside it.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod run_support;
use kiln::core::finance::{bsm, OptionType};
use run_support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kiln(dir: &Path, args: &[&str]) -> Output {
    run_in(dir, &["--device", "cpu", "risk"], args)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// One row of a P&L file: the scenario, its P&L and the per-position columns.
type PnlRow = (String, f64, Vec<f64>);

/// The header and the rows of a P&L file.
fn read_pnl(path: &Path) -> (Vec<String>, Vec<PnlRow>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let head: Vec<String> = lines.next().unwrap().split(',').map(str::to_string).collect();
    let rows = lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            (
                c[0].to_string(),
                c[1].parse().unwrap(),
                c[2..].iter().map(|x| x.parse().unwrap()).collect(),
            )
        })
        .collect();
    (head, rows)
}

const BOOK: &str =
    "id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier,underlying,quantity\n\
    c1,call,european,100,95,0.03,0.01,0.25,0.75,,,AAA,3\n\
    p1,put,european,50,55,0.02,0,0.4,1.5,,,BBB,-2\n\
    g1,put,asian_geometric,100,100,0.03,0,0.3,1,12,,AAA,\n\
    b1,call,barrier_up_out,100,100,0.03,0,0.2,1,,140,,4\n\
    am,put,american,100,100,0.05,0,0.3,0.5,,,AAA,1\n";

const SCEN: &str = "scenario,underlying,spot_shift,spot_shift_kind,vol_shift,rate_shift\n\
    down,AAA,-0.1,,0.05,\n\
    down,BBB,-4,absolute,0.02,0.001\n\
    up,AAA,0.08,relative,-0.03,\n\
    up,*,0.02,,,-0.002\n\
    flat,*,,,,\n\
    vols,BBB,,,0.1,\n";

#[test]
fn pnl_is_repricing_and_var_es_are_the_sorted_losses() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "book.csv", BOOK);
    write(d.path(), "s.csv", SCEN);
    let o = kiln(
        d.path(),
        &[
            "--book",
            "book.csv",
            "--scenarios",
            "s.csv",
            "--levels",
            "0.5,0.75",
            "--pnl-out",
            "pnl.csv",
            "--matrix",
            "--tree-steps",
            "100",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["options"], 5);
    assert_eq!(j["scenarios"], 4);
    assert_eq!(j["analytic_options"], 5);
    let (head, rows) = read_pnl(&d.path().join("pnl.csv"));
    assert_eq!(head, ["scenario", "pnl", "c1", "p1", "g1", "b1", "am"]);
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, ["down", "up", "flat", "vols"]);
    // c1 (AAA, 3 units) and p1 (BBB, -2 units) re-priced here
    let c = |s: f64, v: f64, r: f64| bsm(OptionType::Call, s, 95.0, r, 0.01, v, 0.75).price;
    let p = |s: f64, v: f64, r: f64| bsm(OptionType::Put, s, 55.0, r, 0.0, v, 1.5).price;
    let want_c = [
        3.0 * (c(90.0, 0.30, 0.03) - c(100.0, 0.25, 0.03)),
        3.0 * (c(108.0, 0.22, 0.03) - c(100.0, 0.25, 0.03)),
        0.0,
        0.0,
    ];
    let want_p = [
        -2.0 * (p(46.0, 0.42, 0.021) - p(50.0, 0.4, 0.02)),
        -2.0 * (p(51.0, 0.4, 0.018) - p(50.0, 0.4, 0.02)),
        0.0,
        -2.0 * (p(50.0, 0.5, 0.02) - p(50.0, 0.4, 0.02)),
    ];
    for (j, (_, total, cols)) in rows.iter().enumerate() {
        assert!(
            (cols[0] - want_c[j]).abs() < 1e-10,
            "{j}: {} vs {}",
            cols[0],
            want_c[j]
        );
        assert!(
            (cols[1] - want_p[j]).abs() < 1e-10,
            "{j}: {} vs {}",
            cols[1],
            want_p[j]
        );
        let sum: f64 = cols.iter().sum();
        assert!((sum - total).abs() < 1e-9 * (1.0 + total.abs()));
    }
    // b1 names no underlying: only `*` moves it (up: +2%); flat moves nothing
    assert_eq!(rows[2].1, 0.0);
    assert!(rows[1].2[3] != 0.0 && rows[0].2[3] == 0.0);
    let mut loss: Vec<f64> = rows.iter().map(|r| -r.1).collect();
    loss.sort_by(f64::total_cmp);
    // 3 * 0.5 = 1.5: halfway between the 2nd and 3rd smallest losses
    let var = loss[1] + 0.5 * (loss[2] - loss[1]);
    let m = &j["measures"][0];
    assert!((m["var"].as_f64().unwrap() - var).abs() < 1e-9 * (1.0 + var.abs()));
    let tail: Vec<f64> = loss.iter().copied().filter(|&l| l >= var).collect();
    let es = tail.iter().sum::<f64>() / tail.len() as f64;
    assert!((m["es"].as_f64().unwrap() - es).abs() < 1e-9 * (1.0 + es.abs()));
}

#[test]
fn every_bad_row_of_both_files_is_reported_and_nothing_is_written() {
    let d = tempfile::tempdir().unwrap();
    let book = format!("{BOOK}x1,call,european,100,95,0.03,0,0.25,1,,,AAA,lots\nx2,call,european,-1,95,0.03,0,0.25,1,,,AAA,1\n");
    write(d.path(), "book.csv", &book);
    let scen = format!("{SCEN}bad,AAA,abc,,,\nbad2,AAA,0.1,sideways,,\n");
    write(d.path(), "s.csv", &scen);
    let o = kiln(
        d.path(),
        &[
            "--book",
            "book.csv",
            "--scenarios",
            "s.csv",
            "--pnl-out",
            "pnl.csv",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("book.csv: row 6") && e.contains("quantity") && e.contains("`lots`"),
        "{e}"
    );
    assert!(e.contains("book.csv: row 7") && e.contains("spot"), "{e}");
    assert!(
        e.contains("s.csv: row 7") && e.contains("spot_shift") && e.contains("`abc`"),
        "{e}"
    );
    assert!(e.contains("s.csv: row 8") && e.contains("spot_shift_kind"), "{e}");
    assert!(
        e.contains("4 invalid rows") && e.contains("nothing was written"),
        "{e}"
    );
    assert!(!d.path().join("pnl.csv").exists());
    // --skip-invalid: the rest runs, bad scenarios are left out whole
    let o = kiln(
        d.path(),
        &[
            "--book",
            "book.csv",
            "--scenarios",
            "s.csv",
            "--pnl-out",
            "pnl.csv",
            "--skip-invalid",
            "--tree-steps",
            "50",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (
            j["options"].as_u64(),
            j["scenarios"].as_u64(),
            j["invalid_rows"].as_u64()
        ),
        (Some(5), Some(4), Some(4))
    );
    assert_eq!(read_pnl(&d.path().join("pnl.csv")).1.len(), 4);
    // a shock that takes a spot below zero names the option and the scenario
    write(
        d.path(),
        "crash.csv",
        "scenario,underlying,spot_shift,spot_shift_kind\ncrash,BBB,-60,absolute\n",
    );
    let o = kiln(
        d.path(),
        &[
            "--book",
            "book.csv",
            "--scenarios",
            "crash.csv",
            "--skip-invalid",
            "--tree-steps",
            "50",
        ],
    );
    assert_eq!(o.status.code(), Some(4));
    let e = stderr(&o);
    assert!(e.contains("`p1`") && e.contains("`crash`"), "{e}");
}

#[test]
fn simulated_scenarios_repeat_with_the_seed_and_a_bad_covariance_is_named() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "book.csv", BOOK);
    write(
        d.path(),
        "cov.csv",
        "factor,AAA:spot,AAA:vol,BBB:spot\nAAA:spot,0.01,-0.0005,0.004\nAAA:vol,-0.0005,0.0004,0\nBBB:spot,0.004,0,0.02\n",
    );
    let run = |seed: &str, out: &str| {
        let o = kiln(
            d.path(),
            &[
                "--book",
                "book.csv",
                "--simulate",
                "301",
                "--cov",
                "cov.csv",
                "--seed",
                seed,
                "--pnl-out",
                out,
                "--tree-steps",
                "50",
                "--json",
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        read_pnl(&d.path().join(out)).1
    };
    let a = run("5", "a.csv");
    assert_eq!(a.len(), 301);
    assert_eq!(a[0].0, "sim1");
    assert_eq!(a, run("5", "b.csv"));
    assert_ne!(a, run("6", "c.csv"));
    write(
        d.path(),
        "bad.csv",
        "factor,AAA:spot,BBB:spot\nAAA:spot,1,2\nBBB:spot,2,1\n",
    );
    let o = kiln(
        d.path(),
        &["--book", "book.csv", "--simulate", "10", "--cov", "bad.csv"],
    );
    assert_eq!(o.status.code(), Some(4));
    let e = stderr(&o);
    assert!(
        e.contains("bad.csv") && e.contains("positive semi-definite"),
        "{e}"
    );
}

#[test]
fn help_teaches_with_an_example() {
    let o = Command::new(bin()).args(["risk", "--help"]).output().unwrap();
    let h = String::from_utf8_lossy(&o.stdout);
    assert!(h.contains("kiln risk --book book.csv --scenarios s.csv"), "{h}");
    assert!(
        h.contains("np.quantile(L, a)") && h.contains("spot_shift_kind"),
        "{h}"
    );
}

#[test]
fn a_refused_run_leaves_an_earlier_pnl_file_as_it_was() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "book.csv", BOOK);
    write(d.path(), "s.csv", SCEN);
    let common = ["--book", "book.csv", "--pnl-out", "pnl.csv", "--tree-steps", "50"];
    let o = kiln(d.path(), &[&common[..], &["--scenarios", "s.csv"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let before = std::fs::read(d.path().join("pnl.csv")).unwrap();
    let files = || {
        let mut v: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let listing = files();
    write(
        d.path(),
        "crash.csv",
        "scenario,underlying,spot_shift,spot_shift_kind\ncrash,BBB,-60,absolute\n",
    );
    write(
        d.path(),
        "bad_cov.csv",
        "factor,AAA:spot,BBB:spot\nAAA:spot,1,2\nBBB:spot,2,1\n",
    );
    let listing: Vec<String> = {
        let mut v = listing;
        v.extend(["bad_cov.csv".to_string(), "crash.csv".to_string()]);
        v.sort();
        v
    };
    // each: the extra arguments, the exit code, what stderr must name
    let refusals: [(&[&str], i32, &str); 5] = [
        (&["--scenarios", "crash.csv"], 4, "`crash`"),
        (&["--scenarios", "s.csv", "--levels", "0.9,1.5"], 4, "1.5"),
        (&["--scenarios", "s.csv", "--method", "tree"], 4, "tree"),
        (&["--scenarios", "missing.csv"], 4, "missing.csv"),
        (&["--simulate", "10", "--cov", "bad_cov.csv"], 4, "bad_cov.csv"),
    ];
    for (extra, code, named) in refusals {
        let o = kiln(d.path(), &[&common[..], extra].concat());
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{extra:?}: {e}");
        assert!(e.contains(named), "{extra:?}: {e}");
        assert_eq!(
            std::fs::read(d.path().join("pnl.csv")).unwrap(),
            before,
            "{extra:?}"
        );
        assert_eq!(files(), listing, "{extra:?}: a file was left behind");
    }
}
