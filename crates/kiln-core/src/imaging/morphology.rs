//! Binary morphology (`binary_erosion`, `binary_dilation`, `binary_opening`,
//! `binary_closing`, `binary_fill_holes`) with scipy.ndimage's semantics, resolved into a
//! [`BinarySpec`] that both backends execute one step at a time.
//!
//! One step (scipy's `NI_BinaryErosion`): a pixel is true when its input is non-zero. For
//! erosion the output is the AND, over the structure's true elements, of the pixels they
//! cover (outside the image: `border_value`); dilation is scipy's erosion of the
//! complement with the structure reflected and the origin negated (minus one on even
//! axes), which is the OR over the reflected window with `border_value` outside. Where a
//! `mask` is given and false, the pixel keeps its input. `iterations` repeats the step
//! (`< 1`: until nothing changes; the result is the same as scipy's changed-pixel
//! bookkeeping, which only skips pixels that cannot change). Outputs are `u8` 0/1.
//!
//! `binary_fill_holes(x)` is `NOT dilation(zeros, iterations=-1, mask=NOT x,
//! border_value=1)`: the background reachable from the border through the structure's
//! connectivity, complemented.

use super::rank::Footprint;
use crate::error::{Error, Result};

/// The parameters of a binary morphology op, as scipy names them.
#[derive(Clone, Debug, PartialEq)]
pub struct BinaryParams {
    /// The structuring element; `None` is `generate_binary_structure(rank, 1)`.
    pub structure: Option<Footprint>,
    /// Repeat count; `< 1` repeats until the result stops changing.
    pub iterations: i64,
    /// The value read outside the image.
    pub border_value: bool,
    /// Window shift per axis (one value for every axis; empty means 0).
    pub origin: Vec<isize>,
}

impl Default for BinaryParams {
    fn default() -> Self {
        BinaryParams {
            structure: None,
            iterations: 1,
            border_value: false,
            origin: Vec::new(),
        }
    }
}

/// One resolved binary step (3-D padded shapes, as [`super::rank::RankSpec`]).
#[derive(Clone, Debug, PartialEq)]
pub struct BinarySpec {
    /// The structure shape `[d, h, w]`.
    pub fshape: [usize; 3],
    /// The structure, row-major.
    pub mask: Vec<bool>,
    /// The origin per axis.
    pub origin: [isize; 3],
    /// The value read outside.
    pub border_value: bool,
    /// `false`: erosion (AND); `true`: dilation (OR over the already reflected window).
    pub dilate: bool,
    /// Repeat count; `< 1` until no change.
    pub iterations: i64,
}

impl BinarySpec {
    fn new(op: &str, dims: usize, p: &BinaryParams, dilate: bool) -> Result<Self> {
        let bad = |why: String| Err(Error::invalid(op, why));
        if !(1..=3).contains(&dims) {
            return bad(format!("the input must have 1 to 3 axes, got {dims}"));
        }
        let st = match &p.structure {
            Some(s) => s.clone(),
            None => Footprint::binary_structure(dims, 1)?,
        };
        if st.shape().len() != dims {
            return bad(format!(
                "the structure has rank {} but the input has {dims} axes",
                st.shape().len()
            ));
        }
        let origin: Vec<isize> = match p.origin.len() {
            0 => vec![0; dims],
            1 => vec![p.origin[0]; dims],
            n if n == dims => p.origin.clone(),
            _ => return bad(format!("origin {:?} needs one value or {dims}", p.origin)),
        };
        for (&o, &n) in origin.iter().zip(st.shape()) {
            let c = (n / 2) as isize + o;
            if c < 0 || c >= n as isize {
                return bad(format!("invalid origin {o} for a structure of size {n}"));
            }
        }
        let mut fshape = [1usize; 3];
        fshape[3 - dims..].copy_from_slice(st.shape());
        let mut org = [0isize; 3];
        org[3 - dims..].copy_from_slice(&origin);
        let mut mask = st.mask().to_vec();
        if dilate {
            mask.reverse();
            for a in 0..3 {
                org[a] = -org[a] - if fshape[a] % 2 == 0 { 1 } else { 0 };
            }
        }
        Ok(BinarySpec {
            fshape,
            mask,
            origin: org,
            border_value: p.border_value,
            dilate,
            iterations: p.iterations,
        })
    }

