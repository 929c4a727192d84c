//! `kiln implied-vol` end to end: the binary on small quote CSVs, the volatilities read back
//! and checked against the volatilities the prices were made from (on the default device:
//! the GPU where one is usable, else the CPU); `--device cpu` forces the CPU and the JSON
//! says where the book ran.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod run_support;
use kiln::core::finance::bsm;
use kiln::core::finance::OptionType;
use run_support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kiln(dir: &Path, args: &[&str]) -> Output {
    run_in(dir, &["implied-vol"], args)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The output rows as `(id, volatility or None, reason, detail)`.
fn read_vols(path: &Path) -> Vec<(String, Option<f64>, String, String)> {
    kiln_io::quotes_csv::read_vols(path)
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.volatility, r.reason, r.detail))
        .collect()
}

/// A quote row priced by Black-Scholes-Merton at volatility `v`.
#[allow(clippy::too_many_arguments)] // a quote's columns, in the file's order
fn row(id: &str, kind: OptionType, s: f64, k: f64, r: f64, q: f64, v: f64, t: f64) -> String {
    let p = bsm(kind, s, k, r, q, v, t).price;
    format!("{id},{},{p:?},{s},{k},{r},{q},{t}\n", kind.name())
}

const HEADER: &str = "id,type,price,spot,strike,rate,dividend,maturity\n";

