//! Interpolation on the GPU equals kiln-core's CPU loops to the bit: fresh random inputs of
//! odd sizes, ranks 1 to 3, every spline order 0-5, every boundary mode, `zoom` with and
//! without grid_mode, `shift`, `rotate` (a scaled rotation about the centre through
//! `affine_transform`), `affine_transform` with an output rank other than the input's,
//! `map_coordinates`, and `spline_filter1d` / `spline_filter` (every axis in turn), f32 and
//! f64 in and out, with and without prepadding. A failure names the case, the first
//! differing element (flat and multi-index), both values and their bits, and how many
//! elements differ. The CPU facade is checked against the same reference on every machine;
//! the GPU tests need `--features gpu-tests` and a GPU (with `KILN_REQUIRE_GPU=1` a missing
//! GPU fails them). The timing test (`#[ignore]`) prints the time of a 512³ f32 rotation
//! (orders 1 and 3), a 2048² zoom ×2 and a 2048² map_coordinates of order 3, and the device
//! memory used beyond input and output.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use kiln::ndimage::{InterpMode, InterpSpec, Resample};
use kiln::{testing, DType, Runtime, Tensor};
use kiln_core::imaging::interp::{
    geometric_transform_into, spline_filter1d, zoom_shift_into, Mapping, Store,
};

const MODES: [InterpMode; 7] = [
    InterpMode::Nearest,
    InterpMode::Wrap,
    InterpMode::Reflect,
    InterpMode::Mirror,
    InterpMode::Constant,
    InterpMode::GridWrap,
    InterpMode::GridConstant,
];

/// The owned parameters of one case (an `InterpSpec` borrows them).
#[derive(Clone, Debug)]
struct Case {
    ishape: Vec<usize>,
    oshape: Vec<usize>,
    order: usize,
    mode: InterpMode,
    cval: f64,
    nprepad: usize,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Zoom {
        zoom: Option<Vec<f64>>,
        shift: Option<Vec<f64>>,
        grid_mode: bool,
    },
    Affine {
        matrix: Vec<f64>,
        offset: Vec<f64>,
    },
    Coords(Vec<f64>),
}

impl Case {
    fn spec(&self) -> InterpSpec<'_> {
        InterpSpec {
            ishape: &self.ishape,
            oshape: &self.oshape,
            order: self.order,
            mode: self.mode,
            cval: self.cval,
            nprepad: self.nprepad,
            map: match &self.kind {
                Kind::Zoom {
                    zoom,
                    shift,
                    grid_mode,
                } => Resample::ZoomShift {
                    zoom: zoom.as_deref(),
                    shift: shift.as_deref(),
                    grid_mode: *grid_mode,
                },
                Kind::Affine { matrix, offset } => Resample::Affine { matrix, offset },
                Kind::Coords(c) => Resample::Coordinates(c),
            },
        }
    }

    /// kiln-core's result, computed here from the f64 input.
    fn reference_f64(&self, input: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0f64; self.oshape.iter().product()];
        self.reference_into(input, &mut out);
        out
    }

    fn reference_f32(&self, input: &[f64]) -> Vec<f32> {
        let mut out = vec![0.0f32; self.oshape.iter().product()];
        self.reference_into(input, &mut out);
        out
    }

    fn reference_into<T: kiln_core::imaging::interp::OutValue>(&self, input: &[f64], out: &mut [T]) {
        let r = match &self.kind {
            Kind::Zoom {
                zoom,
                shift,
                grid_mode,
            } => zoom_shift_into(
                input,
                &self.ishape,
                zoom.as_deref(),
                shift.as_deref(),
                &self.oshape,
                self.order,
                self.mode,
                self.cval,
                self.nprepad,
                *grid_mode,
                Store::Float,
                out,
            ),
            Kind::Affine { matrix, offset } => geometric_transform_into(
                input,
                &self.ishape,
                Mapping::Affine {
                    matrix,
                    shift: offset,
                },
                &self.oshape,
                self.order,
                self.mode,
                self.cval,
                self.nprepad,
                Store::Float,
                out,
            ),
            Kind::Coords(c) => geometric_transform_into(
                input,
                &self.ishape,
                Mapping::Coordinates(c),
                &self.oshape,
                self.order,
                self.mode,
                self.cval,
                self.nprepad,
                Store::Float,
                out,
            ),
        };
        r.unwrap_or_else(|e| panic!("{self:?}: the CPU reference failed: {e}"));
    }
}

/// A deterministic generator for the case parameters (the data come from `testing`).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
}

