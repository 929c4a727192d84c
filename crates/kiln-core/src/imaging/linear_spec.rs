//! scipy.ndimage's linear functions by name with scipy's parameter names, parsed from
//! `key=value` strings: what `kiln ndimage <function> --sigma 1,2 ...` and the fixture
//! manifest (`crates/kiln/tests/fixtures/ndimage/cases.txt`) both use, so the CLI and the
//! tests build a filter the same way. Lists are comma-separated (`sigma=1,2.5`); one value
//! stands for every axis.

use super::linear::{self, GaussianOpts, LinearFilter};
use super::BoundaryMode;
use crate::error::{Error, Result};

/// The linear functions [`build`] knows, with the parameters each reads (scipy's names).
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("correlate", "weights (+ wshape), origin, axes, mode, cval"),
    ("convolve", "weights (+ wshape), origin, axes, mode, cval"),
    ("correlate1d", "weights, axis, origin, mode, cval"),
    ("convolve1d", "weights, axis, origin, mode, cval"),
    (
        "gaussian_filter",
        "sigma, order, truncate, radius, axes, mode, cval",
    ),
    (
        "gaussian_filter1d",
        "sigma, axis, order, truncate, radius, mode, cval",
    ),
    ("gaussian_laplace", "sigma, truncate, radius, axes, mode, cval"),
    (
        "gaussian_gradient_magnitude",
        "sigma, truncate, radius, axes, mode, cval",
    ),
    ("uniform_filter", "size, origin, axes, mode, cval"),
    ("uniform_filter1d", "size, axis, origin, mode, cval"),
    ("sobel", "axis, mode, cval"),
    ("prewitt", "axis, mode, cval"),
    ("laplace", "axes, mode, cval"),
];

/// Parameters by scipy's names; unset ones take scipy's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct NdParams {
    /// Gaussian sigma per axis.
    pub sigma: Vec<f64>,
    /// Gaussian derivative order per axis.
    pub order: Vec<usize>,
    /// Gaussian truncate (default 4.0).
    pub truncate: f64,
    /// Gaussian radius per axis (overrides truncate).
    pub radius: Option<Vec<usize>>,
    /// uniform_filter size per axis (default 3).
    pub size: Vec<usize>,
    /// origin per axis (default 0).
    pub origin: Vec<isize>,
    /// The axis of 1-D functions, sobel and prewitt (default -1).
    pub axis: isize,
    /// The axes filtered (default: all).
    pub axes: Option<Vec<isize>>,
    /// Kernel weights (row-major).
    pub weights: Option<Vec<f64>>,
    /// Kernel shape (default: 1-D, or one side per filtered axis for a square/cube).
    pub wshape: Option<Vec<usize>>,
    /// Boundary mode name (default reflect).
    pub mode: String,
    /// cval under constant modes (default 0).
    pub cval: f64,
}

impl Default for NdParams {
    fn default() -> Self {
        NdParams {
            sigma: vec![],
            order: vec![0],
            truncate: 4.0,
            radius: None,
            size: vec![3],
            origin: vec![0],
            axis: -1,
            axes: None,
            weights: None,
            wshape: None,
            mode: "reflect".into(),
            cval: 0.0,
        }
    }
}

fn list<T: std::str::FromStr>(key: &str, v: &str) -> Result<Vec<T>> {
    v.split(',')
        .map(|s| {
            s.trim().parse::<T>().map_err(|_| {
                Error::invalid(
                    format!("--{key}"),
                    format!("`{v}` is not a comma-separated list of numbers of the right kind"),
                )
            })
        })
        .collect()
}

