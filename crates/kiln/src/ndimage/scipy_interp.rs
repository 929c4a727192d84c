//! scipy.ndimage's interpolation functions as scipy calls them from Python: `zoom`, `shift`,
//! `affine_transform`, `rotate`, `spline_filter` and `spline_filter1d` on a tensor, with
//! scipy 1.17's parameters. [`Tensor::resample`] and [`Tensor::spline_filter1d`] are scipy's C
//! layer; this is its Python layer (`scipy/ndimage/_interpolation.py`), done as kiln-py's
//! `_ndimage_interp.py` does it, step for step:
//!
//! - the prefilter: for `order > 1` with `prefilter`, the input prepadded by 12 samples per
//!   side for `nearest` (edge values) and `grid-constant` (`cval`, stored in the input's
//!   type as `numpy.pad` stores it), then the float64 spline filter along every axis longer
//!   than one sample; the padding is done on the host (as `numpy.pad`), so every device
//!   reads the same coefficients;
//! - `zoom`'s output shape (`round(shape * zoom)`, Python's round: half to even) and factors;
//! - `shift`'s negated shift; `affine_transform`'s matrix forms (a diagonal, `ndim × ndim`,
//!   a homogeneous `ndim × (ndim + 1)` or `(ndim + 1) × (ndim + 1)`);
//! - `rotate`'s matrix from cephes' `cosdg`/`sindg` (scipy.special), its output plane shape
//!   and offset from NumPy's matrix products as OpenBLAS computes them on x86-64 with FMA
//!   (`rot @ corners`: `fma(m[r][1], b[1], m[r][0] * b[0])`; `rot @ centre`:
//!   `fma(m[r][0], v[0], m[r][1] * v[1])`; checked against NumPy 2.4 over random inputs), and
//!   an input of more than two axes rotated plane by plane, as scipy loops over the planes
//!   (each plane prefiltered on its own).
//!
//! The results are the values scipy returns for a float32 input (output `F32`) or float64
//! (output `F64`, which an integer output is then stored from with
//! [`kiln_core::imaging::interp::store_value`]); the CPU and CUDA give the same bits.

use super::interp::InterpMode;
use crate::tensor::Tensor;
use crate::Runtime;
use kiln_core::{DType, Error, Result};
use kiln_cuda::{InterpSpec, Resample};

/// Samples of prepadding per side for `nearest` and `grid-constant` (scipy's `npad`).
const NPAD: usize = 12;

/// The resampling options shared by the functions: scipy's `order`, `mode`, `cval` and
/// `prefilter`.
#[derive(Clone, Copy, Debug)]
pub struct InterpOptions {
    /// The spline order, 0..=5.
    pub order: usize,
    /// The boundary mode.
    pub mode: InterpMode,
    /// The value outside the input for the constant modes.
    pub cval: f64,
    /// Whether the input is spline-filtered first (order > 1).
    pub prefilter: bool,
}

/// The interpolation mode of scipy's name (`reflect` and `grid-mirror` are one mode).
pub fn interp_mode(name: &str) -> Result<InterpMode> {
    Ok(match name {
        "nearest" => InterpMode::Nearest,
        "wrap" => InterpMode::Wrap,
        "reflect" | "grid-mirror" => InterpMode::Reflect,
        "mirror" => InterpMode::Mirror,
        "constant" => InterpMode::Constant,
        "grid-wrap" => InterpMode::GridWrap,
        "grid-constant" => InterpMode::GridConstant,
        _ => {
            return Err(Error::invalid(
                "mode",
                format!(
                    "`{name}` is not an interpolation mode; scipy's are: reflect, grid-mirror, \
                     constant, grid-constant, nearest, mirror, wrap, grid-wrap"
                ),
            ))
        }
    })
}

fn check(op: &str, t: &Tensor, o: &InterpOptions, out: DType) -> Result<()> {
    if o.order > 5 {
        return Err(Error::invalid(
            op,
            format!("spline order {} not supported (0..=5)", o.order),
        ));
    }
    if t.rank() < 1 {
        return Err(Error::invalid(op, "input and output rank must be > 0"));
    }
    for (what, d) in [("input", t.dtype()), ("output", out)] {
        if !matches!(d, DType::F32 | DType::F64) {
            return Err(Error::invalid(
                op,
                format!("the {what} is {d}: f32 or f64 (cast first)"),
            ));
        }
    }
    if !o.cval.is_finite() && matches!(o.mode, InterpMode::Constant | InterpMode::GridConstant) {
        // scipy takes a NaN cval; kiln refuses it with the other non-finite parameters
        return Err(Error::invalid(op, format!("cval {} is not finite", o.cval)));
    }
    Ok(())
}

