//! `implied_vol` jobs: the Black-Scholes implied volatility of a book of European quotes,
//! `Runtime::implied_volatility_book` on the worker's runtime (its GPU where it has one,
//! else kiln-core's solver on its cores; a multi-device worker uses its first GPU).
//!
//! Request: `params` empty (or absent), `inputs.quotes` a list of objects with the fields of
//! `kiln implied-vol`'s CSV: `type` (`call` or `put`; `option_type` is taken too), `price`
//! (discounted), `spot`, `strike`, `maturity` (years), and optionally `rate` and `dividend`
//! (continuously compounded per year, default 0). Validation checks every element before the
//! job is stored, as the CSV reader checks its rows: an object, known fields only, the type,
//! numbers, `spot`, `strike` and `maturity` > 0; the first bad element is a 400 naming it
//! (`inputs.quotes[3].strike: "x" (a string) is not a number`). A price that no volatility
//! reaches (at or below the intrinsic value, at or above the upper bound, not positive) is
//! not a bad element: its result says why.
//!
//! Result: `vols` (one per quote, `null` where there is none), `reasons` (`""` where solved,
//! else `NoVolatility`'s code: `not_positive`, `out_of_range`, `below_intrinsic`,
//! `at_intrinsic`, `above_upper_bound`), `details` (`null` or the reason's message),
//! `solved`, `quotes` and `device` (`cpu` or `cuda:N`).

use crate::error::ApiError;
use crate::protocol::WorkOutcome;
use crate::task::Task;
use kiln::core::finance::OptionType;
use kiln::finance::implied::Quote;
use kiln::Runtime;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The job kind.
pub const KIND: &str = "implied_vol";

/// The fields a quote may have.
const FIELDS: [&str; 8] = [
    "type",
    "option_type",
    "price",
    "spot",
    "strike",
    "maturity",
    "rate",
    "dividend",
];

/// One quote as the task stores it (`Quote` with its type as a flag).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct QuoteRow {
    /// A put (else a call).
    pub put: bool,
    /// The discounted price.
    pub price: f64,
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
}

impl QuoteRow {
    /// As kiln's solver takes it.
    pub fn quote(&self) -> Quote {
        Quote {
            kind: if self.put {
                OptionType::Put
            } else {
                OptionType::Call
            },
            price: self.price,
            spot: self.spot,
            strike: self.strike,
            maturity: self.maturity,
            rate: self.rate,
            dividend: self.dividend,
        }
    }
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidParams(msg.into())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {}

/// A quote object of a job's `inputs.quotes`, its fields read with the errors every quote
/// kind words the same way (`implied_vol`, `calibrate`); `at` names it (`inputs.quotes[3]`).
pub(crate) struct QuoteObject<'a> {
    pub at: String,
    pub obj: &'a serde_json::Map<String, Value>,
}

impl<'a> QuoteObject<'a> {
    /// Element `i`: an object (`shape` lists its fields in the error) with no field outside
    /// `fields` (`field_list` names them in the error).
    pub(crate) fn open(
        i: usize,
        v: &'a Value,
        shape: &str,
        fields: &[&str],
        field_list: &str,
    ) -> Result<Self, ApiError> {
        let at = format!("inputs.quotes[{i}]");
        let Value::Object(obj) = v else {
            return Err(bad(format!(
                "{at}: {} is not an object; a quote is {shape}",
                crate::task::shown(v)
            )));
        };
        if let Some(k) = obj.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(bad(format!(
                "{at}: unknown field `{k}`; a quote has {field_list}"
            )));
        }
        Ok(Self { at, obj })
    }

    /// `type` (or `option_type`): whether the quote is a put.
    pub(crate) fn put(&self) -> Result<bool, ApiError> {
        let at = &self.at;
        let kind = match (self.obj.get("type"), self.obj.get("option_type")) {
            (Some(_), Some(_)) => return Err(bad(format!("{at}: give type or option_type, not both"))),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => return Err(bad(format!("{at}.type is missing (call or put)"))),
        };
        match kind.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("call") => Ok(false),
            Some("put") => Ok(true),
            _ => Err(bad(format!(
                "{at}.type: {}; use call or put",
                crate::task::shown(kind)
            ))),
        }
    }

    /// A number field; `default` where it is missing or null, else an error.
    pub(crate) fn num(&self, name: &str, default: Option<f64>) -> Result<f64, ApiError> {
        let at = &self.at;
        match self.obj.get(name) {
            None | Some(Value::Null) => default.ok_or_else(|| bad(format!("{at}.{name} is missing"))),
            Some(v) => v
                .as_f64()
                .ok_or_else(|| bad(format!("{at}.{name}: {} is not a number", crate::task::shown(v)))),
        }
    }

    /// A number field that must be present and > 0.
    pub(crate) fn positive(&self, name: &str) -> Result<f64, ApiError> {
        let x = self.num(name, None)?;
        if x > 0.0 {
            Ok(x)
        } else {
            Err(bad(format!("{}.{name} = {x}; it must be > 0", self.at)))
        }
    }
}

