//! DLPack both ways, through dlpark (its structs, capsule handling, export-request parsing
//! and import negotiation: versioned and legacy capsules, the C exchange API).
//!
//! Export (`Tensor.__dlpack__`): the capsule points at the tensor's own memory (never a
//! copy) and owns a clone of the tensor, so the storage lives until the consumer calls the
//! deleter. On CUDA the consumer's stream is made to wait for an event recorded on the
//! stream that wrote the tensor (no host or device-wide synchronisation); when the capsule
//! is released, kiln's writer stream waits for an event recorded on the consumer's stream,
//! so the block is not reused under work the consumer queued before releasing it.
//!
//! Import (`kiln.from_dlpack`): kiln passes its current stream as the consumer stream (the
//! producer makes the data ready there); CUDA memory is wrapped without a copy
//! (`CudaStorage::from_external`, holding the producer's deleter), and so is host memory
//! (`CpuStorage::shared`: a CPU tensor reading the producer's buffer, as the array API's
//! `from_dlpack` asks: reuse the buffer when possible).

use crate::tensor::PyTensor;
use crate::{runtime_on, IntoPy};
use dlpark::ffi::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
};
use dlpark::metadata::Dynamic;
use dlpark::python::{
    consumer::stream, CudaStreamRequest, DlpackExporter, DlpackStream, ExportRequest, ImportRequest,
    StreamArg,
};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use kiln::{DType, Device, Runtime, Storage, Tensor};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::ffi::c_void;
use std::sync::Arc;

/// kiln's dtype as a DLPack type.
pub(crate) fn dl_dtype(d: DType) -> DLDataType {
    let (code, bits) = match d {
        DType::F32 => (DLDataTypeCode::FLOAT, 32),
        DType::F64 => (DLDataTypeCode::FLOAT, 64),
        DType::F16 => (DLDataTypeCode::FLOAT, 16),
        DType::BF16 => (DLDataTypeCode::BFLOAT, 16),
        DType::U8 => (DLDataTypeCode::UINT, 8),
        DType::U16 => (DLDataTypeCode::UINT, 16),
    };
    DLDataType::scalar(code, bits)
}

/// A DLPack type as kiln's dtype, or a TypeError naming what kiln holds.
fn kiln_dtype(t: DLDataType) -> PyResult<DType> {
    let d = match (t.code, t.bits, t.lanes) {
        (DLDataTypeCode::FLOAT, 32, 1) => DType::F32,
        (DLDataTypeCode::FLOAT, 64, 1) => DType::F64,
        (DLDataTypeCode::FLOAT, 16, 1) => DType::F16,
        (DLDataTypeCode::BFLOAT, 16, 1) => DType::BF16,
        (DLDataTypeCode::UINT, 8, 1) => DType::U8,
        (DLDataTypeCode::UINT, 16, 1) => DType::U16,
        _ => {
            return Err(PyTypeError::new_err(format!(
                "unsupported dtype (DLPack code {}, {} bits, {} lanes): kiln holds float32, float64, float16, bfloat16, uint8 and uint16; convert first, e.g. x.astype('float32') or x.to(torch.float32)",
                t.code.0, t.bits, t.lanes
            )))
        }
    };
    Ok(d)
}

/// kiln's device as a DLPack device.
pub(crate) fn dl_device(d: Device) -> DLDevice {
    match d {
        Device::Cpu => DLDevice::CPU,
        Device::Cuda(n) => DLDevice::cuda(n as i32),
    }
}

/// A DLPack device kiln computes on, or a ValueError naming the fix.
fn kiln_device(d: DLDevice) -> PyResult<Device> {
    match d.device_type {
        DLDeviceType::CPU => Ok(Device::Cpu),
        DLDeviceType::CUDA if d.device_id >= 0 => Ok(Device::Cuda(d.device_id as usize)),
        t => Err(PyValueError::new_err(format!(
            "the array is on DLPack device type {} (id {}); kiln computes on the CPU and CUDA devices: move it there first (e.g. x.cpu() or x.cuda())",
            t.0, d.device_id
        ))),
    }
}

/// The consumer stream kiln hands a producer: kiln's current stream on the device.
struct KilnStream(Option<Arc<kiln::device::CudaBackend>>);

// SAFETY: the handle is the backend's current stream (a live CUstream of the device the
// producer reported, owned by the backend, which outlives the `__dlpack__` call), or None
// for host memory, as the protocol asks.
unsafe impl DlpackStream for KilnStream {
    fn as_python_arg(&self, _py: Python<'_>, device: DLDevice) -> PyResult<StreamArg> {
        match (&self.0, device.device_type) {
            (Some(c), DLDeviceType::CUDA) => Ok(stream::cuda(c.stream().cu_stream() as *mut c_void)),
            _ => Ok(stream::none()),
        }
    }

