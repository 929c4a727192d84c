//! The CPU evaluator against straightforward Rust references: sizes around the chunk length
//! (and 0), broadcasting, scalars, placeholders bound to several types, raw parameters, `i`
//! and `_ind.size()`, every operator and function, and C's conversion rules.

mod common;

use half::f16;
use kiln_expr::{Arg, HostArray, OwnedArray, Scalar, ScalarType};

/// Around the 4096-lane chunk of the evaluator, and 0.
const SIZES: [usize; 9] = [0, 1, 7, 2049, 4095, 4096, 4097, 8193, 20011];

/// Deterministic values in [-3, 3), never exactly 0.
fn vals(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = ((s >> 11) as f64 / (1u64 << 53) as f64) * 6.0 - 3.0;
            if v == 0.0 {
                0.5
            } else {
                v
            }
        })
        .collect()
}

fn ints(n: usize, seed: u64, lo: i64, hi: i64) -> Vec<i64> {
    vals(n, seed)
        .into_iter()
        .map(|v| lo + (((v + 3.0) / 6.0) * (hi - lo) as f64) as i64)
        .collect()
}

fn arr<'a, T: kiln_expr::Element>(shape: &[usize], v: &'a [T]) -> Arg<'a> {
    Arg::Array(HostArray::from_slice(shape, v))
}

fn out<T: kiln_expr::Element>(o: &OwnedArray) -> Vec<T> {
    o.to_vec().unwrap_or_else(|e| panic!("{e}"))
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * b.abs().max(1.0)
}

#[test]
fn fused_four_ops_with_scalars_f32_and_f64_at_every_size() {
    let k = common::ew("fma4");
    for n in SIZES {
        let x: Vec<f32> = vals(n, 1).iter().map(|&v| v as f32).collect();
        let y: Vec<f32> = vals(n, 2).iter().map(|&v| v as f32).collect();
        let o = k
            .call_alloc(
                &[
                    arr(&[n], &x),
                    arr(&[n], &y),
                    Arg::Scalar(Scalar::F32(1.5)),
                    Arg::Scalar(Scalar::F32(-0.25)),
                ],
                None,
            )
            .unwrap();
        assert_eq!(o[0].shape, vec![n]);
        let z: Vec<f32> = out(&o[0]);
        for i in 0..n {
            assert_eq!(z[i], (1.5 * x[i] + y[i]) * x[i] - -0.25, "n={n} i={i}");
        }
        let xd = vals(n, 3);
        let yd = vals(n, 4);
        let o = k
            .call_alloc(
                &[
                    arr(&[n], &xd),
                    arr(&[n], &yd),
                    Arg::Scalar(Scalar::F64(2.0)),
                    Arg::Scalar(Scalar::F64(0.5)),
                ],
                None,
            )
            .unwrap();
        let z: Vec<f64> = out(&o[0]);
        for i in 0..n {
            assert_eq!(z[i], (2.0 * xd[i] + yd[i]) * xd[i] - 0.5);
        }
    }
}

#[test]
fn generic_t_binds_to_i32_and_u8_with_wrapping() {
    let k = common::ew("mul3");
    let a: Vec<i32> = ints(3000, 5, -100000, 100000).iter().map(|&v| v as i32).collect();
    let b: Vec<i32> = ints(3000, 6, -100000, 100000).iter().map(|&v| v as i32).collect();
    let o = k.call_alloc(&[arr(&[3000], &a), arr(&[3000], &b)], None).unwrap();
    assert_eq!(o[0].dtype, ScalarType::I32);
    let z: Vec<i32> = out(&o[0]);
    for i in 0..3000 {
        assert_eq!(z[i], a[i].wrapping_mul(b[i]).wrapping_add(3));
    }
    let a: Vec<u8> = (0..=255).collect();
    let o = k.call_alloc(&[arr(&[256], &a), arr(&[256], &a)], None).unwrap();
    let z: Vec<u8> = out(&o[0]);
    for i in 0..256 {
        assert_eq!(z[i], (a[i] as i32 * a[i] as i32 + 3) as u8);
    }
}

