//! Portfolio risk from Python (`kiln.risk`): position records (`kiln.price`'s option records
//! plus `underlying`, `quantity` and `id`) and scenario records (the scenario CSV's rows as
//! dicts) revalued by `Runtime::risk` on the `auto` device (or one named), with the GIL
//! released. The P&L vector and matrix come back as packed little-endian float64 bytes,
//! which the Python layer views as NumPy arrays without a copy per element.

use crate::errors::invalid;
use crate::runtime_for;
use kiln::core::finance::{McParams, Rng};
use kiln::finance::risk::{position_record, scenario_records, Position, RiskParams, Valuation};
use kiln::finance::Method;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde_json::Value;

fn f64_bytes<'py>(py: Python<'py>, v: &[f64]) -> Bound<'py, PyBytes> {
    let mut b = Vec::with_capacity(8 * v.len());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    PyBytes::new(py, &b)
}

/// `risk(book_json, scenarios_json, levels, method, paths, steps, seed, tree_steps, matrix,
/// device)`: a dict with `pnl` (bytes, one f64 per scenario), `matrix` (bytes, scenarios x
/// options, or None), `scenarios` (names), `base`, `base_std_error`, `valuation`, `levels`,
/// `var`, `es`, `tail`, `gpu_options` and `device`. A bad record raises `InvalidInputError`
/// naming it (every bad scenario record in one message); a failed revaluation names the
/// option and the scenario.
#[pyfunction]
#[pyo3(signature = (book_json, scenarios_json, levels, method = "analytic", paths = 20_000, steps = 64, seed = 0x6b69_6c6e, tree_steps = 2000, matrix = true, device = None))]
#[allow(clippy::too_many_arguments)]
fn risk<'py>(
    py: Python<'py>,
    book_json: &str,
    scenarios_json: &str,
    levels: Vec<f64>,
    method: &str,
    paths: u64,
    steps: u32,
    seed: u64,
    tree_steps: u32,
    matrix: bool,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let recs: Vec<Value> = serde_json::from_str(book_json)
        .map_err(|e| invalid(format!("risk: a position record is malformed: {e}")))?;
    let positions = recs
        .into_iter()
        .enumerate()
        .map(|(i, r)| position_record(r, steps, false).map_err(|e| invalid(format!("option {i}: {e}"))))
        .collect::<PyResult<Vec<Position>>>()?;
    let srecs: Vec<Value> = serde_json::from_str(scenarios_json)
        .map_err(|e| invalid(format!("risk: a scenario record is malformed: {e}")))?;
    let set = scenario_records(&srecs).map_err(invalid)?;
    let method: Method = method.parse().map_err(crate::errors::to_py)?;
    let params = RiskParams {
        method,
        mc: McParams {
            paths,
            steps,
            seed,
            antithetic: false,
            control_variate: false,
            fast_math: false,
            rng: Rng::Philox,
        },
        levels,
        keep_matrix: matrix,
        tree_steps,
        use_gpu: true,
    };
    let rt = runtime_for(py, device.unwrap_or("auto"))?;
    let r = rt.clone();
    let s = set.clone();
    let report = py
        .detach(move || r.risk(&positions, &s, &params))
        .map_err(crate::errors::to_py)?;
    let d = PyDict::new(py);
    d.set_item("pnl", f64_bytes(py, &report.pnl))?;
    match &report.matrix {
        Some(m) => d.set_item("matrix", f64_bytes(py, m))?,
        None => d.set_item("matrix", py.None())?,
    }
    let names: Vec<&str> = set.scenarios.iter().map(|s| s.name.as_str()).collect();
    d.set_item("scenarios", names)?;
    d.set_item("base", report.base.clone())?;
    d.set_item("base_std_error", report.base_std_error.clone())?;
    let how: Vec<&str> = report
        .valuation
        .iter()
        .map(|v| match v {
            Valuation::Analytic => "analytic",
            Valuation::MonteCarlo => "mc",
        })
        .collect();
    d.set_item("valuation", how)?;
    d.set_item(
        "levels",
        report.measures.iter().map(|m| m.level).collect::<Vec<_>>(),
    )?;
    d.set_item("var", report.measures.iter().map(|m| m.var).collect::<Vec<_>>())?;
    d.set_item("es", report.measures.iter().map(|m| m.es).collect::<Vec<_>>())?;
    d.set_item("tail", report.measures.iter().map(|m| m.tail).collect::<Vec<_>>())?;
    d.set_item("gpu_options", report.gpu_options)?;
    d.set_item("device", rt.device().to_string())?;
    Ok(d)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(risk, m)?)?;
    Ok(())
}
