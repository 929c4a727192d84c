#line 1 "distance.cu"
// scipy.ndimage.distance_transform_edt on the device: the separable Voronoi feature transform
// of Maurer, Qi and Raghavan as kiln_core::imaging::distance::edt ports scipy's C code
// (NI_EuclideanFeatureTransform), one pass per axis from axis 0, each line of a pass on its
// own thread, with the CPU's scan order, tie rules and f64 operations in the same order
// (the module is compiled with --fmad=false, so no product is fused into a sum), so the
// features and distances are the CPU's (so scipy's) bit for bit.
//
// Layout: the arrays stay in the input's row-major order. A point's feature is held as
// planes of n int32 (plane k at k*n, as scipy's `indices`): after pass d, planes 0..d hold
// the coordinates along axes 0..d of the point's nearest site, and its coordinates along
// the later axes are the point's own (the passes so far moved features only along axes
// 0..d), so they are not stored. A point without a feature (its lines so far held no
// background element) has -1 in plane 0 and 0 in the others, as the CPU leaves it.
//
// The line of pass d numbered t (t < n / len, len = dims[d], inner = the product of the
// axes after d) starts at (t / inner) * len * inner + t % inner and steps by inner, so
// consecutive threads take neighbouring lines and, except in the last pass (inner = 1),
// read and write neighbouring elements.
//
// - edt_scan0: pass 0 when the CPU computes it as a scan (kiln-core's `scan_first`: every
//   background element of the line is a site and each point takes the nearest, the earlier
//   of two equally near): a forward sweep writes the last background position, a backward
//   sweep the choice. With one axis it is also the last pass and writes the distances.
// - edt_pass: any pass by the stack of sites (scipy's _VoronoiFT). The stack lives in global
//   scratch, entry l of line t at l * lines + t (consecutive threads, consecutive words):
//   sg (the site's position on the line) and sw (its squared distance to the line over the
//   other axes). `fast` says the CPU's `fast_delta`: a point's squared distance to a site is
//   the site's sw plus the term of axis d, else the sum over every axis in axis order. The
//   last pass (d = r - 1) writes every plane and, when `dist` is not null, the distances
//   sqrt(sum_k ((feature_k - x_k) * s_k)^2), the difference in int32 and the sum in axis
//   order, as NumPy computes scipy's. A null `dst` there (no indices wanted) writes only the
//   distances.
//
// Both take blocks of 256 threads, grid-stride over the lines.

typedef unsigned char u8;
typedef long long i64;
#define EDT_MAXR 4  // the most axes the launcher passes

// The int32 difference as NumPy takes it (wrapping), as a double.
__device__ __forceinline__ double edt_diff(int a, int b) {
    return (double)(int)((unsigned)a - (unsigned)b);
}

// The distance of the point at position ii of a last-pass line to its feature `pt`:
// sqrt(sum_k ((pt_k - x_k) * s_k)^2), the difference in int32 and the sum in axis order.
__device__ __forceinline__ double edt_distance(const int* pt, const i64* coor, int ii,
    const double* s, int r, int d) {
    double acc = 0.0;
#pragma unroll
    for (int k = 0; k < EDT_MAXR; ++k) {
        if (k < r) {
            const int x = k == d ? ii : (int)coor[k];
            const double tt = edt_diff(pt[k], x) * s[k];
            acc = k == 0 ? tt * tt : acc + tt * tt;
        }
    }
    return sqrt(acc);
}

// A point's squared distance to the site at stack entry l: the CPU's `delta`.
__device__ __forceinline__ double edt_delta(int l, int ii, i64 t, i64 lines, i64 base,
    i64 inner, const int* __restrict__ sg, const double* __restrict__ sw,
    const int* __restrict__ src, i64 n, const i64* coor, const double* s, double sd, int r,
    int d, int fast) {
    const int g = sg[(i64)l * lines + t];
    if (fast) {
        const double tt = (double)((i64)g - ii) * sd;
        return sw[(i64)l * lines + t] + tt * tt;
    }
    const i64 q = base + (i64)g * inner;
    double acc = 0.0;
#pragma unroll
    for (int jj = 0; jj < EDT_MAXR; ++jj) {
        if (jj < r) {
            const i64 c = jj == d ? (i64)ii : coor[jj];
            const i64 fj = jj < d ? (i64)src[jj * n + q] : jj == d ? (i64)g : coor[jj];
            const double tt = (double)(fj - c) * s[jj];
            acc += tt * tt;
        }
    }
    return acc;
}

