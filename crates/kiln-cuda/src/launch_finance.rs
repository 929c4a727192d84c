//! Monte Carlo option pricing on the GPU (`kernels/finance.cu`), bitwise equal to the CPU
//! engine (kiln-cpu's `finance`).
//!
//! How the bits match: the kernel reproduces the CPU's Philox words, its f32 Box-Muller and
//! log-price steps and its f64 payoffs operation by operation (round-to-nearest intrinsics,
//! no FMA contraction), and sums each canonical block of
//! [`BLOCK_SAMPLES`](kiln_core::finance::BLOCK_SAMPLES) samples in sample order, as
//! [`BlockSums::push`] does. A second kernel adds each option's blocks in block order, from
//! zero, as `finish` does; the host passes that one total to kiln-core's
//! [`finish`](kiln_core::finance::finish), the finishing math the CPU engine calls too, with
//! the same [`control_mean`](kiln_core::finance::control_mean). So a GPU price, standard
//! error and Greeks equal the CPU's to the last bit for the same seed, whatever the
//! chunking. The CPU engine itself is no dependency of this crate: the tests that compare
//! the two live in the facade (`crates/kiln/tests/finance_gpu.rs`).
//!
//! Launch shape: one kernel per style (options are grouped by style, each group one
//! launch), one warp per (option, block), 8 warps per 256-thread CTA, a grid-stride loop
//! over items. Launches are cut into chunks of at most [`GpuMcOptions::max_items`]
//! (option, block) items so the block-sum array stays small (56 bytes an item); running
//! totals chain across chunks in block order, so chunking changes no bit.

use crate::kernels::Kernel;
use crate::launch::{Arg, KernelStruct};
use crate::launch_finance_qmc::{price_qmc, qmc_block_sums};
use crate::mc_driver::McRun;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::finance::{
    control_mean, finish, BlockSums, McParams, OptionSpec, PathParams, PriceResult, Rng, Style, BLOCK_SAMPLES,
};
use kiln_core::storage::McStreams;
use kiln_core::{Error, Result};

/// u32 and f64 words per option in the parameter arrays (see `finance.cu`).
pub(crate) const OPT_U: usize = 8;
pub(crate) const OPT_D: usize = 10;
/// f64 sums per (option, block): y, yy, c, cc, yc, delta, vega.
pub(crate) const SUMS: usize = 7;
pub(crate) const WARPS_PER_CTA: u64 = 8;

/// How a GPU Monte Carlo run is cut into launches. Neither field changes a result bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuMcOptions {
    /// At most this many (option, block) items per launch (the block-sum array holds 56
    /// bytes an item), `>= 1`.
    pub max_items: u64,
    /// The stream index of the first option: option `i` of the slice uses Philox option
    /// word `first_option + i` (as the CPU engine's `price_mc(spec, mc, first_option + i)`).
    pub first_option: u32,
}

impl Default for GpuMcOptions {
    fn default() -> Self {
        GpuMcOptions {
            max_items: 1 << 20,
            first_option: 0,
        }
    }
}

/// Option `i`'s stream index under `streams` (`op` names the call in the error). The
/// stream index is a word of the option's parameter row (every Philox kernel reads its
/// counter's option word from there, never from the option's place in the launch), so any
/// assignment costs nothing on the device. Consecutive indices from a first one serve a book
/// priced in pieces; an explicit index per option serves callers that price one option many
/// times in one run (shocked copies under risk scenarios keep the stream of the option they
/// copy).
pub(crate) fn stream_of(streams: McStreams<'_>, i: usize, op: &str) -> Result<u32> {
    match streams {
        McStreams::From(first) => u32::try_from(i as u64 + u64::from(first)).map_err(|_| {
            Error::invalid(
                op,
                format!("option {i}: stream index past 2^32 (first_option {first})"),
            )
        }),
        McStreams::Each(s) => s
            .get(i)
            .copied()
            .ok_or_else(|| Error::invalid(op, format!("option {i} has no stream index"))),
    }
}

