#line 1 "filter2d.cu"
// Direct 2-D correlation of a batch of (H, W) planes (imaging.cuh comes first).
//
// - filter2d_k{5,7}_f32, filter2d_kn_f32: block 32x8, tile 32 wide x 64 tall (each
//   thread 8 vertically adjacent outputs, reusing each shared row it reads for every output
//   row it touches), grid (ceil(W/32), min(ceil(H/64), 65535), min(N, 65535)), grid-stride
//   in y and z; dynamic shared (32+2r)*(64+2r) floats.
// - filter2d_k3r{8,4}_f32 (k = 3): from registers, below.

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
