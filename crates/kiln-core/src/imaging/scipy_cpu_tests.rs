//! [`super`] against a plain reference: one output at a time, every index mapped through
//! the mode, the same formulas in the same order.

use super::*;

/// A small deterministic generator (no dev-dependency).
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 200.0
        })
        .collect()
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for a in (0..shape.len() - 1).rev() {
        s[a] = s[a + 1] * shape[a + 1];
    }
    s
}

/// The value at flat index `f` moved by `d` along `axis` under `mode`.
fn read(x: &[f64], shape: &[usize], f: usize, axis: usize, d: isize, mode: BoundaryMode) -> f64 {
    let st = strides(shape);
    let i = (f / st[axis]) % shape[axis];
    match mode.map_index(i as isize + d, shape[axis]) {
        Some(j) => x[f - i * st[axis] + j * st[axis]],
        None => mode.cval().unwrap(),
    }
}

/// `correlate1d` of one output from the `n` samples under the kernel (`x(m)`: tap `m`), as
/// scipy's `NI_Correlate1D` sums it.
fn corr_point(w: &[f64], sym: Sym, x: impl Fn(usize) -> f64) -> f64 {
    let n = w.len();
    match sym {
        Sym::General => {
            let mut acc = x(n - 1) * w[n - 1];
            for (m, &wm) in w.iter().enumerate().take(n - 1) {
                acc += x(m) * wm;
            }
            acc
        }
        Sym::Symmetric | Sym::Anti => {
            let c = n / 2;
            let mut acc = x(c) * w[c];
            for (m, &wm) in w.iter().enumerate().take(c) {
                let p = if sym == Sym::Symmetric {
                    x(m) + x(n - 1 - m)
                } else {
                    x(m) - x(n - 1 - m)
                };
                acc += p * wm;
            }
            acc
        }
    }
}

fn ref_pass(x: &[f64], shape: &[usize], p: &Pass1d) -> Vec<f64> {
    let n = p.op.len();
    let a = (n / 2) as isize + p.origin;
    (0..x.len())
        .map(|f| {
            let t = |m: usize| read(x, shape, f, p.axis, m as isize - a, p.mode);
            match &p.op {
                PassOp::Correlate(w) => corr_point(w, classify(w), t),
                PassOp::Uniform(_) => {
                    // the running sum from the start of the line, as scipy keeps it
                    let st = strides(shape);
                    let i = (f / st[p.axis]) % shape[p.axis];
                    let start = f - i * st[p.axis];
                    let at = |j: isize| read(x, shape, start, p.axis, j, p.mode);
                    let mut s = 0.0;
                    for m in 0..n as isize {
                        s += at(m - a);
                    }
                    for l in 1..=i as isize {
                        s += at(l + n as isize - 1 - a) - at(l - 1 - a);
                    }
                    s / n as f64
                }
            }
        })
        .collect()
}

const MODES: [BoundaryMode; 5] = [
    BoundaryMode::Reflect,
    BoundaryMode::Mirror,
    BoundaryMode::Nearest,
    BoundaryMode::Wrap,
    BoundaryMode::Constant(1.5),
];

#[test]
fn passes_match_the_reference_bit_for_bit() {
    let shape = [3usize, 5, 7];
    let x = data(105, 1);
    let kernels: Vec<(PassOp, isize)> = vec![
        (PassOp::Correlate(vec![0.25, 0.5, 0.25]), 0),
        (PassOp::Correlate(vec![-1.0, 0.0, 1.0]), 1),
        (PassOp::Correlate(vec![1.0, 3.0]), -1),
        (PassOp::Correlate(vec![0.1, -0.7, 2.3, 0.4, 0.9]), -2),
        (PassOp::Correlate(vec![0.3; 13]), 3),
        (PassOp::Uniform(4), 1),
        (PassOp::Uniform(3), 0),
        (PassOp::Uniform(11), -5),
    ];
    for axis in 0..3 {
        for mode in MODES {
            for (op, origin) in &kernels {
                let p = Pass1d {
                    axis,
                    op: op.clone(),
                    origin: *origin,
                    mode,
                };
                let got = run_passes(x.clone(), &shape, std::slice::from_ref(&p), &|v| v).unwrap();
                let want = ref_pass(&x, &shape, &p);
                assert_eq!(
                    got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{p:?}"
                );
            }
        }
    }
}

