//! Element-wise ops on the runtime: [`MapOp`]s and axpy on `f32`, `f16` or `bf16` storage
//! (f32 arithmetic), and [`Precision`]-driven storage for `f32` data.

use crate::{Engine, Runtime};
use kiln_core::backend::{bf16, check_same_len, f16, MapOp, Precision, PrecisionChoice};
use kiln_core::{DType, Result};

/// The result of [`Runtime::map_with_precision`]: values widened back to `f32`, and the
/// storage that was used with the reason.
#[derive(Clone, Debug)]
pub struct Mapped {
    /// `op(x)`, computed in f32 on the chosen storage.
    pub values: Vec<f32>,
    /// What storage ran and why.
    pub choice: PrecisionChoice,
}

impl Runtime {
    /// `out[i] = op(x[i])` on any storage, on the runtime's backend.
    ///
    /// On CUDA, inputs over a few MiB stream through the device in chunks on three streams
    /// (staged through pinned memory, uploads, kernels and downloads overlapped); smaller
    /// ones go through a tensor. Both run the same kernel. Sending large inputs through a
    /// tensor too (one staged upload, the kernel, one staged download) was measured against
    /// the chunks on an H100 host (2026-12-05, docs/performance.md): 2^28 f32 sigmoid host
    /// to host 74.2 and 82.1 ms against 85.3 and 76.4, equal within the host's noise, and it
    /// holds the whole input and result on the device, so the chunks stay.
    pub fn map_into<T: crate::FloatElement>(&self, op: MapOp, x: &[T], out: &mut [T]) -> Result<()> {
        op.validate()?;
        check_same_len(op.name(), x.len(), out.len())?;
        let _range = crate::profiler().host_range(op.name());
        match self.engine() {
            Engine::Cpu(_) => {
                kiln_cpu::elementwise::map(op, x, out);
                Ok(())
            }
            Engine::Cuda(c) => {
                if std::mem::size_of_val(x) > kiln_cuda::transfer::DIRECT_BYTES {
                    c.map_pipelined(op, x, out, Default::default()).map(|_| ())
                } else if x.is_empty() {
                    Ok(())
                } else {
                    self.tensor(x, &[x.len()])?.map(op)?.to_host_into(out)
                }
            }
        }
    }

    /// `op` applied element-wise to `x`.
    pub fn map<T: crate::FloatElement>(&self, op: MapOp, x: &[T]) -> Result<Vec<T>> {
        kiln_cuda::transfer::host_vec_then(x.len(), |out| self.map_into(op, x, out))
    }

    /// `y = a * x + y` (one f32 fma per element, rounded once to the storage).
    pub fn axpy<T: crate::FloatElement>(&self, a: f32, x: &[T], y: &mut [T]) -> Result<()> {
        if !a.is_finite() {
            return Err(kiln_core::Error::invalid(
                "axpy",
                format!("a = {a} must be finite"),
            ));
        }
        check_same_len("axpy", x.len(), y.len())?;
        match self.engine() {
            Engine::Cpu(_) => {
                kiln_cpu::elementwise::axpy(a, x, y);
                Ok(())
            }
            Engine::Cuda(_) if x.is_empty() => Ok(()),
            Engine::Cuda(_) => {
                let (tx, ty) = (self.tensor(x, &[x.len()])?, self.tensor(y, &[y.len()])?);
                tx.axpy(a, &ty)?.to_host_into(y)
            }
        }
    }

    /// `a * x + b`.
    pub fn scale_shift<T: crate::FloatElement>(&self, a: f32, b: f32, x: &[T]) -> Result<Vec<T>> {
        self.map(MapOp::ScaleShift { a, b }, x)
    }

    /// `min(max(x, lo), hi)`.
    pub fn clamp<T: crate::FloatElement>(&self, lo: f32, hi: f32, x: &[T]) -> Result<Vec<T>> {
        self.map(MapOp::Clamp { lo, hi }, x)
    }

    /// `op` on f32 data stored as `precision` says ([`Precision::resolve`] for `Auto`):
    /// the data is rounded to the storage, mapped, and widened back. The choice and its
    /// reason come back with the values.
    pub fn map_with_precision(&self, op: MapOp, x: &[f32], precision: Precision) -> Result<Mapped> {
        let choice = precision.resolve(&op, x);
        fn run<T: crate::FloatElement>(rt: &Runtime, op: MapOp, x: &[f32]) -> Result<Vec<f32>> {
            let xs: Vec<T> = x.iter().map(|&v| T::from_f32(v)).collect();
            Ok(rt.map(op, &xs)?.into_iter().map(T::to_f32).collect())
        }
        let values = match choice.storage {
            DType::F16 => run::<f16>(self, op, x)?,
            DType::BF16 => run::<bf16>(self, op, x)?,
            _ => run::<f32>(self, op, x)?,
        };
        Ok(Mapped { values, choice })
    }
}
