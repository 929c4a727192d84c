use super::*;
use kiln_core::finance::american::{american_barrier_binomial, AmericanSpec};
use kiln_core::finance::OptionType::{self, Call, Put};
use kiln_core::finance::Style::{self, BarrierDownIn, BarrierDownOut, BarrierUpIn, BarrierUpOut};

#[allow(clippy::too_many_arguments)] // an option's terms
fn spec(
    kind: OptionType,
    style: Style,
    s: f64,
    k: f64,
    h: f64,
    rebate: f64,
    q: f64,
    v: f64,
) -> AmericanBarrierSpec {
    AmericanBarrierSpec {
        option: AmericanSpec {
            option_type: kind,
            spot: s,
            strike: k,
            rate: 0.06,
            dividend: q,
            volatility: v,
            maturity: 1.0,
            exercise_dates: 50,
        },
        style,
        barrier: h,
        rebate,
    }
}

fn mc(paths: u64, seed: u64) -> McParams {
    McParams {
        paths,
        seed,
        ..McParams::default()
    }
}

/// Longstaff-Schwartz against the tree of the same exercise dates. The estimator is biased
/// low (the fitted rule is suboptimal), here more than for vanillas: the quadratic basis
/// cannot follow a continuation value that falls to the rebate at the barrier, worst where
/// the exercise region reaches it (the down-and-out put with K = 44 > H = 33, the
/// up-and-out call with K = 38 < H = 50); the barrier is also watched on the dates only,
/// with Broadie-Glasserman-Kou's correction. Measured at 2^15 paths: 1.2% below the tree
/// (1.6 standard errors) for the up-and-out put, 0.8% to 3.7% below for the others. So: no
/// more than 4 standard errors above the tree, no more than 5% (plus 4 standard errors)
/// below it, and the out-options far from the vanilla estimator (the barrier counts).
#[test]
fn lsm_is_within_its_bias_of_the_tree() {
    for sp in [
        spec(Put, BarrierUpOut, 40.0, 40.0, 46.0, 0.0, 0.0, 0.2),
        spec(Put, BarrierDownOut, 40.0, 44.0, 33.0, 0.5, 0.0, 0.3),
        spec(Call, BarrierUpOut, 40.0, 38.0, 50.0, 0.0, 0.08, 0.25),
        spec(Put, BarrierUpIn, 40.0, 40.0, 44.0, 0.0, 0.0, 0.2),
        spec(Put, BarrierDownIn, 40.0, 40.0, 37.0, 0.25, 0.0, 0.2),
        spec(Call, BarrierDownIn, 40.0, 40.0, 36.0, 0.0, 0.08, 0.3),
    ] {
        let tree = american_barrier_binomial(&sp, 2000).unwrap();
        let m = mc(1 << 15, 11);
        let r = price_american_barrier(&sp, &m, 0).unwrap();
        let (kind, style, se) = (sp.option.option_type, sp.style, r.std_error);
        let what = format!("{kind:?} {style:?}: lsm {} (se {se}), tree {tree}", r.price);
        assert!(se > 0.0 && se < 0.02 * tree.max(0.5), "{what}");
        assert!(r.price <= tree + 4.0 * se, "{what}");
        assert!(r.price >= 0.95 * tree - 4.0 * se, "{what}");
        if style == BarrierUpOut && kind == Put {
            assert!((r.price - tree).abs() < 0.015 * tree + 4.0 * se, "{what}");
        }
        if sp.is_in() {
            continue;
        }
        let vanilla = super::super::american::price_american(&sp.option, &m, 0).unwrap();
        assert!(
            (vanilla.price - r.price).abs() > 10.0 * se,
            "{what}; vanilla {vanilla:?}"
        );
    }
}

/// Far barriers: the out-option is the vanilla engine's price to the bit (no path is
/// knocked), the in-option its discounted rebate.
#[test]
fn a_far_barrier_is_the_vanilla_estimator() {
    let out = spec(Put, BarrierDownOut, 40.0, 40.0, 1.0, 0.0, 0.0, 0.2);
    let m = mc(3000, 5);
    let a = price_american_barrier(&out, &m, 2).unwrap();
    let b = super::super::american::price_american(&out.option, &m, 2).unwrap();
    assert_eq!(a.price.to_bits(), b.price.to_bits());
    assert_eq!(a.std_error.to_bits(), b.std_error.to_bits());
    let inn = AmericanBarrierSpec {
        style: BarrierDownIn,
        rebate: 2.0,
        ..out
    };
    let r = price_american_barrier(&inn, &m, 2).unwrap();
    let want = 2.0 * (-0.06f64).exp();
    assert!(
        (r.price - want).abs() < 1e-12 && r.std_error < 1e-8,
        "{r:?} vs {want}"
    );
}

#[test]
fn knocked_spots_bits_and_errors() {
    let out = spec(Put, BarrierDownOut, 40.0, 40.0, 41.0, 1.5, 0.0, 0.2);
    let m = mc(2000, 3);
    assert_eq!(price_american_barrier(&out, &m, 0).unwrap().price, 1.5);
    let inn = AmericanBarrierSpec {
        style: BarrierDownIn,
        ..out
    };
    let a = price_american_barrier(&inn, &m, 0).unwrap();
    let b = super::super::american::price_american(&inn.option, &m, 0).unwrap();
    assert_eq!(a.price.to_bits(), b.price.to_bits());
    // the bits do not depend on the threads
    let sp = spec(Put, BarrierUpIn, 40.0, 40.0, 44.0, 0.0, 0.0, 0.2);
    let m = mc(3 * 1024 + 77, 9);
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let two = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let a = one.install(|| price_american_barrier(&sp, &m, 0)).unwrap();
    let b = two.install(|| price_american_barrier(&sp, &m, 0)).unwrap();
    assert_eq!(a.price.to_bits(), b.price.to_bits());
    // bad input names the field
    let bad = AmericanBarrierSpec { barrier: -1.0, ..sp };
    let e = price_american_barrier(&bad, &m, 0).unwrap_err().to_string();
    assert!(e.contains("barrier"), "{e}");
    let e = price_american_barrier(&sp, &mc(1, 0), 0).unwrap_err().to_string();
    assert!(e.contains("paths"), "{e}");
    let r = price_american_barrier_portfolio(&[sp, bad], &m, 4);
    assert!(r[0].is_ok() && r[1].is_err());
}
