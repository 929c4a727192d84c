//! [`Tensor`]: an n-d array on one device, the unit every op of the facade takes and
//! returns.
//!
//! A tensor is a shape (row-major, contiguous) over a shared storage (`Arc`: `clone` is
//! cheap and never copies data). The storage is an enum of the backends' storages, CPU
//! (`kiln_cpu::CpuStorage`) or CUDA (`kiln_cuda::CudaStorage`, a pool block), dispatched
//! with a `match` (candle's `Storage{Cpu,Cuda}` pattern); each backend implements
//! [`BackendStorage`], and every op reaches its backend's method through the dispatch
//! macros defined here (`on_storage!`, `on_storage2!`). Ops on a CUDA tensor are queued on
//! the calling thread's current stream ([`Runtime::with_stream`]) and return at once; a
//! chain of ops never leaves the device. Host reads ([`Tensor::to_vec`]) wait for the
//! data, and an error raised by queued work surfaces there, named after the op that wrote
//! the data and classified ([`Error::is_sticky`]). Use on another stream waits on an event
//! of the writer's stream, and a block returns to the pool only after the last reader's
//! work (see `kiln_cuda::storage`).
//!
//! ```no_run
//! use kiln::{Runtime, Tensor};
//! let rt = Runtime::cpu();
//! let x = rt.tensor(&[0.0f32, 1.0, -1.0, 2.0], &[2, 2])?;
//! let y = x.sigmoid()?.transpose()?.clamp(0.3, 0.7)?;
//! assert_eq!(y.shape(), &[2, 2]);
//! let host: Vec<f32> = y.to_vec()?;
//! # Ok::<(), kiln::Error>(())
//! ```

use crate::{Engine, Runtime};
use kiln_core::storage::BackendStorage;
use kiln_core::{DType, Device, Error, Result};
use kiln_cpu::{CpuStorage, StorageElement};
use kiln_cuda::{CudaElement, CudaStorage};
use std::sync::Arc;

/// A Rust element type a tensor can hold: `f32`, `f64`, [`f16`](half::f16),
/// [`bf16`](half::bf16), `u8`, `u16`.
pub trait TensorElement: StorageElement + CudaElement {}
impl<T: StorageElement + CudaElement> TensorElement for T {}

/// A floating-point storage type of the element-wise ops and transposes (`f32`, `f16`,
/// `bf16`; f32 arithmetic), usable in tensors.
pub trait FloatElement: kiln_core::backend::Element + TensorElement {}
impl<T: kiln_core::backend::Element + TensorElement> FloatElement for T {}

/// A tensor's storage: host memory or a CUDA pool block.
#[derive(Debug)]
pub enum Storage {
    /// On the CPU.
    Cpu(CpuStorage),
    /// On a CUDA device.
    Cuda(CudaStorage),
}

/// Run `$body` with `$s` bound to the backend storage of `$storage` (a `&Storage`:
/// `CpuStorage` or `CudaStorage`, both [`BackendStorage`]) and return its value: the one
/// dispatch of a storage query (dtype, length, device).
macro_rules! storage_value {
    ($storage:expr, |$s:ident| $body:expr) => {
        match $storage {
            $crate::tensor::Storage::Cpu($s) => $body,
            $crate::tensor::Storage::Cuda($s) => $body,
        }
    };
}

/// Run `$body` with `$s` bound to tensor `$t`'s backend storage and wrap the storage it
/// returns in the same variant: the one dispatch of a tensor op to its backend's
/// [`BackendStorage`] method.
macro_rules! on_storage {
    ($t:expr, |$s:ident| $body:expr) => {
        match $t.storage() {
            $crate::tensor::Storage::Cpu($s) => $crate::tensor::Storage::Cpu($body),
            $crate::tensor::Storage::Cuda($s) => $crate::tensor::Storage::Cuda($body),
        }
    };
}

/// [`on_storage!`] for an op of two tensors, which must be on one device (an error naming
/// `$op` otherwise).
macro_rules! on_storage2 {
    ($a:expr, $b:expr, $op:expr, |$x:ident, $y:ident| $body:expr) => {
        match ($a.storage(), $b.storage()) {
            ($crate::tensor::Storage::Cpu($x), $crate::tensor::Storage::Cpu($y)) => {
                $crate::tensor::Storage::Cpu($body)
            }
            ($crate::tensor::Storage::Cuda($x), $crate::tensor::Storage::Cuda($y)) => {
                $crate::tensor::Storage::Cuda($body)
            }
            _ => {
                // a CPU and a CUDA storage: the devices differ, so this returns the error
                $a.check_same_device($b, $op)?;
                return Err(kiln_core::Error::invalid(
                    $op,
                    "operands are on different backends",
                ));
            }
        }
    };
}

