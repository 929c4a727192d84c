//! `kiln bench` on the CPU (quick sizes): the JSON report against the schema documented in
//! docs/bench-schema.md, the regression gate (fails against a synthetic faster baseline,
//! passes against its own report), peers merging, plots, `kiln bench report`, bad input
//! (exit 4) and `kiln kernels` without a usable GPU (exit 3). No timing thresholds: only
//! what the gate decides from the numbers in the files.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn bin() -> PathBuf {
    std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")))
}

fn kiln(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env_remove("KILN_DEVICES")
        .env_remove("KILN_CONFIG")
        .output()
        .expect("run kiln")
}

/// `kiln bench report --kernels K --bench B1 [--bench B2 ..] --out OUT`.
fn bench_report(kernels: &Path, benches: &[&Path], out: &str) -> Output {
    let mut args = vec!["bench", "report", "--kernels", kernels.to_str().unwrap()];
    for b in benches {
        args.extend(["--bench", b.to_str().unwrap()]);
    }
    args.extend(["--out", out]);
    kiln(&args)
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn write_json(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// One CPU quick run shared by the tests (the binary is run once per test process).
fn run_once() -> &'static (tempfile::TempDir, PathBuf) {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("cpu.json");
        let o = kiln(&[
            "bench",
            "--device",
            "cpu",
            "--sizes",
            "quick",
            "--json",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code(&o), 0, "kiln bench failed: {}", stderr(&o));
        (dir, out)
    })
}

/// docs/bench-schema.md: `### \`section\`` headings, each followed by a table of
/// `| \`field\` | type | meaning |` rows.
fn schema_doc() -> Vec<(String, Vec<(String, String)>)> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench-schema.md");
    let path = if here.exists() {
        here
    } else {
        PathBuf::from("docs/bench-schema.md")
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut sections: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let mut open = false; // a `## ` heading ends the schema sections' tables
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("### `") {
            sections.push((h.trim_end_matches('`').to_string(), Vec::new()));
            open = true;
        } else if line.starts_with("## ") {
            open = false;
        } else if let (Some(rest), Some(s), true) = (line.strip_prefix("| `"), sections.last_mut(), open) {
            let cells: Vec<&str> = rest.split('|').map(str::trim).collect();
            let field = cells[0].trim_end_matches('`').to_string();
            s.1.push((field, cells[1].to_string()));
        }
    }
    assert!(sections.len() >= 4, "schema doc sections: {sections:?}");
    sections
}

fn type_ok(v: &Value, ty: &str) -> bool {
    let base = ty.split([',', ' ']).next().unwrap_or("");
    let ok = match base {
        "string" => v.is_string(),
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        other => panic!("unknown type `{other}` in the schema doc"),
    };
    ok || (ty.contains("or null") && v.is_null())
}

/// Check an object against one documented section: every field present (unless optional)
/// with its type, and nothing undocumented.
fn check_object(v: &Value, section: &str, fields: &[(String, String)], at: &str) {
    let obj = v.as_object().unwrap_or_else(|| panic!("{at}: not an object"));
    for (f, ty) in fields {
        match obj.get(f) {
            None => assert!(ty.contains("optional"), "{at}: `{f}` ({ty}) missing ({section})"),
            Some(x) => assert!(type_ok(x, ty), "{at}: `{f}` = {x} is not {ty}"),
        }
    }
    for k in obj.keys() {
        assert!(
            fields.iter().any(|(f, _)| f == k),
            "{at}: `{k}` is not documented in docs/bench-schema.md ({section})"
        );
    }
}

fn validate(r: &Value) {
    let doc = schema_doc();
    let sec = |name: &str| {
        &doc.iter()
            .find(|s| s.0 == name)
            .unwrap_or_else(|| panic!("no section {name}"))
            .1
    };
    check_object(r, "report", sec("report"), "report");
    assert_eq!(r["schema_version"], 1);
    for (key, name) in [
        ("ceilings", "ceilings[]"),
        ("results", "results[]"),
        ("peers", "peers[]"),
    ] {
        if let Some(a) = r.get(key) {
            for (i, x) in a.as_array().unwrap().iter().enumerate() {
                check_object(x, name, sec(name), &format!("{key}[{i}]"));
            }
        }
    }
}

