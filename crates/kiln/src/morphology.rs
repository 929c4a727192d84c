//! Binary morphology on tensors, with scipy.ndimage's names, parameters and results:
//! `binary_erosion`, `binary_dilation`, `binary_opening`, `binary_closing`,
//! `binary_fill_holes`, and `generate_binary_structure` ([`Footprint::binary_structure`]).
//!
//! Inputs are tensors of 1 to 3 axes of `u8`, `u16` or `f32` (non-zero is true); outputs
//! are `u8` 0/1 of the same shape on the same device (scipy returns `bool`). The CPU and the
//! GPU return the same bits. Grey morphology is in [`crate::rank`].

use crate::tensor::{on_storage, Tensor};
pub use kiln_core::imaging::morphology::{BinaryParams, BinarySpec};
pub use kiln_core::imaging::rank::Footprint;
use kiln_core::storage::BackendStorage;
use kiln_core::Result;

/// A binary morphology op by scipy's name (for front ends that pick it at run time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryFunction {
    /// `binary_erosion`.
    Erosion,
    /// `binary_dilation`.
    Dilation,
    /// `binary_opening`: erosion, then dilation (both with `iterations`).
    Opening,
    /// `binary_closing`: dilation, then erosion.
    Closing,
    /// `binary_fill_holes` (uses `structure` and `origin` only).
    FillHoles,
}

impl BinaryFunction {
    /// scipy's name.
    pub fn name(&self) -> &'static str {
        match self {
            BinaryFunction::Erosion => "binary_erosion",
            BinaryFunction::Dilation => "binary_dilation",
            BinaryFunction::Opening => "binary_opening",
            BinaryFunction::Closing => "binary_closing",
            BinaryFunction::FillHoles => "binary_fill_holes",
        }
    }
}

impl Tensor {
    /// Runs one resolved binary op (with its iterations) on this tensor's backend
    /// (`BackendStorage::binary_morph`).
    pub fn binary_spec(&self, spec: &BinarySpec, op: &str) -> Result<Tensor> {
        let (_, shape) = self.rank_shape(op)?;
        let _r = crate::profiler().host_range(op);
        let s = on_storage!(self, |s| s.binary_morph(shape, spec, op)?);
        Ok(self.derive(s, self.shape().to_vec()))
    }

    /// Runs `f` with `p`.
    pub fn binary_apply(&self, f: BinaryFunction, p: &BinaryParams) -> Result<Tensor> {
        let (dims, shape) = self.rank_shape(f.name())?;
        match f {
            BinaryFunction::Erosion => self.binary_spec(&BinarySpec::erosion(dims, p)?, f.name()),
            BinaryFunction::Dilation => self.binary_spec(&BinarySpec::dilation(dims, p)?, f.name()),
            BinaryFunction::Opening => self
                .binary_spec(&BinarySpec::erosion(dims, p)?, f.name())?
                .binary_spec(&BinarySpec::dilation(dims, p)?, f.name()),
            BinaryFunction::Closing => self
                .binary_spec(&BinarySpec::dilation(dims, p)?, f.name())?
                .binary_spec(&BinarySpec::erosion(dims, p)?, f.name()),
            BinaryFunction::FillHoles => {
                let spec = BinarySpec::fill_holes(dims, p.structure.clone(), &p.origin)?;
                let _r = crate::profiler().host_range(f.name());
                let s = on_storage!(self, |s| s.binary_fill_holes(shape, &spec)?);
                Ok(self.derive(s, self.shape().to_vec()))
            }
        }
    }

    /// scipy's `binary_erosion`.
    pub fn binary_erosion(&self, p: &BinaryParams) -> Result<Tensor> {
        self.binary_apply(BinaryFunction::Erosion, p)
    }

    /// scipy's `binary_dilation`.
    pub fn binary_dilation(&self, p: &BinaryParams) -> Result<Tensor> {
        self.binary_apply(BinaryFunction::Dilation, p)
    }

    /// scipy's `binary_opening`.
    pub fn binary_opening(&self, p: &BinaryParams) -> Result<Tensor> {
        self.binary_apply(BinaryFunction::Opening, p)
    }

    /// scipy's `binary_closing`.
    pub fn binary_closing(&self, p: &BinaryParams) -> Result<Tensor> {
        self.binary_apply(BinaryFunction::Closing, p)
    }

    /// scipy's `binary_fill_holes(structure, origin)`.
    pub fn binary_fill_holes(&self, structure: Option<Footprint>, origin: &[isize]) -> Result<Tensor> {
        let p = BinaryParams {
            structure,
            origin: origin.to_vec(),
            ..Default::default()
        };
        self.binary_apply(BinaryFunction::FillHoles, &p)
    }
}
