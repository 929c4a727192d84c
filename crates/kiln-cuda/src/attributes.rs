//! Kernel characteristics read from the driver: registers, static / dynamic shared memory,
//! local memory (register spills), the per-function thread limit, and the occupancy each
//! kernel reaches at the block size and dynamic shared memory its launcher uses
//! (`kiln kernels`, `docs/kernels.md`).
//!
//! The launch shapes are a table ([`LAUNCHES`]) keyed by symbol rather than a `match`, so a
//! kernel added to [`KernelId`] without a row still compiles (`kiln kernels` lists it as
//! unrecorded) and the test below names it. The driver calls go through cudarc's safe layer (`cuFuncGetAttribute`,
//! `cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`, `cuDeviceGetAttribute`), so this
//! module needs no `unsafe`.

use crate::kernels::KernelId;
use crate::CudaBackend;
use cudarc::driver::sys::CUdevice_attribute as A;
use kiln_core::Result;
use serde::{Deserialize, Serialize};

/// How kiln launches one kernel, and what it computes.
#[derive(Clone, Copy, Debug)]
pub struct LaunchShape {
    /// The kernel's `extern "C"` name (a name, not a [`KernelId`], so rows can be written
    /// for kernels being added).
    pub symbol: &'static str,
    /// What it computes, in a sentence.
    pub computes: &'static str,
    /// Threads per block (x, y, z).
    pub block: [u32; 3],
    /// The grid, as the launcher computes it.
    pub grid: &'static str,
    /// Dynamic shared memory at the representative launch the occupancy is computed for.
    pub dynamic_shared_bytes: u32,
    /// What [`Self::dynamic_shared_bytes`] depends on (empty when it is always 0).
    pub dynamic_shared_note: &'static str,
}

impl LaunchShape {
    /// Threads per block.
    pub fn threads(&self) -> u32 {
        self.block.iter().product()
    }
}

const B256: [u32; 3] = [256, 1, 1];
const B32X8: [u32; 3] = [32, 8, 1];
const EW_GRID: &str =
    "min(ceil(n / (V*256*2)), resident blocks/SM, at most 8) blocks, grid-stride over 16-byte vectors (V = 4 f32 or 8 halves)";
const GEMM_GRID: &str =
    "(ceil(N/128), min(ceil(M/128), 65535), min(batch, 65535)), grid-stride over row tiles and batches";
const MC_GRID: &str = "ceil(items / 8) blocks, a warp per (option, 1024-sample block); chunked launches";

/// Dynamic shared memory of filter2d's direct path: `(32+2r)·(64+2r)` floats.
const fn f2d_smem(k: u32) -> u32 {
    let r = k / 2;
    (32 + 2 * r) * (64 + 2 * r) * 4
}

