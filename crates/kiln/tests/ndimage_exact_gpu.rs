//! scipy.ndimage's linear filters on f32 and f64 data give the same bits on the GPU as on
//! the CPU, and the CPU's are scipy's arithmetic (kiln-core's `scipy_cpu` routines, checked
//! against scipy elsewhere): fresh random inputs of odd sizes (1x1, 1x7, 7x1, 33x17, 130x67,
//! 9x10x11), every boundary mode, kernel sizes 1 to 9 with every origin's extremes and 0,
//! random, symmetric and antisymmetric 1-D weights along every axis, direct kernels of
//! random shapes, and the derived filters (Gaussians of orders 0-2, laplace, gradient
//! magnitude, uniform, sobel, prewitt). The GPU runs the exact op into an output poisoned
//! with NaN (an unwritten element fails) and the facade's `Tensor::ndimage`. A failure names
//! the plan, the shape, the dtype, the first differing element and both values' bits. The
//! GPU tests need `--features gpu-tests` and a GPU (with `KILN_REQUIRE_GPU=1` a missing GPU
//! fails them).
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use kiln::device::ops::NdimageLinearExact;
use kiln::ndimage::{self as nd, GaussianOpts, LinearFilter, Term};
use kiln::{testing, Runtime};
use kiln_core::imaging::rank_value::NdDType;
use kiln_core::imaging::scipy_cpu::{correlate_nd, quantizer, run_passes, Pass1d, PassOp};
use kiln_core::imaging::BoundaryMode;
use kiln_cuda::CudaData;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const SHAPES: [&[usize]; 6] = [&[1, 1], &[1, 7], &[7, 1], &[33, 17], &[130, 67], &[9, 10, 11]];

fn modes() -> [BoundaryMode; 5] {
    [
        BoundaryMode::Constant(0.375),
        BoundaryMode::Nearest,
        BoundaryMode::Reflect,
        BoundaryMode::Mirror,
        BoundaryMode::Wrap,
    ]
}

/// Random, symmetric and antisymmetric weights of `n` taps (NI_Correlate1D's three sums).
fn weights_1d(n: usize, rng: &mut StdRng) -> Vec<Vec<f64>> {
    let r: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let sym: Vec<f64> = (0..n).map(|i| r[i.min(n - 1 - i)]).collect();
    // the first half and the centre as drawn, the second half their negatives
    let anti: Vec<f64> = (0..n)
        .map(|i| if 2 * i < n { r[i] } else { -r[n - 1 - i] })
        .collect();
    vec![r, sym, anti]
}

/// The origins checked for an `n`-tap axis: both extremes and 0.
fn origins(n: usize) -> Vec<isize> {
    let (lo, hi) = (-((n / 2) as isize), (n as isize - 1) / 2);
    let mut v = vec![lo, 0, hi];
    v.dedup();
    v
}

/// Every plan checked on data of rank `ndim`.
fn plans(ndim: usize, rng: &mut StdRng) -> Vec<LinearFilter> {
    let mut out = Vec::new();
    for mode in modes() {
        for n in 1..=9usize {
            for w in weights_1d(n, rng) {
                for o in origins(n) {
                    for axis in 0..ndim as isize {
                        out.push(nd::correlate1d(ndim, &w, axis, o, mode).unwrap());
                        out.push(nd::convolve1d(ndim, &w, axis, o, mode).unwrap());
                    }
                }
            }
            // a direct kernel of n along the last axis and a random extent elsewhere
            let wshape: Vec<usize> = (0..ndim)
                .map(|a| {
                    if a == ndim - 1 {
                        n
                    } else {
                        rng.random_range(1..=if ndim == 3 { 4 } else { 9 })
                    }
                })
                .collect();
            let len: usize = wshape.iter().product();
            let mut w: Vec<f64> = (0..len).map(|_| rng.random_range(-1.0..1.0)).collect();
            if len > 2 {
                w[1] = 0.0; // a dropped tap (|w| <= DBL_EPSILON)
            }
            let org: Vec<isize> = wshape
                .iter()
                .map(|&k| {
                    let o = origins(k);
                    o[rng.random_range(0..o.len())]
                })
                .collect();
            out.push(nd::correlate(ndim, &w, &wshape, &org, None, mode).unwrap());
            out.push(nd::convolve(ndim, &w, &wshape, &org, None, mode).unwrap());
            out.push(nd::uniform_filter(ndim, &[n], &[origins(n)[0]], None, mode).unwrap());
            // uniform_filter1d along each axis, at the other end of the origins
            let last = *origins(n).last().unwrap();
            for axis in 0..ndim as isize {
                out.push(nd::uniform_filter(ndim, &[n], &[last], Some(&[axis]), mode).unwrap());
            }
        }
        for order in 0..=2usize {
            let opts = GaussianOpts {
                order: vec![order],
                ..GaussianOpts::default()
            };
            out.push(nd::gaussian_filter(ndim, &[1.3], &opts, None, mode).unwrap());
        }
        let opts = GaussianOpts::default();
        out.push(nd::gaussian_laplace(ndim, &[0.9], &opts, None, mode).unwrap());
        out.push(nd::gaussian_gradient_magnitude(ndim, &[1.1], &opts, None, mode).unwrap());
        out.push(nd::laplace(ndim, None, mode).unwrap());
        for axis in 0..ndim as isize {
            out.push(nd::sobel(ndim, axis, mode).unwrap());
            out.push(nd::prewitt(ndim, axis, mode).unwrap());
        }
    }
    out
}

