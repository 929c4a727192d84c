// kiln's default wgmma kernels (the shared body is `gemm_wgmma.cuh`, prepended by the build):
// bf16 for each transpose pair read as stored, in the default variant and in `sync` (4
// stages, each wgmma group waited for, each consumer storing its accumulators straight to
// global memory); and the fp8 kernels.

#define KILN_WGMMA_KERNEL(NAME, STAGES, INFLIGHT, TA, TB)                                               \
    extern "C" __global__ void __launch_bounds__(384, 1)                                                \
        NAME(const __grid_constant__ KilnTmaDesc map_a, const __grid_constant__ KilnTmaDesc map_b,      \
             unsigned short* __restrict__ c, int m, int n, int k) {                                     \
        gemm_wgmma_body<STAGES, INFLIGHT, TA, TB, 0>(&map_a, &map_b, nullptr, c, m, n, k, 1.0f);        \
    }

// fp8 (A m x k, B n x k, both stored K-major): C = scale * A B^T in bf16.
#define KILN_WGMMA_FP8_KERNEL(NAME, ELEM)                                                               \
    extern "C" __global__ void __launch_bounds__(384, 1)                                                \
        NAME(const __grid_constant__ KilnTmaDesc map_a, const __grid_constant__ KilnTmaDesc map_b,      \
             unsigned short* __restrict__ c, int m, int n, int k, float scale) {                        \
        gemm_wgmma_body<4, false, false, true, ELEM>(&map_a, &map_b, nullptr, c, m, n, k, scale);       \
    }

// The default (`tma_halves_g16`): 4 stages, the TMA-store epilogue in two passes of 128
// columns through a 16 KiB buffer a consumer, tiles walked in groups of 16 tile rows. Even
// with cuBLAS at 8192^3 on an H100 and 6-7% faster than `sync` (docs/performance.md).
KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_halves_g16_nn, 4, 2, 16, false, false)
KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_halves_g16_nt, 4, 2, 16, false, true)
KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_halves_g16_tn, 4, 2, 16, true, false)
KILN_WGMMA_TMA_STORE(gemm_wgmma_bf16_tma_halves_g16_tt, 4, 2, 16, true, true)

// `sync`: each wgmma group waited for, direct stores; what the default falls back to where
// TMA cannot store C (n not a multiple of 8, or C not 16-byte aligned).
KILN_WGMMA_KERNEL(gemm_wgmma_bf16_nn, 4, false, false, false)
KILN_WGMMA_KERNEL(gemm_wgmma_bf16_nt, 4, false, false, true)
KILN_WGMMA_KERNEL(gemm_wgmma_bf16_tn, 4, false, true, false)
KILN_WGMMA_KERNEL(gemm_wgmma_bf16_tt, 4, false, true, true)
KILN_WGMMA_FP8_KERNEL(gemm_wgmma_e4m3_nt, 1)
KILN_WGMMA_FP8_KERNEL(gemm_wgmma_e5m2_nt, 2)
