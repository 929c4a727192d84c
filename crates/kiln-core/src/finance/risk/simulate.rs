//! Scenarios drawn from a multivariate normal of the shocks: `N` draws `x = L z` of zero
//! mean and covariance `C = L L^T` (`L` the Cholesky factor of the positive semi-definite
//! `C`), `z` standard normals from Philox ([`philox::normal_f64`] of the seed, stream 0,
//! sample `j` for scenario `j`, step `k` for factor `k`): the same seed gives the same
//! scenarios on every machine and thread count.
//!
//! Each factor is one input of one underlying ([`Factor`]): `spot` is a log return, so the
//! scenario's relative spot shift is `exp(x) - 1` (never a fall of 100% or more); `vol` and
//! `rate` are the absolute shifts themselves. An underlying of `*` is the scenarios' default
//! shock (every underlying not named).

use crate::error::{Error, Result};
use crate::philox;

use super::{Scenario, ScenarioSet, SpotShift};

/// Which input a factor moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactorKind {
    /// The spot's log return (relative shift `exp(x) - 1`).
    Spot,
    /// The volatility's absolute shift.
    Vol,
    /// The rate's absolute shift.
    Rate,
}

impl FactorKind {
    /// `spot`, `vol` or `rate`.
    pub fn name(self) -> &'static str {
        match self {
            FactorKind::Spot => "spot",
            FactorKind::Vol => "vol",
            FactorKind::Rate => "rate",
        }
    }
}

impl std::str::FromStr for FactorKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "spot" => Ok(FactorKind::Spot),
            "vol" | "volatility" => Ok(FactorKind::Vol),
            "rate" => Ok(FactorKind::Rate),
            _ => Err(Error::invalid(
                "covariance",
                format!("unknown factor input `{s}`; use spot, vol or rate"),
            )),
        }
    }
}

/// One factor of the covariance: an underlying's input.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Factor {
    /// The underlying (`*`: every underlying not named).
    pub underlying: String,
    /// The input it moves.
    pub kind: FactorKind,
}

impl std::fmt::Display for Factor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.underlying, self.kind.name())
    }
}

/// The lower Cholesky factor of the `n x n` row-major covariance `cov`, for a positive
/// semi-definite matrix (a pivot within `1e-12` of the largest diagonal entry counts as zero;
/// its column is then zero). An asymmetric, non-finite or not positive semi-definite matrix
/// is an error naming `what` and the entry.
pub fn cholesky_psd(cov: &[f64], n: usize, names: &dyn Fn(usize) -> String, what: &str) -> Result<Vec<f64>> {
    let bad = |reason: String| Err(Error::invalid("covariance", format!("{what}: {reason}")));
    if cov.len() != n * n {
        return bad(format!(
            "{} entries for {n} factors; {} are needed",
            cov.len(),
            n * n
        ));
    }
    let scale = (0..n).map(|i| cov[i * n + i].abs()).fold(0.0, f64::max);
    for i in 0..n {
        for j in 0..n {
            let (a, b) = (cov[i * n + j], cov[j * n + i]);
            if !a.is_finite() {
                return bad(format!(
                    "entry ({}, {}) is {a}, not a finite number",
                    names(i),
                    names(j)
                ));
            }
            if (a - b).abs() > 1e-12 * scale.max(f64::MIN_POSITIVE) {
                return bad(format!(
                    "not symmetric: ({}, {}) = {a} but ({}, {}) = {b}",
                    names(i),
                    names(j),
                    names(j),
                    names(i)
                ));
            }
        }
        if cov[i * n + i] < 0.0 {
            return bad(format!(
                "variance of {} is {}; a covariance matrix has no negative variance",
                names(i),
                cov[i * n + i]
            ));
        }
    }
    let tol = 1e-12 * scale;
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let mut d = cov[j * n + j];
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        if d < -tol.max(1e-300) {
            return bad(format!(
                "not positive semi-definite (the Cholesky pivot of {} is {d:.3e} < 0)",
                names(j)
            ));
        }
        if d <= tol {
            // a factor that is a combination of the ones before: its column stays zero, but
            // every entry below must then be explained by those factors
            for i in j + 1..n {
                let mut s = cov[i * n + j];
                for k in 0..j {
                    s -= l[i * n + k] * l[j * n + k];
                }
                if s.abs() > 1e-9 * scale.max(f64::MIN_POSITIVE) {
                    return bad(format!(
                        "not positive semi-definite ({} has no variance left but covaries with {})",
                        names(j),
                        names(i)
                    ));
                }
            }
            continue;
        }
        let p = d.sqrt();
        l[j * n + j] = p;
        for i in j + 1..n {
            let mut s = cov[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / p;
        }
    }
    Ok(l)
}

