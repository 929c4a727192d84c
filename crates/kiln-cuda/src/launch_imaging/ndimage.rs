//! The launcher of a [`LinearFilter`] (scipy.ndimage's linear filters, planned by
//! kiln-core): each term runs on the fastest kernel that computes it, the terms are
//! combined by `nd_combine_f32`.
//!
//! - A direct term with a centred odd square kernel over axes 1 and 2 (`1×k×k`, k <= 31)
//!   runs [`Filter2d`] (the 3×3 register kernels, the unrolled 5×5 and 7×7);
//!   a centred cube of side 3, 5 or 7 runs [`Filter3d`]; any other shape and
//!   anchor runs `nd_direct_any`.
//! - A chain of passes: two consecutive passes on axes 1 and 2 with one odd centred length
//!   3..=17 run fused (`sep2d_{vh,hv}_r{R}_f32`), every other pass `nd_pass_{x,s}_any`;
//!   passes ping-pong through f32 temporaries so the last lands in the output.
//! - 8/16-bit data ([`NdimageLinearData`]): a one-term plan on the generic
//!   kernels reads the integers in its first launch and writes them (rounded, clamped) in
//!   its last; any other plan converts on the device at both ends.
//!
//! These sum in f32 with fma. f32 and f64 tensors take the exact path instead
//! (`ndimage_exact`, the CPU's double arithmetic): `CudaStorage::ndimage_linear` routes them
//! there, so [`NdimageLinear`] is the f32 fast path of the benchmarks and direct callers.

use super::{check_shape, grid, mode_args, w32, Filter2d, Filter3d, BLOCK};
use crate::kernels::{Kernel, ScalarType};
use crate::launch::Arg;
use crate::op::Op;
use crate::ops::Cast;
use crate::pool::DeviceBuffer;
use crate::storage::CudaData;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::imaging::linear::{Combine, DirectKernel, LinearFilter, Pass, Term};
use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D};
use kiln_core::{Error, Result};

/// Static shared memory the generic kernels may use (the default 48 KiB limit).
const SHARED_LIMIT: usize = 48 * 1024;

/// One launch of a chain of passes.
enum Stage<'a> {
    Pass(&'a Pass),
    /// Axes 1 and 2 fused (`true`: axis 1 first).
    Fused(bool, &'a Pass, &'a Pass),
}

fn centred(p: &Pass) -> bool {
    p.weights.len() % 2 == 1 && p.anchor == p.weights.len() / 2
}

fn stages(passes: &[Pass]) -> Vec<Stage<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < passes.len() {
        let a = &passes[i];
        if let Some(b) = passes.get(i + 1) {
            let pair = (a.axis == 1 && b.axis == 2) || (a.axis == 2 && b.axis == 1);
            let n = a.weights.len();
            if pair && n == b.weights.len() && (3..=17).contains(&n) && centred(a) && centred(b) {
                out.push(Stage::Fused(a.axis == 1, a, b));
                i += 2;
                continue;
            }
        }
        out.push(Stage::Pass(a));
        i += 1;
    }
    out
}

/// A raw endpoint: a pool buffer's device pointer and its element code (0 f32, 4 u8,
/// 5 u16: kiln's cast codes, which ndimage.cu's dispatch takes).
#[derive(Clone, Copy)]
struct Ep {
    ptr: u64,
    code: i32,
}

impl Ep {
    /// The pointer as a launch argument (the kernels take `void*` and dispatch on `code`).
    fn arg(self) -> Arg<'static> {
        let elem = match self.code {
            4 => ScalarType::U8,
            5 => ScalarType::U16,
            _ => ScalarType::F32,
        };
        Arg::ptr(self.ptr, elem)
    }
}

const F32: i32 = 0;

fn ep_f32(b: &DeviceBuffer<f32>) -> Ep {
    Ep {
        ptr: b.device_ptr(),
        code: F32,
    }
}

