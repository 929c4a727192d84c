//! What the filter commands apply, shared by `kiln filter2d`, `kiln filter3d` and
//! `kiln ndimage`: a [`Filter2`] for images, a [`Filter3`] for volumes, each either a
//! classic kernel (the fast presets and square/cube kernels) or any op on a tensor (scipy's
//! functions through `kiln::ndimage`; the slot rank filters and morphology plug into), and
//! [`Described`], what the summary says about it.
//!
//! `--kernel` for filter2d/filter3d: presets and `.npy` kernels that `Kernel2D`/`Kernel3D`
//! take run as before; the rest (a rectangular or even-sided `.npy` kernel, a larger one, a
//! 3-D gaussian of any sigma, box:K of any K) run as scipy's `correlate`, `gaussian_filter`
//! or `uniform_filter` through `kiln::ndimage`.

use crate::filter_cmd::{is_npy, kernel_2d, kernel_3d, read_kernel_file};
use kiln::core::imaging::{BoundaryMode, Kernel2D, Kernel3D};
use kiln::ndimage::{self as nd, LinearFilter};
use kiln::Tensor;

/// An op on an f32 tensor: `(h, w)`, or `(n, h, w)` planes filtered each on its own (2-D);
/// `(d, h, w)` (3-D).
pub(crate) type TensorOp<'a> = &'a (dyn Fn(&Tensor) -> kiln::Result<Tensor> + Sync);

/// What a 2-D run applies to each image (or plane).
#[derive(Clone, Copy)]
pub(crate) enum Filter2<'a> {
    /// A Kernel2D under a mode (filter2d's path choice).
    Kernel(&'a Kernel2D, BoundaryMode),
    /// Any op.
    Op(TensorOp<'a>),
}

/// What a 3-D run applies to each volume.
#[derive(Clone, Copy)]
pub(crate) enum Filter3<'a> {
    /// A Kernel3D under a mode.
    Kernel(&'a Kernel3D, BoundaryMode),
    /// Any op.
    Op(TensorOp<'a>),
}

/// What the summary reports about the filter.
pub(crate) struct Described {
    pub command: &'static str,
    pub name: String,
    pub size: usize,
    pub mode: BoundaryMode,
    pub path: &'static str,
}

/// A kernel from `--kernel`: the classic type where it takes it, else a linear plan.
pub(crate) enum AnyKernel<K> {
    Classic(K),
    Linear(LinearFilter),
}

/// The op running `f` on a tensor.
pub(crate) fn linear_op(f: &LinearFilter) -> impl Fn(&Tensor) -> kiln::Result<Tensor> + Sync + '_ {
    move |t: &Tensor| t.ndimage(f)
}

/// The largest side of a linear plan's kernels (for the summary's kernel_size).
pub(crate) fn plan_size(f: &LinearFilter) -> usize {
    f.terms
        .iter()
        .map(|t| match t {
            nd::Term::Passes(p) => p.iter().map(|p| p.weights.len()).max().unwrap_or(1),
            nd::Term::Direct(k) => k.shape.iter().copied().max().unwrap_or(1),
        })
        .max()
        .unwrap_or(1)
}

/// A preset the classic types refuse but scipy has: `gaussian:S` (any S > 0) and `box:K`
/// (any K >= 1) on `ndim`-D data.
pub(crate) fn linear_preset(
    spec: &str,
    ndim: usize,
    mode: BoundaryMode,
) -> Option<kiln::Result<LinearFilter>> {
    let s = spec.trim().to_ascii_lowercase();
    if let Some(v) = s.strip_prefix("gaussian:") {
        let sigma = v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)?;
        let mut f = nd::gaussian_filter(ndim, &[sigma], &nd::GaussianOpts::default(), None, mode);
        if let Ok(f) = f.as_mut() {
            f.name = format!("gaussian:{sigma}");
        }
        return Some(f);
    }
    if let Some(v) = s.strip_prefix("box:") {
        let k = v.trim().parse::<usize>().ok().filter(|k| *k >= 1)?;
        let mut f = nd::uniform_filter(ndim, &[k], &[0], None, mode);
        if let Ok(f) = f.as_mut() {
            f.name = format!("box:{k}");
        }
        return Some(f);
    }
    None
}

/// `--kernel` for `ndim`-D data: a classic kernel, or (where the classic types refuse a
/// shape or a preset scipy takes) the scipy function as a linear plan under `mode`.
fn kernel_any<K>(
    spec: &str,
    ndim: usize,
    mode: BoundaryMode,
    classic: impl Fn(&str) -> anyhow::Result<K>,
) -> anyhow::Result<AnyKernel<K>> {
    let err = match classic(spec) {
        Ok(k) => return Ok(AnyKernel::Classic(k)),
        Err(e) => e,
    };
    if !is_npy(spec) {
        return match linear_preset(spec, ndim, mode) {
            Some(f) => Ok(AnyKernel::Linear(f?)),
            None => Err(err),
        };
    }
    let (shape, w) = read_kernel_file(spec, ndim)?;
    if w.is_empty() || w.iter().any(|x| !x.is_finite()) {
        return Err(err);
    }
    let f = kiln::ndimage::correlate(ndim, &w, &shape, &[0], None, mode)
        .map_err(|e| anyhow::Error::from(e).context(format!("--kernel {spec}")))?;
    Ok(AnyKernel::Linear(f))
}

pub(crate) fn kernel_2d_any(spec: &str, mode: BoundaryMode) -> anyhow::Result<AnyKernel<Kernel2D>> {
    kernel_any(spec, 2, mode, kernel_2d)
}

pub(crate) fn kernel_3d_any(spec: &str, mode: BoundaryMode) -> anyhow::Result<AnyKernel<Kernel3D>> {
    kernel_any(spec, 3, mode, kernel_3d)
}
