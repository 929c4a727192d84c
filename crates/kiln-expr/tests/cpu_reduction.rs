//! CPU reductions against a Rust reference: axes None, int, tuple and negative, keepdims,
//! both evaluation strategies (lanes over outputs and lanes over reduced elements), identity
//! handling, several outputs and scalar inputs.

mod common;

use kiln_expr::{Arg, Axis, HostArray, OwnedArray, ReductionKernel, Scalar, ScalarType};

fn vals(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(7);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect()
}

fn out<T: kiln_expr::Element>(o: &OwnedArray) -> Vec<T> {
    o.to_vec().unwrap_or_else(|e| panic!("{e}"))
}

/// Reference reduction of a C-order array over `axes` with `f` from `init`.
fn reference(
    x: &[f64],
    shape: &[usize],
    axes: &[usize],
    keepdims: bool,
    init: f64,
    f: impl Fn(f64, f64) -> f64,
) -> (Vec<f64>, Vec<usize>) {
    let nd = shape.len();
    let out_shape_full: Vec<usize> = (0..nd)
        .map(|k| if axes.contains(&k) { 1 } else { shape[k] })
        .collect();
    let nout: usize = out_shape_full.iter().product();
    let mut acc = vec![init; nout];
    let strides = kiln_expr::c_strides(&out_shape_full);
    for (flat, &v) in x.iter().enumerate() {
        let mut rem = flat;
        let mut o = 0isize;
        for k in (0..nd).rev() {
            let c = rem % shape[k];
            rem /= shape[k];
            if !axes.contains(&k) {
                o += c as isize * strides[k];
            }
        }
        acc[o as usize] = f(acc[o as usize], v);
    }
    let out_shape = if keepdims {
        out_shape_full
    } else {
        (0..nd).filter(|k| !axes.contains(k)).map(|k| shape[k]).collect()
    };
    (acc, out_shape)
}

fn check_sum(shape: &[usize], axis: Axis, axes: &[usize], keepdims: bool) {
    let k = common::red("my_sum");
    let n: usize = shape.iter().product();
    let x = vals(n, n as u64 + 3);
    let o = k
        .call_alloc(&[Arg::Array(HostArray::from_slice(shape, &x))], &axis, keepdims)
        .unwrap_or_else(|e| panic!("{shape:?} {axis:?}: {e}"));
    let (want, ws) = reference(&x, shape, axes, keepdims, 0.0, |a, b| a + b);
    assert_eq!(o[0].shape, ws, "{shape:?} {axis:?}");
    let got: Vec<f64> = out(&o[0]);
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-12 * (n as f64).max(1.0),
            "{shape:?} {axis:?}: {g} vs {w}"
        );
    }
}

#[test]
fn sum_over_every_kind_of_axis() {
    check_sum(&[2, 3, 4], Axis::All, &[0, 1, 2], false);
    check_sum(&[2, 3, 4], Axis::All, &[0, 1, 2], true);
    check_sum(&[2, 3, 4], Axis::One(1), &[1], false);
    check_sum(&[2, 3, 4], Axis::One(-1), &[2], true);
    check_sum(&[2, 3, 4], Axis::Many(vec![0, 2]), &[0, 2], false);
    check_sum(&[2, 3, 4], Axis::Many(vec![-3, -1]), &[0, 2], true);
    check_sum(
        &[4, 3, 2, 4, 3, 2, 2],
        Axis::Many(vec![1, 4, 3, 6]),
        &[1, 3, 4, 6],
        true,
    );
    check_sum(&[5], Axis::Many(vec![]), &[], false);
}

#[test]
fn sum_at_sizes_that_take_each_strategy() {
    for n in [1usize, 2, 3, 63, 64, 65, 4095, 4096, 4097, 100_003] {
        check_sum(&[n], Axis::All, &[0], false);
    }
    for (r, c) in [(2usize, 1000usize), (513, 1000), (7, 5000), (3000, 3)] {
        check_sum(&[r, c], Axis::One(0), &[0], false);
        check_sum(&[r, c], Axis::One(1), &[1], false);
    }
}

#[test]
fn int8_sum_wraps_like_numpy_with_dtype_b() {
    let k = common::red("my_sum");
    let x: Vec<i8> = (0..1000).map(|i| (i % 251) as i8).collect();
    let o = k
        .call_alloc(
            &[Arg::Array(HostArray::from_slice(&[1000], &x))],
            &Axis::All,
            false,
        )
        .unwrap();
    let want = x.iter().fold(0i8, |a, &b| a.wrapping_add(b));
    assert_eq!(out::<i8>(&o[0]), vec![want]);
    assert_eq!(o[0].shape, Vec::<usize>::new());
}

