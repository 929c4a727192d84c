#line 1 "interp.cu"
// scipy.ndimage's interpolation as kiln-core computes it: resampling (zoom / shift,
// affine_transform, map_coordinates: kiln_core::imaging::interp::transform's
// zoom_shift_into and geometric_transform_into with Mapping::Affine or
// Mapping::Coordinates), one thread per output point, grid-stride over the output; and the
// spline prefilter (spline.rs's apply_pole), one thread per line.
//
// Each thread computes its input coordinates from its output index (nothing is
// materialised besides the input and the output), maps them with the mode (boundary.rs's
// map_coordinate), finds the order + 1 taps per input axis and their B-spline weights
// (spline.rs's weights_of_delta) and sums the taps in the CPU's order: last axis fastest,
// each tap's value multiplied by the axes' weights in axis order, from t = 0.0.
//
// Exactness contract: every f64 operation below is the CPU loop's, in its order. The module
// is compiled with --fmad=false (Module::options), so no multiply and add are contracted
// (Rust never contracts); f64 division is IEEE, floor is exact, float-to-integer casts
// saturate and take NaN to 0 (im_f2ll, written out so that a host compiler running this
// file gives Rust's `as` too), integer products that Rust wraps are done on unsigned 64-bit
// integers. The powers of a pole (Rust's powf) and the prefilter's gain come from the host.
// So each output is the CPU's value to the bit.
//
// Specialisation: each resampling kernel is one coordinate kind (zoom / shift, affine,
// coordinates), one spline order and one input type (interp_<kind>_o<order>_<f32|f64>), and
// branches once per launch on the input rank and on grid-constant mode into a copy of its
// loops with those fixed too: every tap loop has compile-time bounds and is unrolled, the
// taps and weights stay in registers, and the input is read through the read-only data path
// (__ldg). The order of the f64 operations is unchanged by the unrolling.
//
// Inputs: f32 or f64 coefficients (the spline prefilter already applied where scipy applies
// it), read as f64; outputs f32 (rounded once from the f64 value) or f64. Ranks 1 to 3.
// map_coordinates reads its coordinates as f64, input rank rows of the output's size.
// A tap that the mode cannot map into the input (a coordinate too large for scipy's integer
// arithmetic; the CPU returns an error) sets *status to 1 and the point is written NaN.
#if defined(__USE_FAST_MATH__) && __USE_FAST_MATH__
#error "interp.cu must be compiled without --use_fast_math (CPU agreement)"
#endif

// The launch's parameters, by value. Affine: mat is row-major irank x orank, off the
// offset. Zoom / shift: mat[0..rank) the zooms, off the shifts (each used only when its
// flag is set).
struct InterpArgs {
    long long ishape[3];
    long long istride[3];
    long long oshape[3];
    double mat[9];
    double off[3];
    double cval;
    double nprepad;
    long long n;
    int irank;
    int orank;
    int order;
    int mode;
    int in_f64;
    int out_f64;
    int has_zoom;
    int has_shift;
    int grid_mode;
    int pad;
};

// kiln_core::imaging::interp::InterpMode codes (scipy's NI_ExtendMode).
#define IM_NEAREST 0
#define IM_WRAP 1
#define IM_REFLECT 2
#define IM_MIRROR 3
#define IM_CONSTANT 4
#define IM_GRID_WRAP 5
#define IM_GRID_CONSTANT 6

// Rust's `f as i64`: truncation toward zero, saturating, NaN to 0.
__device__ __forceinline__ long long im_f2ll(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775807.0) return 9223372036854775807LL;
    if (x <= -9223372036854775808.0) return (-9223372036854775807LL - 1);
    return (long long)x;
}

__device__ __forceinline__ long long im_wmul(long long a, long long b) {
    return (long long)((unsigned long long)a * (unsigned long long)b);
}

__device__ __forceinline__ long long im_wadd(long long a, long long b) {
    return (long long)((unsigned long long)a + (unsigned long long)b);
}