#[test]
fn broadcasting_and_given_outputs() {
    let k = common::ew("add");
    let x: Vec<f32> = vals(15, 7).iter().map(|&v| v as f32).collect();
    let y: Vec<f32> = vals(20, 8).iter().map(|&v| v as f32).collect();
    let o = k
        .call_alloc(&[arr(&[3, 1, 5], &x), arr(&[4, 5], &y)], None)
        .unwrap();
    assert_eq!(o[0].shape, vec![3, 4, 5]);
    let z: Vec<f32> = out(&o[0]);
    for a in 0..3 {
        for b in 0..4 {
            for c in 0..5 {
                assert_eq!(z[(a * 4 + b) * 5 + c], x[a * 5 + c] + y[b * 5 + c]);
            }
        }
    }
    // An output larger than the inputs sets the shape.
    let mut zbuf = vec![0f32; 2 * 4 * 5];
    let mut outs = [kiln_expr::HostArrayMut::from_slice(&[2, 4, 5], &mut zbuf)];
    k.call(&[arr(&[5], &x[..5]), arr(&[4, 5], &y)], &mut outs, None)
        .unwrap();
    for r in 0..2 {
        for b in 0..4 {
            for c in 0..5 {
                assert_eq!(zbuf[(r * 4 + b) * 5 + c], x[c] + y[b * 5 + c]);
            }
        }
    }
    // A transposed (strided) input.
    let m: Vec<f64> = (0..12).map(|v| v as f64).collect();
    let t = HostArray {
        dtype: ScalarType::F64,
        shape: vec![4, 3],
        strides: vec![1, 4],
        offset: 0,
        bytes: bytemuck::cast_slice(&m),
    };
    let o = k
        .call_alloc(&[Arg::Array(t), Arg::Scalar(Scalar::F64(0.5))], None)
        .unwrap();
    let z: Vec<f64> = out(&o[0]);
    for r in 0..4 {
        for c in 0..3 {
            assert_eq!(z[r * 3 + c], m[c * 4 + r] + 0.5);
        }
    }
}

#[test]
fn scalars_convert_to_the_bound_type_and_bind_only_when_no_array_does() {
    let k = common::ew("add");
    // T from the int64 array; the scalar 2**63 - 1 wraps like NumPy's astype.
    let x: Vec<i64> = vec![1, 2, 3];
    let o = k
        .call_alloc(&[arr(&[3], &x), Arg::Scalar(Scalar::U64(u64::MAX))], None)
        .unwrap();
    assert_eq!(out::<i64>(&o[0]), vec![0, 1, 2]);
    // U is bound by the float64 scalar alone; x * s is double, stored as float.
    let k = common::ew("scale");
    let x = [1.0f32, 2.0, 3.0];
    let o = k
        .call_alloc(&[arr(&[3], &x), Arg::Scalar(Scalar::F64(0.1))], None)
        .unwrap();
    assert_eq!(
        out::<f32>(&o[0]),
        x.iter().map(|&v| (v as f64 * 0.1) as f32).collect::<Vec<_>>()
    );
    // bool + bool is int, stored back as bool.
    let k = common::ew("add");
    let t = [1u8, 0, 1, 0];
    let f = [1u8, 1, 0, 0];
    let a = Arg::Array(HostArray::contiguous(ScalarType::Bool, &[4], &t));
    let b = Arg::Array(HostArray::contiguous(ScalarType::Bool, &[4], &f));
    let o = k.call_alloc(&[a, b], None).unwrap();
    assert_eq!(o[0].bytes, vec![1, 1, 1, 0]);
}

