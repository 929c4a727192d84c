//! `kiln price` end to end: the binary on small CSVs, the outputs parsed back and checked
//! against the closed forms of `kiln::core::finance`.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod run_support;
use kiln::core::finance::OptionType;
use kiln::core::finance::{bsm, geometric_asian};
use kiln_io::options_csv::{read_prices, PriceRecord};
use run_support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

fn kiln(dir: &Path, args: &[&str]) -> Output {
    run_in(dir, &["price"], args)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn by_id<'a>(recs: &'a [PriceRecord], id: &str) -> &'a PriceRecord {
    recs.iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no row {id}"))
}

const BOOK: &str = "\
maturity,id,type,style,spot,strike,rate,dividend,volatility,fixings,barrier
1,atm,call,european,100,100,0.05,0.02,0.2,,
0.5,otm_put,PUT,European,100,90,0.03,0,0.3,,
2,itm,call,european,120,100,0.01,0.03,0.15,,
1,geo,call,asian_geometric,100,100,0.05,0.02,0.2,12,
";

#[test]
fn analytic_equals_the_closed_forms() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "book.csv", BOOK);
    let o = kiln(d.path(), &["--input", "book.csv", "--output", "prices.csv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recs = read_prices(d.path().join("prices.csv")).unwrap();
    let ids: Vec<&str> = recs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["atm", "otm_put", "itm", "geo"]);
    let cases = [
        ("atm", OptionType::Call, 100.0, 100.0, 0.05, 0.02, 0.2, 1.0),
        ("otm_put", OptionType::Put, 100.0, 90.0, 0.03, 0.0, 0.3, 0.5),
        ("itm", OptionType::Call, 120.0, 100.0, 0.01, 0.03, 0.15, 2.0),
    ];
    for (id, kind, s, k, r, q, v, t) in cases {
        let want = bsm(kind, s, k, r, q, v, t);
        let got = by_id(&recs, id);
        // Written in shortest round-trip form: the same bits come back.
        assert_eq!(got.price, want.price, "{id}");
        assert_eq!(got.std_error, 0.0);
        assert_eq!(got.delta, Some(want.delta), "{id}");
        assert_eq!(got.gamma, Some(want.gamma), "{id}");
        assert_eq!(got.vega, Some(want.vega), "{id}");
        assert_eq!(got.theta, Some(want.theta), "{id}");
        assert_eq!(got.rho, Some(want.rho), "{id}");
    }
    // Hull's textbook check: S = K = 100, r = 5%, q = 2%, sigma = 20%, T = 1 call ~ 9.227.
    assert!((by_id(&recs, "atm").price - 9.227).abs() < 1e-3);
    let geo = by_id(&recs, "geo");
    assert_eq!(
        geo.price,
        geometric_asian(OptionType::Call, 100.0, 100.0, 0.05, 0.02, 0.2, 1.0, 12)
    );
    assert_eq!(geo.theta, None, "the geometric Asian has no theta");
    let text = std::fs::read_to_string(d.path().join("prices.csv")).unwrap();
    assert!(text.starts_with("id,price,std_error,delta,gamma,vega,theta,rho\n"));
    assert!(
        text.lines().nth(4).unwrap().contains(",0,") && text.contains(",,"),
        "{text}"
    );
}

const BAD: &str = "\
id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier
ok,call,european,100,100,0.05,0,0.2,1,,
neg_vol,call,european,100,100,0.05,0,-0.1,1,,
ok2,put,european,100,100,0.05,0,0.2,1,,
word,call,european,hundred,100,0.05,0,0.2,1,,
arith,call,asian_arithmetic,100,100,0.05,0,0.2,1,12,
no_barrier,call,barrier_down_in,100,100,0.05,0,0.2,1,,
zero_t,put,european,100,100,0.05,0,0.2,0,,
odd,chooser,european,100,100,0.05,0,0.2,1,,
";

