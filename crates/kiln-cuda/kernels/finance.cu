#line 1 "finance.cu"
// Monte Carlo option pricing under GBM with Philox normals (finance.cuh comes first): the
// probes, the block kernels of every style and the combine kernel.
//
// One kernel a program: kiln compiles each kernel below alone, as its own NVRTC program with
// -DKILN_ONLY -DKILN_K_<name> (kernels.rs), so a process compiles only what it launches;
// without KILN_ONLY the whole file compiles (the compile test, the ptxas_info example).


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
