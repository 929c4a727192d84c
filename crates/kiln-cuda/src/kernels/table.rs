//! The declarations behind [`Kernel::ALL`](super::Kernel::ALL): one file per family, each a
//! `declare_kernels!` list, and the launch-shape pieces several families share.

use super::Kernel;

/// Declares a family's kernels: each entry becomes an associated constant of [`Kernel`]
/// (with the entry's doc comment), and the family's slice (`FAMILY`) lists them in order.
macro_rules! declare_kernels {
    ($family:ident: $( $(#[$attr:meta])* $name:ident { $($field:ident: $value:expr),* $(,)? } )*) => {
        impl $crate::kernels::Kernel {
            $(
                $(#[$attr])*
                pub const $name: $crate::kernels::Kernel = $crate::kernels::Kernel { $($field: $value),* };
            )*
        }

        /// The family's kernels, in declaration order.
        pub(super) const $family: &[$crate::kernels::Kernel] = &[$($crate::kernels::Kernel::$name),*];
    };
}

use super::params::decl::*;
use super::KernelParam;

/// `map_f32`: `(const float* x, float* y, u64 n, unsigned op, float a, float b)`.
const MAP_F32_P: &[KernelParam] = &[input(F32), output(F32), val(U64), val(U32), val(F32), val(F32)];
/// `map_f16`, `map_bf16`: halves as their 16-bit patterns.
const MAP_B16_P: &[KernelParam] = &[input(U16), output(U16), val(U64), val(U32), val(F32), val(F32)];
/// `axpy_f32`: `(const float* x, float* y, u64 n, float a)`.
const AXPY_F32_P: &[KernelParam] = &[input(F32), inout(F32), val(U64), val(F32)];
/// `axpy_f16`, `axpy_bf16`: halves as their 16-bit patterns.
const AXPY_B16_P: &[KernelParam] = &[input(U16), inout(U16), val(U64), val(F32)];
/// The Philox block kernels: parameter rows, option count, block range, samples, keys,
/// antithetic flag, per-item sums.
const MC_P: &[KernelParam] = &[
    input(U32),
    input(F64),
    val(U32),
    val(U64),
    val(U64),
    val(U64),
    KEYS,
    val(U32),
    output(F64),
];
/// The Sobol block kernels: as the Philox ones with the plan (direction numbers, shifts,
/// bridge nodes and weights, dims, points) in place of the keys.
const QMC_P: &[KernelParam] = &[
    input(U32),
    input(F64),
    val(U32),
    val(U64),
    val(U64),
    val(U64),
    input(U32),
    input(U32),
    input(U32),
    input(F32),
    val(U32),
    val(U64),
    val(U32),
    output(F64),
];
/// gemm.cu's `KILN_GEMM_ARGS`: A, B, C, M, N, K, lda, ldb, ldc, sA, sB, sC, batch, ta, tb.
const GEMM_P: &[KernelParam] = &[
    input(F32),
    input(F32),
    output(F32),
    val(I32),
    val(I32),
    val(I32),
    val(I64),
    val(I64),
    val(I64),
    val(I64),
    val(I64),
    val(I64),
    val(I32),
    val(I32),
    val(I32),
];
/// The direct 2-D tile kernels: `(src, dst, N, H, W, W2 wt, k, mode, cval)`.
const F2D_P: &[KernelParam] = &[
    input(F32),
    output(F32),
    val(I32),
    val(I32),
    val(I32),
    W2,
    val(I32),
    val(I32),
    val(F32),
];
/// The 3×3 register kernels: `(src, dst, N, H, W, W1 wt, mode, cval)`.
const F2D_K3_P: &[KernelParam] = &[
    input(F32),
    output(F32),
    val(I32),
    val(I32),
    val(I32),
    W1,
    val(I32),
    val(F32),
];
/// The direct 3-D kernels: `(src, dst, D, H, W, W3 wt, mode, cval, zc)`.
const F3D_P: &[KernelParam] = &[
    input(F32),
    output(F32),
    val(I32),
    val(I32),
    val(I32),
    W3,
    val(I32),
    val(F32),
    val(I32),
];
/// The fused separable pair: `(src, dst, N, H, W, W1 w1, W1 w2, mode, cval)`.
const SEP2D_P: &[KernelParam] = &[
    input(F32),
    output(F32),
    val(I32),
    val(I32),
    val(I32),
    W1,
    W1,
    val(I32),
    val(F32),
];
/// The rank networks and medians: `(src, dst, RankWin w, NetOffs o)`.
const RANK_NET_P: &[KernelParam] = &[INPUT_ANY, OUTPUT_ANY, RANK_WIN, NET_OFFS];

mod elementwise;
mod finance;
mod gemm;
mod imaging;
mod interp;
mod rank;

/// 256 threads in x.
const B256: [u32; 3] = [256, 1, 1];
/// A 32x8 tile.
const B32X8: [u32; 3] = [32, 8, 1];
const MAP_GRID: &str =
    "ceil(n / (V*256*2)) blocks, each thread one step of two 16-byte vectors (V = 4 f32 or 8 halves)";
const EW_GRID: &str =
    "min(ceil(n / (V*256*2)), resident blocks/SM, at most 8) blocks, grid-stride over 16-byte vectors (V = 4 f32 or 8 halves)";
const GEMM_GRID: &str =
    "(ceil(N/128), min(ceil(M/128), 65535), min(batch, 65535)), grid-stride over row tiles and batches";
const MC_GRID: &str = "ceil(items / 8) blocks, a warp per (option, 1024-sample block); chunked launches";
const QMC_GRID: &str =
    "items blocks, a block of 256 threads per (option, 1024-sample block); chunked launches";

/// Dynamic shared memory of filter2d's direct path: `(32+2r)·(64+2r)` floats.
const fn f2d_smem(k: u32) -> u32 {
    let r = k / 2;
    (32 + 2 * r) * (64 + 2 * r) * 4
}

const FAMILIES: [&[Kernel]; 6] = [
    elementwise::FAMILY,
    imaging::FAMILY,
    interp::FAMILY,
    finance::FAMILY,
    gemm::FAMILY,
    rank::FAMILY,
];

const COUNT: usize = {
    let (mut n, mut i) = (0, 0);
    while i < FAMILIES.len() {
        n += FAMILIES[i].len();
        i += 1;
    }
    n
};

/// Every family's kernels, one after another (a const concatenation: the list is built at
/// compile time, so `Kernel::ALL` stays a `&'static [Kernel]`; a static, not a const: the
/// array is too large to be copied into each use).
pub(super) static ALL: [Kernel; COUNT] = {
    let mut out = [FAMILIES[0][0]; COUNT];
    let (mut f, mut o) = (0, 0);
    while f < FAMILIES.len() {
        let mut i = 0;
        while i < FAMILIES[f].len() {
            out[o] = FAMILIES[f][i];
            o += 1;
            i += 1;
        }
        f += 1;
    }
    out
};
