//! Launchers for `kernels/imaging.cu` (filter2d, separable passes, filter3d) and
//! `kernels/transpose.cu`. Every launcher validates lengths, shapes and the index ranges
//! the kernels assume (32-bit axis indices, `H*W < 2^31`, grid limits) and returns
//! `InvalidArgument` instead of launching out of bounds. Launch shapes are documented at
//! the top of each `.cu` file and at each function here.
//!
//! Path selection is the caller's (the facade resolves it with
//! `kiln_cpu::imaging::path_2d` / `path_3d`, so CPU and GPU always take the same path):
//! `sep = Some(..)` runs the 1-D passes in the factor's `pass_order`, each rounded to an
//! f32 buffer as the CPU does, `None` runs the direct sum.
#![allow(unsafe_code)]

use crate::kernels::KernelId;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use kiln_core::backend::Element;
use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D, Separable};
use kiln_core::{Error, Result};

/// 2-D weights by value (the kernel-parameter constant bank): up to 31×31.
#[repr(C)]
#[derive(Clone, Copy)]
struct W2([f32; 961]);
/// 1-D weights by value: up to 31 taps.
#[repr(C)]
#[derive(Clone, Copy)]
struct W1([f32; 32]);
/// 3-D weights by value: up to 7×7×7.
#[repr(C)]
#[derive(Clone, Copy)]
struct W3([f32; 343]);

// SAFETY: plain `#[repr(C)]` arrays of f32 with the layout of the CUDA structs `W2`, `W1`
// and `W3` in imaging.cu (float arrays of the same length, 4-byte aligned).
unsafe impl DeviceRepr for W2 {}
// SAFETY: as above.
unsafe impl DeviceRepr for W1 {}
// SAFETY: as above.
unsafe impl DeviceRepr for W3 {}

/// One launch of the separable path.
enum Stage<'a> {
    /// A 1-D pass along an array axis.
    Pass(usize, &'a [f64]),
    /// Passes along axes 1 and 2 fused (`true`: axis 1 first), first and second weights.
    Fused(bool, &'a [f64], &'a [f64]),
}

/// Largest axis length the kernels index with 32-bit ints (leaves room for the halo).
const MAX_AXIS: usize = (i32::MAX as usize) - 64;
/// CUDA's limit on grid y and z.
const MAX_GRID_YZ: usize = 65535;
const BLOCK: (u32, u32, u32) = (32, 8, 1);

/// The mode code imaging.cu's `kiln_map` switches on, and the cval.
fn mode_args(mode: BoundaryMode) -> (i32, f32) {
    match mode {
        BoundaryMode::Constant(c) => (0, c as f32),
        BoundaryMode::Nearest => (1, 0.0),
        BoundaryMode::Reflect => (2, 0.0),
        BoundaryMode::Mirror => (3, 0.0),
        BoundaryMode::Wrap => (4, 0.0),
    }
}

/// A weight as the GPU uses it: `f32`, and 0 where the CPU drops the tap (`|w| <= DBL_EPSILON`).
fn w32(w: f64) -> f32 {
    if w.abs() <= f64::EPSILON {
        0.0
    } else {
        w as f32
    }
}

/// Checks a contiguous `(d, h, w)` shape against both buffers and the kernels' index ranges.
fn check_shape(op: &str, shape: [usize; 3], src: usize, dst: usize) -> Result<()> {
    if shape.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("the input is empty (shape {shape:?})"),
        ));
    }
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let Some(n) = n else {
        return Err(Error::invalid(op, format!("shape {shape:?} overflows")));
    };
    for (what, len) in [("input", src), ("output", dst)] {
        if len != n {
            return Err(Error::ShapeMismatch {
                op: format!("{op} {what} length"),
                expected: vec![n],
                got: vec![len],
            });
        }
    }
    if shape.iter().any(|&d| d > MAX_AXIS) || shape[1] * shape[2] > MAX_AXIS || shape[0] * shape[1] > MAX_AXIS
    {
        return Err(Error::invalid(
            op,
            format!("shape {shape:?}: the GPU kernels need every axis, H*W and D*H below 2^31"),
        ));
    }
    Ok(())
}

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

fn grid(n: usize) -> u32 {
    n.clamp(1, MAX_GRID_YZ) as u32
}