impl NdParams {
    /// Sets parameter `key` (scipy's name) from its string form.
    pub fn set(&mut self, key: &str, v: &str) -> Result<()> {
        let one = |k: &str, v: &str| -> Result<f64> {
            v.trim()
                .parse::<f64>()
                .map_err(|_| Error::invalid(format!("--{k}"), format!("`{v}` is not a number")))
        };
        match key {
            "sigma" => self.sigma = list(key, v)?,
            "order" => self.order = list(key, v)?,
            "truncate" => self.truncate = one(key, v)?,
            "radius" => self.radius = Some(list(key, v)?),
            "size" => self.size = list(key, v)?,
            "origin" => self.origin = list(key, v)?,
            "axis" => {
                self.axis = v
                    .trim()
                    .parse()
                    .map_err(|_| Error::invalid("--axis", format!("`{v}` is not an integer")))?
            }
            "axes" => self.axes = Some(list(key, v)?),
            "weights" => self.weights = Some(list(key, v)?),
            "wshape" => self.wshape = Some(list(key, v)?),
            "mode" => self.mode = v.trim().to_string(),
            "cval" => self.cval = one(key, v)?,
            _ => return Err(Error::invalid("ndimage", format!("unknown parameter `{key}`"))),
        }
        Ok(())
    }

    /// The boundary mode from `mode` and `cval` (scipy's names, `grid-*` synonyms too).
    pub fn boundary(&self) -> Result<BoundaryMode> {
        let m: BoundaryMode = self.mode.parse()?;
        if !self.cval.is_finite() {
            return Err(Error::invalid("--cval", "cval must be finite"));
        }
        Ok(match m {
            BoundaryMode::Constant(c) if self.mode.contains(':') => BoundaryMode::Constant(c),
            BoundaryMode::Constant(_) => BoundaryMode::Constant(self.cval),
            other => other,
        })
    }

    fn weights(&self, f: &str) -> Result<&[f64]> {
        self.weights
            .as_deref()
            .ok_or_else(|| Error::invalid(f, "needs weights (--weights a,b,c or a .npy file)"))
    }

    fn sigma(&self, f: &str) -> Result<&[f64]> {
        if self.sigma.is_empty() {
            return Err(Error::invalid(f, "needs --sigma"));
        }
        Ok(&self.sigma)
    }
}

