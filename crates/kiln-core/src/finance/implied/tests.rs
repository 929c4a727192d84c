use super::lbr::{self, normalised_vega, unchecked_normalised_implied_volatility};
use super::special::{erfc_cody, erfcx_cody, inverse_norm_cdf, norm_cdf};
use super::*;
use crate::finance::bsm;

const CALL: OptionType = OptionType::Call;
const PUT: OptionType = OptionType::Put;

fn kind(q: f64) -> OptionType {
    if q < 0.0 {
        PUT
    } else {
        CALL
    }
}

/// Black's implied volatility after `n` Householder steps, as the original's
/// `implied_volatility_from_a_transformed_rational_guess_with_limited_iterations`.
fn black_iv_n(price: f64, f: f64, k: f64, t: f64, q: f64, n: u32) -> Option<f64> {
    let intrinsic = (q * (f - k)).max(0.0);
    let x = (f / k).ln();
    let (mut p, mut q) = (price, q);
    if q * x > 0.0 {
        p = (p - intrinsic).max(0.0);
        q = -q;
    }
    unchecked_normalised_implied_volatility(p / (f.sqrt() * k.sqrt()), x, q, n).map(|s| s / t.sqrt())
}

struct Row {
    v: Vec<f64>,
}

impl Row {
    fn get(&self, header: &[&str], name: &str) -> f64 {
        self.v[header.iter().position(|h| *h == name).unwrap()]
    }
}

/// Relative difference, with an absolute floor for values near 0.
fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-300)
}

#[test]
fn reference_values_of_the_original() {
    let text = include_str!("test_values.csv");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: Vec<Row> = lines
        .map(|l| Row {
            v: l.split(',').map(|c| c.parse::<f64>().unwrap()).collect(),
        })
        .collect();
    assert_eq!(rows.len(), 1000);
    let mut worst = [0.0f64; 9];
    let mut checked_iv = 0;
    let mut at_intrinsic = 0;
    for r in &rows {
        let g = |n: &str| r.get(&header, n);
        let (f, k, sigma, t, q, n) = (g("F"), g("K"), g("sigma"), g("T"), g("q"), g("N") as u32);
        let (x, s, z) = (g("x"), g("s"), g("z"));
        let price = black(f, k, sigma, t, kind(q));
        worst[0] = worst[0].max(rel(price, g("black")));
        worst[1] = worst[1].max(rel(normalised_black(x, s, kind(q)), g("nblack")));
        worst[2] = worst[2].max(rel(normalised_black(x, s, CALL), g("nblack_call")));
        worst[3] = worst[3].max(rel(normalised_vega(x, s), g("nvega")));
        worst[4] = worst[4].max(rel(norm_cdf(z), g("norm_cdf")));
        match normalised_implied_volatility(g("nblack"), x, kind(q)) {
            Ok(niv) => worst[5] = worst[5].max((niv - g("niv")).abs()),
            // The original returns 0 where the price has no time value in f64 (or underflows).
            Err(NoVolatility::AtIntrinsic { .. } | NoVolatility::NotPositive { field: "price", .. }) => {
                at_intrinsic += 1;
                assert_eq!(g("niv"), 0.0, "row {:?}", r.v)
            }
            Err(e) => panic!("row {:?}: {e}", r.v),
        }
        let niv_n = unchecked_normalised_implied_volatility(g("nblack"), x, q, n).unwrap();
        worst[6] = worst[6].max((niv_n - g("niv_n")).abs());
        if t > 0.0 {
            // The original's inputs include T = 0 (no volatility to imply); kiln refuses
            // those as a non-positive maturity, checked in `every_refusal_reason`.
            checked_iv += 1;
            match implied_black_volatility(g("black"), f, k, t, kind(q)) {
                Ok(iv) => worst[7] = worst[7].max((iv - g("iv")).abs()),
                // The original returns 0 where the price has no time value in f64.
                Err(NoVolatility::AtIntrinsic { .. }) => {
                    at_intrinsic += 1;
                    assert_eq!(g("iv"), 0.0, "row {:?}", r.v)
                }
                Err(e) => panic!("row {:?}: {e}", r.v),
            }
            let iv_n = black_iv_n(g("black"), f, k, t, q, n).unwrap();
            worst[8] = worst[8].max((iv_n - g("iv_n")).abs());
        }
    }
    eprintln!("worst differences from the original (rel: black, nblack, nblack_call, nvega, norm_cdf; abs: niv, niv_n, iv, iv_n): {worst:?}; {checked_iv} implied volatilities; {at_intrinsic} quotes at intrinsic in f64 (the original returns 0)");
    for (i, w) in worst.iter().enumerate() {
        // Measured: at most 2 ulp of the reference (4.4e-16).
        assert!(*w <= 1e-15, "column {i}: worst difference {w:e}");
    }
}

