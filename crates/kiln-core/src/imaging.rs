//! Image-filter vocabulary every backend shares: boundary modes with scipy.ndimage's names
//! and semantics, and validated 2-D / 3-D correlation kernels with presets.
//!
//! Design: weights are `f64`, as scipy converts them, so a backend that accumulates in `f64`
//! reproduces `scipy.ndimage.correlate` on `float32` input to the last bit (scipy sums in
//! double and rounds once). A kernel also knows whether it is separable and, if so, its 1-D
//! factors and the order of the 1-D passes, so every backend takes the same path:
//! - presets are *defined* as the scipy function of the same name (`gaussian:S` is
//!   `gaussian_filter(truncate=4.0)`, `box:K` is `uniform_filter(size=K)`, `sobel-x` is
//!   `sobel(axis=1)`): one `correlate1d` pass per axis with the boundary applied per pass
//!   and the intermediate rounded to `f32`, as scipy does for `float32` input;
//! - user kernels are defined as `correlate(x, K)`; one found rank-1 (numerically) is run
//!   as 1-D passes only where that is the same function in exact arithmetic
//!   ([`Kernel2D::separable_for`]).
//!
//! Which path a call takes (direct or 1-D passes, [`FilterPath`]) is resolved here too
//! ([`path_2d`], [`resolve_2d`]), so neither backend consults the other.

pub mod distance;
pub mod interp;
pub mod label;
pub mod linear;
pub mod linear_spec;
mod mode;
pub mod morphology;
pub mod objects;
mod path;
pub mod rank;
pub mod rank_value;
pub mod scipy_cpu;
pub mod value_indices;
pub mod watershed;

pub use mode::BoundaryMode;
pub use path::{path_2d, path_3d, resolve_2d, resolve_3d, FilterPath};

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Largest 2-D kernel side (`k×k`, `k` odd).
pub const MAX_KERNEL_2D: usize = 31;
/// The 3-D kernel sides accepted (`k×k×k`).
pub const KERNEL_3D_SIZES: [usize; 3] = [3, 5, 7];
/// scipy's `gaussian_filter` default: the kernel radius is `int(truncate * sigma + 0.5)`.
pub const GAUSSIAN_TRUNCATE: f64 = 4.0;
/// Default tolerance of the numerical rank-1 test, relative to the largest |weight|: a
/// kernel written out in `f32` from an exact outer product passes.
pub const SEPARABLE_TOLERANCE: f64 = 4.0 * f32::EPSILON as f64;

/// The 1-D factors of a separable (rank-1) kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Separable {
    /// `factors[axis]` holds the weights along that axis, in correlation order; the kernel
    /// is their outer product.
    pub factors: Vec<Vec<f64>>,
    /// The axes in the order the 1-D passes run (scipy's order for presets).
    pub pass_order: Vec<usize>,
    /// `true` for a preset (factors exact by definition), `false` for a user kernel whose
    /// rank-1 structure was found numerically.
    pub exact: bool,
}

impl Separable {
    /// The outer product of the factors, row-major: the kernel they stand for.
    pub fn outer(&self) -> Vec<f64> {
        self.factors.iter().fold(vec![1.0], |acc, f| {
            acc.iter().flat_map(|&a| f.iter().map(move |&b| a * b)).collect()
        })
    }
}

/// What the two kernel types share; `RANK` is 2 or 3.
#[derive(Clone, Debug, PartialEq)]
struct Core {
    rank: usize,
    size: usize,
    weights: Vec<f64>,
    preset: Option<Separable>,
    name: String,
}

fn op(rank: usize) -> &'static str {
    if rank == 2 {
        "filter2d"
    } else {
        "filter3d"
    }
}

fn check_size(rank: usize, k: usize) -> Result<()> {
    let fail = |why: String| Err(Error::invalid(op(rank), why));
    if k == 0 {
        return fail("kernel is empty (size 0)".into());
    }
    if k % 2 == 0 {
        return fail(format!(
            "kernel size {k} is even; kernels need an odd size so that they have a centre"
        ));
    }
    if rank == 2 && k > MAX_KERNEL_2D {
        return fail(format!(
            "kernel size {k} exceeds the maximum {MAX_KERNEL_2D} ({MAX_KERNEL_2D}×{MAX_KERNEL_2D})"
        ));
    }
    if rank == 3 && !KERNEL_3D_SIZES.contains(&k) {
        return fail(format!(
            "kernel size {k} is not supported; 3-D kernels are 3×3×3, 5×5×5 or 7×7×7"
        ));
    }
    Ok(())
}

