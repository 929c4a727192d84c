//! The interpolation kernels (`kernels/interp.cu`) run on the host: a C++ compiler builds
//! the module over `emu/cuda_host_stub.h` without contraction (`-ffp-contract=off`, as the
//! module is compiled with `--fmad=false`), and `emu/interp_check.cpp` runs each kernel over
//! a simulated grid on the argument structs the launcher builds
//! (`kiln_cuda::{interp_args_bytes, spline_args_bytes}`), each resampling through the kernel
//! the launcher picks for its coordinate kind, order and input type (every one of the table's
//! resampling kernels is run). Every output must equal
//! kiln-core's (`zoom_shift_into`, `geometric_transform_into`, `spline_filter1d`) bit for
//! bit, and the status word must be set exactly where the CPU returns its error: random
//! inputs of odd sizes, ranks 1 to 3, every order 0-5 and every mode, zoom with and without
//! grid_mode, shift, rotations, an affine map between ranks, map_coordinates (with NaN,
//! infinite and huge coordinates), f32 and f64 in and out, with and without prepadding.

use kiln_core::imaging::interp::{
    geometric_transform_into, spline_filter1d, zoom_shift_into, InterpMode, Mapping, OutValue, Store,
};
use kiln_cuda::{InterpSpec, Resample};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::process::Command;

const MODES: [InterpMode; 7] = [
    InterpMode::Nearest,
    InterpMode::Wrap,
    InterpMode::Reflect,
    InterpMode::Mirror,
    InterpMode::Constant,
    InterpMode::GridWrap,
    InterpMode::GridConstant,
];

/// The owned parameters of one resampling (an `InterpSpec` borrows them).
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

    fn kind_code(&self) -> u64 {
        match self.kind {
            Kind::Zoom { .. } => 0,
            Kind::Affine { .. } => 1,
            Kind::Coords(_) => 2,
        }
    }

    /// kiln-core's result (`None`: its error).
    fn reference<T: OutValue + Default>(&self, input: &[f64]) -> Option<Vec<T>> {
        let mut out = vec![T::default(); self.oshape.iter().product()];
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
                &mut out,
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
                &mut out,
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
                &mut out,
            ),
        };
        r.ok().map(|()| out)
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

