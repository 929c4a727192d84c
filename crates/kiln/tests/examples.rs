//! The user-kernel examples of `docs/examples/` (raw CUDA kernels and an element-wise
//! expression kernel, called through the Rust functions in `docs/examples/rust/`), each
//! checked against kiln's built-in op on random inputs at odd sizes:
//!
//! - `matmul_naive` against `Tensor::matmul` (f32), within the dot-product error bound;
//! - `filter3x3_shared` against `Tensor::filter2d` (same weights, mode `nearest`, the
//!   direct path), within the f32 summation bound of 9 taps;
//! - `conv3x3x3` against `Tensor::filter3d` likewise (27 taps);
//! - `mc_gbm` against kiln's closed-form Black-Scholes price (4 standard errors) and
//!   kiln's own Monte Carlo price (4 combined standard errors);
//! - `sigmoid_f16` against `Tensor::sigmoid` on float16: bit for bit on the CPU (both are
//!   `1 / (1 + exp(-x))` in f32 with kiln's `exp`, rounded to half once), within 1 half ulp
//!   on a GPU (CUDA's `expf` in a kernel built with `--fmad=false` against kiln's map kernel
//!   may differ in the last f32 bit, which moves the half rounding only next to a tie).
//!
//! Every source compiles with NVRTC alone (no GPU; required under KILN_REQUIRE_NVRTC=1).
//! The raw-kernel tests are GPU tests: ignored without the `gpu-tests` feature, skipped
//! (printing why) without a GPU, failed instead under KILN_REQUIRE_GPU=1. The sigmoid runs
//! on the CPU runtime everywhere and on the GPU under `gpu-tests`.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

#[path = "../../../docs/examples/rust/conv3x3x3.rs"]
mod conv3x3x3;
#[path = "../../../docs/examples/rust/filter3x3_shared.rs"]
mod filter3x3_shared;
#[path = "../../../docs/examples/rust/matmul_naive.rs"]
mod matmul_naive;
#[path = "../../../docs/examples/rust/mc_gbm.rs"]
mod mc_gbm;
#[path = "../../../docs/examples/rust/sigmoid_f16.rs"]
mod sigmoid_f16;

use kiln::core::backend::f16;
use kiln::core::finance::{McParams, OptionSpec, OptionType};
use kiln::core::imaging::{BoundaryMode, Kernel2D, Kernel3D};
use kiln::finance::Method;
use kiln::imaging::FilterPath;
use kiln::linalg::GemmPrecision;
use kiln::{testing, Runtime};

const EPS: f64 = f32::EPSILON as f64;

fn gpu(test: &str) -> Option<&'static Runtime> {
    testing::cuda_runtime_or_skip(test)
}

/// Every example kernel compiles for sm_80 and sm_90 with kiln's options and no warning
/// (needs only libnvrtc, so it runs without a GPU).
#[test]
fn every_example_kernel_compiles_without_warnings() {
    use kiln::kernels::UserSource;
    if !kiln::device::nvrtc_available() {
        testing::skip_unless_required(
            "KILN_REQUIRE_NVRTC",
            "every_example_kernel_compiles_without_warnings",
            "libnvrtc cannot be loaded",
        );
        return;
    }
    for (file, src, kernel) in [
        ("matmul_naive.cu", matmul_naive::SOURCE, "matmul_naive"),
        (
            "filter3x3_shared.cu",
            filter3x3_shared::SOURCE,
            "filter3x3_shared",
        ),
        ("conv3x3x3.cu", conv3x3x3::SOURCE, "conv3x3x3"),
        ("mc_gbm.cu", mc_gbm::SOURCE, "mc_gbm_call"),
    ] {
        // kiln reads the parameter list from the source, to check every launch's arguments
        let sigs = kiln::kernels::signature::kernels(src);
        assert!(
            sigs.get(kernel).is_some_and(|s| s.is_ok()),
            "{file}: kiln cannot read `{kernel}`'s parameters"
        );
        let u = UserSource::new(src, &[]).unwrap();
        for arch in ["sm_80", "sm_90"] {
            match u.compile_full(arch) {
                Ok(c) => assert!(c.log.trim().is_empty(), "{file} on {arch} warns:\n{}", c.log),
                Err(e) => panic!("{file} on {arch}: {e}"),
            }
        }
    }
}

/// Each raw-kernel example on a CPU runtime returns kiln's "needs a GPU" error, never a
/// panic (runs in CI).
#[test]
fn raw_examples_on_a_cpu_runtime_say_they_need_a_gpu() {
    let rt = Runtime::cpu();
    let call = bs_call();
    let errors = [
        matmul_naive::matmul(&rt, &[1.0], &[1.0], 1, 1, 1).unwrap_err(),
        filter3x3_shared::filter3x3(&rt, &[1.0], 1, 1, &[1.0; 9]).unwrap_err(),
        conv3x3x3::conv3x3x3(&rt, &[1.0], [1, 1, 1], &[1.0; 27]).unwrap_err(),
        mc_gbm::price_call(&rt, &call, 1000, 4, 1).unwrap_err(),
    ];
    for e in errors {
        assert!(e.to_string().contains("raw CUDA kernels need a GPU"), "{e}");
    }
}

