//! kiln-cpu: the CPU backend. Every kiln op is implemented here, parallel with rayon over
//! contiguous chunks large enough to amortise the work-stealing overhead. Results here are
//! what the GPU backend is checked against (and these are checked against float64 naive code
//! in the tests).
//!
//! What both backends must compute identically (the Monte Carlo blocks and finishing math,
//! closed forms, filter path choice, GEMM storage check) lives in kiln-core and is
//! re-exported here under its old paths (`finance::{bsm, finish, BlockSums, ..}`,
//! `imaging::{path_2d, path_3d, FilterPath}`, `linalg::check_storage`); this crate adds the
//! rayon-parallel engines.
#![deny(missing_docs)]

pub mod elementwise;
pub mod finance;
pub mod hostbuf;
pub mod imaging;
pub mod linalg;
pub mod storage;

pub use hostbuf::{ExternalHost, HostBuf};
pub use storage::{CpuStorage, StorageElement};

use kiln_core::backend::check_same_len;
use kiln_core::{BackendKind, Result, UnaryOp};

/// The CPU backend. Cheap to create; uses rayon's global pool.
#[derive(Clone, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// A CPU backend.
    pub fn new() -> Self {
        CpuBackend
    }

    /// Worker threads rayon will use.
    pub fn threads(&self) -> usize {
        rayon::current_num_threads()
    }

    /// [`BackendKind::Cpu`].
    pub fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    /// `cpu`.
    pub fn name(&self) -> String {
        "cpu".into()
    }

    /// Apply `op` element-wise on host slices: `out[i] = op(x[i])` (equal lengths, else a
    /// `ShapeMismatch`), the float64-checked reference the GPU is compared with.
    pub fn unary_f32(&self, op: UnaryOp, x: &[f32], out: &mut [f32]) -> Result<()> {
        check_same_len(op.name(), x.len(), out.len())?;
        elementwise::unary_f32(op, x, out);
        Ok(())
    }
}
