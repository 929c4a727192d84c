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
use crate::mc_driver::McRun;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::finance::{
    control_mean, finish, BlockSums, McParams, OptionSpec, PathParams, PriceResult, Rng, Style, BLOCK_SAMPLES,
};
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

/// Which Philox stream each option of a run draws: the stream index is a word of the
/// option's parameter row (every Philox kernel reads its counter's option word from there,
/// never from the option's place in the launch), so any assignment costs nothing on the
/// device. Consecutive indices from a first one serve a book priced in pieces; an explicit
/// index per option serves callers that price one option many times in one run (shocked
/// copies under risk scenarios keep the stream of the option they copy).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Streams<'a> {
    /// Option `i` uses `first + i` (an error in its slot past 2^32).
    From(u32),
    /// Option `i` uses `streams[i]`; as many as the options.
    Each(&'a [u32]),
}

impl Streams<'_> {
    /// An error unless the streams cover `n` options.
    pub(crate) fn check(&self, n: usize, op: &str) -> Result<()> {
        match self {
            Streams::Each(s) if s.len() != n => Err(Error::invalid(
                op,
                format!("{} stream indices for {n} options; give one an option", s.len()),
            )),
            _ => Ok(()),
        }
    }

    /// Option `i`'s stream index.
    pub(crate) fn of(&self, i: usize, op: &str) -> Result<u32> {
        match *self {
            Streams::From(first) => u32::try_from(i as u64 + u64::from(first)).map_err(|_| {
                Error::invalid(
                    op,
                    format!("option {i}: stream index past 2^32 (first_option {first})"),
                )
            }),
            Streams::Each(s) => s
                .get(i)
                .copied()
                .ok_or_else(|| Error::invalid(op, format!("option {i} has no stream index"))),
        }
    }
}

/// Benchmark probes: the European kernel's launch, loop and block sums with the path loop
/// cut down, so a benchmark can time what each part of a path-step costs
/// ([`CudaBackend::mc_probe_gpu`]). Their sums are not prices.
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

impl CudaBackend {
    /// Prices `specs` by Monte Carlo on this GPU with the run `mc`; option `i` uses Philox
    /// option word `i`. One result per option (an invalid option is an error in its slot),
    /// bitwise equal to the CPU engine's `price_portfolio(specs, mc)`. The outer error is
    /// an invalid `mc` or a device failure.
    pub fn price_mc_gpu(&self, specs: &[OptionSpec], mc: &McParams) -> Result<Vec<Result<PriceResult>>> {
        self.price_mc_gpu_with(specs, mc, &GpuMcOptions::default())
    }

    /// [`price_mc_gpu`](Self::price_mc_gpu) with explicit chunking and stream offset.
    pub fn price_mc_gpu_with(
        &self,
        specs: &[OptionSpec],
        mc: &McParams,
        opts: &GpuMcOptions,
    ) -> Result<Vec<Result<PriceResult>>> {
        self.price_mc_streams(specs, mc, opts.max_items, Streams::From(opts.first_option))
    }

    /// [`price_mc_gpu`](Self::price_mc_gpu) with an explicit stream index per option:
    /// option `i` uses Philox option word `streams[i]` (as the CPU engine's
    /// `price_mc(spec, mc, streams[i])`), so the same option priced twice in one run, or a
    /// shocked copy of it, draws the same numbers. Launches hold at most `max_items`
    /// (option, block) items. Neither the order of the options nor the chunking changes a
    /// bit. `streams` must hold one index an option (else the outer error).
    pub fn price_mc_gpu_streams(
        &self,
        specs: &[OptionSpec],
        mc: &McParams,
        streams: &[u32],
        max_items: u64,
    ) -> Result<Vec<Result<PriceResult>>> {
        self.price_mc_streams(specs, mc, max_items, Streams::Each(streams))
    }

