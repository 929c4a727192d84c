//! [`CudaStorage`]: a tensor's elements in a pool block on one device, and the CUDA
//! implementation of [`BackendStorage`] over it.
//!
//! Stream rule (PyTorch's `record_stream`, with the event candle and CuPy keep): a storage
//! is written once, by the op that made it, on that thread's current stream when the op ran
//! ([`CudaBackend::stream`]); its block was allocated on the same stream. An op that reads
//! it on another stream first makes that stream wait for an event recorded on the writer's
//! stream (recorded lazily, on the first such use, so a chain on one stream records none)
//! and records the reading stream on the block, so the block returns to the pool only after
//! the reader's work is done. Reads by the host (`to_host`) wait on the writer's stream and
//! surface an error raised by queued work there, named after the op that made the data.
//!
//! During a graph capture on this thread the cross-stream wait is left out: a capture
//! cannot wait on work outside it, and a graph replays on kiln's main stream, after the
//! work already queued there.

use crate::backend::{lock, CudaBackend};
use crate::copy::Fault;
use crate::ops::{
    Axpy, Cast, Filter2d, Filter3d, Map, MatMul, NdimageLinearData, NdimageLinearExact, SeparableFilter,
    Transpose,
};
use crate::pool::{DeviceBuffer, PinnedBuffer};
use cudarc::driver::{CudaEvent, CudaStream};
use kiln_core::backend::{bf16, check_same_len, f16, Element, MapOp};
use kiln_core::imaging::morphology::BinarySpec;
use kiln_core::imaging::rank::RankSpec;
use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D, Separable};
use kiln_core::linalg::{Gemm, GemmImpl, GemmPrecision};
use kiln_core::storage::{check_cast, unsupported_dtype, BackendStorage, Device};
use kiln_core::{DType, Error, Result};
use std::cell::Cell;
use std::sync::{Arc, Mutex};

thread_local! {
    /// Whether a use on another stream waits for the writer, for ops this thread calls
    /// (always, but for the test that shows the race it prevents: [`set_cross_stream_wait`]).
    static CROSS_STREAM_WAIT: Cell<bool> = const { Cell::new(true) };
}

/// Turn the cross-stream wait off (`false`) or back on for the ops the calling thread
/// queues: only for the test that proves the wait is needed (without it a reader on another
/// stream sees unwritten data). Other threads are never affected.
#[doc(hidden)]
pub fn set_cross_stream_wait(on: bool) {
    CROSS_STREAM_WAIT.with(|c| c.set(on));
}

/// A pool block of one element type.
#[derive(Debug)]
pub enum CudaData {
    /// f32 elements.
    F32(DeviceBuffer<f32>),
    /// f64 elements.
    F64(DeviceBuffer<f64>),
    /// IEEE half elements.
    F16(DeviceBuffer<f16>),
    /// bfloat16 elements.
    BF16(DeviceBuffer<bf16>),
    /// 8-bit unsigned elements.
    U8(DeviceBuffer<u8>),
    /// 16-bit unsigned elements.
    U16(DeviceBuffer<u16>),
}

macro_rules! with_data {
    ($d:expr, |$b:ident| $body:expr) => {
        match $d {
            CudaData::F32($b) => $body,
            CudaData::F64($b) => $body,
            CudaData::F16($b) => $body,
            CudaData::BF16($b) => $body,
            CudaData::U8($b) => $body,
            CudaData::U16($b) => $body,
        }
    };
}

/// A Rust element type a [`CudaStorage`] can hold.
pub trait CudaElement: kiln_core::HasDType + Default + std::fmt::Debug {
    /// Wrap a buffer.
    fn wrap(b: DeviceBuffer<Self>) -> CudaData;
    /// Borrow the buffer, if `d` holds this type.
    fn get(d: &CudaData) -> Option<&DeviceBuffer<Self>>;
}

