use super::*;
use crate::finance::american::{american_binomial, american_continuous};
use crate::finance::barrier::tests::HAUG;
use crate::finance::OptionType::{self, Call, Put};
use Style::{BarrierDownIn as DI, BarrierDownOut as DO, BarrierUpIn as UI, BarrierUpOut as UO};

#[allow(clippy::too_many_arguments)] // an option's terms
fn spec(
    kind: OptionType,
    style: Style,
    s: f64,
    k: f64,
    h: f64,
    rebate: f64,
    r: f64,
    q: f64,
    v: f64,
    t: f64,
    dates: u32,
) -> AmericanBarrierSpec {
    AmericanBarrierSpec {
        option: AmericanSpec {
            option_type: kind,
            spot: s,
            strike: k,
            rate: r,
            dividend: q,
            volatility: v,
            maturity: t,
            exercise_dates: dates,
        },
        style,
        barrier: h,
        rebate,
    }
}

/// With one exercise date (maturity; and now) the option is the European barrier of Haug's
/// Table 4-13 (S = 100, rebate 3, T = 0.5, r = 0.08, b = 0.04: q = 0.04), except that an
/// out-option may be exercised now: rows whose intrinsic value now (10) is above the table's
/// price are worth the intrinsic value and are checked as such. The spot-on-barrier rows
/// (H = 100) are knocked: the out-option's rebate, the in-option's vanilla.
#[test]
fn one_date_gives_haugs_european_barrier_table() {
    let mut checked = 0;
    let mut worst = 0.0f64;
    for (kind, style, h, rows) in HAUG {
        for (x, p25, p30) in rows {
            for (v, want) in [(0.25, p25), (0.30, p30)] {
                let sp = spec(kind, style, 100.0, x, h, 3.0, 0.08, 0.04, v, 0.5, 1);
                let got = american_barrier_binomial(&sp, 2000).unwrap();
                let now = sp.option.payoff(100.0);
                let want = if sp.is_in() || sp.knocked(100.0) {
                    want
                } else {
                    want.max(now)
                };
                worst = worst.max((got - want).abs());
                assert!(
                    (got - want).abs() <= 2e-3,
                    "{kind:?} {style:?} H {h} X {x} vol {v}: tree {got}, Haug {want}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 72);
    assert!(worst > 0.0, "every row exact: the tree is not being exercised");
}

/// An American down-and-out call on a stock without dividends, barrier at or below the
/// strike, is never exercised early (at the touch its intrinsic value `H - K <= 0` is less
/// than the rebate, and before it `S - K e^{-r(T-t)}` beats `S - K`): it is the European
/// down-and-out call of the closed form.
#[test]
fn down_and_out_call_without_dividends_is_the_european() {
    for (s, k, h, rebate, r, v, t) in [
        (100.0, 100.0, 90.0, 0.0, 0.05, 0.2, 1.0),
        (100.0, 110.0, 95.0, 2.0, 0.03, 0.3, 0.5),
        (100.0, 90.0, 85.0, 0.0, 0.08, 0.25, 2.0),
        (50.0, 50.0, 50.0 * 0.97, 1.0, 0.02, 0.15, 1.0),
    ] {
        let sp = spec(Call, DO, s, k, h, rebate, r, 0.0, v, t, 50);
        let eu = sp.european_price();
        let berm = american_barrier_binomial(&sp, 2000).unwrap();
        let cont = american_barrier_continuous(&sp, 2000).unwrap();
        for am in [berm, cont] {
            assert!(
                (am - eu).abs() < 1e-4 * k,
                "S {s} K {k} H {h}: tree {am}, closed form {eu}"
            );
        }
    }
}

/// A barrier far from the spot is never touched: the out-option is the plain American
/// option of [`american_binomial`] and [`american_continuous`], the in-option worth its
/// discounted rebate.
#[test]
fn a_far_barrier_gives_the_plain_american() {
    for (kind, style, h) in [(Put, DO, 1.0), (Put, UO, 1e4), (Call, UO, 1e4), (Call, DO, 1.0)] {
        let sp = spec(kind, style, 40.0, 40.0, h, 0.0, 0.06, 0.02, 0.3, 1.0, 50);
        let plain = american_binomial(&sp.option, 2000).unwrap();
        let got = american_barrier_binomial(&sp, 2000).unwrap();
        assert!(
            (got - plain).abs() < 1e-6 * plain.max(1.0),
            "{style:?}: {got} vs {plain}"
        );
        let plain = american_continuous(&sp.option, 2000).unwrap();
        let got = american_barrier_continuous(&sp, 2000).unwrap();
        assert!((got - plain).abs() < 2e-3, "{style:?}: {got} vs {plain}");
        let style_in = if style == DO { DI } else { UI };
        let knock_in = AmericanBarrierSpec {
            style: style_in,
            rebate: 1.5,
            ..sp
        };
        let got = american_barrier_binomial(&knock_in, 2000).unwrap();
        let want = 1.5 * (-0.06f64).exp();
        assert!((got - want).abs() < 1e-10, "{style_in:?}: {got} vs {want}");
    }
}

/// Out plus in is at least the vanilla (the pair's holder can follow the vanilla's
/// exercise rule), with equality for European exercise; for an American put near a down
/// barrier the gap is material, which is why the in-option is priced directly.
#[test]
fn out_plus_in_is_at_least_the_american_vanilla() {
    let mut largest_gap = 0.0f64;
    for kind in [Call, Put] {
        for (out, inn, h) in [(DO, DI, 90.0), (UO, UI, 115.0), (DO, DI, 75.0), (UO, UI, 140.0)] {
            for (k, q) in [(100.0, 0.0), (95.0, 0.04), (110.0, 0.02)] {
                let o = spec(kind, out, 100.0, k, h, 0.0, 0.05, q, 0.25, 1.0, 50);
                let i = AmericanBarrierSpec { style: inn, ..o };
                let vanilla = american_binomial(&o.option, 2000).unwrap();
                let sum = american_barrier_binomial(&o, 2000).unwrap()
                    + american_barrier_binomial(&i, 2000).unwrap();
                assert!(
                    sum >= vanilla - 2e-3,
                    "{kind:?} {out:?} H {h} K {k} q {q}: out + in {sum} < vanilla {vanilla}"
                );
                largest_gap = largest_gap.max(sum - vanilla);
            }
        }
    }
    // the in-option is not vanilla - out: somewhere the gap is far above the trees' error
    assert!(largest_gap > 0.05, "largest out + in - vanilla: {largest_gap}");
    // European exercise (one date, the spot away from the strike's exercise region): parity
    let o = spec(Put, DO, 100.0, 95.0, 90.0, 0.0, 0.05, 0.0, 0.25, 1.0, 1);
    let i = AmericanBarrierSpec { style: DI, ..o };
    let sum = american_barrier_binomial(&o, 2000).unwrap() + american_barrier_binomial(&i, 2000).unwrap();
    let vanilla = o.option.european_price();
    assert!((sum - vanilla).abs() < 2e-3, "{sum} vs {vanilla}");
}

/// The trees converge in the steps: from 250 to 2,000 steps the distance to 8,000 falls
/// by more than half, and 2,000 steps are within 0.3% of 8,000 (Bermudan dates whose
/// exercise region reaches the barrier converge slowest: the up-and-out call below moves
/// 2.1e-3 of its price from 2,000 to 8,000 steps; with continuous exercise every case is
/// within 2e-4 of its price).
#[test]
fn trees_converge_in_steps() {
    for sp in [
        spec(Put, DO, 40.0, 40.0, 36.0, 0.0, 0.06, 0.0, 0.2, 1.0, 50),
        spec(Put, UI, 40.0, 42.0, 44.0, 0.5, 0.06, 0.0, 0.3, 1.0, 50),
        spec(Call, UO, 100.0, 100.0, 120.0, 1.0, 0.03, 0.05, 0.25, 1.0, 12),
        spec(Call, DI, 100.0, 95.0, 92.0, 0.0, 0.03, 0.06, 0.25, 1.0, 12),
    ] {
        let fine = american_barrier_binomial(&sp, 8000).unwrap();
        let mid = american_barrier_binomial(&sp, 2000).unwrap();
        let coarse = american_barrier_binomial(&sp, 250).unwrap();
        let st = sp.style;
        assert!(
            (mid - fine).abs() < 3e-3 * fine,
            "{st:?}: {mid} at 2,000, {fine} at 8,000"
        );
        assert!(
            (mid - fine).abs() < 0.5 * (coarse - fine).abs(),
            "{st:?}: 2,000 steps {mid}, 250 steps {coarse}, 8,000 steps {fine}"
        );
        let cf = american_barrier_continuous(&sp, 8000).unwrap();
        let cm = american_barrier_continuous(&sp, 2000).unwrap();
        assert!((cm - cf).abs() < 2e-4 * cf, "{st:?}: {cm} vs {cf}");
        // continuous exercise is worth at least exercise on the dates
        assert!(cf >= fine - 1e-3, "{st:?}: continuous {cf} < dates {fine}");
    }
}

#[test]
fn a_spot_past_the_barrier_is_knocked() {
    let o = spec(Put, DO, 40.0, 40.0, 41.0, 2.5, 0.06, 0.0, 0.2, 1.0, 50);
    assert_eq!(american_barrier_binomial(&o, 500).unwrap(), 2.5);
    assert_eq!(american_barrier_continuous(&o, 500).unwrap(), 2.5);
    let i = AmericanBarrierSpec { style: DI, ..o };
    assert_eq!(
        american_barrier_binomial(&i, 500).unwrap(),
        american_binomial(&o.option, 500).unwrap()
    );
    assert_eq!(
        american_barrier_continuous(&i, 500).unwrap(),
        american_continuous(&o.option, 500).unwrap()
    );
}

#[test]
fn american_barrier_is_at_least_the_european_barrier_and_intrinsic() {
    for (kind, style, h) in [
        (Put, DO, 85.0),
        (Put, UO, 120.0),
        (Call, UO, 125.0),
        (Call, DO, 80.0),
    ] {
        for q in [0.0, 0.05] {
            let sp = spec(kind, style, 100.0, 100.0, h, 0.0, 0.05, q, 0.3, 1.0, 50);
            let eu = sp.european_price();
            let am = american_barrier_continuous(&sp, 2000).unwrap();
            assert!(am >= eu - 2e-3, "{kind:?} {style:?} q {q}: {am} < european {eu}");
            assert!(am >= sp.option.payoff(100.0));
        }
    }
}

#[test]
fn validation_names_the_field() {
    let ok = spec(Put, DO, 40.0, 40.0, 36.0, 0.0, 0.06, 0.0, 0.2, 1.0, 50);
    assert!(ok.validate().is_ok());
    let reason = |s: AmericanBarrierSpec| american_barrier_binomial(&s, 100).unwrap_err().to_string();
    assert!(reason(AmericanBarrierSpec { barrier: -1.0, ..ok }).contains("barrier"));
    assert!(reason(AmericanBarrierSpec {
        barrier: f64::NAN,
        ..ok
    })
    .contains("barrier"));
    assert!(reason(AmericanBarrierSpec { rebate: -1.0, ..ok }).contains("rebate"));
    assert!(reason(AmericanBarrierSpec {
        style: Style::European,
        ..ok
    })
    .contains("not a barrier style"));
    let mut bad = ok;
    bad.option.volatility = 0.0;
    assert!(reason(bad).contains("volatility"));
    assert!(american_barrier_binomial(&ok, 0)
        .unwrap_err()
        .to_string()
        .contains("steps"));
    assert!(american_barrier_continuous(&ok, 3)
        .unwrap_err()
        .to_string()
        .contains("steps"));
}

/// One tree (no averaging) against `scripts/american_barrier_tree.py`, an independent
/// plain-Python implementation: Haug's down-and-out call (H = 95, X = 100, rebate 3, one
/// date) at 400 steps, and a down-and-out put exercisable at every step at 500 steps (the
/// edge value `max(rebate, payoff at the barrier)`), both printed by the script.
#[test]
fn one_tree_matches_the_independent_python_tree() {
    let call = spec(Call, DO, 100.0, 100.0, 95.0, 3.0, 0.08, 0.04, 0.25, 0.5, 1);
    let got = barrier_tree(&call, 400, 1).unwrap();
    assert!((got - 6.793_467_992_546).abs() < 1e-9, "{got}");
    let put = spec(Put, DO, 40.0, 40.0, 36.0, 0.0, 0.06, 0.0, 0.2, 1.0, 1);
    let got = barrier_tree(&put, 1, 500).unwrap();
    assert!((got - 2.157_582_062_540).abs() < 1e-9, "{got}");
}
