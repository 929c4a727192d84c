//! `kiln price` on American rainbow rows (`style = american_rainbow`): Monte Carlo gives the
//! bits of the facade's `Runtime::price_book` (Longstaff-Schwartz on the CPU engine) at the
//! rows' stream indices; analytic, a missing exercise date count, an average other than max
//! or min and what Longstaff-Schwartz refuses are bad rows with their reasons.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod run_support;
use kiln::core::finance::basket::BasketAsset;
use kiln::core::finance::{McParams, OptionSpec, OptionType};
use kiln::finance::{AmericanRainbowSpec, BookOption, Extreme, Method};
use kiln::Runtime;
use kiln_io::options_csv::read_prices;
use run_support::*;
use std::path::Path;
use std::process::Output;

fn kiln(dir: &Path, args: &[&str]) -> Output {
    run_in(dir, &["price"], args)
}

const BOOK: &str = "id,type,style,spot,strike,rate,volatility,maturity,fixings,basket,average\n\
    bs,call,european,100,100,0.05,0.2,1,,,\n\
    mx,call,american_rainbow,,100,0.05,,1,6,three.csv,max\n\
    mn,put,american_rainbow,,100,0.05,,1,4,three.csv,min\n\
    one,call,american_rainbow,,95,0.05,,0.5,3,one.csv,max\n";

const THREE: &str = "asset,weight,spot,volatility,dividend,A,B,C\n\
    A,1,100,0.2,0.1,1,0.3,0.2\n\
    B,1,95,0.3,0.05,0.3,1,0.4\n\
    C,1,105,0.25,0,0.2,0.4,1\n";

const ONE: &str = "asset,weight,spot,volatility,dividend,A\nA,1,100,0.2,0.02,1\n";

fn rainbow(
    kind: OptionType,
    extreme: Extreme,
    strike: f64,
    maturity: f64,
    dates: u32,
) -> AmericanRainbowSpec {
    AmericanRainbowSpec {
        kind,
        extreme,
        strike,
        rate: 0.05,
        maturity,
        exercise_dates: dates,
        assets: vec![
            BasketAsset::new(100.0, 0.2, 0.1, 1.0).named("A"),
            BasketAsset::new(95.0, 0.3, 0.05, 1.0).named("B"),
            BasketAsset::new(105.0, 0.25, 0.0, 1.0).named("C"),
        ],
        correlation: vec![1.0, 0.3, 0.2, 0.3, 1.0, 0.4, 0.2, 0.4, 1.0],
    }
}

fn write_files(d: &Path) {
    std::fs::write(d.join("book.csv"), BOOK).unwrap();
    std::fs::write(d.join("three.csv"), THREE).unwrap();
    std::fs::write(d.join("one.csv"), ONE).unwrap();
}

