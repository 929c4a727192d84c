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
use crate::pool::DeviceBuffer;
use crate::CudaBackend;

/// Quotes per chunk of [`CudaBackend::implied_volatility_book_gpu`]: 2^22, 58 bytes each on
/// the device (inputs and outputs), about 243 MB.
pub const IV_CHUNK_QUOTES: usize = 1 << 22;

const THREADS: u32 = 128;
const BLOCKS_PER_SM: u64 = 64;

/// A book of quotes resident on the device, with room for the results: what
/// [`CudaBackend::solve_implied_vol`] reads and writes. Built by
/// [`CudaBackend::upload_quotes`].
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

impl CudaBackend {
    /// Copies `quotes` to the device as columns and allocates the outputs (on kiln's stream).
    pub fn upload_quotes(&self, quotes: &[Quote]) -> Result<DeviceQuotes> {
        let col = |f: fn(&Quote) -> f64| -> Result<DeviceBuffer<f64>> {
            let v: Vec<f64> = quotes.iter().map(f).collect();
            self.upload_slice(&v)
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
            put: self.upload_slice(&put)?,
            vol: self.alloc(quotes.len())?,
            reason: self.alloc(quotes.len())?,
            len: quotes.len(),
        })
    }

    /// Launches `implied_vol_f64` over a resident book on kiln's stream (returns without
    /// waiting; [`Self::download_implied_vol`] or [`Self::synchronize`] waits).
    pub fn solve_implied_vol(&self, book: &mut DeviceQuotes) -> Result<()> {
        let n = book.len as u64;
        if n == 0 {
            return Ok(());
        }
        let sms = u64::from(self.info().desc.multiprocessors.max(1));
        let blocks = n
            .div_ceil(u64::from(THREADS))
            .min(sms * BLOCKS_PER_SM)
            .min(i32::MAX as u64) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // Sizes: every column and output holds exactly `len` elements (upload_quotes made
        // them together), and the kernel touches indices below n = len only.
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
        self.launch(Kernel::IMPLIED_VOL_F64, cfg, &args)
    }

    /// The raw outputs of the last solve of `book`: a volatility (NaN where none) and a
    /// reason code ([`NoVolatility::index`], 0 solved) per quote. Waits for the stream.
    pub fn download_implied_vol(&self, book: &DeviceQuotes) -> Result<(Vec<f64>, Vec<u8>)> {
        let mut vol = vec![0.0f64; book.len];
        let mut reason = vec![0u8; book.len];
        if book.len > 0 {
            book.vol.copy_to_host(&mut vol, self.stream())?;
            book.reason.copy_to_host(&mut reason, self.stream())?;
        }
        Ok((vol, reason))
    }

    /// The implied volatility of every quote of a book on this GPU, in order: each
    /// `Ok(sigma)` or its [`NoVolatility`] reason, as kiln-core's `implied_volatility_book`
    /// gives them (to what an ulp of input rounding allows; crate docs of this module's
    /// source, `launch_implied.rs`). The outer error is a device failure.
    /// Chunks of [`IV_CHUNK_QUOTES`].
    pub fn implied_volatility_book_gpu(
        &self,
        quotes: &[Quote],
    ) -> Result<Vec<std::result::Result<f64, NoVolatility>>> {
        self.implied_volatility_book_gpu_chunked(quotes, IV_CHUNK_QUOTES)
    }

    /// [`implied_volatility_book_gpu`](Self::implied_volatility_book_gpu) in chunks of at
    /// most `chunk` quotes (`chunk >= 1`; the results do not depend on it).
    pub fn implied_volatility_book_gpu_chunked(
        &self,
        quotes: &[Quote],
        chunk: usize,
    ) -> Result<Vec<std::result::Result<f64, NoVolatility>>> {
        if chunk == 0 {
            return Err(Error::invalid(
                "implied_volatility_book_gpu",
                "chunk = 0; it must be >= 1",
            ));
        }
        let mut out = Vec::with_capacity(quotes.len());
        for part in quotes.chunks(chunk) {
            let mut book = self.upload_quotes(part)?;
            self.solve_implied_vol(&mut book)?;
            let (vol, reason) = self.download_implied_vol(&book)?;
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
