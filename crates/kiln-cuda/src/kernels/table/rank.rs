//! Rank filters, binary morphology, labelling and the distance transform (`rank.cu`,
//! `rank_med.cu`, `morph.cu`, `label.cu`, `distance.cu`).

use super::{B256, B32X8, RANK_NET_P};
use crate::kernels::params::decl::*;
use crate::kernels::{DISTANCE, LABEL, MORPH, RANK};

declare_kernels! { FAMILY:
    // rank.cu / morph.cu: guesses until measured (the networks are the slow ones)
    /// Rank filter: any footprint of up to 9 elements, any rank, keys sorted in registers (Batcher network).
    RANK_NET9 {
        symbol: "rank_net9",
        module: RANK,
        compile_ms: 900,
        computes: "rank of a footprint of up to 9 elements (any dtype as total-order keys), sorted in registers by Batcher's odd-even merge network",
        block: B32X8,
        grid: "(ceil(W/32), min(ceil(H/8), 65535), min(D, 65535)), one output a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: RANK_NET_P,
    }
    /// Rank filter: up to 25 elements, registers, Batcher network.
    RANK_NET25 {
        symbol: "rank_net25",
        module: RANK,
        compile_ms: 1500,
        computes: "rank of up to 25 elements, Batcher network in registers",
        block: B32X8,
        grid: "(ceil(W/32), min(ceil(H/8), 65535), min(D, 65535)), one output a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: RANK_NET_P,
    }
    /// Rank filter: up to 49 elements, registers, Batcher network.
    RANK_NET49 {
        symbol: "rank_net49",
        module: RANK,
        compile_ms: 3000,
        computes: "rank of up to 49 elements, Batcher network in registers",
        block: B32X8,
        grid: "(ceil(W/32), min(ceil(H/8), 65535), min(D, 65535)), one output a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: RANK_NET_P,
    }
    /// Median of exactly 9 elements (3x3): the pruned network for the middle rank.
    RANK_MED9 {
        symbol: "rank_med9",
        module: RANK,
        compile_ms: 700,
        computes: "median of exactly 9 elements (3x3), the network pruned to the middle rank",
        block: B32X8,
        grid: "(ceil(W/32), min(ceil(H/8), 65535), min(D, 65535)), one output a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: RANK_NET_P,
    }
    /// Median of exactly 25 elements (5x5): the pruned network for the middle rank.
    RANK_MED25 {
        symbol: "rank_med25",
        module: RANK,
        compile_ms: 1200,
        computes: "median of exactly 25 elements (5x5), the network pruned to the middle rank",
        block: B32X8,
        grid: "(ceil(W/32), min(ceil(H/8), 65535), min(D, 65535)), one output a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: RANK_NET_P,
    }
    /// Median 3x3 of u8, a centred box: four outputs a thread on packed bytes.
    RANK_MED9_U8X4 {
        symbol: "rank_med9_u8x4",
        module: RANK,
        compile_ms: 700,
        computes: "median 3x3 of u8 (a centred box), four outputs a thread on packed bytes",
        block: B32X8,
        grid: "(ceil(W/4/32), min(ceil(H/8), 65535), min(D, 65535)), one 4-byte word a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: RANK_NET_P,
    }
    /// Median 5x5 of u8, a centred box: four outputs a thread on packed bytes.
    RANK_MED25_U8X4 {
        symbol: "rank_med25_u8x4",
        module: RANK,
        compile_ms: 1200,
        computes: "median 5x5 of u8 (a centred box), four outputs a thread on packed bytes",
        block: B32X8,
        grid: "(ceil(W/4/32), min(ceil(H/8), 65535), min(D, 65535)), one 4-byte word a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: RANK_NET_P,
    }
    /// Rank filter fallback: any footprint and rank, bisection on the total-order key.
    RANK_BISECT {
        symbol: "rank_bisect",
        module: RANK,
        compile_ms: 300,
        computes: "rank over any footprint by bisection on the total-order key (a count over the window a step)",
        block: B32X8,
        grid: "(ceil(W/32), min(ceil(H/8), 65535), min(D, 65535)), one output a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[INPUT_ANY, OUTPUT_ANY, RANK_WIN, input(I32)],
    }
    /// Min/max over any footprint; with a structure, min(x - s) / max(x + s) in double.
    MINMAX_FP {
        symbol: "minmax_fp",
        module: RANK,
        compile_ms: 300,
        computes: "min/max over any footprint; with a structure min(x - s) / max(x + s) in double",
        block: B32X8,
        grid: "(ceil(W/32), min(ceil(H/8), 65535), min(D, 65535)), one output a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[INPUT_ANY, OUTPUT_ANY, RANK_WIN, input(I32), input(F64), val(I32)],
    }
    /// u8 rank over a 2-D box: Huang's sliding histogram down columns, a histogram a thread.
    RANK_HIST_U8 {
        symbol: "rank_hist_u8",
        module: RANK,
        compile_ms: 300,
        computes: "u8 rank over a 2-D box: Huang's sliding histogram down each column of a strip, a 256-bin u16 histogram a thread in static shared memory (32 KiB a block)",
        block: [64, 1, 1],
        grid: "(ceil(W/64), ceil(H/strip), planes); strip = max(64, 4*box height) rows",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(U8),
            output(U8),
            RANK_WIN,
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
        ],
    }
    /// Min/max over a full 2-D box, fused tile: van Herk / Gil-Werman along rows then columns.
    MINMAX_BOX2D {
        symbol: "minmax_box2d",
        module: RANK,
        compile_ms: 400,
        computes: "min/max over a full 2-D box: a 64x32 output tile with its halo in shared memory, van Herk / Gil-Werman along rows then columns",
        block: B256,
        grid: "(ceil(W/64), min(ceil(H/32), 65535), min(D, 65535)), grid-stride over tiles and planes",
        dynamic_shared_bytes: (((32 + 15 - 1) * (64 + 15 - 1)) + (32 + 15 - 1) * 64) * 4,
        dynamic_shared_note: "keys of (32+ky-1)(64+kx-1) + (32+ky-1)64; shown at 15x15",
        params: &[
            INPUT_ANY,
            OUTPUT_ANY,
            RANK_WIN,
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
        ],
    }
    /// One binary erosion or dilation step (scipy semantics), sets a changed flag.
    BINARY_STEP {
        symbol: "binary_step",
        module: MORPH,
        compile_ms: 200,
        computes: "one binary erosion (AND) or dilation (OR) step over a structure, border value outside, optional mask; sets a changed flag",
        block: B32X8,
        grid: "(ceil(W/32), min(ceil(H/8), 65535), min(D, 65535)), one output a thread, grid-stride in y and z",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            INPUT_ANY,
            val(I32),
            output(U8),
            INPUT_ANY,
            val(I32),
            val(I32),
            input(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            val(I32),
            inout(I32),
        ],
    }
    /// x = 1 - x on a u8 0/1 mask (binary_fill_holes' complement).
    BINARY_NOT_U8 {
        symbol: "binary_not_u8",
        module: MORPH,
        compile_ms: 60,
        computes: "x = 1 - x on a u8 mask",
        block: B256,
        grid: "min(ceil(n/256), 65535) blocks, grid-stride",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[inout(U8), val(I64)],
    }
    /// Labelling, step 1: each tile's components joined in shared memory, zeros -1.
    LABEL_LOCAL {
        symbol: "label_local",
        module: LABEL,
        compile_ms: 80,
        computes: "label's start: per tile of at most 1,024 elements, each non-zero element (u8, u16, f32, f64, i32, i64 by code) joined with the structure's earlier neighbours inside the tile (row runs by warp ballot, then union-find in shared memory); L[p] = the global index of p's tile-local root, -1 for a zero",
        block: B256,
        grid: "one block per tile (td x th x tw: 1x1x1024 for a row, 1x32x32 in 2-D, 4x8x32 in 3-D)",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[INPUT_ANY, val(I32), output(I32), val(I32), val(I32), val(I32), val(I32), val(I32), val(I32), input(I32), val(I32), val(I32)],
    }
    /// Labelling, step 2: the pairs the tiles cut, joined in global memory (lock-free, atomicMin).
    LABEL_BORDER {
        symbol: "label_border",
        module: LABEL,
        compile_ms: 80,
        computes: "label's merge across tiles: each element on a tile's face joined with the structure's earlier neighbours in other tiles (Playne-Hawick, atomicMin to the smaller root)",
        block: B256,
        grid: "one block per tile, as label_local",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[inout(I32), val(I32), val(I32), val(I32), val(I32), val(I32), val(I32), input(I32), val(I32), val(I32)],
    }
    /// Labelling, step 3: every element points at its root; roots counted per block.
    LABEL_COMPRESS {
        symbol: "label_compress",
        module: LABEL,
        compile_ms: 80,
        computes: "label's path compression (L[p] = root of p) and root count per 1,024-element block",
        block: B256,
        grid: "ceil(n/1024) blocks, 4 elements a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[inout(I32), val(I32), output(I32)],
    }
    /// Labelling, step 4: the block counts scanned, and their total.
    LABEL_SCAN {
        symbol: "label_scan",
        module: LABEL,
        compile_ms: 80,
        computes: "label's exclusive scan of the block counts (one block) and their total",
        block: B256,
        grid: "1 block",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[inout(I32), val(I32), output(I32)],
    }
    /// Labelling, step 5: each root numbered in index order (scipy's numbering).
    LABEL_NUMBER {
        symbol: "label_number",
        module: LABEL,
        compile_ms: 80,
        computes: "label's numbering: each root's slot set to -(number + 1), roots numbered in index order",
        block: B256,
        grid: "ceil(n/1024) blocks, 4 elements a thread",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[inout(I32), val(I32), input(I32)],
    }
    /// Labelling, step 6: every element's label, from its root's number.
    LABEL_RESOLVE {
        symbol: "label_resolve",
        module: LABEL,
        compile_ms: 60,
        computes: "label's last step: out = 0 for background, else the number of the root at the end of the element's chain",
        block: B256,
        grid: "min(ceil(n/256), 2^20) blocks, grid-stride",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(I32), output(I32), val(I32)],
    }
    /// distance_transform_edt, pass 0 as a scan (the nearest background element of each line).
    EDT_SCAN0 {
        symbol: "edt_scan0",
        module: DISTANCE,
        compile_ms: 60,
        computes: "distance_transform_edt's first pass as a scan: each element's nearest background element along axis 0 (the earlier of two equally near), and the distances when the array has one axis",
        block: B256,
        grid: "min(ceil(lines/256), 2^20) blocks, a thread a line along axis 0, grid-stride",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U8), output(I32), output(F64), val(I64), val(I32), val(F64)],
    }
    /// distance_transform_edt, one pass by the stack of Voronoi sites (scipy's _VoronoiFT).
    EDT_PASS {
        symbol: "edt_pass",
        module: DISTANCE,
        compile_ms: 150,
        computes: "one pass of distance_transform_edt's feature transform along axis d (scipy's stack of Voronoi sites, f64 without contraction); the last pass writes every index plane and the float64 distances",
        block: B256,
        grid: "min(ceil(lines/256), 2^20) blocks, a thread a line along axis d, grid-stride",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U8), input(I32), output(I32), inout(I32), inout(F64), output(F64), input(I64), input(F64), val(I32), val(I32), val(I64), val(I32)],
    }
}
