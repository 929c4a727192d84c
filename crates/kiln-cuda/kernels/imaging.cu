// Image and volume correlation (scipy.ndimage.correlate semantics, no kernel flip) on
// contiguous f32 data: 2-D direct (a batch of (H, W) planes), 1-D passes along any axis
// of a (D, H, W) array (the separable path), 3-D direct for k = 3, 5, 7.
//
// Boundary modes (code: 0 constant, 1 nearest, 2 reflect, 3 mirror, 4 wrap) are mapped by
// kiln_map, a transcription of BoundaryMode::map_index: any distance outside, size-1 axes.
// Weights arrive by value in a kernel-parameter struct (the constant bank), so a
// compile-time-indexed weight is an FFMA operand with no load. Sums run in f32 with fma in
// row-major tap order, starting from 0 (the CPU sums the same taps in f64).
//
// Launch shapes (the host validates them; see launch_imaging.rs):
// - filter2d_k{5,7}_f32, filter2d_kn_f32: block 32x8, tile 32 wide x 64 tall (each
//   thread 8 vertically adjacent outputs, reusing each shared row it reads for every output
//   row it touches), grid (ceil(W/32), min(ceil(H/64), 65535), min(N, 65535)), grid-stride
//   in y and z; dynamic shared (32+2r)*(64+2r) floats.
// - filter1d_x_f32: along the contiguous axis. Block 32x8, one warp per line segment of
//   128 outputs, grid (ceil(W/128), min(ceil(lines/8), 65535)); dynamic shared 8*(128+2r).
// - filter1d_s_f32: along a strided axis; block 32 across x 8 along (4 outputs each),
//   grid (ceil(A/32), min(ceil(L/32), 65535), min(O, 65535)); dynamic shared (32+2r)*32.
// - filter3d_k{3,7}_f32: block 32x8 covering a 32x32 (y, x) tile, marching along z over
//   zc planes: each plane tile (+halo) is staged in shared (double-buffered, prefetched in
//   registers), and every thread keeps a K-deep ring of partial sums per output in
//   registers, so each input plane is read from global once per block.
//
// One kernel a program: kiln compiles each kernel below alone, as its own NVRTC program with
// -DKILN_ONLY -DKILN_K_<name> (kernels.rs), so a process compiles only what it launches;
// without KILN_ONLY the whole file compiles (the compile test, the ptxas_info example).

typedef long long i64;

struct W2 { float w[961]; };
struct W1 { float w[32]; };
struct W3 { float w[343]; };

__device__ __forceinline__ int kiln_map(int i, int n, int mode) {
    if (i >= 0 && i < n) return i;
    if (mode == 0) return -1;
    if (mode == 1) return i < 0 ? 0 : n - 1;
    if (mode == 4) { int p = i % n; return p < 0 ? p + n : p; }
    if (n == 1) return 0;
    if (mode == 2) { const int m = 2 * n; int p = i % m; if (p < 0) p += m; return p < n ? p : m - 1 - p; }
    const int m = 2 * n - 2; int p = i % m; if (p < 0) p += m; return p < n ? p : m - p;
}

#define T2X 32
#define T2B 8
#define R2 8
#define T2Y (T2B * R2)

