//! Rank filters (`median_filter`, `rank_filter`, `percentile_filter`, `minimum_filter`,
//! `maximum_filter`) and grey morphology, with scipy.ndimage's semantics, resolved once
//! here into a [`RankSpec`] that both backends execute.
//!
//! What scipy does and kiln reproduces:
//! - the window is `size` (per axis, or one size for every axis) or a boolean `footprint`;
//!   an all-true footprint is the same as its `size`;
//! - `origin` shifts the window: output `i` reads input `i + j - (n/2 + origin)` for the
//!   footprint position `j` along an axis of length `n` (positive origins move the window
//!   towards lower indices); `n/2 + origin` must lie in `0..n`;
//! - `median_filter` takes rank `count/2` (the upper median for an even count),
//!   `percentile_filter(p)` rank `int(count * p / 100)` (`p` may be negative, from the
//!   top; `p = 100` is the maximum), `rank_filter(r)` rank `r` (negative from the top);
//!   rank 0 is the minimum and `count-1` the maximum;
//! - outside the image the boundary mode applies per axis ([`BoundaryMode`]); under
//!   `constant` the cval is first converted to the element type (truncated towards zero
//!   for integers; an out-of-range cval on integer data, where C's cast is undefined and
//!   scipy's paths disagree, is refused by the facade, `kiln::rank`, and saturates here);
//! - grey morphology with a `structure` (non-flat) follows scipy's `NI_MinOrMaxFilter`
//!   operation for operation: with `t = -s` for erosion and `t = s` for dilation, the first
//!   window element gives `x + t` in double, every later one `x + (T)t` in the element
//!   type's arithmetic (f32 addition; integers wrap, C's conversion on x86-64), compared in
//!   double; the result is converted as scipy's `CASE_FILTER_OUT_SAFE` does (integers
//!   truncate and wrap, floats round) ([`RankElement::structure_term`]);
//! - `grey_dilation` reflects the footprint and structure and negates the origin (minus one
//!   on even axes), so that it is the reflected-window maximum ([`RankSpec::grey_dilation`]).
//!
//! Ties and order: rank selection is exact and compares a total-order key (integers as
//! themselves; floats by their IEEE total order, so `-0.0 < +0.0` and NaN sorts above
//! every number), so the CPU and the GPU return the same bits for every input. scipy
//! compares floats with `<`; on NaN-free data without signed zeros the results agree.

use super::BoundaryMode;
use crate::error::{Error, Result};

/// A boolean window of rank 1 to 3 (row-major).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    shape: Vec<usize>,
    mask: Vec<bool>,
}

impl Footprint {
    /// A footprint of `shape` with row-major `mask`; rejects empty shapes and ranks above 3.
    pub fn new(shape: &[usize], mask: Vec<bool>) -> Result<Self> {
        let bad = |why: String| Err(Error::invalid("footprint", why));
        if shape.is_empty() || shape.len() > 3 {
            return bad(format!("footprints have rank 1 to 3, got shape {shape:?}"));
        }
        if shape.contains(&0) {
            return bad(format!("footprint shape {shape:?} is empty"));
        }
        let n: usize = shape.iter().product();
        if mask.len() != n {
            return bad(format!(
                "a footprint of shape {shape:?} needs {n} elements, got {}",
                mask.len()
            ));
        }
        Ok(Footprint {
            shape: shape.to_vec(),
            mask,
        })
    }

    /// An all-true footprint (a box) of `shape`.
    pub fn ones(shape: &[usize]) -> Result<Self> {
        Self::new(shape, vec![true; shape.iter().product()])
    }

    /// scipy's `generate_binary_structure(rank, connectivity)`: the `3^rank` cube whose
    /// elements lie within `connectivity` unit steps of the centre (connectivity below 1
    /// counts as 1). `rank` is 1 to 3.
    pub fn binary_structure(rank: usize, connectivity: usize) -> Result<Self> {
        if !(1..=3).contains(&rank) {
            return Err(Error::invalid(
                "generate_binary_structure",
                format!("rank {rank} is not supported (1 to 3)"),
            ));
        }
        let c = connectivity.max(1);
        let n = 3usize.pow(rank as u32);
        let mask = (0..n)
            .map(|i| {
                let steps: usize = (0..rank)
                    .map(|d| (i / 3usize.pow(d as u32) % 3).abs_diff(1))
                    .sum();
                steps <= c
            })
            .collect();
        Self::new(&vec![3; rank], mask)
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The elements, row-major.
    pub fn mask(&self) -> &[bool] {
        &self.mask
    }

    /// How many elements are true.
    pub fn count(&self) -> usize {
        self.mask.iter().filter(|&&m| m).count()
    }

    /// The footprint reversed along every axis (`footprint[::-1, ::-1]`).
    pub fn reflected(&self) -> Self {
        let mut mask = self.mask.clone();
        mask.reverse();
        Footprint {
            shape: self.shape.clone(),
            mask,
        }
    }
}

/// What a rank-type filter selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankOp {
    /// The smallest value of the window (rank 0; grey erosion).
    Min,
    /// The largest value (rank `count-1`; grey dilation).
    Max,
    /// The value of this rank (0-based, `0 < r < count-1`) in the sorted window.
    Rank(usize),
}

