//! filter2d / filter3d on every backend equal the CPU op (within f32 rounding: the GPU
//! sums in f32 with fma, the CPU in f64) on fresh random inputs, for every boundary mode,
//! every preset, user kernels (direct and separable), odd and degenerate shapes and kernels
//! larger than the image. The GPU output buffer is NaN-poisoned by the launcher, so an
//! unwritten pixel fails. On the CPU runtime the direct path is also checked against a
//! naive float64 correlate written here.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use kiln::device::ops::{Filter2d, Filter3d, SeparableFilter};
use kiln::imaging::{filter_tolerance, FilterPath};
use kiln::kernels::Kernel;
use kiln::{testing, Runtime};
use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D};

fn modes() -> Vec<BoundaryMode> {
    vec![
        BoundaryMode::Constant(0.0),
        BoundaryMode::Constant(1.5),
        BoundaryMode::Nearest,
        BoundaryMode::Reflect,
        BoundaryMode::Mirror,
        BoundaryMode::Wrap,
    ]
}

fn presets_2d() -> Vec<Kernel2D> {
    [
        "cross4",
        "box:3",
        "box:5",
        "gaussian:1",
        "gaussian:2",
        "gaussian:3.5",
        "sobel-x",
        "sobel-y",
        "laplacian",
        "sharpen",
    ]
    .iter()
    .map(|p| Kernel2D::preset(p).unwrap())
    .collect()
}

fn user_2d(k: usize, seed: u64) -> Kernel2D {
    let w = testing::random_f32(k * k, -1.0, 1.0, seed);
    Kernel2D::new([k, k], w.iter().map(|&v| v as f64).collect()).unwrap()
}

fn separable_user_2d(k: usize, seed: u64) -> Kernel2D {
    let a = testing::random_f32(k, 0.1, 1.0, seed);
    let b = testing::random_f32(k, -1.0, 1.0, seed + 1);
    let w = a
        .iter()
        .flat_map(|&x| b.iter().map(move |&y| x as f64 * y as f64))
        .collect();
    Kernel2D::new([k, k], w).unwrap()
}

/// Asserts |got - want| <= tol everywhere (NaN fails).
fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let e = (g as f64 - w as f64).abs();
        assert!(
            e <= tol,
            "{what}: element {i}: got {g}, want {w} (|diff| {e:e} > tol {tol:e})"
        );
    }
}

fn max_abs(x: &[f32], mode: BoundaryMode) -> f64 {
    let m = x.iter().fold(0.0f64, |m, &v| m.max(v.abs() as f64));
    m.max(mode.cval().unwrap_or(0.0).abs())
}

/// scipy.ndimage.correlate in float64 for (n, h, w) planes, kd = 1 (2-D) or k (3-D).
fn naive(src: &[f32], shape: [usize; 3], kd: usize, k: usize, w: &[f64], mode: BoundaryMode) -> Vec<f32> {
    let [d, h, wd] = shape;
    let (rd, r) = (kd as isize / 2, k as isize / 2);
    let cval = mode.cval().unwrap_or(0.0);
    let mut out = vec![0.0f32; src.len()];
    for z in 0..d {
        for y in 0..h {
            for x in 0..wd {
                let mut acc = 0.0f64;
                for a in 0..kd {
                    for b in 0..k {
                        for c in 0..k {
                            let wt = w[(a * k + b) * k + c];
                            if wt.abs() <= f64::EPSILON {
                                continue;
                            }
                            let zz = if kd == 1 {
                                Some(z)
                            } else {
                                mode.map_index(z as isize + a as isize - rd, d)
                            };
                            let yy = mode.map_index(y as isize + b as isize - r, h);
                            let xx = mode.map_index(x as isize + c as isize - r, wd);
                            let v = match (zz, yy, xx) {
                                (Some(zz), Some(yy), Some(xx)) => src[(zz * h + yy) * wd + xx] as f64,
                                _ => cval,
                            };
                            acc += wt * v;
                        }
                    }
                }
                out[(z * h + y) * wd + x] = acc as f32;
            }
        }
    }
    out
}