/// Benchmark probes: the European kernel's launch, loop and block sums with the path loop
/// cut down, so a benchmark can time what each part of a path-step costs
/// ([`McProbeTotals`]). Their sums are not prices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McProbe {
    /// Only the Philox words (XORed together): the generator's cost.
    Philox,
    /// Philox and the exact (bitwise-CPU) Box-Muller normals, added up.
    Normals,
    /// Philox and the `fast_math` normals, added up.
    NormalsFast,
}

impl McProbe {
    /// The kernel the probe runs.
    pub fn kernel(self) -> Kernel {
        match self {
            McProbe::Philox => Kernel::MC_PROBE_PHILOX_F64,
            McProbe::Normals => Kernel::MC_PROBE_NORMALS_F64,
            McProbe::NormalsFast => Kernel::MC_PROBE_NORMALS_FAST_F64,
        }
    }
}

fn kernel_for(style: Style, fast: bool) -> Kernel {
    match (style, fast) {
        (Style::European, false) => Kernel::MC_EUROPEAN_F64,
        (Style::AsianArithmetic, false) => Kernel::MC_ASIAN_ARITHMETIC_F64,
        (Style::AsianGeometric, false) => Kernel::MC_ASIAN_GEOMETRIC_F64,
        (Style::BarrierUpOut, false) => Kernel::MC_BARRIER_UP_OUT_F64,
        (Style::BarrierUpIn, false) => Kernel::MC_BARRIER_UP_IN_F64,
        (Style::BarrierDownOut, false) => Kernel::MC_BARRIER_DOWN_OUT_F64,
        (Style::BarrierDownIn, false) => Kernel::MC_BARRIER_DOWN_IN_F64,
        (Style::European, true) => Kernel::MC_EUROPEAN_FAST_F64,
        (Style::AsianArithmetic, true) => Kernel::MC_ASIAN_ARITHMETIC_FAST_F64,
        (Style::AsianGeometric, true) => Kernel::MC_ASIAN_GEOMETRIC_FAST_F64,
        (Style::BarrierUpOut, true) => Kernel::MC_BARRIER_UP_OUT_FAST_F64,
        (Style::BarrierUpIn, true) => Kernel::MC_BARRIER_UP_IN_FAST_F64,
        (Style::BarrierDownOut, true) => Kernel::MC_BARRIER_DOWN_OUT_FAST_F64,
        (Style::BarrierDownIn, true) => Kernel::MC_BARRIER_DOWN_IN_FAST_F64,
    }
}

/// `finance.cu`'s `KilnKeys`: the ten round keys, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct KeySchedule(pub(crate) [[u32; 10]; 2]);

// SAFETY: a plain #[repr(C)] array of 20 u32, the layout of `struct KilnKeys { u32 k0[10];
// u32 k1[10]; }`; the kernel reads it by value.
#[allow(unsafe_code)]
unsafe impl cudarc::driver::DeviceRepr for KeySchedule {}
impl KernelStruct for KeySchedule {
    const C_NAME: &'static str = "KilnKeys";
}
const _: () = assert!(std::mem::size_of::<KeySchedule>() == crate::kernels::decl::KEYS.size_bytes());

impl KeySchedule {
    /// The round keys of a run's seed (every Philox kernel's `KilnKeys`).
    pub(crate) fn of_seed(seed: u64) -> Self {
        KeySchedule(kiln_core::philox::key_schedule(kiln_core::philox::key_from_seed(
            seed,
        )))
    }
}

