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

// ---- u8 medians, four outputs a thread (3x3 and 5x5 centred boxes) ----
//
// The one-output kernels above issue ~266 instructions per 3x3 output (ncu, 2026-12-04):
// 9 loads and 40 min/max, the rest addressing. For u8 data four neighbouring outputs share
// one 32-bit word: the same pruned network runs once on words whose four bytes are the four
// outputs' keys (per-byte min/max), and each window row is three aligned word loads with
// the shifted words made by byte permutes. Byte-wise min/max is the same order as the key
// min/max of the one-output kernels, so the results are the same bits.
//
// KILN_MEDPACK picks the per-byte min/max (an experiment knob through KILN_NVRTC_EXTRA):
//   2 (default): the word split into even and odd bytes in 16-bit lanes, __vminu2/__vmaxu2
//      on each half (two networks), merged back;
//   4: __vminu4/__vmaxu4 on the four bytes.
// Measured on the H200 on 2026-12-05 (bench_rank, 1080p u8): 3x3 0.0239 ms with 2, 0.0279
// with 4, 0.0305 one output a thread; 5x5 0.0635 / 0.0771 / 0.0669 ms. Hopper has no
// four-byte SIMD min/max instruction (the 4-lane intrinsics are emulated), the 2-lane ones
// are cheaper, so two networks of 16-bit lanes beat one of 8-bit lanes.
#ifndef KILN_MEDPACK
#define KILN_MEDPACK 2
#endif

struct KilnU8x4 {
    static __device__ __forceinline__ u32 mn(u32 a, u32 b) { return __vminu4(a, b); }
    static __device__ __forceinline__ u32 mx(u32 a, u32 b) { return __vmaxu4(a, b); }
};
struct KilnU16x2 {
    static __device__ __forceinline__ u32 mn(u32 a, u32 b) { return __vminu2(a, b); }
    static __device__ __forceinline__ u32 mx(u32 a, u32 b) { return __vmaxu2(a, b); }
};

template <int N> struct KilnMedP;
template <> struct KilnMedP<9> {
    template <class P> static __device__ __forceinline__ u32 run(u32 (&v)[9]) { return kiln_med9_p<P>(v); }
};
template <> struct KilnMedP<25> {
    template <class P> static __device__ __forceinline__ u32 run(u32 (&v)[25]) { return kiln_med25_p<P>(v); }
};

// The median of each byte lane of v[0..N).
template <int N>
__device__ __forceinline__ u32 kiln_med_u8x4(u32 (&v)[N]) {
#if KILN_MEDPACK == 2
    u32 e[N], o[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
        e[i] = __byte_perm(v[i], 0u, 0x4240);  // bytes 0 and 2 in the low byte of each half
        o[i] = __byte_perm(v[i], 0u, 0x4341);  // bytes 1 and 3
    }
    const u32 me = KilnMedP<N>::template run<KilnU16x2>(e);
    const u32 mo = KilnMedP<N>::template run<KilnU16x2>(o);
    return __byte_perm(me, mo, 0x6240);
#else
    return KilnMedP<N>::template run<KilnU8x4>(v);
#endif
}

// The four bytes x+dx .. x+dx+3 from the aligned words a = [x-4, x), b = [x, x+4),
// c = [x+4, x+8) (little-endian byte order: byte j of b is pixel x+j).
template <int DX>
__device__ __forceinline__ u32 kiln_shift_bytes(u32 a, u32 b, u32 c) {
    if (DX == -2) return __byte_perm(a, b, 0x5432);
    if (DX == -1) return __byte_perm(a, b, 0x6543);
    if (DX == 1) return __byte_perm(b, c, 0x4321);
    if (DX == 2) return __byte_perm(b, c, 0x5432);
    return b;
}

// Block (32, 8): x over the row's words (W % 4 == 0, the buffers 4-byte aligned: the host
// checks), y and z grid-stride. A word whose windows all lie inside the image (rows y-R..y+R,
// words xq-1..xq+1) runs the packed path; the others (image borders) run the one-output
// path for each of their four pixels, through the mode, as rank_med9/25 do.
template <int R>
__device__ __forceinline__ void med_u8x4_body(const void* __restrict__ src, void* __restrict__ dst, const RankWin& w,
                                              const NetOffs& o) {
    constexpr int K = 2 * R + 1;
    constexpr int N = K * K;
    const int wq = w.W >> 2;
    const int xq = blockIdx.x * blockDim.x + threadIdx.x;
    if (xq >= wq) return;
    const u32* __restrict__ s = (const u32*)src;
    const bool x_in = xq >= 1 && xq + 1 < wq;
    for (int z = blockIdx.z; z < w.D; z += gridDim.z) {
        for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < w.H; y += gridDim.y * blockDim.y) {
            const long long cw = ((long long)z * w.H + y) * wq + xq;  // word index
            if (x_in && y >= R && y + R < w.H) {
                u32 v[N];
#pragma unroll
                for (int dy = -R; dy <= R; ++dy) {
                    const u32* __restrict__ p = s + cw + (long long)dy * wq;
                    const u32 a = __ldg(p - 1), b = __ldg(p), c = __ldg(p + 1);
                    u32* r = v + (dy + R) * K;
                    if (R == 2) r[0] = kiln_shift_bytes<-2>(a, b, c);
                    r[R - 1] = kiln_shift_bytes<-1>(a, b, c);
                    r[R] = b;
                    r[R + 1] = kiln_shift_bytes<1>(a, b, c);
                    if (R == 2) r[4] = kiln_shift_bytes<2>(a, b, c);
                }
                ((u32*)dst)[cw] = kiln_med_u8x4<N>(v);
            } else {
                u32 out = 0;
                for (int j = 0; j < 4; ++j) {
                    const int x = xq * 4 + j;
                    u32 v[N];
#pragma unroll
                    for (int i = 0; i < N; ++i) v[i] = win_key_mapped(src, w, z + o.dz[i], y + o.dy[i], x + o.dx[i]);
                    out |= kiln_med(v) << (8 * j);
                }
                ((u32*)dst)[cw] = out;
            }
        }
    }
}

#if !defined(KILN_ONLY) || defined(KILN_K_rank_med9_u8x4)
extern "C" __global__ void __launch_bounds__(256) rank_med9_u8x4(const void* src, void* dst, RankWin w, NetOffs o) {
    med_u8x4_body<1>(src, dst, w, o);
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_rank_med25_u8x4)
extern "C" __global__ void __launch_bounds__(256) rank_med25_u8x4(const void* src, void* dst, RankWin w, NetOffs o) {
    med_u8x4_body<2>(src, dst, w, o);
}
#endif
