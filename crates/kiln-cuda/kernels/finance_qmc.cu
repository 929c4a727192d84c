#line 1 "finance_qmc.cu"
// Quasi-Monte Carlo option pricing (finance.cuh comes first): randomised Sobol points, the
// inverse normal CDF and a Brownian bridge, then the Philox kernels' path recurrence,
// states and payoffs. The contract is kiln_core::finance::qmc's; every operation below is
// the CPU's (kiln-cpu's finance/qmc.rs) in the CPU's order, through round-to-nearest
// intrinsics that are never contracted, so block sums are bitwise the CPU's.
//
// Launch shape: one CTA of 256 threads per (option, canonical block) (kiln_qmc_blocks),
// the 7 sums staged through shared memory and added in sample order. Options of one launch share the step count (the bridge and the
// dimensions). Each thread keeps the bridge's W[0..=steps] in a local array of
// KILN_QMC_MAX + 1 floats (kiln_core::finance::QMC_MAX_STEPS).

#define KILN_QMC_MAX 1024

// ---- inverse normal CDF (kiln_core::finance::invnorm): Acklam in f64, fdlibm's log ----

#define KILN_DB(bits) __longlong_as_double((long long)(bits##ull))

__device__ __forceinline__ double kiln_ln_f64(double x) {
    const unsigned long long bits = (unsigned long long)__double_as_longlong(x);
    u32 hx = (u32)(bits >> 32);
    hx += 0x3ff00000u - 0x3fe6a09eu;
    const int k = (int)(hx >> 20) - 0x3ff;
    hx = (hx & 0x000fffffu) + 0x3fe6a09eu;
    const double m = __longlong_as_double((long long)(((unsigned long long)hx << 32) | (bits & 0xffffffffull)));
    const double f = __dsub_rn(m, 1.0);
    const double hfsq = __dmul_rn(__dmul_rn(0.5, f), f);
    const double s = __ddiv_rn(f, __dadd_rn(2.0, f));
    const double z = __dmul_rn(s, s);
    const double w = __dmul_rn(z, z);
    const double t1 = __dmul_rn(
        w, __dadd_rn(KILN_DB(0x3fd999999997fa04),
                     __dmul_rn(w, __dadd_rn(KILN_DB(0x3fcc71c51d8e78af), __dmul_rn(w, KILN_DB(0x3fc39a09d078c69f))))));
    const double t2 = __dmul_rn(
        z, __dadd_rn(KILN_DB(0x3fe5555555555593),
                     __dmul_rn(w, __dadd_rn(KILN_DB(0x3fd2492494229359),
                                            __dmul_rn(w, __dadd_rn(KILN_DB(0x3fc7466496cb03de),
                                                                   __dmul_rn(w, KILN_DB(0x3fc2f112df3e5244))))))));
    const double r = __dadd_rn(t2, t1);
    const double dk = (double)k;
    double y = __dmul_rn(s, __dadd_rn(hfsq, r));
    y = __dadd_rn(y, __dmul_rn(dk, KILN_DB(0x3dea39ef35793c76)));
    y = __dsub_rn(y, hfsq);
    y = __dadd_rn(y, f);
    return __dadd_rn(y, __dmul_rn(dk, KILN_DB(0x3fe62e42fee00000)));
}

__device__ __forceinline__ double kiln_inv_norm_tail(double p) {
    const double q = __dsqrt_rn(__dmul_rn(-2.0, kiln_ln_f64(p)));
    double num = -7.784894002430293e-03;
    num = __dadd_rn(__dmul_rn(num, q), -3.223964580411365e-01);
    num = __dadd_rn(__dmul_rn(num, q), -2.400758277161838e+00);
    num = __dadd_rn(__dmul_rn(num, q), -2.549732539343734e+00);
    num = __dadd_rn(__dmul_rn(num, q), 4.374664141464968e+00);
    num = __dadd_rn(__dmul_rn(num, q), 2.938163982698783e+00);
    double den = 7.784695709041462e-03;
    den = __dadd_rn(__dmul_rn(den, q), 3.224671290700398e-01);
    den = __dadd_rn(__dmul_rn(den, q), 2.445134137142996e+00);
    den = __dadd_rn(__dmul_rn(den, q), 3.754408661907416e+00);
    den = __dadd_rn(__dmul_rn(den, q), 1.0);
    return __ddiv_rn(num, den);
}