fn shape3(s: &[usize]) -> [usize; 3] {
    match *s {
        [h, w] => [1, h, w],
        [d, h, w] => [d, h, w],
        _ => unreachable!(),
    }
}

/// The first element whose bits differ, and how many do.
fn first_diff(a: &[u64], b: &[u64]) -> Option<(usize, usize)> {
    let n = a.iter().zip(b).filter(|(x, y)| x != y).count();
    a.iter().zip(b).position(|(x, y)| x != y).map(|i| (i, n))
}

fn assert_bits(what: &str, f: &LinearFilter, shape: &[usize], want: &[u64], got: &[u64], as_f32: bool) {
    assert_eq!(want.len(), got.len(), "{what}: {} on {shape:?}: lengths", f.name);
    if let Some((i, n)) = first_diff(want, got) {
        let show = |b: u64| {
            if as_f32 {
                format!("{:e} ({:#010x})", f32::from_bits(b as u32), b)
            } else {
                format!("{:e} ({:#018x})", f64::from_bits(b), b)
            }
        };
        panic!(
            "{what}: {} ({:?}) on {shape:?} {}: element {i} differs: want {}, got {} ({n} elements differ)",
            f.name,
            f.mode,
            if as_f32 { "f32" } else { "f64" },
            show(want[i]),
            show(got[i])
        );
    }
}

/// scipy's arithmetic for a one-term plan through kiln-core's `scipy_cpu` routines (each
/// pass stored in the data's type); `None` for combined terms and copies. The plan's
/// uniform filters are `uniform_filter1d`'s running sums.
fn scipy_reference(x: &[f64], shape: [usize; 3], f: &LinearFilter, dt: NdDType) -> Option<Vec<f64>> {
    if f.terms.len() != 1 {
        return None;
    }
    let q = quantizer(dt);
    let y = match &f.terms[0] {
        Term::Passes(p) if p.is_empty() => return None,
        Term::Passes(p) => {
            let passes: Vec<Pass1d> = p
                .iter()
                .map(|p| Pass1d {
                    axis: p.axis,
                    op: if p.running {
                        PassOp::Uniform(p.weights.len())
                    } else {
                        PassOp::Correlate(p.weights.clone())
                    },
                    origin: p.anchor as isize - (p.weights.len() / 2) as isize,
                    mode: f.mode,
                })
                .collect();
            run_passes(x.to_vec(), &shape, &passes, &q).unwrap()
        }
        Term::Direct(k) => {
            let org: Vec<isize> = (0..3)
                .map(|a| k.anchors[a] as isize - (k.shape[a] / 2) as isize)
                .collect();
            correlate_nd(x, &shape, &k.weights, &k.shape, &org, f.mode).unwrap()
        }
    };
    Some(y.into_iter().map(q).collect())
}

