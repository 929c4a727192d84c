//! Throughput calibration: how many work units a second each device runs of each workload,
//! measured by a short probe, kept in memory and in a JSON file next to the kernel cache
//! (`<cache_dir>/executor-calibration.json`), and refreshed when a run measures a rate that
//! has drifted from the stored one by more than a threshold.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use kiln_core::{Config, Error, Result};

/// The file name of the on-disk calibration store, under the config's `cache_dir` (the
/// kernel cache's directory).
pub const CALIBRATION_FILE: &str = "executor-calibration.json";

/// The relative change of a measured rate that replaces the stored one (25%).
pub const DEFAULT_DRIFT: f64 = 0.25;

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Stored {
    /// `device|workload` -> units per second.
    rates: BTreeMap<String, f64>,
}

/// Calibrated rates (work units per second) by device and workload.
#[derive(Debug)]
pub struct Calibrations {
    file: Option<PathBuf>,
    rates: Mutex<BTreeMap<String, f64>>,
}

fn key(device: &str, workload: &str) -> String {
    format!("{device}|{workload}")
}

impl Calibrations {
    /// A store that lives in memory only (tests, one-off runs).
    pub fn in_memory() -> Self {
        Calibrations {
            file: None,
            rates: Mutex::new(BTreeMap::new()),
        }
    }

    /// The store in `dir` ([`CALIBRATION_FILE`]), loaded now if it exists. A file that
    /// cannot be read or parsed is ignored with a warning (it is a cache: the next
    /// calibration rewrites it).
    pub fn in_dir(dir: &Path) -> Self {
        let file = dir.join(CALIBRATION_FILE);
        let rates = match std::fs::read(&file) {
            Ok(bytes) => match serde_json::from_slice::<Stored>(&bytes) {
                Ok(s) => s
                    .rates
                    .into_iter()
                    .filter(|(_, r)| r.is_finite() && *r > 0.0)
                    .collect(),
                Err(e) => {
                    tracing::warn!("ignoring {}: {e}", file.display());
                    BTreeMap::new()
                }
            },
            Err(_) => BTreeMap::new(),
        };
        Calibrations {
            file: Some(file),
            rates: Mutex::new(rates),
        }
    }

    /// The store next to `config`'s kernel cache.
    pub fn for_config(config: &Config) -> Self {
        Calibrations::in_dir(&config.cache_dir)
    }

    /// The file it persists to, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The stored rate of `workload` on `device`.
    pub fn get(&self, device: &str, workload: &str) -> Option<f64> {
        self.rates.lock().ok()?.get(&key(device, workload)).copied()
    }

    /// Stores a rate (units per second, finite and > 0) and writes the file (atomically:
    /// a temporary file renamed over it).
    pub fn set(&self, device: &str, workload: &str, rate: f64) -> Result<()> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(Error::invalid(
                "calibration",
                format!("rate {rate} of {workload} on {device} must be finite and > 0"),
            ));
        }
        let snapshot = {
            let mut m = self
                .rates
                .lock()
                .map_err(|_| Error::invalid("calibration", "the store's lock is poisoned"))?;
            m.insert(key(device, workload), rate);
            m.clone()
        };
        if let Some(file) = &self.file {
            write_atomic(file, &Stored { rates: snapshot })?;
        }
        Ok(())
    }

    /// Whether `measured` differs from `stored` by more than `threshold` (relative).
    pub fn drifted(stored: f64, measured: f64, threshold: f64) -> bool {
        (measured / stored - 1.0).abs() > threshold
    }
}

fn write_atomic(file: &Path, s: &Stored) -> Result<()> {
    let io = |e| Error::Io {
        path: file.to_path_buf(),
        source: e,
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let text = serde_json::to_vec_pretty(s).map_err(|e| Error::Cache {
        path: file.to_path_buf(),
        reason: e.to_string(),
    })?;
    let tmp = file.with_extension(format!("json.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, file).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_persist_next_to_the_kernel_cache() {
        let dir = std::env::temp_dir().join(format!("kiln-calib-{}", std::process::id()));
        let c = Calibrations::in_dir(&dir);
        assert_eq!(c.get("cpu", "mc"), None);
        c.set("cpu", "mc", 2.5e6).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.set("cpu", "mc", f64::NAN).is_err());
        let again = Calibrations::in_dir(&dir);
        assert_eq!(again.get("cpu", "mc"), Some(2.5e6));
        assert_eq!(again.get("cuda:0", "mc"), None);
        // a corrupt file is ignored, not fatal
        std::fs::write(dir.join(CALIBRATION_FILE), b"{not json").unwrap_or_default();
        assert_eq!(Calibrations::in_dir(&dir).get("cpu", "mc"), None);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(Calibrations::drifted(100.0, 130.0, 0.25));
        assert!(!Calibrations::drifted(100.0, 80.0, 0.25));
    }
}
