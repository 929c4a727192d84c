// kiln's bf16 and fp8 GEMMs for Hopper (sm_90a), the shared part of `gemm_wgmma.cu` (the
// default kernels) and `gemm_wgmma_variants.cu` (the variants the benchmark compares): TMA
// tile loads into 128-byte-swizzled shared memory, wgmma (warpgroup MMA) from shared-memory
// descriptors, warp specialisation (one producer warpgroup issues the TMA copies, two
// consumer warpgroups multiply) over a ring of STAGES buffers handed over by mbarriers, and a
// persistent grid (one block per SM walking the tiles in M-grouped order, so neighbouring
// blocks share A and B panels in L2).
//
// Layout: C (m x n, row-major, bf16) = op(A) op(B) as kiln's GEMM (A stored m x k, or k x m when
// transposed; B stored k x n, or n x k when transposed), each operand read as stored: wgmma
// takes bf16 K-major or M/N-major from shared memory. Products accumulate in
// f32 (wgmma's); C is rounded to bf16 once, to nearest even. The launcher makes the two tensor
// maps (cuTensorMapEncodeTiled: 2-D over each operand as stored, 128-byte swizzle, boxes 64
// elements wide, out-of-bounds elements read as zero, so m, n and k need no padding) and passes
// them by value as __grid_constant__ parameters. Each stored row must be a multiple of 16 bytes
// and A and B 16-byte aligned (TMA's rules), which the launcher checks. The fp8 kernels
// (e4m3, e5m2) read A (m x k) and B (n x k) K-major only (wgmma has no transposed fp8 form),
// 128 elements of k a stage, and scale C by a per-product factor before rounding it to bf16.
//
// Block: 384 threads (warpgroup 0 produces, 1 and 2 consume 64 rows each of a 128 x 256
// tile). Dynamic shared memory: STAGES * (128 + 256) * 64 * 2 bytes, plus the C staging
// buffers of the TMA-store epilogues (2 x 32 KiB, or 2 x 16 KiB when written in halves), plus
// 1024 for alignment.

#define KILN_WG_BN 256

struct __align__(64) KilnTmaDesc {
    unsigned long long w[16];
};

__device__ __forceinline__ unsigned int smem_addr(const void* p) {
    return (unsigned int)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Wait until the phase of parity `parity` has completed (a fresh barrier is in phase 0, so
// waiting on parity 1 returns at once).
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned int parity) {
    unsigned int a = smem_addr(bar);
    unsigned int done = 0;
    while (!done) {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(a), "r"(parity)
            : "memory");
    }
}

// One 2-D TMA tile: box at (x = column, y = row) of the tensor map into shared memory, its
// bytes counted on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const KilnTmaDesc* map, int x, int y,
                                            unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
            smem_addr(dst)),
        "l"((unsigned long long)map), "r"(x), "r"(y), "r"(smem_addr(bar))
        : "memory");
}

// tma_load_2d multicast: the box lands at the same shared-memory offset (dst) in each block
// of the cluster named by `mask` (bit r: rank r), its bytes counted on the mbarrier at the
// same offset (bar) in each.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const KilnTmaDesc* map, int x, int y,
                                                      unsigned long long* bar, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(
            smem_addr(dst)),
        "l"((unsigned long long)map), "r"(x), "r"(y), "r"(smem_addr(bar)), "h"(mask)
        : "memory");
}

