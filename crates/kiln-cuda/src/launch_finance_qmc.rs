//! Quasi-Monte Carlo option pricing on the GPU (`kernels/finance_qmc.cu`), bitwise equal to
//! the CPU engine's Sobol runs (kiln-cpu's `finance::qmc`). One CTA simulates one canonical
//! block of 1,024 samples (the Philox kernels give a block a warp; a QMC sample costs far
//! more, and a warp a block starved small runs).
//!
//! The host builds kiln-core's [`QmcPlan`] (direction numbers, digital shifts, Brownian
//! bridge) once per group of options that share a style and a step count, uploads it, and
//! launches the group's block kernel as `launch_finance` does. The combine kernel then adds
//! the blocks of each (option, replicate) in block order (a replicate is whole canonical
//! blocks), and kiln-core's [`finish_replicates`] turns the replicate sums into a price and
//! a standard error: the CPU engine adds the same blocks in the same order, so the two agree
//! to the last bit, whatever the chunking.

use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::launch_finance::{param_rows, stream_of, sums_from, too_many, OPT_D, OPT_U, SUMS};
use crate::mc_driver::McRun;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::finance::qmc::check_steps;
use kiln_core::finance::{
    finish_replicates, BlockSums, McParams, OptionSpec, PathParams, PriceResult, QmcPlan, Rng, Style,
    BLOCK_SAMPLES,
};
use kiln_core::storage::McStreams;
use kiln_core::{Error, Result};

/// Threads of a QMC CTA (`KILN_QMC_THREADS` in finance_qmc.cu).
const QMC_THREADS: u32 = 256;

fn qmc_kernel(style: Style) -> Kernel {
    match style {
        Style::European => Kernel::QMC_EUROPEAN_F64,
        Style::AsianArithmetic => Kernel::QMC_ASIAN_ARITHMETIC_F64,
        Style::AsianGeometric => Kernel::QMC_ASIAN_GEOMETRIC_F64,
        Style::BarrierUpOut => Kernel::QMC_BARRIER_UP_OUT_F64,
        Style::BarrierUpIn => Kernel::QMC_BARRIER_UP_IN_F64,
        Style::BarrierDownOut => Kernel::QMC_BARRIER_DOWN_OUT_F64,
        Style::BarrierDownIn => Kernel::QMC_BARRIER_DOWN_IN_F64,
    }
}

/// A plan on the device: direction numbers, shifts, bridge nodes and weights.
struct DevicePlan {
    dirs: DeviceBuffer<u32>,
    shifts: DeviceBuffer<u32>,
    nodes: DeviceBuffer<u32>,
    weights: DeviceBuffer<f32>,
    dims: u32,
    points: u64,
}

/// Options of one (style, steps) group.
struct Group {
    style: Style,
    steps: u32,
    pp: PathParams,
    slots: Vec<usize>,
    u: Vec<u32>,
    d: Vec<f64>,
}

impl DevicePlan {
    /// Uploads `plan` on `cuda`'s current stream.
    #[allow(clippy::needless_range_loop)] // the bridge's six arrays, node by node
    fn upload(cuda: &CudaBackend, plan: &QmcPlan) -> Result<DevicePlan> {
        let b = &plan.bridge;
        let mut nodes = Vec::with_capacity(3 * b.len());
        let mut weights = Vec::with_capacity(3 * b.len());
        for j in 0..b.len() {
            nodes.extend_from_slice(&[b.target[j], b.left[j], b.right[j]]);
            weights.extend_from_slice(&[b.a[j], b.b[j], b.c[j]]);
        }
        Ok(DevicePlan {
            dirs: cuda.upload_slice(plan.directions)?,
            shifts: cuda.upload_slice(&plan.shifts)?,
            nodes: cuda.upload_slice(&nodes)?,
            weights: cuda.upload_slice(&weights)?,
            dims: plan.dims as u32,
            points: plan.points,
        })
    }
}