#[test]
fn bad_rows_exit_4_and_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "bad.csv", BAD);
    let o = kiln(
        d.path(),
        &["--input", "bad.csv", "--output", "out.csv", "--device", "cpu"],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    for (row, id, why) in [
        (2, "neg_vol", "volatility = -0.1"),
        (4, "word", "spot: `hundred` is not a number"),
        (5, "arith", "has no closed form"),
        (6, "no_barrier", "barrier is empty"),
        (7, "zero_t", "maturity = 0"),
        (8, "odd", "unknown type `chooser`"),
    ] {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("row {row} (")))
            .unwrap_or_else(|| panic!("row {row} not reported:\n{err}"));
        assert!(line.contains(id) && line.contains(why), "{line}");
    }
    assert!(err.contains("6 of 8 rows"), "{err}");
    assert!(!d.path().join("out.csv").exists());
    assert!(!d.path().join("out.errors.csv").exists());
}

#[test]
fn monte_carlo_refusals_are_reported_with_the_other_bad_rows() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "mixed.csv",
        "id,type,style,spot,strike,rate,volatility,maturity,barrier,rebate\n\
         good,call,european,100,100,0.05,0.2,1,,\n\
         rebated,call,barrier_up_out,100,100,0.05,0.2,1,130,2\n\
         broken,call,european,100,,0.05,0.2,1,,\n",
    );
    let o = kiln(
        d.path(),
        &[
            "--input",
            "mixed.csv",
            "--output",
            "out.csv",
            "--device",
            "cpu",
            "--method",
            "mc",
            "--paths",
            "4096",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("2 of 3 rows"), "{err}");
    for (id, why) in [("rebated", "rebate = 2"), ("broken", "strike is empty")] {
        assert!(
            err.lines().any(|l| l.contains(id) && l.contains(why)),
            "{id} not reported with `{why}`:\n{err}"
        );
    }
    assert!(!d.path().join("out.csv").exists());
}

#[test]
fn every_engines_monte_carlo_refusals_join_the_one_pass() {
    // Heston and American rows are refused by their own engines under --antithetic; with a
    // row of the file bad too, all three are reported at once, each naming the file.
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "engines.csv",
        "id,type,style,spot,strike,rate,volatility,maturity,fixings,model,kappa,theta,xi,rho,v0\n\
         good,call,european,100,100,0.05,0.2,1,,,,,,,\n\
         hes,call,european,100,100,0.02,,1,,heston,1.5,0.04,0.5,-0.6,0.04\n\
         amer,put,american,36,40,0.06,0.2,1,50,,,,,,\n\
         broken,call,european,100,,0.05,0.2,1,,,,,,,\n",
    );
    let o = kiln(
        d.path(),
        &[
            "--input",
            "engines.csv",
            "--output",
            "out.csv",
            "--device",
            "cpu",
            "--method",
            "mc",
            "--paths",
            "4096",
            "--antithetic",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("3 of 4 rows of engines.csv are invalid"), "{err}");
    for (id, why) in [
        ("hes", "no antithetic variates"),
        ("amer", "antithetic variates are not supported"),
        ("broken", "strike is empty"),
    ] {
        assert!(
            err.lines()
                .any(|l| l.starts_with("invalid: engines.csv: row") && l.contains(id) && l.contains(why)),
            "{id} not reported with `{why}`:\n{err}"
        );
    }
    assert!(!d.path().join("out.csv").exists());
}

#[test]
fn skip_invalid_writes_good_rows_and_the_errors_file() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "bad.csv", BAD);
    let o = kiln(
        d.path(),
        &["--input", "bad.csv", "--output", "out.csv", "--skip-invalid"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recs = read_prices(d.path().join("out.csv")).unwrap();
    let ids: Vec<&str> = recs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["ok", "ok2"]);
    let errors = std::fs::read_to_string(d.path().join("out.errors.csv")).unwrap();
    let mut lines = errors.lines();
    assert_eq!(lines.next(), Some("row,id,reason"));
    let rows: Vec<(String, String)> = lines
        .map(|l| {
            let mut f = l.splitn(3, ',');
            (f.next().unwrap().into(), f.next().unwrap().into())
        })
        .collect();
    let want = [
        ("2", "neg_vol"),
        ("4", "word"),
        ("5", "arith"),
        ("6", "no_barrier"),
        ("7", "zero_t"),
        ("8", "odd"),
    ];
    let want: Vec<(String, String)> = want.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    assert_eq!(rows, want, "{errors}");
    assert!(stderr(&o).contains("6 invalid rows skipped"), "{}", stderr(&o));
}

