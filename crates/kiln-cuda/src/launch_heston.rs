//! Monte Carlo under Heston on the GPU (`kernels/heston.cu`), bitwise equal to the CPU
//! engine (kiln-cpu's `finance::heston`).
//!
//! How the bits match (as in `launch_finance.rs`): the kernel mirrors
//! kiln-core's `qe_step` and `heston_sample` operation by operation (the same Philox words,
//! the portable f32 `exp`/`ln`, IEEE `sqrt`, round-to-nearest intrinsics, no contraction),
//! with the per-option constants computed once on the host by kiln-core's
//! [`HestonPathParams`] and passed as f32 bits; each canonical block of 1024 samples is
//! summed in sample order; finance.cu's `mc_combine_f64` adds each option's blocks in block
//! order onto running totals (from zero, chunk after chunk); the host passes the one total
//! to kiln-core's [`finish_heston`], as the CPU does with its blocks.
//!
//! Launch shape: one launch for all options (one kernel; European and Asian differ only in
//! their loop counts), one warp per (option, block), 8 warps per 256-thread CTA; launches are
//! cut into chunks of at most [`GpuMcOptions::max_items`] items, which changes no bit.

use cudarc::driver::LaunchConfig;
use kiln_core::finance::heston::{finish_heston, HestonPathParams, HestonSpec};
use kiln_core::finance::{BlockSums, McParams, OptionType, PriceResult, BLOCK_SAMPLES};
use kiln_core::storage::McStreams;
use kiln_core::{Error, Result};

use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::launch_finance::{stream_of, sums_from, too_many, GpuMcOptions, KeySchedule};
use crate::mc_driver::McRun;
use crate::op::Op;
use crate::CudaBackend;

/// u32 and f64 words per option (`HESTON_OPT_U` / `HESTON_OPT_D` in heston.cu).
const OPT_U: usize = 18;
const OPT_D: usize = 5;
/// f64 sums per (option, block): y, yy, c, cc, yc, delta, vega.
const SUMS: usize = 7;
const WARPS_PER_CTA: u64 = 8;

/// The parameter rows of one option (layout of heston.cu's `HESTON_OPT_U` / `_D`).
fn rows(pp: &HestonPathParams, option: u32) -> ([u32; OPT_U], [f64; OPT_D]) {
    let q = &pp.qe;
    let u = [
        u32::from(pp.kind == OptionType::Put),
        u32::from(pp.asian),
        pp.fixings,
        pp.per_fixing,
        option,
        pp.v0.to_bits(),
        q.theta.to_bits(),
        q.ekt.to_bits(),
        q.c1.to_bits(),
        q.c2.to_bits(),
        q.rqdt.to_bits(),
        q.k0.to_bits(),
        q.k1.to_bits(),
        q.k2.to_bits(),
        q.k3.to_bits(),
        q.k4.to_bits(),
        q.a.to_bits(),
        q.half_k3.to_bits(),
    ];
    let d = [
        pp.spot,
        pp.strike,
        pp.discount,
        pp.control_mean,
        f64::from(pp.fixings),
    ];
    (u, d)
}

/// Prices Heston options by Monte Carlo on the GPU: option `i` draws the stream
/// `streams`' index `i` gives (as the CPU engine's `price_heston_mc(spec, mc, stream)`).
/// One result per option (an invalid option is an error in its slot), bitwise equal to the
/// CPU engine's; the outer error is an invalid `mc`, `streams` of another length than the
/// options, or a device failure.
///
/// Launch (kernels/heston.cu): `heston_blocks_f64` for all options (European and Asian
/// differ only in their loop counts), one warp per (option, block) item, 8 warps a
/// 256-thread CTA, grid `min(ceil(items / 8), 2^31 - 1)`; chunks of at most `max_items`
/// items, each followed by finance.cu's `mc_combine_f64`.
pub struct PriceHeston<'a> {
    /// The options.
    pub specs: &'a [HestonSpec],
    /// The run.
    pub mc: &'a McParams,
    /// Which Philox stream each option draws.
    pub streams: McStreams<'a>,
    /// At most this many (option, block) items a launch, `>= 1`; no bit depends on it.
    pub max_items: u64,
}

impl<'a> PriceHeston<'a> {
    /// Option `i` uses stream index `i`, in launches of the default size: bitwise the CPU
    /// engine's `price_heston(specs, mc)`.
    pub fn new(specs: &'a [HestonSpec], mc: &'a McParams) -> Self {
        Self::with(specs, mc, &GpuMcOptions::default())
    }

    /// Explicit chunking and stream offset: option `i` uses stream index
    /// `opts.first_option + i`.
    pub fn with(specs: &'a [HestonSpec], mc: &'a McParams, opts: &GpuMcOptions) -> Self {
        PriceHeston {
            specs,
            mc,
            streams: McStreams::From(opts.first_option),
            max_items: opts.max_items,
        }
    }
}

