#line 1 "label.cu"
// Connected-component labelling (scipy.ndimage.label's result, as kiln_core::imaging::label
// computes it): every group of non-zero elements joined through the structure's neighbours
// gets one label, numbered 1, 2, ... in row-major order of each group's first element.
//
// One int32 array L of n elements (the output) carries the whole computation:
// - label_init: -1 for a zero element; for a non-zero one (read as its truth, dt: 0 u8/bool,
//   1 u16, 2 f32, 3 f64, 4 i32, 5 i64; NaN is true) L[p] = p, or, when the structure joins
//   an element to its left neighbour (`run`), the start of its run of non-zero elements
//   along the row, looked up at most LBL_RUN elements back (further runs chain in hops of
//   LBL_RUN): every run is then one tree before the merge, which skips that neighbour;
// - label_merge: for each non-zero p and each neighbour q of the structure that comes
//   before p in row-major order (offsets table, 3 ints a neighbour: dz, dy, dx), union of
//   p's and q's trees by Playne and Hawick's lock-free merge: each root is linked to the
//   smaller root with atomicMin, and a link that lost a race is retried from the old
//   parent. Parents only ever decrease and stay inside the group, so each group's final
//   root is its smallest index: its first element in row-major order;
// - label_compress: L[p] = the root of p;
// - label_count, label_scan, label_number: the roots counted per 1,024-element block, the
//   counts scanned (one block), then each root's L slot set to -(its number + 1): roots are
//   numbered in index order, which is scipy's numbering;
// - label_write: every element's label in place: 0 for a zero, a root's number decoded, a
//   non-root its root's number. A root's slot may be decoded by its own thread while another
//   reads it: the reader decodes either form (negative: encoded, else the number), so the
//   race is harmless; after compression no element points at a non-root.
// Shapes are (D, H, W) (fewer axes padded with 1s), n = D*H*W < 2^31.

typedef unsigned char u8;
typedef unsigned short u16;
#define LBL_BLOCK 256
#define LBL_PER 4  // elements a thread in the count and number kernels
#define LBL_TILE (LBL_BLOCK * LBL_PER)
#define LBL_RUN 32  // elements label_init looks back along a row

__device__ __forceinline__ int lbl_truth(const void* __restrict__ p, long long i, int dt) {
    switch (dt) {
        case 0: return ((const u8*)p)[i] != 0;
        case 1: return ((const u16*)p)[i] != 0;
        case 2: return (((const unsigned*)p)[i] & 0x7fffffffu) != 0;
        case 3: return (((const unsigned long long*)p)[i] & 0x7fffffffffffffffull) != 0;
        case 4: return ((const int*)p)[i] != 0;
        default: return ((const long long*)p)[i] != 0;
    }
}

__device__ __forceinline__ int lbl_find(const int* L, int p) {
    int q = L[p];
    while (q != p) {
        p = q;
        q = L[p];
    }
    return p;
}

#if !defined(KILN_ONLY) || defined(KILN_K_label_init)
extern "C" __global__ void __launch_bounds__(256) label_init(const void* __restrict__ src, int dt,
                                                             int* __restrict__ L, int n, int W, int run) {
    const int stride = gridDim.x * blockDim.x;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += stride) {
        if (!lbl_truth(src, p, dt)) {
            L[p] = -1;
            continue;
        }
        int q = p;
        if (run) {
            const int x0 = p - p % W;  // the row's first element
            const int lo = max(x0, p - LBL_RUN);
            while (q > lo && lbl_truth(src, q - 1, dt)) --q;
        }
        L[p] = q;
    }
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_label_merge)
extern "C" __global__ void __launch_bounds__(256) label_merge(int* L, const int* __restrict__ offs, int cnt,
                                                              int D, int H, int W) {
    const int stride = gridDim.x * blockDim.x;
    const int n = D * H * W;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += stride) {
        if (L[p] < 0) continue;
        const int x = p % W, y = (p / W) % H, z = p / (W * H);
        for (int i = 0; i < cnt; ++i) {
            const int zz = z + offs[3 * i], yy = y + offs[3 * i + 1], xx = x + offs[3 * i + 2];
            if (zz < 0 || zz >= D || yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
            int b = (zz * H + yy) * W + xx;
            if (L[b] < 0) continue;
            int a = p;
            for (;;) {
                a = lbl_find(L, a);
                b = lbl_find(L, b);
                if (a == b) break;
                if (a < b) {
                    const int old = atomicMin(&L[b], a);
                    if (old == b) break;
                    b = old;
                } else {
                    const int old = atomicMin(&L[a], b);
                    if (old == a) break;
                    a = old;
                }
            }
        }
    }
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_label_compress)
extern "C" __global__ void __launch_bounds__(256) label_compress(int* L, int n) {
    const int stride = gridDim.x * blockDim.x;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += stride) {
        if (L[p] >= 0) L[p] = lbl_find(L, p);
    }
}
#endif

