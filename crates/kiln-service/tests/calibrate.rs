//! `calibrate` jobs through the job service: a surface priced from known Heston parameters
//! submitted to the router (`app(state)`, no socket), stored, claimed and run by
//! `exec::run_batch` on a CPU runtime (what a `kiln worker` process does), the fit read back
//! through the API with the parameters recovered; bad requests are refused at submission
//! with a 400 naming the field, and nothing is queued.
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln::core::finance::heston::{heston_price, HestonParams};
use kiln::core::finance::OptionType;
use kiln::Runtime;
use kiln_service::api::AppState;
use kiln_service::config::ServiceConfig;
use kiln_service::exec::{run_batch, ExecOptions};
use kiln_service::protocol::{WorkItem, WorkOutcome};
use kiln_service::store::Outcome;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

async fn call(st: &Arc<AppState>, method: &str, uri: &str, body: Vec<u8>) -> (StatusCode, Value) {
    app_support::call(st, method, uri, Some("secret"), body).await
}

const TRUTH: HestonParams = HestonParams {
    kappa: 2.1,
    theta: 0.05,
    xi: 0.45,
    rho: -0.62,
    v0: 0.035,
};

/// 48 out-of-the-money quotes priced at [`TRUTH`], as request elements.
fn surface() -> Vec<Value> {
    let mut v = Vec::new();
    for t in [0.25, 0.5, 1.0, 2.0] {
        for j in 0..12 {
            let k = 70.0 + 6.0 * j as f64;
            let kind = if k < 100.0 {
                OptionType::Put
            } else {
                OptionType::Call
            };
            let p = heston_price(kind, 100.0, k, 0.02, 0.0, t, &TRUTH).unwrap();
            v.push(
                json!({"type": kind.name(), "price": p, "spot": 100.0, "strike": k,
                "maturity": t, "rate": 0.02}),
            );
        }
    }
    v
}

#[tokio::test]
async fn a_surface_is_fitted_and_the_parameters_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), ServiceConfig::default());
    let opts = ExecOptions {
        blob_dir: dir.path().to_path_buf(),
        inline_max_elements: 1 << 20,
        max_elements: 16 << 20,
    };
    let body = json!({"kind": "calibrate",
        "params": {"start": {"kappa": 1.0, "theta": 0.1, "xi": 0.5, "rho": -0.5, "v0": 0.1}},
        "inputs": {"quotes": surface()}})
    .to_string();
    let (s, b) = call(&st, "POST", "/v1/jobs", body.into_bytes()).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let id = b["id"].as_str().unwrap().to_string();
    let owner = "node/test";
    let jobs = st
        .store
        .claim(owner, false, None, 4, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    let item = WorkItem {
        id: jobs[0].id.clone(),
        attempt: jobs[0].attempt,
        task: jobs[0].task.clone(),
    };
    let (mut res, poisoned) = run_batch(&Runtime::cpu(), &opts, &[item]);
    assert!(!poisoned);
    let WorkOutcome::Ok { result, blobs } = res.remove(0).outcome else {
        panic!("the job failed")
    };
    let done = Outcome::Succeeded {
        result: result.to_string(),
        blobs,
    };
    assert!(st.store.finish(&id, owner, done).await.unwrap());
    let (s, job) = call(&st, "GET", &format!("/v1/jobs/{id}"), Vec::new()).await;
    assert_eq!(
        (s, job["state"].as_str()),
        (StatusCode::OK, Some("succeeded")),
        "{job}"
    );
    let r = &job["result"];
    for (name, want) in [
        ("kappa", TRUTH.kappa),
        ("theta", TRUTH.theta),
        ("xi", TRUTH.xi),
        ("rho", TRUTH.rho),
        ("v0", TRUTH.v0),
    ] {
        let got = r["params"][name].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 1e-6 * want.abs(),
            "{name}: {got} vs {want}: {r}"
        );
    }
    assert_eq!(
        (r["quoted"].as_str(), r["target"].as_str()),
        (Some("price"), Some("vol"))
    );
    assert_eq!(r["device"], "cpu");
    assert_eq!(r["feller"], true);
    assert_eq!(r["quotes"].as_array().map(Vec::len), Some(48));
    assert!(r["rmse_vol_points"].as_f64().unwrap() < 1e-6, "{r}");
}

#[tokio::test]
async fn bad_requests_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), ServiceConfig::default());
    let good = surface();
    let with = |i: usize, q: Value| {
        let mut v = good.clone();
        v[i] = q;
        json!({"quotes": v})
    };
    let q = |extra: Value| {
        let mut v = json!({"type": "put", "spot": 100, "strike": 90, "maturity": 1});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    let cases = [
        (
            json!({}),
            with(3, q(json!({"price": 1, "strike": 0}))),
            "inputs.quotes[3].strike = 0; it must be > 0",
        ),
        (
            json!({}),
            with(2, q(json!({"price": 1, "vol": 0.2}))),
            "inputs.quotes[2]: give price or vol, not both",
        ),
        (
            json!({}),
            with(2, q(json!({}))),
            "inputs.quotes[2]: price or vol is missing",
        ),
        (
            json!({}),
            with(5, q(json!({"vol": 0.2}))),
            "inputs.quotes[5]: every quote gives the same one",
        ),
        (
            json!({}),
            with(4, q(json!({"price": 1, "weight": -1}))),
            "inputs.quotes[4].weight = -1",
        ),
        (
            json!({}),
            with(4, q(json!({"price": 1, "iv": 1}))),
            "inputs.quotes[4]: unknown field `iv`",
        ),
        (
            json!({}),
            with(7, q(json!({"price": 95}))),
            "inputs.quotes[7]: price 95 has no implied volatility",
        ),
        (
            json!({"target": "iv"}),
            json!({"quotes": good}),
            "params.target = `iv`",
        ),
        (
            json!({"model": "sabr"}),
            json!({"quotes": good}),
            "params.model = `sabr`",
        ),
        (
            json!({"max_iterations": 0}),
            json!({"quotes": good}),
            "params.max_iterations = 0",
        ),
        (json!({"start": {"kappa": 1}}), json!({"quotes": good}), "params"),
        (
            json!({"start": {"kappa": 1, "theta": 0.1, "xi": -1, "rho": 0, "v0": 0.1}}),
            json!({"quotes": good}),
            "params.start",
        ),
        (json!({}), json!({"quotes": good[..4].to_vec()}), "at least 5"),
        (json!({}), json!({"quotes": []}), "inputs.quotes is empty"),
    ];
    for (params, inputs, needle) in cases {
        let body = json!({"kind": "calibrate", "params": params, "inputs": inputs}).to_string();
        let (s, b) = call(&st, "POST", "/v1/jobs", body.into_bytes()).await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_params")),
            "{needle}: {b}"
        );
        let m = b["error"]["message"].as_str().unwrap();
        assert!(m.contains(needle), "wanted `{needle}` in: {m}");
    }
    let (_, list) = call(&st, "GET", "/v1/jobs", Vec::new()).await;
    assert_eq!(list["jobs"].as_array().map_or(0, Vec::len), 0, "{list}");
}
