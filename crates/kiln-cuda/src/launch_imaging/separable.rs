//! The separable path: 1-D passes along any axis and the fused 2-D pair.

use super::{check_shape, grid, mode_args, BLOCK, W1};
use crate::kernels::{Kernel, ScalarType};
use crate::launch::Arg;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::imaging::{BoundaryMode, Separable};
use kiln_core::{Error, Result};

/// One launch of the separable path.
enum Stage<'a> {
    /// A 1-D pass along an array axis.
    Pass(usize, &'a [f64]),
    /// Passes along axes 1 and 2 fused (`true`: axis 1 first), first and second weights.
    Fused(bool, &'a [f64], &'a [f64]),
}

/// The fused 2-D kernel of radius `r` (1..=8), `vh`: along H first.
pub(super) fn sep2d_kernel(vh: bool, r: usize) -> Option<Kernel> {
    use Kernel as K;
    const VH: [Kernel; 8] = [
        K::SEP2D_VH_R1_F32,
        K::SEP2D_VH_R2_F32,
        K::SEP2D_VH_R3_F32,
        K::SEP2D_VH_R4_F32,
        K::SEP2D_VH_R5_F32,
        K::SEP2D_VH_R6_F32,
        K::SEP2D_VH_R7_F32,
        K::SEP2D_VH_R8_F32,
    ];
    const HV: [Kernel; 8] = [
        K::SEP2D_HV_R1_F32,
        K::SEP2D_HV_R2_F32,
        K::SEP2D_HV_R3_F32,
        K::SEP2D_HV_R4_F32,
        K::SEP2D_HV_R5_F32,
        K::SEP2D_HV_R6_F32,
        K::SEP2D_HV_R7_F32,
        K::SEP2D_HV_R8_F32,
    ];
    let table = if vh { &VH } else { &HV };
    r.checked_sub(1).and_then(|i| table.get(i)).copied()
}

/// One 1-D correlation pass along `axis` (0, 1 or 2) of a contiguous `(d, h, w)` array.
///
/// Launch: axis 2 runs `filter1d_x_f32` (block 32×8, a warp per 128-output line
/// segment, grid `(ceil(w/128), min(ceil(d·h/8), 65535))`, shared `8·(128+2r)` floats);
/// axes 0 and 1 run `filter1d_s_f32` (block 32 across × 8 along, 4 outputs a thread,
/// grid `(ceil(A/32), min(ceil(L/32), 65535), min(O, 65535))`, shared `(32+2r)·32`),
/// with `A` the contiguous extent (`w`, or `h·w` for axis 0).
pub struct Filter1d<'a> {
    /// The input, `d * h * w` f32.
    pub src: &'a DeviceBuffer<f32>,
    /// The output, as many f32, distinct from the input.
    pub dst: &'a mut DeviceBuffer<f32>,
    /// `[d, h, w]`.
    pub shape: [usize; 3],
    /// The axis the pass runs along, 0..=2.
    pub axis: usize,
    /// The weights, an odd count of at most 31.
    pub weights: &'a [f64],
    /// The boundary mode.
    pub mode: BoundaryMode,
}

impl Op for Filter1d<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Filter1d {
            src,
            dst,
            shape,
            axis,
            weights,
            mode,
        } = self;
        check_shape("filter1d", shape, src.len(), dst.len())?;
        filter1d_raw(
            cuda,
            src.device_ptr(),
            dst.device_ptr(),
            shape,
            axis,
            weights,
            mode,
        )
    }
}

/// [`Filter1d`] on pointers whose buffers the caller has checked to hold `shape`'s
/// elements and to be distinct.
pub(super) fn filter1d_raw(
    cuda: &CudaBackend,
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
        Kernel::FILTER1D_X_F32
    } else {
        Kernel::FILTER1D_S_F32
    };
    let lines = (d * h) as i32;
    let wi = wd as i32;
    let (len, sa, a, o, so) = match axis {
        0 => (d as i32, (h * wd) as i64, (h * wd) as i32, 1i32, 0i64),
        _ => (h as i32, wd as i64, wd as i32, d as i32, (h * wd) as i64),
    };
    let (src, dst) = (Arg::ptr(sp, ScalarType::F32), Arg::ptr(dp, ScalarType::F32));
    // Sizes: the caller checked that both pointers are distinct pool buffers of d*h*w
    // f32; the kernels write only elements with every index in range and read only
    // mapped (in-range) indices; axis extents fit i32 (checked by check_shape); the
    // shared size matches the kernel's tile for radius r.
    if axis == 2 {
        let cfg = LaunchConfig {
            grid_dim: (wd.div_ceil(128) as u32, grid((d * h).div_ceil(8)), 1),
            block_dim: BLOCK,
            shared_mem_bytes: (8 * (128 + 2 * r) * 4) as u32,
        };
        let args = [
            src,
            dst,
            lines.into(),
            wi.into(),
            Arg::by_value(&w),
            ki.into(),
            mc.into(),
            cval.into(),
        ];
        cuda.launch(id, cfg, &args)
    } else {
        let cfg = LaunchConfig {
            grid_dim: (
                (a as usize).div_ceil(32) as u32,
                grid((len as usize).div_ceil(32)),
                grid(o as usize),
            ),
            block_dim: BLOCK,
            shared_mem_bytes: ((32 + 2 * r) * 32 * 4) as u32,
        };
        let args = [
            src,
            dst,
            len.into(),
            sa.into(),
            a.into(),
            o.into(),
            so.into(),
            Arg::by_value(&w),
            ki.into(),
            mc.into(),
            cval.into(),
        ];
        cuda.launch(id, cfg, &args)
    }
}

