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
// One kernel a program: kiln compiles each kernel below alone, as its own NVRTC program with
// -DKILN_ONLY -DKILN_K_<name> (kernels.rs), so a process compiles only what it launches;
// without KILN_ONLY the whole file compiles (the compile test, the ptxas_info example).

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
// log_barrier (f32 bits), vega_drift_dt (f32 bits).
#define KILN_OPT_U 8
// f64 words per option: spot, strike, df, sigma, vega_drift, maturity, dt, n,
// control_mean, unused.
#define KILN_OPT_D 10

enum { ST_EURO = 0, ST_ASIAN_A = 1, ST_ASIAN_G = 2, ST_UP_OUT = 3, ST_UP_IN = 4, ST_DOWN_OUT = 5, ST_DOWN_IN = 6 };

// What the path loop needs (registers); the f64 constants are read from global memory only
// in the payoff, after the loop, so they hold no registers while the path runs.
struct KilnPath {
    u32 steps, option;
    float drift, vol, logb, vddt;
};

struct KilnOpt {
    bool put;
    double spot, strike, df, sigma, vd, mat, dt, n, cm;
};

__device__ __forceinline__ KilnOpt kiln_load_opt(const u32* __restrict__ up, const double* __restrict__ dp) {
    KilnOpt o;
    o.put = up[1] != 0u;
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
    bool hit;
    __device__ __forceinline__ void init() {
        se = 0.0;
        sev = 0.0;
        sx = 0.0;
        ge = 0.0f;
        gev = 0.0f;
        gx = 0.0f;
        hit = false;
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
        } else if (STYLE == ST_UP_OUT || STYLE == ST_UP_IN) {
            hit |= x >= o.logb;
        } else if (STYLE == ST_DOWN_OUT || STYLE == ST_DOWN_IN) {
            hit |= x <= o.logb;
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
            out.y = (hit == in) ? vanilla : 0.0;
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

// Benchmark probes (kiln_cuda::McProbe): the same launch, loop and block sums as the
// European kernel with the path loop cut down, to measure what each part costs. PHILOX: only
// the Philox words (XORed together); NORMALS: the words and their four normals, added up.
enum { PROBE_NONE = 0, PROBE_PHILOX = 1, PROBE_NORMALS = 2 };

// One sample (a path, or an antithetic pair averaged), kiln_cpu paths.rs `run_group`: the
// full calls of 4 steps without a bound check, then the last partial call.
template <int STYLE, bool ANTI, bool FAST, int PROBE>
__device__ __forceinline__ KilnOut kiln_sample(const KilnPath& o, const u32* __restrict__ up,
                                               const double* __restrict__ dp, u32 sample, const KilnKeys& ks) {
    float x = 0.0f, xa = 0.0f;
    KilnState<STYLE, FAST> st, sta;
    st.init();
    sta.init();
    KilnStream ps = kiln_stream(sample, o.option, ks);
    const u32 full = o.steps / 4u, rest = o.steps % 4u;
    if (PROBE == PROBE_PHILOX) {
        u32 acc = 0u;
        for (u32 b = 0; b < full; ++b) {
            u32 w0, w1, w2, w3;
            kiln_stream_next(ps, ks, w0, w1, w2, w3);
            acc ^= (w0 ^ w1) ^ (w2 ^ w3);
        }
        KilnOut out = {(double)acc, 0.0, 0.0, 0.0};
        return out;
    }
    if (PROBE == PROBE_NORMALS) {
        for (u32 b = 0; b < full; ++b) {
            float z[4];
            kiln_normals4<FAST>(ps, ks, z);
            x = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(x, z[0]), z[1]), z[2]), z[3]);
        }
        KilnOut out = {(double)x, 0.0, 0.0, 0.0};
        return out;
    }
    for (u32 b = 0; b < full; ++b) {
        float z[4];
        kiln_normals4<FAST>(ps, ks, z);
        kiln_steps<STYLE, ANTI, FAST, 4>(o, b * 4u, z, x, xa, st, sta, 4u);
    }
    if (rest != 0u) {
        float z[4];
        kiln_normals4<FAST>(ps, ks, z);
        kiln_steps<STYLE, ANTI, FAST, 0>(o, full * 4u, z, x, xa, st, sta, rest);
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

#define KILN_BLOCK_SAMPLES 1024u
#define KILN_WARPS 8
#define KILN_SUMS 7

// Per-(option, block) sums for options of one style. Items: n_options x launch_blocks,
// item i is row i / launch_blocks of the parameter arrays, block first_block +
// i % launch_blocks. out[i * 7 + j], j = y, yy, c, cc, yc, delta, vega. One kernel per style
// (so each gets the registers it needs, not the union of all styles').
template <int STYLE, bool FAST, int PROBE>
__device__ __forceinline__ void kiln_mc_blocks(
    const u32* __restrict__ uparams, const double* __restrict__ dparams, u32 n_options,
    u64 first_block, u64 launch_blocks, u64 samples, const KilnKeys& ks, u32 antithetic,
    double* __restrict__ out) {
    // Rows y, c, delta, vega and a row of ones; 33 columns so the rows the 7 summing lanes
    // read at one column fall in different banks.
    __shared__ double stage[KILN_WARPS][5][33];
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    stage[warp][4][lane] = 1.0;
    // Lane j < 7 adds p_j * q_j a sample: y*1, y*y, c*1, c*c, y*c, delta*1, vega*1 (x * 1.0
    // is x exactly, so the sums are the CPU's bit for bit). Branch-free: a switch here
    // compiled to a branch per case, serialised across the 7 lanes.
    const u32 pr = (0x3201100u >> (4u * min(lane, 6u))) & 0xfu;
    const u32 qr = (0x4411404u >> (4u * min(lane, 6u))) & 0xfu;
    const u64 items = (u64)n_options * launch_blocks;
    for (u64 item = (u64)blockIdx.x * KILN_WARPS + warp; item < items; item += (u64)gridDim.x * KILN_WARPS) {
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
        const u64 start = block * KILN_BLOCK_SAMPLES;
        const u64 end = min(start + KILN_BLOCK_SAMPLES, samples);
        double acc = 0.0; // lane j < 7 holds sum j
        for (u64 base = start; base < end; base += 32u) {
            const u64 s = base + lane;
            KilnOut v = {0.0, 0.0, 0.0, 0.0};
            if (s < end) {
                // Sample indices are < 2^32 (McParams::validate).
                v = (antithetic && PROBE == PROBE_NONE) ? kiln_sample<STYLE, true, FAST, PROBE>(o, up, dp, (u32)s, ks)
                                                        : kiln_sample<STYLE, false, FAST, PROBE>(o, up, dp, (u32)s, ks);
            }
            stage[warp][0][lane] = v.y;
            stage[warp][1][lane] = v.c;
            stage[warp][2][lane] = v.delta;
            stage[warp][3][lane] = v.vega;
            __syncwarp();
            if (lane < KILN_SUMS) {
                const u32 valid = (u32)min((u64)32u, end - base);
                const double* p = &stage[warp][pr][0];
                const double* q = &stage[warp][qr][0];
#pragma unroll 4
                for (u32 l = 0; l < valid; ++l) acc = __dadd_rn(acc, __dmul_rn(p[l], q[l]));
            }
            __syncwarp();
        }
        if (lane < KILN_SUMS) out[item * KILN_SUMS + lane] = acc;
    }
}

#define KILN_MC_KERNEL(NAME, STYLE, FAST, PROBE)                                                      \
    extern "C" __global__ void __launch_bounds__(256, 6) NAME(                                        \
        const u32* __restrict__ uparams, const double* __restrict__ dparams, u32 n_options,          \
        u64 first_block, u64 launch_blocks, u64 samples, const KilnKeys keys, u32 antithetic,        \
        double* __restrict__ out) {                                                                  \
        kiln_mc_blocks<STYLE, FAST, PROBE>(uparams, dparams, n_options, first_block, launch_blocks,   \
                                           samples, keys, antithetic, out);                          \
    }

#if !defined(KILN_ONLY) || defined(KILN_K_mc_european_f64)
KILN_MC_KERNEL(mc_european_f64, ST_EURO, false, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_asian_arithmetic_f64)
KILN_MC_KERNEL(mc_asian_arithmetic_f64, ST_ASIAN_A, false, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_asian_geometric_f64)
KILN_MC_KERNEL(mc_asian_geometric_f64, ST_ASIAN_G, false, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_barrier_up_out_f64)
KILN_MC_KERNEL(mc_barrier_up_out_f64, ST_UP_OUT, false, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_barrier_up_in_f64)
KILN_MC_KERNEL(mc_barrier_up_in_f64, ST_UP_IN, false, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_barrier_down_out_f64)
KILN_MC_KERNEL(mc_barrier_down_out_f64, ST_DOWN_OUT, false, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_barrier_down_in_f64)
KILN_MC_KERNEL(mc_barrier_down_in_f64, ST_DOWN_IN, false, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_european_fast_f64)
KILN_MC_KERNEL(mc_european_fast_f64, ST_EURO, true, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_asian_arithmetic_fast_f64)
KILN_MC_KERNEL(mc_asian_arithmetic_fast_f64, ST_ASIAN_A, true, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_asian_geometric_fast_f64)
KILN_MC_KERNEL(mc_asian_geometric_fast_f64, ST_ASIAN_G, true, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_barrier_up_out_fast_f64)
KILN_MC_KERNEL(mc_barrier_up_out_fast_f64, ST_UP_OUT, true, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_barrier_up_in_fast_f64)
KILN_MC_KERNEL(mc_barrier_up_in_fast_f64, ST_UP_IN, true, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_barrier_down_out_fast_f64)
KILN_MC_KERNEL(mc_barrier_down_out_fast_f64, ST_DOWN_OUT, true, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_barrier_down_in_fast_f64)
KILN_MC_KERNEL(mc_barrier_down_in_fast_f64, ST_DOWN_IN, true, PROBE_NONE)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_probe_philox_f64)
KILN_MC_KERNEL(mc_probe_philox_f64, ST_EURO, false, PROBE_PHILOX)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_probe_normals_f64)
KILN_MC_KERNEL(mc_probe_normals_f64, ST_EURO, false, PROBE_NORMALS)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_mc_probe_normals_fast_f64)
KILN_MC_KERNEL(mc_probe_normals_fast_f64, ST_EURO, true, PROBE_NORMALS)
#endif