    fn price_mc_streams(
        &self,
        specs: &[OptionSpec],
        mc: &McParams,
        max_items: u64,
        streams: Streams<'_>,
    ) -> Result<Vec<Result<PriceResult>>> {
        streams.check(specs.len(), "price_mc_gpu")?;
        if let Rng::Sobol { .. } = mc.rng {
            return self.price_qmc_gpu(specs, mc, max_items, streams);
        }
        let totals = self.mc_totals(specs, mc, max_items, streams, None)?;
        Ok(specs
            .iter()
            .zip(totals)
            .map(|(spec, t)| t.and_then(|t| finish(spec, mc, &[t])))
            .collect())
    }

    /// Every canonical block's sums of one option (stream index `option`), in block order:
    /// the same values the CPU engine's `simulate_blocks(spec, mc, option, ..)` returns,
    /// for tests and for callers that chain runs themselves.
    pub fn mc_block_sums_gpu(&self, spec: &OptionSpec, mc: &McParams, option: u32) -> Result<Vec<BlockSums>> {
        if let Rng::Sobol { .. } = mc.rng {
            return self.qmc_block_sums_gpu(spec, mc);
        }
        let nb = mc.samples().div_ceil(BLOCK_SAMPLES);
        self.mc_block_range_sums_gpu(spec, mc, option, 0..nb)
    }

