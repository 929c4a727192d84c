//! Option pricing from Python: a list of option records (JSON-shaped dicts, built by the
//! Python layer from records or from columns of arrays) priced by closed form or Monte
//! Carlo on the `auto` device (or one named), with the GIL released. Records are a mixed
//! book (`kiln::finance::BookOption`: Black-Scholes, Heston, American), priced as `kiln
//! price` prices the same rows: option `i` on stream `first_option + i`, so a book gives
//! the CLI's bits. Implied volatilities (`implied_vol`) take and return packed float64
//! columns, solved on the CPU's cores.

use crate::errors::{invalid, IntoPy};
use crate::finance_greeks::{GreekColumns, Knobs};
use crate::runtime_for;
use kiln::core::finance::{McParams, OptionSpec, PriceResult, Rng};
use kiln::finance::{BookOption, Method, TargetSe};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde_json::Value;

/// One record (a JSON object from the Python layer, its defaults already applied) as a
/// book option: the facade's shared record parser (`kiln::finance::records`, which the job
/// service uses too), its message prefixed with the option's index.
fn book_option(i: usize, rec: Value, steps: u32) -> PyResult<BookOption> {
    kiln::finance::records::book_option(rec, steps).map_err(|e| invalid(format!("option {i}: {e}")))
}

/// `price(options_json, method, paths, steps, seed, antithetic, control_variate, fast_math,
/// device, first_option, rng, replicates, target_se, max_paths, greeks, batches, spot_bump,
/// vol_bump, rate_bump, time_bump, cross_gamma)`: one row per option; columns `price`, `std_error`,
/// `paths_used` and the greeks the method gives (NaN where none); with `target_se`, also
/// `met`, `rounds` and `seconds`; with `greeks`, every Greek, its `*_se` column and
/// `asset_greeks` ([`finance_greeks`](crate::finance_greeks)). An invalid option raises
/// `InvalidInputError` naming its index.
#[pyfunction]
#[pyo3(signature = (options_json, method = "analytic", paths = 65536, steps = 64, seed = 0x6b69_6c6e, antithetic = false, control_variate = false, fast_math = false, device = None, first_option = 0, rng = "philox", replicates = 16, target_se = None, max_paths = 1 << 32, greeks = false, batches = None, spot_bump = None, vol_bump = None, rate_bump = None, time_bump = None, cross_gamma = None))]
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
    greeks: bool,
    batches: Option<i64>,
    spot_bump: Option<f64>,
    vol_bump: Option<f64>,
    rate_bump: Option<f64>,
    time_bump: Option<f64>,
    cross_gamma: Option<bool>,
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
    let knobs = Knobs {
        batches,
        spot_bump,
        vol_bump,
        rate_bump,
        time_bump,
        cross_gamma,
    };
    let greeks_params = match (greeks, method) {
        (false, _) if knobs.any() => {
            return Err(invalid(
                "batches, the bumps and cross_gamma set the Monte Carlo Greeks; give greeks=True too"
                    .to_string(),
            ))
        }
        (false, _) => None,
        (true, Method::MonteCarlo) if target.is_some() => {
            return Err(invalid(
                "greeks=True combines with no target_se (the Greeks' batches fix their paths)".to_string(),
            ))
        }
        (true, Method::MonteCarlo) => Some(knobs.params()?),
        (true, _) if knobs.any() => {
            return Err(invalid(
                "batches, the bumps and cross_gamma set the Monte Carlo Greeks (method=\"mc\"); \
                 method=\"analytic\" gives the closed forms"
                    .to_string(),
            ))
        }
        (true, _) => None,
    };
    let rt = runtime_for(py, device.unwrap_or("auto"))?;
    let r = rt.clone();
    // the book comes back for the closed-form Greeks' messages
    let (results, run, mc_greeks, book) = py.detach(move || match target {
        None => {
            let prices = r.price_book(&book, method, &mc, first_option);
            let g = greeks_params.map(|p| r.mc_greeks(&book, &mc, &p, first_option));
            (prices, None, g, book)
        }
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
            (run.results, Some(extra), None, book)
        }
    });
    let n = results.len();
    let prices = results
        .into_iter()
        .enumerate()
        .map(|(i, res)| {
            res.map_err(|e| {
                let k = crate::errors::kind(&e);
                Python::attach(|py| crate::errors::raise(py, k, format!("option {i}: {e}")))
            })
        })
        .collect::<PyResult<Vec<PriceResult>>>()?;
    let greek_cols = match (mc_greeks, greeks) {
        (Some(g), _) => Some(GreekColumns::from_mc(
            g.map_err(crate::errors::to_py)?,
            cross_gamma == Some(true),
        )?),
        (None, true) => Some(GreekColumns::from_analytic(&book, &prices)?),
        (None, false) => None,
    };
    let mut cols: [Vec<f64>; 8] = Default::default();
    let mut used = Vec::with_capacity(n);
    for p in prices {
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
    if let Some(g) = greek_cols {
        g.into_dict(py, &d)?;
    }
    if let Some((met, rounds, seconds)) = run {
        d.set_item("met", met)?;
        d.set_item("rounds", rounds)?;
        d.set_item("seconds", seconds)?;
    }
    d.set_item("device", rt.device().to_string())?;
    Ok(d.into_any().unbind())
}

