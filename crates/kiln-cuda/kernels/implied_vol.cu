#line 1 "implied_vol.cu"
// Implied volatility of a book of European quotes (the arithmetic of one quote is
// implied_vol.cuh's).
//
// Inputs: seven arrays of n (price, spot, strike, maturity, rate, dividend: f64; put: u8,
// 0 call, 1 put), the quote form of kiln_core::finance::implied::Quote. Outputs: vol[i]
// (NaN where there is none) and reason[i]: 0 solved, else the NoVolatility variant's code
// (NoVolatility::index: 1 not_finite, 2 not_positive, 3 out_of_range, 4 below_intrinsic,
// 5 at_intrinsic, 6 above_upper_bound); the host rebuilds the variant's fields from the
// quote (NoVolatility::from_index), as the CPU computes them.
//
// Two ways to run a book, with the same bits (each quote's operations are the same):
// - implied_vol_f64: one thread a quote, start to finish. The warps of a block take the
//   solver's four ways (IV_WAY_*) at once, so the instruction cache holds all their code.
// - grouped: implied_vol_classify_f64 runs every quote's checks and start (iv_quote_start),
//   writes the result of those that need no solve and keeps each other quote's start state
//   and way; implied_vol_tile_count, implied_vol_offsets and implied_vol_scatter then list
//   the quotes way by way (a stable counting sort over tiles of IV_TILE quotes: per-tile
//   counts, one block's scan, per-tile ranks by warp ballots); one solve kernel per way
//   (implied_vol_solve_{lower,low_mid,high_mid,upper}_f64) runs its list, whose code is only
//   that way's, and writes each result to the quote's own slot.

#define IV_TILE 128
#define IV_OFFSETS_THREADS 256

__device__ __forceinline__ double iv_nan() { return __longlong_as_double(0x7ff8000000000000LL); }

#if !defined(KILN_ONLY) || defined(KILN_K_implied_vol_f64)
// One thread per quote, grid-stride: vol[i] and reason[i] of quote i (put[i] != 0: a put).
extern "C" __global__ void __launch_bounds__(128)
implied_vol_f64(const double* __restrict__ price, const double* __restrict__ spot,
                const double* __restrict__ strike, const double* __restrict__ maturity,
                const double* __restrict__ rate, const double* __restrict__ dividend,
                const unsigned char* __restrict__ put, unsigned long long n, double* __restrict__ vol,
                unsigned char* __restrict__ reason) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double v = iv_nan();
        const int code = iv_implied_volatility(price[i], spot[i], strike[i], maturity[i], rate[i], dividend[i],
                                               put[i] != 0, &v);
        vol[i] = code == IV_OK ? v : iv_nan();
        reason[i] = (unsigned char)code;
    }
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_implied_vol_classify_f64)
// Grid-stride over the quotes: way[i] = quote i's way (IV_WAY_*); where it is IV_WAY_DONE,
// vol[i] = NaN and reason[i] its code, else start[k * n + i] holds the k-th field of its
// IvStart (x, beta, s_c, b_c, v_c, s_o, b_o: seven columns of n).
extern "C" __global__ void __launch_bounds__(128)
implied_vol_classify_f64(const double* __restrict__ price, const double* __restrict__ spot,
                         const double* __restrict__ strike, const double* __restrict__ maturity,
                         const double* __restrict__ rate, const double* __restrict__ dividend,
                         const unsigned char* __restrict__ put, unsigned long long n, double* __restrict__ start,
                         unsigned char* __restrict__ way, double* __restrict__ vol,
                         unsigned char* __restrict__ reason) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        IvStart st;
        int code;
        const int w = iv_quote_start(price[i], spot[i], strike[i], maturity[i], rate[i], dividend[i], put[i] != 0,
                                     &st, &code);
        way[i] = (unsigned char)w;
        if (w == IV_WAY_DONE) {
            vol[i] = iv_nan();
            reason[i] = (unsigned char)code;
        } else {
            start[i] = st.x;
            start[n + i] = st.beta;
            start[2 * n + i] = st.s_c;
            start[3 * n + i] = st.b_c;
            start[4 * n + i] = st.v_c;
            start[5 * n + i] = st.s_o;
            start[6 * n + i] = st.b_o;
        }
    }
}
#endif

