//! A seeded fuzz of the API through the router (no socket, no workers): mutated valid job
//! bodies of every kind (users' kernels of every form included), bodies with one element of
//! a list of numbers poisoned (`null`, a string, a number past float32's range, ...), the
//! same as batches, random bytes, odd headers and paths. Every answer must be a 2xx or a
//! 4xx in the one error shape: no 5xx and no panic; a poisoned body is refused naming the
//! element; every accepted job must read back, and its stored task must be one a worker
//! reads as the task that was validated.
//! Deterministic (one seed), bounded (`KILN_FUZZ_CASES`, default 3,000).
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln_service::config::ServiceConfig;
use kiln_service::task::{BlobLookup, Task};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::path::PathBuf;

fn valid_bodies() -> Vec<Value> {
    let opt = json!({"option_type": "call", "style": "european", "spot": 100.0, "strike": 95.0,
        "rate": 0.02, "dividend": 0.0, "volatility": 0.2, "maturity": 1.0});
    vec![
        json!({"kind": "price", "inputs": {"options": [opt]}}),
        json!({"kind": "price", "params": {"method": "mc", "paths": 4096, "steps": 16, "seed": 1},
            "inputs": {"options": [opt, opt]}, "priority": 3, "queue_timeout_s": 5}),
        json!({"kind": "implied_vol", "inputs": {"quotes": [
            {"type": "call", "price": 10.45, "spot": 100.0, "strike": 100.0, "maturity": 1.0, "rate": 0.05},
            {"option_type": "put", "price": 5.0, "spot": 100.0, "strike": 95.0, "maturity": 0.5, "dividend": 0.01}]}}),
        json!({"kind": "risk", "params": {"levels": [0.9, 0.99], "paths": 2048, "steps": 8, "matrix": true},
            "inputs": {"book": [
                {"option_type": "call", "spot": 100.0, "strike": 95.0, "rate": 0.02, "volatility": 0.2,
                 "maturity": 1.0, "underlying": "A", "quantity": 2.0, "id": "c"},
                {"option_type": "put", "style": "asian_arithmetic", "fixings": 4, "spot": 50.0,
                 "strike": 55.0, "rate": 0.02, "volatility": 0.3, "maturity": 0.5, "quantity": -1.0}],
            "scenarios": [
                {"scenario": "down", "underlying": "A", "spot_shift": -0.1, "vol_shift": 0.05},
                {"scenario": "down", "underlying": "*", "spot_shift": -2.0, "spot_shift_kind": "absolute"},
                {"scenario": "up", "rate_shift": 0.001}]}}),
        json!({"kind": "elementwise", "params": {"op": "scale_shift", "a": 2.0, "b": 1.0},
            "inputs": {"x": {"shape": [2, 2], "data": [1.0, 2.0, 3.0, 4.0]}}}),
        json!({"kind": "elementwise", "params": {"op": "clamp", "lo": 0.0, "hi": 1.0},
            "inputs": {"x": {"data": [0.5, 2.0, -1.0]}}}),
        json!({"kind": "filter2d", "params": {"kernel": "cross4", "mode": "reflect"},
            "inputs": {"image": {"shape": [4, 4], "data": vec![0.5f32; 16]}}}),
        json!({"kind": "gemm", "params": {"m": 2, "n": 2, "k": 2},
            "inputs": {"a": {"shape": [2, 2], "data": [1.0, 0.0, 0.0, 1.0]},
                       "b": {"shape": [2, 2], "data": [1.0, 2.0, 3.0, 4.0]}}, "deadline_s": 30}),
        json!({"kind": "user_kernel", "params": {"type": "elementwise", "in_params": "T x, raw T r, float32 a",
                "out_params": "T z, int32 n", "operation": "z = a * x + r[i % 2]; n = (int)x;", "name": "k"},
            "inputs": {"x": {"shape": [2, 2], "data": [1.0, 2.0, 3.0, 4.0]}, "r": {"data": [0.5, 1.5]},
                       "a": {"scalar": 2, "dtype": "float32"}}}),
        json!({"kind": "user_kernel", "params": {"type": "reduction", "in_params": "T x, T w", "out_params": "T y",
                "map_expr": "x * w", "reduce_expr": "fmax(a, b)", "post_map_expr": "y = a",
                "identity": "-INFINITY", "axis": [0], "keepdims": true},
            "inputs": {"x": {"shape": [3, 2], "data": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}, "w": 0.5}}),
        json!({"kind": "user_kernel", "params": {"type": "raw", "name": "saxpy", "grid": [1, 1], "block": [32],
                "source": "extern \"C\" __global__ void saxpy(const float* x, float* y, float a, int n) { int i = threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }",
                "args": [{"input": "x"}, {"output": "y", "from": "y0"}, {"scalar": 2.0}, {"scalar": 2}]},
            "inputs": {"x": {"data": [1.0, 2.0]}, "y0": {"data": [3.0, 4.0]}}}),
    ]
}