#[test]
fn python_port_unit_values() {
    // py_lets_be_rational's tests/test_public_functions.py.
    assert!((black(100.0, 100.0, 0.2, 0.5, CALL) - 5.637197779701664).abs() < 1e-12);
    let iv = implied_black_volatility(5.637197779701664, 100.0, 100.0, 0.5, CALL).unwrap();
    assert!((iv - 0.2).abs() < 1e-12);
    let x = (100.0f64 / 95.0).ln();
    let s = 0.3 * 0.5f64.sqrt();
    assert!((normalised_black(x, s, PUT) - 0.061296663817558904).abs() < 1e-12);
    assert!((normalised_black(x, s, CALL) - 0.11259558142181655).abs() < 1e-12);
    assert!((normalised_vega(0.0, 0.0) - 0.3989422804014327).abs() < 1e-12);
    assert!((normalised_vega(0.0, 2.937528694999807) - 0.13566415614561067).abs() < 1e-12);
    let b = normalised_black(0.1, 0.23232323888, PUT);
    assert!((normalised_implied_volatility(b, 0.1, PUT).unwrap() - 0.23232323888).abs() < 1e-12);
    assert!((norm_cdf(0.302569738839) - 0.618891110513).abs() < 1e-12);
}

#[test]
fn special_functions_agree_with_libm() {
    let mut worst: f64 = 0.0;
    for i in -2000..=2000 {
        let x = i as f64 * 0.013;
        worst = worst.max(rel(erfc_cody(x), libm::erfc(x)));
        // erfcx(x) = exp(x²) erfc(x) where both sides are well inside f64's range.
        if x.abs() < 5.0 {
            let e = erfcx_cody(x);
            assert!(rel(e, (x * x).exp() * libm::erfc(x)) < 1e-14, "erfcx({x})");
        }
    }
    assert!(worst < 1e-14, "erfc: worst relative difference {worst:e}");
    for u in [1e-300, 1e-20, 1e-5, 0.02, 0.3, 0.5, 0.77, 0.999, 1.0 - 1e-12] {
        let z = inverse_norm_cdf(u);
        // Phi amplifies the quantile's relative error by |z| (about 37 at 1e-300).
        assert!(rel(norm_cdf(z), u) < 1e-12, "Phi(Phi^-1({u})) = {}", norm_cdf(z));
    }
}

/// The round trip over Jäckel's ranges: moneyness `x = ln(F/K)` in `[-10, 10]`, total
/// volatility `s` in `(0, 10]`, calls and puts, in normalised units (so `s` is `sigma` at
/// `T = 1`). A point is left out only where its price is not representable: it underflows
/// to 0 or a subnormal, or it equals the intrinsic value or the upper bound in f64. Where
/// the price is representable but so flat in `s` that rounding it to f64 alone moves the
/// volatility by more than 1e-12 (`eps b / vega`: high total volatility, deep in the
/// money), the check is the attainable precision instead, `8 eps b / vega`, and such
/// points are counted.
#[test]
fn round_trip_over_jaeckels_ranges() {
    let xs: Vec<f64> = (0..=400).map(|i| -10.0 + i as f64 * 0.05).collect();
    let mut ss: Vec<f64> = (1..=200).map(|j| j as f64 * 0.05).collect();
    ss.extend((0..40).map(|j| 10f64.powf(-8.0 + j as f64 * 0.165)));
    let (mut points, mut skipped, mut conditioned) = (0usize, [0usize; 3], 0usize);
    let (mut worst, mut worst_at) = (0.0f64, (0.0, 0.0, CALL));
    let mut worst_conditioned: f64 = 0.0;
    let mut over = 0usize;
    for &x in &xs {
        for &s in &ss {
            for k in [CALL, PUT] {
                let b = normalised_black(x, s, k);
                let q = k.sign();
                let intrinsic = lbr::normalised_intrinsic(x, q);
                let bound = (0.5 * q * x).exp();
                if b < f64::MIN_POSITIVE {
                    skipped[0] += 1;
                    continue;
                }
                if b <= intrinsic {
                    skipped[1] += 1;
                    continue;
                }
                if b >= bound {
                    skipped[2] += 1;
                    continue;
                }
                points += 1;
                let got = normalised_implied_volatility(b, x, k)
                    .unwrap_or_else(|e| panic!("x = {x}, s = {s}, {k:?}, b = {b}: {e}"));
                let err = (got - s).abs();
                let attainable = 8.0 * f64::EPSILON * b / normalised_vega(x, s);
                if attainable > 1e-12 {
                    conditioned += 1;
                    worst_conditioned = worst_conditioned.max(err / attainable);
                    over += usize::from(err > 1e-12);
                    assert!(
                        err <= attainable.max(1e-12),
                        "x = {x}, s = {s}, {k:?}: {got} (error {err:e}, attainable {attainable:e})"
                    );
                } else {
                    if err > worst {
                        worst = err;
                        worst_at = (x, s, k);
                    }
                    assert!(err <= 1e-12, "x = {x}, s = {s}, {k:?}: {got} (error {err:e})");
                }
            }
        }
    }
    eprintln!(
        "round trip: {} grid points, {points} solved; left out: {} underflow, {} at intrinsic, {} at the bound; \
         worst |s - s^| = {worst:e} at {worst_at:?}; {conditioned} points where 1e-12 is below the \
         attainable precision, {over} of them above 1e-12, worst error / attainable = {worst_conditioned:.3}",
        xs.len() * ss.len() * 2,
        skipped[0],
        skipped[1],
        skipped[2]
    );
}

