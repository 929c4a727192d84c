//! The chunked "blocks, then combine" driver every Monte Carlo engine runs (Philox and
//! Sobol GBM in `launch_finance*.rs`, Heston, baskets).
//!
//! An engine's block kernel writes the 7 sums of each (option, canonical block) item it is
//! given; `mc_combine_f64` then adds each row's blocks in block order onto running totals.
//! A run is `options` parameter rows, each `replicates` rows of totals (one for a Philox
//! run, the Sobol replicates otherwise) of `per` consecutive blocks. Launches are cut into
//! chunks of at most `max_items` items so the block-sum buffer stays small: whole options
//! when an option's blocks fit, else a replicate's blocks in pieces. The totals of a row
//! chain across its pieces in block order, from zero, so chunking changes no bit.
//!
//! All of it runs on the current stream, in order: each chunk's combine reads the blocks
//! its block kernel wrote before the next chunk overwrites them.

use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::launch_finance::{too_many, SUMS};
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::{Error, Result};

/// The shape of a chunked run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct McRun {
    /// Parameter rows (options).
    pub(crate) options: u64,
    /// Rows of totals per option.
    pub(crate) replicates: u64,
    /// Canonical blocks per row of totals.
    pub(crate) per: u64,
    /// At most this many (option, block) items per block launch, `>= 1`.
    pub(crate) max_items: u64,
}

/// One chunk: a block launch and the combine of what it wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Chunk {
    /// First parameter row of the block launch.
    row0: u64,
    /// Parameter rows it covers.
    rows: u64,
    /// First block of each row.
    first_block: u64,
    /// Blocks of each row.
    count: u64,
    /// First row of totals the combine adds onto.
    total_row0: u64,
    /// Rows of totals it adds onto.
    total_rows: u64,
    /// Blocks each row of totals gets.
    per_row: u64,
}

impl McRun {
    /// Whole options a chunk when an option's blocks fit `max_items`.
    fn whole(&self) -> bool {
        self.per.saturating_mul(self.replicates) <= self.max_items
    }

    /// Options per chunk when [`Self::whole`].
    fn opt_chunk(&self) -> u64 {
        let nb = self.per.saturating_mul(self.replicates);
        (self.max_items / nb.max(1)).min(self.options).max(1)
    }

    /// Items the block-sum buffer must hold.
    fn block_capacity(&self) -> u64 {
        if self.whole() {
            self.opt_chunk()
                .saturating_mul(self.per.saturating_mul(self.replicates))
        } else {
            self.per.min(self.max_items)
        }
    }

    /// Every chunk, in launch order: whole options at a time when they fit, else each
    /// (option, replicate)'s blocks in pieces of at most `max_items`.
    fn for_each_chunk(&self, mut f: impl FnMut(Chunk) -> Result<()>) -> Result<()> {
        let (n, r, per) = (self.options, self.replicates, self.per);
        if self.whole() {
            let opt_chunk = self.opt_chunk();
            let mut o0 = 0u64;
            while o0 < n {
                let on = opt_chunk.min(n - o0);
                // (option, replicate) rows are consecutive runs of `per` blocks.
                f(Chunk {
                    row0: o0,
                    rows: on,
                    first_block: 0,
                    count: per * r,
                    total_row0: o0 * r,
                    total_rows: on * r,
                    per_row: per,
                })?;
                o0 += on;
            }
        } else {
            for o in 0..n {
                for rep in 0..r {
                    let mut b0 = 0u64;
                    while b0 < per {
                        let bn = self.max_items.min(per - b0);
                        f(Chunk {
                            row0: o,
                            rows: 1,
                            first_block: rep * per + b0,
                            count: bn,
                            total_row0: o * r + rep,
                            total_rows: 1,
                            per_row: bn,
                        })?;
                        b0 += bn;
                    }
                }
            }
        }
        Ok(())
    }
}

impl McRun {
    /// The run's totals on `cuda`, 7 f64 per (option, replicate), option-major: for each
    /// chunk, `blocks(row0, rows, first_block, count, out)` launches the engine's block
    /// kernel on parameter rows `row0 .. row0 + rows` and blocks `first_block ..
    /// first_block + count` of each (item order into `out`), then `mc_combine_f64` adds
    /// them onto the totals.
    pub(crate) fn totals(
        self,
        cuda: &CudaBackend,
        mut blocks: impl FnMut(u64, u64, u64, u64, &mut DeviceBuffer<f64>) -> Result<()>,
    ) -> Result<Vec<f64>> {
        if self.max_items == 0 {
            return Err(Error::invalid("monte carlo", "max_items = 0; it must be >= 1"));
        }
        let (n, r) = (self.options, self.replicates);
        self.per.checked_mul(r).ok_or_else(|| too_many(u64::MAX))?;
        let rows = n.checked_mul(r).ok_or_else(|| too_many(u64::MAX))?;
        let cap = self.block_capacity();
        let tlen = usize::try_from(rows).map_err(|_| too_many(rows))? * SUMS;
        let totals = cuda.upload_slice(&vec![0.0f64; tlen])?;
        let mut out = cuda.alloc::<f64>(usize::try_from(cap).map_err(|_| too_many(cap))? * SUMS)?;
        self.for_each_chunk(|c| {
            blocks(c.row0, c.rows, c.first_block, c.count, &mut out)?;
            combine(cuda, &out, c.total_rows, c.per_row, &totals, c.total_row0)
        })?;
        let mut host = vec![0.0f64; tlen];
        totals.copy_to_host(&mut host, cuda.stream())?;
        Ok(host)
    }
}

