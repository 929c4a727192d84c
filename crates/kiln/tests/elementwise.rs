//! Element-wise ops on every backend against a float64 reference.

use kiln::verify::rel_l2;
use kiln::{testing, Runtime, UnaryOp};

kiln::test_device!(sigmoid_matches_f64_reference, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    for (i, n) in [1usize, 3, 4, 5, 17, 1023, 4097, 1 << 20, (1 << 20) + 7]
        .into_iter()
        .enumerate()
    {
        let x = testing::random_f32(n, -20.0, 20.0, seed + i as u64);
        let y = rt.sigmoid(&x).unwrap();
        let want: Vec<f64> = x.iter().map(|&v| UnaryOp::Sigmoid.reference(v as f64)).collect();
        let err = rel_l2(&y, &want);
        assert!(err < 1e-6, "{} n={n}: rel L2 {err:e}", rt.device_name());
    }
});

kiln::test_device!(sigmoid_edge_values, |rt: &Runtime| {
    let x = [f32::NEG_INFINITY, -100.0, -0.0, 0.0, 100.0, f32::INFINITY, 1e-30];
    let y = rt.sigmoid(&x).unwrap();
    assert_eq!(&y[..6], &[0.0, 0.0, 0.5, 0.5, 1.0, 1.0], "{}", rt.device_name());
    assert_eq!(y[6], 0.5);
    assert!(rt.sigmoid(&[]).unwrap().is_empty());
});

kiln::test_device!(length_mismatch_is_an_error, |rt: &Runtime| {
    let mut out = vec![0.0f32; 3];
    let e = rt
        .unary_into(UnaryOp::Sigmoid, &[1.0, 2.0], &mut out)
        .unwrap_err();
    assert!(e.to_string().contains("shape mismatch"), "{e}");
});
