//! scipy.ndimage's linear filters as one plan both backends run: [`LinearFilter`].
//!
//! Every array is seen as `(D, H, W)`: a 2-D image is `(1, H, W)`, a batch of images
//! `(N, H, W)`, a volume `(D, H, W)`. A filter is one or more *terms* combined
//! ([`Combine`]); a term is either a chain of `correlate1d` passes ([`Pass`], each rounded to
//! f32 as scipy stores each pass of a float32 array) or one direct correlation
//! ([`DirectKernel`], scipy's `NI_Correlate`: sum in f64, rounded once).
//!
//! Placement follows scipy exactly (`origin`, odd and even sizes): along an axis, a kernel of
//! `n` taps with origin `o` reads input `i + j - (n/2 + o)` for tap `j`; kiln stores the
//! *anchor* `n/2 + o` (`0..n`, so `-(n/2) <= o <= (n-1)/2` as scipy requires). Convolution is
//! correlation with the weights reversed and the origin negated, minus one more on an
//! even axis (scipy's `_correlate_or_convolve` and `convolve1d`).
//!
//! The builders ([`correlate`], [`convolve`], [`correlate1d`], [`convolve1d`],
//! [`gaussian_filter`], [`gaussian_laplace`], [`gaussian_gradient_magnitude`],
//! [`uniform_filter`], [`sobel`], [`prewitt`], [`laplace`]) take the data's rank (2 or 3)
//! and scipy's parameters, with `axes` (a subset of the data's axes) where scipy has it.

use super::{numpy_sum, BoundaryMode};
use crate::error::{Error, Result};

/// One `correlate1d` pass along an axis of the `(D, H, W)` array.
#[derive(Clone, Debug, PartialEq)]
pub struct Pass {
    /// The array axis (0, 1 or 2).
    pub axis: usize,
    /// The weights in correlation order (any length >= 1).
    pub weights: Vec<f64>,
    /// `len/2 + origin`: how many samples before the output position tap 0 reads.
    pub anchor: usize,
    /// scipy's `uniform_filter1d` (the weights all `1/len`): the exact paths keep its
    /// running sum along the line (`s += x[i+len-1] - x[i-1]`, each output `s / len`) instead
    /// of correlating with the weights; the fast f32 path correlates.
    pub running: bool,
}

/// A direct correlation with a `(kd, kh, kw)` kernel over the `(D, H, W)` array (a 2-D
/// kernel over axes 1 and 2 is `(1, kh, kw)`).
#[derive(Clone, Debug, PartialEq)]
pub struct DirectKernel {
    /// The kernel's extent along each array axis.
    pub shape: [usize; 3],
    /// Row-major weights (the last axis fastest).
    pub weights: Vec<f64>,
    /// Per axis, `n/2 + origin`.
    pub anchors: [usize; 3],
}

impl DirectKernel {
    /// Whether every axis is odd and centred (origin 0).
    pub fn is_centred(&self) -> bool {
        self.shape
            .iter()
            .zip(&self.anchors)
            .all(|(&n, &a)| n % 2 == 1 && a == n / 2)
    }
}

/// One term of a filter.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// `correlate1d` passes in order (none: a copy).
    Passes(Vec<Pass>),
    /// One direct correlation.
    Direct(DirectKernel),
}

/// How the terms' f32 results are combined (element-wise, in f32, as scipy does on a
/// float32 output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// One term: its result.
    Single,
    /// `t0 + t1 + ...` (left to right): `generic_laplace`.
    Sum,
    /// `sqrt(t0·t0 + t1·t1 + ...)`, each square rounded, then each sum:
    /// `generic_gradient_magnitude`.
    Magnitude,
}

/// A linear ndimage filter, ready to run on an array of a given rank.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearFilter {
    /// What it is, e.g. `gaussian_filter(sigma=[1, 1])`.
    pub name: String,
    /// The terms (at least one).
    pub terms: Vec<Term>,
    /// How the terms combine.
    pub combine: Combine,
    /// The boundary mode of every pass.
    pub mode: BoundaryMode,
}

