//! Option records: one JSON object per option, the shape both the Python package
//! (`kiln.price`) and the job service (`inputs.options` of a `price` job) take, turned into
//! a [`BookOption`] of the mixed book. One parser for both, so a record means the same
//! thing (the same fields, defaults and error messages) wherever it is sent.
//!
//! A record holds `OptionSpec`'s fields (`option_type, style, spot, strike, rate, dividend,
//! volatility, maturity, fixings, barrier, rebate`) plus `model` (`bs`, the default, or
//! `heston` with `kappa, theta, xi, rho, v0`); `style = "american"` makes an American option
//! (its `fixings` are the exercise dates; none: continuous exercise), `style =
//! "american_barrier_up_out"` (`_up_in`, `_down_out`, `_down_in`) an American barrier
//! option (`barrier` and `rebate` as for the barrier styles, monitored continuously;
//! `fixings` the exercise dates as for `american`) and `style = "basket"`
//! a basket option (`assets`, `correlation`, `average`; see [`book_option`]). The kinds are
//! `kiln price`'s CSV rows (kiln_io::options_csv).
//!
//! [`normalize_record`] applies the defaults the Python layer applies before it calls
//! [`book_option`] (`option_type` call, `style` european, `dividend` 0, a null field not
//! given, unknown fields refused), for callers that take raw JSON, such as the service.
//! [`BookOption::validate`] and [`BookOption::unsupported`] do the checks that need no device,
//! so a caller can refuse a bad option before queueing it.

use kiln_core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln_core::finance::heston::{HestonParams, HestonSpec};
use kiln_core::finance::{OptionSpec, OptionType, Style};
use kiln_core::{Error, Result};
use serde_json::{Map, Value};

use super::{AmericanBarrierSpec, AmericanRainbowSpec, AmericanSpec, BookOption, Extreme, Method};

/// Every field a record may hold.
pub const RECORD_FIELDS: [&str; 20] = [
    "option_type",
    "style",
    "spot",
    "strike",
    "rate",
    "dividend",
    "volatility",
    "maturity",
    "fixings",
    "barrier",
    "rebate",
    "model",
    "kappa",
    "theta",
    "xi",
    "rho",
    "v0",
    "assets",
    "correlation",
    "average",
];

/// Fields a record may leave null (not given), as the Python layer's `_OPTIONAL_FIELDS`.
const OPTIONAL_FIELDS: [&str; 12] = [
    "volatility",
    "fixings",
    "barrier",
    "rebate",
    "model",
    "kappa",
    "theta",
    "xi",
    "rho",
    "v0",
    "correlation",
    "average",
];

/// The Heston fields of a record (`model = "heston"`).
const HESTON: [&str; 5] = ["kappa", "theta", "xi", "rho", "v0"];

/// Why a record is not an option: a message that names the field and what is accepted
/// (callers prefix where the record is: `option 3: ...`, `inputs.options[3]: ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError(pub String);

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RecordError {}

impl From<RecordError> for Error {
    fn from(e: RecordError) -> Error {
        Error::invalid("option record", e.0)
    }
}

