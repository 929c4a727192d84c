//! What a scenario's [`Shock`] does to each kind of option: every spot, volatility and rate
//! field of the kind moves, nothing else does (strikes, barriers, maturities, dividends,
//! correlations and Heston's `kappa`, `xi`, `rho` stay).
//!
//! - Black-Scholes options ([`shock_plain`]) and American options ([`shock_american`]):
//!   spot, volatility and rate by the option's underlying's shock.
//! - Heston options ([`shock_heston`]): spot and rate as above; a volatility shock `dv`
//!   moves the volatility levels the model starts from and reverts to, `sqrt(v0)` and
//!   `sqrt(theta)`, by `dv`: `v0' = (sqrt(v0) + dv)^2`, `theta' = (sqrt(theta) + dv)^2`
//!   (so `dv = 0.05` is five vol points on both the instantaneous and the long-run
//!   volatility); `sqrt(v0) + dv < 0` or `sqrt(theta) + dv <= 0` is an error.
//! - Basket options ([`shock_basket`]): each asset's spot and volatility by the shock of the
//!   underlying its name gives (an unnamed asset takes the scenario's default), the rate by
//!   the shock of the basket's own underlying (the option's, as for the other kinds).

use crate::error::Result;
use crate::finance::american::rainbow::AmericanRainbowSpec;
use crate::finance::american::AmericanSpec;
use crate::finance::basket::{BasketAsset, BasketSpec};
use crate::finance::heston::HestonSpec;
use crate::finance::OptionSpec;

use super::Shock;

/// A Black-Scholes option under `shock`; `what` names the option in an error.
pub fn shock_plain(spec: &OptionSpec, shock: &Shock, what: &dyn Fn() -> String) -> Result<OptionSpec> {
    let mut out = *spec;
    out.spot = shock.apply_spot(spec.spot, what)?;
    out.volatility = shock.apply_vol(spec.volatility, false, what)?;
    out.rate = spec.rate + shock.rate;
    Ok(out)
}

/// An American option under `shock`.
pub fn shock_american(spec: &AmericanSpec, shock: &Shock, what: &dyn Fn() -> String) -> Result<AmericanSpec> {
    let mut out = *spec;
    out.spot = shock.apply_spot(spec.spot, what)?;
    out.volatility = shock.apply_vol(spec.volatility, false, what)?;
    out.rate = spec.rate + shock.rate;
    Ok(out)
}

/// A Heston option under `shock` (module docs: the volatility shock moves `sqrt(v0)` and
/// `sqrt(theta)`).
pub fn shock_heston(spec: &HestonSpec, shock: &Shock, what: &dyn Fn() -> String) -> Result<HestonSpec> {
    let mut out = *spec;
    out.option.spot = shock.apply_spot(spec.option.spot, what)?;
    out.option.rate = spec.option.rate + shock.rate;
    if shock.vol != 0.0 {
        let v0 = shock.apply_vol(spec.heston.v0.max(0.0).sqrt(), true, &|| {
            format!("{} (Heston sqrt(v0))", what())
        })?;
        let th = shock.apply_vol(spec.heston.theta.max(0.0).sqrt(), false, &|| {
            format!("{} (Heston sqrt(theta))", what())
        })?;
        out.heston.v0 = v0 * v0;
        out.heston.theta = th * th;
        // the spec's own volatility is not used under Heston; keep it the long-run level
        out.option.volatility = th;
    }
    Ok(out)
}

/// Assets (a basket's or a rainbow's) under the shocks `asset_shock(name)` (`None`: an
/// unnamed asset), each spot and volatility moved; `what` names the option in errors.
pub fn shock_assets(
    assets: &[BasketAsset],
    asset_shock: &dyn Fn(Option<&str>) -> Shock,
    what: &dyn Fn() -> String,
) -> Result<Vec<BasketAsset>> {
    let mut out = assets.to_vec();
    for (i, a) in out.iter_mut().enumerate() {
        let sh = asset_shock(a.name.as_deref());
        let label = || match &a.name {
            Some(n) => format!("{}, asset `{n}`", what()),
            None => format!("{}, asset {}", what(), i + 1),
        };
        let (s, v) = (a.spot, a.volatility);
        a.spot = sh.apply_spot(s, &label)?;
        a.volatility = sh.apply_vol(v, true, &label)?;
    }
    Ok(out)
}

/// A basket option under the shocks `asset_shock(name)` of its assets (`None`: an unnamed
/// asset) and `own`, its own underlying's shock, for the rate.
pub fn shock_basket(
    spec: &BasketSpec,
    own: &Shock,
    asset_shock: &dyn Fn(Option<&str>) -> Shock,
    what: &dyn Fn() -> String,
) -> Result<BasketSpec> {
    Ok(BasketSpec {
        rate: spec.rate + own.rate,
        assets: shock_assets(&spec.assets, asset_shock, what)?,
        ..spec.clone()
    })
}

