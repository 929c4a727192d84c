//! Monte Carlo pricing: pseudo- and quasi-random engines, Heston, baskets, Longstaff-Schwartz (`finance.cu`, `finance_qmc.cu`, `heston.cu`, `basket.cu`, `american.cu`, `american_barrier.cu`); implied volatility of a book (`implied_vol.cuh`, `implied_vol.cu`).

use super::{B256, MC_GRID, MC_P, QMC_GRID, QMC_P};
use crate::kernels::params::decl::*;
use crate::kernels::{AMERICAN, BASKET, FINANCE, FINANCE_QMC, HESTON, IMPLIED_VOL, RISK};

declare_kernels! { FAMILY:
    /// Monte Carlo, European options: per-(option, 1024-sample block) f64 sums, a warp each.
    MC_EUROPEAN_F64 {
        symbol: "mc_european_f64",
        module: FINANCE,
        compile_ms: 296,
        computes: "Monte Carlo European options: Philox4x32-10, Box-Muller, GBM path and payoff fused; per-(option, 1024-sample block) f64 sums",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, arithmetic-average Asian options (block sums as above).
    MC_ASIAN_ARITHMETIC_F64 {
        symbol: "mc_asian_arithmetic_f64",
        module: FINANCE,
        compile_ms: 386,
        computes: "Monte Carlo arithmetic-average Asian options (block sums, optional geometric control variate)",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, geometric-average Asian options.
    MC_ASIAN_GEOMETRIC_F64 {
        symbol: "mc_asian_geometric_f64",
        module: FINANCE,
        compile_ms: 330,
        computes: "Monte Carlo geometric-average Asian options",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, up-and-out barriers.
    MC_BARRIER_UP_OUT_F64 {
        symbol: "mc_barrier_up_out_f64",
        module: FINANCE,
        compile_ms: 262,
        computes: "Monte Carlo up-and-out barrier options",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, up-and-in barriers.
    MC_BARRIER_UP_IN_F64 {
        symbol: "mc_barrier_up_in_f64",
        module: FINANCE,
        compile_ms: 273,
        computes: "Monte Carlo up-and-in barrier options",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, down-and-out barriers.
    MC_BARRIER_DOWN_OUT_F64 {
        symbol: "mc_barrier_down_out_f64",
        module: FINANCE,
        compile_ms: 262,
        computes: "Monte Carlo down-and-out barrier options",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, down-and-in barriers.
    MC_BARRIER_DOWN_IN_F64 {
        symbol: "mc_barrier_down_in_f64",
        module: FINANCE,
        compile_ms: 261,
        computes: "Monte Carlo down-and-in barrier options",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, European, `fast_math` normals (hardware approximations).
    MC_EUROPEAN_FAST_F64 {
        symbol: "mc_european_fast_f64",
        module: FINANCE,
        compile_ms: 249,
        computes: "Monte Carlo European options, fast_math normals (MUFU lg2/sqrt/sin/cos; not bitwise the CPU's)",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, arithmetic Asian, `fast_math`.
    MC_ASIAN_ARITHMETIC_FAST_F64 {
        symbol: "mc_asian_arithmetic_fast_f64",
        module: FINANCE,
        compile_ms: 287,
        computes: "Monte Carlo arithmetic-average Asian options, fast_math (MUFU normals and ex2 fixings)",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, geometric Asian, `fast_math`.
    MC_ASIAN_GEOMETRIC_FAST_F64 {
        symbol: "mc_asian_geometric_fast_f64",
        module: FINANCE,
        compile_ms: 282,
        computes: "Monte Carlo geometric-average Asian options, fast_math",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, up-and-out barriers, `fast_math`.
    MC_BARRIER_UP_OUT_FAST_F64 {
        symbol: "mc_barrier_up_out_fast_f64",
        module: FINANCE,
        compile_ms: 215,
        computes: "Monte Carlo up-and-out barrier options, fast_math",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, up-and-in barriers, `fast_math`.
    MC_BARRIER_UP_IN_FAST_F64 {
        symbol: "mc_barrier_up_in_fast_f64",
        module: FINANCE,
        compile_ms: 207,
        computes: "Monte Carlo up-and-in barrier options, fast_math",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, down-and-out barriers, `fast_math`.
    MC_BARRIER_DOWN_OUT_FAST_F64 {
        symbol: "mc_barrier_down_out_fast_f64",
        module: FINANCE,
        compile_ms: 213,
        computes: "Monte Carlo down-and-out barrier options, fast_math",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo, down-and-in barriers, `fast_math`.
    MC_BARRIER_DOWN_IN_FAST_F64 {
        symbol: "mc_barrier_down_in_fast_f64",
        module: FINANCE,
        compile_ms: 198,
        computes: "Monte Carlo down-and-in barrier options, fast_math",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo: adds each option's block sums in block order onto running totals.
    MC_COMBINE_F64 {
        symbol: "mc_combine_f64",
        module: FINANCE,
        compile_ms: 59,
        computes: "Monte Carlo: adds each option's block sums in block order onto running totals (exact chaining of chunks)",
        block: B256,
        grid: "ceil(options*7 / 256) blocks, a thread per (option, sum)",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(F64), val(U32), val(U64), inout(F64)],
    }
    /// Monte Carlo: the portable f32 math and Philox words, for bitwise tests.
    FINANCE_SELFTEST_F32 {
        symbol: "finance_selftest_f32",
        module: FINANCE,
        compile_ms: 89,
        computes: "the portable f32 math and Philox words of the Monte Carlo kernels, for the bitwise CPU tests",
        block: B256,
        grid: "ceil(n/256) blocks",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U32), input(F32), val(U32), val(U32), val(U32), output(U32), output(U32)],
    }
    /// Monte Carlo: the Box-Muller square root against `__fsqrt_rn`, for bitwise tests.
    FINANCE_SQRT_CHECK_F32 {
        symbol: "finance_sqrt_check_f32",
        module: FINANCE,
        compile_ms: 49,
        computes: "the Box-Muller square root (MUFU.RSQ and one fused Newton step, no range test) against __fsqrt_rn on a range of floats, for the bitwise tests",
        block: B256,
        grid: "1024 blocks, grid-stride over the range",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[val(U32), val(U32), inout(U32)],
    }
    /// Monte Carlo benchmark probe: the European launch with only the Philox words.
    MC_PROBE_PHILOX_F64 {
        symbol: "mc_probe_philox_f64",
        module: FINANCE,
        compile_ms: 133,
        computes: "benchmark probe: the European launch and block sums with the path loop cut to the Philox words (what the generator alone costs)",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo benchmark probe: the European launch with Philox and the exact normals.
    MC_PROBE_NORMALS_F64 {
        symbol: "mc_probe_normals_f64",
        module: FINANCE,
        compile_ms: 137,
        computes: "benchmark probe: the European launch with the path loop cut to Philox and the exact Box-Muller normals, summed",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    /// Monte Carlo benchmark probe: the European launch with Philox and the fast_math normals.
    MC_PROBE_NORMALS_FAST_F64 {
        symbol: "mc_probe_normals_fast_f64",
        module: FINANCE,
        compile_ms: 125,
        computes: "benchmark probe: the European launch with the path loop cut to Philox and the fast_math normals, summed",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: MC_P,
    }
    // not measured yet: the Philox kernels' cost plus the inverse normal and bridge
    /// Quasi-Monte Carlo European block sums.
    QMC_EUROPEAN_F64 {
        symbol: "qmc_european_f64",
        module: FINANCE_QMC,
        compile_ms: 400,
        computes: "Quasi-Monte Carlo European options: randomised Sobol point (Gray code, digital shift), Acklam inverse normal in f64, Brownian bridge in a per-thread array, then the GBM path and payoff; per-(option, 1024-sample block) f64 sums",
        block: B256,
        grid: QMC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: QMC_P,
    }
    /// Quasi-Monte Carlo arithmetic Asian block sums.
    QMC_ASIAN_ARITHMETIC_F64 {
        symbol: "qmc_asian_arithmetic_f64",
        module: FINANCE_QMC,
        compile_ms: 400,
        computes: "Quasi-Monte Carlo arithmetic-average Asian options (Sobol + bridge; block sums, optional geometric control variate)",
        block: B256,
        grid: QMC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: QMC_P,
    }
    /// Quasi-Monte Carlo geometric Asian block sums.
    QMC_ASIAN_GEOMETRIC_F64 {
        symbol: "qmc_asian_geometric_f64",
        module: FINANCE_QMC,
        compile_ms: 400,
        computes: "Quasi-Monte Carlo geometric-average Asian options (Sobol + bridge; block sums)",
        block: B256,
        grid: QMC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: QMC_P,
    }
    /// Quasi-Monte Carlo up-and-out barrier block sums.
    QMC_BARRIER_UP_OUT_F64 {
        symbol: "qmc_barrier_up_out_f64",
        module: FINANCE_QMC,
        compile_ms: 400,
        computes: "Quasi-Monte Carlo up-and-out barrier options, monitored every step (Sobol + bridge; block sums)",
        block: B256,
        grid: QMC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: QMC_P,
    }
    /// Quasi-Monte Carlo up-and-in barrier block sums.
    QMC_BARRIER_UP_IN_F64 {
        symbol: "qmc_barrier_up_in_f64",
        module: FINANCE_QMC,
        compile_ms: 400,
        computes: "Quasi-Monte Carlo up-and-in barrier options, monitored every step (Sobol + bridge; block sums)",
        block: B256,
        grid: QMC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: QMC_P,
    }
    /// Quasi-Monte Carlo down-and-out barrier block sums.
    QMC_BARRIER_DOWN_OUT_F64 {
        symbol: "qmc_barrier_down_out_f64",
        module: FINANCE_QMC,
        compile_ms: 400,
        computes: "Quasi-Monte Carlo down-and-out barrier options, monitored every step (Sobol + bridge; block sums)",
        block: B256,
        grid: QMC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: QMC_P,
    }
    /// Quasi-Monte Carlo down-and-in barrier block sums.
    QMC_BARRIER_DOWN_IN_F64 {
        symbol: "qmc_barrier_down_in_f64",
        module: FINANCE_QMC,
        compile_ms: 400,
        computes: "Quasi-Monte Carlo down-and-in barrier options, monitored every step (Sobol + bridge; block sums)",
        block: B256,
        grid: QMC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: QMC_P,
    }
    /// Self-test of the inverse normal and Sobol points against kiln-core.
    QMC_SELFTEST_F32 {
        symbol: "qmc_selftest_f32",
        module: FINANCE_QMC,
        compile_ms: 150,
        computes: "self-test: the f32 inverse normal of (2w+1) 2^-33 and Sobol coordinates, for bitwise comparison with kiln-core",
        block: B256,
        grid: "ceil(n / 256) blocks, one thread an input",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U32), val(U32), input(U32), val(U32), output(U32), output(U32)],
    }
    // not measured yet: a guess from the Philox kernels' cost
    /// Monte Carlo under Heston (QE scheme): per-(option, 1024-sample block) f64 sums.
    HESTON_BLOCKS_F64 {
        symbol: "heston_blocks_f64",
        module: HESTON,
        compile_ms: 400,
        computes: "Monte Carlo under Heston: Andersen's QE step (Philox, portable f32 ln/exp/sqrt) for each path, European or arithmetic Asian payoff; per-(option, 1024-sample block) f64 sums in sample order",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U32), input(F64), val(U32), val(U64), val(U64), val(U64), KEYS, output(F64)],
    }
    /// Self-test of one Heston QE step against kiln-core.
    HESTON_STEP_SELFTEST_F32 {
        symbol: "heston_step_selftest_f32",
        module: HESTON,
        compile_ms: 200,
        computes: "Self-test: one Heston QE step per input, bits out (compared with kiln-core's qe_step)",
        block: B256,
        grid: "ceil(n / 256) blocks, a thread per input",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U32), input(F32), input(F32), input(U32), val(U32), KEYS, output(U32)],
    }
    // not measured yet: a guess from the Heston kernel's cost
    /// Basket options by Monte Carlo: per-(option, 1024-sample block) f64 sums.
    BASKET_BLOCKS_F64 {
        symbol: "basket_blocks_f64",
        module: BASKET,
        compile_ms: 300,
        computes: "Basket options by Monte Carlo: N normals (Philox, portable f32), the f32 Cholesky product L z, one GBM step per asset, arithmetic or geometric basket payoff and the geometric control; per-(option, 1024-sample block) f64 sums in sample order",
        block: B256,
        grid: MC_GRID,
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(U32),
            input(F32),
            input(F64),
            val(U32),
            val(U64),
            val(U64),
            val(U64),
            val(U32),
            KEYS,
            output(F64),
        ],
    }
    /// Self-test: basket samples' payoffs and controls, one a thread, against kiln-core.
    BASKET_SAMPLES_F64 {
        symbol: "basket_samples_f64",
        module: BASKET,
        compile_ms: 200,
        computes: "Self-test: one basket sample's discounted payoff and control per thread (compared with kiln-core's basket_sample)",
        block: B256,
        grid: "ceil(count / 256) blocks, a thread per sample",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U32), input(F32), input(F64), val(U32), val(U32), val(U32), KEYS, output(F64)],
    }
    // not measured yet: the path kernel is the European one's size, the rest small
    /// Longstaff-Schwartz: the path matrix (dates x paths f32) and the last date's payoffs.
    LSM_PATHS_F32 {
        symbol: "lsm_paths_f32",
        module: AMERICAN,
        compile_ms: 300,
        computes: "Longstaff-Schwartz: the GBM path matrix (dates x paths f32, Philox) and the last date's discounted payoffs",
        block: B256,
        grid: "ceil(paths / 256) blocks, a thread per path",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            val(U64),
            val(U32),
            val(U32),
            val(F32),
            val(F32),
            val(F64),
            val(F64),
            val(U32),
            KEYS,
            output(F32),
            output(F64),
        ],
    }
    /// Longstaff-Schwartz: discounts the cash flows, per-block regression sums at one date.
    LSM_REGRESS_F64 {
        symbol: "lsm_regress_f64",
        module: AMERICAN,
        compile_ms: 120,
        computes: "Longstaff-Schwartz, one date: discounts the cash flows, per-(1024-path block) f64 normal-equation sums of the in-the-money paths in path order",
        block: B256,
        grid: "ceil(blocks / 8) blocks, a warp per 1024-path block",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F32),
            inout(F64),
            val(U64),
            val(U32),
            val(F64),
            val(F64),
            val(U32),
            val(F64),
            output(F64),
        ],
    }
    /// Longstaff-Schwartz: the exercise rule at one date.
    LSM_EXERCISE_F64 {
        symbol: "lsm_exercise_f64",
        module: AMERICAN,
        compile_ms: 60,
        computes: "Longstaff-Schwartz, one date: exercise where the payoff beats the fitted continuation value",
        block: B256,
        grid: "ceil(paths / 256) blocks, a thread per path",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F32),
            inout(F64),
            val(U64),
            val(U32),
            val(F64),
            val(F64),
            val(U32),
            val(F64),
            val(F64),
            val(F64),
        ],
    }
    /// Longstaff-Schwartz: per-block sums of the discounted cash flows and their squares.
    LSM_FINAL_F64 {
        symbol: "lsm_final_f64",
        module: AMERICAN,
        compile_ms: 60,
        computes: "Longstaff-Schwartz: per-(1024-path block) sums of the discounted cash flows and their squares",
        block: B256,
        grid: "ceil(blocks / 8) blocks, a warp per 1024-path block",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(F64), val(U64), val(F64), output(F64)],
    }
    /// Longstaff-Schwartz barrier options: each path's first knocked date and the last
    /// date's cash flows (compile estimates guessed from the vanilla kernels, not measured).
    LSM_BARRIER_INIT_F64 {
        symbol: "lsm_barrier_init_f64",
        module: AMERICAN,
        compile_ms: 60,
        computes: "Longstaff-Schwartz barrier options: each path's first date at or past the monitored barrier, the rebate or the in-option's cash flow at the last date",
        block: B256,
        grid: "ceil(paths / 256) blocks, a thread per path",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F32),
            inout(F64),
            output(F64),
            output(U32),
            val(U64),
            val(U32),
            val(F64),
            val(F64),
            val(U32),
            val(U32),
            val(F64),
        ],
    }
    /// Longstaff-Schwartz barrier options: one date's cash flows and per-block regression
    /// sums of the live in-the-money paths.
    LSM_BARRIER_REGRESS_F64 {
        symbol: "lsm_barrier_regress_f64",
        module: AMERICAN,
        compile_ms: 120,
        computes: "Longstaff-Schwartz barrier options, one date: the rebate at the knock (out) or the vanilla received at it (in), the discount, per-(1024-path block) f64 normal-equation sums of the live in-the-money paths in path order",
        block: B256,
        grid: "ceil(blocks / 8) blocks, a warp per 1024-path block",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F32),
            inout(F64),
            inout(F64),
            input(U32),
            val(U64),
            val(U32),
            val(F64),
            val(F64),
            val(U32),
            val(F64),
            val(U32),
            val(F64),
            output(F64),
        ],
    }
    /// Longstaff-Schwartz out-options: the exercise rule at one date on the live paths.
    LSM_BARRIER_EXERCISE_F64 {
        symbol: "lsm_barrier_exercise_f64",
        module: AMERICAN,
        compile_ms: 60,
        computes: "Longstaff-Schwartz knock-out options, one date: exercise on the paths not yet knocked where the payoff beats the fitted continuation value",
        block: B256,
        grid: "ceil(paths / 256) blocks, a thread per path",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F32),
            inout(F64),
            input(U32),
            val(U64),
            val(U32),
            val(F64),
            val(F64),
            val(U32),
            val(F64),
            val(F64),
            val(F64),
        ],
    }
    /// Longstaff-Schwartz in-options: per-block sums of the discounted cash flows.
    LSM_BARRIER_FINAL_IN_F64 {
        symbol: "lsm_barrier_final_in_f64",
        module: AMERICAN,
        compile_ms: 60,
        computes: "Longstaff-Schwartz knock-in options: per-(1024-path block) sums of the discounted in-option cash flows and their squares",
        block: B256,
        grid: "ceil(blocks / 8) blocks, a warp per 1024-path block",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(F64), input(F64), input(U32), val(U64), val(F64), output(F64)],
    }
    /// Implied volatility: one thread per quote, "Let's Be Rational" in f64.
    IMPLIED_VOL_F64 {
        symbol: "implied_vol_f64",
        module: IMPLIED_VOL,
        compile_ms: 1568,
        computes: "Black-Scholes implied volatility of a book of European quotes (Jaeckel's Let's Be Rational, the CPU solver's operations in f64), a vol and a reason code per quote",
        block: [128, 1, 1],
        grid: "min(ceil(n / 128), 64 blocks per SM) blocks, grid-stride over quotes; chunked launches",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(U8),
            val(U64),
            output(F64),
            output(U8),
        ],
    }
    /// Implied volatility, grouped: each quote's checks and the solver's start, its way
    /// through the rest (or its result where it needs no solve).
    IMPLIED_VOL_CLASSIFY_F64 {
        symbol: "implied_vol_classify_f64",
        module: IMPLIED_VOL,
        compile_ms: 504,
        computes: "Black-Scholes implied volatility, grouped: each quote's checks and the solver's start (central and outer points), its way (one of four) and start state, or its reason code",
        block: [128, 1, 1],
        grid: "min(ceil(n / 128), 64 blocks per SM) blocks, grid-stride over quotes",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(U8),
            val(U64),
            output(F64),
            output(U8),
            output(F64),
            output(U8),
        ],
    }
    /// Implied volatility, grouped: how many quotes of each 128-quote tile take each way.
    IMPLIED_VOL_TILE_COUNT {
        symbol: "implied_vol_tile_count",
        module: IMPLIED_VOL,
        compile_ms: 93,
        computes: "Implied volatility, grouped: per 128-quote tile, how many quotes take each of the four ways (warp ballots)",
        block: [128, 1, 1],
        grid: "ceil(n / 128) blocks, a tile each",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U8), val(U64), output(U32)],
    }
    /// Implied volatility, grouped: the scan of the tiles' counts, way by way.
    IMPLIED_VOL_OFFSETS {
        symbol: "implied_vol_offsets",
        module: IMPLIED_VOL,
        compile_ms: 241,
        computes: "Implied volatility, grouped: exclusive scan of the tiles' counts in way-major order (each tile's place in each way's list, each way's start)",
        block: [256, 1, 1],
        grid: "1 block",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U32), val(U32), output(U32), output(U32)],
    }
    /// Implied volatility, grouped: each quote's index into its way's list, in book order.
    IMPLIED_VOL_SCATTER {
        symbol: "implied_vol_scatter",
        module: IMPLIED_VOL,
        compile_ms: 133,
        computes: "Implied volatility, grouped: stable counting sort of the quote indices by way (tile offset plus rank by warp ballots)",
        block: [128, 1, 1],
        grid: "ceil(n / 128) blocks, a tile each",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[input(U8), val(U64), input(U32), output(U32)],
    }
    /// Implied volatility, grouped: the solve of the quotes that take the lower map and Householder steps on ln b.
    IMPLIED_VOL_SOLVE_LOWER_F64 {
        symbol: "implied_vol_solve_lower_f64",
        module: IMPLIED_VOL,
        compile_ms: 669,
        computes: "Black-Scholes implied volatility, grouped: the rest of the solve for the quotes of way 0 (the lower map and Householder steps on ln b), each result written to its quote's slot",
        block: [128, 1, 1],
        grid: "min(ceil(n / 128), 64 blocks per SM) blocks, grid-stride over the way's list",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F64),
            val(U64),
            input(F64),
            input(U32),
            input(U32),
            output(F64),
            output(U8),
        ],
    }
    /// Implied volatility, grouped: the solve of the quotes that take the rational cubic below the central point and steps on b.
    IMPLIED_VOL_SOLVE_LOW_MID_F64 {
        symbol: "implied_vol_solve_low_mid_f64",
        module: IMPLIED_VOL,
        compile_ms: 450,
        computes: "Black-Scholes implied volatility, grouped: the rest of the solve for the quotes of way 1 (the rational cubic below the central point and steps on b), each result written to its quote's slot",
        block: [128, 1, 1],
        grid: "min(ceil(n / 128), 64 blocks per SM) blocks, grid-stride over the way's list",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F64),
            val(U64),
            input(F64),
            input(U32),
            input(U32),
            output(F64),
            output(U8),
        ],
    }
    /// Implied volatility, grouped: the solve of the quotes that take the rational cubic above the central point and steps on b.
    IMPLIED_VOL_SOLVE_HIGH_MID_F64 {
        symbol: "implied_vol_solve_high_mid_f64",
        module: IMPLIED_VOL,
        compile_ms: 464,
        computes: "Black-Scholes implied volatility, grouped: the rest of the solve for the quotes of way 2 (the rational cubic above the central point and steps on b), each result written to its quote's slot",
        block: [128, 1, 1],
        grid: "min(ceil(n / 128), 64 blocks per SM) blocks, grid-stride over the way's list",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F64),
            val(U64),
            input(F64),
            input(U32),
            input(U32),
            output(F64),
            output(U8),
        ],
    }
    /// Implied volatility, grouped: the solve of the quotes that take the upper map and steps on ln(b_max - b) or on b.
    IMPLIED_VOL_SOLVE_UPPER_F64 {
        symbol: "implied_vol_solve_upper_f64",
        module: IMPLIED_VOL,
        compile_ms: 669,
        computes: "Black-Scholes implied volatility, grouped: the rest of the solve for the quotes of way 3 (the upper map and steps on ln(b_max - b) or on b), each result written to its quote's slot",
        block: [128, 1, 1],
        grid: "min(ceil(n / 128), 64 blocks per SM) blocks, grid-stride over the way's list",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F64),
            val(U64),
            input(F64),
            input(U32),
            input(U32),
            output(F64),
            output(U8),
        ],
    }
    /// Portfolio risk: a block per scenario, the book's European Black-Scholes P&L summed
    /// (compile estimate guessed from a kernel of its size, not measured).
    RISK_BS_GRID_F64 {
        symbol: "risk_bs_grid_f64",
        module: RISK,
        compile_ms: 150,
        computes: "Portfolio risk by full revaluation: European Black-Scholes options re-priced under each scenario's spot, vol and rate shocks, quantity times (shocked - base) summed per scenario in a fixed order",
        block: B256,
        grid: "n_scen blocks, a block per scenario striding over the options",
        dynamic_shared_bytes: 0,
        dynamic_shared_note: "",
        params: &[
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(F64),
            input(U8),
            input(U32),
            val(U64),
            input(F64),
            input(U8),
            input(F64),
            input(F64),
            val(U32),
            val(U64),
            output(F64),
        ],
    }
}