impl CudaBackend {
    fn launch_err(&self, k: KernelId, e: cudarc::driver::result::DriverError) -> Error {
        crate::cuda_err(k.symbol(), &format!("cuda:{}", self.info().desc.ordinal), e)
    }

    /// Direct 2-D correlation of `n` contiguous `(h, w)` planes (`shape = [n, h, w]`).
    ///
    /// Launch: k = 3 runs `filter2d_k3r8_f32` (registers only, no shared memory: block
    /// 32×4, each warp an 8-row strip of a 128-wide tile, each lane 4 adjacent columns;
    /// grid `(ceil(w/128), min(ceil(h/32), 65535), min(n, 65535))`), or on images whose
    /// k3r8 grid is under two waves `filter2d_k3r4_f32` (4-row strips, grid y
    /// `ceil(h/16)`; see [`Self::filter2d_k3_choice`]). Other sizes run
    /// `filter2d_k{5,7}_f32` (unrolled, weights as FFMA constant operands) or
    /// `filter2d_kn_f32` (any odd k <= 31); block 32×8, each thread 8 vertically adjacent
    /// outputs of a 32×64 tile; grid `(ceil(w/32), min(ceil(h/64), 65535), min(n, 65535))`
    /// with grid-stride loops in y and z; dynamic shared memory `(32+2r)·(64+2r)` floats
    /// (at most 23 KiB at k = 31).
    pub fn filter2d_direct_device(
        &self,
        src: &DeviceBuffer<f32>,
        dst: &mut DeviceBuffer<f32>,
        shape: [usize; 3],
        kernel: &Kernel2D,
        mode: BoundaryMode,
    ) -> Result<()> {
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
        let (sp, dp) = (src.device_ptr(), dst.device_ptr());
        let (ni, hi, wi, ki) = (n as i32, h as i32, wd as i32, k as i32);
        if k == 3 {
            let (id, rows) = self.filter2d_k3_choice(n, h, wd)?;
            let mut w = W1([0.0; 32]);
            for (d, &s) in w.0.iter_mut().zip(kernel.weights()) {
                *d = w32(s);
            }
            let f = self.function(id)?;
            let cfg = LaunchConfig {
                grid_dim: (wd.div_ceil(128) as u32, grid(h.div_ceil(4 * rows)), grid(n)),
                block_dim: (32, 4, 1),
                shared_mem_bytes: 0,
            };
            let _range = self.range(id.symbol());
            let mut l = self.stream().launch_builder(&f);
            l.arg(&sp)
                .arg(&dp)
                .arg(&ni)
                .arg(&hi)
                .arg(&wi)
                .arg(&w)
                .arg(&mc)
                .arg(&cval);
            // SAFETY: both buffers hold exactly n*h*w f32 (checked) and are distinct; the
            // kernel writes only y < h, x < w and reads only mapped in-range indices (float4
            // accesses only where w % 4 == 0, the 128-column tile lies inside the row and
            // both pointers are 16-byte aligned, checked in the kernel); h*w < 2^31
            // (checked) so its int offsets do not overflow; stream order keeps the buffers
            // alive.
            unsafe { l.launch(cfg) }.map_err(|e| self.launch_err(id, e))?;
            return Ok(());
        }
        let mut w = W2([0.0; 961]);
        for (d, &s) in w.0.iter_mut().zip(kernel.weights()) {
            *d = w32(s);
        }
        let id = match k {
            5 => KernelId::Filter2dK5F32,
            7 => KernelId::Filter2dK7F32,
            _ => KernelId::Filter2dKnF32,
        };
        let f = self.function(id)?;
        let r = k / 2;
        let cfg = LaunchConfig {
            grid_dim: (wd.div_ceil(32) as u32, grid(h.div_ceil(64)), grid(n)),
            block_dim: BLOCK,
            shared_mem_bytes: ((32 + 2 * r) * (64 + 2 * r) * 4) as u32,
        };
        let _range = self.range(id.symbol());
        let mut l = self.stream().launch_builder(&f);
        l.arg(&sp)
            .arg(&dp)
            .arg(&ni)
            .arg(&hi)
            .arg(&wi)
            .arg(&w)
            .arg(&ki)
            .arg(&mc)
            .arg(&cval);
        // SAFETY: both buffers hold exactly n*h*w f32 (checked), every index the kernel
        // forms is inside them (outputs guarded by y < h, x < w; inputs mapped into range
        // or replaced by cval), every axis fits i32, the shared size matches the kernel's
        // (32+2r)(64+2r) tile, and the buffers live in this stream's order.
        unsafe { l.launch(cfg) }.map_err(|e| self.launch_err(id, e))?;
        Ok(())
    }