fn check_2d(rt: &Runtime, shape: [usize; 3], k: &Kernel2D, mode: BoundaryMode, path: FilterPath, seed: u64) {
    let cpu = Runtime::cpu();
    let n: usize = shape.iter().product();
    let x = testing::random_f32(n, -2.0, 2.0, seed);
    let got = rt.filter2d_batch(&x, shape, k, mode, path).unwrap();
    let want = cpu.filter2d_batch(&x, shape, k, mode, path).unwrap();
    let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
    let tol = filter_tolerance(k.size() * k.size(), sw, max_abs(&x, mode));
    let what = format!(
        "{} filter2d {} {mode} {path:?} {shape:?}",
        rt.device_name(),
        k.name()
    );
    assert_close(&what, &got, &want, tol);
    let direct = kiln_cpu::imaging::path_2d(k, mode, path).unwrap() == FilterPath::Direct;
    if direct && n * k.size() * k.size() <= 1 << 22 {
        let refv = naive(&x, shape, 1, k.size(), k.weights(), mode);
        assert_close(&format!("{what} vs naive f64"), &got, &refv, tol);
    }
}

kiln::test_device!(filter2d_small_shapes_every_mode_every_preset, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    let mut kernels = presets_2d();
    for (i, k) in [3, 5, 7, 9, 31].into_iter().enumerate() {
        kernels.push(user_2d(k, seed + 100 + i as u64));
    }
    kernels.push(separable_user_2d(5, seed + 200));
    // 1x1, 1xN, Nx1, odd, and images smaller than most kernels (3x4 against k = 7..31).
    let shapes = [
        [1, 1, 1],
        [1, 1, 37],
        [1, 29, 1],
        [1, 17, 33],
        [1, 3, 4],
        [2, 70, 45],
    ];
    for (si, &shape) in shapes.iter().enumerate() {
        for mode in modes() {
            for (ki, k) in kernels.iter().enumerate() {
                check_2d(
                    rt,
                    shape,
                    k,
                    mode,
                    FilterPath::Auto,
                    seed + (si * 1000 + ki) as u64,
                );
            }
        }
    }
});

kiln::test_device!(filter2d_forced_direct_on_separable_presets, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    for p in ["gaussian:2", "box:5", "sobel-x"] {
        let k = Kernel2D::preset(p).unwrap();
        for mode in modes() {
            check_2d(rt, [1, 17, 33], &k, mode, FilterPath::Direct, seed);
            check_2d(rt, [1, 17, 33], &k, mode, FilterPath::Separable, seed + 1);
        }
    }
});

kiln::test_device!(filter2d_large_and_batched, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    let kernels = [
        Kernel2D::preset("cross4").unwrap(),
        Kernel2D::preset("gaussian:2").unwrap(),
        Kernel2D::preset("sobel-y").unwrap(),
        user_2d(5, seed + 7),
        user_2d(11, seed + 8),
    ];
    for mode in modes() {
        for (i, k) in kernels.iter().enumerate() {
            check_2d(rt, [1, 1000, 1000], k, mode, FilterPath::Auto, seed + i as u64);
            check_2d(rt, [3, 61, 130], k, mode, FilterPath::Auto, seed + 10 + i as u64);
        }
    }
});

kiln::test_device!(filter2d_channels_matches_cpu, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    let (h, w, c) = (17, 33, 3);
    let x = testing::random_f32(h * w * c, -1.0, 1.0, seed);
    let cpu = Runtime::cpu();
    for p in ["cross4", "gaussian:1.5", "laplacian"] {
        let k = Kernel2D::preset(p).unwrap();
        for mode in modes() {
            let got = rt
                .filter2d_channels(&x, [h, w, c], &k, mode, FilterPath::Auto)
                .unwrap();
            // The reference: each channel extracted by hand and filtered on the CPU.
            let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
            let tol = filter_tolerance(k.size() * k.size(), sw, max_abs(&x, mode));
            for ch in 0..c {
                let plane: Vec<f32> = (0..h * w).map(|i| x[i * c + ch]).collect();
                let want = cpu.filter2d(&plane, [h, w], &k, mode, FilterPath::Auto).unwrap();
                let g: Vec<f32> = (0..h * w).map(|i| got[i * c + ch]).collect();
                assert_close(
                    &format!("{} channels {p} {mode} ch{ch}", rt.device_name()),
                    &g,
                    &want,
                    tol,
                );
            }
        }
    }
});

