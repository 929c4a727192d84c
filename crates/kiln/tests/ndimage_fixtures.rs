//! kiln's linear ndimage filters against scipy.ndimage, from the committed fixtures
//! (`tests/fixtures/ndimage/`, made by `scripts/ndimage_fixtures.py`: every function, every
//! mode including grid-wrap/grid-constant, odd and even kernels, origins, axes, f32, u8 and
//! u16 inputs). Each case runs on the CPU and, where a GPU is usable, on CUDA; both must be
//! within `ndimage_tolerance` of scipy's float32 result (8/16-bit outputs: within half a
//! step of scipy's result rounded and clamped, plus that bound). The GPU is also compared
//! with the CPU on fresh random inputs at odd sizes.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use kiln::ndimage::{ndimage_tolerance, LinearFilter};
use kiln::{testing, Runtime};
use kiln_core::imaging::linear_spec::{build, NdParams};
use kiln_io::NpyDtype;
use std::path::PathBuf;

/// The fixtures: where cargo built the test, else (a test executable carried to another
/// machine, run from the repository root) the same path under the current directory.
fn dir() -> PathBuf {
    let baked = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ndimage");
    if baked.is_dir() {
        baked
    } else {
        PathBuf::from("crates/kiln/tests/fixtures/ndimage")
    }
}

struct Case {
    name: String,
    filter: LinearFilter,
    input: (Vec<f64>, Vec<usize>, NpyDtype),
    expected: Vec<f64>,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(dir().join("cases.txt")).unwrap();
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let mut it = line.split_whitespace();
        let name = it.next().unwrap().to_string();
        let (mut f, mut input, mut ndim, mut expected) =
            (String::new(), String::new(), 0usize, String::new());
        let mut p = NdParams::default();
        for kv in it {
            let (k, v) = kv.split_once('=').unwrap();
            match k {
                "fn" => f = v.into(),
                "input" => input = v.into(),
                "ndim" => ndim = v.parse().unwrap(),
                "expected" => expected = v.into(),
                _ => p.set(k, v).unwrap_or_else(|e| panic!("{name}: {e}")),
            }
        }
        let filter = build(&f, ndim, &p).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (a, dt) = kiln_io::read_npy_f64(dir().join(&input)).unwrap();
        let (e, _) = kiln_io::read_npy_f64(dir().join(&expected)).unwrap();
        assert_eq!(a.shape(), e.shape(), "{name}");
        out.push(Case {
            name,
            filter,
            input: (a.iter().copied().collect(), a.shape().to_vec(), dt),
            expected: e.iter().copied().collect(),
        });
    }
    assert!(out.len() > 300, "the manifest lost cases: {}", out.len());
    out
}

/// Runs a case on `rt`: the output as f64 and the largest |input|.
fn run(rt: &Runtime, c: &Case) -> kiln::Result<(Vec<f64>, f64)> {
    let (data, shape, dt) = &c.input;
    let max_in = data.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let got: Vec<f64> = match dt {
        NpyDtype::U8 => {
            let v: Vec<u8> = data.iter().map(|&x| x as u8).collect();
            let t = rt.tensor(&v, shape)?.ndimage(&c.filter)?;
            t.to_vec::<u8>()?.iter().map(|&x| x as f64).collect()
        }
        NpyDtype::U16 => {
            let v: Vec<u16> = data.iter().map(|&x| x as u16).collect();
            let t = rt.tensor(&v, shape)?.ndimage(&c.filter)?;
            t.to_vec::<u16>()?.iter().map(|&x| x as f64).collect()
        }
        _ => {
            let v: Vec<f32> = data.iter().map(|&x| x as f32).collect();
            rt.ndimage(&v, shape, &c.filter)?
                .iter()
                .map(|&x| x as f64)
                .collect()
        }
    };
    Ok((got, max_in))
}

/// The worst |got - want| / bound over the case (> 1 fails).
fn worst(c: &Case, got: &[f64], max_in: f64) -> f64 {
    let tol = ndimage_tolerance(&c.filter, max_in.max(c.filter.mode.cval().unwrap_or(0.0).abs()));
    let top = match c.input.2 {
        NpyDtype::U8 => Some(255.0),
        NpyDtype::U16 => Some(65535.0),
        _ => None,
    };
    got.iter()
        .zip(&c.expected)
        .map(|(&g, &e)| {
            if g.is_nan() {
                return f64::INFINITY;
            }
            match top {
                Some(t) => ((g - e.clamp(0.0, t)).abs() - 0.5).max(0.0) / tol,
                None => (g - e).abs() / tol,
            }
        })
        .fold(0.0, f64::max)
}

