//! Interpolation for `kiln ndimage`: scipy.ndimage's `zoom`, `shift`, `rotate`,
//! `affine_transform`, `spline_filter` and `spline_filter1d`, planned from the command's
//! flags (scipy's parameter names and defaults) and run through
//! `kiln::ndimage::scipy_interp` on the runtime's device (the CPU and CUDA give the same
//! bits). The files are read and written in `ndimage_interp_io.rs`; the output's shape may
//! differ from the input's.

use crate::filter_cmd::invalid;
use crate::ndimage_cmd::Args;
use crate::ndimage_header::IndexMap;
use kiln::ndimage::scipy_interp::{self as si, AffineMatrix, InterpOptions};
use kiln::ndimage::InterpMode;
use kiln::{DType, Runtime, Tensor};

/// The functions planned here and the flags each reads (for `--help` and errors).
pub(crate) const INTERP_FUNCTIONS: &[(&str, &str)] = &[
    (
        "zoom",
        "--zoom, --order, --mode, --cval, --prefilter, --grid-mode",
    ),
    ("shift", "--shift, --order, --mode, --cval, --prefilter"),
    (
        "rotate",
        "--angle, --axes, --reshape, --order, --mode, --cval, --prefilter",
    ),
    (
        "affine_transform",
        "--matrix, --offset, --output-shape, --order, --mode, --cval, --prefilter",
    ),
    ("spline_filter", "--order, --mode"),
    ("spline_filter1d", "--order, --axis, --mode"),
];

/// Whether `name` is one of [`INTERP_FUNCTIONS`].
pub(crate) fn is_interp(name: &str) -> bool {
    INTERP_FUNCTIONS.iter().any(|f| f.0 == name)
}

/// The interpolation-only flags the command got (refused by the other functions).
pub(crate) fn interp_flags_given(a: &Args) -> Vec<&'static str> {
    [
        ("--zoom", a.zoom.is_some()),
        ("--shift", a.shift.is_some()),
        ("--angle", a.angle.is_some()),
        ("--reshape", a.reshape.is_some()),
        ("--matrix", a.matrix.is_some()),
        ("--offset", a.offset.is_some()),
        ("--output-shape", a.output_shape.is_some()),
        ("--prefilter", a.prefilter.is_some()),
        ("--grid-mode", a.grid_mode.is_some()),
    ]
    .into_iter()
    .filter(|f| f.1)
    .map(|f| f.0)
    .collect()
}

/// What a function becomes, before the data's rank is known.
#[derive(Debug, Clone)]
pub(crate) enum InterpFn {
    Zoom {
        zoom: Vec<f64>,
        grid_mode: bool,
    },
    Shift(Vec<f64>),
    Rotate {
        angle: f64,
        axes: [isize; 2],
        reshape: bool,
    },
    Affine {
        matrix: AffineMatrix,
        offset: Vec<f64>,
        output_shape: Option<Vec<usize>>,
    },
    SplineFilter,
    SplineFilter1d {
        axis: isize,
    },
}

/// A planned interpolation.
#[derive(Debug, Clone)]
pub(crate) struct InterpPlan {
    pub name: String,
    pub f: InterpFn,
    pub opts: InterpOptions,
    pub mode_name: String,
}

fn floats(flag: &str, v: &str) -> anyhow::Result<Vec<f64>> {
    let vals = v
        .split(',')
        .map(|s| s.trim().parse::<f64>())
        .collect::<Result<Vec<f64>, _>>()
        .map_err(|_| invalid(flag, format!("`{v}` is not a comma-separated list of numbers")))?;
    if let Some(x) = vals.iter().find(|x| !x.is_finite()) {
        return Err(invalid(flag, format!("{x} is not a finite number")));
    }
    Ok(vals)
}

fn ints<T: std::str::FromStr>(flag: &str, v: &str) -> anyhow::Result<Vec<T>> {
    v.split(',')
        .map(|s| s.trim().parse::<T>())
        .collect::<Result<Vec<T>, _>>()
        .map_err(|_| invalid(flag, format!("`{v}` is not a comma-separated list of integers")))
}