/// Every kernel's launch shape (one row per [`KernelId`]; rows are looked up by symbol).
pub const LAUNCHES: &[LaunchShape] = &[
    LaunchShape {
        symbol: "map_f32",
        computes: "y = op(x) for a MapOp (unary function, scale-shift, clamp; op code and two parameters as arguments) on f32",
        block: B256,
        grid: EW_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "map_f16",
        computes: "y = op(x) on f16 storage, f32 arithmetic, rounded once to f16",
        block: B256,
        grid: EW_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "map_bf16",
        computes: "y = op(x) on bf16 storage, f32 arithmetic, rounded once to bf16",
        block: B256,
        grid: EW_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "axpy_f32",
        computes: "y = a*x + y on f32 (one fma)",
        block: B256,
        grid: EW_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "axpy_f16",
        computes: "y = a*x + y on f16 storage (f32 fma, rounded once)",
        block: B256,
        grid: EW_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "axpy_bf16",
        computes: "y = a*x + y on bf16 storage (f32 fma, rounded once)",
        block: B256,
        grid: EW_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "transpose_b32",
        computes: "2-D transpose of 32-bit elements through a padded 64x64 shared tile, 16 loads in flight a thread",
        block: B32X8,
        grid: "(ceil(cols/64), min(ceil(rows/64), 65535)), grid-stride over tiles; 16 elements a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "transpose_b16",
        computes: "2-D transpose of 16-bit elements (f16, bf16; rows and cols even) moved as 32-bit words: 2x2 blocks permuted in registers, 64x64 tiles",
        block: B32X8,
        grid: "(ceil(cols/64), min(ceil(rows/64), 65535)), grid-stride over tiles; 8 words a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "transpose_h_b16",
        computes: "2-D transpose of 16-bit elements one at a time through a padded 32x32 shared tile (odd rows or cols)",
        block: B32X8,
        grid: "(ceil(cols/32), min(ceil(rows/32), 65535)), grid-stride over tiles; 4 elements a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "filter2d_k5_f32",
        computes: "direct 2-D correlation, 5x5 taps unrolled",
        block: B32X8,
        grid: "(ceil(w/32), min(ceil(h/64), 65535), min(n, 65535)); 8 outputs a thread of a 32x64 tile",
        dynamic_shared_bytes: f2d_smem(5),
        dynamic_shared_note: "(32+2r)(64+2r) floats, r = 2",
    },
    LaunchShape {
        symbol: "filter2d_k7_f32",
        computes: "direct 2-D correlation, 7x7 taps unrolled",
        block: B32X8,
        grid: "(ceil(w/32), min(ceil(h/64), 65535), min(n, 65535)); 8 outputs a thread of a 32x64 tile",
        dynamic_shared_bytes: f2d_smem(7),
        dynamic_shared_note: "(32+2r)(64+2r) floats, r = 3",
    },
    LaunchShape {
        symbol: "filter2d_kn_f32",
        computes: "direct 2-D correlation for any odd k up to 31 (weights in the parameter bank)",
        block: B32X8,
        grid: "(ceil(w/32), min(ceil(h/64), 65535), min(n, 65535)); 8 outputs a thread of a 32x64 tile",
        dynamic_shared_bytes: f2d_smem(31),
        dynamic_shared_note: "(32+2r)(64+2r) floats; shown at k = 31, the largest",
    },
    LaunchShape {
        symbol: "filter1d_x_f32",
        computes: "one separable 1-D correlation pass along the contiguous axis",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(lines/8), 65535)); a warp per 128-output line segment",
        dynamic_shared_bytes: 8 * (128 + 2 * 8) * 4,
        dynamic_shared_note: "8(128+2r) floats; shown at r = 8 (gaussian sigma 2)",
    },
    LaunchShape {
        symbol: "filter1d_s_f32",
        computes: "one separable 1-D correlation pass along a strided axis",
        block: B32X8,
        grid: "(ceil(A/32), min(ceil(L/32), 65535), min(O, 65535)); 4 outputs a thread",
        dynamic_shared_bytes: (32 + 2 * 8) * 32 * 4,
        dynamic_shared_note: "(32+2r)·32 floats; shown at r = 8 (gaussian sigma 2)",
    },
    LaunchShape {
        symbol: "filter3d_k3_f32",
        computes: "direct 3-D correlation, 3x3x3, z-marching with a register ring of planes",
        block: B32X8,
        grid: "(ceil(w/32), ceil(h/32), ceil(d/zc)), zc in 4..=64 for ~4 blocks/SM; 4 rows a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "filter3d_k7_f32",
        computes: "direct 3-D correlation, 7x7x7, z-marching",
        block: B32X8,
        grid: "(ceil(w/32), ceil(h/32), ceil(d/zc)), zc in 4..=64 for ~4 blocks/SM; 4 rows a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "filter3d_zm5_f32",
        computes: "direct 3-D correlation, 5x5x5, z-marching cp.async ring, 4 rows a thread",
        block: B32X8,
        grid: "(ceil(w/32), ceil(h/32), ceil(d/zc)), zc for whole waves of resident blocks",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "filter2d_k3r8_f32",
        computes: "direct 2-D correlation, 3x3, from registers (float4 rows, shuffled neighbours), 8 rows a thread, no shared memory",
        block: [32, 4, 1],
        grid: "(ceil(w/128), min(ceil(h/(4*8)), 65535), min(n, 65535)); a warp per 8-row strip, 4 columns a lane",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "filter2d_k3r4_f32",
        computes: "direct 2-D correlation, 3x3, from registers, 4 rows a thread",
        block: [32, 4, 1],
        grid: "(ceil(w/128), min(ceil(h/(4*4)), 65535), min(n, 65535)); a warp per 4-row strip, 4 columns a lane",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_vh_r1_f32",
        computes: "fused separable 2-D correlation, radius 1: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_vh_r2_f32",
        computes: "fused separable 2-D correlation, radius 2: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_vh_r3_f32",
        computes: "fused separable 2-D correlation, radius 3: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_vh_r4_f32",
        computes: "fused separable 2-D correlation, radius 4: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_vh_r5_f32",
        computes: "fused separable 2-D correlation, radius 5: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_vh_r6_f32",
        computes: "fused separable 2-D correlation, radius 6: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_vh_r7_f32",
        computes: "fused separable 2-D correlation, radius 7: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_vh_r8_f32",
        computes: "fused separable 2-D correlation, radius 8: pass along H, then along W, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_hv_r1_f32",
        computes: "fused separable 2-D correlation, radius 1: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_hv_r2_f32",
        computes: "fused separable 2-D correlation, radius 2: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_hv_r3_f32",
        computes: "fused separable 2-D correlation, radius 3: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_hv_r4_f32",
        computes: "fused separable 2-D correlation, radius 4: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_hv_r5_f32",
        computes: "fused separable 2-D correlation, radius 5: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_hv_r6_f32",
        computes: "fused separable 2-D correlation, radius 6: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_hv_r7_f32",
        computes: "fused separable 2-D correlation, radius 7: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "sep2d_hv_r8_f32",
        computes: "fused separable 2-D correlation, radius 8: pass along W, then along H, intermediate in shared memory",
        block: B32X8,
        grid: "(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535)); 128x64 output tile, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_european_f64",
        computes: "Monte Carlo European options: Philox4x32-10, Box-Muller, GBM path and payoff fused; per-(option, 1024-sample block) f64 sums",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_asian_arithmetic_f64",
        computes: "Monte Carlo arithmetic-average Asian options (block sums, optional geometric control variate)",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_asian_geometric_f64",
        computes: "Monte Carlo geometric-average Asian options",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_barrier_up_out_f64",
        computes: "Monte Carlo up-and-out barrier options",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_barrier_up_in_f64",
        computes: "Monte Carlo up-and-in barrier options",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_barrier_down_out_f64",
        computes: "Monte Carlo down-and-out barrier options",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_barrier_down_in_f64",
        computes: "Monte Carlo down-and-in barrier options",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_european_fast_f64",
        computes: "Monte Carlo European options, fast_math normals (MUFU lg2/sqrt/sin/cos; not bitwise the CPU's)",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_asian_arithmetic_fast_f64",
        computes: "Monte Carlo arithmetic-average Asian options, fast_math (MUFU normals and ex2 fixings)",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_asian_geometric_fast_f64",
        computes: "Monte Carlo geometric-average Asian options, fast_math",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_barrier_up_out_fast_f64",
        computes: "Monte Carlo up-and-out barrier options, fast_math",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_barrier_up_in_fast_f64",
        computes: "Monte Carlo up-and-in barrier options, fast_math",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_barrier_down_out_fast_f64",
        computes: "Monte Carlo down-and-out barrier options, fast_math",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_barrier_down_in_fast_f64",
        computes: "Monte Carlo down-and-in barrier options, fast_math",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_combine_f64",
        computes: "Monte Carlo: adds each option's block sums in block order onto running totals (exact chaining of chunks)",
        block: B256,
        grid: "ceil(options*7 / 256) blocks, a thread per (option, sum)",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "finance_selftest_f32",
        computes: "the portable f32 math and Philox words of the Monte Carlo kernels, for the bitwise CPU tests",
        block: B256,
        grid: "ceil(n/256) blocks",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "finance_sqrt_check_f32",
        computes: "the Box-Muller square root (MUFU.RSQ and one fused Newton step, no range test) against __fsqrt_rn on a range of floats, for the bitwise tests",
        block: B256,
        grid: "1024 blocks, grid-stride over the range",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_probe_philox_f64",
        computes: "benchmark probe: the European launch and block sums with the path loop cut to the Philox words (what the generator alone costs)",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_probe_normals_f64",
        computes: "benchmark probe: the European launch with the path loop cut to Philox and the exact Box-Muller normals, summed",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "mc_probe_normals_fast_f64",
        computes: "benchmark probe: the European launch with the path loop cut to Philox and the fast_math normals, summed",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "gemm_tiled_nn_f32",
        computes: "GEMM C = op(A) op(B) on f32 (fma), A and B as stored, float4 global loads (aligned strides): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "gemm_tiled_nn_s_f32",
        computes: "GEMM C = op(A) op(B) on f32 (fma), A and B as stored, scalar global loads (any alignment): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "gemm_tiled_nt_f32",
        computes: "GEMM C = op(A) op(B) on f32 (fma), B transposed, float4 global loads (aligned strides): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "gemm_tiled_nt_s_f32",
        computes: "GEMM C = op(A) op(B) on f32 (fma), B transposed, scalar global loads (any alignment): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "gemm_tiled_tn_f32",
        computes: "GEMM C = op(A) op(B) on f32 (fma), A transposed, float4 global loads (aligned strides): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "gemm_tiled_tn_s_f32",
        computes: "GEMM C = op(A) op(B) on f32 (fma), A transposed, scalar global loads (any alignment): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "gemm_tiled_tt_f32",
        computes: "GEMM C = op(A) op(B) on f32 (fma), both transposed, float4 global loads (aligned strides): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "gemm_tiled_tt_s_f32",
        computes: "GEMM C = op(A) op(B) on f32 (fma), both transposed, scalar global loads (any alignment): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
    LaunchShape {
        symbol: "gemm_naive_f32",
        computes: "GEMM C = op(A) op(B) on f32, the seed's naive kernel: one thread per element of C (the documented baseline)",
        block: [16, 16, 1],
        grid: "(ceil(M/16), min(ceil(N/16), 65535), min(batch, 65535))",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
    },
];