#if !defined(KILN_ONLY) || defined(KILN_K_edt_scan0)
extern "C" __global__ void __launch_bounds__(256) edt_scan0(const u8* __restrict__ mask,
    int* __restrict__ dst0, double* __restrict__ dist, i64 lines, int len, double s0) {
    for (i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x; t < lines;
         t += (i64)gridDim.x * blockDim.x) {
        int last = -1;
        for (int i = 0; i < len; ++i) {
            const i64 p = t + (i64)i * lines;
            if (mask[p] == 0) last = i;
            dst0[p] = last;
        }
        int next = -1;
        for (int i = len - 1; i >= 0; --i) {
            const i64 p = t + (i64)i * lines;
            if (mask[p] == 0) next = i;
            const int left = dst0[p];
            int pos;
            if (left < 0) pos = next;
            else if (next < 0) pos = left;
            else pos = i - left <= next - i ? left : next;
            dst0[p] = pos;
            if (dist) {
                const double d = edt_diff(pos, i) * s0;
                dist[p] = sqrt(d * d);
            }
        }
    }
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_edt_pass)
extern "C" __global__ void __launch_bounds__(256) edt_pass(const u8* __restrict__ mask,
    const int* __restrict__ src, int* __restrict__ dst, int* __restrict__ sg,
    double* __restrict__ sw, double* __restrict__ dist, const i64* __restrict__ dims_g,
    const double* __restrict__ samp_g, int r, int d, i64 n, int fast) {
    i64 dims[EDT_MAXR];
    double s[EDT_MAXR];
#pragma unroll
    for (int k = 0; k < EDT_MAXR; ++k) {
        dims[k] = k < r ? dims_g[k] : 1;
        s[k] = k < r ? samp_g[k] : 1.0;
    }
    const int len = (int)dims_g[d];
    const double sd = samp_g[d];
    i64 inner = 1;
#pragma unroll
    for (int k = 0; k < EDT_MAXR; ++k)
        if (k > d && k < r) inner *= dims[k];
    const i64 lines = n / len;
    for (i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x; t < lines;
         t += (i64)gridDim.x * blockDim.x) {
        const i64 o = t / inner;
        const i64 base = o * len * inner + (t - o * inner);
        // the line's coordinates (0 along axis d)
        i64 coor[EDT_MAXR];
        {
            i64 idx = base;
#pragma unroll
            for (int k = EDT_MAXR - 1; k >= 0; --k) {
                coor[k] = 0;
                if (k < r) {
                    coor[k] = idx % dims[k];
                    idx /= dims[k];
                }
            }
        }
        // the sites that can be nearest to some point of the line
        int m = 0;
        for (int ii = 0; ii < len; ++ii) {
            const i64 p = base + (i64)ii * inner;
            if (d == 0 ? mask[p] != 0 : src[p] < 0) continue;
            const double fd = (double)ii;
            double w = 0.0;
#pragma unroll
            for (int jj = 0; jj < EDT_MAXR; ++jj) {
                if (jj < r && jj != d) {
                    const i64 fj = jj < d ? (i64)src[jj * n + p] : coor[jj];
                    const double tt = (double)(fj - coor[jj]) * s[jj];
                    w += tt * tt;
                }
            }
            while (m >= 2) {
                const i64 e1 = (i64)(m - 1) * lines + t, e2 = (i64)(m - 2) * lines + t;
                const double f1 = (double)sg[e1];
                const double a = (f1 - (double)sg[e2]) * sd;
                const double b = (fd - f1) * sd;
                const double c = a + b;
                const double u = sw[e2], v = sw[e1];
                if (c * v - b * u - a * w - a * b * c <= 0.0) break;
                --m;
            }
            sg[(i64)m * lines + t] = ii;
            sw[(i64)m * lines + t] = w;
            ++m;
        }
        if (m == 0) {
            // no site on the line: its points keep having no feature (-1, 0, ...)
            for (int ii = 0; ii < len; ++ii) {
                const i64 p = base + (i64)ii * inner;
                if (dst) {
                    dst[p] = -1;
                    for (int k = 1; k <= d; ++k) dst[k * n + p] = 0;
                }
                if (dist) {
                    int none[EDT_MAXR];
#pragma unroll
                    for (int k = 0; k < EDT_MAXR; ++k) none[k] = k == 0 ? -1 : 0;
                    dist[p] = edt_distance(none, coor, ii, s, r, d);
                }
            }
            continue;
        }
        // each point takes the first site whose successor is not strictly nearer
        int l = 0;
        for (int ii = 0; ii < len; ++ii) {
            const i64 p = base + (i64)ii * inner;
            double d1 = edt_delta(l, ii, t, lines, base, inner, sg, sw, src, n, coor, s, sd, r, d, fast);
            while (l + 1 < m) {
                const double d2 =
                    edt_delta(l + 1, ii, t, lines, base, inner, sg, sw, src, n, coor, s, sd, r, d, fast);
                if (d1 <= d2) break;
                d1 = d2;
                ++l;
            }
            const int g = sg[(i64)l * lines + t];
            const i64 q = base + (i64)g * inner;
            int pt[EDT_MAXR];
#pragma unroll
            for (int k = 0; k < EDT_MAXR; ++k) {
                pt[k] = 0;
                if (k < r) pt[k] = k < d ? src[k * n + q] : k == d ? g : (int)coor[k];
                if (dst && k <= d) dst[k * n + p] = pt[k];
            }
            if (dist) dist[p] = edt_distance(pt, coor, ii, s, r, d);
        }
    }
}
#endif
