//! filter2d / filter3d against independent naive float64 code (its own boundary-index
//! function, written as repeated folding rather than modular arithmetic), hand-worked
//! scipy values, and an `#[ignore]`d timing run.

use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D};
use kiln_cpu::imaging::{
    filter2d, filter2d_batch, filter2d_channels, filter2d_into, filter3d, path_2d, path_3d, FilterPath,
};
use ndarray::{Array2, Array3, ArrayView2, Axis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MODES: [BoundaryMode; 6] = [
    BoundaryMode::Constant(0.0),
    BoundaryMode::Constant(1.5),
    BoundaryMode::Nearest,
    BoundaryMode::Reflect,
    BoundaryMode::Mirror,
    BoundaryMode::Wrap,
];

/// Where index `i` of an axis of length `n` reads, by folding it back step by step.
fn fold(mode: BoundaryMode, mut i: i64, n: i64) -> Option<usize> {
    match mode {
        BoundaryMode::Constant(_) => {
            if i < 0 || i >= n {
                return None;
            }
        }
        BoundaryMode::Nearest => i = i.max(0).min(n - 1),
        BoundaryMode::Wrap => {
            while i < 0 {
                i += n;
            }
            while i >= n {
                i -= n;
            }
        }
        BoundaryMode::Reflect => loop {
            if i < 0 {
                i = -i - 1;
            } else if i >= n {
                i = 2 * n - 1 - i;
            } else {
                break;
            }
        },
        BoundaryMode::Mirror => {
            if n == 1 {
                i = 0;
            }
            loop {
                if i < 0 {
                    i = -i;
                } else if i >= n {
                    i = 2 * (n - 1) - i;
                } else {
                    break;
                }
            }
        }
    }
    Some(i as usize)
}

fn cval(mode: BoundaryMode) -> f64 {
    match mode {
        BoundaryMode::Constant(c) => c,
        _ => 0.0,
    }
}

/// Naive correlation of a `(d, h, w)` volume with a `(kd, k, k)` kernel, in scipy's term
/// order (row-major kernel, weights `|w| <= f64::EPSILON` skipped). Returns the sums and
/// the sums of |w·x| (for error bounds).
#[allow(clippy::too_many_arguments)]
fn naive(
    x: &[f32],
    (d, h, w): (usize, usize, usize),
    kw: &[f64],
    kd: usize,
    k: usize,
    mode: BoundaryMode,
) -> (Vec<f64>, Vec<f64>) {
    let (rd, r) = (kd as i64 / 2, k as i64 / 2);
    let (mut out, mut mag) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    for z in 0..d {
        for y in 0..h {
            for j in 0..w {
                let (mut s, mut m) = (0.0f64, 0.0f64);
                for a in 0..kd {
                    for b in 0..k {
                        for c in 0..k {
                            let wt = kw[(a * k + b) * k + c];
                            if wt.abs() <= f64::EPSILON {
                                continue;
                            }
                            let zz = fold(mode, z as i64 + a as i64 - rd, d as i64);
                            let yy = fold(mode, y as i64 + b as i64 - r, h as i64);
                            let jj = fold(mode, j as i64 + c as i64 - r, w as i64);
                            let v = match (zz, yy, jj) {
                                (Some(zz), Some(yy), Some(jj)) => x[(zz * h + yy) * w + jj] as f64,
                                _ => cval(mode),
                            };
                            s += wt * v;
                            m += (wt * v).abs();
                        }
                    }
                }
                out[(z * h + y) * w + j] = s;
                mag[(z * h + y) * w + j] = m;
            }
        }
    }
    (out, mag)
}

/// Naive 1-D passes in f64 (no rounding between them), each padding with the mode, as
/// scipy's per-axis filters do. `passes`: (axis of the (d,h,w) volume, weights).
fn naive_passes(
    x: &[f32],
    dims: (usize, usize, usize),
    passes: &[(usize, Vec<f64>)],
    mode: BoundaryMode,
) -> (Vec<f64>, Vec<f64>) {
    let (d, h, w) = dims;
    let mut cur: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let mut mag: Vec<f64> = cur.iter().map(|v| v.abs()).collect();
    for (axis, wts) in passes {
        let r = (wts.len() / 2) as i64;
        let (mut next, mut nmag) = (vec![0.0; cur.len()], vec![0.0; cur.len()]);
        for z in 0..d {
            for y in 0..h {
                for j in 0..w {
                    let (mut s, mut m) = (0.0, 0.0);
                    for (t, wt) in wts.iter().enumerate() {
                        let mut p = [z as i64, y as i64, j as i64];
                        p[*axis] += t as i64 - r;
                        let n = [d, h, w][*axis] as i64;
                        let (v, vm) = match fold(mode, p[*axis], n) {
                            Some(q) => {
                                p[*axis] = q as i64;
                                let idx = ((p[0] as usize) * h + p[1] as usize) * w + p[2] as usize;
                                (cur[idx], mag[idx])
                            }
                            None => (cval(mode), cval(mode).abs()),
                        };
                        s += wt * v;
                        m += wt.abs() * vm;
                    }
                    next[(z * h + y) * w + j] = s;
                    nmag[(z * h + y) * w + j] = m;
                }
            }
        }
        cur = next;
        mag = nmag;
    }
    (cur, mag)
}

fn half_ulp(v: f64) -> f64 {
    let a = (v.abs() as f32).max(f32::MIN_POSITIVE);
    (f32::from_bits(a.to_bits() + 1) - a) as f64 * 0.5
}

/// Direct path: bit-equal to the scipy-order f64 sum rounded once.
fn assert_exact(got: &[f32], want: &[f64], what: &str) {
    for (i, (&g, &r)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, r as f32, "{what}: element {i}: got {g}, reference {r}");
    }
}