/// A raw record with the Python layer's defaults applied: a field that is null is not
/// given (for the fields that may be left out), `option_type` defaults to `call`, `style`
/// to `european`, and a record's `dividend` to 0 (`fixings` and `barrier` to none) unless it
/// is a basket or an American rainbow. A field not in [`RECORD_FIELDS`], or a record that is not an object, is an
/// error. Idempotent: a normalized record comes back unchanged.
pub fn normalize_record(rec: Value) -> std::result::Result<Value, RecordError> {
    let Value::Object(mut m) = rec else {
        return Err(RecordError(format!(
            "a record must be an object with fields {}",
            RECORD_FIELDS.join(", ")
        )));
    };
    if let Some(k) = m.keys().find(|k| !RECORD_FIELDS.contains(&k.as_str())) {
        return Err(RecordError(format!(
            "unknown field `{k}`; a record's fields are {}",
            RECORD_FIELDS.join(", ")
        )));
    }
    for k in OPTIONAL_FIELDS {
        if m.get(k).is_some_and(Value::is_null) {
            m.remove(k);
        }
    }
    for (k, v) in [("option_type", "call"), ("style", "european")] {
        if m.get(k).is_none_or(Value::is_null) {
            m.insert(k.into(), Value::from(v));
        }
    }
    // a basket's and an American rainbow's dividends are their assets'; the rainbow's
    // `fixings` are required, so no default
    if !matches!(
        m.get("style").and_then(Value::as_str),
        Some("basket" | "american_rainbow")
    ) {
        if m.get("dividend").is_none_or(Value::is_null) {
            m.insert("dividend".into(), Value::from(0.0));
        }
        for k in ["fixings", "barrier"] {
            m.entry(k).or_insert(Value::Null);
        }
    }
    Ok(Value::Object(m))
}

