//! Option pricing from Python: a list of option records (JSON-shaped dicts, built by the
//! Python layer from records or from columns of arrays) priced by closed form or Monte
//! Carlo on the `auto` device (or one named), with the GIL released.

use crate::errors::invalid;
use crate::runtime_for;
use kiln::core::finance::{McParams, OptionSpec};
use kiln::finance::Method;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `price(options_json, method, paths, steps, seed, antithetic, control_variate, fast_math,
/// device, first_option)`: one row per option; columns `price`, `std_error`, `paths_used`
/// and the greeks the method gives (NaN where none). An invalid option raises
/// `InvalidInputError` naming its index.
#[pyfunction]
#[pyo3(signature = (options_json, method = "analytic", paths = 65536, steps = 64, seed = 0x6b69_6c6e, antithetic = false, control_variate = false, fast_math = false, device = None, first_option = 0))]
#[allow(clippy::too_many_arguments)]
fn price(
    py: Python<'_>,
    options_json: &str,
    method: &str,
    paths: u64,
    steps: u32,
    seed: u64,
    antithetic: bool,
    control_variate: bool,
    fast_math: bool,
    device: Option<&str>,
    first_option: u32,
) -> PyResult<Py<PyAny>> {
    let specs: Vec<OptionSpec> = serde_json::from_str(options_json)
        .map_err(|e| invalid(format!("price: an option record is malformed: {e}")))?;
    let method: Method = method.parse().map_err(crate::errors::to_py)?;
    let mc = McParams {
        paths,
        steps,
        seed,
        antithetic,
        control_variate,
        fast_math,
        // Philox; the Python binding of Sobol QMC (`--rng sobol` in the CLI) is still to come.
        rng: kiln::core::finance::Rng::Philox,
    };
    let rt = runtime_for(py, device.unwrap_or("auto"))?;
    let r = rt.clone();
    let results = py.detach(move || r.price_batch(&specs, method, &mc, first_option));
    let n = results.len();
    let mut cols: [Vec<f64>; 8] = Default::default();
    let mut used = Vec::with_capacity(n);
    for (i, res) in results.into_iter().enumerate() {
        let p = res.map_err(|e| {
            let k = crate::errors::kind(&e);
            Python::attach(|py| crate::errors::raise(py, k, format!("option {i}: {e}")))
        })?;
        let nan = f64::NAN;
        let row = [
            p.price,
            p.std_error,
            p.delta.unwrap_or(nan),
            p.gamma.unwrap_or(nan),
            p.vega.unwrap_or(nan),
            p.theta.unwrap_or(nan),
            p.rho.unwrap_or(nan),
            if p.paths_used > 0 {
                p.price - 1.96 * p.std_error
            } else {
                p.price
            },
        ];
        for (c, v) in cols.iter_mut().zip(row) {
            c.push(v);
        }
        used.push(p.paths_used);
    }
    let d = PyDict::new(py);
    for (name, c) in [
        "price",
        "std_error",
        "delta",
        "gamma",
        "vega",
        "theta",
        "rho",
        "ci95_low",
    ]
    .iter()
    .zip(cols)
    {
        d.set_item(*name, c)?;
    }
    d.set_item("paths_used", used)?;
    d.set_item("device", rt.device().to_string())?;
    Ok(d.into_any().unbind())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(price, m)?)?;
    Ok(())
}
