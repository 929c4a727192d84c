//! Alert rules evaluated on samples.
//!
//! Each rule is checked for each GPU at every tick. When a (rule, GPU) pair starts or stops
//! firing the engine logs one warn line, sets `kiln_alert_active{rule,gpu}` and, where a
//! webhook is configured, POSTs the transitions as JSON from a background thread (bounded by
//! the webhook's timeout). Rules read only the sample, so tests drive them with scripted
//! samples and their timestamps.

use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::sample::{GpuSample, Sample};
use crate::webhook::Webhook;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;

/// What a rule checks.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Condition {
    /// Free memory below `fraction` of the total.
    FreeMemoryBelow {
        /// 0..1, e.g. 0.2.
        fraction: f64,
    },
    /// Temperature at or above `celsius`.
    TemperatureAtLeast {
        /// °C.
        celsius: u32,
    },
    /// Clocks throttled for longer than `seconds` for a reason not in `ignore`.
    Throttled {
        /// How long the throttling must last.
        seconds: f64,
        /// Reasons that do not count (default: `gpu_idle`, `none`).
        #[serde(default = "default_ignored")]
        ignore: Vec<String>,
    },
    /// A critical Xid event: fires on each new one and holds for `hold_seconds`.
    Xid {
        /// How long the alert stays after the last new Xid (default 300 s).
        #[serde(default = "default_hold")]
        hold_seconds: f64,
    },
    /// Any uncorrectable ECC error since the driver loaded (clears only with a GPU reset).
    UncorrectableEcc,
}

fn default_ignored() -> Vec<String> {
    vec!["gpu_idle".into(), "none".into()]
}

fn default_hold() -> f64 {
    300.0
}

/// A named rule.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Rule {
    /// The `rule` label and the log's name.
    pub name: String,
    /// What it checks.
    #[serde(flatten)]
    pub condition: Condition,
}

/// The alert part of the monitor configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlertConfig {
    /// The rules (default: [`default_rules`]).
    pub rules: Vec<Rule>,
    /// `http://host:port/path` to POST transitions to.
    pub webhook: Option<String>,
    /// Bound on each of connect, write and read, milliseconds (default 2000).
    pub webhook_timeout_ms: u64,
}

impl Default for AlertConfig {
    fn default() -> Self {
        AlertConfig {
            rules: default_rules(),
            webhook: None,
            webhook_timeout_ms: 2000,
        }
    }
}

/// The defaults: free memory < 20%, temperature ≥ 85 °C, throttled > 30 s for a reason
/// other than idle, any Xid, any uncorrectable ECC error.
pub fn default_rules() -> Vec<Rule> {
    let r = |name: &str, condition| Rule {
        name: name.into(),
        condition,
    };
    vec![
        r("gpu_memory_low", Condition::FreeMemoryBelow { fraction: 0.2 }),
        r("gpu_hot", Condition::TemperatureAtLeast { celsius: 85 }),
        r(
            "gpu_throttled",
            Condition::Throttled {
                seconds: 30.0,
                ignore: default_ignored(),
            },
        ),
        r(
            "gpu_xid",
            Condition::Xid {
                hold_seconds: default_hold(),
            },
        ),
        r("gpu_ecc_uncorrectable", Condition::UncorrectableEcc),
    ]
}

impl AlertConfig {
    /// Check names and thresholds.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Error::Invalid {
            what: "alert rules".into(),
            reason,
        };
        let mut seen = std::collections::HashSet::new();
        for r in &self.rules {
            if r.name.is_empty() || !r.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(bad(format!("rule name {:?}: use [A-Za-z0-9_]+", r.name)));
            }
            if !seen.insert(&r.name) {
                return Err(bad(format!("rule name {:?} twice", r.name)));
            }
            let ok = match &r.condition {
                Condition::FreeMemoryBelow { fraction } => (0.0..=1.0).contains(fraction),
                Condition::Throttled { seconds, .. } => seconds.is_finite() && *seconds >= 0.0,
                Condition::Xid { hold_seconds } => hold_seconds.is_finite() && *hold_seconds >= 0.0,
                _ => true,
            };
            if !ok {
                return Err(bad(format!("rule {:?}: threshold out of range", r.name)));
            }
        }
        if let Some(url) = &self.webhook {
            Webhook::new(url, Duration::from_millis(self.webhook_timeout_ms))?;
        }
        Ok(())
    }
}

/// A rule starting or stopping firing for one GPU.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Transition {
    /// Rule name.
    pub rule: String,
    /// NVML index.
    pub gpu: u32,
    /// UUID.
    pub uuid: String,
    /// `true`: started firing; `false`: stopped.
    pub firing: bool,
    /// What was seen, e.g. `temperature 90 C >= 85 C`.
    pub message: String,
    /// The sample's time, ms since the Unix epoch.
    pub timestamp_ms: u64,
}

#[derive(Default)]
struct GpuState {
    throttled_since_ms: Option<u64>,
    xid_seen: u64,
    last_new_xid_ms: Option<u64>,
    firing: HashMap<String, bool>,
}

/// Evaluates the rules on each sample and remembers what fires.
pub struct AlertEngine {
    rules: Vec<Rule>,
    webhook: Option<Webhook>,
    gpus: HashMap<String, GpuState>,
}

impl std::fmt::Debug for AlertEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlertEngine")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