/// Half-ulp distance of two non-negative, non-NaN half values (sigmoid's range).
fn half_ulps(a: f16, b: f16) -> u32 {
    (i32::from(a.to_bits()) - i32::from(b.to_bits())).unsigned_abs()
}

kiln::test_device!(sigmoid_f16_matches_the_builtin_sigmoid, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    let mut x: Vec<f16> = testing::random_f32(4099, -12.0, 12.0, seed)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    // the ends: exp overflows and underflows, ±0, the largest half, NaN
    for v in [0.0f32, -0.0, 1e-4, -1e-4, 17.0, -17.0, 65504.0, -65504.0] {
        x.push(f16::from_f32(v));
    }
    x.extend([f16::INFINITY, f16::NEG_INFINITY, f16::NAN]);
    let n = x.len();
    let got = sigmoid_f16::sigmoid(rt, &x).unwrap();
    let want = rt
        .tensor(&x, &[n])
        .unwrap()
        .sigmoid()
        .unwrap()
        .to_vec::<f16>()
        .unwrap();
    assert_eq!(got.len(), n);
    let on_cpu = rt.cuda().is_none();
    for j in 0..n {
        let (g, w) = (got[j], want[j]);
        if x[j].is_nan() {
            assert!(g.is_nan() && w.is_nan(), "x=NaN: {g} vs {w}");
            continue;
        }
        if on_cpu {
            assert_eq!(g.to_bits(), w.to_bits(), "seed {seed} x={}: {g} vs {w}", x[j]);
        } else {
            assert!(half_ulps(g, w) <= 1, "seed {seed} x={}: {g} vs {w}", x[j]);
        }
        // and within 1 half ulp of the correctly rounded value
        let exact = f16::from_f64(1.0 / (1.0 + (-x[j].to_f64()).exp()));
        assert!(
            half_ulps(g, exact) <= 1,
            "seed {seed} x={}: {g} vs exact {exact}",
            x[j]
        );
    }
});

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn matmul_naive_matches_the_builtin_matmul() {
    let Some(rt) = gpu("matmul_naive_matches_the_builtin_matmul") else {
        return;
    };
    let seed = testing::fresh_seed();
    for (i, (m, k, n)) in [(65, 31, 47), (1, 1, 1), (17, 300, 33), (128, 64, 129)]
        .into_iter()
        .enumerate()
    {
        let a = testing::random_f32(m * k, -1.0, 1.0, seed + 2 * i as u64);
        let b = testing::random_f32(k * n, -1.0, 1.0, seed + 2 * i as u64 + 1);
        let got = matmul_naive::matmul(rt, &a, &b, m, k, n).unwrap();
        let (ta, tb) = (rt.tensor(&a, &[m, k]).unwrap(), rt.tensor(&b, &[k, n]).unwrap());
        let want = ta
            .matmul(&tb, GemmPrecision::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for r in 0..m {
            for c in 0..n {
                // each side is within k·eps/2·Σ|a||b| of the exact dot product
                let scale: f64 = (0..k)
                    .map(|p| (a[r * k + p] as f64 * b[p * n + c] as f64).abs())
                    .sum();
                let tol = k as f64 * EPS * scale + f32::MIN_POSITIVE as f64;
                let (g, w) = (got[r * n + c] as f64, want[r * n + c] as f64);
                assert!(
                    (g - w).abs() <= tol,
                    "seed {seed} {m}x{k}·{k}x{n} C[{r}][{c}]: {g} vs {w} (tol {tol:e})"
                );
            }
        }
    }
}

/// The largest |x| of a slice.
fn max_abs(x: &[f32]) -> f64 {
    x.iter().fold(0.0f64, |m, &v| m.max((v as f64).abs()))
}

/// Every element within `tol` of the built-in's (an unwritten, NaN one fails).
fn close(what: &str, got: &[f32], want: &[f32], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (j, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            ((g as f64) - (w as f64)).abs() <= tol,
            "{what} element {j}: {g} vs {w} (tol {tol:e})"
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn filter3x3_shared_matches_the_builtin_filter2d() {
    let Some(rt) = gpu("filter3x3_shared_matches_the_builtin_filter2d") else {
        return;
    };
    let seed = testing::fresh_seed();
    // a non-separable 3×3 kernel, so filter2d takes the direct 9-tap sum as the example does
    let w32: [f32; 9] = testing::random_f32(9, -1.0, 1.0, seed).try_into().unwrap();
    let kernel = Kernel2D::new([3, 3], w32.iter().map(|&v| v as f64).collect()).unwrap();
    let abs_w: f64 = w32.iter().map(|&v| (v as f64).abs()).sum();
    for (i, (h, w)) in [(67, 129), (1, 1), (16, 16), (17, 33), (2, 300), (300, 3)]
        .into_iter()
        .enumerate()
    {
        let img = testing::random_f32(h * w, -1.0, 1.0, seed + 1 + i as u64);
        let got = filter3x3_shared::filter3x3(rt, &img, h, w, &w32).unwrap();
        let want = rt
            .tensor(&img, &[h, w])
            .unwrap()
            .filter2d(&kernel, BoundaryMode::Nearest, FilterPath::Direct)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        // 9 f32 fma roundings on either side: 9·eps·Σ|w|·max|x| bounds the difference
        let tol = 9.0 * EPS * abs_w * max_abs(&img) + f32::MIN_POSITIVE as f64;
        close(&format!("seed {seed} {h}x{w}"), &got, &want, tol);
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn conv3x3x3_matches_the_builtin_filter3d() {
    let Some(rt) = gpu("conv3x3x3_matches_the_builtin_filter3d") else {
        return;
    };
    let seed = testing::fresh_seed();
    let w32: [f32; 27] = testing::random_f32(27, -1.0, 1.0, seed).try_into().unwrap();
    let kernel = Kernel3D::new([3, 3, 3], w32.iter().map(|&v| v as f64).collect()).unwrap();
    let abs_w: f64 = w32.iter().map(|&v| (v as f64).abs()).sum();
    for (i, dims) in [[33, 45, 29], [1, 1, 1], [2, 3, 70], [9, 17, 8]]
        .into_iter()
        .enumerate()
    {
        let n: usize = dims.iter().product();
        let vol = testing::random_f32(n, -1.0, 1.0, seed + 1 + i as u64);
        let got = conv3x3x3::conv3x3x3(rt, &vol, dims, &w32).unwrap();
        let want = rt
            .tensor(&vol, &dims)
            .unwrap()
            .filter3d(&kernel, BoundaryMode::Nearest, FilterPath::Direct)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let tol = 27.0 * EPS * abs_w * max_abs(&vol) + f32::MIN_POSITIVE as f64;
        close(&format!("seed {seed} {dims:?}"), &got, &want, tol);
    }
}

fn bs_call() -> mc_gbm::Call {
    mc_gbm::Call {
        spot: 100.0,
        strike: 105.0,
        rate: 0.03,
        dividend: 0.01,
        volatility: 0.25,
        maturity: 1.5,
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn mc_gbm_matches_black_scholes_and_kilns_monte_carlo() {
    let Some(rt) = gpu("mc_gbm_matches_black_scholes_and_kilns_monte_carlo") else {
        return;
    };
    let c = bs_call();
    let specs = [OptionSpec::european(
        OptionType::Call,
        c.spot,
        c.strike,
        c.rate,
        c.dividend,
        c.volatility,
        c.maturity,
    )];
    let paths = 1u64 << 20;
    let seed = testing::fresh_seed();
    // 7 steps: the last Philox call serves 3 of its 4 normals
    let got = mc_gbm::price_call(rt, &c, paths, 7, seed).unwrap();
    let mc = McParams {
        paths,
        seed,
        ..McParams::default()
    };
    let exact = rt.price(&specs, Method::Analytic, &mc).remove(0).unwrap();
    let kiln_mc = rt.price(&specs, Method::MonteCarlo, &mc).remove(0).unwrap();
    let what = format!(
        "seed {seed}: example {got:?}, closed form {}, kiln MC {}",
        exact.price, kiln_mc.price
    );
    // the same option and path count: the standard errors measure the same payoff spread
    assert!(
        got.std_error > 0.5 * kiln_mc.std_error && got.std_error < 2.0 * kiln_mc.std_error,
        "{what}"
    );
    assert!((got.price - exact.price).abs() <= 4.0 * got.std_error, "{what}");
    let combined = got.std_error.hypot(kiln_mc.std_error);
    assert!((got.price - kiln_mc.price).abs() <= 4.0 * combined, "{what}");
    // counter-based: the same seed gives the same bits, another seed other numbers
    let again = mc_gbm::price_call(rt, &c, paths, 7, seed).unwrap();
    assert_eq!(again.price.to_bits(), got.price.to_bits(), "{what}");
    let other = mc_gbm::price_call(rt, &c, paths, 7, seed ^ 0x5555).unwrap();
    assert_ne!(other.price.to_bits(), got.price.to_bits(), "{what}");
    // one step (the terminal price drawn directly) prices the same option
    let one = mc_gbm::price_call(rt, &c, paths, 1, seed).unwrap();
    assert!(
        (one.price - exact.price).abs() <= 4.0 * one.std_error,
        "seed {seed}: one step {one:?}"
    );
}