/// The window of a rank filter or grey morphology op, as a user gives it (scipy's
/// parameters): `size` or `footprint` (exactly one, or a `structure`), `mode` with its cval
/// and `origin`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankParams {
    /// Window sizes per axis; one value applies to every axis.
    pub size: Option<Vec<usize>>,
    /// A boolean footprint (rank = the data's).
    pub footprint: Option<Footprint>,
    /// Grey morphology only: a non-flat structuring element (row-major, its shape is
    /// `structure_shape`); the footprint defaults to all of it.
    pub structure: Option<(Vec<usize>, Vec<f64>)>,
    /// Boundary mode (cval inside `Constant`).
    pub mode: BoundaryMode,
    /// Window shift per axis; one value applies to every axis; empty means 0.
    pub origin: Vec<isize>,
}

impl RankParams {
    /// A `size`-per-axis window (one value for every axis), reflect mode, origin 0.
    pub fn size(size: &[usize]) -> Self {
        RankParams {
            size: Some(size.to_vec()),
            ..Default::default()
        }
    }

    /// A footprint window, reflect mode, origin 0.
    pub fn footprint(fp: Footprint) -> Self {
        RankParams {
            footprint: Some(fp),
            ..Default::default()
        }
    }

    /// The same window under `mode`.
    pub fn with_mode(mut self, mode: BoundaryMode) -> Self {
        self.mode = mode;
        self
    }

    /// The same window with `origin` (one value, or one per axis).
    pub fn with_origin(mut self, origin: &[isize]) -> Self {
        self.origin = origin.to_vec();
        self
    }

    /// The same window with a non-flat structuring element (grey morphology).
    pub fn with_structure(mut self, shape: &[usize], values: Vec<f64>) -> Self {
        self.structure = Some((shape.to_vec(), values));
        self
    }
}

/// A resolved rank filter: what both backends run. Shapes are padded to 3-D (a 2-D window
/// is `[1, h, w]` on data `[1, H, W]`).
#[derive(Clone, Debug, PartialEq)]
pub struct RankSpec {
    /// What to select.
    pub op: RankOp,
    /// The footprint shape, `[d, h, w]`.
    pub fshape: [usize; 3],
    /// The footprint, row-major.
    pub mask: Vec<bool>,
    /// The origin per axis.
    pub origin: [isize; 3],
    /// The boundary mode.
    pub mode: BoundaryMode,
    /// Non-flat structure values (grey morphology; same layout as `mask`): `Min` is the
    /// erosion by them, `Max` the dilation (see the module docs for scipy's arithmetic).
    pub structure: Option<Vec<f64>>,
}

/// Pads `v` (of the data's rank) to 3 with leading `fill`.
fn pad3<T: Copy>(v: &[T], fill: T) -> [T; 3] {
    let mut o = [fill; 3];
    o[3 - v.len()..].copy_from_slice(v);
    o
}

/// scipy's `_normalize_sequence`: one value for every axis, or one per axis.
fn per_axis<T: Copy + std::fmt::Debug>(
    op: &str,
    what: &str,
    v: &[T],
    rank: usize,
    default: T,
) -> Result<Vec<T>> {
    match v.len() {
        0 => Ok(vec![default; rank]),
        1 => Ok(vec![v[0]; rank]),
        n if n == rank => Ok(v.to_vec()),
        _ => Err(Error::invalid(
            op,
            format!("{what} {v:?} needs one value or {rank} (one per axis of the {rank}-D input)"),
        )),
    }
}

