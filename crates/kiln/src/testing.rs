//! Test support: one test body on every backend ([`test_device!`](crate::test_device)),
//! and the gate every GPU test passes through.
//!
//! A GPU test is marked twice. At build time it carries
//! `#[cfg_attr(not(feature = "gpu-tests"), ignore = "needs a GPU: ...")]`, so that a plain
//! `cargo test` reports it as ignored, never as a pass that ran nothing. At run time (built
//! with `--features gpu-tests`) it asks [`gpu_or_skip`] or [`cuda_runtime_or_skip`]: these
//! skip only where this machine has no GPU (no driver, or a driver that reports no device),
//! printing the reason and appending it to `KILN_SKIP_LOG` ([`kiln_testkit::skip`]), and
//! fail instead when `KILN_REQUIRE_GPU=1`. A machine that has a GPU but cannot start the
//! CUDA runtime fails the test. The CUDA runtime is created once per test binary and shared.

use crate::Runtime;
use kiln_core::{Config, DeviceRequest};
use std::sync::OnceLock;

pub use kiln_testkit::{required, skip, skip_unless_required, REQUIRE_GPU};

static CUDA: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();
static NO_GPU: OnceLock<Option<String>> = OnceLock::new();

/// Whether `KILN_REQUIRE_GPU=1` is set (GPU tests must then run, not skip).
pub fn gpu_required() -> bool {
    required(REQUIRE_GPU)
}

/// Why this machine has no GPU, or `None` when it has one (probed once per process).
pub fn no_gpu_reason() -> Option<&'static str> {
    NO_GPU.get_or_init(kiln_cuda::discovery::no_gpu_reason).as_deref()
}

/// `true` where a GPU is present. Where none is, records a skip of `test` with the reason
/// and returns `false`, or panics when `KILN_REQUIRE_GPU=1`.
pub fn gpu_or_skip(test: &str) -> bool {
    match no_gpu_reason() {
        None => true,
        Some(reason) => {
            skip_unless_required(REQUIRE_GPU, &format!("{test} [cuda]"), reason);
            false
        }
    }
}

/// The shared CUDA runtime, or `None` after a recorded skip where this machine has no GPU
/// ([`gpu_or_skip`]). Panics when a GPU is present but the runtime cannot start on it.
pub fn cuda_runtime_or_skip(test: &str) -> Option<&'static Runtime> {
    if !gpu_or_skip(test) {
        return None;
    }
    let rt = CUDA.get_or_init(|| {
        let cfg = Config::load(None).map_err(|e| e.to_string())?;
        Runtime::new(DeviceRequest::Cuda(None), &cfg).map_err(|e| e.to_string())
    });
    match rt {
        Ok(rt) => Some(rt),
        Err(e) => panic!("{test}: this machine has a GPU but the CUDA runtime did not start: {e}"),
    }
}

/// Run one test body on the CPU and on CUDA. The body is a closure taking `&Runtime`. The
/// CUDA variant is a GPU test: ignored unless the calling crate is built with its
/// `gpu-tests` feature, skipped (and counted) where no GPU is present.
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
            #[cfg_attr(
                not(feature = "gpu-tests"),
                ignore = "needs a GPU: cargo test --features gpu-tests"
            )]
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