macro_rules! cuda_element {
    ($t:ty, $v:ident) => {
        impl CudaElement for $t {
            fn wrap(b: DeviceBuffer<Self>) -> CudaData {
                CudaData::$v(b)
            }
            fn get(d: &CudaData) -> Option<&DeviceBuffer<Self>> {
                match d {
                    CudaData::$v(b) => Some(b),
                    _ => None,
                }
            }
        }
    };
}
cuda_element!(f32, F32);
cuda_element!(f64, F64);
cuda_element!(f16, F16);
cuda_element!(bf16, BF16);
cuda_element!(u8, U8);
cuda_element!(u16, U16);

/// Elements on one CUDA device, written once by the op that made them.
pub struct CudaStorage {
    data: CudaData,
    dev: Arc<CudaBackend>,
    /// Recorded on the writer's stream at the first use on another stream.
    ready: Mutex<Option<CudaEvent>>,
    /// The op that wrote the data (for errors surfaced by a later host read).
    op: String,
}

impl std::fmt::Debug for CudaStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaStorage")
            .field("data", &self.data)
            .field("op", &self.op)
            .finish()
    }
}

const FLOATS: &str = "f32, f16, bf16";

impl CudaStorage {
    fn new(dev: &Arc<CudaBackend>, data: CudaData, op: impl Into<String>) -> Self {
        CudaStorage {
            data,
            dev: dev.clone(),
            ready: Mutex::new(None),
            op: op.into(),
        }
    }

    /// An uninitialised storage of `n` elements of `dtype` on the current stream.
    pub fn alloc(dev: &Arc<CudaBackend>, dtype: DType, n: usize, op: &str) -> Result<Self> {
        let data = match dtype {
            DType::F32 => CudaData::F32(dev.alloc(n)?),
            DType::F64 => CudaData::F64(dev.alloc(n)?),
            DType::F16 => CudaData::F16(dev.alloc(n)?),
            DType::BF16 => CudaData::BF16(dev.alloc(n)?),
            DType::U8 => CudaData::U8(dev.alloc(n)?),
            DType::U16 => CudaData::U16(dev.alloc(n)?),
        };
        Ok(Self::new(dev, data, op))
    }

    /// Zeros of `dtype` (a `cuMemsetD8Async` on the current stream).
    pub fn zeros(dev: &Arc<CudaBackend>, dtype: DType, n: usize) -> Result<Self> {
        let s = Self::alloc(dev, dtype, n, "zeros")?;
        with_data!(&s.data, |b| dev.memset_zero(b)?);
        Ok(s)
    }

    /// A copy of host `x` (staged through pinned memory when large; see
    /// [`CudaBackend::upload_into`]). Returns once `x` has been read.
    pub fn from_host<T: CudaElement>(dev: &Arc<CudaBackend>, x: &[T]) -> Result<Self> {
        let b: DeviceBuffer<T> = dev.alloc(x.len())?;
        dev.upload_into(x, &b, dev.stream())?;
        Ok(Self::new(dev, T::wrap(b), "upload"))
    }

    /// A copy of a pinned host buffer, queued (no staging); the buffer is held until the
    /// copy has completed.
    pub fn from_pinned<T: CudaElement>(dev: &Arc<CudaBackend>, x: Arc<PinnedBuffer<T>>) -> Result<Self> {
        let b: DeviceBuffer<T> = dev.alloc(x.len())?;
        dev.upload_pinned_into(x, &b, dev.stream())?;
        Ok(Self::new(dev, T::wrap(b), "upload"))
    }