// Acklam's quantile at u in (0, 1), f64 (kiln_core::finance::invnorm::inv_norm_acklam).
__device__ __forceinline__ double kiln_inv_norm_f64(double u) {
    const double p_low = 0.02425;
    if (u < p_low) return kiln_inv_norm_tail(u);
    if (u > 1.0 - p_low) return -kiln_inv_norm_tail(__dsub_rn(1.0, u));
    const double q = __dsub_rn(u, 0.5);
    const double r = __dmul_rn(q, q);
    double num = -3.969683028665376e+01;
    num = __dadd_rn(__dmul_rn(num, r), 2.209460984245205e+02);
    num = __dadd_rn(__dmul_rn(num, r), -2.759285104469687e+02);
    num = __dadd_rn(__dmul_rn(num, r), 1.383577518672690e+02);
    num = __dadd_rn(__dmul_rn(num, r), -3.066479806614716e+01);
    num = __dadd_rn(__dmul_rn(num, r), 2.506628277459239e+00);
    num = __dmul_rn(num, q);
    double den = -5.447609879822406e+01;
    den = __dadd_rn(__dmul_rn(den, r), 1.615858368580409e+02);
    den = __dadd_rn(__dmul_rn(den, r), -1.556989798598866e+02);
    den = __dadd_rn(__dmul_rn(den, r), 6.680131188771972e+01);
    den = __dadd_rn(__dmul_rn(den, r), -1.328068155288572e+01);
    den = __dadd_rn(__dmul_rn(den, r), 1.0);
    return __ddiv_rn(num, den);
}

// uniform_f64(w) = (2w + 1) 2^-33 (exact), then the quantile rounded once to f32.
__device__ __forceinline__ float kiln_inv_norm(u32 w) {
    const double u = __dmul_rn(__ull2double_rn(((unsigned long long)w << 1) | 1ull), 1.16415321826934814453125e-10);
    return __double2float_rn(kiln_inv_norm_f64(u));
}

// Coordinate d of Sobol point i (Gray-code order): XOR of v[d][k] over the bits of i ^ (i >> 1).
__device__ __forceinline__ u32 kiln_sobol(const u32* __restrict__ dirs, u32 i, u32 d) {
    u32 g = i ^ (i >> 1);
    const u32* v = dirs + (u64)d * 32u;
    u32 x = 0u;
    while (g != 0u) {
        x ^= __ldg(v + (__ffs(g) - 1));
        g &= g - 1u;
    }
    return x;
}

// The same XOR over bits 0..nbits-1 (i < 2^nbits) as a fixed, unrolled loop of predicated
// loads: all of them in flight at once, where the loop above waits for each load before the
// next (a dependent chain of ~nbits/2 cache latencies a coordinate, 256 coordinates a
// sample). XOR is associative and commutative: the same bits.
__device__ __forceinline__ u32 kiln_sobol_bits(const u32* __restrict__ dirs, u32 i, u32 d, u32 nbits) {
    const u32 g = i ^ (i >> 1);
    const u32* v = dirs + (u64)d * 32u;
    u32 x = 0u;
#pragma unroll 8
    for (u32 b = 0; b < nbits; ++b) x ^= ((g >> b) & 1u) ? __ldg(v + b) : 0u;
    return x;
}

// What a launch's samples share: the direction numbers of dims dimensions, R x dims shifts,
// the bridge's nodes (target, left, right) and weights (a, b, c), 3 per node.
struct KilnQmc {
    const u32* dirs;
    const u32* shifts;
    const u32* nodes;
    const float* weights;
    u32 dims;
    u64 points;
};