/// One element of `inputs.quotes`, checked field by field.
fn quote_row(i: usize, v: &Value) -> Result<QuoteRow, ApiError> {
    let q = QuoteObject::open(
        i,
        v,
        "{\"type\", \"price\", \"spot\", \"strike\", \"maturity\", \"rate\", \"dividend\"}",
        &FIELDS,
        "type, price, spot, strike, maturity, rate and dividend",
    )?;
    Ok(QuoteRow {
        put: q.put()?,
        price: q.num("price", None)?,
        spot: q.positive("spot")?,
        strike: q.positive("strike")?,
        maturity: q.positive("maturity")?,
        rate: q.num("rate", Some(0.0))?,
        dividend: q.num("dividend", Some(0.0))?,
    })
}

/// Checks an `implied_vol` job and normalizes it into [`Task::ImpliedVol`]; the second
/// value is the job's input elements (its quotes).
pub fn validate(params: &Value, inputs: &Value) -> Result<(Task, u64), ApiError> {
    let _: Params = crate::task::parse("params", params)?;
    let Value::Object(obj) = inputs else {
        return Err(bad("inputs: expected {\"quotes\": [...]}"));
    };
    if let Some(k) = obj.keys().find(|k| k.as_str() != "quotes") {
        return Err(bad(format!("inputs: unknown field `{k}`; expected quotes")));
    }
    let quotes = match obj.get("quotes") {
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
    let rows = quotes
        .iter()
        .enumerate()
        .map(|(i, v)| quote_row(i, v))
        .collect::<Result<Vec<_>, _>>()?;
    let n = rows.len() as u64;
    Ok((Task::ImpliedVol { quotes: rows }, n))
}

/// Runs an [`Task::ImpliedVol`] on `rt` (module docs for the result). A device failure
/// fails the job (a sticky one restarts the worker).
pub fn run(rt: &Runtime, rows: &[QuoteRow]) -> WorkOutcome {
    let quotes: Vec<Quote> = rows.iter().map(QuoteRow::quote).collect();
    let results = match rt.implied_volatility_book(&quotes) {
        Ok(r) => r,
        Err(e) => return crate::exec::kiln_error(&e),
    };
    let vols: Vec<Value> = results
        .iter()
        .map(|r| r.as_ref().map_or(Value::Null, |v| json!(v)))
        .collect();
    let reasons: Vec<&str> = results
        .iter()
        .map(|r| r.as_ref().map_or_else(|e| e.code(), |_| ""))
        .collect();
    let details: Vec<Value> = results
        .iter()
        .map(|r| r.as_ref().map_or_else(|e| json!(e.to_string()), |_| Value::Null))
        .collect();
    let solved = results.iter().filter(|r| r.is_ok()).count();
    WorkOutcome::Ok {
        result: json!({
            "vols": vols,
            "reasons": reasons,
            "details": details,
            "solved": solved,
            "quotes": results.len(),
            "device": rt.device_name(),
        }),
        blobs: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<(Task, u64), ApiError>) -> String {
        match r {
            Err(ApiError::InvalidParams(m)) => m,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn every_element_is_checked_and_the_first_bad_one_named() {
        let good =
            json!({"type": "call", "price": 10.45, "spot": 100, "strike": 100, "maturity": 1, "rate": 0.05});
        let (task, n) = validate(&Value::Null, &json!({"quotes": [good, good]})).unwrap();
        assert_eq!(n, 2);
        let Task::ImpliedVol { quotes } = task else {
            panic!("{task:?}")
        };
        assert_eq!(quotes[1].quote().rate, 0.05);
        assert_eq!(quotes[1].dividend, 0.0);
        let cases: [(Value, &str); 9] = [
            (json!(5), "inputs.quotes[1]: 5 is not an object"),
            (
                json!({"type": "call", "price": 1, "spot": 1, "strike": 1, "maturity": 1, "vol": 0.2}),
                "inputs.quotes[1]: unknown field `vol`",
            ),
            (
                json!({"price": 1, "spot": 1, "strike": 1, "maturity": 1}),
                "inputs.quotes[1].type is missing",
            ),
            (
                json!({"type": "straddle", "price": 1, "spot": 1, "strike": 1, "maturity": 1}),
                "inputs.quotes[1].type: \"straddle\" (a string); use call or put",
            ),
            (
                json!({"type": "put", "price": "x", "spot": 1, "strike": 1, "maturity": 1}),
                "inputs.quotes[1].price: \"x\" (a string) is not a number",
            ),
            (
                json!({"type": "put", "price": 1, "strike": 1, "maturity": 1}),
                "inputs.quotes[1].spot is missing",
            ),
            (
                json!({"type": "put", "price": 1, "spot": 1, "strike": 0, "maturity": 1}),
                "inputs.quotes[1].strike = 0; it must be > 0",
            ),
            (
                json!({"type": "put", "price": 1, "spot": 1, "strike": 1, "maturity": -1}),
                "inputs.quotes[1].maturity = -1; it must be > 0",
            ),
            (
                json!({"option_type": "put", "type": "put", "price": 1, "spot": 1, "strike": 1, "maturity": 1}),
                "inputs.quotes[1]: give type or option_type",
            ),
        ];
        for (q, want) in cases {
            let m = message(validate(&json!({}), &json!({"quotes": [good, q]})));
            assert!(m.contains(want), "wanted `{want}` in: {m}");
        }
        assert!(message(validate(&json!({}), &json!({"quotes": []}))).contains("empty"));
        assert!(message(validate(&json!({"x": 1}), &json!({"quotes": [good]}))).contains("params"));
        assert!(message(validate(&json!({}), &json!({"rows": [good]}))).contains("unknown field `rows`"));
        // a price without a volatility is not a bad element
        let zero = json!({"option_type": "PUT", "price": 0, "spot": 100, "strike": 100, "maturity": 1});
        assert!(validate(&json!({}), &json!({"quotes": [zero]})).is_ok());
    }

    #[test]
    fn the_cpu_worker_gives_kiln_cores_volatilities_and_reasons() {
        use kiln::finance::implied::implied_volatility_book;
        let rows = [
            QuoteRow {
                put: false,
                price: 10.45,
                spot: 100.0,
                strike: 100.0,
                maturity: 1.0,
                rate: 0.05,
                dividend: 0.0,
            },
            QuoteRow {
                put: false,
                price: 1.0,
                spot: 100.0,
                strike: 50.0,
                maturity: 1.0,
                rate: 0.05,
                dividend: 0.0,
            },
        ];
        let WorkOutcome::Ok { result, .. } = run(&Runtime::cpu(), &rows) else {
            panic!("failed")
        };
        let want = implied_volatility_book(&rows.map(|r| r.quote()));
        assert_eq!(result["vols"][0].as_f64(), Some(*want[0].as_ref().unwrap()));
        assert_eq!(result["vols"][1], Value::Null);
        assert_eq!(result["reasons"], json!(["", "below_intrinsic"]));
        assert!(result["details"][1]
            .as_str()
            .unwrap()
            .contains("below the intrinsic value"));
        assert_eq!(
            (result["solved"].as_u64(), result["quotes"].as_u64()),
            (Some(1), Some(2))
        );
        assert_eq!(result["device"], "cpu");
    }
}