/// The spot form, with rates and dividends of both signs: prices from the discounted Black
/// formula on `F = S e^{(r-q)T}` (checked against kiln's [`bsm`]), volatilities back to the
/// attainable precision (`8 eps price / vega`, at least 1e-12).
#[test]
fn spot_form_inverts_bsm() {
    let mut n = 0;
    for kind in [CALL, PUT] {
        for &(s, k) in &[
            (100.0, 100.0),
            (100.0, 60.0),
            (100.0, 160.0),
            (37.5, 41.0),
            (1e4, 9e3),
        ] {
            for &(r, q) in &[(0.0, 0.0), (0.05, 0.02), (-0.01, 0.03), (0.12, -0.02)] {
                for &t in &[1.0 / 365.0, 0.25, 1.0, 7.5] {
                    for &v in &[0.05, 0.2, 0.6, 1.5] {
                        let mut b = bsm(kind, s, k, r, q, v, t);
                        let price = (-r * t).exp() * black(s * ((r - q) * t).exp(), k, v, t, kind);
                        assert!((price - b.price).abs() <= 1e-12 * s, "{price} vs bsm {}", b.price);
                        b.price = price;
                        let got = implied_volatility(b.price, s, k, t, r, q, kind);
                        let attainable = (8.0 * f64::EPSILON * b.price / b.vega).max(1e-12);
                        match got {
                            Ok(iv) => {
                                n += 1;
                                assert!(
                                    (iv - v).abs() <= attainable,
                                    "{kind:?} S={s} K={k} r={r} q={q} T={t} v={v}: {iv}"
                                );
                            }
                            // Deep out of the money at a day's maturity: the price underflows.
                            Err(NoVolatility::NotPositive { field: "price", .. }) => assert!(b.price == 0.0),
                            // Deep in the money at a day's maturity: no time value in f64.
                            Err(NoVolatility::AtIntrinsic { intrinsic, .. }) => {
                                assert!((b.price - intrinsic).abs() <= 1e-14 * s.max(k))
                            }
                            Err(e) => panic!(
                                "{kind:?} S={s} K={k} r={r} q={q} T={t} v={v}, price {}: {e}",
                                b.price
                            ),
                        }
                    }
                }
            }
        }
    }
    assert!(n > 550, "{n} solved");
}