#[test]
fn raw_parameters_index_and_size() {
    let k = common::ew("reverse");
    for n in [1usize, 7, 2049, 5000] {
        let x = vals(n, 9);
        let o = k.call_alloc(&[arr(&[n], &x)], Some(n)).unwrap();
        let z: Vec<f64> = out(&o[0]);
        for i in 0..n {
            assert_eq!(z[i], x[n - 1 - i]);
        }
    }
    let k = common::ew("raw_add");
    let x: Vec<f32> = vals(3000, 10).iter().map(|&v| v as f32).collect();
    let y: Vec<f32> = vals(3000, 11).iter().map(|&v| v as f32).collect();
    let o = k
        .call_alloc(&[arr(&[3000], &x), arr(&[3000], &y)], Some(3000))
        .unwrap();
    let z: Vec<f32> = out(&o[0]);
    assert!((0..3000).all(|i| z[i] == x[i] + y[i]));
    let k = common::ew("rawsize");
    let o = k.call_alloc(&[arr(&[7], &x[..7])], Some(3)).unwrap();
    assert_eq!(out::<f32>(&o[0]), vec![7.0; 3]);
    // An index past the end is an error naming the parameter, not a panic.
    let k = common::ew("reverse");
    let e = k
        .call_alloc(&[arr(&[3], &[1.0f64, 2.0, 3.0])], Some(5))
        .unwrap_err()
        .to_string();
    assert!(e.contains("out of bounds") && e.contains("`x`"), "{e}");
}

#[test]
fn index_and_size() {
    let k = common::ew("iota");
    for n in SIZES {
        let o = k.call_alloc(&[], Some(n)).unwrap();
        let z: Vec<i64> = out(&o[0]);
        assert!((0..n).all(|i| z[i] == 2 * i as i64 + n as i64));
    }
}

#[test]
fn integer_operators() {
    let n = 4099;
    let a: Vec<i32> = ints(n, 12, -3000, 3000).iter().map(|&v| v as i32).collect();
    let mut b: Vec<i32> = ints(n, 13, -20, 20).iter().map(|&v| v as i32).collect();
    b[0] = 0;
    b[1] = -1;
    let k = common::ew("int_ops");
    let o = k.call_alloc(&[arr(&[n], &a), arr(&[n], &b)], None).unwrap();
    let r: Vec<Vec<i32>> = o.iter().map(out::<i32>).collect();
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        assert_eq!(r[0][i], x + y);
        assert_eq!(r[1][i], x - y);
        assert_eq!(r[2][i], if y != 0 { x / y } else { 0 });
        assert_eq!(r[3][i], if y != 0 { x % y } else { 0 });
        assert_eq!(r[4][i], x * y);
        assert_eq!(r[5][i], x | y);
        assert_eq!(r[6][i], x ^ (y & 255));
        assert_eq!(r[7][i], (x & 15) << (y & 7));
        assert_eq!(r[8][i], x >> (y & 7));
    }
    let ua: Vec<u32> = vec![0, 1, 5, u32::MAX, 100];
    let ub: Vec<u32> = vec![1, 2, 0, 2, 7];
    let k = common::ew("uint_ops");
    let o = k.call_alloc(&[arr(&[5], &ua), arr(&[5], &ub)], None).unwrap();
    let r: Vec<Vec<u32>> = o.iter().map(out::<u32>).collect();
    for i in 0..5 {
        assert_eq!(r[0][i], ua[i].wrapping_add(ub[i]));
        assert_eq!(r[1][i], ua[i].wrapping_sub(ub[i]));
        assert_eq!(
            r[2][i],
            ua[i].checked_div(ub[i]).unwrap_or(0),
            "division by zero gives 0, never a trap"
        );
        assert_eq!(r[3][i], ua[i].wrapping_mul(ub[i]));
        assert_eq!(r[4][i], !ua[i]);
    }
    let la: Vec<i64> = vec![i64::MAX, -5, 1 << 40, 7];
    let lb: Vec<i64> = vec![1, 2, 1 << 30, -2];
    let k = common::ew("i64_ops");
    let o = k.call_alloc(&[arr(&[4], &la), arr(&[4], &lb)], None).unwrap();
    let r: Vec<Vec<i64>> = o.iter().map(out::<i64>).collect();
    for i in 0..4 {
        assert_eq!(r[0][i], la[i].wrapping_add(lb[i]));
        assert_eq!(r[1][i], la[i] - lb[i]);
        assert_eq!(r[2][i], la[i].wrapping_mul(lb[i]));
        assert_eq!(r[3][i], la[i] / lb[i]);
    }
}