impl RankSpec {
    /// Resolves `p` for a `rank`-D input (2 or 3) into the window and mode; `op` is filled
    /// in by the callers below (it is `Min` here).
    fn window(op_name: &str, rank: usize, p: &RankParams) -> Result<Self> {
        let bad = |why: String| Err(Error::invalid(op_name, why));
        if !(1..=3).contains(&rank) {
            return bad(format!("the input must have 1 to 3 axes, got {rank}"));
        }
        let origin = per_axis(op_name, "origin", &p.origin, rank, 0)?;
        let (shape, mask, structure) = match (&p.size, &p.footprint, &p.structure) {
            (_, Some(fp), st) => {
                if let Some((s, _)) = st {
                    if s.as_slice() != fp.shape() {
                        return bad(format!(
                            "structure shape {s:?} differs from footprint shape {:?}",
                            fp.shape()
                        ));
                    }
                }
                (
                    fp.shape().to_vec(),
                    fp.mask().to_vec(),
                    st.as_ref().map(|s| s.1.clone()),
                )
            }
            (_, None, Some((s, v))) => {
                let n: usize = s.iter().product();
                if v.len() != n || n == 0 {
                    return bad(format!("structure of shape {s:?} has {} values", v.len()));
                }
                (s.clone(), vec![true; n], Some(v.clone()))
            }
            (Some(size), None, None) => {
                let s = per_axis(op_name, "size", size, rank, 1)?;
                if s.contains(&0) {
                    return bad(format!("size {size:?} has a zero"));
                }
                let n = s.iter().product();
                (s, vec![true; n], None)
            }
            (None, None, None) => return bad("give a size, a footprint or a structure".into()),
        };
        if shape.len() != rank {
            return bad(format!(
                "the footprint has rank {} (shape {shape:?}) but the input has {rank} axes",
                shape.len()
            ));
        }
        if let Some(s) = &structure {
            if let Some(x) = s.iter().find(|x| !x.is_finite()) {
                return bad(format!("structure value {x} must be finite"));
            }
        }
        if !mask.iter().any(|&m| m) {
            return bad("the footprint has no true element".into());
        }
        for (&o, &n) in origin.iter().zip(&shape) {
            let c = (n / 2) as isize + o;
            if c < 0 || c >= n as isize {
                return bad(format!(
                    "invalid origin {o} for a window of size {n} (need -{} <= origin <= {})",
                    n / 2,
                    n - 1 - n / 2
                ));
            }
        }
        if let BoundaryMode::Constant(c) = p.mode {
            if !c.is_finite() {
                return bad(format!("cval {c} must be finite"));
            }
        }
        Ok(RankSpec {
            op: RankOp::Min,
            fshape: pad3(&shape, 1),
            mask,
            origin: pad3(&origin, 0),
            mode: p.mode,
            structure,
        })
    }

    /// The op for rank `r` of `count` values: `Min`, `Max` or `Rank(r)`.
    fn with_rank(mut self, r: usize) -> Self {
        let n = self.count();
        self.op = match r {
            0 => RankOp::Min,
            r if r + 1 == n => RankOp::Max,
            r => RankOp::Rank(r),
        };
        self
    }

    fn flat_only(self, op: &str) -> Result<Self> {
        if self.structure.is_some() {
            return Err(Error::invalid(op, "a structure is only for grey morphology"));
        }
        Ok(self)
    }

    /// scipy's `rank_filter(rank=r)` on a `dims`-D input (`r < 0` counts from the top).
    pub fn rank_filter(dims: usize, r: isize, p: &RankParams) -> Result<Self> {
        let s = Self::window("rank_filter", dims, p)?.flat_only("rank_filter")?;
        let n = s.count() as isize;
        let rr = if r < 0 { r + n } else { r };
        if rr < 0 || rr >= n {
            return Err(Error::invalid(
                "rank_filter",
                format!("rank {r} is out of range for a window of {n} elements"),
            ));
        }
        Ok(s.with_rank(rr as usize))
    }

    /// scipy's `median_filter`: rank `count / 2`.
    pub fn median_filter(dims: usize, p: &RankParams) -> Result<Self> {
        let s = Self::window("median_filter", dims, p)?.flat_only("median_filter")?;
        let r = s.count() / 2;
        Ok(s.with_rank(r))
    }

    /// scipy's `percentile_filter(percentile=q)`: `q` in `-100..=100` (negative from the
    /// top), rank `int(count * q / 100)`, `count-1` at 100.
    pub fn percentile_filter(dims: usize, q: f64, p: &RankParams) -> Result<Self> {
        let s = Self::window("percentile_filter", dims, p)?.flat_only("percentile_filter")?;
        let mut q = q;
        if q < 0.0 {
            q += 100.0;
        }
        if !(0.0..=100.0).contains(&q) {
            return Err(Error::invalid(
                "percentile_filter",
                format!("percentile {q} must lie in -100..=100"),
            ));
        }
        let n = s.count();
        let r = if q == 100.0 {
            n - 1
        } else {
            (n as f64 * q / 100.0) as usize
        };
        Ok(s.with_rank(r))
    }

