//! Tests of the Heston closed form: a published reference value, the Black-Scholes limit,
//! an independent inversion (Heston's own two-probability form) and the validation messages.

use super::*;
use crate::finance::analytic::bsm;

/// Fang and Oosterlee (2008), "A novel pricing method for European options based on
/// Fourier-cosine series expansions", section 5.2 (Heston, T = 1).
fn fang_oosterlee() -> HestonParams {
    HestonParams {
        kappa: 1.5768,
        theta: 0.0398,
        xi: 0.5751,
        rho: -0.5711,
        v0: 0.0175,
    }
}

fn reason(e: Error) -> String {
    match e {
        Error::InvalidArgument { reason, .. } => reason,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn gauss_kronrod_integrates_known_integrals() {
    let e = integrate(&|x: f64| x.exp(), 0.0, 1.0, 1e-14, 100).unwrap();
    assert!((e - (std::f64::consts::E - 1.0)).abs() < 1e-14, "{e}");
    let s = integrate(&|x: f64| x.sin(), 0.0, std::f64::consts::PI, 1e-14, 100).unwrap();
    assert!((s - 2.0).abs() < 1e-14, "{s}");
    // Degree 20 needs the adaptive split (one 15-point panel is exact to degree 22 in
    // Kronrod's rule, but not in its Gauss companion, so the estimate drives the split).
    let p = integrate(&|x: f64| x.powi(20), 0.0, 1.0, 1e-15, 1000).unwrap();
    assert!((p - 1.0 / 21.0).abs() < 1e-15, "{p}");
    // A peak the rule must find: int 1 / (1e-4 + x^2) on [-1, 1] = 2 atan(100) / 1e-2
    let peak = integrate(&|x: f64| 1.0 / (1e-4 + x * x), -1.0, 1.0, 1e-10, 10_000).unwrap();
    let want = 2.0 * 100f64.atan() / 1e-2;
    assert!((peak - want).abs() < 1e-9 * want, "{peak} vs {want}");
}

#[test]
fn fang_oosterlee_reference_call() {
    let h = fang_oosterlee();
    let c = heston_price(OptionType::Call, 100.0, 100.0, 0.0, 0.0, 1.0, &h).unwrap();
    eprintln!("fang-oosterlee call {c:.12} (reference 5.785155450)");
    // kiln: 5.785155434 (the integral converged to 12 digits; the two-probability form
    // agrees); the published value is good to about 2e-8
    assert!((c - 5.785_155_450).abs() < 1e-7, "call {c:.10} vs 5.785155450");
    // put-call parity with r = q = 0: the same price at the money
    let p = heston_price(OptionType::Put, 100.0, 100.0, 0.0, 0.0, 1.0, &h).unwrap();
    assert!((p - c).abs() < 1e-12, "put {p} call {c}");
    assert!(!h.feller(), "2 kappa theta = 0.1255 < xi^2 = 0.3307");
}

#[test]
fn small_vol_of_vol_is_black_scholes_with_the_mean_variance() {
    for (rho, k, t, v0) in [
        (0.0, 100.0, 1.0, 0.0175),
        (-0.7, 90.0, 2.0, 0.09),
        (0.5, 120.0, 0.5, 0.01),
    ] {
        let mut diffs = Vec::new();
        for xi in [1e-2, 1e-3, 1e-4] {
            let h = HestonParams {
                kappa: 1.2,
                theta: 0.04,
                xi,
                rho,
                v0,
            };
            let sigma = h.mean_variance(t).sqrt();
            for kind in [OptionType::Call, OptionType::Put] {
                let hp = heston_price(kind, 100.0, k, 0.03, 0.01, t, &h).unwrap();
                let bs = bsm(kind, 100.0, k, 0.03, 0.01, sigma, t).price;
                if kind == OptionType::Call {
                    diffs.push((hp - bs).abs());
                }
                assert!(
                    (hp - bs).abs() < 50.0 * xi,
                    "rho {rho} xi {xi}: heston {hp} bs {bs}"
                );
            }
        }
        eprintln!("rho {rho}: |heston - bs| at xi = 1e-2, 1e-3, 1e-4: {diffs:?}");
        // first order in xi (second order when rho = 0): at least 9x closer each decade
        assert!(diffs[2] < diffs[1] / 9.0 + 1e-10, "{diffs:?}");
        assert!(diffs[2] < 1e-3, "{diffs:?}");
    }
}

/// Heston's original inversion, `C = e^{-rT} (F P1 - K P2)` with the Gil-Pelaez integrals of
/// the same characteristic function, taken on a plain truncated range: an independent check
/// of Lewis's transform (its `x = ln(F / K)` sign, the `u - i/2` shift, the prefactor).
fn two_probabilities(kind: OptionType, s: f64, k: f64, r: f64, q: f64, t: f64, h: &HestonParams) -> f64 {
    let f = s * ((r - q) * t).exp();
    let x = (f / k).ln();
    let p = |shift: f64| {
        let g = |u: f64| {
            let phi = char_fn(cx(u, -shift), t, h);
            let (sn, cs) = (u * x).sin_cos();
            let e = cx(cs * phi.re - sn * phi.im, cs * phi.im + sn * phi.re);
            // Re[e / (i u)] = Im[e] / u
            e.im / u
        };
        0.5 + integrate(&g, 0.0, 400.0, 1e-12, 20_000).unwrap() / std::f64::consts::PI
    };
    let call = (-r * t).exp() * (f * p(1.0) - k * p(0.0));
    match kind {
        OptionType::Call => call,
        OptionType::Put => call - s * (-q * t).exp() + k * (-r * t).exp(),
    }
}

#[test]
fn lewis_agrees_with_the_two_probability_form() {
    let cases = [
        (fang_oosterlee(), 100.0, 80.0, 0.05, 0.02, 1.0),
        (fang_oosterlee(), 100.0, 130.0, 0.01, 0.0, 0.5),
        (
            HestonParams {
                kappa: 2.0,
                theta: 0.09,
                xi: 1.0,
                rho: -0.9,
                v0: 0.04,
            },
            50.0,
            60.0,
            -0.01,
            0.03,
            3.0,
        ),
        (
            HestonParams {
                kappa: 0.5,
                theta: 0.04,
                xi: 0.3,
                rho: 0.6,
                v0: 0.06,
            },
            100.0,
            95.0,
            0.04,
            0.0,
            2.0,
        ),
    ];
    for (h, s, k, r, q, t) in cases {
        for kind in [OptionType::Call, OptionType::Put] {
            let a = heston_price(kind, s, k, r, q, t, &h).unwrap();
            let b = two_probabilities(kind, s, k, r, q, t, &h);
            eprintln!("{kind:?} K {k}: lewis {a:.12} two-prob {b:.12}");
            assert!((a - b).abs() < 1e-8 * s, "{kind:?} K {k}: lewis {a} two-prob {b}");
        }
        // negative correlation: OTM puts dearer than the mirrored OTM calls in implied vol
    }
}

#[test]
fn prices_respect_the_no_arbitrage_bounds() {
    let h = fang_oosterlee();
    let (s, r, q, t) = (100.0, 0.03, 0.01, 1.5);
    let mut last = f64::INFINITY;
    for k in [40.0, 70.0, 90.0, 100.0, 110.0, 140.0, 250.0] {
        let c = heston_price(OptionType::Call, s, k, r, q, t, &h).unwrap();
        let lower = (s * (-q * t).exp() - k * (-r * t).exp()).max(0.0);
        assert!(c >= lower - 1e-10 && c <= s * (-q * t).exp(), "K {k}: {c}");
        assert!(c < last, "decreasing in strike");
        last = c;
    }
    // deep in the money the call is the discounted forward minus the strike
    let c = heston_price(OptionType::Call, s, 1e-3, r, q, t, &h).unwrap();
    assert!(
        (c - (s * (-q * t).exp() - 1e-3 * (-r * t).exp())).abs() < 1e-8,
        "{c}"
    );
    // a short maturity and tiny variance still converges
    let tiny = HestonParams { v0: 1e-4, ..h };
    let c = heston_price(OptionType::Call, s, 100.0, 0.0, 0.0, 1.0 / 365.0, &tiny).unwrap();
    assert!(c > 0.0 && c < 1.0, "{c}");
    // |rho| = 1 (the slowest decay) and v0 = 0
    for rho in [-1.0, 1.0] {
        let edge = HestonParams { rho, v0: 0.0, ..h };
        let c = heston_price(OptionType::Call, s, 100.0, 0.02, 0.0, 1.0, &edge).unwrap();
        assert!(c > 0.0 && c < 20.0, "rho {rho}: {c}");
    }
}

#[test]
fn validation_names_the_field() {
    let good = fang_oosterlee();
    assert!(good.validate().is_ok());
    let cases: [(HestonParams, &str); 7] = [
        (HestonParams { kappa: 0.0, ..good }, "kappa"),
        (HestonParams { theta: -0.1, ..good }, "theta"),
        (HestonParams { xi: 0.0, ..good }, "xi"),
        (HestonParams { rho: -1.5, ..good }, "rho"),
        (HestonParams { v0: -1e-9, ..good }, "v0"),
        (HestonParams { v0: f64::NAN, ..good }, "finite"),
        (
            HestonParams {
                kappa: f64::INFINITY,
                ..good
            },
            "kappa",
        ),
    ];
    for (h, word) in cases {
        let r = reason(h.validate().unwrap_err());
        assert!(r.contains(word), "{r}");
    }
    // the edges are accepted; the Feller condition is reported, not required
    assert!(HestonParams {
        rho: 1.0,
        v0: 0.0,
        ..good
    }
    .validate()
    .is_ok());
    assert!(HestonParams { xi: 0.1, ..good }.feller());

    let option = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.0, 0.0, 0.2, 1.0);
    let spec = HestonSpec { option, heston: good };
    assert!(spec.validate().is_ok());
    assert!((spec.price_analytic().unwrap() - 5.785_155_450).abs() < 1e-7);
    let barrier = HestonSpec {
        option: option.with_style(Style::BarrierUpOut, None, Some(120.0)),
        heston: good,
    };
    let r = reason(barrier.validate().unwrap_err());
    assert!(r.contains("barrier_up_out") && r.contains("european"), "{r}");
    let asian = HestonSpec {
        option: option.with_style(Style::AsianArithmetic, Some(12), None),
        heston: good,
    };
    assert!(asian.validate().is_ok());
    assert!(reason(asian.price_analytic().unwrap_err()).contains("Monte Carlo"));
    // the option's own fields are still checked, volatility included
    let no_vol = HestonSpec {
        option: OptionSpec {
            volatility: 0.0,
            ..option
        },
        heston: good,
    };
    assert!(reason(no_vol.validate().unwrap_err()).contains("volatility"));
    let r = reason(heston_price(OptionType::Call, -1.0, 100.0, 0.0, 0.0, 1.0, &good).unwrap_err());
    assert!(r.contains("spot"), "{r}");
}
