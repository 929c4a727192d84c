// 2-D transpose of a row-major rows x cols matrix into cols x rows, by bit width: 32-bit
// (f32) and 16-bit (f16 and bf16 share them: a transpose only moves bits).
//
// Every kernel: blocks of 32x8 threads, grid-stride over tiles in both axes (so any shape,
// 1xN, Nx1, odd, is covered by any grid), reads and writes coalesced along the tile's rows,
// every access guarded by r < rows, c < cols. Launch: grid (min(ceil(cols/T), 2^31-1),
// min(ceil(rows/T), 65535)) for tile size T.
//
// transpose_b32 (T = 64): a 64x64 tile a block step; each thread first loads its 16
//   elements (rows ty + 8i, columns tx and tx + 32: 16 independent loads in flight, every
//   warp load 128 contiguous bytes), stores them into a 64 x 65 shared tile (the odd row
//   stride puts a column's 32 words in 32 banks), then writes 16 (every warp store 128
//   contiguous bytes of an output row).
// transpose_b16 (T = 64; rows and cols even): 16-bit elements moved as 32-bit words. The
//   matrix is 2x2 blocks of halves: a thread loads the two words of a block (rows 2p, 2p+1,
//   columns 2tx, 2tx+1; 8 loads in flight), forms the transposed block's two words with
//   byte permutes, and stages them in two 32 x 33 word tiles; the write phase stores whole
//   words of output rows 2q and 2q+1.
// transpose_h_b16 (T = 32; the 16-bit path for odd rows or cols): one 32x32 tile a step,
//   4 elements a thread in and out, element by element; the tile padded to 34 halves a row
//   (17 words, odd).
//
// One kernel a program: kiln compiles each kernel below alone, as its own NVRTC program with
// -DKILN_ONLY -DKILN_K_<name> (kernels.rs), so a process compiles only what it launches;
// without KILN_ONLY the whole file compiles (the compile test, the ptxas_info example).

typedef unsigned short u16;
typedef unsigned int u32;

template <class T, int PAD>
__device__ __forceinline__ void transpose32_body(const T* __restrict__ x, T* __restrict__ y, int rows, int cols) {
    __shared__ T tile[32][32 + PAD];
    const int tiles_x = (cols + 31) / 32, tiles_y = (rows + 31) / 32;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int by = blockIdx.y; by < tiles_y; by += gridDim.y) {
        for (int bx = blockIdx.x; bx < tiles_x; bx += gridDim.x) {
            const int c = bx * 32 + tx;
#pragma unroll
            for (int j = ty; j < 32; j += 8) {
                const int r = by * 32 + j;
                if (r < rows && c < cols) tile[j][tx] = x[(long long)r * cols + c];
            }
            __syncthreads();
            const int r = by * 32 + tx;
#pragma unroll
            for (int j = ty; j < 32; j += 8) {
                const int cc = bx * 32 + j;
                if (cc < cols && r < rows) y[(long long)cc * rows + r] = tile[tx][j];
            }
            __syncthreads();
        }
    }
}

#if !defined(KILN_ONLY) || defined(KILN_K_transpose_h_b16)
extern "C" __global__ void transpose_h_b16(const u16* __restrict__ x, u16* __restrict__ y, int rows, int cols) {
    transpose32_body<u16, 2>(x, y, rows, cols);
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_transpose_b32)
extern "C" __global__ void __launch_bounds__(256, 8) transpose_b32(const float* __restrict__ x, float* __restrict__ y,
                                                                int rows, int cols) {
    __shared__ float tile[64][65];
    const int tiles_x = (cols + 63) >> 6, tiles_y = (rows + 63) >> 6;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int by = blockIdx.y; by < tiles_y; by += gridDim.y) {
        for (int bx = blockIdx.x; bx < tiles_x; bx += gridDim.x) {
            const int r0 = by * 64, c0 = bx * 64;
            float v[16];
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int r = r0 + ty + 8 * i;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int c = c0 + tx + 32 * h;
                    v[2 * i + h] = (r < rows && c < cols) ? x[(long long)r * cols + c] : 0.0f;
                }
            }
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h) tile[ty + 8 * i][tx + 32 * h] = v[2 * i + h];
            __syncthreads();
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int orow = c0 + ty + 8 * i;  // an input column
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int ocol = r0 + tx + 32 * h;  // an input row
                    if (orow < cols && ocol < rows) y[(long long)orow * rows + ocol] = tile[tx + 32 * h][ty + 8 * i];
                }
            }
            __syncthreads();
        }
    }
}
#endif

// rows and cols even (the launcher checks): x is rows x cols/2 words, y cols x rows/2.
#if !defined(KILN_ONLY) || defined(KILN_K_transpose_b16)
extern "C" __global__ void __launch_bounds__(256, 8) transpose_b16(const u32* __restrict__ x, u32* __restrict__ y,
                                                                int rows, int cols) {
    __shared__ u32 lo[32][33];  // [column pair][row pair]: output row 2q, words (2p, 2p+1)
    __shared__ u32 hi[32][33];  // output row 2q + 1
    const int wc = cols >> 1, wr = rows >> 1;  // words an input row, an output row
    const int tiles_x = (cols + 63) >> 6, tiles_y = (rows + 63) >> 6;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int by = blockIdx.y; by < tiles_y; by += gridDim.y) {
        for (int bx = blockIdx.x; bx < tiles_x; bx += gridDim.x) {
            const int r0 = by * 64, c0 = bx * 64;
            const int cw = (c0 >> 1) + tx;  // this thread's input word column (column pair)
            u32 t[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int r = r0 + 2 * (ty + 8 * i);  // rows even: r < rows implies r + 1 < rows
                const bool in = r < rows && cw < wc;
                t[i] = in ? x[(long long)r * wc + cw] : 0u;
                b[i] = in ? x[(long long)(r + 1) * wc + cw] : 0u;
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                // little-endian: a word's low half is the lower column. Output row 2cw takes
                // the low halves (input rows r, r+1), output row 2cw+1 the high halves.
                lo[tx][ty + 8 * i] = __byte_perm(t[i], b[i], 0x5410);
                hi[tx][ty + 8 * i] = __byte_perm(t[i], b[i], 0x7632);
            }
            __syncthreads();
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int q = ty + 8 * i;
                const int orow = c0 + 2 * q;       // cols even: orow < cols implies orow + 1 < cols
                const int ow = (r0 >> 1) + tx;     // output word column (input row pair)
                if (orow < cols && ow < wr) {
                    y[(long long)orow * wr + ow] = lo[q][tx];
                    y[(long long)(orow + 1) * wr + ow] = hi[q][tx];
                }
            }
            __syncthreads();
        }
    }
}
#endif
