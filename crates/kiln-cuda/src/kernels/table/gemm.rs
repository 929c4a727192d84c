//! GEMM: the tiled kernels for each transpose pair, split-K forms and the naive reference (`gemm.cu`).

use super::{B256, GEMM_GRID, GEMM_P};
use crate::kernels::GEMM;

declare_kernels! { FAMILY:
    /// GEMM, 128x128x16 tiles, cp.async / float4 loads, A and B as stored (`NN`).
    GEMM_TILED_NN_F32 {
        symbol: "gemm_tiled_nn_f32",
        module: GEMM,
        compile_ms: 751,
        computes: "GEMM C = op(A) op(B) on f32 (fma), A and B as stored, float4 global loads (aligned strides): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: GEMM_P,
    }
    /// GEMM tiled, B transposed (`NT`).
    GEMM_TILED_NT_F32 {
        symbol: "gemm_tiled_nt_f32",
        module: GEMM,
        compile_ms: 723,
        computes: "GEMM C = op(A) op(B) on f32 (fma), B transposed, float4 global loads (aligned strides): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: GEMM_P,
    }
    /// GEMM tiled, A transposed (`TN`).
    GEMM_TILED_TN_F32 {
        symbol: "gemm_tiled_tn_f32",
        module: GEMM,
        compile_ms: 487,
        computes: "GEMM C = op(A) op(B) on f32 (fma), A transposed, float4 global loads (aligned strides): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: GEMM_P,
    }
    /// GEMM tiled, both transposed (`TT`).
    GEMM_TILED_TT_F32 {
        symbol: "gemm_tiled_tt_f32",
        module: GEMM,
        compile_ms: 744,
        computes: "GEMM C = op(A) op(B) on f32 (fma), both transposed, float4 global loads (aligned strides): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: GEMM_P,
    }
    /// GEMM tiled with scalar loads (any alignment), `NN`.
    GEMM_TILED_NN_S_F32 {
        symbol: "gemm_tiled_nn_s_f32",
        module: GEMM,
        compile_ms: 552,
        computes: "GEMM C = op(A) op(B) on f32 (fma), A and B as stored, scalar global loads (any alignment): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: GEMM_P,
    }
    /// GEMM tiled, scalar loads, `NT`.
    GEMM_TILED_NT_S_F32 {
        symbol: "gemm_tiled_nt_s_f32",
        module: GEMM,
        compile_ms: 428,
        computes: "GEMM C = op(A) op(B) on f32 (fma), B transposed, scalar global loads (any alignment): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: GEMM_P,
    }
    /// GEMM tiled, scalar loads, `TN`.
    GEMM_TILED_TN_S_F32 {
        symbol: "gemm_tiled_tn_s_f32",
        module: GEMM,
        compile_ms: 548,
        computes: "GEMM C = op(A) op(B) on f32 (fma), A transposed, scalar global loads (any alignment): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: GEMM_P,
    }
    /// GEMM tiled, scalar loads, `TT`.
    GEMM_TILED_TT_S_F32 {
        symbol: "gemm_tiled_tt_s_f32",
        module: GEMM,
        compile_ms: 536,
        computes: "GEMM C = op(A) op(B) on f32 (fma), both transposed, scalar global loads (any alignment): 128x128 tile a block, K in steps of 16 through double-buffered shared memory (cp.async where rows run along m or n), a 32x64 tile a warp, an 8x8 register tile a thread",
        block: B256,
        grid: GEMM_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: GEMM_P,
    }
    /// GEMM, the seed's naive kernel: one thread per element of C (the baseline).
    GEMM_NAIVE_F32 {
        symbol: "gemm_naive_f32",
        module: GEMM,
        compile_ms: 56,
        computes: "GEMM C = op(A) op(B) on f32, the seed's naive kernel: one thread per element of C (the documented baseline)",
        block: [16, 16, 1],
        grid: "(ceil(M/16), min(ceil(N/16), 65535), min(batch, 65535))",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: GEMM_P,
    }
}