impl Core {
    fn new(rank: usize, shape: &[usize], weights: Vec<f64>) -> Result<Self> {
        let fail = |why: String| Err(Error::invalid(op(rank), why));
        let dims = shape.iter().map(|d| d.to_string()).collect::<Vec<_>>();
        let dims = dims.join("×");
        if shape.len() != rank {
            return fail(format!(
                "kernel has rank {} ({dims}) but this filter needs rank {rank}",
                shape.len()
            ));
        }
        if shape.contains(&0) || weights.is_empty() {
            return fail(format!("kernel is empty ({dims})"));
        }
        if shape.iter().any(|&d| d != shape[0]) {
            return fail(format!("kernel must have equal sides, got {dims}"));
        }
        let k = shape[0];
        check_size(rank, k)?;
        let n = k.pow(rank as u32);
        if weights.len() != n {
            return fail(format!(
                "a {dims} kernel needs {n} weights, got {}",
                weights.len()
            ));
        }
        if let Some(i) = weights.iter().position(|w| !w.is_finite()) {
            let idx: Vec<String> = (0..rank)
                .rev()
                .map(|d| (i / k.pow(d as u32) % k).to_string())
                .collect();
            return fail(format!(
                "weight [{}] is {}; kernel weights must be finite",
                idx.join(", "),
                weights[i]
            ));
        }
        Ok(Core {
            rank,
            size: k,
            weights,
            preset: None,
            name: format!("user {dims}"),
        })
    }

    fn from_factors(rank: usize, name: &str, factors: Vec<Vec<f64>>, order: Vec<usize>) -> Self {
        let sep = Separable {
            factors,
            pass_order: order,
            exact: true,
        };
        Core {
            rank,
            size: sep.factors[0].len(),
            weights: sep.outer(),
            preset: Some(sep),
            name: name.into(),
        }
    }

    fn stencil(rank: usize, name: &str, weights: Vec<f64>) -> Self {
        Core {
            rank,
            size: 3,
            weights,
            preset: None,
            name: name.into(),
        }
    }

    fn separable(&self, tol: f64) -> Option<Separable> {
        if let Some(s) = &self.preset {
            return Some(s.clone());
        }
        let (k, w) = (self.size, &self.weights);
        let (pivot, &max) = w
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))?;
        if max == 0.0 {
            return None;
        }
        // Index of the pivot along each axis; each factor is the line through the pivot.
        let stride = |d: usize| k.pow((self.rank - 1 - d) as u32);
        let at = |d: usize| pivot / stride(d) % k;
        let mut factors: Vec<Vec<f64>> = (0..self.rank)
            .map(|d| {
                (0..k)
                    .map(|i| {
                        let j = pivot - at(d) * stride(d) + i * stride(d);
                        if d == 0 {
                            w[j]
                        } else {
                            w[j] / max
                        }
                    })
                    .collect()
            })
            .collect();
        let approx = Separable {
            factors: factors.clone(),
            pass_order: (0..self.rank).collect(),
            exact: false,
        }
        .outer();
        let err = approx
            .iter()
            .zip(w)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        if err > tol * max.abs() {
            return None;
        }
        // Factors that sum to (nearly) zero run last; the others are normalised to sum 1,
        // the scale moving into the last pass, so that `constant` padding between passes
        // is what correlate would read.
        let zero_sum =
            |f: &Vec<f64>| f.iter().sum::<f64>().abs() <= 1e-12 * f.iter().map(|x| x.abs()).sum::<f64>();
        let mut order: Vec<usize> = (0..self.rank).filter(|&d| !zero_sum(&factors[d])).collect();
        order.extend((0..self.rank).filter(|&d| zero_sum(&factors[d])));
        let last = order[self.rank - 1];
        let mut scale = 1.0;
        for &d in &order[..self.rank - 1] {
            let s: f64 = factors[d].iter().sum();
            if !zero_sum(&factors[d]) {
                factors[d].iter_mut().for_each(|x| *x /= s);
                scale *= s;
            }
        }
        factors[last].iter_mut().for_each(|x| *x *= scale);
        Some(Separable {
            factors,
            pass_order: order,
            exact: false,
        })
    }

    fn separable_for(&self, mode: BoundaryMode) -> Option<Separable> {
        let s = self.separable(SEPARABLE_TOLERANCE)?;
        if s.exact || mode.cval().unwrap_or(0.0) == 0.0 {
            return Some(s);
        }
        let n = s.pass_order.len();
        let sums_to_one = s.pass_order[..n - 1]
            .iter()
            .all(|&d| (s.factors[d].iter().sum::<f64>() - 1.0).abs() <= 1e-12);
        sums_to_one.then_some(s)
    }
}