    /// scipy's `minimum_filter` (and `grey_erosion`, which may carry a structure).
    pub fn minimum_filter(dims: usize, p: &RankParams) -> Result<Self> {
        Self::window("minimum_filter", dims, p)
    }

    /// scipy's `maximum_filter`.
    pub fn maximum_filter(dims: usize, p: &RankParams) -> Result<Self> {
        let mut s = Self::window("maximum_filter", dims, p)?;
        s.op = RankOp::Max;
        Ok(s)
    }

    /// scipy's `grey_erosion`: the minimum filter (with `min(x - s)` under a structure).
    pub fn grey_erosion(dims: usize, p: &RankParams) -> Result<Self> {
        Self::window("grey_erosion", dims, p)
    }

    /// scipy's `grey_dilation`: footprint and structure reflected, origin negated (and
    /// decreased by one on even axes), then the maximum filter (`max(x + s)`).
    pub fn grey_dilation(dims: usize, p: &RankParams) -> Result<Self> {
        let mut s = Self::window("grey_dilation", dims, p)?;
        s.mask.reverse();
        if let Some(v) = s.structure.as_mut() {
            v.reverse();
        }
        for a in 0..3 {
            s.origin[a] = -s.origin[a] - if s.fshape[a] % 2 == 0 { 1 } else { 0 };
        }
        s.op = RankOp::Max;
        Ok(s)
    }

    /// How many footprint elements are true.
    pub fn count(&self) -> usize {
        self.mask.iter().filter(|&&m| m).count()
    }

    /// Whether the footprint is a full box (the separable min/max path applies).
    pub fn is_box(&self) -> bool {
        self.mask.iter().all(|&m| m)
    }

    /// The rank selected, `0..count`.
    pub fn rank(&self) -> usize {
        match self.op {
            RankOp::Min => 0,
            RankOp::Max => self.count() - 1,
            RankOp::Rank(r) => r,
        }
    }

    /// The offsets `(dz, dy, dx)` of the true footprint elements in row-major order:
    /// `j - (n/2 + origin)` per axis.
    pub fn offsets(&self) -> Vec<[isize; 3]> {
        let [fd, fh, fw] = self.fshape;
        let c = |a: usize| (self.fshape[a] / 2) as isize + self.origin[a];
        let mut v = Vec::with_capacity(self.count());
        for z in 0..fd {
            for y in 0..fh {
                for x in 0..fw {
                    if self.mask[(z * fh + y) * fw + x] {
                        v.push([z as isize - c(0), y as isize - c(1), x as isize - c(2)]);
                    }
                }
            }
        }
        v
    }

    /// The structure terms scipy adds, of the true elements in [`Self::offsets`]'s order:
    /// `-s` for the minimum (erosion), `s` for the maximum.
    pub fn structure_values(&self) -> Option<Vec<f64>> {
        let neg = self.op != RankOp::Max;
        self.structure.as_ref().map(|s| {
            s.iter()
                .zip(&self.mask)
                .filter(|(_, &m)| m)
                .map(|(&v, _)| if neg { -v } else { v })
                .collect()
        })
    }
}

/// An element type the rank filters take (`u8`, `u16`, `f32`): a total-order `u32` key
/// (so one selection routine serves every type, on both backends) and scipy's conversions.
pub trait RankElement: Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static {
    /// The order-preserving key (floats: IEEE total order).
    fn key(self) -> u32;
    /// The element of a key.
    fn from_key(k: u32) -> Self;
    /// The cval as the element type (integers truncate towards zero, saturating).
    fn from_cval(c: f64) -> Self;
    /// The value as f64 (exact).
    fn to_f64(self) -> f64;
    /// A structure result as the element type, as scipy stores it: floats round; integers
    /// truncate and wrap (`(T)(long long)x`, NaN to 0).
    fn from_f64(x: f64) -> Self;
    /// `self + (T)t` in the element type's arithmetic, as a double (scipy's `_tmp +=
    /// (_type)_ss[i]`): f32 addition; for integers `t` is truncated through a 32-bit int
    /// (x86-64's conversion) and the sum wraps.
    fn structure_term(self, t: f64) -> f64;
    /// Whether the value is non-zero (binary morphology's truth).
    fn truth(self) -> bool;
}

