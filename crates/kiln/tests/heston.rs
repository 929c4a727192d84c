//! Heston Monte Carlo on the CPU (Andersen's QE scheme) against the semi-analytic price:
//! within 4 standard errors on many random parameter sets, Feller violated and rho near -1
//! among them; Asian options with one fixing are the European's bits; the facade, the
//! stream indices and the control variate behave as documented.
#![allow(clippy::unwrap_used)]

use kiln::Runtime;
use kiln_core::finance::heston::{HestonParams, HestonSpec};
use kiln_core::finance::{McParams, OptionSpec, OptionType, Rng, Style};
use kiln_cpu::finance as cpu;

/// xorshift64*: a deterministic stream of uniforms in [0, 1).
struct Uniforms(u64);

impl Uniforms {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
}

fn spec(kind: OptionType, s: f64, k: f64, r: f64, q: f64, t: f64, h: HestonParams) -> HestonSpec {
    HestonSpec {
        option: OptionSpec::european(kind, s, k, r, q, h.v0.sqrt().max(0.01), t),
        heston: h,
    }
}

fn random_specs(n: usize) -> Vec<HestonSpec> {
    let mut u = Uniforms(0x4865_7374_6f6e_2121);
    (0..n)
        .map(|i| {
            let rho = match i % 4 {
                0 => u.range(-0.999, -0.95), // near -1
                1 => u.range(-0.9, -0.3),
                2 => u.range(-0.3, 0.6),
                _ => -1.0 + 1e-3 * u.next(),
            };
            let h = HestonParams {
                kappa: u.range(0.3, 4.0),
                theta: u.range(0.01, 0.16),
                xi: u.range(0.1, 1.5),
                rho,
                v0: u.range(0.005, 0.2),
            };
            let kind = if u.next() < 0.5 {
                OptionType::Call
            } else {
                OptionType::Put
            };
            let t = u.range(0.25, 3.0);
            let k = 100.0 * u.range(0.75, 1.3);
            spec(kind, 100.0, k, u.range(-0.01, 0.06), u.range(0.0, 0.04), t, h)
        })
        .collect()
}

#[test]
fn monte_carlo_is_within_four_standard_errors_of_the_closed_form() {
    let specs = random_specs(24);
    let feller_violated = specs.iter().filter(|s| !s.heston.feller()).count();
    assert!(feller_violated >= 8, "only {feller_violated} sets violate Feller");
    let mc = McParams {
        paths: 1 << 14,
        steps: 32,
        seed: 2008,
        control_variate: true,
        ..McParams::default()
    };
    let results = cpu::price_heston(&specs, &mc);
    let (mut worst, mut zero_se) = (0.0f64, 0usize);
    for (s, r) in specs.iter().zip(&results) {
        let r = r.as_ref().unwrap();
        let exact = s.price_analytic().unwrap();
        let z = (r.price - exact) / r.std_error;
        eprintln!(
            "{:?} K {:.1} T {:.2} kappa {:.2} theta {:.3} xi {:.2} rho {:.3} v0 {:.3} feller {}: mc {:.4} +- {:.4}, exact {:.4}, z {z:+.2}",
            s.option.option_type,
            s.option.strike,
            s.option.maturity,
            s.heston.kappa,
            s.heston.theta,
            s.heston.xi,
            s.heston.rho,
            s.heston.v0,
            s.heston.feller(),
            r.price,
            r.std_error,
            exact
        );
        assert!(r.std_error < 0.5, "se {}", r.std_error);
        if r.std_error == 0.0 {
            // rho = -1 leaves a far out-of-the-money call no right tail: no path pays
            assert!(exact < 1e-4 && r.price == 0.0, "mc {} exact {exact}", r.price);
            zero_se += 1;
        } else {
            worst = worst.max(z.abs());
        }
    }
    assert!(worst < 4.0, "worst |z| = {worst}");
    assert!(zero_se <= 2, "{zero_se} options had no paying path");
}