__device__ __forceinline__ unsigned int cluster_ctarank() {
    unsigned int r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

// Every thread of every block of the cluster arrives, then waits for all (release / acquire:
// each block's shared-memory writes and mbarrier inits before are visible to the others).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

// Arrive on the mbarrier at `bar`'s offset in the cluster's block `rank`.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned int rank) {
    unsigned int remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

// A shared-memory matrix descriptor: K-major rows of 128 bytes, 128-byte swizzle, 8-row
// groups 1024 bytes apart (the stride byte offset); the leading byte offset is unused by
// swizzled K-major layouts (set to 16 bytes, encoded 1).
__device__ __forceinline__ unsigned long long smem_desc(const void* p) {
    unsigned long long a = smem_addr(p);
    return ((a & 0x3FFFFull) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

// A descriptor for an M- or N-major operand: 64-element (128-byte) chunks along m or n, each
// the 64 k-rows of one TMA box (8 KiB, 128-byte swizzle); the leading byte offset steps from
// one chunk to the next along m or n (8 KiB), the stride byte offset from 8 k-rows to the
// next 8 (1 KiB).
__device__ __forceinline__ unsigned long long smem_desc_mn(const void* p) {
    unsigned long long a = smem_addr(p);
    return ((a & 0x3FFFFull) >> 4) | ((8192ull >> 4) << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait0() {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait1() {
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}

// D (64 x 256, f32, the warpgroup's fragment: 128 a thread) = A (64 x 16) * B (256 x 16)^T, plus
// D when `accumulate` is non-zero,
// both bf16 in shared memory (128-byte swizzle), through their descriptors; TNSP_A / TNSP_B: the
// operand is M- / N-major (its rows run along m or n) instead of K-major.
template <int TNSP_A, int TNSP_B>
__device__ __forceinline__ void wgmma_m64n256k16(float* d, unsigned long long da, unsigned long long db,
                                                 int accumulate) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, p, 1, 1, %131, %132;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(accumulate), "n"(TNSP_A), "n"(TNSP_B));
}

// Tile t of the persistent walk: groups of GROUP_M tile rows, columns within a group.
template <int GROUP_M>
__device__ __forceinline__ void tile_of(int t, int tiles_m, int tiles_n, int* tm, int* tn) {
    int per_group = GROUP_M * tiles_n;
    int g = t / per_group;
    int first = g * GROUP_M;
    int rows = min(tiles_m - first, GROUP_M);
    int r = t - g * per_group;
    *tm = first + r % rows;
    *tn = r / rows;
}

// f32 to bf16 bits, round to nearest even (NaN stays a quiet NaN). Bit operations: NVRTC's
// pip wheel ships no cuda_bf16.h and kiln passes no include path.
__device__ __forceinline__ unsigned int bf16_rn(float x) {
    unsigned int b = __float_as_uint(x);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
    return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
}

__device__ __forceinline__ void store_pair(unsigned short* c, int m, int n, int row, int col, float x, float y) {
    if (row >= m || col >= n) return;
    long long at = (long long)row * n + col;
    if (col + 1 < n && (n % 2) == 0) {
        *reinterpret_cast<unsigned int*>(c + at) = bf16_rn(x) | (bf16_rn(y) << 16);
    } else {
        c[at] = (unsigned short)bf16_rn(x);
        if (col + 1 < n) c[at + 1] = (unsigned short)bf16_rn(y);
    }
}

// One 2-D TMA store: the box at (x = column, y = row) of the tensor map from shared memory,
// in this thread's bulk-async group (the parts outside the tensor are not written).
__device__ __forceinline__ void tma_store_2d(const KilnTmaDesc* map, const void* src, int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                     (unsigned long long)map),
                 "r"(smem_addr(src)), "r"(x), "r"(y)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// this thread's bulk stores have read their shared memory (it may be written again)
__device__ __forceinline__ void bulk_wait_read0() {
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// this thread's bulk stores are complete
__device__ __forceinline__ void bulk_wait0() {
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
// this thread's generic-proxy writes to shared memory become visible to the async proxy (TMA)
__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// barrier `id` among `count` threads (whole warps): one consumer warpgroup
__device__ __forceinline__ void named_bar_sync(int id, int count) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void st_shared_u32(const void* p, unsigned int v) {
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(smem_addr(p)), "r"(v) : "memory");
}

// The TMA-store epilogue of one consumer warpgroup (cw: rows 64 cw.. of the tile at (tm, tn)):
// its 64 x 256 fragment goes to shared memory in HALVES passes of 256 / HALVES columns, each
// pass as 64 x 64 chunks (8 KiB, 128-byte rows, the 128-byte swizzle TMA undoes: 16-byte unit u
// of row r at unit u ^ (r % 8)), then one thread stores the chunks with TMA and the warpgroup
// goes on without waiting for the writes. `buf` (32 KiB / HALVES) is reused only once the
// stores issued from it have read it (wait_group.read by the issuing thread, then the
// warpgroup's barrier). Each thread writes 4-byte pairs: the 8 rows lane / 4 of a warp land on
// 8 different 16-byte units, its 4 columns pairs lane % 4 on the 4 words of one: no bank
// conflicts.
template <int HALVES, int BM, int BN>
__device__ __forceinline__ void epilogue_tma(const KilnTmaDesc* map_c, unsigned char* buf, const float* d, int cw,
                                             int tm, int tn, int m, int n, float scale) {
    constexpr int JS = BN / 8 / HALVES;  // register quads (8 columns each) a pass
    constexpr int CHUNKS = BN / 64 / HALVES;
    const int tid = threadIdx.x % 128;
    const int lane = tid % 32, warp = tid / 32;
    const int r0 = warp * 16 + lane / 4;  // and r0 + 8; both are lane / 4 modulo 8
    const int sw = lane / 4;
    const int q = lane % 4;
#pragma unroll
    for (int h = 0; h < HALVES; ++h) {
        if (tid == 0) bulk_wait_read0();
        named_bar_sync(1 + cw, 128);
#pragma unroll
        for (int jj = 0; jj < JS; ++jj) {
            const int j = h * JS + jj;
            unsigned char* p = buf + (jj / 8) * 8192 + r0 * 128 + (((jj % 8) ^ sw) * 16) + 4 * q;
            st_shared_u32(p, bf16_rn(d[4 * j] * scale) | (bf16_rn(d[4 * j + 1] * scale) << 16));
            st_shared_u32(p + 8 * 128, bf16_rn(d[4 * j + 2] * scale) | (bf16_rn(d[4 * j + 3] * scale) << 16));
        }
        fence_proxy_async_smem();
        named_bar_sync(1 + cw, 128);
        if (tid == 0) {
            const int y = tm * BM + cw * 64;
#pragma unroll
            for (int ch = 0; ch < CHUNKS; ++ch) {
                const int x = tn * BN + (h * CHUNKS + ch) * 64;
                if (x < n && y < m) tma_store_2d(map_c, buf + ch * 8192, x, y);
            }
            bulk_commit();
        }
    }
}

// D (64 x 256, f32) = A (64 x 32) * B (256 x 32)^T, plus D when `accumulate` is non-zero, both
// fp8 K-major in shared memory (128-byte swizzle; fp8 has no transposed form); E5M2: the
// e5m2 format, else e4m3.
template <bool E5M2>
__device__ __forceinline__ void wgmma_m64n256k32_fp8(float* d, unsigned long long da, unsigned long long db,
                                                     int accumulate) {
    if (E5M2) {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2 "
            "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
            "%128, %129, p, 1, 1;\n"
            "}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
            : "l"(da), "l"(db), "r"(accumulate));
    } else {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 "
            "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
            "%128, %129, p, 1, 1;\n"
            "}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
            : "l"(da), "l"(db), "r"(accumulate));
    }
}

// The block's work: a 128 x 256 tile of C (each consumer warpgroup owns 64 rows); STAGES ring
// buffers; INFLIGHT: a consumer keeps one wgmma group running while it waits for the next
// stage (releasing a stage once the group that read it is done), else it waits for each group
// before going on. TA: A is stored k x m (read M-major, two 64 x 64 boxes a stage) instead of
// m x k (K-major, one 128 x 64 box); TB: B is stored n x k (K-major, one 256 x 64 box) instead
// of k x n (N-major, four 64 x 64 boxes). Either way operand tile chunk j of 64 rows (m or n)
// sits at byte 8192 j of its stage. EPI: 0, each consumer thread stores its accumulator pairs
// straight to global memory (c); 1 or 2, the TMA-store epilogue (epilogue_tma) through map_c in
// that many passes (1: a 32 KiB staging buffer a consumer, 2: 16 KiB). GROUP_M: tile rows of
// a group of the persistent walk.
//
// CLUSTER 2 (the kernel declared with __cluster_dims__(2, 1, 1), a grid of whole clusters):
// the two blocks of a cluster take tile rows 2p and 2p + 1 of one tile column together (p
// and the column from the grouped walk over pairs of tile rows), so they need the same B
// panel: each loads half of B's stage (128 rows of n) and multicasts it into both blocks,
// and its own A. A block's full[s] still expects a whole stage's bytes (its A, both B
// halves); its empty[s] counts the consumer warps of both blocks (each consumer warp
// releases a stage in its own block and its partner's), since the partner's multicast
// writes into this block's stage too. Where tile rows are odd in number the second block of
// the last pair row has no tile: it loads no A, multiplies what the stage holds and stores
// nothing, but still loads and multicasts its half of B and releases stages, as its partner
// needs. Both blocks walk the same pairs, so their rings stay in step; neither exits before
// the other has made its last remote arrive (a cluster barrier at the end).
template <int STAGES, bool INFLIGHT, bool TA, bool TB, int ELEM, int EPI = 0, int GROUP_M = 8, int CLUSTER = 1>
__device__ __forceinline__ void gemm_wgmma_body(const KilnTmaDesc* map_a, const KilnTmaDesc* map_b,
                                                const KilnTmaDesc* map_c, unsigned short* __restrict__ c,
                                                int m, int n, int k, float scale) {
    constexpr int BM = 128;
    constexpr int BN = KILN_WG_BN;
    // a stage holds 128 bytes of each operand row: 64 bf16 or 128 fp8 elements of k
    constexpr int BK = ELEM == 0 ? 64 : 128;
    constexpr int a_bytes = BM * 128;
    constexpr int b_bytes = BN * 128;
    // a k16 step moves 32 bytes along a K-major row, 16 rows (2048 bytes) in an M/N-major box
    constexpr int a_kstep = TA ? 2048 : 32;
    constexpr int b_kstep = TB ? 32 : 2048;
    extern __shared__ unsigned char smem_raw[];
    // 128-byte swizzle wants 1024-byte aligned tiles
    unsigned char* smem = (unsigned char*)(((unsigned long long)smem_raw + 1023) & ~1023ull);
    unsigned char* sa = smem;
    unsigned char* sb = smem + STAGES * a_bytes;
    // the C staging buffers (EPI > 0): 64 x 256 bf16 / EPI bytes for each consumer
    constexpr int c_bytes = EPI > 0 ? 64 * BN * 2 / EPI : 0;
    unsigned char* sc = smem + STAGES * (a_bytes + b_bytes);
    __shared__ __align__(8) unsigned long long full[STAGES];
    __shared__ __align__(8) unsigned long long empty[STAGES];

    static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of one or two blocks");
    static_assert(CLUSTER == 1 || ELEM == 0, "clusters for bf16 only");
    const int tiles_m = (m + BM - 1) / BM;
    const int tiles_n = (n + BN - 1) / BN;
    // the units of the walk: tiles, or pairs of tile rows x tile columns for a cluster
    const int rows_m = (tiles_m + CLUSTER - 1) / CLUSTER;
    const int units = rows_m * tiles_n;
    const int unit0 = blockIdx.x / CLUSTER;
    // (the cluster rank and grid stride are read where used, not held in registers beside the
    // consumers' 128 accumulators)
    const int ksteps = (k + BK - 1) / BK;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8 * CLUSTER);  // one arrival from each consumer warp (of each block)
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (CLUSTER > 1) {
        cluster_sync();
    } else {
        __syncthreads();
    }

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (threadIdx.x == 0) {
            unsigned int it = 0;
            const unsigned int rank = CLUSTER > 1 ? cluster_ctarank() : 0;
            for (int t = unit0; t < units; t += gridDim.x / CLUSTER) {
                int tm, tn;
                tile_of<GROUP_M / CLUSTER>(t, rows_m, tiles_n, &tm, &tn);
                tm = tm * CLUSTER + rank;
                const bool own = tm < tiles_m;  // a tile of C (else the pair's missing half)
                for (int ks = 0; ks < ksteps; ++ks, ++it) {
                    unsigned int s = it % STAGES;
                    unsigned int round = it / STAGES;
                    mbar_wait(&empty[s], (round & 1) ^ 1);
                    mbar_expect_tx(&full[s], (own ? a_bytes : 0) + b_bytes);
                    unsigned char* da = sa + s * a_bytes;
                    unsigned char* db = sb + s * b_bytes;
                    if (!own) {
                    } else if (TA) {
                        for (int j = 0; j < BM / 64; ++j)
                            tma_load_2d(da + j * 8192, map_a, tm * BM + 64 * j, ks * BK, &full[s]);
                    } else {
                        tma_load_2d(da, map_a, ks * BK, tm * BM, &full[s]);
                    }
                    if (CLUSTER > 1) {
                        // this block's half of B (rows 128 rank.. of the panel: 16 KiB), into both
                        unsigned char* half = db + rank * 16384;
                        const int row = tn * BN + 128 * rank;
                        if (TB) {
                            tma_load_2d_multicast(half, map_b, ks * BK, row, &full[s], 3);
                        } else {
                            // chunks 2 rank and 2 rank + 1 of 64 columns
                            tma_load_2d_multicast(half, map_b, row, ks * BK, &full[s], 3);
                            tma_load_2d_multicast(half + 8192, map_b, row + 64, ks * BK, &full[s], 3);
                        }
                    } else if (TB) {
                        tma_load_2d(db, map_b, ks * BK, tn * BN, &full[s]);
                    } else {
                        for (int j = 0; j < BN / 64; ++j)
                            tma_load_2d(db + j * 8192, map_b, tn * BN + 64 * j, ks * BK, &full[s]);
                    }
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
        const int cw = wg - 1;  // which 64 rows of the tile
        const int tid = threadIdx.x % 128;
        const int lane = tid % 32, warp = tid / 32;
        float d[BN / 2];
        // stage s read: free it in this block and, for a cluster, in the partner (whose
        // producer multicasts into this block's stage too)
        auto release = [&](unsigned int s) {
            mbar_arrive(&empty[s]);
            if (CLUSTER > 1) mbar_arrive_cluster(&empty[s], cluster_ctarank() ^ 1);
        };
        unsigned int it = 0;
        for (int t = unit0; t < units; t += gridDim.x / CLUSTER) {
            int tm, tn;
            tile_of<GROUP_M / CLUSTER>(t, rows_m, tiles_n, &tm, &tn);
            // past the last tile row: nothing is stored
            tm = tm * CLUSTER + (CLUSTER > 1 ? cluster_ctarank() : 0);
            unsigned int prev = 0;
            for (int ks = 0; ks < ksteps; ++ks, ++it) {
                unsigned int s = it % STAGES;
                unsigned int round = it / STAGES;
                mbar_wait(&full[s], round & 1);
                const unsigned char* ta = sa + s * a_bytes + cw * 8192;
                const unsigned char* tb = sb + s * b_bytes;
                wgmma_fence();
                // four wgmma a stage: k16 for bf16, k32 for fp8, 32 bytes of a K-major row each
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    unsigned long long da = TA ? smem_desc_mn(ta + kk * a_kstep) : smem_desc(ta + kk * a_kstep);
                    unsigned long long db = TB ? smem_desc(tb + kk * b_kstep) : smem_desc_mn(tb + kk * b_kstep);
                    if constexpr (ELEM == 0) {
                        wgmma_m64n256k16<TA ? 1 : 0, TB ? 0 : 1>(d, da, db, ks > 0 || kk > 0);
                    } else {
                        wgmma_m64n256k32_fp8<ELEM == 2>(d, da, db, ks > 0 || kk > 0);
                    }
                }
                wgmma_commit();
                if (INFLIGHT) {
                    // the group before this one is done: its stage can be refilled
                    wgmma_wait1();
                    if (ks > 0 && lane == 0) release(prev);
                    prev = s;
                } else {
                    wgmma_wait0();
                    if (lane == 0) release(s);
                }
            }
            if (INFLIGHT) {
                wgmma_wait0();
                if (ksteps > 0 && lane == 0) release(prev);
            }
            // D fragment: register 4j + e of a thread holds row r (+8 for e >= 2), column
            // 8j + 2q (+1 for odd e), r = 16 warp + lane / 4, q = lane % 4
            if constexpr (EPI > 0) {
                epilogue_tma<EPI, BM, BN>(map_c, sc + cw * c_bytes, d, cw, tm, tn, m, n, scale);
            } else {
                const int row0 = tm * BM + cw * 64 + warp * 16 + lane / 4;
                const int colq = tn * BN + 2 * (lane % 4);
#pragma unroll
                for (int j = 0; j < BN / 8; ++j) {
                    store_pair(c, m, n, row0, colq + 8 * j, d[4 * j] * scale, d[4 * j + 1] * scale);
                    store_pair(c, m, n, row0 + 8, colq + 8 * j, d[4 * j + 2] * scale, d[4 * j + 3] * scale);
                }
            }
        }
        // the staging buffers stay allocated until the last stores have read them, and C is
        // written before the block ends
        if (EPI > 0 && tid == 0) bulk_wait0();
    }
    // the partner may still arrive on this block's barriers: neither block leaves first
    if (CLUSTER > 1) cluster_sync();
}

// A kernel storing C through shared memory with TMA (EPI passes of BN / EPI columns) and
// walking the tiles in groups of GROUP_M tile rows; it takes a third tensor map, over C (n x m
// as stored, 64 x 64 boxes, 128-byte swizzle), after B's. Both modules instantiate it.
#define KILN_WGMMA_TMA_STORE(NAME, STAGES, EPI, GROUP_M, TA, TB)                                        \
    extern "C" __global__ void __launch_bounds__(384, 1)                                                \
        NAME(const __grid_constant__ KilnTmaDesc map_a, const __grid_constant__ KilnTmaDesc map_b,      \
             const __grid_constant__ KilnTmaDesc map_c, unsigned short* __restrict__ c, int m, int n,   \
             int k) {                                                                                   \
        gemm_wgmma_body<STAGES, false, TA, TB, 0, EPI, GROUP_M>(&map_a, &map_b, &map_c, c, m, n, k,     \
                                                                 1.0f);                                 \
    }
