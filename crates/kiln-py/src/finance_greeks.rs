//! `kiln.price(..., greeks=True)`: every option's delta, gamma, vega, theta and rho with
//! their standard errors. Monte Carlo Greeks are `Runtime::mc_greeks` (bump and revalue with
//! common random numbers over independent batches, docs/finance.md), option `i` on stream
//! `first_option + i` as `kiln price --method mc --greeks` computes them, so a book gives the
//! CLI's bits. Closed-form Greeks (`method="analytic"`) are the ones the pricer already
//! returns, with standard error 0; a style without all five is an error naming the style
//! and the missing Greeks, never a silent NaN.

use kiln::core::finance::PriceResult;
use kiln::finance::greeks::Matrix;
use kiln::finance::{BookOption, Estimate, Extreme, GreeksParams, McGreeks};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::invalid;

/// The Greek columns, in the order of the price dict's columns.
pub(crate) const GREEKS: [&str; 5] = ["delta", "gamma", "vega", "theta", "rho"];

/// The Monte Carlo Greeks' knobs as given (None: `GreeksParams::default()`'s value), under
/// `GreeksParams`' field names.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Knobs {
    pub batches: Option<i64>,
    pub spot_bump: Option<f64>,
    pub vol_bump: Option<f64>,
    pub rate_bump: Option<f64>,
    pub time_bump: Option<f64>,
    pub cross_gamma: Option<bool>,
}

impl Knobs {
    /// Whether any knob was given.
    pub fn any(&self) -> bool {
        self.batches.is_some()
            || self.spot_bump.is_some()
            || self.vol_bump.is_some()
            || self.rate_bump.is_some()
            || self.time_bump.is_some()
            || self.cross_gamma.is_some()
    }

    /// The checked parameters; the error names the field and its range.
    pub fn params(&self) -> PyResult<GreeksParams> {
        let d = GreeksParams::default();
        let batches = match self.batches {
            None => d.batches,
            Some(b) => u32::try_from(b)
                .map_err(|_| invalid(format!("mc_greeks: batches = {b}; it must be 2 to 4096")))?,
        };
        let p = GreeksParams {
            batches,
            spot_bump: self.spot_bump.unwrap_or(d.spot_bump),
            vol_bump: self.vol_bump.unwrap_or(d.vol_bump),
            rate_bump: self.rate_bump.unwrap_or(d.rate_bump),
            time_bump: self.time_bump.unwrap_or(d.time_bump),
            cross_gamma: self.cross_gamma.unwrap_or(d.cross_gamma),
        };
        p.validate().map_err(crate::errors::to_py)?;
        Ok(p)
    }
}

/// One option's Greeks per asset: values and standard errors of delta, gamma and vega, and
/// with cross gammas the `n x n` matrices of `d²V/dS_i dS_j` and their errors.
#[derive(Clone, Debug, Default)]
pub(crate) struct PerAsset {
    delta: (Vec<f64>, Vec<f64>),
    gamma: (Vec<f64>, Vec<f64>),
    vega: (Vec<f64>, Vec<f64>),
    cross: Option<(Matrix, Matrix)>,
}

/// The Greek columns of a book: `values[k][i]` and `errors[k][i]` for Greek `GREEKS[k]` of
/// option `i`, and each option's per-asset Greeks.
#[derive(Clone, Debug, Default)]
pub(crate) struct GreekColumns {
    pub values: [Vec<f64>; 5],
    pub errors: [Vec<f64>; 5],
    pub assets: Vec<PerAsset>,
}

impl GreekColumns {
    fn push(&mut self, row: [(f64, f64); 5], assets: PerAsset) {
        for (k, (v, e)) in row.into_iter().enumerate() {
            self.values[k].push(v);
            self.errors[k].push(e);
        }
        self.assets.push(assets);
    }

