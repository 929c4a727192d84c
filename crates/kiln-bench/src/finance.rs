//! The finance suite: Monte Carlo under GBM at the peers' sizes — a European call, an
//! arithmetic-average Asian call, and a portfolio of 10,000 Europeans (a price each).
//!
//! Verification before timing: the European within 4 standard errors of Black-Scholes;
//! the Asian above its geometric closed form less 4 standard errors; every portfolio price
//! within 6 standard errors (6: ten thousand independent checks) plus 1e-4 of spot of its
//! closed form; on a
//! GPU also bitwise against the CPU engine on a 4096-path run of the same seed.
//! On a GPU each workload also runs with `fast_math` (`*_fast`: hardware-approximated
//! normals), checked the same way against the closed form and, instead of bitwise, within
//! 0.05 standard errors of the CPU engine's exact price on the 4096-path run.
//! The timed call is the `PriceMc` op (GPU: kernel-dominated, including the small block-sum
//! readback) or the CPU engine.
//!
//! On a GPU two more kinds of row (no peer: not the peers' workload):
//! - `mc_european_anti[_fast]`, `mc_asian_arith_anti[_fast]`, `mc_portfolio_anti[_fast]`:
//!   the same workloads with antithetic pairs (2^24 paths are 2^23 pairs, so half the
//!   Philox calls and normals a path), checked as the plain rows;
//! - `mc_probe_philox`, `mc_probe_normals[_fast]`: the European launch with the path loop cut
//!   to the Philox words, or to the words and their normals (`McProbe`), so the
//!   record can say what each part of a path-step costs. Checked on a 4096-path run against
//!   the same sums computed here from `kiln::core::philox` (exact probes bitwise, the fast one
//!   within 1e-5 relative).

use crate::harness::{params, percentile, Case, CaseMeta, Ctx, Floor, Measured};
use crate::suites::pow2_label;
use kiln::bench_support::McProbe;
use kiln::core::finance::{McParams, OptionSpec, OptionType, PriceResult, Style};
use kiln::device::ops::{McProbeTotals, PriceMc};
use kiln::finance::Method;
use kiln::kernels::Kernel;
use kiln::{Error, Result};

#[derive(Clone, Copy)]
enum Kind {
    European,
    Asian,
    Portfolio,
    Probe(McProbe),
}

/// How a row prices: `fast_math` normals, antithetic pairs.
#[derive(Clone, Copy)]
struct Mode {
    fast: bool,
    anti: bool,
}

const EXACT: Mode = Mode {
    fast: false,
    anti: false,
};
const FAST: Mode = Mode {
    fast: true,
    anti: false,
};

/// Plan the finance cases.
pub fn plan(ctx: &Ctx) -> Vec<Case> {
    // (paths, steps) for the single options; (options, paths, steps) for the portfolio
    let ((p, s), (po, pp, ps)) = match (ctx.gpu(), ctx.full) {
        (true, true) => ((1u64 << 24, 256u32), (10_000usize, 65_536u64, 64u32)),
        (true, false) => ((1 << 22, 64), (1000, 8192, 64)),
        (false, true) => ((1 << 20, 256), (100, 16_384, 64)),
        (false, false) => ((4096, 16), (8, 2048, 16)),
    };
    let mut v = vec![
        case(Kind::European, "mc_european", 1, p, s, EXACT),
        case(Kind::Asian, "mc_asian_arith", 1, p, s, EXACT),
        case(Kind::Portfolio, "mc_portfolio", po, pp, ps, EXACT),
    ];
    if ctx.gpu() {
        v.push(case(Kind::European, "mc_european_fast", 1, p, s, FAST));
        v.push(case(Kind::Asian, "mc_asian_arith_fast", 1, p, s, FAST));
        v.push(case(Kind::Portfolio, "mc_portfolio_fast", po, pp, ps, FAST));
        for (kind, name, o, pp, ss) in [
            (Kind::European, "mc_european_anti", 1, p, s),
            (Kind::Asian, "mc_asian_arith_anti", 1, p, s),
            (Kind::Portfolio, "mc_portfolio_anti", po, pp, ps),
        ] {
            v.push(case(kind, name, o, pp, ss, Mode { anti: true, ..EXACT }));
            v.push(case(
                kind,
                &format!("{name}_fast"),
                o,
                pp,
                ss,
                Mode { anti: true, ..FAST },
            ));
        }
        for (probe, name) in [
            (McProbe::Philox, "mc_probe_philox"),
            (McProbe::Normals, "mc_probe_normals"),
            (McProbe::NormalsFast, "mc_probe_normals_fast"),
        ] {
            let mode = if probe == McProbe::NormalsFast {
                FAST
            } else {
                EXACT
            };
            v.push(case(Kind::Probe(probe), name, 1, p, s, mode));
        }
    }
    v
}