// boundary.rs's map_coordinate.
__device__ __noinline__ double im_map(double x, long long n, int mode) {
    if (x < 0.0) {
        switch (mode) {
        case IM_MIRROR:
            if (n <= 1) {
                x = 0.0;
            } else {
                const long long sz2 = 2 * n - 2;
                x = (double)im_wmul(sz2, im_f2ll(-x / (double)sz2)) + x;
                x = x <= (double)(1 - n) ? x + (double)sz2 : -x;
            }
            break;
        case IM_REFLECT:
            if (n <= 1) {
                x = 0.0;
            } else {
                const long long sz2 = 2 * n;
                if (x < -(double)sz2) {
                    x = (double)im_wmul(sz2, im_f2ll(-x / (double)sz2)) + x;
                }
                x = x < -(double)n ? x + (double)sz2 : (x > -1e-15 ? 1e-15 : -x) - 1.0;
            }
            break;
        case IM_WRAP:
            if (n <= 1) {
                x = 0.0;
            } else {
                const long long sz = n - 1;
                x += (double)im_wmul(sz, im_wadd(im_f2ll(-x / (double)sz), 1));
            }
            break;
        case IM_GRID_WRAP:
            if (n <= 1) {
                x = 0.0;
            } else {
                x += (double)im_wmul(n, im_wadd(im_f2ll((-1.0 - x) / (double)n), 1));
            }
            break;
        case IM_NEAREST: x = 0.0; break;
        case IM_CONSTANT: x = -1.0; break;
        default: break;
        }
    } else if (x > (double)(n - 1)) {
        switch (mode) {
        case IM_MIRROR:
            if (n <= 1) {
                x = 0.0;
            } else {
                const long long sz2 = 2 * n - 2;
                x -= (double)im_wmul(sz2, im_f2ll(x / (double)sz2));
                if (x >= (double)n) x = (double)sz2 - x;
            }
            break;
        case IM_REFLECT:
            if (n <= 1) {
                x = 0.0;
            } else {
                const long long sz2 = 2 * n;
                x -= (double)im_wmul(sz2, im_f2ll(x / (double)sz2));
                if (x >= (double)n) x = (double)sz2 - x - 1.0;
            }
            break;
        case IM_WRAP:
            if (n <= 1) {
                x = 0.0;
            } else {
                const long long sz = n - 1;
                x -= (double)im_wmul(sz, im_f2ll(x / (double)sz));
            }
            break;
        case IM_GRID_WRAP:
            if (n <= 1) {
                x = 0.0;
            } else {
                x -= (double)im_wmul(n, im_f2ll(x / (double)n));
            }
            break;
        case IM_NEAREST: x = (double)(n - 1); break;
        case IM_CONSTANT: x = -1.0; break;
        default: break;
        }
    }
    return x;
}

// The mode of the taps at an edge (InterpMode::spline_mode).
__device__ __forceinline__ int im_spline_mode(int mode) {
    return (mode == IM_CONSTANT || mode == IM_WRAP) ? IM_MIRROR : mode;
}

// spline.rs's weights_of_delta, orders 1 to 5.
template <int ORDER>
__device__ __forceinline__ void im_weights(double x, double* w) {
    double y = x;
    double z = 1.0 - x;
    if (ORDER == 1) {
        w[0] = 1.0 - x;
    } else if (ORDER == 2) {
        w[1] = 0.75 - x * x;
        y = 0.5 - x;
        w[0] = 0.5 * y * y;
    } else if (ORDER == 3) {
        w[1] = (y * y * (y - 2.0) * 3.0 + 4.0) / 6.0;
        w[2] = (z * z * (z - 2.0) * 3.0 + 4.0) / 6.0;
        w[0] = z * z * z / 6.0;
    } else if (ORDER == 4) {
        double t = x * x;
        w[2] = t * (t * 0.25 - 0.625) + 115.0 / 192.0;
        y = 1.0 + x;
        w[1] = y * (y * (y * (5.0 - y) / 6.0 - 1.25) + 5.0 / 24.0) + 55.0 / 96.0;
        w[3] = z * (z * (z * (5.0 - z) / 6.0 - 1.25) + 5.0 / 24.0) + 55.0 / 96.0;
        y = 0.5 - x;
        t = y * y;
        w[0] = t * t / 24.0;
    } else if (ORDER == 5) {
        double t = y * y;
        w[2] = t * (t * (0.25 - y / 12.0) - 0.5) + 0.55;
        t = z * z;
        w[3] = t * (t * (0.25 - z / 12.0) - 0.5) + 0.55;
        y += 1.0;
        w[1] = y * (y * (y * (y * (y / 24.0 - 0.375) + 1.25) - 1.75) + 0.625) + 0.425;
        z += 1.0;
        w[4] = z * (z * (z * (z * (z / 24.0 - 0.375) + 1.25) - 1.75) + 0.625) + 0.425;
        y = 1.0 - x;
        t = y * y;
        w[0] = y * t * t / 120.0;
    }
    if (ORDER > 0) {
        w[ORDER] = 1.0;
#pragma unroll
        for (int i = 0; i < ORDER; i++) w[ORDER] -= w[i];
    }
}