/// The launch shape of `k`, if the table has it.
pub fn launch_shape(k: KernelId) -> Option<&'static LaunchShape> {
    LAUNCHES.iter().find(|l| l.symbol == k.symbol())
}

/// The SM limits occupancy is measured against.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SmLimits {
    /// Resident threads per SM.
    pub max_threads: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// 32-bit registers per SM.
    pub registers: u32,
    /// Shared memory per SM in bytes.
    pub shared_bytes: u32,
    /// Shared memory the driver reserves per block in bytes.
    pub reserved_shared_per_block: u32,
    /// Streaming multiprocessors on the device.
    pub multiprocessors: u32,
}

/// One kernel's characteristics as the driver reports them for the loaded cubin.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KernelAttributes {
    /// `extern "C"` name.
    pub symbol: String,
    /// The `kernels/*.cu` module.
    pub module: String,
    /// What it computes.
    pub computes: String,
    /// Threads per block at launch (x, y, z); `None` when the launch table lacks the kernel.
    pub block: Option<[u32; 3]>,
    /// The grid, as the launcher computes it.
    pub grid: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block in bytes.
    pub static_shared_bytes: u32,
    /// Dynamic shared memory per block at the representative launch, in bytes.
    pub dynamic_shared_bytes: u32,
    /// What the dynamic shared memory depends on.
    pub dynamic_shared_note: String,
    /// Local memory per thread in bytes (register spills and local arrays).
    pub local_bytes: u32,
    /// Constant memory in bytes.
    pub const_bytes: u32,
    /// The largest block the function can be launched with (registers bound it).
    pub max_threads_per_block: u32,
    /// The cubin's SASS architecture (e.g. 90).
    pub binary_version: u32,
    /// Resident blocks per SM at the launch block size and shared memory.
    pub blocks_per_sm: u32,
    /// Resident warps per SM.
    pub active_warps_per_sm: u32,
    /// `active_warps_per_sm` over the SM's maximum warps.
    pub occupancy: f64,
    /// The resource that bounds `blocks_per_sm` (an estimate from the SM limits:
    /// `registers`, `shared memory`, `threads`, `blocks`; `launch` when it does not fit).
    pub limited_by: String,
}