pub(crate) use {on_storage, on_storage2};

impl Storage {
    pub(crate) fn dtype(&self) -> DType {
        storage_value!(self, |s| s.dtype())
    }

    pub(crate) fn device(&self) -> Device {
        storage_value!(self, |s| s.device())
    }

    pub(crate) fn len(&self) -> usize {
        storage_value!(self, |s| s.len())
    }
}

/// An n-d array of one dtype on one device. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct Tensor {
    storage: Arc<Storage>,
    shape: Vec<usize>,
}

fn numel(op: &str, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| {
            Error::invalid(
                op,
                format!("shape {shape:?} has more elements than fit in memory"),
            )
        })
}

impl Tensor {
    pub(crate) fn from_storage(storage: Storage, shape: Vec<usize>) -> Self {
        Tensor {
            storage: Arc::new(storage),
            shape,
        }
    }

    /// A result of an op on `self`, with a new storage and shape.
    pub(crate) fn derive(&self, storage: Storage, shape: Vec<usize>) -> Self {
        Self::from_storage(storage, shape)
    }

    /// A tensor of `shape` over `storage`, which must hold exactly the shape's elements: for
    /// front ends that wrap memory they imported (kiln-py's DLPack import).
    pub fn from_parts(storage: Storage, shape: &[usize]) -> Result<Tensor> {
        let n = numel("tensor", shape)?;
        kiln_core::backend::check_same_len("tensor", n, storage.len())?;
        Ok(Self::from_storage(storage, shape.to_vec()))
    }

