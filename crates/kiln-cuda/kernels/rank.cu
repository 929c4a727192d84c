#line 1 "rank.cu"
// Rank filters and grey morphology (imaging.cuh comes first, for kiln_map), scipy.ndimage
// semantics as kiln_core::imaging::rank::RankSpec resolves them; bit for bit the CPU's.
//
// Every value is handled as a 32-bit total-order key: u8 and u16 as themselves, f32 by its
// IEEE total order (negative: all bits flipped; positive: sign bit set), so one selection
// routine serves every type and ties resolve identically on both backends. Element types
// arrive as a code `dt` (0 u8, 1 u16, 2 f32), switched on per load (block-uniform).
// Data are `(D, H, W)` volumes (a 2-D image is D = 1); window offsets are (dz, dy, dx).
// Under `constant` the cval arrives as its key (`ckey`, already converted to the type).
//
// Kernels (launch shapes in launch_imaging/rank.rs and attributes/launches.rs):
// - rank_net{9,25,49}: the window's keys in registers, sorted by Batcher's odd-even merge
//   network (unrolled; slots past the window count hold 0xffffffff, which sorts last), the
//   rank picked with predicated selects. rank_med{9,25} (rank_med.cu): generated pruned
//   median networks, one code path per element type.
// - rank_hist_u8: u8 rank of a 2-D box (Huang's sliding histogram, run down columns): one
//   thread a column of a strip of rows, a 256-bin u16 histogram a thread in shared memory
//   (bin-major, so a thread's bins sit in its own bank), the rank tracked incrementally.
// - rank_bisect: any footprint, any rank: bisection on the key, counting the window's
//   keys <= the midpoint each step (no per-thread buffer, no local memory).
// - minmax_fp: min/max over any footprint; with a structure, scipy's arithmetic (see
//   kiln_core::imaging::rank: the first term in double, later ones in the type's), stored
//   as the CPU does.
// - minmax_box2d: min/max over a full 2-D box, fused: a tile with its halo in shared
//   memory, van Herk / Gil-Werman along rows, then along columns (three comparisons an
//   element whatever the window).

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

