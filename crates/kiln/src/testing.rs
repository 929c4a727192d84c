//! Test support: one test body on every backend ([`test_device!`](crate::test_device)).
//!
//! GPU variants skip with a printed reason when no GPU is usable, and fail instead when
//! `KILN_REQUIRE_GPU=1`. The CUDA runtime is created once per test binary and shared.

use crate::Runtime;
use kiln_core::{Config, DeviceRequest};
use std::sync::OnceLock;

static CUDA: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();

/// Whether `KILN_REQUIRE_GPU=1` is set (GPU tests must then run, not skip).
pub fn gpu_required() -> bool {
    std::env::var("KILN_REQUIRE_GPU")
        .map(|v| v == "1")
        .unwrap_or(false)
}

/// The shared CUDA runtime, or `None` after printing why the test is skipped.
/// Panics when the GPU is required but unusable.
pub fn cuda_runtime_or_skip(test: &str) -> Option<&'static Runtime> {
    let rt = CUDA.get_or_init(|| {
        let cfg = Config::load(None).map_err(|e| e.to_string())?;
        Runtime::new(DeviceRequest::Cuda(None), &cfg).map_err(|e| e.to_string())
    });
    match rt {
        Ok(rt) => Some(rt),
        Err(reason) if gpu_required() => panic!("KILN_REQUIRE_GPU=1 but {test} cannot use a GPU: {reason}"),
        Err(reason) => {
            eprintln!("SKIP {test} [cuda]: {reason}");
            None
        }
    }
}

/// Run one test body on the CPU and on CUDA. The body is a closure taking `&Runtime`.
///
/// ```ignore
/// kiln::test_device!(sigmoid_matches, |rt: &kiln::Runtime| { ... });
/// ```
#[macro_export]
macro_rules! test_device {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn cpu() {
                let rt = $crate::Runtime::cpu();
                let f: &dyn Fn(&$crate::Runtime) = &$body;
                f(&rt);
            }
            #[test]
            fn cuda() {
                if let Some(rt) =
                    $crate::testing::cuda_runtime_or_skip(concat!(module_path!(), "::", stringify!($name)))
                {
                    let f: &dyn Fn(&$crate::Runtime) = &$body;
                    f(rt);
                }
            }
        }
    };
}

/// Whether the tests run under compute-sanitizer (`scripts/sanitize.sh` sets
/// `KILN_UNDER_SANITIZER=1`): the slowest GPU tests then leave out their largest shapes,
/// which instrumentation makes take minutes and which exercise no code path the smaller
/// shapes miss (the full sizes run uninstrumented in `scripts/gpu-check.sh`).
pub fn under_sanitizer() -> bool {
    std::env::var("KILN_UNDER_SANITIZER").as_deref() == Ok("1")
}

/// `n` uniform random f32 in `[lo, hi)`, never all zeros.
pub fn random_f32(n: usize, lo: f32, hi: f32, seed: u64) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// A seed that differs every run (fresh inputs), printed so a failure can be replayed with
/// `KILN_TEST_SEED`.
pub fn fresh_seed() -> u64 {
    if let Some(s) = std::env::var("KILN_TEST_SEED").ok().and_then(|s| s.parse().ok()) {
        return s;
    }
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(42);
    eprintln!("seed {s} (replay with KILN_TEST_SEED={s})");
    s
}

/// One option of every style, calls and puts (S=100, K=105, r=3%, q=1%, σ=25%, T=0.75),
/// barriers monitored continuously and at discrete dates: the book the finance GPU tests
/// price on both backends.
pub fn every_style() -> Vec<kiln_core::finance::OptionSpec> {
    use kiln_core::finance::{OptionSpec, OptionType, Style};
    let mut v = Vec::new();
    for kind in [OptionType::Call, OptionType::Put] {
        let b = OptionSpec::european(kind, 100.0, 105.0, 0.03, 0.01, 0.25, 0.75);
        v.push(b);
        v.push(b.with_style(Style::AsianArithmetic, Some(12), None));
        v.push(b.with_style(Style::AsianGeometric, Some(7), None));
        v.push(b.with_style(Style::BarrierUpOut, None, Some(130.0)));
        v.push(b.with_style(Style::BarrierUpIn, None, Some(130.0)));
        v.push(b.with_style(Style::BarrierDownOut, None, Some(85.0)));
        v.push(b.with_style(Style::BarrierDownIn, None, Some(85.0)));
        // discrete monitoring at 11 dates (the others: continuous)
        v.push(b.with_style(Style::BarrierUpOut, Some(11), Some(130.0)));
        v.push(b.with_style(Style::BarrierDownIn, Some(11), Some(85.0)));
    }
    v
}

/// Asserts two prices are the same to the bit: price, standard error, delta, vega and paths.
pub fn assert_same_price_bits(
    a: &kiln_core::finance::PriceResult,
    b: &kiln_core::finance::PriceResult,
    what: &str,
) {
    assert_eq!(
        a.price.to_bits(),
        b.price.to_bits(),
        "{what}: price {} vs {}",
        a.price,
        b.price
    );
    assert_eq!(a.std_error.to_bits(), b.std_error.to_bits(), "{what}: std_error");
    assert_eq!(
        a.delta.map(f64::to_bits),
        b.delta.map(f64::to_bits),
        "{what}: delta"
    );
    assert_eq!(a.vega.map(f64::to_bits), b.vega.map(f64::to_bits), "{what}: vega");
    assert_eq!(a.paths_used, b.paths_used, "{what}: paths");
}
