//! Rank filters and morphology for `kiln ndimage`: scipy.ndimage's `median_filter`,
//! `rank_filter`, `percentile_filter`, `minimum_filter`, `maximum_filter`, the four grey
//! morphology ops and the five binary ones, planned from the command's flags and run through
//! `kiln::rank` / `kiln::morphology` (CPU and GPU give the same bits).
//!
//! A 2-D function can meet an `(n, h, w)` stack of planes (a batch, or an image's colour
//! channels): its window is then lifted to `(1, h, w)` with origin 0 on the first axis, so no
//! plane reads another. `binary_fill_holes` stays per plane too: its flood from the border
//! only steps along the structure's offsets, and a structure one plane thick never reaches
//! the stack's first or last face.
//!
//! Binary results are 0/1 (scipy's `bool`) in the input's type, so an 8-bit PNG mask holds
//! 0 and 1, and `.npy` output holds 0.0 and 1.0 as float32 (multiply by 255 to view a PNG).

use crate::filter_cmd::{invalid, io_error};
use crate::filter_kernel::Described;
use kiln::core::imaging::BoundaryMode;
use kiln::morphology::{BinaryFunction, BinaryParams};
use kiln::rank::{Footprint, RankFunction, RankParams};
use kiln::Tensor;

/// The functions planned here and the flags each reads (for `--help` and errors).
pub(crate) const RANK_FUNCTIONS: &[(&str, &str)] = &[
    ("median_filter", "--size | --footprint, --origin, --mode, --cval"),
    (
        "rank_filter",
        "--rank, --size | --footprint, --origin, --mode, --cval",
    ),
    (
        "percentile_filter",
        "--percentile, --size | --footprint, --origin, --mode, --cval",
    ),
    ("minimum_filter", "--size | --footprint, --origin, --mode, --cval"),
    ("maximum_filter", "--size | --footprint, --origin, --mode, --cval"),
    (
        "grey_erosion",
        "--size | --footprint | --structure, --origin, --mode, --cval",
    ),
    (
        "grey_dilation",
        "--size | --footprint | --structure, --origin, --mode, --cval",
    ),
    (
        "grey_opening",
        "--size | --footprint | --structure, --origin, --mode, --cval",
    ),
    (
        "grey_closing",
        "--size | --footprint | --structure, --origin, --mode, --cval",
    ),
    (
        "binary_erosion",
        "--structure | --connectivity, --iterations, --border-value, --origin",
    ),
    (
        "binary_dilation",
        "--structure | --connectivity, --iterations, --border-value, --origin",
    ),
    (
        "binary_opening",
        "--structure | --connectivity, --iterations, --border-value, --origin",
    ),
    (
        "binary_closing",
        "--structure | --connectivity, --iterations, --border-value, --origin",
    ),
    ("binary_fill_holes", "--structure | --connectivity, --origin"),
];

/// The flags a rank or morphology function may read, as the command got them.
#[derive(Default)]
pub(crate) struct RankFlags<'a> {
    pub size: Option<&'a str>,
    pub footprint: Option<&'a str>,
    pub structure: Option<&'a str>,
    pub connectivity: Option<usize>,
    pub rank: Option<isize>,
    pub percentile: Option<f64>,
    pub iterations: Option<i64>,
    pub border_value: Option<u8>,
    pub origin: Option<&'a str>,
    /// The boundary mode (with cval); `mode_given` says whether the user chose it.
    pub mode: BoundaryMode,
    pub mode_given: bool,
}

/// A planned rank filter or morphology op.
pub(crate) enum MorphPlan {
    /// A rank filter or grey morphology op with its window.
    Rank(RankFunction, RankParams),
    /// A binary morphology op.
    Binary(BinaryFunction, BinaryParams),
}

fn list<T: std::str::FromStr>(flag: &str, v: &str) -> anyhow::Result<Vec<T>> {
    v.split(',')
        .map(|s| s.trim().parse::<T>())
        .collect::<Result<Vec<T>, _>>()
        .map_err(|_| invalid(flag, format!("`{v}` is not a comma-separated list of integers")))
}

/// The function `name` (a rank or morphology one) for `ndim`-D data; `None` when `name` is
/// not one of [`RANK_FUNCTIONS`].
pub(crate) fn plan(name: &str, ndim: usize, f: &RankFlags) -> Option<anyhow::Result<MorphPlan>> {
    let (_, reads) = RANK_FUNCTIONS.iter().find(|r| r.0 == name)?;
    Some(plan_known(name, ndim, f, reads))
}

