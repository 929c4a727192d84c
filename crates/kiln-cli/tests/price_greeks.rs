//! `kiln price --method mc --greeks` end to end: the Greek columns and their `*_se` columns
//! are the facade's `Runtime::mc_greeks` bit for bit, a European row's Greeks lie within 4
//! standard errors of Black-Scholes-Merton's, a basket row's per-asset Greeks are in the
//! `--json` summary, and the flag is refused where it cannot apply.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod run_support;
use kiln::core::finance::{bsm, OptionType};
use kiln::finance::{BookOption, GreeksParams};
use kiln::Runtime;
use run_support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

fn kiln(dir: &Path, args: &[&str]) -> Output {
    run_in(dir, &["price"], args)
}

const BOOK: &str = include_str!("../../../docs/examples/basket_book.csv");
const BASKET_FILE: &str = include_str!("../../../docs/examples/indices.csv");

/// The CSV's cells by column name, one map a row.
fn rows(text: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut lines = text.lines();
    let head: Vec<String> = lines.next().unwrap().split(',').map(str::to_string).collect();
    lines
        .map(|l| {
            head.iter()
                .cloned()
                .zip(l.split(',').map(str::to_string))
                .collect()
        })
        .collect()
}

/// The facade's options for `dir/book.csv`, row by row (baskets from their basket file).
fn facade_book(dir: &Path) -> Vec<BookOption> {
    let file = kiln_io::options_csv::read_options(dir.join("book.csv")).unwrap();
    file.options
        .iter()
        .map(|o| match o.basket(&file.baskets) {
            Some(b) => BookOption::Basket(b),
            None => BookOption::Plain(o.spec),
        })
        .collect()
}

#[test]
fn greeks_fill_the_columns_with_their_errors_and_baskets_go_to_the_summary() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("book.csv"), BOOK).unwrap();
    std::fs::write(d.path().join("indices.csv"), BASKET_FILE).unwrap();
    let o = kiln(
        d.path(),
        &[
            "--input", "book.csv", "--output", "g.csv", "--method", "mc", "--paths", "32768", "--steps", "2",
            "--seed", "5", "--device", "cpu", "--greeks", "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(d.path().join("g.csv")).unwrap();
    assert!(
        text.starts_with(
            "id,price,std_error,delta,gamma,vega,theta,rho,delta_se,gamma_se,vega_se,theta_se,rho_se\n"
        ),
        "{text}"
    );
    let table = rows(&text);
    // the facade's Greeks of the same rows (row r on stream r - 1)
    let book = facade_book(d.path());
    let mc = kiln::core::finance::McParams {
        paths: 32768,
        steps: 2,
        seed: 5,
        ..Default::default()
    };
    let want = Runtime::cpu()
        .mc_greeks(&book, &mc, &GreeksParams::default(), 0)
        .unwrap();
    let cell = |r: usize, c: &str| -> f64 { table[r][c].parse().unwrap() };
    // row 3 is the vanilla european: every Greek in the file, the facade's bits
    let v = want[3].as_ref().unwrap();
    assert_eq!(table[3]["id"], "vanilla");
    for (c, e) in [
        ("delta", v.delta[0]),
        ("gamma", v.gamma[0]),
        ("vega", v.vega[0]),
        ("theta", v.theta),
        ("rho", v.rho),
    ] {
        assert_eq!(cell(3, c).to_bits(), e.value.to_bits(), "{c}");
        assert_eq!(
            cell(3, &format!("{c}_se")).to_bits(),
            e.std_error.to_bits(),
            "{c}_se"
        );
    }
    let b = bsm(OptionType::Call, 100.0, 100.0, 0.03, 0.01, 0.2, 1.0);
    for (c, x) in [
        ("delta", b.delta),
        ("gamma", b.gamma),
        ("vega", b.vega),
        ("theta", b.theta),
        ("rho", b.rho),
    ] {
        let (got, se) = (cell(3, c), cell(3, &format!("{c}_se")));
        assert!(
            se > 0.0 && (got - x).abs() <= 4.0 * se,
            "{c}: {got} +- {se} vs {x}"
        );
    }
    // basket rows: theta and rho in the file, per-asset delta, gamma and vega in the summary
    assert_eq!(table[0]["delta"], "");
    assert_eq!(
        cell(0, "rho").to_bits(),
        want[0].as_ref().unwrap().rho.value.to_bits()
    );
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["greeks"], true);
    let assets = summary["asset_greeks"].as_array().unwrap();
    assert_eq!(assets.len(), 3, "{summary}");
    assert_eq!(assets[0]["id"], "idx_call");
    let deltas: Vec<f64> = assets[0]["delta"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let want_d: Vec<f64> = want[0].as_ref().unwrap().delta.iter().map(|e| e.value).collect();
    assert_eq!(deltas, want_d);
}

#[test]
fn greeks_need_monte_carlo_and_refuse_target_se() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("book.csv"), BOOK).unwrap();
    std::fs::write(d.path().join("indices.csv"), BASKET_FILE).unwrap();
    for extra in [
        &["--greeks"][..],
        &["--method", "mc", "--greeks", "--target-se", "1e-3"],
    ] {
        let mut args = vec!["--input", "book.csv", "--output", "x.csv"];
        args.extend_from_slice(extra);
        let o = kiln(d.path(), &args);
        assert_ne!(o.status.code(), Some(0));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("--greeks"), "{e}");
        assert!(!d.path().join("x.csv").exists());
    }
}