fn check_finite(op: &str, what: &str, v: &[f64]) -> Result<()> {
    match v.iter().find(|x| !x.is_finite()) {
        Some(x) => Err(Error::invalid(
            op,
            format!("{what} holds {x}; every value must be finite"),
        )),
        None => Ok(()),
    }
}

/// `t` padded by `npad` samples per side: edge values (`nearest`) or `cval` in the tensor's
/// type (`grid-constant`), as `numpy.pad` does it.
fn pad(rt: &Runtime, t: &Tensor, npad: usize, mode: InterpMode, cval: f64) -> Result<Tensor> {
    let shape = t.shape().to_vec();
    let pshape: Vec<usize> = shape.iter().map(|d| d + 2 * npad).collect();
    fn run<T: Copy>(src: &[T], shape: &[usize], pshape: &[usize], npad: usize, fill: Option<T>) -> Vec<T> {
        let n: usize = pshape.iter().product();
        let mut out = Vec::with_capacity(n);
        let rank = shape.len();
        let mut idx = vec![0usize; rank];
        for _ in 0..n {
            let mut off = 0usize;
            let mut outside = false;
            for a in 0..rank {
                let i = idx[a] as isize - npad as isize;
                let c = if i < 0 {
                    outside = true;
                    0
                } else if i as usize >= shape[a] {
                    outside = true;
                    shape[a] - 1
                } else {
                    i as usize
                };
                off = off * shape[a] + c;
            }
            out.push(match (outside, fill) {
                (true, Some(f)) => f,
                _ => src[off],
            });
            for a in (0..rank).rev() {
                idx[a] += 1;
                if idx[a] < pshape[a] {
                    break;
                }
                idx[a] = 0;
            }
        }
        out
    }
    let constant = mode == InterpMode::GridConstant;
    if t.dtype() == DType::F32 {
        let v = t.to_vec::<f32>()?;
        let p = run(&v, &shape, &pshape, npad, constant.then_some(cval as f32));
        rt.tensor_from_vec(p, &pshape)
    } else {
        let v = t.to_vec::<f64>()?;
        let p = run(&v, &shape, &pshape, npad, constant.then_some(cval));
        rt.tensor_from_vec(p, &pshape)
    }
}

/// What scipy resamples: the f64 spline coefficients of the (prepadded) input for
/// `order > 1` with `prefilter`, else the input; and the padding per side.
fn prefiltered(rt: &Runtime, t: &Tensor, o: &InterpOptions) -> Result<(Tensor, usize)> {
    if !(o.prefilter && o.order > 1) {
        return Ok((t.clone(), 0));
    }
    let (mut x, npad) = if matches!(o.mode, InterpMode::Nearest | InterpMode::GridConstant) {
        (pad(rt, t, NPAD, o.mode, o.cval)?, NPAD)
    } else {
        (t.clone(), 0)
    };
    let shape = x.shape().to_vec();
    let mut any = false;
    for (axis, &d) in shape.iter().enumerate() {
        if d > 1 {
            x = x.spline_filter1d(axis, o.order, o.mode, DType::F64)?;
            any = true;
        }
    }
    if !any {
        x = x.cast(DType::F64)?;
    }
    Ok((x, npad))
}

fn resample(
    t: &Tensor,
    oshape: &[usize],
    o: &InterpOptions,
    npad: usize,
    map: Resample<'_>,
    out: DType,
) -> Result<Tensor> {
    let spec = InterpSpec {
        ishape: t.shape(),
        oshape,
        order: o.order,
        mode: o.mode,
        cval: o.cval,
        nprepad: npad,
        map,
    };
    t.resample(&spec, out)
}

fn check_oshape(op: &str, oshape: &[usize]) -> Result<()> {
    if oshape.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("the output shape {oshape:?} has an axis of length 0"),
        ));
    }
    Ok(())
}

