//! `kiln serve` with a multi-device worker (`--worker-group`, `workers.groups`) end to end
//! on loopback: the group's worker process starts (`kiln worker --devices SET`), shows in
//! /v1/workers as `group:SET`, and its jobs' results equal those of a server with one
//! plain CPU worker (Monte Carlo prices bit for bit, an element-wise map element for
//! element). On the CPU machine the group is `cpu`; on a GPU machine `cpu+all` and `0,0`
//! run the same test over GPUs (`KILN_TEST_WORKER_GROUP`).
#![allow(clippy::unwrap_used)]

mod service_support;

use serde_json::{json, Value};
use service_support::*;

fn jobs() -> Vec<Value> {
    let opts: Vec<Value> = (0..40).map(|i| option(80.0 + i as f64)).collect();
    let x: Vec<f32> = (0..3000)
        .map(|i| ((i * 37 % 1000) as f32 - 500.0) / 97.0)
        .collect();
    vec![
        json!({"kind": "price", "params": {"method": "mc", "paths": 8192, "steps": 8, "seed": 5},
               "inputs": {"options": opts}}),
        json!({"kind": "elementwise", "params": {"op": "tanh"}, "inputs": {"x": {"data": x}}}),
    ]
}

/// Runs [`jobs`] on a server started with `args`; the results and the workers' devices.
fn run(args: &[&str]) -> (Vec<Value>, Vec<String>) {
    let d = data_dir();
    let s = start(&d.path().join("data"), args);
    let workers = s.get("/v1/workers", None).unwrap().json();
    let devices = workers
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["device"].as_str().unwrap().to_string())
        .collect();
    let mut out = Vec::new();
    for j in jobs() {
        let r = s.post_json("/v1/jobs", None, &j);
        assert_eq!(r.status, 202, "{}", r.text());
        let id = r.json()["id"].as_str().unwrap().to_string();
        let done = s.wait_job(&id, None, 60);
        assert_eq!(done["state"], "succeeded", "{done}");
        out.push(done["result"].clone());
    }
    (out, devices)
}

#[test]
fn a_multi_device_worker_gives_the_results_of_one() {
    let group = std::env::var("KILN_TEST_WORKER_GROUP").unwrap_or_else(|_| "cpu".into());
    let (one, devices) = run(&["--cpu-workers", "1"]);
    assert_eq!(devices, ["cpu"]);
    let (split, devices) = run(&["--cpu-workers", "0", "--worker-group", &group]);
    assert_eq!(devices, [format!("group:{group}")]);
    // prices: bit for bit whichever devices ran them (the executor's merge)
    assert_eq!(one[0]["prices"], split[0]["prices"]);
    assert!(split[0]["workers"].is_array(), "{}", split[0]);
    // a map: the same elements where the group is the CPU alone
    if group == "cpu" {
        assert_eq!(one[1], split[1]);
    } else {
        let (a, b) = (
            one[1]["data"].as_array().unwrap(),
            split[1]["data"].as_array().unwrap(),
        );
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-6, "{x} vs {y}");
        }
    }
}

#[test]
fn a_bad_group_is_refused_at_start() {
    let d = data_dir();
    let bin = std::env::var_os("KILN_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_kiln").into());
    let o = std::process::Command::new(bin)
        .args([
            "--device",
            "cpu",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(d.path())
        .args(["--worker-group", "0,1", "--worker-group", "1", "--print-config"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("share a GPU"), "{err}");
}
