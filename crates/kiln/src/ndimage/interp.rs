//! scipy.ndimage's interpolation on tensors: [`Tensor::resample`] runs `zoom` / `shift`
//! ([`Resample::ZoomShift`]), `affine_transform` / `rotate` ([`Resample::Affine`]) and
//! `map_coordinates` ([`Resample::Coordinates`]), and [`Tensor::spline_filter1d`] the
//! prefilter, on the tensor's device. A CPU tensor runs kiln-core's loops
//! (`kiln_core::imaging::interp`); a CUDA tensor runs `kernels/interp.cu`, whose outputs are
//! the CPU's to the bit. What scipy does in Python (prefiltering before the resampling,
//! prepadding, zoom factors, rotate's matrix) is the caller's: the resampled tensor holds
//! the coefficients the interpolation reads, as scipy's C layer receives them.
//!
//! The Python `kiln.ndimage` interpolation routes CUDA arrays here (`ndimage_resample`,
//! `ndimage_spline_filter` in kiln-py); `tests/interp_gpu.rs` checks the GPU's bits
//! against the CPU's.

use crate::tensor::{Storage, Tensor};
use kiln_core::imaging::interp::{self as cpu, Mapping, OutValue, Store};
use kiln_core::{DType, Error, Result};
use kiln_cpu::{CpuStorage, StorageElement};
use kiln_cuda::ops::{Cast, Interp, SplineFilter1d};
use kiln_cuda::CudaStorage;

pub use kiln_core::imaging::interp::InterpMode;
pub use kiln_cuda::{InterpSpec, Resample};

/// The CPU loop of `spec` on `input` into `out`.
fn run_cpu<T: OutValue>(input: &[f64], spec: &InterpSpec<'_>, out: &mut [T]) -> Result<()> {
    let s = spec;
    match s.map {
        Resample::ZoomShift {
            zoom,
            shift,
            grid_mode,
        } => cpu::zoom_shift_into(
            input,
            s.ishape,
            zoom,
            shift,
            s.oshape,
            s.order,
            s.mode,
            s.cval,
            s.nprepad,
            grid_mode,
            Store::Float,
            out,
        ),
        Resample::Coordinates(c) => cpu::geometric_transform_into(
            input,
            s.ishape,
            Mapping::Coordinates(c),
            s.oshape,
            s.order,
            s.mode,
            s.cval,
            s.nprepad,
            Store::Float,
            out,
        ),
        Resample::Affine { matrix, offset } => cpu::geometric_transform_into(
            input,
            s.ishape,
            Mapping::Affine {
                matrix,
                shift: offset,
            },
            s.oshape,
            s.order,
            s.mode,
            s.cval,
            s.nprepad,
            Store::Float,
            out,
        ),
    }
}

fn cpu_storage(c: &CpuStorage, spec: &InterpSpec<'_>, out: DType, n: usize) -> Result<CpuStorage> {
    let converted: Vec<f64>;
    let input: &[f64] = match c {
        CpuStorage::F64(_) => c.as_slice::<f64>().unwrap_or_default(),
        CpuStorage::F32(_) => {
            converted = c
                .as_slice::<f32>()
                .unwrap_or_default()
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            &converted
        }
        _ => return Err(Error::invalid("resample", "expected f32 or f64 data")),
    };
    Ok(if out == DType::F64 {
        let mut o = vec![0.0f64; n];
        run_cpu(input, spec, &mut o)?;
        f64::into_storage(o)
    } else {
        let mut o = vec![0.0f32; n];
        run_cpu(input, spec, &mut o)?;
        f32::into_storage(o)
    })
}

impl Tensor {
    /// Resamples the tensor (f32 or f64 spline coefficients of shape `spec.ishape`) as
    /// scipy.ndimage's `zoom`, `shift` or `affine_transform` do, into a new tensor of shape
    /// `spec.oshape` and dtype `out` (f32, rounded once from the f64 value, or f64), on the
    /// tensor's device: CPU and CUDA give the same bits. The GPU takes ranks 1 to 3.
    pub fn resample(&self, spec: &InterpSpec<'_>, out: DType) -> Result<Tensor> {
        let op = match spec.map {
            Resample::ZoomShift { .. } => "zoom_shift",
            Resample::Affine { .. } => "affine_transform",
            Resample::Coordinates(_) => "map_coordinates",
        };
        if self.shape() != spec.ishape {
            return Err(Error::ShapeMismatch {
                op: op.into(),
                expected: spec.ishape.to_vec(),
                got: self.shape().to_vec(),
            });
        }
        for (what, d) in [("input", self.dtype()), ("output", out)] {
            if !matches!(d, DType::F32 | DType::F64) {
                return Err(Error::invalid(
                    op,
                    format!("the {what} is {d}: resampling takes f32 or f64 (cast first)"),
                ));
            }
        }
        let n = spec
            .oshape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| Error::invalid(op, format!("output shape {:?} overflows", spec.oshape)))?;
        let _r = crate::profiler().host_range(op);
        let s = match self.storage() {
            Storage::Cpu(c) => Storage::Cpu(cpu_storage(c, spec, out, n)?),
            Storage::Cuda(g) => {
                let dev = g.backend();
                g.use_on(dev.stream())?;
                let o = CudaStorage::alloc(dev, out, n, op)?;
                dev.run(Interp {
                    src: g.data(),
                    dst: o.data(),
                    spec,
                })?;
                Storage::Cuda(o)
            }
        };
        Ok(self.derive(s, spec.oshape.to_vec()))
    }

    /// scipy's `spline_filter1d` (order 0–5) along `axis` on the tensor's device: the f64
    /// coefficients (the input cast to f64 first, as scipy filters in float64), then cast
    /// to `out` (f32 rounds once) or left f64. CPU and CUDA give the same bits. Orders 0
    /// and 1 and axes of one sample leave the values as they are.
    pub fn spline_filter1d(&self, axis: usize, order: usize, mode: InterpMode, out: DType) -> Result<Tensor> {
        let op = "spline_filter1d";
        for (what, d) in [("input", self.dtype()), ("output", out)] {
            if !matches!(d, DType::F32 | DType::F64) {
                return Err(Error::invalid(
                    op,
                    format!("the {what} is {d}: the prefilter takes f32 or f64 (cast first)"),
                ));
            }
        }
        let _r = crate::profiler().host_range(op);
        let shape = self.shape().to_vec();
        let s = match self.storage() {
            Storage::Cpu(c) => {
                let mut v: Vec<f64> = match c {
                    CpuStorage::F64(_) => c.as_slice::<f64>().unwrap_or_default().to_vec(),
                    _ => c
                        .as_slice::<f32>()
                        .unwrap_or_default()
                        .iter()
                        .map(|&v| f64::from(v))
                        .collect(),
                };
                cpu::spline_filter1d(&mut v, &shape, axis, order, mode)?;
                Storage::Cpu(f64::into_storage(v))
            }
            Storage::Cuda(g) => {
                // a fresh f64 buffer (the input converted, or copied): the filter runs in
                // place on it
                let dev = g.backend();
                g.use_on(dev.stream())?;
                let o = CudaStorage::alloc(dev, DType::F64, shape.iter().product(), op)?;
                dev.run(Cast {
                    src: g.data(),
                    dst: o.data(),
                })?;
                dev.run(SplineFilter1d {
                    data: o.data(),
                    shape: &shape,
                    axis,
                    order,
                    mode,
                })?;
                Storage::Cuda(o)
            }
        };
        self.derive(s, shape).cast(out)
    }
}
