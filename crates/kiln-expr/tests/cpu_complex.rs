//! complex64 and complex128 on the CPU evaluator against straightforward Rust references:
//! arithmetic bit for bit (the formulas the generated CUDA runs: CuPy's products and
//! scaled quotient, products and quotients by a real value on the parts), special values
//! (infinities, NaN, signed zeros) through those formulas, the functions within their ulp
//! bounds, mixed real and complex operands, scalars, broadcasting, strided and raw arrays,
//! and the constructs refused with the construct named.

mod common;

use kiln_expr::{Arg, ElementwiseKernel, HostArray, OwnedArray, Scalar, ScalarType};

/// Around the 4096-lane chunk of the evaluator, and 0.
const SIZES: [usize; 6] = [0, 1, 7, 4095, 4097, 9001];

/// Deterministic complex values with parts in [-3, 3), never exactly 0.
fn cvals(n: usize, seed: u64) -> Vec<[f64; 2]> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let v = ((s >> 11) as f64 / (1u64 << 53) as f64) * 6.0 - 3.0;
        if v == 0.0 {
            0.5
        } else {
            v
        }
    };
    (0..n).map(|_| [next(), next()]).collect()
}

type V64 = Vec<[f64; 2]>;
type V32 = Vec<[f32; 2]>;

fn c32(v: &[[f64; 2]]) -> Vec<[f32; 2]> {
    v.iter().map(|z| [z[0] as f32, z[1] as f32]).collect()
}

fn arr<'a, T: kiln_expr::Element>(shape: &[usize], v: &'a [T]) -> Arg<'a> {
    Arg::Array(HostArray::from_slice(shape, v))
}

fn out<T: kiln_expr::Element>(o: &OwnedArray) -> Vec<T> {
    o.to_vec().unwrap_or_else(|e| panic!("{e}"))
}

/// The references: the formulas of `cuda_complex`'s helpers, written once over `f32` and
/// `f64`.
macro_rules! reference {
    ($m:ident, $t:ty) => {
        mod $m {
            pub type C = [$t; 2];
            pub fn add(a: C, b: C) -> C {
                [a[0] + b[0], a[1] + b[1]]
            }
            #[allow(dead_code)]
            pub fn sub(a: C, b: C) -> C {
                [a[0] - b[0], a[1] - b[1]]
            }
            pub fn mul(a: C, b: C) -> C {
                [a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]]
            }
            pub fn div(a: C, b: C) -> C {
                let s = b[0].abs() + b[1].abs();
                let oos = 1.0 / s;
                let (ars, ais, brs, bis) = (a[0] * oos, a[1] * oos, b[0] * oos, b[1] * oos);
                let s = brs * brs + bis * bis;
                let oos = 1.0 / s;
                [(ars * brs + ais * bis) * oos, (ais * brs - ars * bis) * oos]
            }
            /// The textbook quotient in double precision (what `div` approximates).
            pub fn div_exact(a: C, b: C) -> [f64; 2] {
                let (a0, a1, b0, b1) = (a[0] as f64, a[1] as f64, b[0] as f64, b[1] as f64);
                let d = b0 * b0 + b1 * b1;
                [(a0 * b0 + a1 * b1) / d, (a1 * b0 - a0 * b1) / d]
            }
        }
    };
}
reference!(r32, f32);
reference!(r64, f64);

fn same32(a: [f32; 2], b: [f32; 2]) -> bool {
    a[0].to_bits() == b[0].to_bits() && a[1].to_bits() == b[1].to_bits()
        || (a[0].is_nan() == b[0].is_nan() && a[1].is_nan() == b[1].is_nan() && {
            let eq = |x: f32, y: f32| x.is_nan() || x.to_bits() == y.to_bits();
            eq(a[0], b[0]) && eq(a[1], b[1])
        })
}

fn same64(a: [f64; 2], b: [f64; 2]) -> bool {
    let eq = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
    eq(a[0], b[0]) && eq(a[1], b[1])
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * b.abs().max(1.0)
}