/// scipy's `_gaussian_kernel1d(sigma, 0, radius)`: `exp(-0.5 / sigma² * x²)` for
/// `x = -radius..=radius`, divided by its sum (numpy's pairwise summation, reproduced).
pub fn gaussian_kernel1d(sigma: f64, radius: usize) -> Vec<f64> {
    let c = -0.5 / (sigma * sigma);
    let r = radius as i64;
    let phi: Vec<f64> = (-r..=r).map(|x| (c * (x * x) as f64).exp()).collect();
    let sum = numpy_sum(&phi);
    phi.iter().map(|p| p / sum).collect()
}

/// numpy's pairwise sum (`pairwise_sum`: 8 partial sums up to 128 elements, halves split
/// at a multiple of 8 above).
fn numpy_sum(a: &[f64]) -> f64 {
    if a.len() < 8 {
        return a.iter().fold(0.0, |s, &x| s + x);
    }
    if a.len() > 128 {
        let mut n2 = a.len() / 2;
        n2 -= n2 % 8;
        return numpy_sum(&a[..n2]) + numpy_sum(&a[n2..]);
    }
    let mut r = [0.0; 8];
    r.copy_from_slice(&a[..8]);
    let blocks = a.len() - a.len() % 8;
    for chunk in a[8..blocks].chunks_exact(8) {
        for (r, &x) in r.iter_mut().zip(chunk) {
            *r += x;
        }
    }
    let mut s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for &x in &a[blocks..] {
        s += x;
    }
    s
}

/// Parses `box:K` / `gaussian:SIGMA` into 1-D factors for a kernel of rank `rank`.
fn parse_separable_preset(rank: usize, spec: &str) -> Option<Result<(String, Vec<f64>)>> {
    let bad = |why: String| Some(Err(Error::invalid(op(rank), why)));
    if let Some(v) = spec.strip_prefix("box:") {
        let Ok(k) = v.trim().parse::<usize>() else {
            return bad(format!("`{spec}`: K must be a positive odd integer"));
        };
        if let Err(e) = check_size(rank, k) {
            return Some(Err(e));
        }
        return Some(Ok((format!("box:{k}"), vec![1.0 / k as f64; k])));
    }
    let v = spec.strip_prefix("gaussian:")?;
    let sigma = match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => s,
        _ => return bad(format!("`{spec}`: SIGMA must be a finite number > 0")),
    };
    let radius = (GAUSSIAN_TRUNCATE * sigma + 0.5) as usize;
    let k = 2 * radius + 1;
    let max_r = if rank == 2 { MAX_KERNEL_2D / 2 } else { 3 };
    let min_r = if rank == 2 { 0 } else { 1 };
    if radius > max_r || radius < min_r {
        let lo = (min_r as f64 - 0.5) / GAUSSIAN_TRUNCATE;
        let hi = (max_r as f64 + 0.5) / GAUSSIAN_TRUNCATE;
        return bad(format!(
            "`{spec}` has radius int(4.0*{sigma}+0.5) = {radius}, a size-{k} kernel; \
             {}-D gaussians need {lo} <= sigma < {hi}",
            rank
        ));
    }
    let g = gaussian_kernel1d(sigma, radius);
    Some(Ok((format!("gaussian:{sigma}"), g)))
}

