//! `kiln price --devices`: a book priced by kiln's device-pool executor over several devices
//! (GPUs and the CPU, shares from calibrated throughput cached next to the kernel cache).
//! Every price keeps its bits: row `r` is Monte Carlo stream `r - 1` whichever device ran it.

use kiln::core::finance::{McParams, OptionSpec, PriceResult};
use kiln::executor::{Calibrations, DeviceSet, Executor, OptionBook};
use kiln::finance::Method;
use kiln::{Config, Result};

/// Chunks per worker a batch is cut into (so a fast device can take more).
const CHUNKS_PER_WORKER: usize = 8;

/// The executor behind `--devices`.
pub(crate) struct Pool {
    ex: Executor,
    label: String,
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
        Ok(Pool { ex, label })
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
        for w in &rep.workers {
            tracing::debug!(
                "{}: share {:.3}, {} chunks ({} stolen), {:.3} s busy",
                w.label,
                w.share,
                w.chunks,
                w.stolen,
                w.busy_s
            );
        }
        Ok(out)
    }
}
