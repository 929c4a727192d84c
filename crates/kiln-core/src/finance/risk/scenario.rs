//! Scenarios: a named set of shocks, one [`Shock`] per underlying, and a default for the
//! underlyings a scenario does not name ([`ALL_UNDERLYINGS`], written `*`).
//!
//! A shock moves three market inputs of every option on its underlying:
//! - spot: relative (`S' = S (1 + x)`, `x = -0.1` is a 10% fall) or absolute (`S' = S + x`);
//! - volatility: absolute, per `sqrt(year)` (`sigma' = sigma + dv`, `0.05` is five vol points);
//! - rate: absolute, continuously compounded per year (`r' = r + dr`, `0.0025` is 25 bp).
//!
//! A shocked input that leaves its domain (a spot at or below 0, a volatility at or below 0)
//! is an error naming the option and the scenario, never clipped.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// The underlying name that stands for every underlying a scenario does not name (and for
/// options that name none).
pub const ALL_UNDERLYINGS: &str = "*";

/// How a spot shock moves the price.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum SpotShift {
    /// `S' = S (1 + x)`.
    Relative(f64),
    /// `S' = S + x`, in the underlying's price units.
    Absolute(f64),
}

impl Default for SpotShift {
    fn default() -> Self {
        SpotShift::Relative(0.0)
    }
}

impl SpotShift {
    /// The shocked spot (not checked: see [`Shock::apply_spot`]).
    #[inline]
    pub fn apply(self, s: f64) -> f64 {
        match self {
            SpotShift::Relative(x) => s * (1.0 + x),
            SpotShift::Absolute(x) => s + x,
        }
    }

    /// `relative` or `absolute`.
    pub fn kind_name(self) -> &'static str {
        match self {
            SpotShift::Relative(_) => "relative",
            SpotShift::Absolute(_) => "absolute",
        }
    }

    /// The shift's number.
    pub fn value(self) -> f64 {
        match self {
            SpotShift::Relative(x) | SpotShift::Absolute(x) => x,
        }
    }
}

/// The moves of one underlying's market inputs in one scenario (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Shock {
    /// The spot's move.
    #[serde(default)]
    pub spot: SpotShift,
    /// Added to the volatility, per `sqrt(year)`.
    #[serde(default)]
    pub vol: f64,
    /// Added to the rate, continuously compounded per year.
    #[serde(default)]
    pub rate: f64,
}

impl Shock {
    /// Whether it moves nothing.
    pub fn is_zero(&self) -> bool {
        self.spot.value() == 0.0 && self.vol == 0.0 && self.rate == 0.0
    }

    /// Checks that every number is finite and a relative spot shift is above -1 (a price
    /// cannot fall by 100% or more); the error names the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::invalid("scenario", reason));
        for (name, v) in [
            ("spot_shift", self.spot.value()),
            ("vol_shift", self.vol),
            ("rate_shift", self.rate),
        ] {
            if !v.is_finite() {
                return bad(format!("{name} is {v}; it must be a finite number"));
            }
        }
        if let SpotShift::Relative(x) = self.spot {
            if x <= -1.0 {
                return bad(format!(
                    "spot_shift = {x} (relative); it must be > -1 (a fall of less than 100%)"
                ));
            }
        }
        Ok(())
    }

    /// The shocked spot, `> 0`, or why not (`what` names the option in the message).
    pub fn apply_spot(&self, s: f64, what: &dyn Fn() -> String) -> Result<f64> {
        let v = self.spot.apply(s);
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(Error::invalid(
                "scenario",
                format!(
                    "{}: spot {s} shifted by {} ({}) is {v}; a shocked spot must be > 0",
                    what(),
                    self.spot.value(),
                    self.spot.kind_name()
                ),
            ))
        }
    }

    /// The shocked volatility, `> 0` (`>= 0` when `zero_ok`), or why not.
    pub fn apply_vol(&self, v: f64, zero_ok: bool, what: &dyn Fn() -> String) -> Result<f64> {
        let out = v + self.vol;
        if out.is_finite() && (out > 0.0 || (zero_ok && out == 0.0)) {
            Ok(out)
        } else {
            Err(Error::invalid(
                "scenario",
                format!(
                    "{}: volatility {v} shifted by {} is {out}; a shocked volatility must be {}",
                    what(),
                    self.vol,
                    if zero_ok { ">= 0" } else { "> 0" }
                ),
            ))
        }
    }
}

