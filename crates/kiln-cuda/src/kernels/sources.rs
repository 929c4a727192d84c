//! The CUDA sources: one [`Module`] per `kernels/*.cu` file (the imaging and finance
//! families with their shared header prepended), and [`MODULES`], every one of them.

/// One CUDA source file: a family of kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Module {
    /// The file's stem, e.g. `imaging`.
    pub name: &'static str,
    /// The CUDA C++ source.
    pub source: &'static str,
    /// NVRTC options this module needs beyond [`crate::nvrtc::OPTIONS`] (part of every cache
    /// key through [`crate::nvrtc::options`]): `--fmad=false` where the kernels mirror a CPU
    /// routine written with plain `*` and `+` (no contraction into FMA, as Rust does none).
    pub options: &'static [&'static str],
}

/// Monte Carlo option pricing: Philox, GBM paths and payoffs fused, many options a launch
/// (`kernels/finance.cuh`, then `kernels/finance.cu`).
pub const FINANCE: Module = Module {
    name: "finance",
    options: &[],
    source: concat!(
        include_str!("../../kernels/finance.cuh"),
        include_str!("../../kernels/finance.cu")
    ),
};

/// Quasi-Monte Carlo option pricing: Sobol points, inverse normal, Brownian bridge, then
/// the same paths and payoffs (`kernels/finance.cuh`, then `kernels/finance_qmc.cu`).
pub const FINANCE_QMC: Module = Module {
    name: "finance_qmc",
    options: &[],
    source: concat!(
        include_str!("../../kernels/finance.cuh"),
        include_str!("../../kernels/finance_qmc.cu")
    ),
};

/// Monte Carlo under Heston: Andersen's QE paths, Philox, bitwise the CPU engine's
/// (`kernels/finance.cuh`, then `kernels/heston.cu`).
pub const HESTON: Module = Module {
    name: "heston",
    options: &[],
    source: concat!(
        include_str!("../../kernels/finance.cuh"),
        include_str!("../../kernels/heston.cu")
    ),
};

/// Basket options by Monte Carlo: N correlated assets, one step, Philox, bitwise the CPU
/// engine's (`kernels/finance.cuh`, then `kernels/basket.cu`).
pub const BASKET: Module = Module {
    name: "basket",
    options: &[],
    source: concat!(
        include_str!("../../kernels/finance.cuh"),
        include_str!("../../kernels/basket.cu")
    ),
};

/// Longstaff-Schwartz American options: path matrix, per-block regression sums, exercise
/// and final sums, and the barrier options' knock dates and cash flows
/// (`kernels/finance.cuh`, then `kernels/american.cu` and `kernels/american_barrier.cu`).
pub const AMERICAN: Module = Module {
    name: "american",
    options: &[],
    source: concat!(
        include_str!("../../kernels/finance.cuh"),
        include_str!("../../kernels/american.cu"),
        include_str!("../../kernels/american_barrier.cu")
    ),
};

/// kiln's bf16 tensor-core GEMM for Hopper: TMA, wgmma, warp specialisation, persistent
/// tiles (`kernels/gemm_wgmma.cuh`, then `kernels/gemm_wgmma.cu`: the default kernels and the
/// fp8 ones). Compiled for `sm_90a` only ([`crate::gemm_wgmma`]), so it is not in the kernel
/// table every architecture compiles.
pub const GEMM_WGMMA: Module = Module {
    name: "gemm_wgmma",
    options: &[],
    source: concat!(
        include_str!("../../kernels/gemm_wgmma.cuh"),
        include_str!("../../kernels/gemm_wgmma.cu")
    ),
};

/// The variants of the wgmma GEMM the benchmark compares with the default
/// (`kernels/gemm_wgmma.cuh`, then `kernels/gemm_wgmma_variants.cu`): a module of their own,
/// so the default's first use does not compile them. `sm_90a` only, like [`GEMM_WGMMA`].
pub const GEMM_WGMMA_VARIANTS: Module = Module {
    name: "gemm_wgmma_variants",
    options: &[],
    source: concat!(
        include_str!("../../kernels/gemm_wgmma.cuh"),
        include_str!("../../kernels/gemm_wgmma_variants.cu")
    ),
};

/// Element-wise maps and axpy on f32 / f16 / bf16 storage (16-byte vector accesses).
pub const MAP: Module = Module {
    name: "map",
    options: &[],
    source: include_str!("../../kernels/map.cu"),
};

/// Shared-memory tiled 2-D transposes by bit width (32-bit, 16-bit).
pub const TRANSPOSE: Module = Module {
    name: "transpose",
    options: &[],
    source: include_str!("../../kernels/transpose.cu"),
};

/// Direct 2-D correlation: the shared-memory tile kernels and the 3×3 register kernels
/// (`kernels/imaging.cuh`, then `kernels/filter2d.cu`).
pub const FILTER2D: Module = Module {
    name: "filter2d",
    options: &[],
    source: concat!(
        include_str!("../../kernels/imaging.cuh"),
        include_str!("../../kernels/filter2d.cu")
    ),
};

