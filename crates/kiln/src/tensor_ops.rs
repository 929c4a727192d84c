//! The ops on [`Tensor`]s: element-wise maps and axpy, casts, the 2-D transpose, filter2d
//! (single, batched, channels), filter3d and matmul. Each checks shapes, dtypes and devices
//! here, then runs the backend storage's op (see `kiln_core::storage::BackendStorage`); on
//! CUDA it is queued on the current stream and returns at once.

use crate::imaging::FilterPath;
use crate::tensor::{on_storage, on_storage2, Tensor};
use kiln_core::backend::{MapOp, UnaryOp};
use kiln_core::imaging::{path_2d, path_3d};
use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D};
use kiln_core::linalg::{Gemm, GemmImpl, GemmPrecision};
use kiln_core::storage::BackendStorage;
use kiln_core::{DType, Error, Result};

fn range(op: &str) -> kiln_cuda::Range {
    crate::profiler().host_range(op)
}

impl Tensor {
    /// `op` element-wise (f32, f16, bf16; f32 arithmetic, rounded once to the storage).
    pub fn map(&self, op: MapOp) -> Result<Tensor> {
        let _r = range(op.name());
        let s = on_storage!(self, |s| s.map(op)?);
        Ok(self.derive(s, self.shape().to_vec()))
    }

    /// `1 / (1 + exp(-x))`.
    pub fn sigmoid(&self) -> Result<Tensor> {
        self.map(MapOp::Unary(UnaryOp::Sigmoid))
    }

    /// `tanh(x)`.
    pub fn tanh(&self) -> Result<Tensor> {
        self.map(MapOp::Unary(UnaryOp::Tanh))
    }

    /// `max(x, 0)` (NaN stays NaN).
    pub fn relu(&self) -> Result<Tensor> {
        self.map(MapOp::Unary(UnaryOp::Relu))
    }

    /// `exp(x)`.
    pub fn exp(&self) -> Result<Tensor> {
        self.map(MapOp::Unary(UnaryOp::Exp))
    }

    /// `a * x + b` (one fma).
    pub fn scale_shift(&self, a: f32, b: f32) -> Result<Tensor> {
        self.map(MapOp::ScaleShift { a, b })
    }

    /// `min(max(x, lo), hi)`; NaN stays NaN.
    pub fn clamp(&self, lo: f32, hi: f32) -> Result<Tensor> {
        self.map(MapOp::Clamp { lo, hi })
    }

    /// `a * self + y` (same shape, dtype and device), one fma rounded once.
    pub fn axpy(&self, a: f32, y: &Tensor) -> Result<Tensor> {
        if self.shape() != y.shape() {
            return Err(Error::ShapeMismatch {
                op: "axpy".into(),
                expected: self.shape().to_vec(),
                got: y.shape().to_vec(),
            });
        }
        let _r = range("axpy");
        let s = on_storage2!(self, y, "axpy", |x, y| x.axpy(a, y)?);
        Ok(self.derive(s, self.shape().to_vec()))
    }

