//! Implied volatility of a book on the GPU (kiln-cuda's grouped `SolveImpliedVol`) against kiln-core's
//! CPU solver: on 10^6 random quotes and the edge cases of
//! `kiln_core::finance::implied::sample`, volatilities within a few ulp, or within the
//! precision the price allows (`eps price / vega`), as the GPU's `exp`/`log` may round an ulp
//! differently from the host's libm; every GPU volatility reprices its quote to 1e-12 (or,
//! where the price is that sensitive to the forward, a quote one or two ulp of spot or
//! strike away) wherever the CPU's does. The
//! same outcome (a volatility or the same reason) for every quote, except at a knife edge:
//! a quote whose price is within rounding of its intrinsic value or bound (the random book's
//! deep in-the-money quotes often are: moving the spot by one ulp changes the CPU's own
//! outcome for thousands of them) may get another outcome, accepted only where the CPU gives
//! that outcome too for the spot or strike moved by one or two ulp. Chunked and whole runs
//! give the same bits.
//! The grouped solve (`SolveImpliedVol`: quotes sorted by the solver's way, one kernel per
//! way, results scattered back) gives the one-pass kernel's (`SolveImpliedVolOnePass`) bits
//! in the book's order, on books whose ways are interleaved and whose sizes leave partial
//! tiles and warps (1, 31, 257, 100,003 and 10^6 quotes, and two windows of the grouped
//! solve, 2^22 + 4099), outputs poisoned before each run.
//! Prints quotes/s for a book already on the device (grouped and one pass) and host to host. GPU parts skip with a
//! reason where no GPU is usable (fail with KILN_REQUIRE_GPU=1); on the CPU the runtime's
//! book is kiln-core's, which the last test checks without a GPU.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use kiln::device::ops::{ImpliedVolBook, SolveImpliedVol, SolveImpliedVolOnePass};
use kiln::Runtime;
use kiln_core::finance::implied::{black, implied_volatility_book, sample, NoVolatility, Quote};
use kiln_cuda::{DeviceQuotes, IV_CHUNK_QUOTES};

/// Black vega of the discounted price in the quote's units, per unit of volatility.
fn vega(q: &Quote, sigma: f64) -> f64 {
    let forward = q.spot * ((q.rate - q.dividend) * q.maturity).exp();
    let s = sigma * q.maturity.sqrt();
    let d1 = (forward / q.strike).ln() / s + 0.5 * s;
    let pdf = (-0.5 * d1 * d1).exp() / (2.0 * std::f64::consts::PI).sqrt();
    (-q.rate * q.maturity).exp() * forward * pdf * q.maturity.sqrt()
}

/// Repricing the quote with `sigma` gives its price back to 1e-12 (to f64::MIN_POSITIVE for
/// subnormal prices).
fn reprices(q: &Quote, sigma: f64) -> bool {
    let forward = q.spot * ((q.rate - q.dividend) * q.maturity).exp();
    let back = (-q.rate * q.maturity).exp() * black(forward, q.strike, sigma, q.maturity, q.kind);
    (back - q.price).abs() <= 1e-12 * q.price + f64::MIN_POSITIVE
}

/// `q` with its spot and strike each moved by up to two ulp: the rounding a 1-ulp `exp`
/// moves its forward, discounted spot and discounted strike by.
fn nearby(q: &Quote) -> Vec<Quote> {
    let nudge = |x: f64, k: i64| {
        if x.is_finite() && x > 0.0 {
            f64::from_bits((x.to_bits() as i64 + k) as u64)
        } else {
            x
        }
    };
    let mut near = Vec::new();
    for ds in -2..=2i64 {
        for dk in -2..=2i64 {
            near.push(Quote {
                spot: nudge(q.spot, ds),
                strike: nudge(q.strike, dk),
                ..*q
            });
        }
    }
    near
}