#[test]
fn arithmetic_is_bitwise_the_cuda_formulas_at_every_size() {
    let k = common::ew("cplx_arith");
    for n in SIZES {
        let x = cvals(n, 1);
        let y = cvals(n, 2);
        // complex128
        let o = k.call_alloc(&[arr(&[n], &x), arr(&[n], &y)], None).unwrap();
        let [a, s, m, d]: [V64; 4] = [0, 1, 2, 3].map(|k| out(&o[k]));
        let (ng, cj): (Vec<[f64; 2]>, Vec<[f64; 2]>) = (out(&o[4]), out(&o[5]));
        let (eq, ne): (Vec<bool>, Vec<bool>) = (out_bool(&o[6]), out_bool(&o[7]));
        for e in 0..n {
            let (p, q) = (x[e], y[e]);
            assert!(same64(a[e], r64::add(p, q)), "add at {e}");
            assert!(same64(s[e], r64::sub(p, q)), "sub at {e}");
            assert!(same64(m[e], r64::mul(p, q)), "mul at {e}");
            assert!(same64(d[e], r64::div(p, q)), "div at {e}");
            let de = r64::div_exact(p, q);
            assert!(close(d[e][0], de[0], 1e-14) && close(d[e][1], de[1], 1e-14));
            assert!(same64(ng[e], [-p[0], -p[1]]) && same64(cj[e], [p[0], -p[1]]));
            assert_eq!((eq[e], ne[e]), (p == q, p != q));
        }
        // complex64
        let (x, y) = (c32(&x), c32(&y));
        let o = k.call_alloc(&[arr(&[n], &x), arr(&[n], &y)], None).unwrap();
        let [a, m, d]: [V32; 3] = [0, 2, 3].map(|k| out(&o[k]));
        for e in 0..n {
            let (p, q) = (x[e], y[e]);
            assert!(same32(a[e], r32::add(p, q)), "c64 add at {e}");
            assert!(same32(m[e], r32::mul(p, q)), "c64 mul at {e}");
            assert!(same32(d[e], r32::div(p, q)), "c64 div at {e}");
            let de = r32::div_exact(p, q);
            assert!(close(d[e][0] as f64, de[0], 4e-6) && close(d[e][1] as f64, de[1], 4e-6));
        }
    }
}

fn out_bool(o: &OwnedArray) -> Vec<bool> {
    o.bytes.iter().map(|&b| b != 0).collect()
}

#[test]
fn special_values_follow_the_formulas() {
    let k = common::ew("cplx_arith");
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let specials = [
        [0.0, 0.0],
        [-0.0, 0.0],
        [0.0, -0.0],
        [-0.0, -0.0],
        [inf, 0.0],
        [-inf, 1.0],
        [1.0, inf],
        [nan, 1.0],
        [1.0, nan],
        [1e300, 1e300],
        [1e-300, -1e-300],
        [2.0, -3.0],
    ];
    let mut x = Vec::new();
    let mut y = Vec::new();
    for p in specials {
        for q in specials {
            x.push(p);
            y.push(q);
        }
    }
    let n = x.len();
    let o = k.call_alloc(&[arr(&[n], &x), arr(&[n], &y)], None).unwrap();
    let [a, m, d]: [V64; 3] = [0, 2, 3].map(|k| out(&o[k]));
    for e in 0..n {
        let (p, q) = (x[e], y[e]);
        assert!(same64(a[e], r64::add(p, q)), "{p:?} + {q:?}: {:?}", a[e]);
        assert!(same64(m[e], r64::mul(p, q)), "{p:?} * {q:?}: {:?}", m[e]);
        assert!(same64(d[e], r64::div(p, q)), "{p:?} / {q:?}: {:?}", d[e]);
    }
    // what the formulas define: signed zeros of products, a finite quotient of huge
    // operands (the scaling), division by zero
    let at = |p: [f64; 2], q: [f64; 2]| {
        (0..n)
            .find(|&e| same64(x[e], p) && same64(y[e], q))
            .unwrap_or_else(|| panic!("no case {p:?} {q:?}"))
    };
    assert!(same64(m[at([-0.0, -0.0], [-0.0, -0.0])], [0.0, 0.0]));
    assert!(same64(m[at([0.0, -0.0], [2.0, -3.0])], [0.0, -0.0]));
    let big = d[at([1e300, 1e300], [1e300, 1e300])];
    assert!(same64(big, [1.0, 0.0]), "{big:?}");
    let tiny = d[at([1e-300, -1e-300], [1e-300, -1e-300])];
    assert!(same64(tiny, [1.0, 0.0]), "{tiny:?}");
    assert!(d[at([2.0, -3.0], [0.0, 0.0])].iter().all(|v| v.is_nan()));
    // real operands on the parts: (inf + 1j) * 2 keeps its imaginary part finite
    let km = common::ew("cplx_mixed");
    let z = [[inf, 1.0], [-0.0, 2.0]];
    let r = [2.0, -0.0];
    let o = km.call_alloc(&[arr(&[2], &z), arr(&[2], &r)], None).unwrap();
    let m: Vec<[f64; 2]> = out(&o[3]);
    assert!(same64(m[0], [inf, 2.0]) && same64(m[1], [0.0, -0.0]), "{m:?}");
}

