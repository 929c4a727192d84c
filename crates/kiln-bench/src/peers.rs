//! Merging `peer_bench.py --json` output (a list of `{workload, peer, ms, ...}`) into a
//! report. A peer row matches a kiln row when its `workload` is the kiln row's
//! `peer_workload` (kiln names each row with the peers' name for the same workload at the
//! same size: `cross4_f32 16384x16384` is `stencil5_16384x16384`) and every numeric field
//! the two share by name (`n`, `paths`, `steps`, `options`, `paths_per_option`) is equal,
//! so a quick peer run never pairs with a full kiln run. The ceilings are compared too:
//! `device_copy` with `copy_f32`, `h2d_pinned` with `h2d_1GiB`.

use crate::schema::{PeerComparison, Report};
use kiln::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// One peer measurement.
#[derive(Clone, Debug, Deserialize)]
pub struct PeerRow {
    /// The peers' workload name.
    pub workload: String,
    /// Which peer (`torch`, `cupy-elementwise`, ...).
    pub peer: String,
    /// Milliseconds.
    pub ms: f64,
    /// The row's other fields (sizes, rates).
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The peers' rows and how many error rows (a peer that failed) were skipped.
pub struct Peers {
    /// Usable rows.
    pub rows: Vec<PeerRow>,
    /// Rows without `peer`/`ms` (`{"workload": ..., "error": ...}`).
    pub errors: Vec<String>,
}

/// Read a `peer_bench.py --json` file.
pub fn load(path: &Path) -> Result<Peers> {
    let bad = |why: String| Error::invalid("bench --peers", format!("{}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let arr = v.as_array().ok_or_else(|| {
        bad("expected a JSON list of {workload, peer, ms, ...} (peer_bench.py --json)".into())
    })?;
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (i, item) in arr.iter().enumerate() {
        if let Some(e) = item.get("error") {
            let w = item.get("workload").and_then(|w| w.as_str()).unwrap_or("?");
            errors.push(format!("{w}: {}", e.as_str().unwrap_or("error")));
            continue;
        }
        let r: PeerRow = serde_json::from_value(item.clone())
            .map_err(|e| bad(format!("row {i}: {e} (needs workload, peer, ms)")))?;
        if !(r.ms.is_finite() && r.ms > 0.0) {
            return Err(bad(format!(
                "row {i} ({} {}): ms = {} is not a positive time",
                r.workload, r.peer, r.ms
            )));
        }
        rows.push(r);
    }
    Ok(Peers { rows, errors })
}

/// A kiln measurement the peers can be compared with.
struct Target<'a> {
    workload: &'a str,
    size: &'a str,
    peer_workload: &'a str,
    params: BTreeMap<String, u64>,
    ms: f64,
}

fn targets(r: &Report) -> Vec<Target<'_>> {
    let mut t: Vec<Target> = r
        .results
        .iter()
        .filter_map(|x| {
            Some(Target {
                workload: &x.workload,
                size: &x.size,
                peer_workload: x.peer_workload.as_deref()?,
                params: x.params.clone(),
                ms: x.median_ms,
            })
        })
        .collect();
    for c in &r.ceilings {
        let (peer, per_elem) = match c.name.as_str() {
            "device_copy" => ("copy_f32", 8.0),
            "h2d_pinned" => ("h2d_1GiB", 4.0),
            _ => continue,
        };
        let mut params = BTreeMap::new();
        params.insert("n".to_string(), (c.bytes / per_elem) as u64);
        t.push(Target {
            workload: &c.name,
            size: "ceiling",
            peer_workload: peer,
            params,
            ms: c.median_ms,
        });
    }
    t
}

fn matches(t: &Target, row: &PeerRow) -> bool {
    row.workload == t.peer_workload
        && row
            .extra
            .iter()
            .all(|(k, v)| match (t.params.get(k), v.as_u64()) {
                (Some(mine), Some(theirs)) => *mine == theirs,
                _ => true,
            })
}

/// Pair every kiln row with every matching peer row; also return the peer workloads that
/// matched nothing (so a renamed workload is noticed).
pub fn merge(r: &Report, peers: &Peers) -> (Vec<PeerComparison>, Vec<String>) {
    let ts = targets(r);
    let mut out = Vec::new();
    let mut unmatched = Vec::new();
    for row in &peers.rows {
        let mut hit = false;
        for t in ts.iter().filter(|t| matches(t, row)) {
            hit = true;
            out.push(PeerComparison {
                workload: t.workload.to_string(),
                size: t.size.to_string(),
                peer_workload: row.workload.clone(),
                peer: row.peer.clone(),
                peer_ms: row.ms,
                kiln_ms: t.ms,
                ratio: t.ms / row.ms,
            });
        }
        if !hit {
            let w = format!("{} ({})", row.workload, row.peer);
            if !unmatched.contains(&w) {
                unmatched.push(w);
            }
        }
    }
    (out, unmatched)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(w: &str, peer: &str, ms: f64, extra: &[(&str, u64)]) -> PeerRow {
        PeerRow {
            workload: w.into(),
            peer: peer.into(),
            ms,
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
                .collect(),
        }
    }

    #[test]
    fn shared_numeric_fields_must_agree() {
        let mut params = BTreeMap::new();
        params.insert("n".to_string(), 1u64 << 28);
        let t = Target {
            workload: "sigmoid_f32",
            size: "2^28",
            peer_workload: "sigmoid_f32",
            params,
            ms: 0.5,
        };
        assert!(matches(
            &t,
            &row("sigmoid_f32", "torch", 0.52, &[("n", 1 << 28), ("GBps", 4000)])
        ));
        assert!(!matches(
            &t,
            &row("sigmoid_f32", "torch", 0.13, &[("n", 1 << 26)])
        ));
        assert!(!matches(&t, &row("sigmoid_f16", "torch", 0.3, &[("n", 1 << 28)])));
        // a field kiln does not have (GBps) never blocks a match
        assert!(matches(&t, &row("sigmoid_f32", "numba", 0.9, &[])));
    }
}
