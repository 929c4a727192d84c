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

mod elementwise;
mod finance;
mod gemm;
mod imaging;
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

const FAMILIES: [&[Kernel]; 5] = [
    elementwise::FAMILY,
    imaging::FAMILY,
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
/// compile time, so `Kernel::ALL` stays a `&'static [Kernel]`).
pub(super) const ALL: [Kernel; COUNT] = {
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