    /// The storage.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The shape (row-major).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.storage.dtype()
    }

    /// Where it lives (`cpu`, `cuda:N`).
    pub fn device(&self) -> Device {
        self.storage.device()
    }

    /// Bytes of element data.
    pub fn size_bytes(&self) -> usize {
        self.len() * self.dtype().size_bytes()
    }

    /// The same data viewed with another shape of the same number of elements (no copy).
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        let n = numel("reshape", shape)?;
        if n != self.len() {
            return Err(Error::ShapeMismatch {
                op: "reshape".into(),
                expected: self.shape.clone(),
                got: shape.to_vec(),
            });
        }
        Ok(Tensor {
            storage: self.storage.clone(),
            shape: shape.to_vec(),
        })
    }

    /// A copy on `rt`'s device (the same tensor, not copied, when it is already there).
    /// Host to device copies of more than a few MiB are staged through pinned memory in
    /// chunks, host copies overlapped with DMA.
    pub fn to_device(&self, rt: &Runtime) -> Result<Tensor> {
        if self.device() == rt.device() {
            return Ok(self.clone());
        }
        let storage = match (&*self.storage, rt.engine()) {
            (Storage::Cpu(c), Engine::Cuda(dev)) => Storage::Cuda(kiln_cpu::with_cpu_storage!(c, |v| {
                CudaStorage::from_host(dev, v)?
            })),
            (Storage::Cuda(_), Engine::Cpu(_)) => Storage::Cpu(self.to_cpu_storage()?),
            (Storage::Cuda(_), Engine::Cuda(_)) => {
                // device to device through the host: kiln has no peer copies yet
                let host = self.to_cpu_storage()?;
                let t = Tensor::from_storage(Storage::Cpu(host), self.shape.clone());
                return t.to_device(rt);
            }
            (Storage::Cpu(_), Engine::Cpu(_)) => return Ok(self.clone()),
        };
        Ok(Tensor::from_storage(storage, self.shape.clone()))
    }

    fn to_cpu_storage(&self) -> Result<CpuStorage> {
        match &*self.storage {
            Storage::Cpu(c) => Ok(c.clone()),
            Storage::Cuda(g) => Ok(match g.dtype() {
                DType::F32 => CpuStorage::F32(download(g)?.into()),
                DType::F64 => CpuStorage::F64(download(g)?.into()),
                DType::F16 => CpuStorage::F16(download(g)?.into()),
                DType::BF16 => CpuStorage::BF16(download(g)?.into()),
                DType::U8 => CpuStorage::U8(download(g)?.into()),
                DType::U16 => CpuStorage::U16(download(g)?.into()),
            }),
        }
    }

    /// A copy in host memory (waits for queued work; see the [module docs](self)).
    pub fn to_cpu(&self) -> Result<Tensor> {
        if self.device() == Device::Cpu {
            return Ok(self.clone());
        }
        Ok(Tensor::from_storage(
            Storage::Cpu(self.to_cpu_storage()?),
            self.shape.clone(),
        ))
    }

    /// The elements in a new host vector (waits for queued work). `T` must be the dtype.
    pub fn to_vec<T: TensorElement>(&self) -> Result<Vec<T>> {
        self.check_dtype::<T>("to_vec")?;
        match &*self.storage {
            Storage::Cpu(c) => Ok(c.as_slice::<T>().map(<[T]>::to_vec).unwrap_or_default()),
            Storage::Cuda(g) => download(g),
        }
    }

    /// Copy the elements into `out` (same length; waits for queued work).
    pub fn to_host_into<T: TensorElement>(&self, out: &mut [T]) -> Result<()> {
        self.check_dtype::<T>("to_host_into")?;
        kiln_core::backend::check_same_len("to_host_into", self.len(), out.len())?;
        match &*self.storage {
            Storage::Cpu(c) => {
                if let Some(s) = c.as_slice::<T>() {
                    kiln_cuda::transfer::par_copy(out, s);
                }
                Ok(())
            }
            Storage::Cuda(g) => g.to_host(out),
        }
    }

    /// The elements of a CPU tensor, borrowed (an error on a device tensor: use
    /// [`Tensor::to_vec`] or [`Tensor::to_cpu`]).
    pub fn as_slice<T: TensorElement>(&self) -> Result<&[T]> {
        self.check_dtype::<T>("as_slice")?;
        match &*self.storage {
            Storage::Cpu(c) => c
                .as_slice::<T>()
                .ok_or_else(|| Error::invalid("as_slice", "dtype mismatch")),
            Storage::Cuda(_) => Err(Error::invalid(
                "as_slice",
                format!(
                    "the tensor is on {}; read it with to_vec() or move it with to_cpu()",
                    self.device()
                ),
            )),
        }
    }

    /// Wait on the host until the tensor's data is written (a no-op on the CPU). An error
    /// raised by queued work surfaces here, named.
    pub fn synchronize(&self) -> Result<()> {
        match &*self.storage {
            Storage::Cpu(_) => Ok(()),
            Storage::Cuda(g) => g.synchronize(),
        }
    }

    /// Error unless the dtype is `T`'s.
    pub(crate) fn check_dtype<T: TensorElement>(&self, op: &str) -> Result<()> {
        if self.dtype() != T::DTYPE {
            return Err(Error::invalid(
                op,
                format!(
                    "the tensor holds {}, not {}; convert with cast({})",
                    self.dtype(),
                    T::DTYPE,
                    T::DTYPE
                ),
            ));
        }
        Ok(())
    }

    /// Error unless `self` and `other` are on the same device.
    pub(crate) fn check_same_device(&self, other: &Tensor, op: &str) -> Result<()> {
        if self.device() != other.device() {
            return Err(Error::invalid(
                op,
                format!(
                    "operands are on {} and {}; move one with to_device",
                    self.device(),
                    other.device()
                ),
            ));
        }
        Ok(())
    }
}

impl Runtime {
    /// The device this runtime computes on.
    pub fn device(&self) -> Device {
        match self.engine() {
            Engine::Cpu(_) => Device::Cpu,
            Engine::Cuda(c) => Device::Cuda(c.info().desc.ordinal),
        }
    }

    /// A tensor of `shape` on this runtime's device holding a copy of `data` (row-major).
    pub fn tensor<T: TensorElement>(&self, data: &[T], shape: &[usize]) -> Result<Tensor> {
        let n = numel("tensor", shape)?;
        kiln_core::backend::check_same_len("tensor", n, data.len())?;
        let storage = match self.engine() {
            Engine::Cpu(_) => Storage::Cpu(T::into_storage(data.to_vec())),
            Engine::Cuda(dev) => Storage::Cuda(CudaStorage::from_host(dev, data)?),
        };
        Ok(Tensor::from_storage(storage, shape.to_vec()))
    }