#[test]
fn cpu_quick_report_matches_the_documented_schema() {
    let (_, out) = run_once();
    let r = read_json(out);
    validate(&r);
    assert_eq!(r["device"], "cpu");
    assert_eq!(r["timing"], "wall-clock");
    assert_eq!(r["complete"], true);
    assert!(!r["git_commit"].as_str().unwrap().is_empty());
    let ceilings = r["ceilings"].as_array().unwrap();
    assert_eq!(ceilings[0]["name"], "host_copy");
    assert_eq!(ceilings[0]["verified"], true);
    let rows = r["results"].as_array().unwrap();
    for suite in ["elementwise", "transpose", "imaging", "finance", "memory"] {
        assert!(rows.iter().any(|x| x["suite"] == suite), "no {suite} row");
    }
    for x in rows {
        let name = format!("{} {}", x["workload"], x["size"]);
        assert_eq!(x["verified"], true, "{name}: {}", x["check"]);
        let (p10, m, p90) = (
            x["p10_ms"].as_f64().unwrap(),
            x["median_ms"].as_f64().unwrap(),
            x["p90_ms"].as_f64().unwrap(),
        );
        assert!(0.0 < p10 && p10 <= m && m <= p90, "{name}: {p10} {m} {p90}");
        if let (Some(f), Some(e)) = (x["floor_ms"].as_f64(), x["efficiency"].as_f64()) {
            assert!((e - f / m).abs() <= 1e-9 * e.max(1.0), "{name}: efficiency");
            let bytes = x["bytes"].as_f64().unwrap();
            let gbps = ceilings[0]["GBps"].as_f64().unwrap();
            assert!((f - bytes / gbps / 1e6).abs() <= 1e-9 * f, "{name}: floor");
        }
        assert_eq!(
            x["kernels"].as_array().unwrap().len(),
            0,
            "{name}: CPU rows launch no kernel"
        );
    }
    // every workload once per size: the gate's key is unique
    let mut keys: Vec<String> = rows
        .iter()
        .map(|x| format!("{} {}", x["workload"], x["size"]))
        .collect();
    keys.sort();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n, "duplicate (workload, size)");
}

