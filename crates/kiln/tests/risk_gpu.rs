//! Portfolio risk on the GPU (kiln-cuda's `risk_bs_grid_f64`) against the CPU path of
//! `Runtime::risk`: random books of European Black-Scholes options on a few underlyings
//! under random scenarios, per-scenario totals within 1e-12 of the book's gross value, and
//! the 10,000 options x 10,000 scenarios grid timed (wall clock of `Runtime::risk`, median of
//! three after a warm-up; printed with `--nocapture`). GPU tests skip with a reason where no
//! GPU is usable (fail with KILN_REQUIRE_GPU=1). The Monte Carlo rows: the GPU runtime's
//! batches against its one-call-per-option path (bitwise) and the CPU runtime, for a book of
//! every kind, and the stream-array engines against the CPU's. The CPU timings (10,000 x
//! 1,000 analytic, a 100-option exotic book x 100 scenarios) and the exotic book's GPU
//! timing (batched, one call per option, CPU) are `#[ignore]`d: run them with `--ignored`.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use kiln::device::ops::PriceMc;
use kiln::finance::risk::{Position, RiskParams, RiskReport, Valuation};
use kiln::finance::{AmericanSpec, BookOption, McStreams, Method};
use kiln::Runtime;
use kiln_core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln_core::finance::risk::{Scenario, ScenarioSet, Shock, SpotShift, ALL_UNDERLYINGS};
use kiln_core::finance::{McParams, OptionSpec, OptionType, Style};

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.next()
    }
}

const UNDERLYINGS: [&str; 4] = ["AAA", "BBB", "CCC", "DDD"];

fn bs_book(n: usize, rng: &mut Lcg) -> Vec<Position> {
    (0..n)
        .map(|i| {
            let kind = if rng.next() < 0.5 {
                OptionType::Call
            } else {
                OptionType::Put
            };
            let spec = OptionSpec::european(
                kind,
                rng.range(50.0, 150.0),
                rng.range(50.0, 150.0),
                rng.range(-0.01, 0.06),
                rng.range(0.0, 0.03),
                rng.range(0.1, 0.6),
                rng.range(0.05, 3.0),
            );
            Position {
                option: BookOption::Plain(spec),
                // the fifth of the book names none: the default shock
                underlying: UNDERLYINGS.get(i % 5).map(|u| u.to_string()),
                quantity: rng.range(-5.0, 5.0),
                id: None,
            }
        })
        .collect()
}

fn scenarios(n: usize, rng: &mut Lcg) -> ScenarioSet {
    ScenarioSet {
        scenarios: (0..n)
            .map(|j| {
                let mut s = Scenario::new(format!("s{j}"));
                for (k, u) in UNDERLYINGS.iter().enumerate().take(3) {
                    let spot = if k == 1 {
                        SpotShift::Absolute(rng.range(-20.0, 20.0))
                    } else {
                        SpotShift::Relative(rng.range(-0.25, 0.25))
                    };
                    s.set(
                        u,
                        Shock {
                            spot,
                            vol: rng.range(-0.08, 0.15),
                            rate: rng.range(-0.01, 0.01),
                        },
                    );
                }
                s.set(
                    ALL_UNDERLYINGS,
                    Shock {
                        spot: SpotShift::Relative(rng.range(-0.1, 0.1)),
                        vol: rng.range(-0.05, 0.05),
                        rate: 0.0,
                    },
                );
                s
            })
            .collect(),
    }
}

fn gross(book: &[Position]) -> f64 {
    book.iter().map(|p| p.quantity.abs() * 150.0).sum()
}

fn cpu_params() -> RiskParams {
    RiskParams {
        use_gpu: false,
        ..RiskParams::default()
    }
}

