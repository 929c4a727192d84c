use super::*;

fn message(r: Result<(Task, u64), ApiError>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(t) => panic!("expected a refusal, got {t:?}"),
    }
}

fn book() -> Value {
    json!([{"option_type": "call", "spot": 100, "strike": 95, "rate": 0.03, "volatility": 0.25,
            "maturity": 0.75, "underlying": "A", "quantity": 3, "id": "c1"},
           {"option_type": "put", "spot": 50, "strike": 55, "rate": 0.02, "volatility": 0.4,
            "maturity": 1.5, "quantity": -2}])
}

fn scenarios() -> Value {
    json!([{"scenario": "down", "underlying": "A", "spot_shift": -0.1, "vol_shift": 0.05},
           {"scenario": "down", "spot_shift": -4, "spot_shift_kind": "absolute"},
           {"scenario": "up", "underlying": "A", "spot_shift": 0.08},
           {"scenario": "flat"}])
}

fn inputs() -> Value {
    json!({"book": book(), "scenarios": scenarios()})
}

fn opts(dir: &std::path::Path, inline: usize) -> ExecOptions {
    ExecOptions {
        blob_dir: dir.to_path_buf(),
        inline_max_elements: inline,
        max_elements: 1 << 20,
    }
}

#[test]
fn a_risk_job_is_checked_then_run_as_the_facade_runs_it() {
    let (task, n) = validate(&json!({"levels": [0.5]}), &inputs(), 1 << 20).unwrap();
    assert_eq!(n, 6);
    let Task::Risk(job) = task else { panic!("{task:?}") };
    let dir = tempfile::tempdir().unwrap();
    let WorkOutcome::Ok { result, .. } = run(&Runtime::cpu(), &opts(dir.path(), 16), "j_1", &job) else {
        panic!("failed")
    };
    let want = Runtime::cpu()
        .risk(
            &job.positions,
            &job.scenarios,
            &RiskParams {
                levels: vec![0.5],
                mc: McParams {
                    paths: DEFAULT_PATHS,
                    ..McParams::default()
                },
                ..RiskParams::default()
            },
        )
        .unwrap();
    let pnl: Vec<f64> = result["pnl"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(pnl, want.pnl);
    assert_eq!(result["scenarios"], json!(["down", "up", "flat"]));
    assert_eq!(result["var"][0].as_f64(), Some(want.measures[0].var));
    assert_eq!(result["valuation"], json!(["analytic", "analytic"]));
    assert_eq!(pnl[2], 0.0);
    // the call: 3 units, spot 100 -> 90 and vol 0.25 -> 0.30 in `down`; the put (no
    // underlying: the `*` shock) 50 -> 46
    use kiln::core::finance::{bsm, OptionType};
    let c = |s: f64, v: f64| bsm(OptionType::Call, s, 95.0, 0.03, 0.0, v, 0.75).price;
    let p = |s: f64| bsm(OptionType::Put, s, 55.0, 0.02, 0.0, 0.4, 1.5).price;
    let down = 3.0 * (c(90.0, 0.3) - c(100.0, 0.25)) - 2.0 * (p(46.0) - p(50.0));
    assert!((pnl[0] - down).abs() < 1e-10, "{} vs {down}", pnl[0]);
    assert_eq!(result["matrix"], Value::Null);
}

#[test]
fn the_matrix_is_inline_when_small_and_an_f64_npy_blob_when_not() {
    let dir = tempfile::tempdir().unwrap();
    let (task, _) = validate(&json!({"matrix": true}), &inputs(), 1 << 20).unwrap();
    let Task::Risk(job) = task else { panic!("{task:?}") };
    let WorkOutcome::Ok { result, blobs } = run(&Runtime::cpu(), &opts(dir.path(), 6), "j_1", &job) else {
        panic!("failed")
    };
    assert!(blobs.is_empty());
    assert_eq!(result["matrix"]["shape"], json!([3, 2]));
    let m: Vec<f64> = result["matrix"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let pnl = result["pnl"].as_array().unwrap();
    for (row, total) in m.chunks(2).zip(pnl) {
        assert_eq!(row[0] + row[1], total.as_f64().unwrap());
    }
    let WorkOutcome::Ok { result, blobs } = run(&Runtime::cpu(), &opts(dir.path(), 5), "j_2", &job) else {
        panic!("failed")
    };
    assert_eq!(blobs.len(), 1);
    assert_eq!(result["matrix"]["blob"], json!(blobs[0].id));
    assert_eq!(result["matrix"]["shape"], json!([3, 2]));
    let bytes = std::fs::read(&blobs[0].path).unwrap();
    assert_eq!(result["matrix"]["bytes"], json!(bytes.len()));
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]])) + 10;
    let header = String::from_utf8_lossy(&bytes[..header_len]);
    assert!(
        header.contains("'descr': '<f8'") && header.contains("'shape': (3, 2)"),
        "{header}"
    );
    let from_blob: Vec<f64> = bytes[header_len..]
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(from_blob, m);
}

