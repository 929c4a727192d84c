//! The regression gate: a workload regresses when its median is slower than the baseline's
//! median for the same `(workload, size)` by more than the allowed percentage. Rows present
//! on one side only are listed, never failed (a new workload has no baseline yet).

use crate::schema::Report;

/// One regressed workload.
#[derive(Clone, Debug)]
pub struct Regression {
    /// Workload.
    pub workload: String,
    /// Size.
    pub size: String,
    /// The baseline's median ms.
    pub baseline_ms: f64,
    /// This run's median ms.
    pub current_ms: f64,
    /// `(current / baseline - 1) * 100`.
    pub slower_pct: f64,
}

/// What the gate found.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Rows compared.
    pub compared: usize,
    /// Rows slower than allowed.
    pub regressions: Vec<Regression>,
    /// `workload size` in the baseline but not in this run.
    pub missing: Vec<String>,
    /// `workload size` in this run but not in the baseline.
    pub new: Vec<String>,
    /// (baseline device name, this run's) when they differ.
    pub device_changed: Option<(String, String)>,
}

/// Compare `current` with `baseline`, allowing `max_pct` percent.
pub fn check(current: &Report, baseline: &Report, max_pct: f64) -> Outcome {
    let mut o = Outcome::default();
    if current.device_name != baseline.device_name {
        o.device_changed = Some((baseline.device_name.clone(), current.device_name.clone()));
    }
    for b in &baseline.results {
        match current.find(&b.workload, &b.size) {
            None => o.missing.push(format!("{} {}", b.workload, b.size)),
            Some(c) => {
                o.compared += 1;
                let slower_pct = (c.median_ms / b.median_ms - 1.0) * 100.0;
                if slower_pct > max_pct {
                    o.regressions.push(Regression {
                        workload: c.workload.clone(),
                        size: c.size.clone(),
                        baseline_ms: b.median_ms,
                        current_ms: c.median_ms,
                        slower_pct,
                    });
                }
            }
        }
    }
    for c in &current.results {
        if baseline.find(&c.workload, &c.size).is_none() {
            o.new.push(format!("{} {}", c.workload, c.size));
        }
    }
    o
}
