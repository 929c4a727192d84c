//! Monte Carlo Greeks on the GPU runtime: bit for bit the CPU runtime's for a mixed book of
//! every Monte Carlo kind (Black-Scholes styles with continuous and discrete barriers,
//! Heston European and Asian, a GPU-kernel basket, a spread and a rainbow, which the GPU
//! runtime prices on the CPU engine, an American put), an odd path count a batch, Philox and
//! Sobol (Heston and the American an error in their slots there, the same on both); and a
//! timing of a 100-option exotic book (`--ignored`). Skips with a reason where no GPU is
//! usable (fails with KILN_REQUIRE_GPU=1).
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use kiln::finance::american::AmericanSpec;
use kiln::finance::{BookOption, GreeksParams, McGreeks};
use kiln::Runtime;
use kiln_core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln_core::finance::heston::{HestonParams, HestonSpec};
use kiln_core::finance::{McParams, OptionSpec, OptionType, Rng, Style};

/// Every f64 of `g`, as bits, in a fixed order.
fn bits(g: &McGreeks) -> Vec<u64> {
    let mut v = vec![g.price, g.rho, g.theta];
    v.extend(g.delta.iter().chain(&g.gamma).chain(&g.vega).copied());
    v.iter()
        .flat_map(|e| [e.value.to_bits(), e.std_error.to_bits()])
        .chain([g.paths_used])
        .collect()
}

fn basket(average: BasketAverage, weights: &[f64], strike: f64) -> BookOption {
    let n = weights.len();
    let corr: Vec<f64> = (0..n * n)
        .map(|k| if k / n == k % n { 1.0 } else { 0.35 })
        .collect();
    BookOption::Basket(BasketSpec {
        kind: OptionType::Call,
        strike,
        rate: 0.02,
        maturity: 0.9,
        average,
        assets: weights
            .iter()
            .enumerate()
            .map(|(i, &w)| BasketAsset::new(90.0 + 7.0 * i as f64, 0.2 + 0.05 * i as f64, 0.01, w))
            .collect(),
        correlation: corr,
    })
}

/// One option of every Monte Carlo kind.
fn mixed_book() -> Vec<BookOption> {
    let s = OptionSpec::european(OptionType::Call, 100.0, 102.0, 0.03, 0.01, 0.22, 0.8);
    let put = OptionSpec {
        option_type: OptionType::Put,
        ..s
    };
    let hp = HestonParams {
        kappa: 1.5,
        theta: 0.04,
        xi: 0.5,
        rho: -0.6,
        v0: 0.05,
    };
    vec![
        BookOption::Plain(s),
        BookOption::Plain(put.with_style(Style::AsianArithmetic, Some(7), None)),
        BookOption::Plain(s.with_style(Style::AsianGeometric, Some(5), None)),
        BookOption::Plain(s.with_style(Style::BarrierUpOut, None, Some(130.0))),
        BookOption::Plain(put.with_style(Style::BarrierDownIn, Some(9), Some(85.0))),
        BookOption::Heston(HestonSpec {
            option: s,
            heston: hp,
        }),
        BookOption::Heston(HestonSpec {
            option: put.with_style(Style::AsianArithmetic, Some(6), None),
            heston: hp,
        }),
        basket(BasketAverage::Arithmetic, &[0.3, 0.3, 0.4], 100.0),
        basket(BasketAverage::Arithmetic, &[1.0, -1.0], 4.0),
        basket(BasketAverage::Max, &[1.0, 1.0], 100.0),
        BookOption::American {
            spec: AmericanSpec {
                option_type: OptionType::Put,
                spot: 100.0,
                strike: 105.0,
                rate: 0.04,
                dividend: 0.0,
                volatility: 0.3,
                maturity: 1.0,
                exercise_dates: 10,
            },
            continuous: false,
        },
    ]
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_greeks_are_the_cpu_s_bit_for_bit() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_greeks_are_the_cpu_s_bit_for_bit") else {
        return;
    };
    let cpu = Runtime::cpu();
    let book = mixed_book();
    let p = GreeksParams {
        batches: 8,
        ..GreeksParams::default()
    };
    for rng in [Rng::Philox, Rng::Sobol { replicates: 8 }] {
        // 8 batches of 2049 paths each (odd: a partial last block)
        let mc = McParams {
            paths: 8 * 2049,
            steps: 9,
            seed: 77,
            rng,
            ..McParams::default()
        };
        let g = rt.mc_greeks(&book, &mc, &p, 5).unwrap();
        let c = cpu.mc_greeks(&book, &mc, &p, 5).unwrap();
        for (i, (g, c)) in g.iter().zip(&c).enumerate() {
            match (g, c) {
                (Ok(g), Ok(c)) => assert_eq!(bits(g), bits(c), "{} option {i}: {g:?} vs {c:?}", rng.name()),
                (Err(g), Err(c)) => assert_eq!(g.to_string(), c.to_string()),
                (g, c) => panic!("{} option {i}: {g:?} vs {c:?}", rng.name()),
            }
        }
        let ok = g.iter().filter(|r| r.is_ok()).count();
        // Heston's and Longstaff-Schwartz's paths take Philox normals only (3 options)
        let want = if rng == Rng::Philox {
            book.len()
        } else {
            book.len() - 3
        };
        assert_eq!(ok, want, "{}", rng.name());
    }
}