template <int STYLE, bool ANTI>
__device__ __forceinline__ KilnOut kiln_qmc_sample(const KilnPath& o, const u32* __restrict__ up,
                                                   const double* __restrict__ dp, u64 s, const KilnQmc& q) {
    float w[KILN_QMC_MAX + 1];
    const u32 r = (u32)(s / q.points);
    const u32 i = (u32)(s % q.points);  // points per replicate <= 2^32 (McParams::validate)
    const u32* sh = q.shifts + (u64)r * q.dims;
    const u32 nbits = q.points > 1 ? 64u - (u32)__clzll((long long)(q.points - 1)) : 0u;
    w[0] = 0.0f;
    for (u32 j = 0; j < q.dims; ++j) {
        const float z = kiln_inv_norm(kiln_sobol_bits(q.dirs, i, j, nbits) ^ __ldg(sh + j));
        const u32 t = __ldg(q.nodes + 3u * j), l = __ldg(q.nodes + 3u * j + 1u), rr = __ldg(q.nodes + 3u * j + 2u);
        const float mid = __fmaf_rn(__ldg(q.weights + 3u * j), w[l], __fmul_rn(__ldg(q.weights + 3u * j + 1u), w[rr]));
        w[t] = __fmaf_rn(__ldg(q.weights + 3u * j + 2u), z, mid);
    }
    float x = 0.0f, xa = 0.0f;
    KilnState<STYLE, false> st, sta;
    st.init();
    sta.init();
    const u32 full = o.steps / 4u, rest = o.steps % 4u;
    for (u32 b = 0; b < full; ++b) {
        float z[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) z[k] = __fsub_rn(w[4u * b + k + 1u], w[4u * b + k]);
        kiln_steps<STYLE, ANTI, false, 4>(o, b * 4u, z, x, xa, st, sta, 4u);
    }
    if (rest != 0u) {
        float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (u32 k = 0; k < rest; ++k) z[k] = __fsub_rn(w[4u * full + k + 1u], w[4u * full + k]);
        kiln_steps<STYLE, ANTI, false, 0>(o, full * 4u, z, x, xa, st, sta, rest);
    }
    const KilnOpt oo = kiln_load_opt(up, dp);
    KilnOut out = st.finish(oo, x);
    if (ANTI) {
        const KilnOut m = sta.finish(oo, xa);
        out.y = __dmul_rn(0.5, __dadd_rn(out.y, m.y));
        out.c = __dmul_rn(0.5, __dadd_rn(out.c, m.c));
        out.delta = __dmul_rn(0.5, __dadd_rn(out.delta, m.delta));
        out.vega = __dmul_rn(0.5, __dadd_rn(out.vega, m.vega));
    }
    return out;
}

#define KILN_QMC_BLOCK 1024u
#define KILN_QMC_THREADS 256
#define KILN_QMC_SUMS 7

// Per-(option, block) sums: one CTA a canonical block (not one warp, as finance.cu's
// kiln_mc_blocks): a QMC sample costs ~30 times a Philox one (a Sobol point and an f64
// quantile per dimension), so a warp a block left a 2^18-sample round with 256 warps on
// 132 SMs, 12 ms for what the device does in ~2. Thread t simulates samples start + t,
// start + t + 256, ...; the four outputs of every sample are staged in shared memory and
// the 7 sums added by lanes 0..6 in sample order, exactly as the warp form and the CPU do.
template <int STYLE>
__device__ __forceinline__ void kiln_qmc_blocks(const u32* __restrict__ uparams, const double* __restrict__ dparams,
                                                u32 n_options, u64 first_block, u64 launch_blocks, u64 samples,
                                                const KilnQmc& q, u32 antithetic, double* __restrict__ out) {
    __shared__ double stage[4][KILN_QMC_BLOCK];
    const u32 t = threadIdx.x;
    const u32 pr = (0x3201100u >> (4u * min(t, 6u))) & 0xfu;
    const u32 qr = (0x4411404u >> (4u * min(t, 6u))) & 0xfu;
    const u64 items = (u64)n_options * launch_blocks;
    for (u64 item = blockIdx.x; item < items; item += gridDim.x) {
        const u64 row = item / launch_blocks;
        const u64 block = first_block + item % launch_blocks;
        const u32* up = uparams + row * KILN_OPT_U;
        const double* dp = dparams + row * KILN_OPT_D;
        KilnPath o;
        o.steps = up[2];
        o.option = up[3];
        o.drift = __uint_as_float(up[4]);
        o.vol = __uint_as_float(up[5]);
        o.logb = __uint_as_float(up[6]);
        o.vddt = __uint_as_float(up[7]);
        const u64 start = block * KILN_QMC_BLOCK;
        const u32 valid = (u32)min((u64)KILN_QMC_BLOCK, samples - start);
        for (u32 k = t; k < valid; k += KILN_QMC_THREADS) {
            const KilnOut v = antithetic ? kiln_qmc_sample<STYLE, true>(o, up, dp, start + k, q)
                                         : kiln_qmc_sample<STYLE, false>(o, up, dp, start + k, q);
            stage[0][k] = v.y;
            stage[1][k] = v.c;
            stage[2][k] = v.delta;
            stage[3][k] = v.vega;
        }
        __syncthreads();
        if (t < KILN_QMC_SUMS) {
            // qr 4 is the warp form's row of ones (the plain sums; x * 1.0 is x exactly),
            // selected per element so the 7 lanes run one loop, not two
            const bool ones = qr == 4u;
            const double* a = stage[pr];
            const double* b = stage[qr & 3u];
            double acc = 0.0;
#pragma unroll 4
            for (u32 l = 0; l < valid; ++l) acc = __dadd_rn(acc, __dmul_rn(a[l], ones ? 1.0 : b[l]));
            out[item * KILN_QMC_SUMS + t] = acc;
        }
        __syncthreads();
    }
}

