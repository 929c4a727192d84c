//! `risk` jobs through the job service: submitted to the router (`app(state)`, no socket),
//! stored, claimed and run by `exec::run_batch` on a CPU runtime (what a `kiln worker`
//! process does), the result read back through the API. A book of European options and
//! arithmetic Asians (no closed form: Monte Carlo) under a few scenarios must come back with
//! the bits of `Runtime::risk` on the same records and parameters, and VaR and ES the bits of
//! kiln-core's `loss_measures` on that P&L. Bad records, unknown params and a grid past
//! `limits.max_elements` are refused at submission, named, with nothing queued.
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln::core::finance::risk::loss_measures;
use kiln::core::finance::McParams;
use kiln::finance::risk::{position_record, scenario_records, RiskParams};
use kiln::finance::Method;
use kiln::Runtime;
use kiln_service::api::AppState;
use kiln_service::config::ServiceConfig;
use kiln_service::exec::{run_batch, ExecOptions};
use kiln_service::protocol::{WorkItem, WorkOutcome};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const OWNER: &str = "node/test";

async fn call(st: &Arc<AppState>, method: &str, uri: &str, body: Vec<u8>) -> (StatusCode, Value) {
    app_support::call(st, method, uri, Some("secret"), body).await
}

/// Eight positions on three underlyings: six Europeans and two arithmetic Asians.
fn book() -> Value {
    let mut b = Vec::new();
    for i in 0..8 {
        let x = f64::from(i);
        let underlying = ["A", "B", "C"][i as usize % 3];
        let kind = if i % 2 == 0 { "call" } else { "put" };
        let style = if i % 4 == 1 {
            "asian_arithmetic"
        } else {
            "european"
        };
        let fixings = if i % 4 == 1 { json!(12) } else { Value::Null };
        b.push(json!({"option_type": kind, "style": style, "fixings": fixings,
            "spot": 80.0 + 5.0 * x, "strike": 100.0, "rate": 0.03, "volatility": 0.2 + 0.02 * x,
            "maturity": 0.5 + 0.1 * x, "underlying": underlying, "quantity": 5.0 - x,
            "id": format!("p{i}")}));
    }
    json!(b)
}

/// `n` scenarios: A shocked relatively (spot and vol), B absolutely, every underlying's
/// rate, and C by the `*` default only.
fn scenarios(n: usize) -> Value {
    let mut s = Vec::new();
    for j in 0..n {
        let y = j as f64 / n as f64 - 0.5;
        let name = format!("s{j}");
        s.push(json!({"scenario": name, "underlying": "A", "spot_shift": 0.3 * y, "vol_shift": 0.05 * y}));
        s.push(json!({"scenario": name, "underlying": "B", "spot_shift": -8.0 * y, "spot_shift_kind": "absolute"}));
        s.push(json!({"scenario": name, "underlying": "*", "rate_shift": 0.01 * y * y}));
    }
    json!(s)
}