fn attr(b: &CudaBackend, a: A) -> Result<u32> {
    b.stream()
        .context()
        .attribute(a)
        .map(|v| v.max(0) as u32)
        .map_err(|e| {
            crate::cuda_err(
                "cuDeviceGetAttribute",
                &format!("cuda:{}", b.info().desc.ordinal),
                e,
            )
        })
}

/// Which resource bounds the blocks per SM (registers allocated per warp in units of 256).
fn limiter(l: &SmLimits, threads: u32, regs: u32, smem: u32, blocks: u32) -> String {
    if blocks == 0 {
        return "launch".into();
    }
    let warps = threads.div_ceil(32).max(1);
    let regs_per_warp = (regs * 32).div_ceil(256) * 256;
    let by_regs = if regs_per_warp == 0 {
        u32::MAX
    } else {
        l.registers / (regs_per_warp * warps)
    };
    let by_smem = if smem == 0 {
        u32::MAX
    } else {
        l.shared_bytes / (smem + l.reserved_shared_per_block)
    };
    let by_threads = l.max_threads / threads.max(1);
    let cands = [
        (by_regs, "registers"),
        (by_smem, "shared memory"),
        (by_threads, "threads"),
        (l.max_blocks, "blocks"),
    ];
    let min = cands.iter().map(|c| c.0).min().unwrap_or(u32::MAX);
    cands
        .iter()
        .filter(|c| c.0 == min)
        .map(|c| c.1)
        .collect::<Vec<_>>()
        .join(", ")
}