#[test]
fn monte_carlo_is_within_4_standard_errors_and_rows_keep_their_streams() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "book.csv", BOOK);
    let args = [
        "--method", "mc", "--device", "cpu", "--paths", "20000", "--steps", "8", "--json",
    ];
    let o = kiln(
        d.path(),
        &[&["--input", "book.csv", "--output", "mc.csv"][..], &args].concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recs = read_prices(d.path().join("mc.csv")).unwrap();
    for (id, want) in [
        (
            "atm",
            bsm(OptionType::Call, 100.0, 100.0, 0.05, 0.02, 0.2, 1.0).price,
        ),
        (
            "otm_put",
            bsm(OptionType::Put, 100.0, 90.0, 0.03, 0.0, 0.3, 0.5).price,
        ),
        (
            "itm",
            bsm(OptionType::Call, 120.0, 100.0, 0.01, 0.03, 0.15, 2.0).price,
        ),
        (
            "geo",
            geometric_asian(OptionType::Call, 100.0, 100.0, 0.05, 0.02, 0.2, 1.0, 12),
        ),
    ] {
        let r = by_id(&recs, id);
        assert!(r.std_error > 0.0, "{id}");
        assert!(
            (r.price - want).abs() <= 4.0 * r.std_error,
            "{id}: mc {} +- {} vs closed form {want}",
            r.price,
            r.std_error
        );
        assert!(
            r.delta.is_some() && r.gamma.is_none(),
            "{id}: pathwise delta only"
        );
    }
    // Row 2 made invalid: the other rows keep their streams, so their bits.
    let broken = BOOK.replace(
        ",otm_put,PUT,European,100,90,0.03,0,0.3,,",
        ",otm_put,PUT,European,100,90,0.03,0,x,,",
    );
    write(d.path(), "broken.csv", &broken);
    let o = kiln(
        d.path(),
        &[
            &["--input", "broken.csv", "--output", "mc2.csv", "--skip-invalid"][..],
            &args,
        ]
        .concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let again = read_prices(d.path().join("mc2.csv")).unwrap();
    assert_eq!(again.len(), 3);
    for r in &again {
        assert_eq!(r.price.to_bits(), by_id(&recs, &r.id).price.to_bits(), "{}", r.id);
    }
    // --fast-math is GPU-only: the CPU ignores it (same bits) and the summary says so.
    let o = kiln(
        d.path(),
        &[
            &["--input", "book.csv", "--output", "fast.csv", "--fast-math"][..],
            &args,
        ]
        .concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["fast_math"], serde_json::Value::Bool(false), "{summary}");
    let fast = read_prices(d.path().join("fast.csv")).unwrap();
    for r in &fast {
        assert_eq!(r.price.to_bits(), by_id(&recs, &r.id).price.to_bits(), "{}", r.id);
    }
}

#[test]
fn json_summary_parses() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "book.csv", BOOK);
    let o = kiln(
        d.path(),
        &[
            "--input",
            "book.csv",
            "--output",
            "p.csv",
            "--method",
            "mc",
            "--device",
            "cpu",
            "--paths",
            "2000",
            "--steps",
            "4",
            "--antithetic",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)));
    assert_eq!(v["options"], 4);
    assert_eq!(v["priced"], 4);
    assert_eq!(v["invalid"], 0);
    assert_eq!(v["method"], "mc");
    assert_eq!(v["device"], "cpu");
    assert_eq!(v["paths"], 2000);
    assert_eq!(v["steps"], 4);
    assert_eq!(v["output"], "p.csv");
    assert!(v["seconds"].as_f64().unwrap() > 0.0);
    // 3 options x 2000 paths x 4 steps + the Asian's 2000 x 12 fixings.
    assert_eq!(v["path_steps"], 3 * 2000 * 4 + 2000 * 12);
    assert!(v["path_steps_per_s"].as_f64().unwrap() > 0.0);
    let o = kiln(d.path(), &["--input", "book.csv", "--output", "a.csv", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["method"].as_str(), v["paths"].is_null()),
        (Some("analytic"), true)
    );
}

