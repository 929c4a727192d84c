//! A first end-to-end check of both kernel kinds on the CPU.
use kiln_expr::*;

#[test]
fn smoke() {
    let k = ElementwiseKernel::new("T x, T y, T a, T b", "T z", "z = (a * x + y) * x - b", "axpy").unwrap();
    let x: Vec<f32> = (0..5000).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..5000).map(|i| 1.0 - i as f32).collect();
    let out = k
        .call_alloc(
            &[
                Arg::Array(HostArray::from_slice(&[5000], &x)),
                Arg::Array(HostArray::from_slice(&[5000], &y)),
                Arg::Scalar(Scalar::F32(2.0)),
                Arg::Scalar(Scalar::F32(3.0)),
            ],
            None,
        )
        .unwrap();
    let z: Vec<f32> = out[0].to_vec().unwrap();
    for i in 0..5000 {
        assert_eq!(z[i], (2.0 * x[i] + y[i]) * x[i] - 3.0, "{i}");
    }
    let specs: Vec<ArgSpec> = vec![
        ArgSpec::Array {
            dtype: ScalarType::F32,
            shape: vec![5000],
        },
        ArgSpec::Array {
            dtype: ScalarType::F32,
            shape: vec![5000],
        },
        ArgSpec::Scalar(ScalarType::F32),
        ArgSpec::Scalar(ScalarType::F32),
    ];
    let b = k.bind(&specs, &[], None).unwrap();
    assert!(k
        .cuda_source(&b)
        .unwrap()
        .contains("extern \"C\" __global__ void axpy("));
    let r = ReductionKernel::new("T x", "T y", "x", "a + b", "y = a", Some("0"), "my_sum", None).unwrap();
    let xs: Vec<f64> = (0..10000).map(|i| i as f64).collect();
    let o = r
        .call_alloc(
            &[Arg::Array(HostArray::from_slice(&[100, 100], &xs))],
            &Axis::All,
            false,
        )
        .unwrap();
    assert_eq!(o[0].to_vec::<f64>().unwrap(), vec![49995000.0]);
    let o = r
        .call_alloc(
            &[Arg::Array(HostArray::from_slice(&[100, 100], &xs))],
            &Axis::One(-1),
            true,
        )
        .unwrap();
    assert_eq!(o[0].shape, vec![100, 1]);
    let v = o[0].to_vec::<f64>().unwrap();
    assert_eq!(v[1], (100..200).sum::<i32>() as f64);
    let specs = vec![ArgSpec::Array {
        dtype: ScalarType::F64,
        shape: vec![100, 100],
    }];
    let rb = r.bind(&specs, &[], &Axis::One(0), false).unwrap();
    assert!(r
        .cuda_source(&rb)
        .unwrap()
        .contains("__shared__ double _sdata[256];"));
}
