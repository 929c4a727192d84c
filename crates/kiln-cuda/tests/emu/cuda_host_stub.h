// Host stand-ins for the CUDA built-ins the rank, basket, implied-volatility, interpolation
// and labelling kernels use, so a C++ compiler can run them (tests/host_emulation.rs): qualifiers become
// nothing, the grid indices are
// globals the driver loop sets (threadIdx per host thread), the SIMD intrinsics are their
// documented per-lane operations, and the _rn arithmetic intrinsics are the host's IEEE
// operations, which round to nearest the same way (compile with -ffp-contract=off so the
// host compiler does not fuse them). emu_launch_threads runs each CTA's threads as host
// threads, `__shared__` is one static per kernel (one CTA runs at a time), __syncwarp a
// barrier across a warp's 32 host threads and __syncthreads one across the CTA's;
// __ballot_sync gathers a full warp's predicates between barriers, and atomicMin is a real
// atomic (the labelling kernels' threads race on it as on the GPU). The f64 library functions (exp, log, pow, sqrt,
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
// CUDA's mixed overloads compare as unsigned
static inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
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
static std::unique_ptr<EmuBarrier> emu_block_barrier;
static inline void __syncthreads() { emu_block_barrier->wait(); }
// A full warp's ballot: every lane ORs its bit in between two barriers, then reads.
static unsigned emu_ballot_acc[32];
static inline unsigned __ballot_sync(unsigned, int pred) {
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncwarp();
  if (lane == 0) __atomic_store_n(&emu_ballot_acc[w], 0u, __ATOMIC_SEQ_CST);
  __syncwarp();
  if (pred) __atomic_fetch_or(&emu_ballot_acc[w], 1u << lane, __ATOMIC_SEQ_CST);
  __syncwarp();
  return __atomic_load_n(&emu_ballot_acc[w], __ATOMIC_SEQ_CST);
}
// A full warp's shuffle up by d lanes (lanes below d keep their own value).
static int emu_shfl_buf[32][32];
static inline int __shfl_up_sync(unsigned, int v, unsigned d) {
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncwarp();
  emu_shfl_buf[w][lane] = v;
  __syncwarp();
  const int r = lane >= d ? emu_shfl_buf[w][lane - d] : v;
  __syncwarp();
  return r;
}
static inline int atomicMin(int* p, int v) {
  int o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (v < o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return o;
}
static inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }

// Runs `body` (a kernel call) as `grid` CTAs of `block` threads, one CTA after another,
// each thread a host thread with its own threadIdx.
template <class F> static void emu_launch_threads(unsigned grid, unsigned block, F body) {
  gridDim.x = grid; gridDim.y = gridDim.z = 1;
  blockDim.x = block; blockDim.y = blockDim.z = 1;
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    emu_warp_barriers.clear();
    emu_block_barrier.reset(new EmuBarrier(block));
    for (unsigned w = 0; 32 * w < block; ++w)
      emu_warp_barriers.emplace_back(new EmuBarrier(std::min(32u, block - 32 * w)));
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; ++t) ts.emplace_back([t, &body] { threadIdx.x = t; body(); });
    for (auto& th : ts) th.join();
  }
}