impl LinearFilter {
    /// Checks what the backends rely on: at least one term, pass axes 0..=2 with an anchor
    /// inside a non-empty kernel, direct kernels with as many weights as their shape holds
    /// and anchors inside it.
    pub fn validate(&self) -> Result<()> {
        let fail = |why: &str| Err(bad(&self.name, why.to_string()));
        if self.terms.is_empty() {
            return fail("a filter needs at least one term");
        }
        for t in &self.terms {
            match t {
                Term::Passes(p) => {
                    if p.iter()
                        .any(|p| p.axis > 2 || p.weights.is_empty() || p.anchor >= p.weights.len())
                    {
                        return fail("a pass needs an axis 0..=2 and an anchor inside its kernel");
                    }
                }
                Term::Direct(k) => {
                    let n: usize = k.shape.iter().product();
                    if n == 0 || n != k.weights.len() || k.anchors.iter().zip(&k.shape).any(|(a, s)| a >= s) {
                        return fail("a direct kernel's weights, shape and anchors disagree");
                    }
                }
            }
        }
        Ok(())
    }

    /// The largest number of taps an output reads in one term (for error bounds).
    pub fn taps(&self) -> usize {
        self.terms
            .iter()
            .map(|t| match t {
                Term::Passes(p) => p.iter().map(|p| p.weights.len()).sum(),
                Term::Direct(d) => d.weights.len(),
            })
            .max()
            .unwrap_or(1)
    }

    /// The largest gain `Σ|w|` of a term (the product over its passes).
    pub fn gain(&self) -> f64 {
        self.terms
            .iter()
            .map(|t| match t {
                Term::Passes(p) => p
                    .iter()
                    .map(|p| p.weights.iter().map(|w| w.abs()).sum::<f64>())
                    .product(),
                Term::Direct(d) => d.weights.iter().map(|w| w.abs()).sum(),
            })
            .fold(0.0, f64::max)
    }
}

fn bad(op: &str, why: impl Into<String>) -> Error {
    Error::invalid(op, why)
}

/// scipy's `_check_axes`: `None` is every axis of the data; negative axes count from the
/// end; no repeats. Returns the data axes.
fn data_axes(op: &str, ndim: usize, axes: Option<&[isize]>) -> Result<Vec<usize>> {
    if !(2..=3).contains(&ndim) {
        return Err(bad(
            op,
            format!("data of rank {ndim}: kiln's ndimage takes 2-D and 3-D arrays"),
        ));
    }
    let Some(axes) = axes else {
        return Ok((0..ndim).collect());
    };
    let mut out = Vec::new();
    for &a in axes {
        let n = ndim as isize;
        if a < -n || a >= n {
            return Err(bad(op, format!("axis {a} is out of range for {ndim}-D data")));
        }
        let a = a.rem_euclid(n) as usize;
        if out.contains(&a) {
            return Err(bad(op, format!("axis {a} is repeated in axes {axes:?}")));
        }
        out.push(a);
    }
    Ok(out)
}

/// The `(D, H, W)` array axis of data axis `a` of a rank-`ndim` array.
fn arr(ndim: usize, a: usize) -> usize {
    a + 3 - ndim
}

/// One value per axis: a single value is repeated (scipy's `_normalize_sequence`).
fn per_axis<T: Copy>(op: &str, what: &str, v: &[T], n: usize) -> Result<Vec<T>> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        l => Err(bad(op, format!("{what} has {l} values for {n} axes"))),
    }
}

/// The anchor of an `n`-tap axis with scipy's `origin`, or scipy's error.
fn anchor(op: &str, n: usize, origin: isize) -> Result<usize> {
    let lo = -((n / 2) as isize);
    let hi = ((n as isize) - 1) / 2;
    if n == 0 {
        return Err(bad(op, "a kernel axis of size 0"));
    }
    if origin < lo || origin > hi {
        return Err(bad(
            op,
            format!("invalid origin {origin} for size {n}: it must satisfy {lo} <= origin <= {hi}"),
        ));
    }
    Ok(((n / 2) as isize + origin) as usize)
}

fn check_weights(op: &str, w: &[f64]) -> Result<()> {
    if w.is_empty() {
        return Err(bad(op, "the kernel is empty"));
    }
    if let Some(i) = w.iter().position(|x| !x.is_finite()) {
        return Err(bad(op, format!("weight {i} is {}; weights must be finite", w[i])));
    }
    Ok(())
}