__device__ __forceinline__ u32 f2key(u32 b) { return (b & 0x80000000u) ? ~b : (b | 0x80000000u); }
__device__ __forceinline__ u32 key2f(u32 k) { return (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k; }

__device__ __forceinline__ u32 ld_key(const void* __restrict__ p, long long i, int dt) {
    if (dt == 0) return ((const u8*)p)[i];
    if (dt == 1) return ((const u16*)p)[i];
    return f2key(((const u32*)p)[i]);
}

__device__ __forceinline__ void st_key(void* __restrict__ p, long long i, u32 k, int dt) {
    if (dt == 0) ((u8*)p)[i] = (u8)k;
    else if (dt == 1) ((u16*)p)[i] = (u16)k;
    else ((u32*)p)[i] = key2f(k);
}

__device__ __forceinline__ double ld_f64(const void* __restrict__ p, long long i, int dt) {
    if (dt == 0) return (double)((const u8*)p)[i];
    if (dt == 1) return (double)((const u16*)p)[i];
    return (double)((const float*)p)[i];
}

// A structure result stored as scipy stores it: floats round to nearest; integers
// truncate and wrap ((T)(long long)d; NaN gives 0, as Rust's `as`).
__device__ __forceinline__ void st_f64(void* __restrict__ p, long long i, double d, int dt) {
    if (dt == 2) { ((float*)p)[i] = (float)d; return; }
    const long long t = (long long)d;
    if (dt == 0) ((u8*)p)[i] = (u8)t; else ((u16*)p)[i] = (u16)t;
}

// scipy's `_tmp += (_type)_ss[i]`, as a double: f32 addition; integers add the term
// truncated through a 32-bit int, wrapping in the type.
__device__ __forceinline__ double structure_term(u32 k, double t, int dt) {
    if (dt == 2) return (double)(__uint_as_float(key2f(k)) + (float)t);
    const int c = (int)t;
    if (dt == 0) return (double)(u8)(k + (u32)(u8)c);
    return (double)(u16)(k + (u32)(u16)c);
}

__device__ __forceinline__ double key2f64(u32 k, int dt) {
    return dt == 2 ? (double)__uint_as_float(key2f(k)) : (double)k;
}

// The window, its bounds (for the interior test) and the launch's scalars.
struct RankWin {
    int lo[3];   // smallest offset per axis (z, y, x)
    int hi[3];   // largest
    int cnt;     // true elements
    int rank;    // 0-based rank
    int mode;    // kiln_map code
    u32 ckey;    // the cval's key
    int dt;      // element type code
    int D, H, W;
};

// Up to 49 offsets by value (the parameter bank).
// lin: each offset's linear distance in elements, (dz * H + dy) * W + dx (rank_med.cu; the
// host picks another kernel when one does not fit 32 bits).
struct NetOffs { short dz[49]; short dy[49]; short dx[49]; int lin[49]; };

// The key at (z+dz, y+dy, x+dx) through the mode (outside the interior). Not inlined: the
// border path is rare, and inlining its branches into the unrolled gathers makes NVRTC's
// optimiser blow up (minutes for a 3x3 network). The window's fields go by value: a
// reference to the kernel's RankWin parameter would make every thread copy it to local
// memory to have an address to pass.
__device__ __noinline__ u32 win_key_mapped_v(const void* src, int D, int H, int W, int mode, u32 ckey, int dt,
                                             int zz, int yy, int xx) {
    zz = kiln_map(zz, D, mode);
    yy = kiln_map(yy, H, mode);
    xx = kiln_map(xx, W, mode);
    if (zz < 0 || yy < 0 || xx < 0) return ckey;
    return ld_key(src, ((long long)zz * H + yy) * W + xx, dt);
}

__device__ __forceinline__ u32 win_key_mapped(const void* src, const RankWin& w, int zz, int yy, int xx) {
    return win_key_mapped_v(src, w.D, w.H, w.W, w.mode, w.ckey, w.dt, zz, yy, xx);
}

// The key at (z+dz, y+dy, x+dx): direct inside, through the mode outside.
__device__ __forceinline__ u32 win_key(const void* src, const RankWin& w, bool inside, int z, int y, int x,
                                       int dz, int dy, int dx) {
    const int zz = z + dz, yy = y + dy, xx = x + dx;
    if (!inside) return win_key_mapped(src, w, zz, yy, xx);
    return ld_key(src, ((long long)zz * w.H + yy) * w.W + xx, w.dt);
}

__device__ __forceinline__ bool win_inside(const RankWin& w, int z, int y, int x) {
    return z + w.lo[0] >= 0 && z + w.hi[0] < w.D && y + w.lo[1] >= 0 && y + w.hi[1] < w.H && x + w.lo[2] >= 0 &&
           x + w.hi[2] < w.W;
}

#define CE(a, b) { const u32 _a = v[a], _b = v[b]; v[a] = min(_a, _b); v[b] = max(_a, _b); }

// Batcher's odd-even merge sort network for N keys (indices >= N are implicit +inf, so
// their compare-exchanges are dropped), as a constexpr list of pairs: the unrolled loop
// below indexes registers with constants only.
template <int N>
struct Batcher {
    __device__ static constexpr int count() {
        int c = 0;
        for (int p = 1; p < N; p <<= 1)
            for (int k = p; k >= 1; k >>= 1)
                for (int j = k % p; j + k < N; j += 2 * k)
                    for (int i = 0; i < k && i + j + k < N; ++i)
                        if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) ++c;
        return c;
    }
    static constexpr int M = count();
    short a[M], b[M];
    __device__ constexpr Batcher() : a(), b() {
        int c = 0;
        for (int p = 1; p < N; p <<= 1)
            for (int k = p; k >= 1; k >>= 1)
                for (int j = k % p; j + k < N; j += 2 * k)
                    for (int i = 0; i < k && i + j + k < N; ++i)
                        if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) { a[c] = i + j; b[c] = i + j + k; ++c; }
    }
};

