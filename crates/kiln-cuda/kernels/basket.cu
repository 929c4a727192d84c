#line 1 "basket.cu"
// Basket options by Monte Carlo: N correlated GBM assets, one step to maturity
// (kiln_core::finance::basket::mc), one path per thread, bitwise the CPU engine's
// (kiln_cpu::finance::basket). finance.cuh comes first (kernels.rs prepends it): Philox
// (kiln_philox10), the portable f32 math (kiln_exp, kiln_box_muller) and the exactness rules.
// Every f32 and f64 operation below is the CPU's, in the CPU's order, through the __*_rn
// intrinsics (never contracted or reassociated); __fmaf_rn is the CPU's mul_add.
//
// Launch shape (as heston.cu): one warp per (option, canonical block of 1024 samples), 8
// warps per 256-thread CTA, grid-stride over items; lane l simulates samples start + 32 i + l;
// after each round of 32 the warp stages the outputs in shared memory and lanes 0..6 each add
// one of the 7 sums in sample order (y, yy, c, cc, yc, and delta = vega = 0), so a block's
// sums are BlockSums::push's, bit for bit. finance.cu's mc_combine_f64 then adds each
// option's blocks in block order.
//
// Parameters (launch_basket.rs), per option:
//   u32 row (BASKET_OPT_U words): is_put, arithmetic, n (assets), stream option id,
//       f32 offset, f64 offset
//   f32 data at the f32 offset: drift[n], vol[n], geo_weight[n], chol[n (n + 1) / 2]
//       (L rounded to f32, lower triangle packed by rows: L_ij at i (i + 1) / 2 + j)
//   f64 data at the f64 offset: strike, discount, geo_spot, control_mean, spot_weight[n]
// A path's N normals live in a per-thread array (local memory): N <= 64.
#define BASKET_OPT_U 6
#define BASKET_MAX_ASSETS 64
#define BASKET_STREAM 3u
#define BASKET_BLOCK_SAMPLES 1024u
#define BASKET_WARPS 8
#define BASKET_SUMS 7

// One path from the normals z (mirror: the volatilities negated), kiln_core's `path`:
// y = discount * payoff(A or G), c = discount * payoff(G) - control_mean.
__device__ __forceinline__ void basket_path(const float* __restrict__ fp, const double* __restrict__ dp, u32 n,
                                            bool put, bool arith, const float* z, bool mirror, double& y,
                                            double& c) {
    const float* drift = fp;
    const float* vol = fp + n;
    const float* geo = fp + 2u * n;
    const float* chol = fp + 3u * n;
    const double strike = dp[0], df = dp[1], geo_spot = dp[2], cm = dp[3];
    const double* sw = dp + 4;
    double a = 0.0;
    float glog = 0.0f;
    u32 row = 0u;
    for (u32 i = 0; i < n; ++i) {
        float u = 0.0f;
        for (u32 j = 0; j <= i; ++j) u = __fadd_rn(u, __fmul_rn(chol[row + j], z[j]));
        row += i + 1u;
        const float v = mirror ? -vol[i] : vol[i];
        const float x = __fmaf_rn(v, u, drift[i]);
        a = __dadd_rn(a, __dmul_rn(sw[i], (double)kiln_exp(x)));
        glog = __fadd_rn(glog, __fmul_rn(geo[i], x));
    }
    const double g = __dmul_rn(geo_spot, (double)kiln_exp(glog));
    const double under = arith ? a : g;
    const double pay = put ? fmax(__dsub_rn(strike, under), 0.0) : fmax(__dsub_rn(under, strike), 0.0);
    const double gpay = put ? fmax(__dsub_rn(strike, g), 0.0) : fmax(__dsub_rn(g, strike), 0.0);
    y = __dmul_rn(df, pay);
    c = __dsub_rn(__dmul_rn(df, gpay), cm);
}

struct BasketOut {
    double y, c;
};

