//! A 3×3 image filter with a shared-memory tile and halo (`kernels/filter3x3_shared.cu`):
//! the cooperative load, the barrier before the bounds check, a boundary mode written as
//! two clamps, and scipy's correlation semantics (what kiln's `filter2d` computes with
//! `BoundaryMode::Nearest`).

use kiln::{Arg, Result, Runtime};

/// The kernel's source.
pub const SOURCE: &str = include_str!("../kernels/filter3x3_shared.cu");

/// The kernel's tile side (its `TILE`): a block of 16×16 threads per 16×16 output patch.
const TILE: u32 = 16;

/// Correlates the row-major `h`×`w` float32 `image` with the row-major 3×3 `weights` under
/// mode `nearest` on `rt`'s GPU; returns the filtered image (`h`×`w`).
pub fn filter3x3(rt: &Runtime, image: &[f32], h: usize, w: usize, weights: &[f32; 9]) -> Result<Vec<f32>> {
    let kernel = rt.raw_kernel(SOURCE, "filter3x3_shared", &[])?;
    let input = rt.tensor(image, &[h, w])?;
    let wts = rt.tensor(weights, &[3, 3])?;
    let out = rt.tensor(&vec![f32::NAN; h * w], &[h, w])?; // poisoned
    let side = |x: usize| {
        i32::try_from(x)
            .map_err(|_| kiln::Error::invalid("filter3x3_shared", format!("{x} does not fit an int")))
    };
    let grid = (
        w.div_ceil(TILE as usize) as u32,
        h.div_ceil(TILE as usize) as u32,
        1,
    );
    kernel.launch(
        grid,
        (TILE, TILE, 1),
        0, // the tile is static shared memory, declared in the kernel
        &[
            Arg::from(&input),
            Arg::from(&out),
            Arg::from(&wts),
            side(h)?.into(),
            side(w)?.into(),
        ],
    )?;
    out.to_vec::<f32>()
}
