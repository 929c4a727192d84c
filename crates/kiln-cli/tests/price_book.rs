//! `kiln price` on a mixed book (Black-Scholes, Heston, American, Asian, basket rows) gives the bits
//! of the facade's `Runtime::price_book` on the same options, which the Python package's
//! `kiln.price` calls: a book priced from a CSV or from Python is the same numbers.
#![allow(clippy::unwrap_used)]

use kiln::core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln::core::finance::heston::{HestonParams, HestonSpec};
use kiln::core::finance::{McParams, OptionSpec, OptionType, Style};
use kiln::finance::{AmericanSpec, BookOption, Method};
use kiln::Runtime;
use kiln_io::options_csv::read_prices;
use std::path::PathBuf;
use std::process::Command;

const BOOK: &str = "\
id,type,style,spot,strike,rate,volatility,maturity,fixings,model,kappa,theta,xi,rho,v0,basket,average
bs,call,european,100,100,0.05,0.2,1,,,,,,,,,
fo,call,european,100,100,0,,1,,heston,1.5768,0.0398,0.5751,-0.5711,0.0175,,
ls,put,american,36,40,0.06,0.2,1,10,,,,,,,,
as,call,asian_arithmetic,100,90,0.01,0.3,0.5,8,,,,,,,,
bk,put,basket,,95,0.03,,1,,,,,,,,two.csv,geometric
";

const TWO: &str = "\
asset,weight,spot,volatility,dividend,A,B
A,0.6,100,0.2,0.01,1,0.3
B,0.4,50,0.3,0,0.3,1
";

fn book() -> Vec<BookOption> {
    let call = |s, k, r, v, t| OptionSpec::european(OptionType::Call, s, k, r, 0.0, v, t);
    vec![
        BookOption::Plain(call(100.0, 100.0, 0.05, 0.2, 1.0)),
        BookOption::Heston(HestonSpec {
            // the CSV's empty volatility becomes sqrt(theta), unused by the engine
            option: call(100.0, 100.0, 0.0, 0.0398f64.sqrt(), 1.0),
            heston: HestonParams {
                kappa: 1.5768,
                theta: 0.0398,
                xi: 0.5751,
                rho: -0.5711,
                v0: 0.0175,
            },
        }),
        BookOption::American {
            spec: AmericanSpec {
                option_type: OptionType::Put,
                spot: 36.0,
                strike: 40.0,
                rate: 0.06,
                dividend: 0.0,
                volatility: 0.2,
                maturity: 1.0,
                exercise_dates: 10,
            },
            continuous: false,
        },
        BookOption::Plain(call(100.0, 90.0, 0.01, 0.3, 0.5).with_style(
            Style::AsianArithmetic,
            Some(8),
            None,
        )),
        BookOption::Basket(BasketSpec {
            kind: OptionType::Put,
            strike: 95.0,
            rate: 0.03,
            maturity: 1.0,
            average: BasketAverage::Geometric,
            assets: vec![
                BasketAsset::new(100.0, 0.2, 0.01, 0.6).named("A"),
                BasketAsset::new(50.0, 0.3, 0.0, 0.4).named("B"),
            ],
            correlation: vec![1.0, 0.3, 0.3, 1.0],
        }),
    ]
}

#[test]
fn the_cli_prices_a_mixed_book_as_price_book_does() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("book.csv"), BOOK).unwrap();
    std::fs::write(dir.path().join("two.csv"), TWO).unwrap();
    let bin = std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")));
    let out = Command::new(bin)
        .args([
            "price", "--input", "book.csv", "--output", "p.csv", "--method", "mc",
        ])
        .args([
            "--paths", "4101", "--steps", "16", "--seed", "4", "--device", "cpu",
        ])
        .current_dir(dir.path())
        .env("KILN_CACHE_DIR", dir.path().join("cache"))
        .env_remove("KILN_DEVICES")
        .env_remove("KILN_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cli = read_prices(dir.path().join("p.csv")).unwrap();
    let mc = McParams {
        paths: 4101,
        steps: 16,
        seed: 4,
        ..McParams::default()
    };
    let want = Runtime::cpu().price_book(&book(), Method::MonteCarlo, &mc, 0);
    assert_eq!(cli.len(), want.len());
    for (c, w) in cli.iter().zip(&want) {
        let w = w.as_ref().unwrap();
        assert_eq!(c.price.to_bits(), w.price.to_bits(), "row {}", c.id);
        assert_eq!(c.std_error.to_bits(), w.std_error.to_bits(), "row {}", c.id);
    }
}

/// `--devices cpu` prices the Black-Scholes rows through the executor: the same bits as
/// `--device cpu`, and `--json` reports each worker's part of the book.
#[test]
fn devices_keep_the_bits_and_report_the_split() {
    let dir = tempfile::tempdir().unwrap();
    let mut book = String::from("id,type,style,spot,strike,rate,volatility,maturity,fixings\n");
    for i in 0..40 {
        book.push_str(&format!("o{i},call,european,100,{},0.03,0.25,1,\n", 80 + i));
    }
    book.push_str("as,put,asian_arithmetic,100,100,0.03,0.25,1,12\n");
    std::fs::write(dir.path().join("book.csv"), book).unwrap();
    let bin = std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")));
    let run = |out: &str, how: &[&str]| {
        let o = Command::new(&bin)
            .args([
                "price", "--input", "book.csv", "--output", out, "--method", "mc", "--json",
            ])
            .args(["--paths", "5000", "--steps", "12"])
            .args(how)
            .current_dir(dir.path())
            .env("KILN_CACHE_DIR", dir.path().join("cache"))
            .env_remove("KILN_DEVICES")
            .env_remove("KILN_CONFIG")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let one = run("one.csv", &["--device", "cpu"]);
    let split = run("split.csv", &["--devices", "cpu"]);
    assert!(one.get("workers").is_none());
    let a = std::fs::read(dir.path().join("one.csv")).unwrap();
    let b = std::fs::read(dir.path().join("split.csv")).unwrap();
    assert_eq!(a, b, "--devices cpu changed the prices");
    let w = split["workers"].as_array().unwrap();
    assert_eq!(w.len(), 1, "{split}");
    assert_eq!(w[0]["label"], "cpu");
    assert!(
        w[0]["chunks"].as_u64().unwrap() >= 2 && w[0]["share"] == 1.0,
        "{split}"
    );
}
