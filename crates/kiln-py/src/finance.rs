//! Option pricing from Python: a list of option records (JSON-shaped dicts, built by the
//! Python layer from records or from columns of arrays) priced by closed form or Monte
//! Carlo on the `auto` device (or one named), with the GIL released. Records are a mixed
//! book (`kiln::finance::BookOption`: Black-Scholes, Heston, American), priced as `kiln
//! price` prices the same rows: option `i` on stream `first_option + i`, so a book gives
//! the CLI's bits.

use crate::errors::invalid;
use crate::runtime_for;
use kiln::core::finance::{McParams, OptionSpec, PriceResult, Rng};
use kiln::finance::{BookOption, Method, TargetSe};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

/// One record (a JSON object from the Python layer, its defaults already applied) as a
/// book option: the facade's shared record parser (`kiln::finance::records`, which the job
/// service uses too), its message prefixed with the option's index.
fn book_option(i: usize, rec: Value, steps: u32) -> PyResult<BookOption> {
    kiln::finance::records::book_option(rec, steps).map_err(|e| invalid(format!("option {i}: {e}")))
}

/// `price(options_json, method, paths, steps, seed, antithetic, control_variate, fast_math,
/// device, first_option, rng, replicates, target_se, max_paths)`: one row per option;
/// columns `price`, `std_error`, `paths_used` and the greeks the method gives (NaN where
/// none); with `target_se`, also `met`, `rounds` and `seconds`. An invalid option raises
/// `InvalidInputError` naming its index.
#[pyfunction]
#[pyo3(signature = (options_json, method = "analytic", paths = 65536, steps = 64, seed = 0x6b69_6c6e, antithetic = false, control_variate = false, fast_math = false, device = None, first_option = 0, rng = "philox", replicates = 16, target_se = None, max_paths = 1 << 32))]
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
    rng: &str,
    replicates: u32,
    target_se: Option<&str>,
    max_paths: u64,
) -> PyResult<Py<PyAny>> {
    let recs: Vec<Value> = serde_json::from_str(options_json)
        .map_err(|e| invalid(format!("price: an option record is malformed: {e}")))?;
    let book = recs
        .into_iter()
        .enumerate()
        .map(|(i, r)| book_option(i, r, steps))
        .collect::<PyResult<Vec<BookOption>>>()?;
    let method: Method = method.parse().map_err(crate::errors::to_py)?;
    let rng = match rng {
        "philox" => Rng::Philox,
        "sobol" => Rng::Sobol { replicates },
        other => return Err(invalid(format!("rng must be `philox` or `sobol`, got `{other}`"))),
    };
    let mc = McParams {
        paths,
        steps,
        seed,
        antithetic,
        control_variate,
        fast_math,
        rng,
    };
    let target = match target_se {
        None => None,
        Some(t) => Some(t.parse::<TargetSe>().map_err(crate::errors::to_py)?),
    };
    if target.is_some() {
        if method != Method::MonteCarlo {
            return Err(invalid("target_se needs method=\"mc\"".to_string()));
        }
        if let Some((i, o)) = book
            .iter()
            .enumerate()
            .find(|(_, o)| !matches!(o, BookOption::Plain(_)))
        {
            return Err(invalid(format!(
                "option {i}: target_se prices Black-Scholes options only (this one is {}); price it without target_se",
                o.kind()
            )));
        }
    }
    let rt = runtime_for(py, device.unwrap_or("auto"))?;
    let r = rt.clone();
    let (results, run) = py.detach(move || match target {
        None => (r.price_book(&book, method, &mc, first_option), None),
        Some(t) => {
            let specs: Vec<OptionSpec> = book
                .iter()
                .filter_map(|o| match o {
                    BookOption::Plain(s) => Some(*s),
                    _ => None,
                })
                .collect();
            let run = r.price_to_target(&specs, &mc, t, max_paths, first_option);
            let extra = (run.met.clone(), run.rounds, run.seconds);
            (run.results, Some(extra))
        }
    });
    let n = results.len();
    let mut cols: [Vec<f64>; 8] = Default::default();
    let mut used = Vec::with_capacity(n);
    for (i, res) in results.into_iter().enumerate() {
        let p: PriceResult = res.map_err(|e| {
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
    if let Some((met, rounds, seconds)) = run {
        d.set_item("met", met)?;
        d.set_item("rounds", rounds)?;
        d.set_item("seconds", seconds)?;
    }
    d.set_item("device", rt.device().to_string())?;
    Ok(d.into_any().unbind())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(price, m)?)?;
    Ok(())
}