/// The separable path: 1-D passes along any axis and the fused 2-D pair
/// (`kernels/imaging.cuh`, then `kernels/separable.cu`).
pub const SEPARABLE: Module = Module {
    name: "separable",
    options: &[],
    source: concat!(
        include_str!("../../kernels/imaging.cuh"),
        include_str!("../../kernels/separable.cu")
    ),
};

/// Direct 3-D correlation: the register-prefetch kernels and the cp.async z-march
/// (`kernels/imaging.cuh`, then `kernels/filter3d.cu`).
pub const FILTER3D: Module = Module {
    name: "filter3d",
    options: &[],
    source: concat!(
        include_str!("../../kernels/imaging.cuh"),
        include_str!("../../kernels/filter3d.cu")
    ),
};

/// scipy.ndimage's linear filters in general form: 1-D passes and direct correlation of any
/// size and anchor (weights in a device buffer), and the element-wise combination of terms
/// (`kernels/imaging.cuh`, then `kernels/ndimage.cu`).
pub const NDIMAGE: Module = Module {
    name: "ndimage",
    options: &[],
    source: concat!(
        include_str!("../../kernels/imaging.cuh"),
        include_str!("../../kernels/ndimage.cu")
    ),
};

/// GEMM on f32: kiln's tiled SIMT kernel (float4 and scalar-load kernels per transpose
/// pair) and the seed's naive one-thread-per-element baseline.
pub const GEMM: Module = Module {
    name: "gemm",
    options: &[],
    source: include_str!("../../kernels/gemm.cu"),
};

/// Element type conversion (`kernels/cast.cu`).
pub const CAST: Module = Module {
    name: "cast",
    options: &[],
    source: include_str!("../../kernels/cast.cu"),
};

/// Fault injection (`kernels/fault.cu`): launched only on request.
pub const FAULT: Module = Module {
    name: "fault",
    options: &[],
    source: include_str!("../../kernels/fault.cu"),
};

/// Rank filters and grey morphology (`kernels/imaging.cuh`, then `kernels/rank.cu`).
pub const RANK: Module = Module {
    name: "rank",
    options: &[],
    source: concat!(
        include_str!("../../kernels/imaging.cuh"),
        include_str!("../../kernels/rank.cu"),
        include_str!("../../kernels/rank_med_net.cuh"),
        include_str!("../../kernels/rank_med.cu")
    ),
};

/// Binary morphology (`kernels/morph.cu`).
pub const MORPH: Module = Module {
    name: "morph",
    options: &[],
    source: include_str!("../../kernels/morph.cu"),
};

/// Connected-component labelling, scipy.ndimage.label's numbering (`kernels/label.cu`).
pub const LABEL: Module = Module {
    name: "label",
    options: &[],
    source: include_str!("../../kernels/label.cu"),
};

/// scipy.ndimage.distance_transform_edt's feature transform and distances
/// (`kernels/distance.cu`); `--fmad=false`, so its f64 arithmetic is kiln-core's `edt`
/// operation for operation.
pub const DISTANCE: Module = Module {
    name: "distance",
    options: &["--fmad=false"],
    source: include_str!("../../kernels/distance.cu"),
};

/// Implied volatility of a book of European quotes: Jäckel's "Let's Be Rational" as
/// kiln-core ports it (`kernels/implied_vol.cuh`), run one thread per quote or grouped by
/// the solver's way through it (`kernels/implied_vol.cu`); `--fmad=false`, so its f64
/// arithmetic is the CPU solver's operation for operation.
pub const IMPLIED_VOL: Module = Module {
    name: "implied_vol",
    options: &["--fmad=false"],
    source: concat!(
        include_str!("../../kernels/implied_vol.cuh"),
        include_str!("../../kernels/implied_vol.cu")
    ),
};

/// Portfolio risk by full revaluation: the P&L of a book of European Black-Scholes options
/// under every scenario, a block per scenario (`kernels/risk.cu`); `--fmad=false`, so its f64
/// arithmetic is kiln-core's `bsm` operation for operation.
pub const RISK: Module = Module {
    name: "risk",
    options: &["--fmad=false"],
    source: include_str!("../../kernels/risk.cu"),
};

/// scipy.ndimage's interpolation as kiln-core computes it (`kernels/interp.cu`): resampling
/// (zoom / shift, affine_transform, map_coordinates), one thread per output point, and the
/// spline prefilter, one thread per line; `--fmad=false`, so its f64 arithmetic is the CPU
/// loops' operation for operation and each output is the CPU's to the bit.
pub const INTERP: Module = Module {
    name: "interp",
    options: &["--fmad=false"],
    source: include_str!("../../kernels/interp.cu"),
};

/// Every module (the compile test and `examples/ptxas_info.rs` compile them whole).
pub const MODULES: &[Module] = &[
    MAP,
    TRANSPOSE,
    FILTER2D,
    SEPARABLE,
    FILTER3D,
    NDIMAGE,
    FINANCE,
    FINANCE_QMC,
    HESTON,
    BASKET,
    AMERICAN,
    GEMM,
    CAST,
    FAULT,
    RANK,
    MORPH,
    LABEL,
    DISTANCE,
    IMPLIED_VOL,
    RISK,
    INTERP,
];