// The taps of one point along one axis (transform.rs's Taps).
template <int ORDER>
struct ImTaps {
    long long off[ORDER + 1];
    double w[ORDER + 1];
    bool cv[ORDER + 1];
};

// transform.rs's Ctx::taps: false when the point reads cval; sets *bad when an edge tap
// cannot be mapped into the input (the CPU's error). GC: the mode is grid-constant (each
// tap outside the input reads cval).
template <int ORDER, bool GC>
__device__ __forceinline__ bool im_taps(const InterpArgs& a, int axis, double cc, ImTaps<ORDER>& t, bool* bad) {
    if (!(cc > -1.0 || GC || a.mode == IM_NEAREST)) return false;
    const long long len = a.ishape[axis];
    const long long stride = a.istride[axis];
    const double base = (ORDER & 1) ? floor(cc) : floor(cc + 0.5);
    // Rust's clamp (NaN stays NaN, which the cast takes to 0)
    double cl = base;
    if (cl < -4.6e18) cl = -4.6e18;
    if (cl > 4.6e18) cl = 4.6e18;
    const long long start = im_f2ll(cl) - ORDER / 2;
    const bool edge = start < 0 || start + ORDER >= len;
    if (GC) {
#pragma unroll
        for (int l = 0; l <= ORDER; l++) {
            const long long idx = start + l;
            t.cv[l] = idx < 0 || idx >= len;
            t.off[l] = t.cv[l] ? 0 : idx * stride;
        }
    } else if (edge) {
        const int sm = im_spline_mode(a.mode);
#pragma unroll
        for (int l = 0; l <= ORDER; l++) {
            t.cv[l] = false;
            const long long idx = im_f2ll(im_map((double)(start + l), len, sm));
            if (idx < 0 || idx >= len) {
                *bad = true;
                t.off[l] = 0;
            } else {
                t.off[l] = idx * stride;
            }
        }
    } else {
#pragma unroll
        for (int l = 0; l <= ORDER; l++) {
            t.cv[l] = false;
            t.off[l] = (start + l) * stride;
        }
    }
    if (ORDER != 0) im_weights<ORDER>(cc - base, t.w);
    return true;
}

// One input value as f64, through the read-only data path.
__device__ __forceinline__ double im_ld(const float* __restrict__ src, long long off) {
    return (double)__ldg(src + off);
}

__device__ __forceinline__ double im_ld(const double* __restrict__ src, long long off) {
    return __ldg(src + off);
}

