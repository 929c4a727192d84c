#line 1 "ndimage.cu"
// scipy.ndimage's linear filters in general form (imaging.cuh comes first): kernels of any
// size, odd or even, placed by an anchor (n/2 + origin) per axis, weights read from a
// device buffer (any length). The fixed-size fast kernels of filter2d.cu, filter3d.cu and
// separable.cu run the centred odd cases; these run the rest.
//
// The generic kernels read and write f32, u8 or u16 (codes ti/to, dispatched once a block
// to a template instantiation): an 8/16-bit image is read as stored by the first pass and
// written rounded and clamped by the last, with f32 in between.
//
// - nd_pass_x_any: one 1-D pass along the contiguous axis of `lines` rows of length W.
//   Block 32x8, a warp per 256-output segment of a row (8 consecutive outputs a lane);
//   dynamic shared 8*S + k floats, S = (255+k) + (255+k)/8 + 1 (the skewed segment). Grid
//   (ceil(W/256), min(ceil(lines/8), 65535)), grid-stride over lines.
// - nd_pass_s_any: one 1-D pass along a strided axis: element (o, l, i) at o*so + l*sa + i,
//   l in [0, L) filtered, i in [0, A) contiguous. Block 32 (i) x 8 (l), 8 outputs a thread
//   (a 32 x 64 tile, a sliding window of rows in registers); dynamic shared (64+k-1)*32
//   floats plus k weights. Grid (ceil(A/32),
//   min(ceil(L/64), 65535), min(O, 65535)), grid-stride in y and z.
// - nd_direct_any: direct correlation of a (D, H, W) array with a (kd, kh, kw) kernel.
//   Block 32x8 owning a 32 x 32 (x, y) tile, 4 rows a thread; for each output plane, each of
//   the kd input planes (mapped through the mode) is staged into shared memory (32+kw-1) x
//   (32+kh-1) and its kh*kw taps summed. Grid (ceil(W/32), ceil(H/32), min(D, 65535)),
//   grid-stride in z. Weights from global memory (warp-uniform, cached).
// - nd_combine_f32: acc = acc*acc (op 0), acc += t (1), acc += t*t (2), acc = sqrt(acc) (3)
//   (ops 0 and 3 never read t),
//   each operation rounded on its own (no contraction), as numpy does on float32 arrays.
//
// Every sum runs in f32 with fma, taps in row-major order from 0, as the other imaging
// kernels do (the CPU sums in f64; the facade documents the bound).

typedef unsigned char u8;
typedef unsigned short u16;

// Element types by code (0 f32, 4 u8, 5 u16: kiln's cast codes). Loads widen exactly to
// f32; stores to u8/u16 round half away from zero and clamp, NaN giving 0 (the CLI's rule,
// kiln_core::storage::cast_f64, as cast.cu).
struct NF32 { typedef float T; static __device__ __forceinline__ float ld(float v) { return v; }
              static __device__ __forceinline__ float st(float v) { return v; } };
struct NU8 { typedef u8 T; static __device__ __forceinline__ float ld(u8 v) { return (float)v; }
             static __device__ __forceinline__ u8 st(float v) {
                 return v != v ? (u8)0 : (u8)fminf(fmaxf(roundf(v), 0.0f), 255.0f); } };
struct NU16 { typedef u16 T; static __device__ __forceinline__ float ld(u16 v) { return (float)v; }
              static __device__ __forceinline__ u16 st(float v) {
                  return v != v ? (u16)0 : (u16)fminf(fmaxf(roundf(v), 0.0f), 65535.0f); } };

// Runs BODY<I, O> for the (ti, to) codes: same type in and out, or f32 on one side.
// Block-uniform, so no divergence.
#define ND_DISPATCH(BODY, ARGS)                                                                        \
    if (ti == 0 && to == 0) BODY<NF32, NF32> ARGS;                                                     \
    else if (ti == 4 && to == 0) BODY<NU8, NF32> ARGS;                                                 \
    else if (ti == 5 && to == 0) BODY<NU16, NF32> ARGS;                                                \
    else if (ti == 0 && to == 4) BODY<NF32, NU8> ARGS;                                                 \
    else if (ti == 0 && to == 5) BODY<NF32, NU16> ARGS;                                                \
    else if (ti == 4 && to == 4) BODY<NU8, NU8> ARGS;                                                  \
    else if (ti == 5 && to == 5) BODY<NU16, NU16> ARGS;

