//! Cross gammas `d²V/dS_1 dS_2` of two-asset options (`GreeksParams::cross_gamma`) against
//! closed forms differenced: the max and min rainbows (Stulz, 1982) and the exchange option
//! (a spread at strike 0, Margrabe, 1978), each within 4 standard errors on the CPU; turning
//! cross gammas on leaves every other Greek's bits as they were; and on a GPU the cross
//! gammas of a GPU-kernel basket and of a rainbow are the CPU's bit for bit (skips with a
//! reason where no GPU is usable, fails with KILN_REQUIRE_GPU=1).
#![allow(clippy::unwrap_used)]

use kiln::finance::{BookOption, Estimate, GreeksParams, McGreeks};
use kiln::Runtime;
use kiln_core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln_core::finance::{McParams, OptionType};

/// A two-asset option of `average` on spots `s` (volatilities 0.3 and 0.2, dividends 1% and
/// 2%, correlation `rho`, rate 3%, one year).
fn pair(
    kind: OptionType,
    average: BasketAverage,
    weights: [f64; 2],
    strike: f64,
    s: [f64; 2],
    rho: f64,
) -> BasketSpec {
    BasketSpec {
        kind,
        strike,
        rate: 0.03,
        maturity: 1.0,
        average,
        assets: vec![
            BasketAsset::new(s[0], 0.3, 0.01, weights[0]),
            BasketAsset::new(s[1], 0.2, 0.02, weights[1]),
        ],
        correlation: vec![1.0, rho, rho, 1.0],
    }
}

/// `d²f/dS_1 dS_2` of a closed form `f(S_1, S_2)` by the four-point mixed difference with
/// steps `1e-3` of each spot (its bias `O(h²)` far below the Monte Carlo errors).
fn mixed(f: &dyn Fn([f64; 2]) -> f64, s: [f64; 2]) -> f64 {
    let (h1, h2) = (1e-3 * s[0], 1e-3 * s[1]);
    let v = |a: f64, b: f64| f([s[0] + a * h1, s[1] + b * h2]);
    (v(1.0, 1.0) - v(1.0, -1.0) - v(-1.0, 1.0) + v(-1.0, -1.0)) / (4.0 * h1 * h2)
}

fn cross(g: &McGreeks) -> Estimate {
    assert_eq!(g.cross_gamma.len(), 1, "two assets: one pair");
    assert_eq!(g.cross_gamma_at(1, 0), Some(g.cross_gamma[0]));
    g.cross_gamma[0]
}

