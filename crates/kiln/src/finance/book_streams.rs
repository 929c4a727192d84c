//! Monte Carlo on a mixed book with an explicit stream index per option
//! ([`Runtime::price_book_streams`]): the batched revaluation of `Runtime::risk` prices many
//! shocked copies of one option in one run, each drawing the stream of the option it copies
//! (common random numbers), so the stream cannot follow the option's place in the run as in
//! [`Runtime::price_book`].
//!
//! Every option of a kind goes to the runtime's finance engine ([`Runtime::finance_backend`])
//! in one call with its stream per option (`McStreams::Each`), wherever it sits in the book:
//! on a GPU, the Black-Scholes styles (one launch per style, kiln-cuda's `PriceMc` op),
//! Heston (`PriceHeston`) and the baskets the kernel takes (`PriceBasket`) each in as few
//! launches as their block sums allow; the
//! baskets it refuses (spreads, rainbows, Sobol runs) on the CPU engine, in parallel over
//! the options, while the GPU runs the rest; American options by Longstaff-Schwartz one
//! option a call (the regression of each exercise date needs the whole path matrix of its
//! option, so the engine has no batched launch); American rainbows on the CPU engine only
//! (the GPU runtime's engine refuses them, an error in each slot). On the CPU every option runs on the CPU
//! engine at its stream, in parallel over the options (Americans in turn). Both engines give the same bits for the same stream (each engine's
//! module says how), so a price here is bitwise the one [`Runtime::price_book`] gives the
//! option at that stream index, on either runtime.

use kiln_core::finance::basket::BasketSpec;
use kiln_core::finance::heston::HestonSpec;
use kiln_core::finance::{McParams, OptionSpec, PriceResult};
use kiln_core::storage::{FinanceBackend, McStreams};
use kiln_core::{Error, Result};
use kiln_cpu::finance::CpuFinance;

use super::american::{AmericanBarrierSpec, AmericanRainbowSpec, AmericanSpec};
use super::{every_slot, BookOption};
use crate::Runtime;

const OP: &str = "price_book_streams";

/// The kinds of a book, in the order their engines run.
const KINDS: [fn(&BookOption) -> bool; 6] = [
    |o| matches!(o, BookOption::Plain(_)),
    |o| matches!(o, BookOption::Heston(_)),
    |o| matches!(o, BookOption::Basket(_)),
    |o| matches!(o, BookOption::American { .. }),
    |o| matches!(o, BookOption::AmericanBarrier { .. }),
    |o| matches!(o, BookOption::AmericanRainbow(_)),
];

/// Items `i` of `v`, cloned.
fn pick<T: Clone>(v: &[T], idx: &[usize]) -> Vec<T> {
    idx.iter().map(|&i| v[i].clone()).collect()
}