/// One record as a book option: `model` (`bs`, the default, or `heston` with `kappa, theta,
/// xi, rho, v0`) and `style` (`american`: the exercise dates are `fixings`, equally spaced,
/// or none for continuous exercise, which Monte Carlo approximates with `default_dates`
/// dates, the run's steps; `basket`: see below), the rest as `OptionSpec`'s fields. The
/// same kinds as `kiln price`'s rows (kiln_io::options_csv).
///
/// A `style = "basket"` record: `option_type`, `strike` (any finite number), `rate`,
/// `maturity`, `average` (`arithmetic`, the default, `geometric`, or `max` / `min`: a
/// rainbow on the largest or smallest `w_i S_i`), `assets` (a list of objects with `spot`,
/// `volatility`, `weight` (negative for a spread's short leg), optionally `dividend` and
/// `name`) and `correlation` (N lists of
/// N, or N² numbers row-major; may be left out for one asset). Its own spot, volatility,
/// dividend, fixings and barrier are its assets' business: giving them is an error, as is
/// any Heston field.
///
/// A `style = "american_rainbow"` record: a basket record's fields (`option_type, strike,
/// rate, maturity, assets, correlation`, parsed the same way), `average` `max` or `min`
/// (required: the extreme of `w_i S_i` it pays on) and `fixings`, the exercise dates (a
/// whole number >= 1, required: kiln prices an American rainbow on its dates by
/// Longstaff-Schwartz and has no continuous-exercise price for it). Monte Carlo only.
///
/// The record's values are checked as far as parsing needs; [`BookOption::validate`] checks
/// the rest.
pub fn book_option(rec: Value, default_dates: u32) -> std::result::Result<BookOption, RecordError> {
    let bad = RecordError;
    let Value::Object(mut m) = rec else {
        return Err(bad("a record must be a dict".into()));
    };
    match m.get("style").and_then(Value::as_str) {
        Some("basket") => return basket_option(m).map_err(bad),
        Some("american_rainbow") => return rainbow_option(m).map_err(bad),
        _ => {}
    }
    for k in ["assets", "correlation", "average"] {
        if m.contains_key(k) {
            return Err(bad(format!(
                "`{k}` belongs to style=\"basket\" and style=\"american_rainbow\" records"
            )));
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
    let style_text = m.get("style").and_then(Value::as_str).unwrap_or("").to_string();
    // `american_barrier_up_out` and the like: the barrier style, American exercise
    let barrier_style = style_text.strip_prefix("american_").and_then(|rest| {
        Style::ALL
            .into_iter()
            .find(|s| s.is_barrier() && s.name() == rest)
    });
    let american = style_text == "american" || barrier_style.is_some();
    if american {
        let carried = barrier_style.map_or("european", Style::name);
        m.insert("style".into(), Value::String(carried.into()));
    }
    let american_fixings = match m.insert("fixings".into(), Value::Null) {
        Some(v) if american && !v.is_null() => Some(whole_dates(&v).ok_or_else(|| {
            bad(format!(
                "fixings (the exercise dates) must be a whole number >= 1, got {v}"
            ))
        })?),
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
                None => default_dates,
            };
            let option = AmericanSpec {
                option_type: spec.option_type,
                spot: spec.spot,
                strike: spec.strike,
                rate: spec.rate,
                dividend: spec.dividend,
                volatility: spec.volatility,
                maturity: spec.maturity,
                exercise_dates: dates,
            };
            let continuous = american_fixings.is_none();
            let Some(style) = barrier_style else {
                return Ok(BookOption::American {
                    spec: option,
                    continuous,
                });
            };
            let barrier = spec.barrier.ok_or_else(|| {
                bad(format!(
                    "style {style_text} needs a barrier level (`barrier`, a number > 0)"
                ))
            })?;
            Ok(BookOption::AmericanBarrier {
                spec: AmericanBarrierSpec {
                    option,
                    style,
                    barrier,
                    rebate: spec.rebate,
                },
                continuous,
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

/// A `style = "basket"` record ([`book_option`]'s docs).
fn basket_option(mut m: Map<String, Value>) -> std::result::Result<BookOption, String> {
    m.remove("style");
    let kind = option_type(&mut m)?;
    let average = match m.remove("average") {
        None | Some(Value::Null) => BasketAverage::Arithmetic,
        Some(Value::String(a)) => a.parse().map_err(|e: Error| e.to_string())?,
        Some(v) => {
            return Err(format!(
                "average must be `arithmetic`, `geometric`, `max` or `min`, got {v}"
            ))
        }
    };
    let a = on_assets(m, "a basket", "average")?;
    Ok(BookOption::Basket(BasketSpec {
        kind,
        strike: a.strike,
        rate: a.rate,
        maturity: a.maturity,
        average,
        assets: a.assets,
        correlation: a.correlation,
    }))
}

/// A `style = "american_rainbow"` record ([`book_option`]'s docs): a basket record's
/// fields with `average` `max` or `min` and `fixings`, the exercise dates, required.
fn rainbow_option(mut m: Map<String, Value>) -> std::result::Result<BookOption, String> {
    m.remove("style");
    let kind = option_type(&mut m)?;
    let extreme = match m.remove("average") {
        Some(Value::String(a)) if a.eq_ignore_ascii_case("max") => Extreme::Max,
        Some(Value::String(a)) if a.eq_ignore_ascii_case("min") => Extreme::Min,
        None | Some(Value::Null) => {
            return Err(
                "an American rainbow needs `average`: `max` or `min` (the extreme of w_i S_i it pays on)"
                    .into(),
            )
        }
        Some(v) => {
            return Err(format!(
                "an American rainbow's average must be `max` or `min`, got {v}"
            ))
        }
    };
    let exercise_dates = match m.remove("fixings") {
        None | Some(Value::Null) => {
            return Err(
                "an American rainbow needs `fixings`, its exercise dates (a whole number >= 1): \
                 kiln prices it on those dates only, it has no continuous-exercise price"
                    .into(),
            )
        }
        Some(v) => {
            let d = whole_dates(&v).ok_or_else(|| {
                format!("fixings (the exercise dates) must be a whole number >= 1, got {v}")
            })?;
            u32::try_from(d).map_err(|_| format!("fixings {d} is too large"))?
        }
    };
    let a = on_assets(m, "an American rainbow", "average, fixings")?;
    Ok(BookOption::AmericanRainbow(AmericanRainbowSpec {
        kind,
        extreme,
        strike: a.strike,
        rate: a.rate,
        maturity: a.maturity,
        exercise_dates,
        assets: a.assets,
        correlation: a.correlation,
    }))
}

/// `fixings` as a count of dates: a whole number >= 1 (an integer or a float with no
/// fraction, as JSON from Python may carry either).
fn whole_dates(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 1.0)
                .map(|f| f as u64)
        })
        .filter(|d| *d >= 1)
}

/// A multi-asset record's `option_type` (default call), removed from `m`.
fn option_type(m: &mut Map<String, Value>) -> std::result::Result<OptionType, String> {
    match m.remove("option_type") {
        None | Some(Value::Null) => Ok(OptionType::Call),
        Some(v) => serde_json::from_value(v).map_err(|e| format!("option_type: {e}")),
    }
}

/// The fields a basket and an American rainbow record share.
struct OnAssets {
    strike: f64,
    rate: f64,
    maturity: f64,
    assets: Vec<BasketAsset>,
    correlation: Vec<f64>,
}

/// `strike, rate, maturity, assets, correlation` of a multi-asset record (`what`: "a
/// basket", ...), `m` holding nothing else once the caller took `option_type` and its own
/// fields (`own`, for the message); any other field given is an error.
fn on_assets(mut m: Map<String, Value>, what: &str, own: &str) -> std::result::Result<OnAssets, String> {
    let num = |m: &Map<String, Value>, k: &str| -> std::result::Result<f64, String> {
        m.get(k)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("{what} needs a number `{k}`"))
    };
    let (strike, rate, maturity) = (num(&m, "strike")?, num(&m, "rate")?, num(&m, "maturity")?);
    let Some(Value::Array(list)) = m.remove("assets") else {
        return Err(format!(
            "{what} needs `assets`: a list of dicts with spot, volatility, weight (dividend, name)"
        ));
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
            return Err(format!("{what} of {n} assets needs `correlation` ({n} x {n})"))
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
                .collect::<std::result::Result<_, _>>()?
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
            "{what} record takes option_type, strike, rate, maturity, {own}, assets and correlation; \
             {} belong to its assets or to other kinds",
            given.join(", ")
        ));
    }
    Ok(OnAssets {
        strike,
        rate,
        maturity,
        assets,
        correlation,
    })
}