#[test]
fn mixed_real_and_complex_operands() {
    let k = common::ew("cplx_mixed");
    for n in [5usize, 4097] {
        let x = cvals(n, 3);
        let r: Vec<f64> = cvals(n, 4).iter().map(|z| z[0]).collect();
        let o = k.call_alloc(&[arr(&[n], &x), arr(&[n], &r)], None).unwrap();
        let v: Vec<Vec<[f64; 2]>> = o.iter().map(out).collect();
        for e in 0..n {
            let (z, q) = (x[e], r[e]);
            assert!(same64(v[0][e], [z[0] + q, z[1]]));
            assert!(same64(v[1][e], [z[0] - q, z[1]]));
            assert!(same64(v[2][e], [q - z[0], -z[1]]));
            assert!(same64(v[3][e], [z[0] * q, z[1] * q]));
            assert!(same64(v[4][e], [z[0] / q, z[1] / q]));
            assert!(same64(v[5][e], r64::div([q, 0.0], z)));
            // pow(z, q) = exp(q log z)
            let (m, a) = (z[0].hypot(z[1]), z[1].atan2(z[0]));
            let (pm, pa) = (m.powf(q), a * q);
            assert!(close(v[6][e][0], pm * pa.cos(), 1e-12) && close(v[6][e][1], pm * pa.sin(), 1e-12));
        }
        // complex64 with a float64 scalar: the operations run in complex128, the outputs
        // are complex64
        let x32 = c32(&x);
        let o = k
            .call_alloc(&[arr(&[n], &x32), Arg::Scalar(Scalar::F64(0.1))], None)
            .unwrap();
        assert_eq!(o[0].dtype, ScalarType::C64);
        let a: Vec<[f32; 2]> = out(&o[0]);
        for e in 0..n {
            let want = [(x32[e][0] as f64 + 0.1) as f32, x32[e][1]];
            assert_eq!(a[e], want);
        }
    }
}

#[test]
fn parts_abs_and_arg() {
    let n = 4099;
    let x = cvals(n, 5);
    let o = common::ew("c128_parts")
        .call_alloc(&[arr(&[n], &x)], None)
        .unwrap();
    let v: Vec<Vec<f64>> = o.iter().map(out).collect();
    for e in 0..n {
        let z = x[e];
        assert_eq!((v[0][e], v[1][e]), (z[0], z[1]));
        assert_eq!(v[2][e], z[0].hypot(z[1]));
        assert_eq!(v[3][e], z[1].atan2(z[0]));
    }
    let x = c32(&x);
    let o = common::ew("c64_parts")
        .call_alloc(&[arr(&[n], &x)], None)
        .unwrap();
    let v: Vec<Vec<f32>> = o.iter().map(out).collect();
    for e in 0..n {
        let z = x[e];
        assert_eq!((v[0][e], v[1][e]), (z[0], z[1]));
        assert_eq!(v[2][e], z[0].hypot(z[1]));
        assert_eq!(v[3][e], z[1].atan2(z[0]));
    }
}

