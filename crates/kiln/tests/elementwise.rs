//! Element-wise ops on every backend against a float64 reference.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use kiln::device::ops::Map;
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

fn map_ops() -> Vec<kiln_core::backend::MapOp> {
    use kiln_core::backend::MapOp;
    let mut v: Vec<MapOp> = UnaryOp::all().iter().map(|&u| MapOp::Unary(u)).collect();
    v.push(MapOp::ScaleShift { a: -1.25, b: 0.5 });
    v.push(MapOp::Clamp { lo: -0.75, hi: 1.5 });
    v
}

/// Runs the map kernel on `x` through the device API (NaN-poisoned output) and downloads it.
fn run_device<T: kiln::FloatElement>(
    cu: &kiln::device::CudaBackend,
    op: kiln_core::backend::MapOp,
    x: &[T],
) -> Vec<T> {
    let dx = cu.upload_slice(x).unwrap();
    let mut dy = cu.alloc_poisoned_as::<T>(x.len()).unwrap();
    cu.run(Map {
        op,
        x: &dx,
        out: &mut dy,
    })
    .unwrap_or_else(|e| panic!("{op:?}: {e}"));
    let mut y = vec![T::from_f32(0.0); x.len()];
    dy.copy_to_host(&mut y, cu.stream()).unwrap();
    y
}

/// The map kernels through the device API (the `Map` op) against the CPU op, within 8 ulps
/// (f32) or 2 storage units (16-bit). Sizes cover the scalar tail, one partial vector step
/// and many blocks; inputs include +-0, +-inf, NaN, subnormals. CUDA only.
fn device_map_matches_cpu<T: kiln::FloatElement>(cu: &kiln::device::CudaBackend, seed: u64) {
    use kiln_core::DType;
    let cpu = Runtime::cpu();
    for (s, n) in [1usize, 3, 7, 8, 9, 1023, 4097, 2048 * 8 + 5, (1 << 21) + 3]
        .into_iter()
        .enumerate()
    {
        let mut x32 = testing::random_f32(n, -8.0, 8.0, seed + s as u64);
        let special = [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-40,
            -3e-39,
        ];
        for (i, v) in special.iter().enumerate().take(n.saturating_sub(1)) {
            x32[i + 1] = *v;
        }
        let x: Vec<T> = x32.iter().map(|&v| T::from_f32(v)).collect();
        for op in map_ops() {
            let got = run_device(cu, op, &x);
            let want = cpu.map(op, &x).unwrap();
            let rel = if T::DTYPE == DType::F32 { 8.0 } else { 2.0 } * T::UNIT_ROUNDOFF;
            for i in 0..n {
                let (g, w) = (got[i].to_f32() as f64, want[i].to_f32() as f64);
                let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rel * w.abs() + 1e-7;
                assert!(
                    ok,
                    "{op:?} {:?} n={n} [{i}] x={}: {g} vs cpu {w}",
                    T::DTYPE,
                    x32[i]
                );
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn map_device_matches_cpu() {
    let Some(rt) = testing::cuda_runtime_or_skip("map_device_matches_cpu") else {
        return;
    };
    let cu = rt.cuda().expect("a CUDA runtime has a CUDA backend");
    let seed = testing::fresh_seed();
    device_map_matches_cpu::<f32>(cu, seed);
    device_map_matches_cpu::<kiln_core::backend::f16>(cu, seed + 50);
    device_map_matches_cpu::<kiln_core::backend::bf16>(cu, seed + 100);
}
