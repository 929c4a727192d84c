//! The rank module's median kernels run on the host: a C++ compiler builds
//! `kernels/rank.cu` + `rank_med_net.cuh` + `rank_med.cu` (after `imaging.cuh`, as the
//! module is assembled) over `tests/emu/cuda_host_stub.h`, and `tests/emu/rank_med_check.cpp`
//! runs the one-output and the packed four-outputs-a-thread medians over a simulated grid,
//! comparing every output with a naive median (every mode, 3×3 and 5×5, border-only rows
//! and words, ties), for both `KILN_MEDPACK` variants. This checks the kernels' indexing and
//! selection logic on every CI run; the GPU's own compile and bits are checked by the
//! `rank` tests on the H200. Skips, saying so, where no C++ compiler is found (`CXX`, `c++`,
//! `g++`, `clang++`).
#![allow(clippy::unwrap_used)]

use std::process::Command;

const SOURCES: [&str; 4] = [
    include_str!("../kernels/imaging.cuh"),
    include_str!("../kernels/rank.cu"),
    include_str!("../kernels/rank_med_net.cuh"),
    include_str!("../kernels/rank_med.cu"),
];

fn compiler() -> Option<String> {
    let mut names: Vec<String> = std::env::var("CXX").into_iter().collect();
    names.extend(["c++", "g++", "clang++"].map(String::from));
    names.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

#[test]
fn median_kernels_match_a_naive_median_on_the_host() {
    let Some(cxx) = compiler() else {
        eprintln!("SKIP median_kernels_match_a_naive_median_on_the_host: no C++ compiler (set CXX)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut tu = String::from(include_str!("emu/cuda_host_stub.h"));
    for s in SOURCES {
        tu.push_str(s);
        tu.push('\n');
    }
    tu.push_str(include_str!("emu/rank_med_check.cpp"));
    let src = dir.path().join("rank_med_check.cpp");
    std::fs::write(&src, tu).unwrap();
    for pack in [4, 2] {
        let exe = dir.path().join(format!("check{pack}"));
        let out = Command::new(&cxx)
            .args(["-std=c++17", "-O2", "-w", "-DKILN_ONLY"])
            .args(["-DKILN_K_rank_med9", "-DKILN_K_rank_med25"])
            .args(["-DKILN_K_rank_med9_u8x4", "-DKILN_K_rank_med25_u8x4"])
            .arg(format!("-DKILN_MEDPACK={pack}"))
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{cxx} failed on the rank module (MEDPACK {pack}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = Command::new(&exe).output().unwrap();
        let text = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success() && text.contains(" 0 bad"),
            "MEDPACK {pack}:\n{text}"
        );
        eprintln!("MEDPACK {pack}: {}", text.trim());
    }
}
