//! Shared helpers for kiln-io's integration tests: seeded random data, file mangling.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;

use ndarray::{Array3, ArrayD, IxDyn};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// Random integer-valued pixels in `0..=max`, never all zero (the first pixel is `max`).
pub fn int_image(seed: u64, h: usize, w: usize, c: usize, max: u32) -> Array3<f32> {
    let mut r = rng(seed);
    let mut a = Array3::from_shape_fn((h, w, c), |_| r.random_range(0..=max) as f32);
    a[[0, 0, 0]] = max as f32;
    a
}

/// Random f32 pixels in `-1000..1000`, with some fractional values.
pub fn float_image(seed: u64, h: usize, w: usize, c: usize) -> Array3<f32> {
    let mut r = rng(seed);
    Array3::from_shape_fn((h, w, c), |_| r.random_range(-1000.0f32..1000.0))
}

pub fn float_array(seed: u64, shape: &[usize]) -> ArrayD<f32> {
    let mut r = rng(seed);
    ArrayD::from_shape_fn(IxDyn(shape), |_| r.random_range(-50.0f32..50.0))
}

/// Cuts a file to half its length.
pub fn truncate_half(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    std::fs::write(path, &bytes[..bytes.len() / 2]).unwrap();
}

/// Overwrites `n` bytes at random positions from `from` on.
pub fn scramble(path: &Path, seed: u64, from: usize, n: usize) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap();
    let mut r = rng(seed);
    for _ in 0..n {
        let i = r.random_range(from.min(bytes.len() - 1)..bytes.len());
        bytes[i] = r.random();
    }
    bytes
}

/// Names in a directory, sorted.
pub fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