fn check_all(rt: &Runtime, label: &str) {
    let cases = cases();
    let mut failed = Vec::new();
    let mut max_ratio: f64 = 0.0;
    for c in &cases {
        match run(rt, c) {
            Ok((got, max_in)) => {
                let r = worst(c, &got, max_in);
                max_ratio = max_ratio.max(r);
                if r > 1.0 {
                    failed.push(format!("{} ({}): error {r:.2}x the bound", c.name, c.filter.name));
                }
            }
            Err(e) => failed.push(format!("{}: {e}", c.name)),
        }
    }
    eprintln!(
        "{label}: {} scipy cases, worst error {max_ratio:.3} of the bound",
        cases.len()
    );
    assert!(
        failed.is_empty(),
        "{label}: {} of {} cases failed:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

#[test]
fn cpu_matches_scipy() {
    check_all(&Runtime::cpu(), "cpu");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn cuda_matches_scipy() {
    let Some(rt) = testing::cuda_runtime_or_skip("cuda_matches_scipy") else {
        return;
    };
    check_all(rt, "cuda");
}

/// GPU against CPU on fresh random data, sizes that leave partial tiles, every function.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn cuda_matches_cpu_on_random_inputs() {
    let Some(rt) = testing::cuda_runtime_or_skip("cuda_matches_cpu_on_random_inputs") else {
        return;
    };
    let cpu = Runtime::cpu();
    let seed = testing::fresh_seed();
    // "2-D parameters | 3-D parameters" where a per-axis list differs by rank
    let specs: &[(&str, &str)] = &[
        ("gaussian_filter", "sigma=4"),
        (
            "gaussian_filter",
            "sigma=1.5,0.7 order=1,2 mode=wrap | sigma=1.5,0.7,1.1 order=1,2,0 mode=wrap",
        ),
        ("gaussian_laplace", "sigma=2 mode=nearest"),
        ("gaussian_gradient_magnitude", "sigma=1.2 mode=mirror"),
        (
            "uniform_filter",
            "size=4,7 origin=1,-2 mode=constant cval=0.5 | size=4,7,2 origin=1,-2,0 mode=constant cval=0.5",
        ),
        (
            "correlate",
            "weights=1,2,3,4,5,6,7,8,9,10,11,12 wshape=3,4 origin=-1,1 \
             | weights=1,2,3,4,5,6,7,8,9,10,11,12 wshape=2,3,2 origin=-1,1,0",
        ),
        (
            "convolve",
            "weights=1,2,3,4,5,6,7,8,9,10,11,12 wshape=2,6 mode=grid-wrap \
             | weights=1,2,3,4,5,6,7,8,9,10,11,12 wshape=2,3,2 mode=grid-wrap",
        ),
        ("correlate1d", "weights=1,-1,2,0.5 axis=0 origin=-2"),
        ("sobel", "axis=0"),
        ("prewitt", "axis=-1 mode=constant cval=-1"),
        ("laplace", "mode=reflect"),
    ];
    for (i, (f, kv)) in specs.iter().enumerate() {
        for (j, shape) in [vec![37usize, 45], vec![5, 19, 23], vec![130, 257]]
            .iter()
            .enumerate()
        {
            let mut p = NdParams::default();
            let kv = match kv.split_once('|') {
                Some((two, three)) => {
                    if shape.len() == 3 {
                        three
                    } else {
                        two
                    }
                }
                None => kv,
            };
            for t in kv.split_whitespace() {
                let (k, v) = t.split_once('=').unwrap();
                p.set(k, v).unwrap();
            }
            let filter = build(f, shape.len(), &p).unwrap();
            let n: usize = shape.iter().product();
            let x = testing::random_f32(n, -2.0, 2.0, seed + (i * 3 + j) as u64);
            let want = cpu.ndimage(&x, shape, &filter).unwrap();
            let got = rt.ndimage(&x, shape, &filter).unwrap();
            let tol = ndimage_tolerance(&filter, 2.0);
            for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - w as f64).abs() <= tol,
                    "{} {shape:?} seed {seed}: element {k}: gpu {g} cpu {w} (bound {tol})",
                    filter.name
                );
            }
        }
    }
}
