//! The kernel table: every kernel kiln launches, the module (one `kernels/*.cu` file) it
//! lives in, and its `extern "C"` name (`{op}_{dtype}`).
//!
//! kiln compiles and caches each kernel as its own NVRTC [`Program`]: the module's source
//! with `-DKILN_ONLY -DKILN_K_<symbol>`, which every `.cu` file turns into "this kernel
//! alone" (each kernel sits in an `#if !defined(KILN_ONLY) || defined(KILN_K_<symbol>)`
//! block). So a process compiles only the kernels it launches: a cold `kiln filter2d`
//! compiles its one or two kernels, not the 26 the imaging module held (measured
//! 2026-12-03, sm_90, NVRTC 13.0 on the 2-core build machine: that module whole 9.3 s,
//! `sep2d_vh_r8_f32` alone 0.16 s). A whole module is still one program for the compile
//! test and `examples/ptxas_info.rs`. The imaging families share `kernels/imaging.cuh`,
//! prepended to each file's source (both start with a `#line` directive, so NVRTC's
//! messages and `-lineinfo` name the right file and line).

mod sources;

pub use sources::*;

/// What NVRTC compiles as one program and the cache stores as one cubin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Program {
    /// One kernel alone: its module's source with `-DKILN_ONLY -DKILN_K_<symbol>`. What
    /// kiln loads and launches.
    Kernel(KernelId),
    /// A whole module, every kernel of the file.
    Module(Module),
}

impl Program {
    /// The kernel's symbol, or the module's name: the cache file's prefix.
    pub fn name(self) -> &'static str {
        match self {
            Program::Kernel(k) => k.symbol(),
            Program::Module(m) => m.name,
        }
    }

    /// The module whose source it compiles.
    pub fn module(self) -> Module {
        match self {
            Program::Kernel(k) => k.module(),
            Program::Module(m) => m,
        }
    }

    /// The preprocessor definitions that select its kernels (none for a whole module).
    pub fn defines(self) -> Vec<String> {
        match self {
            Program::Kernel(k) => vec!["-DKILN_ONLY".into(), format!("-DKILN_K_{}", k.symbol())],
            Program::Module(_) => Vec::new(),
        }
    }
}

impl From<KernelId> for Program {
    fn from(k: KernelId) -> Self {
        Program::Kernel(k)
    }
}

impl From<Module> for Program {
    fn from(m: Module) -> Self {
        Program::Module(m)
    }
}