/// A rotation by `angle` in the plane of axes `a` and `b` of a `rank`-d space, row-major.
fn rotation(rank: usize, a: usize, b: usize, angle: f64) -> Vec<f64> {
    let mut m = vec![0.0; rank * rank];
    for i in 0..rank {
        m[i * rank + i] = 1.0;
    }
    let (s, c) = angle.sin_cos();
    m[a * rank + a] = c;
    m[a * rank + b] = -s;
    m[b * rank + a] = s;
    m[b * rank + b] = c;
    m
}

fn matmul(n: usize, x: &[f64], y: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = (0..n).map(|k| x[i * n + k] * y[k * n + j]).sum();
        }
    }
    out
}

/// Every case of one input shape: each order and mode, zoom (grid_mode both), shift, a
/// rotation about the centre (slightly scaled, so the edges are crossed), for 2-D an affine
/// map from a 3-D output, and map_coordinates at random points around the input.
fn cases(ishape: &[usize], g: &mut Lcg) -> Vec<Case> {
    let rank = ishape.len();
    let mut out = Vec::new();
    for order in 0..=5 {
        for mode in MODES {
            let cval = g.range(-2.0, 2.0);
            let nprepad = if matches!(mode, InterpMode::Nearest | InterpMode::GridConstant) && g.next() < 0.5
            {
                2
            } else {
                0
            };
            let base = Case {
                ishape: ishape.to_vec(),
                oshape: Vec::new(),
                order,
                mode,
                cval,
                nprepad,
                kind: Kind::Affine {
                    matrix: Vec::new(),
                    offset: Vec::new(),
                },
            };
            for grid_mode in [false, true] {
                let oshape: Vec<usize> = ishape
                    .iter()
                    .map(|&n| ((n as f64 * g.range(0.4, 2.6)).round() as usize).max(1))
                    .collect();
                // scipy's zoom factors: (in - 1) / (out - 1), or in / out with grid_mode
                let zoom: Vec<f64> = ishape
                    .iter()
                    .zip(&oshape)
                    .map(|(&i, &o)| {
                        if grid_mode {
                            i as f64 / o as f64
                        } else if o > 1 {
                            (i as f64 - 1.0) / (o as f64 - 1.0)
                        } else {
                            1.0
                        }
                    })
                    .collect();
                let shift = (g.next() < 0.5).then(|| (0..rank).map(|_| g.range(-2.0, 2.0)).collect());
                out.push(Case {
                    oshape,
                    kind: Kind::Zoom {
                        zoom: Some(zoom),
                        shift,
                        grid_mode,
                    },
                    ..base.clone()
                });
            }
            out.push(Case {
                oshape: ishape.to_vec(),
                kind: Kind::Zoom {
                    zoom: None,
                    shift: Some((0..rank).map(|_| g.range(-3.5, 3.5)).collect()),
                    grid_mode: false,
                },
                ..base.clone()
            });
            // a rotation (two planes in 3-D), scaled by ~1.1, about the centre
            let mut m = if rank == 1 {
                vec![-1.0]
            } else {
                rotation(rank, 0, 1, g.range(-3.0, 3.0))
            };
            if rank == 3 {
                m = matmul(3, &m, &rotation(3, 1, 2, g.range(-3.0, 3.0)));
            }
            let scale = g.range(0.9, 1.2);
            m.iter_mut().for_each(|v| *v *= scale);
            let centre: Vec<f64> = ishape.iter().map(|&n| (n as f64 - 1.0) / 2.0).collect();
            let offset: Vec<f64> = (0..rank)
                .map(|i| centre[i] - (0..rank).map(|j| m[i * rank + j] * centre[j]).sum::<f64>())
                .collect();
            out.push(Case {
                oshape: ishape.to_vec(),
                kind: Kind::Affine { matrix: m, offset },
                ..base.clone()
            });
            if rank == 2 {
                // a 3-D output sampling a 2-D input (matrix of 2 rows, 3 columns)
                let matrix: Vec<f64> = (0..6).map(|_| g.range(-1.2, 1.2)).collect();
                let offset = vec![g.range(-2.0, 4.0), g.range(-2.0, 4.0)];
                out.push(Case {
                    oshape: vec![3, 5, 4],
                    kind: Kind::Affine { matrix, offset },
                    ..base.clone()
                });
            }
            let oshape = vec![5, 7];
            let n: usize = oshape.iter().product();
            let coords = (0..rank * n)
                .map(|k| g.range(-3.0, ishape[k / n] as f64 + 3.0))
                .collect();
            out.push(Case {
                oshape,
                kind: Kind::Coords(coords),
                ..base
            });
        }
    }
    out
}

fn unravel(mut p: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for ax in (0..shape.len()).rev() {
        idx[ax] = p % shape[ax];
        p /= shape[ax];
    }
    idx
}