macro_rules! kernel_common {
    ($t:ident) => {
        impl $t {
            /// The side `k` of the kernel.
            pub fn size(&self) -> usize {
                self.0.size
            }

            /// `k / 2`: how far the kernel reaches from its centre.
            pub fn radius(&self) -> usize {
                self.0.size / 2
            }

            /// The weights, row-major (the last axis fastest), in correlation order.
            pub fn weights(&self) -> &[f64] {
                &self.0.weights
            }

            /// The preset spelling (`gaussian:2`) or `user KxK...` for a user kernel.
            pub fn name(&self) -> &str {
                &self.0.name
            }

            /// The 1-D factors when the kernel is rank-1: exact for presets, found with
            /// [`SEPARABLE_TOLERANCE`] for user kernels.
            pub fn separable(&self) -> Option<Separable> {
                self.0.separable(SEPARABLE_TOLERANCE)
            }

            /// As [`Self::separable`], with a rank-1 tolerance `tol` relative to the largest
            /// |weight| (ignored for presets, which are exact).
            pub fn separable_with_tolerance(&self, tol: f64) -> Option<Separable> {
                self.0.separable(tol)
            }

            /// The factors to run as 1-D passes under `mode`, or `None` where the kernel
            /// must be applied directly. Presets always run separably (that is their scipy
            /// definition). A separable user kernel does too, except under `constant` with
            /// a non-zero cval when a pass before the last cannot be normalised to sum 1:
            /// there per-pass padding would differ from `correlate`'s.
            pub fn separable_for(&self, mode: BoundaryMode) -> Option<Separable> {
                self.0.separable_for(mode)
            }
        }

        impl FromStr for $t {
            type Err = Error;

            /// Parses a preset name; see [`Self::preset`].
            fn from_str(s: &str) -> Result<Self> {
                $t::preset(s)
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0.name)
            }
        }
    };
}

/// A validated `k×k` correlation kernel (`k` odd, 1..=31, finite weights).
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel2D(Core);

kernel_common!(Kernel2D);

impl Kernel2D {
    /// The preset names [`Kernel2D::preset`] accepts.
    pub const PRESETS: &'static str = "cross4, box:K, gaussian:SIGMA, sobel-x, sobel-y, laplacian, sharpen";

    /// A user kernel of `shape` (must be `[k, k]`) with row-major `weights`. Rejects empty,
    /// non-square, even or oversized shapes and NaN/Inf weights with
    /// [`Error::InvalidArgument`] saying which.
    pub fn new(shape: [usize; 2], weights: Vec<f64>) -> Result<Self> {
        Core::new(2, &shape, weights).map(Kernel2D)
    }

    /// A preset (case-insensitive):
    /// - `cross4`: the 4-neighbour average `[[0,.25,0],[.25,0,.25],[0,.25,0]]`;
    /// - `box:K`: the K×K mean, K odd (scipy `uniform_filter(size=K)`);
    /// - `gaussian:SIGMA`: scipy `gaussian_filter(sigma, truncate=4.0)`, radius
    ///   `int(4*sigma+0.5)` (so sigma < 3.875 for k <= 31);
    /// - `sobel-x`: scipy `sobel(axis=1)`, the derivative along x = the column index (axis
    ///   1, left to right) `[[-1,0,1],[-2,0,2],[-1,0,1]]`, positive where intensity grows to
    ///   the right; `sobel-y`: scipy `sobel(axis=0)`, along y = the row index (downwards),
    ///   `[[-1,-2,-1],[0,0,0],[1,2,1]]`;
    /// - `laplacian`: `[[0,1,0],[1,-4,1],[0,1,0]]`; `sharpen`: `[[0,-1,0],[-1,5,-1],[0,-1,0]]`.
    pub fn preset(spec: &str) -> Result<Self> {
        let s = spec.trim().to_ascii_lowercase();
        let stencil = |w: [f64; 9]| Kernel2D(Core::stencil(2, &s, w.to_vec()));
        let (d, sm) = (vec![-1.0, 0.0, 1.0], vec![1.0, 2.0, 1.0]);
        Ok(match s.as_str() {
            "cross4" => stencil([0.0, 0.25, 0.0, 0.25, 0.0, 0.25, 0.0, 0.25, 0.0]),
            "laplacian" => stencil([0.0, 1.0, 0.0, 1.0, -4.0, 1.0, 0.0, 1.0, 0.0]),
            "sharpen" => stencil([0.0, -1.0, 0.0, -1.0, 5.0, -1.0, 0.0, -1.0, 0.0]),
            // scipy.ndimage.sobel: the derivative pass along `axis` first, then smoothing.
            "sobel-x" => Kernel2D(Core::from_factors(2, &s, vec![sm, d], vec![1, 0])),
            "sobel-y" => Kernel2D(Core::from_factors(2, &s, vec![d, sm], vec![0, 1])),
            _ => match parse_separable_preset(2, &s) {
                Some(r) => {
                    let (name, f) = r?;
                    Kernel2D(Core::from_factors(2, &name, vec![f.clone(), f], vec![0, 1]))
                }
                None => {
                    return Err(Error::invalid(
                        "filter2d",
                        format!("unknown kernel `{spec}`; presets: {}", Self::PRESETS),
                    ))
                }
            },
        })
    }