/// Every resampling of one input shape: each order and mode, zoom (grid_mode both), shift,
/// a scaled rotation about the centre, for 2-D an affine map from a 3-D output, and
/// map_coordinates at random points around the input.
fn cases(ishape: &[usize], g: &mut StdRng) -> Vec<Case> {
    let rank = ishape.len();
    let mut out = Vec::new();
    for order in 0..=5 {
        for mode in MODES {
            let nprepad =
                if matches!(mode, InterpMode::Nearest | InterpMode::GridConstant) && g.random_bool(0.5) {
                    2
                } else {
                    0
                };
            let base = Case {
                ishape: ishape.to_vec(),
                oshape: ishape.to_vec(),
                order,
                mode,
                cval: g.random_range(-2.0..2.0),
                nprepad,
                kind: Kind::Coords(Vec::new()),
            };
            for grid_mode in [false, true] {
                let oshape: Vec<usize> = ishape
                    .iter()
                    .map(|&n| ((n as f64 * g.random_range(0.4..2.6)).round() as usize).max(1))
                    .collect();
                let zoom = ishape
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
                let shift = g
                    .random_bool(0.5)
                    .then(|| (0..rank).map(|_| g.random_range(-2.0..2.0)).collect());
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
                kind: Kind::Zoom {
                    zoom: None,
                    shift: Some((0..rank).map(|_| g.random_range(-3.5..3.5)).collect()),
                    grid_mode: false,
                },
                ..base.clone()
            });
            let mut m = if rank == 1 {
                vec![-1.0]
            } else {
                rotation(rank, 0, rank - 1, g.random_range(-3.0..3.0))
            };
            let scale = g.random_range(0.9..1.2);
            m.iter_mut().for_each(|v| *v *= scale);
            let centre: Vec<f64> = ishape.iter().map(|&n| (n as f64 - 1.0) / 2.0).collect();
            let offset = (0..rank)
                .map(|i| centre[i] - (0..rank).map(|j| m[i * rank + j] * centre[j]).sum::<f64>())
                .collect();
            out.push(Case {
                kind: Kind::Affine { matrix: m, offset },
                ..base.clone()
            });
            if rank == 2 {
                out.push(Case {
                    oshape: vec![3, 5, 4],
                    kind: Kind::Affine {
                        matrix: (0..6).map(|_| g.random_range(-1.2..1.2)).collect(),
                        offset: vec![g.random_range(-2.0..4.0), g.random_range(-2.0..4.0)],
                    },
                    ..base.clone()
                });
            }
            let oshape = vec![5, 7];
            let n: usize = oshape.iter().product();
            let coords = (0..rank * n)
                .map(|k| {
                    let len = ishape[k / n] as f64;
                    g.random_range(-3.0..len + 3.0)
                })
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

/// map_coordinates at single extreme coordinates of 1-D inputs of 5 to 7 samples: NaN,
/// infinities, values beyond i64 and beyond 2^53, where the CPU may return its error (1e300
/// in grid-wrap mode on 7 samples does).
fn extreme_cases() -> Vec<Case> {
    let mut out = Vec::new();
    let values = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e300,
        -1e300,
        4.0e18,
        -7.3e17,
        2.5e15,
        -9.007_199_254_740_993e15,
        1.0e12 + 0.5,
    ];
    for order in 0..=5 {
        for mode in MODES {
            for (&v, len) in values.iter().flat_map(|v| [5, 6, 7].map(|n| (v, n))) {
                out.push(Case {
                    ishape: vec![len],
                    oshape: vec![1],
                    order,
                    mode,
                    cval: 0.5,
                    nprepad: 0,
                    kind: Kind::Coords(vec![v]),
                });
            }
        }
    }
    out
}

fn put(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    buf.extend_from_slice(bytes);
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// What one record must come back as: the CPU's output bytes, or its error (status set).
struct Expect {
    what: String,
    want: Option<Vec<u8>>,
    /// The bytes the driver writes back, and those of one element.
    bytes: usize,
    elem: usize,
}

#[test]
fn interp_kernels_match_kiln_core_on_the_host() {
    let Some(cxx) = kiln_testkit::cxx_or_skip("interp_kernels_match_kiln_core_on_the_host") else {
        return;
    };
    let seed = std::env::var("KILN_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(42, |d| d.as_nanos() as u64)
        });
    eprintln!("seed {seed} (replay with KILN_TEST_SEED={seed})");
    let mut g = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let exe = super::build(
        &cxx,
        dir.path(),
        "interp_check",
        &[include_str!("../../kernels/interp.cu")],
        include_str!("interp_check.cpp"),
        &[],
    );
    let mut cases_bin = Vec::new();
    let mut expect = Vec::new();
    let (mut resamplings, mut errors, mut unchecked) = (0usize, 0usize, 0usize);
    // the resampling kernels the launcher picked: every one must be run
    let mut kernels = std::collections::BTreeSet::new();
    let shapes: [&[usize]; 5] = [&[17], &[13, 9], &[7, 6, 5], &[1, 11], &[2, 5]];
    let mut all = Vec::new();
    for shape in shapes {
        let n: usize = shape.iter().product();
        let x32: Vec<f32> = (0..n).map(|_| g.random_range(-1.0f32..1.0)).collect();
        let x64: Vec<f64> = (0..n).map(|_| g.random_range(-1.0..1.0)).collect();
        for case in cases(shape, &mut g) {
            all.push((case, x32.clone(), x64.clone()));
        }
    }
    for case in extreme_cases() {
        let n = case.ishape[0];
        let x64: Vec<f64> = (0..n).map(|_| g.random_range(-1.0..1.0)).collect();
        all.push((case, x64.iter().map(|&v| v as f32).collect(), x64));
    }
    for (case, x32, x64) in &all {
        let x32_as_64: Vec<f64> = x32.iter().map(|&v| f64::from(v)).collect();
        let spec = case.spec();
        for (in_f64, out_f64) in [(false, false), (true, true), (true, false), (false, true)] {
            let (args, symbol, safe) = kiln_cuda::interp_args_bytes(&spec, in_f64, out_f64).unwrap();
            kernels.insert(symbol);
            let input = if in_f64 { x64 } else { &x32_as_64 };
            let n_out: usize = case.oshape.iter().product();
            let want = if out_f64 {
                case.reference::<f64>(input).map(|v| f64_bytes(&v))
            } else {
                case.reference::<f32>(input).map(|v| f32_bytes(&v))
            };
            // the launcher skips the status word only where the CPU cannot fail
            assert!(
                !(safe && want.is_none()),
                "{case:?}: the CPU fails on a launch the launcher calls safe"
            );
            errors += usize::from(want.is_none());
            unchecked += usize::from(safe);
            cases_bin.extend_from_slice(&case.kind_code().to_le_bytes());
            put(&mut cases_bin, symbol.as_bytes());
            put(&mut cases_bin, &args);
            put(
                &mut cases_bin,
                &if in_f64 { f64_bytes(x64) } else { f32_bytes(x32) },
            );
            let coords = match &case.kind {
                Kind::Coords(c) => c.as_slice(),
                _ => &[],
            };
            cases_bin.extend_from_slice(&(coords.len() as u64).to_le_bytes());
            cases_bin.extend_from_slice(&f64_bytes(coords));
            let elem = if out_f64 { 8 } else { 4 };
            cases_bin.extend_from_slice(&((n_out * elem) as u64).to_le_bytes());
            expect.push(Expect {
                what: format!("in f64 {in_f64}, out f64 {out_f64}: {case:?}"),
                want,
                bytes: n_out * elem,
                elem,
            });
            resamplings += 1;
        }
    }
    // the prefilter along every axis of each shape, every order and mode
    let mut filters = 0usize;
    for shape in [&[17usize][..], &[13, 9], &[7, 6, 5], &[2, 5], &[1, 11]] {
        for axis in 0..shape.len() {
            for order in 0..=5 {
                for mode in MODES {
                    let n: usize = shape.iter().product();
                    let x: Vec<f64> = (0..n).map(|_| g.random_range(-1.0..1.0)).collect();
                    let mut want = x.clone();
                    spline_filter1d(&mut want, shape, axis, order, mode).unwrap();
                    let passes = kiln_cuda::spline_args_bytes(shape, axis, order, mode).unwrap();
                    assert_eq!(
                        passes.len(),
                        if order < 2 || shape[axis] < 2 {
                            0
                        } else {
                            order / 2
                        }
                    );
                    cases_bin.extend_from_slice(&3u64.to_le_bytes());
                    put(&mut cases_bin, b"interp_spline_pole_f64");
                    put(&mut cases_bin, &passes.concat());
                    put(&mut cases_bin, &f64_bytes(&x));
                    cases_bin.extend_from_slice(&0u64.to_le_bytes());
                    cases_bin.extend_from_slice(&0u64.to_le_bytes());
                    expect.push(Expect {
                        what: format!("spline_filter1d {shape:?} axis {axis} order {order} {mode:?}"),
                        want: Some(f64_bytes(&want)),
                        bytes: 8 * n,
                        elem: 8,
                    });
                    filters += 1;
                }
            }
        }
    }
    std::fs::write(dir.path().join("cases.bin"), &cases_bin).unwrap();
    let run = Command::new(&exe).arg(dir.path()).output().unwrap();
    assert!(
        run.status.success(),
        "interp_check failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let got = std::fs::read(dir.path().join("out.bin")).unwrap();
    let mut at = 0usize;
    let mut bad = 0usize;
    for e in &expect {
        let status = u64::from_le_bytes(got[at..at + 8].try_into().unwrap());
        at += 8;
        match &e.want {
            None => {
                if status == 0 {
                    bad += 1;
                    eprintln!("the CPU fails, the kernel's status is clear: {}", e.what);
                }
            }
            Some(w) => {
                let g = &got[at..at + e.bytes];
                if status != 0 || g != w.as_slice() {
                    bad += 1;
                    if bad <= 5 {
                        let first = (0..w.len() / e.elem)
                            .find(|&i| g[i * e.elem..(i + 1) * e.elem] != w[i * e.elem..(i + 1) * e.elem]);
                        eprintln!("status {status}, first differing element {first:?}: {}", e.what);
                    }
                }
            }
        }
        at += e.bytes;
    }
    assert_eq!(bad, 0, "{bad} of {} records differ from kiln-core", expect.len());
    assert!(
        errors > 0 && unchecked > 0,
        "both the error and the unchecked paths are reached"
    );
    let resamplers: Vec<&str> = kiln_cuda::Kernel::ALL
        .iter()
        .map(|k| k.symbol())
        .filter(|s| s.starts_with("interp_") && *s != "interp_spline_pole_f64")
        .collect();
    assert_eq!(
        kernels.iter().copied().collect::<Vec<_>>(),
        {
            let mut r = resamplers.clone();
            r.sort_unstable();
            r
        },
        "every resampling kernel of the table is run"
    );
    eprintln!(
        "{} kernels: {resamplings} resamplings ({errors} CPU errors, {unchecked} launches without a status read) and {filters} prefilters equal kiln-core's bits",
        kernels.len() + 1
    );
}
