#line 1 "separable.cu"
// The separable path (imaging.cuh comes first): 1-D passes along any axis of a (D, H, W)
// array, and both 2-D passes fused.
//
// - filter1d_x_f32: along the contiguous axis. Block 32x8, one warp per line segment of
//   128 outputs, grid (ceil(W/128), min(ceil(lines/8), 65535)); dynamic shared 8*(128+2r).
// - filter1d_s_f32: along a strided axis; block 32 across x 8 along (4 outputs each),
//   grid (ceil(A/32), min(ceil(L/32), 65535), min(O, 65535)); dynamic shared (32+2r)*32.

// One 1-D pass along the contiguous axis of `lines` rows of length W.
#if !defined(KILN_ONLY) || defined(KILN_K_filter1d_x_f32)
extern "C" __global__ void __launch_bounds__(256) filter1d_x_f32(const float* __restrict__ src,
    float* __restrict__ dst, int lines, int W, const W1 wt, int k, int mode, float cval) {
    extern __shared__ float tile[];
    const int r = k / 2, SL = 128 + 2 * r;
    const int tx = threadIdx.x, ty = threadIdx.y;
    float* s = tile + ty * SL;
    const int x0 = blockIdx.x * 128;
    for (int l = blockIdx.y * 8 + ty; l < lines; l += gridDim.y * 8) {
        const float* __restrict__ in = src + (i64)l * W;
        float* __restrict__ out = dst + (i64)l * W;
        for (int i = tx; i < SL; i += 32) {
            const int m = kiln_map(x0 - r + i, W, mode);
            s[i] = m < 0 ? cval : in[m];
        }
        __syncwarp();
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int x = x0 + tx + 32 * p;
            if (x < W) {
                float acc = 0.0f;
                const float* q = s + tx + 32 * p;
                for (int c = 0; c < k; ++c) acc = fmaf(wt.w[c], q[c], acc);
                out[x] = acc;
            }
        }
        __syncwarp();
    }
}
#endif

// One 1-D pass along a strided axis: element (o, l, i) at o*so + l*sa + i, l in [0, L)
// filtered, i in [0, A) contiguous (coalesced), o in [0, O).
#if !defined(KILN_ONLY) || defined(KILN_K_filter1d_s_f32)
extern "C" __global__ void __launch_bounds__(256) filter1d_s_f32(const float* __restrict__ src,
    float* __restrict__ dst, int L, i64 sa, int A, int O, i64 so, const W1 wt, int k, int mode, float cval) {
    extern __shared__ float tile[];
    const int r = k / 2, SL = 32 + 2 * r;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int ia = blockIdx.x * 32 + tx;
    const int tiles_l = (L + 31) / 32;
    for (int o = blockIdx.z; o < O; o += gridDim.z) {
        for (int bl = blockIdx.y; bl < tiles_l; bl += gridDim.y) {
            const int l0 = bl * 32;
            for (int row = ty; row < SL; row += 8) {
                const int gl = kiln_map(l0 - r + row, L, mode);
                tile[row * 32 + tx] = (gl < 0 || ia >= A) ? cval : src[(i64)o * so + (i64)gl * sa + ia];
            }
            __syncthreads();
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int rr = 0; rr < 4 + k - 1; ++rr) {
                const float v = tile[(ty * 4 + rr) * 32 + tx];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int a = rr - j;
                    if (a >= 0 && a < k) acc[j] = fmaf(wt.w[a], v, acc[j]);
                }
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int l = l0 + ty * 4 + j;
                if (l < L && ia < A) dst[(i64)o * so + (i64)l * sa + ia] = acc[j];
            }
            __syncthreads();
        }
    }
}
#endif

// ---------------------------------------------------------------------------------------
// Fused separable 2-D correlation of (N, H, W) planes: both 1-D passes in one kernel, the
// first pass's f32 result kept in shared memory only (same arithmetic as two passes: each
// pass sums its taps in order with fma from 0 and rounds to f32).
//
// sep2d_{vh,hv}_r{R}_f32: R = radius 1..8 (compile time, so every tap is an unrolled FFMA
// with a constant-bank weight and the sliding windows live in registers); vh = pass 1
// along H (axis 1) then pass 2 along W, hv = the reverse. Block 32x8, output tile 128 wide
// x 64 tall; grid (ceil(W/128), min(ceil(H/64), 65535), min(N, 65535)), grid-stride in y, z.
// Static shared memory only.
//
// The boundary mode is applied when the input is loaded (rows and columns mapped through
// per-tile tables; tiles whose halo lies inside the image skip the tables), and the
// intermediate's halo along the second axis is the first pass at the mapped position, which
// is what the second pass's own extension of the intermediate reads; in constant mode
// those halo positions hold cval, as the CPU's extended line does.
//
// vh: phase 1, warp ty, lane tx takes columns c = tx + 32i of the 128+2R halo columns and
//     a strip of 8 output rows: 8+2R loads from global (coalesced across the warp), 8
//     outputs from registers, stored to T[64][round4(128+2R)]. Phase 2: warp ty takes rows
//     ty + 8q; each lane 4 adjacent outputs from 4+2R values read as float4 (conflict-free
//     LDS.128), stored as float4 to global where W % 4 == 0.
// hv: phase 1, warp ty takes rows r = ty + 8q of the 64+2R halo rows, each lane 4 adjacent
//     outputs from 4+2R loads, stored as float4 to T[64+2R][128]. Phase 2: lane tx takes
//     columns tx + 32i, strips of 8 rows from T (8+2R reads), coalesced stores.
#define SX 128
#define SVB 8
#define SY (8 * SVB)

