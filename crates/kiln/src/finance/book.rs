//! A mixed book: Black-Scholes options, Heston options and American options in one list,
//! each priced by its own engine, in one call. The CLI's `kiln price` rows and the Python
//! package's `kiln.price` records both come down to this: option `i` of the book uses Monte
//! Carlo stream index `first_option + i` whatever its kind, so a book priced whole, in
//! batches, from a CSV or from Python gives the same bits.
//!
//! What each method means for each kind (`docs/finance.md`):
//! - Black-Scholes ([`BookOption::Plain`]): [`Runtime::price_batch`] (closed forms where the
//!   style has one, Monte Carlo by the run's generator);
//! - Heston: analytic is the semi-analytic European (an Asian under Heston is an error
//!   asking for `mc`); mc is Andersen's QE ([`Runtime::price_heston_batch`]);
//! - American: analytic is the binomial tree of [`DEFAULT_TREE_STEPS`] steps (Bermudan on
//!   the exercise dates, or continuous exercise when `continuous`); mc is Longstaff-Schwartz
//!   on the exercise dates ([`Runtime::price_american_batch`]);
//! - basket: analytic is the geometric basket's closed form, Bjerksund-Stensland for a
//!   two-asset spread and Stulz for the max or min of two assets (any other basket is an
//!   error asking for `mc`); mc is one exact step per path ([`Runtime::price_basket_batch`]);
//! - American rainbow (a Bermudan call or put on the max or min of several assets): mc only,
//!   Longstaff-Schwartz on the CPU engine ([`Runtime::price_american_rainbow_batch`]);
//!   analytic is an error in the slot (kiln has no closed form or tree for it).

use kiln_core::finance::basket::BasketSpec;
use kiln_core::finance::heston::HestonSpec;
use kiln_core::finance::{McParams, OptionSpec, PriceResult};
use kiln_core::{Error, Result};

use super::american::{
    american_continuous, AmericanBarrierSpec, AmericanRainbowSpec, AmericanSpec, DEFAULT_TREE_STEPS,
};
use super::Method;
use crate::Runtime;

/// Why [`Method::Analytic`] cannot price an American rainbow.
pub(crate) const RAINBOW_ANALYTIC: &str =
    "an American rainbow has no closed form or tree in kiln; use method mc";

/// One option of a mixed book and the engine it goes to. Serialized (the job service stores
/// books) with an `engine` tag: `plain`, `heston`, `american`, `american_barrier`, `basket`
/// or `american_rainbow`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "engine", rename_all = "snake_case")]
pub enum BookOption {
    /// A Black-Scholes option of any [`Style`](kiln_core::finance::Style).
    Plain(OptionSpec),
    /// A Heston option (European or arithmetic Asian).
    Heston(HestonSpec),
    /// An American option, exercisable on `spec.exercise_dates` equally spaced dates; with
    /// `continuous`, the contract is exercisable at any time (the tree prices that; Monte
    /// Carlo approximates it by those dates).
    American {
        /// The contract, its dates resolved.
        spec: AmericanSpec,
        /// Exercisable at any time (no dates given).
        continuous: bool,
    },
    /// An American barrier option, exercisable on `spec.option.exercise_dates` dates or, with
    /// `continuous`, at any time (the tree prices that; Monte Carlo, on the CPU engine only,
    /// approximates it by those dates).
    AmericanBarrier {
        /// The contract, its dates resolved.
        spec: AmericanBarrierSpec,
        /// Exercisable at any time (no dates given).
        continuous: bool,
    },
    /// A European option on a basket of correlated assets.
    Basket(BasketSpec),
    /// An American (Bermudan) call or put on the max or min of several weighted assets,
    /// exercisable on `exercise_dates` equally spaced dates; Monte Carlo only.
    AmericanRainbow(AmericanRainbowSpec),
}

impl BookOption {
    /// The kind's name, for messages: `bs`, `heston`, `american`, `american barrier`,
    /// `basket` or `american rainbow`.
    pub fn kind(&self) -> &'static str {
        match self {
            BookOption::Plain(_) => "bs",
            BookOption::Heston(_) => "heston",
            BookOption::American { .. } => "american",
            BookOption::AmericanBarrier { .. } => "american barrier",
            BookOption::Basket(_) => "basket",
            BookOption::AmericanRainbow(_) => "american rainbow",
        }
    }

    fn same_kind(&self, other: &BookOption) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

impl Runtime {
    /// Prices a mixed book, each option by its kind's engine (module docs); option `i` uses
    /// stream index `first_option + i`. One result per option: an invalid option, or one
    /// `method` cannot price, is an error in its slot.
    pub fn price_book(
        &self,
        book: &[BookOption],
        method: Method,
        mc: &McParams,
        first_option: u32,
    ) -> Vec<Result<PriceResult>> {
        let mut out = Vec::with_capacity(book.len());
        let mut start = 0;
        while start < book.len() {
            let mut end = start + 1;
            while end < book.len() && book[end].same_kind(&book[start]) {
                end += 1;
            }
            let Ok(first) = u32::try_from(u64::from(first_option) + start as u64) else {
                out.extend(
                    (start..end).map(|_| Err(Error::invalid("first_option", "stream index past u32"))),
                );
                start = end;
                continue;
            };
            out.extend(self.price_run(&book[start..end], method, mc, first));
            start = end;
        }
        out
    }