fn single(name: String, term: Term, mode: BoundaryMode) -> LinearFilter {
    LinearFilter {
        name,
        terms: vec![term],
        combine: Combine::Single,
        mode,
    }
}

/// A `correlate1d` pass with scipy's origin (data axis `axis` of rank-`ndim` data).
fn pass(op: &str, ndim: usize, axis: usize, weights: Vec<f64>, origin: isize) -> Result<Pass> {
    check_weights(op, &weights)?;
    let anchor = anchor(op, weights.len(), origin)?;
    Ok(Pass {
        axis: arr(ndim, axis),
        weights,
        anchor,
        running: false,
    })
}

/// scipy `correlate1d(input, weights, axis, mode=mode, origin=origin)` on rank-`ndim` data
/// (`axis` may be negative).
pub fn correlate1d(
    ndim: usize,
    weights: &[f64],
    axis: isize,
    origin: isize,
    mode: BoundaryMode,
) -> Result<LinearFilter> {
    let op = "correlate1d";
    let a = data_axes(op, ndim, Some(&[axis]))?[0];
    let p = pass(op, ndim, a, weights.to_vec(), origin)?;
    Ok(single(
        format!("correlate1d(size={}, axis={a}, origin={origin})", weights.len()),
        Term::Passes(vec![p]),
        mode,
    ))
}

/// scipy `convolve1d`: the weights reversed, the origin negated (and one less on an even
/// length).
pub fn convolve1d(
    ndim: usize,
    weights: &[f64],
    axis: isize,
    origin: isize,
    mode: BoundaryMode,
) -> Result<LinearFilter> {
    let op = "convolve1d";
    let a = data_axes(op, ndim, Some(&[axis]))?[0];
    let w: Vec<f64> = weights.iter().rev().copied().collect();
    let o = -origin - if w.len() % 2 == 0 { 1 } else { 0 };
    let p = pass(op, ndim, a, w, o)
        .map_err(|_| bad(op, format!("invalid origin {origin} for size {}", weights.len())))?;
    Ok(single(
        format!("convolve1d(size={}, axis={a}, origin={origin})", weights.len()),
        Term::Passes(vec![p]),
        mode,
    ))
}

/// scipy `correlate(input, weights, mode=mode, origin=origin, axes=axes)`: the kernel
/// (row-major `weights` of shape `wshape`, one extent per filtered axis) applied directly.
pub fn correlate(
    ndim: usize,
    weights: &[f64],
    wshape: &[usize],
    origin: &[isize],
    axes: Option<&[isize]>,
    mode: BoundaryMode,
) -> Result<LinearFilter> {
    direct(
        "correlate",
        ndim,
        weights.to_vec(),
        wshape,
        origin,
        axes,
        mode,
        false,
    )
}

/// scipy `convolve`: [`correlate`] with the kernel reversed along every axis and each
/// origin negated (one less on an even axis).
pub fn convolve(
    ndim: usize,
    weights: &[f64],
    wshape: &[usize],
    origin: &[isize],
    axes: Option<&[isize]>,
    mode: BoundaryMode,
) -> Result<LinearFilter> {
    // Reversing every axis of a row-major array reverses its element order.
    let w: Vec<f64> = weights.iter().rev().copied().collect();
    direct("convolve", ndim, w, wshape, origin, axes, mode, true)
}