    unsafe fn wait_for_producer(&self, device: DLDevice, producer: *mut c_void) -> PyResult<bool> {
        let Some(c) = &self.0 else { return Ok(false) };
        if device.device_type != DLDeviceType::CUDA {
            return Ok(false);
        }
        let ours = c.stream();
        if ours.cu_stream() as *mut c_void == producer {
            return Ok(true);
        }
        let ev = c.new_event(false).py()?;
        ours.context().bind_to_thread().map_err(cuda_py)?;
        // SAFETY: `producer` is the live stream the producer's exchange API returned for this
        // device (the trait's contract); the event belongs to the same context.
        unsafe { cudarc::driver::result::event::record(ev.cu_event(), producer as _) }.map_err(cuda_py)?;
        ours.wait(&ev).map_err(cuda_py)?;
        Ok(true)
    }
}

fn cuda_py(e: cudarc::driver::DriverError) -> PyErr {
    crate::errors::to_py(kiln::interop::cuda_error("dlpack stream handshake", "cuda", e))
}

/// Import any DLPack producer (or capsule) as a kiln tensor on the device it lives on
/// (`want`: a device the caller requires, else a ValueError). CUDA and host memory are both
/// wrapped without a copy.
pub(crate) fn import(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    want: Option<Device>,
) -> PyResult<(Tensor, Arc<Runtime>)> {
    let type_name = obj.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    if type_name != "PyCapsule" && !obj.hasattr("__dlpack__")? {
        return Err(PyTypeError::new_err(format!(
            "expected a kiln.Tensor or an array with __dlpack__ (torch, cupy, numpy, jax), got {type_name}"
        )));
    }
    let req = ImportRequest::new(obj.as_borrowed())?;
    let device = match req.device() {
        Ok(d) => Some(kiln_device(d)?),
        Err(_) => None, // a capsule or a legacy producer: the device is known after import
    };
    if let (Some(d), Some(w)) = (device, want) {
        if d != w {
            return Err(PyValueError::new_err(format!(
                "the array is on {d} but the runtime computes on {w}; move it first (kiln.asarray(x, device='{w}') copies it)"
            )));
        }
    }
    let rt = match device.or(want) {
        Some(d) => Some(runtime_on(py, d)?),
        None => None,
    };
    let cuda = rt.as_ref().and_then(|r| match r.engine() {
        kiln::Engine::Cuda(c) => Some(c.clone()),
        kiln::Engine::Cpu(_) => None,
    });
    let imported = match (&rt, device) {
        (Some(rt), Some(_)) => {
            // the consumer stream is kiln's current one, also inside `with kiln.Stream`
            let ks = KilnStream(cuda.clone());
            crate::on_stream(rt, || req.import(Some(&ks), None)).py()??
        }
        _ => req.import(None, None)?,
    };
    let view = imported
        .validate()
        .map_err(|e| PyValueError::new_err(format!("invalid DLPack tensor: {e}")))?;
    let dev = kiln_device(view.device())?;
    if let Some(w) = want {
        if dev != w {
            return Err(PyValueError::new_err(format!(
                "the array is on {dev} but the runtime computes on {w}; move it first (kiln.asarray(x, device='{w}') copies it)"
            )));
        }
    }
    let rt = match rt {
        Some(r) if r.device() == dev => r,
        _ => runtime_on(py, dev)?,
    };
    let dtype = kiln_dtype(view.dtype())?;
    let shape: Vec<usize> = view.shape().iter().map(|&d| d as usize).collect();
    if !view.is_compact().unwrap_or(false) {
        return Err(PyValueError::new_err(format!(
            "the array is not C-contiguous (shape {:?}, strides {:?}); kiln takes row-major contiguous data: call x.contiguous() (torch), cupy.ascontiguousarray(x) or numpy.ascontiguousarray(x) first",
            view.shape(),
            view.strides()
        )));
    }
    let n = view.num_elements();
    let base = view.data_ptr() as u64 + view.byte_offset();
    if n > 0 && base % dtype.size_bytes() as u64 != 0 {
        return Err(PyValueError::new_err(format!(
            "the array's data at 0x{base:x} is not aligned for {dtype}; copy it first (x.copy())"
        )));
    }
    let tensor = match (dev, rt.engine()) {
        (Device::Cuda(_), kiln::Engine::Cuda(c)) if n > 0 => {
            let owner: Box<dyn Send + Sync> = Box::new(imported.into_deleter());
            // SAFETY: dlpark validated the descriptor: `base` (data + byte_offset) holds `n`
            // compact elements of `dtype` on this CUDA device (checked equal to the runtime's),
            // aligned (checked above); the producer keeps it valid until `owner` (its deleter)
            // is dropped, and it made the data ready on kiln's current stream (the stream we
            // passed to `__dlpack__`, or the wait in `wait_for_producer`).
            let s = on_stream_storage(&rt, || unsafe {
                kiln::interop::CudaStorage::from_external(c, dtype, base, n, owner)
            })?;
            Tensor::from_parts(Storage::Cuda(s), &shape).py()?
        }
        (Device::Cpu, _) if n > 0 => {
            // Shared, not copied (the array API's from_dlpack reuses the producer's buffer):
            // the tensor reads the producer's memory for as long as it holds the deleter.
            let memory = Arc::new(SharedHost {
                base: base as *const u8,
                len: n * dtype.size_bytes(),
                _owner: Box::new(imported.into_deleter()),
            });
            let s = kiln::interop::CpuStorage::shared(dtype, memory).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "the array's data at 0x{base:x} is not a whole number of aligned {dtype} elements; copy it first (x.copy())"
                ))
            })?;
            Tensor::from_parts(Storage::Cpu(s), &shape).py()?
        }
        _ => rt.zeros(&shape, dtype).py()?,
    };
    Ok((tensor, rt))
}