/// Every kernel kiln launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelId {
    /// `MapOp` on f32 storage (op code and two parameters as arguments).
    MapF32,
    /// `MapOp` on f16 storage, f32 arithmetic.
    MapF16,
    /// `MapOp` on bf16 storage, f32 arithmetic.
    MapBf16,
    /// `y = a*x + y` on f32.
    AxpyF32,
    /// `y = a*x + y` on f16 storage.
    AxpyF16,
    /// `y = a*x + y` on bf16 storage.
    AxpyBf16,
    /// 2-D transpose of 32-bit elements (f32), 64x64 tiles.
    TransposeB32,
    /// 2-D transpose of 16-bit elements (f16, bf16) as 32-bit words; rows and cols even.
    TransposeB16,
    /// 2-D transpose of 16-bit elements one at a time (odd rows or cols).
    TransposeHB16,
    /// filter2d direct path, 5x5.
    Filter2dK5F32,
    /// filter2d direct path, 7x7.
    Filter2dK7F32,
    /// filter2d direct path, any odd k up to 31.
    Filter2dKnF32,
    /// One separable pass along the contiguous axis.
    Filter1dXF32,
    /// One separable pass along a strided axis.
    Filter1dStridedF32,
    /// filter3d direct path, 3x3x3 (z-marching, register ring).
    Filter3dK3F32,
    /// filter3d direct path, 7x7x7.
    Filter3dK7F32,
    /// filter2d direct 3x3 from registers (no shared memory), 8 rows a thread.
    Filter2dK3r8F32,
    /// filter2d direct 3x3 from registers, 4 rows a thread.
    Filter2dK3r4F32,
    /// filter3d direct 5x5x5, z-marching (cp.async ring), 4 rows a thread.
    Filter3dZm5F32,
    /// Fused separable 2-D, radius 1: pass along H, then along W.
    Sep2dVhR1F32,
    /// Fused separable 2-D, radius 2: pass along H, then along W.
    Sep2dVhR2F32,
    /// Fused separable 2-D, radius 3: pass along H, then along W.
    Sep2dVhR3F32,
    /// Fused separable 2-D, radius 4: pass along H, then along W.
    Sep2dVhR4F32,
    /// Fused separable 2-D, radius 5: pass along H, then along W.
    Sep2dVhR5F32,
    /// Fused separable 2-D, radius 6: pass along H, then along W.
    Sep2dVhR6F32,
    /// Fused separable 2-D, radius 7: pass along H, then along W.
    Sep2dVhR7F32,
    /// Fused separable 2-D, radius 8: pass along H, then along W.
    Sep2dVhR8F32,
    /// Fused separable 2-D, radius 1: pass along W, then along H.
    Sep2dHvR1F32,
    /// Fused separable 2-D, radius 2: pass along W, then along H.
    Sep2dHvR2F32,
    /// Fused separable 2-D, radius 3: pass along W, then along H.
    Sep2dHvR3F32,
    /// Fused separable 2-D, radius 4: pass along W, then along H.
    Sep2dHvR4F32,
    /// Fused separable 2-D, radius 5: pass along W, then along H.
    Sep2dHvR5F32,
    /// Fused separable 2-D, radius 6: pass along W, then along H.
    Sep2dHvR6F32,
    /// Fused separable 2-D, radius 7: pass along W, then along H.
    Sep2dHvR7F32,
    /// Fused separable 2-D, radius 8: pass along W, then along H.
    Sep2dHvR8F32,
    /// ndimage: a 1-D pass of any length and anchor along the contiguous axis.
    NdPassXAny,
    /// ndimage: a 1-D pass of any length and anchor along a strided axis.
    NdPassSAny,
    /// ndimage: direct correlation with any (kd, kh, kw) kernel and anchors.
    NdDirectAny,
    /// ndimage: the element-wise combination of filter terms (sum, squares, sqrt).
    NdCombineF32,
    /// Monte Carlo, European options: per-(option, 1024-sample block) f64 sums, a warp each.
    McEuropeanF64,
    /// Monte Carlo, arithmetic-average Asian options (block sums as above).
    McAsianArithmeticF64,
    /// Monte Carlo, geometric-average Asian options.
    McAsianGeometricF64,
    /// Monte Carlo, up-and-out barriers.
    McBarrierUpOutF64,
    /// Monte Carlo, up-and-in barriers.
    McBarrierUpInF64,
    /// Monte Carlo, down-and-out barriers.
    McBarrierDownOutF64,
    /// Monte Carlo, down-and-in barriers.
    McBarrierDownInF64,
    /// Monte Carlo, European, `fast_math` normals (hardware approximations).
    McEuropeanFastF64,
    /// Monte Carlo, arithmetic Asian, `fast_math`.
    McAsianArithmeticFastF64,
    /// Monte Carlo, geometric Asian, `fast_math`.
    McAsianGeometricFastF64,
    /// Monte Carlo, up-and-out barriers, `fast_math`.
    McBarrierUpOutFastF64,
    /// Monte Carlo, up-and-in barriers, `fast_math`.
    McBarrierUpInFastF64,
    /// Monte Carlo, down-and-out barriers, `fast_math`.
    McBarrierDownOutFastF64,
    /// Monte Carlo, down-and-in barriers, `fast_math`.
    McBarrierDownInFastF64,
    /// Monte Carlo: adds each option's block sums in block order onto running totals.
    McCombineF64,
    /// Monte Carlo: the portable f32 math and Philox words, for bitwise tests.
    FinanceSelftestF32,
    /// Monte Carlo: the Box-Muller square root against `__fsqrt_rn`, for bitwise tests.
    FinanceSqrtCheckF32,
    /// Monte Carlo benchmark probe: the European launch with only the Philox words.
    McProbePhiloxF64,
    /// Monte Carlo benchmark probe: the European launch with Philox and the exact normals.
    McProbeNormalsF64,
    /// Monte Carlo benchmark probe: the European launch with Philox and the fast_math normals.
    McProbeNormalsFastF64,
    /// Quasi-Monte Carlo European block sums.
    QmcEuropeanF64,
    /// Quasi-Monte Carlo arithmetic Asian block sums.
    QmcAsianArithmeticF64,
    /// Quasi-Monte Carlo geometric Asian block sums.
    QmcAsianGeometricF64,
    /// Quasi-Monte Carlo up-and-out barrier block sums.
    QmcBarrierUpOutF64,
    /// Quasi-Monte Carlo up-and-in barrier block sums.
    QmcBarrierUpInF64,
    /// Quasi-Monte Carlo down-and-out barrier block sums.
    QmcBarrierDownOutF64,
    /// Quasi-Monte Carlo down-and-in barrier block sums.
    QmcBarrierDownInF64,
    /// Self-test of the inverse normal and Sobol points against kiln-core.
    QmcSelftestF32,
    /// Monte Carlo under Heston (QE scheme): per-(option, 1024-sample block) f64 sums.
    HestonBlocksF64,
    /// Self-test of one Heston QE step against kiln-core.
    HestonStepSelftestF32,
    /// Basket options by Monte Carlo: per-(option, 1024-sample block) f64 sums.
    BasketBlocksF64,
    /// Self-test: basket samples' payoffs and controls, one a thread, against kiln-core.
    BasketSamplesF64,
    /// Longstaff-Schwartz: the path matrix (dates x paths f32) and the last date's payoffs.
    LsmPathsF32,
    /// Longstaff-Schwartz: discounts the cash flows, per-block regression sums at one date.
    LsmRegressF64,
    /// Longstaff-Schwartz: the exercise rule at one date.
    LsmExerciseF64,
    /// Longstaff-Schwartz: per-block sums of the discounted cash flows and their squares.
    LsmFinalF64,
    /// GEMM, 128x128x16 tiles, cp.async / float4 loads, A and B as stored (`NN`).
    GemmTiledNnF32,
    /// GEMM tiled, B transposed (`NT`).
    GemmTiledNtF32,
    /// GEMM tiled, A transposed (`TN`).
    GemmTiledTnF32,
    /// GEMM tiled, both transposed (`TT`).
    GemmTiledTtF32,
    /// GEMM tiled with scalar loads (any alignment), `NN`.
    GemmTiledNnSF32,
    /// GEMM tiled, scalar loads, `NT`.
    GemmTiledNtSF32,
    /// GEMM tiled, scalar loads, `TN`.
    GemmTiledTnSF32,
    /// GEMM tiled, scalar loads, `TT`.
    GemmTiledTtSF32,
    /// GEMM, the seed's naive kernel: one thread per element of C (the baseline).
    GemmNaiveF32,
    /// Conversion between any two storage types (codes as arguments).
    CastAny,
    /// Fault injection: a store through an invalid address (sticky error 700).
    FaultIllegalAddress,
    /// Rank filter: any footprint of up to 9 elements, any rank, keys sorted in registers (Batcher network).
    RankNet9,
    /// Rank filter: up to 25 elements, registers, Batcher network.
    RankNet25,
    /// Rank filter: up to 49 elements, registers, Batcher network.
    RankNet49,
    /// Median of exactly 9 elements (3x3): the pruned network for the middle rank.
    RankMed9,
    /// Median of exactly 25 elements (5x5): the pruned network for the middle rank.
    RankMed25,
    /// Median 3x3 of u8, a centred box: four outputs a thread on packed bytes.
    RankMed9U8x4,
    /// Median 5x5 of u8, a centred box: four outputs a thread on packed bytes.
    RankMed25U8x4,
    /// Rank filter fallback: any footprint and rank, bisection on the total-order key.
    RankBisect,
    /// Min/max over any footprint; with a structure, min(x - s) / max(x + s) in double.
    MinmaxFp,
    /// u8 rank over a 2-D box: Huang's sliding histogram down columns, a histogram a thread.
    RankHistU8,
    /// Min/max over a full 2-D box, fused tile: van Herk / Gil-Werman along rows then columns.
    MinmaxBox2d,
    /// One binary erosion or dilation step (scipy semantics), sets a changed flag.
    BinaryStep,
    /// x = 1 - x on a u8 0/1 mask (binary_fill_holes' complement).
    BinaryNotU8,
}