/// The matrix of `--matrix`: a `.npy` (1-D or 2-D) or a comma list, `;` between rows.
fn matrix(v: &str) -> anyhow::Result<AffineMatrix> {
    if v.to_ascii_lowercase().ends_with(".npy") {
        let (arr, _) = kiln_io::read_npy_f64(v).map_err(crate::filter_cmd::io_error("--matrix"))?;
        if !(1..=2).contains(&arr.ndim()) {
            return Err(invalid(
                "--matrix",
                format!(
                    "{v}: a {}-D array; the matrix is 1-D (a diagonal) or 2-D",
                    arr.ndim()
                ),
            ));
        }
        let values: Vec<f64> = arr.iter().copied().collect();
        if let Some(x) = values.iter().find(|x| !x.is_finite()) {
            return Err(invalid(
                "--matrix",
                format!("{v} holds {x}; every value must be finite"),
            ));
        }
        return Ok(AffineMatrix {
            values,
            shape: arr.shape().to_vec(),
        });
    }
    let rows: Vec<Vec<f64>> = v
        .split(';')
        .map(|r| floats("--matrix", r))
        .collect::<anyhow::Result<_>>()?;
    if rows.len() == 1 {
        let n = rows[0].len();
        return Ok(AffineMatrix {
            values: rows.into_iter().flatten().collect(),
            shape: vec![n],
        });
    }
    let c = rows[0].len();
    if rows.iter().any(|r| r.len() != c) {
        return Err(invalid(
            "--matrix",
            format!("`{v}`: the rows (split by `;`) have different lengths"),
        ));
    }
    Ok(AffineMatrix {
        shape: vec![rows.len(), c],
        values: rows.into_iter().flatten().collect(),
    })
}

fn parse_bool(flag: &str, v: &Option<String>, default: bool) -> anyhow::Result<bool> {
    match v.as_deref() {
        None => Ok(default),
        Some("true" | "True" | "1") => Ok(true),
        Some("false" | "False" | "0") => Ok(false),
        Some(o) => Err(invalid(flag, format!("`{o}`: true or false"))),
    }
}