#[test]
fn comparisons_logic_and_select() {
    let k = common::ew("cmp");
    let n = 2500;
    let a: Vec<f32> = vals(n, 14).iter().map(|&v| v.round() as f32).collect();
    let b: Vec<f32> = vals(n, 15).iter().map(|&v| v.round() as f32).collect();
    let o = k.call_alloc(&[arr(&[n], &a), arr(&[n], &b)], None).unwrap();
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let want = [
            x < y,
            x <= y,
            x > y,
            x >= y,
            x == y,
            x != y,
            x > 0.0 && y > 0.0,
            x > 0.0 || y > 0.0,
            x <= y || x.is_nan() || y.is_nan(),
        ];
        for (k, w) in want.iter().enumerate() {
            assert_eq!(o[k].bytes[i] != 0, *w, "output {k} at {i}");
        }
    }
    let k = common::ew("absdiff");
    let x = vals(100, 16);
    let o = k.call_alloc(&[arr(&[100], &x)], None).unwrap();
    assert_eq!(out::<f64>(&o[0]), x.iter().map(|v| v.abs()).collect::<Vec<_>>());
    let h: Vec<f16> = x.iter().map(|&v| f16::from_f64(v)).collect();
    let o = k.call_alloc(&[arr(&[100], &h)], None).unwrap();
    assert_eq!(
        out::<f16>(&o[0]),
        h.iter()
            .map(|v| if v.to_f32() > 0.0 { *v } else { -*v })
            .collect::<Vec<_>>()
    );
}

#[test]
fn c_conversion_rules() {
    // int / int truncates before the conversion to float.
    let k = common::ew("int_div_to_float");
    let o = k
        .call_alloc(&[arr(&[3], &[7i32, -7, 1]), arr(&[3], &[2i32, 2, 3])], None)
        .unwrap();
    assert_eq!(out::<f32>(&o[0]), vec![3.0, -3.0, 0.0]);
    // unsigned wraps; int -1 < unsigned x is false (the int converts to unsigned).
    let k = common::ew("uint_wrap");
    let o = k.call_alloc(&[arr(&[2], &[0u32, 5])], None).unwrap();
    assert_eq!(out::<u32>(&o[0]), vec![u32::MAX, 4]);
    assert_eq!(o[1].bytes, vec![0, 0]);
    // x * 0.1 is computed in double; x * 0.1f in float.
    let k = common::ew("float_vs_double");
    let x: Vec<f32> = (1..2000).map(|v| v as f32 * 1.37).collect();
    let o = k.call_alloc(&[arr(&[x.len()], &x)], None).unwrap();
    let (d, f): (Vec<f32>, Vec<f32>) = (out(&o[0]), out(&o[1]));
    let mut differ = 0;
    for i in 0..x.len() {
        assert_eq!(d[i], (x[i] as f64 * 0.1) as f32);
        assert_eq!(f[i], x[i] * 0.1f32);
        differ += (d[i] != f[i]) as usize;
    }
    assert!(
        differ > 0,
        "the double and float products never differed: the test proves nothing"
    );
    // int8 + int8 is int; stored into int8 it wraps.
    let k = common::ew("int8_wrap");
    let o = k
        .call_alloc(&[arr(&[2], &[100i8, -100]), arr(&[2], &[100i8, -100])], None)
        .unwrap();
    assert_eq!(out::<i8>(&o[0]), vec![-56, 56]);
    assert_eq!(out::<i32>(&o[1]), vec![200, -200]);
    // Casts: static_cast, C cast, functional cast.
    let k = common::ew("casts");
    let x = [2.7f32, -2.7, 0.5];
    let o = k.call_alloc(&[arr(&[3], &x)], None).unwrap();
    assert_eq!(
        out::<f32>(&o[0]),
        x.iter()
            .map(|&v| ((v as f64) * 3.0) as f32 + (v as i32) as f32 + 1.0)
            .collect::<Vec<_>>()
    );
}