/// Asserts `got` equals `want` bit for bit, naming the first difference.
fn assert_bits<T: Copy + std::fmt::Debug>(
    what: &str,
    case: &Case,
    got: &[T],
    want: &[T],
    bits: impl Fn(T) -> u64,
) {
    assert_eq!(got.len(), want.len(), "{what}: length, {case:?}");
    let diffs: Vec<usize> = (0..got.len())
        .filter(|&i| bits(got[i]) != bits(want[i]))
        .collect();
    if let Some(&i) = diffs.first() {
        panic!(
            "{what}: {} of {} elements differ; first at {i} (index {:?}): got {:?} ({:#x}), want {:?} ({:#x})\ncase {case:?}",
            diffs.len(),
            got.len(),
            unravel(i, &case.oshape),
            got[i],
            bits(got[i]),
            want[i],
            bits(want[i]),
        );
    }
}

/// f64 data with every mantissa bit in use (two f32 draws combined).
fn random_f64(n: usize, seed: u64) -> Vec<f64> {
    let a = testing::random_f32(n, -1.0, 1.0, seed);
    let b = testing::random_f32(n, -1.0, 1.0, seed ^ 0x9e37_79b9);
    a.iter()
        .zip(&b)
        .map(|(&x, &y)| x as f64 + y as f64 * 1e-7)
        .collect()
}

/// Runs every case of every shape on `rt`, checking each result against kiln-core's.
fn check_every_case(rt: &Runtime, seed: u64) {
    let mut g = Lcg(seed);
    let shapes: [&[usize]; 4] = [&[17], &[13, 9], &[7, 6, 5], &[1, 11]];
    let (mut count, mut filters) = (0usize, 0usize);
    for (si, shape) in shapes.iter().enumerate() {
        let n: usize = shape.iter().product();
        let x32 = testing::random_f32(n, -1.0, 1.0, seed.wrapping_add(si as u64));
        let x64 = random_f64(n, seed.wrapping_add(100 + si as u64));
        let x32_as_64: Vec<f64> = x32.iter().map(|&v| v as f64).collect();
        let t32 = rt.tensor(&x32, shape).unwrap();
        let t64 = rt.tensor(&x64, shape).unwrap();
        for case in cases(shape, &mut g) {
            let spec = case.spec();
            // f32 in, f32 out
            let got: Vec<f32> = t32.resample(&spec, DType::F32).unwrap().to_vec().unwrap();
            let want = case.reference_f32(&x32_as_64);
            assert_bits("f32 -> f32", &case, &got, &want, |v| u64::from(v.to_bits()));
            // f64 in, f64 out
            let got: Vec<f64> = t64.resample(&spec, DType::F64).unwrap().to_vec().unwrap();
            let want = case.reference_f64(&x64);
            assert_bits("f64 -> f64", &case, &got, &want, f64::to_bits);
            // f64 in, f32 out (rounded once)
            let got: Vec<f32> = t64.resample(&spec, DType::F32).unwrap().to_vec().unwrap();
            let want = case.reference_f32(&x64);
            assert_bits("f64 -> f32", &case, &got, &want, |v| u64::from(v.to_bits()));
            // f32 in, f64 out
            let got: Vec<f64> = t32.resample(&spec, DType::F64).unwrap().to_vec().unwrap();
            let want = case.reference_f64(&x32_as_64);
            assert_bits("f32 -> f64", &case, &got, &want, f64::to_bits);
            count += 1;
        }
        filters += check_spline_filters(shape, &t32, &x32_as_64, &t64, &x64);
    }
    eprintln!(
        "{count} resamplings and {filters} prefilters, 4 dtype pairs each, bitwise equal on {}",
        rt.device()
    );
}

/// Asserts the bits of `t`'s values (f32 or f64) equal `want` (f64, rounded to f32 for an
/// f32 tensor).
fn assert_filter_bits(what: &str, t: &Tensor, want: &[f64]) {
    let (got, want): (Vec<u64>, Vec<u64>) = if t.dtype() == DType::F32 {
        (
            t.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| u64::from(v.to_bits()))
                .collect(),
            want.iter().map(|&v| u64::from((v as f32).to_bits())).collect(),
        )
    } else {
        (
            t.to_vec::<f64>().unwrap().iter().map(|v| v.to_bits()).collect(),
            want.iter().map(|v| v.to_bits()).collect(),
        )
    };
    let diffs = got.iter().zip(&want).filter(|(g, w)| g != w).count();
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: {diffs} of {} values differ; first at {i}: got {:#x}, want {:#x}",
            got.len(),
            got[i],
            want[i]
        );
    }
}

