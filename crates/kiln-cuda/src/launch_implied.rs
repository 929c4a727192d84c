//! Implied volatility of a book on the GPU (`kernels/implied_vol.cuh` and `implied_vol.cu`):
//! kiln-core's "Let's Be Rational" solver (`kiln_core::finance::implied`).
//!
//! The book goes to the device as structure of arrays ([`DeviceQuotes`]: six f64 columns and
//! a put flag), the kernels write a volatility and a reason code per quote, and the host
//! rebuilds each `Result<f64, NoVolatility>` from the code with
//! [`NoVolatility::from_index`], whose fields it computes from the quote as the CPU does.
//! The kernels' f64 arithmetic is the CPU's operation for operation (no contraction); only
//! the GPU's `exp`, `log` and `pow` may differ from the host's libm by an ulp, so results
//! agree with [`implied_volatility_book`](kiln_core::finance::implied::implied_volatility_book)
//! to what an ulp of rounding in the inputs allows (bitwise where the kernels run on the
//! host: tests/host_emulation.rs).
//!
//! Two ways to run a book, with the same bits: [`SolveImpliedVol`] groups the quotes by the
//! solver's way through them (a classify kernel, a stable counting sort of the quote indices
//! by way, one solve kernel per way, each result written to its quote's slot), so a warp runs
//! one way's code and each kernel's code is short enough for the instruction cache;
//! [`SolveImpliedVolOnePass`] runs each quote start to finish in one kernel, whose warps take
//! every way at once.
//!
//! Books larger than [`IV_CHUNK_QUOTES`] go through [`ImpliedVolBook`] in chunks of it (58
//! bytes of device memory a quote, and 61 more of scratch while grouped: about 500 MB a
//! chunk), each uploaded, solved and downloaded before the next.

use cudarc::driver::LaunchConfig;
use kiln_core::finance::implied::{NoVolatility, Quote};
use kiln_core::finance::OptionType;
use kiln_core::{Error, Result};

use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;

/// Quotes per chunk of [`ImpliedVolBook::new`]: 2^22, 58 bytes each on the device (inputs
/// and outputs), about 243 MB, and 61 bytes each of scratch while [`SolveImpliedVol`] runs
/// (seven f64 of start state, a way byte, a list index), about 256 MB.
pub const IV_CHUNK_QUOTES: usize = 1 << 22;

const THREADS: u32 = 128;
const BLOCKS_PER_SM: u64 = 64;
/// Quotes a tile of the grouping sort (`IV_TILE` in implied_vol.cu).
const TILE: u64 = 128;
/// The solver's ways (`IV_WAYS`).
const WAYS: usize = 4;
/// Threads of `implied_vol_offsets`' one block (`IV_OFFSETS_THREADS`).
const OFFSETS_THREADS: u32 = 256;
/// The fields of a quote's start state (`IvStart`).
const START_FIELDS: usize = 7;

/// A book of quotes resident on the device, with room for the results: what
/// [`SolveImpliedVol`] reads and writes. Built by [`DeviceQuotes::upload`].
pub struct DeviceQuotes {
    price: DeviceBuffer<f64>,
    spot: DeviceBuffer<f64>,
    strike: DeviceBuffer<f64>,
    maturity: DeviceBuffer<f64>,
    rate: DeviceBuffer<f64>,
    dividend: DeviceBuffer<f64>,
    put: DeviceBuffer<u8>,
    vol: DeviceBuffer<f64>,
    reason: DeviceBuffer<u8>,
    len: usize,
}

impl DeviceQuotes {
    /// How many quotes it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl DeviceQuotes {
    /// Copies `quotes` to the device as columns and allocates the outputs (on `cuda`'s
    /// current stream).
    pub fn upload(cuda: &CudaBackend, quotes: &[Quote]) -> Result<DeviceQuotes> {
        let col = |f: fn(&Quote) -> f64| -> Result<DeviceBuffer<f64>> {
            let v: Vec<f64> = quotes.iter().map(f).collect();
            cuda.upload_slice(&v)
        };
        let put: Vec<u8> = quotes
            .iter()
            .map(|q| u8::from(q.kind == OptionType::Put))
            .collect();
        Ok(DeviceQuotes {
            price: col(|q| q.price)?,
            spot: col(|q| q.spot)?,
            strike: col(|q| q.strike)?,
            maturity: col(|q| q.maturity)?,
            rate: col(|q| q.rate)?,
            dividend: col(|q| q.dividend)?,
            put: cuda.upload_slice(&put)?,
            vol: cuda.alloc(quotes.len())?,
            reason: cuda.alloc(quotes.len())?,
            len: quotes.len(),
        })
    }

