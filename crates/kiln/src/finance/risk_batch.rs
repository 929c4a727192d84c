//! The Monte Carlo valuations of [`Runtime::risk`] in batches, the path a GPU runtime takes.
//!
//! Design. Revaluing one option under one scenario an engine call costs a GPU a launch, the
//! copies and a synchronisation for a few thousand paths (about 0.45 ms an option on an
//! H100, `docs/performance.md`), and a GPU runtime made those calls one after another. Here
//! the base values and then the shocked values of every Monte Carlo option go to the
//! engines together. The scenarios are cut into chunks of about [`MC_BATCH`] valuations
//! (scenarios x Monte Carlo options, a basket's copy weighing more with its assets): the
//! shocked copies and their parameter rows are what a chunk holds on the host. Each chunk's
//! copies are built on the CPU's cores and priced by [`Runtime::price_book_streams`]: every
//! copy of a kind in one engine call, the Black-Scholes styles one launch per style, Heston
//! and the kernel's baskets one launch each (an engine cuts a launch into pieces only where
//! its block sums would pass its `max_items`), spreads, rainbows and Sobol baskets on the
//! CPU engine meanwhile, Americans one Longstaff-Schwartz run a copy (that engine has no
//! batched launch). The options valued analytically are revalued at the same time on the
//! CPU's cores.
//!
//! Common random numbers. Every Philox kernel reads an option's stream index from its
//! parameter row, not from its place in the launch, so the shocked copy of option `i` in any
//! scenario is given stream `i`, the stream of its base value, in the same launch as copies
//! of other options on other streams. A price depends only on the option, the run and the
//! stream (each engine adds its canonical blocks in block order, whatever the launch holds),
//! so each value here is bitwise the one the per-option path gets (`use_gpu = false`), and
//! bitwise the CPU engine's at that stream.
//!
//! Errors. Every value is computed and the report's error is the first in scenario order and,
//! within a scenario, in book order: the error the per-option path meets first. A chunk that
//! holds an error ends the run (later chunks hold later scenarios only).

use rayon::prelude::*;

use kiln_core::finance::risk::ScenarioSet;
use kiln_core::finance::PriceResult;
use kiln_core::{Error, Result};

use super::{context, shock_option, Position, RiskParams, Valuation, OP};
use crate::finance::BookOption;
use crate::Runtime;

/// The size of a batch of shocked Monte Carlo valuations (module docs), in units of
/// [`copy_units`]: 2^16 copies of an option of one underlying with their parameter rows are
/// a few tens of MB on the host, and 2^16 options of 4,096 paths are 2^18 (option, block)
/// items, one launch of the engines' default chunking.
pub(super) const MC_BATCH: usize = 1 << 16;

/// What one shocked copy of `o` weighs in a batch: 1, and for a basket or an American
/// rainbow more with the square of its assets (its correlation factor is part of its copy
/// and of its parameters).
fn copy_units(o: &BookOption) -> usize {
    match o {
        BookOption::Basket(b) => 1 + b.assets.len() * b.assets.len() / 8,
        BookOption::AmericanRainbow(r) => 1 + r.assets.len() * r.assets.len() / 8,
        _ => 1,
    }
}

/// A scenario's values over some options, or the first error and its position among them.
type Cells = std::result::Result<Vec<f64>, (usize, Error)>;