/// The functions against textbook formulas in double precision (complex64 within 8 ulp of
/// float's precision, complex128 within 1e-12).
#[test]
fn functions_within_their_bounds() {
    let k = common::ew("cplx_funcs");
    let n = 4100;
    let z = cvals(n, 6);
    let w: Vec<[f64; 2]> = cvals(n, 7).iter().map(|v| [v[0] * 0.5, v[1] * 0.5]).collect();
    let refs = |z: [f64; 2], w: [f64; 2]| -> [[f64; 2]; 6] {
        let (a, b) = (z[0], z[1]);
        let (m, t) = (a.hypot(b), b.atan2(a));
        let e = [a.exp() * b.cos(), a.exp() * b.sin()];
        let l = [m.ln(), t];
        let q = [m.sqrt() * (t / 2.0).cos(), m.sqrt() * (t / 2.0).sin()];
        let s = [a.sin() * b.cosh(), a.cos() * b.sinh()];
        let c = [a.cos() * b.cosh(), -(a.sin() * b.sinh())];
        let wl = [w[0] * l[0] - w[1] * l[1], w[0] * l[1] + w[1] * l[0]];
        let p = [wl[0].exp() * wl[1].cos(), wl[0].exp() * wl[1].sin()];
        [e, l, q, s, c, p]
    };
    let o = k.call_alloc(&[arr(&[n], &z), arr(&[n], &w)], None).unwrap();
    let got: Vec<Vec<[f64; 2]>> = o.iter().map(out).collect();
    let (z32, w32) = (c32(&z), c32(&w));
    let o = k.call_alloc(&[arr(&[n], &z32), arr(&[n], &w32)], None).unwrap();
    let got32: Vec<Vec<[f32; 2]>> = o.iter().map(out).collect();
    for e in 0..n {
        let want = refs(z[e], w[e]);
        let z32e = [z32[e][0] as f64, z32[e][1] as f64];
        let want32 = refs(z32e, [w32[e][0] as f64, w32[e][1] as f64]);
        for f in 0..6 {
            for p in 0..2 {
                let scale = want[f][0].hypot(want[f][1]).max(1e-300);
                assert!(
                    (got[f][e][p] - want[f][p]).abs() <= 1e-12 * scale,
                    "complex128 function {f} part {p} at {e}: {} vs {}",
                    got[f][e][p],
                    want[f][p]
                );
                let scale32 = want32[f][0].hypot(want32[f][1]);
                assert!(
                    (got32[f][e][p] as f64 - want32[f][p]).abs() <= 8.0 * f32::EPSILON as f64 * scale32 * 4.0,
                    "complex64 function {f} part {p} at {e}: {} vs {}",
                    got32[f][e][p],
                    want32[f][p]
                );
            }
        }
    }
}

#[test]
fn sqrt_exp_and_pow_at_special_values() {
    let k = ElementwiseKernel::new(
        "complex128 z",
        "complex128 q, complex128 e, complex128 p, complex128 p0",
        "q = sqrt(z); e = exp(z); p = pow(z, 2.0); p0 = pow(z, complex<double>(0, 0))",
        "spec",
    )
    .unwrap();
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let z = [
        [0.0, 0.0],
        [-0.0, -0.0],
        [-4.0, 0.0],
        [-4.0, -0.0],
        [4.0, 0.0],
        [inf, 1.0],
        [-inf, 1.0],
        [1.0, inf],
        [nan, inf],
        [2.0, 0.0],
        [-inf, 0.0],
    ];
    let o = k.call_alloc(&[arr(&[z.len()], &z)], None).unwrap();
    let q: Vec<[f64; 2]> = out(&o[0]);
    let e: Vec<[f64; 2]> = out(&o[1]);
    let p: Vec<[f64; 2]> = out(&o[2]);
    let p0: Vec<[f64; 2]> = out(&o[3]);
    // C99's csqrt: sqrt(+-0 +- 0i) = +0 +- 0i, the branch cut's signed zero, infinities
    assert!(same64(q[0], [0.0, 0.0]) && same64(q[1], [0.0, -0.0]));
    assert!(same64(q[2], [0.0, 2.0]) && same64(q[3], [0.0, -2.0]) && same64(q[4], [2.0, 0.0]));
    assert!(same64(q[5], [inf, 0.0]) && same64(q[6], [0.0, inf]));
    assert!(same64(q[7], [inf, inf]) && same64(q[8], [inf, inf]));
    // exp of a real value keeps its imaginary zero (no inf * 0)
    assert!(same64(e[5], [inf, inf * 1f64.sin()]) || e[5][0] == inf);
    assert!(same64(e[9], [2f64.exp(), 0.0]) && same64(e[10], [0.0, 0.0]));
    // pow: 0 ** 2 = 0, z ** 0 = 1 (NumPy's), 2 ** 2 within rounding of 4
    assert!(same64(p[0], [0.0, 0.0]) && same64(p0[0], [1.0, 0.0]) && same64(p0[2], [1.0, 0.0]));
    assert!(close(p[9][0], 4.0, 1e-15) && p[9][1] == 0.0);
}