/// The reason codes [`implied_vol`] returns, by index (0: a volatility was found); the
/// Python layer maps them back to these names.
const NO_VOLATILITY_CODES: [&str; 7] = [
    "",
    "not_finite",
    "not_positive",
    "out_of_range",
    "below_intrinsic",
    "at_intrinsic",
    "above_upper_bound",
];

/// `n` little-endian f64 from `bytes`, or why not.
fn f64s(name: &str, bytes: &[u8], n: usize) -> PyResult<Vec<f64>> {
    if bytes.len() != 8 * n {
        return Err(invalid(format!(
            "implied_vol: {name} has {} bytes; {n} float64 values take {}",
            bytes.len(),
            8 * n
        )));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            f64::from_le_bytes(a)
        })
        .collect())
}

/// `implied_vol(price, spot, strike, maturity, rate, dividend, is_put, device=None)`: the
/// Black-Scholes implied volatility of each quote (`kiln::finance::implied`, solved with the
/// GIL released: on the CPU's cores for `device` None or `cpu`, else through the runtime
/// of `device`, `Runtime::implied_volatility_book`, on its GPU). The first six are `n`
/// little-endian float64 each, `is_put` `n` bytes (0 call, 1 put), all already broadcast by
/// the Python layer. Returns `(vols, codes)`: `n` little-endian float64 (NaN where a quote
/// has no volatility) and `n` bytes indexing [`NO_VOLATILITY_CODES`].
#[pyfunction]
#[pyo3(signature = (price, spot, strike, maturity, rate, dividend, is_put, device = None))]
#[allow(clippy::too_many_arguments)]
fn implied_vol<'py>(
    py: Python<'py>,
    price: &[u8],
    spot: &[u8],
    strike: &[u8],
    maturity: &[u8],
    rate: &[u8],
    dividend: &[u8],
    is_put: &[u8],
    device: Option<&str>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    use kiln::core::finance::OptionType;
    use kiln::finance::implied::{implied_volatility_book, Quote};
    let n = is_put.len();
    let cols = [
        f64s("price", price, n)?,
        f64s("spot", spot, n)?,
        f64s("strike", strike, n)?,
        f64s("maturity", maturity, n)?,
        f64s("rate", rate, n)?,
        f64s("dividend", dividend, n)?,
    ];
    let quotes: Vec<Quote> = (0..n)
        .map(|i| Quote {
            kind: if is_put[i] == 0 {
                OptionType::Call
            } else {
                OptionType::Put
            },
            price: cols[0][i],
            spot: cols[1][i],
            strike: cols[2][i],
            maturity: cols[3][i],
            rate: cols[4][i],
            dividend: cols[5][i],
        })
        .collect();
    let results = match device.map(|d| d.trim().to_ascii_lowercase()) {
        None => py.detach(move || implied_volatility_book(&quotes)),
        Some(d) if d == "cpu" => py.detach(move || implied_volatility_book(&quotes)),
        Some(d) => {
            let rt = runtime_for(py, &d)?;
            py.detach(move || rt.implied_volatility_book(&quotes)).py()?
        }
    };
    let mut vols = Vec::with_capacity(8 * n);
    let mut codes = Vec::with_capacity(n);
    for r in &results {
        let (v, code) = match r {
            Ok(v) => (*v, 0u8),
            Err(e) => (
                f64::NAN,
                NO_VOLATILITY_CODES
                    .iter()
                    .position(|c| *c == e.code())
                    .unwrap_or(0) as u8,
            ),
        };
        vols.extend_from_slice(&v.to_le_bytes());
        codes.push(code);
    }
    Ok((PyBytes::new(py, &vols), PyBytes::new(py, &codes)))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(price, m)?)?;
    m.add_function(wrap_pyfunction!(implied_vol, m)?)?;
    Ok(())
}
