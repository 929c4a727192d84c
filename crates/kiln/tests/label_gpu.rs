//! scipy.ndimage.label on the GPU (`label.cu`): the labels and their count equal kiln-core's
//! (scipy's numbering, checked against scipy by the Python suite) bit for bit, over fresh
//! random masks of several densities, odd 1-, 2- and 3-axis shapes, every connectivity and a
//! custom structure, and the shapes that stress the merge: one long snake, a checkerboard
//! (the most labels), all ones and all zeros.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use kiln::device::ops::Label;
use kiln::device::CudaBackend;
use kiln::testing;
use kiln_core::imaging::label::{label, Structure};
use rand::{Rng, SeedableRng};

fn shape3(shape: &[usize]) -> [usize; 3] {
    let mut s = [1usize; 3];
    s[3 - shape.len()..].copy_from_slice(shape);
    s
}

/// Labels `mask` on the device and on the CPU; panics naming the case where they differ.
fn check(b: &CudaBackend, mask: &[u8], shape: &[usize], s: &Structure, what: &str) {
    let mut want = vec![0i32; mask.len()];
    let want_n = label(mask, shape, s, &mut want).unwrap();
    let dm = b.upload_slice(mask).unwrap();
    // poisoned, so an element the kernels never write shows
    let mut out = b.upload_slice(&vec![0x5a5a_5a5a_i32; mask.len()]).unwrap();
    let n = b
        .run(Label {
            mask: &dm,
            shape: shape3(shape),
            offsets: &s.backward3().unwrap(),
            out: &mut out,
        })
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut got = vec![0i32; mask.len()];
    out.copy_to_host(&mut got, b.stream()).unwrap();
    assert_eq!(n, want_n, "{what}: label count");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: element {i} labelled {} on the GPU, {} on the CPU",
            got[i], want[i]
        );
    }
}

fn backend(test: &str) -> Option<&'static CudaBackend> {
    let rt = testing::cuda_runtime_or_skip(test)?;
    Some(rt.cuda().unwrap())
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_labels_equal_the_cpu_on_random_masks() {
    let Some(b) = backend("gpu_labels_equal_the_cpu_on_random_masks") else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x1abe1);
    let shapes: [&[usize]; 7] = [
        &[1],
        &[1001],
        &[37, 61],
        &[513, 700],
        &[17, 23, 29],
        &[64, 64, 64],
        &[3, 211, 5],
    ];
    for shape in shapes {
        let n: usize = shape.iter().product();
        for density in [0.1, 0.45, 0.6, 0.9] {
            let mask: Vec<u8> = (0..n).map(|_| u8::from(rng.random::<f64>() < density)).collect();
            for c in 1..=shape.len() {
                let s = Structure::connectivity(shape.len(), c).unwrap();
                check(
                    b,
                    &mask,
                    shape,
                    &s,
                    &format!("{shape:?} density {density} connectivity {c}"),
                );
            }
        }
    }
    // a centrosymmetric structure that is no connectivity: the two diagonals of a plane
    let diag = Structure::new(2, vec![true, false, true, false, true, false, true, false, true]).unwrap();
    let mask: Vec<u8> = (0..97 * 89)
        .map(|_| u8::from(rng.random::<f64>() < 0.5))
        .collect();
    check(b, &mask, &[97, 89], &diag, "diagonals only");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_labels_equal_the_cpu_on_adversarial_masks() {
    let Some(b) = backend("gpu_labels_equal_the_cpu_on_adversarial_masks") else {
        return;
    };
    let (h, w) = (301, 257);
    // a snake: every other row full, joined at alternating ends, one group spanning the array
    let snake: Vec<u8> = (0..h * w)
        .map(|i| {
            let (y, x) = (i / w, i % w);
            u8::from(y % 2 == 0 || (y % 4 == 1 && x == w - 1) || (y % 4 == 3 && x == 0))
        })
        .collect();
    let checker: Vec<u8> = (0..h * w).map(|i| u8::from((i / w + i % w) % 2 == 0)).collect();
    let faces = Structure::connectivity(2, 1).unwrap();
    let full = Structure::connectivity(2, 2).unwrap();
    for (mask, what) in [
        (snake, "snake"),
        (checker, "checkerboard"),
        (vec![1u8; h * w], "all ones"),
        (vec![0u8; h * w], "all zeros"),
    ] {
        check(b, &mask, &[h, w], &faces, &format!("{what}, faces"));
        check(b, &mask, &[h, w], &full, &format!("{what}, full"));
    }
    // an empty input labels nothing and launches nothing
    let s = Structure::connectivity(1, 1).unwrap();
    let empty = b.upload_slice(&[0u8; 0]).unwrap_or_else(|_| b.alloc(0).unwrap());
    let mut out = b.alloc::<i32>(0).unwrap();
    assert_eq!(
        b.run(Label {
            mask: &empty,
            shape: [1, 1, 0],
            offsets: &s.backward3().unwrap(),
            out: &mut out
        })
        .unwrap(),
        0
    );
}