// K > 0: compile-time kernel side; K == 0: runtime side `kr`.
template <int K>
__device__ __forceinline__ void filter2d_body(const float* __restrict__ src, float* __restrict__ dst, int N, int H,
                                              int W, const W2& wt, int kr, int mode, float cval) {
    extern __shared__ float tile[];
    const int k = K > 0 ? K : kr;
    const int r = k / 2;
    const int SW = T2X + 2 * r, SH = T2Y + 2 * r;
    const int tiles_y = (H + T2Y - 1) / T2Y;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * T2X + tx;
    const int x0 = blockIdx.x * T2X;
    for (int n = blockIdx.z; n < N; n += gridDim.z) {
        const float* __restrict__ img = src + (i64)n * H * W;
        float* __restrict__ out = dst + (i64)n * H * W;
        for (int by = blockIdx.y; by < tiles_y; by += gridDim.y) {
            const int y0 = by * T2Y;
            const int gx0 = x0 - r, gy0 = y0 - r;
            const bool inside = gx0 >= 0 && gy0 >= 0 && gx0 + SW <= W && gy0 + SH <= H;
            if (K > 0) {
                // All loads first (independent, in flight together), then the stores.
                const int NL = ((T2X + K - 1) * (T2Y + K - 1) + T2X * T2B - 1) / (T2X * T2B);
                float v[NL];
#pragma unroll
                for (int s = 0; s < NL; ++s) {
                    const int i = tid + s * T2X * T2B;
                    v[s] = cval;
                    if (i < SW * SH) {
                        const int sy = i / SW, sx = i - sy * SW;
                        int gy = gy0 + sy, gx = gx0 + sx;
                        if (!inside) { gy = kiln_map(gy, H, mode); gx = kiln_map(gx, W, mode); }
                        if (gy >= 0 && gx >= 0) v[s] = img[(i64)gy * W + gx];
                    }
                }
#pragma unroll
                for (int s = 0; s < NL; ++s) {
                    const int i = tid + s * T2X * T2B;
                    if (i < SW * SH) tile[i] = v[s];
                }
            } else {
                for (int i = tid; i < SW * SH; i += T2X * T2B) {
                    const int sy = i / SW, sx = i - sy * SW;
                    const int gy = kiln_map(gy0 + sy, H, mode), gx = kiln_map(gx0 + sx, W, mode);
                    tile[i] = (gy < 0 || gx < 0) ? cval : img[(i64)gy * W + gx];
                }
            }
            __syncthreads();
            float acc[R2];
#pragma unroll
            for (int j = 0; j < R2; ++j) acc[j] = 0.0f;
            if (K > 0) {
#pragma unroll
                for (int rr = 0; rr < R2 + K - 1; ++rr) {
                    const float* row = tile + (ty * R2 + rr) * SW + tx;
                    float v[K > 0 ? K : 1];
#pragma unroll
                    for (int c = 0; c < K; ++c) v[c] = row[c];
#pragma unroll
                    for (int j = 0; j < R2; ++j) {
                        const int a = rr - j;
                        if (a >= 0 && a < K) {
#pragma unroll
                            for (int c = 0; c < K; ++c) acc[j] = fmaf(wt.w[a * K + c], v[c], acc[j]);
                        }
                    }
                }
            } else {
#pragma unroll
                for (int j = 0; j < R2; ++j) {
                    for (int a = 0; a < k; ++a) {
                        const float* row = tile + (ty * R2 + j + a) * SW + tx;
                        for (int c = 0; c < k; ++c) acc[j] = fmaf(wt.w[a * k + c], row[c], acc[j]);
                    }
                }
            }
            const int gx = x0 + tx;
#pragma unroll
            for (int j = 0; j < R2; ++j) {
                const int gy = y0 + ty * R2 + j;
                if (gy < H && gx < W) out[(i64)gy * W + gx] = acc[j];
            }
            __syncthreads();
        }
    }
}

// MINB: blocks per SM the register allocation must allow. (k = 3 runs the register kernels
// filter2d_k3r{8,4}_f32 below.)
#define KILN_F2D(NAME, K, MINB)                                                                        \
extern "C" __global__ void __launch_bounds__(256, MINB) NAME(const float* __restrict__ src,            \
    float* __restrict__ dst, int N, int H, int W, const W2 wt, int k, int mode, float cval) {          \
    filter2d_body<K>(src, dst, N, H, W, wt, k, mode, cval);                                            \
}

#if !defined(KILN_ONLY) || defined(KILN_K_filter2d_k5_f32)
KILN_F2D(filter2d_k5_f32, 5, 1)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_filter2d_k7_f32)
KILN_F2D(filter2d_k7_f32, 7, 1)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_filter2d_kn_f32)
KILN_F2D(filter2d_kn_f32, 0, 1)
#endif

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

