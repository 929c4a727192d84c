//! `implied_vol` jobs through the job service: submitted to the router (`app(state)`, no
//! socket), stored, claimed from the store and run by `exec::run_batch` on a CPU runtime
//! (what a `kiln worker` process does), the result stored and read back through the API.
//! Every volatility must be the bits of kiln-core's `implied_volatility_book` on the same
//! quotes (through the stored task's JSON and the result's), and every quote without one
//! must carry its reason; a bad element is refused at submission, named, and nothing is
//! queued.
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln::core::finance::OptionType;
use kiln::finance::implied::{implied_volatility_book, sample, Quote};
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

/// The quote as a request element (`type` or `option_type`, alternately).
fn element(i: usize, q: &Quote) -> Value {
    let kind = if q.kind == OptionType::Put { "put" } else { "call" };
    let key = if i % 2 == 0 { "type" } else { "option_type" };
    let mut v = json!({"price": q.price, "spot": q.spot, "strike": q.strike,
        "maturity": q.maturity, "rate": q.rate, "dividend": q.dividend});
    v[key] = json!(kind);
    v
}

#[tokio::test]
async fn a_book_comes_back_with_the_cpu_solvers_bits_and_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), ServiceConfig::default());
    let rt = Runtime::cpu();
    let opts = ExecOptions {
        blob_dir: dir.path().to_path_buf(),
        inline_max_elements: 1 << 20,
        max_elements: 16 << 20,
    };
    // JSON has no NaN or infinity: the finite edge cases and a random book
    let (mut quotes, _) = sample::random_book(3_000, 11);
    quotes.extend(sample::edge_quotes().into_iter().filter(|q| {
        [q.price, q.spot, q.strike, q.maturity, q.rate, q.dividend]
            .iter()
            .all(|x| x.is_finite())
            && q.spot > 0.0
            && q.strike > 0.0
            && q.maturity > 0.0
    }));
    let elements: Vec<Value> = quotes.iter().enumerate().map(|(i, q)| element(i, q)).collect();
    let body = json!({"kind": "implied_vol", "inputs": {"quotes": elements}}).to_string();
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
    let (mut res, poisoned) = run_batch(&rt, &opts, &[item]);
    assert!(!poisoned);
    let WorkOutcome::Ok { result, blobs } = res.remove(0).outcome else {
        panic!("the job failed")
    };
    assert!(st
        .store
        .finish(
            &id,
            owner,
            Outcome::Succeeded {
                result: result.to_string(),
                blobs,
            },
        )
        .await
        .unwrap());
    let (s, job) = call(&st, "GET", &format!("/v1/jobs/{id}"), Vec::new()).await;
    assert_eq!(
        (s, job["state"].as_str()),
        (StatusCode::OK, Some("succeeded")),
        "{job}"
    );
    let r = &job["result"];
    let want = implied_volatility_book(&quotes);
    assert_eq!(r["quotes"].as_u64(), Some(quotes.len() as u64));
    assert_eq!(r["device"], "cpu");
    let mut solved = 0;
    let mut reasons = std::collections::BTreeSet::new();
    for (i, w) in want.iter().enumerate() {
        match w {
            Ok(v) => {
                solved += 1;
                assert_eq!(
                    r["vols"][i].as_f64().map(f64::to_bits),
                    Some(v.to_bits()),
                    "quote {i}"
                );
                assert_eq!(
                    (r["reasons"][i].as_str(), &r["details"][i]),
                    (Some(""), &Value::Null)
                );
            }
            Err(e) => {
                assert_eq!(r["vols"][i], Value::Null, "quote {i}");
                assert_eq!(r["reasons"][i].as_str(), Some(e.code()), "quote {i}");
                assert_eq!(r["details"][i].as_str(), Some(e.to_string().as_str()));
                reasons.insert(e.code());
            }
        }
    }
    assert_eq!(r["solved"].as_u64(), Some(solved));
    // what JSON can carry reaches these reasons (not_finite cannot be sent)
    for code in [
        "not_positive",
        "out_of_range",
        "below_intrinsic",
        "at_intrinsic",
        "above_upper_bound",
    ] {
        assert!(reasons.contains(code), "{code} not reached: {reasons:?}");
    }
}

#[tokio::test]
async fn a_bad_quote_is_refused_at_submission_by_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let st = app_support::state(dir.path(), ServiceConfig::default());
    let good =
        json!({"type": "call", "price": 10.45, "spot": 100, "strike": 100, "maturity": 1, "rate": 0.05});
    let cases = [
        (
            json!({"quotes": [good, good, {"type": "call", "price": 1, "spot": 1, "strike": null, "maturity": 1}]}),
            "inputs.quotes[2].strike is missing",
        ),
        (
            json!({"quotes": [good, {"type": "call", "price": [1], "spot": 1, "strike": 1, "maturity": 1}]}),
            "inputs.quotes[1].price: a list is not a number",
        ),
        (
            json!({"quotes": [good, {"type": "forward", "price": 1, "spot": 1, "strike": 1, "maturity": 1}]}),
            "inputs.quotes[1].type",
        ),
        (
            json!({"quotes": [{"type": "put", "price": 1, "spot": -3, "strike": 1, "maturity": 1}]}),
            "inputs.quotes[0].spot = -3; it must be > 0",
        ),
        (json!({"quotes": []}), "inputs.quotes is empty"),
    ];
    for (inputs, needle) in cases {
        let body = json!({"kind": "implied_vol", "inputs": inputs}).to_string();
        let (s, b) = call(&st, "POST", "/v1/jobs", body.into_bytes()).await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_params")),
            "{b}"
        );
        let m = b["error"]["message"].as_str().unwrap();
        assert!(m.contains(needle), "wanted `{needle}` in: {m}");
    }
    let (_, list) = call(&st, "GET", "/v1/jobs", Vec::new()).await;
    assert_eq!(list["jobs"].as_array().map_or(0, Vec::len), 0, "{list}");
}