#[test]
fn bad_jobs_are_refused_naming_the_field_and_every_record() {
    let ok = inputs();
    let refused = |params: Value, inputs: &Value| message(validate(&params, inputs, 1 << 20));
    assert!(refused(json!({"levels": [0.9, 1.5]}), &ok).starts_with("params.levels[1] = 1.5"));
    assert!(refused(json!({"levels": [0.9, "x"]}), &ok).starts_with("params.levels[1]: "));
    assert!(refused(json!({"method": "tree"}), &ok).starts_with("params.method"));
    assert!(refused(json!({"paths": 1}), &ok).starts_with("params: "));
    assert!(refused(json!({"tree_steps": 2}), &ok).starts_with("params.tree_steps = 2"));
    let m = refused(json!({"antithetic": true}), &ok);
    assert!(m.starts_with("params: unknown field `antithetic`"), "{m}");
    let m = refused(
        json!({}),
        &json!({"book": book(), "scenarios": scenarios(), "x": 1}),
    );
    assert!(m.contains("unknown field `x`"), "{m}");
    let mut b = book();
    b[0]["volatility"] = json!(-1);
    b[1]["quantity"] = json!("lots");
    let m = refused(json!({}), &json!({"book": b, "scenarios": scenarios()}));
    assert!(
        m.starts_with("inputs.book[0]: ") && m.contains("volatility"),
        "{m}"
    );
    assert!(m.contains("\ninputs.book[1]: quantity"), "{m}");
    let s = json!([{"scenario": "a", "spot": 1}, {"scenario": "b"}, {"scenario": "c", "vol_shift": "x"}]);
    let m = refused(json!({}), &json!({"book": book(), "scenarios": s}));
    assert!(m.starts_with("inputs.scenarios[0]: unknown field `spot`"), "{m}");
    assert!(
        m.contains("\ninputs.scenarios[2]: vol_shift") && !m.contains("[1]"),
        "{m}"
    );
    assert!(refused(json!({}), &json!({"book": book()})).contains("inputs.scenarios is missing"));
    assert!(
        refused(json!({}), &json!({"book": [], "scenarios": scenarios()})).contains("inputs.book is empty")
    );
}

#[test]
fn a_refusal_lists_twenty_bad_records_and_counts_the_rest() {
    let b: Vec<Value> = (0..25).map(|_| json!({"spot": -1})).collect();
    let m = message(validate(
        &json!({}),
        &json!({"book": b, "scenarios": scenarios()}),
        1 << 20,
    ));
    assert_eq!(m.lines().count(), 21, "{m}");
    assert!(
        m.contains("inputs.book[19]: ") && !m.contains("inputs.book[20]"),
        "{m}"
    );
    assert!(m.ends_with("... and 5 more bad book records"), "{m}");
}

#[test]
fn positions_times_scenarios_past_the_element_limit_is_refused() {
    // 2 positions x 3 scenarios = 6 revaluations
    assert!(validate(&json!({}), &inputs(), 6).is_ok());
    let m = message(validate(&json!({}), &inputs(), 5));
    assert!(
        m.starts_with(
            "inputs: 2 positions x 3 scenarios = 6 revaluations; the limit is 5 (limits.max_elements)"
        ),
        "{m}"
    );
}
