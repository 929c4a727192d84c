//! A Monte Carlo path loop (`kernels/mc_gbm.cu`): a European call under geometric Brownian
//! motion with a counter-based generator (Philox4x32-10) written in the kernel, per-block
//! partial sums reduced in shared memory, and the host finishing the mean and its standard
//! error from the blocks' sums.

use kiln::{Arg, Result, Runtime};

/// The kernel's source.
pub const SOURCE: &str = include_str!("../kernels/mc_gbm.cu");

/// The kernel's block size (its `THREADS`, which sizes its shared arrays).
const THREADS: u32 = 256;
/// At most this many blocks; each thread loops over more paths beyond that (a few
/// thousand blocks fill any current GPU).
const MAX_BLOCKS: u64 = 4096;

/// A European call on one underlying under Black-Scholes dynamics.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    /// Price of the underlying now.
    pub spot: f64,
    /// Strike.
    pub strike: f64,
    /// Risk-free rate, continuously compounded per year.
    pub rate: f64,
    /// Dividend yield, continuously compounded per year.
    pub dividend: f64,
    /// Volatility per sqrt(year).
    pub volatility: f64,
    /// Time to maturity in years.
    pub maturity: f64,
}

/// A Monte Carlo price and its standard error.
#[derive(Clone, Copy, Debug)]
pub struct McPrice {
    /// The discounted mean payoff.
    pub price: f64,
    /// The standard error of `price`.
    pub std_error: f64,
}

/// Prices `call` with `paths` paths of `steps` time steps each on `rt`'s GPU, the random
/// numbers drawn from `seed`; the same arguments give the same bits.
pub fn price_call(rt: &Runtime, call: &Call, paths: u64, steps: u32, seed: u64) -> Result<McPrice> {
    if paths < 2 || steps == 0 {
        return Err(kiln::Error::invalid(
            "mc_gbm",
            format!("need at least 2 paths and 1 step, got {paths} paths and {steps} steps"),
        ));
    }
    let kernel = rt.raw_kernel(SOURCE, "mc_gbm_call", &[])?;
    let blocks = paths.div_ceil(u64::from(THREADS)).min(MAX_BLOCKS) as usize;
    // the blocks' payoff sums, then their sums of squares; poisoned
    let partial = rt.tensor(&vec![f64::NAN; 2 * blocks], &[2 * blocks])?;
    let bad = |what: &str| kiln::Error::invalid("mc_gbm", format!("{what} out of range"));
    kernel.launch(
        (blocks as u32, 1, 1),
        (THREADS, 1, 1),
        0,
        &[
            Arg::from(&partial),
            (call.spot as f32).into(),
            (call.strike as f32).into(),
            (call.rate as f32).into(),
            (call.dividend as f32).into(),
            (call.volatility as f32).into(),
            (call.maturity as f32).into(),
            i32::try_from(steps).map_err(|_| bad("steps"))?.into(),
            i64::try_from(paths).map_err(|_| bad("paths"))?.into(),
            seed.into(),
        ],
    )?;
    let sums = partial.to_vec::<f64>()?;
    let (sum, sum_sq) = sums.split_at(blocks);
    let (s, s2) = (sum.iter().sum::<f64>(), sum_sq.iter().sum::<f64>());
    let n = paths as f64;
    let mean = s / n;
    // the sample variance of the payoffs, never negative through rounding
    let var = ((s2 - s * mean) / (n - 1.0)).max(0.0);
    let discount = (-call.rate * call.maturity).exp();
    Ok(McPrice {
        price: discount * mean,
        std_error: discount * (var / n).sqrt(),
    })
}