/// The separable path: the 1-D passes of `sep` in its `pass_order`, factor axis `a`
/// running on array axis `a + axis_offset` (1 for a batch of 2-D images, 0 for a
/// volume), ping-ponging through one f32 temporary so the last pass lands in `dst`.
///
/// Two consecutive passes along axes 1 and 2 (either order) with the same odd length
/// 3..=17 run as one fused kernel, `sep2d_{vh,hv}_r{1..8}_f32` (the intermediate stays
/// in shared memory, rounded to f32 exactly as the pass would store it); the others run
/// one pass each ([`Filter1d`]'s launch).
pub struct SeparableFilter<'a> {
    /// The input, `d * h * w` f32.
    pub src: &'a DeviceBuffer<f32>,
    /// The output, as many f32, distinct from the input.
    pub dst: &'a mut DeviceBuffer<f32>,
    /// `[d, h, w]`.
    pub shape: [usize; 3],
    /// The factors and their pass order.
    pub sep: &'a Separable,
    /// The array axis of the factors' axis 0.
    pub axis_offset: usize,
    /// The boundary mode.
    pub mode: BoundaryMode,
}

impl Op for SeparableFilter<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let SeparableFilter {
            src,
            dst,
            shape,
            sep,
            axis_offset,
            mode,
        } = self;
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
        // A cold start compiles the stages' kernels at once, not one after another.
        let ids: Vec<Kernel> = stages
            .iter()
            .filter_map(|st| match *st {
                Stage::Pass(2, _) => Some(Kernel::FILTER1D_X_F32),
                Stage::Pass(..) => Some(Kernel::FILTER1D_S_F32),
                Stage::Fused(vh, w, _) => sep2d_kernel(vh, w.len() / 2),
            })
            .collect();
        cuda.prepare(&ids)?;
        let tmp = if stages.len() > 1 {
            Some(cuda.alloc::<f32>(src.len())?)
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
                Stage::Pass(axis, w) => filter1d_raw(cuda, from, to, shape, axis, w, mode)?,
                Stage::Fused(vh, w1, w2) => sep2d_raw(cuda, from, to, shape, vh, w1, w2, mode)?,
            }
        }
        // `tmp` drops here: its block returns to this stream's free list after the passes.
        drop(tmp);
        Ok(())
    }
}

/// Both 2-D passes fused (`vh`: along H first, then W), on pointers whose buffers the
/// caller has checked to hold `shape`'s elements and to be distinct.
///
/// Launch: `sep2d_{vh,hv}_r{R}_f32`, block 32×8, output tile 128×64, grid
/// `(ceil(w/128), min(ceil(h/64), 65535), min(n, 65535))` with grid-stride loops in y
/// and z; static shared memory only (at most 41 KiB, R = 8).
#[allow(clippy::too_many_arguments)]
pub(super) fn sep2d_raw(
    cuda: &CudaBackend,
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
    let id = sep2d_kernel(vh, r).ok_or_else(|| {
        Error::invalid(
            "filter (separable)",
            format!(
                "the fused kernel takes odd lengths 3..=17 (got {k} and {})",
                w2.len()
            ),
        )
    })?;
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
    let cfg = LaunchConfig {
        grid_dim: (wd.div_ceil(128) as u32, grid(h.div_ceil(64)), grid(n)),
        block_dim: BLOCK,
        shared_mem_bytes: 0,
    };
    let (mc, cval) = mode_args(mode);
    let (ni, hi, wi) = (n as i32, h as i32, wd as i32);
    // Sizes: the caller checked that both pointers are distinct pool buffers of n*h*w
    // f32; the kernel writes only y < h, x < w (float4 only where w % 4 == 0 and dst is
    // 16-byte aligned, checked in the kernel), reads only mapped in-range indices, and
    // h*w < 2^31 (check_shape) keeps its int offsets in range.
    let args = [
        Arg::ptr(sp, ScalarType::F32),
        Arg::ptr(dp, ScalarType::F32),
        ni.into(),
        hi.into(),
        wi.into(),
        Arg::by_value(&a),
        Arg::by_value(&b),
        mc.into(),
        cval.into(),
    ];
    cuda.launch(id, cfg, &args)
}
