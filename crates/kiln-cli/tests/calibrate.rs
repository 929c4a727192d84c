//! `kiln calibrate --model heston` end to end: the binary on surfaces priced from known
//! parameters (recovered, in price and in vol, weighted), its JSON fields and human table,
//! and bad files and arguments refused with exit 4, every bad row named and nothing on
//! stdout.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod run_support;
use kiln::core::finance::bsm;
use kiln::core::finance::heston::{heston_price, HestonParams};
use kiln::core::finance::OptionType;
use run_support::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn kiln(dir: &Path, args: &[&str]) -> Output {
    run_in(dir, &["calibrate"], args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const TRUTH: HestonParams = HestonParams {
    kappa: 2.1,
    theta: 0.05,
    xi: 0.45,
    rho: -0.62,
    v0: 0.035,
};

/// Out-of-the-money quotes (puts below the spot, calls at and above): 5 maturities x 12
/// strikes, as `(id, kind, strike, maturity)`.
fn contracts() -> Vec<(String, OptionType, f64, f64)> {
    let mut v = Vec::new();
    for (m, t) in [0.25, 0.5, 1.0, 1.5, 2.5].into_iter().enumerate() {
        for j in 0..12 {
            let k = 70.0 + 6.0 * j as f64;
            let kind = if k < 100.0 {
                OptionType::Put
            } else {
                OptionType::Call
            };
            v.push((format!("q{m}_{j}"), kind, k, t));
        }
    }
    v
}

const S: f64 = 100.0;
const R: f64 = 0.02;
const Q: f64 = 0.01;

fn heston(kind: OptionType, k: f64, t: f64) -> f64 {
    heston_price(kind, S, k, R, Q, t, &TRUTH).unwrap()
}

/// A surface CSV of Heston prices at [`TRUTH`] (full precision).
fn price_surface() -> String {
    let mut s = "id,type,price,spot,strike,rate,dividend,maturity\n".to_string();
    for (id, kind, k, t) in contracts() {
        let p = heston(kind, k, t);
        s += &format!("{id},{},{p:?},{S},{k},{R},{Q},{t}\n", kind.name());
    }
    s
}

/// A surface CSV of the implied vols of those prices, with a weight column `w`.
fn vol_surface() -> String {
    let mut s = "id,type,vol,spot,strike,rate,dividend,maturity,w\n".to_string();
    for (n, (id, kind, k, t)) in contracts().into_iter().enumerate() {
        let v = kiln::core::finance::implied::implied_volatility(heston(kind, k, t), S, k, t, R, Q, kind)
            .unwrap();
        // the round trip is what the fit sees: the vol's price is the Heston price
        let back = bsm(kind, S, k, R, Q, v, t).price;
        assert!((back - heston(kind, k, t)).abs() < 1e-10);
        let w = 1.0 + (n % 3) as f64;
        s += &format!("{id},{},{v:?},{S},{k},{R},{Q},{t},{w}\n", kind.name());
    }
    s
}

fn assert_recovered(json: &Value, tol: f64) {
    let p = &json["params"];
    for (name, want) in [
        ("kappa", TRUTH.kappa),
        ("theta", TRUTH.theta),
        ("xi", TRUTH.xi),
        ("rho", TRUTH.rho),
        ("v0", TRUTH.v0),
    ] {
        let got = p[name].as_f64().unwrap();
        let rel = (got - want).abs() / want.abs();
        assert!(rel < tol, "{name}: {got} vs {want} (rel {rel:e}); {json}");
    }
}

#[test]
fn recovers_known_parameters_from_prices_with_the_json_report() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("surface.csv"), price_surface()).unwrap();
    let o = kiln(
        d.path(),
        &[
            "--model",
            "heston",
            "--quotes",
            "surface.csv",
            "--start",
            "1,0.1,0.5,-0.5,0.1",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j: Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_recovered(&j, 1e-6);
    assert_eq!(j["model"], "heston");
    assert_eq!(j["quoted"], "price");
    assert_eq!(j["target"], "vol");
    assert_eq!(j["device"], "cpu");
    assert_eq!(j["quotes"], 60);
    assert_eq!(j["vol_quotes"], 60);
    assert_eq!(j["start"]["kappa"], 1.0);
    assert!(j["rmse_vol_points"].as_f64().unwrap() < 1e-6, "{j}");
    assert!(j["rmse_price"].as_f64().unwrap() < 1e-8, "{j}");
    // 2 kappa theta = 0.21 >= xi^2 = 0.2025
    assert_eq!(j["feller"], true);
    assert!(j["iterations"].as_u64().unwrap() >= 1);
    assert!(j["evaluations"].as_u64().unwrap() >= j["iterations"].as_u64().unwrap());
    let stop = j["stop"].as_str().unwrap();
    assert!(stop != "max_iterations", "{stop}");
    let per = j["per_quote"].as_array().unwrap();
    assert_eq!(per.len(), 60);
    assert_eq!(per[13]["id"], "q1_1");
    assert_eq!(per[13]["row"], 14);
    for q in per {
        for f in [
            "market_price",
            "model_price",
            "price_error",
            "market_vol",
            "model_vol",
            "vol_error_points",
            "weight",
        ] {
            assert!(q[f].is_number(), "{f} of {q}");
        }
    }
}

#[test]
fn recovers_known_parameters_from_weighted_vols_and_prints_a_table() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("vols.csv"), vol_surface()).unwrap();
    let o = kiln(d.path(), &["--quotes", "vols.csv", "--weights", "w", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j: Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_recovered(&j, 1e-6);
    assert_eq!(j["quoted"], "vol");
    let w: Vec<f64> = j["per_quote"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["weight"].as_f64().unwrap())
        .collect();
    assert_eq!(&w[..4], [1.0, 2.0, 3.0, 1.0]);
    // the price target from the same file, the human report
    let o = kiln(
        d.path(),
        &["--quotes", "vols.csv", "--weights", "w", "--target", "price"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("heston fit of 60 quotes (price target)"), "{out}");
    assert!(
        out.contains("kappa") && out.contains("vol points") && out.contains("Feller"),
        "{out}"
    );
    assert!(out.contains("largest vol errors"), "{out}");
}

#[test]
fn a_bad_file_is_refused_naming_every_row_and_nothing_is_printed() {
    let d = tempfile::tempdir().unwrap();
    let mut s = price_surface();
    s += "bad1,swap,1,100,90,0.02,0,1\n";
    s += "bad2,call,2,100,-5,0.02,0,x\n";
    // a call dearer than the spot: no volatility reaches it, so a vol fit cannot use it
    s += "dear,call,150,100,100,0.02,0,1\n";
    std::fs::write(d.path().join("surface.csv"), s).unwrap();
    let o = kiln(d.path(), &["--quotes", "surface.csv", "--json"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(
        err.contains("surface.csv: row 61 (line 62, id `bad1`): unknown type `swap`"),
        "{err}"
    );
    assert!(
        err.contains("row 62")
            && err.contains("strike = -5")
            && err.contains("maturity: `x` is not a number"),
        "{err}"
    );
    assert!(
        err.contains("row 63") && err.contains("no implied volatility"),
        "{err}"
    );
    assert!(err.contains("3 of 63 rows"), "{err}");
    // in a price fit the dear quote is usable; the file's own bad rows are not
    let o = kiln(d.path(), &["--quotes", "surface.csv", "--target", "price"]);
    assert_eq!(o.status.code(), Some(4));
    let err = text(&o.stderr);
    assert!(err.contains("2 of 63 rows") && !err.contains("row 63"), "{err}");
    // a header without price or vol, an unknown weight column, bad arguments
    std::fs::write(
        d.path().join("h.csv"),
        "type,spot,strike,rate,maturity\ncall,100,100,0,1\n",
    )
    .unwrap();
    for (args, want) in [
        (vec!["--quotes", "h.csv"], "neither `price` nor `vol`"),
        (
            vec!["--quotes", "surface.csv", "--weights", "w"],
            "missing required column(s) `w`",
        ),
        (vec!["--quotes", "missing.csv"], "missing.csv"),
        (
            vec!["--quotes", "surface.csv", "--start", "1,0.1,0.5"],
            "3 numbers",
        ),
        (
            vec!["--quotes", "surface.csv", "--start", "1,0.1,-0.5,-0.5,0.1"],
            "xi = -0.5",
        ),
        (
            vec!["--quotes", "surface.csv", "--target", "iv"],
            "unknown target `iv`",
        ),
        (
            vec!["--quotes", "surface.csv", "--model", "sabr"],
            "unknown model `sabr`",
        ),
    ] {
        let o = kiln(d.path(), &args);
        assert_eq!(o.status.code(), Some(4), "{args:?}: {}", text(&o.stderr));
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(text(&o.stderr).contains(want), "{args:?}: {}", text(&o.stderr));
    }
    let o = Command::new(bin())
        .args(["--device", "cuda", "calibrate", "--quotes", "surface.csv"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4));
    assert!(text(&o.stderr).contains("no GPU pricer"), "{}", text(&o.stderr));
    // nothing but the inputs in the directory: a refused fit writes no file
    let mut names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "cache")
        .collect();
    names.sort();
    assert_eq!(names, ["h.csv", "surface.csv"]);
}
