#line 1 "morph.cu"
// Binary morphology (kiln_core::imaging::morphology::BinarySpec; scipy.ndimage semantics),
// bit for bit the CPU's. Masks are u8 0/1; an input of another type is read as its truth
// (dt: 0 u8, 1 u16, 2 f32; non-zero, NaN included, is true).
//
// - binary_step: one erosion (AND over the window, `border` outside) or dilation (OR over
//   the already reflected window) step. Where `mask` is given and its truth (inverted when
//   mask_inv) is false, the pixel keeps its input. Sets *changed when any pixel changed.
//   Block 32x8, grid (ceil(W/32), min(ceil(H/8), 65535), min(D, 65535)), grid-stride in y, z.
// - binary_not_u8: x = 1 - x (binary_fill_holes' final complement), grid-stride.

typedef unsigned char u8;
typedef unsigned short u16;

__device__ __forceinline__ int truth_at(const void* __restrict__ p, long long i, int dt) {
    if (dt == 0) return ((const u8*)p)[i] != 0;
    if (dt == 1) return ((const u16*)p)[i] != 0;
    return (((const unsigned*)p)[i] & 0x7fffffffu) != 0;
}

#if !defined(KILN_ONLY) || defined(KILN_K_binary_step)
extern "C" __global__ void __launch_bounds__(256) binary_step(const void* __restrict__ src, int dt,
                                                              u8* __restrict__ dst, const void* __restrict__ mask,
                                                              int mask_dt, int mask_inv,
                                                              const int* __restrict__ offs, int cnt, int dilate,
                                                              int border, int D, int H, int W,
                                                              int* __restrict__ changed) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= W) return;
    int any = 0;
    for (int z = blockIdx.z; z < D; z += gridDim.z) {
        for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < H; y += gridDim.y * blockDim.y) {
            const long long p = ((long long)z * H + y) * W + x;
            const int in = truth_at(src, p, dt);
            int v = in;
            const bool active = mask == nullptr || (truth_at(mask, p, mask_dt) != mask_inv);
            if (active) {
                v = dilate ? 0 : 1;
                for (int i = 0; i < cnt; ++i) {
                    const int zz = z + offs[3 * i], yy = y + offs[3 * i + 1], xx = x + offs[3 * i + 2];
                    int t = border;
                    if (zz >= 0 && zz < D && yy >= 0 && yy < H && xx >= 0 && xx < W)
                        t = truth_at(src, ((long long)zz * H + yy) * W + xx, dt);
                    if (dilate && t) { v = 1; break; }
                    if (!dilate && !t) { v = 0; break; }
                }
            }
            dst[p] = (u8)v;
            any |= v != in;
        }
    }
    if (any) *changed = 1;
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_binary_not_u8)
extern "C" __global__ void binary_not_u8(u8* __restrict__ x, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) x[i] = 1 - x[i];
}
#endif