// transform.rs's accumulate for input rank RANK: every loop has compile-time bounds and is
// unrolled, so the taps stay in registers. The sum runs in the CPU's order (last axis
// fastest, from t = 0.0), each tap's value multiplied by the axes' weights in axis order.
template <int ORDER, int RANK, bool GC, typename TIN>
__device__ __forceinline__ double im_accumulate(const TIN* __restrict__ src, double cval, const ImTaps<ORDER>* tp) {
    double t = 0.0;
    if (RANK == 1) {
#pragma unroll
        for (int i = 0; i <= ORDER; i++) {
            double c = (GC && tp[0].cv[i]) ? cval : im_ld(src, tp[0].off[i]);
            if (ORDER > 0) c *= tp[0].w[i];
            t += c;
        }
    } else if (RANK == 2) {
#pragma unroll
        for (int i = 0; i <= ORDER; i++) {
#pragma unroll
            for (int j = 0; j <= ORDER; j++) {
                double c = (GC && (tp[0].cv[i] || tp[1].cv[j])) ? cval : im_ld(src, tp[0].off[i] + tp[1].off[j]);
                if (ORDER > 0) {
                    c *= tp[0].w[i];
                    c *= tp[1].w[j];
                }
                t += c;
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i <= ORDER; i++) {
#pragma unroll
            for (int j = 0; j <= ORDER; j++) {
                const long long oij = tp[0].off[i] + tp[1].off[j];
#pragma unroll
                for (int l = 0; l <= ORDER; l++) {
                    double c = (GC && (tp[0].cv[i] || tp[1].cv[j] || tp[2].cv[l])) ? cval
                                                                                    : im_ld(src, oij + tp[2].off[l]);
                    if (ORDER > 0) {
                        c *= tp[0].w[i];
                        c *= tp[1].w[j];
                        c *= tp[2].w[l];
                    }
                    t += c;
                }
            }
        }
    }
    return t;
}

__device__ __forceinline__ void im_store(const InterpArgs& a, void* dst, unsigned long long p, double v) {
    if (a.out_f64) {
        ((double*)dst)[p] = v;
    } else {
        ((float*)dst)[p] = (float)v;
    }
}

// The output multi-index of the flat index p: in 32-bit unsigned arithmetic when the output
// has fewer than 2^32 points (a 64-bit division is a long instruction sequence; the
// quotients are the same integers either way).
__device__ __forceinline__ void im_unravel(const InterpArgs& a, unsigned long long p, long long* idx) {
    if (a.n <= 0xffffffffLL) {
        unsigned q = (unsigned)p;
#pragma unroll
        for (int ax = 2; ax >= 0; ax--) {
            if (ax >= a.orank) continue;
            const unsigned n = (unsigned)a.oshape[ax];
            idx[ax] = (long long)(q % n);
            q /= n;
        }
        return;
    }
#pragma unroll
    for (int ax = 2; ax >= 0; ax--) {
        if (ax >= a.orank) continue;
        const unsigned long long n = (unsigned long long)a.oshape[ax];
        idx[ax] = (long long)(p % n);
        p /= n;
    }
}

// im_map where the coordinate is outside [0, n - 1] (the only place it changes one), the
// common inside case without the call. Every mode but nearest and grid-constant maps the
// coordinates before the taps.
__device__ __forceinline__ double im_map_outside(double x, long long n, int mode) {
    return (x < 0.0 || x > (double)(n - 1)) ? im_map(x, n, mode) : x;
}

// One output point of zoom_shift_into: every axis's taps are found (as the CPU finds them
// for every output index of every axis, so an unmappable tap is reported whatever the other
// axes give), then cval if any axis reads it.
template <int ORDER, int RANK, bool GC, typename TIN>
__device__ __forceinline__ double im_zoom_shift_point(const InterpArgs& a, const TIN* __restrict__ src,
                                                      const long long* oidx, bool* bad) {
    ImTaps<ORDER> tp[RANK];
    bool inside = true;
#pragma unroll
    for (int jj = 0; jj < RANK; jj++) {
        double cc = (double)oidx[jj];
        if (a.has_shift) cc += a.off[jj];
        if (a.has_zoom) {
            if (a.grid_mode) {
                cc += 0.5;
                cc *= a.mat[jj];
                cc -= 0.5;
            } else {
                cc *= a.mat[jj];
            }
        }
        cc += a.nprepad;
        if (!GC && a.mode != IM_NEAREST) cc = im_map_outside(cc, a.ishape[jj], a.mode);
        if (!im_taps<ORDER, GC>(a, jj, cc, tp[jj], bad)) inside = false;
    }
    return inside ? im_accumulate<ORDER, RANK, GC>(src, a.cval, tp) : a.cval;
}

// One output point of geometric_transform_into at the input coordinates icoor (the affine
// map of its index, or its row of map_coordinates' coordinates).
template <int ORDER, int RANK, bool GC, typename TIN>
__device__ __forceinline__ double im_geometric_point(const InterpArgs& a, const TIN* __restrict__ src,
                                                     const double* icoor, bool* bad) {
    ImTaps<ORDER> tp[RANK];
#pragma unroll
    for (int hh = 0; hh < RANK; hh++) {
        double cc = icoor[hh] + a.nprepad;
        if (!GC && a.mode != IM_NEAREST) cc = im_map_outside(cc, a.ishape[hh], a.mode);
        if (!im_taps<ORDER, GC>(a, hh, cc, tp[hh], bad)) return a.cval;
    }
    return im_accumulate<ORDER, RANK, GC>(src, a.cval, tp);
}

// The kind of each output point's input coordinates.
#define IM_ZOOM_SHIFT 0
#define IM_AFFINE 1
#define IM_COORDS 2

// One output point p (multi-index oidx) of geometric_transform_into: KIND IM_AFFINE or
// IM_COORDS.
template <int ORDER, int RANK, bool GC, int KIND, typename TIN>
__device__ __forceinline__ double im_mapped_point(const InterpArgs& a, const TIN* __restrict__ src,
                                                  const double* __restrict__ coords, unsigned long long p,
                                                  const long long* oidx, bool* bad) {
    double icoor[RANK];
#pragma unroll
    for (int hh = 0; hh < RANK; hh++) {
        if (KIND == IM_AFFINE) {
            double tmp = a.off[hh];
#pragma unroll
            for (int ll = 0; ll < 3; ll++) {
                if (ll >= a.orank) break;
                tmp += (double)oidx[ll] * a.mat[hh * a.orank + ll];
            }
            icoor[hh] = tmp;
        } else {
            icoor[hh] = __ldg(coords + ((unsigned long long)hh * (unsigned long long)a.n + p));
        }
    }
    return im_geometric_point<ORDER, RANK, GC>(a, src, icoor, bad);
}

template <int ORDER, int RANK, bool GC, int KIND, typename TIN>
__device__ void im_run(const InterpArgs& a, const TIN* __restrict__ src, void* dst,
                       const double* __restrict__ coords, int* status) {
    const unsigned long long n = (unsigned long long)a.n;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long p = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step) {
        long long oidx[3];
        im_unravel(a, p, oidx);
        bool bad = false;
        double v = KIND == IM_ZOOM_SHIFT ? im_zoom_shift_point<ORDER, RANK, GC>(a, src, oidx, &bad)
                                         : im_mapped_point<ORDER, RANK, GC, KIND>(a, src, coords, p, oidx, &bad);
        if (bad) {
            atomicOr(status, 1);
            v = __longlong_as_double(0x7ff8000000000000LL);
        }
        im_store(a, dst, p, v);
    }
}