/// The parameter rows of one option (layout of `finance.cu`'s `KILN_OPT_U` / `KILN_OPT_D`).
pub(crate) fn param_rows(spec: &OptionSpec, pp: &PathParams, option: u32) -> ([u32; OPT_U], [f64; OPT_D]) {
    let v = spec.volatility;
    let u = [
        0,
        u32::from(spec.option_type == kiln_core::finance::OptionType::Put),
        pp.steps,
        option,
        pp.drift_dt.to_bits(),
        pp.vol_sqrt_dt.to_bits(),
        pp.log_barrier.to_bits(),
        if spec.style.is_barrier() {
            // barriers: the continuous monitoring's crossing coefficient (0: discrete)
            pp.cross_k.to_bits()
        } else {
            // vega_drift_dt as the CPU engine's `Consts` rounds it (kiln-cpu's finance/mc.rs)
            (((spec.rate - spec.dividend + 0.5 * v * v) * pp.dt) as f32).to_bits()
        },
    ];
    let d = [
        spec.spot,
        spec.strike,
        pp.discount,
        v,
        spec.rate - spec.dividend + 0.5 * v * v,
        spec.maturity,
        pp.dt,
        f64::from(pp.steps),
        control_mean(spec, pp),
        0.0,
    ];
    (u, d)
}

/// Options of one style, ready to launch: their slots in the caller's slice and rows.
struct Group {
    style: Style,
    slots: Vec<usize>,
    u: Vec<u32>,
    d: Vec<f64>,
}

/// Prices `specs` by Monte Carlo on the GPU with the run `mc`: option `i` draws the Philox
/// stream `streams`' index `i` gives (as the CPU engine's `price_mc(spec, mc, stream)`).
/// One result per option (an invalid option is an error in its slot), bitwise equal to the
/// CPU engine's; the outer error is an invalid `mc`, `streams` of another length than the
/// options, or a device failure. Neither the order of the options nor the chunking changes
/// a bit. A Sobol run (`mc.rng` is [`Rng::Sobol`]) runs the QMC kernels
/// (`launch_finance_qmc.rs`).
///
/// Launch (kernels/finance.cu): options grouped by style, one block kernel a group
/// (`mc_european_f64`, `mc_asian_arithmetic_f64`, ..., their `_fast_` twins under
/// `mc.fast_math`), one warp per (option, block) item, 8 warps a 256-thread CTA, grid
/// `min(ceil(items / 8), 2^31 - 1)` with a grid-stride loop over items; chunks of at most
/// `max_items` items, each followed by `mc_combine_f64` (256 threads, one a sum of a row of
/// totals) adding its blocks onto the totals in block order.
pub struct PriceMc<'a> {
    /// The options.
    pub specs: &'a [OptionSpec],
    /// The run: paths, steps, seed, generator.
    pub mc: &'a McParams,
    /// Which Philox stream each option draws: consecutive indices from a first one, or one
    /// index an option (the same option priced twice in one run, or a shocked copy of it,
    /// then draws the same numbers).
    pub streams: McStreams<'a>,
    /// At most this many (option, block) items a launch, `>= 1` (the block-sum array holds
    /// 56 bytes an item); no bit depends on it.
    pub max_items: u64,
}

impl<'a> PriceMc<'a> {
    /// Option `i` uses stream index `i`, in launches of the default size: bitwise the CPU
    /// engine's `price_portfolio(specs, mc)`.
    pub fn new(specs: &'a [OptionSpec], mc: &'a McParams) -> Self {
        Self::with(specs, mc, &GpuMcOptions::default())
    }

    /// Explicit chunking and stream offset: option `i` uses stream index
    /// `opts.first_option + i`.
    pub fn with(specs: &'a [OptionSpec], mc: &'a McParams, opts: &GpuMcOptions) -> Self {
        PriceMc {
            specs,
            mc,
            streams: McStreams::From(opts.first_option),
            max_items: opts.max_items,
        }
    }
}

impl Op for PriceMc<'_> {
    type Output = Vec<Result<PriceResult>>;

    fn run(self, cuda: &CudaBackend) -> Result<Self::Output> {
        let PriceMc {
            specs,
            mc,
            streams,
            max_items,
        } = self;
        streams.check(specs.len(), "price_mc_gpu")?;
        if let Rng::Sobol { .. } = mc.rng {
            return price_qmc(cuda, specs, mc, max_items, streams);
        }
        let totals = mc_totals(cuda, specs, mc, max_items, streams, None)?;
        Ok(specs
            .iter()
            .zip(totals)
            .map(|(spec, t)| t.and_then(|t| finish(spec, mc, &[t])))
            .collect())
    }
}

