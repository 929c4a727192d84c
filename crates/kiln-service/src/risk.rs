//! `risk` jobs: portfolio risk by full revaluation, `Runtime::risk` on the worker's runtime
//! (the European Black-Scholes grid on its GPU where it has one, the rest on its CPU and
//! Monte Carlo engines; a multi-device worker uses its first GPU).
//!
//! Request: `inputs.book`, the option records of a `price` job (every kind) with
//! `underlying`, `quantity` and `id` fields added; `inputs.scenarios`, one record per scenario
//! and underlying (`scenario`, `underlying` (`*`: every underlying not named, the default),
//! `spot_shift`, `spot_shift_kind` (`relative` or `absolute`), `vol_shift`, `rate_shift`),
//! as `kiln risk`'s scenario CSV rows. `params` (all optional): `method` (`analytic`, the
//! default: closed forms where they exist and Monte Carlo for the rest; or `mc`), `levels`
//! (default `[0.95, 0.99]`), `paths` (20,000), `steps` (64), `seed`, `tree_steps`, `matrix`
//! (return each position's P&L too; default false): `kiln risk`'s and `kiln.risk`'s defaults,
//! so the same book and scenarios give the same bits.
//!
//! Validation checks every record before the job is stored: every bad book record is named
//! (`inputs.book[3]: ...`), every bad scenario record too (`inputs.scenarios[7]: ...`), in
//! one 400. The job's work is a revaluation per position and scenario: positions x scenarios
//! past `limits.max_elements` is refused, saying so. What only pricing finds (a scenario that
//! takes a spot or volatility out of its domain) fails the job, naming the option and the
//! scenario.
//!
//! Result: `pnl` (one per scenario), `scenarios` (names), `base`, `base_std_error` and
//! `valuation` (per position), `levels`, `var`, `es`, `tail`, `matrix` (null, or the
//! scenarios x positions P&L as an array result: `{"shape", "data"}` inline, an f64 NPY blob
//! past `results.inline_max_elements`), `gpu_options` and `device`. VaR and ES follow
//! docs/finance.md ("Portfolio risk").

use crate::error::ApiError;
use crate::exec::ExecOptions;
use crate::protocol::WorkOutcome;
use crate::task::Task;
use kiln::core::finance::american::MAX_TREE_STEPS;
use kiln::core::finance::risk::{loss_measures, ScenarioSet};
use kiln::core::finance::{McParams, Rng};
use kiln::expr::{OwnedArray, ScalarType};
use kiln::finance::risk::{position_record, scenario_records, Position, RiskParams, Valuation};
use kiln::finance::{Method, DEFAULT_TREE_STEPS};
use kiln::Runtime;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The job kind.
pub const KIND: &str = "risk";

/// Monte Carlo paths per valuation when `params.paths` is not given (as `kiln risk`).
pub const DEFAULT_PATHS: u64 = 20_000;

/// Bad records a refusal lists; past these it counts the rest.
const LISTED: usize = 20;

/// A risk job as the task stores it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RiskJob {
    /// The book.
    pub positions: Vec<Position>,
    /// The scenarios, in order.
    pub scenarios: ScenarioSet,
    /// `analytic` or `mc`.
    pub method: String,
    /// Monte Carlo parameters.
    pub mc: McParams,
    /// VaR and ES levels.
    pub levels: Vec<f64>,
    /// Steps of the American tree.
    pub tree_steps: u32,
    /// Return each position's P&L.
    pub matrix: bool,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidParams(msg.into())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    method: Option<String>,
    levels: Option<Value>,
    paths: Option<u64>,
    steps: Option<u32>,
    seed: Option<u64>,
    tree_steps: Option<u32>,
    matrix: Option<bool>,
}

fn list<'a>(obj: &'a serde_json::Map<String, Value>, name: &str) -> Result<&'a Vec<Value>, ApiError> {
    match obj.get(name) {
        Some(Value::Array(v)) if !v.is_empty() => Ok(v),
        Some(Value::Array(_)) => Err(bad(format!("inputs.{name} is empty"))),
        Some(v) => Err(bad(format!(
            "inputs.{name}: {} is not a list",
            crate::task::shown(v)
        ))),
        None => Err(bad(format!("inputs.{name} is missing"))),
    }
}

