//! The exact path of a [`LinearFilter`] on f32 and f64 data: ndimage.cu's `*_f64`
//! kernels, which run kiln-cpu's double arithmetic (scipy's: `NI_Correlate1D`'s symmetric,
//! antisymmetric and general sums, `NI_Correlate`'s row-major sum over the weights above
//! `DBL_EPSILON`, `NI_UniformFilter1D`'s running sum for the uniform filters' passes, every
//! product and sum rounded on its own), so the result equals the CPU's bit for bit.
//!
//! The data's type is the arithmetic's store type, as on the CPU: each pass of an f32 plan
//! is stored to an f32 buffer (scipy's float32 output array) and the next pass reads it; an
//! f64 plan keeps f64 between passes. The terms of laplace and gradient magnitude combine
//! in the data's type (`nd_combine_f32` / `nd_combine_f64`, numpy's element-wise float
//! arithmetic). No fused or fixed-size kernel runs here: those sum in f32.

use super::{check_shape, grid, mode_args, BLOCK};
use crate::kernels::{Kernel, ScalarType};
use crate::launch::Arg;
use crate::op::Op;
use crate::storage::CudaData;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::imaging::linear::{Combine, DirectKernel, LinearFilter, Pass, Term};
use kiln_core::imaging::scipy_cpu::{classify, Sym};
use kiln_core::imaging::BoundaryMode;
use kiln_core::{Error, Result};

/// Dynamic shared memory the exact passes may use for their weights (the default limit).
const SHARED_LIMIT: usize = 48 * 1024;

/// Runs the linear filter `f` on an f32 or f64 `(d, h, w)` array `src` into `dst` (same
/// type, distinct buffers) with the CPU's arithmetic (see the module docs).
pub struct NdimageLinearExact<'a> {
    /// The input, `d * h * w` f32 or f64.
    pub src: &'a CudaData,
    /// The output, as many elements of `src`'s type.
    pub dst: &'a mut CudaData,
    /// `[d, h, w]`.
    pub shape: [usize; 3],
    /// The planned filter.
    pub filter: &'a LinearFilter,
}

/// A raw endpoint: a pool buffer's device pointer and its element code (0 f32, 1 f64:
/// kiln's cast codes, which the exact kernels' dispatch takes).
#[derive(Clone, Copy)]
struct Ep {
    ptr: u64,
    code: i32,
}

impl Ep {
    fn of(d: &CudaData) -> Option<(Ep, usize)> {
        match d {
            CudaData::F32(b) => Some((
                Ep {
                    ptr: b.device_ptr(),
                    code: 0,
                },
                b.len(),
            )),
            CudaData::F64(b) => Some((
                Ep {
                    ptr: b.device_ptr(),
                    code: 1,
                },
                b.len(),
            )),
            _ => None,
        }
    }

    fn arg(self) -> Arg<'static> {
        let elem = if self.code == 1 {
            ScalarType::F64
        } else {
            ScalarType::F32
        };
        Arg::ptr(self.ptr, elem)
    }
}

impl Op for NdimageLinearExact<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let NdimageLinearExact {
            src,
            dst,
            shape,
            filter: f,
        } = self;
        let bad = || {
            Error::invalid(
                &f.name,
                "the exact ndimage path takes f32 or f64 data, written as the same type",
            )
        };
        let (s, sn) = Ep::of(src).ok_or_else(bad)?;
        let (d, dn) = Ep::of(dst).ok_or_else(bad)?;
        if s.code != d.code {
            return Err(bad());
        }
        check_shape(&f.name, shape, sn, dn)?;
        f.validate()?;
        let Some((first, rest)) = f.terms.split_first() else {
            return Err(Error::invalid(&f.name, "a filter needs at least one term"));
        };
        let f64s = s.code == 1;
        let n = sn;
        term(cuda, src, s, dst, shape, first, f)?;
        if f.combine == Combine::Single {
            return Ok(());
        }
        if f.combine == Combine::Magnitude {
            combine(cuda, f64s, d.ptr, d.ptr, n, 0)?;
        }
        let mut tmp = alloc_like(cuda, f64s, n)?;
        let (t, _) = Ep::of(&tmp).ok_or_else(bad)?;
        for tm in rest {
            term(cuda, src, s, &mut tmp, shape, tm, f)?;
            let op = if f.combine == Combine::Sum { 1 } else { 2 };
            combine(cuda, f64s, d.ptr, t.ptr, n, op)?;
        }
        if f.combine == Combine::Magnitude {
            combine(cuda, f64s, d.ptr, d.ptr, n, 3)?;
        }
        // The temporary's block returns to this stream's free list after the launches.
        drop(tmp);
        Ok(())
    }
}

