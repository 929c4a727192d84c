// Element type conversion between kiln's six storage types, the rules of
// kiln_core::storage::cast_f64: every source value is widened exactly to double, then
// stored: f32 and f64 round to nearest-even; f16 and bf16 round to nearest-even from the
// f32 value (f64 sources are refused on the host, so that value is exact); u8 and u16 take
// the value rounded half away from zero and clamped, NaN giving 0.
//
// One kernel, dispatched on (from, to) codes once per thread outside the loop (block-
// uniform, so no divergence); grid-stride over elements. NVRTC's pip wheel ships no
// cuda_fp16.h / cuda_bf16.h: the 16-bit conversions are the PTX cvt instructions (f16) and
// bit operations with the `half` crate's rounding and NaN rule (bf16), as in map.cu.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned long long u64;

__device__ __forceinline__ float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float b2f(u16 h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16 f2b(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}
__device__ __forceinline__ double to_int(double d, double hi) {
    if (d != d) return 0.0;
    return fmin(fmax(round(d), 0.0), hi);
}

struct TF32 { typedef float T; static __device__ double ld(float v) { return (double)v; } static __device__ float st(double d) { return (float)d; } };
struct TF64 { typedef double T; static __device__ double ld(double v) { return v; } static __device__ double st(double d) { return d; } };
struct TF16 { typedef u16 T; static __device__ double ld(u16 v) { return (double)h2f(v); } static __device__ u16 st(double d) { return f2h((float)d); } };
struct TBF16 { typedef u16 T; static __device__ double ld(u16 v) { return (double)b2f(v); } static __device__ u16 st(double d) { return f2b((float)d); } };
struct TU8 { typedef u8 T; static __device__ double ld(u8 v) { return (double)v; } static __device__ u8 st(double d) { return (u8)to_int(d, 255.0); } };
struct TU16 { typedef u16 T; static __device__ double ld(u16 v) { return (double)v; } static __device__ u16 st(double d) { return (u16)to_int(d, 65535.0); } };

template <class S, class D>
__device__ __forceinline__ void cast_loop(const void* x, void* y, u64 n) {
    const typename S::T* xs = (const typename S::T*)x;
    typename D::T* ys = (typename D::T*)y;
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) ys[i] = D::st(S::ld(xs[i]));
}

template <class S>
__device__ __forceinline__ void cast_from(const void* x, void* y, u64 n, int to) {
    switch (to) {
    case 0: cast_loop<S, TF32>(x, y, n); break;
    case 1: cast_loop<S, TF64>(x, y, n); break;
    case 2: cast_loop<S, TF16>(x, y, n); break;
    case 3: cast_loop<S, TBF16>(x, y, n); break;
    case 4: cast_loop<S, TU8>(x, y, n); break;
    default: cast_loop<S, TU16>(x, y, n); break;
    }
}

// Codes: 0 f32, 1 f64, 2 f16, 3 bf16, 4 u8, 5 u16 (cast_code() on the host).
#if !defined(KILN_ONLY) || defined(KILN_K_cast_any)
extern "C" __global__ void cast_any(const void* x, void* y, u64 n, int from, int to) {
    switch (from) {
    case 0: cast_from<TF32>(x, y, n, to); break;
    case 1: cast_from<TF64>(x, y, n, to); break;
    case 2: cast_from<TF16>(x, y, n, to); break;
    case 3: cast_from<TBF16>(x, y, n, to); break;
    case 4: cast_from<TU8>(x, y, n, to); break;
    default: cast_from<TU16>(x, y, n, to); break;
    }
}
#endif