    /// Every element converted to `dtype` (floats round to nearest-even; 8- and 16-bit
    /// integers round half away from zero and clamp, NaN to 0; see
    /// `kiln_core::storage::cast_f64`). The same tensor when it already is `dtype`.
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let _r = range("cast");
        let s = on_storage!(self, |s| s.cast(dtype)?);
        Ok(self.derive(s, self.shape().to_vec()))
    }

    /// The transpose of a 2-D tensor: `(rows, cols)` becomes `(cols, rows)`.
    pub fn transpose(&self) -> Result<Tensor> {
        let [rows, cols] = self.dims::<2>("transpose", "(rows, cols)")?;
        let _r = range("transpose");
        let s = on_storage!(self, |s| s.transpose(rows, cols)?);
        Ok(self.derive(s, vec![cols, rows]))
    }

    /// The shape as `N` dimensions, or an error saying which layout was expected.
    fn dims<const N: usize>(&self, op: &str, layout: &str) -> Result<[usize; N]> {
        let d: [usize; N] = self.shape().try_into().map_err(|_| {
            Error::invalid(
                op,
                format!("expected a {N}-D tensor {layout}, got shape {:?}", self.shape()),
            )
        })?;
        if d.contains(&0) {
            return Err(Error::invalid(
                op,
                format!("the input is empty (shape {:?})", self.shape()),
            ));
        }
        Ok(d)
    }

    /// Correlate an `(h, w)` image, or each plane of an `(n, h, w)` batch, with `kernel`
    /// under `mode` (scipy.ndimage semantics; f32).
    pub fn filter2d(&self, kernel: &Kernel2D, mode: BoundaryMode, path: FilterPath) -> Result<Tensor> {
        let shape = match self.rank() {
            2 => {
                let [h, w] = self.dims::<2>("filter2d", "(h, w) or (n, h, w)")?;
                [1, h, w]
            }
            _ => self.dims::<3>("filter2d", "(h, w) or (n, h, w)")?,
        };
        let sep = match path_2d(kernel, mode, path)? {
            FilterPath::Separable => kernel.separable_for(mode),
            _ => None,
        };
        let _r = range("filter2d");
        let s = on_storage!(self, |s| s.filter2d(shape, kernel, mode, sep.as_ref())?);
        Ok(self.derive(s, self.shape().to_vec()))
    }

    /// Filter each channel of an `(h, w, c)` image on its own: the channels are split into
    /// planes (a transpose of the `(h·w) × c` matrix), filtered as a batch and interleaved
    /// back, all on the tensor's device.
    pub fn filter2d_channels(
        &self,
        kernel: &Kernel2D,
        mode: BoundaryMode,
        path: FilterPath,
    ) -> Result<Tensor> {
        let [h, w, c] = self.dims::<3>("filter2d", "(h, w, channels)")?;
        let planes = self.reshape(&[h * w, c])?.transpose()?.reshape(&[c, h, w])?;
        let filtered = planes.filter2d(kernel, mode, path)?;
        filtered.reshape(&[c, h * w])?.transpose()?.reshape(&[h, w, c])
    }

    /// Correlate a `(d, h, w)` volume with a `k×k×k` kernel under `mode` (f32).
    pub fn filter3d(&self, kernel: &Kernel3D, mode: BoundaryMode, path: FilterPath) -> Result<Tensor> {
        let shape = self.dims::<3>("filter3d", "(d, h, w)")?;
        let sep = match path_3d(kernel, mode, path)? {
            FilterPath::Separable => kernel.separable_for(mode),
            _ => None,
        };
        let _r = range("filter3d");
        let s = on_storage!(self, |s| s.filter3d(shape, kernel, mode, sep.as_ref())?);
        Ok(self.derive(s, self.shape().to_vec()))
    }

    /// The matrix product `self · b` in `precision` (its storage type must be the dtype of
    /// both): `(m, k)·(k, n) -> (m, n)`, or per batch `(z, m, k)·(z, k, n) -> (z, m, n)`,
    /// where a 2-D operand against a 3-D one is broadcast over the batch.
    pub fn matmul(&self, b: &Tensor, precision: GemmPrecision) -> Result<Tensor> {
        self.matmul_with(b, precision, GemmImpl::Library)
    }

    /// [`Tensor::matmul`] with an implementation chosen (kiln's tiled and naive kernels are
    /// f32 CUDA kernels).
    pub fn matmul_with(&self, b: &Tensor, precision: GemmPrecision, imp: GemmImpl) -> Result<Tensor> {
        let bad = || {
            Error::invalid(
                "matmul",
                format!(
                    "shapes {:?} and {:?} do not multiply: expected (m, k)·(k, n) or (z, m, k)·(z, k, n)",
                    self.shape(),
                    b.shape()
                ),
            )
        };
        let split = |s: &[usize]| -> Option<(Option<usize>, usize, usize)> {
            match *s {
                [r, c] => Some((None, r, c)),
                [z, r, c] => Some((Some(z), r, c)),
                _ => None,
            }
        };
        let (za, m, k) = split(self.shape()).ok_or_else(bad)?;
        let (zb, k2, n) = split(b.shape()).ok_or_else(bad)?;
        if k != k2 || m == 0 || n == 0 || k == 0 {
            return Err(bad());
        }
        let batch = match (za, zb) {
            (Some(x), Some(y)) if x != y => return Err(bad()),
            (Some(x), _) | (None, Some(x)) => x,
            (None, None) => 1,
        };
        let stride_a = if za.is_some() { m * k } else { 0 };
        let stride_b = if zb.is_some() { k * n } else { 0 };
        let g = Gemm::new(m, n, k).batched(batch).with_strides(stride_a, stride_b);
        let out_shape = if za.is_some() || zb.is_some() {
            vec![batch, m, n]
        } else {
            vec![m, n]
        };
        let _r = range("matmul");
        let s = on_storage2!(self, b, "matmul", |x, y| x.matmul(y, &g, precision, imp)?);
        Ok(self.derive(s, out_shape))
    }
}
