#line 1 "heston.cu"
// Monte Carlo under Heston: Andersen's QE scheme (kiln_core::finance::heston::qe), one path
// per thread, bitwise the CPU engine's (kiln_cpu::finance::heston). finance.cuh comes first
// (kernels.rs prepends it): Philox (kiln_philox10), the portable f32 math (kiln_uniform,
// kiln_ln, kiln_exp, kiln_box_muller) and the exactness rules. Every f32 and f64 operation
// below is the CPU's, in the CPU's order, through the __*_rn intrinsics (never contracted or
// reassociated); __fmaf_rn is the CPU's mul_add, __fsqrt_rn its IEEE sqrt.
//
// Launch shape (as finance.cu's kiln_mc_blocks): one warp per (option, canonical block of
// 1024 samples), 8 warps per 256-thread CTA, grid-stride over items; lane l simulates
// samples start + 32 i + l; after each round of 32 the warp stages the outputs in shared
// memory and lanes 0..6 each add one of the 7 sums in sample order (y, yy, c, cc, yc, and
// delta = vega = 0), so a block's sums are BlockSums::push's, bit for bit. finance.cu's
// mc_combine_f64 then adds each option's blocks in block order.

// u32 words per option (launch_heston.rs): is_put, asian, fixings, per_fixing, stream
// option id, then the f32 bits of v0, theta, ekt, c1, c2, rqdt, k0, k1, k2, k3, k4, a,
// half_k3 (QeConsts).
#define HESTON_OPT_U 18
// f64 words per option: spot, strike, discount, control_mean, fixings.
#define HESTON_OPT_D 5
#define HESTON_STREAM 2u
#define HESTON_BLOCK_SAMPLES 1024u
#define HESTON_WARPS 8
#define HESTON_SUMS 7

struct HestonQe {
    float v0, theta, ekt, c1, c2, rqdt, k0, k1, k2, k3, k4, a, half_k3;
};

// One QE step (kiln_core qe_step): (v, x) -> (v', x') with the step's Philox words.
__device__ __forceinline__ void heston_qe_step(const HestonQe& c, float& v, float& x, u32 w0, u32 w1, u32 w2) {
    float zv, zx;
    kiln_box_muller(w0, w1, zv, zx);
    const float u = kiln_uniform(w2);
    const float m = __fmaf_rn(__fsub_rn(v, c.theta), c.ekt, c.theta);
    const float s2 = __fmaf_rn(v, c.c1, c.c2);
    const float psi = fmaxf(__fdiv_rn(s2, __fmul_rn(m, m)), KILN_FB(0x0d800000)); // PSI_MIN = 2^-100
    float vn;
    float corr = 0.0f;
    bool corrected;
    if (psi <= 1.5f) {
        // quadratic: V' = a (b + z_v)^2
        const float t = __fdiv_rn(2.0f, psi);
        const float tm1 = __fsub_rn(t, 1.0f);
        const float b2 = __fmaf_rn(__fsqrt_rn(t), __fsqrt_rn(tm1), tm1);
        const float a = __fdiv_rn(m, __fadd_rn(1.0f, b2));
        const float b = __fsqrt_rn(b2);
        const float bz = __fadd_rn(b, zv);
        vn = __fmul_rn(a, __fmul_rn(bz, bz));
        const float qq = __fmaf_rn(__fmul_rn(-2.0f, c.a), a, 1.0f);
        corrected = qq > 0.0f;
        if (corrected) {
            corr = __fsub_rn(__fmul_rn(0.5f, kiln_ln(qq)), __fdiv_rn(__fmul_rn(__fmul_rn(c.a, b2), a), qq));
        }
    } else {
        // exponential: V' = 0 with probability p, else exponential with rate beta
        const float omp = __fdiv_rn(2.0f, __fadd_rn(psi, 1.0f));
        const float p = __fsub_rn(1.0f, omp);
        const float beta = __fdiv_rn(omp, m);
        if (u <= p) {
            vn = 0.0f;
        } else {
            vn = __fdiv_rn(kiln_ln(__fdiv_rn(omp, __fsub_rn(1.0f, u))), beta);
        }
        corrected = beta > c.a;
        if (corrected) {
            corr = -kiln_ln(__fadd_rn(p, __fdiv_rn(__fmul_rn(beta, omp), __fsub_rn(beta, c.a))));
        }
    }
    vn = fmaxf(vn, 0.0f);
    const float d0 = corrected ? corr : c.k0;
    const float d1 = corrected ? -c.half_k3 : c.k1;
    float dx = __fadd_rn(c.rqdt, d0);
    dx = __fmaf_rn(d1, v, dx);
    dx = __fmaf_rn(c.k2, vn, dx);
    const float var = __fmaf_rn(c.k3, v, __fmul_rn(c.k4, vn));
    dx = __fmaf_rn(__fsqrt_rn(var), zx, dx);
    x = __fadd_rn(x, dx);
    v = vn;
}

struct HestonOut {
    double y, c;
};

