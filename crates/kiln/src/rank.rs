//! Rank filters and grey morphology on tensors, with scipy.ndimage's names, parameters and
//! results: `median_filter`, `rank_filter`, `percentile_filter`, `minimum_filter`,
//! `maximum_filter`, `grey_erosion`, `grey_dilation`, `grey_opening`, `grey_closing`.
//!
//! Tensors of 1 to 3 axes of `u8`, `u16` or `f32`; the result has the input's dtype and
//! shape and stays on its device. The window is a [`RankParams`] (`size` per axis or a
//! boolean [`Footprint`], `mode` with its cval, `origin`; a `structure` for grey
//! morphology). The CPU and the GPU return the same bits (selection is exact); see
//! `kiln_core::imaging::rank` for the semantics and `docs/ndimage-rank.md` for the GPU
//! algorithm chosen per window and type.
//!
//! ```no_run
//! use kiln::{Runtime, rank::RankParams};
//! let rt = Runtime::cpu();
//! let img = rt.tensor(&[5u8, 1, 9, 3, 7, 2, 8, 4, 6], &[3, 3])?;
//! let med = img.median_filter(&RankParams::size(&[3]))?;
//! # Ok::<(), kiln::Error>(())
//! ```

use crate::tensor::{on_storage, Tensor};
pub use kiln_core::imaging::rank::{Footprint, RankOp, RankParams, RankSpec};
use kiln_core::storage::BackendStorage;
use kiln_core::{DType, Error, Result};

/// A rank-type filter or grey morphology op, by scipy's name (for front ends that pick the
/// function at run time, such as `kiln ndimage`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RankFunction {
    /// `median_filter`.
    Median,
    /// `rank_filter(rank)`; a negative rank counts from the top.
    Rank(isize),
    /// `percentile_filter(percentile)`, `-100..=100`.
    Percentile(f64),
    /// `minimum_filter`.
    Minimum,
    /// `maximum_filter`.
    Maximum,
    /// `grey_erosion`.
    GreyErosion,
    /// `grey_dilation`.
    GreyDilation,
    /// `grey_opening`: erosion, then dilation.
    GreyOpening,
    /// `grey_closing`: dilation, then erosion.
    GreyClosing,
}

impl RankFunction {
    /// scipy's name of the function.
    pub fn name(&self) -> &'static str {
        match self {
            RankFunction::Median => "median_filter",
            RankFunction::Rank(_) => "rank_filter",
            RankFunction::Percentile(_) => "percentile_filter",
            RankFunction::Minimum => "minimum_filter",
            RankFunction::Maximum => "maximum_filter",
            RankFunction::GreyErosion => "grey_erosion",
            RankFunction::GreyDilation => "grey_dilation",
            RankFunction::GreyOpening => "grey_opening",
            RankFunction::GreyClosing => "grey_closing",
        }
    }
}

impl Tensor {
    /// The shape padded to `(d, h, w)` and the number of axes (1 to 3).
    pub(crate) fn rank_shape(&self, op: &str) -> Result<(usize, [usize; 3])> {
        let r = self.rank();
        if !(1..=3).contains(&r) {
            return Err(Error::invalid(
                op,
                format!("expected a tensor of 1 to 3 axes, got shape {:?}", self.shape()),
            ));
        }
        if self.shape().contains(&0) {
            return Err(Error::invalid(
                op,
                format!("the input is empty (shape {:?})", self.shape()),
            ));
        }
        let mut s = [1usize; 3];
        s[3 - r..].copy_from_slice(self.shape());
        Ok((r, s))
    }

    /// Runs a resolved `spec` on this tensor's backend (`BackendStorage::rank_filter`).
    pub fn rank_spec(&self, spec: &RankSpec, op: &str) -> Result<Tensor> {
        let (_, shape) = self.rank_shape(op)?;
        self.check_cval(spec, op)?;
        let _r = crate::profiler().host_range(op);
        let s = on_storage!(self, |s| s.rank_filter(shape, spec, op)?);
        Ok(self.derive(s, self.shape().to_vec()))
    }

