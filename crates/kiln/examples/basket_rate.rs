//! Basket Monte Carlo throughput: paths and asset-paths per second of an arithmetic basket
//! call on 8 correlated assets (one step to maturity, geometric control variate), on the
//! GPU (2^24 paths) when one is usable and on the CPU (2^18 paths), each after a warm-up,
//! the median of 5 timed runs (wall clock of `Runtime::price_basket`), and the geometric
//! basket's Monte Carlo price against its closed form.
//!
//! ```text
//! cargo run --release -p kiln --example basket_rate            # both engines
//! cargo run --release -p kiln --example basket_rate -- cpu     # the CPU only
//! KILN_BASKET_GPU_PATHS=1048576 KILN_BASKET_ASSETS=17 ...       # another size
//! ```

use std::time::Instant;

use kiln::core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln::core::finance::{McParams, OptionType};
use kiln::finance::Method;
use kiln::{Config, DeviceRequest, Runtime};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// `n` assets, spots 80..120, vols 0.15..0.4, equicorrelated at 0.4, equal weights 1/n.
fn basket(n: usize, average: BasketAverage) -> BasketSpec {
    let assets = (0..n)
        .map(|i| {
            let x = i as f64 / n.max(2).saturating_sub(1) as f64;
            BasketAsset::new(80.0 + 40.0 * x, 0.15 + 0.25 * x, 0.01, 1.0 / n as f64).named(format!("S{i}"))
        })
        .collect();
    let corr = (0..n * n)
        .map(|k| if k / n == k % n { 1.0 } else { 0.4 })
        .collect();
    BasketSpec {
        kind: OptionType::Call,
        strike: 100.0,
        rate: 0.03,
        maturity: 1.0,
        average,
        assets,
        correlation: corr,
    }
}

fn measure(rt: &Runtime, name: &str, n: usize, paths: u64) -> kiln::Result<()> {
    let arith = basket(n, BasketAverage::Arithmetic);
    let mc = McParams {
        paths,
        seed: 2026,
        control_variate: true,
        ..McParams::default()
    };
    // warm-up (on a GPU: loads or compiles the kernel)
    let t0 = Instant::now();
    let first = rt
        .price_basket(std::slice::from_ref(&arith), &mc, Method::MonteCarlo)
        .remove(0)?;
    let cold = t0.elapsed().as_secs_f64();
    let mut times = Vec::new();
    let mut r = first;
    for _ in 0..5 {
        let t = Instant::now();
        r = rt
            .price_basket(std::slice::from_ref(&arith), &mc, Method::MonteCarlo)
            .remove(0)?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let median = times[2];
    println!(
        "{name:4} N = {n}, {paths:>9} paths: median {:9.3} ms (first call {:.3} s), {:.3e} paths/s, {:.3e} asset-paths/s; arithmetic call {:.6} +- {:.6}",
        median * 1e3,
        cold,
        paths as f64 / median,
        paths as f64 * n as f64 / median,
        r.price,
        r.std_error,
    );
    if first.price.to_bits() != r.price.to_bits() {
        println!("{name}: WARNING the runs gave different bits");
    }
    // the geometric basket without the control against its closed form
    let geo = basket(n, BasketAverage::Geometric);
    let plain = McParams {
        control_variate: false,
        ..mc
    };
    let g = rt
        .price_basket(std::slice::from_ref(&geo), &plain, Method::MonteCarlo)
        .remove(0)?;
    let exact = geo.price_analytic()?;
    let z = (g.price - exact) / g.std_error;
    println!(
        "{name:4} geometric: mc {:.6} +- {:.6}, closed form {exact:.6}, z {z:+.2}{}",
        g.price,
        g.std_error,
        if z.abs() < 4.0 {
            ""
        } else {
            "  <-- more than 4 standard errors off"
        },
    );
    Ok(())
}

fn main() -> kiln::Result<()> {
    let cpu_only = std::env::args().any(|a| a == "cpu");
    let n: usize = env_or("KILN_BASKET_ASSETS", 8);
    if !cpu_only {
        match Runtime::new(DeviceRequest::Cuda(None), &Config::load(None)?) {
            Ok(rt) => {
                let paths: u64 = env_or("KILN_BASKET_GPU_PATHS", 1u64 << 24);
                // the bits must be the CPU's: a small run on both first
                let small = McParams {
                    paths: 4099,
                    antithetic: true,
                    control_variate: true,
                    ..McParams::default()
                };
                let spec = [basket(n, BasketAverage::Arithmetic)];
                let g = rt.price_basket(&spec, &small, Method::MonteCarlo).remove(0)?;
                let c = Runtime::cpu()
                    .price_basket(&spec, &small, Method::MonteCarlo)
                    .remove(0)?;
                println!(
                    "gpu vs cpu bits on 4099 paths, N = {n}: {}",
                    if g.price.to_bits() == c.price.to_bits() {
                        "equal"
                    } else {
                        "DIFFERENT"
                    }
                );
                measure(&rt, "gpu", n, paths)?;
            }
            Err(e) => println!("gpu: not usable ({e})"),
        }
    }
    measure(
        &Runtime::cpu(),
        "cpu",
        n,
        env_or("KILN_BASKET_CPU_PATHS", 1u64 << 18),
    )?;
    Ok(())
}