    /// Fills the outputs with NaN volatilities and reason code 255 (which no kernel writes),
    /// so a quote a solve leaves unwritten is caught.
    pub fn poison_outputs(&mut self, cuda: &CudaBackend) -> Result<()> {
        self.vol = cuda.upload_slice(&vec![f64::NAN; self.len])?;
        self.reason = cuda.upload_slice(&vec![u8::MAX; self.len])?;
        Ok(())
    }

    /// The raw outputs of the last solve ([`SolveImpliedVol`]): a volatility (NaN where
    /// none) and a reason code ([`NoVolatility::index`], 0 solved) per quote. Waits for
    /// `cuda`'s current stream.
    pub fn download(&self, cuda: &CudaBackend) -> Result<(Vec<f64>, Vec<u8>)> {
        let mut vol = vec![0.0f64; self.len];
        let mut reason = vec![0u8; self.len];
        if self.len > 0 {
            self.vol.copy_to_host(&mut vol, cuda.stream())?;
            self.reason.copy_to_host(&mut reason, cuda.stream())?;
        }
        Ok((vol, reason))
    }
}

/// Solves every quote of a resident book on the current stream, writing its volatilities
/// and reason codes; returns without waiting ([`DeviceQuotes::download`] or
/// [`CudaBackend::synchronize`] waits). Grouped by the solver's way; the results are
/// [`SolveImpliedVolOnePass`]'s bit for bit.
///
/// Launches (kernels/implied_vol.cu), all on the current stream, no host round trip:
/// `implied_vol_classify_f64` (grid-stride), `implied_vol_tile_count` and
/// `implied_vol_scatter` (a 128-thread CTA per 128-quote tile), `implied_vol_offsets` (one
/// CTA), then `implied_vol_solve_{lower,low_mid,high_mid,upper}_f64` (grid-stride over their
/// way's list, each sized for the whole window, as the host does not know the lists'
/// lengths), window by window of [`IV_CHUNK_QUOTES`] quotes. Scratch from the pool: 61
/// bytes a quote of a window (about 256 MB for a full one) and 32 bytes a 128-quote tile.
pub struct SolveImpliedVol<'a> {
    /// The book, inputs and outputs.
    pub book: &'a mut DeviceQuotes,
}

/// Solves every quote of a resident book in one kernel, `implied_vol_f64`: one thread a
/// quote, start to finish, 128-thread CTAs, grid `min(ceil(n / 128), 64 per SM)` striding
/// over the quotes. [`SolveImpliedVol`]'s reference; returns without waiting.
pub struct SolveImpliedVolOnePass<'a> {
    /// The book, inputs and outputs.
    pub book: &'a mut DeviceQuotes,
}

/// A grid-stride launch over `n` items: 128-thread CTAs, `min(ceil(n / 128), 64 per SM)`.
fn stride_cfg(cuda: &CudaBackend, n: u64) -> LaunchConfig {
    let sms = u64::from(cuda.info().desc.multiprocessors.max(1));
    let blocks = n
        .div_ceil(u64::from(THREADS))
        .min(sms * BLOCKS_PER_SM)
        .min(i32::MAX as u64) as u32;
    LaunchConfig {
        grid_dim: (blocks.max(1), 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl Op for SolveImpliedVolOnePass<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let SolveImpliedVolOnePass { book } = self;
        let n = book.len as u64;
        if n == 0 {
            return Ok(());
        }
        // Sizes: every column and output holds exactly `len` elements (`upload` made them
        // together), and the kernel touches indices below n = len only.
        let args = [
            Arg::buf(&book.price),
            Arg::buf(&book.spot),
            Arg::buf(&book.strike),
            Arg::buf(&book.maturity),
            Arg::buf(&book.rate),
            Arg::buf(&book.dividend),
            Arg::buf(&book.put),
            n.into(),
            Arg::buf(&book.vol),
            Arg::buf(&book.reason),
        ];
        cuda.launch(Kernel::IMPLIED_VOL_F64, stride_cfg(cuda, n), &args)
    }
}

impl Op for SolveImpliedVol<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let SolveImpliedVol { book } = self;
        if book.len == 0 {
            return Ok(());
        }
        let window = book.len.min(IV_CHUNK_QUOTES);
        let tiles = window.div_ceil(TILE as usize);
        let scratch = Scratch {
            start: cuda.alloc(START_FIELDS * window)?,
            way: cuda.alloc(window)?,
            counts: cuda.alloc(tiles * WAYS)?,
            offsets: cuda.alloc(tiles * WAYS)?,
            starts: cuda.alloc(WAYS + 1)?,
            order: cuda.alloc(window)?,
        };
        for lo in (0..book.len).step_by(window) {
            solve_window(cuda, book, &scratch, lo, window.min(book.len - lo))?;
        }
        Ok(())
    }
}