#[test]
fn max_norm_mean_and_two_outputs() {
    let x = vals(6 * 700, 31);
    let arr = || Arg::Array(HostArray::from_slice(&[6, 700], &x));
    let o = common::red("my_max")
        .call_alloc(&[arr()], &Axis::One(1), false)
        .unwrap();
    let (want, _) = reference(&x, &[6, 700], &[1], false, f64::NEG_INFINITY, f64::max);
    assert_eq!(out::<f64>(&o[0]), want);
    let o = common::red("l2norm")
        .call_alloc(&[arr()], &Axis::One(0), false)
        .unwrap();
    let (want, _) = reference(&x, &[6, 700], &[0], false, 0.0, |a, b| a + b * b);
    let got: Vec<f64> = out(&o[0]);
    assert!(got.iter().zip(&want).all(|(g, w)| (g - w.sqrt()).abs() < 1e-12));
    let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let o = common::red("mean")
        .call_alloc(
            &[Arg::Array(HostArray::from_slice(&[6, 700], &xf))],
            &Axis::One(-1),
            false,
        )
        .unwrap();
    assert_eq!(o[0].dtype, ScalarType::F64);
    let got: Vec<f64> = out(&o[0]);
    for r in 0..6 {
        // reduce_type `double`: the accumulator is double, not the input's float.
        let want: f64 = xf[r * 700..(r + 1) * 700].iter().map(|&v| v as f64).sum::<f64>() / 700.0;
        assert!((got[r] - want).abs() < 1e-6, "{} vs {want}", got[r]);
    }
    // x (6, 7) * w (7,) broadcast, reduced over axis 1, two outputs.
    let a = vals(42, 32);
    let w = vals(7, 33);
    let o = common::red("wdot2")
        .call_alloc(
            &[
                Arg::Array(HostArray::from_slice(&[6, 7], &a)),
                Arg::Array(HostArray::from_slice(&[7], &w)),
            ],
            &Axis::One(1),
            false,
        )
        .unwrap();
    let (y, z): (Vec<f64>, Vec<f64>) = (out(&o[0]), out(&o[1]));
    for r in 0..6 {
        let want: f64 = (0..7).map(|c| a[r * 7 + c] * w[c]).sum();
        assert!((y[r] - want).abs() < 1e-12 && (z[r] - 2.0 * want).abs() < 1e-12);
    }
}

#[test]
fn scalar_input_and_reduce_type() {
    let k = ReductionKernel::new(
        "T x, T s",
        "T y",
        "x * s",
        "a + b",
        "y = a",
        Some("0"),
        "scaled_sum",
        Some("double"),
    )
    .unwrap();
    let x: Vec<f32> = (0..5000).map(|i| i as f32 * 0.001).collect();
    let o = k
        .call_alloc(
            &[
                Arg::Array(HostArray::from_slice(&[5000], &x)),
                Arg::Scalar(Scalar::F64(2.0)),
            ],
            &Axis::All,
            false,
        )
        .unwrap();
    let want: f64 = x.iter().map(|&v| (v * 2.0) as f64).sum();
    let got: Vec<f32> = out(&o[0]);
    assert!((got[0] as f64 - want).abs() < 1e-3, "{} vs {want}", got[0]);
}

#[test]
fn identity_handling() {
    // An empty reduction gives the identity; without one it is an error.
    let empty: Vec<f64> = Vec::new();
    let o = common::red("my_sum")
        .call_alloc(
            &[Arg::Array(HostArray::from_slice(&[0, 3], &empty))],
            &Axis::One(0),
            false,
        )
        .unwrap();
    assert_eq!(out::<f64>(&o[0]), vec![0.0; 3]);
    let o = common::red("my_max")
        .call_alloc(
            &[Arg::Array(HostArray::from_slice(&[0], &empty))],
            &Axis::All,
            false,
        )
        .unwrap();
    assert_eq!(out::<f64>(&o[0]), vec![f64::NEG_INFINITY]);
    let e = common::red("sum_noid")
        .call_alloc(
            &[Arg::Array(HostArray::from_slice(&[0], &empty))],
            &Axis::All,
            false,
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("zero-size array to reduction operation sum_noid which has no identity"),
        "{e}"
    );
    // Without an identity the accumulator starts from zero, as CuPy's `_type_reduce()`.
    let o = common::red("sum_noid")
        .call_alloc(
            &[Arg::Array(HostArray::from_slice(&[3], &[1.0f64, 2.0, 3.0]))],
            &Axis::All,
            false,
        )
        .unwrap();
    assert_eq!(out::<f64>(&o[0]), vec![6.0]);
    // A zero-size output returns at once.
    let o = common::red("sum_noid")
        .call_alloc(
            &[Arg::Array(HostArray::from_slice(&[0, 4], &empty))],
            &Axis::One(1),
            false,
        )
        .unwrap();
    assert_eq!(o[0].shape, vec![0]);
}