#[test]
fn file_problems_exit_4_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let o = kiln(d.path(), &["--input", "missing.csv", "--output", "p.csv"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("missing.csv") && stderr(&o).contains("not found"),
        "{}",
        stderr(&o)
    );
    write(
        d.path(),
        "cols.csv",
        "id,type,style,spot,strike,rate,vol,maturity\n",
    );
    let o = kiln(d.path(), &["--input", "cols.csv", "--output", "p.csv"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`volatility`") && stderr(&o).contains("`vol`"),
        "{}",
        stderr(&o)
    );
    // an unknown column is a header error (exit 4, as README's exit codes say for invalid
    // input): named, with the accepted columns, and not called a damaged file
    write(
        d.path(),
        "exercise.csv",
        "id,type,style,spot,strike,rate,volatility,maturity,exercise\n1,put,european,36,40,0.06,0.2,1,american\n",
    );
    let o = kiln(d.path(), &["--input", "exercise.csv", "--output", "p.csv"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("exercise.csv")
            && err.contains("unknown column(s) `exercise` (the exercise style goes in `style`"),
        "{err}"
    );
    assert!(
        err.contains("may add id, dividend, fixings, barrier, rebate"),
        "{err}"
    );
    assert!(!err.contains("corrupt") && !err.contains("re-copy"), "{err}");
    write(d.path(), "book.csv", BOOK);
    let o = kiln(d.path(), &["--input", "book.csv", "--output", "./book.csv"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(d.path().join("book.csv")).unwrap(), BOOK);
    assert!(!d.path().join("p.csv").exists());
}

/// Heston and American rows in one book with a Black-Scholes row: each priced by its own
/// engine, the published values met by the closed forms and the tree, Monte Carlo near them,
/// and the rows that a method or flag cannot price refused with a reason.
#[test]
fn heston_and_american_rows_price_by_their_engines() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "book.csv",
        "id,type,style,spot,strike,rate,volatility,maturity,fixings,model,kappa,theta,xi,rho,v0\n\
         bs,call,european,100,100,0.05,0.2,1,,,,,,,\n\
         fo,call,european,100,100,0,,1,,heston,1.5768,0.0398,0.5751,-0.5711,0.0175\n\
         ls,put,american,36,40,0.06,0.2,1,50,,,,,,\n\
         cont,put,american,36,40,0.06,0.2,1,,,,,,,\n",
    );
    let o = kiln(d.path(), &["--input", "book.csv", "--output", "a.csv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let a = read_prices(d.path().join("a.csv")).unwrap();
    // Fang & Oosterlee's Heston call; Longstaff & Schwartz's Table 1 (50 dates a year)
    assert!((by_id(&a, "fo").price - 5.785155450).abs() < 1e-6);
    assert!((by_id(&a, "ls").price - 4.478).abs() < 2e-3);
    let cont = by_id(&a, "cont").price;
    assert!(
        cont > by_id(&a, "ls").price && cont < 4.50,
        "continuous exercise {cont}"
    );
    assert_eq!(by_id(&a, "fo").std_error, 0.0);

    let o = kiln(
        d.path(),
        &[
            "--input", "book.csv", "--output", "m.csv", "--method", "mc", "--paths", "16384", "--steps",
            "50", "--device", "cpu",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = read_prices(d.path().join("m.csv")).unwrap();
    let fo = by_id(&m, "fo");
    assert!(
        (fo.price - 5.785155450).abs() < 4.0 * fo.std_error + 0.05,
        "{fo:?}"
    );
    let ls = by_id(&m, "ls");
    assert!((ls.price - 4.478).abs() < 4.0 * ls.std_error + 0.02, "{ls:?}");
    assert!(ls.delta.is_none() && by_id(&m, "bs").delta.is_some());

    // an arithmetic Asian under Heston has no closed form; --target-se is Black-Scholes only
    write(
        d.path(),
        "asian.csv",
        "type,style,spot,strike,rate,volatility,maturity,fixings,model,kappa,theta,xi,rho,v0\n\
         call,asian_arithmetic,100,100,0.01,,1,12,heston,2,0.04,0.3,-0.7,0.04\n",
    );
    let o = kiln(d.path(), &["--input", "asian.csv", "--output", "x.csv"]);
    assert_eq!(o.status.code(), Some(4));
    assert!(
        stderr(&o).contains("under heston has no closed form"),
        "{}",
        stderr(&o)
    );
    let o = kiln(
        d.path(),
        &[
            "--input",
            "book.csv",
            "--output",
            "t.csv",
            "--method",
            "mc",
            "--target-se",
            "0.01",
        ],
    );
    assert_eq!(o.status.code(), Some(4));
    assert!(
        stderr(&o).contains("--target-se prices Black-Scholes rows only"),
        "{}",
        stderr(&o)
    );
    assert!(!d.path().join("t.csv").exists());
}

/// docs/examples' basket pair: three indices and a book naming them.
const BASKET_BOOK: &str = include_str!("../../../docs/examples/basket_book.csv");
const BASKET_FILE: &str = include_str!("../../../docs/examples/indices.csv");

#[test]
fn basket_rows_price_end_to_end() {
    use kiln::core::finance::basket::BasketAverage;
    use kiln::finance::Method;
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "book.csv", BASKET_BOOK);
    write(d.path(), "indices.csv", BASKET_FILE);
    let file = kiln_io::options_csv::read_options(d.path().join("book.csv")).unwrap();
    assert!(file.errors.is_empty(), "{:?}", file.errors);
    let spec = |id: &str| {
        file.options
            .iter()
            .find(|o| o.id == id)
            .unwrap()
            .basket(&file.baskets)
            .unwrap()
    };
    // analytic: the geometric row is the closed form; the arithmetic rows have none
    let o = kiln(
        d.path(),
        &["--input", "book.csv", "--output", "a.csv", "--skip-invalid"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recs = read_prices(d.path().join("a.csv")).unwrap();
    let geo = spec("idx_geo");
    assert_eq!(geo.average, BasketAverage::Geometric);
    assert_eq!(
        by_id(&recs, "idx_geo").price.to_bits(),
        geo.price_analytic().unwrap().to_bits()
    );
    let errs = std::fs::read_to_string(d.path().join("a.errors.csv")).unwrap();
    assert!(
        errs.contains("idx_call") && errs.contains("--method mc"),
        "{errs}"
    );
    // mc: row r on stream r - 1, the bits of the facade on the CPU
    let o = kiln(
        d.path(),
        &[
            "--input", "book.csv", "--output", "m.csv", "--method", "mc", "--paths", "20001", "--seed", "11",
            "--device", "cpu",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recs = read_prices(d.path().join("m.csv")).unwrap();
    let mc = kiln::core::finance::McParams {
        paths: 20001,
        seed: 11,
        ..Default::default()
    };
    let rt = kiln::Runtime::cpu();
    for (row, id) in [(1u32, "idx_call"), (2, "idx_put"), (3, "idx_geo")] {
        let want = rt
            .price_basket_batch(&[spec(id)], &mc, Method::MonteCarlo, row - 1)
            .remove(0)
            .unwrap();
        let got = by_id(&recs, id);
        assert_eq!(got.price.to_bits(), want.price.to_bits(), "{id}");
        assert!(got.std_error > 0.0);
    }
    let g = by_id(&recs, "idx_geo");
    let exact = geo.price_analytic().unwrap();
    assert!(
        (g.price - exact).abs() < 4.0 * g.std_error,
        "{} +- {} vs {exact}",
        g.price,
        g.std_error
    );
}

#[test]
fn bad_basket_files_and_cells_exit_4_naming_them() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "npd.csv",
        "asset,weight,spot,volatility,dividend,A,B,C\n\
         A,1,100,0.2,0,1,0.9,0.9\nB,1,50,0.3,0,0.9,1,-0.9\nC,1,70,0.3,0,0.9,-0.9,1\n",
    );
    write(
        d.path(),
        "book.csv",
        "id,type,style,spot,strike,rate,volatility,maturity,basket\nb1,call,basket,,200,0.02,,1,npd.csv\n",
    );
    let o = kiln(
        d.path(),
        &["--input", "book.csv", "--output", "p.csv", "--method", "mc"],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("row 1")
            && e.contains("npd.csv")
            && e.contains("not positive definite: pivot 3 (asset `C`)"),
        "{e}"
    );
    assert!(!d.path().join("p.csv").exists());
    // a cell the basket file owns, and a bad cell inside a basket file
    write(d.path(), "indices.csv", &BASKET_FILE.replace("0.18", "fast"));
    write(
        d.path(),
        "book2.csv",
        "id,type,style,spot,strike,rate,volatility,maturity,basket\n\
         b1,call,basket,100,100,0.02,,1,indices.csv\n",
    );
    let o = kiln(
        d.path(),
        &["--input", "book2.csv", "--output", "p.csv", "--method", "mc"],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("row 1") && e.contains("spot: `100` given for style basket"),
        "{e}"
    );
    assert!(
        e.contains("indices.csv") && e.contains("row 1 (line 2, asset `SPX`), column `volatility`"),
        "{e}"
    );
}

/// Flags nothing would read are refused (exit 4), not ignored: `--replicates` under Philox,
/// `--max-paths` without `--target-se`.
#[test]
fn flags_without_their_mode_are_refused() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "one.csv",
        "id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier\na,call,european,100,100,0.05,0,0.2,1,,\n",
    );
    let base = [
        "--input", "one.csv", "--output", "out.csv", "--device", "cpu", "--method", "mc", "--paths", "4096",
    ];
    for (extra, why) in [
        (&["--replicates", "8"][..], "--replicates needs --rng sobol"),
        (
            &["--max-paths", "100000"][..],
            "--max-paths caps a --target-se run",
        ),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let o = kiln(d.path(), &args);
        assert_eq!(o.status.code(), Some(4), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(why), "{extra:?}: {}", stderr(&o));
        assert!(!d.path().join("out.csv").exists());
    }
    // with their modes they are read
    let args: Vec<&str> = base
        .iter()
        .chain(&[
            "--rng",
            "sobol",
            "--replicates",
            "8",
            "--target-se",
            "1e-2rel",
            "--max-paths",
            "1048576",
        ])
        .copied()
        .collect();
    let o = kiln(d.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Spreads (weights 1 and -1, strikes 0 and below) and rainbows (average max) are basket
/// rows: analytic gives kiln-core's closed forms bit for bit, mc prices them too.
#[test]
fn spread_and_rainbow_rows_price_end_to_end() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "crack.csv",
        "asset,weight,spot,volatility,dividend,RBOB,WTI\nRBOB,1,92,0.35,0.02,1,0.85\nWTI,-1,78,0.3,0.01,0.85,1\n",
    );
    write(
        d.path(),
        "pair.csv",
        "asset,weight,spot,volatility,dividend,A,B\nA,1,100,0.11,0.06,1,0.63\nB,1,105,0.16,0.09,0.63,1\n",
    );
    write(
        d.path(),
        "book.csv",
        "id,type,style,spot,strike,rate,volatility,maturity,basket,average\n\
         ex,call,basket,,0,0.03,,0.5,crack.csv,\n\
         neg,put,basket,,-4,0.03,,0.5,crack.csv,\n\
         hi,call,basket,,98,0.05,,0.5,pair.csv,max\n",
    );
    let o = kiln(d.path(), &["--input", "book.csv", "--output", "a.csv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recs = read_prices(d.path().join("a.csv")).unwrap();
    let file = kiln_io::options_csv::read_options(d.path().join("book.csv")).unwrap();
    for o in &file.options {
        let want = o.basket(&file.baskets).unwrap().price_analytic().unwrap();
        assert_eq!(by_id(&recs, &o.id).price.to_bits(), want.to_bits(), "{}", o.id);
    }
    // Haug, Option Pricing Formulas (1998), p. 58: a call on the max of these two, 8.0701
    assert!((by_id(&recs, "hi").price - 8.0701).abs() < 1e-4);
    let o = kiln(
        d.path(),
        &[
            "--input",
            "book.csv",
            "--output",
            "m.csv",
            "--method",
            "mc",
            "--paths",
            "65536",
            "--control-variate",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mc = read_prices(d.path().join("m.csv")).unwrap();
    for id in ["ex", "neg", "hi"] {
        let (m, a) = (by_id(&mc, id), by_id(&recs, id));
        assert!(
            (m.price - a.price).abs() < 4.0 * m.std_error + 1e-3 * a.price,
            "{id}: {} +- {} vs {}",
            m.price,
            m.std_error,
            a.price
        );
    }
}
