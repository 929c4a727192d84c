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
// Every sum of those runs in f32 with fma, taps in row-major order from 0, as the other
// imaging kernels do (within a bound of the CPU, which sums in f64).
//
// The exact kernels (`*_f64`) run the CPU path's (so scipy's) double arithmetic on f32 or
// f64 data, so their results equal the CPU's bit for bit: samples widen exactly to double,
// each output is summed with kiln-cpu's operations in its order, every product and sum
// rounded on its own (__dmul_rn / __dadd_rn: no fma contraction), and stored rounded to
// nearest (f32) or as is (f64). One output a thread, samples read through the boundary
// mode straight from global memory (consecutive threads read consecutive elements), weights
// as doubles.
// - nd_pass_x_f64 / nd_pass_s_f64: one correlate1d pass (NI_Correlate1D's formulas, the
//   kernel's symmetry `sym` classified on the host: 0 general `x[n-1]w[n-1] + Σ_{m<n-1}
//   x[m]w[m]`, 1 symmetric `x[c]w[c] + Σ_{m<c} (x[m]+x[n-1-m])w[m]`, 2 antisymmetric with
//   `-`), along the contiguous axis (block 32x8 = 256 outputs of a row, grid
//   (ceil(W/256), min(lines, 65535)), grid-stride over lines; dynamic shared k doubles) or a
//   strided one (block 32 (i) x 8 (l), grid (ceil(A/32), min(ceil(L/8), 65535),
//   min(O, 65535)), grid-stride in y and z; dynamic shared k doubles).
// - nd_direct_f64: NI_Correlate's sum, `0.0 + Σ w·x` over the taps with |w| > DBL_EPSILON
//   in row-major order (`w·cval` outside under constant). Block 32x8, grid (ceil(W/32),
//   min(ceil(H/8), 65535), min(D, 65535)), grid-stride in y and z.
// - nd_uniform_f64: NI_UniformFilter1D's running sum (uniform_filter1d), one line a thread
//   (lines `o * so + ia`, ia < A, o < O_; sample j at `j * sa`), block 256, grid
//   min(ceil(A*O/256), 65535), grid-stride: consecutive threads take consecutive lines, so a
//   strided axis reads coalesced and the contiguous axis reads a row a thread.
// - nd_combine_f64: nd_combine_f32's operations on doubles (numpy's float64 arithmetic).

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

// ---- the exact path: the CPU's double arithmetic ------------------------------------------

// Element types by code (0 f32, 1 f64: kiln's cast codes): loads widen exactly, f32 stores
// round to nearest even (Rust's `as f32`).
struct EF32 { typedef float T; static __device__ __forceinline__ double ld(float v) { return (double)v; }
              static __device__ __forceinline__ float st(double v) { return __double2float_rn(v); } };
struct EF64 { typedef double T; static __device__ __forceinline__ double ld(double v) { return v; }
              static __device__ __forceinline__ double st(double v) { return v; } };

#define NE_DISPATCH(BODY, ARGS)                                                                        \
    if (ti == 0 && to == 0) BODY<EF32, EF32> ARGS;                                                     \
    else if (ti == 1 && to == 1) BODY<EF64, EF64> ARGS;                                                \
    else if (ti == 0 && to == 1) BODY<EF32, EF64> ARGS;                                                \
    else if (ti == 1 && to == 0) BODY<EF64, EF32> ARGS;

// NI_Correlate1D's sum for one output, as kiln-cpu's separable pass computes it: `x(m)` is
// the sample under tap m (already through the boundary mode), `w` the k weights.
template <class X>
__device__ __forceinline__ double ne_corr1d(const double* w, int k, int sym, X x) {
    if (sym == 0) {
        double o = __dmul_rn(x(k - 1), w[k - 1]);
        for (int m = 0; m < k - 1; ++m) o = __dadd_rn(o, __dmul_rn(x(m), w[m]));
        return o;
    }
    const int c = k / 2;
    double o = __dmul_rn(x(c), w[c]);
    for (int m = 0; m < c; ++m) {
        const double a = x(m), b = x(k - 1 - m);
        const double p = sym == 1 ? __dadd_rn(a, b) : __dsub_rn(a, b);
        o = __dadd_rn(o, __dmul_rn(p, w[m]));
    }
    return o;
}

