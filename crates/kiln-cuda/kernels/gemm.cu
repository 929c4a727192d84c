// GEMM on f32 storage with f32 (fma) accumulation: kiln's tiled SIMT kernels and the seed's
// naive kernel, kept as the documented baseline.
//
// Every kernel computes, for each batch index z < batch, the row-major product
//     C_z (M x N) = op(A_z) (M x K) . op(B_z) (K x N)
// with A_z = A + z*sA, B_z = B + z*sB, C_z = C + z*sC (element strides; 0 broadcasts one A
// or B to every batch). op(A) is A stored M x K with row stride lda (ta = 0) or the
// transpose of A stored K x M with row stride lda (ta = 1); op(B) likewise (stored K x N, or
// N x K when tb = 1). C is M x N with row stride ldc. All kernels share one signature.
//
// gemm_tiled_{nn,nt,tn,tt}[_s]_f32 (the letter pair is ta, tb):
//   Launch: 256 threads (1-D), grid (ceil(N/128), min(ceil(M/128), 65535), min(batch, 65535)),
//   grid-stride over row tiles and batches; no dynamic shared memory.
//   A block computes a 128x128 tile of C, marching over K in steps of BK = 16. Each
//   step's A tile (128 x BK) and B tile (BK x 128) are staged in shared memory k-major
//   (As[k][m], Bs[k][n], rows padded to 132 words), double-buffered. An operand whose stored
//   rows run along m or n (A stored K x M, B stored K x N) is copied global -> shared with
//   16-byte cp.async (sm_80+; no registers staged, zero-filled outside the matrix); one
//   stored k-contiguous (A stored M x K, B stored N x K) is loaded into registers as float4
//   and stored transposed. The next step's copies are issued before the current step's
//   BK x (8x8) fma, the register-staged half stored after it, then cp.async.wait_all and one
//   barrier. Warp tiling: warp w owns the 32x64 sub-tile at rows (w%4)*32, columns (w/4)*64;
//   lane l the 8x8 register tile at rows (l/8)*4 + {0..3, 16..19}, columns (l%8)*4 +
//   {0..3, 32..35} of it, read from shared memory as four float4 per k: an A read covers 64
//   consecutive bytes (4 addresses, broadcast), a B read 128 (8 addresses): one wavefront
//   each, no bank conflicts.
//   Without the _s suffix global loads are float4: the caller guarantees lda, ldb, sA, sB
//   are multiples of 4 and A, B are 16-byte aligned. Then every float4 lies wholly inside or
//   wholly outside the matrix (its contiguous extent is lda or ldb, a multiple of 4), so edge
//   tiles need only a per-vector guard, zero-filled outside. The _s kernels load the same
//   elements one float each through registers with a per-element guard: any sizes, strides
//   and alignment. Before sm_80 every operand is register-staged.
//   C is stored as float4 where ldc, sC are multiples of 4 and C is 16-byte aligned and the
//   four columns are inside, else one float at a time; rows and columns outside are skipped.
//   No thread returns before a barrier: every loop bound is uniform across the block.
//
// gemm_naive_f32 (the seed's kernel, the baseline):
//   Launch: 16x16 threads, grid (ceil(M/16), min(ceil(N/16), 65535), min(batch, 65535)),
//   grid-stride in y and z. One thread per element of C: x is the row, y the column, as in
//   the seed (numba's cuda.grid(2) with C[i, j], i from x), so a warp reads 32 different
//   rows of A (strided) and one element of B (broadcast), and sums over k in a register.
//
// One kernel a program: kiln compiles each kernel below alone, as its own NVRTC program with
// -DKILN_ONLY -DKILN_K_<name> (kernels.rs), so a process compiles only what it launches;
// without KILN_ONLY the whole file compiles (the compile test, the ptxas_info example).

#define KILN_GEMM_BM 128
#define KILN_GEMM_BN 128
#define KILN_GEMM_THREADS 256

#define KILN_GEMM_ARGS                                                                                      \
    const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K,   \
        long long lda, long long ldb, long long ldc, long long sA, long long sB, long long sC, int batch, \
        int ta, int tb