// The x pass: a warp per 256-output segment of a row, each lane 8 consecutive outputs from
// a sliding window of 8 samples in registers (one shared load a tap). The segment and its
// halo sit in shared memory skewed, element i at i + i/8, so that the lanes' windows
// (8 apart) fall in 32 different banks; the results go back through the same buffer and
// are stored coalesced.
#define NDX_SEG 256
__device__ __forceinline__ int ndx_sk(int i) { return i + (i >> 3); }

template <class I, class O>
__device__ __forceinline__ void nd_pass_x_body(const void* src_, void* dst_, int lines, int W, int k,
    int anchor, int mode, float cval, float* sm) {
    const typename I::T* __restrict__ src = (const typename I::T*)src_;
    typename O::T* __restrict__ dst = (typename O::T*)dst_;
    const int SL = NDX_SEG + k - 1;
    const int SLS = SL + (SL >> 3) + 1;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const float* ws = sm;
    float* s = sm + k + ty * SLS;
    const int x0 = blockIdx.x * NDX_SEG;
    for (int l = blockIdx.y * 8 + ty; l < lines; l += gridDim.y * 8) {
        const typename I::T* __restrict__ in = src + (i64)l * W;
        typename O::T* __restrict__ out = dst + (i64)l * W;
        for (int i = tx; i < SL; i += 32) {
            const int m = kiln_map(x0 - anchor + i, W, mode);
            s[ndx_sk(i)] = m < 0 ? cval : I::ld(in[m]);
        }
        __syncwarp();
        const int b = 8 * tx;
        float v[8], acc[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            v[j] = s[ndx_sk(b + j)];
            acc[j] = 0.0f;
        }
#pragma unroll 4
        for (int c = 0; c < k; ++c) {
            const float w = ws[c];
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[j] = fmaf(w, v[j], acc[j]);
#pragma unroll
            for (int j = 0; j < 7; ++j) v[j] = v[j + 1];
            if (c + 1 < k) v[7] = s[ndx_sk(b + c + 8)];
        }
        __syncwarp();
#pragma unroll
        for (int j = 0; j < 8; ++j) s[ndx_sk(b + j)] = acc[j];
        __syncwarp();
#pragma unroll
        for (int q = 0; q < NDX_SEG / 32; ++q) {
            const int x = x0 + tx + 32 * q;
            if (x < W) out[x] = O::st(s[ndx_sk(tx + 32 * q)]);
        }
        __syncwarp();
    }
}

#if !defined(KILN_ONLY) || defined(KILN_K_nd_pass_x_any)
extern "C" __global__ void __launch_bounds__(256) nd_pass_x_any(const void* src, void* dst, int lines, int W,
    const float* __restrict__ wt, int k, int anchor, int mode, float cval, int ti, int to) {
    extern __shared__ float sm[];
    for (int i = threadIdx.y * 32 + threadIdx.x; i < k; i += 256) sm[i] = wt[i];
    __syncthreads();
    ND_DISPATCH(nd_pass_x_body, (src, dst, lines, W, k, anchor, mode, cval, sm))
}
#endif

#define NDS_R 8
template <class I, class O>
__device__ __forceinline__ void nd_pass_s_body(const void* src_, void* dst_, int L, i64 sa, int A, int O_,
    i64 so, int k, int anchor, int mode, float cval, float* sm) {
    const typename I::T* __restrict__ src = (const typename I::T*)src_;
    typename O::T* __restrict__ dst = (typename O::T*)dst_;
    const int TL = 8 * NDS_R;
    const int SL = TL + k - 1;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const float* ws = sm;
    float* tile = sm + k;
    const int ia = blockIdx.x * 32 + tx;
    const int tiles_l = (L + TL - 1) / TL;
    for (int o = blockIdx.z; o < O_; o += gridDim.z) {
        for (int bl = blockIdx.y; bl < tiles_l; bl += gridDim.y) {
            const int l0 = bl * TL;
            for (int row = ty; row < SL; row += 8) {
                const int gl = kiln_map(l0 - anchor + row, L, mode);
                tile[row * 32 + tx] = (gl < 0 || ia >= A) ? cval : I::ld(src[(i64)o * so + (i64)gl * sa + ia]);
            }
            __syncthreads();
            float acc[NDS_R];
#pragma unroll
            for (int j = 0; j < NDS_R; ++j) acc[j] = 0.0f;
            // A sliding window of NDS_R rows in registers: one shared load a tap.
            const float* t = tile + ty * NDS_R * 32 + tx;
            float v[NDS_R];
#pragma unroll
            for (int j = 0; j < NDS_R; ++j) v[j] = t[j * 32];
#pragma unroll 4
            for (int a = 0; a < k; ++a) {
                const float w = ws[a];
#pragma unroll
                for (int j = 0; j < NDS_R; ++j) acc[j] = fmaf(w, v[j], acc[j]);
#pragma unroll
                for (int j = 0; j < NDS_R - 1; ++j) v[j] = v[j + 1];
                if (a + 1 < k) v[NDS_R - 1] = t[(a + NDS_R) * 32];
            }
#pragma unroll
            for (int j = 0; j < NDS_R; ++j) {
                const int l = l0 + ty * NDS_R + j;
                if (l < L && ia < A) dst[(i64)o * so + (i64)l * sa + ia] = O::st(acc[j]);
            }
            __syncthreads();
        }
    }
}