    /// The weight at row `a`, column `b`.
    pub fn at(&self, a: usize, b: usize) -> f64 {
        self.0.weights[a * self.0.size + b]
    }
}

/// A validated `k×k×k` correlation kernel (`k` in 3, 5, 7; finite weights).
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel3D(Core);

kernel_common!(Kernel3D);

impl Kernel3D {
    /// The preset names [`Kernel3D::preset`] accepts.
    pub const PRESETS: &'static str = "box:K (K = 3, 5, 7), gaussian:SIGMA, laplacian";

    /// A user kernel of `shape` (must be `[k, k, k]`, `k` in 3, 5, 7) with row-major
    /// `weights`; rejects what [`Kernel2D::new`] rejects.
    pub fn new(shape: [usize; 3], weights: Vec<f64>) -> Result<Self> {
        Core::new(3, &shape, weights).map(Kernel3D)
    }

    /// A preset (case-insensitive): `box:K` (K in 3, 5, 7; scipy `uniform_filter`),
    /// `gaussian:SIGMA` (scipy `gaussian_filter`, truncate 4.0: radius 1..=3, so
    /// 0.125 <= sigma < 0.875), `laplacian` (the 7-point stencil: -6 at the centre, 1 at
    /// the six face neighbours).
    pub fn preset(spec: &str) -> Result<Self> {
        let s = spec.trim().to_ascii_lowercase();
        if s == "laplacian" {
            let mut w = vec![0.0; 27];
            for i in [4, 10, 12, 14, 16, 22] {
                w[i] = 1.0;
            }
            w[13] = -6.0;
            return Ok(Kernel3D(Core::stencil(3, &s, w)));
        }
        match parse_separable_preset(3, &s) {
            Some(r) => {
                let (name, f) = r?;
                let factors = vec![f.clone(), f.clone(), f];
                Ok(Kernel3D(Core::from_factors(3, &name, factors, vec![0, 1, 2])))
            }
            None => Err(Error::invalid(
                "filter3d",
                format!("unknown kernel `{spec}`; presets: {}", Self::PRESETS),
            )),
        }
    }