impl Runtime {
    /// Prices `book` by Monte Carlo with the run `mc`, option `i` on stream index
    /// `streams[i]` (module docs): bitwise what [`price_book`](Self::price_book) gives the
    /// option at that index. One result per option, an invalid option an error in its slot;
    /// the outer error is a `streams` of another length than the book.
    pub fn price_book_streams(
        &self,
        book: &[BookOption],
        mc: &McParams,
        streams: &[u32],
    ) -> Result<Vec<Result<PriceResult>>> {
        if streams.len() != book.len() {
            return Err(Error::invalid(
                OP,
                format!(
                    "{} stream indices for {} options; give one an option",
                    streams.len(),
                    book.len()
                ),
            ));
        }
        let _range = crate::profiler().host_range("price book streams");
        let mut out: Vec<Option<Result<PriceResult>>> = (0..book.len()).map(|_| None).collect();
        for is_kind in KINDS {
            let idx: Vec<usize> = (0..book.len()).filter(|&i| is_kind(&book[i])).collect();
            if idx.is_empty() {
                continue;
            }
            let st = pick(streams, &idx);
            let res = match &book[idx[0]] {
                BookOption::Plain(_) => {
                    let specs: Vec<OptionSpec> = idx
                        .iter()
                        .filter_map(|&i| match &book[i] {
                            BookOption::Plain(s) => Some(*s),
                            _ => None,
                        })
                        .collect();
                    self.plain_streams(&specs, mc, &st)
                }
                BookOption::Heston(_) => {
                    let specs: Vec<HestonSpec> = idx
                        .iter()
                        .filter_map(|&i| match &book[i] {
                            BookOption::Heston(h) => Some(*h),
                            _ => None,
                        })
                        .collect();
                    self.heston_streams(&specs, mc, &st)
                }
                BookOption::Basket(_) => {
                    let specs: Vec<BasketSpec> = idx
                        .iter()
                        .filter_map(|&i| match &book[i] {
                            BookOption::Basket(b) => Some(b.clone()),
                            _ => None,
                        })
                        .collect();
                    self.basket_streams(&specs, mc, &st)
                }
                BookOption::American { .. } => {
                    let specs: Vec<AmericanSpec> = idx
                        .iter()
                        .filter_map(|&i| match &book[i] {
                            BookOption::American { spec, .. } => Some(*spec),
                            _ => None,
                        })
                        .collect();
                    self.american_streams(&specs, mc, &st)
                }
                BookOption::AmericanBarrier { .. } => {
                    let specs: Vec<AmericanBarrierSpec> = idx
                        .iter()
                        .filter_map(|&i| match &book[i] {
                            BookOption::AmericanBarrier { spec, .. } => Some(*spec),
                            _ => None,
                        })
                        .collect();
                    self.finance_backend()
                        .price_american_barrier(&specs, mc, McStreams::Each(&st))
                        .unwrap_or_else(|e| every_slot(OP, e, specs.len()))
                }
                BookOption::AmericanRainbow(_) => {
                    let specs: Vec<AmericanRainbowSpec> = idx
                        .iter()
                        .filter_map(|&i| match &book[i] {
                            BookOption::AmericanRainbow(r) => Some(r.clone()),
                            _ => None,
                        })
                        .collect();
                    self.finance_backend()
                        .price_american_rainbow(&specs, mc, McStreams::Each(&st))
                        .unwrap_or_else(|e| every_slot(OP, e, specs.len()))
                }
            };
            for (&i, r) in idx.iter().zip(res) {
                out[i] = Some(r);
            }
        }
        Ok(out
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::invalid(OP, "option not priced"))))
            .collect())
    }

    /// Black-Scholes styles, `streams[i]` for option `i` (as many).
    fn plain_streams(
        &self,
        specs: &[OptionSpec],
        mc: &McParams,
        streams: &[u32],
    ) -> Vec<Result<PriceResult>> {
        self.finance_backend()
            .price_mc(specs, mc, McStreams::Each(streams))
            .unwrap_or_else(|e| every_slot("price", e, specs.len()))
    }

    /// Heston options, `streams[i]` for option `i` (as many).
    fn heston_streams(
        &self,
        specs: &[HestonSpec],
        mc: &McParams,
        streams: &[u32],
    ) -> Vec<Result<PriceResult>> {
        self.finance_backend()
            .price_heston(specs, mc, McStreams::Each(streams))
            .unwrap_or_else(|e| every_slot("price_heston", e, specs.len()))
    }

    /// Baskets, `streams[i]` for option `i` (as many): the engine's where it takes them, the
    /// CPU engine's for the rest (spreads, rainbows, Sobol runs on a GPU), both at once.
    fn basket_streams(
        &self,
        specs: &[BasketSpec],
        mc: &McParams,
        streams: &[u32],
    ) -> Vec<Result<PriceResult>> {
        let engine = self.finance_backend();
        let run = |by: &dyn FinanceBackend, idx: &[usize]| -> Vec<Result<PriceResult>> {
            if idx.is_empty() {
                return Vec::new();
            }
            by.price_basket(&pick(specs, idx), mc, McStreams::Each(&pick(streams, idx)))
                .unwrap_or_else(|e| every_slot("price_basket", e, idx.len()))
        };
        let (eng_idx, cpu_idx): (Vec<usize>, Vec<usize>) =
            (0..specs.len()).partition(|&i| engine.takes_basket(&specs[i], mc));
        let (from_cpu, from_engine) = rayon::join(|| run(&CpuFinance, &cpu_idx), || run(engine, &eng_idx));
        let mut out: Vec<Option<Result<PriceResult>>> = (0..specs.len()).map(|_| None).collect();
        for (idx, res) in [(cpu_idx, from_cpu), (eng_idx, from_engine)] {
            for (i, r) in idx.into_iter().zip(res) {
                out[i] = Some(r);
            }
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::invalid(OP, "basket not priced"))))
            .collect()
    }

    /// American options by Longstaff-Schwartz, `streams[i]` for option `i` (as many), one
    /// option a call on either engine (one path matrix held at a time).
    fn american_streams(
        &self,
        specs: &[AmericanSpec],
        mc: &McParams,
        streams: &[u32],
    ) -> Vec<Result<PriceResult>> {
        self.finance_backend()
            .price_american(specs, mc, McStreams::Each(streams))
            .unwrap_or_else(|e| every_slot("price_american", e, specs.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finance::Method;
    use kiln_core::finance::basket::{BasketAsset, BasketAverage};
    use kiln_core::finance::heston::HestonParams;
    use kiln_core::finance::{OptionType, Style};

    fn bs(strike: f64) -> OptionSpec {
        OptionSpec::european(OptionType::Call, 100.0, strike, 0.03, 0.01, 0.25, 0.5)
    }

    fn basket(average: BasketAverage, weights: [f64; 2]) -> BookOption {
        BookOption::Basket(BasketSpec {
            kind: OptionType::Call,
            strike: 5.0,
            rate: 0.02,
            maturity: 1.0,
            average,
            assets: vec![
                BasketAsset::new(100.0, 0.25, 0.0, weights[0]),
                BasketAsset::new(95.0, 0.3, 0.01, weights[1]),
            ],
            correlation: vec![1.0, 0.3, 0.3, 1.0],
        })
    }

    fn rainbow() -> BookOption {
        let BookOption::Basket(b) = basket(BasketAverage::Max, [1.0, 1.0]) else {
            unreachable!()
        };
        BookOption::AmericanRainbow(AmericanRainbowSpec {
            kind: b.kind,
            extreme: kiln_core::finance::rainbow::Extreme::Max,
            strike: 100.0,
            rate: b.rate,
            maturity: b.maturity,
            exercise_dates: 4,
            assets: b.assets,
            correlation: b.correlation,
        })
    }

    /// Each option priced at its own stream index is the bits of `price_book` at that index,
    /// whatever the order of the kinds in the book, repeats of a stream and invalid options.
    #[test]
    fn each_option_is_price_book_at_its_stream() {
        let rt = Runtime::cpu();
        let heston = HestonSpec {
            option: bs(100.0),
            heston: HestonParams {
                kappa: 1.5,
                theta: 0.04,
                xi: 0.5,
                rho: -0.6,
                v0: 0.05,
            },
        };
        let mut bad = bs(100.0);
        bad.spot = -1.0;
        let book = vec![
            BookOption::Plain(bs(95.0).with_style(Style::AsianArithmetic, Some(5), None)),
            BookOption::Heston(heston),
            basket(BasketAverage::Arithmetic, [0.5, 0.5]),
            BookOption::Plain(bs(105.0)),
            basket(BasketAverage::Arithmetic, [1.0, -1.0]),
            BookOption::Plain(bad),
            BookOption::Plain(bs(95.0).with_style(Style::AsianArithmetic, Some(5), None)),
            rainbow(),
        ];
        let streams = [9, 0, 4, 2, 4, 1, 9, 3];
        let mc = McParams {
            paths: 2 * 1024 + 5,
            steps: 5,
            seed: 31,
            ..McParams::default()
        };
        let got = rt.price_book_streams(&book, &mc, &streams).unwrap();
        for (i, (o, &s)) in book.iter().zip(&streams).enumerate() {
            let want = rt.price_book(std::slice::from_ref(o), Method::MonteCarlo, &mc, s);
            match (&got[i], &want[0]) {
                (Ok(a), Ok(b)) => assert_eq!(a.price.to_bits(), b.price.to_bits(), "option {i}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("option {i}: {a:?} vs {b:?}"),
            }
        }
        // the same option on the same stream twice: the same bits
        assert_eq!(
            got[0].as_ref().unwrap().price.to_bits(),
            got[6].as_ref().unwrap().price.to_bits()
        );
        assert!(got[5].is_err());
        assert!(rt.price_book_streams(&book, &mc, &streams[1..]).is_err());
    }
}
