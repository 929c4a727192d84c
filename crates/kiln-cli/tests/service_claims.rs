//! `kiln serve` with batching off and a claim batch (`--claim-batch`) end to end on
//! loopback: a slot claims several queued jobs of one batch key in one store call and its
//! worker runs them one by one, nothing merged; every job gets its own result (the closed
//! form of its own strike) and the ends are stored before the clients read them.
#![allow(clippy::unwrap_used)]

mod service_support;

use serde_json::{json, Value};
use service_support::*;

#[test]
fn an_unbatched_slot_claims_a_group_and_each_job_keeps_its_own_result() {
    let d = data_dir();
    let s = start(
        &d.path().join("data"),
        &["--cpu-workers", "1", "--batching", "off", "--claim-batch", "8"],
    );
    // one transaction: all 30 are queued before the worker's first claim can see any
    let strikes: Vec<f64> = (0..30).map(|i| 70.0 + 2.0 * i as f64).collect();
    let jobs: Vec<Value> = strikes.iter().map(|k| price_job(*k, 1)).collect();
    let r = s.post_json("/v1/jobs:batch", None, &json!({ "jobs": jobs }));
    assert_eq!(r.status, 202, "{}", r.text());
    let ids: Vec<String> = r.json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 30);
    for (id, strike) in ids.iter().zip(&strikes) {
        let j = s.wait_job(id, None, 60);
        assert_eq!(j["state"], "succeeded", "{j}");
        let prices = j["result"]["prices"].as_array().unwrap();
        assert_eq!(prices.len(), 1, "{j}");
        let p = prices[0]["price"].as_f64().unwrap();
        assert!(
            (p - bs_call(*strike)).abs() < 1e-5,
            "{id}: {p} for strike {strike}"
        );
    }
    let m = s.get("/metrics", None).unwrap().text();
    let metric = |name: &str| -> f64 {
        m.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(0.0)
    };
    let (jobs, calls) = (
        metric("kiln_service_batch_size_sum "),
        metric("kiln_service_batch_size_count "),
    );
    assert_eq!(jobs, 30.0, "{m}");
    assert!(
        calls < 30.0,
        "30 queued jobs were claimed in groups: {calls} worker calls"
    );
}