/// Submits `body`, runs what a worker claims as a worker would, stores the outcome and
/// reads the job back.
async fn submit_and_run(st: &Arc<AppState>, dir: &std::path::Path, body: &Value) -> Value {
    let (s, b) = call(st, "POST", "/v1/jobs", body.to_string().into_bytes()).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let id = b["id"].as_str().unwrap().to_string();
    let jobs = st
        .store
        .claim(OWNER, false, None, 4, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    let item = WorkItem {
        id: jobs[0].id.clone(),
        attempt: jobs[0].attempt,
        task: jobs[0].task.clone(),
    };
    let opts = ExecOptions {
        blob_dir: dir.to_path_buf(),
        inline_max_elements: 1 << 16,
        max_elements: 16 << 20,
    };
    let (mut res, poisoned) = run_batch(&Runtime::cpu(), &opts, &[item]);
    assert!(!poisoned);
    let WorkOutcome::Ok { result, blobs } = res.remove(0).outcome else {
        panic!("the job failed")
    };
    let done = kiln_service::store::Outcome::Succeeded {
        result: result.to_string(),
        blobs,
    };
    assert!(st.store.finish(&id, OWNER, done).await.unwrap());
    let (s, job) = call(st, "GET", &format!("/v1/jobs/{id}"), Vec::new()).await;
    assert_eq!(
        (s, job["state"].as_str()),
        (StatusCode::OK, Some("succeeded")),
        "{job}"
    );
    job["result"].clone()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[tokio::test]
async fn a_risk_job_comes_back_with_the_facades_pnl_and_measures() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), ServiceConfig::default());
    let levels = [0.5, 0.9, 0.99];
    let (paths, steps, seed) = (4096u64, 16u32, 7u64);
    let book = book();
    let scen = scenarios(9);
    let body = json!({"kind": "risk",
        "params": {"levels": levels, "paths": paths, "steps": steps, "seed": seed, "matrix": true},
        "inputs": {"book": book, "scenarios": scen}});
    let r = submit_and_run(&st, dir.path(), &body).await;
    // the facade on the same records and parameters
    let positions: Vec<_> = book
        .as_array()
        .unwrap()
        .iter()
        .map(|v| position_record(v.clone(), steps, true).unwrap())
        .collect();
    let set = scenario_records(scen.as_array().unwrap()).unwrap();
    let want = Runtime::cpu()
        .risk(
            &positions,
            &set,
            &RiskParams {
                method: Method::Analytic,
                mc: McParams {
                    paths,
                    steps,
                    seed,
                    ..McParams::default()
                },
                levels: levels.to_vec(),
                keep_matrix: true,
                ..RiskParams::default()
            },
        )
        .unwrap();
    let pnl = floats(&r["pnl"]);
    assert_eq!(pnl.len(), 9);
    assert_eq!(bits(&pnl), bits(&want.pnl));
    assert_eq!(bits(&floats(&r["base"])), bits(&want.base));
    assert_eq!(bits(&floats(&r["base_std_error"])), bits(&want.base_std_error));
    assert_eq!(
        r["valuation"],
        json!(["analytic", "mc", "analytic", "analytic", "analytic", "mc", "analytic", "analytic"])
    );
    // the Asians' P&L is Monte Carlo's: not zero, and their base values carry an error
    assert!(floats(&r["base_std_error"])[1] > 0.0);
    let m = loss_measures(&want.pnl, &levels).unwrap();
    assert_eq!(floats(&r["levels"]), levels);
    assert_eq!(
        bits(&floats(&r["var"])),
        bits(&m.iter().map(|x| x.var).collect::<Vec<_>>())
    );
    assert_eq!(
        bits(&floats(&r["es"])),
        bits(&m.iter().map(|x| x.es).collect::<Vec<_>>())
    );
    assert_eq!(r["tail"], json!(m.iter().map(|x| x.tail).collect::<Vec<_>>()));
    // VaR at 0.5 of 9 losses: the 5th smallest, exactly
    let mut loss: Vec<f64> = pnl.iter().map(|p| -p).collect();
    loss.sort_by(f64::total_cmp);
    assert_eq!(floats(&r["var"])[0], loss[4]);
    assert_eq!(r["matrix"]["shape"], json!([9, 8]));
    assert_eq!(
        bits(&floats(&r["matrix"]["data"])),
        bits(want.matrix.as_ref().unwrap())
    );
    assert_eq!(
        r["scenarios"],
        json!((0..9).map(|j| format!("s{j}")).collect::<Vec<_>>())
    );
    assert_eq!(
        (r["device"].as_str(), r["gpu_options"].as_u64()),
        (Some("cpu"), Some(0))
    );
}

/// Submits `body`; it must be a 400 `invalid_params` whose message passes `check`.
async fn refused(st: &Arc<AppState>, body: Value, check: impl Fn(&str) -> bool) {
    let (s, r) = call(st, "POST", "/v1/jobs", body.to_string().into_bytes()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
    assert_eq!(r["error"]["code"], "invalid_params", "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(check(msg), "{msg}");
}

#[tokio::test]
async fn bad_records_unknown_params_and_a_grid_too_large_are_refused_and_nothing_is_queued() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServiceConfig::default();
    // 8 positions x 9 scenarios = 72 revaluations; 71 allowed
    cfg.limits.max_elements = 71;
    let st = app_support::state(dir.path(), cfg);
    let job = |book: Value, scen: Value| json!({"kind": "risk", "inputs": {"book": book, "scenarios": scen}});
    let mut b = book();
    b[4]["quantity"] = json!("lots");
    b[6]["strike"] = json!(-1);
    refused(&st, job(b, scenarios(3)), |m| {
        m.starts_with("inputs.book[4]: quantity") && m.contains("\ninputs.book[6]: ") && m.contains("strike")
    })
    .await;
    let mut sc = scenarios(3);
    sc[2]["spot_shift_kind"] = json!("sideways");
    sc[3]["spot_shift"] = json!(-1.5);
    sc[7]["volatility"] = json!(0.1);
    refused(&st, job(book(), sc), |m| {
        m.starts_with("inputs.scenarios[2]: spot_shift_kind")
            && m.contains("\ninputs.scenarios[3]: spot_shift")
            && m.contains("\ninputs.scenarios[7]: unknown field `volatility`")
            && m.lines().count() == 3
    })
    .await;
    let mut body = job(book(), scenarios(3));
    body["params"] = json!({"paths": 1000, "control_variate": true});
    refused(&st, body, |m| {
        m.starts_with("params: unknown field `control_variate`")
    })
    .await;
    refused(&st, job(book(), scenarios(9)), |m| {
        m.starts_with(
            "inputs: 8 positions x 9 scenarios = 72 revaluations; the limit is 71 (limits.max_elements)",
        )
    })
    .await;
    let jobs = st
        .store
        .claim(OWNER, false, None, 4, Duration::from_secs(600))
        .await
        .unwrap();
    assert!(jobs.is_empty());
    // within the limit, the same records are taken
    let (s, r) = call(
        &st,
        "POST",
        "/v1/jobs",
        job(book(), scenarios(8)).to_string().into_bytes(),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{r}");
}
