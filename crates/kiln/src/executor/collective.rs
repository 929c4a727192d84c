//! Collectives on kiln tensors, one tensor per rank: all-reduce (sum), all-gather and
//! broadcast, through NCCL on GPUs ([`kiln_cuda::nccl`], libnccl loaded at run time) or in
//! host memory on CPU ranks; and a column-sharded GEMM built on them ([`sharded_matmul`]).
//!
//! A group is all GPUs (NCCL: one rank per device) or all CPU ranks (host: the reduction
//! adds ranks in rank order, so it is deterministic). A group of GPUs where libnccl is
//! absent is [`Error::LibraryNotFound`]; a mixed group is `Unsupported`.

use std::sync::Arc;

use kiln_core::linalg::GemmPrecision;
use kiln_core::{DType, Error, Result};
use kiln_cuda::nccl::NcclGroup;
use kiln_cuda::CudaStorage;

use crate::{Engine, Runtime, Storage, Tensor};

enum Inner {
    Host,
    Nccl(NcclGroup),
}

/// A group of ranks (runtimes) that run collectives together.
pub struct Collective {
    ranks: Vec<Arc<Runtime>>,
    inner: Inner,
}

impl std::fmt::Debug for Collective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.ranks.iter().map(|r| r.device_name()).collect();
        f.debug_struct("Collective").field("ranks", &names).finish()
    }
}

impl Collective {
    /// A group over `ranks` (rank `i` is `ranks[i]`): every rank a CPU runtime, or every
    /// rank a distinct GPU (NCCL).
    pub fn new(ranks: Vec<Arc<Runtime>>) -> Result<Self> {
        if ranks.is_empty() {
            return Err(Error::invalid("collective", "a group needs at least one rank"));
        }
        let gpus: Vec<_> = ranks
            .iter()
            .filter_map(|r| match r.engine() {
                Engine::Cuda(c) => Some(c.clone()),
                Engine::Cpu(_) => None,
            })
            .collect();
        let inner = if gpus.is_empty() {
            Inner::Host
        } else if gpus.len() == ranks.len() {
            Inner::Nccl(NcclGroup::new(gpus)?)
        } else {
            return Err(Error::Unsupported {
                op: "a collective over CPU and GPU ranks together".into(),
                backend: "cpu+cuda".into(),
            });
        };
        Ok(Collective { ranks, inner })
    }

    /// Ranks in the group.
    pub fn size(&self) -> usize {
        self.ranks.len()
    }

    /// The runtime of rank `r`.
    pub fn rank(&self, r: usize) -> Option<&Arc<Runtime>> {
        self.ranks.get(r)
    }

    /// Whether the group runs on NCCL.
    pub fn is_nccl(&self) -> bool {
        matches!(self.inner, Inner::Nccl(_))
    }

    fn check(&self, op: &str, xs: &[Tensor]) -> Result<(Vec<usize>, DType)> {
        if xs.len() != self.size() {
            return Err(Error::invalid(
                op,
                format!("{} tensors for {} ranks", xs.len(), self.size()),
            ));
        }
        let (shape, dtype) = (xs[0].shape().to_vec(), xs[0].dtype());
        for (r, (x, rt)) in xs.iter().zip(&self.ranks).enumerate() {
            if x.device() != rt.device() {
                return Err(Error::invalid(
                    op,
                    format!(
                        "rank {r}'s tensor is on {}, the rank is {}",
                        x.device(),
                        rt.device()
                    ),
                ));
            }
            if x.shape() != shape.as_slice() || x.dtype() != dtype {
                return Err(Error::ShapeMismatch {
                    op: format!("{op}: rank {r}'s tensor ({} vs {})", x.dtype(), dtype),
                    expected: shape.clone(),
                    got: x.shape().to_vec(),
                });
            }
        }
        Ok((shape, dtype))
    }

    /// Every rank gets the elementwise sum of every rank's tensor.
    pub fn all_reduce_sum(&self, xs: &[Tensor]) -> Result<Vec<Tensor>> {
        let (shape, dtype) = self.check("all_reduce", xs)?;
        match &self.inner {
            Inner::Host => {
                let parts = host_parts(xs, dtype, "all_reduce")?;
                let mut sum = parts[0].clone();
                for p in &parts[1..] {
                    for (s, v) in sum.iter_mut().zip(p) {
                        *s += v;
                    }
                }
                self.host_out(&vec![sum; self.size()], &shape, dtype)
            }
            Inner::Nccl(g) => {
                let outs = self.alloc_like("all_reduce", dtype, xs[0].len(), &shape)?;
                g.all_reduce_sum(&cuda_of(xs)?, &cuda_of(&outs)?)?;
                Ok(outs)
            }
        }
    }

    /// Every rank gets every rank's tensor stacked in rank order: shape `[size, ...shape]`.
    pub fn all_gather(&self, xs: &[Tensor]) -> Result<Vec<Tensor>> {
        let (shape, dtype) = self.check("all_gather", xs)?;
        let mut out_shape = vec![self.size()];
        out_shape.extend_from_slice(&shape);
        match &self.inner {
            Inner::Host => {
                let all: Vec<f64> = host_parts(xs, dtype, "all_gather")?.concat();
                self.host_out(&vec![all; self.size()], &out_shape, dtype)
            }
            Inner::Nccl(g) => {
                let outs = self.alloc_like("all_gather", dtype, xs[0].len() * self.size(), &out_shape)?;
                g.all_gather(&cuda_of(xs)?, &cuda_of(&outs)?)?;
                Ok(outs)
            }
        }
    }