impl CudaBackend {
    /// The SM limits of this device.
    pub fn sm_limits(&self) -> Result<SmLimits> {
        Ok(SmLimits {
            max_threads: attr(self, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            max_blocks: attr(self, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
            registers: attr(self, A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
            shared_bytes: attr(self, A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            reserved_shared_per_block: attr(self, A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)?,
            multiprocessors: self.info().desc.multiprocessors,
        })
    }

    /// Load `k` (compiling its module on a cache miss) and read its attributes and its
    /// occupancy at the launch shape of [`LAUNCHES`].
    pub fn kernel_attributes(&self, k: KernelId, limits: &SmLimits) -> Result<KernelAttributes> {
        let f = self.function(k)?;
        let dev = format!("cuda:{}", self.info().desc.ordinal);
        let e = |op: &str| {
            let dev = dev.clone();
            let op = format!("{op} ({})", k.symbol());
            move |err| crate::cuda_err(&op, &dev, err)
        };
        let get = |v: std::result::Result<i32, _>, op: &str| v.map(|x: i32| x.max(0) as u32).map_err(e(op));
        // get_attribute binds the context first, so the occupancy call below runs in it.
        let registers = get(f.num_regs(), "cuFuncGetAttribute(NUM_REGS)")?;
        let static_shared_bytes = get(f.shared_size_bytes(), "cuFuncGetAttribute(SHARED_SIZE_BYTES)")?;
        let local_bytes = get(f.local_size_bytes(), "cuFuncGetAttribute(LOCAL_SIZE_BYTES)")?;
        let const_bytes = get(f.const_size_bytes(), "cuFuncGetAttribute(CONST_SIZE_BYTES)")?;
        let max_threads_per_block = get(
            f.max_threads_per_block(),
            "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)",
        )?;
        let binary_version = get(f.binary_version(), "cuFuncGetAttribute(BINARY_VERSION)")?;
        let shape = launch_shape(k);
        let (threads, dyn_smem) = shape.map_or((0, 0), |s| (s.threads(), s.dynamic_shared_bytes));
        let blocks_per_sm = if shape.is_some() && threads <= max_threads_per_block {
            f.occupancy_max_active_blocks_per_multiprocessor(threads, dyn_smem as usize, None)
                .map_err(e("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?
        } else {
            0
        };
        let active_warps_per_sm = blocks_per_sm * threads.div_ceil(32);
        let max_warps = (limits.max_threads / 32).max(1);
        Ok(KernelAttributes {
            symbol: k.symbol().into(),
            module: k.module().name.into(),
            computes: shape.map_or("(not in the launch table)", |s| s.computes).into(),
            block: shape.map(|s| s.block),
            grid: shape.map_or("", |s| s.grid).into(),
            registers,
            static_shared_bytes,
            dynamic_shared_bytes: dyn_smem,
            dynamic_shared_note: shape.map_or("", |s| s.dynamic_shared_note).into(),
            local_bytes,
            const_bytes,
            max_threads_per_block,
            binary_version,
            blocks_per_sm,
            active_warps_per_sm,
            occupancy: f64::from(active_warps_per_sm) / f64::from(max_warps),
            limited_by: if shape.is_none() {
                "unknown launch".into()
            } else {
                limiter(
                    limits,
                    threads,
                    registers,
                    static_shared_bytes + dyn_smem,
                    blocks_per_sm,
                )
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_has_exactly_one_launch_row() {
        for k in KernelId::ALL {
            let n = LAUNCHES.iter().filter(|l| l.symbol == k.symbol()).count();
            assert_eq!(n, 1, "{}: {n} rows in attributes::LAUNCHES", k.symbol());
        }
        for l in LAUNCHES {
            assert_eq!(
                LAUNCHES.iter().filter(|m| m.symbol == l.symbol).count(),
                1,
                "{} twice",
                l.symbol
            );
            assert!(l.threads() >= 32 && l.threads() <= 1024, "{}", l.symbol);
            assert!(l.dynamic_shared_bytes <= 48 * 1024, "{}", l.symbol);
            assert!(!l.computes.is_empty());
        }
    }

    #[test]
    fn filter2d_shared_memory_matches_the_launcher_formula() {
        // launch_imaging.rs: (32 + 2r) * (64 + 2r) * 4 bytes
        assert_eq!(f2d_smem(3), 34 * 66 * 4);
        assert_eq!(f2d_smem(31), 62 * 94 * 4);
    }

    #[test]
    fn limiter_names_the_binding_resource() {
        let h100 = SmLimits {
            max_threads: 2048,
            max_blocks: 32,
            registers: 65536,
            shared_bytes: 233472,
            reserved_shared_per_block: 1024,
            multiprocessors: 132,
        };
        // 256 threads x 32 regs: 8 blocks by regs and by threads
        assert_eq!(limiter(&h100, 256, 32, 0, 8), "registers, threads");
        // 128 regs: 65536 / (4096 * 8) = 2 blocks
        assert_eq!(limiter(&h100, 256, 128, 0, 2), "registers");
        // 100 KB smem: 2 blocks
        assert_eq!(limiter(&h100, 64, 16, 100_000, 2), "shared memory");
        assert_eq!(limiter(&h100, 256, 32, 0, 0), "launch");
    }
}
