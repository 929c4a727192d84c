// 3×3 correlation of a float32 image (h rows × w columns, row-major) with a shared-memory
// tile, boundary mode `nearest` (an outside read takes the nearest edge pixel).
//
// Semantics are scipy.ndimage.correlate(image, weights, mode="nearest") with the kernel
// centred (origin 0), which is what kiln's filter2d computes:
//
//   out[y][x] = sum_{dy, dx in -1..1} weights[dy + 1][dx + 1] * image[clamp(y + dy)][clamp(x + dx)]
//
// Correlation, not convolution: the weights are not flipped (weights[0][0] multiplies the
// pixel up and to the left).
//
// Each block computes a TILE×TILE patch of the output. Its threads first copy the
// (TILE + 2)×(TILE + 2) input window the patch needs (the patch plus a one-pixel halo on
// every side) into shared memory, clamping coordinates at the image edge; after the
// barrier each thread reads its 9 inputs from shared memory instead of global memory, so
// each input pixel is read from global memory about once instead of 9 times.
//
// Launch: block (TILE, TILE) = (16, 16), grid (ceil(w / 16), ceil(h / 16)).

#define TILE 16
#define RADIUS 1
#define SPAN (TILE + 2 * RADIUS)

extern "C" __global__ void filter3x3_shared(const float* __restrict__ image, float* __restrict__ out,
                                            const float* __restrict__ weights, int h, int w) {
    __shared__ float tile[SPAN][SPAN];

    // The window's top-left corner in image coordinates (may be -1: the halo).
    const int x0 = blockIdx.x * TILE - RADIUS;
    const int y0 = blockIdx.y * TILE - RADIUS;

    // SPAN*SPAN = 324 values for 256 threads: each thread copies every 256th one. The
    // clamps are the boundary mode: another mode changes only these two lines.
    const int tid = threadIdx.y * TILE + threadIdx.x;
    for (int i = tid; i < SPAN * SPAN; i += TILE * TILE) {
        const int ty = i / SPAN, tx = i % SPAN;
        const int y = min(max(y0 + ty, 0), h - 1);
        const int x = min(max(x0 + tx, 0), w - 1);
        tile[ty][tx] = image[(size_t)y * w + x];
    }
    // Every thread of the block reaches the barrier: the bounds check comes after it.
    __syncthreads();

    const int x = blockIdx.x * TILE + threadIdx.x;
    const int y = blockIdx.y * TILE + threadIdx.y;
    if (x >= w || y >= h) return;

    // Output (x, y) sits at (threadIdx.x + 1, threadIdx.y + 1) in the tile.
    float acc = 0.0f;
#pragma unroll
    for (int dy = 0; dy < 3; ++dy) {
#pragma unroll
        for (int dx = 0; dx < 3; ++dx) {
            acc = fmaf(weights[dy * 3 + dx], tile[threadIdx.y + dy][threadIdx.x + dx], acc);
        }
    }
    out[(size_t)y * w + x] = acc;
}
