//! A 3×3×3 volume correlation (`kernels/conv3x3x3.cu`): a 3-D grid with one thread per
//! voxel, the boundary clamped per axis, and the weight layout (`weights[dz][dy][dx]`) that
//! kiln's `filter3d` and scipy's `correlate` use.

use kiln::{Arg, Result, Runtime};

/// The kernel's source.
pub const SOURCE: &str = include_str!("../kernels/conv3x3x3.cu");

/// The kernel's block: 32 threads along x (a warp reads one row), 4 rows, 2 planes.
const BLOCK: (u32, u32, u32) = (32, 4, 2);

/// Correlates the row-major `d`×`h`×`w` float32 `volume` with the row-major 3×3×3
/// `weights` under mode `nearest` on `rt`'s GPU; returns the filtered volume.
pub fn conv3x3x3(
    rt: &Runtime,
    volume: &[f32],
    [d, h, w]: [usize; 3],
    weights: &[f32; 27],
) -> Result<Vec<f32>> {
    let kernel = rt.raw_kernel(SOURCE, "conv3x3x3", &[])?;
    let input = rt.tensor(volume, &[d, h, w])?;
    let wts = rt.tensor(weights, &[3, 3, 3])?;
    let out = rt.tensor(&vec![f32::NAN; d * h * w], &[d, h, w])?; // poisoned
    let side = |x: usize| {
        i32::try_from(x).map_err(|_| kiln::Error::invalid("conv3x3x3", format!("{x} does not fit an int")))
    };
    let grid = (
        w.div_ceil(BLOCK.0 as usize) as u32,
        h.div_ceil(BLOCK.1 as usize) as u32,
        d.div_ceil(BLOCK.2 as usize) as u32,
    );
    kernel.launch(
        grid,
        BLOCK,
        0,
        &[
            Arg::from(&input),
            Arg::from(&out),
            Arg::from(&wts),
            side(d)?.into(),
            side(h)?.into(),
            side(w)?.into(),
        ],
    )?;
    out.to_vec::<f32>()
}