/// Prices `specs` with a Sobol run (`mc.rng` is [`Rng::Sobol`]) on `cuda`; see the module
/// docs. [`PriceMc`](crate::ops::PriceMc)'s Sobol path.
pub(crate) fn price_qmc(
    cuda: &CudaBackend,
    specs: &[OptionSpec],
    mc: &McParams,
    max_items: u64,
    streams: McStreams<'_>,
) -> Result<Vec<Result<PriceResult>>> {
    mc.validate()?;
    let Rng::Sobol { replicates } = mc.rng else {
        return Err(Error::invalid(
            "price_qmc_gpu",
            "the run does not use the sobol generator",
        ));
    };
    if max_items == 0 {
        return Err(Error::invalid("price_mc_gpu", "max_items = 0; it must be >= 1"));
    }
    let mut results: Vec<Option<Result<PriceResult>>> = (0..specs.len()).map(|_| None).collect();
    let mut groups: Vec<Group> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let checked = stream_of(streams, i, "price_mc_gpu").and_then(|o| {
            let pp = PathParams::new(spec, mc)?;
            check_steps(pp.steps)?;
            Ok((o, pp))
        });
        let (option, pp) = match checked {
            Ok(x) => x,
            Err(e) => {
                results[i] = Some(Err(e));
                continue;
            }
        };
        // The stream index is unused by Sobol paths (the shifts are the run's), but the
        // row keeps it for the layout shared with the Philox kernels.
        let (u, d) = param_rows(spec, &pp, option);
        let pos = groups
            .iter()
            .position(|g| g.style == spec.style && g.steps == pp.steps);
        let g = match pos {
            Some(p) => &mut groups[p],
            None => {
                groups.push(Group {
                    style: spec.style,
                    steps: pp.steps,
                    pp,
                    slots: Vec::new(),
                    u: Vec::new(),
                    d: Vec::new(),
                });
                let last = groups.len() - 1;
                &mut groups[last]
            }
        };
        g.slots.push(i);
        g.u.extend_from_slice(&u);
        g.d.extend_from_slice(&d);
    }
    let r = replicates as usize;
    for g in &groups {
        let plan = QmcPlan::new(&g.pp, mc)?;
        let totals = qmc_group_totals(cuda, g, &plan, mc, max_items)?;
        for (k, &slot) in g.slots.iter().enumerate() {
            let reps: Vec<BlockSums> = (0..r)
                .map(|j| sums_from(plan.points, &totals[(k * r + j) * SUMS..(k * r + j + 1) * SUMS]))
                .collect();
            results[slot] = Some(finish_replicates(&specs[slot], mc, &reps));
        }
    }
    Ok(results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::invalid("price_mc_gpu", "option not priced"))))
        .collect())
}

/// Every canonical block's sums of one option of a Sobol run on `cuda`, in block order
/// (what the CPU engine's `simulate_blocks` returns), for tests:
/// [`McBlockSums`](crate::ops::McBlockSums)' Sobol path.
pub(crate) fn qmc_block_sums(cuda: &CudaBackend, spec: &OptionSpec, mc: &McParams) -> Result<Vec<BlockSums>> {
    let pp = PathParams::new(spec, mc)?;
    let plan = QmcPlan::new(&pp, mc)?;
    let dp = DevicePlan::upload(cuda, &plan)?;
    let nb = pp.samples.div_ceil(BLOCK_SAMPLES);
    let (u, d) = param_rows(spec, &pp, 0);
    let du = cuda.upload_slice(&u)?;
    let dd = cuda.upload_slice(&d)?;
    let items = usize::try_from(nb).map_err(|_| too_many(nb))?;
    let mut out = cuda.alloc::<f64>(items * SUMS)?;
    launch_qmc_at(
        cuda,
        qmc_kernel(spec.style),
        &du,
        &dd,
        &dp,
        0,
        1,
        0,
        nb,
        mc,
        &mut out,
    )?;
    let mut host = vec![0.0f64; items * SUMS];
    out.copy_to_host(&mut host, cuda.stream())?;
    Ok(host
        .chunks_exact(SUMS)
        .enumerate()
        .map(|(b, s)| sums_from((pp.samples - b as u64 * BLOCK_SAMPLES).min(BLOCK_SAMPLES), s))
        .collect())
}

/// The (option, replicate) totals of a group, `totals[(k * R + r) * 7 + j]`, chunk by
/// chunk: whole options per launch when they fit in `max_items`, else one replicate's
/// blocks at a time, in pieces of at most `max_items`.
fn qmc_group_totals(
    cuda: &CudaBackend,
    g: &Group,
    plan: &QmcPlan,
    mc: &McParams,
    max_items: u64,
) -> Result<Vec<f64>> {
    let dp = DevicePlan::upload(cuda, plan)?;
    let du = cuda.upload_slice(&g.u)?;
    let dd = cuda.upload_slice(&g.d)?;
    let k = qmc_kernel(g.style);
    let run = McRun {
        options: g.slots.len() as u64,
        replicates: u64::from(plan.replicates),
        per: plan.points / BLOCK_SAMPLES,
        max_items,
    };
    run.totals(cuda, |row0, rows, first, count, out| {
        launch_qmc_at(cuda, k, &du, &dd, &dp, row0, rows, first, count, mc, out)
    })
}