#[test]
fn scalars_broadcasting_strides_and_raw_arrays() {
    // a complex scalar, and a complex128 scalar converted to the complex64 the array binds
    let k = common::ew("add");
    let x = c32(&cvals(6, 8));
    for s in [Scalar::C64(0.5, -2.0), Scalar::C128(0.5, -2.0)] {
        let o = k.call_alloc(&[arr(&[2, 3], &x), Arg::Scalar(s)], None).unwrap();
        assert_eq!(o[0].dtype, ScalarType::C64);
        let v: Vec<[f32; 2]> = out(&o[0]);
        for e in 0..6 {
            assert_eq!(v[e], [x[e][0] + 0.5, x[e][1] - 2.0]);
        }
    }
    // broadcasting (3, 1) against (2, 1, 4), and a strided (transposed) input
    let a = cvals(3, 9);
    let b = cvals(8, 10);
    let o = k
        .call_alloc(&[arr(&[3, 1], &a), arr(&[2, 1, 4], &b)], None)
        .unwrap();
    let v: Vec<[f64; 2]> = out(&o[0]);
    assert_eq!(o[0].shape, vec![2, 3, 4]);
    for i in 0..2 {
        for j in 0..3 {
            for l in 0..4 {
                assert!(same64(v[(i * 3 + j) * 4 + l], r64::add(a[j], b[i * 4 + l])));
            }
        }
    }
    let t = cvals(12, 11);
    let bytes = bytemuck::cast_slice(&t);
    let tr = HostArray {
        dtype: ScalarType::C128,
        shape: vec![4, 3],
        strides: vec![1, 4],
        offset: 0,
        bytes,
    };
    let o = k
        .call_alloc(&[Arg::Array(tr), Arg::Scalar(Scalar::C128(1.0, 1.0))], None)
        .unwrap();
    let v: Vec<[f64; 2]> = out(&o[0]);
    for i in 0..4 {
        for j in 0..3 {
            assert!(same64(v[i * 3 + j], r64::add(t[j * 4 + i], [1.0, 1.0])));
        }
    }
    // raw: reversed, times 2
    let k = common::ew("cplx_rev");
    let x = cvals(4097, 12);
    let o = k.call_alloc(&[arr(&[4097], &x)], Some(4097)).unwrap();
    let v: Vec<[f64; 2]> = out(&o[0]);
    for e in 0..4097 {
        let z = x[4096 - e];
        assert!(same64(v[e], r64::mul(z, [2.0, 0.0])) || same64(v[e], [z[0] * 2.0, z[1] * 2.0]));
    }
}

#[test]
fn construction_conversion_and_conditions() {
    let k = common::ew("cplx_build");
    let re: Vec<f32> = vec![1.5, -2.0, 0.0];
    let im: Vec<f32> = vec![0.25, 3.0, -0.0];
    let o = k.call_alloc(&[arr(&[3], &re), arr(&[3], &im)], None).unwrap();
    let z: Vec<[f32; 2]> = out(&o[0]);
    let w: Vec<[f64; 2]> = out(&o[1]);
    for e in 0..3 {
        assert_eq!(z[e], [re[e], im[e]]);
        let t = [re[e] as f64 * 2.0, im[e] as f64 * 2.0];
        let want = [t[0] + 1.0 - 1.5, t[1] + im[e] as f64];
        assert!(same64(w[e], want), "{:?} vs {want:?}", w[e]);
    }
    // parts swapped in place, unconditionally and under a condition
    let k = ElementwiseKernel::new(
        "T x",
        "T z, T w",
        "z = x; z = T(imag(z), real(z)); w = x; if (real(x) > 0) { w = T(imag(w), real(w)); }",
        "swap",
    )
    .unwrap();
    let x = vec![[1.0, 2.0], [-3.0, 4.0]];
    let o = k.call_alloc(&[arr(&[2], &x)], None).unwrap();
    let (z, w): (V64, V64) = (out(&o[0]), out(&o[1]));
    assert_eq!(z, vec![[2.0, 1.0], [4.0, -3.0]]);
    assert_eq!(w, vec![[2.0, 1.0], [-3.0, 4.0]]);
    let k = common::ew("cplx_cond");
    let x = vec![[0.5, 0.1], [-2.0, 1.0], [3.0, 0.0]];
    let y = vec![[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]];
    let o = k.call_alloc(&[arr(&[3], &x), arr(&[3], &y)], None).unwrap();
    let z: Vec<[f64; 2]> = out(&o[0]);
    assert_eq!(z, vec![[7.5, 7.75], [2.0, -1.0], [3.5, -0.25]]);
}