template <int R, bool VH>
__device__ __forceinline__ void sep2d_body(const float* __restrict__ src, float* __restrict__ dst, int N, int H,
                                           int W, const W1& w1, const W1& w2, int mode, float cval) {
    constexpr int K = 2 * R + 1;
    constexpr int NR = SY + 2 * R, NC = SX + 2 * R;
    constexpr int TS = (NC + 3) & ~3;
    constexpr int TSIZE = VH ? SY * TS : NR * SX;
    __shared__ __align__(16) float T[TSIZE];
    __shared__ int rowmap[NR];
    __shared__ int colmap[NC];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 32 + tx;
    const int tiles_y = (H + SY - 1) / SY;
    const int x0 = blockIdx.x * SX;
    const i64 HW = (i64)H * W;
    const bool vec = (W & 3) == 0 && (((unsigned long long)dst) & 15) == 0;
    for (int n = blockIdx.z; n < N; n += gridDim.z) {
        const float* __restrict__ img = src + n * HW;
        float* __restrict__ out = dst + n * HW;
        for (int by = blockIdx.y; by < tiles_y; by += gridDim.y) {
            const int y0 = by * SY;
            const bool inside = x0 - R >= 0 && x0 + SX + R <= W && y0 - R >= 0 && y0 + SY + R <= H;
            if (!inside) {
                // Row table: offset of the mapped row (or -1: cval); column table: mapped column.
                for (int i = tid; i < NR; i += 256) {
                    const int m = kiln_map(y0 - R + i, H, mode);
                    rowmap[i] = m < 0 ? -1 : m * W;
                }
                for (int i = tid; i < NC; i += 256) colmap[i] = kiln_map(x0 - R + i, W, mode);
                __syncthreads();
            }
            if (VH) {
                // Phase 1: vertical pass over the 128+2R halo columns (one column at a time
                // keeps the 8+2R window in registers).
#pragma unroll 1
                for (int i = 0; i < (NC + 31) / 32; ++i) {
                    const int c = tx + 32 * i;
                    if (c < NC) {
                        float v[SVB + 2 * R];
                        bool fill = false;
                        if (inside) {
                            const float* p = img + (y0 - R + ty * SVB) * W + (x0 - R + c);
#pragma unroll
                            for (int a = 0; a < SVB + 2 * R; ++a) v[a] = __ldg(p + a * W);
                        } else {
                            const int mx = colmap[c];
                            fill = mx < 0;
#pragma unroll
                            for (int a = 0; a < SVB + 2 * R; ++a) {
                                const int ro = rowmap[ty * SVB + a];
                                v[a] = (ro >= 0 && mx >= 0) ? __ldg(img + ro + mx) : cval;
                            }
                        }
#pragma unroll
                        for (int j = 0; j < SVB; ++j) {
                            float acc = 0.0f;
#pragma unroll
                            for (int a = 0; a < K; ++a) acc = fmaf(w1.w[a], v[j + a], acc);
                            T[(ty * SVB + j) * TS + c] = fill ? cval : acc;
                        }
                    }
                }
                __syncthreads();
                // Phase 2: horizontal pass, 4 adjacent outputs a lane.
                constexpr int NL = (4 + 2 * R + 3) / 4;
                const int gx = x0 + 4 * tx;
#pragma unroll 2
                for (int q = 0; q < SY / 8; ++q) {
                    const int j = ty + 8 * q;
                    const int gy = y0 + j;
                    if (gy < H && gx < W) {
                        const float4* rp = reinterpret_cast<const float4*>(T + j * TS) + tx;
                        float v[4 * NL];
#pragma unroll
                        for (int m = 0; m < NL; ++m) {
                            const float4 f = rp[m];
                            v[4 * m] = f.x;
                            v[4 * m + 1] = f.y;
                            v[4 * m + 2] = f.z;
                            v[4 * m + 3] = f.w;
                        }
                        float o[4];
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            float acc = 0.0f;
#pragma unroll
                            for (int c = 0; c < K; ++c) acc = fmaf(w2.w[c], v[e + c], acc);
                            o[e] = acc;
                        }
                        float* op = out + gy * W + gx;
                        if (vec && gx + 3 < W) {
                            *reinterpret_cast<float4*>(op) = make_float4(o[0], o[1], o[2], o[3]);
                        } else {
#pragma unroll
                            for (int e = 0; e < 4; ++e)
                                if (gx + e < W) op[e] = o[e];
                        }
                    }
                }
            } else {
                // Phase 1: horizontal pass over the 64+2R halo rows, 4 adjacent outputs a lane.
#pragma unroll 2
                for (int q = 0; q < (NR + 7) / 8; ++q) {
                    const int r = ty + 8 * q;
                    if (r < NR) {
                        float v[4 + 2 * R];
                        bool fill = false;
                        if (inside) {
                            const float* p = img + (y0 - R + r) * W + (x0 - R + 4 * tx);
#pragma unroll
                            for (int e = 0; e < 4 + 2 * R; ++e) v[e] = __ldg(p + e);
                        } else {
                            const int ro = rowmap[r];
                            fill = ro < 0;
#pragma unroll
                            for (int e = 0; e < 4 + 2 * R; ++e) {
                                const int cm = colmap[4 * tx + e];
                                v[e] = (ro >= 0 && cm >= 0) ? __ldg(img + ro + cm) : cval;
                            }
                        }
                        float o[4];
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            float acc = 0.0f;
#pragma unroll
                            for (int c = 0; c < K; ++c) acc = fmaf(w1.w[c], v[e + c], acc);
                            o[e] = fill ? cval : acc;
                        }
                        *reinterpret_cast<float4*>(T + r * SX + 4 * tx) = make_float4(o[0], o[1], o[2], o[3]);
                    }
                }
                __syncthreads();
                // Phase 2: vertical pass, a strip of 8 rows a thread, coalesced stores.
#pragma unroll
                for (int i = 0; i < SX / 32; ++i) {
                    const int c = tx + 32 * i;
                    const int gx = x0 + c;
                    float v[SVB + 2 * R];
#pragma unroll
                    for (int a = 0; a < SVB + 2 * R; ++a) v[a] = T[(ty * SVB + a) * SX + c];
#pragma unroll
                    for (int j = 0; j < SVB; ++j) {
                        float acc = 0.0f;
#pragma unroll
                        for (int a = 0; a < K; ++a) acc = fmaf(w2.w[a], v[j + a], acc);
                        const int gy = y0 + ty * SVB + j;
                        if (gy < H && gx < W) out[gy * W + gx] = acc;
                    }
                }
            }
            __syncthreads();
        }
    }
}

