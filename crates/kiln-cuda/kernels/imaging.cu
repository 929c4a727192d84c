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
// - filter2d_k{3,5,7}_f32, filter2d_kn_f32: block 32x8, tile 32 wide x 64 tall (each
//   thread 8 vertically adjacent outputs, reusing each shared row it reads for every output
//   row it touches), grid (ceil(W/32), min(ceil(H/64), 65535), min(N, 65535)), grid-stride
//   in y and z; dynamic shared (32+2r)*(64+2r) floats.
// - filter1d_x_f32: along the contiguous axis. Block 32x8, one warp per line segment of
//   128 outputs, grid (ceil(W/128), min(ceil(lines/8), 65535)); dynamic shared 8*(128+2r).
// - filter1d_s_f32: along a strided axis; block 32 across x 8 along (4 outputs each),
//   grid (ceil(A/32), min(ceil(L/32), 65535), min(O, 65535)); dynamic shared (32+2r)*32.
// - filter3d_k{3,5,7}_f32: block 32x8 covering a 32x32 (y, x) tile, marching along z over
//   zc planes: each plane tile (+halo) is staged in shared (double-buffered, prefetched in
//   registers), and every thread keeps a K-deep ring of partial sums per output in
//   registers, so each input plane is read from global once per block.

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

// MINB: blocks per SM the register allocation must allow. The 3x3 body took 80 registers
// (3 blocks/SM, 38% occupancy) and ran cross4 16384^2 at 48% of the copy floor, latency bound;
// capping it at 64 registers lets 4 blocks (32 warps) hide the loads.
#define KILN_F2D(NAME, K, MINB)                                                                        \
extern "C" __global__ void __launch_bounds__(256, MINB) NAME(const float* __restrict__ src,            \
    float* __restrict__ dst, int N, int H, int W, const W2 wt, int k, int mode, float cval) {          \
    filter2d_body<K>(src, dst, N, H, W, wt, k, mode, cval);                                            \
}

KILN_F2D(filter2d_k3_f32, 3, 4)
KILN_F2D(filter2d_k5_f32, 5, 1)
KILN_F2D(filter2d_k7_f32, 7, 1)
KILN_F2D(filter2d_kn_f32, 0, 1)

// One 1-D pass along the contiguous axis of `lines` rows of length W.
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

// One 1-D pass along a strided axis: element (o, l, i) at o*so + l*sa + i, l in [0, L)
// filtered, i in [0, A) contiguous (coalesced), o in [0, O).
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

KILN_F3D(filter3d_k3_f32, 3)
KILN_F3D(filter3d_k5_f32, 5)
KILN_F3D(filter3d_k7_f32, 7)