/// Separable path: within one f32 rounding of |w·x| per pass.
fn assert_close(got: &[f32], want: &[f64], mag: &[f64], passes: usize, what: &str) {
    for (i, ((&g, &r), &m)) in got.iter().zip(want).zip(mag).enumerate() {
        let tol = passes as f64 * m * 2f64.powi(-24) * 1.001 + 1e-12 * m + half_ulp(r);
        assert!(
            (g as f64 - r).abs() <= tol,
            "{what}: element {i}: got {g}, reference {r}, tolerance {tol}"
        );
    }
}

fn random(rng: &mut StdRng, n: usize) -> Vec<f32> {
    // Offset so that no input is all zeros or symmetric about zero.
    (0..n).map(|_| rng.random_range(-1.0f32..1.0) + 0.25).collect()
}

fn random_kernel(rng: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-1.0f64..1.0)).collect()
}

/// Checks one 2-D kernel on a batch of `(n, h, w)` images under every mode and path.
fn check_2d(rng: &mut StdRng, kernel: &Kernel2D, (n, h, w): (usize, usize, usize)) {
    let x = random(rng, n * h * w);
    let k = kernel.size();
    for mode in MODES {
        let what = format!("{} on {n}x{h}x{w}, {mode}", kernel.name());
        let sep = kernel.separable_for(mode);
        let mut paths = vec![FilterPath::Auto, FilterPath::Direct];
        if sep.is_some() {
            paths.push(FilterPath::Separable);
        }
        for path in paths {
            let mut out = vec![f32::NAN; x.len()];
            filter2d_into(&x, [n, h, w], kernel, mode, path, &mut out).expect(&what);
            let what = format!("{what}, {path:?}");
            match (path_2d(kernel, mode, path).expect("path"), &sep) {
                (FilterPath::Separable, Some(s)) => {
                    let passes: Vec<(usize, Vec<f64>)> = s
                        .pass_order
                        .iter()
                        .map(|&a| (a + 1, s.factors[a].clone()))
                        .collect();
                    let (want, mag) = naive_passes(&x, (n, h, w), &passes, mode);
                    assert_close(&out, &want, &mag, 2, &what);
                    if s.exact && mode.cval().unwrap_or(0.0) != 0.0 {
                        continue; // presets pad per pass (scipy's sobel etc.)
                    }
                    let (want, mag) = naive(&x, (n, h, w), kernel.weights(), 1, k, mode);
                    assert_close(&out, &want, &mag, 2, &what);
                }
                _ => {
                    let (want, _) = naive(&x, (n, h, w), kernel.weights(), 1, k, mode);
                    assert_exact(&out, &want, &what);
                }
            }
        }
    }
}