    /// The weight at plane `a`, row `b`, column `c`.
    pub fn at(&self, a: usize, b: usize, c: usize) -> f64 {
        let k = self.0.size;
        self.0.weights[(a * k + b) * k + c]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each mode's reading of `1 2 3` extended by 4 on each side (indices -4..=6), worked
    /// out by hand from scipy's documented extensions.
    #[test]
    fn mode_extensions_of_a_length_3_signal() {
        let x = [1, 2, 3];
        let ext = |m: BoundaryMode| -> Vec<i32> {
            (-4..=6).map(|i| m.map_index(i, 3).map_or(0, |j| x[j])).collect()
        };
        assert_eq!(ext(BoundaryMode::Reflect), [3, 3, 2, 1, 1, 2, 3, 3, 2, 1, 1]);
        assert_eq!(ext(BoundaryMode::Mirror), [1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3]);
        assert_eq!(ext(BoundaryMode::Wrap), [3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1]);
        assert_eq!(ext(BoundaryMode::Nearest), [1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3]);
        assert_eq!(
            ext(BoundaryMode::Constant(0.0)),
            [0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0]
        );
    }

    #[test]
    fn far_outside_and_size_one_axes() {
        use BoundaryMode::*;
        for m in [Reflect, Mirror, Wrap, Nearest] {
            for i in [-1000, -13, -1, 1, 7, 999] {
                assert_eq!(m.map_index(i, 1), Some(0), "{m} {i}");
            }
        }
        assert_eq!(Constant(0.0).map_index(-1, 1), None);
        // Periods: reflect 2n, mirror 2n-2, wrap n, far from the image.
        for i in -40..40 {
            let r = Reflect.map_index(i, 4);
            assert_eq!(r, Reflect.map_index(i + 8 * 7, 4));
            assert_eq!(Mirror.map_index(i, 4), Mirror.map_index(i - 6 * 9, 4));
            assert_eq!(Wrap.map_index(i, 4), Some(i.rem_euclid(4) as usize));
        }
        // scipy's n-D correlate maps reflect index -4n to -1 (out of bounds); the periodic
        // definition (and scipy's correlate1d) reads index 0.
        assert_eq!(Reflect.map_index(-12, 3), Some(0));
        assert_eq!(Reflect.map_index(0, 0), None);
    }

    #[test]
    fn mode_parsing() {
        assert_eq!(
            "reflect".parse::<BoundaryMode>().ok(),
            Some(BoundaryMode::Reflect)
        );
        assert_eq!(
            " Mirror ".parse::<BoundaryMode>().ok(),
            Some(BoundaryMode::Mirror)
        );
        assert_eq!(
            "constant:2.5".parse::<BoundaryMode>().ok(),
            Some(BoundaryMode::Constant(2.5))
        );
        assert_eq!(BoundaryMode::default(), BoundaryMode::Reflect);
        for m in [
            "reflect",
            "mirror",
            "nearest",
            "wrap",
            "constant",
            "constant:-1.5",
        ] {
            let p: BoundaryMode = m.parse().expect(m);
            assert_eq!(p.to_string(), m);
        }
        let e = "edge".parse::<BoundaryMode>().unwrap_err().to_string();
        assert!(
            e.contains("unknown mode `edge`") && e.contains("mirror, wrap"),
            "{e}"
        );
        assert!("constant:nan".parse::<BoundaryMode>().is_err());
    }

    fn reason(r: Result<impl fmt::Debug>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn kernel_validation_says_why() {
        assert!(reason(Kernel2D::new([4, 4], vec![1.0; 16])).contains("size 4 is even"));
        assert!(reason(Kernel2D::new([0, 0], vec![])).contains("empty"));
        assert!(reason(Kernel2D::new([33, 33], vec![1.0; 1089])).contains("maximum 31"));
        assert!(reason(Kernel2D::new([3, 5], vec![1.0; 15])).contains("equal sides"));
        assert!(reason(Kernel2D::new([3, 3], vec![1.0; 8])).contains("needs 9 weights"));
        let mut w = vec![1.0; 9];
        w[5] = f64::NAN;
        assert!(reason(Kernel2D::new([3, 3], w)).contains("weight [1, 2] is NaN"));
        let mut w = vec![1.0; 27];
        w[26] = f64::INFINITY;
        assert!(reason(Kernel3D::new([3, 3, 3], w)).contains("[2, 2, 2] is inf"));
        assert!(reason(Kernel3D::new([9, 9, 9], vec![1.0; 729])).contains("3×3×3, 5×5×5"));
        assert!(reason(Kernel3D::new([1, 1, 1], vec![1.0])).contains("not supported"));
        assert!(Kernel2D::new([1, 1], vec![2.0]).is_ok());
        assert!(reason(Kernel2D::preset("gaussian:4")).contains("sigma < 3.875"));
        assert!(reason(Kernel2D::preset("gaussian:-1")).contains("> 0"));
        assert!(reason(Kernel2D::preset("box:4")).contains("even"));
        assert!(reason(Kernel3D::preset("gaussian:1")).contains("0.125 <= sigma < 0.875"));
        assert!(reason(Kernel2D::preset("blur")).contains("presets: cross4"));
    }

    #[test]
    fn presets() {
        let k = Kernel2D::preset("cross4").expect("cross4");
        assert_eq!(k.weights(), [0.0, 0.25, 0.0, 0.25, 0.0, 0.25, 0.0, 0.25, 0.0]);
        assert!(k.separable().is_none());
        let sx = Kernel2D::preset("sobel-x").expect("sobel-x");
        assert_eq!(sx.weights(), [-1.0, 0.0, 1.0, -2.0, 0.0, 2.0, -1.0, 0.0, 1.0]);
        assert_eq!(sx.separable().map(|s| s.pass_order), Some(vec![1, 0]));
        let sy = Kernel2D::preset("SOBEL-Y").expect("sobel-y");
        assert_eq!(sy.weights(), [-1.0, -2.0, -1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 1.0]);
        let g = Kernel2D::preset("gaussian:2").expect("gaussian");
        assert_eq!((g.size(), g.radius()), (17, 8));
        assert!((g.weights().iter().sum::<f64>() - 1.0).abs() < 1e-14);
        // scipy: _gaussian_kernel1d(1, 0, 4)[4] = 1 / sum(exp(-x^2/2), x=-4..4).
        let g1 = gaussian_kernel1d(1.0, 4);
        let s: f64 = (-4..=4).map(|x: i32| (-0.5 * (x * x) as f64).exp()).sum();
        assert!((g1[4] - 1.0 / s).abs() < 1e-16 && g1[0] == g1[8]);
        assert_eq!(Kernel2D::preset("box:5").expect("box").size(), 5);
        assert_eq!(Kernel2D::preset("gaussian:0.1").expect("g").size(), 1);
        let l3 = Kernel3D::preset("laplacian").expect("laplacian");
        assert_eq!(l3.weights().iter().sum::<f64>(), 0.0);
        assert_eq!((l3.at(1, 1, 1), l3.at(0, 1, 1), l3.at(1, 1, 2)), (-6.0, 1.0, 1.0));
        assert_eq!(Kernel3D::preset("gaussian:0.3").expect("g3").size(), 3);
        assert!((Kernel3D::preset("box:7").expect("b3").weights()[0] - 1.0 / 343.0).abs() < 1e-18);
    }

    #[test]
    fn numeric_separability() {
        let (u, v) = ([1.0, -2.0, 0.5], [3.0, 1.0, -1.0]);
        let w: Vec<f64> = u.iter().flat_map(|a| v.iter().map(move |b| a * b)).collect();
        let k = Kernel2D::new([3, 3], w.clone()).expect("kernel");
        let s = k.separable().expect("rank 1");
        assert!(!s.exact);
        for (a, b) in s.outer().iter().zip(&w) {
            assert!((a - b).abs() < 1e-15);
        }
        let mut w2 = w.clone();
        w2[4] += 1e-3;
        assert!(Kernel2D::new([3, 3], w2).expect("k").separable().is_none());
        // An f32-rounded outer product still counts as separable.
        let w3: Vec<f64> = w.iter().map(|&x| (x * 0.3) as f32 as f64).collect();
        assert!(Kernel2D::new([3, 3], w3).expect("k").separable().is_some());
        // A derivative-of-derivative kernel cannot keep correlate's constant padding.
        let dd = [1.0, 0.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 1.0];
        let k = Kernel2D::new([3, 3], dd.to_vec()).expect("k");
        assert!(k.separable_for(BoundaryMode::Constant(0.0)).is_some());
        assert!(k.separable_for(BoundaryMode::Constant(1.0)).is_none());
        // A zero-sum factor runs last so the others can be normalised.
        let sk = Kernel2D::new([3, 3], [-1.0, 0.0, 1.0, -2.0, 0.0, 2.0, -1.0, 0.0, 1.0].to_vec()).expect("k");
        let s = sk.separable_for(BoundaryMode::Constant(3.0)).expect("sep");
        assert_eq!(s.pass_order, [0, 1]);
        assert!((s.factors[0].iter().sum::<f64>() - 1.0).abs() < 1e-15);
        let g = Kernel3D::preset("gaussian:0.8").expect("g");
        let s3 = g.separable().expect("sep");
        assert_eq!(s3.factors.len(), 3);
        let mut w = g.weights().to_vec();
        w[170] *= 1.5;
        let user = Kernel3D::new([7, 7, 7], w).expect("k");
        assert!(user.separable().is_none());
        let user = Kernel3D::new([7, 7, 7], g.weights().to_vec()).expect("k");
        assert!(user.separable().is_some_and(|s| !s.exact));
    }
}