impl AlertEngine {
    /// An engine for a validated configuration.
    pub fn new(cfg: &AlertConfig) -> Result<AlertEngine> {
        cfg.validate()?;
        let webhook = match &cfg.webhook {
            Some(u) => Some(Webhook::new(u, Duration::from_millis(cfg.webhook_timeout_ms))?),
            None => None,
        };
        Ok(AlertEngine {
            rules: cfg.rules.clone(),
            webhook,
            gpus: HashMap::new(),
        })
    }

    /// Evaluate, log each transition, set the gauges in `metrics` and send the webhook in
    /// the background. Returns the transitions.
    pub fn tick(&mut self, s: &Sample, metrics: Option<&Metrics>) -> Vec<Transition> {
        let t = self.evaluate(s);
        for x in &t {
            if x.firing {
                tracing::warn!(rule = %x.rule, gpu = x.gpu, "alert {} firing on GPU {}: {}", x.rule, x.gpu, x.message);
            } else {
                tracing::warn!(rule = %x.rule, gpu = x.gpu, "alert {} cleared on GPU {}: {}", x.rule, x.gpu, x.message);
            }
        }
        if let Some(m) = metrics {
            for g in &s.gpus {
                if let Some(st) = self.gpus.get(&g.uuid) {
                    for r in &self.rules {
                        let on = st.firing.get(&r.name).copied().unwrap_or(false);
                        m.set_alert(&r.name, &g.index.to_string(), on);
                    }
                }
            }
        }
        if let (Some(w), false) = (&self.webhook, t.is_empty()) {
            let w = w.clone();
            let body = webhook_body(&t);
            std::thread::spawn(move || {
                if let Err(e) = w.post(&body) {
                    tracing::warn!("alert webhook not delivered: {e}");
                }
            });
        }
        t
    }

    /// Evaluate every rule on `s` and return what started or stopped firing (no side
    /// effects beyond the engine's own state).
    pub fn evaluate(&mut self, s: &Sample) -> Vec<Transition> {
        let mut out = Vec::new();
        let now = s.timestamp_ms;
        for g in &s.gpus {
            let st = self.gpus.entry(g.uuid.clone()).or_default();
            let xid = g.xid_total();
            if xid > st.xid_seen {
                st.last_new_xid_ms = Some(now);
            }
            st.xid_seen = st.xid_seen.max(xid);
            for r in &self.rules {
                let (on, message) = check(&r.condition, g, st, now);
                let was = st.firing.insert(r.name.clone(), on).unwrap_or(false);
                if on != was {
                    out.push(Transition {
                        rule: r.name.clone(),
                        gpu: g.index,
                        uuid: g.uuid.clone(),
                        firing: on,
                        message,
                        timestamp_ms: now,
                    });
                }
            }
        }
        out
    }

    /// The rules and GPUs firing now, as `(rule, gpu index)`.
    pub fn active(&self, s: &Sample) -> Vec<(String, u32)> {
        let mut v = Vec::new();
        for g in &s.gpus {
            if let Some(st) = self.gpus.get(&g.uuid) {
                for r in &self.rules {
                    if st.firing.get(&r.name) == Some(&true) {
                        v.push((r.name.clone(), g.index));
                    }
                }
            }
        }
        v
    }
}

/// The webhook's JSON body: `{"source": "kiln", "alerts": [transition, ...]}`.
pub fn webhook_body(t: &[Transition]) -> serde_json::Value {
    serde_json::json!({ "source": "kiln", "alerts": t })
}

fn check(c: &Condition, g: &GpuSample, st: &mut GpuState, now: u64) -> (bool, String) {
    match c {
        Condition::FreeMemoryBelow { fraction } => match g.free_fraction() {
            Some(f) => (
                f < *fraction,
                format!(
                    "free memory {:.1}% (threshold {:.0}%)",
                    f * 100.0,
                    fraction * 100.0
                ),
            ),
            None => (false, "free memory unknown".into()),
        },
        Condition::TemperatureAtLeast { celsius } => match g.temperature_c {
            Some(t) => (
                t >= *celsius,
                format!("temperature {t} C (threshold {celsius} C)"),
            ),
            None => (false, "temperature unknown".into()),
        },
        Condition::Throttled { seconds, ignore } => {
            let reasons: Vec<&str> = g
                .throttle_reasons
                .iter()
                .map(String::as_str)
                .filter(|r| !ignore.iter().any(|i| i == r))
                .collect();
            if reasons.is_empty() {
                st.throttled_since_ms = None;
                return (false, "not throttled".into());
            }
            let since = *st.throttled_since_ms.get_or_insert(now);
            let secs = now.saturating_sub(since) as f64 / 1e3;
            (
                secs > *seconds,
                format!("throttled for {secs:.0} s ({})", reasons.join(", ")),
            )
        }
        Condition::Xid { hold_seconds } => {
            let recent = st
                .last_new_xid_ms
                .is_some_and(|t| (now.saturating_sub(t) as f64) / 1e3 < *hold_seconds);
            let codes: Vec<String> = g
                .xid_counts
                .iter()
                .map(|(c, n)| format!("Xid {c} x{n}"))
                .collect();
            (
                recent,
                if codes.is_empty() {
                    "no Xid".into()
                } else {
                    codes.join(", ")
                },
            )
        }
        Condition::UncorrectableEcc => match g.ecc_uncorrected {
            Some(n) => (n > 0, format!("{n} uncorrectable ECC errors")),
            None => (false, "ECC counts unknown".into()),
        },
    }
}
