// The variants of kiln's bf16 wgmma GEMM the benchmark compares with the default ones (the shared
// body is `gemm_wgmma.cuh`, prepended by the build; the launcher, `src/gemm_wgmma.rs`, picks
// one by `WgmmaVariant`). Each exists for the four transpose pairs (suffix nn, nt, tn, tt:
// A then B, n as stored m x k / k x n, t transposed).
//
// - inflight: 4 stages, a consumer keeps one wgmma group running while it waits for the
//   next stage; direct stores.
// - tma_store: 3 stages, the TMA-store epilogue with one 32 KiB staging buffer a consumer
//   (4 stages would not fit beside it in 227 KiB).
// - tma_halves: 4 stages, the TMA-store epilogue in two passes of 128 columns through a
//   16 KiB buffer a consumer.
// (tma_halves_g16, tma_halves walking the tiles in groups of 16 tile rows instead of 8, is
// the default and lives in `gemm_wgmma.cu`.)
// - cluster: sync's pipeline and stores in clusters of two blocks on vertically adjacent
//   tiles, each loading half of the B panel they share and multicasting it into both (B's
//   tensor map in 128-row boxes when B is stored n x k).
// - cluster_tma_store: cluster with tma_store's 3 stages and epilogue.
// - cluster_tma_halves: cluster with tma_halves's 4 stages and epilogue.
//
// The TMA-store kernels take a third tensor map, over C (n x m as stored, 64 x 64 boxes,
// 128-byte swizzle), after B's.

#define KILN_WGMMA_DIRECT(NAME, STAGES, INFLIGHT, TA, TB)                                               \
    extern "C" __global__ void __launch_bounds__(384, 1)                                                \
        NAME(const __grid_constant__ KilnTmaDesc map_a, const __grid_constant__ KilnTmaDesc map_b,      \
             unsigned short* __restrict__ c, int m, int n, int k) {                                     \
        gemm_wgmma_body<STAGES, INFLIGHT, TA, TB, 0>(&map_a, &map_b, nullptr, c, m, n, k, 1.0f);        \
    }

#define KILN_WGMMA_CLUSTER(NAME, TA, TB)                                                                \
    extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)                      \
        NAME(const __grid_constant__ KilnTmaDesc map_a, const __grid_constant__ KilnTmaDesc map_b,      \
             unsigned short* __restrict__ c, int m, int n, int k) {                                     \
        gemm_wgmma_body<4, false, TA, TB, 0, 0, 8, 2>(&map_a, &map_b, nullptr, c, m, n, k, 1.0f);       \
    }

#define KILN_WGMMA_CLUSTER_TMA_STORE(NAME, STAGES, EPI, TA, TB)                                         \
    extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)                      \
        NAME(const __grid_constant__ KilnTmaDesc map_a, const __grid_constant__ KilnTmaDesc map_b,      \
             const __grid_constant__ KilnTmaDesc map_c, unsigned short* __restrict__ c, int m, int n,   \
             int k) {                                                                                   \
        gemm_wgmma_body<STAGES, false, TA, TB, 0, EPI, 8, 2>(&map_a, &map_b, &map_c, c, m, n, k, 1.0f); \
    }

KILN_WGMMA_DIRECT(gemm_wgmma_bf16_inflight_nn, 4, true, false, false)
KILN_WGMMA_DIRECT(gemm_wgmma_bf16_inflight_nt, 4, true, false, true)
KILN_WGMMA_DIRECT(gemm_wgmma_bf16_inflight_tn, 4, true, true, false)
KILN_WGMMA_DIRECT(gemm_wgmma_bf16_inflight_tt, 4, true, true, true)

KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_store_nn, 3, 1, 8, false, false)
KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_store_nt, 3, 1, 8, false, true)
KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_store_tn, 3, 1, 8, true, false)
KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_store_tt, 3, 1, 8, true, true)

KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_halves_nn, 4, 2, 8, false, false)
KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_halves_nt, 4, 2, 8, false, true)
KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_halves_tn, 4, 2, 8, true, false)
KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_halves_tt, 4, 2, 8, true, true)

KILN_WGMMA_CLUSTER(gemm_wgmma_bf16_cluster_nn, false, false)
KILN_WGMMA_CLUSTER(gemm_wgmma_bf16_cluster_nt, false, true)
KILN_WGMMA_CLUSTER(gemm_wgmma_bf16_cluster_tn, true, false)
KILN_WGMMA_CLUSTER(gemm_wgmma_bf16_cluster_tt, true, true)

KILN_WGMMA_CLUSTER_TMA_STORE(gemm_wgmma_bf16_cluster_tma_store_nn, 3, 1, false, false)
KILN_WGMMA_CLUSTER_TMA_STORE(gemm_wgmma_bf16_cluster_tma_store_nt, 3, 1, false, true)
KILN_WGMMA_CLUSTER_TMA_STORE(gemm_wgmma_bf16_cluster_tma_store_tn, 3, 1, true, false)
KILN_WGMMA_CLUSTER_TMA_STORE(gemm_wgmma_bf16_cluster_tma_store_tt, 3, 1, true, true)

KILN_WGMMA_CLUSTER_TMA_STORE(gemm_wgmma_bf16_cluster_tma_halves_nn, 4, 2, false, false)
KILN_WGMMA_CLUSTER_TMA_STORE(gemm_wgmma_bf16_cluster_tma_halves_nt, 4, 2, false, true)
KILN_WGMMA_CLUSTER_TMA_STORE(gemm_wgmma_bf16_cluster_tma_halves_tn, 4, 2, true, false)
KILN_WGMMA_CLUSTER_TMA_STORE(gemm_wgmma_bf16_cluster_tma_halves_tt, 4, 2, true, true)