    /// A storage over device memory another library owns (a DLPack import, no copy): `len`
    /// elements of `dtype` at `ptr`, ready on the current stream ([`CudaBackend::stream`]),
    /// kept alive by `owner` (see [`crate::pool::DevicePool::wrap_external`]: dropping the
    /// storage waits for the kiln streams that used it, then drops `owner`).
    ///
    /// # Safety
    ///
    /// `ptr` must address `len` elements of `dtype`, aligned for it, on `dev`'s device, valid
    /// while `owner` lives, and its data must be ready on `dev.stream()`.
    #[allow(unsafe_code)]
    pub unsafe fn from_external(
        dev: &Arc<CudaBackend>,
        dtype: DType,
        ptr: u64,
        len: usize,
        owner: Box<dyn Send + Sync>,
    ) -> Self {
        let (pool, s) = (dev.pool(), dev.stream());
        // SAFETY: (all six arms) the caller guarantees `ptr` holds `len` elements of `dtype`
        // on this device, valid while `owner` (moved into the buffer) lives.
        let data = unsafe {
            match dtype {
                DType::F32 => CudaData::F32(pool.wrap_external(s, ptr, len, owner)),
                DType::F64 => CudaData::F64(pool.wrap_external(s, ptr, len, owner)),
                DType::F16 => CudaData::F16(pool.wrap_external(s, ptr, len, owner)),
                DType::BF16 => CudaData::BF16(pool.wrap_external(s, ptr, len, owner)),
                DType::U8 => CudaData::U8(pool.wrap_external(s, ptr, len, owner)),
                DType::U16 => CudaData::U16(pool.wrap_external(s, ptr, len, owner)),
            }
        };
        Self::new(dev, data, "dlpack import")
    }

    /// Copy the elements into `out` (same length, same type) and wait for them. An error
    /// raised by queued work surfaces here, naming the op that wrote this storage.
    pub fn to_host<T: CudaElement>(&self, out: &mut [T]) -> Result<()> {
        let b = self.typed::<T>("to_host")?;
        let op = format!("{} (queued on cuda, surfaced when its result was read)", self.op);
        self.dev
            .download_into(b, out, b.stream(), &op)
            .map_err(|e| self.name_queued(e))
    }

    /// A CUDA error met while reading this storage is most likely raised by the queued work
    /// that wrote it (errors of asynchronous work surface at the next call): say so, with
    /// the writer's name, whichever driver call reported it.
    fn name_queued(&self, e: Error) -> Error {
        match e {
            Error::Cuda {
                op,
                device,
                code,
                name,
            } if !op.contains(&self.op) => Error::Cuda {
                op: format!("{op} (reading the result of `{}`, queued earlier)", self.op),
                device,
                code,
                name,
            },
            e => e,
        }
    }

    /// The buffer as `T`, or an error naming both types.
    pub fn typed<T: CudaElement>(&self, op: &str) -> Result<&DeviceBuffer<T>> {
        T::get(&self.data)
            .ok_or_else(|| Error::invalid(op, format!("the tensor holds {}, not {}", self.dtype(), T::DTYPE)))
    }

    /// The block.
    pub fn data(&self) -> &CudaData {
        &self.data
    }

    /// The device.
    pub fn backend(&self) -> &Arc<CudaBackend> {
        &self.dev
    }

    /// The stream whose work writes this storage.
    pub fn stream(&self) -> &Arc<CudaStream> {
        with_data!(&self.data, |b| b.stream())
    }

    /// The op that wrote it.
    pub fn op(&self) -> &str {
        &self.op
    }

    /// The device address of the first element (for DLPack and kernels).
    pub fn device_ptr(&self) -> u64 {
        with_data!(&self.data, |b| b.device_ptr())
    }

    /// Order a use of this storage on `s` after its writer (see the module docs).
    pub fn use_on(&self, s: &Arc<CudaStream>) -> Result<()> {
        let own = self.stream();
        if own.cu_stream() == s.cu_stream() || self.dev.is_capturing_here() {
            return Ok(());
        }
        if !CROSS_STREAM_WAIT.with(|c| c.get()) {
            with_data!(&self.data, |b| b.record_stream(s));
            return Ok(());
        }
        let mut ready = lock(&self.ready);
        if ready.is_none() {
            let ev = self.dev.new_event(false)?;
            ev.record(own).map_err(|e| self.dev.err("cuEventRecord", e))?;
            *ready = Some(ev);
        }
        if let Some(ev) = ready.as_ref() {
            s.wait(ev).map_err(|e| self.dev.err("cuStreamWaitEvent", e))?;
        }
        with_data!(&self.data, |b| b.record_stream(s));
        Ok(())
    }

