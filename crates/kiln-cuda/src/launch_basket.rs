//! Basket options by Monte Carlo on the GPU (`kernels/basket.cu`), bitwise equal to the CPU
//! engine (kiln-cpu's `finance::basket`).
//!
//! How the bits match (as in `launch_finance.rs` and `launch_heston.rs`): the kernel mirrors
//! kiln-core's `basket_sample` operation by operation (the same Philox words, the portable
//! f32 `exp`, round-to-nearest intrinsics, no contraction, the correlation products summed
//! in the same order), with the per-option constants computed once on the host by
//! kiln-core's [`BasketPathParams`] (the f64 Cholesky factor rounded to f32 there) and
//! passed as they are; each canonical block of 1024 samples is summed in sample order;
//! finance.cu's `mc_combine_f64` adds each option's blocks in block order onto running
//! totals (from zero, chunk after chunk); the host passes the one total to kiln-core's
//! [`finish_basket`], as the CPU does with its blocks.
//!
//! Parameters: one u32 row per option (put, arithmetic, assets, stream id, and the offsets
//! of its f32 and f64 data) and two flat arrays holding every option's data (layout in
//! basket.cu's header). One launch for all options, one warp per (option, block); launches
//! are cut into chunks of at most [`GpuMcOptions::max_items`] items, which changes no bit.

use cudarc::driver::LaunchConfig;
use kiln_core::finance::basket::{finish_basket, BasketPathParams, BasketSpec};
use kiln_core::finance::{BlockSums, McParams, OptionType, PriceResult, BLOCK_SAMPLES};
use kiln_core::storage::McStreams;
use kiln_core::{Error, Result};

use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::launch_finance::{stream_of, sums_from, too_many, GpuMcOptions, KeySchedule};
use crate::mc_driver::McRun;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;

/// u32 words per option (`BASKET_OPT_U` in basket.cu).
const OPT_U: usize = 6;
/// f64 sums per (option, block): y, yy, c, cc, yc, delta, vega.
const SUMS: usize = 7;
const WARPS_PER_CTA: u64 = 8;

/// Every option's parameters in basket.cu's layout.
#[derive(Default)]
struct Params {
    u: Vec<u32>,
    f: Vec<f32>,
    d: Vec<f64>,
}

impl Params {
    /// Appends one option (stream index `option`); errors if the offsets pass u32.
    fn push(&mut self, pp: &BasketPathParams, option: u32) -> Result<()> {
        let off = |n: usize| {
            u32::try_from(n).map_err(|_| {
                Error::invalid(
                    "price_basket_gpu",
                    "the options' parameters pass 2^32 words; price fewer at a time",
                )
            })
        };
        let (fo, dof) = (off(self.f.len())?, off(self.d.len())?);
        self.u.extend_from_slice(&[
            u32::from(pp.kind == OptionType::Put),
            u32::from(pp.arithmetic),
            pp.n as u32,
            option,
            fo,
            dof,
        ]);
        self.f.extend_from_slice(&pp.drift);
        self.f.extend_from_slice(&pp.vol);
        self.f.extend_from_slice(&pp.geo_weight);
        self.f.extend_from_slice(&pp.chol);
        self.d
            .extend_from_slice(&[pp.strike, pp.discount, pp.geo_spot, pp.control_mean]);
        self.d.extend_from_slice(&pp.spot_weight);
        Ok(())
    }

    fn rows(&self) -> usize {
        self.u.len() / OPT_U
    }
}

/// The parameter arrays basket.cu reads (u32 rows, f32 data, f64 data) for `options`, each
/// with its stream index: what a launch uploads. For the host emulation test
/// (tests/host_emulation.rs), which runs basket.cu through a C++ compiler on these arrays.
#[doc(hidden)]
pub fn basket_param_arrays(options: &[(BasketPathParams, u32)]) -> Result<(Vec<u32>, Vec<f32>, Vec<f64>)> {
    let mut p = Params::default();
    for (pp, option) in options {
        p.push(pp, *option)?;
    }
    Ok((p.u, p.f, p.d))
}