impl BookOption {
    /// Checks every field that pricing would check, without pricing: the option spec (and
    /// the style under Heston), the Heston parameters, the American contract, a basket's
    /// assets and its correlation matrix down to positive semi-definiteness (the Cholesky
    /// error names the pivot). The error names the field and what is accepted.
    pub fn validate(&self) -> Result<()> {
        match self {
            BookOption::Plain(s) => s.validate(),
            BookOption::Heston(h) => h.validate(),
            BookOption::American { spec, .. } => spec.validate(),
            BookOption::AmericanBarrier { spec, .. } => spec.validate(),
            BookOption::Basket(b) => b.factor().map(|_| ()),
            BookOption::AmericanRainbow(r) => r.validate().map(|_| ()),
        }
    }

    /// Why `method` cannot price this option, if it cannot: under [`Method::Analytic`], an
    /// arithmetic Asian (Black-Scholes or Heston), any other non-European Heston style, an
    /// arithmetic basket other than a two-asset spread, a rainbow on more than two
    /// assets and any American rainbow have no closed form, and the reason says to use `mc`. Monte
    /// Carlo prices every kind. (Without it the option's slot would get the engine's error
    /// at pricing time; this lets a caller refuse it first.)
    pub fn unsupported(&self, method: Method) -> Option<String> {
        if method == Method::MonteCarlo {
            return None;
        }
        match self {
            BookOption::Plain(s) if !super::supports(method, s.style) => Some(format!(
                "style {} has no closed form; use method mc",
                s.style.name()
            )),
            BookOption::Heston(h) if h.option.style != Style::European => Some(format!(
                "style {} under model heston has no closed form; use method mc",
                h.option.style.name()
            )),
            BookOption::Basket(b) => b.analytic_refusal(),
            BookOption::AmericanRainbow(_) => Some(super::book::RAINBOW_ANALYTIC.into()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> std::result::Result<BookOption, RecordError> {
        book_option(normalize_record(v)?, 16)
    }

    /// `american_barrier_*` records: the barrier style with American exercise; a missing
    /// barrier, a bad rebate and Heston are refused naming the field.
    #[test]
    fn american_barrier_records_parse_and_bad_ones_name_the_field() {
        let rec = |extra: Value| {
            let mut base = json!({"option_type": "put", "style": "american_barrier_down_out",
                "spot": 40.0, "strike": 44.0, "rate": 0.06, "volatility": 0.3, "maturity": 1.0,
                "barrier": 33.0, "rebate": 0.5, "fixings": 50});
            for (k, v) in extra.as_object().unwrap() {
                base[k] = v.clone();
            }
            parse(base)
        };
        let o = rec(json!({})).unwrap();
        let BookOption::AmericanBarrier { spec, continuous } = o else {
            panic!("{o:?}")
        };
        assert!(!continuous);
        assert_eq!(
            (spec.style, spec.barrier, spec.rebate),
            (Style::BarrierDownOut, 33.0, 0.5)
        );
        assert_eq!((spec.option.exercise_dates, spec.option.strike), (50, 44.0));
        assert_eq!(o.kind(), "american barrier");
        let o = rec(json!({"style": "american_barrier_up_in", "fixings": null, "barrier": 46.0})).unwrap();
        assert!(matches!(o, BookOption::AmericanBarrier { spec, continuous: true }
            if spec.option.exercise_dates == 16 && spec.style == Style::BarrierUpIn));
        let e = rec(json!({"barrier": null})).unwrap_err().to_string();
        assert!(
            e.contains("needs a barrier") && e.contains("american_barrier_down_out"),
            "{e}"
        );
        let e = rec(json!({"rebate": -1.0}))
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("rebate = -1"), "{e}");
        let e = rec(json!({"barrier": 0.0}))
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("barrier = 0"), "{e}");
        let e = rec(json!({"fixings": 0})).unwrap_err().to_string();
        assert!(e.contains("fixings"), "{e}");
        let e =
            rec(json!({"model": "heston", "kappa": 1.0, "theta": 0.04, "xi": 0.3, "rho": -0.5, "v0": 0.04}))
                .unwrap_err()
                .to_string();
        assert!(e.contains("heston"), "{e}");
        let e = rec(json!({"style": "american_barrier_sideways"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("american_barrier_sideways"), "{e}");
    }

    /// Defaults fill what the Python layer fills; the kinds come out as the CLI's rows.
    #[test]
    fn records_of_every_kind_parse_with_the_python_defaults() {
        let plain = parse(
            json!({"spot": 100.0, "strike": 95.0, "rate": 0.03, "volatility": 0.2,
            "maturity": 1.0}),
        )
        .unwrap();
        assert_eq!(
            plain,
            BookOption::Plain(OptionSpec::european(
                OptionType::Call,
                100.0,
                95.0,
                0.03,
                0.0,
                0.2,
                1.0
            ))
        );
        let am = parse(
            json!({"option_type": "put", "style": "american", "spot": 36.0, "strike": 40.0,
            "rate": 0.06, "volatility": 0.2, "maturity": 1.0, "fixings": null}),
        )
        .unwrap();
        assert!(matches!(am, BookOption::American { spec, continuous: true } if spec.exercise_dates == 16));
        let h = parse(
            json!({"model": "heston", "spot": 100.0, "strike": 100.0, "rate": 0.0,
            "maturity": 1.0, "kappa": 1.5, "theta": 0.04, "xi": 0.5, "rho": -0.6, "v0": 0.04}),
        )
        .unwrap();
        assert_eq!(h.kind(), "heston");
        let b = parse(
            json!({"style": "basket", "strike": 100.0, "rate": 0.0, "maturity": 1.0,
            "assets": [{"spot": 100.0, "volatility": 0.2, "weight": 0.5},
                       {"spot": 90.0, "volatility": 0.3, "weight": 0.5, "name": "b"}],
            "correlation": [[1.0, 0.5], [0.5, 1.0]]}),
        )
        .unwrap();
        assert_eq!(b.kind(), "basket");
        b.validate().unwrap();
        // normalizing twice changes nothing
        let once = normalize_record(json!({"spot": 1.0, "barrier": null, "model": null})).unwrap();
        assert_eq!(normalize_record(once.clone()).unwrap(), once);
    }

    /// The errors name the field: unknown fields, missing Heston parameters, a correlation
    /// that is not positive definite (its pivot), analytic on an arithmetic basket.
    #[test]
    fn bad_records_name_the_field() {
        let e = normalize_record(json!({"spot": 1.0, "sigma": 0.2})).unwrap_err();
        assert!(e.0.contains("unknown field `sigma`"), "{e}");
        let e = parse(
            json!({"model": "heston", "spot": 100.0, "strike": 100.0, "rate": 0.0,
            "maturity": 1.0, "kappa": 1.5, "theta": 0.04}),
        )
        .unwrap_err();
        assert!(e.0.contains("model heston needs xi, rho, v0"), "{e}");
        let bad = parse(
            json!({"style": "basket", "average": "arithmetic", "strike": 100.0, "rate": 0.0,
            "maturity": 1.0,
            "assets": [{"spot": 100.0, "volatility": 0.2, "weight": 1.0},
                       {"spot": 100.0, "volatility": 0.2, "weight": 1.0},
                       {"spot": 100.0, "volatility": 0.2, "weight": 1.0}],
            "correlation": [[1.0, 0.9, -0.9], [0.9, 1.0, 0.9], [-0.9, 0.9, 1.0]]}),
        )
        .unwrap();
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("not positive definite: pivot 3"), "{e}");
        let e = bad.unsupported(Method::Analytic).unwrap();
        assert!(
            e.contains("average arithmetic has no closed form") && e.contains("mc"),
            "{e}"
        );
        assert!(bad.unsupported(Method::MonteCarlo).is_none());
    }

    /// A spread is a two-asset arithmetic basket with weights (1, -1) and any strike; a
    /// rainbow `average = "max"` or `"min"`; both have closed forms on two assets.
    #[test]
    fn spreads_and_rainbows_are_basket_records() {
        let rec = |average: &str, w2: f64, strike: f64| {
            parse(
                json!({"style": "basket", "average": average, "strike": strike, "rate": 0.02,
                "maturity": 1.0,
                "assets": [{"spot": 100.0, "volatility": 0.2, "weight": 1.0},
                           {"spot": 95.0, "volatility": 0.3, "weight": w2, "name": "short"}],
                "correlation": [[1.0, 0.5], [0.5, 1.0]]}),
            )
            .unwrap()
        };
        for (b, legs) in [
            (rec("arithmetic", -1.0, 0.0), true),
            (rec("arithmetic", -1.0, -5.0), true),
            (rec("min", 1.0, 90.0), false),
        ] {
            b.validate().unwrap();
            assert!(b.unsupported(Method::Analytic).is_none());
            let BookOption::Basket(s) = &b else {
                panic!("{b:?}")
            };
            assert_eq!(s.spread_legs().is_some(), legs);
            assert!(s.price_analytic().unwrap() > 0.0);
        }
        let e = rec("max", -1.0, 90.0).validate().unwrap_err().to_string();
        assert!(
            e.contains("asset `short`: weight = -1") && e.contains("average max"),
            "{e}"
        );
        let e = parse(
            json!({"style": "basket", "average": "median", "strike": 1.0, "rate": 0.0,
            "maturity": 1.0, "assets": [{"spot": 1.0, "volatility": 0.1, "weight": 1.0}]}),
        )
        .unwrap_err();
        assert!(e.0.contains("arithmetic, geometric, max or min"), "{e}");
    }
}

#[cfg(test)]
#[path = "records_rainbow_tests.rs"]
mod rainbow_tests;