fn user_3d(k: usize, seed: u64) -> Kernel3D {
    let w = testing::random_f32(k * k * k, -1.0, 1.0, seed);
    Kernel3D::new([k, k, k], w.iter().map(|&v| v as f64).collect()).unwrap()
}

fn check_3d(rt: &Runtime, shape: [usize; 3], k: &Kernel3D, mode: BoundaryMode, path: FilterPath, seed: u64) {
    let cpu = Runtime::cpu();
    let n: usize = shape.iter().product();
    let x = testing::random_f32(n, -2.0, 2.0, seed);
    let got = rt.filter3d(&x, shape, k, mode, path).unwrap();
    let want = cpu.filter3d(&x, shape, k, mode, path).unwrap();
    let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
    let tol = filter_tolerance(k.size().pow(3), sw, max_abs(&x, mode));
    let what = format!(
        "{} filter3d {} {mode} {path:?} {shape:?}",
        rt.device_name(),
        k.name()
    );
    assert_close(&what, &got, &want, tol);
    let direct = kiln_cpu::imaging::path_3d(k, mode, path).unwrap() == FilterPath::Direct;
    if direct && n * k.size().pow(3) <= 1 << 22 {
        let refv = naive(&x, shape, k.size(), k.size(), k.weights(), mode);
        assert_close(&format!("{what} vs naive f64"), &got, &refv, tol);
    }
}

kiln::test_device!(filter3d_every_mode_every_preset, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    let mut kernels: Vec<Kernel3D> = [
        "laplacian",
        "box:3",
        "box:5",
        "box:7",
        "gaussian:0.5",
        "gaussian:0.8",
    ]
    .iter()
    .map(|p| Kernel3D::preset(p).unwrap())
    .collect();
    for (i, k) in [3, 5, 7].into_iter().enumerate() {
        kernels.push(user_3d(k, seed + 50 + i as u64));
    }
    let shapes = [
        [1, 1, 1],
        [1, 1, 9],
        [5, 1, 1],
        [1, 6, 1],
        [7, 9, 11],
        [3, 4, 5],
        [20, 37, 40],
    ];
    for (si, &shape) in shapes.iter().enumerate() {
        for mode in modes() {
            for (ki, k) in kernels.iter().enumerate() {
                check_3d(
                    rt,
                    shape,
                    k,
                    mode,
                    FilterPath::Auto,
                    seed + (si * 100 + ki) as u64,
                );
            }
        }
    }
    let k = Kernel3D::preset("box:5").unwrap();
    for mode in modes() {
        check_3d(rt, [7, 9, 11], &k, mode, FilterPath::Direct, seed + 999);
    }
});

kiln::test_device!(filter3d_64_cubed, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    let kernels = [
        Kernel3D::preset("laplacian").unwrap(),
        Kernel3D::preset("gaussian:0.8").unwrap(),
        user_3d(3, seed + 1),
    ];
    for mode in [
        BoundaryMode::Reflect,
        BoundaryMode::Constant(0.5),
        BoundaryMode::Wrap,
    ] {
        for (i, k) in kernels.iter().enumerate() {
            check_3d(rt, [64, 64, 64], k, mode, FilterPath::Auto, seed + i as u64);
        }
    }
    check_3d(
        rt,
        [70, 33, 45],
        &user_3d(7, seed + 9),
        BoundaryMode::Mirror,
        FilterPath::Auto,
        seed + 5,
    );
});