fn case(kind: Kind, name: &str, options: usize, paths: u64, steps: u32, mode: Mode) -> Case {
    let kernel = match (kind, mode.fast) {
        (Kind::Asian, false) => Kernel::MC_ASIAN_ARITHMETIC_F64,
        (Kind::Asian, true) => Kernel::MC_ASIAN_ARITHMETIC_FAST_F64,
        (Kind::Probe(probe), _) => probe.kernel(),
        (_, false) => Kernel::MC_EUROPEAN_F64,
        (_, true) => Kernel::MC_EUROPEAN_FAST_F64,
    };
    // the peers have one row per workload: the fast variant is set against the same one;
    // antithetic and probe rows are not the peers' workload
    let peer = match kind {
        Kind::Probe(_) => None,
        _ if mode.anti => None,
        _ => Some(name.trim_end_matches("_fast").to_string()),
    };
    let (size, params) = match kind {
        Kind::Portfolio => (
            format!("{options}x{paths}x{steps}"),
            params(&[
                ("options", options as u64),
                ("paths_per_option", paths),
                ("steps", u64::from(steps)),
            ]),
        ),
        _ => (
            format!("{}x{steps}", pow2_label(paths as usize)),
            params(&[("paths", paths), ("steps", u64::from(steps))]),
        ),
    };
    Case {
        meta: CaseMeta {
            suite: "finance",
            workload: name.into(),
            size,
            params,
            bytes: 0.0,
            flops: 0.0,
            floor: Floor::None,
            kernels: vec![kernel.symbol(), Kernel::MC_COMBINE_F64.symbol()],
            peer_workload: peer,
        },
        run: Box::new(move |ctx| run(ctx, kind, options, paths, steps, mode)),
    }
}

fn euro() -> OptionSpec {
    OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0)
}

fn portfolio(n: usize) -> Vec<OptionSpec> {
    (0..n)
        .map(|i| {
            let f = i as f64 / n as f64;
            OptionSpec::european(
                OptionType::Call,
                80.0 + 40.0 * f,
                120.0 - 40.0 * f,
                0.05,
                0.0,
                0.1 + 0.4 * f,
                1.0,
            )
        })
        .collect()
}

fn price(ctx: &Ctx, specs: &[OptionSpec], mc: &McParams) -> Result<Vec<PriceResult>> {
    let rs = match ctx.cuda {
        Some(b) => b.run(PriceMc::new(specs, mc))?,
        None => ctx.rt.price(specs, Method::MonteCarlo, mc),
    };
    rs.into_iter().collect()
}

/// Black-Scholes for the (European) spec; NaN if the spec were invalid, so the check fails.
fn closed(s: &OptionSpec) -> f64 {
    kiln::core::finance::price_analytic(s).map_or(f64::NAN, |r| r.price)
}

/// A probe's per-option total computed on the CPU from `kiln::core::philox`, in the
/// kernel's order: each sample's value, summed in f64 in sample order within each block of
/// `BLOCK_SAMPLES`, the block sums added in block order from zero.
fn probe_total_cpu(probe: McProbe, mc: &McParams, option: u32) -> f64 {
    use kiln::core::philox as ph;
    let key = ph::key_from_seed(mc.seed);
    let calls = mc.steps / ph::NORMALS_PER_CALL;
    let value = |sample: u32| -> f64 {
        match probe {
            McProbe::Philox => {
                let acc = (0..calls).fold(0u32, |acc, b| {
                    let w = ph::philox4x32_10(ph::stream_counter(b, sample, option), key);
                    acc ^ ((w[0] ^ w[1]) ^ (w[2] ^ w[3]))
                });
                f64::from(acc)
            }
            McProbe::Normals | McProbe::NormalsFast => {
                let x = (0..calls).fold(0.0f32, |x, b| {
                    let z = ph::normals4_f32(key, option, sample, b);
                    (((x + z[0]) + z[1]) + z[2]) + z[3]
                });
                f64::from(x)
            }
        }
    };
    let n = mc.samples();
    let mut total = 0.0f64;
    let mut start = 0u64;
    while start < n {
        let end = (start + kiln::core::finance::BLOCK_SAMPLES).min(n);
        total += (start..end).fold(0.0f64, |acc, s| acc + value(s as u32));
        start = end;
    }
    total
}

fn run_probe(ctx: &Ctx, probe: McProbe, paths: u64, steps: u32) -> Result<Measured> {
    let b = ctx
        .cuda
        .ok_or_else(|| Error::invalid("bench", "the Monte Carlo probes run on a GPU"))?;
    let specs = vec![euro()];
    let mc = McParams {
        paths,
        steps,
        seed: 1,
        antithetic: false,
        control_variate: false,
        fast_math: probe == McProbe::NormalsFast,
        rng: kiln::core::finance::Rng::Philox,
    };
    let small = McParams { paths: 4096, ..mc };
    let g = b.run(McProbeTotals {
        specs: &specs,
        mc: &small,
        probe,
    })?[0];
    let c = probe_total_cpu(probe, &small, 0);
    let (ok, how) = match probe {
        McProbe::NormalsFast => (
            (g - c).abs() <= 1e-5 * small.samples() as f64,
            "within 1e-5 a sample of the exact normals' sum",
        ),
        _ => (g.to_bits() == c.to_bits(), "bitwise equal to kiln_core::philox's"),
    };
    let check = format!("4096-path checksum {g} vs CPU {c}: {how}: {ok}");
    b.run(McProbeTotals {
        specs: &specs,
        mc: &mc,
        probe,
    })?; // warm-up at the timed size
    let times = ctx.time_n(1, 5, |_| {
        std::hint::black_box(b.run(McProbeTotals {
            specs: &specs,
            mc: &mc,
            probe,
        })?);
        Ok(())
    })?;
    let path_steps = paths as f64 * f64::from(steps);
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = percentile(&sorted, 0.5).max(1e-6);
    Ok(Measured {
        warmup: 1,
        times_ms: times,
        verified: ok,
        check,
        rate: Some((path_steps / (median * 1e-3), "path-steps/s")),
        note: "benchmark probe (McProbeTotals): the European launch with the path loop cut down; not a price"
            .into(),
    })
}