    /// The 3×3 register kernel `auto` runs on `n` planes of `h × w` (and its rows a
    /// thread): `filter2d_k3r8_f32`
    /// unless its grid covers fewer than two waves of resident blocks (the occupancy API's
    /// blocks per SM × SMs), then `filter2d_k3r4_f32`, whose blocks are half as tall and
    /// fit 6 an SM to k3r8's 4 (80 against 128 registers), so a small image still fills
    /// every SM. Measured on the H200 (2026-12-02, cross4 reflect): 1080×1920 gives k3r8 510
    /// blocks for 528 resident (under one wave) at 14.8 µs, k3r4 12.2 µs; 16384² gives k3r8
    /// 65,536 blocks (124 waves) at 0.555 ms, k3r4 0.596 ms. The two-wave line between
    /// them is a rule, not a measured crossover.
    pub fn filter2d_k3_choice(&self, n: usize, h: usize, w: usize) -> Result<(KernelId, usize)> {
        let sms = (self.info().desc.multiprocessors as usize).max(1);
        let resident = self.resident_blocks_per_sm(KernelId::Filter2dK3r8F32, 128)? as usize * sms;
        let blocks = w.div_ceil(128) * grid(h.div_ceil(32)) as usize * grid(n) as usize;
        Ok(if blocks < 2 * resident {
            (KernelId::Filter2dK3r4F32, 4)
        } else {
            (KernelId::Filter2dK3r8F32, 8)
        })
    }

    /// One 1-D correlation pass along `axis` (0, 1 or 2) of a contiguous `(d, h, w)` array.
    ///
    /// Launch: axis 2 runs `filter1d_x_f32` (block 32×8, a warp per 128-output line
    /// segment, grid `(ceil(w/128), min(ceil(d·h/8), 65535))`, shared `8·(128+2r)` floats);
    /// axes 0 and 1 run `filter1d_s_f32` (block 32 across × 8 along, 4 outputs a thread,
    /// grid `(ceil(A/32), min(ceil(L/32), 65535), min(O, 65535))`, shared `(32+2r)·32`),
    /// with `A` the contiguous extent (`w`, or `h·w` for axis 0).
    pub fn filter1d_device(
        &self,
        src: &DeviceBuffer<f32>,
        dst: &mut DeviceBuffer<f32>,
        shape: [usize; 3],
        axis: usize,
        weights: &[f64],
        mode: BoundaryMode,
    ) -> Result<()> {
        check_shape("filter1d", shape, src.len(), dst.len())?;
        self.filter1d_raw(src.device_ptr(), dst.device_ptr(), shape, axis, weights, mode)
    }