#[test]
fn american_rainbow_rows_are_the_facades_prices_bit_for_bit() {
    let d = tempfile::tempdir().unwrap();
    write_files(d.path());
    let o = kiln(
        d.path(),
        &[
            "--input", "book.csv", "--output", "m.csv", "--method", "mc", "--paths", "3001", "--steps", "8",
            "--seed", "11", "--device", "cpu",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let cli = read_prices(d.path().join("m.csv")).unwrap();
    let mut single = rainbow(OptionType::Call, Extreme::Max, 95.0, 0.5, 3);
    single.assets = vec![BasketAsset::new(100.0, 0.2, 0.02, 1.0).named("A")];
    single.correlation = vec![1.0];
    let book = vec![
        BookOption::Plain(OptionSpec::european(
            OptionType::Call,
            100.0,
            100.0,
            0.05,
            0.0,
            0.2,
            1.0,
        )),
        BookOption::AmericanRainbow(rainbow(OptionType::Call, Extreme::Max, 100.0, 1.0, 6)),
        BookOption::AmericanRainbow(rainbow(OptionType::Put, Extreme::Min, 100.0, 1.0, 4)),
        BookOption::AmericanRainbow(single),
    ];
    let mc = McParams {
        paths: 3001,
        steps: 8,
        seed: 11,
        ..McParams::default()
    };
    let want = Runtime::cpu().price_book(&book, Method::MonteCarlo, &mc, 0);
    assert_eq!(cli.len(), want.len());
    for (c, w) in cli.iter().zip(&want) {
        let w = w.as_ref().unwrap();
        assert_eq!(c.price.to_bits(), w.price.to_bits(), "row {}", c.id);
        assert_eq!(c.std_error.to_bits(), w.std_error.to_bits(), "row {}", c.id);
        assert!(c.std_error > 0.0, "row {}", c.id);
    }
}

#[test]
fn bad_american_rainbow_rows_say_why() {
    let d = tempfile::tempdir().unwrap();
    write_files(d.path());
    std::fs::write(
        d.path().join("bad.csv"),
        "id,type,style,spot,strike,rate,volatility,maturity,fixings,basket,average\n\
         ok,call,american_rainbow,,100,0.05,,1,6,three.csv,max\n\
         nodates,call,american_rainbow,,100,0.05,,1,,three.csv,max\n\
         arith,call,american_rainbow,,100,0.05,,1,6,three.csv,arithmetic\n",
    )
    .unwrap();
    let o = kiln(
        d.path(),
        &[
            "--input", "bad.csv", "--output", "out.csv", "--method", "mc", "--device", "cpu",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    for (row, id, why) in [
        (2, "nodates", "fixings is empty"),
        (
            3,
            "arith",
            "average: `arithmetic` for style american_rainbow; use max or min",
        ),
    ] {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("row {row} (")))
            .unwrap_or_else(|| panic!("row {row} not reported:\n{err}"));
        assert!(line.contains(id) && line.contains(why), "{line}");
    }
    assert!(!err.lines().any(|l| l.contains("row 1 (")), "{err}");
    assert!(!d.path().join("out.csv").exists());

    // analytic: no closed form or tree; every rainbow row is bad, the European one is not
    let o = kiln(
        d.path(),
        &["--input", "book.csv", "--output", "a.csv", "--device", "cpu"],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    for row in [2, 3, 4] {
        assert!(
            err.lines().any(|l| l.contains(&format!("row {row} ("))
                && l.contains("no closed form or tree")
                && l.contains("--method mc")),
            "row {row}:\n{err}"
        );
    }
    assert!(!err.lines().any(|l| l.contains("row 1 (")), "{err}");

    // what Longstaff-Schwartz refuses is named before anything is priced
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
            "4096",
            "--control-variate",
            "--device",
            "cpu",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.lines()
            .any(|l| l.contains("row 2 (") && l.contains("control variates")),
        "{err}"
    );
}

/// `kiln risk` on an American rainbow row: its assets are shocked by their names in the
/// basket file (valued by Monte Carlo even under analytic, on common random numbers), so a
/// scenario that moves nothing has zero P&L and a rally of every asset raises a max-call.
#[test]
fn kiln_risk_shocks_an_american_rainbows_assets_by_name() {
    let d = tempfile::tempdir().unwrap();
    write_files(d.path());
    std::fs::write(
        d.path().join("risk.csv"),
        "id,type,style,spot,strike,rate,volatility,maturity,fixings,basket,average,underlying,quantity\n\
         mx,call,american_rainbow,,100,0.05,,1,4,three.csv,max,,2\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("s.csv"),
        "scenario,underlying,spot_shift,spot_shift_kind,vol_shift,rate_shift\n\
         flat,*,,,,\n\
         rally,A,0.1,,,\n\
         rally,B,0.1,,,\n\
         rally,C,0.1,,,\n",
    )
    .unwrap();
    let o = run_in(
        d.path(),
        &["--device", "cpu", "risk"],
        &[
            "--book",
            "risk.csv",
            "--scenarios",
            "s.csv",
            "--paths",
            "2048",
            "--pnl-out",
            "pnl.csv",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(d.path().join("pnl.csv")).unwrap();
    let pnl = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name},")))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(pnl("flat"), 0.0, "{text}");
    assert!(pnl("rally") > 0.0, "{text}");
}