#[test]
fn if_else_locals_and_compound_assignment() {
    let k = common::ew("nested_if");
    let x: Vec<f32> = vals(5001, 17).iter().map(|&v| v as f32).collect();
    let o = k.call_alloc(&[arr(&[x.len()], &x)], None).unwrap();
    let y: Vec<f32> = out(&o[0]);
    for i in 0..x.len() {
        let v = x[i];
        let w = if v > 1.0 {
            let t = v * 2.0;
            if t > 5.0 {
                t
            } else {
                -t
            }
        } else if v < -1.0 {
            0.0
        } else {
            v
        };
        assert_eq!(y[i], w, "{v}");
    }
    let k = common::ew("compound");
    let x = vals(10, 18);
    let o = k.call_alloc(&[arr(&[10], &x)], None).unwrap();
    assert_eq!(
        out::<f64>(&o[0]),
        x.iter()
            .map(|v| ((1.0 + v) * 2.0 - 1.0) / 4.0 * 2.0)
            .collect::<Vec<_>>()
    );
    // A division guarded by `if` (the masked-out lanes divide by zero without trapping).
    let k = common::ew("div_guard");
    let o = k
        .call_alloc(
            &[arr(&[4], &[7i32, 8, i32::MIN, 3]), arr(&[4], &[0i32, 2, -1, 0])],
            None,
        )
        .unwrap();
    assert_eq!(out::<i32>(&o[0]), vec![-1, 4, i32::MIN, -1]);
    // An output read before written starts from the given array.
    let k = common::ew("out_read");
    let mut z = vec![0f32; 3];
    let mut outs = [kiln_expr::HostArrayMut::from_slice(&[3], &mut z)];
    k.call(
        &[arr(&[3], &[1f32, 2.0, 3.0]), arr(&[3], &[10f32, 20.0, 30.0])],
        &mut outs,
        None,
    )
    .unwrap();
    assert_eq!(z, vec![11.0, 22.0, 33.0]);
}

#[test]
fn half_arithmetic_rounds_after_each_operation() {
    let k = common::ew("half_ops");
    let x: Vec<f16> = vals(3000, 19).iter().map(|&v| f16::from_f64(v)).collect();
    let y: Vec<f16> = vals(3000, 20).iter().map(|&v| f16::from_f64(v)).collect();
    let o = k.call_alloc(&[arr(&[3000], &x), arr(&[3000], &y)], None).unwrap();
    let (z, w): (Vec<f16>, Vec<f32>) = (out(&o[0]), out(&o[1]));
    for i in 0..3000 {
        let p = f16::from_f32(x[i].to_f32() * y[i].to_f32());
        assert_eq!(z[i], f16::from_f32(p.to_f32() + x[i].to_f32()));
        assert_eq!(w[i], p.to_f32());
    }
}

