//! Mixed books through the job service: jobs submitted to the router (`app(state)`, no
//! socket), stored, claimed from the store and run by `exec::run_batch` on a CPU runtime
//! (what a `kiln worker` process does with a batch), their results stored and read back
//! through the API. Every price must be the bits of `Runtime::price_book` run directly on
//! the same book with the same parameters (stream indices from 0, as `kiln price` and
//! `kiln.price`): JSON records and a CSV blob, analytic and Monte Carlo, Philox and Sobol,
//! and a `target_se` run reporting `met` and `rounds`. Bad books are refused at submission.
#![allow(clippy::unwrap_used)]

mod app_support;

use axum::http::StatusCode;
use kiln::core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln::core::finance::heston::{HestonParams, HestonSpec};
use kiln::core::finance::{McParams, OptionSpec, OptionType, PriceResult, Rng, Style};
use kiln::finance::{AmericanRainbowSpec, AmericanSpec, BookOption, Extreme, Method, TargetSe};
use kiln::Runtime;
use kiln_service::api::AppState;
use kiln_service::config::ServiceConfig;
use kiln_service::exec::{run_batch, ExecOptions};
use kiln_service::protocol::{WorkItem, WorkOutcome};
use kiln_service::store::Outcome;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

fn state(dir: &std::path::Path) -> Arc<AppState> {
    app_support::state(dir, ServiceConfig::default())
}

async fn call(st: &Arc<AppState>, method: &str, uri: &str, body: Vec<u8>) -> (StatusCode, Value) {
    app_support::call(st, method, uri, Some("secret"), body).await
}

async fn submit(st: &Arc<AppState>, params: Value, inputs: Value) -> String {
    let body = json!({"kind": "price", "params": params, "inputs": inputs}).to_string();
    let (s, b) = call(st, "POST", "/v1/jobs", body.into_bytes()).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    b["id"].as_str().unwrap().to_string()
}

/// Claims every queued job and runs it as a worker would (one job a batch: mixed books
/// have solo batch keys), storing each result; returns the results as the worker made them
/// (exact f64s, before any JSON text).
async fn run_queued(st: &Arc<AppState>, rt: &Runtime, opts: &ExecOptions) -> Vec<(String, Value)> {
    let owner = "node/test";
    let mut out = Vec::new();
    loop {
        let jobs = st
            .store
            .claim(owner, false, None, 1, Duration::from_secs(600))
            .await
            .unwrap();
        if jobs.is_empty() {
            return out;
        }
        for j in jobs {
            let item = WorkItem {
                id: j.id.clone(),
                attempt: j.attempt,
                task: j.task.clone(),
            };
            let (mut res, poisoned) = run_batch(rt, opts, &[item]);
            assert!(!poisoned);
            let WorkOutcome::Ok { result, blobs } = res.remove(0).outcome else {
                panic!("job {} failed", j.id)
            };
            let stored = st
                .store
                .finish(
                    &j.id,
                    owner,
                    Outcome::Succeeded {
                        result: result.to_string(),
                        blobs,
                    },
                )
                .await
                .unwrap();
            assert!(stored);
            out.push((j.id, result));
        }
    }
}

fn spec(t: OptionType, spot: f64, strike: f64, rate: f64, vol: f64, maturity: f64) -> OptionSpec {
    OptionSpec::european(t, spot, strike, rate, 0.0, vol, maturity)
}

fn american(
    t: OptionType,
    spot: f64,
    strike: f64,
    rate: f64,
    vol: f64,
    dates: Option<u32>,
    steps: u32,
) -> BookOption {
    BookOption::American {
        spec: AmericanSpec {
            option_type: t,
            spot,
            strike,
            rate,
            dividend: 0.0,
            volatility: vol,
            maturity: 1.0,
            exercise_dates: dates.unwrap_or(steps),
        },
        continuous: dates.is_none(),
    }
}

fn heston_params() -> HestonParams {
    HestonParams {
        kappa: 1.5,
        theta: 0.04,
        xi: 0.5,
        rho: -0.6,
        v0: 0.05,
    }
}

const CORR: [f64; 9] = [1.0, 0.5, 0.2, 0.5, 1.0, 0.3, 0.2, 0.3, 1.0];

