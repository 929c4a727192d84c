use super::*;

/// Legs on futures (Black's model: the forward is the futures price).
fn futures(f1: f64, f2: f64, r: f64, t: f64, s1: f64, s2: f64, rho: f64) -> TwoAssets {
    TwoAssets {
        f1,
        f2,
        v1: s1 * t.sqrt(),
        v2: s2 * t.sqrt(),
        rho,
        df: (-r * t).exp(),
    }
}

#[test]
fn kirk_reproduces_haugs_table() {
    // Haug, "The Complete Guide to Option Pricing Formulas" (1st ed., 1998), p. 60: Kirk's
    // spread call on two futures, as QuantLib's test-suite/spreadoption.cpp tabulates it
    // (F1, F2, X, r, sigma1, sigma2, rho, days on an Actual/360 basis, value), 4 decimals.
    let table = [
        (28.0, 20.0, 7.0, 0.05, 0.29, 0.36, 0.42, 90.0, 2.1670),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.20, -0.5, 36.0, 4.7530),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.20, 0.0, 36.0, 3.7970),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.20, 0.5, 36.0, 2.5537),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.20, -0.5, 180.0, 10.7517),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.20, 0.0, 180.0, 8.7020),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.20, 0.5, 180.0, 6.0257),
        (122.0, 120.0, 3.0, 0.10, 0.25, 0.20, -0.5, 36.0, 5.4275),
        (122.0, 120.0, 3.0, 0.10, 0.25, 0.20, 0.0, 36.0, 4.3712),
        (122.0, 120.0, 3.0, 0.10, 0.25, 0.20, 0.5, 36.0, 3.0086),
        (122.0, 120.0, 3.0, 0.10, 0.25, 0.20, -0.5, 180.0, 12.1941),
        (122.0, 120.0, 3.0, 0.10, 0.25, 0.20, 0.0, 180.0, 9.9340),
        (122.0, 120.0, 3.0, 0.10, 0.25, 0.20, 0.5, 180.0, 7.0067),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.25, -0.5, 36.0, 5.4061),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.25, 0.0, 36.0, 4.3451),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.25, 0.5, 36.0, 2.9723),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.25, -0.5, 180.0, 12.1483),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.25, 0.0, 180.0, 9.8780),
        (122.0, 120.0, 3.0, 0.10, 0.20, 0.25, 0.5, 180.0, 6.9284),
    ];
    for (f1, f2, k, r, s1, s2, rho, days, want) in table {
        let a = futures(f1, f2, r, days / 360.0, s1, s2, rho);
        let got = kirk(OptionType::Call, &a, k);
        assert!(
            (got - want).abs() < 1e-4,
            "{f1} {f2} {k} {s1} {s2} {rho} {days}: {got} vs Haug {want}"
        );
        // Bjerksund-Stensland is a lower bound within a few cents of it here
        let bs = bjerksund_stensland(OptionType::Call, &a, k);
        assert!((bs - got).abs() < 0.05, "{bs} vs Kirk {got}");
    }
}

#[test]
fn bjerksund_stensland_reproduces_the_reference_put() {
    // QuantLib's test-suite/basketoption.cpp (testBjerksundStenslandSpreadEngine): a put
    // on F1 - F2 with F1 = 100, F2 = 110, K = 5, r = 5%, T = 1, sigma = 25% and 35%,
    // rho = 0.75; reference value computed there with the PyFENG 0.2.6 package.
    let a = futures(100.0, 110.0, 0.05, 1.0, 0.25, 0.35, 0.75);
    let put = bjerksund_stensland(OptionType::Put, &a, 5.0);
    assert!((put - 17.850835947276213).abs() < 1e-12, "{put}");
    // parity, exactly (the put is the complement of the call's exercise rule)
    let call = bjerksund_stensland(OptionType::Call, &a, 5.0);
    assert!((call - put - a.df * (100.0 - 110.0 - 5.0)).abs() < 1e-12);
}