fn alloc_like(cuda: &CudaBackend, f64s: bool, n: usize) -> Result<CudaData> {
    Ok(if f64s {
        CudaData::F64(cuda.alloc::<f64>(n)?)
    } else {
        CudaData::F32(cuda.alloc::<f32>(n)?)
    })
}

/// One term from `src` (endpoint `s`) into `dst`.
fn term(
    cuda: &CudaBackend,
    src: &CudaData,
    s: Ep,
    dst: &mut CudaData,
    shape: [usize; 3],
    t: &Term,
    f: &LinearFilter,
) -> Result<()> {
    let Some((d, _)) = Ep::of(dst) else {
        return Err(Error::invalid(
            &f.name,
            "the exact ndimage path writes f32 or f64",
        ));
    };
    match t {
        Term::Direct(k) => direct(cuda, s, d, shape, k, f),
        // No pass: a copy, as the CPU's.
        Term::Passes(p) if p.is_empty() => match (src, dst) {
            (CudaData::F32(a), CudaData::F32(b)) => cuda.copy_device_any(a, b),
            (CudaData::F64(a), CudaData::F64(b)) => cuda.copy_device_any(a, b),
            _ => Err(Error::invalid(&f.name, "a copy between different types")),
        },
        Term::Passes(p) => passes(cuda, s, d, shape, p, f),
    }
}

/// A chain of passes from `s` to `d` through temporaries of the data's type: stage `i`
/// writes `d` if it is the last, else temporary `i % 2`, and reads the one before.
fn passes(cuda: &CudaBackend, s: Ep, d: Ep, shape: [usize; 3], p: &[Pass], f: &LinearFilter) -> Result<()> {
    let ids: Vec<Kernel> = p
        .iter()
        .map(|p| {
            if p.running {
                Kernel::ND_UNIFORM_F64
            } else if p.axis == 2 {
                Kernel::ND_PASS_X_F64
            } else {
                Kernel::ND_PASS_S_F64
            }
        })
        .collect();
    cuda.prepare(&ids)?;
    let n: usize = shape.iter().product();
    let last = p.len() - 1;
    let f64s = s.code == 1;
    let t1 = if last >= 1 {
        Some(alloc_like(cuda, f64s, n)?)
    } else {
        None
    };
    let t2 = if last >= 2 {
        Some(alloc_like(cuda, f64s, n)?)
    } else {
        None
    };
    let bufs: Vec<Ep> = [&t1, &t2]
        .iter()
        .filter_map(|t| t.as_ref().and_then(Ep::of).map(|(e, _)| e))
        .collect();
    for (i, pass) in p.iter().enumerate() {
        let from = if i == 0 { s } else { bufs[(i - 1) % 2] };
        let to = if i == last { d } else { bufs[i % 2] };
        one_pass(cuda, from, to, shape, pass, f.mode, &f.name)?;
    }
    // The temporaries' blocks return to this stream's free list after the passes.
    drop((t1, t2));
    Ok(())
}

/// The boundary mode's code for `kiln_map` and its cval as a double (the CPU's cval,
/// unrounded).
fn mode64(mode: BoundaryMode) -> (i32, f64) {
    (mode_args(mode).0, mode.cval().unwrap_or(0.0))
}

