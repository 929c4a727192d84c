// 2-D transpose of a row-major rows x cols matrix into cols x rows, by bit width: 32-bit
// (f32) and 16-bit (f16 and bf16 share it: a transpose only moves bits).
//
// Launch: blocks of 32x8 threads, one 32x32 tile per block iteration; each thread moves
// 4 elements in and 4 out. Reads and writes are coalesced rows of the tile; the tile has a
// padding of one 32-bit word per row, so the column reads hit 32 different banks (32-bit:
// row stride 33 words; 16-bit: 34 halves = 17 words, odd). Grid-stride over tiles in both
// axes, so any shape (1xN, Nx1, odd) is covered by any grid.

typedef unsigned short u16;

template <class T, int PAD>
__device__ __forceinline__ void transpose_body(const T* __restrict__ x, T* __restrict__ y, int rows, int cols) {
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

extern "C" __global__ void transpose_b32(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    transpose_body<float, 1>(x, y, rows, cols);
}

extern "C" __global__ void transpose_b16(const u16* __restrict__ x, u16* __restrict__ y, int rows, int cols) {
    transpose_body<u16, 2>(x, y, rows, cols);
}
