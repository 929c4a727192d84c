// Element-wise kernels: one thread handles 16 bytes (float4) per grid-stride step, so each
// warp issues 512-byte fully coalesced transactions; a scalar loop covers the n % 4 tail.
// Pointers must be 16-byte aligned (kiln launches these only on whole allocations).

__device__ __forceinline__ float kiln_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

#define KILN_UNARY_F32(NAME, F)                                                              \
extern "C" __global__ void NAME(const float* __restrict__ x, float* __restrict__ y,          \
                                unsigned long long n) {                                       \
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;             \
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; \
    const unsigned long long n4 = n / 4;                                                      \
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);                        \
    float4* __restrict__ y4 = reinterpret_cast<float4*>(y);                                    \
    for (unsigned long long i = tid; i < n4; i += stride) {                                   \
        float4 v = x4[i];                                                                     \
        v.x = F(v.x); v.y = F(v.y); v.z = F(v.z); v.w = F(v.w);                               \
        y4[i] = v;                                                                            \
    }                                                                                         \
    for (unsigned long long i = n4 * 4 + tid; i < n; i += stride) y[i] = F(x[i]);             \
}

KILN_UNARY_F32(sigmoid_f32, kiln_sigmoid)