template <int N>
__device__ __forceinline__ void batcher(u32 (&v)[N]) {
    constexpr Batcher<N> net{};
#pragma unroll
    for (int c = 0; c < Batcher<N>::M; ++c) CE(net.a[c], net.b[c]);
}

// R >= 0: compile-time rank; R < 0: w.rank.
template <int N, int R>
__device__ __forceinline__ void net_body(const void* __restrict__ src, void* __restrict__ dst, const RankWin& w,
                                         const NetOffs& o) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= w.W) return;
    for (int z = blockIdx.z; z < w.D; z += gridDim.z) {
        for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < w.H; y += gridDim.y * blockDim.y) {
            const bool inside = win_inside(w, z, y, x);
            u32 v[N];
            if (inside) {
#pragma unroll
                for (int i = 0; i < N; ++i)
                    v[i] = i < w.cnt ? win_key(src, w, true, z, y, x, o.dz[i], o.dy[i], o.dx[i]) : 0xffffffffu;
            } else {
#pragma unroll
                for (int i = 0; i < N; ++i)
                    v[i] = i < w.cnt ? win_key_mapped(src, w, z + o.dz[i], y + o.dy[i], x + o.dx[i]) : 0xffffffffu;
            }
            batcher<N>(v);
            u32 r = v[0];
            if (R >= 0) {
                r = v[R < N ? R : 0];
            } else {
#pragma unroll
                for (int i = 1; i < N; ++i)
                    if (i == w.rank) r = v[i];
            }
            st_key(dst, ((long long)z * w.H + y) * w.W + x, r, w.dt);
        }
    }
}

#if !defined(KILN_ONLY) || defined(KILN_K_rank_net9)
extern "C" __global__ void __launch_bounds__(256) rank_net9(const void* src, void* dst, RankWin w, NetOffs o) {
    net_body<9, -1>(src, dst, w, o);
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_rank_net25)
extern "C" __global__ void __launch_bounds__(256) rank_net25(const void* src, void* dst, RankWin w, NetOffs o) {
    net_body<25, -1>(src, dst, w, o);
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_rank_net49)
extern "C" __global__ void __launch_bounds__(256) rank_net49(const void* src, void* dst, RankWin w, NetOffs o) {
    net_body<49, -1>(src, dst, w, o);
}
#endif

// Offsets from a global buffer (3 ints an element: dz, dy, dx).
#if !defined(KILN_ONLY) || defined(KILN_K_rank_bisect)
extern "C" __global__ void __launch_bounds__(256) rank_bisect(const void* src, void* dst, RankWin w,
                                                              const int* __restrict__ offs) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= w.W) return;
    for (int z = blockIdx.z; z < w.D; z += gridDim.z) {
        for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < w.H; y += gridDim.y * blockDim.y) {
            const bool inside = win_inside(w, z, y, x);
            u32 lo = 0xffffffffu, hi = 0;
            for (int i = 0; i < w.cnt; ++i) {
                const u32 k = win_key(src, w, inside, z, y, x, offs[3 * i], offs[3 * i + 1], offs[3 * i + 2]);
                lo = min(lo, k);
                hi = max(hi, k);
            }
            // The smallest v in [lo, hi] with #(keys <= v) > rank.
            while (lo < hi) {
                const u32 mid = lo + (hi - lo) / 2;
                int c = 0;
                for (int i = 0; i < w.cnt; ++i)
                    c += win_key(src, w, inside, z, y, x, offs[3 * i], offs[3 * i + 1], offs[3 * i + 2]) <= mid;
                if (c > w.rank) hi = mid; else lo = mid + 1;
            }
            st_key(dst, ((long long)z * w.H + y) * w.W + x, lo, w.dt);
        }
    }
}
#endif

