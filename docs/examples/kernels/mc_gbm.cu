// Monte Carlo price of a European call under geometric Brownian motion (Black-Scholes).
//
// Each path steps the log price from 0 to maturity in `steps` equal steps,
//
//   log S(t + dt) = log S(t) + (r - q - vol^2 / 2) dt + vol sqrt(dt) Z,   Z ~ N(0, 1),
//
// and pays max(S(T) - K, 0). Each thread runs paths in a grid-stride loop and keeps the
// sum of its payoffs and of their squares; the block adds its threads' sums in shared
// memory and writes one pair per block. The host adds the blocks' pairs and finishes:
// price = exp(-rT) * mean, standard error = exp(-rT) * sqrt(sample variance / paths).
//
// Random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011), a counter-based generator: the 4 words for (path, step group) are a pure
// function of the counter and the seed, so no generator state is stored or carried and any
// thread can draw any path's numbers. One call gives 4 uniform words; Box-Muller turns
// each pair into 2 normals, so one call serves 4 time steps. The same seed, paths and
// launch shape give the same bits on every run.
//
// Precision: the path runs in float (as GPU Monte Carlo usually does: its error is far
// below the standard error); the payoff sums are double, so adding 2^20 or more payoffs
// loses nothing.
//
// Launch: block (THREADS, 1, 1) = (256, 1, 1), any grid (say ceil(paths / 256) capped at a
// few thousand blocks); `partial` holds 2 * gridDim.x doubles: the blocks' payoff sums,
// then their sums of squares.

#define THREADS 256

// Philox4x32's multipliers and Weyl key increments (Random123's constants).
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

// Ten Philox rounds on the counter c with the key (k0, k1); c becomes the 4 random words.
__device__ __forceinline__ void philox4x32_10(unsigned c[4], unsigned k0, unsigned k1) {
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        const unsigned hi0 = __umulhi(PHILOX_M0, c[0]), lo0 = PHILOX_M0 * c[0];
        const unsigned hi1 = __umulhi(PHILOX_M1, c[2]), lo1 = PHILOX_M1 * c[2];
        const unsigned n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0;
        c[1] = lo1;
        c[2] = n2;
        c[3] = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
}

// A 32-bit word to a float uniform in (0, 1), never 0 (log(0) would be -inf) nor 1:
// the top 23 bits plus one half, times 2^-23, is exact in float.
__device__ __forceinline__ float uniform(unsigned v) {
    return ((float)(v >> 9) + 0.5f) * (1.0f / 8388608.0f);
}

// Box-Muller: two uniforms to two independent standard normals.
__device__ __forceinline__ void box_muller(unsigned a, unsigned b, float* z0, float* z1) {
    const float r = sqrtf(-2.0f * logf(uniform(a)));
    float s, c;
    sincospif(2.0f * uniform(b), &s, &c);  // sin and cos of 2*pi*u, without rounding pi
    *z0 = r * c;
    *z1 = r * s;
}

extern "C" __global__ void mc_gbm_call(double* __restrict__ partial, float spot, float strike,
                                       float rate, float dividend, float vol, float maturity,
                                       int steps, long long paths, unsigned long long seed) {
    const float dt = maturity / (float)steps;
    const float drift = (rate - dividend - 0.5f * vol * vol) * dt;
    const float diffusion = vol * sqrtf(dt);
    const unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);

    double sum = 0.0, sum_sq = 0.0;
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long path = (long long)blockIdx.x * THREADS + threadIdx.x; path < paths; path += stride) {
        float log_s = 0.0f;
        for (int step = 0; step < steps; step += 4) {
            // counter = (path, step group): every path and step gets its own numbers
            unsigned c[4] = {(unsigned)path, (unsigned)((unsigned long long)path >> 32),
                             (unsigned)(step / 4), 0u};
            philox4x32_10(c, k0, k1);
            float z[4];
            box_muller(c[0], c[1], &z[0], &z[1]);
            box_muller(c[2], c[3], &z[2], &z[3]);
            const int n = min(4, steps - step);
            for (int j = 0; j < n; ++j) log_s += drift + diffusion * z[j];
        }
        const double payoff = fmaxf(spot * expf(log_s) - strike, 0.0f);
        sum += payoff;
        sum_sq += payoff * payoff;
    }

    // Tree sum of the block's THREADS pairs in shared memory.
    __shared__ double s_sum[THREADS], s_sq[THREADS];
    s_sum[threadIdx.x] = sum;
    s_sq[threadIdx.x] = sum_sq;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            s_sum[threadIdx.x] += s_sum[threadIdx.x + half];
            s_sq[threadIdx.x] += s_sq[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = s_sum[0];
        partial[gridDim.x + blockIdx.x] = s_sq[0];
    }
}