#[test]
fn an_asian_with_one_fixing_is_the_european_and_more_fixings_average() {
    let h = HestonParams {
        kappa: 1.5,
        theta: 0.04,
        xi: 0.8,
        rho: -0.7,
        v0: 0.05,
    };
    let euro = spec(OptionType::Call, 100.0, 100.0, 0.03, 0.0, 1.0, h);
    let mc = McParams {
        paths: 4096,
        steps: 24,
        seed: 11,
        ..McParams::default()
    };
    let one = HestonSpec {
        option: euro.option.with_style(Style::AsianArithmetic, Some(1), None),
        ..euro
    };
    let a = cpu::price_heston_mc(&euro, &mc, 0).unwrap();
    let b = cpu::price_heston_mc(&one, &mc, 0).unwrap();
    assert_eq!(a.price.to_bits(), b.price.to_bits());
    assert_eq!(a.std_error.to_bits(), b.std_error.to_bits());
    // 12 fixings, 2 steps each: the average damps the variance, so the Asian call is
    // cheaper than the European (at the money, small carry), with or without the control
    let asian = HestonSpec {
        option: euro.option.with_style(Style::AsianArithmetic, Some(12), None),
        ..euro
    };
    let plain = cpu::price_heston_mc(&asian, &mc, 0).unwrap();
    let cv = cpu::price_heston_mc(
        &asian,
        &McParams {
            control_variate: true,
            ..mc
        },
        0,
    )
    .unwrap();
    let exact = euro.price_analytic().unwrap();
    assert!(
        plain.price < exact - 1.0,
        "asian {} european {exact}",
        plain.price
    );
    assert!(
        (plain.price - cv.price).abs() < 4.0 * plain.std_error,
        "{} vs {}",
        plain.price,
        cv.price
    );
}

#[test]
fn the_facade_prices_each_slot_with_its_stream_and_reports_bad_slots() {
    let rt = Runtime::cpu();
    let mut specs = random_specs(3);
    let bad = HestonSpec {
        heston: HestonParams {
            xi: -1.0,
            ..specs[0].heston
        },
        ..specs[0]
    };
    let barrier = HestonSpec {
        option: specs[1].option.with_style(Style::BarrierUpOut, None, Some(150.0)),
        ..specs[1]
    };
    specs.push(bad);
    specs.push(barrier);
    let mc = McParams {
        paths: 2000,
        steps: 5,
        seed: 3,
        ..McParams::default()
    };
    let out = rt.price_heston(&specs, &mc);
    assert_eq!(out.len(), 5);
    for i in 0..3 {
        let want = cpu::price_heston_mc(&specs[i], &mc, i as u32).unwrap();
        assert_eq!(out[i].as_ref().unwrap().price.to_bits(), want.price.to_bits());
        assert_eq!(out[i].as_ref().unwrap().paths_used, 2000);
    }
    assert!(out[3].as_ref().unwrap_err().to_string().contains("xi"));
    assert!(out[4]
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("barrier_up_out"));
    // runs the engine cannot do are errors in every slot, not panics
    for mc in [
        McParams {
            antithetic: true,
            ..mc
        },
        McParams {
            rng: Rng::Sobol { replicates: 4 },
            ..mc
        },
        McParams { paths: 1, ..mc },
    ] {
        assert!(rt.price_heston(&specs[..2], &mc).iter().all(|r| r.is_err()));
    }
    assert!(rt.price_heston(&[], &mc).is_empty());
}

#[test]
fn the_control_variate_cuts_the_error_of_a_european() {
    let s = random_specs(2)[1];
    let mc = McParams {
        paths: 8192,
        steps: 16,
        seed: 5,
        ..McParams::default()
    };
    let plain = cpu::price_heston_mc(&s, &mc, 0).unwrap();
    let cv = cpu::price_heston_mc(
        &s,
        &McParams {
            control_variate: true,
            ..mc
        },
        0,
    )
    .unwrap();
    assert!(
        cv.std_error < plain.std_error,
        "{} vs {}",
        cv.std_error,
        plain.std_error
    );
    assert_eq!((cv.delta, cv.vega), (None, None));
}

/// The scheme's bias against the step count (a study, not a check: `--ignored --nocapture`).
/// QE is biased at coarse steps: over the 23 random sets above the mean z was -0.55 at 32
/// steps (seeds 2008 and 2009) and -0.06 at 128 (seed 2009), as the scheme converges.
#[test]
#[ignore]
fn bias_study() {
    let h = HestonParams {
        kappa: 3.88,
        theta: 0.106,
        xi: 1.34,
        rho: -0.556,
        v0: 0.145,
    };
    let s = spec(OptionType::Call, 100.0, 83.6, 0.03, 0.01, 2.89, h);
    let exact = s.price_analytic().unwrap();
    for steps in [8u32, 32, 128] {
        for cv in [false, true] {
            let mc = McParams {
                paths: 1 << 16,
                steps,
                seed: 99,
                control_variate: cv,
                ..McParams::default()
            };
            let r = cpu::price_heston_mc(&s, &mc, 0).unwrap();
            eprintln!(
                "steps {steps} cv {cv}: {:.4} +- {:.4} exact {exact:.4} z {:+.2}",
                r.price,
                r.std_error,
                (r.price - exact) / r.std_error
            );
        }
    }
}