    /// A tensor that takes ownership of `data` (no copy on the CPU).
    pub fn tensor_from_vec<T: TensorElement>(&self, data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        match self.engine() {
            Engine::Cpu(_) => {
                let n = numel("tensor", shape)?;
                kiln_core::backend::check_same_len("tensor", n, data.len())?;
                Ok(Tensor::from_storage(
                    Storage::Cpu(T::into_storage(data)),
                    shape.to_vec(),
                ))
            }
            Engine::Cuda(_) => self.tensor(&data, shape),
        }
    }

    /// A page-locked (pinned) host buffer of `n` elements from the device's pinned pool: the
    /// DMA engines read and write it directly, so copies run at the link's full speed (55
    /// GB/s on the H200 machine against ~40 for kiln's staged pageable copies and ~8 for
    /// plain pageable ones). An error on the CPU runtime.
    pub fn pinned<T: TensorElement>(&self, n: usize) -> Result<kiln_cuda::pool::PinnedBuffer<T>> {
        match self.engine() {
            Engine::Cuda(dev) => dev.pinned_pool().alloc::<T>(n),
            Engine::Cpu(_) => Err(Error::Unsupported {
                op: "pinned host memory (it exists for copies to a GPU)".into(),
                backend: "cpu".into(),
            }),
        }
    }

    /// A device tensor from a pinned buffer: the copy is queued without staging and the
    /// buffer is held (the `Arc`) until it has been read.
    pub fn tensor_from_pinned<T: TensorElement>(
        &self,
        data: Arc<kiln_cuda::pool::PinnedBuffer<T>>,
        shape: &[usize],
    ) -> Result<Tensor> {
        let n = numel("tensor", shape)?;
        kiln_core::backend::check_same_len("tensor", n, data.len())?;
        match self.engine() {
            Engine::Cuda(dev) => Ok(Tensor::from_storage(
                Storage::Cuda(CudaStorage::from_pinned(dev, data)?),
                shape.to_vec(),
            )),
            Engine::Cpu(_) => self.tensor(&data, shape),
        }
    }

    /// `out = op(x)` between pinned buffers, streamed through the device in chunks on three
    /// streams with uploads, kernels and downloads overlapped (both directions of the link
    /// at once); bit for bit the tensor op.
    pub fn map_pinned<T: FloatElement>(
        &self,
        op: kiln_core::backend::MapOp,
        x: &kiln_cuda::pool::PinnedBuffer<T>,
        out: &mut kiln_cuda::pool::PinnedBuffer<T>,
    ) -> Result<()> {
        match self.engine() {
            Engine::Cuda(dev) => dev
                .map_pipelined_pinned(op, x, out, Default::default())
                .map(|_| ()),
            Engine::Cpu(_) => self.map_into(op, x, out),
        }
    }

    /// Fault injection: a one-element CUDA tensor whose writing kernel stores through an
    /// invalid address; reading it fails with a sticky error and the context is poisoned
    /// for the life of the process. For tests of error surfacing and supervised workers.
    #[doc(hidden)]
    pub fn inject_illegal_address(&self) -> Result<Tensor> {
        match self.engine() {
            Engine::Cuda(dev) => Ok(Tensor::from_storage(
                Storage::Cuda(CudaStorage::inject_illegal_address(dev)?),
                vec![1],
            )),
            Engine::Cpu(_) => Err(Error::Unsupported {
                op: "fault injection".into(),
                backend: "cpu".into(),
            }),
        }
    }

    /// Zeros of `dtype` and `shape` on this runtime's device.
    pub fn zeros(&self, shape: &[usize], dtype: DType) -> Result<Tensor> {
        let n = numel("zeros", shape)?;
        let storage = match self.engine() {
            Engine::Cpu(_) => Storage::Cpu(CpuStorage::zeros(dtype, n)),
            Engine::Cuda(dev) => Storage::Cuda(CudaStorage::zeros(dev, dtype, n)?),
        };
        Ok(Tensor::from_storage(storage, shape.to_vec()))
    }
}

/// A device storage's elements in a new host vector (waits for queued work).
fn download<T: TensorElement>(g: &CudaStorage) -> Result<Vec<T>> {
    kiln_cuda::transfer::host_vec_then(g.len(), |out| g.to_host(out))
}