// The launch's input rank and whether its mode is grid-constant, as template arguments
// (uniform branches, taken once per thread).
template <int ORDER, int KIND, typename TIN>
__device__ __forceinline__ void im_dispatch(const InterpArgs& a, const TIN* __restrict__ src, void* dst,
                                            const double* __restrict__ coords, int* status) {
    if (a.mode == IM_GRID_CONSTANT) {
        switch (a.irank) {
        case 1: im_run<ORDER, 1, true, KIND>(a, src, dst, coords, status); break;
        case 2: im_run<ORDER, 2, true, KIND>(a, src, dst, coords, status); break;
        default: im_run<ORDER, 3, true, KIND>(a, src, dst, coords, status); break;
        }
    } else {
        switch (a.irank) {
        case 1: im_run<ORDER, 1, false, KIND>(a, src, dst, coords, status); break;
        case 2: im_run<ORDER, 2, false, KIND>(a, src, dst, coords, status); break;
        default: im_run<ORDER, 3, false, KIND>(a, src, dst, coords, status); break;
        }
    }
}

// The resampling kernels, one per coordinate kind, spline order and input type (TIN: float
// or double), so that each compiles its order's loops alone: zoom / shift, affine_transform
// (the same parameters) and map_coordinates (the coordinates added).
// No minimum of resident blocks: capping the registers (__launch_bounds__(256, 2) for orders
// 2-5, (256, 5) for order 1) makes ptxas spill the taps to local memory (64-152 byte stack
// frames on sm_90), the traffic the specialisation removes.
#define IM_KERNEL(NAME, ORDER, KIND, TIN)                                                               \
    extern "C" __global__ void __launch_bounds__(256)                                                   \
        NAME(const TIN* __restrict__ src, void* dst, int* status, InterpArgs a) {                       \
        im_dispatch<ORDER, KIND>(a, src, dst, nullptr, status);                                         \
    }