/// A 100-option exotic book: discrete barriers, arithmetic Asians, Heston Europeans,
/// 3-asset baskets and American puts, 20 of each.
fn exotic_book() -> Vec<BookOption> {
    (0..100)
        .map(|i| {
            let u = |k: u64| {
                ((i as u64 * 7 + k).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11) as f64 / (1u64 << 53) as f64
            };
            let s = OptionSpec::european(
                OptionType::Call,
                80.0 + 40.0 * u(1),
                80.0 + 40.0 * u(2),
                0.03,
                0.01,
                0.15 + 0.25 * u(3),
                0.25 + 1.75 * u(4),
            );
            match i % 5 {
                0 => BookOption::Plain(s.with_style(Style::BarrierUpOut, Some(12), Some(1.5 * s.spot))),
                1 => BookOption::Plain(s.with_style(Style::AsianArithmetic, Some(12), None)),
                2 => BookOption::Heston(HestonSpec {
                    option: s,
                    heston: HestonParams {
                        kappa: 1.5,
                        theta: 0.04,
                        xi: 0.5,
                        rho: -0.6,
                        v0: 0.04 + 0.02 * u(5),
                    },
                }),
                3 => basket(BasketAverage::Arithmetic, &[0.3, 0.3, 0.4], s.strike),
                _ => BookOption::American {
                    spec: AmericanSpec {
                        option_type: OptionType::Put,
                        spot: s.spot,
                        strike: s.strike,
                        rate: s.rate,
                        dividend: s.dividend,
                        volatility: s.volatility,
                        maturity: s.maturity,
                        exercise_dates: 12,
                    },
                    continuous: false,
                },
            }
        })
        .collect()
}

#[test]
#[ignore = "a timing: cargo test -p kiln --features gpu-tests --test greeks_gpu -- --ignored --nocapture"]
fn gpu_greeks_of_a_100_option_exotic_book_timed() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_greeks_of_a_100_option_exotic_book_timed") else {
        return;
    };
    let book = exotic_book();
    let p = GreeksParams::default();
    let mc = McParams {
        paths: 1 << 16,
        steps: 16,
        ..McParams::default()
    };
    // warm: kernels compiled or loaded from the cache
    rt.mc_greeks(&book[..5], &mc, &p, 0).unwrap();
    let t = Instant::now();
    let g = rt.mc_greeks(&book, &mc, &p, 0).unwrap();
    let s = t.elapsed().as_secs_f64();
    assert!(g.iter().all(|r| r.is_ok()));
    let copies: usize = book
        .iter()
        .map(|o| match o {
            BookOption::Basket(b) => 4 * b.assets.len() + 4,
            _ => 8,
        })
        .sum();
    println!(
        "mc_greeks GPU: 100-option exotic book (20 each: discrete barriers, arithmetic Asians, Heston, 3-asset baskets, American puts; 65,536 paths, 16 steps, {} batches): {s:.3} s for {copies} valuations of 65,536 paths",
        p.batches
    );
}
