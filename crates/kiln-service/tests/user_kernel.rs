//! `user_kernel` jobs through the router (`app(state)`, no socket): refused with 403
//! `forbidden` naming `allow_user_kernels` while it is off, for every form and before any
//! validation; with it on, element-wise and reduction jobs stored, claimed and run by
//! `exec::run_batch` on a CPU runtime (what a CPU `kiln worker` does with a batch), their
//! results read back through the API equal to kiln-expr called directly and to values
//! computed by hand; bad kernels and inputs refused with 400s naming what is wrong; a raw
//! kernel on a CPU worker failing its job with a clear error; a raw kernel refused at
//! submission by a server with no GPU worker.
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln::expr::{Arg, Axis, ElementwiseKernel, HostArray, ReductionKernel, Scalar};
use kiln::Runtime;
use kiln_service::api::AppState;
use kiln_service::config::{ServiceConfig, TokenConfig};
use kiln_service::exec::{run_batch, ExecOptions};
use kiln_service::protocol::{WorkItem, WorkOutcome};
use kiln_service::store::Outcome;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

fn on() -> ServiceConfig {
    ServiceConfig {
        allow_user_kernels: true,
        ..ServiceConfig::default()
    }
}

async fn call(st: &Arc<AppState>, method: &str, uri: &str, body: Value) -> (StatusCode, Value) {
    app_support::call(st, method, uri, Some("secret"), body.to_string().into_bytes()).await
}

async fn submit(st: &Arc<AppState>, params: Value, inputs: Value) -> (StatusCode, Value) {
    call(
        st,
        "POST",
        "/v1/jobs",
        json!({"kind": "user_kernel", "params": params, "inputs": inputs}),
    )
    .await
}

fn opts(dir: &std::path::Path, inline: usize) -> ExecOptions {
    ExecOptions {
        blob_dir: dir.to_path_buf(),
        inline_max_elements: inline,
        max_elements: 1 << 24,
    }
}

/// Claims every queued job (GPU-only ones too) and runs it as a CPU worker would, storing
/// each outcome as the supervisor does (blobs given to the job's token; errors not retried).
async fn run_queued(st: &Arc<AppState>, opts: &ExecOptions) {
    let rt = Runtime::cpu();
    let owner = "node/test";
    loop {
        let jobs = st
            .store
            .claim(owner, true, None, 1, Duration::from_secs(600))
            .await
            .unwrap();
        if jobs.is_empty() {
            return;
        }
        for j in jobs {
            let item = WorkItem {
                id: j.id.clone(),
                attempt: j.attempt,
                task: j.task.clone(),
            };
            let (mut res, poisoned) = run_batch(&rt, opts, &[item]);
            assert!(!poisoned, "a CPU worker is never poisoned");
            let outcome = match res.remove(0).outcome {
                WorkOutcome::Ok { result, mut blobs } => {
                    for b in &mut blobs {
                        b.principal = j.principal.clone();
                    }
                    Outcome::Succeeded {
                        result: result.to_string(),
                        blobs,
                    }
                }
                WorkOutcome::Err {
                    code,
                    message,
                    retry,
                    sticky,
                } => {
                    assert!(!retry && !sticky, "{code}: {message}");
                    Outcome::Failed { code, message }
                }
            };
            assert!(st.store.finish(&j.id, owner, outcome).await.unwrap());
        }
    }
}

async fn finished(st: &Arc<AppState>, id: &str) -> Value {
    let (s, b) = call(st, "GET", &format!("/v1/jobs/{id}"), Value::Null).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b
}

fn f32s(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn same_bits(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "element {i}: {g} vs {w}");
    }
}

fn elementwise() -> Value {
    json!({"type": "elementwise", "in_params": "float32 x, float32 y", "out_params": "float32 z",
        "operation": "z = x + y", "name": "add"})
}

fn reduction() -> Value {
    json!({"type": "reduction", "in_params": "T x", "out_params": "T y", "map_expr": "x * x",
        "reduce_expr": "a + b", "post_map_expr": "y = sqrt(a)", "identity": "0", "name": "l2norm", "axis": 1})
}

const SAXPY: &str = r#"extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}"#;