/// The parameters on the device.
struct DeviceParams {
    u: DeviceBuffer<u32>,
    f: DeviceBuffer<f32>,
    d: DeviceBuffer<f64>,
}

/// The path constants of a basket the kernel can run: arithmetic or geometric with every
/// weight `> 0` (the kernel's control is the geometric basket); spreads and rainbows are an
/// error naming the field ([`BasketSpec::gpu_refusal`]), and the facade sends them to the
/// CPU engine.
fn gpu_path_params(spec: &BasketSpec, mc: &McParams) -> Result<BasketPathParams> {
    let pp = BasketPathParams::new(spec, mc)?;
    match spec.gpu_refusal() {
        Some(why) => Err(Error::invalid("price_basket_gpu", why)),
        None => Ok(pp),
    }
}

/// The kernel draws Philox normals; Sobol baskets (kiln-core's `basket::mc`) run on the CPU
/// engine, and the facade sends them there.
fn philox_only(mc: &McParams) -> Result<()> {
    match mc.rng {
        kiln_core::finance::Rng::Philox => Ok(()),
        r => Err(Error::invalid(
            "price_basket_gpu",
            format!(
                "rng = {}: the CUDA basket kernel takes philox; sobol baskets price on the CPU",
                r.name()
            ),
        )),
    }
}

/// Prices basket options by Monte Carlo on the GPU: option `i` draws the stream
/// `streams`' index `i` gives (as the CPU engine's `price_basket_mc(spec, mc, stream)`).
/// One result per option (an invalid option, or one the kernel does not take, is an error
/// in its slot), bitwise equal to the CPU engine's; the outer error is an invalid or Sobol
/// `mc`, `streams` of another length than the options, or a device failure.
///
/// Launch (kernels/basket.cu): `basket_blocks_f64` for all options, one warp per (option,
/// block) item, 8 warps a 256-thread CTA, grid `min(ceil(items / 8), 2^31 - 1)`; chunks of
/// at most `max_items` items, each followed by finance.cu's `mc_combine_f64`.
pub struct PriceBasket<'a> {
    /// The options: arithmetic or geometric baskets of positive weights.
    pub specs: &'a [BasketSpec],
    /// The run (Philox).
    pub mc: &'a McParams,
    /// Which Philox stream each option draws.
    pub streams: McStreams<'a>,
    /// At most this many (option, block) items a launch, `>= 1`; no bit depends on it.
    pub max_items: u64,
}

impl<'a> PriceBasket<'a> {
    /// Option `i` uses stream index `i`, in launches of the default size: bitwise the CPU
    /// engine's `price_basket(specs, mc)`.
    pub fn new(specs: &'a [BasketSpec], mc: &'a McParams) -> Self {
        Self::with(specs, mc, &GpuMcOptions::default())
    }

    /// Explicit chunking and stream offset: option `i` uses stream index
    /// `opts.first_option + i`.
    pub fn with(specs: &'a [BasketSpec], mc: &'a McParams, opts: &GpuMcOptions) -> Self {
        PriceBasket {
            specs,
            mc,
            streams: McStreams::From(opts.first_option),
            max_items: opts.max_items,
        }
    }
}

impl Op for PriceBasket<'_> {
    type Output = Vec<Result<PriceResult>>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<Result<PriceResult>>> {
        let PriceBasket {
            specs,
            mc,
            streams,
            max_items,
        } = self;
        mc.validate()?;
        philox_only(mc)?;
        streams.check(specs.len(), "price_basket_gpu")?;
        if max_items == 0 {
            return Err(Error::invalid(
                "price_basket_gpu",
                "max_items = 0; it must be >= 1",
            ));
        }
        let mut results: Vec<Option<Result<PriceResult>>> = (0..specs.len()).map(|_| None).collect();
        let mut slots = Vec::new();
        let mut params = Params::default();
        for (i, spec) in specs.iter().enumerate() {
            let option = stream_of(streams, i, "price_basket_gpu");
            let row = option.and_then(|o| {
                let pp = gpu_path_params(spec, mc)?;
                params.push(&pp, o)
            });
            match row {
                Err(e) => results[i] = Some(Err(e)),
                Ok(()) => slots.push(i),
            }
        }
        if !slots.is_empty() {
            let totals = basket_totals(cuda, &params, mc, max_items)?;
            for (k, &slot) in slots.iter().enumerate() {
                let t = sums_from(mc.samples(), &totals[k * SUMS..(k + 1) * SUMS]);
                results[slot] = Some(finish_basket(&specs[slot], mc, &[t]));
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::invalid("price_basket_gpu", "option not priced"))))
            .collect())
    }
}