    /// Repeating until nothing changes terminates when each step only grows (dilation) or
    /// only shrinks (erosion) the set, which holds when the structure maps every element to
    /// itself. Without that, the result can oscillate forever (scipy then never returns), so
    /// the user's until-stable request is refused. `fill_holes` needs no check: it grows from
    /// the empty set, and a step is monotone in its input, so each step only adds.
    fn terminating(self, op: &str) -> Result<Self> {
        if self.iterations < 1 && !self.offsets().contains(&[0, 0, 0]) {
            return Err(Error::invalid(
                op,
                format!(
                    "iterations = {} repeats until the result stops changing, which needs the structure's \
                     element at its centre (shifted by origin) to be true: without it the result can \
                     oscillate forever. Give iterations >= 1, or such a structure",
                    self.iterations
                ),
            ));
        }
        Ok(self)
    }

    /// scipy's `binary_erosion` on a `dims`-D input.
    pub fn erosion(dims: usize, p: &BinaryParams) -> Result<Self> {
        Self::new("binary_erosion", dims, p, false)?.terminating("binary_erosion")
    }

    /// scipy's `binary_dilation` on a `dims`-D input.
    pub fn dilation(dims: usize, p: &BinaryParams) -> Result<Self> {
        Self::new("binary_dilation", dims, p, true)?.terminating("binary_dilation")
    }

    /// The dilation `binary_fill_holes` runs (iterations -1, border 1, scipy's origin).
    pub fn fill_holes(dims: usize, structure: Option<Footprint>, origin: &[isize]) -> Result<Self> {
        let p = BinaryParams {
            structure,
            iterations: -1,
            border_value: true,
            origin: origin.to_vec(),
        };
        Self::new("binary_fill_holes", dims, &p, true)
    }

    /// Offsets `(dz, dy, dx)` of the true structure elements (`j - (n/2 + origin)`).
    pub fn offsets(&self) -> Vec<[isize; 3]> {
        let [fd, fh, fw] = self.fshape;
        let c = |a: usize| (self.fshape[a] / 2) as isize + self.origin[a];
        let mut v = Vec::new();
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dilation_negates_offsets() {
        let st = Footprint::new(&[2, 3], vec![true, false, false, true, true, false]).expect("st");
        let p = BinaryParams {
            structure: Some(st),
            origin: vec![0, 1],
            ..Default::default()
        };
        let e = BinarySpec::erosion(2, &p).expect("e");
        let d = BinarySpec::dilation(2, &p).expect("d");
        let mut neg: Vec<[isize; 3]> = e.offsets().iter().map(|o| [-o[0], -o[1], -o[2]]).collect();
        let mut got = d.offsets();
        neg.sort();
        got.sort();
        assert_eq!(got, neg);
        assert!(BinarySpec::erosion(
            2,
            &BinaryParams {
                origin: vec![2],
                ..Default::default()
            }
        )
        .is_err());
    }

    /// Until-stable iterations with a structure that does not map each element to itself
    /// are refused (they can cycle forever); a true centre, or a count, is fine.
    #[test]
    fn until_stable_needs_a_true_centre() {
        let ring = Footprint::new(
            &[3, 3],
            vec![true, true, true, true, false, true, true, true, true],
        )
        .expect("ring");
        let p = |iterations: i64, origin: Vec<isize>| BinaryParams {
            structure: Some(ring.clone()),
            iterations,
            origin,
            ..Default::default()
        };
        for it in [0, -1] {
            let e = BinarySpec::dilation(2, &p(it, vec![])).expect_err("dilation");
            assert!(e.to_string().contains("oscillate forever"), "{e}");
            assert!(BinarySpec::erosion(2, &p(it, vec![])).is_err());
            // shifted so that a true element sits at the origin: terminates
            assert!(BinarySpec::dilation(2, &p(it, vec![1, 0])).is_ok());
        }
        assert!(BinarySpec::dilation(2, &p(3, vec![])).is_ok());
        assert!(BinarySpec::dilation(
            2,
            &BinaryParams {
                iterations: -1,
                ..Default::default()
            }
        )
        .is_ok());
    }
}
