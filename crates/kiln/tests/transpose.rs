//! The 2-D transpose on every backend is exact (it only moves bits) for f32, f16 and bf16
//! at degenerate, odd, tile-multiple and large shapes, against the index formula; on CUDA
//! through the device API too (64x64 tiles, 16-bit pairs as words, the 32x32 16-bit kernel
//! for odd sides).
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use kiln::device::ops::Transpose;
use kiln::{testing, Runtime};
use kiln_core::backend::{bf16, f16};

fn check<T: kiln::FloatElement>(rt: &Runtime, rows: usize, cols: usize, seed: u64) {
    let x: Vec<T> = testing::random_f32(rows * cols, -100.0, 100.0, seed)
        .into_iter()
        .map(T::from_f32)
        .collect();
    let y = rt.transpose(&x, rows, cols).unwrap();
    for r in 0..rows {
        for c in 0..cols {
            let (g, w) = (y[c * rows + r], x[r * cols + c]);
            assert!(
                g.to_f32().to_bits() == w.to_f32().to_bits(),
                "{} {:?} {rows}x{cols} at ({r},{c}): {g:?} vs {w:?}",
                rt.device_name(),
                T::DTYPE
            );
        }
    }
}

kiln::test_device!(transpose_is_exact_at_every_shape, |rt: &Runtime| {
    let seed = testing::fresh_seed();
    let shapes = [
        (1, 1),
        (1, 1025),
        (1025, 1),
        (17, 33),
        (33, 17),
        (32, 32),
        (64, 96),
        (2049, 3),
        (1000, 1000),
        // partial 64x64 tiles with even sides (the 16-bit word kernel) and odd ones
        (2, 1026),
        (130, 66),
        (66, 2),
        (258, 194),
        (65, 127),
        (127, 65),
    ];
    for (i, &(r, c)) in shapes.iter().enumerate() {
        check::<f32>(rt, r, c, seed + i as u64);
        check::<f16>(rt, r, c, seed + 100 + i as u64);
        check::<bf16>(rt, r, c, seed + 200 + i as u64);
    }
});

kiln::test_device!(
    transpose_twice_is_identity_and_lengths_are_checked,
    |rt: &Runtime| {
        let x = testing::random_f32(7 * 13, -1.0, 1.0, 3);
        let back = rt.transpose(&rt.transpose(&x, 7, 13).unwrap(), 13, 7).unwrap();
        assert_eq!(back, x);
        assert!(rt.transpose(&x, 7, 12).is_err());
        assert!(rt.transpose::<f32>(&[], 0, 5).unwrap().is_empty());
    }
);

fn check_device<T: kiln::FloatElement>(cu: &kiln::device::CudaBackend, rows: usize, cols: usize, seed: u64) {
    let x: Vec<T> = testing::random_f32(rows * cols, -100.0, 100.0, seed)
        .into_iter()
        .map(T::from_f32)
        .collect();
    let dx = cu.upload_slice(&x).unwrap();
    let mut dy = cu.alloc_poisoned_as::<T>(rows * cols).unwrap();
    cu.run(Transpose {
        x: &dx,
        rows,
        cols,
        out: &mut dy,
    })
    .unwrap();
    let mut y = vec![T::from_f32(0.0); rows * cols];
    dy.copy_to_host(&mut y, cu.stream()).unwrap();
    for r in 0..rows {
        for c in 0..cols {
            let (g, w) = (y[c * rows + r], x[r * cols + c]);
            assert!(
                g.to_f32().to_bits() == w.to_f32().to_bits(),
                "{:?} {rows}x{cols} at ({r},{c}): {g:?} vs {w:?}",
                T::DTYPE
            );
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn transpose_device_is_exact() {
    let Some(rt) = testing::cuda_runtime_or_skip("transpose_device_is_exact") else {
        return;
    };
    let cu = rt.cuda().expect("a CUDA runtime has a CUDA backend");
    let seed = testing::fresh_seed();
    let shapes = [
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 2),
        (1, 1025),
        (17, 33),
        (64, 64),
        (64, 130),
        (130, 64),
        (258, 194),
        (127, 65),
        (1026, 2),
    ];
    for (i, &(r, c)) in shapes.iter().enumerate() {
        check_device::<f32>(cu, r, c, seed + i as u64);
        check_device::<f16>(cu, r, c, seed + 100 + i as u64);
        check_device::<bf16>(cu, r, c, seed + 200 + i as u64);
    }
}