// mx = 0: min, 1: max; sv: structure values (nullptr: flat).
#if !defined(KILN_ONLY) || defined(KILN_K_minmax_fp)
extern "C" __global__ void __launch_bounds__(256) minmax_fp(const void* src, void* dst, RankWin w,
                                                            const int* __restrict__ offs,
                                                            const double* __restrict__ sv, int mx) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= w.W) return;
    for (int z = blockIdx.z; z < w.D; z += gridDim.z) {
        for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < w.H; y += gridDim.y * blockDim.y) {
            const bool inside = win_inside(w, z, y, x);
            const long long o = ((long long)z * w.H + y) * w.W + x;
            if (sv == nullptr) {
                u32 r = mx ? 0u : 0xffffffffu;
                for (int i = 0; i < w.cnt; ++i) {
                    const u32 k = win_key(src, w, inside, z, y, x, offs[3 * i], offs[3 * i + 1], offs[3 * i + 2]);
                    r = mx ? max(r, k) : min(r, k);
                }
                st_key(dst, o, r, w.dt);
            } else {
                // scipy's CASE_MIN_OR_MAX_POINT: the first term in double, the rest in the
                // element type (sv holds -s for the minimum, s for the maximum)
                double r = 0.0;
                for (int i = 0; i < w.cnt; ++i) {
                    const u32 k = win_key(src, w, inside, z, y, x, offs[3 * i], offs[3 * i + 1], offs[3 * i + 2]);
                    if (i == 0) { r = key2f64(k, w.dt) + sv[0]; continue; }
                    const double t = structure_term(k, sv[i], w.dt);
                    if (mx ? t > r : t < r) r = t;
                }
                st_f64(dst, o, r, w.dt);
            }
        }
    }
}
#endif

// Huang's histogram down columns. Block 64 threads (x), one column each; blockIdx.y a
// strip of `strip` rows; blockIdx.z the plane. fh, fw: the box; cy, cx: its centre
// (size/2 + origin).
#define HT 64
#if !defined(KILN_ONLY) || defined(KILN_K_rank_hist_u8)
extern "C" __global__ void __launch_bounds__(HT) rank_hist_u8(const u8* __restrict__ src, u8* __restrict__ dst,
                                                              RankWin w, int fh, int fw, int cy, int cx,
                                                              int strip) {
    __shared__ u16 hist[256 * HT];
    const int t = threadIdx.x;
    const int x = blockIdx.x * HT + t;
    const int y0 = blockIdx.y * strip;
    const int y1 = min(y0 + strip, w.H);
    for (int b = 0; b < 256; ++b) hist[b * HT + t] = 0;
    if (x >= w.W || y0 >= w.H) return;
    const int z = blockIdx.z;
    const u8* img = src + (long long)z * w.H * w.W;
    const bool xin = x - cx >= 0 && x - cx + fw <= w.W;
    const u8 cv = (u8)w.ckey;
    // The key at row yy (mapped), column x - cx + j.
    auto val = [&](int yy, int j) -> int {
        yy = kiln_map(yy, w.H, w.mode);
        if (yy < 0) return cv;
        int xx = x - cx + j;
        if (!xin) { xx = kiln_map(xx, w.W, w.mode); if (xx < 0) return cv; }
        return img[(long long)yy * w.W + xx];
    };
    for (int i = 0; i < fh; ++i) {
        const int yy = y0 - cy + i;
        for (int j = 0; j < fw; ++j) hist[val(yy, j) * HT + t] += 1;
    }
    const int r = w.rank;
    int m = 0, lt = 0;  // current answer and #(values < m)
    for (int y = y0;; ++y) {
        while (lt > r) { --m; lt -= hist[m * HT + t]; }
        while (lt + hist[m * HT + t] <= r) { lt += hist[m * HT + t]; ++m; }
        dst[((long long)z * w.H + y) * w.W + x] = (u8)m;
        if (y + 1 >= y1) break;
        const int yo = y - cy, yn = y - cy + fh;
        for (int j = 0; j < fw; ++j) {
            const int a = val(yo, j), b = val(yn, j);
            hist[a * HT + t] -= 1;
            hist[b * HT + t] += 1;
            lt += (b < m) - (a < m);
        }
    }
}
#endif