    /// The sums of the canonical blocks `blocks` of one option (stream index `option`), in
    /// block order: bitwise the CPU engine's `simulate_blocks(spec, mc, option, blocks)`,
    /// so a run split into block ranges across devices and finished over the concatenation
    /// gives the bits of the whole run (kiln's executor does this). Philox runs only: a Sobol
    /// run's points are scrambled per replicate over every block (an `Unsupported` error).
    pub fn mc_block_range_sums_gpu(
        &self,
        spec: &OptionSpec,
        mc: &McParams,
        option: u32,
        blocks: std::ops::Range<u64>,
    ) -> Result<Vec<BlockSums>> {
        if let Rng::Sobol { .. } = mc.rng {
            return Err(Error::Unsupported {
                op: "monte carlo block ranges of a sobol run".into(),
                backend: self.name(),
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
        let du = self.upload_slice(&u)?;
        let dd = self.upload_slice(&d)?;
        let items = usize::try_from(count).map_err(|_| too_many(count))?;
        let mut out = self.alloc::<f64>(items * SUMS)?;
        let k = kernel_for(spec.style, mc.fast_math);
        self.launch_blocks_at(k, &du, &dd, 0, 1, blocks.start, count, mc, &mut out)?;
        let mut host = vec![0.0f64; items * SUMS];
        out.copy_to_host(&mut host, self.stream())?;
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

    /// Runs the benchmark probe `probe` in place of the European kernel over the options
    /// `specs` (European, one launch chain exactly as [`price_mc_gpu`](Self::price_mc_gpu)
    /// runs them: parameter upload, block kernel, combine, totals download) and returns each
    /// option's total of the probe's per-sample values (a checksum, not a price). For
    /// timing the parts of a path-step; see `docs/performance.md`.
    pub fn mc_probe_gpu(&self, specs: &[OptionSpec], mc: &McParams, probe: McProbe) -> Result<Vec<f64>> {
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
        self.mc_totals(specs, mc, max_items, Streams::From(0), Some(probe))?
            .into_iter()
            .map(|t| t.map(|t| t.y))
            .collect()
    }

    /// Per-option totals of every block (block order), or the option's validation error.
    fn mc_totals(
        &self,
        specs: &[OptionSpec],
        mc: &McParams,
        max_items: u64,
        streams: Streams<'_>,
        probe: Option<McProbe>,
    ) -> Result<Vec<Result<BlockSums>>> {
        mc.validate()?;
        if max_items == 0 {
            return Err(Error::invalid("price_mc_gpu", "max_items = 0; it must be >= 1"));
        }
        let mut results: Vec<Option<Result<BlockSums>>> = (0..specs.len()).map(|_| None).collect();
        let mut groups: Vec<Group> = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let option = streams.of(i, "price_mc_gpu");
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
            let totals = self.group_totals(g, k, nb, mc, max_items)?;
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
    fn group_totals(&self, g: &Group, k: Kernel, nb: u64, mc: &McParams, max_items: u64) -> Result<Vec<f64>> {
        let du = self.upload_slice(&g.u)?;
        let dd = self.upload_slice(&g.d)?;
        let run = McRun {
            options: g.slots.len() as u64,
            replicates: 1,
            per: nb,
            max_items,
        };
        run.totals(self, |row0, rows, first, count, out| {
            self.launch_blocks_at(k, &du, &dd, row0, rows, first, count, mc, out)
        })
    }

    /// Launch the block kernel `k` (a style's, or a probe) on rows `row0 .. row0 + rows` of
    /// the parameter arrays and blocks `first_block .. first_block + blocks`, into `out`
    /// (item order).
    #[allow(clippy::too_many_arguments)] // the kernel's arguments
    fn launch_blocks_at(
        &self,
        k: Kernel,
        du: &crate::pool::DeviceBuffer<u32>,
        dd: &crate::pool::DeviceBuffer<f64>,
        row0: u64,
        rows: u64,
        first_block: u64,
        blocks: u64,
        mc: &McParams,
        out: &mut crate::pool::DeviceBuffer<f64>,
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
        self.launch(k, cfg, &args)
    }

    /// Runs the self-test kernel: for each word `w[i]` the portable f32 math (uniform, ln,
    /// sin, cos, exp of `x[i]`, the first Box-Muller normal of `(w[i], w[i] + 1)`, and the
    /// fast_math normal of the same words) as f32 bits, 7 per input, and the Philox words of
    /// counter `[i, w[i], 7, 0]` under `key`.
    pub fn finance_selftest_gpu(&self, w: &[u32], x: &[f32], key: [u32; 2]) -> Result<(Vec<u32>, Vec<u32>)> {
        kiln_core::backend::check_same_len("finance_selftest", w.len(), x.len())?;
        let n = u32::try_from(w.len()).map_err(|_| too_many(w.len() as u64))?;
        if n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let dw = self.upload_slice(w)?;
        let dx = self.upload_slice(x)?;
        let out = self.alloc::<u32>(w.len() * 7)?;
        let ph = self.alloc::<u32>(w.len() * 4)?;
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
        self.launch(Kernel::FINANCE_SELFTEST_F32, cfg, &args)?;
        let mut ho = vec![0u32; w.len() * 7];
        let mut hp = vec![0u32; w.len() * 4];
        out.copy_to_host(&mut ho, self.stream())?;
        ph.copy_to_host(&mut hp, self.stream())?;
        // Keep the scratch buffers alive until the copies above are done.
        drop((out, ph));
        Ok((ho, hp))
    }

    /// Compares the Box-Muller square root of the exact kernels (`kiln_sqrt_pos`: the fast
    /// path of `__fsqrt_rn` without its range test) with `__fsqrt_rn` on the `count` floats
    /// whose bits start at `first`. Returns how many differ and the bits of one that does
    /// (0 when none).
    pub fn finance_sqrt_check_gpu(&self, first: u32, count: u32) -> Result<(u32, u32)> {
        if first.checked_add(count).is_none() {
            return Err(Error::invalid("finance_sqrt_check", "first + count past 2^32"));
        }
        let bad = self.upload_slice(&[0u32, 0u32])?;
        let cfg = LaunchConfig {
            grid_dim: (1024, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // Sizes: the kernel reads no memory and writes bad[0..2], a 2-element pool buffer.
        let args = [first.into(), count.into(), Arg::buf(&bad)];
        self.launch(Kernel::FINANCE_SQRT_CHECK_F32, cfg, &args)?;
        let mut h = [0u32; 2];
        bad.copy_to_host(&mut h, self.stream())?;
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