/// A value of some other JSON type than `v`, or an extreme one of its own.
fn mutant(r: &mut StdRng, v: &Value) -> Value {
    match r.random_range(0..12) {
        0 => Value::Null,
        1 => json!(-1),
        2 => json!(1e39),
        3 => json!(-0.0),
        4 => json!(u64::MAX),
        5 => json!("x".repeat(r.random_range(0..300))),
        6 => json!([]),
        7 => json!({}),
        8 => json!(true),
        9 => json!([null, 1, "a"]),
        10 => match v {
            Value::Number(n) => json!(n.as_f64().unwrap_or(0.0) * 1e6),
            _ => json!(0),
        },
        _ => json!(i64::MIN),
    }
}

/// JSON pointers of the non-empty lists of numbers in `v`.
fn number_lists(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_number) => out.push(at),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                number_lists(x, format!("{at}/{i}"), out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                number_lists(x, format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
}

/// Poison one element of one list of numbers in `v` with a value no list of numbers may
/// hold; returns the element's path as an error names it (`inputs.x.data[2]`).
fn poison(r: &mut StdRng, v: &mut Value) -> Option<String> {
    let mut lists = Vec::new();
    number_lists(v, String::new(), &mut lists);
    let at = lists.get(r.random_range(0..lists.len().max(1)))?.clone();
    let list = v.pointer_mut(&at)?.as_array_mut()?;
    let i = r.random_range(0..list.len());
    list[i] = match r.random_range(0..7) {
        0 => Value::Null,
        1 => json!("1.5"),
        2 => json!(1e39),
        3 => json!(-3.5e38),
        4 => json!(true),
        5 => json!([1.0]),
        _ => json!({"x": 1}),
    };
    Some(format!("{}[{i}]", at.trim_start_matches('/').replace('/', ".")))
}

struct NoBlobs;

impl BlobLookup for NoBlobs {
    fn blob(&self, _: &str) -> Option<(PathBuf, String)> {
        None
    }
}

/// An accepted body's task survives its stored form: validated again here, written as the
/// store keeps it and read back as a worker reads it, it is the same task.
fn round_trips(body: &Value) {
    let v = kiln_service::task::validate(
        body["kind"].as_str().unwrap(),
        &body["params"],
        &body["inputs"],
        1 << 24,
        false,
        true,
        &NoBlobs,
    )
    .unwrap_or_else(|e| panic!("an accepted body validates again: {e}\n{body}"));
    let text = serde_json::to_string(&v.task).unwrap();
    let back: Task = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(back, v.task, "the stored task changed: {text}\nbody: {body}");
}

/// Replace, drop or add one field somewhere in `v` (depth-first, random path).
fn mutate(r: &mut StdRng, v: &mut Value) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            let keys: Vec<String> = m.keys().cloned().collect();
            let k = &keys[r.random_range(0..keys.len())];
            match r.random_range(0..6) {
                0 => {
                    m.remove(k);
                }
                1 => {
                    m.insert(format!("{k}_extra"), json!(1));
                }
                2 | 3 => {
                    let new = mutant(r, &m[k]);
                    m.insert(k.clone(), new);
                }
                _ => mutate(r, m.get_mut(k).unwrap()),
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let i = r.random_range(0..a.len());
            match r.random_range(0..4) {
                0 => {
                    a.remove(i);
                }
                1 => a.push(mutant(r, &a[i].clone())),
                _ => mutate(r, &mut a[i]),
            }
        }
        other => *other = mutant(r, other),
    }
}