/// The filter `function` (one of [`FUNCTIONS`]) with parameters `p` for rank-`ndim` data.
pub fn build(function: &str, ndim: usize, p: &NdParams) -> Result<LinearFilter> {
    let mode = p.boundary()?;
    let axes = p.axes.as_deref();
    let gopts = GaussianOpts {
        order: p.order.clone(),
        truncate: p.truncate,
        radius: p.radius.clone(),
    };
    let origin1 = || -> Result<isize> {
        match p.origin.as_slice() {
            [o] => Ok(*o),
            o => Err(Error::invalid(
                function,
                format!("a 1-D filter takes one origin, got {o:?}"),
            )),
        }
    };
    match function {
        "correlate" | "convolve" => {
            let w = p.weights(function)?;
            let naxes = axes.map_or(ndim, <[isize]>::len);
            let shape = match &p.wshape {
                Some(s) => s.clone(),
                None => {
                    let side = (w.len() as f64).powf(1.0 / naxes as f64).round() as usize;
                    if side.pow(naxes as u32) != w.len() {
                        return Err(Error::invalid(
                            function,
                            format!("{} weights are not a square/cube kernel; give wshape", w.len()),
                        ));
                    }
                    vec![side; naxes]
                }
            };
            if function == "correlate" {
                linear::correlate(ndim, w, &shape, &p.origin, axes, mode)
            } else {
                linear::convolve(ndim, w, &shape, &p.origin, axes, mode)
            }
        }
        "correlate1d" => linear::correlate1d(ndim, p.weights(function)?, p.axis, origin1()?, mode),
        "convolve1d" => linear::convolve1d(ndim, p.weights(function)?, p.axis, origin1()?, mode),
        "gaussian_filter" => linear::gaussian_filter(ndim, p.sigma(function)?, &gopts, axes, mode),
        "gaussian_filter1d" => {
            linear::gaussian_filter(ndim, p.sigma(function)?, &gopts, Some(&[p.axis]), mode)
        }
        "gaussian_laplace" => linear::gaussian_laplace(ndim, p.sigma(function)?, &gopts, axes, mode),
        "gaussian_gradient_magnitude" => {
            linear::gaussian_gradient_magnitude(ndim, p.sigma(function)?, &gopts, axes, mode)
        }
        "uniform_filter" => linear::uniform_filter(ndim, &p.size, &p.origin, axes, mode),
        "uniform_filter1d" => {
            let size = match p.size.as_slice() {
                [s] => *s,
                s => return Err(Error::invalid(function, format!("takes one size, got {s:?}"))),
            };
            linear::uniform_filter(ndim, &[size], &[origin1()?], Some(&[p.axis]), mode)
        }
        "sobel" => linear::sobel(ndim, p.axis, mode),
        "prewitt" => linear::prewitt(ndim, p.axis, mode),
        "laplace" => linear::laplace(ndim, axes, mode),
        _ => {
            let names: Vec<&str> = FUNCTIONS.iter().map(|f| f.0).collect();
            Err(Error::invalid(
                "ndimage",
                format!(
                    "unknown function `{function}`; linear functions: {}",
                    names.join(", ")
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::imaging::linear::{Combine, Term};

    fn spec(f: &str, ndim: usize, kv: &str) -> Result<LinearFilter> {
        let mut p = NdParams::default();
        for t in kv.split_whitespace() {
            let (k, v) = t.split_once('=').unwrap_or((t, ""));
            p.set(k, v)?;
        }
        build(f, ndim, &p)
    }

    fn passes(f: &LinearFilter) -> Vec<(usize, usize, usize)> {
        match &f.terms[0] {
            Term::Passes(p) => p.iter().map(|p| (p.axis, p.weights.len(), p.anchor)).collect(),
            Term::Direct(_) => vec![],
        }
    }

    #[test]
    fn origins_follow_scipy() {
        // size 4, origin 0: anchor 2; origin -2 and 1 are the limits
        let f = spec("correlate1d", 2, "weights=1,2,3,4 axis=0").unwrap();
        assert_eq!(passes(&f), [(1, 4, 2)]);
        assert!(spec("correlate1d", 2, "weights=1,2,3,4 origin=-2").is_ok());
        assert!(spec("correlate1d", 2, "weights=1,2,3,4 origin=1").is_ok());
        let e = spec("correlate1d", 2, "weights=1,2,3,4 origin=2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("-2 <= origin <= 1"), "{e}");
        // convolve1d reverses and places an even kernel one further: anchor 4-1-2 = 1
        let c = spec("convolve1d", 2, "weights=1,2,3,4 axis=-1").unwrap();
        match &c.terms[0] {
            Term::Passes(p) => {
                assert_eq!(p[0].weights, [4.0, 3.0, 2.0, 1.0]);
                assert_eq!((p[0].axis, p[0].anchor), (2, 1));
            }
            _ => panic!("passes"),
        }
    }

    #[test]
    fn direct_kernels_keep_their_shape_and_axes() {
        let f = spec("correlate", 2, "weights=1,2,3,4,5,6 wshape=2,3 origin=-1,1").unwrap();
        match &f.terms[0] {
            Term::Direct(k) => {
                assert_eq!(k.shape, [1, 2, 3]);
                assert_eq!(k.anchors, [0, 0, 2]);
                assert!(!k.is_centred());
            }
            _ => panic!("direct"),
        }
        // axes (2, 0) of a volume: as scipy, the kernel's axes lie on axes 0 and 2 in that
        // order, and origin i on axes[i]
        let f = spec(
            "correlate",
            3,
            "weights=1,2,3,4,5,6 wshape=2,3 axes=2,0 origin=1,0",
        )
        .unwrap();
        match &f.terms[0] {
            Term::Direct(k) => {
                assert_eq!(k.shape, [2, 1, 3]);
                assert_eq!(k.weights, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
                assert_eq!(k.anchors, [1, 0, 2]);
            }
            _ => panic!("direct"),
        }
        // convolve flips every axis; an even axis moves one more
        let f = spec("convolve", 2, "weights=1,2,3,4 wshape=2,2").unwrap();
        match &f.terms[0] {
            Term::Direct(k) => {
                assert_eq!(k.weights, [4.0, 3.0, 2.0, 1.0]);
                assert_eq!(k.anchors, [0, 0, 0]);
            }
            _ => panic!("direct"),
        }
        assert!(spec("correlate", 2, "weights=1,2,3")
            .unwrap_err()
            .to_string()
            .contains("wshape"));
    }

    #[test]
    fn gaussians_like_scipy() {
        // sigma 1 on a 3-D volume: radius 4 on every axis (filter3d used to refuse this)
        let f = spec("gaussian_filter", 3, "sigma=1").unwrap();
        assert_eq!(passes(&f), [(0, 9, 4), (1, 9, 4), (2, 9, 4)]);
        let f = spec("gaussian_filter", 2, "sigma=2,0 truncate=2.5").unwrap();
        assert_eq!(passes(&f), [(1, 11, 5)]);
        let f = spec("gaussian_filter", 2, "sigma=1 radius=2,7").unwrap();
        assert_eq!(passes(&f), [(1, 5, 2), (2, 15, 7)]);
        // derivative weights (correlation order): order 1 sums to 0 and sum(x*w) = -1 ...
        let w = crate::imaging::linear::gaussian_weights(2.0, 1, 12);
        let s: f64 = w.iter().sum();
        let m: f64 = w.iter().enumerate().map(|(i, v)| (i as f64 - 12.0) * v).sum();
        assert!(s.abs() < 1e-15 && (m - 1.0).abs() < 1e-6, "{s} {m}");
        // ... order 2: sum(x^2 w) / 2 = 1
        let w = crate::imaging::linear::gaussian_weights(2.0, 2, 16);
        let m2: f64 = w
            .iter()
            .enumerate()
            .map(|(i, v)| (i as f64 - 16.0).powi(2) * v)
            .sum();
        assert!((m2 / 2.0 - 1.0).abs() < 1e-5, "{m2}");
        let l = spec("gaussian_laplace", 3, "sigma=1").unwrap();
        assert_eq!((l.terms.len(), l.combine), (3, Combine::Sum));
        let g = spec("gaussian_gradient_magnitude", 2, "sigma=1 axes=1").unwrap();
        assert_eq!((g.terms.len(), g.combine), (1, Combine::Magnitude));
        assert!(spec("gaussian_filter", 2, "sigma=1,2,3").is_err());
        assert!(spec("gaussian_filter", 2, "")
            .unwrap_err()
            .to_string()
            .contains("--sigma"));
    }

    #[test]
    fn derivative_and_uniform_filters() {
        let s = spec("sobel", 3, "axis=1").unwrap();
        assert_eq!(passes(&s), [(1, 3, 1), (0, 3, 1), (2, 3, 1)]);
        let u = spec("uniform_filter", 2, "size=4,1 origin=-2,0").unwrap();
        assert_eq!(passes(&u), [(1, 4, 0)]);
        let l = spec("laplace", 2, "").unwrap();
        assert_eq!(l.terms.len(), 2);
        assert!(spec("sobel", 2, "axis=2").is_err());
        let e = spec("median_filter", 2, "").unwrap_err().to_string();
        assert!(
            e.contains("unknown function") && e.contains("gaussian_filter"),
            "{e}"
        );
    }

    #[test]
    fn grid_modes_are_scipy_synonyms() {
        for (name, want) in [
            ("grid-wrap", BoundaryMode::Wrap),
            ("grid-mirror", BoundaryMode::Reflect),
            ("grid-constant", BoundaryMode::Constant(0.0)),
        ] {
            assert_eq!(name.parse::<BoundaryMode>().unwrap(), want);
        }
        let mut p = NdParams::default();
        p.set("mode", "grid-constant").unwrap();
        p.set("cval", "2.5").unwrap();
        assert_eq!(p.boundary().unwrap(), BoundaryMode::Constant(2.5));
    }
}