fn raw() -> Value {
    json!({"type": "raw", "source": SAXPY, "name": "saxpy", "grid": [1], "block": [256],
        "args": [{"input": "x"}, {"output": "y", "shape": [3]}, {"scalar": 2.0}, {"scalar": 3}]})
}

#[tokio::test]
async fn off_every_form_is_forbidden_naming_the_setting_before_validation() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), ServiceConfig::default());
    for params in [
        elementwise(),
        reduction(),
        raw(),
        json!({"type": "nonsense"}),
        Value::Null,
    ] {
        // inputs that validation would refuse: the 403 comes first
        let (s, b) = submit(&st, params.clone(), json!({"bogus": true})).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{params}: {b}");
        assert_eq!(b["error"]["code"], "forbidden", "{b}");
        let m = b["error"]["message"].as_str().unwrap();
        assert!(
            m.contains("allow_user_kernels") && m.contains("KILN_ALLOW_USER_KERNELS=1"),
            "{m}"
        );
    }
    // listed among the kinds an unknown one is told about
    let (s, b) = call(&st, "POST", "/v1/jobs", json!({"kind": "usr_kernel"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        b["error"]["message"].as_str().unwrap().contains("user_kernel"),
        "{b}"
    );
}

#[tokio::test]
async fn on_a_tokens_kinds_still_apply() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = vec![
        TokenConfig {
            name: "desk".into(),
            token: Some("secret".into()),
            kinds: Some(vec!["price".into()]),
            ..Default::default()
        },
        TokenConfig {
            name: "lab".into(),
            token: Some("lab-secret".into()),
            kinds: Some(vec!["user_kernel".into()]),
            ..Default::default()
        },
    ];
    let st = app_support::state_with_tokens(dir.path(), on(), &tokens);
    let (s, b) = submit(&st, elementwise(), json!({"bogus": 1})).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    assert!(b["error"]["message"]
        .as_str()
        .unwrap()
        .contains("may not submit `user_kernel`"));
    let body = json!({"kind": "user_kernel", "params": elementwise(),
        "inputs": {"x": {"data": [1.0]}, "y": {"data": [2.0]}}});
    let (s, b) = app_support::call(
        &st,
        "POST",
        "/v1/jobs",
        Some("lab-secret"),
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
}

#[tokio::test]
async fn on_expression_kernels_run_on_the_cpu_as_kiln_expr_computes_them() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), on());
    // element-wise with broadcasting and a scalar of a placeholder type
    let x: Vec<f32> = (0..6).map(|i| i as f32 * 0.1 - 0.2).collect();
    let y = vec![1.5f32, -2.25, 3.0];
    let params = json!({"type": "elementwise", "in_params": "T x, T y, T a", "out_params": "T z, T w",
        "operation": "z = a * x + y; w = x > 0 ? sqrt(x) : -x;", "name": "axpy"});
    let (s, b) = submit(
        &st,
        params,
        json!({"x": {"shape": [2, 3], "data": x}, "y": {"data": y}, "a": 0.7}),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let ew_id = b["id"].as_str().unwrap().to_string();
    // a reduction over axis 1, and one over every axis with a typed scalar
    let m: Vec<f32> = (0..20).map(|i| (i as f32 - 7.0) / 3.0).collect();
    let (s, b) = submit(&st, reduction(), json!({"x": {"shape": [4, 5], "data": m}})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let red_id = b["id"].as_str().unwrap().to_string();
    let wsum = json!({"type": "reduction", "in_params": "float32 x, float32 k", "out_params": "float64 s",
        "map_expr": "x * k", "reduce_expr": "a + b", "post_map_expr": "s = a", "reduce_type": "float64"});
    let (s, b) = submit(
        &st,
        wsum,
        json!({"x": {"shape": [4, 5], "data": m}, "k": {"scalar": 0.5, "dtype": "float32"}}),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let sum_id = b["id"].as_str().unwrap().to_string();

    run_queued(&st, &opts(dir.path(), 1 << 16)).await;

    let j = finished(&st, &ew_id).await;
    assert_eq!(j["state"], "succeeded", "{j}");
    let out = &j["result"]["outputs"];
    assert_eq!(out["z"]["shape"], json!([2, 3]));
    assert_eq!(out["z"]["dtype"], "float32");
    assert_eq!(j["result"]["device"], "cpu", "{j}");
    let k = ElementwiseKernel::new(
        "T x, T y, T a",
        "T z, T w",
        "z = a * x + y; w = x > 0 ? sqrt(x) : -x;",
        "axpy",
    )
    .unwrap();
    let direct = k
        .call_alloc(
            &[
                Arg::Array(HostArray::from_slice(&[2, 3], &x)),
                Arg::Array(HostArray::from_slice(&[3], &y)),
                Arg::Scalar(Scalar::F64(0.7)),
            ],
            None,
        )
        .unwrap();
    same_bits(&f32s(&out["z"]["data"]), &direct[0].to_vec::<f32>().unwrap());
    same_bits(&f32s(&out["w"]["data"]), &direct[1].to_vec::<f32>().unwrap());
    // NumPy's values: the float64 scalar 0.7 converted to float32 first (T is float32)
    let a = 0.7f64 as f32;
    let by_hand: Vec<f32> = (0..6).map(|i| a * x[i] + y[i % 3]).collect();
    same_bits(&f32s(&out["z"]["data"]), &by_hand);
    assert_eq!(f32s(&out["w"]["data"])[5], x[5].sqrt());

    let j = finished(&st, &red_id).await;
    assert_eq!(j["state"], "succeeded", "{j}");
    let r = &j["result"]["outputs"]["y"];
    assert_eq!(r["shape"], json!([4]));
    let k = ReductionKernel::new(
        "T x",
        "T y",
        "x * x",
        "a + b",
        "y = sqrt(a)",
        Some("0"),
        "l2norm",
        None,
    )
    .unwrap();
    let direct = k
        .call_alloc(
            &[Arg::Array(HostArray::from_slice(&[4, 5], &m))],
            &Axis::One(1),
            false,
        )
        .unwrap();
    same_bits(&f32s(&r["data"]), &direct[0].to_vec::<f32>().unwrap());
    for (row, got) in f32s(&r["data"]).iter().enumerate() {
        let by_hand = m[row * 5..row * 5 + 5].iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!(
            (got - by_hand).abs() <= 1e-6 * by_hand.max(1.0),
            "row {row}: {got} vs {by_hand}"
        );
    }

    let j = finished(&st, &sum_id).await;
    let s = &j["result"]["outputs"]["s"];
    assert_eq!(
        (s["dtype"].as_str(), &s["shape"]),
        (Some("float64"), &json!([])),
        "{j}"
    );
    let want: f64 = m.iter().map(|&v| f64::from(v * 0.5)).sum();
    assert!((s["data"][0].as_f64().unwrap() - want).abs() < 1e-12, "{j}");
}

#[tokio::test]
async fn large_outputs_come_back_as_npy_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), on());
    let params = json!({"type": "elementwise", "in_params": "float32 x", "out_params": "int32 n, float32 h",
        "operation": "n = (int)(x * 10); h = x / 2;", "name": "quant"});
    let x: Vec<f32> = (0..100).map(|i| i as f32 / 7.0).collect();
    let (s, b) = submit(&st, params, json!({"x": {"data": x}})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let id = b["id"].as_str().unwrap().to_string();
    run_queued(&st, &opts(dir.path(), 10)).await;
    let j = finished(&st, &id).await;
    assert_eq!(j["state"], "succeeded", "{j}");
    for (name, descr) in [("n", "<i4"), ("h", "<f4")] {
        let o = &j["result"]["outputs"][name];
        let blob = o["blob"].as_str().unwrap_or_else(|| panic!("{j}"));
        assert_eq!(o["bytes"].as_u64().unwrap(), 128 + 400, "{o}");
        let (s, _) =
            app_support::call(&st, "GET", &format!("/v1/blobs/{blob}"), Some("secret"), vec![]).await;
        assert_eq!(s, StatusCode::OK, "the job's token reads its result blob");
        let bytes = std::fs::read(dir.path().join(format!("{blob}.npy"))).unwrap();
        let header = String::from_utf8_lossy(&bytes[..128]).to_string();
        assert!(
            header.contains(&format!("'descr': '{descr}'")) && header.contains("'shape': (100,)"),
            "{header}"
        );
        if name == "n" {
            let v: Vec<i32> = bytes[128..]
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            assert_eq!(v[99], (x[99] * 10.0) as i32);
        }
    }
}