    /// [`Self::filter1d_device`] on pointers whose buffers the caller has checked to hold
    /// `shape`'s elements and to be distinct.
    fn filter1d_raw(
        &self,
        sp: u64,
        dp: u64,
        shape: [usize; 3],
        axis: usize,
        weights: &[f64],
        mode: BoundaryMode,
    ) -> Result<()> {
        let k = weights.len();
        if k % 2 == 0 || k > 31 || axis > 2 {
            return Err(Error::invalid(
                "filter1d",
                format!(
                    "a pass needs an odd kernel of at most 31 taps on axis 0..=2 (got {k} taps, axis {axis})"
                ),
            ));
        }
        let mut w = W1([0.0; 32]);
        for (d, &s) in w.0.iter_mut().zip(weights) {
            *d = s as f32;
        }
        let [d, h, wd] = shape;
        let r = k / 2;
        let (mc, cval) = mode_args(mode);
        let ki = k as i32;
        let id = if axis == 2 {
            KernelId::Filter1dXF32
        } else {
            KernelId::Filter1dStridedF32
        };
        let f = self.function(id)?;
        let _range = self.range(id.symbol());
        let mut l = self.stream().launch_builder(&f);
        let cfg;
        // Arguments must outlive the builder: bind them all here.
        let lines = (d * h) as i32;
        let wi = wd as i32;
        let (len, sa, a, o, so) = match axis {
            0 => (d as i32, (h * wd) as i64, (h * wd) as i32, 1i32, 0i64),
            _ => (h as i32, wd as i64, wd as i32, d as i32, (h * wd) as i64),
        };
        if axis == 2 {
            cfg = LaunchConfig {
                grid_dim: (wd.div_ceil(128) as u32, grid((d * h).div_ceil(8)), 1),
                block_dim: BLOCK,
                shared_mem_bytes: (8 * (128 + 2 * r) * 4) as u32,
            };
            l.arg(&sp)
                .arg(&dp)
                .arg(&lines)
                .arg(&wi)
                .arg(&w)
                .arg(&ki)
                .arg(&mc)
                .arg(&cval);
        } else {
            cfg = LaunchConfig {
                grid_dim: (
                    (a as usize).div_ceil(32) as u32,
                    grid((len as usize).div_ceil(32)),
                    grid(o as usize),
                ),
                block_dim: BLOCK,
                shared_mem_bytes: ((32 + 2 * r) * 32 * 4) as u32,
            };
            l.arg(&sp)
                .arg(&dp)
                .arg(&len)
                .arg(&sa)
                .arg(&a)
                .arg(&o)
                .arg(&so)
                .arg(&w)
                .arg(&ki)
                .arg(&mc)
                .arg(&cval);
        }
        // SAFETY: the caller checked that both pointers are distinct pool buffers of
        // d*h*w f32 alive in stream order; the kernels write only elements with every index
        // in range and read only mapped (in-range) indices; axis extents fit i32 (checked
        // by check_shape); the shared size matches the kernel's tile for radius r.
        unsafe { l.launch(cfg) }.map_err(|e| self.launch_err(id, e))?;
        Ok(())
    }

    /// The separable path: the 1-D passes of `sep` in its `pass_order`, factor axis `a`
    /// running on array axis `a + axis_offset` (1 for a batch of 2-D images, 0 for a
    /// volume), ping-ponging through one f32 temporary so the last pass lands in `dst`.
    ///
    /// Two consecutive passes along axes 1 and 2 (either order) with the same odd length
    /// 3..=17 run as one fused kernel, `sep2d_{vh,hv}_r{1..8}_f32` (the intermediate stays
    /// in shared memory, rounded to f32 exactly as the pass would store it); the others run
    /// one pass each.
    pub fn separable_device(
        &self,
        src: &DeviceBuffer<f32>,
        dst: &mut DeviceBuffer<f32>,
        shape: [usize; 3],
        sep: &Separable,
        axis_offset: usize,
        mode: BoundaryMode,
    ) -> Result<()> {
        check_shape("filter (separable)", shape, src.len(), dst.len())?;
        let passes: Vec<(usize, &[f64])> = sep
            .pass_order
            .iter()
            .map(|&a| (a + axis_offset, sep.factors[a].as_slice()))
            .collect();
        if passes.is_empty() || passes.iter().any(|&(a, _)| a > 2) {
            return Err(Error::invalid(
                "filter (separable)",
                "passes must name axes 0..=2",
            ));
        }
        // Stages: a pair of passes on axes (1, 2) or (2, 1) fused, or one pass.
        let mut stages: Vec<Stage> = Vec::new();
        let mut i = 0;
        while i < passes.len() {
            let (a, w) = passes[i];
            if let Some(&(b, w2)) = passes.get(i + 1) {
                let pair = (a == 1 && b == 2) || (a == 2 && b == 1);
                if pair && w.len() == w2.len() && (3..=17).contains(&w.len()) && w.len() % 2 == 1 {
                    stages.push(Stage::Fused(a == 1, w, w2));
                    i += 2;
                    continue;
                }
            }
            stages.push(Stage::Pass(a, w));
            i += 1;
        }
        let tmp = if stages.len() > 1 {
            Some(self.alloc::<f32>(src.len())?)
        } else {
            None
        };
        let n = stages.len();
        let (s, d) = (src.device_ptr(), dst.device_ptr());
        let t = tmp.as_ref().map_or(0, |t| t.device_ptr());
        for (i, stage) in stages.iter().enumerate() {
            // The stage that ends in dst is every other one counted from the last.
            let to_dst = (n - 1 - i) % 2 == 0;
            let from = if i == 0 {
                s
            } else if to_dst {
                t
            } else {
                d
            };
            let to = if to_dst { d } else { t };
            match *stage {
                Stage::Pass(axis, w) => self.filter1d_raw(from, to, shape, axis, w, mode)?,
                Stage::Fused(vh, w1, w2) => self.sep2d_raw(from, to, shape, vh, w1, w2, mode)?,
            }
        }
        // `tmp` drops here: its block returns to this stream's free list after the passes.
        drop(tmp);
        Ok(())
    }

