#line 1 "filter3d.cu"
// Direct 3-D correlation of a (D, H, W) volume for k = 3, 5, 7 (imaging.cuh comes first).
//
// - filter3d_k{3,7}_f32: block 32x8 covering a 32x32 (y, x) tile, marching along z over
//   zc planes: each plane tile (+halo) is staged in shared (double-buffered, prefetched in
//   registers), and every thread keeps a K-deep ring of partial sums per output in
//   registers, so each input plane is read from global once per block.
// - filter3d_zm5_f32 (k = 5): a cp.async ring of planes, below.

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