#define R3 4
template <int K>
__device__ __forceinline__ void filter3d_body(const float* __restrict__ src, float* __restrict__ dst, int D, int H,
                                              int W, const W3& wt, int mode, float cval, int zc) {
    const int r = K / 2;
    const int SW = 32 + 2 * r, SH = 8 * R3 + 2 * r;
    const int NS = (SW * SH + 255) / 256;
    __shared__ float buf[2][SW * SH];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 32 + tx;
    const int x0 = blockIdx.x * 32, y0 = blockIdx.y * (8 * R3);
    const int z0 = blockIdx.z * zc, z1 = min(D, z0 + zc);
    const i64 HW = (i64)H * W;
    // The (y, x) source offset of each of this thread's staging slots: the same in every
    // plane, so the boundary mapping runs once. -1: cval; -2: no slot.
    int off[NS];
#pragma unroll
    for (int s = 0; s < NS; ++s) {
        const int i = tid + s * 256;
        off[s] = -2;
        if (i < SW * SH) {
            const int sy = i / SW, sx = i - sy * SW;
            const int my = kiln_map(y0 - r + sy, H, mode), mx = kiln_map(x0 - r + sx, W, mode);
            off[s] = (my < 0 || mx < 0) ? -1 : my * W + mx;
        }
    }
    float pre[NS];
    float acc[R3][K];
#pragma unroll
    for (int j = 0; j < R3; ++j)
#pragma unroll
        for (int q = 0; q < K; ++q) acc[j][q] = 0.0f;
    {
        const int pz = kiln_map(z0 - r, D, mode);
#pragma unroll
        for (int s = 0; s < NS; ++s) pre[s] = (off[s] >= 0 && pz >= 0) ? src[pz * HW + off[s]] : cval;
#pragma unroll
        for (int s = 0; s < NS; ++s) if (off[s] != -2) buf[0][tid + s * 256] = pre[s];
    }
    int cur = 0;
    const int plast = z1 - 1 + r;
    for (int p = z0 - r; p <= plast; ++p) {
        __syncthreads();
        const bool more = p < plast;
        if (more) {
            const int pz = kiln_map(p + 1, D, mode);
#pragma unroll
            for (int s = 0; s < NS; ++s) pre[s] = (off[s] >= 0 && pz >= 0) ? src[pz * HW + off[s]] : cval;
        }
        const float* b = buf[cur];
#pragma unroll
        for (int rr = 0; rr < R3 + K - 1; ++rr) {
            const float* row = b + (ty * R3 + rr) * SW + tx;
            float v[K];
#pragma unroll
            for (int c = 0; c < K; ++c) v[c] = row[c];
#pragma unroll
            for (int j = 0; j < R3; ++j) {
                const int bb = rr - j;
                if (bb >= 0 && bb < K) {
#pragma unroll
                    for (int a = 0; a < K; ++a)
#pragma unroll
                        for (int c = 0; c < K; ++c)
                            acc[j][K - 1 - a] = fmaf(wt.w[(a * K + bb) * K + c], v[c], acc[j][K - 1 - a]);
                }
            }
        }
        const int z = p - r;
        if (z >= z0) {
            const int x = x0 + tx;
#pragma unroll
            for (int j = 0; j < R3; ++j) {
                const int y = y0 + ty * R3 + j;
                if (y < H && x < W) dst[z * HW + (i64)y * W + x] = acc[j][0];
            }
        }
#pragma unroll
        for (int j = 0; j < R3; ++j) {
#pragma unroll
            for (int q = 0; q < K - 1; ++q) acc[j][q] = acc[j][q + 1];
            acc[j][K - 1] = 0.0f;
        }
        if (more) {
#pragma unroll
            for (int s = 0; s < NS; ++s) if (off[s] != -2) buf[cur ^ 1][tid + s * 256] = pre[s];
        }
        cur ^= 1;
    }
}

#define KILN_F3D(NAME, K)                                                                              \
extern "C" __global__ void __launch_bounds__(256) NAME(const float* __restrict__ src, float* __restrict__ dst, \
    int D, int H, int W, const W3 wt, int mode, float cval, int zc) {                                  \
    filter3d_body<K>(src, dst, D, H, W, wt, mode, cval, zc);                                           \
}

#if !defined(KILN_ONLY) || defined(KILN_K_filter3d_k3_f32)
KILN_F3D(filter3d_k3_f32, 3)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_filter3d_k7_f32)
KILN_F3D(filter3d_k7_f32, 7)
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

// ---------------------------------------------------------------------------------------
// filter2d_k3r{8,4}_f32: direct 3x3 correlation with no shared memory and no barrier. Block
// 32x4; warp ty owns the K3S-row strip starting at y0 + ty*K3S of a 128-wide, 4*K3S-tall
// tile, each lane 4 adjacent columns. A thread loads its K3S+2 input rows at once (one
// float4 a row; the left/right neighbours come from the adjacent lanes by shuffle, lanes 0
// and 31 load the tile's edge columns, mapped through the boundary mode once), computes
// K3S x 4 outputs from registers and stores float4s. Rows are mapped through the boundary
// mode only in strips that touch the top or bottom edge. Tiles that are partial in x, or
// images with W % 4 != 0 or unaligned buffers, take the generic path (every column mapped,
// scalar loads and stores). Weights: the 9 taps row-major in w.w[0..9]. Sum order: row-major
// tap order with fma from 0, as filter2d_body.
// Grid (ceil(W/128), min(ceil(H/(4*K3S)), 65535), min(N, 65535)), grid-stride in y and z.
#define K3FULL 0xffffffffu

