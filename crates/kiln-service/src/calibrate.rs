//! `calibrate` jobs: Heston's `kappa, theta, xi, rho, v0` fitted to a surface of European
//! quotes, `Runtime::calibrate_heston` on the worker's runtime (on its CPU cores whatever
//! its device: there is no GPU pricer of a surface).
//!
//! Request: `params` (every field optional): `model` (`heston`, the one there is), `target`
//! (`vol`, the default, or `price`: what is fitted), `start` (`{"kappa", "theta", "xi",
//! "rho", "v0"}`, all five; default QuantLib's DAX start `1, 0.1, 0.5, -0.5, 0.1`) and
//! `max_iterations` (1 to 10,000, default 200). `inputs.quotes`: a list of objects with the
//! fields of `kiln calibrate`'s CSV: `type` (`call` or `put`; `option_type` is taken too),
//! exactly one of `price` (discounted) or `vol` (0.2 for 20%), the same one in every quote,
//! `spot`, `strike`, `maturity` (years), and optionally `rate` and `dividend` (continuously
//! compounded per year, default 0) and `weight` (`>= 0`, default 1). Validation checks
//! every element before the job is stored, as the CSV reader and the fit check their rows:
//! known fields only, the type, numbers, `spot`, `strike`, `maturity` and the value `> 0`,
//! and in a vol fit a price that some volatility reaches; the first bad element is a 400
//! naming it (`inputs.quotes[3].strike = 0; it must be > 0`), as is a bad start or fewer than
//! 5 quotes of positive weight.
//!
//! Result: the fit as `kiln calibrate --json` reports it (`params`, `start`, `feller`,
//! `rmse_vol_points`, `vol_quotes`, `rmse_price`, `cost`, `target`, `iterations`,
//! `evaluations`, `stop`, `quotes`: one object per quote in input order with its market and
//! model price and vol and their errors), with `quoted` and `device` (`cpu`).

use crate::error::ApiError;
use crate::implied::QuoteObject;
use crate::protocol::WorkOutcome;
use crate::task::Task;
use kiln::core::finance::calibrate::{
    quote_problems, CalibrationOptions, Contract, HestonQuote, LmOptions, QuoteKind, Target, DEFAULT_START,
};
use kiln::core::finance::heston::HestonParams;
use kiln::core::finance::OptionType;
use kiln::Runtime;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The job kind.
pub const KIND: &str = "calibrate";

/// The fields a quote may have.
const FIELDS: [&str; 10] = [
    "type",
    "option_type",
    "price",
    "vol",
    "spot",
    "strike",
    "maturity",
    "rate",
    "dividend",
    "weight",
];

/// The most iterations a job may ask for.
const MAX_ITERATIONS: usize = 10_000;

/// One quote as the task stores it.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct CalibQuote {
    /// A put (else a call).
    pub put: bool,
    /// The price or vol, as the task's `quoted` says.
    pub value: f64,
    /// The spot.
    pub spot: f64,
    /// The strike.
    pub strike: f64,
    /// Years to expiry.
    pub maturity: f64,
    /// The continuously compounded rate.
    pub rate: f64,
    /// The continuous dividend yield.
    pub dividend: f64,
    /// The residual's weight.
    pub weight: f64,
}

