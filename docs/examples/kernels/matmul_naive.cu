// C = A · B for row-major float32 matrices: A is m×k, B is k×n, C is m×n.
//
// The textbook first CUDA kernel: one thread per element of C. Thread (x, y) of the grid
// computes C[y][x] as the dot product of row y of A with column x of B. x is the fast
// index of a warp, so the 32 threads of a warp read 32 consecutive elements of a row of B
// (one coalesced load) and all read the same element of A (a broadcast), and write 32
// consecutive elements of C.
//
// It is slow on purpose: every element of A and B is read from global memory n (or m)
// times. Tiling A and B through shared memory (as kiln's own GEMM does) is the next step.
//
// Launch: block (16, 16), grid (ceil(n / 16), ceil(m / 16)).
extern "C" __global__ void matmul_naive(const float* __restrict__ a, const float* __restrict__ b,
                                        float* __restrict__ c, int m, int n, int k) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n) return;  // the grid is rounded up to whole blocks
    const float* a_row = a + (size_t)row * k;
    float acc = 0.0f;
    for (int p = 0; p < k; ++p) {
        acc = fmaf(a_row[p], b[(size_t)p * n + col], acc);  // one rounding per step
    }
    c[(size_t)row * n + col] = acc;
}