/// Every canonical block's sums of one option (stream index `option`), in block order: the
/// same values the CPU engine's `simulate_blocks(spec, mc, option, ..)` returns, for tests
/// and for callers that chain runs themselves. Philox runs launch as [`McBlockRangeSums`]
/// over every block; Sobol runs launch the style's QMC block kernel over every block (one
/// CTA of 256 threads a block, `launch_finance_qmc.rs`).
pub struct McBlockSums<'a> {
    /// The option.
    pub spec: &'a OptionSpec,
    /// The run.
    pub mc: &'a McParams,
    /// Its stream index.
    pub option: u32,
}

impl Op for McBlockSums<'_> {
    type Output = Vec<BlockSums>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<BlockSums>> {
        let McBlockSums { spec, mc, option } = self;
        if let Rng::Sobol { .. } = mc.rng {
            return qmc_block_sums(cuda, spec, mc);
        }
        let nb = mc.samples().div_ceil(BLOCK_SAMPLES);
        cuda.run(McBlockRangeSums {
            spec,
            mc,
            option,
            blocks: 0..nb,
        })
    }
}

/// The sums of the canonical blocks `blocks` of one option (stream index `option`), in
/// block order: bitwise the CPU engine's `simulate_blocks(spec, mc, option, blocks)`, so a
/// run split into block ranges across devices and finished over the concatenation gives the
/// bits of the whole run (kiln's executor does this). Philox runs only: a Sobol run's points
/// are scrambled per replicate over every block (an `Unsupported` error).
///
/// Launch (kernels/finance.cu): the style's block kernel once over one parameter row and
/// the range's blocks, one warp a block, 8 warps a 256-thread CTA, grid `min(ceil(blocks /
/// 8), 2^31 - 1)`; the sums are read back as they are (no combine).
pub struct McBlockRangeSums<'a> {
    /// The option.
    pub spec: &'a OptionSpec,
    /// The run (Philox).
    pub mc: &'a McParams,
    /// Its stream index.
    pub option: u32,
    /// The canonical blocks, inside the run's `ceil(samples / 1024)`.
    pub blocks: std::ops::Range<u64>,
}

impl Op for McBlockRangeSums<'_> {
    type Output = Vec<BlockSums>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<BlockSums>> {
        let McBlockRangeSums {
            spec,
            mc,
            option,
            blocks,
        } = self;
        if let Rng::Sobol { .. } = mc.rng {
            return Err(Error::Unsupported {
                op: "monte carlo block ranges of a sobol run".into(),
                backend: cuda.name(),
            });
        }
        mc.validate()?;
        let pp = PathParams::new(spec, mc)?;
        let nb = pp.samples.div_ceil(BLOCK_SAMPLES);
        if blocks.start > blocks.end || blocks.end > nb {
            return Err(Error::invalid(
                "mc_block_range_sums_gpu",
                format!("block range {blocks:?} is outside the run's {nb} blocks"),
            ));
        }
        let count = blocks.end - blocks.start;
        if count == 0 {
            return Ok(Vec::new());
        }
        let (u, d) = param_rows(spec, &pp, option);
        let du = cuda.upload_slice(&u)?;
        let dd = cuda.upload_slice(&d)?;
        let items = usize::try_from(count).map_err(|_| too_many(count))?;
        let mut out = cuda.alloc::<f64>(items * SUMS)?;
        let k = kernel_for(spec.style, mc.fast_math);
        launch_blocks_at(cuda, k, &du, &dd, 0, 1, blocks.start, count, mc, &mut out)?;
        let mut host = vec![0.0f64; items * SUMS];
        out.copy_to_host(&mut host, cuda.stream())?;
        Ok(host
            .chunks_exact(SUMS)
            .enumerate()
            .map(|(i, s)| {
                let b = blocks.start + i as u64;
                let n = (pp.samples - b * BLOCK_SAMPLES).min(BLOCK_SAMPLES);
                sums_from(n, s)
            })
            .collect())
    }
}

