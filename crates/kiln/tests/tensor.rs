//! Tensors on every backend: each op on tensors gives the same bits as the host-slice op
//! (which is itself checked against the CPU reference elsewhere), at several sizes
//! including odd ones and ones large enough for the staged transfers; casts equal the CPU's
//! on every backend; bad shapes, dtypes and devices are clear errors.
#![allow(clippy::unwrap_used)]

use kiln::imaging::FilterPath;
use kiln::linalg::{Gemm, GemmPrecision};
use kiln::{testing, DType, Runtime, Tensor};
use kiln_core::backend::{bf16, f16, MapOp, UnaryOp};
use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D};

/// Sizes: tiny, odd, and over the 4 MiB direct-copy limit (staged transfers on CUDA).
const SIZES: &[usize] = &[1, 7, 1001, (1 << 20) + 3, 3 << 20];

fn poison(rt: &Runtime) {
    if let Some(c) = rt.cuda() {
        c.pool().set_poison(true);
    }
}

/// Bitwise equality that treats every NaN as equal to every NaN.
fn same_bits_f32(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

kiln::test_device!(map_ops_equal_the_slice_ops, |rt: &Runtime| {
    poison(rt);
    for (i, &n) in SIZES.iter().enumerate() {
        let x = testing::random_f32(n, -6.0, 6.0, 10 + i as u64);
        let t = rt.tensor(&x, &[n]).unwrap();
        for op in [
            MapOp::Unary(UnaryOp::Sigmoid),
            MapOp::Unary(UnaryOp::Exp),
            MapOp::ScaleShift { a: 1.5, b: -0.25 },
            MapOp::Clamp { lo: -1.0, hi: 2.0 },
        ] {
            let want = rt.map(op, &x).unwrap();
            let got: Vec<f32> = t.map(op).unwrap().to_vec().unwrap();
            assert!(same_bits_f32(&got, &want), "{op:?} n={n}");
        }
        // 16-bit storage
        let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let want = rt.map(MapOp::Unary(UnaryOp::Tanh), &h).unwrap();
        let got: Vec<f16> = rt.tensor(&h, &[n]).unwrap().tanh().unwrap().to_vec().unwrap();
        assert_eq!(got, want, "tanh f16 n={n}");
        let b: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
        let want = rt.map(MapOp::Unary(UnaryOp::Relu), &b).unwrap();
        let got: Vec<bf16> = rt.tensor(&b, &[n]).unwrap().relu().unwrap().to_vec().unwrap();
        assert_eq!(got, want, "relu bf16 n={n}");
    }
});

kiln::test_device!(axpy_equals_the_slice_op, |rt: &Runtime| {
    poison(rt);
    for &n in SIZES {
        let x = testing::random_f32(n, -1.0, 1.0, 3);
        let y = testing::random_f32(n, -1.0, 1.0, 4);
        let mut want = y.clone();
        rt.axpy(0.75, &x, &mut want).unwrap();
        let (tx, ty) = (rt.tensor(&x, &[n]).unwrap(), rt.tensor(&y, &[n]).unwrap());
        let got: Vec<f32> = tx.axpy(0.75, &ty).unwrap().to_vec().unwrap();
        assert!(same_bits_f32(&got, &want), "n={n}");
        // y is not modified: tensors are values
        assert_eq!(ty.to_vec::<f32>().unwrap(), y);
    }
});

kiln::test_device!(transpose_equals_the_slice_op, |rt: &Runtime| {
    poison(rt);
    for (r, c) in [(1, 1), (3, 5), (17, 1), (257, 129), (1025, 2049)] {
        let x = testing::random_f32(r * c, -1.0, 1.0, 5);
        let want = rt.transpose(&x, r, c).unwrap();
        let t = rt.tensor(&x, &[r, c]).unwrap().transpose().unwrap();
        assert_eq!(t.shape(), &[c, r]);
        assert_eq!(t.to_vec::<f32>().unwrap(), want, "{r}x{c}");
        let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let want = rt.transpose(&h, r, c).unwrap();
        let got: Vec<f16> = rt
            .tensor(&h, &[r, c])
            .unwrap()
            .transpose()
            .unwrap()
            .to_vec()
            .unwrap();
        assert_eq!(got, want, "f16 {r}x{c}");
    }
});

kiln::test_device!(filters_equal_the_slice_ops, |rt: &Runtime| {
    poison(rt);
    let mode = BoundaryMode::Reflect;
    for (h, w) in [(1, 1), (5, 9), (67, 131), (1080, 1921)] {
        let img = testing::random_f32(h * w, -1.0, 1.0, 6);
        for name in ["cross4", "gaussian:2", "box:5"] {
            let k = Kernel2D::preset(name).unwrap();
            let want = rt.filter2d(&img, [h, w], &k, mode, FilterPath::Auto).unwrap();
            let t = rt.tensor(&img, &[h, w]).unwrap();
            let got: Vec<f32> = t.filter2d(&k, mode, FilterPath::Auto).unwrap().to_vec().unwrap();
            assert!(same_bits_f32(&got, &want), "{name} {h}x{w}");
        }
    }
    // a batch and channels
    let k = Kernel2D::preset("sobel-x").unwrap();
    let batch = testing::random_f32(3 * 33 * 47, -1.0, 1.0, 7);
    let want = rt
        .filter2d_batch(&batch, [3, 33, 47], &k, mode, FilterPath::Auto)
        .unwrap();
    let got: Vec<f32> = rt
        .tensor(&batch, &[3, 33, 47])
        .unwrap()
        .filter2d(&k, mode, FilterPath::Auto)
        .unwrap()
        .to_vec()
        .unwrap();
    assert!(same_bits_f32(&got, &want));
    let want = rt
        .filter2d_channels(&batch, [33, 47, 3], &k, mode, FilterPath::Auto)
        .unwrap();
    let got: Vec<f32> = rt
        .tensor(&batch, &[33, 47, 3])
        .unwrap()
        .filter2d_channels(&k, mode, FilterPath::Auto)
        .unwrap()
        .to_vec()
        .unwrap();
    assert!(same_bits_f32(&got, &want));
    // 3-D
    for (name, s) in [("laplacian", [9, 17, 33]), ("gaussian:0.5", [40, 41, 43])] {
        let k = Kernel3D::preset(name).unwrap();
        let vol = testing::random_f32(s.iter().product(), -1.0, 1.0, 8);
        let want = rt.filter3d(&vol, s, &k, mode, FilterPath::Auto).unwrap();
        let got: Vec<f32> = rt
            .tensor(&vol, &s)
            .unwrap()
            .filter3d(&k, mode, FilterPath::Auto)
            .unwrap()
            .to_vec()
            .unwrap();
        assert!(same_bits_f32(&got, &want), "{name}");
    }
});

kiln::test_device!(matmul_equals_the_slice_op, |rt: &Runtime| {
    poison(rt);
    for (m, n, k) in [(1, 1, 1), (7, 5, 3), (65, 33, 129)] {
        let a = testing::random_f32(m * k, -1.0, 1.0, 9);
        let b = testing::random_f32(k * n, -1.0, 1.0, 10);
        let want = rt
            .matmul(&a, &b, &Gemm::new(m, n, k), GemmPrecision::F32)
            .unwrap();
        let (ta, tb) = (rt.tensor(&a, &[m, k]).unwrap(), rt.tensor(&b, &[k, n]).unwrap());
        let c = ta.matmul(&tb, GemmPrecision::F32).unwrap();
        assert_eq!(c.shape(), &[m, n]);
        assert_eq!(c.to_vec::<f32>().unwrap(), want, "{m}x{n}x{k}");
        // batched, B broadcast
        let a3 = testing::random_f32(2 * m * k, -1.0, 1.0, 11);
        let g = Gemm::new(m, n, k).batched(2).with_strides(m * k, 0);
        let want = rt.matmul(&a3, &b, &g, GemmPrecision::F32).unwrap();
        let c = rt
            .tensor(&a3, &[2, m, k])
            .unwrap()
            .matmul(&tb, GemmPrecision::F32)
            .unwrap();
        assert_eq!(c.shape(), &[2, m, n]);
        assert_eq!(c.to_vec::<f32>().unwrap(), want);
        // bf16
        let ab: Vec<bf16> = a.iter().map(|&v| bf16::from_f32(v)).collect();
        let bb: Vec<bf16> = b.iter().map(|&v| bf16::from_f32(v)).collect();
        let want = rt
            .matmul(&ab, &bb, &Gemm::new(m, n, k), GemmPrecision::Bf16)
            .unwrap();
        let c = rt
            .tensor(&ab, &[m, k])
            .unwrap()
            .matmul(&rt.tensor(&bb, &[k, n]).unwrap(), GemmPrecision::Bf16)
            .unwrap();
        assert_eq!(c.to_vec::<bf16>().unwrap(), want);
    }
});

/// Inputs that cover each conversion's edge cases: halves, ties, out-of-range, NaN, inf,
/// subnormals, and random values.
fn cast_inputs() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        0.5,
        1.5,
        2.5,
        -0.5,
        -1.5,
        254.5,
        255.5,
        256.0,
        65534.5,
        65535.5,
        70000.0,
        -3.0,
        1e-8,
        6e-5,
        1e-40,
        3.4e38,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1.000_976_6,
        65520.0,
        65519.99,
    ];
    v.extend(testing::random_f32(4099, -300.0, 70000.0, 12));
    v
}

