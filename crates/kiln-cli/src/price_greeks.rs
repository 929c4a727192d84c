//! `kiln price --method mc --greeks`: every row's Monte Carlo Greeks by bump and revalue
//! with common random numbers (`Runtime::mc_greeks`, docs/finance.md), each with its
//! standard error. A single-asset row's delta, gamma, vega, theta and rho fill the prices
//! file's columns and their errors the `*_se` columns after them; a basket row's rho and
//! theta do too, and its per-asset delta, gamma and vega go to the `--json` summary
//! (`asset_greeks`), the file's columns staying one number a cell.

use kiln::core::finance::McParams;
use kiln::finance::{BookOption, GreeksParams, McGreeks};
use kiln::Runtime;
use kiln_io::options_csv::{GreekErrors, PriceRecord};
use serde::Serialize;

/// A basket row's Greeks per asset (in its basket file's order), for the `--json` summary.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AssetGreeks {
    /// The row's id.
    pub id: String,
    /// dV/dS_i and their standard errors.
    pub delta: Vec<f64>,
    pub delta_se: Vec<f64>,
    /// d2V/dS_i2 and their standard errors.
    pub gamma: Vec<f64>,
    pub gamma_se: Vec<f64>,
    /// dV/dsigma_i and their standard errors.
    pub vega: Vec<f64>,
    pub vega_se: Vec<f64>,
}

/// The Greeks of one batch of rows (`book`, the first on stream `first`), one result a row.
pub(crate) fn greeks_rows(
    rt: &Runtime,
    book: &[BookOption],
    mc: &McParams,
    first: u32,
) -> anyhow::Result<Vec<kiln::Result<McGreeks>>> {
    Ok(rt.mc_greeks(book, mc, &GreeksParams::default(), first)?)
}

/// Puts `g` into `rec` (replacing the pathwise delta and vega where the engine gave them)
/// and returns the row's standard errors, and for a basket of several assets its per-asset
/// Greeks (the record's delta, gamma and vega cells left empty).
pub(crate) fn apply(rec: &mut PriceRecord, g: &McGreeks) -> (GreekErrors, Option<AssetGreeks>) {
    rec.theta = Some(g.theta.value);
    rec.rho = Some(g.rho.value);
    let mut se = GreekErrors {
        theta: Some(g.theta.std_error),
        rho: Some(g.rho.std_error),
        ..GreekErrors::default()
    };
    if let ([d], [gm], [v]) = (g.delta.as_slice(), g.gamma.as_slice(), g.vega.as_slice()) {
        rec.delta = Some(d.value);
        rec.gamma = Some(gm.value);
        rec.vega = Some(v.value);
        se.delta = Some(d.std_error);
        se.gamma = Some(gm.std_error);
        se.vega = Some(v.std_error);
        return (se, None);
    }
    rec.delta = None;
    rec.gamma = None;
    rec.vega = None;
    let values = |v: &[kiln::finance::Estimate]| v.iter().map(|e| e.value).collect::<Vec<_>>();
    let errors = |v: &[kiln::finance::Estimate]| v.iter().map(|e| e.std_error).collect::<Vec<_>>();
    let assets = AssetGreeks {
        id: rec.id.clone(),
        delta: values(&g.delta),
        delta_se: errors(&g.delta),
        gamma: values(&g.gamma),
        gamma_se: errors(&g.gamma),
        vega: values(&g.vega),
        vega_se: errors(&g.vega),
    };
    (se, Some(assets))
}
