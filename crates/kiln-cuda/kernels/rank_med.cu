#line 1 "rank_med.cu"
// Medians of exactly 9 and 25 window elements (3x3, 5x5 or any footprint of that count) at
// the median rank (rank.cu comes first: RankWin, NetOffs, keys, the mode mapping; then the
// generated networks of rank_med_net.cuh).
//
// One output a thread, as rank_net*, but: one code path per element type (the type code is
// launch-uniform and switched on once, not per load); interior loads at the host's linear
// offsets (32-bit: the compiler keeps the hoisted offsets in half the registers) from one
// base pointer (no per-element index arithmetic); and a straight-line
// pruned network with constant register indices. The constexpr-table form these replace
// took 470 instructions an output for 3x3 (ncu, 2026-12-03: 38.9 us on 1080p u8, issue
// slots 69% busy; 5x5 172.6 us at 198 registers, 12.5% occupancy).

template <int DT> struct KilnElem;
template <> struct KilnElem<0> {
    typedef u8 T;
    static __device__ __forceinline__ u32 key(T v) { return v; }
    static __device__ __forceinline__ T val(u32 k) { return (T)k; }
};
template <> struct KilnElem<1> {
    typedef u16 T;
    static __device__ __forceinline__ u32 key(T v) { return v; }
    static __device__ __forceinline__ T val(u32 k) { return (T)k; }
};
template <> struct KilnElem<2> {
    typedef u32 T;  // f32 bits
    static __device__ __forceinline__ u32 key(T v) { return f2key(v); }
    static __device__ __forceinline__ T val(u32 k) { return key2f(k); }
};

__device__ __forceinline__ u32 kiln_med(u32 (&v)[9]) { return kiln_med9(v); }
__device__ __forceinline__ u32 kiln_med(u32 (&v)[25]) { return kiln_med25(v); }

template <int N, int DT>
__device__ __forceinline__ void med_body(const void* __restrict__ src, void* __restrict__ dst, const RankWin& w,
                                         const NetOffs& o) {
    typedef KilnElem<DT> E;
    typedef typename E::T T;
    const T* __restrict__ s = (const T*)src;
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= w.W) return;
    for (int z = blockIdx.z; z < w.D; z += gridDim.z) {
        for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < w.H; y += gridDim.y * blockDim.y) {
            const long long c = ((long long)z * w.H + y) * w.W + x;
            u32 v[N];
            if (win_inside(w, z, y, x)) {
                const T* __restrict__ p = s + c;
#pragma unroll
                for (int i = 0; i < N; ++i) v[i] = E::key(__ldg(p + o.lin[i]));
            } else {
#pragma unroll
                for (int i = 0; i < N; ++i) v[i] = win_key_mapped(src, w, z + o.dz[i], y + o.dy[i], x + o.dx[i]);
            }
            ((T*)dst)[c] = E::val(kiln_med(v));
        }
    }
}

template <int N>
__device__ __forceinline__ void med_kernel(const void* src, void* dst, const RankWin& w, const NetOffs& o) {
    if (w.dt == 0) med_body<N, 0>(src, dst, w, o);
    else if (w.dt == 1) med_body<N, 1>(src, dst, w, o);
    else med_body<N, 2>(src, dst, w, o);
}

#if !defined(KILN_ONLY) || defined(KILN_K_rank_med9)
extern "C" __global__ void __launch_bounds__(256) rank_med9(const void* src, void* dst, RankWin w, NetOffs o) {
    med_kernel<9>(src, dst, w, o);
}
#endif

// Minimum resident CTAs an SM for the 5x5 median: a register cap. Left free the compiler
// took 128 registers (25% occupancy); 3 caps it at 80. On the H200 (2026-12-04, one call,
// 1080p u8): 1 -> 0.1123 ms, 3 -> 0.0656 ms, 4 -> 0.0671 ms. Override for experiments with
// KILN_NVRTC_EXTRA=-DKILN_MED25_MINB=n.
#ifndef KILN_MED25_MINB
#define KILN_MED25_MINB 3
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_rank_med25)
extern "C" __global__ void __launch_bounds__(256, KILN_MED25_MINB) rank_med25(const void* src, void* dst, RankWin w, NetOffs o) {
    med_kernel<25>(src, dst, w, o);
}
#endif
