//! `kernels/label.cu` on the host (`emu/label_check.cpp`): all seven kernels, with the
//! launcher's tiles and arguments and the CTA's threads racing as host threads on real
//! atomics, must give kiln-core's labels and count, for every tile shape (a row, 2-D, 3-D),
//! connectivity, density, and both `run` modes (the row runs alone, and with the
//! run-overlap skip that the GPU test has yet to run).

use super::build;
use kiln_core::imaging::label::{label, Structure};
use rand::{Rng, SeedableRng};
use std::process::Command;

/// The case file label_check reads.
fn case(shape: [usize; 3], run: i32, offs: &[[isize; 3]], mask: &[u8]) -> Vec<u8> {
    let mut text = format!("{} {} {} {run} {}\n", shape[0], shape[1], shape[2], offs.len());
    for o in offs {
        text.push_str(&format!("{} {} {}\n", o[0], o[1], o[2]));
    }
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(mask);
    bytes
}

#[test]
fn label_kernels_give_kiln_core_s_labels_on_the_host() {
    let Some(cxx) = kiln_testkit::cxx_or_skip("label_kernels_give_kiln_core_s_labels_on_the_host") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        &cxx,
        dir.path(),
        "label_check",
        &[include_str!("../../kernels/label.cu")],
        include_str!("label_check.cpp"),
        &[],
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let shapes: [&[usize]; 6] = [
        &[2500],
        &[50, 70],
        &[70, 100],
        &[33, 65],
        &[9, 20, 64],
        &[5, 17, 70],
    ];
    let mut cases = 0;
    for shape in shapes {
        let n: usize = shape.iter().product();
        let mut dhw = [1usize; 3];
        dhw[3 - shape.len()..].copy_from_slice(shape);
        for conn in 1..=shape.len() {
            let st = Structure::connectivity(shape.len(), conn).unwrap();
            let mut before = st.backward3().unwrap();
            before.sort();
            before.dedup();
            let has_left = before.contains(&[0, 0, -1]);
            for density in [0.3, 0.6] {
                let mask: Vec<u8> = (0..n).map(|_| u8::from(rng.random_bool(density))).collect();
                let mut want = vec![0i32; n];
                let count = label(&mask, shape, &st, &mut want).unwrap();
                for run in if has_left { vec![1, 2] } else { vec![0] } {
                    let path = dir.path().join("case");
                    std::fs::write(&path, case(dhw, run, &before, &mask)).unwrap();
                    let out = dir.path().join("out");
                    let r = Command::new(&exe).arg(&path).arg(&out).output().unwrap();
                    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
                    let bytes = std::fs::read(&out).unwrap();
                    let got: Vec<i32> = bytes
                        .chunks_exact(4)
                        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    let what = format!("shape {shape:?}, connectivity {conn}, density {density}, run {run}");
                    assert_eq!(got[0] as usize, count, "{what}: the count");
                    assert_eq!(&got[1..], &want[..], "{what}: the labels");
                    cases += 1;
                }
            }
        }
    }
    eprintln!("label kernels on the host: {cases} cases equal kiln-core's labels");
}
