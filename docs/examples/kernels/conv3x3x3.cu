// 3×3×3 correlation of a float32 volume (d planes × h rows × w columns, row-major),
// boundary mode `nearest` (an outside read takes the nearest edge voxel).
//
// Semantics are scipy.ndimage.correlate(volume, weights, mode="nearest") with the kernel
// centred (origin 0), which is what kiln's filter3d computes:
//
//   out[z][y][x] = sum_{dz, dy, dx in -1..1}
//                  weights[dz + 1][dy + 1][dx + 1] * volume[clamp(z + dz)][clamp(y + dy)][clamp(x + dx)]
//
// Correlation, not convolution: the weights are not flipped. (A "3-D convolution" layer of
// a neural network is this same correlation.)
//
// One thread per output voxel on a 3-D grid: x fastest (coalesced rows), z across
// blockIdx.z. The 27 reads go through the L1/texture cache (`__ldg`, the input is
// read-only); neighbouring threads share most of them. The shared-memory tile of
// filter3x3_shared.cu applies here too, with a 3-D halo.
//
// Launch: block (32, 4, 2), grid (ceil(w / 32), ceil(h / 4), ceil(d / 2)).
extern "C" __global__ void conv3x3x3(const float* __restrict__ volume, float* __restrict__ out,
                                     const float* __restrict__ weights, int d, int h, int w) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= w || y >= h || z >= d) return;

    float acc = 0.0f;
#pragma unroll
    for (int dz = -1; dz <= 1; ++dz) {
        const int zz = min(max(z + dz, 0), d - 1);  // nearest: clamp to the volume
#pragma unroll
        for (int dy = -1; dy <= 1; ++dy) {
            const int yy = min(max(y + dy, 0), h - 1);
            const float* row = volume + ((size_t)zz * h + yy) * w;
#pragma unroll
            for (int dx = -1; dx <= 1; ++dx) {
                const int xx = min(max(x + dx, 0), w - 1);
                const float wt = weights[((dz + 1) * 3 + (dy + 1)) * 3 + (dx + 1)];
                acc = fmaf(wt, __ldg(row + xx), acc);
            }
        }
    }
    out[((size_t)z * h + y) * w + x] = acc;
}
