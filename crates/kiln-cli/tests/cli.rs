//! The `kiln` binary end to end. GPU cases skip with a reason where no GPU is usable and
//! must pass where `KILN_REQUIRE_GPU=1`.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test: `KILN_BIN` (for the device bundle, where the build path does not
/// exist) or the one cargo built.
fn bin() -> PathBuf {
    std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")))
}

fn kiln(cache: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env("KILN_CACHE_DIR", cache)
        .env_remove("KILN_DEVICES")
        .env_remove("KILN_CONFIG")
        .output()
        .expect("run kiln")
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether this machine has a GPU, probed from the driver (not from what `kiln` says), so
/// that where one is present a failing GPU command fails the test instead of skipping it.
/// Where none is, the skip is recorded, or fails under `KILN_REQUIRE_GPU=1`.
fn gpu_or_skip(test: &str) -> bool {
    kiln::testing::gpu_or_skip(test)
}

#[test]
fn doctor_exits_zero_and_names_the_active_backend() {
    let d = tempfile::tempdir().unwrap();
    let o = kiln(d.path(), &["doctor", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json(&o);
    let active = r["active_backend"].as_str().unwrap();
    assert!(active == "cpu" || active.starts_with("cuda:"), "{active}");
    if active == "cpu" {
        assert!(r["fallback_reason"].is_string());
    }
    assert_eq!(r["cache"]["writable"], true);
    assert_eq!(r["config"].as_array().unwrap().len(), 5);
    let o = kiln(d.path(), &["doctor", "--device", "cpu"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("active cpu"));
}

#[test]
fn doctor_device_cuda_without_gpu_exits_3_with_reason() {
    let d = tempfile::tempdir().unwrap();
    let o = kiln(d.path(), &["doctor", "--device", "cuda"]);
    if kiln::testing::no_gpu_reason().is_none() {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    } else {
        assert_eq!(o.status.code(), Some(3));
        assert!(
            stderr(&o).contains("--device cuda is not usable"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn bad_device_and_bad_policy_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let o = kiln(d.path(), &["demo", "--device", "gpu7"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("auto, cpu, cuda or cuda:N"), "{}", stderr(&o));
    let o = Command::new(bin())
        .args(["doctor"])
        .env("KILN_CACHE_DIR", d.path())
        .env("KILN_DEVICES", "0,,zz")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4));
    assert!(stderr(&o).contains("KILN_DEVICES"), "{}", stderr(&o));
    let o = kiln(d.path(), &["doctor", "--config", "/nonexistent/kiln.toml"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
}

#[test]
fn demo_on_cpu_verifies() {
    let d = tempfile::tempdir().unwrap();
    let o = kiln(
        d.path(),
        &[
            "demo", "--device", "cpu", "--size", "quick", "--reps", "3", "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json(&o);
    assert_eq!(r["device"], "cpu");
    assert_eq!(r["all_verified"], true);
    assert!(!r["rows"].as_array().unwrap().is_empty());
}

#[test]
fn cache_commands() {
    let d = tempfile::tempdir().unwrap();
    let o = kiln(d.path(), &["cache", "list", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(json(&o)["entries"].as_array().unwrap().len(), 0);
    let o = kiln(d.path(), &["cache", "warm", "--arch", "bogus"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let o = kiln(d.path(), &["cache", "clear"]);
    assert_eq!(o.status.code(), Some(0));
}

fn module_outcomes(r: &Value) -> Vec<String> {
    r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["trial"]["module_loads"].as_array())
        .flatten()
        .map(|m| m["cache"]["outcome"].as_str().unwrap().to_string())
        .collect()
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_second_start_does_not_call_nvrtc_and_corrupt_entries_recover() {
    if !gpu_or_skip("gpu_second_start_does_not_call_nvrtc_and_corrupt_entries_recover") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let first = json(&kiln(d.path(), &["doctor", "--json", "--device", "cuda"]));
    assert_eq!(module_outcomes(&first), vec!["compiled"], "{first}");
    assert!(first["nvrtc_compiles_this_process"].as_u64().unwrap() >= 1);
    let second = json(&kiln(d.path(), &["doctor", "--json", "--device", "cuda"]));
    assert_eq!(module_outcomes(&second), vec!["hit"]);
    assert_eq!(second["nvrtc_compiles_this_process"], 0);
    // truncate every entry: the next start recompiles with a warning and still passes
    for e in std::fs::read_dir(d.path()).unwrap() {
        let p = e.unwrap().path();
        let len = std::fs::metadata(&p).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    }
    let o = kiln(d.path(), &["doctor", "--json", "--device", "cuda"]);
    assert_eq!(o.status.code(), Some(0));
    let third = json(&o);
    assert_eq!(module_outcomes(&third), vec!["recompiled"]);
    assert!(stderr(&o).contains("rejected"), "{}", stderr(&o));
    let fourth = json(&kiln(d.path(), &["doctor", "--json", "--device", "cuda"]));
    assert_eq!(module_outcomes(&fourth), vec!["hit"]);
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_demo_verifies_against_the_cpu() {
    if !gpu_or_skip("gpu_demo_verifies_against_the_cpu") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let o = kiln(
        d.path(),
        &["demo", "--device", "cuda", "--size", "quick", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json(&o);
    assert!(r["device"].as_str().unwrap().starts_with("cuda:"));
    assert_eq!(r["all_verified"], true);
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn gpu_policy_excluding_every_device_refuses_cuda_and_auto_falls_back() {
    if !gpu_or_skip("gpu_policy_excluding_every_device_refuses_cuda_and_auto_falls_back") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let run = |dev: &str| {
        Command::new(bin())
            .args(["doctor", "--json", "--device", dev])
            .env("KILN_CACHE_DIR", d.path())
            .env("KILN_DEVICES", "none")
            .output()
            .unwrap()
    };
    let o = run("cuda");
    assert_eq!(o.status.code(), Some(3));
    let r = json(&o);
    assert!(r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["admission"] == "not_allowed" && d["trial"].is_null()));
    let o = run("auto");
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(json(&o)["active_backend"], "cpu");
}