fn sym_code(w: &[f64]) -> i32 {
    match classify(w) {
        Sym::General => 0,
        Sym::Symmetric => 1,
        Sym::Anti => 2,
    }
}

/// One pass between endpoints the caller has checked to hold `shape`'s elements of their
/// types and to be distinct.
fn one_pass(
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
    if p.running {
        return uniform_pass(cuda, s, d, shape, p, mode, op);
    }
    let smem = k * 8;
    if smem > SHARED_LIMIT {
        return Err(Error::invalid(
            op,
            format!(
                "a {k}-tap pass is longer than the GPU's exact kernels take ({} taps)",
                SHARED_LIMIT / 8
            ),
        ));
    }
    let wb = cuda.upload_slice(&p.weights)?;
    let (mc, cval) = mode64(mode);
    let (ki, ai, si) = (k as i32, p.anchor as i32, sym_code(&p.weights));
    let [d0, h, wd] = shape;
    let (id, cfg, mut args) = if p.axis == 2 {
        let cfg = LaunchConfig {
            grid_dim: (wd.div_ceil(256) as u32, grid(d0 * h), 1),
            block_dim: BLOCK,
            shared_mem_bytes: smem as u32,
        };
        let args = vec![s.arg(), d.arg(), ((d0 * h) as i32).into(), (wd as i32).into()];
        (Kernel::ND_PASS_X_F64, cfg, args)
    } else {
        let (len, sa, a, o, so) = axis_lines(shape, p.axis);
        let cfg = LaunchConfig {
            grid_dim: (a.div_ceil(32) as u32, grid(len.div_ceil(8)), grid(o)),
            block_dim: BLOCK,
            shared_mem_bytes: smem as u32,
        };
        let args = vec![
            s.arg(),
            d.arg(),
            (len as i32).into(),
            sa.into(),
            (a as i32).into(),
            (o as i32).into(),
            so.into(),
        ];
        (Kernel::ND_PASS_S_F64, cfg, args)
    };
    args.extend([
        Arg::buf(&wb),
        ki.into(),
        ai.into(),
        si.into(),
        mc.into(),
        cval.into(),
        s.code.into(),
        d.code.into(),
    ]);
    // Sizes: the caller checked that both pointers are distinct pool buffers of d*h*w
    // elements of the types their codes name; the weight buffer holds k f64 and lives to
    // the launch (its block returns to this stream's free list, reused only by later
    // work); the kernels write only in-range elements and read only mapped indices;
    // extents and d*h*w fit i32 (check_shape); the shared size is k doubles.
    cuda.launch(id, cfg, &args)?;
    drop(wb);
    Ok(())
}

/// The lines along `axis` of a `(d, h, w)` array as the pass kernels take them: `(len, sa,
/// a, o, so)`, line `(o, ia)` (ia < a, o < o_) starting at `o * so + ia`, its sample j
/// (j < len) at `j * sa` from there.
fn axis_lines([d0, h, wd]: [usize; 3], axis: usize) -> (usize, i64, usize, usize, i64) {
    match axis {
        0 => (d0, (h * wd) as i64, h * wd, 1, 0),
        1 => (h, wd as i64, wd, d0, (h * wd) as i64),
        _ => (wd, 1, 1, d0 * h, wd as i64),
    }
}

