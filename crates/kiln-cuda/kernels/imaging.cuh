#line 1 "imaging.cuh"
// What the imaging families share (filter2d.cu, separable.cu, filter3d.cu; kiln prepends
// this header to each of them, kernels.rs): correlation in scipy.ndimage.correlate's
// semantics (no kernel flip) on contiguous f32 data.
//
// Boundary modes (code: 0 constant, 1 nearest, 2 reflect, 3 mirror, 4 wrap) are mapped by
// kiln_map, a transcription of BoundaryMode::map_index: any distance outside, size-1 axes.
// Weights arrive by value in a kernel-parameter struct (the constant bank), so a
// compile-time-indexed weight is an FFMA operand with no load. Sums run in f32 with fma in
// row-major tap order, starting from 0 (the CPU sums the same taps in f64). The host
// validates every launch shape (launch_imaging/).
//
// One kernel a program: kiln compiles each kernel of a file alone, as its own NVRTC program
// with -DKILN_ONLY -DKILN_K_<name> (kernels.rs), so a process compiles only what it
// launches; without KILN_ONLY the whole file compiles (the compile test, the ptxas_info
// example).

typedef long long i64;

struct W2 { float w[961]; };
struct W1 { float w[32]; };
struct W3 { float w[343]; };

__device__ __forceinline__ int kiln_map(int i, int n, int mode) {
    if (i >= 0 && i < n) return i;
    if (mode == 0) return -1;
    if (mode == 1) return i < 0 ? 0 : n - 1;
    if (mode == 4) { int p = i % n; return p < 0 ? p + n : p; }
    if (n == 1) return 0;
    if (mode == 2) { const int m = 2 * n; int p = i % m; if (p < 0) p += m; return p < n ? p : m - 1 - p; }
    const int m = 2 * n - 2; int p = i % m; if (p < 0) p += m; return p < n ? p : m - p;
}
