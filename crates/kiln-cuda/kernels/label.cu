#line 1 "label.cu"
// Connected-component labelling (scipy.ndimage.label's result, as kiln_core::imaging::label
// computes it): every group of non-zero elements joined through the structure's neighbours
// gets one label, numbered 1, 2, ... in row-major order of each group's first element.
//
// Two int32 arrays of n elements: L (scratch) carries the union-find, out the labels.
// - label_local: one block a tile of at most 1,024 elements (td x th x tw, row-major inside
//   the tile), read as their truth (dt: 0 u8/bool, 1 u16, 2 f32, 3 f64, 4 i32, 5 i64; NaN is
//   true) into shared memory; each non-zero element joined with the structure's neighbours
//   before it (offsets table, 3 ints a neighbour: dz, dy, dx, copied once a block into a
//   shared table with each neighbour's step inside the tile) that lie in the same tile, by
//   Playne and Hawick's lock-free merge in shared memory (each root linked to the smaller
//   root with atomicMin; a link that lost a race is retried from the old parent; finds
//   jump each element passed to its grandparent). Local order is the global row-major
//   order restricted to the tile, so every local tree's root is its first element; L[p] =
//   the global index of p's local root, -1 for a zero. When the structure joins left
//   neighbours (`run` 1 or 2), each element starts pointing at its row run's first element
//   within its warp's 32 (one ballot). With `run` 2 a link between two runs is also made
//   once, where their overlap starts: an element whose left neighbour and whose
//   neighbour's left neighbour are both non-zero skips that neighbour (the pair to its left
//   joins the same two runs). `run` 2 is the default (KILN_LABEL_SKIP=0 gives 1); the GPU
//   bitwise test passes in both, and scripts/label-tile-emulation.py checks the rule
//   against scipy on the host;
// - label_border: the same merge in L for the pairs the tiles cut (an element on a tile's
//   face and a neighbour before it in another tile), with the same skip under `run` 2.
//   Parents only ever decrease and stay inside the group, so each group's final root is
//   its smallest index: its first element in row-major order;
// - label_compress: L[p] = the root of p, so the last step reads one link, and the roots
//   (L[p] == p) counted per 1,024-element block on the way;
// - label_scan, label_number: the counts scanned (one block), then each root's L slot set
//   to -(its number + 1): roots are numbered in index order, which is scipy's numbering;
// - label_resolve: out[p] = 0 for a zero, else the number of the root at the end of p's
//   chain in L (a root's slot is the only negative one on a chain; after label_compress
//   the chain is one link). L is only read here.
typedef unsigned char u8;
typedef unsigned short u16;
#define LBL_BLOCK 256
#define LBL_PER 4  // elements a thread in the count and number kernels
#define LBL_TILE (LBL_BLOCK * LBL_PER)
#define LBL_TILE_ELEMS 1024  // elements a label_local / label_border tile holds at most
#define LBL_MAX_NB 13        // neighbours before the centre in a 3x3x3 structure

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

// The root of a, shortening the path on the way (ECL-CC's intermediate pointer jumping: each
// element passed is pointed at its grandparent). Only non-roots are written, always with an
// element of their own tree, so a concurrent link (which writes roots) is never undone in a
// way that splits a tree: a link that a jump overwrites was made by a union that goes on
// from the old parent, which stays in the tree.
__device__ __forceinline__ int lbl_find_jump(int* P, int a) {
    int cur = P[a];
    if (cur != a) {
        int prev = a, next;
        while (cur > (next = P[cur])) {
            P[prev] = next;
            prev = cur;
            cur = next;
        }
    }
    return cur;
}

// Union of the trees of a and b in P (global or shared memory), Playne-Hawick.
__device__ __forceinline__ void lbl_union(int* P, int a, int b) {
    for (;;) {
        a = lbl_find_jump(P, a);
        b = lbl_find_jump(P, b);
        if (a == b) return;
        if (a < b) {
            const int old = atomicMin(&P[b], a);
            if (old == b) return;
            b = old;
        } else {
            const int old = atomicMin(&P[a], b);
            if (old == a) return;
            a = old;
        }
    }
}

