//! Device memory on kiln's streams: device-to-device copies (`cuMemcpyDtoDAsync`, whose
//! copy-engine rate is the memory-bandwidth ceiling `kiln bench` measures every
//! memory-bound kernel against), memsets and NaN-poisoned allocations stay backend methods
//! (pool and driver-copy business, no kernel of kiln's); the dtype conversion ([`Cast`]) and
//! the fault-injection kernel ([`Fault`]) are ops.
#![allow(unsafe_code)]

use crate::kernels::ScalarType;
use crate::launch::Arg;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::storage::CudaData;
use crate::CudaBackend;
use cudarc::driver::result;
use kiln_core::backend::{check_same_len, Element};
use kiln_core::{Error, Result};

impl CudaBackend {
    /// A new device buffer of `n` NaNs of the storage type (an unwritten element is caught).
    pub fn alloc_poisoned_as<T: Element>(&self, n: usize) -> Result<DeviceBuffer<T>> {
        self.upload_slice(&vec![T::from_f32(f32::NAN); n])
    }

    /// Copy `src` into `dst` (same length) on kiln's stream, asynchronously. Both buffers
    /// must have been allocated on kiln's stream ([`CudaBackend::alloc`]).
    pub fn copy_device<T: Copy>(&self, src: &DeviceBuffer<T>, dst: &mut DeviceBuffer<T>) -> Result<()> {
        check_same_len("memcpy_dtod", src.len(), dst.len())?;
        let ours = self.stream().cu_stream();
        if src.stream().cu_stream() != ours || dst.stream().cu_stream() != ours {
            return Err(Error::invalid(
                "memcpy_dtod",
                "both buffers must be allocated on kiln's stream",
            ));
        }
        // the copy itself is copy_device_any's (on the current stream, which is kiln's here)
        self.copy_device_any(src, dst)
    }
}

/// The code `cast_any` (kernels/cast.cu) takes for a dtype.
fn cast_code(d: kiln_core::DType) -> i32 {
    use kiln_core::DType;
    match d {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::F16 => 2,
        DType::BF16 => 3,
        DType::U8 => 4,
        DType::U16 => 5,
    }
}

impl CudaBackend {
    /// Copy `src` into `dst` (same length) on the current stream, asynchronously; the
    /// caller orders `src`'s writer before it (the tensor layer's `use_on`).
    pub fn copy_device_any<T: Copy>(&self, src: &DeviceBuffer<T>, dst: &mut DeviceBuffer<T>) -> Result<()> {
        check_same_len("memcpy_dtod", src.len(), dst.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let stream = self.stream();
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| self.err("cuCtxSetCurrent", e))?;
        src.record_stream(stream);
        dst.record_stream(stream);
        let bytes = src.len() * std::mem::size_of::<T>();
        // SAFETY: both blocks hold exactly `len` elements of T (checked equal), distinct
        // (one `&`, one `&mut`); both are recorded on this stream, so neither block is
        // reused before the copy completes.
        unsafe { result::memcpy_dtod_async(dst.device_ptr(), src.device_ptr(), bytes, stream.cu_stream()) }
            .map_err(|e| self.err("cuMemcpyDtoDAsync", e))
    }

    /// Set every byte of `b` to zero on the current stream, asynchronously.
    pub fn memset_zero<T: Copy>(&self, b: &DeviceBuffer<T>) -> Result<()> {
        if b.is_empty() {
            return Ok(());
        }
        let stream = self.stream();
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| self.err("cuCtxSetCurrent", e))?;
        b.record_stream(stream);
        let bytes = b.len() * std::mem::size_of::<T>();
        // SAFETY: the block holds `bytes` bytes; it is recorded on this stream, so it is not
        // reused before the memset completes.
        unsafe { result::memset_d8_async(b.device_ptr(), 0, bytes, stream.cu_stream()) }
            .map_err(|e| self.err("cuMemsetD8Async", e))
    }
}

/// The parts of a storage the cast kernel takes: its address, length and dtype.
fn parts(d: &CudaData) -> (u64, usize, kiln_core::DType) {
    use kiln_core::DType;
    match d {
        CudaData::F32(b) => (b.device_ptr(), b.len(), DType::F32),
        CudaData::F64(b) => (b.device_ptr(), b.len(), DType::F64),
        CudaData::F16(b) => (b.device_ptr(), b.len(), DType::F16),
        CudaData::BF16(b) => (b.device_ptr(), b.len(), DType::BF16),
        CudaData::U8(b) => (b.device_ptr(), b.len(), DType::U8),
        CudaData::U16(b) => (b.device_ptr(), b.len(), DType::U16),
    }
}

/// Convert every element of `src` into `dst` (same length, any two types) with
/// [`kiln_core::storage::cast_f64`]'s rules, on the current stream.
///
/// Launch: `cast_any`, 256-thread blocks, at most one full wave (the occupancy API's
/// resident blocks per SM × SMs), grid-stride.
pub struct Cast<'a> {
    /// The input.
    pub src: &'a CudaData,
    /// The output, as long as the input, a distinct allocation.
    pub dst: &'a CudaData,
}

impl Op for Cast<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Cast { src, dst } = self;
        let (xp, n, from) = parts(src);
        let (yp, m, to) = parts(dst);
        check_same_len("cast", n, m)?;
        kiln_core::storage::check_cast(from, to)?;
        if n == 0 {
            return Ok(());
        }
        let k = crate::Kernel::CAST_ANY;
        let threads = 256u32;
        let per_sm = u64::from(cuda.resident_blocks_per_sm(k, threads)?);
        let sms = (cuda.info().desc.multiprocessors as u64).max(1);
        let blocks = (n as u64).div_ceil(threads as u64).clamp(1, sms * per_sm) as u32;
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let (n64, fc, tc) = (n as u64, cast_code(from), cast_code(to));
        // Sizes: x holds n elements of `from`'s type and y n elements of `to`'s (checked
        // equal lengths; the codes are the buffers' own types); the kernel touches only
        // indices below n; distinct allocations (a new output); the caller recorded both
        // on this stream.
        let args = [
            Arg::ptr(xp, ScalarType::of_dtype(from)),
            Arg::ptr(yp, ScalarType::of_dtype(to)),
            n64.into(),
            fc.into(),
            tc.into(),
        ];
        cuda.launch(k, cfg, &args)
    }
}

/// Launch the fault-injection kernel (kernels/fault.cu) on the current stream: one block
/// of 32 threads whose invalid store the driver reports as a sticky error.
pub(crate) struct Fault<'a> {
    /// The one element the kernel reads.
    pub out: &'a DeviceBuffer<f32>,
}

impl Op for Fault<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Fault { out } = self;
        let k = crate::Kernel::FAULT_ILLEGAL_ADDRESS;
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        // Deliberately unsafe for the device (an invalid store, which the driver reports as
        // a sticky error); host memory is never touched and `out` holds the one element the
        // kernel reads.
        cuda.launch(k, cfg, &[Arg::buf(out)])
    }
}