// Adds each option's `nb` block sums (consecutive in `blocks`, 7 doubles each) in block
// order onto its running totals: totals[o * 7 + j] += blocks[(o * nb + b) * 7 + j], b = 0..nb.
#if !defined(KILN_ONLY) || defined(KILN_K_mc_combine_f64)
extern "C" __global__ void mc_combine_f64(const double* __restrict__ blocks, u32 n_options, u64 nb,
                                          double* __restrict__ totals) {
    const u64 idx = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (u64)n_options * KILN_SUMS) return;
    const u64 o = idx / KILN_SUMS, j = idx % KILN_SUMS;
    const double* p = blocks + o * nb * KILN_SUMS + j;
    double s = totals[idx];
#pragma unroll 8
    for (u64 b = 0; b < nb; ++b) s = __dadd_rn(s, p[b * KILN_SUMS]);
    totals[idx] = s;
}
#endif

// Self-test of the portable math on words w[i]: out[i * 7 + ...] = uniform, ln(uniform),
// sin, cos (of 2 pi uniform), exp(x[i]), the first Box-Muller normal of (w[i], w[i]+1), and
// the fast_math one of the same words, as f32 bits; philox[i * 4 ..] = the Philox words of
// counter [i, w[i], 7, 0], key (k0, k1), computed both as kiln_philox10 and in the path
// loop's stream form (0xdeadbeef words when the two disagree).
#if !defined(KILN_ONLY) || defined(KILN_K_finance_selftest_f32)
extern "C" __global__ void finance_selftest_f32(const u32* __restrict__ w, const float* __restrict__ x, u32 n,
                                                u32 k0, u32 k1, u32* __restrict__ out,
                                                u32* __restrict__ philox) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const u32 wi = w[i];
    const float u = kiln_uniform(wi);
    float s, c, z0, z1, f0, f1;
    kiln_sincos_turns(wi, s, c);
    kiln_box_muller(wi, wi + 1u, z0, z1);
    kiln_box_muller_fast(wi, wi + 1u, f0, f1);
    out[i * 7 + 0] = __float_as_uint(u);
    out[i * 7 + 1] = __float_as_uint(kiln_ln(u));
    out[i * 7 + 2] = __float_as_uint(s);
    out[i * 7 + 3] = __float_as_uint(c);
    out[i * 7 + 4] = __float_as_uint(kiln_exp(x[i]));
    out[i * 7 + 5] = __float_as_uint(z0);
    out[i * 7 + 6] = __float_as_uint(f0);
    const KilnKeys ks = kiln_key_schedule(k0, k1);
    // The path loop's form (kiln_stream_next), which must give kiln_philox10's words.
    u32 c0 = i, c1 = wi, c2 = 7u, c3 = 0u;
    kiln_philox10(c0, c1, c2, c3, ks);
    KilnStream ps = kiln_stream(wi, 7u, ks, i);
    u32 d0, d1, d2, d3;
    kiln_stream_next(ps, ks, d0, d1, d2, d3);
    if (d0 != c0 || d1 != c1 || d2 != c2 || d3 != c3) c0 = c1 = c2 = c3 = 0xdeadbeefu;
    philox[i * 4 + 0] = c0;
    philox[i * 4 + 1] = c1;
    philox[i * 4 + 2] = c2;
    philox[i * 4 + 3] = c3;
}
#endif

// Checks kiln_sqrt_pos against __fsqrt_rn on the `count` consecutive floats from the bits
// `first` on (grid-stride): bad[0] counts the floats where they differ, bad[1] keeps the
// bits of one of them (for the test's message).
#if !defined(KILN_ONLY) || defined(KILN_K_finance_sqrt_check_f32)
extern "C" __global__ void finance_sqrt_check_f32(u32 first, u32 count, u32* __restrict__ bad) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        const float x = __uint_as_float(first + i);
        if (__float_as_uint(kiln_sqrt_pos(x)) != __float_as_uint(__fsqrt_rn(x))) {
            atomicAdd(&bad[0], 1u);
            bad[1] = first + i;
        }
    }
}
#endif