template <int K3S, bool MAPROWS>
__device__ __forceinline__ void k3r_fast(const float* __restrict__ img, float* __restrict__ out, int H, int W,
                                         int ys, int x, int lane, int xl, int xr, const W1& wt, int mode,
                                         float cval) {
    float v[K3S + 2][6];
#pragma unroll
    for (int i = 0; i < K3S + 2; ++i) {
        const int gy = ys - 1 + i;
        const int my = MAPROWS ? kiln_map(gy, H, mode) : gy;
        if (my >= 0) {
            const float* row = img + my * W;
            const float4 f = __ldg(reinterpret_cast<const float4*>(row + x));
            float e = cval;
            if (lane == 0 && xl >= 0) e = __ldg(row + xl);
            if (lane == 31 && xr >= 0) e = __ldg(row + xr);
            const float l = __shfl_up_sync(K3FULL, f.w, 1);
            const float r = __shfl_down_sync(K3FULL, f.x, 1);
            v[i][0] = lane == 0 ? e : l;
            v[i][1] = f.x;
            v[i][2] = f.y;
            v[i][3] = f.z;
            v[i][4] = f.w;
            v[i][5] = lane == 31 ? e : r;
        } else {
#pragma unroll
            for (int c = 0; c < 6; ++c) v[i][c] = cval;
        }
    }
#pragma unroll
    for (int s = 0; s < K3S; ++s) {
        const int y = ys + s;
        float o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float acc = 0.0f;
#pragma unroll
            for (int a = 0; a < 3; ++a)
#pragma unroll
                for (int c = 0; c < 3; ++c) acc = fmaf(wt.w[a * 3 + c], v[s + a][e + c], acc);
            o[e] = acc;
        }
        if (y < H) *reinterpret_cast<float4*>(out + y * W + x) = make_float4(o[0], o[1], o[2], o[3]);
    }
}

template <int K3S>
__device__ __forceinline__ void k3r_generic(const float* __restrict__ img, float* __restrict__ out, int H, int W,
                                            int ys, int x, const W1& wt, int mode, float cval) {
    int cm[6];
#pragma unroll
    for (int c = 0; c < 6; ++c) cm[c] = kiln_map(x - 1 + c, W, mode);
    float v[K3S + 2][6];
#pragma unroll
    for (int i = 0; i < K3S + 2; ++i) {
        const int my = kiln_map(ys - 1 + i, H, mode);
        const int ro = my < 0 ? -1 : my * W;
#pragma unroll
        for (int c = 0; c < 6; ++c) v[i][c] = (ro >= 0 && cm[c] >= 0) ? __ldg(img + ro + cm[c]) : cval;
    }
#pragma unroll
    for (int s = 0; s < K3S; ++s) {
        const int y = ys + s;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float acc = 0.0f;
#pragma unroll
            for (int a = 0; a < 3; ++a)
#pragma unroll
                for (int c = 0; c < 3; ++c) acc = fmaf(wt.w[a * 3 + c], v[s + a][e + c], acc);
            if (y < H && x + e < W) out[y * W + x + e] = acc;
        }
    }
}