#[test]
fn a_mode_per_pass() {
    let shape = [4usize, 6];
    let x = data(24, 2);
    let p0 = Pass1d {
        axis: 0,
        op: PassOp::Correlate(vec![1.0, 2.0, 1.0]),
        origin: 0,
        mode: BoundaryMode::Wrap,
    };
    let p1 = Pass1d {
        axis: 1,
        op: PassOp::Uniform(3),
        origin: 0,
        mode: BoundaryMode::Constant(5.0),
    };
    let got = run_passes(x.clone(), &shape, &[p0.clone(), p1.clone()], &|v| v).unwrap();
    let want = ref_pass(&ref_pass(&x, &shape, &p0), &shape, &p1);
    assert_eq!(got, want);
    // the corner reads 5.0 to its left along axis 1, and wraps along axis 0
    let top = x[18] + 2.0 * x[0] + x[6];
    assert_eq!(ref_pass(&x, &shape, &p0)[0], top);
}

#[test]
fn integer_outputs_truncate_and_wrap_between_passes() {
    // sobel on int8: [-1, 0, 1] along axis 1, then [1, 2, 1] along axis 0
    let x: Vec<u8> = vec![0, 100, 200, 0, 0, 250, 50, 0, 10];
    let shape = [3usize, 3];
    let passes = [
        Pass1d {
            axis: 1,
            op: PassOp::Correlate(vec![-1.0, 0.0, 1.0]),
            origin: 0,
            mode: BoundaryMode::Reflect,
        },
        Pass1d {
            axis: 0,
            op: PassOp::Correlate(vec![1.0, 2.0, 1.0]),
            origin: 0,
            mode: BoundaryMode::Reflect,
        },
    ];
    let y = passes_bytes(&x, NdDType::U8, &shape, &passes, NdDType::I8).unwrap();
    // by hand: the first pass in i8 (C's cast: truncation through i32, low byte kept)
    let c = |v: f64| (v as i32) as i8 as f64;
    let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let p1: Vec<f64> = ref_pass(&xf, &shape, &passes[0]).into_iter().map(c).collect();
    assert_eq!(p1[1], c(200.0)); // 200 - 0 stored as -56
    assert_eq!(p1[1], -56.0);
    let want: Vec<i8> = ref_pass(&p1, &shape, &passes[1])
        .into_iter()
        .map(|v| (v as i32) as i8)
        .collect();
    assert_eq!(y, want.iter().map(|&v| v as u8).collect::<Vec<_>>());
    // float32 outputs round each pass; uint64 stores through 2^63
    assert_eq!(quantizer(NdDType::F32)(0.1), 0.1f32 as f64);
    assert_eq!(quantizer(NdDType::I16)(-3.9), -3.0);
    assert_eq!(quantizer(NdDType::U8)(-1.5), 255.0);
    assert_eq!(quantizer(NdDType::U64)(1e19), 1e19);
}

#[test]
fn uniform_division_is_per_output() {
    // scipy keeps one running sum along the line and divides it at each output
    let shape = [3usize];
    let p = Pass1d {
        axis: 0,
        op: PassOp::Uniform(3),
        origin: 0,
        mode: BoundaryMode::Nearest,
    };
    let y = run_passes(vec![0.1, 0.2, 0.3], &shape, &[p], &|v| v).unwrap();
    let s0 = 0.0 + 0.1 + 0.1 + 0.2;
    assert_eq!(y[0], s0 / 3.0);
    assert_eq!(y[1], (s0 + (0.3 - 0.1)) / 3.0);
}

fn ref_correlate(
    x: &[f64],
    shape: &[usize],
    w: &[f64],
    ws: &[usize],
    org: &[isize],
    mode: BoundaryMode,
) -> Vec<f64> {
    let nd = shape.len();
    let st = strides(shape);
    let wst = strides(ws);
    (0..x.len())
        .map(|f| {
            let mut acc = 0.0;
            for (q, &wq) in w.iter().enumerate() {
                if wq.abs() <= f64::EPSILON {
                    continue;
                }
                let mut off = Some(0usize);
                for a in 0..nd {
                    let i = (f / st[a]) % shape[a];
                    let t = (q / wst[a]) % ws[a];
                    let d = t as isize - (ws[a] / 2) as isize - org[a];
                    off = off.and_then(|o| mode.map_index(i as isize + d, shape[a]).map(|j| o + j * st[a]));
                }
                acc += wq * off.map_or(mode.cval().unwrap_or(0.0), |o| x[o]);
            }
            acc
        })
        .collect()
}