fn compare(gpu: &RiskReport, cpu: &RiskReport, scale: f64, upto: usize) {
    let worst = gpu.pnl[..upto]
        .iter()
        .zip(&cpu.pnl[..upto])
        .map(|(g, c)| (g - c).abs())
        .fold(0.0, f64::max);
    assert!(
        worst <= 1e-12 * scale,
        "worst |gpu - cpu| {worst:e} over a gross value {scale:e}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_grid_matches_the_cpu_on_random_books() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_grid_matches_the_cpu_on_random_books") else {
        return;
    };
    let cpu = Runtime::cpu();
    let mut rng = Lcg(5);
    for (n, m) in [(1, 1), (7, 3), (1013, 257), (4099, 61)] {
        let book = bs_book(n, &mut rng);
        let set = scenarios(m, &mut rng);
        let g = rt.risk(&book, &set, &RiskParams::default()).unwrap();
        assert_eq!(g.gpu_options, n);
        let c = cpu.risk(&book, &set, &cpu_params()).unwrap();
        assert_eq!(c.gpu_options, 0);
        compare(&g, &c, gross(&book), m);
        for (a, b) in g.measures.iter().zip(&c.measures) {
            assert!((a.var - b.var).abs() <= 1e-12 * gross(&book));
        }
    }
    // a shock that takes a spot below zero is refused by name, not priced
    let book = bs_book(11, &mut rng);
    let set = ScenarioSet {
        scenarios: vec![Scenario::new("crash").with(
            "BBB",
            Shock {
                spot: SpotShift::Absolute(-1000.0),
                ..Shock::default()
            },
        )],
    };
    let e = rt
        .risk(&book, &set, &RiskParams::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("`crash`") && e.contains("option 1"), "{e}");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_grid_10k_options_by_10k_scenarios() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_grid_10k_options_by_10k_scenarios") else {
        return;
    };
    let mut rng = Lcg(17);
    let book = bs_book(10_000, &mut rng);
    let set = scenarios(10_000, &mut rng);
    let p = RiskParams::default();
    let _warm = rt.risk(&book, &set, &p).unwrap();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..3 {
        let t = Instant::now();
        let r = rt.risk(&book, &set, &p).unwrap();
        times.push(t.elapsed().as_secs_f64());
        last = Some(r);
    }
    times.sort_by(f64::total_cmp);
    let r = last.unwrap();
    assert_eq!(r.gpu_options, 10_000);
    // the CPU on the first 300 scenarios
    let head = ScenarioSet {
        scenarios: set.scenarios[..300].to_vec(),
    };
    let c = Runtime::cpu().risk(&book, &head, &cpu_params()).unwrap();
    compare(&r, &c, gross(&book), 300);
    println!(
        "risk GPU grid: 10,000 European options x 10,000 scenarios, full revaluation: median {:.3} s (min {:.3}, max {:.3}) wall clock of Runtime::risk on {}",
        times[1],
        times[0],
        times[2],
        rt.device_name()
    );
    assert!(
        times[1] <= 1.0,
        "10,000 x 10,000 took {:.3} s (the target is 1 s)",
        times[1]
    );
}

