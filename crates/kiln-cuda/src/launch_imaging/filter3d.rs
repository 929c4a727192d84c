//! The direct 3-D launcher and its z chunking.

use super::{check_shape, mode_args, w32, BLOCK, MAX_GRID_YZ, W3};
use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::imaging::{BoundaryMode, Kernel3D};
use kiln_core::{Error, Result};

/// The z planes a filter3d block marches over: of the chunkings of `d` planes, the one
/// with the fewest `waves × (zc + 2r)` (waves of `tiles × chunks` equal blocks over
/// `resident` slots, each block reading `zc + 2r` planes), ties to fewer blocks.
fn zchunk(d: usize, tiles: usize, resident: usize, r: usize) -> usize {
    let resident = resident.max(1);
    let mut best = (usize::MAX, d);
    let mut zc = d;
    loop {
        let chunks = d.div_ceil(zc);
        let cost = (tiles * chunks).div_ceil(resident) * (zc + 2 * r);
        if cost < best.0 {
            best = (cost, zc);
        }
        if zc == 1 {
            break;
        }
        // The next smaller zc that changes the chunk count.
        zc = d.div_ceil(chunks + 1).min(zc - 1);
    }
    best.1
}

/// Direct 3-D correlation of a contiguous `(d, h, w)` volume with k = 3, 5 or 7.
///
/// Launch: k = 3 and 7 run `filter3d_k{3,7}_f32` (planes double-buffered through
/// registers, static shared `2·(32+2r)²` floats, at most 11.3 KiB); k = 5 runs
/// `filter3d_zm5_f32` (a ring of input planes in shared memory filled by cp.async, two
/// planes in flight a block). Measured on the H200 (2026-12-02): k = 3 at 512³ ran
/// 0.363 ms on filter3d_k3_f32 against 0.383 for a cp.async z-march with 4 rows a thread
/// and 0.405 with 8, so k = 3 stays on the register-prefetch kernel; k = 5 at 256³ ran
/// 0.111 ms on the z-march against 0.129 for the register-prefetch kernel; k = 7 has no
/// z-marching kernel. Both: block 32×8 owning a 32×32 `(y, x)` tile (4 rows a thread)
/// and marching along z over `zc` output planes; grid `(ceil(w/32), ceil(h/32),
/// ceil(d/zc))`. `zc` is chosen by `zchunk` from the resident blocks per SM so that
/// the last wave of equal-length blocks is not a sliver (512³, k = 3: 5 chunks of 103
/// planes, 2 full waves, where the earlier rule `ceil(d·tiles / (4·SMs))` clamped to
/// 4..=64 gave 3.1).
pub struct Filter3d<'a> {
    /// The input, `d * h * w` f32.
    pub src: &'a DeviceBuffer<f32>,
    /// The output, as many f32, distinct from the input.
    pub dst: &'a mut DeviceBuffer<f32>,
    /// `[d, h, w]`.
    pub shape: [usize; 3],
    /// The kernel, 3, 5 or 7 on a side.
    pub kernel: &'a Kernel3D,
    /// The boundary mode.
    pub mode: BoundaryMode,
    /// `None`: the wave-balanced planes a block. `Some(zc)`: `zc` output planes a block
    /// (`zc = min(zc, d)`, raised where the grid's z would pass 65535), so tests can place
    /// chunk edges: one plane a block, edges inside the volume, the whole depth in one
    /// march. `Some(0)` is an error.
    pub planes: Option<usize>,
}

impl Op for Filter3d<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Filter3d {
            src,
            dst,
            shape,
            kernel,
            mode,
            planes,
        } = self;
        check_shape("filter3d", shape, src.len(), dst.len())?;
        if planes == Some(0) {
            return Err(Error::invalid(
                "filter3d",
                "a block marches over at least one plane",
            ));
        }
        let k = kernel.size();
        // (kernel, rows a thread: the tile is 32 wide and 8 × rows tall)
        let (id, rows) = match k {
            3 => (Kernel::FILTER3D_K3_F32, 4usize),
            5 => (Kernel::FILTER3D_ZM5_F32, 4),
            7 => (Kernel::FILTER3D_K7_F32, 4),
            _ => {
                return Err(Error::invalid(
                    "filter3d",
                    format!("kernel size {k}: the GPU runs 3, 5, 7"),
                ))
            }
        };
        let [d, h, wd] = shape;
        let th = 8 * rows;
        if h.div_ceil(th) > MAX_GRID_YZ {
            return Err(Error::invalid(
                "filter3d",
                format!("h = {h} exceeds the GPU grid (at most {})", MAX_GRID_YZ * th),
            ));
        }
        let mut w = W3([0.0; 343]);
        for (dw, &s) in w.0.iter_mut().zip(kernel.weights()) {
            *dw = w32(s);
        }
        let bxy = wd.div_ceil(32) * h.div_ceil(th);
        let sms = (cuda.info().desc.multiprocessors as usize).max(1);
        let zc = if let Some(zc) = planes {
            zc.min(d)
        } else {
            let resident = cuda.resident_blocks_per_sm(id, 256)? as usize * sms;
            zchunk(d, bxy, resident, k / 2)
        }
        .max(d.div_ceil(MAX_GRID_YZ));
        let cfg = LaunchConfig {
            grid_dim: (
                wd.div_ceil(32) as u32,
                h.div_ceil(th) as u32,
                d.div_ceil(zc) as u32,
            ),
            block_dim: BLOCK,
            shared_mem_bytes: 0,
        };
        let (mc, cval) = mode_args(mode);
        let (di, hi, wi, zci) = (d as i32, h as i32, wd as i32, zc as i32);
        // Sizes: both buffers hold exactly d*h*w f32 (checked) and are distinct; outputs
        // are written only for z < d, y < h, x < w and inputs read only at mapped in-range
        // indices (the zm kernels' 16-byte copies only where w % 4 == 0, the tile's 32
        // columns lie inside the row and src is 16-byte aligned, checked in the kernel);
        // h*w < 2^31 (checked) so the kernel's int plane offsets do not overflow; grid y and
        // z are within 65535 (checked / zc raised).
        let args = [
            Arg::buf(src),
            Arg::buf(dst),
            di.into(),
            hi.into(),
            wi.into(),
            Arg::by_value(&w),
            mc.into(),
            cval.into(),
            zci.into(),
        ];
        cuda.launch(id, cfg, &args)
    }
}

#[cfg(test)]
mod zchunk_tests {
    use super::zchunk;

    #[test]
    fn zchunk_balances_waves() {
        // 512^3 in 32x32 tiles (256 of them), 5 blocks/SM on 132 SMs: 5 chunks of 103
        // planes = 1280 blocks, 2 full waves (the clamp-to-64 rule gave 2048 blocks, 3.1
        // waves).
        assert_eq!(zchunk(512, 256, 660, 1), 103);
        // Everything fits in one wave: one plane a block.
        assert_eq!(zchunk(64, 4, 660, 1), 1);
        assert_eq!(zchunk(1, 1, 660, 3), 1);
        // Every result covers d with chunks that the grid can hold.
        for d in 1..300 {
            for tiles in [1, 7, 256] {
                let zc = zchunk(d, tiles, 528, 2);
                assert!(zc >= 1 && zc <= d, "d {d} tiles {tiles}: zc {zc}");
            }
        }
    }
}
