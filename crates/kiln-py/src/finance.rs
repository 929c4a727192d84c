//! Option pricing from Python: a list of option records (JSON-shaped dicts, built by the
//! Python layer from records or from columns of arrays) priced by closed form or Monte
//! Carlo on the `auto` device (or one named), with the GIL released. Records are a mixed
//! book (`kiln::finance::BookOption`: Black-Scholes, Heston, American), priced as `kiln
//! price` prices the same rows: option `i` on stream `first_option + i`, so a book gives
//! the CLI's bits.

use crate::errors::invalid;
use crate::runtime_for;
use kiln::core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln::core::finance::heston::{HestonParams, HestonSpec};
use kiln::core::finance::{McParams, OptionSpec, OptionType, PriceResult, Rng};
use kiln::finance::{AmericanSpec, BookOption, Method, TargetSe};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Map, Value};

/// The Heston fields of a record (`model = "heston"`).
const HESTON: [&str; 5] = ["kappa", "theta", "xi", "rho", "v0"];

/// One record (a JSON object from the Python layer) as a book option: `model` (`bs`, the
/// default, or `heston` with `kappa, theta, xi, rho, v0`) and `style` (`american`: the
/// exercise dates are `fixings`, equally spaced, or none for continuous exercise, which
/// Monte Carlo approximates with `steps` dates), the rest as `OptionSpec`'s fields. The
/// same kinds as `kiln price`'s rows (kiln_io::options_csv).
fn book_option(i: usize, rec: Value, steps: u32) -> PyResult<BookOption> {
    let bad = |m: String| invalid(format!("option {i}: {m}"));
    let Value::Object(mut m) = rec else {
        return Err(bad("a record must be a dict".into()));
    };
    if m.get("style").and_then(Value::as_str) == Some("basket") {
        return basket_option(m).map_err(bad);
    }
    for k in ["assets", "correlation", "average"] {
        if m.contains_key(k) {
            return Err(bad(format!("`{k}` belongs to style=\"basket\" records")));
        }
    }
    let model = match m.remove("model") {
        None | Some(Value::Null) => "bs".to_string(),
        Some(Value::String(s)) => s.to_ascii_lowercase(),
        Some(v) => return Err(bad(format!("model must be `bs` or `heston`, got {v}"))),
    };
    let mut params = Map::new();
    for k in HESTON {
        if let Some(v) = m.remove(k) {
            if !v.is_null() {
                params.insert(k.to_string(), v);
            }
        }
    }
    let american = m.get("style").and_then(Value::as_str) == Some("american");
    if american {
        m.insert("style".into(), Value::String("european".into()));
    }
    let american_fixings = match m.insert("fixings".into(), Value::Null) {
        Some(v) if american && !v.is_null() => Some(
            v.as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 1.0)
                        .map(|f| f as u64)
                })
                .filter(|d| *d >= 1)
                .ok_or_else(|| {
                    bad(format!(
                        "fixings (the exercise dates) must be a whole number >= 1, got {v}"
                    ))
                })?,
        ),
        Some(v) => {
            m.insert("fixings".into(), v);
            None
        }
        None => None,
    };
    // a Heston option's volatility is not used; sqrt(theta) keeps the spec valid when it
    // is not given (as kiln price's rows)
    if model == "heston" && m.get("volatility").is_none_or(Value::is_null) {
        if let Some(theta) = params.get("theta").and_then(Value::as_f64) {
            m.insert("volatility".into(), Value::from(theta.max(0.0).sqrt()));
        }
    }
    let spec: OptionSpec =
        serde_json::from_value(Value::Object(m)).map_err(|e| bad(format!("the record is malformed: {e}")))?;
    match model.as_str() {
        "bs" if !params.is_empty() => Err(bad(format!(
            "{} are Heston parameters; set model=\"heston\" to use them",
            params.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
        ))),
        "bs" if american => {
            let dates = match american_fixings {
                Some(d) => u32::try_from(d).map_err(|_| bad(format!("fixings {d} is too large")))?,
                None => steps,
            };
            Ok(BookOption::American {
                spec: AmericanSpec {
                    option_type: spec.option_type,
                    spot: spec.spot,
                    strike: spec.strike,
                    rate: spec.rate,
                    dividend: spec.dividend,
                    volatility: spec.volatility,
                    maturity: spec.maturity,
                    exercise_dates: dates,
                },
                continuous: american_fixings.is_none(),
            })
        }
        "bs" => Ok(BookOption::Plain(spec)),
        "heston" if american => Err(bad(
            "american exercise under heston is not supported; use model bs".into(),
        )),
        "heston" => {
            let missing: Vec<&str> = HESTON
                .iter()
                .copied()
                .filter(|k| !params.contains_key(*k))
                .collect();
            if !missing.is_empty() {
                return Err(bad(format!(
                    "model heston needs {} (its parameters are kappa, theta, xi, rho, v0)",
                    missing.join(", ")
                )));
            }
            let heston: HestonParams = serde_json::from_value(Value::Object(params))
                .map_err(|e| bad(format!("a Heston parameter is malformed: {e}")))?;
            Ok(BookOption::Heston(HestonSpec { option: spec, heston }))
        }
        other => Err(bad(format!("unknown model `{other}`; use bs or heston"))),
    }
}

