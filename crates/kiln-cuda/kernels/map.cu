// Element-wise maps and axpy on f32, f16 and bf16 storage with f32 arithmetic.
//
// NVRTC's pip wheel ships no cuda_fp16.h / cuda_bf16.h and kiln passes no include path,
// so the conversions are written here: f16 with the PTX cvt instructions (exact IEEE
// round-to-nearest-even, subnormals included, sm_53+), bf16 with bit operations (the same
// rounding as the `half` crate: nearest-even, NaN kept quiet), so sm_75 works too.
//
// Memory-bound: every thread moves 16 bytes per access (4 floats or 8 halves, uint4), a
// warp 512 fully coalesced bytes, with U loads in flight before the first store. The op is a
// template parameter: the switch on `op` happens once, outside the loop, and costs no
// registers (ptxas: the sigmoid-only instantiation of map_f32's body uses the same 30).
// map_{f32,f16,bf16}, axpy_*: U = 2 vectors a thread a step, streaming loads and stores
// (ld/st.global.cs: the data is touched once, so it is evicted first from L1/L2): 30 / 32
// registers for f32 / f16, so 8 blocks of 256 (full occupancy) are resident an SM.
// Pointers must be 16-byte aligned (kiln launches these only on whole pool allocations).
//
// One kernel a program: kiln compiles each kernel below alone, as its own NVRTC program with
// -DKILN_ONLY -DKILN_K_<name> (kernels.rs), so a process compiles only what it launches;
// without KILN_ONLY the whole file compiles (the compile test, the ptxas_info example).

typedef unsigned short u16;
typedef unsigned long long u64;

__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ void st_stream(uint4* p, uint4 v) {
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

__device__ __forceinline__ float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float b2f(u16 h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16 f2b(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}

struct SF32 { typedef float T; static __device__ __forceinline__ float ld(float v) { return v; } static __device__ __forceinline__ float st(float v) { return v; } };
struct SF16 { typedef u16 T; static __device__ __forceinline__ float ld(u16 v) { return h2f(v); } static __device__ __forceinline__ u16 st(float v) { return f2h(v); } };
struct SBF16 { typedef u16 T; static __device__ __forceinline__ float ld(u16 v) { return b2f(v); } static __device__ __forceinline__ u16 st(float v) { return f2b(v); } };

// Op codes: MapOp::code() on the host.
template <int OP> __device__ __forceinline__ float apply(float x, float a, float b) {
    if (OP == 0) return 1.0f / (1.0f + expf(-x));
    if (OP == 1) return tanhf(x);
    if (OP == 2) return (x > 0.0f || x != x) ? x : 0.0f;
    if (OP == 3) return expf(x);
    if (OP == 4) return fmaf(a, x, b);
    return (x != x) ? x : fminf(fmaxf(x, a), b);
}

// Programmatic dependent launch (sm_90+). Inside a captured graph kiln launches these kernels
// with programmatic stream serialization (graph_pdl.rs), so the driver may start one before
// the kernel ahead of it has finished. griddepcontrol.wait, before the first load, blocks until
// every prerequisite grid has completed and its writes are visible, so the result is the same
// as a plain launch's; launch_dependents, issued right after, lets the next kernel's launch
// begin while this one works. Launched without the attribute (eager, or before sm_90) both
// return at once.
__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <class S> union Vec16 {
    uint4 v;
    typename S::T e[16 / sizeof(typename S::T)];
};

// AXPY = false: y = op(x); AXPY = true: y = a * x + y.
template <class S, int OP, bool AXPY>
__device__ __forceinline__ void map_body(const typename S::T* __restrict__ x, typename S::T* __restrict__ y,
                                         u64 n, float a, float b) {
    pdl_enter();
    typedef typename S::T T;
    const int V = 16 / sizeof(T);
    const int U = 2;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 nv = n / V;
    const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x);
    uint4* __restrict__ yv = reinterpret_cast<uint4*>(y);
    for (u64 base = tid; base < nv; base += stride * U) {
        Vec16<S> v[U], w[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const u64 i = base + u * stride;
            if (i < nv) {
                v[u].v = ld_stream(xv + i);
                if (AXPY) w[u].v = ld_stream(yv + i);
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const u64 i = base + u * stride;
            if (i < nv) {
                Vec16<S> o;
#pragma unroll
                for (int j = 0; j < V; ++j) {
                    const float xf = S::ld(v[u].e[j]);
                    o.e[j] = S::st(AXPY ? fmaf(a, xf, S::ld(w[u].e[j])) : apply<OP>(xf, a, b));
                }
                st_stream(yv + i, o.v);
            }
        }
    }
    for (u64 i = nv * V + tid; i < n; i += stride) {
        const float xf = S::ld(x[i]);
        y[i] = S::st(AXPY ? fmaf(a, xf, S::ld(y[i])) : apply<OP>(xf, a, b));
    }
}

#define KILN_MAP(NAME, S)                                                                      \
extern "C" __global__ void NAME(const S::T* __restrict__ x, S::T* __restrict__ y, u64 n,       \
                                unsigned op, float a, float b) {                               \
    switch (op) {                                                                              \
    case 0: map_body<S, 0, false>(x, y, n, a, b); break;                                       \
    case 1: map_body<S, 1, false>(x, y, n, a, b); break;                                       \
    case 2: map_body<S, 2, false>(x, y, n, a, b); break;                                       \
    case 3: map_body<S, 3, false>(x, y, n, a, b); break;                                       \
    case 4: map_body<S, 4, false>(x, y, n, a, b); break;                                       \
    default: map_body<S, 5, false>(x, y, n, a, b); break;                                      \
    }                                                                                          \
}

#define KILN_AXPY(NAME, S)                                                                     \
extern "C" __global__ void NAME(const S::T* __restrict__ x, S::T* __restrict__ y, u64 n, float a) { \
    map_body<S, 0, true>(x, y, n, a, 0.0f);                                                    \
}

#if !defined(KILN_ONLY) || defined(KILN_K_map_f32)
KILN_MAP(map_f32, SF32)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_map_f16)
KILN_MAP(map_f16, SF16)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_map_bf16)
KILN_MAP(map_bf16, SBF16)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_axpy_f32)
KILN_AXPY(axpy_f32, SF32)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_axpy_f16)
KILN_AXPY(axpy_f16, SF16)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_axpy_bf16)
KILN_AXPY(axpy_bf16, SBF16)
#endif
