//! The finance backend interface: the Monte Carlo engines, the risk grid and the
//! implied-volatility book, one trait every backend implements ([`FinanceBackend`]), as
//! [`BackendStorage`](super::BackendStorage) is for the tensor ops.
//!
//! `kiln_cpu::finance::CpuFinance` implements it with the CPU engines (the numeric
//! reference) and `kiln_cuda::CudaBackend` with its launchers; the facade's finance picks
//! one engine per runtime and calls it, never naming a backend's own types. Both engines
//! give the same bits for the same option, run and stream index (each engine's module says
//! how), so which engine priced a value never shows in it. How a device cuts a run into
//! launches (the CUDA engine's `GpuMcOptions`) is the backend's own: no bit depends on it.
//!
//! The Monte Carlo methods take the stream index of each option ([`McStreams`]) and return
//! one result per option (an invalid option is an error in its slot); their outer error is
//! a whole run that failed: a device failure, a run the device refuses as a whole, or
//! `McStreams::Each` of another length than the options.

use crate::finance::american::{AmericanBarrierSpec, AmericanRainbowSpec, AmericanSpec};
use crate::finance::basket::BasketSpec;
use crate::finance::calibrate::{calibrate_heston, CalibrationOptions, HestonFit, HestonQuote};
use crate::finance::heston::{HestonParams, HestonSpec};
use crate::finance::implied::{NoVolatility, Quote};
use crate::finance::{BlockSums, McParams, OptionSpec, PriceResult};
use crate::{Device, Error, Result};

/// Which Philox stream (or Sobol replicate set) each option of a run draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McStreams<'a> {
    /// Option `i` uses `first + i` (an error in its slot past 2^32): a book priced batch by
    /// batch gets the bits of pricing it whole.
    From(u32),
    /// Option `i` uses `streams[i]`, one index an option: the same option priced twice in a
    /// run, or a shocked copy of it, draws the same numbers.
    Each(&'a [u32]),
}

impl McStreams<'_> {
    /// An error unless `Each` holds one index for each of `n` options (`op` names the call).
    pub fn check(&self, n: usize, op: &str) -> Result<()> {
        match self {
            McStreams::Each(s) if s.len() != n => Err(Error::invalid(
                op,
                format!("{} stream indices for {n} options; give one an option", s.len()),
            )),
            _ => Ok(()),
        }
    }
}

/// A book of European Black-Scholes options as columns for [`FinanceBackend::risk_bs_grid`],
/// one entry per option.
#[derive(Clone, Copy, Debug)]
pub struct BsGridBook<'a> {
    /// Spot, `> 0`.
    pub spot: &'a [f64],
    /// Strike, `> 0`.
    pub strike: &'a [f64],
    /// Rate.
    pub rate: &'a [f64],
    /// Dividend yield.
    pub dividend: &'a [f64],
    /// Volatility, `> 0`.
    pub vol: &'a [f64],
    /// Maturity in years, `> 0`.
    pub maturity: &'a [f64],
    /// Position quantity.
    pub qty: &'a [f64],
    /// The unshocked price (the P&L is `qty * (shocked - base)`).
    pub base: &'a [f64],
    /// 1 for a put, 0 for a call.
    pub put: &'a [u8],
    /// The option's underlying slot in [`ShockGrid`], `< n_und`.
    pub und: &'a [u32],
}

/// The shocks of every scenario to every underlying slot, row-major `[scenario][slot]`.
#[derive(Clone, Copy, Debug)]
pub struct ShockGrid<'a> {
    /// The spot shift.
    pub spot_shift: &'a [f64],
    /// 1: absolute (`S + x`), 0: relative (`S (1 + x)`).
    pub spot_abs: &'a [u8],
    /// The volatility shift.
    pub vol_shift: &'a [f64],
    /// The rate shift.
    pub rate_shift: &'a [f64],
    /// Slots per scenario.
    pub n_und: u32,
    /// Scenarios.
    pub n_scen: usize,
}