    /// The columns of Monte Carlo Greeks: a single-asset option's delta, gamma and vega in
    /// the columns, a basket of several assets' as NaN there (one number a cell) and per
    /// asset in `asset_greeks`; theta and rho always in the columns. An option's error is
    /// raised naming its index.
    /// With `cross`, every option's matrix of second spot derivatives too.
    pub fn from_mc(results: Vec<kiln::Result<McGreeks>>, cross: bool) -> PyResult<GreekColumns> {
        let mut cols = GreekColumns::default();
        for (i, g) in results.into_iter().enumerate() {
            let g = g.map_err(|e| {
                let k = crate::errors::kind(&e);
                Python::attach(|py| crate::errors::raise(py, k, format!("option {i}: Greeks: {e}")))
            })?;
            let one = |v: &[Estimate]| match v {
                [e] => (e.value, e.std_error),
                _ => (f64::NAN, f64::NAN),
            };
            let split = |v: &[Estimate]| -> (Vec<f64>, Vec<f64>) {
                (
                    v.iter().map(|e| e.value).collect(),
                    v.iter().map(|e| e.std_error).collect(),
                )
            };
            let row = [
                one(&g.delta),
                one(&g.gamma),
                one(&g.vega),
                (g.theta.value, g.theta.std_error),
                (g.rho.value, g.rho.std_error),
            ];
            let assets = PerAsset {
                delta: split(&g.delta),
                gamma: split(&g.gamma),
                vega: split(&g.vega),
                cross: if cross { g.cross_gamma_matrix() } else { None },
            };
            cols.push(row, assets);
        }
        Ok(cols)
    }

    /// The columns of closed-form Greeks (standard error 0): every option must have all
    /// five, else the error names the option, its style and what is missing.
    pub fn from_analytic(book: &[BookOption], prices: &[PriceResult]) -> PyResult<GreekColumns> {
        let mut cols = GreekColumns::default();
        for (i, (o, p)) in book.iter().zip(prices).enumerate() {
            let got = [p.delta, p.gamma, p.vega, p.theta, p.rho];
            let missing: Vec<&str> = GREEKS
                .iter()
                .zip(got)
                .filter(|(_, g)| g.is_none())
                .map(|(n, _)| *n)
                .collect();
            if !missing.is_empty() {
                return Err(invalid(format!(
                    "option {i}: method=\"analytic\" has no closed-form {} for {}; \
                     use method=\"mc\" with greeks=True (Monte Carlo Greeks by bump and revalue)",
                    missing.join(", "),
                    style_of(o)
                )));
            }
            let v = got.map(|g| g.unwrap_or(f64::NAN));
            let row = v.map(|x| (x, 0.0));
            let assets = PerAsset {
                delta: (vec![v[0]], vec![0.0]),
                gamma: (vec![v[1]], vec![0.0]),
                vega: (vec![v[2]], vec![0.0]),
                cross: None,
            };
            cols.push(row, assets);
        }
        Ok(cols)
    }

    /// Puts the Greek columns (replacing the price's), their `*_se` columns and
    /// `asset_greeks` (a list of dicts of lists, one per option) into `d`.
    pub fn into_dict(self, py: Python<'_>, d: &Bound<'_, PyDict>) -> PyResult<()> {
        for ((name, v), e) in GREEKS.iter().zip(self.values).zip(self.errors) {
            d.set_item(*name, v)?;
            d.set_item(format!("{name}_se"), e)?;
        }
        let list = PyList::empty(py);
        for a in self.assets {
            let x = PyDict::new(py);
            for (name, (v, e)) in [("delta", a.delta), ("gamma", a.gamma), ("vega", a.vega)] {
                x.set_item(name, v)?;
                x.set_item(format!("{name}_se"), e)?;
            }
            if let Some((v, e)) = a.cross {
                x.set_item("cross_gamma", v)?;
                x.set_item("cross_gamma_se", e)?;
            }
            list.append(x)?;
        }
        d.set_item("asset_greeks", list)?;
        Ok(())
    }
}

/// The option's model and style in messages: `european`, `heston asian_arithmetic`,
/// `american`, `basket (max)`, `american rainbow (min)`.
fn style_of(o: &BookOption) -> String {
    match o {
        BookOption::Plain(s) => s.style.name().to_string(),
        BookOption::Heston(h) => format!("heston {}", h.option.style.name()),
        BookOption::American { .. } => "american".to_string(),
        BookOption::AmericanBarrier { spec, .. } => format!("american {}", spec.style.name()),
        BookOption::Basket(b) => format!("basket ({})", b.average.name()),
        BookOption::AmericanRainbow(r) => match r.extreme {
            Extreme::Max => "american rainbow (max)".to_string(),
            Extreme::Min => "american rainbow (min)".to_string(),
        },
    }
}
