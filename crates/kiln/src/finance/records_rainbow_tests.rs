//! `style = "american_rainbow"` records.

use super::*;
use serde_json::json;

fn parse(v: Value) -> std::result::Result<BookOption, RecordError> {
    book_option(normalize_record(v)?, 16)
}

/// A max-call on two assets, `extra` overriding or removing (null) fields.
fn rec(extra: Value) -> std::result::Result<BookOption, RecordError> {
    let mut base = json!({"style": "american_rainbow", "option_type": "call", "strike": 100.0,
        "rate": 0.05, "maturity": 3.0, "average": "max", "fixings": 9,
        "assets": [{"spot": 100.0, "volatility": 0.2, "dividend": 0.1, "weight": 1.0, "name": "a"},
                   {"spot": 90.0, "volatility": 0.2, "dividend": 0.1, "weight": 1.0}],
        "correlation": [[1.0, 0.0], [0.0, 1.0]]});
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    parse(base)
}

#[test]
fn american_rainbow_records_parse_to_the_spec() {
    let o = rec(json!({})).unwrap();
    assert_eq!(o.kind(), "american rainbow");
    o.validate().unwrap();
    let BookOption::AmericanRainbow(r) = &o else {
        panic!("{o:?}")
    };
    assert_eq!((r.kind, r.extreme), (OptionType::Call, Extreme::Max));
    assert_eq!(
        (r.strike, r.rate, r.maturity, r.exercise_dates),
        (100.0, 0.05, 3.0, 9)
    );
    assert_eq!(r.assets.len(), 2);
    assert_eq!(r.assets[0].name.as_deref(), Some("a"));
    assert_eq!((r.assets[1].spot, r.assets[1].dividend), (90.0, 0.1));
    assert_eq!(r.correlation, vec![1.0, 0.0, 0.0, 1.0]);
    // a row-major correlation, a min-put, dates as a float with no fraction
    let o = rec(json!({"option_type": "put", "average": "min", "fixings": 4.0,
        "correlation": [1.0, 0.5, 0.5, 1.0]}))
    .unwrap();
    let BookOption::AmericanRainbow(r) = &o else {
        panic!("{o:?}")
    };
    assert_eq!(
        (r.kind, r.extreme, r.exercise_dates),
        (OptionType::Put, Extreme::Min, 4)
    );
    assert_eq!(r.correlation, vec![1.0, 0.5, 0.5, 1.0]);
    // one asset needs no correlation
    let one = rec(
        json!({"assets": [{"spot": 100.0, "volatility": 0.2, "weight": 1.0}],
        "correlation": null}),
    )
    .unwrap();
    one.validate().unwrap();
    // normalizing leaves it alone (no dividend or fixings default)
    let raw = json!({"style": "american_rainbow", "average": "max", "strike": 1.0});
    let n = normalize_record(raw).unwrap();
    assert!(n.get("dividend").is_none() && n.get("fixings").is_none(), "{n}");
    // Monte Carlo only
    let e = o.unsupported(Method::Analytic).unwrap();
    assert!(
        e.contains("no closed form or tree") && e.contains("use method mc"),
        "{e}"
    );
    assert!(o.unsupported(Method::MonteCarlo).is_none());
}

#[test]
fn bad_american_rainbow_records_say_what_is_accepted() {
    let err = |extra: Value| rec(extra).unwrap_err().0;
    let e = err(json!({"fixings": null}));
    assert!(
        e.contains("needs `fixings`") && e.contains("no continuous-exercise price"),
        "{e}"
    );
    for bad in [json!(0), json!(2.5), json!("many")] {
        let e = err(json!({ "fixings": bad }));
        assert!(e.contains("whole number >= 1"), "{e}");
    }
    let e = err(json!({"average": "arithmetic"}));
    assert!(e.contains("`max` or `min`") && e.contains("arithmetic"), "{e}");
    let e = err(json!({"average": null}));
    assert!(
        e.contains("needs `average`") && e.contains("`max` or `min`"),
        "{e}"
    );
    // the basket record's asset and correlation errors
    let e = err(json!({"assets": [{"spot": 100.0, "volatility": 0.2}]}));
    assert!(e.contains("assets[0] needs a number `weight`"), "{e}");
    let e = err(json!({"assets": [{"spot": 1.0, "volatility": 0.2, "weight": 1.0, "beta": 1}]}));
    assert!(e.contains("unknown field `beta`"), "{e}");
    let e = err(json!({"correlation": null}));
    assert!(
        e.contains("an American rainbow of 2 assets needs `correlation`"),
        "{e}"
    );
    let e = err(json!({"correlation": [[1.0, 0.5]]}));
    assert!(e.contains("correlation must be 2 x 2"), "{e}");
    // misplaced fields: its own spot, volatility, dividend, barrier, Heston parameters
    for (k, v) in [
        ("spot", json!(100.0)),
        ("volatility", json!(0.2)),
        ("dividend", json!(0.0)),
        ("barrier", json!(120.0)),
        ("kappa", json!(1.0)),
    ] {
        let e = err(json!({ k: v }));
        assert!(
            e.contains("takes option_type, strike, rate, maturity, average, fixings") && e.contains(k),
            "{k}: {e}"
        );
    }
    let e = normalize_record(json!({"style": "american_rainbow", "sigma": 0.2})).unwrap_err();
    assert!(e.0.contains("unknown field `sigma`"), "{e}");
    // values checked by validate: a weight <= 0, a correlation that is not a correlation
    let e = rec(
        json!({"assets": [{"spot": 100.0, "volatility": 0.2, "weight": 1.0},
        {"spot": 90.0, "volatility": 0.2, "weight": -1.0}]}),
    )
    .unwrap()
    .validate()
    .unwrap_err()
    .to_string();
    assert!(e.contains("weight = -1"), "{e}");
    let e = rec(json!({"fixings": 100001}))
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(e.contains("exercise_dates = 100001"), "{e}");
    // the rainbow's fields on another style
    let e = parse(
        json!({"style": "american", "spot": 1.0, "strike": 1.0, "rate": 0.0,
        "volatility": 0.2, "maturity": 1.0, "average": "max"}),
    )
    .unwrap_err();
    assert!(e.0.contains("american_rainbow"), "{e}");
}
