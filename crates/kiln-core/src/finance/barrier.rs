//! Single-barrier options in closed form (Merton; Reiner and Rubinstein 1991), continuously
//! monitored, with a cash rebate, as tabulated in Haug, *The Complete Guide to Option
//! Pricing Formulas* (2nd ed., section 4.17.1): an in-option's rebate is paid at expiry if
//! the barrier was never touched, an out-option's at the moment it is.
//!
//! With cost of carry `b = r - q`, `mu = (b - v^2/2) / v^2`, `lambda = sqrt(mu^2 + 2 r / v^2)`
//! and the terms `A..F` of Haug's formulas (`phi` = +1 call / -1 put, `eta` = +1 down / -1
//! up), each of the eight types is a sum of terms chosen by whether the strike is above the
//! barrier. A spot already past the barrier is knocked: an out-option is worth its rebate
//! now, an in-option the vanilla.

use super::analytic::{bsm, norm_cdf};
use super::{OptionType, Style};

/// Broadie, Glasserman and Kou's (1997) continuity correction: a barrier `h` monitored
/// every `dt` years prices like a continuously monitored barrier moved away from the spot
/// to `h exp(+beta v sqrt(dt))` (up) or `h exp(-beta v sqrt(dt))` (down), with
/// `beta = -zeta(1/2) / sqrt(2 pi) = 0.5825971579...`.
pub fn bgk_shift(h: f64, up: bool, v: f64, dt: f64) -> f64 {
    const BETA: f64 = 0.582_597_157_939_010_6;
    let m = (BETA * v * dt.sqrt()).exp();
    if up {
        h * m
    } else {
        h / m
    }
}