// Block b's tile: its first element's coordinates (tiles in row-major order).
struct LblTile {
    int x0, y0, z0;
};

__device__ __forceinline__ LblTile lbl_tile(int H, int W, int td, int th, int tw) {
    const int tx = (W + tw - 1) / tw, ty = (H + th - 1) / th;
    const int b = blockIdx.x;
    LblTile t;
    t.x0 = (b % tx) * tw;
    t.y0 = ((b / tx) % ty) * th;
    t.z0 = (b / (tx * ty)) * td;
    return t;
}

#if !defined(KILN_ONLY) || defined(KILN_K_label_local)
extern "C" __global__ void __launch_bounds__(256) label_local(const void* __restrict__ src, int dt,
                                                              int* __restrict__ L, int D, int H, int W,
                                                              int td, int th, int tw,
                                                              const int* __restrict__ offs, int cnt,
                                                              int run) {
    __shared__ int s[LBL_TILE_ELEMS];
    // the neighbour table, once a block (cnt <= LBL_MAX_NB, the launcher's before-half of a
    // 3x3x3 structure): dz, dy, dx, the linear step inside the tile, and whether it is the
    // left neighbour; read after the barrier below
    __shared__ int nb[LBL_MAX_NB * 5];
    const LblTile t = lbl_tile(H, W, td, th, tw);
    const int x0 = t.x0, y0 = t.y0, z0 = t.z0;
    const int tsz = td * th * tw;
    const int lw = __ffs(tw) - 1, lh = __ffs(th) - 1;  // tile extents are powers of two
    if ((int)threadIdx.x < cnt) {
        const int i = threadIdx.x;
        const int dz = offs[3 * i], dy = offs[3 * i + 1], dx = offs[3 * i + 2];
        nb[5 * i] = dz;
        nb[5 * i + 1] = dy;
        nb[5 * i + 2] = dx;
        nb[5 * i + 3] = (dz * th + dy) * tw + dx;
        nb[5 * i + 4] = dz == 0 && dy == 0 && dx == -1;
    }
    for (int e = threadIdx.x; e < tsz; e += LBL_BLOCK) {
        const int lx = e & (tw - 1), ly = (e >> lw) & (th - 1), lz = e >> (lw + lh);
        const int x = x0 + lx, y = y0 + ly, z = z0 + lz;
        const bool on = x < W && y < H && z < D && lbl_truth(src, ((long long)z * H + y) * W + x, dt);
        int v = on ? e : -1;
        if (run) {
            // a warp holds 32 consecutive elements of one tile row (tw >= 32, both powers of
            // two; every lane takes part: tsz is a multiple of 32): each starts pointing at
            // the first element of its run within them
            const unsigned set = __ballot_sync(0xffffffffu, on);
            const int lane = e & 31;
            const unsigned upto = lane == 31 ? 0xffffffffu : (2u << lane) - 1u;
            const unsigned gaps = ~set & upto;  // zeros at or below this lane
            if (on) v = e - lane + (gaps ? 32 - __clz(gaps) : 0);
        }
        s[e] = v;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < tsz; e += LBL_BLOCK) {
        if (s[e] < 0) continue;  // a valid element's slot never goes negative
        const int lx = e & (tw - 1), ly = (e >> lw) & (th - 1), lz = e >> (lw + lh);
        for (int i = 0; i < cnt; ++i) {
            const bool left = nb[5 * i + 4];
            // a run's elements are joined already; its first one in the warp's 32 joins the
            // element before it
            if (run && left && (e & 31)) continue;
            const int nx = lx + nb[5 * i + 2];
            // inside the tile (one unsigned compare an axis: a negative index wraps high)
            if ((unsigned)(lz + nb[5 * i]) >= (unsigned)td || (unsigned)(ly + nb[5 * i + 1]) >= (unsigned)th ||
                (unsigned)nx >= (unsigned)tw)
                continue;
            const int q = e + nb[5 * i + 3];
            if (s[q] < 0) continue;
            // (not the left link itself) both left neighbours on: the runs of e and q are
            // joined through them (the first link of the two runs' overlap)
            if (run == 2 && !left && lx > 0 && nx > 0 && s[e - 1] >= 0 && s[q - 1] >= 0) continue;
            lbl_union(s, e, q);
        }
    }
    __syncthreads();
    const int g0 = (z0 * H + y0) * W + x0;  // the tile's first element, globally
    for (int e = threadIdx.x; e < tsz; e += LBL_BLOCK) {
        const int lx = e & (tw - 1), ly = (e >> lw) & (th - 1), lz = e >> (lw + lh);
        if (x0 + lx >= W || y0 + ly >= H || z0 + lz >= D) continue;
        int v = -1;
        if (s[e] >= 0) {
            const int r = lbl_find_jump(s, e);
            const int rx = r & (tw - 1), ry = (r >> lw) & (th - 1), rz = r >> (lw + lh);
            v = g0 + (rz * H + ry) * W + rx;
        }
        L[g0 + (lz * H + ly) * W + lx] = v;
    }
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_label_border)
extern "C" __global__ void __launch_bounds__(256) label_border(int* L, int D, int H, int W, int td,
                                                               int th, int tw,
                                                               const int* __restrict__ offs, int cnt,
                                                               int run) {
    const LblTile t = lbl_tile(H, W, td, th, tw);
    const int x0 = t.x0, y0 = t.y0, z0 = t.z0;
    // Only the tile's faces are walked: the planes lx = 0, ly = 0, lz = 0, lx = tw - 1 and
    // ly = th - 1, each only where it can hold a face element below (a plane at the image's
    // edge cannot), and an element on several planes only on the first of them. Every
    // element the face test below accepts lies on one of these planes, so this visits the
    // same elements as a walk over the whole tile (about 130 of a 32 x 32 tile's 1,024).
    const bool on0 = x0 > 0, on1 = y0 > 0, on2 = z0 > 0, on3 = x0 + tw < W,
               on4 = y0 + th < H && (z0 > 0 || td > 1);
    const int n0 = on0 ? td * th : 0, n1 = on1 ? td * tw : 0, n2 = on2 ? th * tw : 0,
              n3 = on3 ? td * th : 0, n4 = on4 ? td * tw : 0;
    const int total = n0 + n1 + n2 + n3 + n4;
    for (int e = threadIdx.x; e < total; e += LBL_BLOCK) {
        int lx, ly, lz, r = e;
        if (r < n0) {
            lx = 0, ly = r % th, lz = r / th;
        } else if ((r -= n0) < n1) {
            lx = r % tw, ly = 0, lz = r / tw;
            if (on0 && lx == 0) continue;
        } else if ((r -= n1) < n2) {
            lx = r % tw, ly = r / tw, lz = 0;
            if ((on0 && lx == 0) || (on1 && ly == 0)) continue;
        } else if ((r -= n2) < n3) {
            lx = tw - 1, ly = r % th, lz = r / th;
            if ((on0 && lx == 0) || (on1 && ly == 0) || (on2 && lz == 0)) continue;
        } else {
            r -= n3;
            lx = r % tw, ly = th - 1, lz = r / tw;
            if ((on0 && lx == 0) || (on1 && ly == 0) || (on2 && lz == 0) || (on3 && lx == tw - 1)) continue;
        }
        const int x = x0 + lx, y = y0 + ly, z = z0 + lz;
        if (x >= W || y >= H || z >= D) continue;
        // a neighbour before p (dz < 0, or dz = 0 and dy < 0, or dz = dy = 0 and dx < 0) can
        // leave the tile only through these faces
        const bool face = (lx == 0 && x > 0) || (ly == 0 && y > 0) || (lz == 0 && z > 0) ||
                          (lx == tw - 1 && x + 1 < W && (y > 0 || z > 0)) ||
                          (ly == th - 1 && y + 1 < H && z > 0);
        if (!face) continue;
        const int p = (z * H + y) * W + x;
        if (L[p] < 0) continue;
        for (int i = 0; i < cnt; ++i) {
            const int nz = lz + offs[3 * i], ny = ly + offs[3 * i + 1], nx = lx + offs[3 * i + 2];
            if (nz >= 0 && nz < td && ny >= 0 && ny < th && nx >= 0 && nx < tw) continue;  // joined by label_local
            const int zz = z0 + nz, yy = y0 + ny, xx = x0 + nx;
            if (zz < 0 || zz >= D || yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
            const int q = (zz * H + yy) * W + xx;
            if (L[q] < 0) continue;
            // as in label_local: the left neighbours' link (made here or there) joins the runs
            const bool left = offs[3 * i] == 0 && offs[3 * i + 1] == 0 && offs[3 * i + 2] == -1;
            if (run == 2 && !left && x > 0 && xx > 0 && L[p - 1] >= 0 && L[q - 1] >= 0) continue;
            lbl_union(L, p, q);
        }
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

#if !defined(KILN_ONLY) || defined(KILN_K_label_compress)
// Every element pointed at its root, and the roots of each LBL_TILE-element block counted
// (counts[block]): roots never change here (only non-roots are rewritten), so the count
// is the one label_number finds.
extern "C" __global__ void __launch_bounds__(256) label_compress(int* L, int n, int* __restrict__ counts) {
    const int tile0 = blockIdx.x * LBL_TILE;
    int c = 0;
#pragma unroll
    for (int j = 0; j < LBL_PER; ++j) {
        const int p = tile0 + threadIdx.x * LBL_PER + j;
        if (p >= n) break;
        const int v = L[p];
        if (v == p) {
            ++c;
        } else if (v >= 0) {
            const int r = lbl_find(L, v);
            if (r != v) L[p] = r;
        }
    }
    int total;
    lbl_block_scan(c, &total);
    if (threadIdx.x == 0) counts[blockIdx.x] = total;
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_label_scan)
// One block: counts[0..nb) becomes its exclusive scan, *total their sum. The counts go by
// in chunks of LBL_TILE, thread t holding elements 4t..4t+3 of a chunk (the warp's loads
// contiguous), each chunk block-scanned and carried into the next.
extern "C" __global__ void __launch_bounds__(256) label_scan(int* counts, int nb, int* total_out) {
    int carry = 0;
    for (int base = 0; base < nb; base += LBL_TILE) {
        int v[LBL_PER];
        int sum = 0;
#pragma unroll
        for (int j = 0; j < LBL_PER; ++j) {
            const int i = base + threadIdx.x * LBL_PER + j;
            v[j] = i < nb ? counts[i] : 0;
            sum += v[j];
        }
        int total;
        int run = carry + lbl_block_scan(sum, &total);
#pragma unroll
        for (int j = 0; j < LBL_PER; ++j) {
            const int i = base + threadIdx.x * LBL_PER + j;
            if (i < nb) counts[i] = run;
            run += v[j];
        }
        carry += total;
    }
    if (threadIdx.x == 0) *total_out = carry;
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

#if !defined(KILN_ONLY) || defined(KILN_K_label_resolve)
extern "C" __global__ void __launch_bounds__(256) label_resolve(const int* __restrict__ L,
                                                                int* __restrict__ out, int n) {
    const int stride = gridDim.x * blockDim.x;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += stride) {
        int v = L[p];
        if (v == -1) {
            out[p] = 0;
            continue;
        }
        while (v >= 0) v = L[v];  // a root's slot holds -(number + 1), number >= 1
        out[p] = -v - 1;
    }
}
#endif
