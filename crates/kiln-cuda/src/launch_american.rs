//! Longstaff-Schwartz American options on the GPU (`kernels/american.cu`), bitwise equal to
//! the CPU engine (kiln-cpu's `finance::american`).
//!
//! kiln-core's [`run_lsm`] drives both engines: this module implements its [`LsmBackend`]
//! steps with one kernel each. `lsm_paths_f32` writes the whole path matrix (`dates x
//! paths` f32, date-major, so every per-date kernel reads one contiguous row) and the
//! cash flows; then per exercise date, latest first, `lsm_regress_f64` discounts the cash
//! flows and writes each canonical block's 8 regression sums (one warp a block, path
//! order), the host copies those `blocks x 8` f64 back (64 KiB for 2^20 paths: the one
//! device-to-host copy a date), adds them in block order and solves the 3x3 system with
//! kiln-core's solver (the same code the CPU engine runs, on the same sums), and
//! `lsm_exercise_f64` applies the exercise rule with the coefficients passed by value.
//! `lsm_final_f64` gives each block's sums of the discounted cash flows and their squares.
//! All work is on kiln's one stream; the copies synchronize it.
//!
//! Memory: `4 x paths x dates` bytes for the matrix (refused above
//! [`LSM_MAX_MATRIX_BYTES`](kiln_core::finance::american::LSM_MAX_MATRIX_BYTES) by
//! [`LsmPlan::new`]; a pool out-of-memory error otherwise), 8 bytes a path for the cash
//! flows and 64 bytes a block for the sums.

use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::launch_finance::{too_many, KeySchedule};
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::finance::american::{
    run_lsm, AmericanSpec, LsmBackend, LsmPlan, RegressionSums, LSM_BASIS, LSM_SUMS,
};
use kiln_core::finance::{McParams, PriceResult};
use kiln_core::{Error, Result};

/// Threads of every American kernel's CTA (8 warps).
const THREADS: u32 = 256;
/// Warps a CTA in the per-block kernels (`KILN_LSM_WARPS`).
const WARPS: u64 = 8;

/// The device state of one option's run (the barrier engine, `launch_american_barrier`,
/// builds on it).
pub(crate) struct GpuLsm<'a> {
    pub(crate) be: &'a CudaBackend,
    /// `m[d * paths + p]`, f32.
    pub(crate) m: DeviceBuffer<f32>,
    /// `V_p`, f64.
    pub(crate) v: DeviceBuffer<f64>,
    /// Per-block sums, `blocks x 8` f64 (the final sums use the first `blocks x 2`).
    pub(crate) sums: DeviceBuffer<f64>,
    host: Vec<f64>,
    pub(crate) paths: u64,
    blocks: u64,
    pub(crate) put: u32,
}

impl<'a> GpuLsm<'a> {
    pub(crate) fn new(be: &'a CudaBackend, plan: &LsmPlan) -> Result<Self> {
        let paths = usize::try_from(plan.paths).map_err(|_| too_many(plan.paths))?;
        let cells = paths
            .checked_mul(plan.dates as usize)
            .ok_or_else(|| too_many(plan.paths))?;
        let blocks = plan.blocks();
        let nb = usize::try_from(blocks).map_err(|_| too_many(blocks))?;
        Ok(GpuLsm {
            be,
            m: be.alloc::<f32>(cells)?,
            v: be.alloc::<f64>(paths)?,
            sums: be.alloc::<f64>(nb * LSM_SUMS)?,
            host: vec![0.0; nb * LSM_SUMS],
            paths: plan.paths,
            blocks,
            put: u32::from(plan.is_put()),
        })
    }

