//! The cells of basket and American rainbow rows: those a basket file replaces checked
//! empty, the file named in `basket` resolved and `average` read.

use super::*;

/// The two styles whose assets come from a basket file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MultiAsset {
    /// `basket`: a European payoff at maturity.
    Basket,
    /// `american_rainbow`: exercisable on the `fixings` dates.
    AmericanRainbow,
}

impl MultiAsset {
    /// The multi-asset style of a row's lower-cased style text, if it is one.
    pub(super) fn of(style_text: &str) -> Option<Self> {
        match style_text {
            BASKET_STYLE => Some(MultiAsset::Basket),
            AMERICAN_RAINBOW_STYLE => Some(MultiAsset::AmericanRainbow),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            MultiAsset::Basket => BASKET_STYLE,
            MultiAsset::AmericanRainbow => AMERICAN_RAINBOW_STYLE,
        }
    }
}

/// The American rainbow of `file`'s assets with the row's type, strike, rate and maturity
/// (carried in `spec`).
pub(super) fn rainbow_spec(
    file: &BasketFile,
    spec: &OptionSpec,
    extreme: Extreme,
    dates: u32,
) -> AmericanRainbowSpec {
    AmericanRainbowSpec {
        kind: spec.option_type,
        extreme,
        strike: spec.strike,
        rate: spec.rate,
        maturity: spec.maturity,
        exercise_dates: dates,
        assets: file.assets.clone(),
        correlation: file.correlation.clone(),
    }
}

/// A basket or American rainbow row's own cells: `basket` and `average` read, the cells
/// the file replaces (and those the style does not have) checked empty; an American
/// rainbow's `fixings` are its exercise dates, which the caller reads. `(file index,
/// assets, average)`, or `None` with `reasons` pushed if anything is wrong.
pub(super) fn multi_asset_cells(
    cell: &dyn Fn(usize) -> String,
    heston: bool,
    which: MultiAsset,
    reasons: &mut Vec<String>,
    baskets: &mut Baskets,
) -> Option<(usize, u32, BasketAverage)> {
    let before = reasons.len();
    let style = which.name();
    for c in [SPOT, VOLATILITY, DIVIDEND] {
        if !cell(c).is_empty() {
            reasons.push(format!(
                "{}: `{}` given for style {style}; leave it empty (the basket file gives each asset's {})",
                INPUT_COLUMNS[c],
                cell(c),
                INPUT_COLUMNS[c]
            ));
        }
    }
    let (unused, what): (&[usize], &str) = match which {
        MultiAsset::Basket => (&[FIXINGS, BARRIER, REBATE], "a European payoff at maturity"),
        MultiAsset::AmericanRainbow => (&[BARRIER, REBATE], "no barrier"),
    };
    for &c in unused {
        if !cell(c).is_empty() {
            reasons.push(format!(
                "{}: `{}` given for style {style}, which has none ({what})",
                INPUT_COLUMNS[c],
                cell(c)
            ));
        }
    }
    if heston {
        reasons.push(format!(
            "style {style} is priced under Black-Scholes only (model bs)"
        ));
    }
    let average = match (which, cell(AVERAGE).as_str()) {
        (MultiAsset::Basket, "") => Some(BasketAverage::Arithmetic),
        (MultiAsset::AmericanRainbow, "") => {
            reasons.push(
                "average is empty; style american_rainbow needs max or min (the extreme of w_i S_i it pays on)"
                    .to_string(),
            );
            None
        }
        (_, t) => match (which, t.parse::<BasketAverage>()) {
            (MultiAsset::Basket, Ok(a)) => Some(a),
            (MultiAsset::AmericanRainbow, Ok(a @ (BasketAverage::Max | BasketAverage::Min))) => Some(a),
            (MultiAsset::Basket, Err(_)) => {
                reasons.push(format!(
                    "average: unknown `{t}`; use arithmetic (the default), geometric, max or min"
                ));
                None
            }
            (MultiAsset::AmericanRainbow, _) => {
                reasons.push(format!(
                    "average: `{t}` for style american_rainbow; use max or min (the extreme of w_i S_i it pays on)"
                ));
                None
            }
        },
    };
    let file = cell(BASKET);
    let found = if file.is_empty() {
        reasons.push(format!(
            "basket is empty; style {style} needs a basket file (a CSV path relative to this file's folder)"
        ));
        None
    } else {
        match baskets.resolve(&file) {
            Ok(f) => Some(f),
            Err(e) => {
                reasons.push(e);
                None
            }
        }
    };
    match (average, found) {
        (Some(average), Some((basket, assets))) if reasons.len() == before => Some((basket, assets, average)),
        _ => None,
    }
}