/// Whether the CPU gives outcome `want` (a volatility: `None`, or a reason's index) for a
/// quote [`nearby`] `q`.
fn cpu_reaches_nearby(q: &Quote, want: Option<u8>) -> bool {
    implied_volatility_book(&nearby(q))
        .iter()
        .any(|r| r.as_ref().err().map(NoVolatility::index) == want)
}

/// Whether `v` lies within the CPU's volatilities for the quotes [`nearby`] `q`, widened by
/// 16 ulp: the precision the quote's inputs allow.
fn within_nearby_spread(q: &Quote, v: f64) -> bool {
    let vols: Vec<f64> = implied_volatility_book(&nearby(q))
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    let lo = vols.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vols.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    !vols.is_empty() && v >= lo - 16.0 * f64::EPSILON * lo && v <= hi + 16.0 * f64::EPSILON * hi
}

/// [`reprices`] for `q` or a quote [`nearby`] it (where the price is that sensitive to the
/// forward, an ulp of it moves the price by more than 1e-12).
fn reprices_nearby(q: &Quote, sigma: f64) -> bool {
    reprices(q, sigma) || nearby(q).iter().any(|n| reprices(n, sigma))
}

/// At or below intrinsic on one device and the other: the intrinsic value `S e^{-qT} -
/// K e^{-rT}` is a difference of two discounted terms, each rounded by an `exp` that may
/// differ by an ulp between the GPU and the CPU, so a price within a few ulp of those terms'
/// size from it falls either side of the CPU's 4-ulp rule.
fn intrinsic_edge(q: &Quote, g: &NoVolatility, c: &NoVolatility) -> bool {
    use NoVolatility::{AtIntrinsic, BelowIntrinsic};
    let (AtIntrinsic { price, intrinsic } | BelowIntrinsic { price, intrinsic }) = c else {
        return false;
    };
    if !matches!(g, AtIntrinsic { .. } | BelowIntrinsic { .. }) {
        return false;
    }
    let terms = q.spot * (-q.dividend * q.maturity).exp() + q.strike * (-q.rate * q.maturity).exp();
    (price - intrinsic).abs() <= 8.0 * f64::EPSILON * terms
}

fn ulps(a: f64, b: f64) -> u64 {
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
}

fn book(n: usize) -> Vec<Quote> {
    let (mut quotes, _) = sample::random_book(n, 0x1a2b_3c4d);
    quotes.extend(sample::edge_quotes());
    quotes
}

type Solved = Vec<Result<f64, NoVolatility>>;