const SIZES_2D: [(usize, usize, usize); 6] = [
    (1, 1, 1),
    (1, 1, 9),
    (1, 9, 1),
    (1, 17, 33),
    (1, 3, 4),
    (2, 5, 40),
];

#[test]
fn presets_2d_match_naive_f64_at_odd_sizes() {
    let mut rng = StdRng::seed_from_u64(1);
    let presets = [
        "cross4",
        "box:3",
        "box:7",
        "gaussian:1",
        "gaussian:2.5",
        "sobel-x",
        "sobel-y",
        "laplacian",
        "sharpen",
    ];
    for p in presets {
        let kernel = Kernel2D::preset(p).expect(p);
        for dims in SIZES_2D {
            check_2d(&mut rng, &kernel, dims);
        }
    }
}

#[test]
fn random_kernels_2d_match_naive_f64_including_larger_than_image() {
    let mut rng = StdRng::seed_from_u64(2);
    for k in [1, 3, 5, 9, 31] {
        let kernel = Kernel2D::new([k, k], random_kernel(&mut rng, k * k)).expect("kernel");
        assert_eq!(kernel.separable().is_none(), k > 1);
        for dims in SIZES_2D {
            if k == 31 && dims.1 * dims.2 > 100 {
                continue; // keep debug-mode time down; 31 > 17 is covered below
            }
            check_2d(&mut rng, &kernel, dims);
        }
    }
    let kernel = Kernel2D::new([31, 31], random_kernel(&mut rng, 961)).expect("kernel");
    check_2d(&mut rng, &kernel, (1, 17, 33));
    check_2d(&mut rng, &kernel, (1, 4, 70)); // 40 interior columns: the 16-wide blocks
    let kernel = Kernel2D::new([9, 9], random_kernel(&mut rng, 81)).expect("kernel");
    check_2d(&mut rng, &kernel, (1, 3, 4));
}

#[test]
fn rank_one_user_kernels_take_the_separable_path() {
    let mut rng = StdRng::seed_from_u64(3);
    for k in [3, 7, 15] {
        let u = random_kernel(&mut rng, k);
        let v = random_kernel(&mut rng, k);
        let w: Vec<f64> = u.iter().flat_map(|a| v.iter().map(move |b| a * b)).collect();
        let kernel = Kernel2D::new([k, k], w).expect("kernel");
        let auto = path_2d(&kernel, BoundaryMode::Reflect, FilterPath::Auto).expect("path");
        assert_eq!(auto, FilterPath::Separable);
        for dims in [(1, 1, 1), (1, 6, 5), (1, 17, 33)] {
            check_2d(&mut rng, &kernel, dims);
        }
    }
}

