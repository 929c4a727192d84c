//! The monitor's configuration: a TOML file (`kiln monitor --rules FILE`), defaults
//! otherwise.
//!
//! ```toml
//! period_ms = 1000
//! processes = true
//! slow_fields = "background"   # or "inline": every read in the tick
//! energy_every = 5             # background: read the energy counter every 5th tick
//! [alerts]
//! webhook = "http://127.0.0.1:9099/alerts"
//! [[alerts.rules]]
//! name = "gpu_hot"
//! kind = "temperature_at_least"
//! celsius = 80
//! ```

use crate::alert::AlertConfig;
use crate::error::{Error, Result};
use crate::slow::SlowFields;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// Sampling period, rules and webhook.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MonitorConfig {
    /// Sampling period in milliseconds (default 1000, at least 10).
    pub period_ms: u64,
    /// List the processes holding each GPU (default true).
    pub processes: bool,
    /// `background` (default): energy, the clocks and the PCIe counters, and any read a tick
    /// finds slow on this host ([`crate::read`]), run on a second thread and a tick reports
    /// their last value with its age; `inline`: every read in every tick (every field fresh,
    /// the tick pays).
    pub slow_fields: SlowMode,
    /// With `background`: read the energy counter every this many ticks (default 5, 1..=3600).
    pub energy_every: u32,
    /// Alert rules and webhook.
    pub alerts: AlertConfig,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            period_ms: 1000,
            processes: true,
            slow_fields: SlowMode::Background,
            energy_every: 5,
            alerts: AlertConfig::default(),
        }
    }
}

impl MonitorConfig {
    /// Parse and validate TOML text.
    pub fn from_toml(text: &str) -> Result<MonitorConfig> {
        let c: MonitorConfig = toml::from_str(text).map_err(|e| Error::Invalid {
            what: "monitor configuration".into(),
            reason: e.to_string(),
        })?;
        c.validate()?;
        Ok(c)
    }

    /// Read, parse and validate a TOML file.
    pub fn load(path: &Path) -> Result<MonitorConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Invalid {
            what: format!("monitor configuration {}", path.display()),
            reason: e.to_string(),
        })?;
        Self::from_toml(&text)
    }

    /// Check the period and the rules.
    pub fn validate(&self) -> Result<()> {
        if self.period_ms < 10 {
            return Err(Error::Invalid {
                what: "period_ms".into(),
                reason: format!("{} ms is below 10 ms", self.period_ms),
            });
        }
        if !(1..=3600).contains(&self.energy_every) {
            return Err(Error::Invalid {
                what: "energy_every".into(),
                reason: format!("{} ticks is outside 1..=3600", self.energy_every),
            });
        }
        self.alerts.validate()
    }

    /// Where the sampler reads the slow fields.
    pub fn slow(&self) -> SlowFields {
        match self.slow_fields {
            SlowMode::Inline => SlowFields::Inline,
            SlowMode::Background => SlowFields::Background {
                energy_every: self.energy_every,
            },
        }
    }

    /// The period as a duration.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }
}

/// `slow_fields` in the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlowMode {
    /// On the sampler's second thread.
    Background,
    /// In every tick.
    Inline,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn slow_field_keys_parse_and_validate() {
        let c = MonitorConfig::from_toml("").unwrap();
        assert_eq!(c.slow(), SlowFields::Background { energy_every: 5 });
        let c = MonitorConfig::from_toml("slow_fields = \"inline\"").unwrap();
        assert_eq!(c.slow(), SlowFields::Inline);
        let c = MonitorConfig::from_toml("energy_every = 30").unwrap();
        assert_eq!(c.slow(), SlowFields::Background { energy_every: 30 });
        let e = MonitorConfig::from_toml("energy_every = 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("energy_every"), "{e}");
        let e = MonitorConfig::from_toml("slow_fields = \"sometimes\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("slow_fields") || e.contains("unknown variant"), "{e}");
    }
}