/// `round(shape * zoom)` per axis (Python's `round`: half to even), scipy's zoom output
/// shape; an error for a zoom that is not finite and positive.
pub fn zoom_shape(shape: &[usize], zoom: &[f64]) -> Result<Vec<usize>> {
    if zoom.len() != shape.len() {
        return Err(Error::invalid(
            "zoom",
            format!(
                "{} zoom factors for {} axes (give one, or one per axis)",
                zoom.len(),
                shape.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(shape.len());
    for (&d, &z) in shape.iter().zip(zoom) {
        if !(z.is_finite() && z > 0.0) {
            return Err(Error::invalid(
                "zoom",
                format!("zoom {z} must be a finite number > 0"),
            ));
        }
        let r = (d as f64 * z).round_ties_even();
        if r < 1.0 || r > (1u64 << 40) as f64 {
            return Err(Error::invalid(
                "zoom",
                format!("zoom {z} of an axis of {d} gives {r} samples (1 to 2^40)"),
            ));
        }
        out.push(r as usize);
    }
    Ok(out)
}

/// scipy's zoom factors from the input's and output's shapes: `(in - 1) / (out - 1)` per
/// axis (`in / out` with `grid_mode`), 1 where the divisor is 0. Output index `k` samples
/// the input at `k * factor` (`(k + 0.5) * factor - 0.5` with `grid_mode`).
pub fn zoom_factors(ishape: &[usize], oshape: &[usize], grid_mode: bool) -> Vec<f64> {
    ishape
        .iter()
        .zip(oshape)
        .map(|(&i, &n)| {
            let (num, div) = if grid_mode {
                (i as f64, n as f64)
            } else {
                (i as f64 - 1.0, n as f64 - 1.0)
            };
            if div != 0.0 {
                num / div
            } else {
                1.0
            }
        })
        .collect()
}

/// scipy.ndimage.zoom: `t` resampled to [`zoom_shape`], the corner samples aligned (with
/// `grid_mode`, the pixel edges).
pub fn zoom(
    rt: &Runtime,
    t: &Tensor,
    zoom: &[f64],
    grid_mode: bool,
    o: &InterpOptions,
    out: DType,
) -> Result<Tensor> {
    check("zoom", t, o, out)?;
    let oshape = zoom_shape(t.shape(), zoom)?;
    if zoom.iter().all(|&z| z == 1.0) && o.prefilter {
        return t.cast(out);
    }
    let (x, npad) = prefiltered(rt, t, o)?;
    let factors = zoom_factors(t.shape(), &oshape, grid_mode);
    let map = Resample::ZoomShift {
        zoom: Some(&factors),
        shift: None,
        grid_mode,
    };
    resample(&x, &oshape, o, npad, map, out)
}

/// scipy.ndimage.shift: output index `k` reads the input at `k - shift`.
pub fn shift(rt: &Runtime, t: &Tensor, shift: &[f64], o: &InterpOptions, out: DType) -> Result<Tensor> {
    check("shift", t, o, out)?;
    if shift.len() != t.rank() {
        return Err(Error::invalid(
            "shift",
            format!(
                "{} shifts for {} axes (give one, or one per axis)",
                shift.len(),
                t.rank()
            ),
        ));
    }
    check_finite("shift", "the shift", shift)?;
    let (x, npad) = prefiltered(rt, t, o)?;
    let s: Vec<f64> = shift.iter().map(|v| -v).collect();
    let oshape = t.shape().to_vec();
    let map = Resample::ZoomShift {
        zoom: None,
        shift: Some(&s),
        grid_mode: false,
    };
    resample(&x, &oshape, o, npad, map, out)
}

/// An affine matrix as scipy.ndimage.affine_transform takes it: row-major values and their
/// shape, `(ndim,)` (a diagonal), `(ndim, ndim)`, `(ndim, ndim + 1)` or `(ndim + 1, ndim + 1)`
/// (homogeneous: the last column is the offset).
#[derive(Clone, Debug)]
pub struct AffineMatrix {
    /// The values, row-major.
    pub values: Vec<f64>,
    /// The shape, 1-D or 2-D.
    pub shape: Vec<usize>,
}

/// scipy's checks of the matrix and offset for `ndim` axes: the diagonal or the `ndim ×
/// ndim` matrix, and the offset (the homogeneous matrix's last column, else `offset`).
pub fn affine_params(m: &AffineMatrix, offset: &[f64], ndim: usize) -> Result<(AffineMatrix, Vec<f64>)> {
    let op = "affine_transform";
    if m.values.len() != m.shape.iter().product::<usize>() {
        return Err(Error::invalid(op, "the matrix's values do not fill its shape"));
    }
    check_finite(op, "the matrix", &m.values)?;
    check_finite(op, "the offset", offset)?;
    let forms = format!(
        "for {ndim}-D data the matrix is ({ndim},), ({ndim}, {ndim}), ({ndim}, {}) or ({}, {})",
        ndim + 1,
        ndim + 1,
        ndim + 1
    );
    let wrong = |got: &[usize]| Error::invalid(op, format!("a matrix of shape {got:?}: {forms}"));
    match m.shape[..] {
        [n] if n == ndim => {}
        [r, c] if r == ndim && c == ndim => {}
        [r, c] if c == ndim + 1 && (r == ndim || r == ndim + 1) => {
            if r == ndim + 1 {
                let last = &m.values[ndim * c..];
                let want: Vec<f64> = (0..=ndim).map(|i| if i == ndim { 1.0 } else { 0.0 }).collect();
                if last != want.as_slice() {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "a homogeneous matrix of shape {:?} needs the bottom row {want:?}, got {last:?}",
                            m.shape
                        ),
                    ));
                }
            }
            let mut vals = Vec::with_capacity(ndim * ndim);
            let mut off = Vec::with_capacity(ndim);
            for row in 0..ndim {
                vals.extend_from_slice(&m.values[row * c..row * c + ndim]);
                off.push(m.values[row * c + ndim]);
            }
            let sq = AffineMatrix {
                values: vals,
                shape: vec![ndim, ndim],
            };
            return Ok((sq, off));
        }
        _ => return Err(wrong(&m.shape)),
    }
    let off = match offset.len() {
        1 => vec![offset[0]; ndim],
        n if n == ndim => offset.to_vec(),
        n => {
            return Err(Error::invalid(
                op,
                format!("{n} offsets for {ndim} axes (give one, or one per axis)"),
            ))
        }
    };
    Ok((m.clone(), off))
}

/// scipy.ndimage.affine_transform: output index `o` reads the input at `matrix · o +
/// offset` (a diagonal matrix runs scipy's zoom/shift path, as scipy does).
pub fn affine_transform(
    rt: &Runtime,
    t: &Tensor,
    matrix: &AffineMatrix,
    offset: &[f64],
    output_shape: Option<&[usize]>,
    o: &InterpOptions,
    out: DType,
) -> Result<Tensor> {
    check("affine_transform", t, o, out)?;
    let oshape = output_shape.map_or_else(|| t.shape().to_vec(), <[usize]>::to_vec);
    if oshape.len() != t.rank() {
        return Err(Error::invalid(
            "affine_transform",
            format!("an output shape of {} axes for {}-D data", oshape.len(), t.rank()),
        ));
    }
    check_oshape("affine_transform", &oshape)?;
    let (m, off) = affine_params(matrix, offset, t.rank())?;
    let (x, npad) = prefiltered(rt, t, o)?;
    if m.shape.len() == 1 {
        let s: Vec<f64> = off.iter().zip(&m.values).map(|(a, b)| a / b).collect();
        let map = Resample::ZoomShift {
            zoom: Some(&m.values),
            shift: Some(&s),
            grid_mode: false,
        };
        return resample(&x, &oshape, o, npad, map, out);
    }
    let map = Resample::Affine {
        matrix: &m.values,
        offset: &off,
    };
    resample(&x, &oshape, o, npad, map, out)
}

// cephes' sindg/cosdg (scipy.special), so that rotate's matrix is scipy's to the last bit
// the literals as cephes (and kiln-py's `_ndimage_interp.py`) write them
#[allow(clippy::excessive_precision)]
const SINCOF: [f64; 6] = [
    1.58962301572218447952E-10,
    -2.50507477628503540135E-8,
    2.75573136213856773549E-6,
    -1.98412698295895384658E-4,
    8.33333333332211858862E-3,
    -1.66666666666666307295E-1,
];
#[allow(clippy::excessive_precision)]
const COSCOF: [f64; 7] = [
    1.13678171382044553091E-11,
    -2.08758833757683644217E-9,
    2.75573155429816611547E-7,
    -2.48015872936186303776E-5,
    1.38888888888806666760E-3,
    -4.16666666666666348141E-2,
    4.99999999999999999798E-1,
];
#[allow(clippy::excessive_precision)]
const PI180: f64 = 1.74532925199432957692E-2;

fn polevl(x: f64, coef: &[f64]) -> f64 {
    coef[1..].iter().fold(coef[0], |a, &c| a * x + c)
}

/// sin (`cosine` false) or cos of `x` degrees, as scipy.special.sindg / cosdg compute them.
pub fn deg_trig(x: f64, cosine: bool) -> f64 {
    if x.is_nan() {
        return x;
    }
    let mut x = x;
    let mut sign = 1i32;
    if x < 0.0 {
        x = -x;
        if !cosine {
            sign = -1;
        }
    }
    if x > 1.0e14 {
        return 0.0;
    }
    let mut y = (x / 45.0).floor();
    let z = y - ((y * 2f64.powi(-4)).floor() * 16.0);
    let mut j = z as i64;
    if j & 1 != 0 {
        j += 1;
        y += 1.0;
    }
    j &= 7;
    if j > 3 {
        sign = -sign;
        j -= 4;
    }
    if cosine && j > 1 {
        sign = -sign;
    }
    let z = (x - y * 45.0) * PI180;
    let zz = z * z;
    let use_cos = (j == 1 || j == 2) != cosine;
    let r = if use_cos {
        1.0 - zz * polevl(zz, &COSCOF)
    } else {
        z + z * (zz * polevl(zz, &SINCOF))
    };
    if sign < 0 {
        -r
    } else {
        r
    }
}

/// What scipy.ndimage.rotate computes before resampling: the plane's axes (sorted), the
/// 2×2 matrix `[[c, s], [-s, c]]`, the offset and the output shape.
#[derive(Clone, Debug, PartialEq)]
pub struct RotatePlan {
    /// The plane's axes, sorted.
    pub axes: [usize; 2],
    /// `[c, s, -s, c]`, row-major.
    pub matrix: [f64; 4],
    /// The input coordinate of output index 0 in the plane.
    pub offset: [f64; 2],
    /// The output's shape.
    pub output_shape: Vec<usize>,
}

/// [`RotatePlan`] for data of `shape` rotated by `angle` degrees in the plane of `axes`
/// (negative count from the end), the output enlarged to hold the rotated input when
/// `reshape`.
pub fn rotate_plan(shape: &[usize], angle: f64, axes: [isize; 2], reshape: bool) -> Result<RotatePlan> {
    let ndim = shape.len();
    if ndim < 2 {
        return Err(Error::invalid("rotate", "input array should be at least 2D"));
    }
    if !angle.is_finite() {
        return Err(Error::invalid("rotate", format!("angle {angle} is not finite")));
    }
    let mut ax = [0usize; 2];
    for (i, &a) in axes.iter().enumerate() {
        let n = if a < 0 { a + ndim as isize } else { a };
        if n < 0 || n >= ndim as isize {
            return Err(Error::invalid(
                "rotate",
                format!("invalid rotation plane specified: axes {axes:?} for {ndim}-D data"),
            ));
        }
        ax[i] = n as usize;
    }
    if ax[0] == ax[1] {
        return Err(Error::invalid(
            "rotate",
            format!("axes {axes:?} name one axis twice"),
        ));
    }
    ax.sort_unstable();
    let (c, s) = (deg_trig(angle, true), deg_trig(angle, false));
    let m = [c, s, -s, c];
    let (iy, ix) = (shape[ax[0]], shape[ax[1]]);
    let out_plane = if reshape {
        // rot @ [[0, 0, iy, iy], [0, ix, 0, ix]], as OpenBLAS's dgemm rounds it
        let cols = [
            (0.0, 0.0),
            (0.0, ix as f64),
            (iy as f64, 0.0),
            (iy as f64, ix as f64),
        ];
        let mut o = [0usize; 2];
        for (r, slot) in o.iter_mut().enumerate() {
            let v: Vec<f64> = cols
                .iter()
                .map(|&(b0, b1)| m[2 * r + 1].mul_add(b1, m[2 * r] * b0))
                .collect();
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            *slot = (hi - lo + 0.5) as usize;
        }
        o
    } else {
        [iy, ix]
    };
    let half = [
        (out_plane[0] as f64 - 1.0) / 2.0,
        (out_plane[1] as f64 - 1.0) / 2.0,
    ];
    // rot @ half, as OpenBLAS's dgemv rounds it
    let out_center = [
        m[0].mul_add(half[0], m[1] * half[1]),
        m[2].mul_add(half[0], m[3] * half[1]),
    ];
    let in_center = [(iy as f64 - 1.0) / 2.0, (ix as f64 - 1.0) / 2.0];
    let offset = [in_center[0] - out_center[0], in_center[1] - out_center[1]];
    let mut output_shape = shape.to_vec();
    output_shape[ax[0]] = out_plane[0];
    output_shape[ax[1]] = out_plane[1];
    Ok(RotatePlan {
        axes: ax,
        matrix: m,
        offset,
        output_shape,
    })
}

/// scipy.ndimage.rotate: every plane of `axes` rotated by `angle` degrees about its centre
/// ([`rotate_plan`]); a 2-D tensor in one resampling, more axes plane by plane (each plane
/// gathered on the host, resampled on the runtime's device, scattered back).
pub fn rotate(
    rt: &Runtime,
    t: &Tensor,
    angle: f64,
    axes: [isize; 2],
    reshape: bool,
    o: &InterpOptions,
    out: DType,
) -> Result<Tensor> {
    check("rotate", t, o, out)?;
    let plan = rotate_plan(t.shape(), angle, axes, reshape)?;
    check_oshape("rotate", &plan.output_shape)?;
    let m = AffineMatrix {
        values: plan.matrix.to_vec(),
        shape: vec![2, 2],
    };
    let [a0, a1] = plan.axes;
    let shape = t.shape().to_vec();
    let oplane = [plan.output_shape[a0], plan.output_shape[a1]];
    if shape.len() == 2 {
        return affine_transform(rt, t, &m, &plan.offset, Some(&oplane), o, out);
    }
    let x = t.cast(DType::F64)?.to_vec::<f64>()?;
    let plane_in = shape[a0] * shape[a1];
    let plane_out = oplane[0] * oplane[1];
    let others: Vec<usize> = (0..shape.len()).filter(|&a| a != a0 && a != a1).collect();
    let strides = |s: &[usize]| -> Vec<usize> {
        let mut st = vec![1usize; s.len()];
        for a in (0..s.len().saturating_sub(1)).rev() {
            st[a] = st[a + 1] * s[a + 1];
        }
        st
    };
    let (is, os) = (strides(&shape), strides(&plan.output_shape));
    let count: usize = others.iter().map(|&a| shape[a]).product();
    let mut result = vec![0f64; count * plane_out];
    let mut idx = vec![0usize; others.len()];
    let mut buf = vec![0f64; plane_in];
    let in_dtype = t.dtype();
    for _ in 0..count {
        let base_in: usize = others.iter().zip(&idx).map(|(&a, &i)| i * is[a]).sum();
        let base_out: usize = others.iter().zip(&idx).map(|(&a, &i)| i * os[a]).sum();
        for i in 0..shape[a0] {
            for j in 0..shape[a1] {
                buf[i * shape[a1] + j] = x[base_in + i * is[a0] + j * is[a1]];
            }
        }
        // the plane in the input's type, so the prefilter and padding read what scipy reads
        let p = rt.tensor(&buf, &[shape[a0], shape[a1]])?.cast(in_dtype)?;
        let r = affine_transform(rt, &p, &m, &plan.offset, Some(&oplane), o, DType::F64)?.to_vec::<f64>()?;
        for i in 0..oplane[0] {
            for j in 0..oplane[1] {
                result[base_out + i * os[a0] + j * os[a1]] = r[i * oplane[1] + j];
            }
        }
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[others[k]] {
                break;
            }
            idx[k] = 0;
        }
    }
    rt.tensor_from_vec(result, &plan.output_shape)?.cast(out)
}