template <class I, class O>
__device__ __forceinline__ void ne_pass_x_body(const void* src_, void* dst_, int lines, int W,
    const double* w, int k, int anchor, int sym, int mode, double cval) {
    const typename I::T* __restrict__ src = (const typename I::T*)src_;
    typename O::T* __restrict__ dst = (typename O::T*)dst_;
    const int x = blockIdx.x * 256 + threadIdx.y * 32 + threadIdx.x;
    if (x >= W) return;
    for (int l = blockIdx.y; l < lines; l += gridDim.y) {
        const typename I::T* __restrict__ in = src + (i64)l * W;
        const int base = x - anchor;
        const double r = ne_corr1d(w, k, sym, [&](int m) {
            const int j = kiln_map(base + m, W, mode);
            return j < 0 ? cval : I::ld(in[j]);
        });
        dst[(i64)l * W + x] = O::st(r);
    }
}

#if !defined(KILN_ONLY) || defined(KILN_K_nd_pass_x_f64)
extern "C" __global__ void __launch_bounds__(256) nd_pass_x_f64(const void* src, void* dst, int lines, int W,
    const double* __restrict__ wt, int k, int anchor, int sym, int mode, double cval, int ti, int to) {
    extern __shared__ double smd[];
    for (int i = threadIdx.y * 32 + threadIdx.x; i < k; i += 256) smd[i] = wt[i];
    __syncthreads();
    NE_DISPATCH(ne_pass_x_body, (src, dst, lines, W, smd, k, anchor, sym, mode, cval))
}
#endif

template <class I, class O>
__device__ __forceinline__ void ne_pass_s_body(const void* src_, void* dst_, int L, i64 sa, int A, int O_,
    i64 so, const double* w, int k, int anchor, int sym, int mode, double cval) {
    const typename I::T* __restrict__ src = (const typename I::T*)src_;
    typename O::T* __restrict__ dst = (typename O::T*)dst_;
    const int ia = blockIdx.x * 32 + threadIdx.x;
    if (ia >= A) return;
    for (int o = blockIdx.z; o < O_; o += gridDim.z) {
        const typename I::T* __restrict__ in = src + (i64)o * so + ia;
        for (int l = blockIdx.y * 8 + threadIdx.y; l < L; l += gridDim.y * 8) {
            const int base = l - anchor;
            const double r = ne_corr1d(w, k, sym, [&](int m) {
                const int j = kiln_map(base + m, L, mode);
                return j < 0 ? cval : I::ld(in[(i64)j * sa]);
            });
            dst[(i64)o * so + (i64)l * sa + ia] = O::st(r);
        }
    }
}

#if !defined(KILN_ONLY) || defined(KILN_K_nd_pass_s_f64)
extern "C" __global__ void __launch_bounds__(256) nd_pass_s_f64(const void* src, void* dst, int L, i64 sa,
    int A, int O_, i64 so, const double* __restrict__ wt, int k, int anchor, int sym, int mode, double cval,
    int ti, int to) {
    extern __shared__ double smd[];
    for (int i = threadIdx.y * 32 + threadIdx.x; i < k; i += 256) smd[i] = wt[i];
    __syncthreads();
    NE_DISPATCH(ne_pass_s_body, (src, dst, L, sa, A, O_, so, smd, k, anchor, sym, mode, cval))
}
#endif

// NI_UniformFilter1D's running sum along one line, as kiln-core's scipy_cpu computes it:
// `s = 0 + x(-a) + ... + x(size-1-a)`, output 0 is `s / size`; then for each next output
// `s += x(j+size-1-a) - x(j-1-a)` and output j is `s / size` (samples through the mode).
template <class I, class O>
__device__ __forceinline__ void ne_uniform_body(const void* src_, void* dst_, int L, i64 sa, int A, int O_,
    i64 so, int size, int anchor, int mode, double cval) {
    const typename I::T* __restrict__ src = (const typename I::T*)src_;
    typename O::T* __restrict__ dst = (typename O::T*)dst_;
    const i64 lines = (i64)A * O_;
    const double n = (double)size;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < lines; t += (i64)gridDim.x * blockDim.x) {
        const i64 o = t / A, ia = t - o * A;
        const typename I::T* __restrict__ in = src + o * so + ia;
        typename O::T* __restrict__ out = dst + o * so + ia;
        auto x = [&](int i) {
            const int j = kiln_map(i, L, mode);
            return j < 0 ? cval : I::ld(in[(i64)j * sa]);
        };
        double s = 0.0;
        for (int m = 0; m < size; ++m) s = __dadd_rn(s, x(m - anchor));
        out[0] = O::st(__ddiv_rn(s, n));
        for (int j = 1; j < L; ++j) {
            s = __dadd_rn(s, __dsub_rn(x(j + size - 1 - anchor), x(j - 1 - anchor)));
            out[(i64)j * sa] = O::st(__ddiv_rn(s, n));
        }
    }
}