/// The mixed book as records and as the facade's book (built directly, not by the parser).
fn book(average: BasketAverage, asian: bool, steps: u32) -> (Vec<Value>, Vec<BookOption>) {
    let mut recs = vec![
        json!({"option_type": "call", "spot": 100.0, "strike": 95.0, "rate": 0.03, "volatility": 0.25, "maturity": 1.0}),
        json!({"model": "heston", "option_type": "put", "spot": 100.0, "strike": 100.0, "rate": 0.03,
               "maturity": 1.0, "kappa": 1.5, "theta": 0.04, "xi": 0.5, "rho": -0.6, "v0": 0.05}),
        json!({"option_type": "put", "style": "american", "spot": 36.0, "strike": 40.0, "rate": 0.06,
               "volatility": 0.2, "maturity": 1.0, "fixings": 8}),
        json!({"option_type": "put", "style": "american", "spot": 36.0, "strike": 40.0, "rate": 0.06,
               "volatility": 0.2, "maturity": 1.0}),
        json!({"style": "basket", "option_type": "call", "average": if average == BasketAverage::Geometric { "geometric" } else { "arithmetic" },
               "strike": 100.0, "rate": 0.02, "maturity": 1.0,
               "assets": [{"spot": 100.0, "volatility": 0.2, "weight": 0.5, "name": "a"},
                          {"spot": 95.0, "volatility": 0.3, "weight": 0.3, "dividend": 0.01},
                          {"spot": 105.0, "volatility": 0.25, "weight": 0.2}],
               "correlation": [[1.0, 0.5, 0.2], [0.5, 1.0, 0.3], [0.2, 0.3, 1.0]]}),
        json!({"option_type": "put", "spot": 100.0, "strike": 105.0, "rate": 0.03, "volatility": 0.2, "maturity": 0.5}),
    ];
    let heston_option = OptionSpec {
        volatility: 0.2,
        ..spec(OptionType::Put, 100.0, 100.0, 0.03, 0.2, 1.0)
    };
    let mut options = vec![
        BookOption::Plain(spec(OptionType::Call, 100.0, 95.0, 0.03, 0.25, 1.0)),
        BookOption::Heston(HestonSpec {
            option: heston_option,
            heston: heston_params(),
        }),
        american(OptionType::Put, 36.0, 40.0, 0.06, 0.2, Some(8), steps),
        american(OptionType::Put, 36.0, 40.0, 0.06, 0.2, None, steps),
        BookOption::Basket(BasketSpec {
            kind: OptionType::Call,
            strike: 100.0,
            rate: 0.02,
            maturity: 1.0,
            average,
            assets: vec![
                BasketAsset::new(100.0, 0.2, 0.0, 0.5).named("a"),
                BasketAsset::new(95.0, 0.3, 0.01, 0.3),
                BasketAsset::new(105.0, 0.25, 0.0, 0.2),
            ],
            correlation: CORR.to_vec(),
        }),
        BookOption::Plain(spec(OptionType::Put, 100.0, 105.0, 0.03, 0.2, 0.5)),
    ];
    if asian {
        recs[5]["style"] = json!("asian_arithmetic");
        recs[5]["fixings"] = json!(4);
        if let BookOption::Plain(s) = &mut options[5] {
            *s = s.with_style(Style::AsianArithmetic, Some(4), None);
        }
    }
    (recs, options)
}