// A CTA of IV_TILE threads, thread t holding the quote of way w (IV_WAY_DONE past the book):
// how many of the tile's quotes before it take way w too (0 for IV_WAY_DONE); with
// `counts` not null, thread k < IV_WAYS writes how many of the tile's quotes take way k to
// counts[k]. Every thread of the CTA must call it.
__device__ __forceinline__ unsigned iv_tile_rank(int w, unsigned* counts) {
    __shared__ unsigned warp_count[IV_TILE / 32][IV_WAYS];
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    unsigned rank = 0;
    for (int k = 0; k < IV_WAYS; ++k) {
        const unsigned m = __ballot_sync(0xffffffffu, w == k);
        if (lane == 0) warp_count[warp][k] = __popc(m);
        if (w == k) rank = __popc(m & ((1u << lane) - 1u));
    }
    __syncthreads();
    if (w < IV_WAYS) {
        for (unsigned v = 0; v < warp; ++v) rank += warp_count[v][w];
    }
    if (counts != nullptr && threadIdx.x < IV_WAYS) {
        unsigned total = 0;
        for (unsigned v = 0; v < IV_TILE / 32; ++v) total += warp_count[v][threadIdx.x];
        counts[threadIdx.x] = total;
    }
    return rank;
}

#if !defined(KILN_ONLY) || defined(KILN_K_implied_vol_tile_count)
// A CTA of IV_TILE threads per tile of IV_TILE quotes: counts[tile * IV_WAYS + k] = how many
// of the tile's quotes take way k.
extern "C" __global__ void __launch_bounds__(IV_TILE)
implied_vol_tile_count(const unsigned char* __restrict__ way, unsigned long long n,
                       unsigned* __restrict__ counts) {
    const unsigned long long i = (unsigned long long)blockIdx.x * IV_TILE + threadIdx.x;
    const int w = i < n ? way[i] : IV_WAY_DONE;
    iv_tile_rank(w, counts + (unsigned long long)blockIdx.x * IV_WAYS);
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_implied_vol_offsets)
// One CTA of IV_OFFSETS_THREADS: the exclusive scan of the tiles' counts in way-major order,
// offsets[tile * IV_WAYS + k] = where the tile's first quote of way k goes in the sorted
// list, and starts[k] = where way k's quotes begin (starts[IV_WAYS] = how many there are).
extern "C" __global__ void __launch_bounds__(IV_OFFSETS_THREADS)
implied_vol_offsets(const unsigned* __restrict__ counts, unsigned tiles, unsigned* __restrict__ offsets,
                    unsigned* __restrict__ starts) {
    __shared__ unsigned part[IV_WAYS][IV_OFFSETS_THREADS];
    const unsigned t = threadIdx.x;
    const unsigned per = (tiles + IV_OFFSETS_THREADS - 1) / IV_OFFSETS_THREADS;
    const unsigned lo = min(t * per, tiles), hi = min(lo + per, tiles);
    unsigned run[IV_WAYS];
    for (int k = 0; k < IV_WAYS; ++k) {
        unsigned sum = 0;
        for (unsigned b = lo; b < hi; ++b) sum += counts[(unsigned long long)b * IV_WAYS + k];
        part[k][t] = sum;
    }
    __syncthreads();
    if (t == 0) {
        unsigned acc = 0;
        for (int k = 0; k < IV_WAYS; ++k) {
            starts[k] = acc;
            for (unsigned u = 0; u < IV_OFFSETS_THREADS; ++u) {
                const unsigned c = part[k][u];
                part[k][u] = acc;
                acc += c;
            }
        }
        starts[IV_WAYS] = acc;
    }
    __syncthreads();
    for (int k = 0; k < IV_WAYS; ++k) run[k] = part[k][t];
    for (unsigned b = lo; b < hi; ++b) {
        for (int k = 0; k < IV_WAYS; ++k) {
            const unsigned long long at = (unsigned long long)b * IV_WAYS + k;
            offsets[at] = run[k];
            run[k] += counts[at];
        }
    }
}
#endif