fn host_cast(t: &Tensor) -> Vec<f64> {
    let c = t.to_cpu().unwrap();
    match c.dtype() {
        DType::F32 => c.as_slice::<f32>().unwrap().iter().map(|&x| x as f64).collect(),
        DType::F64 => c.as_slice::<f64>().unwrap().to_vec(),
        DType::F16 => c.as_slice::<f16>().unwrap().iter().map(|x| x.to_f64()).collect(),
        DType::BF16 => c.as_slice::<bf16>().unwrap().iter().map(|x| x.to_f64()).collect(),
        DType::U8 => c.as_slice::<u8>().unwrap().iter().map(|&x| x as f64).collect(),
        DType::U16 => c.as_slice::<u16>().unwrap().iter().map(|&x| x as f64).collect(),
    }
}

const DTYPES: [DType; 6] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::U8,
    DType::U16,
];

kiln::test_device!(casts_follow_the_reference_rules, |rt: &Runtime| {
    poison(rt);
    let x = cast_inputs();
    let base = rt.tensor(&x, &[x.len()]).unwrap();
    let cpu = Runtime::cpu();
    let cbase = cpu.tensor(&x, &[x.len()]).unwrap();
    for from in DTYPES {
        let src = base.cast(from).unwrap();
        let csrc = cbase.cast(from).unwrap();
        assert_eq!(src.dtype(), from);
        for to in DTYPES {
            if from == DType::F64 && matches!(to, DType::F16 | DType::BF16) {
                assert!(src.cast(to).is_err(), "f64 -> {to} must be refused");
                continue;
            }
            let got = host_cast(&src.cast(to).unwrap());
            let want = host_cast(&csrc.cast(to).unwrap());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                    "{from} -> {to} element {i}: got {g}, want {w} (input {})",
                    x[i]
                );
            }
            // and the rule itself, element by element
            let srcv = host_cast(&csrc);
            for (s, w) in srcv.iter().zip(&want) {
                let r = kiln_core::storage::cast_f64(*s, to);
                assert!(r.to_bits() == w.to_bits() || (r.is_nan() && w.is_nan()));
            }
        }
    }
});