#if !defined(KILN_ONLY) || defined(KILN_K_nd_pass_s_any)
extern "C" __global__ void __launch_bounds__(256) nd_pass_s_any(const void* src, void* dst, int L, i64 sa,
    int A, int O_, i64 so, const float* __restrict__ wt, int k, int anchor, int mode, float cval, int ti,
    int to) {
    extern __shared__ float sm[];
    for (int i = threadIdx.y * 32 + threadIdx.x; i < k; i += 256) sm[i] = wt[i];
    __syncthreads();
    ND_DISPATCH(nd_pass_s_body, (src, dst, L, sa, A, O_, so, k, anchor, mode, cval, sm))
}
#endif

#define NDD_R 4
template <class I, class O>
__device__ __forceinline__ void nd_direct_body(const void* src_, void* dst_, int D, int H, int W,
    const float* __restrict__ wt, int kd, int kh, int kw, int ad, int ah, int aw, int mode, float cval,
    float* tile) {
    const typename I::T* __restrict__ src = (const typename I::T*)src_;
    typename O::T* __restrict__ dst = (typename O::T*)dst_;
    const int SW = 32 + kw - 1, SH = 8 * NDD_R + kh - 1;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 32 + tx;
    const int x0 = blockIdx.x * 32, y0 = blockIdx.y * (8 * NDD_R);
    const i64 HW = (i64)H * W;
    for (int z = blockIdx.z; z < D; z += gridDim.z) {
        float acc[NDD_R];
#pragma unroll
        for (int j = 0; j < NDD_R; ++j) acc[j] = 0.0f;
        for (int a = 0; a < kd; ++a) {
            const int pz = kiln_map(z + a - ad, D, mode);
            for (int i = tid; i < SW * SH; i += 256) {
                const int sy = i / SW, sx = i - sy * SW;
                const int my = kiln_map(y0 - ah + sy, H, mode), mx = kiln_map(x0 - aw + sx, W, mode);
                tile[i] = (pz < 0 || my < 0 || mx < 0) ? cval : I::ld(src[pz * HW + (i64)my * W + mx]);
            }
            __syncthreads();
            const float* wa = wt + (i64)a * kh * kw;
            for (int b = 0; b < kh; ++b) {
                const float* row = tile + (ty * NDD_R + b) * SW + tx;
                for (int c = 0; c < kw; ++c) {
                    const float w = __ldg(wa + b * kw + c);
#pragma unroll
                    for (int j = 0; j < NDD_R; ++j) acc[j] = fmaf(w, row[j * SW + c], acc[j]);
                }
            }
            __syncthreads();
        }
        const int x = x0 + tx;
#pragma unroll
        for (int j = 0; j < NDD_R; ++j) {
            const int y = y0 + ty * NDD_R + j;
            if (y < H && x < W) dst[z * HW + (i64)y * W + x] = O::st(acc[j]);
        }
    }
}

#if !defined(KILN_ONLY) || defined(KILN_K_nd_direct_any)
extern "C" __global__ void __launch_bounds__(256) nd_direct_any(const void* src, void* dst, int D, int H,
    int W, const float* __restrict__ wt, int kd, int kh, int kw, int ad, int ah, int aw, int mode, float cval,
    int ti, int to) {
    extern __shared__ float tile[];
    ND_DISPATCH(nd_direct_body, (src, dst, D, H, W, wt, kd, kh, kw, ad, ah, aw, mode, cval, tile))
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_nd_combine_f32)
extern "C" __global__ void __launch_bounds__(256) nd_combine_f32(float* __restrict__ acc,
    const float* __restrict__ t, i64 n, int op) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (op == 0) {
            const float v = acc[i];
            acc[i] = __fmul_rn(v, v);
        } else if (op == 1) {
            acc[i] = __fadd_rn(acc[i], t[i]);
        } else if (op == 2) {
            const float v = t[i];
            acc[i] = __fadd_rn(acc[i], __fmul_rn(v, v));
        } else {
            acc[i] = sqrtf(acc[i]);
        }
    }
}
#endif