#[test]
fn batched_and_multichannel_filter_each_image_alone() {
    let mut rng = StdRng::seed_from_u64(4);
    let (n, h, w, c) = (3, 11, 13, 3);
    let kernel = Kernel2D::new([5, 5], random_kernel(&mut rng, 25)).expect("kernel");
    let gauss = Kernel2D::preset("gaussian:1.5").expect("gaussian");
    for kern in [&kernel, &gauss] {
        for mode in MODES {
            let batch = Array3::from_shape_vec((n, h, w), random(&mut rng, n * h * w)).expect("b");
            let got = filter2d_batch(batch.view(), kern, mode, FilterPath::Auto).expect("batch");
            for (img, out) in batch.axis_iter(Axis(0)).zip(got.axis_iter(Axis(0))) {
                let one = filter2d(img, kern, mode, FilterPath::Auto).expect("one");
                assert_eq!(one, out);
            }
            let hwc = Array3::from_shape_vec((h, w, c), random(&mut rng, h * w * c)).expect("c");
            let got = filter2d_channels(hwc.view(), kern, mode, FilterPath::Auto).expect("chan");
            assert_eq!(got.dim(), (h, w, c));
            for ch in 0..c {
                let plane = hwc.index_axis(Axis(2), ch).to_owned();
                let x: Vec<f32> = plane.iter().copied().collect();
                let out: Vec<f32> = got.index_axis(Axis(2), ch).iter().copied().collect();
                let what = format!("{} channel {ch} {mode}", kern.name());
                if kern.separable_for(mode).is_some() {
                    let (want, mag) = naive(&x, (1, h, w), kern.weights(), 1, kern.size(), mode);
                    assert_close(&out, &want, &mag, 2, &what);
                } else {
                    let (want, _) = naive(&x, (1, h, w), kern.weights(), 1, kern.size(), mode);
                    assert_exact(&out, &want, &what);
                }
            }
        }
    }
}

fn check_3d(rng: &mut StdRng, kernel: &Kernel3D, (d, h, w): (usize, usize, usize)) {
    let x = random(rng, d * h * w);
    let k = kernel.size();
    let vol = Array3::from_shape_vec((d, h, w), x.clone()).expect("volume");
    for mode in MODES {
        let what = format!("{} on {d}x{h}x{w}, {mode}", kernel.name());
        for path in [FilterPath::Auto, FilterPath::Direct] {
            let out = filter3d(vol.view(), kernel, mode, path).expect(&what);
            let out = out.as_slice().expect("contiguous");
            let what = format!("{what}, {path:?}");
            let sep = kernel.separable_for(mode);
            if path_3d(kernel, mode, path).expect("path") == FilterPath::Separable {
                let s = sep.expect("separable");
                let passes: Vec<(usize, Vec<f64>)> =
                    s.pass_order.iter().map(|&a| (a, s.factors[a].clone())).collect();
                let (want, mag) = naive_passes(&x, (d, h, w), &passes, mode);
                assert_close(out, &want, &mag, 3, &what);
                let (want, mag) = naive(&x, (d, h, w), kernel.weights(), k, k, mode);
                assert_close(out, &want, &mag, 3, &what);
            } else {
                let (want, _) = naive(&x, (d, h, w), kernel.weights(), k, k, mode);
                assert_exact(out, &want, &what);
            }
        }
    }
}

#[test]
fn filter3d_matches_naive_f64() {
    let mut rng = StdRng::seed_from_u64(5);
    // (3, 4, 37) has rows long enough for the 16-wide blocks.
    let sizes = [(1, 1, 1), (5, 6, 7), (2, 3, 4), (1, 1, 9), (9, 1, 1), (3, 4, 37)];
    for p in ["box:3", "box:7", "gaussian:0.5", "gaussian:0.8", "laplacian"] {
        let kernel = Kernel3D::preset(p).expect(p);
        for dims in sizes {
            check_3d(&mut rng, &kernel, dims);
        }
    }
    for k in [3, 5, 7] {
        let kernel = Kernel3D::new([k, k, k], random_kernel(&mut rng, k * k * k)).expect("k");
        for dims in sizes {
            check_3d(&mut rng, &kernel, dims);
        }
    }
    let f: Vec<f64> = random_kernel(&mut rng, 5);
    let w: Vec<f64> = (0..125).map(|i| f[i / 25] * f[i / 5 % 5] * f[i % 5]).collect();
    let kernel = Kernel3D::new([5, 5, 5], w).expect("rank 1");
    assert_eq!(
        path_3d(&kernel, BoundaryMode::Wrap, FilterPath::Auto).ok(),
        Some(FilterPath::Separable)
    );
    check_3d(&mut rng, &kernel, (5, 6, 7));
}

fn image(rows: &[&[f32]]) -> Array2<f32> {
    let w = rows[0].len();
    Array2::from_shape_vec((rows.len(), w), rows.concat()).expect("image")
}