    /// One thread a path.
    pub(crate) fn per_path(&self) -> Result<LaunchConfig> {
        let ctas =
            u32::try_from(self.paths.div_ceil(u64::from(THREADS))).map_err(|_| too_many(self.paths))?;
        Ok(LaunchConfig {
            grid_dim: (ctas, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        })
    }

    /// One warp a canonical block.
    pub(crate) fn per_block(&self) -> Result<LaunchConfig> {
        let ctas = u32::try_from(self.blocks.div_ceil(WARPS)).map_err(|_| too_many(self.blocks))?;
        Ok(LaunchConfig {
            grid_dim: (ctas, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        })
    }

    /// Copies the `blocks x 8` regression sums a regression kernel wrote (synchronizes).
    pub(crate) fn regression_sums(&mut self) -> Result<Vec<RegressionSums>> {
        self.sums.copy_to_host(&mut self.host, self.be.stream())?;
        Ok(self
            .host
            .chunks_exact(LSM_SUMS)
            .map(|c| {
                let mut s = [0.0; LSM_SUMS];
                s.copy_from_slice(c);
                RegressionSums(s)
            })
            .collect())
    }

    /// Copies the `blocks x 2` final sums a final kernel wrote (synchronizes).
    pub(crate) fn final_block_sums(&mut self) -> Result<Vec<[f64; 2]>> {
        self.sums.copy_to_host(&mut self.host, self.be.stream())?;
        let n = self.blocks as usize;
        Ok(self.host[..2 * n].chunks_exact(2).map(|c| [c[0], c[1]]).collect())
    }

    pub(crate) fn check_date(&self, plan: &LsmPlan, d: u32) -> Result<()> {
        if d >= plan.dates || self.m.len() as u64 != self.paths * u64::from(plan.dates) {
            return Err(Error::invalid(
                "longstaff_schwartz",
                format!("date {d} outside the run's {} dates", plan.dates),
            ));
        }
        Ok(())
    }
}

impl LsmBackend for GpuLsm<'_> {
    fn simulate(&mut self, plan: &LsmPlan) -> Result<()> {
        let cfg = self.per_path()?;
        let keys = KeySchedule(kiln_core::philox::key_schedule(plan.key));
        let (spot, strike) = (plan.spec.spot, plan.spec.strike);
        // Sizes: `m` holds paths x dates f32 and `v` paths f64 (allocated in `new` from the
        // same plan); the kernel guards p < paths and writes m[d * paths + p], d < dates, and
        // v[p].
        let args = [
            self.paths.into(),
            plan.dates.into(),
            plan.option.into(),
            plan.drift_dt.into(),
            plan.vol_sqrt_dt.into(),
            spot.into(),
            strike.into(),
            self.put.into(),
            Arg::by_value(&keys),
            Arg::buf(&self.m),
            Arg::buf(&self.v),
        ];
        self.be.launch(Kernel::LSM_PATHS_F32, cfg, &args)
    }

    fn regress(&mut self, plan: &LsmPlan, d: u32) -> Result<Vec<RegressionSums>> {
        self.check_date(plan, d)?;
        let cfg = self.per_block()?;
        let (spot, strike, df) = (plan.spec.spot, plan.spec.strike, plan.df_step);
        // Sizes: the kernel reads row d < dates of `m` (paths f32, checked above), reads and
        // writes v[p] for p < paths, and writes sums[blk * 8 + j] for blk < ceil(paths /
        // 1024) = blocks, j < 8: `sums` holds blocks x 8 f64.
        let args = [
            Arg::buf(&self.m),
            Arg::buf(&self.v),
            self.paths.into(),
            d.into(),
            spot.into(),
            strike.into(),
            self.put.into(),
            df.into(),
            Arg::buf(&self.sums),
        ];
        self.be.launch(Kernel::LSM_REGRESS_F64, cfg, &args)?;
        self.regression_sums()
    }

    fn exercise(&mut self, plan: &LsmPlan, d: u32, beta: &[f64; LSM_BASIS]) -> Result<()> {
        self.check_date(plan, d)?;
        let cfg = self.per_path()?;
        let (spot, strike) = (plan.spec.spot, plan.spec.strike);
        // Sizes: the kernel guards p < paths, reads m[d * paths + p] (d < dates, checked)
        // and writes v[p].
        let args = [
            Arg::buf(&self.m),
            Arg::buf(&self.v),
            self.paths.into(),
            d.into(),
            spot.into(),
            strike.into(),
            self.put.into(),
            beta[0].into(),
            beta[1].into(),
            beta[2].into(),
        ];
        self.be.launch(Kernel::LSM_EXERCISE_F64, cfg, &args)
    }

    fn final_sums(&mut self, plan: &LsmPlan) -> Result<Vec<[f64; 2]>> {
        let cfg = self.per_block()?;
        let df = plan.df_step;
        // Sizes: the kernel reads v[p], p < paths, and writes sums[blk * 2 + j] for blk <
        // blocks, j < 2 (`sums` holds blocks x 8 f64).
        let args = [
            Arg::buf(&self.v),
            self.paths.into(),
            df.into(),
            Arg::buf(&self.sums),
        ];
        self.be.launch(Kernel::LSM_FINAL_F64, cfg, &args)?;
        self.final_block_sums()
    }
}

/// Prices one American option by Longstaff-Schwartz on the GPU: `mc.paths` paths of the
/// seed's stream `option`, the option's exercise dates as time steps (see
/// [`kiln_core::finance::american::lsm`]). Bitwise equal to the CPU engine's
/// `price_american(spec, mc, option)`.
///
/// Launch (kernels/american.cu, module docs): `lsm_paths_f32` once (one thread a path,
/// 256-thread CTAs); per exercise date, latest first, `lsm_regress_f64` (one warp a
/// canonical block, 8 warps a CTA) then `lsm_exercise_f64` (one thread a path);
/// `lsm_final_f64` last (one warp a block).
pub struct PriceAmerican<'a> {
    /// The option.
    pub spec: &'a AmericanSpec,
    /// The run.
    pub mc: &'a McParams,
    /// Its stream index.
    pub option: u32,
}

impl Op for PriceAmerican<'_> {
    type Output = PriceResult;

    fn run(self, cuda: &CudaBackend) -> Result<PriceResult> {
        let PriceAmerican { spec, mc, option } = self;
        let plan = LsmPlan::new(spec, mc, option)?;
        let mut engine = GpuLsm::new(cuda, &plan)?;
        run_lsm(&plan, &mut engine)
    }
}
