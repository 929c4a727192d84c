//! Longstaff-Schwartz timing: the American put S = 36, K = 40, r = 0.06, sigma = 0.2, T = 1
//! with 50 exercise dates, priced through `Runtime::price_american` after one warm-up run;
//! prints the median wall time of 5 runs, the price and its standard error, and the
//! binomial tree's price of the same option (and with continuous exercise). On a GPU
//! 2^20 paths (and a bitwise check of a smaller run against the CPU engine), on the CPU
//! 2^16 (`--paths N` overrides, `--cpu` forces the CPU).
//!
//! ```text
//! cargo run --release -p kiln --example lsm_rate [-- --cpu] [-- --paths 1048576]
//! ```

use std::time::Instant;

use kiln::finance::american::{american_binomial, american_continuous, AmericanSpec};
use kiln::Runtime;
use kiln_core::finance::{McParams, OptionType};
use kiln_core::{Config, DeviceRequest};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let force_cpu = args.iter().any(|a| a == "--cpu");
    let paths_arg = args
        .iter()
        .position(|a| a == "--paths")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.parse::<u64>())
        .transpose()?;
    let rt = if force_cpu {
        Runtime::cpu()
    } else {
        Runtime::new(DeviceRequest::Auto, &Config::load(None)?)?
    };
    let gpu = rt.cuda().is_some();
    let paths = paths_arg.unwrap_or(if gpu { 1 << 20 } else { 1 << 16 });
    let spec = AmericanSpec {
        option_type: OptionType::Put,
        spot: 36.0,
        strike: 40.0,
        rate: 0.06,
        dividend: 0.0,
        volatility: 0.2,
        maturity: 1.0,
        exercise_dates: 50,
    };
    let mc = McParams {
        paths,
        seed: 2026,
        ..McParams::default()
    };
    let t0 = Instant::now();
    let first = rt.price_american(&[spec], &mc).remove(0)?;
    let warm_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut times = Vec::new();
    let mut last = first;
    for _ in 0..5 {
        let t = Instant::now();
        last = rt.price_american(&[spec], &mc).remove(0)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let median = times[2];
    let tree = american_binomial(&spec, 10_000)?;
    let continuous = american_continuous(&spec, 10_000)?;
    println!(
        "backend {} | {} paths x {} dates | warm-up {:.1} ms | median of 5 {:.2} ms (min {:.2}, max {:.2}) | {:.1} M path-dates/s",
        if gpu { "cuda" } else { "cpu" },
        paths,
        spec.exercise_dates,
        warm_ms,
        median,
        times[0],
        times[4],
        paths as f64 * f64::from(spec.exercise_dates) / (median * 1e3)
    );
    println!(
        "price {:.5} +- {:.5} (se) | tree (50 dates, 10000 steps) {:.5} | lsm - tree {:+.5} | Longstaff-Schwartz table 4.478 | continuous exercise {:.5}",
        last.price,
        last.std_error,
        tree,
        last.price - tree,
        continuous
    );
    if last.price.to_bits() != first.price.to_bits() {
        return Err("repeated runs gave different bits".into());
    }
    if gpu {
        let small = McParams { paths: 1 << 16, ..mc };
        let g = rt.price_american(&[spec], &small).remove(0)?;
        let c = kiln_cpu::finance::price_american(&spec, &small, 0)?;
        let same = g.price.to_bits() == c.price.to_bits() && g.std_error.to_bits() == c.std_error.to_bits();
        println!(
            "bitwise check at 2^16 paths: gpu {:.6} cpu {:.6} {}",
            g.price,
            c.price,
            if same { "SAME BITS" } else { "DIFFERENT" }
        );
        if !same {
            return Err("gpu and cpu prices differ".into());
        }
    }
    Ok(())
}