#[test]
fn unsupported_complex_constructs_are_refused_by_name() {
    let cases = [
        (
            "T x",
            "bool z",
            "z = x < x * 2",
            "`<` is not defined on complex values",
        ),
        ("T x", "float32 y", "y = x", "cannot be converted to float32"),
        (
            "T x",
            "float64 y",
            "y = (double)x",
            "cannot be converted to float64",
        ),
        ("T x", "T y", "if (x) { y = x; }", "cannot be a condition"),
        ("T x", "T y", "y = x % 2", "`%` needs integer operands"),
        (
            "T x",
            "T y",
            "y = tanh(x)",
            "`tanh` is not defined on complex values",
        ),
        ("T x", "T y", "y = expf(x)", "`expf` takes a float"),
        ("T x", "T y", "y = x ? x : x", "cannot be a condition"),
        ("T x", "T y", "y = ~x", "`~` needs an integer operand"),
        (
            "float32 x",
            "float32 y",
            "y = float(x, x)",
            "needs a complex type",
        ),
        (
            "T x",
            "T y",
            "complex<int> t = 0; y = x",
            "`complex<int>` is not supported",
        ),
    ];
    let x = c32(&cvals(4, 1));
    for (i, o, op, want) in cases {
        let k = ElementwiseKernel::new(i, o, op, "bad").unwrap();
        let args: Vec<Arg<'_>> = if i.starts_with("float32") {
            vec![arr(&[4], &[1f32, 2.0, 3.0, 4.0][..])]
        } else {
            vec![arr(&[4], &x)]
        };
        let e = k.call_alloc(&args, None).unwrap_err().to_string();
        assert!(e.contains(want), "`{op}`: {e}");
    }
    let e = kiln_expr::ReductionKernel::new("T x", "T y", "x", "a + b", "y = a", Some("0"), "csum", None)
        .unwrap()
        .call_alloc(&[arr(&[4], &x)], &kiln_expr::Axis::All, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("ReductionKernel over complex64"), "{e}");
}

#[test]
fn scalar_conversions_follow_numpy() {
    assert_eq!(
        Scalar::I64(i64::MAX).cast(ScalarType::C64),
        Scalar::C64(9.223372e18, 0.0)
    );
    assert_eq!(Scalar::F64(0.1).cast(ScalarType::C64), Scalar::C64(0.1f32, 0.0));
    assert_eq!(
        Scalar::C128(1.5, -2.5).cast(ScalarType::C64),
        Scalar::C64(1.5, -2.5)
    );
    // complex to real: the real part (NumPy's astype)
    assert_eq!(Scalar::C128(-3.7, 9.0).cast(ScalarType::I32), Scalar::I32(-3));
    assert_eq!(Scalar::C64(2.5, 1.0).cast(ScalarType::F64), Scalar::F64(2.5));
    assert_eq!(Scalar::C64(0.0, 1.0).cast(ScalarType::Bool), Scalar::Bool(true));
    assert_eq!(Scalar::C64(2.5, 1.0).imag(), Scalar::F32(1.0));
    assert_eq!(Scalar::F64(2.5).imag(), Scalar::F64(0.0));
    assert_eq!(ScalarType::from_name("complex").unwrap(), Some(ScalarType::C128));
    assert_eq!(
        ScalarType::from_name("complex<float>").unwrap(),
        Some(ScalarType::C64)
    );
}