fn run(ctx: &Ctx, kind: Kind, options: usize, paths: u64, steps: u32, mode: Mode) -> Result<Measured> {
    let fast = mode.fast;
    if let Kind::Probe(p) = kind {
        return run_probe(ctx, p, paths, steps);
    }
    let specs = match kind {
        Kind::European | Kind::Probe(_) => vec![euro()],
        Kind::Asian => vec![euro().with_style(Style::AsianArithmetic, Some(steps), None)],
        Kind::Portfolio => portfolio(options),
    };
    let mc = McParams {
        paths,
        steps,
        seed: 1,
        antithetic: mode.anti,
        control_variate: false,
        fast_math: fast,
        rng: kiln::core::finance::Rng::Philox,
    };
    // the first call is the check (and a warm-up: modules, pool blocks)
    let first = price(ctx, &specs, &mc)?;
    let (mut ok, mut check) = match kind {
        Kind::European | Kind::Probe(_) => {
            let (r, c) = (&first[0], closed(&specs[0]));
            let z = (r.price - c).abs() / r.std_error;
            (
                z <= 4.0,
                format!(
                    "price {:.5} +- {:.5} vs Black-Scholes {c:.5}: {z:.2} se",
                    r.price, r.std_error
                ),
            )
        }
        Kind::Asian => {
            let s = &specs[0];
            let g = kiln::core::finance::geometric_asian(
                s.option_type,
                s.spot,
                s.strike,
                s.rate,
                s.dividend,
                s.volatility,
                s.maturity,
                steps,
            );
            let r = &first[0];
            (
                r.price >= g - 4.0 * r.std_error,
                format!(
                    "price {:.5} +- {:.5} >= geometric bound {g:.5} - 4 se",
                    r.price, r.std_error
                ),
            )
        }
        Kind::Portfolio => {
            // 6 se, plus 1e-4 of spot for the far out-of-the-money options whose paths all
            // expire worthless (price 0, se 0, closed form a hair above 0)
            let worst = first
                .iter()
                .zip(&specs)
                .map(|(r, s)| (r.price - closed(s)).abs() / (6.0 * r.std_error + 1e-4 * s.spot))
                .fold(0.0, f64::max);
            (
                first.len() == specs.len() && worst <= 1.0,
                format!(
                    "{} prices vs Black-Scholes: worst |err| / (6 se + 1e-4 spot) = {worst:.3}",
                    first.len()
                ),
            )
        }
    };
    if ctx.gpu() {
        let small = McParams { paths: 4096, ..mc };
        let k = specs.len().min(4);
        let g = price(ctx, &specs[..k], &small)?;
        let same = (0..k).try_fold(true, |acc, i| {
            let c = kiln::bench_support::cpu::price_mc(&specs[i], &small, i as u32)?;
            Ok::<_, Error>(
                acc && if fast {
                    (c.price - g[i].price).abs() <= 0.05 * c.std_error
                } else {
                    c.price.to_bits() == g[i].price.to_bits()
                },
            )
        })?;
        ok &= same;
        check.push_str(&if fast {
            format!("; {k} option(s) at 4096 paths within 0.05 se of the CPU engine: {same}")
        } else {
            format!("; {k} option(s) at 4096 paths bitwise equal to the CPU engine: {same}")
        });
    }
    let (warmup, reps) = match (ctx.gpu(), ctx.full) {
        (true, true) => (1, 5),
        (true, false) => (1, 10),
        (false, true) => (0, 3),
        (false, false) => (0, 3),
    };
    let times = ctx.time_n(warmup, reps, |_| {
        std::hint::black_box(price(ctx, &specs, &mc)?);
        Ok(())
    })?;
    let path_steps = specs.len() as f64 * paths as f64 * f64::from(steps);
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = percentile(&sorted, 0.5).max(1e-6);
    Ok(Measured {
        warmup,
        times_ms: times,
        verified: ok,
        check,
        rate: Some((path_steps / (median * 1e-3), "path-steps/s")),
        note: if ctx.gpu() {
            format!(
                "PriceMc timed with CUDA events (includes the block-sum readback){}",
                if fast { "; fast_math normals" } else { "" }
            ) + if mode.anti {
                "; antithetic pairs (half the normals a path)"
            } else {
                ""
            }
        } else {
            format!("CPU engine, {} threads", rayon::current_num_threads())
        },
    })
}