#[tokio::test]
async fn bad_kernels_and_inputs_are_400s_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = on();
    cfg.limits.max_elements = 100;
    let st = app_support::state(dir.path(), cfg);
    let ok = json!({"x": {"data": [1.0, 2.0, 3.0]}, "y": {"data": [4.0, 5.0, 6.0]}});
    let with_op = |op: &str| {
        let mut p = elementwise();
        p["operation"] = json!(op);
        p
    };
    let cases: Vec<(Value, Value, Vec<&str>)> = vec![
        (with_op("z = x +"), ok.clone(), vec!["params.operation"]),
        (with_op("z = hypotenuse(x, y)"), ok.clone(), vec!["hypotenuse"]),
        (
            with_op("while (1) z = x;"),
            ok.clone(),
            vec!["params.operation", "while"],
        ),
        (
            elementwise(),
            json!({"x": {"data": [1.0]}}),
            vec!["inputs.y is missing"],
        ),
        (
            elementwise(),
            json!({"x": {"data": [1.0]}, "y": {"data": [1.0]}, "q": 1}),
            vec!["inputs.q", "no input parameter"],
        ),
        (
            elementwise(),
            json!({"x": {"data": [1.0, 2.0]}, "y": {"data": [1.0, 2.0, 3.0]}}),
            vec!["broadcast"],
        ),
        (
            elementwise(),
            json!({"x": {"data": vec![1.0; 40]}, "y": {"data": vec![1.0; 40]}}),
            vec!["120 elements", "limits.max_elements"],
        ),
        (
            reduction(),
            json!({"x": {"shape": [2, 2], "data": [1.0, 2.0, 3.0, 4.0]}, "y": 1}),
            vec!["inputs.y", "output parameter"],
        ),
        (
            {
                let mut r = raw();
                r["source"] = json!(format!("#include \"/etc/passwd\"\n{SAXPY}"));
                r
            },
            json!({"x": {"data": [1.0, 2.0, 3.0]}}),
            vec!["#include"],
        ),
    ];
    for (params, inputs, needles) in cases {
        let (s, b) = submit(&st, params.clone(), inputs).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{params}: {b}");
        assert_eq!(b["error"]["code"], "invalid_params", "{b}");
        let m = b["error"]["message"].as_str().unwrap();
        for n in needles {
            assert!(m.contains(n), "wanted `{n}` in: {m}");
        }
    }
}

