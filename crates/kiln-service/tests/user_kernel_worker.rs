//! `user_kernel` jobs end to end in this process as the server: the supervisor starts real,
//! sandboxed worker processes (this test binary itself, as `kiln worker` would be: it runs
//! the worker loop when started with the supervisor's `worker` arguments), claims the jobs,
//! and stores their results, read back through the router.
//!
//! - On any machine: element-wise and reduction kernels run by a CPU worker equal kiln-expr
//!   called directly, bit for bit.
//! - With a GPU (built with `--features gpu-tests`; skipped, printing why, without one, and
//!   failing instead under KILN_REQUIRE_GPU=1): a raw kernel runs on the GPU worker; a raw
//!   kernel that stores through an illegal address fails its job with `cuda_sticky` without
//!   a retry, its worker is replaced, and the server and the next jobs go on (the same
//!   kernel runs on the fresh worker); expression kernels run on the GPU with the CPU
//!   path's bits, a preamble included.
//!
//! A test binary without the libtest harness (`harness = false`): `main` runs the cases in
//! order and panics on a failure.
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln_service::api::AppState;
use kiln_service::config::{GpuSelection, ServiceConfig};
use kiln_service::supervisor::Shared;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "worker") {
        std::process::exit(app_support::run_worker(&args));
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(expression_kernels_on_a_cpu_worker());
    eprintln!("test expression_kernels_on_a_cpu_worker ... ok");
    if cfg!(feature = "gpu-tests") {
        if kiln::testing::gpu_or_skip("user_kernel_worker::gpu") {
            rt.block_on(raw_kernels_and_faults_on_a_gpu_worker());
            eprintln!("test raw_kernels_and_faults_on_a_gpu_worker ... ok");
        }
    } else {
        eprintln!(
            "test raw_kernels_and_faults_on_a_gpu_worker ... ignored (needs a GPU: cargo test -p kiln-service --features gpu-tests)"
        );
    }
}

struct Server {
    st: Arc<AppState>,
    shared: Arc<Shared>,
    slots: Vec<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

/// A server over worker slots of `devices`, its workers this binary.
fn start(devices: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServiceConfig {
        allow_user_kernels: true,
        data_dir: dir.path().to_path_buf(),
        ..ServiceConfig::default()
    };
    cfg.workers.program = Some(std::env::current_exe().unwrap());
    cfg.workers.gpus = GpuSelection::None;
    cfg.workers.max_attempts = 3;
    cfg.results.inline_max_elements = 1 << 20;
    let blob_dir = dir.path().join("blobs");
    std::fs::create_dir_all(&blob_dir).unwrap();
    let st = app_support::state_with_slots(dir.path(), cfg, devices);
    let shared = st.supervisor.clone().unwrap();
    let slots = shared.start();
    Server {
        st,
        shared,
        slots,
        _dir: dir,
    }
}

impl Server {
    async fn stop(self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.st.hub.wake.notify_waiters();
        for s in self.slots {
            let _ = tokio::time::timeout(Duration::from_secs(10), s).await;
        }
    }

    async fn submit(&self, params: Value, inputs: Value) -> String {
        let body = json!({"kind": "user_kernel", "params": params, "inputs": inputs});
        app_support::submit_job(&self.st, &body).await
    }

    /// The job once finished (waiting up to two minutes: a first compile takes seconds).
    async fn wait(&self, id: &str) -> Value {
        app_support::wait_job(&self.st, id, 4).await
    }

    async fn workers(&self) -> Value {
        app_support::call(&self.st, "GET", "/v1/workers", Some("secret"), vec![])
            .await
            .1
    }
}

fn f32s(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn same_bits(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "{what}: element {i}: {g} vs {w}");
    }
}

fn close(what: &str, got: &[f32], want: &[f32], rel: f32) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= rel * w.abs(), "{what}: element {i}: {g} vs {w}");
    }
}

