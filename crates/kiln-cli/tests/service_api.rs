//! The job API end to end on the real `kiln` binary (loopback): auth, validation errors,
//! limits, idempotency, waiting, listing, cancelling, blobs, metrics, OpenAPI, and a bounded
//! fuzz of request bodies.
#![allow(clippy::unwrap_used)]

mod service_support;

use serde_json::{json, Value};
use service_support::*;
use std::io::Write;

const TOKEN: &str = "test-token-1";
/// The token of fault-injection jobs: `fault` needs the server's flag and `kinds=fault`.
const DRILL: &str = "drill-token-1";

fn tokens_file(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("tokens");
    let mut f = std::fs::File::create(&p).unwrap();
    let hash = {
        use std::process::Command;
        // The file holds the hash, as in production; compute it with kiln's own rule
        // (sha256 of the token) through coreutils to stay independent of the code under test.
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s '{TOKEN}' | sha256sum"))
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    writeln!(f, "# test tokens").unwrap();
    writeln!(f, "main sha256:{hash}").unwrap();
    writeln!(f, "pricer price-only kinds=price max_in_flight=1").unwrap();
    writeln!(f, "drill {DRILL} kinds=fault").unwrap();
    p
}

fn server(extra: &[&str]) -> (Server, tempfile::TempDir) {
    let d = data_dir();
    let tf = tokens_file(d.path());
    let mut args = vec!["--tokens-file", tf.to_str().unwrap(), "--cpu-workers", "1"];
    args.extend_from_slice(extra);
    let s = start(&d.path().join("data"), &args);
    (s, d)
}

#[test]
fn auth_validation_limits_and_the_job_life() {
    let (s, _d) = server(&[
        "--allow-fault-injection",
        "--max-queue",
        "3",
        "--max-body-bytes",
        "65536",
    ]);
    let t = Some(TOKEN);

    // 401 without or with a wrong token; health probes are open.
    let r = s.post_json("/v1/jobs", None, &price_job(100.0, 1));
    assert_eq!(
        (r.status, r.code().as_str()),
        (401, "unauthorized"),
        "{}",
        r.text()
    );
    let r = s.post_json("/v1/jobs", Some("nope"), &price_job(100.0, 1));
    assert_eq!(r.status, 401);
    assert_eq!(s.get("/v1/jobs", Some("test-token-")).unwrap().status, 401);
    assert_eq!(s.get("/healthz", None).unwrap().status, 200);

    // 400s with clear messages.
    let r = request(
        s.addr,
        "POST",
        "/v1/jobs",
        t,
        &[],
        Some(b"{\"kind\": \"price\", "),
    )
    .unwrap();
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "malformed_request"),
        "{}",
        r.text()
    );
    let r = s.post_json("/v1/jobs", t, &json!({"kind": "teleport", "params": {}}));
    assert_eq!((r.status, r.code().as_str()), (400, "unknown_kind"));
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("teleport"));
    let mut bad = price_job(100.0, 1);
    bad["inputs"]["options"][0]["volatility"] = json!(-0.2);
    let r = s.post_json("/v1/jobs", t, &bad);
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid_params"),
        "{}",
        r.text()
    );
    assert!(r.text().contains("options[0]"), "{}", r.text());
    let r = s.post_json("/v1/jobs", t, &json!({"kind": "price", "params": {"method": "mc", "paths": 1}, "inputs": {"options": [option(100.0)]}}));
    assert_eq!(r.status, 400, "{}", r.text());
    let r = s.post_json(
        "/v1/jobs",
        t,
        &json!({"kind": "filter2d", "params": {"kernel": "gaussian:1.0"}, "inputs": {"image": {"shape": [2, 3], "data": [1.0, 2.0]}}}),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid_params"),
        "{}",
        r.text()
    );

    // 403: a token limited to pricing.
    let r = s.post_json(
        "/v1/jobs",
        Some("price-only"),
        &json!({"kind": "elementwise", "params": {"op": "relu"}, "inputs": {"x": {"data": [1.0]}}}),
    );
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"));

    // 413 for a body over the limit (declared, and streamed without a length).
    let big = json!({"kind": "elementwise", "params": {"op": "relu"}, "inputs": {"x": {"data": vec![1.5f32; 40_000]}}});
    let r = s.post_json("/v1/jobs", t, &big);
    assert_eq!(
        (r.status, r.code().as_str()),
        (413, "payload_too_large"),
        "{}",
        r.text()
    );

    // A job's life: submit (202), wait for the result, check it against Black-Scholes.
    let r = s.post_json("/v1/jobs", t, &price_job(95.0, 3));
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    let j = s.wait_job(&id, t, 30);
    assert_eq!(j["state"], "succeeded", "{j}");
    for (i, p) in j["result"]["prices"].as_array().unwrap().iter().enumerate() {
        let want = bs_call(95.0 + i as f64);
        assert!(
            (p["price"].as_f64().unwrap() - want).abs() < 1e-5,
            "{p} vs {want}"
        );
    }
    // ?wait= on submit answers with the finished job.
    let r = s.post_json("/v1/jobs?wait=20", t, &json!({"kind": "elementwise", "params": {"op": "scale_shift", "a": 2.0, "b": 1.0}, "inputs": {"x": {"shape": [2, 2], "data": [1.0, 2.0, 3.0, 4.5]}}}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["data"], json!([3.0, 5.0, 7.0, 10.0]));
    assert_eq!(r.json()["result"]["shape"], json!([2, 2]));

    // Idempotency: the same key and body give the first job; another body under it is 422.
    let key = [("Idempotency-Key", "order-42")];
    let body = price_job(101.0, 1).to_string();
    let a = request(s.addr, "POST", "/v1/jobs", t, &key, Some(body.as_bytes())).unwrap();
    let b = request(s.addr, "POST", "/v1/jobs", t, &key, Some(body.as_bytes())).unwrap();
    assert!(a.status == 202 || a.status == 200);
    assert_eq!(a.json()["id"], b.json()["id"]);
    let other = price_job(102.0, 1).to_string();
    let c = request(s.addr, "POST", "/v1/jobs", t, &key, Some(other.as_bytes())).unwrap();
    assert_eq!((c.status, c.code().as_str()), (422, "idempotency_mismatch"));
    let done = s.wait_job(a.json()["id"].as_str().unwrap(), t, 30);
    assert_eq!(done["state"], "succeeded");

    // 429 with Retry-After when the queue is full: three sleeping jobs (the
    // drill token's) fill it.
    let sleeper = json!({"kind": "fault", "params": {"mode": "sleep", "sleep_ms": 20000}});
    let mut sleepers = Vec::new();
    for _ in 0..3 {
        let r = s.post_json("/v1/jobs", Some(DRILL), &sleeper);
        assert_eq!(r.status, 202, "{}", r.text());
        sleepers.push(r.json()["id"].as_str().unwrap().to_string());
    }
    let r = s.post_json("/v1/jobs", t, &price_job(100.0, 1));
    assert_eq!((r.status, r.code().as_str()), (429, "queue_full"), "{}", r.text());
    assert!(r.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);

    // Listing (newest first, paged) and cancelling.
    let r = s.get("/v1/jobs?limit=2", Some(DRILL)).unwrap();
    let page = r.json();
    assert_eq!(page["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(page["jobs"][0]["id"].as_str().unwrap(), sleepers[2]);
    let next = page["next_cursor"].as_str().unwrap();
    let r2 = s
        .get(&format!("/v1/jobs?limit=2&cursor={next}"), Some(DRILL))
        .unwrap()
        .json();
    assert_eq!(r2["jobs"][0]["id"].as_str().unwrap(), sleepers[0]);
    assert_eq!(s.get("/v1/jobs?state=bogus", t).unwrap().status, 400);
    for id in &sleepers {
        let r = request(
            s.addr,
            "DELETE",
            &format!("/v1/jobs/{id}"),
            Some(DRILL),
            &[],
            None,
        )
        .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["state"], "cancelled");
    }
    // The queue has room again; another token cannot see the jobs.
    let r = s.post_json("/v1/jobs", t, &price_job(100.0, 1));
    assert_eq!(r.status, 202, "{}", r.text());
    let id2 = r.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        s.get(&format!("/v1/jobs/{id2}"), Some("price-only"))
            .unwrap()
            .status,
        404
    );
    assert_eq!(s.get("/v1/jobs/j_does_not_exist", t).unwrap().status, 404);

    // Per-token in-flight limit: `pricer` may have one job in flight.
    let slow = json!({"kind": "price", "params": {"method": "mc", "paths": 4000000, "steps": 64}, "inputs": {"options": [option(100.0)]}});
    let a = s.post_json("/v1/jobs", Some("price-only"), &slow);
    assert_eq!(a.status, 202, "{}", a.text());
    let b = s.post_json("/v1/jobs", Some("price-only"), &slow);
    assert_eq!(
        (b.status, b.code().as_str()),
        (429, "too_many_in_flight"),
        "{}",
        b.text()
    );
    assert!(b.header("retry-after").is_some());
    let aid = a.json()["id"].as_str().unwrap().to_string();
    let _ = request(
        s.addr,
        "DELETE",
        &format!("/v1/jobs/{aid}"),
        Some("price-only"),
        &[],
        None,
    )
    .unwrap();

    // Metrics and the OpenAPI document.
    let m = s.get("/metrics", None).unwrap().text();
    for fam in [
        "kiln_service_jobs_submitted",
        "kiln_service_worker_restarts",
        "kiln_service_batch_size",
        "kiln_jobs",
        "kiln_job_latency_seconds",
        "kiln_service_queue_depth",
    ] {
        assert!(m.contains(fam), "{fam} missing from /metrics");
    }
    assert!(
        m.contains("reason=\"too_many_requests\"") || m.contains("reason=\"queue_full\""),
        "{m}"
    );
    assert!(m.trim_end().ends_with("# EOF"));
    assert_eq!(m.matches("# EOF").count(), 1);
    assert_eq!(s.get("/v1/openapi.json", None).unwrap().status, 401);
    let doc = s.get("/v1/openapi.json", t).unwrap().json();
    assert!(doc["paths"]["/v1/jobs"]["post"].is_object(), "{doc}");
    assert!(doc["components"]["schemas"]["JobView"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}

#[test]
fn blobs_upload_checksum_and_feed_jobs() {
    let (s, _d) = server(&[]);
    let t = Some(TOKEN);
    // An NPY of 3x4 float32, written by hand (format 1.0).
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
    let mut h = header.to_string();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(h.len() as u16).to_le_bytes());
    npy.extend_from_slice(h.as_bytes());
    let vals: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
    for v in &vals {
        npy.extend_from_slice(&v.to_le_bytes());
    }
    let r = request(s.addr, "POST", "/v1/blobs?format=npy", t, &[], Some(&npy)).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let blob = r.json();
    assert_eq!(blob["size"], npy.len());
    let id = blob["id"].as_str().unwrap();
    let back = s.get(&format!("/v1/blobs/{id}"), t).unwrap();
    assert_eq!(back.body, npy);
    assert_eq!(back.header("x-kiln-sha256"), blob["sha256"].as_str());
    // The blob as a job input.
    let r = s.post_json(
        "/v1/jobs?wait=20",
        t,
        &json!({"kind": "elementwise", "params": {"op": "relu"}, "inputs": {"x": {"blob": id}}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let got: Vec<f64> = r.json()["result"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let want: Vec<f64> = vals.iter().map(|v| v.max(0.0) as f64).collect();
    assert_eq!(got, want);
    assert_eq!(r.json()["result"]["shape"], json!([3, 4]));
    // Bad format, unknown blob, over-size blob.
    assert_eq!(
        request(s.addr, "POST", "/v1/blobs?format=exe", t, &[], Some(b"x"))
            .unwrap()
            .status,
        400
    );
    let r = s.post_json(
        "/v1/jobs",
        t,
        &json!({"kind": "elementwise", "params": {"op": "relu"}, "inputs": {"x": {"blob": "b_nope"}}}),
    );
    assert_eq!(r.status, 400);
    assert_eq!(s.get("/v1/blobs/b_nope", t).unwrap().status, 404);
}

/// A small deterministic generator (xorshift64*), so a failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn random_json(r: &mut Rng, depth: u32) -> Value {
    match r.below(if depth > 2 { 5 } else { 7 }) {
        0 => Value::Null,
        1 => json!(r.below(2) == 0),
        2 => json!((r.next() as i64) >> r.below(60)),
        3 => json!(f64::from_bits(r.next() >> 2)),
        4 => json!(
            [
                "price",
                "gemm",
                "filter2d",
                "filter3d",
                "elementwise",
                "fault",
                "",
                "x"
            ][r.below(8)]
        ),
        5 => Value::Array((0..r.below(4)).map(|_| random_json(r, depth + 1)).collect()),
        _ => {
            let keys = [
                "kind", "params", "inputs", "options", "method", "paths", "shape", "data", "blob", "op", "m",
                "n", "k", "a", "b", "kernel", "image", "x",
            ];
            Value::Object(
                (0..r.below(5))
                    .map(|_| (keys[r.below(keys.len())].to_string(), random_json(r, depth + 1)))
                    .collect(),
            )
        }
    }
}

#[test]
fn fuzzed_bodies_never_break_the_server() {
    let (s, _d) = server(&["--max-body-bytes", "20000"]);
    let t = Some(TOKEN);
    let seeds = [
        price_job(100.0, 2).to_string(),
        json!({"kind": "gemm", "params": {"m": 2, "n": 2, "k": 2}, "inputs": {"a": {"data": [1, 2, 3, 4]}, "b": {"data": [1, 0, 0, 1]}}}).to_string(),
        json!({"kind": "filter2d", "params": {"kernel": "box:3", "mode": "nearest"}, "inputs": {"image": {"shape": [3, 3], "data": [1, 2, 3, 4, 5, 6, 7, 8, 9]}}}).to_string(),
        json!({"kind": "filter3d", "params": {"kernel": {"shape": [1, 1, 1], "weights": [2.0]}}, "inputs": {"volume": {"shape": [1, 2, 2], "data": [1, 2, 3, 4]}}}).to_string(),
    ];
    let mut rng = Rng(0x6b69_6c6e_5f66_757a);
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..300 {
        let body: Vec<u8> = match i % 3 {
            0 => random_json(&mut rng, 0).to_string().into_bytes(),
            1 => {
                let mut b = seeds[rng.below(seeds.len())].clone().into_bytes();
                for _ in 0..1 + rng.below(4) {
                    let p = rng.below(b.len());
                    match rng.below(3) {
                        0 => b[p] = (rng.next() & 0xff) as u8,
                        1 => {
                            b.remove(p);
                        }
                        _ => b.insert(p, b"{}[],:\"0e-9"[rng.below(11)]),
                    }
                }
                b
            }
            _ => (0..rng.below(300)).map(|_| (rng.next() & 0xff) as u8).collect(),
        };
        let r = request(s.addr, "POST", "/v1/jobs", t, &[], Some(&body)).expect("the server answers");
        assert!(
            matches!(r.status, 200 | 202 | 400 | 403 | 413 | 422 | 429),
            "status {} for body {:?}: {}",
            r.status,
            String::from_utf8_lossy(&body),
            r.text()
        );
        if r.status >= 400 {
            assert!(!r.code().is_empty(), "error without a code: {}", r.text());
        }
        *statuses.entry(r.status).or_insert(0) += 1;
    }
    eprintln!("fuzz statuses: {statuses:?}");
    assert_eq!(s.get("/healthz", None).unwrap().status, 200);
    assert_eq!(s.get("/readyz", None).unwrap().status, 200);
    let r = s.post_json("/v1/jobs?wait=20", t, &price_job(100.0, 1));
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn a_public_bind_without_tokens_is_refused() {
    let d = data_dir();
    let out = std::process::Command::new(service_support::kiln_bin())
        .args(["--device", "cpu", "serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(d.path())
        .env_remove("KILN_TOKENS_FILE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("without tokens"),
        "{out:?}"
    );
}

/// `kiln submit --batch FILE.jsonl`: one job a line, sent through the batch endpoint in
/// requests of `--batch-size`; one line a job (or `--json`) in the file's order; a bad line
/// is named by its number, before or by the server.
#[test]
fn submit_batch_sends_a_jsonl_file() {
    let (s, d) = server(&[]);
    let kiln = |args: &[&str]| {
        std::process::Command::new(service_support::kiln_bin())
            .args(args)
            .env("KILN_SERVER", format!("http://{}", s.addr))
            .env("KILN_TOKEN", TOKEN)
            .output()
            .unwrap()
    };
    let file = d.path().join("jobs.jsonl");
    let lines: Vec<String> = (0..5)
        .map(|i| price_job(100.0 + i as f64, 1).to_string())
        .collect();
    std::fs::write(
        &file,
        format!("{}\n\n{}\n", lines[..2].join("\n"), lines[2..].join("\n")),
    )
    .unwrap();
    let out = kiln(&["submit", "--batch", file.to_str().unwrap(), "--batch-size", "2"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let ids: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(ids.len(), 5, "{text}");
    assert!(
        text.lines().all(|l| l.ends_with(" price queued")
            || l.ends_with(" price running")
            || l.ends_with(" price succeeded")),
        "{text}"
    );
    for id in &ids {
        let j = s.wait_job(id, Some(TOKEN), 30);
        assert_eq!(j["state"], "succeeded", "{j}");
    }
    // --json: one document, the jobs in the file's order; the same key twice sends nothing new
    let out = kiln(&[
        "submit",
        "--batch",
        file.to_str().unwrap(),
        "--json",
        "--idempotency-key",
        "f1",
    ]);
    assert!(out.status.success(), "{out:?}");
    let first: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(first["jobs"].as_array().unwrap().len(), 5);
    let out = kiln(&[
        "submit",
        "--batch",
        file.to_str().unwrap(),
        "--json",
        "--idempotency-key",
        "f1",
    ]);
    let again: Value = serde_json::from_slice(&out.stdout).unwrap();
    let idlist = |v: &Value| {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(idlist(&first), idlist(&again));
    // a job the server refuses: its line, and nothing of its request stored
    let bad =
        json!({"kind": "elementwise", "params": {"op": "relu"}, "inputs": {"x": {"data": [1.0, null]}}});
    std::fs::write(&file, format!("{}\n\n{}\n{}\n", lines[0], lines[1], bad)).unwrap();
    let out = kiln(&["submit", "--batch", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("jobs.jsonl line 4: inputs.x.data[1]: null is not a number"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "the request was refused whole: {out:?}");
    // a line that is not a job, found before anything is sent
    std::fs::write(&file, format!("{}\n{{\"kind\": \n", lines[0])).unwrap();
    let out = kiln(&["submit", "--batch", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("jobs.jsonl line 2: not JSON"),
        "{out:?}"
    );
}

#[test]
fn the_client_commands_submit_list_wait_and_cancel() {
    let (s, _d) = server(&[]);
    let kiln = |args: &[&str]| {
        std::process::Command::new(service_support::kiln_bin())
            .args(args)
            .env("KILN_SERVER", format!("http://{}", s.addr))
            .env("KILN_TOKEN", TOKEN)
            .output()
            .unwrap()
    };
    let inputs = json!({"options": [option(105.0)]}).to_string();
    let out = kiln(&[
        "submit",
        "--kind",
        "price",
        "--params",
        "{\"method\":\"analytic\"}",
        "--inputs",
        &inputs,
        "--wait",
        "20",
        "--json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["state"], "succeeded");
    assert!((job["result"]["prices"][0]["price"].as_f64().unwrap() - bs_call(105.0)).abs() < 1e-5);
    let id = job["id"].as_str().unwrap();
    let out = kiln(&["jobs", "list", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["jobs"][0]["id"], id);
    let out = kiln(&["jobs", "wait", id, "--timeout", "5"]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("succeeded"),
        "{out:?}"
    );
    let out = kiln(&["jobs", "cancel", id, "--json"]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["state"], "succeeded", "a finished job stays finished");
    // Errors: a bad kind exits 4 with the server's message; a missing job exits 1.
    let out = kiln(&["submit", "--kind", "nope"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown_kind"),
        "{out:?}"
    );
    let out = kiln(&["jobs", "get", "j_missing"]);
    assert_eq!(out.status.code(), Some(1));
    // A wrong token is refused.
    let out = std::process::Command::new(service_support::kiln_bin())
        .args([
            "jobs",
            "list",
            "--server",
            &format!("http://{}", s.addr),
            "--token",
            "wrong",
        ])
        .env_remove("KILN_TOKEN")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"), "{out:?}");
}
