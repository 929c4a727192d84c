//! Longstaff-Schwartz American barrier options on the GPU (`kernels/american_barrier.cu`
//! after `kernels/american.cu`), bitwise equal to the CPU engine (kiln-cpu's
//! `finance::american_barrier`): kiln-core's
//! [`lsm_barrier`](kiln_core::finance::american::lsm_barrier) contract on the vanilla
//! engine's paths and device state ([`crate::launch_american`]).
//!
//! kiln-core's [`run_lsm_barrier`] drives it, one kernel a step: `lsm_paths_f32` (the
//! vanilla's paths, the same matrix) then `lsm_barrier_init_f64` (each path's first knocked
//! date, the last date's cash flows); per exercise date, latest first,
//! `lsm_barrier_regress_f64` (the knock's rebate or, for in-options, the vanilla received at
//! the knock; the discount; the sums of the live in-the-money paths, which the host adds in
//! block order and solves as the vanilla's) then the exercise, `lsm_barrier_exercise_f64` on
//! the live paths (out-options) or the vanilla's `lsm_exercise_f64` on every path
//! (in-options: the vanilla's rule); last, the vanilla's `lsm_final_f64` (out) or
//! `lsm_barrier_final_in_f64` (in). A spot already past the barrier is priced on the host
//! side as the CPU engine does: the rebate (out) or the vanilla's GPU price (in).
//!
//! Memory: the vanilla's, plus 4 bytes a path for the knock dates and, for in-options, 8
//! bytes a path for the in-option's cash flows.

use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::launch_american::{GpuLsm, PriceAmerican};
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use kiln_core::finance::american::lsm_barrier::{run_lsm_barrier, LsmBarrier};
use kiln_core::finance::american::{AmericanBarrierSpec, LsmBackend, LsmPlan, RegressionSums, LSM_BASIS};
use kiln_core::finance::{McParams, PriceResult};
use kiln_core::Result;

/// The vanilla's device state plus the knock dates and the in-option's cash flows.
struct GpuLsmBarrier<'a> {
    base: GpuLsm<'a>,
    bar: LsmBarrier,
    /// First knocked date of each path (`u32::MAX`: never), `paths` u32.
    hit: DeviceBuffer<u32>,
    /// In-options: `W_p`, `paths` f64 (out-options: one unused element).
    w: DeviceBuffer<f64>,
}

impl GpuLsmBarrier<'_> {
    fn is_in(&self) -> u32 {
        u32::from(self.bar.is_in())
    }
}