/// `spline_filter1d` along every axis, every order and mode, and `spline_filter` (every
/// axis in turn, in f64) of one shape, f32 and f64 in and out, against kiln-core's; returns
/// the number of filters checked.
fn check_spline_filters(shape: &[usize], t32: &Tensor, x32: &[f64], t64: &Tensor, x64: &[f64]) -> usize {
    let mut count = 0;
    for order in 0..=5 {
        for mode in MODES {
            for (t, x) in [(t32, x32), (t64, x64)] {
                let mut all = x.to_vec();
                let mut chained = t.clone();
                for axis in 0..shape.len() {
                    let mut want = x.to_vec();
                    spline_filter1d(&mut want, shape, axis, order, mode).unwrap();
                    spline_filter1d(&mut all, shape, axis, order, mode).unwrap();
                    for out in [DType::F32, DType::F64] {
                        let got = t.spline_filter1d(axis, order, mode, out).unwrap();
                        let what = format!(
                            "spline_filter1d {shape:?} axis {axis} order {order} {mode:?} {} -> {out}",
                            t.dtype()
                        );
                        assert_filter_bits(&what, &got, &want);
                    }
                    chained = chained.spline_filter1d(axis, order, mode, DType::F64).unwrap();
                    count += 1;
                }
                let what = format!("spline_filter {shape:?} order {order} {mode:?} {}", t.dtype());
                assert_filter_bits(&what, &chained, &all);
            }
        }
    }
    count
}