const AXPY: (&str, &str, &str) = ("float32 x, float32 y, float32 a", "float32 z", "z = a * x + y");

/// The element-wise job's inputs and the CPU evaluator's result for them.
fn axpy_case(n: usize, seed: u64) -> (Value, Vec<f32>) {
    use kiln::expr::{Arg, ElementwiseKernel, HostArray, Scalar};
    let x = kiln::testing::random_f32(n, -3.0, 3.0, seed);
    let y = kiln::testing::random_f32(n, -3.0, 3.0, seed + 1);
    let k = ElementwiseKernel::new(AXPY.0, AXPY.1, AXPY.2, "axpy").unwrap();
    let want = k
        .call_alloc(
            &[
                Arg::Array(HostArray::from_slice(&[n], &x)),
                Arg::Array(HostArray::from_slice(&[n], &y)),
                Arg::Scalar(Scalar::F64(1.3)),
            ],
            None,
        )
        .unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    (json!({"x": {"data": x}, "y": {"data": y}, "a": 1.3}), want)
}

fn axpy_params() -> Value {
    json!({"type": "elementwise", "in_params": AXPY.0, "out_params": AXPY.1, "operation": AXPY.2, "name": "axpy"})
}

fn l2_params() -> Value {
    json!({"type": "reduction", "in_params": "T x", "out_params": "T y", "map_expr": "x * x",
        "reduce_expr": "a + b", "post_map_expr": "y = sqrt(a)", "identity": "0", "name": "l2", "axis": -1})
}

fn l2_want(m: &[f32], shape: &[usize]) -> Vec<f32> {
    use kiln::expr::{Arg, Axis, HostArray, ReductionKernel};
    let k = ReductionKernel::new(
        "T x",
        "T y",
        "x * x",
        "a + b",
        "y = sqrt(a)",
        Some("0"),
        "l2",
        None,
    )
    .unwrap();
    k.call_alloc(
        &[Arg::Array(HostArray::from_slice(shape, m))],
        &Axis::One(-1),
        false,
    )
    .unwrap()[0]
        .to_vec::<f32>()
        .unwrap()
}

async fn expression_kernels_on_a_cpu_worker() {
    let s = start(&["cpu"]);
    let (inputs, want) = axpy_case(10_007, 11);
    let ew = s.submit(axpy_params(), inputs).await;
    let m = kiln::testing::random_f32(33 * 65, -2.0, 2.0, 12);
    let red = s
        .submit(l2_params(), json!({"x": {"shape": [33, 65], "data": m}}))
        .await;
    let j = s.wait(&ew).await;
    assert_eq!(j["state"], "succeeded", "{j}");
    assert_eq!(j["result"]["device"], "cpu");
    same_bits(
        "axpy on a CPU worker",
        &f32s(&j["result"]["outputs"]["z"]["data"]),
        &want,
    );
    let j = s.wait(&red).await;
    assert_eq!(j["state"], "succeeded", "{j}");
    same_bits(
        "l2 on a CPU worker",
        &f32s(&j["result"]["outputs"]["y"]["data"]),
        &l2_want(&m, &[33, 65]),
    );
    s.stop().await;
}

const SAXPY: &str = r#"extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}"#;

const WILD: &str =
    r#"extern "C" __global__ void wild(float* y) { y[((long long)1 << 40) + threadIdx.x] = 1.0f; }"#;

fn saxpy_job(n: usize) -> (Value, Value, Vec<f32>) {
    let x = kiln::testing::random_f32(n, -1.0, 1.0, 21);
    let y0 = kiln::testing::random_f32(n, -1.0, 1.0, 22);
    // a raw kernel compiles with NVRTC's defaults, which contract `a * x[i] + y[i]` into one
    // fused multiply-add: the reference rounds once as well
    let want: Vec<f32> = x.iter().zip(&y0).map(|(x, y)| 2.5f32.mul_add(*x, *y)).collect();
    let params = json!({"type": "raw", "source": SAXPY, "name": "saxpy", "grid": [n.div_ceil(256)], "block": [256],
        "args": [{"input": "x"}, {"output": "y", "from": "y0"}, {"scalar": 2.5}, {"scalar": n}]});
    (params, json!({"x": {"data": x}, "y0": {"data": y0}}), want)
}

