//! The monitor's configuration: a TOML file (`kiln monitor --rules FILE`), defaults
//! otherwise.
//!
//! ```toml
//! period_ms = 1000
//! processes = true
//! [alerts]
//! webhook = "http://127.0.0.1:9099/alerts"
//! [[alerts.rules]]
//! name = "gpu_hot"
//! kind = "temperature_at_least"
//! celsius = 80
//! ```

use crate::alert::AlertConfig;
use crate::error::{Error, Result};
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
    /// Alert rules and webhook.
    pub alerts: AlertConfig,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            period_ms: 1000,
            processes: true,
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
        self.alerts.validate()
    }

    /// The period as a duration.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }
}