/// `totals[row0 + i] += blocks[i * nb .. (i + 1) * nb]` in block order, `i < rows` (7 sums a
/// row), through `mc_combine_f64` on `cuda`.
fn combine(
    cuda: &CudaBackend,
    blocks: &DeviceBuffer<f64>,
    rows: u64,
    nb: u64,
    totals: &DeviceBuffer<f64>,
    row0: u64,
) -> Result<()> {
    let need_b = rows * nb * SUMS as u64;
    let need_t = (row0 + rows) * SUMS as u64;
    if need_b > blocks.len() as u64 || need_t > totals.len() as u64 {
        return Err(Error::invalid(
            "mc_combine_f64",
            format!("{rows} rows of {nb} blocks from row {row0} exceed the buffers"),
        ));
    }
    let n_rows = u32::try_from(rows).map_err(|_| too_many(rows))?;
    let threads = 256u32;
    let cfg = LaunchConfig {
        grid_dim: ((rows * SUMS as u64).div_ceil(u64::from(threads)) as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    // Sizes: `blocks` holds at least rows * nb * 7 f64 and `totals` rows row0 .. row0 +
    // rows (both checked above).
    let args = [
        Arg::buf(blocks),
        n_rows.into(),
        nb.into(),
        Arg::buf_at(totals, row0 * SUMS as u64),
    ];
    cuda.launch(Kernel::MC_COMBINE_F64, cfg, &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunking the Philox, Heston and basket engines each wrote out: (options per
    /// chunk, blocks per chunk), every chunk's blocks combined onto its options' totals.
    fn philox_reference(n: u64, nb: u64, max_items: u64) -> (u64, Vec<Chunk>) {
        let (opt_chunk, blk_chunk) = if nb <= max_items {
            ((max_items / nb).min(n).max(1), nb)
        } else {
            (1, max_items)
        };
        let mut out = Vec::new();
        let mut o0 = 0u64;
        while o0 < n {
            let on = opt_chunk.min(n - o0);
            let mut b0 = 0u64;
            while b0 < nb {
                let bn = blk_chunk.min(nb - b0);
                out.push(Chunk {
                    row0: o0,
                    rows: on,
                    first_block: b0,
                    count: bn,
                    total_row0: o0,
                    total_rows: on,
                    per_row: bn,
                });
                b0 += bn;
            }
            o0 += on;
        }
        (opt_chunk * blk_chunk, out)
    }

    /// The Sobol engine's chunking: whole options, else each replicate's blocks in pieces.
    fn qmc_reference(n: u64, r: u64, per: u64, max_items: u64) -> (u64, Vec<Chunk>) {
        let nb = per * r;
        let mut out = Vec::new();
        if nb <= max_items {
            let opt_chunk = (max_items / nb).min(n).max(1);
            let mut o0 = 0u64;
            while o0 < n {
                let on = opt_chunk.min(n - o0);
                out.push(Chunk {
                    row0: o0,
                    rows: on,
                    first_block: 0,
                    count: nb,
                    total_row0: o0 * r,
                    total_rows: on * r,
                    per_row: per,
                });
                o0 += on;
            }
            (opt_chunk * nb, out)
        } else {
            for o in 0..n {
                for rep in 0..r {
                    let mut b0 = 0u64;
                    while b0 < per {
                        let bn = max_items.min(per - b0);
                        out.push(Chunk {
                            row0: o,
                            rows: 1,
                            first_block: rep * per + b0,
                            count: bn,
                            total_row0: o * r + rep,
                            total_rows: 1,
                            per_row: bn,
                        });
                        b0 += bn;
                    }
                }
            }
            (per.min(max_items), out)
        }
    }

    fn chunks(run: McRun) -> Vec<Chunk> {
        let mut out = Vec::new();
        run.for_each_chunk(|c| {
            out.push(c);
            Ok(())
        })
        .expect("recording never fails");
        out
    }

    #[test]
    fn one_driver_chunks_as_every_engine_did() {
        for n in [1u64, 2, 3, 7, 64] {
            for nb in [1u64, 2, 5, 16, 1000] {
                for max_items in [1u64, 3, 16, 1000, 1 << 20] {
                    let run = McRun {
                        options: n,
                        replicates: 1,
                        per: nb,
                        max_items,
                    };
                    let (cap, want) = philox_reference(n, nb, max_items);
                    assert_eq!(chunks(run), want, "philox n {n} nb {nb} max {max_items}");
                    assert_eq!(run.block_capacity(), cap);
                    for r in [1u64, 2, 4] {
                        let run = McRun { replicates: r, ..run };
                        let (cap, want) = qmc_reference(n, r, nb, max_items);
                        assert_eq!(chunks(run), want, "qmc n {n} r {r} per {nb} max {max_items}");
                        assert_eq!(run.block_capacity(), cap);
                    }
                }
            }
        }
    }

    #[test]
    fn every_block_of_every_row_is_combined_once_in_order() {
        let run = McRun {
            options: 5,
            replicates: 3,
            per: 7,
            max_items: 4,
        };
        let mut next = [0u64; 15];
        for c in chunks(run) {
            assert!(c.rows * c.count <= run.block_capacity());
            for t in c.total_row0..c.total_row0 + c.total_rows {
                next[t as usize] += c.per_row;
            }
        }
        assert!(next.iter().all(|&b| b == 7));
    }
}