/// `params.levels`: a list of numbers, each in `(0, 1)`; the error names the element.
fn levels(v: Option<&Value>) -> Result<Vec<f64>, ApiError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(vec![0.95, 0.99]),
        Some(Value::Array(a)) => a,
        Some(v) => {
            return Err(bad(format!(
                "params.levels: {} is not a list of numbers",
                crate::task::shown(v)
            )))
        }
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, x) in list.iter().enumerate() {
        match x.as_f64() {
            Some(l) if l > 0.0 && l < 1.0 => out.push(l),
            Some(l) => return Err(bad(format!("params.levels[{i}] = {l}; a level is in (0, 1)"))),
            None => {
                return Err(bad(format!(
                    "params.levels[{i}]: {} is not a number",
                    crate::task::shown(x)
                )))
            }
        }
    }
    loss_measures(&[0.0], &out).map_err(|e| bad(format!("params.levels: {e}")))?;
    Ok(out)
}

/// `problems` as one message: the first [`LISTED`], then how many more.
fn listed(what: &str, problems: &[String]) -> ApiError {
    let mut msg = problems[..problems.len().min(LISTED)].join("\n");
    if problems.len() > LISTED {
        msg.push_str(&format!(
            "\n... and {} more bad {what} records",
            problems.len() - LISTED
        ));
    }
    bad(msg)
}

/// Every book record as a position, every bad one named (`inputs.book[i]: ...`).
fn book(recs: &[Value], steps: u32) -> Result<Vec<Position>, ApiError> {
    let mut positions = Vec::with_capacity(recs.len());
    let mut problems = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let p = position_record(r.clone(), steps, true)
            .and_then(|p| p.option.validate().map(|()| p).map_err(|e| e.to_string()));
        match p {
            Ok(p) => positions.push(p),
            Err(e) => problems.push(format!("inputs.book[{i}]: {e}")),
        }
    }
    if problems.is_empty() {
        Ok(positions)
    } else {
        Err(listed("book", &problems))
    }
}

/// The scenario records as a set, every bad one named (`inputs.scenarios[i]: ...`; the
/// facade's parser says `scenario record i`).
fn scenarios(recs: &[Value]) -> Result<ScenarioSet, ApiError> {
    scenario_records(recs).map_err(|e| {
        let problems: Vec<String> = e
            .lines()
            .map(|l| {
                l.strip_prefix("scenario record ")
                    .and_then(|rest| rest.split_once(": "))
                    .map_or_else(
                        || format!("inputs.scenarios: {l}"),
                        |(i, why)| format!("inputs.scenarios[{i}]: {why}"),
                    )
            })
            .collect();
        listed("scenario", &problems)
    })
}

/// Checks a `risk` job and normalizes it into [`Task::Risk`]; the second value is the job's
/// work in input elements: its revaluations, positions times scenarios, refused here past
/// `max_elements` (`limits.max_elements`).
pub fn validate(params: &Value, inputs: &Value, max_elements: u64) -> Result<(Task, u64), ApiError> {
    let p: Params = crate::task::parse("params", params)?;
    let method = p.method.as_deref().unwrap_or("analytic");
    if method.parse::<Method>().is_err() {
        return Err(bad(format!("params.method = `{method}`; use analytic or mc")));
    }
    let levels = levels(p.levels.as_ref())?;
    let d = McParams::default();
    let mc = McParams {
        paths: p.paths.unwrap_or(DEFAULT_PATHS),
        steps: p.steps.unwrap_or(d.steps),
        seed: p.seed.unwrap_or(d.seed),
        antithetic: false,
        control_variate: false,
        fast_math: false,
        rng: Rng::Philox,
    };
    mc.validate().map_err(|e| bad(format!("params: {e}")))?;
    let tree_steps = p.tree_steps.unwrap_or(DEFAULT_TREE_STEPS);
    if !(4..=MAX_TREE_STEPS).contains(&tree_steps) {
        // the tree's own range (the continuous-exercise tree needs 4)
        return Err(bad(format!(
            "params.tree_steps = {tree_steps}; it must be in 4..={MAX_TREE_STEPS}"
        )));
    }
    let Value::Object(obj) = inputs else {
        return Err(bad("inputs: expected {\"book\": [...], \"scenarios\": [...]}"));
    };
    if let Some(k) = obj.keys().find(|k| !matches!(k.as_str(), "book" | "scenarios")) {
        return Err(bad(format!(
            "inputs: unknown field `{k}`; expected book and scenarios"
        )));
    }
    let positions = book(list(obj, "book")?, mc.steps)?;
    let scenarios = scenarios(list(obj, "scenarios")?)?;
    let n = (positions.len() as u64).saturating_mul(scenarios.len() as u64);
    if n > max_elements {
        return Err(bad(format!(
            "inputs: {} positions x {} scenarios = {n} revaluations; the limit is {max_elements} \
             (limits.max_elements): split the book or the scenarios over several jobs",
            positions.len(),
            scenarios.len()
        )));
    }
    let job = RiskJob {
        positions,
        scenarios,
        method: method.to_string(),
        mc,
        levels,
        tree_steps,
        matrix: p.matrix.unwrap_or(false),
    };
    Ok((Task::Risk(job), n))
}