#define KILN_QMC_KERNEL(NAME, STYLE)                                                                      \
    extern "C" __global__ void __launch_bounds__(KILN_QMC_THREADS) NAME(                                               \
        const u32* __restrict__ uparams, const double* __restrict__ dparams, u32 n_options, u64 first_block, \
        u64 launch_blocks, u64 samples, const u32* __restrict__ dirs, const u32* __restrict__ shifts,       \
        const u32* __restrict__ nodes, const float* __restrict__ weights, u32 dims, u64 points,             \
        u32 antithetic, double* __restrict__ out) {                                                       \
        KilnQmc q;                                                                                        \
        q.dirs = dirs;                                                                                    \
        q.shifts = shifts;                                                                                \
        q.nodes = nodes;                                                                                  \
        q.weights = weights;                                                                              \
        q.dims = dims;                                                                                    \
        q.points = points;                                                                                \
        kiln_qmc_blocks<STYLE>(uparams, dparams, n_options, first_block, launch_blocks, samples, q,        \
                               antithetic, out);                                                          \
    }

#if !defined(KILN_ONLY) || defined(KILN_K_qmc_european_f64)
KILN_QMC_KERNEL(qmc_european_f64, ST_EURO)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_qmc_asian_arithmetic_f64)
KILN_QMC_KERNEL(qmc_asian_arithmetic_f64, ST_ASIAN_A)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_qmc_asian_geometric_f64)
KILN_QMC_KERNEL(qmc_asian_geometric_f64, ST_ASIAN_G)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_qmc_barrier_up_out_f64)
KILN_QMC_KERNEL(qmc_barrier_up_out_f64, ST_UP_OUT)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_qmc_barrier_up_in_f64)
KILN_QMC_KERNEL(qmc_barrier_up_in_f64, ST_UP_IN)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_qmc_barrier_down_out_f64)
KILN_QMC_KERNEL(qmc_barrier_down_out_f64, ST_DOWN_OUT)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_qmc_barrier_down_in_f64)
KILN_QMC_KERNEL(qmc_barrier_down_in_f64, ST_DOWN_IN)
#endif

// Self-test: inv[i] = f32 bits of the quantile of uniform_f64(w[i]); sobol[i] = coordinate
// i % dims of Sobol point w[i] (the test compares both with kiln-core's).
#if !defined(KILN_ONLY) || defined(KILN_K_qmc_selftest_f32)
extern "C" __global__ void qmc_selftest_f32(const u32* __restrict__ w, u32 n, const u32* __restrict__ dirs, u32 dims,
                                            u32* __restrict__ inv, u32* __restrict__ sobol) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    inv[i] = __float_as_uint(kiln_inv_norm(w[i]));
    sobol[i] = kiln_sobol(dirs, w[i], i % dims);
}
#endif