#[allow(clippy::too_many_arguments)]
fn direct(
    op: &str,
    ndim: usize,
    weights: Vec<f64>,
    wshape: &[usize],
    origin: &[isize],
    axes: Option<&[isize]>,
    mode: BoundaryMode,
    flip: bool,
) -> Result<LinearFilter> {
    let axes = data_axes(op, ndim, axes)?;
    if wshape.len() != axes.len() {
        return Err(bad(
            op,
            format!(
                "the kernel has rank {} (shape {wshape:?}) but filters {} axes",
                wshape.len(),
                axes.len()
            ),
        ));
    }
    let n: usize = wshape.iter().product();
    if n != weights.len() {
        return Err(bad(
            op,
            format!("a {wshape:?} kernel needs {n} weights, got {}", weights.len()),
        ));
    }
    check_weights(op, &weights)?;
    let origins = per_axis(op, "origin", origin, axes.len())?;
    // scipy (`_expand_footprint`, `_expand_origin`): the kernel's axes lie on the filtered
    // axes in increasing order whatever the order of `axes`, while origin `i` belongs to
    // `axes[i]` when some axes are left out (with every axis listed, both are in order).
    let mut sorted = axes.clone();
    sorted.sort_unstable();
    let origin_axes = if axes.len() < ndim { &axes } else { &sorted };
    let mut shape = [1usize; 3];
    let mut anchors = [0usize; 3];
    for (i, &a) in sorted.iter().enumerate() {
        shape[arr(ndim, a)] = wshape[i];
    }
    for (&a, &o) in origin_axes.iter().zip(&origins) {
        let ax = arr(ndim, a);
        let len = shape[ax];
        let o2 = if flip {
            -o - if len % 2 == 0 { 1 } else { 0 }
        } else {
            o
        };
        anchors[ax] = anchor(op, len, o2).map_err(|_| {
            bad(
                op,
                format!("invalid origin {o} for kernel size {len} on axis {a}"),
            )
        })?;
    }
    let dims = wshape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
    Ok(single(
        format!("{op}({dims}, origin={origins:?})"),
        Term::Direct(DirectKernel {
            shape,
            weights,
            anchors,
        }),
        mode,
    ))
}

/// scipy `_gaussian_kernel1d(sigma, order, radius)` reversed, as `gaussian_filter1d`
/// correlates with it: `order` 0 is the normalised Gaussian, 1 and 2 its derivatives
/// (the polynomial `q(x)` of scipy's recurrence times the Gaussian). scipy's formula, not
/// its bits: numpy's vectorised `exp` and dot products can round the last bit otherwise.
pub fn gaussian_weights(sigma: f64, order: usize, radius: usize) -> Vec<f64> {
    let s2 = sigma * sigma;
    let r = radius as i64;
    let phi: Vec<f64> = (-r..=r).map(|x| (-0.5 / s2 * (x * x) as f64).exp()).collect();
    let sum = numpy_sum(&phi);
    let phi: Vec<f64> = phi.iter().map(|p| p / sum).collect();
    if order == 0 {
        return phi.into_iter().rev().collect();
    }
    // q starts as [1, 0, ...]; each step q <- D q + P q (D: derivative, P: times -x/σ²).
    let mut q = vec![0.0; order + 1];
    q[0] = 1.0;
    for _ in 0..order {
        let mut n = vec![0.0; order + 1];
        for i in 0..order {
            n[i] += (i + 1) as f64 * q[i + 1];
        }
        for i in 1..=order {
            n[i] += q[i - 1] * (1.0 / -s2);
        }
        q = n;
    }
    let w: Vec<f64> = (-r..=r)
        .zip(&phi)
        .map(|(x, &p)| {
            let mut acc = 0.0;
            for (e, &qe) in q.iter().enumerate() {
                acc += (x.pow(e as u32)) as f64 * qe;
            }
            acc * p
        })
        .collect();
    w.into_iter().rev().collect()
}

/// The Gaussian options scipy takes besides sigma.
#[derive(Clone, Debug, PartialEq)]
pub struct GaussianOpts {
    /// Derivative order per filtered axis (one value: every axis), 0..=4.
    pub order: Vec<usize>,
    /// The radius is `int(truncate * sigma + 0.5)` (default 4.0).
    pub truncate: f64,
    /// Explicit radius per axis (overrides truncate), as scipy's `radius`.
    pub radius: Option<Vec<usize>>,
}

impl Default for GaussianOpts {
    fn default() -> Self {
        GaussianOpts {
            order: vec![0],
            truncate: 4.0,
            radius: None,
        }
    }
}