fn plan_known(name: &str, ndim: usize, f: &RankFlags, reads: &str) -> anyhow::Result<MorphPlan> {
    // a flag the function does not read is refused, as scipy refuses an unknown keyword
    let given: [(&str, bool); 9] = [
        ("--size", f.size.is_some()),
        ("--footprint", f.footprint.is_some()),
        ("--structure", f.structure.is_some()),
        ("--connectivity", f.connectivity.is_some()),
        ("--rank", f.rank.is_some()),
        ("--percentile", f.percentile.is_some()),
        ("--iterations", f.iterations.is_some()),
        ("--border-value", f.border_value.is_some()),
        ("--mode", f.mode_given),
    ];
    for (flag, set) in given {
        if set && !reads.split([',', '|', ' ']).any(|w| w == flag) {
            return Err(invalid(
                flag,
                format!("{name} does not take {flag}; it reads: {reads}"),
            ));
        }
    }
    let origin: Vec<isize> = match f.origin {
        Some(o) => list("--origin", o)?,
        None => Vec::new(),
    };
    if name.starts_with("binary_") {
        return plan_binary(name, ndim, f, origin);
    }
    let mut p = RankParams {
        mode: f.mode,
        origin,
        ..Default::default()
    };
    if let Some(s) = f.size {
        p.size = Some(list("--size", s)?);
    }
    if let Some(path) = f.footprint {
        let (shape, mask) = kiln_io::read_npy_mask(path).map_err(io_error("--footprint"))?;
        p.footprint = Some(Footprint::new(&shape, mask)?);
    }
    if let Some(path) = f.structure {
        let (arr, _) = kiln_io::read_npy_f64(path).map_err(io_error("--structure"))?;
        p.structure = Some((arr.shape().to_vec(), arr.iter().copied().collect()));
    }
    if p.size.is_none() && p.footprint.is_none() && p.structure.is_none() {
        return Err(invalid(
            "--size",
            format!("{name} needs a window: --size N[,N..] or --footprint F.npy (scipy has no default)"),
        ));
    }
    let func = match name {
        "median_filter" => RankFunction::Median,
        "rank_filter" => RankFunction::Rank(f.rank.ok_or_else(|| {
            invalid(
                "--rank",
                "rank_filter needs --rank N (negative counts from the top)",
            )
        })?),
        "percentile_filter" => RankFunction::Percentile(f.percentile.ok_or_else(|| {
            invalid(
                "--percentile",
                "percentile_filter needs --percentile Q (-100..100)",
            )
        })?),
        "minimum_filter" => RankFunction::Minimum,
        "maximum_filter" => RankFunction::Maximum,
        "grey_erosion" => RankFunction::GreyErosion,
        "grey_dilation" => RankFunction::GreyDilation,
        "grey_opening" => RankFunction::GreyOpening,
        _ => RankFunction::GreyClosing,
    };
    // resolve once now, so a bad window fails before any file is read
    use kiln::rank::RankSpec;
    match func {
        RankFunction::Median => RankSpec::median_filter(ndim, &p).map(drop)?,
        RankFunction::Rank(r) => RankSpec::rank_filter(ndim, r, &p).map(drop)?,
        RankFunction::Percentile(q) => RankSpec::percentile_filter(ndim, q, &p).map(drop)?,
        RankFunction::Minimum => RankSpec::minimum_filter(ndim, &p).map(drop)?,
        RankFunction::Maximum => RankSpec::maximum_filter(ndim, &p).map(drop)?,
        RankFunction::GreyDilation | RankFunction::GreyClosing => {
            RankSpec::grey_dilation(ndim, &p).map(drop)?
        }
        RankFunction::GreyErosion | RankFunction::GreyOpening => {
            RankSpec::grey_erosion(ndim, &p).map(drop)?
        }
    }
    Ok(MorphPlan::Rank(func, p))
}

