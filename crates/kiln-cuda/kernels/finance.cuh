#line 1 "finance.cuh"
// What the Monte Carlo families share (finance.cu: Philox paths; finance_qmc.cu: Sobol paths;
// kiln prepends this header to each, kernels.rs): Philox4x32-10, the portable f32 math, the
// per-option constants, the path state of each style and its payoff.
//
// Monte Carlo option pricing under GBM: Philox4x32-10, Box-Muller, the f32 log-price path
// and the payoff fused in registers (no path arrays in memory), many options per launch.
//
// Exactness contract, version 2 (kiln_core::philox, kiln_core::finance::PathParams,
// kiln_cpu::finance::mc): every f32 and f64 operation below is the CPU's, in the CPU's
// order, through __fadd_rn/__fsub_rn/__fmul_rn/__fmaf_rn/__fdiv_rn/__fsqrt_rn and their
// __d*_rn counterparts, which round to nearest even and are never contracted or reassociated
// (__fmaf_rn is the CPU's mul_add: one rounding). So the module needs neither --fmad=false
// nor any other special option; it must not be compiled with --use_fast_math or --ftz=true
// (the #error below catches fast-math). Each sample's payoff, control and pathwise Greeks
// are then bitwise the CPU's, and so are the block sums, which add the 1024 samples of a
// canonical block in sample order.
//
// The *_fast_f64 kernels (McParams::fast_math) are the one exception: their normals use the
// GPU's hardware approximations (MUFU lg2, sqrt, sin, cos; ex2 for the Asian fixings), which
// agree with the exact math to about 1e-6 but not bitwise. Everything else is shared.
//
// Launch shape (mc_<style>_f64, one kernel per style): one warp per (option, canonical block of 1024 samples),
// 8 warps per 256-thread CTA, item = blockIdx.x * 8 + warp (grid-stride over items). Lane l
// simulates samples start + 32 i + l, i = 0..31; after each round of 32 the warp stages the
// 32 outputs in shared memory and lanes 0..6 each add one of the 7 sums in sample order
// (y, yy, c, cc, yc, delta, vega), so a warp's sums never leave registers until the block
// is done. Style is warp-uniform (one option per warp): no divergence inside a path.
// mc_combine_f64 then adds each option's blocks in block order (one thread per option and
// sum), continuing from the running totals it is given, so chunked launches chain exactly.
//
#if defined(__USE_FAST_MATH__) && __USE_FAST_MATH__
#error "finance.cu must be compiled without --use_fast_math (bitwise CPU agreement)"
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

#define KILN_FB(bits) __uint_as_float(bits##u)

// ---- Philox4x32-10 (Random123 philox4x32_R(10, c, k)) ----

// The ten round keys (kiln_core::philox::key_schedule), passed by value as a kernel
// parameter: the XORs then read them from the constant bank and no thread spends
// instructions bumping the key.
struct KilnKeys {
    u32 k0[10];
    u32 k1[10];
};

__device__ __forceinline__ KilnKeys kiln_key_schedule(u32 k0, u32 k1) {
    KilnKeys ks;
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        ks.k0[r] = k0;
        ks.k1[r] = k1;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return ks;
}

__device__ __forceinline__ void kiln_philox10(u32& c0, u32& c1, u32& c2, u32& c3, const KilnKeys& ks) {
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        const u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        const u32 n0 = hi1 ^ c1 ^ ks.k0[r], n2 = hi0 ^ c3 ^ ks.k1[r];
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
}

// The path loop's counters are [block, sample, option, 0] with only `block` changing, so
// the first two rounds are half loop-invariant. Round 1's outputs 0 and 1 depend only on
// (sample, option) and so does the M0 product of round 2; they are computed once a sample
// (KilnStream). Round 1's block product M0 * block is a running 64-bit sum (block counts up
// by one): two integer adds instead of a wide multiply. So a call costs 17 wide multiplies,
// not 20. The words are exactly philox4x32_R(10, [block, sample, option, 0]) (the
// self-test kernel checks them against kiln_philox10, which checks them against the CPU).
struct KilnStream {
    u32 a; // round 2: lo(M1 option) ^ k0[1]  (round 1's output 1, XORed into output 0)
    u32 b; // round 2: hi(M0 n0) ^ k1[1], n0 = hi(M1 option) ^ sample ^ k0[0] (round 1's output 0)
    u32 c; // round 2's output 3: lo(M0 n0)
    u64 m0b; // M0 * block
};

