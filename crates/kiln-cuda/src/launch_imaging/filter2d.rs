//! The direct 2-D launcher: the 3×3 register kernels and the shared-memory tile kernels.

use super::{check_shape, grid, mode_args, w32, BLOCK, W1, W2};
use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::imaging::{BoundaryMode, Kernel2D};
use kiln_core::{Error, Result};

/// Direct 2-D correlation of `n` contiguous `(h, w)` planes (`shape = [n, h, w]`).
///
/// Launch: k = 3 runs `filter2d_k3r8_f32` (registers only, no shared memory: block
/// 32×4, each warp an 8-row strip of a 128-wide tile, each lane 4 adjacent columns;
/// grid `(ceil(w/128), min(ceil(h/32), 65535), min(n, 65535))`), or on images whose
/// k3r8 grid is under two waves `filter2d_k3r4_f32` (4-row strips, grid y
/// `ceil(h/16)`; see [`Filter2d::k3_choice`]). Other sizes run
/// `filter2d_k{5,7}_f32` (unrolled, weights as FFMA constant operands) or
/// `filter2d_kn_f32` (any odd k <= 31); block 32×8, each thread 8 vertically adjacent
/// outputs of a 32×64 tile; grid `(ceil(w/32), min(ceil(h/64), 65535), min(n, 65535))`
/// with grid-stride loops in y and z; dynamic shared memory `(32+2r)·(64+2r)` floats
/// (at most 23 KiB at k = 31).
pub struct Filter2d<'a> {
    /// The input, `n * h * w` f32.
    pub src: &'a DeviceBuffer<f32>,
    /// The output, as many f32, distinct from the input.
    pub dst: &'a mut DeviceBuffer<f32>,
    /// `[n, h, w]`: `n` planes of `h × w`.
    pub shape: [usize; 3],
    /// The kernel, odd size at most 31.
    pub kernel: &'a Kernel2D,
    /// The boundary mode.
    pub mode: BoundaryMode,
}

impl Op for Filter2d<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Filter2d {
            src,
            dst,
            shape,
            kernel,
            mode,
        } = self;
        check_shape("filter2d", shape, src.len(), dst.len())?;
        let k = kernel.size();
        if k % 2 == 0 || k > 31 {
            return Err(Error::invalid(
                "filter2d",
                format!("kernel size {k} must be odd and <= 31"),
            ));
        }
        let [n, h, wd] = shape;
        let (mc, cval) = mode_args(mode);
        let (ni, hi, wi, ki) = (n as i32, h as i32, wd as i32, k as i32);
        if k == 3 {
            let (id, rows) = Filter2d::k3_choice(cuda, n, h, wd)?;
            let mut w = W1([0.0; 32]);
            for (d, &s) in w.0.iter_mut().zip(kernel.weights()) {
                *d = w32(s);
            }
            let cfg = LaunchConfig {
                grid_dim: (wd.div_ceil(128) as u32, grid(h.div_ceil(4 * rows)), grid(n)),
                block_dim: (32, 4, 1),
                shared_mem_bytes: 0,
            };
            // Sizes: both buffers hold exactly n*h*w f32 (checked) and are distinct; the
            // kernel writes only y < h, x < w and reads only mapped in-range indices (float4
            // accesses only where w % 4 == 0, the 128-column tile lies inside the row and
            // both pointers are 16-byte aligned, checked in the kernel); h*w < 2^31
            // (checked) so its int offsets do not overflow.
            let args = [
                Arg::buf(src),
                Arg::buf(dst),
                ni.into(),
                hi.into(),
                wi.into(),
                Arg::by_value(&w),
                mc.into(),
                cval.into(),
            ];
            return cuda.launch(id, cfg, &args);
        }
        let mut w = W2([0.0; 961]);
        for (d, &s) in w.0.iter_mut().zip(kernel.weights()) {
            *d = w32(s);
        }
        let id = match k {
            5 => Kernel::FILTER2D_K5_F32,
            7 => Kernel::FILTER2D_K7_F32,
            _ => Kernel::FILTER2D_KN_F32,
        };
        let r = k / 2;
        let cfg = LaunchConfig {
            grid_dim: (wd.div_ceil(32) as u32, grid(h.div_ceil(64)), grid(n)),
            block_dim: BLOCK,
            shared_mem_bytes: ((32 + 2 * r) * (64 + 2 * r) * 4) as u32,
        };
        // Sizes: both buffers hold exactly n*h*w f32 (checked), every index the kernel
        // forms is inside them (outputs guarded by y < h, x < w; inputs mapped into range
        // or replaced by cval), every axis fits i32, and the shared size matches the
        // kernel's (32+2r)(64+2r) tile.
        let args = [
            Arg::buf(src),
            Arg::buf(dst),
            ni.into(),
            hi.into(),
            wi.into(),
            Arg::by_value(&w),
            ki.into(),
            mc.into(),
            cval.into(),
        ];
        cuda.launch(id, cfg, &args)
    }
}

impl Filter2d<'_> {
    /// The 3×3 register kernel `auto` runs on `n` planes of `h × w` (and its rows a
    /// thread): `filter2d_k3r8_f32`
    /// unless its grid covers fewer than two waves of resident blocks (the occupancy API's
    /// blocks per SM × SMs), then `filter2d_k3r4_f32`, whose blocks are half as tall and
    /// fit 6 an SM to k3r8's 4 (80 against 128 registers), so a small image still fills
    /// every SM. Measured on the H200 (2026-12-02, cross4 reflect): 1080×1920 gives k3r8 510
    /// blocks for 528 resident (under one wave) at 14.8 µs, k3r4 12.2 µs; 16384² gives k3r8
    /// 65,536 blocks (124 waves) at 0.555 ms, k3r4 0.596 ms. The two-wave line between
    /// them is a rule, not a measured crossover.
    ///
    /// Both kernels are loaded at once (a cold start compiles them side by side).
    pub fn k3_choice(cuda: &CudaBackend, n: usize, h: usize, w: usize) -> Result<(Kernel, usize)> {
        cuda.prepare(&[Kernel::FILTER2D_K3R8_F32, Kernel::FILTER2D_K3R4_F32])?;
        let sms = (cuda.info().desc.multiprocessors as usize).max(1);
        let resident = cuda.resident_blocks_per_sm(Kernel::FILTER2D_K3R8_F32, 128)? as usize * sms;
        let blocks = w.div_ceil(128) * grid(h.div_ceil(32)) as usize * grid(n) as usize;
        Ok(if blocks < 2 * resident {
            (Kernel::FILTER2D_K3R4_F32, 4)
        } else {
            (Kernel::FILTER2D_K3R8_F32, 8)
        })
    }
}
