//! The closed forms a basket may have (the module docs of [`super`] list them): the
//! geometric basket's, Bjerksund-Stensland's (and Kirk's) for a two-asset spread, Stulz's
//! for the max or min of one or two assets; and which engine can run a basket.

use super::{black, BasketAverage, BasketSpec, OP};
use crate::error::{Error, Result};
use crate::finance::rainbow::{stulz, Extreme};
use crate::finance::spread::{bjerksund_stensland, kirk, TwoAssets};

impl BasketSpec {
    /// `(long, short)`: the assets of a two-asset arithmetic basket whose weights have
    /// opposite signs (a spread `|w_long| S_long - |w_short| S_short`); `None` otherwise.
    pub fn spread_legs(&self) -> Option<(usize, usize)> {
        if self.average != BasketAverage::Arithmetic || self.assets.len() != 2 {
            return None;
        }
        let (w0, w1) = (self.assets[0].weight, self.assets[1].weight);
        if w0 > 0.0 && w1 < 0.0 {
            Some((0, 1))
        } else if w0 < 0.0 && w1 > 0.0 {
            Some((1, 0))
        } else {
            None
        }
    }

    /// Assets `i` and `j` as the legs `|w_i| S_i`, `|w_j| S_j` of the two-asset closed
    /// forms: forwards, total volatilities, their correlation and the discount factor.
    pub fn two_assets(&self, i: usize, j: usize) -> TwoAssets {
        let t = self.maturity;
        let fwd = |k: usize| {
            let a = &self.assets[k];
            a.weight.abs() * a.spot * ((self.rate - a.dividend) * t).exp()
        };
        let n = self.assets.len();
        TwoAssets {
            f1: fwd(i),
            f2: fwd(j),
            v1: self.assets[i].volatility * t.sqrt(),
            v2: self.assets[j].volatility * t.sqrt(),
            rho: self.correlation[i * n + j],
            df: (-self.rate * t).exp(),
        }
    }

    /// Why this basket has no closed form in kiln, if it has none (the reason says to use
    /// Monte Carlo); `None` where [`price_analytic`](Self::price_analytic) applies.
    pub fn analytic_refusal(&self) -> Option<String> {
        let n = self.assets.len();
        match self.average {
            BasketAverage::Geometric => None,
            BasketAverage::Arithmetic if self.spread_legs().is_some() => None,
            BasketAverage::Arithmetic => Some(
                "a basket with average arithmetic has no closed form; use method mc (only a two-asset \
                 spread, weights of opposite signs, has one)"
                    .to_string(),
            ),
            BasketAverage::Max | BasketAverage::Min if n <= 2 => None,
            a => Some(format!(
                "a rainbow (average {}) on {n} assets has no closed form (Stulz's covers two); use method mc",
                a.name()
            )),
        }
    }

    /// The closed-form price: the geometric basket's (Black's formula on `G`), a two-asset
    /// spread's by Bjerksund and Stensland (2014), the max or min of one or two assets by
    /// Stulz. Any other basket is an error saying to use Monte Carlo
    /// ([`analytic_refusal`](Self::analytic_refusal)). Validates the spec and its matrix.
    pub fn price_analytic(&self) -> Result<f64> {
        self.factor()?;
        if let Some(why) = self.analytic_refusal() {
            return Err(Error::invalid(OP, why));
        }
        match self.average {
            BasketAverage::Geometric => self.geometric_price(),
            BasketAverage::Arithmetic => {
                let (long, short) = self.spread_legs().expect("checked by analytic_refusal");
                Ok(bjerksund_stensland(
                    self.kind,
                    &self.two_assets(long, short),
                    self.strike,
                ))
            }
            BasketAverage::Max | BasketAverage::Min if self.assets.len() == 1 => {
                // one asset: the extreme is the asset, w S against K
                let a = self.two_assets(0, 0);
                Ok(black(self.kind, a.f1, self.strike, a.v1 * a.v1, a.df))
            }
            average => {
                let extreme = if average == BasketAverage::Max {
                    Extreme::Max
                } else {
                    Extreme::Min
                };
                stulz(self.kind, extreme, &self.two_assets(0, 1), self.strike)
                    .map_err(|e| Error::invalid(OP, e.to_string()))
            }
        }
    }

    /// Kirk's approximation of a two-asset spread (the analytic method uses
    /// Bjerksund-Stensland's, a lower bound closer to the exact value); an error for any
    /// other basket.
    pub fn kirk_price(&self) -> Result<f64> {
        self.factor()?;
        let (long, short) = self.spread_legs().ok_or_else(|| {
            Error::invalid(
                OP,
                "Kirk's formula prices a two-asset arithmetic basket whose weights have opposite signs (a spread)",
            )
        })?;
        Ok(kirk(self.kind, &self.two_assets(long, short), self.strike))
    }

    /// Why the CUDA basket kernel cannot run this basket, if it cannot: it prices
    /// arithmetic and geometric baskets with every weight `> 0` (its control variate is
    /// the geometric basket, which needs them); spreads and rainbows are the CPU engine's.
    /// The reason names the field.
    pub fn gpu_refusal(&self) -> Option<String> {
        if matches!(self.average, BasketAverage::Max | BasketAverage::Min) {
            return Some(format!(
                "average {}: the GPU basket kernel prices arithmetic and geometric baskets only; rainbows run on the CPU",
                self.average.name()
            ));
        }
        self.assets.iter().position(|a| a.weight <= 0.0).map(|i| {
            format!(
                "{}: weight = {}; the GPU basket kernel needs every weight > 0 (its control is the geometric basket); spreads run on the CPU",
                super::asset_label(&self.assets, i),
                self.assets[i].weight
            )
        })
    }
}
