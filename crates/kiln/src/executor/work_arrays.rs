//! Array workloads: batched 2-D filters and 3-D volumes (batch items split), strided-batch
//! GEMM (batches split) and element-wise maps over large arrays (ranges split). Each chunk
//! is an independent slice of the answer; the merge concatenates them in chunk order.

use std::ops::Range;

use kiln_core::backend::MapOp;
use kiln_core::imaging::{BoundaryMode, FilterPath, Kernel2D, Kernel3D};
use kiln_core::linalg::{Gemm, GemmPrecision};
use kiln_core::{Error, Result};

use super::devices::Worker;
use super::schedule::Workload;

fn range(i: usize, per: usize, total: usize) -> Range<usize> {
    let a = i.saturating_mul(per).min(total);
    a..a.saturating_add(per).min(total)
}

fn positive(op: &str, what: &str, v: usize) -> Result<()> {
    if v == 0 {
        return Err(Error::invalid(op, format!("{what} = 0; it must be >= 1")));
    }
    Ok(())
}

fn concat(parts: Vec<Vec<f32>>) -> Vec<f32> {
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for p in parts {
        out.extend_from_slice(&p);
    }
    out
}

/// A batch `(n, h, w)` of images, each correlated with one kernel
/// ([`Runtime::filter2d_batch`](crate::Runtime::filter2d_batch)); chunks are runs of
/// `items_per_chunk` images.
#[derive(Clone, Debug)]
pub struct FilterBatch<'a> {
    images: &'a [f32],
    shape: [usize; 3],
    kernel: Kernel2D,
    mode: BoundaryMode,
    path: FilterPath,
    items_per_chunk: usize,
}

impl<'a> FilterBatch<'a> {
    /// Checks the sizes (`images.len() == n·h·w`, no zero dimension).
    pub fn new(
        images: &'a [f32],
        shape: [usize; 3],
        kernel: Kernel2D,
        mode: BoundaryMode,
        path: FilterPath,
        items_per_chunk: usize,
    ) -> Result<Self> {
        positive("filter2d_batch", "items_per_chunk", items_per_chunk)?;
        check_items("filter2d_batch", &shape, images.len())?;
        Ok(FilterBatch {
            images,
            shape,
            kernel,
            mode,
            path,
            items_per_chunk,
        })
    }
}

fn check_items(op: &str, shape: &[usize], len: usize) -> Result<()> {
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if shape.contains(&0) || n != Some(len) {
        return Err(Error::ShapeMismatch {
            op: format!("{op}: elements of the batch"),
            expected: shape.to_vec(),
            got: vec![len],
        });
    }
    Ok(())
}

impl Workload for FilterBatch<'_> {
    type Part = Vec<f32>;
    type Output = Vec<f32>;

    fn key(&self) -> String {
        format!("filter2d/k{}/{:?}/{:?}", self.kernel.size(), self.mode, self.path)
    }

    fn chunks(&self) -> usize {
        self.shape[0].div_ceil(self.items_per_chunk)
    }

    fn units(&self, i: usize) -> f64 {
        let k = self.kernel.size() as f64;
        range(i, self.items_per_chunk, self.shape[0]).len() as f64
            * (self.shape[1] * self.shape[2]) as f64
            * k
            * k
    }

    fn run(&self, worker: &Worker, i: usize) -> Result<Vec<f32>> {
        let [n, h, w] = self.shape;
        let r = range(i, self.items_per_chunk, n);
        let src = &self.images[r.start * h * w..r.end * h * w];
        worker.run(|rt| rt.filter2d_batch(src, [r.len(), h, w], &self.kernel, self.mode, self.path))
    }

    fn merge(&self, parts: Vec<Vec<f32>>) -> Result<Vec<f32>> {
        Ok(concat(parts))
    }
}

/// A batch `(n, d, h, w)` of volumes, each correlated with one 3-D kernel
/// ([`Runtime::filter3d`](crate::Runtime::filter3d)); chunks are runs of
/// `items_per_chunk` volumes.
#[derive(Clone, Debug)]
pub struct VolumeBatch<'a> {
    volumes: &'a [f32],
    shape: [usize; 4],
    kernel: Kernel3D,
    mode: BoundaryMode,
    path: FilterPath,
    items_per_chunk: usize,
}

impl<'a> VolumeBatch<'a> {
    /// Checks the sizes (`volumes.len() == n·d·h·w`, no zero dimension).
    pub fn new(
        volumes: &'a [f32],
        shape: [usize; 4],
        kernel: Kernel3D,
        mode: BoundaryMode,
        path: FilterPath,
        items_per_chunk: usize,
    ) -> Result<Self> {
        positive("filter3d_batch", "items_per_chunk", items_per_chunk)?;
        check_items("filter3d_batch", &shape, volumes.len())?;
        Ok(VolumeBatch {
            volumes,
            shape,
            kernel,
            mode,
            path,
            items_per_chunk,
        })
    }
}