impl RankElement for u8 {
    fn key(self) -> u32 {
        self as u32
    }
    fn from_key(k: u32) -> Self {
        k as u8
    }
    fn from_cval(c: f64) -> Self {
        c as u8
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(x: f64) -> Self {
        (x as i64) as u8
    }
    fn structure_term(self, t: f64) -> f64 {
        self.wrapping_add((t as i32) as u8) as f64
    }
    fn truth(self) -> bool {
        self != 0
    }
}

impl RankElement for u16 {
    fn key(self) -> u32 {
        self as u32
    }
    fn from_key(k: u32) -> Self {
        k as u16
    }
    fn from_cval(c: f64) -> Self {
        c as u16
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(x: f64) -> Self {
        (x as i64) as u16
    }
    fn structure_term(self, t: f64) -> f64 {
        self.wrapping_add((t as i32) as u16) as f64
    }
    fn truth(self) -> bool {
        self != 0
    }
}

impl RankElement for f32 {
    fn key(self) -> u32 {
        let b = self.to_bits();
        if b & 0x8000_0000 != 0 {
            !b
        } else {
            b | 0x8000_0000
        }
    }
    fn from_key(k: u32) -> Self {
        f32::from_bits(if k & 0x8000_0000 != 0 { k & 0x7fff_ffff } else { !k })
    }
    fn from_cval(c: f64) -> Self {
        c as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn structure_term(self, t: f64) -> f64 {
        (self + t as f32) as f64
    }
    fn truth(self) -> bool {
        self != 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_structures_match_scipy() {
        let s = Footprint::binary_structure(2, 1).expect("s");
        assert_eq!(
            s.mask(),
            [false, true, false, true, true, true, false, true, false]
        );
        assert_eq!(Footprint::binary_structure(2, 2).expect("s").count(), 9);
        assert_eq!(Footprint::binary_structure(3, 1).expect("s").count(), 7);
        assert_eq!(Footprint::binary_structure(3, 2).expect("s").count(), 19);
        assert_eq!(Footprint::binary_structure(3, 3).expect("s").count(), 27);
        assert_eq!(Footprint::binary_structure(3, 0).expect("s").count(), 7);
    }

    #[test]
    fn ranks_as_scipy_computes_them() {
        let p = RankParams::size(&[3]);
        assert_eq!(RankSpec::median_filter(2, &p).expect("m").op, RankOp::Rank(4));
        let p4 = RankParams::size(&[2, 2]);
        assert_eq!(RankSpec::median_filter(2, &p4).expect("m").rank(), 2);
        assert_eq!(
            RankSpec::percentile_filter(2, 100.0, &p).expect("p").op,
            RankOp::Max
        );
        assert_eq!(RankSpec::percentile_filter(2, -75.0, &p).expect("p").rank(), 2);
        assert_eq!(
            RankSpec::percentile_filter(2, 0.0, &p).expect("p").op,
            RankOp::Min
        );
        assert_eq!(RankSpec::rank_filter(2, -1, &p).expect("r").op, RankOp::Max);
        assert!(RankSpec::rank_filter(2, 9, &p).is_err());
        assert!(RankSpec::percentile_filter(2, 101.0, &p).is_err());
        let bad = RankParams::size(&[3]).with_origin(&[2]);
        assert!(RankSpec::median_filter(2, &bad).is_err());
        let ok = RankParams::size(&[4]).with_origin(&[-2, 1]);
        let s = RankSpec::minimum_filter(2, &ok).expect("ok");
        assert_eq!(s.offsets()[0], [0, 0, -3]);
        assert_eq!(s.origin, [0, -2, 1]);
    }

    #[test]
    fn dilation_reflects_the_window() {
        let fp = Footprint::new(&[1, 3], vec![true, true, false]).expect("fp");
        let d = RankSpec::grey_dilation(2, &RankParams::footprint(fp)).expect("d");
        // erosion offsets {-1, 0}; dilation reads the reflection {1, 0} -> after the
        // reversal mask is [F, T, T] with centre 1: offsets 0, 1.
        let xs: Vec<isize> = d.offsets().iter().map(|o| o[2]).collect();
        assert_eq!(xs, [0, 1]);
        let even = RankSpec::grey_dilation(2, &RankParams::size(&[2])).expect("e");
        let xs: Vec<isize> = even.offsets().iter().map(|o| o[2]).collect();
        assert_eq!(xs, [0, 1, 0, 1]);
        assert_eq!(even.origin, [0, -1, -1]);
    }

    #[test]
    fn keys_order_floats_totally() {
        let v = [-f32::INFINITY, -2.5, -0.0, 0.0, 1e-30, 3.0, f32::INFINITY];
        for w in v.windows(2) {
            assert!(w[0].key() < w[1].key(), "{w:?}");
        }
        for x in v {
            assert_eq!(f32::from_key(x.key()).to_bits(), x.to_bits());
        }
        assert_eq!(u8::from_cval(-3.0), 0);
        assert_eq!(u8::from_cval(2.9), 2);
        assert_eq!(u16::from_cval(1e9), 65535);
    }
}