    /// Both 2-D passes fused (`vh`: along H first, then W), on pointers whose buffers the
    /// caller has checked to hold `shape`'s elements and to be distinct.
    ///
    /// Launch: `sep2d_{vh,hv}_r{R}_f32`, block 32×8, output tile 128×64, grid
    /// `(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535))` with grid-stride loops in y
    /// and z; static shared memory only (at most 41 KiB, R = 8).
    #[allow(clippy::too_many_arguments)]
    fn sep2d_raw(
        &self,
        sp: u64,
        dp: u64,
        shape: [usize; 3],
        vh: bool,
        w1: &[f64],
        w2: &[f64],
        mode: BoundaryMode,
    ) -> Result<()> {
        let k = w1.len();
        let r = k / 2;
        let id = match (vh, r) {
            (true, 1) => KernelId::Sep2dVhR1F32,
            (true, 2) => KernelId::Sep2dVhR2F32,
            (true, 3) => KernelId::Sep2dVhR3F32,
            (true, 4) => KernelId::Sep2dVhR4F32,
            (true, 5) => KernelId::Sep2dVhR5F32,
            (true, 6) => KernelId::Sep2dVhR6F32,
            (true, 7) => KernelId::Sep2dVhR7F32,
            (true, 8) => KernelId::Sep2dVhR8F32,
            (false, 1) => KernelId::Sep2dHvR1F32,
            (false, 2) => KernelId::Sep2dHvR2F32,
            (false, 3) => KernelId::Sep2dHvR3F32,
            (false, 4) => KernelId::Sep2dHvR4F32,
            (false, 5) => KernelId::Sep2dHvR5F32,
            (false, 6) => KernelId::Sep2dHvR6F32,
            (false, 7) => KernelId::Sep2dHvR7F32,
            (false, 8) => KernelId::Sep2dHvR8F32,
            _ => {
                return Err(Error::invalid(
                    "filter (separable)",
                    format!(
                        "the fused kernel takes odd lengths 3..=17 (got {k} and {})",
                        w2.len()
                    ),
                ))
            }
        };
        if w2.len() != k || k % 2 == 0 {
            return Err(Error::invalid(
                "filter (separable)",
                format!(
                    "the fused kernel needs two factors of one odd length (got {k} and {})",
                    w2.len()
                ),
            ));
        }
        let mut a = W1([0.0; 32]);
        let mut b = W1([0.0; 32]);
        for (d, &s) in a.0.iter_mut().zip(w1) {
            *d = s as f32;
        }
        for (d, &s) in b.0.iter_mut().zip(w2) {
            *d = s as f32;
        }
        let [n, h, wd] = shape;
        let f = self.function(id)?;
        let cfg = LaunchConfig {
            grid_dim: (wd.div_ceil(128) as u32, grid(h.div_ceil(64)), grid(n)),
            block_dim: BLOCK,
            shared_mem_bytes: 0,
        };
        let (mc, cval) = mode_args(mode);
        let (ni, hi, wi) = (n as i32, h as i32, wd as i32);
        let _range = self.range(id.symbol());
        let mut l = self.stream().launch_builder(&f);
        l.arg(&sp)
            .arg(&dp)
            .arg(&ni)
            .arg(&hi)
            .arg(&wi)
            .arg(&a)
            .arg(&b)
            .arg(&mc)
            .arg(&cval);
        // SAFETY: the caller checked that both pointers are distinct pool buffers of
        // n*h*w f32 alive in stream order; the kernel writes only y < h, x < w (float4 only
        // where w % 4 == 0 and dst is 16-byte aligned, checked in the kernel), reads only
        // mapped in-range indices, and h*w < 2^31 (check_shape) keeps its int offsets in
        // range.
        unsafe { l.launch(cfg) }.map_err(|e| self.launch_err(id, e))?;
        Ok(())
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
    /// ceil(d/zc))`. `zc` is chosen by [`zchunk`] from the resident blocks per SM so that
    /// the last wave of equal-length blocks is not a sliver (512³, k = 3: 5 chunks of 103
    /// planes, 2 full waves, where the earlier rule `ceil(d·tiles / (4·SMs))` clamped to
    /// 4..=64 gave 3.1).
    pub fn filter3d_direct_device(
        &self,
        src: &DeviceBuffer<f32>,
        dst: &mut DeviceBuffer<f32>,
        shape: [usize; 3],
        kernel: &Kernel3D,
        mode: BoundaryMode,
    ) -> Result<()> {
        self.filter3d_direct_chunked_device(src, dst, shape, kernel, mode, None)
    }

    /// [`Self::filter3d_direct_device`] with `Some(zc)` output planes a block instead of
    /// the wave-balanced choice (`zc = min(zc, d)`, raised where the grid's z would pass
    /// 65535), so tests can place chunk edges: one plane a block, edges inside the volume,
    /// the whole depth in one march. `Some(0)` is an error.
    pub fn filter3d_direct_chunked_device(
        &self,
        src: &DeviceBuffer<f32>,
        dst: &mut DeviceBuffer<f32>,
        shape: [usize; 3],
        kernel: &Kernel3D,
        mode: BoundaryMode,
        planes: Option<usize>,
    ) -> Result<()> {
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
            3 => (KernelId::Filter3dK3F32, 4usize),
            5 => (KernelId::Filter3dZm5F32, 4),
            7 => (KernelId::Filter3dK7F32, 4),
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
        let f = self.function(id)?;
        let bxy = wd.div_ceil(32) * h.div_ceil(th);
        let sms = (self.info().desc.multiprocessors as usize).max(1);
        let zc = if let Some(zc) = planes {
            zc.min(d)
        } else {
            let resident = self.resident_blocks_per_sm(id, 256)? as usize * sms;
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
        let (sp, dp) = (src.device_ptr(), dst.device_ptr());
        let (di, hi, wi, zci) = (d as i32, h as i32, wd as i32, zc as i32);
        let _range = self.range(id.symbol());
        let mut l = self.stream().launch_builder(&f);
        l.arg(&sp)
            .arg(&dp)
            .arg(&di)
            .arg(&hi)
            .arg(&wi)
            .arg(&w)
            .arg(&mc)
            .arg(&cval)
            .arg(&zci);
        // SAFETY: both buffers hold exactly d*h*w f32 (checked) and are distinct; outputs
        // are written only for z < d, y < h, x < w and inputs read only at mapped in-range
        // indices (the zm kernels' 16-byte copies only where w % 4 == 0, the tile's 32
        // columns lie inside the row and src is 16-byte aligned, checked in the kernel);
        // h*w < 2^31 (checked) so the kernel's int plane offsets do not overflow; grid y and
        // z are within 65535 (checked / zc raised); stream order keeps the buffers alive.
        unsafe { l.launch(cfg) }.map_err(|e| self.launch_err(id, e))?;
        Ok(())
    }

    /// `filter2d` of `shape = [n, h, w]` contiguous planes from host memory into `out`:
    /// the separable passes when `sep` is given, the direct sum otherwise.
    pub fn filter2d_host(
        &self,
        src: &[f32],
        shape: [usize; 3],
        kernel: &Kernel2D,
        mode: BoundaryMode,
        sep: Option<&Separable>,
        out: &mut [f32],
    ) -> Result<()> {
        check_shape("filter2d", shape, src.len(), out.len())?;
        let s = self.upload(src)?;
        let mut d = self.alloc_poisoned(src.len())?;
        match sep {
            Some(sep) => self.separable_device(&s, &mut d, shape, sep, 1, mode)?,
            None => self.filter2d_direct_device(&s, &mut d, shape, kernel, mode)?,
        }
        self.download(&d, out)
    }

    /// `filter3d` of a `(d, h, w)` volume from host memory into `out`; see [`Self::filter2d_host`].
    pub fn filter3d_host(
        &self,
        src: &[f32],
        shape: [usize; 3],
        kernel: &Kernel3D,
        mode: BoundaryMode,
        sep: Option<&Separable>,
        out: &mut [f32],
    ) -> Result<()> {
        check_shape("filter3d", shape, src.len(), out.len())?;
        let s = self.upload(src)?;
        let mut d = self.alloc_poisoned(src.len())?;
        match sep {
            Some(sep) => self.separable_device(&s, &mut d, shape, sep, 0, mode)?,
            None => self.filter3d_direct_device(&s, &mut d, shape, kernel, mode)?,
        }
        self.download(&d, out)
    }

    /// Transpose a row-major `rows × cols` matrix of 32- or 16-bit elements into `out`.
    ///
    /// Launch (kernels/transpose.cu): `transpose_b32` (64×64 tiles, 16 elements a thread) /
    /// `transpose_b16` (64×64 tiles moved as 32-bit words; rows and cols even, else
    /// `transpose_h_b16`, 32×32 tiles), block 32×8, grid `(min(ceil(cols/T), 2^31-1),
    /// min(ceil(rows/T), 65535))` for tile size T, with grid-stride loops over tiles.
    pub fn transpose_device<T: Element>(
        &self,
        x: &DeviceBuffer<T>,
        rows: usize,
        cols: usize,
        out: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| Error::invalid("transpose", "rows*cols overflows"))?;
        kiln_core::backend::check_same_len("transpose input", n, x.len())?;
        kiln_core::backend::check_same_len("transpose output", n, out.len())?;
        if n == 0 {
            return Ok(());
        }
        if rows > MAX_AXIS || cols > MAX_AXIS {
            return Err(Error::invalid("transpose", "rows and cols must be below 2^31"));
        }
        let pairs = rows % 2 == 0 && cols % 2 == 0 && x.device_ptr() % 4 == 0 && out.device_ptr() % 4 == 0;
        let id = match std::mem::size_of::<T>() {
            4 => KernelId::TransposeB32,
            2 if pairs => KernelId::TransposeB16,
            2 => KernelId::TransposeHB16,
            b => {
                return Err(Error::invalid(
                    "transpose",
                    format!("{b}-byte elements are not supported"),
                ))
            }
        };
        let f = self.function(id)?;
        let tile = match id {
            KernelId::TransposeB32 | KernelId::TransposeB16 => 64,
            _ => 32,
        };
        let cfg = LaunchConfig {
            grid_dim: (
                cols.div_ceil(tile).min(i32::MAX as usize) as u32,
                grid(rows.div_ceil(tile)),
                1,
            ),
            block_dim: BLOCK,
            shared_mem_bytes: 0,
        };
        let (xp, yp, ri, ci) = (x.device_ptr(), out.device_ptr(), rows as i32, cols as i32);
        let _range = self.range(id.symbol());
        let mut l = self.stream().launch_builder(&f);
        l.arg(&xp).arg(&yp).arg(&ri).arg(&ci);
        // SAFETY: both buffers hold exactly rows*cols elements of the kernel's width
        // (checked), are distinct, and live in stream order; the kernel guards every access
        // with r < rows, c < cols (both fit i32, checked). transpose_b16 reads and writes
        // 32-bit words: it runs only when rows and cols are even (every row starts on a
        // word) and the buffers are pool blocks (512-byte aligned).
        unsafe { l.launch(cfg) }.map_err(|e| self.launch_err(id, e))?;
        Ok(())
    }

    /// Host round trip of [`Self::transpose_device`] (output poisoned with NaN first).
    pub fn transpose_host<T: Element>(&self, x: &[T], rows: usize, cols: usize, out: &mut [T]) -> Result<()> {
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| Error::invalid("transpose", "rows*cols overflows"))?;
        kiln_core::backend::check_same_len("transpose input", n, x.len())?;
        kiln_core::backend::check_same_len("transpose output", n, out.len())?;
        if n == 0 {
            return Ok(());
        }
        let dx = self.upload_slice(x)?;
        let mut dy = self.alloc_poisoned_as::<T>(n)?;
        self.transpose_device(&dx, rows, cols, &mut dy)?;
        dy.copy_to_host(out, self.stream())
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