impl Runtime {
    /// Every option's base value by `how`: the closed forms in parallel on the CPU's cores
    /// while the Monte Carlo ones are priced in one [`price_book_streams`] call, option `i` on
    /// stream `i`.
    ///
    /// [`price_book_streams`]: Runtime::price_book_streams
    pub(super) fn base_batched(
        &self,
        positions: &[Position],
        how: &[Valuation],
        p: &RiskParams,
    ) -> Result<Vec<Result<PriceResult>>> {
        let mc_idx: Vec<usize> = (0..positions.len())
            .filter(|&i| how[i] == Valuation::MonteCarlo)
            .collect();
        let (mut analytic, mc) = rayon::join(
            || {
                (0..positions.len())
                    .into_par_iter()
                    .map(|i| {
                        (how[i] == Valuation::Analytic)
                            .then(|| self.risk_value(&positions[i].option, how[i], i as u32, p))
                    })
                    .collect::<Vec<_>>()
            },
            || {
                let book: Vec<BookOption> = mc_idx.iter().map(|&i| positions[i].option.clone()).collect();
                let streams: Vec<u32> = mc_idx.iter().map(|&i| i as u32).collect();
                self.price_book_streams(&book, &p.mc, &streams)
            },
        );
        for (&i, r) in mc_idx.iter().zip(mc?) {
            analytic[i] = Some(r);
        }
        Ok(analytic
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::invalid(OP, "option not valued"))))
            .collect())
    }

    /// The P&L rows of the options `cols` (book indices, book order) in every scenario, as the
    /// per-option loop of [`risk_run`](Runtime::risk_run) builds them, the Monte Carlo
    /// valuations in batches of at most `max` units ([`copy_units`]; at least a scenario a
    /// batch). Calls `done()` after each
    /// scenario's Monte Carlo values are in.
    #[allow(clippy::too_many_arguments)] // the run's inputs, as risk_run holds them
    pub(super) fn batched_rows(
        &self,
        positions: &[Position],
        scenarios: &ScenarioSet,
        base: &[(Valuation, PriceResult)],
        cols: &[usize],
        p: &RiskParams,
        done: &(dyn Fn() + Sync),
        max: usize,
    ) -> Result<Vec<Vec<f64>>> {
        // positions (in `cols`) of the Monte Carlo options and of the analytic ones
        let (mc_cols, an_cols): (Vec<usize>, Vec<usize>) =
            (0..cols.len()).partition(|&k| base[cols[k]].0 == Valuation::MonteCarlo);
        let label = |s: usize, i: usize| {
            format!(
                "{} in scenario `{}`",
                positions[i].label(i),
                scenarios.scenarios[s].name
            )
        };
        // option i under scenario s; a shock's error names both already
        let shock =
            |s: usize, i: usize| shock_option(&positions[i], &scenarios.scenarios[s], &|| label(s, i));
        let (analytic, mc) = rayon::join(
            || -> Vec<Cells> {
                (0..scenarios.len())
                    .into_par_iter()
                    .map(|s| {
                        an_cols
                            .iter()
                            .map(|&k| {
                                let i = cols[k];
                                let o = shock(s, i).map_err(|e| (k, e))?;
                                self.risk_value(&o, Valuation::Analytic, i as u32, p)
                                    .map(|v| positions[i].quantity * (v.price - base[i].1.price))
                                    .map_err(|e| (k, context(e, &label(s, i))))
                            })
                            .collect()
                    })
                    .collect()
            },
            || -> Result<Vec<Cells>> {
                // scenarios a batch: every Monte Carlo option's copy in each
                let units: usize = mc_cols
                    .iter()
                    .map(|&k| copy_units(&positions[cols[k]].option))
                    .sum();
                let per = (max / units.max(1)).max(1);
                let mut out: Vec<Cells> = Vec::with_capacity(scenarios.len());
                for first in (0..scenarios.len()).step_by(per) {
                    let chunk = first..(first + per).min(scenarios.len());
                    let rows = self.mc_chunk(positions, base, cols, &mc_cols, chunk, p, &shock, &label)?;
                    let failed = rows.iter().any(|r| r.is_err());
                    for _ in &rows {
                        done();
                    }
                    out.extend(rows);
                    if failed {
                        break;
                    }
                }
                Ok(out)
            },
        );
        let mut mc = mc?.into_iter();
        let mut rows = Vec::with_capacity(scenarios.len());
        for a in analytic {
            let m = mc
                .next()
                .ok_or_else(|| Error::invalid(OP, "a scenario was not revalued"))?;
            // the first error in book order, whichever part holds it
            match (a, m) {
                (Ok(a), Ok(m)) => {
                    let mut row = vec![0.0; cols.len()];
                    for (&k, v) in an_cols.iter().zip(a) {
                        row[k] = v;
                    }
                    for (&k, v) in mc_cols.iter().zip(m) {
                        row[k] = v;
                    }
                    rows.push(row);
                }
                (Err((ka, ea)), Err((km, em))) => return Err(if ka < km { ea } else { em }),
                (Err((_, e)), Ok(_)) | (Ok(_), Err((_, e))) => return Err(e),
            }
        }
        Ok(rows)
    }

    /// The Monte Carlo cells of the scenarios `chunk`: each option of `mc_cols` (positions in
    /// `cols`) shocked by each scenario on the CPU's cores, then every copy priced in one
    /// [`price_book_streams`](Runtime::price_book_streams) call, each on its option's stream.
    #[allow(clippy::too_many_arguments)] // the run's inputs, as batched_rows holds them
    fn mc_chunk(
        &self,
        positions: &[Position],
        base: &[(Valuation, PriceResult)],
        cols: &[usize],
        mc_cols: &[usize],
        chunk: std::ops::Range<usize>,
        p: &RiskParams,
        shock: &(dyn Fn(usize, usize) -> Result<BookOption> + Sync),
        label: &dyn Fn(usize, usize) -> String,
    ) -> Result<Vec<Cells>> {
        let n = mc_cols.len();
        let first = chunk.start;
        // scenario-major: copy j is scenario first + j / n, option cols[mc_cols[j % n]]
        let shocked: Vec<Result<BookOption>> = (0..chunk.len() * n)
            .into_par_iter()
            .map(|j| shock(first + j / n, cols[mc_cols[j % n]]))
            .collect();
        let ok: Vec<usize> = (0..shocked.len()).filter(|&j| shocked[j].is_ok()).collect();
        let book: Vec<BookOption> = ok
            .iter()
            .filter_map(|&j| shocked[j].as_ref().ok().cloned())
            .collect();
        let streams: Vec<u32> = ok.iter().map(|&j| cols[mc_cols[j % n]] as u32).collect();
        let mut priced: Vec<Option<Result<PriceResult>>> = (0..shocked.len()).map(|_| None).collect();
        for (&j, r) in ok.iter().zip(self.price_book_streams(&book, &p.mc, &streams)?) {
            priced[j] = Some(r);
        }
        drop(book);
        let mut rows: Vec<Cells> = Vec::with_capacity(chunk.len());
        let mut copies = shocked.into_iter().zip(priced);
        for s in chunk {
            let mut row: Cells = Ok(Vec::with_capacity(n));
            for (k, (shocked, priced)) in (&mut copies).take(n).enumerate() {
                let i = cols[mc_cols[k]];
                if row.is_err() {
                    continue;
                }
                let v = match shocked {
                    Err(e) => Err(e),
                    Ok(_) => priced
                        .unwrap_or_else(|| Err(Error::invalid(OP, "option not priced")))
                        .map(|v| positions[i].quantity * (v.price - base[i].1.price))
                        .map_err(|e| context(e, &label(s, i))),
                };
                match (&mut row, v) {
                    (Ok(r), Ok(v)) => r.push(v),
                    (_, Err(e)) => row = Err((mc_cols[k], e)),
                    (Err(_), Ok(_)) => {}
                }
            }
            rows.push(row);
        }
        Ok(rows)
    }
}
