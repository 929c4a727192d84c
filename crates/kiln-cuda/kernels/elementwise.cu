// Element-wise kernels. Memory-bound: each thread moves 16 bytes (float4) per access, so a
// warp issues 512-byte fully coalesced transactions, and issues KILN_EW_UNROLL independent
// loads before the first store, so enough bytes are in flight per SM to cover HBM latency
// with a grid of only a few blocks per SM. A scalar loop covers the n % 4 tail.
// Pointers must be 16-byte aligned (kiln launches these only on whole allocations).

#define KILN_EW_UNROLL 4

__device__ __forceinline__ float kiln_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

#define KILN_UNARY_F32(NAME, F)                                                              \
extern "C" __global__ void NAME(const float* __restrict__ x, float* __restrict__ y,          \
                                unsigned long long n) {                                       \
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;             \
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; \
    const unsigned long long n4 = n / 4;                                                      \
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);                        \
    float4* __restrict__ y4 = reinterpret_cast<float4*>(y);                                    \
    for (unsigned long long base = tid; base < n4; base += stride * KILN_EW_UNROLL) {         \
        float4 v[KILN_EW_UNROLL];                                                             \
        _Pragma("unroll")                                                                     \
        for (int u = 0; u < KILN_EW_UNROLL; ++u) {                                            \
            const unsigned long long i = base + u * stride;                                   \
            if (i < n4) v[u] = x4[i];                                                         \
        }                                                                                     \
        _Pragma("unroll")                                                                     \
        for (int u = 0; u < KILN_EW_UNROLL; ++u) {                                            \
            const unsigned long long i = base + u * stride;                                   \
            if (i < n4) {                                                                     \
                float4 w = v[u];                                                              \
                w.x = F(w.x); w.y = F(w.y); w.z = F(w.z); w.w = F(w.w);                       \
                y4[i] = w;                                                                    \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    for (unsigned long long i = n4 * 4 + tid; i < n; i += stride) y[i] = F(x[i]);             \
}

KILN_UNARY_F32(sigmoid_f32, kiln_sigmoid)