fn ep_of(d: &CudaData) -> Option<(Ep, usize)> {
    match d {
        CudaData::F32(b) => Some((ep_f32(b), b.len())),
        CudaData::U8(b) => Some((
            Ep {
                ptr: b.device_ptr(),
                code: 4,
            },
            b.len(),
        )),
        CudaData::U16(b) => Some((
            Ep {
                ptr: b.device_ptr(),
                code: 5,
            },
            b.len(),
        )),
        _ => None,
    }
}

/// Whether a direct kernel runs on the fixed-size fast kernels (f32 only).
fn fast_direct(k: &DirectKernel) -> bool {
    let [kd, kh, kw] = k.shape;
    k.is_centred() && ((kd == 1 && kh == kw && kh <= 31) || (kd == kh && kh == kw && [3, 5, 7].contains(&kd)))
}

/// Where stage `i` (before the last) writes, given the temporaries and the output `d`: an
/// f32 output takes every other stage counted back from the last (as the CPU's ping-pong),
/// an 8/16-bit output none (intermediates stay f32), alternating temporaries.
fn slot(bufs: &[Ep], d: Ep, last: usize, i: usize) -> Ep {
    if d.code == F32 {
        if (last - 1 - i) % 2 == 0 {
            bufs[0]
        } else {
            d
        }
    } else {
        bufs[i % 2]
    }
}

/// Runs the linear filter `f` on the contiguous f32 `(d, h, w)` array `src` into `dst`
/// (see the module docs for the kernels each term takes).
pub struct NdimageLinear<'a> {
    /// The input, `d * h * w` f32.
    pub src: &'a DeviceBuffer<f32>,
    /// The output, as many f32, distinct from the input.
    pub dst: &'a mut DeviceBuffer<f32>,
    /// `[d, h, w]`.
    pub shape: [usize; 3],
    /// The planned filter.
    pub filter: &'a LinearFilter,
}

impl Op for NdimageLinear<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let NdimageLinear {
            src,
            dst,
            shape,
            filter: f,
        } = self;
        check_shape(&f.name, shape, src.len(), dst.len())?;
        f.validate()?;
        nd_f32(cuda, src, dst, shape, f)
    }
}

/// [`NdimageLinear`] on f32, u8 or u16 data, `dst` of the same type as `src` or f32
/// (8/16-bit results rounded half away from zero and clamped, as `cast_any`); see the
/// module docs.
pub struct NdimageLinearData<'a> {
    /// The input, `d * h * w` elements.
    pub src: &'a CudaData,
    /// The output, as many elements of `src`'s type or f32, distinct from the input.
    pub dst: &'a mut CudaData,
    /// `[d, h, w]`.
    pub shape: [usize; 3],
    /// The planned filter.
    pub filter: &'a LinearFilter,
}

impl Op for NdimageLinearData<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let NdimageLinearData {
            src,
            dst,
            shape,
            filter: f,
        } = self;
        let bad = || {
            Error::invalid(
                &f.name,
                "ndimage takes f32, u8 or u16 data, written as itself or f32",
            )
        };
        let (s, sn) = ep_of(src).ok_or_else(bad)?;
        let (d, dn) = ep_of(dst).ok_or_else(bad)?;
        if !(s.code == d.code || d.code == F32) {
            return Err(bad());
        }
        check_shape(&f.name, shape, sn, dn)?;
        f.validate()?;
        if let (CudaData::F32(a), CudaData::F32(b)) = (src, &mut *dst) {
            return nd_f32(cuda, a, b, shape, f);
        }
        if f.combine == Combine::Single && nd_typed(cuda, s, d, shape, &f.terms[0], f)? {
            return Ok(());
        }
        // f32 in between, converted on the device at both ends.
        let staged = match src {
            CudaData::F32(_) => None,
            _ => {
                let t = CudaData::F32(cuda.alloc::<f32>(sn)?);
                cuda.run(Cast { src, dst: &t })?;
                Some(t)
            }
        };
        let x = match (staged.as_ref(), src) {
            (Some(CudaData::F32(b)), _) | (None, CudaData::F32(b)) => b,
            _ => return Err(bad()),
        };
        let mut out = cuda.alloc::<f32>(sn)?;
        nd_f32(cuda, x, &mut out, shape, f)?;
        let out = CudaData::F32(out);
        cuda.run(Cast { src: &out, dst })
    }
}

