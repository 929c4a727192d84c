//! Heston Monte Carlo throughput: paths per second of a European call (QE scheme), on the
//! GPU (2^24 paths x 256 steps) when one is usable and on the CPU (2^16 x 256), each after
//! a warm-up, the median of 5 timed runs (wall clock of `Runtime::price_heston`), and the
//! price against the semi-analytic one.
//!
//! ```text
//! cargo run --release -p kiln --example heston_rate            # both engines
//! cargo run --release -p kiln --example heston_rate -- cpu     # the CPU only
//! KILN_HESTON_GPU_PATHS=1048576 ...                             # a smaller GPU run
//! ```

use std::time::Instant;

use kiln::core::finance::heston::{HestonParams, HestonSpec};
use kiln::core::finance::{McParams, OptionSpec, OptionType};
use kiln::{Config, DeviceRequest, Runtime};

fn measure(rt: &Runtime, name: &str, spec: &HestonSpec, paths: u64, steps: u32) -> kiln::Result<()> {
    let mc = McParams {
        paths,
        steps,
        seed: 2008,
        ..McParams::default()
    };
    let exact = spec.price_analytic()?;
    // warm-up (on a GPU: loads or compiles the kernels)
    let t0 = Instant::now();
    let first = rt.price_heston(&[*spec], &mc).remove(0)?;
    let cold = t0.elapsed().as_secs_f64();
    let mut times = Vec::new();
    let mut r = first;
    for _ in 0..5 {
        let t = Instant::now();
        r = rt.price_heston(&[*spec], &mc).remove(0)?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let median = times[2];
    let z = (r.price - exact) / r.std_error;
    println!(
        "{name:4} {paths:>9} paths x {steps} steps: median {:9.3} ms (first call {:.3} s), {:.3e} paths/s, {:.3e} path-steps/s; price {:.6} +- {:.6}, closed form {exact:.6}, z {z:+.2}{}",
        median * 1e3,
        cold,
        paths as f64 / median,
        paths as f64 * f64::from(steps) / median,
        r.price,
        r.std_error,
        if z.abs() < 4.0 { "" } else { "  <-- more than 4 standard errors off" },
    );
    if first.price.to_bits() != r.price.to_bits() {
        println!("{name}: WARNING the runs gave different bits");
    }
    Ok(())
}

fn main() -> kiln::Result<()> {
    let cpu_only = std::env::args().any(|a| a == "cpu");
    let spec = HestonSpec {
        option: OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.0, 0.0, 0.2, 1.0),
        heston: HestonParams {
            kappa: 1.5768,
            theta: 0.0398,
            xi: 0.5751,
            rho: -0.5711,
            v0: 0.0175,
        },
    };
    if !cpu_only {
        match Runtime::new(DeviceRequest::Cuda(None), &Config::load(None)?) {
            Ok(rt) => {
                let paths = std::env::var("KILN_HESTON_GPU_PATHS")
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(1u64 << 24);
                // the bits must be the CPU's: a small run on both first
                let small = McParams {
                    paths: 4099,
                    steps: 17,
                    ..McParams::default()
                };
                let g = rt.price_heston(&[spec], &small).remove(0)?;
                let c = Runtime::cpu().price_heston(&[spec], &small).remove(0)?;
                println!(
                    "gpu vs cpu bits on 4099 x 17: {}",
                    if g.price.to_bits() == c.price.to_bits() {
                        "equal"
                    } else {
                        "DIFFERENT"
                    }
                );
                measure(&rt, "gpu", &spec, paths, 256)?;
            }
            Err(e) => println!("gpu: not usable ({e})"),
        }
    }
    measure(&Runtime::cpu(), "cpu", &spec, 1 << 16, 256)?;
    Ok(())
}