fn on_stream_storage<R>(rt: &Arc<Runtime>, f: impl FnOnce() -> R) -> PyResult<R> {
    crate::on_stream(rt, f).py()
}

/// A host array imported through DLPack: its memory, kept alive by the producer's deleter.
struct SharedHost {
    base: *const u8,
    len: usize,
    _owner: Box<dyn Send + Sync>,
}

// SAFETY: the memory is plain host bytes that kiln only reads; the producer keeps it at this
// address until the deleter (`_owner`, itself Send + Sync) is dropped with this value.
unsafe impl Send for SharedHost {}
// SAFETY: as for Send: shared reads of host memory from several threads are sound.
unsafe impl Sync for SharedHost {}

impl std::fmt::Debug for SharedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedHost({:p}, {} bytes)", self.base, self.len)
    }
}

impl kiln::interop::ExternalHost for SharedHost {
    fn bytes(&self) -> &[u8] {
        // SAFETY: dlpark validated the descriptor: `len` bytes of compact elements start at
        // `base` in host memory, which the producer keeps valid and in place while its
        // deleter (held in `_owner`) lives, i.e. for as long as `self`.
        unsafe { std::slice::from_raw_parts(self.base, self.len) }
    }
}

/// What a capsule owns: a clone of the tensor (its storage stays alive) and, on CUDA, the
/// consumer's stream, which kiln's writer stream waits for when the capsule is released.
struct ExportOwner {
    tensor: Tensor,
    consumer: Option<usize>,
}

impl Drop for ExportOwner {
    fn drop(&mut self) {
        let (Storage::Cuda(s), Some(consumer)) = (self.tensor.storage(), self.consumer) else {
            return;
        };
        let writer = s.stream();
        if writer.cu_stream() as usize == consumer {
            return;
        }
        // Order the block's reuse (on the writer stream) after the consumer's work so far.
        let ordered = (|| -> Result<(), cudarc::driver::DriverError> {
            writer.context().bind_to_thread()?;
            let ev = writer
                .context()
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?;
            // SAFETY: `consumer` is the stream the consumer passed to `__dlpack__` on this
            // device; if it has been destroyed since, the driver reports an error (handled).
            unsafe { cudarc::driver::result::event::record(ev.cu_event(), consumer as _) }?;
            writer.wait(&ev)
        })();
        if ordered.is_err() {
            // the consumer's stream is gone or unusable: wait for the device instead
            let _ = writer.context().synchronize();
        }
    }
}

/// The export of one tensor, for dlpark's `export_dlpack`.
struct Exporter<'a> {
    tensor: &'a Tensor,
    consumer: std::cell::Cell<Option<usize>>,
}