/// The function `a.function` planned from the flags (nothing read yet).
pub(crate) fn plan(a: &Args) -> anyhow::Result<InterpPlan> {
    let name = a.function.as_str();
    let (_, reads) = INTERP_FUNCTIONS
        .iter()
        .find(|f| f.0 == name)
        .ok_or_else(|| invalid("FUNCTION", format!("`{name}` is not an interpolation function")))?;
    let mut given = interp_flags_given(a);
    given.extend(crate::ndimage_label::array_flags_given(a));
    for (flag, set) in [
        ("--order", a.order.is_some()),
        ("--mode", a.mode.is_some()),
        ("--cval", a.cval.is_some()),
        ("--axis", a.axis.is_some()),
        ("--axes", a.axes.is_some()),
    ] {
        if set {
            given.push(flag);
        }
    }
    for (flag, set) in [
        ("--sigma", a.sigma.is_some()),
        ("--truncate", a.truncate.is_some()),
        ("--radius", a.radius.is_some()),
        ("--size", a.size.is_some()),
        ("--origin", a.origin.is_some()),
        ("--weights", a.weights.is_some()),
        ("--footprint", a.footprint.is_some()),
        ("--structure", a.structure.is_some()),
        ("--connectivity", a.connectivity.is_some()),
        ("--rank", a.rank.is_some()),
        ("--percentile", a.percentile.is_some()),
        ("--iterations", a.iterations.is_some()),
        ("--border-value", a.border_value.is_some()),
    ] {
        if set {
            given.push(flag);
        }
    }
    for flag in given {
        if !reads.split([',', ' ']).any(|w| w == flag) {
            return Err(invalid(
                flag,
                format!("{name} does not take {flag}; it reads: {reads}"),
            ));
        }
    }
    let spline = name.starts_with("spline_filter");
    let order = match a.order.as_deref() {
        None => 3,
        Some(o) => o
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&o| o <= 5)
            .ok_or_else(|| invalid("--order", format!("`{o}`: the spline order is 0 to 5")))?,
    };
    if name == "spline_filter" && order < 2 {
        return Err(invalid(
            "--order",
            format!("spline_filter takes orders 2 to 5 (scipy refuses {order})"),
        ));
    }
    let mode_name = a
        .mode
        .clone()
        .unwrap_or_else(|| if spline { "mirror" } else { "constant" }.to_string());
    let mode = si::interp_mode(&mode_name).map_err(|e| anyhow::Error::from(e).context("--mode"))?;
    let cval = match a.cval {
        None => 0.0,
        Some(c) if !matches!(mode, InterpMode::Constant | InterpMode::GridConstant) => {
            return Err(invalid(
                "--cval",
                format!("--cval {c} applies to --mode constant and grid-constant, not {mode_name}"),
            ))
        }
        Some(c) if !c.is_finite() => return Err(invalid("--cval", format!("{c} is not a finite number"))),
        Some(c) => c,
    };
    let prefilter = parse_bool("--prefilter", &a.prefilter, true)?;
    let need = |flag: &str, v: &Option<String>, what: &str| -> anyhow::Result<String> {
        v.clone()
            .ok_or_else(|| invalid(flag, format!("{name} needs {flag} {what} (scipy has no default)")))
    };
    let f = match name {
        "zoom" => {
            let zoom = floats("--zoom", &need("--zoom", &a.zoom, "Z[,Z..]")?)?;
            if let Some(z) = zoom.iter().find(|z| **z <= 0.0) {
                return Err(invalid("--zoom", format!("zoom {z}: every factor must be > 0")));
            }
            InterpFn::Zoom {
                zoom,
                grid_mode: parse_bool("--grid-mode", &a.grid_mode, false)?,
            }
        }
        "shift" => InterpFn::Shift(floats("--shift", &need("--shift", &a.shift, "S[,S..]")?)?),
        "rotate" => {
            let angle = a
                .angle
                .ok_or_else(|| invalid("--angle", "rotate needs --angle DEGREES (scipy has no default)"))?;
            if !angle.is_finite() {
                return Err(invalid("--angle", format!("{angle} is not a finite number")));
            }
            let axes = match a.axes.as_deref() {
                None => [1, 0],
                Some(v) => match ints::<isize>("--axes", v)?[..] {
                    [x, y] => [x, y],
                    _ => {
                        return Err(invalid(
                            "--axes",
                            format!("`{v}`: rotate's plane is two axes, e.g. 1,0"),
                        ))
                    }
                },
            };
            InterpFn::Rotate {
                angle,
                axes,
                reshape: parse_bool("--reshape", &a.reshape, true)?,
            }
        }
        "affine_transform" => {
            let m = matrix(&need("--matrix", &a.matrix, "FILE.npy|A,B;C,D")?)?;
            let offset = match &a.offset {
                Some(o) => floats("--offset", o)?,
                None => vec![0.0],
            };
            let output_shape = match &a.output_shape {
                None => None,
                Some(v) => {
                    let s = ints::<usize>("--output-shape", v)?;
                    if s.contains(&0) {
                        return Err(invalid(
                            "--output-shape",
                            format!("`{v}` has an axis of length 0; every axis needs at least 1 sample"),
                        ));
                    }
                    Some(s)
                }
            };
            InterpFn::Affine {
                matrix: m,
                offset,
                output_shape,
            }
        }
        "spline_filter" => InterpFn::SplineFilter,
        _ => InterpFn::SplineFilter1d {
            axis: match a.axis.as_deref() {
                None => -1,
                Some(v) => v
                    .trim()
                    .parse::<isize>()
                    .map_err(|_| invalid("--axis", format!("`{v}` is not an integer")))?,
            },
        },
    };
    Ok(InterpPlan {
        name: name.to_string(),
        f,
        opts: InterpOptions {
            order,
            mode,
            cval,
            prefilter,
        },
        mode_name,
    })
}

/// One value for every axis, or one per axis.
fn per_axis(flag: &str, v: &[f64], ndim: usize) -> anyhow::Result<Vec<f64>> {
    match v.len() {
        1 => Ok(vec![v[0]; ndim]),
        n if n == ndim => Ok(v.to_vec()),
        n => Err(invalid(
            flag,
            format!("{n} values for {ndim}-D data (give one, or one per axis)"),
        )),
    }
}

impl InterpPlan {
    /// The output shape for an input of `shape` (checks what depends on the rank).
    pub(crate) fn output_shape(&self, shape: &[usize]) -> anyhow::Result<Vec<usize>> {
        let ndim = shape.len();
        Ok(match &self.f {
            InterpFn::Zoom { zoom, .. } => si::zoom_shape(shape, &per_axis("--zoom", zoom, ndim)?)
                .map_err(|e| anyhow::Error::from(e).context("--zoom"))?,
            InterpFn::Shift(s) => {
                per_axis("--shift", s, ndim)?;
                shape.to_vec()
            }
            InterpFn::Rotate { angle, axes, reshape } => {
                let p = si::rotate_plan(shape, *angle, *axes, *reshape)
                    .map_err(|e| anyhow::Error::from(e).context("--axes"))?;
                if p.output_shape.contains(&0) {
                    return Err(invalid(
                        "--angle",
                        format!("the rotated shape {:?} has an axis of length 0", p.output_shape),
                    ));
                }
                p.output_shape
            }
            InterpFn::Affine {
                matrix,
                offset,
                output_shape,
            } => {
                si::affine_params(matrix, offset, ndim)
                    .map_err(|e| anyhow::Error::from(e).context("--matrix"))?;
                match output_shape {
                    Some(s) if s.len() != ndim => {
                        return Err(invalid(
                            "--output-shape",
                            format!("{} axes for {ndim}-D data", s.len()),
                        ))
                    }
                    Some(s) => s.clone(),
                    None => shape.to_vec(),
                }
            }
            InterpFn::SplineFilter => shape.to_vec(),
            InterpFn::SplineFilter1d { axis } => {
                let n = ndim as isize;
                if !(-n..n).contains(axis) {
                    return Err(invalid(
                        "--axis",
                        format!("axis {axis} is out of bounds for {ndim}-D data"),
                    ));
                }
                shape.to_vec()
            }
        })
    }

