//! Finance workloads: one option's Monte Carlo paths split by canonical block
//! ([`McPaths`]), and a book of options split by rows ([`OptionBook`]).

use std::ops::Range;

use kiln_core::finance::{
    block_count, finish, BlockSums, McParams, OptionSpec, PathParams, PriceResult, BLOCK_SAMPLES,
};
use kiln_core::{Error, Result};

use super::devices::Worker;
use super::schedule::Workload;
use crate::finance::Method;

fn chunks_of(total: u64, per: u64) -> usize {
    total.div_ceil(per.max(1)) as usize
}

/// One option priced by Monte Carlo with its paths split across workers: chunk `i` is the
/// canonical blocks `[i·b, (i+1)·b)` ([`BLOCK_SAMPLES`] samples each, `b` blocks a chunk);
/// each worker returns every block's sums, and the merge concatenates them in block order
/// and finishes once, so the price is bitwise the single-device price
/// (`kiln_cpu::finance::price_mc`, `Runtime::price`) for any worker set and any `b`.
#[derive(Clone, Debug)]
pub struct McPaths {
    spec: OptionSpec,
    mc: McParams,
    option: u32,
    blocks_per_chunk: u64,
    blocks: u64,
    steps: u32,
}

impl McPaths {
    /// `spec` under the run `mc` with Philox stream index `option`, `blocks_per_chunk`
    /// canonical blocks a chunk (>= 1). The option and the run are validated here.
    pub fn new(spec: OptionSpec, mc: McParams, option: u32, blocks_per_chunk: u64) -> Result<Self> {
        if blocks_per_chunk == 0 {
            return Err(Error::invalid(
                "mc_paths",
                "blocks_per_chunk = 0; it must be >= 1",
            ));
        }
        mc.validate()?;
        let pp = PathParams::new(&spec, &mc)?;
        Ok(McPaths {
            spec,
            mc,
            option,
            blocks_per_chunk,
            blocks: block_count(&mc),
            steps: pp.steps,
        })
    }

    /// The canonical blocks of chunk `i`.
    pub fn blocks_of(&self, i: usize) -> Range<u64> {
        let a = (i as u64).saturating_mul(self.blocks_per_chunk).min(self.blocks);
        a..(a + self.blocks_per_chunk).min(self.blocks)
    }
}

impl Workload for McPaths {
    type Part = Vec<BlockSums>;
    type Output = PriceResult;

    fn key(&self) -> String {
        format!(
            "mc_paths/{:?}/{:?}/anti={}",
            self.spec.style, self.mc.rng, self.mc.antithetic
        )
    }

    fn chunks(&self) -> usize {
        chunks_of(self.blocks, self.blocks_per_chunk)
    }

    fn units(&self, i: usize) -> f64 {
        let r = self.blocks_of(i);
        (r.end - r.start) as f64 * BLOCK_SAMPLES as f64 * f64::from(self.steps)
    }

    fn run(&self, worker: &Worker, i: usize) -> Result<Vec<BlockSums>> {
        let blocks = self.blocks_of(i);
        worker.run(|rt| {
            rt.finance_backend()
                .mc_block_sums(&self.spec, &self.mc, self.option, blocks)
        })
    }

    fn merge(&self, parts: Vec<Vec<BlockSums>>) -> Result<PriceResult> {
        let all: Vec<BlockSums> = parts.into_iter().flatten().collect();
        finish(&self.spec, &self.mc, &all)
    }
}

/// A book of options priced row by row (closed form or Monte Carlo): chunk `i` is rows
/// `[i·r, (i+1)·r)`, priced with stream indices `first_option + row` by
/// [`Runtime::price_batch`](crate::Runtime::price_batch), so every price is the bits of
/// pricing the whole book on one device. One result per option.
#[derive(Clone, Debug)]
pub struct OptionBook<'a> {
    specs: &'a [OptionSpec],
    method: Method,
    mc: McParams,
    first_option: u32,
    rows_per_chunk: usize,
}

impl<'a> OptionBook<'a> {
    /// `specs` by `method` under `mc` (used by Monte Carlo), `rows_per_chunk` rows a chunk
    /// (>= 1). The run is validated here; an invalid option is an error in its slot.
    pub fn new(
        specs: &'a [OptionSpec],
        method: Method,
        mc: McParams,
        first_option: u32,
        rows_per_chunk: usize,
    ) -> Result<Self> {
        if rows_per_chunk == 0 {
            return Err(Error::invalid(
                "option_book",
                "rows_per_chunk = 0; it must be >= 1",
            ));
        }
        if method == Method::MonteCarlo {
            mc.validate()?;
        }
        if u32::try_from(specs.len() as u64 + u64::from(first_option)).is_err() {
            return Err(Error::invalid(
                "option_book",
                "stream indices past 2^32: first_option + options must fit in u32",
            ));
        }
        Ok(OptionBook {
            specs,
            method,
            mc,
            first_option,
            rows_per_chunk,
        })
    }

    fn rows(&self, i: usize) -> Range<usize> {
        let a = i.saturating_mul(self.rows_per_chunk).min(self.specs.len());
        a..(a + self.rows_per_chunk).min(self.specs.len())
    }
}

impl Workload for OptionBook<'_> {
    type Part = Vec<Result<PriceResult>>;
    type Output = Vec<Result<PriceResult>>;

    fn key(&self) -> String {
        match self.method {
            Method::Analytic => "option_book/analytic".into(),
            Method::MonteCarlo => format!("option_book/mc/{:?}/anti={}", self.mc.rng, self.mc.antithetic),
        }
    }

    fn chunks(&self) -> usize {
        self.specs.len().div_ceil(self.rows_per_chunk)
    }

    fn units(&self, i: usize) -> f64 {
        let rows = self.rows(i);
        match self.method {
            Method::Analytic => rows.len() as f64,
            Method::MonteCarlo => self.specs[rows]
                .iter()
                .map(|s| {
                    let steps = match s.fixings {
                        Some(n) if s.style.is_asian() => n,
                        _ => self.mc.steps,
                    };
                    self.mc.samples() as f64 * f64::from(steps)
                })
                .sum(),
        }
    }

    fn run(&self, worker: &Worker, i: usize) -> Result<Self::Part> {
        let rows = self.rows(i);
        // fits: checked in `new`
        let first = self.first_option + rows.start as u32;
        let specs = &self.specs[rows];
        // a device failure lands in the slots, as `Runtime::price_batch` reports it
        worker.run(|rt| Ok(rt.price_batch(specs, self.method, &self.mc, first)))
    }

    fn merge(&self, parts: Vec<Self::Part>) -> Result<Self::Output> {
        Ok(parts.into_iter().flatten().collect())
    }
}