    /// Every rank gets a copy of rank `root`'s tensor (the others' values are ignored but
    /// their shapes must match).
    pub fn broadcast(&self, root: usize, xs: &[Tensor]) -> Result<Vec<Tensor>> {
        let (shape, dtype) = self.check("broadcast", xs)?;
        if root >= self.size() {
            return Err(Error::invalid(
                "broadcast",
                format!("root {root} is not a rank of a group of {}", self.size()),
            ));
        }
        match &self.inner {
            Inner::Host => {
                let parts = host_parts(&xs[root..=root], dtype, "broadcast")?;
                self.host_out(&vec![parts[0].clone(); self.size()], &shape, dtype)
            }
            Inner::Nccl(g) => {
                // in place on fresh copies, so the callers' tensors are left as they were
                let outs: Vec<Tensor> = xs
                    .iter()
                    .zip(&self.ranks)
                    .map(|(x, rt)| x.to_device_copy(rt))
                    .collect::<Result<_>>()?;
                g.broadcast(root, &cuda_of(&outs)?)?;
                Ok(outs)
            }
        }
    }

    fn alloc_like(&self, op: &str, dtype: DType, n: usize, shape: &[usize]) -> Result<Vec<Tensor>> {
        self.ranks
            .iter()
            .map(|rt| match rt.engine() {
                Engine::Cuda(c) => {
                    Tensor::from_parts(Storage::Cuda(CudaStorage::alloc(c, dtype, n, op)?), shape)
                }
                Engine::Cpu(_) => Err(Error::invalid(op, "a CPU rank in an NCCL group")),
            })
            .collect()
    }

    fn host_out(&self, vals: &[Vec<f64>], shape: &[usize], dtype: DType) -> Result<Vec<Tensor>> {
        self.ranks
            .iter()
            .zip(vals)
            .map(|(rt, v)| match dtype {
                DType::F64 => rt.tensor(v, shape),
                _ => {
                    let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                    rt.tensor(&f, shape)
                }
            })
            .collect()
    }
}

/// The host values of CPU ranks' tensors (f32 and f64 tensors; f32 sums stay exact in f64
/// and round once, to the f32 sum's nearest).
fn host_parts(xs: &[Tensor], dtype: DType, op: &str) -> Result<Vec<Vec<f64>>> {
    xs.iter()
        .map(|x| match dtype {
            DType::F32 => Ok(x.to_vec::<f32>()?.into_iter().map(f64::from).collect()),
            DType::F64 => x.to_vec::<f64>(),
            d => Err(Error::Unsupported {
                op: format!("{op} on {d} tensors (CPU ranks take f32 and f64)"),
                backend: "cpu".into(),
            }),
        })
        .collect()
}

fn cuda_of(xs: &[Tensor]) -> Result<Vec<&CudaStorage>> {
    xs.iter()
        .map(|x| match x.storage() {
            Storage::Cuda(s) => Ok(s),
            Storage::Cpu(_) => Err(Error::invalid("collective", "a CPU tensor in an NCCL group")),
        })
        .collect()
}

impl Tensor {
    /// A copy of this tensor on `rt`'s device (a fresh storage even when already there).
    fn to_device_copy(&self, rt: &Runtime) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => rt.tensor(&self.to_vec::<f32>()?, self.shape()),
            DType::F64 => rt.tensor(&self.to_vec::<f64>()?, self.shape()),
            d => Err(Error::Unsupported {
                op: format!("broadcast of {d} tensors"),
                backend: rt.device_name(),
            }),
        }
    }
}

/// `x · w` (`x` row-major `m × k`, `w` row-major `k × n`, f32) with `w`'s columns split
/// across the group's ranks: rank `r` holds columns `[r·c, (r+1)·c)` (`c = ceil(n / size)`,
/// the last shard padded with zero columns), computes its `m × c` block, and the blocks are
/// all-gathered and laid side by side. Returns the `m × n` product as rank 0 sees it. Each
/// element is one rank's dot product, so it matches the single-device product within the
/// GEMM's bound ([`crate::linalg::check`]); on one rank it is that product.
pub fn sharded_matmul(
    group: &Collective,
    x: &[f32],
    w: &[f32],
    m: usize,
    k: usize,
    n: usize,
    precision: GemmPrecision,
) -> Result<Vec<f32>> {
    kiln_core::linalg::check_storage::<f32>(precision)?;
    kiln_core::linalg::Gemm::new(m, n, k).validate(x.len(), w.len())?;
    let p = group.size();
    let c = n.div_ceil(p);
    let mut shards = Vec::with_capacity(p);
    for (r, rt) in group.ranks.iter().enumerate() {
        let mut ws = vec![0.0f32; k * c];
        for row in 0..k {
            for j in 0..c {
                let col = r * c + j;
                if col < n {
                    ws[row * c + j] = w[row * n + col];
                }
            }
        }
        let xt = rt.tensor(x, &[m, k])?;
        let wt = rt.tensor_from_vec(ws, &[k, c])?;
        shards.push(xt.matmul(&wt, precision)?);
    }
    let gathered = group.all_gather(&shards)?;
    let g = gathered[0].to_vec::<f32>()?; // [p, m, c]
    let mut out = vec![f32::NAN; m * n];
    for r in 0..p {
        for i in 0..m {
            for j in 0..c {
                let col = r * c + j;
                if col < n {
                    out[i * n + col] = g[(r * m + i) * c + j];
                }
            }
        }
    }
    Ok(out)
}