/// The passes of scipy `gaussian_filter` over data axes `axes` with per-axis sigma/order/
/// radius (axes with sigma <= 1e-15 are skipped, as scipy does).
fn gaussian_passes(
    op: &str,
    ndim: usize,
    axes: &[usize],
    sigma: &[f64],
    order: &[usize],
    truncate: f64,
    radius: Option<&[usize]>,
) -> Result<Vec<Pass>> {
    let n = axes.len();
    let sigma = per_axis(op, "sigma", sigma, n)?;
    let order = per_axis(op, "order", order, n)?;
    let radius = match radius {
        Some(r) => Some(per_axis(op, "radius", r, n)?),
        None => None,
    };
    if !truncate.is_finite() || truncate < 0.0 {
        return Err(bad(op, format!("truncate {truncate} must be finite and >= 0")));
    }
    let mut out = Vec::new();
    for i in 0..n {
        let s = sigma[i];
        if !s.is_finite() || s < 0.0 {
            return Err(bad(op, format!("sigma {s} must be finite and >= 0")));
        }
        if order[i] > 4 {
            return Err(bad(op, format!("order {} > 4 is not supported", order[i])));
        }
        if s <= 1e-15 {
            continue;
        }
        let r = match &radius {
            Some(r) => r[i],
            None => (truncate * s + 0.5) as usize,
        };
        if r > 1 << 20 {
            return Err(bad(op, format!("radius {r} is too large")));
        }
        out.push(Pass {
            axis: arr(ndim, axes[i]),
            weights: gaussian_weights(s, order[i], r),
            anchor: r,
            running: false,
        });
    }
    Ok(out)
}

fn fmt_list<T: std::fmt::Display>(v: &[T]) -> String {
    let s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", s.join(", "))
}

/// scipy `gaussian_filter(input, sigma, order, mode, truncate=, radius=, axes=)`.
pub fn gaussian_filter(
    ndim: usize,
    sigma: &[f64],
    opts: &GaussianOpts,
    axes: Option<&[isize]>,
    mode: BoundaryMode,
) -> Result<LinearFilter> {
    let op = "gaussian_filter";
    let ax = data_axes(op, ndim, axes)?;
    let p = gaussian_passes(
        op,
        ndim,
        &ax,
        sigma,
        &opts.order,
        opts.truncate,
        opts.radius.as_deref(),
    )?;
    Ok(single(
        format!(
            "gaussian_filter(sigma={}, order={})",
            fmt_list(sigma),
            fmt_list(&opts.order)
        ),
        Term::Passes(p),
        mode,
    ))
}

/// scipy `gaussian_laplace`: for each filtered axis a Gaussian with order 2 on that axis
/// (over every filtered axis), the terms summed.
pub fn gaussian_laplace(
    ndim: usize,
    sigma: &[f64],
    opts: &GaussianOpts,
    axes: Option<&[isize]>,
    mode: BoundaryMode,
) -> Result<LinearFilter> {
    gaussian_terms("gaussian_laplace", 2, Combine::Sum, ndim, sigma, opts, axes, mode)
}

/// scipy `gaussian_gradient_magnitude`: `sqrt(Σ_axis gaussian(order 1 on axis)²)`.
pub fn gaussian_gradient_magnitude(
    ndim: usize,
    sigma: &[f64],
    opts: &GaussianOpts,
    axes: Option<&[isize]>,
    mode: BoundaryMode,
) -> Result<LinearFilter> {
    gaussian_terms(
        "gaussian_gradient_magnitude",
        1,
        Combine::Magnitude,
        ndim,
        sigma,
        opts,
        axes,
        mode,
    )
}

#[allow(clippy::too_many_arguments)]
fn gaussian_terms(
    op: &str,
    deriv: usize,
    combine: Combine,
    ndim: usize,
    sigma: &[f64],
    opts: &GaussianOpts,
    axes: Option<&[isize]>,
    mode: BoundaryMode,
) -> Result<LinearFilter> {
    let ax = data_axes(op, ndim, axes)?;
    let sig = per_axis(op, "sigma", sigma, ax.len())?;
    // scipy runs each term as a gaussian_filter over every axis in order (sigma 0 off axes).
    let mut sorted: Vec<usize> = (0..ax.len()).collect();
    sorted.sort_by_key(|&i| ax[i]);
    let sax: Vec<usize> = sorted.iter().map(|&i| ax[i]).collect();
    let ssig: Vec<f64> = sorted.iter().map(|&i| sig[i]).collect();
    let mut terms = Vec::new();
    for &a in &ax {
        let order: Vec<usize> = sax.iter().map(|&b| if b == a { deriv } else { 0 }).collect();
        let p = gaussian_passes(
            op,
            ndim,
            &sax,
            &ssig,
            &order,
            opts.truncate,
            opts.radius.as_deref(),
        )?;
        terms.push(Term::Passes(p));
    }
    let combine = if terms.len() == 1 && combine == Combine::Sum {
        Combine::Single
    } else {
        combine
    };
    Ok(LinearFilter {
        name: format!("{op}(sigma={})", fmt_list(sigma)),
        combine,
        terms,
        mode,
    })
}