impl Op for PriceHeston<'_> {
    type Output = Vec<Result<PriceResult>>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<Result<PriceResult>>> {
        let PriceHeston {
            specs,
            mc,
            streams,
            max_items,
        } = self;
        mc.validate()?;
        streams.check(specs.len(), "price_heston_gpu")?;
        if max_items == 0 {
            return Err(Error::invalid(
                "price_heston_gpu",
                "max_items = 0; it must be >= 1",
            ));
        }
        let mut results: Vec<Option<Result<PriceResult>>> = (0..specs.len()).map(|_| None).collect();
        let (mut slots, mut u, mut d) = (Vec::new(), Vec::new(), Vec::new());
        for (i, spec) in specs.iter().enumerate() {
            let option = stream_of(streams, i, "price_heston_gpu");
            match option.and_then(|o| HestonPathParams::new(spec, mc).map(|pp| (o, pp))) {
                Err(e) => results[i] = Some(Err(e)),
                Ok((o, pp)) => {
                    let (ur, dr) = rows(&pp, o);
                    slots.push(i);
                    u.extend_from_slice(&ur);
                    d.extend_from_slice(&dr);
                }
            }
        }
        if !slots.is_empty() {
            let totals = heston_totals(cuda, &u, &d, slots.len(), mc, max_items)?;
            for (k, &slot) in slots.iter().enumerate() {
                let t = sums_from(mc.samples(), &totals[k * SUMS..(k + 1) * SUMS]);
                results[slot] = Some(finish_heston(&specs[slot].option, mc, &[t]));
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::invalid("price_heston_gpu", "option not priced"))))
            .collect())
    }
}

/// Every canonical block's sums of one Heston option (stream index `option`), in block
/// order: the values of the CPU engine's `simulate_heston_blocks(spec, mc, option, ..)`.
///
/// Launch (kernels/heston.cu): `heston_blocks_f64` once over one parameter row and every
/// block, one warp a block, 8 warps a 256-thread CTA; the sums are read back as they are.
pub struct HestonBlockSums<'a> {
    /// The option.
    pub spec: &'a HestonSpec,
    /// The run.
    pub mc: &'a McParams,
    /// Its stream index.
    pub option: u32,
}

impl Op for HestonBlockSums<'_> {
    type Output = Vec<BlockSums>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<BlockSums>> {
        let HestonBlockSums { spec, mc, option } = self;
        let pp = HestonPathParams::new(spec, mc)?;
        let nb = pp.samples.div_ceil(BLOCK_SAMPLES);
        let (u, d) = rows(&pp, option);
        let du = cuda.upload_slice(&u)?;
        let dd = cuda.upload_slice(&d)?;
        let items = usize::try_from(nb).map_err(|_| too_many(nb))?;
        let mut out = cuda.alloc::<f64>(items * SUMS)?;
        launch_heston_blocks(cuda, &du, &dd, 0, 1, 0, nb, mc, &mut out)?;
        let mut host = vec![0.0f64; items * SUMS];
        out.copy_to_host(&mut host, cuda.stream())?;
        Ok(host
            .chunks_exact(SUMS)
            .enumerate()
            .map(|(b, s)| sums_from((pp.samples - b as u64 * BLOCK_SAMPLES).min(BLOCK_SAMPLES), s))
            .collect())
    }
}

/// Runs one QE step per input on the GPU (the self-test kernel) for `spec`'s step
/// constants: from `(v[i], x[i])` with the Philox words of counter `[i, w[i], 7, 2]` under
/// `mc.seed`'s key. Output: the f32 bits of `(v', x')` per input, for comparison with
/// kiln-core's `qe_step`.
///
/// Launch (kernels/heston.cu): `heston_step_selftest_f32`, one thread an input, 256-thread
/// CTAs, grid `ceil(n / 256)`.
pub struct HestonStepSelftest<'a> {
    /// The option whose step constants the kernel uses.
    pub spec: &'a HestonSpec,
    /// The run (its seed keys the Philox words).
    pub mc: &'a McParams,
    /// The variances before the step.
    pub v: &'a [f32],
    /// The log-prices before the step, as many as `v`.
    pub x: &'a [f32],
    /// The Philox counter words, as many as `v`.
    pub w: &'a [u32],
}