// One path and its payoff (kiln_core heston_sample).
__device__ __forceinline__ HestonOut heston_sample(const u32* __restrict__ up, const double* __restrict__ dp,
                                                   const HestonQe& qe, u32 sample, const KilnKeys& ks) {
    const bool put = up[0] != 0u;
    const bool asian = up[1] != 0u;
    const u32 fixings = up[2], per_fixing = up[3], option = up[4];
    float v = qe.v0, x = 0.0f;
    double sum = 0.0;
    u32 step = 0u;
    for (u32 f = 0; f < fixings; ++f) {
        for (u32 j = 0; j < per_fixing; ++j) {
            u32 c0 = step, c1 = sample, c2 = option, c3 = HESTON_STREAM;
            kiln_philox10(c0, c1, c2, c3, ks);
            heston_qe_step(qe, v, x, c0, c1, c2);
            step += 1u;
        }
        if (asian) sum = __dadd_rn(sum, (double)kiln_exp(x));
    }
    const double spot = dp[0], strike = dp[1], df = dp[2], cm = dp[3], n = dp[4];
    const double st = __dmul_rn(spot, (double)kiln_exp(x));
    const double under = asian ? __ddiv_rn(__dmul_rn(spot, sum), n) : st;
    const double pay = put ? fmax(__dsub_rn(strike, under), 0.0) : fmax(__dsub_rn(under, strike), 0.0);
    HestonOut out;
    out.y = __dmul_rn(df, pay);
    out.c = __dsub_rn(__dmul_rn(df, st), cm);
    return out;
}

// Per-(option, block) sums. Items: n_options x launch_blocks; item i is row
// i / launch_blocks of the parameter arrays, block first_block + i % launch_blocks.
// out[i * 7 + j], j = y, yy, c, cc, yc, delta (0), vega (0).
#if !defined(KILN_ONLY) || defined(KILN_K_heston_blocks_f64)
extern "C" __global__ void __launch_bounds__(256) heston_blocks_f64(
    const u32* __restrict__ uparams, const double* __restrict__ dparams, u32 n_options, u64 first_block,
    u64 launch_blocks, u64 samples, const KilnKeys keys, double* __restrict__ out) {
    // Rows y, c, zeros, ones; 33 columns against bank conflicts.
    __shared__ double stage[HESTON_WARPS][4][33];
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
    for (u64 item = (u64)blockIdx.x * HESTON_WARPS + warp; item < items;
         item += (u64)gridDim.x * HESTON_WARPS) {
        const u64 row = item / launch_blocks;
        const u64 block = first_block + item % launch_blocks;
        const u32* up = uparams + row * HESTON_OPT_U;
        const double* dp = dparams + row * HESTON_OPT_D;
        HestonQe qe;
        qe.v0 = __uint_as_float(up[5]);
        qe.theta = __uint_as_float(up[6]);
        qe.ekt = __uint_as_float(up[7]);
        qe.c1 = __uint_as_float(up[8]);
        qe.c2 = __uint_as_float(up[9]);
        qe.rqdt = __uint_as_float(up[10]);
        qe.k0 = __uint_as_float(up[11]);
        qe.k1 = __uint_as_float(up[12]);
        qe.k2 = __uint_as_float(up[13]);
        qe.k3 = __uint_as_float(up[14]);
        qe.k4 = __uint_as_float(up[15]);
        qe.a = __uint_as_float(up[16]);
        qe.half_k3 = __uint_as_float(up[17]);
        const u64 start = block * HESTON_BLOCK_SAMPLES;
        const u64 end = min(start + HESTON_BLOCK_SAMPLES, samples);
        double acc = 0.0; // lane j < 7 holds sum j
        for (u64 base = start; base < end; base += 32u) {
            const u64 s = base + lane;
            HestonOut v = {0.0, 0.0};
            // Sample indices are < 2^32 (McParams::validate).
            if (s < end) v = heston_sample(up, dp, qe, (u32)s, keys);
            stage[warp][0][lane] = v.y;
            stage[warp][1][lane] = v.c;
            __syncwarp();
            if (lane < HESTON_SUMS) {
                const u32 valid = (u32)min((u64)32u, end - base);
                const double* p = &stage[warp][pr][0];
                const double* q = &stage[warp][qr][0];
                for (u32 l = 0; l < valid; ++l) acc = __dadd_rn(acc, __dmul_rn(p[l], q[l]));
            }
            __syncwarp();
        }
        if (lane < HESTON_SUMS) out[item * HESTON_SUMS + lane] = acc;
    }
}
#endif

// Self-test: one QE step per input from (v[i], x[i]) with the words of counter
// [i, w[i], 7, HESTON_STREAM] under keys, and the option row `up` (its QeConsts):
// out[2 i] = v' bits, out[2 i + 1] = x' bits.
#if !defined(KILN_ONLY) || defined(KILN_K_heston_step_selftest_f32)
extern "C" __global__ void heston_step_selftest_f32(const u32* __restrict__ up, const float* __restrict__ v,
                                                    const float* __restrict__ x, const u32* __restrict__ w, u32 n,
                                                    const KilnKeys keys, u32* __restrict__ out) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    HestonQe qe;
    qe.v0 = __uint_as_float(up[5]);
    qe.theta = __uint_as_float(up[6]);
    qe.ekt = __uint_as_float(up[7]);
    qe.c1 = __uint_as_float(up[8]);
    qe.c2 = __uint_as_float(up[9]);
    qe.rqdt = __uint_as_float(up[10]);
    qe.k0 = __uint_as_float(up[11]);
    qe.k1 = __uint_as_float(up[12]);
    qe.k2 = __uint_as_float(up[13]);
    qe.k3 = __uint_as_float(up[14]);
    qe.k4 = __uint_as_float(up[15]);
    qe.a = __uint_as_float(up[16]);
    qe.half_k3 = __uint_as_float(up[17]);
    u32 c0 = i, c1 = w[i], c2 = 7u, c3 = HESTON_STREAM;
    kiln_philox10(c0, c1, c2, c3, keys);
    float vv = v[i], xx = x[i];
    heston_qe_step(qe, vv, xx, c0, c1, c2);
    out[2 * i] = __float_as_uint(vv);
    out[2 * i + 1] = __float_as_uint(xx);
}
#endif
