// Host stand-ins for the CUDA built-ins the rank kernels use, so a C++ compiler can run them
// (tests/host_emulation.rs): qualifiers become nothing, the grid indices are globals the
// driver loop sets, and the SIMD intrinsics are their documented per-lane operations.
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __global__
#define __restrict__
#define __launch_bounds__(...)
struct Dim3 { unsigned x = 0, y = 0, z = 0; };
static Dim3 blockIdx, threadIdx, blockDim, gridDim;
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline double min(double a, double b) { return a < b ? a : b; }
static inline double max(double a, double b) { return a > b ? a : b; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline unsigned __vminu4(unsigned a, unsigned b) { unsigned r = 0; for (int i = 0; i < 4; ++i) { unsigned x = (a >> 8*i) & 255, y = (b >> 8*i) & 255; r |= (x < y ? x : y) << 8*i; } return r; }
static inline unsigned __vmaxu4(unsigned a, unsigned b) { unsigned r = 0; for (int i = 0; i < 4; ++i) { unsigned x = (a >> 8*i) & 255, y = (b >> 8*i) & 255; r |= (x > y ? x : y) << 8*i; } return r; }
static inline unsigned __vminu2(unsigned a, unsigned b) { unsigned r = 0; for (int i = 0; i < 2; ++i) { unsigned x = (a >> 16*i) & 65535, y = (b >> 16*i) & 65535; r |= (x < y ? x : y) << 16*i; } return r; }
static inline unsigned __vmaxu2(unsigned a, unsigned b) { unsigned r = 0; for (int i = 0; i < 2; ++i) { unsigned x = (a >> 16*i) & 65535, y = (b >> 16*i) & 65535; r |= (x > y ? x : y) << 16*i; } return r; }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = ((unsigned long long)y << 32) | x; unsigned r = 0;
  for (int n = 0; n < 4; ++n) { unsigned sel = (s >> 4*n) & 7; r |= (unsigned)((v >> 8*sel) & 255) << 8*n; }
  return r;
}