#[test]
fn both_reproduce_margrabe_at_zero_strike() {
    // Exchange options, S1 = 22, S2 = 20, q1 = 6%, q2 = 4%, r = 10%, sigma1 = 20%: QuantLib's
    // test-suite/margrabeoption.cpp (testEuroExchangeTwoAssets; Haug's exchange-option
    // example and its neighbours), 3 decimals: (T, sigma2, rho, value).
    let table = [
        (0.10, 0.15, -0.5, 2.125),
        (0.10, 0.20, -0.5, 2.199),
        (0.10, 0.25, -0.5, 2.283),
        (0.10, 0.15, 0.0, 2.045),
        (0.10, 0.20, 0.0, 2.091),
        (0.10, 0.25, 0.0, 2.152),
        (0.10, 0.15, 0.5, 1.974),
        (0.10, 0.20, 0.5, 1.989),
        (0.10, 0.25, 0.5, 2.019),
        (0.50, 0.15, -0.5, 2.762),
        (0.50, 0.20, -0.5, 2.989),
        (0.50, 0.25, -0.5, 3.228),
        (0.50, 0.15, 0.0, 2.479),
        (0.50, 0.20, 0.0, 2.650),
        (0.50, 0.25, 0.0, 2.847),
        (0.50, 0.15, 0.5, 2.138),
        (0.50, 0.20, 0.5, 2.231),
        (0.50, 0.25, 0.5, 2.374),
    ];
    let r: f64 = 0.10;
    for (t, s2, rho, want) in table {
        let a = TwoAssets {
            f1: 22.0 * ((r - 0.06) * t).exp(),
            f2: 20.0 * ((r - 0.04) * t).exp(),
            v1: 0.20 * f64::sqrt(t),
            v2: s2 * f64::sqrt(t),
            rho,
            df: (-r * t).exp(),
        };
        let m = margrabe(&a);
        assert!((m - want).abs() < 1e-3, "{t} {s2} {rho}: {m} vs {want}");
        for (name, got) in [
            ("kirk", kirk(OptionType::Call, &a, 0.0)),
            (
                "bjerksund-stensland",
                bjerksund_stensland(OptionType::Call, &a, 0.0),
            ),
        ] {
            assert!((got - m).abs() <= 1e-14 * m, "{name}: {got} vs Margrabe {m}");
        }
        // the put on X1 - X2 is the exchange the other way
        let put = margrabe(&a.swapped());
        for got in [
            kirk(OptionType::Put, &a, 0.0),
            bjerksund_stensland(OptionType::Put, &a, 0.0),
        ] {
            assert!((got - put).abs() <= 1e-13 * put, "{got} vs {put}");
        }
    }
}

#[test]
fn negative_strikes_exchange_the_legs() {
    // a call on X1 - X2 - K with K < 0 is a put on X2 - X1 with strike -K
    let a = futures(100.0, 104.0, 0.03, 0.75, 0.3, 0.2, 0.4);
    for f in [kirk, bjerksund_stensland] {
        for k in [-20.0, -3.0, -0.5] {
            let call = f(OptionType::Call, &a, k);
            let swapped_put = f(OptionType::Put, &a.swapped(), -k);
            assert!((call - swapped_put).abs() < 1e-12, "{k}: {call} vs {swapped_put}");
            let put = f(OptionType::Put, &a, k);
            assert!((call - put - a.df * (a.f1 - a.f2 - k)).abs() < 1e-12);
            assert!(call > 0.0 && put > 0.0);
        }
    }
    // no volatility: the discounted intrinsic value
    let flat = futures(100.0, 90.0, 0.03, 1.0, 0.0, 0.0, 0.0);
    for f in [kirk, bjerksund_stensland] {
        assert!((f(OptionType::Call, &flat, 4.0) - flat.df * 6.0).abs() < 1e-12);
        assert!((f(OptionType::Call, &flat, -4.0) - flat.df * 14.0).abs() < 1e-12);
        assert_eq!(f(OptionType::Put, &flat, 4.0), 0.0);
    }
}

#[test]
fn the_control_pays_on_the_rule() {
    let a = futures(100.0, 95.0, 0.02, 1.0, 0.3, 0.25, 0.6);
    for kind in [OptionType::Call, OptionType::Put] {
        for k in [-8.0, 0.0, 5.0] {
            let (c, mean) = SpreadControl::new(kind, &a, k);
            assert_eq!(mean, bjerksund_stensland_raw(kind, &a, k));
            // where the spread is far in the money the rule exercises a call and not a put
            let (deep_call, deep_put) = (c.payoff(300.0, 10.0), c.payoff(10.0, 300.0));
            match kind {
                OptionType::Call => assert!(deep_call == 290.0 - k && deep_put == 0.0, "{k}"),
                OptionType::Put => assert!(deep_call == 0.0 && deep_put == 290.0 + k, "{k}"),
            }
        }
    }
}