impl KernelId {
    /// Every kernel.
    pub const ALL: &'static [KernelId] = &[
        KernelId::MapF32,
        KernelId::MapF16,
        KernelId::MapBf16,
        KernelId::AxpyF32,
        KernelId::AxpyF16,
        KernelId::AxpyBf16,
        KernelId::TransposeB32,
        KernelId::TransposeB16,
        KernelId::TransposeHB16,
        KernelId::Filter2dK5F32,
        KernelId::Filter2dK7F32,
        KernelId::Filter2dKnF32,
        KernelId::Filter1dXF32,
        KernelId::Filter1dStridedF32,
        KernelId::Filter3dK3F32,
        KernelId::Filter3dK7F32,
        KernelId::Filter2dK3r8F32,
        KernelId::Filter2dK3r4F32,
        KernelId::Filter3dZm5F32,
        KernelId::Sep2dVhR1F32,
        KernelId::Sep2dVhR2F32,
        KernelId::Sep2dVhR3F32,
        KernelId::Sep2dVhR4F32,
        KernelId::Sep2dVhR5F32,
        KernelId::Sep2dVhR6F32,
        KernelId::Sep2dVhR7F32,
        KernelId::Sep2dVhR8F32,
        KernelId::Sep2dHvR1F32,
        KernelId::Sep2dHvR2F32,
        KernelId::Sep2dHvR3F32,
        KernelId::Sep2dHvR4F32,
        KernelId::Sep2dHvR5F32,
        KernelId::Sep2dHvR6F32,
        KernelId::Sep2dHvR7F32,
        KernelId::Sep2dHvR8F32,
        KernelId::NdPassXAny,
        KernelId::NdPassSAny,
        KernelId::NdDirectAny,
        KernelId::NdCombineF32,
        KernelId::McEuropeanF64,
        KernelId::McAsianArithmeticF64,
        KernelId::McAsianGeometricF64,
        KernelId::McBarrierUpOutF64,
        KernelId::McBarrierUpInF64,
        KernelId::McBarrierDownOutF64,
        KernelId::McBarrierDownInF64,
        KernelId::McEuropeanFastF64,
        KernelId::McAsianArithmeticFastF64,
        KernelId::McAsianGeometricFastF64,
        KernelId::McBarrierUpOutFastF64,
        KernelId::McBarrierUpInFastF64,
        KernelId::McBarrierDownOutFastF64,
        KernelId::McBarrierDownInFastF64,
        KernelId::McCombineF64,
        KernelId::FinanceSelftestF32,
        KernelId::FinanceSqrtCheckF32,
        KernelId::McProbePhiloxF64,
        KernelId::McProbeNormalsF64,
        KernelId::McProbeNormalsFastF64,
        KernelId::QmcEuropeanF64,
        KernelId::QmcAsianArithmeticF64,
        KernelId::QmcAsianGeometricF64,
        KernelId::QmcBarrierUpOutF64,
        KernelId::QmcBarrierUpInF64,
        KernelId::QmcBarrierDownOutF64,
        KernelId::QmcBarrierDownInF64,
        KernelId::QmcSelftestF32,
        KernelId::HestonBlocksF64,
        KernelId::HestonStepSelftestF32,
        KernelId::BasketBlocksF64,
        KernelId::BasketSamplesF64,
        KernelId::LsmPathsF32,
        KernelId::LsmRegressF64,
        KernelId::LsmExerciseF64,
        KernelId::LsmFinalF64,
        KernelId::GemmTiledNnF32,
        KernelId::GemmTiledNtF32,
        KernelId::GemmTiledTnF32,
        KernelId::GemmTiledTtF32,
        KernelId::GemmTiledNnSF32,
        KernelId::GemmTiledNtSF32,
        KernelId::GemmTiledTnSF32,
        KernelId::GemmTiledTtSF32,
        KernelId::GemmNaiveF32,
        KernelId::CastAny,
        KernelId::FaultIllegalAddress,
        KernelId::RankNet9,
        KernelId::RankNet25,
        KernelId::RankNet49,
        KernelId::RankMed9,
        KernelId::RankMed25,
        KernelId::RankMed9U8x4,
        KernelId::RankMed25U8x4,
        KernelId::RankBisect,
        KernelId::MinmaxFp,
        KernelId::RankHistU8,
        KernelId::MinmaxBox2d,
        KernelId::BinaryStep,
        KernelId::BinaryNotU8,
    ];

    /// The module that defines it.
    pub fn module(self) -> Module {
        match self {
            KernelId::MapF32
            | KernelId::MapF16
            | KernelId::MapBf16
            | KernelId::AxpyF32
            | KernelId::AxpyF16
            | KernelId::AxpyBf16 => MAP,
            KernelId::TransposeB32 | KernelId::TransposeB16 | KernelId::TransposeHB16 => TRANSPOSE,
            KernelId::Filter2dK5F32
            | KernelId::Filter2dK7F32
            | KernelId::Filter2dKnF32
            | KernelId::Filter2dK3r8F32
            | KernelId::Filter2dK3r4F32 => FILTER2D,
            KernelId::Filter1dXF32
            | KernelId::Filter1dStridedF32
            | KernelId::Sep2dVhR1F32
            | KernelId::Sep2dVhR2F32
            | KernelId::Sep2dVhR3F32
            | KernelId::Sep2dVhR4F32
            | KernelId::Sep2dVhR5F32
            | KernelId::Sep2dVhR6F32
            | KernelId::Sep2dVhR7F32
            | KernelId::Sep2dVhR8F32
            | KernelId::Sep2dHvR1F32
            | KernelId::Sep2dHvR2F32
            | KernelId::Sep2dHvR3F32
            | KernelId::Sep2dHvR4F32
            | KernelId::Sep2dHvR5F32
            | KernelId::Sep2dHvR6F32
            | KernelId::Sep2dHvR7F32
            | KernelId::Sep2dHvR8F32 => SEPARABLE,
            KernelId::NdPassXAny | KernelId::NdPassSAny | KernelId::NdDirectAny | KernelId::NdCombineF32 => {
                NDIMAGE
            }
            KernelId::Filter3dK3F32 | KernelId::Filter3dK7F32 | KernelId::Filter3dZm5F32 => FILTER3D,
            KernelId::McEuropeanF64
            | KernelId::McAsianArithmeticF64
            | KernelId::McAsianGeometricF64
            | KernelId::McBarrierUpOutF64
            | KernelId::McBarrierUpInF64
            | KernelId::McBarrierDownOutF64
            | KernelId::McBarrierDownInF64
            | KernelId::McEuropeanFastF64
            | KernelId::McAsianArithmeticFastF64
            | KernelId::McAsianGeometricFastF64
            | KernelId::McBarrierUpOutFastF64
            | KernelId::McBarrierUpInFastF64
            | KernelId::McBarrierDownOutFastF64
            | KernelId::McBarrierDownInFastF64
            | KernelId::McCombineF64
            | KernelId::FinanceSelftestF32
            | KernelId::FinanceSqrtCheckF32
            | KernelId::McProbePhiloxF64
            | KernelId::McProbeNormalsF64
            | KernelId::McProbeNormalsFastF64 => FINANCE,
            KernelId::QmcEuropeanF64
            | KernelId::QmcAsianArithmeticF64
            | KernelId::QmcAsianGeometricF64
            | KernelId::QmcBarrierUpOutF64
            | KernelId::QmcBarrierUpInF64
            | KernelId::QmcBarrierDownOutF64
            | KernelId::QmcBarrierDownInF64
            | KernelId::QmcSelftestF32 => FINANCE_QMC,
            KernelId::HestonBlocksF64 | KernelId::HestonStepSelftestF32 => HESTON,
            KernelId::BasketBlocksF64 | KernelId::BasketSamplesF64 => BASKET,
            KernelId::LsmPathsF32
            | KernelId::LsmRegressF64
            | KernelId::LsmExerciseF64
            | KernelId::LsmFinalF64 => AMERICAN,
            KernelId::GemmTiledNnF32
            | KernelId::GemmTiledNtF32
            | KernelId::GemmTiledTnF32
            | KernelId::GemmTiledTtF32
            | KernelId::GemmTiledNnSF32
            | KernelId::GemmTiledNtSF32
            | KernelId::GemmTiledTnSF32
            | KernelId::GemmTiledTtSF32
            | KernelId::GemmNaiveF32 => GEMM,
            KernelId::CastAny => CAST,
            KernelId::FaultIllegalAddress => FAULT,
            KernelId::RankNet9
            | KernelId::RankNet25
            | KernelId::RankNet49
            | KernelId::RankMed9
            | KernelId::RankMed25
            | KernelId::RankMed9U8x4
            | KernelId::RankMed25U8x4
            | KernelId::RankBisect
            | KernelId::MinmaxFp
            | KernelId::RankHistU8
            | KernelId::MinmaxBox2d => RANK,
            KernelId::BinaryStep | KernelId::BinaryNotU8 => MORPH,
        }
    }

    /// Its `extern "C"` symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            KernelId::MapF32 => "map_f32",
            KernelId::MapF16 => "map_f16",
            KernelId::MapBf16 => "map_bf16",
            KernelId::AxpyF32 => "axpy_f32",
            KernelId::AxpyF16 => "axpy_f16",
            KernelId::AxpyBf16 => "axpy_bf16",
            KernelId::TransposeB32 => "transpose_b32",
            KernelId::TransposeB16 => "transpose_b16",
            KernelId::TransposeHB16 => "transpose_h_b16",
            KernelId::Filter2dK5F32 => "filter2d_k5_f32",
            KernelId::Filter2dK7F32 => "filter2d_k7_f32",
            KernelId::Filter2dKnF32 => "filter2d_kn_f32",
            KernelId::Filter1dXF32 => "filter1d_x_f32",
            KernelId::Filter1dStridedF32 => "filter1d_s_f32",
            KernelId::Filter3dK3F32 => "filter3d_k3_f32",
            KernelId::Filter3dK7F32 => "filter3d_k7_f32",
            KernelId::Filter2dK3r8F32 => "filter2d_k3r8_f32",
            KernelId::Filter2dK3r4F32 => "filter2d_k3r4_f32",
            KernelId::Filter3dZm5F32 => "filter3d_zm5_f32",
            KernelId::Sep2dVhR1F32 => "sep2d_vh_r1_f32",
            KernelId::Sep2dVhR2F32 => "sep2d_vh_r2_f32",
            KernelId::Sep2dVhR3F32 => "sep2d_vh_r3_f32",
            KernelId::Sep2dVhR4F32 => "sep2d_vh_r4_f32",
            KernelId::Sep2dVhR5F32 => "sep2d_vh_r5_f32",
            KernelId::Sep2dVhR6F32 => "sep2d_vh_r6_f32",
            KernelId::Sep2dVhR7F32 => "sep2d_vh_r7_f32",
            KernelId::Sep2dVhR8F32 => "sep2d_vh_r8_f32",
            KernelId::Sep2dHvR1F32 => "sep2d_hv_r1_f32",
            KernelId::Sep2dHvR2F32 => "sep2d_hv_r2_f32",
            KernelId::Sep2dHvR3F32 => "sep2d_hv_r3_f32",
            KernelId::Sep2dHvR4F32 => "sep2d_hv_r4_f32",
            KernelId::Sep2dHvR5F32 => "sep2d_hv_r5_f32",
            KernelId::Sep2dHvR6F32 => "sep2d_hv_r6_f32",
            KernelId::Sep2dHvR7F32 => "sep2d_hv_r7_f32",
            KernelId::Sep2dHvR8F32 => "sep2d_hv_r8_f32",
            KernelId::NdPassXAny => "nd_pass_x_any",
            KernelId::NdPassSAny => "nd_pass_s_any",
            KernelId::NdDirectAny => "nd_direct_any",
            KernelId::NdCombineF32 => "nd_combine_f32",
            KernelId::McEuropeanF64 => "mc_european_f64",
            KernelId::McAsianArithmeticF64 => "mc_asian_arithmetic_f64",
            KernelId::McAsianGeometricF64 => "mc_asian_geometric_f64",
            KernelId::McBarrierUpOutF64 => "mc_barrier_up_out_f64",
            KernelId::McBarrierUpInF64 => "mc_barrier_up_in_f64",
            KernelId::McBarrierDownOutF64 => "mc_barrier_down_out_f64",
            KernelId::McBarrierDownInF64 => "mc_barrier_down_in_f64",
            KernelId::McEuropeanFastF64 => "mc_european_fast_f64",
            KernelId::McAsianArithmeticFastF64 => "mc_asian_arithmetic_fast_f64",
            KernelId::McAsianGeometricFastF64 => "mc_asian_geometric_fast_f64",
            KernelId::McBarrierUpOutFastF64 => "mc_barrier_up_out_fast_f64",
            KernelId::McBarrierUpInFastF64 => "mc_barrier_up_in_fast_f64",
            KernelId::McBarrierDownOutFastF64 => "mc_barrier_down_out_fast_f64",
            KernelId::McBarrierDownInFastF64 => "mc_barrier_down_in_fast_f64",
            KernelId::McCombineF64 => "mc_combine_f64",
            KernelId::FinanceSelftestF32 => "finance_selftest_f32",
            KernelId::FinanceSqrtCheckF32 => "finance_sqrt_check_f32",
            KernelId::McProbePhiloxF64 => "mc_probe_philox_f64",
            KernelId::McProbeNormalsF64 => "mc_probe_normals_f64",
            KernelId::McProbeNormalsFastF64 => "mc_probe_normals_fast_f64",
            KernelId::QmcEuropeanF64 => "qmc_european_f64",
            KernelId::QmcAsianArithmeticF64 => "qmc_asian_arithmetic_f64",
            KernelId::QmcAsianGeometricF64 => "qmc_asian_geometric_f64",
            KernelId::QmcBarrierUpOutF64 => "qmc_barrier_up_out_f64",
            KernelId::QmcBarrierUpInF64 => "qmc_barrier_up_in_f64",
            KernelId::QmcBarrierDownOutF64 => "qmc_barrier_down_out_f64",
            KernelId::QmcBarrierDownInF64 => "qmc_barrier_down_in_f64",
            KernelId::QmcSelftestF32 => "qmc_selftest_f32",
            KernelId::HestonBlocksF64 => "heston_blocks_f64",
            KernelId::HestonStepSelftestF32 => "heston_step_selftest_f32",
            KernelId::BasketBlocksF64 => "basket_blocks_f64",
            KernelId::BasketSamplesF64 => "basket_samples_f64",
            KernelId::LsmPathsF32 => "lsm_paths_f32",
            KernelId::LsmRegressF64 => "lsm_regress_f64",
            KernelId::LsmExerciseF64 => "lsm_exercise_f64",
            KernelId::LsmFinalF64 => "lsm_final_f64",
            KernelId::GemmTiledNnF32 => "gemm_tiled_nn_f32",
            KernelId::GemmTiledNtF32 => "gemm_tiled_nt_f32",
            KernelId::GemmTiledTnF32 => "gemm_tiled_tn_f32",
            KernelId::GemmTiledTtF32 => "gemm_tiled_tt_f32",
            KernelId::GemmTiledNnSF32 => "gemm_tiled_nn_s_f32",
            KernelId::GemmTiledNtSF32 => "gemm_tiled_nt_s_f32",
            KernelId::GemmTiledTnSF32 => "gemm_tiled_tn_s_f32",
            KernelId::GemmTiledTtSF32 => "gemm_tiled_tt_s_f32",
            KernelId::GemmNaiveF32 => "gemm_naive_f32",
            KernelId::CastAny => "cast_any",
            KernelId::FaultIllegalAddress => "fault_illegal_address",
            KernelId::RankNet9 => "rank_net9",
            KernelId::RankNet25 => "rank_net25",
            KernelId::RankNet49 => "rank_net49",
            KernelId::RankMed9 => "rank_med9",
            KernelId::RankMed25 => "rank_med25",
            KernelId::RankMed9U8x4 => "rank_med9_u8x4",
            KernelId::RankMed25U8x4 => "rank_med25_u8x4",
            KernelId::RankBisect => "rank_bisect",
            KernelId::MinmaxFp => "minmax_fp",
            KernelId::RankHistU8 => "rank_hist_u8",
            KernelId::MinmaxBox2d => "minmax_box2d",
            KernelId::BinaryStep => "binary_step",
            KernelId::BinaryNotU8 => "binary_not_u8",
        }
    }

    /// An estimate of NVRTC's milliseconds to compile this kernel alone for sm_90: measured
    /// 2026-12-03 with NVRTC 13.0 on one core of the 2-core build machine (best of three,
    /// `-lineinfo`, other builds running). A cold start pays about this for each kernel it
    /// launches; other CPUs and archs differ (the H200's host compiled the gemm, finance and
    /// map modules whole 1.1-1.3x slower than this machine did), so it serves `kiln doctor`'s
    /// estimate and the longest-first order of parallel compiles, never as a measurement.
    pub fn compile_ms_estimate(self) -> u32 {
        match self {
            KernelId::MapF32 => 183,
            KernelId::MapF16 => 236,
            KernelId::MapBf16 => 313,
            KernelId::AxpyF32 => 58,
            KernelId::AxpyF16 => 66,
            KernelId::AxpyBf16 => 85,
            KernelId::TransposeB32 => 91,
            KernelId::TransposeB16 => 76,
            KernelId::TransposeHB16 => 91,
            KernelId::Filter2dK5F32 => 566,
            KernelId::Filter2dK7F32 => 726,
            KernelId::Filter2dKnF32 => 301,
            KernelId::Filter1dXF32 => 192,
            KernelId::Filter1dStridedF32 => 171,
            KernelId::Filter3dK3F32 => 255,
            KernelId::Filter3dK7F32 => 734,
            KernelId::Filter2dK3r8F32 => 819,
            KernelId::Filter2dK3r4F32 => 519,
            KernelId::Filter3dZm5F32 => 1590,
            KernelId::Sep2dVhR1F32 => 215,
            KernelId::Sep2dVhR2F32 => 224,
            KernelId::Sep2dVhR3F32 => 221,
            KernelId::Sep2dVhR4F32 => 232,
            KernelId::Sep2dVhR5F32 => 234,
            KernelId::Sep2dVhR6F32 => 231,
            KernelId::Sep2dVhR7F32 => 251,
            KernelId::Sep2dVhR8F32 => 258,
            KernelId::Sep2dHvR1F32 => 253,
            KernelId::Sep2dHvR2F32 => 276,
            KernelId::Sep2dHvR3F32 => 275,
            KernelId::Sep2dHvR4F32 => 332,
            KernelId::Sep2dHvR5F32 => 380,
            KernelId::Sep2dHvR6F32 => 352,
            KernelId::Sep2dHvR7F32 => 397,
            KernelId::Sep2dHvR8F32 => 365,
            // measured 2026-12-03 with the whole ndimage module (NVRTC 13.0, --ptxas-options=-v,
            // the build machine busy): 7 type instantiations each
            KernelId::NdPassXAny => 1247,
            KernelId::NdPassSAny => 1701,
            KernelId::NdDirectAny => 4952,
            KernelId::NdCombineF32 => 85,
            KernelId::McEuropeanF64 => 296,
            KernelId::McAsianArithmeticF64 => 386,
            KernelId::McAsianGeometricF64 => 330,
            KernelId::McBarrierUpOutF64 => 262,
            KernelId::McBarrierUpInF64 => 273,
            KernelId::McBarrierDownOutF64 => 262,
            KernelId::McBarrierDownInF64 => 261,
            KernelId::McEuropeanFastF64 => 249,
            KernelId::McAsianArithmeticFastF64 => 287,
            KernelId::McAsianGeometricFastF64 => 282,
            KernelId::McBarrierUpOutFastF64 => 215,
            KernelId::McBarrierUpInFastF64 => 207,
            KernelId::McBarrierDownOutFastF64 => 213,
            KernelId::McBarrierDownInFastF64 => 198,
            KernelId::McCombineF64 => 59,
            KernelId::CastAny => 308,
            KernelId::FaultIllegalAddress => 47,
            KernelId::FinanceSelftestF32 => 89,
            KernelId::FinanceSqrtCheckF32 => 49,
            KernelId::McProbePhiloxF64 => 133,
            KernelId::McProbeNormalsF64 => 137,
            KernelId::McProbeNormalsFastF64 => 125,
            // not measured yet: the Philox kernels' cost plus the inverse normal and bridge
            KernelId::QmcEuropeanF64 => 400,
            KernelId::QmcAsianArithmeticF64 => 400,
            KernelId::QmcAsianGeometricF64 => 400,
            KernelId::QmcBarrierUpOutF64 => 400,
            KernelId::QmcBarrierUpInF64 => 400,
            KernelId::QmcBarrierDownOutF64 => 400,
            KernelId::QmcBarrierDownInF64 => 400,
            KernelId::QmcSelftestF32 => 150,
            // not measured yet: a guess from the Philox kernels' cost
            KernelId::HestonBlocksF64 => 400,
            KernelId::HestonStepSelftestF32 => 200,
            // not measured yet: a guess from the Heston kernel's cost
            KernelId::BasketBlocksF64 => 300,
            KernelId::BasketSamplesF64 => 200,
            // not measured yet: the path kernel is the European one's size, the rest small
            KernelId::LsmPathsF32 => 300,
            KernelId::LsmRegressF64 => 120,
            KernelId::LsmExerciseF64 => 60,
            KernelId::LsmFinalF64 => 60,
            KernelId::GemmTiledNnF32 => 751,
            KernelId::GemmTiledNtF32 => 723,
            KernelId::GemmTiledTnF32 => 487,
            KernelId::GemmTiledTtF32 => 744,
            KernelId::GemmTiledNnSF32 => 552,
            KernelId::GemmTiledNtSF32 => 428,
            KernelId::GemmTiledTnSF32 => 548,
            KernelId::GemmTiledTtSF32 => 536,
            KernelId::GemmNaiveF32 => 56,
            // rank.cu / morph.cu: guesses until measured (the networks are the slow ones)
            KernelId::RankNet9 => 900,
            KernelId::RankNet25 => 1500,
            KernelId::RankNet49 => 3000,
            KernelId::RankMed9 => 700,
            KernelId::RankMed25 => 1200,
            KernelId::RankMed9U8x4 => 700,
            KernelId::RankMed25U8x4 => 1200,
            KernelId::RankBisect => 300,
            KernelId::MinmaxFp => 300,
            KernelId::RankHistU8 => 300,
            KernelId::MinmaxBox2d => 400,
            KernelId::BinaryStep => 200,
            KernelId::BinaryNotU8 => 60,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_symbol_is_defined_in_its_module() {
        for k in KernelId::ALL {
            assert!(
                k.module().source.contains(k.symbol()),
                "{} missing from {}",
                k.symbol(),
                k.module().name
            );
            assert!(MODULES.contains(&k.module()));
        }
    }

    #[test]
    fn every_kernel_has_one_selection_guard_and_every_guard_a_kernel() {
        for k in KernelId::ALL {
            let guard = format!("#if !defined(KILN_ONLY) || defined(KILN_K_{})\n", k.symbol());
            assert_eq!(
                k.module().source.matches(&guard).count(),
                1,
                "{}: its definition must sit in exactly one `{}`",
                k.symbol(),
                guard.trim_end()
            );
        }
        for m in MODULES {
            for (i, _) in m.source.match_indices("defined(KILN_K_") {
                let rest = &m.source[i + "defined(KILN_K_".len()..];
                let sym = &rest[..rest.find(')').unwrap_or(0)];
                assert!(
                    KernelId::ALL
                        .iter()
                        .any(|k| k.symbol() == sym && k.module() == *m),
                    "{}.cu guards `{sym}`, which is not a kernel of the module",
                    m.name
                );
            }
        }
    }

    #[test]
    fn a_kernel_program_selects_it_and_a_module_program_compiles_all() {
        let p = Program::from(KernelId::Sep2dVhR8F32);
        assert_eq!(p.name(), "sep2d_vh_r8_f32");
        assert_eq!(p.module(), SEPARABLE);
        assert_eq!(p.defines(), ["-DKILN_ONLY", "-DKILN_K_sep2d_vh_r8_f32"]);
        let m = Program::from(SEPARABLE);
        assert_eq!(m.name(), "separable");
        assert!(m.defines().is_empty());
        // Program names are the cache files' prefixes: no two alike.
        let mut names: Vec<&str> = KernelId::ALL.iter().map(|&k| Program::from(k).name()).collect();
        names.extend(MODULES.iter().map(|&m| Program::from(m).name()));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
        assert!(KernelId::ALL.iter().all(|k| k.compile_ms_estimate() > 0));
    }
}