/// Runs the benchmark probe `probe` in place of the European kernel over the options
/// `specs` (European, one launch chain exactly as [`PriceMc`] runs them at stream indices
/// from 0 and the default chunking: parameter upload, block kernel, combine, totals
/// download) and returns each option's total of the probe's per-sample values (a checksum,
/// not a price). For timing the parts of a path-step; see `docs/performance.md`.
///
/// Launch (kernels/finance.cu): the probe's kernel ([`McProbe::kernel`]) in the European
/// kernel's shape (one warp per (option, block), 8 warps a 256-thread CTA), then
/// `mc_combine_f64`, as [`PriceMc`].
pub struct McProbeTotals<'a> {
    /// The options, all European.
    pub specs: &'a [OptionSpec],
    /// The run (Philox).
    pub mc: &'a McParams,
    /// The probe to run.
    pub probe: McProbe,
}

impl Op for McProbeTotals<'_> {
    type Output = Vec<f64>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<f64>> {
        let McProbeTotals { specs, mc, probe } = self;
        if mc.rng != Rng::Philox {
            return Err(Error::invalid(
                "mc_probe_gpu",
                "the probes time the Philox kernels",
            ));
        }
        if let Some(s) = specs.iter().find(|s| s.style != Style::European) {
            return Err(Error::invalid(
                "mc_probe_gpu",
                format!("the probes run the European launch; got a {:?} option", s.style),
            ));
        }
        let max_items = GpuMcOptions::default().max_items;
        mc_totals(cuda, specs, mc, max_items, McStreams::From(0), Some(probe))?
            .into_iter()
            .map(|t| t.map(|t| t.y))
            .collect()
    }
}

/// Per-option totals of every block (block order), or the option's validation error.
fn mc_totals(
    cuda: &CudaBackend,
    specs: &[OptionSpec],
    mc: &McParams,
    max_items: u64,
    streams: McStreams<'_>,
    probe: Option<McProbe>,
) -> Result<Vec<Result<BlockSums>>> {
    mc.validate()?;
    if max_items == 0 {
        return Err(Error::invalid("price_mc_gpu", "max_items = 0; it must be >= 1"));
    }
    let mut results: Vec<Option<Result<BlockSums>>> = (0..specs.len()).map(|_| None).collect();
    let mut groups: Vec<Group> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let option = stream_of(streams, i, "price_mc_gpu");
        let pp = option.and_then(|o| PathParams::new(spec, mc).map(|pp| (o, pp)));
        match pp {
            Err(e) => results[i] = Some(Err(e)),
            Ok((o, pp)) => {
                let (u, d) = param_rows(spec, &pp, o);
                let g = match groups.iter_mut().position(|g| g.style == spec.style) {
                    Some(p) => &mut groups[p],
                    None => {
                        groups.push(Group {
                            style: spec.style,
                            slots: Vec::new(),
                            u: Vec::new(),
                            d: Vec::new(),
                        });
                        groups
                            .last_mut()
                            .ok_or_else(|| Error::invalid("price_mc_gpu", "internal"))?
                    }
                };
                g.slots.push(i);
                g.u.extend_from_slice(&u);
                g.d.extend_from_slice(&d);
            }
        }
    }
    let nb = mc.samples().div_ceil(BLOCK_SAMPLES);
    for g in &groups {
        let k = probe.map_or_else(|| kernel_for(g.style, mc.fast_math), McProbe::kernel);
        let totals = group_totals(cuda, g, k, nb, mc, max_items)?;
        for (k, &slot) in g.slots.iter().enumerate() {
            results[slot] = Some(Ok(sums_from(mc.samples(), &totals[k * SUMS..(k + 1) * SUMS])));
        }
    }
    Ok(results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::invalid("price_mc_gpu", "option not priced"))))
        .collect())
}