fn exotic_book(n: usize, rng: &mut Lcg) -> Vec<Position> {
    (0..n)
        .map(|i| {
            let s = OptionSpec::european(
                if i % 2 == 0 {
                    OptionType::Call
                } else {
                    OptionType::Put
                },
                rng.range(80.0, 120.0),
                rng.range(80.0, 120.0),
                0.03,
                0.01,
                rng.range(0.15, 0.4),
                rng.range(0.25, 2.0),
            );
            let option = match i % 4 {
                0 => {
                    let (style, h) = if s.option_type == OptionType::Call {
                        (Style::BarrierUpOut, s.spot * 1.5)
                    } else {
                        (Style::BarrierDownOut, s.spot * 0.6)
                    };
                    BookOption::Plain(s.with_style(style, Some(12), Some(h)))
                }
                1 => BookOption::Plain(s.with_style(Style::AsianArithmetic, Some(12), None)),
                2 => BookOption::American {
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
                _ => BookOption::Basket(BasketSpec {
                    kind: OptionType::Call,
                    strike: 100.0,
                    rate: 0.03,
                    maturity: 1.0,
                    average: BasketAverage::Arithmetic,
                    assets: (0..3)
                        .map(|k| {
                            BasketAsset::new(rng.range(80.0, 120.0), 0.25, 0.0, 1.0 / 3.0)
                                .named(UNDERLYINGS[k])
                        })
                        .collect(),
                    correlation: vec![1.0, 0.5, 0.3, 0.5, 1.0, 0.4, 0.3, 0.4, 1.0],
                }),
            };
            Position {
                option,
                underlying: Some(UNDERLYINGS[i % 3].to_string()),
                quantity: rng.range(-3.0, 3.0),
                id: None,
            }
        })
        .collect()
}

fn exotic_params() -> RiskParams {
    RiskParams {
        mc: McParams {
            paths: 4096,
            steps: 16,
            ..McParams::default()
        },
        tree_steps: 500,
        ..RiskParams::default()
    }
}

/// CPU timings (the lead's GPU figures come from the GPU tests above).
#[test]
#[ignore = "a timing: cargo test -p kiln --test risk_gpu -- --ignored --nocapture cpu_timings"]
fn cpu_timings() {
    let rt = Runtime::cpu();
    let mut rng = Lcg(23);
    let book = bs_book(10_000, &mut rng);
    let set = scenarios(1_000, &mut rng);
    let t = Instant::now();
    let r = rt.risk(&book, &set, &cpu_params()).unwrap();
    let a = t.elapsed().as_secs_f64();
    assert!(r.valuation.iter().all(|v| *v == Valuation::Analytic));
    println!(
        "risk CPU: 10,000 European options x 1,000 scenarios analytic: {a:.3} s ({:.0} revaluations/s, {} threads)",
        1e7 / a,
        rayon_threads()
    );
    exotic_timing(&rt, "CPU");
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn exotic_timing(rt: &Runtime, what: &str) {
    let mut rng = Lcg(29);
    let book = exotic_book(100, &mut rng);
    let set = scenarios(100, &mut rng);
    let t = Instant::now();
    let r = rt.risk(&book, &set, &exotic_params()).unwrap();
    let s = t.elapsed().as_secs_f64();
    let mc = r
        .valuation
        .iter()
        .filter(|v| **v == Valuation::MonteCarlo)
        .count();
    println!(
        "risk {what}: 100-option exotic book (25 discrete barriers analytic, 25 arithmetic Asians MC, 25 Americans by a 500-step tree, 25 3-asset baskets MC; 4,096 paths, 16 steps) x 100 scenarios: {s:.3} s ({mc} by Monte Carlo), 95% VaR {:.4}",
        r.measures[0].var
    );
}

/// The exotic book's Monte Carlo revaluation on the GPU, timed (every option by Monte
/// Carlo: `--method mc`).
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_exotic_book_monte_carlo() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_exotic_book_monte_carlo") else {
        return;
    };
    exotic_timing(rt, "GPU (analytic where it exists)");
    let mut rng = Lcg(29);
    let book = exotic_book(100, &mut rng);
    let set = scenarios(1_000, &mut rng);
    let p = RiskParams {
        method: Method::MonteCarlo,
        ..exotic_params()
    };
    let t = Instant::now();
    let r = rt.risk(&book, &set, &p).unwrap();
    println!(
        "risk GPU: 100-option exotic book x 1,000 scenarios, every option by Monte Carlo (4,096 paths): {:.3} s on {}, 99% VaR {:.4}",
        t.elapsed().as_secs_f64(),
        rt.device_name(),
        r.measures[1].var
    );
}