// The stream (sample, option) from block `block0` on.
__device__ __forceinline__ KilnStream kiln_stream(u32 sample, u32 option, const KilnKeys& ks, u32 block0 = 0u) {
    KilnStream st;
    const u32 n0 = __umulhi(0xCD9E8D57u, option) ^ sample ^ ks.k0[0];
    st.a = (0xCD9E8D57u * option) ^ ks.k0[1];
    st.b = __umulhi(0xD2511F53u, n0) ^ ks.k1[1];
    st.c = 0xD2511F53u * n0;
    st.m0b = (u64)0xD2511F53u * block0;
    return st;
}

// The words of the stream's next block (then block + 1).
__device__ __forceinline__ void kiln_stream_next(KilnStream& st, const KilnKeys& ks, u32& c0, u32& c1, u32& c2,
                                                 u32& c3) {
    // round 1: outputs (n0, lo(M1 option), hi(M0 block) ^ 0 ^ k1[0], lo(M0 block))
    const u32 r1c2 = (u32)(st.m0b >> 32) ^ ks.k1[0];
    const u32 r1c3 = (u32)st.m0b;
    st.m0b += 0xD2511F53ull;
    // round 2
    c0 = __umulhi(0xCD9E8D57u, r1c2) ^ st.a;
    c1 = 0xCD9E8D57u * r1c2;
    c2 = st.b ^ r1c3;
    c3 = st.c;
#pragma unroll
    for (int r = 2; r < 10; ++r) {
        const u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        const u32 n0 = hi1 ^ c1 ^ ks.k0[r], n2 = hi0 ^ c3 ^ ks.k1[r];
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
}

// ---- portable f32 math (kiln_core::philox: uniform_f32, ln_f32, sincos_turns_f32, exp_f32) ----

// ((w >> 8) | 1) * 2^-24 without an int-to-float conversion: with m = w >> 9 (23 bits),
// (1 + m 2^-23) - (1 - 2^-24) = (2m + 1) 2^-24, which is representable, so the one
// subtraction is exact and the value is the CPU's uniform_f32 bit for bit
// (philox::tests::gpu_uniform_identity checks every m).
__device__ __forceinline__ float kiln_uniform(u32 w) {
    return __fsub_rn(__uint_as_float((w >> 9) + 0x3f800000u), KILN_FB(0x3f7fffff));
}

__device__ __forceinline__ float kiln_ln(float x) {
    const u32 bits = __float_as_uint(x);
    const u32 ix = bits - 0x3f3504f3u;
    const int k = ((int)ix) >> 23;
    const float m = __uint_as_float(bits - (ix & 0xff800000u));
    const float f = __fsub_rn(m, 1.0f);
    const float z = __fmul_rn(f, f);
    float p = KILN_FB(0x3d9021bb);
    p = __fmaf_rn(p, f, KILN_FB(0xbdebd1b8));
    p = __fmaf_rn(p, f, KILN_FB(0x3def251a));
    p = __fmaf_rn(p, f, KILN_FB(0xbdfe5d4f));
    p = __fmaf_rn(p, f, KILN_FB(0x3e11e9bf));
    p = __fmaf_rn(p, f, KILN_FB(0xbe2aae50));
    p = __fmaf_rn(p, f, KILN_FB(0x3e4cceac));
    p = __fmaf_rn(p, f, KILN_FB(0xbe7ffffc));
    p = __fmaf_rn(p, f, KILN_FB(0x3eaaaaaa));
    const float kf = __int2float_rn(k);
    float y = __fmul_rn(__fmul_rn(f, z), p);
    y = __fmaf_rn(kf, KILN_FB(0xb95e8083), y);  // LN2_LO
    y = __fmaf_rn(-0.5f, z, y);
    return __fmaf_rn(kf, KILN_FB(0x3f318000), __fadd_rn(f, y));  // LN2_HI
}

__device__ __forceinline__ void kiln_sincos_turns(u32 w, float& sn, float& cs) {
    const u32 j = (w >> 8) | 1u;
    const u32 q = (j + (1u << 21)) >> 22;
    // r = (j - q 2^22) 2^-22 exactly, the difference d in [-2^21, 2^21) read as a float
    // without a conversion: the bits 0x4b400000 + d are 1.5 2^23 + d, and
    // (1.5 2^23 + d) 2^-22 - 3 = d 2^-22 is representable, so the fused step is exact
    // (philox::tests::gpu_sincos_reduction_identity checks every j).
    const float r = __fmaf_rn(__uint_as_float(0x4b400000u + j - (q << 22)), KILN_FB(0x34800000), -3.0f);
    const float r2 = __fmul_rn(r, r);
    float s = KILN_FB(0x39283c1a);
    s = __fmaf_rn(s, r2, KILN_FB(0xbb996966));
    s = __fmaf_rn(s, r2, KILN_FB(0x3da335e3));
    s = __fmaf_rn(s, r2, KILN_FB(0xbf255de7));
    s = __fmaf_rn(s, r2, KILN_FB(0x3fc90fdb));
    s = __fmul_rn(r, s);
    float c = KILN_FB(0xb7d368f9);
    c = __fmaf_rn(c, r2, KILN_FB(0x3a70fa83));
    c = __fmaf_rn(c, r2, KILN_FB(0xbcaae9e4));
    c = __fmaf_rn(c, r2, KILN_FB(0x3e81e0f8));
    c = __fmaf_rn(c, r2, KILN_FB(0xbf9de9e6));
    c = __fmaf_rn(c, r2, 1.0f);
    const bool odd = (q & 1u) != 0u;
    const float a = odd ? c : s, b = odd ? s : c;
    sn = __uint_as_float(__float_as_uint(a) ^ ((q & 2u) << 30));
    cs = __uint_as_float(__float_as_uint(b) ^ (((q + 1u) & 2u) << 30));
}

__device__ __forceinline__ float kiln_exp(float x) {
    x = fminf(fmaxf(x, -87.0f), 88.0f);
    const float magic = KILN_FB(0x4b400000); // 1.5 * 2^23
    const float t = __fmaf_rn(x, KILN_FB(0x3fb8aa3b), magic);
    const float kf = __fsub_rn(t, magic);
    const int k = (int)__float_as_uint(t) - (int)0x4b400000u;
    const float r = __fmaf_rn(-kf, KILN_FB(0x3805fdf4), __fmaf_rn(-kf, KILN_FB(0x3f317000), x));
    float p = KILN_FB(0x39500d01);                         // 1/7!
    p = __fmaf_rn(p, r, KILN_FB(0x3ab60b61));
    p = __fmaf_rn(p, r, KILN_FB(0x3c088889));
    p = __fmaf_rn(p, r, KILN_FB(0x3d2aaaab));
    p = __fmaf_rn(p, r, KILN_FB(0x3e2aaaab));
    p = __fmaf_rn(p, r, KILN_FB(0x3f000000));
    p = __fmaf_rn(p, r, 1.0f);
    p = __fmaf_rn(p, r, 1.0f);
    return __fmul_rn(p, __uint_as_float(((u32)(k + 127)) << 23));
}

// sqrt(x), correctly rounded, for normal finite x in [2^-100, 2^126]: the fast path of
// __fsqrt_rn (MUFU.RSQ, then one Newton step on the root and its fused correction) without
// its range test and call to the slow path; x = -2 ln u is in [1.1e-7, 33.3] here. The GPU
// test sqrt_fast_path_is_correctly_rounded compares it with __fsqrt_rn on every float in
// [2^-24, 64).
__device__ __forceinline__ float kiln_sqrt_pos(float x) {
    float rs;
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(rs) : "f"(x));
    const float s = __fmul_rn(x, rs);
    const float h = __fmul_rn(rs, 0.5f);
    const float e = __fmaf_rn(-s, s, x);
    return __fmaf_rn(e, h, s);
}

