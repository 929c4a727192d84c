//! Options on the maximum or minimum of two lognormal assets in closed form: Stulz's
//! formulas ([`stulz`]; R. Stulz, "Options on the minimum or the maximum of two risky
//! assets: analysis and applications", Journal of Financial Economics 10 (1982) 161-185,
//! in the forward form Haug's "The Complete Guide to Option Pricing Formulas" gives).
//!
//! With the legs' forwards `F_i`, total volatilities `v_i` and correlation `rho`
//! ([`TwoAssets`]), `v^2 = v1^2 - 2 rho v1 v2 + v2^2`, `rho1 = (v1 - rho v2) / v`,
//! `rho2 = (v2 - rho v1) / v`, `d = (ln(F1 / F2) + v^2 / 2) / v`,
//! `y_i = (ln(F_i / K) + v_i^2 / 2) / v_i` and `M` the bivariate normal CDF:
//!
//! ```text
//! call on min = df (F1 M(y1, -d, -rho1) + F2 M(y2, d - v, -rho2) - K M(y1 - v1, y2 - v2, rho))
//! call on max = df (F1 M(y1, d, rho1) + F2 M(y2, v - d, rho2) - K (1 - M(v1 - y1, v2 - y2, rho)))
//! ```
//!
//! The strike-0 calls are the discounted means of the minimum and maximum,
//! `df (F1 N(-d) + F2 N(d - v))` and `df (F1 N(d) + F2 N(v - d))` (Margrabe: the maximum
//! is `X2` plus an exchange option), and puts follow by parity:
//! `put(K) = call(K) - call(0) + df K`. A strike `K <= 0` makes the call the forward
//! `df (E[min or max] - K)` and the put worthless (the minimum of two positive prices is
//! positive). When `v = 0` (equal volatilities, `rho = 1`) the legs keep their ratio and the
//! minimum or maximum is one of them: Black's formula on that leg.

use super::bivariate::bivariate_norm_cdf as m2;
use super::spread::TwoAssets;
use super::{norm_cdf, OptionType};
use crate::error::{Error, Result};

/// Largest or smallest of the legs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Extreme {
    /// `max(X1, X2)`.
    Max,
    /// `min(X1, X2)`.
    Min,
}

/// Black's call: forward `f`, strike `k > 0`, total volatility `v`, discount `df`.
fn black_call(f: f64, k: f64, v: f64, df: f64) -> f64 {
    if v <= 0.0 {
        return df * (f - k).max(0.0);
    }
    let d1 = ((f / k).ln() + 0.5 * v * v) / v;
    df * (f * norm_cdf(d1) - k * norm_cdf(d1 - v))
}

