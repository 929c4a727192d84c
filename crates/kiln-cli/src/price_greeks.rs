//! `kiln price --method mc --greeks`: every row's Monte Carlo Greeks by bump and revalue
//! with common random numbers (`Runtime::mc_greeks`, docs/finance.md), each with its
//! standard error. A single-asset row's delta, gamma, vega, theta and rho fill the prices
//! file's columns and their errors the `*_se` columns after them; a basket row's rho and
//! theta do too, and its per-asset delta, gamma and vega (and with `--cross-gamma` its
//! cross gammas) go to the `--json` summary (`asset_greeks`), the file's columns staying one
//! number a cell. The bump sizes and the batch count are [`GreeksParams`]' fields, checked
//! by it.

use kiln::core::finance::McParams;
use kiln::finance::{BookOption, GreeksParams, McGreeks};
use kiln::Runtime;
use kiln_io::options_csv::{GreekErrors, PriceRecord};
use serde::Serialize;

/// The `--greeks` flags: whether to compute them and how ([`GreeksParams`]).
#[derive(clap::Args, Debug, Default)]
pub(crate) struct GreeksFlags {
    /// --method mc: every row's delta, gamma, vega, theta and rho with standard errors by
    /// bump and revalue with common random numbers (see below).
    #[arg(long)]
    pub greeks: bool,
    /// With --greeks: also every basket row's cross gammas d2V/dS_i dS_j (the n x n matrix in
    /// the --json summary's asset_greeks; n(n-1) more valuations a row of n assets).
    #[arg(long, requires = "greeks")]
    pub cross_gamma: bool,
    /// With --greeks: independent batches the paths are split into for the standard errors
    /// (2-4096) [default: 32].
    #[arg(long, value_name = "N", requires = "greeks")]
    pub greeks_batches: Option<u32>,
    /// With --greeks: spot bump relative to each asset's spot, in (0, 0.5] [default: 0.01].
    #[arg(long, value_name = "REL", requires = "greeks")]
    pub spot_bump: Option<f64>,
    /// With --greeks: volatility bump relative to each volatility (heston: to v0), in
    /// (0, 0.5] [default: 0.01].
    #[arg(long, value_name = "REL", requires = "greeks")]
    pub vol_bump: Option<f64>,
    /// With --greeks: rate bump, absolute, in (0, 0.1] [default: 0.001].
    #[arg(long, value_name = "ABS", requires = "greeks")]
    pub rate_bump: Option<f64>,
    /// With --greeks: theta's shortening of the maturity in years (at most half of it is
    /// used) [default: 1/365].
    #[arg(long, value_name = "YEARS", requires = "greeks")]
    pub time_bump: Option<f64>,
}

impl GreeksFlags {
    /// The parameters the flags give, checked (the error names the field and its range).
    pub(crate) fn params(&self) -> kiln::Result<GreeksParams> {
        let d = GreeksParams::default();
        let p = GreeksParams {
            batches: self.greeks_batches.unwrap_or(d.batches),
            spot_bump: self.spot_bump.unwrap_or(d.spot_bump),
            vol_bump: self.vol_bump.unwrap_or(d.vol_bump),
            rate_bump: self.rate_bump.unwrap_or(d.rate_bump),
            time_bump: self.time_bump.unwrap_or(d.time_bump),
            cross_gamma: self.cross_gamma,
        };
        p.validate()?;
        Ok(p)
    }
}

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
    /// With --cross-gamma: the n x n matrix of d2V/dS_i dS_j (the diagonal the gammas) and
    /// its standard errors, as `kiln.price(..., cross_gamma=True)` gives them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_gamma: Option<Vec<Vec<f64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_gamma_se: Option<Vec<Vec<f64>>>,
}

/// The Greeks of one batch of rows (`book`, the first on stream `first`), one result a row.
pub(crate) fn greeks_rows(
    rt: &Runtime,
    book: &[BookOption],
    mc: &McParams,
    params: &GreeksParams,
    first: u32,
) -> anyhow::Result<Vec<kiln::Result<McGreeks>>> {
    Ok(rt.mc_greeks(book, mc, params, first)?)
}

/// Puts `g` into `rec` (replacing the pathwise delta and vega where the engine gave them)
/// and returns the row's standard errors, and for a basket of several assets its per-asset
/// Greeks (the record's delta, gamma and vega cells left empty).
pub(crate) fn apply(rec: &mut PriceRecord, g: &McGreeks, cross: bool) -> (GreekErrors, Option<AssetGreeks>) {
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
    let cross_m = if cross { g.cross_gamma_matrix() } else { None };
    let assets = AssetGreeks {
        id: rec.id.clone(),
        delta: values(&g.delta),
        delta_se: errors(&g.delta),
        gamma: values(&g.gamma),
        gamma_se: errors(&g.gamma),
        vega: values(&g.vega),
        vega_se: errors(&g.vega),
        cross_gamma: cross_m.as_ref().map(|m| m.0.clone()),
        cross_gamma_se: cross_m.map(|m| m.1),
    };
    (se, Some(assets))
}