// Fused 2-D box min/max. Block 256 threads; tile BX x BY outputs of one plane;
// dynamic shared: A[(BY+ky-1)][(BX+kx-1)] and B[(BY+ky-1)][BX] keys.
#define BX 64
#define BY 32
#if !defined(KILN_ONLY) || defined(KILN_K_minmax_box2d)
extern "C" __global__ void __launch_bounds__(256) minmax_box2d(const void* src, void* dst, RankWin w, int ky, int kx,
                                                               int cy, int cx, int mx) {
    extern __shared__ u32 sm[];
    const int Lx = BX + kx - 1, Ly = BY + ky - 1;
    u32* A = sm;
    u32* B = sm + Ly * Lx;
    const int tid = threadIdx.x, nt = blockDim.x;
    const int x0 = blockIdx.x * BX;
    const int tiles_y = (w.H + BY - 1) / BY;
    for (int z = blockIdx.z; z < w.D; z += gridDim.z) {
        const long long plane = (long long)z * w.H * w.W;
        for (int by = blockIdx.y; by < tiles_y; by += gridDim.y) {
            const int y0 = by * BY;
            const int gx0 = x0 - cx, gy0 = y0 - cy;
            const bool inside = gx0 >= 0 && gy0 >= 0 && gx0 + Lx <= w.W && gy0 + Ly <= w.H;
            for (int i = tid; i < Lx * Ly; i += nt) {
                const int sy = i / Lx, sx = i - sy * Lx;
                int gy = gy0 + sy, gx = gx0 + sx;
                if (!inside) { gy = kiln_map(gy, w.H, w.mode); gx = kiln_map(gx, w.W, w.mode); }
                A[i] = (gy < 0 || gx < 0) ? w.ckey : ld_key(src, plane + (long long)gy * w.W + gx, w.dt);
            }
            __syncthreads();
            // Rows: per (row, chunk of kx): suffix min into B (columns < BX), prefix in A.
            const int cxn = (Lx + kx - 1) / kx;
            for (int task = tid; task < Ly * cxn; task += nt) {
                const int row = task / cxn, c = task - row * cxn;
                u32* a = A + row * Lx;
                const int s = c * kx, e = min(s + kx, Lx);
                u32 acc = a[e - 1];
                for (int j = e - 1; j >= s; --j) {
                    acc = mx ? max(acc, a[j]) : min(acc, a[j]);
                    if (j < BX) B[row * BX + j] = acc;
                }
                acc = a[s];
                for (int j = s; j < e; ++j) { acc = mx ? max(acc, a[j]) : min(acc, a[j]); a[j] = acc; }
            }
            __syncthreads();
            for (int i = tid; i < Ly * BX; i += nt) {
                const int row = i / BX, j = i - row * BX;
                const u32 g = A[row * Lx + j + kx - 1];
                B[i] = mx ? max(B[i], g) : min(B[i], g);
            }
            __syncthreads();
            // Columns: per (column, chunk of ky): suffix min into A (rows < BY), prefix in B.
            const int cyn = (Ly + ky - 1) / ky;
            for (int task = tid; task < BX * cyn; task += nt) {
                const int col = task % BX, c = task / BX;
                const int s = c * ky, e = min(s + ky, Ly);
                u32 acc = B[(e - 1) * BX + col];
                for (int j = e - 1; j >= s; --j) {
                    const u32 b = B[j * BX + col];
                    acc = mx ? max(acc, b) : min(acc, b);
                    if (j < BY) A[j * BX + col] = acc;
                }
                acc = B[s * BX + col];
                for (int j = s; j < e; ++j) {
                    const u32 b = B[j * BX + col];
                    acc = mx ? max(acc, b) : min(acc, b);
                    B[j * BX + col] = acc;
                }
            }
            __syncthreads();
            for (int i = tid; i < BY * BX; i += nt) {
                const int row = i / BX, col = i - row * BX;
                const int y = y0 + row, x = x0 + col;
                if (y < w.H && x < w.W) {
                    const u32 h = A[row * BX + col], g = B[(row + ky - 1) * BX + col];
                    st_key(dst, plane + (long long)y * w.W + x, mx ? max(h, g) : min(h, g), w.dt);
                }
            }
            __syncthreads();
        }
    }
}
#endif