#[test]
fn cpu_facade_equals_kiln_core() {
    check_every_case(&Runtime::cpu(), testing::fresh_seed());
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_resampling_is_bitwise_the_cpu() {
    let Some(rt) = testing::cuda_runtime_or_skip("gpu_resampling_is_bitwise_the_cpu") else {
        return;
    };
    check_every_case(rt, testing::fresh_seed());
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_refuses_what_it_cannot_run() {
    let Some(rt) = testing::cuda_runtime_or_skip("gpu_refuses_what_it_cannot_run") else {
        return;
    };
    let x = rt.tensor(&[1.0f32; 16], &[1, 2, 2, 4]).unwrap();
    let spec = InterpSpec {
        ishape: &[1, 2, 2, 4],
        oshape: &[1, 2, 2, 4],
        order: 1,
        mode: InterpMode::Mirror,
        cval: 0.0,
        nprepad: 0,
        map: Resample::ZoomShift {
            zoom: None,
            shift: Some(&[0.5; 4]),
            grid_mode: false,
        },
    };
    let e = x.resample(&spec, DType::F32).expect_err("rank 4 on the GPU");
    assert!(e.to_string().contains("rank 1 to 3"), "{e}");
    // coordinates beyond the launcher's safe bound take the checked path (the launcher waits
    // for the status word): the same outcome as the CPU, and the same bits
    let x = rt.tensor(&[1.0f64, -2.0, 3.0, 0.5, 0.25], &[5]).unwrap();
    let spec = InterpSpec {
        ishape: &[5],
        oshape: &[3],
        order: 3,
        mode: InterpMode::Mirror,
        cval: 0.0,
        nprepad: 0,
        map: Resample::Affine {
            matrix: &[1.0],
            offset: &[1e300],
        },
    };
    for offset in [1e300, 4.0e18, -7.3e17, 2.5e15, f64::NAN, f64::INFINITY] {
        for mode in MODES {
            let off = [offset];
            let spec = InterpSpec {
                mode,
                map: Resample::Affine {
                    matrix: &[1.0],
                    offset: &off,
                },
                ..spec
            };
            let cpu = x
                .to_cpu()
                .unwrap()
                .resample(&spec, DType::F64)
                .and_then(|t| t.to_vec::<f64>());
            let gpu = x.resample(&spec, DType::F64).and_then(|t| t.to_vec::<f64>());
            match (&cpu, &gpu) {
                (Ok(c), Ok(g)) => {
                    let cb: Vec<u64> = c.iter().map(|v| v.to_bits()).collect();
                    let gb: Vec<u64> = g.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(gb, cb, "offset {offset:e} {mode:?}: gpu {g:?}, cpu {c:?}");
                }
                (Err(_), Err(_)) => {}
                _ => panic!("offset {offset:e} {mode:?}: cpu {cpu:?}, gpu {gpu:?}"),
            }
        }
    }
}

/// Seconds of `f` after one warm-up call, synchronised, best of `reps`.
fn time_best(reps: usize, f: impl Fn() -> Tensor) -> f64 {
    f().synchronize().unwrap();
    (0..reps)
        .map(|_| {
            let t0 = std::time::Instant::now();
            f().synchronize().unwrap();
            t0.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
#[ignore = "needs a GPU (timing): cargo test --features gpu-tests -- --ignored --nocapture"]
fn bench_resample() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_resample") else {
        return;
    };
    let dev = rt.cuda().unwrap();
    // a 512³ f32 volume rotated by 30° about axis 0, about its centre
    let n = 512usize;
    let vol = rt
        .tensor(&testing::random_f32(n * n * n, -1.0, 1.0, 7), &[n, n, n])
        .unwrap();
    let m = rotation(3, 1, 2, 30f64.to_radians());
    let c = (n as f64 - 1.0) / 2.0;
    let offset: Vec<f64> = (0..3)
        .map(|i| c - (0..3).map(|j| m[i * 3 + j] * c).sum::<f64>())
        .collect();
    let shape = [n, n, n];
    for order in [1usize, 3] {
        let spec = InterpSpec {
            ishape: &shape,
            oshape: &shape,
            order,
            mode: InterpMode::Constant,
            cval: 0.0,
            nprepad: 0,
            map: Resample::Affine {
                matrix: &m,
                offset: &offset,
            },
        };
        let s = time_best(3, || vol.resample(&spec, DType::F32).unwrap());
        dev.pool().reset_peaks();
        let before = dev.memory_stats().active_bytes;
        let out = vol.resample(&spec, DType::F32).unwrap();
        out.synchronize().unwrap();
        let extra = dev
            .memory_stats()
            .active_bytes_peak
            .saturating_sub(before + out.size_bytes() as u64);
        let gvox = (n * n * n) as f64 / s / 1e9;
        println!(
            "BENCH {{\"op\":\"affine_rotate\",\"shape\":[{n},{n},{n}],\"dtype\":\"f32\",\"order\":{order},\"seconds\":{s:.6},\"gvoxels_per_s\":{gvox:.3},\"extra_device_bytes\":{extra}}}"
        );
    }
    drop(vol);
    // a 2048² f32 image zoomed ×2
    let h = 2048usize;
    let img = rt
        .tensor(&testing::random_f32(h * h, -1.0, 1.0, 8), &[h, h])
        .unwrap();
    let ishape = [h, h];
    let oshape = [2 * h, 2 * h];
    let z = (h as f64 - 1.0) / (2.0 * h as f64 - 1.0);
    for order in [1usize, 3] {
        let spec = InterpSpec {
            ishape: &ishape,
            oshape: &oshape,
            order,
            mode: InterpMode::Mirror,
            cval: 0.0,
            nprepad: 0,
            map: Resample::ZoomShift {
                zoom: Some(&[z, z]),
                shift: None,
                grid_mode: false,
            },
        };
        let s = time_best(5, || img.resample(&spec, DType::F32).unwrap());
        dev.pool().reset_peaks();
        let before = dev.memory_stats().active_bytes;
        let out = img.resample(&spec, DType::F32).unwrap();
        out.synchronize().unwrap();
        let extra = dev
            .memory_stats()
            .active_bytes_peak
            .saturating_sub(before + out.size_bytes() as u64);
        println!(
            "BENCH {{\"op\":\"zoom2\",\"shape\":[{h},{h}],\"dtype\":\"f32\",\"order\":{order},\"seconds\":{s:.6},\"mpixels_out_per_s\":{:.1},\"extra_device_bytes\":{extra}}}",
            (4 * h * h) as f64 / s / 1e6
        );
    }
    // map_coordinates of order 3 on a 2048² f32 image at the points of a 2048² grid shifted
    // by fractions of a sample (the coordinates uploaded as f64 with each call)
    let n_out = h * h;
    let coords: Vec<f64> = (0..2 * n_out)
        .map(|k| {
            let (axis, p) = (k / n_out, k % n_out);
            let i = if axis == 0 { p / h } else { p % h };
            i as f64 + 0.37 - 0.21 * axis as f64
        })
        .collect();
    let oshape = [h, h];
    let spec = InterpSpec {
        ishape: &ishape,
        oshape: &oshape,
        order: 3,
        mode: InterpMode::Mirror,
        cval: 0.0,
        nprepad: 0,
        map: Resample::Coordinates(&coords),
    };
    let s = time_best(5, || img.resample(&spec, DType::F32).unwrap());
    println!(
        "BENCH {{\"op\":\"map_coordinates\",\"shape\":[{h},{h}],\"dtype\":\"f32\",\"order\":3,\"seconds\":{s:.6},\"mpoints_per_s\":{:.1}}}",
        n_out as f64 / s / 1e6
    );
}