impl LsmBackend for GpuLsmBarrier<'_> {
    fn simulate(&mut self, plan: &LsmPlan) -> Result<()> {
        self.base.simulate(plan)?;
        let cfg = self.base.per_path()?;
        // Sizes: `m` holds paths x dates f32 and `v`, `hit` and (in-options) `w` paths
        // elements, allocated from the same plan; the kernel guards p < paths, reads
        // m[d * paths + p] for d < dates, writes hit[p] and v[p], and w[p] only when `in`
        // is set (then `w` holds paths f64).
        let args = [
            Arg::buf(&self.base.m),
            Arg::buf(&self.base.v),
            Arg::buf(&self.w),
            Arg::buf(&self.hit),
            self.base.paths.into(),
            plan.dates.into(),
            plan.spec.spot.into(),
            self.bar.level.into(),
            u32::from(self.bar.spec.is_up()).into(),
            self.is_in().into(),
            self.bar.rebate().into(),
        ];
        self.base.be.launch(Kernel::LSM_BARRIER_INIT_F64, cfg, &args)
    }

    fn regress(&mut self, plan: &LsmPlan, d: u32) -> Result<Vec<RegressionSums>> {
        self.base.check_date(plan, d)?;
        let cfg = self.base.per_block()?;
        let (spot, strike, df) = (plan.spec.spot, plan.spec.strike, plan.df_step);
        // Sizes: as the vanilla's regression (row d < dates of `m`, v[p] for p < paths,
        // sums[blk * 8 + j] for blk < blocks, j < 8), plus hit[p] read and, when `in` is
        // set, w[p] read and written (then `w` holds paths f64).
        let args = [
            Arg::buf(&self.base.m),
            Arg::buf(&self.base.v),
            Arg::buf(&self.w),
            Arg::buf(&self.hit),
            self.base.paths.into(),
            d.into(),
            spot.into(),
            strike.into(),
            self.base.put.into(),
            df.into(),
            self.is_in().into(),
            self.bar.rebate().into(),
            Arg::buf(&self.base.sums),
        ];
        self.base.be.launch(Kernel::LSM_BARRIER_REGRESS_F64, cfg, &args)?;
        self.base.regression_sums()
    }

    fn exercise(&mut self, plan: &LsmPlan, d: u32, beta: &[f64; LSM_BASIS]) -> Result<()> {
        if self.bar.is_in() {
            // the in-option's vanilla exercises on every path, by the vanilla's rule
            return self.base.exercise(plan, d, beta);
        }
        self.base.check_date(plan, d)?;
        let cfg = self.base.per_path()?;
        let (spot, strike) = (plan.spec.spot, plan.spec.strike);
        // Sizes: the kernel guards p < paths, reads hit[p] and m[d * paths + p] (d < dates,
        // checked) and writes v[p].
        let args = [
            Arg::buf(&self.base.m),
            Arg::buf(&self.base.v),
            Arg::buf(&self.hit),
            self.base.paths.into(),
            d.into(),
            spot.into(),
            strike.into(),
            self.base.put.into(),
            beta[0].into(),
            beta[1].into(),
            beta[2].into(),
        ];
        self.base.be.launch(Kernel::LSM_BARRIER_EXERCISE_F64, cfg, &args)
    }

    fn final_sums(&mut self, plan: &LsmPlan) -> Result<Vec<[f64; 2]>> {
        if !self.bar.is_in() {
            return self.base.final_sums(plan);
        }
        let cfg = self.base.per_block()?;
        // Sizes: the kernel reads w[p], v[p] and hit[p] for p < paths (each holds paths
        // elements for an in-option) and writes sums[blk * 2 + j] for blk < blocks, j < 2.
        let args = [
            Arg::buf(&self.w),
            Arg::buf(&self.base.v),
            Arg::buf(&self.hit),
            self.base.paths.into(),
            plan.df_step.into(),
            Arg::buf(&self.base.sums),
        ];
        self.base
            .be
            .launch(Kernel::LSM_BARRIER_FINAL_IN_F64, cfg, &args)?;
        self.base.final_block_sums()
    }
}

/// Prices one American barrier option by Longstaff-Schwartz on the GPU (kiln-core's
/// [`lsm_barrier`](kiln_core::finance::american::lsm_barrier)): `mc.paths` paths of the
/// seed's stream `option`, the vanilla engine's paths. Bitwise equal to the CPU engine's
/// `price_american_barrier(spec, mc, option)`, a spot already past the barrier included
/// (the rebate for out-options, the vanilla's price for in-options).
///
/// Launch: [`PriceAmerican`]'s path kernel, then the kernels of the module docs: one thread
/// a path (256-thread CTAs) for the knock dates and the exercise, one warp a canonical
/// block (8 warps a CTA) for the regression and final sums.
pub struct PriceAmericanBarrier<'a> {
    /// The option.
    pub spec: &'a AmericanBarrierSpec,
    /// The run.
    pub mc: &'a McParams,
    /// Its stream index.
    pub option: u32,
}

impl Op for PriceAmericanBarrier<'_> {
    type Output = PriceResult;

    fn run(self, cuda: &CudaBackend) -> Result<PriceResult> {
        let PriceAmericanBarrier { spec, mc, option } = self;
        spec.validate()?;
        if spec.knocked(spec.option.spot) {
            return if spec.is_in() {
                PriceAmerican {
                    spec: &spec.option,
                    mc,
                    option,
                }
                .run(cuda)
            } else {
                Ok(PriceResult::exact(spec.rebate))
            };
        }
        let plan = LsmPlan::new(&spec.option, mc, option)?;
        let base = GpuLsm::new(cuda, &plan)?;
        let paths = usize::try_from(plan.paths).map_err(|_| crate::launch_finance::too_many(plan.paths))?;
        let bar = LsmBarrier::new(spec, &plan);
        let mut engine = GpuLsmBarrier {
            hit: cuda.alloc::<u32>(paths)?,
            w: cuda.alloc::<f64>(if spec.is_in() { paths } else { 1 })?,
            base,
            bar,
        };
        run_lsm_barrier(&plan, &bar, &mut engine)
    }
}
