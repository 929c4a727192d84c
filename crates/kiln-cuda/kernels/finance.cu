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

// ---- portable f32 math (kiln_core::philox: uniform_f32, ln_f32, sincos_turns_f32, exp_f32) ----

__device__ __forceinline__ float kiln_uniform(u32 w) {
    return __fmul_rn(__uint2float_rn((w >> 8) | 1u), KILN_FB(0x33800000)); // * 2^-24, exact
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
    const float r = __fmul_rn(__int2float_rn((int)j - (int)(q << 22)), KILN_FB(0x34800000)); // 2^-22
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

__device__ __forceinline__ void kiln_box_muller(u32 a, u32 b, float& z0, float& z1) {
    const float r = __fsqrt_rn(__fmul_rn(-2.0f, kiln_ln(kiln_uniform(a))));
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
    // (j - 2^23) * c, c = 2 pi 2^-24, as one fused step: j and 2^23 c are exact, so this is
    // the single rounding of the exact product.
    const float t = __fmaf_rn(__uint2float_rn((b >> 8) | 1u), KILN_FB(0x34c90fdb), -KILN_FB(0x40490fdb));
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
__device__ __forceinline__ void kiln_normals4(u32 block, u32 sample, u32 option, const KilnKeys& ks, float z[4]) {
    u32 w0 = block, w1 = sample, w2 = option, w3 = 0u;
    kiln_philox10(w0, w1, w2, w3, ks);
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

// One sample (a path, or an antithetic pair averaged), kiln_cpu paths.rs `run_group`: the
// full calls of 4 steps without a bound check, then the last partial call.
template <int STYLE, bool ANTI, bool FAST>
__device__ __forceinline__ KilnOut kiln_sample(const KilnPath& o, const u32* __restrict__ up,
                                               const double* __restrict__ dp, u32 sample, const KilnKeys& ks) {
    float x = 0.0f, xa = 0.0f;
    KilnState<STYLE, FAST> st, sta;
    st.init();
    sta.init();
    const u32 full = o.steps / 4u, rest = o.steps % 4u;
    for (u32 b = 0; b < full; ++b) {
        float z[4];
        kiln_normals4<FAST>(b, sample, o.option, ks, z);
        kiln_steps<STYLE, ANTI, FAST, 4>(o, b * 4u, z, x, xa, st, sta, 4u);
    }
    if (rest != 0u) {
        float z[4];
        kiln_normals4<FAST>(full, sample, o.option, ks, z);
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
template <int STYLE, bool FAST>
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
                v = antithetic ? kiln_sample<STYLE, true, FAST>(o, up, dp, (u32)s, ks)
                               : kiln_sample<STYLE, false, FAST>(o, up, dp, (u32)s, ks);
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

#define KILN_MC_KERNEL(NAME, STYLE, FAST)                                                             \
    extern "C" __global__ void __launch_bounds__(256, 6) NAME(                                        \
        const u32* __restrict__ uparams, const double* __restrict__ dparams, u32 n_options,          \
        u64 first_block, u64 launch_blocks, u64 samples, const KilnKeys keys, u32 antithetic,        \
        double* __restrict__ out) {                                                                  \
        kiln_mc_blocks<STYLE, FAST>(uparams, dparams, n_options, first_block, launch_blocks, samples, \
                                    keys, antithetic, out);                                          \
    }

KILN_MC_KERNEL(mc_european_f64, ST_EURO, false)
KILN_MC_KERNEL(mc_asian_arithmetic_f64, ST_ASIAN_A, false)
KILN_MC_KERNEL(mc_asian_geometric_f64, ST_ASIAN_G, false)
KILN_MC_KERNEL(mc_barrier_up_out_f64, ST_UP_OUT, false)
KILN_MC_KERNEL(mc_barrier_up_in_f64, ST_UP_IN, false)
KILN_MC_KERNEL(mc_barrier_down_out_f64, ST_DOWN_OUT, false)
KILN_MC_KERNEL(mc_barrier_down_in_f64, ST_DOWN_IN, false)
KILN_MC_KERNEL(mc_european_fast_f64, ST_EURO, true)
KILN_MC_KERNEL(mc_asian_arithmetic_fast_f64, ST_ASIAN_A, true)
KILN_MC_KERNEL(mc_asian_geometric_fast_f64, ST_ASIAN_G, true)
KILN_MC_KERNEL(mc_barrier_up_out_fast_f64, ST_UP_OUT, true)
KILN_MC_KERNEL(mc_barrier_up_in_fast_f64, ST_UP_IN, true)
KILN_MC_KERNEL(mc_barrier_down_out_fast_f64, ST_DOWN_OUT, true)
KILN_MC_KERNEL(mc_barrier_down_in_fast_f64, ST_DOWN_IN, true)

// Adds each option's `nb` block sums (consecutive in `blocks`, 7 doubles each) in block
// order onto its running totals: totals[o * 7 + j] += blocks[(o * nb + b) * 7 + j], b = 0..nb.
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

// Self-test of the portable math on words w[i]: out[i * 7 + ...] = uniform, ln(uniform),
// sin, cos (of 2 pi uniform), exp(x[i]), the first Box-Muller normal of (w[i], w[i]+1), and
// the fast_math one of the same words, as f32 bits; philox[i * 4 ..] = the Philox words of
// counter [i, w[i], 7, 0], key (k0, k1).
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
    u32 c0 = i, c1 = wi, c2 = 7u, c3 = 0u;
    const KilnKeys ks = kiln_key_schedule(k0, k1);
    kiln_philox10(c0, c1, c2, c3, ks);
    philox[i * 4 + 0] = c0;
    philox[i * 4 + 1] = c1;
    philox[i * 4 + 2] = c2;
    philox[i * 4 + 3] = c3;
}