/// One result per option of a Monte Carlo run, or the error of the whole run.
pub type McBatch = Result<Vec<Result<PriceResult>>>;

/// The finance engines of one backend (module docs). Object safe: the facade holds the
/// runtime's engine as `&dyn FinanceBackend`.
pub trait FinanceBackend: Send + Sync {
    /// Where the engines run.
    fn device(&self) -> Device;

    /// Whether every call is a device launch best made large and one at a time (a GPU: a
    /// launch, its copies and a synchronisation per call), so callers gather valuations into
    /// few calls and make them in order, not from many threads. False for the CPU, whose
    /// calls run in parallel on its cores whatever their size.
    fn batches_calls(&self) -> bool;

    /// Black-Scholes Monte Carlo (European, Asian, barrier; Philox paths or Sobol points):
    /// kiln-core's `finance::blocks` contract.
    fn price_mc(&self, specs: &[OptionSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch;

    /// The sums of the canonical blocks `blocks` of one Black-Scholes option (stream index
    /// `option`), in block order: a run split into block ranges (across devices) and
    /// finished over the concatenation gives the bits of [`price_mc`](Self::price_mc).
    /// Philox runs (a device may refuse a Sobol run's ranges: its points are scrambled per
    /// replicate over every block).
    fn mc_block_sums(
        &self,
        spec: &OptionSpec,
        mc: &McParams,
        option: u32,
        blocks: std::ops::Range<u64>,
    ) -> Result<Vec<BlockSums>>;

    /// Heston Monte Carlo (Andersen's QE scheme, kiln-core's `finance::heston::qe`).
    fn price_heston(&self, specs: &[HestonSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch;

    /// Whether [`price_basket`](Self::price_basket) takes `spec` under `mc`; the caller
    /// prices the others on the CPU engine (the GPU kernel draws Philox normals only and
    /// refuses spreads and rainbows, [`BasketSpec::gpu_refusal`]). Always true on the CPU.
    fn takes_basket(&self, spec: &BasketSpec, mc: &McParams) -> bool;

    /// Basket Monte Carlo (kiln-core's `finance::basket::mc`), options this engine takes.
    fn price_basket(&self, specs: &[BasketSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch;

    /// American options by Longstaff-Schwartz (kiln-core's `finance::american::lsm`), one
    /// option at a time on either engine (one path matrix held at a time).
    fn price_american(&self, specs: &[AmericanSpec], mc: &McParams, streams: McStreams<'_>) -> McBatch;

    /// American barrier options by Longstaff-Schwartz (kiln-core's
    /// `finance::american::lsm_barrier`). The CPU and CUDA engines price them (the same
    /// bits); this default, for an engine that does not, refuses each option with an error
    /// that says so.
    fn price_american_barrier(
        &self,
        specs: &[AmericanBarrierSpec],
        mc: &McParams,
        streams: McStreams<'_>,
    ) -> McBatch {
        let _ = mc;
        streams.check(specs.len(), "price_american_barrier")?;
        Ok(specs
            .iter()
            .map(|_| {
                Err(Error::invalid(
                    "price_american_barrier",
                    "this engine does not price American barrier options by Longstaff-Schwartz; \
                     use the cpu device, or the tree (the analytic method)",
                ))
            })
            .collect())
    }

    /// American rainbows by Longstaff-Schwartz (kiln-core's `finance::american::rainbow`).
    /// Only the CPU engine prices them; this default (the CUDA engine's) refuses each option
    /// with an error that says so.
    fn price_american_rainbow(
        &self,
        specs: &[AmericanRainbowSpec],
        mc: &McParams,
        streams: McStreams<'_>,
    ) -> McBatch {
        let _ = mc;
        streams.check(specs.len(), "price_american_rainbow")?;
        Ok(specs
            .iter()
            .map(|_| {
                Err(Error::invalid(
                    "price_american_rainbow",
                    "American rainbows are priced by Longstaff-Schwartz on the CPU only; use the cpu device",
                ))
            })
            .collect())
    }

    /// Whether [`risk_bs_grid`](Self::risk_bs_grid) runs here (a GPU kernel); where it does
    /// not, the caller revalues those options one by one.
    fn has_risk_grid(&self) -> bool;

    /// `total[s] = sum_i qty[i] * (bsm(option i under scenario s) - base[i])` for every
    /// scenario. Shocked spots and volatilities must be positive (the caller checks).
    fn risk_bs_grid(&self, book: &BsGridBook<'_>, grid: &ShockGrid<'_>) -> Result<Vec<f64>>;

    /// The implied volatility of every quote of a book, in order: `Ok(sigma)` or its
    /// [`NoVolatility`] reason. The outer error is a device failure.
    fn implied_volatility_book(
        &self,
        quotes: &[Quote],
    ) -> Result<Vec<std::result::Result<f64, NoVolatility>>>;

    /// Heston's five parameters fitted to a surface of European quotes
    /// ([`crate::finance::calibrate`]). The surface pricer runs on the CPU's cores on every
    /// backend (there is no device pricer of a surface), which this default does.
    fn calibrate_heston(
        &self,
        quotes: &[HestonQuote],
        start: &HestonParams,
        options: &CalibrationOptions,
    ) -> Result<HestonFit> {
        calibrate_heston(quotes, start, options)
    }
}

/// A failure of a whole batch of `n` options (a device error, an invalid run) as an error
/// in every slot: the first keeps the error itself (its sticky classification), the others
/// carry its message under `op`.
pub fn every_slot(op: &str, e: Error, n: usize) -> Vec<Result<PriceResult>> {
    let msg = e.to_string();
    let mut v: Vec<Result<PriceResult>> = Vec::with_capacity(n);
    if n > 0 {
        v.push(Err(e));
    }
    v.extend((1..n).map(|_| Err(Error::invalid(op, msg.clone()))));
    v
}

/// `price(spec, stream)` for each spec in turn, option `i` on stream `first_option + i` (an
/// error in its slot past 2^32).
pub fn per_option<S>(
    op: &str,
    specs: &[S],
    first_option: u32,
    price: impl Fn(&S, u32) -> Result<PriceResult>,
) -> Vec<Result<PriceResult>> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let option = u32::try_from(i as u64 + u64::from(first_option)).map_err(|_| {
                Error::invalid(
                    op,
                    format!("option {i}: stream index past 2^32 (first_option {first_option})"),
                )
            })?;
            price(s, option)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_check_counts_each() {
        assert!(McStreams::From(7).check(3, "t").is_ok());
        assert!(McStreams::Each(&[1, 2, 3]).check(3, "t").is_ok());
        let e = McStreams::Each(&[1, 2]).check(3, "t").unwrap_err();
        assert!(e.to_string().contains("2 stream indices for 3 options"), "{e}");
    }

    #[test]
    fn every_slot_keeps_the_first_error() {
        let v = every_slot("op", Error::invalid("x", "boom"), 3);
        assert_eq!(v.len(), 3);
        assert!(v
            .iter()
            .all(|r| r.as_ref().is_err_and(|e| e.to_string().contains("boom"))));
        assert!(every_slot("op", Error::invalid("x", "boom"), 0).is_empty());
    }

    #[test]
    fn per_option_numbers_streams_from_the_first() {
        let got = per_option("op", &[10u32, 20, 30], u32::MAX - 1, |s, o| {
            Ok(PriceResult::exact(f64::from(*s) + f64::from(o)))
        });
        assert_eq!(got[0].as_ref().unwrap().price, 10.0 + f64::from(u32::MAX - 1));
        assert_eq!(got[1].as_ref().unwrap().price, 20.0 + f64::from(u32::MAX));
        let e = got[2].as_ref().unwrap_err().to_string();
        assert!(e.contains("option 2: stream index past 2^32"), "{e}");
    }
}
