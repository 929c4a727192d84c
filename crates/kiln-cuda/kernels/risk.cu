#line 1 "risk.cu"
// Portfolio risk by full revaluation: the P&L of a book of European Black-Scholes options
// under every scenario, summed per scenario. A block per scenario (blockIdx.x), its threads
// striding over the options; each thread prices its options under the scenario's shock of
// the option's underlying, in f64 with the CPU's formula (kiln_core::finance::bsm: the same
// d1, d2, discount factors and 0.5 erfc(-x / sqrt 2) normal CDF), and adds
// qty[i] * (price - base[i]); the block then reduces its threads' sums in shared memory in a
// fixed tree order, so a scenario's total is the same bits on every run.
//
// Inputs, per option i < n: spot, strike, rate, dividend, vol, maturity, qty, base (the
// unshocked price the host computed), put (0 call, 1 put), und (the underlying's slot,
// < n_und). Per scenario s and slot u, at s * n_und + u: spot_shift, spot_abs (1: S + x,
// 0: S (1 + x)), vol_shift, rate_shift. The host checked every shocked spot and volatility
// is > 0 before launching. Output: total[s] for s < n_scen.

#if !defined(KILN_ONLY) || defined(KILN_K_risk_bs_grid_f64)
#define RISK_THREADS 256

__device__ __forceinline__ double risk_norm_cdf(double x) {
    return 0.5 * erfc(-x / 1.4142135623730951);
}

// kiln_core::finance::bsm's price, operation for operation.
__device__ __forceinline__ double risk_bsm(bool put, double s, double k, double r, double q, double v, double t) {
    const double sqrt_t = sqrt(t);
    const double vst = v * sqrt_t;
    const double d1 = (log(s / k) + (r - q + 0.5 * v * v) * t) / vst;
    const double d2 = d1 - vst;
    const double dq = exp(-q * t);
    const double dr = exp(-r * t);
    if (put) {
        return k * dr * risk_norm_cdf(-d2) - s * dq * risk_norm_cdf(-d1);
    }
    return s * dq * risk_norm_cdf(d1) - k * dr * risk_norm_cdf(d2);
}

extern "C" __global__ void __launch_bounds__(RISK_THREADS)
risk_bs_grid_f64(const double* __restrict__ spot, const double* __restrict__ strike,
                 const double* __restrict__ rate, const double* __restrict__ dividend,
                 const double* __restrict__ vol, const double* __restrict__ maturity,
                 const double* __restrict__ qty, const double* __restrict__ base,
                 const unsigned char* __restrict__ put, const unsigned int* __restrict__ und,
                 unsigned long long n, const double* __restrict__ spot_shift,
                 const unsigned char* __restrict__ spot_abs, const double* __restrict__ vol_shift,
                 const double* __restrict__ rate_shift, unsigned int n_und, unsigned long long n_scen,
                 double* __restrict__ total) {
    __shared__ double part[RISK_THREADS];
    const unsigned long long s = blockIdx.x;
    if (s >= n_scen) {
        return;
    }
    const unsigned long long row = s * n_und;
    double acc = 0.0;
    for (unsigned long long i = threadIdx.x; i < n; i += RISK_THREADS) {
        const unsigned long long u = row + und[i];
        const double x = spot_shift[u];
        const double s1 = spot_abs[u] ? spot[i] + x : spot[i] * (1.0 + x);
        const double v1 = vol[i] + vol_shift[u];
        const double r1 = rate[i] + rate_shift[u];
        const double p = risk_bsm(put[i] != 0, s1, strike[i], r1, dividend[i], v1, maturity[i]);
        acc += qty[i] * (p - base[i]);
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned int w = RISK_THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            part[threadIdx.x] += part[threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        total[s] = part[0];
    }
}
#endif
