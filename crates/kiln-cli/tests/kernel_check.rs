//! `kiln kernel check` without a GPU: per-target resources and occupancy of a user's CUDA
//! file, NVRTC's log with line numbers for one that does not compile (exit 4), the JSON
//! report, bad arguments, and the message when compute-sanitizer is missing (exit 3). Needs
//! libnvrtc: CI sets `KILN_REQUIRE_NVRTC=1` (a missing library fails there); elsewhere the
//! tests skip, printed and counted. The sanitizer run itself is a GPU test (scripts).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

const SAXPY: &str = r#"extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void tile(float* out) {
    __shared__ float t[1024];
    t[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = t[1023 - threadIdx.x];
}
"#;

/// The binary under test: `KILN_BIN` (for the device bundle) or the one cargo built.
fn bin() -> std::path::PathBuf {
    std::env::var_os("KILN_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_kiln")))
}

fn kiln(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(["--device", "cpu", "kernel", "check"])
        .args(args)
        .current_dir(dir)
        .env("KILN_CACHE_DIR", dir.join("cache"))
        .env("KILN_COMPUTE_SANITIZER", dir.join("no-such-tool"))
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

fn nvrtc_or_skip(test: &str) -> bool {
    if kiln::device::nvrtc_available() {
        return true;
    }
    kiln_testkit::skip_unless_required(
        "KILN_REQUIRE_NVRTC",
        test,
        "libnvrtc cannot be loaded (set LD_LIBRARY_PATH to a CUDA lib dir; scripts/fetch-nvrtc.sh)",
    );
    false
}

#[test]
fn resources_and_occupancy_per_target() {
    if !nvrtc_or_skip("resources_and_occupancy_per_target") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("k.cu"), SAXPY).unwrap();
    let o = kiln(d.path(), &["k.cu", "--arch", "sm_80,sm_90", "--block", "1024"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    for line in [
        "sm_80  saxpy:",
        "sm_90  saxpy:",
        "sm_90  tile:",
        "4096 B shared",
        "occupancy 100%",
    ] {
        assert!(t.contains(line), "`{line}` missing:\n{t}");
    }
    let o = kiln(
        d.path(),
        &[
            "k.cu", "--arch", "sm_90", "--name", "tile", "--block", "256", "--shared", "200000", "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tile = &v["targets"]["sm_90"]["tile"];
    assert_eq!(tile["shared_bytes"], 4096);
    assert!(tile["registers"].as_u64().unwrap() > 0);
    // 4096 + 200000 bytes of shared memory a block: one block an SM, flagged
    assert_eq!(tile["blocks_per_sm"], 1);
    assert!(
        tile["warnings"][0].as_str().unwrap().contains("occupancy"),
        "{tile}"
    );
    assert!(
        v["targets"]["sm_90"].get("saxpy").is_none(),
        "--name keeps one kernel"
    );
}

#[test]
fn errors_say_what_and_where() {
    if !nvrtc_or_skip("errors_say_what_and_where") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("broken.cu"),
        "extern \"C\" __global__ void f(float* x) {\n  x[0] = nope;\n}\n",
    )
    .unwrap();
    let o = kiln(d.path(), &["broken.cu", "--arch", "sm_90"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(4), "{t}");
    assert!(t.contains("broken.cu(2): error") && t.contains("nope"), "{t}");
    std::fs::write(d.path().join("k.cu"), SAXPY).unwrap();
    let o = kiln(d.path(), &["k.cu", "--arch", "sm_61"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(text(&o).contains("sm_70 to sm_120"), "{}", text(&o));
    let o = kiln(d.path(), &["k.cu", "--arch", "sm_90", "--name", "nosuch"]);
    assert_eq!(o.status.code(), Some(4));
    assert!(text(&o).contains("saxpy, tile"), "{}", text(&o));
    let o = kiln(d.path(), &["missing.cu"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let o = kiln(
        d.path(),
        &["k.cu", "--arch", "sm_90", "-O", "--gpu-architecture=sm_80"],
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    // --sanitize without compute-sanitizer: exit 3 saying how to get it
    std::fs::write(
        d.path().join("launch.json"),
        r#"{"name": "saxpy", "grid": [1], "block": [32], "args": []}"#,
    )
    .unwrap();
    let o = kiln(
        d.path(),
        &["k.cu", "--arch", "sm_90", "--sanitize", "launch.json"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains("compute-sanitizer was not found"),
        "{}",
        text(&o)
    );
}