/// A `style = "basket"` record: `option_type`, `strike`, `rate`, `maturity`, `average`
/// (`arithmetic`, the default, or `geometric`), `assets` (a list of dicts with `spot`,
/// `volatility`, `weight`, optionally `dividend` and `name`) and `correlation` (N lists of
/// N, or N² numbers row-major; may be left out for one asset). Its own spot, volatility,
/// dividend, fixings and barrier are its assets' business: giving them is an error, as is
/// any Heston field.
fn basket_option(mut m: Map<String, Value>) -> Result<BookOption, String> {
    m.remove("style");
    let num = |m: &Map<String, Value>, k: &str| -> Result<f64, String> {
        m.get(k)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("a basket needs a number `{k}`"))
    };
    let kind = match m.remove("option_type") {
        None | Some(Value::Null) => OptionType::Call,
        Some(v) => serde_json::from_value(v).map_err(|e| format!("option_type: {e}"))?,
    };
    let average = match m.remove("average") {
        None | Some(Value::Null) => BasketAverage::Arithmetic,
        Some(Value::String(a)) => a.parse().map_err(|e: kiln::Error| e.to_string())?,
        Some(v) => return Err(format!("average must be `arithmetic` or `geometric`, got {v}")),
    };
    let (strike, rate, maturity) = (num(&m, "strike")?, num(&m, "rate")?, num(&m, "maturity")?);
    let Some(Value::Array(list)) = m.remove("assets") else {
        return Err(
            "a basket needs `assets`: a list of dicts with spot, volatility, weight (dividend, name)".into(),
        );
    };
    let mut assets = Vec::with_capacity(list.len());
    for (j, a) in list.into_iter().enumerate() {
        let Value::Object(a) = a else {
            return Err(format!("assets[{j}] must be a dict"));
        };
        if let Some(k) = a
            .keys()
            .find(|k| !["spot", "volatility", "dividend", "weight", "name"].contains(&k.as_str()))
        {
            return Err(format!(
                "assets[{j}]: unknown field `{k}`; fields: spot, volatility, dividend, weight, name"
            ));
        }
        let f = |k: &str| num(&a, k).map_err(|_| format!("assets[{j}] needs a number `{k}`"));
        let dividend = match a.get("dividend") {
            None | Some(Value::Null) => 0.0,
            Some(v) => v
                .as_f64()
                .ok_or_else(|| format!("assets[{j}].dividend must be a number"))?,
        };
        let mut asset = BasketAsset::new(f("spot")?, f("volatility")?, dividend, f("weight")?);
        if let Some(name) = a.get("name").and_then(Value::as_str) {
            asset = asset.named(name);
        }
        assets.push(asset);
    }
    let n = assets.len();
    let correlation: Vec<f64> = match m.remove("correlation") {
        None | Some(Value::Null) if n == 1 => vec![1.0],
        None | Some(Value::Null) => {
            return Err(format!("a basket of {n} assets needs `correlation` ({n} x {n})"))
        }
        Some(Value::Array(rows)) => {
            let flat: Vec<Value> = if rows.iter().all(Value::is_array) {
                if rows.len() != n || rows.iter().any(|r| r.as_array().is_some_and(|r| r.len() != n)) {
                    return Err(format!("correlation must be {n} x {n} for {n} assets"));
                }
                rows.into_iter()
                    .flat_map(|r| r.as_array().cloned().unwrap_or_default())
                    .collect()
            } else {
                rows
            };
            if flat.len() != n * n {
                return Err(format!(
                    "correlation has {} numbers; {n} assets need {}",
                    flat.len(),
                    n * n
                ));
            }
            flat.iter()
                .map(|v| {
                    v.as_f64()
                        .ok_or_else(|| format!("correlation entries must be numbers, got {v}"))
                })
                .collect::<Result<_, _>>()?
        }
        Some(v) => return Err(format!("correlation must be a list, got {v}")),
    };
    let given: Vec<&str> = m
        .iter()
        .filter(|(k, v)| !v.is_null() && !["strike", "rate", "maturity"].contains(&k.as_str()))
        .map(|(k, _)| k.as_str())
        .collect();
    if !given.is_empty() {
        return Err(format!(
            "a basket record takes option_type, strike, rate, maturity, average, assets and correlation; \
             {} belong to its assets or to other kinds",
            given.join(", ")
        ));
    }
    Ok(BookOption::Basket(BasketSpec {
        kind,
        strike,
        rate,
        maturity,
        average,
        assets,
        correlation,
    }))
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