#define IM_COORDS_KERNEL(NAME, ORDER, TIN)                                                              \
    extern "C" __global__ void __launch_bounds__(256) NAME(const TIN* __restrict__ src, void* dst,      \
                                                           int* status, const double* __restrict__ coords, \
                                                           InterpArgs a) {                              \
        im_dispatch<ORDER, IM_COORDS>(a, src, dst, coords, status);                                     \
    }

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o0_f32)
IM_KERNEL(interp_zoom_shift_o0_f32, 0, IM_ZOOM_SHIFT, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o0_f64)
IM_KERNEL(interp_zoom_shift_o0_f64, 0, IM_ZOOM_SHIFT, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o1_f32)
IM_KERNEL(interp_zoom_shift_o1_f32, 1, IM_ZOOM_SHIFT, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o1_f64)
IM_KERNEL(interp_zoom_shift_o1_f64, 1, IM_ZOOM_SHIFT, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o2_f32)
IM_KERNEL(interp_zoom_shift_o2_f32, 2, IM_ZOOM_SHIFT, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o2_f64)
IM_KERNEL(interp_zoom_shift_o2_f64, 2, IM_ZOOM_SHIFT, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o3_f32)
IM_KERNEL(interp_zoom_shift_o3_f32, 3, IM_ZOOM_SHIFT, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o3_f64)
IM_KERNEL(interp_zoom_shift_o3_f64, 3, IM_ZOOM_SHIFT, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o4_f32)
IM_KERNEL(interp_zoom_shift_o4_f32, 4, IM_ZOOM_SHIFT, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o4_f64)
IM_KERNEL(interp_zoom_shift_o4_f64, 4, IM_ZOOM_SHIFT, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o5_f32)
IM_KERNEL(interp_zoom_shift_o5_f32, 5, IM_ZOOM_SHIFT, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_zoom_shift_o5_f64)
IM_KERNEL(interp_zoom_shift_o5_f64, 5, IM_ZOOM_SHIFT, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o0_f32)
IM_KERNEL(interp_affine_o0_f32, 0, IM_AFFINE, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o0_f64)
IM_KERNEL(interp_affine_o0_f64, 0, IM_AFFINE, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o1_f32)
IM_KERNEL(interp_affine_o1_f32, 1, IM_AFFINE, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o1_f64)
IM_KERNEL(interp_affine_o1_f64, 1, IM_AFFINE, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o2_f32)
IM_KERNEL(interp_affine_o2_f32, 2, IM_AFFINE, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o2_f64)
IM_KERNEL(interp_affine_o2_f64, 2, IM_AFFINE, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o3_f32)
IM_KERNEL(interp_affine_o3_f32, 3, IM_AFFINE, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o3_f64)
IM_KERNEL(interp_affine_o3_f64, 3, IM_AFFINE, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o4_f32)
IM_KERNEL(interp_affine_o4_f32, 4, IM_AFFINE, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o4_f64)
IM_KERNEL(interp_affine_o4_f64, 4, IM_AFFINE, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o5_f32)
IM_KERNEL(interp_affine_o5_f32, 5, IM_AFFINE, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_affine_o5_f64)
IM_KERNEL(interp_affine_o5_f64, 5, IM_AFFINE, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o0_f32)
IM_COORDS_KERNEL(interp_coords_o0_f32, 0, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o0_f64)
IM_COORDS_KERNEL(interp_coords_o0_f64, 0, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o1_f32)
IM_COORDS_KERNEL(interp_coords_o1_f32, 1, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o1_f64)
IM_COORDS_KERNEL(interp_coords_o1_f64, 1, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o2_f32)
IM_COORDS_KERNEL(interp_coords_o2_f32, 2, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o2_f64)
IM_COORDS_KERNEL(interp_coords_o2_f64, 2, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o3_f32)
IM_COORDS_KERNEL(interp_coords_o3_f32, 3, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o3_f64)
IM_COORDS_KERNEL(interp_coords_o3_f64, 3, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o4_f32)
IM_COORDS_KERNEL(interp_coords_o4_f32, 4, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o4_f64)
IM_COORDS_KERNEL(interp_coords_o4_f64, 4, double)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o5_f32)
IM_COORDS_KERNEL(interp_coords_o5_f32, 5, float)
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_interp_coords_o5_f64)
IM_COORDS_KERNEL(interp_coords_o5_f64, 5, double)
#endif