fn plan_binary(name: &str, ndim: usize, f: &RankFlags, origin: Vec<isize>) -> anyhow::Result<MorphPlan> {
    let structure = match (f.structure, f.connectivity) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "--connectivity",
                "give --structure or --connectivity, not both",
            ))
        }
        (Some(path), None) => {
            let (shape, mask) = kiln_io::read_npy_mask(path).map_err(io_error("--structure"))?;
            Some(Footprint::new(&shape, mask)?)
        }
        (None, Some(c)) => {
            if !(1..=ndim).contains(&c) {
                return Err(invalid(
                    "--connectivity",
                    format!("connectivity is 1 to {ndim} for {ndim}-D data, got {c}"),
                ));
            }
            Some(Footprint::binary_structure(ndim, c)?)
        }
        (None, None) => None,
    };
    let p = BinaryParams {
        structure,
        iterations: f.iterations.unwrap_or(1),
        border_value: match f.border_value {
            None | Some(0) => false,
            Some(1) => true,
            Some(v) => return Err(invalid("--border-value", format!("0 or 1, got {v}"))),
        },
        origin,
    };
    let func = match name {
        "binary_erosion" => BinaryFunction::Erosion,
        "binary_dilation" => BinaryFunction::Dilation,
        "binary_opening" => BinaryFunction::Opening,
        "binary_closing" => BinaryFunction::Closing,
        _ => BinaryFunction::FillHoles,
    };
    // checked before any file is read, by the spec of the op that runs first (its name is
    // the one the error gives)
    use kiln::morphology::BinarySpec;
    match func {
        BinaryFunction::Dilation | BinaryFunction::Closing => BinarySpec::dilation(ndim, &p).map(drop),
        BinaryFunction::FillHoles => BinarySpec::fill_holes(ndim, p.structure.clone(), &p.origin).map(drop),
        BinaryFunction::Erosion | BinaryFunction::Opening => BinarySpec::erosion(ndim, &p).map(drop),
    }?;
    Ok(MorphPlan::Binary(func, p))
}

/// `[lead] + v` for a per-axis list given for the last axes (one value means every axis).
fn lifted<T: Copy>(v: &[T], axes: usize, lead: T) -> Vec<T> {
    match v.len() {
        0 => Vec::new(),
        1 => std::iter::once(lead)
            .chain(std::iter::repeat_n(v[0], axes))
            .collect(),
        _ => std::iter::once(lead).chain(v.iter().copied()).collect(),
    }
}

fn lift_footprint(fp: &Footprint) -> kiln::Result<Footprint> {
    let shape: Vec<usize> = std::iter::once(1).chain(fp.shape().iter().copied()).collect();
    Footprint::new(&shape, fp.mask().to_vec())
}

impl MorphPlan {
    /// The op on `t`; `ndim` is the planned rank (2 on an `(n, h, w)` stack of planes).
    pub(crate) fn apply(&self, ndim: usize, t: &Tensor) -> kiln::Result<Tensor> {
        let planes = ndim + 1 == t.rank();
        match self {
            MorphPlan::Rank(f, p) if planes => {
                let q = RankParams {
                    size: p.size.as_ref().map(|s| lifted(s, ndim, 1)),
                    footprint: p.footprint.as_ref().map(lift_footprint).transpose()?,
                    structure: p
                        .structure
                        .as_ref()
                        .map(|(s, v)| (std::iter::once(1).chain(s.iter().copied()).collect(), v.clone())),
                    mode: p.mode,
                    origin: lifted(&p.origin, ndim, 0),
                };
                t.rank_apply(*f, &q)
            }
            MorphPlan::Rank(f, p) => t.rank_apply(*f, p),
            MorphPlan::Binary(f, p) => {
                let y = if planes {
                    let s = match &p.structure {
                        Some(s) => s.clone(),
                        None => Footprint::binary_structure(ndim, 1)?,
                    };
                    let q = BinaryParams {
                        structure: Some(lift_footprint(&s)?),
                        origin: lifted(&p.origin, ndim, 0),
                        ..p.clone()
                    };
                    t.binary_apply(*f, &q)?
                } else {
                    t.binary_apply(*f, p)?
                };
                // 0/1 in the input's type, so the writers see the type they were promised
                y.cast(t.dtype())
            }
        }
    }

    /// What the summary says.
    pub(crate) fn describe(&self, name: &str, mode: BoundaryMode) -> Described {
        let (size, path) = match self {
            MorphPlan::Rank(_, p) => {
                let side = p
                    .footprint
                    .as_ref()
                    .map(|f| f.shape().iter().copied().max().unwrap_or(1))
                    .or_else(|| p.size.as_ref().and_then(|s| s.iter().copied().max()))
                    .or_else(|| p.structure.as_ref().and_then(|(s, _)| s.iter().copied().max()))
                    .unwrap_or(1);
                (side, "rank")
            }
            MorphPlan::Binary(_, p) => (
                p.structure
                    .as_ref()
                    .map(|f| f.shape().iter().copied().max().unwrap_or(1))
                    .unwrap_or(3),
                "morphology",
            ),
        };
        Described {
            command: "ndimage",
            name: name.to_string(),
            size,
            mode,
            path,
        }
    }
}