    /// An integer tensor's `constant` cval must convert to the element type: scipy converts
    /// it with C's cast, which is undefined out of range, and on x86-64 its paths disagree
    /// (some wrap `-3` to 253 for uint8, others compare `-3.0` as a double and store the
    /// wrapped result), so no one answer would be scipy's. A cval in `(-1, max + 1)`
    /// truncates towards zero as scipy's does.
    fn check_cval(&self, spec: &RankSpec, op: &str) -> Result<()> {
        let kiln_core::imaging::BoundaryMode::Constant(c) = spec.mode else {
            return Ok(());
        };
        let max = match self.dtype() {
            DType::U8 => 255.0,
            DType::U16 => 65535.0,
            _ => return Ok(()),
        };
        if c > -1.0 && c < max + 1.0 {
            return Ok(());
        }
        Err(Error::invalid(
            op,
            format!(
                "cval {c} is outside {}'s range 0..={max}: scipy's result then depends on its code path \
                 (a wrapped cval in some, the cval compared as a float in others); give a cval in range",
                self.dtype()
            ),
        ))
    }

    /// Runs `f` (any rank filter or grey morphology op) with window `p`.
    pub fn rank_apply(&self, f: RankFunction, p: &RankParams) -> Result<Tensor> {
        let (dims, _) = self.rank_shape(f.name())?;
        let spec = match f {
            RankFunction::Median => RankSpec::median_filter(dims, p)?,
            RankFunction::Rank(r) => RankSpec::rank_filter(dims, r, p)?,
            RankFunction::Percentile(q) => RankSpec::percentile_filter(dims, q, p)?,
            RankFunction::Minimum => RankSpec::minimum_filter(dims, p)?,
            RankFunction::Maximum => RankSpec::maximum_filter(dims, p)?,
            RankFunction::GreyErosion => RankSpec::grey_erosion(dims, p)?,
            RankFunction::GreyDilation => RankSpec::grey_dilation(dims, p)?,
            RankFunction::GreyOpening => {
                let e = self.rank_spec(&RankSpec::grey_erosion(dims, p)?, "grey_opening")?;
                return e.rank_spec(&RankSpec::grey_dilation(dims, p)?, "grey_opening");
            }
            RankFunction::GreyClosing => {
                let d = self.rank_spec(&RankSpec::grey_dilation(dims, p)?, "grey_closing")?;
                return d.rank_spec(&RankSpec::grey_erosion(dims, p)?, "grey_closing");
            }
        };
        self.rank_spec(&spec, f.name())
    }

    /// scipy's `median_filter`.
    pub fn median_filter(&self, p: &RankParams) -> Result<Tensor> {
        self.rank_apply(RankFunction::Median, p)
    }

    /// scipy's `rank_filter` (`rank < 0` counts from the top).
    pub fn rank_filter(&self, rank: isize, p: &RankParams) -> Result<Tensor> {
        self.rank_apply(RankFunction::Rank(rank), p)
    }

    /// scipy's `percentile_filter` (`percentile` in `-100..=100`).
    pub fn percentile_filter(&self, percentile: f64, p: &RankParams) -> Result<Tensor> {
        self.rank_apply(RankFunction::Percentile(percentile), p)
    }

    /// scipy's `minimum_filter`.
    pub fn minimum_filter(&self, p: &RankParams) -> Result<Tensor> {
        self.rank_apply(RankFunction::Minimum, p)
    }

    /// scipy's `maximum_filter`.
    pub fn maximum_filter(&self, p: &RankParams) -> Result<Tensor> {
        self.rank_apply(RankFunction::Maximum, p)
    }

    /// scipy's `grey_erosion` (`size`, `footprint` and/or `structure`).
    pub fn grey_erosion(&self, p: &RankParams) -> Result<Tensor> {
        self.rank_apply(RankFunction::GreyErosion, p)
    }

    /// scipy's `grey_dilation` (the window reflected, as scipy does).
    pub fn grey_dilation(&self, p: &RankParams) -> Result<Tensor> {
        self.rank_apply(RankFunction::GreyDilation, p)
    }

    /// scipy's `grey_opening`: erosion, then dilation.
    pub fn grey_opening(&self, p: &RankParams) -> Result<Tensor> {
        self.rank_apply(RankFunction::GreyOpening, p)
    }

    /// scipy's `grey_closing`: dilation, then erosion.
    pub fn grey_closing(&self, p: &RankParams) -> Result<Tensor> {
        self.rank_apply(RankFunction::GreyClosing, p)
    }
}