/// Totals (7 per option, block order) of one style group, chunk by chunk.
fn group_totals(
    cuda: &CudaBackend,
    g: &Group,
    k: Kernel,
    nb: u64,
    mc: &McParams,
    max_items: u64,
) -> Result<Vec<f64>> {
    let du = cuda.upload_slice(&g.u)?;
    let dd = cuda.upload_slice(&g.d)?;
    let run = McRun {
        options: g.slots.len() as u64,
        replicates: 1,
        per: nb,
        max_items,
    };
    run.totals(cuda, |row0, rows, first, count, out| {
        launch_blocks_at(cuda, k, &du, &dd, row0, rows, first, count, mc, out)
    })
}

/// Launch the block kernel `k` (a style's, or a probe) on rows `row0 .. row0 + rows` of the
/// parameter arrays and blocks `first_block .. first_block + blocks`, into `out` (item
/// order).
#[allow(clippy::too_many_arguments)] // the kernel's arguments
fn launch_blocks_at(
    cuda: &CudaBackend,
    k: Kernel,
    du: &DeviceBuffer<u32>,
    dd: &DeviceBuffer<f64>,
    row0: u64,
    rows: u64,
    first_block: u64,
    blocks: u64,
    mc: &McParams,
    out: &mut DeviceBuffer<f64>,
) -> Result<()> {
    let op = k.symbol();
    let items = rows.checked_mul(blocks).ok_or_else(|| too_many(u64::MAX))?;
    if rows == 0 || blocks == 0 {
        return Ok(());
    }
    // Sizes: every pointer below is checked against its buffer.
    let rows_end = row0 + rows;
    if rows_end * OPT_U as u64 > du.len() as u64 || rows_end * OPT_D as u64 > dd.len() as u64 {
        return Err(Error::invalid(
            op,
            format!("rows {row0}..{rows_end} outside the parameter arrays"),
        ));
    }
    if items * SUMS as u64 > out.len() as u64 {
        return Err(Error::invalid(
            op,
            format!(
                "{items} items need {} f64, the output holds {}",
                items * SUMS as u64,
                out.len()
            ),
        ));
    }
    let n_opt = u32::try_from(rows).map_err(|_| too_many(rows))?;
    let samples = mc.samples();
    let keys = KeySchedule::of_seed(mc.seed);
    let anti = u32::from(mc.antithetic);
    // One warp per item; cap the grid (the kernel grid-strides) at 2^31 - 1 CTAs.
    let ctas = items.div_ceil(WARPS_PER_CTA).min(i32::MAX as u64) as u32;
    let cfg = LaunchConfig {
        grid_dim: (ctas, 1, 1),
        block_dim: ((WARPS_PER_CTA * 32) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // Sizes: the kernel reads rows row0 .. row0 + rows of the parameter arrays (8 u32 and
    // 10 f64 a row, checked above) and writes items * 7 f64 of `out` (checked above);
    // block indices stay below ceil(samples / 1024) because callers pass block ranges of
    // the run.
    let args = [
        Arg::buf_at(du, row0 * OPT_U as u64),
        Arg::buf_at(dd, row0 * OPT_D as u64),
        n_opt.into(),
        first_block.into(),
        blocks.into(),
        samples.into(),
        Arg::by_value(&keys),
        anti.into(),
        Arg::buf(out),
    ];
    cuda.launch(k, cfg, &args)
}

/// Runs the self-test kernel: for each word `w[i]` the portable f32 math (uniform, ln, sin,
/// cos, exp of `x[i]`, the first Box-Muller normal of `(w[i], w[i] + 1)`, and the fast_math
/// normal of the same words) as f32 bits, 7 per input, and the Philox words of counter
/// `[i, w[i], 7, 0]` under `key`. Output: `(math bits, Philox words)`.
///
/// Launch (kernels/finance.cu): `finance_selftest_f32`, one thread an input, 256-thread
/// CTAs, grid `ceil(n / 256)`.
pub struct FinanceSelftest<'a> {
    /// The Philox words, one an input.
    pub w: &'a [u32],
    /// The math inputs, as many as `w`.
    pub x: &'a [f32],
    /// The Philox key.
    pub key: [u32; 2],
}

impl Op for FinanceSelftest<'_> {
    type Output = (Vec<u32>, Vec<u32>);

    fn run(self, cuda: &CudaBackend) -> Result<(Vec<u32>, Vec<u32>)> {
        let FinanceSelftest { w, x, key } = self;
        kiln_core::backend::check_same_len("finance_selftest", w.len(), x.len())?;
        let n = u32::try_from(w.len()).map_err(|_| too_many(w.len() as u64))?;
        if n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let dw = cuda.upload_slice(w)?;
        let dx = cuda.upload_slice(x)?;
        let out = cuda.alloc::<u32>(w.len() * 7)?;
        let ph = cuda.alloc::<u32>(w.len() * 4)?;
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(256), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // Sizes: w and x hold n elements, out 7n and ph 4n (allocated just above); the
        // kernel guards i < n.
        let args = [
            Arg::buf(&dw),
            Arg::buf(&dx),
            n.into(),
            key[0].into(),
            key[1].into(),
            Arg::buf(&out),
            Arg::buf(&ph),
        ];
        cuda.launch(Kernel::FINANCE_SELFTEST_F32, cfg, &args)?;
        let mut ho = vec![0u32; w.len() * 7];
        let mut hp = vec![0u32; w.len() * 4];
        out.copy_to_host(&mut ho, cuda.stream())?;
        ph.copy_to_host(&mut hp, cuda.stream())?;
        // Keep the scratch buffers alive until the copies above are done.
        drop((out, ph));
        Ok((ho, hp))
    }
}