/// Each row of a job's result carries the bits `price_book` gives on the same book.
fn assert_bits(job: &str, result: &Value, want: &[kiln::Result<PriceResult>], kinds: &[&str]) {
    let rows = result["prices"].as_array().unwrap();
    assert_eq!(rows.len(), want.len(), "{job}");
    for (i, (row, w)) in rows.iter().zip(want).enumerate() {
        assert_eq!(row["kind"], kinds[i], "{job} option {i}");
        match w {
            Ok(p) => {
                let got = row["price"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{job} option {i}: {row}"));
                assert_eq!(got.to_bits(), p.price.to_bits(), "{job} option {i}: {row}");
                assert_eq!(
                    row["std_error"].as_f64().unwrap().to_bits(),
                    p.std_error.to_bits(),
                    "{job} option {i}"
                );
                assert_eq!(
                    row["paths_used"].as_u64().unwrap(),
                    p.paths_used,
                    "{job} option {i}"
                );
            }
            Err(e) => assert_eq!(row["error"], e.to_string(), "{job} option {i}"),
        }
    }
}

#[tokio::test]
async fn mixed_books_price_to_the_bits_of_price_book() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path());
    let rt = Runtime::cpu();
    let opts = ExecOptions {
        blob_dir: dir.path().to_path_buf(),
        inline_max_elements: 1 << 20,
        max_elements: 16 << 20,
    };
    let steps = 8;
    let base = McParams {
        paths: 2048,
        steps,
        seed: 7,
        ..McParams::default()
    };
    let sobol = McParams {
        rng: Rng::Sobol { replicates: 8 },
        ..base
    };
    let mc_params = json!({"method": "mc", "paths": 2048, "steps": steps, "seed": 7});
    let mut sobol_params = mc_params.clone();
    sobol_params["rng"] = json!("sobol");
    sobol_params["replicates"] = json!(8);
    let mut cases: Vec<(String, Vec<BookOption>, Method, McParams)> = Vec::new();

    // JSON records: analytic (geometric basket, European payoffs), mc under Philox and Sobol
    // (arithmetic basket, an arithmetic Asian)
    let (recs, options) = book(BasketAverage::Geometric, false, 64);
    let id = submit(&st, json!({"method": "analytic"}), json!({ "options": recs })).await;
    cases.push((id, options, Method::Analytic, McParams::default()));
    for (params, mc) in [(&mc_params, base), (&sobol_params, sobol)] {
        let (recs, options) = book(BasketAverage::Arithmetic, true, steps);
        let id = submit(&st, params.clone(), json!({ "options": recs })).await;
        cases.push((id, options, Method::MonteCarlo, mc));
    }

    // a CSV blob: Black-Scholes, American (dates and continuous) and Heston rows
    let csv = "id,type,style,spot,strike,rate,volatility,maturity,fixings,model,kappa,theta,xi,rho,v0\n\
               a,call,european,100,95,0.03,0.25,1,,,,,,,\n\
               b,put,american,36,40,0.06,0.2,1,8,,,,,,\n\
               c,put,american,36,40,0.06,0.2,1,,,,,,,\n\
               d,put,european,100,100,0.03,0.2,1,,heston,1.5,0.04,0.5,-0.6,0.05\n\
               e,put,asian_arithmetic,100,105,0.03,0.2,0.5,4,,,,,,\n";
    let (s, b) = call(&st, "POST", "/v1/blobs?format=csv", csv.as_bytes().to_vec()).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let blob = b["id"].as_str().unwrap().to_string();
    let (_, full) = book(BasketAverage::Arithmetic, true, steps);
    let csv_book = vec![
        full[0].clone(),
        full[2].clone(),
        full[3].clone(),
        full[1].clone(),
        full[5].clone(),
    ];
    for (params, mc) in [(&mc_params, base), (&sobol_params, sobol)] {
        let id = submit(&st, params.clone(), json!({ "csv_blob": blob })).await;
        cases.push((id, csv_book.clone(), Method::MonteCarlo, mc));
    }

    // a standard-error target on a Black-Scholes book
    let target_recs = json!([
        {"spot": 100.0, "strike": 95.0, "rate": 0.03, "volatility": 0.25, "maturity": 1.0},
        {"option_type": "put", "spot": 100.0, "strike": 105.0, "rate": 0.03, "volatility": 0.2, "maturity": 0.5}
    ]);
    let target_id = submit(
        &st,
        json!({"method": "mc", "paths": 1024, "seed": 7, "rng": "sobol", "target_se": "1e-4rel", "max_paths": 1 << 16}),
        json!({ "options": target_recs }),
    )
    .await;

    let results = run_queued(&st, &rt, &opts).await;
    assert_eq!(results.len(), cases.len() + 1);
    let result_of = |id: &str| &results.iter().find(|(j, _)| j == id).unwrap().1;
    for (id, options, method, mc) in &cases {
        let want = rt.price_book(options, *method, mc, 0);
        let kinds: Vec<&str> = options.iter().map(BookOption::kind).collect();
        let r = result_of(id);
        assert_bits(id, r, &want, &kinds);
        assert_eq!(r["stream_offset"], 0);
        assert_eq!(r["device"], rt.device_name());
        // the stored result, read through the API, is the same JSON
        let (s, job) = call(&st, "GET", &format!("/v1/jobs/{id}"), Vec::new()).await;
        assert_eq!((s, job["state"].as_str()), (StatusCode::OK, Some("succeeded")));
        assert_eq!(job["result"]["prices"].as_array().unwrap().len(), options.len());
        assert_eq!(job["result"]["prices"][0]["kind"], "bs");
    }
    // Monte Carlo rows really were priced (not all errors): the Philox JSON book prices all
    let philox = result_of(&cases[1].0);
    assert!(
        philox["prices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["price"].is_f64()),
        "{philox}"
    );
    assert_eq!(philox["rng"], "philox");
    assert_eq!(result_of(&cases[2].0)["rng"], "sobol");

    // the target run: price_to_target's bits, met and rounds
    let specs = [
        spec(OptionType::Call, 100.0, 95.0, 0.03, 0.25, 1.0),
        spec(OptionType::Put, 100.0, 105.0, 0.03, 0.2, 0.5),
    ];
    let mc = McParams {
        paths: 1024,
        rng: Rng::Sobol { replicates: 16 },
        ..base
    };
    let mc = McParams {
        steps: McParams::default().steps,
        ..mc
    };
    let t: TargetSe = "1e-4rel".parse().unwrap();
    let run = rt.price_to_target(&specs, &mc, t, 1 << 16, 0);
    let r = result_of(&target_id);
    assert_bits(&target_id, r, &run.results, &["bs", "bs"]);
    assert_eq!(r["rounds"], run.rounds);
    assert!(run.rounds > 1, "the target needed more than one round");
    for (i, m) in run.met.iter().enumerate() {
        assert_eq!(r["prices"][i]["met"], *m);
    }
    assert_eq!(r["target_se"], json!(t));
    let (_, job) = call(&st, "GET", &format!("/v1/jobs/{target_id}"), Vec::new()).await;
    assert_eq!(job["result"]["rounds"], run.rounds);
}