    /// One run of options of one kind.
    fn price_run(
        &self,
        run: &[BookOption],
        method: Method,
        mc: &McParams,
        first: u32,
    ) -> Vec<Result<PriceResult>> {
        match &run[0] {
            BookOption::Plain(_) => {
                let specs: Vec<OptionSpec> = run
                    .iter()
                    .filter_map(|o| match o {
                        BookOption::Plain(s) => Some(*s),
                        _ => None,
                    })
                    .collect();
                self.price_batch(&specs, method, mc, first)
            }
            BookOption::Heston(_) => {
                let specs: Vec<HestonSpec> = run
                    .iter()
                    .filter_map(|o| match o {
                        BookOption::Heston(h) => Some(*h),
                        _ => None,
                    })
                    .collect();
                match method {
                    Method::Analytic => specs
                        .iter()
                        .map(|h| h.price_analytic().map(PriceResult::exact))
                        .collect(),
                    Method::MonteCarlo => self.price_heston_batch(&specs, mc, first),
                }
            }
            BookOption::American { .. } => {
                let specs: Vec<(AmericanSpec, bool)> = run
                    .iter()
                    .filter_map(|o| match o {
                        BookOption::American { spec, continuous } => Some((*spec, *continuous)),
                        _ => None,
                    })
                    .collect();
                match method {
                    Method::Analytic => specs
                        .iter()
                        .map(|(a, continuous)| {
                            if *continuous {
                                american_continuous(a, DEFAULT_TREE_STEPS).map(PriceResult::exact)
                            } else {
                                self.price_american_tree(std::slice::from_ref(a), DEFAULT_TREE_STEPS)
                                    .remove(0)
                            }
                        })
                        .collect(),
                    Method::MonteCarlo => {
                        let a: Vec<AmericanSpec> = specs.iter().map(|(a, _)| *a).collect();
                        self.price_american_batch(&a, mc, first)
                    }
                }
            }
            BookOption::AmericanBarrier { .. } => {
                let specs: Vec<(AmericanBarrierSpec, bool)> = run
                    .iter()
                    .filter_map(|o| match o {
                        BookOption::AmericanBarrier { spec, continuous } => Some((*spec, *continuous)),
                        _ => None,
                    })
                    .collect();
                match method {
                    Method::Analytic => specs
                        .iter()
                        .map(|(a, continuous)| {
                            self.price_american_barrier_tree(
                                std::slice::from_ref(a),
                                DEFAULT_TREE_STEPS,
                                *continuous,
                            )
                            .remove(0)
                        })
                        .collect(),
                    Method::MonteCarlo => {
                        let a: Vec<AmericanBarrierSpec> = specs.iter().map(|(a, _)| *a).collect();
                        self.price_american_barrier_batch(&a, mc, first)
                    }
                }
            }
            BookOption::Basket(_) => {
                let specs: Vec<BasketSpec> = run
                    .iter()
                    .filter_map(|o| match o {
                        BookOption::Basket(b) => Some(b.clone()),
                        _ => None,
                    })
                    .collect();
                self.price_basket_batch(&specs, mc, method, first)
            }
            BookOption::AmericanRainbow(_) => {
                let specs: Vec<AmericanRainbowSpec> = run
                    .iter()
                    .filter_map(|o| match o {
                        BookOption::AmericanRainbow(r) => Some(r.clone()),
                        _ => None,
                    })
                    .collect();
                match method {
                    Method::Analytic => specs
                        .iter()
                        .map(|_| Err(Error::invalid("price_book", RAINBOW_ANALYTIC)))
                        .collect(),
                    Method::MonteCarlo => self.price_american_rainbow_batch(&specs, mc, first),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::american::{BasketAsset, Extreme};
    use super::*;
    use kiln_core::finance::heston::HestonParams;
    use kiln_core::finance::{OptionType, Style};

    fn bs(strike: f64) -> OptionSpec {
        OptionSpec::european(OptionType::Put, 100.0, strike, 0.03, 0.0, 0.25, 0.5)
    }

    fn heston(strike: f64) -> HestonSpec {
        HestonSpec {
            option: bs(strike),
            heston: HestonParams {
                kappa: 1.5,
                theta: 0.04,
                xi: 0.5,
                rho: -0.6,
                v0: 0.05,
            },
        }
    }

    fn american(strike: f64, dates: u32, continuous: bool) -> BookOption {
        let s = bs(strike);
        BookOption::American {
            spec: AmericanSpec {
                option_type: s.option_type,
                spot: s.spot,
                strike: s.strike,
                rate: s.rate,
                dividend: s.dividend,
                volatility: s.volatility,
                maturity: s.maturity,
                exercise_dates: dates,
            },
            continuous,
        }
    }

    fn rainbow(extreme: Extreme, strike: f64) -> AmericanRainbowSpec {
        AmericanRainbowSpec {
            kind: OptionType::Call,
            extreme,
            strike,
            rate: 0.05,
            maturity: 1.0,
            exercise_dates: 6,
            assets: vec![
                BasketAsset::new(100.0, 0.2, 0.1, 1.0),
                BasketAsset::new(95.0, 0.3, 0.05, 1.0),
                BasketAsset::new(105.0, 0.25, 0.0, 1.0),
            ],
            correlation: vec![1.0, 0.3, 0.2, 0.3, 1.0, 0.4, 0.2, 0.4, 1.0],
        }
    }

    /// American rainbows in a mixed book are the rainbow engine's prices at the book's
    /// stream indices; analytic is an error in their slots only.
    #[test]
    fn american_rainbows_in_a_book_are_the_rainbow_engine_at_the_books_stream_indices() {
        let rt = Runtime::cpu();
        let (max, min) = (rainbow(Extreme::Max, 100.0), rainbow(Extreme::Min, 90.0));
        let book = vec![
            BookOption::Plain(bs(95.0)),
            BookOption::AmericanRainbow(max.clone()),
            BookOption::AmericanRainbow(min.clone()),
            american(100.0, 8, false),
            BookOption::AmericanRainbow(max.clone()),
        ];
        let mc = McParams {
            paths: 3000,
            steps: 8,
            seed: 5,
            ..McParams::default()
        };
        let got = rt.price_book(&book, Method::MonteCarlo, &mc, 20);
        let bits = |r: &Result<PriceResult>| r.as_ref().unwrap().price.to_bits();
        let want = rt.price_american_rainbow_batch(&[max.clone(), min], &mc, 21);
        assert_eq!((bits(&got[1]), bits(&got[2])), (bits(&want[0]), bits(&want[1])));
        assert_eq!(
            bits(&got[4]),
            bits(&rt.price_american_rainbow_batch(&[max], &mc, 24)[0])
        );
        assert_ne!(bits(&got[1]), bits(&got[4]), "another stream, other paths");
        assert_eq!(book[1].kind(), "american rainbow");

        let an = rt.price_book(&book, Method::Analytic, &mc, 0);
        for i in [1, 2, 4] {
            let e = an[i].as_ref().unwrap_err().to_string();
            assert!(e.contains("no closed form or tree") && e.contains("mc"), "{e}");
        }
        assert!(an[0].is_ok() && an[3].is_ok());
    }

    /// A mixed book prices each option as its own engine does at the option's stream index.
    #[test]
    fn a_mixed_book_is_each_engine_at_the_books_stream_indices() {
        let rt = Runtime::cpu();
        let book = vec![
            BookOption::Plain(bs(95.0)),
            BookOption::Plain(bs(100.0).with_style(Style::AsianArithmetic, Some(4), None)),
            BookOption::Heston(heston(100.0)),
            american(100.0, 8, false),
            american(105.0, 8, true),
            BookOption::Plain(bs(110.0)),
        ];
        let mc = McParams {
            paths: 4099,
            steps: 8,
            ..McParams::default()
        };
        let got = rt.price_book(&book, Method::MonteCarlo, &mc, 7);
        let bits = |r: &Result<PriceResult>| r.as_ref().unwrap().price.to_bits();
        assert_eq!(
            bits(&got[0]),
            bits(&rt.price_batch(&[bs(95.0)], Method::MonteCarlo, &mc, 7)[0])
        );
        let BookOption::Plain(asian) = book[1] else {
            unreachable!()
        };
        assert_eq!(
            bits(&got[1]),
            bits(&rt.price_batch(&[asian], Method::MonteCarlo, &mc, 8)[0])
        );
        assert_eq!(
            bits(&got[2]),
            bits(&rt.price_heston_batch(&[heston(100.0)], &mc, 9)[0])
        );
        let BookOption::American { spec, .. } = book[4] else {
            unreachable!()
        };
        assert_eq!(bits(&got[4]), bits(&rt.price_american_batch(&[spec], &mc, 11)[0]));
        assert_eq!(
            bits(&got[5]),
            bits(&rt.price_batch(&[bs(110.0)], Method::MonteCarlo, &mc, 12)[0])
        );

        // analytic: the tree for dates, the continuous tree without; Heston's closed form;
        // the arithmetic Asian has no closed form (an error in its slot only)
        let an = rt.price_book(&book, Method::Analytic, &mc, 0);
        assert!(an[1].is_err());
        assert_eq!(
            an[2].as_ref().unwrap().price,
            heston(100.0).price_analytic().unwrap()
        );
        let (bermudan, cont) = (an[3].as_ref().unwrap().price, an[4].as_ref().unwrap().price);
        let BookOption::American { spec: s3, .. } = book[3] else {
            unreachable!()
        };
        assert_eq!(
            bermudan,
            rt.price_american_tree(&[s3], DEFAULT_TREE_STEPS)[0]
                .as_ref()
                .unwrap()
                .price
        );
        assert_eq!(cont, american_continuous(&spec, DEFAULT_TREE_STEPS).unwrap());
        assert!(an[0].is_ok() && an[5].is_ok());
    }
}