/// scipy `uniform_filter(input, size, mode, origin, axes=)`: a `size`-tap mean per axis
/// (axes of size 1 skipped), placed by `origin`.
pub fn uniform_filter(
    ndim: usize,
    size: &[usize],
    origin: &[isize],
    axes: Option<&[isize]>,
    mode: BoundaryMode,
) -> Result<LinearFilter> {
    let op = "uniform_filter";
    let ax = data_axes(op, ndim, axes)?;
    let size = per_axis(op, "size", size, ax.len())?;
    let origin = per_axis(op, "origin", origin, ax.len())?;
    let mut passes = Vec::new();
    for i in 0..ax.len() {
        if size[i] == 0 {
            return Err(bad(op, "size must be >= 1"));
        }
        if size[i] > 1 {
            let w = vec![1.0 / size[i] as f64; size[i]];
            passes.push(Pass {
                running: true,
                ..pass(op, ndim, ax[i], w, origin[i])?
            });
        }
    }
    Ok(single(
        format!(
            "uniform_filter(size={}, origin={})",
            fmt_list(&size),
            fmt_list(&origin)
        ),
        Term::Passes(passes),
        mode,
    ))
}

fn derivative_smooth(
    op: &str,
    ndim: usize,
    axis: isize,
    smooth: [f64; 3],
    mode: BoundaryMode,
) -> Result<LinearFilter> {
    let a = data_axes(op, ndim, Some(&[axis]))?[0];
    let mut passes = vec![Pass {
        axis: arr(ndim, a),
        weights: vec![-1.0, 0.0, 1.0],
        anchor: 1,
        running: false,
    }];
    for other in (0..ndim).filter(|&o| o != a) {
        passes.push(Pass {
            axis: arr(ndim, other),
            weights: smooth.to_vec(),
            anchor: 1,
            running: false,
        });
    }
    Ok(single(format!("{op}(axis={a})"), Term::Passes(passes), mode))
}

/// scipy `sobel(input, axis)`: `[-1, 0, 1]` along `axis`, then `[1, 2, 1]` along every
/// other axis.
pub fn sobel(ndim: usize, axis: isize, mode: BoundaryMode) -> Result<LinearFilter> {
    derivative_smooth("sobel", ndim, axis, [1.0, 2.0, 1.0], mode)
}

/// scipy `prewitt(input, axis)`: as [`sobel`] with `[1, 1, 1]` smoothing.
pub fn prewitt(ndim: usize, axis: isize, mode: BoundaryMode) -> Result<LinearFilter> {
    derivative_smooth("prewitt", ndim, axis, [1.0, 1.0, 1.0], mode)
}

/// scipy `laplace(input, mode, axes=)`: `Σ_axis correlate1d([1, -2, 1], axis)`.
pub fn laplace(ndim: usize, axes: Option<&[isize]>, mode: BoundaryMode) -> Result<LinearFilter> {
    let ax = data_axes("laplace", ndim, axes)?;
    let terms: Vec<Term> = ax
        .iter()
        .map(|&a| {
            Term::Passes(vec![Pass {
                axis: arr(ndim, a),
                weights: vec![1.0, -2.0, 1.0],
                anchor: 1,
                running: false,
            }])
        })
        .collect();
    Ok(LinearFilter {
        name: "laplace".into(),
        combine: if terms.len() == 1 {
            Combine::Single
        } else {
            Combine::Sum
        },
        terms,
        mode,
    })
}

/// The element-wise combination in f32, as scipy does it on a float32 output: `acc` holds
/// the first term, `t` the next; `last` finishes a magnitude with the square root.
pub fn combine_step(c: Combine, first: bool, acc: f32, t: f32) -> f32 {
    match c {
        Combine::Single => t,
        Combine::Sum if first => t,
        Combine::Sum => acc + t,
        Combine::Magnitude if first => t * t,
        Combine::Magnitude => acc + t * t,
    }
}