#[tokio::test]
async fn a_raw_kernel_on_a_cpu_worker_fails_its_job_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), on());
    let (s, b) = submit(&st, raw(), json!({"x": {"data": [1.0, 2.0, 3.0]}})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let id = b["id"].as_str().unwrap().to_string();
    // a CPU slot does not claim it (GPU-only)...
    let none = st
        .store
        .claim("node/cpu", false, None, 1, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(none.is_empty(), "a CPU slot claimed a raw kernel");
    // ...and where a CPU runtime gets it anyway, the job fails with the reason, not a panic
    run_queued(&st, &opts(dir.path(), 1 << 16)).await;
    let j = finished(&st, &id).await;
    assert_eq!(j["state"], "failed", "{j}");
    assert_eq!(j["attempts"], 1, "not retried: {j}");
    assert_eq!(j["error"]["code"], "no_device", "{j}");
    assert_eq!(
        j["error"]["message"],
        "raw CUDA kernels need a GPU; this worker runs on the CPU"
    );
}

#[tokio::test]
async fn a_server_without_gpu_workers_refuses_gpu_only_kernels_at_submission() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state_with_slots(dir.path(), on(), &["cpu"]);
    let (s, b) = submit(&st, raw(), json!({"x": {"data": [1.0, 2.0, 3.0]}})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    let m = b["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("needs a GPU worker") && m.contains("workers.gpus"),
        "{m}"
    );
    // an expression kernel runs anywhere
    let (s, b) = submit(
        &st,
        elementwise(),
        json!({"x": {"data": [1.0]}, "y": {"data": [2.0]}}),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    // with a GPU slot the raw kernel is accepted (and waits for it)
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state_with_slots(dir.path(), on(), &["cuda:0", "cpu"]);
    let (s, b) = submit(&st, raw(), json!({"x": {"data": [1.0, 2.0, 3.0]}})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
}