// The block's count of roots among its LBL_TILE elements (thread t: elements tile0 + t*4 ..).
__device__ __forceinline__ int lbl_roots_of_thread(const int* L, int tile0, int n) {
    int c = 0;
#pragma unroll
    for (int j = 0; j < LBL_PER; ++j) {
        const int p = tile0 + threadIdx.x * LBL_PER + j;
        if (p < n && L[p] == p) ++c;
    }
    return c;
}

// Exclusive scan of v over the block (256 threads), the total in *total.
__device__ __forceinline__ int lbl_block_scan(int v, int* total) {
    __shared__ int warp_sums[LBL_BLOCK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int inc = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc += t;
    }
    if (lane == 31) warp_sums[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        int s = lane < LBL_BLOCK / 32 ? warp_sums[lane] : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int t = __shfl_up_sync(0xffffffffu, s, d);
            if (lane >= d) s += t;
        }
        if (lane < LBL_BLOCK / 32) warp_sums[lane] = s;  // inclusive
    }
    __syncthreads();
    const int before = warp > 0 ? warp_sums[warp - 1] : 0;
    *total = warp_sums[LBL_BLOCK / 32 - 1];
    const int r = before + inc - v;
    __syncthreads();  // warp_sums reused by the caller's next scan
    return r;
}

#if !defined(KILN_ONLY) || defined(KILN_K_label_count)
extern "C" __global__ void __launch_bounds__(256) label_count(const int* __restrict__ L, int n,
                                                              int* __restrict__ counts) {
    const int c = lbl_roots_of_thread(L, blockIdx.x * LBL_TILE, n);
    int total;
    lbl_block_scan(c, &total);
    if (threadIdx.x == 0) counts[blockIdx.x] = total;
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_label_scan)
// One block: counts[0..nb) becomes its exclusive scan, *total their sum. Thread t scans the
// contiguous chunk [t*c, (t+1)*c), c = ceil(nb / 256): its chunk's sum, a block scan of the
// sums, then its chunk again from its offset.
extern "C" __global__ void __launch_bounds__(256) label_scan(int* counts, int nb, int* total_out) {
    const int c = (nb + LBL_BLOCK - 1) / LBL_BLOCK;
    const int b0 = min(nb, threadIdx.x * c), b1 = min(nb, b0 + c);
    int sum = 0;
    for (int i = b0; i < b1; ++i) sum += counts[i];
    int total;
    int run = lbl_block_scan(sum, &total);
    for (int i = b0; i < b1; ++i) {
        const int v = counts[i];
        counts[i] = run;
        run += v;
    }
    if (threadIdx.x == 0) *total_out = total;
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_label_number)
extern "C" __global__ void __launch_bounds__(256) label_number(int* L, int n, const int* __restrict__ offsets) {
    const int tile0 = blockIdx.x * LBL_TILE;
    const int c = lbl_roots_of_thread(L, tile0, n);
    int total;
    int rank = offsets[blockIdx.x] + lbl_block_scan(c, &total);
#pragma unroll
    for (int j = 0; j < LBL_PER; ++j) {
        const int p = tile0 + threadIdx.x * LBL_PER + j;
        if (p < n && L[p] == p) L[p] = -(++rank) - 1;
    }
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_label_write)
extern "C" __global__ void __launch_bounds__(256) label_write(int* L, int n) {
    const int stride = gridDim.x * blockDim.x;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += stride) {
        const int v = L[p];
        if (v == -1) {
            L[p] = 0;
        } else if (v < 0) {
            L[p] = -v - 1;  // a root: its number
        } else {
            const int r = L[v];  // its root's slot, encoded or already decoded
            L[p] = r < 0 ? -r - 1 : r;
        }
    }
}
#endif