/// Compares the GPU's results with the CPU's; returns (bitwise equal, max ulps, outcomes
/// that differ at a knife edge) and panics on a disagreement beyond the bounds.
fn compare(quotes: &[Quote], gpu: &Solved, cpu: &Solved) -> (usize, u64, usize) {
    assert_eq!(gpu.len(), cpu.len());
    let (mut same, mut worst, mut edge, mut other_reason, mut bad) = (0usize, 0u64, 0usize, 0usize, 0usize);
    for (i, ((q, g), c)) in quotes.iter().zip(gpu).zip(cpu).enumerate() {
        match (g, c) {
            (Ok(g), Ok(c)) => {
                let d = ulps(*g, *c);
                worst = worst.max(d);
                if d == 0 {
                    same += 1;
                }
                let attainable = 16.0 * f64::EPSILON * q.price / vega(q, *c);
                let close = d <= 16 || (g - c).abs() <= attainable || within_nearby_spread(q, *g);
                // (a price of a few subnormal quanta can defeat the CPU's own round trip:
                // the GPU's is demanded where the CPU's holds)
                if !(close && (reprices_nearby(q, *g) || !reprices(q, *c))) {
                    bad += 1;
                    if bad <= 10 {
                        eprintln!("quote {i} {q:?}: GPU {g}, CPU {c} ({d} ulp)");
                    }
                }
            }
            (Err(g), Err(c)) if g.index() == c.index() => same += 1,
            (Err(g), Err(c)) if intrinsic_edge(q, g, c) => edge += 1,
            (g, _) if cpu_reaches_nearby(q, g.as_ref().err().map(NoVolatility::index)) => {
                edge += 1;
                if g.as_ref().is_ok_and(|v| !reprices_nearby(q, *v)) {
                    bad += 1;
                }
            }
            _ => {
                other_reason += 1;
                if other_reason <= 10 {
                    eprintln!("quote {i} {q:?}: GPU {g:?}, CPU {c:?}");
                }
            }
        }
    }
    assert_eq!(bad, 0, "{bad} of {} volatilities out of bounds", quotes.len());
    assert_eq!(
        other_reason,
        0,
        "{other_reason} of {} quotes got another outcome on the GPU, away from any knife edge",
        quotes.len()
    );
    (same, worst, edge)
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_book_matches_the_cpu_solver_on_a_million_quotes() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_book_matches_the_cpu_solver_on_a_million_quotes")
    else {
        return;
    };
    let quotes = book(1_000_000);
    let gpu = rt.implied_volatility_book(&quotes).unwrap();
    let cpu = implied_volatility_book(&quotes);
    let (same, worst, edge) = compare(&quotes, &gpu, &cpu);
    eprintln!(
        "{} quotes: {same} bitwise the CPU's (reasons included), worst {worst} ulp; {edge} at a knife edge \
         took an outcome the CPU gives within two ulp of spot or strike",
        quotes.len()
    );
    // Chunks change no bit.
    let part = &quotes[..100_003];
    let chunked = rt
        .cuda()
        .unwrap()
        .run(ImpliedVolBook {
            quotes: part,
            chunk: 4099,
        })
        .unwrap();
    assert_eq!(format!("{chunked:?}"), format!("{:?}", &gpu[..part.len()]));
    assert!(rt.implied_volatility_book(&[]).unwrap().is_empty());
}

/// `n` quotes with the solver's ways interleaved: the random book (each quote's way drawn
/// independently) with an edge case (no solve, or a rare way) every seventh slot.
fn mixed_book(n: usize) -> Vec<Quote> {
    let (random, _) = sample::random_book(n, 0x5eed_0032);
    let edges = sample::edge_quotes();
    (0..n)
        .map(|i| {
            if i % 7 == 3 {
                edges[(i / 7) % edges.len()]
            } else {
                random[i]
            }
        })
        .collect()
}