/// Stulz's price of a call or put on the maximum or minimum of two legs with strike `k`
/// (module docs). Both volatilities must be `> 0`: a leg without one makes `y_i`
/// infinite or undefined, and the error says to use Monte Carlo.
pub fn stulz(kind: OptionType, extreme: Extreme, a: &TwoAssets, k: f64) -> Result<f64> {
    if !(a.v1 > 0.0 && a.v2 > 0.0) {
        return Err(Error::invalid(
            "rainbow",
            format!(
                "Stulz's closed form needs both volatilities > 0 (total volatilities {} and {}); use Monte Carlo",
                a.v1, a.v2
            ),
        ));
    }
    let v = (a.v1 * a.v1 - 2.0 * a.rho * a.v1 * a.v2 + a.v2 * a.v2)
        .max(0.0)
        .sqrt();
    let df = a.df;
    let (f1, f2) = (a.f1, a.f2);
    // v = 0 (to rounding): X1 / X2 = F1 / F2 at maturity, so the extreme is one leg
    if v <= 1e-12 * (a.v1 + a.v2) {
        let pick_first = (f1 >= f2) == (extreme == Extreme::Max);
        let (f, vol) = if pick_first { (f1, a.v1) } else { (f2, a.v2) };
        let call = if k > 0.0 {
            black_call(f, k, vol, df)
        } else {
            df * (f - k)
        };
        return Ok(match kind {
            OptionType::Call => call,
            OptionType::Put => (call - df * (f - k)).max(0.0),
        });
    }
    let d = ((f1 / f2).ln() + 0.5 * v * v) / v;
    // discounted E[extreme]: the strike-0 call
    let mean = match extreme {
        Extreme::Min => df * (f1 * norm_cdf(-d) + f2 * norm_cdf(d - v)),
        Extreme::Max => df * (f1 * norm_cdf(d) + f2 * norm_cdf(v - d)),
    };
    if k <= 0.0 {
        return Ok(match kind {
            OptionType::Call => mean - df * k,
            OptionType::Put => 0.0,
        });
    }
    let (rho1, rho2) = ((a.v1 - a.rho * a.v2) / v, (a.v2 - a.rho * a.v1) / v);
    // |rho_i| can exceed 1 by a rounding error when rho = +-1
    let (rho1, rho2) = (rho1.clamp(-1.0, 1.0), rho2.clamp(-1.0, 1.0));
    let y1 = ((f1 / k).ln() + 0.5 * a.v1 * a.v1) / a.v1;
    let y2 = ((f2 / k).ln() + 0.5 * a.v2 * a.v2) / a.v2;
    let call = match extreme {
        Extreme::Min => {
            df * (f1 * m2(y1, -d, -rho1) + f2 * m2(y2, d - v, -rho2) - k * m2(y1 - a.v1, y2 - a.v2, a.rho))
        }
        Extreme::Max => {
            df * (f1 * m2(y1, d, rho1) + f2 * m2(y2, v - d, rho2)
                - k * (1.0 - m2(a.v1 - y1, a.v2 - y2, a.rho)))
        }
    };
    Ok(match kind {
        OptionType::Call => call.max(0.0),
        OptionType::Put => (call - mean + df * k).max(0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)] // a row of the published tables
    fn legs(s1: f64, s2: f64, q1: f64, q2: f64, r: f64, t: f64, v1: f64, v2: f64, rho: f64) -> TwoAssets {
        TwoAssets {
            f1: s1 * ((r - q1) * t).exp(),
            f2: s2 * ((r - q2) * t).exp(),
            v1: v1 * t.sqrt(),
            v2: v2 * t.sqrt(),
            rho,
            df: (-r * t).exp(),
        }
    }

    #[test]
    fn stulz_reproduces_haugs_values() {
        use Extreme::{Max, Min};
        use OptionType::{Call, Put};
        // Haug, "Option Pricing Formulas" (McGraw-Hill, 1998), pp. 56-58 (the last two rows)
        // and the book's VB code and spreadsheet (the first six), as QuantLib's
        // test-suite/basketoption.cpp (testEuroTwoValues) tabulates them: K = 98, S1 = 100,
        // S2 = 105, r = 5%, T = 0.5, sigma = 11% and 16%, rho = 0.63; (q1, q2, value), 4 decimals.
        let haug = [
            (Min, Call, 0.0, 0.0, 4.8177),
            (Max, Call, 0.0, 0.0, 11.6323),
            (Min, Put, 0.0, 0.0, 2.0376),
            (Max, Put, 0.0, 0.0, 0.5731),
            (Min, Call, 0.06, 0.09, 2.9340),
            (Min, Put, 0.06, 0.09, 3.5224),
            (Max, Call, 0.06, 0.09, 8.0701),
            (Max, Put, 0.06, 0.09, 1.2181),
        ];
        for (ext, kind, q1, q2, want) in haug {
            let a = legs(100.0, 105.0, q1, q2, 0.05, 0.5, 0.11, 0.16, 0.63);
            let got = stulz(kind, ext, &a, 98.0).unwrap();
            assert!(
                (got - want).abs() < 1e-4,
                "{ext:?} {kind:?} {q1}: {got} vs {want}"
            );
        }
        // N. Firth's spreadsheet (www.maths.ox.ac.uk/~firth/computing/excel.shtml), as the
        // same QuantLib test tabulates it: K = 100, r = 5%, no dividends, 3 decimals;
        // (extreme, type, S1, S2, T, sigma1, sigma2, rho, value).
        let firth = [
            (Min, Call, 100.0, 100.0, 1.0, 0.30, 0.30, 0.90, 10.898),
            (Min, Call, 100.0, 100.0, 1.0, 0.30, 0.30, 0.50, 6.844),
            (Min, Call, 100.0, 100.0, 1.0, 0.30, 0.30, 0.10, 4.413),
            (Min, Call, 100.0, 100.0, 1.0, 0.50, 0.70, 0.00, 4.981),
            (Min, Call, 100.0, 100.0, 1.0, 0.50, 0.10, 0.50, 4.030),
            (Max, Call, 100.0, 100.0, 1.0, 0.30, 0.30, 0.90, 17.565),
            (Max, Call, 100.0, 100.0, 1.0, 0.30, 0.30, 0.30, 22.932),
            (Max, Call, 80.0, 100.0, 1.0, 0.30, 0.30, 0.30, 16.508),
            (Max, Call, 80.0, 80.0, 1.0, 0.30, 0.30, 0.30, 8.049),
            (Max, Call, 120.0, 120.0, 1.0, 0.30, 0.30, 0.30, 42.889),
            (Min, Put, 100.0, 100.0, 1.0, 0.30, 0.30, 0.90, 11.369),
            (Min, Put, 100.0, 100.0, 1.0, 0.30, 0.30, 0.10, 15.485),
            (Min, Put, 100.0, 100.0, 0.25, 0.30, 0.30, 0.10, 8.881),
            (Min, Put, 100.0, 100.0, 2.0, 0.30, 0.30, 0.10, 19.268),
            (Max, Put, 100.0, 100.0, 1.0, 0.30, 0.30, 0.90, 7.339),
            (Max, Put, 100.0, 100.0, 1.0, 0.30, 0.30, 0.10, 3.223),
        ];
        for (ext, kind, s1, s2, t, v1, v2, rho, want) in firth {
            let a = legs(s1, s2, 0.0, 0.0, 0.05, t, v1, v2, rho);
            let got = stulz(kind, ext, &a, 100.0).unwrap();
            assert!(
                (got - want).abs() < 1.1e-3,
                "{ext:?} {kind:?} {s1} {s2} {rho}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn identities() {
        let a = legs(95.0, 105.0, 0.01, 0.03, 0.04, 0.8, 0.25, 0.35, -0.3);
        for k in [60.0, 100.0, 140.0] {
            // min + max = X1 + X2, so the calls (and the puts) add to two vanilla calls (puts)
            for kind in [OptionType::Call, OptionType::Put] {
                let sum =
                    stulz(kind, Extreme::Min, &a, k).unwrap() + stulz(kind, Extreme::Max, &a, k).unwrap();
                let c1 = black_call(a.f1, k, a.v1, a.df);
                let c2 = black_call(a.f2, k, a.v2, a.df);
                let vanillas = match kind {
                    OptionType::Call => c1 + c2,
                    OptionType::Put => c1 - a.df * (a.f1 - k) + c2 - a.df * (a.f2 - k),
                };
                assert!(
                    (sum - vanillas).abs() < 1e-12 * vanillas,
                    "{k} {kind:?}: {sum} vs {vanillas}"
                );
            }
        }
        // equal volatilities and rho = 1: the extreme is the leg with the larger forward
        let one = legs(100.0, 90.0, 0.0, 0.0, 0.02, 1.0, 0.2, 0.2, 1.0);
        let max = stulz(OptionType::Call, Extreme::Max, &one, 95.0).unwrap();
        assert!((max - black_call(one.f1, 95.0, one.v1, one.df)).abs() < 1e-12);
        // K <= 0: the call is the forward of the extreme less the strike, the put nothing
        let c0 = stulz(OptionType::Call, Extreme::Min, &a, 0.0).unwrap();
        let cneg = stulz(OptionType::Call, Extreme::Min, &a, -5.0).unwrap();
        assert!((cneg - c0 - 5.0 * a.df).abs() < 1e-12);
        assert_eq!(stulz(OptionType::Put, Extreme::Max, &a, -5.0).unwrap(), 0.0);
        // and a small strike is continuous with it
        let tiny = stulz(OptionType::Call, Extreme::Min, &a, 1e-9).unwrap();
        assert!((tiny - c0).abs() < 1e-8);
        let flat = TwoAssets { v1: 0.0, ..a };
        let e = stulz(OptionType::Call, Extreme::Max, &flat, 100.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("volatilities > 0") && e.contains("Monte Carlo"), "{e}");
    }
}