#define KILN_GEMM_PASS A, B, C, M, N, K, lda, ldb, ldc, sA, sB, sC, batch

// ---- the tiled kernel (BK = 16, cp.async, warp tiling) ----

#define KILN_G2_LD (KILN_GEMM_BM + 4)  // padded row of a k-major shared tile, in floats

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define KILN_GEMM_CP_ASYNC 1
#else
#define KILN_GEMM_CP_ASYNC 0
#endif

// 16 bytes global -> shared, bypassing registers (and L1: .cg); src_bytes = 0 zero-fills.
__device__ __forceinline__ void kiln_cp_async16(float* dst, const float* src, bool in) {
#if KILN_GEMM_CP_ASYNC
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    const int bytes = in ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes) : "memory");
#else
    *reinterpret_cast<float4*>(dst) = in ? *reinterpret_cast<const float4*>(src) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

__device__ __forceinline__ void kiln_cp_async_wait_all() {
#if KILN_GEMM_CP_ASYNC
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// One operand's share of a k-tile: P = BK/8 float4 a thread. OC (outer contiguous: A stored
// K x M, B stored K x N): chunk j is k row tid/32 + 8j of the tile, outer (tid%32)*4 .. +3.
// Otherwise (k-contiguous: A stored M x K, B stored N x K) TPR = BK/4 threads cover one
// outer row: chunk j is outer tid/TPR + (256/TPR)j, k (tid%TPR)*4 .. +3. ASYNC operands go
// straight to shared memory; the others through `r`, stored by `commit`.
template <bool OC, bool VEC, int BK>
struct KilnOperand {
    static constexpr int P = BK / 8;
    static constexpr int TPR = BK / 4;
    static constexpr int ROWS = KILN_GEMM_THREADS / TPR;  // outer rows a pass (!OC)
    static constexpr bool ASYNC = OC && VEC && KILN_GEMM_CP_ASYNC;
    const float* p;  // this thread's chunk 0 in the current k-tile
    int left;        // outer extent minus this thread's chunk-0 outer index
    float4 r[P];

    __device__ __forceinline__ int kt() const { return OC ? (threadIdx.x >> 5) : (threadIdx.x % TPR) * 4; }
    __device__ __forceinline__ int ot() const { return OC ? (threadIdx.x & 31) * 4 : threadIdx.x / TPR; }

    // `ld` is always the kernel's own argument (lda or ldb), so it stays in the constant bank.
    __device__ __forceinline__ void init(const float* b, int outer0, int outer_n, long long ld) {
        const int o = outer0 + ot();
        p = OC ? b + (long long)kt() * ld + o : b + (long long)o * ld + kt();
        left = outer_n - o;
    }
    __device__ __forceinline__ void advance(long long ld) { p += OC ? BK * ld : BK; }

    // ASYNC operands: issue every chunk's copy of the tile at k0 (the one `p` points into).
    // `base` is the kernel's matrix argument: a valid address for the zero-filling copies.
    __device__ __forceinline__ void issue(float (*s)[KILN_G2_LD], int k0, int K, long long ld, const float* base) {
        if (!ASYNC) return;
#pragma unroll
        for (int j = 0; j < P; ++j) {
            const bool in = left > 0 && k0 + kt() + 8 * j < K;
            kiln_cp_async16(&s[kt() + 8 * j][ot()], in ? p + 8 * j * ld : base, in);
        }
    }

    // Register-staged operands: load chunk j of the tile at k0 into r[j] ...
    __device__ __forceinline__ void load(int j, int k0, int K, long long ld) {
        if (ASYNC) return;
        const float* q = p + (OC ? 8 * j : ROWS * j) * ld;
        const int kk = k0 + kt() + (OC ? 8 * j : 0);
        const int lj = OC ? left : left - ROWS * j;
        if (VEC) {
            r[j] = (lj > 0 && kk < K) ? *reinterpret_cast<const float4*>(q) : make_float4(0.f, 0.f, 0.f, 0.f);
        } else {
            float v[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const bool in = OC ? (i < lj && kk < K) : (lj > 0 && kk + i < K);
                v[i] = in ? q[i] : 0.0f;
            }
            r[j] = make_float4(v[0], v[1], v[2], v[3]);
        }
    }

    // ... and store it (transposed when k-contiguous).
    __device__ __forceinline__ void store(float (*s)[KILN_G2_LD], int j) const {
        if (ASYNC) return;
        if (OC) {
            *reinterpret_cast<float4*>(&s[kt() + 8 * j][ot()]) = r[j];
        } else {
            const int o = ot() + ROWS * j, k = kt();
            s[k][o] = r[j].x;
            s[k + 1][o] = r[j].y;
            s[k + 2][o] = r[j].z;
            s[k + 3][o] = r[j].w;
        }
    }
};

template <bool TA, bool TB, bool VEC, int BK>
__device__ __forceinline__ void kiln_gemm_v2(const float* __restrict__ A, const float* __restrict__ B,
                                             float* __restrict__ C, int M, int N, int K, long long lda,
                                             long long ldb, long long ldc, long long sA, long long sB,
                                             long long sC, int batch) {
    __shared__ __align__(16) float As[2][BK][KILN_G2_LD];
    __shared__ __align__(16) float Bs[2][BK][KILN_G2_LD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int ar = (warp & 3) * 32 + (lane >> 3) * 4;  // the thread's first row in the tile
    const int bc = (warp >> 2) * 64 + (lane & 7) * 4;  // its first column
    const int n0 = blockIdx.x * KILN_GEMM_BN;
    const int m_tiles = (M + KILN_GEMM_BM - 1) / KILN_GEMM_BM;
    const bool cvec = ((ldc & 3) == 0) && ((sC & 3) == 0) && ((reinterpret_cast<unsigned long long>(C) & 15) == 0);
    for (int z = blockIdx.z; z < batch; z += gridDim.z) {
        const float* __restrict__ Az = A + (long long)z * sA;
        const float* __restrict__ Bz = B + (long long)z * sB;
        float* __restrict__ Cz = C + (long long)z * sC;
        for (int mt = blockIdx.y; mt < m_tiles; mt += gridDim.y) {
            const int m0 = mt * KILN_GEMM_BM;
            // A: m is contiguous when A is stored transposed (K x M); B: n is contiguous
            // when B is stored K x N (not transposed).
            KilnOperand<TA, VEC, BK> la;
            KilnOperand<!TB, VEC, BK> lb;
            la.init(Az, m0, M, lda);
            lb.init(Bz, n0, N, ldb);
            la.issue(As[0], 0, K, lda, A);
            lb.issue(Bs[0], 0, K, ldb, B);
#pragma unroll
            for (int j = 0; j < KilnOperand<TA, VEC, BK>::P; ++j) {
                la.load(j, 0, K, lda);
                lb.load(j, 0, K, ldb);
                la.store(As[0], j);
                lb.store(Bs[0], j);
            }
            kiln_cp_async_wait_all();
            __syncthreads();
            float acc[8][8];
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
            int buf = 0;
            for (int k0 = 0; k0 < K; k0 += BK) {
                const bool next = k0 + BK < K;
                if (next) {
                    la.advance(lda);
                    lb.advance(ldb);
                    la.issue(As[buf ^ 1], k0 + BK, K, lda, A);
                    lb.issue(Bs[buf ^ 1], k0 + BK, K, ldb, B);
                }
                const float* as = &As[buf][0][ar];
                const float* bs = &Bs[buf][0][bc];
                // The register-staged chunks one at a time, each loaded before and stored after
                // its share of the fma (the other buffer is free all step): at most one float4
                // an operand is live across the fma.
                constexpr int P = KilnOperand<TA, VEC, BK>::P, KP = BK / P;
#pragma unroll
                for (int j = 0; j < P; ++j) {
                    if (next) {
                        la.load(j, k0 + BK, K, lda);
                        lb.load(j, k0 + BK, K, ldb);
                    }
#pragma unroll
                    for (int kk = j * KP; kk < (j + 1) * KP; ++kk) {
                        const float4 a0 = *reinterpret_cast<const float4*>(as + kk * KILN_G2_LD);
                        const float4 a1 = *reinterpret_cast<const float4*>(as + kk * KILN_G2_LD + 16);
                        const float4 b0 = *reinterpret_cast<const float4*>(bs + kk * KILN_G2_LD);
                        const float4 b1 = *reinterpret_cast<const float4*>(bs + kk * KILN_G2_LD + 32);
                        const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                        const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                        for (int i = 0; i < 8; ++i)
#pragma unroll
                            for (int jj = 0; jj < 8; ++jj) acc[i][jj] = fmaf(a[i], b[jj], acc[i][jj]);
                    }
                    if (next) {
                        la.store(As[buf ^ 1], j);
                        lb.store(Bs[buf ^ 1], j);
                    }
                }
                kiln_cp_async_wait_all();
                __syncthreads();
                buf ^= 1;
            }
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int m = m0 + ar + (i < 4 ? i : 16 + (i - 4));
                if (m >= M) continue;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int n = n0 + bc + h * 32;
                    float* __restrict__ c = Cz + (long long)m * ldc + n;
                    if (cvec && n + 3 < N) {
                        *reinterpret_cast<float4*>(c) =
                            make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
                    } else {
#pragma unroll
                        for (int j = 0; j < 4; ++j)
                            if (n + j < N) c[j] = acc[i][h * 4 + j];
                    }
                }
            }
        }
    }
}