/// Every canonical block's sums of one basket option (stream index `option`), in block
/// order: the values of the CPU engine's `simulate_basket_blocks(spec, mc, option, ..)`.
///
/// Launch (kernels/basket.cu): `basket_blocks_f64` once over one option and every block,
/// one warp a block, 8 warps a 256-thread CTA; the sums are read back as they are.
pub struct BasketBlockSums<'a> {
    /// The option.
    pub spec: &'a BasketSpec,
    /// The run (Philox).
    pub mc: &'a McParams,
    /// Its stream index.
    pub option: u32,
}

impl Op for BasketBlockSums<'_> {
    type Output = Vec<BlockSums>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<BlockSums>> {
        let BasketBlockSums { spec, mc, option } = self;
        philox_only(mc)?;
        let pp = gpu_path_params(spec, mc)?;
        let nb = pp.samples.div_ceil(BLOCK_SAMPLES);
        let mut params = Params::default();
        params.push(&pp, option)?;
        let dev = DeviceParams::upload(cuda, &params)?;
        let items = usize::try_from(nb).map_err(|_| too_many(nb))?;
        let mut out = cuda.alloc::<f64>(items * SUMS)?;
        launch_basket_blocks(cuda, &dev, 0, 1, 0, nb, mc, &mut out)?;
        let mut host = vec![0.0f64; items * SUMS];
        out.copy_to_host(&mut host, cuda.stream())?;
        Ok(host
            .chunks_exact(SUMS)
            .enumerate()
            .map(|(b, s)| sums_from((pp.samples - b as u64 * BLOCK_SAMPLES).min(BLOCK_SAMPLES), s))
            .collect())
    }
}

/// Samples `first_sample .. first_sample + count` of one basket option (stream index
/// `option`) on the GPU (the self-test kernel). Output: `(y, c)` per sample, for a
/// sample-by-sample comparison with kiln-core's `basket_sample`.
///
/// Launch (kernels/basket.cu): `basket_samples_f64`, one thread a sample, 256-thread CTAs,
/// grid `ceil(count / 256)`.
pub struct BasketSamples<'a> {
    /// The option.
    pub spec: &'a BasketSpec,
    /// The run (Philox).
    pub mc: &'a McParams,
    /// Its stream index.
    pub option: u32,
    /// The first sample.
    pub first_sample: u32,
    /// How many samples (`first_sample + count <= 2^32`).
    pub count: u32,
}