/// Runs `solve` on `quotes` uploaded with poisoned outputs; returns the raw outputs.
fn raw(gpu: &kiln_cuda::CudaBackend, quotes: &[Quote], grouped: bool) -> (Vec<f64>, Vec<u8>) {
    let mut book = DeviceQuotes::upload(gpu, quotes).unwrap();
    book.poison_outputs(gpu).unwrap();
    if grouped {
        gpu.run(SolveImpliedVol { book: &mut book }).unwrap();
    } else {
        gpu.run(SolveImpliedVolOnePass { book: &mut book }).unwrap();
    }
    book.download(gpu).unwrap()
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_grouped_solve_is_the_one_pass_kernel_bit_for_bit() {
    let Some(rt) =
        kiln::testing::cuda_runtime_or_skip("gpu_grouped_solve_is_the_one_pass_kernel_bit_for_bit")
    else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    // (the last book is two windows of the grouped solve, the second partial)
    for n in [1usize, 31, 257, 100_003, 1_000_000, IV_CHUNK_QUOTES + 4099] {
        let quotes = mixed_book(n);
        let (v1, r1) = raw(gpu, &quotes, false);
        let (vg, rg) = raw(gpu, &quotes, true);
        assert!(
            r1.iter().chain(&rg).all(|&r| r <= 6),
            "{n} quotes: a slot was left unwritten"
        );
        let differ: Vec<usize> = (0..n)
            .filter(|&i| v1[i].to_bits() != vg[i].to_bits() || r1[i] != rg[i])
            .collect();
        for &i in differ.iter().take(8) {
            eprintln!(
                "quote {i} of {n}: one pass ({}, code {}), grouped ({}, code {})",
                v1[i], r1[i], vg[i], rg[i]
            );
        }
        assert!(differ.is_empty(), "{n} quotes: {} differ", differ.len());
        let solved = r1.iter().filter(|&&r| r == 0).count();
        // the results are in the book's order: they are the CPU solver's quote by quote
        if n <= 1_000_000 {
            let gpu_results = rt.implied_volatility_book(&quotes).unwrap();
            compare(&quotes, &gpu_results, &implied_volatility_book(&quotes));
        }
        eprintln!("{n} quotes ({solved} solved): grouped = one pass, bit for bit");
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_book_rate() {
    let Some(rt) = kiln::testing::cuda_runtime_or_skip("gpu_book_rate") else {
        return;
    };
    let gpu = rt.cuda().unwrap();
    let (quotes, _) = sample::random_book(1 << 22, 7);
    let n = quotes.len() as f64;
    let mut resident = DeviceQuotes::upload(gpu, &quotes).unwrap();
    gpu.run(SolveImpliedVol { book: &mut resident }).unwrap();
    gpu.synchronize().unwrap();
    let device: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            gpu.run(SolveImpliedVol { book: &mut resident }).unwrap();
            gpu.synchronize().unwrap();
            t.elapsed().as_secs_f64()
        })
        .collect();
    gpu.run(SolveImpliedVolOnePass { book: &mut resident }).unwrap();
    gpu.synchronize().unwrap();
    let one_pass: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            gpu.run(SolveImpliedVolOnePass { book: &mut resident }).unwrap();
            gpu.synchronize().unwrap();
            t.elapsed().as_secs_f64()
        })
        .collect();
    let host: Vec<f64> = (0..3)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(rt.implied_volatility_book(&quotes).unwrap());
            t.elapsed().as_secs_f64()
        })
        .collect();
    let t = Instant::now();
    std::hint::black_box(implied_volatility_book(&quotes));
    let cpu = t.elapsed().as_secs_f64();
    eprintln!(
        "implied vol, {} quotes on {}: resident book {:.3e} quotes/s grouped, {:.3e} one pass (median \
         of 5, kernels only); host to host {:.3e} quotes/s (median of 3); CPU solver on {} threads \
         {:.3e} quotes/s",
        quotes.len(),
        rt.device_name(),
        n / median(device),
        n / median(one_pass),
        n / median(host),
        kiln_core::finance::implied::book_threads(),
        n / cpu
    );
}

/// The comparison's bounds hold for what an ulp of rounding in the inputs does: the CPU's
/// own results for the book with every spot one ulp up pass as "GPU" results (so the GPU
/// test's failures are the kernel's, not the bounds').
#[test]
fn the_comparison_accepts_what_an_ulp_of_input_rounding_does() {
    let quotes = book(100_000);
    let cpu = implied_volatility_book(&quotes);
    let moved: Vec<Quote> = quotes
        .iter()
        .map(|q| Quote {
            spot: if q.spot.is_finite() && q.spot > 0.0 {
                f64::from_bits(q.spot.to_bits() + 1)
            } else {
                q.spot
            },
            ..*q
        })
        .collect();
    let fake = implied_volatility_book(&moved);
    let (same, _, edge) = compare(&quotes, &fake, &cpu);
    assert!(same > 0 && edge > 0, "{same} {edge}");
}

/// Without a GPU the runtime's book is kiln-core's solver, bit for bit.
#[test]
fn cpu_runtime_book_is_the_cpu_solver() {
    let rt = Runtime::cpu();
    let quotes = book(5_000);
    let got = rt.implied_volatility_book(&quotes).unwrap();
    assert_eq!(
        format!("{got:?}"),
        format!("{:?}", implied_volatility_book(&quotes))
    );
}