#[test]
fn gate_fails_against_a_faster_baseline_and_passes_against_itself() {
    let (dir, out) = run_once();
    let r = read_json(out);
    // a synthetic baseline 10x faster on every row
    let mut fast = r.clone();
    for x in fast["results"].as_array_mut().unwrap() {
        for f in ["median_ms", "p10_ms", "p90_ms", "min_ms"] {
            x[f] = json!(x[f].as_f64().unwrap() / 10.0);
        }
    }
    let fast_path = dir.path().join("fast.json");
    write_json(&fast_path, &fast);
    let o = kiln(&[
        "bench",
        "show",
        out.to_str().unwrap(),
        "--baseline",
        fast_path.to_str().unwrap(),
        "--max-regression",
        "50",
    ]);
    assert_eq!(code(&o), 9, "{}", stderr(&o));
    let err = stderr(&o);
    for x in r["results"].as_array().unwrap() {
        let line = format!(
            "REGRESSION {} {}:",
            x["workload"].as_str().unwrap(),
            x["size"].as_str().unwrap()
        );
        assert!(err.contains(&line), "`{line}` not in:\n{err}");
    }
    // against itself, with no slack at all
    let o = kiln(&[
        "bench",
        "show",
        out.to_str().unwrap(),
        "--baseline",
        out.to_str().unwrap(),
        "--max-regression",
        "0",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stderr(&o).contains("REGRESSION"));
    // a baseline slower on every row passes too
    let mut slow = r.clone();
    for x in slow["results"].as_array_mut().unwrap() {
        x["median_ms"] = json!(x["median_ms"].as_f64().unwrap() * 2.0);
    }
    let slow_path = dir.path().join("slow.json");
    write_json(&slow_path, &slow);
    let o = kiln(&[
        "bench",
        "show",
        out.to_str().unwrap(),
        "--baseline",
        slow_path.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn a_live_run_is_gated_and_names_only_what_it_ran() {
    let (dir, out) = run_once();
    let mut fast = read_json(out);
    for x in fast["results"].as_array_mut().unwrap() {
        x["median_ms"] = json!(x["median_ms"].as_f64().unwrap() / 1000.0);
    }
    let fast_path = dir.path().join("fast-live.json");
    write_json(&fast_path, &fast);
    let o = kiln(&[
        "bench",
        "--device",
        "cpu",
        "--suite",
        "transpose",
        "--baseline",
        fast_path.to_str().unwrap(),
        "--max-regression",
        "50",
    ]);
    assert_eq!(code(&o), 9, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("REGRESSION transpose_f32 256x256:"), "{err}");
    assert!(!err.contains("REGRESSION sigmoid"), "{err}");
    assert!(err.contains("not in this run (not gated)"), "{err}");
}

#[test]
fn peers_merge_by_name_and_size() {
    let (dir, out) = run_once();
    let r = read_json(out);
    let t = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["workload"] == "transpose_f32")
        .unwrap()
        .clone();
    let kiln_ms = t["median_ms"].as_f64().unwrap();
    let peers = json!([
        {"workload": t["peer_workload"], "peer": "fake-peer", "ms": kiln_ms * 2.0, "GBps": 1.0},
        {"workload": "sigmoid_f32", "peer": "fake-peer", "ms": 1.0, "n": 12345},
        {"workload": "stencil", "error": "RuntimeError('no GPU')"}
    ]);
    let p = dir.path().join("peers.json");
    write_json(&p, &peers);
    let merged = dir.path().join("merged.json");
    let svg = dir.path().join("plot.svg");
    let o = kiln(&[
        "bench",
        "show",
        out.to_str().unwrap(),
        "--peers",
        p.to_str().unwrap(),
        "--json",
        merged.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let m = read_json(&merged);
    validate(&m);
    let cmp = m["peers"].as_array().unwrap();
    // the transpose row matched; sigmoid_f32 at another n did not; the error row was skipped
    assert_eq!(cmp.len(), 1, "{cmp:?}");
    assert_eq!(cmp[0]["workload"], "transpose_f32");
    assert!((cmp[0]["ratio"].as_f64().unwrap() - 0.5).abs() < 1e-9);
    let err = stderr(&o);
    assert!(err.contains("sigmoid_f32 (fake-peer)"), "{err}");
    assert!(err.contains("stencil: RuntimeError"), "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"), "not an SVG");
    assert!(
        text.contains("roofline") && text.contains("fake-peer"),
        "panels missing"
    );
}

#[test]
fn bad_input_exits_4_before_running() {
    let (dir, out) = run_once();
    let o = kiln(&["bench", "--device", "cpu", "--suite", "elementwise,nope"]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("unknown suite `nope`"), "{}", stderr(&o));
    let not_json = dir.path().join("not.json");
    std::fs::write(&not_json, "{ this is not json").unwrap();
    let o = kiln(&[
        "bench",
        "show",
        out.to_str().unwrap(),
        "--baseline",
        not_json.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("not JSON"), "{}", stderr(&o));
    let mut future = read_json(out);
    future["schema_version"] = json!(99);
    let fut = dir.path().join("future.json");
    write_json(&fut, &future);
    let o = kiln(&["bench", "--device", "cpu", "--baseline", fut.to_str().unwrap()]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("schema_version 99"), "{}", stderr(&o));
    let mut broken = read_json(out);
    broken["results"][0]["median_ms"] = json!("fast");
    let br = dir.path().join("broken.json");
    write_json(&br, &broken);
    let o = kiln(&["bench", "show", br.to_str().unwrap()]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("does not match the bench schema"),
        "{}",
        stderr(&o)
    );
    let o = kiln(&[
        "bench",
        "show",
        out.to_str().unwrap(),
        "--peers",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("expected a JSON list"), "{}", stderr(&o));
    let o = kiln(&["bench", "show", out.to_str().unwrap(), "--plot", "x.png"]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    // a baseline sharing nothing with the run gates nothing: refused
    let mut other = read_json(out);
    for x in other["results"].as_array_mut().unwrap() {
        x["size"] = json!("elsewhere");
    }
    let ot = dir.path().join("other.json");
    write_json(&ot, &other);
    let o = kiln(&[
        "bench",
        "show",
        out.to_str().unwrap(),
        "--baseline",
        ot.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("shares no (workload, size)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn kernels_md_is_generated_from_kernels_and_bench_json() {
    let (dir, out) = run_once();
    // a kernels document as `kiln kernels --json` writes it (one kernel), and a bench row
    // that names it
    let k = json!({
        "kiln_version": "0.1.0", "git_commit": "abc", "device": "cuda:0", "device_name": "Test GPU",
        "arch": "sm_90",
        "sm_limits": {"max_threads": 2048, "max_blocks": 32, "registers": 65536, "shared_bytes": 233472,
                      "reserved_shared_per_block": 1024, "multiprocessors": 132},
        "kernels": [{
            "symbol": "transpose_b32", "module": "transpose", "computes": "2-D transpose of 32-bit elements",
            "block": [32, 8, 1], "grid": "(ceil(cols/32), ceil(rows/32))", "registers": 22,
            "static_shared_bytes": 4224, "dynamic_shared_bytes": 0, "dynamic_shared_note": "",
            "local_bytes": 0, "const_bytes": 0, "max_threads_per_block": 1024, "binary_version": 90,
            "blocks_per_sm": 8, "active_warps_per_sm": 64, "occupancy": 1.0, "limited_by": "threads"
        }]
    });
    let kp = dir.path().join("kernels.json");
    write_json(&kp, &k);
    let mut b = read_json(out);
    for x in b["results"].as_array_mut().unwrap() {
        if x["workload"] == "transpose_f32" {
            x["kernels"] = json!(["transpose_b32"]);
        }
    }
    let bp = dir.path().join("bench-k.json");
    write_json(&bp, &b);
    let md = dir.path().join("kernels.md");
    let o = bench_report(&kp, &[&bp], md.to_str().unwrap());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.contains("### `transpose_b32` (transpose.cu)"), "{text}");
    // what it computes comes from kiln's kernel table, the registers from the JSON, and a
    // kernel the JSON lacks says so
    assert!(
        text.contains("2-D transpose of 32-bit elements through"),
        "{text}"
    );
    assert!(text.contains("- Resources: 22 registers a thread"), "{text}");
    assert!(text.contains("### `map_f32` (map.cu)"), "{text}");
    assert!(text.contains("not read on a GPU yet"), "{text}");
    assert!(text.contains("| transpose_f32 | 256x256 |"), "{text}");
    assert!(text.contains("Test GPU"), "{text}");
    // the row efficiency appears in the summary as a percentage of the floor
    assert!(text.contains("% (transpose_f32 256x256)"), "{text}");
    // two bench files: a kernel's rows come from the last one that launches it
    let mut b2 = b.clone();
    for x in b2["results"].as_array_mut().unwrap() {
        if x["workload"] == "transpose_f32" {
            x["size"] = json!("later-run");
        }
    }
    let bp2 = dir.path().join("bench-k2.json");
    write_json(&bp2, &b2);
    let o = bench_report(&kp, &[&bp, &bp2], "-");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("2 bench runs"), "{text}");
    assert!(text.contains("| transpose_f32 | later-run |"), "{text}");
    assert!(!text.contains("| transpose_f32 | 256x256 |"), "{text}");
    // not a kernels document
    let o = bench_report(out, &[&bp], "-");
    assert_eq!(code(&o), 4, "{}", stderr(&o));
}

#[test]
fn kernels_without_a_usable_gpu_exits_3_with_the_reason() {
    // A policy that admits no device behaves like a machine without a GPU, everywhere.
    let o = Command::new(bin())
        .args(["kernels"])
        .env("KILN_DEVICES", "none")
        .env_remove("KILN_CONFIG")
        .output()
        .unwrap();
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
    let o = kiln(&["kernels", "--device", "cpu"]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn kernels_on_a_gpu_lists_every_kernel() {
    // a GPU is probed from the driver: where one is present, `kiln kernels` must work
    if !kiln::testing::gpu_or_skip("kernels_on_a_gpu_lists_every_kernel") {
        return;
    }
    let o = kiln(&["kernels", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ks = v["kernels"].as_array().unwrap();
    assert!(ks.len() >= 27, "{} kernels", ks.len());
    for k in ks {
        let name = k["symbol"].as_str().unwrap();
        assert!(k["registers"].as_u64().unwrap() > 0, "{name}: no registers");
        let occ = k["occupancy"].as_f64().unwrap();
        assert!(occ > 0.0 && occ <= 1.0, "{name}: occupancy {occ}");
        let block = k["block"].as_array().expect("launch shape recorded");
        let threads: u64 = block.iter().map(|d| d.as_u64().unwrap()).product();
        // the kernel can be launched with the block kiln uses (the 3x3 register kernels are
        // 128-thread blocks under __launch_bounds__(128, ..), so the driver's limit is 128)
        let max = k["max_threads_per_block"].as_u64().unwrap();
        assert!(
            max >= threads && threads > 0,
            "{name}: block of {threads} > limit {max}"
        );
    }
}