#define KILN_SEP2D(NAME, R, VH)                                                                        \
extern "C" __global__ void __launch_bounds__(256, 4) NAME(const float* __restrict__ src, float* __restrict__ dst, \
    int N, int H, int W, const W1 w1, const W1 w2, int mode, float cval) {                             \
    sep2d_body<R, VH>(src, dst, N, H, W, w1, w2, mode, cval);                                          \
}

#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_vh_r1_f32)
KILN_SEP2D(sep2d_vh_r1_f32, 1, true)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_vh_r2_f32)
KILN_SEP2D(sep2d_vh_r2_f32, 2, true)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_vh_r3_f32)
KILN_SEP2D(sep2d_vh_r3_f32, 3, true)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_vh_r4_f32)
KILN_SEP2D(sep2d_vh_r4_f32, 4, true)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_vh_r5_f32)
KILN_SEP2D(sep2d_vh_r5_f32, 5, true)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_vh_r6_f32)
KILN_SEP2D(sep2d_vh_r6_f32, 6, true)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_vh_r7_f32)
KILN_SEP2D(sep2d_vh_r7_f32, 7, true)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_vh_r8_f32)
KILN_SEP2D(sep2d_vh_r8_f32, 8, true)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_hv_r1_f32)
KILN_SEP2D(sep2d_hv_r1_f32, 1, false)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_hv_r2_f32)
KILN_SEP2D(sep2d_hv_r2_f32, 2, false)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_hv_r3_f32)
KILN_SEP2D(sep2d_hv_r3_f32, 3, false)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_hv_r4_f32)
KILN_SEP2D(sep2d_hv_r4_f32, 4, false)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_hv_r5_f32)
KILN_SEP2D(sep2d_hv_r5_f32, 5, false)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_hv_r6_f32)
KILN_SEP2D(sep2d_hv_r6_f32, 6, false)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_hv_r7_f32)
KILN_SEP2D(sep2d_hv_r7_f32, 7, false)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_sep2d_hv_r8_f32)
KILN_SEP2D(sep2d_hv_r8_f32, 8, false)
#endif