#[test]
fn math_functions_f32_and_f64() {
    let k = common::ew("funcs");
    let n = 3001;
    type F = fn(f64, f64) -> f64;
    let refs: [F; 23] = [
        |x, _| x.exp(),
        |x, _| (x.abs() + 1.0).ln(),
        |x, _| x.abs().sqrt(),
        |x, _| x.sin(),
        |x, _| x.cos(),
        |x, _| x.tan(),
        |x, _| x.tanh(),
        |x, _| x.abs(),
        |x, y| x.abs().powf(y),
        |x, y| x.min(y),
        |x, y| x.max(y),
        |x, _| x.floor(),
        |x, _| x.ceil(),
        |x, _| libm::erf(x),
        |x, _| libm::erfc(x),
        |x, _| x.exp2(),
        |x, _| (x.abs() + 1.0).log2(),
        |x, _| (x.abs() + 1.0).log10(),
        |x, _| x.abs().ln_1p(),
        |x, _| x.exp_m1(),
        |x, _| 1.0 / (x.abs() + 1.0).sqrt(),
        |x, y| x.copysign(y),
        |x, y| x.min(y) + x.max(y) + x.abs(),
    ];
    let x = vals(n, 21);
    let y = vals(n, 22);
    let o = k.call_alloc(&[arr(&[n], &x), arr(&[n], &y)], None).unwrap();
    for (j, f) in refs.iter().enumerate() {
        let r: Vec<f64> = out(&o[j]);
        for i in 0..n {
            assert!(
                close(r[i], f(x[i], y[i]), 1e-14),
                "f64 function #{j} at x={} y={}: {} vs {}",
                x[i],
                y[i],
                r[i],
                f(x[i], y[i])
            );
        }
    }
    let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let yf: Vec<f32> = y.iter().map(|&v| v as f32).collect();
    let o = k.call_alloc(&[arr(&[n], &xf), arr(&[n], &yf)], None).unwrap();
    for (j, f) in refs.iter().enumerate() {
        let r: Vec<f32> = out(&o[j]);
        for i in 0..n {
            let want = f(xf[i] as f64, yf[i] as f64);
            assert!(
                close(r[i] as f64, want, 2e-6),
                "f32 function #{j} at x={} y={}: {} vs {want}",
                xf[i],
                yf[i],
                r[i]
            );
        }
    }
    let k = common::ew("f32_funcs");
    let o = k.call_alloc(&[arr(&[n], &xf)], None).unwrap();
    let refs: [fn(f32) -> f32; 5] = [
        f32::exp,
        |x| (x.abs() + 1.0).ln(),
        |x| x.abs().sqrt(),
        f32::tanh,
        f32::abs,
    ];
    for (j, f) in refs.iter().enumerate() {
        let r: Vec<f32> = out(&o[j]);
        assert!(
            (0..n).all(|i| close(r[i] as f64, f(xf[i]) as f64, 2e-6)),
            "expf-family #{j}"
        );
    }
    let k = common::ew("classify");
    let o = k
        .call_alloc(
            &[arr(&[4], &[f64::NAN, f64::INFINITY, -1.0, f64::NEG_INFINITY])],
            None,
        )
        .unwrap();
    assert_eq!(o[0].bytes, vec![1, 0, 0, 0]);
    assert_eq!(o[1].bytes, vec![0, 1, 0, 1]);
    let k = common::ew("int_funcs");
    let o = k
        .call_alloc(
            &[arr(&[3], &[3i32, -9, i32::MIN]), arr(&[3], &[-4i32, 2, 0])],
            None,
        )
        .unwrap();
    assert_eq!(out::<i32>(&o[0]), vec![-4, -9, i32::MIN]);
    assert_eq!(out::<i32>(&o[1]), vec![3, 2, 0]);
    assert_eq!(out::<i32>(&o[2]), vec![3, 9, i32::MIN]);
    let k = common::ew("sigmoid");
    let o = k.call_alloc(&[arr(&[n], &xf)], None).unwrap();
    let r: Vec<f32> = out(&o[0]);
    assert!((0..n).all(|i| close(r[i] as f64, 1.0 / (1.0 + (-(xf[i] as f64)).exp()), 2e-6)));
}

#[test]
fn misaligned_buffers_take_the_copying_path() {
    let k = common::ew("fma4");
    let n = 5000;
    let x: Vec<f32> = vals(n, 40).iter().map(|&v| v as f32).collect();
    let y: Vec<f32> = vals(n, 41).iter().map(|&v| v as f32).collect();
    // The same values one byte into a byte buffer: no f32 view of them is aligned.
    let shift = |v: &[f32]| {
        let mut b = vec![0u8; v.len() * 4 + 1];
        b[1..].copy_from_slice(bytemuck::cast_slice(v));
        b
    };
    let (xb, yb) = (shift(&x), shift(&y));
    let xa = Arg::Array(HostArray::contiguous(ScalarType::F32, &[n], &xb[1..]));
    let ya = Arg::Array(HostArray::contiguous(ScalarType::F32, &[n], &yb[1..]));
    let mut zb = vec![0u8; n * 4 + 1];
    let mut outs = [kiln_expr::HostArrayMut {
        dtype: ScalarType::F32,
        shape: vec![n],
        bytes: &mut zb[1..],
    }];
    k.call(
        &[
            xa,
            ya,
            Arg::Scalar(Scalar::F32(0.5)),
            Arg::Scalar(Scalar::F32(2.0)),
        ],
        &mut outs,
        None,
    )
    .unwrap();
    for i in 0..n {
        let z = f32::from_ne_bytes(zb[1 + 4 * i..5 + 4 * i].try_into().unwrap());
        assert_eq!(z, (0.5 * x[i] + y[i]) * x[i] - 2.0, "{i}");
    }
}