#[test]
fn cross_gammas_are_stulz_s_and_margrabe_s_differenced() {
    let rt = Runtime::cpu();
    let s = [100.0, 95.0];
    let cases = [
        (
            "max call",
            OptionType::Call,
            BasketAverage::Max,
            [1.0, 1.0],
            100.0,
            0.4,
        ),
        (
            "max put",
            OptionType::Put,
            BasketAverage::Max,
            [1.0, 1.0],
            105.0,
            -0.3,
        ),
        (
            "min call",
            OptionType::Call,
            BasketAverage::Min,
            [1.0, 1.0],
            90.0,
            0.6,
        ),
        (
            "exchange",
            OptionType::Call,
            BasketAverage::Arithmetic,
            [1.0, -1.0],
            0.0,
            0.4,
        ),
    ];
    let p = GreeksParams {
        cross_gamma: true,
        ..GreeksParams::default()
    };
    let book: Vec<BookOption> = cases
        .iter()
        .map(|&(_, kind, avg, w, k, rho)| BookOption::Basket(pair(kind, avg, w, k, s, rho)))
        .collect();
    let mc = McParams {
        paths: 1 << 17,
        steps: 1,
        seed: 1982,
        ..McParams::default()
    };
    let got = rt.mc_greeks(&book, &mc, &p, 0).unwrap();
    let mut bad = Vec::new();
    for (&(name, kind, avg, w, k, rho), g) in cases.iter().zip(got) {
        let g = g.unwrap();
        let f = |x: [f64; 2]| pair(kind, avg, w, k, x, rho).price_analytic().unwrap();
        let want = mixed(&f, s);
        let e = cross(&g);
        let z = (e.value - want) / e.std_error;
        println!(
            "{name}: cross gamma {:.6} +- {:.6} closed form {want:.6} z {z:+.2}",
            e.value, e.std_error
        );
        // a cross gamma this small would make the check vacuous
        assert!(
            want.abs() > 4.0 * e.std_error,
            "{name}: {want} vs se {}",
            e.std_error
        );
        if !(e.std_error > 0.0 && z.abs() <= 4.0) {
            bad.push(format!(
                "{name}: {} +- {} vs {want} (z {z:+.2})",
                e.value, e.std_error
            ));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Every f64 of `g` but the cross gammas, as bits.
fn bits(g: &McGreeks) -> Vec<u64> {
    let mut v = vec![g.price, g.rho, g.theta];
    v.extend(g.delta.iter().chain(&g.gamma).chain(&g.vega).copied());
    v.iter()
        .flat_map(|e| [e.value.to_bits(), e.std_error.to_bits()])
        .chain([g.paths_used])
        .collect()
}

fn three_assets() -> BookOption {
    BookOption::Basket(BasketSpec {
        kind: OptionType::Call,
        strike: 100.0,
        rate: 0.02,
        maturity: 0.9,
        average: BasketAverage::Arithmetic,
        assets: vec![
            BasketAsset::new(90.0, 0.2, 0.01, 0.3),
            BasketAsset::new(97.0, 0.25, 0.01, 0.3),
            BasketAsset::new(104.0, 0.3, 0.01, 0.4),
        ],
        correlation: vec![1.0, 0.35, 0.35, 0.35, 1.0, 0.35, 0.35, 0.35, 1.0],
    })
}

#[test]
fn cross_gammas_leave_the_other_greeks_bits_alone() {
    let rt = Runtime::cpu();
    let book = vec![
        three_assets(),
        BookOption::Basket(pair(
            OptionType::Call,
            BasketAverage::Max,
            [1.0, 1.0],
            100.0,
            [100.0, 95.0],
            0.4,
        )),
    ];
    let mc = McParams {
        paths: 8 * 1025,
        steps: 1,
        seed: 3,
        ..McParams::default()
    };
    let off = GreeksParams {
        batches: 8,
        ..GreeksParams::default()
    };
    let on = GreeksParams {
        cross_gamma: true,
        ..off
    };
    let a = rt.mc_greeks(&book, &mc, &off, 0).unwrap();
    let b = rt.mc_greeks(&book, &mc, &on, 0).unwrap();
    for (a, b) in a.iter().zip(&b) {
        let (a, b) = (a.as_ref().unwrap(), b.as_ref().unwrap());
        assert_eq!(bits(a), bits(b));
        assert!(a.cross_gamma.is_empty());
        let n = b.gamma.len();
        assert_eq!(b.cross_gamma.len(), n * (n - 1) / 2);
        assert!(b
            .cross_gamma
            .iter()
            .all(|e| e.value.is_finite() && e.std_error > 0.0));
    }
    // an arithmetic basket call is convex in every pair of spots: positive cross gammas
    let basket = b[0].as_ref().unwrap();
    assert!(basket.cross_gamma.iter().all(|e| e.value > 0.0), "{basket:?}");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_cross_gammas_are_the_cpu_s_bit_for_bit() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_cross_gammas_are_the_cpu_s_bit_for_bit") else {
        return;
    };
    let cpu = Runtime::cpu();
    // a GPU-kernel basket and a rainbow (which the GPU runtime prices on the CPU engine)
    let book = vec![
        three_assets(),
        BookOption::Basket(pair(
            OptionType::Call,
            BasketAverage::Max,
            [1.0, 1.0],
            100.0,
            [100.0, 95.0],
            0.4,
        )),
    ];
    let p = GreeksParams {
        batches: 8,
        cross_gamma: true,
        ..GreeksParams::default()
    };
    let mc = McParams {
        paths: 8 * 2049,
        steps: 1,
        seed: 77,
        ..McParams::default()
    };
    let g = rt.mc_greeks(&book, &mc, &p, 5).unwrap();
    let c = cpu.mc_greeks(&book, &mc, &p, 5).unwrap();
    for (i, (g, c)) in g.iter().zip(&c).enumerate() {
        let (g, c) = (g.as_ref().unwrap(), c.as_ref().unwrap());
        assert_eq!(bits(g), bits(c), "option {i}");
        let cross = |x: &McGreeks| -> Vec<u64> {
            x.cross_gamma
                .iter()
                .flat_map(|e| [e.value.to_bits(), e.std_error.to_bits()])
                .collect()
        };
        assert!(!g.cross_gamma.is_empty());
        assert_eq!(
            cross(g),
            cross(c),
            "option {i}: {:?} vs {:?}",
            g.cross_gamma,
            c.cross_gamma
        );
    }
}