#[tokio::test]
async fn bad_books_are_refused_at_submission() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path());
    let refused = |params: Value, options: Value, needles: &'static [&'static str]| {
        let st = st.clone();
        async move {
            let body = json!({"kind": "price", "params": params, "inputs": {"options": options}}).to_string();
            let (s, b) = call(&st, "POST", "/v1/jobs", body.into_bytes()).await;
            assert_eq!(
                (s, b["error"]["code"].as_str()),
                (StatusCode::BAD_REQUEST, Some("invalid_params")),
                "{b}"
            );
            let m = b["error"]["message"].as_str().unwrap();
            for n in needles {
                assert!(m.contains(n), "wanted `{n}` in: {m}");
            }
        }
    };
    let (recs, _) = book(BasketAverage::Arithmetic, false, 64);
    let mut unknown = recs[0].clone();
    unknown["vol"] = json!(0.2);
    refused(
        json!({}),
        json!([recs[0], unknown]),
        &["inputs.options[1]", "unknown field `vol`"],
    )
    .await;
    let mut heston = recs[1].clone();
    heston.as_object_mut().unwrap().remove("kappa");
    refused(
        json!({}),
        json!([heston]),
        &["inputs.options[0]", "model heston needs kappa"],
    )
    .await;
    let mut basket = recs[4].clone();
    basket["correlation"] = json!([[1.0, 0.9, -0.9], [0.9, 1.0, 0.9], [-0.9, 0.9, 1.0]]);
    refused(
        json!({"method": "mc"}),
        json!([recs[0], basket]),
        &["inputs.options[1]", "not positive definite: pivot 3"],
    )
    .await;
    refused(
        json!({"method": "analytic"}),
        json!(recs),
        &[
            "inputs.options[4]",
            "average arithmetic has no closed form; use method mc",
        ],
    )
    .await;
    // nothing was queued
    let (_, list) = call(&st, "GET", "/v1/jobs", Vec::new()).await;
    assert_eq!(list["jobs"].as_array().map_or(0, Vec::len), 0, "{list}");
}