/// One scenario: a name, the shock of each named underlying, and the default shock for every
/// other underlying (zero unless the scenario gives `*`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scenario {
    /// The scenario's name (unique within its set).
    pub name: String,
    /// The shock of the underlyings not in `shocks`, and of options that name no underlying.
    #[serde(default)]
    pub default: Shock,
    /// The shock of each named underlying.
    #[serde(default)]
    pub shocks: BTreeMap<String, Shock>,
}

impl Scenario {
    /// A scenario that moves nothing.
    pub fn new(name: impl Into<String>) -> Self {
        Scenario {
            name: name.into(),
            ..Scenario::default()
        }
    }

    /// The same scenario with `underlying`'s shock set ([`ALL_UNDERLYINGS`]: the default).
    pub fn with(mut self, underlying: &str, shock: Shock) -> Self {
        self.set(underlying, shock);
        self
    }

    /// Sets `underlying`'s shock ([`ALL_UNDERLYINGS`]: the default).
    pub fn set(&mut self, underlying: &str, shock: Shock) {
        if underlying == ALL_UNDERLYINGS {
            self.default = shock;
        } else {
            self.shocks.insert(underlying.to_string(), shock);
        }
    }

    /// The shock of `underlying` (`None`: the option names none, the default applies).
    pub fn shock(&self, underlying: Option<&str>) -> Shock {
        underlying
            .and_then(|u| self.shocks.get(u))
            .copied()
            .unwrap_or(self.default)
    }
}

/// Scenarios in order; P&L vectors are indexed by position in [`ScenarioSet::scenarios`].
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ScenarioSet {
    /// The scenarios.
    pub scenarios: Vec<Scenario>,
}

impl ScenarioSet {
    /// Number of scenarios.
    pub fn len(&self) -> usize {
        self.scenarios.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.scenarios.is_empty()
    }

    /// Checks every shock ([`Shock::validate`]) and that names are unique and non-empty; the
    /// error names the scenario and the underlying.
    pub fn validate(&self) -> Result<()> {
        let mut seen = std::collections::HashMap::new();
        for (i, s) in self.scenarios.iter().enumerate() {
            if s.name.is_empty() {
                return Err(Error::invalid(
                    "scenario",
                    format!("scenario {i} has an empty name"),
                ));
            }
            if let Some(j) = seen.insert(s.name.as_str(), i) {
                return Err(Error::invalid(
                    "scenario",
                    format!("scenario name `{}` is used by scenarios {j} and {i}", s.name),
                ));
            }
            let named = |u: &str, e: Error| match e {
                Error::InvalidArgument { reason, .. } => Error::invalid(
                    "scenario",
                    format!("scenario `{}`, underlying `{u}`: {reason}", s.name),
                ),
                e => e,
            };
            s.default.validate().map_err(|e| named(ALL_UNDERLYINGS, e))?;
            for (u, sh) in &s.shocks {
                sh.validate().map_err(|e| named(u, e))?;
            }
        }
        Ok(())
    }

    /// Every underlying some scenario names (not `*`), sorted.
    pub fn underlyings(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .scenarios
            .iter()
            .flat_map(|s| s.shocks.keys().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_shocks_named_underlyings_and_defaults_the_rest() {
        let up = Shock {
            spot: SpotShift::Relative(0.1),
            vol: 0.02,
            rate: 0.0,
        };
        let all = Shock {
            spot: SpotShift::Absolute(-3.0),
            ..Shock::default()
        };
        let s = Scenario::new("s1").with("AAA", up).with(ALL_UNDERLYINGS, all);
        assert_eq!(s.shock(Some("AAA")), up);
        assert_eq!(s.shock(Some("BBB")), all);
        assert_eq!(s.shock(None), all);
        assert!((up.spot.apply(100.0) - 110.0).abs() < 1e-12);
        assert_eq!(all.spot.apply(100.0), 97.0);
        let set = ScenarioSet {
            scenarios: vec![s.clone(), Scenario::new("s1")],
        };
        assert!(set.validate().unwrap_err().to_string().contains("`s1` is used"));
        let bad = Scenario::new("crash").with(
            "AAA",
            Shock {
                spot: SpotShift::Relative(-1.0),
                ..Shock::default()
            },
        );
        let e = ScenarioSet { scenarios: vec![bad] }
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`crash`") && e.contains("`AAA`") && e.contains("spot_shift"),
            "{e}"
        );
        let what = || "option 3".to_string();
        let e = all.apply_spot(2.0, &what).unwrap_err().to_string();
        assert!(e.contains("option 3") && e.contains("> 0"), "{e}");
    }
}
