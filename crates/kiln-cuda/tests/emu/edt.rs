//! `kernels/distance.cu` on the host (`emu/edt_check.cpp`): both kernels, run pass by pass
//! as the launcher runs them, must give kiln-core's `edt` distances and indices bit for bit,
//! on random masks of 1 to 4 axes and several densities, with no sampling, integer sampling,
//! fractional sampling (the summed distance of every axis, the non-fast path in 3 and 4
//! axes) and a first-axis spacing outside the scan's range (the stack in pass 0); and on
//! masks without background and without foreground.

use super::build;
use kiln_core::imaging::distance::{edt, edt_pass_flags};
use rand::{Rng, SeedableRng};
use std::process::Command;

/// The case file edt_check reads.
fn case(shape: &[usize], s: &[f64], mask: &[u8]) -> Vec<u8> {
    let mut text = format!("{}\n", shape.len());
    for d in shape {
        text.push_str(&format!("{d} "));
    }
    text.push('\n');
    for v in s {
        text.push_str(&format!("{v:.17e} "));
    }
    text.push('\n');
    for f in edt_pass_flags(shape, s) {
        text.push_str(&format!(
            "{} {}\n",
            i32::from(f.fast_delta),
            i32::from(f.scan_first)
        ));
    }
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(mask);
    bytes
}

#[test]
fn edt_kernels_give_kiln_core_s_features_on_the_host() {
    let Some(cxx) = kiln_testkit::cxx_or_skip("edt_kernels_give_kiln_core_s_features_on_the_host") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        &cxx,
        dir.path(),
        "edt_check",
        &[include_str!("../../kernels/distance.cu")],
        include_str!("edt_check.cpp"),
        &[],
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xed7);
    let shapes: [&[usize]; 7] = [
        &[1],
        &[301],
        &[37, 61],
        &[1, 64],
        &[17, 23, 29],
        &[5, 1, 40],
        &[4, 5, 6, 7],
    ];
    let mut cases = 0;
    for shape in shapes {
        let n: usize = shape.iter().product();
        let r = shape.len();
        let samplings: Vec<Option<Vec<f64>>> = vec![
            None,
            Some((0..r).map(|a| (a + 1) as f64).collect()),
            Some((0..r).map(|a| 0.7 + 0.61 * a as f64).collect()),
            Some((0..r).map(|a| if a == 0 { 1e-150 } else { 1.3 }).collect()),
        ];
        for density in [0.02, 0.5, 0.97, 0.0, 1.0] {
            let mask: Vec<u8> = (0..n).map(|_| u8::from(rng.random::<f64>() < density)).collect();
            for s in &samplings {
                let want = edt(&mask, shape, s.as_deref(), true, true).unwrap();
                let sv = s.clone().unwrap_or_else(|| vec![1.0; r]);
                let path = dir.path().join("case");
                std::fs::write(&path, case(shape, &sv, &mask)).unwrap();
                let out = dir.path().join("out");
                let res = Command::new(&exe).arg(&path).arg(&out).output().unwrap();
                assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
                let bytes = std::fs::read(&out).unwrap();
                let (db, ib) = bytes.split_at(8 * n);
                let dist: Vec<u64> = db
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                let ind: Vec<i32> = ib
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                let what = format!("shape {shape:?}, density {density}, sampling {s:?}");
                assert_eq!(&ind, want.indices.as_ref().unwrap(), "{what}: the indices");
                let wd: Vec<u64> = want.distances.unwrap().iter().map(|v| v.to_bits()).collect();
                if let Some(i) = (0..n).find(|&i| dist[i] != wd[i]) {
                    panic!(
                        "{what}: element {i}: distance {} on the host, {} from kiln-core",
                        f64::from_bits(dist[i]),
                        f64::from_bits(wd[i])
                    );
                }
                cases += 1;
            }
        }
    }
    eprintln!("distance kernels on the host: {cases} cases equal kiln-core's edt");
}