kiln::test_device!(chains_keep_shape_and_reshape_shares_data, |rt: &Runtime| {
    let x = testing::random_f32(6 * 4, -2.0, 2.0, 13);
    let t = rt.tensor(&x, &[6, 4]).unwrap();
    let y = t
        .sigmoid()
        .unwrap()
        .transpose()
        .unwrap()
        .clamp(0.25, 0.75)
        .unwrap();
    assert_eq!(y.shape(), &[4, 6]);
    let s: Vec<f32> = rt.map(MapOp::Unary(UnaryOp::Sigmoid), &x).unwrap();
    let tr = rt.transpose(&s, 6, 4).unwrap();
    let want = rt.clamp(0.25, 0.75, &tr).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), want);
    let r = y.reshape(&[2, 12]).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), want);
    assert!(y.reshape(&[5, 5]).is_err());
    assert_eq!(
        rt.zeros(&[3, 2], DType::U16).unwrap().to_vec::<u16>().unwrap(),
        vec![0; 6]
    );
});

kiln::test_device!(bad_inputs_are_clear_errors, |rt: &Runtime| {
    let err = |r: kiln::Result<Tensor>| r.unwrap_err().to_string();
    assert!(rt.tensor(&[1.0f32; 5], &[2, 3]).is_err());
    let t = rt.tensor(&[1.0f32; 6], &[2, 3]).unwrap();
    let e = err(t.filter3d(
        &Kernel3D::preset("box:3").unwrap(),
        BoundaryMode::Reflect,
        FilterPath::Auto,
    ));
    assert!(e.contains("(d, h, w)") && e.contains("[2, 3]"), "{e}");
    let u = rt.tensor(&[1u8; 6], &[2, 3]).unwrap();
    let e = err(u.sigmoid());
    assert!(e.contains("u8") && e.contains("cast"), "{e}");
    let e = err(u.filter2d(
        &Kernel2D::preset("cross4").unwrap(),
        BoundaryMode::Reflect,
        FilterPath::Auto,
    ));
    assert!(e.contains("u8") && e.contains("f32"), "{e}");
    assert!(t.to_vec::<f16>().unwrap_err().to_string().contains("cast"));
    let e = err(t.matmul(&t, GemmPrecision::F32));
    assert!(e.contains("do not multiply"), "{e}");
    let e = err(t.matmul(&t.transpose().unwrap(), GemmPrecision::Bf16));
    assert!(e.contains("bf16"), "{e}");
    let y = rt.tensor(&[1.0f32; 3], &[3]).unwrap();
    assert!(t.axpy(1.0, &y).is_err());
    assert!(t.transpose().unwrap().transpose().unwrap().reshape(&[6]).is_ok());
    assert!(rt.tensor(&[1.0f32; 0], &[0, 3]).unwrap().transpose().is_err());
    // a device tensor cannot be borrowed as a host slice
    if rt.cuda().is_some() {
        assert!(t.as_slice::<f32>().unwrap_err().to_string().contains("to_vec"));
        let cpu = Runtime::cpu();
        let c = cpu.tensor(&[1.0f32; 6], &[2, 3]).unwrap();
        let e = err(t.axpy(1.0, &c));
        assert!(e.contains("to_device"), "{e}");
        let back = c.to_device(rt).unwrap();
        assert_eq!(back.to_vec::<f32>().unwrap(), vec![1.0; 6]);
        assert_eq!(t.to_device(&cpu).unwrap().as_slice::<f32>().unwrap(), &[1.0; 6]);
    }
});
