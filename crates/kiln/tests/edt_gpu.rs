//! scipy.ndimage.distance_transform_edt on the GPU (`distance.cu`): the float64 distances
//! and int32 indices equal kiln-core's `edt` (scipy's, ties included, checked against scipy
//! by the Python suite) bit for bit, over fresh random masks of several densities, odd 1- to
//! 4-axis shapes, no sampling, integer and fractional sampling and a first-axis spacing that
//! takes pass 0 off the scan; masks without background or without foreground; and each
//! output alone. `bench_edt` (ignored) times the transform of a 512^3 volume.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use kiln::device::ops::Edt;
use kiln::device::CudaBackend;
use kiln::testing;
use kiln_core::imaging::distance::edt;
use rand::{Rng, SeedableRng};
use std::time::Instant;

/// Runs the transform on the device and on the CPU; panics naming the case where they
/// differ.
fn check(
    b: &CudaBackend,
    mask: &[u8],
    shape: &[usize],
    s: Option<&[f64]>,
    want_d: bool,
    want_i: bool,
    what: &str,
) {
    let n = mask.len();
    let r = shape.len();
    let want = edt(mask, shape, s, want_d, want_i).unwrap();
    let dm = b.upload_slice(mask).unwrap();
    // poisoned, so an element the kernels never write shows
    let mut dd = b
        .upload_slice(&vec![f64::from_bits(0x5a5a_5a5a_5a5a_5a5a); n])
        .unwrap();
    let mut di = b.upload_slice(&vec![0x5a5a_5a5a_i32; n * r]).unwrap();
    b.run(Edt {
        mask: &dm,
        shape,
        sampling: s,
        distances: want_d.then_some(&mut dd),
        indices: want_i.then_some(&mut di),
    })
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    if want_d {
        let mut got = vec![0f64; n];
        dd.copy_to_host(&mut got, b.stream()).unwrap();
        let w = want.distances.unwrap();
        if let Some(i) = (0..n).find(|&i| got[i].to_bits() != w[i].to_bits()) {
            panic!(
                "{what}: element {i}: distance {} on the GPU, {} on the CPU",
                got[i], w[i]
            );
        }
    }
    if want_i {
        let mut got = vec![0i32; n * r];
        di.copy_to_host(&mut got, b.stream()).unwrap();
        let w = want.indices.unwrap();
        if let Some(i) = (0..n * r).find(|&i| got[i] != w[i]) {
            panic!(
                "{what}: plane {} element {}: index {} on the GPU, {} on the CPU",
                i / n,
                i % n,
                got[i],
                w[i]
            );
        }
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
fn gpu_edt_equals_the_cpu_on_random_masks() {
    let Some(b) = backend("gpu_edt_equals_the_cpu_on_random_masks") else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xed7_6b0);
    let shapes: [&[usize]; 9] = [
        &[1],
        &[1001],
        &[37, 61],
        &[513, 700],
        &[1, 300],
        &[17, 23, 29],
        &[64, 64, 64],
        &[3, 211, 5],
        &[4, 5, 6, 7],
    ];
    let mut cases = 0;
    for shape in shapes {
        let n: usize = shape.iter().product();
        let r = shape.len();
        let samplings: Vec<Option<Vec<f64>>> = vec![
            None,
            Some((0..r).map(|a| (a + 2) as f64).collect()),
            Some((0..r).map(|a| 0.7 + 0.61 * a as f64).collect()),
            Some((0..r).map(|a| if a == 0 { 1e-150 } else { 1.3 }).collect()),
        ];
        for density in [0.02, 0.5, 0.97] {
            let mask: Vec<u8> = (0..n).map(|_| u8::from(rng.random::<f64>() < density)).collect();
            for s in &samplings {
                let what = format!("shape {shape:?}, density {density}, sampling {s:?}");
                check(b, &mask, shape, s.as_deref(), true, true, &what);
                cases += 1;
            }
        }
        for (fill, name) in [(1u8, "no background"), (0, "no foreground")] {
            let mask = vec![fill; n];
            check(
                b,
                &mask,
                shape,
                None,
                true,
                true,
                &format!("shape {shape:?}, {name}"),
            );
            cases += 1;
        }
    }
    // each output alone
    let shape = [33usize, 47, 19];
    let mask: Vec<u8> = (0..shape.iter().product::<usize>())
        .map(|_| u8::from(rng.random::<f64>() < 0.8))
        .collect();
    check(b, &mask, &shape, None, true, false, "distances only");
    check(b, &mask, &shape, None, false, true, "indices only");
    eprintln!("distance_transform_edt: {} cases bit for bit", cases + 2);
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_edt_refuses_what_it_cannot_take() {
    let Some(b) = backend("gpu_edt_refuses_what_it_cannot_take") else {
        return;
    };
    let dm = b.upload_slice(&[1u8; 32]).unwrap();
    let mut dd = b.upload_slice(&[0f64; 32]).unwrap();
    let shape5 = [2usize, 2, 2, 2, 2];
    let e = b
        .run(Edt {
            mask: &dm,
            shape: &shape5,
            sampling: None,
            distances: Some(&mut dd),
            indices: None,
        })
        .unwrap_err();
    assert!(e.to_string().contains("1 to 4"), "{e}");
    let e = b
        .run(Edt {
            mask: &dm,
            shape: &[4, 8],
            sampling: Some(&[1.0]),
            distances: Some(&mut dd),
            indices: None,
        })
        .unwrap_err();
    assert!(e.to_string().contains("1 sampling values for 2 axes"), "{e}");
    let e = b
        .run(Edt {
            mask: &dm,
            shape: &[4, 9],
            sampling: None,
            distances: Some(&mut dd),
            indices: None,
        })
        .unwrap_err();
    assert!(e.to_string().contains("the mask has 32 elements, not 36"), "{e}");
}

/// The wall time of `reps` transforms of `mask` on the device (the op waits for its
/// kernels), best of three rounds, in ms.
fn time_edt(b: &CudaBackend, mask: &[u8], shape: &[usize], with_indices: bool) -> f64 {
    let n = mask.len();
    let dm = b.upload_slice(mask).unwrap();
    let mut dd = b.upload_slice(&vec![0f64; n]).unwrap();
    let mut di = b.upload_slice(&vec![0i32; n * shape.len()]).unwrap();
    let run = |dd: &mut _, di: &mut _| {
        b.run(Edt {
            mask: &dm,
            shape,
            sampling: None,
            distances: Some(dd),
            indices: with_indices.then_some(di),
        })
        .unwrap()
    };
    run(&mut dd, &mut di);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        let reps = 3;
        for _ in 0..reps {
            run(&mut dd, &mut di);
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e3 / reps as f64);
    }
    best
}

#[test]
#[ignore = "a benchmark: cargo test --release --features gpu-tests --test edt_gpu -- --ignored --nocapture bench_edt"]
fn bench_edt() {
    let Some(b) = backend("bench_edt") else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(512);
    for (shape, density) in [
        (vec![512usize, 512, 512], 0.5),
        (vec![512, 512, 512], 0.99),
        (vec![4096, 4096], 0.5),
    ] {
        let n: usize = shape.iter().product();
        let mask: Vec<u8> = (0..n).map(|_| u8::from(rng.random::<f64>() < density)).collect();
        // correct first: the timed input's results equal the CPU's
        check(b, &mask, &shape, None, true, true, &format!("bench {shape:?}"));
        let t_d = time_edt(b, &mask, &shape, false);
        let t_di = time_edt(b, &mask, &shape, true);
        eprintln!(
            "edt {shape:?} density {density}: distances {t_d:.2} ms, distances and indices {t_di:.2} ms"
        );
    }
}