impl CalibQuote {
    /// As kiln's fit takes it.
    pub fn quote(&self) -> HestonQuote {
        HestonQuote {
            contract: Contract {
                kind: if self.put {
                    OptionType::Put
                } else {
                    OptionType::Call
                },
                spot: self.spot,
                strike: self.strike,
                maturity: self.maturity,
                rate: self.rate,
                dividend: self.dividend,
            },
            value: self.value,
            weight: self.weight,
        }
    }
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidParams(msg.into())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    start: Option<StartParams>,
    #[serde(default)]
    max_iterations: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartParams {
    kappa: f64,
    theta: f64,
    xi: f64,
    rho: f64,
    v0: f64,
}

/// One element of `inputs.quotes`, checked field by field, with what its value is.
fn quote_row(i: usize, v: &Value) -> Result<(CalibQuote, QuoteKind), ApiError> {
    let q = QuoteObject::open(
        i,
        v,
        "{\"type\", \"price\" or \"vol\", \"spot\", \"strike\", \"maturity\", \"rate\", \"dividend\", \"weight\"}",
        &FIELDS,
        "type, price or vol, spot, strike, maturity, rate, dividend and weight",
    )?;
    let at = &q.at;
    let put = q.put()?;
    let quoted = match (q.obj.contains_key("price"), q.obj.contains_key("vol")) {
        (true, false) => QuoteKind::Price,
        (false, true) => QuoteKind::Vol,
        (true, true) => return Err(bad(format!("{at}: give price or vol, not both"))),
        (false, false) => return Err(bad(format!("{at}: price or vol is missing"))),
    };
    let value = q.positive(if quoted == QuoteKind::Price {
        "price"
    } else {
        "vol"
    })?;
    let weight = q.num("weight", Some(1.0))?;
    if weight < 0.0 {
        return Err(bad(format!("{at}.weight = {weight}; it must be >= 0")));
    }
    Ok((
        CalibQuote {
            put,
            value,
            spot: q.positive("spot")?,
            strike: q.positive("strike")?,
            maturity: q.positive("maturity")?,
            rate: q.num("rate", Some(0.0))?,
            dividend: q.num("dividend", Some(0.0))?,
            weight,
        },
        quoted,
    ))
}

/// Checks a `calibrate` job and normalizes it into [`Task::Calibrate`]; the second value is
/// the job's input elements (its quotes).
pub fn validate(params: &Value, inputs: &Value) -> Result<(Task, u64), ApiError> {
    let p: Params = crate::task::parse("params", params)?;
    if let Some(m) = p.model.as_deref().filter(|m| *m != "heston") {
        return Err(bad(format!("params.model = `{m}`; kiln calibrates heston")));
    }
    let target = match p.target.as_deref() {
        None | Some("vol") => Target::Vol,
        Some("price") => Target::Price,
        Some(t) => return Err(bad(format!("params.target = `{t}`; use vol or price"))),
    };
    let max_iterations = p.max_iterations.unwrap_or(200);
    if !(1..=MAX_ITERATIONS).contains(&max_iterations) {
        return Err(bad(format!(
            "params.max_iterations = {max_iterations}; use 1 to {MAX_ITERATIONS}"
        )));
    }
    let start = p.start.map_or(DEFAULT_START, |s| HestonParams {
        kappa: s.kappa,
        theta: s.theta,
        xi: s.xi,
        rho: s.rho,
        v0: s.v0,
    });
    start.validate().map_err(|e| bad(format!("params.start: {e}")))?;
    let Value::Object(obj) = inputs else {
        return Err(bad("inputs: expected {\"quotes\": [...]}"));
    };
    if let Some(k) = obj.keys().find(|k| k.as_str() != "quotes") {
        return Err(bad(format!("inputs: unknown field `{k}`; expected quotes")));
    }
    let elements = match obj.get("quotes") {
        Some(Value::Array(q)) if !q.is_empty() => q,
        Some(Value::Array(_)) => return Err(bad("inputs.quotes is empty")),
        Some(v) => {
            return Err(bad(format!(
                "inputs.quotes: {} is not a list",
                crate::task::shown(v)
            )))
        }
        None => return Err(bad("inputs.quotes is missing")),
    };
    let mut quotes = Vec::with_capacity(elements.len());
    let mut quoted = None;
    for (i, v) in elements.iter().enumerate() {
        let (q, kind) = quote_row(i, v)?;
        match quoted {
            None => quoted = Some(kind),
            Some(k) if k != kind => {
                return Err(bad(format!(
                    "inputs.quotes[{i}]: every quote gives the same one of price or vol (inputs.quotes[0] gives {})",
                    if k == QuoteKind::Price { "price" } else { "vol" }
                )))
            }
            Some(_) => {}
        }
        quotes.push(q);
    }
    let quoted = quoted.unwrap_or(QuoteKind::Price);
    let hq: Vec<HestonQuote> = quotes.iter().map(CalibQuote::quote).collect();
    if let Some(p) = quote_problems(&hq, quoted, target).first() {
        return Err(bad(format!("inputs.quotes[{}]: {}", p.index, p.reason)));
    }
    let used = quotes.iter().filter(|q| q.weight > 0.0).count();
    if used < 5 {
        return Err(bad(format!(
            "inputs.quotes: {used} quotes of positive weight; at least 5 are needed for 5 parameters"
        )));
    }
    let n = quotes.len() as u64;
    Ok((
        Task::Calibrate {
            quotes,
            quoted,
            target,
            start,
            max_iterations,
        },
        n,
    ))
}

/// Runs a [`Task::Calibrate`] on `rt` (module docs for the result). A fit that cannot be
/// evaluated fails the job with kiln's message.
pub fn run(
    rt: &Runtime,
    quotes: &[CalibQuote],
    quoted: QuoteKind,
    target: Target,
    start: &HestonParams,
    max_iterations: usize,
) -> WorkOutcome {
    let hq: Vec<HestonQuote> = quotes.iter().map(CalibQuote::quote).collect();
    let options = CalibrationOptions {
        quoted,
        target,
        lm: LmOptions {
            max_iterations,
            ..LmOptions::default()
        },
        ..CalibrationOptions::default()
    };
    let fit = match rt.calibrate_heston(&hq, start, &options) {
        Ok(f) => f,
        Err(e) => return crate::exec::kiln_error(&e),
    };
    let mut result = match serde_json::to_value(&fit) {
        Ok(v) => v,
        Err(e) => return crate::exec::fail("internal", e.to_string(), false),
    };
    result["quoted"] = json!(quoted);
    result["device"] = json!("cpu");
    WorkOutcome::Ok {
        result,
        blobs: Vec::new(),
    }
}