/// The grouped solve's scratch for a window of up to `IV_CHUNK_QUOTES` quotes.
struct Scratch {
    start: DeviceBuffer<f64>,
    way: DeviceBuffer<u8>,
    counts: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u32>,
    starts: DeviceBuffer<u32>,
    order: DeviceBuffer<u32>,
}

/// The grouped launches on quotes `lo .. lo + len` of `book` (`len` at most the window
/// `scratch` was sized for; the kernels index the window from 0).
fn solve_window(
    cuda: &CudaBackend,
    book: &DeviceQuotes,
    scratch: &Scratch,
    lo: usize,
    len: usize,
) -> Result<()> {
    let Scratch {
        start,
        way,
        counts,
        offsets,
        starts,
        order,
    } = scratch;
    let n = len as u64;
    let tiles = n.div_ceil(TILE);
    let at = lo as u64;
    // Sizes: the book's columns and outputs hold book.len >= lo + len elements, read from
    // element lo on; `start` holds 7 windows, `way` and `order` one, `counts` and `offsets` 4
    // per tile of the window, `starts` 5. Every kernel touches window indices below those
    // (the tile kernels mask the last tile's lanes past n, the solve kernels read their
    // ranges from `starts`, which `implied_vol_offsets` writes, and `order`'s entries are
    // window indices below n).
    let classify = [
        Arg::buf_at(&book.price, at),
        Arg::buf_at(&book.spot, at),
        Arg::buf_at(&book.strike, at),
        Arg::buf_at(&book.maturity, at),
        Arg::buf_at(&book.rate, at),
        Arg::buf_at(&book.dividend, at),
        Arg::buf_at(&book.put, at),
        n.into(),
        Arg::buf(start),
        Arg::buf(way),
        Arg::buf_at(&book.vol, at),
        Arg::buf_at(&book.reason, at),
    ];
    cuda.launch(Kernel::IMPLIED_VOL_CLASSIFY_F64, stride_cfg(cuda, n), &classify)?;
    let per_tile = LaunchConfig {
        grid_dim: (tiles as u32, 1, 1),
        block_dim: (TILE as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let count = [Arg::buf(way), n.into(), Arg::buf(counts)];
    cuda.launch(Kernel::IMPLIED_VOL_TILE_COUNT, per_tile, &count)?;
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (OFFSETS_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let scan = [
        Arg::buf(counts),
        (tiles as u32).into(),
        Arg::buf(offsets),
        Arg::buf(starts),
    ];
    cuda.launch(Kernel::IMPLIED_VOL_OFFSETS, one, &scan)?;
    let scatter = [Arg::buf(way), n.into(), Arg::buf(offsets), Arg::buf(order)];
    cuda.launch(Kernel::IMPLIED_VOL_SCATTER, per_tile, &scatter)?;
    for k in [
        Kernel::IMPLIED_VOL_SOLVE_LOWER_F64,
        Kernel::IMPLIED_VOL_SOLVE_LOW_MID_F64,
        Kernel::IMPLIED_VOL_SOLVE_HIGH_MID_F64,
        Kernel::IMPLIED_VOL_SOLVE_UPPER_F64,
    ] {
        let solve = [
            Arg::buf(start),
            n.into(),
            Arg::buf_at(&book.maturity, at),
            Arg::buf(order),
            Arg::buf(starts),
            Arg::buf_at(&book.vol, at),
            Arg::buf_at(&book.reason, at),
        ];
        cuda.launch(k, stride_cfg(cuda, n), &solve)?;
    }
    Ok(())
}

/// The implied volatility of every quote of a book on the GPU, in order: each `Ok(sigma)`
/// or its [`NoVolatility`] reason, as kiln-core's `implied_volatility_book` gives them (to
/// what an ulp of input rounding allows; module docs of `launch_implied.rs`). The outer
/// error is a device failure or `chunk = 0`.
///
/// Launch: chunk by chunk, [`DeviceQuotes::upload`], [`SolveImpliedVol`] (under
/// `KILN_GPU_PREVIEW=1`, [`crate::preview`]; else [`SolveImpliedVolOnePass`], the same bits)
/// and [`DeviceQuotes::download`], each chunk waited for before the next.
pub struct ImpliedVolBook<'a> {
    /// The quotes.
    pub quotes: &'a [Quote],
    /// At most this many quotes a chunk (`>= 1`; the results do not depend on it):
    /// [`IV_CHUNK_QUOTES`] by default.
    pub chunk: usize,
}

impl<'a> ImpliedVolBook<'a> {
    /// The book in chunks of [`IV_CHUNK_QUOTES`].
    pub fn new(quotes: &'a [Quote]) -> Self {
        ImpliedVolBook {
            quotes,
            chunk: IV_CHUNK_QUOTES,
        }
    }
}

impl Op for ImpliedVolBook<'_> {
    type Output = Vec<std::result::Result<f64, NoVolatility>>;

    fn run(self, cuda: &CudaBackend) -> Result<Self::Output> {
        let ImpliedVolBook { quotes, chunk } = self;
        if chunk == 0 {
            return Err(Error::invalid(
                "implied_volatility_book_gpu",
                "chunk = 0; it must be >= 1",
            ));
        }
        let mut out = Vec::with_capacity(quotes.len());
        let grouped = crate::preview::preview();
        for part in quotes.chunks(chunk) {
            let mut book = DeviceQuotes::upload(cuda, part)?;
            if grouped {
                cuda.run(SolveImpliedVol { book: &mut book })?;
            } else {
                cuda.run(SolveImpliedVolOnePass { book: &mut book })?;
            }
            let (vol, reason) = book.download(cuda)?;
            out.extend(results(part, &vol, &reason));
        }
        Ok(out)
    }
}

/// Each quote's result from the kernel's outputs: `Ok(vol)` for code 0, else the reason
/// rebuilt from the quote (an unknown code, which the kernel never writes, reads as the
/// price at its upper bound rather than a panic).
pub(crate) fn results<'a>(
    quotes: &'a [Quote],
    vol: &'a [f64],
    reason: &'a [u8],
) -> impl Iterator<Item = std::result::Result<f64, NoVolatility>> + 'a {
    quotes.iter().zip(vol).zip(reason).map(|((q, &v), &code)| {
        if code == 0 {
            Ok(v)
        } else {
            Err(
                NoVolatility::from_index(code, q).unwrap_or(NoVolatility::AboveUpperBound {
                    price: q.price,
                    bound: f64::NAN,
                    bound_name: "unknown reason code",
                }),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::finance::implied::{implied_volatility_book, sample};

    #[test]
    fn results_rebuild_the_cpu_reasons_from_codes() {
        let quotes = sample::edge_quotes();
        let want = implied_volatility_book(&quotes);
        let vol: Vec<f64> = want.iter().map(|r| *r.as_ref().unwrap_or(&f64::NAN)).collect();
        let codes: Vec<u8> = want
            .iter()
            .map(|r| r.as_ref().map_or_else(NoVolatility::index, |_| 0))
            .collect();
        let got: Vec<_> = results(&quotes, &vol, &codes).collect();
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        let odd: Vec<_> = results(&quotes[..1], &[f64::NAN], &[9]).collect();
        assert!(matches!(odd[0], Err(NoVolatility::AboveUpperBound { .. })));
    }
}