// Sample `sample` of the option whose u32 row is `up` (kiln_core's basket_sample).
__device__ __forceinline__ BasketOut basket_sample(const u32* __restrict__ up, const float* __restrict__ fparams,
                                                   const double* __restrict__ dparams, u32 sample, bool antithetic,
                                                   const KilnKeys& ks) {
    const bool put = up[0] != 0u;
    const bool arith = up[1] != 0u;
    const u32 n = min(up[2], (u32)BASKET_MAX_ASSETS);
    const u32 option = up[3];
    const float* fp = fparams + up[4];
    const double* dp = dparams + up[5];
    float z[BASKET_MAX_ASSETS];
    for (u32 b = 0; 4u * b < n; ++b) {
        u32 c0 = b, c1 = sample, c2 = option, c3 = BASKET_STREAM;
        kiln_philox10(c0, c1, c2, c3, ks);
        float zz[4];
        kiln_box_muller(c0, c1, zz[0], zz[1]);
        kiln_box_muller(c2, c3, zz[2], zz[3]);
        for (u32 k = 0; k < 4u; ++k) {
            if (4u * b + k < n) z[4u * b + k] = zz[k];
        }
    }
    BasketOut out;
    basket_path(fp, dp, n, put, arith, z, false, out.y, out.c);
    if (antithetic) {
        double ym, cm;
        basket_path(fp, dp, n, put, arith, z, true, ym, cm);
        out.y = __dmul_rn(0.5, __dadd_rn(out.y, ym));
        out.c = __dmul_rn(0.5, __dadd_rn(out.c, cm));
    }
    return out;
}

// Per-(option, block) sums. Items: n_options x launch_blocks; item i is u32 row
// i / launch_blocks of `uparams` (which starts at the launch's first option), block
// first_block + i % launch_blocks. out[i * 7 + j], j = y, yy, c, cc, yc, delta (0), vega (0).
#if !defined(KILN_ONLY) || defined(KILN_K_basket_blocks_f64)
extern "C" __global__ void __launch_bounds__(256) basket_blocks_f64(
    const u32* __restrict__ uparams, const float* __restrict__ fparams, const double* __restrict__ dparams,
    u32 n_options, u64 first_block, u64 launch_blocks, u64 samples, u32 antithetic, const KilnKeys keys,
    double* __restrict__ out) {
    // Rows y, c, zeros, ones; 33 columns against bank conflicts.
    __shared__ double stage[BASKET_WARPS][4][33];
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    stage[warp][2][lane] = 0.0;
    stage[warp][3][lane] = 1.0;
    // Lane j < 7 adds p_j * q_j a sample: y*1, y*y, c*1, c*c, y*c, 0*1, 0*1 (x * 1.0 is x
    // exactly, 0 * 1 is 0, so the sums are BlockSums::push's).
    const u32 prow[7] = {0u, 0u, 1u, 1u, 0u, 2u, 2u};
    const u32 qrow[7] = {3u, 0u, 3u, 1u, 1u, 3u, 3u};
    const u32 pr = prow[min(lane, 6u)];
    const u32 qr = qrow[min(lane, 6u)];
    __syncwarp();
    const u64 items = (u64)n_options * launch_blocks;
    for (u64 item = (u64)blockIdx.x * BASKET_WARPS + warp; item < items;
         item += (u64)gridDim.x * BASKET_WARPS) {
        const u64 row = item / launch_blocks;
        const u64 block = first_block + item % launch_blocks;
        const u32* up = uparams + row * BASKET_OPT_U;
        const u64 start = block * BASKET_BLOCK_SAMPLES;
        const u64 end = min(start + BASKET_BLOCK_SAMPLES, samples);
        double acc = 0.0; // lane j < 7 holds sum j
        for (u64 base = start; base < end; base += 32u) {
            const u64 s = base + lane;
            BasketOut v = {0.0, 0.0};
            // Sample indices are < 2^32 (McParams::validate).
            if (s < end) v = basket_sample(up, fparams, dparams, (u32)s, antithetic != 0u, keys);
            stage[warp][0][lane] = v.y;
            stage[warp][1][lane] = v.c;
            __syncwarp();
            if (lane < BASKET_SUMS) {
                const u32 valid = (u32)min((u64)32u, end - base);
                const double* p = &stage[warp][pr][0];
                const double* q = &stage[warp][qr][0];
                for (u32 l = 0; l < valid; ++l) acc = __dadd_rn(acc, __dmul_rn(p[l], q[l]));
            }
            __syncwarp();
        }
        if (lane < BASKET_SUMS) out[item * BASKET_SUMS + lane] = acc;
    }
}
#endif

// Self-test: samples first_sample .. first_sample + count of the option whose u32 row is
// `uparams` (one row): out[2 i] = y, out[2 i + 1] = c of sample first_sample + i, for a
// sample-by-sample comparison with kiln_core's basket_sample.
#if !defined(KILN_ONLY) || defined(KILN_K_basket_samples_f64)
extern "C" __global__ void basket_samples_f64(const u32* __restrict__ uparams, const float* __restrict__ fparams,
                                              const double* __restrict__ dparams, u32 first_sample, u32 count,
                                              u32 antithetic, const KilnKeys keys, double* __restrict__ out) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const BasketOut v = basket_sample(uparams, fparams, dparams, first_sample + i, antithetic != 0u, keys);
    out[2u * i] = v.y;
    out[2u * i + 1u] = v.c;
}
#endif
