#line 1 "american.cu"
// Longstaff-Schwartz American options (finance.cuh comes first: Philox, the portable f32
// math, kiln_normals4). The contract is kiln_core::finance::american::lsm; the CPU engine
// (kiln_cpu::finance::american) does the same operations in the same order, so the
// regression sums, and from them the coefficients and the price, are the CPU's to the bit.
// Every f64 operation is an explicit __d*_rn intrinsic (never contracted into an FMA).
//
// Layout: the path matrix m is date-major, m[d * paths + p] = exp_f32(x_{d+1}) of path p
// (f32); v[p] is the path's cash-flow value V_p (f64).
//
// Kernels, launched by launch_american.rs on kiln's one stream:
//   lsm_paths_f32     one thread a path: the European engine's stream (seed, option, p),
//                     x += fma(vol, z, drift) a date, m written a date at a time, V_p = the
//                     payoff at the last date.
//   lsm_regress_f64   one warp a canonical block of 1024 paths, 8 warps a CTA: V_p *= df,
//                     then the 8 regression sums of the block's in-the-money paths at date d,
//                     in path order (lane j < 8 adds sum j over the 32 staged paths of each
//                     round), out[block * 8 + j]. The host adds the blocks in block order.
//   lsm_exercise_f64  one thread a path: V_p = h where h > 0 and h > the fitted continuation.
//   lsm_final_f64     one warp a block: y = V_p * df; out[block * 2 + 0/1] = sum y, sum y^2
//                     in path order.

#define KILN_LSM_BLOCK 1024u
#define KILN_LSM_WARPS 8u
#define KILN_LSM_SUMS 8u

// The payoff at price s, exactly +0.0 out of the money (AmericanSpec::payoff).
__device__ __forceinline__ double kiln_lsm_payoff(double s, double strike, u32 put) {
    const double h = put ? __dsub_rn(strike, s) : __dsub_rn(s, strike);
    return h > 0.0 ? h : 0.0;
}

#if !defined(KILN_ONLY) || defined(KILN_K_lsm_paths_f32)
extern "C" __global__ void __launch_bounds__(256) lsm_paths_f32(u64 paths, u32 dates, u32 option, float drift,
                                                                float vol, double spot, double strike, u32 put,
                                                                const KilnKeys keys, float* __restrict__ m,
                                                                double* __restrict__ v) {
    const u64 p = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= paths) return;
    // Path indices are < 2^32 (LsmPlan::new).
    KilnStream ps = kiln_stream((u32)p, option, keys);
    float x = 0.0f, e = 1.0f;
    for (u32 first = 0; first < dates; first += 4u) {
        float z[4];
        kiln_normals4<false>(ps, keys, z);
        const u32 here = min(4u, dates - first);
#pragma unroll
        for (u32 j = 0; j < 4u; ++j) {
            if (j < here) {
                x = __fadd_rn(x, __fmaf_rn(vol, z[j], drift));
                e = kiln_exp(x);
                m[(u64)(first + j) * paths + p] = e;
            }
        }
    }
    v[p] = kiln_lsm_payoff(__dmul_rn(spot, (double)e), strike, put);
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_lsm_regress_f64)
extern "C" __global__ void __launch_bounds__(256) lsm_regress_f64(const float* __restrict__ m,
                                                                  double* __restrict__ v, u64 paths, u32 d,
                                                                  double spot, double strike, u32 put, double df,
                                                                  double* __restrict__ out) {
    __shared__ double stage[KILN_LSM_WARPS][KILN_LSM_SUMS][33];
    __shared__ u32 itm[KILN_LSM_WARPS][32];
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    const u64 nblocks = (paths + KILN_LSM_BLOCK - 1) / KILN_LSM_BLOCK;
    const u64 blk = (u64)blockIdx.x * KILN_LSM_WARPS + warp;
    if (blk >= nblocks) return;  // a whole warp; only __syncwarp below
    const float* row = m + (u64)d * paths;
    const u64 start = blk * KILN_LSM_BLOCK;
    const u64 end = min(start + KILN_LSM_BLOCK, paths);
    double acc = 0.0;  // lane j < 8 holds sum j
    for (u64 base = start; base < end; base += 32u) {
        const u64 p = base + lane;
        u32 in = 0u;
        if (p < end) {
            const double y = __dmul_rn(v[p], df);
            v[p] = y;
            const double s = __dmul_rn(spot, (double)row[p]);
            if (kiln_lsm_payoff(s, strike, put) > 0.0) {
                in = 1u;
                const double x = __ddiv_rn(s, strike);
                const double x2 = __dmul_rn(x, x);
                stage[warp][0][lane] = 1.0;
                stage[warp][1][lane] = x;
                stage[warp][2][lane] = x2;
                stage[warp][3][lane] = __dmul_rn(x2, x);
                stage[warp][4][lane] = __dmul_rn(x2, x2);
                stage[warp][5][lane] = y;
                stage[warp][6][lane] = __dmul_rn(x, y);
                stage[warp][7][lane] = __dmul_rn(x2, y);
            }
        }
        itm[warp][lane] = in;
        __syncwarp();
        if (lane < KILN_LSM_SUMS) {
            const u32 valid = (u32)min((u64)32u, end - base);
            for (u32 l = 0; l < valid; ++l) {
                if (itm[warp][l] != 0u) acc = __dadd_rn(acc, stage[warp][lane][l]);
            }
        }
        __syncwarp();
    }
    if (lane < KILN_LSM_SUMS) out[blk * KILN_LSM_SUMS + lane] = acc;
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_lsm_exercise_f64)
extern "C" __global__ void __launch_bounds__(256) lsm_exercise_f64(const float* __restrict__ m,
                                                                   double* __restrict__ v, u64 paths, u32 d,
                                                                   double spot, double strike, u32 put, double b0,
                                                                   double b1, double b2) {
    const u64 p = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= paths) return;
    const double s = __dmul_rn(spot, (double)m[(u64)d * paths + p]);
    const double h = kiln_lsm_payoff(s, strike, put);
    if (h > 0.0) {
        const double x = __ddiv_rn(s, strike);
        const double x2 = __dmul_rn(x, x);
        const double c = __dadd_rn(__dadd_rn(b0, __dmul_rn(b1, x)), __dmul_rn(b2, x2));
        if (h > c) v[p] = h;
    }
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_lsm_final_f64)
extern "C" __global__ void __launch_bounds__(256) lsm_final_f64(const double* __restrict__ v, u64 paths, double df,
                                                                double* __restrict__ out) {
    __shared__ double stage[KILN_LSM_WARPS][33];
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    const u64 nblocks = (paths + KILN_LSM_BLOCK - 1) / KILN_LSM_BLOCK;
    const u64 blk = (u64)blockIdx.x * KILN_LSM_WARPS + warp;
    if (blk >= nblocks) return;
    const u64 start = blk * KILN_LSM_BLOCK;
    const u64 end = min(start + KILN_LSM_BLOCK, paths);
    double acc = 0.0;  // lane 0: sum y, lane 1: sum y^2
    for (u64 base = start; base < end; base += 32u) {
        const u64 p = base + lane;
        stage[warp][lane] = p < end ? __dmul_rn(v[p], df) : 0.0;
        __syncwarp();
        if (lane < 2u) {
            const u32 valid = (u32)min((u64)32u, end - base);
            for (u32 l = 0; l < valid; ++l) {
                const double y = stage[warp][l];
                acc = __dadd_rn(acc, lane == 0u ? y : __dmul_rn(y, y));
            }
        }
        __syncwarp();
    }
    if (lane < 2u) out[blk * 2u + lane] = acc;
}
#endif