impl Op for BasketSamples<'_> {
    type Output = Vec<(f64, f64)>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<(f64, f64)>> {
        let BasketSamples {
            spec,
            mc,
            option,
            first_sample,
            count,
        } = self;
        const OP: &str = "basket_samples_f64";
        philox_only(mc)?;
        let pp = gpu_path_params(spec, mc)?;
        if count == 0 {
            return Ok(Vec::new());
        }
        if u64::from(first_sample) + u64::from(count) > 1 << 32 {
            return Err(Error::invalid(
                OP,
                format!("samples {first_sample} + {count} pass 2^32"),
            ));
        }
        let mut params = Params::default();
        params.push(&pp, option)?;
        let dev = DeviceParams::upload(cuda, &params)?;
        let n = count as usize;
        let out = cuda.alloc::<f64>(2 * n)?;
        let cfg = LaunchConfig {
            grid_dim: (count.div_ceil(256), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let ks = KeySchedule::of_seed(mc.seed);
        let anti = u32::from(mc.antithetic);
        // Sizes: `dev` holds one option's row and data (uploaded just above, the offsets
        // inside it by construction), `out` holds 2 * count f64; the kernel guards
        // i < count.
        let args = [
            Arg::buf(&dev.u),
            Arg::buf(&dev.f),
            Arg::buf(&dev.d),
            first_sample.into(),
            count.into(),
            anti.into(),
            Arg::by_value(&ks),
            Arg::buf(&out),
        ];
        cuda.launch(Kernel::BASKET_SAMPLES_F64, cfg, &args)?;
        let mut h = vec![0.0f64; 2 * n];
        out.copy_to_host(&mut h, cuda.stream())?;
        drop(dev);
        Ok(h.chunks_exact(2).map(|p| (p[0], p[1])).collect())
    }
}

impl DeviceParams {
    /// Uploads `p` on `cuda`'s current stream.
    fn upload(cuda: &CudaBackend, p: &Params) -> Result<DeviceParams> {
        Ok(DeviceParams {
            u: cuda.upload_slice(&p.u)?,
            f: cuda.upload_slice(&p.f)?,
            d: cuda.upload_slice(&p.d)?,
        })
    }
}

/// Totals (7 per option, block order) of every option of `params`, chunk by chunk
/// (`mc_driver`).
fn basket_totals(cuda: &CudaBackend, params: &Params, mc: &McParams, max_items: u64) -> Result<Vec<f64>> {
    let dev = DeviceParams::upload(cuda, params)?;
    let run = McRun {
        options: params.rows() as u64,
        replicates: 1,
        per: mc.samples().div_ceil(BLOCK_SAMPLES),
        max_items,
    };
    run.totals(cuda, |row0, rows, first, count, out| {
        launch_basket_blocks(cuda, &dev, row0, rows, first, count, mc, out)
    })
}

/// Launches `basket_blocks_f64` on option rows `row0 .. row0 + n_rows` and blocks
/// `first_block .. first_block + n_blocks`, into `out` (item order).
#[allow(clippy::too_many_arguments)] // the kernel's arguments
fn launch_basket_blocks(
    cuda: &CudaBackend,
    dev: &DeviceParams,
    row0: u64,
    n_rows: u64,
    first_block: u64,
    n_blocks: u64,
    mc: &McParams,
    out: &mut DeviceBuffer<f64>,
) -> Result<()> {
    const OP: &str = "basket_blocks_f64";
    let items = n_rows.checked_mul(n_blocks).ok_or_else(|| too_many(u64::MAX))?;
    if items == 0 {
        return Ok(());
    }
    let rows_end = row0 + n_rows;
    if rows_end * OPT_U as u64 > dev.u.len() as u64 {
        return Err(Error::invalid(
            OP,
            format!("rows {row0}..{rows_end} outside the parameter rows"),
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
    let anti = u32::from(mc.antithetic);
    let ks = KeySchedule::of_seed(mc.seed);
    let ctas = items.div_ceil(WARPS_PER_CTA).min(i32::MAX as u64) as u32;
    let cfg = LaunchConfig {
        grid_dim: (ctas, 1, 1),
        block_dim: ((WARPS_PER_CTA * 32) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // Sizes: the kernel reads option rows row0 .. row0 + n_rows (6 u32 a row, checked
    // above) and, through their offsets, each option's f32 and f64 data, which
    // `Params::push` laid out inside `dev.f` and `dev.d`; it writes items * 7 f64 of
    // `out` (checked above); block indices stay below ceil(samples / 1024) because
    // callers pass block ranges of the run.
    let args = [
        Arg::buf_at(&dev.u, row0 * OPT_U as u64),
        Arg::buf(&dev.f),
        Arg::buf(&dev.d),
        n_opt.into(),
        first_block.into(),
        n_blocks.into(),
        samples.into(),
        anti.into(),
        Arg::by_value(&ks),
        Arg::buf(out),
    ];
    cuda.launch(Kernel::BASKET_BLOCKS_F64, cfg, &args)
}