/// A book of every Monte Carlo kind (each Black-Scholes style, Heston European and Asian,
/// Americans, arithmetic and geometric baskets on the basket kernel, spreads and rainbows on
/// the CPU engine) and options with closed forms, `n` of them, on the underlyings and none.
fn every_kind_book(n: usize, rng: &mut Lcg) -> Vec<Position> {
    use kiln_core::finance::heston::{HestonParams, HestonSpec};
    (0..n)
        .map(|i| {
            let s = OptionSpec::european(
                if i % 3 == 0 {
                    OptionType::Put
                } else {
                    OptionType::Call
                },
                rng.range(85.0, 115.0),
                rng.range(85.0, 115.0),
                0.03,
                0.01,
                rng.range(0.15, 0.4),
                rng.range(0.25, 1.5),
            );
            let basket = |average: BasketAverage, w: [f64; 3]| {
                BookOption::Basket(BasketSpec {
                    kind: s.option_type,
                    strike: if w.iter().any(|x| *x < 0.0) { 5.0 } else { s.strike },
                    rate: 0.03,
                    maturity: s.maturity,
                    average,
                    assets: (0..3)
                        .map(|k| {
                            BasketAsset::new(s.spot + 5.0 * k as f64, 0.2 + 0.05 * k as f64, 0.0, w[k])
                                .named(UNDERLYINGS[k])
                        })
                        .collect(),
                    correlation: vec![1.0, 0.5, 0.3, 0.5, 1.0, 0.4, 0.3, 0.4, 1.0],
                })
            };
            let heston = |style: Style| {
                BookOption::Heston(HestonSpec {
                    option: s.with_style(style, (style != Style::European).then_some(7), None),
                    heston: HestonParams {
                        kappa: 1.5,
                        theta: 0.04,
                        xi: 0.5,
                        rho: -0.6,
                        v0: 0.05,
                    },
                })
            };
            let option = match i % 14 {
                0 => BookOption::Plain(s),
                1 => BookOption::Plain(s.with_style(Style::AsianArithmetic, Some(7), None)),
                2 => BookOption::Plain(s.with_style(Style::AsianGeometric, Some(7), None)),
                3 => BookOption::Plain(s.with_style(Style::BarrierUpOut, Some(7), Some(s.spot * 1.4))),
                4 => BookOption::Plain(s.with_style(Style::BarrierUpIn, None, Some(s.spot * 1.3))),
                5 => BookOption::Plain(s.with_style(Style::BarrierDownOut, Some(7), Some(s.spot * 0.7))),
                6 => BookOption::Plain(s.with_style(Style::BarrierDownIn, None, Some(s.spot * 0.8))),
                7 => heston(Style::European),
                8 => heston(Style::AsianArithmetic),
                9 => BookOption::American {
                    spec: AmericanSpec {
                        option_type: OptionType::Put,
                        spot: s.spot,
                        strike: s.strike,
                        rate: s.rate,
                        dividend: s.dividend,
                        volatility: s.volatility,
                        maturity: s.maturity,
                        exercise_dates: 7,
                    },
                    continuous: false,
                },
                10 => basket(BasketAverage::Arithmetic, [0.3, 0.3, 0.4]),
                11 => basket(BasketAverage::Geometric, [0.5, 0.25, 0.25]),
                12 => basket(BasketAverage::Arithmetic, [1.0, -0.6, -0.3]),
                _ => basket(BasketAverage::Max, [1.0, 1.0, 1.0]),
            };
            Position {
                option,
                underlying: UNDERLYINGS.get(i % 5).map(|u| u.to_string()),
                quantity: rng.range(-3.0, 3.0),
                id: None,
            }
        })
        .collect()
}

fn bits(r: &RiskReport) -> Vec<u64> {
    r.base
        .iter()
        .chain(&r.base_std_error)
        .chain(&r.pnl)
        .chain(r.matrix.as_deref().unwrap_or(&[]))
        .map(|x| x.to_bits())
        .collect()
}

