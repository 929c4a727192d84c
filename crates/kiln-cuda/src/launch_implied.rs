//! Implied volatility of a book on the GPU (`kernels/implied_vol.cu`): kiln-core's "Let's
//! Be Rational" solver (`kiln_core::finance::implied`), one thread per quote.
//!
//! The book goes to the device as structure of arrays ([`DeviceQuotes`]: six f64 columns and
//! a put flag), the kernel writes a volatility and a reason code per quote, and the host
//! rebuilds each `Result<f64, NoVolatility>` from the code with
//! [`NoVolatility::from_index`], whose fields it computes from the quote as the CPU does.
//! The kernel's f64 arithmetic is the CPU's operation for operation (no contraction); only
//! the GPU's `exp`, `log` and `pow` may differ from the host's libm by an ulp, so results
//! agree with [`implied_volatility_book`](kiln_core::finance::implied::implied_volatility_book)
//! to what an ulp of rounding in the inputs allows (bitwise where the kernel runs on the
//! host: tests/host_emulation.rs).
//!
//! Launch shape: 128 threads a block, `min(ceil(n / 128), 64 per SM)` blocks, grid-stride
//! over the quotes. Books larger than [`IV_CHUNK_QUOTES`] go through in chunks of it
//! (58 bytes of device memory a quote, so about 243 MB a chunk), each uploaded, solved and
//! downloaded before the next.

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
/// and outputs), about 243 MB.
pub const IV_CHUNK_QUOTES: usize = 1 << 22;

const THREADS: u32 = 128;
const BLOCKS_PER_SM: u64 = 64;

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
/// [`CudaBackend::synchronize`] waits).
///
/// Launch (kernels/implied_vol.cu): `implied_vol_f64`, one thread a quote, 128-thread
/// CTAs, grid `min(ceil(n / 128), 64 per SM)` striding over the quotes.
pub struct SolveImpliedVol<'a> {
    /// The book, inputs and outputs.
    pub book: &'a mut DeviceQuotes,
}

impl Op for SolveImpliedVol<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let SolveImpliedVol { book } = self;
        let n = book.len as u64;
        if n == 0 {
            return Ok(());
        }
        let sms = u64::from(cuda.info().desc.multiprocessors.max(1));
        let blocks = n
            .div_ceil(u64::from(THREADS))
            .min(sms * BLOCKS_PER_SM)
            .min(i32::MAX as u64) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
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
        cuda.launch(Kernel::IMPLIED_VOL_F64, cfg, &args)
    }
}

/// The implied volatility of every quote of a book on the GPU, in order: each `Ok(sigma)`
/// or its [`NoVolatility`] reason, as kiln-core's `implied_volatility_book` gives them (to
/// what an ulp of input rounding allows; module docs of `launch_implied.rs`). The outer
/// error is a device failure or `chunk = 0`.
///
/// Launch: chunk by chunk, [`DeviceQuotes::upload`], [`SolveImpliedVol`] and
/// [`DeviceQuotes::download`], each chunk waited for before the next.
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
        for part in quotes.chunks(chunk) {
            let mut book = DeviceQuotes::upload(cuda, part)?;
            cuda.run(SolveImpliedVol { book: &mut book })?;
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