/// American rainbows go in as records (priced to the bits of `price_book`, Monte Carlo
/// only); a CSV blob with an `american_rainbow` row is refused as basket rows are (it names
/// a second file by a path on the server), as are analytic and a record without its dates.
#[tokio::test]
async fn american_rainbow_records_price_and_csv_rows_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path());
    let rt = Runtime::cpu();
    let opts = ExecOptions {
        blob_dir: dir.path().to_path_buf(),
        inline_max_elements: 1 << 20,
        max_elements: 16 << 20,
    };
    let rainbow = |kind: &str, average: &str, strike: f64| {
        json!({"style": "american_rainbow", "option_type": kind, "average": average,
            "strike": strike, "rate": 0.05, "maturity": 1.0, "fixings": 5,
            "assets": [{"spot": 100.0, "volatility": 0.2, "dividend": 0.1, "weight": 1.0, "name": "A"},
                       {"spot": 95.0, "volatility": 0.3, "weight": 1.0}],
            "correlation": [[1.0, 0.3], [0.3, 1.0]]})
    };
    let recs = json!([
        {"spot": 100.0, "strike": 95.0, "rate": 0.03, "volatility": 0.25, "maturity": 1.0},
        rainbow("call", "max", 100.0),
        rainbow("put", "min", 100.0),
    ]);
    let spec = |kind, extreme, strike| {
        BookOption::AmericanRainbow(AmericanRainbowSpec {
            kind,
            extreme,
            strike,
            rate: 0.05,
            maturity: 1.0,
            exercise_dates: 5,
            assets: vec![
                BasketAsset::new(100.0, 0.2, 0.1, 1.0).named("A"),
                BasketAsset::new(95.0, 0.3, 0.0, 1.0),
            ],
            correlation: vec![1.0, 0.3, 0.3, 1.0],
        })
    };
    let options = vec![
        BookOption::Plain(OptionSpec::european(
            OptionType::Call,
            100.0,
            95.0,
            0.03,
            0.0,
            0.25,
            1.0,
        )),
        spec(OptionType::Call, Extreme::Max, 100.0),
        spec(OptionType::Put, Extreme::Min, 100.0),
    ];
    let id = submit(
        &st,
        json!({"method": "mc", "paths": 2048, "steps": 8, "seed": 3}),
        json!({ "options": recs }),
    )
    .await;
    let results = run_queued(&st, &rt, &opts).await;
    let mc = McParams {
        paths: 2048,
        steps: 8,
        seed: 3,
        ..McParams::default()
    };
    let want = rt.price_book(&options, Method::MonteCarlo, &mc, 0);
    assert!(want.iter().all(Result::is_ok), "{want:?}");
    let r = &results.iter().find(|(j, _)| *j == id).unwrap().1;
    assert_bits(&id, r, &want, &["bs", "american rainbow", "american rainbow"]);

    let refused = |inputs: Value, params: Value, needles: &'static [&'static str]| {
        let st = st.clone();
        async move {
            let body = json!({"kind": "price", "params": params, "inputs": inputs}).to_string();
            let (s, b) = call(&st, "POST", "/v1/jobs", body.into_bytes()).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
            let m = b["error"]["message"].as_str().unwrap();
            for n in needles {
                assert!(m.contains(n), "wanted `{n}` in: {m}");
            }
        }
    };
    refused(
        json!({ "options": recs }),
        json!({"method": "analytic"}),
        &["inputs.options[1]", "no closed form or tree", "use method mc"],
    )
    .await;
    let mut no_dates = rainbow("call", "max", 100.0);
    no_dates.as_object_mut().unwrap().remove("fixings");
    refused(
        json!({ "options": [no_dates] }),
        json!({"method": "mc"}),
        &["inputs.options[0]", "needs `fixings`"],
    )
    .await;
    let csv = "id,type,style,spot,strike,rate,volatility,maturity,fixings,basket,average\n\
               a,call,european,100,95,0.03,0.25,1,,,\n\
               r,call,american_rainbow,,100,0.05,,1,5,,max\n";
    let (s, b) = call(&st, "POST", "/v1/blobs?format=csv", csv.as_bytes().to_vec()).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let blob = b["id"].as_str().unwrap().to_string();
    refused(
        json!({ "csv_blob": blob }),
        json!({"method": "mc"}),
        &["row 2 is an american_rainbow row", "inputs.options"],
    )
    .await;
}
