// Host stand-ins for the CUDA built-ins the rank, basket, implied-volatility and interpolation
// kernels use, so a C++ compiler can run them (tests/host_emulation.rs): qualifiers become
// nothing, the grid indices are
// globals the driver loop sets (threadIdx per host thread), the SIMD intrinsics are their
// documented per-lane operations, and the _rn arithmetic intrinsics are the host's IEEE
// operations, which round to nearest the same way (compile with -ffp-contract=off so the
// host compiler does not fuse them). emu_launch_threads runs each CTA's threads as host
// threads, `__shared__` is one static per kernel (one CTA runs at a time) and __syncwarp a
// barrier across a warp's 32 host threads. The f64 library functions (exp, log, pow, sqrt,
// trunc) are the host's libm, which Rust's f64 methods call too.
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __global__
#define __restrict__
#define __shared__ static
#define __launch_bounds__(...)
struct Dim3 { unsigned x = 0, y = 0, z = 0; };
static Dim3 blockIdx, blockDim, gridDim;
static thread_local Dim3 threadIdx;
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline double min(double a, double b) { return a < b ? a : b; }
static inline double max(double a, double b) { return a > b ? a : b; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline double __longlong_as_double(long long u) { double d; memcpy(&d, &u, 8); return d; }
// One host thread runs at a time where this is used (interp_check.cpp's grid loop).
static inline int atomicOr(int* p, int v) { const int o = *p; *p = o | v; return o; }
static inline unsigned __vminu4(unsigned a, unsigned b) { unsigned r = 0; for (int i = 0; i < 4; ++i) { unsigned x = (a >> 8*i) & 255, y = (b >> 8*i) & 255; r |= (x < y ? x : y) << 8*i; } return r; }
static inline unsigned __vmaxu4(unsigned a, unsigned b) { unsigned r = 0; for (int i = 0; i < 4; ++i) { unsigned x = (a >> 8*i) & 255, y = (b >> 8*i) & 255; r |= (x > y ? x : y) << 8*i; } return r; }
static inline unsigned __vminu2(unsigned a, unsigned b) { unsigned r = 0; for (int i = 0; i < 2; ++i) { unsigned x = (a >> 16*i) & 65535, y = (b >> 16*i) & 65535; r |= (x < y ? x : y) << 16*i; } return r; }
static inline unsigned __vmaxu2(unsigned a, unsigned b) { unsigned r = 0; for (int i = 0; i < 2; ++i) { unsigned x = (a >> 16*i) & 65535, y = (b >> 16*i) & 65535; r |= (x > y ? x : y) << 16*i; } return r; }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = ((unsigned long long)y << 32) | x; unsigned r = 0;
  for (int n = 0; n < 4; ++n) { unsigned sel = (s >> 4*n) & 7; r |= (unsigned)((v >> 8*sel) & 255) << 8*n; }
  return r;
}
// The round-to-nearest arithmetic intrinsics: the host's IEEE operations (SSE on x86-64,
// no contraction with -ffp-contract=off).
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline float __double2float_rn(double a) { return (float)a; }
static inline float __int2float_rn(int a) { return (float)a; }
static inline float __uint2float_rn(unsigned a) { return (float)a; }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }

// PTX `asm` statements of one f32 operand and result: tests/host_emulation.rs rewrites
// `asm("OP %0, %1;" : "=f"(r) : "f"(x));` into `r = emu_asm_OP(x);` (dots as underscores).
// The reciprocal square root is given correctly rounded (finance.cuh's kiln_sqrt_pos refines
// it to the correctly rounded root, which the GPU test sqrt_fast_path_is_correctly_rounded
// checks on the device); the approximations of the fast-math path are the host's functions
// (only compiled here, never compared).
static inline float emu_asm_rsqrt_approx_ftz_f32(float x) { return (float)(1.0 / std::sqrt((double)x)); }
static inline float emu_asm_lg2_approx_ftz_f32(float x) { return std::log2(x); }
static inline float emu_asm_sqrt_approx_ftz_f32(float x) { return std::sqrt(x); }
static inline float emu_asm_ex2_approx_ftz_f32(float x) { return std::exp2(x); }
static inline float emu_asm_sin_approx_ftz_f32(float x) { return std::sin(x); }
static inline float emu_asm_cos_approx_ftz_f32(float x) { return std::cos(x); }

// A reusable barrier for a warp's host threads (C++17 has none).
struct EmuBarrier {
  std::mutex m;
  std::condition_variable cv;
  unsigned n, waiting = 0, gen = 0;
  explicit EmuBarrier(unsigned n_) : n(n_) {}
  void wait() {
    std::unique_lock<std::mutex> l(m);
    const unsigned g = gen;
    if (++waiting == n) { waiting = 0; ++gen; cv.notify_all(); }
    else cv.wait(l, [&] { return gen != g; });
  }
};
static std::vector<std::unique_ptr<EmuBarrier>> emu_warp_barriers;
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp_barriers[threadIdx.x / 32]->wait(); }

// Runs `body` (a kernel call) as `grid` CTAs of `block` threads, one CTA after another,
// each thread a host thread with its own threadIdx.
template <class F> static void emu_launch_threads(unsigned grid, unsigned block, F body) {
  gridDim.x = grid; gridDim.y = gridDim.z = 1;
  blockDim.x = block; blockDim.y = blockDim.z = 1;
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    emu_warp_barriers.clear();
    for (unsigned w = 0; 32 * w < block; ++w)
      emu_warp_barriers.emplace_back(new EmuBarrier(std::min(32u, block - 32 * w)));
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; ++t) ts.emplace_back([t, &body] { threadIdx.x = t; body(); });
    for (auto& th : ts) th.join();
  }
}
