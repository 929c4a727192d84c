//! Power read-out and the validated power-limit setter behind `kiln power`.
//!
//! Setting a limit changes the card for every user until reset, so the setter checks the
//! value against NVML's constraints first and needs root (NVML says `NoPermission`
//! otherwise); the CLI also demands `--yes`.

use crate::error::{Error, Result};
use crate::nvml::nvml;
use serde::Serialize;

/// One GPU's power figures, watts.
#[derive(Clone, Debug, Serialize)]
pub struct PowerInfo {
    /// NVML index.
    pub index: u32,
    /// UUID.
    pub uuid: String,
    /// Product name.
    pub model: String,
    /// Draw now.
    pub usage_w: Option<f64>,
    /// Enforced limit (the lowest of every limiter).
    pub enforced_limit_w: Option<f64>,
    /// The power-management limit set on the card.
    pub limit_w: Option<f64>,
    /// The card's default limit.
    pub default_limit_w: Option<f64>,
    /// Lowest settable limit.
    pub min_limit_w: Option<f64>,
    /// Highest settable limit.
    pub max_limit_w: Option<f64>,
}

fn watts(mw: u32) -> f64 {
    mw as f64 / 1e3
}

/// Every GPU's power figures (the ones the driver reports).
pub fn power_info() -> Result<Vec<PowerInfo>> {
    let nvml = nvml()?;
    let count = nvml.device_count().map_err(|e| Error::Nvml {
        what: "device count".into(),
        reason: e.to_string(),
    })?;
    let mut out = Vec::new();
    for index in 0..count {
        let Ok(d) = nvml.device_by_index(index) else {
            continue;
        };
        let c = d.power_management_limit_constraints().ok();
        out.push(PowerInfo {
            index,
            uuid: d.uuid().unwrap_or_default(),
            model: d.name().unwrap_or_default(),
            usage_w: d.power_usage().ok().map(watts),
            enforced_limit_w: d.enforced_power_limit().ok().map(watts),
            limit_w: d.power_management_limit().ok().map(watts),
            default_limit_w: d.power_management_limit_default().ok().map(watts),
            min_limit_w: c.as_ref().map(|c| watts(c.min_limit)),
            max_limit_w: c.as_ref().map(|c| watts(c.max_limit)),
        });
    }
    Ok(out)
}

/// Check `watts` against the card's limits (watts) and convert it to NVML's milliwatts.
pub fn validate_power_limit(watts: f64, min_w: f64, max_w: f64) -> Result<u32> {
    let bad = |reason: String| Error::Invalid {
        what: "power limit".into(),
        reason,
    };
    if !watts.is_finite() || watts <= 0.0 {
        return Err(bad(format!("{watts} W is not a positive number")));
    }
    if watts < min_w || watts > max_w {
        return Err(bad(format!(
            "{watts} W is outside the card's range {min_w}..={max_w} W"
        )));
    }
    Ok((watts * 1e3).round() as u32)
}

/// Set GPU `index`'s power-management limit to `watts` after validating it. Needs root.
/// Returns the limit now enforced, watts.
pub fn set_power_limit(index: u32, watts: f64) -> Result<f64> {
    let nvml = nvml()?;
    let nv = |what: &str, e: nvml_wrapper::error::NvmlError| Error::Nvml {
        what: format!("{what} of GPU {index}"),
        reason: e.to_string(),
    };
    let mut d = nvml.device_by_index(index).map_err(|e| nv("device handle", e))?;
    let c = d
        .power_management_limit_constraints()
        .map_err(|e| nv("power limit constraints", e))?;
    let mw = validate_power_limit(watts, self::watts(c.min_limit), self::watts(c.max_limit))?;
    d.set_power_management_limit(mw)
        .map_err(|e| nv("set power limit (needs root)", e))?;
    d.enforced_power_limit()
        .map(self::watts)
        .map_err(|e| nv("enforced power limit", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_against_the_range() {
        assert_eq!(validate_power_limit(500.0, 200.0, 700.0).ok(), Some(500_000));
        assert!(validate_power_limit(100.0, 200.0, 700.0).is_err());
        assert!(validate_power_limit(701.0, 200.0, 700.0).is_err());
        assert!(validate_power_limit(f64::NAN, 200.0, 700.0).is_err());
        assert!(validate_power_limit(-5.0, 0.0, 700.0).is_err());
    }
}