kiln::test_device!(filter_rejects_bad_input, |rt: &Runtime| {
    let k = Kernel2D::preset("cross4").unwrap();
    assert!(rt
        .filter2d(&[], [0, 5], &k, BoundaryMode::Reflect, FilterPath::Auto)
        .is_err());
    assert!(rt
        .filter2d(&[1.0; 5], [2, 3], &k, BoundaryMode::Reflect, FilterPath::Auto)
        .is_err());
    let user = user_2d(3, 1);
    let e = rt
        .filter2d(
            &[1.0; 9],
            [3, 3],
            &user,
            BoundaryMode::Reflect,
            FilterPath::Separable,
        )
        .unwrap_err();
    assert!(e.to_string().contains("not separable"), "{e}");
});

/// Runs a 2-D path through the device API (`separable`: the separable launcher, else the
/// direct one) on a NaN-poisoned output and checks it against the CPU op on the same path.
fn check_device_2d(
    rt: &Runtime,
    shape: [usize; 3],
    k: &Kernel2D,
    mode: BoundaryMode,
    separable: bool,
    seed: u64,
) {
    let b = rt.cuda().expect("check_device_2d runs on a CUDA runtime");
    let n: usize = shape.iter().product();
    let x = testing::random_f32(n, -2.0, 2.0, seed);
    let path = if separable {
        FilterPath::Separable
    } else {
        FilterPath::Direct
    };
    let want = Runtime::cpu().filter2d_batch(&x, shape, k, mode, path).unwrap();
    let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
    let tol = filter_tolerance(k.size() * k.size(), sw, max_abs(&x, mode));
    let dx = b.upload(&x).unwrap();
    let mut dy = b.alloc_poisoned(n).unwrap();
    if separable {
        let sep = k.separable_for(mode).unwrap();
        b.run(SeparableFilter {
            src: &dx,
            dst: &mut dy,
            shape,
            sep: &sep,
            axis_offset: 1,
            mode,
        })
        .unwrap();
    } else {
        b.run(Filter2d {
            src: &dx,
            dst: &mut dy,
            shape,
            kernel: k,
            mode,
        })
        .unwrap();
    }
    let mut got = vec![0.0f32; n];
    b.download(&dy, &mut got).unwrap();
    assert_close(
        &format!("device filter2d {} {mode} {path:?} {shape:?}", k.name()),
        &got,
        &want,
        tol,
    );
}

/// Shapes for the tiled kernels: degenerate ones, kernels larger than the image, one and
/// several 128-wide tiles (full, partial, W % 4 != 0), interior tiles, batches.
const TILE_SHAPES: [[usize; 3]; 14] = [
    [1, 1, 1],
    [1, 1, 37],
    [1, 29, 1],
    [1, 17, 33],
    [1, 3, 4],
    [2, 70, 45],
    [1, 1, 256],
    [1, 2, 512],
    [1, 33, 260],
    [1, 100, 256],
    [2, 67, 384],
    [1, 45, 129],
    [1, 200, 400],
    [3, 150, 301],
];

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn filter2d_k3_both_register_kernels_every_mode() {
    let Some(rt) = testing::cuda_runtime_or_skip("filter2d_k3_both_register_kernels_every_mode") else {
        return;
    };
    let b = rt.cuda().expect("a CUDA runtime has a CUDA backend");
    let seed = testing::fresh_seed();
    let kernels = [
        Kernel2D::preset("cross4").unwrap(),
        Kernel2D::preset("laplacian").unwrap(),
        user_2d(3, seed + 300),
    ];
    // The direct 3x3 path takes filter2d_k3r4_f32 where the k3r8 grid is under two waves of
    // resident blocks (on an H200, 1056 blocks: every shape here but the last, 13 x 32 x 3 =
    // 1248 blocks) and filter2d_k3r8_f32 above. Each shape runs as given, then as a batch of
    // that many planes that the choice sends to k3r8, so both kernels see every tile shape.
    // (under compute-sanitizer the three large shapes are left out, and the k3r8 batches run
    // for two modes and one kernel)
    let sanitizer = kiln::testing::under_sanitizer();
    let large: &[[usize; 3]] = if sanitizer {
        &[]
    } else {
        &[[1, 300, 1024], [1, 1080, 1920], [3, 1000, 1600]]
    };
    for (si, &shape) in TILE_SHAPES.iter().chain(large).enumerate() {
        let [_, h, w] = shape;
        let takes_r8 = |n| Filter2d::k3_choice(b, n, h, w).unwrap().0 == Kernel::FILTER2D_K3R8_F32;
        let mut n8 = shape[0];
        while !takes_r8(n8) && n8 < 1 << 16 {
            n8 *= 2;
        }
        assert!(
            takes_r8(n8),
            "no batch of {shape:?} planes takes filter2d_k3r8_f32"
        );
        for (mi, mode) in modes().into_iter().enumerate() {
            for (ki, k) in kernels.iter().enumerate() {
                let seed = seed + (si * 100 + ki) as u64;
                check_device_2d(rt, shape, k, mode, false, seed);
                if n8 != shape[0] && (!sanitizer || (ki == 0 && mi % 3 == 0)) {
                    check_device_2d(rt, [n8, h, w], k, mode, false, seed + 50);
                }
            }
        }
    }
}