    /// Record that work queued on `s` (a user's kernel) may have written this storage in
    /// place: its own stream, which host reads and other streams' uses wait on, is made to
    /// wait for `s` as it is now, and the event a cross-stream use waits on is recorded afresh
    /// at the next such use. Nothing to do on the storage's own stream, or while this thread
    /// captures a graph (a graph replays on kiln's main stream, in order).
    pub fn written_on(&self, s: &Arc<CudaStream>) -> Result<()> {
        let own = self.stream();
        if own.cu_stream() == s.cu_stream() || self.dev.is_capturing_here() {
            return Ok(());
        }
        let ev = self.dev.new_event(false)?;
        ev.record(s).map_err(|e| self.dev.err("cuEventRecord", e))?;
        own.wait(&ev).map_err(|e| self.dev.err("cuStreamWaitEvent", e))?;
        *lock(&self.ready) = None;
        Ok(())
    }

    /// Fault injection: a one-element storage whose writer is a kernel that stores through
    /// an invalid address. The launch itself succeeds; the sticky error
    /// (CUDA_ERROR_ILLEGAL_ADDRESS) surfaces at the next host read or synchronisation, and
    /// the context is unusable afterwards: only for tests and supervised workers.
    #[doc(hidden)]
    pub fn inject_illegal_address(dev: &Arc<CudaBackend>) -> Result<Self> {
        let out: DeviceBuffer<f32> = dev.alloc(1)?;
        dev.run(Fault { out: &out })?;
        Ok(Self::new(dev, CudaData::F32(out), "fault_illegal_address"))
    }

    /// Wait on the host until the data is written.
    pub fn synchronize(&self) -> Result<()> {
        let op = format!("{} (queued on cuda, surfaced at synchronize)", self.op);
        self.dev
            .synchronize_stream(self.stream(), &op)
            .map_err(|e| self.name_queued(e))
    }