#if !defined(KILN_ONLY) || defined(KILN_K_implied_vol_scatter)
// A CTA of IV_TILE threads per tile, as implied_vol_tile_count: each quote of a way goes to
// order[offsets[tile * IV_WAYS + way] + its rank in the tile], so each way's list keeps the
// book's order.
extern "C" __global__ void __launch_bounds__(IV_TILE)
implied_vol_scatter(const unsigned char* __restrict__ way, unsigned long long n,
                    const unsigned* __restrict__ offsets, unsigned* __restrict__ order) {
    const unsigned long long i = (unsigned long long)blockIdx.x * IV_TILE + threadIdx.x;
    const int w = i < n ? way[i] : IV_WAY_DONE;
    const unsigned rank = iv_tile_rank(w, nullptr);
    if (w < IV_WAYS) order[offsets[(unsigned long long)blockIdx.x * IV_WAYS + w] + rank] = (unsigned)i;
}
#endif

// The solve of one way: grid-stride over order[starts[WAY] .. starts[WAY + 1]], each entry a
// quote i whose start state is start[k * n + i]; writes vol[i] and reason[i].
template <int WAY>
__device__ __forceinline__ void iv_solve_way(const double* __restrict__ start, unsigned long long n,
                                             const double* __restrict__ maturity,
                                             const unsigned* __restrict__ order,
                                             const unsigned* __restrict__ starts, double* __restrict__ vol,
                                             unsigned char* __restrict__ reason) {
    const unsigned long long begin = starts[WAY], end = starts[WAY + 1];
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long j = begin + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; j < end;
         j += stride) {
        const unsigned long long i = order[j];
        IvStart st;
        st.x = start[i];
        st.beta = start[n + i];
        st.s_c = start[2 * n + i];
        st.b_c = start[3 * n + i];
        st.v_c = start[4 * n + i];
        st.s_o = start[5 * n + i];
        st.b_o = start[6 * n + i];
        double s;
        if (WAY == IV_WAY_LOWER) s = iv_solve_lower(st, IV_MAXIMUM_ITERATIONS);
        else if (WAY == IV_WAY_LOW_MID) s = iv_solve_low_mid(st, IV_MAXIMUM_ITERATIONS);
        else if (WAY == IV_WAY_HIGH_MID) s = iv_solve_high_mid(st, IV_MAXIMUM_ITERATIONS);
        else s = iv_solve_upper(st, IV_MAXIMUM_ITERATIONS);
        double v = iv_nan();
        const int code = iv_quote_finish(s, maturity[i], &v);
        vol[i] = code == IV_OK ? v : iv_nan();
        reason[i] = (unsigned char)code;
    }
}

#define IV_SOLVE_KERNEL(NAME, WAY)                                                                          \
    extern "C" __global__ void __launch_bounds__(128)                                                      \
    NAME(const double* __restrict__ start, unsigned long long n, const double* __restrict__ maturity,       \
         const unsigned* __restrict__ order, const unsigned* __restrict__ starts, double* __restrict__ vol, \
         unsigned char* __restrict__ reason) {                                                              \
        iv_solve_way<WAY>(start, n, maturity, order, starts, vol, reason);                                 \
    }

#if !defined(KILN_ONLY) || defined(KILN_K_implied_vol_solve_lower_f64)
IV_SOLVE_KERNEL(implied_vol_solve_lower_f64, IV_WAY_LOWER)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_implied_vol_solve_low_mid_f64)
IV_SOLVE_KERNEL(implied_vol_solve_low_mid_f64, IV_WAY_LOW_MID)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_implied_vol_solve_high_mid_f64)
IV_SOLVE_KERNEL(implied_vol_solve_high_mid_f64, IV_WAY_HIGH_MID)
#endif
#if !defined(KILN_ONLY) || defined(KILN_K_implied_vol_solve_upper_f64)
IV_SOLVE_KERNEL(implied_vol_solve_upper_f64, IV_WAY_UPPER)
#endif