/// The GPU runtime's batched Monte Carlo rows against the per-option path on the same GPU
/// (`use_gpu = false`: one engine call per option; the same kernels and streams, so the
/// same bits) and against the CPU runtime (the engines' bits agree too; asserted within the
/// finance tests' Monte Carlo tolerance, 3 standard errors a price, and the largest
/// difference printed), for a 29-option book of every kind under 37 scenarios, by each
/// method, with Philox and (Black-Scholes styles and baskets) Sobol runs.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_mc_risk_batches_match_the_per_option_path_and_the_cpu() {
    let Some(rt) =
        kiln::testing::cuda_runtime_or_skip("gpu_mc_risk_batches_match_the_per_option_path_and_the_cpu")
    else {
        return;
    };
    let cpu = Runtime::cpu();
    let mut rng = Lcg(31);
    let book = every_kind_book(29, &mut rng);
    let set = scenarios(37, &mut rng);
    let philox = McParams {
        paths: 3 * 1024 + 37,
        steps: 9,
        seed: 0x5eed,
        ..McParams::default()
    };
    let sobol = McParams {
        paths: 4096,
        rng: kiln_core::finance::Rng::Sobol { replicates: 4 },
        ..philox
    };
    let sobol_book: Vec<Position> = book
        .iter()
        .filter(|p| matches!(p.option, BookOption::Plain(_) | BookOption::Basket(_)))
        .cloned()
        .collect();
    for (mc, book) in [(philox, &book), (sobol, &sobol_book)] {
        for method in [Method::Analytic, Method::MonteCarlo] {
            let p = RiskParams {
                method,
                mc,
                tree_steps: 200,
                keep_matrix: true,
                ..RiskParams::default()
            };
            let what = format!("{method:?}, {}", mc.rng.name());
            let batched = rt.risk(book, &set, &p).unwrap();
            let n_mc = batched
                .valuation
                .iter()
                .filter(|v| **v == Valuation::MonteCarlo)
                .count();
            assert!(n_mc >= 8, "{what}: {n_mc} by Monte Carlo");
            let one = RiskParams {
                use_gpu: false,
                ..p.clone()
            };
            let per_option = rt.risk(book, &set, &one).unwrap();
            assert_eq!(batched.valuation, per_option.valuation);
            assert_eq!(bits(&batched), bits(&per_option), "{what}: batched vs per option");
            // without the matrix the grid kernel takes the analytic Europeans: 1e-12 of gross
            let grid = RiskParams {
                keep_matrix: false,
                ..p.clone()
            };
            let g = rt.risk(book, &set, &grid).unwrap();
            compare(&g, &batched, gross(book), set.len());

            let c = cpu.risk(book, &set, &p).unwrap();
            assert_eq!(c.valuation, batched.valuation);
            let n = book.len();
            let (gm, cm) = (batched.matrix.as_ref().unwrap(), c.matrix.as_ref().unwrap());
            let mut worst = 0.0f64;
            for i in 0..n {
                let se = c.base_std_error[i];
                let tol = 3.0 * se + 1e-12;
                assert!(
                    (batched.base[i] - c.base[i]).abs() <= tol,
                    "{what}: option {i} base {} vs CPU {} (se {se:e})",
                    batched.base[i],
                    c.base[i]
                );
                for s in 0..set.len() {
                    let d = (gm[s * n + i] - cm[s * n + i]).abs();
                    worst = worst.max(d);
                    // each of the base and the shocked price within 3 standard errors
                    assert!(
                        d <= book[i].quantity.abs() * 2.0 * tol + 1e-12 * gross(book),
                        "{what}: option {i} scenario {s}: {} vs CPU {}",
                        gm[s * n + i],
                        cm[s * n + i]
                    );
                }
            }
            println!(
                "{what}: {n_mc} of {n} options by Monte Carlo x 37 scenarios; batched = per-option bits; largest |GPU - CPU| P&L cell {worst:e} (bitwise: {})",
                bits(&batched) == bits(&c)
            );
        }
    }
}