    fn same_device(&self, other: &CudaStorage, op: &str) -> Result<()> {
        if !Arc::ptr_eq(&self.dev, &other.dev) {
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

    /// The current stream, after ordering it behind every input.
    fn stream_for(&self, inputs: &[&CudaStorage]) -> Result<Arc<CudaStream>> {
        let s = self.dev.stream().clone();
        for i in inputs {
            i.use_on(&s)?;
        }
        Ok(s)
    }

    fn map_t<T: CudaElement + Element>(&self, x: &DeviceBuffer<T>, op: MapOp) -> Result<Self> {
        self.stream_for(&[self])?;
        let mut out: DeviceBuffer<T> = self.dev.alloc(x.len())?;
        self.dev.run(Map { op, x, out: &mut out })?;
        Ok(Self::new(&self.dev, T::wrap(out), op.name()))
    }

    fn axpy_t<T: CudaElement + Element>(&self, a: f32, x: &DeviceBuffer<T>, y: &CudaStorage) -> Result<Self> {
        let yb = y.typed::<T>("axpy")?;
        self.stream_for(&[self, y])?;
        let mut out: DeviceBuffer<T> = self.dev.alloc(x.len())?;
        self.dev.copy_device_any(yb, &mut out)?;
        self.dev.run(Axpy { a, x, y: &mut out })?;
        Ok(Self::new(&self.dev, T::wrap(out), "axpy"))
    }

    fn transpose_t<T: CudaElement + Element>(
        &self,
        x: &DeviceBuffer<T>,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        self.stream_for(&[self])?;
        let mut out: DeviceBuffer<T> = self.dev.alloc(x.len())?;
        self.dev.run(Transpose {
            x,
            rows,
            cols,
            out: &mut out,
        })?;
        Ok(Self::new(&self.dev, T::wrap(out), "transpose"))
    }

    fn matmul_t<T: CudaElement + Element>(
        &self,
        a: &DeviceBuffer<T>,
        b: &CudaStorage,
        g: &Gemm,
        p: GemmPrecision,
        imp: GemmImpl,
    ) -> Result<Self> {
        let bb = b.typed::<T>("gemm")?;
        let len_c = g.validate(a.len(), bb.len())?;
        self.stream_for(&[self, b])?;
        let mut c: DeviceBuffer<T> = self.dev.alloc(len_c)?;
        self.dev.run(MatMul {
            a,
            b: bb,
            c: &mut c,
            gemm: g,
            precision: p,
            imp,
        })?;
        Ok(Self::new(&self.dev, T::wrap(c), "gemm"))
    }
}

impl BackendStorage for CudaStorage {
    fn dtype(&self) -> DType {
        match &self.data {
            CudaData::F32(_) => DType::F32,
            CudaData::F64(_) => DType::F64,
            CudaData::F16(_) => DType::F16,
            CudaData::BF16(_) => DType::BF16,
            CudaData::U8(_) => DType::U8,
            CudaData::U16(_) => DType::U16,
        }
    }

    fn len(&self) -> usize {
        with_data!(&self.data, |b| b.len())
    }

    fn device(&self) -> Device {
        Device::Cuda(self.dev.info().desc.ordinal)
    }

    fn map(&self, op: MapOp) -> Result<Self> {
        op.validate()?;
        match &self.data {
            CudaData::F32(x) => self.map_t(x, op),
            CudaData::F16(x) => self.map_t(x, op),
            CudaData::BF16(x) => self.map_t(x, op),
            _ => Err(unsupported_dtype(op.name(), self.dtype(), FLOATS)),
        }
    }

    fn axpy(&self, a: f32, y: &Self) -> Result<Self> {
        if !a.is_finite() {
            return Err(Error::invalid("axpy", format!("a = {a} must be finite")));
        }
        self.same_device(y, "axpy")?;
        check_same_len("axpy", self.len(), y.len())?;
        if self.dtype() != y.dtype() {
            return Err(Error::invalid(
                "axpy",
                format!("x is {} but y is {}; cast one of them", self.dtype(), y.dtype()),
            ));
        }
        match &self.data {
            CudaData::F32(x) => self.axpy_t(a, x, y),
            CudaData::F16(x) => self.axpy_t(a, x, y),
            CudaData::BF16(x) => self.axpy_t(a, x, y),
            _ => Err(unsupported_dtype("axpy", self.dtype(), FLOATS)),
        }
    }

    fn cast(&self, to: DType) -> Result<Self> {
        check_cast(self.dtype(), to)?;
        self.stream_for(&[self])?;
        let out = Self::alloc(&self.dev, to, self.len(), "cast")?;
        self.dev.run(Cast {
            src: &self.data,
            dst: &out.data,
        })?;
        Ok(out)
    }

    fn transpose(&self, rows: usize, cols: usize) -> Result<Self> {
        match &self.data {
            CudaData::F32(x) => self.transpose_t(x, rows, cols),
            CudaData::F16(x) => self.transpose_t(x, rows, cols),
            CudaData::BF16(x) => self.transpose_t(x, rows, cols),
            _ => Err(unsupported_dtype("transpose", self.dtype(), FLOATS)),
        }
    }

    fn filter2d(
        &self,
        shape: [usize; 3],
        kernel: &Kernel2D,
        mode: BoundaryMode,
        sep: Option<&Separable>,
    ) -> Result<Self> {
        let x = match &self.data {
            CudaData::F32(x) => x,
            _ => return Err(unsupported_dtype("filter2d", self.dtype(), "f32")),
        };
        check_same_len("filter2d", shape.iter().product(), x.len())?;
        self.stream_for(&[self])?;
        let mut out: DeviceBuffer<f32> = self.dev.alloc(x.len())?;
        match sep {
            Some(sep) => self.dev.run(SeparableFilter {
                src: x,
                dst: &mut out,
                shape,
                sep,
                axis_offset: 1,
                mode,
            })?,
            None => self.dev.run(Filter2d {
                src: x,
                dst: &mut out,
                shape,
                kernel,
                mode,
            })?,
        }
        Ok(Self::new(&self.dev, CudaData::F32(out), "filter2d"))
    }

    fn filter3d(
        &self,
        shape: [usize; 3],
        kernel: &Kernel3D,
        mode: BoundaryMode,
        sep: Option<&Separable>,
    ) -> Result<Self> {
        let x = match &self.data {
            CudaData::F32(x) => x,
            _ => return Err(unsupported_dtype("filter3d", self.dtype(), "f32")),
        };
        check_same_len("filter3d", shape.iter().product(), x.len())?;
        self.stream_for(&[self])?;
        let mut out: DeviceBuffer<f32> = self.dev.alloc(x.len())?;
        match sep {
            Some(sep) => self.dev.run(SeparableFilter {
                src: x,
                dst: &mut out,
                shape,
                sep,
                axis_offset: 0,
                mode,
            })?,
            None => self.dev.run(Filter3d {
                src: x,
                dst: &mut out,
                shape,
                kernel,
                mode,
                planes: None,
            })?,
        }
        Ok(Self::new(&self.dev, CudaData::F32(out), "filter3d"))
    }

    fn ndimage_linear(
        &self,
        shape: [usize; 3],
        f: &kiln_core::imaging::linear::LinearFilter,
    ) -> Result<Self> {
        let exact = crate::preview::preview();
        if !matches!(self.dtype(), DType::F32 | DType::F64 | DType::U8 | DType::U16)
            || (self.dtype() == DType::F64 && !exact)
        {
            let takes = if exact {
                "f32, f64, u8, u16"
            } else {
                "f32, u8, u16 (f64 with KILN_GPU_PREVIEW=1)"
            };
            return Err(unsupported_dtype(&f.name, self.dtype(), takes));
        }
        check_same_len(&f.name, shape.iter().product(), self.len())?;
        self.stream_for(&[self])?;
        let mut out = Self::alloc(&self.dev, self.dtype(), self.len(), &f.name)?;
        if exact && matches!(self.dtype(), DType::F32 | DType::F64) {
            // the CPU's double arithmetic, so its bits (scipy's for float32 and float64);
            // a preview until its bitwise test has run on a GPU (crate::preview)
            self.dev.run(NdimageLinearExact {
                src: &self.data,
                dst: &mut out.data,
                shape,
                filter: f,
            })?;
        } else {
            self.dev.run(NdimageLinearData {
                src: &self.data,
                dst: &mut out.data,
                shape,
                filter: f,
            })?;
        }
        Ok(out)
    }

    fn matmul(&self, b: &Self, g: &Gemm, p: GemmPrecision, imp: GemmImpl) -> Result<Self> {
        self.same_device(b, "gemm")?;
        if self.dtype() != b.dtype() {
            return Err(Error::invalid(
                "gemm",
                format!("A is {} but B is {}; cast one of them", self.dtype(), b.dtype()),
            ));
        }
        match &self.data {
            CudaData::F32(a) => self.matmul_t(a, b, g, p, imp),
            CudaData::F16(a) => self.matmul_t(a, b, g, p, imp),
            CudaData::BF16(a) => self.matmul_t(a, b, g, p, imp),
            _ => Err(unsupported_dtype("gemm", self.dtype(), FLOATS)),
        }
    }

    fn rank_filter(&self, shape: [usize; 3], spec: &RankSpec, op: &str) -> Result<Self> {
        self.launch_rank_filter(shape, spec, op)
    }

    fn binary_morph(&self, shape: [usize; 3], spec: &BinarySpec, op: &str) -> Result<Self> {
        self.launch_binary_morph(shape, spec, op)
    }

    fn binary_fill_holes(&self, shape: [usize; 3], spec: &BinarySpec) -> Result<Self> {
        self.launch_fill_holes(shape, spec)
    }
}