template <int K3S>
__device__ __forceinline__ void k3r_body(const float* __restrict__ src, float* __restrict__ dst, int N, int H, int W,
                                         const W1& wt, int mode, float cval) {
    const int lane = threadIdx.x, ty = threadIdx.y;
    const int x0 = blockIdx.x * 128, x = x0 + 4 * lane;
    const int tiles_y = (H + 4 * K3S - 1) / (4 * K3S);
    const i64 HW = (i64)H * W;
    // Block-uniform: the whole 128-column tile is inside the image and float4-aligned.
    const bool xfast = (W & 3) == 0 && x0 + 128 <= W && ((((unsigned long long)src) | ((unsigned long long)dst)) & 15) == 0;
    const int xl = kiln_map(x0 - 1, W, mode), xr = kiln_map(x0 + 128, W, mode);
    for (int n = blockIdx.z; n < N; n += gridDim.z) {
        const float* __restrict__ img = src + n * HW;
        float* __restrict__ out = dst + n * HW;
        for (int by = blockIdx.y; by < tiles_y; by += gridDim.y) {
            const int ys = by * 4 * K3S + ty * K3S;
            if (ys >= H) continue;
            if (xfast) {
                if (ys >= 1 && ys + K3S + 1 <= H)
                    k3r_fast<K3S, false>(img, out, H, W, ys, x, lane, xl, xr, wt, mode, cval);
                else
                    k3r_fast<K3S, true>(img, out, H, W, ys, x, lane, xl, xr, wt, mode, cval);
            } else {
                k3r_generic<K3S>(img, out, H, W, ys, x, wt, mode, cval);
            }
        }
    }
}

// K3S = 8 rows a thread (128 registers, 4 blocks = 16 warps an SM, 10 float4 loads in flight
// a thread) and K3S = 4 (6 float4 loads, more warps).
#if !defined(KILN_ONLY) || defined(KILN_K_filter2d_k3r8_f32)
extern "C" __global__ void __launch_bounds__(128, 4) filter2d_k3r8_f32(const float* __restrict__ src,
    float* __restrict__ dst, int N, int H, int W, const W1 wt, int mode, float cval) {
    k3r_body<8>(src, dst, N, H, W, wt, mode, cval);
}
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_filter2d_k3r4_f32)
extern "C" __global__ void __launch_bounds__(128, 6) filter2d_k3r4_f32(const float* __restrict__ src,
    float* __restrict__ dst, int N, int H, int W, const W1 wt, int mode, float cval) {
    k3r_body<4>(src, dst, N, H, W, wt, mode, cval);
}
#endif

// ---------------------------------------------------------------------------------------
// filter3d_zm5_f32 (K = 5, RY = 4 rows a thread):
// z-marching direct 3-D correlation through a ring of cp.async plane buffers. Block 32x8
// owns a 32 x 8*RY (x, y) output tile (lane tx the column x0+tx, warp ty the RY rows from
// y0+RY*ty) and walks along z over zc output planes, reading each of the zc+2r input planes
// (tile + halo) from global memory once: plane q+2 is copied into shared memory (cp.async,
// no registers staged) while plane q is summed, so two planes are in flight a block, and
// one barrier a plane orders the ring (3 buffers: the one refilled at step q was summed at
// step q-1, which every thread has left at step q's barrier). Each thread keeps the K-deep
// ring of partial sums of its RY outputs in registers, so an output's K^3 taps are summed
// in row-major tap order with fma from 0 (plane a, then row b, then column c), exactly as
// filter3d_k{3,7}_f32.
//
// Boundary mode at load time: each thread's copy slots (source offset within a plane, or
// -1: cval) are mapped once a block; cval slots are written once into every ring buffer and
// never copied; a plane outside the volume (constant mode) is mapped once a plane and
// filled with cval. Fast path (block-uniform: W % 4 == 0, the tile's 32 columns inside the
// row, src 16-byte aligned): the 32 interior columns of each halo row as 8 16-byte copies,
// the 2r halo columns as 4-byte copies. Otherwise every halo element is a 4-byte copy. The
// sums never branch on position.
//
// Shared plane layout: rows of ZSS = 40 floats; x0+i at column 4+i (16-byte aligned), the
// left halo at columns 4-r.., the right halo from 36 (r <= 4).
// Grid (ceil(W/32), ceil(H/(8*RY)), ceil(D/zc)); static shared 3*(8*RY+2r)*40 floats.
#define ZTX 32
#define ZSS 40
#define ZNB 3

