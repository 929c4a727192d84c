//! `kiln price --devices`: a book priced by kiln's device-pool executor over several devices
//! (GPUs and the CPU, shares from calibrated throughput cached next to the kernel cache).
//! Every price keeps its bits: row `r` is Monte Carlo stream `r - 1` whichever device ran it.

use kiln::core::finance::{McParams, OptionSpec, PriceResult};
use kiln::executor::{Calibrations, DeviceSet, Executor, OptionBook};
use kiln::finance::Method;
use kiln::{Config, Result};

use crate::devices_arg::{split_of, WorkerSplit};

/// Chunks per worker a batch is cut into (so a fast device can take more).
const CHUNKS_PER_WORKER: usize = 8;

/// The executor behind `--devices`.
pub(crate) struct Pool {
    ex: Executor,
    label: String,
    /// Each worker's part of every batch so far (chunks, steals and busy time summed).
    split: std::sync::Mutex<Vec<WorkerSplit>>,
}

impl Pool {
    /// Opens the workers of `set` (`--devices`), with the on-disk calibration store.
    pub(crate) fn open(set: &DeviceSet, cfg: &Config) -> Result<Self> {
        let workers = set.open(cfg)?;
        let label = workers
            .iter()
            .map(|w| w.label().to_string())
            .collect::<Vec<_>>()
            .join("+");
        let ex = Executor::new(workers)?.with_calibrations(Calibrations::for_config(cfg));
        Ok(Pool {
            ex,
            label,
            split: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The devices, e.g. `cuda:0+cpu`.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Prices a batch whose first option is stream `first` (as `Runtime::price_batch`).
    pub(crate) fn price(
        &self,
        specs: &[OptionSpec],
        method: Method,
        mc: &McParams,
        first: u32,
    ) -> Result<Vec<Result<PriceResult>>> {
        let per = specs.len() / (CHUNKS_PER_WORKER * self.ex.workers().len());
        let book = OptionBook::new(specs, method, *mc, first, per.max(1))?;
        let (out, rep) = self.ex.run(&book)?;
        let run = split_of(&rep);
        let mut total = self.split.lock().unwrap_or_else(|e| e.into_inner());
        if total.is_empty() {
            *total = run;
        } else {
            for (t, w) in total.iter_mut().zip(run) {
                t.chunks += w.chunks;
                t.stolen += w.stolen;
                t.busy_s += w.busy_s;
            }
        }
        Ok(out)
    }

    /// Each worker's part of the book so far (its first batch's share; chunks, steals and
    /// busy seconds over every batch), as the batch commands' `--json` reports it.
    pub(crate) fn split(&self) -> Vec<WorkerSplit> {
        self.split.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
