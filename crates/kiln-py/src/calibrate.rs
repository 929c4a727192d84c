//! Heston calibration from Python: per-quote columns in (the Python layer broadcasts
//! scalars and checks the names), the fit out as JSON (the Python layer returns it as a
//! dict). The fit runs on the CPU's cores (the facade's `Runtime::calibrate_heston`) with
//! the GIL released.

use crate::errors::{invalid, to_py};
use kiln::core::finance::calibrate::{
    option_type, CalibrationOptions, Contract, HestonQuote, LmOptions, QuoteKind, Target, DEFAULT_START,
};
use kiln::core::finance::heston::HestonParams;
use pyo3::prelude::*;

/// `calibrate_heston(spot, strike, maturity, rate, dividend, value, weight, is_call, quoted,
/// target, start, max_iterations)`: equal-length columns; `quoted` `price` or `vol` (what
/// `value` is), `target` `price` or `vol` (what is fitted), `start` None or
/// `[kappa, theta, xi, rho, v0]`. Returns the fit as a JSON string.
#[pyfunction]
#[pyo3(signature = (spot, strike, maturity, rate, dividend, value, weight, is_call, quoted = "price", target = "vol", start = None, max_iterations = 200))]
#[allow(clippy::too_many_arguments)]
fn calibrate_heston(
    py: Python<'_>,
    spot: Vec<f64>,
    strike: Vec<f64>,
    maturity: Vec<f64>,
    rate: Vec<f64>,
    dividend: Vec<f64>,
    value: Vec<f64>,
    weight: Vec<f64>,
    is_call: Vec<bool>,
    quoted: &str,
    target: &str,
    start: Option<Vec<f64>>,
    max_iterations: usize,
) -> PyResult<String> {
    let n = value.len();
    for (name, len) in [
        ("spot", spot.len()),
        ("strike", strike.len()),
        ("maturity", maturity.len()),
        ("rate", rate.len()),
        ("dividend", dividend.len()),
        ("weight", weight.len()),
        ("is_call", is_call.len()),
    ] {
        if len != n {
            return Err(invalid(format!(
                "calibrate_heston: {name} has {len} entries, quotes has {n}"
            )));
        }
    }
    let quoted: QuoteKind = quoted.parse().map_err(to_py)?;
    let target: Target = target.parse().map_err(to_py)?;
    let start = match start {
        None => DEFAULT_START,
        Some(v) if v.len() == 5 => HestonParams {
            kappa: v[0],
            theta: v[1],
            xi: v[2],
            rho: v[3],
            v0: v[4],
        },
        Some(v) => {
            return Err(invalid(format!(
                "calibrate_heston: start has {} numbers; give kappa, theta, xi, rho, v0",
                v.len()
            )))
        }
    };
    let quotes: Vec<HestonQuote> = (0..n)
        .map(|i| HestonQuote {
            contract: Contract {
                kind: option_type(is_call[i]),
                spot: spot[i],
                strike: strike[i],
                maturity: maturity[i],
                rate: rate[i],
                dividend: dividend[i],
            },
            value: value[i],
            weight: weight[i],
        })
        .collect();
    let options = CalibrationOptions {
        quoted,
        target,
        lm: LmOptions {
            max_iterations,
            ..LmOptions::default()
        },
        ..CalibrationOptions::default()
    };
    let rt = crate::runtime_for(py, "cpu")?;
    if max_iterations == 0 {
        return Err(invalid("calibrate_heston: max_iterations must be >= 1"));
    }
    let fit = py
        .detach(move || rt.calibrate_heston(&quotes, &start, &options))
        .map_err(to_py)?;
    serde_json::to_string(&fit).map_err(|e| invalid(format!("calibrate_heston: {e}")))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(calibrate_heston, m)?)?;
    Ok(())
}