impl Op for HestonStepSelftest<'_> {
    type Output = Vec<(u32, u32)>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<(u32, u32)>> {
        let HestonStepSelftest { spec, mc, v, x, w } = self;
        kiln_core::backend::check_same_len("heston_step_selftest", v.len(), x.len())?;
        kiln_core::backend::check_same_len("heston_step_selftest", v.len(), w.len())?;
        let n = u32::try_from(v.len()).map_err(|_| too_many(v.len() as u64))?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let pp = HestonPathParams::new(spec, mc)?;
        let (u, _) = rows(&pp, 0);
        let (du, dv, dx, dw) = (
            cuda.upload_slice(&u)?,
            cuda.upload_slice(v)?,
            cuda.upload_slice(x)?,
            cuda.upload_slice(w)?,
        );
        let out = cuda.alloc::<u32>(v.len() * 2)?;
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(256), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let ks = KeySchedule::of_seed(mc.seed);
        // Sizes: up holds 18 u32 (one row), v, x and w hold n elements, out 2n (all
        // allocated just above); the kernel guards i < n.
        let args = [
            Arg::buf(&du),
            Arg::buf(&dv),
            Arg::buf(&dx),
            Arg::buf(&dw),
            n.into(),
            Arg::by_value(&ks),
            Arg::buf(&out),
        ];
        cuda.launch(Kernel::HESTON_STEP_SELFTEST_F32, cfg, &args)?;
        let mut h = vec![0u32; v.len() * 2];
        out.copy_to_host(&mut h, cuda.stream())?;
        drop((du, dv, dx, dw, out));
        Ok(h.chunks_exact(2).map(|p| (p[0], p[1])).collect())
    }
}

/// Totals (7 per option, block order) of `n` options whose rows are `u`, `d`, chunk by
/// chunk (`mc_driver`).
fn heston_totals(
    cuda: &CudaBackend,
    u: &[u32],
    d: &[f64],
    n: usize,
    mc: &McParams,
    max_items: u64,
) -> Result<Vec<f64>> {
    let du = cuda.upload_slice(u)?;
    let dd = cuda.upload_slice(d)?;
    let run = McRun {
        options: n as u64,
        replicates: 1,
        per: mc.samples().div_ceil(BLOCK_SAMPLES),
        max_items,
    };
    run.totals(cuda, |row0, rows, first, count, out| {
        launch_heston_blocks(cuda, &du, &dd, row0, rows, first, count, mc, out)
    })
}

/// Launches `heston_blocks_f64` on rows `row0 .. row0 + n_rows` of the parameter arrays
/// and blocks `first_block .. first_block + n_blocks`, into `out` (item order).
#[allow(clippy::too_many_arguments)] // the kernel's arguments
fn launch_heston_blocks(
    cuda: &CudaBackend,
    du: &crate::pool::DeviceBuffer<u32>,
    dd: &crate::pool::DeviceBuffer<f64>,
    row0: u64,
    n_rows: u64,
    first_block: u64,
    n_blocks: u64,
    mc: &McParams,
    out: &mut crate::pool::DeviceBuffer<f64>,
) -> Result<()> {
    const OP: &str = "heston_blocks_f64";
    let items = n_rows.checked_mul(n_blocks).ok_or_else(|| too_many(u64::MAX))?;
    if items == 0 {
        return Ok(());
    }
    let rows_end = row0 + n_rows;
    if rows_end * OPT_U as u64 > du.len() as u64 || rows_end * OPT_D as u64 > dd.len() as u64 {
        return Err(Error::invalid(
            OP,
            format!("rows {row0}..{rows_end} outside the parameter arrays"),
        ));
    }
    if items * SUMS as u64 > out.len() as u64 {
        return Err(Error::invalid(
            OP,
            format!(
                "{items} items need {} f64, the output holds {}",
                items * SUMS as u64,
                out.len()
            ),
        ));
    }
    let n_opt = u32::try_from(n_rows).map_err(|_| too_many(n_rows))?;
    let samples = mc.samples();
    let ks = KeySchedule::of_seed(mc.seed);
    let ctas = items.div_ceil(WARPS_PER_CTA).min(i32::MAX as u64) as u32;
    let cfg = LaunchConfig {
        grid_dim: (ctas, 1, 1),
        block_dim: ((WARPS_PER_CTA * 32) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // Sizes: the kernel reads rows row0 .. row0 + n_rows of the parameter arrays (18 u32
    // and 5 f64 a row, checked above) and writes items * 7 f64 of `out` (checked above);
    // block indices stay below ceil(samples / 1024) because callers pass block ranges of
    // the run.
    let args = [
        Arg::buf_at(du, row0 * OPT_U as u64),
        Arg::buf_at(dd, row0 * OPT_D as u64),
        n_opt.into(),
        first_block.into(),
        n_blocks.into(),
        samples.into(),
        Arg::by_value(&ks),
        Arg::buf(out),
    ];
    cuda.launch(Kernel::HESTON_BLOCKS_F64, cfg, &args)
}