#[test]
fn cross_gammas_are_the_facade_s_matrix_and_the_bumps_are_checked() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("book.csv"), BOOK).unwrap();
    std::fs::write(d.path().join("indices.csv"), BASKET_FILE).unwrap();
    let o = kiln(
        d.path(),
        &[
            "--input",
            "book.csv",
            "--output",
            "g.csv",
            "--method",
            "mc",
            "--paths",
            "8192",
            "--steps",
            "2",
            "--seed",
            "9",
            "--device",
            "cpu",
            "--greeks",
            "--cross-gamma",
            "--spot-bump",
            "0.02",
            "--greeks-batches",
            "16",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let book = facade_book(d.path());
    let mc = kiln::core::finance::McParams {
        paths: 8192,
        steps: 2,
        seed: 9,
        ..Default::default()
    };
    let params = GreeksParams {
        spot_bump: 0.02,
        batches: 16,
        cross_gamma: true,
        ..GreeksParams::default()
    };
    let want = Runtime::cpu().mc_greeks(&book, &mc, &params, 0).unwrap();
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    let assets = summary["asset_greeks"].as_array().unwrap();
    assert_eq!(assets.len(), 3, "{summary}");
    let matrix = |v: &Value| -> Vec<Vec<u64>> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap().to_bits())
                    .collect()
            })
            .collect()
    };
    for (a, w) in assets.iter().zip(&want) {
        let (values, errors) = w.as_ref().unwrap().cross_gamma_matrix().unwrap();
        assert_eq!(values.len(), 3);
        let bits = |m: &[Vec<f64>]| -> Vec<Vec<u64>> {
            m.iter()
                .map(|r| r.iter().map(|x| x.to_bits()).collect())
                .collect()
        };
        assert_eq!(matrix(&a["cross_gamma"]), bits(&values), "{}", a["id"]);
        assert_eq!(matrix(&a["cross_gamma_se"]), bits(&errors), "{}", a["id"]);
        // symmetric, the diagonal the gammas, the off-diagonal estimated (an error > 0)
        assert_eq!(values[0][1].to_bits(), values[1][0].to_bits());
        assert_eq!(a["gamma"][2].as_f64().unwrap().to_bits(), values[2][2].to_bits());
        assert!(errors[0][2] > 0.0, "{errors:?}");
    }
    // without --cross-gamma the summary has no matrices
    let o = kiln(
        d.path(),
        &[
            "--input", "book.csv", "--output", "h.csv", "--method", "mc", "--paths", "2048", "--steps", "2",
            "--device", "cpu", "--greeks", "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        summary["asset_greeks"][0].get("cross_gamma").is_none(),
        "{summary}"
    );
    // a Greek flag without --greeks, and a bump out of its range, name the flag or field
    for (extra, needle) in [
        (&["--method", "mc", "--cross-gamma"][..], "--greeks"),
        (&["--method", "mc", "--greeks", "--spot-bump", "0.9"], "spot_bump"),
        (
            &["--method", "mc", "--greeks", "--greeks-batches", "1"],
            "batches",
        ),
    ] {
        let mut args = vec!["--input", "book.csv", "--output", "x.csv", "--device", "cpu"];
        args.extend_from_slice(extra);
        let o = kiln(d.path(), &args);
        assert_ne!(o.status.code(), Some(0));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(needle), "{extra:?}: {e}");
        assert!(!d.path().join("x.csv").exists());
    }
}