/// An American rainbow under the shocks of its assets and `own`'s rate shock, as
/// [`shock_basket`] moves a basket.
pub fn shock_rainbow(
    spec: &AmericanRainbowSpec,
    own: &Shock,
    asset_shock: &dyn Fn(Option<&str>) -> Shock,
    what: &dyn Fn() -> String,
) -> Result<AmericanRainbowSpec> {
    Ok(AmericanRainbowSpec {
        rate: spec.rate + own.rate,
        assets: shock_assets(&spec.assets, asset_shock, what)?,
        ..spec.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finance::basket::{BasketAsset, BasketAverage};
    use crate::finance::heston::HestonParams;
    use crate::finance::risk::SpotShift;
    use crate::finance::OptionType;

    fn what() -> String {
        "option 1".into()
    }

    #[test]
    fn every_spot_vol_and_rate_field_moves() {
        let sh = Shock {
            spot: SpotShift::Relative(-0.2),
            vol: 0.05,
            rate: 0.01,
        };
        let p = OptionSpec::european(OptionType::Call, 50.0, 55.0, 0.02, 0.01, 0.3, 0.7);
        let q = shock_plain(&p, &sh, &what).unwrap();
        assert_eq!((q.spot, q.volatility, q.rate), (40.0, 0.3 + 0.05, 0.02 + 0.01));
        assert_eq!((q.strike, q.dividend, q.maturity), (55.0, 0.01, 0.7));
        let h = HestonSpec {
            option: p,
            heston: HestonParams {
                kappa: 2.0,
                theta: 0.09,
                xi: 0.4,
                rho: -0.5,
                v0: 0.04,
            },
        };
        let g = shock_heston(&h, &sh, &what).unwrap();
        assert!((g.heston.v0 - 0.25f64 * 0.25).abs() < 1e-15);
        assert!((g.heston.theta - 0.35f64 * 0.35).abs() < 1e-15);
        assert_eq!((g.option.spot, g.heston.kappa, g.heston.rho), (40.0, 2.0, -0.5));
        let down = Shock { vol: -0.25, ..sh };
        let e = shock_heston(&h, &down, &what).unwrap_err().to_string();
        assert!(e.contains("sqrt(v0)") && e.contains("option 1"), "{e}");
        let b = BasketSpec {
            kind: OptionType::Put,
            strike: 100.0,
            rate: 0.03,
            maturity: 1.0,
            average: BasketAverage::Arithmetic,
            assets: vec![
                BasketAsset::new(100.0, 0.2, 0.0, 0.5).named("AAA"),
                BasketAsset::new(80.0, 0.3, 0.0, 0.5),
            ],
            correlation: vec![1.0, 0.3, 0.3, 1.0],
        };
        let by = |n: Option<&str>| match n {
            Some("AAA") => sh,
            _ => Shock {
                spot: SpotShift::Absolute(5.0),
                ..Shock::default()
            },
        };
        let own = Shock {
            rate: -0.01,
            ..Shock::default()
        };
        let c = shock_basket(&b, &own, &by, &what).unwrap();
        assert_eq!((c.assets[0].spot, c.assets[1].spot), (80.0, 85.0));
        assert_eq!(
            (c.assets[0].volatility, c.assets[1].volatility),
            (0.2 + 0.05, 0.3)
        );
        assert_eq!(c.rate, 0.03 - 0.01);
        let crash = |_: Option<&str>| Shock {
            spot: SpotShift::Absolute(-90.0),
            ..Shock::default()
        };
        let e = shock_basket(&b, &own, &crash, &what).unwrap_err().to_string();
        assert!(e.contains("asset 2") && e.contains("must be > 0"), "{e}");
        // a rainbow's assets and rate move as the basket's, the rest is kept
        let r = AmericanRainbowSpec {
            kind: OptionType::Call,
            extreme: crate::finance::rainbow::Extreme::Max,
            strike: 100.0,
            rate: 0.03,
            maturity: 1.0,
            exercise_dates: 12,
            assets: b.assets.clone(),
            correlation: b.correlation.clone(),
        };
        let m = shock_rainbow(&r, &own, &by, &what).unwrap();
        assert_eq!((m.assets.clone(), m.rate), (c.assets.clone(), c.rate));
        assert_eq!(
            AmericanRainbowSpec {
                assets: r.assets.clone(),
                rate: r.rate,
                ..m
            },
            r
        );
        let e = shock_rainbow(&r, &own, &crash, &what).unwrap_err().to_string();
        assert!(e.contains("asset 2") && e.contains("must be > 0"), "{e}");
    }
}