fn run(x: ArrayView2<f32>, k: &Kernel2D, mode: BoundaryMode) -> Vec<f32> {
    filter2d(x, k, mode, FilterPath::Auto)
        .expect("filter")
        .into_iter()
        .collect()
}

#[test]
fn hand_worked_scipy_values() {
    // cross4 on 1..9: corners per mode, worked out from scipy's extensions.
    let x = image(&[&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], &[7.0, 8.0, 9.0]]);
    let c4 = Kernel2D::preset("cross4").expect("cross4");
    let corner = |m| run(x.view(), &c4, m)[0];
    assert_eq!(corner(BoundaryMode::Reflect), 2.0); // (1 + 1 + 2 + 4) / 4
    assert_eq!(corner(BoundaryMode::Nearest), 2.0);
    assert_eq!(corner(BoundaryMode::Mirror), 3.0); // (4 + 2 + 2 + 4) / 4
    assert_eq!(corner(BoundaryMode::Wrap), 4.0); // (7 + 3 + 2 + 4) / 4
    assert_eq!(corner(BoundaryMode::Constant(0.0)), 1.5);
    assert_eq!(run(x.view(), &c4, BoundaryMode::Reflect)[4], 5.0);

    // scipy.ndimage.convolve docstring: convolve(a, k) = correlate(a, k flipped).
    let a = image(&[
        &[1.0, 2.0, 0.0, 0.0],
        &[5.0, 3.0, 0.0, 4.0],
        &[0.0, 0.0, 0.0, 7.0],
        &[9.0, 3.0, 0.0, 0.0],
    ]);
    let flipped = Kernel2D::new([3, 3], vec![0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]).expect("kernel");
    let c0: Vec<f32> = [11, 10, 7, 4, 10, 3, 11, 11, 15, 12, 14, 7, 12, 3, 7, 0]
        .iter()
        .map(|&v| v as f32)
        .collect();
    assert_eq!(run(a.view(), &flipped, BoundaryMode::Constant(0.0)), c0);
    let c1: Vec<f32> = [13, 11, 8, 7, 11, 3, 11, 14, 16, 12, 14, 10, 15, 6, 10, 5]
        .iter()
        .map(|&v| v as f32)
        .collect();
    assert_eq!(run(a.view(), &flipped, BoundaryMode::Constant(1.0)), c1);

    // scipy.ndimage.gaussian_filter1d([1, 2, 3, 4, 5], 1) docstring values (as a 1x5 image:
    // the size-1 axis contributes sum(weights) = 1).
    let g = Kernel2D::preset("gaussian:1").expect("gaussian");
    let row = image(&[&[1.0, 2.0, 3.0, 4.0, 5.0]]);
    let want = [1.427_040_95, 2.067_822_03, 3.0, 3.932_177_97, 4.572_959_05];
    for (got, want) in run(row.view(), &g, BoundaryMode::Reflect).iter().zip(want) {
        assert!((*got as f64 - want).abs() < 1e-6, "{got} vs {want}");
    }

    // sobel-x is positive for intensity growing to the right (scipy sobel(axis=1)).
    let ramp = Array2::from_shape_fn((4, 5), |(_, j)| j as f32);
    let sx = run(
        ramp.view(),
        &Kernel2D::preset("sobel-x").expect("sx"),
        BoundaryMode::Reflect,
    );
    assert_eq!(sx[5 + 2], 8.0);
    let sy = run(
        ramp.view(),
        &Kernel2D::preset("sobel-y").expect("sy"),
        BoundaryMode::Reflect,
    );
    assert!(sy.iter().all(|&v| v == 0.0));
}