#define KILN_GEMM_KERNEL(NAME, BODY)                                                              \
    extern "C" __global__ void __launch_bounds__(KILN_GEMM_THREADS, 2) NAME(KILN_GEMM_ARGS) { BODY(KILN_GEMM_PASS); }

#if !defined(KILN_ONLY) || defined(KILN_K_gemm_tiled_nn_f32)
KILN_GEMM_KERNEL(gemm_tiled_nn_f32, (kiln_gemm_v2<false, false, true, 16>))
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_gemm_tiled_nt_f32)
KILN_GEMM_KERNEL(gemm_tiled_nt_f32, (kiln_gemm_v2<false, true, true, 16>))
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_gemm_tiled_tn_f32)
KILN_GEMM_KERNEL(gemm_tiled_tn_f32, (kiln_gemm_v2<true, false, true, 16>))
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_gemm_tiled_tt_f32)
KILN_GEMM_KERNEL(gemm_tiled_tt_f32, (kiln_gemm_v2<true, true, true, 16>))
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_gemm_tiled_nn_s_f32)
KILN_GEMM_KERNEL(gemm_tiled_nn_s_f32, (kiln_gemm_v2<false, false, false, 16>))
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_gemm_tiled_nt_s_f32)
KILN_GEMM_KERNEL(gemm_tiled_nt_s_f32, (kiln_gemm_v2<false, true, false, 16>))
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_gemm_tiled_tn_s_f32)
KILN_GEMM_KERNEL(gemm_tiled_tn_s_f32, (kiln_gemm_v2<true, false, false, 16>))
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_gemm_tiled_tt_s_f32)
KILN_GEMM_KERNEL(gemm_tiled_tt_s_f32, (kiln_gemm_v2<true, true, false, 16>))
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_gemm_naive_f32)
extern "C" __global__ void gemm_naive_f32(KILN_GEMM_ARGS) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // the row, as in the seed
    const long long ars = ta ? 1 : lda, acs = ta ? lda : 1;
    const long long brs = tb ? 1 : ldb, bcs = tb ? ldb : 1;
    for (int z = blockIdx.z; z < batch; z += gridDim.z) {
        const float* Az = A + (long long)z * sA;
        const float* Bz = B + (long long)z * sB;
        float* Cz = C + (long long)z * sC;
        for (int j = blockIdx.y * blockDim.y + threadIdx.y; j < N; j += gridDim.y * blockDim.y) {
            if (i < M) {
                float tmp = 0.0f;
                for (int p = 0; p < K; ++p) tmp += Az[i * ars + p * acs] * Bz[p * brs + j * bcs];
                Cz[i * ldc + j] = tmp;
            }
        }
    }
}
#endif