#[test]
fn volatilities_come_back_and_quotes_without_one_say_why() {
    use OptionType::{Call, Put};
    let d = tempfile::tempdir().unwrap();
    let cases = [
        ("atm", Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0),
        ("otm_put", Put, 100.0, 80.0, 0.03, 0.01, 0.35, 0.5),
        ("itm_call", Call, 120.0, 100.0, 0.01, 0.03, 0.15, 2.0),
        ("high_vol", Put, 50.0, 70.0, -0.005, 0.0, 1.8, 3.0),
        ("short", Call, 100.0, 104.0, 0.04, 0.02, 0.25, 7.0 / 365.0),
    ];
    let mut text = HEADER.to_string();
    for c in &cases {
        text += &row(c.0, c.1, c.2, c.3, c.4, c.5, c.6, c.7);
    }
    // No volatility: below intrinsic, above the bound, zero price, at intrinsic.
    text += "cheap,call,1,100,50,0.05,0,1\n";
    text += "dear,put,99,100,100,0.05,0,1\n";
    text += "zero,call,0,100,300,0.05,0,0.1\n";
    text += "flat,put,20,80,100,0,0,1\n";
    write(d.path(), "quotes.csv", &text);
    let o = kiln(
        d.path(),
        &["--input", "quotes.csv", "--output", "vols.csv", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["quotes"], 9);
    assert_eq!(summary["solved"], 5);
    assert_eq!(summary["invalid"], 0);
    assert_eq!(summary["no_volatility"]["below_intrinsic"], 1);
    assert_eq!(summary["no_volatility"]["above_upper_bound"], 1);
    assert_eq!(summary["no_volatility"]["not_positive"], 1);
    assert_eq!(summary["no_volatility"]["at_intrinsic"], 1);
    let vols = read_vols(&d.path().join("vols.csv"));
    assert_eq!(vols.len(), 9);
    for (c, got) in cases.iter().zip(&vols) {
        assert_eq!(got.0, c.0);
        let v = got.1.unwrap_or_else(|| panic!("{}: {} {}", c.0, got.2, got.3));
        assert!((v - c.6).abs() < 1e-12, "{}: {v} vs {}", c.0, c.6);
        assert!(got.2.is_empty() && got.3.is_empty());
    }
    let reason = |id: &str| vols.iter().find(|v| v.0 == id).unwrap();
    let cheap = reason("cheap");
    assert_eq!((cheap.1, cheap.2.as_str()), (None, "below_intrinsic"));
    let intrinsic = 100.0 - 50.0 * (-0.05f64).exp();
    assert!(cheap.3.contains(&format!("{intrinsic}")), "{}", cheap.3);
    assert_eq!(reason("dear").2, "above_upper_bound");
    assert!(
        reason("dear").3.contains("discounted strike"),
        "{}",
        reason("dear").3
    );
    assert_eq!(reason("zero").2, "not_positive");
    assert!(reason("zero").3.contains("price = 0"));
    assert_eq!(reason("flat").2, "at_intrinsic");
}

#[test]
fn every_bad_row_is_reported_at_once_and_nothing_is_written() {
    let d = tempfile::tempdir().unwrap();
    let text = format!(
        "{HEADER}{}a,swaption,5,100,100,0.05,0,1\nb,call,abc,100,100,0.05,0,0\n{}c,put,5,-100,100,x,0,1\na,call,5,100,100,0.05,0,1\n",
        row("ok1", OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0),
        row("ok2", OptionType::Put, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0),
    );
    write(d.path(), "quotes.csv", &text);
    let o = kiln(d.path(), &["--input", "quotes.csv", "--output", "vols.csv"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    for needle in [
        "quotes.csv: row 2 (line 3, id `a`): unknown type `swaption`",
        "quotes.csv: row 3 (line 4, id `b`): price: `abc` is not a number; maturity = 0; it must be > 0",
        "quotes.csv: row 5 (line 6, id `c`): spot = -100; it must be > 0; rate: `x` is not a number",
        "quotes.csv: row 6 (line 7, id `a`): id `a` is already used by row 2",
        "4 of 6 rows of quotes.csv are invalid",
        "nothing was written",
    ] {
        assert!(err.contains(needle), "missing `{needle}` in:\n{err}");
    }
    assert!(!d.path().join("vols.csv").exists());
    assert!(!d.path().join("vols.errors.csv").exists());

    // --skip-invalid: the good rows are solved, the bad ones listed beside the output.
    let o = kiln(
        d.path(),
        &["--input", "quotes.csv", "--output", "vols.csv", "--skip-invalid"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let vols = read_vols(&d.path().join("vols.csv"));
    assert_eq!(
        vols.iter().map(|v| v.0.as_str()).collect::<Vec<_>>(),
        ["ok1", "ok2"]
    );
    assert!(vols.iter().all(|v| (v.1.unwrap() - 0.2).abs() < 1e-12));
    let errors = std::fs::read_to_string(d.path().join("vols.errors.csv")).unwrap();
    assert_eq!(errors.lines().count(), 5, "{errors}");
    assert!(errors.starts_with("row,id,reason\n2,a,unknown type"), "{errors}");
}

#[test]
fn a_bad_header_names_the_columns_and_the_file_is_not_overwritten() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "quotes.csv",
        "id,type,price,spot,strike,maturity,volatility\n",
    );
    let o = kiln(d.path(), &["--input", "quotes.csv", "--output", "vols.csv"]);
    assert_eq!(o.status.code(), Some(4));
    let err = stderr(&o);
    assert!(
        err.contains("missing required column(s) `rate`") && err.contains("unknown column(s) `volatility`"),
        "{err}"
    );
    let o = kiln(d.path(), &["--input", "quotes.csv", "--output", "quotes.csv"]);
    assert_eq!(o.status.code(), Some(4));
    assert!(stderr(&o).contains("is the input file"), "{}", stderr(&o));
}

#[test]
fn help_teaches_with_an_example() {
    let o = Command::new(bin())
        .args(["implied-vol", "--help"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "type (call|put), price, spot, strike, rate, maturity",
        "below_intrinsic",
        "--skip-invalid",
        "Example:",
    ] {
        assert!(help.contains(needle), "missing `{needle}` in:\n{help}");
    }
}

/// The example in `--help` gives what it says.
#[test]
fn the_help_example_is_true() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "quotes.csv",
        "id,type,price,spot,strike,rate,dividend,maturity\n\
         a,call,10.45,100,100,0.05,0,1\n\
         b,put,5.57,100,100,0.05,0,1\n\
         c,call,1,100,50,0.05,0,1\n",
    );
    // the example's figures are the CPU solver's (a GPU may differ in the last digit)
    let o = kiln(
        d.path(),
        &["--input", "quotes.csv", "--output", "vols.csv", "--device", "cpu"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(d.path().join("vols.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "id,volatility,reason,detail",
            "a,0.1999844480109435,,",
            "b,0.1999060318060324,,"
        ],
        "{text}"
    );
    assert!(
        lines[3].starts_with(
            "c,,below_intrinsic,\"price 1 is below the intrinsic value 52.4385287749643 (an arbitrage)"
        ),
        "{text}"
    );
}

#[test]
fn device_cpu_solves_on_the_cpu_and_the_json_says_where() {
    use OptionType::{Call, Put};
    let d = tempfile::tempdir().unwrap();
    let mut text = HEADER.to_string();
    text += &row("a", Call, 100.0, 90.0, 0.02, 0.01, 0.3, 0.75);
    text += &row("b", Put, 100.0, 130.0, 0.0, 0.0, 0.6, 2.0);
    text += "c,call,1,100,50,0.05,0,1\n";
    write(d.path(), "quotes.csv", &text);
    let run = |device: &str, out: &str| {
        let o = kiln(
            d.path(),
            &[
                "--device",
                device,
                "--input",
                "quotes.csv",
                "--output",
                out,
                "--json",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "--device {device}: {}", stderr(&o));
        let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
        (summary, read_vols(&d.path().join(out)))
    };
    let (cpu, cpu_vols) = run("cpu", "cpu.csv");
    assert_eq!(cpu["device"], "cpu");
    assert!(cpu["threads"].as_u64().unwrap() >= 1);
    assert_eq!(cpu["solved"], 2);
    assert_eq!(cpu_vols[2].2, "below_intrinsic");
    // auto: a GPU where one is usable (then threads is null), else the CPU; the same answers
    // to a few ulp either way.
    let (auto, auto_vols) = run("auto", "auto.csv");
    let device = auto["device"].as_str().unwrap();
    assert!(device == "cpu" || device.starts_with("cuda:"), "{device}");
    assert_eq!(auto["threads"].is_null(), device != "cpu");
    for (a, c) in auto_vols.iter().zip(&cpu_vols) {
        assert_eq!((&a.0, &a.2), (&c.0, &c.2));
        match (a.1, c.1) {
            (Some(x), Some(y)) => assert!((x - y).abs() <= 1e-14 * y, "{}: {x} vs {y}", a.0),
            (x, y) => assert_eq!(x, y),
        }
    }
}
