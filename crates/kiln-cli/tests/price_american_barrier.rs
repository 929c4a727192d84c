//! `kiln price` on American barrier rows (`style = american_barrier_*`): the analytic method
//! is the tree, `mc` Longstaff-Schwartz, bad rows named with their field.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod run_support;
use kiln::core::finance::american::{
    american_barrier_binomial, american_barrier_continuous, AmericanBarrierSpec, AmericanSpec,
};
use kiln::core::finance::{OptionType, Style};
use kiln_io::options_csv::{read_prices, PriceRecord};
use run_support::*;
use std::path::Path;
use std::process::Output;

fn kiln(dir: &Path, args: &[&str]) -> Output {
    run_in(dir, &["price"], args)
}

fn by_id<'a>(recs: &'a [PriceRecord], id: &str) -> &'a PriceRecord {
    recs.iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no row {id}"))
}

const BOOK: &str = "id,type,style,spot,strike,rate,volatility,maturity,fixings,barrier,rebate\n\
    duo,put,american_barrier_up_out,40,40,0.06,0.2,1,50,46,\n\
    ddi,put,american_barrier_down_in,40,40,0.06,0.2,1,50,37,0.25\n\
    cont,put,american_barrier_up_out,40,40,0.06,0.2,1,,46,\n";

fn spec(style: Style, h: f64, rebate: f64, dates: u32) -> AmericanBarrierSpec {
    AmericanBarrierSpec {
        option: AmericanSpec {
            option_type: OptionType::Put,
            spot: 40.0,
            strike: 40.0,
            rate: 0.06,
            dividend: 0.0,
            volatility: 0.2,
            maturity: 1.0,
            exercise_dates: dates,
        },
        style,
        barrier: h,
        rebate,
    }
}

#[test]
fn american_barrier_rows_price_by_the_tree_and_longstaff_schwartz() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("book.csv"), BOOK).unwrap();
    let o = kiln(d.path(), &["--input", "book.csv", "--output", "a.csv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let a = read_prices(d.path().join("a.csv")).unwrap();
    let uo = spec(Style::BarrierUpOut, 46.0, 0.0, 50);
    let di = spec(Style::BarrierDownIn, 37.0, 0.25, 50);
    // the analytic method is the tree of 2,000 steps: exercise on the dates, or at any time
    assert_eq!(
        by_id(&a, "duo").price,
        american_barrier_binomial(&uo, 2000).unwrap()
    );
    assert_eq!(
        by_id(&a, "ddi").price,
        american_barrier_binomial(&di, 2000).unwrap()
    );
    assert_eq!(
        by_id(&a, "cont").price,
        american_barrier_continuous(&uo, 2000).unwrap()
    );
    assert_eq!(by_id(&a, "duo").std_error, 0.0);

    let o = kiln(
        d.path(),
        &[
            "--input", "book.csv", "--output", "m.csv", "--method", "mc", "--paths", "8192", "--steps", "50",
            "--device", "cpu",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = read_prices(d.path().join("m.csv")).unwrap();
    for id in ["duo", "ddi", "cont"] {
        let (mc, tree) = (by_id(&m, id), by_id(&a, id).price);
        assert!(mc.std_error > 0.0, "{id}: {mc:?}");
        // low-biased, within 5% (kiln-cpu's test says why)
        assert!(
            mc.price <= tree + 4.0 * mc.std_error && mc.price >= 0.95 * tree - 4.0 * mc.std_error,
            "{id}: {mc:?} vs tree {tree}"
        );
    }
}

#[test]
fn bad_american_barrier_rows_name_the_row_and_field() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("bad.csv"),
        "id,type,style,spot,strike,rate,volatility,maturity,fixings,barrier,rebate\n\
         ok,put,american_barrier_up_out,40,40,0.06,0.2,1,50,46,\n\
         nobar,put,american_barrier_up_out,40,40,0.06,0.2,1,50,,\n\
         negreb,put,american_barrier_down_in,40,40,0.06,0.2,1,50,37,-1\n\
         zero,call,american_barrier_down_out,40,40,0.06,0.2,1,0,37,\n",
    )
    .unwrap();
    let o = kiln(
        d.path(),
        &["--input", "bad.csv", "--output", "out.csv", "--device", "cpu"],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    for (row, id, why) in [
        (2, "nobar", "barrier is empty"),
        (3, "negreb", "rebate = -1"),
        (4, "zero", "fixings = 0"),
    ] {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("row {row} (")))
            .unwrap_or_else(|| panic!("row {row} not reported:\n{err}"));
        assert!(line.contains(id) && line.contains(why), "{line}");
    }
    assert!(!d.path().join("out.csv").exists());
    // what Longstaff-Schwartz refuses is named before anything is priced
    std::fs::write(d.path().join("book.csv"), BOOK).unwrap();
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
            "--antithetic",
            "--device",
            "cpu",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.lines()
            .any(|l| l.contains("row 1 (") && l.contains("antithetic")),
        "{err}"
    );
}