/// The continuously monitored barrier price. `style` is one of the four barrier styles;
/// `h` the barrier, `rebate` the cash rebate (`>= 0`).
#[allow(clippy::too_many_arguments)] // the formula's inputs
pub fn barrier_price(
    kind: OptionType,
    style: Style,
    s: f64,
    x: f64,
    h: f64,
    rebate: f64,
    r: f64,
    q: f64,
    v: f64,
    t: f64,
) -> f64 {
    let (up, is_in) = match style {
        Style::BarrierUpOut => (true, false),
        Style::BarrierUpIn => (true, true),
        Style::BarrierDownOut => (false, false),
        Style::BarrierDownIn => (false, true),
        _ => return bsm(kind, s, x, r, q, v, t).price,
    };
    // Already past the barrier: knocked in (the vanilla) or out (the rebate, paid now).
    if (up && s >= h) || (!up && s <= h) {
        return if is_in {
            bsm(kind, s, x, r, q, v, t).price
        } else {
            rebate
        };
    }
    let b = r - q;
    let vt = v * t.sqrt();
    let mu = (b - 0.5 * v * v) / (v * v);
    let lambda = (mu * mu + 2.0 * r / (v * v)).sqrt();
    let x1 = (s / x).ln() / vt + (1.0 + mu) * vt;
    let x2 = (s / h).ln() / vt + (1.0 + mu) * vt;
    let y1 = (h * h / (s * x)).ln() / vt + (1.0 + mu) * vt;
    let y2 = (h / s).ln() / vt + (1.0 + mu) * vt;
    let z = (h / s).ln() / vt + lambda * vt;
    let phi = kind.sign();
    let eta = if up { -1.0 } else { 1.0 };
    let (carry, df) = (((b - r) * t).exp(), (-r * t).exp());
    let hs = h / s;
    let a = phi * s * carry * norm_cdf(phi * x1) - phi * x * df * norm_cdf(phi * x1 - phi * vt);
    let bb = phi * s * carry * norm_cdf(phi * x2) - phi * x * df * norm_cdf(phi * x2 - phi * vt);
    let c = phi * s * carry * hs.powf(2.0 * (mu + 1.0)) * norm_cdf(eta * y1)
        - phi * x * df * hs.powf(2.0 * mu) * norm_cdf(eta * y1 - eta * vt);
    let d = phi * s * carry * hs.powf(2.0 * (mu + 1.0)) * norm_cdf(eta * y2)
        - phi * x * df * hs.powf(2.0 * mu) * norm_cdf(eta * y2 - eta * vt);
    let e = rebate * df * (norm_cdf(eta * x2 - eta * vt) - hs.powf(2.0 * mu) * norm_cdf(eta * y2 - eta * vt));
    let f = rebate
        * (hs.powf(mu + lambda) * norm_cdf(eta * z)
            + hs.powf(mu - lambda) * norm_cdf(eta * z - 2.0 * eta * lambda * vt));
    let above = x > h;
    use OptionType::{Call, Put};
    match (kind, up, is_in, above) {
        (Call, false, true, true) => c + e,
        (Call, false, true, false) => a - bb + d + e,
        (Call, true, true, true) => a + e,
        (Call, true, true, false) => bb - c + d + e,
        (Put, false, true, true) => bb - c + d + e,
        (Put, false, true, false) => a + e,
        (Put, true, true, true) => a - bb + d + e,
        (Put, true, true, false) => c + e,
        (Call, false, false, true) => a - c + f,
        (Call, false, false, false) => bb - d + f,
        (Call, true, false, true) => f,
        (Call, true, false, false) => a - bb + c - d + f,
        (Put, false, false, true) => a - bb + c - d + f,
        (Put, false, false, false) => f,
        (Put, true, false, true) => bb - d + f,
        (Put, true, false, false) => a - c + f,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use OptionType::{Call, Put};
    use Style::{BarrierDownIn as DI, BarrierDownOut as DO, BarrierUpIn as UI, BarrierUpOut as UO};

    /// Haug's table 4-13 (S = 100, rebate 3, T = 0.5, r = 0.08, b = 0.04): type, barrier,
    /// then (strike, price at vol 0.25, price at vol 0.30) for strikes 90, 100, 110.
    /// QuantLib 1.44's AnalyticBarrierEngine (T = 180/360 exactly) gives the same to 4
    /// decimals; the down-and-in put at H = 100, K = 110, vol 0.30 (the vanilla, as
    /// the spot sits on the barrier) is QuantLib's 12.9712.
    /// A row: type, style, barrier, then (strike, price at vol 0.25, at vol 0.30).
    pub(crate) type Row = (OptionType, Style, f64, [(f64, f64, f64); 3]);
    pub(crate) const HAUG: [Row; 12] = [
        (
            Call,
            DO,
            95.0,
            [
                (90.0, 9.0246, 8.8334),
                (100.0, 6.7924, 7.0285),
                (110.0, 4.8759, 5.4137),
            ],
        ),
        (
            Call,
            DO,
            100.0,
            [(90.0, 3.0, 3.0), (100.0, 3.0, 3.0), (110.0, 3.0, 3.0)],
        ),
        (
            Call,
            UO,
            105.0,
            [
                (90.0, 2.6789, 2.6341),
                (100.0, 2.3580, 2.4389),
                (110.0, 2.3453, 2.4315),
            ],
        ),
        (
            Call,
            DI,
            95.0,
            [
                (90.0, 7.7627, 9.0093),
                (100.0, 4.0109, 5.1370),
                (110.0, 2.0576, 2.8517),
            ],
        ),
        (
            Call,
            DI,
            100.0,
            [
                (90.0, 13.8333, 14.8816),
                (100.0, 7.8494, 9.2045),
                (110.0, 3.9795, 5.3043),
            ],
        ),
        (
            Call,
            UI,
            105.0,
            [
                (90.0, 14.1112, 15.2098),
                (100.0, 8.4482, 9.7278),
                (110.0, 4.5910, 5.8350),
            ],
        ),
        (
            Put,
            DO,
            95.0,
            [
                (90.0, 2.2798, 2.4170),
                (100.0, 2.2947, 2.4258),
                (110.0, 2.6252, 2.6246),
            ],
        ),
        (
            Put,
            DO,
            100.0,
            [(90.0, 3.0, 3.0), (100.0, 3.0, 3.0), (110.0, 3.0, 3.0)],
        ),
        (
            Put,
            UO,
            105.0,
            [
                (90.0, 3.7760, 4.2293),
                (100.0, 5.4932, 5.8032),
                (110.0, 7.5187, 7.5649),
            ],
        ),
        (
            Put,
            DI,
            95.0,
            [
                (90.0, 2.9586, 3.8769),
                (100.0, 6.5677, 7.7989),
                (110.0, 11.9752, 13.3078),
            ],
        ),
        (
            Put,
            DI,
            100.0,
            [
                (90.0, 2.2845, 3.3328),
                (100.0, 5.9085, 7.2636),
                (110.0, 11.6465, 12.9712),
            ],
        ),
        (
            Put,
            UI,
            105.0,
            [
                (90.0, 1.4653, 2.0658),
                (100.0, 3.3721, 4.4226),
                (110.0, 7.0846, 8.3686),
            ],
        ),
    ];

    #[test]
    fn haugs_table_to_four_decimals() {
        for (kind, style, h, rows) in HAUG {
            for (x, p25, p30) in rows {
                for (v, want) in [(0.25, p25), (0.30, p30)] {
                    let got = barrier_price(kind, style, 100.0, x, h, 3.0, 0.08, 0.04, v, 0.5);
                    assert!(
                        (got - want).abs() <= 1.5e-4,
                        "{kind:?} {style:?} H {h} X {x} vol {v}: {got} vs Haug {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn in_plus_out_is_the_vanilla_without_rebate() {
        for kind in [Call, Put] {
            for (h, pair) in [(80.0, (DI, DO)), (125.0, (UI, UO))] {
                for x in [70.0, 95.0, 130.0] {
                    let args = (100.0, x, h, 0.0, 0.03, 0.01, 0.3, 1.5);
                    let p = |st| {
                        barrier_price(
                            kind, st, args.0, args.1, args.2, args.3, args.4, args.5, args.6, args.7,
                        )
                    };
                    let vanilla = bsm(kind, 100.0, x, 0.03, 0.01, 0.3, 1.5).price;
                    assert!((p(pair.0) + p(pair.1) - vanilla).abs() < 1e-10 * vanilla.max(1.0));
                }
            }
        }
    }

    #[test]
    fn bgk_moves_the_barrier_away_from_the_spot_and_vanishes_with_many_dates() {
        let beta = 0.582_597_157_939_010_6f64;
        assert!((bgk_shift(120.0, true, 0.2, 0.04) - 120.0 * (beta * 0.2 * 0.2).exp()).abs() < 1e-12);
        assert!((bgk_shift(80.0, false, 0.2, 0.04) - 80.0 * (-beta * 0.2 * 0.2).exp()).abs() < 1e-12);
        // an out-option watched at fewer dates is worth more; many dates tend to continuous
        let cont = barrier_price(Call, UO, 100.0, 100.0, 130.0, 0.0, 0.04, 0.01, 0.25, 1.0);
        let mut last = f64::INFINITY;
        for m in [4.0, 12.0, 52.0, 252.0, 1e10] {
            let h = bgk_shift(130.0, true, 0.25, 1.0 / m);
            let p = barrier_price(Call, UO, 100.0, 100.0, h, 0.0, 0.04, 0.01, 0.25, 1.0);
            assert!(
                p > cont && p < last,
                "m {m}: {p} (continuous {cont}, fewer dates {last})"
            );
            last = p;
        }
        assert!((last - cont).abs() < 1e-3 * cont, "{last} vs {cont}");
    }
}