/// The exotic book of `gpu_exotic_book_monte_carlo` (100 options x 100 scenarios, analytic
/// where a closed form exists, and x 1,000 scenarios by Monte Carlo, also without its
/// Americans) timed on the GPU runtime batched and one option per engine invocation, and on the CPU
/// runtime; wall clock of `Runtime::risk`, one run each after a warm-up run of the batched
/// path.
#[test]
#[ignore = "a timing: cargo test -p kiln --features gpu-tests --test risk_gpu -- --ignored --nocapture gpu_mc_risk_timing"]
fn gpu_mc_risk_timing() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_mc_risk_timing") else {
        return;
    };
    let cpu = Runtime::cpu();
    let mut rng = Lcg(29);
    let book = exotic_book(100, &mut rng);
    let set = scenarios(1_000, &mut rng);
    let head = ScenarioSet {
        scenarios: set.scenarios[..100].to_vec(),
    };
    let analytic = exotic_params();
    let mc = RiskParams {
        method: Method::MonteCarlo,
        ..exotic_params()
    };
    // the 25 Americans take one Longstaff-Schwartz run a copy: the book without them shows
    // what the batches do for the rest
    let no_american: Vec<Position> = book
        .iter()
        .filter(|p| !matches!(p.option, BookOption::American { .. }))
        .cloned()
        .collect();
    let _warm = rt.risk(&book, &head, &analytic).unwrap();
    for (what, book, set, p) in [
        (
            "100-option exotic book x 100 scenarios, analytic where a closed form exists",
            &book,
            &head,
            &analytic,
        ),
        (
            "100-option exotic book x 1,000 scenarios, every option by Monte Carlo",
            &book,
            &set,
            &mc,
        ),
        (
            "the book without its 25 Americans x 1,000 scenarios, every option by Monte Carlo",
            &no_american,
            &set,
            &mc,
        ),
    ] {
        let time = |rt: &Runtime, p: &RiskParams| {
            let t = Instant::now();
            let r = rt.risk(book, set, p).unwrap();
            (t.elapsed().as_secs_f64(), r)
        };
        let (tb, b) = time(rt, p);
        let one = RiskParams {
            use_gpu: false,
            ..p.clone()
        };
        let (to, o) = time(rt, &one);
        let (tc, _) = time(&cpu, p);
        assert_eq!(b.pnl.len(), set.len());
        let mc = b
            .valuation
            .iter()
            .filter(|v| **v == Valuation::MonteCarlo)
            .count();
        println!(
            "risk: {what} ({mc} by Monte Carlo, 4,096 paths x 16 steps): GPU runtime batched {tb:.3} s, GPU runtime one option per engine invocation {to:.3} s ({}), CPU runtime {tc:.3} s ({} threads); {}",
            rt.device_name(),
            rayon_threads(),
            if bits(&b) == bits(&o) { "the same bits" } else { "DIFFERENT BITS" },
        );
    }
}

/// `Runtime::price_book_streams` on the GPU (every engine's stream-array entry point: the
/// Black-Scholes kernels with Philox and Sobol, Heston, the basket kernel, and the CPU
/// engine for spreads and rainbows) is bitwise the CPU runtime's at each option's stream,
/// with streams out of order and repeated; a stream array of another length is refused.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_stream_arrays_are_the_cpu_engines_at_each_stream() {
    let Some(rt) =
        kiln::testing::cuda_runtime_or_skip("gpu_stream_arrays_are_the_cpu_engines_at_each_stream")
    else {
        return;
    };
    let cpu = Runtime::cpu();
    let mut rng = Lcg(37);
    let book: Vec<BookOption> = every_kind_book(31, &mut rng)
        .into_iter()
        .map(|p| p.option)
        .collect();
    let streams: Vec<u32> = (0..book.len() as u32).map(|i| (i * 7 + 3) % 11).collect();
    let philox = McParams {
        paths: 2 * 1024 + 19,
        steps: 7,
        seed: 91,
        ..McParams::default()
    };
    let sobol = McParams {
        paths: 2048,
        rng: kiln_core::finance::Rng::Sobol { replicates: 2 },
        ..philox
    };
    for mc in [philox, sobol] {
        let g = rt.price_book_streams(&book, &mc, &streams).unwrap();
        let c = cpu.price_book_streams(&book, &mc, &streams).unwrap();
        for (i, (g, c)) in g.iter().zip(&c).enumerate() {
            match (g, c) {
                (Ok(g), Ok(c)) => assert_eq!(
                    (g.price.to_bits(), g.std_error.to_bits()),
                    (c.price.to_bits(), c.std_error.to_bits()),
                    "{}: option {i} ({})",
                    mc.rng.name(),
                    book[i].kind()
                ),
                // Sobol runs refuse Heston and American options on both engines
                (Err(_), Err(_)) => assert!(mc.rng != kiln_core::finance::Rng::Philox, "option {i}"),
                (g, c) => panic!("{}: option {i}: GPU {g:?}, CPU {c:?}", mc.rng.name()),
            }
        }
    }
    assert!(rt.price_book_streams(&book, &philox, &streams[1..]).is_err());
    let gpu = rt.cuda().unwrap();
    let specs = [OptionSpec::european(
        OptionType::Call,
        100.0,
        100.0,
        0.03,
        0.0,
        0.2,
        1.0,
    )];
    assert!(gpu
        .run(PriceMc {
            specs: &specs,
            mc: &philox,
            streams: McStreams::Each(&[1, 2]),
            max_items: 1 << 20
        })
        .is_err());
}