#[tokio::test]
async fn no_request_gets_a_5xx_or_a_panic() {
    let cases: usize = std::env::var("KILN_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServiceConfig::default();
    cfg.limits.max_queue = 1_000_000;
    cfg.limits.max_in_flight_per_token = 1_000_000;
    // user kernels on, so their bodies reach validation (off, they are all 403s)
    cfg.allow_user_kernels = true;
    let st = app_support::state(dir.path(), cfg);
    let mut r = StdRng::seed_from_u64(0x6b69_6c6e);
    let bodies = valid_bodies();
    let paths = [
        "/v1/jobs",
        "/v1/jobs?wait=0",
        "/v1/jobs?wait=-1",
        "/v1/jobs?wait=nan",
        "/v1/jobs?limit=0",
        "/v1/jobs?state=bogus",
        "/v1/jobs/j_0000",
        "/v1/jobs/..%2f..%2fetc",
        "/v1/blobs",
        "/v1/blobs/b_x",
        "/v1/blobs?format=npy",
        "/v1/blobs?format=exe",
        "/v1/jobs?cursor=zz",
        "/v1/openapi.json",
        "/%00",
        "/v1/jobs/%ff",
    ];
    let methods = ["GET", "POST", "DELETE", "PUT", "PATCH"];
    let (mut accepted, mut client_errors, mut poisoned) = (0usize, 0usize, 0usize);
    for case in 0..cases {
        // the element a poisoned body must be refused for, as the error names it
        let mut named: Option<String> = None;
        let (method, path, body): (&str, String, Vec<u8>) = match r.random_range(0..12) {
            // a valid body with one element of one of its lists of numbers poisoned, alone
            // or as job 1 of a batch
            10 | 11 => {
                // (the price bodies hold no list of numbers: another body is drawn)
                let (b, at) = loop {
                    let mut b = bodies[r.random_range(0..bodies.len())].clone();
                    if let Some(at) = poison(&mut r, &mut b) {
                        break (b, at);
                    }
                };
                poisoned += 1;
                if r.random_bool(0.5) {
                    named = Some(at);
                    ("POST", "/v1/jobs".into(), b.to_string().into_bytes())
                } else {
                    named = Some(format!("jobs[1]: {at}"));
                    let batch = json!({"jobs": [bodies[0].clone(), b, bodies[2].clone()]});
                    ("POST", "/v1/jobs:batch".into(), batch.to_string().into_bytes())
                }
            }
            // a batch of mutated valid bodies
            8 | 9 if r.random_bool(0.3) => {
                let jobs: Vec<Value> = (0..r.random_range(1..4))
                    .map(|_| {
                        let mut b = bodies[r.random_range(0..bodies.len())].clone();
                        if r.random_bool(0.5) {
                            mutate(&mut r, &mut b);
                        }
                        b
                    })
                    .collect();
                (
                    "POST",
                    "/v1/jobs:batch".into(),
                    json!({ "jobs": jobs }).to_string().into_bytes(),
                )
            }
            // mutated valid job bodies: most of the cases
            0..=6 => {
                let mut b = bodies[r.random_range(0..bodies.len())].clone();
                for _ in 0..r.random_range(1..4) {
                    mutate(&mut r, &mut b);
                }
                ("POST", "/v1/jobs".into(), b.to_string().into_bytes())
            }
            // random bytes
            7 => {
                let n = r.random_range(0..512);
                (
                    "POST",
                    "/v1/jobs".into(),
                    (0..n).map(|_| r.random::<u8>()).collect(),
                )
            }
            // odd methods and paths
            _ => (
                methods[r.random_range(0..methods.len())],
                paths[r.random_range(0..paths.len())].into(),
                if r.random_bool(0.5) {
                    b"{}".to_vec()
                } else {
                    Vec::new()
                },
            ),
        };
        let token = if r.random_range(0..20) == 0 {
            Some("wrong")
        } else {
            Some("secret")
        };
        let (status, answer) = app_support::call(&st, method, &path, token, body.clone()).await;
        assert!(
            !status.is_server_error(),
            "case {case}: {method} {path} -> {status} {answer}\nbody: {}",
            String::from_utf8_lossy(&body)
        );
        if let Some(at) = &named {
            // Only the token may stop it first; else a 400 that names the element.
            let msg = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(
                status == StatusCode::UNAUTHORIZED || status == StatusCode::BAD_REQUEST,
                "case {case}: a poisoned body got {status}: {answer}\nbody: {}",
                String::from_utf8_lossy(&body)
            );
            assert!(
                status == StatusCode::UNAUTHORIZED || msg.starts_with(at.as_str()),
                "case {case}: the error does not name `{at}`: {msg}"
            );
        }
        if status.is_client_error() {
            client_errors += 1;
            let code = answer["error"]["code"].as_str();
            assert!(
                code.is_some_and(|c| !c.is_empty()),
                "case {case}: {method} {path} -> {status} without the error shape: {answer}"
            );
        } else if status == StatusCode::ACCEPTED && method == "POST" && path == "/v1/jobs:batch" {
            let sent: Value = serde_json::from_slice(&body).unwrap();
            let jobs = answer["jobs"].as_array().unwrap();
            assert_eq!(
                jobs.len(),
                sent["jobs"].as_array().unwrap().len(),
                "case {case}: one answer a job"
            );
            accepted += jobs.len();
            for b in sent["jobs"].as_array().unwrap() {
                round_trips(b);
            }
        } else if status == StatusCode::ACCEPTED && method == "POST" && path.starts_with("/v1/jobs") {
            round_trips(&serde_json::from_slice(&body).unwrap());
            accepted += 1;
            let id = answer["id"].as_str().unwrap();
            let (s, back) =
                app_support::call(&st, "GET", &format!("/v1/jobs/{id}"), Some("secret"), vec![]).await;
            assert_eq!(
                s,
                StatusCode::OK,
                "case {case}: an accepted job reads back: {back}"
            );
        }
    }
    // Every stored task is one a worker reads.
    let claimed = st
        .store
        .claim(
            "fuzz/0",
            true,
            None,
            1_000_000,
            std::time::Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert_eq!(claimed.len(), accepted, "every accepted job is queued");
    for j in &claimed {
        if let Err(e) = serde_json::from_str::<Task>(&j.task) {
            panic!("a stored task a worker cannot read: {e}: {}", j.task);
        }
    }
    eprintln!(
        "fuzz: {cases} requests ({poisoned} poisoned), {accepted} jobs accepted, \
         {client_errors} refused with a 4xx, none 5xx"
    );
    assert!(
        accepted > 0 && client_errors > cases / 4,
        "the fuzz reached both outcomes"
    );
}