/// Compares the Box-Muller square root of the exact kernels (`kiln_sqrt_pos`: the fast path
/// of `__fsqrt_rn` without its range test) with `__fsqrt_rn` on the `count` floats whose
/// bits start at `first`. Output: how many differ and the bits of one that does (0 when
/// none).
///
/// Launch (kernels/finance.cu): `finance_sqrt_check_f32`, 1024 CTAs of 256 threads
/// grid-striding over the floats.
pub struct FinanceSqrtCheck {
    /// The bits of the first float.
    pub first: u32,
    /// How many floats (`first + count <= 2^32`).
    pub count: u32,
}

impl Op for FinanceSqrtCheck {
    type Output = (u32, u32);

    fn run(self, cuda: &CudaBackend) -> Result<(u32, u32)> {
        let FinanceSqrtCheck { first, count } = self;
        if first.checked_add(count).is_none() {
            return Err(Error::invalid("finance_sqrt_check", "first + count past 2^32"));
        }
        let bad = cuda.upload_slice(&[0u32, 0u32])?;
        let cfg = LaunchConfig {
            grid_dim: (1024, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // Sizes: the kernel reads no memory and writes bad[0..2], a 2-element pool buffer.
        let args = [first.into(), count.into(), Arg::buf(&bad)];
        cuda.launch(Kernel::FINANCE_SQRT_CHECK_F32, cfg, &args)?;
        let mut h = [0u32; 2];
        bad.copy_to_host(&mut h, cuda.stream())?;
        Ok((h[0], h[1]))
    }
}

pub(crate) fn sums_from(n: u64, s: &[f64]) -> BlockSums {
    BlockSums {
        n,
        y: s[0],
        yy: s[1],
        c: s[2],
        cc: s[3],
        yc: s[4],
        delta: s[5],
        vega: s[6],
    }
}

pub(crate) fn too_many(n: u64) -> Error {
    Error::invalid("price_mc_gpu", format!("{n} items do not fit this launch"))
}