#[test]
fn every_refusal_reason() {
    let iv =
        |p: f64, s: f64, k: f64, t: f64, r: f64, q: f64, kind| implied_volatility(p, s, k, t, r, q, kind);
    // Non-finite inputs, each named.
    for (i, field) in ["price", "spot", "strike", "maturity", "rate", "dividend"]
        .iter()
        .enumerate()
    {
        let mut a = [5.0, 100.0, 100.0, 1.0, 0.01, 0.0];
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            a[i] = bad;
            let e = iv(a[0], a[1], a[2], a[3], a[4], a[5], CALL).unwrap_err();
            assert!(
                matches!(e, NoVolatility::NotFinite { field: f, .. } if f == *field),
                "{e:?}"
            );
            assert_eq!(e.field(), *field);
            assert!(e.to_string().contains(field), "{e}");
        }
    }
    // Non-positive price, spot, strike, maturity.
    for (i, field) in ["price", "spot", "strike", "maturity"].iter().enumerate() {
        for bad in [0.0, -1.0] {
            let mut a = [5.0, 100.0, 100.0, 1.0];
            a[i] = bad;
            let e = iv(a[0], a[1], a[2], a[3], 0.01, 0.0, PUT).unwrap_err();
            assert_eq!(e, NoVolatility::NotPositive { field, value: bad });
            assert_eq!(e.code(), "not_positive");
            assert!(e.to_string().contains("must be > 0"), "{e}");
        }
    }
    // Below intrinsic, with the discounted bound: S e^{-qT} - K e^{-rT}.
    let intrinsic = 120.0 * (-0.02f64).exp() - 100.0 * (-0.05f64).exp();
    let e = iv(intrinsic - 0.01, 120.0, 100.0, 1.0, 0.05, 0.02, CALL).unwrap_err();
    match e {
        NoVolatility::BelowIntrinsic {
            price,
            intrinsic: got,
        } => {
            assert_eq!(price, intrinsic - 0.01);
            assert!((got - intrinsic).abs() < 1e-12, "{got} vs {intrinsic}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.code(), "below_intrinsic");
    assert!(e.to_string().contains("below the intrinsic value"), "{e}");
    // A put's intrinsic value: K e^{-rT} - S e^{-qT}.
    let e = iv(1.0, 80.0, 100.0, 1.0, 0.0, 0.0, PUT).unwrap_err();
    assert_eq!(
        e,
        NoVolatility::BelowIntrinsic {
            price: 1.0,
            intrinsic: 20.0
        }
    );
    // Exactly at intrinsic: no time value.
    let e = iv(20.0, 80.0, 100.0, 1.0, 0.0, 0.0, PUT).unwrap_err();
    assert_eq!(
        e,
        NoVolatility::AtIntrinsic {
            price: 20.0,
            intrinsic: 20.0
        }
    );
    assert_eq!(e.code(), "at_intrinsic");
    // At or above the upper bound: the discounted forward (call), the discounted strike (put).
    let e = iv(100.0 * (-0.02f64).exp(), 100.0, 90.0, 1.0, 0.05, 0.02, CALL).unwrap_err();
    assert!(
        matches!(
            e,
            NoVolatility::AboveUpperBound {
                bound_name: "discounted forward",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("upper bound"), "{e}");
    let e = iv(96.0, 100.0, 100.0, 1.0, 0.05, 0.0, PUT).unwrap_err();
    match e {
        NoVolatility::AboveUpperBound {
            price,
            bound,
            bound_name,
        } => {
            assert_eq!((price, bound_name), (96.0, "discounted strike"));
            assert!((bound - 100.0 * (-0.05f64).exp()).abs() < 1e-12);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.code(), "above_upper_bound");
    // A forward or discount factor out of f64's range.
    let e = iv(5.0, 100.0, 100.0, 100.0, 10.0, 0.0, CALL).unwrap_err();
    assert_eq!(e.code(), "out_of_range");
    let e = iv(5.0, 100.0, 100.0, 100.0, 0.0, -10.0, CALL).unwrap_err();
    assert!(
        matches!(e, NoVolatility::OutOfRange { what: "forward", .. }),
        "{e:?}"
    );
    // The Black and normalised forms refuse the same way, with their own bounds.
    let e = implied_black_volatility(101.0, 100.0, 100.0, 1.0, CALL).unwrap_err();
    assert_eq!(
        e,
        NoVolatility::AboveUpperBound {
            price: 101.0,
            bound: 100.0,
            bound_name: "forward"
        }
    );
    let e = implied_black_volatility(5.0, 100.0, 100.0, 0.0, CALL).unwrap_err();
    assert_eq!(
        e,
        NoVolatility::NotPositive {
            field: "maturity",
            value: 0.0
        }
    );
    let e = normalised_implied_volatility(0.01, 0.5, CALL).unwrap_err();
    assert_eq!(e.code(), "below_intrinsic");
    let e = normalised_implied_volatility(2.0, 0.5, PUT).unwrap_err();
    assert_eq!(e.code(), "above_upper_bound");
}

#[test]
fn book_matches_quote_by_quote() {
    // Enough quotes for several chunks, a ragged last one, and refusals mixed in.
    let n = 3 * BOOK_CHUNK + 17;
    let quotes: Vec<Quote> = (0..n)
        .map(|i| {
            let kind = if i % 2 == 0 { CALL } else { PUT };
            let (s, k, t, r, q) = (
                100.0,
                60.0 + (i % 80) as f64,
                0.1 + (i % 7) as f64 * 0.3,
                0.03,
                0.01,
            );
            let v = 0.1 + (i % 13) as f64 * 0.05;
            let price = if i % 101 == 0 {
                -1.0
            } else {
                bsm(kind, s, k, r, q, v, t).price
            };
            Quote {
                kind,
                price,
                spot: s,
                strike: k,
                maturity: t,
                rate: r,
                dividend: q,
            }
        })
        .collect();
    let book = implied_volatility_book(&quotes);
    assert_eq!(book.len(), n);
    for (q, got) in quotes.iter().zip(&book) {
        assert_eq!(*got, q.implied_volatility());
    }
    assert!(book.iter().filter(|r| r.is_err()).count() >= n / 101);
    assert!(implied_volatility_book(&[]).is_empty());
}

/// Extreme inputs (strikes and spots across 1e-200..1e200, prices anywhere between the
/// bounds and outside them): every answer is a finite positive volatility or a reason, and
/// a volatility reprices the quote.
#[test]
fn extreme_inputs_give_a_volatility_or_a_reason() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut u = || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let (mut solved, mut refused) = (0, 0);
    let mut reasons = std::collections::BTreeMap::new();
    for _ in 0..20_000 {
        let kind = if u() < 0.5 { CALL } else { PUT };
        let spot = 10f64.powf(400.0 * u() - 200.0);
        let strike = spot
            * 10f64.powf(if u() < 0.5 {
                8.0 * u() - 4.0
            } else {
                600.0 * u() - 300.0
            });
        if !(strike.is_normal() && strike.is_finite()) {
            continue;
        }
        let maturity = 10f64.powf(8.0 * u() - 6.0);
        let (rate, dividend) = (u() - 0.5, 0.2 * u() - 0.1);
        let df = (-rate * maturity).exp();
        let spot_df = spot * (-dividend * maturity).exp();
        let intrinsic = (kind.sign() * (spot_df - strike * df)).max(0.0);
        let bound = if kind == CALL { spot_df } else { strike * df };
        let w = 1.2 * u() - 0.1;
        let price = intrinsic + w * (bound - intrinsic);
        match implied_volatility(price, spot, strike, maturity, rate, dividend, kind) {
            Ok(v) => {
                solved += 1;
                assert!(
                    v.is_finite() && v > 0.0,
                    "{kind:?} {price} {spot} {strike} {maturity}: {v}"
                );
                let forward = spot * ((rate - dividend) * maturity).exp();
                let again = df * black(forward, strike, v, maturity, kind);
                // Near the subnormal range prices carry fewer digits: finiteness only.
                if price > 1e-280 && strike.min(spot) > 1e-280 {
                    assert!(
                        (again - price).abs() <= 1e-9 * price.max(bound * 1e-6),
                        "{kind:?} price {price:e} spot {spot:e} strike {strike:e} T {maturity}: \
                         sigma {v} reprices to {again:e}"
                    );
                }
            }
            Err(e) => {
                refused += 1;
                *reasons.entry(e.code()).or_insert(0) += 1;
                // Strictly inside the bounds, only prices whose time value is lost in f64, or
                // that lie within rounding (of the move to forward terms) of the upper
                // bound, are refused.
                if price > intrinsic && price < bound {
                    let near_bound = bound - price <= 16.0 * f64::EPSILON * bound;
                    assert!(
                        matches!(e, NoVolatility::AtIntrinsic { .. })
                            || (near_bound && matches!(e, NoVolatility::AboveUpperBound { .. })),
                        "{kind:?} price {price:e} spot {spot:e} strike {strike:e} T {maturity} r {rate} q {dividend} intrinsic {intrinsic:e} bound {bound:e}: {e}"
                    );
                }
            }
        }
    }
    eprintln!("extreme inputs: {solved} solved, {refused} refused: {reasons:?}");
    assert!(solved > 10_000, "{solved} solved");
}
