#line 1 "american_barrier.cu"
// Longstaff-Schwartz American barrier options, after american.cu in the same module (its
// path kernel, payoff and, for in-options, its exercise kernel are reused). The contract is
// kiln_core::finance::american::lsm_barrier; the CPU engine (kiln_cpu::finance::
// american_barrier) does the same operations in the same order, so the sums, coefficients
// and price are the CPU's to the bit. Every f64 operation is an explicit __d*_rn intrinsic.
//
// Layout: m, v as american.cu; hit[p] is path p's first knocked date (KILN_LSM_NEVER: never);
// w[p] is an in-option's cash flow W_p (f64; unused by out-options).
//
// Kernels, launched by launch_american_barrier.rs on kiln's one stream after lsm_paths_f32:
//   lsm_barrier_init_f64     one thread a path: hit[p] (the first date whose price is at or
//                            past the monitored level), then the last date's cash flows: out,
//                            V_p = rebate where knocked there; in, W_p = rebate if never
//                            knocked, V_p if knocked at the last date, else 0.
//   lsm_barrier_regress_f64  lsm_regress_f64 with the barrier: in, W_p = V_p where hit = d + 1,
//                            W_p *= df, V_p *= df, every in-the-money path summed; out, V_p =
//                            rebate where hit = d, else V_p * df, the live (hit > d)
//                            in-the-money paths summed.
//   lsm_barrier_exercise_f64 lsm_exercise_f64 on the live paths (hit > d): out-options.
//   lsm_barrier_final_in_f64 lsm_final_f64 of an in-option: y = (hit = 0 ? V_p : W_p) * df.

#define KILN_LSM_NEVER 0xffffffffu

#if !defined(KILN_ONLY) || defined(KILN_K_lsm_barrier_init_f64)
extern "C" __global__ void __launch_bounds__(256) lsm_barrier_init_f64(const float* __restrict__ m,
                                                                       double* __restrict__ v,
                                                                       double* __restrict__ w,
                                                                       u32* __restrict__ hit, u64 paths,
                                                                       u32 dates, double spot, double level,
                                                                       u32 up, u32 in, double rebate) {
    const u64 p = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= paths) return;
    u32 first = KILN_LSM_NEVER;
    for (u32 d = 0; d < dates; ++d) {
        const double s = __dmul_rn(spot, (double)m[(u64)d * paths + p]);
        if (up ? s >= level : s <= level) {
            first = d;
            break;
        }
    }
    hit[p] = first;
    const u32 last = dates - 1u;
    if (in) {
        w[p] = first == KILN_LSM_NEVER ? rebate : (first == last ? v[p] : 0.0);
    } else if (first == last) {
        v[p] = rebate;
    }
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_lsm_barrier_regress_f64)
extern "C" __global__ void __launch_bounds__(256) lsm_barrier_regress_f64(
    const float* __restrict__ m, double* __restrict__ v, double* __restrict__ w, const u32* __restrict__ hit,
    u64 paths, u32 d, double spot, double strike, u32 put, double df, u32 in, double rebate,
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
        u32 inm = 0u;
        if (p < end) {
            const u32 h = hit[p];
            double y;
            bool live;
            if (in) {
                // the in-option receives the vanilla at its knock (before the discount)
                w[p] = __dmul_rn(h == d + 1u ? v[p] : w[p], df);
                y = __dmul_rn(v[p], df);
                live = true;
            } else {
                y = h == d ? rebate : __dmul_rn(v[p], df);
                live = h > d;
            }
            v[p] = y;
            const double s = __dmul_rn(spot, (double)row[p]);
            if (live && kiln_lsm_payoff(s, strike, put) > 0.0) {
                inm = 1u;
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
        itm[warp][lane] = inm;
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

#if !defined(KILN_ONLY) || defined(KILN_K_lsm_barrier_exercise_f64)
extern "C" __global__ void __launch_bounds__(256) lsm_barrier_exercise_f64(
    const float* __restrict__ m, double* __restrict__ v, const u32* __restrict__ hit, u64 paths, u32 d,
    double spot, double strike, u32 put, double b0, double b1, double b2) {
    const u64 p = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= paths || hit[p] <= d) return;
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

#if !defined(KILN_ONLY) || defined(KILN_K_lsm_barrier_final_in_f64)
extern "C" __global__ void __launch_bounds__(256) lsm_barrier_final_in_f64(const double* __restrict__ w,
                                                                           const double* __restrict__ v,
                                                                           const u32* __restrict__ hit,
                                                                           u64 paths, double df,
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
        // knocked at date 0: the vanilla's cash flow from there on
        stage[warp][lane] = p < end ? __dmul_rn(hit[p] == 0u ? v[p] : w[p], df) : 0.0;
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