impl Workload for VolumeBatch<'_> {
    type Part = Vec<f32>;
    type Output = Vec<f32>;

    fn key(&self) -> String {
        format!("filter3d/k{}/{:?}/{:?}", self.kernel.size(), self.mode, self.path)
    }

    fn chunks(&self) -> usize {
        self.shape[0].div_ceil(self.items_per_chunk)
    }

    fn units(&self, i: usize) -> f64 {
        let k = self.kernel.size() as f64;
        let vox = (self.shape[1] * self.shape[2] * self.shape[3]) as f64;
        range(i, self.items_per_chunk, self.shape[0]).len() as f64 * vox * k * k * k
    }

    fn run(&self, worker: &Worker, i: usize) -> Result<Vec<f32>> {
        let [n, d, h, w] = self.shape;
        let vox = d * h * w;
        let r = range(i, self.items_per_chunk, n);
        worker.run(|rt| {
            let mut out = Vec::with_capacity(r.len() * vox);
            for z in r.clone() {
                let v = &self.volumes[z * vox..(z + 1) * vox];
                out.extend(rt.filter3d(v, [d, h, w], &self.kernel, self.mode, self.path)?);
            }
            Ok(out)
        })
    }

    fn merge(&self, parts: Vec<Vec<f32>>) -> Result<Vec<f32>> {
        Ok(concat(parts))
    }
}

/// A strided-batch f32 GEMM ([`Runtime::matmul`](crate::Runtime::matmul)); chunks are
/// runs of `batches_per_chunk` products (a broadcast operand, stride 0, goes to every
/// chunk whole).
#[derive(Clone, Debug)]
pub struct GemmBatch<'a> {
    a: &'a [f32],
    b: &'a [f32],
    g: Gemm,
    precision: GemmPrecision,
    batches_per_chunk: usize,
}

impl<'a> GemmBatch<'a> {
    /// Checks the shapes ([`Gemm::validate`]) and that `precision` stores f32 (F32 or TF32).
    pub fn new(
        a: &'a [f32],
        b: &'a [f32],
        g: Gemm,
        precision: GemmPrecision,
        batches_per_chunk: usize,
    ) -> Result<Self> {
        positive("gemm_batch", "batches_per_chunk", batches_per_chunk)?;
        kiln_core::linalg::check_storage::<f32>(precision)?;
        g.validate(a.len(), b.len())?;
        Ok(GemmBatch {
            a,
            b,
            g,
            precision,
            batches_per_chunk,
        })
    }

    /// The sub-problem of batches `r`: its GEMM and operand slices.
    fn part(&self, r: &Range<usize>) -> (Gemm, &'a [f32], &'a [f32]) {
        let g = Gemm {
            batch: r.len(),
            ..self.g
        };
        let slice = |x: &'a [f32], stride: usize, one: usize| -> &'a [f32] {
            if stride == 0 {
                x
            } else {
                let s = r.start * stride;
                &x[s..s + (r.len() - 1) * stride + one]
            }
        };
        let (mk, kn) = (self.g.m * self.g.k, self.g.k * self.g.n);
        (
            g,
            slice(self.a, self.g.stride_a, mk),
            slice(self.b, self.g.stride_b, kn),
        )
    }
}

impl Workload for GemmBatch<'_> {
    type Part = Vec<f32>;
    type Output = Vec<f32>;

    fn key(&self) -> String {
        format!(
            "gemm/{}/{}x{}x{}",
            self.precision.name(),
            self.g.m,
            self.g.n,
            self.g.k
        )
    }

    fn chunks(&self) -> usize {
        self.g.batch.div_ceil(self.batches_per_chunk)
    }

    fn units(&self, i: usize) -> f64 {
        let r = range(i, self.batches_per_chunk, self.g.batch);
        2.0 * (self.g.m * self.g.n * self.g.k) as f64 * r.len() as f64
    }

    fn run(&self, worker: &Worker, i: usize) -> Result<Vec<f32>> {
        let r = range(i, self.batches_per_chunk, self.g.batch);
        let (g, a, b) = self.part(&r);
        worker.run(|rt| rt.matmul(a, b, &g, self.precision))
    }

    fn merge(&self, parts: Vec<Vec<f32>>) -> Result<Vec<f32>> {
        Ok(concat(parts))
    }
}

/// An element-wise map over a large f32 array
/// ([`Runtime::map_into`](crate::Runtime::map_into)); chunks are ranges of
/// `elems_per_chunk` elements.
#[derive(Clone, Debug)]
pub struct MapArray<'a> {
    op: MapOp,
    x: &'a [f32],
    elems_per_chunk: usize,
}

impl<'a> MapArray<'a> {
    /// Checks the op's parameters.
    pub fn new(op: MapOp, x: &'a [f32], elems_per_chunk: usize) -> Result<Self> {
        positive("map_array", "elems_per_chunk", elems_per_chunk)?;
        op.validate()?;
        Ok(MapArray {
            op,
            x,
            elems_per_chunk,
        })
    }
}

impl Workload for MapArray<'_> {
    type Part = Vec<f32>;
    type Output = Vec<f32>;

    fn key(&self) -> String {
        format!("map/{}", self.op.name())
    }

    fn chunks(&self) -> usize {
        self.x.len().div_ceil(self.elems_per_chunk)
    }

    fn units(&self, i: usize) -> f64 {
        range(i, self.elems_per_chunk, self.x.len()).len() as f64
    }

    fn run(&self, worker: &Worker, i: usize) -> Result<Vec<f32>> {
        let src = &self.x[range(i, self.elems_per_chunk, self.x.len())];
        worker.run(|rt| {
            let mut out = vec![f32::NAN; src.len()];
            rt.map_into(self.op, src, &mut out)?;
            Ok(out)
        })
    }

    fn merge(&self, parts: Vec<Vec<f32>>) -> Result<Vec<f32>> {
        Ok(concat(parts))
    }
}