#[test]
fn zero_weights_are_skipped_like_scipy_and_layouts_do_not_matter() {
    // cross4 has a zero centre: an Inf pixel does not poison its own output.
    let mut x = Array2::from_shape_fn((5, 6), |(i, j)| (i * 6 + j) as f32 * 0.5 + 1.0);
    x[[2, 3]] = f32::INFINITY;
    let c4 = Kernel2D::preset("cross4").expect("cross4");
    let out = filter2d(x.view(), &c4, BoundaryMode::Reflect, FilterPath::Auto).expect("f");
    assert!(out[[2, 3]].is_finite() && out[[2, 2]].is_infinite());
    // A transposed (non-contiguous) view filters as its contiguous copy.
    let t = x.t();
    let copy = t.as_standard_layout().into_owned();
    let a = filter2d(t, &c4, BoundaryMode::Mirror, FilterPath::Auto).expect("view");
    let b = filter2d(copy.view(), &c4, BoundaryMode::Mirror, FilterPath::Auto).expect("copy");
    assert_eq!(a, b);
}

#[test]
fn bad_inputs_are_rejected_with_reasons() {
    let c4 = Kernel2D::preset("cross4").expect("cross4");
    let empty = Array2::<f32>::zeros((0, 4));
    let e = filter2d(empty.view(), &c4, BoundaryMode::Reflect, FilterPath::Auto).unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let x = Array2::<f32>::ones((3, 3));
    let e = filter2d(x.view(), &c4, BoundaryMode::Reflect, FilterPath::Separable).unwrap_err();
    assert!(e.to_string().contains("not separable"), "{e}");
    let mut out = vec![0.0; 8];
    let e = filter2d_into(
        &[0.0; 9],
        [1, 3, 3],
        &c4,
        BoundaryMode::Wrap,
        FilterPath::Auto,
        &mut out,
    )
    .unwrap_err();
    assert!(e.to_string().contains("shape mismatch"), "{e}");
}

/// Median wall time of `f` over `n` runs, in ms.
fn median_ms(n: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..n)
        .map(|_| {
            let s = std::time::Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[n / 2]
}

/// `cargo test --release -p kiln-cpu --test imaging -- --ignored --nocapture`
#[test]
#[ignore]
fn timing_vs_scipy() {
    let mut rng = StdRng::seed_from_u64(9);
    let n = 4096;
    let img = random(&mut rng, n * n);
    let mut out = vec![0.0f32; n * n];
    let mode = BoundaryMode::Reflect;
    let c4 = Kernel2D::preset("cross4").expect("cross4");
    let g2 = Kernel2D::preset("gaussian:2").expect("gaussian");
    let t_c4 = median_ms(9, || {
        filter2d_into(&img, [1, n, n], &c4, mode, FilterPath::Auto, &mut out).expect("c4")
    });
    let t_g2 = median_ms(9, || {
        filter2d_into(&img, [1, n, n], &g2, mode, FilterPath::Auto, &mut out).expect("g2")
    });
    let m = 256;
    let vol = random(&mut rng, m * m * m);
    let mut vout = vec![0.0f32; m * m * m];
    let k3 = Kernel3D::new([3, 3, 3], random_kernel(&mut rng, 27)).expect("k3");
    let t_3d = median_ms(9, || {
        kiln_cpu::imaging::filter3d_into(&vol, [m, m, m], &k3, mode, FilterPath::Auto, &mut vout).expect("3d")
    });
    // The memory floor: a parallel copy of the same image (read 64 MiB, write 64 MiB).
    let t_copy = median_ms(9, || {
        use rayon::prelude::*;
        out.par_chunks_mut(1 << 16)
            .zip(img.par_chunks(1 << 16))
            .for_each(|(o, i)| o.copy_from_slice(i));
    });
    println!("threads: {}", rayon::current_num_threads());
    println!(
        "parallel copy 4096² f32: {t_copy:.1} ms ({:.1} GB/s read+write)",
        2.0 * 64.0 * 1.048576 / t_copy
    );
    println!("| workload | kiln CPU ms | scipy ms | speed-up | goal |");
    for (name, t, scipy) in [
        ("cross4 4096² correlate", t_c4, 155.0),
        ("gaussian σ=2 4096²", t_g2, 482.0),
        ("3×3×3 correlate 256³", t_3d, 413.0),
    ] {
        println!("| {name} | {t:.1} | {scipy} | {:.1}× | ≥ 3× |", scipy / t);
    }
}