#[test]
fn correlate_nd_matches_the_reference() {
    let shape = [2usize, 5, 6];
    let x = data(60, 3);
    let mut w = data(2 * 3 * 4, 4);
    w[5] = 0.0;
    w[7] = f64::EPSILON / 2.0; // dropped, as scipy drops it
    let ws = [2usize, 3, 4];
    for mode in MODES {
        for org in [[0isize, 0, 0], [-1, 1, -2], [0, -1, 1]] {
            let got = correlate_nd(&x, &shape, &w, &ws, &org, mode).unwrap();
            assert_eq!(
                got,
                ref_correlate(&x, &shape, &w, &ws, &org, mode),
                "{mode:?} {org:?}"
            );
        }
    }
    // long rows (the interior runs summed tap by tap), kernels wider than the row too
    let x2 = data(3 * 41, 6);
    for (ws, n) in [([3usize, 5], 15usize), ([1, 9], 9), ([2, 50], 100)] {
        let w = data(n, 7);
        for mode in MODES {
            for org in [[0isize, 0], [1, -2], [0, 2]] {
                let org = [org[0].min((ws[0] as isize - 1) / 2), org[1]];
                let got = correlate_nd(&x2, &[3, 41], &w, &ws, &org, mode).unwrap();
                assert_eq!(
                    got,
                    ref_correlate(&x2, &[3, 41], &w, &ws, &org, mode),
                    "{ws:?} {mode:?} {org:?}"
                );
            }
        }
    }
    // 1-D and 4-D
    let got = correlate_nd(&x, &[60], &[1.0, -2.0, 1.0], &[3], &[0], BoundaryMode::Mirror).unwrap();
    assert_eq!(
        got,
        ref_correlate(&x, &[60], &[1.0, -2.0, 1.0], &[3], &[0], BoundaryMode::Mirror)
    );
    let s4 = [2usize, 3, 2, 5];
    let w4 = data(16, 5);
    let got = correlate_nd(&x, &s4, &w4, &[2, 2, 2, 2], &[0, -1, 0, 0], BoundaryMode::Wrap).unwrap();
    assert_eq!(
        got,
        ref_correlate(&x, &s4, &w4, &[2, 2, 2, 2], &[0, -1, 0, 0], BoundaryMode::Wrap)
    );
}

#[test]
fn uint64_outputs_as_scipy_stores_them() {
    let t63 = (1u64 << 63) as f64;
    // the 1-D routines: 2^63 below -2^63; the n-D correlate: the negated conversion
    assert_eq!(quantizer(NdDType::U64)(-2.0 * t63), t63);
    assert_eq!(correlate_u64(-(t63 + 1048576.0)), (1u64 << 63) - (1 << 20));
    assert_eq!(correlate_u64(-5.7), u64::MAX - 4);
    assert_eq!(correlate_u64(4.0 * t63), 0);
    let y = correlate_bytes(
        &(-(t63 + 1048576.0)).to_ne_bytes(),
        NdDType::F64,
        &[1],
        &[1.0],
        &[1],
        &[0],
        BoundaryMode::Reflect,
        NdDType::U64,
    )
    .unwrap();
    assert_eq!(y, ((1u64 << 63) - (1 << 20)).to_ne_bytes());
}

#[test]
fn bad_input_is_an_error() {
    let p = |axis, origin| Pass1d {
        axis,
        op: PassOp::Correlate(vec![1.0, 1.0, 1.0]),
        origin,
        mode: BoundaryMode::Reflect,
    };
    assert!(run_passes(vec![0.0; 4], &[4], &[p(1, 0)], &|v| v).is_err());
    let e = run_passes(vec![0.0; 4], &[4], &[p(0, 2)], &|v| v)
        .unwrap_err()
        .to_string();
    assert!(e.contains("-1 <= origin <= 1"), "{e}");
    assert!(run_passes(vec![0.0; 4], &[5], &[p(0, 0)], &|v| v).is_err());
    assert!(correlate_nd(&[0.0; 4], &[4], &[1.0; 3], &[3, 1], &[0], BoundaryMode::Wrap).is_err());
    assert!(passes_bytes(&[0u8; 3], NdDType::I16, &[3], &[p(0, 0)], NdDType::I16).is_err());
    // empty arrays give empty results
    assert!(run_passes(vec![], &[0, 3], &[p(1, 0)], &|v| v)
        .unwrap()
        .is_empty());
}