/// `one_pass` for a running sum (`uniform_filter1d`): `nd_uniform_f64`, one line a thread.
fn uniform_pass(
    cuda: &CudaBackend,
    s: Ep,
    d: Ep,
    shape: [usize; 3],
    p: &Pass,
    mode: BoundaryMode,
    op: &str,
) -> Result<()> {
    let k = p.weights.len();
    if k > i32::MAX as usize {
        return Err(Error::invalid(
            op,
            format!("a uniform filter of size {k} is too large"),
        ));
    }
    let (mc, cval) = mode64(mode);
    let (len, sa, a, o, so) = axis_lines(shape, p.axis);
    let cfg = LaunchConfig {
        grid_dim: ((a * o).div_ceil(256).clamp(1, 65535) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    // Sizes: the caller checked that both pointers are distinct pool buffers of d*h*w
    // elements of the types their codes name; every line `o * so + ia` and sample `j * sa`
    // (j < len) is inside them; samples are read only at mapped indices; extents and d*h*w
    // fit i32 (check_shape).
    let args = [
        s.arg(),
        d.arg(),
        (len as i32).into(),
        sa.into(),
        (a as i32).into(),
        (o as i32).into(),
        so.into(),
        (k as i32).into(),
        (p.anchor as i32).into(),
        mc.into(),
        cval.into(),
        s.code.into(),
        d.code.into(),
    ];
    cuda.launch(Kernel::ND_UNIFORM_F64, cfg, &args)
}

fn direct(
    cuda: &CudaBackend,
    s: Ep,
    d: Ep,
    shape: [usize; 3],
    k: &DirectKernel,
    f: &LinearFilter,
) -> Result<()> {
    let [kd, kh, kw] = k.shape;
    if kd * kh * kw != k.weights.len() || k.anchors.iter().zip(&k.shape).any(|(a, n)| a >= n) {
        return Err(Error::invalid(
            &f.name,
            "a direct kernel's weights, shape and anchors disagree",
        ));
    }
    let too_big = |n: usize| n > i32::MAX as usize;
    if too_big(kd) || too_big(kh) || too_big(kw) || too_big(kd * kh * kw) {
        return Err(Error::invalid(&f.name, "the direct kernel is too large"));
    }
    let wb = cuda.upload_slice(&k.weights)?;
    let [d0, h, wd] = shape;
    let cfg = LaunchConfig {
        grid_dim: (wd.div_ceil(32) as u32, grid(h.div_ceil(8)), grid(d0)),
        block_dim: BLOCK,
        shared_mem_bytes: 0,
    };
    let (mc, cval) = mode64(f.mode);
    let [ad, ah, aw] = k.anchors.map(|a| a as i32);
    // Sizes: s and d are distinct pool buffers of d*h*w elements of the types their codes
    // name (checked by the callers); the weight buffer holds kd*kh*kw f64; the kernel
    // writes only z < d, y < h, x < w and reads only indices mapped into range (or cval);
    // every axis and d*h*w fit i32 (check_shape); grid y and z are clamped and strided.
    let args = [
        s.arg(),
        d.arg(),
        (d0 as i32).into(),
        (h as i32).into(),
        (wd as i32).into(),
        Arg::buf(&wb),
        (kd as i32).into(),
        (kh as i32).into(),
        (kw as i32).into(),
        ad.into(),
        ah.into(),
        aw.into(),
        mc.into(),
        cval.into(),
        s.code.into(),
        d.code.into(),
    ];
    cuda.launch(Kernel::ND_DIRECT_F64, cfg, &args)?;
    drop(wb);
    Ok(())
}

/// `nd_combine_f32` or `nd_combine_f64` on `n` elements: `acc op= t` (op codes in
/// ndimage.cu).
fn combine(cuda: &CudaBackend, f64s: bool, acc: u64, t: u64, n: usize, op: i32) -> Result<()> {
    let (id, elem) = if f64s {
        (Kernel::ND_COMBINE_F64, ScalarType::F64)
    } else {
        (Kernel::ND_COMBINE_F32, ScalarType::F32)
    };
    let cfg = LaunchConfig {
        grid_dim: (n.div_ceil(256).clamp(1, 65535) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    // Sizes: both pointers are pool buffers of n elements of `elem` owned by the caller
    // (acc equals t only for the in-place ops 0 and 3, which never read t); the kernel
    // touches indices below n only.
    let args = [
        Arg::ptr(acc, elem),
        Arg::ptr(t, elem),
        (n as i64).into(),
        op.into(),
    ];
    cuda.launch(id, cfg, &args)
}