impl Exporter<'_> {
    fn data_ptr(&self) -> *mut c_void {
        data_ptr(self.tensor)
    }

    fn managed<M: ManagedTensorBase>(&self) -> PyResult<Managed<M>> {
        let shape: Vec<i64> = self.tensor.shape().iter().map(|&d| d as i64).collect();
        let prepared = Dynamic::compact(shape)
            .prepare_as::<M>()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let owner = Box::new(ExportOwner {
            tensor: self.tensor.clone(),
            consumer: self.consumer.get(),
        });
        let mut init = prepared.initialize(owner);
        init.set_data(self.data_ptr())
            .set_device(dl_device(self.tensor.device()))
            .set_dtype(dl_dtype(self.tensor.dtype()));
        // SAFETY: shape and compact strides come from dlpark's builder; the data pointer is
        // the tensor's own storage (CPU Vec or CUDA block), which the owner (a clone of the
        // tensor, dropped by the deleter) keeps alive; the dtype and device are the tensor's.
        Ok(unsafe { init.finish() })
    }
}

impl DlpackExporter for Exporter<'_> {
    fn device(&self) -> DLDevice {
        dl_device(self.tensor.device())
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, _py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        let Storage::Cuda(s) = self.tensor.storage() else {
            return Ok(());
        };
        let consumer = match request.cuda_stream()? {
            CudaStreamRequest::NoSync => return Ok(()),
            // the protocol: no stream given means the legacy default stream
            CudaStreamRequest::Omitted | CudaStreamRequest::LegacyDefault => 1usize,
            CudaStreamRequest::PerThreadDefault => 2usize,
            CudaStreamRequest::Pointer(p) => p,
        };
        self.consumer.set(Some(consumer));
        let writer = s.stream();
        if writer.cu_stream() as usize == consumer {
            return Ok(());
        }
        let dev = s.backend();
        let ev = dev.new_event(false).py()?;
        ev.record(writer).map_err(cuda_py)?;
        writer.context().bind_to_thread().map_err(cuda_py)?;
        // SAFETY: `consumer` is the stream the consumer passed for this device (or a default
        // stream sentinel, a valid handle for the driver API); the event is live and of the
        // same context. The wait is queued on the device: the host does not block.
        unsafe {
            cudarc::driver::result::stream::wait_event(
                consumer as _,
                ev.cu_event(),
                cudarc::driver::sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(cuda_py)?;
        Ok(())
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.managed()
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.managed()
    }
}

/// The address of the tensor's first element (host or device).
pub(crate) fn data_ptr(t: &Tensor) -> *mut c_void {
    match t.storage() {
        Storage::Cuda(s) => s.device_ptr() as *mut c_void,
        Storage::Cpu(c) => {
            use kiln::interop::CpuStorage as C;
            match c {
                C::F32(v) => v.as_ptr() as *mut c_void,
                C::F64(v) => v.as_ptr() as *mut c_void,
                C::F16(v) => v.as_ptr() as *mut c_void,
                C::BF16(v) => v.as_ptr() as *mut c_void,
                C::U8(v) => v.as_ptr() as *mut c_void,
                C::U16(v) => v.as_ptr() as *mut c_void,
            }
        }
    }
}

/// `Tensor.__dlpack__(stream=None, max_version=None, dl_device=None, copy=None)`.
pub(crate) fn export<'py>(
    py: Python<'py>,
    t: &Tensor,
    stream: Option<&Bound<'py, PyAny>>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(u32, i32)>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    if t.device() == Device::Cpu {
        if let Some(s) = stream {
            if !s.is_none() && s.extract::<isize>().ok() != Some(-1) {
                return Err(PyValueError::new_err("stream must be None for a CPU tensor"));
            }
        }
    }
    let request = ExportRequest::parse(stream, max_version, dl_device, copy)?;
    if copy == Some(true) {
        return Err(PyBufferError::new_err(
            "kiln exports without copying (copy=True is not supported): copy on the consumer side, or t.to('cpu') for a host copy",
        ));
    }
    let ex = Exporter {
        tensor: t,
        consumer: std::cell::Cell::new(None),
    };
    dlpark::python::export_dlpack(&ex, py, request)
}

/// `from_dlpack(x, device=None)`: a kiln tensor over `x`'s memory (no copy, on a CUDA
/// device or the host).
#[pyfunction]
#[pyo3(signature = (x, device = None))]
fn from_dlpack(py: Python<'_>, x: &Bound<'_, PyAny>, device: Option<&str>) -> PyResult<PyTensor> {
    if let Ok(t) = x.cast::<PyTensor>() {
        return Ok(t.get().clone_ref());
    }
    let want = match device {
        Some(d) => Some(crate::runtime_for(py, d)?.device()),
        None => None,
    };
    let (t, rt) = import(py, x, want)?;
    Ok(PyTensor::new(t, rt))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    Ok(())
}
