//! Device-to-device copies on kiln's stream (`cuMemcpyDtoDAsync`): the copy engine's rate
//! is the memory-bandwidth ceiling `kiln bench` measures every memory-bound kernel against.
#![allow(unsafe_code)]

use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::result;
use kiln_core::backend::check_same_len;
use kiln_core::{Error, Result};

impl CudaBackend {
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
        if src.is_empty() {
            return Ok(());
        }
        let dev = format!("cuda:{}", self.info().desc.ordinal);
        self.stream()
            .context()
            .bind_to_thread()
            .map_err(|e| crate::cuda_err("bind", &dev, e))?;
        let bytes = src.len() * std::mem::size_of::<T>();
        // SAFETY: both blocks hold exactly `len` elements of T (checked equal above), so
        // `bytes` is in range for each; they are distinct allocations (one `&`, one `&mut`);
        // both were allocated on this stream (checked), so a freed block is reused only by
        // work ordered after this copy.
        unsafe { result::memcpy_dtod_async(dst.device_ptr(), src.device_ptr(), bytes, ours) }
            .map_err(|e| crate::cuda_err("cuMemcpyDtoDAsync", &dev, e))
    }
}