// The prefilter's launch parameters, by value: `lines` lines of `len` samples, sample i of
// line t at (t / inner) * len * inner + t % inner + i * inner; the pole z, its power zpow
// (z^(len - 1) for the mirror initialisation, z^len for the half-sample one, unused for the
// periodic one), the gain every sample is first multiplied by when apply_gain is set (the
// first pole's pass), and the initialisation (0 mirror, 1 periodic, 2 half-sample).
struct SplineArgs {
    long long len;
    long long inner;
    long long lines;
    double z;
    double zpow;
    double gain;
    int init;
    int apply_gain;
};

#define IM_INIT_MIRROR 0
#define IM_INIT_WRAP 1
#define IM_INIT_REFLECT 2

// spline.rs's apply_pole on one line b[i * s], i < n (n > 1), with scipy's operations in
// its order (the half-sample initialisation accumulates into b[0] in place, and its last
// term reads that back, as scipy 1.17 does).
__device__ __forceinline__ void im_apply_pole(double* b, long long s, long long n, const SplineArgs& a) {
    const double z = a.z;
    if (a.apply_gain) {
        for (long long i = 0; i < n; i++) b[i * s] *= a.gain;
    }
    if (a.init == IM_INIT_MIRROR) {
        const double zn1 = a.zpow;
        double c0 = b[0] + zn1 * b[(n - 1) * s];
        double zi = z;
        for (long long i = 1; i < n - 1; i++) {
            c0 += zi * (b[i * s] + zn1 * b[(n - 1 - i) * s]);
            zi *= z;
        }
        b[0] = c0 / (1.0 - zn1 * zn1);
    } else if (a.init == IM_INIT_WRAP) {
        double c0 = b[0];
        double zi = z;
        for (long long i = 1; i < n; i++) {
            c0 += zi * b[(n - i) * s];
            zi *= z;
        }
        b[0] = c0 / (1.0 - zi);
    } else {
        const double zn = a.zpow;
        const double c0 = b[0];
        b[0] += zn * b[(n - 1) * s];
        double zi = z;
        for (long long i = 1; i < n; i++) {
            const double v = zi * (b[i * s] + zn * b[(n - 1 - i) * s]);
            b[0] += v;
            zi *= z;
        }
        b[0] *= z / (1.0 - zn * zn);
        b[0] += c0;
    }
    for (long long i = 1; i < n; i++) b[i * s] += z * b[(i - 1) * s];
    const long long last = (n - 1) * s;
    if (a.init == IM_INIT_MIRROR) {
        b[last] = (z * b[last - s] + b[last]) * z / (z * z - 1.0);
    } else if (a.init == IM_INIT_WRAP) {
        double cl = b[last];
        double zi = z;
        for (long long i = 0; i < n - 1; i++) {
            cl += zi * b[i * s];
            zi *= z;
        }
        b[last] = cl * (z / (zi - 1.0));
    } else {
        b[last] *= z / (z - 1.0);
    }
    for (long long i = n - 2; i >= 0; i--) b[i * s] = z * (b[(i + 1) * s] - b[i * s]);
}

// One pole's pass of the prefilter over every line of an f64 array, in place, one thread
// per line (grid-stride): adjacent threads take adjacent columns when the axis is not the
// last one, so their accesses coalesce.
#if !defined(KILN_ONLY) || defined(KILN_K_interp_spline_pole_f64)
extern "C" __global__ void __launch_bounds__(256) interp_spline_pole_f64(double* data, SplineArgs a) {
    const unsigned long long lines = (unsigned long long)a.lines;
    const unsigned long long inner = (unsigned long long)a.inner;
    const unsigned long long len = (unsigned long long)a.len;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; t < lines; t += step) {
        double* b = data + (t / inner) * len * inner + t % inner;
        im_apply_pole(b, a.inner, a.len, a);
    }
}
#endif