    /// The zoom's factors and start per axis for `shape` (the grid the header follows),
    /// `None` for the other functions.
    pub(crate) fn zoom_grid(&self, shape: &[usize]) -> anyhow::Result<Option<(Vec<f64>, Vec<f64>)>> {
        let InterpFn::Zoom { grid_mode, .. } = &self.f else {
            return Ok(None);
        };
        let oshape = self.output_shape(shape)?;
        let f = si::zoom_factors(shape, &oshape, *grid_mode);
        let start = f
            .iter()
            .map(|&z| if *grid_mode { 0.5 * z - 0.5 } else { 0.0 })
            .collect();
        Ok(Some((f, start)))
    }

    /// The index map (input coordinate = `m · o + t`) of shift, rotate and affine_transform
    /// on a volume of `shape`, which the NIfTI header follows; `None` for zoom (its own
    /// grid, [`Self::zoom_grid`]) and the spline filters (the grid is unchanged).
    pub(crate) fn index_map(&self, shape: &[usize; 3]) -> anyhow::Result<Option<IndexMap>> {
        Ok(match &self.f {
            InterpFn::Shift(s) => {
                let s = per_axis("--shift", s, 3)?;
                Some(IndexMap::shift([-s[0], -s[1], -s[2]]))
            }
            InterpFn::Rotate { angle, axes, reshape } => {
                let p = si::rotate_plan(shape, *angle, *axes, *reshape)
                    .map_err(|e| anyhow::Error::from(e).context("--axes"))?;
                let [i, j] = p.axes;
                let mut map = IndexMap::shift([0.0; 3]);
                map.m[i][i] = p.matrix[0];
                map.m[i][j] = p.matrix[1];
                map.m[j][i] = p.matrix[2];
                map.m[j][j] = p.matrix[3];
                map.t[i] = p.offset[0];
                map.t[j] = p.offset[1];
                Some(map)
            }
            InterpFn::Affine { matrix, offset, .. } => {
                let (m, t) = si::affine_params(matrix, offset, 3)
                    .map_err(|e| anyhow::Error::from(e).context("--matrix"))?;
                let mut map = IndexMap::shift([t[0], t[1], t[2]]);
                for r in 0..3 {
                    for c in 0..3 {
                        map.m[r][c] = match m.shape[..] {
                            [_] => {
                                if r == c {
                                    m.values[r]
                                } else {
                                    0.0
                                }
                            }
                            _ => m.values[r * 3 + c],
                        };
                    }
                }
                Some(map)
            }
            _ => None,
        })
    }

    /// The function on `t` (an f32 tensor of the planned rank), as `out` (f32 or f64).
    pub(crate) fn apply(&self, rt: &Runtime, t: &Tensor, out: DType) -> kiln::Result<Tensor> {
        let o = &self.opts;
        let ndim = t.rank();
        let fill = |v: &[f64]| {
            if v.len() == 1 {
                vec![v[0]; ndim]
            } else {
                v.to_vec()
            }
        };
        match &self.f {
            InterpFn::Zoom { zoom, grid_mode } => si::zoom(rt, t, &fill(zoom), *grid_mode, o, out),
            InterpFn::Shift(s) => si::shift(rt, t, &fill(s), o, out),
            InterpFn::Rotate { angle, axes, reshape } => si::rotate(rt, t, *angle, *axes, *reshape, o, out),
            InterpFn::Affine {
                matrix,
                offset,
                output_shape,
            } => si::affine_transform(rt, t, matrix, offset, output_shape.as_deref(), o, out),
            InterpFn::SplineFilter => si::spline_filter(t, o.order, o.mode, out),
            InterpFn::SplineFilter1d { axis } => si::spline_filter1d(t, o.order, *axis, o.mode, out),
        }
    }
}