__device__ __forceinline__ void kiln_box_muller(u32 a, u32 b, float& z0, float& z1) {
    const float r = kiln_sqrt_pos(__fmul_rn(-2.0f, kiln_ln(kiln_uniform(a))));
    float s, c;
    kiln_sincos_turns(b, s, c);
    z0 = __fmul_rn(r, c);
    z1 = __fmul_rn(r, s);
}

// fast_math: the same Box-Muller mapping of the same words with hardware approximations
// (PTX .approx.ftz: one MUFU instruction each, no denormal fix-ups - no input here is
// denormal). -2 ln u = log2(u) * (-2 ln 2) (MUFU.LG2, u >= 2^-24), the root by MUFU.SQRT
// (its argument >= 1.19e-7), and the angle centred, t = (j - 2^23) 2^-24 turns in
// (-1/2, 1/2), where MUFU.SIN/COS are most accurate; cos and sin of 2 pi u are then -cos
// and -sin of 2 pi t.
__device__ __forceinline__ float kiln_lg2_approx(float x) {
    float r;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ float kiln_sqrt_approx(float x) {
    float r;
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ float kiln_ex2_approx(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ void kiln_box_muller_fast(u32 a, u32 b, float& z0, float& z1) {
    const float r = kiln_sqrt_approx(kiln_lg2_approx(kiln_uniform(a)) * -1.38629436f);
    // u 2 pi - pi as one fused step (2 pi and pi rounded to f32): u = j 2^-24 exactly
    // (kiln_uniform), so this is the single rounding of the exact (j - 2^23) 2^-24 2 pi.
    const float t = __fmaf_rn(kiln_uniform(b), KILN_FB(0x40c90fdb), -KILN_FB(0x40490fdb));
    float s, c;
    asm("sin.approx.ftz.f32 %0, %1;" : "=f"(s) : "f"(t));
    asm("cos.approx.ftz.f32 %0, %1;" : "=f"(c) : "f"(t));
    z0 = -r * c;
    z1 = -r * s;
}

// fast_math exp for the Asian fixings: 2^(x log2 e) by MUFU.EX2, x clamped as kiln_exp does.
__device__ __forceinline__ float kiln_exp_fast(float x) {
    x = fminf(fmaxf(x, -87.0f), 88.0f);
    return kiln_ex2_approx(x * 1.44269504f);
}

template <bool FAST>
__device__ __forceinline__ void kiln_normals4(KilnStream& ps, const KilnKeys& ks, float z[4]) {
    u32 w0, w1, w2, w3;
    kiln_stream_next(ps, ks, w0, w1, w2, w3);
    if (FAST) {
        kiln_box_muller_fast(w0, w1, z[0], z[1]);
        kiln_box_muller_fast(w2, w3, z[2], z[3]);
    } else {
        kiln_box_muller(w0, w1, z[0], z[1]);
        kiln_box_muller(w2, w3, z[2], z[3]);
    }
}

// ---- per-option constants (layout written by launch_finance.rs) ----

// u32 words per option: style, is_put, steps, stream option id, drift_dt, vol_sqrt_dt,
// log_barrier (f32 bits), vega_drift_dt (f32 bits; barrier styles: cross_k, the continuous
// monitoring's crossing coefficient, 0 for discrete monitoring).
#define KILN_OPT_U 8
// f64 words per option: spot, strike, df, sigma, vega_drift, maturity, dt, n,
// control_mean, unused.
#define KILN_OPT_D 10

enum { ST_EURO = 0, ST_ASIAN_A = 1, ST_ASIAN_G = 2, ST_UP_OUT = 3, ST_UP_IN = 4, ST_DOWN_OUT = 5, ST_DOWN_IN = 6 };

// What the path loop needs (registers); the f64 constants are read from global memory only
// in the payoff, after the loop, so they hold no registers while the path runs.
struct KilnPath {
    u32 steps, option;
    float drift, vol, logb, vddt; // vddt: barrier styles' cross_k
};

struct KilnOpt {
    bool put;
    float ck; // barrier styles: cross_k (u32 word 7)
    double spot, strike, df, sigma, vd, mat, dt, n, cm;
};

__device__ __forceinline__ KilnOpt kiln_load_opt(const u32* __restrict__ up, const double* __restrict__ dp) {
    KilnOpt o;
    o.put = up[1] != 0u;
    o.ck = __uint_as_float(up[7]);
    o.spot = dp[0];
    o.strike = dp[1];
    o.df = dp[2];
    o.sigma = dp[3];
    o.vd = dp[4];
    o.mat = dp[5];
    o.dt = dp[6];
    o.n = dp[7];
    o.cm = dp[8];
    return o;
}

struct KilnOut {
    double y, c, delta, vega;
};

// Discounted payoff of price s; sdf = df * sign (kiln_cpu paths.rs `pay`).
__device__ __forceinline__ double kiln_pay(const KilnOpt& o, double s, double& sdf, bool& itm) {
    const double p = o.put ? fmax(__dsub_rn(o.strike, s), 0.0) : fmax(__dsub_rn(s, o.strike), 0.0);
    sdf = __dmul_rn(o.df, o.put ? -1.0 : 1.0);
    itm = p > 0.0;
    return __dmul_rn(o.df, p);
}

template <int STYLE, bool FAST>
struct KilnState {
    // Asian: f64 totals, and the f32 sums of the current Philox call's fixings
    // (kiln_cpu paths.rs AsianState).
    double se, sev, sx;
    float ge, gev, gx;
    // Barrier: hit at a step's end; the previous log-price and the bridge survival
    // probability of continuous monitoring (kiln_cpu paths.rs BarrierState).
    bool hit;
    float prev, surv;
    __device__ __forceinline__ void init() {
        se = 0.0;
        sev = 0.0;
        sx = 0.0;
        ge = 0.0f;
        gev = 0.0f;
        gx = 0.0f;
        hit = false;
        prev = 0.0f;
        surv = 1.0f;
    }
    // After step `step` (0-based), x is the log-price.
    __device__ __forceinline__ void step(const KilnPath& o, u32 step, float x) {
        if (STYLE == ST_ASIAN_A || STYLE == ST_ASIAN_G) {
            const float e = FAST ? kiln_exp_fast(x) : kiln_exp(x);
            ge = __fadd_rn(ge, e);
            if (STYLE == ST_ASIAN_A) {
                const float shift = __fmul_rn(o.vddt, __uint2float_rn(step + 1u));
                gev = __fmaf_rn(e, __fsub_rn(x, shift), gev);
            }
            gx = __fadd_rn(gx, x);
        } else {
            const bool past = (STYLE == ST_UP_OUT || STYLE == ST_UP_IN) ? x >= o.logb : x <= o.logb;
            if (o.vddt != 0.0f && !hit && !past) {
                const float p = kiln_exp(-__fmul_rn(o.vddt, __fmul_rn(__fsub_rn(o.logb, prev), __fsub_rn(o.logb, x))));
                surv = __fmul_rn(surv, __fsub_rn(1.0f, p));
            }
            hit |= past;
            prev = x;
        }
    }
    // After each Philox call's steps.
    __device__ __forceinline__ void group_end() {
        if (STYLE == ST_ASIAN_A || STYLE == ST_ASIAN_G) {
            se = __dadd_rn(se, (double)ge);
            sev = __dadd_rn(sev, (double)gev);
            sx = __dadd_rn(sx, (double)gx);
            ge = 0.0f;
            gev = 0.0f;
            gx = 0.0f;
        }
    }
    __device__ __forceinline__ KilnOut finish(const KilnOpt& o, float x) const {
        KilnOut out;
        double sdf;
        bool itm;
        if (STYLE == ST_EURO) {
            const double st = __dmul_rn(o.spot, (double)kiln_exp(x));
            out.y = kiln_pay(o, st, sdf, itm);
            out.delta = 0.0;
            out.vega = 0.0;
            if (itm) {
                const double xl = (double)x;
                out.delta = __ddiv_rn(__dmul_rn(sdf, st), o.spot);
                out.vega = __ddiv_rn(__dmul_rn(__dmul_rn(sdf, st), __dsub_rn(xl, __dmul_rn(o.vd, o.mat))), o.sigma);
            }
            out.c = __dsub_rn(__dmul_rn(o.df, st), o.cm);
        } else if (STYLE == ST_ASIAN_A) {
            const double avg = __ddiv_rn(__dmul_rn(o.spot, se), o.n);
            out.y = kiln_pay(o, avg, sdf, itm);
            const double g = __dmul_rn(o.spot, (double)kiln_exp(__double2float_rn(__ddiv_rn(sx, o.n))));
            double sdf2;
            bool itm2;
            const double geo = kiln_pay(o, g, sdf2, itm2);
            out.delta = 0.0;
            out.vega = 0.0;
            if (itm) {
                out.delta = __ddiv_rn(__dmul_rn(sdf, avg), o.spot);
                out.vega = __ddiv_rn(__dmul_rn(__dmul_rn(sdf, o.spot), sev), __dmul_rn(o.n, o.sigma));
            }
            out.c = __dsub_rn(geo, o.cm);
        } else if (STYLE == ST_ASIAN_G) {
            const double mean_t = __ddiv_rn(__dmul_rn(o.dt, __dadd_rn(o.n, 1.0)), 2.0);
            const double g = __dmul_rn(o.spot, (double)kiln_exp(__double2float_rn(__ddiv_rn(sx, o.n))));
            out.y = kiln_pay(o, g, sdf, itm);
            out.delta = 0.0;
            out.vega = 0.0;
            if (itm) {
                const double mean_x = __ddiv_rn(sx, o.n);
                out.delta = __ddiv_rn(__dmul_rn(sdf, g), o.spot);
                out.vega = __ddiv_rn(__dmul_rn(__dmul_rn(sdf, g), __dsub_rn(mean_x, __dmul_rn(o.vd, mean_t))), o.sigma);
            }
            out.c = __dsub_rn(__ddiv_rn(__dmul_rn(__dmul_rn(o.df, o.spot), se), o.n), o.cm);
        } else {
            const bool in = STYLE == ST_UP_IN || STYLE == ST_DOWN_IN;
            const double st = __dmul_rn(o.spot, (double)kiln_exp(x));
            const double vanilla = kiln_pay(o, st, sdf, itm);
            const bool discrete = o.ck == 0.0f;
            const double alive = hit ? 0.0 : (discrete ? 1.0 : (double)surv);
            if (in) {
                out.y = hit ? vanilla : (discrete ? 0.0 : __dmul_rn(vanilla, __dsub_rn(1.0, alive)));
            } else {
                out.y = __dmul_rn(vanilla, alive);
            }
            out.c = __dsub_rn(vanilla, o.cm);
            out.delta = 0.0;
            out.vega = 0.0;
        }
        return out;
    }
};

// The steps of one Philox call: x += fma(vol, z, drift) (mirror: fma(-vol, z, drift)).
template <int STYLE, bool ANTI, bool FAST, int N>
__device__ __forceinline__ void kiln_steps(const KilnPath& o, u32 first, const float z[4], float& x, float& xa,
                                           KilnState<STYLE, FAST>& st, KilnState<STYLE, FAST>& sta, u32 n) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (N == 4 || (u32)j < n) {
            x = __fadd_rn(x, __fmaf_rn(o.vol, z[j], o.drift));
            st.step(o, first + j, x);
            if (ANTI) {
                xa = __fadd_rn(xa, __fmaf_rn(-o.vol, z[j], o.drift));
                sta.step(o, first + j, xa);
            }
        }
    }
    st.group_end();
    if (ANTI) sta.group_end();
}