/// `count` scenarios named `sim1 .. simN` drawn from the covariance `cov` (row-major, in
/// `factors`' order) with `seed` (module docs). `what` names the matrix's source in errors.
pub fn simulate(factors: &[Factor], cov: &[f64], count: usize, seed: u64, what: &str) -> Result<ScenarioSet> {
    let n = factors.len();
    if n == 0 {
        return Err(Error::invalid("covariance", format!("{what}: no factors")));
    }
    let mut seen = std::collections::HashSet::new();
    for f in factors {
        if !seen.insert(f) {
            return Err(Error::invalid(
                "covariance",
                format!("{what}: factor {f} is named twice"),
            ));
        }
    }
    if u32::try_from(count).is_err() || u32::try_from(n).is_err() {
        return Err(Error::invalid(
            "covariance",
            format!("{what}: at most 2^32 scenarios and factors"),
        ));
    }
    let l = cholesky_psd(cov, n, &|i| factors[i].to_string(), what)?;
    let key = philox::key_from_seed(seed);
    let mut out = Vec::with_capacity(count);
    let mut z = vec![0.0; n];
    for j in 0..count {
        for (k, zk) in z.iter_mut().enumerate() {
            let w = philox::normals4_f64(key, 0, j as u32, (k / 4) as u32);
            *zk = w[k % 4];
        }
        let mut s = Scenario::new(format!("sim{}", j + 1));
        for (i, f) in factors.iter().enumerate() {
            let x: f64 = (0..=i).map(|k| l[i * n + k] * z[k]).sum();
            let mut sh = if f.underlying == super::ALL_UNDERLYINGS {
                s.default
            } else {
                s.shocks.get(&f.underlying).copied().unwrap_or_default()
            };
            match f.kind {
                FactorKind::Spot => sh.spot = SpotShift::Relative(x.exp_m1()),
                FactorKind::Vol => sh.vol = x,
                FactorKind::Rate => sh.rate = x,
            }
            s.set(&f.underlying, sh);
        }
        out.push(s);
    }
    Ok(ScenarioSet { scenarios: out })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(u: &str, k: FactorKind) -> Factor {
        Factor {
            underlying: u.into(),
            kind: k,
        }
    }

    #[test]
    fn draws_have_the_covariance_and_repeat_with_the_seed() {
        let factors = [
            f("A", FactorKind::Spot),
            f("A", FactorKind::Vol),
            f("*", FactorKind::Rate),
        ];
        let cov = [0.04, 0.006, 0.0, 0.006, 0.0025, 0.0, 0.0, 0.0, 1e-4];
        let n = 20_011;
        let set = simulate(&factors, &cov, n, 7, "cov.csv").unwrap();
        assert_eq!(set, simulate(&factors, &cov, n, 7, "cov.csv").unwrap());
        assert_ne!(set, simulate(&factors, &cov, n, 8, "cov.csv").unwrap());
        let x: Vec<[f64; 3]> = set
            .scenarios
            .iter()
            .map(|s| {
                let a = s.shock(Some("A"));
                [a.spot.value().ln_1p(), a.vol, s.default.rate]
            })
            .collect();
        for i in 0..3 {
            for j in 0..3 {
                let c = x.iter().map(|v| v[i] * v[j]).sum::<f64>() / n as f64;
                let sd = (cov[i * 3 + i] * cov[j * 3 + j]).sqrt();
                // sample covariance within 5 standard errors (~ sd / sqrt(n) * sqrt(2))
                assert!(
                    (c - cov[i * 3 + j]).abs() < 5.0 * 1.5 * sd / (n as f64).sqrt(),
                    "{i}{j} {c}"
                );
            }
        }
    }

    #[test]
    fn a_matrix_that_is_not_psd_is_refused_by_name() {
        let factors = [f("A", FactorKind::Spot), f("B", FactorKind::Spot)];
        let e = simulate(&factors, &[1.0, 2.0, 2.0, 1.0], 3, 1, "cov.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cov.csv") && e.contains("positive semi-definite") && e.contains("B:spot"),
            "{e}"
        );
        let e = simulate(&factors, &[1.0, 0.5, 0.4, 1.0], 3, 1, "cov.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not symmetric"), "{e}");
        // a singular but PSD matrix (perfectly correlated) is accepted
        let s = simulate(&factors, &[1.0, 1.0, 1.0, 1.0], 3, 1, "cov.csv").unwrap();
        let a = s.scenarios[1].shock(Some("A")).spot.value();
        assert_eq!(a, s.scenarios[1].shock(Some("B")).spot.value());
    }
}