#if !defined(KILN_ONLY) || defined(KILN_K_nd_uniform_f64)
extern "C" __global__ void __launch_bounds__(256) nd_uniform_f64(const void* src, void* dst, int L, i64 sa,
    int A, int O_, i64 so, int size, int anchor, int mode, double cval, int ti, int to) {
    NE_DISPATCH(ne_uniform_body, (src, dst, L, sa, A, O_, so, size, anchor, mode, cval))
}
#endif

// scipy's (and kiln-cpu's) threshold for dropping a direct kernel's weight: DBL_EPSILON.
#define NE_DBL_EPS 2.220446049250313080847263336181640625e-16

template <class I, class O>
__device__ __forceinline__ void ne_direct_body(const void* src_, void* dst_, int D, int H, int W,
    const double* __restrict__ wt, int kd, int kh, int kw, int ad, int ah, int aw, int mode, double cval) {
    const typename I::T* __restrict__ src = (const typename I::T*)src_;
    typename O::T* __restrict__ dst = (typename O::T*)dst_;
    const int x = blockIdx.x * 32 + threadIdx.x;
    if (x >= W) return;
    const i64 HW = (i64)H * W;
    for (int z = blockIdx.z; z < D; z += gridDim.z) {
        for (int y = blockIdx.y * 8 + threadIdx.y; y < H; y += gridDim.y * 8) {
            double acc = 0.0;
            for (int a = 0; a < kd; ++a) {
                const int pz = kiln_map(z + a - ad, D, mode);
                for (int b = 0; b < kh; ++b) {
                    const int my = kiln_map(y + b - ah, H, mode);
                    const bool out = pz < 0 || my < 0;
                    const typename I::T* __restrict__ row = src + (out ? 0 : pz * HW + (i64)my * W);
                    const double* wr = wt + ((i64)a * kh + b) * kw;
                    for (int c = 0; c < kw; ++c) {
                        const double wv = __ldg(wr + c);
                        if (fabs(wv) <= NE_DBL_EPS) continue;
                        const int mx = kiln_map(x + c - aw, W, mode);
                        const double v = (out || mx < 0) ? cval : I::ld(row[mx]);
                        acc = __dadd_rn(acc, __dmul_rn(wv, v));
                    }
                }
            }
            dst[z * HW + (i64)y * W + x] = O::st(acc);
        }
    }
}

#if !defined(KILN_ONLY) || defined(KILN_K_nd_direct_f64)
extern "C" __global__ void __launch_bounds__(256) nd_direct_f64(const void* src, void* dst, int D, int H,
    int W, const double* __restrict__ wt, int kd, int kh, int kw, int ad, int ah, int aw, int mode,
    double cval, int ti, int to) {
    NE_DISPATCH(ne_direct_body, (src, dst, D, H, W, wt, kd, kh, kw, ad, ah, aw, mode, cval))
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_nd_combine_f64)
extern "C" __global__ void __launch_bounds__(256) nd_combine_f64(double* __restrict__ acc,
    const double* __restrict__ t, i64 n, int op) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (op == 0) {
            const double v = acc[i];
            acc[i] = __dmul_rn(v, v);
        } else if (op == 1) {
            acc[i] = __dadd_rn(acc[i], t[i]);
        } else if (op == 2) {
            const double v = t[i];
            acc[i] = __dadd_rn(acc[i], __dmul_rn(v, v));
        } else {
            acc[i] = sqrt(acc[i]);
        }
    }
}
#endif