#[test]
fn cpu_is_scipys_arithmetic_for_f32_and_f64() {
    let seed = testing::fresh_seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let cpu = Runtime::cpu();
    let mut checked = 0;
    for shape in SHAPES {
        let s3 = shape3(shape);
        let n: usize = shape.iter().product();
        let x64: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let x32: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let x32w: Vec<f64> = x32.iter().map(|&v| v as f64).collect();
        for f in plans(shape.len(), &mut rng) {
            if let Some(want) = scipy_reference(&x64, s3, &f, NdDType::F64) {
                let got: Vec<f64> = cpu
                    .tensor(&x64, shape)
                    .unwrap()
                    .ndimage(&f)
                    .unwrap()
                    .to_vec()
                    .unwrap();
                let (w, g): (Vec<u64>, Vec<u64>) = (
                    want.iter().map(|v| v.to_bits()).collect(),
                    got.iter().map(|v| v.to_bits()).collect(),
                );
                assert_bits("cpu vs scipy_cpu", &f, shape, &w, &g, false);
                checked += 1;
            }
            if let Some(want) = scipy_reference(&x32w, s3, &f, NdDType::F32) {
                let got: Vec<f32> = cpu
                    .tensor(&x32, shape)
                    .unwrap()
                    .ndimage(&f)
                    .unwrap()
                    .to_vec()
                    .unwrap();
                let (w, g): (Vec<u64>, Vec<u64>) = (
                    want.iter().map(|&v| (v as f32).to_bits() as u64).collect(),
                    got.iter().map(|v| v.to_bits() as u64).collect(),
                );
                assert_bits("cpu vs scipy_cpu", &f, shape, &w, &g, true);
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "only {checked} cases checked");
}

/// The GPU's exact op into a NaN-poisoned output, and the facade on the GPU, against the
/// CPU facade, bit for bit.
fn gpu_equals_cpu(rt: &Runtime, seed: u64) {
    let b = rt.cuda().unwrap();
    let cpu = Runtime::cpu();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut checked = 0usize;
    for shape in SHAPES {
        let s3 = shape3(shape);
        let n: usize = shape.iter().product();
        let x64: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let x32: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let d64 = CudaData::F64(b.upload_slice(&x64).unwrap());
        let d32 = CudaData::F32(b.upload_slice(&x32).unwrap());
        for (i, f) in plans(shape.len(), &mut rng).into_iter().enumerate() {
            // f64
            let want: Vec<f64> = cpu
                .tensor(&x64, shape)
                .unwrap()
                .ndimage(&f)
                .unwrap()
                .to_vec()
                .unwrap();
            let want: Vec<u64> = want.iter().map(|v| v.to_bits()).collect();
            let mut out = CudaData::F64(b.upload_slice(&vec![f64::NAN; n]).unwrap());
            b.run(NdimageLinearExact {
                src: &d64,
                dst: &mut out,
                shape: s3,
                filter: &f,
            })
            .unwrap();
            let CudaData::F64(o) = &out else { unreachable!() };
            let mut got = vec![0.0f64; n];
            o.copy_to_host(&mut got, b.stream()).unwrap();
            let got: Vec<u64> = got.iter().map(|v| v.to_bits()).collect();
            assert_bits("gpu op vs cpu", &f, shape, &want, &got, false);
            // f32
            let want: Vec<f32> = cpu
                .tensor(&x32, shape)
                .unwrap()
                .ndimage(&f)
                .unwrap()
                .to_vec()
                .unwrap();
            let want: Vec<u64> = want.iter().map(|v| v.to_bits() as u64).collect();
            let mut out = CudaData::F32(b.alloc_poisoned_as::<f32>(n).unwrap());
            b.run(NdimageLinearExact {
                src: &d32,
                dst: &mut out,
                shape: s3,
                filter: &f,
            })
            .unwrap();
            let CudaData::F32(o) = &out else { unreachable!() };
            let mut got = vec![0.0f32; n];
            o.copy_to_host(&mut got, b.stream()).unwrap();
            let got: Vec<u64> = got.iter().map(|v| v.to_bits() as u64).collect();
            assert_bits("gpu op vs cpu", &f, shape, &want, &got, true);
            // the facade's route (every 7th plan: the op above covers the arithmetic)
            if i % 7 == 0 {
                let g64: Vec<f64> = rt
                    .tensor(&x64, shape)
                    .unwrap()
                    .ndimage(&f)
                    .unwrap()
                    .to_vec()
                    .unwrap();
                let c64: Vec<f64> = cpu
                    .tensor(&x64, shape)
                    .unwrap()
                    .ndimage(&f)
                    .unwrap()
                    .to_vec()
                    .unwrap();
                let (w, g): (Vec<u64>, Vec<u64>) = (
                    c64.iter().map(|v| v.to_bits()).collect(),
                    g64.iter().map(|v| v.to_bits()).collect(),
                );
                assert_bits("gpu tensor vs cpu", &f, shape, &w, &g, false);
                let g32: Vec<f32> = rt
                    .tensor(&x32, shape)
                    .unwrap()
                    .ndimage(&f)
                    .unwrap()
                    .to_vec()
                    .unwrap();
                let (w, g): (Vec<u64>, Vec<u64>) =
                    (want.clone(), g32.iter().map(|v| v.to_bits() as u64).collect());
                assert_bits("gpu tensor vs cpu", &f, shape, &w, &g, true);
            }
            checked += 1;
        }
    }
    assert!(checked > 1000, "only {checked} plans checked");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_linear_filters_are_bitwise_the_cpu_f32_f64() {
    let Some(rt) = testing::cuda_runtime_or_skip("gpu_linear_filters_are_bitwise_the_cpu_f32_f64") else {
        return;
    };
    gpu_equals_cpu(rt, testing::fresh_seed());
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_exact_op_refuses_mixed_and_integer_types() {
    let Some(rt) = testing::cuda_runtime_or_skip("gpu_exact_op_refuses_mixed_and_integer_types") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let f = nd::laplace(2, None, BoundaryMode::Reflect).unwrap();
    let src = CudaData::F32(b.upload_slice(&[1.0f32; 12]).unwrap());
    let mut dst = CudaData::F64(b.upload_slice(&[f64::NAN; 12]).unwrap());
    let e = b
        .run(NdimageLinearExact {
            src: &src,
            dst: &mut dst,
            shape: [1, 3, 4],
            filter: &f,
        })
        .unwrap_err();
    assert!(e.to_string().contains("f32 or f64"), "{e}");
}