/// A separable user kernel whose row factor sums to zero, so its passes run along W first
/// (the `hv` fused kernel), as sobel-x's do.
fn zero_sum_rows_2d(k: usize, seed: u64) -> Kernel2D {
    let r = k / 2;
    let h = testing::random_f32(r, 0.2, 1.0, seed);
    let a: Vec<f64> = (0..k)
        .map(|i| match i.cmp(&r) {
            std::cmp::Ordering::Less => -(h[r - 1 - i] as f64),
            std::cmp::Ordering::Equal => 0.0,
            std::cmp::Ordering::Greater => h[i - r - 1] as f64,
        })
        .collect();
    let b = testing::random_f32(k, 0.1, 1.0, seed + 1);
    let w = a
        .iter()
        .flat_map(|&x| b.iter().map(move |&y| x * y as f64))
        .collect();
    Kernel2D::new([k, k], w).unwrap()
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn separable_every_radius_every_mode() {
    let Some(rt) = testing::cuda_runtime_or_skip("separable_every_radius_every_mode") else {
        return;
    };
    let seed = testing::fresh_seed();
    let mut kernels = Vec::new();
    // Radius int(4 sigma + 0.5) = 1..=8 (pass along H first: the vh kernel).
    for s in ["0.25", "0.5", "0.75", "1", "1.25", "1.5", "1.75", "2"] {
        kernels.push(Kernel2D::preset(&format!("gaussian:{s}")).unwrap());
    }
    for b in [3, 9, 17] {
        kernels.push(Kernel2D::preset(&format!("box:{b}")).unwrap());
    }
    // Along W first (the hv kernel): sobel-x and zero-sum user kernels of every radius.
    kernels.push(Kernel2D::preset("sobel-x").unwrap());
    kernels.push(Kernel2D::preset("sobel-y").unwrap());
    for (i, k) in [3, 5, 7, 9, 11, 13, 15, 17].into_iter().enumerate() {
        kernels.push(zero_sum_rows_2d(k, seed + 400 + 2 * i as u64));
    }
    kernels.push(separable_user_2d(7, seed + 450));
    // Radius 9 and up: two 1-D passes (filter1d_s_f32 along H, filter1d_x_f32 along W),
    // in both orders.
    kernels.push(Kernel2D::preset("gaussian:2.5").unwrap());
    kernels.push(Kernel2D::preset("box:19").unwrap());
    kernels.push(zero_sum_rows_2d(21, seed + 460));
    // The hv order really is taken by the zero-sum kernels and sobel-x.
    let hv = kernels[11].separable_for(BoundaryMode::Reflect).unwrap();
    assert_eq!(hv.pass_order, [1, 0], "sobel-x runs along W first");
    let hv = kernels[13].separable_for(BoundaryMode::Reflect).unwrap();
    assert_eq!(hv.pass_order, [1, 0], "a zero-sum row factor runs last");
    for (si, &shape) in TILE_SHAPES.iter().enumerate() {
        for mode in modes() {
            for (ki, k) in kernels.iter().enumerate() {
                if kiln_cpu::imaging::path_2d(k, mode, FilterPath::Auto).unwrap() != FilterPath::Separable {
                    continue;
                }
                check_device_2d(rt, shape, k, mode, true, seed + (si * 100 + ki) as u64);
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn separable_3d_fuses_the_last_two_passes() {
    let Some(rt) = testing::cuda_runtime_or_skip("separable_3d_fuses_the_last_two_passes") else {
        return;
    };
    let b = rt.cuda().expect("a CUDA runtime has a CUDA backend");
    let seed = testing::fresh_seed();
    let cpu = Runtime::cpu();
    for p in ["box:3", "box:7", "gaussian:0.8"] {
        let k = Kernel3D::preset(p).unwrap();
        for (si, &shape) in [[1, 1, 1], [5, 1, 9], [3, 17, 33], [9, 70, 200]]
            .iter()
            .enumerate()
        {
            for mode in modes() {
                let n: usize = shape.iter().product();
                let x = testing::random_f32(n, -2.0, 2.0, seed + si as u64);
                let want = cpu.filter3d(&x, shape, &k, mode, FilterPath::Separable).unwrap();
                let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
                let tol = filter_tolerance(k.size().pow(3), sw, max_abs(&x, mode));
                let sep = k.separable_for(mode).unwrap();
                let dx = b.upload(&x).unwrap();
                let mut dy = b.alloc_poisoned(n).unwrap();
                b.run(SeparableFilter {
                    src: &dx,
                    dst: &mut dy,
                    shape,
                    sep: &sep,
                    axis_offset: 0,
                    mode,
                })
                .unwrap();
                let mut got = vec![0.0f32; n];
                b.download(&dy, &mut got).unwrap();
                assert_close(&format!("device filter3d {p} {mode} {shape:?}"), &got, &want, tol);
            }
        }
    }
}

// The wave-balanced chunking and fixed chunks of 4 and 64 planes a block.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn filter3d_chunkings() {
    let Some(rt) = testing::cuda_runtime_or_skip("filter3d_chunkings") else {
        return;
    };
    let b = rt.cuda().expect("a CUDA runtime has a CUDA backend");
    let seed = testing::fresh_seed();
    let cpu = Runtime::cpu();
    for (i, k) in [
        user_3d(3, seed + 60),
        user_3d(5, seed + 61),
        user_3d(7, seed + 62),
    ]
    .iter()
    .enumerate()
    {
        for &shape in &[[1, 1, 1], [3, 1, 70], [20, 37, 40], [130, 33, 70]] {
            for mode in [
                BoundaryMode::Constant(0.5),
                BoundaryMode::Reflect,
                BoundaryMode::Wrap,
            ] {
                let n: usize = shape.iter().product();
                let x = testing::random_f32(n, -2.0, 2.0, seed + i as u64);
                let want = cpu.filter3d(&x, shape, k, mode, FilterPath::Direct).unwrap();
                let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
                let tol = filter_tolerance(k.size().pow(3), sw, max_abs(&x, mode));
                let dx = b.upload(&x).unwrap();
                for zc in [None, Some(4), Some(64)] {
                    let mut dy = b.alloc_poisoned(n).unwrap();
                    b.run(Filter3d {
                        src: &dx,
                        dst: &mut dy,
                        shape,
                        kernel: k,
                        mode,
                        planes: zc,
                    })
                    .unwrap();
                    let mut got = vec![0.0f32; n];
                    b.download(&dy, &mut got).unwrap();
                    assert_close(
                        &format!("planes {zc:?} filter3d {} {mode} {shape:?}", k.name()),
                        &got,
                        &want,
                        tol,
                    );
                }
            }
        }
    }
}

/// Volumes for the z-marching kernels (tile 32 wide, 32 or 64 tall): degenerate ones; the
/// 16-byte fast path (W % 4 == 0, whole 32-column tiles: W = 32, 64, 96) with partial tiles
/// in y; W = 36 (one fast tile, one generic); odd W (generic everywhere); H = 1.
const ZM_SHAPES: [[usize; 3]; 10] = [
    [1, 1, 1],
    [2, 1, 37],
    [5, 3, 4],
    [7, 9, 11],
    [9, 33, 64],
    [6, 40, 36],
    [11, 70, 129],
    [13, 65, 96],
    [4, 1, 64],
    [3, 130, 32],
];

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn filter3d_direct_every_chunking_every_mode() {
    let Some(rt) = testing::cuda_runtime_or_skip("filter3d_direct_every_chunking_every_mode") else {
        return;
    };
    let b = rt.cuda().expect("a CUDA runtime has a CUDA backend");
    let seed = testing::fresh_seed();
    let cpu = Runtime::cpu();
    // k = 3 (filter3d_k3_f32) and k = 5 (the z-march filter3d_zm5_f32): the wave-balanced
    // chunking and forced ones (one plane a block, chunk edges inside the volume, the whole
    // depth in one march).
    let z3: &[Option<usize>] = &[None, Some(1), Some(2), Some(5), Some(1000)];
    let z5: &[Option<usize>] = &[None, Some(1), Some(4), Some(1000)];
    let kernels = [
        (user_3d(3, seed + 70), z3),
        (Kernel3D::preset("laplacian").unwrap(), z3),
        (user_3d(5, seed + 71), z5),
    ];
    for (si, &shape) in ZM_SHAPES.iter().enumerate() {
        for mode in modes() {
            for (ki, (k, chunkings)) in kernels.iter().enumerate() {
                let n: usize = shape.iter().product();
                let x = testing::random_f32(n, -2.0, 2.0, seed + (si * 10 + ki) as u64);
                let want = cpu.filter3d(&x, shape, k, mode, FilterPath::Direct).unwrap();
                let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
                let tol = filter_tolerance(k.size().pow(3), sw, max_abs(&x, mode));
                let dx = b.upload(&x).unwrap();
                for &zc in *chunkings {
                    let mut dy = b.alloc_poisoned(n).unwrap();
                    b.run(Filter3d {
                        src: &dx,
                        dst: &mut dy,
                        shape,
                        kernel: k,
                        mode,
                        planes: zc,
                    })
                    .unwrap();
                    let mut got = vec![0.0f32; n];
                    b.download(&dy, &mut got).unwrap();
                    assert_close(
                        &format!("planes {zc:?} filter3d {} {mode} {shape:?}", k.name()),
                        &got,
                        &want,
                        tol,
                    );
                }
            }
        }
    }
    // A volume the wave-balanced chunking splits into several multi-plane chunks, and a
    // zero chunk as an error.
    for (k, seed) in [
        (user_3d(3, seed + 72), seed + 73),
        (user_3d(5, seed + 74), seed + 75),
    ] {
        for mode in [BoundaryMode::Constant(1.5), BoundaryMode::Reflect] {
            let shape = [24, 300, 520];
            let n: usize = shape.iter().product();
            let x = testing::random_f32(n, -2.0, 2.0, seed);
            let want = cpu.filter3d(&x, shape, &k, mode, FilterPath::Direct).unwrap();
            let sw: f64 = k.weights().iter().map(|v| v.abs()).sum();
            let tol = filter_tolerance(k.size().pow(3), sw, max_abs(&x, mode));
            let dx = b.upload(&x).unwrap();
            let mut dy = b.alloc_poisoned(n).unwrap();
            b.run(Filter3d {
                src: &dx,
                dst: &mut dy,
                shape,
                kernel: &k,
                mode,
                planes: None,
            })
            .unwrap();
            let mut got = vec![0.0f32; n];
            b.download(&dy, &mut got).unwrap();
            assert_close(
                &format!("filter3d {} {mode} {shape:?}", k.name()),
                &got,
                &want,
                tol,
            );
        }
    }
    let dx = b.upload(&[1.0f32; 27]).unwrap();
    let mut dy = b.alloc_poisoned(27).unwrap();
    let k = user_3d(3, 1);
    assert!(b
        .run(Filter3d {
            src: &dx,
            dst: &mut dy,
            shape: [3, 3, 3],
            kernel: &k,
            mode: BoundaryMode::Reflect,
            planes: Some(0)
        })
        .is_err());
}