async fn raw_kernels_and_faults_on_a_gpu_worker() {
    // one GPU worker only, so every job, expression kernels included, runs on the GPU
    let s = start(&["cuda:0"]);
    let (p, i, want) = saxpy_job(5001);
    let first = s.submit(p.clone(), i.clone()).await;
    let j = s.wait(&first).await;
    assert_eq!(j["state"], "succeeded", "{j}");
    assert_ne!(j["result"]["device"], "cpu", "{j}");
    same_bits("saxpy", &f32s(&j["result"]["outputs"]["y"]["data"]), &want);

    // the fault: the job fails once, not retried; the GPU worker is replaced
    let wild = json!({"type": "raw", "source": WILD, "name": "wild", "grid": [1], "block": [32],
        "args": [{"output": "y", "shape": [32]}]});
    let bad = s.submit(wild, json!({})).await;
    // jobs behind it, expression kernels on the GPU among them
    let after = s.submit(p, i).await;
    let (inputs, ew_want) = axpy_case(100_003, 31);
    let ew = s.submit(axpy_params(), inputs).await;
    let m = kiln::testing::random_f32(129 * 257, -2.0, 2.0, 32);
    let red = s
        .submit(l2_params(), json!({"x": {"shape": [129, 257], "data": m}}))
        .await;
    let pre = s
        .submit(
            json!({"type": "elementwise", "in_params": "float32 x", "out_params": "float32 z",
                "operation": "z = twice(x) + 1", "preamble": "__device__ float twice(float v) { return v + v; }"}),
            json!({"x": {"data": [1.0, 2.5, -4.0]}}),
        )
        .await;

    let j = s.wait(&bad).await;
    assert_eq!(j["state"], "failed", "{j}");
    assert_eq!(j["error"]["code"], "cuda_sticky", "{j}");
    assert_eq!(j["attempts"], 1, "a faulting kernel is not retried: {j}");
    let j = s.wait(&after).await;
    assert_eq!(
        j["state"], "succeeded",
        "the next job runs on the fresh worker: {j}"
    );
    same_bits(
        "saxpy after the fault",
        &f32s(&j["result"]["outputs"]["y"]["data"]),
        &want,
    );
    let w = s.workers().await;
    let gpu = w
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["device"] == "cuda:0")
        .unwrap();
    assert!(gpu["restarts"].as_u64().unwrap() >= 1, "{w}");
    assert!(gpu["last_exit"].as_str().unwrap().contains("sticky"), "{w}");

    let j = s.wait(&ew).await;
    assert_eq!(j["state"], "succeeded", "{j}");
    same_bits("axpy", &f32s(&j["result"]["outputs"]["z"]["data"]), &ew_want);
    let j = s.wait(&red).await;
    assert_eq!(j["state"], "succeeded", "{j}");
    // the GPU sums each row as a tree over 256 threads, the CPU in order: equal to a few
    // f32 roundings of the sum, not bit for bit
    close(
        "l2 on the GPU",
        &f32s(&j["result"]["outputs"]["y"]["data"]),
        &l2_want(&m, &[129, 257]),
        1e-5,
    );
    let j = s.wait(&pre).await;
    assert_eq!(j["state"], "succeeded", "{j}");
    assert_ne!(j["result"]["device"], "cpu", "a preamble runs on the GPU: {j}");
    assert_eq!(f32s(&j["result"]["outputs"]["z"]["data"]), [3.0, 6.0, -7.0]);
    // the server is still here
    let (st, _) = app_support::call(&s.st, "GET", "/healthz", None, vec![]).await;
    assert_eq!(st, StatusCode::OK);
    s.stop().await;
}