/// Launches the QMC block kernel `k` on parameter rows `row0 .. row0 + rows` and blocks
/// `first_block .. first_block + blocks` into `out` (item order).
#[allow(clippy::too_many_arguments)] // the kernel's arguments
fn launch_qmc_at(
    cuda: &CudaBackend,
    k: Kernel,
    du: &DeviceBuffer<u32>,
    dd: &DeviceBuffer<f64>,
    plan: &DevicePlan,
    row0: u64,
    rows: u64,
    first_block: u64,
    blocks: u64,
    mc: &McParams,
    out: &mut DeviceBuffer<f64>,
) -> Result<()> {
    let op = k.symbol();
    if rows == 0 || blocks == 0 {
        return Ok(());
    }
    let items = rows.checked_mul(blocks).ok_or_else(|| too_many(u64::MAX))?;
    let rows_end = row0 + rows;
    let samples = mc.samples();
    let replicates = samples / plan.points.max(1);
    if rows_end * OPT_U as u64 > du.len() as u64
        || rows_end * OPT_D as u64 > dd.len() as u64
        || items * SUMS as u64 > out.len() as u64
        || (first_block + blocks) * BLOCK_SAMPLES > samples
        || plan.dirs.len() as u64 != u64::from(plan.dims) * 32
        || plan.shifts.len() as u64 != replicates * u64::from(plan.dims)
        || plan.nodes.len() as u64 != 3 * u64::from(plan.dims)
        || plan.weights.len() as u64 != 3 * u64::from(plan.dims)
        || plan.dims > kiln_core::finance::QMC_MAX_STEPS
    {
        return Err(Error::invalid(
            op,
            format!("rows {row0}..{rows_end}, blocks {first_block}+{blocks}: outside the launch's buffers"),
        ));
    }
    let n_opt = u32::try_from(rows).map_err(|_| too_many(rows))?;
    let anti = u32::from(mc.antithetic);
    // one CTA an (option, block) item (finance_qmc.cu's kiln_qmc_blocks)
    let ctas = items.min(i32::MAX as u64) as u32;
    let cfg = LaunchConfig {
        grid_dim: (ctas, 1, 1),
        block_dim: (QMC_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    // Sizes: the kernel reads rows row0 .. row0 + rows of the parameter arrays, the plan's
    // dims x 32 direction numbers, R x dims shifts and 3 x dims nodes and weights (all
    // sizes checked above; node indices are <= dims by construction, inside the kernel's
    // KILN_QMC_MAX + 1 array since dims <= QMC_MAX_STEPS), samples below `samples`, and
    // writes items * 7 f64 of `out` (checked).
    let args = [
        Arg::buf_at(du, row0 * OPT_U as u64),
        Arg::buf_at(dd, row0 * OPT_D as u64),
        n_opt.into(),
        first_block.into(),
        blocks.into(),
        samples.into(),
        Arg::buf(&plan.dirs),
        Arg::buf(&plan.shifts),
        Arg::buf(&plan.nodes),
        Arg::buf(&plan.weights),
        plan.dims.into(),
        plan.points.into(),
        anti.into(),
        Arg::buf(out),
    ];
    cuda.launch(k, cfg, &args)
}

/// Runs the QMC self-test kernel: for each word `w[i]`, the f32 bits of the kernel's
/// inverse normal of `(2 w + 1) 2^-33`, and coordinate `i % dims` of Sobol point `w[i]`.
/// Output: `(inverse normal bits, Sobol coordinates)`.
///
/// Launch (kernels/finance_qmc.cu): `qmc_selftest_f32`, one thread a word, 256-thread CTAs,
/// grid `ceil(n / 256)`.
pub struct QmcSelftest<'a> {
    /// The words, at least one.
    pub w: &'a [u32],
    /// The Sobol dimensions, `1..=8192`.
    pub dims: usize,
}

impl Op for QmcSelftest<'_> {
    type Output = (Vec<u32>, Vec<u32>);

    fn run(self, cuda: &CudaBackend) -> Result<(Vec<u32>, Vec<u32>)> {
        let QmcSelftest { w, dims } = self;
        let n = u32::try_from(w.len()).map_err(|_| too_many(w.len() as u64))?;
        if n == 0 || dims == 0 || dims > kiln_core::finance::sobol::SOBOL_MAX_DIMS {
            return Err(Error::invalid(
                "qmc_selftest",
                "need words and 1..=8192 dimensions",
            ));
        }
        let dw = cuda.upload_slice(w)?;
        let dirs = cuda.upload_slice(kiln_core::finance::sobol::direction_numbers_for(dims))?;
        let inv = cuda.alloc::<u32>(w.len())?;
        let sob = cuda.alloc::<u32>(w.len())?;
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(256), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let d32 = dims as u32;
        // Sizes: w, inv and sob hold n elements, dirs dims * 32 (uploaded just above); the
        // kernel guards i < n and reads dimension i % dims.
        let args = [
            Arg::buf(&dw),
            n.into(),
            Arg::buf(&dirs),
            d32.into(),
            Arg::buf(&inv),
            Arg::buf(&sob),
        ];
        cuda.launch(Kernel::QMC_SELFTEST_F32, cfg, &args)?;
        let mut hi = vec![0u32; w.len()];
        let mut hs = vec![0u32; w.len()];
        inv.copy_to_host(&mut hi, cuda.stream())?;
        sob.copy_to_host(&mut hs, cuda.stream())?;
        drop((inv, sob));
        Ok((hi, hs))
    }
}