/// A one-term plan straight from `s` to `d` on the generic kernels; `false` (nothing
/// run) where the term needs a fixed-size f32 kernel.
fn nd_typed(
    cuda: &CudaBackend,
    s: Ep,
    d: Ep,
    shape: [usize; 3],
    term: &Term,
    f: &LinearFilter,
) -> Result<bool> {
    match term {
        Term::Direct(k) if !fast_direct(k) => {
            nd_direct(cuda, s, d, shape, k, f)?;
            Ok(true)
        }
        Term::Passes(p) if !p.is_empty() => {
            let st = stages(p);
            if st.iter().any(|s| matches!(s, Stage::Fused(..))) {
                return Ok(false);
            }
            nd_run_passes(cuda, s, d, shape, &st, f)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Every term in f32, combined into `dst`.
fn nd_f32(
    cuda: &CudaBackend,
    src: &DeviceBuffer<f32>,
    dst: &mut DeviceBuffer<f32>,
    shape: [usize; 3],
    f: &LinearFilter,
) -> Result<()> {
    let Some((first, rest)) = f.terms.split_first() else {
        return Err(Error::invalid(&f.name, "a filter needs at least one term"));
    };
    nd_term(cuda, src, dst, shape, first, f)?;
    if f.combine == Combine::Single {
        return Ok(());
    }
    let n = src.len();
    let dp = dst.device_ptr();
    if f.combine == Combine::Magnitude {
        nd_combine(cuda, dp, dp, n, 0)?;
    }
    let mut tmp = cuda.alloc::<f32>(n)?;
    for term in rest {
        nd_term(cuda, src, &mut tmp, shape, term, f)?;
        let op = if f.combine == Combine::Sum { 1 } else { 2 };
        nd_combine(cuda, dp, tmp.device_ptr(), n, op)?;
    }
    if f.combine == Combine::Magnitude {
        nd_combine(cuda, dp, dp, n, 3)?;
    }
    drop(tmp);
    Ok(())
}

/// One term in f32 from `src` into `out`.
fn nd_term(
    cuda: &CudaBackend,
    src: &DeviceBuffer<f32>,
    out: &mut DeviceBuffer<f32>,
    shape: [usize; 3],
    term: &Term,
    f: &LinearFilter,
) -> Result<()> {
    match term {
        Term::Direct(k) if fast_direct(k) => {
            let [kd, kh, kw] = k.shape;
            if kd == 1 {
                let kern = Kernel2D::new([kh, kw], k.weights.clone())?;
                cuda.run(Filter2d {
                    src,
                    dst: out,
                    shape,
                    kernel: &kern,
                    mode: f.mode,
                })
            } else {
                let kern = Kernel3D::new([kd, kh, kw], k.weights.clone())?;
                cuda.run(Filter3d {
                    src,
                    dst: out,
                    shape,
                    kernel: &kern,
                    mode: f.mode,
                    planes: None,
                })
            }
        }
        Term::Direct(k) => nd_direct(cuda, ep_f32(src), ep_f32(out), shape, k, f),
        Term::Passes(p) if p.is_empty() => cuda.copy_device_any(src, out),
        Term::Passes(p) => nd_run_passes(cuda, ep_f32(src), ep_f32(out), shape, &stages(p), f),
    }
}

/// The stages from `s` to `d` through f32 temporaries: the first stage reads `s`'s
/// type, the last writes `d`'s. Fused stages (f32 only) never touch an 8/16-bit end
/// ([`nd_typed`] sends those plans through f32).
fn nd_run_passes(
    cuda: &CudaBackend,
    s: Ep,
    d: Ep,
    shape: [usize; 3],
    st: &[Stage],
    f: &LinearFilter,
) -> Result<()> {
    let ids: Vec<Kernel> = st
        .iter()
        .filter_map(|s| match s {
            Stage::Pass(p) if p.axis == 2 => Some(Kernel::ND_PASS_X_ANY),
            Stage::Pass(_) => Some(Kernel::ND_PASS_S_ANY),
            Stage::Fused(vh, a, _) => super::separable::sep2d_kernel(*vh, a.weights.len() / 2),
        })
        .collect();
    cuda.prepare(&ids)?;
    let n: usize = shape.iter().product();
    let last = st.len() - 1;
    let tmps = match (last, d.code == F32) {
        (0, _) => 0,
        (_, true) => 1,
        (1, false) => 1,
        _ => 2,
    };
    let t1 = if tmps >= 1 {
        Some(cuda.alloc::<f32>(n)?)
    } else {
        None
    };
    let t2 = if tmps >= 2 {
        Some(cuda.alloc::<f32>(n)?)
    } else {
        None
    };
    let bufs: Vec<Ep> = [&t1, &t2].iter().filter_map(|t| t.as_ref().map(ep_f32)).collect();
    for (i, stage) in st.iter().enumerate() {
        let from = if i == 0 { s } else { slot(&bufs, d, last, i - 1) };
        let to = if i == last { d } else { slot(&bufs, d, last, i) };
        match *stage {
            Stage::Pass(p) => nd_pass(cuda, from, to, shape, p, f.mode, &f.name)?,
            Stage::Fused(vh, a, b) => super::separable::sep2d_raw(
                cuda, from.ptr, to.ptr, shape, vh, &a.weights, &b.weights, f.mode,
            )?,
        }
    }
    // The temporaries' blocks return to this stream's free list after the stages.
    drop((t1, t2));
    Ok(())
}

fn nd_direct(
    cuda: &CudaBackend,
    s: Ep,
    d: Ep,
    shape: [usize; 3],
    k: &DirectKernel,
    f: &LinearFilter,
) -> Result<()> {
    let [kd, kh, kw] = k.shape;
    let smem = (32 + kw - 1) * (32 + kh - 1) * 4;
    if smem > SHARED_LIMIT {
        return Err(Error::invalid(
            &f.name,
            format!(
                "a {kd}x{kh}x{kw} direct kernel needs (31+kw)(31+kh) <= 12288 on the GPU; \
                 split it into 1-D passes or run it on the CPU"
            ),
        ));
    }
    if shape[1].div_ceil(32) > super::MAX_GRID_YZ {
        return Err(Error::invalid(
            &f.name,
            format!(
                "h = {} exceeds the GPU grid (at most {})",
                shape[1],
                super::MAX_GRID_YZ * 32
            ),
        ));
    }
    let w: Vec<f32> = k.weights.iter().map(|&x| w32(x)).collect();
    let wb = cuda.upload(&w)?;
    let id = Kernel::ND_DIRECT_ANY;
    let [d0, h, wd] = shape;
    let cfg = LaunchConfig {
        grid_dim: (wd.div_ceil(32) as u32, h.div_ceil(32) as u32, grid(d0)),
        block_dim: BLOCK,
        shared_mem_bytes: smem as u32,
    };
    let (mc, cval) = mode_args(f.mode);
    let (di, hi, wi) = (d0 as i32, h as i32, wd as i32);
    let (kdi, khi, kwi) = (kd as i32, kh as i32, kw as i32);
    let [ad, ah, aw] = k.anchors.map(|a| a as i32);
    // Sizes: s and d are distinct pool buffers of d*h*w elements of the types their
    // codes name (checked by the callers); the weight buffer holds kd*kh*kw f32; the
    // kernel writes only z < d, y < h, x < w and reads only indices mapped into range
    // (or cval); every axis and h*w fit i32 (check_shape); the shared size is the
    // kernel's tile formula; grid y is at most 65535 (checked).
    let args = [
        s.arg(),
        d.arg(),
        di.into(),
        hi.into(),
        wi.into(),
        Arg::buf(&wb),
        kdi.into(),
        khi.into(),
        kwi.into(),
        ad.into(),
        ah.into(),
        aw.into(),
        mc.into(),
        cval.into(),
        s.code.into(),
        d.code.into(),
    ];
    cuda.launch(id, cfg, &args)?;
    drop(wb);
    Ok(())
}

/// One pass between endpoints the caller has checked to hold `shape`'s elements of
/// their types and to be distinct.
fn nd_pass(
    cuda: &CudaBackend,
    s: Ep,
    d: Ep,
    shape: [usize; 3],
    p: &Pass,
    mode: BoundaryMode,
    op: &str,
) -> Result<()> {
    let k = p.weights.len();
    if p.axis > 2 || k == 0 || p.anchor >= k {
        return Err(Error::invalid(
            op,
            "a pass needs an axis 0..=2 and an anchor inside its kernel",
        ));
    }
    let [d0, h, wd] = shape;
    let (id, smem) = if p.axis == 2 {
        let sl = 256 + k - 1;
        (Kernel::ND_PASS_X_ANY, (8 * (sl + sl / 8 + 1) + k) * 4)
    } else {
        (Kernel::ND_PASS_S_ANY, ((64 + k - 1) * 32 + k) * 4)
    };
    if smem > SHARED_LIMIT {
        return Err(Error::invalid(
            op,
            format!(
                "a {k}-tap pass along axis {} is longer than the GPU kernels take (about 300 taps)",
                p.axis
            ),
        ));
    }
    let w: Vec<f32> = p.weights.iter().map(|&x| x as f32).collect();
    let wb = cuda.upload(&w)?;
    let (mc, cval) = mode_args(mode);
    let (ki, ai) = (k as i32, p.anchor as i32);
    let lines = (d0 * h) as i32;
    let wi = wd as i32;
    let (len, sa, a, o, so) = match p.axis {
        0 => (d0 as i32, (h * wd) as i64, (h * wd) as i32, 1i32, 0i64),
        _ => (h as i32, wd as i64, wd as i32, d0 as i32, (h * wd) as i64),
    };
    let (cfg, mut args) = if p.axis == 2 {
        let cfg = LaunchConfig {
            grid_dim: (wd.div_ceil(256) as u32, grid((d0 * h).div_ceil(8)), 1),
            block_dim: BLOCK,
            shared_mem_bytes: smem as u32,
        };
        (cfg, vec![s.arg(), d.arg(), lines.into(), wi.into()])
    } else {
        let cfg = LaunchConfig {
            grid_dim: (
                (a as usize).div_ceil(32) as u32,
                grid((len as usize).div_ceil(64)),
                grid(o as usize),
            ),
            block_dim: BLOCK,
            shared_mem_bytes: smem as u32,
        };
        let args = vec![
            s.arg(),
            d.arg(),
            len.into(),
            sa.into(),
            a.into(),
            o.into(),
            so.into(),
        ];
        (cfg, args)
    };
    args.extend([
        Arg::buf(&wb),
        ki.into(),
        ai.into(),
        mc.into(),
        cval.into(),
        s.code.into(),
        d.code.into(),
    ]);
    // Sizes: the caller checked that both pointers are distinct pool buffers of d*h*w
    // elements of the types their codes name; the weight buffer holds k f32 and lives to
    // the launch (its block returns to this stream's free list, reused only by later
    // work); the kernels write only in-range elements and read only mapped indices;
    // extents fit i32 (check_shape); the shared size is the kernel's formula for k taps.
    cuda.launch(id, cfg, &args)?;
    drop(wb);
    Ok(())
}

/// `nd_combine_f32` on `n` elements: `acc op= t` (op codes in ndimage.cu).
fn nd_combine(cuda: &CudaBackend, acc: u64, t: u64, n: usize, op: i32) -> Result<()> {
    let id = Kernel::ND_COMBINE_F32;
    let cfg = LaunchConfig {
        grid_dim: (n.div_ceil(256).clamp(1, 65535) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let ni = n as i64;
    // Sizes: both pointers are pool buffers of n f32 owned by the caller (acc equals t
    // only for the in-place ops 0 and 3, which never read t); the kernel touches
    // indices below n only.
    let args = [
        Arg::ptr(acc, ScalarType::F32),
        Arg::ptr(t, ScalarType::F32),
        ni.into(),
        op.into(),
    ];
    cuda.launch(id, cfg, &args)
}