// cp.async (sm_80+) of 4 / 16 bytes from global `src` to shared `dst`; before sm_80 a plain
// load and store (the ring then has nothing in flight, but the same barriers order it).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define KILN_ZM_CP_ASYNC 1
#else
#define KILN_ZM_CP_ASYNC 0
#endif
__device__ __forceinline__ void zm_cp4(float* dst, const float* src) {
#if KILN_ZM_CP_ASYNC
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
#else
    *dst = __ldg(src);
#endif
}
__device__ __forceinline__ void zm_cp16(float* dst, const float* src) {
#if KILN_ZM_CP_ASYNC
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#else
    *reinterpret_cast<float4*>(dst) = __ldg(reinterpret_cast<const float4*>(src));
#endif
}
__device__ __forceinline__ void zm_commit() {
#if KILN_ZM_CP_ASYNC
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most one of this thread's committed groups is pending.
__device__ __forceinline__ void zm_wait1() {
#if KILN_ZM_CP_ASYNC
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
#endif
}

// XF: the fast path's slots (see above).
template <int K, int RY, bool XF>
__device__ __forceinline__ void filter3d_zm_body(const float* __restrict__ src, float* __restrict__ dst, int D,
                                                 int H, int W, const W3& wt, int mode, float cval, int zc,
                                                 float* __restrict__ buf) {
    constexpr int r = K / 2;
    constexpr int SH = 8 * RY + 2 * r, SW = ZTX + 2 * r;
    constexpr int PL = SH * ZSS;
    constexpr int NV = XF ? (SH * 8 + 255) / 256 : 0;      // 16-byte slots a thread
    constexpr int NH = XF ? (SH * 2 * r + 255) / 256 : 0;  // 4-byte halo-column slots
    constexpr int NG = XF ? 0 : (SH * SW + 255) / 256;     // 4-byte slots (generic path)
    constexpr int NS = NV + NH + NG;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 32 + tx;
    const int x0 = blockIdx.x * ZTX, y0 = blockIdx.y * (8 * RY);
    const int z0 = blockIdx.z * zc, z1 = min(D, z0 + zc);
    const i64 HW = (i64)H * W;
    // Slot s: source offset within a plane (-1: cval, -2: no slot) and shared offset.
    int off[NS], sof[NS];
#pragma unroll
    for (int s = 0; s < NS; ++s) {
        off[s] = -2;
        sof[s] = 0;
        if (s < NV) {
            const int i = tid + s * 256;
            if (i < SH * 8) {
                const int sy = i >> 3, q = i & 7;
                const int my = kiln_map(y0 - r + sy, H, mode);
                off[s] = my < 0 ? -1 : my * W + x0 + 4 * q;
                sof[s] = sy * ZSS + 4 + 4 * q;
            }
        } else if (s < NV + NH) {
            const int i = tid + (s - NV) * 256;
            if (i < SH * 2 * r) {
                const int sy = i / (2 * r), c = i - sy * (2 * r);
                // c < r: left halo column x0-r+c; else right x0+32+(c-r).
                const int gx = c < r ? x0 - r + c : x0 + ZTX + (c - r);
                const int col = c < r ? 4 - r + c : 4 + ZTX + (c - r);
                const int my = kiln_map(y0 - r + sy, H, mode), mx = kiln_map(gx, W, mode);
                off[s] = (my < 0 || mx < 0) ? -1 : my * W + mx;
                sof[s] = sy * ZSS + col;
            }
        } else {
            const int i = tid + s * 256;
            if (i < SH * SW) {
                const int sy = i / SW, sx = i - sy * SW;
                const int my = kiln_map(y0 - r + sy, H, mode), mx = kiln_map(x0 - r + sx, W, mode);
                off[s] = (my < 0 || mx < 0) ? -1 : my * W + mx;
                sof[s] = sy * ZSS + 4 - r + sx;
            }
        }
    }
    // A cval slot holds cval in every ring buffer from here on (no copy ever targets it); the
    // first barrier of the loop publishes these stores.
#pragma unroll
    for (int s = 0; s < NS; ++s) {
        if (off[s] == -1) {
#pragma unroll
            for (int b = 0; b < ZNB; ++b) {
                float* d = buf + b * PL + sof[s];
                if (s < NV)
                    *reinterpret_cast<float4*>(d) = make_float4(cval, cval, cval, cval);
                else
                    *d = cval;
            }
        }
    }
    const int np = z1 - z0 + 2 * r;  // input planes z0-r .. z1-1+r
    // Copies relative plane q (absolute z0 - r + q) into ring buffer b, then commits a group
    // (empty past the last plane, so the group count stays one a plane). A plane outside the
    // volume (constant mode only) is cval in every slot.
    auto issue = [&](int q, int b) {
        if (q < np) {
            const int pz = kiln_map(z0 - r + q, D, mode);
            if (pz >= 0) {
                const float* plane = src + pz * HW;
                float* base = buf + b * PL;
#pragma unroll
                for (int s = 0; s < NS; ++s) {
                    if (off[s] < 0) continue;
                    if (s < NV)
                        zm_cp16(base + sof[s], plane + off[s]);
                    else
                        zm_cp4(base + sof[s], plane + off[s]);
                }
            } else {
#pragma unroll
                for (int s = 0; s < NS; ++s) {
                    if (off[s] < 0) continue;
                    float* d = buf + b * PL + sof[s];
                    if (s < NV)
                        *reinterpret_cast<float4*>(d) = make_float4(cval, cval, cval, cval);
                    else
                        *d = cval;
                }
            }
        }
        zm_commit();
    };
    float acc[RY][K];
#pragma unroll
    for (int j = 0; j < RY; ++j)
#pragma unroll
        for (int a = 0; a < K; ++a) acc[j][a] = 0.0f;
    const int x = x0 + tx, yt = y0 + ty * RY;
    // This thread's output column at plane z0 (then the next, ...); rows at or past H (or
    // x past W) are not stored.
    float* __restrict__ oc = dst + z0 * HW + (i64)yt * W + x;
    const int nrows = x < W ? min(RY, H - yt) : 0;
    issue(0, 0);
    issue(1, 1);
    int cur = 0;
    for (int q = 0; q < np; ++q) {
        zm_wait1();       // this thread's copies of plane q are done ...
        __syncthreads();  // ... and everyone's, and every thread has left plane q-1's buffer
        issue(q + 2, cur == 0 ? ZNB - 1 : cur - 1);
        const float* b = buf + cur * PL;
#pragma unroll
        for (int rr = 0; rr < RY + K - 1; ++rr) {
            const float* row = b + (ty * RY + rr) * ZSS + (4 - r) + tx;
            float v[K];
#pragma unroll
            for (int c = 0; c < K; ++c) v[c] = row[c];
#pragma unroll
            for (int j = 0; j < RY; ++j) {
                const int bb = rr - j;
                if (bb >= 0 && bb < K) {
#pragma unroll
                    for (int a = 0; a < K; ++a)
#pragma unroll
                        for (int c = 0; c < K; ++c)
                            acc[j][K - 1 - a] = fmaf(wt.w[(a * K + bb) * K + c], v[c], acc[j][K - 1 - a]);
                }
            }
        }
        // acc[j][0] is output plane z0 - 2r + q, complete (its last plane was q).
        if (q >= 2 * r) {
#pragma unroll
            for (int j = 0; j < RY; ++j)
                if (j < nrows) oc[j * W] = acc[j][0];
            oc += HW;
        }
#pragma unroll
        for (int j = 0; j < RY; ++j) {
#pragma unroll
            for (int a = 0; a < K - 1; ++a) acc[j][a] = acc[j][a + 1];
            acc[j][K - 1] = 0.0f;
        }
        cur = cur == ZNB - 1 ? 0 : cur + 1;
    }
}

template <int K, int RY>
__device__ __forceinline__ void filter3d_zm(const float* __restrict__ src, float* __restrict__ dst, int D, int H,
                                            int W, const W3& wt, int mode, float cval, int zc) {
    __shared__ __align__(16) float buf[ZNB * (8 * RY + 2 * (K / 2)) * ZSS];
    // Block-uniform: the tile's 32 interior columns are whole 16-byte pieces of the row.
    const bool xfast = (W & 3) == 0 && blockIdx.x * ZTX + ZTX <= W && (((unsigned long long)src) & 15) == 0;
    if (xfast)
        filter3d_zm_body<K, RY, true>(src, dst, D, H, W, wt, mode, cval, zc, buf);
    else
        filter3d_zm_body<K, RY, false>(src, dst, D, H, W, wt, mode, cval, zc, buf);
}

// RY = 4 rows a thread: a 32x32 tile; MINB 2.
#define KILN_F3DZM(NAME, K, RY, MINB)                                                                  \
extern "C" __global__ void __launch_bounds__(256, MINB) NAME(const float* __restrict__ src,            \
    float* __restrict__ dst, int D, int H, int W, const W3 wt, int mode, float cval, int zc) {         \
    filter3d_zm<K, RY>(src, dst, D, H, W, wt, mode, cval, zc);                                         \
}

#if !defined(KILN_ONLY) || defined(KILN_K_filter3d_zm5_f32)
KILN_F3DZM(filter3d_zm5_f32, 5, 4, 2)
#endif
