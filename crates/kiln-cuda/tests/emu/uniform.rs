//! `kernels/ndimage.cu`'s `nd_uniform_f64` on the host (`emu/uniform_check.cpp`), launched as
//! `launch_imaging/ndimage_exact.rs` launches it: each pass must equal kiln-core's
//! `scipy_cpu` running sum (scipy's `NI_UniformFilter1D`) bit for bit, stored in the output's
//! type, for every axis of 1-D to 3-D shapes (odd sizes, size-1 axes), sizes 1 to 12 (longer
//! than the axis too), every origin, every mode, f32 and f64 in and out.

use super::build;
use kiln_core::imaging::scipy_cpu::{run_passes, Pass1d, PassOp};
use kiln_core::imaging::BoundaryMode;
use rand::{Rng, SeedableRng};
use std::process::Command;

fn mode_code(m: BoundaryMode) -> i32 {
    match m {
        BoundaryMode::Constant(_) => 0,
        BoundaryMode::Nearest => 1,
        BoundaryMode::Reflect => 2,
        BoundaryMode::Mirror => 3,
        BoundaryMode::Wrap => 4,
    }
}

#[test]
fn uniform_kernel_gives_scipy_s_running_sums_on_the_host() {
    let Some(cxx) = kiln_testkit::cxx_or_skip("uniform_kernel_gives_scipy_s_running_sums_on_the_host") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        &cxx,
        dir.path(),
        "uniform_check",
        &[
            include_str!("../../kernels/imaging.cuh"),
            include_str!("../../kernels/ndimage.cu"),
        ],
        include_str!("uniform_check.cpp"),
        &["-DKILN_ONLY", "-DKILN_K_nd_uniform_f64"],
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x0af1);
    let shapes: [[usize; 3]; 6] = [
        [1, 1, 301],
        [1, 37, 61],
        [1, 64, 1],
        [17, 23, 29],
        [5, 1, 40],
        [1, 1, 1],
    ];
    let modes = [
        BoundaryMode::Constant(0.375),
        BoundaryMode::Nearest,
        BoundaryMode::Reflect,
        BoundaryMode::Mirror,
        BoundaryMode::Wrap,
    ];
    let mut cases = 0;
    for shape in shapes {
        let n: usize = shape.iter().product();
        let x: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let x32: Vec<f64> = x.iter().map(|&v| v as f32 as f64).collect();
        for axis in 0..3 {
            for size in [1usize, 2, 3, 4, 7, 12] {
                let (lo, hi) = (-((size / 2) as isize), (size as isize - 1) / 2);
                for origin in [lo, 0, hi] {
                    for (m, &mode) in modes.iter().enumerate() {
                        // each mode with one of the four type pairs, in turn
                        let (ti, to) = [(1, 1), (0, 0), (0, 1), (1, 0)][(m + axis + size) % 4];
                        let input = if ti == 0 { &x32 } else { &x };
                        let pass = Pass1d {
                            axis,
                            op: PassOp::Uniform(size),
                            origin,
                            mode,
                        };
                        let want: Vec<u64> = run_passes(input.clone(), &shape, &[pass], &|v| v)
                            .unwrap()
                            .into_iter()
                            .map(|v| {
                                if to == 0 {
                                    (v as f32).to_bits() as u64
                                } else {
                                    v.to_bits()
                                }
                            })
                            .collect();
                        let anchor = (size / 2) as isize + origin;
                        let mut text = format!(
                            "{ti} {to} {} {} {} {axis} {size} {anchor} {} {:.17e}\n",
                            shape[0],
                            shape[1],
                            shape[2],
                            mode_code(mode),
                            mode.cval().unwrap_or(0.0)
                        );
                        for v in input {
                            text.push_str(&format!("{v:.17e}\n"));
                        }
                        let case = dir.path().join("case.txt");
                        let out = dir.path().join("out.bin");
                        std::fs::write(&case, text).unwrap();
                        let r = Command::new(&exe).arg(&case).arg(&out).output().unwrap();
                        assert!(
                            r.status.success(),
                            "uniform_check: {}",
                            String::from_utf8_lossy(&r.stderr)
                        );
                        let bytes = std::fs::read(&out).unwrap();
                        let got: Vec<u64> = if to == 0 {
                            bytes
                                .chunks_exact(4)
                                .map(|c| f32::from_le_bytes(c.try_into().unwrap()).to_bits() as u64)
                                .collect()
                        } else {
                            bytes
                                .chunks_exact(8)
                                .map(|c| f64::from_le_bytes(c.try_into().unwrap()).to_bits())
                                .collect()
                        };
                        assert_eq!(got.len(), n);
                        if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
                            panic!(
                                "uniform size {size} origin {origin} axis {axis} {shape:?} {mode:?} ({ti}->{to}): \
                                 element {i} is {:#x}, the CPU's {:#x}",
                                got[i], want[i]
                            );
                        }
                        cases += 1;
                    }
                }
            }
        }
    }
    assert!(cases > 1000, "only {cases} cases");
}