/// scipy.ndimage.spline_filter1d: the B-spline coefficients of `order` along `axis` (orders
/// 0 and 1, and an axis of one sample, copy the input).
pub fn spline_filter1d(
    t: &Tensor,
    order: usize,
    axis: isize,
    mode: InterpMode,
    out: DType,
) -> Result<Tensor> {
    let o = InterpOptions {
        order,
        mode,
        cval: 0.0,
        prefilter: true,
    };
    check("spline_filter1d", t, &o, out)?;
    let n = t.rank() as isize;
    let a = if axis < 0 { axis + n } else { axis };
    if a < 0 || a >= n {
        return Err(Error::invalid(
            "spline_filter1d",
            format!("axis {axis} is out of bounds for {n}-D data"),
        ));
    }
    let a = a as usize;
    if order < 2 || t.shape()[a] <= 1 {
        return t.cast(out);
    }
    t.spline_filter1d(a, order, mode, out)
}

/// scipy.ndimage.spline_filter: [`spline_filter1d`] along every axis in turn, in f64
/// between the passes (scipy's float64 output); orders 2 to 5.
pub fn spline_filter(t: &Tensor, order: usize, mode: InterpMode, out: DType) -> Result<Tensor> {
    if !(2..=5).contains(&order) {
        return Err(Error::invalid(
            "spline_filter",
            format!("spline order {order} not supported (2..=5)"),
        ));
    }
    let o = InterpOptions {
        order,
        mode,
        cval: 0.0,
        prefilter: true,
    };
    check("spline_filter", t, &o, out)?;
    let mut x = t.clone();
    for (axis, &d) in t.shape().to_vec().iter().enumerate() {
        if d > 1 {
            x = x.spline_filter1d(axis, order, mode, DType::F64)?;
        }
    }
    x.cast(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degree_trig_is_exact_on_the_axes_and_odd_in_sine() {
        for (deg, s, c) in [
            (0.0, 0.0, 1.0),
            (90.0, 1.0, 0.0),
            (180.0, 0.0, -1.0),
            (270.0, -1.0, 0.0),
        ] {
            assert_eq!((deg_trig(deg, false), deg_trig(deg, true)), (s, c), "{deg}");
        }
        for deg in [1.0, 30.0, 44.9, 123.4, 300.0, 1e6 + 0.5] {
            assert_eq!(deg_trig(-deg, false), -deg_trig(deg, false));
            assert_eq!(deg_trig(-deg, true), deg_trig(deg, true));
            let (s, c) = (deg_trig(deg, false), deg_trig(deg, true));
            assert!((s * s + c * c - 1.0).abs() < 4e-16, "{deg}");
            assert!((s - deg.to_radians().sin()).abs() < 1e-9, "{deg}");
        }
    }

    #[test]
    fn rotate_plan_swaps_the_plane_at_90_degrees() {
        let p = rotate_plan(&[5, 3, 2], 90.0, [1, 0], true).unwrap();
        assert_eq!(p.axes, [0, 1]);
        assert_eq!(p.output_shape, vec![3, 5, 2]);
        assert_eq!(p.matrix, [0.0, 1.0, -1.0, 0.0]);
        let q = rotate_plan(&[5, 3], 90.0, [0, 1], false).unwrap();
        assert_eq!(q.output_shape, vec![5, 3]);
        assert!(rotate_plan(&[5], 10.0, [1, 0], true).is_err());
        assert!(rotate_plan(&[5, 3], 10.0, [0, 2], true).is_err());
    }

    #[test]
    fn zoom_shape_rounds_half_to_even_and_refuses_bad_factors() {
        assert_eq!(zoom_shape(&[5, 7], &[0.5, 0.5]).unwrap(), vec![2, 4]);
        for z in [0.0, -1.0, f64::NAN, f64::INFINITY, 0.01] {
            assert!(zoom_shape(&[5, 7], &[z, 1.0]).is_err(), "{z}");
        }
        assert_eq!(zoom_factors(&[5, 1], &[9, 3], false), vec![0.5, 0.0]);
        assert_eq!(zoom_factors(&[5, 1], &[9, 1], false), vec![0.5, 1.0]);
        assert_eq!(zoom_factors(&[5, 1], &[10, 3], true), vec![0.5, 1.0 / 3.0]);
    }

    #[test]
    fn affine_params_split_a_homogeneous_matrix() {
        let m = AffineMatrix {
            values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            shape: vec![2, 3],
        };
        let (sq, off) = affine_params(&m, &[0.0], 2).unwrap();
        assert_eq!(
            (sq.values, sq.shape, off),
            (vec![1.0, 2.0, 4.0, 5.0], vec![2, 2], vec![3.0, 6.0])
        );
        let bad_row = AffineMatrix {
            values: vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0],
            shape: vec![3, 3],
        };
        assert!(affine_params(&bad_row, &[0.0], 2).is_err());
        let diag = AffineMatrix {
            values: vec![2.0, 3.0],
            shape: vec![2],
        };
        assert_eq!(affine_params(&diag, &[1.5], 2).unwrap().1, vec![1.5, 1.5]);
        assert!(affine_params(&diag, &[1.0, 2.0, 3.0], 2).is_err());
    }
}