/// The scenarios x positions P&L as an array result: inline up to
/// `opts.inline_max_elements`, else an f64 NPY blob of `job`.
fn matrix_result(
    opts: &ExecOptions,
    job: &str,
    data: &[f64],
    shape: [usize; 2],
) -> Result<(Value, Vec<crate::store::BlobRecord>), String> {
    if data.len() <= opts.inline_max_elements {
        return Ok((json!({ "shape": shape, "data": data }), Vec::new()));
    }
    let a = OwnedArray {
        dtype: ScalarType::F64,
        shape: shape.to_vec(),
        bytes: data.iter().flat_map(|x| x.to_ne_bytes()).collect(),
    };
    let b = crate::user_kernel::write_blob(opts, job, &a)?;
    let v = json!({ "shape": shape, "blob": b.id, "sha256": b.sha256, "bytes": b.size });
    Ok((v, vec![b]))
}

/// Runs a [`Task::Risk`] of job `id` on `rt` (module docs for the result). An option that
/// a scenario takes out of its domain fails the job naming both; a device failure fails it
/// too (a sticky one restarts the worker).
pub fn run(rt: &Runtime, opts: &ExecOptions, id: &str, job: &RiskJob) -> WorkOutcome {
    let Ok(method) = job.method.parse::<Method>() else {
        return crate::exec::kiln_error(&kiln::Error::invalid(
            KIND,
            format!("unknown method `{}`", job.method),
        ));
    };
    let params = RiskParams {
        method,
        mc: job.mc,
        levels: job.levels.clone(),
        keep_matrix: job.matrix,
        tree_steps: job.tree_steps,
        use_gpu: true,
    };
    let r = match rt.risk(&job.positions, &job.scenarios, &params) {
        Ok(r) => r,
        Err(e) => return crate::exec::kiln_error(&e),
    };
    let (matrix, blobs) = match &r.matrix {
        None => (Value::Null, Vec::new()),
        Some(m) => {
            let shape = [job.scenarios.len(), job.positions.len()];
            match matrix_result(opts, id, m, shape) {
                Ok(v) => v,
                Err(e) => return crate::exec::fail("result_write_failed", e, true),
            }
        }
    };
    let names: Vec<&str> = job.scenarios.scenarios.iter().map(|s| s.name.as_str()).collect();
    let valuation: Vec<&str> = r
        .valuation
        .iter()
        .map(|v| match v {
            Valuation::Analytic => "analytic",
            Valuation::MonteCarlo => "mc",
        })
        .collect();
    WorkOutcome::Ok {
        result: json!({
            "pnl": r.pnl,
            "scenarios": names,
            "base": r.base,
            "base_std_error": r.base_std_error,
            "valuation": valuation,
            "levels": r.measures.iter().map(|m| m.level).collect::<Vec<_>>(),
            "var": r.measures.iter().map(|m| m.var).collect::<Vec<_>>(),
            "es": r.measures.iter().map(|m| m.es).collect::<Vec<_>>(),
            "tail": r.measures.iter().map(|m| m.tail).collect::<Vec<_>>(),
            "matrix": matrix,
            "gpu_options": r.gpu_options,
            "device": rt.device_name(),
        }),
        blobs,
    }
}

#[cfg(test)]
mod tests;
